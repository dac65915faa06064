/* emEM's runs side by side (models/mixfit.c, lse_gmm_fit_emem): the fit,
 * its info, the log messages and the progress calls are the same, bit for
 * bit and in the same order, for 1, 2 and 3 threads; so are the errors;
 * the log and GSL handlers are put back. And lse_xsum_add_array, which
 * lse_gmm_fit's row sums use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* what a fit reported: log messages and progress calls, in order, as text
 * (progress energies with all digits) */
typedef struct trace {
    char *text;
    size_t len, cap;
    size_t n_log, n_prog;
} trace;

static void trace_add(trace *t, const char *s)
{
    const size_t n = strlen(s);
    if (t->len + n + 1 > t->cap) {
        t->cap = 2 * (t->len + n + 1);
        t->text = realloc(t->text, t->cap);
        ck_assert_ptr_nonnull(t->text);
    }
    memcpy(t->text + t->len, s, n + 1);
    t->len += n;
}

static void on_log(lse_log_level level, const char *msg, void *user)
{
    trace *t = user;
    char buf[32];
    snprintf(buf, sizeof buf, "log %d: ", (int)level);
    trace_add(t, buf);
    trace_add(t, msg);
    trace_add(t, "\n");
    t->n_log++;
}

static void on_progress(size_t run, size_t iter, double energy, double change,
                        void *user)
{
    trace *t = user;
    char buf[128];
    snprintf(buf, sizeof buf, "progress %zu %zu %a %a\n", run, iter, energy,
             change);
    trace_add(t, buf);
    t->n_prog++;
}

/* one emEM fit on nt threads: its status, error, the fit and the trace */
typedef struct outcome {
    lse_status st;
    lse_error err;
    lse_gmm *m;
    trace tr;
} outcome;

static lse_cov_model cov_model = LSE_COV_MODEL_NONE; /* or a model's */

static void fit_on(int nt, const gsl_matrix *x, size_t k, lse_cov_type cov,
                   const lse_gmm_fit_opts *o0, const lse_gmm_emem_opts *e,
                   const lse_gmm *const *given, size_t n_given, outcome *out)
{
    memset(out, 0, sizeof *out);
    lse_set_thread_min_work(0.0); /* the count on small data too */
    lse_set_num_threads(nt);
#ifdef LSE_TEST_OPENMP
    ck_assert_int_eq(lse_get_num_threads(), nt);
#endif
    lse_assert_ok(cov_model != LSE_COV_MODEL_NONE
                      ? lse_gmm_new_model(k, x->size2, cov_model, &out->m,
                                          NULL)
                      : lse_gmm_new(k, x->size2, cov, &out->m, NULL));
    lse_gmm_fit_opts o = *o0;
    o.progress = on_progress;
    o.progress_user = &out->tr;
    lse_set_log_handler(on_log, &out->tr);
    gsl_error_handler_t *gh = gsl_set_error_handler_off();
    gsl_set_error_handler(gh);
    out->st = lse_gmm_fit_emem(out->m, x, &o, e, given, n_given, &out->err);
    /* the handlers are put back */
    lse_log_fn fn;
    void *user;
    lse_get_log_handler(&fn, &user);
    ck_assert(fn == on_log && user == &out->tr);
    ck_assert(gsl_set_error_handler(gh) == gh);
    lse_set_log_handler(NULL, NULL);
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
    if (out->tr.text == NULL)
        trace_add(&out->tr, "");
}

static void outcome_free(outcome *o)
{
    lse_gmm_free(o->m);
    free(o->tr.text);
}

static int same_vector(const gsl_vector *a, const gsl_vector *b)
{
    if (a->size != b->size)
        return 0;
    for (size_t i = 0; i < a->size; i++)
        if (memcmp(gsl_vector_const_ptr(a, i), gsl_vector_const_ptr(b, i),
                   sizeof(double)) != 0)
            return 0;
    return 1;
}

static int same_matrix(const gsl_matrix *a, const gsl_matrix *b)
{
    if (a->size1 != b->size1 || a->size2 != b->size2)
        return 0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            if (memcmp(gsl_matrix_const_ptr(a, i, j),
                       gsl_matrix_const_ptr(b, i, j), sizeof(double)) != 0)
                return 0;
    return 1;
}

/* a and b the same bit for bit: status, error, parameters, fit info, the
 * trace */
