#include <math.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_mstep_ws / lse_term_mstep_ws (lib/mstep.c) on a lingauss term with
 * a context: blocks see their own context rows, the workspace verb equals
 * lse_term_mstep, and exact statistics give the same bits for any block
 * size. */

enum { N = 100, D = 2, K = 2 };

typedef struct lg {
    lse_graph *g;
    lse_term *t;
    lse_node *b, *logw, *a, *chol;
} lg;

/* y_i = A_k z_i + b_k + noise on a fixed series; block rows B. */
static lg lingauss(size_t B)
{
    lg m;
    m.g = lse_graph_new();
    lse_graph_set_block_rows(m.g, B);
    lse_node *y, *z;
    lse_assert_ok(lse_graph_add_node(m.g, "y", N, D, LSE_NODE_CLAMPED, &y));
    lse_assert_ok(lse_graph_add_node(m.g, "z", N, D, LSE_NODE_CLAMPED, &z));
    lse_assert_ok(lse_graph_add_node(m.g, "b", K, D, LSE_NODE_PARAM, &m.b));
    lse_assert_ok(
        lse_graph_add_node(m.g, "logw", K, 1, LSE_NODE_PARAM, &m.logw));
    lse_assert_ok(lse_graph_add_node(m.g, "A", K, D * D, LSE_NODE_PARAM, &m.a));
    lse_assert_ok(
        lse_graph_add_node(m.g, "chol", K, D * D, LSE_NODE_PARAM, &m.chol));
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++) {
            gsl_matrix_set(lse_node_value(z), i, j, sin(0.3 * i + j));
            gsl_matrix_set(lse_node_value(y), i, j,
                           (i % 2 ? 0.8 : -0.5) * sin(0.3 * i + 1 - j) +
                               0.1 * gsl_rng_uniform(r));
        }
    gsl_rng_free(r);
    lse_cov_chol_scaled_identity(LSE_COV_FULL, D, 1.0, lse_node_value(m.chol));
    const lse_gaussian_config cfg = {.cov = LSE_COV_FULL};
    lse_node *params[3] = {m.logw, m.a, m.chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(y);
    spec.context = lse_view_all(z);
    spec.parent = lse_view_all(m.b);
    spec.sim = lse_sim_lingauss;
    spec.config = &cfg;
    spec.param = params;
    lse_assert_ok(lse_graph_add_lse(m.g, "dyn", &spec, &m.t));
    double e;
    lse_assert_ok(lse_graph_energy(m.g, &e));
    return m;
}

static gsl_matrix *resp_matrix(void)
{
    gsl_matrix *resp = gsl_matrix_alloc(N, K);
    for (size_t i = 0; i < N; i++) {
        const double u = 0.5 + 0.45 * sin(1.7 * i);
        gsl_matrix_set(resp, i, 0, u);
        gsl_matrix_set(resp, i, 1, 1.0 - u);
    }
    return resp;
}

/* max |x - y| over the parameters of two graphs. */
static double max_diff(const lg *x, const lg *y)
{
    lse_node *const nx[4] = {x->b, x->logw, x->a, x->chol};
    lse_node *const ny[4] = {y->b, y->logw, y->a, y->chol};
    double m = 0.0;
    for (size_t q = 0; q < 4; q++) {
        const gsl_matrix *a = lse_node_value(nx[q]), *b = lse_node_value(ny[q]);
        for (size_t i = 0; i < a->size1 * a->size2; i++)
            m = fmax(m, fabs(a->data[i] - b->data[i]));
    }
    return m;
}

START_TEST(test_blocks_use_their_context)
{
    lg small = lingauss(16), whole = lingauss(1000);
    gsl_matrix *resp = resp_matrix();
    lse_error err;
    lse_assert_ok(lse_term_mstep(small.t, resp, NULL, NULL, NULL, &err));
    lse_assert_ok(lse_term_mstep(whole.t, resp, NULL, NULL, NULL, &err));
    ck_assert_double_lt(max_diff(&small, &whole), 1e-12);
    /* and the M-step moved the parameters */
    ck_assert_double_gt(fabs(gsl_matrix_get(lse_node_value(small.a), 0, 0)),
                        1e-3);
    gsl_matrix_free(resp);
    lse_graph_free(small.g);
    lse_graph_free(whole.g);
}
END_TEST

