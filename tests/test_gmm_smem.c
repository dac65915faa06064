/* Split-and-merge EM (lse_gmm_smem, models/gmm_smem.c): the
 * log-likelihood never falls, an accepted move is a strict improvement, a
 * fit where plain EM is stuck (two components sharing one cluster, one
 * component covering two) is repaired to the true clusters for every
 * covariance type and mclust model, the data-parallel path equals one
 * process, 1, 2 and 3 threads give the same bits (K = 8 with weights and
 * missing values too), a failing score, emEM's call, and the argument
 * errors. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "lse_simcomm.h"

static lse_gmm *new_of(size_t k, size_t d, lse_cov_type t, lse_cov_model cm)
{
    lse_gmm *m = NULL;
    if (cm != LSE_COV_MODEL_NONE)
        lse_assert_ok(lse_gmm_new_model(k, d, cm, &m, NULL));
    else
        lse_assert_ok(lse_gmm_new(k, d, t, &m, NULL));
    return m;
}

/* From plain EM fits (k-means++ starts, several seeds) of Faithful and
 * Iris, K = 3..6, every covariance type: the log-likelihood after
 * lse_gmm_smem is never lower; where a move was accepted it rose by more
 * than min_gain |ll|; where none was the parameters are untouched. Some
 * move must be accepted somewhere (else the test could not fail on
 * strictness). */
START_TEST(test_never_falls)
{
    const char *names[2] = {"faithful.csv", "iris.csv"};
    const size_t dims[2] = {2, 4};
    const lse_cov_type types[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                   LSE_COV_SPHERICAL, LSE_COV_TIED};
    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    size_t accepted = 0, tried = 0;
    for (int ds = 0; ds < 2; ds++) {
        gsl_matrix *x = lse_check_load(LSE_DATA_DIR, names[ds], dims[ds]);
        for (int ti = 0; ti < 4; ti++)
            for (size_t k = 3; k <= 6; k++)
                for (unsigned long seed = 0; seed < 2; seed++) {
                    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
                    o.seed = seed;
                    /* both ways of continuing the kept partial runs */
                    s.keep_iter = seed == 0 ? 0 : 25;
                    /* scoring only some moves (K = 6 has 60) */
                    s.n_score = seed == 0 ? LSE_GMM_SMEM_SCORE : 7;
                    lse_error err;
                    lse_gmm *m = new_of(k, dims[ds], types[ti],
                                        LSE_COV_MODEL_NONE);
                    lse_gmm *before = new_of(k, dims[ds], types[ti],
                                             LSE_COV_MODEL_NONE);
                    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
                    lse_assert_ok(lse_gmm_copy(before, m, &err));
                    const double l0 = lse_gmm_info(m)->loglik;
                    size_t moves = 99;
                    lse_assert_ok(lse_gmm_smem(m, x, &o, &s, &moves, &err));
                    const double l1 = lse_gmm_info(m)->loglik;
                    ck_assert_msg(l1 >= l0, "%s K = %zu type %d: %.10g < %.10g",
                                  names[ds], k, ti, l1, l0);
                    if (moves > 0)
                        ck_assert_msg(l1 - l0 > s.min_gain * fabs(l0),
                                      "accepted without a strict gain");
                    else
                        ck_assert(gsl_matrix_equal(lse_gmm_means(m),
                                                   lse_gmm_means(before)));
                    /* the reported log-likelihood is the fit's own */
                    double sc = 0.0;
                    gsl_vector *ll = gsl_vector_alloc(x->size1);
                    lse_assert_ok(lse_gmm_score_samples(m, x, ll, &err));
                    for (size_t i = 0; i < x->size1; i++)
                        sc += gsl_vector_get(ll, i);
                    ck_assert_double_eq_tol(sc, l1, 1e-6 * fabs(l1));
                    gsl_vector_free(ll);
                    accepted += moves > 0;
                    tried++;
                    lse_gmm_free(m);
                    lse_gmm_free(before);
                }
        gsl_matrix_free(x);
    }
    ck_assert_msg(accepted > 0, "no move accepted in %zu fits", tried);
}
END_TEST

/* three clusters (sd 1) at A = (-20, 0), B = (10, 0), C = (10, 8);
 * labels into lab */