static void assert_same(const outcome *a, const outcome *b, const char *what)
{
    ck_assert_msg(a->st == b->st, "%s: status %d vs %d", what, a->st, b->st);
    ck_assert_msg(strcmp(a->tr.text, b->tr.text) == 0,
                  "%s: the log and progress differ", what);
    if (a->st != LSE_OK) {
        ck_assert_str_eq(a->err.message, b->err.message);
        return;
    }
    ck_assert_msg(same_vector(lse_gmm_weights(a->m), lse_gmm_weights(b->m)),
                  "%s: weights", what);
    ck_assert_msg(same_matrix(lse_gmm_means(a->m), lse_gmm_means(b->m)),
                  "%s: means", what);
    ck_assert_msg(same_matrix(lse_gmm_covariances(a->m),
                              lse_gmm_covariances(b->m)),
                  "%s: covariances", what);
    const lse_gmm_fit_info *p = lse_gmm_info(a->m), *q = lse_gmm_info(b->m);
    ck_assert_msg(memcmp(&p->loglik, &q->loglik, sizeof p->loglik) == 0 &&
                      memcmp(&p->bic, &q->bic, sizeof p->bic) == 0 &&
                      p->n_iter == q->n_iter && p->converged == q->converged &&
                      p->n_increase == q->n_increase,
                  "%s: fit info", what);
}

/* 1, 2 and 3 threads on Faithful and Iris, four covariance types, K = 2
 * and 6, with emEM's default budget and a given start (the one-thread fit
 * of K - 1 split is not needed: a k-means++ fit of K serves) */
START_TEST(test_threads_identical)
{
    static const char *const sets[2] = {"faithful.csv", "iris.csv"};
    static const size_t dims[2] = {2, 4};
    static const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                         LSE_COV_SPHERICAL, LSE_COV_TIED};
    static const size_t ks[2] = {2, 6};
    lse_error err;
    size_t n_prog = 0;
    for (size_t d = 0; d < 2; d++) {
        gsl_matrix *x = lse_check_load(LSE_DATA_DIR, sets[d], dims[d]);
        for (size_t c = 0; c < 4; c++)
            for (size_t kk = 0; kk < 2; kk++) {
                const size_t k = ks[kk];
                lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
                o.seed = 3;
                lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k);
                lse_gmm *g = NULL;
                lse_assert_ok(lse_gmm_new(k, dims[d], covs[c], &g, NULL));
                lse_gmm_fit_opts go = o;
                go.seed = 99;
                go.max_iter = 5;
                lse_assert_ok(lse_gmm_fit(g, x, &go, &err));
                const lse_gmm *given[1] = {g};
                outcome r[3];
                for (int t = 0; t < 3; t++)
                    fit_on(t + 1, x, k, covs[c], &o, &e, given, 1, &r[t]);
                char what[64];
                snprintf(what, sizeof what, "%s cov %zu K %zu", sets[d], c,
                         k);
                ck_assert_msg(r[0].st == LSE_OK, "%s: %s", what,
                              r[0].err.message);
                for (int t = 1; t < 3; t++)
                    assert_same(&r[0], &r[t], what);
                n_prog += r[0].tr.n_prog;
                for (int t = 0; t < 3; t++)
                    outcome_free(&r[t]);
                lse_gmm_free(g);
            }
        gsl_matrix_free(x);
    }
    /* the final runs reported their iterations */
    ck_assert(n_prog > 0);
}
END_TEST

/* mclust's models with iterative M-steps (VEI, EVE, VEV: their runs
 * depend on the run before them on the same mixture, so emEM keeps them
 * on one thread): the same bits for 1, 2 and 3 threads */
START_TEST(test_threads_models)
{
    static const lse_cov_model models[3] = {LSE_COV_VEI, LSE_COV_EVE,
                                            LSE_COV_VEV};
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "iris.csv", 4);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm_emem_opts e = lse_gmm_emem_opts_default(3);
    for (size_t i = 0; i < 3; i++) {
        cov_model = models[i];
        outcome r[3];
        for (int t = 0; t < 3; t++)
            fit_on(t + 1, x, 3, LSE_COV_FULL, &o, &e, NULL, 0, &r[t]);
        ck_assert_msg(r[0].st == LSE_OK, "%s", r[0].err.message);
        for (int t = 1; t < 3; t++)
            assert_same(&r[0], &r[t], lse_cov_model_name(models[i]));
        for (int t = 0; t < 3; t++)
            outcome_free(&r[t]);
    }
    cov_model = LSE_COV_MODEL_NONE;
    gsl_matrix_free(x);
}
END_TEST

