#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

/* Latent SLDS with several lags (models/lslds_lags.c, docs/models/slds.md
 * "Several lags"): x_t ~ N(m0, P0) at the first L rows of a sequence,
 * x_t = sum_l A_{z_t,l} x_{t-l} + b_{z_t} + N(0, Q_{z_t}) after them. */

#define LOG_2PI 1.8378770664093454836

/* ------------------------------------------------------------------ */
/* The reference: a textbook covariance-form Kalman filter and RTS
 * smoother on the stacked state s_t = [x_t; ...; x_{t-L+1}] (process
 * noise only in the first block: singular, which the covariance form
 * takes as it is), observed entries processed one scalar at a time. Its
 * first step is the row t = start + L - 1, where s holds the L head rows
 * with prior N([m0; ...; m0], blockdiag(P0)) and all of them are
 * observed. Mode path z (NULL: mode 0). Returns log p(y | z); mean, cov
 * and lagcov (may be NULL) get the smoothed moments in the layout of
 * lse_lslds_post. */

typedef struct refseq {
    size_t S, n;
    gsl_matrix **F;    /* per step (step 0 unused) */
    gsl_vector **mf, **mp, **ms;
    gsl_matrix **Pf, **Pp, **Ps;
} refseq;

static void ref_transition(const lse_lslds_params *p, size_t k, gsl_matrix *F,
                           gsl_vector *off, gsl_matrix *Qs)
{
    const size_t D = p->D, S = p->lags * D;
    gsl_matrix_set_zero(F);
    gsl_vector_set_zero(off);
    gsl_matrix_set_zero(Qs);
    for (size_t i = 0; i < D; i++) {
        for (size_t j = 0; j < S; j++)
            gsl_matrix_set(F, i, j, gsl_matrix_get(p->A, k, i * S + j));
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(Qs, i, j, gsl_matrix_get(p->Q, k, i * D + j));
        gsl_vector_set(off, i, gsl_matrix_get(p->b, k, i));
    }
    for (size_t i = D; i < S; i++)
        gsl_matrix_set(F, i, i - D, 1.0);
}

/* the observed entries of y row t, seen through block j of s */
static double ref_observe(const lse_lslds_params *p, const gsl_matrix *y,
                          const unsigned char *obs, size_t t, size_t k,
                          size_t j, gsl_vector *m, gsl_matrix *P)
{
    const size_t D = p->D, N = p->N, S = m->size;
    gsl_vector *h = gsl_vector_alloc(S), *Ph = gsl_vector_alloc(S);
    double ll = 0.0;
    for (size_t i = 0; i < N; i++) {
        if (obs != NULL && !obs[t * N + i])
            continue;
        const size_t ik = (p->per_mode_emission ? k * N : 0) + i;
        gsl_vector_set_zero(h);
        for (size_t a = 0; a < D; a++)
            gsl_vector_set(h, j * D + a, gsl_matrix_get(p->C, ik, a));
        double hm;
        gsl_blas_ddot(h, m, &hm);
        const double v = gsl_matrix_get(y, t, i) - gsl_vector_get(p->d, ik) - hm;
        gsl_blas_dgemv(CblasNoTrans, 1.0, P, h, 0.0, Ph);
        double s;
        gsl_blas_ddot(h, Ph, &s);
        s += gsl_vector_get(p->r, ik);
        ll += -0.5 * (LOG_2PI + log(s) + v * v / s);
        gsl_blas_daxpy(v / s, Ph, m);
        gsl_blas_dger(-1.0 / s, Ph, Ph, P);
    }
    gsl_vector_free(h);
    gsl_vector_free(Ph);
    return ll;
}

static double ref_sequence(const lse_lslds_params *p, const gsl_matrix *y,
                           const unsigned char *obs, size_t ts, size_t te,
                           const size_t *z, refseq *r)
{
    const size_t D = p->D, L = p->lags, S = L * D, n = te - ts + 2 - L;
    r->S = S;
    r->n = n;
    r->F = calloc(n, sizeof *r->F);
    r->mf = calloc(n, sizeof *r->mf);
    r->mp = calloc(n, sizeof *r->mp);
    r->ms = calloc(n, sizeof *r->ms);
    r->Pf = calloc(n, sizeof *r->Pf);
    r->Pp = calloc(n, sizeof *r->Pp);
    r->Ps = calloc(n, sizeof *r->Ps);
    gsl_vector *off = gsl_vector_alloc(S);
    gsl_matrix *Qs = gsl_matrix_alloc(S, S), *FP = gsl_matrix_alloc(S, S);
    double ll = 0.0;
    for (size_t k = 0; k < n; k++) {
        const size_t t = ts + L - 1 + k;
        r->F[k] = gsl_matrix_alloc(S, S);
        r->mf[k] = gsl_vector_alloc(S);
        r->mp[k] = gsl_vector_alloc(S);
        r->ms[k] = gsl_vector_alloc(S);
        r->Pf[k] = gsl_matrix_alloc(S, S);
        r->Pp[k] = gsl_matrix_alloc(S, S);
        r->Ps[k] = gsl_matrix_alloc(S, S);
        if (k == 0) {
            gsl_matrix_set_zero(r->Pp[0]);
            for (size_t j = 0; j < L; j++)
                for (size_t a = 0; a < D; a++) {
                    gsl_vector_set(r->mp[0], j * D + a, gsl_vector_get(p->m0, a));
                    for (size_t b = 0; b < D; b++)
                        gsl_matrix_set(r->Pp[0], j * D + a, j * D + b,
                                       gsl_matrix_get(p->P0, a, b));
                }
        } else {
            ref_transition(p, z ? z[t] : 0, r->F[k], off, Qs);
            gsl_vector_memcpy(r->mp[k], off);
            gsl_blas_dgemv(CblasNoTrans, 1.0, r->F[k], r->mf[k - 1], 1.0,
                           r->mp[k]);
            gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, r->F[k],
                           r->Pf[k - 1], 0.0, FP);
            gsl_matrix_memcpy(r->Pp[k], Qs);
            gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, FP, r->F[k], 1.0,
                           r->Pp[k]);
        }
        gsl_vector_memcpy(r->mf[k], r->mp[k]);
        gsl_matrix_memcpy(r->Pf[k], r->Pp[k]);
        for (size_t j = 0; j < (k == 0 ? L : 1); j++)
            ll += ref_observe(p, y, obs, t - j, z ? z[t - j] : 0, j, r->mf[k],
                              r->Pf[k]);
    }
    gsl_vector_free(off);
    gsl_matrix_free(Qs);
    gsl_matrix_free(FP);
    return ll;
}