static gsl_matrix *three(size_t n, size_t *lab)
{
    static const double mu[3][2] = {{-20.0, 0.0}, {10.0, 0.0}, {10.0, 8.0}};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    gsl_matrix *x = gsl_matrix_alloc(n, 2);
    for (size_t i = 0; i < n; i++) {
        lab[i] = i % 3;
        for (size_t a = 0; a < 2; a++)
            gsl_matrix_set(x, i, a, mu[lab[i]][a] + gsl_ran_gaussian(r, 1.0));
    }
    gsl_rng_free(r);
    return x;
}

/* The stuck start: components 0 and 1 share A, component 2 covers B and
 * C, in m's layout. */
static void stuck_start(lse_gmm *m)
{
    const lse_cov_type t = lse_gmm_cov_type(m);
    gsl_vector *w = gsl_vector_alloc(3);
    gsl_matrix *mu = gsl_matrix_alloc(3, 2);
    const double means[3][2] = {{-20.5, 0.0}, {-19.5, 0.0}, {10.0, 4.0}};
    const double var[3][2] = {{1.0, 1.0}, {1.0, 1.0}, {1.0, 17.0}};
    for (size_t c = 0; c < 3; c++) {
        gsl_vector_set(w, c, c == 2 ? 2.0 / 3.0 : 1.0 / 6.0);
        for (size_t a = 0; a < 2; a++)
            gsl_matrix_set(mu, c, a, means[c][a]);
    }
    gsl_matrix *cov = gsl_matrix_calloc(
        t == LSE_COV_FULL ? 6 : t == LSE_COV_TIED ? 2 : 3,
        t == LSE_COV_SPHERICAL ? 1 : 2);
    for (size_t c = 0; c < 3; c++)
        for (size_t a = 0; a < 2; a++) {
            if (t == LSE_COV_FULL)
                gsl_matrix_set(cov, 2 * c + a, a, var[c][a]);
            else if (t == LSE_COV_DIAG)
                gsl_matrix_set(cov, c, a, var[c][a]);
            else if (t == LSE_COV_SPHERICAL)
                gsl_matrix_set(cov, c, 0, (var[c][0] + var[c][1]) / 2.0);
            else
                gsl_matrix_set(cov, a, a, 1.0);
        }
    lse_assert_ok(lse_gmm_set_weights(m, w, NULL));
    lse_assert_ok(lse_gmm_set_means(m, mu, NULL));
    lse_assert_ok(lse_gmm_set_covariances(m, cov, NULL));
    gsl_vector_free(w);
    gsl_matrix_free(mu);
    gsl_matrix_free(cov);
}

/* rows whose component is not their cluster's, the components matched to
 * the clusters by majority */
static size_t mislabelled(const lse_gmm *m, const gsl_matrix *x,
                          const size_t *lab)
{
    const size_t n = x->size1;
    size_t cnt[3][3] = {{0}};
    gsl_matrix *r = gsl_matrix_alloc(n, 3);
    /* the most responsible component (rows with NaN: of their observed
     * coordinates) */
    lse_assert_ok(lse_gmm_posterior(m, x, LSE_GMM_MISSING_MARGINALIZE, r,
                                    NULL, NULL));
    for (size_t i = 0; i < n; i++) {
        gsl_vector_view ri = gsl_matrix_row(r, i);
        cnt[lab[i]][gsl_vector_max_index(&ri.vector)]++;
    }
    gsl_matrix_free(r);
    size_t bad = 0;
    for (size_t c = 0; c < 3; c++) {
        size_t top = 0;
        for (size_t q = 0; q < 3; q++)
            top = cnt[c][q] > top ? cnt[c][q] : top;
        bad += n / 3 - top;
    }
    /* two clusters on one component count too */
    for (size_t q = 0; q < 3; q++) {
        size_t hold = 0;
        for (size_t c = 0; c < 3; c++)
            hold += cnt[c][q] > n / 6;
        if (hold > 1)
            bad += n / 3;
    }
    return bad;
}

/* Plain EM from the stuck start stays stuck (a cluster split in two, two
 * clusters on one component); lse_gmm_smem finds the three clusters: every
 * row in its cluster's component and the means within 0.05 of the
 * clusters' sample means; for the four types and all 14 mclust models. */