/* rows on 3 points with a little noise on some: k-means++ and random
 * starts leave components without responsibility, which lse_gmm_fit
 * re-seeds with a warning (logged from the runs, replayed in order) */
static gsl_matrix *clumped(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 11);
    gsl_matrix *x = gsl_matrix_alloc(60, 2);
    for (size_t i = 0; i < 60; i++) {
        const double c = (double)(i % 3);
        const double eps = i < 12 ? gsl_ran_gaussian(r, 0.01) : 0.0;
        gsl_matrix_set(x, i, 0, 4.0 * c + eps);
        gsl_matrix_set(x, i, 1, -2.0 * c + (i % 2 ? eps : 0.0));
    }
    gsl_rng_free(r);
    return x;
}

/* warnings from many runs: the same messages in the same order for 1, 2
 * and 3 threads */
START_TEST(test_threads_log_order)
{
    gsl_matrix *x = clumped();
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm_emem_opts e = lse_gmm_emem_opts_default(8);
    e.degenerate = 0.0;
    outcome r[3];
    for (int t = 0; t < 3; t++)
        fit_on(t + 1, x, 8, LSE_COV_SPHERICAL, &o, &e, NULL, 0, &r[t]);
    ck_assert_msg(r[0].tr.n_log >= 2, "only %zu log messages",
                  r[0].tr.n_log);
    for (int t = 1; t < 3; t++)
        assert_same(&r[0], &r[t], "clumped, K = 8");
    for (int t = 0; t < 3; t++)
        outcome_free(&r[t]);
    gsl_matrix_free(x);
}
END_TEST

/* every run fails (two distinct rows, K = 3, reg_covar 0: a singular
 * covariance): the same error for 1, 2 and 3 threads */
START_TEST(test_threads_error)
{
    gsl_matrix *x = gsl_matrix_alloc(20, 2);
    for (size_t i = 0; i < 20; i++) {
        gsl_matrix_set(x, i, 0, (double)(i % 2));
        gsl_matrix_set(x, i, 1, (double)(i % 2));
    }
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.reg_covar = 0.0;
    lse_gmm_emem_opts e = lse_gmm_emem_opts_default(3);
    outcome r[3];
    for (int t = 0; t < 3; t++)
        fit_on(t + 1, x, 3, LSE_COV_FULL, &o, &e, NULL, 0, &r[t]);
    ck_assert_msg(r[0].st != LSE_OK, "the fit did not fail");
    for (int t = 1; t < 3; t++)
        assert_same(&r[0], &r[t], "two points, K = 3");
    for (int t = 0; t < 3; t++)
        outcome_free(&r[t]);
    gsl_matrix_free(x);
}
END_TEST

/* lse_xsum_add_array (lse_gmm_fit's row sums) against one lse_xsum_add per
 * term: the same exported accumulator, with terms of every magnitude, more
 * than a carry interval of them, and non-finite ones */
START_TEST(test_xsum_add_array)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 5);
    const size_t n = 70000;
    double *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = ldexp(gsl_ran_gaussian(r, 1.0),
                     (int)gsl_rng_uniform_int(r, 2000) - 1000);
    for (int round_ = 0; round_ < 2; round_++) {
        if (round_ == 1) {
            v[7] = INFINITY;
            v[9] = NAN;
        }
        lse_xsum a, b;
        lse_xsum_init(&a);
        lse_xsum_init(&b);
        lse_xsum_add_array(&a, v, n);
        for (size_t i = 0; i < n; i++)
            lse_xsum_add(&b, v[i]);
        double ea[LSE_XSUM_EXPORT], eb[LSE_XSUM_EXPORT];
        lse_xsum_export(&a, ea);
        lse_xsum_export(&b, eb);
        ck_assert(memcmp(ea, eb, sizeof ea) == 0);
    }
    lse_xsum e;
    lse_xsum_init(&e);
    lse_xsum_add_array(&e, v, 0);
    ck_assert(lse_xsum_round(&e) == 0.0);
    free(v);
    gsl_rng_free(r);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_emem_par");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_threads_identical);
    tcase_add_test(tc, test_threads_models);
    tcase_add_test(tc, test_threads_log_order);
    tcase_add_test(tc, test_threads_error);
    tcase_add_test(tc, test_xsum_add_array);
    suite_add_tcase(s, tc);
    return s;
}
