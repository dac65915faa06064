#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gauss-private.h"
#include "kernels-private.h"

#if LSE_HAVE_AVX2_PATH
#include <immintrin.h> /* only inside LSE_TARGET_* functions */
#endif

/* The vectorized kernels of lse_sim_gaussian's E- and M-step statistics
 * (gauss_common.c chooses the path and calls them): the monomials V of the
 * quadratic path, V Q and V' R on tiles of rows and components (AVX2 + FMA
 * and AVX-512 copies), and the fused loops of the diagonal and spherical
 * covariances. A plain copy and an AVX2 copy share each LSE_KERNEL body;
 * the caller's workspace says which copy this machine runs (w->avx2,
 * w->fma), chosen once so that the bits never change between calls.
 * docs/performance.md. */

/* V rows of the b rows x (tda xt) into vd (tda vt):
 *   full/tied [1, y', vech(y y')'] in the order (0,0) (0,1) .. (0,d-1)
 *   (1,1) ..; diag [1, y', (y.^2)']; spherical [1, y', |y|^2]. */
LSE_KERNEL void fast_rows_body(const lse_gauss_work *w, const double *x,
                               size_t xt, size_t b, double *vd, size_t vt,
                               const size_t d)
{
    const double *restrict c = w->center->data;
    const lse_cov_type cov = w->cov;
    for (size_t i = 0; i < b; i++) {
        const double *restrict xi = x + i * xt;
        double *restrict v = vd + i * vt;
        double *restrict y = v + 1;
        v[0] = 1.0;
        for (size_t j = 0; j < d; j++)
            y[j] = xi[j] - c[j];
        double *restrict p = y + d;
        if (cov == LSE_COV_DIAG) {
            for (size_t j = 0; j < d; j++)
                p[j] = y[j] * y[j];
        } else if (cov == LSE_COV_SPHERICAL) {
            p[0] = lse_gauss_sq_norm(y, d);
        } else {
            for (size_t a = 0; a < d; a++) {
                const double ya = y[a];
                const size_t n = d - a;
                const double *restrict yb = y + a;
                for (size_t q = 0; q < n; q++)
                    p[q] = ya * yb[q];
                p += n;
            }
        }
    }
}

