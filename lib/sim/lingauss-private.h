#ifndef LSEGRAPH_LINGAUSS_PRIVATE_H
#define LSEGRAPH_LINGAUSS_PRIVATE_H

#include <string.h>

#include <gsl/gsl_matrix.h>

#include "gauss-private.h"

/*
 * The lane kernels of lse_sim_lingauss shared by lib/sim/lingauss.c (its
 * eval and stats) and lib/sim/lingauss_fused.c (the fused block pass):
 * LG_LN rows per vector, the residuals, the scores and the statistics of a
 * mode, so that both run the same operations (the same bits).
 */

enum { P_LOGW = LSE_GAUSS_LOGW, P_A = 1, P_CHOL = 2, N_PARAM = 3 };

/* Row-parallel kernels of the small sizes: LG_LN rows at once, one row per
 * lane of GCC/clang vector types (plain C arithmetic lane by lane, so every
 * copy -- plain, AVX2, AVX-512 -- rounds the same way). */
#define LG_LN 8
typedef double lg_v __attribute__((vector_size(LG_LN * sizeof(double))));

/* Rows [i0, i0 + LG_LN) of y and x as columns: yv[j] lane l = y_{i0+l, j} */
/* o lane l = p[l t] (the vectors pass by address: no vector ABI) */
LSE_KERNEL void lg_col8(lg_v *o, const double *p, const size_t t)
{
    double v[LG_LN];
    for (size_t l = 0; l < LG_LN; l++)
        v[l] = p[l * t];
    memcpy(o, v, sizeof v);
}

#if defined(__GNUC__) && !defined(__clang__)
/* GCC: LG_LN contiguous rows of n <= 4 entries (n vectors) turn into
 * columns by two-vector shuffles (__builtin_shuffle, any mask) */
#define LG_SHUFFLE 1
typedef long long lg_i __attribute__((vector_size(LG_LN * sizeof(long long))));

/* Column j of LG_LN contiguous rows of n entries: lane l is entry
 * e = l n + j of the rows' n vectors: t = (v0, v1)[ia] holds the lanes with
 * e < 16, u = v2 (n = 3) or (v2, v3)[ib] the others, column = (t, u)[ic]. */
typedef struct lg_perm {
    lg_i ia, ib, ic;
} lg_perm;

LSE_KERNEL void lg_perm_make(lg_perm *pm, const size_t n, const size_t j)
{
    long long ia[LG_LN], ib[LG_LN], ic[LG_LN];
    for (size_t l = 0; l < LG_LN; l++) {
        const long long e = (long long)(l * n + j), ll = (long long)l;
        ia[l] = e < 16 ? e : 0;
        ib[l] = e >= 16 ? e - 16 : 0;
        ic[l] = e < 16 ? ll : n == 3 ? 8 + (e - 16) : 8 + ll;
    }
    memcpy(&pm->ia, ia, sizeof ia);
    memcpy(&pm->ib, ib, sizeof ib);
    memcpy(&pm->ic, ic, sizeof ic);
}

/* o = column of the n vectors v by pm (lg_perm_make(pm, n, j)) */
LSE_KERNEL void lg_perm_apply(lg_v *o, const lg_v *v, const lg_perm *pm,
                              const size_t n)
{
    if (n == 1) {
        *o = v[0];
        return;
    }
    const lg_v t = __builtin_shuffle(v[0], v[1], pm->ia);
    if (n == 2) {
        *o = t;
        return;
    }
    const lg_v u = n == 3 ? v[2] : __builtin_shuffle(v[2], v[3], pm->ib);
    *o = __builtin_shuffle(t, u, pm->ic);
}
/* o = a column of LG_LN contiguous rows of K <= 4 entries by pm; K is
 * made a constant for each case, so that the loads stay vector loads */
