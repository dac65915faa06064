#include <stddef.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

#include "gmm_trace.h"

/* The traces of reg_bound (models/gmm_fit.c): tr(Sigma^-1) of covariance
 * factors, exact up to LSE_GMM_TRACE_MAXD dimensions. */

/* Columns of L^-1 that lse_gmm_frob_inv solves together. */
#define TRACE_COLS 8
/* Rows of one block of the substitution (frob_rows). */
#define TRACE_ROWS 4

/* The AVX2 copy of the substitution (models see only the public headers:
 * the library's kernel macros are not available here). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TRACE_AVX2 1
#else
#define TRACE_AVX2 0
#endif

/* The squared Frobenius norm of L^-1 (L lower triangular, row-major, d
 * <= LSE_GMM_TRACE_MAXD): its columns y_j (L y_j = e_j) by forward
 * substitution, TRACE_COLS columns at a time. One row alone is a chain of
 * dependent subtractions per column (s -= l_im y_m) that waits for each
 * one: TRACE_ROWS rows side by side (their sums over the rows m above the
 * block first, then the block's own triangle in order) keep the
 * multiplier and the adder busy (the trace took 0.45 ms of each thread
 * per 2-thread c/full iteration, in a parallel region of its own). Every
 * entry gets the operations of the column-by-column substitution in the
 * same order: s starts at e_i and subtracts l_im y_m for m = j0, j0 + 1,
 * ..., i - 1 in turn; a column's rows above its diagonal hold zeros, and
 * s - l * 0 = s exactly (s is 0 or 1 there, l finite), so the extra
 * terms of the later columns of a group change nothing; the squares are
 * summed in the column-by-column order. -ffp-contract=off: no fused
 * multiply-add in either copy. */
static void frob_rows(size_t d, const double *l, size_t j0, size_t i0,
                            double (*y)[TRACE_COLS])
{
    const size_t nr = d - i0 < TRACE_ROWS ? d - i0 : TRACE_ROWS;
    const double *li[TRACE_ROWS];
    double s[TRACE_ROWS][TRACE_COLS];
    for (size_t r = 0; r < TRACE_ROWS; r++) {
        li[r] = l + (i0 + (r < nr ? r : 0)) * d; /* past d: a copy, unused */
        for (size_t c = 0; c < TRACE_COLS; c++)
            s[r][c] = i0 + r == j0 + c ? 1.0 : 0.0;
    }
    for (size_t m = j0; m < i0; m++)
        for (size_t r = 0; r < TRACE_ROWS; r++) {
            const double lm = li[r][m];
            for (size_t c = 0; c < TRACE_COLS; c++)
                s[r][c] -= lm * y[m][c];
        }
    for (size_t r = 0; r < nr; r++) {
        const size_t i = i0 + r;
        for (size_t m = i0; m < i; m++) {
            const double lm = li[r][m];
            for (size_t c = 0; c < TRACE_COLS; c++)
                s[r][c] -= lm * y[m][c];
        }
        for (size_t c = 0; c < TRACE_COLS; c++)
            y[i][c] = j0 + c <= i ? s[r][c] / li[r][i] : 0.0;
    }
}

static double frob_inv_plain(size_t d, const double *l)
{
    double y[LSE_GMM_TRACE_MAXD][TRACE_COLS];
    double t = 0.0;
    for (size_t j0 = 0; j0 < d; j0 += TRACE_COLS) {
        const size_t nj = d - j0 < TRACE_COLS ? d - j0 : TRACE_COLS;
        for (size_t i0 = j0; i0 < d; i0 += TRACE_ROWS)
            frob_rows(d, l, j0, i0, y);
        for (size_t c = 0; c < nj; c++)
            for (size_t i = j0 + c; i < d; i++)
                t += y[i][c] * y[i][c];
    }
    return t;
}

#if TRACE_AVX2
/* The same operations on vectors of 4 columns (GCC/clang vector
 * extensions: the compiler vectorized frob_rows' loops across m, with
 * shuffles, slower than the scalar code). */
typedef double trace_v4 __attribute__((vector_size(32)));

__attribute__((target("avx2"))) static void
frob_rows_avx2(size_t d, const double *l, size_t j0, size_t i0,
               trace_v4 (*y)[2])
{
    const size_t nr = d - i0 < TRACE_ROWS ? d - i0 : TRACE_ROWS;
    const double *li[TRACE_ROWS];
    trace_v4 s[TRACE_ROWS][2];
    for (size_t r = 0; r < TRACE_ROWS; r++) {
        li[r] = l + (i0 + (r < nr ? r : 0)) * d; /* past d: a copy, unused */
        for (size_t h = 0; h < 2; h++)
            for (size_t c = 0; c < 4; c++)
                s[r][h][c] = i0 + r == j0 + 4 * h + c ? 1.0 : 0.0;
    }
    for (size_t m = j0; m < i0; m++)
        for (size_t r = 0; r < TRACE_ROWS; r++) {
            const double lm = li[r][m];
            s[r][0] -= lm * y[m][0];
            s[r][1] -= lm * y[m][1];
        }
    for (size_t r = 0; r < nr; r++) {
        const size_t i = i0 + r;
        for (size_t m = i0; m < i; m++) {
            const double lm = li[r][m];
            s[r][0] -= lm * y[m][0];
            s[r][1] -= lm * y[m][1];
        }
        const double lii = li[r][i];
        for (size_t h = 0; h < 2; h++) {
            /* one vector division; the lanes left of the diagonal 0 */
            const trace_v4 q = s[r][h] / lii;
            for (size_t c = 0; c < 4; c++)
                y[i][h][c] = j0 + 4 * h + c <= i ? q[c] : 0.0;
        }
    }
}

