#include <math.h>
#include <string.h>

#include "lingauss-fused-private.h"
#include "lingauss-private.h"

/*
 * The fused block pass of lse_sim_lingauss (lingauss-fused-private.h,
 * docs/performance.md "Linear-Gaussian similarity (SLDS)"). The separate
 * steps of an E-step with statistics write the scores S of a block row by
 * row (eval), check them, read them back for the softmax (lib/softmax.c's
 * softmax_cols8: eight rows in the lanes of a vector, permuted in and out)
 * and read the responsibilities back again, permuted, for the statistics,
 * which compute the residuals a second time. Here, in tiles of LG_TILE
 * groups of LG_LN rows: the residuals and scores of a group in the lanes
 * (lg_residual8, lg_score8), the softmax with the rows in the lanes
 * (softmax_cols8's operations in its order, beta 1), and the group's x
 * columns, responsibilities (times the row weights) and residuals to a
 * scratch in L1; then the statistics of each mode over the tile from the
 * scratch (lg_stats8_run, running sums per lane kept across the tiles of
 * the block). The same operations in the same order as the separate
 * steps: the same bits (test lingauss_fused). The AVX2 + FMA copy below
 * (lgf4_*) does the same with four rows per vector, after the AVX2
 * separate steps.
 */

/* A copy's entry FN: its body BODY (K the last argument) called with K
 * (1 to 4, by KFN) and the shapes (d, dc) suits admits as constants, so
 * that the compiler unrolls their loops; TARGET the copy's target. */
#define LGF_ENTRY(FN, KFN, BODY, TARGET)                                       \
    TARGET LSE_KERNEL int KFN(const lse_gauss_work *w, const lse_sim_args *a,  \
                              const double *weight, double *lse, double *acc,  \
                              const size_t d, const size_t dc)                 \
    {                                                                          \
        switch (w->n_comp) {                                                   \
        case 1:                                                                \
            return BODY(w, a, weight, lse, acc, d, dc, 1);                     \
        case 2:                                                                \
            return BODY(w, a, weight, lse, acc, d, dc, 2);                     \
        case 3:                                                                \
            return BODY(w, a, weight, lse, acc, d, dc, 3);                     \
        default:                                                               \
            return BODY(w, a, weight, lse, acc, d, dc, 4);                     \
        }                                                                      \
    }                                                                          \
    TARGET static int FN(const lse_gauss_work *w, const lse_sim_args *a,       \
                         const double *weight, double *lse, double *acc)       \
    {                                                                          \
        const size_t d = w->dim, dc = w->dim_ctx;                              \
        if (d == 1 && dc == 1)                                                 \
            return KFN(w, a, weight, lse, acc, 1, 1);                          \
        if (d == 1 && dc == 2)                                                 \
            return KFN(w, a, weight, lse, acc, 1, 2);                          \
        if (d == 2 && dc == 2)                                                 \
            return KFN(w, a, weight, lse, acc, 2, 2);                          \
        return KFN(w, a, weight, lse, acc, 3, 3);                              \
    }

#if LSE_HAVE_AVX2_PATH && LG_SHUFFLE

#define LG_TILE 16          /* groups of LG_LN rows per tile */
#define LG_GMAX (3 + 4 * 4) /* scratch vectors per group: dc + K (d + 1) */

/* softmax_cols8's arithmetic on the K <= 4 score vectors c of LG_LN rows
 * (beta 1: the product by beta is exact and left out): c becomes the
 * responsibilities, mx the row maxima, tot the row sums of the
 * exponentials (1 for a row of -INFINITY scores). */
