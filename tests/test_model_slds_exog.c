#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* SLDS with exogenous regressors (lse_slds_config.n_exog) and shared
 * parts (lse_slds_config.shared): configuration checks, the B_k
 * accessors, simulation with given regressors, fits that recover them,
 * the shared M-step (every part shared is one regression; a shared fit is
 * a maximum in every shared coefficient; EM monotone), model files. */

static lse_slds *make(size_t K, size_t p, unsigned shared, int markov,
                      lse_cov_type cov)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = K;
    cfg.n_exog = p;
    cfg.shared = shared;
    cfg.markov = markov;
    cfg.cov = cov;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, NULL));
    return m;
}

/* A two-mode model x_t = b_k + a_k x_{t-1} + beta_k u_t + e, and a series
 * of T rows drawn from it with u_t ~ N(0, 1) (columns x, u). */
static gsl_matrix *draw_series(lse_slds *m, size_t T, unsigned long seed,
                               const double *beta)
{
    const double a[2] = {0.6, -0.3}, b[2] = {0.5, -1.0}, s2[2] = {0.3, 1.0};
    gsl_matrix *A = gsl_matrix_alloc(1, 1), *B = gsl_matrix_alloc(1, 1),
               *C = gsl_matrix_alloc(1, 1);
    gsl_vector *bv = gsl_vector_alloc(1);
    const unsigned sh = lse_slds_shared(m);
    for (size_t k = 0; k < 2; k++) {
        gsl_matrix_set(A, 0, 0, sh & LSE_SLDS_SHARE_AR ? a[0] : a[k]);
        gsl_vector_set(bv, 0, sh & LSE_SLDS_SHARE_INTERCEPT ? b[0] : b[k]);
        gsl_matrix_set(B, 0, 0, sh & LSE_SLDS_SHARE_EXOG ? beta[0] : beta[k]);
        gsl_matrix_set(C, 0, 0, s2[k]);
        lse_assert_ok(lse_slds_set_a(m, k, A, NULL));
        lse_assert_ok(lse_slds_set_b(m, k, bv, NULL));
        lse_assert_ok(lse_slds_set_beta(m, k, B, NULL));
        if (lse_slds_cov_type(m) != LSE_COV_TIED || k == 0)
            lse_assert_ok(lse_slds_set_cov(m, k, C, NULL));
    }
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(T, 2);
    for (size_t t = 0; t < T; t++)
        gsl_matrix_set(x, t, 1, gsl_ran_gaussian(r, 1.0));
    lse_assert_ok(lse_slds_simulate(m, T, seed, x, NULL, NULL));
    gsl_rng_free(r);
    gsl_matrix_free(A);
    gsl_matrix_free(B);
    gsl_matrix_free(C);
    gsl_vector_free(bv);
    return x;
}

static lse_status dummy_reduce(double *buf, size_t n, void *user)
{
    (void)buf;
    (void)n;
    (void)user;
    return LSE_OK;
}

