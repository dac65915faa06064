#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_complex_math.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

/* Latent SLDS (models/lslds.c): structured VI and its M-step. */

/* A two-mode model: slow and fast rotations, D = 2, N observed. */
static lse_lslds_params *truth(size_t N, int markov)
{
    lse_lslds_params *p = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 2, N, markov, &p, NULL));
    const double ang[2] = {0.1, 0.6}, rad[2] = {0.97, 0.9};
    for (size_t k = 0; k < 2; k++) {
        const double c = rad[k] * cos(ang[k]), s = rad[k] * sin(ang[k]);
        gsl_matrix_set(p->A, k, 0, c);
        gsl_matrix_set(p->A, k, 1, -s);
        gsl_matrix_set(p->A, k, 2, s);
        gsl_matrix_set(p->A, k, 3, c);
        gsl_matrix_set(p->b, k, 0, k ? 0.3 : -0.2);
        gsl_matrix_set(p->Q, k, 0, 0.05);
        gsl_matrix_set(p->Q, k, 3, 0.05);
        gsl_matrix_set(p->Q, k, 1, 0.01);
        gsl_matrix_set(p->Q, k, 2, 0.01);
    }
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 11);
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(p->C, i, j, 2.0 * gsl_rng_uniform(r) - 1.0);
        gsl_vector_set(p->d, i, gsl_rng_uniform(r));
        gsl_vector_set(p->r, i, 0.05 + 0.05 * gsl_rng_uniform(r));
    }
    gsl_rng_free(r);
    gsl_vector_set(p->init, 0, 0.5);
    gsl_vector_set(p->init, 1, 0.5);
    const double P[4] = {0.98, 0.02, 0.03, 0.97};
    memcpy(p->trans->data, P, sizeof P);
    return p;
}

static double ez_logp(const lse_lslds_params *p, const lse_lslds_post *q,
                      const size_t *seq)
{
    double s = 0.0;
    for (size_t t = 0; t < q->T; t++) {
        const int start = t == 0 || (seq && seq[t] != seq[t - 1]);
        if (p->markov && !start)
            continue;
        for (size_t k = 0; k < p->K; k++) {
            const double w = gsl_matrix_get(q->w, t, k);
            if (w > 0)
                s += w * log(gsl_vector_get(p->init, k));
        }
    }
    if (p->markov)
        for (size_t j = 0; j < p->K; j++)
            for (size_t k = 0; k < p->K; k++) {
                const double x = gsl_matrix_get(q->xi, j, k);
                if (x > 0)
                    s += x * log(gsl_matrix_get(p->trans, j, k));
            }
    return s;
}

/* K = 1: the model is a linear-Gaussian SSM; at the q(x) optimum the ELBO
 * is its exact log-likelihood (Kalman filter), with missing entries and
 * two sequences. */
START_TEST(test_k1_is_kalman)
{
    lse_lslds_params *t2 = truth(3, 1);
    lse_lslds_params *p = NULL;
    lse_assert_ok(lse_lslds_params_new(1, 2, 3, 1, &p, NULL));
    gsl_matrix_view A0 = gsl_matrix_submatrix(t2->A, 0, 0, 1, 4);
    gsl_matrix_memcpy(p->A, &A0.matrix);
    gsl_matrix_set(p->b, 0, 0, 0.1);
    gsl_matrix_set(p->Q, 0, 0, 0.2);
    gsl_matrix_set(p->Q, 0, 3, 0.3);
    gsl_matrix_set(p->Q, 0, 1, 0.05);
    gsl_matrix_set(p->Q, 0, 2, 0.05);
    gsl_matrix_memcpy(p->C, t2->C);
    gsl_vector_memcpy(p->d, t2->d);
    gsl_vector_memcpy(p->r, t2->r);
    const size_t T = 60;
    gsl_matrix *y = gsl_matrix_alloc(T, 3);
    lse_assert_ok(lse_lslds_simulate(t2, 5, y, NULL, NULL, NULL));
    unsigned char *obs = malloc(T * 3);
    size_t *seq = malloc(T * sizeof(size_t));
    for (size_t i = 0; i < T * 3; i++)
        obs[i] = (i * 7) % 5 != 0;
    for (size_t t = 0; t < T; t++)
        seq[t] = t < 25 ? 0 : 1;
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, 1, 2, &q, NULL));
    double logzx, elbo, ll;
    lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, &logzx, NULL));
    lse_assert_ok(lse_lslds_update_z(p, seq, q, NULL));
    lse_assert_ok(lse_lslds_elbo(p, y, obs, seq, q, &elbo, NULL));
    /* the Kalman filter on the same model */
    gsl_matrix *R = gsl_matrix_calloc(3, 3);
    for (size_t i = 0; i < 3; i++)
        gsl_matrix_set(R, i, i, gsl_vector_get(p->r, i));
    lse_kalman_model km = {p->A, p->b, p->Q, p->C, p->d, R, p->m0, p->P0,
                           NULL, NULL};
    gsl_matrix *km_mean = gsl_matrix_alloc(T, 2);
    gsl_matrix *km_cov = gsl_matrix_alloc(T, 4), *km_cross = gsl_matrix_alloc(T, 4);
    lse_kalman_result kres = {NULL, NULL, km_mean, km_cov, km_cross};
    lse_assert_ok(lse_kalman_smooth(&km, y, obs, seq, &ll, &kres, NULL));
    ck_assert_msg(fabs(elbo - ll) <= 1e-9 * fabs(ll), "elbo %.17g ll %.17g",
                  elbo, ll);
    /* q(x) (information-form smoother) = the covariance-form RTS smoother */
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < 4; i++) {
            if (i < 2)
                ck_assert_double_eq_tol(gsl_matrix_get(q->mean, t, i),
                                        gsl_matrix_get(km_mean, t, i), 1e-9);
            ck_assert_double_eq_tol(gsl_matrix_get(q->cov, t, i),
                                    gsl_matrix_get(km_cov, t, i), 1e-9);
            if (t != 0 && t != 25)
                ck_assert_double_eq_tol(gsl_matrix_get(q->cross, t, i),
                                        gsl_matrix_get(km_cross, t, i), 1e-9);
        }
    gsl_matrix_free(km_mean);
    gsl_matrix_free(km_cov);
    gsl_matrix_free(km_cross);
    ck_assert_msg(fabs(logzx - ll) <= 1e-9 * fabs(ll), "logzx %.17g ll %.17g",
                  logzx, ll);
    gsl_matrix_free(R);
    gsl_matrix_free(y);
    free(obs);
    free(seq);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
    lse_lslds_params_free(t2);
}
END_TEST

/* The same comparison for every copy of the smoother (models/lslds_kern.c
 * compiles its forward and backward passes once per D = 1 .. 4 with D a
 * constant, and once for any D): one mode, D = 1 .. 5, against the
 * covariance-form RTS smoother lse_kalman_smooth, with missing entries and
 * two sequences. */
