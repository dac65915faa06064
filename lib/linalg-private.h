#ifndef LSE_LINALG_PRIVATE_H
#define LSE_LINALG_PRIVATE_H

#include <gsl/gsl_matrix.h>

/* GSL's gsl_linalg_cholesky_decomp1 and gsl_linalg_tri_invert(CblasLower,
 * CblasNonUnit, .) without GSL's and OpenBLAS's per-call set-up on the
 * small matrices of a mixture's components: the same operations in the same
 * order as GSL 2.7's unblocked algorithms on OpenBLAS's FMA kernels, so the
 * same bits (tests/test_linalg_small.c compares them with GSL), for n up to
 * LSE_CHOL_SMALL_MAX and LSE_TRI_INV_SMALL_MAX; larger matrices go to GSL.
 * GSL status codes; neither calls GSL's error handler. */
#define LSE_CHOL_SMALL_MAX 4
#define LSE_TRI_INV_SMALL_MAX 16

int lse_chol_decomp1(gsl_matrix *a);
int lse_tri_invert_lower(gsl_matrix *t);

#endif
