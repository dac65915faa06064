/* Tests of the per-pair fallback (lib/sim/pairwise.c): a user-style
 * similarity written pair by pair, a pairwise re-implementation of dot
 * against lse_sim_dot, partial gradient outputs and error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

#define NC 4
#define NP 5
#define D 3

/* ------------------------------------------------------------------ */
/* A user's similarity: weighted dot minus a smooth L1 distance of the
 * child from the parent shifted by the context,
 *   sim(c, p; x) = sum_k w_k c_k p_k - sum_k sqrt((c_k - p_k - x_k)^2 + mu^2)
 * (x = 0 without context). */

typedef struct user_params {
    double w[D];
    double mu;
} user_params;

static double user_eval(const gsl_vector *c, const gsl_vector *p,
                        const gsl_vector *x, const void *params)
{
    const user_params *up = params;
    double s = 0.0;
    for (size_t k = 0; k < c->size; k++) {
        const double ck = gsl_vector_get(c, k), pk = gsl_vector_get(p, k);
        const double u = ck - pk - (x != NULL ? gsl_vector_get(x, k) : 0.0);
        s += up->w[k] * ck * pk - sqrt(u * u + up->mu * up->mu);
    }
    return s;
}

static void user_grad(const gsl_vector *c, const gsl_vector *p,
                      const gsl_vector *x, double w, gsl_vector *gc,
                      gsl_vector *gp, gsl_vector *gx, const void *params)
{
    const user_params *up = params;
    for (size_t k = 0; k < c->size; k++) {
        const double ck = gsl_vector_get(c, k), pk = gsl_vector_get(p, k);
        const double u = ck - pk - (x != NULL ? gsl_vector_get(x, k) : 0.0);
        const double t = u / sqrt(u * u + up->mu * up->mu);
        if (gc != NULL)
            *gsl_vector_ptr(gc, k) += w * (up->w[k] * pk - t);
        if (gp != NULL)
            *gsl_vector_ptr(gp, k) += w * (up->w[k] * ck + t);
        if (gx != NULL)
            *gsl_vector_ptr(gx, k) += w * t;
    }
}

static const lse_sim_pair_fns user_fns = {
    .name = "wdot-smoothl1", .eval = user_eval, .grad = user_grad};

/* dot, pair by pair */
static double pdot_eval(const gsl_vector *c, const gsl_vector *p,
                        const gsl_vector *x, const void *params)
{
    (void)x;
    (void)params;
    double s = 0.0;
    for (size_t k = 0; k < c->size; k++)
        s += gsl_vector_get(c, k) * gsl_vector_get(p, k);
    return s;
}

static void pdot_grad(const gsl_vector *c, const gsl_vector *p,
                      const gsl_vector *x, double w, gsl_vector *gc,
                      gsl_vector *gp, gsl_vector *gx, const void *params)
{
    (void)x;
    (void)gx;
    (void)params;
    for (size_t k = 0; k < c->size; k++) {
        if (gc != NULL)
            *gsl_vector_ptr(gc, k) += w * gsl_vector_get(p, k);
        if (gp != NULL)
            *gsl_vector_ptr(gp, k) += w * gsl_vector_get(c, k);
    }
}

static const lse_sim_pair_fns pdot_fns = {
    .name = "pair-dot", .eval = pdot_eval, .grad = pdot_grad};

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static gsl_matrix *make(size_t n, size_t d, double seed, double scale)
{
    gsl_matrix *m = gsl_matrix_alloc(n, d);
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++)
            gsl_matrix_set(
                m, i, k,
                scale * (0.8127 * sin(1.3 + seed + 2.1 * (double)i +
                                      1.7 * (double)k) +
                         0.2931 * cos(0.7 * seed + 0.9 * (double)(i * k))));
    return m;
}

static lse_sim_shape shape_of(const gsl_matrix *c, const gsl_matrix *p,
                              const gsl_matrix *x)
{
    return (lse_sim_shape){.n_child = c->size1,
                           .block = c->size1,
                           .n_parent = p->size1,
                           .d_child = c->size2,
                           .d_parent = p->size2,
                           .d_context = x != NULL ? x->size2 : 0};
}

static const user_params uparams = {.w = {0.4127, -1.3318, 0.9031},
                                    .mu = 0.2718};

/* ------------------------------------------------------------------ */

