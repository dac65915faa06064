#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_xsum: exact, order-independent sums of doubles (lib/exactsum.c). */

__extension__ typedef __int128 i128;

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static double xsum_of(const double *v, size_t n)
{
    lse_xsum x;
    lse_xsum_init(&x);
    for (size_t i = 0; i < n; i++)
        lse_xsum_add(&x, v[i]);
    return lse_xsum_round(&x);
}

#define ck_assert_bits(a, b)                                                   \
    do {                                                                       \
        const double ck_a_ = (a), ck_b_ = (b);                                 \
        ck_assert_msg(same_bits(ck_a_, ck_b_), "%s = %.17g (%a), want %.17g (%a)", \
                      #a, ck_a_, ck_a_, ck_b_, ck_b_);                         \
    } while (0)

/* Random doubles m 2^-60 with |m| < 2^(40 + 60) split over random
 * exponents: the exact sum of up to 2^20 of them fits an int128 (the
 * reference; its conversion to double rounds to nearest even). */
static double random_term(gsl_rng *r, i128 *exact)
{
    const int e = (int)gsl_rng_uniform_int(r, 80) - 40; /* 2^e scale */
    const uint64_t m = gsl_rng_get(r) & ((UINT64_C(1) << 53) - 1);
    /* v = m 2^(e - 52), a multiple of 2^-92 >= ... keep >= 2^-60: */
    int sh = e - 52;
    if (sh < -60)
        sh = -60;
    double v = ldexp((double)m, sh);
    if (gsl_rng_uniform(r) < 0.5)
        v = -v;
    /* v / 2^-60 is an integer (m shifted left by sh + 60 >= 0) */
    const i128 iv = (i128)m << (sh + 60);
    *exact += v < 0 ? -iv : iv;
    return v;
}

static double round_i128(i128 v)
{
    /* (double) of an int128 rounds to nearest even (libgcc); the scaling
     * by 2^-60 is exact for these magnitudes */
    return ldexp((double)v, -60);
}

START_TEST(test_random_reference)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 17);
    enum { N = 5000 };
    double *v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int rep = 0; rep < 50; rep++) {
        i128 exact = 0;
        const size_t n = 1 + gsl_rng_uniform_int(r, N);
        for (size_t i = 0; i < n; i++)
            v[i] = random_term(r, &exact);
        if (rep % 5 == 0) { /* massive cancellation: append the negatives */
            const size_t h = n / 2;
            for (size_t i = 0; i < h; i++)
                v[n - h + i] = -v[i];
            exact = 0;
            for (size_t i = 0; i < n; i++) {
                const i128 iv = (i128)ldexp(fabs(v[i]), 60);
                exact += v[i] < 0 ? -iv : iv;
            }
        }
        ck_assert_bits(xsum_of(v, n), round_i128(exact));
    }
    free(v);
    gsl_rng_free(r);
}
END_TEST

/* Random orders and random splits into parts merged exactly, or exported,
 * summed element-wise in double precision in random order, imported:
 * always the same bits. Terms span the whole range of the doubles. */
