#include <stddef.h>

#include <lsegraph/lsegraph.h>

#include "gmm_trace.h"

/* The traces of reg_bound (models/gmm_fit.c): tr(Sigma^-1) of covariance
 * factors, exact up to LSE_GMM_TRACE_MAXD dimensions. */

/* Columns of L^-1 that lse_gmm_frob_inv solves together. */
#define TRACE_COLS 8

/* The squared Frobenius norm of L^-1 (L lower triangular, row-major, d
 * <= LSE_GMM_TRACE_MAXD): its columns y_j (L y_j = e_j) by forward
 * substitution, TRACE_COLS columns at a time. One column alone is a chain
 * of dependent subtractions (s -= l_im y_m) that waits for each one;
 * TRACE_COLS chains side by side keep the adder busy (the trace took 2 %
 * of a 2-thread c/full iteration on the main thread alone). Every entry
 * gets the operations of the column-by-column substitution in the same
 * order: a column's rows above its diagonal hold zeros, and s - l * 0 = s
 * exactly (s is 0 or 1 there, l finite), so the extra terms of the later
 * columns of a group change nothing; the squares are summed in the
 * column-by-column order. */
double lse_gmm_frob_inv(size_t d, const double *l)
{
    double y[TRACE_COLS][LSE_GMM_TRACE_MAXD];
    double t = 0.0;
    for (size_t j0 = 0; j0 < d; j0 += TRACE_COLS) {
        const size_t nj = d - j0 < TRACE_COLS ? d - j0 : TRACE_COLS;
        for (size_t c = 0; c < TRACE_COLS; c++)
            for (size_t i = j0; i < j0 + TRACE_COLS && i < d; i++)
                y[c][i] = 0.0;
        for (size_t i = j0; i < d; i++) {
            const double *li = l + i * d;
            double s[TRACE_COLS];
            for (size_t c = 0; c < TRACE_COLS; c++)
                s[c] = i == j0 + c ? 1.0 : 0.0;
            for (size_t m = j0; m < i; m++) {
                const double lm = li[m];
                for (size_t c = 0; c < TRACE_COLS; c++)
                    s[c] -= lm * y[c][m];
            }
            for (size_t c = 0; c < nj && j0 + c <= i; c++)
                y[c][i] = s[c] / li[i];
        }
        for (size_t c = 0; c < nj; c++)
            for (size_t i = j0 + c; i < d; i++)
                t += y[c][i] * y[c][i];
    }
    return t;
}

/* tr(Sigma^-1) of row b of a covariance factor in layout cov (d
 * dimensions): sum over j of 1 / l_j^2 (diag), d / l^2 (spherical), the
 * squared Frobenius norm of L^-1 (full, tied; L lower triangular). */
static double trace_inv(lse_cov_type cov, size_t d, const gsl_matrix *chol,
                        size_t b)
{
    const double *l = gsl_matrix_const_ptr(chol, b, 0);
    if (cov == LSE_COV_SPHERICAL)
        return (double)d / (l[0] * l[0]);
    double t = 0.0;
    if (cov == LSE_COV_DIAG) {
        for (size_t j = 0; j < d; j++)
            t += 1.0 / (l[j] * l[j]);
        return t;
    }
    return lse_gmm_frob_inv(d, l);
}

/* tr[f] = tr(Sigma_old,k^-1) - tr(Sigma_new,k^-1) for the K' factors k of
 * old and new (2 K' traces), in parallel over k when the factors are full
 * and large enough for it (d^3 K' above 2^20): each difference is computed
 * alone, the same bits for any thread count. */
void lse_gmm_trace_diffs(lse_cov_type cov, size_t d, const gsl_matrix *old,
                         const gsl_matrix *new_chol, double *tr)
{
    const long nf = (long)new_chol->size1;
    const double work = (double)d * (double)d * (double)d * (double)nf;
    const int full = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    int nt = full && work > 1048576.0 ? lse_get_num_threads() : 1;
    if (nt > nf)
        nt = (int)nf;
    if (nt <= 1) { /* no region for one thread (libgomp makes a team) */
        for (long f = 0; f < nf; f++)
            tr[f] = trace_inv(cov, d, old, (size_t)f) -
                    trace_inv(cov, d, new_chol, (size_t)f);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (long f = 0; f < nf; f++)
        tr[f] = trace_inv(cov, d, old, (size_t)f) -
                trace_inv(cov, d, new_chol, (size_t)f);
}
