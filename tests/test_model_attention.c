#include <math.h>
#include <string.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* Cross-, self- and slot attention (models/attention.c). */

static void fill(gsl_matrix *m, double seed, double amp)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j,
                           amp * sin(seed + 1.37 * (double)i +
                                     0.71 * (double)j * (double)(j + 1) +
                                     0.53 * (double)(i * j * j)));
}

static gsl_matrix *mat(size_t r, size_t c, double seed, double amp)
{
    gsl_matrix *m = gsl_matrix_alloc(r, c);
    ck_assert_ptr_nonnull(m);
    fill(m, seed, amp);
    return m;
}

/* Textbook scaled-dot-product attention with plain loops:
 * out = softmax(Q K' / sqrt(d)) V, Q (n, d), K (m, d), V (m, dv). */
static void textbook(const gsl_matrix *q, const gsl_matrix *k,
                     const gsl_matrix *v, gsl_matrix *out)
{
    const size_t n = q->size1, m = k->size1, d = q->size2, dv = v->size2;
    for (size_t i = 0; i < n; i++) {
        double s[64], mx = -INFINITY, sum = 0.0;
        for (size_t j = 0; j < m; j++) {
            double dot = 0.0;
            for (size_t t = 0; t < d; t++)
                dot += gsl_matrix_get(q, i, t) * gsl_matrix_get(k, j, t);
            s[j] = dot / sqrt((double)d);
            mx = fmax(mx, s[j]);
        }
        for (size_t j = 0; j < m; j++) {
            s[j] = exp(s[j] - mx);
            sum += s[j];
        }
        for (size_t c = 0; c < dv; c++) {
            double o = 0.0;
            for (size_t j = 0; j < m; j++)
                o += s[j] / sum * gsl_matrix_get(v, j, c);
            gsl_matrix_set(out, i, c, o);
        }
    }
}

static double max_abs_diff(const gsl_matrix *a, const gsl_matrix *b)
{
    ck_assert_uint_eq(a->size1, b->size1);
    ck_assert_uint_eq(a->size2, b->size2);
    double d = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            d = fmax(d,
                     fabs(gsl_matrix_get(a, i, j) - gsl_matrix_get(b, i, j)));
    return d;
}

static void assert_rows_sum_to_one(const gsl_matrix *a)
{
    for (size_t i = 0; i < a->size1; i++) {
        double s = 0.0;
        for (size_t j = 0; j < a->size2; j++) {
            ck_assert_double_ge(gsl_matrix_get(a, i, j), 0.0);
            s += gsl_matrix_get(a, i, j);
        }
        ck_assert_double_eq_tol(s, 1.0, 1e-12);
    }
}

/* ------------------------------------------------------------------ */
/* Cross attention                                                      */

/* One step of the graph computation equals softmax(QK'/sqrt d) V, both
 * ways: A V from the term's softmax, and (V = K) the gradient step
 * Q - (1/lambda) dE/dQ with lambda = 1/sqrt(d). */
START_TEST(test_cross_step_is_textbook_attention)
{
    const size_t n = 5, m = 7, d = 4, dv = 3;
    gsl_matrix *q = mat(n, d, 0.4127, 1.3), *k = mat(m, d, 2.385, 1.1);
    gsl_matrix *v = mat(m, dv, -0.731, 0.9);
    gsl_matrix *out = gsl_matrix_alloc(n, dv), *ref = gsl_matrix_alloc(n, dv);
    gsl_matrix *outk = gsl_matrix_alloc(n, d), *refk = gsl_matrix_alloc(n, d);
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_cross_new(q, k, NULL, &a, NULL));
    ck_assert_int_eq(lse_attention_kind_of(a), LSE_ATTENTION_CROSS);
    ck_assert_ptr_eq(lse_term_sim(lse_attention_term(a)), lse_sim_scaled_dot);
    ck_assert_double_eq_tol(lse_attention_bound(a), 0.5, 1e-15);
    ck_assert_ptr_nonnull(lse_graph_find_term(lse_attention_graph(a), "bound"));
    lse_assert_ok(lse_attention_step(a, v, out, &model_err));
    textbook(q, k, v, ref);
    ck_assert_double_lt(max_abs_diff(out, ref), 1e-12);
    lse_assert_ok(lse_attention_step(a, NULL, outk, &model_err));
    textbook(q, k, k, refk);
    ck_assert_double_lt(max_abs_diff(outk, refk), 1e-12);
    /* the step leaves the node values alone */
    ck_assert_double_eq(max_abs_diff(lse_node_value(lse_attention_state(a)), q),
                        0.0);
    /* A V with V = K equals the gradient step */
    lse_assert_ok(lse_attention_step(a, k, refk, &model_err));
    ck_assert_double_lt(max_abs_diff(outk, refk), 1e-12);
    assert_rows_sum_to_one(lse_attention_softmax(a));
    lse_attention_free(a);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(v);
    gsl_matrix_free(out);
    gsl_matrix_free(ref);
    gsl_matrix_free(outk);
    gsl_matrix_free(refk);
}
END_TEST

/* Without the bound: -sqrt(d) dE/dQ = softmax(QK'/sqrt d) K (eq. 7 with
 * the 1/sqrt(d) of the scaled dot), and with free keys -sqrt(d) dE/dK =
 * A' Q (eq. 8). */
