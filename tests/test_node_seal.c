/* lse_node_seal: a sealed clamped node is not scanned at every evaluation,
 * so every way of writing it must either keep it finite or break the seal
 * (lib/graph.c check_values). */
#include <math.h>
#include <string.h>

#include "lse_check.h"

typedef struct seal_graph {
    lse_graph *g;
    lse_node *x, *m;
} seal_graph;

static void fill(gsl_matrix *v, double seed)
{
    for (size_t i = 0; i < v->size1; i++)
        for (size_t j = 0; j < v->size2; j++)
            gsl_matrix_set(v, i, j, sin(seed + 1.37 * (double)i + 0.71 * (double)j));
}

/* x (rows, 3) clamped data, m (4, 3) free, one dot-product LSE term. */
static seal_graph make(size_t rows)
{
    seal_graph s;
    s.g = lse_graph_new();
    ck_assert_ptr_nonnull(s.g);
    lse_assert_ok(lse_graph_add_node(s.g, "x", rows, 3, LSE_NODE_CLAMPED, &s.x));
    lse_assert_ok(lse_graph_add_node(s.g, "m", 4, 3, 0, &s.m));
    gsl_matrix *v = gsl_matrix_alloc(rows, 3);
    fill(v, 0.3);
    lse_assert_ok(lse_node_set_value(s.x, v));
    gsl_matrix_free(v);
    fill(lse_node_value(s.m), 1.1);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(s.x);
    spec.parent = lse_view_all(s.m);
    spec.sim = lse_sim_dot;
    lse_assert_ok(lse_graph_add_lse(s.g, "t", &spec, NULL));
    return s;
}

/* The evaluation fails and names the node x (the check of the values,
 * not the later check of the scores). */
static void assert_x_rejected(lse_graph *g)
{
    double e;
    lse_assert_status(lse_graph_energy(g, &e), LSE_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "node 'x'"));
}

START_TEST(test_seal_rules)
{
    /* two sizes: one check span and a node checked in parallel tasks */
    const size_t rows[2] = {7, 70000};
    for (int c = 0; c < 2; c++) {
        seal_graph s = make(rows[c]);
        lse_assert_status(lse_node_seal(NULL), LSE_EFAULT);
        lse_assert_status(lse_node_seal(s.m), LSE_EINVAL); /* free */
        gsl_matrix_set(lse_node_value(s.x), rows[c] - 1, 2, NAN);
        lse_assert_status(lse_node_seal(s.x), LSE_ENONFINITE);
        assert_x_rejected(s.g); /* not sealed: still checked */
        gsl_matrix_set(lse_node_value(s.x), rows[c] - 1, 2, INFINITY);
        lse_assert_status(lse_node_seal(s.x), LSE_ENONFINITE);
        assert_x_rejected(s.g);
        gsl_matrix_set(lse_node_value(s.x), rows[c] - 1, 2, 0.5);
        lse_assert_ok(lse_node_seal(s.x));
        double e;
        lse_assert_ok(lse_graph_energy(s.g, &e));
        lse_graph_free(s.g);
    }
}
END_TEST

/* Every API that writes a node's values keeps a sealed node checked. */
START_TEST(test_seal_writes)
{
    seal_graph s = make(9), ref = make(9);
    gsl_matrix *held = lse_node_value(s.x); /* taken before the seal */
    lse_assert_ok(lse_node_seal(s.x));
    double e, er;
    lse_assert_ok(lse_graph_energy(s.g, &e));
    lse_assert_ok(lse_graph_energy(ref.g, &er));
    ck_assert(e == er);

    /* lse_node_set_value: non-finite values are refused, the node keeps
     * its values (and its seal); finite ones are used */
    gsl_matrix *v = gsl_matrix_alloc(9, 3);
    fill(v, 2.0);
    gsl_matrix_set(v, 4, 1, NAN);
    lse_assert_status(lse_node_set_value(s.x, v), LSE_ENONFINITE);
    gsl_matrix_set(v, 4, 1, -INFINITY);
    lse_assert_status(lse_node_set_value(s.x, v), LSE_ENONFINITE);
    lse_assert_ok(lse_graph_energy(s.g, &e));
    ck_assert(e == er);
    gsl_matrix_set(v, 4, 1, 0.25);
    lse_assert_ok(lse_node_set_value(s.x, v));
    lse_assert_ok(lse_node_set_value(ref.x, v));
    lse_assert_ok(lse_graph_energy(s.g, &e));
    lse_assert_ok(lse_graph_energy(ref.g, &er));
    ck_assert(e == er);
    gsl_matrix_free(v);

    /* the seal is in force: a write through a pointer taken before it is
     * not scanned (the contract of lse_node_seal); the score check still
     * stops the NaN, under the term's name */
    gsl_matrix_set(held, 2, 0, NAN);
    lse_assert_status(lse_graph_energy(s.g, &e), LSE_ENONFINITE);
    ck_assert_ptr_null(strstr(lse_graph_errmsg(s.g), "node 'x'"));
    gsl_matrix_set(held, 2, 0, 0.0);

    /* lse_node_set_clamped breaks the seal (also re-clamping) */
    lse_node_set_clamped(s.x, 1);
    gsl_matrix_set(held, 2, 0, NAN);
    assert_x_rejected(s.g);
    gsl_matrix_set(held, 2, 0, 0.0);
    lse_assert_ok(lse_node_seal(s.x));
    lse_node_set_clamped(s.x, 0);
    lse_assert_status(lse_node_seal(s.x), LSE_EINVAL);
    gsl_matrix_set(held, 2, 0, INFINITY);
    assert_x_rejected(s.g);
    gsl_matrix_set(held, 2, 0, 0.0);
    lse_node_set_clamped(s.x, 1);

    /* lse_node_value breaks the seal: +INFINITY and NaN must be reported
     * as the node's (an infinite x can give a legal -INFINITY score) */
    lse_assert_ok(lse_node_seal(s.x));
    gsl_matrix_set(lse_node_value(s.x), 8, 2, INFINITY);
    assert_x_rejected(s.g);
    lse_assert_status(lse_node_seal(s.x), LSE_ENONFINITE);
    gsl_matrix_set(held, 8, 2, 1.0);
    lse_assert_ok(lse_node_seal(s.x));
    gsl_matrix_set(lse_node_value(s.x), 0, 1, NAN);
    assert_x_rejected(s.g);
    lse_graph_free(s.g);
    lse_graph_free(ref.g);
}
END_TEST

/* A GMM fit seals its own data node: the fit is that of the data, and a
 * NaN in the data is refused before any evaluation. */
START_TEST(test_gmm_data_refused)
{
    gsl_matrix *x = gsl_matrix_alloc(40, 2);
    fill(x, 0.9);
    gsl_matrix_set(x, 17, 1, NAN);
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, &err));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    ck_assert_int_ne(lse_gmm_fit(m, x, &o, &err), LSE_OK);
    gsl_matrix_set(x, 17, 1, 0.1);
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("node_seal");
    TCase *tc = tcase_create("node_seal");
    tcase_add_test(tc, test_seal_rules);
    tcase_add_test(tc, test_seal_writes);
    tcase_add_test(tc, test_gmm_data_refused);
    suite_add_tcase(s, tc);
    return s;
}