START_TEST(test_k1_kalman_every_d)
{
    const size_t N = 3, T = 40;
    for (size_t D = 1; D <= 5; D++) {
        lse_lslds_params *p = NULL;
        lse_assert_ok(lse_lslds_params_new(1, D, N, 1, &p, NULL));
        for (size_t i = 0; i < D; i++) {
            gsl_matrix_set(p->b, 0, i, 0.05 * (double)i);
            for (size_t j = 0; j < D; j++) {
                const double a = i == j ? 0.8 : j == i + 1 ? 0.1 : 0.0;
                const double q = i == j ? 0.1 : (i + 1 == j || j + 1 == i) ? 0.02 : 0.0;
                gsl_matrix_set(p->A, 0, i * D + j, a);
                gsl_matrix_set(p->Q, 0, i * D + j, q);
            }
        }
        for (size_t n = 0; n < N; n++) {
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(p->C, n, j, sin(1.0 + (double)n + 2.0 * (double)j));
            gsl_vector_set(p->d, n, 0.1 * (double)n);
            gsl_vector_set(p->r, n, 0.3 + 0.1 * (double)n);
        }
        gsl_matrix *y = gsl_matrix_alloc(T, N);
        lse_assert_ok(lse_lslds_simulate(p, 11 + D, y, NULL, NULL, NULL));
        unsigned char *obs = malloc(T * N);
        size_t *seq = malloc(T * sizeof(size_t));
        ck_assert(obs != NULL && seq != NULL);
        for (size_t i = 0; i < T * N; i++)
            obs[i] = (i * 7) % 5 != 0;
        for (size_t t = 0; t < T; t++)
            seq[t] = t < 17 ? 0 : 1;
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 1, D, &q, NULL));
        double logzx, ll;
        lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, &logzx, NULL));
        gsl_matrix *R = gsl_matrix_calloc(N, N);
        for (size_t i = 0; i < N; i++)
            gsl_matrix_set(R, i, i, gsl_vector_get(p->r, i));
        gsl_matrix_view bv = gsl_matrix_submatrix(p->b, 0, 0, 1, D);
        lse_kalman_model km = {p->A, &bv.matrix, p->Q, p->C, p->d, R,
                               p->m0, p->P0, NULL, NULL};
        gsl_matrix *km_mean = gsl_matrix_alloc(T, D);
        gsl_matrix *km_cov = gsl_matrix_alloc(T, D * D);
        gsl_matrix *km_cross = gsl_matrix_alloc(T, D * D);
        lse_kalman_result kres = {NULL, NULL, km_mean, km_cov, km_cross};
        lse_assert_ok(lse_kalman_smooth(&km, y, obs, seq, &ll, &kres, NULL));
        ck_assert_msg(fabs(logzx - ll) <= 1e-9 * fabs(ll),
                      "D %zu: logzx %.17g ll %.17g", D, logzx, ll);
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < D * D; i++) {
                if (i < D)
                    ck_assert_msg(fabs(gsl_matrix_get(q->mean, t, i) -
                                       gsl_matrix_get(km_mean, t, i)) <= 1e-9,
                                  "D %zu: mean (%zu, %zu)", D, t, i);
                ck_assert_msg(fabs(gsl_matrix_get(q->cov, t, i) -
                                   gsl_matrix_get(km_cov, t, i)) <= 1e-9,
                              "D %zu: cov (%zu, %zu)", D, t, i);
                if (t != 0 && t != 17)
                    ck_assert_msg(fabs(gsl_matrix_get(q->cross, t, i) -
                                       gsl_matrix_get(km_cross, t, i)) <= 1e-9,
                                  "D %zu: cross (%zu, %zu)", D, t, i);
            }
        gsl_matrix_free(km_mean);
        gsl_matrix_free(km_cov);
        gsl_matrix_free(km_cross);
        gsl_matrix_free(R);
        gsl_matrix_free(y);
        free(obs);
        free(seq);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
    }
}
END_TEST

/* After the q(x) update, ELBO = log Z_x + E_q(z)[log p(z)] + H(q(z)) (the
 * closed form of the structured update, computed through the residual
 * potentials), and every half-step of VI-EM never lowers the ELBO. */
START_TEST(test_elbo_identity_and_monotone)
{
    for (int markov = 0; markov <= 1; markov++) {
        lse_lslds_params *t2 = truth(4, markov);
        const size_t T = 300;
        gsl_matrix *y = gsl_matrix_alloc(T, 4);
        lse_assert_ok(lse_lslds_simulate(t2, 3, y, NULL, NULL, NULL));
        unsigned char *obs = malloc(T * 4);
        for (size_t i = 0; i < T * 4; i++)
            obs[i] = (i * 13) % 11 != 0;
        lse_lslds_params *p = NULL;
        lse_assert_ok(lse_lslds_params_new(2, 2, 4, markov, &p, NULL));
        lse_assert_ok(lse_lslds_init(p, y, obs, NULL, 1, NULL));
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        double prev = -INFINITY, e, logzx;
        for (int it = 0; it < 15; it++) {
            lse_assert_ok(lse_lslds_update_z(p, NULL, q, NULL));
            lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &e, NULL));
            ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "z: %.17g < %.17g", e,
                          prev);
            prev = e;
            lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, &logzx, NULL));
            lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &e, NULL));
            ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "x: %.17g < %.17g", e,
                          prev);
            const double id = logzx + ez_logp(p, q, NULL) + q->hz;
            ck_assert_msg(fabs(e - id) <= 1e-9 * fabs(e), "identity %.17g %.17g",
                          e, id);
            prev = e;
            lse_assert_ok(lse_lslds_mstep(p, y, obs, NULL, q, 0.0, NULL));
            lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &e, NULL));
            ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "m: %.17g < %.17g", e,
                          prev);
            prev = e;
        }
        gsl_matrix_free(y);
        free(obs);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
        lse_lslds_params_free(t2);
    }
}
END_TEST

/* The M-step's defining property: the ELBO (q fixed) has zero gradient in
 * every unconstrained parameter at the M-step's output, and zero gradient
 * along the simplex for the probabilities (central differences); the same
 * differences before the M-step are far from zero. */
static double elbo_at(lse_lslds_params *p, const gsl_matrix *y,
                      const unsigned char *obs, const lse_lslds_post *q)
{
    double e;
    lse_error er;
    lse_status st = lse_lslds_elbo(p, y, obs, NULL, q, &e, &er);
    ck_assert_msg(st == LSE_OK, "%s; r0 %g P0 %g %g %g init %g %g trans %g %g %g %g", er.message, gsl_vector_get(p->r,0), p->P0->data[0], p->P0->data[1], p->P0->data[3], p->init->data[0], p->init->data[1], p->trans->data[0], p->trans->data[1], p->trans->data[2], p->trans->data[3]);
    return e;
}

static double fd(lse_lslds_params *p, const gsl_matrix *y,
                 const unsigned char *obs, const lse_lslds_post *q, double *x1,
                 double *x2, double s2)
{
    /* move x1 by +h and x2 by s2 * h (x2 may be NULL); h relative to
     * |x1| (at least 1e-2 of it) so that small variances are not
     * differenced across their curvature */
    const double a = *x1, b = x2 ? *x2 : 0.0;
    const double h = 1e-5 * fmin(fmax(fabs(a), 1e-2), 1.0);
    *x1 = a + h;
    if (x2)
        *x2 = b + s2 * h;
    const double ep = elbo_at(p, y, obs, q);
    *x1 = a - h;
    if (x2)
        *x2 = b - s2 * h;
    const double em = elbo_at(p, y, obs, q);
    *x1 = a;
    if (x2)
        *x2 = b;
    return (ep - em) / (2 * h);
}