START_TEST(test_type)
{
    ck_assert_str_eq(lse_sim_pairwise->name, "pairwise");
    ck_assert_uint_eq(lse_sim_pairwise->n_param, 0);
    ck_assert_uint_eq(lse_sim_pairwise->config_size,
                      sizeof(lse_sim_pair_config));
    ck_assert_ptr_null(lse_sim_pairwise->config_default);
    const lse_sim_pair_config cfg = {.fns = &user_fns, .params = &uparams};
    char buf[64];
    ck_assert_int_gt(lse_sim_pairwise->describe(&cfg, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "fns=wdot-smoothl1");
}
END_TEST

START_TEST(test_user_eval_matches_formula)
{
    const lse_sim_pair_config cfg = {.fns = &user_fns, .params = &uparams};
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *x = make(NC, D, 5.3, 0.6), *s = gsl_matrix_alloc(NC, NP);
    for (int with_x = 0; with_x < 2; with_x++) {
        const gsl_matrix *ctx = with_x ? x : NULL;
        const lse_sim_shape shape = shape_of(c, p, ctx);
        char msg[256];
        lse_assert_ok(lse_sim_pairwise->check(&shape, &cfg, msg, sizeof msg));
        const lse_sim_args a = {
            .child = c, .parent = p, .context = ctx, .config = &cfg};
        lse_assert_ok(lse_sim_pairwise->eval(&a, s));
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j < NP; j++) {
                double want = 0.0;
                for (size_t k = 0; k < D; k++) {
                    const double ck = gsl_matrix_get(c, i, k);
                    const double pk = gsl_matrix_get(p, j, k);
                    const double u =
                        ck - pk - (with_x ? gsl_matrix_get(x, i, k) : 0.0);
                    want += uparams.w[k] * ck * pk -
                            sqrt(u * u + uparams.mu * uparams.mu);
                }
                ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), want, 1e-14);
            }
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(x);
    gsl_matrix_free(s);
}
END_TEST

START_TEST(test_user_gradients)
{
    const lse_sim_pair_config cfg = {.fns = &user_fns, .params = &uparams};
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *x = make(NC, D, 5.3, 0.6);
    lse_gradcheck res;
    lse_error err = {0};
    /* with context: child, parent and context checked */
    lse_assert_ok(lse_sim_check_gradient(lse_sim_pairwise, &cfg, c, p, x, NULL,
                                         1e-6, 1.0, &res, &err));
    ck_assert_uint_eq(res.n_checked, (NC + NP + NC) * D);
    ck_assert_msg(res.max_error < 1e-6, "error %g at %s", res.max_error,
                  res.where);
    /* without */
    lse_assert_ok(lse_sim_check_gradient(lse_sim_pairwise, &cfg, c, p, NULL,
                                         NULL, 1e-6, 1.0, &res, &err));
    ck_assert_uint_eq(res.n_checked, (NC + NP) * D);
    ck_assert_msg(res.max_error < 1e-6, "error %g at %s", res.max_error,
                  res.where);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(x);
}
END_TEST

/* A wrong pair gradient is caught by the checker (the test can fail). */
static void user_grad_wrong(const gsl_vector *c, const gsl_vector *p,
                            const gsl_vector *x, double w, gsl_vector *gc,
                            gsl_vector *gp, gsl_vector *gx, const void *params)
{
    user_grad(c, p, x, 1.01 * w, gc, gp, gx, params);
}

