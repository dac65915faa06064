#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Spatiotemporal attention (models/stattn.c). A small three-layer model:
 * data 4 rows of 3 per step, then 3 slots of 2, then 2 slots of 2, over
 * T = 4 steps with a temporal window of 2; projections the identity plus
 * N(0, 0.3^2), data and states N(0, 1) draws of a seeded generator. */

#define NT 4

static lse_stattn_config small_config(void)
{
    lse_stattn_config c = lse_stattn_config_default();
    c.n_layers = 3;
    c.n_slots[0] = 4;
    c.dim[0] = 3;
    c.n_slots[1] = 3;
    c.dim[1] = 2;
    c.n_slots[2] = 2;
    c.dim[2] = 2;
    c.proj_dim[2] = 3;
    c.T = NT;
    c.window = 2;
    c.beta_inter = 0.7;
    c.beta_intra = 1.3;
    c.beta_temporal = 0.9;
    c.init_sd = 0.3;
    c.seed = 5;
    return c;
}

static void fill(lse_node *n, gsl_rng *r, double sd)
{
    gsl_matrix *x = lse_node_value(n);
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++)
            gsl_matrix_set(x, i, j, sd * gsl_ran_gaussian(r, 1.0));
}

static lse_stattn *make(const lse_stattn_config *c, unsigned long seed)
{
    lse_stattn *m = NULL;
    lse_error err;
    lse_assert_ok(lse_stattn_new(c, &m, &err));
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t l = 0; l < c->n_layers; l++)
        fill(lse_stattn_layer(m, l), r, 1.0);
    gsl_rng_free(r);
    return m;
}

/* S(a, b) = -||Wc a - Wp b||^2 */
static double sim(const gsl_matrix *wc, const gsl_matrix *wp, const double *a,
                  const double *b)
{
    double s = 0.0;
    for (size_t i = 0; i < wc->size1; i++) {
        double d = 0.0;
        for (size_t j = 0; j < wc->size2; j++)
            d += gsl_matrix_get(wc, i, j) * a[j];
        for (size_t j = 0; j < wp->size2; j++)
            d -= gsl_matrix_get(wp, i, j) * b[j];
        s -= d * d;
    }
    return s;
}

/* -(1/beta) log sum exp(beta s[i]) over n entries */
static double neg_lse(const double *s, size_t n, double beta)
{
    double mx = -INFINITY, sum = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fmax(mx, beta * s[i]);
    for (size_t i = 0; i < n; i++)
        sum += exp(beta * s[i] - mx);
    return -(mx + log(sum)) / beta;
}

static const double *row(lse_node *n, size_t i)
{
    return gsl_matrix_const_ptr(lse_node_value(n), i, 0);
}

/* The energy of docs/models/stattn.md written out. */
static double energy_by_hand(const lse_stattn *m, const lse_stattn_config *c)
{
    double e = 0.0, s[64];
    for (size_t l = 1; l < c->n_layers; l++) {
        lse_node *lo = lse_stattn_layer(m, l - 1), *x = lse_stattn_layer(m, l);
        const size_t Kc = c->n_slots[l - 1], K = c->n_slots[l];
        const gsl_matrix *w[3][2];
        for (int q = 0; q < 3; q++)
            for (int side = 0; side < 2; side++)
                w[q][side] = lse_node_value(
                    lse_stattn_proj(m, (lse_stattn_kind)q, l, side));
        for (size_t t = 0; t < c->T; t++) {
            for (size_t i = 0; i < Kc; i++) {
                for (size_t k = 0; k < K; k++)
                    s[k] = sim(w[0][0], w[0][1], row(lo, t * Kc + i),
                               row(x, t * K + k));
                e += neg_lse(s, K, c->beta_inter);
            }
            for (size_t k = 0; k < K; k++) {
                size_t n = 0;
                for (size_t kp = 0; kp < K; kp++)
                    if (kp != k)
                        s[n++] = sim(w[1][0], w[1][1], row(x, t * K + k),
                                     row(x, t * K + kp));
                e += neg_lse(s, n, c->beta_intra);
            }
            if (t == 0)
                continue;
            for (size_t k = 0; k < K; k++) {
                size_t n = 0;
                for (size_t tp = t > c->window ? t - c->window : 0; tp < t; tp++)
                    s[n++] = sim(w[2][0], w[2][1], row(x, t * K + k),
                                 row(x, tp * K + k));
                e += neg_lse(s, n, c->beta_temporal);
            }
        }
    }
    return e;
}