START_TEST(test_cross_gradient_seed_7_8)
{
    const size_t n = 4, m = 6, d = 5;
    gsl_matrix *q = mat(n, d, 0.4127, 1.2), *k = mat(m, d, 2.385, 0.8);
    gsl_matrix *ref = gsl_matrix_alloc(n, d);
    lse_attention_opts o = lse_attention_opts_default();
    o.bound = 0.0;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_cross_new(q, k, &o, &a, NULL));
    ck_assert_ptr_null(lse_graph_find_term(lse_attention_graph(a), "bound"));
    ck_assert_double_eq(lse_attention_bound(a), 0.0);
    lse_node *kn = lse_attention_node(a, "keys");
    ck_assert(lse_node_is_clamped(kn));
    lse_node_set_clamped(kn, 0);
    double e;
    lse_assert_ok(lse_graph_gradient(lse_attention_graph(a), &e));
    textbook(q, k, k, ref);
    const gsl_matrix *gq = lse_node_grad(lse_attention_state(a));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            ck_assert_double_eq_tol(-sqrt((double)d) * gsl_matrix_get(gq, i, j),
                                    gsl_matrix_get(ref, i, j), 1e-12);
    const gsl_matrix *p = lse_attention_softmax(a);
    const gsl_matrix *gk = lse_node_grad(kn);
    for (size_t j = 0; j < m; j++)
        for (size_t t = 0; t < d; t++) {
            double rhs = 0.0;
            for (size_t i = 0; i < n; i++)
                rhs += gsl_matrix_get(p, i, j) * gsl_matrix_get(q, i, t);
            ck_assert_double_eq_tol(-sqrt((double)d) * gsl_matrix_get(gk, j, t),
                                    rhs, 1e-12);
        }
    /* the step needs the bound (or values) */
    gsl_matrix *out = gsl_matrix_alloc(n, d);
    lse_assert_status(lse_attention_step(a, NULL, out, &model_err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(model_err.message, "bound"));
    gsl_matrix_free(out);
    lse_attention_free(a);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(ref);
}
END_TEST

/* Whole-graph gradient check with the plain dot similarity (seed eq. 6),
 * beta 1.3 and free keys; one CCCP step lowers the energy. */
START_TEST(test_cross_dot_gradcheck_and_descent)
{
    gsl_matrix *q = mat(4, 3, 0.4127, 1.0), *k = mat(5, 3, 2.385, 1.0);
    lse_attention_opts o = lse_attention_opts_default();
    o.sim = lse_sim_dot;
    o.beta = 1.3;
    o.bound = 1.0;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_cross_new(q, k, &o, &a, NULL));
    lse_graph *g = lse_attention_graph(a);
    double e0, e1;
    lse_assert_ok(lse_attention_energy(a, &e0, &model_err));
    gsl_matrix *next = gsl_matrix_alloc(4, 3);
    lse_assert_ok(lse_attention_step(a, NULL, next, &model_err));
    lse_assert_ok(lse_node_set_value(lse_attention_state(a), next));
    lse_assert_ok(lse_attention_energy(a, &e1, &model_err));
    ck_assert_double_lt(e1, e0);
    lse_node_set_clamped(lse_attention_node(a, "keys"), 0);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1e-3, &res));
    ck_assert_uint_eq(res.n_checked, 4 * 3 + 5 * 3);
    ck_assert_msg(res.max_error < 1e-6, "%g at %s", res.max_error, res.where);
    gsl_matrix_free(next);
    lse_attention_free(a);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
}
END_TEST

/* DAR, IDW and DAAM attention through the same model: rows of A sum to 1,
 * A V is the softmax-weighted sum, and every gradient (queries, keys,
 * parameters) passes the finite-difference check. */
static void check_other_sim(const lse_sim_type *sim, const void *config,
                            const gsl_matrix *const *param)
{
    const size_t n = 6, m = 4, d = 5;
    gsl_matrix *q = mat(n, d, 0.4127, 1.1), *k = mat(m, d, 2.385, 0.7);
    gsl_matrix *v = mat(m, 2, -0.731, 1.0), *out = gsl_matrix_alloc(n, 2);
    lse_attention_opts o = lse_attention_opts_default();
    o.sim = sim;
    o.config = config;
    o.param = param;
    o.beta = 1.4;
    lse_attention *a = NULL;
    lse_error err;
    lse_status st = lse_attention_cross_new(q, k, &o, &a, &err);
    ck_assert_msg(st == LSE_OK, "%s: %s", sim->name, err.message);
    ck_assert_ptr_eq(lse_term_sim(lse_attention_term(a)), sim);
    lse_assert_ok(lse_attention_step(a, v, out, &model_err));
    const gsl_matrix *p = lse_attention_softmax(a);
    assert_rows_sum_to_one(p);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < 2; c++) {
            double o2 = 0.0;
            for (size_t j = 0; j < m; j++)
                o2 += gsl_matrix_get(p, i, j) * gsl_matrix_get(v, j, c);
            ck_assert_double_eq_tol(gsl_matrix_get(out, i, c), o2, 1e-14);
        }
    lse_node_set_clamped(lse_attention_node(a, "keys"), 0);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(lse_attention_graph(a), NULL, 1e-6,
                                           1e-3, &res));
    size_t want = n * d + m * d;
    for (size_t t = 0; param != NULL && t < sim->n_param; t++)
        want += param[t]->size1 * param[t]->size2;
    ck_assert_uint_eq(res.n_checked, want);
    ck_assert_msg(res.max_error < 1e-6, "%s: %g at %s", sim->name,
                  res.max_error, res.where);
    lse_attention_free(a);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(v);
    gsl_matrix_free(out);
}

