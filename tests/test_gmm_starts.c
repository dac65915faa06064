/* Starts, emEM and the parametric bootstrap of lse_gmm (models/mixfit.c),
 * and lsefit gmm --init hcvvv|emem|emem+hc, --bootstrap and the uncertainty
 * column of --proba (tools/lsefit_gmmstart.c): each against its defining
 * property, mclust's hcVVV start against mclust's fit (mclust_ref.txt) and
 * the bootstrap against mclust's MclustBootstrap (mclust_boot_ref.txt). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "lse_run.h"
#include "lse_tmpdir.h"

#define MCLUST_REF LSE_DATA_DIR "/../tests/ref/mclust_ref.txt"
#define BOOT_REF LSE_DATA_DIR "/../tests/ref/mclust_boot_ref.txt"

/* two well-separated 2-d components, weights 0.3 / 0.7 */
static gsl_matrix *simulate(size_t n, unsigned long seed, size_t *lab)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(n, 2);
    for (size_t i = 0; i < n; i++) {
        const int c = gsl_rng_uniform(r) < 0.3;
        if (lab != NULL)
            lab[i] = (size_t)c;
        gsl_matrix_set(x, i, 0, (c ? 6.0 : 0.0) + gsl_ran_gaussian(r, 1.0));
        gsl_matrix_set(x, i, 1,
                       (c ? -3.0 : 1.0) + 0.5 * gsl_matrix_get(x, i, 0) +
                           gsl_ran_gaussian(r, 0.7));
    }
    gsl_rng_free(r);
    return x;
}

/* the start from a partition: weights n_k / N, the cluster means and the
 * maximum-likelihood covariances (+ reg) of each type */
START_TEST(test_init_labels)
{
    const size_t n = 200;
    size_t lab[200];
    gsl_matrix *x = simulate(n, 3, lab);
    const lse_cov_type types[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                  LSE_COV_SPHERICAL, LSE_COV_TIED};
    lse_error err;
    double cnt[2] = {0}, mu[2][2] = {{0}}, w[2][2][2] = {{{0}}};
    for (size_t i = 0; i < n; i++) {
        cnt[lab[i]]++;
        for (size_t j = 0; j < 2; j++)
            mu[lab[i]][j] += gsl_matrix_get(x, i, j);
    }
    for (size_t c = 0; c < 2; c++)
        for (size_t j = 0; j < 2; j++)
            mu[c][j] /= cnt[c];
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++)
                w[lab[i]][a][b] += (gsl_matrix_get(x, i, a) - mu[lab[i]][a]) *
                                   (gsl_matrix_get(x, i, b) - mu[lab[i]][b]);
    const double reg = 1e-3;
    for (size_t t = 0; t < 4; t++) {
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(2, 2, types[t], &m, NULL));
        lse_assert_ok(lse_gmm_init_labels(m, x, lab, reg, &err));
        gsl_matrix *s = gsl_matrix_alloc(2, 2);
        for (size_t c = 0; c < 2; c++) {
            ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(m), c),
                                    cnt[c] / (double)n, 1e-12);
            for (size_t j = 0; j < 2; j++)
                ck_assert_double_eq_tol(
                    gsl_matrix_get(lse_gmm_means(m), c, j), mu[c][j], 1e-10);
            lse_assert_ok(lse_gmm_get_covariance(m, c, s));
            for (size_t a = 0; a < 2; a++)
                for (size_t b = 0; b < 2; b++) {
                    double want;
                    if (types[t] == LSE_COV_FULL)
                        want = w[c][a][b] / cnt[c];
                    else if (types[t] == LSE_COV_DIAG)
                        want = a == b ? w[c][a][a] / cnt[c] : 0.0;
                    else if (types[t] == LSE_COV_SPHERICAL)
                        want = a == b ? (w[c][0][0] + w[c][1][1]) /
                                            (2.0 * cnt[c])
                                      : 0.0;
                    else
                        want = (w[0][a][b] + w[1][a][b]) / (double)n;
                    want += a == b ? reg : 0.0;
                    ck_assert_double_eq_tol(gsl_matrix_get(s, a, b), want,
                                            1e-9 * (1.0 + fabs(want)));
                }
        }
        gsl_matrix_free(s);
        lse_gmm_free(m);
    }
    /* a cluster of one row: the pseudo-row fallback keeps it definite */
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    lab[17] = 2;
    lse_assert_ok(lse_gmm_init_labels(m, x, lab, 0.0, &err));
    gsl_matrix *s = gsl_matrix_alloc(2, 2);
    lse_assert_ok(lse_gmm_get_covariance(m, 2, s));
    ck_assert(gsl_matrix_get(s, 0, 0) > 0.0 &&
              gsl_matrix_get(s, 0, 0) * gsl_matrix_get(s, 1, 1) >
                  pow(gsl_matrix_get(s, 0, 1), 2));
    lab[17] = 5;
    lse_assert_status(lse_gmm_init_labels(m, x, lab, 0.0, &err), LSE_EINVAL);
    lab[17] = 0;
    lse_assert_status(lse_gmm_init_labels(m, x, lab, 0.0, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "component 2 has no rows"));
    gsl_matrix_free(s);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* emEM keeping every short run is the best of the full runs from the same
 * seeds; the fit info is that of the model it leaves */
