#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "slds-private.h"

/* The SLDS model object: configuration, parameters (getters and setters
 * over the stored logits and covariance factors), simulation, results. */

#define SYM_TOL                                                                \
    1e-12 /* relative symmetry / equality tolerance of                         \
             covariance setters */

void slds_clear_err(lse_error *err)
{
    if (err != NULL) {
        err->status = LSE_OK;
        err->message[0] = '\0';
    }
}

/* ------------------------------------------------------------------ */
/* Model object                                                        */

lse_slds_config lse_slds_config_default(void)
{
    lse_slds_config c = {
        .n_modes = 2, .dim = 1, .lags = 1, .markov = 0, .cov = LSE_COV_FULL};
    return c;
}

void lse_slds_free(lse_slds *m)
{
    if (m == NULL)
        return;
    gsl_matrix_free(m->logw);
    gsl_matrix_free(m->a);
    gsl_matrix_free(m->b);
    gsl_matrix_free(m->chol);
    gsl_matrix_free(m->init);
    gsl_matrix_free(m->trans);
    gsl_matrix_free(m->states);
    free(m);
}

/* Allocation only (no validation) with the default parameter values. */
lse_slds *slds_model_alloc(size_t K, size_t d, size_t L, size_t p,
                           int markov, lse_cov_type cov)
{
    lse_slds *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->K = K;
    m->d = d;
    m->L = L;
    m->p = p;
    m->markov = markov != 0;
    m->cov = cov;
    m->logw = gsl_matrix_calloc(K, 1);
    m->a = gsl_matrix_calloc(K, d * (d * L + p));
    m->b = gsl_matrix_calloc(K, d);
    m->chol =
        gsl_matrix_calloc(lse_cov_chol_rows(cov, K), lse_cov_chol_cols(cov, d));
    m->init = gsl_matrix_calloc(1, K);
    m->trans = gsl_matrix_calloc(K, K);
    if (m->logw == NULL || m->a == NULL || m->b == NULL || m->chol == NULL ||
        m->init == NULL || m->trans == NULL) {
        lse_slds_free(m);
        return NULL;
    }
    lse_cov_chol_scaled_identity(cov, d, 1.0, m->chol);
    m->loglik = NAN;
    return m;
}

lse_status lse_slds_new(const lse_slds_config *cfg, lse_slds **out,
                        lse_error *err)
{
    static const char fn[] = "lse_slds_new";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output pointer");
    *out = NULL;
    if (cfg == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL config");
    if (cfg->n_modes < 1)
        return lse_error_set(err, LSE_EINVAL, fn, "K = %zu modes, need K >= 1",
                             cfg->n_modes);
    if (cfg->dim < 1)
        return lse_error_set(err, LSE_EINVAL, fn, "dimension d = 0");
    if (cfg->lags < 1)
        return lse_error_set(err, LSE_EINVAL, fn, "lags L = 0, need L >= 1");
    if (lse_cov_chol_cols(cfg->cov, cfg->dim) == 0)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown covariance type %d",
                             (int)cfg->cov);
    const unsigned all = LSE_SLDS_SHARE_INTERCEPT | LSE_SLDS_SHARE_AR |
                         LSE_SLDS_SHARE_EXOG;
    if ((cfg->shared & ~all) != 0u)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown shared flags 0x%x",
                             cfg->shared & ~all);
    if ((cfg->shared & LSE_SLDS_SHARE_EXOG) != 0u && cfg->n_exog == 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "LSE_SLDS_SHARE_EXOG without exogenous "
                             "regressors (n_exog = 0)");
    /* K d (d L + p) entries of A */
    if (cfg->dim > 1000000 || cfg->lags > 1000000 || cfg->n_exog > 1000000 ||
        cfg->n_modes > 1000000 ||
        (double)cfg->n_modes * (double)cfg->dim *
                ((double)cfg->dim * (double)cfg->lags + (double)cfg->n_exog) >
            (double)(SIZE_MAX / sizeof(double)))
        return lse_error_set(err, LSE_EINVAL, fn,
                             "K = %zu, d = %zu, L = %zu, p = %zu: too large",
                             cfg->n_modes, cfg->dim, cfg->lags, cfg->n_exog);
    lse_slds *m = slds_model_alloc(cfg->n_modes, cfg->dim, cfg->lags,
                                   cfg->n_exog, cfg->markov, cfg->cov);
    if (m == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    m->shared = cfg->shared;
    *out = m;
    return LSE_OK;
}