START_TEST(test_cross_dar)
{
    lse_dar_config c = *(const lse_dar_config *)lse_sim_dar->config_default;
    c.lambda = 0.7;
    c.alpha = 3.0;
    c.rho = 0.1;
    check_other_sim(lse_sim_dar, &c, NULL);
}
END_TEST

START_TEST(test_cross_idw)
{
    const lse_dist_config c = {.p = 2.0, .eps = 1e-3, .s = 1.0};
    check_other_sim(lse_sim_idw, &c, NULL);
}
END_TEST

START_TEST(test_cross_daam)
{
    gsl_matrix *c = gsl_matrix_alloc(4, 1); /* one gate width per head */
    for (size_t h = 0; h < 4; h++)
        gsl_matrix_set(c, h, 0, 0.8 + 0.37 * (double)h);
    const gsl_matrix *const param[] = {c};
    const lse_daam_config cfg = {.axis = LSE_DAAM_FEATURES, .eps = 1e-5};
    check_other_sim(lse_sim_daam, &cfg, param);
    gsl_matrix_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Self-attention                                                       */

typedef struct self_fixture {
    gsl_matrix *x, *wq, *wk;
} self_fixture;

static self_fixture self_inputs(size_t n)
{
    self_fixture f = {mat(n, 3, 0.4127, 1.0), mat(2, 3, 2.385, 0.9),
                      mat(2, 3, -1.29, 0.8)};
    return f;
}

static void self_free(self_fixture *f)
{
    gsl_matrix_free(f->x);
    gsl_matrix_free(f->wq);
    gsl_matrix_free(f->wk);
}

/* S_cp = (W_Q x_c).(W_K x_p) and the masked softmax, by hand. */
static void hand_softmax(const self_fixture *f, unsigned mask, double a[8][8],
                         double row_lse[8])
{
    const size_t n = f->x->size1;
    double qx[8][2], kx[8][2];
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < 2; r++) {
            qx[i][r] = kx[i][r] = 0.0;
            for (size_t t = 0; t < 3; t++) {
                qx[i][r] +=
                    gsl_matrix_get(f->wq, r, t) * gsl_matrix_get(f->x, i, t);
                kx[i][r] +=
                    gsl_matrix_get(f->wk, r, t) * gsl_matrix_get(f->x, i, t);
            }
        }
    for (size_t c = 0; c < n; c++) {
        double mx = -INFINITY, sum = 0.0;
        for (size_t p = 0; p < n; p++) {
            const int ok = !((mask & LSE_MASK_CAUSAL) && p > c) &&
                           !((mask & LSE_MASK_NO_SELF) && p == c);
            a[c][p] =
                ok ? qx[c][0] * kx[p][0] + qx[c][1] * kx[p][1] : -INFINITY;
            mx = fmax(mx, a[c][p]);
        }
        if (mx == -INFINITY) { /* no allowed parent */
            for (size_t p = 0; p < n; p++)
                a[c][p] = 0.0;
            row_lse[c] = -INFINITY;
            continue;
        }
        double s[8];
        for (size_t p = 0; p < n; p++) {
            s[p] = exp(a[c][p] - mx);
            sum += s[p];
        }
        for (size_t p = 0; p < n; p++)
            a[c][p] = s[p] / sum;
        row_lse[c] = mx + log(sum);
    }
}

/* Seed eq. (16) by hand: -dE/dx_i = sum_p A_ip W_Q' W_K x_p
 * + sum_c A_ci W_K' W_Q x_c, with the masked softmax (no bound term). */
static void check_eq16(unsigned mask)
{
    const size_t n = 6;
    self_fixture f = self_inputs(n);
    lse_attention_opts o = lse_attention_opts_default();
    o.mask = mask;
    o.bound = 0.0;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_self_new(f.x, f.wq, f.wk, &o, &a, NULL));
    double e;
    lse_assert_ok(lse_graph_gradient(lse_attention_graph(a), &e));
    double A[8][8], rl[8];
    hand_softmax(&f, mask, A, rl);
    double ehand = 0.0;
    for (size_t c = 0; c < n; c++)
        if (rl[c] != -INFINITY)
            ehand -= rl[c];
    ck_assert_double_eq_tol(e, ehand, 1e-12);
    /* M = W_Q' W_K (3, 3) */
    double M[3][3];
    for (size_t s = 0; s < 3; s++)
        for (size_t t = 0; t < 3; t++)
            M[s][t] = gsl_matrix_get(f.wq, 0, s) * gsl_matrix_get(f.wk, 0, t) +
                      gsl_matrix_get(f.wq, 1, s) * gsl_matrix_get(f.wk, 1, t);
    const gsl_matrix *gx = lse_node_grad(lse_attention_state(a));
    for (size_t i = 0; i < n; i++)
        for (size_t s = 0; s < 3; s++) {
            double rhs = 0.0;
            for (size_t p = 0; p < n; p++) /* child side: W_Q' W_K x_p */
                for (size_t t = 0; t < 3; t++)
                    rhs += A[i][p] * M[s][t] * gsl_matrix_get(f.x, p, t);
            for (size_t c = 0; c < n; c++) /* parent side: W_K' W_Q x_c */
                for (size_t t = 0; t < 3; t++)
                    rhs += A[c][i] * M[t][s] * gsl_matrix_get(f.x, c, t);
            ck_assert_double_eq_tol(-gsl_matrix_get(gx, i, s), rhs, 1e-12);
        }
    const gsl_matrix *p = lse_attention_softmax(a);
    for (size_t c = 0; c < n; c++)
        for (size_t q = 0; q < n; q++)
            ck_assert_double_eq_tol(gsl_matrix_get(p, c, q), A[c][q], 1e-14);
    lse_attention_free(a);
    self_free(&f);
}

