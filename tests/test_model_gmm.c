#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "lse_simcomm.h"

/* Tests of models/gmm.c: the graph's energy is the negative log-likelihood,
 * EM equals a textbook EM written here with plain loops, monotonicity,
 * whole-graph gradients, recovery of a known mixture, reproducibility,
 * re-seeding of empty components and every error path. */

#define MAXK 6
#define MAXD 3

static const lse_cov_type all_cov[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                       LSE_COV_SPHERICAL, LSE_COV_TIED};

/* ------------------------------------------------------------------ */
/* Data                                                                */

static gsl_matrix *read_faithful(void)
{
    FILE *f = fopen(LSE_DATA_DIR "/faithful.csv", "r");
    ck_assert_msg(f != NULL, "cannot open faithful.csv");
    char line[256];
    ck_assert(fgets(line, sizeof line, f) != NULL);
    static double buf[2 * 400];
    size_t n = 0;
    while (n < 400 && fscanf(f, "%lf,%lf", &buf[2 * n], &buf[2 * n + 1]) == 2)
        n++;
    fclose(f);
    ck_assert_uint_eq(n, 272);
    gsl_matrix *x = gsl_matrix_alloc(n, 2);
    for (size_t i = 0; i < n; i++) {
        gsl_matrix_set(x, i, 0, buf[2 * i]);
        gsl_matrix_set(x, i, 1, buf[2 * i + 1]);
    }
    return x;
}

/* First n rows of faithful, standardized column by column. */
static gsl_matrix *faithful_std(size_t n)
{
    gsl_matrix *all = read_faithful();
    gsl_matrix *x = gsl_matrix_alloc(n, 2);
    for (size_t j = 0; j < 2; j++) {
        double m = 0, s = 0;
        for (size_t i = 0; i < all->size1; i++)
            m += gsl_matrix_get(all, i, j);
        m /= (double)all->size1;
        for (size_t i = 0; i < all->size1; i++)
            s += pow(gsl_matrix_get(all, i, j) - m, 2);
        s = sqrt(s / (double)all->size1);
        for (size_t i = 0; i < n; i++)
            gsl_matrix_set(x, i, j, (gsl_matrix_get(all, i, j) - m) / s);
    }
    gsl_matrix_free(all);
    return x;
}

static double rel(double a, double b)
{
    const double s = fmax(fabs(a), fabs(b));
    return s > 0 ? fabs(a - b) / s : 0.0;
}

/* ------------------------------------------------------------------ */
/* Textbook GMM, written independently of the library                  */

typedef struct tb {
    size_t k, d;
    lse_cov_type cov;
    double w[MAXK];
    double mu[MAXK][MAXD];
    double s[MAXK][MAXD][MAXD]; /* full matrix per component (tied: equal) */
} tb;

/* Total log-likelihood; per (N) and resp (N*K) may be NULL. Uses
 * gsl_ran_multivariate_gaussian_log_pdf. */
static double tb_loglik(const tb *t, const gsl_matrix *x, double *per,
                        double *resp)
{
    const size_t n = x->size1, K = t->k, d = t->d;
    gsl_matrix *L[MAXK];
    gsl_vector *mu[MAXK];
    gsl_vector *work = gsl_vector_alloc(d);
    for (size_t k = 0; k < K; k++) {
        L[k] = gsl_matrix_alloc(d, d);
        mu[k] = gsl_vector_alloc(d);
        for (size_t i = 0; i < d; i++) {
            gsl_vector_set(mu[k], i, t->mu[k][i]);
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(L[k], i, j, t->s[k][i][j]);
        }
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(L[k]), 0);
    }
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        gsl_vector_const_view xi = gsl_matrix_const_row(x, i);
        double lp[MAXK], mx = -INFINITY;
        for (size_t k = 0; k < K; k++) {
            double v;
            ck_assert_int_eq(gsl_ran_multivariate_gaussian_log_pdf(
                                 &xi.vector, mu[k], L[k], &v, work),
                             0);
            lp[k] = log(t->w[k]) + v;
            if (lp[k] > mx)
                mx = lp[k];
        }
        double s = 0.0;
        for (size_t k = 0; k < K; k++)
            s += exp(lp[k] - mx);
        const double ll = mx + log(s);
        if (per != NULL)
            per[i] = ll;
        if (resp != NULL)
            for (size_t k = 0; k < K; k++)
                resp[i * K + k] = exp(lp[k] - ll);
        total += ll;
    }
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_free(L[k]);
        gsl_vector_free(mu[k]);
    }
    gsl_vector_free(work);
    return total;
}

/* One EM iteration: textbook updates (Bishop, PRML sec. 9.2.2) with
 * scikit-learn's reg_covar and covariance structures. wt: sample weights
 * or NULL. */
static void tb_em_step(tb *t, const gsl_matrix *x, const double *wt, double reg)
{
    const size_t n = x->size1, K = t->k, d = t->d;
    double *r = malloc(n * K * sizeof *r);
    tb_loglik(t, x, NULL, r);
    if (wt != NULL)
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < K; k++)
                r[i * K + k] *= wt[i];
    double nk[MAXK], total = 0.0;
    double pooled[MAXD][MAXD] = {{0}};
    for (size_t k = 0; k < K; k++) {
        nk[k] = 0.0;
        for (size_t i = 0; i < n; i++)
            nk[k] += r[i * K + k];
        total += nk[k];
    }
    for (size_t k = 0; k < K; k++) {
        for (size_t j = 0; j < d; j++) {
            double m = 0.0;
            for (size_t i = 0; i < n; i++)
                m += r[i * K + k] * gsl_matrix_get(x, i, j);
            t->mu[k][j] = m / nk[k];
        }
        double c[MAXD][MAXD];
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++) {
                double s = 0.0;
                for (size_t i = 0; i < n; i++)
                    s += r[i * K + k] *
                         (gsl_matrix_get(x, i, a) - t->mu[k][a]) *
                         (gsl_matrix_get(x, i, b) - t->mu[k][b]);
                c[a][b] = s / nk[k];
                pooled[a][b] += s;
            }
        double tr = 0.0;
        for (size_t a = 0; a < d; a++)
            tr += c[a][a];
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++) {
                double v = 0.0;
                switch (t->cov) {
                case LSE_COV_FULL:
                    v = c[a][b];
                    break;
                case LSE_COV_DIAG:
                    v = a == b ? c[a][a] : 0.0;
                    break;
                case LSE_COV_SPHERICAL:
                    v = a == b ? tr / (double)d : 0.0;
                    break;
                case LSE_COV_TIED:
                    break;
                }
                t->s[k][a][b] = v + (a == b ? reg : 0.0);
            }
        t->w[k] = nk[k] / total;
    }
    if (t->cov == LSE_COV_TIED)
        for (size_t k = 0; k < K; k++)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++)
                    t->s[k][a][b] = pooled[a][b] / total + (a == b ? reg : 0);
    free(r);
}

/* Faithful starting point (K = 2 or 3) in the structure of cov. */
static tb tb_start(size_t K, lse_cov_type cov)
{
    tb t;
    memset(&t, 0, sizeof t);
    t.k = K;
    t.d = 2;
    t.cov = cov;
    static const double mu3[3][2] = {{2.0, 55.0}, {3.5, 70.0}, {4.5, 82.0}};
    static const double mu2[2][2] = {{2.0, 55.0}, {4.3, 80.0}};
    static const double w3[3] = {0.3, 0.3, 0.4}, w2[2] = {0.4, 0.6};
    static const double full[2][2] = {{0.3, 1.2}, {1.2, 40.0}};
    for (size_t k = 0; k < K; k++) {
        t.w[k] = K == 3 ? w3[k] : w2[k];
        for (size_t j = 0; j < 2; j++)
            t.mu[k][j] = K == 3 ? mu3[k][j] : mu2[k][j];
        const double scale = 1.0 + 0.25 * (double)k * (cov != LSE_COV_TIED);
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++) {
                double v = full[a][b] * scale;
                if (cov == LSE_COV_DIAG && a != b)
                    v = 0.0;
                if (cov == LSE_COV_SPHERICAL)
                    v = a == b ? 10.0 * scale : 0.0;
                t.s[k][a][b] = v;
            }
    }
    return t;
}

/* Native covariance matrix of t for lse_gmm_set_covariances. */
static gsl_matrix *tb_native_cov(const tb *t)
{
    const size_t K = t->k, d = t->d;
    gsl_matrix *c = NULL;
    switch (t->cov) {
    case LSE_COV_FULL:
        c = gsl_matrix_alloc(K * d, d);
        for (size_t k = 0; k < K; k++)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++)
                    gsl_matrix_set(c, k * d + a, b, t->s[k][a][b]);
        break;
    case LSE_COV_TIED:
        c = gsl_matrix_alloc(d, d);
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++)
                gsl_matrix_set(c, a, b, t->s[0][a][b]);
        break;
    case LSE_COV_DIAG:
        c = gsl_matrix_alloc(K, d);
        for (size_t k = 0; k < K; k++)
            for (size_t a = 0; a < d; a++)
                gsl_matrix_set(c, k, a, t->s[k][a][a]);
        break;
    case LSE_COV_SPHERICAL:
        c = gsl_matrix_alloc(K, 1);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(c, k, 0, t->s[k][0][0]);
        break;
    }
    return c;
}

static lse_gmm *model_from_tb(const tb *t)
{
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(t->k, t->d, t->cov, &m, NULL));
    gsl_vector *w = gsl_vector_alloc(t->k);
    gsl_matrix *mu = gsl_matrix_alloc(t->k, t->d);
    for (size_t k = 0; k < t->k; k++) {
        gsl_vector_set(w, k, t->w[k]);
        for (size_t j = 0; j < t->d; j++)
            gsl_matrix_set(mu, k, j, t->mu[k][j]);
    }
    gsl_matrix *c = tb_native_cov(t);
    lse_assert_ok(lse_gmm_set_weights(m, w, &err));
    lse_assert_ok(lse_gmm_set_means(m, mu, &err));
    lse_assert_ok(lse_gmm_set_covariances(m, c, &err));
    gsl_vector_free(w);
    gsl_matrix_free(mu);
    gsl_matrix_free(c);
    return m;
}

/* Largest relative difference between the model's and t's parameters. */
static double param_diff(const lse_gmm *m, const tb *t)
{
    double worst = 0.0;
    gsl_matrix *c = gsl_matrix_alloc(t->d, t->d);
    for (size_t k = 0; k < t->k; k++) {
        worst =
            fmax(worst, rel(gsl_vector_get(lse_gmm_weights(m), k), t->w[k]));
        for (size_t j = 0; j < t->d; j++)
            worst = fmax(worst, rel(gsl_matrix_get(lse_gmm_means(m), k, j),
                                    t->mu[k][j]));
        lse_assert_ok(lse_gmm_get_covariance(m, k, c));
        for (size_t a = 0; a < t->d; a++)
            for (size_t b = 0; b < t->d; b++)
                worst =
                    fmax(worst, rel(gsl_matrix_get(c, a, b), t->s[k][a][b]));
    }
    gsl_matrix_free(c);
    return worst;
}

/* ------------------------------------------------------------------ */
/* Energy = negative log-likelihood                                    */

