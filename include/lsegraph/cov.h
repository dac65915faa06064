#ifndef LSEGRAPH_COV_H
#define LSEGRAPH_COV_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_matrix.h>
#include <lsegraph/sim.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file cov.h
 * @brief Covariance layouts of the Gaussian family (lib/cov.c): the one
 * place for their names, shapes and the conversions between a model's
 * covariances and the "chol" parameter the similarities read.
 *
 * Two layouts per lse_cov_type, for K components in d dimensions:
 * - chol (the graph's parameter, lse_cov_type in sim.h): full (K, d*d)
 *   row-major lower-triangular L_k; tied (1, d*d); diag (K, d) the l_kj;
 *   spherical (K, 1) the l_k; Sigma = L L'.
 * - native covariances (scikit-learn's shapes): full (K*d, d) stacked
 *   Sigma_k; tied (d, d); diag (K, d) variances; spherical (K, 1)
 *   variances.
 */

/** @brief Relative tolerance of the symmetry check of lse_cov_to_chol. */
#define LSE_COV_SYMMETRY_RTOL 1e-12

/** @brief "full", "diag", "spherical", "tied", or NULL for a bad value. */
LSE_API const char *lse_cov_name(lse_cov_type cov);
/** @brief Parse a covariance name into @p out.
 *  @return LSE_OK, LSE_EFAULT, or LSE_EINVAL for an unknown name. */
LSE_API lse_status lse_cov_parse(const char *name, lse_cov_type *out);

/** @brief Rows of the chol layout (1 for tied, else @p k; 0 for a bad
 *  type). */
LSE_API size_t lse_cov_chol_rows(lse_cov_type cov, size_t k);
/** @brief Columns of the chol layout (d*d, d or 1; 0 for a bad type). */
LSE_API size_t lse_cov_chol_cols(lse_cov_type cov, size_t d);
/** @brief Rows of the native layout (K*d, d or K; 0 for a bad type). */
LSE_API size_t lse_cov_rows(lse_cov_type cov, size_t k, size_t d);
/** @brief Columns of the native layout (d, or 1 for spherical). */
LSE_API size_t lse_cov_cols(lse_cov_type cov, size_t d);

/** @brief Native covariances @p covs from the factors @p chol (both in the
 *  shapes above for d dimensions and chol->size1 blocks): Sigma = L L',
 *  the lower triangle computed once and mirrored (exactly symmetric).
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (bad type); LSE_EDIM. */
LSE_API lse_status lse_cov_from_chol(lse_cov_type cov, size_t d,
                                     const gsl_matrix *chol, gsl_matrix *covs);

/**
 * @brief Check native covariances and factor them: finite; full and tied
 * matrices symmetric (entries equal up to LSE_COV_SYMMETRY_RTOL relative)
 * and positive definite (GSL's Cholesky); variances > 0. @p chol (may be
 * NULL: only check) gets the factors, written only on success.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (bad type, not symmetric);
 * LSE_EDIM; LSE_ENONFINITE; LSE_ENUMERIC (not positive definite, variance
 * <= 0, naming the component); LSE_ENOMEM; with a message in @p err.
 */
LSE_API lse_status lse_cov_to_chol(lse_cov_type cov, size_t d,
                                   const gsl_matrix *covs, gsl_matrix *chol,
                                   lse_error *err);

/** @brief @p chol = s I in the chol layout (every block). */
LSE_API void lse_cov_chol_scaled_identity(lse_cov_type cov, size_t d, double s,
                                          gsl_matrix *chol);

/**
 * @brief GSL's symmetric eigensolver gsl_eigen_symm (same arguments, same
 * result: the eigenvalues of @p a, unsorted; @p a's lower triangle and
 * diagonal are destroyed) with OpenBLAS held serial. GSL's tridiagonal
 * reduction calls dsymv and dsyr2, which OpenBLAS splits over its threads
 * at every size: unheld, their rounding, and so every fit that ranks,
 * splits or M-steps by an eigen-decomposition, would follow
 * OPENBLAS_NUM_THREADS, and each call would wake OpenBLAS's threads, which
 * then spin beside ours. The library and its models decompose only through
 * these two functions.
 * @return GSL's status (GSL_SUCCESS).
 */
LSE_API int lse_eigen_symm(gsl_matrix *a, gsl_vector *eval,
                           gsl_eigen_symm_workspace *w);

/** @brief gsl_eigen_symmv (eigenvalues and the unit eigenvectors as the
 *  columns of @p evec, unsorted) with OpenBLAS held serial, as
 *  lse_eigen_symm. @return GSL's status (GSL_SUCCESS). */
LSE_API int lse_eigen_symmv(gsl_matrix *a, gsl_vector *eval, gsl_matrix *evec,
                            gsl_eigen_symmv_workspace *w);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_COV_H */
