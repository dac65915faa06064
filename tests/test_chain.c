#include <float.h>
#include <math.h>
#include <string.h>

#include "lse_check.h"

/* Chain reduction: scaled forward-backward (Rabiner) against a brute-force sum
 * over all K^n paths. Emissions come from a dot similarity between
 * observations y (n, 2) and parents m (K, 2). */

enum { N = 6, K = 3 };

static lse_graph *chain_graph(const size_t *starts, size_t n_starts,
                              lse_term **t)
{
    lse_graph *g = lse_graph_new();
    lse_node *y, *m, *u, *v;
    lse_assert_ok(lse_graph_add_node(g, "y", N, 2, 0, &y));
    lse_assert_ok(lse_graph_add_node(g, "m", K, 2, LSE_NODE_PARAM, &m));
    lse_assert_ok(lse_graph_add_node(g, "init", 1, K, LSE_NODE_PARAM, &u));
    lse_assert_ok(lse_graph_add_node(g, "trans", K, K, LSE_NODE_PARAM, &v));
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(y), i, j, sin(0.4127 + 1.3 * i + 2.1 * j));
    for (size_t k = 0; k < K; k++) {
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(m), k, j, cos(0.9 * k + 1.7 * j));
        gsl_matrix_set(lse_node_value(u), 0, k, 0.3 * (double)k - 0.2);
        for (size_t j = 0; j < K; j++)
            gsl_matrix_set(lse_node_value(v), k, j, k == j ? 1.1 : 0.2 * sin(1.0 + k + 2.0 * j));
    }
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(y);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_dot;
    spec.reduce = LSE_REDUCE_CHAIN;
    spec.chain_init = u;
    spec.chain_trans = v;
    spec.chain_starts = starts;
    spec.n_chain_starts = n_starts;
    lse_assert_ok(lse_graph_add_lse(g, "hmm", &spec, t));
    return g;
}

/* log p(y) by enumerating every path of rows [s0, s1). */
static double brute(lse_graph *g, const gsl_matrix *S, size_t s0, size_t s1)
{
    const gsl_matrix *u = lse_node_value(lse_graph_find_node(g, "init"));
    const gsl_matrix *v = lse_node_value(lse_graph_find_node(g, "trans"));
    const double lz0 = lse_logsumexp(gsl_matrix_const_ptr(u, 0, 0), K, 1, 1.0);
    double lzr[K];
    for (size_t j = 0; j < K; j++)
        lzr[j] = lse_logsumexp(gsl_matrix_const_ptr(v, j, 0), K, 1, 1.0);
    const size_t len = s1 - s0;
    size_t total = 1;
    for (size_t i = 0; i < len; i++)
        total *= K;
    double acc = -INFINITY;
    for (size_t code = 0; code < total; code++) {
        size_t c = code, prev = 0;
        double lp = 0.0;
        for (size_t i = 0; i < len; i++) {
            const size_t k = c % K;
            c /= K;
            lp += gsl_matrix_get(S, s0 + i, k);
            lp += i == 0 ? gsl_matrix_get(u, 0, k) - lz0
                         : gsl_matrix_get(v, prev, k) - lzr[prev];
            prev = k;
        }
        const double mx = acc > lp ? acc : lp;
        acc = mx + log(exp(acc - mx) + exp(lp - mx));
    }
    return acc;
}