static void fast_rows_plain(const lse_gauss_work *w, const gsl_matrix *x)
{
    fast_rows_body(w, x->data, x->tda, x->size1, w->vblk->data, w->vblk->tda,
                   w->dim);
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX2
static void fast_rows_avx2(const lse_gauss_work *w, const gsl_matrix *x)
{
    fast_rows_body(w, x->data, x->tda, x->size1, w->vblk->data, w->vblk->tda,
                   w->dim);
}

/* fast_rows_body of full and tied covariances for 4 < d <= 16 with AVX2:
 * y = x - c in up to four vectors (a masked load for the last), then
 * vech(y y') segment by segment from the last (a = d - 1) to the first,
 * each segment a as y_a times the vectors of y from the one holding y_a
 * on, stored so that lane b lands on p_a + (b - a). The lanes b < a of
 * the first vector land on the end of the segments before a, which are
 * stored after it; the last vector stops at d, so no store reaches a
 * segment stored before. The scalar loop spent more on its loop control
 * than on the products (a/full: a fifth of an EM iteration). The same
 * products y_a y_b: the same bits. */
LSE_TARGET_AVX2_FMA
static inline void vech16_body(const lse_gauss_work *w, const double *x,
                               size_t xt, size_t nr, double *vd, size_t vt,
                               const size_t nvec)
{
    const size_t d = w->dim, rem = d - 4 * (nvec - 1);
    const double *c = w->center->data;
    const __m256i tail = lse_lanes4_mask(rem);
    __m256d cv[4];
    for (size_t m = 0; m + 1 < nvec; m++)
        cv[m] = _mm256_loadu_pd(c + 4 * m);
    cv[nvec - 1] = _mm256_maskload_pd(c + 4 * (nvec - 1), tail);
    for (size_t i = 0; i < nr; i++) {
        const double *xi = x + i * xt;
        double *v = vd + i * vt, *y = v + 1;
        __m256d yv[4];
        v[0] = 1.0;
        /* whole stores: the lanes past d fall on segment 0, stored last */
        for (size_t m = 0; m + 1 < nvec; m++) {
            yv[m] = _mm256_sub_pd(_mm256_loadu_pd(xi + 4 * m), cv[m]);
            _mm256_storeu_pd(y + 4 * m, yv[m]);
        }
        yv[nvec - 1] = _mm256_sub_pd(
            _mm256_maskload_pd(xi + 4 * (nvec - 1), tail), cv[nvec - 1]);
        _mm256_storeu_pd(y + 4 * (nvec - 1), yv[nvec - 1]);
        /* p_a = y + d + a d - a (a - 1) / 2, the start of segment a */
        for (size_t a = d; a-- > 0;) {
            double *p = y + d + a * d - a * (a - 1) / 2 - a;
            const __m256d ya = _mm256_broadcast_sd(y + a);
            for (size_t m = a / 4; m + 1 < nvec; m++)
                _mm256_storeu_pd(p + 4 * m, _mm256_mul_pd(ya, yv[m]));
            lse_store_lanes4(p + 4 * (nvec - 1), _mm256_mul_pd(ya, yv[nvec - 1]),
                        rem);
        }
    }
}

/* Lane l of v in all four lanes (l a constant once the caller unrolls) */
LSE_TARGET_AVX2_FMA
static inline __m256d lane4_bcast(__m256d v, size_t l)
{
    switch (l) {
    case 0:
        return _mm256_permute4x64_pd(v, 0x00);
    case 1:
        return _mm256_permute4x64_pd(v, 0x55);
    case 2:
        return _mm256_permute4x64_pd(v, 0xAA);
    default:
        return _mm256_permute4x64_pd(v, 0xFF);
    }
}

/* vech16_body for d = 4 nvec (whole vectors), every loop unrolled: y_a
 * taken from its vector's lane, not loaded back from the y just stored,
 * and no loop control: at d = 16 the generic body ran about 460
 * instructions per row, this one about 125 (callgrind, a/full), and a
 * full's CPU time per iteration fell about 10 % (docs/performance.md,
 * "Session 18"). The same products: the same bits. */
LSE_TARGET_AVX2_FMA
static inline void vech16_whole(const lse_gauss_work *w, const double *x,
                                size_t xt, size_t nr, double *vd, size_t vt,
                                const size_t nvec)
{
    const size_t d = 4 * nvec;
    const double *c = w->center->data;
    __m256d cv[4];
    for (size_t m = 0; m < nvec; m++)
        cv[m] = _mm256_loadu_pd(c + 4 * m);
    for (size_t i = 0; i < nr; i++) {
        const double *xi = x + i * xt;
        double *v = vd + i * vt, *y = v + 1;
        __m256d yv[4];
        v[0] = 1.0;
        for (size_t m = 0; m < nvec; m++) {
            yv[m] = _mm256_sub_pd(_mm256_loadu_pd(xi + 4 * m), cv[m]);
            _mm256_storeu_pd(y + 4 * m, yv[m]);
        }
        /* segments from the last, as vech16_body (later stores overwrite
         * the lanes b < a an earlier one wrote) */
        _Pragma("GCC unroll 16") for (size_t t = 0; t < d; t++)
        {
            const size_t a = d - 1 - t;
            double *p = y + d + a * d - a * (a - 1) / 2 - a;
            const __m256d ya = lane4_bcast(yv[a / 4], a % 4);
            _Pragma("GCC unroll 4") for (size_t m = a / 4; m < nvec; m++)
                _mm256_storeu_pd(p + 4 * m, _mm256_mul_pd(ya, yv[m]));
        }
    }
}

/* vech16_body with its count of vectors a constant (the loops unroll) */
LSE_TARGET_AVX2_FMA
static void fast_rows_vech16_avx2(const lse_gauss_work *w, const double *x,
                                  size_t xt, size_t nr, double *vd, size_t vt)
{
    switch ((w->dim + 3) / 4) {
    case 2:
        if (w->dim == 8)
            vech16_whole(w, x, xt, nr, vd, vt, 2);
        else
            vech16_body(w, x, xt, nr, vd, vt, 2);
        break;
    case 3:
        if (w->dim == 12)
            vech16_whole(w, x, xt, nr, vd, vt, 3);
        else
            vech16_body(w, x, xt, nr, vd, vt, 3);
        break;
    default:
        if (w->dim == 16)
            vech16_whole(w, x, xt, nr, vd, vt, 4);
        else
            vech16_body(w, x, xt, nr, vd, vt, 4);
        break;
    }
}

/* fast_rows_body with AVX2 + FMA; d <= 4 as a constant, so that the
 * loops over a row's few entries unroll (at d = 2 the loop overhead was
 * most of the work: a fifth of a small diagonal fit's instructions).
 * The same operations on the same entries: the same bits. */
LSE_TARGET_AVX2_FMA
static void fast_rows_fma2(const lse_gauss_work *w, const double *x, size_t xt,
                           size_t nr, double *vd, size_t vt)
{
    switch (w->dim) {
    case 1:
        fast_rows_body(w, x, xt, nr, vd, vt, 1);
        break;
    case 2:
        fast_rows_body(w, x, xt, nr, vd, vt, 2);
        break;
    case 3:
        fast_rows_body(w, x, xt, nr, vd, vt, 3);
        break;
    case 4:
        fast_rows_body(w, x, xt, nr, vd, vt, 4);
        break;
    default:
        if (w->dim <= 16 && w->cov != LSE_COV_DIAG &&
            w->cov != LSE_COV_SPHERICAL)
            fast_rows_vech16_avx2(w, x, xt, nr, vd, vt);
        else
            fast_rows_body(w, x, xt, nr, vd, vt, w->dim);
        break;
    }
}

/* vech(y y') of one row for d <= 16 (y in two vectors, zero past d) into
 * p: segment a (the d - a products y_a y_b, b >= a) from y[a ..] picked
 * out of the two vectors by a permutation, each segment in one or two
 * whole 8-wide stores that run into the next segment (stored after it)
 * or the row's padding; masked only where the row ends (pend). The loop
 * of fast_rows_avx512 spent more on its masks and its inner loop than on
 * the products (a/full: about a fifth of an EM iteration). Same
 * products, same bits. */
LSE_TARGET_AVX512
static inline void vech16_avx512(__m512d y0, __m512d y1, const double *yv,
                                 size_t d, double *p, const double *pend)
{
    __m512i idx = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i one = _mm512_set1_epi64(1);
    const __m512d zero = _mm512_setzero_pd();
    for (size_t a = 0; a < d; a++) {
        const __m512d ya = _mm512_set1_pd(yv[a]);
        const size_t n = d - a;
        const __m512d lo = _mm512_mul_pd(ya, _mm512_permutex2var_pd(y0, idx, y1));
        if (p + 8 <= pend)
            _mm512_storeu_pd(p, lo);
        else
            _mm512_mask_storeu_pd(
                p, (__mmask8)(n >= 8 ? 0xFFu : (1u << n) - 1u), lo);
        if (n > 8) {
            const __m512d hi =
                _mm512_mul_pd(ya, _mm512_permutex2var_pd(y1, idx, zero));
            if (p + 16 <= pend)
                _mm512_storeu_pd(p + 8, hi);
            else
                _mm512_mask_storeu_pd(p + 8, (__mmask8)((1u << (n - 8)) - 1u),
                                      hi);
        }
        idx = _mm512_add_epi64(idx, one);
        p += n;
    }
}

/* fast_rows_body with AVX-512F masked vectors of 8 (the short rows of
 * vech(y y') would leave scalar tails): the same products, same bits. */
LSE_TARGET_AVX512
static void fast_rows_avx512(const lse_gauss_work *w, const double *x,
                             size_t xt, size_t nr, double *vd, size_t vt)
{
    const size_t d = w->dim;
    const double *c = w->center->data;
    const lse_cov_type cov = w->cov;
    for (size_t i = 0; i < nr; i++) {
        const double *xi = x + i * xt;
        double *v = vd + i * vt;
        double *y = v + 1, *p = y + d;
        v[0] = 1.0;
        for (size_t j = 0; j < d; j += 8) {
            const __mmask8 m =
                (__mmask8)(d - j >= 8 ? 0xFFu : (1u << (d - j)) - 1u);
            const __m512d yj = _mm512_sub_pd(_mm512_maskz_loadu_pd(m, xi + j),
                                             _mm512_maskz_loadu_pd(m, c + j));
            _mm512_mask_storeu_pd(y + j, m, yj);
            if (cov == LSE_COV_DIAG)
                _mm512_mask_storeu_pd(p + j, m, _mm512_mul_pd(yj, yj));
        }
        if (cov == LSE_COV_DIAG)
            continue;
        if (cov == LSE_COV_SPHERICAL) {
            p[0] = lse_gauss_sq_norm(y, d);
            continue;
        }
        if (d <= 16) {
            /* y again from x and c, not from the y just stored (a load
             * across two recent masked stores waits for them) */
            const __mmask8 m0 = (__mmask8)(d >= 8 ? 0xFFu : (1u << d) - 1u);
            const __mmask8 m1 = (__mmask8)(d > 8 ? (1u << (d - 8)) - 1u : 0u);
            const __m512d y0 = _mm512_sub_pd(_mm512_maskz_loadu_pd(m0, xi),
                                             _mm512_maskz_loadu_pd(m0, c));
            const __m512d y1 =
                _mm512_sub_pd(_mm512_maskz_loadu_pd(m1, xi + 8),
                              _mm512_maskz_loadu_pd(m1, c + 8));
            double yv[16];
            _mm512_storeu_pd(yv, y0);
            _mm512_storeu_pd(yv + 8, y1);
            vech16_avx512(y0, y1, yv, d, p, v + vt);
            continue;
        }
        for (size_t a = 0; a < d; a++) {
            const __m512d ya = _mm512_set1_pd(y[a]);
            const size_t n = d - a;
            const double *yb = y + a;
            for (size_t q = 0; q < n; q += 8) {
                const __mmask8 m =
                    (__mmask8)(n - q >= 8 ? 0xFFu : (1u << (n - q)) - 1u);
                _mm512_mask_storeu_pd(
                    p + q, m,
                    _mm512_mul_pd(ya, _mm512_maskz_loadu_pd(m, yb + q)));
            }
            p += n;
        }
    }
}

static inline void fast_rows_fma(const lse_gauss_work *w, const double *x,
                                 size_t xt, size_t nr, double *vd, size_t vt)
{
    if (w->fma == 2)
        fast_rows_avx512(w, x, xt, nr, vd, vt);
    else
        fast_rows_fma2(w, x, xt, nr, vd, vt);
}

void lse_gauss_v_rows_fma(const lse_gauss_work *w, const double *x, size_t xt,
                          size_t nr, double *vd, size_t vt)
{
    fast_rows_fma(w, x, xt, nr, vd, vt);
}

/* The row groups of the diagonal/spherical quadratic path (6 rows for
 * eval, 4 for stats, once per group): the row count is a constant here so
 * that the compiler specializes the row loop for it, as it did when these
 * loops and the kernels shared gauss_common.c (a variable nr across the
 * file boundary cost the a/diag benchmark about 5%). */
void lse_gauss_v_rows6_fma(const lse_gauss_work *w, const double *x, size_t xt,
                           double *vd, size_t vt)
{
    fast_rows_fma(w, x, xt, 6, vd, vt);
}

void lse_gauss_v_rows4_fma(const lse_gauss_work *w, const double *x, size_t xt,
                           double *vd, size_t vt)
{
    fast_rows_fma(w, x, xt, 4, vd, vt);
}
#endif

void lse_gauss_v_rows(const lse_gauss_work *w, const gsl_matrix *x)
{
#if LSE_HAVE_AVX2_PATH
    if (w->avx2)
        fast_rows_avx2(w, x);
    else
#endif
        fast_rows_plain(w, x);
}

#if LSE_HAVE_AVX2_PATH
/* AVX2 + FMA kernels of the quadratic path, on 4 rows x 8 components at a
 * time with the running sums in registers. OpenBLAS's dgemm runs these
 * narrow shapes (K = 16 columns) at about 20 GFLOP/s on this project's
 * machine, these at about 30 (docs/performance.md). Rows: V (b, nv) with
 * tda vt; Q (nv, kp) and the statistics (nv, kp) zero-padded to whole
 * tiles of 8 components. */

/* S (b, K) rows [i, i + 4) = V Q, for every tile of components. */
LSE_TARGET_AVX2_FMA
void lse_gauss_qeval4_avx2(const double *v, size_t vt, size_t nv,
                           const double *q, size_t kp, size_t K, double *s,
                           size_t st)
{
    const double *v0 = v, *v1 = v0 + vt, *v2 = v1 + vt, *v3 = v2 + vt;
    for (size_t k0 = 0; k0 < kp; k0 += 8) {
        __m256d a00 = _mm256_setzero_pd(), a01 = a00, a10 = a00, a11 = a00;
        __m256d a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        const double *qp = q + k0;
        for (size_t p = 0; p < nv; p++, qp += kp) {
            const __m256d q0 = _mm256_loadu_pd(qp);
            const __m256d q1 = _mm256_loadu_pd(qp + 4);
            __m256d u = _mm256_broadcast_sd(v0 + p);
            a00 = _mm256_fmadd_pd(u, q0, a00);
            a01 = _mm256_fmadd_pd(u, q1, a01);
            u = _mm256_broadcast_sd(v1 + p);
            a10 = _mm256_fmadd_pd(u, q0, a10);
            a11 = _mm256_fmadd_pd(u, q1, a11);
            u = _mm256_broadcast_sd(v2 + p);
            a20 = _mm256_fmadd_pd(u, q0, a20);
            a21 = _mm256_fmadd_pd(u, q1, a21);
            u = _mm256_broadcast_sd(v3 + p);
            a30 = _mm256_fmadd_pd(u, q0, a30);
            a31 = _mm256_fmadd_pd(u, q1, a31);
        }
        double tile[4][8];
        _mm256_storeu_pd(tile[0], a00);
        _mm256_storeu_pd(tile[0] + 4, a01);
        _mm256_storeu_pd(tile[1], a10);
        _mm256_storeu_pd(tile[1] + 4, a11);
        _mm256_storeu_pd(tile[2], a20);
        _mm256_storeu_pd(tile[2] + 4, a21);
        _mm256_storeu_pd(tile[3], a30);
        _mm256_storeu_pd(tile[3] + 4, a31);
        const size_t nk = K - k0 < 8 ? K - k0 : 8;
        for (size_t r = 0; r < 4; r++)
            memcpy(s + r * st + k0, tile[r], nk * sizeof(double));
    }
}

/* qeval6_avx2's last tile when it holds nk <= 4 components (K <= 4 for
 * the small fits): 6 rows x 4 components, the other half of the 8-wide
 * tile (padding) neither computed nor stored. Each entry is the same
 * chain of fused multiply-adds over p (same bits). */
LSE_TARGET_AVX2_FMA
static void qeval6_half(const double *v, size_t vt, size_t nv,
                        const double *q, size_t kp, size_t nk, double *s,
                        size_t st)
{
    __m256d a[6];
    for (int r = 0; r < 6; r++)
        a[r] = _mm256_setzero_pd();
    for (size_t p = 0; p < nv; p++, q += kp) {
        const __m256d q0 = _mm256_loadu_pd(q);
        for (int r = 0; r < 6; r++)
            a[r] = _mm256_fmadd_pd(_mm256_broadcast_sd(v + (size_t)r * vt + p),
                                   q0, a[r]);
    }
    for (size_t r = 0; r < 6; r++)
        lse_store_lanes4(s + r * st, a[r], nk);
}

/* S (b, K) rows [i, i + 6) = V Q (V rows contiguous, tda vt): 6 rows x 8
 * components, 12 running sums in registers, so that two FMAs per cycle
 * never wait on each other's latency. Every entry is the same chain of
 * fused multiply-adds over p as in qeval4_avx2 (same bits). */
LSE_TARGET_AVX2_FMA
void lse_gauss_qeval6_avx2(const double *v, size_t vt, size_t nv,
                           const double *q, size_t kp, size_t K, double *s,
                           size_t st)
{
    const double *v0 = v, *v1 = v0 + vt, *v2 = v1 + vt, *v3 = v2 + vt;
    const double *v4 = v3 + vt, *v5 = v4 + vt;
    for (size_t k0 = 0; k0 < kp; k0 += 8) {
        if (K - k0 <= 4) { /* at most 4 components left: half a tile */
            qeval6_half(v, vt, nv, q + k0, kp, K - k0, s + k0, st);
            break;
        }
        __m256d a00 = _mm256_setzero_pd(), a01 = a00, a10 = a00, a11 = a00;
        __m256d a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        __m256d a40 = a00, a41 = a00, a50 = a00, a51 = a00;
        const double *qp = q + k0;
        for (size_t p = 0; p < nv; p++, qp += kp) {
            const __m256d q0 = _mm256_loadu_pd(qp);
            const __m256d q1 = _mm256_loadu_pd(qp + 4);
            __m256d u = _mm256_broadcast_sd(v0 + p);
            a00 = _mm256_fmadd_pd(u, q0, a00);
            a01 = _mm256_fmadd_pd(u, q1, a01);
            u = _mm256_broadcast_sd(v1 + p);
            a10 = _mm256_fmadd_pd(u, q0, a10);
            a11 = _mm256_fmadd_pd(u, q1, a11);
            u = _mm256_broadcast_sd(v2 + p);
            a20 = _mm256_fmadd_pd(u, q0, a20);
            a21 = _mm256_fmadd_pd(u, q1, a21);
            u = _mm256_broadcast_sd(v3 + p);
            a30 = _mm256_fmadd_pd(u, q0, a30);
            a31 = _mm256_fmadd_pd(u, q1, a31);
            u = _mm256_broadcast_sd(v4 + p);
            a40 = _mm256_fmadd_pd(u, q0, a40);
            a41 = _mm256_fmadd_pd(u, q1, a41);
            u = _mm256_broadcast_sd(v5 + p);
            a50 = _mm256_fmadd_pd(u, q0, a50);
            a51 = _mm256_fmadd_pd(u, q1, a51);
        }
        if (k0 + 8 <= K) {
            double *o = s + k0;
            _mm256_storeu_pd(o, a00);
            _mm256_storeu_pd(o + 4, a01);
            _mm256_storeu_pd(o + st, a10);
            _mm256_storeu_pd(o + st + 4, a11);
            _mm256_storeu_pd(o + 2 * st, a20);
            _mm256_storeu_pd(o + 2 * st + 4, a21);
            _mm256_storeu_pd(o + 3 * st, a30);
            _mm256_storeu_pd(o + 3 * st + 4, a31);
            _mm256_storeu_pd(o + 4 * st, a40);
            _mm256_storeu_pd(o + 4 * st + 4, a41);
            _mm256_storeu_pd(o + 5 * st, a50);
            _mm256_storeu_pd(o + 5 * st + 4, a51);
            continue;
        }
        /* the last, partial tile (nk < 8 components): the lanes stored
         * as they are (lse_store_lanes4), not a memcpy call per row
         * through a tile on the stack */
        const size_t nk = K - k0, n0 = nk < 4 ? nk : 4, n1 = nk - n0;
        double *o = s + k0;
        const __m256d t[6][2] = {{a00, a01}, {a10, a11}, {a20, a21},
                                 {a30, a31}, {a40, a41}, {a50, a51}};
        for (size_t r = 0; r < 6; r++) {
            lse_store_lanes4(o + r * st, t[r][0], n0);
            lse_store_lanes4(o + r * st + 4, t[r][1], n1);
        }
    }
}

/* qeval6_avx2 with AVX-512F: tiles of 16 components (12 running sums of
 * 8), a last tile of 8 when kp is not a multiple of 16. Every entry is the
 * same chain of fused multiply-adds (same bits as qeval6_avx2). */
LSE_TARGET_AVX512
void lse_gauss_qeval6_avx512(const double *v, size_t vt, size_t nv,
                             const double *q, size_t kp, size_t K, double *s,
                             size_t st)
{
    const double *v0 = v, *v1 = v0 + vt, *v2 = v1 + vt, *v3 = v2 + vt;
    const double *v4 = v3 + vt, *v5 = v4 + vt;
    size_t k0 = 0;
    for (; k0 + 16 <= kp; k0 += 16) {
        __m512d a00 = _mm512_setzero_pd(), a01 = a00, a10 = a00, a11 = a00;
        __m512d a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        __m512d a40 = a00, a41 = a00, a50 = a00, a51 = a00;
        const double *qp = q + k0;
        for (size_t p = 0; p < nv; p++, qp += kp) {
            const __m512d q0 = _mm512_loadu_pd(qp);
            const __m512d q1 = _mm512_loadu_pd(qp + 8);
            __m512d u = _mm512_set1_pd(v0[p]);
            a00 = _mm512_fmadd_pd(u, q0, a00);
            a01 = _mm512_fmadd_pd(u, q1, a01);
            u = _mm512_set1_pd(v1[p]);
            a10 = _mm512_fmadd_pd(u, q0, a10);
            a11 = _mm512_fmadd_pd(u, q1, a11);
            u = _mm512_set1_pd(v2[p]);
            a20 = _mm512_fmadd_pd(u, q0, a20);
            a21 = _mm512_fmadd_pd(u, q1, a21);
            u = _mm512_set1_pd(v3[p]);
            a30 = _mm512_fmadd_pd(u, q0, a30);
            a31 = _mm512_fmadd_pd(u, q1, a31);
            u = _mm512_set1_pd(v4[p]);
            a40 = _mm512_fmadd_pd(u, q0, a40);
            a41 = _mm512_fmadd_pd(u, q1, a41);
            u = _mm512_set1_pd(v5[p]);
            a50 = _mm512_fmadd_pd(u, q0, a50);
            a51 = _mm512_fmadd_pd(u, q1, a51);
        }
        /* columns k0 .. K - 1 of this tile are real */
        const size_t nk = K - k0 < 16 ? K - k0 : 16;
        const __mmask8 m0 = (__mmask8)(nk >= 8 ? 0xFFu : (1u << nk) - 1u);
        const __mmask8 m1 = (__mmask8)(nk >= 16 ? 0xFFu
                                       : nk > 8 ? (1u << (nk - 8)) - 1u
                                                : 0u);
        double *o = s + k0;
        _mm512_mask_storeu_pd(o, m0, a00);
        _mm512_mask_storeu_pd(o + 8, m1, a01);
        _mm512_mask_storeu_pd(o + st, m0, a10);
        _mm512_mask_storeu_pd(o + st + 8, m1, a11);
        _mm512_mask_storeu_pd(o + 2 * st, m0, a20);
        _mm512_mask_storeu_pd(o + 2 * st + 8, m1, a21);
        _mm512_mask_storeu_pd(o + 3 * st, m0, a30);
        _mm512_mask_storeu_pd(o + 3 * st + 8, m1, a31);
        _mm512_mask_storeu_pd(o + 4 * st, m0, a40);
        _mm512_mask_storeu_pd(o + 4 * st + 8, m1, a41);
        _mm512_mask_storeu_pd(o + 5 * st, m0, a50);
        _mm512_mask_storeu_pd(o + 5 * st + 8, m1, a51);
    }
    if (k0 < kp) { /* a last tile of 8 */
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        __m512d a4 = a0, a5 = a0;
        const double *qp = q + k0;
        for (size_t p = 0; p < nv; p++, qp += kp) {
            const __m512d q0 = _mm512_loadu_pd(qp);
            a0 = _mm512_fmadd_pd(_mm512_set1_pd(v0[p]), q0, a0);
            a1 = _mm512_fmadd_pd(_mm512_set1_pd(v1[p]), q0, a1);
            a2 = _mm512_fmadd_pd(_mm512_set1_pd(v2[p]), q0, a2);
            a3 = _mm512_fmadd_pd(_mm512_set1_pd(v3[p]), q0, a3);
            a4 = _mm512_fmadd_pd(_mm512_set1_pd(v4[p]), q0, a4);
            a5 = _mm512_fmadd_pd(_mm512_set1_pd(v5[p]), q0, a5);
        }
        const __mmask8 m0 = (__mmask8)((1u << (K - k0)) - 1u);
        double *o = s + k0;
        _mm512_mask_storeu_pd(o, m0, a0);
        _mm512_mask_storeu_pd(o + st, m0, a1);
        _mm512_mask_storeu_pd(o + 2 * st, m0, a2);
        _mm512_mask_storeu_pd(o + 3 * st, m0, a3);
        _mm512_mask_storeu_pd(o + 4 * st, m0, a4);
        _mm512_mask_storeu_pd(o + 5 * st, m0, a5);
    }
}

/* r[i] := column i of the 8 x 8 matrix whose rows are r[0 .. 7]. */
LSE_TARGET_AVX512
static inline void tr8_avx512(__m512d r[8])
{
    __m512d t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_pd(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_pd(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm512_shuffle_f64x2(t[4 * i], t[4 * i + 2], 0x88);
        u[4 * i + 1] = _mm512_shuffle_f64x2(t[4 * i + 1], t[4 * i + 3], 0x88);
        u[4 * i + 2] = _mm512_shuffle_f64x2(t[4 * i], t[4 * i + 2], 0xdd);
        u[4 * i + 3] = _mm512_shuffle_f64x2(t[4 * i + 1], t[4 * i + 3], 0xdd);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f64x2(u[j], u[4 + j], 0x88);
        r[4 + j] = _mm512_shuffle_f64x2(u[j], u[4 + j], 0xdd);
    }
}

/* Columns j0 .. j0 + nj - 1 (nj <= 8) of y = x - c for 8 rows (tda xt),
 * transposed: r8[j] holds column j0 + j of the 8 rows (r8[j >= nj] 0). */
LSE_TARGET_AVX512
static inline void y8_cols_avx512(const double *x, size_t xt, const double *c,
                                  size_t j0, size_t nj, __m512d r8[8])
{
    const __mmask8 m = (__mmask8)(nj == 8 ? 0xFFu : (1u << nj) - 1u);
    const __m512d cj = _mm512_maskz_loadu_pd(m, c + j0);
    for (size_t r = 0; r < 8; r++)
        r8[r] = _mm512_sub_pd(_mm512_maskz_loadu_pd(m, x + r * xt + j0), cj);
    tr8_avx512(r8);
}

/* Rows 0 .. d of V transposed of 8 rows x (tda xt) into vt (64-byte
 * aligned): ones, then y = x - c, one vector of the 8 rows per column. */
LSE_TARGET_AVX512
static inline void qfull_yt_avx512(const double *x, size_t xt,
                                   const double *c, size_t d, double *vt)
{
    _mm512_store_pd(vt, _mm512_set1_pd(1.0));
    for (size_t j0 = 0; j0 < d; j0 += 8) {
        const size_t nj = d - j0 < 8 ? d - j0 : 8;
        __m512d r8[8];
        y8_cols_avx512(x, xt, c, j0, nj, r8);
        double *o = vt + 8 * (1 + j0);
        if (nj == 8) /* whole: no copy loop */
            for (int j = 0; j < 8; j++)
                _mm512_store_pd(o + 8 * j, r8[j]);
        else
            for (size_t j = 0; j < nj; j++)
                _mm512_store_pd(o + 8 * j, r8[j]);
    }
}


/* The quadratic monomials y_a y_b (b >= a, in V's order) of up to
 * QT_MAXD dimensions as offsets (8 (1 + a), 8 (1 + b)) of their factors
 * in a V transposed: pr[2 p], pr[2 p + 1] for monomial 1 + d + p. */
#define QT_MAXD 64
typedef struct qt_pairs {
    uint16_t off[QT_MAXD * (QT_MAXD + 1)];
} qt_pairs;

static void qt_pairs_fill(qt_pairs *t, size_t d)
{
    for (size_t a = 0, p = 0; a < d && d <= QT_MAXD; a++)
        for (size_t b = a; b < d; b++, p++) {
            t->off[2 * p] = (uint16_t)(8 * (1 + a));
            t->off[2 * p + 1] = (uint16_t)(8 * (1 + b));
        }
}

/* V transposed of 8 rows x (tda xt): vt (nv x 8, 64-byte aligned) row p
 * = monomial p of the 8 rows (ones, y = x - c, then y_a y_b, b >= a).
 * With the pair table pr (d <= QT_MAXD) the products are one loop over
 * the table: the loops over b (d of them, d - a products each) cost a
 * mispredicted exit each, most of this function's time at d = 16. */
/* qfull_vt_avx512 for D = d <= 16 (a constant in each copy): y = x - c
 * of the 8 rows stays in registers (D vectors), so that the products load
 * nothing. Loading y back from vt, as the general loop does, put the
 * loads behind the stores of the products 4 KiB further on (4K aliasing:
 * the product rows start 64 (1 + d) bytes after y), and the products took
 * 16 % of the E-step's time at d = 16. Same values. */
LSE_TARGET_AVX512
LSE_KERNEL void qfull_vt_regs(const double *x, size_t xt, const double *c,
                              double *vt, const size_t D)
{
    __m512d y[16];
    _mm512_store_pd(vt, _mm512_set1_pd(1.0));
    _Pragma("GCC unroll 2") for (size_t j0 = 0; j0 < D; j0 += 8) {
        const size_t nj = D - j0 < 8 ? D - j0 : 8;
        __m512d r8[8];
        y8_cols_avx512(x, xt, c, j0, nj, r8);
        for (size_t j = 0; j < nj; j++) {
            y[j0 + j] = r8[j];
            _mm512_store_pd(vt + 8 * (1 + j0 + j), r8[j]);
        }
    }
    double *vq = vt + 8 * (1 + D);
    _Pragma("GCC unroll 16") for (size_t a = 0; a < D; a++)
        _Pragma("GCC unroll 16") for (size_t b = a; b < D; b++, vq += 8)
            _mm512_store_pd(vq, _mm512_mul_pd(y[a], y[b]));
}

#define QT_REGS(D)                                                             \
    case D:                                                                    \
        qfull_vt_regs(x, xt, c, vt, D);                                        \
        return 1

/* qfull_vt_regs for d <= 16: 1 when done. */
LSE_TARGET_AVX512
static int qfull_vt_small(const double *x, size_t xt, const double *c,
                          size_t d, double *vt)
{
    switch (d) {
        QT_REGS(1); QT_REGS(2); QT_REGS(3); QT_REGS(4);
        QT_REGS(5); QT_REGS(6); QT_REGS(7); QT_REGS(8);
        QT_REGS(9); QT_REGS(10); QT_REGS(11); QT_REGS(12);
        QT_REGS(13); QT_REGS(14); QT_REGS(15); QT_REGS(16);
    default:
        return 0;
    }
}
#undef QT_REGS

LSE_TARGET_AVX512
static void qfull_vt_avx512(const double *x, size_t xt, const double *c,
                            size_t d, double *vt, const qt_pairs *pr)
{
    if (qfull_vt_small(x, xt, c, d, vt))
        return;
    qfull_yt_avx512(x, xt, c, d, vt);
    double *vq = vt + 8 * (1 + d);
    if (pr != NULL) {
        const uint16_t *o = pr->off;
        const size_t nq = d * (d + 1) / 2;
        for (size_t p = 0; p < nq; p++, vq += 8)
            _mm512_store_pd(vq, _mm512_mul_pd(_mm512_load_pd(vt + o[2 * p]),
                                              _mm512_load_pd(vt + o[2 * p + 1])));
        return;
    }
    for (size_t a = 0; a < d; a++) {
        const __m512d ya = _mm512_load_pd(vt + 8 * (1 + a));
        for (size_t b = a; b < d; b++, vq += 8)
            _mm512_store_pd(vq, _mm512_mul_pd(ya, _mm512_load_pd(vt + 8 * (1 + b))));
    }
}

/* Ask for the cache line at p for writing (PREFETCHW; never faults): the
 * tiles of one group of 8 rows fetch the next group's monomial rows, which
 * qfull_vt_avx512 then stores without waiting for each line (its stores
 * had most of the kernel's samples outside the products). */
static inline void qfull_prefetchw(const double *p)
{
#if defined(__GNUC__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    (void)p;
#endif
}

/* Full/tied quadratic path, E-step: S (8 rows from s, tda st; components
 * k0 .. k0 + nk - 1, nk <= 8 NH) = V Q for the 8 rows whose V transposed
 * is vt (nv x 8), q: Q (nv, kp) 64-byte aligned, row p the coefficients of
 * monomial p. Tiles of 8 rows x 8 NH components in 8 NH running sums, the
 * components in the lanes: per monomial NH loads of Q, 8 broadcasts of
 * V and 8 NH fused multiply-adds, and the sums are S's rows, stored
 * without a transposition. Every entry is the chain of qeval6 (monomial
 * order p = 0 .. nv - 1 from a zero sum, v_0 = 1): the same bits. */
#define QS_BODY(NH)                                                            \
    do {                                                                       \
        __m512d acc[8][NH];                                                    \
        for (int r = 0; r < 8; r++)                                            \
            for (int h = 0; h < (NH); h++)                                     \
                acc[r][h] = _mm512_setzero_pd();                               \
        const double *qp = q + k0;                                             \
        for (size_t p = 0; p < nv; p++, qp += kp, vt += 8, pw += 8) {         \
            qfull_prefetchw(pw);                                               \
            __m512d qv[NH];                                                    \
            for (int h = 0; h < (NH); h++)                                     \
                qv[h] = _mm512_loadu_pd(qp + 8 * h);                           \
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {              \
                const __m512d u = _mm512_set1_pd(vt[r]);                       \
                for (int h = 0; h < (NH); h++)                                 \
                    acc[r][h] = _mm512_fmadd_pd(u, qv[h], acc[r][h]);          \
            }                                                                  \
        }                                                                      \
        const __m512d pinf = _mm512_set1_pd(INFINITY);                        \
        __mmask8 bad = 0;                                                      \
        for (int h = 0; h < (NH); h++) {                                       \
            const size_t kh = 8 * (size_t)h, nh = nk > kh ? nk - kh : 0;        \
            const __mmask8 mk =                                                \
                (__mmask8)(nh >= 8 ? 0xFFu : (1u << nh) - 1u);                 \
            for (size_t r = 0; r < 8; r++) {                                   \
                _mm512_mask_storeu_pd(s + r * st + k0 + kh, mk, acc[r][h]);    \
                /* NaN or +INFINITY (not less than +INFINITY) */              \
                bad |= _mm512_mask_cmp_pd_mask(mk, acc[r][h], pinf,            \
                                               _CMP_NLT_UQ);                   \
            }                                                                  \
        }                                                                      \
        return bad != 0;                                                       \
    } while (0)

LSE_TARGET_AVX512
static int qs_tile16(const double *vt, size_t nv, const double *q, size_t kp,
                      size_t k0, size_t nk, double *s, size_t st,
                      const double *pw)
{
    QS_BODY(2);
}

LSE_TARGET_AVX512
static int qs_tile8(const double *vt, size_t nv, const double *q, size_t kp,
                     size_t k0, size_t nk, double *s, size_t st,
                     const double *pw)
{
    QS_BODY(1);
}
#undef QS_BODY

/* S (b, K) = V Q for a block of b >= 8 rows of x (full/tied covariances,
 * AVX-512F): groups of 8 rows (the last one overlapping the previous, its
 * rows recomputed identically), each with its V transposed (nv x 8, row p
 * monomial p of the 8 rows) formed at vt + g nv 8 (64-byte aligned;
 * lse_gauss_qfull_stats8 reads it back: no row-major V), then tiles of 16
 * components (a last tile of 8). The same bits as qeval6. */
LSE_TARGET_AVX512
int lse_gauss_qfull_eval_avx512(lse_gauss_work *w, const gsl_matrix *x,
                                gsl_matrix *s, double *vt)
{
    int bad = 0;
    const size_t b = x->size1, d = w->dim, K = w->n_comp, nv = w->nv;
    const size_t kp = w->qcoef->tda, ng = (b + 7) / 8, xt = x->tda;
    const double *q = w->qcoef->data, *c = w->center->data;
    qt_pairs pr;
    qt_pairs_fill(&pr, d);
    for (size_t g = 0; g < ng; g++) {
        const size_t i0 = 8 * g + 8 <= b ? 8 * g : b - 8;
        double *yg = vt + g * nv * 8;
        qfull_vt_avx512(x->data + i0 * xt, xt, c, d, yg,
                        d <= QT_MAXD ? &pr : NULL);
        /* the next group's rows (past the block: the rows that usually
         * follow it), which the transposition would otherwise wait for
         * (17 % of this kernel's time on a/full). A prefetch never
         * faults. */
        const uintptr_t nx =
            (uintptr_t)x->data + (8 * g + 8) * xt * sizeof(double);
        for (size_t o = 0; o < 8 * xt * sizeof(double); o += 64)
            _mm_prefetch((const char *)(nx + o), _MM_HINT_T0);
        double *sg = gsl_matrix_ptr(s, i0, 0);
        for (size_t k0 = 0; k0 < K; k0 += 16) {
            const size_t nk = K - k0;
            if (nk > 8)
                bad |= qs_tile16(yg, nv, q, kp, k0, nk, sg, s->tda, yg + nv * 8);
            else
                bad |= qs_tile8(yg, nv, q, kp, k0, nk, sg, s->tda, yg + nv * 8);
        }
    }
    return bad;
}



/* acc (nv, kp) += V' rho for 8 rows x (tda xt) of a full/tied block
 * (rho (8, kp), tda rt), AVX-512F: V transposed, monomial-major (vt: nv
 * x 8 doubles, 64-byte aligned; formed here when form, else as
 * lse_gauss_qfull_eval_avx512 left it: one aligned store per monomial and
 * 8 rows, none of the row-major V's unaligned stores), then per monomial
 * and tile of 16 (8) components the 8 rows' fused multiply-adds in row
 * order. Every entry is the chain of qstats4 over the same rows (rows in
 * order, one FMA each): same bits. */
LSE_TARGET_AVX512
void lse_gauss_qfull_stats8_avx512(const lse_gauss_work *w, const double *x,
                                   size_t xt, const double *rho, size_t rt,
                                   double *vt, int form, double *acc,
                                   size_t kp)
{
    const size_t d = w->dim, nv = w->nv;
    const double *c = w->center->data;
    if (form)
        qfull_vt_avx512(x, xt, c, d, vt, NULL);
    size_t k0 = 0;
    for (; k0 + 16 <= kp; k0 += 16) {
        __m512d r0[8], r1[8];
        for (size_t r = 0; r < 8; r++) {
            r0[r] = _mm512_loadu_pd(rho + r * rt + k0);
            r1[r] = _mm512_loadu_pd(rho + r * rt + k0 + 8);
        }
        double *m = acc + k0;
        const double *vp = vt;
        for (size_t p = 0; p < nv; p++, m += kp, vp += 8) {
            __m512d m0 = _mm512_loadu_pd(m), m1 = _mm512_loadu_pd(m + 8);
            for (size_t r = 0; r < 8; r++) {
                const __m512d u = _mm512_set1_pd(vp[r]);
                m0 = _mm512_fmadd_pd(u, r0[r], m0);
                m1 = _mm512_fmadd_pd(u, r1[r], m1);
            }
            _mm512_storeu_pd(m, m0);
            _mm512_storeu_pd(m + 8, m1);
        }
    }
    if (k0 < kp) { /* a last tile of 8 */
        __m512d r0[8];
        for (size_t r = 0; r < 8; r++)
            r0[r] = _mm512_loadu_pd(rho + r * rt + k0);
        double *m = acc + k0;
        const double *vp = vt;
        for (size_t p = 0; p < nv; p++, m += kp, vp += 8) {
            __m512d m0 = _mm512_loadu_pd(m);
            for (size_t r = 0; r < 8; r++)
                m0 = _mm512_fmadd_pd(_mm512_set1_pd(vp[r]), r0[r], m0);
            _mm512_storeu_pd(m, m0);
        }
    }
}

/* acc (nv, kp) += V' rho for 4 rows (rho (4, kp), tda rt), AVX-512F:
 * tiles of 16 components, a last tile of 8; the same chain of fused
 * multiply-adds per entry as qstats4_avx2 (same bits). */
LSE_TARGET_AVX512
void lse_gauss_qstats4_avx512(const double *v, size_t vt, size_t nv,
                              const double *rho, size_t rt, double *acc,
                              size_t kp)
{
    const double *v0 = v, *v1 = v0 + vt, *v2 = v1 + vt, *v3 = v2 + vt;
    size_t k0 = 0;
    for (; k0 + 16 <= kp; k0 += 16) {
        const double *r = rho + k0;
        const __m512d r00 = _mm512_loadu_pd(r), r01 = _mm512_loadu_pd(r + 8);
        const __m512d r10 = _mm512_loadu_pd(r + rt);
        const __m512d r11 = _mm512_loadu_pd(r + rt + 8);
        const __m512d r20 = _mm512_loadu_pd(r + 2 * rt);
        const __m512d r21 = _mm512_loadu_pd(r + 2 * rt + 8);
        const __m512d r30 = _mm512_loadu_pd(r + 3 * rt);
        const __m512d r31 = _mm512_loadu_pd(r + 3 * rt + 8);
        double *m = acc + k0;
        for (size_t p = 0; p < nv; p++, m += kp) {
            __m512d m0 = _mm512_loadu_pd(m), m1 = _mm512_loadu_pd(m + 8);
            __m512d u = _mm512_set1_pd(v0[p]);
            m0 = _mm512_fmadd_pd(u, r00, m0);
            m1 = _mm512_fmadd_pd(u, r01, m1);
            u = _mm512_set1_pd(v1[p]);
            m0 = _mm512_fmadd_pd(u, r10, m0);
            m1 = _mm512_fmadd_pd(u, r11, m1);
            u = _mm512_set1_pd(v2[p]);
            m0 = _mm512_fmadd_pd(u, r20, m0);
            m1 = _mm512_fmadd_pd(u, r21, m1);
            u = _mm512_set1_pd(v3[p]);
            m0 = _mm512_fmadd_pd(u, r30, m0);
            m1 = _mm512_fmadd_pd(u, r31, m1);
            _mm512_storeu_pd(m, m0);
            _mm512_storeu_pd(m + 8, m1);
        }
    }
    if (k0 < kp) { /* a last tile of 8 */
        const double *r = rho + k0;
        const __m512d r0 = _mm512_loadu_pd(r), r1 = _mm512_loadu_pd(r + rt);
        const __m512d r2 = _mm512_loadu_pd(r + 2 * rt);
        const __m512d r3 = _mm512_loadu_pd(r + 3 * rt);
        double *m = acc + k0;
        for (size_t p = 0; p < nv; p++, m += kp) {
            __m512d m0 = _mm512_loadu_pd(m);
            m0 = _mm512_fmadd_pd(_mm512_set1_pd(v0[p]), r0, m0);
            m0 = _mm512_fmadd_pd(_mm512_set1_pd(v1[p]), r1, m0);
            m0 = _mm512_fmadd_pd(_mm512_set1_pd(v2[p]), r2, m0);
            m0 = _mm512_fmadd_pd(_mm512_set1_pd(v3[p]), r3, m0);
            _mm512_storeu_pd(m, m0);
        }
    }
}

/* PB monomials from p0 and NH halves (4 components each) of the
 * statistics tile at m (rows of kp) over the rows 0 .. nr - 1: the sums
 * stay in registers while the rows pass. The second half's entries past
 * K are loaded as zeros (mask mk), as qstats4_avx2 loads them. */
LSE_TARGET_AVX2_FMA LSE_KERNEL void qs_rows_tile(const double *v, size_t vt,
                                                 const double *r, size_t rt,
                                                 size_t nr, double *m,
                                                 size_t kp, __m256i mk,
                                                 const int PB, const int NH)
{
    __m256d a[12][2];
    for (int t = 0; t < PB; t++)
        for (int h = 0; h < NH; h++)
            a[t][h] = _mm256_loadu_pd(m + (size_t)t * kp + 4 * (size_t)h);
    for (size_t i = 0; i < nr; i++) {
        const double *ri = r + i * rt, *vi = v + i * vt;
        __m256d h0, h1 = _mm256_setzero_pd();
        if (NH == 2) {
            h0 = _mm256_loadu_pd(ri);
            h1 = _mm256_maskload_pd(ri + 4, mk);
        } else {
            h0 = _mm256_maskload_pd(ri, mk);
        }
        for (int t = 0; t < PB; t++) {
            const __m256d u = _mm256_broadcast_sd(vi + t);
            a[t][0] = _mm256_fmadd_pd(u, h0, a[t][0]);
            if (NH == 2)
                a[t][1] = _mm256_fmadd_pd(u, h1, a[t][1]);
        }
    }
    for (int t = 0; t < PB; t++)
        for (int h = 0; h < NH; h++)
            _mm256_storeu_pd(m + (size_t)t * kp + 4 * (size_t)h, a[t][h]);
}

/* acc (nv, kp) += V' rho for the rows 0 .. nr - 1 of a block whose V is
 * whole (row i at v + i vt), nr a multiple of 4: every entry the chain of
 * lse_gauss_qstats4_avx2 over the rows in order (the same bits), but the
 * tiles (6 monomials x 8 components, or 12 x the last 4) keep their sums
 * in registers over all nr rows, where qstats4 loads and stores acc for
 * every 4 rows. */
LSE_TARGET_AVX2_FMA
void lse_gauss_qstats_rows_avx2(const double *v, size_t vt, size_t nv,
                                const double *rho, size_t rt, size_t nr,
                                double *acc, size_t kp, size_t K)
{
    for (size_t k0 = 0; k0 < kp; k0 += 8) {
        const size_t left = K - k0;
        const double *r = rho + k0;
        double *m = acc + k0;
        size_t p = 0;
        if (left <= 4) { /* half a tile, as qstats4's */
            const __m256i mk = lse_lanes4_mask(left);
            for (; p + 12 <= nv; p += 12)
                qs_rows_tile(v + p, vt, r, rt, nr, m + p * kp, kp, mk, 12, 1);
            for (; p < nv; p++)
                qs_rows_tile(v + p, vt, r, rt, nr, m + p * kp, kp, mk, 1, 1);
            break;
        }
        const __m256i mk = lse_lanes4_mask(left < 8 ? left - 4 : 4);
        for (; p + 6 <= nv; p += 6)
            qs_rows_tile(v + p, vt, r, rt, nr, m + p * kp, kp, mk, 6, 2);
        for (; p + 2 <= nv; p += 2)
            qs_rows_tile(v + p, vt, r, rt, nr, m + p * kp, kp, mk, 2, 2);
        for (; p < nv; p++)
            qs_rows_tile(v + p, vt, r, rt, nr, m + p * kp, kp, mk, 1, 2);
    }
}

/* acc (nv, kp) += V' rho for 4 rows (rho (4, kp), tda rt). */
LSE_TARGET_AVX2_FMA
void lse_gauss_qstats4_avx2(const double *v, size_t vt, size_t nv,
                            const double *rho, size_t rt, double *acc,
                            size_t kp, size_t K)
{
    const double *v0 = v, *v1 = v0 + vt, *v2 = v1 + vt, *v3 = v2 + vt;
    for (size_t k0 = 0; k0 < kp; k0 += 8) {
        const double *r = rho + k0;
        if (K - k0 <= 4) { /* at most 4 components left: half a tile,
                              the rows' entries past K loaded as zeros, so
                              rho may be R itself (rt = K) */
            const __m256i mk = lse_lanes4_mask(K - k0);
            const __m256d h0 = _mm256_maskload_pd(r, mk);
            const __m256d h1 = _mm256_maskload_pd(r + rt, mk);
            const __m256d h2 = _mm256_maskload_pd(r + 2 * rt, mk);
            const __m256d h3 = _mm256_maskload_pd(r + 3 * rt, mk);
            double *m = acc + k0;
            for (size_t p = 0; p < nv; p++, m += kp) {
                __m256d m0 = _mm256_loadu_pd(m);
                m0 = _mm256_fmadd_pd(_mm256_broadcast_sd(v0 + p), h0, m0);
                m0 = _mm256_fmadd_pd(_mm256_broadcast_sd(v1 + p), h1, m0);
                m0 = _mm256_fmadd_pd(_mm256_broadcast_sd(v2 + p), h2, m0);
                m0 = _mm256_fmadd_pd(_mm256_broadcast_sd(v3 + p), h3, m0);
                _mm256_storeu_pd(m, m0);
            }
            break;
        }
        /* 5 to 7 components left: the second half's entries past K
         * loaded as zeros, as the zero padding of rbuf gave them (so rho
         * may be R itself for any K) */
        const __m256i mk = lse_lanes4_mask(K - k0 < 8 ? K - k0 - 4 : 4);
        const __m256d r00 = _mm256_loadu_pd(r);
        const __m256d r01 = _mm256_maskload_pd(r + 4, mk);
        const __m256d r10 = _mm256_loadu_pd(r + rt);
        const __m256d r11 = _mm256_maskload_pd(r + rt + 4, mk);
        const __m256d r20 = _mm256_loadu_pd(r + 2 * rt);
        const __m256d r21 = _mm256_maskload_pd(r + 2 * rt + 4, mk);
        const __m256d r30 = _mm256_loadu_pd(r + 3 * rt);
        const __m256d r31 = _mm256_maskload_pd(r + 3 * rt + 4, mk);
        double *m = acc + k0;
        for (size_t p = 0; p < nv; p++, m += kp) {
            __m256d m0 = _mm256_loadu_pd(m), m1 = _mm256_loadu_pd(m + 4);
            __m256d u = _mm256_broadcast_sd(v0 + p);
            m0 = _mm256_fmadd_pd(u, r00, m0);
            m1 = _mm256_fmadd_pd(u, r01, m1);
            u = _mm256_broadcast_sd(v1 + p);
            m0 = _mm256_fmadd_pd(u, r10, m0);
            m1 = _mm256_fmadd_pd(u, r11, m1);
            u = _mm256_broadcast_sd(v2 + p);
            m0 = _mm256_fmadd_pd(u, r20, m0);
            m1 = _mm256_fmadd_pd(u, r21, m1);
            u = _mm256_broadcast_sd(v3 + p);
            m0 = _mm256_fmadd_pd(u, r30, m0);
            m1 = _mm256_fmadd_pd(u, r31, m1);
            _mm256_storeu_pd(m, m0);
            _mm256_storeu_pd(m + 4, m1);
        }
    }
}
#endif

/* S_ik = c_k - 1/2 sum_j ((x_ij - mu_kj) / l_kj)^2 with the running sums
 * in the row of S, so the inner loop runs along k over contiguous
 * (transposed) parameters and vectorizes. */
LSE_KERNEL void eval_diag_body(const lse_gauss_work *w, const gsl_matrix *x,
                               gsl_matrix *s)
{
    const size_t b = x->size1, d = w->dim, K = w->n_comp;
    const int sph = w->cov == LSE_COV_SPHERICAL;
    const double *cn = w->cnst->data;
    const double *mt = w->mut->data, *it = w->invt->data;
    const size_t mtda = w->mut->tda, itda = w->invt->tda;
    for (size_t i = 0; i < b; i++) {
        const double *xi = gsl_matrix_const_ptr(x, i, 0);
        double *restrict si = gsl_matrix_ptr(s, i, 0);
        for (size_t k = 0; k < K; k++)
            si[k] = 0.0;
        for (size_t j = 0; j < d; j++) {
            const double xj = xi[j];
            const double *restrict mj = mt + j * mtda;
            if (sph) {
                for (size_t k = 0; k < K; k++) {
                    const double t = xj - mj[k];
                    si[k] += t * t;
                }
            } else {
                const double *restrict ij = it + j * itda;
                for (size_t k = 0; k < K; k++) {
                    const double t = (xj - mj[k]) * ij[k];
                    si[k] += t * t;
                }
            }
        }
        if (sph)
            for (size_t k = 0; k < K; k++)
                si[k] = cn[k] - 0.5 * (it[k] * si[k]);
        else
            for (size_t k = 0; k < K; k++)
                si[k] = cn[k] - 0.5 * si[k];
    }
}

static void eval_diag_plain(const lse_gauss_work *w, const gsl_matrix *x,
                            gsl_matrix *s)
{
    eval_diag_body(w, x, s);
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX2
static void eval_diag_avx2(const lse_gauss_work *w, const gsl_matrix *x,
                           gsl_matrix *s)
{
    eval_diag_body(w, x, s);
}
#endif

void lse_gauss_eval_diag_rows(const lse_gauss_work *w, const gsl_matrix *x,
                              gsl_matrix *s)
{
#if LSE_HAVE_AVX2_PATH
    if (w->avx2) {
        eval_diag_avx2(w, x, s);
        return;
    }
#endif
    eval_diag_plain(w, x, s);
}

/* Tile width of the statistics loop: 8 running sums of each moment stay in
 * registers across the rows of a block. */
#define DIAG_TILE 8

/* For component k with rho (b) the weighted responsibilities: ADD
 * sum_i rho_i (x_ij - mu_j) to s1 (d) and sum_i rho_i (x_ij - mu_j)^2 to
 * s2 (d) (spherical: the sum over j to s2[0]). */
LSE_KERNEL void stats_diag_body(const gsl_matrix *x, const double *mu,
                                const double *rho, int sph, double *s1,
                                double *s2)
{
    const size_t b = x->size1, d = x->size2, tda = x->tda;
    const double *xd = x->data;
    size_t j0 = 0;
    for (; j0 + DIAG_TILE <= d; j0 += DIAG_TILE) {
        double a1[DIAG_TILE] = {0.0}, a2[DIAG_TILE] = {0.0};
        for (size_t i = 0; i < b; i++) {
            const double r = rho[i];
            const double *xi = xd + i * tda + j0;
            for (size_t q = 0; q < DIAG_TILE; q++) {
                const double t = xi[q] - mu[j0 + q];
                const double rt = r * t;
                a1[q] += rt;
                a2[q] += rt * t;
            }
        }
        for (size_t q = 0; q < DIAG_TILE; q++) {
            s1[j0 + q] += a1[q];
            if (!sph)
                s2[j0 + q] += a2[q];
        }
        if (sph) {
            double v = 0.0;
            for (size_t q = 0; q < DIAG_TILE; q++)
                v += a2[q];
            s2[0] += v;
        }
    }
    for (; j0 < d; j0++) {
        double a1 = 0.0, a2 = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double t = xd[i * tda + j0] - mu[j0];
            const double rt = rho[i] * t;
            a1 += rt;
            a2 += rt * t;
        }
        s1[j0] += a1;
        s2[sph ? 0 : j0] += a2;
    }
}

static void stats_diag_plain(const gsl_matrix *x, const double *mu,
                             const double *rho, int sph, double *s1, double *s2)
{
    stats_diag_body(x, mu, rho, sph, s1, s2);
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX2
static void stats_diag_avx2(const gsl_matrix *x, const double *mu,
                            const double *rho, int sph, double *s1, double *s2)
{
    stats_diag_body(x, mu, rho, sph, s1, s2);
}
#endif

void lse_gauss_stats_diag_rows(const gsl_matrix *x, const double *mu,
                               const double *rho, int sph, double *s1,
                               double *s2, int avx2)
{
#if LSE_HAVE_AVX2_PATH
    if (avx2) {
        stats_diag_avx2(x, mu, rho, sph, s1, s2);
        return;
    }
#else
    (void)avx2;
#endif
    stats_diag_plain(x, mu, rho, sph, s1, s2);
}

/* ------------------------------------------------------------------ */
/* Triangle-aware whitened path (full covariance): gauss_tri_body.h   *
 * twice, with 8-lane AVX-512F vectors and with pairs of AVX2 vectors. */

#if LSE_HAVE_AVX2_PATH
#define V8 __m512d
#define V8_ZERO() _mm512_setzero_pd()
#define V8_LOAD(p) _mm512_loadu_pd(p)
#define V8_STORE(p, v) _mm512_storeu_pd((p), (v))
#define V8_BCAST(x) _mm512_set1_pd(x)
#define V8_FMA(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define V8_ADD(a, b) _mm512_add_pd((a), (b))
#define V8_SUB(a, b) _mm512_sub_pd((a), (b))
#define V8_MUL(a, b) _mm512_mul_pd((a), (b))
#define TRI_FN(name) name##_avx512
#define TRI_TARGET LSE_TARGET_AVX512
#define TRI_RE 12
#define TRI_SE 2
#define TRI_RM 8
#define TRI_SM 3
#define TRI_SW 4
#include "gauss_tri_body.h"
#undef V8
#undef V8_ZERO
#undef V8_LOAD
#undef V8_STORE
#undef V8_BCAST
#undef V8_FMA
#undef V8_ADD
#undef V8_SUB
#undef V8_MUL
#undef TRI_FN
#undef TRI_TARGET
#undef TRI_RE
#undef TRI_SE
#undef TRI_RM
#undef TRI_SM
#undef TRI_SW

/* 8 lanes as two AVX2 vectors (lanes 0-3, 4-7); the AVX2 copy brings
 * its own E- and M-step kernels with native 4-lane tiles (pairs of
 * vectors needed more than AVX2's 16 registers), the same bits */
#include "v8x2.h"
#define TRI_FN(name) name##_avx2
#define TRI_TARGET LSE_TARGET_AVX2_FMA
#define TRI_OWN_STATS
#define TRI_OWN_EVAL
#include "gauss_tri_body.h"
#include "gauss_tri_stats_avx2.h"
#include "gauss_tri_eval_avx2.h"
#endif

#if LSE_HAVE_AVX2_PATH
/* q = |y U - o|^2 of one row, d <= 4 (uv[m]: the first 4 entries of row m
 * of U's strip, o the first 4 offsets): tri_erows' chain for lanes 0-3;
 * its lanes 4-7 hold +0 (zero columns), which its lane tree
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) adds exactly, so
 * (l0 + l2) + (l1 + l3) is its sum. */
LSE_TARGET_AVX2_FMA
static inline double tri_q4(const double *y, size_t d, const __m256d *uv,
                            __m256d o)
{
    __m256d acc = _mm256_setzero_pd();
    for (size_t m = 0; m < d; m++)
        acc = _mm256_fmadd_pd(_mm256_broadcast_sd(y + m), uv[m], acc);
    const __m256d z = _mm256_sub_pd(acc, o);
    const __m256d q = _mm256_fmadd_pd(z, z, _mm256_setzero_pd());
    const __m128d lo = _mm256_castpd256_pd128(q);
    const __m128d hi = _mm256_extractf128_pd(q, 1);
    const __m128d t = _mm_add_pd(lo, hi); /* (l0 + l2, l1 + l3) */
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

/* tri_eval_avx2 for d <= 4: one vector of 4 columns instead of the pair
 * of 8 (at d = 2 three quarters of its lanes were padding); the same
 * operations on the columns that are not padding, so the same bits
 * (test gauss_vrows tri_small). Four rows at a time, so their chains
 * overlap. */
LSE_TARGET_AVX2_FMA
static void tri_eval4_avx2(const lse_gauss_work *w, const double *y,
                           size_t yt, size_t b, gsl_matrix *s)
{
    const size_t d = w->dim, dp = w->dp, K = w->n_comp, st = s->tda;
    const double *cn = w->cnst->data;
    const size_t cs = w->cnst->stride;
    for (size_t k = 0; k < K; k++) {
        const double *uk = w->utri + k * w->ustr;
        __m256d uv[4];
        for (size_t m = 0; m < d; m++)
            uv[m] = _mm256_loadu_pd(uk + 8 * m);
        const __m256d ok = _mm256_loadu_pd(w->otri + k * dp);
        const double ck = cn[k * cs];
        double *sk = s->data + k;
        size_t i = 0;
        for (; i + 4 <= b; i += 4) {
            const double q0 = tri_q4(y + i * yt, d, uv, ok);
            const double q1 = tri_q4(y + (i + 1) * yt, d, uv, ok);
            const double q2 = tri_q4(y + (i + 2) * yt, d, uv, ok);
            const double q3 = tri_q4(y + (i + 3) * yt, d, uv, ok);
            sk[i * st] = ck - 0.5 * q0;
            sk[(i + 1) * st] = ck - 0.5 * q1;
            sk[(i + 2) * st] = ck - 0.5 * q2;
            sk[(i + 3) * st] = ck - 0.5 * q3;
        }
        for (; i < b; i++)
            sk[i * st] = ck - 0.5 * tri_q4(y + i * yt, d, uv, ok);
    }
}
#endif

void lse_gauss_tri_eval(const lse_gauss_work *w, const double *y, size_t yt,
                        size_t b, gsl_matrix *s)
{
#if LSE_HAVE_AVX2_PATH
    if (w->fma == 1 && w->dim <= 4)
        tri_eval4_avx2(w, y, yt, b, s);
    else if (w->fma == 2)
        tri_eval_avx512(y, yt, b, w->dim, w->dp, w->n_comp, w->utri, w->ustr, w->otri,
                        w->cnst->data, w->cnst->stride, s->data, s->tda);
    else
        tri_eval_avx2(y, yt, b, w->dim, w->dp, w->n_comp, w->utri, w->ustr, w->otri,
                      w->cnst->data, w->cnst->stride, s->data, s->tda);
#else
    (void)w;
    (void)y;
    (void)yt;
    (void)b;
    (void)s;
#endif
}

void lse_gauss_tri_stats(lse_gauss_work *w, const gsl_matrix *x,
                         const gsl_matrix *resp, const gsl_vector *weight,
                         double *acc)
{
    const size_t b = x->size1, d = w->dim, dp = w->dp, K = w->n_comp;
    for (size_t i = 0; i < b; i++) {
        const double wi = weight != NULL ? gsl_vector_get(weight, i) : 1.0;
        const double *ri = gsl_matrix_const_ptr(resp, i, 0);
        for (size_t k = 0; k < K; k++)
            acc[k] += ri[k] * wi;
        const double *xi = gsl_matrix_const_ptr(x, i, 0);
#if LSE_HAVE_AVX2_PATH
        if (w->fma != 2) { /* the AVX2 copy: quad-major */
            ts_pack_row(xi, i, b, d, w->xqtri);
            continue;
        }
#endif
        double *xp = w->xtri + i * dp;
        memcpy(xp, xi, d * sizeof(double));
        for (size_t j = d; j < dp; j++)
            xp[j] = 0.0;
    }
#if LSE_HAVE_AVX2_PATH
    for (size_t k = 0; k < K; k++) {
        for (size_t i = 0; i < b; i++)
            w->rhot[i] = gsl_matrix_get(resp, i, k) *
                         (weight != NULL ? gsl_vector_get(weight, i) : 1.0);
        double *s1 = acc + K + k * d, *s2 = acc + K + K * d + k * d * d;
        if (w->fma == 2)
            tri_stats_avx512(w->xtri, b, d, dp, w->mtri + k * dp, w->rhot,
                             w->wtri, s1, s2);
        else
            tri_stats_avx2(w->xqtri, b, d, w->mtri + k * dp, w->rhot,
                           w->wtri, s1, s2);
    }
#endif
}
