#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "lslds-private.h"

/* always inlined, so that a copy with a constant D unrolls (models see only
 * the public headers: lib/kernels-private.h's LSW_KERNEL is not theirs) */
#if defined(__GNUC__) || defined(__clang__)
#define LSW_KERNEL static inline __attribute__((always_inline))
#else
#define LSW_KERNEL static inline
#endif

/* Inference kernels of the latent SLDS (models/lslds-private.h,
 * docs/models/slds.md "Latent states: the real SLDS"): the q(x) update as
 * a block-tridiagonal information-form smoother, the expected
 * log-densities of all modes as one matrix product, on raw arrays (D is
 * small: no library call per D x D block). */

static int is_start(const size_t *seq, size_t t)
{
    return t == 0 || (seq != NULL && seq[t] != seq[t - 1]);
}

int lse_lsw_alloc(lsw *w, size_t T, size_t K, size_t D, size_t L)
{
    memset(w, 0, sizeof *w);
    if (D == 0 || K == 0 || T == 0 || D > 4096 || K > 4096 || L == 0 ||
        L > 64)
        return -1;
    const size_t DD = D * D, P = L * D, W = DD + D;
    const size_t M = DD + D * P + P * P + D + P + 1;
    if (T > SIZE_MAX / sizeof(double) / (M + K + 1) ||
        T > (SIZE_MAX / sizeof(double) - 1) / W ||
        T > SIZE_MAX / sizeof(double) / ((L + 1) * DD + D))
        return -1;
    w->T = T;
    w->K = K;
    w->D = D;
    w->M = M;
    w->lags = L;
    w->P = P;
    if (L > 1) {
        w->Lb = malloc(T * (L + 1) * DD * sizeof(double));
        w->ub = malloc(T * D * sizeof(double));
        if (!w->Lb || !w->ub) {
            lse_lsw_free(w);
            return -1;
        }
    }
    w->mb = malloc(K * M * sizeof(double));
    w->mo = calloc(T * M, sizeof(double));
    w->mix = malloc(T * M * sizeof(double));
    w->wu = malloc(T * K * sizeof(double));
    w->s = calloc(T * K, sizeof(double));
    w->obs = calloc(T * W + 1, sizeof(double));
    w->L = malloc(T * DD * sizeof(double));
    w->U = calloc(T * DD, sizeof(double));
    w->uf = malloc(T * D * sizeof(double));
    w->tmp = malloc((7 * DD + 4 * D + D * P) * sizeof(double));
    w->P0i = malloc(DD * sizeof(double));
    w->P0im0 = malloc(D * sizeof(double));
    if (!w->mb || !w->mo || !w->mix || !w->wu || !w->s || !w->obs || !w->L ||
        !w->U || !w->uf || !w->tmp || !w->P0i || !w->P0im0) {
        lse_lsw_free(w);
        return -1;
    }
    for (size_t i = 0; i < T * K; i++)
        w->wu[i] = 1.0 / (double)K;
    return 0;
}

void lse_lsw_free(lsw *w)
{
    free(w->mb);
    free(w->mo);
    free(w->mix);
    free(w->wu);
    free(w->s);
    free(w->obs);
    free(w->L);
    free(w->U);
    free(w->uf);
    free(w->tmp);
    free(w->P0i);
    free(w->P0im0);
    free(w->Lb);
    free(w->ub);
    memset(w, 0, sizeof *w);
}

/* The small kernels below take n as a constant where the smoother calls
 * them with D = 1 .. 4 (forward and backward, one copy per D), so that
 * their loops unroll; the same operations in the same order for every
 * copy, so the same bits. */
LSW_KERNEL int chol_body(double *a, const size_t n)
{
    for (size_t j = 0; j < n; j++) {
        double s = a[j * n + j];
        for (size_t k = 0; k < j; k++)
            s -= a[j * n + k] * a[j * n + k];
        if (!(s > 0.0) || !isfinite(s))
            return -1;
        const double l = sqrt(s);
        a[j * n + j] = l;
        for (size_t i = j + 1; i < n; i++) {
            double v = a[i * n + j];
            for (size_t k = 0; k < j; k++)
                v -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = v / l;
        }
        for (size_t i = 0; i < j; i++)
            a[i * n + j] = 0.0;
    }
    return 0;
}