START_TEST(test_emem)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    lse_error err;
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.tol = 1e-10;
    double best = -INFINITY;
    const size_t starts = 6;
    for (size_t s = 0; s < starts; s++) {
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(4, 2, LSE_COV_FULL, &m, NULL));
        lse_gmm_fit_opts so = o;
        so.seed = s;
        lse_assert_ok(lse_gmm_fit(m, x, &so, &err));
        best = fmax(best, lse_gmm_info(m)->loglik);
        lse_gmm_free(m);
    }
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(4, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_emem_opts e = {starts, 0, 5, starts, 1, 0.0, 0.0, 0};
    lse_assert_ok(lse_gmm_fit_emem(m, x, &o, &e, NULL, 0, &err));
    const double ll = lse_gmm_info(m)->loglik;
    ck_assert_double_eq_tol(ll, best, 1e-7 * fabs(best));
    gsl_vector *sc = gsl_vector_alloc(x->size1);
    lse_assert_ok(lse_gmm_score_samples(m, x, sc, &err));
    double tot = 0.0;
    for (size_t i = 0; i < x->size1; i++)
        tot += gsl_vector_get(sc, i);
    ck_assert_double_eq_tol(tot, ll, 1e-9 * fabs(ll));
    /* a partition start among them: hcVVV's cut reaches mclust's K = 4
     * optimum, which no k-means++ start above finds */
    size_t *pairs = malloc(2 * x->size1 * sizeof *pairs), lab[272];
    double *cost = malloc(x->size1 * sizeof *cost);
    gsl_matrix *z = gsl_matrix_alloc(x->size1, 2);
    lse_assert_ok(lse_hc_svd(x, z, &err));
    lse_assert_ok(lse_hc_vvv(z, pairs, cost, &err));
    lse_assert_ok(lse_hc_cut(x->size1, pairs, 4, lab));
    lse_gmm *hc = NULL;
    lse_assert_ok(lse_gmm_new(4, 2, LSE_COV_FULL, &hc, NULL));
    lse_assert_ok(lse_gmm_init_labels(hc, x, lab, o.reg_covar, &err));
    const lse_gmm *given[1] = {hc};
    e.n_keep = starts + 1;
    lse_assert_ok(lse_gmm_fit_emem(m, x, &o, &e, given, 1, &err));
    ck_assert(lse_gmm_info(m)->loglik >= fmax(best, -1111.26));
    lse_gmm_emem_opts bad = {0, 0, 5, 1, 1, 0.0, 0.0, 0};
    lse_assert_status(lse_gmm_fit_emem(m, x, &o, &bad, NULL, 0, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_gmm_fit_emem(m, x, &o, &e, NULL, 1, &err),
                      LSE_EFAULT);
    lse_gmm_free(hc);
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &hc, NULL));
    given[0] = hc;
    lse_assert_status(lse_gmm_fit_emem(m, x, &o, &e, given, 1, &err),
                      LSE_EINVAL);
    lse_gmm_free(hc);
    o.init = LSE_GMM_INIT_GIVEN;
    lse_assert_status(lse_gmm_fit_emem(m, x, &o, &e, NULL, 0, &err),
                      LSE_EINVAL);
    free(pairs);
    free(cost);
    gsl_matrix_free(z);
    gsl_vector_free(sc);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* lse_gmm_min_eigenvalue against the eigenvalues of covariances set by
 * hand (full: [[2, 1], [1, 2]] has 1 and 3; diag, spherical and tied) */
START_TEST(test_min_eigenvalue)
{
    lse_error err;
    lse_gmm *m = NULL;
    double lo = 0.0;
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    gsl_matrix *c = gsl_matrix_alloc(4, 2);
    const double full[8] = {2.0, 1.0, 1.0, 2.0, 5.0, 0.0, 0.0, 0.25};
    memcpy(c->data, full, sizeof full);
    lse_assert_ok(lse_gmm_set_covariances(m, c, &err));
    lse_assert_ok(lse_gmm_min_eigenvalue(m, &lo, &err));
    ck_assert_double_eq_tol(lo, 0.25, 1e-12);
    gsl_matrix_set(c, 3, 1, 7.0); /* now [[2,1],[1,2]] is the smallest */
    lse_assert_ok(lse_gmm_set_covariances(m, c, &err));
    lse_assert_ok(lse_gmm_min_eigenvalue(m, &lo, &err));
    ck_assert_double_eq_tol(lo, 1.0, 1e-12);
    lse_gmm_free(m);
    gsl_matrix_free(c);
    const lse_cov_type t[3] = {LSE_COV_DIAG, LSE_COV_SPHERICAL, LSE_COV_TIED};
    const double want[3] = {0.5, 0.3, 1.0};
    for (int i = 0; i < 3; i++) {
        lse_assert_ok(lse_gmm_new(2, 2, t[i], &m, NULL));
        if (t[i] == LSE_COV_DIAG) {
            c = gsl_matrix_alloc(2, 2);
            const double v[4] = {0.5, 4.0, 3.0, 2.0};
            memcpy(c->data, v, sizeof v);
        } else if (t[i] == LSE_COV_SPHERICAL) {
            c = gsl_matrix_alloc(2, 1);
            gsl_matrix_set(c, 0, 0, 0.3);
            gsl_matrix_set(c, 1, 0, 0.9);
        } else {
            c = gsl_matrix_alloc(2, 2);
            memcpy(c->data, full, 4 * sizeof *full);
        }
        lse_assert_ok(lse_gmm_set_covariances(m, c, &err));
        lse_assert_ok(lse_gmm_min_eigenvalue(m, &lo, &err));
        ck_assert_double_eq_tol(lo, want[i], 1e-12);
        gsl_matrix_free(c);
        lse_gmm_free(m);
    }
    lse_assert_status(lse_gmm_min_eigenvalue(NULL, &lo, &err), LSE_EFAULT);
    ck_assert(lse_gmm_emem_opts_default(3).degenerate ==
              LSE_GMM_EMEM_DEGENERATE);
}
END_TEST

/* two clusters whose first column is on the integers (a lattice, as
 * Faithful's waiting times): 150 rows around (0, 0), 100 around (8, 5) */
static gsl_matrix *lattice_data(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    gsl_matrix *x = gsl_matrix_alloc(250, 2);
    for (size_t i = 0; i < 250; i++) {
        const int b = i >= 150;
        gsl_matrix_set(x, i, 0,
                       round((b ? 8.0 : 0.0) + gsl_ran_gaussian(r, 2.0)));
        gsl_matrix_set(x, i, 1, (b ? 5.0 : 0.0) + gsl_ran_gaussian(r, 1.0));
    }
    gsl_rng_free(r);
    return x;
}

/* K = 3 starts on lattice_data: collapsed != 0 puts component 2 on the
 * rows with first column 0 with a tiny variance across the line (EM then
 * collapses it onto the line, bounded only by reg_covar); else the three
 * components at (-1, 0), (1, 0) and (8, 5) with unit covariances */
static lse_gmm *lattice_start(const gsl_matrix *x, int collapsed)
{
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    double on = 0.0, y = 0.0;
    for (size_t i = 0; i < x->size1; i++)
        if (gsl_matrix_get(x, i, 0) == 0.0) {
            on++;
            y += gsl_matrix_get(x, i, 1);
        }
    gsl_vector *w = gsl_vector_alloc(3);
    gsl_matrix *mu = gsl_matrix_alloc(3, 2), *c = gsl_matrix_alloc(6, 2);
    const double f = on / (double)x->size1;
    const double wv[2][3] = {{0.3, 0.3, 0.4}, {0.6 - f, 0.4, f}};
    const double mv[2][6] = {{-1.0, 0.0, 1.0, 0.0, 8.0, 5.0},
                             {0.0, 0.0, 8.0, 5.0, 0.0, y / on}};
    for (size_t j = 0; j < 3; j++) {
        gsl_vector_set(w, j, wv[collapsed != 0][j]);
        gsl_matrix_set(mu, j, 0, mv[collapsed != 0][2 * j]);
        gsl_matrix_set(mu, j, 1, mv[collapsed != 0][2 * j + 1]);
    }
    gsl_matrix_set_zero(c);
    for (size_t j = 0; j < 3; j++) {
        gsl_matrix_set(c, 2 * j, 0, 1.0);
        gsl_matrix_set(c, 2 * j + 1, 1, 1.0);
    }
    if (collapsed)
        gsl_matrix_set(c, 4, 0, 1e-3);
    lse_error err;
    lse_assert_ok(lse_gmm_set_weights(m, w, &err));
    lse_assert_ok(lse_gmm_set_means(m, mu, &err));
    lse_assert_ok(lse_gmm_set_covariances(m, c, &err));
    gsl_vector_free(w);
    gsl_matrix_free(mu);
    gsl_matrix_free(c);
    return m;
}

