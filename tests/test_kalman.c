#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_kalman_smooth (lib/kalman.c) against an independent dense
 * computation: the stacked joint Gaussian of (x_1..T, observed y entries,
 * pseudo-observations standing for the potentials) is built entry by entry
 * and conditioned with one Cholesky factorization. */

#define LOG_2PI 1.8378770664093454836

typedef struct prob {
    size_t T, D, N;
    gsl_matrix *A, *b, *Q, *C, *R, *P0, *J, *h;
    gsl_vector *d, *m0;
    gsl_matrix *y;
    unsigned char *obs; /* NULL: all observed */
    size_t *seq;        /* NULL: one sequence */
} prob;

static void rand_spd(gsl_rng *r, gsl_matrix *out, size_t n, double ridge)
{
    gsl_matrix *g = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(g, i, j, gsl_rng_uniform(r) - 0.5);
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, g, g, 0.0, out);
    for (size_t i = 0; i < n; i++)
        gsl_matrix_set(out, i, i, gsl_matrix_get(out, i, i) + ridge);
    gsl_matrix_free(g);
}

/* Random problem; tv: per-step A, b, Q; pot: potentials; miss: mask. */
static prob make(unsigned long seed, size_t T, size_t D, size_t N, int tv,
                 int pot, int miss, int nseq)
{
    prob p;
    memset(&p, 0, sizeof p);
    p.T = T;
    p.D = D;
    p.N = N;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    const size_t rows = tv ? T : 1;
    p.A = gsl_matrix_alloc(rows, D * D);
    p.b = gsl_matrix_alloc(rows, D);
    p.Q = gsl_matrix_alloc(rows, D * D);
    gsl_matrix *tmp = gsl_matrix_alloc(D, D);
    for (size_t t = 0; t < rows; t++) {
        for (size_t i = 0; i < D * D; i++)
            gsl_matrix_set(p.A, t, i, (gsl_rng_uniform(r) - 0.5) * 1.6 / D);
        for (size_t i = 0; i < D; i++)
            gsl_matrix_set(p.b, t, i, gsl_rng_uniform(r) - 0.5);
        rand_spd(r, tmp, D, 0.2);
        memcpy(p.Q->data + t * D * D, tmp->data, D * D * sizeof(double));
    }
    p.C = gsl_matrix_alloc(N, D);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(p.C, i, j, 2.0 * gsl_rng_uniform(r) - 1.0);
    p.d = gsl_vector_alloc(N);
    for (size_t i = 0; i < N; i++)
        gsl_vector_set(p.d, i, gsl_rng_uniform(r));
    p.R = gsl_matrix_alloc(N, N);
    rand_spd(r, p.R, N, 0.3);
    p.m0 = gsl_vector_alloc(D);
    for (size_t i = 0; i < D; i++)
        gsl_vector_set(p.m0, i, gsl_rng_uniform(r) - 0.5);
    p.P0 = gsl_matrix_alloc(D, D);
    rand_spd(r, p.P0, D, 0.5);
    if (pot) {
        p.J = gsl_matrix_alloc(T, D * D);
        p.h = gsl_matrix_alloc(T, D);
        for (size_t t = 0; t < T; t++) {
            rand_spd(r, tmp, D, 0.05);
            memcpy(p.J->data + t * D * D, tmp->data, D * D * sizeof(double));
            for (size_t i = 0; i < D; i++)
                gsl_matrix_set(p.h, t, i, gsl_rng_uniform(r) - 0.5);
        }
    }
    p.y = gsl_matrix_alloc(T, N);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < N; i++)
            gsl_matrix_set(p.y, t, i, 3.0 * (gsl_rng_uniform(r) - 0.5));
    if (miss) {
        p.obs = malloc(T * N);
        for (size_t i = 0; i < T * N; i++)
            p.obs[i] = gsl_rng_uniform(r) < 0.7;
        /* one row fully missing, one fully observed */
        memset(p.obs + 2 * N, 0, N);
        memset(p.obs + 1 * N, 1, N);
        for (size_t i = 0; i < T * N; i++)
            if (!p.obs[i])
                p.y->data[i] = NAN; /* never read */
    }
    if (nseq > 1) {
        p.seq = malloc(T * sizeof(size_t));
        for (size_t t = 0; t < T; t++)
            p.seq[t] = t * (size_t)nseq / T + 7;
    }
    gsl_matrix_free(tmp);
    gsl_rng_free(r);
    return p;
}