int lse_lsw_chol(double *a, size_t n) { return chol_body(a, n); }

/* x = L^-1 x (L lower, n x n), one vector */
LSW_KERNEL void lsolve(const double *L, double *x, const size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        for (size_t k = 0; k < i; k++)
            v -= L[i * n + k] * x[k];
        x[i] = v / L[i * n + i];
    }
}

/* x = L^-T x */
LSW_KERNEL void ltsolve(const double *L, double *x, const size_t n)
{
    for (size_t i = n; i-- > 0;) {
        double v = x[i];
        for (size_t k = i + 1; k < n; k++)
            v -= L[k * n + i] * x[k];
        x[i] = v / L[i * n + i];
    }
}

/* B = L^-1 B, B n x n row-major (column by column) */
LSW_KERNEL void lsolve_mat(const double *L, double *B, const size_t n)
{
    for (size_t c = 0; c < n; c++)
        for (size_t i = 0; i < n; i++) {
            double v = B[i * n + c];
            for (size_t k = 0; k < i; k++)
                v -= L[i * n + k] * B[k * n + c];
            B[i * n + c] = v / L[i * n + i];
        }
}

/* B = L^-T B */
LSW_KERNEL void ltsolve_mat(const double *L, double *B, const size_t n)
{
    for (size_t c = 0; c < n; c++)
        for (size_t i = n; i-- > 0;) {
            double v = B[i * n + c];
            for (size_t k = i + 1; k < n; k++)
                v -= L[k * n + i] * B[k * n + c];
            B[i * n + c] = v / L[i * n + i];
        }
}

/* inv = (L L')^-1, symmetric; scratch li (n x n) */
LSW_KERNEL void chol_inverse(const double *L, double *inv, double *li, const size_t n)
{
    for (size_t i = 0; i < n * n; i++)
        li[i] = 0.0;
    for (size_t i = 0; i < n; i++)
        li[i * n + i] = 1.0;
    lsolve_mat(L, li, n); /* li = L^-1 */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double v = 0.0;
            for (size_t k = i; k < n; k++)
                v += li[k * n + i] * li[k * n + j];
            inv[i * n + j] = v;
            inv[j * n + i] = v;
        }
}

void lse_lsw_lsolve(const double *L, double *x, size_t n) { lsolve(L, x, n); }
void lse_lsw_ltsolve_mat(const double *L, double *B, size_t n)
{
    ltsolve_mat(L, B, n);
}
void lse_lsw_chol_inverse(const double *L, double *inv, double *li, size_t n)
{
    chol_inverse(L, inv, li, n);
}

