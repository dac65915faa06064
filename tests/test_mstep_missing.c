#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_gauss_missing (lib/mstep_missing.c) and the EM solver's group
 * M-step (lse_solver_set_group). */

enum { N = 60, D = 3, K = 2 };

static const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_TIED,
                                     LSE_COV_DIAG, LSE_COV_SPHERICAL};

/* Two correlated clusters; cells (i, j) with (3 i + 5 j) % 11 == 0 are
 * NaN when holes (never a whole row). */
static gsl_matrix *data(int holes)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    gsl_matrix *x = gsl_matrix_alloc(N, D);
    for (size_t i = 0; i < N; i++) {
        const double z = gsl_rng_uniform(r) - 0.5, c = (double)(i % 2) * 3.0;
        for (size_t j = 0; j < D; j++) {
            double v = c + z * (1.0 + (double)j) + 0.3 * gsl_rng_uniform(r);
            if (holes && (3 * i + 5 * j) % 11 == 0 && j > 0)
                v = NAN;
            gsl_matrix_set(x, i, j, v);
        }
    }
    gsl_rng_free(r);
    return x;
}

typedef struct fixture {
    lse_graph *g;
    lse_node *logw, *mu, *chol;
    lse_gauss_missing *gm;
} fixture;

/* Shared nodes at a fixed start (means rows 0 and 1 of the imputed data,
 * covariance 0.5 I + 0.1, equal weights) and the pattern terms. */
static void fixture_new(fixture *f, const gsl_matrix *x, lse_cov_type cov)
{
    lse_error err;
    f->g = lse_graph_new();
    ck_assert_ptr_nonnull(f->g);
    lse_assert_ok(lse_graph_add_node(f->g, "logw", K, 1, LSE_NODE_PARAM,
                                     &f->logw));
    lse_assert_ok(lse_graph_add_node(f->g, "mu", K, D, LSE_NODE_PARAM, &f->mu));
    lse_assert_ok(lse_graph_add_node(f->g, "chol", lse_cov_chol_rows(cov, K),
                                     lse_cov_chol_cols(cov, D),
                                     LSE_NODE_PARAM, &f->chol));
    gsl_matrix *mu = lse_node_value(f->mu);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(mu, k, j, 3.0 * (double)k + 0.2 * (double)j);
    gsl_matrix_set_zero(lse_node_value(f->logw));
    gsl_matrix *cv = gsl_matrix_alloc(D, D);
    gsl_matrix_set_all(cv, 0.1);
    for (size_t j = 0; j < D; j++)
        gsl_matrix_set(cv, j, j, 0.6);
    gsl_matrix *cl = lse_node_value(f->chol);
    if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
        gsl_linalg_cholesky_decomp1(cv);
        for (size_t b = 0; b < cl->size1; b++)
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    gsl_matrix_set(cl, b, i * D + j,
                                   j <= i ? gsl_matrix_get(cv, i, j) : 0.0);
    } else {
        gsl_matrix_set_all(cl, sqrt(0.6));
    }
    gsl_matrix_free(cv);
    lse_assert_ok(lse_gauss_missing_new(f->g, "p.", x, NULL, f->logw, f->mu,
                                        f->chol, cov, &f->gm, &err));
    lse_assert_ok(lse_gauss_missing_sync(f->gm, &err));
}

static void fixture_free(fixture *f)
{
    lse_gauss_missing_free(f->gm);
    lse_graph_free(f->g);
}

/* Covariance of component k from the shared factors (independently of
 * the library: L L' or the squared scales). */
static void cov_of(const fixture *f, lse_cov_type cov, size_t k, gsl_matrix *s)
{
    const gsl_matrix *cl = lse_node_value(f->chol);
    const size_t b = cov == LSE_COV_TIED ? 0 : k;
    gsl_matrix_set_zero(s);
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++) {
            double v = 0.0;
            if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
                for (size_t t = 0; t < D; t++)
                    v += gsl_matrix_get(cl, b, i * D + t) *
                         gsl_matrix_get(cl, b, j * D + t);
            } else if (i == j) {
                const double l =
                    gsl_matrix_get(cl, b, cov == LSE_COV_DIAG ? j : 0);
                v = l * l;
            }
            gsl_matrix_set(s, i, j, v);
        }
}