START_TEST(test_energy_is_nll)
{
    gsl_matrix *x = read_faithful();
    for (size_t c = 0; c < 4; c++) {
        const tb t = tb_start(3, all_cov[c]);
        lse_gmm *m = model_from_tb(&t);
        lse_graph *g = NULL;
        lse_error err;
        lse_assert_ok(lse_gmm_graph_new(m, x, &g, &err));
        double e;
        lse_assert_ok(lse_graph_energy(g, &e));
        double per[272];
        const double ll = tb_loglik(&t, x, per, NULL);
        ck_assert_msg(rel(e, -ll) < 1e-12, "%s: energy %.17g, -loglik %.17g",
                      lse_gmm_cov_name(all_cov[c]), e, -ll);
        gsl_vector *s = gsl_vector_alloc(x->size1);
        lse_assert_ok(lse_gmm_score_samples(m, x, s, &err));
        for (size_t i = 0; i < x->size1; i++)
            ck_assert_msg(rel(gsl_vector_get(s, i), per[i]) < 1e-12,
                          "sample %zu: %.17g vs %.17g", i, gsl_vector_get(s, i),
                          per[i]);
        gsl_vector_free(s);
        lse_graph_free(g);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_graph_shape)
{
    gsl_matrix *x = read_faithful();
    const tb t = tb_start(2, LSE_COV_TIED);
    lse_gmm *m = model_from_tb(&t);
    lse_graph *g = NULL;
    lse_assert_ok(lse_gmm_graph_new(m, x, &g, NULL));
    lse_node *xn = lse_graph_find_node(g, "x");
    lse_node *mu = lse_graph_find_node(g, "mu");
    lse_node *lw = lse_graph_find_node(g, "logw");
    lse_node *ch = lse_graph_find_node(g, "chol");
    lse_term *term = lse_graph_find_term(g, "mixture");
    ck_assert(xn != NULL && mu != NULL && lw != NULL && ch != NULL);
    ck_assert(term != NULL);
    ck_assert(lse_node_is_clamped(xn));
    ck_assert(lse_node_is_param(mu) && lse_node_is_param(lw) &&
              lse_node_is_param(ch));
    ck_assert_uint_eq(lse_node_rows(xn), 272);
    ck_assert_uint_eq(lse_node_rows(ch), 1); /* tied: one factor */
    ck_assert_uint_eq(lse_node_dim(ch), 4);
    ck_assert_ptr_eq(lse_term_sim(term), lse_sim_gaussian);
    ck_assert_ptr_eq(lse_term_param(term, 0), lw);
    ck_assert_ptr_eq(lse_term_param(term, 1), ch);
    ck_assert_uint_eq(lse_graph_n_terms(g), 1);
    lse_graph_free(g);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* EM = textbook EM, iteration by iteration (the acceptance test)      */

START_TEST(test_em_equals_textbook)
{
    gsl_matrix *x = read_faithful();
    const size_t Ks[2] = {2, 3};
    for (size_t c = 0; c < 4; c++)
        for (size_t ki = 0; ki < 2; ki++) {
            tb t = tb_start(Ks[ki], all_cov[c]);
            lse_gmm *m = model_from_tb(&t);
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.init = LSE_GMM_INIT_GIVEN;
            o.max_iter = 1;
            o.tol = 0.0;
            o.reg_covar = 1e-6;
            lse_error err;
            for (size_t it = 0; it < 30; it++) {
                lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
                tb_em_step(&t, x, NULL, o.reg_covar);
                const double ll = tb_loglik(&t, x, NULL, NULL);
                const lse_gmm_fit_info *info = lse_gmm_info(m);
                ck_assert_uint_eq(info->n_iter, 1);
                ck_assert_msg(rel(info->loglik, ll) < 1e-10,
                              "%s K=%zu it %zu: loglik %.17g vs %.17g",
                              lse_gmm_cov_name(all_cov[c]), Ks[ki], it,
                              info->loglik, ll);
                const double pd = param_diff(m, &t);
                ck_assert_msg(pd < 1e-10, "%s K=%zu it %zu: params differ %g",
                              lse_gmm_cov_name(all_cov[c]), Ks[ki], it, pd);
            }
            ck_assert_uint_eq(lse_gmm_n_events(m), 0);
            lse_gmm_free(m);
        }
    gsl_matrix_free(x);
}
END_TEST

/* Frequency weights: weighted EM on x equals EM on x with rows repeated,
 * and equals the weighted textbook EM. */
START_TEST(test_weighted_em_equals_repeated_rows)
{
    gsl_matrix *x = read_faithful();
    const size_t n = x->size1;
    gsl_vector *w = gsl_vector_alloc(n);
    double wt[272];
    size_t n_rep = 0;
    for (size_t i = 0; i < n; i++) {
        wt[i] = (double)(i % 3); /* 0, 1, 2: zero weights included */
        gsl_vector_set(w, i, wt[i]);
        n_rep += i % 3;
    }
    gsl_matrix *xr = gsl_matrix_alloc(n_rep, 2);
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < i % 3; c++) {
            gsl_vector_const_view row = gsl_matrix_const_row(x, i);
            gsl_matrix_set_row(xr, r++, &row.vector);
        }
    for (size_t c = 0; c < 4; c++) {
        tb t = tb_start(3, all_cov[c]);
        lse_gmm *mw = model_from_tb(&t);
        lse_gmm *mr = model_from_tb(&t);
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        o.max_iter = 1;
        o.tol = 0.0;
        for (size_t it = 0; it < 10; it++) {
            o.sample_weight = w;
            lse_assert_ok(lse_gmm_fit(mw, x, &o, NULL));
            o.sample_weight = NULL;
            lse_assert_ok(lse_gmm_fit(mr, xr, &o, NULL));
            tb_em_step(&t, x, wt, o.reg_covar);
            ck_assert(param_diff(mw, &t) < 1e-10);
            ck_assert(param_diff(mr, &t) < 1e-10);
            ck_assert(rel(lse_gmm_info(mw)->loglik, lse_gmm_info(mr)->loglik) <
                      1e-10);
            ck_assert_double_eq(lse_gmm_info(mw)->n_eff, (double)n_rep);
        }
        lse_gmm_free(mw);
        lse_gmm_free(mr);
    }
    gsl_matrix_free(xr);
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Monotone EM                                                         */

#define TRACE_CAP 20000

typedef struct trace {
    double e[TRACE_CAP];
    size_t n[8];
    size_t calls;
} trace;

static void record(size_t run, size_t iter, double energy, double change,
                   void *user)
{
    trace *tr = user;
    ck_assert_uint_lt(run, 8);
    ck_assert_uint_eq(iter, tr->n[run] + 1);
    if (iter > 1)
        ck_assert(isfinite(change));
    ck_assert_uint_lt(tr->calls, TRACE_CAP);
    tr->e[tr->calls] = energy;
    tr->calls++;
    tr->n[run]++;
}

START_TEST(test_monotone)
{
    gsl_matrix *x = read_faithful();
    for (size_t c = 0; c < 4; c++) {
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(3, 2, all_cov[c], &m, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.max_iter = 300;
        o.tol = 0.0;
        o.seed = 7;
        static trace tr;
        memset(&tr, 0, sizeof tr);
        o.progress = record;
        o.progress_user = &tr;
        lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
        const lse_gmm_fit_info *info = lse_gmm_info(m);
        ck_assert_uint_eq(lse_gmm_n_events(m), 0);
        ck_assert_uint_eq(info->n_increase, 0);
        ck_assert_uint_eq(tr.calls, info->n_iter);
        ck_assert_uint_gt(tr.calls, 2);
        for (size_t i = 1; i < tr.calls; i++)
            ck_assert_msg(tr.e[i] <= tr.e[i - 1] + 1e-12 * fabs(tr.e[i - 1]),
                          "%s: energy rose at %zu: %.17g -> %.17g",
                          lse_gmm_cov_name(all_cov[c]), i, tr.e[i - 1],
                          tr.e[i]);
        /* the final log-likelihood is at least the last E-step's */
        ck_assert(info->loglik >= -tr.e[tr.calls - 1] - 1e-9);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Whole-graph gradient                                                */

START_TEST(test_graph_gradient)
{
    gsl_matrix *x = faithful_std(40);
    static const double mus[3][2] = {
        {0.4127, -0.9031}, {-0.7718, 0.3318}, {1.1021, 0.6675}};
    static const double ws[3] = {0.2713, 0.4109, 0.3178};
    for (size_t c = 0; c < 4; c++) {
        tb t;
        memset(&t, 0, sizeof t);
        t.k = 3;
        t.d = 2;
        t.cov = all_cov[c];
        for (size_t k = 0; k < 3; k++) {
            t.w[k] = ws[k];
            t.mu[k][0] = mus[k][0];
            t.mu[k][1] = mus[k][1];
            const double s = t.cov == LSE_COV_TIED ? 1.0 : 0.8 + 0.3127 * k;
            t.s[k][0][0] = 0.7391 * s;
            t.s[k][1][1] = t.cov == LSE_COV_SPHERICAL ? 0.7391 * s : 1.2207 * s;
            const double off = t.cov == LSE_COV_FULL || t.cov == LSE_COV_TIED
                                   ? 0.3413 * s
                                   : 0.0;
            t.s[k][0][1] = t.s[k][1][0] = off;
        }
        lse_gmm *m = model_from_tb(&t);
        lse_graph *g = NULL;
        lse_assert_ok(lse_gmm_graph_new(m, x, &g, NULL));
        const char *names[3] = {"mu", "logw", "chol"};
        for (size_t i = 0; i < 3; i++) {
            lse_gradcheck res;
            lse_assert_ok(lse_graph_check_gradient(
                g, lse_graph_find_node(g, names[i]), 1e-6, 1.0, &res));
            ck_assert_uint_gt(res.n_checked, 0);
            ck_assert_msg(res.max_error < 1e-6, "%s %s: error %g at %s",
                          lse_gmm_cov_name(all_cov[c]), names[i], res.max_error,
                          res.where);
        }
        lse_graph_free(g);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Recovery of a known mixture                                         */

static const double true_w[3] = {0.5, 0.3, 0.2};
static const double true_mu[3][2] = {{0.0, 0.0}, {5.0, 1.0}, {1.0, 6.0}};
static const double true_s[3][2][2] = {{{1.0, 0.5}, {0.5, 1.0}},
                                       {{0.6, -0.2}, {-0.2, 0.4}},
                                       {{1.5, 0.0}, {0.0, 0.3}}};

/* N samples of the true mixture, drawn here with GSL alone. */
static gsl_matrix *draw_truth(size_t n, unsigned long seed, size_t *labels)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    gsl_matrix *x = gsl_matrix_alloc(n, 2);
    for (size_t i = 0; i < n; i++) {
        const double u = gsl_rng_uniform(rng);
        const size_t k = u < true_w[0] ? 0 : u < true_w[0] + true_w[1] ? 1 : 2;
        const double l00 = sqrt(true_s[k][0][0]);
        const double l10 = true_s[k][1][0] / l00;
        const double l11 = sqrt(true_s[k][1][1] - l10 * l10);
        const double z0 = gsl_ran_gaussian(rng, 1.0);
        const double z1 = gsl_ran_gaussian(rng, 1.0);
        gsl_matrix_set(x, i, 0, true_mu[k][0] + l00 * z0);
        gsl_matrix_set(x, i, 1, true_mu[k][1] + l10 * z0 + l11 * z1);
        if (labels != NULL)
            labels[i] = k;
    }
    gsl_rng_free(rng);
    return x;
}

/* match[k] = fitted component whose mean is nearest the true mean k */
static void match_components(const lse_gmm *m, size_t match[3])
{
    for (size_t k = 0; k < 3; k++) {
        double best = INFINITY;
        for (size_t j = 0; j < 3; j++) {
            const double d0 =
                gsl_matrix_get(lse_gmm_means(m), j, 0) - true_mu[k][0];
            const double d1 =
                gsl_matrix_get(lse_gmm_means(m), j, 1) - true_mu[k][1];
            if (d0 * d0 + d1 * d1 < best) {
                best = d0 * d0 + d1 * d1;
                match[k] = j;
            }
        }
    }
    ck_assert(match[0] != match[1] && match[1] != match[2] &&
              match[0] != match[2]);
}

START_TEST(test_recovery)
{
    gsl_matrix *x = draw_truth(3000, 20240611UL, NULL);
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.seed = 3;
    o.n_init = 3;
    o.tol = 1e-8;
    o.max_iter = 500;
    lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
    ck_assert(lse_gmm_info(m)->converged);
    size_t match[3];
    match_components(m, match);
    gsl_matrix *c = gsl_matrix_alloc(2, 2);
    for (size_t k = 0; k < 3; k++) {
        const size_t j = match[k];
        /* weights: 3 standard errors (se <= 0.0092) */
        ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(m), j),
                                true_w[k], 0.03);
        lse_assert_ok(lse_gmm_get_covariance(m, j, c));
        for (size_t a = 0; a < 2; a++) {
            /* means: 0.15 sd, ~3.7 standard errors at N_k >= 600 */
            ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(m), j, a),
                                    true_mu[k][a],
                                    0.15 * sqrt(true_s[k][a][a]));
            for (size_t b = 0; b < 2; b++)
                /* covariances: 0.2 sqrt(S_aa S_bb), >= 3.4 standard errors */
                ck_assert_double_eq_tol(
                    gsl_matrix_get(c, a, b), true_s[k][a][b],
                    0.2 * sqrt(true_s[k][a][a] * true_s[k][b][b]));
        }
    }
    /* the fit explains the data at least as well as the truth */
    tb t;
    memset(&t, 0, sizeof t);
    t.k = 3;
    t.d = 2;
    t.cov = LSE_COV_FULL;
    memcpy(t.w, true_w, sizeof true_w);
    for (size_t k = 0; k < 3; k++)
        for (size_t a = 0; a < 2; a++) {
            t.mu[k][a] = true_mu[k][a];
            for (size_t b = 0; b < 2; b++)
                t.s[k][a][b] = true_s[k][a][b];
        }
    ck_assert(lse_gmm_info(m)->loglik >= tb_loglik(&t, x, NULL, NULL));
    gsl_matrix_free(c);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* BIC selects K = 3 on data from the 3-component truth. */
START_TEST(test_bic_selects_k)
{
    gsl_matrix *x = draw_truth(1500, 99UL, NULL);
    double bic[5];
    size_t best = 0;
    for (size_t k = 1; k <= 5; k++) {
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(k, 2, LSE_COV_FULL, &m, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.seed = 5;
        o.n_init = 2;
        lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
        bic[k - 1] = lse_gmm_info(m)->bic;
        /* the fit's BIC equals lse_gmm_bic on the training data */
        double b;
        lse_assert_ok(lse_gmm_bic(m, x, &b, NULL));
        ck_assert(rel(b, bic[k - 1]) < 1e-12);
        if (bic[k - 1] < bic[best])
            best = k - 1;
        lse_gmm_free(m);
    }
    ck_assert_uint_eq(best + 1, 3);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Reproducibility and n_init                                          */

static int same_model(const lse_gmm *a, const lse_gmm *b)
{
    const gsl_matrix *ca = lse_gmm_covariances(a);
    const gsl_matrix *cb = lse_gmm_covariances(b);
    for (size_t i = 0; i < ca->size1; i++)
        for (size_t j = 0; j < ca->size2; j++)
            if (gsl_matrix_get(ca, i, j) != gsl_matrix_get(cb, i, j))
                return 0;
    for (size_t k = 0; k < lse_gmm_k(a); k++) {
        if (gsl_vector_get(lse_gmm_weights(a), k) !=
            gsl_vector_get(lse_gmm_weights(b), k))
            return 0;
        for (size_t j = 0; j < lse_gmm_dim(a); j++)
            if (gsl_matrix_get(lse_gmm_means(a), k, j) !=
                gsl_matrix_get(lse_gmm_means(b), k, j))
                return 0;
    }
    return lse_gmm_info(a)->loglik == lse_gmm_info(b)->loglik &&
           lse_gmm_info(a)->n_iter == lse_gmm_info(b)->n_iter;
}

START_TEST(test_same_seed_identical)
{
    gsl_matrix *x = read_faithful();
    const lse_gmm_init inits[2] = {LSE_GMM_INIT_KMEANSPP, LSE_GMM_INIT_RANDOM};
    for (size_t c = 0; c < 4; c++)
        for (size_t i = 0; i < 2; i++) {
            lse_gmm *a = NULL, *b = NULL, *d = NULL;
            lse_assert_ok(lse_gmm_new(4, 2, all_cov[c], &a, NULL));
            lse_assert_ok(lse_gmm_new(4, 2, all_cov[c], &b, NULL));
            lse_assert_ok(lse_gmm_new(4, 2, all_cov[c], &d, NULL));
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.init = inits[i];
            o.n_init = 2;
            o.seed = 11;
            lse_assert_ok(lse_gmm_fit(a, x, &o, NULL));
            lse_assert_ok(lse_gmm_fit(b, x, &o, NULL));
            ck_assert(same_model(a, b));
            o.seed = 12; /* a different seed starts elsewhere */
            o.max_iter = 0;
            lse_assert_ok(lse_gmm_fit(d, x, &o, NULL));
            ck_assert(!same_model(a, d));
            lse_gmm_free(a);
            lse_gmm_free(b);
            lse_gmm_free(d);
        }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_n_init_picks_best)
{
    gsl_matrix *x = read_faithful();
    lse_gmm *m1 = NULL, *m8 = NULL;
    lse_assert_ok(lse_gmm_new(5, 2, LSE_COV_FULL, &m1, NULL));
    lse_assert_ok(lse_gmm_new(5, 2, LSE_COV_FULL, &m8, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.init = LSE_GMM_INIT_RANDOM;
    o.seed = 2;
    o.tol = 1e-9;
    o.max_iter = 1000;
    o.n_init = 1;
    lse_assert_ok(lse_gmm_fit(m1, x, &o, NULL));
    static trace tr;
    memset(&tr, 0, sizeof tr);
    o.n_init = 8;
    o.progress = record;
    o.progress_user = &tr;
    lse_assert_ok(lse_gmm_fit(m8, x, &o, NULL));
    const lse_gmm_fit_info *i1 = lse_gmm_info(m1), *i8 = lse_gmm_info(m8);
    /* run 0 of the 8 is the single run (same random stream) */
    ck_assert_uint_eq(tr.n[0], i1->n_iter);
    ck_assert(i8->loglik >= i1->loglik);
    /* the kept run has the best final energy of all runs (last E-step
     * energies, within the convergence tolerance) */
    size_t off = 0, best = 0;
    double best_e = INFINITY, runs_e[8];
    for (size_t r = 0; r < 8; r++) {
        off += tr.n[r];
        runs_e[r] = tr.e[off - 1];
        if (runs_e[r] < best_e) {
            best_e = runs_e[r];
            best = r;
        }
    }
    int distinct = 0;
    for (size_t r = 0; r < 8; r++) {
        ck_assert(i8->loglik >= -runs_e[r] - 1e-9 * 272);
        distinct += fabs(runs_e[r] - runs_e[0]) > 1e-3;
    }
    ck_assert_msg(distinct > 0, "all runs reached the same optimum: the test "
                                "cannot tell the runs apart");
    ck_assert(fabs(runs_e[i8->best_run] - best_e) < 1e-6);
    (void)best;
    lse_gmm_free(m1);
    lse_gmm_free(m8);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Collapse: empty components are re-seeded                            */

typedef struct logbuf {
    size_t n_warn;
    char last[256];
} logbuf;

static void capture(lse_log_level level, const char *msg, void *user)
{
    logbuf *b = user;
    if (level == LSE_LOG_WARN && strstr(msg, "re-seeded") != NULL) {
        b->n_warn++;
        snprintf(b->last, sizeof b->last, "%s", msg);
    }
}

/* 3 distinct points, each 10 times. */
static gsl_matrix *duplicates(void)
{
    static const double p[3][2] = {{0.0, 0.0}, {3.0, 1.0}, {-1.0, 4.0}};
    gsl_matrix *x = gsl_matrix_alloc(30, 2);
    for (size_t i = 0; i < 30; i++) {
        gsl_matrix_set(x, i, 0, p[i % 3][0]);
        gsl_matrix_set(x, i, 1, p[i % 3][1]);
    }
    return x;
}

START_TEST(test_collapse_reseeds)
{
    gsl_matrix *x = duplicates();
    for (size_t c = 0; c < 4; c++) {
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(5, 2, all_cov[c], &m, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.seed = 4;
        logbuf lb = {0};
        lse_set_log_handler(capture, &lb);
        lse_error err;
        const lse_status st = lse_gmm_fit(m, x, &o, &err);
        lse_set_log_handler(NULL, NULL);
        ck_assert_msg(st == LSE_OK, "%s: %s", lse_gmm_cov_name(all_cov[c]),
                      err.message);
        const size_t ne = lse_gmm_n_events(m);
        ck_assert_uint_gt(ne, 0);
        ck_assert_uint_eq(lb.n_warn, ne);
        ck_assert(strstr(lb.last, "component") != NULL);
        for (size_t i = 0; i < ne; i++) {
            const lse_gmm_event *e = lse_gmm_event_get(m, i);
            ck_assert(e != NULL);
            ck_assert_uint_lt(e->component, 5);
            ck_assert_uint_lt(e->sample, 30);
            ck_assert_int_eq(e->action, LSE_GMM_RESEED);
            ck_assert_uint_eq(e->run, 0);
        }
        ck_assert(lse_gmm_event_get(m, ne) == NULL);
        const lse_gmm_fit_info *info = lse_gmm_info(m);
        ck_assert(isfinite(info->loglik));
        double sum = 0.0;
        for (size_t k = 0; k < 5; k++) {
            const double w = gsl_vector_get(lse_gmm_weights(m), k);
            ck_assert(w > 0.0 && isfinite(w));
            sum += w;
        }
        ck_assert_double_eq_tol(sum, 1.0, 1e-12);
        /* every distinct point keeps a component on it */
        size_t labels[30];
        lse_assert_ok(lse_gmm_predict(m, x, labels, NULL));
        for (size_t i = 0; i < 30; i++) {
            const gsl_matrix *mu = lse_gmm_means(m);
            const double d0 =
                gsl_matrix_get(mu, labels[i], 0) - gsl_matrix_get(x, i, 0);
            const double d1 =
                gsl_matrix_get(mu, labels[i], 1) - gsl_matrix_get(x, i, 1);
            ck_assert(d0 * d0 + d1 * d1 < 1e-6);
        }
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

/* A component far from every sample gets exactly zero responsibility in
 * the first E-step: the solver's M-step hook re-seeds it at the sample
 * with the lowest log-likelihood under the model of that E-step. */
START_TEST(test_reseed_in_em)
{
    gsl_matrix *x = read_faithful();
    for (size_t c = 0; c < 4; c++) {
        tb t = tb_start(3, all_cov[c]);
        t.mu[2][0] = 100.0;
        t.mu[2][1] = 1000.0;
        lse_gmm *m = model_from_tb(&t);
        /* the lowest log-likelihood under the starting model */
        gsl_vector *ll = gsl_vector_alloc(272);
        lse_assert_ok(lse_gmm_score_samples(m, x, ll, NULL));
        const size_t lowest = gsl_vector_min_index(ll);
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        o.max_iter = 1;
        lse_error err;
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        ck_assert_uint_eq(lse_gmm_n_events(m), 1);
        const lse_gmm_event *e = lse_gmm_event_get(m, 0);
        ck_assert_uint_eq(e->iteration, 1);
        ck_assert_uint_eq(e->component, 2);
        ck_assert_uint_eq(e->sample, lowest);
        for (size_t j = 0; j < 2; j++)
            ck_assert_double_eq(gsl_matrix_get(lse_gmm_means(m), 2, j),
                                gsl_matrix_get(x, lowest, j));
        /* it took half the weight of the component that owned the sample */
        const double w2 = gsl_vector_get(lse_gmm_weights(m), 2);
        ck_assert(w2 > 0.05);
        int shared = 0;
        for (size_t k = 0; k < 2; k++)
            shared += rel(gsl_vector_get(lse_gmm_weights(m), k), w2) < 1e-12;
        ck_assert_int_eq(shared, 1);
        /* the fit goes on from there */
        o.max_iter = 200;
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        ck_assert(isfinite(lse_gmm_info(m)->loglik));
        gsl_vector_free(ll);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

/* A singular covariance is an error naming the component and reg_covar. */
START_TEST(test_singular_covariance)
{
    gsl_matrix *x = duplicates();
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.reg_covar = 0.0;
    lse_error err;
    /* k-means++ puts a component on each point: the initial M-step fails */
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_ENUMERIC);
    ck_assert_int_eq(err.status, LSE_ENUMERIC);
    ck_assert_msg(strstr(err.message, "initial M-step") != NULL, "%s",
                  err.message);
    ck_assert_msg(strstr(err.message, "lse_gmm_fit") == err.message, "%s",
                  err.message);
    ck_assert_msg(strstr(err.message, "component") != NULL, "%s", err.message);
    ck_assert_msg(strstr(err.message, "reg_covar") != NULL, "%s", err.message);
    ck_assert(!lse_gmm_info(m)->fitted);
    /* from given broad components, an EM M-step fails once the
     * responsibilities underflow to exact 0/1 */
    gsl_matrix *mu = gsl_matrix_alloc(3, 2);
    static const double p[3][2] = {{0.1, 0.2}, {2.9, 1.1}, {-0.8, 3.7}};
    for (size_t k = 0; k < 3; k++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(mu, k, j, p[k][j]);
    lse_assert_ok(lse_gmm_set_means(m, mu, NULL));
    const gsl_matrix *before = lse_gmm_means(m);
    const double m00 = gsl_matrix_get(before, 0, 0);
    o.init = LSE_GMM_INIT_GIVEN;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_ENUMERIC);
    ck_assert_msg(strstr(err.message, "iteration ") != NULL &&
                      strstr(err.message, "initial") == NULL,
                  "%s", err.message);
    ck_assert_msg(strstr(err.message, "component") != NULL, "%s", err.message);
    ck_assert_msg(strstr(err.message, "reg_covar") != NULL, "%s", err.message);
    /* the model is unchanged by a failed fit */
    ck_assert_double_eq(gsl_matrix_get(lse_gmm_means(m), 0, 0), m00);
    /* with the default reg_covar the same fit succeeds */
    o.reg_covar = 1e-6;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    gsl_matrix_free(mu);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Queries                                                             */

START_TEST(test_queries)
{
    gsl_matrix *x = read_faithful();
    for (size_t c = 0; c < 4; c++) {
        const tb t = tb_start(3, all_cov[c]);
        lse_gmm *m = model_from_tb(&t);
        static double resp[272 * 3], per[272];
        const double ll = tb_loglik(&t, x, per, resp);
        gsl_matrix *r = gsl_matrix_alloc(272, 3);
        size_t labels[272];
        lse_assert_ok(lse_gmm_predict_proba(m, x, r, NULL));
        lse_assert_ok(lse_gmm_predict(m, x, labels, NULL));
        for (size_t i = 0; i < 272; i++) {
            size_t am = 0;
            for (size_t k = 0; k < 3; k++) {
                ck_assert_double_eq_tol(gsl_matrix_get(r, i, k),
                                        resp[i * 3 + k], 1e-12);
                if (resp[i * 3 + k] > resp[i * 3 + am])
                    am = k;
            }
            ck_assert_uint_eq(labels[i], am);
        }
        const double p = (double)lse_gmm_n_params(m);
        double bic, aic;
        lse_assert_ok(lse_gmm_bic(m, x, &bic, NULL));
        lse_assert_ok(lse_gmm_aic(m, x, &aic, NULL));
        ck_assert(rel(bic, -2 * ll + p * log(272.0)) < 1e-12);
        ck_assert(rel(aic, -2 * ll + 2 * p) < 1e-12);
        gsl_matrix_free(r);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_n_params)
{
    static const size_t want[4] = {17, 14, 11, 11}; /* K = 3, d = 2 */
    for (size_t c = 0; c < 4; c++) {
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(3, 2, all_cov[c], &m, NULL));
        ck_assert_uint_eq(lse_gmm_n_params(m), want[c]);
        lse_gmm_free(m);
    }
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(4, 5, LSE_COV_FULL, &m, NULL));
    ck_assert_uint_eq(lse_gmm_n_params(m), 4 * 15 + 20 + 3);
    lse_gmm_free(m);
}
END_TEST

START_TEST(test_sample)
{
    tb t;
    memset(&t, 0, sizeof t);
    t.k = 3;
    t.d = 2;
    t.cov = LSE_COV_FULL;
    memcpy(t.w, true_w, sizeof true_w);
    for (size_t k = 0; k < 3; k++)
        for (size_t a = 0; a < 2; a++) {
            t.mu[k][a] = true_mu[k][a];
            for (size_t b = 0; b < 2; b++)
                t.s[k][a][b] = true_s[k][a][b];
        }
    lse_gmm *m = model_from_tb(&t);
    const size_t n = 30000;
    gsl_matrix *s = gsl_matrix_alloc(n, 2), *s2 = gsl_matrix_alloc(n, 2);
    size_t *lab = malloc(n * sizeof *lab);
    lse_assert_ok(lse_gmm_sample(m, 8, s, lab, NULL));
    lse_assert_ok(lse_gmm_sample(m, 8, s2, NULL, NULL));
    ck_assert(gsl_matrix_equal(s, s2));
    double cnt[3] = {0}, mean[3][2] = {{0}}, cov[3][2][2] = {{{0}}};
    for (size_t i = 0; i < n; i++) {
        cnt[lab[i]]++;
        for (size_t a = 0; a < 2; a++)
            mean[lab[i]][a] += gsl_matrix_get(s, i, a);
    }
    for (size_t k = 0; k < 3; k++)
        for (size_t a = 0; a < 2; a++)
            mean[k][a] /= cnt[k];
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++)
                cov[lab[i]][a][b] +=
                    (gsl_matrix_get(s, i, a) - mean[lab[i]][a]) *
                    (gsl_matrix_get(s, i, b) - mean[lab[i]][b]) / cnt[lab[i]];
    for (size_t k = 0; k < 3; k++) {
        ck_assert_double_eq_tol(cnt[k] / (double)n, true_w[k], 0.015);
        for (size_t a = 0; a < 2; a++) {
            ck_assert_double_eq_tol(mean[k][a], true_mu[k][a], 0.05);
            for (size_t b = 0; b < 2; b++)
                ck_assert_double_eq_tol(cov[k][a][b], true_s[k][a][b], 0.08);
        }
    }
    free(lab);
    gsl_matrix_free(s);
    gsl_matrix_free(s2);
    lse_gmm_free(m);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Parameters                                                          */

START_TEST(test_covariance_roundtrip)
{
    for (size_t c = 0; c < 4; c++) {
        const tb t = tb_start(3, all_cov[c]);
        lse_gmm *m = model_from_tb(&t);
        gsl_matrix *want = tb_native_cov(&t);
        const gsl_matrix *got = lse_gmm_covariances(m);
        ck_assert_uint_eq(got->size1, want->size1);
        ck_assert_uint_eq(got->size2, want->size2);
        for (size_t i = 0; i < want->size1; i++)
            for (size_t j = 0; j < want->size2; j++)
                ck_assert(rel(gsl_matrix_get(got, i, j),
                              gsl_matrix_get(want, i, j)) < 1e-14);
        /* the full view of every type, and the factor: Sigma = L L' */
        gsl_matrix *full = gsl_matrix_alloc(2, 2);
        const gsl_matrix *L = lse_gmm_chol(m);
        for (size_t k = 0; k < 3; k++) {
            lse_assert_ok(lse_gmm_get_covariance(m, k, full));
            const size_t row = all_cov[c] == LSE_COV_TIED ? 0 : k;
            for (size_t a = 0; a < 2; a++)
                for (size_t b = 0; b < 2; b++) {
                    ck_assert(rel(gsl_matrix_get(full, a, b), t.s[k][a][b]) <
                              1e-14);
                    double s = 0.0;
                    if (all_cov[c] == LSE_COV_FULL ||
                        all_cov[c] == LSE_COV_TIED) {
                        for (size_t q = 0; q < 2; q++)
                            s += gsl_matrix_get(L, row, a * 2 + q) *
                                 gsl_matrix_get(L, row, b * 2 + q);
                    } else if (a == b) {
                        const double l = gsl_matrix_get(
                            L, row, all_cov[c] == LSE_COV_DIAG ? a : 0);
                        s = l * l;
                    }
                    ck_assert(rel(s, t.s[k][a][b]) < 1e-14);
                }
        }
        lse_assert_status(lse_gmm_get_covariance(m, 3, full), LSE_ERANGE);
        gsl_matrix_free(full);
        gsl_matrix_free(want);
        lse_gmm_free(m);
    }
}
END_TEST

START_TEST(test_setter_errors)
{
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    const gsl_matrix *chol0 = lse_gmm_chol(m);
    const double c00 = gsl_matrix_get(chol0, 0, 0);
    /* not positive definite: component 1 */
    gsl_matrix *c = gsl_matrix_alloc(4, 2);
    const double v[4][2] = {{1.0, 0.2}, {0.2, 1.0}, {1.0, 2.0}, {2.0, 1.0}};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(c, i, j, v[i][j]);
    lse_assert_status(lse_gmm_set_covariances(m, c, &err), LSE_ENUMERIC);
    ck_assert_msg(strstr(err.message, "component 1") != NULL, "%s",
                  err.message);
    ck_assert_double_eq(gsl_matrix_get(lse_gmm_chol(m), 0, 0), c00);
    /* not symmetric */
    gsl_matrix_set(c, 2, 1, 0.5);
    gsl_matrix_set(c, 3, 0, 0.4);
    lse_assert_status(lse_gmm_set_covariances(m, c, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "symmetric") != NULL);
    /* non-finite */
    gsl_matrix_set(c, 0, 0, NAN);
    lse_assert_status(lse_gmm_set_covariances(m, c, &err), LSE_ENONFINITE);
    /* wrong shape */
    gsl_matrix *c2 = gsl_matrix_alloc(2, 2);
    gsl_matrix_set_identity(c2);
    lse_assert_status(lse_gmm_set_covariances(m, c2, &err), LSE_EDIM);
    lse_assert_status(lse_gmm_set_covariances(m, NULL, &err), LSE_EFAULT);
    /* means */
    lse_assert_status(lse_gmm_set_means(m, c, &err), LSE_EDIM);
    gsl_matrix_set(c2, 1, 1, INFINITY);
    lse_assert_status(lse_gmm_set_means(m, c2, &err), LSE_ENONFINITE);
    /* weights */
    gsl_vector *w = gsl_vector_alloc(2);
    gsl_vector_set(w, 0, 0.5);
    gsl_vector_set(w, 1, -0.5);
    lse_assert_status(lse_gmm_set_weights(m, w, &err), LSE_EDOM);
    gsl_vector_set(w, 1, 0.0);
    lse_assert_status(lse_gmm_set_weights(m, w, &err), LSE_EDOM);
    gsl_vector_set(w, 1, NAN);
    lse_assert_status(lse_gmm_set_weights(m, w, &err), LSE_ENONFINITE);
    gsl_vector_set(w, 1, 1.5); /* normalized */
    lse_assert_ok(lse_gmm_set_weights(m, w, &err));
    ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(m), 0), 0.25, 1e-15);
    gsl_vector *w3 = gsl_vector_alloc(3);
    gsl_vector_set_all(w3, 1.0);
    lse_assert_status(lse_gmm_set_weights(m, w3, &err), LSE_EDIM);
    lse_gmm_free(m);
    /* diag and spherical variances must be > 0 */
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_DIAG, &m, NULL));
    gsl_matrix_set_all(c2, 1.0);
    gsl_matrix_set(c2, 1, 0, 0.0);
    lse_assert_status(lse_gmm_set_covariances(m, c2, &err), LSE_ENUMERIC);
    ck_assert(strstr(err.message, "component 1") != NULL);
    lse_gmm_free(m);
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_SPHERICAL, &m, NULL));
    gsl_matrix *c3 = gsl_matrix_alloc(2, 1);
    gsl_matrix_set(c3, 0, 0, 1.0);
    gsl_matrix_set(c3, 1, 0, -1.0);
    lse_assert_status(lse_gmm_set_covariances(m, c3, &err), LSE_ENUMERIC);
    lse_gmm_free(m);
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_TIED, &m, NULL));
    gsl_matrix_set(c2, 0, 0, 1.0);
    gsl_matrix_set(c2, 0, 1, 3.0);
    gsl_matrix_set(c2, 1, 0, 3.0);
    gsl_matrix_set(c2, 1, 1, 1.0);
    lse_assert_status(lse_gmm_set_covariances(m, c2, &err), LSE_ENUMERIC);
    ck_assert(strstr(err.message, "tied") != NULL);
    lse_gmm_free(m);
    gsl_matrix_free(c3);
    gsl_vector_free(w);
    gsl_vector_free(w3);
    gsl_matrix_free(c);
    gsl_matrix_free(c2);
}
END_TEST

/* The constructors report through the trailing lse_error like every other
 * model call: the status, and a message naming the function and the facts;
 * NULL is accepted for err. */
START_TEST(test_error_channel)
{
    lse_gmm *m = NULL;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_assert_status(lse_gmm_new(0, 2, LSE_COV_FULL, &m, &e), LSE_EINVAL);
    ck_assert_int_eq(e.status, LSE_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(e.message,
                     "lse_gmm_new: k = 0 and d = 2 must both be positive");
    lse_assert_status(lse_gmm_new(2, 2, (lse_cov_type)9, &m, &e), LSE_EINVAL);
    ck_assert_str_eq(e.message, "lse_gmm_new: unknown covariance type 9");
    lse_assert_status(lse_gmm_new(2, 2, LSE_COV_FULL, NULL, &e), LSE_EFAULT);
    ck_assert_int_eq(e.status, LSE_EFAULT);
    ck_assert_str_eq(e.message, "lse_gmm_new: NULL argument");
    lse_assert_status(lse_gmm_new_model(2, 2, (lse_cov_model)99, &m, &e),
                      LSE_EINVAL);
    ck_assert_str_eq(e.message,
                     "lse_gmm_new_model: unknown covariance model 99");
    ck_assert_ptr_null(m);
    lse_assert_status(lse_gmm_new_model(0, 2, LSE_COV_VEV, &m, &e),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_gmm_new: k = 0"));
    lse_assert_status(lse_gmm_new(0, 2, LSE_COV_FULL, &m, NULL), LSE_EINVAL);
}
END_TEST

START_TEST(test_fit_errors)
{
    lse_gmm *m = NULL;
    lse_error err;
    /* constructor */
    lse_assert_status(lse_gmm_new(0, 2, LSE_COV_FULL, &m, NULL), LSE_EINVAL);
    ck_assert(m == NULL);
    lse_assert_status(lse_gmm_new(2, 0, LSE_COV_FULL, &m, NULL), LSE_EINVAL);
    lse_assert_status(lse_gmm_new(2, 2, (lse_cov_type)9, &m, NULL), LSE_EINVAL);
    lse_assert_status(lse_gmm_new(2, 2, LSE_COV_FULL, NULL, NULL), LSE_EFAULT);
    lse_cov_type ct;
    lse_assert_ok(lse_gmm_cov_parse("spherical", &ct));
    ck_assert_int_eq(ct, LSE_COV_SPHERICAL);
    lse_assert_status(lse_gmm_cov_parse("round", &ct), LSE_EINVAL);

    /* K > N */
    gsl_matrix *x3 = gsl_matrix_alloc(3, 2);
    for (size_t i = 0; i < 6; i++)
        x3->data[i] = 0.4127 * (double)i;
    lse_assert_ok(lse_gmm_new(5, 2, LSE_COV_FULL, &m, NULL));
    lse_assert_status(lse_gmm_fit(m, x3, NULL, &err), LSE_EINVAL);
    ck_assert_str_eq(err.message, "lse_gmm_fit: k = 5 > 3 samples");
    lse_gmm_free(m);

    gsl_matrix *x = read_faithful();
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    /* d mismatch */
    gsl_matrix *x1 = gsl_matrix_alloc(272, 3);
    gsl_matrix_set_all(x1, 1.0);
    lse_assert_status(lse_gmm_fit(m, x1, NULL, &err), LSE_EDIM);
    ck_assert(strstr(err.message, "3 columns") != NULL);
    /* NaN */
    gsl_matrix_set(x, 5, 1, NAN);
    lse_assert_status(lse_gmm_fit(m, x, NULL, &err), LSE_ENONFINITE);
    ck_assert_msg(strstr(err.message, "row 5, column 1") != NULL, "%s",
                  err.message);
    gsl_vector *ll = gsl_vector_alloc(272);
    lse_assert_status(lse_gmm_score_samples(m, x, ll, &err), LSE_ENONFINITE);
    gsl_matrix_set(x, 5, 1, 54.0);
    /* options */
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.n_init = 0;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    o = lse_gmm_fit_opts_default();
    o.tol = -1.0;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EDOM);
    o = lse_gmm_fit_opts_default();
    o.reg_covar = NAN;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EDOM);
    o = lse_gmm_fit_opts_default();
    o.init = (lse_gmm_init)7;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    o = lse_gmm_fit_opts_default();
    gsl_vector *w = gsl_vector_alloc(271);
    gsl_vector_set_all(w, 1.0);
    o.sample_weight = w;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EDIM);
    gsl_vector *w2 = gsl_vector_alloc(272);
    gsl_vector_set_all(w2, 1.0);
    gsl_vector_set(w2, 3, -1.0);
    o.sample_weight = w2;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EDOM);
    gsl_vector_set_zero(w2);
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EDOM);
    lse_assert_status(lse_gmm_fit(NULL, x, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_gmm_fit(m, NULL, NULL, &err), LSE_EFAULT);
    ck_assert(!lse_gmm_info(m)->fitted);
    /* queries */
    size_t lab[272];
    lse_assert_status(lse_gmm_predict(m, x1, lab, &err), LSE_EDIM);
    gsl_matrix *r = gsl_matrix_alloc(272, 3);
    lse_assert_status(lse_gmm_predict_proba(m, x, r, &err), LSE_EDIM);
    gsl_vector *ll2 = gsl_vector_alloc(10);
    lse_assert_status(lse_gmm_score_samples(m, x, ll2, &err), LSE_EDIM);
    gsl_matrix *s = gsl_matrix_alloc(5, 3);
    lse_assert_status(lse_gmm_sample(m, 1, s, NULL, &err), LSE_EDIM);
    lse_graph *g = NULL;
    lse_assert_status(lse_gmm_graph_new(m, x1, &g, &err), LSE_EDIM);
    ck_assert(g == NULL);
    gsl_matrix_free(s);
    gsl_vector_free(ll2);
    gsl_matrix_free(r);
    gsl_vector_free(w);
    gsl_vector_free(w2);
    gsl_vector_free(ll);
    gsl_matrix_free(x1);
    gsl_matrix_free(x);
    gsl_matrix_free(x3);
    lse_gmm_free(m);
    lse_gmm_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Missing values (marginalized)                                       */

/* Faithful with NaN: column 0 when i % 7 == 3, column 1 when i % 11 == 5
 * (rows 38, 115, 192 and 269 lose both). */
static gsl_matrix *faithful_missing(size_t *n_missing)
{
    gsl_matrix *x = read_faithful();
    size_t c = 0;
    for (size_t i = 0; i < x->size1; i++) {
        if (i % 7 == 3) {
            gsl_matrix_set(x, i, 0, NAN);
            c++;
        }
        if (i % 11 == 5) {
            gsl_matrix_set(x, i, 1, NAN);
            c++;
        }
    }
    if (n_missing != NULL)
        *n_missing = c;
    return x;
}

/* Observed columns of row i; returns their number. */
static size_t observed(const gsl_matrix *x, size_t i, size_t *obs, size_t *mis,
                       size_t *n_mis)
{
    size_t no = 0, nm = 0;
    for (size_t j = 0; j < x->size2; j++) {
        if (isnan(gsl_matrix_get(x, i, j)))
            mis[nm++] = j;
        else
            obs[no++] = j;
    }
    *n_mis = nm;
    return no;
}

/* Marginal log-likelihood (rows with nothing observed: 0, resp = w). */
static double tb_loglik_missing(const tb *t, const gsl_matrix *x, double *per,
                                double *resp)
{
    const size_t n = x->size1, K = t->k;
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        size_t obs[MAXD], mis[MAXD], nm;
        const size_t no = observed(x, i, obs, mis, &nm);
        if (no == 0) {
            if (per != NULL)
                per[i] = 0.0;
            for (size_t k = 0; resp != NULL && k < K; k++)
                resp[i * K + k] = t->w[k];
            continue;
        }
        gsl_matrix *L = gsl_matrix_alloc(no, no);
        gsl_vector *xo = gsl_vector_alloc(no), *mo = gsl_vector_alloc(no);
        gsl_vector *work = gsl_vector_alloc(no);
        double lp[MAXK], mx = -INFINITY;
        for (size_t k = 0; k < K; k++) {
            for (size_t a = 0; a < no; a++) {
                gsl_vector_set(xo, a, gsl_matrix_get(x, i, obs[a]));
                gsl_vector_set(mo, a, t->mu[k][obs[a]]);
                for (size_t b = 0; b < no; b++)
                    gsl_matrix_set(L, a, b, t->s[k][obs[a]][obs[b]]);
            }
            ck_assert_int_eq(gsl_linalg_cholesky_decomp1(L), 0);
            double v;
            ck_assert_int_eq(
                gsl_ran_multivariate_gaussian_log_pdf(xo, mo, L, &v, work), 0);
            lp[k] = log(t->w[k]) + v;
            mx = fmax(mx, lp[k]);
        }
        double s = 0.0;
        for (size_t k = 0; k < K; k++)
            s += exp(lp[k] - mx);
        const double ll = mx + log(s);
        if (per != NULL)
            per[i] = ll;
        for (size_t k = 0; resp != NULL && k < K; k++)
            resp[i * K + k] = exp(lp[k] - ll);
        total += ll;
        gsl_matrix_free(L);
        gsl_vector_free(xo);
        gsl_vector_free(mo);
        gsl_vector_free(work);
    }
    return total;
}

/* One EM iteration with missing values (Ghahramani and Jordan 1994):
 * E[x | x_O, k] and Cov[x | x_O, k] by explicit inversion of Sigma_OO. */
static void tb_em_step_missing(tb *t, const gsl_matrix *x, const double *wt,
                               double reg)
{
    const size_t n = x->size1, K = t->k, d = t->d;
    double *r = malloc(n * K * sizeof *r);
    double *xh = malloc(n * K * d * sizeof *xh);
    double *cc = calloc(n * K * d * d, sizeof *cc);
    tb_loglik_missing(t, x, NULL, r);
    for (size_t i = 0; i < n; i++) {
        size_t obs[MAXD], mis[MAXD], nm;
        const size_t no = observed(x, i, obs, mis, &nm);
        for (size_t k = 0; k < K; k++) {
            if (no == 0) {
                r[i * K + k] = 0.0; /* nothing observed: no contribution */
                continue;
            }
            if (wt != NULL)
                r[i * K + k] *= wt[i];
            double *xi = xh + (i * K + k) * d, *ci = cc + (i * K + k) * d * d;
            for (size_t a = 0; a < no; a++)
                xi[obs[a]] = gsl_matrix_get(x, i, obs[a]);
            if (nm == 0)
                continue;
            gsl_matrix *inv = gsl_matrix_alloc(no, no);
            for (size_t a = 0; a < no; a++)
                for (size_t b = 0; b < no; b++)
                    gsl_matrix_set(inv, a, b, t->s[k][obs[a]][obs[b]]);
            ck_assert_int_eq(gsl_linalg_cholesky_decomp1(inv), 0);
            ck_assert_int_eq(gsl_linalg_cholesky_invert(inv), 0);
            double B[MAXD][MAXD];
            for (size_t m = 0; m < nm; m++)
                for (size_t b = 0; b < no; b++) {
                    B[m][b] = 0.0;
                    for (size_t a = 0; a < no; a++)
                        B[m][b] +=
                            t->s[k][mis[m]][obs[a]] * gsl_matrix_get(inv, a, b);
                }
            for (size_t m = 0; m < nm; m++) {
                double v = t->mu[k][mis[m]];
                for (size_t b = 0; b < no; b++)
                    v += B[m][b] * (xi[obs[b]] - t->mu[k][obs[b]]);
                xi[mis[m]] = v;
                for (size_t l = 0; l < nm; l++) {
                    double c = t->s[k][mis[m]][mis[l]];
                    for (size_t b = 0; b < no; b++)
                        c -= B[m][b] * t->s[k][obs[b]][mis[l]];
                    ci[mis[m] * d + mis[l]] = c;
                }
            }
            gsl_matrix_free(inv);
        }
    }
    double nk[MAXK], total = 0.0, pooled[MAXD][MAXD] = {{0}};
    for (size_t k = 0; k < K; k++) {
        nk[k] = 0.0;
        for (size_t i = 0; i < n; i++)
            nk[k] += r[i * K + k];
        total += nk[k];
    }
    for (size_t k = 0; k < K; k++) {
        double mu[MAXD] = {0};
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                if (r[i * K + k] > 0)
                    mu[j] += r[i * K + k] * xh[(i * K + k) * d + j];
        for (size_t j = 0; j < d; j++)
            mu[j] /= nk[k];
        double c[MAXD][MAXD] = {{0}};
        for (size_t i = 0; i < n; i++) {
            const double ri = r[i * K + k];
            if (!(ri > 0))
                continue;
            const double *xi = xh + (i * K + k) * d;
            const double *ci = cc + (i * K + k) * d * d;
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++)
                    c[a][b] += ri * ((xi[a] - mu[a]) * (xi[b] - mu[b]) +
                                     ci[a * d + b]);
        }
        double tr = 0.0;
        for (size_t a = 0; a < d; a++) {
            for (size_t b = 0; b < d; b++) {
                pooled[a][b] += c[a][b];
                c[a][b] /= nk[k];
            }
            tr += c[a][a];
        }
        for (size_t a = 0; a < d; a++) {
            t->mu[k][a] = mu[a];
            for (size_t b = 0; b < d; b++) {
                double v = 0.0;
                if (t->cov == LSE_COV_FULL)
                    v = c[a][b];
                else if (t->cov == LSE_COV_DIAG)
                    v = a == b ? c[a][a] : 0.0;
                else if (t->cov == LSE_COV_SPHERICAL)
                    v = a == b ? tr / (double)d : 0.0;
                t->s[k][a][b] = v + (a == b ? reg : 0.0);
            }
        }
        t->w[k] = nk[k] / total;
    }
    if (t->cov == LSE_COV_TIED)
        for (size_t k = 0; k < K; k++)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++)
                    t->s[k][a][b] = pooled[a][b] / total + (a == b ? reg : 0);
    free(r);
    free(xh);
    free(cc);
}

