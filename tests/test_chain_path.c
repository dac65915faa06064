#include <math.h>
#include <string.h>

#include "lse_check.h"

/* lse_chain_viterbi against the best of all K^n paths; lse_chain_stationary
 * against its defining property pi P = pi, sum pi = 1, on irreducible,
 * periodic and reducible chains. */

enum { N = 7, K = 3 };

static void fill_chain(gsl_matrix *S, gsl_vector *lp0, gsl_matrix *lT)
{
    for (size_t i = 0; i < S->size1; i++)
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(S, i, k, 2.0 * sin(0.37 + 1.9 * i + 2.3 * k));
    double z = 0.0;
    for (size_t k = 0; k < K; k++)
        z += exp(0.4 * k);
    for (size_t k = 0; k < K; k++)
        gsl_vector_set(lp0, k, 0.4 * k - log(z));
    for (size_t j = 0; j < K; j++) {
        double r = 0.0;
        for (size_t k = 0; k < K; k++)
            r += exp(j == k ? 1.2 : cos(1.0 + j + 2.0 * k));
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(lT, j, k,
                           (j == k ? 1.2 : cos(1.0 + j + 2.0 * k)) - log(r));
    }
}

/* The best path of rows [s0, s1) by enumeration; its score. */
static double brute_path(const gsl_matrix *S, const gsl_vector *lp0,
                         const gsl_matrix *lT, size_t s0, size_t s1,
                         size_t *best)
{
    const size_t len = s1 - s0;
    size_t total = 1;
    for (size_t i = 0; i < len; i++)
        total *= K;
    double top = -INFINITY;
    for (size_t code = 0; code < total; code++) {
        size_t c = code, prev = 0, path[N];
        double lp = 0.0;
        for (size_t i = 0; i < len; i++) {
            const size_t k = c % K;
            c /= K;
            path[i] = k;
            lp += gsl_matrix_get(S, s0 + i, k) +
                  (i == 0 ? gsl_vector_get(lp0, k) : gsl_matrix_get(lT, prev, k));
            prev = k;
        }
        if (lp > top) {
            top = lp;
            memcpy(best + s0, path, len * sizeof *path);
        }
    }
    return top;
}

START_TEST(test_viterbi_equals_brute_force)
{
    gsl_matrix *S = gsl_matrix_alloc(N, K), *lT = gsl_matrix_alloc(K, K);
    gsl_vector *lp0 = gsl_vector_alloc(K);
    fill_chain(S, lp0, lT);
    size_t path[N], want[N];
    lse_assert_ok(lse_chain_viterbi(S, lp0, lT, NULL, 0, path, NULL));
    brute_path(S, lp0, lT, 0, N, want);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(path[i], want[i]);
    /* three sequences, starts with and without the leading 0 */
    const size_t starts[] = {0, 3, 5};
    lse_assert_ok(lse_chain_viterbi(S, lp0, lT, starts, 3, path, NULL));
    brute_path(S, lp0, lT, 0, 3, want);
    brute_path(S, lp0, lT, 3, 5, want);
    brute_path(S, lp0, lT, 5, N, want);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(path[i], want[i]);
    lse_assert_ok(lse_chain_viterbi(S, lp0, lT, starts + 1, 2, path, NULL));
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(path[i], want[i]);
    /* the path is not just the per-row argmax here */
    int differs = 0;
    for (size_t i = 0; i < N; i++) {
        gsl_vector_const_view row = gsl_matrix_const_row(S, i);
        differs |= gsl_vector_max_index(&row.vector) != want[i];
    }
    ck_assert(differs);
    gsl_matrix_free(S);
    gsl_matrix_free(lT);
    gsl_vector_free(lp0);
}
END_TEST