static double max_grad(lse_lslds_params *p, const gsl_matrix *y,
                       const unsigned char *obs, const lse_lslds_post *q)
{
    const size_t K = p->K, D = p->D, N = p->N;
    double g = 0.0;
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < D; i++) {
            g = fmax(g, fabs(fd(p, y, obs, q, gsl_matrix_ptr(p->b, k, i), NULL, 0)));
            for (size_t j = 0; j < D; j++) {
                g = fmax(g, fabs(fd(p, y, obs, q,
                                    gsl_matrix_ptr(p->A, k, i * D + j), NULL, 0)));
                if (j <= i)
                    g = fmax(g, fabs(fd(p, y, obs, q,
                                        gsl_matrix_ptr(p->Q, k, i * D + j),
                                        i == j ? NULL
                                               : gsl_matrix_ptr(p->Q, k, j * D + i),
                                        1.0)));
            }
        }
    const size_t NE = N * (p->per_mode_emission ? K : 1); /* C, d, r rows */
    for (size_t i = 0; i < NE; i++) {
        g = fmax(g, fabs(fd(p, y, obs, q, gsl_vector_ptr(p->d, i), NULL, 0)));
        g = fmax(g, fabs(fd(p, y, obs, q, gsl_vector_ptr(p->r, i), NULL, 0)));
        for (size_t j = 0; j < D; j++)
            g = fmax(g, fabs(fd(p, y, obs, q, gsl_matrix_ptr(p->C, i, j), NULL, 0)));
    }
    for (size_t i = 0; i < D; i++) {
        g = fmax(g, fabs(fd(p, y, obs, q, gsl_vector_ptr(p->m0, i), NULL, 0)));
        for (size_t j = 0; j <= i; j++)
            g = fmax(g, fabs(fd(p, y, obs, q, gsl_matrix_ptr(p->P0, i, j),
                                i == j ? NULL : gsl_matrix_ptr(p->P0, j, i), 1.0)));
    }
    /* simplex directions away from the boundary (at a boundary optimum
     * the derivative is one-sided) */
    for (size_t k = 1; k < K; k++) {
        if (fmin(gsl_vector_get(p->init, k), gsl_vector_get(p->init, 0)) > 1e-3)
            g = fmax(g, fabs(fd(p, y, obs, q, gsl_vector_ptr(p->init, k),
                                gsl_vector_ptr(p->init, 0), -1.0)));
        if (p->markov)
            for (size_t j = 0; j < K; j++)
                if (fmin(gsl_matrix_get(p->trans, j, k),
                         gsl_matrix_get(p->trans, j, 0)) > 1e-3)
                    g = fmax(g, fabs(fd(p, y, obs, q,
                                        gsl_matrix_ptr(p->trans, j, k),
                                        gsl_matrix_ptr(p->trans, j, 0), -1.0)));
    }
    return g;
}

START_TEST(test_mstep_stationary)
{
    for (int markov = 0; markov <= 1; markov++) {
        lse_lslds_params *t2 = truth(3, markov);
        const size_t T = 200;
        gsl_matrix *y = gsl_matrix_alloc(T, 3);
        lse_assert_ok(lse_lslds_simulate(t2, 8, y, NULL, NULL, NULL));
        unsigned char *obs = malloc(T * 3);
        for (size_t i = 0; i < T * 3; i++)
            obs[i] = (i * 5) % 7 != 0;
        lse_lslds_params *p = NULL;
        lse_assert_ok(lse_lslds_params_new(2, 2, 3, markov, &p, NULL));
        lse_assert_ok(lse_lslds_init(p, y, obs, NULL, 2, NULL));
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        for (int it = 0; it < 3; it++) {
            lse_assert_ok(lse_lslds_update_z(p, NULL, q, NULL));
            lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
            if (it < 2)
                lse_assert_ok(lse_lslds_mstep(p, y, obs, NULL, q, 0.0, NULL));
        }
        const double before = max_grad(p, y, obs, q);
        lse_assert_ok(lse_lslds_mstep(p, y, obs, NULL, q, 0.0, NULL));
        const double after = max_grad(p, y, obs, q);
        ck_assert_msg(before > 1.0, "gradient before the M-step %g", before);
        ck_assert_msg(after < 1e-4, "gradient after the M-step %g", after);
        gsl_matrix_free(y);
        free(obs);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
        lse_lslds_params_free(t2);
    }
}
END_TEST

static double seg_accuracy(const size_t *z, const gsl_matrix *w)
{
    size_t same = 0, swap = 0;
    for (size_t t = 0; t < w->size1; t++) {
        const size_t k = gsl_matrix_get(w, t, 1) > gsl_matrix_get(w, t, 0);
        same += k == z[t];
        swap += k != z[t];
    }
    return (double)(same > swap ? same : swap) / (double)w->size1;
}

/* sorted |eigenvalues| of A_k: invariant to the latent basis */
static void eig_mod(const lse_lslds_params *p, size_t k, double *out)
{
    gsl_matrix *a = gsl_matrix_alloc(2, 2);
    memcpy(a->data, p->A->data + k * p->A->tda, 4 * sizeof(double));
    gsl_vector_complex *ev = gsl_vector_complex_alloc(2);
    gsl_eigen_nonsymm_workspace *ws = gsl_eigen_nonsymm_alloc(2);
    gsl_eigen_nonsymm(a, ev, ws);
    for (size_t i = 0; i < 2; i++)
        out[i] = gsl_complex_abs(gsl_vector_complex_get(ev, i));
    gsl_eigen_nonsymm_free(ws);
    gsl_vector_complex_free(ev);
    gsl_matrix_free(a);
}

/* Recovery on a simulated series (fixed seeds): segmentation accuracy
 * under the best label permutation, the spectral radii of A_k, the
 * transition matrix and the noise variances. */
START_TEST(test_recovery)
{
    lse_lslds_params *t2 = truth(5, 1);
    const size_t T = 1500;
    gsl_matrix *y = gsl_matrix_alloc(T, 5);
    size_t *z = malloc(T * sizeof(size_t));
    lse_assert_ok(lse_lslds_simulate(t2, 21, y, NULL, z, NULL));
    lse_lslds_params *p = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 2, 5, 1, &p, NULL));
    lse_lslds_opts o = lse_lslds_opts_default();
    o.n_init = 3;
    o.seed = 4;
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
    double elbo;
    size_t it;
    lse_error err;
    lse_status st = lse_lslds_fit(p, y, NULL, NULL, &o, q, &elbo, &it, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    const double acc = seg_accuracy(z, q->w);
    ck_assert_msg(acc > 0.9, "segmentation accuracy %g", acc);
    const size_t perm = gsl_matrix_get(q->w, 0, 0) > 0.5 ? z[0] : 1 - z[0];
    for (size_t k = 0; k < 2; k++) {
        const size_t kt = perm == 0 ? k : 1 - k;
        double ef[2], et[2];
        eig_mod(p, k, ef);
        eig_mod(t2, kt, et);
        ck_assert_msg(fabs(fmax(ef[0], ef[1]) - fmax(et[0], et[1])) < 0.05,
                      "spectral radius mode %zu: %g vs %g", k,
                      fmax(ef[0], ef[1]), fmax(et[0], et[1]));
        ck_assert_msg(fabs(gsl_matrix_get(p->trans, k, k) -
                           gsl_matrix_get(t2->trans, kt, kt)) < 0.03,
                      "P[%zu][%zu] = %g", k, k, gsl_matrix_get(p->trans, k, k));
    }
    for (size_t i = 0; i < 5; i++)
        ck_assert_msg(fabs(gsl_vector_get(p->r, i) / gsl_vector_get(t2->r, i) -
                           1.0) < 0.25,
                      "r[%zu] = %g vs %g", i, gsl_vector_get(p->r, i),
                      gsl_vector_get(t2->r, i));
    free(z);
    gsl_matrix_free(y);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
    lse_lslds_params_free(t2);
}
END_TEST


