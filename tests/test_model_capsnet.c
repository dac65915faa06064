#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* Capsule routing (models/capsnet.c). Small random networks: N = 5
 * children of dimension 3, S = 4 parents of dimension 2, batch 3; the
 * children are N(0, 1) draws of a seeded generator, W starts at
 * N(0, 0.5^2) so that the routing coefficients are far from uniform. */

#define N 5
#define DC 3
#define S 4
#define DP 2
#define B 3

static lse_capsnet *make(double beta)
{
    lse_capsnet_opts o = lse_capsnet_opts_default();
    o.n_child = N;
    o.d_child = DC;
    o.n_parent = S;
    o.d_parent = DP;
    o.batch = B;
    o.beta = beta;
    o.init_sd = 0.5;
    o.seed = 3;
    o.route_iter = 200;
    o.route_tol = 1e-13;
    lse_capsnet *c = NULL;
    lse_error err;
    lse_assert_ok(lse_capsnet_new(&o, &c, &err));
    return c;
}

static gsl_matrix *randn(size_t r, size_t k, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    gsl_matrix *m = gsl_matrix_alloc(r, k);
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < k; j++)
            gsl_matrix_set(m, i, j, gsl_ran_gaussian(rng, 1.0));
    gsl_rng_free(rng);
    return m;
}

/* W_ij u_i of example b */
static void uhat(const gsl_matrix *W, const gsl_matrix *U, size_t b, size_t i,
                 size_t j, double *out)
{
    for (size_t a = 0; a < DP; a++) {
        out[a] = 0.0;
        for (size_t k = 0; k < DC; k++)
            out[a] += gsl_matrix_get(W, i * S + j, a * DC + k) *
                      gsl_matrix_get(U, b * N + i, k);
    }
}

/* E written out from its definition */
START_TEST(test_energy_formula)
{
    const double beta = 1.7;
    lse_capsnet *c = make(beta);
    gsl_matrix *U = randn(B * N, DC, 11), *V = randn(B * S, DP, 12);
    double e;
    lse_assert_ok(lse_capsnet_energy(c, U, V, &e, &model_err));
    const gsl_matrix *W = lse_capsnet_weights(c);
    double want = 0.0;
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < N; i++) {
            double sum = 0.0;
            for (size_t j = 0; j < S; j++) {
                double h[DP], s = 0.0;
                uhat(W, U, b, i, j, h);
                for (size_t a = 0; a < DP; a++)
                    s += h[a] * gsl_matrix_get(V, b * S + j, a);
                sum += exp(beta * s);
            }
            want -= log(sum) / beta;
        }
        for (size_t j = 0; j < S; j++)
            for (size_t a = 0; a < DP; a++)
                want += 0.5 * pow(gsl_matrix_get(V, b * S + j, a), 2);
    }
    ck_assert_msg(fabs(e - want) <= 1e-12 * fmax(1.0, fabs(want)),
                  "E %.17g, formula %.17g", e, want);
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    lse_capsnet_free(c);
}
END_TEST

/* dE/d(children, parents, W) against central differences */
START_TEST(test_energy_gradient_fd)
{
    lse_capsnet *c = make(1.3);
    gsl_matrix *U = randn(B * N, DC, 21), *V = randn(B * S, DP, 22);
    double e;
    lse_assert_ok(lse_capsnet_energy(c, U, V, &e, &model_err));
    lse_graph *g = lse_capsnet_graph(c);
    lse_node_set_clamped(lse_graph_find_node(g, "children"), 0);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-5, 1e-4, &res));
    ck_assert_uint_eq(res.n_checked, B * N * DC + B * S * DP + N * S * DP * DC);
    ck_assert_msg(res.max_error < 1e-7, "max relative error %g at %s",
                  res.max_error, res.where);
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    lse_capsnet_free(c);
}
END_TEST