START_TEST(test_self_seed_eq16) { check_eq16(0); }
END_TEST
START_TEST(test_self_seed_eq16_causal) { check_eq16(LSE_MASK_CAUSAL); }
END_TEST
START_TEST(test_self_seed_eq16_strict)
{
    check_eq16(LSE_MASK_CAUSAL | LSE_MASK_NO_SELF);
}
END_TEST

/* CAUSAL: row 0 attends only to itself, row c to rows 0..c. */
START_TEST(test_self_causal_mask)
{
    const size_t n = 5;
    self_fixture f = self_inputs(n);
    lse_attention_opts o = lse_attention_opts_default();
    o.mask = LSE_MASK_CAUSAL;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_self_new(f.x, f.wq, f.wk, &o, &a, NULL));
    ck_assert_uint_eq(lse_term_mask(lse_attention_term(a)), LSE_MASK_CAUSAL);
    double e;
    lse_assert_ok(lse_attention_energy(a, &e, &model_err));
    const gsl_matrix *p = lse_attention_softmax(a);
    ck_assert_double_eq(gsl_matrix_get(p, 0, 0), 1.0);
    for (size_t c = 0; c < n; c++)
        for (size_t q = c + 1; q < n; q++)
            ck_assert_double_eq(gsl_matrix_get(p, c, q), 0.0);
    assert_rows_sum_to_one(p);
    /* A V: row 0 is v_0 exactly */
    gsl_matrix *v = mat(n, 2, 0.3, 1.0), *out = gsl_matrix_alloc(n, 2);
    lse_assert_ok(lse_attention_step(a, v, out, &model_err));
    ck_assert_double_eq(gsl_matrix_get(out, 0, 0), gsl_matrix_get(v, 0, 0));
    ck_assert_double_eq(gsl_matrix_get(out, 0, 1), gsl_matrix_get(v, 0, 1));
    lse_gradcheck res; /* x, W_Q, W_K and the bound */
    lse_assert_ok(lse_graph_check_gradient(lse_attention_graph(a), NULL, 1e-6,
                                           1e-3, &res));
    ck_assert_uint_eq(res.n_checked, n * 3 + 2 * 3 + 2 * 3);
    ck_assert_msg(res.max_error < 1e-6, "%g at %s", res.max_error, res.where);
    gsl_matrix_free(v);
    gsl_matrix_free(out);
    lse_attention_free(a);
    self_free(&f);
}
END_TEST

/* CAUSAL | NO_SELF: row 0 has no allowed parent and contributes nothing:
 * row log-sum-exp -inf, softmax row 0, energy 0 and gradient 0 when it is
 * the only row. */
