#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_permutation.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "lse_simcomm.h"

/* Tests of models/slds.c: the energy is the negative log-likelihood
 * (computed here independently of lse_sim_lingauss), gradients, EM,
 * parameter recovery, sequences, Viterbi, latent states, error paths. */

#define MAXK 3
#define MAXD 2
#define MAXL 2

/* Parameters written out in the test (the reference the model must
 * reproduce). */
typedef struct truth {
    size_t K, d, L;
    double A[MAXK][MAXD][MAXD * MAXL]; /* A_k (d, dL) */
    double b[MAXK][MAXD];
    double S[MAXK][MAXD][MAXD]; /* Sigma_k */
    double w[MAXK];             /* mixture weights or p0 */
    double P[MAXK][MAXK];       /* transitions */
} truth;

static lse_slds *make_model(const truth *tr, int markov, lse_cov_type cov)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = tr->K;
    cfg.dim = tr->d;
    cfg.lags = tr->L;
    cfg.markov = markov;
    cfg.cov = cov;
    lse_slds *m = NULL;
    lse_error err;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    const size_t d = tr->d, dc = tr->d * tr->L;
    gsl_matrix *a = gsl_matrix_alloc(d, dc), *s = gsl_matrix_alloc(d, d);
    gsl_vector *b = gsl_vector_alloc(d), *w = gsl_vector_alloc(tr->K);
    gsl_matrix *p = gsl_matrix_alloc(tr->K, tr->K);
    for (size_t k = 0; k < tr->K; k++) {
        for (size_t i = 0; i < d; i++) {
            gsl_vector_set(b, i, tr->b[k][i]);
            for (size_t j = 0; j < dc; j++)
                gsl_matrix_set(a, i, j, tr->A[k][i][j]);
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(s, i, j, tr->S[k][i][j]);
        }
        lse_assert_ok(lse_slds_set_a(m, k, a, &err));
        lse_assert_ok(lse_slds_set_b(m, k, b, &err));
        if (cov != LSE_COV_TIED || k == 0)
            lse_assert_ok(lse_slds_set_cov(m, k, s, &err));
        gsl_vector_set(w, k, tr->w[k]);
        for (size_t j = 0; j < tr->K; j++)
            gsl_matrix_set(p, k, j, tr->P[k][j]);
    }
    if (markov) {
        lse_assert_ok(lse_slds_set_initial(m, w, &err));
        lse_assert_ok(lse_slds_set_transition(m, p, &err));
    } else {
        lse_assert_ok(lse_slds_set_weights(m, w, &err));
    }
    gsl_matrix_free(a);
    gsl_matrix_free(s);
    gsl_vector_free(b);
    gsl_vector_free(w);
    gsl_matrix_free(p);
    return m;
}

/* A high-entropy 3-mode, 2-d, 2-lag parameter set (L = 1 uses the first
 * d columns of A). */
static truth entropy_truth(size_t K, size_t d, size_t L)
{
    truth tr;
    memset(&tr, 0, sizeof tr);
    tr.K = K;
    tr.d = d;
    tr.L = L;
    for (size_t k = 0; k < K; k++) {
        for (size_t i = 0; i < d; i++) {
            tr.b[k][i] = 0.4127 * sin(1.3 * (double)(k + 1) + 0.7 * (double)i);
            for (size_t j = 0; j < d * L; j++)
                tr.A[k][i][j] = 0.3817 * cos(0.9 * (double)(k + 2) +
                                             1.1 * (double)i - 0.6 * (double)j);
        }
        /* Sigma_k = M M' + 0.2 I with a correlated M */
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double s = 0.0;
                for (size_t q = 0; q < d; q++)
                    s += (0.5 + 0.3 * sin((double)(k + i + 2 * q))) *
                         (0.5 + 0.3 * sin((double)(k + j + 2 * q)));
                tr.S[k][i][j] = s + (i == j ? 0.2 + 0.05 * (double)k : 0.0);
            }
        tr.w[k] = 0.2 + 0.1 * (double)k + 0.013 * (double)(k * k);
        for (size_t j = 0; j < K; j++)
            tr.P[k][j] = (j == k ? 2.5 : 0.7 + 0.17 * (double)j);
    }
    if (d == 1) /* the loop above gives a valid 1x1 covariance */
        for (size_t k = 0; k < K; k++)
            tr.S[k][0][0] += 0.1;
    return tr;
}

static gsl_matrix *random_series(size_t T, size_t d, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(T, d);
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, t, j, 3.0 * gsl_rng_uniform(r) - 1.5);
    gsl_rng_free(r);
    return x;
}

/* log N(y; A_k ctx + b_k, Sigma_k) from the truth, by an explicit
 * Cholesky; ctx = [x_{t-1}, ..., x_{t-L}]. */
static double log_dens(const truth *tr, size_t k, const gsl_matrix *x, size_t t)
{
    const size_t d = tr->d;
    gsl_matrix *l = gsl_matrix_alloc(d, d);
    gsl_vector *r = gsl_vector_alloc(d);
    for (size_t i = 0; i < d; i++) {
        double mu = tr->b[k][i];
        for (size_t lag = 1; lag <= tr->L; lag++)
            for (size_t j = 0; j < d; j++)
                mu += tr->A[k][i][(lag - 1) * d + j] *
                      gsl_matrix_get(x, t - lag, j);
        gsl_vector_set(r, i, gsl_matrix_get(x, t, i) - mu);
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(l, i, j, tr->S[k][i][j]);
    }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(l), 0);
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, l, r);
    double q = 0.0, ld = 0.0;
    for (size_t i = 0; i < d; i++) {
        q += gsl_vector_get(r, i) * gsl_vector_get(r, i);
        ld += log(gsl_matrix_get(l, i, i));
    }
    gsl_matrix_free(l);
    gsl_vector_free(r);
    return -0.5 * q - ld - 0.5 * (double)d * log(2.0 * M_PI);
}

static double wsum(const truth *tr)
{
    double s = 0.0;
    for (size_t k = 0; k < tr->K; k++)
        s += tr->w[k];
    return s;
}

/* sum_t log sum_k pi_k N(x_t; A_k ctx_t + b_k, Sigma_k) over rows
 * [t0, t1) of x (t0 >= L). */
static double mixture_loglik(const truth *tr, const gsl_matrix *x, size_t t0,
                             size_t t1)
{
    const double ws = wsum(tr);
    double ll = 0.0;
    for (size_t t = t0; t < t1; t++) {
        double v[MAXK];
        for (size_t k = 0; k < tr->K; k++)
            v[k] = log(tr->w[k] / ws) + log_dens(tr, k, x, t);
        ll += lse_logsumexp(v, tr->K, 1, 1.0);
    }
    return ll;
}

/* log of the sum over all K^n mode paths of rows [t0, t1) (brute force). */
static double markov_loglik_brute(const truth *tr, const gsl_matrix *x,
                                  size_t t0, size_t t1)
{
    const size_t n = t1 - t0, K = tr->K;
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total *= K;
    double *lp = malloc(total * sizeof *lp);
    const double ws = wsum(tr);
    for (size_t code = 0; code < total; code++) {
        size_t c = code, prev = 0;
        double s = 0.0;
        for (size_t i = 0; i < n; i++) {
            const size_t k = c % K;
            c /= K;
            if (i == 0) {
                s += log(tr->w[k] / ws);
            } else {
                double rs = 0.0;
                for (size_t j = 0; j < K; j++)
                    rs += tr->P[prev][j];
                s += log(tr->P[prev][k] / rs);
            }
            s += log_dens(tr, k, x, t0 + i);
            prev = k;
        }
        lp[code] = s;
    }
    const double ll = lse_logsumexp(lp, total, 1, 1.0);
    free(lp);
    return ll;
}

/* ------------------------------------------------------------------ */
/* Energy = negative log-likelihood                                    */

START_TEST(test_mixture_energy_is_nll)
{
    static const size_t lags[] = {1, 2};
    static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_DIAG};
    for (size_t c = 0; c < 2; c++) {
        const size_t L = lags[c];
        truth tr = entropy_truth(3, 2, L);
        if (covs[c] == LSE_COV_DIAG)
            for (size_t k = 0; k < 3; k++)
                tr.S[k][0][1] = tr.S[k][1][0] = 0.0;
        lse_slds *m = make_model(&tr, 0, covs[c]);
        gsl_matrix *x = random_series(40, 2, 7 + c);
        lse_error err;
        double ll;
        lse_assert_ok(lse_slds_score(m, x, NULL, &ll, &err));
        const double ref = mixture_loglik(&tr, x, L, 40);
        ck_assert_double_eq_tol(ll, ref, 1e-10 * fabs(ref));
        /* the same through the graph */
        lse_graph *g = NULL;
        lse_assert_ok(lse_slds_graph_new(m, x, NULL, &g, &err));
        double e;
        lse_assert_ok(lse_graph_energy(g, &e));
        ck_assert_double_eq_tol(e, -ref, 1e-10 * fabs(ref));
        ck_assert_ptr_nonnull(lse_graph_find_term(g, "dynamics"));
        ck_assert_ptr_nonnull(lse_graph_find_node(g, "logw"));
        /* L = 1 uses views of x; L = 2 stacks children and context */
        ck_assert_int_eq(lse_graph_find_node(g, "z") != NULL, L == 2);
        ck_assert_uint_eq(lse_node_rows(lse_graph_find_node(g, "x")),
                          L == 1 ? 40 : 38);
        lse_graph_free(g);
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
}
END_TEST

