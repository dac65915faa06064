#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_math.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

/* ---- E = c . w: the gradient is exactly the config vector c ---- */

typedef struct lin_config {
    double c[3];
} lin_config;

static lse_status lin_energy(const gsl_matrix *const *v, size_t n_view,
                             const void *config, double *e)
{
    (void)n_view;
    const lin_config *c = config;
    *e = 0.0;
    for (size_t j = 0; j < 3; j++)
        *e += c->c[j] * gsl_matrix_get(v[0], 0, j);
    return LSE_OK;
}

static lse_status lin_grad(const gsl_matrix *const *v, size_t n_view,
                           const void *config, gsl_matrix *const *g, double *e)
{
    const lin_config *c = config;
    for (size_t j = 0; g[0] != NULL && j < 3; j++)
        *gsl_matrix_ptr(g[0], 0, j) += c->c[j];
    return lin_energy(v, n_view, config, e);
}

static const lse_custom_type lin_type = {"lin", 0, NULL, lin_energy, lin_grad,
                                         NULL};

typedef struct lin_problem {
    lin_config cfg;
    lse_graph *g;
    lse_node *w;
} lin_problem;

static const double W0[3] = {0.5, -1.25, 2.0};

static void lin_setup(lin_problem *p)
{
    memset(&p->cfg, 0, sizeof p->cfg);
    p->g = lse_graph_new();
    lse_assert_ok(lse_graph_add_node(p->g, "w", 1, 3, LSE_NODE_PARAM, &p->w));
    for (size_t j = 0; j < 3; j++)
        gsl_matrix_set(lse_node_value(p->w), 0, j, W0[j]);
    const lse_view v = lse_view_all(p->w);
    lse_assert_ok(lse_graph_add_custom(p->g, "lin", &lin_type, &p->cfg, &v, 1, NULL));
}

/* set the gradient to g and take a step */
static void lin_step(lin_problem *p, lse_optim *o, const double *gr)
{
    memcpy(p->cfg.c, gr, sizeof p->cfg.c);
    double e;
    lse_assert_ok(lse_graph_gradient(p->g, &e));
    lse_assert_ok(lse_optim_step(o));
}

static double wv(const lin_problem *p, size_t j)
{
    return gsl_matrix_get(lse_node_value(p->w), 0, j);
}

static const double G1[3] = {0.3, -2.0, 0.0};
static const double G2[3] = {-0.1, 0.05, 1.5};

/* Two steps of @p rule; want1/want2 the hand-computed iterates. */
static void check_rule(const lse_optim_opts *oo, const double *want1,
                       const double *want2)
{
    lin_problem p;
    lin_setup(&p);
    lse_optim *o = lse_optim_new(p.g, oo);
    ck_assert_ptr_nonnull(o);
    ck_assert_uint_eq(lse_optim_n_nodes(o), 1);
    lin_step(&p, o, G1);
    for (size_t j = 0; j < 3; j++)
        ck_assert_double_eq_tol(wv(&p, j), want1[j], 1e-14);
    lin_step(&p, o, G2);
    for (size_t j = 0; j < 3; j++)
        ck_assert_double_eq_tol(wv(&p, j), want2[j], 1e-14);
    ck_assert_uint_eq(lse_optim_n_step(o), 2);
    lse_optim_free(o);
    lse_graph_free(p.g);
}

START_TEST(test_sgd_momentum)
{
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = LSE_OPTIM_SGD;
    oo.lr = 0.1;
    double w1[3], w2[3];
    /* plain: w -= lr g */
    for (size_t j = 0; j < 3; j++) {
        w1[j] = W0[j] - 0.1 * G1[j];
        w2[j] = w1[j] - 0.1 * G2[j];
    }
    check_rule(&oo, w1, w2);
    /* heavy ball: b1 = g1, b2 = mu b1 + g2 */
    oo.momentum = 0.9;
    for (size_t j = 0; j < 3; j++) {
        w1[j] = W0[j] - 0.1 * G1[j];
        w2[j] = w1[j] - 0.1 * (0.9 * G1[j] + G2[j]);
    }
    check_rule(&oo, w1, w2);
    /* Nesterov: step g + mu b */
    oo.nesterov = 1;
    for (size_t j = 0; j < 3; j++) {
        w1[j] = W0[j] - 0.1 * (G1[j] + 0.9 * G1[j]);
        w2[j] = w1[j] - 0.1 * (G2[j] + 0.9 * (0.9 * G1[j] + G2[j]));
    }
    check_rule(&oo, w1, w2);
    /* L2 weight decay: g + wd w */
    oo.nesterov = 0;
    oo.momentum = 0.0;
    oo.weight_decay = 0.01;
    for (size_t j = 0; j < 3; j++) {
        w1[j] = W0[j] - 0.1 * (G1[j] + 0.01 * W0[j]);
        w2[j] = w1[j] - 0.1 * (G2[j] + 0.01 * w1[j]);
    }
    check_rule(&oo, w1, w2);
}
END_TEST

/* Adam's two steps by hand: m1 = (1-b1) g1, v1 = (1-b2) g1^2; the bias
 * corrections make step 1 lr g1 / (|g1| + eps). */