START_TEST(test_stuck)
{
    const size_t n = 300;
    size_t lab[300];
    gsl_matrix *x = three(n, lab);
    double truth[3][2] = {{0.0}}; /* the clusters' sample means */
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < 2; a++)
            truth[lab[i]][a] += gsl_matrix_get(x, i, a) / (double)(n / 3);
    for (int v = 0; v < 4 + 14; v++) {
        const lse_cov_type t = v < 4 ? (lse_cov_type)v : LSE_COV_FULL;
        const lse_cov_model cm =
            v < 4 ? LSE_COV_MODEL_NONE : (lse_cov_model)(LSE_COV_EII + v - 4);
        lse_gmm *m = new_of(3, 2, t, cm);
        stuck_start(m);
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        lse_error err;
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        const double l0 = lse_gmm_info(m)->loglik;
        ck_assert_msg(mislabelled(m, x, lab) >= n / 6,
                      "variant %d: plain EM was not stuck", v);
        lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
        /* both orders of the moves (K = 3 has three; all are tried) */
        s.rank = v % 2 ? LSE_GMM_SMEM_RANK_UEDA : LSE_GMM_SMEM_RANK_START;
        size_t moves = 0;
        lse_assert_ok(lse_gmm_smem(m, x, &o, &s, &moves, &err));
        ck_assert_msg(moves >= 1, "variant %d: no move", v);
        ck_assert(lse_gmm_info(m)->loglik > l0);
        ck_assert_msg(mislabelled(m, x, lab) == 0, "variant %d: %zu rows",
                      v, mislabelled(m, x, lab));
        for (size_t c = 0; c < 3; c++) {
            double dmin = INFINITY;
            for (size_t q = 0; q < 3; q++)
                dmin = fmin(dmin, hypot(gsl_matrix_get(lse_gmm_means(m), q,
                                                       0) - truth[c][0],
                                        gsl_matrix_get(lse_gmm_means(m), q,
                                                       1) - truth[c][1]));
            ck_assert_msg(dmin < 0.05, "variant %d cluster %zu: %g", v, c,
                          dmin);
        }
        lse_gmm_free(m);
    }
    gsl_matrix_free(x);
}
END_TEST

typedef struct smem_job {
    simcomm_rank me;
    gsl_matrix *x;
    lse_gmm_fit_opts o;
    lse_gmm *m;
    size_t moves;
    lse_status st;
} smem_job;

static void *smem_job_run(void *p)
{
    smem_job *j = p;
    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    j->st = lse_gmm_smem(j->m, j->x, &j->o, &s, &j->moves, NULL);
    return NULL;
}

/* Two processes (threads through the reduce hook, each with its half of
 * the rows) make the same moves as one process on all rows, to rounding. */
