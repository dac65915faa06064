#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_eigen.h>

#include "lse_check.h"

/* ---- a linear-quadratic graph: E = 1/2 x'Ax - b'x over x (2, 3) flat ---- */

typedef struct lq_config {
    const gsl_matrix *a; /* (6, 6) SPD */
    const gsl_vector *b; /* (6) */
} lq_config;

static double lq_flat(const gsl_matrix *x, size_t i)
{
    return gsl_matrix_get(x, i / x->size2, i % x->size2);
}

static lse_status lq_energy(const gsl_matrix *const *v, size_t n_view,
                            const void *config, double *e)
{
    (void)n_view;
    const lq_config *c = config;
    const size_t n = c->b->size;
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double ax = 0.0;
        for (size_t j = 0; j < n; j++)
            ax += gsl_matrix_get(c->a, i, j) * lq_flat(v[0], j);
        s += lq_flat(v[0], i) * (0.5 * ax - gsl_vector_get(c->b, i));
    }
    *e = s;
    return LSE_OK;
}

static lse_status lq_grad(const gsl_matrix *const *v, size_t n_view,
                          const void *config, gsl_matrix *const *g, double *e)
{
    const lq_config *c = config;
    const size_t n = c->b->size, d = v[0]->size2;
    for (size_t i = 0; g[0] != NULL && i < n; i++) {
        double ax = 0.0;
        for (size_t j = 0; j < n; j++)
            ax += gsl_matrix_get(c->a, i, j) * lq_flat(v[0], j);
        *gsl_matrix_ptr(g[0], i / d, i % d) += ax - gsl_vector_get(c->b, i);
    }
    return lq_energy(v, n_view, config, e);
}

static const lse_custom_type lq_type = {"lq", 0, NULL, lq_energy, lq_grad,
                                        NULL};

typedef struct lq_problem {
    gsl_matrix *a;
    gsl_vector *b;
    lq_config cfg;
    lse_graph *g;
    lse_node *x;
    double x0[6];
} lq_problem;

static void lq_setup(lq_problem *p)
{
    const size_t n = 6;
    p->a = gsl_matrix_alloc(n, n);
    p->b = gsl_vector_alloc(n);
    /* A = Q diag(lambda) Q' with a fixed rotation-ish Q from Gram-Schmidt */
    gsl_matrix *m = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(m, i, j, sin(1.3 * i + 0.7 * j + 0.2 * i * j));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t k = 0; k < n; k++)
                s += gsl_matrix_get(m, i, k) * gsl_matrix_get(m, j, k);
            gsl_matrix_set(p->a, i, j, 0.25 * s + (i == j ? 0.3 : 0.0));
        }
    gsl_matrix_free(m);
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(p->b, i, cos(0.9 * i + 0.1));
    p->cfg.a = p->a;
    p->cfg.b = p->b;
    p->g = lse_graph_new();
    lse_assert_ok(lse_graph_add_node(p->g, "x", 2, 3, 0, &p->x));
    for (size_t i = 0; i < n; i++) {
        p->x0[i] = 1.5 * sin(2.1 * i + 0.4);
        gsl_matrix_set(lse_node_value(p->x), i / 3, i % 3, p->x0[i]);
    }
    const lse_view v = lse_view_all(p->x);
    lse_assert_ok(lse_graph_add_custom(p->g, "lq", &lq_type, &p->cfg, &v, 1, NULL));
}

static void lq_free(lq_problem *p)
{
    lse_graph_free(p->g);
    gsl_matrix_free(p->a);
    gsl_vector_free(p->b);
}

/* x(t) = x* + V exp(-Lambda t) V' (x0 - x*), x* = A^-1 b, A = V Lambda V' */
static void lq_exact(const lq_problem *p, double t, double *out)
{
    const size_t n = 6;
    gsl_matrix *a = gsl_matrix_alloc(n, n);
    gsl_matrix_memcpy(a, p->a);
    gsl_vector *lam = gsl_vector_alloc(n);
    gsl_matrix *v = gsl_matrix_alloc(n, n);
    gsl_eigen_symmv_workspace *w = gsl_eigen_symmv_alloc(n);
    ck_assert_int_eq(gsl_eigen_symmv(a, lam, v, w), 0);
    double xs[6], z[6];
    for (size_t k = 0; k < n; k++) { /* z = V' b / lambda -> x* = V z */
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += gsl_matrix_get(v, i, k) * gsl_vector_get(p->b, i);
        z[k] = s / gsl_vector_get(lam, k);
    }
    for (size_t i = 0; i < n; i++) {
        xs[i] = 0.0;
        for (size_t k = 0; k < n; k++)
            xs[i] += gsl_matrix_get(v, i, k) * z[k];
    }
    for (size_t k = 0; k < n; k++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += gsl_matrix_get(v, i, k) * (p->x0[i] - xs[i]);
        z[k] = s * exp(-gsl_vector_get(lam, k) * t);
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = xs[i];
        for (size_t k = 0; k < n; k++)
            out[i] += gsl_matrix_get(v, i, k) * z[k];
    }
    gsl_eigen_symmv_free(w);
    gsl_matrix_free(v);
    gsl_vector_free(lam);
    gsl_matrix_free(a);
}

