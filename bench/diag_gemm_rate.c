/* The diagonal E- and M-step's products as two dgemms per block of rows
 * (docs/performance.md, "Diagonal covariances, session 10"): with the
 * monomials V = [1, y, y.^2] (N x nv, nv = 1 + 2 d, formed once) and Q
 * (nv x K), per block of B rows S = V_blk Q (the scores) and
 * acc += V_blk' S (the statistics), through the CBLAS the library links
 * (OpenBLAS), on THREADS OpenBLAS threads. Only the products: no softmax,
 * which the fused pass does besides. Prints the best of REPS passes over
 * the N rows in ms and GFLOP/s (4 N nv K flops per pass), for comparison
 * with lse_bench's ms per EM iteration and bench/fused_diag_kernel.
 *
 *   diag_gemm_rate N d K B THREADS [REPS]
 *
 * BENCH_CLOCK=cpu: CPU time (bench_util.h). */

#include <math.h>

#include <gsl/gsl_cblas.h>

#include <lsegraph/lsegraph.h>

#include "bench_util.h"

#ifdef LSE_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads); /* OpenBLAS extension */
#endif

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s N d K B THREADS [REPS]\n", argv[0]);
        return 2;
    }
    (void)lse_get_num_threads(); /* load the library (dgemm_peak.c) */
    const size_t n = strtoul(argv[1], NULL, 10), d = strtoul(argv[2], NULL, 10);
    const size_t k = strtoul(argv[3], NULL, 10), bs = strtoul(argv[4], NULL, 10);
    const int threads = atoi(argv[5]), reps = argc > 6 ? atoi(argv[6]) : 10;
    if (n == 0 || d == 0 || k == 0 || bs == 0 || threads < 1 || reps < 1) {
        fprintf(stderr, "%s: N, d, K, B, THREADS and REPS must be positive\n",
                argv[0]);
        return 2;
    }
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(threads);
#endif
    const size_t nv = 1 + 2 * d;
    double *v = malloc(n * nv * sizeof *v), *q = malloc(nv * k * sizeof *q);
    double *s = malloc(bs * k * sizeof *s), *acc = calloc(nv * k, sizeof *acc);
    if (v == NULL || q == NULL || s == NULL || acc == NULL)
        return 1;
    for (size_t i = 0; i < n; i++) {
        v[i * nv] = 1.0;
        for (size_t j = 0; j < d; j++) {
            const double y = (double)((i * 31 + j * 7) % 97) / 97.0 - 0.5;
            v[i * nv + 1 + j] = y;
            v[i * nv + 1 + d + j] = y * y;
        }
    }
    for (size_t i = 0; i < nv * k; i++)
        q[i] = (double)(i % 89) / 89.0 - 0.5;
    double best = INFINITY;
    for (int r = 0; r <= reps; r++) {
        const double t0 = bench_now();
        for (size_t i0 = 0; i0 < n; i0 += bs) {
            const size_t b = n - i0 < bs ? n - i0 : bs;
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b,
                        (int)k, (int)nv, 1.0, v + i0 * nv, (int)nv, q, (int)k,
                        0.0, s, (int)k);
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nv,
                        (int)k, (int)b, 1e-3, v + i0 * nv, (int)nv, s, (int)k,
                        1.0, acc, (int)k);
        }
        const double t = bench_now() - t0;
        if (r > 0 && t < best) /* pass 0 warms up */
            best = t;
    }
    const double flops = 4.0 * (double)n * (double)nv * (double)k;
    printf("RESULT tool=diag_gemm n=%zu d=%zu k=%zu block=%zu threads=%d "
           "ms_per_pass=%.3f gflops=%.2f check=%.6e\n",
           n, d, k, bs, threads, 1e3 * best, flops / best / 1e9, acc[nv * k / 2]);
    free(v);
    free(q);
    free(s);
    free(acc);
    return 0;
}
