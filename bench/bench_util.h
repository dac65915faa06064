#ifndef LSEGRAPH_BENCH_UTIL_H
#define LSEGRAPH_BENCH_UTIL_H

/* Helpers shared by the benchmark programs (not part of the library).
 *
 * Matrix files: the 8 bytes "LSEBENCH", then rows and cols as little-endian
 * uint64, then rows * cols doubles, row-major. bench/common.py reads the
 * same format with NumPy. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <gsl/gsl_matrix.h>

static const char bench_magic[8] = {'L', 'S', 'E', 'B', 'E', 'N', 'C', 'H'};

/* Write m to path; 0 on success. */
static inline int bench_write(const char *path, const gsl_matrix *m)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    const uint64_t dims[2] = {m->size1, m->size2};
    int ok = fwrite(bench_magic, 1, 8, f) == 8 &&
             fwrite(dims, sizeof dims[0], 2, f) == 2;
    for (size_t i = 0; ok && i < m->size1; i++)
        ok = fwrite(gsl_matrix_const_ptr(m, i, 0), sizeof(double), m->size2,
                    f) == m->size2;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* Read path into a new matrix, or NULL (message on stderr). */
static inline gsl_matrix *bench_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    char magic[8];
    uint64_t dims[2];
    gsl_matrix *m = NULL;
    if (fread(magic, 1, 8, f) == 8 && memcmp(magic, bench_magic, 8) == 0 &&
        fread(dims, sizeof dims[0], 2, f) == 2 && dims[0] > 0 && dims[1] > 0)
        m = gsl_matrix_alloc(dims[0], dims[1]);
    if (m != NULL && fread(m->data, sizeof(double), dims[0] * dims[1], f) !=
                         dims[0] * dims[1]) {
        gsl_matrix_free(m);
        m = NULL;
    }
    fclose(f);
    if (m == NULL)
        fprintf(stderr, "%s: not a bench matrix file\n", path);
    return m;
}

/* Wall-clock seconds. */
/* Seconds on the wall clock, or with BENCH_CLOCK=cpu the process's CPU
 * time (all threads): less sensitive to a loaded machine for 1-thread
 * A/B comparisons (bench/round2.sh). */
static inline double bench_now(void)
{
    struct timespec ts;
    const char *clk = getenv("BENCH_CLOCK");
    clock_gettime(clk != NULL && strcmp(clk, "cpu") == 0
                      ? CLOCK_PROCESS_CPUTIME_ID
                      : CLOCK_MONOTONIC,
                  &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Peak resident set size of this process in MiB. */
static inline double bench_maxrss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1.0;
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

/* Runs of every timed fit: BENCH_REPS (default 5, 1 to 99). */
static inline int bench_reps(void)
{
    const char *s = getenv("BENCH_REPS");
    const int n = s != NULL ? atoi(s) : 5;
    return n >= 1 && n <= 99 ? n : 5;
}

/* Median of v[0..n) (n >= 1; v is sorted in place). */
static inline double bench_median(double *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            const double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* path = dir/name */
static inline void bench_path(char *out, size_t len, const char *dir,
                              const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

#endif /* LSEGRAPH_BENCH_UTIL_H */