static double lq_run(double tol, double t1, size_t *n_acc)
{
    lq_problem p;
    lq_setup(&p);
    lse_ode *o = lse_ode_new(p.g);
    ck_assert_ptr_nonnull(o);
    lse_ode_opts opts = lse_ode_opts_default();
    opts.rtol = opts.atol = tol;
    opts.t1 = t1;
    opts.max_steps = 1000000;
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_solver_result r;
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_double_eq(lse_ode_t(o), t1);
    double ex[6], err = 0.0;
    lq_exact(&p, t1, ex);
    for (size_t i = 0; i < 6; i++)
        err = fmax(err, fabs(gsl_matrix_get(lse_node_value(p.x), i / 3, i % 3) -
                             ex[i]));
    /* the energy never rises along accepted steps (up to round-off) */
    ck_assert_double_le(lse_ode_max_increase(o), 1e-12);
    *n_acc = lse_ode_n_accepted(o);
    ck_assert_uint_eq(r.n_iter, lse_ode_n_accepted(o) + lse_ode_n_rejected(o));
    lse_ode_free(o);
    lq_free(&p);
    return err;
}

START_TEST(test_lq_exact)
{
    /* Against the matrix-exponential solution: the global error is of the
     * order of the tolerance and falls with it at the method's rate. */
    size_t n3, n5, n7;
    const double e3 = lq_run(1e-3, 4.0, &n3);
    const double e5 = lq_run(1e-5, 4.0, &n5);
    const double e7 = lq_run(1e-7, 4.0, &n7);
    ck_assert_double_le(e3, 1e-3);
    ck_assert_double_le(e5, 1e-5);
    ck_assert_double_le(e7, 1e-7);
    ck_assert_double_lt(e5, e3 / 10.0);
    ck_assert_double_lt(e7, e5 / 10.0);
    /* local error ~ h^2: 100x smaller tolerance needs ~10x the steps */
    ck_assert_uint_gt(n5, 4 * n3);
    ck_assert_uint_gt(n7, 4 * n5);
}
END_TEST

START_TEST(test_manual_loop_and_determinism)
{
    double first[6];
    for (int rep = 0; rep < 2; rep++) {
        lq_problem p;
        lq_setup(&p);
        lse_ode *o = lse_ode_new(p.g);
        lse_assert_status(lse_ode_iterate(o), LSE_EINVAL); /* no init */
        lse_assert_status(lse_ode_test(o), LSE_CONTINUE);
        lse_assert_ok(lse_ode_init(o));
        ck_assert_uint_eq(lse_ode_size(o), 6);
        ck_assert_double_eq(lse_ode_t(o), 0.0);
        ck_assert_double_gt(lse_ode_h(o), 0.0);
        double e_prev = lse_ode_energy(o), t_prev = 0.0;
        size_t it = 0;
        while (lse_ode_test(o) == LSE_CONTINUE) {
            lse_assert_ok(lse_ode_iterate(o));
            it++;
            if (lse_ode_last_accepted(o)) {
                ck_assert_double_le(lse_ode_error(o), 1.0);
                ck_assert_double_le(lse_ode_energy(o), e_prev + 1e-12);
                ck_assert_double_gt(lse_ode_t(o), t_prev);
                /* the graph holds the accepted point */
                double e;
                lse_assert_ok(lse_graph_energy(p.g, &e));
                ck_assert_double_eq_tol(e, lse_ode_energy(o), 1e-12);
            } else {
                ck_assert_double_gt(lse_ode_error(o), 1.0);
                ck_assert_double_eq(lse_ode_t(o), t_prev);
            }
            e_prev = lse_ode_energy(o);
            t_prev = lse_ode_t(o);
            ck_assert_uint_lt(it, 100000);
        }
        ck_assert_double_eq(lse_ode_t(o), 20.0);
        ck_assert_uint_eq(it, lse_ode_n_accepted(o) + lse_ode_n_rejected(o));
        ck_assert_uint_ge(lse_ode_n_eval(o), 2 * lse_ode_n_accepted(o));
        /* iterate after t1 is a no-op */
        lse_assert_ok(lse_ode_iterate(o));
        ck_assert_double_eq(lse_ode_t(o), 20.0);
        for (size_t i = 0; i < 6; i++) {
            const double v = gsl_matrix_get(lse_node_value(p.x), i / 3, i % 3);
            if (rep == 0)
                first[i] = v;
            else
                ck_assert(memcmp(&first[i], &v, sizeof v) == 0); /* same bits */
        }
        lse_ode_free(o);
        lq_free(&p);
    }
}
END_TEST