START_TEST(test_missing_energy_is_marginal_nll)
{
    gsl_matrix *x = faithful_missing(NULL);
    for (size_t c = 0; c < 4; c++) {
        const tb t = tb_start(3, all_cov[c]);
        lse_gmm *m = model_from_tb(&t);
        static double per[272], resp[272 * 3];
        tb_loglik_missing(&t, x, per, resp);
        gsl_vector *ll = gsl_vector_alloc(272);
        gsl_matrix *r = gsl_matrix_alloc(272, 3);
        lse_error err;
        lse_assert_ok(
            lse_gmm_posterior(m, x, LSE_GMM_MISSING_MARGINALIZE, r, ll, &err));
        for (size_t i = 0; i < 272; i++) {
            ck_assert_msg(rel(gsl_vector_get(ll, i), per[i]) < 1e-12,
                          "%s row %zu: %.17g vs %.17g",
                          lse_gmm_cov_name(all_cov[c]), i,
                          gsl_vector_get(ll, i), per[i]);
            for (size_t k = 0; k < 3; k++)
                ck_assert_double_eq_tol(gsl_matrix_get(r, i, k),
                                        resp[i * 3 + k], 1e-12);
        }
        ck_assert_double_eq(gsl_vector_get(ll, 38), 0.0); /* nothing seen */
        /* complete rows agree with the strict queries */
        gsl_matrix_const_view row = gsl_matrix_const_submatrix(x, 0, 0, 3, 2);
        gsl_vector *l3 = gsl_vector_alloc(3);
        lse_assert_ok(lse_gmm_score_samples(m, &row.matrix, l3, NULL));
        for (size_t i = 0; i < 3; i++)
            ck_assert(rel(gsl_vector_get(l3, i), per[i]) < 1e-12);
        gsl_vector_free(l3);
        gsl_vector_free(ll);
        gsl_matrix_free(r);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_missing_em_equals_textbook)
{
    size_t n_missing;
    gsl_matrix *x = faithful_missing(&n_missing);
    const size_t Ks[2] = {2, 3};
    for (size_t c = 0; c < 4; c++)
        for (size_t ki = 0; ki < 2; ki++) {
            tb t = tb_start(Ks[ki], all_cov[c]);
            lse_gmm *m = model_from_tb(&t);
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.init = LSE_GMM_INIT_GIVEN;
            o.missing = LSE_GMM_MISSING_MARGINALIZE;
            o.max_iter = 1;
            o.tol = 0.0;
            lse_error err;
            for (size_t it = 0; it < 30; it++) {
                const lse_status st = lse_gmm_fit(m, x, &o, &err);
                ck_assert_msg(st == LSE_OK, "%s", err.message);
                tb_em_step_missing(&t, x, NULL, o.reg_covar);
                const double ll = tb_loglik_missing(&t, x, NULL, NULL);
                const lse_gmm_fit_info *info = lse_gmm_info(m);
                ck_assert_msg(rel(info->loglik, ll) < 1e-10,
                              "%s K=%zu it %zu: loglik %.17g vs %.17g",
                              lse_gmm_cov_name(all_cov[c]), Ks[ki], it,
                              info->loglik, ll);
                const double pd = param_diff(m, &t);
                ck_assert_msg(pd < 1e-10, "%s K=%zu it %zu: params differ %g",
                              lse_gmm_cov_name(all_cov[c]), Ks[ki], it, pd);
                ck_assert_uint_eq(info->n_missing, n_missing);
                ck_assert_double_eq(info->n_eff, 268.0);
            }
            lse_gmm_free(m);
        }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_missing_weighted)
{
    gsl_matrix *x = faithful_missing(NULL);
    gsl_vector *w = gsl_vector_alloc(272);
    double wt[272];
    for (size_t i = 0; i < 272; i++) {
        wt[i] = 0.25 + (double)(i % 4) * 0.5;
        gsl_vector_set(w, i, wt[i]);
    }
    for (size_t c = 0; c < 4; c++) {
        tb t = tb_start(2, all_cov[c]);
        lse_gmm *m = model_from_tb(&t);
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        o.missing = LSE_GMM_MISSING_MARGINALIZE;
        o.sample_weight = w;
        o.max_iter = 1;
        for (size_t it = 0; it < 10; it++) {
            lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
            tb_em_step_missing(&t, x, wt, o.reg_covar);
            ck_assert(param_diff(m, &t) < 1e-10);
        }
        lse_gmm_free(m);
    }
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_missing_monotone_and_reproducible)
{
    gsl_matrix *x = faithful_missing(NULL);
    for (size_t c = 0; c < 4; c++) {
        lse_gmm *m = NULL, *m2 = NULL;
        lse_assert_ok(lse_gmm_new(3, 2, all_cov[c], &m, NULL));
        lse_assert_ok(lse_gmm_new(3, 2, all_cov[c], &m2, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.missing = LSE_GMM_MISSING_MARGINALIZE;
        o.max_iter = 300;
        o.tol = 0.0;
        o.seed = 7;
        o.n_init = 2;
        /* plain EM, strictly monotone on these fits; SQUAREM (the default)
         * may rise within reg_covar's bound: tests/test_gmm_monotone.c */
        o.accel = LSE_GMM_ACCEL_NONE;
        static trace tr;
        memset(&tr, 0, sizeof tr);
        o.progress = record;
        o.progress_user = &tr;
        lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
        ck_assert_uint_eq(lse_gmm_n_events(m), 0);
        ck_assert_uint_eq(lse_gmm_info(m)->n_increase, 0);
        size_t off = 0;
        for (size_t r = 0; r < 2; r++) {
            ck_assert_uint_gt(tr.n[r], 2);
            for (size_t i = off + 1; i < off + tr.n[r]; i++)
                ck_assert_msg(
                    tr.e[i] <= tr.e[i - 1] + 1e-12 * fabs(tr.e[i - 1]),
                    "%s: energy rose %.17g -> %.17g",
                    lse_gmm_cov_name(all_cov[c]), tr.e[i - 1], tr.e[i]);
            off += tr.n[r];
        }
        o.progress = NULL;
        lse_assert_ok(lse_gmm_fit(m2, x, &o, NULL));
        ck_assert(same_model(m, m2));
        lse_gmm_free(m);
        lse_gmm_free(m2);
    }
    gsl_matrix_free(x);
}
END_TEST

/* 20% of the coordinates missing completely at random: the fit still
 * recovers the mixture (looser tolerances: fewer observations). */
START_TEST(test_missing_recovery)
{
    gsl_matrix *x = draw_truth(3000, 20240611UL, NULL);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 77);
    for (size_t i = 0; i < 3000; i++)
        for (size_t j = 0; j < 2; j++)
            if (gsl_rng_uniform(rng) < 0.2)
                gsl_matrix_set(x, i, j, NAN);
    gsl_rng_free(rng);
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.missing = LSE_GMM_MISSING_MARGINALIZE;
    o.seed = 3;
    o.n_init = 3;
    o.tol = 1e-8;
    o.max_iter = 1000;
    lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
    ck_assert(lse_gmm_info(m)->converged);
    size_t match[3];
    match_components(m, match);
    gsl_matrix *c = gsl_matrix_alloc(2, 2);
    for (size_t k = 0; k < 3; k++) {
        const size_t j = match[k];
        ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(m), j),
                                true_w[k], 0.04);
        lse_assert_ok(lse_gmm_get_covariance(m, j, c));
        for (size_t a = 0; a < 2; a++) {
            ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(m), j, a),
                                    true_mu[k][a], 0.2 * sqrt(true_s[k][a][a]));
            for (size_t b = 0; b < 2; b++)
                ck_assert_double_eq_tol(
                    gsl_matrix_get(c, a, b), true_s[k][a][b],
                    0.25 * sqrt(true_s[k][a][a] * true_s[k][b][b]));
        }
    }
    gsl_matrix_free(c);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* The re-seeding hook of the missing path: a far component with no
 * responsibility moves to the row with the lowest marginal likelihood. */