static void adam_ref(double lr, double wd, int decoupled, int ams, double *w1,
                     double *w2)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (size_t j = 0; j < 3; j++) {
        double x = W0[j];
        double g = G1[j] + (decoupled ? 0.0 : wd * x);
        if (decoupled)
            x *= 1.0 - lr * wd;
        double m = 0.1 * g, v = 0.001 * g * g, vmax = v;
        x -= lr * (m / 0.1) / (sqrt(v / 0.001) + eps);
        w1[j] = x;
        g = G2[j] + (decoupled ? 0.0 : wd * x);
        if (decoupled)
            x *= 1.0 - lr * wd;
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        if (v > vmax)
            vmax = v;
        const double bc1 = 1 - b1 * b1, bc2 = 1 - b2 * b2;
        x -= lr * (m / bc1) / (sqrt((ams ? vmax : v) / bc2) + eps);
        w2[j] = x;
    }
}

START_TEST(test_adam_family)
{
    lse_optim_opts oo = lse_optim_opts_default();
    ck_assert_int_eq(oo.rule, LSE_OPTIM_ADAM);
    oo.lr = 0.05;
    double w1[3], w2[3];
    adam_ref(0.05, 0.0, 0, 0, w1, w2);
    /* defining property of step 1: |dw| = lr (for g != 0), sign of -g */
    ck_assert_double_eq_tol(w1[0], W0[0] - 0.05, 1e-8);
    ck_assert_double_eq_tol(w1[1], W0[1] + 0.05, 1e-8);
    ck_assert_double_eq(w1[2], W0[2]);
    check_rule(&oo, w1, w2);
    oo.weight_decay = 0.1;
    adam_ref(0.05, 0.1, 0, 0, w1, w2);
    check_rule(&oo, w1, w2);
    oo.rule = LSE_OPTIM_ADAMW;
    adam_ref(0.05, 0.1, 1, 0, w1, w2);
    check_rule(&oo, w1, w2);
    /* AMSGrad: entry 1 has |g2| < |g1|, so vmax > v at step 2 */
    oo.rule = LSE_OPTIM_AMSGRAD;
    oo.weight_decay = 0.0;
    adam_ref(0.05, 0.0, 0, 1, w1, w2);
    double a1[3], a2[3];
    adam_ref(0.05, 0.0, 0, 0, a1, a2);
    ck_assert_double_ne(w2[1], a2[1]); /* the max matters here */
    check_rule(&oo, w1, w2);
    ck_assert_str_eq(lse_optim_rule_name(LSE_OPTIM_AMSGRAD), "amsgrad");
    ck_assert_str_eq(lse_optim_rule_name(LSE_OPTIM_ADAMW), "adamw");
    ck_assert_str_eq(lse_optim_rule_name(LSE_OPTIM_SGD), "sgd");
    ck_assert_str_eq(lse_optim_rule_name(LSE_OPTIM_ADAM), "adam");
    ck_assert_ptr_null(lse_optim_rule_name((lse_optim_rule)9));
}
END_TEST