/* RTS: ms, Ps, and Cov(s_k, s_{k-1}) into X[k] (k >= 1) */
static void ref_rts(refseq *r, gsl_matrix **X)
{
    const size_t S = r->S, n = r->n;
    gsl_matrix *G = gsl_matrix_alloc(S, S), *Li = gsl_matrix_alloc(S, S);
    gsl_matrix *Dm = gsl_matrix_alloc(S, S), *Tm = gsl_matrix_alloc(S, S);
    gsl_vector *dv = gsl_vector_alloc(S);
    gsl_vector_memcpy(r->ms[n - 1], r->mf[n - 1]);
    gsl_matrix_memcpy(r->Ps[n - 1], r->Pf[n - 1]);
    for (size_t k = n - 1; k-- > 0;) {
        /* G = Pf F' Pp^-1 */
        gsl_matrix_memcpy(Li, r->Pp[k + 1]);
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(Li), 0);
        gsl_linalg_cholesky_invert(Li);
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, r->Pf[k], r->F[k + 1],
                       0.0, Tm);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, Tm, Li, 0.0, G);
        gsl_vector_memcpy(dv, r->ms[k + 1]);
        gsl_vector_sub(dv, r->mp[k + 1]);
        gsl_vector_memcpy(r->ms[k], r->mf[k]);
        gsl_blas_dgemv(CblasNoTrans, 1.0, G, dv, 1.0, r->ms[k]);
        gsl_matrix_memcpy(Dm, r->Ps[k + 1]);
        gsl_matrix_sub(Dm, r->Pp[k + 1]);
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, Dm, G, 0.0, Tm);
        gsl_matrix_memcpy(r->Ps[k], r->Pf[k]);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, G, Tm, 1.0, r->Ps[k]);
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, r->Ps[k + 1], G, 0.0,
                       X[k + 1]);
    }
    gsl_matrix_free(G);
    gsl_matrix_free(Li);
    gsl_matrix_free(Dm);
    gsl_matrix_free(Tm);
    gsl_vector_free(dv);
}

static void refseq_free(refseq *r)
{
    for (size_t k = 0; k < r->n; k++) {
        gsl_matrix_free(r->F[k]);
        gsl_vector_free(r->mf[k]);
        gsl_vector_free(r->mp[k]);
        gsl_vector_free(r->ms[k]);
        gsl_matrix_free(r->Pf[k]);
        gsl_matrix_free(r->Pp[k]);
        gsl_matrix_free(r->Ps[k]);
    }
    free(r->F);
    free(r->mf);
    free(r->mp);
    free(r->ms);
    free(r->Pf);
    free(r->Pp);
    free(r->Ps);
}

/* the smoothed moments of one sequence in the layout of lse_lslds_post */
static void ref_extract(const refseq *r, size_t ts, size_t D, size_t L,
                        gsl_matrix **X, gsl_matrix *mean, gsl_matrix *cov,
                        gsl_matrix *lagcov)
{
    const size_t DD = D * D;
    for (size_t k = 0; k < r->n; k++) {
        /* block j of step k is row t - j; step 0 gives the head rows */
        for (size_t j = 0; j < (k == 0 ? L : 1); j++) {
            const size_t t = ts + L - 1 + k - j;
            for (size_t a = 0; a < D; a++) {
                gsl_matrix_set(mean, t, a, gsl_vector_get(r->ms[k], j * D + a));
                for (size_t b = 0; b < D; b++) {
                    gsl_matrix_set(cov, t, a * D + b,
                                   gsl_matrix_get(r->Ps[k], j * D + a,
                                                  j * D + b));
                    for (size_t l = 1; l <= L; l++) {
                        double c = 0.0;
                        if (j + l < L)
                            c = gsl_matrix_get(r->Ps[k], j * D + a,
                                               (j + l) * D + b);
                        else if (k > 0 && l == L && j == 0)
                            c = gsl_matrix_get(X[k], a, (L - 1) * D + b);
                        if (lagcov != NULL)
                            gsl_matrix_set(lagcov, t, (l - 1) * DD + a * D + b,
                                           c);
                    }
                }
            }
        }
    }
}