static void count_degenerate(lse_log_level level, const char *msg, void *u)
{
    if (level == LSE_LOG_INFO && strstr(msg, "degenerate") != NULL)
        (*(int *)u)++;
}

/* emEM's degeneracy guard on a data set where a collapse is possible:
 * without it (degenerate = 0) the collapsed run wins by log-likelihood;
 * with it the non-degenerate optimum is kept; with only the collapsed
 * start, its fit is returned and the log says so */
START_TEST(test_emem_guard)
{
    gsl_matrix *x = lattice_data();
    lse_gmm *g[2] = {lattice_start(x, 1), lattice_start(x, 0)}, *m = NULL;
    lse_error err;
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm_emem_opts e = lse_gmm_emem_opts_default(3);
    e.n_starts = 0;
    e.n_random = 0;
    const double thr = LSE_GMM_EMEM_DEGENERATE * o.reg_covar;
    double lo, ll[2];
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    for (int guard = 0; guard < 2; guard++) {
        e.degenerate = guard ? LSE_GMM_EMEM_DEGENERATE : 0.0;
        lse_assert_ok(lse_gmm_fit_emem(m, x, &o, &e,
                                       (const lse_gmm *const *)g, 2, &err));
        ll[guard] = lse_gmm_info(m)->loglik;
        lse_assert_ok(lse_gmm_min_eigenvalue(m, &lo, &err));
        if (guard)
            ck_assert_msg(lo >= thr, "guarded fit degenerate: %g", lo);
        else
            ck_assert_msg(lo < thr, "the collapse did not happen: %g", lo);
    }
    ck_assert_msg(ll[0] > ll[1] + 1.0, "degenerate %.4f, kept %.4f", ll[0],
                  ll[1]);
    /* the guard's fit is the optimum EM reaches from the sensible start */
    lse_gmm *p = lattice_start(x, 0);
    lse_gmm_fit_opts po = o;
    po.init = LSE_GMM_INIT_GIVEN;
    lse_assert_ok(lse_gmm_fit(p, x, &po, &err));
    ck_assert_double_eq_tol(ll[1], lse_gmm_info(p)->loglik,
                            1e-8 * fabs(ll[1]));
    /* every candidate degenerate: the best is returned, the log says so */
    int said = 0;
    lse_set_log_handler(count_degenerate, &said);
    e.degenerate = LSE_GMM_EMEM_DEGENERATE;
    lse_assert_ok(lse_gmm_fit_emem(m, x, &o, &e,
                                   (const lse_gmm *const *)g, 1, &err));
    lse_set_log_handler(NULL, NULL);
    lse_assert_ok(lse_gmm_min_eigenvalue(m, &lo, &err));
    ck_assert(lo < thr);
    ck_assert_double_eq_tol(lse_gmm_info(m)->loglik, ll[0],
                            1e-8 * fabs(ll[0]));
    ck_assert_int_eq(said, 1);
    lse_gmm_free(p);
    lse_gmm_free(g[0]);
    lse_gmm_free(g[1]);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* lse_gmm_emem_threshold: 100 x reg_covar on data wider than that; 0 (the
 * guard off) on data with a constant column, for factor 0 or reg_covar 0 */
START_TEST(test_emem_threshold)
{
    gsl_matrix *x = lattice_data();
    gsl_matrix *y = gsl_matrix_alloc(x->size1, 3);
    for (size_t i = 0; i < x->size1; i++) {
        gsl_matrix_set(y, i, 0, gsl_matrix_get(x, i, 0));
        gsl_matrix_set(y, i, 1, gsl_matrix_get(x, i, 1));
        gsl_matrix_set(y, i, 2, 4.0);
    }
    lse_gmm *m = NULL, *m3 = NULL;
    lse_error err;
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    double thr = -1.0;
    const lse_cov_type t[4] = {LSE_COV_FULL, LSE_COV_DIAG, LSE_COV_SPHERICAL,
                               LSE_COV_TIED};
    for (int i = 0; i < 4; i++) {
        lse_assert_ok(lse_gmm_new(3, 2, t[i], &m, NULL));
        lse_assert_ok(lse_gmm_new(3, 3, t[i], &m3, NULL));
        lse_assert_ok(lse_gmm_emem_threshold(m, x, &o, 100.0, &thr, &err));
        ck_assert(thr == 100.0 * o.reg_covar);
        lse_assert_ok(lse_gmm_emem_threshold(m, x, &o, 0.0, &thr, &err));
        ck_assert(thr == 0.0);
        /* spherical: one variance, the average, is wide; the others see
         * the constant column */
        lse_assert_ok(lse_gmm_emem_threshold(m3, y, &o, 100.0, &thr, &err));
        ck_assert(thr == (t[i] == LSE_COV_SPHERICAL ? 100.0 * o.reg_covar
                                                    : 0.0));
        lse_gmm_free(m);
        lse_gmm_free(m3);
    }
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
    o.reg_covar = 0.0;
    lse_assert_ok(lse_gmm_emem_threshold(m, x, &o, 100.0, &thr, &err));
    ck_assert(thr == 0.0);
    lse_assert_status(lse_gmm_emem_threshold(m, NULL, &o, 100.0, &thr, &err),
                      LSE_EFAULT);
    lse_gmm_free(m);
    gsl_matrix_free(y);
    gsl_matrix_free(x);
}
END_TEST

/* lse_gmm_split: the halves of component j across the principal axis of
 * its scatter (for K = 1 the data's covariance), the rest copied */
START_TEST(test_split)
{
    gsl_matrix *x = simulate(400, 3, NULL);
    lse_error err;
    const lse_cov_type types[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                   LSE_COV_SPHERICAL, LSE_COV_TIED};
    /* the data's mean and covariance, its principal axis */
    const size_t n = x->size1;
    double mu[2] = {0, 0}, c[2][2] = {{0, 0}, {0, 0}};
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < 2; a++)
            mu[a] += gsl_matrix_get(x, i, a) / (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++)
                c[a][b] += (gsl_matrix_get(x, i, a) - mu[a]) *
                           (gsl_matrix_get(x, i, b) - mu[b]) / (double)n;
    const double tr = c[0][0] + c[1][1], det = c[0][0] * c[1][1] - c[0][1] * c[0][1];
    const double lam = tr / 2 + sqrt(tr * tr / 4 - det);
    double v[2] = {c[0][1], lam - c[0][0]};
    const double nv = hypot(v[0], v[1]);
    v[0] /= nv;
    v[1] /= nv;
    for (size_t t = 0; t < 4; t++) {
        lse_gmm *one = NULL, *two = NULL;
        lse_assert_ok(lse_gmm_new(1, 2, types[t], &one, NULL));
        lse_assert_ok(lse_gmm_new(2, 2, types[t], &two, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        lse_assert_ok(lse_gmm_fit(one, x, &o, &err));
        lse_assert_ok(lse_gmm_split(one, x, NULL, 0, two, &err));
        const gsl_vector *w = lse_gmm_weights(two);
        ck_assert_double_eq_tol(gsl_vector_get(w, 0), 0.5, 1e-12);
        ck_assert_double_eq_tol(gsl_vector_get(w, 1), 0.5, 1e-12);
        const gsl_matrix *m1 = lse_gmm_means(one), *m2 = lse_gmm_means(two);
        const double step = sqrt(2.0 * lam / M_PI);
        for (size_t a = 0; a < 2; a++) {
            /* symmetric about the mean, sqrt(2 lambda / pi) along v */
            const double da = gsl_matrix_get(m2, 0, a) - gsl_matrix_get(m1, 0, a);
            ck_assert_double_eq_tol(gsl_matrix_get(m2, 1, a),
                                    gsl_matrix_get(m1, 0, a) - da, 1e-12);
            ck_assert_double_eq_tol(fabs(da), step * fabs(v[a]), 1e-9);
        }
        gsl_matrix *s1 = gsl_matrix_alloc(2, 2), *s2 = gsl_matrix_alloc(2, 2);
        lse_assert_ok(lse_gmm_get_covariance(one, 0, s1));
        for (size_t j = 0; j < 2; j++) {
            lse_assert_ok(lse_gmm_get_covariance(two, j, s2));
            for (size_t a = 0; a < 4; a++)
                ck_assert_double_eq_tol(s2->data[a], s1->data[a],
                                        1e-12 * (1 + fabs(s1->data[a])));
        }
        /* errors: j, the shape of dst, the data */
        lse_assert_status(lse_gmm_split(one, x, NULL, 1, two, &err),
                          LSE_ERANGE);
        lse_assert_status(lse_gmm_split(one, x, NULL, 0, one, &err),
                          LSE_EINVAL);
        gsl_matrix_view x1 = gsl_matrix_submatrix(x, 0, 0, n, 1);
        lse_assert_status(lse_gmm_split(one, &x1.matrix, NULL, 0, two, &err),
                          LSE_EDIM);
        lse_assert_status(lse_gmm_split(NULL, x, NULL, 0, two, &err),
                          LSE_EFAULT);
        gsl_matrix_free(s1);
        gsl_matrix_free(s2);
        lse_gmm_free(one);
        lse_gmm_free(two);
    }
    /* a split start of K = 2 from K = 1, run by emEM as a given start */
    lse_gmm *one = NULL, *two = NULL, *m = NULL;
    lse_assert_ok(lse_gmm_new(1, 2, LSE_COV_FULL, &one, NULL));
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &two, NULL));
    lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_assert_ok(lse_gmm_fit(one, x, &o, &err));
    lse_assert_ok(lse_gmm_split(one, x, NULL, 0, two, &err));
    lse_gmm_emem_opts e = {0, 0, 5, 1, 1, 0.0, 0.0, 0};
    const lse_gmm *given[1] = {two};
    lse_assert_ok(lse_gmm_fit_emem(m, x, &o, &e, given, 1, &err));
    o.init = LSE_GMM_INIT_GIVEN;
    lse_assert_ok(lse_gmm_fit(two, x, &o, &err));
    ck_assert_double_eq_tol(lse_gmm_info(m)->loglik, lse_gmm_info(two)->loglik,
                            1e-9 * fabs(lse_gmm_info(two)->loglik));
    lse_gmm_free(one);
    lse_gmm_free(two);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

/* lse_gmm_merge: components i < j become the two-component mixture's
 * moments (mean, covariance E[x x'] - mu mu', computed here from the
 * second moments), the others keep their order; diag keeps the diagonal,
 * spherical the mean variance, tied the shared covariance */
START_TEST(test_merge)
{
    gsl_matrix *x = simulate(400, 3, NULL);
    lse_error err;
    const lse_cov_type types[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                   LSE_COV_SPHERICAL, LSE_COV_TIED};
    for (size_t t = 0; t < 4; t++) {
        lse_gmm *three = NULL, *two = NULL;
        lse_assert_ok(lse_gmm_new(3, 2, types[t], &three, NULL));
        lse_assert_ok(lse_gmm_new(2, 2, types[t], &two, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        lse_assert_ok(lse_gmm_fit(three, x, &o, &err));
        const gsl_vector *w3 = lse_gmm_weights(three);
        const gsl_matrix *m3 = lse_gmm_means(three);
        const size_t i = 0, j = 2, other = 1;
        lse_assert_ok(lse_gmm_merge(three, i, j, two, &err));
        const double wi = gsl_vector_get(w3, i), wj = gsl_vector_get(w3, j);
        ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(two), 0),
                                wi + wj, 1e-12);
        ck_assert_double_eq_tol(gsl_vector_get(lse_gmm_weights(two), 1),
                                gsl_vector_get(w3, other), 1e-12);
        gsl_matrix *si = gsl_matrix_alloc(2, 2), *sj = gsl_matrix_alloc(2, 2);
        gsl_matrix *sm = gsl_matrix_alloc(2, 2), *so = gsl_matrix_alloc(2, 2);
        lse_assert_ok(lse_gmm_get_covariance(three, i, si));
        lse_assert_ok(lse_gmm_get_covariance(three, j, sj));
        lse_assert_ok(lse_gmm_get_covariance(two, 0, sm));
        double mu[2], mom[2][2], want[2][2];
        for (size_t a = 0; a < 2; a++) {
            mu[a] = (wi * gsl_matrix_get(m3, i, a) +
                     wj * gsl_matrix_get(m3, j, a)) / (wi + wj);
            ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(two), 0, a),
                                    mu[a], 1e-12 * (1 + fabs(mu[a])));
            ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(two), 1, a),
                                    gsl_matrix_get(m3, other, a), 1e-15);
        }
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++) {
                mom[a][b] = (wi * (gsl_matrix_get(si, a, b) +
                                   gsl_matrix_get(m3, i, a) *
                                       gsl_matrix_get(m3, i, b)) +
                             wj * (gsl_matrix_get(sj, a, b) +
                                   gsl_matrix_get(m3, j, a) *
                                       gsl_matrix_get(m3, j, b))) /
                            (wi + wj);
                want[a][b] = mom[a][b] - mu[a] * mu[b];
            }
        if (types[t] == LSE_COV_DIAG)
            want[0][1] = want[1][0] = 0.0;
        if (types[t] == LSE_COV_SPHERICAL) {
            const double v = (want[0][0] + want[1][1]) / 2.0;
            want[0][0] = want[1][1] = v;
            want[0][1] = want[1][0] = 0.0;
        }
        if (types[t] == LSE_COV_TIED) /* unchanged */
            for (size_t a = 0; a < 2; a++)
                for (size_t b = 0; b < 2; b++)
                    want[a][b] = gsl_matrix_get(si, a, b);
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++)
                ck_assert_double_eq_tol(gsl_matrix_get(sm, a, b), want[a][b],
                                        1e-9 * (1 + fabs(want[a][b])));
        /* the other component's covariance is copied */
        lse_assert_ok(lse_gmm_get_covariance(three, other, si));
        lse_assert_ok(lse_gmm_get_covariance(two, 1, so));
        for (size_t a = 0; a < 4; a++)
            ck_assert_double_eq_tol(so->data[a], si->data[a],
                                    1e-12 * (1 + fabs(si->data[a])));
        /* errors: the pair, the shape of dst, NULL */
        lse_assert_status(lse_gmm_merge(three, 2, 1, two, &err), LSE_ERANGE);
        lse_assert_status(lse_gmm_merge(three, 1, 3, two, &err), LSE_ERANGE);
        lse_assert_status(lse_gmm_merge(three, 0, 1, three, &err),
                          LSE_EINVAL);
        lse_assert_status(lse_gmm_merge(NULL, 0, 1, two, &err), LSE_EFAULT);
        gsl_matrix_free(si);
        gsl_matrix_free(sj);
        gsl_matrix_free(sm);
        gsl_matrix_free(so);
        lse_gmm_free(three);
        lse_gmm_free(two);
    }
    gsl_matrix_free(x);
}
END_TEST