START_TEST(test_markov_energy_is_bruteforce)
{
    for (size_t L = 1; L <= 2; L++) {
        truth tr = entropy_truth(2, 2, L);
        lse_slds *m = make_model(&tr, 1, LSE_COV_FULL);
        gsl_matrix *x = random_series(6, 2, 11 + L);
        lse_error err;
        double ll;
        lse_assert_ok(lse_slds_score(m, x, NULL, &ll, &err));
        const double ref = markov_loglik_brute(&tr, x, L, 6);
        ck_assert_double_eq_tol(ll, ref, 1e-10 * fmax(1.0, fabs(ref)));
        lse_graph *g = NULL;
        lse_assert_ok(lse_slds_graph_new(m, x, NULL, &g, &err));
        ck_assert_ptr_nonnull(lse_graph_find_node(g, "init"));
        ck_assert_ptr_nonnull(lse_graph_find_node(g, "trans"));
        ck_assert_ptr_null(lse_graph_find_node(g, "logw"));
        lse_graph_free(g);
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
}
END_TEST

/* Two sequences score as the sum of their scores; boundary rows are not
 * steps. */
START_TEST(test_sequences_add)
{
    for (int markov = 0; markov <= 1; markov++) {
        truth tr = entropy_truth(2, 2, 1);
        lse_slds *m = make_model(&tr, markov, LSE_COV_FULL);
        gsl_matrix *x = random_series(13, 2, 21);
        size_t seq[13];
        for (size_t t = 0; t < 13; t++)
            seq[t] = t < 6 ? 4 : 9;
        gsl_matrix_view x1 = gsl_matrix_submatrix(x, 0, 0, 6, 2);
        gsl_matrix_view x2 = gsl_matrix_submatrix(x, 6, 0, 7, 2);
        lse_error err;
        double l12, l1, l2, lall;
        lse_assert_ok(lse_slds_score(m, x, seq, &l12, &err));
        lse_assert_ok(lse_slds_score(m, &x1.matrix, NULL, &l1, &err));
        lse_assert_ok(lse_slds_score(m, &x2.matrix, NULL, &l2, &err));
        lse_assert_ok(lse_slds_score(m, x, NULL, &lall, &err));
        ck_assert_double_eq_tol(l12, l1 + l2, 1e-10 * fabs(l12));
        ck_assert(fabs(lall - l12) > 1e-3); /* the boundary step matters */
        const double ref = markov ? markov_loglik_brute(&tr, x, 1, 6) +
                                        markov_loglik_brute(&tr, x, 7, 13)
                                  : mixture_loglik(&tr, x, 1, 6) +
                                        mixture_loglik(&tr, x, 7, 13);
        ck_assert_double_eq_tol(l12, ref, 1e-10 * fabs(ref));
        size_t rows[13], n;
        lse_assert_ok(lse_slds_steps(m, 13, seq, rows, &n, &err));
        ck_assert_uint_eq(n, 11);
        ck_assert_uint_eq(rows[0], 1);
        ck_assert_uint_eq(rows[4], 5);
        ck_assert_uint_eq(rows[5], 7);
        /* a one-row sequence has no step and is skipped */
        size_t seq3[13];
        for (size_t t = 0; t < 13; t++)
            seq3[t] = t < 6 ? 0 : (t == 6 ? 1 : 2);
        double l3, l2b;
        gsl_matrix_view x3 = gsl_matrix_submatrix(x, 7, 0, 6, 2);
        lse_assert_ok(lse_slds_score(m, x, seq3, &l3, &err));
        lse_assert_ok(lse_slds_score(m, &x3.matrix, NULL, &l2b, &err));
        ck_assert_double_eq_tol(l3, l1 + l2b, 1e-10 * fabs(l3));
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Gradients                                                           */

static void check_node(lse_graph *g, const char *name)
{
    lse_node *n = lse_graph_find_node(g, name);
    ck_assert_msg(n != NULL, "node %s", name);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, n, 1e-5, 1.0, &res));
    ck_assert_msg(res.max_error < 1e-6, "node %s: error %g at %s (%g vs %g)",
                  name, res.max_error, res.where, res.analytic, res.numeric);
    ck_assert_uint_gt(res.n_checked, 0);
}

START_TEST(test_graph_gradients)
{
    static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                        LSE_COV_SPHERICAL, LSE_COV_TIED};
    for (int markov = 0; markov <= 1; markov++)
        for (size_t c = 0; c < 4; c++)
            for (size_t L = 1; L <= 2; L++) {
                truth tr = entropy_truth(3, 2, L);
                for (size_t k = 0; k < 3; k++) {
                    if (covs[c] != LSE_COV_FULL && covs[c] != LSE_COV_TIED)
                        tr.S[k][0][1] = tr.S[k][1][0] = 0.0;
                    if (covs[c] == LSE_COV_SPHERICAL)
                        tr.S[k][1][1] = tr.S[k][0][0];
                }
                lse_slds *m = make_model(&tr, markov, covs[c]);
                gsl_matrix *x = random_series(12, 2, 31 + c);
                lse_graph *g = NULL;
                lse_error err;
                lse_assert_ok(lse_slds_graph_new(m, x, NULL, &g, &err));
                check_node(g, "b");
                check_node(g, "A");
                check_node(g, "chol");
                if (markov) {
                    check_node(g, "init");
                    check_node(g, "trans");
                } else {
                    check_node(g, "logw");
                }
                /* the series itself: x is child and context at once (views)
                 * for L = 1, children and lagged context for L = 2 */
                lse_node_set_clamped(lse_graph_find_node(g, "x"), 0);
                check_node(g, "x");
                if (L == 2) {
                    lse_node_set_clamped(lse_graph_find_node(g, "z"), 0);
                    check_node(g, "z");
                }
                lse_graph_free(g);
                gsl_matrix_free(x);
                lse_slds_free(m);
            }
}
END_TEST

START_TEST(test_latent_gradients)
{
    for (int markov = 0; markov <= 1; markov++) {
        truth tr = entropy_truth(2, 2, 1);
        lse_slds *m = make_model(&tr, markov, LSE_COV_FULL);
        lse_error err;
        lse_assert_ok(lse_slds_set_latent(m, 0.3, &err));
        gsl_matrix *x = random_series(12, 2, 41);
        lse_graph *g = NULL;
        lse_assert_ok(lse_slds_graph_new(m, x, NULL, &g, &err));
        lse_node *xs = lse_graph_find_node(g, "x");
        ck_assert_int_eq(lse_node_is_clamped(xs), 0);
        ck_assert_int_eq(lse_node_is_param(xs), 0);
        ck_assert_int_eq(lse_node_is_clamped(lse_graph_find_node(g, "y")), 1);
        ck_assert_ptr_nonnull(lse_graph_find_term(g, "observation"));
        /* move the states off the observations: a non-zero observation
         * gradient */
        gsl_matrix *v = lse_node_value(xs);
        for (size_t t = 0; t < v->size1; t++)
            for (size_t j = 0; j < 2; j++)
                *gsl_matrix_ptr(v, t, j) += 0.21 * sin(1.7 * (double)t + j);
        check_node(g, "x");
        check_node(g, "A");
        lse_graph_free(g);
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
}
END_TEST

/* The seed's SLDS gradients, written out here with our sign (dE/dv; the
 * seed writes -dE/dv and flips the sign of both state gradients):
 *   dE/dx_{t+1} += sum_k a_tk Sigma_k^-1 r_tk          (x_{t+1} as child)
 *   dE/dx_t     -= sum_k a_tk A_k' Sigma_k^-1 r_tk     (x_t as context)
 *   dE/dA_k      = -sum_t a_tk Sigma_k^-1 r_tk x_t'
 *   dE/db_k      = -sum_t a_tk Sigma_k^-1 r_tk
 * with r_tk = x_{t+1} - A_k x_t - b_k and a = softmax_k(sim). */
START_TEST(test_seed_gradients)
{
    const size_t K = 2, d = 2, T = 9;
    truth tr = entropy_truth(K, d, 1);
    lse_slds *m = make_model(&tr, 0, LSE_COV_FULL);
    gsl_matrix *x = random_series(T, d, 51);
    lse_graph *g = NULL;
    lse_error err;
    lse_assert_ok(lse_slds_graph_new(m, x, NULL, &g, &err));
    lse_node *xn = lse_graph_find_node(g, "x");
    lse_node_set_clamped(xn, 0);
    double e;
    lse_assert_ok(lse_graph_gradient(g, &e));

    double gx[9][2] = {{0}}, gA[2][2][2] = {{{0}}}, gb[2][2] = {{0}};
    const double ws = wsum(&tr);
    for (size_t t = 0; t + 1 < T; t++) {
        double s[2], r[2][2], pr[2][2];
        for (size_t k = 0; k < K; k++) {
            s[k] = log(tr.w[k] / ws) + log_dens(&tr, k, x, t + 1);
            for (size_t i = 0; i < d; i++) {
                double mu = tr.b[k][i];
                for (size_t j = 0; j < d; j++)
                    mu += tr.A[k][i][j] * gsl_matrix_get(x, t, j);
                r[k][i] = gsl_matrix_get(x, t + 1, i) - mu;
            }
            /* Sigma^-1 r for a 2x2 matrix */
            const double a = tr.S[k][0][0], bb = tr.S[k][0][1],
                         c = tr.S[k][1][1], det = a * c - bb * bb;
            pr[k][0] = (c * r[k][0] - bb * r[k][1]) / det;
            pr[k][1] = (-bb * r[k][0] + a * r[k][1]) / det;
        }
        const double z = lse_logsumexp(s, K, 1, 1.0);
        for (size_t k = 0; k < K; k++) {
            const double al = exp(s[k] - z);
            for (size_t i = 0; i < d; i++) {
                gx[t + 1][i] += al * pr[k][i];
                gb[k][i] -= al * pr[k][i];
                for (size_t j = 0; j < d; j++) {
                    gx[t][j] -= al * tr.A[k][i][j] * pr[k][i];
                    gA[k][i][j] -= al * pr[k][i] * gsl_matrix_get(x, t, j);
                }
            }
        }
    }
    const gsl_matrix *Gx = lse_node_grad(xn);
    const gsl_matrix *GA = lse_node_grad(lse_graph_find_node(g, "A"));
    const gsl_matrix *Gb = lse_node_grad(lse_graph_find_node(g, "b"));
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < d; i++)
            ck_assert_double_eq_tol(gsl_matrix_get(Gx, t, i), gx[t][i], 1e-10);
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < d; i++) {
            ck_assert_double_eq_tol(gsl_matrix_get(Gb, k, i), gb[k][i], 1e-10);
            for (size_t j = 0; j < d; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(GA, k, i * d + j),
                                        gA[k][i][j], 1e-10);
        }
    lse_graph_free(g);
    gsl_matrix_free(x);
    lse_slds_free(m);
}
END_TEST