static void prob_free(prob *p)
{
    gsl_matrix_free(p->A);
    gsl_matrix_free(p->b);
    gsl_matrix_free(p->Q);
    gsl_matrix_free(p->C);
    gsl_matrix_free(p->R);
    gsl_matrix_free(p->P0);
    gsl_matrix_free(p->J);
    gsl_matrix_free(p->h);
    gsl_vector_free(p->d);
    gsl_vector_free(p->m0);
    gsl_matrix_free(p->y);
    free(p->obs);
    free(p->seq);
}

static lse_kalman_model model_of(const prob *p)
{
    lse_kalman_model m = {p->A, p->b, p->Q, p->C, p->d,
                          p->R, p->m0, p->P0, p->J, p->h};
    return m;
}

static double pget(const gsl_matrix *a, size_t t, size_t i, size_t j,
                   size_t D)
{
    const size_t r = a->size1 == 1 ? 0 : t;
    return gsl_matrix_get(a, r, i * D + j);
}

/* Dense reference. Conditions on the observations of rows < upto only.
 * Fills ll (log of the integral), mean (T, D) and cov (T*D, T*D). */
static void dense(const prob *p, size_t upto, double *ll, gsl_matrix *mean,
                  gsl_matrix *cov)
{
    const size_t T = p->T, D = p->D, N = p->N, n = T * D;
    gsl_vector *mu = gsl_vector_calloc(n);
    gsl_matrix *S = gsl_matrix_calloc(n, n);
    for (size_t t = 0; t < T; t++) {
        const int start = t == 0 || (p->seq && p->seq[t] != p->seq[t - 1]);
        for (size_t i = 0; i < D; i++) {
            if (start) {
                gsl_vector_set(mu, t * D + i, gsl_vector_get(p->m0, i));
                for (size_t j = 0; j < D; j++)
                    gsl_matrix_set(S, t * D + i, t * D + j,
                                   gsl_matrix_get(p->P0, i, j));
                continue;
            }
            double s = gsl_matrix_get(p->b, p->b->size1 == 1 ? 0 : t, i);
            for (size_t j = 0; j < D; j++)
                s += pget(p->A, t, i, j, D) *
                     gsl_vector_get(mu, (t - 1) * D + j);
            gsl_vector_set(mu, t * D + i, s);
        }
        if (start)
            continue;
        /* Cov(x_t, x_s) = A_t Cov(x_{t-1}, x_s) for s < t */
        for (size_t s = 0; s < t * D; s++)
            for (size_t i = 0; i < D; i++) {
                double v = 0.0;
                for (size_t j = 0; j < D; j++)
                    v += pget(p->A, t, i, j, D) *
                         gsl_matrix_get(S, (t - 1) * D + j, s);
                gsl_matrix_set(S, t * D + i, s, v);
                gsl_matrix_set(S, s, t * D + i, v);
            }
        for (size_t i = 0; i < D; i++)
            for (size_t k = 0; k < D; k++) {
                double v = pget(p->Q, t, i, k, D);
                for (size_t j = 0; j < D; j++)
                    v += pget(p->A, t, i, j, D) *
                         gsl_matrix_get(S, (t - 1) * D + j, t * D + k);
                gsl_matrix_set(S, t * D + i, t * D + k, v);
            }
    }
    /* observation rows: (H, c, z, noise) */
    size_t m = 0;
    for (size_t t = 0; t < upto; t++)
        for (size_t i = 0; i < N; i++)
            m += p->obs == NULL || p->obs[t * N + i];
    if (p->J)
        m += upto * D;
    gsl_matrix *H = gsl_matrix_calloc(m, n);
    gsl_vector *z = gsl_vector_calloc(m);
    gsl_matrix *Rn = gsl_matrix_calloc(m, m);
    double cst = 0.0;
    size_t row = 0;
    for (size_t t = 0; t < upto; t++) {
        const size_t r0 = row;
        size_t idx[64];
        size_t k = 0;
        for (size_t i = 0; i < N; i++)
            if (p->obs == NULL || p->obs[t * N + i])
                idx[k++] = i;
        for (size_t a = 0; a < k; a++) {
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(H, row, t * D + j,
                               gsl_matrix_get(p->C, idx[a], j));
            gsl_vector_set(z, row,
                           gsl_matrix_get(p->y, t, idx[a]) -
                               gsl_vector_get(p->d, idx[a]));
            for (size_t c = 0; c < k; c++)
                gsl_matrix_set(Rn, row, r0 + c,
                               gsl_matrix_get(p->R, idx[a], idx[c]));
            row++;
        }
        if (p->J) {
            /* exp(-x'Jx/2 + h'x) = N(u; L'x, I) (2 pi)^{D/2} e^{u'u/2},
             * J = L L', L u = h */
            gsl_matrix *L = gsl_matrix_alloc(D, D);
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    gsl_matrix_set(L, i, j, gsl_matrix_get(p->J, t, i * D + j));
            gsl_linalg_cholesky_decomp1(L);
            gsl_vector *u = gsl_vector_alloc(D);
            for (size_t i = 0; i < D; i++)
                gsl_vector_set(u, i, gsl_matrix_get(p->h, t, i));
            gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, L, u);
            double uu;
            gsl_blas_ddot(u, u, &uu);
            cst += 0.5 * (double)D * LOG_2PI + 0.5 * uu;
            for (size_t i = 0; i < D; i++) {
                for (size_t j = i; j < D; j++) /* row i of L' */
                    gsl_matrix_set(H, row, t * D + j, gsl_matrix_get(L, j, i));
                gsl_vector_set(z, row, gsl_vector_get(u, i));
                gsl_matrix_set(Rn, row, row, 1.0);
                row++;
            }
            gsl_matrix_free(L);
            gsl_vector_free(u);
        }
    }
    ck_assert_uint_eq(row, m);
    gsl_matrix_memcpy(cov, S);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < D; i++)
            gsl_matrix_set(mean, t, i, gsl_vector_get(mu, t * D + i));
    *ll = cst;
    if (m > 0) {
        gsl_matrix *SH = gsl_matrix_alloc(n, m); /* S H' */
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, S, H, 0.0, SH);
        gsl_matrix *Szz = gsl_matrix_alloc(m, m);
        gsl_matrix_memcpy(Szz, Rn);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, H, SH, 1.0, Szz);
        gsl_vector *res = gsl_vector_alloc(m);
        gsl_vector_memcpy(res, z);
        gsl_blas_dgemv(CblasNoTrans, -1.0, H, mu, 1.0, res);
        lse_assert_ok(lse_status_from_gsl(gsl_linalg_cholesky_decomp1(Szz)));
        double logdet = 0.0;
        for (size_t i = 0; i < m; i++)
            logdet += 2.0 * log(gsl_matrix_get(Szz, i, i));
        gsl_vector *w = gsl_vector_alloc(m);
        gsl_vector_memcpy(w, res);
        gsl_linalg_cholesky_svx(Szz, w); /* Szz^-1 res */
        double q;
        gsl_blas_ddot(res, w, &q);
        *ll += -0.5 * ((double)m * LOG_2PI + logdet + q);
        gsl_vector *dm = gsl_vector_alloc(n);
        gsl_blas_dgemv(CblasNoTrans, 1.0, SH, w, 0.0, dm);
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < D; i++)
                gsl_matrix_set(mean, t, i,
                               gsl_matrix_get(mean, t, i) +
                                   gsl_vector_get(dm, t * D + i));
        /* cov -= SH Szz^-1 SH' */
        gsl_matrix *X = gsl_matrix_alloc(n, m);
        gsl_matrix_memcpy(X, SH);
        gsl_blas_dtrsm(CblasRight, CblasLower, CblasTrans, CblasNonUnit, 1.0,
                       Szz, X); /* SH L^-T */
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, X, X, 1.0, cov);
        gsl_matrix_free(X);
        gsl_vector_free(dm);
        gsl_vector_free(w);
        gsl_vector_free(res);
        gsl_matrix_free(Szz);
        gsl_matrix_free(SH);
    }
    gsl_matrix_free(H);
    gsl_vector_free(z);
    gsl_matrix_free(Rn);
    gsl_vector_free(mu);
    gsl_matrix_free(S);
}

