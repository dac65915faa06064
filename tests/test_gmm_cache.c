#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#include "gmm-private.h"
#include "lse_check.h"
#include "mixfit-private.h"

/* A thread's kept fit scratch (models/gmm_cache.c, compiled in with the
 * fit and query code): fits and queries through a scope give the same
 * bits as fresh ones; an entry is taken only on the same data (bits, not
 * address), K, d and covariance; fits with weights are not kept; the
 * outermost end frees everything (the sanitize/valgrind setups check the
 * leaks); LSE_GMM_NO_REUSE keeps nothing. */

static gsl_matrix *faithful(void)
{
    return lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
}

/* a fitted mixture: K components of cov on x, seed, init */
static lse_gmm *fit(const gsl_matrix *x, size_t k, lse_cov_type cov,
                    unsigned long seed, lse_gmm_init init,
                    const gsl_vector *w)
{
    lse_gmm *m = NULL;
    lse_error err;
    lse_assert_ok(lse_gmm_new(k, x->size2, cov, &m, &err));
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.seed = seed;
    o.init = init;
    o.max_iter = 60;
    o.sample_weight = w;
    lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
    return m;
}

/* every fitted value and the fit's report bit for bit */
static void assert_same_fit(const lse_gmm *a, const lse_gmm *b)
{
    const lse_gmm_fit_info *ia = lse_gmm_info(a), *ib = lse_gmm_info(b);
    ck_assert(lse_same_matrix(lse_gmm_means(a), lse_gmm_means(b)));
    ck_assert(lse_same_matrix(lse_gmm_chol(a), lse_gmm_chol(b)));
    ck_assert(lse_same_matrix(lse_gmm_covariances(a), lse_gmm_covariances(b)));
    ck_assert(memcmp(lse_gmm_weights(a)->data, lse_gmm_weights(b)->data,
                     lse_gmm_k(a) * sizeof(double)) == 0);
    ck_assert(memcmp(&ia->loglik, &ib->loglik, sizeof ia->loglik) == 0);
    ck_assert(memcmp(&ia->bic, &ib->bic, sizeof ia->bic) == 0);
    ck_assert_uint_eq(ia->n_iter, ib->n_iter);
    ck_assert_int_eq(ia->converged, ib->converged);
    ck_assert_uint_eq(lse_gmm_n_events(a), lse_gmm_n_events(b));
}

/* Fits through one scope against the same fits fresh: k-means++ with
 * several seeds, random and given starts, a second covariance type. */
START_TEST(test_fits_same_bits)
{
    gsl_matrix *x = faithful();
    const lse_cov_type covs[2] = {LSE_COV_FULL, LSE_COV_DIAG};
    for (int c = 0; c < 2; c++) {
        lse_gmm *fresh[4];
        for (unsigned long s = 0; s < 3; s++)
            fresh[s] = fit(x, 3, covs[c], s, LSE_GMM_INIT_KMEANSPP, NULL);
        fresh[3] = fit(x, 3, covs[c], 7, LSE_GMM_INIT_RANDOM, NULL);
        lse_gmm_cache_begin();
        const size_t h0 = gmm_cache_hits();
        for (unsigned long s = 0; s < 3; s++) {
            lse_gmm *m = fit(x, 3, covs[c], s, LSE_GMM_INIT_KMEANSPP, NULL);
            assert_same_fit(m, fresh[s]);
            lse_gmm_free(m);
        }
        lse_gmm *m = fit(x, 3, covs[c], 7, LSE_GMM_INIT_RANDOM, NULL);
        assert_same_fit(m, fresh[3]);
        /* a given start (m's own fit, continued) as a fresh one */
        lse_gmm *g1 = NULL, *g2 = NULL;
        lse_error err;
        lse_assert_ok(lse_gmm_new(3, 2, covs[c], &g1, &err));
        lse_assert_ok(lse_gmm_new(3, 2, covs[c], &g2, &err));
        lse_assert_ok(lse_gmm_copy(g1, fresh[0], &err));
        lse_assert_ok(lse_gmm_copy(g2, fresh[0], &err));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.init = LSE_GMM_INIT_GIVEN;
        lse_assert_ok(lse_gmm_fit(g1, x, &o, &err));
        lse_gmm_cache_end();
        lse_assert_ok(lse_gmm_fit(g2, x, &o, &err)); /* fresh */
        assert_same_fit(g1, g2);
        /* all but the first fit took the kept scratch */
        ck_assert_uint_eq(gmm_cache_hits() - h0, 4);
        lse_gmm_free(g1);
        lse_gmm_free(g2);
        lse_gmm_free(m);
        for (int s = 0; s < 4; s++)
            lse_gmm_free(fresh[s]);
    }
    gsl_matrix_free(x);
}
END_TEST