START_TEST(test_energy_formula)
{
    for (size_t window = 1; window <= 3; window++) {
        lse_stattn_config c = small_config();
        c.window = window;
        lse_stattn *m = make(&c, 11);
        double e;
        lse_error err;
        lse_assert_ok(lse_stattn_energy(m, &e, &err));
        const double want = energy_by_hand(m, &c);
        ck_assert_msg(fabs(e - want) <= 1e-10 * fabs(want),
                      "window %zu: energy %.15g, by hand %.15g", window, e,
                      want);
        /* one term per layer and step for inter and intra, one temporal */
        ck_assert_uint_eq(lse_graph_n_terms(lse_stattn_graph(m)),
                          2 * (2 * NT + 1));
        lse_stattn_free(m);
    }
}
END_TEST

/* Every gradient (data unclamped, states, every projection) against
 * central differences; also with an inner-product base and the bound. */
START_TEST(test_gradient_fd)
{
    for (int variant = 0; variant < 3; variant++) {
        lse_stattn_config c = small_config();
        if (variant == 1) {
            c.base = lse_sim_scaled_dot;
            c.bound = 0.5;
        }
        if (variant == 2)
            c.beta_intra = 0.0; /* a term off */
        lse_stattn *m = make(&c, 12 + (unsigned long)variant);
        lse_node_set_clamped(lse_stattn_layer(m, 0), 0);
        lse_gradcheck res;
        lse_assert_ok(lse_graph_check_gradient(lse_stattn_graph(m), NULL, 1e-6,
                                               1e-4, &res));
        ck_assert_msg(res.max_error < 1e-6,
                      "variant %d: max relative error %.2e at %s (%zu "
                      "entries)",
                      variant, res.max_error, res.where, res.n_checked);
        ck_assert_uint_gt(res.n_checked, 80);
        lse_stattn_free(m);
    }
}
END_TEST

/* The flow and gradient descent never raise E (the flow to its
 * tolerance), and lower it. */
START_TEST(test_inference_monotone)
{
    lse_stattn_config c = small_config();
    lse_stattn *m = make(&c, 13);
    lse_error err;
    gsl_matrix *start = gsl_matrix_alloc(NT * 3, 2);
    gsl_matrix_memcpy(start, lse_node_value(lse_stattn_layer(m, 1)));
    lse_stattn_info info;
    lse_assert_ok(lse_stattn_infer(m, LSE_STATTN_GD, 2000, &info, &err));
    ck_assert_double_lt(info.energy, info.energy_initial - 1.0);
    ck_assert_double_le(info.max_increase,
                        1e-12 * fmax(1.0, fabs(info.energy)));
    ck_assert_uint_gt(info.n_steps, 1);
    const double e_gd = info.energy;
    /* the flow from the same start, tighter than the default tolerance */
    lse_stattn_free(m);
    m = make(&c, 13);
    lse_ode_opts oo = lse_ode_opts_default();
    oo.rtol = oo.atol = 1e-6;
    oo.t1 = 50;
    oo.max_steps = 100000;
    lse_assert_ok(lse_stattn_set_ode_opts(m, &oo, &err));
    lse_assert_ok(lse_stattn_infer(m, LSE_STATTN_ODE, 0, &info, &err));
    ck_assert_double_lt(info.energy, info.energy_initial - 1.0);
    ck_assert_msg(info.max_increase <= 1e-6 * fabs(info.energy),
                  "flow: largest rise %.3g, E %.6g (%zu steps)",
                  info.max_increase, info.energy, info.n_steps);
    ck_assert_uint_gt(info.n_steps, 1);
    (void)e_gd;
    gsl_matrix_free(start);
    lse_stattn_free(m);
}
END_TEST

