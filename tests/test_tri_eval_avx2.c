#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-private.h"
#include "lse_check.h"
#include "lse_tri_check.h"

#if LSE_HAVE_AVX2_PATH
#include <immintrin.h>

#include "sim/gauss_tri_eval_avx2.h"
#endif

/* The AVX2 E-step kernel of the triangle-aware whitened path
 * (lib/sim/gauss_tri_eval_avx2.h, compiled in) bit for bit against a
 * scalar reference written with fma() in the chains of
 * gauss_tri_body.h's tri_eval (the 8-lane copy): for row y and column j
 * of strip s, acc = fma(y_m, U(m, j), acc) for m < min(d, 8 s + 8),
 * lane j % 8 of the sum of squares q_l = fma(z, z, q_l) strips in
 * order, then ((q0 + q4) + (q2 + q6)) + ((q1 + q5) + (q3 + q7)).
 * test_perf_invariants' test_tri_copies_agree compares it with the
 * AVX-512 copy only on a CPU that has both. */

#if LSE_HAVE_AVX2_PATH
/* row y (d) against factor U (d x d, row-major, upper triangular) and
 * offsets o (d): cn - 1/2 |y U - o|^2 in the body's order */
static double reference(const double *y, size_t d, const double *U,
                        const double *o, double cn)
{
    double ql[8] = {0};
    for (size_t s = 0; s < (d + 7) / 8; s++) {
        const size_t mend = 8 * s + 8 < d ? 8 * s + 8 : d;
        for (size_t e = 0; e < 8; e++) {
            const size_t j = 8 * s + e;
            double acc = 0.0;
            for (size_t m = 0; m < mend; m++)
                acc = fma(y[m], j < d ? U[m * d + j] : 0.0, acc);
            const double z = acc - (j < d ? o[j] : 0.0);
            ql[e] = fma(z, z, ql[e]);
        }
    }
    const double q = ((ql[0] + ql[4]) + (ql[2] + ql[6])) +
                     ((ql[1] + ql[5]) + (ql[3] + ql[7]));
    return cn - 0.5 * q;
}

static int have_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* K factors packed as lse_gauss_work's utri (strip s: its rows m <
 * min(d, 8 s + 8), 8 doubles each, zero-padded), b rows of tda d + 3,
 * scores of tda K + 1, constants of stride 2 */
static void check_one(size_t d, size_t b, unsigned long seed)
{
    const size_t K = 3, dp = (d + 7) / 8 * 8, nst = dp / 8;
    const size_t us = 32 * (nst - 1) * nst + 8 * d, yt = d + 3, st = K + 1;
    double *U = calloc(K * d * d, sizeof *U), *u = calloc(K * us, sizeof *u);
    double *o = calloc(K * dp, sizeof *o), *cn = malloc(2 * K * sizeof *cn);
    double *y = malloc(b * yt * sizeof *y), *s = malloc(b * st * sizeof *s);
    ck_assert(U && u && o && cn && y && s);
    for (size_t k = 0; k < K; k++) {
        double *Uk = U + k * d * d;
        for (size_t m = 0; m < d; m++)
            for (size_t j = m; j < d; j++)
                Uk[m * d + j] = val(&seed);
        for (size_t t = 0; t < nst; t++) {
            double *pan = u + k * us + tri_panel(t);
            for (size_t m = 0; m < d && m < 8 * t + 8; m++)
                for (size_t e = 0; e < 8 && 8 * t + e < d; e++)
                    pan[8 * m + e] = Uk[m * d + 8 * t + e];
        }
        for (size_t j = 0; j < d; j++)
            o[k * dp + j] = val(&seed);
        cn[2 * k] = val(&seed);
    }
    for (size_t i = 0; i < b * yt; i++)
        y[i] = val(&seed);
    for (size_t i = 0; i < b * st; i++)
        s[i] = -7.0;
    tri_eval_avx2(y, yt, b, d, dp, K, u, us, o, cn, 2, s, st);
    for (size_t i = 0; i < b; i++) {
        for (size_t k = 0; k < K; k++) {
            const double r = reference(y + i * yt, d, U + k * d * d,
                                       o + k * dp, cn[2 * k]);
            ck_assert_msg(same_bits(s[i * st + k], r),
                          "d %zu b %zu S[%zu][%zu]: %.17g vs %.17g", d, b, i,
                          k, s[i * st + k], r);
        }
        ck_assert_msg(s[i * st + K] == -7.0, "d %zu b %zu: pad of row %zu", d,
                      b, i);
    }
    free(U);
    free(u);
    free(o);
    free(cn);
    free(y);
    free(s);
}
#endif

START_TEST(test_eval_against_reference)
{
#if LSE_HAVE_AVX2_PATH
    if (!have_avx2_fma())
        return;
    static const size_t dims[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  11,
                                  12, 13, 16, 19, 24, 25, 33, 64, 65};
    static const size_t rows[] = {1, 2, 3, 4, 5, 7, 33, 256, 257};
    for (size_t q = 0; q < sizeof dims / sizeof dims[0]; q++)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            check_one(dims[q], rows[r], 1000 * q + r + 1);
#endif
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("tri_eval_avx2");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_eval_against_reference);
    suite_add_tcase(s, tc);
    return s;
}