LSE_TARGET_AVX512
LSE_KERNEL void lgf_softmax(lg_v *c, const size_t K, double *mx_out,
                            double *tot_out)
{
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    __m512d v[4];
    for (size_t j = 0; j < 4; j++)
        v[j] = j < K ? (__m512d)c[j] : ninf;
    /* _mm512_reduce_max_pd's order: max(max(c2, c0), max(c3, c1)) */
    const __m512d mx =
        _mm512_max_pd(_mm512_max_pd(v[2], v[0]), _mm512_max_pd(v[3], v[1]));
    /* a row of -INFINITY keeps them (exp gives 0) */
    const __mmask8 allm = _mm512_cmp_pd_mask(mx, ninf, _CMP_EQ_OQ);
    const __m512d sh = _mm512_mask_mov_pd(mx, allm, _mm512_setzero_pd());
    for (size_t j = 0; j < 4; j++)
        v[j] = j < K ? lse_exp_nonpos8(_mm512_sub_pd(v[j], sh))
                     : _mm512_setzero_pd();
    /* _mm512_reduce_add_pd's order: (c2 + c0) + (c3 + c1) */
    __m512d tot = _mm512_add_pd(_mm512_add_pd(v[2], v[0]),
                                _mm512_add_pd(v[3], v[1]));
    const __mmask8 pos =
        _mm512_cmp_pd_mask(tot, _mm512_setzero_pd(), _CMP_GT_OQ);
    tot = _mm512_mask_mov_pd(_mm512_set1_pd(1.0), pos, tot);
    _mm512_storeu_pd(mx_out, mx);
    _mm512_storeu_pd(tot_out, tot);
    const __m512d inv = _mm512_div_pd(_mm512_set1_pd(1.0), tot);
    for (size_t j = 0; j < K; j++)
        c[j] = (lg_v)_mm512_mul_pd(v[j], inv);
}

/* Group i0 (rows i0 .. i0 + LG_LN - 1): scores, softmax, and the scratch g
 * (the dc x columns, then per mode rho and the d residuals); mx, tot of
 * lgf_softmax. Returns the lanes whose K scores are neither NaN nor
 * +INFINITY. */
LSE_TARGET_AVX512
LSE_KERNEL __mmask8 lgf_group(const lse_gauss_work *w, const lse_sim_args *a,
                              const double *weight, size_t i0, lg_v *g,
                              double *mx, double *tot, const size_t d,
                              const size_t dc, const size_t K)
{
    const gsl_matrix *am = a->param[P_A], *bm = a->parent;
    lg_v yv[3], xv[3], sk[4], r[4][3];
    lg_load8(a->child, a->context, i0, yv, xv, d, dc);
    __mmask8 ok = 0xff;
    for (size_t k = 0; k < K; k++) {
        lg_residual8(yv, xv, am->data + k * am->tda, bm->data + k * bm->tda,
                     r[k], d, dc);
        lg_score8(w, k, r[k], &sk[k], d);
        ok &= _mm512_cmp_pd_mask((__m512d)sk[k],
                                 _mm512_set1_pd(INFINITY), _CMP_LT_OQ);
    }
    lgf_softmax(sk, K, mx, tot);
    if (weight != NULL) {
        lg_v wt;
        memcpy(&wt, weight + i0, sizeof wt);
        for (size_t k = 0; k < K; k++)
            sk[k] *= wt;
    }
    for (size_t m = 0; m < dc; m++)
        g[m] = xv[m];
    for (size_t k = 0; k < K; k++) {
        lg_v *gk = g + dc + k * (d + 1);
        gk[0] = sk[k];
        for (size_t j = 0; j < d; j++)
            gk[1 + j] = r[k][j];
    }
    return ok;
}

/* The block (a multiple of LG_LN rows). 1: done; 0: a score is NaN or
 * +INFINITY (acc untouched, lse partly written). */