size_t lse_slds_n_modes(const lse_slds *m) { return m ? m->K : 0; }
size_t lse_slds_dim(const lse_slds *m) { return m ? m->d : 0; }
size_t lse_slds_lags(const lse_slds *m) { return m ? m->L : 0; }
int lse_slds_is_markov(const lse_slds *m) { return m ? m->markov : 0; }
size_t lse_slds_n_exog(const lse_slds *m) { return m ? m->p : 0; }
unsigned lse_slds_shared(const lse_slds *m) { return m ? m->shared : 0u; }
lse_cov_type lse_slds_cov_type(const lse_slds *m)
{
    return m ? m->cov : LSE_COV_FULL;
}

/* Copy every parameter of src into dst (same configuration). */
void slds_copy_params(lse_slds *dst, const lse_slds *src)
{
    gsl_matrix_memcpy(dst->logw, src->logw);
    gsl_matrix_memcpy(dst->a, src->a);
    gsl_matrix_memcpy(dst->b, src->b);
    gsl_matrix_memcpy(dst->chol, src->chol);
    gsl_matrix_memcpy(dst->init, src->init);
    gsl_matrix_memcpy(dst->trans, src->trans);
}

/* ------------------------------------------------------------------ */
/* Parameters                                                          */

/* Normalized log-probabilities of a row of logits. */
void slds_log_normalize(const double *logit, size_t n, size_t stride,
                        double *out, size_t out_stride)
{
    const double z = lse_logsumexp(logit, n, stride, 1.0);
    for (size_t i = 0; i < n; i++)
        out[i * out_stride] = logit[i * stride] - z;
}

/* Probabilities p (n, stride) -> logits log(p / sum p). */
static lse_status probs_to_logits(const double *p, size_t n, size_t stride,
                                  double *out, const char *fn, const char *what,
                                  lse_error *err)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = p[i * stride];
        if (!isfinite(v))
            return lse_error_set(err, LSE_ENONFINITE, fn, "%s[%zu] = %g", what,
                                 i, v);
        if (!(v > 0.0))
            return lse_error_set(err, LSE_EDOM, fn, "%s[%zu] = %g, must be > 0",
                                 what, i, v);
        sum += v;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = log(p[i * stride] / sum);
    return LSE_OK;
}

lse_status lse_slds_get_weights(const lse_slds *m, gsl_vector *w)
{
    if (m == NULL || w == NULL)
        return LSE_EFAULT;
    if (m->markov)
        return LSE_ENOTSUP;
    if (w->size != m->K)
        return LSE_EDIM;
    const double z = lse_logsumexp(gsl_matrix_const_ptr(m->logw, 0, 0), m->K,
                                   m->logw->tda, 1.0);
    for (size_t k = 0; k < m->K; k++)
        gsl_vector_set(w, k, exp(gsl_matrix_get(m->logw, k, 0) - z));
    return LSE_OK;
}

lse_status lse_slds_set_weights(lse_slds *m, const gsl_vector *w,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_set_weights";
    slds_clear_err(err);
    if (m == NULL || w == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (m->markov)
        return lse_error_set(
            err, LSE_ENOTSUP, fn,
            "a Markov model has no mixture weights (set the initial "
            "and transition probabilities)");
    if (w->size != m->K)
        return lse_error_set(err, LSE_EDIM, fn, "%zu weights for K = %zu modes",
                             w->size, m->K);
    double *out = malloc(m->K * sizeof *out);
    if (out == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    const lse_status st =
        probs_to_logits(w->data, m->K, w->stride, out, fn, "w", err);
    if (st == LSE_OK)
        for (size_t k = 0; k < m->K; k++)
            gsl_matrix_set(m->logw, k, 0, out[k]);
    free(out);
    return st;
}

lse_status slds_check_finite(const gsl_matrix *x, const char *fn,
                             const char *what, lse_error *err)
{
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isfinite(v))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "%s[%zu,%zu] = %g", what, i, j, v);
        }
    return LSE_OK;
}

