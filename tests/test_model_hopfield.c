#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* Modern Hopfield network (models/hopfield.c) on the bundled digits.
 *
 * Preprocessing (stated once, used everywhere below): each 8x8 image, 64
 * pixel counts 0..16, is centred (its own mean pixel subtracted) and
 * scaled to unit Euclidean norm. Stored patterns: the first rows of
 * data/digits.csv, in file order, whose cosine with every pattern already
 * kept is below 0.6, until 16 are kept. Retrieval runs at beta = 100, so
 * beta (1 - max cosine) >= 40 and a stored pattern is a fixed point of the
 * update to exp(-40) ~ 4e-18. */

#define N_PAT 16
#define DIM 64
#define MAX_COS 0.6
#define BETA_RETRIEVE 100.0

static gsl_matrix *digits;   /* (1797, 64) preprocessed */
static gsl_matrix *patterns; /* (N_PAT, 64) */
static size_t pattern_row[N_PAT];

static void load_digits(void)
{
    const char *path = LSE_DATA_DIR "/digits.csv";
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[4096];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f)); /* header */
    digits = gsl_matrix_alloc(1797, DIM);
    ck_assert_ptr_nonnull(digits);
    size_t n = 0, bad = 0;
    while (fgets(line, sizeof line, f) != NULL && n < 1797) {
        char *p = line;
        double mean = 0.0;
        for (size_t j = 0; j < DIM; j++) {
            char *end;
            const double v = strtod(p, &end);
            bad += end == p;
            gsl_matrix_set(digits, n, j, v);
            mean += v / DIM;
            p = end + 1; /* skip the comma */
        }
        double norm = 0.0;
        for (size_t j = 0; j < DIM; j++) {
            const double v = gsl_matrix_get(digits, n, j) - mean;
            gsl_matrix_set(digits, n, j, v);
            norm += v * v;
        }
        norm = sqrt(norm);
        bad += !(norm > 0.0);
        for (size_t j = 0; j < DIM; j++)
            gsl_matrix_set(digits, n, j, gsl_matrix_get(digits, n, j) / norm);
        n++;
    }
    fclose(f);
    ck_assert_uint_eq(n, 1797);
    ck_assert_uint_eq(bad, 0);
}

static double row_dot(const gsl_matrix *a, size_t i, const gsl_matrix *b,
                      size_t k)
{
    double s = 0.0;
    for (size_t j = 0; j < a->size2; j++)
        s += gsl_matrix_get(a, i, j) * gsl_matrix_get(b, k, j);
    return s;
}

static void setup(void)
{
    load_digits();
    patterns = gsl_matrix_alloc(N_PAT, DIM);
    size_t kept = 0;
    for (size_t i = 0; i < digits->size1 && kept < N_PAT; i++) {
        int ok = 1;
        for (size_t k = 0; k < kept && ok; k++)
            ok = row_dot(digits, i, patterns, k) < MAX_COS;
        if (!ok)
            continue;
        gsl_vector_const_view r = gsl_matrix_const_row(digits, i);
        gsl_matrix_set_row(patterns, kept, &r.vector);
        pattern_row[kept++] = i;
    }
    ck_assert_uint_eq(kept, N_PAT);
}

static void teardown(void)
{
    gsl_matrix_free(digits);
    gsl_matrix_free(patterns);
    digits = patterns = NULL;
}

static void fill(gsl_matrix *m, double seed)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(
                m, i, j, 0.3 * sin(seed + 1.37 * (double)i + 0.71 * (double)j));
}

START_TEST(test_patterns_distinct)
{
    for (size_t a = 0; a < N_PAT; a++) {
        ck_assert_double_eq_tol(row_dot(patterns, a, patterns, a), 1.0, 1e-12);
        for (size_t b = 0; b < a; b++)
            ck_assert_double_lt(row_dot(patterns, a, patterns, b), MAX_COS);
    }
}
END_TEST

