#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lse_check.h"

/* mclust's 14 covariance models in lse_gmm single fits
 * (lse_gmm_new_model): EM from mclust's polished optimum stays there
 * (log-likelihood and BIC equal to the stored reference values,
 * tests/ref/mclust_ref.txt), model files keep the model, and
 * predict/score/sample work on it. */

#ifndef REF_FILE
#define REF_FILE LSE_DATA_DIR "/../tests/ref/mclust_ref.txt"
#endif

static gsl_matrix *read_csv(const char *path, size_t nc)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    const size_t cols[4] = {0, 1, 2, 3};
    lse_assert_ok(lse_table_read(path, NULL, &t, &err));
    lse_assert_ok(lse_table_to_matrix(t, cols, nc, LSE_MISSING_ERROR, &x, NULL,
                                      &err));
    lse_table_free(t);
    return x;
}

/* Set m's parameters from mclust's (pro (K), mean (d, K) column-major,
 * sigma (d, d, K)). */
static void set_params(lse_gmm *m, const double *pro, const double *mean,
                       const double *sigma)
{
    const size_t K = lse_gmm_k(m), d = lse_gmm_dim(m);
    lse_error err;
    gsl_vector_const_view w = gsl_vector_const_view_array(pro, K);
    lse_assert_ok(lse_gmm_set_weights(m, &w.vector, &err));
    gsl_matrix *mu = gsl_matrix_alloc(K, d);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(mu, k, j, mean[j + d * k]);
    lse_assert_ok(lse_gmm_set_means(m, mu, &err));
    gsl_matrix_free(mu);
    const lse_cov_type cov = lse_gmm_cov_type(m);
    const gsl_matrix *c0 = lse_gmm_covariances(m);
    gsl_matrix *c = gsl_matrix_alloc(c0->size1, c0->size2);
    for (size_t k = 0; k < (cov == LSE_COV_TIED ? 1 : K); k++)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                const double v = sigma[i + d * j + d * d * k];
                if (cov == LSE_COV_FULL || cov == LSE_COV_TIED)
                    gsl_matrix_set(c, k * d + i, j, v);
                else if (cov == LSE_COV_DIAG && i == j)
                    gsl_matrix_set(c, k, j, v);
                else if (cov == LSE_COV_SPHERICAL && i == 0 && j == 0)
                    gsl_matrix_set(c, k, 0, v);
            }
    lse_assert_ok(lse_gmm_set_covariances(m, c, &err));
    gsl_matrix_free(c);
}

/* Every reference fit: EM from mclust's polished optimum to convergence
 * ends where mclust is (1e-6 relative; mclust's VVE optimum is not a
 * fixed point of the exact M-step, docs/sim-gaussian.md section 6, and is
 * only checked not to be above ours), with mclust's parameter count and
 * its BIC (lse's BIC is its negative). */
START_TEST(test_fit_at_mclust_optimum)
{
    gsl_matrix *sets[2] = {read_csv(LSE_DATA_DIR "/faithful.csv", 2),
                           read_csv(LSE_DATA_DIR "/iris.csv", 4)};
    FILE *f = fopen(REF_FILE, "r");
    ck_assert_msg(f != NULL, "cannot open %s", REF_FILE);
    char line[8192];
    size_t n_fits = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char set[32], name[8], tok[64];
        size_t K;
        int used;
        if (line[0] == '#' ||
            sscanf(line, "%31s %7s %zu %63s%n", set, name, &K, tok, &used) != 4 ||
            strcmp(tok, "NA") == 0)
            continue;
        const gsl_matrix *x = strcmp(set, "iris") == 0 ? sets[1] : sets[0];
        const size_t d = x->size2, n = x->size1;
        double v[4 + 4 + 16 + 64], ll, bic;
        char *p = line + used;
        size_t nv = 0;
        for (char *e; nv < 4 + K + K * d + K * d * d; p = e, nv++) {
            v[nv] = strtod(p, &e);
            ck_assert_ptr_ne(e, p);
        }
        ll = v[2];
        bic = v[3];
        lse_cov_model model;
        lse_assert_ok(lse_cov_model_parse(name, &model));
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new_model(K, d, model, &m, NULL));
        ck_assert_int_eq(lse_gmm_cov_model(m), model);
        ck_assert_int_eq(lse_gmm_cov_type(m), lse_cov_model_layout(model));
        ck_assert_uint_eq(lse_gmm_n_params(m), (size_t)strtoul(tok, NULL, 10));
        set_params(m, v + 4, v + 4 + K, v + 4 + K + K * d);
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        o.tol = 1e-13;
        o.max_iter = 100000;
        o.reg_covar = 0.0;
        lse_error err;
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        const lse_gmm_fit_info *i = lse_gmm_info(m);
        ck_assert_uint_eq(i->n_increase, 0);
        if (model == LSE_COV_VVE) {
            ck_assert(i->loglik >= ll - 1e-6 * fabs(ll));
        } else {
            ck_assert_msg(fabs(i->loglik - ll) <= 1e-6 * fabs(ll),
                          "%s %s K=%zu: %.12g, mclust %.12g", set, name, K,
                          i->loglik, ll);
            ck_assert_msg(fabs(-i->bic - bic) <= 1e-6 * fabs(bic),
                          "%s %s K=%zu: BIC %.12g, mclust %.12g", set, name,
                          K, -i->bic, bic);
            ck_assert_double_eq_tol(i->bic, -lse_cov_model_bic(model, K, d, n,
                                                               i->loglik),
                                    1e-9 * fabs(bic));
        }
        lse_gmm_free(m);
        n_fits++;
    }
    fclose(f);
    ck_assert_uint_ge(n_fits, 100);
    gsl_matrix_free(sets[0]);
    gsl_matrix_free(sets[1]);
}
END_TEST