START_TEST(test_config)
{
    lse_slds_config cfg = lse_slds_config_default();
    ck_assert_uint_eq(cfg.n_exog, 0);
    ck_assert_uint_eq(cfg.shared, 0);
    lse_slds *m = NULL;
    lse_error err;
    cfg.shared = 8u;
    lse_assert_status(lse_slds_new(&cfg, &m, &err), LSE_EINVAL);
    cfg.shared = LSE_SLDS_SHARE_EXOG;
    lse_assert_status(lse_slds_new(&cfg, &m, &err), LSE_EINVAL);
    ck_assert_ptr_null(m);
    cfg.n_exog = 2;
    cfg.shared = LSE_SLDS_SHARE_EXOG | LSE_SLDS_SHARE_AR;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    ck_assert_uint_eq(lse_slds_n_exog(m), 2);
    ck_assert_uint_eq(lse_slds_shared(m),
                      LSE_SLDS_SHARE_EXOG | LSE_SLDS_SHARE_AR);
    /* K = 2, d = 1, L = 1, p = 2, full: A once (1), b per mode (2), B
     * once (2), variances 2, weight 1 */
    ck_assert_uint_eq(lse_slds_n_params(m), 1 + 2 + 2 + 2 + 1);
    ck_assert_uint_eq(lse_slds_n_stderr(m), 1 + 2 + 1 + 2 + 2);
    /* beta accessors: shapes, range, finiteness; A and B apart */
    gsl_matrix *B = gsl_matrix_alloc(1, 2), *A = gsl_matrix_alloc(1, 1);
    gsl_matrix_set(B, 0, 0, 1.5);
    gsl_matrix_set(B, 0, 1, -2.5);
    gsl_matrix_set(A, 0, 0, 0.25);
    lse_assert_ok(lse_slds_set_beta(m, 1, B, &err));
    lse_assert_ok(lse_slds_set_a(m, 1, A, &err));
    gsl_matrix_set_zero(B);
    gsl_matrix_set_zero(A);
    lse_assert_ok(lse_slds_get_beta(m, 1, B));
    lse_assert_ok(lse_slds_get_a(m, 1, A));
    ck_assert_double_eq(gsl_matrix_get(B, 0, 0), 1.5);
    ck_assert_double_eq(gsl_matrix_get(B, 0, 1), -2.5);
    ck_assert_double_eq(gsl_matrix_get(A, 0, 0), 0.25);
    lse_assert_ok(lse_slds_get_beta(m, 0, B));
    ck_assert_double_eq(gsl_matrix_get(B, 0, 0), 0.0);
    ck_assert_int_eq(lse_slds_get_beta(m, 2, B), LSE_ERANGE);
    ck_assert_int_eq(lse_slds_get_beta(m, 0, A), LSE_EDIM);
    lse_assert_status(lse_slds_set_beta(m, 0, A, &err), LSE_EDIM);
    gsl_matrix_set(B, 0, 1, NAN);
    lse_assert_status(lse_slds_set_beta(m, 0, B, &err), LSE_ENONFINITE);
    /* series need d + p columns */
    gsl_matrix *x = gsl_matrix_calloc(10, 1);
    double ll;
    lse_assert_status(lse_slds_score(m, x, NULL, &ll, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "regressors"));
    lse_slds *m0 = make(2, 0, 0, 0, LSE_COV_FULL);
    lse_assert_status(lse_slds_get_beta(m0, 0, B), LSE_EDIM);
    /* not over several processes */
    gsl_matrix *x3p = gsl_matrix_calloc(10, 3);
    lse_slds_opts po = lse_slds_opts_default();
    po.reduce = dummy_reduce;
    lse_assert_status(lse_slds_fit(m, x3p, NULL, &po, &err), LSE_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err.message, "several processes"));
    gsl_matrix_free(x3p);
    /* latent states need no regressors */
    gsl_matrix *x3 = gsl_matrix_calloc(10, 3);
    lse_assert_ok(lse_slds_set_latent(m, 1.0, &err));
    lse_assert_status(lse_slds_fit(m, x3, NULL, NULL, &err), LSE_ENOTSUP);
    gsl_matrix_free(x3);
    lse_slds_free(m0);
    gsl_matrix_free(x);
    gsl_matrix_free(A);
    gsl_matrix_free(B);
    lse_slds_free(m);
}
END_TEST

/* Simulation reads the regressors and leaves them; a fit recovers B_k. */
START_TEST(test_simulate_fit)
{
    const double beta[2] = {2.0, -1.5};
    lse_slds *m = make(2, 1, 0, _i, LSE_COV_FULL);
    gsl_matrix *x = draw_series(m, 4000, 7, beta);
    gsl_matrix *y = gsl_matrix_alloc(4000, 2);
    gsl_matrix_memcpy(y, x);
    lse_assert_ok(lse_slds_simulate(m, 4000, 7, y, NULL, NULL));
    ck_assert(gsl_matrix_equal(x, y)); /* the same draws, u untouched */
    gsl_matrix_set(y, 5, 1, NAN);
    lse_error err;
    lse_assert_status(lse_slds_simulate(m, 4000, 7, y, NULL, &err),
                      LSE_ENONFINITE);
    lse_slds *f = make(2, 1, 0, _i, LSE_COV_FULL);
    lse_slds_opts o = lse_slds_opts_default();
    o.n_init = 3;
    lse_assert_ok(lse_slds_fit(f, x, NULL, &o, &err));
    gsl_matrix *B = gsl_matrix_alloc(1, 1), *C = gsl_matrix_alloc(1, 1);
    lse_assert_ok(lse_slds_get_cov(f, 0, C));
    const int swap = gsl_matrix_get(C, 0, 0) > 0.6;
    for (size_t k = 0; k < 2; k++) {
        lse_assert_ok(lse_slds_get_beta(f, swap ? 1 - k : k, B));
        ck_assert_double_eq_tol(gsl_matrix_get(B, 0, 0), beta[k], 0.08);
    }
    ck_assert_uint_eq(lse_slds_n_increase(f), 0);
    gsl_matrix_free(B);
    gsl_matrix_free(C);
    gsl_matrix_free(x);
    gsl_matrix_free(y);
    lse_slds_free(m);
    lse_slds_free(f);
}
END_TEST

