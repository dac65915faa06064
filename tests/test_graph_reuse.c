#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/*
 * lse_graph_set_reuse (lib/graph.c): an evaluation at the values of the
 * last successful lse_graph_energy only takes the M-step statistics from
 * the kept softmax. It must give the same bits as evaluating again, and
 * anything that changed since (a node value, row weights, a term switched
 * off and on) must be evaluated anew.
 */

#define N 600
#define K 3
#define D 2

static void blobs(gsl_matrix *x, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < x->size1; i++) {
        const size_t c = i % K;
        for (size_t j = 0; j < x->size2; j++)
            gsl_matrix_set(x, i, j,
                           1.5 * cos(1.7 * (double)c + 0.9 * (double)j) +
                               gsl_ran_gaussian(r, 0.8 + 0.2 * (double)c));
    }
    gsl_rng_free(r);
}

typedef struct mix {
    lse_graph *g;
    lse_node *x, *mu, *logw, *chol;
    lse_term *t;
} mix;

/* A mixture graph on x whose term keeps its softmax, block 128 (several
 * blocks and chunks), covariance type cov. */
static void mix_new(mix *m, const gsl_matrix *x, lse_cov_type cov, int reuse)
{
    m->g = lse_graph_new();
    ck_assert_ptr_nonnull(m->g);
    lse_graph_set_block_rows(m->g, 128);
    const size_t cc = cov == LSE_COV_FULL || cov == LSE_COV_TIED ? D * D
                      : cov == LSE_COV_SPHERICAL                ? 1
                                                                : D;
    const size_t cr = cov == LSE_COV_TIED ? 1 : K;
    lse_assert_ok(
        lse_graph_add_node(m->g, "x", N, D, LSE_NODE_CLAMPED, &m->x));
    lse_assert_ok(lse_graph_add_node(m->g, "mu", K, D, LSE_NODE_PARAM, &m->mu));
    lse_assert_ok(
        lse_graph_add_node(m->g, "logw", K, 1, LSE_NODE_PARAM, &m->logw));
    lse_assert_ok(
        lse_graph_add_node(m->g, "chol", cr, cc, LSE_NODE_PARAM, &m->chol));
    lse_assert_ok(lse_node_set_value(m->x, x));
    for (size_t c = 0; c < K; c++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(lse_node_value(m->mu), c, j,
                           gsl_matrix_get(x, 37 * c + 5, j) + 0.4127);
    for (size_t r = 0; r < cr; r++)
        for (size_t j = 0; j < (cc == D * D ? D : cc); j++)
            gsl_matrix_set(lse_node_value(m->chol), r, cc == D * D ? j * D + j : j,
                           1.3);
    const lse_gaussian_config cfg = {.cov = cov};
    lse_node *params[2] = {m->logw, m->chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(m->x);
    spec.parent = lse_view_all(m->mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &cfg;
    spec.param = params;
    spec.keep_matrices = 1;
    lse_assert_ok(lse_graph_add_lse(m->g, "mixture", &spec, &m->t));
    lse_graph_set_reuse(m->g, reuse);
}

static int same_bits(const gsl_matrix *a, const gsl_matrix *b)
{
    return a->size1 == b->size1 && a->size2 == b->size2 &&
           memcmp(a->data, b->data, a->size1 * a->size2 * sizeof(double)) ==
               0;
}

/* EM with an extra lse_graph_energy before every other iteration (as
 * SQUAREM evaluates a point and then steps from it): with and without
 * reuse, the same energies and parameters bit for bit. */
static void em_compare(lse_cov_type cov)
{
    gsl_matrix *x = gsl_matrix_alloc(N, D);
    blobs(x, 11);
    mix m[2];
    lse_solver *s[2];
    for (int r = 0; r < 2; r++) {
        mix_new(&m[r], x, cov, r);
        s[r] = lse_solver_new(m[r].g, lse_solver_em);
        ck_assert_ptr_nonnull(s[r]);
        lse_assert_ok(lse_solver_init(s[r]));
    }
    for (int it = 0; it < 20; it++)
        for (int r = 0; r < 2; r++) {
            if (it % 2 == 0) {
                double e;
                lse_assert_ok(lse_graph_energy(m[r].g, &e));
            }
            lse_assert_ok(lse_solver_iterate(s[r]));
        }
    for (int r = 0; r < 2; r++)
        lse_assert_ok(lse_solver_finish(s[r]));
    ck_assert(lse_solver_energy(s[0]) == lse_solver_energy(s[1]));
    ck_assert(same_bits(lse_node_value(m[0].mu), lse_node_value(m[1].mu)));
    ck_assert(
        same_bits(lse_node_value(m[0].logw), lse_node_value(m[1].logw)));
    ck_assert(
        same_bits(lse_node_value(m[0].chol), lse_node_value(m[1].chol)));
    /* EM moved the parameters: the comparison is not of two idle runs */
    ck_assert(fabs(gsl_matrix_get(lse_node_value(m[1].mu), 0, 0) -
                   (gsl_matrix_get(x, 5, 0) + 0.4127)) > 1e-3);
    for (int r = 0; r < 2; r++) {
        lse_solver_free(s[r]);
        lse_graph_free(m[r].g);
    }
    gsl_matrix_free(x);
}

START_TEST(test_em_same_bits)
{
    const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                  LSE_COV_SPHERICAL, LSE_COV_TIED};
    em_compare(covs[_i]);
}
END_TEST

/* The energy of a graph with reuse equals a fresh graph's at the same
 * values after each kind of change. */
static void check_fresh(mix *m, const gsl_matrix *x, const gsl_vector *w,
                        int enabled)
{
    double e;
    lse_assert_ok(lse_graph_energy(m->g, &e));
    mix f;
    mix_new(&f, x, LSE_COV_FULL, 0);
    lse_assert_ok(lse_node_set_value(f.mu, lse_node_value(m->mu)));
    lse_assert_ok(lse_node_set_value(f.logw, lse_node_value(m->logw)));
    lse_assert_ok(lse_node_set_value(f.chol, lse_node_value(m->chol)));
    if (w != NULL)
        lse_assert_ok(lse_term_set_row_weight(f.t, w));
    lse_term_set_enabled(f.t, enabled);
    double ef;
    lse_assert_ok(lse_graph_energy(f.g, &ef));
    ck_assert_msg(e == ef, "reuse %.17g, fresh %.17g", e, ef);
    lse_graph_free(f.g);
}

START_TEST(test_changes_invalidate)
{
    gsl_matrix *x = gsl_matrix_alloc(N, D);
    blobs(x, 5);
    mix m;
    mix_new(&m, x, LSE_COV_FULL, 1);
    double e0, e1;
    lse_assert_ok(lse_graph_energy(m.g, &e0));
    lse_assert_ok(lse_graph_energy(m.g, &e1)); /* reused */
    ck_assert(e0 == e1);
    /* a parameter */
    gsl_matrix_set(lse_node_value(m.mu), 1, 0,
                   gsl_matrix_get(lse_node_value(m.mu), 1, 0) + 0.5);
    check_fresh(&m, x, NULL, 1);
    /* the data */
    gsl_matrix_set(lse_node_value(m.x), 7, 1, 3.25);
    gsl_matrix_set(x, 7, 1, 3.25);
    check_fresh(&m, x, NULL, 1);
    /* row weights */
    gsl_vector *w = gsl_vector_alloc(N);
    for (size_t i = 0; i < N; i++)
        gsl_vector_set(w, i, 0.5 + (double)(i % 3));
    lse_assert_ok(lse_term_set_row_weight(m.t, w));
    check_fresh(&m, x, w, 1);
    /* the term switched off, then on again */
    lse_term_set_enabled(m.t, 0);
    check_fresh(&m, x, w, 0);
    lse_term_set_enabled(m.t, 1);
    check_fresh(&m, x, w, 1);
    /* reuse switched off and on keeps nothing */
    lse_graph_set_reuse(m.g, 0);
    check_fresh(&m, x, w, 1);
    lse_graph_set_reuse(m.g, 1);
    check_fresh(&m, x, w, 1);
    gsl_vector_free(w);
    lse_graph_free(m.g);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("graph_reuse");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_em_same_bits, 0, 4);
    tcase_add_test(tc, test_changes_invalidate);
    suite_add_tcase(s, tc);
    return s;
}