/* ------------------------------------------------------------------ */
/* EM and parameter recovery                                           */

static truth mixture_truth(void)
{
    truth tr;
    memset(&tr, 0, sizeof tr);
    tr.K = 2;
    tr.d = 2;
    tr.L = 1;
    const double A[2][2][2] = {{{0.6, 0.2}, {-0.1, 0.5}},
                               {{-0.3, 0.1}, {0.2, 0.4}}};
    const double b[2][2] = {{1.0, -0.5}, {-1.0, 1.0}};
    const double S[2][2][2] = {{{0.05, 0.01}, {0.01, 0.04}},
                               {{0.08, -0.02}, {-0.02, 0.06}}};
    memcpy(tr.A[0], A[0], sizeof A[0]);
    memcpy(tr.A[1], A[1], sizeof A[1]);
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 2; i++) {
            tr.b[k][i] = b[k][i];
            for (size_t j = 0; j < 2; j++) {
                tr.A[k][i][j] = A[k][i][j];
                tr.S[k][i][j] = S[k][i][j];
            }
        }
    tr.w[0] = 0.6;
    tr.w[1] = 0.4;
    return tr;
}

static truth markov_truth(void)
{
    truth tr;
    memset(&tr, 0, sizeof tr);
    tr.K = 3;
    tr.d = 2;
    tr.L = 1;
    const double A[3][2][2] = {{{0.6, 0.2}, {-0.1, 0.5}},
                               {{-0.3, 0.1}, {0.2, 0.4}},
                               {{0.8, 0.0}, {0.1, 0.7}}};
    const double b[3][2] = {{1.0, -0.5}, {-1.0, 1.0}, {0.0, 2.0}};
    const double S[3][2][2] = {{{0.05, 0.01}, {0.01, 0.04}},
                               {{0.08, -0.02}, {-0.02, 0.06}},
                               {{0.03, 0.0}, {0.0, 0.05}}};
    const double P[3][3] = {
        {0.95, 0.03, 0.02}, {0.04, 0.90, 0.06}, {0.05, 0.05, 0.90}};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < 2; i++) {
            tr.b[k][i] = b[k][i];
            for (size_t j = 0; j < 2; j++) {
                tr.A[k][i][j] = A[k][i][j];
                tr.S[k][i][j] = S[k][i][j];
            }
        }
        for (size_t j = 0; j < 3; j++)
            tr.P[k][j] = P[k][j];
        tr.w[k] = 1.0 / 3.0;
    }
    return tr;
}

/* perm[k] = fitted mode matching true mode k (closest offsets, all
 * permutations of K <= 3). */
static void match_modes(const truth *tr, const lse_slds *m, size_t *perm)
{
    const size_t K = tr->K;
    gsl_vector *b = gsl_vector_alloc(tr->d);
    double cost[MAXK][MAXK];
    for (size_t k = 0; k < K; k++)
        for (size_t f = 0; f < K; f++) {
            lse_assert_ok(lse_slds_get_b(m, f, b));
            double c = 0.0;
            for (size_t i = 0; i < tr->d; i++)
                c += pow(gsl_vector_get(b, i) - tr->b[k][i], 2);
            cost[k][f] = c;
        }
    gsl_vector_free(b);
    static const size_t perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                       {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    double best = INFINITY;
    for (size_t p = 0; p < 6; p++) {
        int ok = 1;
        double c = 0.0;
        for (size_t k = 0; k < K; k++) {
            if (perms[p][k] >= K)
                ok = 0;
            else
                c += cost[k][perms[p][k]];
        }
        if (ok && c < best) {
            best = c;
            for (size_t k = 0; k < K; k++)
                perm[k] = perms[p][k];
        }
    }
}

typedef struct trace {
    double ll[600];
    size_t n;
    int bad; /* the sequence decreased */
} trace;

static int record(size_t run, size_t iter, double ll, double delta, void *user)
{
    (void)run;
    (void)delta;
    trace *tr = user;
    if (iter == 1)
        tr->n = 0;
    if (tr->n > 0 && ll < tr->ll[tr->n - 1] - 1e-9 * fabs(ll))
        tr->bad = 1;
    if (tr->n < 600)
        tr->ll[tr->n++] = ll;
    return 0;
}

static void check_recovery(const truth *tr, const lse_slds *m, double tol_a,
                           double tol_b, double tol_s)
{
    size_t perm[MAXK];
    match_modes(tr, m, perm);
    const size_t d = tr->d;
    gsl_matrix *a = gsl_matrix_alloc(d, d), *s = gsl_matrix_alloc(d, d);
    gsl_vector *b = gsl_vector_alloc(d);
    for (size_t k = 0; k < tr->K; k++) {
        lse_assert_ok(lse_slds_get_a(m, perm[k], a));
        lse_assert_ok(lse_slds_get_b(m, perm[k], b));
        lse_assert_ok(lse_slds_get_cov(m, perm[k], s));
        for (size_t i = 0; i < d; i++) {
            ck_assert_double_eq_tol(gsl_vector_get(b, i), tr->b[k][i], tol_b);
            for (size_t j = 0; j < d; j++) {
                ck_assert_double_eq_tol(gsl_matrix_get(a, i, j), tr->A[k][i][j],
                                        tol_a);
                ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), tr->S[k][i][j],
                                        tol_s);
            }
        }
    }
    gsl_matrix_free(a);
    gsl_matrix_free(s);
    gsl_vector_free(b);
}

START_TEST(test_mixture_recovery)
{
    truth tr = mixture_truth();
    lse_slds *gen = make_model(&tr, 0, LSE_COV_FULL);
    gsl_matrix *x = gsl_matrix_alloc(5000, 2);
    size_t *modes = malloc(5000 * sizeof *modes);
    lse_error err;
    lse_assert_ok(lse_slds_simulate(gen, 5000, 12345, x, modes, &err));
    size_t count0 = 0;
    for (size_t t = 0; t < 5000; t++)
        count0 += modes[t] == 0;
    ck_assert(fabs((double)count0 / 5000.0 - 0.6) < 0.03);

    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 2;
    cfg.dim = 2;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    lse_slds_opts o = lse_slds_opts_default();
    o.seed = 3;
    o.n_init = 2;
    trace rec = {.n = 0};
    o.progress = record;
    o.user = &rec;
    lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
    ck_assert_uint_eq(lse_slds_n_increase(m), 0);
    ck_assert_int_eq(rec.bad, 0);
    ck_assert_int_eq(lse_slds_converged(m), 1);
    /* tolerances: 0.05 on A entries, 0.05 on b, 0.01 on Sigma entries,
     * 0.03 on the weights */
    check_recovery(&tr, m, 0.05, 0.05, 0.01);
    size_t perm[MAXK];
    match_modes(&tr, m, perm);
    gsl_vector *w = gsl_vector_alloc(2);
    lse_assert_ok(lse_slds_get_weights(m, w));
    ck_assert_double_eq_tol(gsl_vector_get(w, perm[0]), 0.6, 0.03);
    /* the fitted log-likelihood is the score of the data, and beats the
     * truth's only by estimation noise */
    double ll, ll_true;
    lse_assert_ok(lse_slds_score(m, x, NULL, &ll, &err));
    lse_assert_ok(lse_slds_score(gen, x, NULL, &ll_true, &err));
    ck_assert_double_eq_tol(ll, lse_slds_loglik(m), 1e-8 * fabs(ll));
    ck_assert(ll >= ll_true - 1e-6);
    ck_assert(ll - ll_true < 30.0);
    ck_assert_uint_eq(lse_slds_n_fit_steps(m), 4999);
    ck_assert_double_eq_tol(lse_slds_loglik_per_step(m), ll / 4999.0, 1e-12);
    /* 2*4 A + 2*2 b + 2*3 Sigma + 1 weight = 19 */
    ck_assert_uint_eq(lse_slds_n_params(m), 19);
    ck_assert_double_eq_tol(lse_slds_bic(m), -2 * ll + 19 * log(4999.0), 1e-6);
    ck_assert_double_eq_tol(lse_slds_aic(m), -2 * ll + 38, 1e-6);
    /* most modes are recovered */
    size_t *path = malloc(4999 * sizeof *path);
    lse_assert_ok(lse_slds_most_likely(m, x, NULL, path, &err));
    size_t hit = 0;
    for (size_t t = 1; t < 5000; t++)
        hit += path[t - 1] == perm[modes[t]];
    ck_assert(hit > 0.95 * 4999);
    free(path);
    gsl_vector_free(w);
    free(modes);
    gsl_matrix_free(x);
    lse_slds_free(m);
    lse_slds_free(gen);
}
END_TEST

START_TEST(test_markov_recovery)
{
    truth tr = markov_truth();
    lse_slds *gen = make_model(&tr, 1, LSE_COV_FULL);
    gsl_matrix *x = gsl_matrix_alloc(5000, 2);
    size_t *modes = malloc(5000 * sizeof *modes);
    lse_error err;
    lse_assert_ok(lse_slds_simulate(gen, 5000, 777, x, modes, &err));

    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 3;
    cfg.dim = 2;
    cfg.markov = 1;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    lse_slds_opts o = lse_slds_opts_default();
    o.seed = 5;
    o.n_init = 3;
    trace rec = {.n = 0};
    o.progress = record;
    o.user = &rec;
    lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
    ck_assert_uint_eq(lse_slds_n_increase(m), 0);
    ck_assert_int_eq(rec.bad, 0);
    check_recovery(&tr, m, 0.05, 0.05, 0.01);
    size_t perm[MAXK];
    match_modes(&tr, m, perm);
    gsl_matrix *p = gsl_matrix_alloc(3, 3);
    lse_assert_ok(lse_slds_get_transition(m, p));
    for (size_t j = 0; j < 3; j++)
        for (size_t k = 0; k < 3; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(p, perm[j], perm[k]),
                                    tr.P[j][k], 0.03);
    /* Viterbi recovers the simulated modes */
    size_t *path = malloc(4999 * sizeof *path);
    lse_assert_ok(lse_slds_viterbi(m, x, NULL, path, &err));
    size_t hit = 0;
    for (size_t t = 1; t < 5000; t++)
        hit += path[t - 1] == perm[modes[t]];
    ck_assert(hit > 0.97 * 4999);
    /* smoothed posteriors: rows sum to 1 */
    gsl_matrix *post = gsl_matrix_alloc(4999, 3);
    lse_assert_ok(lse_slds_posteriors(m, x, NULL, post, &err));
    for (size_t t = 0; t < 4999; t += 97)
        ck_assert_double_eq_tol(gsl_matrix_get(post, t, 0) +
                                    gsl_matrix_get(post, t, 1) +
                                    gsl_matrix_get(post, t, 2),
                                1.0, 1e-9);
    /* 3*4 + 3*2 + 3*3 + 2 + 6 = 35 */
    ck_assert_uint_eq(lse_slds_n_params(m), 35);
    gsl_matrix_free(post);
    free(path);
    gsl_matrix_free(p);
    free(modes);
    gsl_matrix_free(x);
    lse_slds_free(m);
    lse_slds_free(gen);
}
END_TEST