LSE_KERNEL void lg_rho8(lg_v *o, const double *p, const lg_perm *pm,
                        const size_t K)
{
    lg_v v[4];
    switch (K) {
    case 1:
        memcpy(&v[0], p, sizeof v[0]);
        lg_perm_apply(o, v, pm, 1);
        break;
    case 2:
        memcpy(&v[0], p, sizeof v[0]);
        memcpy(&v[1], p + LG_LN, sizeof v[1]);
        lg_perm_apply(o, v, pm, 2);
        break;
    case 3:
        memcpy(&v[0], p, sizeof v[0]);
        memcpy(&v[1], p + LG_LN, sizeof v[1]);
        memcpy(&v[2], p + 2 * LG_LN, sizeof v[2]);
        lg_perm_apply(o, v, pm, 3);
        break;
    default:
        memcpy(&v[0], p, sizeof v[0]);
        memcpy(&v[1], p + LG_LN, sizeof v[1]);
        memcpy(&v[2], p + 2 * LG_LN, sizeof v[2]);
        memcpy(&v[3], p + 3 * LG_LN, sizeof v[3]);
        lg_perm_apply(o, v, pm, 4);
        break;
    }
}
/* The inverse of lg_perm_make: vector q of LG_LN contiguous rows of n <= 4
 * entries from the n columns; lane l is entry g = 8 q + l, i.e. lane g / n
 * of column g % n (the same two-stage shuffle as lg_perm_apply) */
LSE_KERNEL void lg_perm_out_make(lg_perm *pm, const size_t n, const size_t q)
{
    long long ia[LG_LN], ib[LG_LN], ic[LG_LN];
    for (size_t l = 0; l < LG_LN; l++) {
        const size_t g = LG_LN * q + l;
        const long long c = (long long)(g % n), row = (long long)(g / n);
        const long long ll = (long long)l;
        ia[l] = c < 2 ? c * 8 + row : 0;
        ib[l] = c >= 2 ? (c - 2) * 8 + row : 0;
        ic[l] = c < 2 ? ll : n == 3 ? 8 + row : 8 + ll;
    }
    memcpy(&pm->ia, ia, sizeof ia);
    memcpy(&pm->ib, ib, sizeof ib);
    memcpy(&pm->ic, ic, sizeof ic);
}

/* The scores of LG_LN rows (one vector per mode, K <= 4) stored as
 * contiguous rows s (K a constant in each case) */
LSE_KERNEL void lg_store_rows(double *s, const lg_v *sk, const lg_perm *pm,
                              const size_t K)
{
    for (size_t q = 0; q < K; q++) {
        lg_v o;
        switch (K) {
        case 1:
            lg_perm_apply(&o, sk, &pm[q], 1);
            break;
        case 2:
            lg_perm_apply(&o, sk, &pm[q], 2);
            break;
        case 3:
            lg_perm_apply(&o, sk, &pm[q], 3);
            break;
        default:
            lg_perm_apply(&o, sk, &pm[q], 4);
            break;
        }
        memcpy(s + LG_LN * q, &o, sizeof o);
    }
}
#else
#define LG_SHUFFLE 0
#endif

/* o[c] lane l = p[l t + c] for c < n: the n entries of LG_LN rows of stride
 * t (contiguous rows of at most 4 entries by vector loads and shuffles) */
LSE_KERNEL void lg_cols8(lg_v *o, const double *p, const size_t t,
                         const size_t n)
{
#if LG_SHUFFLE
    if (t == n && n <= 4) {
        lg_v v[4];
        for (size_t q = 0; q < n; q++)
            memcpy(&v[q], p + LG_LN * q, sizeof v[q]);
        for (size_t c = 0; c < n; c++) {
            lg_perm pm;
            lg_perm_make(&pm, n, c);
            lg_perm_apply(&o[c], v, &pm, n);
        }
        return;
    }
#endif
    for (size_t c = 0; c < n; c++)
        lg_col8(&o[c], p + c, t);
}

LSE_KERNEL void lg_load8(const gsl_matrix *y, const gsl_matrix *x, size_t i0,
                         lg_v *yv, lg_v *xv, const size_t d, const size_t dc)
{
    lg_cols8(yv, y->data + i0 * y->tda, y->tda, d);
    lg_cols8(xv, x->data + i0 * x->tda, x->tda, dc);
}