int lse_lsw_modes(lsw *w, const lse_lslds_params *p)
{
    const size_t K = w->K, D = w->D, DD = D * D, M = w->M, P = w->P;
    double *Lq = w->tmp, *li = Lq + DD, *Qi = li + DD, *QiA = Qi + DD;
    for (size_t k = 0; k < K; k++) {
        const double *A = p->A->data + k * p->A->tda;
        const double *Q = p->Q->data + k * p->Q->tda;
        const double *b = p->b->data + k * p->b->tda;
        memcpy(Lq, Q, DD * sizeof(double));
        if (lse_lsw_chol(Lq, D) != 0)
            return -1;
        double ld = 0.0;
        for (size_t i = 0; i < D; i++)
            ld += 2.0 * log(Lq[i * D + i]);
        if (!isfinite(ld))
            return -1;
        chol_inverse(Lq, Qi, li, D);
        double *row = w->mb + k * M;
        double *rQi = row, *rQiA = row + DD, *rAQA = rQiA + D * P;
        double *rQib = rAQA + P * P, *rAQb = rQib + D;
        memcpy(rQi, Qi, DD * sizeof(double));
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < P; j++) {
                double v = 0.0;
                for (size_t l = 0; l < D; l++)
                    v += Qi[i * D + l] * A[l * P + j];
                QiA[i * P + j] = v;
            }
        memcpy(rQiA, QiA, D * P * sizeof(double));
        for (size_t i = 0; i < P; i++)
            for (size_t j = 0; j <= i; j++) {
                double v = 0.0;
                for (size_t l = 0; l < D; l++)
                    v += A[l * P + i] * QiA[l * P + j];
                rAQA[i * P + j] = v;
                rAQA[j * P + i] = v;
            }
        double bqb = 0.0;
        for (size_t i = 0; i < D; i++) {
            double v = 0.0;
            for (size_t l = 0; l < D; l++)
                v += Qi[i * D + l] * b[l];
            rQib[i] = v;
            bqb += b[i] * v;
        }
        for (size_t i = 0; i < P; i++) {
            double v = 0.0;
            for (size_t l = 0; l < D; l++)
                v += A[l * P + i] * rQib[l];
            rAQb[i] = v;
        }
        row[M - 1] = bqb + ld + (double)D * LSE_LSLDS_LOG_2PI;
    }
    /* initial state */
    memcpy(Lq, p->P0->data, DD * sizeof(double));
    if (p->P0->tda != D)
        for (size_t i = 0; i < D; i++)
            memcpy(Lq + i * D, p->P0->data + i * p->P0->tda,
                   D * sizeof(double));
    if (lse_lsw_chol(Lq, D) != 0)
        return -2;
    double ld = 0.0;
    for (size_t i = 0; i < D; i++)
        ld += 2.0 * log(Lq[i * D + i]);
    if (!isfinite(ld))
        return -2;
    w->ldP0 = ld;
    chol_inverse(Lq, w->P0i, li, D);
    double mm = 0.0;
    for (size_t i = 0; i < D; i++) {
        double v = 0.0;
        for (size_t l = 0; l < D; l++)
            v += w->P0i[i * D + l] * gsl_vector_get(p->m0, l);
        w->P0im0[i] = v;
        mm += v * gsl_vector_get(p->m0, i);
    }
    w->m0P0im0 = mm;
    return 0;
}

void lse_lsw_moments_one(lsw *w, const lse_lslds_post *q, const size_t *seq)
{
    const size_t T = w->T, D = w->D, DD = D * D, M = w->M;
    for (size_t t = 0; t < T; t++) {
        double *r = w->mo + t * M;
        if (is_start(seq, t)) {
            memset(r, 0, M * sizeof(double));
            continue;
        }
        const double *m1 = q->mean->data + t * q->mean->tda;
        const double *m0 = q->mean->data + (t - 1) * q->mean->tda;
        const double *P1 = q->cov->data + t * q->cov->tda;
        const double *P0 = q->cov->data + (t - 1) * q->cov->tda;
        const double *X = q->cross->data + t * q->cross->tda;
        double *Stt = r, *Stx = r + DD, *Sxx = r + 2 * DD;
        double *e1 = r + 3 * DD, *e0 = e1 + D;
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++) {
                Stt[i * D + j] = P1[i * D + j] + m1[i] * m1[j];
                Stx[i * D + j] = -2.0 * (X[i * D + j] + m1[i] * m0[j]);
                Sxx[i * D + j] = P0[i * D + j] + m0[i] * m0[j];
            }
        for (size_t i = 0; i < D; i++) {
            e1[i] = -2.0 * m1[i];
            e0[i] = 2.0 * m0[i];
        }
        r[M - 1] = 1.0;
    }
}

void lse_lsw_scores(lsw *w)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)w->T, (int)w->K,
                (int)w->M, -0.5, w->mo, (int)w->M, w->mb, (int)w->M, 0.0, w->s,
                (int)w->K);
}

/* Row t's information-form blocks: Jd (precision), hh (linear term) from
 * its observation potential, its own transition (or the initial state)
 * and the next row's transition. */
LSW_KERNEL void row_blocks(const lsw *w, const size_t *seq, size_t t,
                           double *Jd, double *hh, const size_t D)
{
    const size_t T = w->T, DD = D * D, M = w->M;
    const double *o = w->obs + t * (DD + D);
    memcpy(Jd, o, DD * sizeof(double));
    memcpy(hh, o + DD, D * sizeof(double));
    if (is_start(seq, t)) {
        for (size_t i = 0; i < DD; i++)
            Jd[i] += w->P0i[i];
        for (size_t i = 0; i < D; i++)
            hh[i] += w->P0im0[i];
    } else {
        const double *x = w->mix + t * M;
        for (size_t i = 0; i < DD; i++)
            Jd[i] += x[i]; /* Lam */
        for (size_t i = 0; i < D; i++)
            hh[i] += x[3 * DD + i]; /* g */
    }
    if (t + 1 < T && !is_start(seq, t + 1)) {
        const double *x = w->mix + (t + 1) * M;
        for (size_t i = 0; i < DD; i++)
            Jd[i] += x[2 * DD + i]; /* SAA */
        for (size_t i = 0; i < D; i++)
            hh[i] -= x[3 * DD + D + i]; /* sAb */
    }
}