START_TEST(test_graph_structure)
{
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, 2.5, &h, NULL));
    ck_assert_uint_eq(lse_hopfield_n_patterns(h), N_PAT);
    ck_assert_uint_eq(lse_hopfield_dim(h), DIM);
    ck_assert_double_eq(lse_hopfield_beta(h), 2.5);
    lse_graph *g = lse_hopfield_graph(h);
    ck_assert_ptr_nonnull(g);
    lse_node *m = lse_graph_find_node(g, "memories");
    lse_node *x = lse_graph_find_node(g, "state");
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(x);
    ck_assert(lse_node_is_clamped(m));
    ck_assert(lse_node_is_param(m));
    ck_assert(!lse_node_is_clamped(x));
    ck_assert_uint_eq(lse_node_rows(m), N_PAT);
    lse_term *a = lse_graph_find_term(g, "attract");
    lse_term *b = lse_graph_find_term(g, "bound");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_eq(lse_term_sim(a), lse_sim_dot);
    ck_assert_double_eq(lse_term_beta(a), 2.5);
    ck_assert_ptr_eq(lse_term_child(a).node, x);
    ck_assert_ptr_eq(lse_term_parent(a).node, m);
    ck_assert_ptr_eq(lse_term_custom(b), lse_custom_quadratic);
    ck_assert_ptr_eq(lse_term_view(b, 0).node, x);
    /* a retrieval with 3 queries rebuilds the graph with 3 state rows */
    gsl_matrix *q = gsl_matrix_alloc(3, DIM), *out = gsl_matrix_alloc(3, DIM);
    fill(q, 0.4127);
    lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 5, out, NULL,
                                        &model_err));
    g = lse_hopfield_graph(h);
    ck_assert_uint_eq(lse_node_rows(lse_graph_find_node(g, "state")), 3);
    ck_assert_uint_eq(lse_hopfield_softmax(h)->size1, 3);
    ck_assert_uint_eq(lse_hopfield_softmax(h)->size2, N_PAT);
    gsl_matrix_free(q);
    gsl_matrix_free(out);
    lse_hopfield_free(h);
}
END_TEST

/* Energy accessor against the formula written out. */
START_TEST(test_energy_formula)
{
    const double beta = 1.7;
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, beta, &h, NULL));
    gsl_matrix *x = gsl_matrix_alloc(4, DIM);
    fill(x, 0.4127);
    double e;
    lse_assert_ok(lse_hopfield_energy(h, x, &e, &model_err));
    double hand = 0.0;
    for (size_t i = 0; i < 4; i++) {
        double mx = -INFINITY, sum = 0.0, sq = 0.0;
        for (size_t k = 0; k < N_PAT; k++)
            mx = fmax(mx, beta * row_dot(x, i, patterns, k));
        for (size_t k = 0; k < N_PAT; k++)
            sum += exp(beta * row_dot(x, i, patterns, k) - mx);
        for (size_t j = 0; j < DIM; j++)
            sq += gsl_matrix_get(x, i, j) * gsl_matrix_get(x, i, j);
        hand += -(mx + log(sum)) / beta + 0.5 * sq;
    }
    ck_assert_double_eq_tol(e, hand, 1e-12);
    gsl_matrix_free(x);
    lse_hopfield_free(h);
}
END_TEST

/* Whole-graph gradient check, memories unclamped too, at a high-entropy
 * point (beta 1.7, states of norm ~1). */
START_TEST(test_gradient_check)
{
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, 1.7, &h, NULL));
    gsl_matrix *x = gsl_matrix_alloc(5, DIM);
    fill(x, 0.4127);
    double e;
    lse_assert_ok(lse_hopfield_energy(h, x, &e, &model_err));
    lse_graph *g = lse_hopfield_graph(h);
    lse_node_set_clamped(lse_graph_find_node(g, "memories"), 0);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-5, 1e-3, &res));
    ck_assert_uint_eq(res.n_checked, (5 + N_PAT) * DIM);
    ck_assert_msg(res.max_error < 1e-6, "%g at %s", res.max_error, res.where);
    gsl_matrix_free(x);
    lse_hopfield_free(h);
}
END_TEST

/* Seed equations (10) and (11) written out by hand equal minus the
 * library's gradients (beta = 1, as in the seed; the quadratic "bound"
 * term switched off because the seed's energy (9) has none, then switched
 * on again: it adds exactly xi). */