/* The sum of the lanes of v in a fixed order */
LSE_KERNEL double lg_hsum(const lg_v *p)
{
    const lg_v v = *p;
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/* The lane kernels of NL rows per vector of type VT (lg_v: the AVX-512
 * fused pass and lanes; lg_v4: the AVX2 fused pass of lingauss_fused.c):
 *   lg_residual##NL  lg_residual lane by lane (the same operations in the
 *                    same order)
 *   lg_score##NL     the scores of mode k from the residuals r:
 *                    lg_eval_body's arithmetic lane by lane (the same bits)
 */
#define LG_LANE_KERNELS(NL, VT)                                                \
    LSE_KERNEL void lg_residual##NL(const VT *yv, const VT *xv,                \
                                    const double *ak, const double *bk, VT *r, \
                                    const size_t d, const size_t dc)           \
    {                                                                          \
        for (size_t j = 0; j < d; j++) {                                       \
            VT v = yv[j] - bk[j];                                              \
            for (size_t m = 0; m < dc; m++)                                    \
                v -= ak[j * dc + m] * xv[m];                                   \
            r[j] = v;                                                          \
        }                                                                      \
    }                                                                          \
    LSE_KERNEL void lg_score##NL(const lse_gauss_work *w, size_t k,            \
                                 const VT *r, VT *out, const size_t d)         \
    {                                                                          \
        const lse_cov_type cov = w->cov;                                       \
        VT q = {0.0};                                                          \
        if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {                      \
            const size_t f = cov == LSE_COV_TIED ? 0 : k, mt = w->minv->tda;   \
            const double *mv = w->minv->data + f * d;                          \
            for (size_t j = 0; j < d; j++) {                                   \
                VT z = {0.0};                                                  \
                for (size_t m = 0; m <= j; m++)                                \
                    z += r[m] * mv[m * mt + j];                                \
                q += z * z;                                                    \
            }                                                                  \
        } else if (cov == LSE_COV_DIAG) {                                      \
            const double *inv = w->inv->data + k * w->inv->tda;                \
            for (size_t j = 0; j < d; j++) {                                   \
                const VT z = r[j] * inv[j];                                    \
                q += z * z;                                                    \
            }                                                                  \
        } else {                                                               \
            const double *inv = w->inv->data + k * w->inv->tda;                \
            for (size_t j = 0; j < d; j++)                                     \
                q += r[j] * r[j];                                              \
            q *= inv[0] * inv[0];                                              \
        }                                                                      \
        *out = w->cnst->data[k] - 0.5 * q;                                     \
    }

/* four rows per vector (the AVX2 fused pass) */
typedef double lg_v4 __attribute__((vector_size(4 * sizeof(double))));

LG_LANE_KERNELS(8, lg_v)
LG_LANE_KERNELS(4, lg_v4)

/* Where the statistics kernels take a group of LG_LN rows from: the
 * block's rows and responsibilities (sc NULL: resp, weight), or the fused
 * pass's scratch sc, gs vectors per group: the dc columns of x, then per
 * mode its responsibilities (times the row weights) and its d residuals. */
typedef struct lg_src {
    const gsl_matrix *resp;
    const gsl_vector *weight;
    const lg_v *sc;
    size_t gs;
#if LG_SHUFFLE
    int rshuf;  /* contiguous responsibility rows of K <= 4 entries: */
    lg_perm rpm; /* their column k by shuffles (lg_src_rows) */
#endif
} lg_src;

/* src of the block's rows for mode k */
LSE_KERNEL void lg_src_rows(lg_src *src, const gsl_matrix *resp,
                            const gsl_vector *weight, size_t k, size_t K)
{
    src->resp = resp;
    src->weight = weight;
    src->sc = NULL;
    src->gs = 0;
#if LG_SHUFFLE
    src->rshuf = resp->tda == K && K <= 4;
    lg_perm_make(&src->rpm, K <= 4 ? K : 1, k);
#else
    (void)k;
    (void)K;
#endif
}

