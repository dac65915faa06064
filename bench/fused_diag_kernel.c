/* The fused diagonal pass alone (lib/sim/gauss_diag_fused.c, compiled in;
 * docs/performance.md "Diagonal covariances, session 9"): N random rows
 * of dimension d against K components, in blocks of 256 rows as the GMM's
 * term hands them over, the best of REPS passes by CPU time; beside it
 * the rate of independent 8-lane fused multiply-adds of the same copy, so
 * that the pass can be set against its arithmetic: the scores and the
 * statistics take (2 d + 1) kp of them per 8 rows each.
 *
 *   fused_diag_kernel N d K [REPS [ISA [WEIGHTS]]]
 *
 * ISA 2 (AVX-512F copy, default), 1 (AVX2 + FMA), 0 (portable). N
 * 100000 d 16 K 16 is set a, 20000 64 32 set c, 1000000 2 8 set b; a small
 * N (1024 d 64) keeps the rows in cache. Prints one line: "RESULT
 * tool=fused_diag_kernel ... ms_per_pass=... ns_per_tile=...
 * fma_gps=... x_fma=... hash=..." (10^9 vector multiply-adds per second;
 * x_fma: the pass's time over that of its multiply-adds at that rate; the
 * hash of the bits of lse and the statistics, to compare builds). */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels-private.h"