/* log N(x_O; mu_O, Sigma_OO) by a fresh Cholesky of the observed block. */
static double marginal_logpdf(const gsl_matrix *x, size_t i,
                              const gsl_matrix *mu, size_t k,
                              const gsl_matrix *s)
{
    size_t obs[D], no = 0;
    for (size_t j = 0; j < D; j++)
        if (!isnan(gsl_matrix_get(x, i, j)))
            obs[no++] = j;
    gsl_matrix *a = gsl_matrix_alloc(no, no);
    gsl_vector *r = gsl_vector_alloc(no);
    for (size_t p = 0; p < no; p++) {
        gsl_vector_set(r, p, gsl_matrix_get(x, i, obs[p]) -
                                 gsl_matrix_get(mu, k, obs[p]));
        for (size_t q = 0; q < no; q++)
            gsl_matrix_set(a, p, q, gsl_matrix_get(s, obs[p], obs[q]));
    }
    gsl_linalg_cholesky_decomp1(a);
    double logdet = 0.0;
    for (size_t p = 0; p < no; p++)
        logdet += 2.0 * log(gsl_matrix_get(a, p, p));
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, a, r);
    double q;
    gsl_blas_ddot(r, r, &q);
    gsl_matrix_free(a);
    gsl_vector_free(r);
    return -0.5 * (q + logdet + (double)no * log(2.0 * M_PI));
}

/* The energy of the pattern terms is the negative marginal
 * log-likelihood of the observed entries. */
START_TEST(test_energy_is_marginal_likelihood)
{
    gsl_matrix *x = data(1);
    gsl_matrix *s = gsl_matrix_alloc(D, D);
    for (size_t c = 0; c < 4; c++) {
        fixture f;
        fixture_new(&f, x, covs[c]);
        double e;
        lse_assert_ok(lse_graph_energy(f.g, &e));
        double ll = 0.0;
        for (size_t i = 0; i < N; i++) {
            double lk[K], mx = -INFINITY, sum = 0.0;
            for (size_t k = 0; k < K; k++) {
                cov_of(&f, covs[c], k, s);
                lk[k] = log(0.5) +
                        marginal_logpdf(x, i, lse_node_value(f.mu), k, s);
                mx = fmax(mx, lk[k]);
            }
            for (size_t k = 0; k < K; k++)
                sum += exp(lk[k] - mx);
            const double li = mx + log(sum);
            double got;
            ck_assert(lse_gauss_missing_row(f.gm, i, &got, NULL));
            ck_assert_double_eq_tol(got, li, 1e-12 * fmax(1.0, fabs(li)));
            ll += li;
        }
        ck_assert_double_eq_tol(e, -ll, 1e-11 * fabs(ll));
        fixture_free(&f);
    }
    gsl_matrix_free(s);
    gsl_matrix_free(x);
}
END_TEST

/* The expected statistics of one row of one component, by the precision
 * matrix P = Sigma^-1: E[x_M | x_O] = mu_M - P_MM^-1 P_MO (x_O - mu_O),
 * Cov[x_M | x_O] = P_MM^-1 (an independent formula). */
START_TEST(test_expected_statistics_defining_property)
{
    gsl_matrix *x = gsl_matrix_alloc(1, D);
    gsl_matrix_set(x, 0, 0, 0.7);
    gsl_matrix_set(x, 0, 1, NAN);
    gsl_matrix_set(x, 0, 2, -0.4);
    fixture f;
    fixture_new(&f, x, LSE_COV_FULL);
    gsl_matrix *resp = gsl_matrix_alloc(1, K);
    gsl_matrix_set(resp, 0, 0, 1.0);
    gsl_matrix_set(resp, 0, 1, 0.0);
    double acc[K + K * D + K * D * D];
    ck_assert_uint_eq(lse_gauss_missing_stats_size(f.gm),
                      sizeof acc / sizeof *acc);
    lse_error err;
    lse_assert_ok(lse_gauss_missing_stats(f.gm, resp, acc, &err));
    gsl_matrix *s = gsl_matrix_alloc(D, D), *p = gsl_matrix_alloc(D, D);
    cov_of(&f, LSE_COV_FULL, 0, s);
    gsl_matrix_memcpy(p, s);
    gsl_linalg_cholesky_decomp1(p);
    gsl_linalg_cholesky_invert(p);
    const gsl_matrix *mu = lse_node_value(f.mu);
    double y[D];
    y[0] = 0.7 - gsl_matrix_get(mu, 0, 0);
    y[2] = -0.4 - gsl_matrix_get(mu, 0, 2);
    const double pmm = gsl_matrix_get(p, 1, 1);
    y[1] = -(gsl_matrix_get(p, 1, 0) * y[0] + gsl_matrix_get(p, 1, 2) * y[2]) /
           pmm;
    ck_assert_double_eq(acc[0], 1.0);
    ck_assert_double_eq(acc[1], 0.0);
    for (size_t j = 0; j < D; j++)
        ck_assert_double_eq_tol(acc[K + j], y[j], 1e-13);
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++) {
            const double want = y[i] * y[j] + (i == 1 && j == 1 ? 1.0 / pmm : 0);
            ck_assert_double_eq_tol(acc[K + K * D + i * D + j], want, 1e-13);
        }
    /* component 1 has no responsibility: no statistics */
    for (size_t j = 0; j < D; j++)
        ck_assert_double_eq(acc[K + D + j], 0.0);
    gsl_matrix_free(s);
    gsl_matrix_free(p);
    gsl_matrix_free(resp);
    fixture_free(&f);
    gsl_matrix_free(x);
}
END_TEST