START_TEST(test_order_split_invariance)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 5);
    enum { N = 3000, P = 7 };
    double *v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int rep = 0; rep < 20; rep++) {
        for (size_t i = 0; i < N; i++) {
            const int e = rep % 2 ? (int)gsl_rng_uniform_int(r, 2000) - 1000
                                  : (int)gsl_rng_uniform_int(r, 60) - 30;
            v[i] = ldexp(gsl_rng_uniform(r) - 0.5, e);
        }
        const double ref = xsum_of(v, N);
        ck_assert(isfinite(ref));
        /* shuffled */
        for (size_t i = N - 1; i > 0; i--) {
            const size_t j = gsl_rng_uniform_int(r, i + 1);
            const double t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
        ck_assert_bits(xsum_of(v, N), ref);
        /* split into P parts at random cuts, merged in reverse order */
        lse_xsum part[P], all;
        size_t cut[P + 1];
        cut[0] = 0;
        cut[P] = N;
        for (size_t p = 1; p < P; p++)
            cut[p] = gsl_rng_uniform_int(r, N + 1);
        for (size_t p = 1; p < P; p++) /* sort the cuts */
            for (size_t q = p + 1; q < P; q++)
                if (cut[q] < cut[p]) {
                    const size_t t = cut[p];
                    cut[p] = cut[q];
                    cut[q] = t;
                }
        for (size_t p = 0; p < P; p++) {
            lse_xsum_init(&part[p]);
            for (size_t i = cut[p]; i < cut[p + 1]; i++)
                lse_xsum_add(&part[p], v[i]);
        }
        lse_xsum_init(&all);
        for (size_t p = P; p-- > 0;)
            lse_xsum_merge(&all, &part[p]);
        ck_assert_bits(lse_xsum_round(&all), ref);
        /* exported, summed as doubles in a random order, imported */
        double ex[P][LSE_XSUM_EXPORT], sum[LSE_XSUM_EXPORT];
        for (size_t p = 0; p < P; p++) {
            lse_xsum_export(&part[p], ex[p]);
            for (size_t i = 0; i < LSE_XSUM_EXPORT; i++)
                ck_assert(ex[p][i] == floor(ex[p][i]) &&
                          fabs(ex[p][i]) < 4294967296.0);
        }
        for (size_t i = 0; i < LSE_XSUM_EXPORT; i++) {
            sum[i] = 0.0;
            const size_t s0 = gsl_rng_uniform_int(r, P);
            for (size_t p = 0; p < P; p++)
                sum[i] += ex[(s0 + p * 3) % P][i];
        }
        lse_xsum imp;
        lse_assert_ok(lse_xsum_import(&imp, sum));
        ck_assert_bits(lse_xsum_round(&imp), ref);
        /* an imported sum keeps accumulating exactly */
        lse_xsum_add(&imp, 1.0);
        lse_xsum_add(&imp, -1.0);
        ck_assert_bits(lse_xsum_round(&imp), ref);
    }
    free(v);
    gsl_rng_free(r);
}
END_TEST

START_TEST(test_known_sums)
{
    const double a[] = {1e16, 1.0, -1e16};
    ck_assert_bits(xsum_of(a, 3), 1.0);
    const double b[] = {1.0, 1e100, 1.0, -1e100};
    ck_assert_bits(xsum_of(b, 4), 2.0);
    const double c[] = {0.1, 0.2, -0.3};
    /* exact: 0.1 + 0.2 - 0.3 in binary = 2^-54 + ... : compare with the
     * known exact value 2.7755575615628914e-17 (= 2^-55) */
    ck_assert_bits(xsum_of(c, 3), ldexp(1.0, -55));
    /* empty and cancelling sums */
    ck_assert_bits(xsum_of(a, 0), 0.0);
    const double d[] = {3.5, -3.5, DBL_MAX, -DBL_MAX};
    ck_assert_bits(xsum_of(d, 4), 0.0);
    /* negative results */
    const double e[] = {-1e16, -1.0, 1e16, -0.5};
    ck_assert_bits(xsum_of(e, 4), -1.5);
    /* many equal terms (crosses the carry propagation of the digits) */
    lse_xsum x;
    lse_xsum_init(&x);
    for (long i = 0; i < 3000000; i++)
        lse_xsum_add(&x, 0.1);
    /* 3e6 * 0.1 exactly = 3e6 * 0x1.999999999999ap-4, rounded once */
    const double tenth = 0.1;
    const i128 m = (i128)ldexp(tenth, 56); /* 0.1 = m 2^-56 exactly */
    ck_assert_bits(lse_xsum_round(&x), ldexp((double)(m * 3000000), -56));
}
END_TEST