/* the default budget grows with K as documented */
START_TEST(test_emem_default)
{
    for (size_t k = 1; k <= 9; k++) {
        const lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k);
        ck_assert_uint_eq(e.n_starts, LSE_GMM_EMEM_STARTS +
                                          LSE_GMM_EMEM_STARTS_PER_K * k);
        ck_assert_uint_eq(e.n_random, LSE_GMM_EMEM_RANDOM +
                                          LSE_GMM_EMEM_RANDOM_PER_K * k);
        ck_assert_uint_eq(e.short_iter, LSE_GMM_EMEM_SHORT);
        ck_assert_uint_eq(e.n_keep, LSE_GMM_EMEM_KEEP);
    }
}
END_TEST

/* bootstrap standard errors shrink like 1 / sqrt(N); the weight's is
 * close to the binomial sqrt(pi (1 - pi) / N) for separated components */
START_TEST(test_bootstrap_rate)
{
    double se[2][3];
    const size_t ns[2] = {300, 1200};
    lse_error err;
    for (size_t r = 0; r < 2; r++) {
        gsl_matrix *x = simulate(ns[r], 11, NULL);
        lse_gmm *m = NULL;
        lse_assert_ok(lse_gmm_new(2, 2, LSE_COV_FULL, &m, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        lse_gmm_boot b;
        lse_assert_ok(lse_gmm_bootstrap(m, ns[r], 150, 7, &o, &b, &err));
        ck_assert_uint_eq(b.n_boot, 150);
        se[r][0] = gsl_vector_get(b.weights, 0);
        se[r][1] = gsl_matrix_get(b.means, 0, 0);
        se[r][2] = gsl_matrix_get(b.covariances, 2, 1); /* comp 1 (1,0) */
        const double p = gsl_vector_get(lse_gmm_weights(m), 0);
        ck_assert_double_eq_tol(se[r][0], sqrt(p * (1 - p) / (double)ns[r]),
                                0.25 * sqrt(p * (1 - p) / (double)ns[r]));
        lse_gmm_boot_free(&b);
        lse_gmm_boot_free(&b); /* idempotent */
        lse_assert_status(lse_gmm_bootstrap(m, ns[r], 1, 7, &o, &b, &err),
                          LSE_EINVAL);
        lse_gmm_free(m);
        gsl_matrix_free(x);
    }
    for (size_t j = 0; j < 3; j++) {
        const double ratio = se[0][j] / se[1][j]; /* sqrt(4) = 2 */
        ck_assert_msg(ratio > 1.6 && ratio < 2.5, "parameter %zu: ratio %g",
                      j, ratio);
    }
}
END_TEST

static char dir[64];

static lse_json *load_json(const char *path)
{
    lse_json *doc = NULL;
    lse_error err;
    lse_assert_ok(lse_json_load(path, &doc, &err));
    return doc;
}

/* mclust's default fit (hcVVV start) of Faithful, VVV, K, polished to
 * convergence from its own posteriors (tests/ref/mclust_ref.R) */
static double mclust_default_loglik(size_t k)
{
    FILE *f = fopen(MCLUST_REF, "r");
    ck_assert_ptr_nonnull(f);
    static char line[65536];
    double out = NAN;
    while (fgets(line, sizeof line, f) != NULL) {
        char set[32], name[8];
        size_t kk, df;
        double ll0, bic0, ll;
        if (sscanf(line, "%31s %7s %zu %zu %lf %lf %lf", set, name, &kk, &df,
                   &ll0, &bic0, &ll) == 7 &&
            strcmp(set, "faithful") == 0 && strcmp(name, "VVV") == 0 &&
            kk == k)
            out = ll;
    }
    fclose(f);
    return out;
}

/* --init hcvvv reaches mclust's default fits; --init emem+hc at least
 * those */
START_TEST(test_cli_hcvvv)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], model[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(model, sizeof model, "%s/m.json", dir);
    const char *inits[] = {"hcvvv", "emem+hc"};
    for (size_t i = 0; i < 2; i++)
        for (size_t k = 2; k <= 4; k++) {
            snprintf(args, sizeof args,
                     "gmm '%s/faithful.csv' -k %zu --init %s --reg-covar 0 "
                     "-o '%s' -q",
                     LSE_DATA_DIR, k, inits[i], model);
            ck_assert_int_eq(lse_run_lsefit(args, out), 0);
            lse_json *doc = load_json(model);
            double ll;
            lse_error err;
            lse_assert_ok(lse_json_get_number(doc, "loglik", &ll, &err));
            const double want = mclust_default_loglik(k);
            if (i == 0) /* the optimum mclust's start leads to */
                ck_assert_double_eq_tol(ll, want, 1e-6 * fabs(want));
            else
                ck_assert(ll >= want - 1e-6 * fabs(want));
            lse_json_free(doc);
        }
    snprintf(args, sizeof args,
             "gmm '%s/faithful.csv' -k 2 --init hcvvv --weights waiting",
             LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 2);
    snprintf(args, sizeof args, "gmm '%s/faithful.csv' -k 2 --bootstrap 1",
             LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 2);
    lse_tmpdir_remove(dir);
}
END_TEST

/* the default start: the chain K = 1, 2, ... is recomputed when needed, so
 * the top K of a range is the fit -k K alone gives, and a smaller K's row
 * (which also tries the merges of the K + 1 fit) is at least that; on
 * Faithful (full, K = 1..4) it reaches the best-known optima of
 * bench/gmm_starts_best.txt within 0.01 */
START_TEST(test_cli_default_start)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], model[128], args[1024], line[512];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(model, sizeof model, "%s/m.json", dir);
    double target[5] = {0}, table[5] = {0};
    FILE *f = fopen(LSE_DATA_DIR "/../bench/gmm_starts_best.txt", "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL) {
        size_t k;
        double v;
        if (sscanf(line, "faithful full %zu %lf", &k, &v) == 2 && k <= 4)
            target[k] = v;
    }
    fclose(f);
    snprintf(args, sizeof args, "gmm '%s/faithful.csv' -k 1:4 -q",
             LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL) {
        size_t k, p;
        double v;
        if (sscanf(line, "%zu %zu %lf", &k, &p, &v) == 3 && k >= 1 && k <= 4)
            table[k] = v;
    }
    fclose(f);
    for (size_t k = 1; k <= 4; k++) {
        ck_assert_msg(target[k] < 0 && table[k] >= target[k] - 0.01,
                      "K = %zu: %.4f, best known %.4f", k, table[k],
                      target[k]);
        snprintf(args, sizeof args, "gmm '%s/faithful.csv' -k %zu -o '%s' -q",
                 LSE_DATA_DIR, k, model);
        ck_assert_int_eq(lse_run_lsefit(args, out), 0);
        lse_json *doc = load_json(model);
        double ll;
        lse_error err;
        lse_assert_ok(lse_json_get_number(doc, "loglik", &ll, &err));
        if (k == 4) /* printed to 1e-4 */
            ck_assert_double_eq_tol(ll, table[k], 1e-4);
        else
            ck_assert(table[k] >= ll - 1e-4);
        lse_json_free(doc);
    }
    lse_tmpdir_remove(dir);
}
END_TEST

