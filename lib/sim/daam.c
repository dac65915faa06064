/* DAAM: the Gaussian gate of the Density Adaptive Attention Mechanism as a
 * similarity, with the heads as parents.
 *
 *   y_ihj = (x_ij - (m + delta_hj)) / sqrt(v + eps)
 *   S_ih  = sum_j -y_ihj^2 / (2 c_h^2) = log prod_j g_ihj
 *
 * m, v: mean and population variance over the chosen axis, either each
 * child row over its d features (LSE_DAAM_FEATURES: m_i, v_i) or each
 * feature over all child rows (LSE_DAAM_ROWS: m_j, v_j). Child gradients
 * include the dependence of m and v on the children. Derivation:
 * docs/sim-dar-daam.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

static const lse_daam_config daam_default = {.axis = LSE_DAAM_FEATURES,
                                             .eps = 1e-5};

static const char *const daam_param_names[] = {"c"};

typedef struct daam_work {
    size_t rows, n_child, n_head, d;
    gsl_matrix *z;  /* (rows, d): x - m */
    gsl_matrix *zd; /* (rows, H): Z Delta' (scaled for ROWS) */
    gsl_matrix *sm; /* (rows, H): S inside grad */
    gsl_matrix *bm; /* (rows, H): B, see docs */
    gsl_matrix *dm; /* (rows, d): scaled Z (eval, ROWS), D (grad) */
    gsl_matrix *em; /* (H, d): scaled Delta (eval, ROWS), B' Z (grad) */
    double *var;    /* (max(rows, d)): v + eps per row or per column */
    double *aux;    /* (max(rows, d)) */
    double *rs;     /* (rows): row sums of B */
    double *cs;     /* (H): column sums of B, then |delta_h|^2 */
} daam_work;

static const lse_daam_config *daam_config(const void *config)
{
    return config != NULL ? (const lse_daam_config *)config : &daam_default;
}

static lse_status daam_check(const lse_sim_shape *shape, const void *config,
                             char *msg, size_t msg_len)
{
    const lse_daam_config *cfg = daam_config(config);
    if (shape == NULL) {
        snprintf(msg, msg_len, "daam: NULL shape");
        return LSE_EFAULT;
    }
    if (shape->d_child != shape->d_parent) {
        snprintf(msg, msg_len,
                 "daam: child has %zu columns, head offsets (parent) %zu",
                 shape->d_child, shape->d_parent);
        return LSE_EDIM;
    }
    if (shape->d_child == 0) {
        snprintf(msg, msg_len, "daam: vectors have 0 columns");
        return LSE_EDIM;
    }
    if (shape->d_context != 0) {
        snprintf(msg, msg_len, "daam: takes no context (got %zu columns)",
                 shape->d_context);
        return LSE_EDIM;
    }
    if (shape->n_param != 1 || shape->param_rows == NULL ||
        shape->param_cols == NULL) {
        snprintf(msg, msg_len, "daam: one parameter 'c' expected (got %zu)",
                 shape->n_param);
        return LSE_EINVAL;
    }
    if (shape->param_rows[0] != shape->n_parent || shape->param_cols[0] != 1) {
        snprintf(msg, msg_len,
                 "daam: parameter 'c' is %zux%zu, expected %zux1 (one "
                 "width per head)",
                 shape->param_rows[0], shape->param_cols[0], shape->n_parent);
        return LSE_EDIM;
    }
    if (cfg->axis != LSE_DAAM_FEATURES && cfg->axis != LSE_DAAM_ROWS) {
        snprintf(msg, msg_len, "daam: unknown axis %d", (int)cfg->axis);
        return LSE_EINVAL;
    }
    if (!isfinite(cfg->eps) || !(cfg->eps > 0.0)) {
        snprintf(msg, msg_len, "daam: eps = %g must be finite and > 0",
                 cfg->eps);
        return LSE_EDOM;
    }
    if (cfg->axis == LSE_DAAM_ROWS) {
        if (shape->n_child == 0) {
            snprintf(msg, msg_len,
                     "daam: axis 'rows' needs at least one child row");
            return LSE_EDIM;
        }
        if (shape->block < shape->n_child) {
            snprintf(msg, msg_len,
                     "daam: axis 'rows' needs all %zu child rows in one "
                     "block (got %zu)",
                     shape->n_child, shape->block);
            return LSE_EINVAL;
        }
    }
    return LSE_OK;
}