/* Learning on the energy lowers the energy after inference. */
START_TEST(test_learning)
{
    lse_stattn_config c = small_config();
    lse_stattn *m = make(&c, 14);
    lse_error err;
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.02;
    lse_assert_ok(lse_stattn_set_optim(m, &oo, &err));
    double first = 0.0, last = 0.0;
    for (size_t step = 0; step < 40; step++) {
        lse_assert_ok(lse_stattn_init_slots(m, 1.0, 3, &err));
        double e;
        lse_assert_ok(lse_stattn_learn_step(m, &e, NULL, &err));
        ck_assert(isfinite(e));
        if (step == 0)
            first = e;
        last = e;
    }
    ck_assert_msg(last < first - 0.1 * fabs(first), "energy %g -> %g", first,
                  last);
    /* init_slots: slot k equal in every step */
    lse_assert_ok(lse_stattn_init_slots(m, 1.0, 3, &err));
    const gsl_matrix *x = lse_node_value(lse_stattn_layer(m, 2));
    for (size_t t = 1; t < NT; t++)
        for (size_t j = 0; j < 2; j++)
            ck_assert_double_eq(gsl_matrix_get(x, t * 2 + 1, j),
                                gsl_matrix_get(x, 1, j));
    ck_assert_double_ne(gsl_matrix_get(x, 0, 0), gsl_matrix_get(x, 1, 0));
    lse_stattn_free(m);
}
END_TEST

/* assign: the argmax of the inter-layer softmax. */
START_TEST(test_assign)
{
    lse_stattn_config c = small_config();
    lse_stattn *m = make(&c, 15);
    lse_error err;
    size_t lab[4];
    lse_assert_ok(lse_stattn_assign(m, 1, 2, lab, &err));
    const gsl_matrix *a = lse_term_softmax(lse_stattn_inter_term(m, 1, 2));
    for (size_t i = 0; i < 4; i++)
        for (size_t k = 0; k < 3; k++)
            ck_assert_double_le(gsl_matrix_get(a, i, k),
                                gsl_matrix_get(a, i, lab[i]));
    lse_assert_status(lse_stattn_assign(m, 0, 0, lab, &err), LSE_ERANGE);
    lse_assert_status(lse_stattn_assign(m, 3, 0, lab, &err), LSE_ERANGE);
    lse_assert_status(lse_stattn_assign(m, 1, NT, lab, &err), LSE_ERANGE);
    lse_assert_status(lse_stattn_assign(m, 1, 0, NULL, &err), LSE_EFAULT);
    ck_assert_ptr_null(lse_stattn_inter_term(m, 1, NT));
    ck_assert_ptr_null(lse_stattn_proj(m, LSE_STATTN_INTER, 0, 0));
    ck_assert_ptr_null(lse_stattn_proj(m, LSE_STATTN_INTER, 1, 2));
    ck_assert_ptr_null(lse_stattn_layer(m, 3));
    lse_stattn_free(m);
    c.beta_inter = 0.0;
    m = make(&c, 15);
    lse_assert_status(lse_stattn_assign(m, 1, 0, lab, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "inter-layer term is off"));
    lse_stattn_free(m);
}
END_TEST