START_TEST(test_wrong_gradient_is_caught)
{
    const lse_sim_pair_fns bad = {
        .name = "bad", .eval = user_eval, .grad = user_grad_wrong};
    const lse_sim_pair_config cfg = {.fns = &bad, .params = &uparams};
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    lse_gradcheck res;
    lse_assert_ok(lse_sim_check_gradient(lse_sim_pairwise, &cfg, c, p, NULL,
                                         NULL, 1e-6, 1.0, &res, NULL));
    ck_assert_double_gt(res.max_error, 1e-3);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* A pairwise dot gives lse_sim_dot's values and gradients. */
START_TEST(test_pairwise_dot_equals_dot)
{
    const lse_sim_pair_config cfg = {.fns = &pdot_fns, .params = NULL};
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *g = make(NC, NP, 1.7, 1.0);
    gsl_matrix *s1 = gsl_matrix_alloc(NC, NP), *s2 = gsl_matrix_alloc(NC, NP);
    gsl_matrix *gc1 = gsl_matrix_calloc(NC, D), *gc2 = gsl_matrix_calloc(NC, D);
    gsl_matrix *gp1 = gsl_matrix_calloc(NP, D), *gp2 = gsl_matrix_calloc(NP, D);
    const lse_sim_shape shape = shape_of(c, p, NULL);
    char msg[256];
    lse_assert_ok(lse_sim_pairwise->check(&shape, &cfg, msg, sizeof msg));
    lse_assert_ok(lse_sim_dot->check(&shape, NULL, msg, sizeof msg));
    const lse_sim_args a1 = {.child = c, .parent = p, .config = &cfg};
    const lse_sim_args a2 = {.child = c, .parent = p};
    lse_assert_ok(lse_sim_pairwise->eval(&a1, s1));
    lse_assert_ok(lse_sim_dot->eval(&a2, s2));
    const lse_sim_grads o1 = {.child = gc1, .parent = gp1};
    const lse_sim_grads o2 = {.child = gc2, .parent = gp2};
    lse_assert_ok(lse_sim_pairwise->grad(&a1, g, &o1));
    lse_assert_ok(lse_sim_dot->grad(&a2, g, &o2));
    for (size_t i = 0; i < NC; i++)
        for (size_t j = 0; j < NP; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(s1, i, j),
                                    gsl_matrix_get(s2, i, j), 1e-14);
    for (size_t i = 0; i < NC; i++)
        for (size_t k = 0; k < D; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(gc1, i, k),
                                    gsl_matrix_get(gc2, i, k), 1e-14);
    for (size_t j = 0; j < NP; j++)
        for (size_t k = 0; k < D; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(gp1, j, k),
                                    gsl_matrix_get(gp2, j, k), 1e-14);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(g);
    gsl_matrix_free(s1);
    gsl_matrix_free(s2);
    gsl_matrix_free(gc1);
    gsl_matrix_free(gc2);
    gsl_matrix_free(gp1);
    gsl_matrix_free(gp2);
}
END_TEST

/* Outputs may be NULL; what is requested equals the full computation, and
 * gradients are added to what is already there. */
START_TEST(test_partial_outputs_accumulate)
{
    const lse_sim_pair_config cfg = {.fns = &user_fns, .params = &uparams};
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *x = make(NC, D, 5.3, 0.6), *g = make(NC, NP, 0.9, 1.0);
    gsl_matrix *gc = gsl_matrix_calloc(NC, D), *gp = gsl_matrix_calloc(NP, D);
    gsl_matrix *gx = gsl_matrix_calloc(NC, D);
    gsl_matrix *gp_only = gsl_matrix_alloc(NP, D);
    gsl_matrix *gx_only = gsl_matrix_alloc(NC, D);
    gsl_matrix_set_all(gp_only, 0.5);
    gsl_matrix_set_all(gx_only, -0.25);
    const lse_sim_args a = {
        .child = c, .parent = p, .context = x, .config = &cfg};
    const lse_sim_grads all = {.child = gc, .parent = gp, .context = gx};
    lse_assert_ok(lse_sim_pairwise->grad(&a, g, &all));
    const lse_sim_grads po = {.parent = gp_only};
    lse_assert_ok(lse_sim_pairwise->grad(&a, g, &po));
    const lse_sim_grads xo = {.context = gx_only};
    lse_assert_ok(lse_sim_pairwise->grad(&a, g, &xo));
    for (size_t j = 0; j < NP; j++)
        for (size_t k = 0; k < D; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(gp_only, j, k),
                                    gsl_matrix_get(gp, j, k) + 0.5, 1e-14);
    for (size_t i = 0; i < NC; i++)
        for (size_t k = 0; k < D; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(gx_only, i, k),
                                    gsl_matrix_get(gx, i, k) - 0.25, 1e-14);
    const lse_sim_grads none = {0};
    lse_assert_ok(lse_sim_pairwise->grad(&a, g, &none));
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(x);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
    gsl_matrix_free(gx);
    gsl_matrix_free(gp_only);
    gsl_matrix_free(gx_only);
}
END_TEST

/* The config is copied by value, but fns and params are borrowed: a change
 * to the params shows in the next eval. */
START_TEST(test_params_are_borrowed)
{
    user_params up = uparams;
    const lse_sim_pair_config cfg = {.fns = &user_fns, .params = &up};
    const lse_sim_pair_config copy = cfg;
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *s1 = gsl_matrix_alloc(NC, NP), *s2 = gsl_matrix_alloc(NC, NP);
    const lse_sim_args a = {.child = c, .parent = p, .config = &copy};
    lse_assert_ok(lse_sim_pairwise->eval(&a, s1));
    up.w[1] += 1.0;
    lse_assert_ok(lse_sim_pairwise->eval(&a, s2));
    /* S changes by c_i1 p_j1 */
    for (size_t i = 0; i < NC; i++)
        for (size_t j = 0; j < NP; j++)
            ck_assert_double_eq_tol(
                gsl_matrix_get(s2, i, j) - gsl_matrix_get(s1, i, j),
                gsl_matrix_get(c, i, 1) * gsl_matrix_get(p, j, 1), 1e-13);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s1);
    gsl_matrix_free(s2);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *s = gsl_matrix_alloc(NC, NP), *g = make(NC, NP, 0.9, 1.0);
    lse_sim_shape shape = shape_of(c, p, NULL);
    char msg[256];

    /* no config */
    lse_assert_status(lse_sim_pairwise->check(&shape, NULL, msg, sizeof msg),
                      LSE_EFAULT);
    ck_assert_str_eq(msg, "pairwise: config with pair functions required");
    lse_gradcheck res;
    lse_error err = {0};
    lse_assert_status(lse_sim_check_gradient(lse_sim_pairwise, NULL, c, p, NULL,
                                             NULL, 1e-6, 1.0, &res, &err),
                      LSE_EFAULT);
    ck_assert_ptr_nonnull(
        strstr(err.message, "config with pair functions required"));
    lse_sim_args a = {.child = c, .parent = p, .config = NULL};
    lse_assert_status(lse_sim_pairwise->eval(&a, s), LSE_EFAULT);
    const lse_sim_grads out = {0};
    lse_assert_status(lse_sim_pairwise->grad(&a, g, &out), LSE_EFAULT);

    /* no table */
    lse_sim_pair_config cfg = {.fns = NULL, .params = NULL};
    lse_assert_status(lse_sim_pairwise->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(msg, "fns"));

    /* a table without eval or grad */
    const lse_sim_pair_fns no_eval = {.name = "x", .grad = user_grad};
    const lse_sim_pair_fns no_grad = {.name = "y", .eval = user_eval};
    cfg.fns = &no_eval;
    lse_assert_status(lse_sim_pairwise->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "eval"));
    a.config = &cfg;
    lse_assert_status(lse_sim_pairwise->eval(&a, s), LSE_EINVAL);
    cfg.fns = &no_grad;
    lse_assert_status(lse_sim_pairwise->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "grad"));
    lse_assert_status(lse_sim_pairwise->grad(&a, g, &out), LSE_EINVAL);

    /* parameter nodes are not for this type */
    cfg.fns = &user_fns;
    cfg.params = &uparams;
    shape.n_param = 1;
    lse_assert_status(lse_sim_pairwise->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EINVAL);

    /* mismatched operands */
    gsl_matrix *x = make(NC + 1, D, 5.3, 0.6);
    a.context = x;
    lse_assert_status(lse_sim_pairwise->eval(&a, s), LSE_EDIM);
    a.context = NULL;
    gsl_matrix *s_bad = gsl_matrix_alloc(NC, NP + 1);
    lse_assert_status(lse_sim_pairwise->eval(&a, s_bad), LSE_EDIM);
    lse_assert_status(lse_sim_pairwise->grad(&a, s_bad, &out), LSE_EDIM);
    gsl_matrix *gc_bad = gsl_matrix_calloc(NC, D + 1);
    const lse_sim_grads out_bad = {.child = gc_bad};
    lse_assert_status(lse_sim_pairwise->grad(&a, g, &out_bad), LSE_EDIM);

    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(x);
    gsl_matrix_free(s_bad);
    gsl_matrix_free(gc_bad);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_pairwise");
    TCase *tc = tcase_create("pairwise");
    tcase_add_test(tc, test_type);
    tcase_add_test(tc, test_user_eval_matches_formula);
    tcase_add_test(tc, test_user_gradients);
    tcase_add_test(tc, test_wrong_gradient_is_caught);
    tcase_add_test(tc, test_pairwise_dot_equals_dot);
    tcase_add_test(tc, test_partial_outputs_accumulate);
    tcase_add_test(tc, test_params_are_borrowed);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