LSE_TARGET_AVX512
LSE_KERNEL int lgf_body(const lse_gauss_work *w, const lse_sim_args *a,
                        const double *weight, double *lse, double *acc,
                        const size_t d, const size_t dc, const size_t K)
{
    const size_t b = a->child->size1;
    const size_t gs = dc + K * (d + 1), tile = LG_TILE * LG_LN;
    lg_v sc[LG_TILE * LG_GMAX], sums[4][LG_NSUM];
    double mx[LG_TILE * LG_LN], tot[LG_TILE * LG_LN];
    const int tri = w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED;
    const size_t s2 = tri ? d * d : w->cov == LSE_COV_DIAG ? d : 1;
    const size_t nsum = d == 2 && dc == 2 && tri
                            ? 16
                            : 1 + (dc + 1) * (dc + 1) + d * (dc + 1) + s2;
    for (size_t k = 0; k < K; k++)
        memset(sums[k], 0, nsum * sizeof sums[k][0]);
    const lg_src src = {.sc = sc, .gs = gs};
    __mmask8 ok = 0xff;
    for (size_t t0 = 0; t0 < b; t0 += tile) {
        const size_t n = b - t0 < tile ? b - t0 : tile;
        for (size_t i = 0; i < n; i += LG_LN)
            ok &= lgf_group(w, a, weight, t0 + i, sc + i / LG_LN * gs,
                            mx + i, tot + i, d, dc, K);
        /* lib/softmax.c's log-sum-exp with beta 1 */
        for (size_t i = 0; i < n; i++)
            lse[t0 + i] = mx[i] + lse_log_pos(tot[i]);
        for (size_t k = 0; k < K; k++)
            lg_stats8_run(w, a, &src, k, sums[k], t0, t0 + n, d, dc);
    }
    if (ok != 0xff)
        return 0;
    for (size_t k = 0; k < K; k++) {
        double loc[LG_LOCAL] = {0.0};
        lg_sums_out(w, sums[k], loc, d, dc);
        lg_stats_add(w, acc, k, loc, d, dc);
    }
    lg_stats_mirror(w, acc, d, dc);
    return 1;
}

LGF_ENTRY(lgf_avx512, lgf_k, lgf_body, LSE_TARGET_AVX512)
#endif

#if LSE_HAVE_AVX2_PATH
/*
 * The AVX2 + FMA copy: four rows per vector (lg_v4), the operations of the
 * AVX2 separate steps in their order. eval and stats run their row loops
 * there (lg_eval_body, lg_stats_mode: every entry one scalar chain over
 * the rows of the block), the softmax softmax_tr4 (lib/softmax.c: four
 * rows in the lanes). Per group of four rows: the residuals and scores in
 * the lanes (lg_residual4, lg_score4: lg_eval_body's arithmetic lane by
 * lane), softmax_tr4's arithmetic (lgf4_softmax), then the products of
 * lg_stats_mode lane by lane, transposed by fours so that a vector holds
 * four statistics of one row, added row after row to running sums whose
 * lanes are the statistics (lgf4_stats): each statistic is the scalar
 * chain of the row loop, the same bits.
 */

#define LGF4_TILE 64 /* rows per tile (16 groups of 4) */
#define LGF4_GMAX (3 + 4 * 4) /* scratch vectors per group: dc + K (d + 1) */
#define LGF4_NQ 8 /* vectors of running sums per mode: 1 + 10 + 12 + 6 */

/* Column loads of four rows: o[c] lane l = p[l t + c], c < n (two rows of
 * two entries per vector by unpacks and a permute when contiguous) */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_cols(lg_v4 *o, const double *p, const size_t t,
                          const size_t n)
{
    if (t == 1 && n == 1) {
        o[0] = (lg_v4)_mm256_loadu_pd(p);
        return;
    }
    if (t == 2 && n == 2) {
        const __m256d v0 = _mm256_loadu_pd(p), v1 = _mm256_loadu_pd(p + 4);
        /* (p0, p4, p2, p6), (p1, p5, p3, p7) to lanes 0, 2, 1, 3 */
        o[0] = (lg_v4)_mm256_permute4x64_pd(_mm256_unpacklo_pd(v0, v1), 0xd8);
        o[1] = (lg_v4)_mm256_permute4x64_pd(_mm256_unpackhi_pd(v0, v1), 0xd8);
        return;
    }
    for (size_t c = 0; c < n; c++)
        o[c] = (lg_v4){p[c], p[t + c], p[2 * t + c], p[3 * t + c]};
}

