/* lse_gmm_fit_batch (models/gmm_par.c): the fits side by side leave every
 * mixture with the bits of lse_gmm_fit one after another, for 1, 2 and 3
 * threads and every covariance type; the progress calls come in fit order;
 * a failing fit is reported in its status and leaves the others alone;
 * lse_gmm_loglik_batch equals the weighted sums of lse_gmm_score_samples
 * bit for bit; the argument errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

#define NB 5 /* mixtures in a batch */
#define KB 4 /* their components */

/* a progress call, recorded */
typedef struct prog_log {
    size_t n;
    size_t iter[4096];
    double energy[4096];
} prog_log;

static void on_progress(size_t run, size_t iter, double energy, double change,
                        void *user)
{
    prog_log *p = user;
    (void)run;
    (void)change;
    if (p->n < 4096) {
        p->iter[p->n] = iter;
        p->energy[p->n] = energy;
    }
    p->n++;
}

/* NB starts of type t on x from random labels (seeded: the same each call) */
static void starts(const gsl_matrix *x, lse_cov_type t, lse_gmm **m)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    size_t *lab = malloc(x->size1 * sizeof *lab);
    ck_assert(r != NULL && lab != NULL);
    for (size_t b = 0; b < NB; b++) {
        for (size_t i = 0; i < x->size1; i++)
            lab[i] = i < KB ? i : gsl_rng_uniform_int(r, KB);
        lse_assert_ok(lse_gmm_new(KB, x->size2, t, &m[b], NULL));
        lse_assert_ok(lse_gmm_init_labels(m[b], x, lab, 1e-6, NULL));
    }
    free(lab);
    gsl_rng_free(r);
}

static int same(const lse_gmm *a, const lse_gmm *b)
{
    return gsl_vector_equal(lse_gmm_weights(a), lse_gmm_weights(b)) &&
           gsl_matrix_equal(lse_gmm_means(a), lse_gmm_means(b)) &&
           gsl_matrix_equal(lse_gmm_covariances(a), lse_gmm_covariances(b)) &&
           memcmp(&lse_gmm_info(a)->loglik, &lse_gmm_info(b)->loglik,
                  sizeof(double)) == 0 &&
           lse_gmm_info(a)->n_iter == lse_gmm_info(b)->n_iter;
}

START_TEST(test_same_bits)
{
    const char *names[2] = {"faithful.csv", "iris.csv"};
    const size_t dims[2] = {2, 4};
    const lse_cov_type types[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                   LSE_COV_SPHERICAL, LSE_COV_TIED};
    static prog_log p0, p1;
    for (int ds = 0; ds < 2; ds++) {
        gsl_matrix *x = lse_check_load(LSE_DATA_DIR, names[ds], dims[ds]);
        for (int ti = 0; ti < 4; ti++) {
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.init = LSE_GMM_INIT_GIVEN;
            o.n_init = 1;
            o.progress = on_progress;
            lse_gmm *ref[NB], *m[NB];
            starts(x, types[ti], ref);
            lse_set_num_threads(1);
            p0.n = 0;
            o.progress_user = &p0;
            for (size_t b = 0; b < NB; b++)
                lse_assert_ok(lse_gmm_fit(ref[b], x, &o, NULL));
            /* the fits differ (else the test could not fail) */
            ck_assert(!same(ref[0], ref[1]));
            ck_assert(p0.n > NB && p0.n <= 4096);
            for (int nt = 1; nt <= 3; nt++) {
                lse_set_num_threads(nt);
                starts(x, types[ti], m);
                lse_status fs[NB];
                lse_error errs[NB];
                p1.n = 0;
                o.progress_user = &p1;
                lse_assert_ok(lse_gmm_fit_batch(m, NB, x, &o, fs, errs, NULL));
                for (size_t b = 0; b < NB; b++) {
                    ck_assert_int_eq(fs[b], LSE_OK);
                    ck_assert_msg(same(m[b], ref[b]),
                                  "%s type %d, %d threads: fit %zu differs",
                                  names[ds], ti, nt, b);
                    lse_gmm_free(m[b]);
                }
                ck_assert_uint_eq(p1.n, p0.n);
                ck_assert(memcmp(p1.iter, p0.iter, p0.n * sizeof *p0.iter) ==
                          0);
                ck_assert(memcmp(p1.energy, p0.energy,
                                 p0.n * sizeof *p0.energy) == 0);
            }
            for (size_t b = 0; b < NB; b++)
                lse_gmm_free(ref[b]);
        }
        gsl_matrix_free(x);
    }
    lse_set_num_threads(0);
}
END_TEST

/* a fit that fails (a mixture of the wrong dimension) is reported in its
 * status and error; the others are fitted as alone */