START_TEST(test_shares)
{
    const size_t n = 300, cut = 130;
    size_t lab[300];
    gsl_matrix *x = three(n, lab);
    lse_gmm *one = new_of(3, 2, LSE_COV_FULL, LSE_COV_MODEL_NONE);
    stuck_start(one);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.init = LSE_GMM_INIT_GIVEN;
    lse_assert_ok(lse_gmm_fit(one, x, &o, NULL));
    lse_gmm *start = new_of(3, 2, LSE_COV_FULL, LSE_COV_MODEL_NONE);
    lse_assert_ok(lse_gmm_copy(start, one, NULL));
    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    size_t moves = 0;
    lse_assert_ok(lse_gmm_smem(one, x, &o, &s, &moves, NULL));
    simcomm comm;
    simcomm_init(&comm, 2);
    smem_job j[2];
    pthread_t th[2];
    for (size_t r = 0; r < 2; r++) {
        const size_t lo = r == 0 ? 0 : cut, hi = r == 0 ? cut : n;
        memset(&j[r], 0, sizeof j[r]);
        j[r].me = (simcomm_rank){.comm = &comm, .rank = r};
        j[r].x = gsl_matrix_alloc(hi - lo, 2);
        gsl_matrix_const_view v = gsl_matrix_const_submatrix(x, lo, 0,
                                                             hi - lo, 2);
        gsl_matrix_memcpy(j[r].x, &v.matrix);
        j[r].o = o;
        j[r].o.reduce = simcomm_reduce;
        j[r].o.reduce_user = &j[r].me;
        j[r].o.rank = r;
        j[r].o.n_ranks = 2;
        j[r].m = new_of(3, 2, LSE_COV_FULL, LSE_COV_MODEL_NONE);
        lse_assert_ok(lse_gmm_copy(j[r].m, start, NULL));
        ck_assert_int_eq(pthread_create(&th[r], NULL, smem_job_run, &j[r]),
                         0);
    }
    for (size_t r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    ck_assert(!comm.mismatch);
    for (size_t r = 0; r < 2; r++) {
        lse_assert_ok(j[r].st);
        ck_assert_uint_eq(j[r].moves, moves);
        ck_assert_double_eq_tol(lse_gmm_info(j[r].m)->loglik,
                                lse_gmm_info(one)->loglik,
                                1e-8 * fabs(lse_gmm_info(one)->loglik));
        for (size_t c = 0; c < 3; c++)
            for (size_t a = 0; a < 2; a++)
                ck_assert_double_eq_tol(
                    gsl_matrix_get(lse_gmm_means(j[r].m), c, a),
                    gsl_matrix_get(lse_gmm_means(one), c, a), 1e-6);
        gsl_matrix_free(j[r].x);
        lse_gmm_free(j[r].m);
    }
    simcomm_destroy(&comm);
    lse_gmm_free(one);
    lse_gmm_free(start);
    gsl_matrix_free(x);
}
END_TEST

/* Sample weights 2 on every row: the same moves and means as without,
 * twice the log-likelihood. Missing values (marginalized): the stuck fit
 * with a NaN in every tenth row is repaired too, never falling. */
START_TEST(test_weights_missing)
{
    const size_t n = 300;
    size_t lab[300];
    gsl_matrix *x = three(n, lab);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.init = LSE_GMM_INIT_GIVEN;
    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    lse_gmm *a = new_of(3, 2, LSE_COV_DIAG, LSE_COV_MODEL_NONE);
    lse_gmm *b = new_of(3, 2, LSE_COV_DIAG, LSE_COV_MODEL_NONE);
    stuck_start(a);
    stuck_start(b);
    size_t ma = 0, mb = 0;
    lse_assert_ok(lse_gmm_fit(a, x, &o, NULL));
    lse_assert_ok(lse_gmm_smem(a, x, &o, &s, &ma, NULL));
    gsl_vector *w = gsl_vector_alloc(n);
    gsl_vector_set_all(w, 2.0);
    lse_gmm_fit_opts ow = o;
    ow.sample_weight = w;
    lse_assert_ok(lse_gmm_fit(b, x, &ow, NULL));
    lse_assert_ok(lse_gmm_smem(b, x, &ow, &s, &mb, NULL));
    ck_assert_uint_ge(ma, 1);
    ck_assert_uint_eq(ma, mb);
    ck_assert_double_eq_tol(lse_gmm_info(b)->loglik,
                            2.0 * lse_gmm_info(a)->loglik,
                            1e-7 * fabs(lse_gmm_info(b)->loglik));
    for (size_t c = 0; c < 3; c++)
        for (size_t d = 0; d < 2; d++)
            ck_assert_double_eq_tol(gsl_matrix_get(lse_gmm_means(a), c, d),
                                    gsl_matrix_get(lse_gmm_means(b), c, d),
                                    1e-5);
    /* missing values */
    for (size_t i = 0; i < n; i += 10)
        gsl_matrix_set(x, i, i % 20 == 0 ? 0 : 1, NAN);
    lse_gmm_fit_opts om = o;
    om.missing = LSE_GMM_MISSING_MARGINALIZE;
    stuck_start(a);
    lse_assert_ok(lse_gmm_fit(a, x, &om, NULL));
    const double l0 = lse_gmm_info(a)->loglik;
    lse_assert_ok(lse_gmm_smem(a, x, &om, &s, &ma, NULL));
    ck_assert_uint_ge(ma, 1);
    ck_assert(lse_gmm_info(a)->loglik > l0);
    /* all but (some of) the 15 rows that miss the coordinate telling B
     * from C (plain EM: at least 50) */
    ck_assert_uint_le(mislabelled(a, x, lab), 15);
    /* without marginalizing, NaN is lse_gmm_posterior's error */
    lse_error err;
    lse_assert_status(lse_gmm_smem(a, x, &o, &s, &ma, &err), LSE_ENONFINITE);
    gsl_vector_free(w);
    lse_gmm_free(a);
    lse_gmm_free(b);
    gsl_matrix_free(x);
}
END_TEST

/* emEM's call: the default (smem on) never ends below the same emEM with
 * smem 0, on Faithful and Iris K = 5..7, full and diag */
START_TEST(test_emem_smem)
{
    const char *names[2] = {"faithful.csv", "iris.csv"};
    const size_t dims[2] = {2, 4};
    ck_assert_uint_eq(lse_gmm_emem_opts_default(3).smem, LSE_GMM_SMEM_TRIES);
    for (int ds = 0; ds < 2; ds++) {
        gsl_matrix *x = lse_check_load(LSE_DATA_DIR, names[ds], dims[ds]);
        for (int ti = 0; ti < 2; ti++)
            for (size_t k = 5; k <= 7; k++) {
                lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
                lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k);
                lse_gmm *a = new_of(k, dims[ds], (lse_cov_type)ti,
                                    LSE_COV_MODEL_NONE);
                lse_gmm *b = new_of(k, dims[ds], (lse_cov_type)ti,
                                    LSE_COV_MODEL_NONE);
                lse_assert_ok(lse_gmm_fit_emem(a, x, &o, &e, NULL, 0, NULL));
                e.smem = 0;
                lse_assert_ok(lse_gmm_fit_emem(b, x, &o, &e, NULL, 0, NULL));
                ck_assert_msg(lse_gmm_info(a)->loglik >=
                                  lse_gmm_info(b)->loglik,
                              "%s K = %zu: %.10g < %.10g", names[ds], k,
                              lse_gmm_info(a)->loglik,
                              lse_gmm_info(b)->loglik);
                lse_gmm_free(a);
                lse_gmm_free(b);
            }
        gsl_matrix_free(x);
    }
}
END_TEST

