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
 * steps: the same bits (test lingauss_fused).
 */

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

/* lgf_body with K a constant */
LSE_TARGET_AVX512
LSE_KERNEL int lgf_k(const lse_gauss_work *w, const lse_sim_args *a,
                     const double *weight, double *lse, double *acc,
                     const size_t d, const size_t dc)
{
    switch (w->n_comp) {
    case 1:
        return lgf_body(w, a, weight, lse, acc, d, dc, 1);
    case 2:
        return lgf_body(w, a, weight, lse, acc, d, dc, 2);
    case 3:
        return lgf_body(w, a, weight, lse, acc, d, dc, 3);
    default:
        return lgf_body(w, a, weight, lse, acc, d, dc, 4);
    }
}

LSE_TARGET_AVX512
static int lgf_avx512(const lse_gauss_work *w, const lse_sim_args *a,
                      const double *weight, double *lse, double *acc)
{
    const size_t d = w->dim, dc = w->dim_ctx;
    if (d == 1 && dc == 1)
        return lgf_k(w, a, weight, lse, acc, 1, 1);
    if (d == 1 && dc == 2)
        return lgf_k(w, a, weight, lse, acc, 1, 2);
    if (d == 2 && dc == 2)
        return lgf_k(w, a, weight, lse, acc, 2, 2);
    return lgf_k(w, a, weight, lse, acc, 3, 3);
}
#endif

/* The block suits the pass: the shapes eval checks, a prepared workspace
 * running the AVX-512 copies, a small size, K <= 4, a multiple of LG_LN
 * rows. */
static int suits(const lse_gauss_work *w, const lse_sim_args *a)
{
    if (w == NULL || a == NULL || a->child == NULL || a->parent == NULL ||
        a->context == NULL || a->param == NULL || a->param[P_A] == NULL ||
        !w->prepared || w->fma != 2)
        return 0;
    const size_t b = a->child->size1, d = w->dim, dc = w->dim_ctx;
    const size_t K = w->n_comp;
    const gsl_matrix *am = a->param[P_A];
    const int small = (d == 1 && dc == 1) || (d == 1 && dc == 2) ||
                      (d == 2 && dc == 2) || (d == 3 && dc == 3);
    return small && K >= 1 && K <= 4 && b >= LG_LN && b % LG_LN == 0 &&
           b <= w->block && a->child->size2 == d && a->parent->size1 == K &&
           a->parent->size2 == d && a->context->size1 == b &&
           a->context->size2 == dc && am->size1 == K && am->size2 == d * dc;
}

int lse_lingauss_fused(const lse_sim_args *a, const double *weight,
                       double *lse, double *acc)
{
#if LSE_HAVE_AVX2_PATH && LG_SHUFFLE
    const lse_gauss_work *w = a != NULL ? a->work : NULL;
    if (!suits(w, a) || lse == NULL || acc == NULL)
        return 0;
    return lgf_avx512(w, a, weight, lse, acc);
#else
    (void)suits;
    (void)a;
    (void)weight;
    (void)lse;
    (void)acc;
    return 0;
#endif
}
