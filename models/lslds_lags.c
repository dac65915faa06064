#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "lslds-private.h"

/* The latent SLDS with L > 1 lags (docs/models/slds.md, "Several lags"):
 * the transition of row t couples x_t with x_{t-1}, ..., x_{t-L}, so the
 * precision of q(x) over the rows is block-banded with L blocks below the
 * diagonal. Its block Cholesky factor has the same band; a forward solve
 * gives the log normalizer, a backward solve the means, and the
 * Takahashi recurrence the covariances inside the band, which are all the
 * moments the scores and the M-step use (E x_t s_{t-1}', E s_{t-1}
 * s_{t-1}'). Working on x directly, not on the stacked state s_t, the
 * process noise is never singular: nothing is inverted but Q_k, P0 and
 * the positive definite Schur complements. */

/* Block (t, t - l) of the band (l = 0..L), D x D row-major. */
static double *band(const lsw *w, size_t t, size_t l)
{
    return w->Lb + (t * (w->lags + 1) + l) * w->D * w->D;
}

/* Cov(x_t, x_{t-l}), l = 1..L, in q->lagcov. */
static double *lagc(const lse_lslds_post *q, size_t t, size_t l)
{
    return q->lagcov->data + t * q->lagcov->tda + (l - 1) * q->D * q->D;
}

/* E[x_a x_b'] = Cov(x_a, x_b) + m_a m_b' for rows a, b of one sequence
 * with |a - b| <= L into out (D x D). */
static void second_moment(const lse_lslds_post *q, size_t a, size_t b,
                          double *out)
{
    const size_t D = q->D;
    const double *ma = q->mean->data + a * q->mean->tda;
    const double *mb = q->mean->data + b * q->mean->tda;
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++) {
            double c;
            if (a == b)
                c = q->cov->data[a * q->cov->tda + i * D + j];
            else if (a > b)
                c = lagc(q, a, a - b)[i * D + j];
            else
                c = lagc(q, b, b - a)[j * D + i];
            out[i * D + j] = c + ma[i] * mb[j];
        }
}

void lse_lsw_moments_lags(lsw *w, const lse_lslds_post *q, const size_t *seq)
{
    const size_t T = w->T, D = w->D, DD = D * D, M = w->M, L = w->lags;
    const size_t P = w->P;
    double *B = w->tmp;
    size_t s0 = 0;
    for (size_t t = 0; t < T; t++) {
        double *r = w->mo + t * M;
        if (lse_lsw_head(seq, t, L, &s0)) {
            memset(r, 0, M * sizeof(double));
            continue;
        }
        double *Stt = r, *Stx = r + DD, *Sxx = Stx + D * P;
        double *e1 = Sxx + P * P, *e0 = e1 + D;
        second_moment(q, t, t, Stt);
        for (size_t l = 1; l <= L; l++) {
            second_moment(q, t, t - l, B);
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    Stx[i * P + (l - 1) * D + j] = -2.0 * B[i * D + j];
        }
        for (size_t a = 1; a <= L; a++)
            for (size_t b = 1; b <= L; b++) {
                second_moment(q, t - a, t - b, B);
                for (size_t i = 0; i < D; i++)
                    for (size_t j = 0; j < D; j++)
                        Sxx[((a - 1) * D + i) * P + (b - 1) * D + j] =
                            B[i * D + j];
            }
        const double *m1 = q->mean->data + t * q->mean->tda;
        for (size_t i = 0; i < D; i++)
            e1[i] = -2.0 * m1[i];
        for (size_t l = 1; l <= L; l++) {
            const double *m = q->mean->data + (t - l) * q->mean->tda;
            for (size_t i = 0; i < D; i++)
                e0[(l - 1) * D + i] = 2.0 * m[i];
        }
        r[M - 1] = 1.0;
    }
}

/* The band of the precision (into w->Lb, lower blocks) and the linear
 * term (w->ub) from the observation potentials, the initial-state terms
 * of the first L rows and the mixed transitions w->mix of the others;
 * returns the constant of the potentials. */
