/* The softmax of blocks of narrow score rows (lib/softmax.c, compiled in;
 * docs/performance.md "Narrow softmax, session 13"): the CPU time per row
 * of lse_softmax_rows on (rows) x (K entries per row), the minimum over
 * many repeats (the machine is shared: CPU time, not wall clock).
 *
 *   softmax_bench [avx512|fma] [repeats]
 *
 * avx512 (default where the CPU has it) or fma selects the copy; rows =
 * 150, 272 and 100000 (the sizes of iris, faithful and a large fit), K =
 * 2..16, beta = 1, contiguous rows, out of place (lib/term.c calls it in
 * place; the arithmetic is the same) so that the input stays put. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_matrix.h>

#include "softmax-private.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Scores of a fitted mixture: one dominant component per row, the others
 * spread over tens of nats below. */
static void fill(gsl_matrix *s, unsigned *seed)
{
    for (size_t i = 0; i < s->size1; i++)
        for (size_t j = 0; j < s->size2; j++) {
            *seed = *seed * 1103515245u + 12345u;
            gsl_matrix_set(s, i, j, -30.0 * (double)(*seed >> 8) / 16777216.0);
        }
}

int main(int argc, char **argv)
{
    lse_softmax_isa isa = lse_softmax_isa_detect();
    if (argc > 1 && strcmp(argv[1], "fma") == 0)
        isa.avx512 = 0;
    else if (argc > 1 && strcmp(argv[1], "avx512") != 0) {
        fprintf(stderr, "softmax_bench: first argument '%s': avx512 or fma\n",
                argv[1]);
        return 2;
    }
    const int reps = argc > 2 ? atoi(argv[2]) : 30;
    if (!isa.fma || reps < 1) {
        fprintf(stderr, "softmax_bench: needs AVX2 + FMA and repeats >= 1\n");
        return 2;
    }
    const size_t rows[3] = {150, 272, 100000};
    printf("# %s, ns per row (min of %d repeats of CPU time)\n",
           isa.avx512 ? "avx512" : "fma", reps);
    printf("%4s %10s %10s %10s\n", "K", "150", "272", "100000");
    unsigned seed = 1u;
    double sink = 0.0;
    for (size_t k = 2; k <= 16; k++) {
        printf("%4zu", k);
        for (size_t q = 0; q < 3; q++) {
            const size_t b = rows[q];
            gsl_matrix *s = gsl_matrix_alloc(b, k), *a = gsl_matrix_alloc(b, k);
            double *lse = malloc(b * sizeof *lse), *m = malloc(b * sizeof *m);
            if (!s || !a || !lse || !m) {
                fprintf(stderr, "softmax_bench: out of memory\n");
                return 1;
            }
            fill(s, &seed);
            /* about 2e6 rows per repeat, so that the clock's step is small */
            const size_t inner = b >= 2000000 ? 1 : 2000000 / b;
            double best = INFINITY;
            for (int r = 0; r < reps; r++) {
                const double t0 = cpu_now();
                for (size_t it = 0; it < inner; it++) {
                    lse_softmax_rows(s, a, 1.0, lse, m, &isa);
                    sink += lse[it % b];
                }
                const double t = cpu_now() - t0;
                best = fmin(best, t / (double)inner);
            }
            printf(" %10.2f", 1e9 * best / (double)b);
            gsl_matrix_free(a);
            gsl_matrix_free(s);
            free(lse);
            free(m);
        }
        printf("\n");
    }
    fprintf(stderr, "# checksum %.6g\n", sink);
    return 0;
}
