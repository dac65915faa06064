#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

/* The DAAM-gated similarity (lib/sim/gate.c): its definition, every
 * gradient against central differences over several bases, and its
 * refusals. */

#define NC 5
#define NP 3
#define D 3
#define H 2
#define K 2

static gsl_matrix *mat(size_t r, size_t c, double a, double b)
{
    gsl_matrix *m = gsl_matrix_alloc(r, c);
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++)
            gsl_matrix_set(m, i, j, a * sin(b * (double)(i * c + j) + 0.7 * a + 0.1));
    return m;
}

static const double center[D] = {0.1, -0.2, 0.05};
static const double scale[D] = {0.8, 1.3, 0.6};

/* widths 0.6 .. 1.4, some negative (the gate depends on width^2) */
static gsl_matrix *widths(void)
{
    gsl_matrix *w = gsl_matrix_alloc(H * K, D);
    for (size_t i = 0; i < H * K; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(w, i, j, (0.6 + 0.2 * (double)((i * D + j) % 5)) *
                                        ((i + j) % 4 == 3 ? -1.0 : 1.0));
    return w;
}

START_TEST(test_fd_bases)
{
    /* every parameter-free base without a prepare kernel, and bilinear
     * (parameters W_c, W_p on the gated dimension) */
    size_t n_bases = 0;
    for (size_t i = 0; i <= lse_sim_count(); i++) {
        const lse_sim_type *b = i < lse_sim_count() ? lse_sim_get(i) : lse_sim_bilinear;
        if (b == lse_sim_project || b == lse_sim_sum || b->prepare != NULL ||
            (b->n_param > 0 && b != lse_sim_bilinear) ||
            (b->flags & LSE_SIM_NEEDS_CONTEXT) ||
            (b->config_size > 0 && b->config_default == NULL))
            continue; /* (pairwise needs its functions in a config) */
        if (b == lse_sim_bilinear && i < lse_sim_count())
            continue; /* checked once, last */
        const size_t kp = b == lse_sim_bilinear ? 2 : H * D;
        gsl_matrix *param[6] = {mat(H * K, D, 0.5, 1.1), widths(), NULL, NULL,
                                NULL, NULL};
        if (b == lse_sim_bilinear) {
            param[2] = mat(2, H * D, 0.6, 0.7);
            param[3] = mat(2, kp, 0.5, 1.9);
        }
        gsl_matrix *c = mat(NC, D, 1.0, 0.9), *p = mat(NP, kp, 1.1, 1.6);
        const lse_gate_config cfg = {b, NULL, H, K, center, scale};
        lse_gradcheck res;
        lse_error err;
        const lse_status st = lse_sim_check_gradient(
            lse_sim_gate, &cfg, c, p, NULL, (const gsl_matrix *const *)param,
            1e-6, 1e-3, &res, &err);
        ck_assert_msg(st == LSE_OK, "base %s: %s", b->name, err.message);
        ck_assert_msg(res.max_error < 1e-6, "base %s: error %g at %s", b->name,
                      res.max_error, res.where);
        /* child, parent, delta and width entries at least */
        ck_assert_uint_ge(res.n_checked, NC * D + NP * kp + 2 * H * K * D);
        n_bases++;
        printf("# gate over %s: max error %.2e over %zu entries\n", b->name,
               res.max_error, res.n_checked);
        for (size_t k = 0; k < 6; k++)
            gsl_matrix_free(param[k]);
        gsl_matrix_free(c);
        gsl_matrix_free(p);
    }
    ck_assert_uint_ge(n_bases, 6);
}
END_TEST

START_TEST(test_definition)
{
    /* in a graph: S = Phi(C) P' for the dot base, Phi from the formula */
    lse_graph *g = lse_graph_new();
    lse_node *x, *p, *dl, *wd;
    lse_assert_ok(lse_graph_add_node(g, "x", NC, D, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "p", NP, H * D, LSE_NODE_PARAM, &p));
    lse_assert_ok(lse_graph_add_node(g, "delta", H * K, D, LSE_NODE_PARAM, &dl));
    lse_assert_ok(lse_graph_add_node(g, "width", H * K, D, LSE_NODE_PARAM, &wd));
    gsl_matrix *xv = mat(NC, D, 1.0, 0.9), *pv = mat(NP, H * D, 1.1, 1.6);
    gsl_matrix *dv = mat(H * K, D, 0.5, 1.1), *wv = widths();
    lse_assert_ok(lse_node_set_value(x, xv));
    lse_assert_ok(lse_node_set_value(p, pv));
    lse_assert_ok(lse_node_set_value(dl, dv));
    lse_assert_ok(lse_node_set_value(wd, wv));
    const lse_gate_config cfg = {lse_sim_dot, NULL, H, K, center, scale};
    lse_node *par[6] = {dl, wd, NULL, NULL, NULL, NULL};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(p);
    spec.sim = lse_sim_gate;
    spec.config = &cfg;
    spec.param = par;
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, &t));
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    const gsl_matrix *s = lse_term_similarity(t);
    for (size_t i = 0; i < NC; i++)
        for (size_t q = 0; q < NP; q++) {
            double want = 0.0;
            for (size_t h = 0; h < H; h++)
                for (size_t j = 0; j < D; j++) {
                    const double c = gsl_matrix_get(xv, i, j);
                    const double y = (c - center[j]) / scale[j];
                    double gsum = 0.0;
                    for (size_t k = 0; k < K; k++) {
                        const double u = (y - gsl_matrix_get(dv, h * K + k, j)) /
                                         gsl_matrix_get(wv, h * K + k, j);
                        gsum += exp(-u * u / 2) / K;
                    }
                    want += c * gsum * gsl_matrix_get(pv, q, h * D + j);
                }
            ck_assert_double_eq_tol(gsl_matrix_get(s, i, q), want, 1e-13);
        }
    /* lse_gate_features: gates in (0, 1], Phi = x .* g */
    gsl_matrix *gt = gsl_matrix_alloc(NC, H * D), *ph = gsl_matrix_alloc(NC, H * D);
    lse_assert_ok(lse_gate_features(&cfg, dv, wv, xv, gt, ph));
    for (size_t i = 0; i < NC; i++)
        for (size_t j = 0; j < H * D; j++) {
            ck_assert(gsl_matrix_get(gt, i, j) > 0.0 && gsl_matrix_get(gt, i, j) <= 1.0);
            ck_assert_double_eq_tol(gsl_matrix_get(ph, i, j),
                                    gsl_matrix_get(xv, i, j % D) * gsl_matrix_get(gt, i, j),
                                    1e-15);
        }
    /* refusals: a zero width at evaluation, wrong shapes */
    gsl_matrix_set(lse_node_value(wd), 1, 2, 0.0);
    lse_assert_status(lse_graph_energy(g, &e), LSE_EDOM);
    gsl_matrix *bad = gsl_matrix_alloc(NC, D);
    lse_assert_status(lse_gate_features(&cfg, dv, wv, xv, bad, NULL), LSE_EDIM);
    lse_assert_status(lse_gate_features(NULL, dv, wv, xv, NULL, NULL), LSE_EFAULT);
    gsl_matrix_free(bad);
    lse_node *p2;
    lse_assert_ok(lse_graph_add_node(g, "p2", NP, D, LSE_NODE_PARAM, &p2));
    spec.parent = lse_view_all(p2); /* the dot base wants H D columns */
    lse_assert_status(lse_graph_add_lse(g, "t2", &spec, NULL), LSE_EDIM);
    spec.parent = lse_view_all(p);
    lse_gate_config c0 = cfg;
    c0.n_gauss = 0;
    spec.config = &c0;
    lse_assert_status(lse_graph_add_lse(g, "t3", &spec, NULL), LSE_EINVAL);
    c0 = cfg;
    c0.base = NULL;
    lse_assert_status(lse_graph_add_lse(g, "t4", &spec, NULL), LSE_EFAULT);
    c0 = cfg;
    const double bad_scale[D] = {1.0, 0.0, 1.0};
    c0.scale = bad_scale;
    lse_assert_status(lse_graph_add_lse(g, "t5", &spec, NULL), LSE_EDOM);
    c0 = cfg;
    c0.base = lse_sim_gate; /* not over itself */
    lse_assert_status(lse_graph_add_lse(g, "t6", &spec, NULL), LSE_EINVAL);
    char buf[200];
    ck_assert_int_gt(lse_sim_gate->describe(&cfg, buf, sizeof buf), 0);
    ck_assert_ptr_nonnull(strstr(buf, "H=2"));
    gsl_matrix_free(gt);
    gsl_matrix_free(ph);
    gsl_matrix_free(xv);
    gsl_matrix_free(pv);
    gsl_matrix_free(dv);
    gsl_matrix_free(wv);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_gate");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fd_bases);
    tcase_add_test(tc, test_definition);
    suite_add_tcase(s, tc);
    return s;
}