START_TEST(test_missing_reseed)
{
    gsl_matrix *x = faithful_missing(NULL);
    for (size_t c = 0; c < 4; c++) {
        tb t = tb_start(3, all_cov[c]);
        t.mu[2][0] = 100.0;
        t.mu[2][1] = 1000.0;
        lse_gmm *m = model_from_tb(&t);
        gsl_vector *ll = gsl_vector_alloc(272);
        lse_assert_ok(lse_gmm_posterior(m, x, LSE_GMM_MISSING_MARGINALIZE, NULL,
                                        ll, NULL));
        size_t lowest = 0;
        for (size_t i = 1; i < 272; i++)
            if (!isnan(gsl_matrix_get(x, i, 0)) ||
                !isnan(gsl_matrix_get(x, i, 1)))
                if (gsl_vector_get(ll, i) < gsl_vector_get(ll, lowest))
                    lowest = i;
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        o.missing = LSE_GMM_MISSING_MARGINALIZE;
        o.max_iter = 1;
        lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
        ck_assert_uint_eq(lse_gmm_n_events(m), 1);
        const lse_gmm_event *e = lse_gmm_event_get(m, 0);
        ck_assert_uint_eq(e->iteration, 1);
        ck_assert_uint_eq(e->component, 2);
        ck_assert_uint_eq(e->sample, lowest);
        for (size_t j = 0; j < 2; j++) {
            const double v = gsl_matrix_get(x, lowest, j);
            if (!isnan(v))
                ck_assert_double_eq(gsl_matrix_get(lse_gmm_means(m), 2, j), v);
        }
        gsl_vector_free(ll);
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_missing_errors)
{
    gsl_matrix *x = faithful_missing(NULL);
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    /* default: NaN is an error */
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_ENONFINITE);
    ck_assert_msg(strstr(err.message, "row 3, column 0") != NULL, "%s",
                  err.message);
    lse_assert_status(
        lse_gmm_posterior(m, x, LSE_GMM_MISSING_ERROR, NULL, NULL, &err),
        LSE_ENONFINITE);
    lse_assert_status(
        lse_gmm_posterior(m, x, (lse_gmm_missing)5, NULL, NULL, &err),
        LSE_EINVAL);
    o.missing = (lse_gmm_missing)5;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    o.missing = LSE_GMM_MISSING_MARGINALIZE;
    /* infinity is never a missing value */
    gsl_matrix_set(x, 0, 0, INFINITY);
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_ENONFINITE);
    lse_assert_status(
        lse_gmm_posterior(m, x, LSE_GMM_MISSING_MARGINALIZE, NULL, NULL, &err),
        LSE_ENONFINITE);
    gsl_matrix_set(x, 0, 0, 3.6);
    /* a column with no observed value */
    gsl_matrix *y = gsl_matrix_alloc(10, 2);
    for (size_t i = 0; i < 10; i++) {
        gsl_matrix_set(y, i, 0, 0.4127 * (double)i);
        gsl_matrix_set(y, i, 1, NAN);
    }
    lse_assert_status(lse_gmm_fit(m, y, &o, &err), LSE_EINVAL);
    ck_assert_str_eq(err.message,
                     "lse_gmm_fit: column 1 has no observed value");
    /* singular with reg_covar 0: a component on repeated points */
    gsl_matrix *z = gsl_matrix_alloc(20, 2);
    for (size_t i = 0; i < 20; i++) {
        gsl_matrix_set(z, i, 0, i % 2 ? 1.0 : -1.0);
        gsl_matrix_set(z, i, 1, i % 2 ? 2.0 : 0.5);
    }
    gsl_matrix_set(z, 4, 1, NAN);
    o.reg_covar = 0.0;
    lse_assert_status(lse_gmm_fit(m, z, &o, &err), LSE_ENUMERIC);
    ck_assert_msg(strstr(err.message, "component") != NULL &&
                      strstr(err.message, "reg_covar") != NULL,
                  "%s", err.message);
    o.reg_covar = 1e-6;
    lse_assert_ok(lse_gmm_fit(m, z, &o, &err));
    gsl_matrix_free(z);
    gsl_matrix_free(y);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* Old Faithful, K = 2 full: the published maximum-likelihood fit. */
