#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Dynamic mixture attention (models/dma.c): a two-dimensional series of
 * 40 steps, K = 3 modes, parameters seeded N(0, 0.3^2) (chol kept away
 * from 0). */

#define NT 40
#define D 2
#define K 3

static lse_dma *make(lse_cov_type cov, unsigned long seed)
{
    lse_dma_config c = lse_dma_config_default();
    c.n_modes = K;
    c.dim = D;
    c.T = NT;
    c.cov = cov;
    lse_dma *m = NULL;
    lse_error err;
    lse_assert_ok(lse_dma_new(&c, &m, &err));
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(NT, D);
    for (size_t i = 0; i < NT; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(x, i, j, gsl_ran_gaussian(r, 1.0));
    lse_assert_ok(lse_dma_set_series(m, x, &err));
    gsl_matrix_free(x);
    for (int p = LSE_DMA_B; p <= LSE_DMA_A; p++) {
        gsl_matrix *v = lse_node_value(lse_dma_node(m, (lse_dma_param)p));
        for (size_t i = 0; i < v->size1; i++)
            for (size_t j = 0; j < v->size2; j++)
                gsl_matrix_set(v, i, j, 0.3 * gsl_ran_gaussian(r, 1.0));
    }
    gsl_matrix *ch = lse_node_value(lse_dma_node(m, LSE_DMA_CHOL));
    for (size_t i = 0; i < ch->size1; i++)
        for (size_t j = 0; j < ch->size2; j++)
            if (cov != LSE_COV_FULL || j % (D + 1) == 0)
                gsl_matrix_set(ch, i, j, 0.8 + 0.4 * gsl_rng_uniform(r));
    gsl_rng_free(r);
    return m;
}

/* E written out for diagonal noise: the negative log-likelihood of the
 * gated mixture of linear regressions. */
START_TEST(test_energy_is_nll)
{
    lse_dma *m = make(LSE_COV_DIAG, 3);
    lse_error err;
    double e;
    lse_assert_ok(lse_dma_energy(m, &e, &err));
    lse_graph *g = lse_dma_graph(m);
    const gsl_matrix *prev = lse_node_value(lse_graph_find_node(g, "prev"));
    const gsl_matrix *next = lse_node_value(lse_graph_find_node(g, "next"));
    const gsl_matrix *b = lse_node_value(lse_dma_node(m, LSE_DMA_B));
    const gsl_matrix *mm = lse_node_value(lse_dma_node(m, LSE_DMA_M));
    const gsl_matrix *A = lse_node_value(lse_dma_node(m, LSE_DMA_A));
    const gsl_matrix *ch = lse_node_value(lse_dma_node(m, LSE_DMA_CHOL));
    double nll = 0.0;
    for (size_t t = 0; t + 1 < NT; t++) {
        double gate[K], lik[K], gz = 0.0, lz = 0.0;
        for (size_t k = 0; k < K; k++) {
            gate[k] = 0.0;
            double logn = 0.0;
            for (size_t j = 0; j < D; j++) {
                gate[k] += gsl_matrix_get(prev, t, j) * gsl_matrix_get(mm, k, j);
                double mu = gsl_matrix_get(b, k, j);
                for (size_t i = 0; i < D; i++)
                    mu += gsl_matrix_get(A, k, j * D + i) *
                          gsl_matrix_get(prev, t, i);
                const double s = gsl_matrix_get(ch, k, j);
                const double z = (gsl_matrix_get(next, t, j) - mu) / s;
                logn += -0.5 * z * z - log(fabs(s)) - 0.5 * log(6.283185307179586);
            }
            lik[k] = logn;
            gz += exp(gate[k]);
        }
        for (size_t k = 0; k < K; k++)
            lz += exp(gate[k]) / gz * exp(lik[k]);
        nll -= log(lz);
    }
    ck_assert_msg(fabs(e - nll) <= 1e-10 * fabs(nll), "E %.15g, NLL %.15g", e,
                  nll);
    /* the responsibilities are the modes term's softmax: rows sum to 1 */
    const gsl_matrix *r = lse_term_softmax(lse_dma_modes(m));
    ck_assert_uint_eq(r->size1, NT - 1);
    ck_assert_uint_eq(r->size2, K);
    for (size_t t = 0; t + 1 < NT; t++) {
        double s = 0.0;
        for (size_t k = 0; k < K; k++)
            s += gsl_matrix_get(r, t, k);
        ck_assert_double_eq_tol(s, 1.0, 1e-12);
    }
    lse_dma_free(m);
}
END_TEST

/* Every gradient (series unclamped, every parameter) against central
 * differences, for each noise layout: step 1e-5, denominator floor 1e-3
 * (E is about 100, so with a step of 1e-6 round-off alone gives 2e-5 on
 * the smallest entries), relative error below 1e-6. */
START_TEST(test_gradient_fd)
{
    static const lse_cov_type covs[3] = {LSE_COV_SPHERICAL, LSE_COV_DIAG,
                                         LSE_COV_FULL};
    for (int i = 0; i < 3; i++) {
        lse_dma *m = make(covs[i], 4 + (unsigned long)i);
        lse_graph *g = lse_dma_graph(m);
        lse_node_set_clamped(lse_graph_find_node(g, "prev"), 0);
        lse_node_set_clamped(lse_graph_find_node(g, "next"), 0);
        lse_gradcheck res;
        lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-5, 1e-3, &res));
        ck_assert_msg(res.max_error < 1e-6, "cov %d: %.2e at %s", (int)covs[i],
                      res.max_error, res.where);
        ck_assert_uint_gt(res.n_checked, 2 * (NT - 1) * D + 4 * K * D);
        lse_dma_free(m);
    }
}
END_TEST

