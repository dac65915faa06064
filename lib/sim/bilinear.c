#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"
#include "../linalg-private.h"

/* Bilinear similarity (docs/similarities.md, "bilinear").
 *
 *   S = a (C W_c^T) (P W_p^T)^T = a K Q^T
 *   C (b, d_c), P (n_parent, d_p), W_c (k, d_c), W_p (k, d_p), a = scale,
 *   K = C W_c^T (b, k), Q = P W_p^T (n_parent, k).
 *
 * Gradients, with dK = a G Q (b, k) and dQ = a G^T K (n_parent, k):
 *   dE/dC = dK W_c,  dE/dP = dQ W_p,  dE/dW_c = dK^T C,  dE/dW_p = dQ^T P.
 *
 * Closed-form M-step: Tschantz section 10 (slot attention), children x_j,
 * parents mu_i, W_K = W_c, W_Q = W_p, responsibilities A (times the
 * optional per-child weight). Statistics (acc layout, row-major):
 *   M = sum_ji A_ji x_j mu_i^T  (d_c, d_p)
 *   P = sum_ji A_ji mu_i mu_i^T (d_p, d_p)
 *   X = sum_ji A_ji x_j x_j^T   (d_c, d_c)
 *   n_i = sum_j A_ji            (n_parent)
 * Solve: W_p <- W_c M P^-1, then W_c <- W_p M^T X^-1 (new W_p), both by
 * Cholesky; the parent rows are left unchanged. */

#define N_PARAM 2

typedef struct bilinear_work {
    size_t block, n_parent, d_c, d_p, k;
    gsl_matrix *kc;    /* (block, k)      K = C W_c^T */
    gsl_matrix *qp;    /* (n_parent, k)   Q = P W_p^T */
    gsl_matrix *dk;    /* (block, k)      dE/dK */
    gsl_matrix *dq;    /* (n_parent, k)   dE/dQ */
    gsl_matrix *tb;    /* (block, d_p)    stats: A Mu */
    gsl_matrix *sc;    /* (block, d_c)    stats: row-scaled children */
    gsl_matrix *sm;    /* (n_parent, d_p) stats: row-scaled parents */
    gsl_vector *cnt;   /* (n_parent)      stats: column sums of a block */
    gsl_matrix *lp;    /* (d_p, d_p)      solve: Cholesky of P */
    gsl_matrix *lx;    /* (d_c, d_c)      solve: Cholesky of X */
    gsl_vector *rwork; /* (3 max(d_c, d_p)) rcond workspace */
} bilinear_work;

static const lse_bilinear_config bilinear_default = {.scale = 1.0};
static const char *const bilinear_names[N_PARAM] = {"W_c", "W_p"};

static const lse_bilinear_config *get_config(const void *config)
{
    return config != NULL ? config : &bilinear_default;
}

static lse_status bilinear_check(const lse_sim_shape *shape, const void *config,
                                 char *msg, size_t msg_len)
{
    const lse_bilinear_config *cfg = get_config(config);
    if (shape->n_param != N_PARAM || shape->param_rows == NULL ||
        shape->param_cols == NULL) {
        snprintf(msg, msg_len, "bilinear: expects %d parameters (W_c, W_p)",
                 N_PARAM);
        return LSE_EDIM;
    }
    if (shape->d_context != 0) {
        snprintf(msg, msg_len, "bilinear: takes no context (d_context = %zu)",
                 shape->d_context);
        return LSE_EDIM;
    }
    if (shape->d_child == 0 || shape->d_parent == 0) {
        snprintf(msg, msg_len,
                 "bilinear: d_child = %zu, d_parent = %zu: "
                 "both must be > 0",
                 shape->d_child, shape->d_parent);
        return LSE_EDIM;
    }
    const size_t k = shape->param_rows[0];
    if (k == 0) {
        snprintf(msg, msg_len, "bilinear: W_c is missing (0 rows)");
        return LSE_EDIM;
    }
    if (shape->param_cols[0] != shape->d_child) {
        snprintf(msg, msg_len,
                 "bilinear: W_c is %zux%zu, expected k x d_child = %zux%zu",
                 shape->param_rows[0], shape->param_cols[0], k, shape->d_child);
        return LSE_EDIM;
    }
    if (shape->param_rows[1] != k || shape->param_cols[1] != shape->d_parent) {
        snprintf(msg, msg_len,
                 "bilinear: W_p is %zux%zu, expected k x d_parent = %zux%zu",
                 shape->param_rows[1], shape->param_cols[1], k,
                 shape->d_parent);
        return LSE_EDIM;
    }
    if (!isfinite(cfg->scale)) {
        snprintf(msg, msg_len, "bilinear: scale = %g, must be finite",
                 cfg->scale);
        return LSE_EDOM;
    }
    return LSE_OK;
}