START_TEST(test_faithful_reference)
{
    gsl_matrix *x = read_faithful();
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.seed = 1;
    o.tol = 1e-10;
    o.max_iter = 1000;
    lse_assert_ok(lse_gmm_fit(m, x, &o, NULL));
    const lse_gmm_fit_info *info = lse_gmm_info(m);
    /* mclust (R) on faithful, model VVV with G = 2: loglik -1130.264 */
    ck_assert_double_eq_tol(info->loglik, -1130.264, 1e-3);
    ck_assert(info->converged);
    ck_assert_uint_eq(info->n_samples, 272);
    ck_assert_double_eq(info->n_eff, 272.0);
    ck_assert(rel(info->loglik_per_sample, info->loglik / 272.0) < 1e-15);
    ck_assert(rel(info->bic, -2 * info->loglik + 11 * log(272.0)) < 1e-14);
    ck_assert(rel(info->aic, -2 * info->loglik + 22) < 1e-14);
    const size_t small = gsl_matrix_get(lse_gmm_means(m), 0, 0) < 3.0 ? 0 : 1;
    ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(m), small), 0.3559,
                            1e-3);
    ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(m), small, 0), 2.0364,
                            1e-3);
    ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(m), small, 1), 54.4786,
                            1e-3);
    ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(m), 1 - small, 1),
                            79.9682, 1e-3);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Data-parallel fitting: shares fitted by threads through the          */