/* Every part shared with a tied variance: K identical modes, so the fit
 * is the one-mode regression (K = 1, the ordinary least squares of the
 * lingauss M-step), log-likelihood and coefficients alike. */
START_TEST(test_all_shared_is_one_regression)
{
    const double beta[2] = {1.0, 1.0};
    lse_slds *gen = make(2, 1, 0, 0, LSE_COV_FULL);
    gsl_matrix *x = draw_series(gen, 600, 3, beta);
    const unsigned all =
        LSE_SLDS_SHARE_INTERCEPT | LSE_SLDS_SHARE_AR | LSE_SLDS_SHARE_EXOG;
    lse_slds *s = make(3, 1, all, _i, LSE_COV_TIED);
    lse_slds *one = make(1, 1, 0, 0, LSE_COV_FULL);
    lse_slds_opts o = lse_slds_opts_default();
    o.init = LSE_SLDS_INIT_RANDOM;
    o.tol = 1e-12;
    o.reg_covar = 0;
    lse_error err;
    lse_assert_ok(lse_slds_fit(s, x, NULL, &o, &err));
    lse_assert_ok(lse_slds_fit(one, x, NULL, &o, &err));
    ck_assert_double_eq_tol(lse_slds_loglik(s), lse_slds_loglik(one),
                            1e-8 * fabs(lse_slds_loglik(one)));
    gsl_matrix *B1 = gsl_matrix_alloc(1, 1), *B = gsl_matrix_alloc(1, 1);
    lse_assert_ok(lse_slds_get_beta(one, 0, B1));
    for (size_t k = 0; k < 3; k++) {
        lse_assert_ok(lse_slds_get_beta(s, k, B));
        ck_assert_double_eq_tol(gsl_matrix_get(B, 0, 0),
                                gsl_matrix_get(B1, 0, 0), 1e-9);
    }
    gsl_matrix_free(B1);
    gsl_matrix_free(B);
    gsl_matrix_free(x);
    lse_slds_free(gen);
    lse_slds_free(s);
    lse_slds_free(one);
}
END_TEST

/* A fit with some parts shared: the shared coefficients are equal in
 * every mode, EM never raised the energy, and the fit is a maximum of
 * the log-likelihood in each shared coefficient (moving it by +-1e-3
 * in every mode lowers lse_slds_score). */
START_TEST(test_shared_fit_is_maximum)
{
    const unsigned flags[3] = {LSE_SLDS_SHARE_AR | LSE_SLDS_SHARE_EXOG,
                               LSE_SLDS_SHARE_INTERCEPT,
                               LSE_SLDS_SHARE_EXOG};
    const double beta[2] = {0.8, 0.8};
    for (int markov = 0; markov < 2; markov++) {
        lse_slds *gen = make(2, 1, flags[_i], markov, LSE_COV_FULL);
        gsl_matrix *x = draw_series(gen, 1500, 11 + _i, beta);
        lse_slds *m = make(2, 1, flags[_i], markov, LSE_COV_FULL);
        lse_slds_opts o = lse_slds_opts_default();
        o.n_init = 2;
        o.tol = 1e-10;
        o.max_iter = 3000;
        lse_error err;
        lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
        ck_assert_uint_eq(lse_slds_n_increase(m), 0);
        double ll;
        lse_assert_ok(lse_slds_score(m, x, NULL, &ll, &err));
        ck_assert_double_eq_tol(ll, lse_slds_loglik(m), 1e-8 * fabs(ll));
        gsl_matrix *A = gsl_matrix_alloc(1, 1), *B = gsl_matrix_alloc(1, 1);
        gsl_vector *b = gsl_vector_alloc(1);
        for (int part = 0; part < 3; part++) {
            const unsigned f = part == 0   ? LSE_SLDS_SHARE_INTERCEPT
                               : part == 1 ? LSE_SLDS_SHARE_AR
                                           : LSE_SLDS_SHARE_EXOG;
            if (!(flags[_i] & f))
                continue;
            double v[2];
            for (size_t k = 0; k < 2; k++) {
                if (part == 0)
                    lse_slds_get_b(m, k, b), v[k] = gsl_vector_get(b, 0);
                else if (part == 1)
                    lse_slds_get_a(m, k, A), v[k] = gsl_matrix_get(A, 0, 0);
                else
                    lse_slds_get_beta(m, k, B), v[k] = gsl_matrix_get(B, 0, 0);
            }
            ck_assert_double_eq(v[0], v[1]);
            for (int sgn = -1; sgn <= 1; sgn += 2) {
                lse_slds *c = make(2, 1, flags[_i], markov, LSE_COV_FULL);
                gsl_matrix *mv = gsl_matrix_alloc(1, 1);
                /* copy through the file verbs, then move the part */
                lse_json *doc = lse_json_new_object();
                const char *names[2] = {"x", "u"};
                lse_assert_ok(lse_slds_to_json(m, names, doc, &err));
                lse_slds_free(c);
                lse_assert_ok(lse_slds_from_json(doc, NULL, &c, NULL, &err));
                lse_json_free(doc);
                for (size_t k = 0; k < 2; k++) {
                    const double nv = v[k] + sgn * 1e-3;
                    if (part == 0) {
                        gsl_vector_set(b, 0, nv);
                        lse_assert_ok(lse_slds_set_b(c, k, b, NULL));
                    } else {
                        gsl_matrix_set(mv, 0, 0, nv);
                        lse_assert_ok(part == 1
                                          ? lse_slds_set_a(c, k, mv, NULL)
                                          : lse_slds_set_beta(c, k, mv, NULL));
                    }
                }
                double llc, ll0;
                lse_assert_ok(lse_slds_score(c, x, NULL, &llc, &err));
                lse_assert_ok(lse_slds_score(m, x, NULL, &ll0, &err));
                ck_assert_msg(llc < ll0, "part %d sign %d: %.12g >= %.12g",
                              part, sgn, llc, ll0);
                gsl_matrix_free(mv);
                lse_slds_free(c);
            }
        }
        gsl_matrix_free(A);
        gsl_matrix_free(B);
        gsl_vector_free(b);
        gsl_matrix_free(x);
        lse_slds_free(gen);
        lse_slds_free(m);
    }
}
END_TEST

