#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>

#include "gauss-private.h"

/* Shared code of the Gaussian family: factor cache, residual scoring,
 * gradients through the residuals and the covariance part of the M-step.
 * Derivations: docs/sim-gaussian.md. */

static const lse_gaussian_config default_config = {.cov = LSE_COV_FULL};

/* M-step defaults when the caller passes no options (as
 * lse_mstep_opts_default). */
#define DEFAULT_REG_COVAR 1e-6
#define DEFAULT_MIN_COUNT 1e-10

static lse_cov_type config_cov(const void *config)
{
    const lse_gaussian_config *c =
        config != NULL ? (const lse_gaussian_config *)config : &default_config;
    return c->cov;
}

lse_status lse_gauss_fail(char *msg, size_t msg_len, lse_status st,
                          const char *fmt, ...)
{
    if (msg != NULL && msg_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_len, fmt, ap);
        va_end(ap);
    }
    return st;
}

const char *lse_gauss_cov_name(lse_cov_type cov)
{
    switch (cov) {
    case LSE_COV_FULL:
        return "full";
    case LSE_COV_DIAG:
        return "diag";
    case LSE_COV_SPHERICAL:
        return "spherical";
    case LSE_COV_TIED:
        return "tied";
    }
    return NULL;
}

size_t lse_gauss_chol_cols(lse_cov_type cov, size_t d)
{
    switch (cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED:
        return d * d;
    case LSE_COV_DIAG:
        return d;
    case LSE_COV_SPHERICAL:
        return 1;
    }
    return 0;
}

size_t lse_gauss_chol_rows(lse_cov_type cov, size_t n_comp)
{
    return cov == LSE_COV_TIED ? 1 : n_comp;
}

static const char *chol_expect(lse_cov_type cov)
{
    switch (cov) {
    case LSE_COV_FULL:
        return "K x d*d";
    case LSE_COV_TIED:
        return "1 x d*d";
    case LSE_COV_DIAG:
        return "K x d";
    case LSE_COV_SPHERICAL:
        return "K x 1";
    }
    return "?";
}

