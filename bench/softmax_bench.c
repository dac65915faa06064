/* The row softmax of narrow score blocks (lib/softmax.c, compiled in: the
 * kernel is private), nanoseconds per row: for rows = 150, 272 and 1e5
 * and K = 2 .. 16 entries per row, the contiguous block (the path a GMM's
 * scores take) and the same rows with padding (tda = K + 3: the
 * row-by-row path), the minimum over R repeats of the CPU time of enough
 * calls to last about 2 ms. docs/performance.md, "Narrow softmax,
 * session 13".
 *
 *     bench/softmax_bench [R]        (R default 15) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <gsl/gsl_matrix.h>

#include "softmax-private.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ns per row of lse_softmax_rows on s (in place into a copy each call) */
static double time_rows(const gsl_matrix *s, gsl_matrix *a, double *lse,
                        double *m, const lse_softmax_isa *isa, int reps)
{
    const size_t b = s->size1;
    size_t calls = (size_t)(2e5 / (double)b) + 1; /* ~2e5 rows a timing */
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        const double t0 = cpu_now();
        for (size_t c = 0; c < calls; c++)
            lse_softmax_rows(s, a, 1.0, lse, m, isa);
        const double t = cpu_now() - t0;
        if (t < best)
            best = t;
    }
    return 1e9 * best / (double)(calls * b);
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 15;
    const lse_softmax_isa isa = lse_softmax_isa_detect();
    const size_t rows[3] = {150, 272, 100000};
    printf("isa: avx512 %d fma %d avx2 %d\n", isa.avx512, isa.fma, isa.avx2);
    printf("| rows | K | contiguous ns/row | padded ns/row |\n|---|---|---|---|\n");
    for (size_t q = 0; q < 3; q++)
        for (size_t n = 2; n <= 16; n++) {
            const size_t b = rows[q];
            gsl_matrix *s = gsl_matrix_alloc(b, n), *a = gsl_matrix_alloc(b, n);
            gsl_matrix *pw = gsl_matrix_alloc(b, n + 3);
            gsl_matrix *pa = gsl_matrix_alloc(b, n + 3);
            double *lse = malloc(b * sizeof *lse), *m = malloc(b * sizeof *m);
            if (!s || !a || !pw || !pa || !lse || !m)
                return 1;
            unsigned long x = 12345;
            for (size_t i = 0; i < b; i++)
                for (size_t j = 0; j < n; j++) {
                    x = x * 6364136223846793005UL + 1442695040888963407UL;
                    const double v = -20.0 * (double)(x >> 11) / 9007199254740992.0;
                    gsl_matrix_set(s, i, j, v);
                    gsl_matrix_set(pw, i, j, v);
                }
            gsl_matrix_view ps = gsl_matrix_submatrix(pw, 0, 0, b, n);
            gsl_matrix_view pv = gsl_matrix_submatrix(pa, 0, 0, b, n);
            const double tc = time_rows(s, a, lse, m, &isa, reps);
            const double tp = time_rows(&ps.matrix, &pv.matrix, lse, m, &isa, reps);
            printf("| %zu | %zu | %.2f | %.2f |\n", b, n, tc, tp);
            gsl_matrix_free(s);
            gsl_matrix_free(a);
            gsl_matrix_free(pw);
            gsl_matrix_free(pa);
            free(lse);
            free(m);
        }
    return 0;
}
