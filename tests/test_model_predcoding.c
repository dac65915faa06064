#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Predictive coding model (models/predcoding.c, docs/models/predcoding.md). */

static gsl_matrix *random_matrix(size_t n, size_t d, unsigned long seed,
                                 double sd)
{
    gsl_matrix *m = gsl_matrix_alloc(n, d);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(r);
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(m, i, j, gsl_ran_gaussian(r, sd));
    gsl_rng_free(r);
    return m;
}

/* Fill every free node with high-entropy values (biases included). */
static void scramble(lse_predcoding *m, unsigned long seed, double sd)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(r);
    gsl_rng_set(r, seed);
    for (size_t l = 1; l <= lse_predcoding_n_layers(m); l++) {
        lse_node *nodes[3] = {lse_predcoding_layer(m, l),
                              lse_predcoding_weight(m, l),
                              lse_predcoding_bias(m, l)};
        for (size_t k = 0; k < 3; k++) {
            gsl_matrix *v = lse_node_value(nodes[k]);
            for (size_t i = 0; i < v->size1; i++)
                for (size_t j = 0; j < v->size2; j++)
                    gsl_matrix_set(v, i, j, gsl_ran_gaussian(r, sd));
        }
    }
    gsl_rng_free(r);
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
        return z > 0 ? z : 0;
    }
    return NAN;
}

static double act_deriv(lse_activation f, double z)
{
    switch (f) {
    case LSE_ACT_IDENTITY:
        return 1.0;
    case LSE_ACT_TANH:
        return 1.0 - tanh(z) * tanh(z);
    case LSE_ACT_SIGMOID: {
        const double s = 1.0 / (1.0 + exp(-z));
        return s * (1.0 - s);
    }
    case LSE_ACT_RELU:
        return z > 0 ? 1.0 : 0.0;
    }
    return NAN;
}

static void check_whole_graph(lse_pc_layout layout)
{
    gsl_matrix *x = random_matrix(5, 3, 11, 0.8);
    const size_t dims[2] = {2, 3}, rows[2] = {4, 3};
    const lse_activation acts[2] = {LSE_ACT_TANH, LSE_ACT_SIGMOID};
    lse_predcoding_opts o = lse_predcoding_opts_default();
    o.layout = layout;
    o.rows = rows;
    o.act = acts;
    o.prior = 0.7;
    o.weight_decay = 0.3;
    lse_predcoding *m = NULL;
    lse_error err;
    lse_assert_ok(lse_predcoding_new(x, 2, dims, &o, &m, &err));
    scramble(m, 5, 0.6);
    lse_graph *g = lse_predcoding_graph(m);
    /* every free node: h1, h2, W1, b1, W2, b2 */
    const char *names[] = {"h1", "h2", "W1", "b1", "W2", "b2"};
    for (size_t k = 0; k < 6; k++) {
        lse_node *n = lse_graph_find_node(g, names[k]);
        ck_assert_ptr_nonnull(n);
        lse_gradcheck res;
        lse_assert_ok(lse_graph_check_gradient(g, n, 1e-6, 1e-3, &res));
        ck_assert_msg(res.max_error < 1e-6, "%s: error %g at %s (%g vs %g)",
                      names[k], res.max_error, res.where, res.analytic,
                      res.numeric);
        ck_assert_uint_eq(res.n_checked, lse_node_rows(n) * lse_node_dim(n));
    }
    lse_predcoding_free(m);
    gsl_matrix_free(x);
}

START_TEST(test_gradcheck_per_sample) { check_whole_graph(LSE_PC_PER_SAMPLE); }
END_TEST

START_TEST(test_gradcheck_mixture) { check_whole_graph(LSE_PC_MIXTURE); }
END_TEST

/* The seed's section 7 gradients by hand (with our sign: dE/dv):
 *   alpha_ik = softmax_k(-1/2 ||c_i - f(W mu_k + b)||^2)
 *   dE/dc_i  = sum_k alpha_ik (c_i - F_k)
 *   dE/dmu_k = -sum_i alpha_ik J_k' (c_i - F_k),  J_k = diag(f'(z_k)) W
 * per layer, plus the prior on the top layer; and for the parameters
 *   dE/dW = -sum_ik alpha_ik (f'(z_k) .* r_ik) mu_k',
 *   dE/db = -sum_ik alpha_ik (f'(z_k) .* r_ik). */