/* Model files: regressors, their names and the shared parts round-trip;
 * bad keys fail naming them. */
START_TEST(test_file)
{
    lse_slds *m = make(2, 1, LSE_SLDS_SHARE_EXOG, 1, LSE_COV_FULL);
    const double beta[2] = {0.5, 0.5};
    gsl_matrix *x = draw_series(m, 50, 1, beta);
    const char *names[2] = {"y", "u"};
    lse_json *doc = lse_json_new_object();
    lse_error err;
    lse_assert_ok(lse_slds_to_json(m, names, doc, &err));
    ck_assert(lse_json_has(doc, "n_exog") && lse_json_has(doc, "beta") &&
              lse_json_has(doc, "exog_names") && lse_json_has(doc, "shared"));
    lse_slds *r = NULL;
    char **nm = NULL;
    lse_assert_ok(lse_slds_from_json(doc, "f.json", &r, &nm, &err));
    ck_assert_str_eq(nm[0], "y");
    ck_assert_str_eq(nm[1], "u");
    ck_assert_ptr_null(nm[2]);
    free(nm);
    ck_assert_uint_eq(lse_slds_n_exog(r), 1);
    ck_assert_uint_eq(lse_slds_shared(r), LSE_SLDS_SHARE_EXOG);
    double l1, l2;
    lse_assert_ok(lse_slds_score(m, x, NULL, &l1, &err));
    lse_assert_ok(lse_slds_score(r, x, NULL, &l2, &err));
    ck_assert_double_eq(l1, l2);
    lse_slds_free(r);
    /* a model without regressors writes none of the keys */
    lse_slds *m0 = make(2, 0, 0, 1, LSE_COV_FULL);
    lse_json *d0 = lse_json_new_object();
    lse_assert_ok(lse_slds_to_json(m0, names, d0, &err));
    ck_assert(!lse_json_has(d0, "n_exog") && !lse_json_has(d0, "shared"));
    lse_json_free(d0);
    lse_slds_free(m0);
    /* bad keys */
    const char *bad[1] = {"slopes"};
    lse_assert_ok(lse_json_set_strings(doc, "shared", bad, 1, &err));
    lse_assert_status(lse_slds_from_json(doc, "f.json", &r, NULL, &err),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "'shared'"));
    const char *two[2] = {"u", "w"};
    lse_assert_ok(lse_json_set_strings(doc, "exog_names", two, 2, &err));
    lse_assert_status(lse_slds_from_json(doc, "f.json", &r, NULL, &err),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "exog_names"));
    lse_json_free(doc);
    gsl_matrix_free(x);
    lse_slds_free(m);
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_slds_exog");
    TCase *tc = tcase_create("exog");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_config);
    tcase_add_loop_test(tc, test_simulate_fit, 0, 2);
    tcase_add_loop_test(tc, test_all_shared_is_one_regression, 0, 2);
    tcase_add_loop_test(tc, test_shared_fit_is_maximum, 0, 3);
    tcase_add_test(tc, test_file);
    suite_add_tcase(s, tc);
    return s;
}