/* reduction hook equal the one-process fit (docs/mpi.md)              */

typedef struct gmm_job {
    simcomm_rank me;
    gsl_matrix *x; /* a copy of the share */
    gsl_vector *w;
    lse_gmm_fit_opts o;
    lse_gmm *m;
    lse_status st;
    lse_error err;
} gmm_job;

static void *gmm_job_run(void *p)
{
    gmm_job *j = p;
    j->st = lse_gmm_fit(j->m, j->x, &j->o, &j->err);
    return NULL;
}

/* Fit x (and w, may be NULL) split at cuts[0] = 0 < ... < cuts[P] = N by
 * P threads; jobs[r].m is process r's model (the caller frees them). */
static void fit_shares(const gsl_matrix *x, const gsl_vector *w,
                       const size_t *cuts, size_t P, size_t K,
                       lse_cov_type cov, const lse_gmm_fit_opts *base,
                       size_t fail_at, gmm_job *jobs, size_t *n_calls)
{
    simcomm comm;
    simcomm_init(&comm, P);
    comm.fail_at = fail_at;
    pthread_t th[SIMCOMM_MAX];
    for (size_t r = 0; r < P; r++) {
        gmm_job *j = &jobs[r];
        memset(j, 0, sizeof *j);
        j->me = (simcomm_rank){.comm = &comm, .rank = r};
        const size_t n = cuts[r + 1] - cuts[r];
        gsl_matrix_const_view xv =
            gsl_matrix_const_submatrix(x, cuts[r], 0, n, x->size2);
        j->x = gsl_matrix_alloc(n, x->size2);
        gsl_matrix_memcpy(j->x, &xv.matrix);
        j->o = *base;
        if (w != NULL) {
            gsl_vector_const_view wv = gsl_vector_const_subvector(w, cuts[r], n);
            j->w = gsl_vector_alloc(n);
            gsl_vector_memcpy(j->w, &wv.vector);
            j->o.sample_weight = j->w;
        }
        j->o.reduce = simcomm_reduce;
        j->o.reduce_user = &j->me;
        j->o.rank = r;
        j->o.n_ranks = P;
        lse_assert_ok(lse_gmm_new(K, x->size2, cov, &j->m, NULL));
        ck_assert_int_eq(pthread_create(&th[r], NULL, gmm_job_run, j), 0);
    }
    for (size_t r = 0; r < P; r++) {
        pthread_join(th[r], NULL);
        gsl_matrix_free(jobs[r].x);
        gsl_vector_free(jobs[r].w);
        jobs[r].x = NULL;
        jobs[r].w = NULL;
    }
    ck_assert_msg(!comm.mismatch, "processes reduced buffers of different "
                                  "lengths");
    for (size_t r = 1; r < P && fail_at == 0; r++)
        ck_assert_uint_eq(comm.calls[r], comm.calls[0]);
    if (n_calls != NULL)
        *n_calls = comm.calls[0];
    simcomm_destroy(&comm);
}