lse_status lse_gauss_check_common(const char *name, const lse_sim_shape *shape,
                                  const void *config, size_t chol_index,
                                  char *msg, size_t msg_len)
{
    if (shape == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EFAULT, "%s: NULL shape",
                              name);
    const lse_cov_type cov = config_cov(config);
    if (lse_gauss_cov_name(cov) == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: unknown covariance type %d (expected "
                              "full, diag, spherical or tied)",
                              name, (int)cov);
    const size_t K = shape->n_parent, d = shape->d_child;
    if (K == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: no components (0 parent rows)", name);
    if (d == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: children have 0 columns", name);
    if (shape->d_parent != d)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: parents have %zu columns, children %zu "
                              "(they must match)",
                              name, shape->d_parent, d);
    if (shape->n_param <= chol_index || shape->param_rows == NULL ||
        shape->param_cols == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: expected %zu parameters, got %zu", name,
                              chol_index + 1, shape->n_param);
    const size_t wr = shape->param_rows[LSE_GAUSS_LOGW];
    const size_t wc = shape->param_cols[LSE_GAUSS_LOGW];
    if (wr != 0 && (wr != K || wc != 1))
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: logw is %zux%zu, expected K x 1 = %zux1",
                              name, wr, wc, K);
    const size_t cr = shape->param_rows[chol_index];
    const size_t cc = shape->param_cols[chol_index];
    if (cr == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: the chol parameter is required", name);
    const size_t er = lse_gauss_chol_rows(cov, K);
    const size_t ec = lse_gauss_chol_cols(cov, d);
    if (cr != er || cc != ec)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: chol is %zux%zu, expected %s = %zux%zu "
                              "(cov=%s)",
                              name, cr, cc, chol_expect(cov), er, ec,
                              lse_gauss_cov_name(cov));
    return LSE_OK;
}

void lse_gauss_work_free(void *work)
{
    lse_gauss_work *w = work;
    if (w == NULL)
        return;
    gsl_vector_free(w->logpi);
    gsl_vector_free(w->cnst);
    gsl_matrix_free(w->fac);
    gsl_matrix_free(w->inv);
    gsl_matrix_free(w->res);
    gsl_matrix_free(w->tmp);
    gsl_matrix_free(w->aug);
    gsl_matrix_free(w->augw);
    gsl_vector_free(w->rw);
    gsl_matrix_free(w->dd);
    gsl_vector_free(w->colsum);
    gsl_matrix_free(w->new_parent);
    gsl_matrix_free(w->new_chol);
    gsl_matrix_free(w->new_a);
    gsl_matrix_free(w->pool);
    gsl_matrix_free(w->sxx);
    gsl_matrix_free(w->delta);
    gsl_vector_free(w->rcond_work);
    free(w);
}

lse_status lse_gauss_work_new(const lse_sim_shape *shape, const void *config,
                              lse_gauss_work **out)
{
    if (shape == NULL || out == NULL)
        return LSE_EFAULT;
    *out = NULL;
    lse_gsl_quiet();
    const lse_cov_type cov = config_cov(config);
    if (lse_gauss_cov_name(cov) == NULL)
        return LSE_EINVAL;
    const size_t K = shape->n_parent, d = shape->d_child;
    const size_t dc = shape->d_context;
    size_t block = shape->block != 0 ? shape->block : shape->n_child;
    if (block == 0)
        block = 1;
    if (K == 0 || d == 0)
        return LSE_EDIM;
    lse_gauss_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->cov = cov;
    w->n_comp = K;
    w->dim = d;
    w->dim_ctx = dc;
    w->block = block;
    w->prepared = 0;
    int ok = (w->logpi = gsl_vector_calloc(K)) != NULL &&
             (w->cnst = gsl_vector_calloc(K)) != NULL &&
             (w->res = gsl_matrix_alloc(block, d)) != NULL &&
             (w->tmp = gsl_matrix_alloc(block, d)) != NULL &&
             (w->rw = gsl_vector_alloc(block)) != NULL &&
             (w->dd = gsl_matrix_calloc(d, d)) != NULL &&
             (w->colsum = gsl_vector_alloc(K)) != NULL &&
             (w->new_parent = gsl_matrix_alloc(K, d)) != NULL &&
             (w->new_chol = gsl_matrix_alloc(lse_gauss_chol_rows(cov, K),
                                             lse_gauss_chol_cols(cov, d))) !=
                 NULL;
    if (ok && (cov == LSE_COV_FULL || cov == LSE_COV_TIED))
        ok = (w->fac = gsl_matrix_calloc(cov == LSE_COV_FULL ? K * d : d,
                                         d)) != NULL &&
             (w->pool = gsl_matrix_calloc(d, d)) != NULL;
    else if (ok)
        ok = (w->inv = gsl_matrix_calloc(K, cov == LSE_COV_DIAG ? d : 1)) !=
             NULL;
    if (ok && dc > 0)
        ok = (w->aug = gsl_matrix_alloc(block, dc + 1)) != NULL &&
             (w->augw = gsl_matrix_alloc(block, dc + 1)) != NULL &&
             (w->new_a = gsl_matrix_alloc(K, d * dc)) != NULL &&
             (w->sxx = gsl_matrix_alloc(dc + 1, dc + 1)) != NULL &&
             (w->delta = gsl_matrix_alloc(d, dc + 1)) != NULL &&
             (w->rcond_work = gsl_vector_alloc(3 * (dc + 1))) != NULL;
    if (!ok) {
        lse_gauss_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

lse_status lse_gauss_prepare(lse_gauss_work *w, const gsl_matrix *logw,
                             const gsl_matrix *chol)
{
    if (w == NULL || chol == NULL)
        return LSE_EFAULT;
    w->prepared = 0;
    const size_t K = w->n_comp, d = w->dim;
    if (chol->size1 != lse_gauss_chol_rows(w->cov, K) ||
        chol->size2 != lse_gauss_chol_cols(w->cov, d))
        return LSE_EDIM;

    /* log pi_k = logw_k - logsumexp(logw); -INFINITY (log 0) is legal */
    if (logw != NULL) {
        if (logw->size1 != K || logw->size2 != 1)
            return LSE_EDIM;
        for (size_t k = 0; k < K; k++) {
            const double v = gsl_matrix_get(logw, k, 0);
            if (isnan(v) || v == INFINITY)
                return LSE_ENONFINITE;
        }
        const double lse = lse_logsumexp(logw->data, K, logw->tda, 1.0);
        if (lse == -INFINITY)
            return LSE_EDOM; /* every weight is zero */
        for (size_t k = 0; k < K; k++)
            gsl_vector_set(w->logpi, k, gsl_matrix_get(logw, k, 0) - lse);
    } else {
        gsl_vector_set_zero(w->logpi);
    }

    const double log2pi_d = (double)d * log(2.0 * M_PI);
    double tied_logdet = 0.0;
    for (size_t k = 0; k < K; k++) {
        double logdet = 0.0; /* log det Sigma_k = 2 sum_j log |L_jj| */
        switch (w->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED: {
            if (w->cov == LSE_COV_TIED && k > 0) {
                logdet = tied_logdet; /* one factor for every k */
                break;
            }
            const double *row = gsl_matrix_const_ptr(chol, k, 0);
            for (size_t i = 0; i < d; i++) {
                double *f = gsl_matrix_ptr(w->fac, k * d + i, 0);
                for (size_t j = 0; j <= i; j++) {
                    const double v = row[i * d + j];
                    if (!isfinite(v))
                        return LSE_ENONFINITE;
                    f[j] = v;
                }
                if (f[i] == 0.0)
                    return LSE_ENUMERIC;
                logdet += 2.0 * log(fabs(f[i]));
            }
            tied_logdet = logdet;
            break;
        }
        case LSE_COV_DIAG:
        case LSE_COV_SPHERICAL: {
            const size_t nc = w->inv->size2;
            for (size_t j = 0; j < nc; j++) {
                const double v = gsl_matrix_get(chol, k, j);
                if (!isfinite(v))
                    return LSE_ENONFINITE;
                if (v == 0.0)
                    return LSE_ENUMERIC;
                gsl_matrix_set(w->inv, k, j, 1.0 / v);
                logdet += 2.0 * log(fabs(v));
            }
            if (w->cov == LSE_COV_SPHERICAL)
                logdet *= (double)d;
            break;
        }
        }
        gsl_vector_set(w->cnst, k,
                       gsl_vector_get(w->logpi, k) - 0.5 * (log2pi_d + logdet));
    }
    w->prepared = 1;
    return LSE_OK;
}

static _gsl_matrix_const_view factor(const lse_gauss_work *w, size_t k)
{
    const size_t d = w->dim;
    return gsl_matrix_const_submatrix(w->fac, w->cov == LSE_COV_TIED ? 0 : k * d,
                                      0, d, d);
}

lse_status lse_gauss_score(const lse_gauss_work *w, size_t k, gsl_matrix *r,
                           gsl_matrix *s)
{
    const size_t b = r->size1, d = w->dim;
    const double c = gsl_vector_get(w->cnst, k);
    switch (w->cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        /* Z = R L^-T: row i is (L^-1 r_i)' */
        const gsl_matrix_const_view L = factor(w, k);
        const int rc = gsl_blas_dtrsm(CblasRight, CblasLower, CblasTrans,
                                      CblasNonUnit, 1.0, &L.matrix, r);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            const double *z = gsl_matrix_const_ptr(r, i, 0);
            double q = 0.0;
            for (size_t j = 0; j < d; j++)
                q += z[j] * z[j];
            gsl_matrix_set(s, i, k, c - 0.5 * q);
        }
        break;
    }
    case LSE_COV_DIAG: {
        const double *inv = gsl_matrix_const_ptr(w->inv, k, 0);
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            double q = 0.0;
            for (size_t j = 0; j < d; j++) {
                const double z = x[j] * inv[j];
                q += z * z;
            }
            gsl_matrix_set(s, i, k, c - 0.5 * q);
        }
        break;
    }
    case LSE_COV_SPHERICAL: {
        const double inv = gsl_matrix_get(w->inv, k, 0);
        const double inv2 = inv * inv;
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            double q = 0.0;
            for (size_t j = 0; j < d; j++)
                q += x[j] * x[j];
            gsl_matrix_set(s, i, k, c - 0.5 * inv2 * q);
        }
        break;
    }
    }
    return LSE_OK;
}

