/* Monotonicity of lse_gmm_fit's EM and SQUAREM (models/gmm_fit.c).
 *
 * With reg_covar eps > 0 the M-step maximizes Q - eps/2 sum_k N_k
 * tr(Sigma_k^-1), so EM itself may lower the log-likelihood, by at most
 * eps/2 sum_k N_k (tr Sigma_old,k^-1 - tr Sigma_new,k^-1) (N_k = N w_new,k).
 * test_bound checks that bound step by step against its defining property
 * with an independent computation (inverses by GSL), and that it is needed
 * (EM drops) and tight. With eps = 0 EM is monotone, and SQUAREM must be
 * too: test_squarem_monotone traces the energies of many random starts,
 * short and long, and fails on any rise; with the default eps, the fits'
 * own count of rises beyond the bound (n_increase) and the logged
 * warnings must be 0. */
#include <math.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

static gsl_matrix *read_csv(const char *path, size_t nc)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    size_t cols[4] = {0, 1, 2, 3};
    lse_assert_ok(lse_table_read(path, NULL, &t, &err));
    lse_assert_ok(lse_table_to_matrix(t, cols, nc, LSE_MISSING_ERROR, &x, NULL,
                                      &err));
    lse_table_free(t);
    return x;
}

static double loglik(const lse_gmm *m, const gsl_matrix *x)
{
    gsl_vector *l = gsl_vector_alloc(x->size1);
    lse_error err;
    lse_assert_ok(lse_gmm_score_samples(m, x, l, &err));
    double s = 0.0;
    for (size_t i = 0; i < l->size; i++)
        s += gsl_vector_get(l, i);
    gsl_vector_free(l);
    return s;
}

/* tr(Sigma_k^-1) of component k, by GSL's LU inverse */
static double trace_inv(const lse_gmm *m, size_t k)
{
    const size_t d = lse_gmm_dim(m);
    gsl_matrix *s = gsl_matrix_alloc(d, d), *inv = gsl_matrix_alloc(d, d);
    gsl_permutation *p = gsl_permutation_alloc(d);
    int sg;
    ck_assert_int_eq(lse_gmm_get_covariance(m, k, s), LSE_OK);
    gsl_linalg_LU_decomp(s, p, &sg);
    gsl_linalg_LU_invert(s, p, inv);
    double t = 0.0;
    for (size_t j = 0; j < d; j++)
        t += gsl_matrix_get(inv, j, j);
    gsl_matrix_free(s);
    gsl_matrix_free(inv);
    gsl_permutation_free(p);
    return t;
}

static lse_gmm *copy(const lse_gmm *m)
{
    lse_gmm *c = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(lse_gmm_k(m), lse_gmm_dim(m),
                              lse_gmm_cov_type(m), &c, NULL));
    lse_assert_ok(lse_gmm_set_weights(c, lse_gmm_weights(m), &err));
    lse_assert_ok(lse_gmm_set_means(c, lse_gmm_means(m), &err));
    lse_assert_ok(lse_gmm_set_covariances(c, lse_gmm_covariances(m), &err));
    return c;
}

/* Plain EM one iteration at a time (init GIVEN, max_iter 1) from random
 * starts on Iris: L(new) >= L(old) - bound, every step; some steps drop
 * (the bound is needed) and some come within half of it (it is tight). */
START_TEST(test_bound)
{
    gsl_matrix *x = read_csv(LSE_DATA_DIR "/iris.csv", 4);
    const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                  LSE_COV_SPHERICAL, LSE_COV_TIED};
    size_t drops = 0, tight = 0, steps = 0;
    for (size_t c = 0; c < 4; c++)
        for (size_t k = 3; k <= 6; k++)
            for (unsigned long seed = 0; seed < 6; seed++) {
                lse_gmm *m = NULL;
                lse_error err;
                lse_assert_ok(lse_gmm_new(k, 4, covs[c], &m, NULL));
                lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
                o.init = LSE_GMM_INIT_RANDOM;
                o.seed = seed;
                o.max_iter = 3;
                lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
                o.init = LSE_GMM_INIT_GIVEN;
                o.max_iter = 1;
                for (size_t it = 0; it < 60; it++) {
                    lse_gmm *old = copy(m);
                    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
                    if (lse_gmm_n_events(m) > 0) { /* re-seeded: no bound */
                        lse_gmm_free(old);
                        break;
                    }
                    const double l0 = loglik(old, x), l1 = loglik(m, x);
                    double b = 0.0;
                    for (size_t j = 0; j < k; j++)
                        b += 150.0 * gsl_vector_get(lse_gmm_weights(m), j) *
                             (trace_inv(old, j) - trace_inv(m, j));
                    b *= 0.5 * o.reg_covar;
                    ck_assert_msg(l0 - l1 <= b + 1e-9 * fabs(l0),
                                  "cov %zu K %zu seed %lu it %zu: drop %g, "
                                  "bound %g", c, k, seed, it, l0 - l1, b);
                    drops += l1 < l0 - 1e-12 * fabs(l0);
                    tight += l1 < l0 && l0 - l1 > 0.5 * b;
                    steps++;
                    lse_gmm_free(old);
                }
                lse_gmm_free(m);
            }
    ck_assert_uint_gt(steps, 1000);
    ck_assert_uint_gt(drops, 0);
    ck_assert_uint_gt(tight, 0);
    gsl_matrix_free(x);
}
END_TEST