/* the readout loss's gradient on W (c fixed) against central differences */
START_TEST(test_readout_gradient_fd)
{
    lse_capsnet *c = make(1.0);
    gsl_matrix *U = randn(B * N, DC, 31);
    const size_t lab[B] = {0, 3, 1};
    double loss;
    lse_assert_ok(lse_capsnet_train_step(c, U, lab, &loss, &model_err));
    ck_assert(isfinite(loss) && loss > 0.0);
    lse_graph *g = lse_capsnet_graph(c);
    for (size_t t = 0; t < lse_graph_n_terms(g); t++)
        lse_term_set_enabled(lse_graph_term(g, t), 0);
    lse_term_set_enabled(lse_graph_find_term(g, "readout"), 1);
    double l2;
    lse_assert_ok(lse_graph_energy(g, &l2));
    ck_assert(isfinite(l2) && l2 > 0.0);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, lse_graph_find_node(g, "W"),
                                           1e-5, 1e-4, &res));
    ck_assert_uint_eq(res.n_checked, N * S * DP * DC);
    ck_assert_msg(res.max_error < 1e-5, "max relative error %g at %s",
                  res.max_error, res.where);
    gsl_matrix_free(U);
    lse_capsnet_free(c);
}
END_TEST

/* routing: E never rises, ends below its start, and the routed parents
 * are the fixed point v_j = sum_i c_ij W_ij u_i */
START_TEST(test_routing_monotone_fixed_point)
{
    lse_capsnet *c = make(2.0);
    gsl_matrix *U = randn(B * N, DC, 41), *V = gsl_matrix_alloc(B * S, DP);
    lse_capsnet_route_info info;
    lse_assert_ok(lse_capsnet_route(c, U, V, &info, &model_err));
    ck_assert_uint_eq(info.n_increase, 0);
    ck_assert(info.max_increase <= 0.0);
    ck_assert(info.n_iter >= 2);
    ck_assert(info.energy < info.energy_initial);
    ck_assert(fabs(info.energy_initial + B * N * log((double)S) / 2.0) <
              1e-12);
    const gsl_matrix *W = lse_capsnet_weights(c);
    double worst = 0.0;
    for (size_t b = 0; b < B; b++) {
        const gsl_matrix *cp = lse_capsnet_coupling(c, b);
        ck_assert_ptr_nonnull(cp);
        for (size_t j = 0; j < S; j++)
            for (size_t a = 0; a < DP; a++) {
                double want = 0.0;
                for (size_t i = 0; i < N; i++) {
                    double h[DP];
                    uhat(W, U, b, i, j, h);
                    want += gsl_matrix_get(cp, i, j) * h[a];
                }
                worst = fmax(worst,
                             fabs(want - gsl_matrix_get(V, b * S + j, a)));
            }
    }
    ck_assert_msg(worst < 1e-5, "fixed point residual %g", worst);
    ck_assert_ptr_null(lse_capsnet_coupling(c, B));
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    lse_capsnet_free(c);
}
END_TEST

/* learning separates two synthetic classes (every child e_0 or e_1 plus
 * noise; the logits are even in u, so the classes differ by direction): the mean training loss of the
 * last 50 steps is below a fifth of that of the first 20, and the
 * predictions are right */
START_TEST(test_learning)
{
    lse_capsnet *c = make(1.0);
    gsl_matrix *U = gsl_matrix_alloc(B * N, DC);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 5);
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.05;
    lse_assert_ok(lse_capsnet_set_optim(c, &oo, &model_err));
    double first = 0.0, last = 0.0;
    size_t lab[B];
    for (size_t step = 0; step < 400; step++) {
        for (size_t b = 0; b < B; b++) {
            lab[b] = gsl_rng_uniform_int(rng, 2);
            for (size_t i = 0; i < N; i++)
                for (size_t k = 0; k < DC; k++)
                    gsl_matrix_set(U, b * N + i, k,
                                   (double)(k == lab[b]) +
                                       0.1 * gsl_ran_gaussian(rng, 1.0));
        }
        double loss;
        lse_assert_ok(lse_capsnet_train_step(c, U, lab, &loss, &model_err));
        if (step < 20)
            first += loss / 20;
        if (step >= 350)
            last += loss / 50;
    }
    ck_assert_msg(last < 0.2 * first, "loss %g -> %g", first, last);
    size_t pred[B];
    lse_assert_ok(lse_capsnet_predict(c, U, B, pred, &model_err));
    for (size_t b = 0; b < B; b++)
        ck_assert_uint_eq(pred[b], lab[b]);
    /* predict pads a partial batch */
    gsl_matrix_const_view two = gsl_matrix_const_submatrix(U, 0, 0, 2 * N, DC);
    size_t pred2[2];
    lse_assert_ok(lse_capsnet_predict(c, &two.matrix, 2, pred2, &model_err));
    ck_assert_uint_eq(pred2[0], lab[0]);
    ck_assert_uint_eq(pred2[1], lab[1]);
    gsl_rng_free(rng);
    gsl_matrix_free(U);
    lse_capsnet_free(c);
}
END_TEST