/* softmax_tr4's arithmetic for one vector of K <= 4 columns (nvec 1,
 * beta 1: the product by beta is exact and left out) on the K score
 * vectors c of four rows: c becomes the responsibilities, mx the row
 * maxima, tot the sums of the exponentials (1 for a row of -INFINITY). */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_softmax(lg_v4 *c, const size_t K, double *mx_out,
                             double *tot_out)
{
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
    const __m256d zero = _mm256_setzero_pd();
    __m256d v[4];
    for (size_t j = 0; j < 4; j++)
        v[j] = j < K ? (__m256d)c[j] : ninf;
    const __m256d mx =
        _mm256_max_pd(_mm256_max_pd(v[0], v[2]), _mm256_max_pd(v[1], v[3]));
    /* a row of -INFINITY keeps them (exp gives 0) */
    const __m256d sh =
        _mm256_andnot_pd(_mm256_cmp_pd(mx, ninf, _CMP_EQ_OQ), mx);
    for (size_t j = 0; j < 4; j++)
        v[j] = j < K ? lse_exp_nonpos4(_mm256_sub_pd(v[j], sh)) : zero;
    __m256d tot =
        _mm256_add_pd(_mm256_add_pd(v[0], v[2]), _mm256_add_pd(v[1], v[3]));
    tot = _mm256_blendv_pd(_mm256_set1_pd(1.0), tot,
                           _mm256_cmp_pd(tot, zero, _CMP_GT_OQ));
    _mm256_storeu_pd(mx_out, mx);
    _mm256_storeu_pd(tot_out, tot);
    const __m256d inv = _mm256_div_pd(_mm256_set1_pd(1.0), tot);
    for (size_t j = 0; j < K; j++)
        c[j] = (lg_v4)_mm256_mul_pd(v[j], inv);
}

/* In-register transpose of four vectors of four (lib/softmax.c's tr4) */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_tr(const lg_v4 *p, __m256d *r)
{
    const __m256d t0 = _mm256_unpacklo_pd((__m256d)p[0], (__m256d)p[1]);
    const __m256d t1 = _mm256_unpackhi_pd((__m256d)p[0], (__m256d)p[1]);
    const __m256d t2 = _mm256_unpacklo_pd((__m256d)p[2], (__m256d)p[3]);
    const __m256d t3 = _mm256_unpackhi_pd((__m256d)p[2], (__m256d)p[3]);
    /* the low halves by inserts, cheaper than lane-crossing permutes on
     * Zen 3 (3 % of the pass measured) */
    r[0] = _mm256_insertf128_pd(t0, _mm256_castpd256_pd128(t2), 1);
    r[1] = _mm256_insertf128_pd(t1, _mm256_castpd256_pd128(t3), 1);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/* The statistics of one mode for four rows (x columns xv, rho the
 * responsibilities times the row weights, r the residuals): lg_stats_mode's
 * products lane by lane, in its order into slots (n, sxx upper, then per j
 * srx and srr), transposed by fours and added row after row to the running
 * sums v (lane s % 4 of v[s / 4]: slot s). A spherical srr takes d products
 * per row into one sum: its scalar chain in sph. */
enum { LGF4_TRI, LGF4_DIAG, LGF4_SPH }; /* srr: lower of d x d, d, 1 */

LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_stats(const int cls, const lg_v4 *xv, const lg_v4 rho,
                           const lg_v4 *r, __m256d *v, double *sph,
                           const size_t d, const size_t dc)
{
    const size_t m = dc + 1;
    lg_v4 a[4], p[4 * LGF4_NQ];
    for (size_t q = 0; q < dc; q++)
        a[q] = xv[q];
    a[dc] = (lg_v4){0.0} + 1.0; /* a = [x, 1] */
    size_t s = 0;
    p[s++] = rho;
    for (size_t u = 0; u < m; u++) {
        const lg_v4 rap = rho * a[u];
        for (size_t q = u; q < m; q++)
            p[s++] = rap * a[q];
    }
    for (size_t j = 0; j < d; j++) {
        const lg_v4 rr = rho * r[j];
        for (size_t u = 0; u < m; u++)
            p[s++] = rr * a[u];
        if (cls == LGF4_TRI)
            for (size_t l = 0; l <= j; l++)
                p[s++] = rr * r[l];
        else if (cls == LGF4_DIAG)
            p[s++] = rr * r[j];
    }
    for (; s % 4 != 0; s++)
        p[s] = (lg_v4){0.0};
    for (size_t q = 0; q < s / 4; q++) {
        __m256d t[4];
        lgf4_tr(p + 4 * q, t);
        v[q] = _mm256_add_pd(
            _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(v[q], t[0]), t[1]),
                          t[2]),
            t[3]);
    }
    if (cls == LGF4_SPH) {
        lg_v4 ps[3];
        for (size_t j = 0; j < d; j++)
            ps[j] = (rho * r[j]) * r[j];
        for (size_t l = 0; l < 4; l++)
            for (size_t j = 0; j < d; j++)
                *sph += ps[j][l];
    }
}