START_TEST(test_seed_equations_10_11)
{
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, 1.0, &h, NULL));
    const size_t n = 3;
    gsl_matrix *x = gsl_matrix_alloc(n, DIM);
    fill(x, 2.385);
    double e;
    lse_assert_ok(lse_hopfield_energy(h, x, &e, &model_err));
    lse_graph *g = lse_hopfield_graph(h);
    lse_node *mem = lse_graph_find_node(g, "memories");
    lse_node *st = lse_graph_find_node(g, "state");
    lse_node_set_clamped(mem, 0);
    lse_term_set_enabled(lse_graph_find_term(g, "bound"), 0);
    lse_assert_ok(lse_graph_gradient(g, &e));
    /* softmax_mu(x_i . m_mu) by hand */
    double a[3][N_PAT];
    for (size_t i = 0; i < n; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (size_t k = 0; k < N_PAT; k++)
            mx = fmax(mx, row_dot(x, i, patterns, k));
        for (size_t k = 0; k < N_PAT; k++) {
            a[i][k] = exp(row_dot(x, i, patterns, k) - mx);
            sum += a[i][k];
        }
        for (size_t k = 0; k < N_PAT; k++)
            a[i][k] /= sum;
    }
    double worst10 = 0.0, worst11 = 0.0;
    for (size_t i = 0; i < n; i++) /* eq (10) */
        for (size_t j = 0; j < DIM; j++) {
            double rhs = 0.0;
            for (size_t k = 0; k < N_PAT; k++)
                rhs += a[i][k] * gsl_matrix_get(patterns, k, j);
            worst10 = fmax(
                worst10, fabs(-gsl_matrix_get(lse_node_grad(st), i, j) - rhs));
        }
    for (size_t k = 0; k < N_PAT; k++) /* eq (11) */
        for (size_t j = 0; j < DIM; j++) {
            double rhs = 0.0;
            for (size_t i = 0; i < n; i++)
                rhs += a[i][k] * gsl_matrix_get(x, i, j);
            worst11 = fmax(
                worst11, fabs(-gsl_matrix_get(lse_node_grad(mem), k, j) - rhs));
        }
    ck_assert_double_lt(worst10, 1e-13);
    ck_assert_double_lt(worst11, 1e-13);
    /* with the bound: dE/dxi = xi - eq (10) */
    gsl_matrix *g10 = gsl_matrix_alloc(n, DIM);
    gsl_matrix_memcpy(g10, lse_node_grad(st));
    lse_term_set_enabled(lse_graph_find_term(g, "bound"), 1);
    lse_assert_ok(lse_graph_gradient(g, &e));
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < DIM; j++)
            worst = fmax(worst, fabs(gsl_matrix_get(lse_node_grad(st), i, j) -
                                     gsl_matrix_get(g10, i, j) -
                                     gsl_matrix_get(x, i, j)));
    ck_assert_double_lt(worst, 1e-14);
    gsl_matrix_free(g10);
    gsl_matrix_free(x);
    lse_hopfield_free(h);
}
END_TEST

/* Energy trace collected through the retrieval callback. */
typedef struct trace {
    double e[1024];
    size_t n;
} trace;

static int record_energy(const lse_solver *s, void *user)
{
    trace *t = user;
    if (t->n < 1024)
        t->e[t->n++] = lse_solver_energy(s);
    return 0;
}

typedef enum corruption { MASK, NOISE } corruption;

/* One query per pattern: MASK sets 16 of the 64 pixels (25%, chosen at
 * random) to 0; NOISE adds N(0, 0.05^2) to every pixel (noise norm ~0.4
 * against a pattern of norm 1). */
static gsl_matrix *corrupt(corruption kind, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *q = gsl_matrix_alloc(N_PAT, DIM);
    gsl_matrix_memcpy(q, patterns);
    for (size_t k = 0; k < N_PAT; k++) {
        if (kind == MASK) {
            size_t idx[DIM], pick[DIM / 4];
            for (size_t j = 0; j < DIM; j++)
                idx[j] = j;
            gsl_ran_choose(r, pick, DIM / 4, idx, DIM, sizeof(size_t));
            for (size_t j = 0; j < DIM / 4; j++)
                gsl_matrix_set(q, k, pick[j], 0.0);
        } else {
            for (size_t j = 0; j < DIM; j++)
                *gsl_matrix_ptr(q, k, j) += gsl_ran_gaussian(r, 0.05);
        }
    }
    gsl_rng_free(r);
    return q;
}