static double ref_kalman(const lse_lslds_params *p, const gsl_matrix *y,
                         const unsigned char *obs, const size_t *seq,
                         const size_t *z, gsl_matrix *mean, gsl_matrix *cov,
                         gsl_matrix *lagcov)
{
    const size_t T = y->size1, S = p->lags * p->D;
    double ll = 0.0;
    size_t ts = 0;
    for (size_t t = 0; t < T; t++) {
        if (t + 1 < T && (seq == NULL || seq[t + 1] == seq[t]))
            continue;
        refseq r;
        ll += ref_sequence(p, y, obs, ts, t, z, &r);
        if (mean != NULL) {
            gsl_matrix **X = calloc(r.n, sizeof *X);
            for (size_t k = 0; k < r.n; k++)
                X[k] = gsl_matrix_calloc(S, S);
            ref_rts(&r, X);
            ref_extract(&r, ts, p->D, p->lags, X, mean, cov, lagcov);
            for (size_t k = 0; k < r.n; k++)
                gsl_matrix_free(X[k]);
            free(X);
        }
        refseq_free(&r);
        ts = t + 1;
    }
    return ll;
}

/* ------------------------------------------------------------------ */
/* Models                                                              */

/* K modes, D = 2, N columns, L lags: mode k rotates slowly (k = 0) or
 * fast with a damped second lag. */
static lse_lslds_params *model(size_t K, size_t N, size_t L, int markov)
{
    const size_t D = 2, P = L * D;
    lse_lslds_params *p = NULL;
    lse_assert_ok(lse_lslds_params_new(K, D, N, markov, &p, NULL));
    lse_assert_ok(lse_lslds_params_set_lags(p, L, NULL));
    for (size_t k = 0; k < K; k++) {
        const double ang = 0.15 + 0.4 * (double)k, rad = 0.75 - 0.1 * (double)k;
        const double c = rad * cos(ang), s = rad * sin(ang);
        gsl_matrix_set(p->A, k, 0, c);
        gsl_matrix_set(p->A, k, 1, -s);
        gsl_matrix_set(p->A, k, P, s);
        gsl_matrix_set(p->A, k, P + 1, c);
        for (size_t l = 1; l < L; l++) { /* A_{k,l+1} = 0.15 (-1)^l I */
            const double v = (l % 2 ? -0.15 : 0.1) / (double)l;
            gsl_matrix_set(p->A, k, l * D, v);
            gsl_matrix_set(p->A, k, P + l * D + 1, v);
        }
        gsl_matrix_set(p->b, k, 0, k ? 0.3 : -0.2);
        gsl_matrix_set(p->b, k, 1, 0.1);
        const double qv[4] = {0.05, 0.01, 0.01, 0.04 + 0.02 * (double)k};
        memcpy(p->Q->data + k * p->Q->tda, qv, sizeof qv);
    }
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 17);
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(p->C, i, j, 2.0 * gsl_rng_uniform(r) - 1.0);
        gsl_vector_set(p->d, i, gsl_rng_uniform(r));
        gsl_vector_set(p->r, i, 0.05 + 0.05 * gsl_rng_uniform(r));
    }
    gsl_rng_free(r);
    gsl_vector_set(p->m0, 0, 0.3);
    gsl_vector_set(p->m0, 1, -0.2);
    const double P0[4] = {0.8, 0.1, 0.1, 0.6};
    memcpy(p->P0->data, P0, sizeof P0);
    for (size_t k = 0; k < K; k++) {
        gsl_vector_set(p->init, k, 1.0 / (double)K);
        for (size_t j = 0; j < K; j++)
            gsl_matrix_set(p->trans, k, j,
                           j == k ? 0.95 : 0.05 / (double)(K > 1 ? K - 1 : 1));
    }
    if (K == 1)
        gsl_matrix_set(p->trans, 0, 0, 1.0);
    return p;
}

/* T rows of a simulated series: two sequences (split at T/2 - 3), every
 * cell (i * 7) % 5 == 0 missing. */