/* The running sums v (and sph) of mode k added to acc (layout of
 * stats_size), each entry as lg_stats_add adds the row loop's sum; the
 * halves that lg_stats_mirror overwrites are left out. */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_add(const lse_gauss_work *w, const __m256d *v,
                         double sph, double *acc, size_t k, const size_t d,
                         const size_t dc)
{
    const size_t K = w->n_comp, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const size_t s2 = tri ? d * d : cov == LSE_COV_DIAG ? d : 1;
    double *sxx = acc + K + k * m * m, *srx = acc + K + K * m * m + k * d * m;
    double *srr = acc + K + K * m * m + K * d * m +
                  (cov == LSE_COV_TIED ? 0 : k * s2);
    double sl[4 * LGF4_NQ];
    memcpy(sl, v, sizeof sl);
    size_t s = 0;
    acc[k] += sl[s++];
    for (size_t u = 0; u < m; u++)
        for (size_t q = u; q < m; q++)
            sxx[u * m + q] += sl[s++];
    for (size_t j = 0; j < d; j++) {
        for (size_t u = 0; u < m; u++)
            srx[j * m + u] += sl[s++];
        if (tri)
            for (size_t l = 0; l <= j; l++)
                srr[j * d + l] += sl[s++];
        else if (cov == LSE_COV_DIAG)
            srr[j] += sl[s++];
    }
    if (cov == LSE_COV_SPHERICAL)
        srr[0] += sph;
}

/* lg_score4 without its additions to zero: the first term of each sum
 * starts it. A sum z of products can then differ from lg_score4's only
 * in the sign of a zero (+0 + -0 is +0), which z * z removes, and
 * 0 + z * z is z * z (never -0): the same scores, bit for bit, with 3 of
 * the 12 vector operations of a full-covariance mode (d = 2) less. */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_score(const lse_gauss_work *w, size_t k,
                           const lg_v4 *r, lg_v4 *out, const size_t d)
{
    const lse_cov_type cov = w->cov;
    lg_v4 q = {0.0, 0.0, 0.0, 0.0}; /* (set at j = 0; d >= 1) */
    if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
        const size_t f = cov == LSE_COV_TIED ? 0 : k, mt = w->minv->tda;
        const double *mv = w->minv->data + f * d;
        for (size_t j = 0; j < d; j++) {
            lg_v4 z = r[0] * mv[j];
            for (size_t m = 1; m <= j; m++)
                z += r[m] * mv[m * mt + j];
            q = j == 0 ? z * z : q + z * z;
        }
    } else if (cov == LSE_COV_DIAG) {
        const double *inv = w->inv->data + k * w->inv->tda;
        for (size_t j = 0; j < d; j++) {
            const lg_v4 z = r[j] * inv[j];
            q = j == 0 ? z * z : q + z * z;
        }
    } else {
        const double *inv = w->inv->data + k * w->inv->tda;
        for (size_t j = 0; j < d; j++)
            q = j == 0 ? r[j] * r[j] : q + r[j] * r[j];
        q *= inv[0] * inv[0];
    }
    *out = w->cnst->data[k] - 0.5 * q;
}

