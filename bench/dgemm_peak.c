/* This machine's dgemm rate: C = A B with n x n matrices (default 2000)
 * through the CBLAS the library links (OpenBLAS when found), best of 5
 * runs after a warm-up, on THREADS OpenBLAS threads. It calls the library
 * once so that OpenBLAS runs the kernel set the library runs (lib/threads.c
 * switches OpenBLAS off its SSE3 fallback when it is loaded).
 *
 *   dgemm_peak THREADS [N] */

#include <math.h>

#include <gsl/gsl_cblas.h>

#include <lsegraph/lsegraph.h>

#include "bench_util.h"

#ifdef LSE_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads); /* OpenBLAS extension */
#endif

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s THREADS [N]\n", argv[0]);
        return 2;
    }
    (void)lse_get_num_threads(); /* load the library (see above) */
    const int threads = atoi(argv[1]);
    const int n = argc > 2 ? atoi(argv[2]) : 2000;
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(threads);
#endif
    const size_t nn = (size_t)n * (size_t)n;
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b);
    double *c = calloc(nn, sizeof *c);
    if (a == NULL || b == NULL || c == NULL)
        return 1;
    for (size_t i = 0; i < nn; i++) {
        a[i] = (double)(i % 97) / 97.0 - 0.5;
        b[i] = (double)(i % 89) / 89.0 - 0.5;
    }
    double best = INFINITY;
    for (int rep = 0; rep < 6; rep++) {
        const double t0 = bench_now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a,
                    n, b, n, 0.0, c, n);
        const double s = bench_now() - t0;
        if (rep > 0 && s < best) /* rep 0 warms up */
            best = s;
    }
    const double gflops = 2.0 * (double)n * (double)n * (double)n / best / 1e9;
    printf("RESULT tool=dgemm case=dgemm-%d threads=%d gflops=%.2f "
           "seconds=%.4f check=%.6e\n",
           n, threads, gflops, best, c[nn / 2]);
    free(a);
    free(b);
    free(c);
    return 0;
}
