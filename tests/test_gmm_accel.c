#include <math.h>
#include <string.h>

#include "lse_check.h"

/* SQUAREM in lse_gmm_fit (opts.accel): the same optimum as plain EM in
 * fewer iterations on the bundled data, energies that never rise, and
 * the same for data with missing values. */

/* Columns [c0, c0 + nc) of a bundled CSV file. */
static gsl_matrix *read_csv(const char *path, size_t c0, size_t nc)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    size_t cols[8];
    for (size_t j = 0; j < nc; j++)
        cols[j] = c0 + j;
    lse_assert_ok(lse_table_read(path, NULL, &t, &err));
    lse_assert_ok(lse_table_to_matrix(t, cols, nc, LSE_MISSING_ERROR, &x, NULL,
                                      &err));
    lse_table_free(t);
    return x;
}

typedef struct trace {
    double last;
    size_t n, rises;
} trace;

static void on_iter(size_t run, size_t iter, double energy, double delta,
                    void *user)
{
    (void)run;
    (void)delta;
    trace *t = user;
    if (iter > 1 && energy > t->last + 1e-10 * fabs(t->last))
        t->rises++;
    t->last = energy;
    t->n++;
}

/* loglik and iterations of one fit */
static double fit(const gsl_matrix *x, size_t k, lse_cov_type cov,
                  lse_gmm_accel accel, lse_gmm_missing missing, size_t *n_iter,
                  trace *tr)
{
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(k, x->size2, cov, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.accel = accel;
    o.missing = missing;
    o.seed = 3;
    o.progress = on_iter;
    o.progress_user = tr;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    const lse_gmm_fit_info *info = lse_gmm_info(m);
    ck_assert_uint_eq(info->n_increase, 0);
    ck_assert(info->converged);
    *n_iter = info->n_iter;
    const double ll = info->loglik;
    lse_gmm_free(m);
    return ll;
}

/* Faithful and Iris, K = 1..6, full covariances: the same optimum to
 * 1e-6 relative, the reported energies never rise (but on Iris K = 6, by
 * less than reg_covar's bound), and far fewer
 * iterations where plain EM is slow (Faithful K = 3..6 need 146..485). */
START_TEST(test_same_optimum_fewer_iterations)
{
    gsl_matrix *sets[2] = {read_csv(LSE_DATA_DIR "/faithful.csv", 0, 2),
                           read_csv(LSE_DATA_DIR "/iris.csv", 0, 4)};
    size_t total[2] = {0, 0};
    for (size_t s = 0; s < 2; s++)
        for (size_t k = 1; k <= 6; k++) {
            size_t it[2];
            double ll[2];
            for (int a = 0; a < 2; a++) {
                trace tr = {0};
                ll[a] = fit(sets[s], k, LSE_COV_FULL,
                            a ? LSE_GMM_ACCEL_SQUAREM : LSE_GMM_ACCEL_NONE,
                            LSE_GMM_MISSING_ERROR, &it[a], &tr);
                /* with reg_covar > 0 EM itself may rise, within the
                 * bound fit() checks (n_increase); Iris K = 6 does under
                 * SQUAREM (test_gmm_monotone: the bound, and no rise at
                 * all with reg_covar = 0) */
                if (!(s == 1 && k == 6))
                    ck_assert_uint_eq(tr.rises, 0);
                ck_assert_uint_eq(tr.n, it[a]);
                total[a] += it[a];
            }
            ck_assert_msg(fabs(ll[1] - ll[0]) <= 1e-6 * fabs(ll[0]),
                          "set %zu, K = %zu: %.17g vs %.17g", s, k, ll[1],
                          ll[0]);
            if (s == 0 && k >= 3)
                ck_assert_uint_lt(2 * it[1], it[0]);
        }
    ck_assert_uint_lt(2 * total[1], total[0]);
    gsl_matrix_free(sets[0]);
    gsl_matrix_free(sets[1]);
}
END_TEST

/* With missing values (the pattern graph and its group M-step) and the
 * other covariance types: monotone, the same optimum. */
START_TEST(test_missing_and_types)
{
    gsl_matrix *x = read_csv(LSE_DATA_DIR "/iris.csv", 0, 4);
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < 4; j++)
            if ((7 * i + 5 * j) % 13 == 0)
                gsl_matrix_set(x, i, j, NAN);
    const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                  LSE_COV_SPHERICAL, LSE_COV_TIED};
    for (size_t c = 0; c < 4; c++) {
        size_t it[2];
        double ll[2];
        for (int a = 0; a < 2; a++) {
            trace tr = {0};
            ll[a] = fit(x, 3, covs[c],
                        a ? LSE_GMM_ACCEL_SQUAREM : LSE_GMM_ACCEL_NONE,
                        LSE_GMM_MISSING_MARGINALIZE, &it[a], &tr);
            ck_assert_uint_eq(tr.rises, 0);
        }
        ck_assert_msg(fabs(ll[1] - ll[0]) <= 1e-6 * fabs(ll[0]),
                      "cov %zu: %.17g vs %.17g", c, ll[1], ll[0]);
        ck_assert_uint_le(it[1], it[0] + 2);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_bad_accel)
{
    gsl_matrix *x = read_csv(LSE_DATA_DIR "/faithful.csv", 0, 2);
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    ck_assert_int_eq(o.accel, LSE_GMM_ACCEL_SQUAREM);
    o.accel = (lse_gmm_accel)7;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "acceleration"));
    /* max_iter smaller than a cycle: plain iterations up to max_iter */
    o.accel = LSE_GMM_ACCEL_SQUAREM;
    o.max_iter = 1;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    ck_assert_uint_eq(lse_gmm_info(m)->n_iter, 1);
    o.max_iter = 5;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    ck_assert_uint_le(lse_gmm_info(m)->n_iter, 5);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_accel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_same_optimum_fewer_iterations);
    tcase_add_test(tc, test_missing_and_types);
    tcase_add_test(tc, test_bad_accel);
    suite_add_tcase(s, tc);
    return s;
}