/* bad arguments: clear errors naming the function; K < 3: no move */
/* The moves' fits run side by side (lse_gmm_par_run): from the same plain
 * EM fits of Faithful and Iris, K = 4 and 6, the four covariance types,
 * lse_gmm_smem on 1, 2 and 3 threads accepts the same moves and ends at
 * the same parameters and log-likelihood, bit for bit. Some move must be
 * accepted (else the comparison would not reach the moves' fits). */
START_TEST(test_threads_identical)
{
    static const char *const sets[2] = {"faithful.csv", "iris.csv"};
    static const size_t dims[2] = {2, 4};
    size_t accepted = 0;
    for (int ds = 0; ds < 2; ds++) {
        gsl_matrix *x = lse_check_load(LSE_DATA_DIR, sets[ds], dims[ds]);
        for (int t = 0; t < 4; t++)
            for (size_t k = 4; k <= 6; k += 2) {
                lse_gmm *ref = NULL;
                size_t ref_moves = 0;
                for (int nt = 1; nt <= 3; nt++) {
                    lse_set_thread_min_work(0.0); /* the count on small data too */
                    lse_set_num_threads(nt);
                    lse_gmm *m = new_of(k, dims[ds], (lse_cov_type)t,
                                        LSE_COV_MODEL_NONE);
                    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
                    o.init = LSE_GMM_INIT_KMEANSPP;
                    o.seed = 7;
                    lse_error err;
                    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
                    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
                    s.n_tries = 8;
                    size_t moves = 0;
                    lse_assert_ok(lse_gmm_smem(m, x, &o, &s, &moves, &err));
                    if (ref == NULL) {
                        ref = m;
                        ref_moves = moves;
                        accepted += moves;
                        continue;
                    }
                    ck_assert_uint_eq(moves, ref_moves);
                    ck_assert(lse_gmm_info(m)->loglik ==
                              lse_gmm_info(ref)->loglik);
                    ck_assert(gsl_matrix_equal(lse_gmm_means(m),
                                               lse_gmm_means(ref)));
                    ck_assert(gsl_matrix_equal(lse_gmm_covariances(m),
                                               lse_gmm_covariances(ref)));
                    ck_assert(gsl_vector_equal(lse_gmm_weights(m),
                                               lse_gmm_weights(ref)));
                    lse_gmm_free(m);
                }
                lse_gmm_free(ref);
            }
        gsl_matrix_free(x);
    }
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
    ck_assert_msg(accepted > 0, "no move accepted anywhere");
}
END_TEST

/* lse_gmm_smem of m (a plain EM fit of x, k-means++ seed 7) on nt threads
 * with o's weights and missing values; its accepted moves into *moves */