START_TEST(test_clipping_and_schedules)
{
    lin_problem p;
    lin_setup(&p);
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = LSE_OPTIM_SGD;
    oo.lr = 1.0;
    oo.clip_norm = 1.0;
    lse_optim *o = lse_optim_new(p.g, &oo);
    const double g[3] = {3.0, 4.0, 0.0}; /* norm 5 -> scaled to norm 1 */
    lin_step(&p, o, g);
    ck_assert_double_eq_tol(lse_optim_grad_norm(o), 5.0, 1e-15);
    ck_assert_double_eq_tol(wv(&p, 0), W0[0] - 0.6, 1e-15);
    ck_assert_double_eq_tol(wv(&p, 1), W0[1] - 0.8, 1e-15);
    ck_assert_double_eq(wv(&p, 2), W0[2]);
    const double small[3] = {0.3, 0.4, 0.0}; /* below the limit: unchanged */
    lin_step(&p, o, small);
    ck_assert_double_eq_tol(wv(&p, 0), W0[0] - 0.9, 1e-15);
    ck_assert_double_eq_tol(wv(&p, 1), W0[1] - 1.2, 1e-15);

    /* step schedule: lr gamma^floor(s / step_size) */
    oo.clip_norm = 0.0;
    oo.schedule = LSE_LR_STEP;
    oo.step_size = 3;
    oo.gamma = 0.5;
    lse_assert_ok(lse_optim_set_opts(o, &oo));
    lse_optim_reset(o);
    const double want_step[] = {1, 1, 1, 0.5, 0.5, 0.5, 0.25};
    for (size_t s = 0; s < 7; s++) {
        ck_assert_double_eq_tol(lse_optim_lr(o), want_step[s], 1e-15);
        lse_assert_ok(lse_optim_step(o));
    }
    /* cosine: lr at 0, the mean at T/2, lr_min from T on */
    oo.schedule = LSE_LR_COSINE;
    oo.total_steps = 4;
    oo.lr_min = 0.2;
    lse_assert_ok(lse_optim_set_opts(o, &oo));
    lse_optim_reset(o);
    ck_assert_uint_eq(lse_optim_n_step(o), 0);
    const double want_cos[] = {1.0, 0.2 + 0.8 * (1 + cos(M_PI / 4)) / 2, 0.6,
                               0.2 + 0.8 * (1 + cos(3 * M_PI / 4)) / 2, 0.2,
                               0.2};
    for (size_t s = 0; s < 6; s++) {
        ck_assert_double_eq_tol(lse_optim_lr(o), want_cos[s], 1e-15);
        lse_assert_ok(lse_optim_step(o));
    }
    /* bad options */
    lse_optim_opts bad = oo;
    bad.lr = 0.0;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    bad = oo;
    bad.lr_min = 2.0;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    bad = oo;
    bad.beta2 = 1.0;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    bad = oo;
    bad.momentum = -0.1;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    bad = oo;
    bad.schedule = LSE_LR_STEP;
    bad.step_size = 0;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    bad = oo;
    bad.clip_norm = -1.0;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    bad = oo;
    bad.eps = 0.0;
    lse_assert_status(lse_optim_set_opts(o, &bad), LSE_EDOM);
    ck_assert_ptr_null(lse_optim_new(p.g, &bad));
    ck_assert_ptr_null(lse_optim_new(NULL, NULL));
    /* a non-finite gradient: nothing moves */
    const double w_before = wv(&p, 0);
    const double nan_g[3] = {NAN, 0.0, 0.0};
    memcpy(p.cfg.c, nan_g, sizeof nan_g);
    double e;
    lse_graph_gradient(p.g, &e);
    lse_assert_status(lse_optim_step(o), LSE_ENONFINITE);
    ck_assert_double_eq(wv(&p, 0), w_before);
    /* a clamped node is skipped */
    memcpy(p.cfg.c, g, sizeof g);
    lse_assert_ok(lse_graph_gradient(p.g, &e));
    lse_node_set_clamped(p.w, 1);
    lse_assert_ok(lse_optim_step(o));
    ck_assert_double_eq(wv(&p, 0), w_before);
    lse_optim_free(o);
    lse_graph_free(p.g);
}
END_TEST

/* ---- a convex quadratic: E = 1/2 ||w - c||^2 scaled per entry ---- */

START_TEST(test_convex_convergence)
{
    const lse_optim_rule rules[] = {LSE_OPTIM_SGD, LSE_OPTIM_ADAM,
                                    LSE_OPTIM_ADAMW, LSE_OPTIM_AMSGRAD};
    for (size_t r = 0; r < 4; r++) {
        lse_graph *g = lse_graph_new();
        lse_node *w, *c;
        lse_assert_ok(lse_graph_add_node(g, "w", 2, 2, LSE_NODE_PARAM, &w));
        lse_assert_ok(lse_graph_add_node(g, "c", 2, 2, LSE_NODE_CLAMPED, &c));
        for (size_t i = 0; i < 4; i++)
            gsl_matrix_set(lse_node_value(c), i / 2, i % 2, 1.0 + sin(3.0 * i));
        const lse_view v[] = {lse_view_all(w), lse_view_all(c)};
        lse_quadratic_config qc = {.scale = 2.0};
        lse_assert_ok(lse_graph_add_custom(g, "q", lse_custom_quadratic, &qc, v, 2, NULL));
        lse_optim_opts oo = lse_optim_opts_default();
        oo.rule = rules[r];
        oo.lr = rules[r] == LSE_OPTIM_SGD ? 0.1 : 0.05;
        oo.momentum = 0.5;
        oo.schedule = LSE_LR_COSINE;
        oo.total_steps = 2000;
        lse_optim *o = lse_optim_new(g, &oo);
        ck_assert_uint_eq(lse_optim_n_nodes(o), 1); /* c is clamped */
        ck_assert_ptr_eq(lse_optim_node(o, 0), w);
        ck_assert_ptr_null(lse_optim_node(o, 1));
        double e0 = 0.0, e = 0.0;
        for (size_t s = 0; s < 2000; s++) {
            lse_assert_ok(lse_learn_step(NULL, o, &e));
            if (s == 0)
                e0 = e;
        }
        ck_assert_double_gt(e0, 1.0);
        for (size_t i = 0; i < 4; i++)
            ck_assert_double_eq_tol(gsl_matrix_get(lse_node_value(w), i / 2, i % 2),
                                    gsl_matrix_get(lse_node_value(c), i / 2, i % 2),
                                    1e-6);
        lse_optim_free(o);
        lse_graph_free(g);
    }
}
END_TEST

/* ---- save / resume on a nonlinear graph (neg-dist LSE: a GMM-like fit) ---- */

static lse_graph *fit_graph(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *mu;
    lse_assert_ok(lse_graph_add_node(g, "x", 12, 2, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "mu", 3, 2, LSE_NODE_PARAM, &mu));
    for (size_t i = 0; i < 12; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(x), i, j,
                           (double)(i % 3) * 2.0 + 0.3 * sin(1.7 * i + j));
    for (size_t k = 0; k < 3; k++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(mu), k, j, 0.5 * cos(2.0 * k + j));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_neg_dist;
    lse_assert_ok(lse_graph_add_lse(g, "fit", &spec, NULL));
    return g;
}