static void bilinear_work_free(void *work)
{
    bilinear_work *w = work;
    if (w == NULL)
        return;
    gsl_matrix_free(w->kc);
    gsl_matrix_free(w->qp);
    gsl_matrix_free(w->dk);
    gsl_matrix_free(w->dq);
    gsl_matrix_free(w->tb);
    gsl_matrix_free(w->sc);
    gsl_matrix_free(w->sm);
    gsl_vector_free(w->cnt);
    gsl_matrix_free(w->lp);
    gsl_matrix_free(w->lx);
    gsl_vector_free(w->rwork);
    free(w);
}

/* gsl_matrix_alloc refuses 0 rows or columns: allocate at least 1x1 and
 * always take views of the used size. */
static gsl_matrix *alloc_m(size_t r, size_t c)
{
    return gsl_matrix_alloc(r > 0 ? r : 1, c > 0 ? c : 1);
}

static lse_status bilinear_work_new(const lse_sim_shape *shape,
                                    const void *config, void **out)
{
    (void)config;
    *out = NULL;
    lse_gsl_quiet(); /* a constructor: GSL must not abort */
    if (shape->n_param != N_PARAM || shape->param_rows == NULL ||
        shape->param_cols == NULL)
        return LSE_EDIM;
    if (LSE_SIZE_PAIRS_OVERFLOW(shape->block, shape->param_rows[0],
                                shape->n_parent, shape->param_rows[0],
                                shape->block, shape->d_parent, shape->block,
                                shape->d_child, shape->n_parent,
                                shape->d_parent, shape->d_parent,
                                shape->d_parent, shape->d_child,
                                shape->d_child, 3, shape->d_child, 3,
                                shape->d_parent))
        return LSE_ENOMEM;
    bilinear_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    const size_t b = shape->block, m = shape->n_parent;
    const size_t dc = shape->d_child, dp = shape->d_parent;
    const size_t k = shape->param_rows[0];
    const size_t dmax = dc > dp ? dc : dp;
    w->block = b;
    w->n_parent = m;
    w->d_c = dc;
    w->d_p = dp;
    w->k = k;
    w->kc = alloc_m(b, k);
    w->qp = alloc_m(m, k);
    w->dk = alloc_m(b, k);
    w->dq = alloc_m(m, k);
    w->tb = alloc_m(b, dp);
    w->sc = alloc_m(b, dc);
    w->sm = alloc_m(m, dp);
    w->cnt = gsl_vector_alloc(m > 0 ? m : 1);
    w->lp = alloc_m(dp, dp);
    w->lx = alloc_m(dc, dc);
    w->rwork = gsl_vector_alloc(3 * (dmax > 0 ? dmax : 1));
    if (w->kc == NULL || w->qp == NULL || w->dk == NULL || w->dq == NULL ||
        w->tb == NULL || w->sc == NULL || w->sm == NULL || w->cnt == NULL ||
        w->lp == NULL || w->lx == NULL || w->rwork == NULL) {
        bilinear_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

/* Validate the kernel arguments against the workspace. */
static lse_status args_ok(const lse_sim_args *a, const bilinear_work **wout)
{
    if (a->child == NULL || a->parent == NULL || a->param == NULL ||
        a->param[0] == NULL || a->param[1] == NULL || a->work == NULL)
        return LSE_EFAULT;
    const bilinear_work *w = a->work;
    const gsl_matrix *wc = a->param[0], *wp = a->param[1];
    if (a->child->size1 > w->block || a->child->size2 != w->d_c ||
        a->parent->size1 != w->n_parent || a->parent->size2 != w->d_p ||
        wc->size1 != w->k || wc->size2 != w->d_c || wp->size1 != w->k ||
        wp->size2 != w->d_p)
        return LSE_EDIM;
    *wout = w;
    return LSE_OK;
}

/* K = C W_c^T, Q = P W_p^T into views of the workspace. */
static lse_status project(const lse_sim_args *a, gsl_matrix *k, gsl_matrix *q)
{
    int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->child,
                            a->param[0], 0.0, k);
    if (rc == GSL_SUCCESS)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->parent,
                            a->param[1], 0.0, q);
    return lse_status_from_gsl(rc);
}