START_TEST(test_options_and_selection)
{
    lq_problem p;
    lq_setup(&p);
    lse_ode *o = lse_ode_new(p.g);
    lse_ode_opts opts = lse_ode_opts_default();
    ck_assert_double_eq(opts.t1, 20.0);
    ck_assert_double_eq(opts.rtol, 1e-3);
    ck_assert_double_eq(opts.atol, 1e-3);
    lse_ode_opts bad = opts;
    bad.t1 = 0.0;
    lse_assert_status(lse_ode_set_opts(o, &bad), LSE_EDOM);
    bad = opts;
    bad.rtol = bad.atol = 0.0;
    lse_assert_status(lse_ode_set_opts(o, &bad), LSE_EDOM);
    bad = opts;
    bad.factor_min = 1.5;
    lse_assert_status(lse_ode_set_opts(o, &bad), LSE_EDOM);
    bad = opts;
    bad.safety = 0.0;
    lse_assert_status(lse_ode_set_opts(o, &bad), LSE_EDOM);
    bad = opts;
    bad.max_steps = 0;
    lse_assert_status(lse_ode_set_opts(o, &bad), LSE_EDOM);
    bad = opts;
    bad.pcoeff = bad.icoeff = bad.dcoeff = 0.0;
    lse_assert_status(lse_ode_set_opts(o, &bad), LSE_EDOM);
    lse_assert_status(lse_ode_set_opts(o, NULL), LSE_EFAULT);
    ck_assert_ptr_null(lse_ode_new(NULL));

    /* a clamped x: nothing to integrate */
    lse_node_set_clamped(p.x, 1);
    lse_assert_status(lse_ode_init(o), LSE_EINVAL);
    lse_node_set_clamped(p.x, 0);
    /* a parameter node is integrated only when selected */
    lse_graph *g2 = lse_graph_new();
    lse_node *w;
    lse_assert_ok(lse_graph_add_node(g2, "w", 1, 1, LSE_NODE_PARAM, &w));
    lse_node *const sel[] = {w};
    lse_assert_status(lse_ode_set_nodes(o, sel, 1), LSE_EINVAL); /* other graph */
    lse_graph_free(g2);
    lse_node *const selx[] = {p.x};
    lse_assert_ok(lse_ode_set_nodes(o, selx, 1));
    /* a max_steps cap: not converged, status OK */
    opts.max_steps = 3;
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_solver_result r;
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_int_eq(r.converged, 0);
    ck_assert_int_eq(r.reason, LSE_STOP_MAX_ITER);
    ck_assert_uint_eq(r.n_iter, 3);
    /* tol_grad stops early, before t1 */
    opts = lse_ode_opts_default();
    opts.tol_grad = 1e-2;
    opts.rtol = opts.atol = 1e-6;
    opts.t1 = 1e6;
    opts.max_steps = 100000;
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_int_eq(r.reason, LSE_STOP_GRAD);
    ck_assert_double_le(lse_ode_grad_rms(o), 1e-2);
    ck_assert_double_lt(lse_ode_t(o), 1e6);
    lse_ode_free(o);
    lq_free(&p);
}
END_TEST

/* E = -sum log(1 - x^2): finite only inside (-1, 1); the flow goes to 0. */
static lse_status bar_energy(const gsl_matrix *const *v, size_t n_view,
                             const void *config, double *e)
{
    (void)n_view;
    (void)config;
    double s = 0.0;
    for (size_t j = 0; j < v[0]->size2; j++) {
        const double x = gsl_matrix_get(v[0], 0, j);
        s += (fabs(x) < 1.0) ? -log(1.0 - x * x) : NAN;
    }
    *e = s;
    return LSE_OK;
}

