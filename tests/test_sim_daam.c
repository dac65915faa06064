/* Tests of the DAAM similarity (lib/sim/daam.c): values against the
 * paper's gate written out literally, gradients (children through the
 * statistics, head offsets, widths) on both axes, and error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

#define N 6 /* child rows */
#define H 3 /* heads */
#define D 5 /* features */

/* high-entropy values */
static gsl_matrix *make(size_t n, size_t d, double seed, double scale,
                        double shift)
{
    gsl_matrix *m = gsl_matrix_alloc(n, d);
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++)
            gsl_matrix_set(
                m, i, k,
                shift +
                    scale * (0.8127 * sin(1.3 + seed + 2.1 * (double)i +
                                          1.7 * (double)k) +
                             0.3931 * cos(0.7 * seed + 0.9 * (double)(i * k))));
    return m;
}

/* gate widths: a negative one included (S depends on c^2) */
static gsl_matrix *widths(void)
{
    gsl_matrix *c = gsl_matrix_alloc(H, 1);
    ck_assert_ptr_nonnull(c);
    gsl_matrix_set(c, 0, 0, 0.8127);
    gsl_matrix_set(c, 1, 0, 1.4319);
    gsl_matrix_set(c, 2, 0, -0.6583);
    return c;
}

static lse_daam_config cfg_axis(lse_daam_axis axis)
{
    lse_daam_config cfg =
        *(const lse_daam_config *)lse_sim_daam->config_default;
    cfg.axis = axis;
    return cfg;
}

static size_t c_rows = H, c_cols = 1;

static lse_sim_shape shape_of(const gsl_matrix *x, const gsl_matrix *delta,
                              const gsl_matrix *c)
{
    c_rows = c->size1;
    c_cols = c->size2;
    return (lse_sim_shape){.n_child = x->size1,
                           .block = x->size1,
                           .n_parent = delta->size1,
                           .d_child = x->size2,
                           .d_parent = delta->size2,
                           .d_context = 0,
                           .n_param = 1,
                           .param_rows = &c_rows,
                           .param_cols = &c_cols};
}

static lse_status run_eval(const lse_daam_config *cfg, const gsl_matrix *x,
                           const gsl_matrix *delta, const gsl_matrix *c,
                           gsl_matrix *s)
{
    const lse_sim_shape shape = shape_of(x, delta, c);
    char msg[256];
    lse_status st = lse_sim_daam->check(&shape, cfg, msg, sizeof msg);
    if (st != LSE_OK)
        return st;
    void *work = NULL;
    st = lse_sim_daam->work_new(&shape, cfg, &work);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *param[1] = {c};
    const lse_sim_args a = {.child = x,
                            .parent = delta,
                            .param = param,
                            .config = cfg,
                            .work = work};
    st = lse_sim_daam->eval(&a, s);
    lse_sim_daam->work_free(work);
    return st;
}

/* The paper, literally: m, v over the axis; y = (x - (m + delta)) /
 * sqrt(v + eps); S = log prod_j exp(-y^2 / (2 c^2)). */
static double paper_score(const gsl_matrix *x, const gsl_matrix *delta,
                          const gsl_matrix *c, lse_daam_axis axis, double eps,
                          size_t i, size_t h)
{
    const size_t n = x->size1, d = x->size2;
    double prod = 1.0;
    for (size_t j = 0; j < d; j++) {
        double m = 0.0, v = 0.0;
        if (axis == LSE_DAAM_FEATURES) {
            for (size_t k = 0; k < d; k++)
                m += gsl_matrix_get(x, i, k) / (double)d;
            for (size_t k = 0; k < d; k++)
                v += pow(gsl_matrix_get(x, i, k) - m, 2) / (double)d;
        } else {
            for (size_t r = 0; r < n; r++)
                m += gsl_matrix_get(x, r, j) / (double)n;
            for (size_t r = 0; r < n; r++)
                v += pow(gsl_matrix_get(x, r, j) - m, 2) / (double)n;
        }
        const double y =
            (gsl_matrix_get(x, i, j) - (m + gsl_matrix_get(delta, h, j))) /
            sqrt(v + eps);
        const double ch = gsl_matrix_get(c, h, 0);
        prod *= exp(-y * y / (2.0 * ch * ch));
    }
    return log(prod);
}

