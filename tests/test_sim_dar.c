/* Tests of the DAR similarity (lib/sim/dar.c): the paper's laws (A1, A4),
 * the static and unrolled resonance against a scalar reference, gradients
 * for every gate, self terms, the contraction check and the fixed point. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

#define NC 5
#define NP 6
#define D 4

/* ------------------------------------------------------------------ */
/* helpers                                                             */

/* high-entropy values, no zeros or ones */
static gsl_matrix *make(size_t n, size_t d, double seed, double scale)
{
    gsl_matrix *m = gsl_matrix_alloc(n, d);
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++)
            gsl_matrix_set(m, i, k,
                           scale * (0.4127 * sin(1.3 + seed + 2.1 * (double)i +
                                                 1.7 * (double)k) +
                                    0.1931 * cos(0.7 * seed +
                                                 0.9 * (double)i * (double)k)));
    return m;
}

static lse_dar_config config_default(void)
{
    return *(const lse_dar_config *)lse_sim_dar->config_default;
}

static lse_sim_shape shape_of(const gsl_matrix *c, const gsl_matrix *p)
{
    return (lse_sim_shape){.n_child = c->size1,
                           .block = c->size1,
                           .n_parent = p->size1,
                           .d_child = c->size2,
                           .d_parent = p->size2,
                           .d_context = 0,
                           .n_param = 0,
                           .param_rows = NULL,
                           .param_cols = NULL};
}

static lse_status check_cfg(const lse_dar_config *cfg, const gsl_matrix *c,
                            const gsl_matrix *p, char *msg, size_t len)
{
    const lse_sim_shape shape = shape_of(c, p);
    msg[0] = '\0';
    return lse_sim_dar->check(&shape, cfg, msg, len);
}

/* S = dar(C, P) through the type object; G non-NULL: also add gradients */
static lse_status run(const lse_dar_config *cfg, const gsl_matrix *c,
                      const gsl_matrix *p, gsl_matrix *s, const gsl_matrix *g,
                      gsl_matrix *gc, gsl_matrix *gp)
{
    const lse_sim_shape shape = shape_of(c, p);
    char msg[256];
    lse_status st = lse_sim_dar->check(&shape, cfg, msg, sizeof msg);
    if (st != LSE_OK)
        return st;
    void *work = NULL;
    st = lse_sim_dar->work_new(&shape, cfg, &work);
    if (st != LSE_OK)
        return st;
    const lse_sim_args a = {.child = c,
                            .parent = p,
                            .context = NULL,
                            .child_offset = 0,
                            .param = NULL,
                            .config = cfg,
                            .work = work};
    st = lse_sim_dar->eval(&a, s);
    if (st == LSE_OK && g != NULL) {
        const lse_sim_grads out = {
            .child = gc, .parent = gp, .context = NULL, .param = NULL};
        st = lse_sim_dar->grad(&a, g, &out);
    }
    lse_sim_dar->work_free(work);
    return st;
}

static double ref_gate(lse_gate gate, double a)
{
    switch (gate) {
    case LSE_GATE_SIGMOID:
        return 1.0 / (1.0 + exp(-a));
    case LSE_GATE_TANH:
        return 0.5 * (1.0 + tanh(a));
    case LSE_GATE_LINEAR:
        return fmin(fmax(a + 0.5, 0.0), 1.0);
    }
    return NAN;
}

static double ref_cos(const gsl_matrix *c, size_t i, const gsl_matrix *p,
                      size_t j, double eps)
{
    double cp = 0.0, cc = 0.0, pp = 0.0;
    for (size_t k = 0; k < c->size2; k++) {
        cp += gsl_matrix_get(c, i, k) * gsl_matrix_get(p, j, k);
        cc += gsl_matrix_get(c, i, k) * gsl_matrix_get(c, i, k);
        pp += gsl_matrix_get(p, j, k) * gsl_matrix_get(p, j, k);
    }
    return cp / (fmax(sqrt(cc), eps) * fmax(sqrt(pp), eps));
}

static double ref_dot(const gsl_matrix *c, size_t i, const gsl_matrix *p,
                      size_t j)
{
    double cp = 0.0;
    for (size_t k = 0; k < c->size2; k++)
        cp += gsl_matrix_get(c, i, k) * gsl_matrix_get(p, j, k);
    return cp / sqrt((double)c->size2);
}

/* the paper's r: static gate or T_u unrolled steps from r = 0 */
static double ref_r(const lse_dar_config *cfg, double cosv)
{
    if (cfg->steps == 0)
        return ref_gate(cfg->gate, cfg->alpha * (cosv - cfg->rho));
    double r = 0.0;
    for (unsigned t = 0; t < cfg->steps; t++)
        r = ref_gate(cfg->gate, cfg->alpha * (cosv + cfg->beta * r - cfg->rho));
    return r;
}

