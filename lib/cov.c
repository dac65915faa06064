#include <math.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include <lsegraph/cov.h>

#include "size-private.h"
#include "threads-private.h"
#include "linalg-private.h"

/* Covariance layouts (include/lsegraph/cov.h). */

const char *lse_cov_name(lse_cov_type cov)
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

lse_status lse_cov_parse(const char *name, lse_cov_type *out)
{
    static const lse_cov_type all[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                       LSE_COV_SPHERICAL, LSE_COV_TIED};
    if (name == NULL || out == NULL)
        return LSE_EFAULT;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, lse_cov_name(all[i])) == 0) {
            *out = all[i];
            return LSE_OK;
        }
    return LSE_EINVAL;
}

size_t lse_cov_chol_rows(lse_cov_type cov, size_t k)
{
    if (lse_cov_name(cov) == NULL)
        return 0;
    return cov == LSE_COV_TIED ? 1 : k;
}

size_t lse_cov_chol_cols(lse_cov_type cov, size_t d)
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

size_t lse_cov_rows(lse_cov_type cov, size_t k, size_t d)
{
    switch (cov) {
    case LSE_COV_FULL:
        return k * d;
    case LSE_COV_TIED:
        return d;
    case LSE_COV_DIAG:
    case LSE_COV_SPHERICAL:
        return k;
    }
    return 0;
}

size_t lse_cov_cols(lse_cov_type cov, size_t d)
{
    return cov == LSE_COV_SPHERICAL ? 1 : d;
}

lse_status lse_cov_from_chol(lse_cov_type cov, size_t d, const gsl_matrix *chol,
                             gsl_matrix *covs)
{
    if (chol == NULL || covs == NULL)
        return LSE_EFAULT;
    if (lse_cov_name(cov) == NULL)
        return LSE_EINVAL;
    const size_t rows = chol->size1;
    if (chol->size2 != lse_cov_chol_cols(cov, d) ||
        covs->size1 != lse_cov_rows(cov, cov == LSE_COV_TIED ? 1 : rows, d) ||
        covs->size2 != lse_cov_cols(cov, d))
        return LSE_EDIM;
    for (size_t b = 0; b < rows; b++) {
        const double *l = gsl_matrix_const_ptr(chol, b, 0);
        switch (cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED: {
            const size_t r0 = cov == LSE_COV_FULL ? b * d : 0;
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j <= i; j++) {
                    double s = 0.0;
                    for (size_t t = 0; t <= j; t++)
                        s += l[i * d + t] * l[j * d + t];
                    gsl_matrix_set(covs, r0 + i, j, s);
                    gsl_matrix_set(covs, r0 + j, i, s);
                }
            break;
        }
        case LSE_COV_DIAG:
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(covs, b, j, l[j] * l[j]);
            break;
        case LSE_COV_SPHERICAL:
            gsl_matrix_set(covs, b, 0, l[0] * l[0]);
            break;
        }
    }
    return LSE_OK;
}

/* Cholesky factor of the symmetric (d, d) block at row r0 of cov into row b
 * of chol (full/tied layout). */
static lse_status chol_block(const gsl_matrix *cov, size_t r0, size_t d,
                             gsl_matrix *work, gsl_matrix *chol, size_t b,
                             int tied, lse_error *err)
{
    static const char fn[] = "lse_cov_to_chol";
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) {
            const double lo = gsl_matrix_get(cov, r0 + i, j);
            const double up = gsl_matrix_get(cov, r0 + j, i);
            if (fabs(lo - up) >
                LSE_COV_SYMMETRY_RTOL * fmax(fabs(lo), fabs(up))) {
                if (tied)
                    return lse_error_set(err, LSE_EINVAL, fn,
                                         "the tied covariance is not "
                                         "symmetric ([%zu,%zu] = %g, "
                                         "[%zu,%zu] = %g)",
                                         i, j, lo, j, i, up);
                return lse_error_set(err, LSE_EINVAL, fn,
                                     "covariance of component %zu is not "
                                     "symmetric ([%zu,%zu] = %g, [%zu,%zu] = "
                                     "%g)",
                                     b, i, j, lo, j, i, up);
            }
            gsl_matrix_set(work, i, j, lo);
            gsl_matrix_set(work, j, i, lo);
        }
    const int rc = lse_chol_decomp1(work);
    if (rc == GSL_EDOM) {
        if (tied)
            return lse_error_set(err, LSE_ENUMERIC, fn,
                                 "the tied covariance is not positive "
                                 "definite");
        return lse_error_set(err, LSE_ENUMERIC, fn,
                             "covariance of component %zu is not positive "
                             "definite",
                             b);
    }
    if (rc != GSL_SUCCESS)
        return lse_error_set(err, lse_status_from_gsl(rc), fn,
                             "Cholesky factorization failed: %s",
                             gsl_strerror(rc));
    double *out = gsl_matrix_ptr(chol, b, 0);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            out[i * d + j] = j <= i ? gsl_matrix_get(work, i, j) : 0.0;
    return LSE_OK;
}