START_TEST(test_extremes)
{
    const double tiny = ldexp(1.0, -1074); /* smallest subnormal */
    const double t3[] = {tiny, tiny, tiny};
    ck_assert_bits(xsum_of(t3, 3), 3 * tiny);
    const double sub[] = {DBL_MIN, -tiny};
    ck_assert_bits(xsum_of(sub, 2), DBL_MIN - tiny); /* exact subnormal */
    const double sub2[] = {ldexp(1.0, -1060), -ldexp(1.0, -1060), tiny, -tiny,
                           -tiny};
    ck_assert_bits(xsum_of(sub2, 5), -tiny);
    /* headroom above DBL_MAX */
    const double big[] = {DBL_MAX, DBL_MAX, DBL_MAX, -DBL_MAX, -DBL_MAX};
    ck_assert_bits(xsum_of(big, 5), DBL_MAX);
    ck_assert_bits(xsum_of(big, 2), INFINITY);
    const double nbig[] = {-DBL_MAX, -DBL_MAX};
    ck_assert_bits(xsum_of(nbig, 2), -INFINITY);
    /* DBL_MAX + half an ulp rounds to inf (ties to even: DBL_MAX is odd),
     * just below half an ulp stays */
    const double half_ulp = ldexp(1.0, 970);
    const double h1[] = {DBL_MAX, half_ulp};
    ck_assert_bits(xsum_of(h1, 2), INFINITY);
    const double h2[] = {DBL_MAX, half_ulp, -tiny};
    ck_assert_bits(xsum_of(h2, 3), DBL_MAX);
    /* the whole range in one sum */
    const double w[] = {DBL_MAX, tiny, -DBL_MAX};
    ck_assert_bits(xsum_of(w, 3), tiny);
}
END_TEST

START_TEST(test_ties)
{
    const double u = ldexp(1.0, -53); /* half an ulp of 1 */
    const double t1[] = {1.0, u};
    ck_assert_bits(xsum_of(t1, 2), 1.0); /* tie: to even (1) */
    const double t2[] = {1.0 + 2 * u, u};
    ck_assert_bits(xsum_of(t2, 2), 1.0 + 4 * u); /* tie: to even (up) */
    const double t3[] = {1.0, u, ldexp(1.0, -1074)};
    ck_assert_bits(xsum_of(t3, 3), 1.0 + 2 * u); /* above the tie */
    const double t4[] = {1.0, u, -ldexp(1.0, -1074)};
    ck_assert_bits(xsum_of(t4, 3), 1.0); /* below the tie */
    const double t5[] = {-1.0, -u};
    ck_assert_bits(xsum_of(t5, 2), -1.0);
    const double t6[] = {-1.0 - 2 * u, -u};
    ck_assert_bits(xsum_of(t6, 2), -1.0 - 4 * u);
    /* a tie far below: 2^100 + 2^47 (half an ulp of 2^100) and a sticky
     * bit 2^-1000 more than 1000 binades lower */
    const double t7[] = {ldexp(1.0, 100), ldexp(1.0, 47)};
    ck_assert_bits(xsum_of(t7, 2), ldexp(1.0, 100));
    const double t8[] = {ldexp(1.0, 100), ldexp(1.0, 47), ldexp(1.0, -1000)};
    ck_assert_bits(xsum_of(t8, 3), nextafter(ldexp(1.0, 100), INFINITY));
}
END_TEST

