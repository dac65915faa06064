#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>

#include "gauss-fused-private.h"
#include "gauss_solve-private.h"
#include "sim-clean-private.h"
#include "sim-fused-private.h"
#include "rows-private.h"

/*
 * lse_sim_gaussian: S_ik = log pi_k + log N(x_i; mu_k, Sigma_k).
 * Parent rows are the means mu_k (K, d); params logw (K, 1, optional) and
 * chol (layout by lse_gaussian_config.cov). Derivations and the M-step:
 * docs/sim-gaussian.md.
 */

enum { P_LOGW = LSE_GAUSS_LOGW, P_CHOL = 1, N_PARAM = 2 };

static const char NAME[] = "gaussian";
static const char *const param_names[N_PARAM] = {"logw", "chol"};
static const lse_gaussian_config default_config = {.cov = LSE_COV_FULL};

static lse_status check(const lse_sim_shape *shape, const void *config,
                        char *msg, size_t msg_len)
{
    const lse_status st =
        lse_gauss_check_common(NAME, shape, config, P_CHOL, msg, msg_len);
    if (st != LSE_OK)
        return st;
    if (shape->d_context != 0)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: takes no context (got %zu context "
                              "columns)",
                              NAME, shape->d_context);
    return LSE_OK;
}

static lse_status work_new(const lse_sim_shape *shape, const void *config,
                           void **out)
{
    if (out == NULL)
        return LSE_EFAULT;
    lse_gauss_work *w = NULL;
    const lse_status st = lse_gauss_work_new(shape, config, &w);
    *out = w;
    return st;
}

static lse_status prepare(const lse_sim_args *a)
{
    if (a == NULL || a->work == NULL || a->param == NULL)
        return LSE_EFAULT;
    return lse_gauss_prepare(a->work, a->param[P_LOGW], a->param[P_CHOL],
                             a->parent);
}

/* R (b, d) <- X - 1 mu_k' */
static void residuals(const gsl_matrix *x, const gsl_matrix *mu, size_t k,
                      gsl_matrix *r)
{
    const size_t b = x->size1, d = x->size2;
    const double *m = gsl_matrix_const_ptr(mu, k, 0);
    for (size_t i = 0; i < b; i++) {
        const double *xi = gsl_matrix_const_ptr(x, i, 0);
        double *ri = gsl_matrix_ptr(r, i, 0);
        for (size_t j = 0; j < d; j++)
            ri[j] = xi[j] - m[j];
    }
}

static lse_status eval(const lse_sim_args *a, gsl_matrix *s)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    lse_status st = lse_gauss_check_args(w, a, s);
    if (st != LSE_OK)
        return st;
    if (!w->prepared)
        return LSE_EINTERNAL;
    w->s_clean = 0; /* only the kernels that check their scores set it */
    if (a->child->size1 == 0)
        return LSE_OK;
    const gsl_matrix *x = a->child;

    if (w->cov == LSE_COV_DIAG || w->cov == LSE_COV_SPHERICAL) {
        /* fused: S_ik = c_k - 1/2 sum_j ((x_ij - mu_kj) / l_kj)^2 */
        if (!w->has_offsets)
            return LSE_EINTERNAL;
        return lse_gauss_eval_diag(w, x, s);
    }

    /* full and tied: one GEMM per chunk for every component */
    return lse_gauss_eval_wide(w, x, s);
}