/* EM never increases the energy, for every initialization, covariance
 * type and both versions, on small data with lags and sequences. */
START_TEST(test_em_monotone)
{
    static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                        LSE_COV_SPHERICAL, LSE_COV_TIED};
    static const lse_slds_init inits[] = {LSE_SLDS_INIT_KMEANSPP,
                                          LSE_SLDS_INIT_RANDOM};
    truth tr = markov_truth();
    lse_slds *gen = make_model(&tr, 1, LSE_COV_FULL);
    gsl_matrix *x = gsl_matrix_alloc(400, 2);
    lse_error err;
    lse_assert_ok(lse_slds_simulate(gen, 400, 99, x, NULL, &err));
    size_t seq[400];
    for (size_t t = 0; t < 400; t++)
        seq[t] = t < 150 ? 0 : (t < 280 ? 1 : 2);
    for (int markov = 0; markov <= 1; markov++)
        for (size_t c = 0; c < 4; c++)
            for (size_t i = 0; i < 2; i++)
                for (size_t L = 1; L <= 2; L++) {
                    lse_slds_config cfg = lse_slds_config_default();
                    cfg.n_modes = 3;
                    cfg.dim = 2;
                    cfg.lags = L;
                    cfg.markov = markov;
                    cfg.cov = covs[c];
                    lse_slds *m = NULL;
                    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
                    lse_slds_opts o = lse_slds_opts_default();
                    o.init = inits[i];
                    o.seed = 17;
                    o.max_iter = 60;
                    trace rec = {.n = 0};
                    o.progress = record;
                    o.user = &rec;
                    lse_status st =
                        lse_slds_fit(m, x, L == 2 ? seq : NULL, &o, &err);
                    ck_assert_msg(st == LSE_OK, "%s", err.message);
                    ck_assert_uint_eq(lse_slds_n_increase(m), 0);
                    ck_assert_int_eq(rec.bad, 0);
                    ck_assert_uint_gt(rec.n, 1);
                    double ll;
                    lse_assert_ok(
                        lse_slds_score(m, x, L == 2 ? seq : NULL, &ll, &err));
                    ck_assert_double_eq_tol(ll, lse_slds_loglik(m),
                                            1e-8 * fabs(ll));
                    ck_assert(ll >= rec.ll[rec.n - 1] - 1e-8 * fabs(ll));
                    lse_slds_free(m);
                }
    gsl_matrix_free(x);
    lse_slds_free(gen);
}
END_TEST

/* Fitting two sequences at once = one model on both: at the fitted
 * parameters the joint loglik is the sum of the per-sequence scores. */
START_TEST(test_fit_sequences)
{
    truth tr = markov_truth();
    lse_slds *gen = make_model(&tr, 1, LSE_COV_FULL);
    gsl_matrix *x = gsl_matrix_alloc(600, 2);
    lse_error err;
    lse_assert_status(lse_slds_simulate(gen, 300, 1, x, NULL, &err), LSE_EDIM);
    gsl_matrix_view x1 = gsl_matrix_submatrix(x, 0, 0, 300, 2);
    gsl_matrix_view x2 = gsl_matrix_submatrix(x, 300, 0, 300, 2);
    lse_assert_ok(lse_slds_simulate(gen, 300, 1, &x1.matrix, NULL, &err));
    lse_assert_ok(lse_slds_simulate(gen, 300, 2, &x2.matrix, NULL, &err));
    size_t seq[600];
    for (size_t t = 0; t < 600; t++)
        seq[t] = t / 300;
    for (int markov = 0; markov <= 1; markov++) {
        lse_slds_config cfg = lse_slds_config_default();
        cfg.n_modes = 3;
        cfg.dim = 2;
        cfg.markov = markov;
        lse_slds *m = NULL;
        lse_assert_ok(lse_slds_new(&cfg, &m, &err));
        lse_slds_opts o = lse_slds_opts_default();
        o.seed = 2;
        lse_assert_ok(lse_slds_fit(m, x, seq, &o, &err));
        ck_assert_uint_eq(lse_slds_n_fit_steps(m), 598);
        double l1, l2;
        lse_assert_ok(lse_slds_score(m, &x1.matrix, NULL, &l1, &err));
        lse_assert_ok(lse_slds_score(m, &x2.matrix, NULL, &l2, &err));
        ck_assert_double_eq_tol(lse_slds_loglik(m), l1 + l2,
                                1e-8 * fabs(l1 + l2));
        lse_graph *g = NULL;
        lse_assert_ok(lse_slds_graph_new(m, x, seq, &g, &err));
        ck_assert_uint_eq(lse_node_rows(lse_graph_find_node(g, "x")), 598);
        ck_assert_uint_eq(lse_node_rows(lse_graph_find_node(g, "z")), 598);
        lse_graph_free(g);
        lse_slds_free(m);
    }
    gsl_matrix_free(x);
    lse_slds_free(gen);
}
END_TEST

/* ------------------------------------------------------------------ */
/* One EM iteration equals the textbook updates                        */

/* Weighted least squares and covariances from responsibilities resp
 * (n, K) of rows [1, 1 + n) of x (L = 1, d = 2), written with plain loops:
 *   [A_k b_k] = (sum_t r_tk y_t u_t') (sum_t r_tk u_t u_t')^-1, u = [x; 1]
 *   Sigma_k = sum_t r_tk e_tk e_tk' / N_k + reg I, pi_k = N_k / n. */
static truth textbook_mstep(const truth *tr, const gsl_matrix *x,
                            const gsl_matrix *resp, double reg)
{
    truth out = *tr;
    const size_t n = resp->size1;
    for (size_t k = 0; k < tr->K; k++) {
        gsl_matrix *sxx = gsl_matrix_calloc(3, 3);
        gsl_matrix *syx = gsl_matrix_calloc(2, 3);
        double nk = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double r = gsl_matrix_get(resp, i, k);
            const double u[3] = {gsl_matrix_get(x, i, 0),
                                 gsl_matrix_get(x, i, 1), 1.0};
            nk += r;
            for (size_t p = 0; p < 3; p++) {
                for (size_t q = 0; q < 3; q++)
                    *gsl_matrix_ptr(sxx, p, q) += r * u[p] * u[q];
                for (size_t j = 0; j < 2; j++)
                    *gsl_matrix_ptr(syx, j, p) +=
                        r * gsl_matrix_get(x, i + 1, j) * u[p];
            }
        }
        /* coefficients: row j solves sxx c = syx(j, :)' */
        gsl_permutation *perm = gsl_permutation_alloc(3);
        int sg;
        ck_assert_int_eq(gsl_linalg_LU_decomp(sxx, perm, &sg), 0);
        for (size_t j = 0; j < 2; j++) {
            gsl_vector_view rhs = gsl_matrix_row(syx, j);
            gsl_vector *c = gsl_vector_alloc(3);
            ck_assert_int_eq(gsl_linalg_LU_solve(sxx, perm, &rhs.vector, c), 0);
            out.A[k][j][0] = gsl_vector_get(c, 0);
            out.A[k][j][1] = gsl_vector_get(c, 1);
            out.b[k][j] = gsl_vector_get(c, 2);
            gsl_vector_free(c);
        }
        for (size_t p = 0; p < 2; p++)
            for (size_t q = 0; q < 2; q++)
                out.S[k][p][q] = p == q ? reg : 0.0;
        for (size_t i = 0; i < n; i++) {
            const double r = gsl_matrix_get(resp, i, k);
            double e[2];
            for (size_t j = 0; j < 2; j++)
                e[j] = gsl_matrix_get(x, i + 1, j) - out.b[k][j] -
                       out.A[k][j][0] * gsl_matrix_get(x, i, 0) -
                       out.A[k][j][1] * gsl_matrix_get(x, i, 1);
            for (size_t p = 0; p < 2; p++)
                for (size_t q = 0; q < 2; q++)
                    out.S[k][p][q] += r * e[p] * e[q] / nk;
        }
        out.w[k] = nk / (double)n;
        gsl_permutation_free(perm);
        gsl_matrix_free(sxx);
        gsl_matrix_free(syx);
    }
    return out;
}

static void assert_model_equals(const lse_slds *m, const truth *want,
                                int markov, double tol)
{
    gsl_matrix *a = gsl_matrix_alloc(2, 2), *s = gsl_matrix_alloc(2, 2);
    gsl_vector *b = gsl_vector_alloc(2), *w = gsl_vector_alloc(want->K);
    for (size_t k = 0; k < want->K; k++) {
        lse_assert_ok(lse_slds_get_a(m, k, a));
        lse_assert_ok(lse_slds_get_b(m, k, b));
        lse_assert_ok(lse_slds_get_cov(m, k, s));
        for (size_t i = 0; i < 2; i++) {
            ck_assert_double_eq_tol(gsl_vector_get(b, i), want->b[k][i], tol);
            for (size_t j = 0; j < 2; j++) {
                ck_assert_double_eq_tol(gsl_matrix_get(a, i, j),
                                        want->A[k][i][j], tol);
                ck_assert_double_eq_tol(gsl_matrix_get(s, i, j),
                                        want->S[k][i][j], tol);
            }
        }
    }
    if (markov) {
        gsl_matrix *p = gsl_matrix_alloc(want->K, want->K);
        lse_assert_ok(lse_slds_get_transition(m, p));
        lse_assert_ok(lse_slds_get_initial(m, w));
        for (size_t j = 0; j < want->K; j++) {
            ck_assert_double_eq_tol(gsl_vector_get(w, j), want->w[j], tol);
            for (size_t k = 0; k < want->K; k++)
                ck_assert_double_eq_tol(gsl_matrix_get(p, j, k), want->P[j][k],
                                        tol);
        }
        gsl_matrix_free(p);
    } else {
        lse_assert_ok(lse_slds_get_weights(m, w));
        for (size_t k = 0; k < want->K; k++)
            ck_assert_double_eq_tol(gsl_vector_get(w, k), want->w[k], tol);
    }
    gsl_matrix_free(a);
    gsl_matrix_free(s);
    gsl_vector_free(b);
    gsl_vector_free(w);
}

