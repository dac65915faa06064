#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/core.h>
#include "sim-check-private.h"
#include "sim-size-private.h"

/* Distance-based similarities, the four scores of the IDW paper
 * (the IDW paper eqs 1-4; docs/similarities.md, "neg-dist, gauss-kernel,
 * inv-dist, idw"). With D2 = ||c - p||^2 and u = D2^(p/2) = ||c - p||^p:
 *
 *   neg-dist      phi = -D2              phi' = -1
 *   gauss-kernel  phi = exp(-D2 / s^2)   phi' = -phi / s^2
 *   inv-dist      phi = 1 / (eps + u)    phi' = -u' / (eps + u)^2
 *   idw           phi = -log(eps + u)    phi' = -u' / (eps + u)
 * with u' = du/dD2 = (p/2) D2^(p/2 - 1).
 *
 * (phi' = dphi/dD2). Every distance and gradient is computed on centered
 * rows c - m, p - m with m the mean of the parent rows (D2 and both
 * gradients are invariant under a common shift; c - m and p - m are exact
 * for data far from the origin, by Sterbenz's lemma), so data at 1e6 with
 * unit spread keep all their digits, as in the Gaussian family
 * (gauss_common.c). D2 = |c|^2 + |p|^2 - 2 C P^T by one dgemm on the
 * centered rows; where the expansion still cancels (D2 < sqrt(DBL_EPSILON) (|c|^2 + |p|^2), i.e. fewer
 * than half the digits survive) the pair is recomputed directly as
 * sum_k (c_k - p_k)^2, so identical rows give exactly 0. Negative rounding
 * is clamped to 0.
 *
 * Gradient: dsim/dc = 2 phi' (c - p) = -dsim/dp. With
 * V(i, j) = 2 G(i, j) phi'(D2(i, j)) and C, P the centered rows:
 *   dE/dC = diag(rowsum V) C - V P,   dE/dP = diag(colsum V) P - V^T C,
 * near pairs (the recomputed ones) are added directly as V (c - p) to avoid
 * the cancellation. At c == p (D2 = 0) the gradient of ||c - p||^p for
 * p < 2 is undefined; it is defined as 0 (the subgradient at the minimum),
 * which is also the limit for p >= 2 and for the other three scores. */

typedef enum dist_kind {
    KIND_NEG = 0,
    KIND_GAUSS = 1,
    KIND_INV = 2,
    KIND_IDW = 3
} dist_kind;

typedef struct dist_work {
    size_t block, n_parent;
    gsl_vector *shift;   /* (d) mean of the parent rows */
    gsl_matrix *cc;      /* (block, d) centered child rows */
    gsl_matrix *pc;      /* (n_parent, d) centered parent rows */
    gsl_vector *nc;      /* (block) |c_i|^2 */
    gsl_vector *np;      /* (n_parent) |p_j|^2 */
    gsl_matrix *d2;      /* (block, n_parent) squared distances */
    gsl_matrix *v;       /* (block, n_parent) V = 2 G phi' */
    unsigned char *near; /* (block * n_parent) recomputed pairs */
} dist_work;

static const lse_dist_config dist_default = {.p = 2.0, .eps = 1e-3, .s = 1.0};

static const char *const kind_names[] = {"neg-dist", "gauss-kernel", "inv-dist",
                                         "idw"};

static const lse_dist_config *get_config(const void *config)
{
    return config != NULL ? config : &dist_default;
}

static lse_status check_any(dist_kind kind, const lse_sim_shape *shape,
                            const void *config, char *msg, size_t msg_len)
{
    const char *name = kind_names[kind];
    const lse_dist_config *cfg = get_config(config);
    const lse_status st = lse_sim_check_vectors(name, shape, msg, msg_len);
    if (st != LSE_OK)
        return st;
    if (kind == KIND_GAUSS && (!(cfg->s > 0.0) || !isfinite(cfg->s))) {
        snprintf(msg, msg_len, "%s: s = %g, must be finite and > 0", name,
                 cfg->s);
        return LSE_EDOM;
    }
    if (kind == KIND_INV || kind == KIND_IDW) {
        if (!(cfg->p > 0.0) || !isfinite(cfg->p)) {
            snprintf(msg, msg_len, "%s: p = %g, must be finite and > 0", name,
                     cfg->p);
            return LSE_EDOM;
        }
        if (!(cfg->eps > 0.0) || !isfinite(cfg->eps)) {
            snprintf(msg, msg_len, "%s: eps = %g, must be finite and > 0", name,
                     cfg->eps);
            return LSE_EDOM;
        }
    }
    return LSE_OK;
}