START_TEST(test_viterbi_errors)
{
    gsl_matrix *S = gsl_matrix_alloc(N, K), *lT = gsl_matrix_alloc(K, K);
    gsl_matrix *bad = gsl_matrix_alloc(K, K + 1);
    gsl_vector *lp0 = gsl_vector_alloc(K);
    fill_chain(S, lp0, lT);
    size_t path[N];
    lse_error err;
    lse_assert_status(lse_chain_viterbi(NULL, lp0, lT, NULL, 0, path, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_chain_viterbi(S, lp0, bad, NULL, 0, path, &err),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_chain_viterbi"));
    const size_t desc[] = {4, 2}, past[] = {N};
    lse_assert_status(lse_chain_viterbi(S, lp0, lT, desc, 2, path, &err),
                      LSE_ERANGE);
    lse_assert_status(lse_chain_viterbi(S, lp0, lT, past, 1, path, &err),
                      LSE_ERANGE);
    gsl_matrix_free(S);
    gsl_matrix_free(lT);
    gsl_matrix_free(bad);
    gsl_vector_free(lp0);
}
END_TEST

/* pi P = pi and sum pi = 1 to tol. */
static void assert_stationary(const gsl_matrix *P, const gsl_vector *pi,
                              double tol)
{
    const size_t k = P->size1;
    double sum = 0.0;
    for (size_t j = 0; j < k; j++) {
        double v = 0.0;
        for (size_t i = 0; i < k; i++)
            v += gsl_vector_get(pi, i) * gsl_matrix_get(P, i, j);
        ck_assert_double_eq_tol(v, gsl_vector_get(pi, j), tol);
        ck_assert(gsl_vector_get(pi, j) >= 0.0);
        sum += gsl_vector_get(pi, j);
    }
    ck_assert_double_eq_tol(sum, 1.0, tol);
}

static gsl_matrix *matrix_of(size_t k, const double *v)
{
    gsl_matrix *P = gsl_matrix_alloc(k, k);
    for (size_t i = 0; i < k * k; i++)
        P->data[i] = v[i];
    return P;
}

START_TEST(test_stationary_irreducible_and_periodic)
{
    const double pos[] = {0.5,  0.2,  0.2, 0.1, 0.05, 0.9,  0.03, 0.02,
                          0.25, 0.25, 0.4, 0.1, 0.3,  0.01, 0.09, 0.6};
    const double cyc[] = {0, 1, 0, 0, 0, 1, 1, 0, 0}; /* period 3 */
    const double two[] = {0, 1, 0.5, 0.5};
    gsl_vector *pi = gsl_vector_alloc(4);
    size_t nc = 0;
    gsl_matrix *P = matrix_of(4, pos);
    lse_assert_ok(lse_chain_stationary(P, NULL, pi, &nc, NULL));
    ck_assert_uint_eq(nc, 1);
    assert_stationary(P, pi, 1e-14);
    gsl_matrix_free(P);
    gsl_vector_free(pi);
    /* periodic: unique, uniform over the cycle */
    pi = gsl_vector_alloc(3);
    P = matrix_of(3, cyc);
    lse_assert_ok(lse_chain_stationary(P, NULL, pi, &nc, NULL));
    ck_assert_uint_eq(nc, 1);
    assert_stationary(P, pi, 1e-15);
    for (size_t i = 0; i < 3; i++)
        ck_assert_double_eq_tol(gsl_vector_get(pi, i), 1.0 / 3.0, 1e-15);
    gsl_matrix_free(P);
    gsl_vector_free(pi);
    pi = gsl_vector_alloc(2);
    P = matrix_of(2, two);
    lse_assert_ok(lse_chain_stationary(P, NULL, pi, NULL, NULL));
    ck_assert_double_eq_tol(gsl_vector_get(pi, 0), 1.0 / 3.0, 1e-15);
    gsl_matrix_free(P);
    gsl_vector_free(pi);
}
END_TEST

START_TEST(test_stationary_reducible)
{
    /* state 0 transient, one closed class {1, 2}: unique, pi_0 = 0 */
    const double one[] = {0.5, 0.5, 0, 0, 0.3, 0.7, 0, 0.6, 0.4};
    /* closed classes {0} and {1}, 2 transient (to 0: 1/4, to 1: 1/2) */
    const double abs2[] = {1, 0, 0, 0, 1, 0, 0.25, 0.5, 0.25};
    /* identity: every state its own class */
    const double eye[] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    gsl_vector *pi = gsl_vector_alloc(3), *p0 = gsl_vector_alloc(3);
    size_t nc = 0;
    gsl_matrix *P = matrix_of(3, one);
    lse_assert_ok(lse_chain_stationary(P, NULL, pi, &nc, NULL));
    ck_assert_uint_eq(nc, 1);
    assert_stationary(P, pi, 1e-15);
    ck_assert_double_eq(gsl_vector_get(pi, 0), 0.0);
    ck_assert_double_eq_tol(gsl_vector_get(pi, 1), 6.0 / 13.0, 1e-15);
    gsl_matrix_free(P);
    P = matrix_of(3, abs2);
    lse_error err;
    lse_assert_status(lse_chain_stationary(P, NULL, pi, &nc, &err), LSE_EDOM);
    ck_assert_uint_eq(nc, 2);
    ck_assert_ptr_nonnull(strstr(err.message, "not unique"));
    gsl_vector_set(p0, 0, 0.0);
    gsl_vector_set(p0, 1, 0.0);
    gsl_vector_set(p0, 2, 1.0);
    lse_assert_ok(lse_chain_stationary(P, p0, pi, &nc, NULL));
    assert_stationary(P, pi, 1e-15);
    ck_assert_double_eq_tol(gsl_vector_get(pi, 0), 1.0 / 3.0, 1e-15);
    ck_assert_double_eq_tol(gsl_vector_get(pi, 1), 2.0 / 3.0, 1e-15);
    ck_assert_double_eq(gsl_vector_get(pi, 2), 0.0);
    gsl_matrix_free(P);
    /* identity: pi = p0 */
    P = matrix_of(3, eye);
    gsl_vector_set(p0, 0, 0.2);
    gsl_vector_set(p0, 1, 0.3);
    gsl_vector_set(p0, 2, 0.5);
    lse_assert_ok(lse_chain_stationary(P, p0, pi, &nc, NULL));
    ck_assert_uint_eq(nc, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_double_eq_tol(gsl_vector_get(pi, i), gsl_vector_get(p0, i),
                                1e-15);
    gsl_matrix_free(P);
    gsl_vector_free(pi);
    gsl_vector_free(p0);
}
END_TEST

START_TEST(test_stationary_nearly_decomposable)
{
    /* two blocks joined by 1e-13: the LU pivot is tiny, the answer is
     * (1/4, 1/4, 1/4, 1/4) by symmetry */
    const double e = 1e-13;
    const double v[] = {0.5, 0.5 - e, e, 0, 0.5 - e, 0.5, 0, e,
                        e,   0,       0.5, 0.5 - e, 0, e, 0.5 - e, 0.5};
    gsl_matrix *P = matrix_of(4, v);
    gsl_vector *pi = gsl_vector_alloc(4);
    lse_assert_ok(lse_chain_stationary(P, NULL, pi, NULL, NULL));
    assert_stationary(P, pi, 1e-15);
    for (size_t i = 0; i < 4; i++)
        ck_assert_double_eq_tol(gsl_vector_get(pi, i), 0.25, 1e-3);
    gsl_matrix_free(P);
    gsl_vector_free(pi);
}
END_TEST

START_TEST(test_stationary_errors)
{
    const double neg[] = {1.5, -0.5, 0.5, 0.5};
    const double sum[] = {0.5, 0.4, 0.5, 0.5};
    const double nan_[] = {NAN, 1, 0.5, 0.5};
    gsl_vector *pi = gsl_vector_alloc(2), *pi3 = gsl_vector_alloc(3);
    lse_error err;
    gsl_matrix *P = matrix_of(2, neg);
    lse_assert_status(lse_chain_stationary(P, NULL, pi, NULL, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "row 0"));
    lse_assert_status(lse_chain_stationary(P, NULL, pi3, NULL, &err), LSE_EDIM);
    lse_assert_status(lse_chain_stationary(NULL, NULL, pi, NULL, &err),
                      LSE_EFAULT);
    gsl_matrix_free(P);
    P = matrix_of(2, sum);
    lse_assert_status(lse_chain_stationary(P, NULL, pi, NULL, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "sums to"));
    gsl_matrix_free(P);
    P = matrix_of(2, nan_);
    lse_assert_status(lse_chain_stationary(P, NULL, pi, NULL, &err),
                      LSE_ENONFINITE);
    gsl_matrix_free(P);
    gsl_vector_free(pi);
    gsl_vector_free(pi3);
}
END_TEST

/* The EM solver calls the M-step hook after a chain term's M-step, with
 * an empty report and the E-step's posteriors still in place. */
typedef struct hook_count {
    size_t calls;
    int bad;
} hook_count;

static lse_status count_hook(lse_graph *g, lse_term *t,
                             const lse_mstep_report *rep, void *user)
{
    (void)g;
    hook_count *c = user;
    c->calls++;
    const gsl_matrix *post = lse_term_softmax(t);
    if (rep->empty != NULL || lse_term_reduce(t) != LSE_REDUCE_CHAIN ||
        post == NULL)
        c->bad = 1;
    else
        for (size_t i = 0; i < post->size1; i++) {
            double s = 0.0;
            for (size_t k = 0; k < post->size2; k++)
                s += gsl_matrix_get(post, i, k);
            c->bad |= fabs(s - 1.0) > 1e-12;
        }
    return c->calls == 3 ? LSE_ENUMERIC : LSE_OK; /* stops the third */
}

START_TEST(test_mstep_hook_after_chain)
{
    lse_graph *g = lse_graph_new();
    lse_node *s, *eye, *u, *v;
    lse_assert_ok(lse_graph_add_node(g, "s", N, K, LSE_NODE_CLAMPED, &s));
    lse_assert_ok(lse_graph_add_node(g, "eye", K, K, LSE_NODE_CLAMPED, &eye));
    lse_assert_ok(lse_graph_add_node(g, "init", 1, K, LSE_NODE_PARAM, &u));
    lse_assert_ok(lse_graph_add_node(g, "trans", K, K, LSE_NODE_PARAM, &v));
    gsl_matrix_set_identity(lse_node_value(eye));
    gsl_vector *lp0 = gsl_vector_alloc(K);
    gsl_matrix *lT = gsl_matrix_alloc(K, K);
    fill_chain(lse_node_value(s), lp0, lT);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(s);
    spec.parent = lse_view_all(eye);
    spec.sim = lse_sim_dot;
    spec.reduce = LSE_REDUCE_CHAIN;
    spec.chain_init = u;
    spec.chain_trans = v;
    lse_assert_ok(lse_graph_add_lse(g, "hmm", &spec, NULL));
    lse_solver *sv = lse_solver_new(g, lse_solver_em);
    hook_count c = {0, 0};
    lse_solver_set_mstep_hook(sv, count_hook, &c);
    lse_assert_ok(lse_solver_init(sv));
    lse_assert_ok(lse_solver_iterate(sv));
    lse_assert_ok(lse_solver_iterate(sv));
    ck_assert_uint_eq(c.calls, 2);
    ck_assert_int_eq(c.bad, 0);
    /* the hook's error stops the iteration */
    lse_assert_status(lse_solver_iterate(sv), LSE_ENUMERIC);
    ck_assert_uint_eq(lse_solver_n_iter(sv), 2);
    lse_solver_free(sv);
    lse_graph_free(g);
    gsl_vector_free(lp0);
    gsl_matrix_free(lT);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("chain_path");
    TCase *tc = tcase_create("chain_path");
    tcase_add_test(tc, test_viterbi_equals_brute_force);
    tcase_add_test(tc, test_viterbi_errors);
    tcase_add_test(tc, test_stationary_irreducible_and_periodic);
    tcase_add_test(tc, test_stationary_reducible);
    tcase_add_test(tc, test_stationary_nearly_decomposable);
    tcase_add_test(tc, test_stationary_errors);
    tcase_add_test(tc, test_mstep_hook_after_chain);
    suite_add_tcase(s, tc);
    return s;
}