typedef struct layer_ref {
    const gsl_matrix *c, *mu, *w, *b; /* child, parent, W, b */
    lse_activation f;
    gsl_matrix *gc, *gmu, *gw, *gb; /* accumulated by hand */
} layer_ref;

static void hand_layer(const layer_ref *L)
{
    const size_t nc = L->c->size1, K = L->mu->size1, dc = L->c->size2,
                 dp = L->mu->size2;
    double z[16], fz[16], s[16], a[16], r[16];
    ck_assert(dc <= 16 && K <= 16);
    for (size_t i = 0; i < nc; i++) {
        /* similarities and softmax of child i */
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++) {
            double sq = 0.0;
            for (size_t q = 0; q < dc; q++) {
                double zz = gsl_matrix_get(L->b, 0, q);
                for (size_t p = 0; p < dp; p++)
                    zz += gsl_matrix_get(L->w, q, p) *
                          gsl_matrix_get(L->mu, k, p);
                const double rr = gsl_matrix_get(L->c, i, q) - act(L->f, zz);
                sq += rr * rr;
            }
            s[k] = -0.5 * sq;
            mx = s[k] > mx ? s[k] : mx;
        }
        double sum = 0.0;
        for (size_t k = 0; k < K; k++)
            sum += (a[k] = exp(s[k] - mx));
        for (size_t k = 0; k < K; k++)
            a[k] /= sum;
        for (size_t k = 0; k < K; k++) {
            for (size_t q = 0; q < dc; q++) {
                z[q] = gsl_matrix_get(L->b, 0, q);
                for (size_t p = 0; p < dp; p++)
                    z[q] += gsl_matrix_get(L->w, q, p) *
                            gsl_matrix_get(L->mu, k, p);
                fz[q] = act(L->f, z[q]);
                r[q] = gsl_matrix_get(L->c, i, q) - fz[q]; /* c_i - F_k */
            }
            for (size_t q = 0; q < dc; q++) {
                if (L->gc != NULL)
                    *gsl_matrix_ptr(L->gc, i, q) += a[k] * r[q];
                const double e = a[k] * act_deriv(L->f, z[q]) * r[q];
                *gsl_matrix_ptr(L->gb, 0, q) -= e;
                for (size_t p = 0; p < dp; p++) {
                    /* J' r: column p of W weighted by f'(z) .* r */
                    *gsl_matrix_ptr(L->gmu, k, p) -=
                        e * gsl_matrix_get(L->w, q, p);
                    *gsl_matrix_ptr(L->gw, q, p) -=
                        e * gsl_matrix_get(L->mu, k, p);
                }
            }
        }
    }
}

static void assert_close(const gsl_matrix *a, const gsl_matrix *b,
                         const char *what)
{
    ck_assert_uint_eq(a->size1, b->size1);
    ck_assert_uint_eq(a->size2, b->size2);
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            const double u = gsl_matrix_get(a, i, j),
                         v = gsl_matrix_get(b, i, j);
            ck_assert_msg(fabs(u - v) <= 1e-12 * (1.0 + fabs(v)),
                          "%s[%zu,%zu]: library %.17g, by hand %.17g", what, i,
                          j, u, v);
        }
}