static void daam_work_free(void *work)
{
    daam_work *w = work;
    if (w == NULL)
        return;
    gsl_matrix_free(w->z);
    gsl_matrix_free(w->zd);
    gsl_matrix_free(w->sm);
    gsl_matrix_free(w->bm);
    gsl_matrix_free(w->dm);
    gsl_matrix_free(w->em);
    free(w->var);
    free(w->aux);
    free(w->rs);
    free(w->cs);
    free(w);
}

static lse_status daam_work_new(const lse_sim_shape *shape, const void *config,
                                void **out)
{
    (void)config; /* sized for either axis */
    if (shape == NULL || out == NULL)
        return LSE_EFAULT;
    *out = NULL;
    {
        const size_t r = shape->block > shape->n_child ? shape->block
                                                       : shape->n_child;
        if (LSE_SIZE_PAIRS_OVERFLOW(r, shape->d_child, r, shape->n_parent,
                                    shape->n_parent, shape->d_child))
            return LSE_ENOMEM;
    }
    daam_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->rows = shape->block > shape->n_child ? shape->block : shape->n_child;
    w->n_child = shape->n_child;
    w->n_head = shape->n_parent;
    w->d = shape->d_child;
    /* GSL refuses zero-sized matrices; kernels return early when empty */
    const size_t r = w->rows > 0 ? w->rows : 1;
    const size_t h = w->n_head > 0 ? w->n_head : 1;
    const size_t d = w->d > 0 ? w->d : 1;
    const size_t rd = r > d ? r : d;
    w->z = gsl_matrix_alloc(r, d);
    w->zd = gsl_matrix_alloc(r, h);
    w->sm = gsl_matrix_alloc(r, h);
    w->bm = gsl_matrix_alloc(r, h);
    w->dm = gsl_matrix_alloc(r, d);
    w->em = gsl_matrix_alloc(h, d);
    w->var = malloc(rd * sizeof *w->var);
    w->aux = malloc(rd * sizeof *w->aux);
    w->rs = malloc(r * sizeof *w->rs);
    w->cs = malloc(h * sizeof *w->cs);
    if (w->z == NULL || w->zd == NULL || w->sm == NULL || w->bm == NULL ||
        w->dm == NULL || w->em == NULL || w->var == NULL || w->aux == NULL ||
        w->rs == NULL || w->cs == NULL) {
        daam_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

/* Views of the workspace for b child rows. */
typedef struct daam_views {
    gsl_matrix_view z, zd, sm, bm, dm, em;
} daam_views;

static daam_views daam_views_make(daam_work *w, size_t b)
{
    const size_t h = w->n_head, d = w->d;
    daam_views v;
    v.z = gsl_matrix_submatrix(w->z, 0, 0, b, d);
    v.zd = gsl_matrix_submatrix(w->zd, 0, 0, b, h);
    v.sm = gsl_matrix_submatrix(w->sm, 0, 0, b, h);
    v.bm = gsl_matrix_submatrix(w->bm, 0, 0, b, h);
    v.dm = gsl_matrix_submatrix(w->dm, 0, 0, b, d);
    v.em = gsl_matrix_submatrix(w->em, 0, 0, h, d);
    return v;
}

/* Checks operands against the workspace and the gate widths. */
static lse_status daam_operands(const lse_sim_args *a, const daam_work *w,
                                const lse_daam_config *cfg)
{
    if (a->child == NULL || a->parent == NULL || a->param == NULL)
        return LSE_EFAULT;
    const gsl_matrix *c = a->param[0];
    if (c == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1;
    if (a->child->size2 != w->d || a->parent->size2 != w->d ||
        a->parent->size1 != w->n_head || c->size1 != w->n_head ||
        c->size2 != 1 || b > w->rows)
        return LSE_EDIM;
    if (cfg->axis == LSE_DAAM_ROWS && b != w->n_child)
        return LSE_EDIM; /* the statistics need every child row */
    if (!(cfg->eps > 0.0))
        return LSE_EDOM;
    for (size_t h = 0; h < w->n_head; h++) {
        const double ch = gsl_matrix_get(c, h, 0);
        if (!isfinite(ch))
            return LSE_ENONFINITE;
        if (ch == 0.0)
            return LSE_EDOM;
    }
    return LSE_OK;
}

/* Z = x - m and var = v + eps over the configured axis. */
static lse_status daam_stats(const gsl_matrix *x, const lse_daam_config *cfg,
                             daam_work *w, gsl_matrix *z)
{
    const size_t b = x->size1, d = x->size2;
    if (cfg->axis == LSE_DAAM_FEATURES) {
        for (size_t i = 0; i < b; i++) {
            double m = 0.0;
            for (size_t k = 0; k < d; k++)
                m += gsl_matrix_get(x, i, k);
            m /= (double)d;
            double v = 0.0;
            for (size_t k = 0; k < d; k++) {
                const double zk = gsl_matrix_get(x, i, k) - m;
                gsl_matrix_set(z, i, k, zk);
                v += zk * zk;
            }
            w->var[i] = v / (double)d + cfg->eps;
            if (!isfinite(w->var[i]))
                return LSE_ENONFINITE;
        }
        return LSE_OK;
    }
    for (size_t k = 0; k < d; k++)
        w->aux[k] = 0.0;
    for (size_t i = 0; i < b; i++)
        for (size_t k = 0; k < d; k++)
            w->aux[k] += gsl_matrix_get(x, i, k);
    for (size_t k = 0; k < d; k++) {
        w->aux[k] /= (double)b;
        w->var[k] = 0.0;
    }
    for (size_t i = 0; i < b; i++) {
        for (size_t k = 0; k < d; k++) {
            const double zk = gsl_matrix_get(x, i, k) - w->aux[k];
            gsl_matrix_set(z, i, k, zk);
            w->var[k] += zk * zk;
        }
    }
    for (size_t k = 0; k < d; k++) {
        w->var[k] = w->var[k] / (double)b + cfg->eps;
        if (!isfinite(w->var[k]))
            return LSE_ENONFINITE;
    }
    return LSE_OK;
}

static double row_sq(const gsl_matrix *m, size_t i)
{
    double s = 0.0;
    for (size_t k = 0; k < m->size2; k++) {
        const double v = gsl_matrix_get(m, i, k);
        s += v * v;
    }
    return s;
}

/* Statistics into the workspace and S (b, H) into s. Operands checked. */
static lse_status daam_scores(const lse_sim_args *a, const lse_daam_config *cfg,
                              daam_work *w, daam_views *v, gsl_matrix *s)
{
    const gsl_matrix *delta = a->parent; /* (H, d) */
    const gsl_matrix *c = a->param[0];   /* (H, 1) */
    const size_t b = a->child->size1, nh = w->n_head, d = w->d;
    const gsl_matrix *z = &v->z.matrix;
    lse_status st = daam_stats(a->child, cfg, w, &v->z.matrix);
    if (st != LSE_OK)
        return st;
    int rc;
    if (cfg->axis == LSE_DAAM_FEATURES) {
        /* S_ih = -(|z_i|^2 - 2 z_i.delta_h + |delta_h|^2) / (2 c_h^2 V_i) */
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, z, delta, 0.0,
                            &v->zd.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t h = 0; h < nh; h++)
            w->cs[h] = row_sq(delta, h);
        for (size_t i = 0; i < b; i++) {
            const double zz = row_sq(z, i);
            for (size_t h = 0; h < nh; h++) {
                const double ch = gsl_matrix_get(c, h, 0);
                double q =
                    zz - 2.0 * gsl_matrix_get(&v->zd.matrix, i, h) + w->cs[h];
                if (q < 0.0)
                    q = 0.0; /* rounding: q is a sum of squares */
                gsl_matrix_set(s, i, h, -q / (2.0 * ch * ch * w->var[i]));
            }
        }
        return LSE_OK;
    }
    /* ROWS: Zs = Z diag(V)^-1/2, Ds = Delta diag(V)^-1/2,
     * S_ih = -(|zs_i|^2 - 2 zs_i.ds_h + |ds_h|^2) / (2 c_h^2) */
    gsl_matrix *zs = &v->dm.matrix, *ds = &v->em.matrix;
    for (size_t k = 0; k < d; k++) {
        const double inv = 1.0 / sqrt(w->var[k]);
        for (size_t i = 0; i < b; i++)
            gsl_matrix_set(zs, i, k, gsl_matrix_get(z, i, k) * inv);
        for (size_t h = 0; h < nh; h++)
            gsl_matrix_set(ds, h, k, gsl_matrix_get(delta, h, k) * inv);
    }
    rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, zs, ds, 0.0,
                        &v->zd.matrix);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    for (size_t h = 0; h < nh; h++)
        w->cs[h] = row_sq(ds, h);
    for (size_t i = 0; i < b; i++) {
        const double zz = row_sq(zs, i);
        for (size_t h = 0; h < nh; h++) {
            const double ch = gsl_matrix_get(c, h, 0);
            double q =
                zz - 2.0 * gsl_matrix_get(&v->zd.matrix, i, h) + w->cs[h];
            if (q < 0.0)
                q = 0.0;
            gsl_matrix_set(s, i, h, -q / (2.0 * ch * ch));
        }
    }
    return LSE_OK;
}

static lse_status daam_eval(const lse_sim_args *a, gsl_matrix *s)
{
    if (a == NULL || s == NULL)
        return LSE_EFAULT;
    daam_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    const lse_daam_config *cfg = daam_config(a->config);
    lse_status st = daam_operands(a, w, cfg);
    if (st != LSE_OK)
        return st;
    const size_t b = a->child->size1;
    if (s->size1 != b || s->size2 != w->n_head)
        return LSE_EDIM;
    if (b == 0 || w->n_head == 0)
        return LSE_OK;
    daam_views v = daam_views_make(w, b);
    return daam_scores(a, cfg, w, &v, s);
}

/* The children's gradient into gx from B, E = B' Z and the scores of
 * daam_grad: dE/dx through the residuals, the mean and the variance of
 * the chosen axis (docs/sim-dar-daam.md 2.5). */
static lse_status add_child_grad(daam_work *w, const gsl_matrix *g,
                                 daam_views *vw, const gsl_matrix *delta,
                                 int rows, gsl_matrix *gx)
{
    const size_t b = g->size1, nh = g->size2, d = w->d;
    const gsl_matrix *sm = &vw->sm.matrix, *bm = &vw->bm.matrix;
    const gsl_matrix *z = &vw->z.matrix, *em = &vw->em.matrix;
    gsl_matrix *dm = &vw->dm.matrix;
    /* D = diag(rowsum B) Z - B Delta */
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, -1.0, bm, delta, 0.0, dm);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    for (size_t i = 0; i < b; i++)
        for (size_t k = 0; k < d; k++)
            *gsl_matrix_ptr(dm, i, k) += w->rs[i] * gsl_matrix_get(z, i, k);
    if (!rows) {
        /* centre each row of D over the features; variance term
         * -(2 / (d V_i)) (sum_h G_ih S_ih) z_i */
        for (size_t i = 0; i < b; i++) {
            double mean = 0.0, gs = 0.0;
            for (size_t k = 0; k < d; k++)
                mean += gsl_matrix_get(dm, i, k);
            mean /= (double)d;
            for (size_t h = 0; h < nh; h++)
                gs += gsl_matrix_get(g, i, h) * gsl_matrix_get(sm, i, h);
            const double f = 2.0 * gs / ((double)d * w->var[i]);
            for (size_t k = 0; k < d; k++)
                *gsl_matrix_ptr(gx, i, k) += gsl_matrix_get(dm, i, k) - mean -
                                             f * gsl_matrix_get(z, i, k);
        }
    } else {
        /* centre each column of D over the rows; variance term
         * -(2/n) z_lk w_k / V_k^2 with
         * w_k = 1/2 sum_ih B_ih (z_ik - delta_hk)^2 */
        const double nb = (double)b;
        for (size_t k = 0; k < d; k++) {
            double mean = 0.0, wk = 0.0;
            for (size_t i = 0; i < b; i++) {
                const double zik = gsl_matrix_get(z, i, k);
                mean += gsl_matrix_get(dm, i, k);
                wk += w->rs[i] * zik * zik;
            }
            mean /= nb;
            for (size_t h = 0; h < nh; h++) {
                const double dhk = gsl_matrix_get(delta, h, k);
                wk += dhk * (w->cs[h] * dhk - 2.0 * gsl_matrix_get(em, h, k));
            }
            wk *= 0.5;
            const double vk = w->var[k];
            const double f = 2.0 * wk / (nb * vk * vk);
            for (size_t i = 0; i < b; i++)
                *gsl_matrix_ptr(gx, i, k) +=
                    (gsl_matrix_get(dm, i, k) - mean) / vk -
                    f * gsl_matrix_get(z, i, k);
        }
    }
    return LSE_OK;
}