static gsl_matrix *series(const lse_lslds_params *p, size_t T,
                          unsigned long seed, unsigned char **obs,
                          size_t **seq)
{
    gsl_matrix *y = gsl_matrix_alloc(T, p->N);
    const size_t T1 = T / 2 - 3;
    gsl_matrix_view a = gsl_matrix_submatrix(y, 0, 0, T1, p->N);
    gsl_matrix_view b = gsl_matrix_submatrix(y, T1, 0, T - T1, p->N);
    lse_assert_ok(lse_lslds_simulate(p, seed, &a.matrix, NULL, NULL, NULL));
    lse_assert_ok(lse_lslds_simulate(p, seed + 1, &b.matrix, NULL, NULL, NULL));
    *obs = malloc(T * p->N);
    *seq = malloc(T * sizeof(size_t));
    for (size_t i = 0; i < T * p->N; i++)
        (*obs)[i] = (i * 7) % 5 != 0;
    for (size_t t = 0; t < T; t++)
        (*seq)[t] = t < T1 ? 0 : 1;
    return y;
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */

/* K = 1: a linear-Gaussian state-space model. ELBO and log Z of q(x) =
 * the exact log-likelihood; means, covariances and lag covariances =
 * the stacked-state RTS smoother (1e-9), L = 2 and 3, two sequences,
 * missing entries. */
START_TEST(test_k1_equals_stacked_kalman)
{
    for (size_t L = 2; L <= 3; L++) {
        lse_lslds_params *p = model(1, 3, L, 1);
        const size_t T = 50, D = 2, DD = 4;
        unsigned char *obs;
        size_t *seq;
        gsl_matrix *y = series(p, T, 5, &obs, &seq);
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, 1, D, &q, NULL));
        double logzx, elbo;
        lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, &logzx, NULL));
        ck_assert_uint_eq(q->lags, L);
        ck_assert_ptr_nonnull(q->lagcov);
        lse_assert_ok(lse_lslds_update_z(p, seq, q, NULL));
        lse_assert_ok(lse_lslds_elbo(p, y, obs, seq, q, &elbo, NULL));
        gsl_matrix *mean = gsl_matrix_calloc(T, D), *cov = gsl_matrix_calloc(T, DD);
        gsl_matrix *lc = gsl_matrix_calloc(T, L * DD);
        const double ll = ref_kalman(p, y, obs, seq, NULL, mean, cov, lc);
        ck_assert_msg(fabs(elbo - ll) <= 1e-9 * fabs(ll), "L %zu elbo %.17g ll %.17g",
                      L, elbo, ll);
        ck_assert_msg(fabs(logzx - ll) <= 1e-9 * fabs(ll), "logzx %.17g ll %.17g",
                      logzx, ll);
        for (size_t t = 0; t < T; t++) {
            for (size_t i = 0; i < D; i++)
                ck_assert_double_eq_tol(gsl_matrix_get(q->mean, t, i),
                                        gsl_matrix_get(mean, t, i), 1e-9);
            for (size_t i = 0; i < DD; i++) {
                ck_assert_double_eq_tol(gsl_matrix_get(q->cov, t, i),
                                        gsl_matrix_get(cov, t, i), 1e-9);
                ck_assert_double_eq_tol(gsl_matrix_get(q->cross, t, i),
                                        gsl_matrix_get(lc, t, i), 1e-9);
            }
            for (size_t i = 0; i < L * DD; i++)
                ck_assert_msg(fabs(gsl_matrix_get(q->lagcov, t, i) -
                                   gsl_matrix_get(lc, t, i)) <= 1e-9,
                              "L %zu row %zu lagcov[%zu] %.17g ref %.17g", L, t,
                              i, gsl_matrix_get(q->lagcov, t, i),
                              gsl_matrix_get(lc, t, i));
        }
        /* the reference is not trivially zero where it matters */
        ck_assert(fabs(gsl_matrix_get(lc, 30, (L - 1) * DD)) > 1e-4);
        gsl_matrix_free(mean);
        gsl_matrix_free(cov);
        gsl_matrix_free(lc);
        gsl_matrix_free(y);
        free(obs);
        free(seq);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
    }
}
END_TEST

/* Every half-step of variational EM never lowers the ELBO with L = 2, 3
 * (Markov and mixture, missing entries, two sequences), and the fit runs
 * its own checks to the end. */
START_TEST(test_elbo_monotone)
{
    for (size_t L = 2; L <= 3; L++)
        for (int markov = 0; markov <= 1; markov++) {
            lse_lslds_params *t2 = model(2, 3, L, markov);
            const size_t T = 240;
            unsigned char *obs;
            size_t *seq;
            gsl_matrix *y = series(t2, T, 3 + L, &obs, &seq);
            lse_lslds_params *p = NULL;
            lse_assert_ok(lse_lslds_params_new(2, 2, 3, markov, &p, NULL));
            lse_assert_ok(lse_lslds_params_set_lags(p, L, NULL));
            lse_assert_ok(lse_lslds_init(p, y, obs, seq, 1, NULL));
            lse_lslds_post *q = NULL;
            lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
            lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, NULL, NULL));
            double prev = -INFINITY, e;
            for (int it = 0; it < 12; it++) {
                lse_assert_ok(lse_lslds_update_z(p, seq, q, NULL));
                lse_assert_ok(lse_lslds_elbo(p, y, obs, seq, q, &e, NULL));
                ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "z %.17g < %.17g",
                              e, prev);
                prev = e;
                lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, NULL, NULL));
                lse_assert_ok(lse_lslds_elbo(p, y, obs, seq, q, &e, NULL));
                ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "x %.17g < %.17g",
                              e, prev);
                prev = e;
                lse_assert_ok(lse_lslds_mstep(p, y, obs, seq, q, 0.0, NULL));
                lse_assert_ok(lse_lslds_elbo(p, y, obs, seq, q, &e, NULL));
                ck_assert_msg(e >= prev - 1e-9 * fabs(prev), "m %.17g < %.17g",
                              e, prev);
                prev = e;
            }
            lse_lslds_opts o = lse_lslds_opts_default();
            o.max_iter = 40;
            o.seed = 2;
            double fe;
            size_t nit;
            lse_assert_ok(lse_lslds_fit(p, y, obs, seq, &o, q, &fe, &nit, NULL));
            ck_assert(isfinite(fe) && nit >= 1);
            gsl_matrix_free(y);
            free(obs);
            free(seq);
            lse_lslds_post_free(q);
            lse_lslds_params_free(p);
            lse_lslds_params_free(t2);
        }
}
END_TEST