/* Distance of every gate argument (every pair, every step) from the kinks
 * of the piecewise-linear gate, and how many arguments are inside. */
static double linear_kink_distance(const lse_dar_config *cfg,
                                   const gsl_matrix *c, const gsl_matrix *p,
                                   size_t *n_inside)
{
    double dist = INFINITY;
    *n_inside = 0;
    for (size_t i = 0; i < c->size1; i++) {
        for (size_t j = 0; j < p->size1; j++) {
            const double cs = ref_cos(c, i, p, j, cfg->eps);
            const unsigned steps = cfg->steps == 0 ? 1 : cfg->steps;
            double r = 0.0;
            for (unsigned t = 0; t < steps; t++) {
                const double y =
                    cfg->alpha * (cs + cfg->beta * r - cfg->rho) + 0.5;
                dist = fmin(dist, fmin(fabs(y), fabs(y - 1.0)));
                *n_inside += y > 0.0 && y < 1.0;
                r = fmin(fmax(y, 0.0), 1.0);
            }
        }
    }
    return dist;
}

/* ------------------------------------------------------------------ */
/* type object, defaults, describe                                     */

START_TEST(test_type_and_defaults)
{
    ck_assert_str_eq(lse_sim_dar->name, "dar");
    ck_assert_uint_eq(lse_sim_dar->n_param, 0);
    ck_assert_uint_eq(lse_sim_dar->config_size, sizeof(lse_dar_config));
    const lse_dar_config d = config_default();
    ck_assert_double_eq(d.lambda, 0.2);
    ck_assert_double_eq(d.alpha, 8.0);
    ck_assert_double_eq(d.rho, 0.5);
    ck_assert_double_eq(d.beta, 0.0);
    ck_assert_uint_eq(d.steps, 0);
    ck_assert_int_eq(d.gate, LSE_GATE_SIGMOID);
    ck_assert_double_eq(d.eps, 1e-12);
    char buf[128];
    ck_assert_int_gt(lse_sim_dar->describe(&d, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "lambda=0.2, alpha=8, rho=0.5, gate=sigmoid");
    lse_dar_config u = d;
    u.steps = 2;
    u.beta = 0.25;
    u.gate = LSE_GATE_TANH;
    ck_assert_int_gt(lse_sim_dar->describe(&u, buf, sizeof buf), 0);
    ck_assert_str_eq(
        buf, "lambda=0.2, alpha=8, rho=0.5, beta=0.25, steps=2, gate=tanh");
}
END_TEST

/* ------------------------------------------------------------------ */
/* eval against the scalar reference                                   */

static void check_eval(const lse_dar_config *cfg, const gsl_matrix *c,
                       const gsl_matrix *p)
{
    gsl_matrix *s = gsl_matrix_alloc(c->size1, p->size1);
    lse_assert_ok(run(cfg, c, p, s, NULL, NULL, NULL));
    for (size_t i = 0; i < c->size1; i++) {
        for (size_t j = 0; j < p->size1; j++) {
            const double want =
                ref_dot(c, i, p, j) +
                cfg->lambda * ref_r(cfg, ref_cos(c, i, p, j, cfg->eps));
            ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), want, 1e-14);
        }
    }
    gsl_matrix_free(s);
}

START_TEST(test_eval_matches_reference)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    const lse_gate gates[] = {LSE_GATE_SIGMOID, LSE_GATE_TANH, LSE_GATE_LINEAR};
    const double alphas[] = {8.0, 3.0, 1.6};
    const double betas[] = {0.45, -0.5, 0.55};
    for (size_t k = 0; k < 3; k++) {
        for (unsigned steps = 0; steps <= 3; steps++) {
            lse_dar_config cfg = config_default();
            cfg.gate = gates[k];
            cfg.alpha = alphas[k];
            cfg.rho = 0.2;
            cfg.lambda = 0.7;
            cfg.steps = steps;
            cfg.beta = steps > 0 ? betas[k] : 0.0;
            check_eval(&cfg, c, p);
        }
    }
    /* the defaults */
    const lse_dar_config d = config_default();
    check_eval(&d, c, p);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* lse_dar_resonance(_matrix): the scalar reference, and the similarity's
 * own scores S = c.p / sqrt(d) + lambda r; NULL config = the defaults. */
