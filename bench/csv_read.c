/* CSV reading speed (docs/io.md "Speed"): lse_table_read + lse_table_to_matrix
 * of a numeric CSV file, the way lsefit loads its data; MB/s = file bytes /
 * seconds (MB = 1e6 bytes), best of REPS, with the time split between the
 * two calls (text to table of cells, cells to numbers). The reader is
 * single-threaded: cpu_s (this thread's CPU time, CLOCK_THREAD_CPUTIME_ID)
 * and cpu_mb_per_s are the figures to read on a loaded machine, where the
 * wall clock mostly counts the time the process waited for a core.
 *
 *   csv_read FILE [REPS]        (default 5)
 *
 * Set b of docs/performance.md as CSV: bench/csv_bench.sh writes it and
 * runs this. */

#include <lsegraph/lsegraph.h>

#include "bench_util.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [REPS]\n", argv[0]);
        return 2;
    }
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    double best = 1e300, best_parse = 0.0, best_conv = 0.0, check = 0.0;
    double best_cpu = 1e300;
    size_t bytes = 0, rows = 0, cols = 0;
    for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
        lse_error err;
        lse_table *t = NULL;
        gsl_matrix *x = NULL;
        const double c0 = cpu_now();
        const double t0 = bench_now();
        if (lse_table_read(argv[1], NULL, &t, &err) != LSE_OK) {
            fprintf(stderr, "csv_read: %s\n", err.message);
            return 1;
        }
        const double t1 = bench_now();
        if (lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &x, NULL,
                                &err) != LSE_OK) {
            fprintf(stderr, "csv_read: %s\n", err.message);
            return 1;
        }
        const double t2 = bench_now();
        if (cpu_now() - c0 < best_cpu)
            best_cpu = cpu_now() - c0;
        if (t2 - t0 < best) {
            best = t2 - t0;
            best_parse = t1 - t0;
            best_conv = t2 - t1;
        }
        rows = x->size1;
        cols = x->size2;
        check = 0.0;
        for (size_t i = 0; i < rows * cols; i++)
            check += x->data[i];
        gsl_matrix_free(x);
        lse_table_free(t);
    }
    FILE *f = fopen(argv[1], "rb");
    if (f != NULL) {
        fseek(f, 0, SEEK_END);
        bytes = (size_t)ftell(f);
        fclose(f);
    }
    printf("RESULT tool=lsegraph case=csv-read rows=%zu cols=%zu bytes=%zu "
           "seconds=%.4f mb_per_s=%.1f table_s=%.4f numbers_s=%.4f "
           "cpu_s=%.4f cpu_mb_per_s=%.1f sum=%.17g\n",
           rows, cols, bytes, best, (double)bytes / best / 1e6, best_parse,
           best_conv, best_cpu, (double)bytes / best_cpu / 1e6, check);
    return 0;
}
