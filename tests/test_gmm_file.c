#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_gmm_save / lse_gmm_load / lse_gmm_to_json / lse_gmm_from_json
 * (models/gmm_file.c). */

static const lse_cov_type all_cov[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                       LSE_COV_SPHERICAL, LSE_COV_TIED};
static const char *const names[] = {"a", "b", "c"};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* A fitted model of 3 components on 3-D data (random clouds). */
static lse_gmm *fitted(lse_cov_type cov)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_matrix *x = gsl_matrix_alloc(90, 3);
    for (size_t i = 0; i < 90; i++)
        for (size_t j = 0; j < 3; j++)
            gsl_matrix_set(x, i, j,
                           (double)((i % 3) * (j + 1)) + gsl_rng_uniform(r));
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(3, 3, cov, &m, NULL));
    lse_assert_ok(lse_gmm_fit(m, x, NULL, &err));
    gsl_matrix_free(x);
    gsl_rng_free(r);
    return m;
}

static int same(const double *a, const double *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* Parameter keys of m as text. */
static char *params_text(const lse_gmm *m)
{
    lse_error err;
    lse_json *j = lse_json_new_object();
    lse_assert_ok(lse_gmm_to_json(m, names, j, &err));
    char *t = NULL;
    lse_assert_ok(lse_json_to_string(j, &t, &err));
    lse_json_free(j);
    return t;
}

/* save -> load: the same names and means bit for bit, weights and
 * covariances to rounding (the model keeps Cholesky factors and normalized
 * weights: covariances are L L', so a covariance read from a file need not
 * be written back with the same last digit). */
START_TEST(test_round_trip)
{
    char p1[] = "/tmp/lse_gmm_file_XXXXXX";
    const int fd = mkstemp(p1);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char p2[sizeof p1 + 2], p3[sizeof p1 + 2];
    snprintf(p2, sizeof p2, "%s.2", p1);
    snprintf(p3, sizeof p3, "%s.3", p1);
    for (size_t c = 0; c < 4; c++) {
        lse_gmm *m = fitted(all_cov[c]), *b1 = NULL, *b2 = NULL;
        lse_error err;
        char **nm = NULL;
        lse_assert_ok(lse_gmm_save(m, names, p1, &err));
        lse_assert_ok(lse_gmm_load(p1, &b1, &nm, &err));
        lse_assert_ok(lse_gmm_save(b1, names, p2, &err));
        lse_assert_ok(lse_gmm_load(p2, &b2, NULL, &err));
        lse_assert_ok(lse_gmm_save(b2, names, p3, &err));
        ck_assert(same(lse_gmm_means(b1)->data, lse_gmm_means(b2)->data, 9));
        /* the fit summary only after a fit */
        lse_json *d1 = NULL, *d2 = NULL;
        lse_assert_ok(lse_json_load(p1, &d1, &err));
        ck_assert(lse_json_has(d1, "loglik") && lse_json_has(d1, "bic"));
        lse_assert_ok(lse_json_load(p2, &d2, &err));
        ck_assert(!lse_json_has(d2, "loglik"));
        lse_json_free(d1);
        lse_json_free(d2);
        /* the file's parameter keys are lse_gmm_to_json's */
        char *t1 = params_text(m);
        char *f1 = slurp(p1);
        ck_assert(strncmp(t1, f1, strlen(t1) - 3) == 0);
        free(t1);
        free(f1);
        ck_assert_int_eq(lse_gmm_cov_type(b1), all_cov[c]);
        ck_assert(same(lse_gmm_means(m)->data, lse_gmm_means(b1)->data, 9));
        const gsl_matrix *c1 = lse_gmm_covariances(m);
        const gsl_matrix *c2 = lse_gmm_covariances(b1);
        for (size_t i = 0; i < c1->size1 * c1->size2; i++)
            ck_assert_double_eq_tol(c1->data[i], c2->data[i],
                                    1e-14 * fabs(c1->data[i]) + 1e-300);
        for (size_t k = 0; k < 3; k++)
            ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(m), k),
                                    gsl_vector_get(lse_gmm_weights(b1), k),
                                    1e-15);
        for (size_t j = 0; j < 3; j++)
            ck_assert_str_eq(nm[j], names[j]);
        free(nm);
        lse_gmm_free(b1);
        lse_gmm_free(b2);
        lse_gmm_free(m);
    }
    remove(p1);
    remove(p2);
    remove(p3);
}
END_TEST