/* max |a - b| / max |a| over the entries (0 when both are 0) */
static double mat_rel(const gsl_matrix *a, const gsl_matrix *b)
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

/* The parallel model equals the serial one to 1e-10 (relative), with the
 * same iterations and events; every process holds the same bits. */
static void assert_same_fit(const lse_gmm *serial, const gmm_job *jobs,
                            size_t P)
{
    const lse_gmm_fit_info *a = lse_gmm_info(serial);
    for (size_t r = 0; r < P; r++) {
        ck_assert_msg(jobs[r].st == LSE_OK, "process %zu: %s", r,
                      jobs[r].err.message);
        const lse_gmm *m = jobs[r].m;
        const lse_gmm_fit_info *b = lse_gmm_info(m);
        ck_assert_msg(rel(a->loglik, b->loglik) < 1e-10, "loglik %.17g vs %.17g",
                      a->loglik, b->loglik);
        ck_assert_uint_eq(a->n_iter, b->n_iter);
        ck_assert_int_eq(a->converged, b->converged);
        ck_assert_uint_eq(a->n_samples, b->n_samples);
        ck_assert(rel(a->n_eff, b->n_eff) < 1e-14);
        ck_assert_uint_eq(a->best_run, b->best_run);
        for (size_t k = 0; k < lse_gmm_k(m); k++)
            ck_assert(rel(gsl_vector_get(lse_gmm_weights(serial), k),
                          gsl_vector_get(lse_gmm_weights(m), k)) < 1e-10);
        ck_assert(mat_rel(lse_gmm_means(serial), lse_gmm_means(m)) < 1e-10);
        ck_assert(mat_rel(lse_gmm_covariances(serial),
                          lse_gmm_covariances(m)) < 1e-10);
        ck_assert_uint_eq(lse_gmm_n_events(serial), lse_gmm_n_events(m));
        for (size_t i = 0; i < lse_gmm_n_events(m); i++) {
            const lse_gmm_event *e = lse_gmm_event_get(serial, i);
            const lse_gmm_event *f = lse_gmm_event_get(m, i);
            ck_assert_uint_eq(e->run, f->run);
            ck_assert_uint_eq(e->iteration, f->iteration);
            ck_assert_uint_eq(e->component, f->component);
            ck_assert_uint_eq(e->sample, f->sample);
        }
        ck_assert(same_model(jobs[0].m, m));
    }
}