/* R -> 0 and C = I: the latent model becomes the autoregressive HMM on y
 * (lse_slds): the ELBO tends to the ARHMM log-likelihood plus the initial
 * state's log-density, and q(z) to the ARHMM's mode posteriors. Both
 * models start the chain at its stationary distribution pi (lse_slds's
 * initial probabilities are those of its first step, row 1; ours of
 * row 0, so pi makes them agree). */
START_TEST(test_arhmm_limit)
{
    lse_lslds_params *p = truth(2, 1);
    const size_t T = 200, D = 2;
    gsl_vector *pi = gsl_vector_alloc(2);
    lse_assert_ok(lse_chain_stationary(p->trans, NULL, pi, NULL, NULL));
    gsl_vector_memcpy(p->init, pi);
    gsl_matrix_set_identity(p->C);
    gsl_vector_set_zero(p->d);
    gsl_vector_set_all(p->r, 1e-10);
    lse_slds_config cfg = lse_slds_config_default();
    cfg.dim = D;
    cfg.markov = 1;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, NULL));
    gsl_matrix *a = gsl_matrix_alloc(D, D), *c = gsl_matrix_alloc(D, D);
    gsl_vector *b = gsl_vector_alloc(D);
    for (size_t k = 0; k < 2; k++) {
        memcpy(a->data, p->A->data + k * 4, 4 * sizeof(double));
        memcpy(c->data, p->Q->data + k * 4, 4 * sizeof(double));
        memcpy(b->data, p->b->data + k * 2, 2 * sizeof(double));
        lse_assert_ok(lse_slds_set_a(m, k, a, NULL));
        lse_assert_ok(lse_slds_set_b(m, k, b, NULL));
        lse_assert_ok(lse_slds_set_cov(m, k, c, NULL));
    }
    lse_assert_ok(lse_slds_set_transition(m, p->trans, NULL));
    lse_assert_ok(lse_slds_set_initial(m, pi, NULL));
    gsl_matrix *y = gsl_matrix_alloc(T, D);
    lse_assert_ok(lse_slds_simulate(m, T, 3, y, NULL, NULL));
    double ll_ar;
    lse_assert_ok(lse_slds_score(m, y, NULL, &ll_ar, NULL));
    gsl_matrix *post = gsl_matrix_alloc(T - 1, 2);
    lse_assert_ok(lse_slds_posteriors(m, y, NULL, post, NULL));
    /* log N(y_0; m0 = 0, P0 = I) */
    const double y00 = gsl_matrix_get(y, 0, 0), y01 = gsl_matrix_get(y, 0, 1);
    const double l0 = -1.8378770664093454836 - 0.5 * (y00 * y00 + y01 * y01);
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, 2, D, &q, NULL));
    double e = 0.0;
    lse_assert_ok(lse_lslds_update_x(p, y, NULL, NULL, q, NULL, NULL));
    for (int it = 0; it < 30; it++) {
        lse_assert_ok(lse_lslds_update_z(p, NULL, q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, NULL, NULL, q, NULL, NULL));
    }
    lse_assert_ok(lse_lslds_elbo(p, y, NULL, NULL, q, &e, NULL));
    ck_assert_msg(fabs(e - (ll_ar + l0)) < 1e-6, "elbo %.10g, ARHMM %.10g",
                  e, ll_ar + l0);
    double dmax = 0.0;
    for (size_t t = 1; t < T; t++)
        dmax = fmax(dmax, fabs(gsl_matrix_get(q->w, t, 0) -
                               gsl_matrix_get(post, t - 1, 0)));
    ck_assert_msg(dmax < 1e-5, "posteriors differ by %g", dmax);
    lse_slds_free(m);
    gsl_matrix_free(a);
    gsl_matrix_free(c);
    gsl_vector_free(b);
    gsl_vector_free(pi);
    gsl_matrix_free(y);
    gsl_matrix_free(post);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
}
END_TEST

/* Model files: save, load, the same parameters bit for bit; errors. */
START_TEST(test_file)
{
    char dir[512], path[600];
    lse_tmpdir_make(dir, sizeof dir, "lslds_file");
    snprintf(path, sizeof path, "%s/m.json", dir);
    for (int markov = 0; markov <= 1; markov++) {
        lse_lslds_params *p = truth(3, markov);
        const char *names[] = {"u", "v", "w"};
        lse_error err;
        lse_assert_ok(lse_lslds_save(p, names, path, &err));
        lse_lslds_params *g = NULL;
        char **nm = NULL;
        lse_assert_ok(lse_lslds_load(path, &g, &nm, &err));
        ck_assert_str_eq(nm[2], "w");
        ck_assert_int_eq(g->markov, markov);
        ck_assert(gsl_matrix_equal(g->A, p->A) && gsl_matrix_equal(g->Q, p->Q) &&
                  gsl_matrix_equal(g->b, p->b) && gsl_matrix_equal(g->C, p->C) &&
                  gsl_vector_equal(g->d, p->d) && gsl_vector_equal(g->r, p->r) &&
                  gsl_vector_equal(g->m0, p->m0) &&
                  gsl_matrix_equal(g->P0, p->P0) &&
                  gsl_vector_equal(g->init, p->init));
        if (markov)
            ck_assert(gsl_matrix_equal(g->trans, p->trans));
        free(nm);
        lse_lslds_params_free(g);
        /* errors: another model, bad probabilities, non-SPD Q */
        lse_json *doc = lse_json_new_object();
        lse_assert_ok(lse_lslds_to_json(p, names, doc, NULL));
        lse_assert_ok(lse_json_set_string(doc, "model", "slds", NULL));
        lse_assert_status(lse_lslds_from_json(doc, "f", &g, NULL, &err),
                          LSE_EINVAL);
        ck_assert(strstr(err.message, "slds-latent") != NULL);
        lse_json_free(doc);
        gsl_vector_set(p->init, 0, 0.7);
        doc = lse_json_new_object();
        lse_assert_ok(lse_lslds_to_json(p, names, doc, NULL));
        lse_assert_status(lse_lslds_from_json(doc, "f", &g, NULL, &err),
                          LSE_EDOM);
        lse_json_free(doc);
        gsl_vector_set(p->init, 0, 0.5);
        gsl_matrix_set(p->Q, 1, 0, -0.1);
        doc = lse_json_new_object();
        lse_assert_ok(lse_lslds_to_json(p, names, doc, NULL));
        lse_assert_status(lse_lslds_from_json(doc, "f", &g, NULL, &err),
                          LSE_ENUMERIC);
        ck_assert_ptr_null(g);
        lse_json_free(doc);
        lse_lslds_params_free(p);
    }
    lse_tmpdir_remove(dir);
}
END_TEST

/* log p(y) by importance sampling against brute-force enumeration of the
 * K^T mode paths (exact p(y | z) for each by the Kalman filter), T = 7,
 * K = 2, with a missing entry; the ELBO is a lower bound of it. */
