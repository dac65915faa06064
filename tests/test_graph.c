#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lse_check.h"
#include "../lib/size-private.h" /* private: tested here */

static void fill(gsl_matrix *m, double seed)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, sin(seed + 1.37 * (double)i + 0.71 * (double)j));
}

START_TEST(test_nodes)
{
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_node *x, *p;
    lse_assert_ok(lse_graph_add_node(g, "x", 4, 3, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "p", 2, 3, LSE_NODE_PARAM, &p));
    ck_assert_str_eq(lse_node_name(x), "x");
    ck_assert_uint_eq(lse_node_rows(x), 4);
    ck_assert_uint_eq(lse_node_dim(x), 3);
    ck_assert(lse_node_is_clamped(x) && !lse_node_is_param(x));
    ck_assert(lse_node_is_param(p) && !lse_node_is_clamped(p));
    ck_assert_ptr_eq(lse_graph_find_node(g, "p"), p);
    ck_assert_ptr_null(lse_graph_find_node(g, "nope"));
    ck_assert_uint_eq(lse_graph_n_nodes(g), 2);
    ck_assert_ptr_eq(lse_graph_node(g, 1), p);
    ck_assert_ptr_null(lse_graph_node(g, 2));
    ck_assert_ptr_eq(lse_node_graph(x), g);
    ck_assert_double_eq(gsl_matrix_get(lse_node_value(x), 3, 2), 0.0);
    lse_node_set_clamped(p, 1);
    ck_assert(lse_node_is_clamped(p) && lse_node_is_param(p));
    lse_node_set_clamped(p, 0);
    ck_assert(!lse_node_is_clamped(p));

    lse_node *out = (lse_node *)1;
    lse_assert_status(lse_graph_add_node(g, "x", 1, 1, 0, &out), LSE_EEXIST);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "'x' exists"));
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "lse_graph_add_node"));
    lse_assert_status(lse_graph_add_node(g, "z", 0, 1, 0, NULL), LSE_EINVAL);
    lse_assert_status(lse_graph_add_node(g, "z", 1, 0, 0, NULL), LSE_EINVAL);
    lse_assert_status(lse_graph_add_node(g, "", 1, 1, 0, NULL), LSE_EINVAL);
    lse_assert_status(lse_graph_add_node(g, NULL, 1, 1, 0, NULL), LSE_EFAULT);
    lse_assert_status(lse_graph_add_node(g, "z", 1, 1, 0x80, NULL), LSE_EINVAL);
    lse_assert_status(lse_graph_add_node(NULL, "z", 1, 1, 0, NULL), LSE_EFAULT);

    gsl_matrix *v = gsl_matrix_alloc(4, 3);
    fill(v, 0.3);
    lse_assert_ok(lse_node_set_value(x, v));
    ck_assert_double_eq(gsl_matrix_get(lse_node_value(x), 2, 1),
                        gsl_matrix_get(v, 2, 1));
    gsl_matrix *w = gsl_matrix_alloc(3, 4);
    lse_assert_status(lse_node_set_value(x, w), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "is 4x3, value is 3x4"));
    gsl_matrix_set(v, 1, 1, NAN);
    lse_assert_status(lse_node_set_value(x, v), LSE_ENONFINITE);
    lse_assert_status(lse_node_set_value(x, NULL), LSE_EFAULT);
    gsl_matrix_free(v);
    gsl_matrix_free(w);
    lse_graph_free(g);
    lse_graph_free(NULL);
}
END_TEST

/* Sizes whose byte count overflows size_t: gsl_matrix_calloc(n, dim)
 * multiplies without checking, so these once "succeeded" with a tiny
 * block (and the first write crashed). Now LSE_ENOMEM with a message, and
 * the graph is unchanged and usable. */
START_TEST(test_node_size_overflow)
{
    lse_graph *g = lse_graph_new();
    const size_t cases[][2] = {{SIZE_MAX / 8 + 2, 1},
                               {SIZE_MAX / 16 + 1, 2},
                               {(size_t)1 << 32, (size_t)1 << 32},
                               {3, SIZE_MAX / 3 + 1},
                               {SIZE_MAX, SIZE_MAX}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lse_node *a = (lse_node *)1;
        lse_assert_status(
            lse_graph_add_node(g, "a", cases[i][0], cases[i][1], 0, &a),
            LSE_ENOMEM);
        ck_assert_ptr_null(a);
        ck_assert_msg(strstr(lse_graph_errmsg(g), "exceed the address space") !=
                          NULL,
                      "%s", lse_graph_errmsg(g));
        ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "node 'a'"));
        ck_assert_uint_eq(lse_graph_n_nodes(g), 0);
    }
    lse_node *a;
    lse_assert_ok(lse_graph_add_node(g, "a", 3, 2, 0, &a));
    ck_assert_uint_eq(lse_graph_n_nodes(g), 1);
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    lse_graph_free(g);
}
END_TEST