/* Without missing entries the expected-statistics M-step is the term's
 * own closed form (lse_term_mstep on the ordinary mixture term). */
START_TEST(test_complete_data_equals_term_mstep)
{
    gsl_matrix *x = data(0);
    for (size_t c = 0; c < 4; c++) {
        fixture f;
        fixture_new(&f, x, covs[c]);
        double e;
        lse_assert_ok(lse_graph_energy(f.g, &e));
        /* the ordinary term on the same values, in a graph of its own */
        lse_graph *g2 = lse_graph_new();
        lse_node *x2, *mu2, *lw2, *ch2;
        lse_term *t2;
        lse_assert_ok(lse_graph_add_node(g2, "x", N, D, LSE_NODE_CLAMPED, &x2));
        lse_assert_ok(lse_node_set_value(x2, x));
        lse_assert_ok(lse_graph_add_node(g2, "mu", K, D, LSE_NODE_PARAM, &mu2));
        lse_assert_ok(lse_graph_add_node(g2, "logw", K, 1, LSE_NODE_PARAM,
                                         &lw2));
        const gsl_matrix *cl = lse_node_value(f.chol);
        lse_assert_ok(lse_graph_add_node(g2, "chol", cl->size1, cl->size2,
                                         LSE_NODE_PARAM, &ch2));
        lse_assert_ok(lse_node_set_value(mu2, lse_node_value(f.mu)));
        lse_assert_ok(lse_node_set_value(lw2, lse_node_value(f.logw)));
        lse_assert_ok(lse_node_set_value(ch2, cl));
        const lse_gaussian_config cfg = {.cov = covs[c]};
        lse_node *params[2] = {lw2, ch2};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(x2);
        spec.parent = lse_view_all(mu2);
        spec.sim = lse_sim_gaussian;
        spec.config = &cfg;
        spec.param = params;
        lse_assert_ok(lse_graph_add_lse(g2, "mixture", &spec, &t2));
        double e2;
        lse_assert_ok(lse_graph_energy(g2, &e2));
        ck_assert_double_eq_tol(e, e2, 1e-12 * fabs(e2));
        lse_error err;
        lse_assert_ok(lse_term_mstep(t2, NULL, NULL, NULL, NULL, &err));
        double acc[K + K * D + K * D * D];
        lse_assert_ok(lse_gauss_missing_stats(f.gm, NULL, acc, &err));
        lse_assert_ok(lse_gauss_missing_solve(f.gm, acc, NULL, NULL, &err));
        const gsl_matrix *a[3] = {lse_node_value(f.mu), lse_node_value(f.logw),
                                  lse_node_value(f.chol)};
        const gsl_matrix *b[3] = {lse_node_value(mu2), lse_node_value(lw2),
                                  lse_node_value(ch2)};
        for (size_t m = 0; m < 3; m++)
            for (size_t i = 0; i < a[m]->size1; i++)
                for (size_t j = 0; j < a[m]->size2; j++)
                    ck_assert_double_eq_tol(gsl_matrix_get(a[m], i, j),
                                            gsl_matrix_get(b[m], i, j), 1e-11);
        lse_graph_free(g2);
        fixture_free(&f);
    }
    gsl_matrix_free(x);
}
END_TEST

typedef struct grp_user {
    lse_gauss_missing *gm;
    size_t n_stats, n_solve;
} grp_user;

static lse_status grp_stats(lse_graph *g, double *acc, void *user)
{
    (void)g;
    grp_user *u = user;
    u->n_stats++;
    return lse_gauss_missing_stats(u->gm, NULL, acc, NULL);
}

static lse_status grp_solve(lse_graph *g, const double *acc, void *user)
{
    (void)g;
    grp_user *u = user;
    u->n_solve++;
    return lse_gauss_missing_solve(u->gm, acc, NULL, NULL, NULL);
}

/* EM on lse_solver_em with the group M-step: the marginal likelihood never
 * falls, the solver touches no node of the group itself, and it converges
 * to a stationary point (a further step moves nothing). */