START_TEST(test_resonance_export)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *r = gsl_matrix_alloc(NC, NP), *s = gsl_matrix_alloc(NC, NP);
    gsl_vector_view zero = gsl_matrix_row(c, 2);
    gsl_vector_set_zero(&zero.vector); /* the norm floor */
    const lse_gate gates[] = {LSE_GATE_SIGMOID, LSE_GATE_TANH, LSE_GATE_LINEAR};
    for (size_t k = 0; k < 3; k++) {
        for (unsigned steps = 0; steps <= 3; steps += 3) {
            lse_dar_config cfg = config_default();
            cfg.gate = gates[k];
            cfg.alpha = 1.6;
            cfg.rho = 0.2;
            cfg.lambda = 0.7;
            cfg.steps = steps;
            cfg.beta = steps > 0 ? 0.45 : 0.0;
            lse_assert_ok(lse_dar_resonance_matrix(&cfg, c, p, r, NULL));
            lse_assert_ok(run(&cfg, c, p, s, NULL, NULL, NULL));
            for (size_t i = 0; i < NC; i++)
                for (size_t j = 0; j < NP; j++) {
                    const double cs = ref_cos(c, i, p, j, cfg.eps);
                    ck_assert_double_eq_tol(gsl_matrix_get(r, i, j),
                                            ref_r(&cfg, cs), 1e-15);
                    ck_assert_double_eq_tol(lse_dar_resonance(&cfg, cs),
                                            ref_r(&cfg, cs), 1e-15);
                    ck_assert_double_eq_tol(gsl_matrix_get(s, i, j),
                                            ref_dot(c, i, p, j) +
                                                cfg.lambda *
                                                    gsl_matrix_get(r, i, j),
                                            1e-14);
                }
        }
    }
    const lse_dar_config d = config_default();
    ck_assert_double_eq_tol(lse_dar_resonance(NULL, 0.3), ref_r(&d, 0.3),
                            1e-15);
    lse_assert_ok(lse_dar_resonance_matrix(NULL, c, p, r, NULL));
    ck_assert_double_eq_tol(gsl_matrix_get(r, 1, 4),
                            ref_r(&d, ref_cos(c, 1, p, 4, d.eps)), 1e-15);
    /* errors */
    lse_error err;
    ck_assert_int_eq(lse_dar_resonance_matrix(NULL, NULL, p, r, &err),
                     LSE_EFAULT);
    gsl_matrix *bad = gsl_matrix_alloc(NP, NC);
    ck_assert_int_eq(lse_dar_resonance_matrix(NULL, c, p, bad, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "expected 5x6"));
    gsl_matrix *p3 = make(NP, 3, 1.0, 1.0);
    ck_assert_int_eq(lse_dar_resonance_matrix(NULL, c, p3, r, &err), LSE_EDIM);
    gsl_matrix_free(p3);
    gsl_matrix_free(bad);
    gsl_matrix_free(r);
    gsl_matrix_free(s);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* One unrolled step from r = 0 is the static gate, whatever beta. */
START_TEST(test_one_step_is_static)
{
    gsl_matrix *c = make(NC, D, 0.3, 1.0), *p = make(NP, D, 1.9, 0.8);
    gsl_matrix *s0 = gsl_matrix_alloc(NC, NP), *s1 = gsl_matrix_alloc(NC, NP);
    for (int gate = 0; gate < 3; gate++) {
        lse_dar_config cfg = config_default();
        cfg.gate = (lse_gate)gate;
        cfg.alpha = 1.9;
        cfg.lambda = 0.9;
        lse_assert_ok(run(&cfg, c, p, s0, NULL, NULL, NULL));
        cfg.steps = 1;
        cfg.beta = -0.4127;
        lse_assert_ok(run(&cfg, c, p, s1, NULL, NULL, NULL));
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j < NP; j++)
                ck_assert_double_eq(gsl_matrix_get(s0, i, j),
                                    gsl_matrix_get(s1, i, j));
    }
    gsl_matrix_free(s0);
    gsl_matrix_free(s1);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A1: lambda = 0 is the scaled dot product, values and gradients      */