START_TEST(test_self_strict_mask_row0)
{
    const size_t n = 5;
    self_fixture f = self_inputs(n);
    lse_attention_opts o = lse_attention_opts_default();
    o.mask = LSE_MASK_CAUSAL | LSE_MASK_NO_SELF;
    o.bound = 0.0;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_self_new(f.x, f.wq, f.wk, &o, &a, NULL));
    double e;
    lse_assert_ok(lse_attention_energy(a, &e, &model_err));
    ck_assert(gsl_vector_get(lse_term_row_lse(lse_attention_term(a)), 0) ==
              -INFINITY);
    const gsl_matrix *p = lse_attention_softmax(a);
    for (size_t q = 0; q < n; q++)
        ck_assert_double_eq(gsl_matrix_get(p, 0, q), 0.0);
    ck_assert_double_eq(gsl_matrix_get(p, 1, 0), 1.0); /* row 1 sees row 0 */
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(lse_attention_graph(a), NULL, 1e-6,
                                           1e-3, &res));
    ck_assert_msg(res.max_error < 1e-6, "%g at %s", res.max_error, res.where);
    lse_attention_free(a);

    /* a one-row sequence is row 0 alone: energy 0, every gradient 0 */
    gsl_matrix *x1 = mat(1, 3, 0.4127, 1.0);
    lse_assert_ok(lse_attention_self_new(x1, f.wq, f.wk, &o, &a, NULL));
    lse_assert_ok(lse_graph_gradient(lse_attention_graph(a), &e));
    ck_assert_double_eq(e, 0.0);
    ck_assert_double_eq(lse_term_energy(lse_attention_term(a)), 0.0);
    const char *names[] = {"x", "W_Q", "W_K"};
    for (size_t k = 0; k < 3; k++) {
        const gsl_matrix *gr = lse_node_grad(lse_attention_node(a, names[k]));
        for (size_t i = 0; i < gr->size1; i++)
            for (size_t j = 0; j < gr->size2; j++)
                ck_assert_double_eq(gsl_matrix_get(gr, i, j), 0.0);
    }
    gsl_matrix *out = gsl_matrix_alloc(1, 3);
    lse_assert_ok(lse_attention_step(a, x1, out, &model_err)); /* A V = 0 */
    for (size_t j = 0; j < 3; j++)
        ck_assert_double_eq(gsl_matrix_get(out, 0, j), 0.0);
    gsl_matrix_free(out);
    gsl_matrix_free(x1);
    lse_attention_free(a);
    self_free(&f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Slot attention                                                       */

typedef struct energy_log {
    double e[256];
    size_t n;
} energy_log;

static int log_energy(const lse_solver *s, void *user)
{
    energy_log *l = user;
    if (l->n < 256) {
        l->e[l->n] = lse_solver_energy(s);
        l->n++;
    }
    return 0;
}

typedef struct warn_capture {
    size_t n_warn;
    char last[512];
} warn_capture;

static void capture(lse_log_level level, const char *msg, void *user)
{
    warn_capture *w = user;
    if (level == LSE_LOG_WARN && strstr(msg, "collapse") != NULL) {
        w->n_warn++;
        strncpy(w->last, msg, sizeof w->last - 1);
        w->last[sizeof w->last - 1] = '\0';
    }
}

/* Three clusters of four tokens around 3 e_1, 3 e_2, 3 e_3, slots started
 * near the centres, W_K = W_Q = I (+ w_amp times a fixed perturbation) and
 * lambda = 4 (the number of tokens per slot, so that the E-step fixed point
 * lambda mu_i = sum_j A_ji W_Q' W_K x_j stays at the scale of the
 * centres). */
static lse_attention *cluster_case(double w_amp, gsl_matrix **xo,
                                   gsl_matrix **muo, gsl_matrix **wko,
                                   gsl_matrix **wqo)
{
    gsl_matrix *x = mat(12, 3, 0.4127, 0.3), *mu = mat(3, 3, 2.385, 0.3);
    gsl_matrix *wk = mat(3, 3, -0.77, w_amp), *wq = mat(3, 3, 1.91, w_amp);
    for (size_t j = 0; j < 12; j++)
        *gsl_matrix_ptr(x, j, j / 4) += 3.0;
    for (size_t i = 0; i < 3; i++) {
        *gsl_matrix_ptr(mu, i, i) += 3.0;
        *gsl_matrix_ptr(wk, i, i) += 1.0;
        *gsl_matrix_ptr(wq, i, i) += 1.0;
    }
    lse_attention_opts o = lse_attention_opts_default();
    o.bound = 4.0;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_slot_new(x, mu, wk, wq, &o, &a, NULL));
    *xo = x;
    *muo = mu;
    *wko = wk;
    *wqo = wq;
    return a;
}

/* Generic slot EM: gradients of the whole graph (slots, W_K, W_Q) and seed
 * eq. (14) checked first; then EM runs and reports the energy at every
 * iteration. The seed's M-step does not minimise E, and here E rises:
 * reported, not hidden. */
START_TEST(test_slot_em_runs)
{
    gsl_matrix *x, *mu, *wk, *wq;
    lse_attention *a = cluster_case(0.1, &x, &mu, &wk, &wq);
    ck_assert_int_eq(lse_attention_kind_of(a), LSE_ATTENTION_SLOT);
    lse_graph *g = lse_attention_graph(a);
    ck_assert(lse_node_is_clamped(lse_attention_node(a, "tokens")));
    ck_assert_ptr_eq(lse_attention_state(a), lse_attention_node(a, "slots"));
    ck_assert_ptr_eq(lse_term_param(lse_attention_term(a), 0),
                     lse_attention_node(a, "W_K"));
    ck_assert_ptr_eq(lse_term_param(lse_attention_term(a), 1),
                     lse_attention_node(a, "W_Q"));
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1e-3, &res));
    ck_assert_uint_eq(res.n_checked, 9 + 9 + 9);
    ck_assert_msg(res.max_error < 1e-6, "%g at %s", res.max_error, res.where);

    /* seed eq. (14) by hand at the start: -dE/dmu_i (without the bound
     * 4 mu_i) =
     * sum_j A_ji W_Q' W_K x_j */
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));
    const gsl_matrix *p = lse_attention_softmax(a);
    const gsl_matrix *gm = lse_node_grad(lse_attention_state(a));
    for (size_t i = 0; i < 3; i++)
        for (size_t s = 0; s < 3; s++) {
            double rhs = 0.0;
            for (size_t j = 0; j < 12; j++)
                for (size_t r = 0; r < 3; r++)
                    for (size_t t = 0; t < 3; t++)
                        rhs +=
                            gsl_matrix_get(p, j, i) * gsl_matrix_get(wq, r, s) *
                            gsl_matrix_get(wk, r, t) * gsl_matrix_get(x, j, t);
            ck_assert_double_eq_tol(
                -(gsl_matrix_get(gm, i, s) - 4.0 * gsl_matrix_get(mu, i, s)),
                rhs, 1e-12);
        }

    lse_attention_free(a);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(wk);
    gsl_matrix_free(wq);

    a = cluster_case(0.0, &x, &mu, &wk, &wq);
    energy_log l = {.n = 0};
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.max_iter = 8;
    f.estep_steps = 2;
    f.tol = 0.0;
    f.cb = log_energy;
    f.user = &l;
    lse_slot_report rep;
    lse_status st = lse_attention_slot_fit(a, &f, &rep, &model_err);
    ck_assert_msg(st == LSE_OK, "%s", model_err.message);
    ck_assert_uint_eq(rep.n_iter, 8);
    ck_assert_uint_eq(l.n, rep.n_iter);
    ck_assert_uint_eq(rep.n_mstep, rep.n_iter);
    size_t rises = 0;
    for (size_t i = 0; i < l.n; i++) {
        ck_assert(isfinite(l.e[i]));
        const double prev = i == 0 ? rep.energy_initial : l.e[i - 1];
        rises += l.e[i] - prev > 1e-10 * fmax(1.0, fabs(prev));
    }
    ck_assert(isfinite(rep.energy_initial));
    ck_assert(isfinite(rep.energy));
    /* the first iteration has no predecessor in the solver's count */
    ck_assert_uint_ge(rep.n_increase + 1, rises);
    ck_assert_uint_ge(rep.n_increase, 1);
    ck_assert(isfinite(rep.norm_initial) && rep.norm_initial > 0.0);
    ck_assert(isfinite(rep.last_ratio) && isfinite(rep.max_ratio));
    ck_assert(!rep.collapsed); /* slow shrinking, not yet by half */
    ck_assert_double_lt(rep.norm, rep.norm_initial);
    /* the live report is the same */
    const lse_slot_report *live = lse_attention_slot_report(a);
    ck_assert_ptr_nonnull(live);
    ck_assert_uint_eq(live->n_mstep, rep.n_mstep);
    ck_assert_double_eq(live->norm, rep.norm);
    /* the M-step changed W_Q */
    ck_assert_double_gt(
        max_abs_diff(lse_node_value(lse_attention_node(a, "W_Q")), wq), 1e-6);
    lse_attention_free(a);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(wk);
    gsl_matrix_free(wq);
}
END_TEST

