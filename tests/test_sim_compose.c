#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lse_check.h"

/* The composed similarities over every base in the catalogue: gradients of
 * children, parents, context, W_c, W_p / alpha and the bases' parameters
 * against central differences; the definitions S = base(C W_c', P W_p')
 * and S = sum_m alpha_m S_m. */

#define NC 5
#define NP 4
#define DC 3
#define DP 4

static double pair_eval(const gsl_vector *c, const gsl_vector *p,
                        const gsl_vector *x, const void *params)
{
    (void)x;
    (void)params;
    double s = 0.0;
    for (size_t j = 0; j < c->size; j++)
        s += gsl_vector_get(c, j) * gsl_vector_get(p, j);
    return s + 0.25 * s * s;
}

static void pair_grad(const gsl_vector *c, const gsl_vector *p,
                      const gsl_vector *x, double w, gsl_vector *gc,
                      gsl_vector *gp, gsl_vector *gx, const void *params)
{
    (void)x;
    (void)gx;
    double s = 0.0;
    for (size_t j = 0; j < c->size; j++)
        s += gsl_vector_get(c, j) * gsl_vector_get(p, j);
    const double f = w * (1.0 + 0.5 * s);
    for (size_t j = 0; j < c->size; j++) {
        if (gc != NULL)
            *gsl_vector_ptr(gc, j) += f * gsl_vector_get(p, j);
        if (gp != NULL)
            *gsl_vector_ptr(gp, j) += f * gsl_vector_get(c, j);
    }
    (void)params;
}

static const lse_sim_pair_fns pair_fns = {"dot-plus-square", pair_eval, pair_grad};
static const lse_sim_pair_config pair_cfg = {&pair_fns, NULL};
static const lse_gaussian_config diag_cfg = {.cov = LSE_COV_DIAG};

static gsl_matrix *mat(size_t r, size_t c, double a, double b)
{
    gsl_matrix *m = gsl_matrix_alloc(r, c);
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++)
            gsl_matrix_set(m, i, j, a * sin(b * (double)(i * c + j) + 0.7 * a + 0.1));
    return m;
}

static gsl_matrix *positive(size_t r, size_t c, double lo)
{
    gsl_matrix *m = mat(r, c, 1.0, 1.9);
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++)
            gsl_matrix_set(m, i, j, lo + 0.3 * fabs(gsl_matrix_get(m, i, j)));
    return m;
}

/* Fill the projected dimensions, base config, context and base parameters
 * for base @p b. Returns 0 when the base is not one this test knows. */
static int fixture(const lse_sim_type *b, size_t *kc, size_t *kp,
                   const void **bcfg, gsl_matrix **ctx, gsl_matrix **bp)
{
    *kc = *kp = 2;
    *bcfg = NULL;
    *ctx = NULL;
    const char *n = b->name;
    if (!strcmp(n, "dot") || !strcmp(n, "scaled-dot") || !strcmp(n, "cosine") ||
        !strcmp(n, "dar") || !strcmp(n, "neg-dist") ||
        !strcmp(n, "gauss-kernel") || !strcmp(n, "inv-dist") || !strcmp(n, "idw"))
        return 1;
    if (!strcmp(n, "pairwise")) {
        *bcfg = &pair_cfg;
        return 1;
    }
    if (!strcmp(n, "bilinear")) {
        *kp = 3;
        bp[0] = mat(2, *kc, 0.8, 1.1);
        bp[1] = mat(2, *kp, 0.9, 0.7);
        return 1;
    }
    if (!strcmp(n, "nonlinear")) {
        *kp = 3;
        bp[0] = mat(*kc, *kp, 0.6, 1.3);
        bp[1] = mat(1, *kc, 0.4, 2.3);
        return 1;
    }
    if (!strcmp(n, "gaussian")) {
        *bcfg = &diag_cfg;
        bp[0] = mat(NP, 1, 0.5, 0.9);
        bp[1] = positive(NP, *kc, 0.7);
        return 1;
    }
    if (!strcmp(n, "lingauss")) {
        *bcfg = &diag_cfg;
        *ctx = mat(NC, 2, 0.9, 1.7);
        bp[0] = mat(NP, 1, 0.5, 0.9);
        bp[1] = mat(NP, *kc * 2, 0.5, 1.2);
        bp[2] = positive(NP, *kc, 0.7);
        return 1;
    }
    if (!strcmp(n, "daam")) {
        bp[0] = positive(NP, 1, 0.6);
        return 1;
    }
    return 0;
}