/* E[u v'] of rows a and b from q (cov, lagcov), the test's own reading */
static double q_second(const lse_lslds_post *q, size_t a, size_t b, size_t i,
                       size_t j)
{
    const size_t D = q->D, DD = D * D;
    double c;
    if (a == b)
        c = gsl_matrix_get(q->cov, a, i * D + j);
    else if (a > b)
        c = gsl_matrix_get(q->lagcov, a, (a - b - 1) * DD + i * D + j);
    else
        c = gsl_matrix_get(q->lagcov, b, (b - a - 1) * DD + j * D + i);
    return c + gsl_matrix_get(q->mean, a, i) * gsl_matrix_get(q->mean, b, j);
}

/* The M-step's defining property for L > 1: W_k = [A_k b_k] solves the
 * weighted normal equations W_k sum_t w_tk E[u u'] = sum_t w_tk E[x_t u']
 * (u = [x_{t-1}; ...; x_{t-L}; 1] over the rows after the first L of each
 * sequence), Q_k is the weighted mean of E[(x_t - W u)(x_t - W u)'], and
 * m0, P0 are the mean and spread over the head rows; all summed here from
 * q's moments, independently of the library's moment rows. */
START_TEST(test_mstep_normal_equations)
{
    const size_t L = 3, K = 2, D = 2, N = 3, P = L * D, U = P + 1;
    lse_lslds_params *t2 = model(K, N, L, 1);
    const size_t T = 200;
    unsigned char *obs;
    size_t *seq;
    gsl_matrix *y = series(t2, T, 21, &obs, &seq);
    lse_lslds_params *p = NULL;
    lse_assert_ok(lse_lslds_params_new(K, D, N, 1, &p, NULL));
    lse_assert_ok(lse_lslds_params_set_lags(p, L, NULL));
    lse_assert_ok(lse_lslds_init(p, y, obs, seq, 4, NULL));
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, K, D, &q, NULL));
    lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, NULL, NULL));
    lse_assert_ok(lse_lslds_update_z(p, seq, q, NULL));
    lse_assert_ok(lse_lslds_update_x(p, y, obs, seq, q, NULL, NULL));
    lse_assert_ok(lse_lslds_mstep(p, y, obs, seq, q, 0.0, NULL));
    double m0[2] = {0, 0}, nh = 0.0;
    for (size_t k = 0; k < K; k++) {
        gsl_matrix *Suu = gsl_matrix_calloc(U, U), *Sxu = gsl_matrix_calloc(D, U);
        gsl_matrix *Sr = gsl_matrix_calloc(D, D);
        double n = 0.0;
        size_t s0 = 0;
        for (size_t t = 0; t < T; t++) {
            if (t == 0 || seq[t] != seq[t - 1])
                s0 = t;
            if (t - s0 < L)
                continue;
            const double w = gsl_matrix_get(q->w, t, k);
            n += w;
            /* rows of u: row r < P is x_{t-1-r/D} entry r%D; P is 1 */
            for (size_t a = 0; a < U; a++) {
                for (size_t b = 0; b < U; b++) {
                    double v;
                    if (a == P && b == P)
                        v = 1.0;
                    else if (a == P)
                        v = gsl_matrix_get(q->mean, t - 1 - b / D, b % D);
                    else if (b == P)
                        v = gsl_matrix_get(q->mean, t - 1 - a / D, a % D);
                    else
                        v = q_second(q, t - 1 - a / D, t - 1 - b / D, a % D,
                                     b % D);
                    *gsl_matrix_ptr(Suu, a, b) += w * v;
                }
                for (size_t i = 0; i < D; i++)
                    *gsl_matrix_ptr(Sxu, i, a) +=
                        w * (a == P ? gsl_matrix_get(q->mean, t, i)
                                    : q_second(q, t, t - 1 - a / D, i, a % D));
            }
            /* E[(x - W u)(x - W u)'] with W from the M-step */
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    *gsl_matrix_ptr(Sr, i, j) += w * q_second(q, t, t, i, j);
        }
        gsl_matrix *W = gsl_matrix_alloc(D, U), *WS = gsl_matrix_alloc(D, U);
        for (size_t i = 0; i < D; i++) {
            for (size_t j = 0; j < P; j++)
                gsl_matrix_set(W, i, j, gsl_matrix_get(p->A, k, i * P + j));
            gsl_matrix_set(W, i, P, gsl_matrix_get(p->b, k, i));
        }
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, W, Suu, 0.0, WS);
        for (size_t i = 0; i < D; i++)
            for (size_t a = 0; a < U; a++)
                ck_assert_msg(fabs(gsl_matrix_get(WS, i, a) -
                                   gsl_matrix_get(Sxu, i, a)) <=
                                  1e-8 * (1.0 + fabs(gsl_matrix_get(Sxu, i, a))),
                              "mode %zu normal equation (%zu, %zu): %.17g vs "
                              "%.17g",
                              k, i, a, gsl_matrix_get(WS, i, a),
                              gsl_matrix_get(Sxu, i, a));
        /* Q n = Sxx - W Sxu' - Sxu W' + W Suu W' = Sxx - W Sxu' */
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, W, Sxu, 1.0, Sr);
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(p->Q, k, i * D + j),
                                        0.5 * (gsl_matrix_get(Sr, i, j) +
                                               gsl_matrix_get(Sr, j, i)) / n,
                                        1e-9);
        ck_assert(n > 10.0);
        gsl_matrix_free(Suu);
        gsl_matrix_free(Sxu);
        gsl_matrix_free(Sr);
        gsl_matrix_free(W);
        gsl_matrix_free(WS);
    }
    size_t s0 = 0;
    for (size_t t = 0; t < T; t++) {
        if (t == 0 || seq[t] != seq[t - 1])
            s0 = t;
        if (t - s0 < L) {
            nh += 1.0;
            for (size_t i = 0; i < D; i++)
                m0[i] += gsl_matrix_get(q->mean, t, i);
        }
    }
    ck_assert_double_eq(nh, 2.0 * (double)L);
    for (size_t i = 0; i < D; i++)
        ck_assert_double_eq_tol(gsl_vector_get(p->m0, i), m0[i] / nh, 1e-12);
    gsl_matrix_free(y);
    free(obs);
    free(seq);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
    lse_lslds_params_free(t2);
}
END_TEST