START_TEST(test_em_step_is_textbook)
{
    const double reg = 1e-6;
    /* mixture: responsibilities = softmax of the test's own log-densities */
    {
        truth tr = entropy_truth(2, 2, 1);
        lse_slds *m = make_model(&tr, 0, LSE_COV_FULL);
        gsl_matrix *x = random_series(40, 2, 81);
        gsl_matrix *resp = gsl_matrix_alloc(39, 2);
        const double ws = wsum(&tr);
        for (size_t t = 1; t < 40; t++) {
            double v[2];
            for (size_t k = 0; k < 2; k++)
                v[k] = log(tr.w[k] / ws) + log_dens(&tr, k, x, t);
            const double z = lse_logsumexp(v, 2, 1, 1.0);
            for (size_t k = 0; k < 2; k++)
                gsl_matrix_set(resp, t - 1, k, exp(v[k] - z));
        }
        const truth want = textbook_mstep(&tr, x, resp, reg);
        lse_slds_opts o = lse_slds_opts_default();
        o.init = LSE_SLDS_INIT_GIVEN;
        o.max_iter = 1;
        o.reg_covar = reg;
        lse_error err;
        lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
        ck_assert_uint_eq(lse_slds_n_iter(m), 1);
        assert_model_equals(m, &want, 0, 1e-10);
        gsl_matrix_free(resp);
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
    /* Markov: posteriors and expected transitions by brute force over the
     * 2^5 paths; p0 = gamma_0, P_jk = xi_jk / sum_k xi_jk */
    {
        truth tr = entropy_truth(2, 2, 1);
        lse_slds *m = make_model(&tr, 1, LSE_COV_FULL);
        const size_t T = 6, n = 5, K = 2, total = 32;
        gsl_matrix *x = random_series(T, 2, 83);
        gsl_matrix *resp = gsl_matrix_calloc(n, K);
        double xi[2][2] = {{0}}, lp[32];
        const double ws = wsum(&tr);
        for (size_t code = 0; code < total; code++) {
            double s = 0.0;
            size_t prev = 0;
            for (size_t i = 0; i < n; i++) {
                const size_t k = (code >> i) & 1u;
                s += i == 0
                         ? log(tr.w[k] / ws)
                         : log(tr.P[prev][k] / (tr.P[prev][0] + tr.P[prev][1]));
                s += log_dens(&tr, k, x, i + 1);
                prev = k;
            }
            lp[code] = s;
        }
        const double z = lse_logsumexp(lp, total, 1, 1.0);
        for (size_t code = 0; code < total; code++) {
            const double p = exp(lp[code] - z);
            for (size_t i = 0; i < n; i++) {
                const size_t k = (code >> i) & 1u;
                *gsl_matrix_ptr(resp, i, k) += p;
                if (i > 0)
                    xi[(code >> (i - 1)) & 1u][k] += p;
            }
        }
        truth want = textbook_mstep(&tr, x, resp, reg);
        for (size_t j = 0; j < K; j++) {
            want.w[j] = gsl_matrix_get(resp, 0, j);
            for (size_t k = 0; k < K; k++)
                want.P[j][k] = xi[j][k] / (xi[j][0] + xi[j][1]);
        }
        lse_slds_opts o = lse_slds_opts_default();
        o.init = LSE_SLDS_INIT_GIVEN;
        o.max_iter = 1;
        o.reg_covar = reg;
        lse_error err;
        lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
        assert_model_equals(m, &want, 1, 1e-10);
        gsl_matrix_free(resp);
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Viterbi and posteriors against brute force                          */

START_TEST(test_viterbi_bruteforce)
{
    for (int markov = 0; markov <= 1; markov++) {
        truth tr = entropy_truth(3, 2, 1);
        lse_slds *m = make_model(&tr, markov, LSE_COV_FULL);
        const size_t T = 7, n = T - 1, K = 3;
        gsl_matrix *x = random_series(T, 2, 61);
        size_t path[6];
        lse_error err;
        lse_assert_ok(lse_slds_viterbi(m, x, NULL, path, &err));
        /* brute force: best path and its marginals */
        size_t total = 1;
        for (size_t i = 0; i < n; i++)
            total *= K;
        double best = -INFINITY;
        size_t best_code = 0;
        double *lp = malloc(total * sizeof *lp);
        const double ws = wsum(&tr);
        for (size_t code = 0; code < total; code++) {
            size_t c = code, prev = 0;
            double s = 0.0;
            for (size_t i = 0; i < n; i++) {
                const size_t k = c % K;
                c /= K;
                if (!markov || i == 0) {
                    s += log(tr.w[k] / ws);
                } else {
                    double rs = 0.0;
                    for (size_t j = 0; j < K; j++)
                        rs += tr.P[prev][j];
                    s += log(tr.P[prev][k] / rs);
                }
                s += log_dens(&tr, k, x, i + 1);
                prev = k;
            }
            lp[code] = s;
            if (s > best) {
                best = s;
                best_code = code;
            }
        }
        size_t c = best_code;
        for (size_t i = 0; i < n; i++, c /= K)
            ck_assert_uint_eq(path[i], c % K);
        /* posterior marginals */
        const double z = lse_logsumexp(lp, total, 1, 1.0);
        gsl_matrix *post = gsl_matrix_alloc(n, K);
        lse_assert_ok(lse_slds_posteriors(m, x, NULL, post, &err));
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < K; k++) {
                double p = 0.0;
                for (size_t code = 0; code < total; code++) {
                    size_t cc = code;
                    for (size_t q = 0; q < i; q++)
                        cc /= K;
                    if (cc % K == k)
                        p += exp(lp[code] - z);
                }
                ck_assert_double_eq_tol(gsl_matrix_get(post, i, k), p, 1e-10);
            }
        size_t ml[6];
        lse_assert_ok(lse_slds_most_likely(m, x, NULL, ml, &err));
        for (size_t i = 0; i < n; i++) {
            gsl_vector_const_view row = gsl_matrix_const_row(post, i);
            ck_assert_uint_eq(ml[i], gsl_vector_max_index(&row.vector));
        }
        gsl_matrix_free(post);
        free(lp);
        gsl_matrix_free(x);
        lse_slds_free(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Latent continuous states                                            */

/* K = 1: the energy in the states is quadratic and its minimizer is the
 * smoothed path (the posterior mean under a flat prior on x_0), computed
 * here by a dense linear solve of the normal equations. */
START_TEST(test_latent_smoother)
{
    const size_t T = 30, d = 2, n = T * d;
    truth tr = mixture_truth();
    tr.K = 1;
    lse_slds *m = make_model(&tr, 0, LSE_COV_FULL);
    lse_error err;
    const double ov = 0.2;
    lse_assert_ok(lse_slds_set_latent(m, ov, &err));
    gsl_matrix *y = random_series(T, d, 71);
    /* H x = rhs */
    gsl_matrix *H = gsl_matrix_calloc(n, n);
    gsl_vector *rhs = gsl_vector_calloc(n), *xs = gsl_vector_alloc(n);
    const double det =
        tr.S[0][0][0] * tr.S[0][1][1] - tr.S[0][0][1] * tr.S[0][1][0];
    const double Pm[2][2] = {{tr.S[0][1][1] / det, -tr.S[0][0][1] / det},
                             {-tr.S[0][1][0] / det, tr.S[0][0][0] / det}};
    for (size_t t = 0; t + 1 < T; t++) {
        /* r = M x - b with M = [-A  I] on rows (t, t+1) */
        double M[2][4];
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++) {
                M[i][j] = -tr.A[0][i][j];
                M[i][2 + j] = i == j ? 1.0 : 0.0;
            }
        for (size_t p = 0; p < 4; p++)
            for (size_t q = 0; q < 4; q++) {
                double h = 0.0;
                for (size_t i = 0; i < 2; i++)
                    for (size_t j = 0; j < 2; j++)
                        h += M[i][p] * Pm[i][j] * M[j][q];
                *gsl_matrix_ptr(H, t * d + p, t * d + q) += h;
            }
        for (size_t p = 0; p < 4; p++) {
            double v = 0.0;
            for (size_t i = 0; i < 2; i++)
                for (size_t j = 0; j < 2; j++)
                    v += M[i][p] * Pm[i][j] * tr.b[0][j];
            *gsl_vector_ptr(rhs, t * d + p) += v;
        }
    }
    for (size_t i = 0; i < n; i++) {
        *gsl_matrix_ptr(H, i, i) += 1.0 / ov;
        *gsl_vector_ptr(rhs, i) += gsl_matrix_get(y, i / d, i % d) / ov;
    }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(H), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_solve(H, rhs, xs), 0);

    lse_graph *g = NULL;
    lse_assert_ok(lse_slds_graph_new(m, y, NULL, &g, &err));
    lse_node *xn = lse_graph_find_node(g, "x");
    /* the gradient vanishes at the smoothed path */
    gsl_matrix *keep = gsl_matrix_alloc(T, d);
    gsl_matrix_memcpy(keep, lse_node_value(xn));
    for (size_t i = 0; i < n; i++)
        gsl_matrix_set(lse_node_value(xn), i / d, i % d, gsl_vector_get(xs, i));
    double e_star;
    lse_assert_ok(lse_graph_gradient(g, &e_star));
    const gsl_matrix *gr = lse_node_grad(xn);
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < d; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(gr, t, j), 0.0, 1e-8);
    /* gradient descent on the states from the observations converges to
     * it */
    gsl_matrix_memcpy(lse_node_value(xn), keep);
    lse_solver *s = lse_solver_new(g, lse_solver_gd);
    lse_assert_ok(lse_solver_set_nodes(s, &xn, 1));
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 0.0;
    so.tol_grad = 1e-9;
    lse_assert_ok(lse_solver_set_opts(s, &so));
    lse_solver_result res;
    lse_assert_ok(lse_solver_run(s, 20000, NULL, NULL, &res));
    ck_assert_double_eq_tol(res.energy, e_star, 1e-9 * fabs(e_star));
    for (size_t i = 0; i < n; i++)
        ck_assert_double_eq_tol(
            gsl_matrix_get(lse_node_value(xn), i / d, i % d),
            gsl_vector_get(xs, i), 1e-6);
    lse_solver_free(s);
    gsl_matrix_free(keep);
    lse_graph_free(g);
    gsl_matrix_free(H);
    gsl_vector_free(rhs);
    gsl_vector_free(xs);
    gsl_matrix_free(y);
    lse_slds_free(m);
}
END_TEST

/* EM with latent states on noisy simulated data: the energy decreases and
 * the inferred states are closer to the clean path than the observations
 * are. */
START_TEST(test_latent_fit)
{
    for (int markov = 0; markov <= 1; markov++) {
        truth tr = markov ? markov_truth() : mixture_truth();
        lse_slds *gen = make_model(&tr, markov, LSE_COV_FULL);
        const size_t T = 1000;
        gsl_matrix *clean = gsl_matrix_alloc(T, 2), *y = gsl_matrix_alloc(T, 2);
        lse_error err;
        lse_assert_ok(lse_slds_simulate(gen, T, 4242, clean, NULL, &err));
        gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
        gsl_rng_set(r, 9);
        const double ov = 0.04; /* observation noise sd 0.2 */
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < 2; j++)
                gsl_matrix_set(y, t, j,
                               gsl_matrix_get(clean, t, j) +
                                   sqrt(ov) * (2.0 * gsl_rng_uniform(r) - 1.0) *
                                       sqrt(3.0));
        gsl_rng_free(r);
        lse_slds *m = make_model(&tr, markov, LSE_COV_FULL);
        lse_assert_ok(lse_slds_set_latent(m, ov, &err));
        ck_assert_ptr_null(lse_slds_states(m));
        lse_slds_opts o = lse_slds_opts_default();
        o.init = LSE_SLDS_INIT_GIVEN;
        o.max_iter = 25;
        o.estep_steps = 5;
        trace rec = {.n = 0};
        o.progress = record;
        o.user = &rec;
        lse_graph *g = NULL;
        lse_assert_ok(lse_slds_graph_new(m, y, NULL, &g, &err));
        double e0;
        lse_assert_ok(lse_graph_energy(g, &e0));
        lse_graph_free(g);
        lse_assert_ok(lse_slds_fit(m, y, NULL, &o, &err));
        ck_assert_uint_eq(lse_slds_n_increase(m), 0);
        ck_assert_int_eq(rec.bad, 0);
        ck_assert(-rec.ll[rec.n - 1] < e0 - 1.0);
        const gsl_matrix *xs = lse_slds_states(m);
        ck_assert_ptr_nonnull(xs);
        double dy = 0.0, dx = 0.0;
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < 2; j++) {
                dy += pow(gsl_matrix_get(y, t, j) - gsl_matrix_get(clean, t, j),
                          2);
                dx += pow(
                    gsl_matrix_get(xs, t, j) - gsl_matrix_get(clean, t, j), 2);
            }
        ck_assert_msg(dx < 0.8 * dy, "rmse states %g, observations %g",
                      sqrt(dx / T), sqrt(dy / T));
        /* the noise covariances are held fixed with latent states (their
         * joint MAP with the states is degenerate) */
        gsl_matrix *sk = gsl_matrix_alloc(2, 2);
        for (size_t k = 0; k < tr.K; k++) {
            lse_assert_ok(lse_slds_get_cov(m, k, sk));
            for (size_t i = 0; i < 2; i++)
                for (size_t j = 0; j < 2; j++)
                    ck_assert_double_eq_tol(gsl_matrix_get(sk, i, j),
                                            tr.S[k][i][j], 1e-14);
        }
        gsl_matrix_free(sk);
        gsl_matrix_free(clean);
        gsl_matrix_free(y);
        lse_slds_free(m);
        lse_slds_free(gen);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Parameters, simulation and error paths                              */

START_TEST(test_params_roundtrip)
{
    truth tr = entropy_truth(3, 2, 2);
    lse_slds *m = make_model(&tr, 1, LSE_COV_FULL);
    gsl_matrix *a = gsl_matrix_alloc(2, 4), *s = gsl_matrix_alloc(2, 2);
    gsl_matrix *p = gsl_matrix_alloc(3, 3);
    gsl_vector *b = gsl_vector_alloc(2), *p0 = gsl_vector_alloc(3);
    for (size_t k = 0; k < 3; k++) {
        lse_assert_ok(lse_slds_get_a(m, k, a));
        lse_assert_ok(lse_slds_get_b(m, k, b));
        lse_assert_ok(lse_slds_get_cov(m, k, s));
        for (size_t i = 0; i < 2; i++) {
            ck_assert_double_eq_tol(gsl_vector_get(b, i), tr.b[k][i], 1e-15);
            for (size_t j = 0; j < 4; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(a, i, j), tr.A[k][i][j],
                                        1e-15);
            for (size_t j = 0; j < 2; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), tr.S[k][i][j],
                                        1e-13);
        }
    }
    lse_assert_ok(lse_slds_get_transition(m, p));
    lse_assert_ok(lse_slds_get_initial(m, p0));
    for (size_t j = 0; j < 3; j++) {
        double rs = 0.0;
        for (size_t k = 0; k < 3; k++)
            rs += tr.P[j][k];
        for (size_t k = 0; k < 3; k++)
            ck_assert_double_eq_tol(gsl_matrix_get(p, j, k), tr.P[j][k] / rs,
                                    1e-14);
        ck_assert_double_eq_tol(gsl_vector_get(p0, j), tr.w[j] / wsum(&tr),
                                1e-14);
    }
    lse_assert_status(lse_slds_get_weights(m, p0), LSE_ENOTSUP);
    lse_assert_status(lse_slds_get_a(m, 3, a), LSE_ERANGE);
    lse_assert_status(lse_slds_get_a(m, 0, s), LSE_EDIM);
    ck_assert_int_eq(lse_slds_is_markov(m), 1);
    ck_assert_uint_eq(lse_slds_lags(m), 2);
    ck_assert_uint_eq(lse_slds_n_modes(m), 3);
    ck_assert_uint_eq(lse_slds_dim(m), 2);
    /* simulation is deterministic in the seed */
    gsl_matrix *x1 = gsl_matrix_alloc(50, 2), *x2 = gsl_matrix_alloc(50, 2);
    size_t m1[50], m2[50];
    lse_error err;
    lse_assert_ok(lse_slds_simulate(m, 50, 8, x1, m1, &err));
    lse_assert_ok(lse_slds_simulate(m, 50, 8, x2, m2, &err));
    ck_assert_int_eq(gsl_matrix_equal(x1, x2), 1);
    ck_assert_int_eq(memcmp(m1, m2, sizeof m1), 0);
    lse_assert_ok(lse_slds_simulate(m, 50, 9, x2, m2, &err));
    ck_assert_int_eq(gsl_matrix_equal(x1, x2), 0);
    gsl_matrix_free(x1);
    gsl_matrix_free(x2);
    gsl_matrix_free(a);
    gsl_matrix_free(s);
    gsl_matrix_free(p);
    gsl_vector_free(b);
    gsl_vector_free(p0);
    lse_slds_free(m);
}
END_TEST

START_TEST(test_errors)
{
    lse_error err;
    lse_slds *m = NULL;
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 0;
    lse_assert_status(lse_slds_new(&cfg, &m, &err), LSE_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert(strstr(err.message, "lse_slds_new") != NULL);
    cfg.n_modes = 2;
    cfg.lags = 0;
    lse_assert_status(lse_slds_new(&cfg, &m, &err), LSE_EINVAL);
    cfg.lags = 1;
    cfg.dim = 0;
    lse_assert_status(lse_slds_new(&cfg, &m, &err), LSE_EINVAL);
    cfg.dim = 2;
    cfg.cov = (lse_cov_type)9;
    lse_assert_status(lse_slds_new(&cfg, &m, &err), LSE_EINVAL);
    lse_assert_status(lse_slds_new(NULL, &m, &err), LSE_EFAULT);
    cfg.cov = LSE_COV_FULL;
    cfg.lags = 2;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));

    /* T <= lags */
    gsl_matrix *x = random_series(2, 2, 1);
    lse_assert_status(lse_slds_fit(m, x, NULL, NULL, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "T <= L") != NULL);
    double ll;
    lse_assert_status(lse_slds_score(m, x, NULL, &ll, &err), LSE_EINVAL);
    gsl_matrix_free(x);
    /* sequences all too short */
    x = random_series(6, 2, 1);
    size_t seq[6] = {0, 0, 1, 1, 2, 2};
    lse_assert_status(lse_slds_fit(m, x, seq, NULL, &err), LSE_EINVAL);
    /* NaN */
    gsl_matrix_set(x, 3, 1, NAN);
    lse_assert_status(lse_slds_fit(m, x, NULL, NULL, &err), LSE_ENONFINITE);
    ck_assert(strstr(err.message, "x[3,1]") != NULL);
    lse_assert_status(lse_slds_score(m, x, NULL, &ll, &err), LSE_ENONFINITE);
    gsl_matrix_free(x);
    /* wrong dimension */
    x = random_series(20, 3, 1);
    lse_assert_status(lse_slds_fit(m, x, NULL, NULL, &err), LSE_EDIM);
    lse_assert_status(lse_slds_fit(NULL, x, NULL, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_slds_fit(m, NULL, NULL, NULL, &err), LSE_EFAULT);
    gsl_matrix_free(x);
    x = random_series(20, 2, 1);
    /* fewer steps than modes */
    gsl_matrix_view x3 = gsl_matrix_submatrix(x, 0, 0, 3, 2);
    lse_slds_free(m);
    cfg.lags = 1;
    cfg.n_modes = 3;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    lse_assert_status(lse_slds_fit(m, &x3.matrix, NULL, NULL, &err),
                      LSE_EINVAL);
    /* bad options */
    lse_slds_opts o = lse_slds_opts_default();
    o.n_init = 0;
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_EINVAL);
    o = lse_slds_opts_default();
    o.tol = -1.0;
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_EINVAL);
    o = lse_slds_opts_default();
    o.reg_covar = NAN;
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_EINVAL);
    /* output shapes */
    gsl_matrix *post = gsl_matrix_alloc(20, 3);
    lse_assert_status(lse_slds_posteriors(m, x, NULL, post, &err), LSE_EDIM);
    gsl_matrix_free(post);
    gsl_matrix *sim = gsl_matrix_alloc(5, 2);
    lse_assert_status(lse_slds_simulate(m, 6, 1, sim, NULL, &err), LSE_EDIM);
    lse_assert_status(lse_slds_simulate(m, 0, 1, sim, NULL, &err), LSE_EINVAL);
    gsl_matrix_free(sim);
    /* setters */
    gsl_matrix *s = gsl_matrix_alloc(2, 2);
    gsl_matrix_set_all(s, 1.0); /* singular */
    lse_assert_status(lse_slds_set_cov(m, 0, s, &err), LSE_ENUMERIC);
    gsl_matrix_set(s, 0, 1, 0.5); /* not symmetric */
    lse_assert_status(lse_slds_set_cov(m, 0, s, &err), LSE_EINVAL);
    lse_assert_status(lse_slds_set_cov(m, 3, s, &err), LSE_ERANGE);
    gsl_matrix_free(s);
    gsl_vector *w = gsl_vector_alloc(3);
    gsl_vector_set_all(w, 0.3);
    gsl_vector_set(w, 1, 0.0);
    lse_assert_status(lse_slds_set_weights(m, w, &err), LSE_EDOM);
    gsl_vector_set(w, 1, NAN);
    lse_assert_status(lse_slds_set_weights(m, w, &err), LSE_ENONFINITE);
    lse_assert_status(lse_slds_set_initial(m, w, &err), LSE_ENOTSUP);
    gsl_vector_free(w);
    gsl_matrix *p = gsl_matrix_alloc(3, 3);
    gsl_matrix_set_all(p, 0.3);
    lse_assert_status(lse_slds_set_transition(m, p, &err), LSE_ENOTSUP);
    gsl_matrix_free(p);
    lse_assert_status(lse_slds_set_latent(m, -1.0, &err), LSE_EDOM);
    /* latent states need one sequence */
    lse_assert_ok(lse_slds_set_latent(m, 0.1, &err));
    size_t seq2[20];
    for (size_t t = 0; t < 20; t++)
        seq2[t] = t / 10;
    lse_assert_status(lse_slds_fit(m, x, seq2, NULL, &err), LSE_ENOTSUP);
    lse_graph *g = (lse_graph *)1;
    lse_assert_status(lse_slds_graph_new(m, x, seq2, &g, &err), LSE_ENOTSUP);
    ck_assert_ptr_null(g);
    lse_slds_free(m);
    /* diag covariance must be diagonal */
    cfg.cov = LSE_COV_DIAG;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    s = gsl_matrix_alloc(2, 2);
    gsl_matrix_set_identity(s);
    gsl_matrix_set(s, 0, 1, 0.1);
    gsl_matrix_set(s, 1, 0, 0.1);
    lse_assert_status(lse_slds_set_cov(m, 0, s, &err), LSE_EINVAL);
    gsl_matrix_free(s);
    lse_slds_free(m);
    gsl_matrix_free(x);
    lse_slds_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Data-parallel fitting: contiguous blocks fitted by threads through   */