START_TEST(test_every_base)
{
    size_t n_bases = 0;
    for (size_t i = 0; i < lse_sim_count(); i++) {
        const lse_sim_type *b = lse_sim_get(i);
        if (b == lse_sim_project || b == lse_sim_sum)
            continue;
        size_t kc, kp;
        const void *bcfg;
        gsl_matrix *ctx, *param[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
        ck_assert_msg(fixture(b, &kc, &kp, &bcfg, &ctx, param + 2),
                      "no fixture for base '%s': add one", b->name);
        n_bases++;
        param[0] = mat(kc, DC, 0.7, 1.4);
        param[1] = mat(kp, DP, 0.6, 0.8);
        gsl_matrix *c = mat(NC, DC, 1.0, 0.9), *p = mat(NP, DP, 1.1, 1.6);
        const lse_project_config pc = {b, bcfg};
        lse_gradcheck res;
        lse_error err;
        const gsl_matrix *const *cp = (const gsl_matrix *const *)param;
        lse_status st = lse_sim_check_gradient(lse_sim_project, &pc, c, p, ctx,
                                               cp, 1e-6, 1.0, &res, &err);
        ck_assert_msg(st == LSE_OK, "%s: %s", b->name, err.message);
        ck_assert_msg(res.max_error < 1e-6, "project over %s: error %g at %s",
                      b->name, res.max_error, res.where);
        size_t want = NC * DC + NP * DP + kc * DC + kp * DP;
        for (size_t k = 2; k < 6; k++)
            if (param[k] != NULL)
                want += param[k]->size1 * param[k]->size2;
        if (ctx != NULL)
            want += ctx->size1 * ctx->size2;
        ck_assert_uint_eq(res.n_checked, want);
        for (size_t k = 0; k < 6; k++)
            gsl_matrix_free(param[k]);
        gsl_matrix_free(ctx);
        gsl_matrix_free(c);
        gsl_matrix_free(p);
    }
    ck_assert_uint_eq(n_bases, lse_sim_count() - 2);
}
END_TEST

START_TEST(test_definition_in_a_graph)
{
    /* attention with learned projections: S = (W_c c).(W_p p)/sqrt(k)
     * equals scaled-dot on the projected rows; blocks change nothing */
    double e_blocks[2];
    for (int blocked = 0; blocked < 2; blocked++) {
        lse_graph *g = lse_graph_new();
        if (blocked)
            lse_graph_set_block_rows(g, 2);
        lse_node *x, *wc, *wp;
        lse_assert_ok(lse_graph_add_node(g, "x", NC, DC, 0, &x));
        lse_assert_ok(lse_graph_add_node(g, "W_c", 2, DC, LSE_NODE_PARAM, &wc));
        lse_assert_ok(lse_graph_add_node(g, "W_p", 2, DC, LSE_NODE_PARAM, &wp));
        gsl_matrix *m = mat(NC, DC, 1.0, 0.9);
        lse_assert_ok(lse_node_set_value(x, m));
        gsl_matrix_free(m);
        m = mat(2, DC, 0.7, 1.4);
        lse_assert_ok(lse_node_set_value(wc, m));
        gsl_matrix_free(m);
        m = mat(2, DC, 0.6, 0.8);
        lse_assert_ok(lse_node_set_value(wp, m));
        gsl_matrix_free(m);
        lse_node *par[6] = {wc, wp, NULL, NULL, NULL, NULL};
        const lse_project_config pc = {lse_sim_scaled_dot, NULL};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = spec.parent = lse_view_all(x);
        spec.sim = lse_sim_project;
        spec.config = &pc;
        spec.param = par;
        spec.mask = LSE_MASK_CAUSAL;
        lse_term *t;
        lse_assert_ok(lse_graph_add_lse(g, "self", &spec, &t));
        char buf[64];
        lse_term_describe(t, buf, sizeof buf);
        ck_assert_ptr_nonnull(strstr(buf, "base=scaled-dot"));
        double e;
        lse_assert_ok(lse_graph_gradient(g, &e));
        e_blocks[blocked] = e;
        const gsl_matrix *s = lse_term_similarity(t);
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j <= i; j++) {
                double q = 0.0;
                for (size_t k = 0; k < 2; k++) {
                    double a = 0.0, bb = 0.0;
                    for (size_t d = 0; d < DC; d++) {
                        a += gsl_matrix_get(lse_node_value(wc), k, d) *
                             gsl_matrix_get(lse_node_value(x), i, d);
                        bb += gsl_matrix_get(lse_node_value(wp), k, d) *
                              gsl_matrix_get(lse_node_value(x), j, d);
                    }
                    q += a * bb;
                }
                ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), q / sqrt(2.0), 1e-12);
            }
        lse_gradcheck r;
        lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &r));
        ck_assert_double_lt(r.max_error, 1e-6);
        lse_graph_free(g);
    }
    ck_assert_double_eq_tol(e_blocks[0], e_blocks[1], 1e-12);
}
END_TEST