START_TEST(test_failing_fit)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.init = LSE_GMM_INIT_GIVEN;
    lse_gmm *ref[NB], *m[NB];
    starts(x, LSE_COV_FULL, ref);
    starts(x, LSE_COV_FULL, m);
    lse_gmm_free(m[2]);
    lse_assert_ok(lse_gmm_new(KB, 3, LSE_COV_FULL, &m[2], NULL));
    lse_set_num_threads(2);
    lse_status fs[NB];
    lse_error errs[NB];
    lse_assert_ok(lse_gmm_fit_batch(m, NB, x, &o, fs, errs, NULL));
    lse_set_num_threads(1);
    for (size_t b = 0; b < NB; b++) {
        if (b == 2) {
            ck_assert_int_ne(fs[b], LSE_OK);
            ck_assert_int_eq(errs[b].status, fs[b]);
        } else {
            ck_assert_int_eq(fs[b], LSE_OK);
            lse_assert_ok(lse_gmm_fit(ref[b], x, &o, NULL));
            ck_assert(same(m[b], ref[b]));
        }
        lse_gmm_free(m[b]);
        lse_gmm_free(ref[b]);
    }
    lse_set_num_threads(0);
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "faithful.csv", 2);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm *m[NB];
    starts(x, LSE_COV_DIAG, m); /* two used */
    lse_status fs[2];
    lse_error e;
    ck_assert_int_eq(lse_gmm_fit_batch(NULL, 2, x, &o, fs, NULL, &e),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_gmm_fit_batch(m, 2, NULL, &o, fs, NULL, &e),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_gmm_fit_batch(m, 2, x, NULL, fs, NULL, &e),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_gmm_fit_batch(m, 2, x, &o, NULL, NULL, &e),
                     LSE_EFAULT);
    lse_gmm *twice[2] = {m[0], m[0]};
    ck_assert_int_eq(lse_gmm_fit_batch(twice, 2, x, &o, fs, NULL, &e),
                     LSE_EINVAL);
    lse_gmm *hole[2] = {m[0], NULL};
    ck_assert_int_eq(lse_gmm_fit_batch(hole, 2, x, &o, fs, NULL, &e),
                     LSE_EFAULT);
    /* no fits: nothing to do */
    lse_assert_ok(lse_gmm_fit_batch(NULL, 0, x, &o, NULL, NULL, &e));
    for (size_t b = 0; b < NB; b++)
        lse_gmm_free(m[b]);
    gsl_matrix_free(x);
}
END_TEST

/* lse_gmm_loglik_batch: the weighted row sums of lse_gmm_score_samples,
 * the same bits for 1, 2 and 3 threads; -inf for a mixture that cannot be
 * scored (the wrong dimension); the argument errors */
START_TEST(test_loglik_batch)
{
    gsl_matrix *x = lse_check_load(LSE_DATA_DIR, "iris.csv", 4);
    const size_t n = x->size1;
    lse_gmm *m[NB];
    starts(x, LSE_COV_FULL, m);
    lse_gmm_free(m[3]);
    lse_assert_ok(lse_gmm_new(KB, 2, LSE_COV_FULL, &m[3], NULL));
    gsl_vector *w = gsl_vector_alloc(n), *ls = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(w, i, 0.5 + (double)(i % 7) / 3.0);
    for (int weighted = 0; weighted < 2; weighted++) {
        const gsl_vector *wt = weighted ? w : NULL;
        double ref[NB];
        for (size_t b = 0; b < NB; b++) {
            if (b == 3) {
                ref[b] = -INFINITY;
                continue;
            }
            lse_assert_ok(lse_gmm_score_samples(m[b], x, ls, NULL));
            double t = 0.0;
            for (size_t i = 0; i < n; i++)
                t += (wt != NULL ? gsl_vector_get(wt, i) : 1.0) *
                     gsl_vector_get(ls, i);
            ref[b] = t;
        }
        ck_assert(ref[0] != ref[1] && isfinite(ref[0]));
        for (int nt = 1; nt <= 3; nt++) {
            lse_set_num_threads(nt);
            double ll[NB];
            lse_assert_ok(lse_gmm_loglik_batch((const lse_gmm *const *)m, NB,
                                               x, wt, ll, NULL));
            ck_assert_msg(memcmp(ll, ref, sizeof ref) == 0,
                          "%d threads, weighted %d: differs", nt, weighted);
        }
    }
    lse_set_num_threads(0);
    double ll[NB];
    lse_error e;
    const lse_gmm *const *cm = (const lse_gmm *const *)m;
    ck_assert_int_eq(lse_gmm_loglik_batch(NULL, 2, x, NULL, ll, &e),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_gmm_loglik_batch(cm, 2, NULL, NULL, ll, &e),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_gmm_loglik_batch(cm, 2, x, NULL, NULL, &e),
                     LSE_EFAULT);
    const lse_gmm *hole[2] = {m[0], NULL};
    ck_assert_int_eq(lse_gmm_loglik_batch(hole, 2, x, NULL, ll, &e),
                     LSE_EFAULT);
    gsl_vector *short_w = gsl_vector_alloc(n - 1);
    gsl_vector_set_all(short_w, 1.0);
    ck_assert_int_eq(lse_gmm_loglik_batch(cm, 2, x, short_w, ll, &e),
                     LSE_EDIM);
    lse_assert_ok(lse_gmm_loglik_batch(NULL, 0, x, NULL, NULL, &e));
    gsl_vector_free(short_w);
    for (size_t b = 0; b < NB; b++)
        lse_gmm_free(m[b]);
    gsl_vector_free(w);
    gsl_vector_free(ls);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_fit_batch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_same_bits);
    tcase_add_test(tc, test_failing_fit);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_loglik_batch);
    suite_add_tcase(s, tc);
    return s;
}