/* Stop the fit as soon as the detector fires (what a caller would do). */
static int stop_on_collapse(const lse_solver *s, void *user)
{
    (void)s;
    return lse_attention_slot_report(user)->collapsed;
}

/* Constructed collapse: tokens come in +-pairs (sum 0) and the slots are
 * small, so the softmax is nearly uniform and M = sum A x mu' ~ 0: the
 * closed-form W_Q = W_K M P^-1 is driven to zero at once. The detector
 * must fire and say so through lse_log. One E-step gradient step per
 * iteration and lambda = 0.2 keep the slots from collapsing to 0 before
 * the M-step sees them (with lambda = 1 a unit step sends them to
 * sum_j A_ji x_j ~ 0 and P is singular at once). */
static lse_attention *collapse_case(void)
{
    const size_t nh = 5;
    gsl_matrix *half = mat(nh, 2, 0.4127, 1.0);
    gsl_matrix *x = gsl_matrix_alloc(2 * nh, 2);
    for (size_t i = 0; i < nh; i++)
        for (size_t j = 0; j < 2; j++) {
            gsl_matrix_set(x, i, j, gsl_matrix_get(half, i, j));
            gsl_matrix_set(x, nh + i, j, -gsl_matrix_get(half, i, j));
        }
    gsl_matrix *mu = mat(2, 2, 2.385, 0.05);
    gsl_matrix *w = gsl_matrix_alloc(2, 2);
    gsl_matrix_set_identity(w);
    lse_attention_opts o = lse_attention_opts_default();
    o.bound = 0.2;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_slot_new(x, mu, w, w, &o, &a, NULL));
    gsl_matrix_free(half);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(w);
    return a;
}

static void check_collapsed(const lse_slot_report *rep, const warn_capture *wc)
{
    ck_assert(rep->collapsed);
    ck_assert_uint_ge(rep->collapse_mstep, 1);
    ck_assert_uint_le(rep->collapse_mstep, 3);
    ck_assert_uint_ge(rep->n_shrink, 1);
    ck_assert_double_lt(rep->last_ratio, 0.5);
    ck_assert_double_lt(rep->norm, 1e-2 * rep->norm_initial);
    ck_assert_uint_eq(wc->n_warn, 1); /* logged once, when it fired */
    ck_assert_ptr_nonnull(strstr(wc->last, "lse_attention_slot_fit"));
}

START_TEST(test_slot_collapse_detected)
{
    lse_attention *a = collapse_case();
    warn_capture wc = {0};
    lse_set_log_handler(capture, &wc);
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.max_iter = 10;
    f.estep_steps = 1;
    f.tol = 0.0;
    f.cb = stop_on_collapse;
    f.user = a;
    lse_slot_report rep;
    const lse_status st = lse_attention_slot_fit(a, &f, &rep, &model_err);
    lse_set_log_handler(NULL, NULL);
    ck_assert_msg(st == LSE_OK, "%s", model_err.message);
    ck_assert_int_eq(rep.reason, LSE_STOP_CALLBACK);
    ck_assert_uint_eq(rep.n_iter, rep.collapse_mstep);
    check_collapsed(&rep, &wc);
    ck_assert(lse_attention_slot_report(a)->collapsed);
    lse_attention_free(a);
}
END_TEST

/* Without stopping, the collapse goes on: with W ~ 0 the E-step pulls the
 * slots to ~0 as well and the M-step statistics become singular. Whatever
 * the fit returns, the collapse has been reported first. */