static lse_status bilinear_eval(const lse_sim_args *a, gsl_matrix *s)
{
    const bilinear_work *w = NULL;
    lse_status st = args_ok(a, &w);
    if (st != LSE_OK)
        return st;
    const size_t b = a->child->size1, m = a->parent->size1;
    if (s == NULL)
        return LSE_EFAULT;
    if (s->size1 != b || s->size2 != m)
        return LSE_EDIM;
    if (b == 0 || m == 0)
        return LSE_OK;
    gsl_matrix_view k = gsl_matrix_submatrix(w->kc, 0, 0, b, w->k);
    gsl_matrix_view q = gsl_matrix_submatrix(w->qp, 0, 0, m, w->k);
    st = project(a, &k.matrix, &q.matrix);
    if (st != LSE_OK)
        return st;
    const double scale = get_config(a->config)->scale;
    const int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, scale, &k.matrix,
                                  &q.matrix, 0.0, s);
    return lse_status_from_gsl(rc);
}

static lse_status bilinear_grad(const lse_sim_args *a, const gsl_matrix *g,
                                const lse_sim_grads *out)
{
    const bilinear_work *w = NULL;
    lse_status st = args_ok(a, &w);
    if (st != LSE_OK)
        return st;
    if (g == NULL || out == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1, m = a->parent->size1;
    if (g->size1 != b || g->size2 != m)
        return LSE_EDIM;
    if (b == 0 || m == 0)
        return LSE_OK;
    gsl_matrix *gwc = out->param != NULL ? out->param[0] : NULL;
    gsl_matrix *gwp = out->param != NULL ? out->param[1] : NULL;
    gsl_matrix_view k = gsl_matrix_submatrix(w->kc, 0, 0, b, w->k);
    gsl_matrix_view q = gsl_matrix_submatrix(w->qp, 0, 0, m, w->k);
    gsl_matrix_view dk = gsl_matrix_submatrix(w->dk, 0, 0, b, w->k);
    gsl_matrix_view dq = gsl_matrix_submatrix(w->dq, 0, 0, m, w->k);
    st = project(a, &k.matrix, &q.matrix);
    if (st != LSE_OK)
        return st;
    const double scale = get_config(a->config)->scale;
    int rc = GSL_SUCCESS;
    if (out->child != NULL || gwc != NULL) {
        /* dK = a G Q (b, k) */
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, scale, g, &q.matrix,
                            0.0, &dk.matrix);
        if (rc == GSL_SUCCESS && out->child != NULL)
            rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &dk.matrix,
                                a->param[0], 1.0, out->child);
        if (rc == GSL_SUCCESS && gwc != NULL)
            rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &dk.matrix,
                                a->child, 1.0, gwc);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    if (out->parent != NULL || gwp != NULL) {
        /* dQ = a G^T K (n_parent, k) */
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, scale, g, &k.matrix, 0.0,
                            &dq.matrix);
        if (rc == GSL_SUCCESS && out->parent != NULL)
            rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &dq.matrix,
                                a->param[1], 1.0, out->parent);
        if (rc == GSL_SUCCESS && gwp != NULL)
            rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &dq.matrix,
                                a->parent, 1.0, gwp);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Closed-form M-step.                                                  */

static size_t bilinear_stats_size(const lse_sim_shape *shape,
                                  const void *config)
{
    (void)config;
    const size_t dc = shape->d_child, dp = shape->d_parent;
    return dc * dp + dp * dp + dc * dc + shape->n_parent;
}