static lse_status bar_grad(const gsl_matrix *const *v, size_t n_view,
                           const void *config, gsl_matrix *const *g, double *e)
{
    for (size_t j = 0; g[0] != NULL && j < v[0]->size2; j++) {
        const double x = gsl_matrix_get(v[0], 0, j);
        *gsl_matrix_ptr(g[0], 0, j) += 2.0 * x / (1.0 - x * x);
    }
    return bar_energy(v, n_view, config, e);
}

static const lse_custom_type bar_type = {"barrier", 0, NULL, bar_energy,
                                         bar_grad, NULL};

START_TEST(test_nonfinite_trial_rejected)
{
    lse_graph *g = lse_graph_new();
    lse_node *x;
    lse_assert_ok(lse_graph_add_node(g, "x", 1, 2, 0, &x));
    gsl_matrix_set(lse_node_value(x), 0, 0, 0.5);
    gsl_matrix_set(lse_node_value(x), 0, 1, -0.7);
    const lse_view v = lse_view_all(x);
    lse_assert_ok(lse_graph_add_custom(g, "bar", &bar_type, NULL, &v, 1, NULL));
    lse_ode *o = lse_ode_new(g);
    lse_ode_opts opts = lse_ode_opts_default();
    opts.h0 = 10.0; /* the first trial leaves the domain */
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_solver_result r;
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_uint_ge(lse_ode_n_rejected(o), 1);
    ck_assert_double_le(fabs(gsl_matrix_get(lse_node_value(x), 0, 0)), 1e-3);
    ck_assert_double_le(fabs(gsl_matrix_get(lse_node_value(x), 0, 1)), 1e-3);
    /* h_min: a rejection below it is an error */
    gsl_matrix_set(lse_node_value(x), 0, 0, 0.5);
    opts.h_min = 5.0;
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_assert_status(lse_ode_run(o, &r), LSE_ENUMERIC);
    ck_assert_int_eq(r.reason, LSE_STOP_ERROR);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "h_min"));
    lse_ode_free(o);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_hopfield_fixed_point)
{
    /* The flow reaches the fixed point CCCP and GD reach. */
    const size_t K = 5, d = 4, n = 3;
    gsl_matrix *pat = gsl_matrix_alloc(K, d);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(pat, k, j, 1.2 * cos(1.1 * k + 2.3 * j + 0.3 * k * j));
    gsl_matrix *q = gsl_matrix_alloc(n, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(q, i, j, gsl_matrix_get(pat, i, j) + 0.3 * sin(3.0 * i + j));
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(pat, 2.0, &h, NULL));
    gsl_matrix *cccp = gsl_matrix_alloc(n, d), *gd = gsl_matrix_alloc(n, d);
    lse_assert_ok(lse_hopfield_set_tol(h, 0.0, 1e-12, NULL));
    lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 100000, cccp,
                                        NULL, NULL));
    lse_assert_ok(
        lse_hopfield_retrieve(h, q, LSE_HOPFIELD_GD, 100000, gd, NULL, NULL));
    lse_graph *g = lse_hopfield_graph(h);
    lse_node *state = lse_graph_find_node(g, "state");
    lse_node *mem = lse_graph_find_node(g, "memories");
    ck_assert_ptr_nonnull(state);
    gsl_matrix *m0 = gsl_matrix_alloc(K, d);
    gsl_matrix_memcpy(m0, lse_node_value(mem));
    lse_assert_ok(lse_node_set_value(state, q));
    lse_ode *o = lse_ode_new(g);
    lse_ode_opts opts = lse_ode_opts_default(); /* the reference's tolerances */
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_solver_result r;
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_int_eq(r.converged, 1);
    double dmax = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            dmax = fmax(dmax, fabs(gsl_matrix_get(lse_node_value(state), i, j) -
                                   gsl_matrix_get(cccp, i, j)));
    ck_assert_double_le(dmax, 1e-3);
    /* tighter: to 1e-8 */
    lse_assert_ok(lse_node_set_value(state, q));
    opts.rtol = opts.atol = 1e-9;
    opts.t1 = 60.0;
    opts.max_steps = 1000000;
    lse_assert_ok(lse_ode_set_opts(o, &opts));
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_double_le(lse_ode_max_increase(o), 1e-12);
    dmax = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            const double v = gsl_matrix_get(lse_node_value(state), i, j);
            dmax = fmax(dmax, fabs(v - gsl_matrix_get(cccp, i, j)));
            dmax = fmax(dmax, fabs(v - gsl_matrix_get(gd, i, j)));
        }
    ck_assert_double_le(dmax, 1e-7);
    /* the memories (a clamped parameter) never moved */
    ck_assert(gsl_matrix_equal(m0, lse_node_value(mem)));
    lse_ode_free(o);
    lse_hopfield_free(h);
    gsl_matrix_free(m0);
    gsl_matrix_free(cccp);
    gsl_matrix_free(gd);
    gsl_matrix_free(q);
    gsl_matrix_free(pat);
}
END_TEST