static lse_status parse_gmm(const char *text, lse_error *err)
{
    lse_json *doc = NULL;
    lse_assert_ok(lse_json_parse(text, strlen(text), "t.json", &doc, err));
    lse_gmm *m = NULL;
    char **nm = NULL;
    const lse_status st = lse_gmm_from_json(doc, "t.json", &m, &nm, err);
    ck_assert(st == LSE_OK ? nm != NULL : nm == NULL);
    free(nm);
    ck_assert(st == LSE_OK ? m != NULL : m == NULL);
    lse_gmm_free(m);
    lse_json_free(doc);
    return st;
}

#define HEAD "{\"model\": \"gmm\", \"covariance_type\": \"diag\", "
START_TEST(test_bad_files)
{
    lse_error err;
    lse_assert_ok(parse_gmm(HEAD "\"n_components\": 1, \"n_features\": 2, "
                                 "\"feature_names\": [\"a\", \"b\"], "
                                 "\"weights\": [1], \"means\": [[0, 0]], "
                                 "\"covariances\": [[1, 2]]}",
                            &err));
    /* without names, feature_names is not needed */
    static const char nonames[] =
        HEAD "\"n_components\": 1, \"n_features\": 1, \"weights\": [1], "
             "\"means\": [[0]], \"covariances\": [[2]]}";
    lse_json *doc = NULL;
    lse_assert_ok(
        lse_json_parse(nonames, strlen(nonames), "n.json", &doc, &err));
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_from_json(doc, "n.json", &m, NULL, &err));
    ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_covariances(m), 0, 0), 2.0,
                            1e-15);
    lse_gmm_free(m);
    char **nm = NULL;
    lse_assert_status(lse_gmm_from_json(doc, "n.json", &m, &nm, &err),
                      LSE_ENOTFOUND);
    lse_json_free(doc);
    lse_assert_status(parse_gmm("{\"model\": \"slds\"}", &err), LSE_EPARSE);
    ck_assert_str_eq(err.message, "t.json: model is 'slds', expected 'gmm'");
    lse_assert_status(
        parse_gmm("{\"model\": \"gmm\", \"covariance_type\": \"round\"}", &err),
        LSE_EPARSE);
    ck_assert(strstr(err.message, "unknown covariance_type 'round'"));
    lse_assert_status(parse_gmm(HEAD "\"n_components\": 0}", &err), LSE_EPARSE);
    ck_assert(strstr(err.message, "key 'n_components' is 0"));
    lse_assert_status(parse_gmm(HEAD "\"n_components\": 1, \"n_features\": "
                                     "2, \"feature_names\": [\"a\"]}",
                                &err),
                      LSE_EPARSE);
    ck_assert(strstr(err.message, "has 1 names but n_features is 2"));
    lse_assert_status(parse_gmm(HEAD "\"n_components\": 2, \"n_features\": "
                                     "1, \"feature_names\": [\"a\"], "
                                     "\"weights\": [0.5, 0.6]}",
                                &err),
                      LSE_EPARSE);
    ck_assert(strstr(err.message, "key 'weights' sums to"));
    lse_assert_status(parse_gmm(HEAD "\"n_components\": 1, \"n_features\": "
                                     "1, \"feature_names\": [\"a\"], "
                                     "\"weights\": [1], \"means\": [[0]]}",
                                &err),
                      LSE_ENOTFOUND);
    ck_assert(strstr(err.message, "covariances"));
    lse_assert_status(parse_gmm(HEAD "\"n_components\": 1, \"n_features\": "
                                     "1, \"feature_names\": [\"a\"], "
                                     "\"weights\": [1], \"means\": [[0]], "
                                     "\"covariances\": [[-1]]}",
                                &err),
                      LSE_ENUMERIC);
    ck_assert(strstr(err.message, "t.json: key 'covariances': ") != NULL);
    lse_assert_status(lse_gmm_load("/nonexistent/x.json", NULL, NULL, &err),
                      LSE_EFAULT);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_file");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_bad_files);
    suite_add_tcase(s, tc);
    return s;
}