lse_status lse_gauss_grad_resid(lse_gauss_work *w, size_t k,
                                const gsl_matrix *g, gsl_matrix *r,
                                gsl_matrix *gchol)
{
    const size_t b = r->size1, d = w->dim;
    double gsum = 0.0;
    for (size_t i = 0; i < b; i++)
        gsum += gsl_matrix_get(g, i, k);
    switch (w->cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        const gsl_matrix_const_view L = factor(w, k);
        gsl_matrix_view z = gsl_matrix_submatrix(w->tmp, 0, 0, b, d);
        /* Z = R L^-T (rows z_i = L^-1 r_i), then R <- Z L^-1 (rows
         * L^-T z_i = Sigma^-1 r_i), scaled by g_i */
        int rc = gsl_matrix_memcpy(&z.matrix, r);
        if (rc == GSL_SUCCESS)
            rc = gsl_blas_dtrsm(CblasRight, CblasLower, CblasTrans,
                                CblasNonUnit, 1.0, &L.matrix, &z.matrix);
        if (rc == GSL_SUCCESS)
            rc = gsl_matrix_memcpy(r, &z.matrix);
        if (rc == GSL_SUCCESS)
            rc = gsl_blas_dtrsm(CblasRight, CblasLower, CblasNoTrans,
                                CblasNonUnit, 1.0, &L.matrix, r);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            gsl_vector_view row = gsl_matrix_row(r, i);
            gsl_vector_scale(&row.vector, gsl_matrix_get(g, i, k));
        }
        if (gchol == NULL)
            break;
        /* dE/dL = lower(sum_i g_i (Sigma^-1 r_i) z_i') - gsum diag(1/L) */
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, r, &z.matrix, 0.0,
                            w->dd);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        double *out = gsl_matrix_ptr(gchol, w->cov == LSE_COV_TIED ? 0 : k, 0);
        for (size_t i = 0; i < d; i++) {
            const double *m = gsl_matrix_const_ptr(w->dd, i, 0);
            for (size_t j = 0; j < i; j++)
                out[i * d + j] += m[j];
            out[i * d + i] += m[i] - gsum / gsl_matrix_get(&L.matrix, i, i);
        }
        break;
    }
    case LSE_COV_DIAG: {
        /* dsim/dl_j = (r_j^2 / l_j^2 - 1) / l_j */
        const double *inv = gsl_matrix_const_ptr(w->inv, k, 0);
        double *acc = gsl_matrix_ptr(w->dd, 0, 0); /* d entries */
        for (size_t j = 0; j < d; j++)
            acc[j] = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double gi = gsl_matrix_get(g, i, k);
            double *x = gsl_matrix_ptr(r, i, 0);
            for (size_t j = 0; j < d; j++) {
                const double gr = gi * x[j];
                acc[j] += gr * x[j];
                x[j] = gr * inv[j] * inv[j];
            }
        }
        if (gchol != NULL) {
            double *out = gsl_matrix_ptr(gchol, k, 0);
            for (size_t j = 0; j < d; j++)
                out[j] += acc[j] * inv[j] * inv[j] * inv[j] - gsum * inv[j];
        }
        break;
    }
    case LSE_COV_SPHERICAL: {
        /* dsim/dl = ||r||^2 / l^3 - d / l */
        const double inv = gsl_matrix_get(w->inv, k, 0);
        const double inv2 = inv * inv;
        double acc = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double gi = gsl_matrix_get(g, i, k);
            double *x = gsl_matrix_ptr(r, i, 0);
            double q = 0.0;
            for (size_t j = 0; j < d; j++) {
                q += x[j] * x[j];
                x[j] *= gi * inv2;
            }
            acc += gi * q;
        }
        if (gchol != NULL)
            *gsl_matrix_ptr(gchol, k, 0) +=
                acc * inv2 * inv - gsum * (double)d * inv;
        break;
    }
    }
    return LSE_OK;
}