/* max |a - b| over max(|b|) (normwise relative) */
static double relerr(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return num / fmax(den, 1e-300);
}

static void check_prob(const prob *p)
{
    const size_t T = p->T, D = p->D, DD = D * D;
    lse_kalman_model km = model_of(p);
    lse_kalman_result r = {gsl_matrix_alloc(T, D), gsl_matrix_alloc(T, DD),
                           gsl_matrix_alloc(T, D), gsl_matrix_alloc(T, DD),
                           gsl_matrix_alloc(T, DD)};
    double ll = NAN, ll_only = NAN;
    lse_error err;
    lse_assert_ok(lse_kalman_smooth(&km, p->y, p->obs, p->seq, &ll, &r, &err));
    lse_assert_ok(
        lse_kalman_smooth(&km, p->y, p->obs, p->seq, &ll_only, NULL, &err));
    ck_assert(ll == ll_only);
    gsl_matrix *mean = gsl_matrix_alloc(T, D);
    gsl_matrix *cov = gsl_matrix_alloc(T * D, T * D);
    double ll_ref;
    dense(p, T, &ll_ref, mean, cov);
    ck_assert_msg(fabs(ll - ll_ref) <= 1e-9 * fabs(ll_ref), "ll %.17g ref %.17g",
                  ll, ll_ref);
    ck_assert_msg(relerr(r.mean->data, mean->data, T * D) < 1e-9, "mean %g",
                  relerr(r.mean->data, mean->data, T * D));
    gsl_matrix *blk = gsl_matrix_alloc(T, DD), *crs = gsl_matrix_calloc(T, DD);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++) {
                gsl_matrix_set(blk, t, i * D + j,
                               gsl_matrix_get(cov, t * D + i, t * D + j));
                const int start =
                    t == 0 || (p->seq && p->seq[t] != p->seq[t - 1]);
                if (!start)
                    gsl_matrix_set(
                        crs, t, i * D + j,
                        gsl_matrix_get(cov, t * D + i, (t - 1) * D + j));
            }
    ck_assert_msg(relerr(r.cov->data, blk->data, T * DD) < 1e-9, "cov %g",
                  relerr(r.cov->data, blk->data, T * DD));
    ck_assert_msg(relerr(r.cross->data, crs->data, T * DD) < 1e-9, "cross %g",
                  relerr(r.cross->data, crs->data, T * DD));
    /* sequences are independent: cross blocks between them vanish in the
     * dense reference too */
    if (p->seq)
        for (size_t t = 1; t < T; t++)
            if (p->seq[t] != p->seq[t - 1])
                ck_assert(gsl_matrix_get(cov, t * D, (t - 1) * D) == 0.0);
    /* filtered moments: condition on rows 0..t only */
    for (size_t t = 0; t < T; t++) {
        double llt;
        dense(p, t + 1, &llt, mean, cov);
        gsl_vector_view fm = gsl_matrix_row(r.filt_mean, t);
        gsl_vector_view rm = gsl_matrix_row(mean, t);
        ck_assert_msg(relerr(fm.vector.data, rm.vector.data, D) < 1e-9,
                      "filt mean t=%zu %g", t,
                      relerr(fm.vector.data, rm.vector.data, D));
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(blk, 0, i * D + j,
                               gsl_matrix_get(cov, t * D + i, t * D + j));
        gsl_vector_view fc = gsl_matrix_row(r.filt_cov, t);
        ck_assert_msg(relerr(fc.vector.data, blk->data, DD) < 1e-9,
                      "filt cov t=%zu", t);
    }
    gsl_matrix_free(blk);
    gsl_matrix_free(crs);
    gsl_matrix_free(mean);
    gsl_matrix_free(cov);
    gsl_matrix_free(r.filt_mean);
    gsl_matrix_free(r.filt_cov);
    gsl_matrix_free(r.mean);
    gsl_matrix_free(r.cov);
    gsl_matrix_free(r.cross);
}