static double assemble(lsw *w, const size_t *seq)
{
    const size_t T = w->T, D = w->D, DD = D * D, M = w->M, L = w->lags;
    const size_t P = w->P;
    double cst = w->obs[T * (DD + D)];
    memset(w->Lb, 0, T * (L + 1) * DD * sizeof(double));
    for (size_t t = 0; t < T; t++) {
        const double *o = w->obs + t * (DD + D);
        memcpy(band(w, t, 0), o, DD * sizeof(double));
        memcpy(w->ub + t * D, o + DD, D * sizeof(double));
    }
    size_t s0 = 0;
    for (size_t t = 0; t < T; t++) {
        double *J = band(w, t, 0), *h = w->ub + t * D;
        if (lse_lsw_head(seq, t, L, &s0)) {
            for (size_t i = 0; i < DD; i++)
                J[i] += w->P0i[i];
            for (size_t i = 0; i < D; i++)
                h[i] += w->P0im0[i];
            cst += -0.5 * (w->m0P0im0 + w->ldP0 + (double)D * LSE_LSLDS_LOG_2PI);
            continue;
        }
        const double *x = w->mix + t * M, *SA = x + DD, *SAA = SA + D * P;
        const double *g = SAA + P * P, *sAb = g + D;
        for (size_t i = 0; i < DD; i++)
            J[i] += x[i];
        for (size_t i = 0; i < D; i++)
            h[i] += g[i];
        for (size_t l = 1; l <= L; l++) {
            double *Jl = band(w, t, l), *hl = w->ub + (t - l) * D;
            for (size_t i = 0; i < D; i++) {
                for (size_t j = 0; j < D; j++)
                    Jl[i * D + j] -= SA[i * P + (l - 1) * D + j];
                hl[i] -= sAb[(l - 1) * D + i];
            }
        }
        for (size_t a = 1; a <= L; a++)
            for (size_t b = a; b <= L; b++) {
                double *Jab = band(w, t - a, b - a);
                for (size_t i = 0; i < D; i++)
                    for (size_t j = 0; j < D; j++)
                        Jab[i * D + j] += SAA[((a - 1) * D + i) * P +
                                              (b - 1) * D + j];
            }
        cst += -0.5 * x[M - 1];
    }
    return cst;
}

/* In place: the band becomes its block Cholesky factor, ub the forward
 * solve L^-1 h; log det and |L^-1 h|^2. 0, or 1 + the row whose Schur
 * complement is not positive definite. */
static size_t factor(lsw *w, const size_t *seq, double *logdet, double *quad)
{
    const size_t T = w->T, D = w->D, L = w->lags;
    double ld = 0.0, qd = 0.0;
    size_t s0 = 0;
    for (size_t t = 0; t < T; t++) {
        (void)lse_lsw_head(seq, t, 1, &s0);
        const size_t lo = t - s0 > L ? t - L : s0;
        for (size_t c = lo; c < t; c++) {
            double *X = band(w, t, t - c);
            for (size_t m = lo; m < c; m++) {
                const double *Ltm = band(w, t, t - m), *Lcm = band(w, c, c - m);
                for (size_t i = 0; i < D; i++)
                    for (size_t j = 0; j < D; j++) {
                        double a = 0.0;
                        for (size_t k = 0; k < D; k++)
                            a += Ltm[i * D + k] * Lcm[j * D + k];
                        X[i * D + j] -= a;
                    }
            }
            const double *Lcc = band(w, c, 0);
            for (size_t i = 0; i < D; i++) /* X = X Lcc^-T, row by row */
                lse_lsw_lsolve(Lcc, X + i * D, D);
        }
        double *Ltt = band(w, t, 0), *u = w->ub + t * D;
        for (size_t m = lo; m < t; m++) {
            const double *Ltm = band(w, t, t - m), *um = w->ub + m * D;
            for (size_t i = 0; i < D; i++) {
                for (size_t j = 0; j <= i; j++) {
                    double a = 0.0;
                    for (size_t k = 0; k < D; k++)
                        a += Ltm[i * D + k] * Ltm[j * D + k];
                    Ltt[i * D + j] -= a;
                }
                double a = 0.0;
                for (size_t k = 0; k < D; k++)
                    a += Ltm[i * D + k] * um[k];
                u[i] -= a;
            }
        }
        if (lse_lsw_chol(Ltt, D) != 0)
            return t + 1;
        for (size_t i = 0; i < D; i++)
            ld += 2.0 * log(Ltt[i * D + i]);
        lse_lsw_lsolve(Ltt, u, D);
        for (size_t i = 0; i < D; i++)
            qd += u[i] * u[i];
    }
    *logdet = ld;
    *quad = qd;
    return 0;
}