void lse_gauss_grad_logw(lse_gauss_work *w, const gsl_matrix *g,
                         gsl_matrix *glogw)
{
    const size_t K = w->n_comp, b = g->size1;
    gsl_vector_set_zero(w->colsum);
    double *cs = w->colsum->data;
    const size_t stride = w->colsum->stride;
    for (size_t i = 0; i < b; i++) {
        const double *row = gsl_matrix_const_ptr(g, i, 0);
        for (size_t k = 0; k < K; k++)
            cs[k * stride] += row[k];
    }
    double total = 0.0;
    for (size_t k = 0; k < K; k++)
        total += cs[k * stride];
    for (size_t k = 0; k < K; k++) {
        const double pi = exp(gsl_vector_get(w->logpi, k));
        *gsl_matrix_ptr(glogw, k, 0) += cs[k * stride] - pi * total;
    }
}

lse_status lse_gauss_check_args(const lse_gauss_work *w, const lse_sim_args *a,
                                const gsl_matrix *bk)
{
    if (w == NULL || a == NULL || a->child == NULL || a->parent == NULL ||
        a->param == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1;
    if (b > w->block || a->child->size2 != w->dim ||
        a->parent->size1 != w->n_comp || a->parent->size2 != w->dim)
        return LSE_EDIM;
    if (bk != NULL && (bk->size1 != b || bk->size2 != w->n_comp))
        return LSE_EDIM;
    if (w->dim_ctx > 0) {
        if (a->context == NULL)
            return LSE_EFAULT;
        if (a->context->size1 != b || a->context->size2 != w->dim_ctx)
            return LSE_EDIM;
    }
    return LSE_OK;
}

size_t lse_gauss_s2_size(lse_cov_type cov, size_t n_comp, size_t d)
{
    switch (cov) {
    case LSE_COV_FULL:
        return n_comp * d * d;
    case LSE_COV_TIED:
        return d * d;
    case LSE_COV_DIAG:
        return n_comp * d;
    case LSE_COV_SPHERICAL:
        return n_comp;
    }
    return 0;
}

double lse_gauss_row_weights(const gsl_matrix *resp, size_t k,
                             const gsl_vector *weight, gsl_vector *rw)
{
    double sum = 0.0;
    for (size_t i = 0; i < resp->size1; i++) {
        double v = gsl_matrix_get(resp, i, k);
        if (weight != NULL)
            v *= gsl_vector_get(weight, i);
        gsl_vector_set(rw, i, v);
        sum += v;
    }
    return sum;
}

lse_status lse_gauss_stats_s2(lse_gauss_work *w, size_t k,
                              const gsl_matrix *r, const gsl_vector *rw,
                              double *acc2)
{
    const size_t b = r->size1, d = w->dim;
    switch (w->cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        /* s2 += R' diag(rw) R */
        gsl_matrix_view t = gsl_matrix_submatrix(w->tmp, 0, 0, b, d);
        int rc = gsl_matrix_memcpy(&t.matrix, r);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            gsl_vector_view row = gsl_matrix_row(&t.matrix, i);
            gsl_vector_scale(&row.vector, gsl_vector_get(rw, i));
        }
        gsl_matrix_view c = gsl_matrix_view_array(
            acc2 + (w->cov == LSE_COV_TIED ? 0 : k * d * d), d, d);
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, r, &t.matrix, 1.0,
                            &c.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        break;
    }
    case LSE_COV_DIAG: {
        double *c = acc2 + k * d;
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            const double ri = gsl_vector_get(rw, i);
            for (size_t j = 0; j < d; j++)
                c[j] += ri * x[j] * x[j];
        }
        break;
    }
    case LSE_COV_SPHERICAL: {
        double q = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            double qi = 0.0;
            for (size_t j = 0; j < d; j++)
                qi += x[j] * x[j];
            q += gsl_vector_get(rw, i) * qi;
        }
        acc2[k] += q;
        break;
    }
    }
    return LSE_OK;
}