START_TEST(test_a1_lambda_zero_is_scaled_dot)
{
    gsl_matrix *c = make(NC, D, 0.7, 1.1), *p = make(NP, D, 3.3, 0.9);
    gsl_matrix *s = gsl_matrix_alloc(NC, NP), *g = make(NC, NP, 5.1, 1.0);
    gsl_matrix *gc = gsl_matrix_calloc(NC, D), *gp = gsl_matrix_calloc(NP, D);
    for (unsigned steps = 0; steps <= 2; steps++) {
        lse_dar_config cfg = config_default();
        cfg.lambda = 0.0;
        cfg.steps = steps;
        cfg.beta = steps > 0 ? 0.3 : 0.0;
        gsl_matrix_set_zero(gc);
        gsl_matrix_set_zero(gp);
        lse_assert_ok(run(&cfg, c, p, s, g, gc, gp));
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j < NP; j++) {
                const double want = ref_dot(c, i, p, j);
                ck_assert_double_le(fabs(gsl_matrix_get(s, i, j) - want),
                                    1e-15 * fmax(1.0, fabs(want)));
            }
        /* dE/dC = G P / sqrt(d), dE/dP = G' C / sqrt(d) */
        for (size_t i = 0; i < NC; i++)
            for (size_t k = 0; k < D; k++) {
                double want = 0.0;
                for (size_t j = 0; j < NP; j++)
                    want += gsl_matrix_get(g, i, j) * gsl_matrix_get(p, j, k);
                want /= sqrt((double)D);
                ck_assert_double_le(fabs(gsl_matrix_get(gc, i, k) - want),
                                    1e-15 * fmax(1.0, fabs(want)));
            }
        for (size_t j = 0; j < NP; j++)
            for (size_t k = 0; k < D; k++) {
                double want = 0.0;
                for (size_t i = 0; i < NC; i++)
                    want += gsl_matrix_get(g, i, j) * gsl_matrix_get(c, i, k);
                want /= sqrt((double)D);
                ck_assert_double_le(fabs(gsl_matrix_get(gp, j, k) - want),
                                    1e-15 * fmax(1.0, fabs(want)));
            }
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
}
END_TEST

/* A1 against the library's own scaled-dot type: bitwise equal values and
 * gradients (the same dgemm calls). */