/* A fit from the default start, saved and loaded: the file names the
 * model, the loaded mixture predicts, scores and samples as the fitted
 * one. */
START_TEST(test_file_roundtrip_and_queries)
{
    gsl_matrix *x = read_csv(LSE_DATA_DIR "/iris.csv", 4);
    const lse_cov_model models[3] = {LSE_COV_VEV, LSE_COV_EVI, LSE_COV_EII};
    char dir[] = "/tmp/lse-gmm-mclust-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[96];
    snprintf(path, sizeof path, "%s/m.json", dir);
    const char *names[4] = {"a", "b", "c", "d"};
    for (size_t t = 0; t < 3; t++) {
        lse_gmm *m = NULL, *back = NULL;
        lse_error err;
        lse_assert_ok(lse_gmm_new_model(3, 4, models[t], &m, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.n_init = 3;
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        ck_assert(isfinite(lse_gmm_info(m)->loglik));
        lse_assert_ok(lse_gmm_save(m, names, path, &err));
        lse_json *doc = NULL;
        const char *s = NULL;
        lse_assert_ok(lse_json_load(path, &doc, &err));
        lse_assert_ok(lse_json_get_string(doc, "covariance_type", &s, &err));
        ck_assert_str_eq(s, lse_cov_model_name(models[t]));
        lse_json_free(doc);
        lse_assert_ok(lse_gmm_load(path, &back, NULL, &err));
        ck_assert_int_eq(lse_gmm_cov_model(back), models[t]);
        ck_assert_uint_eq(lse_gmm_n_params(back), lse_gmm_n_params(m));
        gsl_vector *a = gsl_vector_alloc(x->size1), *b = gsl_vector_alloc(x->size1);
        lse_assert_ok(lse_gmm_score_samples(m, x, a, &err));
        lse_assert_ok(lse_gmm_score_samples(back, x, b, &err));
        double sum = 0.0;
        for (size_t i = 0; i < x->size1; i++) {
            ck_assert_double_eq_tol(gsl_vector_get(a, i), gsl_vector_get(b, i),
                                    1e-12 * fmax(1.0, fabs(gsl_vector_get(a, i))));
            sum += gsl_vector_get(a, i);
        }
        ck_assert_double_eq_tol(sum, lse_gmm_info(m)->loglik,
                                1e-9 * fabs(sum));
        size_t *lab = malloc(x->size1 * sizeof *lab);
        lse_assert_ok(lse_gmm_predict(back, x, lab, &err));
        for (size_t i = 0; i < x->size1; i++)
            ck_assert_uint_lt(lab[i], 3);
        free(lab);
        gsl_matrix *smp = gsl_matrix_alloc(20, 4);
        lse_assert_ok(lse_gmm_sample(back, 1, smp, NULL, &err));
        for (size_t i = 0; i < 20; i++)
            ck_assert(isfinite(gsl_matrix_get(smp, i, 3)));
        gsl_matrix_free(smp);
        gsl_vector_free(a);
        gsl_vector_free(b);
        lse_gmm_free(m);
        lse_gmm_free(back);
    }
    unlink(path);
    rmdir(dir);
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_errors)
{
    lse_gmm *m = NULL;
    lse_assert_status(lse_gmm_new_model(2, 2, LSE_COV_MODEL_NONE, &m, NULL),
                      LSE_EINVAL);
    ck_assert_ptr_null(m);
    lse_assert_status(lse_gmm_new_model(2, 2, (lse_cov_model)99, &m, NULL),
                      LSE_EINVAL);
    lse_assert_status(lse_gmm_new_model(2, 2, LSE_COV_VEV, NULL, NULL),
                      LSE_EFAULT);
    ck_assert_int_eq(lse_gmm_cov_model(NULL), LSE_COV_MODEL_NONE);
    /* missing values need one of the four plain types */
    gsl_matrix *x = read_csv(LSE_DATA_DIR "/faithful.csv", 2);
    gsl_matrix_set(x, 3, 1, NAN);
    lse_assert_ok(lse_gmm_new_model(2, 2, LSE_COV_VEV, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.missing = LSE_GMM_MISSING_MARGINALIZE;
    lse_error err;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err.message, "VEV"));
    lse_gmm_free(m);
    lse_assert_ok(lse_gmm_new_model(2, 2, LSE_COV_VVI, &m, NULL));
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_mclust");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_fit_at_mclust_optimum);
    tcase_add_test(tc, test_file_roundtrip_and_queries);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
