/* Ward / EII hierarchical agglomeration (lib/hc.c) against a brute-force
 * greedy merge computed from the clusters' members. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>

#include "lse_check.h"

/* Ward cost of joining clusters a and b (membership in lab) */
static double ward_cost(const gsl_matrix *x, const size_t *lab, size_t a,
                        size_t b)
{
    const size_t n = x->size1, d = x->size2;
    double ma[8] = {0}, mb[8] = {0}, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        if (lab[i] == a)
            na++;
        if (lab[i] == b)
            nb++;
        for (size_t j = 0; j < d; j++) {
            if (lab[i] == a)
                ma[j] += gsl_matrix_get(x, i, j);
            if (lab[i] == b)
                mb[j] += gsl_matrix_get(x, i, j);
        }
    }
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += pow(ma[j] / na - mb[j] / nb, 2);
    return na * nb / (na + nb) * s;
}

static double within_ss(const gsl_matrix *x, const size_t *lab, size_t k)
{
    const size_t n = x->size1, d = x->size2;
    double tot = 0.0;
    for (size_t c = 0; c < k; c++) {
        double m[8] = {0}, cnt = 0;
        for (size_t i = 0; i < n; i++)
            if (lab[i] == c) {
                cnt++;
                for (size_t j = 0; j < d; j++)
                    m[j] += gsl_matrix_get(x, i, j);
            }
        for (size_t i = 0; i < n; i++)
            if (lab[i] == c)
                for (size_t j = 0; j < d; j++)
                    tot += pow(gsl_matrix_get(x, i, j) - m[j] / cnt, 2);
    }
    return tot;
}

START_TEST(test_ward_brute_force)
{
    const size_t n = 25, d = 3;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7 + (unsigned long)_i);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, i, j,
                           gsl_ran_gaussian(rng, 1.0) + 3.0 * (double)(i % 3));
    size_t pairs[2 * 24];
    double cost[24];
    lse_error err;
    lse_assert_ok(lse_hc_ward(x, pairs, cost, &err));
    /* brute force: each merge is the cheapest pair of current clusters */
    size_t lab[25];
    for (size_t i = 0; i < n; i++)
        lab[i] = i;
    double sum = 0.0;
    for (size_t t = 0; t + 1 < n; t++) {
        double best = INFINITY;
        for (size_t a = 0; a < n; a++)
            for (size_t b = a + 1; b < n; b++) {
                int ha = 0, hb = 0;
                for (size_t i = 0; i < n; i++) {
                    ha |= lab[i] == a;
                    hb |= lab[i] == b;
                }
                if (ha && hb)
                    best = fmin(best, ward_cost(x, lab, a, b));
            }
        const size_t a = pairs[2 * t], b = pairs[2 * t + 1];
        ck_assert(a < b);
        ck_assert_double_eq_tol(cost[t], ward_cost(x, lab, a, b),
                                1e-9 * (1.0 + cost[t]));
        ck_assert_double_eq_tol(cost[t], best, 1e-9 * (1.0 + best));
        for (size_t i = 0; i < n; i++)
            if (lab[i] == b)
                lab[i] = a;
        sum += cost[t];
        /* Ward's identity: the costs so far add up to the within-cluster
         * sum of squares of the cut */
        const size_t k = n - 1 - t;
        size_t cut[25];
        lse_assert_ok(lse_hc_cut(n, pairs, k, cut));
        size_t mx = 0;
        for (size_t i = 0; i < n; i++)
            mx = cut[i] > mx ? cut[i] : mx;
        ck_assert_uint_eq(mx + 1, k);
        ck_assert_uint_eq(cut[0], 0);
        ck_assert_double_eq_tol(within_ss(x, cut, k), sum, 1e-9 * (1.0 + sum));
    }
    lse_assert_status(lse_hc_cut(n, pairs, 0, lab), LSE_EDIM);
    lse_assert_status(lse_hc_cut(n, pairs, n + 1, lab), LSE_EDIM);
    gsl_matrix_set(x, 3, 1, NAN);
    lse_assert_status(lse_hc_ward(x, pairs, cost, &err), LSE_ENONFINITE);
    lse_assert_status(lse_hc_ward(NULL, pairs, cost, &err), LSE_EFAULT);
    gsl_matrix_free(x);
    gsl_rng_free(rng);
}
END_TEST

/* n x n distances that size_t cannot count: LSE_ENOMEM with a message,
 * before any allocation or any read of x (a described, unallocated
 * matrix) */
START_TEST(test_ward_size_overflow)
{
    double one = 1.0;
    const gsl_matrix x = {.size1 = (size_t)1 << 31, .size2 = 1, .tda = 1,
                          .data = &one, .block = NULL, .owner = 0};
    size_t pairs[2];
    double cost[1];
    lse_error err;
    lse_assert_status(lse_hc_ward(&x, pairs, cost, &err), LSE_ENOMEM);
    ck_assert_msg(strstr(err.message, "lse_hc_ward") != NULL &&
                      strstr(err.message, "2147483648 rows") != NULL,
                  "%s", err.message);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("hc");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_ward_brute_force, 0, 4);
    tcase_add_test(tc, test_ward_size_overflow);
    suite_add_tcase(s, tc);
    return s;
}