/* simulate -> fit recovers lag-2 dynamics: at D = 1 an oscillation
 * (complex roots of 1 - a1 B - a2 B^2) needs two lags; two modes (a
 * damped oscillation, a slow decay), Markov switching. */
START_TEST(test_recovery_lag2)
{
    const double a[2][2] = {{1.6, -0.9}, {0.6, 0.2}};
    lse_lslds_params *t2 = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 1, 2, 1, &t2, NULL));
    lse_assert_ok(lse_lslds_params_set_lags(t2, 2, NULL));
    for (size_t k = 0; k < 2; k++) {
        gsl_matrix_set(t2->A, k, 0, a[k][0]);
        gsl_matrix_set(t2->A, k, 1, a[k][1]);
        gsl_matrix_set(t2->b, k, 0, k ? 1.0 : 0.0);
        gsl_matrix_set(t2->Q, k, 0, k ? 0.2 : 0.1);
    }
    gsl_matrix_set(t2->C, 0, 0, 1.0);
    gsl_matrix_set(t2->C, 1, 0, 0.5);
    gsl_vector_set(t2->d, 1, 1.0);
    gsl_vector_set(t2->r, 0, 0.05);
    gsl_vector_set(t2->r, 1, 0.1);
    const double tr[4] = {0.97, 0.03, 0.05, 0.95};
    memcpy(t2->trans->data, tr, sizeof tr);
    const size_t T = 1500;
    gsl_matrix *y = gsl_matrix_alloc(T, 2), *x = gsl_matrix_alloc(T, 1);
    size_t *z = malloc(T * sizeof(size_t));
    lse_assert_ok(lse_lslds_simulate(t2, 7, y, x, z, NULL));
    /* the draw follows the recursion: residual variance ~ Q_k */
    double rs[2] = {0, 0}, rn[2] = {0, 0};
    for (size_t t = 2; t < T; t++) {
        const size_t k = z[t];
        const double e = gsl_matrix_get(x, t, 0) - a[k][0] * gsl_matrix_get(x, t - 1, 0) -
                         a[k][1] * gsl_matrix_get(x, t - 2, 0) -
                         gsl_matrix_get(t2->b, k, 0);
        rs[k] += e * e;
        rn[k] += 1.0;
    }
    ck_assert_double_eq_tol(rs[0] / rn[0], 0.1, 0.02);
    ck_assert_double_eq_tol(rs[1] / rn[1], 0.2, 0.04);
    lse_lslds_params *p = NULL, *p1 = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 1, 2, 1, &p, NULL));
    lse_assert_ok(lse_lslds_params_new(2, 1, 2, 1, &p1, NULL));
    lse_assert_ok(lse_lslds_params_set_lags(p, 2, NULL));
    lse_lslds_opts o = lse_lslds_opts_default();
    o.seed = 1;
    o.n_init = 2;
    o.max_iter = 300;
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, 2, 1, &q, NULL));
    double e2, e1;
    lse_assert_ok(lse_lslds_fit(p, y, NULL, NULL, &o, q, &e2, NULL, NULL));
    lse_assert_ok(lse_lslds_fit(p1, y, NULL, NULL, &o, NULL, &e1, NULL, NULL));
    /* A is invariant to the latent scale at D = 1: match the modes */
    const size_t osc = fabs(gsl_matrix_get(p->A, 0, 1) + 0.9) <
                               fabs(gsl_matrix_get(p->A, 1, 1) + 0.9)
                           ? 0
                           : 1;
    for (size_t k = 0; k < 2; k++) {
        const size_t j = k == 0 ? osc : 1 - osc;
        ck_assert_msg(fabs(gsl_matrix_get(p->A, j, 0) - a[k][0]) < 0.1 &&
                          fabs(gsl_matrix_get(p->A, j, 1) - a[k][1]) < 0.1,
                      "mode %zu: A = [%g %g], want [%g %g]", k,
                      gsl_matrix_get(p->A, j, 0), gsl_matrix_get(p->A, j, 1),
                      a[k][0], a[k][1]);
    }
    size_t hit = 0;
    for (size_t t = 0; t < T; t++) {
        const size_t k = gsl_matrix_get(q->w, t, 1) > gsl_matrix_get(q->w, t, 0);
        hit += (k == osc) == (z[t] == 0);
    }
    ck_assert_msg((double)hit / (double)T > 0.9, "accuracy %g",
                  (double)hit / (double)T);
    /* one lag cannot make the oscillation: far lower ELBO */
    ck_assert_msg(e2 > e1 + 50.0, "ELBO L=2 %g, L=1 %g", e2, e1);
    gsl_matrix_free(y);
    gsl_matrix_free(x);
    free(z);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
    lse_lslds_params_free(p1);
    lse_lslds_params_free(t2);
}
END_TEST