START_TEST(test_forward_backward_equals_brute_force)
{
    lse_term *t;
    lse_graph *g = chain_graph(NULL, 0, &t);
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *S = lse_term_similarity(t);
    ck_assert_double_eq_tol(e, -brute(g, S, 0, N), 1e-12);
    /* posteriors are the gradient: rows sum to 1 */
    const gsl_matrix *A = lse_term_softmax(t);
    for (size_t i = 0; i < N; i++) {
        double s = 0;
        for (size_t k = 0; k < K; k++)
            s += gsl_matrix_get(A, i, k);
        ck_assert_double_eq_tol(s, 1.0, 1e-12);
    }
    /* expected transition counts sum to n - 1 */
    const gsl_matrix *xi = lse_term_chain_xi(t);
    double sx = 0;
    for (size_t j = 0; j < K; j++)
        for (size_t k = 0; k < K; k++)
            sx += gsl_matrix_get(xi, j, k);
    ck_assert_double_eq_tol(sx, N - 1, 1e-12);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_sequences_are_independent)
{
    const size_t starts[] = {0, 2, 4};
    lse_term *t;
    lse_graph *g = chain_graph(starts, 3, &t);
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *S = lse_term_similarity(t);
    const double ll = brute(g, S, 0, 2) + brute(g, S, 2, 4) + brute(g, S, 4, 6);
    ck_assert_double_eq_tol(e, -ll, 1e-12);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_chain_errors)
{
    lse_graph *g = lse_graph_new();
    lse_node *y, *m, *u, *v;
    lse_assert_ok(lse_graph_add_node(g, "y", N, 2, 0, &y));
    lse_assert_ok(lse_graph_add_node(g, "m", K, 2, 0, &m));
    lse_assert_ok(lse_graph_add_node(g, "init", 1, K + 1, 0, &u));
    lse_assert_ok(lse_graph_add_node(g, "trans", K, K, 0, &v));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(y);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_dot;
    spec.reduce = LSE_REDUCE_CHAIN;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_EFAULT);
    spec.chain_init = u;
    spec.chain_trans = v;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_EDIM);
    spec.chain_init = v;
    spec.chain_trans = v;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_EDIM);
    lse_node *u2;
    lse_assert_ok(lse_graph_add_node(g, "init2", 1, K, 0, &u2));
    spec.chain_init = u2;
    spec.beta = 2.0;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_EINVAL);
    spec.beta = 1.0;
    const size_t bad[] = {3, 2};
    spec.chain_starts = bad;
    spec.n_chain_starts = 2;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_ERANGE);
    spec.reduce = (lse_reduce)7;
    spec.chain_starts = NULL;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_EINVAL);
    lse_graph_free(g);
}
END_TEST

/* Posteriors are probabilities: every entry in [0, 1] and every row sums to
 * 1 within a few ulps, over a long chain with emissions that make many
 * posteriors nearly certain (the unnormalized alpha * beta products of the
 * scaled recursion drift from 1 by a few ulps per row). */
START_TEST(test_posteriors_are_probabilities)
{
    enum { NL = 4000, KL = 4 };
    lse_graph *g = lse_graph_new();
    lse_node *y, *m, *u, *v;
    lse_assert_ok(lse_graph_add_node(g, "y", NL, 2, LSE_NODE_CLAMPED, &y));
    lse_assert_ok(lse_graph_add_node(g, "m", KL, 2, LSE_NODE_PARAM, &m));
    lse_assert_ok(lse_graph_add_node(g, "init", 1, KL, LSE_NODE_PARAM, &u));
    lse_assert_ok(lse_graph_add_node(g, "trans", KL, KL, LSE_NODE_PARAM, &v));
    for (size_t i = 0; i < NL; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(y), i, j,
                           3.0 * sin(0.4127 + 0.37 * (double)i * (double)(j + 1)) +
                               0.1 * cos(7.3 * (double)i));
    for (size_t k = 0; k < KL; k++) {
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(m), k, j, 2.0 * cos(0.9 * k + 1.7 * j));
        gsl_matrix_set(lse_node_value(u), 0, k, 0.3 * (double)k - 0.2);
        for (size_t j = 0; j < KL; j++)
            gsl_matrix_set(lse_node_value(v), k, j,
                           k == j ? 2.0 : 0.5 * sin(1.0 + k + 2.0 * j));
    }
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(y);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_dot;
    spec.reduce = LSE_REDUCE_CHAIN;
    spec.chain_init = u;
    spec.chain_trans = v;
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "hmm", &spec, &t));
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *A = lse_term_softmax(t);
    double worst = 0.0;
    for (size_t i = 0; i < NL; i++) {
        double s = 0.0;
        for (size_t k = 0; k < KL; k++) {
            const double a = gsl_matrix_get(A, i, k);
            ck_assert_msg(a >= 0.0 && a <= 1.0, "posterior[%zu,%zu] = %.17g",
                          i, k, a);
            s += a;
        }
        if (fabs(s - 1.0) > worst)
            worst = fabs(s - 1.0);
    }
    ck_assert_msg(worst <= 4 * DBL_EPSILON, "row sum off by %g", worst);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("chain");
    TCase *tc = tcase_create("chain");
    tcase_add_test(tc, test_forward_backward_equals_brute_force);
    tcase_add_test(tc, test_sequences_are_independent);
    tcase_add_test(tc, test_chain_errors);
    tcase_add_test(tc, test_posteriors_are_probabilities);
    suite_add_tcase(s, tc);
    return s;
}
