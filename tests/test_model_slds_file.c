#include <math.h>
#include <string.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

/* SLDS model files: lse_slds_save / lse_slds_load and the JSON verbs
 * round-trip every parameter; bad files fail with the key named. */

static const char *const NAMES[] = {"u", "v"};

/* A model with distinct, valid parameters. */
static lse_slds *model(int markov, lse_cov_type cov, size_t L)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 3;
    cfg.dim = 2;
    cfg.lags = L;
    cfg.markov = markov;
    cfg.cov = cov;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, NULL));
    gsl_matrix *a = gsl_matrix_alloc(2, 2 * L), *c = gsl_matrix_alloc(2, 2);
    gsl_vector *b = gsl_vector_alloc(2), *w = gsl_vector_alloc(3);
    gsl_matrix *p = gsl_matrix_alloc(3, 3);
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < a->size1 * a->size2; i++)
            a->data[i] = 0.3 * sin(1.0 + k + 2.1 * i);
        gsl_vector_set(b, 0, 0.1 * k);
        gsl_vector_set(b, 1, -0.7 + k);
        const double s = 0.5 + 0.25 * k;
        gsl_matrix_set(c, 0, 0, s);
        gsl_matrix_set(c, 1, 1, cov == LSE_COV_SPHERICAL ? s : 2.0 * s);
        const double off =
            cov == LSE_COV_FULL || cov == LSE_COV_TIED ? 0.2 * s : 0.0;
        gsl_matrix_set(c, 0, 1, off);
        gsl_matrix_set(c, 1, 0, off);
        lse_assert_ok(lse_slds_set_a(m, k, a, NULL));
        lse_assert_ok(lse_slds_set_b(m, k, b, NULL));
        lse_assert_ok(lse_slds_set_cov(m, k, c, NULL));
        gsl_vector_set(w, k, 1.0 + k);
        for (size_t j = 0; j < 3; j++)
            gsl_matrix_set(p, k, j, k == j ? 5.0 : 1.0 + j);
    }
    if (markov) {
        lse_assert_ok(lse_slds_set_transition(m, p, NULL));
        lse_assert_ok(lse_slds_set_initial(m, w, NULL));
    } else {
        lse_assert_ok(lse_slds_set_weights(m, w, NULL));
    }
    gsl_matrix_free(a);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_vector_free(b);
    gsl_vector_free(w);
    return m;
}