static lse_gmm *smem_on(int nt, const gsl_matrix *x, size_t k, lse_cov_type t,
                        const lse_gmm_fit_opts *o, size_t *moves)
{
    lse_set_thread_min_work(0.0); /* the count on small data too */
    lse_set_num_threads(nt);
    lse_gmm *m = new_of(k, x->size2, t, LSE_COV_MODEL_NONE);
    lse_gmm_fit_opts fo = *o;
    fo.init = LSE_GMM_INIT_KMEANSPP;
    fo.seed = 7;
    lse_error err;
    lse_assert_ok(lse_gmm_fit(m, x, &fo, &err));
    const lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    lse_assert_ok(lse_gmm_smem(m, x, &fo, &s, moves, &err));
    return m;
}

/* The starts' scores (168 moves at K = 8: lse_gmm_par_run's tasks on the
 * threads' own work spaces) and the moves' starts are built side by side
 * too (session 14): with the defaults (40 tries, every move scored) at
 * K = 8, on Faithful and Iris, the four covariance types, and with sample
 * weights and with missing values (marginalized), 2 and 3 threads accept
 * the same moves as 1 and end at the same bits. Some move must be
 * accepted. */
START_TEST(test_threads_k8)
{
    static const char *const sets[2] = {"faithful.csv", "iris.csv"};
    static const size_t dims[2] = {2, 4};
    size_t accepted = 0;
    for (int ds = 0; ds < 2; ds++) {
        gsl_matrix *x = lse_check_load(LSE_DATA_DIR, sets[ds], dims[ds]);
        gsl_vector *w = gsl_vector_alloc(x->size1);
        for (size_t i = 0; i < x->size1; i++)
            gsl_vector_set(w, i, 0.5 + (double)(i % 7) / 4.0);
        for (int v = 0; v < 6; v++) {
            /* v 0..3: the covariance types; 4: weights; 5: missing */
            const lse_cov_type t = v < 4 ? (lse_cov_type)v : LSE_COV_FULL;
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            gsl_matrix *xv = gsl_matrix_alloc(x->size1, x->size2);
            gsl_matrix_memcpy(xv, x);
            if (v == 4)
                o.sample_weight = w;
            if (v == 5) {
                o.missing = LSE_GMM_MISSING_MARGINALIZE;
                for (size_t i = 3; i < x->size1; i += 13)
                    gsl_matrix_set(xv, i, i % x->size2, NAN);
            }
            size_t ref_moves = 0;
            lse_gmm *ref = smem_on(1, xv, 8, t, &o, &ref_moves);
            accepted += ref_moves;
            for (int nt = 2; nt <= 3; nt++) {
                size_t moves = 0;
                lse_gmm *m = smem_on(nt, xv, 8, t, &o, &moves);
                ck_assert_msg(moves == ref_moves, "%s v %d, %d threads",
                              sets[ds], v, nt);
                ck_assert(lse_gmm_info(m)->loglik ==
                          lse_gmm_info(ref)->loglik);
                ck_assert(gsl_matrix_equal(lse_gmm_means(m),
                                           lse_gmm_means(ref)));
                ck_assert(gsl_matrix_equal(lse_gmm_covariances(m),
                                           lse_gmm_covariances(ref)));
                ck_assert(gsl_vector_equal(lse_gmm_weights(m),
                                           lse_gmm_weights(ref)));
                lse_gmm_free(m);
            }
            lse_gmm_free(ref);
            gsl_matrix_free(xv);
        }
        gsl_vector_free(w);
        gsl_matrix_free(x);
    }
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
    ck_assert_msg(accepted > 0, "no move accepted anywhere");
}
END_TEST

/* a reduce hook of one process (the sums left as they are) that counts
 * its calls and fails at call fail_at (0: never) */
typedef struct count_hook {
    size_t calls, fail_at;
} count_hook;

static lse_status count_reduce(double *buf, size_t n, void *user)
{
    count_hook *h = user;
    (void)buf;
    (void)n;
    return ++h->calls == h->fail_at ? LSE_EIO : LSE_OK;
}

/* A failing score among the starts' (the reduce hook of the third move's
 * log-likelihood; under a hook the scores run on one thread, in order):
 * lse_gmm_smem returns the hook's error, the hook is not called after it
 * (the scoring stops there, as before), m is untouched. The calls before
 * it: the threshold's fit, the criteria (1), the K split axes. */