START_TEST(test_log_marginal)
{
    for (int markov = 1; markov >= 0; markov--) {
        lse_lslds_params *p = truth(2, markov);
        const size_t T = 7, K = 2, D = 2, DD = 4;
        gsl_matrix *y = gsl_matrix_alloc(T, 2);
        lse_assert_ok(lse_lslds_simulate(p, 9, y, NULL, NULL, NULL));
        unsigned char obs[14];
        memset(obs, 1, sizeof obs);
        obs[5] = 0;
        gsl_matrix *A = gsl_matrix_alloc(T, DD), *B = gsl_matrix_alloc(T, D);
        gsl_matrix *Qm = gsl_matrix_alloc(T, DD), *R = gsl_matrix_calloc(2, 2);
        for (size_t i = 0; i < 2; i++)
            gsl_matrix_set(R, i, i, gsl_vector_get(p->r, i));
        lse_kalman_model km = {A, B, Qm, p->C, p->d, R, p->m0, p->P0, NULL, NULL};
        double mx = -INFINITY, terms[128];
        for (size_t code = 0; code < (1u << T); code++) {
            double lz = 0.0;
            for (size_t t = 0; t < T; t++) {
                const size_t k = (code >> t) & 1, kp = (code >> (t - (t > 0))) & 1;
                memcpy(A->data + t * DD, p->A->data + k * DD, DD * sizeof(double));
                memcpy(Qm->data + t * DD, p->Q->data + k * DD, DD * sizeof(double));
                memcpy(B->data + t * D, p->b->data + k * D, D * sizeof(double));
                lz += log(markov && t > 0 ? gsl_matrix_get(p->trans, kp, k)
                                          : gsl_vector_get(p->init, k));
            }
            double ll;
            lse_assert_ok(lse_kalman_smooth(&km, y, obs, NULL, &ll, NULL, NULL));
            terms[code] = lz + ll;
            mx = fmax(mx, terms[code]);
        }
        double acc = 0.0;
        for (size_t code = 0; code < (1u << T); code++)
            acc += exp(terms[code] - mx);
        const double exact = mx + log(acc);
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, K, D, &q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        for (int it = 0; it < 10; it++) {
            lse_assert_ok(lse_lslds_update_z(p, NULL, q, NULL));
            lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        }
        double elbo, est, se;
        lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &elbo, NULL));
        lse_assert_ok(lse_lslds_log_marginal(p, y, obs, NULL, q, 4000, 1, &est,
                                             &se, NULL));
        ck_assert_msg(elbo <= exact + 1e-9, "elbo %g > log p(y) %g", elbo, exact);
        ck_assert_msg(se > 0.0 && se < (markov ? 0.01 : 0.5), "se %g est %.10g exact %.10g elbo %.10g", se, est, exact, elbo);
        ck_assert_msg(fabs(est - exact) < 4.0 * se + 1e-12,
                      "IS %.10g +- %.3g, exact %.10g (elbo %.10g)", est, se,
                      exact, elbo);
        gsl_matrix_free(A);
        gsl_matrix_free(B);
        gsl_matrix_free(Qm);
        gsl_matrix_free(R);
        gsl_matrix_free(y);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
    }
}
END_TEST

/* lse_lslds_scores: q(z) is p(z) prod_t exp(s(t, z_t)) normalized, so
 * the marginals enumerated over all 2^T paths are q->w, and the Viterbi
 * path of the scores is the most likely of those paths. */
START_TEST(test_scores_viterbi)
{
    enum { T = 8 };
    const size_t seq[T] = {0, 0, 0, 0, 0, 1, 1, 1};
    for (int markov = 0; markov <= 1; markov++) {
        lse_lslds_params *p = truth(3, markov);
        gsl_matrix *y = gsl_matrix_alloc(T, 3), *s = gsl_matrix_alloc(T, 2);
        lse_assert_ok(lse_lslds_simulate(p, 4, y, NULL, NULL, NULL));
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
        lse_error err;
        lse_assert_status(lse_lslds_scores(p, seq, q, s, &err), LSE_EINVAL);
        lse_assert_ok(lse_lslds_update_x(p, y, NULL, seq, q, NULL, NULL));
        lse_assert_ok(lse_lslds_update_z(p, seq, q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, NULL, seq, q, NULL, NULL));
        lse_assert_ok(lse_lslds_update_z(p, seq, q, NULL));
        lse_assert_ok(lse_lslds_scores(p, seq, q, s, NULL));
        double marg[T][2] = {{0}}, tot = 0.0, best = -INFINITY;
        size_t arg = 0;
        for (size_t m = 0; m < (1u << T); m++) {
            double lw = 0.0;
            for (size_t t = 0; t < T; t++) {
                const size_t k = (m >> t) & 1, j = (m >> (t - (t > 0))) & 1;
                const int start = t == 0 || seq[t] != seq[t - 1];
                lw += gsl_matrix_get(s, t, k) +
                      log(start || !markov ? gsl_vector_get(p->init, k)
                                           : gsl_matrix_get(p->trans, j, k));
            }
            if (lw > best) {
                best = lw;
                arg = m;
            }
            tot += exp(lw);
            for (size_t t = 0; t < T; t++)
                marg[t][(m >> t) & 1] += exp(lw);
        }
        for (size_t t = 0; t < T; t++)
            for (size_t k = 0; k < 2; k++)
                ck_assert_double_eq_tol(marg[t][k] / tot,
                                        gsl_matrix_get(q->w, t, k), 1e-9);
        if (markov) {
            gsl_vector *lp0 = gsl_vector_alloc(2);
            gsl_matrix *lT = gsl_matrix_alloc(2, 2);
            for (size_t j = 0; j < 2; j++) {
                gsl_vector_set(lp0, j, log(gsl_vector_get(p->init, j)));
                for (size_t k = 0; k < 2; k++)
                    gsl_matrix_set(lT, j, k, log(gsl_matrix_get(p->trans, j, k)));
            }
            const size_t starts[1] = {5};
            size_t path[T];
            lse_assert_ok(lse_chain_viterbi(s, lp0, lT, starts, 1, path, NULL));
            for (size_t t = 0; t < T; t++)
                ck_assert_uint_eq(path[t], (arg >> t) & 1);
            gsl_vector_free(lp0);
            gsl_matrix_free(lT);
        }
        gsl_matrix *bad = gsl_matrix_alloc(T, 3);
        lse_assert_status(lse_lslds_scores(p, seq, q, bad, &err), LSE_EDIM);
        lse_assert_status(lse_lslds_scores(p, seq, q, NULL, &err), LSE_EFAULT);
        gsl_matrix_free(bad);
        lse_lslds_post_free(q);
        gsl_matrix_free(y);
        gsl_matrix_free(s);
        lse_lslds_params_free(p);
    }
}
END_TEST