START_TEST(test_type_and_defaults)
{
    ck_assert_str_eq(lse_sim_daam->name, "daam");
    ck_assert_uint_eq(lse_sim_daam->n_param, 1);
    ck_assert_str_eq(lse_sim_daam->param_names[0], "c");
    ck_assert_uint_eq(lse_sim_daam->optional_params, 0);
    ck_assert_uint_eq(lse_sim_daam->config_size, sizeof(lse_daam_config));
    ck_assert(lse_sim_daam->flags & LSE_SIM_WHOLE_CHILDREN);
    const lse_daam_config *d = lse_sim_daam->config_default;
    ck_assert_int_eq(d->axis, LSE_DAAM_FEATURES);
    ck_assert_double_eq(d->eps, 1e-5);
    char buf[64];
    ck_assert_int_gt(lse_sim_daam->describe(d, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "axis=features, eps=1e-05");
    const lse_daam_config r = cfg_axis(LSE_DAAM_ROWS);
    ck_assert_int_gt(lse_sim_daam->describe(&r, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "axis=rows, eps=1e-05");
}
END_TEST

START_TEST(test_eval_is_paper_gate)
{
    const lse_daam_axis axis = _i == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS;
    gsl_matrix *x = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *delta = make(H, D, 2.7, 0.35, 0.0), *c = widths();
    gsl_matrix *s = gsl_matrix_alloc(N, H);
    const double epss[] = {1e-5, 0.2718};
    for (size_t e = 0; e < 2; e++) {
        lse_daam_config cfg = cfg_axis(axis);
        cfg.eps = epss[e];
        lse_assert_ok(run_eval(&cfg, x, delta, c, s));
        for (size_t i = 0; i < N; i++)
            for (size_t h = 0; h < H; h++) {
                const double want =
                    paper_score(x, delta, c, axis, cfg.eps, i, h);
                ck_assert_msg(fabs(gsl_matrix_get(s, i, h) - want) <=
                                  1e-12 * fmax(1.0, fabs(want)),
                              "axis %d S[%zu,%zu] = %.17g, paper %.17g",
                              (int)axis, i, h, gsl_matrix_get(s, i, h), want);
                ck_assert_double_le(gsl_matrix_get(s, i, h), 0.0);
            }
    }
    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(s);
}
END_TEST

/* lse_daam_density: with every head's weight on one head h, DA_ij is that
 * head's gate g_ihj, so sum_j log DA_ij is the similarity's score S_ih;
 * with weights a, DA is the a-weighted sum of the one-head maps. */
START_TEST(test_density_export)
{
    gsl_matrix *x = make(N, D, 0.4, 1.0, 0.2),
               *delta = make(H, D, 1.7, 0.3, 0.0);
    gsl_matrix *c = widths(), *s = gsl_matrix_alloc(N, H);
    gsl_matrix *one = gsl_matrix_calloc(N, H), *a = gsl_matrix_alloc(N, H);
    gsl_matrix *da = gsl_matrix_alloc(N, D), *sum = gsl_matrix_calloc(N, D);
    for (size_t i = 0; i < N; i++)
        for (size_t h = 0; h < H; h++)
            gsl_matrix_set(a, i, h, (1.0 + (double)((i + 2 * h) % 3)) / 6.0);
    for (int axis = 0; axis < 2; axis++) {
        const lse_daam_config cfg = cfg_axis((lse_daam_axis)axis);
        lse_assert_ok(run_eval(&cfg, x, delta, c, s));
        gsl_matrix_set_zero(sum);
        for (size_t h = 0; h < H; h++) {
            gsl_matrix_set_zero(one);
            for (size_t i = 0; i < N; i++)
                gsl_matrix_set(one, i, h, 1.0);
            lse_assert_ok(lse_daam_density(&cfg, x, delta, c, one, da, NULL));
            for (size_t i = 0; i < N; i++) {
                double lg = 0.0;
                for (size_t j = 0; j < D; j++) {
                    lg += log(gsl_matrix_get(da, i, j));
                    *gsl_matrix_ptr(sum, i, j) +=
                        gsl_matrix_get(a, i, h) * gsl_matrix_get(da, i, j);
                }
                ck_assert_double_eq_tol(lg, gsl_matrix_get(s, i, h),
                                        1e-12 * (1.0 + fabs(lg)));
            }
        }
        lse_assert_ok(lse_daam_density(&cfg, x, delta, c, a, da, NULL));
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < D; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(da, i, j),
                                        gsl_matrix_get(sum, i, j), 1e-15);
    }
    /* NULL config = the defaults (features axis) */
    gsl_matrix *da0 = gsl_matrix_alloc(N, D);
    const lse_daam_config f = cfg_axis(LSE_DAAM_FEATURES);
    lse_assert_ok(lse_daam_density(&f, x, delta, c, a, da, NULL));
    lse_assert_ok(lse_daam_density(NULL, x, delta, c, a, da0, NULL));
    ck_assert(gsl_matrix_equal(da, da0));
    /* errors */
    lse_error err;
    ck_assert_int_eq(lse_daam_density(NULL, x, delta, c, NULL, da, &err),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_daam_density(NULL, x, delta, c, a, s, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "da (N, d)"));
    gsl_matrix_free(da0);
    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(s);
    gsl_matrix_free(one);
    gsl_matrix_free(a);
    gsl_matrix_free(da);
    gsl_matrix_free(sum);
}
END_TEST
/* A child that sits exactly at m + delta_h has S = 0 (the gate is 1). */
START_TEST(test_gate_is_one_at_centre)
{
    const lse_daam_config cfg = cfg_axis(LSE_DAAM_FEATURES);
    gsl_matrix *x = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *delta = make(H, D, 2.7, 0.35, 0.0), *c = widths();
    gsl_matrix *s = gsl_matrix_alloc(N, H);
    /* head 1's offset: x row 2 minus its mean (sums to zero, so the row's
     * mean is unchanged by construction) */
    double m = 0.0;
    for (size_t k = 0; k < D; k++)
        m += gsl_matrix_get(x, 2, k) / D;
    for (size_t k = 0; k < D; k++)
        gsl_matrix_set(delta, 1, k, gsl_matrix_get(x, 2, k) - m);
    lse_assert_ok(run_eval(&cfg, x, delta, c, s));
    ck_assert_double_eq_tol(gsl_matrix_get(s, 2, 1), 0.0, 1e-14);
    ck_assert_double_lt(gsl_matrix_get(s, 2, 0), -1e-3);
    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(s);
}
END_TEST

static void gradcheck(const lse_daam_config *cfg, const gsl_matrix *x,
                      const gsl_matrix *delta, const gsl_matrix *c)
{
    const gsl_matrix *param[1] = {c};
    lse_gradcheck res;
    lse_error err = {0};
    lse_assert_ok(lse_sim_check_gradient(lse_sim_daam, cfg, x, delta, NULL,
                                         param, 1e-6, 1.0, &res, &err));
    ck_assert_uint_eq(res.n_checked, x->size1 * x->size2 +
                                         delta->size1 * delta->size2 +
                                         c->size1);
    ck_assert_msg(res.max_error < 1e-6, "axis %d: error %g at %s (%g vs %g)",
                  (int)cfg->axis, res.max_error, res.where, res.analytic,
                  res.numeric);
}

START_TEST(test_gradients)
{
    const lse_daam_axis axis = _i % 2 == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS;
    lse_daam_config cfg = cfg_axis(axis);
    cfg.eps = _i < 2 ? 1e-5 : 0.3127;
    gsl_matrix *x = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *delta = make(H, D, 2.7, 0.35, 0.0), *c = widths();
    gradcheck(&cfg, x, delta, c);
    /* one child row, one head, one feature: the degenerate corners */
    gsl_matrix *x1 = make(1, D, 0.3, 1.1, 0.2), *d1 = make(1, D, 1.9, 0.5, 0.0);
    gsl_matrix *c1 = gsl_matrix_alloc(1, 1);
    gsl_matrix_set(c1, 0, 0, 0.9173);
    gradcheck(&cfg, x1, d1, c1);
    gsl_matrix *xf = make(N, 1, 0.6, 1.2, 0.1), *df = make(H, 1, 0.8, 0.4, 0.0);
    gradcheck(&cfg, xf, df, c);
    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(x1);
    gsl_matrix_free(d1);
    gsl_matrix_free(c1);
    gsl_matrix_free(xf);
    gsl_matrix_free(df);
}
END_TEST

/* ROWS: every child's score depends on every child (through m_j, v_j), so
 * moving one child moves the scores of the others; FEATURES does not. */
START_TEST(test_rows_couple_children)
{
    gsl_matrix *x = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *delta = make(H, D, 2.7, 0.35, 0.0), *c = widths();
    gsl_matrix *s0 = gsl_matrix_alloc(N, H), *s1 = gsl_matrix_alloc(N, H);
    for (int k = 0; k < 2; k++) {
        const lse_daam_config cfg =
            cfg_axis(k == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS);
        lse_assert_ok(run_eval(&cfg, x, delta, c, s0));
        *gsl_matrix_ptr(x, 0, 2) += 0.37;
        lse_assert_ok(run_eval(&cfg, x, delta, c, s1));
        *gsl_matrix_ptr(x, 0, 2) -= 0.37;
        const double moved =
            fabs(gsl_matrix_get(s1, 3, 1) - gsl_matrix_get(s0, 3, 1));
        if (k == 0)
            ck_assert_double_eq(moved, 0.0);
        else
            ck_assert_double_gt(moved, 1e-4);
    }
    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(s0);
    gsl_matrix_free(s1);
}
END_TEST

START_TEST(test_check_errors)
{
    gsl_matrix *x = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *delta = make(H, D, 2.7, 0.35, 0.0), *c = widths();
    char msg[256];
    lse_daam_config cfg = cfg_axis(LSE_DAAM_FEATURES);
    lse_sim_shape shape = shape_of(x, delta, c);
    lse_assert_ok(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg));
    lse_assert_ok(lse_sim_daam->check(&shape, NULL, msg, sizeof msg));

    /* c has the wrong shape */
    gsl_matrix *cw = gsl_matrix_alloc(H + 1, 1), *cc = gsl_matrix_alloc(H, 2);
    gsl_matrix_set_all(cw, 0.7);
    gsl_matrix_set_all(cc, 0.7);
    shape = shape_of(x, delta, cw);
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "'c'"));
    shape = shape_of(x, delta, cc);
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    /* through the public checker as well */
    const gsl_matrix *pw[1] = {cw};
    lse_gradcheck res;
    lse_error err = {0};
    lse_assert_status(lse_sim_check_gradient(lse_sim_daam, &cfg, x, delta, NULL,
                                             pw, 1e-6, 1.0, &res, &err),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "'c'"));

    /* d_parent != d_child */
    gsl_matrix *dw = make(H, D + 1, 2.7, 0.35, 0.0);
    shape = shape_of(x, dw, c);
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "columns"));

    /* eps <= 0, non-finite */
    shape = shape_of(x, delta, c);
    cfg.eps = 0.0;
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "eps"));
    cfg.eps = -1e-5;
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDOM);
    cfg.eps = NAN;
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDOM);

    /* unknown axis, context, missing parameter */
    cfg = cfg_axis((lse_daam_axis)5);
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EINVAL);
    cfg = cfg_axis(LSE_DAAM_FEATURES);
    shape.d_context = 2;
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    shape = shape_of(x, delta, c);
    shape.n_param = 0;
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EINVAL);

    /* ROWS needs every child row in one block */
    cfg = cfg_axis(LSE_DAAM_ROWS);
    shape = shape_of(x, delta, c);
    shape.block = N - 1;
    lse_assert_status(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "rows"));
    cfg = cfg_axis(LSE_DAAM_FEATURES);
    lse_assert_ok(lse_sim_daam->check(&shape, &cfg, msg, sizeof msg));

    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(cw);
    gsl_matrix_free(cc);
    gsl_matrix_free(dw);
}
END_TEST

