/* The memo of lse_gmm_emem_threshold (models/gmm_guard.c, session 14):
 * the same bits as the fit it stands for on every key, a call on the same
 * data (any K) served from it, none on other data, a matrix changed in
 * place, other options, covariance types, weights or several processes;
 * views; threads calling at once; emEM and split-and-merge EM with and
 * without it give the same bits. (Private: the model files compiled in,
 * for gmm_guard_memo_hits.) */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#include "gmm_guard-private.h"
#include "lse_check.h"

static lse_gmm *new_of(size_t k, size_t d, lse_cov_type t)
{
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(k, d, t, &m, NULL));
    return m;
}

static void reuse(int on)
{
    if (on)
        unsetenv("LSE_GMM_NO_REUSE");
    else
        setenv("LSE_GMM_NO_REUSE", "1", 1);
}

/* the threshold of (k, t, x, o) without the memo (the hits unchanged) */
static double fresh(size_t k, lse_cov_type t, const gsl_matrix *x,
                    const lse_gmm_fit_opts *o, double factor)
{
    lse_gmm *m = new_of(k, x->size2, t);
    double thr = -1.0;
    reuse(0);
    const size_t h = gmm_guard_memo_hits();
    lse_assert_ok(lse_gmm_emem_threshold(m, x, o, factor, &thr, NULL));
    ck_assert_uint_eq(gmm_guard_memo_hits(), h);
    reuse(1);
    lse_gmm_free(m);
    return thr;
}

/* the threshold with the memo; *hit: whether it served the call */
static double memo(size_t k, lse_cov_type t, const gsl_matrix *x,
                   const lse_gmm_fit_opts *o, double factor, int *hit)
{
    lse_gmm *m = new_of(k, x->size2, t);
    double thr = -1.0;
    const size_t h = gmm_guard_memo_hits();
    lse_assert_ok(lse_gmm_emem_threshold(m, x, o, factor, &thr, NULL));
    *hit = gmm_guard_memo_hits() != h;
    lse_gmm_free(m);
    return thr;
}

/* a call with the memo equals the fresh one, bit for bit, and was (want
 * 1) or was not (0) served from the memo */
static void same(size_t k, lse_cov_type t, const gsl_matrix *x,
                 const lse_gmm_fit_opts *o, double factor, int want)
{
    int hit = -1;
    const double a = memo(k, t, x, o, factor, &hit);
    const double b = fresh(k, t, x, o, factor);
    ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "K = %zu type %d: %.17g %.17g",
                  k, (int)t, a, b);
    ck_assert_msg(hit == want, "K = %zu type %d: hit %d, want %d", k, (int)t,
                  hit, want);
}

START_TEST(test_keys)
{
    reuse(1);
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "iris.csv", 4);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    const double f = LSE_GMM_EMEM_DEGENERATE;
    same(3, LSE_COV_FULL, x, &o, f, 0);
    ck_assert(fresh(3, LSE_COV_FULL, x, &o, f) > 0.0);
    /* the same data, any K and any factor: served */
    for (size_t k = 1; k <= 8; k++)
        same(k, LSE_COV_FULL, x, &o, f, 1);
    same(5, LSE_COV_FULL, x, &o, 1e9, 1); /* a factor that turns it off */
    ck_assert(fresh(5, LSE_COV_FULL, x, &o, 1e9) == 0.0);
    /* other covariance types: each its own fit */
    for (int t = 1; t < 4; t++) {
        same(4, (lse_cov_type)t, x, &o, f, 0);
        same(6, (lse_cov_type)t, x, &o, f, 1);
    }
    /* other options the fit reads */
    lse_gmm_fit_opts p = o;
    p.reg_covar = 1e-3;
    same(4, LSE_COV_TIED, x, &p, f, 0);
    same(4, LSE_COV_TIED, x, &p, f, 1);
    p = o;
    p.seed = 11;
    same(4, LSE_COV_TIED, x, &p, f, 0);
    p = o;
    p.lloyd_iter = 3;
    same(4, LSE_COV_TIED, x, &p, f, 0);
    p = o;
    p.tol = 1e-4;
    same(4, LSE_COV_TIED, x, &p, f, 0);
    /* options it does not read (replaced by its own) */
    same(4, LSE_COV_TIED, x, &o, f, 0); /* o's entry back */
    p = o;
    p.max_iter = 7;
    p.n_init = 3;
    p.init = LSE_GMM_INIT_RANDOM;
    same(4, LSE_COV_TIED, x, &p, f, 1);
    /* sample weights: never kept */
    gsl_vector *w = gsl_vector_alloc(x->size1);
    gsl_vector_set_all(w, 2.0);
    p = o;
    p.sample_weight = w;
    same(4, LSE_COV_TIED, x, &p, f, 0);
    same(4, LSE_COV_TIED, x, &p, f, 0);
    same(4, LSE_COV_TIED, x, &o, f, 1); /* the entry stays */
    /* a view of the same values in a wider matrix: served */
    gsl_matrix *wide = gsl_matrix_alloc(x->size1, 6);
    gsl_matrix_set_all(wide, 99.0);
    gsl_matrix_view v = gsl_matrix_submatrix(wide, 0, 1, x->size1, 4);
    gsl_matrix_memcpy(&v.matrix, x);
    same(7, LSE_COV_TIED, &v.matrix, &o, f, 1);
    /* the same matrix changed in place: a constant column makes the data
     * as thin as a collapse (the guard off), then back */
    const double x00 = gsl_matrix_get(x, 0, 0);
    for (size_t i = 0; i < x->size1; i++)
        gsl_matrix_set(&v.matrix, i, 2, 1.0);
    same(7, LSE_COV_TIED, &v.matrix, &o, f, 0);
    ck_assert(fresh(7, LSE_COV_TIED, &v.matrix, &o, f) == 0.0);
    gsl_matrix_memcpy(&v.matrix, x);
    gsl_matrix_set(&v.matrix, x->size1 - 1, 0, x00 + 1e-13);
    same(7, LSE_COV_TIED, &v.matrix, &o, f, 0); /* one bit of one value */
    /* fewer rows: another data set */
    gsl_matrix_view top = gsl_matrix_submatrix(x, 0, 0, 100, 4);
    same(3, LSE_COV_TIED, &top.matrix, &o, f, 0);
    same(3, LSE_COV_TIED, &top.matrix, &o, f, 1);
    gsl_matrix_free(wide);
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