START_TEST(test_errors)
{
    lse_lslds_params *p = NULL;
    lse_assert_status(lse_lslds_params_new(0, 2, 3, 1, &p, NULL), LSE_EINVAL);
    lse_assert_status(lse_lslds_params_new(2, 2, 3, 1, NULL, NULL), LSE_EFAULT);
    lse_assert_ok(lse_lslds_params_new(2, 2, 3, 1, &p, NULL));
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(10, 2, 2, &q, NULL));
    gsl_matrix *y = gsl_matrix_calloc(10, 3), *y4 = gsl_matrix_calloc(10, 4);
    double e;
    lse_error err;
    lse_assert_status(lse_lslds_update_z(p, NULL, q, &err), LSE_EINVAL);
    lse_assert_status(lse_lslds_elbo(p, y, NULL, NULL, q, &e, &err), LSE_EINVAL);
    lse_assert_status(lse_lslds_update_x(p, y4, NULL, NULL, q, NULL, &err),
                      LSE_EDIM);
    gsl_matrix_set(p->Q, 1, 0, -1.0);
    lse_assert_status(lse_lslds_update_x(p, y, NULL, NULL, q, NULL, &err),
                      LSE_ENUMERIC);
    lse_lslds_params *big = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 4, 3, 1, &big, NULL));
    lse_assert_status(lse_lslds_init(big, y, NULL, NULL, 0, &err), LSE_EINVAL);
    gsl_matrix_free(y);
    gsl_matrix_free(y4);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
    lse_lslds_params_free(big);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Per-mode emissions: C_k, d_k, R_k                                   */

/* truth() with per-mode emissions, block 1 a different C, d, r. */
static lse_lslds_params *truth_pm(size_t N, int markov)
{
    lse_lslds_params *p = truth(N, markov);
    lse_assert_ok(lse_lslds_params_emission_per_mode(p, NULL));
    ck_assert_uint_eq(p->C->size1, 2 * N);
    for (size_t i = 0; i < N; i++) {
        gsl_matrix_set(p->C, N + i, 0, gsl_matrix_get(p->C, i, 1) + 0.5);
        gsl_matrix_set(p->C, N + i, 1, -gsl_matrix_get(p->C, i, 0));
        gsl_vector_set(p->d, N + i, 1.0 - gsl_vector_get(p->d, i));
        gsl_vector_set(p->r, N + i, 2.0 * gsl_vector_get(p->r, i));
    }
    return p;
}

/* One q(z) update with the emission scores. */
static void update_z_pm(const lse_lslds_params *p, const gsl_matrix *y,
                        const unsigned char *obs, lse_lslds_post *q)
{
    gsl_matrix *es = gsl_matrix_alloc(q->T, p->K);
    lse_assert_ok(lse_lslds_emission_scores(p, y, obs, q, es, NULL));
    lse_assert_ok(lse_lslds_update_z_with(p, NULL, es, q, NULL));
    gsl_matrix_free(es);
}

/* Identical blocks are the shared model: q(x), q(z), the ELBO and log p(y)
 * agree; the emission scores are the same in every column. */
START_TEST(test_per_mode_equals_shared)
{
    for (int markov = 0; markov <= 1; markov++) {
        lse_lslds_params *sh = truth(3, markov), *pm = truth(3, markov);
        lse_assert_ok(lse_lslds_params_emission_per_mode(pm, NULL));
        ck_assert_int_eq(pm->per_mode_emission, 1);
        lse_assert_ok(lse_lslds_params_emission_per_mode(pm, NULL)); /* no-op */
        ck_assert_uint_eq(pm->C->size1, 6);
        const size_t T = 120;
        gsl_matrix *y = gsl_matrix_alloc(T, 3);
        lse_assert_ok(lse_lslds_simulate(sh, 4, y, NULL, NULL, NULL));
        unsigned char *obs = malloc(T * 3);
        for (size_t i = 0; i < T * 3; i++)
            obs[i] = (i * 7) % 9 != 0;
        lse_lslds_post *qs = NULL, *qp = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 2, 2, &qs, NULL));
        lse_assert_ok(lse_lslds_post_new(T, 2, 2, &qp, NULL));
        /* update_z without the scores is refused for per-mode emissions */
        lse_assert_ok(lse_lslds_update_x(pm, y, obs, NULL, qp, NULL, NULL));
        lse_assert_status(lse_lslds_update_z(pm, NULL, qp, NULL), LSE_EINVAL);
        lse_assert_status(lse_lslds_update_z_with(pm, NULL, NULL, qp, NULL),
                          LSE_EFAULT);
        lse_assert_ok(lse_lslds_update_x(sh, y, obs, NULL, qs, NULL, NULL));
        for (int it = 0; it < 4; it++) {
            lse_assert_ok(lse_lslds_update_z(sh, NULL, qs, NULL));
            update_z_pm(pm, y, obs, qp);
            lse_assert_ok(lse_lslds_update_x(sh, y, obs, NULL, qs, NULL, NULL));
            lse_assert_ok(lse_lslds_update_x(pm, y, obs, NULL, qp, NULL, NULL));
        }
        for (size_t t = 0; t < T; t++) {
            for (size_t k = 0; k < 2; k++)
                ck_assert_double_eq_tol(gsl_matrix_get(qs->w, t, k),
                                        gsl_matrix_get(qp->w, t, k), 1e-9);
            for (size_t i = 0; i < 2; i++)
                ck_assert_double_eq_tol(gsl_matrix_get(qs->mean, t, i),
                                        gsl_matrix_get(qp->mean, t, i), 1e-9);
            for (size_t i = 0; i < 4; i++)
                ck_assert_double_eq_tol(gsl_matrix_get(qs->cov, t, i),
                                        gsl_matrix_get(qp->cov, t, i), 1e-9);
        }
        double es_, ep, ls, lp, ses, sep;
        lse_assert_ok(lse_lslds_elbo(sh, y, obs, NULL, qs, &es_, NULL));
        lse_assert_ok(lse_lslds_elbo(pm, y, obs, NULL, qp, &ep, NULL));
        ck_assert_msg(fabs(es_ - ep) <= 1e-9 * fabs(es_), "%.17g %.17g", es_, ep);
        gsl_matrix *e = gsl_matrix_alloc(T, 2);
        lse_assert_ok(lse_lslds_emission_scores(pm, y, obs, qp, e, NULL));
        for (size_t t = 0; t < T; t++)
            ck_assert_double_eq_tol(gsl_matrix_get(e, t, 0),
                                    gsl_matrix_get(e, t, 1), 1e-12);
        gsl_matrix_free(e);
        lse_assert_ok(lse_lslds_log_marginal(sh, y, obs, NULL, qs, 300, 2, &ls,
                                             &ses, NULL));
        lse_assert_ok(lse_lslds_log_marginal(pm, y, obs, NULL, qp, 300, 2, &lp,
                                             &sep, NULL));
        ck_assert_msg(fabs(ls - lp) <= 1e-7 * fabs(ls), "%.17g %.17g", ls, lp);
        gsl_matrix_free(y);
        free(obs);
        lse_lslds_post_free(qs);
        lse_lslds_post_free(qp);
        lse_lslds_params_free(sh);
        lse_lslds_params_free(pm);
    }
}
END_TEST

/* Per-mode emissions: the ELBO never decreases in any step, and the
 * M-step output has zero ELBO gradient in every parameter (C_k, d_k, r_k
 * of both modes included; central differences). */