START_TEST(test_kernel_errors)
{
    gsl_matrix *x = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *delta = make(H, D, 2.7, 0.35, 0.0), *c = widths();
    gsl_matrix *s = gsl_matrix_alloc(N, H);
    lse_daam_config cfg = cfg_axis(LSE_DAAM_ROWS);
    /* a zero width is outside the domain, a NaN width non-finite */
    gsl_matrix_set(c, 1, 0, 0.0);
    lse_assert_status(run_eval(&cfg, x, delta, c, s), LSE_EDOM);
    gsl_matrix_set(c, 1, 0, NAN);
    lse_assert_status(run_eval(&cfg, x, delta, c, s), LSE_ENONFINITE);
    gsl_matrix_set(c, 1, 0, 1.4319);
    /* NaN in the data */
    gsl_matrix_set(x, 2, 2, NAN);
    lse_assert_status(run_eval(&cfg, x, delta, c, s), LSE_ENONFINITE);
    gsl_matrix_set(x, 2, 2, 0.5);

    /* ROWS refuses a partial block at eval time too */
    const lse_sim_shape shape = shape_of(x, delta, c);
    void *work = NULL;
    lse_assert_ok(lse_sim_daam->work_new(&shape, &cfg, &work));
    const gsl_matrix *param[1] = {c};
    gsl_matrix_const_view part = gsl_matrix_const_submatrix(x, 0, 0, N - 2, D);
    gsl_matrix *sp = gsl_matrix_alloc(N - 2, H);
    lse_sim_args a = {.child = &part.matrix,
                      .parent = delta,
                      .param = param,
                      .config = &cfg,
                      .work = work};
    lse_assert_status(lse_sim_daam->eval(&a, sp), LSE_EDIM);
    /* FEATURES accepts it, with the same values as the whole */
    cfg = cfg_axis(LSE_DAAM_FEATURES);
    lse_assert_ok(lse_sim_daam->eval(&a, sp));
    lse_assert_ok(run_eval(&cfg, x, delta, c, s));
    for (size_t i = 0; i < N - 2; i++)
        for (size_t h = 0; h < H; h++)
            ck_assert_double_eq_tol(gsl_matrix_get(sp, i, h),
                                    gsl_matrix_get(s, i, h), 1e-14);
    /* a missing c */
    const gsl_matrix *none[1] = {NULL};
    a.param = none;
    lse_assert_status(lse_sim_daam->eval(&a, sp), LSE_EFAULT);
    lse_sim_daam->work_free(work);
    gsl_matrix_free(sp);
    gsl_matrix_free(x);
    gsl_matrix_free(delta);
    gsl_matrix_free(c);
    gsl_matrix_free(s);
}
END_TEST