static lse_status grad(const lse_sim_args *a, const gsl_matrix *g,
                       const lse_sim_grads *out)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    lse_status st = lse_gauss_check_args(w, a, g);
    if (st != LSE_OK)
        return st;
    if (out == NULL)
        return LSE_EFAULT;
    if (!w->prepared)
        return LSE_EINTERNAL;
    const size_t b = a->child->size1, d = w->dim, K = w->n_comp;
    if (b == 0)
        return LSE_OK;
    gsl_matrix *gchol = out->param != NULL ? out->param[P_CHOL] : NULL;
    gsl_matrix *glogw = out->param != NULL ? out->param[P_LOGW] : NULL;
    if (out->child != NULL &&
        (out->child->size1 != b || out->child->size2 != d))
        return LSE_EDIM;
    if (out->parent != NULL &&
        (out->parent->size1 != K || out->parent->size2 != d))
        return LSE_EDIM;
    if (gchol != NULL && (gchol->size1 != a->param[P_CHOL]->size1 ||
                          gchol->size2 != a->param[P_CHOL]->size2))
        return LSE_EDIM;

    const int tri = w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED;
    if (tri && (out->child != NULL || out->parent != NULL || gchol != NULL)) {
        st =
            lse_gauss_grad_wide(w, a->child, g, out->child, out->parent, gchol);
        if (st != LSE_OK)
            return st;
    } else if (out->child != NULL || out->parent != NULL || gchol != NULL) {
        gsl_matrix_view r = gsl_matrix_submatrix(w->res, 0, 0, b, d);
        for (size_t k = 0; k < K; k++) {
            residuals(a->child, a->parent, k, &r.matrix);
            /* rows become P_i = G_ik Sigma_k^-1 (x_i - mu_k) */
            st = lse_gauss_grad_resid(w, k, g, &r.matrix, gchol);
            if (st != LSE_OK)
                return st;
            /* dsim/dx = -Sigma^-1 r, dsim/dmu = +Sigma^-1 r */
            if (out->child != NULL) {
                const int rc = gsl_matrix_sub(out->child, &r.matrix);
                if (rc != GSL_SUCCESS)
                    return lse_status_from_gsl(rc);
            }
            if (out->parent != NULL) {
                double *gp = gsl_matrix_ptr(out->parent, k, 0);
                for (size_t i = 0; i < b; i++) {
                    const double *p = gsl_matrix_const_ptr(&r.matrix, i, 0);
                    for (size_t j = 0; j < d; j++)
                        gp[j] += p[j];
                }
            }
        }
    }
    return lse_gauss_grad_logw_tail(w, a->param[P_LOGW], g, glogw);
}

/* acc: N (K) | s1 (K, d) | s2 (lse_gauss_s2_size) for diag and spherical;
 * full and tied: the statistics of lse_gauss_stats_wide for the path
 * prepare chose (same size) */
static size_t stats_size(const lse_sim_shape *shape, const void *config)
{
    const lse_gaussian_config *c =
        config != NULL ? (const lse_gaussian_config *)config : &default_config;
    const size_t K = shape->n_parent, d = shape->d_child;
    return K + K * d + lse_gauss_s2_size(c->cov, K, d);
}

static lse_status stats(const lse_sim_args *a, const gsl_matrix *resp,
                        const gsl_vector *weight, double *acc)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    lse_status st = lse_gauss_check_args(w, a, resp);
    if (st != LSE_OK)
        return st;
    if (acc == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1;
    if (weight != NULL && weight->size != b)
        return LSE_EDIM;
    if (b == 0)
        return LSE_OK;
    /* the kernels need the factor cache of the current parameters; the
     * term's evaluation made it (and the whitened rows of this block) */
    if (!w->prepared || !w->has_offsets) {
        st = prepare(a);
        if (st != LSE_OK)
            return st;
    }
    if (w->cov == LSE_COV_DIAG || w->cov == LSE_COV_SPHERICAL) {
        return lse_gauss_stats_diag(w, a->child, a->parent, resp, weight, acc);
    }
    return lse_gauss_stats_wide(w, a->child, resp, weight, acc);
}

/* Component k's new mean (into w->new_parent) and covariance from its
 * count n_k, its shifted first moments s1 and the second moments acc2;
 * a tied covariance only gathers its pooled scatter in w->pool. */
