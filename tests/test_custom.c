#include <math.h>
#include <string.h>

#include "lse_check.h"

static void fill(gsl_matrix *m, double seed)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, sin(seed + 1.37 * (double)i + 0.71 * (double)j));
}

START_TEST(test_quadratic)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *c;
    lse_assert_ok(lse_graph_add_node(g, "x", 3, 2, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "c", 1, 2, 0, &c));
    fill(lse_node_value(x), 0.4127);
    fill(lse_node_value(c), 2.385);
    const lse_quadratic_config cfg = {.scale = 1.7};
    const lse_view v[] = {lse_view_all(x), lse_view_all(c)};
    lse_term *t;
    lse_assert_ok(lse_graph_add_custom(g, "q", lse_custom_quadratic, &cfg, v, 2, &t));
    double e, hand = 0;
    lse_assert_ok(lse_graph_gradient(g, &e));
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++) {
            const double r = gsl_matrix_get(lse_node_value(x), i, j) -
                             gsl_matrix_get(lse_node_value(c), 0, j);
            hand += 0.5 * 1.7 * r * r;
            ck_assert_double_eq_tol(gsl_matrix_get(lse_node_grad(x), i, j), 1.7 * r, 1e-14);
        }
    ck_assert_double_eq_tol(e, hand, 1e-14);
    ck_assert_double_eq_tol(lse_term_energy(t), hand, 1e-14);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-8, "%g at %s", res.max_error, res.where);
    char label[64];
    lse_term_describe(t, label, sizeof label);
    ck_assert_str_eq(label, "quadratic(scale=1.7)");
    ck_assert_uint_eq(lse_term_n_views(t), 2);
    ck_assert_ptr_eq(lse_term_view(t, 1).node, c);
    ck_assert_int_eq(lse_term_kind_of(t), LSE_TERM_CUSTOM);
    ck_assert_ptr_eq(lse_term_custom(t), lse_custom_quadratic);
    /* errors */
    const lse_quadratic_config neg = {.scale = -1.0};
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_quadratic, &neg, v, 1, NULL), LSE_EDOM);
    lse_node *w;
    lse_assert_ok(lse_graph_add_node(g, "w", 2, 2, 0, &w));
    const lse_view bad[] = {lse_view_all(x), lse_view_all(w)};
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_quadratic, NULL, bad, 2, NULL), LSE_EDIM);
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_quadratic, NULL, v, 0, NULL), LSE_EFAULT);
    lse_assert_status(lse_graph_add_custom(g, "b", NULL, NULL, v, 1, NULL), LSE_EFAULT);
    const lse_view oob[] = {lse_view_rows(x, 2, 2)};
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_quadratic, NULL, oob, 1, NULL), LSE_ERANGE);
    lse_graph_free(g);
}
END_TEST

/* dE/dx of the LayerNorm energy is the LayerNorm output. */
START_TEST(test_layernorm_energy)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *gam, *del;
    lse_assert_ok(lse_graph_add_node(g, "x", 4, 5, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "gamma", 1, 1, LSE_NODE_PARAM, &gam));
    lse_assert_ok(lse_graph_add_node(g, "delta", 1, 5, LSE_NODE_PARAM, &del));
    fill(lse_node_value(x), 0.4127);
    gsl_matrix_set(lse_node_value(gam), 0, 0, 1.3);
    fill(lse_node_value(del), 2.385);
    const lse_layernorm_config cfg = {.eps = 1e-3};
    const lse_view v[] = {lse_view_all(x), lse_view_all(gam), lse_view_all(del)};
    lse_assert_ok(lse_graph_add_custom(g, "ln", lse_custom_layernorm, &cfg, v, 3, NULL));
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *X = lse_node_value(x);
    for (size_t i = 0; i < 4; i++) {
        double mean = 0, var = 0;
        for (size_t j = 0; j < 5; j++)
            mean += gsl_matrix_get(X, i, j) / 5.0;
        for (size_t j = 0; j < 5; j++)
            var += pow(gsl_matrix_get(X, i, j) - mean, 2) / 5.0;
        for (size_t j = 0; j < 5; j++) {
            const double ln = 1.3 * (gsl_matrix_get(X, i, j) - mean) / sqrt(var + 1e-3) +
                              gsl_matrix_get(lse_node_value(del), 0, j);
            ck_assert_double_eq_tol(gsl_matrix_get(lse_node_grad(x), i, j), ln, 1e-13);
        }
    }
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    /* per-dimension gamma has no energy: refused */
    lse_node *g5;
    lse_assert_ok(lse_graph_add_node(g, "g5", 1, 5, 0, &g5));
    const lse_view bad[] = {lse_view_all(x), lse_view_all(g5), lse_view_all(del)};
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_layernorm, NULL, bad, 3, NULL), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "no exact energy"));
    const lse_layernorm_config zero = {.eps = 0.0};
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_layernorm, &zero, v, 3, NULL), LSE_EDOM);
    lse_assert_status(lse_graph_add_custom(g, "b", lse_custom_layernorm, NULL, v, 2, NULL), LSE_EINVAL);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("custom");
    TCase *tc = tcase_create("custom");
    tcase_add_test(tc, test_quadratic);
    tcase_add_test(tc, test_layernorm_energy);
    suite_add_tcase(s, tc);
    return s;
}