/* Group i (rows i, i + LG_LN) of src for mode k: x columns, rho, r */
LSE_KERNEL void lg_group(const lse_sim_args *a, const lg_src *src, size_t i,
                         size_t i0, size_t k, size_t K, lg_v *xv, lg_v *rho,
                         lg_v *r, const size_t d, const size_t dc)
{
    if (src->sc != NULL) {
        const lg_v *g = src->sc + (i - i0) / LG_LN * src->gs;
        for (size_t m = 0; m < dc; m++)
            xv[m] = g[m];
        g += dc + k * (d + 1);
        *rho = g[0];
        for (size_t j = 0; j < d; j++)
            r[j] = g[1 + j];
        return;
    }
    const gsl_matrix *resp = src->resp;
    const gsl_vector *weight = src->weight;
    const size_t rt = resp->tda;
    const double *ak = a->param[P_A]->data + k * a->param[P_A]->tda;
    const double *bk = a->parent->data + k * a->parent->tda;
    lg_v yv[3], wt;
    lg_load8(a->child, a->context, i, yv, xv, d, dc);
#if LG_SHUFFLE
    if (src->rshuf)
        lg_rho8(rho, resp->data + i * rt, &src->rpm, K);
    else
#else
    (void)K;
#endif
        lg_col8(rho, resp->data + i * rt + k, rt);
    if (weight != NULL) {
        lg_col8(&wt, weight->data + i * weight->stride, weight->stride);
        *rho *= wt;
    }
    lg_residual8(yv, xv, ak, bk, r, d, dc);
}

/* The statistics of mode k for d = dc = 2 and a full or tied covariance
 * over the groups of rows [i0, i1) of src, one running sum per lane (rows
 * i + l into lane l): the 16 sums st (in and out) in named variables, so
 * that they stay in registers (the same operations in the same order as
 * lg_stats8_run: the same bits). */
LSE_KERNEL void lg_stats8_run22(const lse_sim_args *a, const lg_src *src,
                                size_t k, size_t K, lg_v *st, size_t i0,
                                size_t i1)
{
    const lg_v one = (lg_v){0.0} + 1.0;
    lg_v n = st[0], xx00 = st[1], xx01 = st[2], xx02 = st[3], xx11 = st[4];
    lg_v xx12 = st[5], xx22 = st[6], rx00 = st[7], rx01 = st[8];
    lg_v rx02 = st[9], rx10 = st[10], rx11 = st[11], rx12 = st[12];
    lg_v rr00 = st[13], rr10 = st[14], rr11 = st[15];
    for (size_t i = i0; i < i1; i += LG_LN) {
        lg_v xv[2], r[2], rho;
        lg_group(a, src, i, i0, k, K, xv, &rho, r, 2, 2);
        n += rho;
        const lg_v rap0 = rho * xv[0], rap1 = rho * xv[1], rap2 = rho * one;
        xx00 += rap0 * xv[0];
        xx01 += rap0 * xv[1];
        xx02 += rap0 * one;
        xx11 += rap1 * xv[1];
        xx12 += rap1 * one;
        xx22 += rap2 * one;
        const lg_v rr0 = rho * r[0], rr1 = rho * r[1];
        rx00 += rr0 * xv[0];
        rx01 += rr0 * xv[1];
        rx02 += rr0 * one;
        rr00 += rr0 * r[0];
        rx10 += rr1 * xv[0];
        rx11 += rr1 * xv[1];
        rx12 += rr1 * one;
        rr10 += rr1 * r[0];
        rr11 += rr1 * r[1];
    }
    const lg_v out[16] = {n,    xx00, xx01, xx02, xx11, xx12, xx22, rx00,
                          rx01, rx02, rx10, rx11, rx12, rr00, rr10, rr11};
    memcpy(st, out, sizeof out);
}

/* n, sxx (m x m), srx (d x m), srr (d x d) of the small sizes: at most
 * 1 + 16 + 12 + 9 running sums */
#define LG_NSUM 38

/* The statistics of mode k over the groups of rows [i0, i1) of src, one
 * running sum per lane (rows i + l into lane l) in v (in and out, layout
 * of lg_sums_out). lg_stats8_run22 for d = dc = 2, full or tied. */
