#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "softmax-private.h"

/* lib/softmax.c (private: compiled in): on a CPU with AVX-512 the softmax
 * of contiguous blocks of narrow rows (at most 4 entries) runs eight rows
 * at a time across the rows (softmax_cols8); a block with padded rows
 * (tda > n) runs row by row (softmax8_rows). The two must give the same
 * bits, in place or not, with masked entries and fully masked rows, and
 * both must be the softmax. Without AVX-512 both blocks take the same
 * path and the comparison is trivially equal; the softmax checks hold. */

static void fill(gsl_matrix *s, gsl_rng *rng)
{
    for (size_t i = 0; i < s->size1; i++)
        for (size_t j = 0; j < s->size2; j++) {
            double v = 3.0 * gsl_ran_gaussian(rng, 1.0) - 40.0 * (double)(i % 3);
            if ((i * 7 + j * 3) % 11 == 5)
                v = -INFINITY; /* a masked pair */
            if (i % 17 == 9)
                v = -INFINITY; /* a fully masked row */
            if (i % 13 == 4 && j == 0)
                v = 0.0;
            if (i % 19 == 11) /* +0 and -0 tie for the maximum */
                v = j == 1 ? 0.0 : j == 3 ? -0.0 : -5.0;
            gsl_matrix_set(s, i, j, v);
        }
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

START_TEST(test_cols_equal_rows)
{
    const lse_softmax_isa isa = lse_softmax_isa_detect();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7u);
    const size_t bs[5] = {1, 8, 13, 37, 256};
    const double betas[2] = {1.0, 0.7};
    for (size_t n = 1; n <= 17; n++)
        for (size_t q = 0; q < 10; q++) {
            const double beta = betas[q / 5];
            const size_t b = bs[q % 5];
            gsl_matrix *s = gsl_matrix_alloc(b, n), *a = gsl_matrix_alloc(b, n);
            gsl_matrix *inplace = gsl_matrix_alloc(b, n);
            gsl_matrix *wide = gsl_matrix_alloc(b, n + 3);
            double *lse1 = malloc(b * sizeof *lse1), *lse2 = malloc(b * sizeof *lse2);
            double *lse3 = malloc(b * sizeof *lse3), *m = malloc(b * sizeof *m);
            ck_assert(s && a && inplace && wide && lse1 && lse2 && lse3 && m);
            fill(s, rng);
            gsl_matrix_memcpy(inplace, s);
            gsl_matrix_view sw = gsl_matrix_submatrix(wide, 0, 0, b, n);
            gsl_matrix_memcpy(&sw.matrix, s);
            lse_softmax_rows(s, a, beta, lse1, m, &isa);
            lse_softmax_rows(inplace, inplace, beta, lse2, m, &isa);
            lse_softmax_rows(&sw.matrix, &sw.matrix, beta, lse3, m, &isa);
            for (size_t i = 0; i < b; i++) {
                ck_assert_msg(same_bits(lse1[i], lse3[i]) && same_bits(lse2[i], lse3[i]),
                              "n %zu b %zu row %zu: lse %.17g %.17g %.17g", n, b, i,
                              lse1[i], lse2[i], lse3[i]);
                /* the definition: lse = log sum exp, softmax sums to 1 */
                double mx = -INFINITY, sum = 0.0, asum = 0.0;
                for (size_t j = 0; j < n; j++)
                    mx = fmax(mx, gsl_matrix_get(s, i, j));
                for (size_t j = 0; j < n; j++) {
                    const double v = gsl_matrix_get(a, i, j);
                    ck_assert_msg(same_bits(v, gsl_matrix_get(inplace, i, j)) &&
                                      same_bits(v, gsl_matrix_get(&sw.matrix, i, j)),
                                  "n %zu b %zu a(%zu,%zu)", n, b, i, j);
                    if (mx > -INFINITY) {
                        const double e =
                            exp(beta * (gsl_matrix_get(s, i, j) - mx));
                        sum += e;
                    }
                    asum += v;
                }
                if (mx == -INFINITY) {
                    ck_assert(lse1[i] == -INFINITY && asum == 0.0);
                } else {
                    ck_assert_double_eq_tol(lse1[i], mx + log(sum) / beta,
                                            1e-13 * (1.0 + fabs(mx)));
                    ck_assert_double_eq_tol(asum, 1.0, 1e-14);
                }
            }
            gsl_matrix_free(s);
            gsl_matrix_free(a);
            gsl_matrix_free(inplace);
            gsl_matrix_free(wide);
            free(lse1);
            free(lse2);
            free(lse3);
            free(m);
        }
    gsl_rng_free(rng);
}
END_TEST

/* lse_softmax_find_bad (lib/softmax.c), plain and AVX2 scans: the first
 * NaN or +INFINITY in row order, none for -INFINITY, huge and signed-zero
 * entries; contiguous blocks and padded rows (a view) of every width to 9,
 * the bad entry at every place, and NaNs of either sign and any payload. */
START_TEST(test_find_bad)
{
    const lse_softmax_isa plain = {0, 0, 0}, det = lse_softmax_isa_detect();
    const double bads[4] = {NAN, -NAN, INFINITY, 0.0};
    const uint64_t payload = UINT64_C(0x7FF0000000000001); /* a signalling NaN */
    double snan;
    memcpy(&snan, &payload, sizeof snan);
    for (size_t n = 1; n <= 9; n++)
        for (size_t rows = 1; rows <= 7; rows++)
            for (int pad = 0; pad < 2; pad++) {
                gsl_matrix *big = gsl_matrix_alloc(rows, n + 3);
                gsl_matrix_view v = gsl_matrix_submatrix(big, 0, 0, rows, n);
                gsl_matrix *s = pad ? &v.matrix : gsl_matrix_alloc(rows, n);
                for (size_t at = 0; at <= rows * n; at++)
                    for (int b = 0; b < 5; b++) {
                        for (size_t i = 0; i < rows; i++)
                            for (size_t j = 0; j < n; j++)
                                gsl_matrix_set(s, i, j,
                                               (i + j) % 3 == 0 ? -INFINITY
                                               : (i + j) % 3 == 1 ? -0.0
                                                                  : 1e308);
                        for (size_t j = 0; pad && j < 3; j++)
                            gsl_matrix_set(big, 0, n + j, NAN); /* padding */
                        const int put = at < rows * n && b < 4 && b != 3;
                        if (at < rows * n)
                            gsl_matrix_set(s, at / n, at % n,
                                           b == 4 ? snan : bads[b]);
                        const int want = put || (at < rows * n && b == 4);
                        for (int k = 0; k < 2; k++) {
                            size_t r = SIZE_MAX, c = SIZE_MAX;
                            const int got = lse_softmax_find_bad(
                                s, k ? &det : &plain, &r, &c);
                            ck_assert_int_eq(got, want);
                            if (want) {
                                ck_assert_uint_eq(r, at / n);
                                ck_assert_uint_eq(c, at % n);
                            }
                        }
                    }
                if (!pad)
                    gsl_matrix_free(s);
                gsl_matrix_free(big);
            }
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("softmax_cols");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cols_equal_rows);
    tcase_add_test(tc, test_find_bad);
    suite_add_tcase(s, tc);
    return s;
}
