#ifndef LSE_LINALG_PRIVATE_H
#define LSE_LINALG_PRIVATE_H

#include <string.h>

#include <gsl/gsl_errno.h>
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

/* gsl_matrix_memcpy (the same values, GSL_EBADLEN for other sizes, no
 * error handler) without its cblas_dcopy per row: an OpenBLAS call per row
 * of a mixture's small parameter matrices in every EM step, 1.5 % of the
 * small fits' samples (docs/performance.md, "Session 17"). */
static inline int lse_matrix_copy(gsl_matrix *dst, const gsl_matrix *src)
{
    const size_t n1 = src->size1, n2 = src->size2;
    if (dst->size1 != n1 || dst->size2 != n2)
        return GSL_EBADLEN;
    if (n1 == 0 || n2 == 0)
        return GSL_SUCCESS;
    if (dst->tda == n2 && src->tda == n2) {
        memmove(dst->data, src->data, n1 * n2 * sizeof *src->data);
        return GSL_SUCCESS;
    }
    for (size_t i = 0; i < n1; i++)
        memmove(dst->data + i * dst->tda, src->data + i * src->tda,
                n2 * sizeof *src->data);
    return GSL_SUCCESS;
}

#endif