/* the reduction hook equal the one-process fit (docs/mpi.md)          */

typedef struct slds_job {
    simcomm_rank me;
    gsl_matrix *x; /* context rows + block */
    size_t *seq;
    lse_slds_opts o;
    lse_slds *m;
    lse_status st;
    lse_error err;
} slds_job;

static void *slds_job_run(void *p)
{
    slds_job *j = p;
    j->st = lse_slds_fit(j->m, j->x, j->seq, &j->o, &j->err);
    return NULL;
}

/* Fit x (seq may be NULL) split at cuts[0] = 0 < ... < cuts[P] = T by P
 * threads, each block preceded by min(L, cuts[r]) context rows. */
static void fit_blocks(const gsl_matrix *x, const size_t *seq,
                       const size_t *cuts, size_t P,
                       const lse_slds_config *cfg, const lse_slds_opts *base,
                       size_t fail_at, slds_job *jobs, size_t *n_calls)
{
    simcomm comm;
    simcomm_init(&comm, P);
    comm.fail_at = fail_at;
    pthread_t th[SIMCOMM_MAX];
    for (size_t r = 0; r < P; r++) {
        slds_job *j = &jobs[r];
        memset(j, 0, sizeof *j);
        j->me = (simcomm_rank){.comm = &comm, .rank = r};
        const size_t h = cuts[r] < cfg->lags ? cuts[r] : cfg->lags;
        const size_t t0 = cuts[r] - h, n = cuts[r + 1] - t0;
        gsl_matrix_const_view xv =
            gsl_matrix_const_submatrix(x, t0, 0, n, x->size2);
        j->x = gsl_matrix_alloc(n, x->size2);
        gsl_matrix_memcpy(j->x, &xv.matrix);
        if (seq != NULL) {
            j->seq = malloc(n * sizeof *j->seq);
            memcpy(j->seq, seq + t0, n * sizeof *j->seq);
        }
        j->o = *base;
        j->o.reduce = simcomm_reduce;
        j->o.reduce_user = &j->me;
        j->o.rank = r;
        j->o.n_ranks = P;
        j->o.context_rows = h;
        lse_error err;
        lse_assert_ok(lse_slds_new(cfg, &j->m, &err));
        ck_assert_int_eq(pthread_create(&th[r], NULL, slds_job_run, j), 0);
    }
    for (size_t r = 0; r < P; r++) {
        pthread_join(th[r], NULL);
        gsl_matrix_free(jobs[r].x);
        free(jobs[r].seq);
        jobs[r].x = NULL;
        jobs[r].seq = NULL;
    }
    ck_assert_msg(!comm.mismatch, "processes reduced buffers of different "
                                  "lengths");
    for (size_t r = 1; r < P && fail_at == 0; r++)
        ck_assert_uint_eq(comm.calls[r], comm.calls[0]);
    if (n_calls != NULL)
        *n_calls = comm.calls[0];
    simcomm_destroy(&comm);
}