lse_status lse_slds_get_a(const lse_slds *m, size_t k, gsl_matrix *a)
{
    if (m == NULL || a == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    const size_t dc = m->d * m->L;
    if (a->size1 != m->d || a->size2 != dc)
        return LSE_EDIM;
    const gsl_matrix_const_view ak = gsl_matrix_const_view_array_with_tda(
        gsl_matrix_const_ptr(m->a, k, 0), m->d, dc, dc + m->p);
    gsl_matrix_memcpy(a, &ak.matrix);
    return LSE_OK;
}

lse_status lse_slds_get_beta(const lse_slds *m, size_t k, gsl_matrix *beta)
{
    if (m == NULL || beta == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    const size_t dc = m->d * m->L;
    if (m->p == 0 || beta->size1 != m->d || beta->size2 != m->p)
        return LSE_EDIM;
    const gsl_matrix_const_view bk = gsl_matrix_const_view_array_with_tda(
        gsl_matrix_const_ptr(m->a, k, dc), m->d, m->p, dc + m->p);
    gsl_matrix_memcpy(beta, &bk.matrix);
    return LSE_OK;
}

lse_status lse_slds_set_beta(lse_slds *m, size_t k, const gsl_matrix *beta,
                             lse_error *err)
{
    static const char fn[] = "lse_slds_set_beta";
    slds_clear_err(err);
    if (m == NULL || beta == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return lse_error_set(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    const size_t dc = m->d * m->L;
    if (m->p == 0 || beta->size1 != m->d || beta->size2 != m->p)
        return lse_error_set(err, LSE_EDIM, fn,
                             "B is %zux%zu, expected d x p = %zux%zu",
                             beta->size1, beta->size2, m->d, m->p);
    const lse_status st = slds_check_finite(beta, fn, "B", err);
    if (st != LSE_OK)
        return st;
    gsl_matrix_view bk = gsl_matrix_view_array_with_tda(
        gsl_matrix_ptr(m->a, k, dc), m->d, m->p, dc + m->p);
    gsl_matrix_memcpy(&bk.matrix, beta);
    return LSE_OK;
}

lse_status lse_slds_set_a(lse_slds *m, size_t k, const gsl_matrix *a,
                          lse_error *err)
{
    static const char fn[] = "lse_slds_set_a";
    slds_clear_err(err);
    if (m == NULL || a == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return lse_error_set(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    const size_t dc = m->d * m->L;
    if (a->size1 != m->d || a->size2 != dc)
        return lse_error_set(err, LSE_EDIM, fn,
                             "A is %zux%zu, expected d x dL = %zux%zu",
                             a->size1, a->size2, m->d, dc);
    const lse_status st = slds_check_finite(a, fn, "A", err);
    if (st != LSE_OK)
        return st;
    gsl_matrix_view ak = gsl_matrix_view_array_with_tda(
        gsl_matrix_ptr(m->a, k, 0), m->d, dc, dc + m->p);
    gsl_matrix_memcpy(&ak.matrix, a);
    return LSE_OK;
}

lse_status lse_slds_get_b(const lse_slds *m, size_t k, gsl_vector *b)
{
    if (m == NULL || b == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    if (b->size != m->d)
        return LSE_EDIM;
    for (size_t j = 0; j < m->d; j++)
        gsl_vector_set(b, j, gsl_matrix_get(m->b, k, j));
    return LSE_OK;
}

lse_status lse_slds_set_b(lse_slds *m, size_t k, const gsl_vector *b,
                          lse_error *err)
{
    static const char fn[] = "lse_slds_set_b";
    slds_clear_err(err);
    if (m == NULL || b == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return lse_error_set(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    if (b->size != m->d)
        return lse_error_set(err, LSE_EDIM, fn, "b has %zu entries, d = %zu",
                             b->size, m->d);
    for (size_t j = 0; j < m->d; j++)
        if (!isfinite(gsl_vector_get(b, j)))
            return lse_error_set(err, LSE_ENONFINITE, fn, "b[%zu] = %g", j,
                                 gsl_vector_get(b, j));
    for (size_t j = 0; j < m->d; j++)
        gsl_matrix_set(m->b, k, j, gsl_vector_get(b, j));
    return LSE_OK;
}

/* Lower factor L_k (d, d) of mode k from the chol parameter. */
static void mode_factor(const lse_slds *m, size_t k, gsl_matrix *l)
{
    const size_t d = m->d;
    const size_t r = m->cov == LSE_COV_TIED ? 0 : k;
    gsl_matrix_set_zero(l);
    for (size_t i = 0; i < d; i++) {
        switch (m->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED:
            for (size_t j = 0; j <= i; j++)
                gsl_matrix_set(l, i, j, gsl_matrix_get(m->chol, r, i * d + j));
            break;
        case LSE_COV_DIAG:
            gsl_matrix_set(l, i, i, gsl_matrix_get(m->chol, r, i));
            break;
        case LSE_COV_SPHERICAL:
            gsl_matrix_set(l, i, i, gsl_matrix_get(m->chol, r, 0));
            break;
        }
    }
}

lse_status lse_slds_get_cov(const lse_slds *m, size_t k, gsl_matrix *cov)
{
    if (m == NULL || cov == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    if (cov->size1 != m->d || cov->size2 != m->d)
        return LSE_EDIM;
    const size_t r = m->cov == LSE_COV_TIED ? 0 : k;
    const gsl_matrix_const_view l =
        gsl_matrix_const_submatrix(m->chol, r, 0, 1, m->chol->size2);
    if (m->cov == LSE_COV_FULL || m->cov == LSE_COV_TIED)
        return lse_cov_from_chol(m->cov, m->d, &l.matrix, cov);
    gsl_matrix_set_zero(cov); /* diag, spherical: Sigma = diag(l^2) */
    for (size_t i = 0; i < m->d; i++) {
        const double li =
            gsl_matrix_get(&l.matrix, 0, m->cov == LSE_COV_DIAG ? i : 0);
        gsl_matrix_set(cov, i, i, li * li);
    }
    return LSE_OK;
}

static int close_rel(double a, double b)
{
    const double scale = fmax(1.0, fmax(fabs(a), fabs(b)));
    return fabs(a - b) <= SYM_TOL * scale;
}

lse_status lse_slds_set_cov(lse_slds *m, size_t k, const gsl_matrix *cov,
                            lse_error *err)
{
    static const char fn[] = "lse_slds_set_cov";
    slds_clear_err(err);
    if (m == NULL || cov == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return lse_error_set(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    const size_t d = m->d;
    if (cov->size1 != d || cov->size2 != d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "covariance is %zux%zu, expected %zux%zu",
                             cov->size1, cov->size2, d, d);
    lse_status st = slds_check_finite(cov, fn, "Sigma", err);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++) {
            const double u = gsl_matrix_get(cov, i, j),
                         v = gsl_matrix_get(cov, j, i);
            if (!close_rel(u, v))
                return lse_error_set(
                    err, LSE_EINVAL, fn,
                    "Sigma is not symmetric: [%zu,%zu] = %g, [%zu,%zu] "
                    "= %g",
                    i, j, u, j, i, v);
            if ((m->cov == LSE_COV_DIAG || m->cov == LSE_COV_SPHERICAL) &&
                u != 0.0)
                return lse_error_set(
                    err, LSE_EINVAL, fn,
                    "%s covariance: off-diagonal entry [%zu,%zu] = %g "
                    "must be 0",
                    m->cov == LSE_COV_DIAG ? "diag" : "spherical", i, j, u);
        }
    if (m->cov == LSE_COV_SPHERICAL)
        for (size_t i = 1; i < d; i++)
            if (!close_rel(gsl_matrix_get(cov, i, i),
                           gsl_matrix_get(cov, 0, 0)))
                return lse_error_set(
                    err, LSE_EINVAL, fn,
                    "spherical covariance: diagonal entries differ "
                    "(%g and %g)",
                    gsl_matrix_get(cov, 0, 0), gsl_matrix_get(cov, i, i));
    gsl_matrix *l = gsl_matrix_alloc(d, d);
    if (l == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    gsl_matrix_memcpy(l, cov);
    const int rc = gsl_linalg_cholesky_decomp1(l);
    if (rc != GSL_SUCCESS) {
        gsl_matrix_free(l);
        return lse_error_set(
            err, rc == GSL_EDOM ? LSE_ENUMERIC : lse_status_from_gsl(rc), fn,
            "Sigma is not positive definite (%s)", gsl_strerror(rc));
    }
    const size_t r = m->cov == LSE_COV_TIED ? 0 : k;
    for (size_t i = 0; i < d; i++) {
        switch (m->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED:
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(m->chol, r, i * d + j,
                               j <= i ? gsl_matrix_get(l, i, j) : 0.0);
            break;
        case LSE_COV_DIAG:
            gsl_matrix_set(m->chol, r, i, gsl_matrix_get(l, i, i));
            break;
        case LSE_COV_SPHERICAL:
            if (i == 0)
                gsl_matrix_set(m->chol, r, 0, gsl_matrix_get(l, 0, 0));
            break;
        }
    }
    gsl_matrix_free(l);
    return LSE_OK;
}

lse_status lse_slds_get_transition(const lse_slds *m, gsl_matrix *p)
{
    if (m == NULL || p == NULL)
        return LSE_EFAULT;
    if (!m->markov)
        return LSE_ENOTSUP;
    if (p->size1 != m->K || p->size2 != m->K)
        return LSE_EDIM;
    for (size_t j = 0; j < m->K; j++) {
        slds_log_normalize(gsl_matrix_const_ptr(m->trans, j, 0), m->K, 1,
                           gsl_matrix_ptr(p, j, 0), 1);
        for (size_t k = 0; k < m->K; k++)
            gsl_matrix_set(p, j, k, exp(gsl_matrix_get(p, j, k)));
    }
    return LSE_OK;
}

lse_status lse_slds_set_transition(lse_slds *m, const gsl_matrix *p,
                                   lse_error *err)
{
    static const char fn[] = "lse_slds_set_transition";
    slds_clear_err(err);
    if (m == NULL || p == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (!m->markov)
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "a mixture has no transition matrix");
    if (p->size1 != m->K || p->size2 != m->K)
        return lse_error_set(err, LSE_EDIM, fn,
                             "P is %zux%zu, expected %zux%zu", p->size1,
                             p->size2, m->K, m->K);
    gsl_matrix *out = gsl_matrix_alloc(m->K, m->K);
    if (out == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_status st = LSE_OK;
    for (size_t j = 0; j < m->K && st == LSE_OK; j++)
        st = probs_to_logits(gsl_matrix_const_ptr(p, j, 0), m->K, 1,
                             gsl_matrix_ptr(out, j, 0), fn, "P row", err);
    if (st == LSE_OK)
        gsl_matrix_memcpy(m->trans, out);
    gsl_matrix_free(out);
    return st;
}

lse_status lse_slds_get_initial(const lse_slds *m, gsl_vector *p0)
{
    if (m == NULL || p0 == NULL)
        return LSE_EFAULT;
    if (!m->markov)
        return LSE_ENOTSUP;
    if (p0->size != m->K)
        return LSE_EDIM;
    const double z =
        lse_logsumexp(gsl_matrix_const_ptr(m->init, 0, 0), m->K, 1, 1.0);
    for (size_t k = 0; k < m->K; k++)
        gsl_vector_set(p0, k, exp(gsl_matrix_get(m->init, 0, k) - z));
    return LSE_OK;
}

lse_status lse_slds_set_initial(lse_slds *m, const gsl_vector *p0,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_set_initial";
    slds_clear_err(err);
    if (m == NULL || p0 == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (!m->markov)
        return lse_error_set(
            err, LSE_ENOTSUP, fn,
            "a mixture has no initial probabilities (set the weights)");
    if (p0->size != m->K)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%zu probabilities for K = %zu modes", p0->size,
                             m->K);
    double *out = malloc(m->K * sizeof *out);
    if (out == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    const lse_status st =
        probs_to_logits(p0->data, m->K, p0->stride, out, fn, "p0", err);
    if (st == LSE_OK)
        for (size_t k = 0; k < m->K; k++)
            gsl_matrix_set(m->init, 0, k, out[k]);
    free(out);
    return st;
}

lse_status lse_slds_set_latent(lse_slds *m, double obs_var, lse_error *err)
{
    static const char fn[] = "lse_slds_set_latent";
    slds_clear_err(err);
    if (m == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL model");
    if (!isfinite(obs_var) || obs_var < 0.0)
        return lse_error_set(
            err, LSE_EDOM, fn,
            "observation variance %g, must be finite and >= 0 (0 "
            "turns the latent states off)",
            obs_var);
    m->obs_var = obs_var;
    return LSE_OK;
}

double lse_slds_obs_var(const lse_slds *m) { return m ? m->obs_var : 0.0; }
const gsl_matrix *lse_slds_states(const lse_slds *m)
{
    return m ? m->states : NULL;
}

/* ------------------------------------------------------------------ */
/* Simulation                                                          */

static size_t draw(gsl_rng *rng, const double *logit, size_t K)
{
    const double z = lse_logsumexp(logit, K, 1, 1.0);
    const double u = gsl_rng_uniform(rng);
    double acc = 0.0;
    for (size_t k = 0; k < K; k++) {
        acc += exp(logit[k] - z);
        if (u < acc)
            return k;
    }
    return K - 1;
}

static lse_status slds_simulate_body(const lse_slds *m, size_t T,
                                     unsigned long seed, gsl_matrix *x,
                                     size_t *modes, lse_error *err)
{
    static const char fn[] = "lse_slds_simulate";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (m == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (T == 0)
        return lse_error_set(err, LSE_EINVAL, fn, "T = 0");
    if (x->size1 != T || x->size2 != m->d + m->p)
        return lse_error_set(err, LSE_EDIM, fn,
                             "output is %zux%zu, expected %zux%zu (T x d%s)",
                             x->size1, x->size2, T, m->d + m->p,
                             m->p > 0 ? " + p" : "");
    const size_t K = m->K, d = m->d, L = m->L, p = m->p, dc = d * L + p;
    for (size_t t = 0; t < T; t++) /* the regressors are input */
        for (size_t j = d; j < d + p; j++)
            if (!isfinite(gsl_matrix_get(x, t, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "regressor x[%zu,%zu] = %g", t, j,
                                     gsl_matrix_get(x, t, j));
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_matrix *fac = gsl_matrix_alloc(K * d, d);
    gsl_vector *z = gsl_vector_alloc(d);
    double *wlogit = malloc(K * sizeof *wlogit);
    if (rng == NULL || fac == NULL || z == NULL || wlogit == NULL) {
        gsl_rng_free(rng);
        gsl_matrix_free(fac);
        gsl_vector_free(z);
        free(wlogit);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_rng_set(rng, seed);
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_view lk = gsl_matrix_submatrix(fac, k * d, 0, d, d);
        mode_factor(m, k, &lk.matrix);
        wlogit[k] = m->markov ? 0.0 : gsl_matrix_get(m->logw, k, 0);
    }
    size_t prev = 0;
    for (size_t t = 0; t < T; t++) {
        size_t k;
        if (!m->markov)
            k = draw(rng, wlogit, K);
        else if (t == 0)
            k = draw(rng, gsl_matrix_const_ptr(m->init, 0, 0), K);
        else
            k = draw(rng, gsl_matrix_const_ptr(m->trans, prev, 0), K);
        prev = k;
        if (modes != NULL)
            modes[t] = k;
        /* noise L_k z */
        for (size_t j = 0; j < d; j++)
            gsl_vector_set(z, j, gsl_ran_gaussian(rng, 1.0));
        const gsl_matrix_const_view lk =
            gsl_matrix_const_submatrix(fac, k * d, 0, d, d);
        gsl_blas_dtrmv(CblasLower, CblasNoTrans, CblasNonUnit, &lk.matrix, z);
        const double *ak = gsl_matrix_const_ptr(m->a, k, 0);
        for (size_t i = 0; i < d; i++) {
            double v = gsl_matrix_get(m->b, k, i) + gsl_vector_get(z, i);
            for (size_t l = 1; l <= L && l <= t; l++)
                for (size_t j = 0; j < d; j++)
                    v += ak[i * dc + (l - 1) * d + j] *
                         gsl_matrix_get(x, t - l, j);
            for (size_t j = 0; j < p; j++)
                v += ak[i * dc + d * L + j] * gsl_matrix_get(x, t, d + j);
            gsl_matrix_set(x, t, i, v);
        }
    }
    gsl_rng_free(rng);
    gsl_matrix_free(fac);
    gsl_vector_free(z);
    free(wlogit);
    return LSE_OK;
}

/* OpenBLAS held serial: the noise's dtrmv would otherwise be split over
 * OpenBLAS's threads at any size, and the draws would round by
 * OPENBLAS_NUM_THREADS */
lse_status lse_slds_simulate(const lse_slds *m, size_t T, unsigned long seed,
                             gsl_matrix *x, size_t *modes, lse_error *err)
{
    const int held = lse_blas_serial_enter();
    const lse_status st = slds_simulate_body(m, T, seed, x, modes, err);
    lse_blas_serial_leave(held);
    return st;
}

/* ------------------------------------------------------------------ */
/* Results                                                             */

double lse_slds_loglik(const lse_slds *m) { return m ? m->loglik : NAN; }
double lse_slds_loglik_per_step(const lse_slds *m)
{
    return m && m->n_steps > 0 ? m->loglik / (double)m->n_steps : NAN;
}
size_t lse_slds_n_fit_steps(const lse_slds *m) { return m ? m->n_steps : 0; }
size_t lse_slds_n_iter(const lse_slds *m) { return m ? m->n_iter : 0; }
int lse_slds_converged(const lse_slds *m) { return m ? m->converged : 0; }
size_t lse_slds_n_increase(const lse_slds *m) { return m ? m->n_increase : 0; }

size_t lse_slds_n_params(const lse_slds *m)
{
    if (m == NULL)
        return 0;
    const size_t K = m->K, d = m->d;
    /* coefficients: once when shared, per mode otherwise */
    const size_t ki = m->shared & LSE_SLDS_SHARE_INTERCEPT ? 1 : K,
                 ka = m->shared & LSE_SLDS_SHARE_AR ? 1 : K,
                 ke = m->shared & LSE_SLDS_SHARE_EXOG ? 1 : K;
    size_t p = ka * d * d * m->L + ki * d + ke * d * m->p;
    switch (m->cov) {
    case LSE_COV_FULL:
        p += K * d * (d + 1) / 2;
        break;
    case LSE_COV_DIAG:
        p += K * d;
        break;
    case LSE_COV_SPHERICAL:
        p += K;
        break;
    case LSE_COV_TIED:
        p += d * (d + 1) / 2;
        break;
    }
    p += m->markov ? (K - 1) + K * (K - 1) : K - 1;
    return p;
}

double lse_slds_bic(const lse_slds *m)
{
    if (m == NULL || m->n_steps == 0)
        return NAN;
    return -2.0 * m->loglik +
           (double)lse_slds_n_params(m) * log((double)m->n_steps);
}

double lse_slds_aic(const lse_slds *m)
{
    if (m == NULL || m->n_steps == 0)
        return NAN;
    return -2.0 * m->loglik + 2.0 * (double)lse_slds_n_params(m);
}