static lse_status solve_component(lse_gauss_work *w, size_t k, double n_k,
                                  const double *s1, const double *acc2,
                                  const lse_mstep_opts *opts, char *msg,
                                  size_t msg_len)
{
    const size_t d = w->dim;
    lse_status st = LSE_OK;
    double *mu = gsl_matrix_ptr(w->new_parent, k, 0);
    for (size_t j = 0; j < d; j++)
        mu[j] += s1[j] / n_k; /* m = s1 / N_k is the shift of the mean */
    switch (w->cov) {
    case LSE_COV_FULL: {
        /* Sigma = s2 / N_k - m m' */
        const double *s2 = acc2 + k * d * d;
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j <= i; j++) {
                const double v =
                    s2[i * d + j] / n_k - (s1[i] / n_k) * (s1[j] / n_k);
                gsl_matrix_set(w->dd, i, j, v);
                gsl_matrix_set(w->dd, j, i, v);
            }
        st = lse_gauss_chol_from_cov(w, NAME, k, w->dd, opts->reg_covar, n_k,
                                     msg, msg_len);
        break;
    }
    case LSE_COV_TIED:
        /* pooled scatter about the new means: s2 - s1 s1' / N_k */
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                *gsl_matrix_ptr(w->pool, i, j) -= s1[i] * s1[j] / n_k;
        break;
    case LSE_COV_DIAG: {
        double *v = gsl_matrix_ptr(w->dd, 0, 0);
        const double *s2 = acc2 + k * d;
        for (size_t j = 0; j < d; j++)
            v[j] = s2[j] / n_k - (s1[j] / n_k) * (s1[j] / n_k);
        st = lse_gauss_chol_from_var(w, NAME, k, v, opts->reg_covar, n_k, msg,
                                     msg_len);
        break;
    }
    case LSE_COV_SPHERICAL: {
        double m2 = 0.0;
        for (size_t j = 0; j < d; j++)
            m2 += (s1[j] / n_k) * (s1[j] / n_k);
        double v = (acc2[k] / n_k - m2) / (double)d;
        st = lse_gauss_chol_from_var(w, NAME, k, &v, opts->reg_covar, n_k, msg,
                                     msg_len);
        break;
    }
    }
    return st;
}

static lse_status solve(const lse_sim_args *a, const double *acc,
                        gsl_matrix *parent, gsl_matrix *const *param,
                        const lse_mstep_opts *opts, lse_mstep_report *report,
                        char *msg, size_t msg_len)
{
    lse_status st = lse_gauss_solve_begin(a, acc, parent, param, P_CHOL,
                                          P_LOGW, 0, NAME, msg, msg_len);
    if (st != LSE_OK)
        return st;
    lse_gauss_work *w = a->work;
    const size_t d = w->dim, K = w->n_comp;
    const lse_cov_type cov = w->cov;
    const gsl_matrix *chol = a->param[P_CHOL];
    lse_mstep_opts o;
    st = lse_gauss_opts(NAME, opts, &o, msg, msg_len);
    if (st != LSE_OK)
        return st;
    double total = 0.0;
    st = lse_gauss_check_counts(NAME, acc,
                                K + K * d + lse_gauss_s2_size(cov, K, d), K,
                                &total, msg, msg_len);
    if (st != LSE_OK)
        return st;

    const double *acc1 = acc + K, *acc2 = acc + K + K * d;
    /* the statistics of the path prepare chose -> moments shifted by the
     * current means */
    if (!w->moments && lse_gauss_moments(w, a->parent, chol, acc,
                                         w->mom1->data, w->mom2->data)) {
        acc1 = w->mom1->data;
        acc2 = w->mom2->data;
    }
    /* everything goes to scratch first: nothing is written on failure */
    int rc = GSL_SUCCESS;
    if (w->new_parent->size1 != a->parent->size1 ||
        w->new_parent->size2 != a->parent->size2 ||
        w->new_chol->size1 != chol->size1 || w->new_chol->size2 != chol->size2)
        rc = GSL_EBADLEN; /* as gsl_matrix_memcpy's */
    if (rc == GSL_SUCCESS) {
        lse_copy_rows(w->new_parent, a->parent);
        lse_copy_rows(w->new_chol, chol);
    }
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc), "%s: %s",
                              NAME, gsl_strerror(rc));
    if (lse_gauss_mclust_active(w)) {
        /* mclust's constrained models: means here, covariances there */
        for (size_t k = 0; k < K; k++)
            if (!lse_gauss_is_empty(acc[k], o.min_count))
                for (size_t j = 0; j < d; j++)
                    *gsl_matrix_ptr(w->new_parent, k, j) +=
                        acc1[k * d + j] / acc[k];
        st = lse_gauss_mclust_solve(w, NAME, acc, acc1, acc2, &o, msg,
                                    msg_len);
        if (st != LSE_OK)
            return st;
        goto commit;
    }
    if (cov == LSE_COV_TIED)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(w->pool, i, j, acc2[i * d + j]);

    for (size_t k = 0; k < K; k++) {
        const double n_k = acc[k];
        if (lse_gauss_is_empty(n_k, o.min_count))
            continue;
        st = solve_component(w, k, n_k, acc1 + k * d, acc2, &o, msg,
                             msg_len);
        if (st != LSE_OK)
            return st;
    }
    if (cov == LSE_COV_TIED) {
        st = lse_gauss_solve_pooled(w, NAME, total, o.reg_covar, msg, msg_len);
        if (st != LSE_OK)
            return st;
    }