/* The fit never raises E and lowers it. */
START_TEST(test_fit_monotone)
{
    lse_dma *m = make(LSE_COV_FULL, 8);
    lse_error err;
    lse_dma_fit_info info;
    lse_assert_ok(lse_dma_fit(m, 300, &info, &err));
    ck_assert_uint_eq(info.n_increase, 0);
    ck_assert_double_lt(info.energy, info.energy_initial - 1.0);
    ck_assert_uint_gt(info.n_iter, 10);
    double e;
    lse_assert_ok(lse_dma_energy(m, &e, &err));
    ck_assert_double_eq_tol(e, info.energy, 1e-9 * fabs(e));
    lse_dma_free(m);
}
END_TEST

START_TEST(test_errors)
{
    lse_dma_config ok = lse_dma_config_default();
    ok.n_modes = K;
    ok.dim = D;
    ok.T = NT;
    lse_dma *m = (lse_dma *)&m;
    lse_error err;
    lse_assert_status(lse_dma_new(NULL, &m, &err), LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_dma_new"));
    lse_assert_status(lse_dma_new(&ok, NULL, NULL), LSE_EFAULT);
    lse_dma_config c = ok;
    c.n_modes = 0;
    lse_assert_status(lse_dma_new(&c, &m, &err), LSE_EDOM);
    ck_assert_ptr_null(m);
    c.n_modes = LSE_DMA_MAX_MODES + 1;
    lse_assert_status(lse_dma_new(&c, &m, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "n_modes 17"));
    c = ok;
    c.T = 1;
    lse_assert_status(lse_dma_new(&c, &m, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "T >= 2"));
    c = ok;
    c.dim = 0;
    lse_assert_status(lse_dma_new(&c, &m, &err), LSE_EDOM);
    c = ok;
    c.cov = LSE_COV_TIED;
    lse_assert_status(lse_dma_new(&c, &m, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "full, diag or spherical"));
    c = ok;
    c.dim = SIZE_MAX / 2;
    lse_assert_status(lse_dma_new(&c, &m, &err), LSE_ENOMEM);
    ck_assert_ptr_null(m);

    m = make(LSE_COV_SPHERICAL, 9);
    gsl_matrix *bad = gsl_matrix_calloc(NT - 1, D);
    lse_assert_status(lse_dma_set_series(m, bad, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "expected (T, d) = (40, 2)"));
    gsl_matrix_free(bad);
    bad = gsl_matrix_calloc(NT, D);
    gsl_matrix_set(bad, 5, 1, NAN);
    lse_assert_status(lse_dma_set_series(m, bad, &err), LSE_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(err.message, "series[5, 1]"));
    gsl_matrix_free(bad);
    lse_assert_status(lse_dma_set_series(NULL, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_dma_fit(NULL, 1, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_dma_energy(m, NULL, &err), LSE_EFAULT);
    ck_assert_ptr_null(lse_dma_node(m, (lse_dma_param)4));
    ck_assert_ptr_null(lse_dma_node(NULL, LSE_DMA_B));
    ck_assert_ptr_null(lse_dma_graph(NULL));
    ck_assert_ptr_null(lse_dma_modes(NULL));
    /* a non-finite parameter is reported by the energy and the fit */
    gsl_matrix_set(lse_node_value(lse_dma_node(m, LSE_DMA_M)), 0, 0, NAN);
    double e;
    lse_assert_status(lse_dma_energy(m, &e, &err), LSE_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_dma_energy"));
    lse_assert_status(lse_dma_fit(m, 5, NULL, &err), LSE_ENONFINITE);
    lse_dma_free(m);
    lse_dma_free(NULL);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_dma");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_energy_is_nll);
    tcase_add_test(tc, test_gradient_fd);
    tcase_add_test(tc, test_fit_monotone);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