/* the log-likelihood of K's row of the table `-k A:B` printed to out
 * (NaN when missing) */
static double table_loglik(const char *out, size_t want)
{
    char line[512];
    double ll = NAN;
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL) {
        size_t k, p;
        double v;
        if (sscanf(line, "%zu %zu %lf", &k, &p, &v) == 3 && k == want)
            ll = v;
    }
    fclose(f);
    return ll;
}

/* the merges of the K + 1 fit: Faithful tied K = 7, whose best-known
 * optimum (bench/gmm_starts_best.txt, -1109.2896) no short run of the
 * emEM budget reaches (-1111.83 without merges), is reached in a range up
 * to 8 (the merges of the chain's K = 8 fit) and alone (-k 7, the top of
 * its range: the merges of the cheap K = 8 fit of kmax_improve, session
 * 12), to the same optimum */
START_TEST(test_cli_merge)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(args, sizeof args,
             "gmm '%s/faithful.csv' -k 7:8 --covariance tied -q",
             LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    const double ranged = table_loglik(out, 7);
    snprintf(args, sizeof args,
             "gmm '%s/faithful.csv' -k 7 --covariance tied", LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    double alone = NAN;
    char line[512];
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "log-likelihood %lf", &alone) == 1)
            break;
    fclose(f);
    ck_assert_msg(ranged >= -1109.2896 - 0.01 && alone >= -1109.2896 - 0.01 &&
                      fabs(ranged - alone) < 1e-3,
                  "K = 7 in 7:8: %.4f, alone %.4f", ranged, alone);
    lse_tmpdir_remove(dir);
}
END_TEST