/* Through the public graph API: heads as parents, widths as a parameter
 * node, ROWS statistics over all children even with a small block size. */
START_TEST(test_graph_term)
{
    const lse_daam_config cfg =
        cfg_axis(_i == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS);
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_graph_set_block_rows(g, 2);
    lse_node *x, *delta, *c;
    lse_assert_ok(lse_graph_add_node(g, "x", N, D, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "delta", H, D, LSE_NODE_PARAM, &delta));
    lse_assert_ok(lse_graph_add_node(g, "c", H, 1, LSE_NODE_PARAM, &c));
    gsl_matrix *x0 = make(N, D, 0.0, 1.3, 0.4127);
    gsl_matrix *d0 = make(H, D, 2.7, 0.35, 0.0), *c0 = widths();
    lse_assert_ok(lse_node_set_value(x, x0));
    lse_assert_ok(lse_node_set_value(delta, d0));
    lse_assert_ok(lse_node_set_value(c, c0));
    lse_node *const param[1] = {c};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(delta);
    spec.sim = lse_sim_daam;
    spec.config = &cfg;
    spec.param = param;
    lse_assert_ok(lse_graph_add_lse(g, "daam", &spec, NULL));
    /* energy = -sum_i log sum_h exp S_ih with the paper's S */
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    double want = 0.0;
    for (size_t i = 0; i < N; i++) {
        double sum = 0.0;
        for (size_t h = 0; h < H; h++)
            sum += exp(paper_score(x0, d0, c0, cfg.axis, cfg.eps, i, h));
        want -= log(sum);
    }
    ck_assert_double_eq_tol(e, want, 1e-11 * fabs(want));
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-6, "error %g at %s", res.max_error,
                  res.where);
    lse_graph_free(g);
    gsl_matrix_free(x0);
    gsl_matrix_free(d0);
    gsl_matrix_free(c0);
}
END_TEST