static void run_steps(lse_graph *g, lse_optim *o, size_t n)
{
    for (size_t s = 0; s < n; s++)
        lse_assert_ok(lse_learn_step(NULL, o, NULL));
    (void)g;
}

START_TEST(test_save_resume_bit_identical)
{
    const lse_optim_rule rules[] = {LSE_OPTIM_SGD, LSE_OPTIM_ADAM,
                                    LSE_OPTIM_ADAMW, LSE_OPTIM_AMSGRAD};
    char dir[256];
    lse_tmpdir_make(dir, sizeof dir, "optim");
    for (size_t r = 0; r < 4; r++) {
        lse_optim_opts oo = lse_optim_opts_default();
        oo.rule = rules[r];
        oo.lr = 0.02;
        oo.momentum = 0.9;
        oo.weight_decay = 0.01;
        oo.clip_norm = 5.0;
        oo.schedule = LSE_LR_COSINE;
        oo.total_steps = 30;
        /* reference: 20 uninterrupted steps */
        lse_graph *g = fit_graph();
        lse_optim *o = lse_optim_new(g, &oo);
        run_steps(g, o, 20);
        gsl_matrix *ref = gsl_matrix_alloc(3, 2);
        gsl_matrix_memcpy(ref, lse_node_value(lse_graph_find_node(g, "mu")));
        lse_optim_free(o);
        lse_graph_free(g);
        /* 10 steps, save (buffer and JSON file), fresh objects, resume */
        g = fit_graph();
        o = lse_optim_new(g, &oo);
        run_steps(g, o, 10);
        const size_t ns = lse_optim_state_size(o);
        ck_assert_uint_eq(ns, 1 + 3 * 6);
        double *buf = malloc(ns * sizeof *buf);
        lse_assert_ok(lse_optim_state_get(o, buf, ns));
        ck_assert_double_eq(buf[0], 10.0);
        lse_assert_status(lse_optim_state_get(o, buf, ns - 1), LSE_EDIM);
        gsl_matrix *mid = gsl_matrix_alloc(3, 2);
        gsl_matrix_memcpy(mid, lse_node_value(lse_graph_find_node(g, "mu")));
        lse_json *doc = lse_json_new_object();
        lse_error err;
        lse_assert_ok(lse_optim_save_json(o, doc, &err));
        char path[512];
        snprintf(path, sizeof path, "%s/opt%zu.json", dir, r);
        lse_assert_ok(lse_json_save(doc, path, &err));
        lse_json_free(doc);
        lse_optim_free(o);
        lse_graph_free(g);

        /* (a) buffer */
        g = fit_graph();
        o = lse_optim_new(g, &oo);
        lse_assert_ok(lse_node_set_value(lse_graph_find_node(g, "mu"), mid));
        lse_assert_ok(lse_optim_state_set(o, buf, ns));
        ck_assert_uint_eq(lse_optim_n_step(o), 10);
        run_steps(g, o, 10);
        ck_assert(gsl_matrix_equal(ref, lse_node_value(lse_graph_find_node(g, "mu"))));
        lse_optim_free(o);
        lse_graph_free(g);

        /* (b) JSON file: values and state */
        g = fit_graph();
        o = lse_optim_new(g, &oo);
        lse_assert_ok(lse_json_load(path, &doc, &err));
        lse_assert_ok(lse_optim_load_json(o, doc, &err));
        ck_assert(gsl_matrix_equal(mid, lse_node_value(lse_graph_find_node(g, "mu"))));
        run_steps(g, o, 10);
        ck_assert(gsl_matrix_equal(ref, lse_node_value(lse_graph_find_node(g, "mu"))));
        /* a different rule refuses the file, nothing changes */
        lse_optim_opts other = oo;
        other.rule = rules[(r + 1) % 4];
        lse_optim *o2 = lse_optim_new(g, &other);
        lse_assert_status(lse_optim_load_json(o2, doc, &err), LSE_EINVAL);
        ck_assert(gsl_matrix_equal(ref, lse_node_value(lse_graph_find_node(g, "mu"))));
        ck_assert_uint_eq(lse_optim_n_step(o2), 0);
        lse_optim_free(o2);
        lse_json_free(doc);
        /* bad buffers */
        buf[0] = 2.5;
        lse_assert_status(lse_optim_state_set(o, buf, ns), LSE_EDOM);
        buf[0] = 3.0;
        buf[1 + 6] = -1.0; /* a second moment */
        lse_assert_status(lse_optim_state_set(o, buf, ns), LSE_EDOM);
        lse_assert_status(lse_optim_state_set(o, buf, ns + 1), LSE_EDIM);
        ck_assert_uint_eq(lse_optim_n_step(o), 20);
        lse_optim_free(o);
        lse_graph_free(g);
        free(buf);
        gsl_matrix_free(mid);
        gsl_matrix_free(ref);
    }
    lse_tmpdir_remove(dir);
}
END_TEST