START_TEST(test_builder_errors)
{
    const lse_stattn_config ok = small_config();
    lse_stattn *m = (lse_stattn *)&m;
    lse_error err;
    lse_assert_status(lse_stattn_new(NULL, &m, &err), LSE_EFAULT);
    lse_assert_status(lse_stattn_new(&ok, NULL, &err), LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_stattn_new"));
    static const struct {
        int what;
        lse_status want;
        const char *msg;
    } cases[] = {
        {0, LSE_EDOM, "n_layers 1"},
        {1, LSE_EDOM, "n_layers 9"},
        {2, LSE_EDOM, "T is 0"},
        {3, LSE_EDOM, "beta_inter -1"},
        {4, LSE_EDOM, "must be finite"},
        {5, LSE_EDOM, "every term is off"},
        {6, LSE_EDOM, "layer 1 has n_slots 0"},
        {7, LSE_EDOM, "layer 2 has n_slots 2, dim 0"},
        {8, LSE_EDOM, "intra-layer term needs 2"},
        {9, LSE_EDOM, "temporal term needs T >= 2"},
        {10, LSE_EDOM, "window 0"},
        {11, LSE_EINVAL, "base 'gaussian' has required parameters"},
        {12, LSE_ENOMEM, "overflows"},
        {13, LSE_EDOM, "bound -2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lse_stattn_config c = ok;
        switch (cases[i].what) {
        case 0: c.n_layers = 1; break;
        case 1: c.n_layers = 9; break;
        case 2: c.T = 0; break;
        case 3: c.beta_inter = -1.0; break;
        case 4: c.init_sd = NAN; break;
        case 5: c.beta_inter = c.beta_intra = c.beta_temporal = 0.0; break;
        case 6: c.n_slots[1] = 0; break;
        case 7: c.dim[2] = 0; break;
        case 8: c.n_slots[2] = 1; break;
        case 9: c.T = 1; break;
        case 10: c.window = 0; break;
        case 11: c.base = lse_sim_gaussian; break;
        case 12: c.n_slots[1] = SIZE_MAX / 2; break;
        case 13: c.bound = -2.0; break;
        default: break;
        }
        m = (lse_stattn *)&m;
        memset(&err, 0, sizeof err);
        lse_assert_status(lse_stattn_new(&c, &m, &err), cases[i].want);
        ck_assert_ptr_null(m);
        ck_assert_int_eq(err.status, cases[i].want);
        ck_assert_msg(strstr(err.message, cases[i].msg) != NULL,
                      "case %zu: '%s' lacks '%s'", i, err.message,
                      cases[i].msg);
        ck_assert_int_eq(lse_stattn_new(&c, &m, NULL), cases[i].want);
    }
    /* one slot is fine without the intra-layer term */
    lse_stattn_config c = ok;
    c.n_slots[2] = 1;
    c.beta_intra = 0.0;
    lse_assert_ok(lse_stattn_new(&c, &m, &err));
    lse_stattn_free(m);
    lse_stattn_free(NULL);
}
END_TEST

START_TEST(test_call_errors)
{
    lse_stattn_config c = small_config();
    lse_stattn *m = make(&c, 16);
    lse_error err;
    gsl_matrix *x = gsl_matrix_calloc(NT * 4, 3), *bad = gsl_matrix_calloc(3, 3);
    lse_assert_ok(lse_stattn_set_data(m, x, &err));
    lse_assert_status(lse_stattn_set_data(m, bad, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "expected (T K_0, D_0) = (16, 3)"));
    lse_assert_status(lse_stattn_set_data(NULL, x, &err), LSE_EFAULT);
    lse_assert_status(lse_stattn_set_data(m, NULL, &err), LSE_EFAULT);
    gsl_matrix_set(x, 2, 1, NAN);
    lse_assert_status(lse_stattn_set_data(m, x, &err), LSE_ENONFINITE);
    lse_assert_status(lse_stattn_init_slots(m, -1.0, 1, &err), LSE_EDOM);
    lse_assert_status(lse_stattn_init_slots(NULL, 1.0, 1, &err), LSE_EFAULT);
    lse_assert_status(lse_stattn_infer(m, (lse_stattn_solver)7, 0, NULL, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_stattn_infer(NULL, LSE_STATTN_ODE, 0, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_stattn_learn_step(NULL, NULL, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_stattn_energy(m, NULL, &err), LSE_EFAULT);
    lse_ode_opts oo = lse_ode_opts_default();
    oo.t1 = -1.0;
    lse_assert_status(lse_stattn_set_ode_opts(m, &oo, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_stattn_set_ode_opts"));
    lse_assert_status(lse_stattn_set_ode_opts(m, NULL, &err), LSE_EFAULT);
    lse_optim_opts po = lse_optim_opts_default();
    po.lr = -1.0;
    lse_assert_status(lse_stattn_set_optim(m, &po, &err), LSE_EDOM);
    lse_assert_status(lse_stattn_set_optim(m, NULL, &err), LSE_EFAULT);
    ck_assert_ptr_null(lse_stattn_graph(NULL));
    ck_assert_ptr_null(lse_stattn_layer(NULL, 0));
    ck_assert_ptr_null(lse_stattn_proj(NULL, LSE_STATTN_INTER, 1, 0));
    ck_assert_ptr_null(lse_stattn_inter_term(NULL, 1, 0));
    /* a non-finite state is reported by the energy */
    gsl_matrix_set(lse_node_value(lse_stattn_layer(m, 1)), 0, 0, INFINITY);
    double e;
    lse_assert_status(lse_stattn_energy(m, &e, &err), LSE_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_stattn_energy"));
    gsl_matrix_free(x);
    gsl_matrix_free(bad);
    lse_stattn_free(m);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_stattn");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_energy_formula);
    tcase_add_test(tc, test_gradient_fd);
    tcase_add_test(tc, test_inference_monotone);
    tcase_add_test(tc, test_learning);
    tcase_add_test(tc, test_assign);
    tcase_add_test(tc, test_builder_errors);
    tcase_add_test(tc, test_call_errors);
    suite_add_tcase(s, tc);
    return s;
}
