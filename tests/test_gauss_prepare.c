/* lse_sim_gaussian's prepare skips a repeat on the same parameter values
 * (lib/sim/gauss_common.c prepare_same, full and tied covariances): a
 * change of any one value, made in place in the same matrices, must be
 * seen, and the scores must be those of a fresh workspace bit for bit.
 * And the quadratic E-step checks its own scores (sim-clean-private.h):
 * a term must still report the first NaN score. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"

typedef struct prep_case {
    lse_gaussian_config cfg;
    size_t n, K, d, rows[2], cols[2];
    gsl_matrix *x, *mu, *param[2]; /* param: logw (K, 1), chol */
    lse_sim_shape shape;
} prep_case;

/* x (n, d), means, weights and factors from sines; tiny: one factor's
 * diagonal entry scaled by 1e-3 (the whitened path instead of the
 * quadratic one). */
static void case_init(prep_case *c, lse_cov_type cov, size_t n, size_t K,
                      size_t d, int tiny)
{
    memset(c, 0, sizeof *c);
    c->cfg.cov = cov;
    c->n = n;
    c->K = K;
    c->d = d;
    c->x = gsl_matrix_alloc(n, d);
    c->mu = gsl_matrix_alloc(K, d);
    const size_t cr = cov == LSE_COV_TIED ? 1 : K;
    c->param[0] = gsl_matrix_alloc(K, 1);
    c->param[1] = gsl_matrix_alloc(cr, d * d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(c->x, i, j, 2.0 * sin(0.37 * (double)(i * d + j)));
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_set(c->param[0], k, 0, 0.2 * cos((double)k));
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(c->mu, k, j, sin(1.3 * (double)k + 0.7 * (double)j));
    }
    for (size_t f = 0; f < cr; f++)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                const double v = j < i ? 0.2 * sin((double)(f + i * d + j))
                                 : j == i ? 0.8 + 0.1 * cos((double)(f + i))
                                          : 5.0; /* ignored */
                gsl_matrix_set(c->param[1], f, i * d + j, v);
            }
    if (tiny)
        gsl_matrix_set(c->param[1], 0, (d - 1) * d + d - 1, 1e-3);
    c->rows[0] = K;
    c->cols[0] = 1;
    c->rows[1] = cr;
    c->cols[1] = d * d;
    c->shape = (lse_sim_shape){.n_child = n, .block = n, .n_parent = K,
                               .d_child = d, .d_parent = d, .n_param = 2,
                               .param_rows = c->rows, .param_cols = c->cols};
}

static void case_free(prep_case *c)
{
    gsl_matrix_free(c->x);
    gsl_matrix_free(c->mu);
    gsl_matrix_free(c->param[0]);
    gsl_matrix_free(c->param[1]);
}

/* prepare + eval of all rows with workspace w into s */
static void score(const prep_case *c, void *w, gsl_matrix *s)
{
    const lse_sim_args a = {.child = c->x, .parent = c->mu,
                            .param = (const gsl_matrix *const *)c->param,
                            .config = &c->cfg, .work = w};
    lse_assert_ok(lse_sim_gaussian->prepare(&a));
    lse_assert_ok(lse_sim_gaussian->eval(&a, s));
}

/* s from the kept workspace equals a fresh one's, bit for bit */
static void assert_fresh(const prep_case *c, void *kept, gsl_matrix *s,
                         gsl_matrix *r)
{
    score(c, kept, s);
    void *fresh = NULL;
    lse_assert_ok(lse_sim_gaussian->work_new(&c->shape, &c->cfg, &fresh));
    score(c, fresh, r);
    lse_sim_gaussian->work_free(fresh);
    ck_assert(memcmp(s->data, r->data, s->size1 * s->size2 * sizeof(double)) == 0);
}

