#include <math.h>
#include <string.h>

#include "lse_check.h"

static void fill(gsl_matrix *m, double seed)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, 0.9 * sin(seed + 1.37 * (double)i + 0.71 * (double)j));
}

/* A self term on x (n, d) with the given mask and block size. */
static lse_graph *self_graph(size_t n, size_t d, unsigned mask, size_t block,
                             int keep, lse_term **t)
{
    lse_graph *g = lse_graph_new();
    lse_graph_set_block_rows(g, block);
    lse_node *x;
    lse_assert_ok(lse_graph_add_node(g, "x", n, d, 0, &x));
    fill(lse_node_value(x), 0.4127);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(x);
    spec.sim = lse_sim_scaled_dot;
    spec.mask = mask;
    spec.beta = 0.8;
    spec.keep_matrices = keep;
    lse_assert_ok(lse_graph_add_lse(g, "self", &spec, t));
    return g;
}

START_TEST(test_causal_masks)
{
    lse_term *t;
    lse_graph *g = self_graph(4, 3, LSE_MASK_CAUSAL, 0, 1, &t);
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *A = lse_term_softmax(t), *S = lse_term_similarity(t);
    ck_assert_double_eq(gsl_matrix_get(A, 0, 0), 1.0); /* only itself */
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++) {
            ck_assert_int_eq(lse_term_allowed(t, i, j), j <= i);
            if (j > i) {
                ck_assert_double_eq(gsl_matrix_get(A, i, j), 0.0);
                ck_assert(gsl_matrix_get(S, i, j) == -INFINITY);
            }
        }
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    lse_graph_free(g);

    /* strict p < c: row 0 has no parent and contributes nothing */
    g = self_graph(4, 3, LSE_MASK_CAUSAL | LSE_MASK_NO_SELF, 0, 1, &t);
    lse_assert_ok(lse_graph_gradient(g, &e));
    ck_assert(gsl_vector_get(lse_term_row_lse(t), 0) == -INFINITY);
    ck_assert(isfinite(e));
    for (size_t j = 0; j < 4; j++)
        ck_assert_double_eq(gsl_matrix_get(lse_term_softmax(t), 0, j), 0.0);
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    lse_graph_free(g);
}
END_TEST

/* Masks on views of different nodes (docs/core.md, "Masks"): positions are
 * row indices in each view's own node, whatever node it is, so CAUSAL with
 * children x[2..4] and parents y[1..4] allows y row r for x row s when
 * r <= s, and NO_SELF forbids r == s. */