static void check_retrieval(lse_hopfield_method method, corruption kind)
{
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, BETA_RETRIEVE, &h, NULL));
    trace t = {.n = 0};
    lse_hopfield_set_callback(h, record_energy, &t);
    gsl_matrix *q = corrupt(kind, kind == MASK ? 7 : 11);
    gsl_matrix *out = gsl_matrix_alloc(N_PAT, DIM);
    /* the corrupted query is really different from its pattern */
    double dmin = INFINITY;
    for (size_t k = 0; k < N_PAT; k++) {
        double d = 0.0;
        for (size_t j = 0; j < DIM; j++)
            d = fmax(d, fabs(gsl_matrix_get(q, k, j) -
                             gsl_matrix_get(patterns, k, j)));
        dmin = fmin(dmin, d);
    }
    ck_assert_double_gt(dmin, 0.05);
    lse_hopfield_info info;
    lse_assert_ok(
        lse_hopfield_retrieve(h, q, method, 200, out, &info, &model_err));
    ck_assert_msg(info.converged, "%s: not converged after %zu iterations",
                  method == LSE_HOPFIELD_CCCP ? "cccp" : "gd", info.n_iter);
    ck_assert_uint_eq(info.n_increase, 0);
    ck_assert_double_le(info.max_increase, 1e-12);
    /* the energy sequence E_0 >= E_1 >= ... recorded each iteration */
    ck_assert_uint_eq(t.n, info.n_iter);
    ck_assert_uint_ge(t.n, 1);
    double prev = info.energy_initial;
    for (size_t i = 0; i < t.n; i++) {
        ck_assert_msg(t.e[i] <= prev + 1e-12,
                      "E rose at iteration %zu: %.17g "
                      "-> %.17g",
                      i + 1, prev, t.e[i]);
        prev = t.e[i];
    }
    ck_assert_double_lt(t.e[t.n - 1], info.energy_initial - 0.1);
    ck_assert_double_eq_tol(info.energy, t.e[t.n - 1], 1e-12);
    const gsl_matrix *a = lse_hopfield_softmax(h);
    double worst = 0.0;
    for (size_t k = 0; k < N_PAT; k++) {
        size_t best = 0;
        for (size_t m = 1; m < N_PAT; m++)
            if (gsl_matrix_get(a, k, m) > gsl_matrix_get(a, k, best))
                best = m;
        ck_assert_msg(best == k, "query %zu retrieved pattern %zu", k, best);
        for (size_t j = 0; j < DIM; j++)
            worst = fmax(worst, fabs(gsl_matrix_get(out, k, j) -
                                     gsl_matrix_get(patterns, k, j)));
    }
    ck_assert_msg(worst < 1e-6, "max |xi - m| = %g", worst);
    /* the stored pattern is a fixed point: the gradient vanishes there */
    ck_assert_double_lt(info.grad_norm, 1e-6);
    gsl_matrix_free(q);
    gsl_matrix_free(out);
    lse_hopfield_free(h);
}

START_TEST(test_retrieve_cccp_mask)
{
    check_retrieval(LSE_HOPFIELD_CCCP, MASK);
}
END_TEST
START_TEST(test_retrieve_cccp_noise)
{
    check_retrieval(LSE_HOPFIELD_CCCP, NOISE);
}
END_TEST
START_TEST(test_retrieve_gd_mask) { check_retrieval(LSE_HOPFIELD_GD, MASK); }
END_TEST
START_TEST(test_retrieve_gd_noise) { check_retrieval(LSE_HOPFIELD_GD, NOISE); }
END_TEST