LSE_KERNEL void lg_stats8_run(const lse_gauss_work *w, const lse_sim_args *a,
                              const lg_src *src, size_t k, lg_v *v, size_t i0,
                              size_t i1, const size_t d, const size_t dc)
{
    const size_t m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    if (d == 2 && dc == 2 && tri) {
        lg_stats8_run22(a, src, k, w->n_comp, v, i0, i1);
        return;
    }
    lg_v *vn = v, *vxx = v + 1, *vrx = vxx + m * m, *vrr = vrx + d * m;
    for (size_t i = i0; i < i1; i += LG_LN) {
        lg_v xv[4], r[3], rho;
        lg_group(a, src, i, i0, k, w->n_comp, xv, &rho, r, d, dc);
        xv[dc] = (lg_v){0.0} + 1.0; /* a = [x, 1] */
        *vn += rho;
        for (size_t p = 0; p < m; p++) {
            const lg_v rap = rho * xv[p];
            for (size_t q = p; q < m; q++)
                vxx[p * m + q] += rap * xv[q];
        }
        for (size_t j = 0; j < d; j++) {
            const lg_v rr = rho * r[j];
            for (size_t p = 0; p < m; p++)
                vrx[j * m + p] += rr * xv[p];
            if (tri) {
                for (size_t l = 0; l <= j; l++)
                    vrr[j * d + l] += rr * r[l];
            } else if (cov == LSE_COV_DIAG) {
                vrr[j] += rr * r[j];
            } else {
                vrr[0] += rr * r[j];
            }
        }
    }
}

/* The running sums v of lg_stats8_run, their lanes summed (lg_hsum), into
 * loc: n | sxx (m x m, upper) | srx (d x m) | srr (lower of d x d, or d,
 * or 1); loc's other entries untouched. */
LSE_KERNEL void lg_sums_out(const lse_gauss_work *w, const lg_v *v,
                            double *loc, const size_t d, const size_t dc)
{
    const size_t m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    if (d == 2 && dc == 2 && tri) {
        /* lg_stats8_run22's order */
        static const unsigned char at[16] = {0,  1,  2,  3,  5,  6,  9,  10,
                                             11, 12, 13, 14, 15, 16, 18, 19};
        for (size_t p = 0; p < 16; p++)
            loc[at[p]] = lg_hsum(&v[p]);
        return;
    }
    const size_t s2 = tri ? d * d : cov == LSE_COV_DIAG ? d : 1;
    const size_t nv = 1 + m * m + d * m + s2;
    for (size_t p = 0; p < nv; p++)
        loc[p] = lg_hsum(&v[p]);
}

/* Largest d * (dc + 1) + (dc + 1)^2 + d^2 + 1 kept in local accumulators
 * by the statistics loop (the small-size copies). */
#define LG_LOCAL 64

/* A block's sums loc of mode k (layout of lg_sums_out, zeros where not
 * written) added to acc (layout of stats_size). */
LSE_KERNEL void lg_stats_add(const lse_gauss_work *w, double *acc, size_t k,
                             const double *loc, const size_t d,
                             const size_t dc)
{
    const size_t K = w->n_comp, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const size_t s2 = tri ? d * d : cov == LSE_COV_DIAG ? d : 1;
    double *axx = acc + K, *arx = axx + K * m * m, *arr = arx + K * d * m;
    double *sxx = axx + k * m * m, *srx = arx + k * d * m;
    double *srr = arr + (cov == LSE_COV_TIED ? 0 : k * s2);
    const double *lxx = loc + 1, *lrx = lxx + m * m, *lrr = lrx + d * m;
    acc[k] += loc[0];
    for (size_t p = 0; p < m * m; p++)
        sxx[p] += lxx[p];
    for (size_t p = 0; p < d * m; p++)
        srx[p] += lrx[p];
    for (size_t p = 0; p < s2; p++)
        srr[p] += lrr[p];
}

/* The mirrored halves of acc's symmetric blocks: sxx was summed in its
 * upper, srr in its lower part. */
LSE_KERNEL void lg_stats_mirror(const lse_gauss_work *w, double *acc,
                                const size_t d, const size_t dc)
{
    const size_t K = w->n_comp, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const size_t s2 = tri ? d * d : cov == LSE_COV_DIAG ? d : 1;
    double *axx = acc + K, *arr = axx + K * m * m + K * d * m;
    for (size_t k = 0; k < K; k++) {
        double *sxx = axx + k * m * m;
        for (size_t p = 0; p < m; p++)
            for (size_t q = p + 1; q < m; q++)
                sxx[q * m + p] = sxx[p * m + q];
        if (!tri || (cov == LSE_COV_TIED && k > 0))
            continue;
        double *srr = arr + k * s2;
        for (size_t j = 0; j < d; j++)
            for (size_t l = j + 1; l < d; l++)
                srr[j * d + l] = srr[l * d + j];
    }
}

#endif /* LSEGRAPH_LINGAUSS_PRIVATE_H */
