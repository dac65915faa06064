#include <math.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"

/* lib/sim/nonlinear.c: S(i,j) = -1/2 ||c_i - f(W p_j + b)||^2 */

static void fill(gsl_matrix *m, double seed)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j,
                           1.1 * sin(seed + 2.137 * (double)i +
                                     1.371 * (double)j +
                                     0.311 * (double)(i * j)) +
                               0.0417);
}

static double get(const gsl_matrix *m, size_t i, size_t j)
{
    return gsl_matrix_get(m, i, j);
}

static double act(lse_activation f, double z)
{
    switch (f) {
    case LSE_ACT_IDENTITY:
        return z;
    case LSE_ACT_TANH:
        return tanh(z);
    case LSE_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-z));
    case LSE_ACT_RELU:
        return z > 0.0 ? z : 0.0;
    }
    return NAN;
}

/* pre-activation z_k = (W p_j + b)_k */
static double pre(const gsl_matrix *w, const gsl_matrix *b, const gsl_matrix *p,
                  size_t j, size_t k)
{
    double z = b != NULL ? get(b, 0, k) : 0.0;
    for (size_t e = 0; e < w->size2; e++)
        z += get(w, k, e) * get(p, j, e);
    return z;
}

/* check + work_new + eval (if s) + grad (if g) + work_free */
static lse_status run(const lse_nonlinear_config *cfg, const gsl_matrix *c,
                      const gsl_matrix *p, const gsl_matrix *w,
                      const gsl_matrix *b, gsl_matrix *s, const gsl_matrix *g,
                      gsl_matrix *gc, gsl_matrix *gp, gsl_matrix *gw,
                      gsl_matrix *gb)
{
    const lse_sim_type *t = lse_sim_nonlinear;
    size_t rows[2] = {w->size1, b != NULL ? b->size1 : 0};
    size_t cols[2] = {w->size2, b != NULL ? b->size2 : 0};
    const lse_sim_shape shape = {.n_child = c->size1,
                                 .block = c->size1,
                                 .n_parent = p->size1,
                                 .d_child = c->size2,
                                 .d_parent = p->size2,
                                 .n_param = 2,
                                 .param_rows = rows,
                                 .param_cols = cols};
    char msg[256];
    lse_status st = t->check(&shape, cfg, msg, sizeof msg);
    if (st != LSE_OK)
        return st;
    void *work = NULL;
    if ((st = t->work_new(&shape, cfg, &work)) != LSE_OK)
        return st;
    const gsl_matrix *param[2] = {w, b};
    const lse_sim_args a = {
        .child = c, .parent = p, .param = param, .config = cfg, .work = work};
    if (s != NULL)
        st = t->eval(&a, s);
    if (st == LSE_OK && g != NULL) {
        gsl_matrix *gparam[2] = {gw, gb};
        const lse_sim_grads out = {.child = gc, .parent = gp, .param = gparam};
        st = t->grad(&a, g, &out);
    }
    t->work_free(work);
    return st;
}

static const lse_activation acts[] = {LSE_ACT_IDENTITY, LSE_ACT_TANH,
                                      LSE_ACT_SIGMOID, LSE_ACT_RELU};

START_TEST(test_type)
{
    const lse_sim_type *t = lse_sim_nonlinear;
    ck_assert_str_eq(t->name, "nonlinear");
    ck_assert_uint_eq(t->n_param, 2);
    ck_assert_str_eq(t->param_names[0], "W");
    ck_assert_str_eq(t->param_names[1], "b");
    ck_assert_uint_eq(t->optional_params, 1u << 1);
    const lse_nonlinear_config *def = t->config_default;
    ck_assert_int_eq(def->f, LSE_ACT_IDENTITY);
    const char *names[] = {"f=identity", "f=tanh", "f=sigmoid", "f=relu"};
    for (size_t i = 0; i < 4; i++) {
        const lse_nonlinear_config cfg = {.f = acts[i]};
        char buf[64];
        t->describe(&cfg, buf, sizeof buf);
        ck_assert_str_eq(buf, names[i]);
    }
}
END_TEST

START_TEST(test_eval_matches_formula)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 2);
    gsl_matrix *w = gsl_matrix_alloc(3, 2), *b = gsl_matrix_alloc(1, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4);
    fill(c, 0.3);
    fill(p, 1.9);
    fill(w, -0.6);
    fill(b, 2.4);
    for (size_t v = 0; v < 8; v++) {
        const lse_nonlinear_config cfg = {.f = acts[v % 4]};
        const gsl_matrix *bb = v < 4 ? b : NULL;
        lse_assert_ok(run(&cfg, c, p, w, bb, s, NULL, NULL, NULL, NULL, NULL));
        for (size_t i = 0; i < 5; i++)
            for (size_t j = 0; j < 4; j++) {
                double d2 = 0.0;
                for (size_t k = 0; k < 3; k++) {
                    const double r =
                        get(c, i, k) - act(cfg.f, pre(w, bb, p, j, k));
                    d2 += r * r;
                }
                ck_assert_double_eq_tol(get(s, i, j), -0.5 * d2, 1e-13);
            }
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(w);
    gsl_matrix_free(b);
    gsl_matrix_free(s);
}
END_TEST

