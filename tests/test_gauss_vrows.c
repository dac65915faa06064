/* The monomials V of the Gaussian's quadratic path (lib/sim/gauss_simd.c,
 * private: compiled in): the AVX2 + FMA rows (lse_gauss_v_rows_fma, with
 * its d <= 4 copies and the vectorized vech(y y') of full and tied
 * covariances for 4 < d <= 16) against the definition, bit for bit, for
 * every covariance type and d = 1 .. 20, on padded rows; nothing written
 * past a row's nv entries. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"
#include "kernels-private.h"
#include "sim/gauss-private.h"

static size_t n_mono(lse_cov_type cov, size_t d)
{
    if (cov == LSE_COV_DIAG)
        return 1 + 2 * d;
    if (cov == LSE_COV_SPHERICAL)
        return 2 + d;
    return 1 + d + d * (d + 1) / 2;
}

/* [1, y', (the second-order part)'] of y = x - c, as the layout of
 * gauss-private.h: diag y_j^2; spherical |y|^2 (the four-sum order of
 * lse_gauss_sq_norm); full/tied vech(y y') row by row, y_a y_b, b >= a */
static void reference(lse_cov_type cov, const double *x, const double *c,
                      size_t d, double *v)
{
    double *y = v + 1, *p = y + d;
    v[0] = 1.0;
    for (size_t j = 0; j < d; j++)
        y[j] = x[j] - c[j];
    if (cov == LSE_COV_DIAG) {
        for (size_t j = 0; j < d; j++)
            p[j] = y[j] * y[j];
    } else if (cov == LSE_COV_SPHERICAL) {
        p[0] = lse_gauss_sq_norm(y, d);
    } else {
        for (size_t a = 0; a < d; a++)
            for (size_t b = a; b < d; b++)
                *p++ = y[a] * y[b];
    }
}

START_TEST(test_v_rows_fma)
{
#if LSE_HAVE_AVX2_PATH
    if (!lse_cpu_avx2_fma()) {
        printf("# no AVX2 + FMA on this CPU: nothing to compare\n");
        return;
    }
    static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_TIED,
                                        LSE_COV_DIAG, LSE_COV_SPHERICAL};
    const double sentinel = 12345.678;
    for (size_t q = 0; q < 4; q++)
        for (size_t d = 1; d <= 20; d++) {
            const size_t nr = 7, xt = d + 3, nv = n_mono(covs[q], d);
            const size_t vt = nv + 5;
            double *x = malloc(nr * xt * sizeof *x), *c = malloc(d * sizeof *c);
            double *v = malloc(nr * vt * sizeof *v), *r = malloc(nv * sizeof *r);
            ck_assert(x != NULL && c != NULL && v != NULL && r != NULL);
            for (size_t i = 0; i < nr * xt; i++)
                x[i] = sin(0.37 * (double)i + (double)d) * 3.0 + 0.1;
            for (size_t j = 0; j < d; j++)
                c[j] = cos(0.11 * (double)j) / 3.0;
            for (size_t i = 0; i < nr * vt; i++)
                v[i] = sentinel;
            gsl_vector_view cv = gsl_vector_view_array(c, d);
            lse_gauss_work w;
            memset(&w, 0, sizeof w);
            w.cov = covs[q];
            w.dim = d;
            w.center = &cv.vector;
            w.avx2 = 1;
            w.fma = 1; /* the AVX2 + FMA copies (2: AVX-512) */
            lse_gauss_v_rows_fma(&w, x, xt, nr, v, vt);
            for (size_t i = 0; i < nr; i++) {
                reference(covs[q], x + i * xt, c, d, r);
                for (size_t j = 0; j < nv; j++)
                    ck_assert_msg(memcmp(&v[i * vt + j], &r[j], sizeof *r) == 0,
                                  "cov %zu d %zu row %zu entry %zu: %.17g vs "
                                  "%.17g", q, d, i, j, v[i * vt + j], r[j]);
                for (size_t j = nv; j < vt; j++)
                    ck_assert_msg(v[i * vt + j] == sentinel,
                                  "cov %zu d %zu row %zu: padding %zu written",
                                  q, d, i, j);
            }
            free(x);
            free(c);
            free(v);
            free(r);
        }
#endif
}
END_TEST

/* The tiles of V Q and V' R (lse_gauss_qeval6_avx2, lse_gauss_qstats4_avx2)
 * for K = 1 .. 12 components (half tiles when at most 4 are left): every
 * entry the chain of fused multiply-adds over the monomials (p) and rows
 * in order, bit for bit; no score written past column K; the statistics'
 * padding left alone by a half tile; the statistics the same from R itself
 * (rows of K entries, no padding: the last tile's loads stop at K). */