/* The overflow-checked size arithmetic every allocation goes through. */
START_TEST(test_size_arithmetic)
{
    size_t n = 7;
    ck_assert_int_eq(lse_size_mul(SIZE_MAX, 1, &n), 0);
    ck_assert_uint_eq(n, SIZE_MAX);
    ck_assert_int_eq(lse_size_mul(0, SIZE_MAX, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(lse_size_mul(SIZE_MAX / 2 + 1, 2, &n), 1);
    ck_assert_uint_eq(n, SIZE_MAX);
    ck_assert_int_eq(lse_size_mul((size_t)1 << 32, (size_t)1 << 31, &n), 0);
    ck_assert_int_eq(lse_size_add(SIZE_MAX - 1, 1, &n), 0);
    ck_assert_uint_eq(n, SIZE_MAX);
    ck_assert_int_eq(lse_size_add(SIZE_MAX, 1, &n), 1);
    ck_assert_int_eq(lse_size_matrix_overflows(SIZE_MAX / 8, 1), 0);
    ck_assert_int_eq(lse_size_matrix_overflows(SIZE_MAX / 8 + 1, 1), 1);
    ck_assert_int_eq(lse_size_matrix_overflows(1, SIZE_MAX / 8 + 1), 1);
    /* shapes: every product of up to three extents is checked */
    ck_assert_ptr_null(lse_size_shape_overflow(1000, 256, 1000, 64, 1));
    ck_assert_str_eq(
        lse_size_shape_overflow((size_t)1 << 31, 256, (size_t)1 << 31, 1, 1),
        "child rows x parent rows");
    ck_assert_ptr_null(
        lse_size_shape_overflow((size_t)1 << 31, 1, (size_t)1 << 31, 1, 0));
    ck_assert_str_eq(lse_size_shape_overflow(8, 8, (size_t)1 << 40,
                                             (size_t)1 << 20, 0),
                     "block x parent rows x dimension");
    ck_assert_str_eq(
        lse_size_shape_overflow(1, 1, 1, (size_t)1 << 31, 1),
        "rows x dimension^2");
    ck_assert_str_eq(lse_size_shape_overflow(1, 1, 1, SIZE_MAX, 1),
                     "dimension + 1");
}
END_TEST

/* Equation 4 of Tschantz on a self term: the gradient of a row is the sum
 * of its child side and its parent side. */
START_TEST(test_self_attention_gradient)
{
    lse_graph *g = lse_graph_new();
    lse_node *x;
    lse_assert_ok(lse_graph_add_node(g, "x", 5, 3, 0, &x));
    fill(lse_node_value(x), 0.4127);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(x);
    spec.sim = lse_sim_dot;
    spec.beta = 1.3;
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "self", &spec, &t));
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    /* by hand */
    const gsl_matrix *X = lse_node_value(x);
    const gsl_matrix *A = lse_term_softmax(t);
    double ehand = 0.0;
    for (size_t c = 0; c < 5; c++) {
        double s[5];
        for (size_t p = 0; p < 5; p++) {
            gsl_vector_const_view xc = gsl_matrix_const_row(X, c);
            gsl_vector_const_view xp = gsl_matrix_const_row(X, p);
            double d = 0;
            for (size_t j = 0; j < 3; j++)
                d += gsl_vector_get(&xc.vector, j) * gsl_vector_get(&xp.vector, j);
            s[p] = d;
        }
        ehand -= lse_logsumexp(s, 5, 1, 1.3);
    }
    ck_assert_double_eq_tol(e, ehand, 1e-12);
    for (size_t a = 0; a < 5; a++)
        for (size_t j = 0; j < 3; j++) {
            double gsum = 0.0;
            for (size_t p = 0; p < 5; p++) /* child side */
                gsum -= gsl_matrix_get(A, a, p) * gsl_matrix_get(X, p, j);
            for (size_t c = 0; c < 5; c++) /* parent side */
                gsum -= gsl_matrix_get(A, c, a) * gsl_matrix_get(X, c, j);
            ck_assert_double_eq_tol(gsl_matrix_get(lse_node_grad(x), a, j), gsum,
                                    1e-12);
        }
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "max error %g at %s", res.max_error,
                  res.where);
    ck_assert_uint_eq(res.n_checked, 15);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_energy_errors)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *m;
    lse_assert_ok(lse_graph_add_node(g, "x", 3, 2, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "m", 2, 2, 0, &m));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_dot;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, NULL));
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    ck_assert_double_eq_tol(e, -3 * log(2.0), 1e-15); /* all zero values */
    gsl_matrix_set(lse_node_value(m), 1, 0, NAN);
    lse_assert_status(lse_graph_energy(g, &e), LSE_ENONFINITE);
    ck_assert(isnan(e));
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "node 'm'"));
    gsl_matrix_set(lse_node_value(m), 1, 0, 1e300);
    gsl_matrix_set(lse_node_value(x), 0, 0, 1e300);
    lse_assert_status(lse_graph_energy(g, &e), LSE_ENONFINITE);
    lse_assert_status(lse_graph_energy(NULL, &e), LSE_EFAULT);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_add_test(tc, test_nodes);
    tcase_add_test(tc, test_node_size_overflow);
    tcase_add_test(tc, test_size_arithmetic);
    tcase_add_test(tc, test_self_attention_gradient);
    tcase_add_test(tc, test_energy_errors);
    suite_add_tcase(s, tc);
    return s;
}