/* a reduce hook of one process: never kept (every process must make the
 * same calls) */
static lse_status one_process(double *buf, size_t n, void *user)
{
    (void)buf;
    (void)n;
    ++*(size_t *)user;
    return LSE_OK;
}

START_TEST(test_reduce)
{
    reuse(1);
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    size_t calls = 0;
    o.reduce = one_process;
    o.reduce_user = &calls;
    same(3, LSE_COV_FULL, x, &o, LSE_GMM_EMEM_DEGENERATE, 0);
    const size_t c1 = calls;
    same(3, LSE_COV_FULL, x, &o, LSE_GMM_EMEM_DEGENERATE, 0);
    ck_assert_uint_eq(calls, 2 * c1);
    ck_assert_uint_gt(c1, 0);
    gsl_matrix_free(x);
}
END_TEST

/* threads asking at once, alternating two data sets and two types (the
 * entry replaced all the time): every answer is the fresh one */
typedef struct ask {
    const gsl_matrix *x[2];
    double want[2][2];
    int bad;
} ask;

static void *ask_run(void *p)
{
    ask *a = p;
    const lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    for (int r = 0; r < 60; r++) {
        const int ds = r % 2, t = (r / 2) % 2;
        lse_gmm *m = new_of(3, a->x[ds]->size2, t ? LSE_COV_DIAG
                                                  : LSE_COV_FULL);
        double thr = -1.0;
        if (lse_gmm_emem_threshold(m, a->x[ds], &o, LSE_GMM_EMEM_DEGENERATE,
                                   &thr, NULL) != LSE_OK ||
            memcmp(&thr, &a->want[ds][t], sizeof thr) != 0)
            a->bad++;
        lse_gmm_free(m);
    }
    return NULL;
}

START_TEST(test_threads)
{
    reuse(1);
    gsl_matrix *x0 = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    gsl_matrix *x1 = lse_check_load(LSE_DATA_DIR, "iris.csv", 4);
    /* iris with a constant column: the guard off for it */
    for (size_t i = 0; i < x1->size1; i++)
        gsl_matrix_set(x1, i, 1, 3.0);
    const lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    ask a[3];
    for (int t = 0; t < 3; t++) {
        a[t] = (ask){.x = {x0, x1}, .bad = 0};
        for (int ds = 0; ds < 2; ds++)
            for (int ty = 0; ty < 2; ty++)
                a[t].want[ds][ty] = fresh(3, ty ? LSE_COV_DIAG : LSE_COV_FULL,
                                          ds ? x1 : x0, &o,
                                          LSE_GMM_EMEM_DEGENERATE);
    }
    ck_assert(a[0].want[0][0] > 0.0 && a[0].want[1][0] == 0.0);
    const size_t h = gmm_guard_memo_hits();
    pthread_t th[3];
    for (int t = 0; t < 3; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, ask_run, &a[t]), 0);
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        ck_assert_int_eq(a[t].bad, 0);
    }
    ck_assert_uint_ge(gmm_guard_memo_hits(), h);
    gsl_matrix_free(x0);
    gsl_matrix_free(x1);
}
END_TEST

/* emEM with split-and-merge EM (the threshold asked by both, at every K):
 * the same bits with the memo as without, and served from it */
START_TEST(test_emem_same)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    const lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    for (size_t k = 4; k <= 6; k += 2) {
        lse_gmm *m[2];
        for (int on = 0; on < 2; on++) {
            reuse(on);
            const size_t h = gmm_guard_memo_hits();
            const lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k);
            m[on] = new_of(k, 2, LSE_COV_FULL);
            lse_assert_ok(lse_gmm_fit_emem(m[on], x, &o, &e, NULL, 0, NULL));
            if (on)
                ck_assert_uint_ge(gmm_guard_memo_hits(), h + 1);
            else
                ck_assert_uint_eq(gmm_guard_memo_hits(), h);
        }
        ck_assert(lse_gmm_info(m[0])->loglik == lse_gmm_info(m[1])->loglik);
        ck_assert(gsl_matrix_equal(lse_gmm_means(m[0]), lse_gmm_means(m[1])));
        ck_assert(gsl_matrix_equal(lse_gmm_covariances(m[0]),
                                   lse_gmm_covariances(m[1])));
        ck_assert(gsl_vector_equal(lse_gmm_weights(m[0]),
                                   lse_gmm_weights(m[1])));
        lse_gmm_free(m[0]);
        lse_gmm_free(m[1]);
    }
    reuse(1);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_smem_guard");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_keys);
    tcase_add_test(tc, test_reduce);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_emem_same);
    suite_add_tcase(s, tc);
    return s;
}