/* Means and the covariances inside the band of the sequence [ts, te]
 * from the factor: mu_t = L_tt^-T (u_t - sum_i L_{t+i,t}' mu_{t+i}) and
 * (Takahashi) S_{t,t+j} = -L_tt^-T sum_i L_{t+i,t}' S_{t+i,t+j},
 * S_{t,t} = (L_tt L_tt')^-1 - L_tt^-T sum_i L_{t+i,t}' S_{t+i,t}. */
static void backward(lsw *w, size_t ts, size_t te, lse_lslds_post *q)
{
    const size_t D = w->D, DD = D * D, L = w->lags;
    double *Z = w->tmp + D * w->P, *Fi = Z + DD, *li = Fi + DD, *S = li + DD;
    double *v = S + DD + DD;
    for (size_t t = ts; t <= te; t++) {
        memset(q->lagcov->data + t * q->lagcov->tda, 0,
               L * DD * sizeof(double));
        memset(q->cross->data + t * q->cross->tda, 0, DD * sizeof(double));
    }
    for (size_t t = te + 1; t-- > ts;) {
        const size_t n = te - t < L ? te - t : L; /* rows below in band */
        const double *Ltt = band(w, t, 0);
        double *m = q->mean->data + t * q->mean->tda;
        memcpy(v, w->ub + t * D, D * sizeof(double));
        for (size_t i = 1; i <= n; i++) {
            const double *Li = band(w, t + i, i);
            const double *mi = q->mean->data + (t + i) * q->mean->tda;
            for (size_t a = 0; a < D; a++) {
                double s = 0.0;
                for (size_t k = 0; k < D; k++)
                    s += Li[k * D + a] * mi[k];
                v[a] -= s;
            }
        }
        for (size_t a = D; a-- > 0;) { /* v = Ltt^-T v */
            double s = v[a];
            for (size_t k = a + 1; k < D; k++)
                s -= Ltt[k * D + a] * v[k];
            v[a] = s / Ltt[a * D + a];
        }
        memcpy(m, v, D * sizeof(double));
        /* S_{t,t+j}, j = n..1, stored as Cov(x_{t+j}, x_t) = S' */
        for (size_t j = n; j >= 1; j--) {
            memset(Z, 0, DD * sizeof(double));
            for (size_t i = 1; i <= n; i++) {
                const double *Li = band(w, t + i, i);
                /* S(t+i, t+j) */
                for (size_t a = 0; a < D; a++)
                    for (size_t b = 0; b < D; b++) {
                        double c;
                        if (i == j)
                            c = q->cov->data[(t + i) * q->cov->tda + a * D + b];
                        else if (i > j)
                            c = lagc(q, t + i, i - j)[a * D + b];
                        else
                            c = lagc(q, t + j, j - i)[b * D + a];
                        S[a * D + b] = c;
                    }
                for (size_t a = 0; a < D; a++)
                    for (size_t b = 0; b < D; b++) {
                        double s = 0.0;
                        for (size_t k = 0; k < D; k++)
                            s += Li[k * D + a] * S[k * D + b];
                        Z[a * D + b] += s;
                    }
            }
            lse_lsw_ltsolve_mat(Ltt, Z, D);
            double *X = lagc(q, t + j, j);
            for (size_t a = 0; a < D; a++)
                for (size_t b = 0; b < D; b++)
                    X[b * D + a] = -Z[a * D + b];
        }
        /* S_{t,t} */
        memset(Z, 0, DD * sizeof(double));
        for (size_t i = 1; i <= n; i++) {
            const double *Li = band(w, t + i, i), *X = lagc(q, t + i, i);
            for (size_t a = 0; a < D; a++)
                for (size_t b = 0; b < D; b++) {
                    double s = 0.0;
                    for (size_t k = 0; k < D; k++)
                        s += Li[k * D + a] * X[k * D + b];
                    Z[a * D + b] += s;
                }
        }
        lse_lsw_ltsolve_mat(Ltt, Z, D);
        lse_lsw_chol_inverse(Ltt, Fi, li, D);
        double *Pt = q->cov->data + t * q->cov->tda;
        for (size_t a = 0; a < D; a++)
            for (size_t b = 0; b <= a; b++) {
                const double c = Fi[a * D + b] -
                                 0.5 * (Z[a * D + b] + Z[b * D + a]);
                Pt[a * D + b] = c;
                Pt[b * D + a] = c;
            }
    }
    for (size_t t = ts + 1; t <= te; t++)
        memcpy(q->cross->data + t * q->cross->tda, lagc(q, t, 1),
               DD * sizeof(double));
}