/* Workspace constructors can be called with any declared shape: one whose
 * matrices of doubles cannot be addressed is LSE_ENOMEM, not a wrapped-around
 * small allocation (the shapes below are only described, never allocated). */
START_TEST(test_work_new_size_overflow)
{
    const size_t big = (size_t)1 << 31; /* big * big * 8 = 2^65 */
    const size_t prow[] = {0}, pcol[] = {0};
    const lse_sim_shape shapes[] = {
        {.n_child = big, .block = 4, .n_parent = big, .d_child = 2,
         .d_parent = 2, .d_context = 0, .n_param = 1,
         .param_rows = prow, .param_cols = pcol},
        {.n_child = 4, .block = 4, .n_parent = 2, .d_child = SIZE_MAX / 4,
         .d_parent = SIZE_MAX / 4, .d_context = 0, .n_param = 1,
         .param_rows = prow, .param_cols = pcol},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        void *work = &work;
        lse_assert_status(lse_sim_daam->work_new(&shapes[i], NULL, &work),
                          LSE_ENOMEM);
        ck_assert_ptr_null(work);
    }
    /* the same construction succeeds at a small size */
    lse_sim_shape ok = shapes[0];
    ok.n_child = ok.block = ok.n_parent = 3;
    ok.d_child = ok.d_parent = 2;
    void *work = NULL;
    lse_assert_ok(lse_sim_daam->work_new(&ok, NULL, &work));
    lse_sim_daam->work_free(work);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_daam");
    TCase *tc = tcase_create("daam");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_type_and_defaults);
    tcase_add_loop_test(tc, test_eval_is_paper_gate, 0, 2);
    tcase_add_test(tc, test_gate_is_one_at_centre);
    tcase_add_test(tc, test_density_export);
    tcase_add_loop_test(tc, test_gradients, 0, 4);
    tcase_add_test(tc, test_rows_couple_children);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_work_new_size_overflow);
    tcase_add_test(tc, test_kernel_errors);
    tcase_add_loop_test(tc, test_graph_term, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