START_TEST(test_set_nodes)
{
    lse_graph *g = fit_graph();
    lse_node *x = lse_graph_find_node(g, "x"), *mu = lse_graph_find_node(g, "mu");
    lse_optim *o = lse_optim_new(g, NULL);
    lse_node *const twice[] = {mu, mu};
    lse_assert_status(lse_optim_set_nodes(o, twice, 2), LSE_EINVAL);
    lse_graph *g2 = fit_graph();
    lse_node *const other[] = {lse_graph_find_node(g2, "mu")};
    lse_assert_status(lse_optim_set_nodes(o, other, 1), LSE_EINVAL);
    lse_graph_free(g2);
    /* a clamped node can be selected: it is skipped while clamped */
    lse_node *const both[] = {x, mu};
    lse_assert_ok(lse_optim_set_nodes(o, both, 2));
    ck_assert_uint_eq(lse_optim_n_nodes(o), 2);
    ck_assert_uint_eq(lse_optim_state_size(o), 1 + 3 * (24 + 6));
    gsl_matrix *x0 = gsl_matrix_alloc(12, 2);
    gsl_matrix_memcpy(x0, lse_node_value(x));
    lse_assert_ok(lse_learn_step(NULL, o, NULL));
    ck_assert(gsl_matrix_equal(x0, lse_node_value(x)));
    lse_assert_ok(lse_optim_set_nodes(o, NULL, 0));
    ck_assert_uint_eq(lse_optim_n_nodes(o), 1);
    ck_assert_uint_eq(lse_optim_n_step(o), 0);
    gsl_matrix_free(x0);
    lse_optim_free(o);
    lse_graph_free(g);
}
END_TEST

/* ---- mini-batches ---- */

START_TEST(test_batcher)
{
    lse_batcher *a, *b, *c, *id;
    lse_assert_ok(lse_batcher_new(10, 3, 42, 1, &a, NULL));
    lse_assert_ok(lse_batcher_new(10, 3, 42, 1, &b, NULL));
    lse_assert_ok(lse_batcher_new(10, 3, 43, 1, &c, NULL));
    lse_assert_ok(lse_batcher_new(10, 3, 42, 0, &id, NULL));
    ck_assert_uint_eq(lse_batcher_n_batches(a), 3);
    ck_assert_uint_eq(lse_batcher_size(a), 3);
    ck_assert_ptr_null(lse_batcher_rows(a));
    size_t seen_ab[6][3];
    int differ_seed = 0, differ_epoch = 0;
    for (size_t s = 0; s < 6; s++) { /* two epochs */
        lse_assert_ok(lse_batcher_next(a));
        lse_assert_ok(lse_batcher_next(b));
        lse_assert_ok(lse_batcher_next(c));
        lse_assert_ok(lse_batcher_next(id));
        ck_assert_uint_eq(lse_batcher_epoch(a), s / 3);
        ck_assert_uint_eq(lse_batcher_index(a), s % 3);
        const size_t *ra = lse_batcher_rows(a), *rb = lse_batcher_rows(b),
                     *rc = lse_batcher_rows(c), *ri = lse_batcher_rows(id);
        for (size_t i = 0; i < 3; i++) {
            ck_assert_uint_eq(ra[i], rb[i]); /* same seed, same rows */
            ck_assert_uint_eq(ri[i], 3 * (s % 3) + i); /* no shuffle */
            differ_seed |= ra[i] != rc[i];
            seen_ab[s][i] = ra[i];
        }
    }
    ck_assert(differ_seed);
    /* each epoch: 9 distinct rows out of 10 */
    for (size_t ep = 0; ep < 2; ep++) {
        int used[10] = {0};
        for (size_t s = 0; s < 3; s++)
            for (size_t i = 0; i < 3; i++) {
                ck_assert_uint_lt(seen_ab[3 * ep + s][i], 10);
                ck_assert_int_eq(used[seen_ab[3 * ep + s][i]], 0);
                used[seen_ab[3 * ep + s][i]] = 1;
            }
    }
    for (size_t s = 0; s < 3; s++)
        for (size_t i = 0; i < 3; i++)
            differ_epoch |= seen_ab[s][i] != seen_ab[3 + s][i];
    ck_assert(differ_epoch);
    /* seek: resume at epoch 1, batch 2 */
    lse_assert_ok(lse_batcher_seek(c, 1, 2));
    lse_assert_status(lse_batcher_seek(c, 1, 3), LSE_ERANGE);
    lse_batcher *d;
    lse_assert_ok(lse_batcher_new(10, 3, 42, 1, &d, NULL));
    lse_assert_ok(lse_batcher_seek(d, 1, 2));
    lse_assert_ok(lse_batcher_next(d));
    for (size_t i = 0; i < 3; i++)
        ck_assert_uint_eq(lse_batcher_rows(d)[i], seen_ab[5][i]);
    /* gather */
    gsl_matrix *src = gsl_matrix_alloc(10, 2), *dst = gsl_matrix_alloc(3, 2);
    for (size_t i = 0; i < 10; i++) {
        gsl_matrix_set(src, i, 0, (double)i);
        gsl_matrix_set(src, i, 1, -(double)i);
    }
    lse_assert_ok(lse_batcher_gather(d, src, dst));
    for (size_t i = 0; i < 3; i++) {
        ck_assert_double_eq(gsl_matrix_get(dst, i, 0), (double)seen_ab[5][i]);
        ck_assert_double_eq(gsl_matrix_get(dst, i, 1), -(double)seen_ab[5][i]);
    }
    gsl_matrix *bad = gsl_matrix_alloc(2, 2);
    lse_assert_status(lse_batcher_gather(d, src, bad), LSE_EDIM);
    lse_batcher *e;
    lse_assert_ok(lse_batcher_new(10, 10, 1, 1, &e, NULL));
    gsl_matrix *dst10 = gsl_matrix_alloc(10, 2);
    lse_assert_status(lse_batcher_gather(e, src, dst10), LSE_EINVAL); /* no batch */
    lse_error err;
    lse_batcher *f = NULL;
    lse_assert_status(lse_batcher_new(10, 11, 1, 1, &f, &err), LSE_EDOM);
    ck_assert_ptr_null(f);
    lse_assert_status(lse_batcher_new(10, 0, 1, 1, &f, &err), LSE_EDOM);
    gsl_matrix_free(dst10);
    gsl_matrix_free(bad);
    gsl_matrix_free(src);
    gsl_matrix_free(dst);
    lse_batcher_free(a);
    lse_batcher_free(b);
    lse_batcher_free(c);
    lse_batcher_free(d);
    lse_batcher_free(e);
    lse_batcher_free(id);
}
END_TEST