START_TEST(test_prepare_sees_changes)
{
    const lse_cov_type covs[2] = {LSE_COV_FULL, LSE_COV_TIED};
    const size_t dims[3] = {3, 11, 20};
    for (int ci = 0; ci < 2; ci++)
        for (int di = 0; di < 3; di++)
            for (int tiny = 0; tiny < 2; tiny++) {
                prep_case c;
                const size_t d = dims[di];
                case_init(&c, covs[ci], 37, 5, d, tiny);
                void *w = NULL;
                lse_assert_ok(lse_sim_gaussian->work_new(&c.shape, &c.cfg, &w));
                gsl_matrix *s = gsl_matrix_alloc(c.n, c.K),
                           *r = gsl_matrix_alloc(c.n, c.K),
                           *s0 = gsl_matrix_alloc(c.n, c.K);
                assert_fresh(&c, w, s0, r);
                assert_fresh(&c, w, s, r); /* a repeat: the same scores */
                ck_assert(gsl_matrix_equal(s, s0));
                /* one value of each parameter, in place */
                double *v[3] = {gsl_matrix_ptr(c.param[0], c.K - 1, 0),
                                gsl_matrix_ptr(c.param[1], 0, (d - 1) * d),
                                gsl_matrix_ptr(c.mu, 2, d - 1)};
                for (int p = 0; p < 3; p++) {
                    const double old = *v[p];
                    *v[p] = old + 0.125;
                    assert_fresh(&c, w, s, r);
                    ck_assert_msg(!gsl_matrix_equal(s, s0),
                                  "cov %d d %zu: change %d not seen", ci, d, p);
                    *v[p] = old;
                    assert_fresh(&c, w, s, r);
                    ck_assert(gsl_matrix_equal(s, s0));
                }
                gsl_matrix_free(s);
                gsl_matrix_free(r);
                gsl_matrix_free(s0);
                lse_sim_gaussian->work_free(w);
                case_free(&c);
            }
}
END_TEST

/* A full-covariance Gaussian term whose data row `bad` is so large that
 * its monomials overflow: its scores are NaN (+INFINITY and -INFINITY
 * products summed), the other rows' finite. The evaluation must fail at
 * the check of the scores, naming row `bad` and component 0, whatever
 * the path and however many threads (blocks of 16 rows: the bad row in a
 * group of 8 of the AVX-512 kernel, or in its overlapped last group). */
static void assert_bad_score_reported(size_t n, size_t bad, size_t d, int nt)
{
    prep_case c;
    case_init(&c, LSE_COV_FULL, n, 6, d, 0);
    for (size_t j = 0; j < d; j++)
        gsl_matrix_set(c.x, bad, j, (j % 2 ? -1.0 : 1.0) * 1e200);
    lse_set_thread_min_work(0.0); /* the count on small data too */
    lse_set_num_threads(nt);
    lse_graph *g = lse_graph_new();
    lse_graph_set_block_rows(g, 16);
    lse_node *x, *mu, *lw, *ch;
    lse_assert_ok(lse_graph_add_node(g, "x", n, d, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "mu", c.K, d, LSE_NODE_PARAM, &mu));
    lse_assert_ok(lse_graph_add_node(g, "logw", c.K, 1, LSE_NODE_PARAM, &lw));
    lse_assert_ok(lse_graph_add_node(g, "chol", c.K, d * d, LSE_NODE_PARAM, &ch));
    lse_assert_ok(lse_node_set_value(x, c.x));
    lse_assert_ok(lse_node_set_value(mu, c.mu));
    lse_assert_ok(lse_node_set_value(lw, c.param[0]));
    lse_assert_ok(lse_node_set_value(ch, c.param[1]));
    lse_node *params[2] = {lw, ch};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &c.cfg;
    spec.param = params;
    spec.keep_matrices = 0;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, NULL));
    double e;
    lse_assert_status(lse_graph_energy(g, &e), LSE_ENONFINITE);
    char want[64];
    snprintf(want, sizeof want, "similarity[%zu,0] = NaN", bad);
    ck_assert_msg(strstr(lse_graph_errmsg(g), want) != NULL, "%s (want %s)",
                  lse_graph_errmsg(g), want);
    lse_graph_free(g);
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
    case_free(&c);
}

START_TEST(test_bad_scores_reported)
{
    const size_t rows[4] = {0, 21, 45, 47}; /* 45, 47: the overlapped group */
    for (int i = 0; i < 4; i++)
        for (int nt = 1; nt <= 2; nt++) {
            assert_bad_score_reported(48, rows[i], 5, nt);
            assert_bad_score_reported(48, rows[i], 16, nt);
        }
    assert_bad_score_reported(53, 52, 7, 2); /* a last block of 5 rows */
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gauss_prepare");
    TCase *tc = tcase_create("gauss_prepare");
    tcase_add_test(tc, test_prepare_sees_changes);
    tcase_add_test(tc, test_bad_scores_reported);
    suite_add_tcase(s, tc);
    return s;
}