START_TEST(test_solver_group_em)
{
    gsl_matrix *x = data(1);
    for (size_t c = 0; c < 4; c++) {
        fixture f;
        fixture_new(&f, x, covs[c]);
        lse_solver *s = lse_solver_new(f.g, lse_solver_em);
        grp_user u = {.gm = f.gm};
        lse_mstep_group grp = {.n_stats = lse_gauss_missing_stats_size(f.gm),
                               .stats = grp_stats,
                               .solve = grp_solve,
                               .user = &u};
        grp.nodes = lse_gauss_missing_nodes(f.gm, &grp.n_nodes);
        ck_assert_uint_eq(grp.n_nodes, 3 + 2 * 3); /* 3 patterns */
        lse_assert_ok(lse_solver_set_group(s, &grp));
        lse_assert_ok(lse_solver_init(s));
        double prev = lse_solver_energy(s);
        size_t it = 0;
        for (; it < 500; it++) {
            lse_assert_ok(lse_solver_iterate(s));
            ck_assert(lse_solver_energy(s) <= prev + 1e-10 * fabs(prev));
            prev = lse_solver_energy(s);
            if (it > 0 && fabs(lse_solver_delta(s)) <= 1e-13 * fabs(prev))
                break;
        }
        ck_assert_uint_lt(it, 500);
        ck_assert_uint_eq(lse_solver_n_increase(s), 0);
        ck_assert_uint_eq(u.n_stats, it + 1);
        ck_assert_uint_eq(u.n_solve, it + 1);
        lse_assert_ok(lse_solver_finish(s));
        ck_assert_double_eq_tol(lse_solver_energy(s), prev, 1e-9 * fabs(prev));
        lse_solver_free(s);
        fixture_free(&f);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x = data(1);
    fixture f;
    fixture_new(&f, x, LSE_COV_FULL);
    lse_error err;
    lse_gauss_missing *gm = NULL;
    lse_assert_status(lse_gauss_missing_new(f.g, "q.", x, NULL, f.logw, f.chol,
                                            f.chol, LSE_COV_FULL, &gm, &err),
                      LSE_EDIM);
    ck_assert_ptr_null(gm);
    /* repeated names: the graph refuses */
    lse_assert_status(lse_gauss_missing_new(f.g, "p.", x, NULL, f.logw, f.mu,
                                            f.chol, LSE_COV_FULL, &gm, &err),
                      LSE_EEXIST);
    ck_assert_ptr_null(gm);
    gsl_matrix *bad = gsl_matrix_alloc(N + 1, K);
    double acc[K + K * D + K * D * D];
    lse_assert_status(lse_gauss_missing_stats(f.gm, bad, acc, &err), LSE_EDIM);
    gsl_matrix_free(bad);
    /* a row with nothing observed belongs to no pattern */
    gsl_matrix *y = gsl_matrix_alloc(2, D);
    gsl_matrix_set_all(y, NAN);
    gsl_matrix_set(y, 0, 1, 0.5);
    lse_graph *g2 = lse_graph_new();
    lse_node *l2, *m2, *c2;
    lse_assert_ok(lse_graph_add_node(g2, "logw", K, 1, LSE_NODE_PARAM, &l2));
    lse_assert_ok(lse_graph_add_node(g2, "mu", K, D, LSE_NODE_PARAM, &m2));
    lse_assert_ok(lse_graph_add_node(g2, "chol", K, D, LSE_NODE_PARAM, &c2));
    gsl_matrix_set_all(lse_node_value(c2), 1.0);
    lse_assert_ok(lse_gauss_missing_new(g2, NULL, y, NULL, l2, m2, c2,
                                        LSE_COV_DIAG, &gm, &err));
    lse_assert_ok(lse_gauss_missing_sync(gm, &err));
    double e, ll, r[K];
    lse_assert_ok(lse_graph_energy(g2, &e));
    ck_assert_int_eq(lse_gauss_missing_row(gm, 0, &ll, r), 1);
    ck_assert_double_eq_tol(r[0] + r[1], 1.0, 1e-15);
    ck_assert_double_eq_tol(e, -ll, 1e-15);
    ck_assert_int_eq(lse_gauss_missing_row(gm, 1, &ll, r), 0);
    ck_assert_int_eq(lse_gauss_missing_row(gm, 2, &ll, r), 0);
    lse_gauss_missing_free(gm);
    lse_graph_free(g2);
    gsl_matrix_free(y);
    /* a group needs the EM solver and both callbacks */
    lse_solver *gd = lse_solver_new(f.g, lse_solver_gd);
    lse_mstep_group grp = {.n_stats = 1, .stats = grp_stats,
                           .solve = grp_solve};
    lse_assert_status(lse_solver_set_group(gd, &grp), LSE_EINVAL);
    lse_solver *em = lse_solver_new(f.g, lse_solver_em);
    grp.solve = NULL;
    lse_assert_status(lse_solver_set_group(em, &grp), LSE_EFAULT);
    lse_assert_ok(lse_solver_set_group(em, NULL));
    lse_solver_free(gd);
    lse_solver_free(em);
    fixture_free(&f);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("mstep_missing");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_energy_is_marginal_likelihood);
    tcase_add_test(tc, test_expected_statistics_defining_property);
    tcase_add_test(tc, test_complete_data_equals_term_mstep);
    tcase_add_test(tc, test_solver_group_em);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