/* ---- infer -> learn ---- */

/* tokens X (8, 2) clamped, one free state s (1, 2) explaining them by
 * -lse(X s) + 1/2 ||s||^2, memories M (2, 2) PARAM explaining s by
 * -lse(M s) + 1/2 ||M||^2 */
static lse_graph *il_graph(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *s, *m;
    lse_assert_ok(lse_graph_add_node(g, "x", 8, 2, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "s", 1, 2, 0, &s));
    lse_assert_ok(lse_graph_add_node(g, "m", 2, 2, LSE_NODE_PARAM, &m));
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(x), i, j, 1.0 + 0.5 * sin(1.3 * i + 2.0 * j));
    gsl_matrix_set(lse_node_value(m), 0, 0, 0.1);
    gsl_matrix_set(lse_node_value(m), 1, 1, -0.2);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(s);
    spec.parent = lse_view_all(x);
    spec.sim = lse_sim_dot;
    lse_assert_ok(lse_graph_add_lse(g, "explain", &spec, NULL));
    spec.parent = lse_view_all(m);
    lse_assert_ok(lse_graph_add_lse(g, "memory", &spec, NULL));
    lse_view v = lse_view_all(s);
    lse_assert_ok(lse_graph_add_custom(g, "bound_s", lse_custom_quadratic, NULL, &v, 1, NULL));
    v = lse_view_all(m);
    lse_assert_ok(lse_graph_add_custom(g, "bound_m", lse_custom_quadratic, NULL, &v, 1, NULL));
    return g;
}

START_TEST(test_learn_step)
{
    /* lse_learn_step = ode_run + graph_gradient + optim_step, bit for bit */
    lse_graph *g1 = il_graph(), *g2 = il_graph();
    lse_optim *o1 = lse_optim_new(g1, NULL), *o2 = lse_optim_new(g2, NULL);
    ck_assert_uint_eq(lse_optim_n_nodes(o1), 1);
    lse_ode *i1 = lse_ode_new(g1), *i2 = lse_ode_new(g2);
    lse_assert_status(lse_learn_step(i2, o1, NULL), LSE_EINVAL);
    lse_node *s1 = lse_graph_find_node(g1, "s"), *s2 = lse_graph_find_node(g2, "s");
    double e_first = 0.0, e = 0.0;
    for (size_t k = 0; k < 200; k++) {
        gsl_matrix_set_zero(lse_node_value(s1)); /* re-initialise the state */
        gsl_matrix_set_zero(lse_node_value(s2));
        lse_assert_ok(lse_learn_step(i1, o1, &e));
        lse_assert_ok(lse_ode_run(i2, NULL));
        double e2;
        lse_assert_ok(lse_graph_gradient(g2, &e2));
        lse_assert_ok(lse_optim_step(o2));
        ck_assert(memcmp(&e, &e2, sizeof e) == 0);
        if (k == 0)
            e_first = e;
    }
    ck_assert(gsl_matrix_equal(lse_node_value(lse_graph_find_node(g1, "m")),
                               lse_node_value(lse_graph_find_node(g2, "m"))));
    /* the energy at the inferred state fell */
    ck_assert_double_lt(e, e_first - 0.1);
    lse_ode_free(i1);
    lse_ode_free(i2);
    lse_optim_free(o1);
    lse_optim_free(o2);
    lse_graph_free(g1);
    lse_graph_free(g2);
}
END_TEST