lse_status lse_gauss_opts(const char *name, const lse_mstep_opts *opts,
                          lse_mstep_opts *out, char *msg, size_t msg_len)
{
    lse_mstep_opts o = {.reg_covar = DEFAULT_REG_COVAR,
                        .min_count = DEFAULT_MIN_COUNT};
    if (opts != NULL)
        o = *opts;
    if (!(o.reg_covar >= 0.0) || !isfinite(o.reg_covar))
        return lse_gauss_fail(msg, msg_len, LSE_EDOM,
                              "%s: reg_covar must be finite and >= 0 (got %g)",
                              name, o.reg_covar);
    if (!(o.min_count >= 0.0) || !isfinite(o.min_count))
        return lse_gauss_fail(msg, msg_len, LSE_EDOM,
                              "%s: min_count must be finite and >= 0 (got %g)",
                              name, o.min_count);
    *out = o;
    return LSE_OK;
}

static lse_status not_pd(const char *name, size_t k, int tied, double n_k,
                         double reg_covar, char *msg, size_t msg_len)
{
    if (tied)
        return lse_gauss_fail(msg, msg_len, LSE_ENUMERIC,
                              "%s: the tied covariance is not positive "
                              "definite; use a larger reg_covar (now %g)",
                              name, reg_covar);
    return lse_gauss_fail(msg, msg_len, LSE_ENUMERIC,
                          "%s: component %zu: covariance is not positive "
                          "definite (N_k = %g); use a larger reg_covar "
                          "(now %g)",
                          name, k, n_k, reg_covar);
}