static lse_status bilinear_stats(const lse_sim_args *a, const gsl_matrix *resp,
                                 const gsl_vector *weight, double *acc)
{
    if (a->child == NULL || a->parent == NULL || a->work == NULL ||
        resp == NULL || acc == NULL)
        return LSE_EFAULT;
    const bilinear_work *w = a->work;
    const size_t b = a->child->size1, m = a->parent->size1;
    const size_t dc = w->d_c, dp = w->d_p;
    if (b > w->block || a->child->size2 != dc || m != w->n_parent ||
        a->parent->size2 != dp || resp->size1 != b || resp->size2 != m ||
        (weight != NULL && weight->size != b))
        return LSE_EDIM;
    if (b == 0 || m == 0 || dc == 0 || dp == 0)
        return LSE_OK;
    gsl_matrix_view mm = gsl_matrix_view_array(acc, dc, dp);
    gsl_matrix_view pp = gsl_matrix_view_array(acc + dc * dp, dp, dp);
    gsl_matrix_view xx = gsl_matrix_view_array(acc + dc * dp + dp * dp, dc, dc);
    double *count = acc + dc * dp + dp * dp + dc * dc;
    gsl_matrix_view tb = gsl_matrix_submatrix(w->tb, 0, 0, b, dp);
    gsl_matrix_view sc = gsl_matrix_submatrix(w->sc, 0, 0, b, dc);
    gsl_matrix_view sm = gsl_matrix_submatrix(w->sm, 0, 0, m, dp);
    gsl_vector_view cnt = gsl_vector_subvector(w->cnt, 0, m);

    /* T = diag(w) A Mu (b, d_p); M += C^T T */
    int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, resp, a->parent,
                            0.0, &tb.matrix);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    gsl_vector_set_zero(&cnt.vector);
    for (size_t j = 0; j < b; j++) {
        const double wj = weight != NULL ? gsl_vector_get(weight, j) : 1.0;
        double rj = 0.0;
        for (size_t i = 0; i < m; i++) {
            const double aji = wj * gsl_matrix_get(resp, j, i);
            rj += aji;
            *gsl_vector_ptr(&cnt.vector, i) += aji;
        }
        gsl_vector_view trow = gsl_matrix_row(&tb.matrix, j);
        gsl_vector_scale(&trow.vector, wj);
        /* row j of sc = r_j x_j */
        gsl_vector_const_view xj = gsl_matrix_const_row(a->child, j);
        gsl_vector_view srow = gsl_matrix_row(&sc.matrix, j);
        gsl_vector_memcpy(&srow.vector, &xj.vector);
        gsl_vector_scale(&srow.vector, rj);
    }
    rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, a->child, &tb.matrix,
                        1.0, &mm.matrix);
    /* X += C^T diag(r) C */
    if (rc == GSL_SUCCESS)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, a->child, &sc.matrix,
                            1.0, &xx.matrix);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    /* P += Mu^T diag(n) Mu; counts */
    for (size_t i = 0; i < m; i++) {
        const double ni = gsl_vector_get(&cnt.vector, i);
        gsl_vector_const_view mi = gsl_matrix_const_row(a->parent, i);
        gsl_vector_view srow = gsl_matrix_row(&sm.matrix, i);
        gsl_vector_memcpy(&srow.vector, &mi.vector);
        gsl_vector_scale(&srow.vector, ni);
        count[i] += ni;
    }
    rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, a->parent, &sm.matrix,
                        1.0, &pp.matrix);
    return lse_status_from_gsl(rc);
}

/* Cholesky of the SPD matrix src into l; LSE_ENUMERIC if it is not
 * positive definite or its reciprocal condition number is below
 * n * DBL_EPSILON (numerically singular). */
static lse_status chol_spd(const gsl_matrix *src, gsl_matrix *l,
                           gsl_vector *rwork, const char *what, char *msg,
                           size_t msg_len)
{
    const size_t n = src->size1;
    gsl_matrix_memcpy(l, src);
    int rc = lse_chol_decomp1(l);
    if (rc == GSL_EDOM) {
        snprintf(msg, msg_len,
                 "bilinear: M-step: %s is singular (not positive definite)",
                 what);
        return LSE_ENUMERIC;
    }
    if (rc != GSL_SUCCESS) {
        snprintf(msg, msg_len, "bilinear: M-step: Cholesky of %s: %s", what,
                 gsl_strerror(rc));
        return lse_status_from_gsl(rc);
    }
    double rcond = 0.0;
    gsl_vector_view wv = gsl_vector_subvector(rwork, 0, 3 * n);
    rc = gsl_linalg_cholesky_rcond(l, &rcond, &wv.vector);
    if (rc != GSL_SUCCESS) {
        snprintf(msg, msg_len, "bilinear: M-step: condition of %s: %s", what,
                 gsl_strerror(rc));
        return lse_status_from_gsl(rc);
    }
    if (!(rcond >= (double)n * DBL_EPSILON)) {
        snprintf(msg, msg_len,
                 "bilinear: M-step: %s is singular (reciprocal condition "
                 "number %.3g)",
                 what, rcond);
        return LSE_ENUMERIC;
    }
    return LSE_OK;
}

static double frob(const gsl_matrix *m)
{
    double s = 0.0;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            s += v * v;
        }
    return sqrt(s);
}