/* log p(y) by importance sampling against the sum over all 2^T mode
 * paths of p(z) p(y | z), p(y | z) from the stacked reference filter. */
START_TEST(test_log_marginal_lags)
{
    for (int pm = 0; pm <= 1; pm++) {
        lse_lslds_params *p = model(2, 2, 2, 1);
        if (pm) {
            lse_assert_ok(lse_lslds_params_emission_per_mode(p, NULL));
            gsl_vector_set(p->d, 2, -0.5); /* mode 1's d differs */
            gsl_vector_set(p->r, 3, 0.2);
        }
        const size_t T = 7, K = 2, D = 2;
        gsl_matrix *y = gsl_matrix_alloc(T, 2);
        lse_assert_ok(lse_lslds_simulate(p, 9, y, NULL, NULL, NULL));
        unsigned char obs[14];
        memset(obs, 1, sizeof obs);
        obs[5] = 0;
        double mx = -INFINITY, terms[128];
        size_t z[7];
        for (size_t code = 0; code < (1u << T); code++) {
            double lz = 0.0;
            for (size_t t = 0; t < T; t++) {
                z[t] = (code >> t) & 1;
                lz += log(t > 0 ? gsl_matrix_get(p->trans, z[t - 1], z[t])
                                : gsl_vector_get(p->init, z[t]));
            }
            terms[code] = lz + ref_kalman(p, y, obs, NULL, z, NULL, NULL, NULL);
            mx = fmax(mx, terms[code]);
        }
        double acc = 0.0;
        for (size_t code = 0; code < (1u << T); code++)
            acc += exp(terms[code] - mx);
        const double exact = mx + log(acc);
        lse_lslds_post *q = NULL;
        lse_assert_ok(lse_lslds_post_new(T, K, D, &q, NULL));
        gsl_matrix *es = gsl_matrix_alloc(T, K);
        lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        for (int it = 0; it < 10; it++) {
            lse_assert_ok(lse_lslds_emission_scores(p, y, obs, q, es, NULL));
            lse_assert_ok(lse_lslds_update_z_with(p, NULL, es, q, NULL));
            lse_assert_ok(lse_lslds_update_x(p, y, obs, NULL, q, NULL, NULL));
        }
        double elbo, est, se;
        lse_assert_ok(lse_lslds_elbo(p, y, obs, NULL, q, &elbo, NULL));
        lse_assert_ok(lse_lslds_log_marginal(p, y, obs, NULL, q, 4000, 1, &est,
                                             &se, NULL));
        ck_assert_msg(elbo <= exact + 1e-9, "elbo %g > log p(y) %g", elbo, exact);
        ck_assert_msg(se > 0.0 && se < 0.05, "se %g", se);
        ck_assert_msg(fabs(est - exact) < 4.0 * se + 1e-12,
                      "IS %.10g +- %.3g, exact %.10g (elbo %.10g)", est, se,
                      exact, elbo);
        gsl_matrix_free(es);
        gsl_matrix_free(y);
        lse_lslds_post_free(q);
        lse_lslds_params_free(p);
    }
}
END_TEST

/* Model files: "lags" and A [K][D][L D] round-trip; files without "lags"
 * load with one lag; a bad "lags" or an A of the wrong width is refused. */