START_TEST(test_masks_views_of_different_nodes)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *y;
    lse_assert_ok(lse_graph_add_node(g, "x", 6, 3, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "y", 5, 3, 0, &y));
    fill(lse_node_value(x), 0.31);
    fill(lse_node_value(y), 2.03);
    const unsigned masks[3] = {LSE_MASK_CAUSAL, LSE_MASK_NO_SELF,
                               LSE_MASK_CAUSAL | LSE_MASK_NO_SELF};
    for (size_t m = 0; m < 3; m++) {
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_rows(x, 2, 3);
        spec.parent = lse_view_rows(y, 1, 4);
        spec.sim = lse_sim_scaled_dot;
        spec.mask = masks[m];
        spec.keep_matrices = 1;
        char name[16];
        snprintf(name, sizeof name, "cross%zu", m);
        lse_term *t;
        lse_assert_ok(lse_graph_add_lse(g, name, &spec, &t));
        double e;
        lse_assert_ok(lse_graph_gradient(g, &e));
        const gsl_matrix *A = lse_term_softmax(t);
        for (size_t i = 0; i < 3; i++) {
            double row = 0.0;
            for (size_t j = 0; j < 4; j++) {
                const size_t s = 2 + i, r = 1 + j;
                const int want = (!(masks[m] & LSE_MASK_CAUSAL) || r <= s) &&
                                 (!(masks[m] & LSE_MASK_NO_SELF) || r != s);
                ck_assert_int_eq(lse_term_allowed(t, i, j), want);
                if (!want)
                    ck_assert_double_eq(gsl_matrix_get(A, i, j), 0.0);
                else
                    ck_assert(gsl_matrix_get(A, i, j) > 0.0);
                row += gsl_matrix_get(A, i, j);
            }
            ck_assert_double_eq_tol(row, 1.0, 1e-12);
        }
    }
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_fully_masked_term_is_zero)
{
    lse_graph *g = lse_graph_new();
    lse_node *x;
    lse_assert_ok(lse_graph_add_node(g, "x", 1, 2, 0, &x));
    fill(lse_node_value(x), 1.1);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(x);
    spec.sim = lse_sim_dot;
    spec.mask = LSE_MASK_NO_SELF;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, NULL));
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    ck_assert_double_eq(e, 0.0);
    ck_assert_double_eq(gsl_matrix_get(lse_node_grad(x), 0, 1), 0.0);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_user_mask_and_weights)
{
    lse_graph *g = lse_graph_new();
    lse_node *q, *k;
    lse_assert_ok(lse_graph_add_node(g, "q", 3, 2, 0, &q));
    lse_assert_ok(lse_graph_add_node(g, "k", 4, 2, 0, &k));
    fill(lse_node_value(q), 0.2);
    fill(lse_node_value(k), 2.9);
    gsl_matrix *mask = gsl_matrix_alloc(3, 4);
    gsl_matrix_set_all(mask, 1.0);
    gsl_matrix_set(mask, 0, 1, 0.0);
    gsl_matrix_set(mask, 2, 3, 0.0);
    gsl_vector *w = gsl_vector_alloc(3);
    gsl_vector_set(w, 0, 0.5);
    gsl_vector_set(w, 1, 2.0);
    gsl_vector_set(w, 2, 1.25);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(q);
    spec.parent = lse_view_all(k);
    spec.sim = lse_sim_dot;
    spec.user_mask = mask;
    spec.row_weight = w;
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, &t));
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    double ehand = 0.0;
    for (size_t i = 0; i < 3; i++) {
        double s[4];
        for (size_t j = 0; j < 4; j++) {
            s[j] = gsl_matrix_get(mask, i, j) == 0.0 ? -INFINITY : 0.0;
            if (s[j] == 0.0)
                for (size_t c = 0; c < 2; c++)
                    s[j] += gsl_matrix_get(lse_node_value(q), i, c) *
                            gsl_matrix_get(lse_node_value(k), j, c);
        }
        ehand -= gsl_vector_get(w, i) * lse_logsumexp(s, 4, 1, 1.0);
    }
    ck_assert_double_eq_tol(e, ehand, 1e-12);
    ck_assert_double_eq(gsl_matrix_get(lse_term_softmax(t), 0, 1), 0.0);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    /* weight errors */
    gsl_vector_set(w, 1, -1.0);
    lse_assert_status(lse_term_set_row_weight(t, w), LSE_EDOM);
    gsl_vector *w2 = gsl_vector_alloc(2);
    lse_assert_status(lse_term_set_row_weight(t, w2), LSE_EDIM);
    lse_assert_ok(lse_term_set_row_weight(t, NULL));
    ck_assert_ptr_null(lse_term_row_weight(t));
    /* switching off */
    lse_term_set_enabled(t, 0);
    ck_assert_int_eq(lse_term_enabled(t), 0);
    lse_assert_ok(lse_graph_energy(g, &e));
    ck_assert_double_eq(e, 0.0);
    lse_term_set_enabled(t, 1);
    gsl_vector_free(w2);
    gsl_vector_free(w);
    gsl_matrix_free(mask);
    lse_graph_free(g);
}
END_TEST

/* Blocks and streaming change nothing but round-off. */
START_TEST(test_blocking_and_streaming)
{
    lse_term *t1, *t2, *t3;
    lse_graph *g1 = self_graph(23, 4, LSE_MASK_CAUSAL, 0, 1, &t1);
    lse_graph *g2 = self_graph(23, 4, LSE_MASK_CAUSAL, 5, 1, &t2);
    lse_graph *g3 = self_graph(23, 4, LSE_MASK_CAUSAL, 7, 0, &t3);
    double e1, e2, e3;
    lse_assert_ok(lse_graph_gradient(g1, &e1));
    lse_assert_ok(lse_graph_gradient(g2, &e2));
    lse_assert_ok(lse_graph_gradient(g3, &e3));
    ck_assert_double_eq_tol(e1, e2, 1e-12);
    ck_assert_double_eq_tol(e1, e3, 1e-12);
    ck_assert_ptr_null(lse_term_softmax(t3));
    ck_assert_ptr_null(lse_term_similarity(t3));
    const gsl_matrix *a = lse_node_grad(lse_graph_find_node(g1, "x"));
    const gsl_matrix *b = lse_node_grad(lse_graph_find_node(g2, "x"));
    const gsl_matrix *c = lse_node_grad(lse_graph_find_node(g3, "x"));
    for (size_t i = 0; i < 23; i++)
        for (size_t j = 0; j < 4; j++) {
            ck_assert_double_eq_tol(gsl_matrix_get(a, i, j), gsl_matrix_get(b, i, j), 1e-12);
            ck_assert_double_eq_tol(gsl_matrix_get(a, i, j), gsl_matrix_get(c, i, j), 1e-12);
        }
    lse_graph_free(g1);
    lse_graph_free(g2);
    lse_graph_free(g3);
}
END_TEST