START_TEST(test_errors)
{
    lse_capsnet_opts o = lse_capsnet_opts_default();
    lse_capsnet *c = (lse_capsnet *)1;
    lse_error err;
    lse_assert_status(lse_capsnet_new(&o, &c, &err), LSE_EDOM);
    ck_assert_ptr_null(c);
    lse_assert_status(lse_capsnet_new(NULL, &c, &err), LSE_EFAULT);
    o.n_child = N;
    o.d_child = DC;
    o.n_parent = 1;
    o.d_parent = DP;
    lse_assert_status(lse_capsnet_new(&o, &c, &err), LSE_EDOM);
    o.n_parent = S;
    o.beta = -1.0;
    lse_assert_status(lse_capsnet_new(&o, &c, &err), LSE_EDOM);
    o.beta = 1.0;
    o.n_child = SIZE_MAX / 2;
    lse_assert_status(lse_capsnet_new(&o, &c, &err), LSE_ENOMEM);
    c = make(1.0);
    ck_assert_uint_eq(lse_capsnet_n_params(c), N * S * DP * DC);
    gsl_matrix *bad = gsl_matrix_calloc(B * N, DC + 1);
    lse_assert_status(lse_capsnet_route(c, bad, NULL, NULL, &model_err),
                      LSE_EDIM);
    ck_assert(model_err.message[0] != '\0');
    gsl_matrix *U = randn(B * N, DC, 51);
    const size_t lab[B] = {0, S, 1};
    lse_assert_status(lse_capsnet_train_step(c, U, lab, NULL, &model_err),
                      LSE_ERANGE);
    lse_assert_status(lse_capsnet_train_step(c, U, NULL, NULL, &model_err),
                      LSE_EFAULT);
    size_t pred[B];
    lse_assert_status(lse_capsnet_predict(c, bad, B, pred, &model_err),
                      LSE_EDIM);
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = -1.0;
    lse_assert_status(lse_capsnet_set_optim(c, &oo, &model_err), LSE_EDOM);
    gsl_matrix_set(U, 0, 0, NAN);
    ck_assert(lse_capsnet_route(c, U, NULL, NULL, &model_err) != LSE_OK);
    gsl_matrix_free(U);
    gsl_matrix_free(bad);
    lse_capsnet_free(c);
    lse_capsnet_free(NULL);
    /* the similarity on its own: W of the wrong shape, d_parent > 64 */
    lse_graph *g = lse_graph_new();
    lse_node *u, *v, *w, *w2, *v2;
    lse_assert_ok(lse_graph_add_node(g, "u", 2, 1, LSE_NODE_CLAMPED, &u));
    lse_assert_ok(lse_graph_add_node(g, "v", 2, 3, 0, &v));
    lse_assert_ok(lse_graph_add_node(g, "w", 4, 2, LSE_NODE_PARAM, &w));
    lse_assert_ok(lse_graph_add_node(g, "v2", 2, 65, 0, &v2));
    lse_assert_ok(lse_graph_add_node(g, "w2", 4, 65, LSE_NODE_PARAM, &w2));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(u);
    spec.parent = lse_view_all(v);
    spec.sim = lse_capsnet_sim;
    lse_node *p1[1] = {w};
    spec.param = p1;
    lse_assert_status(lse_graph_add_lse(g, "bad", &spec, NULL), LSE_EDIM);
    spec.parent = lse_view_all(v2);
    lse_node *p2[1] = {w2};
    spec.param = p2;
    lse_assert_status(lse_graph_add_lse(g, "wide", &spec, NULL), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "exceeds 64"));
    lse_graph_free(g);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_capsnet_set_optim(NULL, NULL, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_capsnet_set_optim"));
    ck_assert_int_eq(lse_capsnet_set_optim(NULL, NULL, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_capsnet");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_energy_formula);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_energy_gradient_fd);
    tcase_add_test(tc, test_readout_gradient_fd);
    tcase_add_test(tc, test_routing_monotone_fixed_point);
    tcase_add_test(tc, test_learning);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