/* a double in [0, 1) with all 53 bits random (splitmix64) */
static double rnd53(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

START_TEST(test_q_tiles)
{
#if LSE_HAVE_AVX2_PATH
    if (!lse_cpu_avx2_fma())
        return;
    const size_t nv = 15, vt = 17, st = 21;
    double v[6 * 17], q[15 * 16], s[6 * 21], r[4 * 16], acc[15 * 16],
        want[15 * 16];
    uint64_t u = 12345;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        v[i] = rnd53(&u) - 0.5;
    for (size_t K = 1; K <= 12; K++) {
        const size_t kp = K <= 8 ? 8 : 16;
        for (size_t i = 0; i < nv * kp; i++)
            q[i] = i % kp < K ? rnd53(&u)
                              : 0.0;
        for (size_t i = 0; i < 6 * st; i++)
            s[i] = -7.0; /* sentinels */
        lse_gauss_qeval6_avx2(v, vt, nv, q, kp, K, s, st);
        for (size_t i = 0; i < 6; i++)
            for (size_t k = 0; k < st; k++) {
                double e = -7.0;
                if (k < K) {
                    e = 0.0;
                    for (size_t p = 0; p < nv; p++)
                        e = fma(v[i * vt + p], q[p * kp + k], e);
                }
                ck_assert_msg(memcmp(&e, &s[i * st + k], sizeof e) == 0,
                              "qeval6 K = %zu, row %zu, column %zu", K, i, k);
            }
        for (size_t i = 0; i < 4 * kp; i++)
            r[i] = i % kp < K ? rnd53(&u)
                              : 0.0;
        for (size_t i = 0; i < nv * kp; i++)
            acc[i] = want[i] = i % kp < K ? rnd53(&u) : 0.0;
        lse_gauss_qstats4_avx2(v, vt, nv, r, kp, acc, kp, K);
        { /* R itself (rows of K entries, tda K): the same */
            double rc[4 * 12], acc2[15 * 16];
            for (size_t i = 0; i < 4; i++)
                for (size_t k = 0; k < K; k++)
                    rc[i * K + k] = r[i * kp + k];
            memcpy(acc2, want, nv * kp * sizeof *acc2);
            lse_gauss_qstats4_avx2(v, vt, nv, rc, K, acc2, kp, K);
            ck_assert_msg(memcmp(acc2, acc, nv * kp * sizeof *acc2) == 0,
                          "qstats4 K = %zu, compact R", K);
        }
        for (size_t p = 0; p < nv; p++)
            for (size_t k = 0; k < kp; k++) {
                double e = want[p * kp + k];
                for (size_t i = 0; i < 4; i++)
                    e = fma(v[i * vt + p], r[i * kp + k], e);
                ck_assert_msg(memcmp(&e, &acc[p * kp + k], sizeof e) == 0,
                              "qstats4 K = %zu, p %zu, column %zu", K, p, k);
            }
    }
#endif
}
END_TEST

/* lse_gauss_qstats_rows_avx2 (the sums of a tile in registers over all
 * the rows) against lse_gauss_qstats4_avx2 called for every 4 rows, bit
 * for bit, entries past K included: nv = 1 .. 15 (tiles of 6, 2 and 1
 * monomials, or 12 and 1 for a last half tile), K = 1 .. 12, 4 to 20 rows,
 * R padded (tda kp) and R itself (tda K). */
START_TEST(test_q_rows)
{
#if LSE_HAVE_AVX2_PATH
    if (!lse_cpu_avx2_fma())
        return;
    enum { NR = 20, VT = 17 };
    double v[NR * VT], r[NR * 16], rc[NR * 12], acc[15 * 16], want[15 * 16];
    uint64_t u = 4242;
    for (size_t i = 0; i < NR * VT; i++)
        v[i] = rnd53(&u) - 0.5;
    for (size_t nv = 1; nv <= 15; nv++)
        for (size_t K = 1; K <= 12; K++)
            for (size_t nr = 4; nr <= NR; nr += 8) {
                const size_t kp = K <= 8 ? 8 : 16;
                for (size_t i = 0; i < nr * kp; i++)
                    r[i] = i % kp < K ? rnd53(&u) : 0.0;
                for (size_t i = 0; i < nr; i++)
                    for (size_t k = 0; k < K; k++)
                        rc[i * K + k] = r[i * kp + k];
                for (size_t i = 0; i < nv * kp; i++)
                    want[i] = i % kp < K ? rnd53(&u) : 0.0;
                for (int compact = 0; compact < 2; compact++) {
                    const double *rr = compact ? rc : r;
                    const size_t rt = compact ? K : kp;
                    memcpy(acc, want, nv * kp * sizeof *acc);
                    lse_gauss_qstats_rows_avx2(v, VT, nv, rr, rt, nr, acc,
                                               kp, K);
                    double ref[15 * 16];
                    memcpy(ref, want, nv * kp * sizeof *ref);
                    for (size_t i = 0; i < nr; i += 4)
                        lse_gauss_qstats4_avx2(v + i * VT, VT, nv, rr + i * rt,
                                               rt, ref, kp, K);
                    ck_assert_msg(memcmp(acc, ref, nv * kp * sizeof *acc) == 0,
                                  "qstats_rows nv %zu K %zu rows %zu%s", nv, K,
                                  nr, compact ? " compact R" : "");
                }
            }
#endif
}
END_TEST

/* lse_gauss_tri_eval for d <= 4 on AVX2 (one vector of 4 columns)
 * against the 8-lane kernel's arithmetic written out: each column the
 * chain of fused multiply-adds over the rows m of U's strip (8 doubles a
 * row, zero past column d), z = acc - o, its square fused onto +0, and
 * the 8-lane tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) with
 * the padding lanes' +0; d = 1..4, K = 1..5, blocks of 1..11 rows. */
START_TEST(test_tri_small)
{
#if LSE_HAVE_AVX2_PATH
    if (!lse_cpu_avx2_fma())
        return;
    uint64_t u = 777;
    double utri[5 * 64], otri[5 * 8], y[11 * 5], sv[11 * 7];
    gsl_vector *cn = gsl_vector_alloc(5);
    for (size_t d = 1; d <= 4; d++)
        for (size_t K = 1; K <= 5; K++)
            for (size_t b = 1; b <= 11; b++) {
                lse_gauss_work w;
                memset(&w, 0, sizeof w);
                w.fma = 1;
                w.dim = d;
                w.dp = 8;
                w.n_comp = K;
                w.ustr = 64;
                w.utri = utri;
                w.otri = otri;
                w.cnst = cn;
                for (size_t k = 0; k < K; k++) {
                    for (size_t m = 0; m < 8; m++)
                        for (size_t j = 0; j < 8; j++)
                            utri[k * 64 + 8 * m + j] =
                                m < d && j < d && j >= m ? rnd53(&u) - 0.5
                                                         : 0.0;
                    for (size_t j = 0; j < 8; j++)
                        otri[k * 8 + j] = j < d ? 4.0 * rnd53(&u) - 2.0 : 0.0;
                    gsl_vector_set(cn, k, -3.0 * rnd53(&u));
                }
                for (size_t i = 0; i < b * 5; i++)
                    y[i] = 6.0 * rnd53(&u) - 3.0;
                for (size_t i = 0; i < 11 * 7; i++)
                    sv[i] = -7.0;
                gsl_matrix_view sm = gsl_matrix_view_array(sv, b, 7);
                lse_gauss_tri_eval(&w, y, 5, b, &sm.matrix);
                for (size_t i = 0; i < b; i++)
                    for (size_t k = 0; k < 7; k++) {
                        double e = -7.0;
                        if (k < K) {
                            double l[8];
                            for (size_t j = 0; j < 8; j++) {
                                double acc = 0.0;
                                for (size_t m = 0; m < d; m++)
                                    acc = fma(y[i * 5 + m],
                                              utri[k * 64 + 8 * m + j], acc);
                                const double z = acc - otri[k * 8 + j];
                                l[j] = fma(z, z, 0.0);
                            }
                            const double q = ((l[0] + l[4]) + (l[2] + l[6])) +
                                             ((l[1] + l[5]) + (l[3] + l[7]));
                            e = gsl_vector_get(cn, k) - 0.5 * q;
                        }
                        ck_assert_msg(memcmp(&e, &sv[i * 7 + k], sizeof e) == 0,
                                      "d %zu K %zu b %zu row %zu comp %zu", d,
                                      K, b, i, k);
                    }
            }
    gsl_vector_free(cn);
#endif
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gauss_vrows");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_v_rows_fma);
    tcase_add_test(tc, test_q_tiles);
    tcase_add_test(tc, test_q_rows);
    tcase_add_test(tc, test_tri_small);
    suite_add_tcase(s, tc);
    return s;
}