/* lsefit gmm DATA -k 8 --covariance COV (alone: the top of its range,
 * with no K + 1 fit in the chain, kmax_improve in
 * tools/lsefit_gmmstart.c) reaches the best-known optimum of the cell
 * "SET COV 8" of bench/gmm_starts_best.txt within 0.01 (DATA in data/,
 * EXTRA its options), and the fit is no
 * degenerate one: every covariance eigenvalue above the guard's 100 x
 * reg_covar */
static void check_last_k(const char *set, const char *data, const char *extra,
                         const char *cov)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], model[128], args[1024], line[512], s1[32], c1[32];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(model, sizeof model, "%s/m.json", dir);
    double target = 0.0, v;
    unsigned k;
    FILE *f = fopen(LSE_DATA_DIR "/../bench/gmm_starts_best.txt", "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "%31s %31s %u %lf", s1, c1, &k, &v) == 4 &&
            strcmp(s1, set) == 0 && strcmp(c1, cov) == 0 && k == 8) {
            target = v;
            break;
        }
    fclose(f);
    snprintf(args, sizeof args,
             "gmm '%s/%s' %s -k 8 --covariance %s -o '%s' -q", LSE_DATA_DIR,
             data, extra, cov, model);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    lse_json *doc = load_json(model);
    double ll, lo;
    lse_error err;
    lse_assert_ok(lse_json_get_number(doc, "loglik", &ll, &err));
    ck_assert_msg(target < 0 && ll >= target - 0.01,
                  "%s %s K = 8: %.4f, best known %.4f", set, cov, ll, target);
    lse_gmm *m = NULL;
    lse_assert_ok(lse_gmm_from_json(doc, NULL, &m, NULL, &err));
    lse_assert_ok(lse_gmm_min_eigenvalue(m, &lo, &err));
    ck_assert_msg(lo > 1e-4, "%s %s: smallest eigenvalue %.3g", set, cov, lo);
    lse_gmm_free(m);
    lse_json_free(doc);
    lse_tmpdir_remove(dir);
}

/* Iris diag K = 8 alone reaches its best-known optimum (-171.0079)
 * through the merges of a cheap K = 9 fit; before session 12 it ended at
 * -172.26 */
START_TEST(test_cli_last_k)
{
    check_last_k("iris", "iris.csv", "--ignore species", "diag");
}
END_TEST

/* split-and-merge EM on that K = 9 fit (session 14): Iris full K = 8
 * reaches -68.6748 (was -76.78) and Faithful diag K = 8 -1086.6050 (was
 * -1088.11), the last two cells of the start table the default missed */
START_TEST(test_cli_last_k_smem)
{
    check_last_k("iris", "iris.csv", "--ignore species", "full");
    check_last_k("faithful", "faithful.csv", "", "diag");
}
END_TEST