/* Group i0 (rows i0 .. i0 + 3): its scores to the scratch g (the dc x
 * columns, then per mode the scores and the d residuals). Returns the
 * lanes (bits) whose K scores are neither NaN nor +INFINITY. */
LSE_TARGET_AVX2_FMA
LSE_KERNEL int lgf4_scores(const lse_gauss_work *w, const lse_sim_args *a,
                           size_t i0, lg_v4 *g, const size_t d,
                           const size_t dc, const size_t K)
{
    const gsl_matrix *am = a->param[P_A], *bm = a->parent;
    const gsl_matrix *y = a->child, *x = a->context;
    lg_v4 yv[3];
    lgf4_cols(yv, y->data + i0 * y->tda, y->tda, d);
    lgf4_cols(g, x->data + i0 * x->tda, x->tda, dc);
    int ok = 0xf;
    for (size_t k = 0; k < K; k++) {
        lg_v4 *gk = g + dc + k * (d + 1);
        lg_residual4(yv, g, am->data + k * am->tda, bm->data + k * bm->tda,
                     gk + 1, d, dc);
        lgf4_score(w, k, gk + 1, gk, d);
        ok &= _mm256_movemask_pd(_mm256_cmp_pd(
            (__m256d)gk[0], _mm256_set1_pd(INFINITY), _CMP_LT_OQ));
    }
    return ok;
}

/* Group i0's softmax from its scores in the scratch g: mx, tot of
 * lgf4_softmax, the responsibilities times the row weights over the
 * scores */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_resp(const double *weight, size_t i0, lg_v4 *g,
                          double *mx, double *tot, const size_t d,
                          const size_t dc, const size_t K)
{
    lg_v4 sk[4];
    for (size_t k = 0; k < K; k++)
        sk[k] = g[dc + k * (d + 1)];
    lgf4_softmax(sk, K, mx, tot);
    if (weight != NULL) {
        const lg_v4 wt = (lg_v4)_mm256_loadu_pd(weight + i0);
        for (size_t k = 0; k < K; k++)
            sk[k] *= wt;
    }
    for (size_t k = 0; k < K; k++)
        g[dc + k * (d + 1)] = sk[k];
}

/* The statistics of mode k over the ng groups of the scratch sc (gs
 * vectors per group), the running sums v (in and out) in locals */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void lgf4_stats_run(const int cls, const lg_v4 *sc, size_t gs,
                               size_t ng, size_t k, __m256d *v, double *sph,
                               const size_t d, const size_t dc)
{
    __m256d t[LGF4_NQ];
    double ts = *sph;
    memcpy(t, v, sizeof t);
    for (size_t i = 0; i < ng; i++) {
        const lg_v4 *g = sc + i * gs, *gk = g + dc + k * (d + 1);
        lgf4_stats(cls, g, gk[0], gk + 1, t, &ts, d, dc);
    }
    memcpy(v, t, sizeof t);
    *sph = ts;
}

/* The block (a multiple of 4 rows), in tiles of LGF4_TILE rows: the
 * scores of the tile's groups to the scratch, their softmax, then the
 * statistics of each mode over the tile. 1: done; 0: a score is NaN or +INFINITY (acc
 * untouched, lse partly written). */