START_TEST(test_refused)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *wc, *wp, *extra;
    lse_assert_ok(lse_graph_add_node(g, "x", NC, DC, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "W_c", 2, DC, LSE_NODE_PARAM, &wc));
    lse_assert_ok(lse_graph_add_node(g, "W_p", 2, DC, LSE_NODE_PARAM, &wp));
    lse_assert_ok(lse_graph_add_node(g, "extra", 2, 2, LSE_NODE_PARAM, &extra));
    lse_node *par[6] = {wc, wp, NULL, NULL, NULL, NULL};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = spec.parent = lse_view_all(x);
    spec.sim = lse_sim_project;
    spec.param = par;
    /* no base */
    lse_assert_status(lse_graph_add_lse(g, "a", &spec, NULL), LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "base"));
    /* a base parameter that the base does not have */
    lse_project_config pc = {lse_sim_dot, NULL};
    spec.config = &pc;
    par[2] = extra;
    lse_assert_status(lse_graph_add_lse(g, "b", &spec, NULL), LSE_EDIM);
    /* a required base parameter missing */
    pc.base = lse_sim_bilinear;
    par[2] = NULL;
    lse_assert_status(lse_graph_add_lse(g, "c", &spec, NULL), LSE_EFAULT);
    /* the base's own shape check: bilinear W_c (2, 2) fits k_c = 2; W_p
     * wrong */
    par[2] = extra;
    par[3] = wc; /* (2, 3): expects (2, k_p = 2) */
    lse_assert_status(lse_graph_add_lse(g, "d", &spec, NULL), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "project over bilinear"));
    par[3] = extra;
    lse_assert_ok(lse_graph_add_lse(g, "e", &spec, NULL));
    /* a projection of the wrong width */
    par[0] = extra; /* (2, 2), d_child = 3 */
    lse_assert_status(lse_graph_add_lse(g, "f", &spec, NULL), LSE_EDIM);
    /* itself as base */
    par[0] = wc;
    par[2] = par[3] = NULL;
    pc.base = lse_sim_project;
    lse_assert_status(lse_graph_add_lse(g, "g", &spec, NULL), LSE_EINVAL);
    lse_graph_free(g);

    /* DAAM (every child at once) needs one block */
    g = lse_graph_new();
    lse_graph_set_block_rows(g, 2);
    lse_node *c, *h, *w2c, *w2p, *gate;
    lse_assert_ok(lse_graph_add_node(g, "c", NC, DC, LSE_NODE_CLAMPED, &c));
    lse_assert_ok(lse_graph_add_node(g, "h", NP, DC, LSE_NODE_PARAM, &h));
    lse_assert_ok(lse_graph_add_node(g, "W_c", 2, DC, LSE_NODE_PARAM, &w2c));
    lse_assert_ok(lse_graph_add_node(g, "W_p", 2, DC, LSE_NODE_PARAM, &w2p));
    lse_assert_ok(lse_graph_add_node(g, "gate", NP, 1, LSE_NODE_PARAM, &gate));
    gsl_matrix_set_all(lse_node_value(gate), 1.0);
    lse_node *par2[6] = {w2c, w2p, gate, NULL, NULL, NULL};
    const lse_project_config dc = {lse_sim_daam, NULL};
    spec = lse_term_spec_default();
    spec.child = lse_view_all(c);
    spec.parent = lse_view_all(h);
    spec.sim = lse_sim_project;
    spec.config = &dc;
    spec.param = par2;
    lse_assert_status(lse_graph_add_lse(g, "daam", &spec, NULL), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "lse_graph_set_block_rows"));
    lse_graph_free(g);
}
END_TEST