START_TEST(test_special)
{
    const double a[] = {1.0, INFINITY, 2.0};
    ck_assert_bits(xsum_of(a, 3), INFINITY);
    const double b[] = {-INFINITY, 2.0};
    ck_assert_bits(xsum_of(b, 2), -INFINITY);
    const double c[] = {INFINITY, -INFINITY};
    ck_assert(isnan(xsum_of(c, 2)));
    const double d[] = {1.0, NAN};
    ck_assert(isnan(xsum_of(d, 2)));
    /* the counts survive export and import */
    lse_xsum x, y;
    lse_xsum_init(&x);
    lse_xsum_add(&x, -INFINITY);
    double ex[LSE_XSUM_EXPORT];
    lse_xsum_export(&x, ex);
    lse_assert_ok(lse_xsum_import(&y, ex));
    ck_assert_bits(lse_xsum_round(&y), -INFINITY);
    /* import rejects what is not a sum of exports */
    for (size_t i = 0; i < LSE_XSUM_EXPORT; i++)
        ex[i] = 0.0;
    ex[3] = 0.5;
    lse_assert_status(lse_xsum_import(&y, ex), LSE_EDOM);
    ex[3] = ldexp(1.0, 53);
    lse_assert_status(lse_xsum_import(&y, ex), LSE_EDOM);
    ex[3] = NAN;
    lse_assert_status(lse_xsum_import(&y, ex), LSE_EDOM);
    ex[3] = 0.0;
    ex[LSE_XSUM_DIGITS] = -1.0; /* a negative count */
    lse_assert_status(lse_xsum_import(&y, ex), LSE_EDOM);
    /* all-zero bits are the empty sum */
    lse_xsum z;
    memset(&z, 0, sizeof z);
    ck_assert_bits(lse_xsum_round(&z), 0.0);
    lse_xsum_add(&z, -2.5);
    ck_assert_bits(lse_xsum_round(&z), -2.5);
}
END_TEST

/* lse_xsum_add_array (two-digit additions, room reserved per chunk of
 * 256) holds the same number as one lse_xsum_add per term: the exported
 * digits and counts agree, at the chunk boundaries, with non-finite terms
 * and after many chunks (carries in between). */
START_TEST(test_add_array)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 16);
    static const size_t lens[] = {0, 1, 255, 256, 257, 600, 3000};
    double *v = malloc(3000 * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        const size_t n = lens[t];
        lse_xsum a, b;
        lse_xsum_init(&a);
        lse_xsum_init(&b);
        lse_xsum_add(&a, 0.75);
        lse_xsum_add(&b, 0.75);
        for (int rep = 0; rep < 6; rep++) {
            i128 ex = 0;
            for (size_t i = 0; i < n; i++) {
                v[i] = random_term(r, &ex);
                if (rep == 1 && i % 97 == 5) /* huge and tiny terms */
                    v[i] = i % 2 ? -DBL_MAX : 0x1p-1074;
                if (rep == 2 && i == n / 2)
                    v[i] = i % 2 ? INFINITY : NAN;
            }
            lse_xsum_add_array(&a, v, n);
            for (size_t i = 0; i < n; i++)
                lse_xsum_add(&b, v[i]);
            double ea[LSE_XSUM_EXPORT], eb[LSE_XSUM_EXPORT];
            lse_xsum c = a, d = b;
            lse_xsum_export(&c, ea);
            lse_xsum_export(&d, eb);
            ck_assert_msg(memcmp(ea, eb, sizeof ea) == 0, "n %zu rep %d", n,
                          rep);
            ck_assert_bits(lse_xsum_round(&a), lse_xsum_round(&b));
        }
    }
    /* a whole sum against the int128 reference */
    i128 ex = 0;
    for (size_t i = 0; i < 3000; i++)
        v[i] = random_term(r, &ex);
    lse_xsum x;
    lse_xsum_init(&x);
    lse_xsum_add_array(&x, v, 3000);
    ck_assert_bits(lse_xsum_round(&x), round_i128(ex));
    free(v);
    gsl_rng_free(r);
}
END_TEST

/* lse_xsum_sum (a 128-bit fast path when the exponents span <= 56 bits)
 * against lse_xsum's round, bit for bit: random terms of spans 0 to 70 at
 * magnitudes from subnormal to near overflow, ties (two terms, and a
 * sticky bit far below), cancellation to zero and to a subnormal, signed
 * zeros, non-finite terms, n from 0 to past the fast path's 65536. */
