#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-private.h"
#include "lse_check.h"
#include "lse_tri_check.h"

#if LSE_HAVE_AVX2_PATH
#include <immintrin.h>

#include "sim/gauss_tri_stats_avx2.h"
#endif

/* The AVX2 statistics kernel of the triangle-aware whitened path
 * (lib/sim/gauss_tri_stats_avx2.h, compiled in) bit for bit against a
 * scalar reference written with fma() in the chains the kernels promise
 * (gauss_tri_body.h): w_i = rho_i (x_i - mu), s1 += (0 + w_1) + w_2 ...,
 * and s2(a, j) += fma(w_b,a, r_b,j, ... fma(w_1,a, r_1,j, 0)) for a <= j.
 * test_perf_invariants' test_tri_copies_agree compares it with the
 * AVX-512 copy only on a CPU that has both. */

static void reference(const double *x, size_t b, size_t d, const double *mu,
                      const double *rho, double *s1, double *s2)
{
    for (size_t j = 0; j < d; j++) {
        double acc = 0.0;
        for (size_t i = 0; i < b; i++)
            acc = acc + rho[i] * (x[i * d + j] - mu[j]);
        s1[j] += acc;
    }
    for (size_t a = 0; a < d; a++)
        for (size_t j = a; j < d; j++) {
            double acc = 0.0;
            for (size_t i = 0; i < b; i++)
                acc = fma(rho[i] * (x[i * d + a] - mu[a]), x[i * d + j] - mu[j],
                          acc);
            s2[a * d + j] += acc;
        }
}

#if LSE_HAVE_AVX2_PATH
static int have_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* one block of b rows in dimension d; two blocks in a row, so that the
 * second adds to the first's sums */
static void check_one(size_t d, size_t b, unsigned long seed)
{
    const size_t dp = (d + 7) / 8 * 8;
    double *x = malloc(b * d * sizeof *x);
    double *xq = malloc(ts_size(b, d) * sizeof *xq);
    double *wq = malloc(ts_size(b, d) * sizeof *wq);
    double *mu = calloc(dp, sizeof *mu), *rho = malloc(b * sizeof *rho);
    double *s1 = calloc(d, sizeof *s1), *s2 = calloc(d * d, sizeof *s2);
    double *r1 = calloc(d, sizeof *r1), *r2 = calloc(d * d, sizeof *r2);
    ck_assert(x && xq && wq && mu && rho && s1 && s2 && r1 && r2);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < b * d; i++)
            x[i] = 3.0 + val(&seed);
        for (size_t j = 0; j < d; j++)
            mu[j] = 3.0 + 0.5 * val(&seed);
        for (size_t i = 0; i < b; i++)
            rho[i] = i % 7 == 3 ? 0.0 : fabs(val(&seed)) / 8.0;
        for (size_t i = 0; i < b; i++)
            ts_pack_row(x + i * d, i, b, d, xq);
        tri_stats_avx2(xq, b, d, mu, rho, wq, s1, s2);
        reference(x, b, d, mu, rho, r1, r2);
    }
    for (size_t j = 0; j < d; j++)
        ck_assert_msg(same_bits(s1[j], r1[j]), "d %zu b %zu s1[%zu]: %.17g vs %.17g",
                      d, b, j, s1[j], r1[j]);
    for (size_t a = 0; a < d; a++)
        for (size_t j = 0; j < d; j++)
            ck_assert_msg(same_bits(s2[a * d + j], r2[a * d + j]),
                          "d %zu b %zu s2[%zu][%zu]: %.17g vs %.17g", d, b, a,
                          j, s2[a * d + j], r2[a * d + j]);
    free(x);
    free(xq);
    free(wq);
    free(mu);
    free(rho);
    free(s1);
    free(s2);
    free(r1);
    free(r2);
}
#endif

START_TEST(test_stats_against_reference)
{
#if LSE_HAVE_AVX2_PATH
    if (!have_avx2_fma())
        return;
    static const size_t dims[] = {1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 19, 24, 64, 65};
    static const size_t rows[] = {1, 2, 7, 33, 255, 256, 257};
    for (size_t q = 0; q < sizeof dims / sizeof dims[0]; q++)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            check_one(dims[q], rows[r], 1000 * q + r + 1);
#endif
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("tri_stats_avx2");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_stats_against_reference);
    suite_add_tcase(s, tc);
    return s;
}