START_TEST(test_a1_equals_lse_sim_scaled_dot)
{
    gsl_matrix *c = make(NC, D, 0.7, 1.1), *p = make(NP, D, 3.3, 0.9);
    gsl_matrix *g = make(NC, NP, 5.1, 1.0);
    gsl_matrix *s = gsl_matrix_alloc(NC, NP), *s2 = gsl_matrix_alloc(NC, NP);
    gsl_matrix *gc = gsl_matrix_calloc(NC, D), *gp = gsl_matrix_calloc(NP, D);
    gsl_matrix *gc2 = gsl_matrix_calloc(NC, D);
    gsl_matrix *gp2 = gsl_matrix_calloc(NP, D);
    lse_dar_config cfg = config_default();
    cfg.lambda = 0.0;
    lse_assert_ok(run(&cfg, c, p, s, g, gc, gp));
    const lse_sim_shape shape = shape_of(c, p);
    char msg[256];
    lse_assert_ok(lse_sim_scaled_dot->check(&shape, NULL, msg, sizeof msg));
    const lse_sim_args a = {.child = c, .parent = p};
    const lse_sim_grads out = {.child = gc2, .parent = gp2};
    lse_assert_ok(lse_sim_scaled_dot->eval(&a, s2));
    lse_assert_ok(lse_sim_scaled_dot->grad(&a, g, &out));
    ck_assert(gsl_matrix_equal(s, s2));
    ck_assert(gsl_matrix_equal(gc, gc2));
    ck_assert(gsl_matrix_equal(gp, gp2));
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(g);
    gsl_matrix_free(s);
    gsl_matrix_free(s2);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
    gsl_matrix_free(gc2);
    gsl_matrix_free(gp2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A4: bounded influence |S_dar - S_scaled_dot| <= |lambda|             */

START_TEST(test_a4_bounded_influence)
{
    /* many pairs spanning all cosines, near-parallel ones included */
    gsl_matrix *c = make(12, 3, 0.2, 1.7), *p = make(15, 3, 4.4, 0.6);
    for (size_t i = 0; i < 3; i++)
        for (size_t k = 0; k < 3; k++)
            gsl_matrix_set(p, i, k, gsl_matrix_get(c, i, k));
    gsl_matrix *s = gsl_matrix_alloc(12, 15);
    const double lambdas[] = {0.4127, -2.31, 7.5};
    for (int gate = 0; gate < 3; gate++) {
        for (unsigned steps = 0; steps <= 3; steps++) {
            for (size_t l = 0; l < 3; l++) {
                lse_dar_config cfg = config_default();
                cfg.gate = (lse_gate)gate;
                cfg.alpha = gate == 2 ? 0.9 : 3.1;
                cfg.rho = -0.15;
                cfg.lambda = lambdas[l];
                cfg.steps = steps;
                cfg.beta = steps > 0 ? 0.6 : 0.0;
                lse_assert_ok(run(&cfg, c, p, s, NULL, NULL, NULL));
                for (size_t i = 0; i < 12; i++)
                    for (size_t j = 0; j < 15; j++) {
                        const double dev =
                            gsl_matrix_get(s, i, j) - ref_dot(c, i, p, j);
                        /* the same sign as lambda, and at most |lambda| */
                        ck_assert_double_ge(dev * copysign(1.0, cfg.lambda),
                                            -1e-15);
                        ck_assert_double_le(fabs(dev),
                                            fabs(cfg.lambda) + 1e-14);
                    }
            }
        }
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* gradients                                                           */

static void gradcheck(const lse_dar_config *cfg, const gsl_matrix *c,
                      const gsl_matrix *p)
{
    lse_gradcheck res;
    lse_error err = {0};
    lse_assert_ok(lse_sim_check_gradient(lse_sim_dar, cfg, c, p, NULL, NULL,
                                         1e-6, 1.0, &res, &err));
    ck_assert_uint_eq(res.n_checked, c->size1 * c->size2 + p->size1 * p->size2);
    ck_assert_msg(res.max_error < 1e-6,
                  "gate %d steps %u beta %g: error %g at %s (%g vs %g)",
                  (int)cfg->gate, cfg->steps, cfg->beta, res.max_error,
                  res.where, res.analytic, res.numeric);
}

/* Self term: E(X) = sum_ij G_ij S(X, X)_ij, total derivative = child
 * gradient + parent gradient. */
static void self_total_check(const lse_dar_config *cfg, const gsl_matrix *x0)
{
    const size_t n = x0->size1, d = x0->size2;
    gsl_matrix *x = gsl_matrix_alloc(n, d), *s = gsl_matrix_alloc(n, n);
    gsl_matrix *g = make(n, n, 1.234, 1.0);
    gsl_matrix *gc = gsl_matrix_calloc(n, d), *gp = gsl_matrix_calloc(n, d);
    gsl_matrix_memcpy(x, x0);
    lse_assert_ok(run(cfg, x, x, s, g, gc, gp));
    const double h = 1e-6;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < d; k++) {
            const double v = gsl_matrix_get(x, i, k);
            double e[2];
            for (int side = 0; side < 2; side++) {
                gsl_matrix_set(x, i, k, side == 0 ? v + h : v - h);
                lse_assert_ok(run(cfg, x, x, s, NULL, NULL, NULL));
                double sum = 0.0;
                for (size_t a = 0; a < n; a++)
                    for (size_t b = 0; b < n; b++)
                        sum +=
                            gsl_matrix_get(g, a, b) * gsl_matrix_get(s, a, b);
                e[side] = sum;
            }
            gsl_matrix_set(x, i, k, v);
            const double num = (e[0] - e[1]) / (2 * h);
            const double ana =
                gsl_matrix_get(gc, i, k) + gsl_matrix_get(gp, i, k);
            const double err = fabs(num - ana) / fmax(1.0, fabs(num));
            worst = fmax(worst, err);
        }
    }
    ck_assert_msg(worst < 1e-6, "self total derivative: error %g", worst);
    gsl_matrix_free(x);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
}

typedef struct grad_case {
    lse_gate gate;
    double alpha, rho, beta;
} grad_case;

/* per gate: alpha |beta| L_gate < 1 for the unrolled cases */
static const grad_case grad_cases[] = {
    {LSE_GATE_SIGMOID, 8.0, 0.2, 0.45},  /* 8 * 0.45 / 4 = 0.9 */
    {LSE_GATE_SIGMOID, 5.3, -0.1, -0.6}, /* 0.795 */
    {LSE_GATE_TANH, 3.0, 0.2, 0.5},      /* 3 * 0.5 / 2 = 0.75 */
    {LSE_GATE_LINEAR, 1.6, 0.1, 0.55},   /* 0.88 */
};

START_TEST(test_gradients)
{
    const grad_case *gcase = &grad_cases[_i / 4];
    const unsigned steps = (unsigned)(_i % 4);
    lse_dar_config cfg = config_default();
    cfg.gate = gcase->gate;
    cfg.alpha = gcase->alpha;
    cfg.rho = gcase->rho;
    cfg.lambda = 2.3;
    cfg.steps = steps;
    cfg.beta = steps > 0 ? gcase->beta : 0.0;
    /* children of small norm, so the resonance dominates their gradient */
    gsl_matrix *c = make(NC, D, 0.0, 0.35), *p = make(NP, D, 2.9, 1.3);
    if (cfg.gate == LSE_GATE_LINEAR) {
        size_t inside;
        const double dist = linear_kink_distance(&cfg, c, p, &inside);
        ck_assert_double_gt(dist, 1e-4); /* finite differences stay off */
        ck_assert_uint_gt(inside, 5);    /* the slope is exercised */
    }
    gradcheck(&cfg, c, p);
    /* self term: the same matrix as children and parents */
    gsl_matrix *x = make(NP, D, 1.1, 0.9);
    if (cfg.gate == LSE_GATE_LINEAR) {
        size_t inside;
        ck_assert_double_gt(linear_kink_distance(&cfg, x, x, &inside), 1e-4);
    }
    gradcheck(&cfg, x, x);
    self_total_check(&cfg, x);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(x);
}
END_TEST

/* Rows of norm below eps take the floor branch; its gradient agrees with
 * its value (cos = c.p_hat / eps there). */
START_TEST(test_floor_branch_gradient)
{
    lse_dar_config cfg = config_default();
    cfg.eps = 0.5;
    cfg.lambda = 1.3;
    cfg.alpha = 2.2;
    cfg.rho = 0.05;
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    /* child 1 and parent 2 below the floor */
    for (size_t k = 0; k < D; k++) {
        *gsl_matrix_ptr(c, 1, k) *= 0.3 / 0.8;
        *gsl_matrix_ptr(p, 2, k) *= 0.25;
    }
    double n1 = 0.0, n2 = 0.0;
    for (size_t k = 0; k < D; k++) {
        n1 += gsl_matrix_get(c, 1, k) * gsl_matrix_get(c, 1, k);
        n2 += gsl_matrix_get(p, 2, k) * gsl_matrix_get(p, 2, k);
    }
    ck_assert_double_lt(sqrt(n1), cfg.eps);
    ck_assert_double_lt(sqrt(n2), cfg.eps);
    check_eval(&cfg, c, p);
    gradcheck(&cfg, c, p);
    cfg.steps = 2;
    cfg.beta = 0.7;
    check_eval(&cfg, c, p);
    gradcheck(&cfg, c, p);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* A zero row has cosine 0 with the default floor: finite values. */
START_TEST(test_zero_row_is_finite)
{
    const lse_dar_config cfg = config_default();
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *s = gsl_matrix_alloc(NC, NP), *g = make(NC, NP, 0.5, 1.0);
    gsl_matrix *gc = gsl_matrix_calloc(NC, D), *gp = gsl_matrix_calloc(NP, D);
    for (size_t k = 0; k < D; k++)
        gsl_matrix_set(c, 2, k, 0.0);
    lse_assert_ok(run(&cfg, c, p, s, g, gc, gp));
    const double r0 = ref_gate(cfg.gate, cfg.alpha * (0.0 - cfg.rho));
    for (size_t j = 0; j < NP; j++)
        ck_assert_double_eq_tol(gsl_matrix_get(s, 2, j), cfg.lambda * r0,
                                1e-15);
    for (size_t i = 0; i < NC; i++)
        for (size_t k = 0; k < D; k++)
            ck_assert(isfinite(gsl_matrix_get(gc, i, k)));
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
}
END_TEST

/* ------------------------------------------------------------------ */
/* contraction and fixed point                                         */

START_TEST(test_unroll_not_contraction_refused)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    char msg[256];
    lse_dar_config cfg = config_default();
    cfg.alpha = 8.0;
    cfg.beta = 0.5; /* alpha beta / 4 = 1 */
    cfg.steps = 2;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "not a contraction"));
    ck_assert_ptr_nonnull(strstr(msg, "alpha*|beta|/4 = 1 >= 1"));
    /* |beta| counts: a negative feedback of the same size is refused too */
    cfg.beta = -0.5;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    /* just below: accepted */
    cfg.beta = 0.4999;
    lse_assert_ok(check_cfg(&cfg, c, p, msg, sizeof msg));
    /* the static gate ignores beta */
    cfg.beta = 0.5;
    cfg.steps = 0;
    lse_assert_ok(check_cfg(&cfg, c, p, msg, sizeof msg));
    /* tanh: alpha |beta| / 2; linear: alpha |beta| */
    cfg.steps = 3;
    cfg.gate = LSE_GATE_TANH;
    cfg.alpha = 4.0;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "alpha*|beta|/2 = 1 >= 1"));
    cfg.alpha = 3.9;
    lse_assert_ok(check_cfg(&cfg, c, p, msg, sizeof msg));
    cfg.gate = LSE_GATE_LINEAR;
    cfg.alpha = 2.0;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "not a contraction"));
    cfg.alpha = 1.9;
    lse_assert_ok(check_cfg(&cfg, c, p, msg, sizeof msg));
    /* through the public gradient checker: status and message */
    cfg = config_default();
    cfg.beta = 0.5;
    cfg.steps = 1;
    lse_gradcheck res;
    lse_error err = {0};
    lse_assert_status(lse_sim_check_gradient(lse_sim_dar, &cfg, c, p, NULL,
                                             NULL, 1e-6, 1.0, &res, &err),
                      LSE_EDOM);
    ck_assert_int_eq(err.status, LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "not a contraction"));
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

