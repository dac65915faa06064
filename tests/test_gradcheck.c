#include <math.h>
#include <string.h>

#include "lse_check.h"

/* The checker must catch a wrong gradient: a user similarity whose grad is
 * off by a factor 2 on the child side. */
static double bad_eval(const gsl_vector *c, const gsl_vector *p,
                       const gsl_vector *x, const void *params)
{
    (void)x;
    (void)params;
    double s = 0;
    for (size_t j = 0; j < c->size; j++)
        s += gsl_vector_get(c, j) * gsl_vector_get(p, j);
    return s;
}

static void bad_grad(const gsl_vector *c, const gsl_vector *p,
                     const gsl_vector *x, double w, gsl_vector *gc,
                     gsl_vector *gp, gsl_vector *gx, const void *params)
{
    (void)x;
    (void)gx;
    (void)params;
    for (size_t j = 0; j < c->size; j++) {
        if (gc != NULL)
            *gsl_vector_ptr(gc, j) += 2.0 * w * gsl_vector_get(p, j);
        if (gp != NULL)
            *gsl_vector_ptr(gp, j) += w * gsl_vector_get(c, j);
    }
}

static const lse_sim_pair_fns bad_fns = {"bad-dot", bad_eval, bad_grad};

START_TEST(test_registry)
{
    ck_assert_uint_eq(lse_sim_count(), 16);
    for (size_t i = 0; i < lse_sim_count(); i++) {
        const lse_sim_type *t = lse_sim_get(i);
        ck_assert_ptr_nonnull(t);
        ck_assert_ptr_eq(lse_sim_find(t->name), t);
        ck_assert(t->eval != NULL);
        ck_assert(t->grad != NULL);
    }
    ck_assert_ptr_null(lse_sim_get(16));
    ck_assert_ptr_eq(lse_sim_find("sum"), lse_sim_sum);
    ck_assert_ptr_eq(lse_sim_find("project"), lse_sim_project);
    ck_assert_ptr_null(lse_sim_find("nope"));
    ck_assert_ptr_null(lse_sim_find(NULL));
    ck_assert_ptr_eq(lse_sim_find("scaled-dot"), lse_sim_scaled_dot);
    ck_assert_ptr_eq(lse_sim_find("gaussian"), lse_sim_gaussian);
}
END_TEST

START_TEST(test_checker_catches_wrong_gradient)
{
    gsl_matrix *c = gsl_matrix_alloc(3, 2), *p = gsl_matrix_alloc(2, 2);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(c, i, j, sin(0.4127 + i + 2.0 * j));
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(p, i, j, cos(2.385 + i + 3.0 * j));
    const lse_sim_pair_config cfg = {&bad_fns, NULL};
    lse_gradcheck res;
    lse_error err;
    lse_assert_ok(lse_sim_check_gradient(lse_sim_pairwise, &cfg, c, p, NULL, NULL,
                                         1e-6, 1.0, &res, &err));
    ck_assert_double_gt(res.max_error, 0.1);
    ck_assert_ptr_nonnull(strstr(res.where, "child"));
    ck_assert_uint_eq(res.n_checked, 10);
    /* a correct similarity passes */
    lse_assert_ok(lse_sim_check_gradient(lse_sim_dot, NULL, c, p, NULL, NULL,
                                         1e-6, 1.0, &res, &err));
    ck_assert_double_lt(res.max_error, 1e-8);
    /* errors */
    lse_assert_status(lse_sim_check_gradient(NULL, NULL, c, p, NULL, NULL, 1e-6,
                                             1.0, &res, &err), LSE_EFAULT);
    lse_assert_status(lse_sim_check_gradient(lse_sim_dot, NULL, c, p, NULL, NULL,
                                             0.0, 1.0, &res, &err), LSE_EDOM);
    ck_assert_int_eq(err.status, LSE_EDOM);
    gsl_matrix *q = gsl_matrix_alloc(2, 3);
    lse_assert_status(lse_sim_check_gradient(lse_sim_dot, NULL, c, q, NULL, NULL,
                                             1e-6, 1.0, &res, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "dot"));
    gsl_matrix_free(q);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

START_TEST(test_graph_checker_catches_wrong_gradient)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *m;
    lse_assert_ok(lse_graph_add_node(g, "x", 2, 2, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "m", 3, 2, 0, &m));
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(x), i, j, sin(0.4127 + i + 2.0 * j));
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(m), i, j, cos(2.385 + i + 3.0 * j));
    const lse_sim_pair_config cfg = {&bad_fns, NULL};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(m);
    spec.sim = lse_sim_pairwise;
    spec.config = &cfg;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, NULL));
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, m, 1e-6, 1.0, &res));
    ck_assert_double_lt(res.max_error, 1e-7); /* the parent side is right */
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_double_gt(res.max_error, 0.1);
    ck_assert_ptr_nonnull(strstr(res.where, "node 'x'"));
    lse_assert_status(lse_graph_check_gradient(g, NULL, -1.0, 1.0, &res), LSE_EDOM);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("gradcheck");
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_checker_catches_wrong_gradient);
    tcase_add_test(tc, test_graph_checker_catches_wrong_gradient);
    suite_add_tcase(s, tc);
    return s;
}