START_TEST(test_file_lags)
{
    char dir[256], path[320];
    lse_tmpdir_make(dir, sizeof dir, "lslds_lags");
    snprintf(path, sizeof path, "%s/m.json", dir);
    lse_lslds_params *p = model(2, 3, 3, 1), *r = NULL;
    const char *names[3] = {"a", "b", "c"};
    lse_assert_ok(lse_lslds_save(p, names, path, NULL));
    lse_assert_ok(lse_lslds_load(path, &r, NULL, NULL));
    ck_assert_uint_eq(r->lags, 3);
    ck_assert_uint_eq(r->A->size2, 2 * 3 * 2);
    for (size_t i = 0; i < p->A->size1 * p->A->size2; i++)
        ck_assert_double_eq(r->A->data[i], p->A->data[i]);
    lse_lslds_params_free(r);
    lse_json *doc = NULL;
    lse_assert_ok(lse_json_load(path, &doc, NULL));
    lse_assert_ok(lse_json_set_integer(doc, "lags", 0, NULL));
    lse_assert_status(lse_lslds_from_json(doc, NULL, &r, NULL, NULL), LSE_EDOM);
    lse_assert_ok(lse_json_set_integer(doc, "lags", 2, NULL));
    lse_error err;
    ck_assert_int_ne(lse_lslds_from_json(doc, NULL, &r, NULL, &err), LSE_OK);
    ck_assert_ptr_null(r);
    lse_json_free(doc);
    /* one lag: no "lags" key, loads as L = 1 */
    lse_lslds_params *p1 = model(2, 3, 1, 1);
    lse_assert_ok(lse_lslds_save(p1, names, path, NULL));
    lse_assert_ok(lse_json_load(path, &doc, NULL));
    ck_assert(!lse_json_has(doc, "lags"));
    lse_json_free(doc);
    lse_assert_ok(lse_lslds_load(path, &r, NULL, NULL));
    ck_assert_uint_eq(r->lags, 1);
    ck_assert_uint_eq(r->A->size2, 4);
    lse_lslds_params_free(r);
    lse_lslds_params_free(p1);
    lse_lslds_params_free(p);
    lse_tmpdir_remove(dir);
}
END_TEST

/* set_lags keeps A_{k,1}; L = 1 leaves A as it is; bad input. */
START_TEST(test_errors_lags)
{
    lse_lslds_params *p = model(2, 3, 1, 1);
    gsl_matrix *A1 = gsl_matrix_alloc(2, 4);
    gsl_matrix_memcpy(A1, p->A);
    lse_assert_ok(lse_lslds_params_set_lags(p, 1, NULL));
    ck_assert_ptr_nonnull(p->A);
    lse_assert_ok(lse_lslds_params_set_lags(p, 3, NULL));
    ck_assert_uint_eq(p->A->size2, 12);
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 6; j++)
                ck_assert_double_eq(gsl_matrix_get(p->A, k, i * 6 + j),
                                    j < 2 ? gsl_matrix_get(A1, k, i * 2 + j) : 0.0);
    lse_assert_ok(lse_lslds_params_set_lags(p, 1, NULL));
    for (size_t i = 0; i < 8; i++)
        ck_assert_double_eq(p->A->data[i], A1->data[i]);
    lse_error err;
    lse_assert_status(lse_lslds_params_set_lags(p, 0, &err), LSE_EINVAL);
    lse_assert_status(lse_lslds_params_set_lags(p, 65, &err), LSE_EINVAL);
    lse_assert_status(lse_lslds_params_set_lags(NULL, 2, &err), LSE_EFAULT);
    /* a sequence of L rows or fewer */
    lse_assert_ok(lse_lslds_params_set_lags(p, 3, NULL));
    const size_t T = 10;
    size_t seq[10] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    gsl_matrix *y = gsl_matrix_calloc(T, 3);
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_post_new(T, 2, 2, &q, NULL));
    lse_assert_status(lse_lslds_update_x(p, y, NULL, seq, q, NULL, &err),
                      LSE_EINVAL);
    ck_assert_msg(strstr(err.message, "rows 8..10 has 3 rows") != NULL, "%s",
                  err.message);
    lse_assert_status(lse_lslds_fit(p, y, NULL, seq, NULL, NULL, NULL, NULL, &err),
                      LSE_EINVAL);
    /* q of another L */
    lse_assert_ok(lse_lslds_params_set_lags(p, 2, NULL));
    lse_assert_ok(lse_lslds_update_x(p, y, NULL, seq, q, NULL, NULL));
    lse_assert_ok(lse_lslds_params_set_lags(p, 3, NULL));
    double e;
    lse_assert_status(lse_lslds_update_z(p, NULL, q, &err), LSE_EINVAL);
    lse_assert_status(lse_lslds_elbo(p, y, NULL, NULL, q, &e, &err), LSE_EINVAL);
    gsl_matrix_free(A1);
    gsl_matrix_free(y);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("lslds_lags");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_k1_equals_stacked_kalman);
    tcase_add_test(tc, test_elbo_monotone);
    tcase_add_test(tc, test_mstep_normal_equations);
    tcase_add_test(tc, test_recovery_lag2);
    tcase_add_test(tc, test_log_marginal_lags);
    tcase_add_test(tc, test_file_lags);
    tcase_add_test(tc, test_errors_lags);
    suite_add_tcase(s, tc);
    return s;
}
