/* Short runs ahead (lse_gmm_emem_ahead_begin, models/mixfit.c and
 * gmm_par.c, compiled in): a chain of emEM fits over K inside the scope
 * gives the same fits, fit info and log messages, in the same order, as
 * without it and on one thread, bit for bit, also when the calls come in
 * another order or do not match what runs ahead (then nothing is taken);
 * the handlers are put back; argument errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include <lsegraph/lsegraph.h>

#include "lse_check.h"
#include "mixfit-private.h"

#define KMAX 5

typedef struct trace {
    char *text;
    size_t len, cap, n_log;
} trace;

static void on_log(lse_log_level level, const char *msg, void *user)
{
    trace *t = user;
    const size_t n = strlen(msg) + 16;
    if (t->len + n + 1 > t->cap) {
        t->cap = 2 * (t->len + n + 1);
        t->text = realloc(t->text, t->cap);
        ck_assert_ptr_nonnull(t->text);
    }
    t->len += (size_t)snprintf(t->text + t->len, t->cap - t->len, "%d %s\n",
                               (int)level, msg);
    t->n_log++;
}

/* the fits of K = 1 .. KMAX in the order ks (emEM, default budgets, a
 * split of the K - 1 fit as the given start when the order is
 * increasing), on nt threads, inside a scope (ahead: its options'
 * seed) or not (ahead < 0); the parameters of every fit into fits[K] */
typedef struct chain {
    lse_gmm *fits[KMAX + 1];
    lse_status st[KMAX + 1];
    trace tr;
    size_t taken;
} chain;

static void run_chain(const gsl_matrix *x, lse_cov_type cov, int nt,
                      long ahead, const size_t *ks, unsigned long seed,
                      chain *c)
{
    memset(c, 0, sizeof *c);
    lse_set_num_threads(nt);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.seed = seed;
    lse_gmm_emem_opts e[KMAX];
    for (size_t k = 1; k <= KMAX; k++)
        e[k - 1] = lse_gmm_emem_opts_default(k);
    lse_set_log_handler(on_log, &c->tr);
    gsl_error_handler_t *gh = gsl_set_error_handler_off();
    gsl_set_error_handler(gh);
    lse_error err;
    lse_gmm *like = NULL;
    lse_assert_ok(lse_gmm_new(1, x->size2, cov, &like, NULL));
    const size_t t0 = gmm_ahead_taken();
    if (ahead >= 0) {
        lse_gmm_fit_opts oa = o;
        oa.seed = (unsigned long)ahead;
        oa.max_iter = 7; /* may differ */
        lse_assert_ok(lse_gmm_emem_ahead_begin(like, x, &oa, e, 1, KMAX, &err));
    }
    for (size_t i = 0; i < KMAX; i++) {
        const size_t k = ks[i];
        lse_assert_ok(lse_gmm_new(k, x->size2, cov, &c->fits[k], NULL));
        lse_gmm *given = NULL;
        size_t n_given = 0;
        if (k > 1 && c->fits[k - 1] != NULL && c->st[k - 1] == LSE_OK &&
            lse_gmm_info(c->fits[k - 1])->fitted) {
            lse_assert_ok(lse_gmm_new(k, x->size2, cov, &given, NULL));
            n_given = lse_gmm_split(c->fits[k - 1], x, NULL, 0, given,
                                    NULL) == LSE_OK;
        }
        c->st[k] = lse_gmm_fit_emem(c->fits[k], x, &o, &e[k - 1],
                                    (const lse_gmm *const *)&given, n_given,
                                    &err);
        lse_gmm_free(given);
    }
    if (ahead >= 0)
        lse_gmm_emem_ahead_end();
    c->taken = gmm_ahead_taken() - t0;
    lse_log_fn fn;
    void *user;
    lse_get_log_handler(&fn, &user);
    ck_assert(fn == on_log && user == &c->tr);
    ck_assert(gsl_set_error_handler(gh) == gh);
    lse_set_log_handler(NULL, NULL);
    lse_set_num_threads(0);
    lse_gmm_free(like);
    if (c->tr.text == NULL)
        c->tr.text = calloc(1, 1);
}

static void chain_free(chain *c)
{
    for (size_t k = 0; k <= KMAX; k++)
        lse_gmm_free(c->fits[k]);
    free(c->tr.text);
}