START_TEST(test_workspace_equals_verb)
{
    lg x = lingauss(16), y = lingauss(16);
    gsl_matrix *resp = resp_matrix();
    lse_mstep_ws *ws = NULL;
    lse_error err;
    lse_assert_ok(lse_mstep_ws_new(y.t, 0, &ws, &err));
    for (int it = 0; it < 3; it++) { /* the buffers serve again */
        lse_assert_ok(lse_term_mstep(x.t, resp, NULL, NULL, NULL, &err));
        lse_assert_ok(lse_term_mstep_ws(y.t, resp, NULL, NULL, NULL, ws, &err));
        ck_assert(max_diff(&x, &y) == 0.0);
    }
    lse_mstep_ws_free(ws);
    gsl_matrix_free(resp);
    lse_graph_free(x.g);
    lse_graph_free(y.g);
}
END_TEST

START_TEST(test_exact_is_the_same_for_any_block)
{
    lg small = lingauss(7), whole = lingauss(1000);
    gsl_matrix *resp = resp_matrix();
    lse_mstep_ws *ws1 = NULL, *ws2 = NULL;
    lse_error err;
    lse_assert_ok(lse_mstep_ws_new(small.t, LSE_MSTEP_EXACT, &ws1, &err));
    lse_assert_ok(lse_mstep_ws_new(whole.t, LSE_MSTEP_EXACT, &ws2, &err));
    lse_assert_ok(
        lse_term_mstep_ws(small.t, resp, NULL, NULL, NULL, ws1, &err));
    lse_assert_ok(
        lse_term_mstep_ws(whole.t, resp, NULL, NULL, NULL, ws2, &err));
    ck_assert(max_diff(&small, &whole) == 0.0);
    /* a workspace belongs to its term */
    lse_assert_status(
        lse_term_mstep_ws(small.t, resp, NULL, NULL, NULL, ws2, &err),
        LSE_EINVAL);
    lse_mstep_ws_free(ws1);
    lse_mstep_ws_free(ws2);
    gsl_matrix_free(resp);
    lse_graph_free(small.g);
    lse_graph_free(whole.g);
}
END_TEST

START_TEST(test_workspace_errors)
{
    gsl_matrix *x = gsl_matrix_alloc(10, 2);
    for (size_t i = 0; i < 20; i++)
        x->data[i] = sin(1.0 + i);
    lse_gmm *m = NULL;
    lse_graph *g = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    lse_assert_ok(lse_gmm_graph_new(m, x, &g, &err));
    lse_term *t = lse_graph_find_term(g, "mixture");
    ck_assert_ptr_nonnull(t);
    lse_mstep_ws *ws = NULL;
    lse_assert_status(lse_mstep_ws_new(t, LSE_MSTEP_EXACT, &ws, &err),
                      LSE_ENOTSUP);
    ck_assert_ptr_null(ws);
    ck_assert_ptr_nonnull(strstr(err.message, "no exact"));
    lse_assert_status(lse_mstep_ws_new(NULL, 0, &ws, &err), LSE_EFAULT);
    lse_assert_ok(lse_mstep_ws_new(t, 0, &ws, &err));
    gsl_matrix *bad = gsl_matrix_calloc(3, 2);
    lse_assert_status(lse_term_mstep_ws(t, bad, NULL, NULL, NULL, ws, &err),
                      LSE_EDIM);
    gsl_matrix_free(bad);
    lse_mstep_ws_free(ws);
    lse_mstep_ws_free(NULL);
    lse_graph_free(g);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("mstep_ws");
    TCase *tc = tcase_create("mstep_ws");
    tcase_add_test(tc, test_blocks_use_their_context);
    tcase_add_test(tc, test_workspace_equals_verb);
    tcase_add_test(tc, test_exact_is_the_same_for_any_block);
    tcase_add_test(tc, test_workspace_errors);
    suite_add_tcase(s, tc);
    return s;
}