#include "sim/gauss-fused-private.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng_state = 88172645463325252u;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static double gaussian(void)
{
    const double u = uniform() + 1e-300, v = uniform();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#if LSE_HAVE_AVX2_PATH
#define FMA_CHAINS 12
/* 10^9 independent 8-lane multiply-adds per second (12 chains) */
LSE_TARGET_AVX512
static double fma_rate_avx512(long n)
{
    __m512d a[FMA_CHAINS];
    for (int i = 0; i < FMA_CHAINS; i++)
        a[i] = _mm512_set1_pd(1e-3 * i);
    const __m512d x = _mm512_set1_pd(0.999999), y = _mm512_set1_pd(1e-7);
    const double t0 = cpu_now();
    for (long k = 0; k < n; k++)
        for (int i = 0; i < FMA_CHAINS; i++)
            a[i] = _mm512_fmadd_pd(a[i], x, y);
    const double t = cpu_now() - t0;
    double s = 0.0;
    for (int i = 0; i < FMA_CHAINS; i++)
        s += _mm512_reduce_add_pd(a[i]);
    if (s == 0.0) /* keeps the chains */
        printf("#\n");
    return FMA_CHAINS * (double)n / t * 1e-9;
}

/* the same with two 4-lane vectors per 8 lanes */
LSE_TARGET_AVX2_FMA
static double fma_rate_avx2(long n)
{
    __m256d a[FMA_CHAINS];
    for (int i = 0; i < FMA_CHAINS; i++)
        a[i] = _mm256_set1_pd(1e-3 * i);
    const __m256d x = _mm256_set1_pd(0.999999), y = _mm256_set1_pd(1e-7);
    const double t0 = cpu_now();
    for (long k = 0; k < n; k++)
        for (int i = 0; i < FMA_CHAINS; i++)
            a[i] = _mm256_fmadd_pd(a[i], x, y);
    const double t = cpu_now() - t0;
    double s[4], tot = 0.0;
    for (int i = 0; i < FMA_CHAINS; i++) {
        _mm256_storeu_pd(s, a[i]);
        tot += s[0] + s[1] + s[2] + s[3];
    }
    if (tot == 0.0)
        printf("#\n");
    return FMA_CHAINS * (double)n / t * 1e-9 / 2.0;
}
#endif

static uint64_t hash_bits(uint64_t h, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], sizeof u);
        h = (h ^ u) * 1099511628211u;
    }
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fused_diag_kernel N d K [REPS [ISA "
                        "[WEIGHTS]]]\n");
        return 2;
    }
    const size_t N = strtoul(argv[1], NULL, 10), d = strtoul(argv[2], NULL, 10);
    const size_t K = strtoul(argv[3], NULL, 10);
    const int reps = argc > 4 ? atoi(argv[4]) : 10;
    const int isa = argc > 5 ? atoi(argv[5]) : LSE_FUSED_AVX512;
    const int weights = argc > 6 && atoi(argv[6]) != 0;
    if (N == 0 || d == 0 || K == 0 || reps < 1 || isa < 0 ||
        isa > lse_gauss_fused_isa()) {
        fprintf(stderr, "fused_diag_kernel: N, d, K and REPS must be "
                        "positive and ISA one this CPU runs (0 .. %d)\n",
                lse_gauss_fused_isa());
        return 2;
    }
    const size_t kp = (K + 7) / 8 * 8, nv = 1 + 2 * d, B = 256;
    double *x = malloc(N * d * sizeof *x), *c = calloc(d, sizeof *c);
    double *q = calloc(nv * kp, sizeof *q), *w = malloc(N * sizeof *w);
    double *lse = malloc(N * sizeof *lse), *acc = calloc(nv * K, sizeof *acc);
    const size_t ns = lse_gauss_fused_scratch(d, K);
    double *scratch = aligned_alloc(64, (ns + 7) / 8 * 8 * sizeof *scratch);
    if (!x || !c || !q || !w || !lse || !acc || !scratch) {
        fprintf(stderr, "fused_diag_kernel: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < N * d; i++)
        x[i] = 2.0 * gaussian() + 0.3;
    for (size_t i = 0; i < N; i++)
        w[i] = 0.25 + uniform();
    /* Q of the quadratic path for random means and variances (center 0) */
    for (size_t k = 0; k < K; k++) {
        double cn = -log((double)K), dpd = 0.0;
        for (size_t j = 0; j < d; j++) {
            const double mu = 1.5 * gaussian(), var = 0.5 + uniform();
            cn -= 0.5 * log(6.283185307179586 * var);
            dpd += mu * mu / var;
            q[(1 + j) * kp + k] = mu / var;
            q[(1 + d + j) * kp + k] = -0.5 / var;
        }
        q[k] = cn - 0.5 * dpd;
    }
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        memset(acc, 0, nv * K * sizeof *acc);
        const double t0 = cpu_now();
        for (size_t i0 = 0; i0 < N; i0 += B) {
            const lse_gauss_fused f = {
                .b = N - i0 < B ? N - i0 : B, .d = d, .K = K, .kp = kp,
                .x = x + i0 * d, .xt = d, .c = c, .q = q,
                .w = weights ? w + i0 : NULL, .lse = lse + i0, .acc = acc,
                .scratch = scratch};
            if (lse_gauss_fused_run(&f, isa) != 0) {
                fprintf(stderr, "fused_diag_kernel: a score is not finite\n");
                return 1;
            }
        }
        const double t = cpu_now() - t0;
        best = t < best ? t : best;
    }
    double rate = NAN;
#if LSE_HAVE_AVX2_PATH
    if (isa == LSE_FUSED_AVX512)
        rate = fma_rate_avx512(20000000);
    else if (isa == LSE_FUSED_AVX2)
        rate = fma_rate_avx2(20000000);
#endif
    const double tiles = (double)((N + 7) / 8);
    const double fmas = tiles * 2.0 * (double)(nv * kp);
    const uint64_t h =
        hash_bits(hash_bits(1469598103934665603u, lse, N), acc, nv * K);
    printf("RESULT tool=fused_diag_kernel n=%zu d=%zu k=%zu isa=%d weights=%d "
           "ms_per_pass=%.3f ns_per_tile=%.1f fma_gps=%.3f x_fma=%.3f "
           "hash=%016llx\n",
           N, d, K, isa, weights, 1e3 * best, 1e9 * best / tiles, rate,
           best / (fmas / (rate * 1e9)), (unsigned long long)h);
    free(x);
    free(c);
    free(q);
    free(w);
    free(lse);
    free(acc);
    free(scratch);
    return 0;
}