START_TEST(test_seed_gradients_by_hand)
{
    gsl_matrix *x = random_matrix(6, 3, 21, 0.9);
    const size_t dims[2] = {2, 2}, rows[2] = {3, 2};
    const lse_activation acts[2] = {LSE_ACT_TANH, LSE_ACT_SIGMOID};
    lse_predcoding_opts o = lse_predcoding_opts_default();
    o.layout = LSE_PC_MIXTURE;
    o.rows = rows;
    o.act = acts;
    o.prior = 0.4127;
    lse_predcoding *m = NULL;
    lse_assert_ok(lse_predcoding_new(x, 2, dims, &o, &m, NULL));
    scramble(m, 9, 0.7);
    lse_node *xn = lse_predcoding_layer(m, 0);
    lse_node_set_clamped(xn, 0); /* to read dE/dx_i from the library */
    double e;
    lse_assert_ok(lse_graph_gradient(lse_predcoding_graph(m), &e));

    lse_node *h1 = lse_predcoding_layer(m, 1), *h2 = lse_predcoding_layer(m, 2);
    gsl_matrix *gx = gsl_matrix_calloc(6, 3), *gh1 = gsl_matrix_calloc(3, 2),
               *gh2 = gsl_matrix_calloc(2, 2), *gw1 = gsl_matrix_calloc(3, 2),
               *gb1 = gsl_matrix_calloc(1, 3), *gw2 = gsl_matrix_calloc(2, 2),
               *gb2 = gsl_matrix_calloc(1, 2);
    const layer_ref l1 = {lse_node_value(xn),
                          lse_node_value(h1),
                          lse_node_value(lse_predcoding_weight(m, 1)),
                          lse_node_value(lse_predcoding_bias(m, 1)),
                          acts[0],
                          gx,
                          gh1,
                          gw1,
                          gb1};
    /* h1 is a child of layer 2: its child-side gradient lands in gh1 */
    const layer_ref l2 = {lse_node_value(h1),
                          lse_node_value(h2),
                          lse_node_value(lse_predcoding_weight(m, 2)),
                          lse_node_value(lse_predcoding_bias(m, 2)),
                          acts[1],
                          gh1,
                          gh2,
                          gw2,
                          gb2};
    hand_layer(&l1);
    hand_layer(&l2);
    /* prior: d/dh2 of 0.4127/2 ||h2||^2 */
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            *gsl_matrix_ptr(gh2, i, j) +=
                0.4127 * gsl_matrix_get(lse_node_value(h2), i, j);
    assert_close(lse_node_grad(xn), gx, "dE/dx");
    assert_close(lse_node_grad(h1), gh1, "dE/dh1");
    assert_close(lse_node_grad(h2), gh2, "dE/dh2");
    assert_close(lse_node_grad(lse_predcoding_weight(m, 1)), gw1, "dE/dW1");
    assert_close(lse_node_grad(lse_predcoding_bias(m, 1)), gb1, "dE/db1");
    assert_close(lse_node_grad(lse_predcoding_weight(m, 2)), gw2, "dE/dW2");
    assert_close(lse_node_grad(lse_predcoding_bias(m, 2)), gb2, "dE/db2");
    /* and the responsibilities the seed calls alpha are the term's softmax */
    const gsl_matrix *a = lse_term_softmax(lse_predcoding_term(m, 1));
    ck_assert_ptr_nonnull(a);
    for (size_t i = 0; i < 6; i++) {
        double sum = 0.0;
        for (size_t k = 0; k < 3; k++)
            sum += gsl_matrix_get(a, i, k);
        ck_assert_double_eq_tol(sum, 1.0, 1e-14);
    }
    gsl_matrix_free(gx);
    gsl_matrix_free(gh1);
    gsl_matrix_free(gh2);
    gsl_matrix_free(gw1);
    gsl_matrix_free(gb1);
    gsl_matrix_free(gw2);
    gsl_matrix_free(gb2);
    lse_predcoding_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* Per-sample layout: the term's S_ii is -1/2 ||x_i - predict_i||^2, the
 * other pairs are masked, and the energy is the classic PC energy. */
START_TEST(test_per_sample_energy_is_classic)
{
    gsl_matrix *x = random_matrix(7, 4, 31, 1.1);
    const size_t dims[2] = {3, 2};
    const lse_activation acts[2] = {LSE_ACT_RELU, LSE_ACT_TANH};
    lse_predcoding_opts o = lse_predcoding_opts_default();
    o.act = acts;
    o.prior = 0.9;
    lse_predcoding *m = NULL;
    lse_assert_ok(lse_predcoding_new(x, 2, dims, &o, &m, NULL));
    scramble(m, 3, 0.8);
    gsl_matrix *p1 = gsl_matrix_alloc(7, 4), *p2 = gsl_matrix_alloc(7, 3);
    lse_assert_ok(lse_predcoding_predict(m, 1, p1, NULL));
    lse_assert_ok(lse_predcoding_predict(m, 2, p2, NULL));
    double e;
    lse_assert_ok(lse_graph_energy(lse_predcoding_graph(m), &e));
    const gsl_matrix *h1 = lse_node_value(lse_predcoding_layer(m, 1));
    const gsl_matrix *h2 = lse_node_value(lse_predcoding_layer(m, 2));
    const gsl_matrix *s1 = lse_term_similarity(lse_predcoding_term(m, 1));
    double want = 0.0, sq1 = 0.0;
    for (size_t i = 0; i < 7; i++) {
        double a = 0.0, b = 0.0, c = 0.0;
        for (size_t j = 0; j < 4; j++) {
            const double r = gsl_matrix_get(x, i, j) - gsl_matrix_get(p1, i, j);
            a += r * r;
        }
        for (size_t j = 0; j < 3; j++) {
            const double r =
                gsl_matrix_get(h1, i, j) - gsl_matrix_get(p2, i, j);
            b += r * r;
        }
        for (size_t j = 0; j < 2; j++)
            c += gsl_matrix_get(h2, i, j) * gsl_matrix_get(h2, i, j);
        want += 0.5 * a + 0.5 * b + 0.5 * 0.9 * c;
        sq1 += a;
        ck_assert_double_eq_tol(gsl_matrix_get(s1, i, i), -0.5 * a, 1e-12);
        for (size_t k = 0; k < 7; k++)
            if (k != i)
                ck_assert(gsl_matrix_get(s1, i, k) == -INFINITY);
    }
    ck_assert_double_eq_tol(e, want, 1e-10 * (1.0 + fabs(want)));
    double mse;
    lse_assert_ok(lse_predcoding_error(m, 1, &mse, NULL));
    ck_assert_double_eq_tol(mse, sq1 / 28.0, 1e-12);
    gsl_matrix_free(p1);
    gsl_matrix_free(p2);
    lse_predcoding_free(m);
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_inference_decreases_energy)
{
    gsl_matrix *x = random_matrix(12, 5, 41, 1.3);
    const size_t dims[2] = {3, 2};
    lse_predcoding_opts o = lse_predcoding_opts_default();
    o.init_sd = 0.5;
    lse_predcoding *m = NULL;
    lse_assert_ok(lse_predcoding_new(x, 2, dims, &o, &m, NULL));
    double e0;
    lse_assert_ok(lse_graph_energy(lse_predcoding_graph(m), &e0));
    gsl_matrix *w1 = gsl_matrix_alloc(5, 3);
    gsl_matrix_memcpy(w1, lse_node_value(lse_predcoding_weight(m, 1)));
    double prev = e0;
    for (int k = 0; k < 30; k++) {
        lse_solver_result r;
        lse_assert_ok(lse_predcoding_infer(m, 1, 0.0, &r, NULL));
        ck_assert_msg(r.energy <= prev + 1e-12, "step %d: %g > %g", k, r.energy,
                      prev);
        prev = r.energy;
    }
    ck_assert_msg(prev < e0 - 1.0, "inference: %g -> %g", e0, prev);
    /* parameters untouched by inference */
    ck_assert(
        gsl_matrix_equal(w1, lse_node_value(lse_predcoding_weight(m, 1))));
    /* converged inference: gradient on the latents ~ 0 */
    lse_solver_result r;
    lse_assert_ok(lse_predcoding_infer(m, 5000, 1e-13, &r, NULL));
    double e;
    lse_assert_ok(lse_graph_gradient(lse_predcoding_graph(m), &e));
    const gsl_matrix *g1 = lse_node_grad(lse_predcoding_layer(m, 1));
    ck_assert_double_lt(gsl_matrix_max(g1), 1e-4);
    ck_assert_double_gt(gsl_matrix_min(g1), -1e-4);
    gsl_matrix_free(w1);
    lse_predcoding_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* Toy data from a known 2-layer linear generative model:
 *   h2 ~ N(0, I_2), h1 = A2 h2 + c2 + N(0, 0.1^2), x = A1 h1 + c1 + N(0,
 * 0.05^2) with d0 = 8, d1 = 4, d2 = 2, N = 60. */
static gsl_matrix *toy_data(size_t n, gsl_matrix **a1_out)
{
    const size_t d0 = 8, d1 = 4, d2 = 2;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(r);
    gsl_rng_set(r, 7);
    gsl_matrix *a1 = gsl_matrix_alloc(d0, d1), *a2 = gsl_matrix_alloc(d1, d2);
    gsl_matrix *x = gsl_matrix_alloc(n, d0);
    for (size_t i = 0; i < d0; i++)
        for (size_t j = 0; j < d1; j++)
            gsl_matrix_set(a1, i, j, gsl_ran_gaussian(r, 1.0));
    for (size_t i = 0; i < d1; i++)
        for (size_t j = 0; j < d2; j++)
            gsl_matrix_set(a2, i, j, gsl_ran_gaussian(r, 1.0));
    for (size_t s = 0; s < n; s++) {
        double h2[2], h1[4];
        for (size_t j = 0; j < d2; j++)
            h2[j] = gsl_ran_gaussian(r, 1.0);
        for (size_t i = 0; i < d1; i++) {
            h1[i] = 0.5 + gsl_ran_gaussian(r, 0.1);
            for (size_t j = 0; j < d2; j++)
                h1[i] += gsl_matrix_get(a2, i, j) * h2[j];
        }
        for (size_t i = 0; i < d0; i++) {
            double v = -0.3 + gsl_ran_gaussian(r, 0.05);
            for (size_t j = 0; j < d1; j++)
                v += gsl_matrix_get(a1, i, j) * h1[j];
            gsl_matrix_set(x, s, i, v);
        }
    }
    gsl_matrix_free(a2);
    gsl_rng_free(r);
    *a1_out = a1;
    return x;
}

/* ||(I - P_W) A||_F / ||A||_F with P_W the projector on the columns of W */
static double subspace_residual(const gsl_matrix *w, const gsl_matrix *a)
{
    const size_t n = w->size1, k = w->size2;
    gsl_matrix *qr = gsl_matrix_alloc(n, k);
    gsl_vector *tau = gsl_vector_alloc(k), *col = gsl_vector_alloc(n),
               *res = gsl_vector_alloc(n), *sol = gsl_vector_alloc(k);
    gsl_matrix_memcpy(qr, w);
    ck_assert_int_eq(gsl_linalg_QR_decomp(qr, tau), 0);
    double num = 0.0, den = 0.0;
    for (size_t j = 0; j < a->size2; j++) {
        gsl_matrix_get_col(col, a, j);
        ck_assert_int_eq(gsl_linalg_QR_lssolve(qr, tau, col, sol, res), 0);
        double rr = 0.0, cc = 0.0;
        gsl_blas_ddot(res, res, &rr);
        gsl_blas_ddot(col, col, &cc);
        num += rr;
        den += cc;
    }
    gsl_matrix_free(qr);
    gsl_vector_free(tau);
    gsl_vector_free(col);
    gsl_vector_free(res);
    gsl_vector_free(sol);
    return sqrt(num / den);
}

typedef struct energy_trace {
    double e[256];
    size_t n;
} energy_trace;

static int record_energy(const lse_solver *s, void *user)
{
    energy_trace *t = user;
    if (t->n < 256)
        t->e[t->n++] = lse_solver_energy(s);
    return 0;
}

START_TEST(test_learning_toy_linear_model)
{
    gsl_matrix *a1 = NULL;
    gsl_matrix *x = toy_data(60, &a1);
    const size_t dims[2] = {4, 2};
    lse_predcoding *m = NULL;
    lse_assert_ok(lse_predcoding_new(x, 2, dims, NULL, &m, NULL));
    /* before learning: best latents for the initial W, b */
    lse_solver_result r;
    lse_assert_ok(lse_predcoding_infer(m, 500, 1e-9, &r, NULL));
    double before, after;
    lse_assert_ok(lse_predcoding_error(m, 1, &before, NULL));
    const double e_before = r.energy;
    const double sub_before =
        subspace_residual(lse_node_value(lse_predcoding_weight(m, 1)), a1);

    energy_trace trace = {.n = 0};
    lse_predcoding_fit_opts f = lse_predcoding_fit_opts_default();
    f.max_iter = 60;
    f.estep_steps = 5;
    f.callback = record_energy;
    f.user = &trace;
    lse_assert_ok(lse_predcoding_learn(m, &f, &r, NULL));
    ck_assert_uint_eq(trace.n, f.max_iter);
    for (size_t k = 1; k < trace.n; k++)
        ck_assert_msg(
            trace.e[k] <= trace.e[k - 1] + 1e-9 * fabs(trace.e[k - 1]),
            "EM energy rose at %zu: %g -> %g", k, trace.e[k - 1], trace.e[k]);
    lse_assert_ok(lse_predcoding_infer(m, 500, 1e-9, &r, NULL));
    lse_assert_ok(lse_predcoding_error(m, 1, &after, NULL));
    const double sub_after =
        subspace_residual(lse_node_value(lse_predcoding_weight(m, 1)), a1);
    /* measured: error 19.48 -> 0.00207, energy 4883 -> 4.67, subspace
     * residual 0.593 -> 0.0229 (docs/models/predcoding.md) */
    ck_assert_msg(after < 1e-3 * before, "mse %g -> %g", before, after);
    ck_assert_msg(r.energy < 1e-2 * e_before, "energy %g -> %g", e_before,
                  r.energy);
    ck_assert_msg(sub_before > 0.3 && sub_after < 0.05,
                  "subspace residual %g -> %g", sub_before, sub_after);
    gsl_matrix_free(a1);
    gsl_matrix_free(x);
    lse_predcoding_free(m);
}
END_TEST

START_TEST(test_accessors)
{
    gsl_matrix *x = random_matrix(5, 3, 1, 1.0);
    const size_t dims[3] = {4, 2, 1}, rows[3] = {6, 3, 2};
    lse_predcoding_opts o = lse_predcoding_opts_default();
    o.layout = LSE_PC_MIXTURE;
    o.rows = rows;
    o.weight_decay = 0.1;
    lse_predcoding *m = NULL;
    lse_assert_ok(lse_predcoding_new(x, 3, dims, &o, &m, NULL));
    ck_assert_uint_eq(lse_predcoding_n_layers(m), 3);
    lse_graph *g = lse_predcoding_graph(m);
    ck_assert_ptr_nonnull(lse_graph_find_term(g, "prior"));
    ck_assert_ptr_nonnull(lse_graph_find_term(g, "decay3"));
    ck_assert_ptr_eq(lse_graph_find_term(g, "pc2"), lse_predcoding_term(m, 2));
    ck_assert(lse_node_is_clamped(lse_predcoding_layer(m, 0)));
    ck_assert(gsl_matrix_equal(lse_node_value(lse_predcoding_layer(m, 0)), x));
    const size_t want_rows[4] = {5, 6, 3, 2}, want_dims[4] = {3, 4, 2, 1};
    for (size_t l = 0; l <= 3; l++) {
        ck_assert_uint_eq(lse_node_rows(lse_predcoding_layer(m, l)),
                          want_rows[l]);
        ck_assert_uint_eq(lse_node_dim(lse_predcoding_layer(m, l)),
                          want_dims[l]);
    }
    for (size_t l = 1; l <= 3; l++) {
        lse_node *w = lse_predcoding_weight(m, l),
                 *b = lse_predcoding_bias(m, l);
        ck_assert(lse_node_is_param(w) && lse_node_is_param(b));
        ck_assert_uint_eq(lse_node_rows(w), want_dims[l - 1]);
        ck_assert_uint_eq(lse_node_dim(w), want_dims[l]);
        ck_assert_uint_eq(lse_node_rows(b), 1);
        ck_assert_uint_eq(lse_node_dim(b), want_dims[l - 1]);
        ck_assert_ptr_eq(lse_term_sim(lse_predcoding_term(m, l)),
                         lse_sim_nonlinear);
    }
    ck_assert_ptr_null(lse_predcoding_layer(m, 4));
    ck_assert_ptr_null(lse_predcoding_weight(m, 0));
    ck_assert_ptr_null(lse_predcoding_bias(m, 4));
    ck_assert_ptr_null(lse_predcoding_term(m, 0));
    ck_assert_ptr_null(lse_predcoding_graph(NULL));
    ck_assert_uint_eq(lse_predcoding_n_layers(NULL), 0);
    /* same seed, same start */
    lse_predcoding *m2 = NULL;
    lse_assert_ok(lse_predcoding_new(x, 3, dims, &o, &m2, NULL));
    ck_assert(gsl_matrix_equal(lse_node_value(lse_predcoding_weight(m, 2)),
                               lse_node_value(lse_predcoding_weight(m2, 2))));
    lse_predcoding_free(m2);
    /* set_data */
    gsl_matrix *x2 = random_matrix(5, 3, 2, 1.0);
    lse_assert_ok(lse_predcoding_set_data(m, x2, NULL));
    ck_assert(gsl_matrix_equal(lse_node_value(lse_predcoding_layer(m, 0)), x2));
    lse_predcoding_free(m);
    lse_predcoding_free(NULL);
    gsl_matrix_free(x);
    gsl_matrix_free(x2);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x = random_matrix(4, 3, 1, 1.0);
    const size_t dims[2] = {2, 1}, zero[2] = {2, 0}, rows0[2] = {3, 0};
    lse_predcoding *m = NULL;
    lse_error err;
    lse_predcoding_opts o = lse_predcoding_opts_default();

    lse_assert_status(lse_predcoding_new(NULL, 2, dims, NULL, &m, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_predcoding_new(x, 2, NULL, NULL, &m, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_predcoding_new(x, 2, dims, NULL, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_predcoding_new(x, 0, dims, NULL, &m, &err),
                      LSE_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(err.message, "n_layers"));
    lse_assert_status(lse_predcoding_new(x, 2, zero, NULL, &m, &err),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "layer 2 has dimension 0"));
    o.layout = LSE_PC_MIXTURE;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EFAULT);
    o.rows = rows0;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "0 rows"));
    o = lse_predcoding_opts_default();
    o.layout = (lse_pc_layout)7;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EINVAL);
    o = lse_predcoding_opts_default();
    const lse_activation bad[2] = {LSE_ACT_TANH, (lse_activation)9};
    o.act = bad;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "activation"));
    o = lse_predcoding_opts_default();
    o.prior = -1.0;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EDOM);
    o = lse_predcoding_opts_default();
    o.weight_decay = NAN;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EDOM);
    o = lse_predcoding_opts_default();
    o.init_sd = 0.0;
    lse_assert_status(lse_predcoding_new(x, 2, dims, &o, &m, &err), LSE_EDOM);
    ck_assert_ptr_null(m);

    gsl_matrix_set(x, 1, 1, NAN);
    lse_assert_status(lse_predcoding_new(x, 2, dims, NULL, &m, &err),
                      LSE_ENONFINITE);
    gsl_matrix_set(x, 1, 1, 0.25);

    lse_assert_ok(lse_predcoding_new(x, 2, dims, NULL, &m, &err));
    gsl_matrix *bad_x = gsl_matrix_alloc(4, 2), *out = gsl_matrix_alloc(4, 3);
    gsl_matrix_set_zero(bad_x);
    lse_assert_status(lse_predcoding_set_data(m, bad_x, NULL), LSE_EDIM);
    lse_assert_status(lse_predcoding_set_data(NULL, x, NULL), LSE_EFAULT);
    lse_assert_status(lse_predcoding_predict(m, 0, out, NULL), LSE_ERANGE);
    lse_assert_status(lse_predcoding_predict(m, 3, out, NULL), LSE_ERANGE);
    lse_assert_status(lse_predcoding_predict(m, 2, out, NULL), LSE_EDIM);
    lse_assert_status(lse_predcoding_predict(m, 1, NULL, NULL), LSE_EFAULT);
    lse_assert_ok(lse_predcoding_predict(m, 1, out, NULL));
    double mse;
    lse_assert_status(lse_predcoding_error(m, 3, &mse, NULL), LSE_ERANGE);
    lse_assert_status(lse_predcoding_error(m, 1, NULL, NULL), LSE_EFAULT);
    lse_assert_status(lse_predcoding_infer(m, 10, -1.0, NULL, NULL), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(lse_predcoding_graph(m)),
                                 "lse_solver_set_opts"));
    lse_predcoding_fit_opts f = lse_predcoding_fit_opts_default();
    f.tol = -1.0;
    lse_assert_status(lse_predcoding_learn(m, &f, NULL, NULL), LSE_EDOM);
    lse_assert_status(lse_predcoding_infer(NULL, 10, 0.0, NULL, NULL),
                      LSE_EFAULT);
    lse_assert_status(lse_predcoding_learn(NULL, NULL, NULL, NULL), LSE_EFAULT);
    gsl_matrix_free(bad_x);
    gsl_matrix_free(out);
    lse_predcoding_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_predcoding_error(NULL, 0, &x, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_predcoding_error"));
    ck_assert_int_eq(lse_predcoding_error(NULL, 0, &x, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_predcoding");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gradcheck_per_sample);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_gradcheck_mixture);
    tcase_add_test(tc, test_seed_gradients_by_hand);
    tcase_add_test(tc, test_per_sample_energy_is_classic);
    tcase_add_test(tc, test_inference_decreases_energy);
    tcase_add_test(tc, test_learning_toy_linear_model);
    tcase_add_test(tc, test_accessors);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