START_TEST(test_parallel_equals_serial)
{
    gsl_matrix *x = read_faithful();
    /* unequal shares, one of a single row */
    static const size_t cuts3[] = {0, 90, 91, 272};
    static const size_t cuts2[] = {0, 136, 272};
    static const lse_gmm_init inits[] = {LSE_GMM_INIT_KMEANSPP,
                                         LSE_GMM_INIT_RANDOM};
    for (size_t c = 0; c < 4; c++)
        for (size_t q = 0; q < 2; q++) {
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.seed = 7 + q;
            o.tol = 1e-10;
            o.max_iter = 300;
            o.n_init = 2;
            o.init = inits[q];
            /* plain EM: SQUAREM's accept/reject compares energies summed
             * in a split-dependent order by the solver (not yet
             * split-invariant: 213 vs 211 iterations on one case) */
            o.accel = LSE_GMM_ACCEL_NONE;
            lse_gmm *serial = NULL;
            lse_assert_ok(lse_gmm_new(3, 2, all_cov[c], &serial, NULL));
            lse_assert_ok(lse_gmm_fit(serial, x, &o, NULL));
            gmm_job jobs[3];
            const size_t P = c % 2 == 0 ? 3 : 2;
            fit_shares(x, NULL, P == 3 ? cuts3 : cuts2, P, 3, all_cov[c], &o,
                       0, jobs, NULL);
            assert_same_fit(serial, jobs, P);
            for (size_t r = 0; r < P; r++)
                lse_gmm_free(jobs[r].m);
            lse_gmm_free(serial);
        }
    gsl_matrix_free(x);
}
END_TEST

/* Weighted data where a whole share has weight 0, and re-seeding of
 * collapsed components: the samples named by the events are global rows. */
START_TEST(test_parallel_weights_and_reseed)
{
    gsl_matrix *x = read_faithful();
    gsl_vector *w = gsl_vector_alloc(272);
    for (size_t i = 0; i < 272; i++)
        gsl_vector_set(w, i, i >= 100 && i < 150 ? 0.0 : 0.5 + (i % 7) * 0.25);
    static const size_t cuts[] = {0, 100, 150, 272};
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.seed = 3;
    o.sample_weight = w;
    lse_gmm *serial = NULL;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &serial, NULL));
    lse_assert_ok(lse_gmm_fit(serial, x, &o, NULL));
    gmm_job jobs[3];
    fit_shares(x, w, cuts, 3, 2, LSE_COV_FULL, &o, 0, jobs, NULL);
    assert_same_fit(serial, jobs, 3);
    for (size_t r = 0; r < 3; r++)
        lse_gmm_free(jobs[r].m);
    lse_gmm_free(serial);

    /* 5 components on 3 distinct points: components collapse */
    gsl_matrix *dup = duplicates();
    static const size_t dcuts[] = {0, 7, 8, 30};
    lse_gmm_fit_opts od = lse_gmm_fit_opts_default();
    od.seed = 4;
    lse_assert_ok(lse_gmm_new(5, 2, LSE_COV_DIAG, &serial, NULL));
    lse_assert_ok(lse_gmm_fit(serial, dup, &od, NULL));
    ck_assert_uint_gt(lse_gmm_n_events(serial), 0);
    fit_shares(dup, NULL, dcuts, 3, 5, LSE_COV_DIAG, &od, 0, jobs, NULL);
    assert_same_fit(serial, jobs, 3);
    for (size_t r = 0; r < 3; r++)
        lse_gmm_free(jobs[r].m);
    lse_gmm_free(serial);
    gsl_matrix_free(dup);
    gsl_vector_free(w);
    gsl_matrix_free(x);
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
    gsl_matrix *x = read_faithful();
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    /* several processes need a hook; the rank must be below n_ranks */
    o.n_ranks = 2;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "reduction hook") != NULL);
    o.reduce = identity_reduce;
    o.rank = 2;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "process 2 of 2") != NULL);
    o.n_ranks = 0;
    o.rank = 0;
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_EINVAL);
    /* missing values are not marginalized across processes */
    o.n_ranks = 1;
    o.missing = LSE_GMM_MISSING_MARGINALIZE;
    gsl_matrix_set(x, 5, 1, NAN);
    lse_assert_status(lse_gmm_fit(m, x, &o, &err), LSE_ENOTSUP);
    ck_assert(strstr(err.message, "row 5") != NULL);
    gsl_matrix_set(x, 5, 1, 80.0);
    ck_assert(!lse_gmm_info(m)->fitted);
    lse_gmm_free(m);

    /* a failing reduction ends the fit on every process with its status,
     * the model unchanged */
    static const size_t cuts[] = {0, 100, 272};
    gmm_job jobs[2];
    size_t n_calls = 0;
    fit_shares(x, NULL, cuts, 2, 2, LSE_COV_FULL, &o, 0, jobs, &n_calls);
    ck_assert_uint_gt(n_calls, 10);
    for (size_t r = 0; r < 2; r++)
        lse_gmm_free(jobs[r].m);
    for (size_t fail_at = 1; fail_at <= n_calls; fail_at++) {
        fit_shares(x, NULL, cuts, 2, 2, LSE_COV_FULL, &o, fail_at, jobs, NULL);
        for (size_t r = 0; r < 2; r++) {
            ck_assert_msg(jobs[r].st == LSE_EIO, "fail_at %zu: status %d",
                          fail_at, (int)jobs[r].st);
            ck_assert_msg(strstr(jobs[r].err.message, "failed") != NULL, "%s",
                          jobs[r].err.message);
            ck_assert(!lse_gmm_info(jobs[r].m)->fitted);
            lse_gmm_free(jobs[r].m);
        }
    }
    /* K larger than the whole data set, not than one share */
    static const size_t small[] = {0, 2, 3};
    fit_shares(x, NULL, small, 2, 3, LSE_COV_FULL, &o, 0, jobs, NULL);
    for (size_t r = 0; r < 2; r++) {
        ck_assert_int_eq(jobs[r].st, LSE_OK);
        lse_gmm_free(jobs[r].m);
    }
    gsl_matrix_const_view two = gsl_matrix_const_submatrix(x, 0, 0, 3, 2);
    static const size_t tiny[] = {0, 1, 3};
    fit_shares(&two.matrix, NULL, tiny, 2, 4, LSE_COV_FULL, &o, 0, jobs, NULL);
    for (size_t r = 0; r < 2; r++) {
        ck_assert_int_eq(jobs[r].st, LSE_EINVAL);
        ck_assert_str_eq(jobs[r].err.message, "lse_gmm_fit: k = 4 > 3 samples");
        lse_gmm_free(jobs[r].m);
    }
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_gmm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_energy_is_nll);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_graph_shape);
    tcase_add_test(tc, test_em_equals_textbook);
    tcase_add_test(tc, test_weighted_em_equals_repeated_rows);
    tcase_add_test(tc, test_monotone);
    tcase_add_test(tc, test_graph_gradient);
    tcase_add_test(tc, test_recovery);
    tcase_add_test(tc, test_bic_selects_k);
    tcase_add_test(tc, test_same_seed_identical);
    tcase_add_test(tc, test_n_init_picks_best);
    tcase_add_test(tc, test_collapse_reseeds);
    tcase_add_test(tc, test_reseed_in_em);
    tcase_add_test(tc, test_singular_covariance);
    tcase_add_test(tc, test_queries);
    tcase_add_test(tc, test_n_params);
    tcase_add_test(tc, test_sample);
    tcase_add_test(tc, test_covariance_roundtrip);
    tcase_add_test(tc, test_setter_errors);
    tcase_add_test(tc, test_fit_errors);
    tcase_add_test(tc, test_faithful_reference);
    tcase_add_test(tc, test_missing_energy_is_marginal_nll);
    tcase_add_test(tc, test_missing_em_equals_textbook);
    tcase_add_test(tc, test_missing_weighted);
    tcase_add_test(tc, test_missing_monotone_and_reproducible);
    tcase_add_test(tc, test_missing_recovery);
    tcase_add_test(tc, test_missing_reseed);
    tcase_add_test(tc, test_missing_errors);
    tcase_add_test(tc, test_parallel_equals_serial);
    tcase_add_test(tc, test_parallel_weights_and_reseed);
    tcase_add_test(tc, test_parallel_errors);
    suite_add_tcase(s, tc);
    return s;
}