/* the session-10 budget (3 short runs to convergence, SMEM's 4 best
 * partial runs kept): Iris full K = 6 and 7 in -k 1:8 reach their
 * best-known optima (bench/gmm_starts_best.txt, -116.3846 and -96.9949),
 * which the session-9 budget (2 kept, 8) missed at -116.79 and -98.84 */
START_TEST(test_cli_budget)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(args, sizeof args,
             "gmm '%s/iris.csv' --ignore species -k 1:8 --covariance full "
             "-q", LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    const double k6 = table_loglik(out, 6), k7 = table_loglik(out, 7);
    ck_assert_msg(k6 >= -116.3846 - 0.01 && k7 >= -96.9949 - 0.01,
                  "Iris full K = 6: %.4f, K = 7: %.4f", k6, k7);
    lse_tmpdir_remove(dir);
}
END_TEST

/* lsefit's guard: the merges of the K + 1 fit do not bring back a
 * degenerate K = 5 on Faithful (without the guard -k 5:6 printed -1073.72,
 * a component collapsed onto a line of equal waiting times; the best
 * non-degenerate optimum known is near -1095); and a fit whose every
 * start ends degenerate (five values on the integers, K = 3) is kept and
 * named in a warning */
START_TEST(test_cli_degenerate)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], csv[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(csv, sizeof csv, "%s/lattice.csv", dir);
    snprintf(args, sizeof args, "gmm '%s/faithful.csv' -k 5:6 -q",
             LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    const double k5 = table_loglik(out, 5);
    ck_assert_msg(k5 < -1094.0 && k5 > -1097.0, "K = 5 in 5:6: %.4f", k5);
    FILE *f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fputs("v\n", f);
    for (int i = 0; i < 20; i++)
        fputs("0\n1\n2\n3\n5\n", f);
    fclose(f);
    snprintf(args, sizeof args, "gmm '%s' -k 3", csv);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    char line[512];
    int warned = 0;
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL)
        warned += strstr(line, "lsefit: warning: K = 3: every start ended "
                               "degenerate") != NULL;
    fclose(f);
    ck_assert_int_eq(warned, 1);
    /* a constant column: every fit is as thin as the data, the guard is
     * off and says nothing */
    f = fopen(csv, "w");
    ck_assert_ptr_nonnull(f);
    fputs("v,c\n", f);
    for (int i = 0; i < 60; i++)
        fprintf(f, "%.3f,1\n", (i % 2 ? 5.0 : 0.0) + 0.37 * (i % 7));
    fclose(f);
    snprintf(args, sizeof args, "gmm '%s' -k 2 --reg-covar 1e-3", csv);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    warned = 0;
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL)
        warned += strstr(line, "degenerate") != NULL;
    fclose(f);
    ck_assert_int_eq(warned, 0);
    lse_tmpdir_remove(dir);
}
END_TEST

/* --smem N sets split-and-merge EM's moves per round: --smem 0 turns it
 * off, and on Iris diag K = 5..7 the default's moves reach the higher
 * optimum one move away (docs/lsefit.md, "Split-and-merge EM": K = 7
 * -191.691 against -191.738 without); a bad value is refused with the
 * option named */
START_TEST(test_cli_smem)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], model[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(model, sizeof model, "%s/m.json", dir);
    double ll[2];
    const char *opt[2] = {"", "--smem 0"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "gmm '%s/iris.csv' --ignore species -k 5:7 --covariance "
                 "diag %s -o '%s' -q",
                 LSE_DATA_DIR, opt[i], model);
        ck_assert_int_eq(lse_run_lsefit(args, out), 0);
        lse_json *doc = load_json(model);
        lse_error err;
        lse_assert_ok(lse_json_get_number(doc, "loglik", &ll[i], &err));
        lse_json_free(doc);
    }
    ck_assert_msg(ll[0] > ll[1] + 0.01, "default %.6f, --smem 0 %.6f", ll[0],
                  ll[1]);
    snprintf(args, sizeof args, "gmm '%s/iris.csv' --smem x -k 2 -q",
             LSE_DATA_DIR);
    ck_assert_int_eq(lse_run_lsefit(args, out), 2);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_msg(strstr(line, "--smem 'x'") != NULL, "%s", line);
    lse_tmpdir_remove(dir);
}
END_TEST

/* --proba: p0..p(K-1), then 1 - max_k p_k */
START_TEST(test_cli_uncertainty)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], model[128], proba[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(model, sizeof model, "%s/m.json", dir);
    snprintf(proba, sizeof proba, "%s/p.csv", dir);
    snprintf(args, sizeof args,
             "gmm '%s/iris.csv' --ignore species -k 3 -o '%s' -q",
             LSE_DATA_DIR, model);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    snprintf(args, sizeof args,
             "gmm predict '%s' '%s/iris.csv' --proba '%s' -q", model,
             LSE_DATA_DIR, proba);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    FILE *f = fopen(proba, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "p0,p1,p2,uncertainty\n");
    size_t rows = 0, uncertain = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        double p[4];
        ck_assert_int_eq(
            sscanf(line, "%lf,%lf,%lf,%lf", &p[0], &p[1], &p[2], &p[3]), 4);
        const double mx = fmax(p[0], fmax(p[1], p[2]));
        ck_assert_double_eq_tol(p[0] + p[1] + p[2], 1.0, 1e-9);
        ck_assert_double_eq_tol(p[3], 1.0 - mx, 1e-12);
        ck_assert(p[3] >= 0.0 && p[3] <= 2.0 / 3.0);
        uncertain += p[3] > 0.1;
        rows++;
    }
    fclose(f);
    ck_assert_uint_eq(rows, 150);
    ck_assert(uncertain > 0 && uncertain < 20); /* versicolor/virginica */
    lse_tmpdir_remove(dir);
}
END_TEST

/* --bootstrap B on Faithful, K = 2: saved in the model file and within
 * Monte-Carlo error of mclust's MclustBootstrap (type "pb", 999
 * replicates) */