/* the data of fit_graph's rows [first, first + count) */
static lse_graph *shard_graph(size_t first, size_t count)
{
    lse_graph *full = fit_graph();
    lse_graph *g = lse_graph_new();
    lse_node *x, *mu;
    lse_assert_ok(lse_graph_add_node(g, "x", count, 2, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "mu", 3, 2, LSE_NODE_PARAM, &mu));
    gsl_matrix_const_view rows = gsl_matrix_const_submatrix(
        lse_node_value(lse_graph_find_node(full, "x")), first, 0, count, 2);
    lse_assert_ok(lse_node_set_value(x, &rows.matrix));
    lse_assert_ok(lse_node_set_value(mu, lse_node_value(lse_graph_find_node(full, "mu"))));
    lse_graph_free(full);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_neg_dist;
    lse_assert_ok(lse_graph_add_lse(g, "fit", &spec, NULL));
    return g;
}

typedef struct other_rank {
    lse_graph *mine, *other;
    int fail;
} other_rank;

/* a simulated Allreduce: add the other shard's gradient at the same
 * parameters */
static lse_status add_other(double *buf, size_t n, void *user)
{
    other_rank *r = user;
    if (r->fail)
        return LSE_EIO;
    lse_node *mo = lse_graph_find_node(r->other, "mu");
    lse_assert_ok(lse_node_set_value(mo, lse_node_value(lse_graph_find_node(r->mine, "mu"))));
    double e;
    lse_assert_ok(lse_graph_gradient(r->other, &e));
    ck_assert_uint_eq(n, 6);
    for (size_t i = 0; i < n; i++)
        buf[i] += gsl_matrix_get(lse_node_grad(mo), i / 2, i % 2);
    return LSE_OK;
}

START_TEST(test_reduce_hook)
{
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.05;
    oo.clip_norm = 3.0; /* the global norm is that of the summed gradient */
    lse_graph *full = fit_graph();
    lse_optim *of = lse_optim_new(full, &oo);
    run_steps(full, of, 25);
    lse_graph *h1 = shard_graph(0, 5), *h2 = shard_graph(5, 7);
    lse_optim *o1 = lse_optim_new(h1, &oo);
    other_rank r = {h1, h2, 0};
    lse_optim_set_reduce(o1, add_other, &r);
    run_steps(h1, o1, 25);
    const gsl_matrix *a = lse_node_value(lse_graph_find_node(full, "mu"));
    const gsl_matrix *b = lse_node_value(lse_graph_find_node(h1, "mu"));
    double dmax = 0.0, moved = 0.0;
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++) {
            dmax = fmax(dmax, fabs(gsl_matrix_get(a, i, j) - gsl_matrix_get(b, i, j)));
            moved = fmax(moved, fabs(gsl_matrix_get(a, i, j) - 0.5 * cos(2.0 * i + j)));
        }
    ck_assert_double_le(dmax, 1e-12);
    ck_assert_double_gt(moved, 0.1);
    /* a failing hook: its status, nothing moves */
    r.fail = 1;
    gsl_matrix *before = gsl_matrix_alloc(3, 2);
    gsl_matrix_memcpy(before, b);
    double e;
    lse_assert_ok(lse_graph_gradient(h1, &e));
    lse_assert_status(lse_optim_step(o1), LSE_EIO);
    ck_assert(gsl_matrix_equal(before, b));
    ck_assert_uint_eq(lse_optim_n_step(o1), 25);
    gsl_matrix_free(before);
    lse_optim_free(of);
    lse_optim_free(o1);
    lse_graph_free(full);
    lse_graph_free(h1);
    lse_graph_free(h2);
}
END_TEST

/* the rows [first, first + count) of fit_graph, one at a time, into the
 * 1-row graph g: each row's gradient accumulated exactly into o */
static void accumulate_rows(lse_graph *g, lse_optim *o, const size_t *order,
                            size_t count)
{
    lse_graph *full = fit_graph();
    const gsl_matrix *xs = lse_node_value(lse_graph_find_node(full, "x"));
    lse_node *x = lse_graph_find_node(g, "x");
    for (size_t i = 0; i < count; i++) {
        gsl_matrix_const_view row = gsl_matrix_const_submatrix(xs, order[i], 0, 1, 2);
        lse_assert_ok(lse_node_set_value(x, &row.matrix));
        double e;
        lse_assert_ok(lse_graph_gradient(g, &e));
        lse_assert_ok(lse_optim_accumulate(o));
    }
    lse_graph_free(full);
}

typedef struct xshare {
    lse_graph *mine, *other;
    size_t first, count; /* the other process's rows */
} xshare;

/* a simulated Allreduce of exact accumulators: add the exports of the
 * other process's rows (accumulated row by row at the same parameters) */