/* max |a - b| over max |a| of two parameter matrices */
static double par_rel(const gsl_matrix *a, const gsl_matrix *b)
{
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            diff = fmax(diff, fabs(gsl_matrix_get(a, i, j) -
                                   gsl_matrix_get(b, i, j)));
            scale = fmax(scale, fabs(gsl_matrix_get(a, i, j)));
        }
    return scale > 0 ? diff / scale : diff;
}

/* 1 when every parameter and the log-likelihood of a and b have the same
 * bits (Markov fits: exact statistics, docs/mpi.md) */
static int same_bits_slds(const lse_slds *a, const lse_slds *b)
{
    const size_t K = lse_slds_n_modes(a), d = lse_slds_dim(a),
                 L = lse_slds_lags(a);
    const double la = lse_slds_loglik(a), lb = lse_slds_loglik(b);
    int same = memcmp(&la, &lb, sizeof la) == 0;
    gsl_matrix *pa = gsl_matrix_alloc(d, d * L), *pb = gsl_matrix_alloc(d, d * L);
    gsl_matrix *sa = gsl_matrix_alloc(d, d), *sb = gsl_matrix_alloc(d, d);
    gsl_matrix *qa = gsl_matrix_alloc(K, K), *qb = gsl_matrix_alloc(K, K);
    gsl_vector *va = gsl_vector_alloc(d), *vb = gsl_vector_alloc(d);
    for (size_t k = 0; k < K; k++) {
        lse_assert_ok(lse_slds_get_a(a, k, pa));
        lse_assert_ok(lse_slds_get_a(b, k, pb));
        lse_assert_ok(lse_slds_get_cov(a, k, sa));
        lse_assert_ok(lse_slds_get_cov(b, k, sb));
        lse_assert_ok(lse_slds_get_b(a, k, va));
        lse_assert_ok(lse_slds_get_b(b, k, vb));
        same = same && gsl_matrix_equal(pa, pb) && gsl_matrix_equal(sa, sb) &&
               gsl_vector_equal(va, vb);
    }
    if (lse_slds_is_markov(a)) {
        lse_assert_ok(lse_slds_get_transition(a, qa));
        lse_assert_ok(lse_slds_get_transition(b, qb));
        same = same && gsl_matrix_equal(qa, qb);
    } else {
        gsl_vector_view wa = gsl_matrix_row(qa, 0), wb = gsl_matrix_row(qb, 0);
        lse_assert_ok(lse_slds_get_weights(a, &wa.vector));
        lse_assert_ok(lse_slds_get_weights(b, &wb.vector));
        same = same && gsl_vector_equal(&wa.vector, &wb.vector);
    }
    gsl_matrix_free(pa);
    gsl_matrix_free(pb);
    gsl_matrix_free(sa);
    gsl_matrix_free(sb);
    gsl_matrix_free(qa);
    gsl_matrix_free(qb);
    gsl_vector_free(va);
    gsl_vector_free(vb);
    return same;
}