static void assert_same(const lse_slds *x, const lse_slds *y)
{
    ck_assert_uint_eq(lse_slds_n_modes(x), lse_slds_n_modes(y));
    ck_assert_uint_eq(lse_slds_dim(x), lse_slds_dim(y));
    ck_assert_uint_eq(lse_slds_lags(x), lse_slds_lags(y));
    ck_assert_int_eq(lse_slds_is_markov(x), lse_slds_is_markov(y));
    ck_assert_int_eq(lse_slds_cov_type(x), lse_slds_cov_type(y));
    const size_t K = lse_slds_n_modes(x), d = lse_slds_dim(x),
                 L = lse_slds_lags(x);
    gsl_matrix *a1 = gsl_matrix_alloc(d, d * L),
               *a2 = gsl_matrix_alloc(d, d * L);
    gsl_matrix *c1 = gsl_matrix_alloc(d, d), *c2 = gsl_matrix_alloc(d, d);
    gsl_vector *b1 = gsl_vector_alloc(d), *b2 = gsl_vector_alloc(d);
    for (size_t k = 0; k < K; k++) {
        lse_assert_ok(lse_slds_get_a(x, k, a1));
        lse_assert_ok(lse_slds_get_a(y, k, a2));
        ck_assert(gsl_matrix_equal(a1, a2)); /* printed to 17 digits */
        lse_assert_ok(lse_slds_get_b(x, k, b1));
        lse_assert_ok(lse_slds_get_b(y, k, b2));
        ck_assert(gsl_vector_equal(b1, b2));
        lse_assert_ok(lse_slds_get_cov(x, k, c1));
        lse_assert_ok(lse_slds_get_cov(y, k, c2));
        for (size_t i = 0; i < d * d; i++)
            ck_assert_double_eq_tol(c1->data[i], c2->data[i], 1e-14);
    }
    gsl_vector *w1 = gsl_vector_alloc(K), *w2 = gsl_vector_alloc(K);
    gsl_matrix *p1 = gsl_matrix_alloc(K, K), *p2 = gsl_matrix_alloc(K, K);
    if (lse_slds_is_markov(x)) {
        lse_assert_ok(lse_slds_get_initial(x, w1));
        lse_assert_ok(lse_slds_get_initial(y, w2));
        lse_assert_ok(lse_slds_get_transition(x, p1));
        lse_assert_ok(lse_slds_get_transition(y, p2));
        for (size_t i = 0; i < K * K; i++)
            ck_assert_double_eq_tol(p1->data[i], p2->data[i], 1e-15);
    } else {
        lse_assert_ok(lse_slds_get_weights(x, w1));
        lse_assert_ok(lse_slds_get_weights(y, w2));
    }
    for (size_t k = 0; k < K; k++)
        ck_assert_double_eq_tol(gsl_vector_get(w1, k), gsl_vector_get(w2, k),
                                1e-15);
    gsl_matrix_free(a1);
    gsl_matrix_free(a2);
    gsl_matrix_free(c1);
    gsl_matrix_free(c2);
    gsl_vector_free(b1);
    gsl_vector_free(b2);
    gsl_vector_free(w1);
    gsl_vector_free(w2);
    gsl_matrix_free(p1);
    gsl_matrix_free(p2);
}