/* Where the sum of squares of a column group stands: column c, row i. */
typedef struct trace_cursor {
    size_t c, i;
} trace_cursor;

/* Up to quota more squares of group j0's columns (nj of them) into *t, in
 * the column-by-column order from *cur on. */
__attribute__((target("avx2"))) static void
frob_sum_some(size_t d, trace_v4 (*y)[2], size_t j0, size_t nj,
              trace_cursor *cur, size_t quota, double *t)
{
    double acc = *t;
    while (quota > 0 && cur->c < nj) {
        const size_t c = cur->c;
        const size_t end = quota < d - cur->i ? cur->i + quota : d;
        for (size_t i = cur->i; i < end; i++) {
            const double v = y[i][c / 4][c % 4];
            acc += v * v;
        }
        quota -= end - cur->i;
        cur->i = end;
        if (end == d) {
            cur->c++;
            cur->i = j0 + cur->c;
        }
    }
    *t = acc;
}

/* The groups' sums of squares are one chain of additions (about 3 cycles
 * each, d (d + 1) / 2 of them): each group's is spread over the blocks of
 * the next group's substitution, whose work does not wait for it. */
__attribute__((target("avx2"))) static double frob_inv_avx2(size_t d,
                                                             const double *l)
{
    trace_v4 y[2][LSE_GMM_TRACE_MAXD][2];
    double t = 0.0;
    size_t jp = 0, np = 0; /* the previous group and its column count */
    trace_cursor cur = {0, 0};
    for (size_t j0 = 0, g = 0; j0 < d; j0 += TRACE_COLS, g ^= 1) {
        const size_t nj = d - j0 < TRACE_COLS ? d - j0 : TRACE_COLS;
        const size_t nb = (d - j0 + TRACE_ROWS - 1) / TRACE_ROWS;
        const size_t left = np * (d - jp); /* at most: a quota, not a count */
        const size_t quota = (left + nb - 1) / nb;
        for (size_t i0 = j0; i0 < d; i0 += TRACE_ROWS) {
            frob_rows_avx2(d, l, j0, i0, y[g]);
            frob_sum_some(d, y[g ^ 1], jp, np, &cur, quota, &t);
        }
        frob_sum_some(d, y[g ^ 1], jp, np, &cur, (size_t)-1, &t);
        jp = j0;
        np = nj;
        cur.c = 0;
        cur.i = j0;
    }
    frob_sum_some(d, y[(d + TRACE_COLS - 1) / TRACE_COLS % 2 ^ 1], jp, np,
                  &cur, (size_t)-1, &t);
    return t;
}
#endif

/* The AVX2 copy where the CPU has it and LSE_NO_SIMD is not set (the
 * library's switch, lib/kernels-private.h); both copies give the same
 * bits. */
static int trace_avx2(void)
{
#if TRACE_AVX2
    const char *e = getenv("LSE_NO_SIMD");
    if (e != NULL && e[0] != '\0' && !(e[0] == '0' && e[1] == '\0'))
        return 0;
    __builtin_cpu_init(); /* idempotent */
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

static double frob_inv(size_t d, const double *l, int avx2)
{
#if TRACE_AVX2
    if (avx2)
        return frob_inv_avx2(d, l);
#endif
    (void)avx2;
    return frob_inv_plain(d, l);
}

double lse_gmm_frob_inv(size_t d, const double *l)
{
    return frob_inv(d, l, trace_avx2());
}

/* tr(Sigma^-1) of row b of a covariance factor in layout cov (d
 * dimensions): sum over j of 1 / l_j^2 (diag), d / l^2 (spherical), the
 * squared Frobenius norm of L^-1 (full, tied; L lower triangular). */
static double trace_inv(lse_cov_type cov, size_t d, const gsl_matrix *chol,
                        size_t b, int avx2)
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
    return frob_inv(d, l, avx2);
}

/* d^3 K' above which lse_gmm_trace_diffs shares the factors among the
 * threads: about 1 ms of the AVX2 copy on one thread. Below it a parallel
 * region cost more than it saved: c/full (d = 64, K' = 32, 2^23) took
 * 0.4 ms on one thread, and a region waits for the other thread, which on
 * a busy machine may have lost its core (docs/performance.md, "Session
 * 12"). */
#define TRACE_PAR_WORK 16777216.0

/* tr[f] = tr(Sigma_old,k^-1) - tr(Sigma_new,k^-1) for the K' factors k of
 * old and new (2 K' traces), in parallel over k when the factors are full
 * and large enough for it (d^3 K' above TRACE_PAR_WORK): each difference
 * is computed alone, the same bits for any thread count. */
void lse_gmm_trace_diffs(lse_cov_type cov, size_t d, const gsl_matrix *old,
                         const gsl_matrix *new_chol, double *tr)
{
    const long nf = (long)new_chol->size1;
    const double work = (double)d * (double)d * (double)d * (double)nf;
    const int full = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const int avx2 = full && trace_avx2();
    int nt = full && work > TRACE_PAR_WORK ? lse_get_num_threads() : 1;
    if (nt > nf)
        nt = (int)nf;
    if (nt <= 1) { /* no region for one thread (libgomp makes a team) */
        for (long f = 0; f < nf; f++)
            tr[f] = trace_inv(cov, d, old, (size_t)f, avx2) -
                    trace_inv(cov, d, new_chol, (size_t)f, avx2);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (long f = 0; f < nf; f++)
        tr[f] = trace_inv(cov, d, old, (size_t)f, avx2) -
                trace_inv(cov, d, new_chol, (size_t)f, avx2);
}