START_TEST(test_unroll_converges_to_fixed_point)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *s1 = gsl_matrix_alloc(NC, NP), *s0 = gsl_matrix_alloc(NC, NP);
    /* alpha |beta| L_gate <= 0.6, so 60 steps shrink the error below
     * 0.6^60 ~ 5e-14 */
    const grad_case cases[] = {{LSE_GATE_SIGMOID, 8.0, 0.3, 0.25},
                               {LSE_GATE_SIGMOID, 6.0, -0.2, -0.4},
                               {LSE_GATE_TANH, 2.4, 0.1, 0.5},
                               {LSE_GATE_LINEAR, 1.5, 0.0, 0.4}};
    for (size_t k = 0; k < 4; k++) {
        lse_dar_config cfg = config_default();
        cfg.gate = cases[k].gate;
        cfg.alpha = cases[k].alpha;
        cfg.rho = cases[k].rho;
        cfg.beta = cases[k].beta;
        cfg.steps = 60;
        cfg.lambda = 1.0;
        lse_assert_ok(run(&cfg, c, p, s1, NULL, NULL, NULL));
        cfg.lambda = 0.0;
        lse_assert_ok(run(&cfg, c, p, s0, NULL, NULL, NULL));
        double worst = 0.0;
        for (size_t i = 0; i < NC; i++)
            for (size_t j = 0; j < NP; j++) {
                /* r = S(lambda = 1) - S(lambda = 0) */
                const double r =
                    gsl_matrix_get(s1, i, j) - gsl_matrix_get(s0, i, j);
                const double cs = ref_cos(c, i, p, j, cfg.eps);
                const double fix = ref_gate(
                    cfg.gate, cfg.alpha * (cs + cfg.beta * r - cfg.rho));
                worst = fmax(worst, fabs(r - fix));
            }
        ck_assert_msg(worst < 1e-12, "case %zu: residual %g", k, worst);
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s0);
    gsl_matrix_free(s1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* error paths                                                         */

START_TEST(test_check_errors)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    char msg[256];
    lse_dar_config cfg;

    cfg = config_default();
    cfg.alpha = 0.0;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "alpha"));
    cfg.alpha = -1.5;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    cfg.alpha = NAN;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);

    cfg = config_default();
    cfg.rho = 1.0001;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "rho"));
    cfg.rho = -1.2;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    cfg.rho = -1.0; /* the interval is closed */
    lse_assert_ok(check_cfg(&cfg, c, p, msg, sizeof msg));

    cfg = config_default();
    cfg.eps = 0.0;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "eps"));
    cfg.eps = -1e-3;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);

    cfg = config_default();
    cfg.lambda = INFINITY;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "non-finite"));
    cfg = config_default();
    cfg.beta = NAN;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EDOM);

    cfg = config_default();
    cfg.gate = (lse_gate)7;
    lse_assert_status(check_cfg(&cfg, c, p, msg, sizeof msg), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "gate"));

    /* shapes */
    cfg = config_default();
    lse_sim_shape shape = shape_of(c, p);
    shape.d_parent = D + 1;
    lse_assert_status(lse_sim_dar->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    shape = shape_of(c, p);
    shape.d_context = 2;
    lse_assert_status(lse_sim_dar->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    shape = shape_of(c, p);
    shape.d_child = shape.d_parent = 0;
    lse_assert_status(lse_sim_dar->check(&shape, &cfg, msg, sizeof msg),
                      LSE_EDIM);
    /* NULL config means the defaults */
    shape = shape_of(c, p);
    lse_assert_ok(lse_sim_dar->check(&shape, NULL, msg, sizeof msg));
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

START_TEST(test_kernel_errors)
{
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *s = gsl_matrix_alloc(NC, NP);
    lse_dar_config cfg = config_default();
    /* non-finite input */
    gsl_matrix_set(c, 3, 1, NAN);
    lse_assert_status(run(&cfg, c, p, s, NULL, NULL, NULL), LSE_ENONFINITE);
    gsl_matrix_set(c, 3, 1, 0.25);
    /* operands that do not match the workspace */
    const lse_sim_shape shape = shape_of(c, p);
    void *work = NULL;
    lse_assert_ok(lse_sim_dar->work_new(&shape, &cfg, &work));
    gsl_matrix *p2 = make(NP, D + 1, 0.0, 1.0);
    lse_sim_args a = {.child = c, .parent = p2, .config = &cfg, .work = work};
    lse_assert_status(lse_sim_dar->eval(&a, s), LSE_EDIM);
    a.parent = p;
    gsl_matrix *s2 = gsl_matrix_alloc(NC, NP + 1);
    lse_assert_status(lse_sim_dar->eval(&a, s2), LSE_EDIM);
    a.work = NULL;
    lse_assert_status(lse_sim_dar->eval(&a, s), LSE_EFAULT);
    a.work = work;
    lse_assert_ok(lse_sim_dar->eval(&a, s));
    lse_sim_dar->work_free(work);
    gsl_matrix_free(p2);
    gsl_matrix_free(s2);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
}
END_TEST

/* Blocks: the term may evaluate fewer child rows than the workspace's
 * block; each row's values do not depend on the block. */
START_TEST(test_blocks)
{
    lse_dar_config cfg = config_default();
    cfg.steps = 2;
    cfg.beta = 0.3;
    gsl_matrix *c = make(NC, D, 0.0, 1.0), *p = make(NP, D, 2.9, 1.3);
    gsl_matrix *s = gsl_matrix_alloc(NC, NP);
    lse_assert_ok(run(&cfg, c, p, s, NULL, NULL, NULL));
    lse_sim_shape shape = shape_of(c, p);
    shape.block = 3;
    void *work = NULL;
    lse_assert_ok(lse_sim_dar->work_new(&shape, &cfg, &work));
    gsl_matrix_const_view cb = gsl_matrix_const_submatrix(c, 3, 0, 2, D);
    gsl_matrix *sb = gsl_matrix_alloc(2, NP);
    const lse_sim_args a = {.child = &cb.matrix,
                            .parent = p,
                            .child_offset = 3,
                            .config = &cfg,
                            .work = work};
    lse_assert_ok(lse_sim_dar->eval(&a, sb));
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < NP; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(sb, i, j),
                                    gsl_matrix_get(s, 3 + i, j), 1e-15);
    /* a block larger than the workspace's is refused */
    lse_sim_args big = a;
    big.child = c;
    lse_assert_status(lse_sim_dar->eval(&big, s), LSE_EDIM);
    lse_sim_dar->work_free(work);
    gsl_matrix_free(sb);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* through the public graph API                                        */

/* Causal self-attention with DAR in blocks of 2 child rows: the graph's
 * gradient (child and parent sides through the term) agrees with finite
 * differences of its energy; a non-contracting unroll is refused when the
 * term is added, with the message on the graph. */
START_TEST(test_graph_self_attention)
{
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_graph_set_block_rows(g, 2);
    lse_node *x;
    lse_assert_ok(lse_graph_add_node(g, "x", 5, D, 0, &x));
    gsl_matrix *x0 = make(5, D, 0.9, 0.8);
    lse_assert_ok(lse_node_set_value(x, x0));
    lse_dar_config cfg = config_default();
    cfg.lambda = 1.7;
    cfg.steps = 2;
    cfg.beta = 0.4;
    cfg.rho = 0.1;
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(x);
    spec.sim = lse_sim_dar;
    spec.config = &cfg;
    spec.beta = 1.3;
    spec.mask = LSE_MASK_CAUSAL;
    spec.keep_matrices = 0;
    lse_assert_ok(lse_graph_add_lse(g, "attn", &spec, NULL));
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, x, 1e-6, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-6, "error %g at %s", res.max_error,
                  res.where);
    cfg.beta = 0.5; /* alpha beta / 4 = 1 */
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "not a contraction"));
    lse_graph_free(g);
    gsl_matrix_free(x0);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_dar");
    TCase *tc = tcase_create("dar");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_type_and_defaults);
    tcase_add_test(tc, test_eval_matches_reference);
    tcase_add_test(tc, test_resonance_export);
    tcase_add_test(tc, test_one_step_is_static);
    tcase_add_test(tc, test_a1_lambda_zero_is_scaled_dot);
    tcase_add_test(tc, test_a1_equals_lse_sim_scaled_dot);
    tcase_add_test(tc, test_a4_bounded_influence);
    tcase_add_loop_test(tc, test_gradients, 0,
                        (int)(4 * (sizeof grad_cases / sizeof grad_cases[0])));
    tcase_add_test(tc, test_floor_branch_gradient);
    tcase_add_test(tc, test_zero_row_is_finite);
    tcase_add_test(tc, test_unroll_not_contraction_refused);
    tcase_add_test(tc, test_unroll_converges_to_fixed_point);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_kernel_errors);
    tcase_add_test(tc, test_blocks);
    tcase_add_test(tc, test_graph_self_attention);
    suite_add_tcase(s, tc);
    return s;
}