static lse_status add_other_exact(double *buf, size_t n, void *user)
{
    xshare *r = user;
    ck_assert_uint_eq(n, 6 * LSE_XSUM_EXPORT);
    lse_graph *full = fit_graph();
    const gsl_matrix *xs = lse_node_value(lse_graph_find_node(full, "x"));
    lse_node *mo = lse_graph_find_node(r->other, "mu");
    lse_assert_ok(lse_node_set_value(mo, lse_node_value(lse_graph_find_node(r->mine, "mu"))));
    lse_xsum acc[6];
    memset(acc, 0, sizeof acc);
    for (size_t i = r->first; i < r->first + r->count; i++) {
        gsl_matrix_const_view row = gsl_matrix_const_submatrix(xs, i, 0, 1, 2);
        lse_assert_ok(lse_node_set_value(lse_graph_find_node(r->other, "x"), &row.matrix));
        double e;
        lse_assert_ok(lse_graph_gradient(r->other, &e));
        for (size_t k = 0; k < 6; k++)
            lse_xsum_add(&acc[k], gsl_matrix_get(lse_node_grad(mo), k / 2, k % 2));
    }
    double ex[LSE_XSUM_EXPORT];
    for (size_t k = 0; k < 6; k++) {
        lse_xsum_export(&acc[k], ex);
        for (size_t j = 0; j < LSE_XSUM_EXPORT; j++)
            buf[k * LSE_XSUM_EXPORT + j] += ex[j];
    }
    lse_graph_free(full);
    return LSE_OK;
}

START_TEST(test_accumulate_exact)
{
    /* 12 rows accumulated one by one in two orders, and split over two
     * simulated processes (rows 0-4 here, 5-11 through the hook): the same
     * bits every step; and within 1e-12 of the plain full-batch steps */
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.05;
    oo.clip_norm = 3.0;
    lse_graph *full = fit_graph();
    lse_optim *of = lse_optim_new(full, &oo);
    lse_graph *ga = shard_graph(0, 1), *gb = shard_graph(0, 1), *gc = shard_graph(0, 1);
    lse_graph *other = shard_graph(0, 1);
    lse_optim *oa = lse_optim_new(ga, &oo), *ob = lse_optim_new(gb, &oo),
              *oc = lse_optim_new(gc, &oo);
    xshare r = {gc, other, 5, 7};
    lse_optim_set_reduce(oc, add_other_exact, &r);
    size_t fwd[12], rev[12];
    for (size_t i = 0; i < 12; i++) {
        fwd[i] = i;
        rev[i] = 11 - i;
    }
    ck_assert_uint_eq(lse_optim_n_accumulated(oa), 0);
    for (size_t s = 0; s < 25; s++) {
        run_steps(full, of, 1);
        accumulate_rows(ga, oa, fwd, 12);
        ck_assert_uint_eq(lse_optim_n_accumulated(oa), 12);
        lse_assert_ok(lse_optim_step(oa));
        ck_assert_uint_eq(lse_optim_n_accumulated(oa), 0);
        accumulate_rows(gb, ob, rev, 12);
        lse_assert_ok(lse_optim_step(ob));
        accumulate_rows(gc, oc, fwd, 5);
        lse_assert_ok(lse_optim_step(oc));
        const gsl_matrix *a = lse_node_value(lse_graph_find_node(ga, "mu"));
        const gsl_matrix *b = lse_node_value(lse_graph_find_node(gb, "mu"));
        const gsl_matrix *c = lse_node_value(lse_graph_find_node(gc, "mu"));
        const gsl_matrix *f = lse_node_value(lse_graph_find_node(full, "mu"));
        ck_assert(memcmp(a->data, b->data, 6 * sizeof(double)) == 0);
        ck_assert(memcmp(a->data, c->data, 6 * sizeof(double)) == 0);
        for (size_t k = 0; k < 6; k++)
            ck_assert_double_eq_tol(a->data[k], f->data[k], 1e-12);
    }
    /* the last row moved the parameters */
    ck_assert_double_gt(fabs(gsl_matrix_get(lse_node_value(lse_graph_find_node(ga, "mu")), 0, 0) -
                             0.5), 0.1);
    /* a reset empties the accumulators */
    accumulate_rows(ga, oa, fwd, 3);
    lse_optim_reset(oa);
    ck_assert_uint_eq(lse_optim_n_accumulated(oa), 0);
    accumulate_rows(ga, oa, fwd, 2);
    lse_assert_ok(lse_optim_set_nodes(oa, NULL, 0));
    ck_assert_uint_eq(lse_optim_n_accumulated(oa), 0);
    accumulate_rows(ga, oa, fwd, 2); /* accumulating again after the reset */
    ck_assert_uint_eq(lse_optim_n_accumulated(oa), 2);
    lse_assert_status(lse_optim_accumulate(NULL), LSE_EFAULT);
    ck_assert_uint_eq(lse_optim_n_accumulated(NULL), 0);
    lse_optim_free(of);
    lse_optim_free(oa);
    lse_optim_free(ob);
    lse_optim_free(oc);
    lse_graph_free(full);
    lse_graph_free(ga);
    lse_graph_free(gb);
    lse_graph_free(gc);
    lse_graph_free(other);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sgd_momentum);
    tcase_add_test(tc, test_adam_family);
    tcase_add_test(tc, test_clipping_and_schedules);
    tcase_add_test(tc, test_convex_convergence);
    tcase_add_test(tc, test_save_resume_bit_identical);
    tcase_add_test(tc, test_set_nodes);
    tcase_add_test(tc, test_batcher);
    tcase_add_test(tc, test_learn_step);
    tcase_add_test(tc, test_reduce_hook);
    tcase_add_test(tc, test_accumulate_exact);
    suite_add_tcase(s, tc);
    return s;
}