static lse_status factor(lse_cov_type cov, size_t d, const gsl_matrix *covs,
                         gsl_matrix *chol, gsl_matrix *work, lse_error *err)
{
    static const char fn[] = "lse_cov_to_chol";
    const size_t rows = covs->size1, cols = covs->size2;
    switch (cov) {
    case LSE_COV_FULL:
        for (size_t k = 0; k < chol->size1; k++) {
            const lse_status st =
                chol_block(covs, k * d, d, work, chol, k, 0, err);
            if (st != LSE_OK)
                return st;
        }
        return LSE_OK;
    case LSE_COV_TIED:
        return chol_block(covs, 0, d, work, chol, 0, 1, err);
    case LSE_COV_DIAG:
    case LSE_COV_SPHERICAL:
        for (size_t k = 0; k < rows; k++)
            for (size_t j = 0; j < cols; j++) {
                const double v = gsl_matrix_get(covs, k, j);
                if (!(v > 0.0))
                    return lse_error_set(err, LSE_ENUMERIC, fn,
                                         "variance %zu of component %zu is "
                                         "%g (must be > 0)",
                                         j, k, v);
                gsl_matrix_set(chol, k, j, sqrt(v));
            }
        return LSE_OK;
    }
    return lse_error_set(err, LSE_EINVAL, fn, "unknown covariance type %d",
                         (int)cov);
}

lse_status lse_cov_to_chol(lse_cov_type cov, size_t d, const gsl_matrix *covs,
                           gsl_matrix *chol, lse_error *err)
{
    static const char fn[] = "lse_cov_to_chol";
    if (covs == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL covariances");
    if (lse_cov_name(cov) == NULL)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown covariance type %d",
                             (int)cov);
    const size_t cols = lse_cov_cols(cov, d);
    size_t k = 0; /* components, from the rows */
    switch (cov) {
    case LSE_COV_FULL:
        k = d > 0 ? covs->size1 / d : 0;
        break;
    case LSE_COV_TIED:
        k = 1;
        break;
    case LSE_COV_DIAG:
    case LSE_COV_SPHERICAL:
        k = covs->size1;
        break;
    }
    const size_t rows = lse_cov_rows(cov, k, d);
    if (d == 0 || k == 0 || covs->size1 != rows || covs->size2 != cols ||
        (chol != NULL && (chol->size1 != lse_cov_chol_rows(cov, k) ||
                          chol->size2 != lse_cov_chol_cols(cov, d))))
        return lse_error_set(err, LSE_EDIM, fn,
                             "%s covariances are %zu x %zu for d = %zu, "
                             "factors %zu x %zu",
                             lse_cov_name(cov), covs->size1, covs->size2, d,
                             chol != NULL ? chol->size1 : 0,
                             chol != NULL ? chol->size2 : 0);
    if (lse_size_matrix_overflows(d, d) ||
        lse_size_matrix_overflows(lse_cov_chol_rows(cov, k),
                                  lse_cov_chol_cols(cov, d)))
        return lse_error_set(err, LSE_ENOMEM, fn,
                             "%s factors for %zu components of dimension "
                             "%zu exceed the address space",
                             lse_cov_name(cov), k, d);
    for (size_t i = 0; i < covs->size1; i++)
        for (size_t j = 0; j < covs->size2; j++)
            if (!isfinite(gsl_matrix_get(covs, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "covariance entry [%zu,%zu] is %g", i, j,
                                     gsl_matrix_get(covs, i, j));
    lse_gsl_quiet();
    gsl_matrix *out =
        gsl_matrix_alloc(lse_cov_chol_rows(cov, k), lse_cov_chol_cols(cov, d));
    gsl_matrix *work = gsl_matrix_alloc(d, d);
    lse_status st = LSE_OK;
    if (out == NULL || work == NULL)
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK)
        st = factor(cov, d, covs, out, work, err);
    if (st == LSE_OK && chol != NULL)
        gsl_matrix_memcpy(chol, out);
    gsl_matrix_free(out);
    gsl_matrix_free(work);
    return st;
}

void lse_cov_chol_scaled_identity(lse_cov_type cov, size_t d, double s,
                                  gsl_matrix *chol)
{
    gsl_matrix_set_zero(chol);
    for (size_t b = 0; b < chol->size1; b++) {
        if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(chol, b, j * d + j, s);
        } else {
            for (size_t j = 0; j < chol->size2; j++)
                gsl_matrix_set(chol, b, j, s);
        }
    }
}

int lse_eigen_symm(gsl_matrix *a, gsl_vector *eval,
                   gsl_eigen_symm_workspace *w)
{
    const int saved = lse_blas_serial_begin(1);
    const int r = gsl_eigen_symm(a, eval, w);
    lse_blas_serial_end(saved);
    return r;
}

int lse_eigen_symmv(gsl_matrix *a, gsl_vector *eval, gsl_matrix *evec,
                    gsl_eigen_symmv_workspace *w)
{
    const int saved = lse_blas_serial_begin(1);
    const int r = gsl_eigen_symmv(a, eval, evec, w);
    lse_blas_serial_end(saved);
    return r;
}