static void assert_same(const chain *a, const chain *b, const char *what)
{
    ck_assert_msg(strcmp(a->tr.text, b->tr.text) == 0,
                  "%s: the log differs:\n%s---\n%s", what, a->tr.text,
                  b->tr.text);
    for (size_t k = 1; k <= KMAX; k++) {
        ck_assert_msg(a->st[k] == b->st[k], "%s K %zu: status", what, k);
        if (a->st[k] != LSE_OK)
            continue;
        ck_assert_msg(lse_same_matrix(lse_gmm_means(a->fits[k]),
                                      lse_gmm_means(b->fits[k])) &&
                          lse_same_matrix(lse_gmm_covariances(a->fits[k]),
                                          lse_gmm_covariances(b->fits[k])),
                      "%s K %zu: parameters", what, k);
        const gsl_vector *wa = lse_gmm_weights(a->fits[k]),
                         *wb = lse_gmm_weights(b->fits[k]);
        ck_assert(memcmp(wa->data, wb->data, k * sizeof *wa->data) == 0);
        const lse_gmm_fit_info *p = lse_gmm_info(a->fits[k]),
                               *q = lse_gmm_info(b->fits[k]);
        ck_assert_msg(memcmp(&p->loglik, &q->loglik, sizeof p->loglik) == 0 &&
                          p->n_iter == q->n_iter,
                      "%s K %zu: fit info", what, k);
    }
}

/* 30 rows on three points: short runs re-seed empty components and log
 * it, so the order of the messages is checked too */
static gsl_matrix *three_points(void)
{
    gsl_matrix *x = gsl_matrix_alloc(30, 2);
    for (size_t i = 0; i < 30; i++) {
        gsl_matrix_set(x, i, 0, (double)(i % 3));
        gsl_matrix_set(x, i, 1, (double)((i % 3) * (i % 3)) + 1e-3 * (i % 2));
    }
    return x;
}

static const size_t up[KMAX] = {1, 2, 3, 4, 5};
static const size_t down[KMAX] = {5, 4, 3, 2, 1};

START_TEST(test_chain_same_bits)
{
    gsl_matrix *xs[3] = {lse_check_load(LSE_DATA_DIR, "faithful.csv", 2),
                         lse_check_load(LSE_DATA_DIR, "iris.csv", 4),
                         three_points()};
    static const lse_cov_type covs[2] = {LSE_COV_FULL, LSE_COV_SPHERICAL};
    size_t n_log = 0;
    for (size_t d = 0; d < 3; d++)
        for (size_t c = 0; c < 2; c++) {
            char what[64];
            snprintf(what, sizeof what, "set %zu cov %zu", d, c);
            chain ref, plain2, a2, a3;
            run_chain(xs[d], covs[c], 1, -1, up, 0, &ref);
            run_chain(xs[d], covs[c], 1, 0, up, 0, &a2); /* one thread */
            ck_assert_uint_eq(a2.taken, 0);
            assert_same(&ref, &a2, what);
            chain_free(&a2);
            run_chain(xs[d], covs[c], 2, -1, up, 0, &plain2);
            run_chain(xs[d], covs[c], 2, 0, up, 0, &a2);
            run_chain(xs[d], covs[c], 3, 0, up, 0, &a3);
            assert_same(&ref, &plain2, what);
            assert_same(&ref, &a2, what);
            assert_same(&ref, &a3, what);
#ifdef LSE_TEST_OPENMP
            /* every K's drawn runs came from the work ahead */
            size_t drawn = 0;
            for (size_t k = 1; k <= KMAX; k++) {
                const lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k);
                drawn += e.n_starts + e.n_random;
            }
            ck_assert_uint_eq(a2.taken, drawn);
            ck_assert_uint_eq(a3.taken, drawn);
#endif
            n_log += ref.tr.n_log;
            chain_free(&ref);
            chain_free(&plain2);
            chain_free(&a2);
            chain_free(&a3);
        }
    ck_assert_uint_gt(n_log, 0); /* the messages' order was compared */
    for (size_t d = 0; d < 3; d++)
        gsl_matrix_free(xs[d]);
}
END_TEST

/* calls in another order, and calls that do not match (another seed):
 * the same bits; a mismatch takes nothing */
START_TEST(test_order_and_mismatch)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    chain ref, a;
    run_chain(x, LSE_COV_DIAG, 1, -1, down, 0, &ref);
    run_chain(x, LSE_COV_DIAG, 2, 0, down, 0, &a);
    assert_same(&ref, &a, "decreasing K");
#ifdef LSE_TEST_OPENMP
    ck_assert_uint_gt(a.taken, 0);