START_TEST(test_sum_fast)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 17);
    const size_t cap = 70000;
    double *v = malloc(cap * sizeof *v);
    ck_assert_ptr_nonnull(v);
    static const int bases[] = {-1074, -1040, -1000, -60, 0, 20, 900, 1000};
    for (size_t bi = 0; bi < sizeof bases / sizeof bases[0]; bi++)
        for (int span = 0; span <= 70; span += 5)
            for (int rep = 0; rep < 40; rep++) {
                const size_t n = rep < 30 ? (size_t)rep : 1 + gsl_rng_uniform_int(r, 400);
                for (size_t i = 0; i < n; i++) {
                    const int e = bases[bi] + (int)gsl_rng_uniform_int(r, (unsigned long)span + 1);
                    double t = ldexp(0.5 + 0.5 * gsl_rng_uniform(r), e > 1023 ? 1023 : e);
                    if (gsl_rng_uniform(r) < 0.5)
                        t = -t;
                    v[i] = t;
                }
                if (n >= 2 && rep % 4 == 1) /* cancellation */
                    v[1] = -v[0];
                if (n >= 3 && rep % 7 == 2)
                    v[2] = rep % 2 ? -0.0 : 0.0;
                ck_assert_bits(lse_xsum_sum(v, n), xsum_of(v, n));
            }
    /* ties and their sticky bits, zeros */
    const double u = ldexp(1.0, -53);
    const double ties[][3] = {{1.0, u, 0.0},
                              {1.0 + 2 * u, u, 0.0},
                              {1.0, u, ldexp(1.0, -40)},
                              {-1.0 - 2 * u, -u, 0.0},
                              {ldexp(1.0, 30), ldexp(1.0, -23), -ldexp(1.0, -24)},
                              {1.0, 0x1.0000000000001p-53, 0.0},
                              {-1.0, -0x1.0000000000001p-53, 0.0},
                              {-0.0, -0.0, -0.0},
                              {0x1p-1022, -0x1p-1022, 0x1p-1074},
                              {0x1.8p-1022, -0x1p-1022, 0.0},
                              {DBL_MAX, DBL_MAX, 0.0},
                              {DBL_MAX, ldexp(1.0, 970), 0.0},
                              {1.0, INFINITY, 0.0},
                              {1.0, NAN, 0.0},
                              {INFINITY, -INFINITY, 0.0}};
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        const double a = lse_xsum_sum(ties[i], 3), b = xsum_of(ties[i], 3);
        ck_assert_msg(same_bits(a, b) || (isnan(a) && isnan(b)),
                      "case %zu: %a, want %a", i, a, b);
    }
    /* many terms: at, above and past the fast path's count */
    static const size_t big[] = {65535, 65536, 65537, 70000};
    for (size_t t = 0; t < sizeof big / sizeof big[0]; t++) {
        for (size_t i = 0; i < big[t]; i++)
            v[i] = (gsl_rng_uniform(r) - 0.3) * ldexp(1.0, (int)gsl_rng_uniform_int(r, 40));
        ck_assert_bits(lse_xsum_sum(v, big[t]), xsum_of(v, big[t]));
    }
    /* the largest lane sums the fast path admits: 65536 terms of one sign
     * with the mantissa all ones at the top of the span (56 exponents
     * above the smallest term), every count mod 4 for the vector tail */
    for (int sign = -1; sign <= 1; sign += 2)
        for (size_t n = 65533; n <= 65536; n++) {
            for (size_t i = 0; i < n; i++)
                v[i] = sign * (i % 5 == 0 ? 0x1p-1000 : 0x1.fffffffffffffp-944);
            ck_assert_bits(lse_xsum_sum(v, n), xsum_of(v, n));
            v[n / 2] = -v[n / 2] * 0.75; /* one of the other sign */
            ck_assert_bits(lse_xsum_sum(v, n), xsum_of(v, n));
        }
    ck_assert_bits(lse_xsum_sum(v, 0), 0.0);
    free(v);
    gsl_rng_free(r);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("exactsum");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_random_reference);
    tcase_add_test(tc, test_order_split_invariance);
    tcase_add_test(tc, test_known_sums);
    tcase_add_test(tc, test_extremes);
    tcase_add_test(tc, test_ties);
    tcase_add_test(tc, test_special);
    tcase_add_test(tc, test_add_array);
    tcase_add_test(tc, test_sum_fast);
    suite_add_tcase(s, tc);
    return s;
}