START_TEST(test_score_fails)
{
    lse_set_num_threads(2);
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    const size_t k = 5;
    lse_gmm *m = new_of(k, 2, LSE_COV_FULL, LSE_COV_MODEL_NONE);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_error err;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    gsl_matrix *mu0 = gsl_matrix_alloc(k, 2);
    gsl_matrix_memcpy(mu0, lse_gmm_means(m));
    count_hook h = {0, 0};
    o.reduce = count_reduce;
    o.reduce_user = &h;
    double thr;
    lse_assert_ok(lse_gmm_emem_threshold(m, x, &o, LSE_GMM_EMEM_DEGENERATE,
                                         &thr, &err));
    const size_t n_thr = h.calls;
    ck_assert_uint_gt(n_thr, 0);
    h = (count_hook){0, n_thr + 1 + k + 3};
    const lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    size_t moves = 9;
    lse_assert_status(lse_gmm_smem(m, x, &o, &s, &moves, &err), LSE_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "reduce hook"));
    ck_assert_uint_eq(h.calls, h.fail_at);
    ck_assert_uint_eq(moves, 0);
    ck_assert(gsl_matrix_equal(lse_gmm_means(m), mu0));
    /* without the failure the same calls go on (the hook counted) */
    h = (count_hook){0, 0};
    lse_assert_ok(lse_gmm_smem(m, x, &o, &s, &moves, &err));
    ck_assert_uint_gt(h.calls, n_thr + 1 + k + 3);
    lse_set_num_threads(0);
    gsl_matrix_free(mu0);
    lse_gmm_free(m);
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_errors)
{
    size_t lab[300];
    gsl_matrix *x = three(300, lab);
    gsl_matrix *x3 = gsl_matrix_calloc(10, 3);
    lse_gmm *m = new_of(3, 2, LSE_COV_FULL, LSE_COV_MODEL_NONE);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    lse_error err;
    lse_assert_status(lse_gmm_smem(NULL, x, &o, &s, NULL, &err), LSE_EFAULT);
    ck_assert_ptr_nonnull(strstr(err.message, "lse_gmm_smem"));
    lse_assert_status(lse_gmm_smem(m, NULL, &o, &s, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_gmm_smem(m, x, NULL, &s, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_gmm_smem(m, x, &o, NULL, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_gmm_smem(m, x3, &o, &s, NULL, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "d = 2"));
    lse_gmm_smem_opts b = s;
    b.n_tries = 0;
    lse_assert_status(lse_gmm_smem(m, x, &o, &b, NULL, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "n_tries"));
    b = s;
    b.partial_iter = 0;
    lse_assert_status(lse_gmm_smem(m, x, &o, &b, NULL, &err), LSE_EINVAL);
    b = s;
    b.n_keep = 0;
    lse_assert_status(lse_gmm_smem(m, x, &o, &b, NULL, &err), LSE_EINVAL);
    b = s;
    b.min_gain = -1.0;
    lse_assert_status(lse_gmm_smem(m, x, &o, &b, NULL, &err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "min_gain"));
    b = s;
    b.degenerate = NAN;
    lse_assert_status(lse_gmm_smem(m, x, &o, &b, NULL, &err), LSE_EDOM);
    /* K = 2: no move exists; m untouched */
    lse_gmm *two = new_of(2, 2, LSE_COV_DIAG, LSE_COV_MODEL_NONE);
    lse_assert_ok(lse_gmm_fit(two, x, &o, &err));
    const double l0 = lse_gmm_info(two)->loglik;
    size_t moves = 7;
    lse_assert_ok(lse_gmm_smem(two, x, &o, &s, &moves, &err));
    ck_assert_uint_eq(moves, 0);
    ck_assert_double_eq(lse_gmm_info(two)->loglik, l0);
    /* max_moves 0: no move either */
    stuck_start(m);
    o.init = LSE_GMM_INIT_GIVEN;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    b = s;
    b.max_moves = 0;
    lse_assert_ok(lse_gmm_smem(m, x, &o, &b, &moves, &err));
    ck_assert_uint_eq(moves, 0);
    lse_gmm_free(two);
    lse_gmm_free(m);
    gsl_matrix_free(x);
    gsl_matrix_free(x3);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_smem");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_never_falls);
    tcase_add_test(tc, test_threads_identical);
    tcase_add_test(tc, test_threads_k8);
    tcase_add_test(tc, test_score_fails);
    tcase_add_test(tc, test_stuck);
    tcase_add_test(tc, test_shares);
    tcase_add_test(tc, test_weights_missing);
    tcase_add_test(tc, test_emem_smem);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