static gsl_matrix *dup_m(const gsl_matrix *m, double shift)
{
    if (m == NULL)
        return NULL;
    gsl_matrix *c = gsl_matrix_alloc(m->size1, m->size2);
    gsl_matrix_memcpy(c, m);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(c, i, j, gsl_matrix_get(m, i, j) * (1.0 + shift));
    return c;
}

START_TEST(test_sum_every_base)
{
    /* S = alpha_0 base(theta) + alpha_1 base(theta'), alpha learned */
    size_t n_bases = 0;
    for (size_t i = 0; i < lse_sim_count(); i++) {
        const lse_sim_type *b = lse_sim_get(i);
        if (b == lse_sim_project || b == lse_sim_sum)
            continue;
        size_t kc, kp;
        const void *bcfg;
        gsl_matrix *ctx, *bp[4] = {NULL, NULL, NULL, NULL};
        ck_assert_msg(fixture(b, &kc, &kp, &bcfg, &ctx, bp),
                      "no fixture for base '%s': add one", b->name);
        n_bases++;
        gsl_matrix *param[9] = {NULL};
        param[0] = gsl_matrix_alloc(1, 2);
        gsl_matrix_set(param[0], 0, 0, 0.7);
        gsl_matrix_set(param[0], 0, 1, -0.4);
        for (size_t k = 0; k < b->n_param; k++) {
            param[1 + k] = dup_m(bp[k], 0.0);
            param[1 + b->n_param + k] = dup_m(bp[k], 0.15);
        }
        gsl_matrix *c = mat(NC, kc, 1.0, 0.9), *p = mat(NP, kp, 1.1, 1.6);
        lse_sum_config sc = {2, {b, b}, {bcfg, bcfg}, {0, 0}};
        lse_gradcheck res;
        lse_error err;
        lse_status st = lse_sim_check_gradient(lse_sim_sum, &sc, c, p, ctx,
                                               (const gsl_matrix *const *)param,
                                               1e-6, 1.0, &res, &err);
        ck_assert_msg(st == LSE_OK, "%s: %s", b->name, err.message);
        ck_assert_msg(res.max_error < 1e-6, "sum of %s: error %g at %s", b->name,
                      res.max_error, res.where);
        size_t want = NC * kc + NP * kp + 2;
        for (size_t k = 1; k < 9; k++)
            if (param[k] != NULL)
                want += param[k]->size1 * param[k]->size2;
        if (ctx != NULL)
            want += ctx->size1 * ctx->size2;
        ck_assert_uint_eq(res.n_checked, want);
        for (size_t k = 0; k < 9; k++)
            gsl_matrix_free(param[k]);
        for (size_t k = 0; k < 4; k++)
            gsl_matrix_free(bp[k]);
        gsl_matrix_free(ctx);
        gsl_matrix_free(c);
        gsl_matrix_free(p);
    }
    ck_assert_uint_eq(n_bases, lse_sim_count() - 2);
}
END_TEST

