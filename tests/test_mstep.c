#include <math.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_term_shape / lse_term_mstep / lse_term_mstep_rows / lse_term_scores
 * (lib/mstep.c), on the Gaussian mixture term of lse_gmm_graph_new. */

enum { N = 40, D = 2, K = 3 };

static gsl_matrix *data(gsl_rng *r)
{
    gsl_matrix *x = gsl_matrix_alloc(N, D);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(x, i, j,
                           (double)(i % K) * (1.0 + (double)j) +
                               gsl_rng_uniform(r));
    return x;
}

static gsl_matrix *random_resp(gsl_rng *r)
{
    gsl_matrix *resp = gsl_matrix_alloc(N, K);
    for (size_t i = 0; i < N; i++) {
        double s = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double u = 0.05 + gsl_rng_uniform(r);
            gsl_matrix_set(resp, i, k, u);
            s += u;
        }
        for (size_t k = 0; k < K; k++)
            *gsl_matrix_ptr(resp, i, k) /= s;
    }
    return resp;
}

static lse_graph *mixture(const gsl_matrix *x, lse_cov_type cov)
{
    lse_gmm *m = NULL;
    lse_graph *g = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(K, D, cov, &m, NULL));
    lse_assert_ok(lse_gmm_graph_new(m, x, &g, &err));
    lse_gmm_free(m);
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    return g;
}

/* Q(theta) = sum_i sum_k r_ik S_ik(theta) at the term's current values. */
static double q_of(lse_term *t, const gsl_matrix *x, const gsl_matrix *resp)
{
    const gsl_matrix *p[2] = {lse_node_value(lse_term_param(t, 0)),
                              lse_node_value(lse_term_param(t, 1))};
    gsl_matrix *s = gsl_matrix_alloc(N, K);
    lse_error err;
    lse_assert_ok(lse_term_scores(t, x, lse_node_value(lse_term_parent(t).node),
                                  p, s, &err));
    double q = 0.0;
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < K; k++)
            q += gsl_matrix_get(resp, i, k) * gsl_matrix_get(s, i, k);
    gsl_matrix_free(s);
    return q;
}

/* The M-step gives the weighted means, weights N_k / N and weighted
 * covariances, and Q has a zero gradient there (finite differences in every
 * mean, log-weight and free factor entry). */
START_TEST(test_defining_property)
{
    static const lse_cov_type all_cov[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                           LSE_COV_SPHERICAL, LSE_COV_TIED};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_matrix *x = data(r);
    for (size_t c = 0; c < 4; c++) {
        const lse_cov_type cov = all_cov[c];
        lse_graph *g = mixture(x, cov);
        lse_term *t = lse_graph_find_term(g, "mixture");
        ck_assert_ptr_nonnull(t);
        gsl_matrix *resp = random_resp(r);
        lse_mstep_opts mo = lse_mstep_opts_default();
        mo.reg_covar = 0.0;
        unsigned char empty[K];
        lse_mstep_report rep = {.empty = empty};
        lse_error err;
        lse_assert_ok(lse_term_mstep(t, resp, &mo, &rep, NULL, &err));
        ck_assert_uint_eq(rep.n_empty, 0);
        const gsl_matrix *mu = lse_node_value(lse_term_parent(t).node);
        const gsl_matrix *logw = lse_node_value(lse_term_param(t, 0));
        double lse = -INFINITY;
        for (size_t k = 0; k < K; k++)
            lse = fmax(lse, gsl_matrix_get(logw, k, 0));
        double z = 0.0;
        for (size_t k = 0; k < K; k++)
            z += exp(gsl_matrix_get(logw, k, 0) - lse);
        for (size_t k = 0; k < K; k++) {
            double nk = 0.0, m[D] = {0};
            for (size_t i = 0; i < N; i++) {
                nk += gsl_matrix_get(resp, i, k);
                for (size_t j = 0; j < D; j++)
                    m[j] +=
                        gsl_matrix_get(resp, i, k) * gsl_matrix_get(x, i, j);
            }
            ck_assert_double_eq_tol(exp(gsl_matrix_get(logw, k, 0) - lse) / z,
                                    nk / N, 1e-12);
            for (size_t j = 0; j < D; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(mu, k, j), m[j] / nk,
                                        1e-12);
            if (cov == LSE_COV_FULL) { /* Sigma_k = weighted covariance */
                gsl_matrix *sk = gsl_matrix_alloc(K * D, D);
                lse_assert_ok(lse_cov_from_chol(
                    cov, D, lse_node_value(lse_term_param(t, 1)), sk));
                for (size_t a = 0; a < D; a++)
                    for (size_t b = 0; b < D; b++) {
                        double v = 0.0;
                        for (size_t i = 0; i < N; i++)
                            v += gsl_matrix_get(resp, i, k) *
                                 (gsl_matrix_get(x, i, a) - m[a] / nk) *
                                 (gsl_matrix_get(x, i, b) - m[b] / nk);
                        ck_assert_double_eq_tol(
                            gsl_matrix_get(sk, k * D + a, b), v / nk, 1e-12);
                    }
                gsl_matrix_free(sk);
            }
        }
        /* zero gradient of Q at the M-step's solution */
        lse_node *nodes[3] = {lse_term_parent(t).node, lse_term_param(t, 0),
                              lse_term_param(t, 1)};
        const double q0 = q_of(t, x, resp);
        for (size_t p = 0; p < 3; p++) {
            gsl_matrix *v = lse_node_value(nodes[p]);
            for (size_t e = 0; e < v->size1 * v->size2; e++) {
                const size_t dd =
                    (cov == LSE_COV_FULL || cov == LSE_COV_TIED) ? D : 0;
                if (p == 2 && dd > 0 && (e % (D * D)) % D > (e % (D * D)) / D)
                    continue; /* upper triangle of L: not a parameter */
                double *pv = gsl_matrix_ptr(v, e / v->size2, e % v->size2);
                const double v0 = *pv, h = 1e-5 * fmax(1.0, fabs(v0));
                *pv = v0 + h;
                const double qp = q_of(t, x, resp);
                *pv = v0 - h;
                const double qm = q_of(t, x, resp);
                *pv = v0;
                const double gr = (qp - qm) / (2 * h);
                ck_assert_msg(fabs(gr) < 1e-5 * fmax(1.0, fabs(q0)),
                              "cov %zu node %zu entry %zu: dQ = %g", c, p, e,
                              gr);
            }
        }
        gsl_matrix_free(resp);
        lse_graph_free(g);
    }
    gsl_matrix_free(x);
    gsl_rng_free(r);
}
END_TEST

