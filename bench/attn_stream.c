/* Streaming self-attention energy + gradient (lse_attn_stream,
 * docs/performance.md "Streaming attention") against its FLOP roofline,
 * measured in the same run:
 *
 *   E = -sum_i (1/beta) log sum_j exp(beta q_i.k_j / sqrt(d)),
 *   dE/dQ and dE/dK, Q, K (T, d) pseudo-random in [-1, 1).
 *
 *   roofline = 6 T^2 d / (dgemm rate) + T^2 / (exp rate)
 *
 * dgemm rate: the best of 3 square dgemms (n = 2000) on THREADS OpenBLAS
 * threads; exp rate: the library's vectorized exp (lse_exp_nonpos8 with
 * AVX-512, lse_exp_nonpos4 with AVX2 + FMA, else the plain lse_exp_nonpos:
 * what lse_attn_stream runs) over a 4096-entry buffer in cache,
 * THREADS OpenMP threads. Peak memory: VmHWM. The cpu_ figures use CPU
 * time per thread instead of the wall clock (for a loaded machine).
 *
 *   attn_stream T [D] [THREADS] [REPS]     (defaults 8192 64 2 1)
 *
 * prints one RESULT line (seconds = the best of REPS). */

#include <math.h>
#include <stdint.h>
#include <sys/resource.h>

#include <gsl/gsl_cblas.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <lsegraph/lsegraph.h>

#include "bench_util.h"
#include "kernels-private.h"

#ifdef LSE_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads); /* OpenBLAS extension */
#endif

/* CPU seconds of the whole process (all threads): on a loaded machine
 * the wall clock also counts the time the threads waited for a core, the
 * CPU time does not; cpu rates are work / (CPU seconds / threads). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Peak resident memory of this process image in MiB (VmHWM; getrusage's
 * maximum survives exec and would report the parent's). */
static double peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1.0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = atof(line + 6);
    if (f != NULL)
        fclose(f);
    return kib / 1024.0;
}

static double gemm_cpu_rate = 0.0, exp_cpu_rate = 0.0;

static double dgemm_rate(int threads)
{
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(threads);
#else
    (void)threads;
#endif
    const int n = 2000;
    const size_t nn = (size_t)n * (size_t)n;
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b);
    double *c = calloc(nn, sizeof *c);
    if (a == NULL || b == NULL || c == NULL)
        exit(1);
    for (size_t i = 0; i < nn; i++) {
        a[i] = (double)(i % 97) / 97.0 - 0.5;
        b[i] = (double)(i % 89) / 89.0 - 0.5;
    }
    double best = INFINITY, best_cpu = INFINITY;
    for (int rep = 0; rep < 4; rep++) {
        const double c0 = cpu_now(), t0 = bench_now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a,
                    n, b, n, 0.0, c, n);
        const double s = bench_now() - t0, cs = cpu_now() - c0;
        if (rep > 0 && s < best)
            best = s;
        if (rep > 0 && cs < best_cpu)
            best_cpu = cs;
    }
    gemm_cpu_rate = 2.0 * (double)n * n * n / (best_cpu / threads);
    free(a);
    free(b);
    free(c);
    return 2.0 * (double)n * n * n / best;
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX512
static double exp_pass8(double *x, size_t n)
{
    __m512d acc = _mm512_setzero_pd();
    for (size_t j = 0; j < n; j += 8)
        acc = _mm512_add_pd(acc, lse_exp_nonpos8(_mm512_loadu_pd(x + j)));
    return _mm512_reduce_add_pd(acc);
}

LSE_TARGET_AVX2_FMA
static double exp_pass4(double *x, size_t n)
{
    __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0;
    for (size_t j = 0; j < n; j += 8) {
        acc0 = _mm256_add_pd(acc0, lse_exp_nonpos4(_mm256_loadu_pd(x + j)));
        acc1 = _mm256_add_pd(acc1, lse_exp_nonpos4(_mm256_loadu_pd(x + j + 4)));
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(acc0, acc1));
    return (t[0] + t[1]) + (t[2] + t[3]);
}
#endif

/* isa: 2 AVX-512, 1 AVX2 + FMA, 0 plain (n a multiple of 8) */
static double exp_pass(double *x, size_t n, int isa)
{
#if LSE_HAVE_AVX2_PATH
    if (isa == 2)
        return exp_pass8(x, n);
    if (isa == 1)
        return exp_pass4(x, n);
#endif
    (void)isa;
    double s = 0.0;
    for (size_t j = 0; j < n; j++)
        s += lse_exp_nonpos(x[j]);
    return s;
}