static void assert_same_slds(const lse_slds *a, const lse_slds *b)
{
    const size_t K = lse_slds_n_modes(a), d = lse_slds_dim(a),
                 L = lse_slds_lags(a);
    const double la = lse_slds_loglik(a), lb = lse_slds_loglik(b);
    ck_assert_msg(fabs(la - lb) <= 1e-10 * fabs(la), "loglik %.17g vs %.17g",
                  la, lb);
    ck_assert_uint_eq(lse_slds_n_iter(a), lse_slds_n_iter(b));
    ck_assert_int_eq(lse_slds_converged(a), lse_slds_converged(b));
    ck_assert_uint_eq(lse_slds_n_fit_steps(a), lse_slds_n_fit_steps(b));
    ck_assert_uint_eq(lse_slds_n_increase(b), 0);
    gsl_matrix *pa = gsl_matrix_alloc(d, d * L), *pb = gsl_matrix_alloc(d, d * L);
    gsl_matrix *sa = gsl_matrix_alloc(d, d), *sb = gsl_matrix_alloc(d, d);
    gsl_vector *va = gsl_vector_alloc(d), *vb = gsl_vector_alloc(d);
    for (size_t k = 0; k < K; k++) {
        lse_assert_ok(lse_slds_get_a(a, k, pa));
        lse_assert_ok(lse_slds_get_a(b, k, pb));
        ck_assert(par_rel(pa, pb) < 1e-10);
        lse_assert_ok(lse_slds_get_cov(a, k, sa));
        lse_assert_ok(lse_slds_get_cov(b, k, sb));
        ck_assert(par_rel(sa, sb) < 1e-10);
        lse_assert_ok(lse_slds_get_b(a, k, va));
        lse_assert_ok(lse_slds_get_b(b, k, vb));
        gsl_matrix_view ma = gsl_matrix_view_vector(va, 1, d);
        gsl_matrix_view mb = gsl_matrix_view_vector(vb, 1, d);
        ck_assert(par_rel(&ma.matrix, &mb.matrix) < 1e-10);
    }
    gsl_matrix *qa = gsl_matrix_alloc(K, K), *qb = gsl_matrix_alloc(K, K);
    gsl_vector *wa = gsl_vector_alloc(K), *wb = gsl_vector_alloc(K);
    if (lse_slds_is_markov(a)) {
        lse_assert_ok(lse_slds_get_transition(a, qa));
        lse_assert_ok(lse_slds_get_transition(b, qb));
        ck_assert(par_rel(qa, qb) < 1e-10);
        lse_assert_ok(lse_slds_get_initial(a, wa));
        lse_assert_ok(lse_slds_get_initial(b, wb));
    } else {
        lse_assert_ok(lse_slds_get_weights(a, wa));
        lse_assert_ok(lse_slds_get_weights(b, wb));
    }
    for (size_t k = 0; k < K; k++)
        ck_assert_double_eq_tol(gsl_vector_get(wa, k), gsl_vector_get(wb, k),
                                1e-10 * fmax(1.0, gsl_vector_get(wa, k)));
    gsl_matrix_free(pa);
    gsl_matrix_free(pb);
    gsl_matrix_free(sa);
    gsl_matrix_free(sb);
    gsl_vector_free(va);
    gsl_vector_free(vb);
    gsl_matrix_free(qa);
    gsl_matrix_free(qb);
    gsl_vector_free(wa);
    gsl_vector_free(wb);
}

START_TEST(test_parallel_equals_serial)
{
    truth tr = markov_truth();
    lse_slds *gen = make_model(&tr, 1, LSE_COV_FULL);
    const size_t T = 400;
    gsl_matrix *x = gsl_matrix_alloc(T, 2);
    lse_error err;
    lse_assert_ok(lse_slds_simulate(gen, T, 31, x, NULL, &err));
    size_t seq[400];
    for (size_t t = 0; t < T; t++)
        seq[t] = t < 150 ? 0 : t < 330 ? 1 : 2;
    /* blocks that cut sequences inside, at their start and in their
     * first L rows; one block with a single step */
    static const size_t cuts[] = {0, 149, 151, 260, 331, 400};
    static const lse_slds_init inits[] = {LSE_SLDS_INIT_KMEANSPP,
                                          LSE_SLDS_INIT_RANDOM};
    static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_DIAG};
    for (int markov = 0; markov <= 1; markov++)
        for (size_t L = 1; L <= 2; L++)
            for (int use_seq = 0; use_seq <= 1; use_seq++) {
                const size_t q = (size_t)(markov + (int)L + use_seq) % 2;
                lse_slds_config cfg = lse_slds_config_default();
                cfg.n_modes = 3;
                cfg.dim = 2;
                cfg.lags = L;
                cfg.markov = markov;
                cfg.cov = covs[q];
                lse_slds_opts o = lse_slds_opts_default();
                o.seed = 11 + L;
                o.init = inits[q];
                o.n_init = 2;
                o.max_iter = 150;
                /* exact sums in half the cases: mixture and Markov, with
                 * and without */
                o.exact_sums = (markov + (int)L) % 2 == 0;
                lse_slds *serial = NULL;
                lse_assert_ok(lse_slds_new(&cfg, &serial, &err));
                const size_t *sq = use_seq ? seq : NULL;
                lse_assert_ok(lse_slds_fit(serial, x, sq, &o, &err));
                slds_job jobs[5];
                const size_t P = use_seq ? 5 : 3;
                static const size_t cuts3[] = {0, 1 + 2, 201, 400};
                fit_blocks(x, sq, use_seq ? cuts : cuts3, P, &cfg, &o, 0,
                           jobs, NULL);
                for (size_t r = 0; r < P; r++) {
                    ck_assert_msg(jobs[r].st == LSE_OK,
                                  "markov %d L %zu seq %d process %zu: %s",
                                  markov, L, use_seq, r, jobs[r].err.message);
                    assert_same_slds(serial, jobs[r].m);
                    /* exact statistics: the same bits */
                    if (o.exact_sums)
                        ck_assert_msg(same_bits_slds(serial, jobs[r].m),
                                      "markov %d L %zu seq %d process %zu: "
                                      "not bit-identical to the serial fit",
                                      markov, L, use_seq, r);
                    lse_slds_free(jobs[r].m);
                }
                lse_slds_free(serial);
            }
    gsl_matrix_free(x);
    lse_slds_free(gen);
}
END_TEST

static lse_status identity_reduce(double *buf, size_t n, void *user)
{
    (void)buf;
    (void)n;
    (void)user;
    return LSE_OK;
}

START_TEST(test_parallel_errors)
{
    truth tr = markov_truth();
    lse_slds *gen = make_model(&tr, 1, LSE_COV_FULL);
    gsl_matrix *x = gsl_matrix_alloc(200, 2);
    lse_error err;
    lse_assert_ok(lse_slds_simulate(gen, 200, 5, x, NULL, &err));
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 2;
    cfg.dim = 2;
    cfg.markov = 1;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    lse_slds_opts o = lse_slds_opts_default();
    o.context_rows = 1; /* without a hook */
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "context_rows") != NULL);
    o.reduce = identity_reduce;
    o.n_ranks = 2;
    o.rank = 1;
    o.context_rows = 2; /* > L */
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_EINVAL);
    o.context_rows = 0;
    o.rank = 3;
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "process 3 of 2") != NULL);
    /* a block of context rows only, a block without a step */
    o.rank = 1;
    o.context_rows = 1;
    gsl_matrix_view one = gsl_matrix_submatrix(x, 0, 0, 1, 2);
    lse_assert_status(lse_slds_fit(m, &one.matrix, NULL, &o, &err),
                      LSE_EINVAL);
    gsl_matrix_view two = gsl_matrix_submatrix(x, 0, 0, 2, 2);
    const size_t seq2[2] = {0, 1};
    lse_assert_status(lse_slds_fit(m, &two.matrix, seq2, &o, &err),
                      LSE_EINVAL);
    ck_assert_msg(strstr(err.message, "process 1 has no step") != NULL, "%s",
                  err.message);
    /* latent states stay on one process */
    o.rank = 0;
    o.n_ranks = 1;
    o.context_rows = 0;
    lse_assert_ok(lse_slds_set_latent(m, 0.1, &err));
    lse_assert_status(lse_slds_fit(m, x, NULL, &o, &err), LSE_ENOTSUP);
    lse_slds_free(m);

    /* a failing reduction ends the fit of every process with its status */
    static const size_t cuts[] = {0, 120, 200};
    slds_job jobs[2];
    for (int markov = 0; markov <= 1; markov++) {
        cfg.markov = markov;
        lse_slds_opts b = lse_slds_opts_default();
        b.max_iter = 5;
        size_t n_calls = 0;
        fit_blocks(x, NULL, cuts, 2, &cfg, &b, 0, jobs, &n_calls);
        for (size_t r = 0; r < 2; r++) {
            lse_assert_ok(jobs[r].st);
            lse_slds_free(jobs[r].m);
        }
        ck_assert_uint_gt(n_calls, 10);
        for (size_t fail_at = 1; fail_at <= n_calls; fail_at++) {
            fit_blocks(x, NULL, cuts, 2, &cfg, &b, fail_at, jobs, NULL);
            for (size_t r = 0; r < 2; r++) {
                ck_assert_msg(jobs[r].st == LSE_EIO, "fail_at %zu: %d %s",
                              fail_at, (int)jobs[r].st, jobs[r].err.message);
                ck_assert(!isfinite(lse_slds_loglik(jobs[r].m)));
                lse_slds_free(jobs[r].m);
            }
        }
    }
    gsl_matrix_free(x);
    lse_slds_free(gen);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_slds");
    TCase *tc = tcase_create("slds");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mixture_energy_is_nll);
    tcase_add_test(tc, test_markov_energy_is_bruteforce);
    tcase_add_test(tc, test_sequences_add);
    tcase_add_test(tc, test_graph_gradients);
    tcase_add_test(tc, test_latent_gradients);
    tcase_add_test(tc, test_seed_gradients);
    tcase_add_test(tc, test_viterbi_bruteforce);
    tcase_add_test(tc, test_params_roundtrip);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_em_monotone);
    tcase_add_test(tc, test_em_step_is_textbook);
    tcase_add_test(tc, test_fit_sequences);
    tcase_add_test(tc, test_mixture_recovery);
    tcase_add_test(tc, test_markov_recovery);
    tcase_add_test(tc, test_latent_smoother);
    tcase_add_test(tc, test_latent_fit);
    tcase_add_test(tc, test_parallel_equals_serial);
    tcase_add_test(tc, test_parallel_errors);
    suite_add_tcase(s, tc);
    return s;
}