START_TEST(test_time_invariant)
{
    prob p = make(1, 7, 2, 3, 0, 0, 0, 1);
    check_prob(&p);
    prob_free(&p);
    prob q = make(2, 9, 1, 4, 0, 0, 0, 1); /* D = 1 < N */
    check_prob(&q);
    prob_free(&q);
    prob s = make(3, 6, 4, 2, 0, 0, 0, 1); /* D > N */
    check_prob(&s);
    prob_free(&s);
}
END_TEST

START_TEST(test_time_varying_missing_sequences)
{
    prob p = make(4, 8, 3, 2, 1, 0, 1, 2);
    check_prob(&p);
    prob_free(&p);
    prob q = make(5, 10, 2, 3, 1, 0, 1, 3);
    check_prob(&q);
    prob_free(&q);
}
END_TEST

START_TEST(test_potentials)
{
    prob p = make(6, 7, 2, 3, 1, 1, 1, 2);
    check_prob(&p);
    prob_free(&p);
    prob q = make(7, 6, 3, 1, 0, 1, 0, 1);
    check_prob(&q);
    prob_free(&q);
}
END_TEST

/* h alone (J = 0) and J alone: the dense reference needs J > 0, so check
 * h alone by its closed form on the prior: log E[exp(h'x)] for one row. */