static lse_status bilinear_solve(const lse_sim_args *a, const double *acc,
                                 gsl_matrix *parent, gsl_matrix *const *param,
                                 const lse_mstep_opts *opts,
                                 lse_mstep_report *report, char *msg,
                                 size_t msg_len)
{
    (void)parent; /* the slots are not changed by this M-step */
    lse_gsl_quiet();
    if (a == NULL || a->work == NULL || acc == NULL || param == NULL ||
        param[0] == NULL || param[1] == NULL) {
        snprintf(msg, msg_len, "bilinear: M-step: NULL argument");
        return LSE_EFAULT;
    }
    const bilinear_work *w = a->work;
    const size_t dc = w->d_c, dp = w->d_p, k = w->k, m = w->n_parent;
    gsl_matrix *wc = param[0], *wp = param[1];
    if (wc->size1 != k || wc->size2 != dc || wp->size1 != k ||
        wp->size2 != dp) {
        snprintf(msg, msg_len,
                 "bilinear: M-step: W_c is %zux%zu and W_p %zux%zu, expected "
                 "%zux%zu and %zux%zu",
                 wc->size1, wc->size2, wp->size1, wp->size2, k, dc, k, dp);
        return LSE_EDIM;
    }
    const double min_count = opts != NULL ? opts->min_count : 1e-10;
    const double *count = acc + dc * dp + dp * dp + dc * dc;
    size_t n_empty = 0;
    for (size_t i = 0; i < m; i++) {
        const int empty = !(count[i] >= min_count);
        n_empty += (size_t)empty;
        if (report != NULL && report->empty != NULL)
            report->empty[i] = (unsigned char)empty;
    }
    const double before = frob(wc) * frob(wp);
    if (report != NULL) {
        report->n_empty = n_empty;
        report->norm_before = before;
        report->norm_after = before;
    }
    gsl_matrix_const_view mm = gsl_matrix_const_view_array(acc, dc, dp);
    gsl_matrix_const_view pp =
        gsl_matrix_const_view_array(acc + dc * dp, dp, dp);
    gsl_matrix_const_view xx =
        gsl_matrix_const_view_array(acc + dc * dp + dp * dp, dc, dc);

    /* factor both before writing anything: a failure leaves W unchanged */
    lse_status st =
        chol_spd(&pp.matrix, w->lp, w->rwork,
                 "P = sum A mu mu^T (d_parent x d_parent)", msg, msg_len);
    if (st == LSE_OK)
        st = chol_spd(&xx.matrix, w->lx, w->rwork,
                      "X = sum A x x^T (d_child x d_child)", msg, msg_len);
    if (st != LSE_OK)
        return st;

    /* W_p <- W_c M P^-1: W_p = W_c M, then each row r solves P w = r
     * (P symmetric) */
    int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, wc, &mm.matrix,
                            0.0, wp);
    for (size_t r = 0; rc == GSL_SUCCESS && r < k; r++) {
        gsl_vector_view row = gsl_matrix_row(wp, r);
        rc = gsl_linalg_cholesky_svx(w->lp, &row.vector);
    }
    /* W_c <- W_p M^T X^-1 with the new W_p */
    if (rc == GSL_SUCCESS)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, wp, &mm.matrix, 0.0,
                            wc);
    for (size_t r = 0; rc == GSL_SUCCESS && r < k; r++) {
        gsl_vector_view row = gsl_matrix_row(wc, r);
        rc = gsl_linalg_cholesky_svx(w->lx, &row.vector);
    }
    if (rc != GSL_SUCCESS) {
        snprintf(msg, msg_len, "bilinear: M-step: %s", gsl_strerror(rc));
        return lse_status_from_gsl(rc);
    }
    if (report != NULL)
        report->norm_after = frob(wc) * frob(wp);
    return LSE_OK;
}

static int bilinear_describe(const void *config, char *buf, size_t len)
{
    return snprintf(buf, len, "scale=%g", get_config(config)->scale);
}

static const lse_sim_type bilinear_type = {
    .name = "bilinear",
    .n_param = N_PARAM,
    .param_names = bilinear_names,
    .optional_params = 0,
    .config_size = sizeof(lse_bilinear_config),
    .config_default = &bilinear_default,
    .flags = 0,
    .check = bilinear_check,
    .work_new = bilinear_work_new,
    .work_free = bilinear_work_free,
    .prepare = NULL,
    .eval = bilinear_eval,
    .grad = bilinear_grad,
    .stats_size = bilinear_stats_size,
    .stats = bilinear_stats,
    .solve = bilinear_solve,
    .describe = bilinear_describe,
};

const lse_sim_type *const lse_sim_bilinear = &bilinear_type;