size_t lse_lsw_smooth_lags(lsw *w, const size_t *seq, lse_lslds_post *q,
                           double *logz, double *hx)
{
    const size_t T = w->T, D = w->D;
    const double cst = assemble(w, seq);
    double logdet, quad;
    const size_t bad = factor(w, seq, &logdet, &quad);
    if (bad != 0)
        return bad;
    size_t ts = 0;
    for (size_t t = 0; t < T; t++)
        if (t + 1 == T || (seq != NULL && seq[t + 1] != seq[t])) {
            backward(w, ts, t, q);
            ts = t + 1;
        }
    const double n = (double)T * (double)D;
    *logz = cst + 0.5 * quad - 0.5 * logdet + 0.5 * n * LSE_LSLDS_LOG_2PI;
    *hx = 0.5 * (n * (1.0 + LSE_LSLDS_LOG_2PI) - logdet);
    return 0;
}

size_t lse_lsw_logz_path(lsw *w, const size_t *seq, const size_t *z,
                         double *logz)
{
    const size_t T = w->T, D = w->D, M = w->M;
    for (size_t t = 0; t < T; t++)
        memcpy(w->mix + t * M, w->mb + z[t] * M, M * sizeof(double));
    const double cst = assemble(w, seq);
    double logdet, quad;
    const size_t bad = factor(w, seq, &logdet, &quad);
    if (bad != 0)
        return bad;
    const double n = (double)T * (double)D;
    *logz = cst + 0.5 * quad - 0.5 * logdet + 0.5 * n * LSE_LSLDS_LOG_2PI;
    return 0;
}

lse_status lse_lslds_params_set_lags(lse_lslds_params *p, size_t L,
                                     lse_error *err)
{
    static const char fn[] = "lse_lslds_params_set_lags";
    if (p == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "p is NULL");
    if (L == 0 || L > 64)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "L = %zu lags: must be in 1..64", L);
    if (L == p->lags)
        return LSE_OK;
    const size_t D = p->D, old = p->lags * D;
    gsl_matrix *A = gsl_matrix_calloc(p->K, D * L * D);
    if (A == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    const size_t keep = L < p->lags ? L * D : old;
    for (size_t k = 0; k < p->K; k++)
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < keep; j++)
                gsl_matrix_set(A, k, i * L * D + j,
                               gsl_matrix_get(p->A, k, i * old + j));
    gsl_matrix_free(p->A);
    p->A = A;
    p->lags = L;
    return LSE_OK;
}

void lse_lsw_moments(lsw *w, const lse_lslds_post *q, const size_t *seq)
{
    if (w->lags > 1)
        lse_lsw_moments_lags(w, q, seq);
    else
        lse_lsw_moments_one(w, q, seq);
}

size_t lse_lsw_smooth(lsw *w, const size_t *seq, lse_lslds_post *q,
                      double *logz, double *hx)
{
    lse_lsw_mix(w, q);
    if (w->lags > 1)
        return lse_lsw_smooth_lags(w, seq, q, logz, hx);
    return lse_lsw_smooth_one(w, seq, q, logz, hx);
}