static lse_attention *cross(size_t n, size_t m, size_t d)
{
    gsl_matrix *q = gsl_matrix_alloc(n, d), *k = gsl_matrix_alloc(m, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(q, i, j, 0.8 * sin(0.37 * i + 1.3 * j + 0.2));
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(k, i, j, 1.5 * cos(1.1 * i + 2.3 * j));
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_cross_new(q, k, NULL, &a, NULL));
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    return a;
}

START_TEST(test_attention_fixed_point)
{
    /* cross attention (scaled dot, lambda = 1/sqrt(d)): the flow reaches
     * the queries' fixed point that gradient descent reaches */
    lse_attention *a = cross(20, 6, 4), *b = cross(20, 6, 4);
    lse_graph *ga = lse_attention_graph(a), *gb = lse_attention_graph(b);
    lse_node *qa = lse_attention_state(a), *qb = lse_attention_state(b);
    lse_solver *s = lse_solver_new(ga, lse_solver_gd);
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 0.0;
    so.tol_grad = 1e-11;
    lse_assert_ok(lse_solver_set_opts(s, &so));
    lse_node *const sel[] = {qa};
    lse_assert_ok(lse_solver_set_nodes(s, sel, 1));
    lse_solver_result r;
    lse_assert_ok(lse_solver_run(s, 100000, NULL, NULL, &r));
    lse_ode *o = lse_ode_new(gb);
    lse_ode_opts oo = lse_ode_opts_default();
    oo.rtol = oo.atol = 1e-9;
    oo.t1 = 1e4;
    oo.tol_grad = 1e-9;
    oo.max_steps = 1000000;
    lse_assert_ok(lse_ode_set_opts(o, &oo));
    lse_assert_ok(lse_ode_run(o, &r));
    ck_assert_int_eq(r.converged, 1);
    ck_assert_int_eq(r.reason, LSE_STOP_GRAD);
    ck_assert_double_le(lse_ode_max_increase(o), 1e-12);
    /* gradient descent stops at round-off (no decreasing step) with
     * ||g|| ~ 3e-7: the two agree to that level */
    for (size_t i = 0; i < 20; i++)
        for (size_t j = 0; j < 4; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(lse_node_value(qa), i, j),
                                    gsl_matrix_get(lse_node_value(qb), i, j), 2e-6);
    ck_assert_double_eq_tol(lse_solver_energy(s), lse_ode_energy(o), 1e-10);
    lse_ode_free(o);
    lse_solver_free(s);
    lse_attention_free(a);
    lse_attention_free(b);
}
END_TEST

START_TEST(test_threads_bit_identical)
{
    /* 700 queries: several chunks of rows; 1 and 2 threads, same bits */
    gsl_matrix *res[2];
    for (int th = 0; th < 2; th++) {
        lse_set_thread_min_work(0.0); /* the count on small data too */
        lse_set_num_threads(th + 1);
        lse_attention *a = cross(700, 9, 4);
        lse_ode *o = lse_ode_new(lse_attention_graph(a));
        lse_ode_opts oo = lse_ode_opts_default();
        oo.t1 = 5.0;
        lse_assert_ok(lse_ode_set_opts(o, &oo));
        lse_assert_ok(lse_ode_run(o, NULL));
        res[th] = gsl_matrix_alloc(700, 4);
        gsl_matrix_memcpy(res[th], lse_node_value(lse_attention_state(a)));
        lse_ode_free(o);
        lse_attention_free(a);
    }
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
    ck_assert(memcmp(res[0]->data, res[1]->data, 700 * 4 * sizeof(double)) == 0);
    gsl_matrix_free(res[0]);
    gsl_matrix_free(res[1]);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("ode");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60); /* the thread test runs the solver 4 times */
    tcase_add_test(tc, test_lq_exact);
    tcase_add_test(tc, test_manual_loop_and_determinism);
    tcase_add_test(tc, test_options_and_selection);
    tcase_add_test(tc, test_nonfinite_trial_rejected);
    tcase_add_test(tc, test_hopfield_fixed_point);
    tcase_add_test(tc, test_attention_fixed_point);
    tcase_add_test(tc, test_threads_bit_identical);
    suite_add_tcase(s, tc);
    return s;
}