START_TEST(test_linear_potential)
{
    prob p = make(8, 1, 2, 2, 0, 1, 0, 1);
    gsl_matrix_free(p.J);
    p.J = NULL;
    lse_kalman_model km = model_of(&p);
    unsigned char none[2] = {0, 0};
    double ll;
    gsl_matrix *mean = gsl_matrix_alloc(1, 2);
    lse_kalman_result r = {NULL, NULL, mean, NULL, NULL};
    lse_assert_ok(lse_kalman_smooth(&km, p.y, none, NULL, &ll, &r, NULL));
    /* log E exp(h'x) = h'm0 + h'P0h/2; mean m0 + P0 h */
    double hm = 0, hPh = 0;
    for (size_t i = 0; i < 2; i++) {
        double Ph = 0;
        for (size_t j = 0; j < 2; j++)
            Ph += gsl_matrix_get(p.P0, i, j) * gsl_matrix_get(p.h, 0, j);
        hm += gsl_matrix_get(p.h, 0, i) * gsl_vector_get(p.m0, i);
        hPh += gsl_matrix_get(p.h, 0, i) * Ph;
        ck_assert(fabs(gsl_matrix_get(mean, 0, i) -
                       (gsl_vector_get(p.m0, i) + Ph)) < 1e-12);
    }
    ck_assert(fabs(ll - (hm + 0.5 * hPh)) < 1e-12);
    gsl_matrix_free(mean);
    prob_free(&p);
}
END_TEST

START_TEST(test_errors)
{
    prob p = make(9, 5, 2, 3, 0, 0, 1, 1);
    lse_kalman_model km = model_of(&p);
    double ll;
    lse_error err;
    lse_assert_status(lse_kalman_smooth(NULL, p.y, NULL, NULL, &ll, NULL, &err),
                      LSE_EFAULT);
    /* masked NaN is fine, the same NaN observed is not */
    lse_assert_ok(lse_kalman_smooth(&km, p.y, p.obs, NULL, &ll, NULL, &err));
    lse_assert_status(lse_kalman_smooth(&km, p.y, NULL, NULL, &ll, NULL, &err),
                      LSE_ENONFINITE);
    ck_assert(strstr(err.message, "column") != NULL);
    gsl_matrix *y2 = gsl_matrix_alloc(5, 2);
    lse_assert_status(lse_kalman_smooth(&km, y2, NULL, NULL, &ll, NULL, &err),
                      LSE_EDIM);
    gsl_matrix_free(y2);
    gsl_matrix *bad = gsl_matrix_alloc(3, 2);
    lse_kalman_result r = {NULL, NULL, bad, NULL, NULL};
    lse_assert_status(lse_kalman_smooth(&km, p.y, p.obs, NULL, &ll, &r, &err),
                      LSE_EDIM);
    gsl_matrix_free(bad);
    gsl_matrix_set(p.R, 0, 0, -1.0);
    lse_assert_status(lse_kalman_smooth(&km, p.y, p.obs, NULL, &ll, NULL, &err),
                      LSE_ENUMERIC);
    gsl_matrix_set(p.R, 0, 0, 1.0);
    gsl_matrix_set(p.A, 0, 0, NAN);
    lse_assert_status(lse_kalman_smooth(&km, p.y, p.obs, NULL, &ll, NULL, &err),
                      LSE_ENONFINITE);
    prob_free(&p);
}
END_TEST

/* T x D x D moments that size_t cannot count: LSE_ENOMEM with a message,
 * before any allocation or any read of the (described, unallocated)
 * observations */
START_TEST(test_size_overflow)
{
    double one = 1.0;
    const size_t T = SIZE_MAX / 64;
    const gsl_matrix y = {.size1 = T, .size2 = 1, .tda = 1, .data = &one,
                          .block = NULL, .owner = 0};
    const gsl_matrix C = {.size1 = 1, .size2 = 2, .tda = 2, .data = &one,
                          .block = NULL, .owner = 0};
    const gsl_matrix sq = {.size1 = 1, .size2 = 4, .tda = 4, .data = &one,
                           .block = NULL, .owner = 0};
    const gsl_vector v = {.size = 2, .stride = 1, .data = &one, .block = NULL,
                          .owner = 0};
    const lse_kalman_model m = {.A = &sq, .Q = &sq, .C = &C, .R = &C,
                                .m0 = &v, .P0 = &sq};
    lse_error err;
    lse_assert_status(lse_kalman_smooth(&m, &y, NULL, NULL, NULL, NULL, &err),
                      LSE_ENOMEM);
    char want[64];
    snprintf(want, sizeof want, "T = %zu", T);
    ck_assert_msg(strstr(err.message, "lse_kalman_smooth") != NULL &&
                      strstr(err.message, want) != NULL,
                  "%s", err.message);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("kalman");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_time_invariant);
    tcase_add_test(tc, test_time_varying_missing_sequences);
    tcase_add_test(tc, test_potentials);
    tcase_add_test(tc, test_linear_potential);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_size_overflow);
    suite_add_tcase(s, tc);
    return s;
}