/* exponentials per second on THREADS threads */
static double exp_rate(int threads)
{
    const size_t n = 4096, reps = 20000;
    const int isa = lse_cpu_avx512() ? 2 : lse_cpu_avx2_fma() ? 1 : 0;
    double sink = 0.0, best = INFINITY, best_cpu = INFINITY;
    for (int trial = 0; trial < 3; trial++) {
        const double c0 = cpu_now(), t0 = bench_now();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sink)
#endif
        {
            double x[4096];
            for (size_t j = 0; j < n; j++)
                x[j] = -(double)(j % 700) * 0.01;
            for (size_t r = 0; r < reps; r++)
                sink += exp_pass(x, n, isa);
        }
        const double s = bench_now() - t0, cs = cpu_now() - c0;
        if (s < best)
            best = s;
        if (cs < best_cpu)
            best_cpu = cs;
    }
    exp_cpu_rate = (double)threads * (double)n * (double)reps / (best_cpu / threads);
    if (sink == 42.0)
        printf("#");
    return (double)threads * (double)n * (double)reps / best;
}

int main(int argc, char **argv)
{
    const size_t T = argc > 1 ? (size_t)atol(argv[1]) : 8192;
    const size_t d = argc > 2 ? (size_t)atol(argv[2]) : 64;
    const int threads = argc > 3 ? atoi(argv[3]) : 2;
    const int reps = argc > 4 ? atoi(argv[4]) : 1;
    if (T < 1 || d < 1 || threads < 1 || reps < 1) {
        fprintf(stderr, "usage: %s T [D] [THREADS] [REPS]\n", argv[0]);
        return 2;
    }
    const double gemm = dgemm_rate(threads);
    const double ex = exp_rate(threads);
    lse_set_num_threads(threads);
    gsl_matrix *q = gsl_matrix_alloc(T, d), *k = gsl_matrix_alloc(T, d);
    gsl_matrix *dq = gsl_matrix_alloc(T, d), *dk = gsl_matrix_alloc(T, d);
    if (q == NULL || k == NULL || dq == NULL || dk == NULL)
        return 1;
    uint64_t s = 12345;
    for (size_t i = 0; i < T * d; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        q->data[i] = (double)(s >> 11) / 4503599627370496.0 - 1.0;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        k->data[i] = (double)(s >> 11) / 4503599627370496.0 - 1.0;
    }
    double best = INFINITY, best_cpu = INFINITY, e = 0.0;
    for (int r = 0; r < reps; r++) {
        gsl_matrix_set_zero(dq);
        gsl_matrix_set_zero(dk);
        lse_error err;
        const double c0 = cpu_now(), t0 = bench_now();
        const lse_status st = lse_attn_stream(q, k, 1.0, 1.0 / sqrt((double)d),
                                              0, &e, dq, dk, &err);
        const double sec = bench_now() - t0, csec = cpu_now() - c0;
        if (csec / threads < best_cpu)
            best_cpu = csec / threads;
        if (st != LSE_OK) {
            fprintf(stderr, "attn_stream: %s\n", err.message);
            return 1;
        }
        if (sec < best)
            best = sec;
    }
    const double t2 = (double)T * (double)T;
    const double roof = 6.0 * t2 * (double)d / gemm + t2 / ex;
    const double roof_cpu =
        6.0 * t2 * (double)d / gemm_cpu_rate + t2 / exp_cpu_rate;
    double gq = 0.0, gk = 0.0;
    for (size_t i = 0; i < T * d; i++) {
        gq += dq->data[i] * dq->data[i];
        gk += dk->data[i] * dk->data[i];
    }
    printf("RESULT tool=lsegraph case=attn-stream T=%zu d=%zu threads=%d "
           "seconds=%.4f roofline=%.4f ratio=%.2f dgemm_gflops=%.1f "
           "exp_per_ns=%.3f cpu_seconds=%.4f cpu_roofline=%.4f cpu_ratio=%.2f "
           "cpu_dgemm_gflops=%.1f cpu_exp_per_ns=%.3f maxrss_mib=%.1f "
           "energy=%.15e gq=%.15e gk=%.15e\n",
           T, d, threads, best, roof, best / roof, gemm / 1e9, ex / 1e9,
           best_cpu, roof_cpu, best_cpu / roof_cpu, gemm_cpu_rate / 1e9,
           exp_cpu_rate / 1e9, peak_mib(), e, sqrt(gq), sqrt(gk));
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(dq);
    gsl_matrix_free(dk);
    return 0;
}