static void dist_work_free(void *work)
{
    dist_work *w = work;
    if (w == NULL)
        return;
    gsl_vector_free(w->shift);
    gsl_matrix_free(w->cc);
    gsl_matrix_free(w->pc);
    gsl_vector_free(w->nc);
    gsl_vector_free(w->np);
    gsl_matrix_free(w->d2);
    gsl_matrix_free(w->v);
    free(w->near);
    free(w);
}

static lse_status dist_work_new(const lse_sim_shape *shape, const void *config,
                                void **out)
{
    (void)config;
    *out = NULL;
    lse_gsl_quiet(); /* a constructor: GSL must not abort */
    if (shape->block == 0 || shape->n_parent == 0 || shape->d_child == 0)
        return LSE_OK; /* nothing to compute */
    dist_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    const size_t b = shape->block, m = shape->n_parent, d = shape->d_child;
    w->block = b;
    w->n_parent = m;
    /* gsl_matrix_alloc does not check rows * cols * sizeof(double) */
    if (LSE_SIZE_PAIRS_OVERFLOW(b, m, b, d, m, d)) {
        dist_work_free(w);
        return LSE_ENOMEM;
    }
    w->shift = gsl_vector_alloc(d);
    w->cc = gsl_matrix_alloc(b, d);
    w->pc = gsl_matrix_alloc(m, d);
    w->nc = gsl_vector_alloc(b);
    w->np = gsl_vector_alloc(m);
    w->d2 = gsl_matrix_alloc(b, m);
    w->v = gsl_matrix_alloc(b, m);
    w->near = malloc(b * m);
    if (w->shift == NULL || w->cc == NULL || w->pc == NULL || w->nc == NULL || w->np == NULL || w->d2 == NULL || w->v == NULL ||
        w->near == NULL) {
        dist_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

typedef struct views {
    dist_work *w;
    gsl_vector_view nc, np;
    gsl_matrix_view d2, v;
    gsl_matrix_view cc; /* (b, d) of w->cc; w->pc is whole */
} views;

static lse_status get_views(const lse_sim_args *a, views *vw)
{
    vw->w = NULL;
    if (a->child == NULL || a->parent == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1, m = a->parent->size1;
    if (a->child->size2 != a->parent->size2)
        return LSE_EDIM;
    if (b == 0 || m == 0)
        return LSE_OK;
    dist_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    if (b > w->block || m != w->n_parent || a->child->size2 != w->cc->size2)
        return LSE_EDIM;
    vw->w = w;
    vw->nc = gsl_vector_subvector(w->nc, 0, b);
    vw->np = gsl_vector_subvector(w->np, 0, m);
    vw->d2 = gsl_matrix_submatrix(w->d2, 0, 0, b, m);
    vw->v = gsl_matrix_submatrix(w->v, 0, 0, b, m);
    vw->cc = gsl_matrix_submatrix(w->cc, 0, 0, b, a->child->size2);
    return LSE_OK;
}

static void row_norms2(const gsl_matrix *x, gsl_vector *out)
{
    for (size_t i = 0; i < x->size1; i++) {
        gsl_vector_const_view r = gsl_matrix_const_row(x, i);
        double n2 = 0.0;
        gsl_blas_ddot(&r.vector, &r.vector, &n2);
        gsl_vector_set(out, i, n2);
    }
}

/* The centered rows: shift = mean of the parent rows (one value for
 * every block, so blocks and threads cannot change it), cc = child - shift,
 * pc = parent - shift. */
static void center_rows(const lse_sim_args *a, views *vw)
{
    const gsl_matrix *c = a->child, *p = a->parent;
    gsl_matrix *cc = &vw->cc.matrix, *pc = vw->w->pc;
    const size_t b = c->size1, m = p->size1, d = c->size2;
    double *mu = vw->w->shift->data;
    const size_t ms = vw->w->shift->stride;
    for (size_t k = 0; k < d; k++)
        mu[k * ms] = 0.0;
    for (size_t j = 0; j < m; j++)
        for (size_t k = 0; k < d; k++)
            mu[k * ms] += gsl_matrix_get(p, j, k);
    for (size_t k = 0; k < d; k++)
        mu[k * ms] /= (double)m;
    for (size_t j = 0; j < m; j++)
        for (size_t k = 0; k < d; k++)
            gsl_matrix_set(pc, j, k, gsl_matrix_get(p, j, k) - mu[k * ms]);
    for (size_t i = 0; i < b; i++)
        for (size_t k = 0; k < d; k++)
            gsl_matrix_set(cc, i, k, gsl_matrix_get(c, i, k) - mu[k * ms]);
}

/* Centered rows, D2 into vw->d2 and the near flags (see the top of the
 * file). */
static lse_status sq_dists(const lse_sim_args *a, views *vw)
{
    center_rows(a, vw);
    const gsl_matrix *c = &vw->cc.matrix, *p = vw->w->pc;
    gsl_vector *nc = &vw->nc.vector, *np = &vw->np.vector;
    gsl_matrix *d2 = &vw->d2.matrix;
    const size_t b = c->size1, m = p->size1, d = c->size2;
    const double rel = sqrt(DBL_EPSILON);
    row_norms2(c, nc);
    row_norms2(p, np);
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, -2.0, c, p, 0.0, d2);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    for (size_t i = 0; i < b; i++) {
        const double ci = gsl_vector_get(nc, i);
        double *row = gsl_matrix_ptr(d2, i, 0);
        unsigned char *near = vw->w->near + i * m;
        for (size_t j = 0; j < m; j++) {
            const double sum = ci + gsl_vector_get(np, j);
            double v = row[j] + sum;
            near[j] = v < rel * sum;
            if (near[j]) {
                v = 0.0;
                for (size_t k = 0; k < d; k++) {
                    const double t =
                        gsl_matrix_get(c, i, k) - gsl_matrix_get(p, j, k);
                    v += t * t;
                }
            }
            row[j] = v > 0.0 ? v : 0.0;
        }
    }
    return LSE_OK;
}

/* similarity and dphi/dD2 at D2 */
static double phi(dist_kind kind, const lse_dist_config *cfg, double d2,
                  double *dphi)
{
    switch (kind) {
    case KIND_NEG:
        *dphi = -1.0;
        return -d2;
    case KIND_GAUSS: {
        const double s2 = cfg->s * cfg->s;
        const double e = exp(-d2 / s2);
        *dphi = -e / s2;
        return e;
    }
    case KIND_INV:
    case KIND_IDW: {
        const double u = cfg->p == 2.0 ? d2 : pow(d2, 0.5 * cfg->p);
        const double den = cfg->eps + u;
        /* du/dD2 = (p/2) D2^(p/2 - 1) = (p/2) u / D2; defined 0 at D2 = 0 */
        const double du = d2 > 0.0 ? 0.5 * cfg->p * u / d2 : 0.0;
        if (kind == KIND_INV) {
            *dphi = -du / (den * den);
            return 1.0 / den;
        }
        *dphi = -du / den;
        return -log(den);
    }
    }
    *dphi = NAN;
    return NAN;
}

static lse_status eval_any(dist_kind kind, const lse_sim_args *a, gsl_matrix *s)
{
    views vw;
    lse_status st = get_views(a, &vw);
    if (st != LSE_OK)
        return st;
    if (s == NULL)
        return LSE_EFAULT;
    if (s->size1 != a->child->size1 || s->size2 != a->parent->size1)
        return LSE_EDIM;
    if (vw.w == NULL)
        return LSE_OK; /* empty block */
    st = sq_dists(a, &vw);
    if (st != LSE_OK)
        return st;
    const lse_dist_config *cfg = get_config(a->config);
    for (size_t i = 0; i < s->size1; i++) {
        double *row = gsl_matrix_ptr(s, i, 0);
        for (size_t j = 0; j < s->size2; j++) {
            double dphi;
            row[j] = phi(kind, cfg, gsl_matrix_get(&vw.d2.matrix, i, j), &dphi);
        }
    }
    return LSE_OK;
}

static lse_status grad_any(dist_kind kind, const lse_sim_args *a,
                           const gsl_matrix *g, const lse_sim_grads *out)
{
    views vw;
    lse_status st = get_views(a, &vw);
    if (st != LSE_OK)
        return st;
    if (g == NULL || out == NULL)
        return LSE_EFAULT;
    const gsl_matrix *c = a->child, *p = a->parent;
    const size_t b = c->size1, m = p->size1, d = c->size2;
    if (g->size1 != b || g->size2 != m)
        return LSE_EDIM;
    if (vw.w == NULL || (out->child == NULL && out->parent == NULL))
        return LSE_OK;
    st = sq_dists(a, &vw);
    if (st != LSE_OK)
        return st;
    c = &vw.cc.matrix; /* the centered rows from here on */
    p = vw.w->pc;
    const lse_dist_config *cfg = get_config(a->config);
    gsl_matrix *v = &vw.v.matrix;
    /* V = 2 G phi'; near pairs are applied directly and zeroed in V */
    for (size_t i = 0; i < b; i++) {
        const unsigned char *near = vw.w->near + i * m;
        for (size_t j = 0; j < m; j++) {
            double dphi;
            phi(kind, cfg, gsl_matrix_get(&vw.d2.matrix, i, j), &dphi);
            const double vij = 2.0 * gsl_matrix_get(g, i, j) * dphi;
            if (!near[j]) {
                gsl_matrix_set(v, i, j, vij);
                continue;
            }
            gsl_matrix_set(v, i, j, 0.0);
            if (vij == 0.0)
                continue;
            for (size_t k = 0; k < d; k++) {
                const double t =
                    vij * (gsl_matrix_get(c, i, k) - gsl_matrix_get(p, j, k));
                if (out->child != NULL)
                    *gsl_matrix_ptr(out->child, i, k) += t;
                if (out->parent != NULL)
                    *gsl_matrix_ptr(out->parent, j, k) -= t;
            }
        }
    }
    int rc = GSL_SUCCESS;
    if (out->child != NULL) {
        /* child += diag(rowsum V) C - V P */
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, -1.0, v, p, 1.0,
                            out->child);
        for (size_t i = 0; rc == GSL_SUCCESS && i < b; i++) {
            double r = 0.0;
            for (size_t j = 0; j < m; j++)
                r += gsl_matrix_get(v, i, j);
            gsl_vector_const_view ci = gsl_matrix_const_row(c, i);
            gsl_vector_view oi = gsl_matrix_row(out->child, i);
            rc = gsl_blas_daxpy(r, &ci.vector, &oi.vector);
        }
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    if (out->parent != NULL) {
        /* parent += diag(colsum V) P - V^T C */
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, -1.0, v, c, 1.0,
                            out->parent);
        for (size_t j = 0; rc == GSL_SUCCESS && j < m; j++) {
            double q = 0.0;
            for (size_t i = 0; i < b; i++)
                q += gsl_matrix_get(v, i, j);
            gsl_vector_const_view pj = gsl_matrix_const_row(p, j);
            gsl_vector_view oj = gsl_matrix_row(out->parent, j);
            rc = gsl_blas_daxpy(q, &pj.vector, &oj.vector);
        }
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* The four type objects.                                               */

#define DIST_FNS(fn, kind)                                                     \
    static lse_status fn##_check(const lse_sim_shape *shape,                   \
                                 const void *config, char *msg,                \
                                 size_t msg_len)                               \
    {                                                                          \
        return check_any(kind, shape, config, msg, msg_len);                   \
    }                                                                          \
    static lse_status fn##_eval(const lse_sim_args *a, gsl_matrix *s)          \
    {                                                                          \
        return eval_any(kind, a, s);                                           \
    }                                                                          \
    static lse_status fn##_grad(const lse_sim_args *a, const gsl_matrix *g,    \
                                const lse_sim_grads *out)                      \
    {                                                                          \
        return grad_any(kind, a, g, out);                                      \
    }

DIST_FNS(neg, KIND_NEG)
DIST_FNS(gauss, KIND_GAUSS)
DIST_FNS(inv, KIND_INV)
DIST_FNS(idw, KIND_IDW)

static int describe_s(const void *config, char *buf, size_t len)
{
    return snprintf(buf, len, "s=%g", get_config(config)->s);
}

static int describe_p_eps(const void *config, char *buf, size_t len)
{
    const lse_dist_config *cfg = get_config(config);
    return snprintf(buf, len, "p=%g, eps=%g", cfg->p, cfg->eps);
}

#define DIST_TYPE(var, fn, label, desc)                                        \
    static const lse_sim_type var = {                                          \
        .name = label,                                                         \
        .n_param = 0,                                                          \
        .param_names = NULL,                                                   \
        .optional_params = 0,                                                  \
        .config_size = sizeof(lse_dist_config),                                \
        .config_default = &dist_default,                                       \
        .flags = 0,                                                            \
        .check = fn##_check,                                                   \
        .work_new = dist_work_new,                                             \
        .work_free = dist_work_free,                                           \
        .prepare = NULL,                                                       \
        .eval = fn##_eval,                                                     \
        .grad = fn##_grad,                                                     \
        .stats_size = NULL,                                                    \
        .stats = NULL,                                                         \
        .solve = NULL,                                                         \
        .describe = desc,                                                      \
    }

DIST_TYPE(neg_dist_type, neg, "neg-dist", NULL);
DIST_TYPE(gauss_kernel_type, gauss, "gauss-kernel", describe_s);
DIST_TYPE(inv_dist_type, inv, "inv-dist", describe_p_eps);
DIST_TYPE(idw_type, idw, "idw", describe_p_eps);

const lse_sim_type *const lse_sim_neg_dist = &neg_dist_type;
const lse_sim_type *const lse_sim_gauss_kernel = &gauss_kernel_type;
const lse_sim_type *const lse_sim_inv_dist = &inv_dist_type;
const lse_sim_type *const lse_sim_idw = &idw_type;