typedef struct trace {
    double last;
    size_t rises, n;
} trace;

static void on_iter(size_t run, size_t iter, double energy, double delta,
                    void *user)
{
    (void)run;
    (void)delta;
    trace *t = user;
    if (iter > 1 && energy > t->last + 1e-12 * fabs(t->last))
        t->rises++;
    t->last = energy;
    t->n++;
}

static void count_rises(lse_log_level level, const char *msg, void *user)
{
    if (level == LSE_LOG_WARN && strstr(msg, "rose") != NULL)
        (*(size_t *)user)++;
}

/* a mixture of 4 Gaussians in 3-d, continuous values (no ties) */
static gsl_matrix *synthetic(size_t n)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 11);
    gsl_matrix *x = gsl_matrix_alloc(n, 3);
    for (size_t i = 0; i < n; i++) {
        const size_t c = i % 4;
        for (size_t j = 0; j < 3; j++)
            gsl_matrix_set(x, i, j,
                           3.0 * (double)((c >> (j % 2)) & 1) +
                               gsl_ran_gaussian(r, 0.5 + 0.3 * (double)j +
                                                       0.2 * (double)c));
    }
    gsl_rng_free(r);
    return x;
}

/* SQUAREM from random and k-means++ starts, runs of 4 to 1000
 * iterations, every covariance type: with reg_covar = 0 (synthetic data,
 * where no component collapses) the traced energy never rises; with the
 * default reg_covar on Iris and Faithful, no rise beyond the bound
 * (n_increase, warnings). Accelerated steps were taken. */
START_TEST(test_squarem_monotone)
{
    gsl_matrix *sets[3] = {synthetic(400),
                           read_csv(LSE_DATA_DIR "/iris.csv", 4),
                           read_csv(LSE_DATA_DIR "/faithful.csv", 2)};
    const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                  LSE_COV_SPHERICAL, LSE_COV_TIED};
    const size_t iters[4] = {4, 9, 40, 1000};
    size_t warned = 0, runs = 0, faster = 0;
    lse_set_log_handler(count_rises, &warned);
    for (size_t s = 0; s < 3; s++)
        for (size_t c = 0; c < 4; c++)
            for (size_t k = 2; k <= 6; k++)
                for (unsigned long seed = 0; seed < 8; seed++) {
                    lse_gmm *m = NULL;
                    lse_error err;
                    const gsl_matrix *x = sets[s];
                    lse_assert_ok(lse_gmm_new(k, x->size2, covs[c], &m, NULL));
                    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
                    o.accel = LSE_GMM_ACCEL_SQUAREM;
                    o.init = seed % 2 ? LSE_GMM_INIT_RANDOM
                                      : LSE_GMM_INIT_KMEANSPP;
                    o.seed = seed;
                    o.max_iter = iters[seed % 4];
                    o.reg_covar = s == 0 ? 0.0 : o.reg_covar;
                    trace tr = {0};
                    o.progress = on_iter;
                    o.progress_user = &tr;
                    if (lse_gmm_fit(m, x, &o, &err) != LSE_OK) {
                        /* reg_covar = 0: a singular covariance */
                        ck_assert_msg(s == 0, "%s", err.message);
                        lse_gmm_free(m);
                        continue;
                    }
                    const lse_gmm_fit_info *i = lse_gmm_info(m);
                    ck_assert_uint_eq(i->n_increase, 0);
                    if (s == 0 && lse_gmm_n_events(m) == 0)
                        ck_assert_msg(tr.rises == 0,
                                      "cov %zu K %zu seed %lu: %zu rises",
                                      c, k, seed, tr.rises);
                    runs++;
                    if (o.max_iter == 1000 && i->converged) {
                        lse_gmm *p = NULL;
                        lse_assert_ok(
                            lse_gmm_new(k, x->size2, covs[c], &p, NULL));
                        o.accel = LSE_GMM_ACCEL_NONE;
                        o.progress = NULL;
                        lse_assert_ok(lse_gmm_fit(p, x, &o, &err));
                        faster += i->n_iter < lse_gmm_info(p)->n_iter;
                        lse_gmm_free(p);
                    }
                    lse_gmm_free(m);
                }
    lse_set_log_handler(NULL, NULL);
    ck_assert_uint_eq(warned, 0);
    ck_assert_uint_gt(runs, 400);
    ck_assert_uint_gt(faster, 20);
    for (size_t s = 0; s < 3; s++)
        gsl_matrix_free(sets[s]);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_monotone");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bound);
    tcase_add_test(tc, test_squarem_monotone);
    suite_add_tcase(s, tc);
    return s;
}