#endif
    chain_free(&ref);
    chain_free(&a);
    run_chain(x, LSE_COV_DIAG, 1, -1, up, 5, &ref);
    run_chain(x, LSE_COV_DIAG, 2, 4, up, 5, &a); /* runs ahead for seed 4 */
    assert_same(&ref, &a, "another seed");
    ck_assert_uint_eq(a.taken, 0);
    chain_free(&ref);
    chain_free(&a);
    /* passes large enough for threads of their own: nothing runs ahead */
    lse_set_thread_min_work(1.0);
    run_chain(x, LSE_COV_DIAG, 1, -1, up, 0, &ref);
    run_chain(x, LSE_COV_DIAG, 2, 0, up, 0, &a);
    lse_set_thread_min_work(-1.0);
    assert_same(&ref, &a, "large passes");
    ck_assert_uint_eq(a.taken, 0);
    chain_free(&ref);
    chain_free(&a);
    gsl_matrix_free(x);
}
END_TEST

/* lse_gmm_bg (gmm_par.c) on its own: tasks that log their index, some
 * run ahead by the helper, some by the caller: the messages come in task
 * order where collected; the ones never collected are dropped */
static void log_task(void *ctx, size_t i, int tid)
{
    (void)tid;
    size_t *ran = ctx;
    lse_log(LSE_LOG_WARN, "task %zu", i);
    if (i % 7 == 0) /* a slower one now and then */
        for (volatile int s = 0; s < 200000; s++)
            ;
    ran[i]++;
}

START_TEST(test_bg_log_order)
{
    size_t ran[100] = {0};
    trace tr = {0};
    lse_set_log_handler(on_log, &tr);
    lse_gmm_bg *b = lse_gmm_bg_begin(2, log_task, ran, 100);
#ifdef LSE_TEST_OPENMP
    ck_assert_ptr_nonnull(b);
#endif
    if (b != NULL) {
        lse_log(LSE_LOG_INFO, "caller"); /* live */
        const lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        ck_assert_int_eq(lse_gmm_bg_collect(b, 0, 40, 2, &o), 1);
        ck_assert_int_eq(lse_gmm_bg_collect(b, 40, 30, 1, &o), 1);
        ck_assert_int_eq(lse_gmm_bg_collect(b, 90, 20, 2, &o), 0);
        lse_gmm_bg_end(b);
        char *want = calloc(4096, 1);
        size_t len = (size_t)snprintf(want, 4096, "%d caller\n",
                                      (int)LSE_LOG_INFO);
        for (size_t i = 0; i < 70; i++) {
            ck_assert_uint_eq(ran[i], 1);
            len += (size_t)snprintf(want + len, 4096 - len, "%d task %zu\n",
                                    (int)LSE_LOG_WARN, i);
        }
        for (size_t i = 70; i < 100; i++)
            ck_assert_uint_le(ran[i], 1);
        ck_assert_str_eq(tr.text, want);
        free(want);
    }
    lse_log_fn fn;
    void *user;
    lse_get_log_handler(&fn, &user);
    ck_assert(fn == on_log && user == &tr);
    lse_set_log_handler(NULL, NULL);
    free(tr.text);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    lse_gmm *like = NULL;
    lse_assert_ok(lse_gmm_new(1, 2, LSE_COV_FULL, &like, NULL));
    const lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm_emem_opts e[2] = {lse_gmm_emem_opts_default(1),
                              lse_gmm_emem_opts_default(2)};
    lse_error err;
    lse_assert_status(lse_gmm_emem_ahead_begin(NULL, x, &o, e, 1, 2, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_gmm_emem_ahead_begin(like, x, &o, NULL, 1, 2, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_gmm_emem_ahead_begin(like, x, &o, e, 0, 2, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_gmm_emem_ahead_begin(like, x, &o, e, 2, 1, &err),
                      LSE_EINVAL);
    lse_gmm_emem_ahead_end(); /* none open: nothing */
    lse_set_num_threads(2);
    lse_assert_ok(lse_gmm_emem_ahead_begin(like, x, &o, e, 1, 2, &err));
    lse_assert_status(lse_gmm_emem_ahead_begin(like, x, &o, e, 1, 2, &err),
                      LSE_EINVAL);
    ck_assert(strstr(err.message, "open already") != NULL);
    lse_gmm_emem_ahead_end(); /* nothing taken: freed (valgrind, ASan) */
    lse_assert_ok(lse_gmm_emem_ahead_begin(like, x, &o, e, 1, 2, &err));
    lse_gmm_emem_ahead_end();
    lse_set_num_threads(0);
    lse_gmm_free(like);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_ahead");
    TCase *tc = tcase_create("ahead");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_chain_same_bits);
    tcase_add_test(tc, test_order_and_mismatch);
    tcase_add_test(tc, test_bg_log_order);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