/* Forward elimination: L_t (Cholesky factor of the Schur complement F_t),
 * U_t = L_{t-1}^-1 SA_t', uf_t = L_t^-1 f_t; log det and quadratic form. */
LSW_KERNEL size_t forward_body(lsw *w, const size_t *seq, double *logdet,
                               double *quad, const size_t D)
{
    const size_t T = w->T, DD = D * D, M = w->M;
    double *Jd = w->tmp, *hh = Jd + DD;
    double ld = 0.0, qd = 0.0;
    for (size_t t = 0; t < T; t++) {
        row_blocks(w, seq, t, Jd, hh, D);
        if (!is_start(seq, t)) {
            const double *SA = w->mix + t * M + DD, *Lp = w->L + (t - 1) * DD;
            const double *up = w->uf + (t - 1) * D;
            double *U = w->U + t * DD;
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    U[i * D + j] = SA[j * D + i];
            lsolve_mat(Lp, U, D);
            for (size_t i = 0; i < D; i++) {
                for (size_t j = 0; j <= i; j++) {
                    double v = 0.0;
                    for (size_t k = 0; k < D; k++)
                        v += U[k * D + i] * U[k * D + j];
                    Jd[i * D + j] -= v;
                }
                double v = 0.0;
                for (size_t k = 0; k < D; k++)
                    v += U[k * D + i] * up[k];
                hh[i] += v;
            }
        }
        double *L = w->L + t * DD;
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j <= i; j++)
                L[i * D + j] = Jd[i * D + j];
        if (chol_body(L, D) != 0)
            return t + 1;
        for (size_t i = 0; i < D; i++)
            ld += 2.0 * log(L[i * D + i]);
        double *u = w->uf + t * D;
        memcpy(u, hh, D * sizeof(double));
        lsolve(L, u, D);
        for (size_t i = 0; i < D; i++)
            qd += u[i] * u[i];
    }
    *logdet = ld;
    *quad = qd;
    return 0;
}

static size_t forward(lsw *w, const size_t *seq, double *logdet, double *quad)
{
    switch (w->D) {
    case 1:
        return forward_body(w, seq, logdet, quad, 1);
    case 2:
        return forward_body(w, seq, logdet, quad, 2);
    case 3:
        return forward_body(w, seq, logdet, quad, 3);
    case 4:
        return forward_body(w, seq, logdet, quad, 4);
    default:
        return forward_body(w, seq, logdet, quad, w->D);
    }
}

/* Backward pass of one sequence [ts, te]: means, covariances, cross
 * covariances. */
LSW_KERNEL void backward_body(lsw *w, size_t ts, size_t te,
                              lse_lslds_post *q, const size_t D)
{
    const size_t DD = D * D;
    double *G = w->tmp, *li = G + DD, *Fi = li + DD, *SG = Fi + DD;
    double *v = SG + DD;
    for (size_t t = te + 1; t-- > ts;) {
        const double *L = w->L + t * DD;
        double *m = q->mean->data + t * q->mean->tda;
        double *P = q->cov->data + t * q->cov->tda;
        memcpy(v, w->uf + t * D, D * sizeof(double));
        chol_inverse(L, Fi, li, D);
        if (t == te) {
            ltsolve(L, v, D);
            memcpy(m, v, D * sizeof(double));
            memcpy(P, Fi, DD * sizeof(double));
            continue;
        }
        const double *U = w->U + (t + 1) * DD;
        const double *m1 = q->mean->data + (t + 1) * q->mean->tda;
        const double *P1 = q->cov->data + (t + 1) * q->cov->tda;
        double *X = q->cross->data + (t + 1) * q->cross->tda;
        for (size_t i = 0; i < D; i++) {
            double a = 0.0;
            for (size_t k = 0; k < D; k++)
                a += U[i * D + k] * m1[k];
            v[i] += a;
        }
        ltsolve(L, v, D);
        memcpy(m, v, D * sizeof(double));
        memcpy(G, U, DD * sizeof(double));
        ltsolve_mat(L, G, D); /* G = F^-1 SA' */
        /* X = P1 G' (Cov(x_{t+1}, x_t)); P = Fi + G X */
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++) {
                double a = 0.0;
                for (size_t k = 0; k < D; k++)
                    a += P1[i * D + k] * G[j * D + k];
                X[i * D + j] = a;
            }
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j <= i; j++) {
                double a = Fi[i * D + j];
                for (size_t k = 0; k < D; k++)
                    a += G[i * D + k] * X[k * D + j];
                P[i * D + j] = a;
                P[j * D + i] = a;
            }
    }
    memset(q->cross->data + ts * q->cross->tda, 0, DD * sizeof(double));
}