START_TEST(test_per_mode_mstep)
{
    for (int markov = 0; markov <= 1; markov++) {
        lse_lslds_params *t2 = truth_pm(3, markov);
        const size_t T = 200;
        gsl_matrix *y = gsl_matrix_alloc(T, 3);
        lse_assert_ok(lse_lslds_simulate(t2, 8, y, NULL, NULL, NULL));
        unsigned char *obs = malloc(T * 3);
        for (size_t i = 0; i < T * 3; i++)
            obs[i] = (i * 5) % 7 != 0;
        lse_lslds_params *p = NULL;
        lse_assert_ok(lse_lslds_params_new(2, 2, 3, markov, &p, NULL));
        lse_assert_ok(lse_lslds_params_emission_per_mode(p, NULL));
        lse_assert_ok(lse_lslds_init(p, y, obs, NULL, 2, NULL));
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        double prev = -INFINITY, e;
        for (int it = 0; it < 6; it++) {
            update_z_pm(p, y, obs, q);
            lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &e, NULL));
            ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "z %.17g < %.17g", e, prev);
            prev = e;
            lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
            lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &e, NULL));
            ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "x %.17g < %.17g", e, prev);
            prev = e;
            if (it == 5)
                break;
            lse_assert_ok(lse_lslds_mstep(p, y, obs, NULL, q, 0.0, NULL));
            lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &e, NULL));
            ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "m %.17g < %.17g", e, prev);
            prev = e;
        }
        const double before = max_grad(p, y, obs, q);
        lse_assert_ok(lse_lslds_mstep(p, y, obs, NULL, q, 0.0, NULL));
        const double after = max_grad(p, y, obs, q);
        ck_assert_msg(before > 1.0, "gradient before the M-step %g", before);
        ck_assert_msg(after < 1e-4, "gradient after the M-step %g", after);
        gsl_matrix_free(y);
        free(obs);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
        lse_lslds_params_free(t2);
    }
}
END_TEST

/* log N(y_obs; mean, cov) of the joint Gaussian of (x_1..x_T) pushed
 * through the path's emissions (dense, for tiny T): the exact p(y | z). */
static double dense_loglik(const lse_lslds_params *p, const gsl_matrix *y,
                           const unsigned char *obs, const size_t *z)
{
    const size_t T = y->size1, D = p->D, N = p->N, TD = T * D;
    gsl_matrix *S = gsl_matrix_calloc(TD, TD);
    gsl_vector *mu = gsl_vector_calloc(TD);
    /* x_t = A x_{t-1} + b + w: means and covariances row by row */
    for (size_t t = 0; t < T; t++) {
        const size_t k = z[t];
        gsl_matrix_const_view A =
            gsl_matrix_const_view_array(p->A->data + k * D * D, D, D);
        for (size_t i = 0; i < D; i++) {
            double m = t == 0 ? gsl_vector_get(p->m0, i) : gsl_matrix_get(p->b, k, i);
            for (size_t j = 0; t > 0 && j < D; j++)
                m += gsl_matrix_get(&A.matrix, i, j) * gsl_vector_get(mu, (t - 1) * D + j);
            gsl_vector_set(mu, t * D + i, m);
        }
        /* Cov(x_t, x_s) for s < t: A Cov(x_{t-1}, x_s) */
        for (size_t s2 = 0; s2 < t; s2++)
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++) {
                    double c = 0.0;
                    for (size_t l = 0; l < D; l++)
                        c += gsl_matrix_get(&A.matrix, i, l) *
                             gsl_matrix_get(S, (t - 1) * D + l, s2 * D + j);
                    gsl_matrix_set(S, t * D + i, s2 * D + j, c);
                    gsl_matrix_set(S, s2 * D + j, t * D + i, c);
                }
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++) {
                double c = t == 0 ? gsl_matrix_get(p->P0, i, j)
                                  : gsl_matrix_get(p->Q, k, i * D + j);
                for (size_t l = 0; t > 0 && l < D; l++)
                    for (size_t m = 0; m < D; m++)
                        c += gsl_matrix_get(&A.matrix, i, l) *
                             gsl_matrix_get(S, (t - 1) * D + l, (t - 1) * D + m) *
                             gsl_matrix_get(&A.matrix, j, m);
                gsl_matrix_set(S, t * D + i, t * D + j, c);
            }
    }
    /* the observed entries: y = C_z x + d_z + v */
    size_t n = 0, idx[64];
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < N; i++)
            if (obs[t * N + i])
                idx[n++] = t * N + i;
    gsl_matrix *Sy = gsl_matrix_alloc(n, n);
    gsl_vector *r = gsl_vector_alloc(n);
    for (size_t a = 0; a < n; a++) {
        const size_t ta = idx[a] / N, ia = z[ta] * N + idx[a] % N;
        double m = gsl_vector_get(p->d, ia);
        for (size_t j = 0; j < D; j++)
            m += gsl_matrix_get(p->C, ia, j) * gsl_vector_get(mu, ta * D + j);
        gsl_vector_set(r, a, gsl_matrix_get(y, ta, idx[a] % N) - m);
        for (size_t b = 0; b < n; b++) {
            const size_t tb = idx[b] / N, ib = z[tb] * N + idx[b] % N;
            double c = a == b ? gsl_vector_get(p->r, ia) : 0.0;
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    c += gsl_matrix_get(p->C, ia, i) *
                         gsl_matrix_get(S, ta * D + i, tb * D + j) *
                         gsl_matrix_get(p->C, ib, j);
            gsl_matrix_set(Sy, a, b, c);
        }
    }
    gsl_linalg_cholesky_decomp1(Sy);
    double ld = 0.0;
    for (size_t a = 0; a < n; a++)
        ld += 2.0 * log(gsl_matrix_get(Sy, a, a));
    gsl_vector *u = gsl_vector_alloc(n);
    gsl_vector_memcpy(u, r);
    gsl_linalg_cholesky_svx(Sy, u);
    double quad;
    gsl_blas_ddot(r, u, &quad);
    gsl_matrix_free(S);
    gsl_vector_free(mu);
    gsl_matrix_free(Sy);
    gsl_vector_free(r);
    gsl_vector_free(u);
    return -0.5 * ((double)n * log(2.0 * M_PI) + ld + quad);
}

/* log p(y) of per-mode emissions by importance sampling against the
 * enumeration of the 2^T paths (exact p(y | z) of each by a dense joint
 * Gaussian, independent of the Kalman code), T = 6, a missing entry. */
START_TEST(test_per_mode_log_marginal)
{
    for (int markov = 1; markov >= 0; markov--) {
        lse_lslds_params *p = truth_pm(2, markov);
        const size_t T = 6, K = 2;
        gsl_matrix *y = gsl_matrix_alloc(T, 2);
        size_t zt[6];
        lse_assert_ok(lse_lslds_simulate(p, 9, y, NULL, zt, NULL));
        unsigned char obs[12];
        memset(obs, 1, sizeof obs);
        obs[5] = 0;
        double mx = -INFINITY, terms[64];
        for (size_t code = 0; code < (1u << T); code++) {
            size_t z[6];
            double lz = 0.0;
            for (size_t t = 0; t < T; t++) {
                z[t] = (code >> t) & 1;
                lz += log(markov && t > 0 ? gsl_matrix_get(p->trans, z[t - 1], z[t])
                                          : gsl_vector_get(p->init, z[t]));
            }
            terms[code] = lz + dense_loglik(p, y, obs, z);
            mx = fmax(mx, terms[code]);
        }
        double acc = 0.0;
        for (size_t code = 0; code < (1u << T); code++)
            acc += exp(terms[code] - mx);
        const double exact = mx + log(acc);
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, K, 2, &q, NULL));
        lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        for (int it = 0; it < 10; it++) {
            update_z_pm(p, y, obs, q);
            lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        }
        double elbo, est, se;
        lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &elbo, NULL));
        lse_assert_ok(lse_lslds_log_marginal(p, y, obs, NULL, q, 4000, 1, &est,
                                             &se, NULL));
        ck_assert_msg(elbo <= exact + 1e-9, "elbo %g > log p(y) %g", elbo, exact);
        ck_assert_msg(se > 0.0 && se < 0.5, "se %g", se);
        ck_assert_msg(fabs(est - exact) < 4.0 * se + 1e-12,
                      "IS %.10g +- %.3g, exact %.10g (elbo %.10g)", est, se,
                      exact, elbo);
        gsl_matrix_free(y);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
    }
}
END_TEST