START_TEST(test_sum_definition_and_refused)
{
    /* fixed weights: S = 0.5 dot - 2 neg-dist, in a graph with blocks */
    double e_blocks[2];
    for (int blocked = 0; blocked < 2; blocked++) {
        lse_graph *g = lse_graph_new();
        if (blocked)
            lse_graph_set_block_rows(g, 2);
        lse_node *x, *p;
        lse_assert_ok(lse_graph_add_node(g, "x", NC, DC, 0, &x));
        lse_assert_ok(lse_graph_add_node(g, "p", NP, DC, LSE_NODE_PARAM, &p));
        gsl_matrix *m = mat(NC, DC, 1.0, 0.9);
        lse_assert_ok(lse_node_set_value(x, m));
        gsl_matrix_free(m);
        m = mat(NP, DC, 0.8, 1.3);
        lse_assert_ok(lse_node_set_value(p, m));
        gsl_matrix_free(m);
        const lse_sum_config sc = {2, {lse_sim_dot, lse_sim_neg_dist}, {NULL, NULL},
                                   {0.5, -2.0}};
        lse_node *par[9] = {NULL};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(x);
        spec.parent = lse_view_all(p);
        spec.sim = lse_sim_sum;
        spec.config = &sc;
        spec.param = par;
        lse_term *t;
        lse_assert_ok(lse_graph_add_lse(g, "mix", &spec, &t));
        char buf[64];
        lse_term_describe(t, buf, sizeof buf);
        ck_assert_ptr_nonnull(strstr(buf, "dot+neg-dist"));
        double e;
        lse_assert_ok(lse_graph_gradient(g, &e));
        e_blocks[blocked] = e;
        const gsl_matrix *s = lse_term_similarity(t);
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j < NP; j++) {
                double dot = 0.0, d2 = 0.0;
                for (size_t d = 0; d < DC; d++) {
                    const double a = gsl_matrix_get(lse_node_value(x), i, d);
                    const double q = gsl_matrix_get(lse_node_value(p), j, d);
                    dot += a * q;
                    d2 += (a - q) * (a - q);
                }
                ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), 0.5 * dot + 2.0 * d2,
                                        1e-12);
            }
        lse_gradcheck r;
        lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &r));
        ck_assert_double_lt(r.max_error, 1e-6);

        /* refused configurations */
        lse_node *a3, *wrong;
        lse_assert_ok(lse_graph_add_node(g, "a3", 1, 3, LSE_NODE_PARAM, &a3));
        lse_assert_ok(lse_graph_add_node(g, "wrong", 2, DC, LSE_NODE_PARAM, &wrong));
        lse_sum_config bad = sc;
        bad.n = 0;
        spec.config = &bad;
        lse_assert_status(lse_graph_add_lse(g, "b1", &spec, NULL), LSE_EDOM);
        bad = sc;
        bad.type[1] = NULL;
        lse_assert_status(lse_graph_add_lse(g, "b2", &spec, NULL), LSE_EFAULT);
        bad = sc;
        bad.type[1] = lse_sim_sum;
        lse_assert_status(lse_graph_add_lse(g, "b3", &spec, NULL), LSE_EINVAL);
        bad = sc;
        bad.weight[0] = NAN;
        lse_assert_status(lse_graph_add_lse(g, "b4", &spec, NULL), LSE_EDOM);
        spec.config = &sc;
        par[0] = a3; /* alpha must be (1, 2) */
        lse_assert_status(lse_graph_add_lse(g, "b5", &spec, NULL), LSE_EDIM);
        par[0] = NULL;
        par[1] = wrong; /* no component has parameters */
        lse_assert_status(lse_graph_add_lse(g, "b6", &spec, NULL), LSE_EDIM);
        par[1] = NULL;
        bad = sc;
        bad.type[1] = lse_sim_bilinear; /* W_c, W_p required */
        spec.config = &bad;
        lse_assert_status(lse_graph_add_lse(g, "b7", &spec, NULL), LSE_EFAULT);
        par[1] = wrong;
        par[2] = a3; /* W_p (1, 3): bilinear wants (2, 3) */
        lse_assert_status(lse_graph_add_lse(g, "b8", &spec, NULL), LSE_EDIM);
        ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "sum component 1"));
        lse_graph_free(g);
    }
    ck_assert_double_eq_tol(e_blocks[0], e_blocks[1], 1e-12);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_compose");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_base);
    tcase_add_test(tc, test_definition_in_a_graph);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_sum_every_base);
    tcase_add_test(tc, test_sum_definition_and_refused);
    suite_add_tcase(s, tc);
    return s;
}