static lse_status daam_grad(const lse_sim_args *a, const gsl_matrix *g,
                            const lse_sim_grads *out)
{
    if (a == NULL || g == NULL || out == NULL)
        return LSE_EFAULT;
    daam_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    const lse_daam_config *cfg = daam_config(a->config);
    lse_status st = daam_operands(a, w, cfg);
    if (st != LSE_OK)
        return st;
    const size_t b = a->child->size1, nh = w->n_head, d = w->d;
    gsl_matrix *gc = out->param != NULL ? out->param[0] : NULL;
    if (g->size1 != b || g->size2 != nh)
        return LSE_EDIM;
    if (out->child != NULL &&
        (out->child->size1 != b || out->child->size2 != d))
        return LSE_EDIM;
    if (out->parent != NULL &&
        (out->parent->size1 != nh || out->parent->size2 != d))
        return LSE_EDIM;
    if (gc != NULL && (gc->size1 != nh || gc->size2 != 1))
        return LSE_EDIM;
    if (b == 0 || nh == 0)
        return LSE_OK;
    if (out->child == NULL && out->parent == NULL && gc == NULL)
        return LSE_OK;

    daam_views v = daam_views_make(w, b);
    gsl_matrix *sm = &v.sm.matrix, *bm = &v.bm.matrix;
    const gsl_matrix *z = &v.z.matrix;
    st = daam_scores(a, cfg, w, &v, sm);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *delta = a->parent;
    const gsl_matrix *c = a->param[0];
    const int rows = cfg->axis == LSE_DAAM_ROWS;

    /* dS_ih/dc_h = -2 S_ih / c_h */
    if (gc != NULL) {
        for (size_t h = 0; h < nh; h++) {
            double sum = 0.0;
            for (size_t i = 0; i < b; i++)
                sum += gsl_matrix_get(g, i, h) * gsl_matrix_get(sm, i, h);
            *gsl_matrix_ptr(gc, h, 0) += -2.0 * sum / gsl_matrix_get(c, h, 0);
        }
    }
    if (out->child == NULL && out->parent == NULL)
        return LSE_OK;

    /* B_ih = -G_ih / c_h^2 (ROWS), -G_ih / (c_h^2 V_i) (FEATURES); row and
     * column sums; E = B' Z (H, d). */
    for (size_t h = 0; h < nh; h++)
        w->cs[h] = 0.0;
    for (size_t i = 0; i < b; i++) {
        const double vi = rows ? 1.0 : w->var[i];
        double r = 0.0;
        for (size_t h = 0; h < nh; h++) {
            const double ch = gsl_matrix_get(c, h, 0);
            const double bih = -gsl_matrix_get(g, i, h) / (ch * ch * vi);
            gsl_matrix_set(bm, i, h, bih);
            r += bih;
            w->cs[h] += bih;
        }
        w->rs[i] = r;
    }
    gsl_matrix *em = &v.em.matrix;
    int rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, bm, z, 0.0, em);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);

    if (out->child != NULL) {
        st = add_child_grad(w, g, &v, delta, rows, out->child);
        if (st != LSE_OK)
            return st;
    }
    if (out->parent != NULL) {
        /* dE/ddelta_hk += -(E_hk - colsum(B)_h delta_hk) [/ V_k for ROWS] */
        for (size_t h = 0; h < nh; h++) {
            for (size_t k = 0; k < d; k++) {
                const double t = gsl_matrix_get(em, h, k) -
                                 w->cs[h] * gsl_matrix_get(delta, h, k);
                *gsl_matrix_ptr(out->parent, h, k) +=
                    rows ? -t / w->var[k] : -t;
            }
        }
    }
    return LSE_OK;
}