/* Model files keep per-mode emissions; simulation uses C_{z_t}. */
START_TEST(test_per_mode_file_simulate)
{
    char dir[512], path[600];
    lse_tmpdir_make(dir, sizeof dir, "lslds_pm");
    snprintf(path, sizeof path, "%s/m.json", dir);
    lse_lslds_params *p = truth_pm(3, 1);
    const char *names[] = {"u", "v", "w"};
    lse_assert_ok(lse_lslds_save(p, names, path, NULL));
    lse_lslds_params *g = NULL;
    lse_assert_ok(lse_lslds_load(path, &g, NULL, NULL));
    ck_assert_int_eq(g->per_mode_emission, 1);
    ck_assert(gsl_matrix_equal(g->C, p->C) && gsl_vector_equal(g->d, p->d) &&
              gsl_vector_equal(g->r, p->r));
    lse_lslds_params_free(g);
    lse_json *doc = lse_json_new_object();
    lse_assert_ok(lse_lslds_to_json(p, names, doc, NULL));
    lse_assert_ok(lse_json_set_string(doc, "emission", "sometimes", NULL));
    lse_error err;
    lse_assert_status(lse_lslds_from_json(doc, "f", &g, NULL, &err), LSE_EINVAL);
    ck_assert(strstr(err.message, "emission") != NULL);
    lse_json_free(doc);
    /* tiny noise: y_t - C_{z_t} x_t - d_{z_t} is about 0 */
    gsl_vector_set_all(p->r, 1e-12);
    const size_t T = 50;
    gsl_matrix *y = gsl_matrix_alloc(T, 3), *x = gsl_matrix_alloc(T, 2);
    size_t z[50], seen[2] = {0, 0};
    lse_assert_ok(lse_lslds_simulate(p, 3, y, x, z, NULL));
    for (size_t t = 0; t < T; t++) {
        seen[z[t]]++;
        for (size_t i = 0; i < 3; i++) {
            const size_t ik = z[t] * 3 + i;
            const double f = gsl_vector_get(p->d, ik) +
                             gsl_matrix_get(p->C, ik, 0) * gsl_matrix_get(x, t, 0) +
                             gsl_matrix_get(p->C, ik, 1) * gsl_matrix_get(x, t, 1);
            ck_assert_double_eq_tol(gsl_matrix_get(y, t, i), f, 1e-5);
        }
    }
    ck_assert(seen[0] > 0 && seen[1] > 0);
    gsl_matrix_free(y);
    gsl_matrix_free(x);
    lse_lslds_params_free(p);
    lse_tmpdir_remove(dir);
}
END_TEST

/* A fit with per-mode emissions on data that have them: the modes are
 * found, and the ELBO beats the shared-emission fit. */
START_TEST(test_per_mode_fit)
{
    lse_lslds_params *t2 = truth_pm(4, 1);
    const size_t T = 500;
    gsl_matrix *y = gsl_matrix_alloc(T, 4);
    size_t *z = malloc(T * sizeof(size_t));
    lse_assert_ok(lse_lslds_simulate(t2, 21, y, NULL, z, NULL));
    lse_lslds_params *sh = NULL, *pm = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 2, 4, 1, &sh, NULL));
    lse_assert_ok(lse_lslds_params_new(2, 2, 4, 1, &pm, NULL));
    lse_assert_ok(lse_lslds_params_emission_per_mode(pm, NULL));
    lse_lslds_opts o = lse_lslds_opts_default();
    o.max_iter = 80;
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
    double es_, ep;
    lse_assert_ok(lse_lslds_fit(sh, y, NULL, NULL, &o, NULL, &es_, NULL, NULL));
    lse_assert_ok(lse_lslds_fit(pm, y, NULL, NULL, &o, q, &ep, NULL, NULL));
    ck_assert_msg(ep > es_ + 10.0, "per-mode ELBO %g, shared %g", ep, es_);
    ck_assert_int_eq(pm->per_mode_emission, 1);
    const double acc = seg_accuracy(z, q->w);
    ck_assert_msg(acc > 0.95, "segmentation accuracy %g", acc);
    lse_lslds_post_free(q);
    lse_lslds_params_free(sh);
    lse_lslds_params_free(pm);
    lse_lslds_params_free(t2);
    gsl_matrix_free(y);
    free(z);
}
END_TEST

/* fix_initial keeps m0 and P0 exactly; without it they move. */
START_TEST(test_fix_initial)
{
    lse_lslds_params *t2 = truth(3, 1);
    const size_t T = 300;
    gsl_matrix *y = gsl_matrix_alloc(T, 3);
    lse_assert_ok(lse_lslds_simulate(t2, 5, y, NULL, NULL, NULL));
    gsl_vector_set(t2->m0, 0, 0.7);
    gsl_matrix_set(t2->P0, 1, 1, 2.5);
    for (int fix = 1; fix >= 0; fix--) {
        lse_lslds_params *p = NULL;
        lse_assert_ok(lse_lslds_params_new(2, 2, 3, 1, &p, NULL));
        gsl_matrix_memcpy(p->A, t2->A);
        gsl_matrix_memcpy(p->b, t2->b);
        gsl_matrix_memcpy(p->Q, t2->Q);
        gsl_matrix_memcpy(p->C, t2->C);
        gsl_vector_memcpy(p->d, t2->d);
        gsl_vector_memcpy(p->r, t2->r);
        gsl_vector_memcpy(p->m0, t2->m0);
        gsl_matrix_memcpy(p->P0, t2->P0);
        gsl_matrix_memcpy(p->trans, t2->trans);
        lse_lslds_opts o = lse_lslds_opts_default();
        o.init_given = 1;
        o.max_iter = 5;
        o.fix_initial = fix;
        lse_assert_ok(lse_lslds_fit(p, y, NULL, NULL, &o, NULL, NULL, NULL, NULL));
        const int same = gsl_vector_equal(p->m0, t2->m0) &&
                         gsl_matrix_equal(p->P0, t2->P0);
        ck_assert_int_eq(same, fix);
        lse_lslds_params_free(p);
    }
    gsl_matrix_free(y);
    lse_lslds_params_free(t2);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_lslds");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_k1_is_kalman);
    tcase_add_test(tc, test_k1_kalman_every_d);
    tcase_add_test(tc, test_elbo_identity_and_monotone);
    tcase_add_test(tc, test_mstep_stationary);
    tcase_add_test(tc, test_recovery);
    tcase_add_test(tc, test_arhmm_limit);
    tcase_add_test(tc, test_file);
    tcase_add_test(tc, test_log_marginal);
    tcase_add_test(tc, test_scores_viterbi);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_per_mode_equals_shared);
    tcase_add_test(tc, test_per_mode_mstep);
    tcase_add_test(tc, test_per_mode_log_marginal);
    tcase_add_test(tc, test_per_mode_file_simulate);
    tcase_add_test(tc, test_per_mode_fit);
    tcase_add_test(tc, test_fix_initial);
    suite_add_tcase(s, tc);
    return s;
}