/* One CCCP iteration is xi <- M' softmax(beta M xi), by hand. */
START_TEST(test_cccp_one_step)
{
    const double beta = 3.1;
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, beta, &h, NULL));
    gsl_matrix *q = gsl_matrix_alloc(2, DIM), *out = gsl_matrix_alloc(2, DIM);
    fill(q, 0.4127);
    lse_hopfield_info info;
    lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 1, out, &info,
                                        &model_err));
    ck_assert_uint_eq(info.n_iter, 1);
    ck_assert(!info.converged);
    for (size_t i = 0; i < 2; i++) {
        double a[N_PAT], mx = -INFINITY, sum = 0.0;
        for (size_t k = 0; k < N_PAT; k++)
            mx = fmax(mx, beta * row_dot(q, i, patterns, k));
        for (size_t k = 0; k < N_PAT; k++) {
            a[k] = exp(beta * row_dot(q, i, patterns, k) - mx);
            sum += a[k];
        }
        double worst = 0.0;
        for (size_t j = 0; j < DIM; j++) {
            double v = 0.0;
            for (size_t k = 0; k < N_PAT; k++)
                v += a[k] / sum * gsl_matrix_get(patterns, k, j);
            worst = fmax(worst, fabs(gsl_matrix_get(out, i, j) - v));
        }
        ck_assert_double_lt(worst, 1e-14);
    }
    gsl_matrix_free(q);
    gsl_matrix_free(out);
    lse_hopfield_free(h);
}
END_TEST

/* Gradient descent is not slower than CCCP (a step of size 1 is the CCCP
 * step; the solver's Barzilai-Borwein steps take longer ones where the
 * curvature allows). Random +-1 patterns (K = 10, d = 64), queries with 12
 * flipped signs, beta = 0.1 and 0.05 (the minimum is a metastable mixture
 * that CCCP approaches linearly in 9-22 iterations; the old step-doubling
 * policy zig-zagged for 650-1800), and the digits at beta = 100. Asserted:
 * both converge to the same state, GD within 3x CCCP's iterations, and the
 * GD energy never rises. */
START_TEST(test_gd_no_slower_than_cccp)
{
    enum { KR = 10, DR = 64, FLIPS = 12, REPS = 5 };
    const double betas[] = {0.1, 0.05};
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 20251125);
    gsl_matrix *pat = gsl_matrix_alloc(KR, DR), *q = gsl_matrix_alloc(1, DR);
    gsl_matrix *xc = gsl_matrix_alloc(1, DR), *xg = gsl_matrix_alloc(1, DR);
    for (size_t b = 0; b < 2; b++)
        for (size_t rep = 0; rep < REPS; rep++) {
            for (size_t k = 0; k < KR; k++)
                for (size_t j = 0; j < DR; j++)
                    gsl_matrix_set(pat, k, j,
                                   gsl_rng_uniform_int(rng, 2) ? 1.0 : -1.0);
            const size_t target = rep % KR;
            for (size_t j = 0; j < DR; j++)
                gsl_matrix_set(q, 0, j, gsl_matrix_get(pat, target, j));
            for (size_t f = 0; f < FLIPS;) {
                const size_t j = gsl_rng_uniform_int(rng, DR);
                if (gsl_matrix_get(q, 0, j) != gsl_matrix_get(pat, target, j))
                    continue;
                gsl_matrix_set(q, 0, j, -gsl_matrix_get(q, 0, j));
                f++;
            }
            lse_hopfield *h = NULL;
            lse_assert_ok(lse_hopfield_new(pat, betas[b], &h, NULL));
            lse_hopfield_info ic, ig;
            lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 5000,
                                                xc, &ic, &model_err));
            lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_GD, 5000, xg,
                                                &ig, &model_err));
            ck_assert(ic.converged && ig.converged);
            ck_assert_uint_ge(ic.n_iter, 5); /* a case with a slow tail */
            ck_assert_msg(ig.n_iter <= 3 * ic.n_iter,
                          "beta %g rep %zu: gd %zu iterations, cccp %zu",
                          betas[b], rep, ig.n_iter, ic.n_iter);
            ck_assert_uint_eq(ig.n_increase, 0);
            ck_assert_double_eq_tol(ig.energy, ic.energy, 1e-10);
            double d = 0.0;
            for (size_t j = 0; j < DR; j++)
                d = fmax(d, fabs(gsl_matrix_get(xg, 0, j) -
                                 gsl_matrix_get(xc, 0, j)));
            ck_assert_msg(d < 1e-5, "states differ by %g", d);
            lse_hopfield_free(h);
        }
    /* the digits: GD no slower than CCCP's (at most 2) iterations there */
    for (int kind = 0; kind < 2; kind++) {
        lse_hopfield *h = NULL;
        lse_assert_ok(lse_hopfield_new(patterns, BETA_RETRIEVE, &h, NULL));
        gsl_matrix *dq = corrupt(kind == 0 ? MASK : NOISE, 3);
        gsl_matrix *out = gsl_matrix_alloc(N_PAT, DIM);
        lse_hopfield_info ic, ig;
        lse_assert_ok(lse_hopfield_retrieve(h, dq, LSE_HOPFIELD_CCCP, 200, out,
                                            &ic, &model_err));
        lse_assert_ok(lse_hopfield_retrieve(h, dq, LSE_HOPFIELD_GD, 200, out,
                                            &ig, &model_err));
        ck_assert(ic.converged && ig.converged);
        ck_assert_msg(ig.n_iter <= 3 * ic.n_iter, "digits: gd %zu, cccp %zu",
                      ig.n_iter, ic.n_iter);
        gsl_matrix_free(dq);
        gsl_matrix_free(out);
        lse_hopfield_free(h);
    }
    gsl_rng_free(rng);
    gsl_matrix_free(pat);
    gsl_matrix_free(q);
    gsl_matrix_free(xc);
    gsl_matrix_free(xg);
}
END_TEST