/* New values in the same matrix, another K, another covariance: the kept
 * scratch is not taken, and the fits are those of fresh scratch. */
START_TEST(test_invalidated)
{
    gsl_matrix *x = faithful();
    gsl_matrix *x2 = gsl_matrix_alloc(x->size1, x->size2);
    gsl_matrix_memcpy(x2, x);
    gsl_matrix_set(x2, 100, 1, gsl_matrix_get(x2, 100, 1) + 0.5);
    lse_gmm *f_x2 = fit(x2, 3, LSE_COV_FULL, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    lse_gmm *f_k4 = fit(x, 4, LSE_COV_FULL, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    lse_gmm *f_tied = fit(x, 4, LSE_COV_TIED, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    lse_gmm *f_x = fit(x, 4, LSE_COV_TIED, 2, LSE_GMM_INIT_KMEANSPP, NULL);

    lse_gmm_cache_begin();
    lse_gmm *m = fit(x, 3, LSE_COV_FULL, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    lse_gmm_free(m);
    size_t h = gmm_cache_hits();
    /* x's values changed in place: the address is the same */
    gsl_matrix *keep = gsl_matrix_alloc(x->size1, x->size2);
    gsl_matrix_memcpy(keep, x);
    gsl_matrix_memcpy(x, x2);
    m = fit(x, 3, LSE_COV_FULL, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h);
    assert_same_fit(m, f_x2);
    lse_gmm_free(m);
    gsl_matrix_memcpy(x, keep);
    /* K */
    m = fit(x, 4, LSE_COV_FULL, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h);
    assert_same_fit(m, f_k4);
    lse_gmm_free(m);
    /* the covariance type */
    m = fit(x, 4, LSE_COV_TIED, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h);
    assert_same_fit(m, f_tied);
    lse_gmm_free(m);
    /* the same again: taken */
    m = fit(x, 4, LSE_COV_TIED, 2, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h + 1);
    assert_same_fit(m, f_x);
    lse_gmm_free(m);
    lse_gmm_cache_end();

    /* a new scope starts empty */
    lse_gmm_cache_begin();
    m = fit(x, 4, LSE_COV_TIED, 2, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h + 1);
    lse_gmm_free(m);
    lse_gmm_cache_end();
    lse_gmm_free(f_x2);
    lse_gmm_free(f_k4);
    lse_gmm_free(f_tied);
    lse_gmm_free(f_x);
    gsl_matrix_free(keep);
    gsl_matrix_free(x2);
    gsl_matrix_free(x);
}
END_TEST

/* Weighted fits are not kept (the term would borrow the weights) and give
 * the bits of fresh ones; nested scopes share one cache, freed by the
 * outermost end; out of a scope nothing is taken. */
START_TEST(test_weights_and_nesting)
{
    gsl_matrix *x = faithful();
    gsl_vector *w = gsl_vector_alloc(x->size1);
    for (size_t i = 0; i < x->size1; i++)
        gsl_vector_set(w, i, 0.5 + (double)(i % 3));
    lse_gmm *fw = fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP, w);
    const size_t h = gmm_cache_hits();
    lse_gmm_cache_begin();
    for (int r = 0; r < 2; r++) {
        lse_gmm *m = fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP, w);
        assert_same_fit(m, fw);
        lse_gmm_free(m);
    }
    ck_assert_uint_eq(gmm_cache_hits(), h);
    lse_gmm *m = fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP, NULL);
    lse_gmm_free(m);
    lse_gmm_cache_begin(); /* nested: the same cache */
    m = fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h + 1);
    lse_gmm_free(m);
    lse_gmm_cache_end();
    m = fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP, NULL);
    ck_assert_uint_eq(gmm_cache_hits(), h + 2);
    lse_gmm_free(m);
    lse_gmm_cache_end();
    m = fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP, NULL);
    m = (lse_gmm_free(m), fit(x, 3, LSE_COV_FULL, 4, LSE_GMM_INIT_KMEANSPP,
                              NULL));
    ck_assert_uint_eq(gmm_cache_hits(), h + 2); /* no scope: none kept */
    lse_gmm_free(m);
    lse_gmm_free(fw);
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

/* The queries through a kept graph: the same responsibilities and
 * log-likelihoods as fresh ones, for two mixtures in turn (each query
 * writes its own parameters), and on changed data. */