START_TEST(test_slot_collapse_continues)
{
    lse_attention *a = collapse_case();
    warn_capture wc = {0};
    lse_set_log_handler(capture, &wc);
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.max_iter = 10;
    f.estep_steps = 1;
    f.tol = 0.0;
    lse_slot_report rep;
    const lse_status st = lse_attention_slot_fit(a, &f, &rep, &model_err);
    lse_set_log_handler(NULL, NULL);
    ck_assert_msg(st == LSE_OK || st == LSE_ENUMERIC, "%s", model_err.message);
    if (st == LSE_ENUMERIC)
        ck_assert_ptr_nonnull(strstr(model_err.message, "singular"));
    check_collapsed(&rep, &wc);
    lse_attention_free(a);
}
END_TEST

/* Slow shrinking: in the cluster case with two E-step steps the seed's
 * M-step takes ~2-3% off ||W_K|| ||W_Q|| per iteration; no single step
 * trips rule (a), the cumulative rule (b) fires before the slots merge and
 * the statistics turn singular. */
START_TEST(test_slot_slow_shrink_detected)
{
    gsl_matrix *x, *mu, *wk, *wq;
    lse_attention *a = cluster_case(0.0, &x, &mu, &wk, &wq);
    warn_capture wc = {0};
    lse_set_log_handler(capture, &wc);
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.max_iter = 40;
    f.estep_steps = 2;
    f.tol = 0.0;
    f.cb = stop_on_collapse;
    f.user = a;
    lse_slot_report rep;
    const lse_status st = lse_attention_slot_fit(a, &f, &rep, &model_err);
    lse_set_log_handler(NULL, NULL);
    ck_assert_msg(st == LSE_OK, "%s", model_err.message);
    ck_assert(rep.collapsed);
    ck_assert_int_eq(rep.reason, LSE_STOP_CALLBACK);
    ck_assert_uint_ge(rep.collapse_mstep, 5);
    ck_assert_double_lt(rep.norm, 0.5 * rep.norm_initial);
    ck_assert_uint_eq(wc.n_warn, 1);
    ck_assert_ptr_nonnull(strstr(wc.last, "below 0.5 times its start value"));
    lse_attention_free(a);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(wk);
    gsl_matrix_free(wq);
}
END_TEST

/* No false alarm: tokens sit on two well separated slots (three copies
 * each, W = I), the assignments are sharp and M = P = X, so the closed form
 * keeps W; lambda = 3 makes the slots a fixed point of the E-step. */
START_TEST(test_slot_no_false_alarm)
{
    gsl_matrix *mu = gsl_matrix_calloc(2, 2);
    gsl_matrix_set(mu, 0, 0, 3.0);
    gsl_matrix_set(mu, 1, 1, 3.0);
    gsl_matrix *x = gsl_matrix_alloc(6, 2);
    for (size_t i = 0; i < 6; i++) {
        gsl_vector_const_view r = gsl_matrix_const_row(mu, i / 3);
        gsl_matrix_set_row(x, i, &r.vector);
    }
    gsl_matrix *w = gsl_matrix_alloc(2, 2);
    gsl_matrix_set_identity(w);
    lse_attention_opts o = lse_attention_opts_default();
    o.bound = 3.0;
    lse_attention *a = NULL;
    lse_assert_ok(lse_attention_slot_new(x, mu, w, w, &o, &a, NULL));
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.max_iter = 10;
    lse_slot_report rep;
    lse_assert_ok(lse_attention_slot_fit(a, &f, &rep, &model_err));
    ck_assert(!rep.collapsed);
    ck_assert_uint_eq(rep.n_shrink, 0);
    ck_assert_double_eq_tol(rep.last_ratio, 1.0, 1e-3);
    ck_assert_double_eq_tol(rep.norm, rep.norm_initial, 1e-2);
    lse_attention_free(a);
    gsl_matrix_free(mu);
    gsl_matrix_free(x);
    gsl_matrix_free(w);
}
END_TEST

/* ------------------------------------------------------------------ */