LSE_TARGET_AVX2_FMA
LSE_KERNEL int lgf4_body(const lse_gauss_work *w, const lse_sim_args *a,
                         const double *weight, double *lse, double *acc,
                         const size_t d, const size_t dc, const size_t K)
{
    const size_t b = a->child->size1, gs = dc + K * (d + 1);
    const lse_cov_type cov = w->cov;
    const int cls = cov == LSE_COV_FULL || cov == LSE_COV_TIED ? LGF4_TRI
                    : cov == LSE_COV_DIAG                      ? LGF4_DIAG
                                                               : LGF4_SPH;
    lg_v4 sc[LGF4_TILE / 4 * LGF4_GMAX];
    __m256d v[4][LGF4_NQ];
    double sph[4] = {0.0}, tot[LGF4_TILE];
    memset(v, 0, sizeof v);
    int ok = 0xf;
    for (size_t t0 = 0; t0 < b; t0 += LGF4_TILE) {
        const size_t n = b - t0 < LGF4_TILE ? b - t0 : LGF4_TILE;
        /* loops over the tile's groups with short chains of dependent
         * operations, so that the groups overlap */
        for (size_t i = 0; i < n; i += 4)
            ok &= lgf4_scores(w, a, t0 + i, sc + i / 4 * gs, d, dc, K);
        for (size_t i = 0; i < n; i += 4)
            lgf4_resp(weight, t0 + i, sc + i / 4 * gs, lse + t0 + i, tot + i,
                      d, dc, K);
        /* softmax_narrow_body's log-sum-exp with beta 1 */
        for (size_t i = 0; i < n; i += 4)
            _mm256_storeu_pd(
                lse + t0 + i,
                _mm256_add_pd(_mm256_loadu_pd(lse + t0 + i),
                              lse_log_pos4(_mm256_loadu_pd(tot + i))));
        /* the statistics' slots made constants for each case */
        for (size_t k = 0; k < K; k++)
            if (cls == LGF4_TRI)
                lgf4_stats_run(LGF4_TRI, sc, gs, n / 4, k, v[k], &sph[k], d,
                               dc);
            else if (cls == LGF4_DIAG)
                lgf4_stats_run(LGF4_DIAG, sc, gs, n / 4, k, v[k], &sph[k], d,
                               dc);
            else
                lgf4_stats_run(LGF4_SPH, sc, gs, n / 4, k, v[k], &sph[k], d,
                               dc);
    }
    if (ok != 0xf)
        return 0;
    for (size_t k = 0; k < K; k++)
        lgf4_add(w, v[k], sph[k], acc, k, d, dc);
    lg_stats_mirror(w, acc, d, dc);
    return 1;
}

LGF_ENTRY(lgf_avx2, lgf4_k, lgf4_body, LSE_TARGET_AVX2_FMA)
#endif

/* The block suits the pass: the shapes eval checks, a prepared workspace
 * running the AVX-512 copies (w->fma 2) or the AVX2 + FMA ones (1), a
 * small size, K <= 4, a multiple of the rows per vector (8 or 4). */
static int suits(const lse_gauss_work *w, const lse_sim_args *a)
{
    if (w == NULL || a == NULL || a->child == NULL || a->parent == NULL ||
        a->context == NULL || a->param == NULL || a->param[P_A] == NULL ||
        !w->prepared || w->fma == 0)
        return 0;
    const size_t b = a->child->size1, d = w->dim, dc = w->dim_ctx;
    const size_t K = w->n_comp;
    const gsl_matrix *am = a->param[P_A];
    const int small = (d == 1 && dc == 1) || (d == 1 && dc == 2) ||
                      (d == 2 && dc == 2) || (d == 3 && dc == 3);
    const size_t ln = w->fma == 2 ? LG_LN : 4;
    return small && K >= 1 && K <= 4 && b >= ln && b % ln == 0 &&
           b <= w->block && a->child->size2 == d && a->parent->size1 == K &&
           a->parent->size2 == d && a->context->size1 == b &&
           a->context->size2 == dc && am->size1 == K && am->size2 == d * dc;
}

int lse_lingauss_fused(const lse_sim_args *a, const double *weight,
                       double *lse, double *acc)
{
#if LSE_HAVE_AVX2_PATH
    const lse_gauss_work *w = a != NULL ? a->work : NULL;
    if (!suits(w, a) || lse == NULL || acc == NULL)
        return 0;
    if (w->fma == 2)
#if LG_SHUFFLE
        return lgf_avx512(w, a, weight, lse, acc);
#else
        return 0; /* no AVX-512 copy without GCC's shuffles */
#endif
    return lgf_avx2(w, a, weight, lse, acc);
#else
    (void)suits;
    (void)a;
    (void)weight;
    (void)lse;
    (void)acc;
    return 0;
#endif
}