START_TEST(test_cli_bootstrap_mclust)
{
    lse_tmpdir_make(dir, sizeof dir, "gmm_starts");
    char out[128], model[128], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(model, sizeof model, "%s/m.json", dir);
    snprintf(args, sizeof args,
             "gmm '%s/faithful.csv' -k 2 --bootstrap 400 --seed 3 -o '%s'",
             LSE_DATA_DIR, model);
    ck_assert_int_eq(lse_run_lsefit(args, out), 0);
    lse_json *doc = load_json(model), *b = NULL;
    lse_error err;
    lse_assert_ok(lse_json_get_object(doc, "bootstrap", &b, &err));
    gsl_vector *w = NULL;
    gsl_matrix *mu = NULL, *cv = NULL, *means = NULL;
    lse_assert_ok(lse_json_get_vector(b, "weights_se", 2, &w, &err));
    lse_assert_ok(lse_json_get_matrix(b, "means_se", 2, 2, &mu, &err));
    lse_assert_ok(
        lse_json_get_stack(b, "covariances_se", 2, 2, 2, &cv, NULL, &err));
    lse_assert_ok(lse_json_get_matrix(doc, "means", 2, 2, &means, &err));
    long long nb;
    lse_assert_ok(lse_json_get_integer(b, "n_boot", &nb, &err));
    ck_assert_int_eq(nb, 400);
    /* mclust's order: by mean eruption time */
    const size_t ord[2] = {
        gsl_matrix_get(means, 0, 0) < gsl_matrix_get(means, 1, 0) ? 0u : 1u,
        gsl_matrix_get(means, 0, 0) < gsl_matrix_get(means, 1, 0) ? 1u : 0u};
    FILE *f = fopen(BOOT_REF, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    size_t checked = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *p = strchr(line, ' ');
        if (line[0] == '#' || p == NULL)
            continue;
        for (size_t c = 0; c < 2; c++) {
            const size_t cnt = strncmp(line, "pro", 3) == 0    ? 1
                               : strncmp(line, "mean", 4) == 0 ? 2
                                                               : 4;
            for (size_t j = 0; j < cnt; j++) {
                const double want = strtod(p, &p);
                double got;
                if (cnt == 1)
                    got = gsl_vector_get(w, ord[c]);
                else if (cnt == 2)
                    got = gsl_matrix_get(mu, ord[c], j);
                else
                    got = gsl_matrix_get(cv, 2 * ord[c] + j / 2, j % 2);
                /* Monte-Carlo error of an SE from B replicates: about
                 * 1 / sqrt(2 B), 3.5 % here and 2.2 % for mclust */
                ck_assert_msg(fabs(got - want) < 0.25 * want,
                              "%.4s component %zu entry %zu: %g, mclust %g",
                              line, c, j, got, want);
                checked++;
            }
        }
    }
    fclose(f);
    ck_assert_uint_eq(checked, 14);
    gsl_vector_free(w);
    gsl_matrix_free(mu);
    gsl_matrix_free(cv);
    gsl_matrix_free(means);
    lse_json_free(b);
    lse_json_free(doc);
    char *text = NULL;
    size_t len = 0;
    lse_assert_ok(lse_file_read(out, &text, &len, &err));
    ck_assert_ptr_nonnull(strstr(text, "Bootstrap standard errors"));
    free(text);
    lse_tmpdir_remove(dir);
}
END_TEST

/* emEM's rounds (n_rounds): with every run kept (n_keep = all), two
 * rounds of 5 iterations are one of 10, EM being memoryless (plain EM,
 * the parameters carried between rounds); and lse_gmm_copy carries the fit
 * info with the parameters. */
START_TEST(test_emem_rounds)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    lse_error err;
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.accel = LSE_GMM_ACCEL_NONE;
    lse_gmm *a = NULL, *b = NULL, *c = NULL;
    lse_assert_ok(lse_gmm_new(4, 2, LSE_COV_FULL, &a, NULL));
    lse_assert_ok(lse_gmm_new(4, 2, LSE_COV_FULL, &b, NULL));
    const lse_gmm_emem_opts one = {6, 2, 10, 8, 1, 0.0, 0.0, 0}, two = {6, 2, 5, 8, 2, 0.0, 0.0, 0};
    lse_assert_ok(lse_gmm_fit_emem(a, x, &o, &one, NULL, 0, &err));
    lse_assert_ok(lse_gmm_fit_emem(b, x, &o, &two, NULL, 0, &err));
    const double la = lse_gmm_info(a)->loglik, lb = lse_gmm_info(b)->loglik;
    ck_assert_double_eq_tol(la, lb, 1e-9 * fabs(la));
    /* three rounds keeping the best third: a fit, its info its own */
    const lse_gmm_emem_opts three = {12, 4, 5, 1, 3, 1e-5, 0.0, 0};
    lse_assert_ok(lse_gmm_fit_emem(b, x, &o, &three, NULL, 0, &err));
    gsl_vector *sc = gsl_vector_alloc(x->size1);
    lse_assert_ok(lse_gmm_score_samples(b, x, sc, &err));
    double tot = 0.0;
    for (size_t i = 0; i < x->size1; i++)
        tot += gsl_vector_get(sc, i);
    ck_assert_double_eq_tol(tot, lse_gmm_info(b)->loglik, 1e-9 * fabs(tot));
    ck_assert(lse_gmm_info(b)->converged);
    /* lse_gmm_copy */
    lse_assert_ok(lse_gmm_copy(a, b, &err));
    ck_assert_double_eq(lse_gmm_info(a)->loglik, lse_gmm_info(b)->loglik);
    ck_assert_uint_eq(lse_gmm_info(a)->n_iter, lse_gmm_info(b)->n_iter);
    for (size_t k = 0; k < 4; k++) {
        ck_assert_double_eq(gsl_vector_get(lse_gmm_weights(a), k),
                            gsl_vector_get(lse_gmm_weights(b), k));
        for (size_t j = 0; j < 4; j++)
            ck_assert_double_eq(
                gsl_matrix_get(lse_gmm_covariances(a), 2 * k + j / 2, j % 2),
                gsl_matrix_get(lse_gmm_covariances(b), 2 * k + j / 2, j % 2));
    }
    lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &c, NULL));
    lse_assert_status(lse_gmm_copy(c, b, &err), LSE_EINVAL);
    lse_assert_status(lse_gmm_copy(NULL, b, &err), LSE_EFAULT);
    gsl_vector_free(sc);
    lse_gmm_free(a);
    lse_gmm_free(b);
    lse_gmm_free(c);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_starts");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_init_labels);
    tcase_add_test(tc, test_emem);
    tcase_add_test(tc, test_emem_rounds);
    tcase_add_test(tc, test_min_eigenvalue);
    tcase_add_test(tc, test_emem_guard);
    tcase_add_test(tc, test_emem_threshold);
    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_merge);
    tcase_add_test(tc, test_emem_default);
    tcase_add_test(tc, test_bootstrap_rate);
    tcase_add_test(tc, test_cli_hcvvv);
    tcase_add_test(tc, test_cli_default_start);
    tcase_add_test(tc, test_cli_merge);
    tcase_add_test(tc, test_cli_budget);
    tcase_add_test(tc, test_cli_last_k);
    tcase_add_test(tc, test_cli_last_k_smem);
    tcase_add_test(tc, test_cli_degenerate);
    tcase_add_test(tc, test_cli_uncertainty);
    tcase_add_test(tc, test_cli_smem);
    tcase_add_test(tc, test_cli_bootstrap_mclust);
    suite_add_tcase(s, tc);
    return s;
}