lse_status lse_daam_density(const lse_daam_config *cfg, const gsl_matrix *x,
                            const gsl_matrix *delta, const gsl_matrix *c,
                            const gsl_matrix *a, gsl_matrix *da, lse_error *err)
{
    static const char fn[] = "lse_daam_density";
    if (x == NULL || delta == NULL || c == NULL || a == NULL || da == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL matrix");
    const size_t n = x->size1, d = x->size2, H = delta->size1;
    if (delta->size2 != d || c->size1 != H || c->size2 != 1 || a->size1 != n ||
        a->size2 != H || da->size1 != n || da->size2 != d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "x %zux%zu, delta %zux%zu, c %zux%zu, a %zux%zu, "
                             "da %zux%zu: expected delta (H, d), c (H, 1), "
                             "a (N, H), da (N, d)",
                             n, d, delta->size1, delta->size2, c->size1,
                             c->size2, a->size1, a->size2, da->size1,
                             da->size2);
    const lse_daam_config *cf = daam_config(cfg);
    /* the mean and variance (plus eps) of each entry's row or column */
    const int by_row = cf->axis == LSE_DAAM_FEATURES;
    const size_t n_stat = by_row ? n : d, len = by_row ? d : n;
    for (size_t u = 0; u < n_stat; u++) {
        double mean = 0, var = 0;
        for (size_t q = 0; q < len; q++)
            mean +=
                (by_row ? gsl_matrix_get(x, u, q) : gsl_matrix_get(x, q, u)) /
                (double)len;
        for (size_t q = 0; q < len; q++)
            var += pow((by_row ? gsl_matrix_get(x, u, q)
                               : gsl_matrix_get(x, q, u)) -
                           mean,
                       2) /
                   (double)len;
        for (size_t q = 0; q < len; q++) {
            const size_t i = by_row ? u : q, j = by_row ? q : u;
            double s = 0;
            for (size_t h = 0; h < H; h++) {
                const double ch = gsl_matrix_get(c, h, 0);
                const double y = (gsl_matrix_get(x, i, j) - mean -
                                  gsl_matrix_get(delta, h, j)) /
                                 sqrt(var + cf->eps);
                s += gsl_matrix_get(a, i, h) * exp(-y * y / (2 * ch * ch));
            }
            gsl_matrix_set(da, i, j, s);
        }
    }
    return LSE_OK;
}

static int daam_describe(const void *config, char *buf, size_t len)
{
    const lse_daam_config *cfg = daam_config(config);
    return snprintf(buf, len, "axis=%s, eps=%g",
                    cfg->axis == LSE_DAAM_ROWS ? "rows" : "features", cfg->eps);
}

static const lse_sim_type daam_type = {
    .name = "daam",
    .n_param = 1,
    .param_names = daam_param_names,
    .optional_params = 0,
    .config_size = sizeof(lse_daam_config),
    .config_default = &daam_default,
    /* ROWS statistics need every child row; FEATURES does not care, but
     * the flag is per type, and H columns per child row are cheap. */
    .flags = LSE_SIM_WHOLE_CHILDREN,
    .check = daam_check,
    .work_new = daam_work_new,
    .work_free = daam_work_free,
    .prepare = NULL,
    .eval = daam_eval,
    .grad = daam_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = daam_describe,
};

const lse_sim_type *const lse_sim_daam = &daam_type;