START_TEST(test_queries)
{
    gsl_matrix *x = faithful();
    const size_t n = x->size1;
    lse_gmm *a = fit(x, 3, LSE_COV_FULL, 1, LSE_GMM_INIT_KMEANSPP, NULL);
    lse_gmm *b = fit(x, 3, LSE_COV_FULL, 2, LSE_GMM_INIT_RANDOM, NULL);
    gsl_matrix *ra = gsl_matrix_alloc(n, 3), *rb = gsl_matrix_alloc(n, 3);
    gsl_matrix *r = gsl_matrix_alloc(n, 3);
    gsl_vector *la = gsl_vector_alloc(n), *lb = gsl_vector_alloc(n);
    gsl_vector *l = gsl_vector_alloc(n);
    lse_error err;
    lse_assert_ok(lse_gmm_posterior(a, x, LSE_GMM_MISSING_ERROR, ra, la, &err));
    lse_assert_ok(lse_gmm_posterior(b, x, LSE_GMM_MISSING_ERROR, rb, lb, &err));
    double bic_a, bic;
    lse_assert_ok(lse_gmm_bic(a, x, &bic_a, &err));
    const size_t h = gmm_cache_hits();
    lse_gmm_cache_begin();
    for (int rep = 0; rep < 2; rep++) {
        lse_assert_ok(lse_gmm_posterior(a, x, LSE_GMM_MISSING_ERROR, r, l,
                                        &err));
        ck_assert(lse_same_matrix(r, ra));
        ck_assert(memcmp(l->data, la->data, n * sizeof(double)) == 0);
        lse_assert_ok(lse_gmm_predict_proba(b, x, r, &err));
        ck_assert(lse_same_matrix(r, rb));
        lse_assert_ok(lse_gmm_score_samples(b, x, l, &err));
        ck_assert(memcmp(l->data, lb->data, n * sizeof(double)) == 0);
        lse_assert_ok(lse_gmm_bic(a, x, &bic, &err));
        ck_assert(memcmp(&bic, &bic_a, sizeof bic) == 0);
    }
    ck_assert_uint_eq(gmm_cache_hits() - h, 7);
    /* changed data: a fresh graph, the fresh answer */
    gsl_matrix *x2 = gsl_matrix_alloc(n, 2);
    gsl_matrix_memcpy(x2, x);
    gsl_matrix_set(x, 5, 0, gsl_matrix_get(x, 5, 0) + 1.0);
    lse_assert_ok(lse_gmm_posterior(a, x, LSE_GMM_MISSING_ERROR, r, l, &err));
    ck_assert_uint_eq(gmm_cache_hits() - h, 7);
    lse_gmm_cache_end();
    gsl_matrix *r2 = gsl_matrix_alloc(n, 3);
    lse_assert_ok(lse_gmm_posterior(a, x, LSE_GMM_MISSING_ERROR, r2, NULL,
                                    &err));
    ck_assert(lse_same_matrix(r, r2));
    ck_assert(!lse_same_matrix(r, ra)); /* the change did change row 5 */
    gsl_matrix_free(r2);
    gsl_matrix_free(x2);
    gsl_matrix_free(ra);
    gsl_matrix_free(rb);
    gsl_matrix_free(r);
    gsl_vector_free(la);
    gsl_vector_free(lb);
    gsl_vector_free(l);
    lse_gmm_free(a);
    lse_gmm_free(b);
    gsl_matrix_free(x);
}
END_TEST

/* emEM with split-and-merge moves (every fit and query of a K through
 * the scopes) against the same with LSE_GMM_NO_REUSE set. */
START_TEST(test_emem_no_reuse)
{
    gsl_matrix *x = faithful();
    lse_gmm *m[2];
    for (int r = 0; r < 2; r++) {
        if (r == 1)
            setenv("LSE_GMM_NO_REUSE", "1", 1);
        lse_error err;
        lse_assert_ok(lse_gmm_new(4, 2, LSE_COV_FULL, &m[r], &err));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.seed = 3;
        lse_gmm_emem_opts e = lse_gmm_emem_opts_default(4);
        e.smem = 3;
        const size_t h = gmm_cache_hits();
        lse_assert_ok(lse_gmm_fit_emem(m[r], x, &o, &e, NULL, 0, &err));
        if (r == 0)
            ck_assert_uint_gt(gmm_cache_hits(), h);
        else
            ck_assert_uint_eq(gmm_cache_hits(), h);
    }
    unsetenv("LSE_GMM_NO_REUSE");
    assert_same_fit(m[0], m[1]);
    lse_gmm_free(m[0]);
    lse_gmm_free(m[1]);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_cache");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fits_same_bits);
    tcase_add_test(tc, test_invalidated);
    tcase_add_test(tc, test_weights_and_nesting);
    tcase_add_test(tc, test_queries);
    tcase_add_test(tc, test_emem_no_reuse);
    suite_add_tcase(s, tc);
    return s;
}