commit:
    return lse_gauss_solve_commit(w, NAME, acc, o.min_count, parent,
                                  param[P_CHOL], NULL, param[P_LOGW], report,
                                  msg, msg_len);
}

/* The fused block pass (sim-fused-private.h): diagonal covariances on the
 * quadratic path with the kernels of gauss_diag_fused.c, blocks of at
 * least 4 rows (shorter ones are scored by a GEMM in eval). */
int lse_gaussian_fused(const lse_sim_args *a, const double *weight,
                       double *lse, double *acc)
{
    lse_gauss_work *w = a->work;
    const gsl_matrix *x = a->child;
    if (w == NULL || w->fused == NULL || !w->prepared || !w->has_offsets ||
        !w->fast || x->size1 < 4 || x->size1 > w->block ||
        x->size2 != w->dim)
        return 0;
    const lse_gauss_fused f = {
        .b = x->size1, .d = w->dim, .K = w->n_comp, .kp = w->qcoef->tda,
        .x = x->data, .xt = x->tda, .c = w->center->data,
        .q = w->qcoef->data, .w = weight, .lse = lse, .acc = acc,
        .scratch = w->fused};
    return lse_gauss_fused_run(&f, w->fused_isa) == 0;
}

static const lse_sim_type gaussian_type = {
    .name = NAME,
    .n_param = N_PARAM,
    .param_names = param_names,
    .optional_params = 1u << P_LOGW,
    .config_size = sizeof(lse_gaussian_config),
    .config_default = &default_config,
    .flags = 0,
    .check = check,
    .work_new = work_new,
    .work_free = lse_gauss_work_free,
    .prepare = prepare,
    .eval = eval,
    .grad = grad,
    .stats_size = stats_size,
    .stats = stats,
    .solve = solve,
    .describe = lse_gauss_describe,
};

const lse_sim_type *const lse_sim_gaussian = &gaussian_type;

/* sim-clean-private.h: the full/tied quadratic E-step (AVX-512) checks the
 * scores it writes (lse_gauss_qfull_eval_avx512); every other path leaves
 * the check to the term. */
static int clean(const lse_sim_args *a)
{
    const lse_gauss_work *w = a != NULL ? a->work : NULL;
    return w != NULL && w->s_clean;
}

lse_sim_clean_fn lse_sim_clean_find(const lse_sim_type *type)
{
    return type == &gaussian_type ? clean : NULL;
}
