#include <math.h>

#include "lse_check.h"

START_TEST(test_softmax_is_gradient_of_lse)
{
    double x[] = {0.4127, -0.9031, 1.3318}, p[3], beta = 1.7, h = 1e-6;
    lse_assert_ok(lse_softmax(x, 3, 1, beta, p, NULL));
    for (size_t i = 0; i < 3; i++) {
        const double xi = x[i];
        x[i] = xi + h;
        const double up = lse_logsumexp(x, 3, 1, beta);
        x[i] = xi - h;
        const double down = lse_logsumexp(x, 3, 1, beta);
        x[i] = xi;
        ck_assert_double_eq_tol(p[i], (up - down) / (2 * h), 1e-8);
    }
}
END_TEST

START_TEST(test_extremes_finite_and_exact)
{
    /* +-1e4 would overflow exp without the shift */
    double x[] = {1e4, 1e4 - 1.0, -1e4};
    const double lse = lse_logsumexp(x, 3, 1, 1.0);
    ck_assert(isfinite(lse));
    ck_assert_double_eq_tol(lse, 1e4 + log1p(exp(-1.0)), 1e-9);
    double p[3], l2;
    lse_assert_ok(lse_softmax(x, 3, 1, 1.0, p, &l2));
    ck_assert_double_eq(lse, l2);
    ck_assert_double_eq_tol(p[0] + p[1] + p[2], 1.0, 1e-15);
    ck_assert_double_eq(p[2], 0.0);
    double y[] = {-1e4, -1e4};
    ck_assert_double_eq_tol(lse_logsumexp(y, 2, 1, 1.0), -1e4 + log(2.0), 1e-9);
    /* beta scales: (1/beta) log sum exp(beta x) -> max as beta grows */
    double z[] = {0.25, 0.5};
    ck_assert_double_eq_tol(lse_logsumexp(z, 2, 1, 1e6), 0.5, 1e-6);
}
END_TEST

START_TEST(test_fully_masked_row)
{
    double x[] = {-INFINITY, -INFINITY}, p[] = {7, 7}, l = 0;
    ck_assert(lse_logsumexp(x, 2, 1, 1.0) == -INFINITY);
    lse_assert_ok(lse_softmax(x, 2, 1, 1.0, p, &l));
    ck_assert(l == -INFINITY);
    ck_assert_double_eq(p[0], 0.0);
    ck_assert_double_eq(p[1], 0.0);
    ck_assert(lse_logsumexp(NULL, 0, 1, 1.0) == -INFINITY);
    lse_assert_ok(lse_softmax(NULL, 0, 1, 1.0, NULL, NULL));
    /* a masked entry among finite ones gets exactly 0 */
    double m[] = {0.3, -INFINITY, 0.3}, q[3];
    lse_assert_ok(lse_softmax(m, 3, 1, 2.0, q, NULL));
    ck_assert_double_eq(q[1], 0.0);
    ck_assert_double_eq_tol(q[0], 0.5, 1e-15);
}
END_TEST

START_TEST(test_stride_and_errors)
{
    double x[] = {0.1, 99, 0.7, 99, -0.2, 99}, p[6] = {0};
    double xs[] = {0.1, 0.7, -0.2};
    ck_assert_double_eq(lse_logsumexp(x, 3, 2, 1.3), lse_logsumexp(xs, 3, 1, 1.3));
    lse_assert_ok(lse_softmax(x, 3, 2, 1.3, p, NULL));
    ck_assert_double_eq(p[1], 0.0); /* untouched between strides */
    ck_assert_double_eq_tol(p[0] + p[2] + p[4], 1.0, 1e-15);
    lse_assert_status(lse_softmax(x, 3, 1, 0.0, p, NULL), LSE_EDOM);
    lse_assert_status(lse_softmax(x, 3, 1, -1.0, p, NULL), LSE_EDOM);
    lse_assert_status(lse_softmax(NULL, 3, 1, 1.0, p, NULL), LSE_EFAULT);
    double bad[] = {0.5, NAN};
    lse_assert_status(lse_softmax(bad, 2, 1, 1.0, p, NULL), LSE_ENONFINITE);
    double inf[] = {0.5, INFINITY};
    lse_assert_status(lse_softmax(inf, 2, 1, 1.0, p, NULL), LSE_ENONFINITE);
    ck_assert(isnan(lse_logsumexp(bad, 2, 1, 1.0)));
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("logsumexp");
    TCase *tc = tcase_create("logsumexp");
    tcase_add_test(tc, test_softmax_is_gradient_of_lse);
    tcase_add_test(tc, test_extremes_finite_and_exact);
    tcase_add_test(tc, test_fully_masked_row);
    tcase_add_test(tc, test_stride_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