START_TEST(test_views_and_errors)
{
    lse_graph *g = lse_graph_new();
    lse_graph *other = lse_graph_new();
    lse_node *x, *y, *z;
    lse_assert_ok(lse_graph_add_node(g, "x", 6, 2, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "y", 3, 2, 0, &y));
    lse_assert_ok(lse_graph_add_node(other, "z", 3, 2, 0, &z));
    fill(lse_node_value(x), 0.7);
    fill(lse_node_value(y), 1.9);
    lse_term_spec spec = lse_term_spec_default();
    spec.sim = lse_sim_dot;
    /* SLDS-like views: children x[1..5], parents x[0..4] */
    spec.child = lse_view_rows(x, 1, 5);
    spec.parent = lse_view_rows(x, 0, 5);
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "shift", &spec, &t));
    ck_assert_uint_eq(lse_term_child(t).first, 1);
    ck_assert_uint_eq(lse_term_parent(t).count, 5);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, x, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-7, "%g at %s", res.max_error, res.where);
    char label[64];
    lse_term_describe(t, label, sizeof label);
    ck_assert_str_eq(label, "LSE dot");

    spec.child = lse_view_rows(x, 2, 5); /* rows 2..6 of 6 */
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_ERANGE);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "outside node 'x'"));
    spec.child = lse_view_rows(x, 0, 0);
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_ERANGE);
    spec.child = lse_view_all(z);
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EINVAL);
    spec.child = lse_view_all(NULL);
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EFAULT);
    spec.child = lse_view_all(y);
    spec.context = lse_view_rows(x, 0, 2); /* 2 rows for 3 children */
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_ERANGE);
    spec.context = lse_view_all(NULL);
    spec.beta = -1.0;
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "beta"));
    spec.beta = NAN;
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EDOM);
    spec.beta = 1.0;
    spec.mask = 0x40;
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EINVAL);
    spec.mask = 0;
    gsl_matrix *m = gsl_matrix_alloc(2, 2);
    spec.user_mask = m;
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EDIM);
    spec.user_mask = NULL;
    spec.sim = NULL;
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EFAULT);
    spec.sim = lse_sim_dot;
    lse_assert_status(lse_graph_add_lse(g, "shift", &spec, NULL), LSE_EEXIST);
    lse_assert_status(lse_graph_add_lse(g, "x", &spec, NULL), LSE_EEXIST);
    lse_assert_status(lse_graph_add_lse(g, "bad", NULL, NULL), LSE_EFAULT);
    lse_node *big;
    lse_assert_ok(lse_graph_add_node(g, "big", 3, 5, 0, &big));
    spec.parent = lse_view_all(big); /* d 2 vs 5: the similarity refuses */
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EDIM);
    ck_assert_uint_eq(lse_graph_n_terms(g), 1);
    ck_assert_ptr_eq(lse_graph_find_term(g, "shift"), t);
    ck_assert_ptr_eq(lse_graph_term(g, 0), t);
    gsl_matrix_free(m);
    lse_graph_free(other);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("term");
    TCase *tc = tcase_create("term");
    tcase_add_test(tc, test_causal_masks);
    tcase_add_test(tc, test_masks_views_of_different_nodes);
    tcase_add_test(tc, test_fully_masked_term_is_zero);
    tcase_add_test(tc, test_user_mask_and_weights);
    tcase_add_test(tc, test_blocking_and_streaming);
    tcase_add_test(tc, test_views_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