/* At low beta the minimum is a metastable average, not a stored pattern:
 * retrieval is a property of beta, not of the code. */
START_TEST(test_low_beta_metastable)
{
    lse_hopfield *h = NULL;
    lse_assert_ok(lse_hopfield_new(patterns, 1.0, &h, NULL));
    gsl_matrix *q = corrupt(MASK, 7), *out = gsl_matrix_alloc(N_PAT, DIM);
    lse_hopfield_info info;
    lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 500, out,
                                        &info, &model_err));
    ck_assert(info.converged);
    ck_assert_uint_eq(info.n_increase, 0);
    for (size_t k = 0; k < N_PAT; k++) {
        double dist = 0.0;
        for (size_t j = 0; j < DIM; j++) {
            const double r =
                gsl_matrix_get(out, k, j) - gsl_matrix_get(patterns, k, j);
            dist += r * r;
        }
        ck_assert_double_gt(sqrt(dist), 0.5);
    }
    gsl_matrix_free(q);
    gsl_matrix_free(out);
    lse_hopfield_free(h);
}
END_TEST

static int stop_now(const lse_solver *s, void *user)
{
    (void)s;
    (void)user;
    return 1;
}

START_TEST(test_errors)
{
    lse_hopfield *h = NULL;
    lse_error err;
    lse_assert_status(lse_hopfield_new(NULL, 1.0, &h, &err), LSE_EFAULT);
    ck_assert_ptr_null(h);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_hopfield_new"));
    lse_assert_status(lse_hopfield_new(patterns, 1.0, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_hopfield_new(patterns, 0.0, &h, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "beta"));
    lse_assert_status(lse_hopfield_new(patterns, NAN, &h, &err), LSE_EDOM);
    lse_assert_status(lse_hopfield_new(patterns, -2.0, &h, NULL), LSE_EDOM);
    gsl_matrix *bad = gsl_matrix_alloc(2, 3);
    gsl_matrix_set_all(bad, 0.25);
    gsl_matrix_set(bad, 1, 2, NAN);
    lse_assert_status(lse_hopfield_new(bad, 1.0, &h, &err), LSE_ENONFINITE);
    ck_assert_ptr_null(h);

    lse_assert_ok(lse_hopfield_new(patterns, 1.0, &h, &err));
    gsl_matrix *q = gsl_matrix_alloc(2, DIM), *out = gsl_matrix_alloc(2, DIM);
    gsl_matrix *wrong = gsl_matrix_alloc(2, DIM - 1);
    gsl_matrix *out3 = gsl_matrix_alloc(3, DIM);
    fill(q, 0.4127);
    lse_assert_status(lse_hopfield_retrieve(h, NULL, LSE_HOPFIELD_CCCP, 5, out,
                                            NULL, &model_err),
                      LSE_EFAULT);
    lse_assert_status(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 5, NULL,
                                            NULL, &model_err),
                      LSE_EFAULT);
    lse_assert_status(lse_hopfield_retrieve(h, q, (lse_hopfield_method)7, 5,
                                            out, NULL, &model_err),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(model_err.message, "method"));
    lse_assert_status(lse_hopfield_retrieve(h, wrong, LSE_HOPFIELD_CCCP, 5, bad,
                                            NULL, &model_err),
                      LSE_EDIM);
    lse_assert_status(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_CCCP, 5, out3,
                                            NULL, &model_err),
                      LSE_EDIM);
    double e;
    lse_assert_status(lse_hopfield_energy(h, wrong, &e, &model_err), LSE_EDIM);
    lse_assert_status(lse_hopfield_energy(h, q, NULL, &model_err), LSE_EFAULT);
    gsl_matrix_set(q, 1, 1, INFINITY);
    lse_assert_status(lse_hopfield_energy(h, q, &e, &model_err),
                      LSE_ENONFINITE);
    lse_assert_status(
        lse_hopfield_retrieve(h, q, LSE_HOPFIELD_GD, 5, out, NULL, &model_err),
        LSE_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(model_err.message, "state"));
    fill(q, 0.4127);
    lse_assert_status(lse_hopfield_set_tol(h, -1.0, 0.0, &model_err), LSE_EDOM);
    lse_assert_status(lse_hopfield_set_tol(h, 0.0, NAN, &model_err), LSE_EDOM);
    lse_assert_status(lse_hopfield_set_tol(NULL, 0.0, 0.0, &model_err),
                      LSE_EFAULT);
    lse_assert_ok(lse_hopfield_set_tol(h, 0.0, 0.0, &model_err));
    /* tolerances 0: runs all iterations (or stops exactly); a callback can
     * stop it */
    lse_hopfield_info info;
    lse_hopfield_set_callback(h, stop_now, NULL);
    lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_GD, 50, out, &info,
                                        &model_err));
    ck_assert_uint_eq(info.n_iter, 1);
    ck_assert_int_eq(info.reason, LSE_STOP_CALLBACK);
    lse_hopfield_set_callback(h, NULL, NULL);
    lse_assert_ok(lse_hopfield_retrieve(h, q, LSE_HOPFIELD_GD, 0, out, &info,
                                        &model_err));
    ck_assert_uint_eq(info.n_iter, 0);
    ck_assert_int_eq(info.reason, LSE_STOP_MAX_ITER);
    ck_assert_double_eq(info.energy, info.energy_initial);
    /* NULL objects */
    ck_assert_ptr_null(lse_hopfield_graph(NULL));
    ck_assert_ptr_null(lse_hopfield_softmax(NULL));
    ck_assert_str_eq(lse_hopfield_errmsg(NULL), "");
    lse_assert_status(lse_hopfield_retrieve(NULL, q, LSE_HOPFIELD_GD, 5, out,
                                            NULL, &model_err),
                      LSE_EFAULT);
    lse_hopfield_free(NULL);
    gsl_matrix_free(bad);
    gsl_matrix_free(q);
    gsl_matrix_free(out);
    gsl_matrix_free(out3);
    gsl_matrix_free(wrong);
    lse_hopfield_free(h);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_hopfield_energy(NULL, NULL, &x, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_hopfield_energy"));
    ck_assert_int_eq(lse_hopfield_energy(NULL, NULL, &x, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_hopfield");
    TCase *tc = tcase_create("hopfield");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_patterns_distinct);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_graph_structure);
    tcase_add_test(tc, test_energy_formula);
    tcase_add_test(tc, test_gradient_check);
    tcase_add_test(tc, test_seed_equations_10_11);
    tcase_add_test(tc, test_retrieve_cccp_mask);
    tcase_add_test(tc, test_retrieve_cccp_noise);
    tcase_add_test(tc, test_retrieve_gd_mask);
    tcase_add_test(tc, test_retrieve_gd_noise);
    tcase_add_test(tc, test_cccp_one_step);
    tcase_add_test(tc, test_low_beta_metastable);
    tcase_add_test(tc, test_gd_no_slower_than_cccp);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