/* smallest |pre-activation| (relu must stay away from its kink) */
static double min_abs_pre(const gsl_matrix *w, const gsl_matrix *b,
                          const gsl_matrix *p)
{
    double m = INFINITY;
    for (size_t j = 0; j < p->size1; j++)
        for (size_t k = 0; k < w->size1; k++)
            m = fmin(m, fabs(pre(w, b, p, j, k)));
    return m;
}

static void gradcheck(lse_activation f, const gsl_matrix *c,
                      const gsl_matrix *p, const gsl_matrix *w,
                      const gsl_matrix *b)
{
    const lse_nonlinear_config cfg = {.f = f};
    const gsl_matrix *param[2] = {w, b};
    if (f == LSE_ACT_RELU)
        ck_assert_double_gt(min_abs_pre(w, b, p), 1e-3);
    lse_gradcheck res;
    lse_error err;
    lse_assert_ok(lse_sim_check_gradient(lse_sim_nonlinear, &cfg, c, p, NULL,
                                         param, 1e-6, 1.0, &res, &err));
    ck_assert_msg(res.max_error < 1e-6, "f=%d: error %g at %s (%g vs %g)",
                  (int)f, res.max_error, res.where, res.analytic, res.numeric);
    const size_t want = c->size1 * c->size2 + p->size1 * p->size2 +
                        w->size1 * w->size2 +
                        (b != NULL ? b->size1 * b->size2 : 0);
    ck_assert_uint_eq(res.n_checked, want);
}

START_TEST(test_gradients)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 2);
    gsl_matrix *w = gsl_matrix_alloc(3, 2), *b = gsl_matrix_alloc(1, 3);
    gsl_matrix *w3 = gsl_matrix_alloc(3, 3);
    fill(c, 0.7);
    fill(p, -1.2);
    fill(w, 0.45);
    fill(b, -2.2);
    fill(w3, 1.15);
    for (size_t i = 0; i < 4; i++) {
        gradcheck(acts[i], c, p, w, b);
        gradcheck(acts[i], c, p, w, NULL);
        /* self terms: children = parents (d_child = d_parent = 3) */
        gradcheck(acts[i], c, c, w3, b);
        gradcheck(acts[i], c, c, w3, NULL);
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(w);
    gsl_matrix_free(b);
    gsl_matrix_free(w3);
}
END_TEST

/* relu'(0) is defined as 0: with W = 0, b = 0 every pre-activation is
 * exactly 0, so nothing flows to parents, W or b; the child gradient is
 * sum_j G(i,j) (f_j - c_i) = -(sum_j G(i,j)) c_i. */
START_TEST(test_relu_kink_is_zero)
{
    const lse_nonlinear_config cfg = {.f = LSE_ACT_RELU};
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 2);
    gsl_matrix *w = gsl_matrix_calloc(3, 2), *b = gsl_matrix_calloc(1, 3);
    gsl_matrix *g = gsl_matrix_alloc(5, 4);
    gsl_matrix *gc = gsl_matrix_calloc(5, 3), *gp = gsl_matrix_calloc(4, 2);
    gsl_matrix *gw = gsl_matrix_calloc(3, 2), *gb = gsl_matrix_calloc(1, 3);
    fill(c, 0.2);
    fill(p, 0.9);
    fill(g, -0.5);
    lse_assert_ok(run(&cfg, c, p, w, b, NULL, g, gc, gp, gw, gb));
    ck_assert(gsl_matrix_isnull(gp));
    ck_assert(gsl_matrix_isnull(gw));
    ck_assert(gsl_matrix_isnull(gb));
    for (size_t i = 0; i < 5; i++) {
        double r = 0.0;
        for (size_t j = 0; j < 4; j++)
            r += get(g, i, j);
        for (size_t k = 0; k < 3; k++)
            ck_assert_double_eq_tol(get(gc, i, k), -r * get(c, i, k), 1e-14);
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(w);
    gsl_matrix_free(b);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
    gsl_matrix_free(gw);
    gsl_matrix_free(gb);
}
END_TEST

/* Tschantz section 7 (predictive coding), by hand with G = -alpha.
 * d sim/dx_i = f(mu_k) - x_i, so dE/dx_i = sum_k alpha_ik (x_i - f(mu_k)).
 * (The seed prints -dE/dx_i = sum_k alpha_ik (x_i - f(mu_k)) and
 * d sim/dx = x - f: a sign slip; this test pins the correct sign.) */
