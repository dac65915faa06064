#include <math.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_cov_* (lib/cov.c): names, shapes, conversions, checks. */

static const lse_cov_type all_cov[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                       LSE_COV_SPHERICAL, LSE_COV_TIED};

START_TEST(test_names_shapes)
{
    const char *names[] = {"full", "diag", "spherical", "tied"};
    for (size_t c = 0; c < 4; c++) {
        lse_cov_type t;
        ck_assert_str_eq(lse_cov_name(all_cov[c]), names[c]);
        lse_assert_ok(lse_cov_parse(names[c], &t));
        ck_assert_int_eq(t, all_cov[c]);
        ck_assert_str_eq(lse_gmm_cov_name(all_cov[c]), names[c]);
    }
    lse_cov_type t;
    lse_assert_status(lse_cov_parse("round", &t), LSE_EINVAL);
    lse_assert_status(lse_cov_parse(NULL, &t), LSE_EFAULT);
    ck_assert_ptr_null(lse_cov_name((lse_cov_type)9));
    /* K = 3, d = 4 */
    const size_t cr[] = {3, 3, 3, 1}, cc[] = {16, 4, 1, 16};
    const size_t nr[] = {12, 3, 3, 4}, nc[] = {4, 4, 1, 4};
    for (size_t c = 0; c < 4; c++) {
        ck_assert_uint_eq(lse_cov_chol_rows(all_cov[c], 3), cr[c]);
        ck_assert_uint_eq(lse_cov_chol_cols(all_cov[c], 4), cc[c]);
        ck_assert_uint_eq(lse_cov_rows(all_cov[c], 3, 4), nr[c]);
        ck_assert_uint_eq(lse_cov_cols(all_cov[c], 4), nc[c]);
    }
    ck_assert_uint_eq(lse_cov_chol_cols((lse_cov_type)9, 4), 0);
}
END_TEST

/* Random factors with a positive diagonal -> covariances -> factors: the
 * same factors to rounding (the Cholesky factor with positive diagonal is
 * unique), and covariances that are exactly symmetric. */
START_TEST(test_round_trip)
{
    const size_t K = 3, d = 4;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t c = 0; c < 4; c++) {
        const lse_cov_type t = all_cov[c];
        gsl_matrix *l =
            gsl_matrix_calloc(lse_cov_chol_rows(t, K), lse_cov_chol_cols(t, d));
        for (size_t b = 0; b < l->size1; b++)
            for (size_t j = 0; j < l->size2; j++) {
                const int full = t == LSE_COV_FULL || t == LSE_COV_TIED;
                const size_t row = j / d, col = j % d;
                if (!full)
                    gsl_matrix_set(l, b, j, 0.5 + gsl_rng_uniform(r));
                else if (col < row)
                    gsl_matrix_set(l, b, j, gsl_rng_uniform(r) - 0.5);
                else if (col == row)
                    gsl_matrix_set(l, b, j, 0.5 + gsl_rng_uniform(r));
            }
        gsl_matrix *s =
            gsl_matrix_alloc(lse_cov_rows(t, K, d), lse_cov_cols(t, d));
        lse_assert_ok(lse_cov_from_chol(t, d, l, s));
        if (t == LSE_COV_FULL || t == LSE_COV_TIED)
            for (size_t i = 0; i < s->size1; i++)
                for (size_t j = 0; j < d; j++)
                    ck_assert(gsl_matrix_get(s, i, j) ==
                              gsl_matrix_get(s, (i / d) * d + j, i % d));
        gsl_matrix *l2 = gsl_matrix_alloc(l->size1, l->size2);
        lse_error err;
        lse_assert_ok(lse_cov_to_chol(t, d, s, l2, &err));
        lse_assert_ok(lse_cov_to_chol(t, d, s, NULL, &err)); /* check only */
        for (size_t i = 0; i < l->size1 * l->size2; i++)
            ck_assert_double_eq_tol(l2->data[i], l->data[i], 1e-13);
        /* scaled identity: Sigma = s^2 I */
        lse_cov_chol_scaled_identity(t, d, 2.0, l2);
        lse_assert_ok(lse_cov_from_chol(t, d, l2, s));
        for (size_t i = 0; i < s->size1; i++)
            for (size_t j = 0; j < s->size2; j++) {
                const int diag =
                    s->size2 == 1 || t == LSE_COV_DIAG || j == i % d;
                ck_assert_double_eq(gsl_matrix_get(s, i, j), diag ? 4.0 : 0.0);
            }
        /* shapes */
        gsl_matrix *bad = gsl_matrix_alloc(l->size1, l->size2 + 1);
        lse_assert_status(lse_cov_from_chol(t, d, bad, s), LSE_EDIM);
        lse_assert_status(lse_cov_to_chol(t, d, s, bad, &err), LSE_EDIM);
        gsl_matrix_free(bad);
        gsl_matrix_free(l);
        gsl_matrix_free(l2);
        gsl_matrix_free(s);
    }
    gsl_rng_free(r);
}
END_TEST

