#include <math.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include "kernels-private.h"
#include "linalg-private.h"

/*
 * A component's Cholesky factor and its inverse are rebuilt at every EM
 * step, at d = 2 or 4 on the data sets people fit most. Through GSL, each
 * small matrix costs a chain of BLAS calls (a dgemv per column, a dtrmv and
 * a dscal per column of the inverse), each with its argument checks and,
 * in OpenBLAS, a buffer taken from and given back to its allocator: on Iris
 * `-k 1:8 --covariance full`, 20 % of the instructions for a few hundred
 * flops per component. The functions below do the arithmetic of those calls
 * directly, operation for operation:
 *
 * - GSL 2.7's Cholesky for n <= 24 is the gaxpy (Level 2) algorithm: for
 *   each column j, A(j:n, j) -= A(j:n, 0:j) A(j, 0:j)^T (a dgemv), then
 *   A(j:n, j) *= 1 / sqrt(A(j, j)), the diagonal included; the strict upper
 *   triangle first gets a copy of the lower one. OpenBLAS's dgemv for a
 *   product of length m < 4 scales x by alpha (-1, exact) and adds, in its
 *   C tail compiled with FMA contraction, y + a0 x0 (one fma) for m = 1,
 *   y + fma(a0, x0, a1 x1) for m = 2 and y + fma(a2, x2, fma(a0, x0, a1
 *   x1)) for m = 3: so n <= LSE_CHOL_SMALL_MAX = 4 here.
 * - GSL's triangular inverse (lower, non-unit) for n <= 24 runs from the
 *   last column to the first: t_jj = 1 / t_jj, then the column below the
 *   diagonal is multiplied by the already inverted trailing triangle (a
 *   dtrmv) and scaled by -t_jj (a dscal). OpenBLAS's dtrmv gives each
 *   entry as x_k t_kk plus the plain (unfused) dot product of the row's
 *   earlier entries, summed from the first; its dot kernel switches to
 *   vector sums at 16 terms, so n <= LSE_TRI_INV_SMALL_MAX = 16 here.
 *
 * tests/test_linalg_small.c checks these bits against GSL's on thousands of
 * random matrices of every size, where OpenBLAS runs FMA kernels. Without
 * FMA (a CPU before Haswell; OpenBLAS's own kernels then round without it)
 * both functions call GSL, so every CPU keeps the bits it had.
 */

#if LSE_HAVE_AVX2_PATH
static int have_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
}

LSE_TARGET_AVX2_FMA
static int chol_small(double *a, const size_t n, const size_t lda)
{
    for (size_t i = 0; i < n; i++) /* GSL keeps the input in the upper part */
        for (size_t j = i + 1; j < n; j++)
            a[i * lda + j] = a[j * lda + i];
    for (size_t j = 0; j < n; j++) {
        const double *x = a + j * lda; /* row j, columns 0 .. j-1 */
        for (size_t i = j; j > 0 && i < n; i++) {
            const double *r = a + i * lda;
            double y = r[j];
            if (j == 1)
                y = fma(r[0], -x[0], y);
            else if (j == 2)
                y = y + fma(r[0], -x[0], r[1] * -x[1]);
            else
                y = y + fma(r[2], -x[2], fma(r[0], -x[0], r[1] * -x[1]));
            a[i * lda + j] = y;
        }
        const double ajj = a[j * lda + j];
        if (ajj <= 0.0)
            return GSL_EDOM;
        const double s = 1.0 / sqrt(ajj);
        for (size_t i = j; i < n; i++)
            a[i * lda + j] *= s;
    }
    return GSL_SUCCESS;
}

static void tri_invert_small(double *t, const size_t n, const size_t ld)
{
    for (size_t j = n; j-- > 0;) {
        double *tjj = t + j * ld + j;
        *tjj = 1.0 / *tjj;
        const double ajj = -*tjj;
        /* v = column j below the diagonal; v := T(j+1:n, j+1:n) v from the
         * last entry up, each from the entries above it not yet replaced */
        double *v = tjj + ld;
        const size_t m = n - j - 1;
        for (size_t k = m; k-- > 0;) {
            const double *row = t + (j + 1 + k) * ld + j + 1;
            double x = v[k * ld] * row[k], dot = 0.0;
            for (size_t l = 0; l < k; l++)
                dot += row[l] * v[l * ld];
            if (k > 0)
                x += dot;
            v[k * ld] = x;
        }
        for (size_t k = 0; k < m; k++)
            v[k * ld] *= ajj;
    }
}
#endif

int lse_chol_decomp1(gsl_matrix *a)
{
#if LSE_HAVE_AVX2_PATH
    const size_t n = a->size1;
    if (n == a->size2 && n <= LSE_CHOL_SMALL_MAX && have_fma())
        return chol_small(a->data, n, a->tda);
#endif
    return gsl_linalg_cholesky_decomp1(a);
}

int lse_tri_invert_lower(gsl_matrix *t)
{
#if LSE_HAVE_AVX2_PATH
    const size_t n = t->size1;
    if (n == t->size2 && n <= LSE_TRI_INV_SMALL_MAX && have_fma()) {
        for (size_t i = 0; i < n; i++) /* GSL's singularity check */
            if (t->data[i * t->tda + i] == 0.0)
                return GSL_ESING;
        tri_invert_small(t->data, n, t->tda);
        return GSL_SUCCESS;
    }
#endif
    return gsl_linalg_tri_invert(CblasLower, CblasNonUnit, t);
}
