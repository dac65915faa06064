#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include "gauss-private.h"
#include "../linalg-private.h"

/* The M-step helpers shared by the Gaussian family and mclust's
 * constrained models (gaussian.c, lingauss.c, gauss_mclust.c): options,
 * row weights, a covariance or variances to the chol parameter with the
 * ridge reg_covar, empty components, mixture weights; and the error
 * formatter of every Gaussian-family file. Derivations: docs/sim-gaussian.md.
 */

/* M-step defaults when the caller passes no options (as
 * lse_mstep_opts_default). */
#define DEFAULT_REG_COVAR 1e-6
#define DEFAULT_MIN_COUNT 1e-10

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
    const double *r = resp->data + k;
    const size_t rt = resp->tda;
    double *out = rw->data;
    const size_t os = rw->stride;
    for (size_t i = 0; i < resp->size1; i++) {
        double v = r[i * rt];
        if (weight != NULL)
            v *= weight->data[i * weight->stride];
        out[i * os] = v;
        sum += v;
    }
    return sum;
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
    const int rc = lse_chol_decomp1(c);
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

int lse_gauss_is_empty(double n_k, double min_count)
{
    return !(n_k >= min_count) || !(n_k > 0.0);
}

void lse_gauss_finish_weights(const double *n, size_t n_comp, double min_count,
                              gsl_matrix *logw, lse_mstep_report *report)
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