lse_status lse_gauss_chol_from_cov(lse_gauss_work *w, const char *name,
                                   size_t k, gsl_matrix *c, double reg_covar,
                                   double n_k, char *msg, size_t msg_len)
{
    const size_t d = w->dim;
    for (size_t i = 0; i < d; i++)
        *gsl_matrix_ptr(c, i, i) += reg_covar;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++)
            if (!isfinite(gsl_matrix_get(c, i, j)))
                return not_pd(name, k, w->cov == LSE_COV_TIED, n_k, reg_covar,
                              msg, msg_len);
    const int rc = gsl_linalg_cholesky_decomp1(c);
    if (rc == GSL_EDOM)
        return not_pd(name, k, w->cov == LSE_COV_TIED, n_k, reg_covar, msg,
                      msg_len);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc),
                              "%s: Cholesky factorization failed: %s", name,
                              gsl_strerror(rc));
    double *out = gsl_matrix_ptr(w->new_chol, k, 0);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            out[i * d + j] = j <= i ? gsl_matrix_get(c, i, j) : 0.0;
    return LSE_OK;
}

lse_status lse_gauss_chol_from_var(lse_gauss_work *w, const char *name,
                                   size_t k, double *v, double reg_covar,
                                   double n_k, char *msg, size_t msg_len)
{
    const size_t n = w->cov == LSE_COV_DIAG ? w->dim : 1;
    for (size_t j = 0; j < n; j++) {
        const double var = v[j] + reg_covar;
        if (!(var > 0.0) || !isfinite(var))
            return not_pd(name, k, 0, n_k, reg_covar, msg, msg_len);
        gsl_matrix_set(w->new_chol, k, j, sqrt(var));
    }
    return LSE_OK;
}

int lse_gauss_describe(const void *config, char *buf, size_t len)
{
    const char *name = lse_gauss_cov_name(config_cov(config));
    return snprintf(buf, len, "cov=%s", name != NULL ? name : "?");
}

int lse_gauss_is_empty(double n_k, double min_count)
{
    return !(n_k >= min_count) || !(n_k > 0.0);
}

void lse_gauss_finish_weights(const double *n, size_t n_comp,
                              double min_count, gsl_matrix *logw,
                              lse_mstep_report *report)
{
    double total = 0.0;
    for (size_t k = 0; k < n_comp; k++)
        total += n[k];
    size_t n_empty = 0;
    for (size_t k = 0; k < n_comp; k++) {
        const int empty = lse_gauss_is_empty(n[k], min_count);
        n_empty += (size_t)empty;
        if (report != NULL && report->empty != NULL)
            report->empty[k] = (unsigned char)empty;
        if (logw != NULL && n[k] > 0.0)
            gsl_matrix_set(logw, k, 0, log(n[k] / total));
    }
    if (report != NULL) {
        report->n_empty = n_empty;
        report->norm_before = 0.0;
        report->norm_after = 0.0;
    }
}
