#include <math.h>
#include <string.h>

#include "lse_check.h"

/* A Hopfield-like graph: state x (1, 3) free, memories m (4, 3) clamped,
 * E = -lse(x . m) + 1/2 ||x||^2 (bounded below). */
static lse_graph *hop_graph(lse_node **x)
{
    lse_graph *g = lse_graph_new();
    lse_node *m;
    lse_assert_ok(lse_graph_add_node(g, "x", 1, 3, 0, x));
    lse_assert_ok(lse_graph_add_node(g, "m", 4, 3, LSE_NODE_CLAMPED, &m));
    for (size_t k = 0; k < 4; k++)
        for (size_t j = 0; j < 3; j++)
            gsl_matrix_set(lse_node_value(m), k, j, 1.5 * cos(0.9 * k + 1.7 * j));
    gsl_matrix_set(lse_node_value(*x), 0, 0, 0.4127);
    gsl_matrix_set(lse_node_value(*x), 0, 1, -0.2385);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(*x);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_dot;
    lse_assert_ok(lse_graph_add_lse(g, "attract", &spec, NULL));
    const lse_view v[] = {lse_view_all(*x)};
    lse_assert_ok(lse_graph_add_custom(g, "bound", lse_custom_quadratic, NULL, v, 1, NULL));
    return g;
}

static double last_energy;
static size_t n_calls, n_rises;
static int watch(const lse_solver *s, void *user)
{
    (void)user;
    const double e = lse_solver_energy(s);
    if (n_calls > 0 && e > last_energy)
        n_rises++;
    last_energy = e;
    n_calls++;
    return 0;
}