static void backward(lsw *w, size_t ts, size_t te, lse_lslds_post *q)
{
    switch (w->D) {
    case 1:
        backward_body(w, ts, te, q, 1);
        break;
    case 2:
        backward_body(w, ts, te, q, 2);
        break;
    case 3:
        backward_body(w, ts, te, q, 3);
        break;
    case 4:
        backward_body(w, ts, te, q, 4);
        break;
    default:
        backward_body(w, ts, te, q, w->D);
        break;
    }
}

void lse_lsw_mix(lsw *w, const lse_lslds_post *q)
{
    const size_t T = w->T, K = w->K, M = w->M;
    const double *W = q->have_z ? q->w->data : w->wu;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)M,
                (int)K, 1.0, W, (int)(q->have_z ? q->w->tda : K), w->mb,
                (int)M, 0.0, w->mix, (int)M);
}

size_t lse_lsw_smooth_one(lsw *w, const size_t *seq, lse_lslds_post *q,
                          double *logz, double *hx)
{
    const size_t T = w->T, D = w->D, M = w->M;
    double logdet, quad;
    const size_t bad = forward(w, seq, &logdet, &quad);
    if (bad != 0)
        return bad;
    double cst = w->obs[T * (D * D + D)];
    size_t ts = 0;
    for (size_t t = 0; t < T; t++) {
        if (is_start(seq, t))
            cst += -0.5 * (w->m0P0im0 + w->ldP0 + (double)D * LSE_LSLDS_LOG_2PI);
        else
            cst += -0.5 * w->mix[t * M + M - 1];
        if (t + 1 == T || is_start(seq, t + 1)) {
            backward(w, ts, t, q);
            ts = t + 1;
        }
    }
    const double n = (double)T * (double)D;
    *logz = cst + 0.5 * quad - 0.5 * logdet + 0.5 * n * LSE_LSLDS_LOG_2PI;
    *hx = 0.5 * (n * (1.0 + LSE_LSLDS_LOG_2PI) - logdet);
    return 0;
}

double lse_lsw_start_expect(const lsw *w, const lse_lslds_post *q,
                            const size_t *seq)
{
    const size_t T = w->T, D = w->D;
    double tot = 0.0;
    size_t s0 = 0;
    for (size_t t = 0; t < T; t++) {
        if (!lse_lsw_head(seq, t, w->lags, &s0))
            continue;
        const double *m = q->mean->data + t * q->mean->tda;
        const double *P = q->cov->data + t * q->cov->tda;
        /* tr(P0i (P + m m')) - 2 m' P0i m0 + m0' P0i m0 */
        double a = 0.0;
        for (size_t i = 0; i < D; i++) {
            for (size_t j = 0; j < D; j++)
                a += w->P0i[i * D + j] * (P[j * D + i] + m[i] * m[j]);
            a -= 2.0 * m[i] * w->P0im0[i];
        }
        a += w->m0P0im0;
        tot += -0.5 * ((double)D * LSE_LSLDS_LOG_2PI + w->ldP0 + a);
    }
    return tot;
}

void lse_lsw_moment_sums(const lsw *w, const lse_lslds_post *q, double *WM)
{
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)w->K, (int)w->M,
                (int)w->T, 1.0, q->w->data, (int)q->w->tda, w->mo, (int)w->M,
                0.0, WM, (int)w->M);
}