static void fill_from(size_t i0, gsl_matrix *out, void *user)
{
    const gsl_matrix *resp = user;
    for (size_t i = 0; i < out->size1; i++)
        for (size_t k = 0; k < out->size2; k++)
            gsl_matrix_set(out, i, k, gsl_matrix_get(resp, i0 + i, k));
}

/* mstep_rows gives the very bits of mstep; the shape; errors. */
START_TEST(test_rows_shape_errors)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_matrix *x = data(r);
    gsl_matrix *resp = random_resp(r);
    lse_graph *g1 = mixture(x, LSE_COV_FULL), *g2 = mixture(x, LSE_COV_FULL);
    lse_term *t1 = lse_graph_find_term(g1, "mixture");
    lse_term *t2 = lse_graph_find_term(g2, "mixture");
    lse_error err;
    lse_assert_ok(lse_term_mstep(t1, resp, NULL, NULL, NULL, &err));
    lse_assert_ok(
        lse_term_mstep_rows(t2, fill_from, resp, NULL, NULL, NULL, &err));
    for (size_t p = 0; p < 2; p++) {
        const gsl_matrix *a = lse_node_value(lse_term_param(t1, p));
        const gsl_matrix *b = lse_node_value(lse_term_param(t2, p));
        ck_assert(memcmp(a->data, b->data,
                         a->size1 * a->size2 * sizeof(double)) == 0);
    }
    lse_sim_shape sh;
    lse_assert_ok(lse_term_shape(t1, &sh));
    ck_assert_uint_eq(sh.n_child, N);
    ck_assert_uint_eq(sh.n_parent, K);
    ck_assert_uint_eq(sh.d_child, D);
    ck_assert_uint_eq(sh.n_param, 2);
    ck_assert_uint_eq(sh.param_cols[1], D * D);
    lse_assert_status(lse_term_shape(NULL, &sh), LSE_EFAULT);
    gsl_matrix *bad = gsl_matrix_alloc(N, K + 1);
    gsl_matrix_set_all(bad, 0.25);
    lse_assert_status(lse_term_mstep(t1, bad, NULL, NULL, NULL, &err),
                      LSE_EDIM);
    ck_assert(strstr(err.message, "lse_term_mstep: term 'mixture'") ==
              err.message);
    gsl_matrix *s = gsl_matrix_alloc(3, K + 1);
    const gsl_matrix *p[2] = {lse_node_value(lse_term_param(t1, 0)),
                              lse_node_value(lse_term_param(t1, 1))};
    gsl_matrix_const_view xv = gsl_matrix_const_submatrix(x, 0, 0, 3, D);
    lse_assert_status(lse_term_scores(t1, &xv.matrix,
                                      lse_node_value(lse_term_parent(t1).node),
                                      p, s, &err),
                      LSE_EDIM);
    /* scores of rows equal the term's similarity on them */
    gsl_matrix *s3 = gsl_matrix_alloc(3, K);
    double e;
    lse_assert_ok(lse_graph_energy(g1, &e));
    lse_assert_ok(lse_term_scores(
        t1, &xv.matrix, lse_node_value(lse_term_parent(t1).node), p, s3, &err));
    const gsl_matrix *sim = lse_term_similarity(t1);
    if (sim != NULL)
        for (size_t i = 0; i < 3; i++)
            for (size_t k = 0; k < K; k++)
                ck_assert_double_eq_tol(gsl_matrix_get(s3, i, k),
                                        gsl_matrix_get(sim, i, k), 1e-10);
    /* no closed form: a dot-product term */
    lse_graph *gd = lse_graph_new();
    lse_node *a = NULL, *b = NULL;
    lse_assert_ok(lse_graph_add_node(gd, "a", 4, 2, 0, &a));
    lse_assert_ok(lse_graph_add_node(gd, "b", 3, 2, LSE_NODE_PARAM, &b));
    lse_term_spec spec = lse_term_spec_default();
    spec.sim = lse_sim_dot;
    spec.child = lse_view_all(a);
    spec.parent = lse_view_all(b);
    lse_term *td = NULL;
    lse_assert_ok(lse_graph_add_lse(gd, "dot", &spec, &td));
    gsl_matrix *r4 = gsl_matrix_calloc(4, 3);
    lse_assert_status(lse_term_mstep(td, r4, NULL, NULL, NULL, &err),
                      LSE_ENOTSUP);
    gsl_matrix_free(r4);
    lse_graph_free(gd);
    gsl_matrix_free(s3);
    gsl_matrix_free(s);
    gsl_matrix_free(bad);
    lse_graph_free(g1);
    lse_graph_free(g2);
    gsl_matrix_free(resp);
    gsl_matrix_free(x);
    gsl_rng_free(r);
}
END_TEST