START_TEST(test_gd_line_search)
{
    lse_node *x;
    lse_graph *g = hop_graph(&x);
    lse_solver *s = lse_solver_new(g, lse_solver_gd);
    ck_assert_ptr_nonnull(s);
    lse_solver_opts o = lse_solver_opts_default();
    o.tol_energy = 0.0;
    o.tol_grad = 1e-9;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    n_calls = n_rises = 0;
    lse_solver_result r;
    lse_assert_ok(lse_solver_run(s, 20000, watch, NULL, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert(r.reason == LSE_STOP_GRAD || r.reason == LSE_STOP_NO_STEP ||
              r.reason == LSE_STOP_ENERGY);
    ck_assert_uint_eq(n_rises, 0);
    ck_assert_uint_gt(n_calls, 1);
    /* stationary point: x = M' softmax(M x) (the CCCP fixed point) */
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    for (size_t j = 0; j < 3; j++)
        ck_assert_double_le(fabs(gsl_matrix_get(lse_node_grad(x), 0, j)), 1e-6);
    ck_assert_double_eq_tol(r.energy, e, 1e-12);
    ck_assert_str_eq(lse_solver_type_name(lse_solver_gd), "gd");
    lse_solver_free(s);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_gd_fixed_step_and_selection)
{
    lse_node *x;
    lse_graph *g = hop_graph(&x);
    lse_solver *s = lse_solver_new(g, lse_solver_gd);
    lse_solver_opts o = lse_solver_opts_default();
    o.line_search = 0;
    o.step = 0.3;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    lse_node *sel[] = {x};
    lse_assert_ok(lse_solver_set_nodes(s, sel, 1));
    lse_solver_result r;
    lse_assert_ok(lse_solver_run(s, 20000, NULL, NULL, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_int_eq(r.reason, LSE_STOP_ENERGY);
    /* the clamped memories never move */
    ck_assert_double_eq(gsl_matrix_get(lse_node_value(lse_graph_find_node(g, "m")), 0, 0), 1.5);
    /* errors */
    lse_solver_opts bad = o;
    bad.shrink = 1.5;
    lse_assert_status(lse_solver_set_opts(s, &bad), LSE_EDOM);
    bad = o;
    bad.step = -1;
    lse_assert_status(lse_solver_set_opts(s, &bad), LSE_EDOM);
    lse_graph *other = lse_graph_new();
    lse_node *z;
    lse_assert_ok(lse_graph_add_node(other, "z", 1, 1, 0, &z));
    lse_node *wrong[] = {z};
    lse_assert_status(lse_solver_set_nodes(s, wrong, 1), LSE_EINVAL);
    lse_solver_free(s);
    s = lse_solver_new(g, lse_solver_gd);
    lse_assert_status(lse_solver_iterate(s), LSE_EINVAL); /* before init */
    ck_assert_int_eq(lse_solver_test(s), LSE_CONTINUE);
    lse_solver_free(s);
    lse_solver_free(NULL);
    lse_graph_free(other);
    lse_graph_free(g);
}
END_TEST

/* Hidden Markov chain with fixed emissions: EM updates the chain logits in
 * closed form. */
static lse_graph *hmm_graph(void)
{
    enum { N = 40, K = 2 };
    lse_graph *g = lse_graph_new();
    lse_node *y, *m, *u, *v;
    lse_assert_ok(lse_graph_add_node(g, "y", N, 1, LSE_NODE_CLAMPED, &y));
    lse_assert_ok(lse_graph_add_node(g, "m", K, 1, LSE_NODE_CLAMPED, &m));
    lse_assert_ok(lse_graph_add_node(g, "init", 1, K, LSE_NODE_PARAM, &u));
    lse_assert_ok(lse_graph_add_node(g, "trans", K, K, LSE_NODE_PARAM, &v));
    for (size_t i = 0; i < N; i++) /* regimes of length ~7 */
        gsl_matrix_set(lse_node_value(y), i, 0,
                       ((i / 7) % 2 ? 1.0 : -1.0) + 0.8 * sin(3.1 * i));
    gsl_matrix_set(lse_node_value(m), 0, 0, -1.2);
    gsl_matrix_set(lse_node_value(m), 1, 0, 1.2);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(y);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_dot;
    spec.reduce = LSE_REDUCE_CHAIN;
    spec.chain_init = u;
    spec.chain_trans = v;
    lse_assert_ok(lse_graph_add_lse(g, "hmm", &spec, NULL));
    return g;
}

static lse_status doubled(double *buf, size_t n, void *user)
{
    size_t *calls = user;
    (*calls)++;
    for (size_t i = 0; i < n; i++)
        buf[i] *= 2.0; /* two identical processes */
    return LSE_OK;
}

START_TEST(test_em_chain_closed_form)
{
    lse_graph *g = hmm_graph();
    lse_term *t = lse_graph_find_term(g, "hmm");
    lse_solver *s = lse_solver_new(g, lse_solver_em);
    lse_assert_ok(lse_solver_init(s));
    lse_assert_ok(lse_solver_iterate(s));
    /* defining property of the M-step: trans = xi / row sums of the E-step */
    double e;
    lse_graph *g0 = hmm_graph();
    lse_assert_ok(lse_graph_energy(g0, &e));
    const gsl_matrix *xi = lse_term_chain_xi(lse_graph_find_term(g0, "hmm"));
    const gsl_matrix *V = lse_node_value(lse_graph_find_node(g, "trans"));
    for (size_t j = 0; j < 2; j++) {
        const double row = gsl_matrix_get(xi, j, 0) + gsl_matrix_get(xi, j, 1);
        for (size_t k = 0; k < 2; k++)
            ck_assert_double_eq_tol(exp(gsl_matrix_get(V, j, k)),
                                    gsl_matrix_get(xi, j, k) / row, 1e-12);
    }
    ck_assert_double_eq_tol(lse_solver_energy(s), e, 1e-12);
    lse_graph_free(g0);
    /* run to convergence: energy monotone, gradient of the logits -> 0 */
    lse_solver_opts o = lse_solver_opts_default();
    o.tol_energy = 1e-13;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    n_calls = n_rises = 0;
    lse_solver_result r;
    lse_assert_ok(lse_solver_run(s, 2000, watch, NULL, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_uint_eq(n_rises, 0);
    ck_assert_uint_eq(lse_solver_n_increase(s), 0);
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *gv = lse_node_grad(lse_graph_find_node(g, "trans"));
    for (size_t j = 0; j < 2; j++)
        for (size_t k = 0; k < 2; k++)
            ck_assert_double_le(fabs(gsl_matrix_get(gv, j, k)), 1e-5);
    ck_assert_ptr_nonnull(lse_term_softmax(t));
    lse_solver_free(s);

    /* the reduction hook: two identical "processes" give the same fit */
    lse_graph *g2 = hmm_graph();
    lse_solver *s2 = lse_solver_new(g2, lse_solver_em);
    size_t calls = 0;
    lse_solver_set_reduce(s2, doubled, &calls);
    lse_assert_ok(lse_solver_set_opts(s2, &o));
    lse_assert_ok(lse_solver_run(s2, 2000, NULL, NULL, &r));
    ck_assert_uint_gt(calls, 1);
    ck_assert_double_eq_tol(r.energy, 2 * e, 1e-9);
    const gsl_matrix *V2 = lse_node_value(lse_graph_find_node(g2, "trans"));
    for (size_t j = 0; j < 2; j++)
        for (size_t k = 0; k < 2; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(V2, j, k), gsl_matrix_get(V, j, k), 1e-8);
    lse_solver_free(s2);
    lse_graph_free(g2);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_em_state_gradient_steps)
{
    /* EM with no closed form: the free state takes gradient steps */
    lse_node *x;
    lse_graph *g = hop_graph(&x);
    lse_solver *s = lse_solver_new(g, lse_solver_em);
    lse_solver_opts o = lse_solver_opts_default();
    o.tol_energy = 1e-12;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    n_calls = n_rises = 0;
    lse_solver_result r;
    lse_assert_ok(lse_solver_run(s, 20000, watch, NULL, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_uint_eq(n_rises, 0);
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    for (size_t j = 0; j < 3; j++)
        ck_assert_double_le(fabs(gsl_matrix_get(lse_node_grad(x), 0, j)), 1e-5);
    lse_solver_free(s);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("solver");
    TCase *tc = tcase_create("solver");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_gd_line_search);
    tcase_add_test(tc, test_gd_fixed_step_and_selection);
    tcase_add_test(tc, test_em_chain_closed_form);
    tcase_add_test(tc, test_em_state_gradient_steps);
    suite_add_tcase(s, tc);
    return s;
}