START_TEST(test_save_load_round_trip)
{
    char dir[256], path[512];
    lse_tmpdir_make(dir, sizeof dir, "slds_file");
    snprintf(path, sizeof path, "%s/m.json", dir);
    const struct {
        int markov;
        lse_cov_type cov;
        size_t L;
    } cases[] = {{0, LSE_COV_FULL, 1},
                 {1, LSE_COV_DIAG, 2},
                 {1, LSE_COV_TIED, 1},
                 {0, LSE_COV_SPHERICAL, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lse_slds *m = model(cases[c].markov, cases[c].cov, cases[c].L), *back;
        lse_error err;
        char **names = NULL;
        lse_assert_ok(lse_slds_save(m, NAMES, path, &err));
        lse_assert_ok(lse_slds_load(path, &back, &names, &err));
        assert_same(m, back);
        ck_assert_str_eq(names[0], "u");
        ck_assert_str_eq(names[1], "v");
        free(names);
        lse_slds_free(back);
        lse_slds_free(m);
    }
    lse_tmpdir_remove(dir);
}
END_TEST

START_TEST(test_fitted_model_keeps_its_loglik)
{
    lse_slds *m = model(1, LSE_COV_FULL, 1), *fit = NULL;
    gsl_matrix *x = gsl_matrix_alloc(300, 2);
    lse_assert_ok(lse_slds_simulate(m, 300, 4, x, NULL, NULL));
    lse_slds_config cfg = lse_slds_config_default();
    cfg.dim = 2;
    cfg.markov = 1;
    lse_assert_ok(lse_slds_new(&cfg, &fit, NULL));
    lse_assert_ok(lse_slds_fit(fit, x, NULL, NULL, NULL));
    lse_json *doc = lse_json_new_object();
    lse_assert_ok(lse_slds_to_json(fit, NAMES, doc, NULL));
    /* the stationary distribution of P is the "weights" key */
    gsl_vector *w = NULL, *pi = gsl_vector_alloc(2), *p0 = gsl_vector_alloc(2);
    gsl_matrix *p = gsl_matrix_alloc(2, 2);
    lse_assert_ok(lse_json_get_vector(doc, "weights", 2, &w, NULL));
    lse_assert_ok(lse_slds_get_transition(fit, p));
    lse_assert_ok(lse_slds_get_initial(fit, p0));
    lse_assert_ok(lse_chain_stationary(p, p0, pi, NULL, NULL));
    ck_assert(gsl_vector_equal(w, pi));
    lse_slds *back = NULL;
    lse_assert_ok(lse_slds_from_json(doc, NULL, &back, NULL, NULL));
    assert_same(fit, back);
    double ll = 0.0;
    lse_assert_ok(lse_slds_score(back, x, NULL, &ll, NULL));
    ck_assert_double_eq_tol(ll, lse_slds_loglik(fit),
                            1e-9 * fabs(lse_slds_loglik(fit)));
    lse_json_free(doc);
    gsl_vector_free(w);
    gsl_vector_free(pi);
    gsl_vector_free(p0);
    gsl_matrix_free(p);
    gsl_matrix_free(x);
    lse_slds_free(m);
    lse_slds_free(fit);
    lse_slds_free(back);
}
END_TEST

/* Parse text and read it as a model: the status, the message in err. */
static lse_status read_text(const char *text, lse_error *err)
{
    lse_json *doc = NULL;
    lse_assert_ok(lse_json_parse(text, strlen(text), "t.json", &doc, NULL));
    lse_slds *m = NULL;
    const lse_status st = lse_slds_from_json(doc, "t.json", &m, NULL, err);
    ck_assert(st == LSE_OK || m == NULL);
    lse_slds_free(m);
    lse_json_free(doc);
    return st;
}

#define HEAD                                                                   \
    "{\"model\": \"slds\", \"markov\": false, \"n_modes\": 2, "                \
    "\"n_features\": 1, \"feature_names\": [\"x\"], "
#define BODY "\"A\": [[[0.5]], [[-0.2]]], \"b\": [[0], [1]], "

START_TEST(test_bad_files)
{
    lse_error err;
    lse_assert_ok(read_text(HEAD BODY "\"covariances\": [[[1]], [[2]]], "
                                      "\"weights\": [0.25, 0.75]}",
                            &err));
    lse_assert_status(read_text("{\"model\": \"gmm\"}", &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "expected 'slds'"));
    lse_assert_status(read_text(HEAD BODY "\"covariances\": [[[1]], [[2]]], "
                                          "\"weights\": [0.5, 0.75]}",
                                &err),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "t.json: key 'weights' sums"));
    lse_assert_status(read_text(HEAD BODY "\"covariances\": [[[1]], [[-2]]], "
                                          "\"weights\": [0.25, 0.75]}",
                                &err),
                      LSE_ENUMERIC);
    ck_assert_ptr_nonnull(strstr(err.message, "key 'covariances' [1]"));
    const lse_status st =
        read_text(HEAD BODY "\"weights\": [0.25, 0.75]}", &err);
    ck_assert(st == LSE_ENOTFOUND || st == LSE_EPARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "covariances"));
    lse_assert_status(
        read_text("{\"model\": \"slds\", \"markov\": false, \"n_modes\": 0}",
                  &err),
        LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "'n_modes' is 0"));
    lse_assert_status(read_text(HEAD BODY "\"covariances\": [[[1]], [[2]]], "
                                          "\"weights\": [0.25, 0.75], "
                                          "\"options\": {\"covariance\": "
                                          "\"round\"}}",
                                &err),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "options.covariance 'round'"));
    lse_slds *m = NULL;
    lse_assert_status(lse_slds_load("/nonexistent/m.json", &m, NULL, &err),
                      LSE_EIO);
    ck_assert_ptr_null(m);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_slds_file");
    TCase *tc = tcase_create("model_slds_file");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_save_load_round_trip);
    tcase_add_test(tc, test_fitted_model_keeps_its_loglik);
    tcase_add_test(tc, test_bad_files);
    suite_add_tcase(s, tc);
    return s;
}
