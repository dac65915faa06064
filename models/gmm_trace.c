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

/* Two copies of the substitution, plain and AVX2 (models see only the
 * public headers: the library's kernel macros are not available here).
 * Both are written with GCC/clang vector extensions: from plain loops
 * the compiler vectorized across m, with shuffles, slower than scalar
 * code. */
#if defined(__GNUC__) || defined(__clang__)
#define TRACE_VEC 1
#if defined(__x86_64__)
#define TRACE_AVX2 1
#else
#define TRACE_AVX2 0
#endif
#else
#define TRACE_VEC 0
#define TRACE_AVX2 0
#endif

#if TRACE_VEC
/* Where the sum of squares of a column group stands: column c, row i. */
typedef struct trace_cursor {
    size_t c, i;
} trace_cursor;

/* the plain copy: vectors of 2 (SSE2; vectors of 4 there were split
 * through memory, 10x slower) */
typedef double trace_v2 __attribute__((vector_size(16)));
#define TRACE_VT trace_v2
#define TRACE_W 2
#define TRACE_NAME(f) f##_plain
#define TRACE_ATTR
#include "gmm_trace_body.h"
#undef TRACE_VT
#undef TRACE_W
#undef TRACE_NAME
#undef TRACE_ATTR

#if TRACE_AVX2
typedef double trace_v4 __attribute__((vector_size(32)));
#define TRACE_VT trace_v4
#define TRACE_W 4
#define TRACE_NAME(f) f##_avx2
#define TRACE_ATTR __attribute__((target("avx2")))
#include "gmm_trace_body.h"
#undef TRACE_VT
#undef TRACE_W
#undef TRACE_NAME
#undef TRACE_ATTR
#endif

#else /* no vector extensions: the column-by-column substitution */
static double frob_inv_plain(size_t d, const double *l)
{
    double y[LSE_GMM_TRACE_MAXD];
    double t = 0.0;
    for (size_t j = 0; j < d; j++)
        for (size_t i = j; i < d; i++) {
            double s = i == j ? 1.0 : 0.0;
            for (size_t m = j; m < i; m++)
                s -= l[i * d + m] * y[m];
            y[i] = s / l[i * d + i];
            t += y[i] * y[i];
        }
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

/* d^3 K' above which lse_gmm_traces shares the factors among the
 * threads: about 1 ms of the AVX2 copy on one thread. Below it a parallel
 * region cost more than it saved: c/full (d = 64, K' = 32, 2^23) took
 * 0.4 ms on one thread, and a region waits for the other thread, which on
 * a busy machine may have lost its core (docs/performance.md, "Session
 * 12"). */
#define TRACE_PAR_WORK 16777216.0

/* Threads for the traces of nf factors: several when they are full and
 * d^3 K' is above TRACE_PAR_WORK. */
static int trace_threads(int full, size_t d, long nf)
{
    const double work = (double)d * (double)d * (double)d * (double)nf;
    int nt = full && work > TRACE_PAR_WORK ? lse_get_num_threads() : 1;
    return nt > nf ? (int)nf : nt;
}

void lse_gmm_traces(lse_cov_type cov, size_t d, const gsl_matrix *chol,
                    double *tr)
{
    const long nf = (long)chol->size1;
    const int full = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const int avx2 = full && trace_avx2();
    const int nt = trace_threads(full, d, nf);
    if (nt <= 1) { /* no region for one thread (libgomp makes a team) */
        for (long f = 0; f < nf; f++)
            tr[f] = trace_inv(cov, d, chol, (size_t)f, avx2);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (long f = 0; f < nf; f++)
        tr[f] = trace_inv(cov, d, chol, (size_t)f, avx2);
}