START_TEST(test_errors)
{
    gsl_matrix *q = mat(3, 4, 0.4127, 1.0), *k = mat(5, 4, 2.385, 1.0);
    gsl_matrix *k3 = mat(5, 3, 2.385, 1.0);
    lse_attention *a = NULL;
    lse_error err;
    lse_assert_status(lse_attention_cross_new(NULL, k, NULL, &a, &err),
                      LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(err.message, "queries"));
    lse_assert_status(lse_attention_cross_new(q, k, NULL, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_attention_cross_new(q, k3, NULL, &a, &err), LSE_EDIM);
    ck_assert_ptr_null(a);
    ck_assert_ptr_nonnull(strstr(err.message, "scaled-dot"));
    lse_attention_opts o = lse_attention_opts_default();
    o.beta = 0.0;
    lse_assert_status(lse_attention_cross_new(q, k, &o, &a, &err), LSE_EDOM);
    o = lse_attention_opts_default();
    o.bound = NAN;
    lse_assert_status(lse_attention_cross_new(q, k, &o, &a, &err), LSE_EDOM);
    o = lse_attention_opts_default();
    o.mask = 0x80;
    lse_assert_status(lse_attention_cross_new(q, k, &o, &a, &err), LSE_EINVAL);
    o = lse_attention_opts_default();
    o.sim = lse_sim_daam; /* its gate widths are missing */
    lse_assert_status(lse_attention_cross_new(q, k, &o, &a, &err), LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(err.message, "needs parameter 'c'"));
    gsl_matrix_set(q, 1, 1, NAN);
    lse_assert_status(lse_attention_cross_new(q, k, NULL, &a, &err),
                      LSE_ENONFINITE);
    fill(q, 0.4127, 1.0);

    lse_assert_ok(lse_attention_cross_new(q, k, NULL, &a, &err));
    gsl_matrix *v = mat(4, 2, 0.1, 1.0), *out = gsl_matrix_alloc(3, 2);
    gsl_matrix *out4 = gsl_matrix_alloc(3, 3);
    lse_assert_status(lse_attention_step(a, v, out, &model_err),
                      LSE_EDIM); /* 4 != 5 rows */
    lse_assert_status(lse_attention_step(a, NULL, out4, &model_err), LSE_EDIM);
    lse_assert_status(lse_attention_step(a, NULL, NULL, &model_err),
                      LSE_EFAULT);
    lse_assert_status(lse_attention_slot_fit(a, NULL, NULL, &model_err),
                      LSE_EINVAL);
    ck_assert_ptr_null(lse_attention_slot_report(a));
    double e;
    lse_assert_status(lse_attention_energy(a, NULL, &model_err), LSE_EFAULT);
    gsl_matrix_set(lse_node_value(lse_attention_state(a)), 0, 0, INFINITY);
    lse_assert_status(lse_attention_energy(a, &e, &model_err), LSE_ENONFINITE);
    ck_assert_str_ne(model_err.message, "");
    lse_attention_free(a);

    gsl_matrix *w = mat(2, 4, 0.3, 1.0), *w3 = mat(2, 3, 0.3, 1.0);
    lse_assert_status(lse_attention_self_new(q, w, w3, NULL, &a, &err),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "bilinear"));
    lse_assert_status(lse_attention_self_new(q, NULL, w, NULL, &a, &err),
                      LSE_EFAULT);
    o = lse_attention_opts_default();
    o.mask = LSE_MASK_CAUSAL;
    lse_assert_status(lse_attention_slot_new(q, k, w, w, &o, &a, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_attention_slot_new(q, k, w, NULL, NULL, &a, &err),
                      LSE_EFAULT);
    lse_assert_ok(lse_attention_slot_new(q, k, w, w, NULL, &a, &err));
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.shrink_ratio = 0.0;
    lse_assert_status(lse_attention_slot_fit(a, &f, NULL, &model_err),
                      LSE_EDOM);
    f = lse_slot_fit_opts_default();
    f.patience = 0;
    lse_assert_status(lse_attention_slot_fit(a, &f, NULL, &model_err),
                      LSE_EDOM);
    f = lse_slot_fit_opts_default();
    f.tol = -1.0;
    lse_assert_status(lse_attention_slot_fit(a, &f, NULL, &model_err),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(model_err.message, "shrink_ratio"));
    lse_attention_free(a);
    /* slots that do not span their space: P = sum A mu mu' is singular and
     * the closed-form M-step says so */
    gsl_matrix *same = gsl_matrix_alloc(2, 4);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 4; j++)
            gsl_matrix_set(same, i, j, 0.3 + 0.1 * (double)j);
    lse_assert_ok(lse_attention_slot_new(k, same, w, w, NULL, &a, &err));
    lse_assert_status(lse_attention_slot_fit(a, NULL, NULL, &model_err),
                      LSE_ENUMERIC);
    ck_assert_ptr_nonnull(strstr(model_err.message, "singular"));
    ck_assert_int_eq(lse_attention_slot_report(a)->reason, LSE_STOP_ERROR);
    lse_attention_free(a);
    /* NULL objects */
    lse_attention_free(NULL);
    ck_assert_ptr_null(lse_attention_graph(NULL));
    ck_assert_ptr_null(lse_attention_softmax(NULL));
    ck_assert_ptr_null(lse_attention_node(NULL, "x"));
    ck_assert_str_eq(lse_attention_errmsg(NULL), "");
    lse_assert_status(lse_attention_step(NULL, v, out, &model_err), LSE_EFAULT);
    gsl_matrix_free(same);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(k3);
    gsl_matrix_free(v);
    gsl_matrix_free(out);
    gsl_matrix_free(out4);
    gsl_matrix_free(w);
    gsl_matrix_free(w3);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_attention_energy(NULL, &x, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_attention_energy"));
    ck_assert_int_eq(lse_attention_energy(NULL, &x, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_attention");
    TCase *tc = tcase_create("cross");
    tcase_add_test(tc, test_cross_step_is_textbook_attention);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_cross_gradient_seed_7_8);
    tcase_add_test(tc, test_cross_dot_gradcheck_and_descent);
    tcase_add_test(tc, test_cross_dar);
    tcase_add_test(tc, test_cross_idw);
    tcase_add_test(tc, test_cross_daam);
    suite_add_tcase(s, tc);
    tc = tcase_create("self");
    tcase_add_test(tc, test_self_seed_eq16);
    tcase_add_test(tc, test_self_seed_eq16_causal);
    tcase_add_test(tc, test_self_seed_eq16_strict);
    tcase_add_test(tc, test_self_causal_mask);
    tcase_add_test(tc, test_self_strict_mask_row0);
    suite_add_tcase(s, tc);
    tc = tcase_create("slot");
    tcase_add_test(tc, test_slot_em_runs);
    tcase_add_test(tc, test_slot_collapse_detected);
    tcase_add_test(tc, test_slot_collapse_continues);
    tcase_add_test(tc, test_slot_slow_shrink_detected);
    tcase_add_test(tc, test_slot_no_false_alarm);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