/* Parameters by name: index, bind, the term's node. */
START_TEST(test_params_by_name)
{
    ck_assert_uint_eq(lse_sim_param_index(lse_sim_gaussian, "logw"), 0);
    ck_assert_uint_eq(lse_sim_param_index(lse_sim_gaussian, "chol"), 1);
    ck_assert_uint_eq(lse_sim_param_index(lse_sim_gaussian, "W"), (size_t)-1);
    ck_assert_uint_eq(lse_sim_param_index(NULL, "W"), (size_t)-1);
    lse_graph *g = lse_graph_new();
    lse_node *x = NULL, *mu = NULL, *chol = NULL, *logw = NULL;
    lse_assert_ok(lse_graph_add_node(g, "x", N, D, 0, &x));
    lse_assert_ok(lse_graph_add_node(g, "mu", K, D, LSE_NODE_PARAM, &mu));
    lse_assert_ok(
        lse_graph_add_node(g, "chol", K, D * D, LSE_NODE_PARAM, &chol));
    lse_assert_ok(lse_graph_add_node(g, "logw", K, 1, LSE_NODE_PARAM, &logw));
    const char *names[2] = {"chol", "logw"};
    lse_node *nodes[2] = {chol, logw}, *bound[2];
    lse_error err;
    lse_assert_ok(
        lse_sim_params_bind(lse_sim_gaussian, names, nodes, 2, bound, &err));
    ck_assert_ptr_eq(bound[0], logw);
    ck_assert_ptr_eq(bound[1], chol);
    /* an optional parameter left out */
    lse_assert_ok(
        lse_sim_params_bind(lse_sim_gaussian, names, nodes, 1, bound, &err));
    ck_assert_ptr_null(bound[0]);
    ck_assert_ptr_eq(bound[1], chol);
    const char *bad[2] = {"chol", "W"};
    lse_assert_status(
        lse_sim_params_bind(lse_sim_gaussian, bad, nodes, 2, bound, &err),
        LSE_EINVAL);
    ck_assert_str_eq(err.message, "lse_sim_params_bind: similarity "
                                  "'gaussian': no parameter 'W' "
                                  "(parameters: logw, chol)");
    const char *twice[2] = {"chol", "chol"};
    lse_assert_status(
        lse_sim_params_bind(lse_sim_gaussian, twice, nodes, 2, bound, &err),
        LSE_EINVAL);
    ck_assert(strstr(err.message, "repeated parameter 'chol'") != NULL);
    /* a term made from the bound array finds its nodes by name */
    lse_assert_ok(
        lse_sim_params_bind(lse_sim_gaussian, names, nodes, 2, bound, &err));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_gaussian;
    spec.param = bound;
    lse_term *t = NULL;
    lse_assert_ok(lse_graph_add_lse(g, "mix", &spec, &t));
    ck_assert_ptr_eq(lse_term_param_named(t, "chol"), chol);
    ck_assert_ptr_eq(lse_term_param_named(t, "logw"), logw);
    ck_assert_ptr_null(lse_term_param_named(t, "W"));
    ck_assert_ptr_null(lse_term_param_named(NULL, "W"));
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("mstep");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_defining_property);
    tcase_add_test(tc, test_rows_shape_errors);
    tcase_add_test(tc, test_params_by_name);
    suite_add_tcase(s, tc);
    return s;
}