START_TEST(test_checks)
{
    lse_error err;
    gsl_matrix *s = gsl_matrix_alloc(4, 2); /* full, K = 2, d = 2 */
    const double v[4][2] = {{1.0, 0.2}, {0.2, 1.0}, {1.0, 2.0}, {2.0, 1.0}};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(s, i, j, v[i][j]);
    lse_assert_status(lse_cov_to_chol(LSE_COV_FULL, 2, s, NULL, &err),
                      LSE_ENUMERIC);
    ck_assert_str_eq(err.message, "lse_cov_to_chol: covariance of component "
                                  "1 is not positive definite");
    gsl_matrix_set(s, 2, 1, 0.5);
    lse_assert_status(lse_cov_to_chol(LSE_COV_FULL, 2, s, NULL, &err),
                      LSE_EINVAL);
    ck_assert(strstr(err.message, "not symmetric") != NULL);
    gsl_matrix_set(s, 3, 0, NAN);
    lse_assert_status(lse_cov_to_chol(LSE_COV_FULL, 2, s, NULL, &err),
                      LSE_ENONFINITE);
    lse_assert_status(lse_cov_to_chol(LSE_COV_TIED, 2, s, NULL, &err),
                      LSE_EDIM);
    lse_assert_status(lse_cov_to_chol((lse_cov_type)9, 2, s, NULL, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_cov_to_chol(LSE_COV_FULL, 2, NULL, NULL, &err),
                      LSE_EFAULT);
    gsl_matrix_set_all(s, 1.0);
    gsl_matrix_set(s, 3, 1, 0.0);
    lse_assert_status(lse_cov_to_chol(LSE_COV_DIAG, 2, s, NULL, &err),
                      LSE_ENUMERIC);
    ck_assert(strstr(err.message, "variance 1 of component 3") != NULL);
    gsl_matrix_free(s);
}
END_TEST

/* a d x d workspace that size_t cannot count: LSE_ENOMEM with a message,
 * before any read of the (described, unallocated) covariances */
START_TEST(test_to_chol_size_overflow)
{
    double one = 1.0;
    const size_t d = (size_t)1 << 31; /* d * d * 8 = 2^65 */
    const gsl_matrix covs = {.size1 = 1, .size2 = d, .tda = d, .data = &one,
                             .block = NULL, .owner = 0};
    lse_error err;
    lse_assert_status(lse_cov_to_chol(LSE_COV_DIAG, d, &covs, NULL, &err),
                      LSE_ENOMEM);
    ck_assert_msg(strstr(err.message, "lse_cov_to_chol") != NULL &&
                      strstr(err.message, "dimension 2147483648") != NULL,
                  "%s", err.message);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("cov");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_names_shapes);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_checks);
    tcase_add_test(tc, test_to_chol_size_overflow);
    suite_add_tcase(s, tc);
    return s;
}
