/* The machine's limits for the GMM roofline and floor (docs/performance.md,
 * "Round two"), measured in one run:
 *   - triad bandwidth: a[i] = b[i] + s c[i] over three arrays of N doubles
 *     (default 2^23 each, 192 MiB together: far beyond the caches), 24
 *     bytes per element as STREAM counts it, best of 5 after a warm-up, on
 *     THREADS OpenMP threads (static split);
 *   - the library's vectorized exp (lse_exp_nonpos8 with AVX-512F, else
 *     lse_exp_nonpos4 with AVX2 + FMA, else lse_exp_nonpos; the copy the
 *     softmax of lib/softmax.c runs on this CPU), over 4096 arguments in L1
 *     cache, per thread times THREADS.
 *
 *   roofline THREADS [N]
 *
 * Prints "RESULT tool=roofline threads=T triad_gbs=... exp_gps=..." (GB/s
 * and 10^9 exponentials per second). */

#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_util.h"
#include "kernels-private.h"

#define EXP_N 4096
#define EXP_REPS 4000

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX512
static double exp_pass8(const double *x, double *y)
{
    for (size_t i = 0; i < EXP_N; i += 8)
        _mm512_storeu_pd(y + i, lse_exp_nonpos8(_mm512_loadu_pd(x + i)));
    return y[EXP_N / 2];
}

LSE_TARGET_AVX2_FMA
static double exp_pass4(const double *x, double *y)
{
    for (size_t i = 0; i < EXP_N; i += 4)
        _mm256_storeu_pd(y + i, lse_exp_nonpos4(_mm256_loadu_pd(x + i)));
    return y[EXP_N / 2];
}
#endif

static double exp_pass1(const double *x, double *y)
{
    for (size_t i = 0; i < EXP_N; i++)
        y[i] = lse_exp_nonpos(x[i]);
    return y[EXP_N / 2];
}

/* exponentials per second on one thread (the calling one) */
static double exp_rate(int isa)
{
    double *x = malloc(EXP_N * sizeof *x), *y = malloc(EXP_N * sizeof *y);
    if (x == NULL || y == NULL)
        return 0.0;
    for (size_t i = 0; i < EXP_N; i++)
        x[i] = -30.0 * (double)i / EXP_N;
    double best = INFINITY, sink = 0.0;
    for (int rep = 0; rep < 6; rep++) {
        const double t0 = bench_now();
        for (int r = 0; r < EXP_REPS; r++) {
            x[r % EXP_N] -= 0.0; /* keep the passes apart */
#if LSE_HAVE_AVX2_PATH
            if (isa == 2)
                sink += exp_pass8(x, y);
            else if (isa == 1)
                sink += exp_pass4(x, y);
            else
#endif
                sink += exp_pass1(x, y);
        }
        const double s = bench_now() - t0;
        if (rep > 0 && s < best)
            best = s;
    }
    free(x);
    free(y);
    return sink == 1.2345 ? 0.0 : (double)EXP_N * EXP_REPS / best;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s THREADS [N]\n", argv[0]);
        return 2;
    }
    const int threads = atoi(argv[1]) > 0 ? atoi(argv[1]) : 1;
    const long n = argc > 2 ? atol(argv[2]) : 1L << 23;
    double *a = malloc((size_t)n * sizeof *a);
    double *b = malloc((size_t)n * sizeof *b);
    double *c = malloc((size_t)n * sizeof *c);
    if (a == NULL || b == NULL || c == NULL || n < 1)
        return 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0 + (double)(i % 7);
        c[i] = 2.0 - (double)(i % 5);
    }
    const double s = 0.5;
    double best = INFINITY;
    for (int rep = 0; rep < 6; rep++) {
        const double t0 = bench_now();
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
        for (long i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
        const double t = bench_now() - t0;
        if (rep > 0 && t < best)
            best = t;
    }
    const double gbs = 24.0 * (double)n / best / 1e9;
    int isa = 0;
    if (lse_cpu_avx512())
        isa = 2;
    else if (lse_cpu_avx2_fma())
        isa = 1;
    double rate = 0.0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : rate)
#endif
    rate += exp_rate(isa);
    printf("RESULT tool=roofline threads=%d triad_gbs=%.2f exp_gps=%.3f "
           "exp_isa=%s check=%g\n",
           threads, gbs, rate / 1e9,
           isa == 2 ? "avx512" : isa == 1 ? "avx2" : "plain", a[n / 2]);
    free(a);
    free(b);
    free(c);
    return 0;
}