START_TEST(test_predictive_coding_child_gradient)
{
    const lse_nonlinear_config cfg = {.f = LSE_ACT_TANH};
    gsl_matrix *x = gsl_matrix_alloc(5, 3), *mu = gsl_matrix_alloc(4, 2);
    gsl_matrix *w = gsl_matrix_alloc(3, 2);
    gsl_matrix *s = gsl_matrix_alloc(5, 4), *al = gsl_matrix_alloc(5, 4);
    gsl_matrix *gx = gsl_matrix_calloc(5, 3);
    fill(x, 0.25);
    fill(mu, -0.65);
    fill(w, 1.75);
    lse_assert_ok(run(&cfg, x, mu, w, NULL, s, NULL, NULL, NULL, NULL, NULL));
    for (size_t i = 0; i < 5; i++)
        lse_assert_ok(lse_softmax(gsl_matrix_const_ptr(s, i, 0), 4, 1, 1.0,
                                  gsl_matrix_ptr(al, i, 0), NULL));
    gsl_matrix_scale(al, -1.0);
    lse_assert_ok(run(&cfg, x, mu, w, NULL, NULL, al, gx, NULL, NULL, NULL));
    gsl_matrix_scale(al, -1.0);
    for (size_t i = 0; i < 5; i++)
        for (size_t k = 0; k < 3; k++) {
            double want = 0.0;
            for (size_t j = 0; j < 4; j++)
                want += get(al, i, j) *
                        (get(x, i, k) - tanh(pre(w, NULL, mu, j, k)));
            ck_assert_double_eq_tol(get(gx, i, k), want, 1e-14);
        }
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(w);
    gsl_matrix_free(s);
    gsl_matrix_free(al);
    gsl_matrix_free(gx);
}
END_TEST

START_TEST(test_check_errors)
{
    const lse_sim_type *t = lse_sim_nonlinear;
    size_t rows[2] = {3, 1}, cols[2] = {2, 3};
    lse_sim_shape shape = {.n_child = 5,
                           .block = 5,
                           .n_parent = 4,
                           .d_child = 3,
                           .d_parent = 2,
                           .n_param = 2,
                           .param_rows = rows,
                           .param_cols = cols};
    char msg[256] = "";
    lse_assert_ok(t->check(&shape, NULL, msg, sizeof msg));

    rows[1] = cols[1] = 0; /* b absent: fine */
    lse_assert_ok(t->check(&shape, NULL, msg, sizeof msg));
    rows[1] = 1;
    cols[1] = 2; /* b 1x2 for d_child 3 */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_str_eq(msg, "nonlinear: b is 1x2, expected 1 x d_child = 1x3");
    rows[1] = 3;
    cols[1] = 3; /* b 3x3 */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    rows[1] = 1;

    rows[0] = 2; /* W 2x2 */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_str_eq(msg,
                     "nonlinear: W is 2x2, expected d_child x d_parent = 3x2");
    rows[0] = 3;
    cols[0] = 3; /* W 3x3 */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "W is 3x3"));
    rows[0] = 0; /* W absent (not optional) */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    rows[0] = 3;
    cols[0] = 2;

    shape.d_context = 4;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "context"));
    shape.d_context = 0;
    shape.n_param = 1;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    shape.n_param = 2;
    shape.param_cols = NULL;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    shape.param_cols = cols;

    const lse_nonlinear_config bad = {.f = (lse_activation)7};
    lse_assert_status(t->check(&shape, &bad, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "nonlinear: activation 7"));
    lse_assert_ok(t->check(&shape, NULL, msg, sizeof msg));
}
END_TEST

START_TEST(test_kernel_errors)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 2);
    gsl_matrix *w = gsl_matrix_alloc(3, 2), *s = gsl_matrix_alloc(5, 4);
    gsl_matrix *wbad = gsl_matrix_alloc(2, 2);
    fill(c, 0.1);
    fill(p, 0.2);
    fill(w, 0.3);
    const gsl_matrix *param[2] = {NULL, NULL};
    const lse_sim_args a = {.child = c, .parent = p, .param = param};
    lse_assert_status(lse_sim_nonlinear->eval(&a, s), LSE_EFAULT);
    param[0] = wbad;
    lse_assert_status(lse_sim_nonlinear->eval(&a, s), LSE_EDIM);
    param[0] = w; /* no workspace */
    lse_assert_status(lse_sim_nonlinear->eval(&a, s), LSE_EFAULT);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(w);
    gsl_matrix_free(s);
    gsl_matrix_free(wbad);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_nonlinear");
    TCase *tc = tcase_create("nonlinear");
    tcase_add_test(tc, test_type);
    tcase_add_test(tc, test_eval_matches_formula);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_relu_kink_is_zero);
    tcase_add_test(tc, test_predictive_coding_child_gradient);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_kernel_errors);
    suite_add_tcase(s, tc);
    return s;
}
