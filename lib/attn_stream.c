#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <lsegraph/core.h>

#include "kernels-private.h"
#include "size-private.h"
#include "threads-private.h"


/* Streaming dot-product attention energy (include/lsegraph/stream.h,
 * docs/performance.md "Streaming attention").
 *
 * Q' = beta a Q, so that beta S = Q' K'. Two passes over tiles of BQ query
 * rows x BK key rows, each tile scored by one dgemm into a per-thread
 * buffer that stays in cache:
 *
 *   pass 1, one task per query block (it owns those rows): online
 *     log-sum-exp over the key blocks in order (running max m, sum l,
 *     accumulator O rescaled by exp(m_old - m_new) when the max grows),
 *     O += P V; at the end L_i = m_i + log l_i and O_i / l_i is the
 *     attention output; with V = K it is -dE/dq_i / a.
 *   pass 2 (gradient of the keys), one task per key block (it owns those
 *     rows): the tiles K_j Q_i'^T again, P' = exp(beta S' - L), dK_j +=
 *     P'^T Q_i over the query blocks in order.
 *
 * 8 n m d flops and 2 n m exponentials against the 6 n m d + n m of a
 * dense term, which however writes and reads the whole score matrix. Every
 * output row is written by one task in a fixed order and BLAS runs serial
 * inside the tasks (lse_blas_serial_begin), so the bits do not depend on
 * the thread count; the energy is summed in row order afterwards. */

#ifndef BQ
#define BQ 256 /* query rows per tile */
#endif
#ifndef BK
#define BK 256 /* key rows per tile */
#endif

typedef struct stream_ctx {
    size_t n, m, d, dv;
    const double *qs; /* (n, d) beta a q, row stride d */
    const double *q;  /* original q, row stride ldq */
    size_t ldq;
    const double *k; /* (m, d), row stride ldk */
    size_t ldk;
    const double *v; /* (m, dv), row stride ldv */
    size_t ldv;
    unsigned mask;
    double *lse; /* (n) beta-scaled row log-sum-exp, -INFINITY if masked */
    double *o;   /* (n, dv) attention output, row stride dv */
    double *buf; /* per thread: tile BQ*BK + BK*d accumulator + 2 BQ */
    size_t buf_len;
    int avx512;
    int avx2; /* AVX2 + FMA (when not avx512) */
} stream_ctx;

/* ---------------------------------------------------------------- */
/* Row kernels: plain, AVX2 + FMA and AVX-512 copies (the choice is fixed
 * for a run). */

static double row_max_plain(const double *s, size_t n)
{
    double mx = -INFINITY;
    for (size_t j = 0; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    return mx;
}

/* s[j] = exp(min(s[j] - shift, 0)); returns the sum (lane order 4). */
static double row_exp_plain(double *s, size_t n, double shift)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (size_t j = 0; j < n; j++) {
        double x = s[j] - shift;
        x = x < 0.0 ? x : 0.0;
        s[j] = lse_exp_nonpos(x);
        acc[j & 3] += s[j];
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* s[j] = exp(min(s[j] - sh[j], 0)). */
static void row_exp_sub_plain(double *s, const double *sh, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        double x = s[j] - sh[j];
        x = x < 0.0 ? x : 0.0;
        s[j] = lse_exp_nonpos(x);
    }
}

#if LSE_HAVE_AVX2_PATH
/* The vector copies' last entries, one by one: s[j] = exp(min(s[j] -
 * shift, 0)) for j in [j, n), each added to r in turn. */
static double row_exp_tail(double *s, size_t j, size_t n, double shift,
                           double r)
{
    for (; j < n; j++) {
        double x = s[j] - shift;
        x = x < 0.0 ? x : 0.0;
        s[j] = lse_exp_nonpos(x);
        r += s[j];
    }
    return r;
}

LSE_TARGET_AVX512
static double row_max_avx512(const double *s, size_t n)
{
    __m512d mx = _mm512_set1_pd(-INFINITY);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        mx = _mm512_max_pd(mx, _mm512_loadu_pd(s + j));
    double r = _mm512_reduce_max_pd(mx);
    for (; j < n; j++)
        r = s[j] > r ? s[j] : r;
    return r;
}

LSE_TARGET_AVX512
static double row_exp_avx512(double *s, size_t n, double shift)
{
    const __m512d sh = _mm512_set1_pd(shift), zero = _mm512_setzero_pd();
    __m512d acc0 = zero, acc1 = zero;
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512d x0 = _mm512_sub_pd(_mm512_loadu_pd(s + j), sh);
        __m512d x1 = _mm512_sub_pd(_mm512_loadu_pd(s + j + 8), sh);
        x0 = lse_exp_nonpos8(_mm512_min_pd(x0, zero));
        x1 = lse_exp_nonpos8(_mm512_min_pd(x1, zero));
        _mm512_storeu_pd(s + j, x0);
        _mm512_storeu_pd(s + j + 8, x1);
        acc0 = _mm512_add_pd(acc0, x0);
        acc1 = _mm512_add_pd(acc1, x1);
    }
    for (; j + 8 <= n; j += 8) {
        __m512d x0 = _mm512_sub_pd(_mm512_loadu_pd(s + j), sh);
        x0 = lse_exp_nonpos8(_mm512_min_pd(x0, zero));
        _mm512_storeu_pd(s + j, x0);
        acc0 = _mm512_add_pd(acc0, x0);
    }
    double r = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
    return row_exp_tail(s, j, n, shift, r);
}

LSE_TARGET_AVX512
static void row_exp_sub_avx512(double *s, const double *shv, size_t n)
{
    const __m512d zero = _mm512_setzero_pd();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m512d x = _mm512_sub_pd(_mm512_loadu_pd(s + j),
                                  _mm512_loadu_pd(shv + j));
        _mm512_storeu_pd(s + j, lse_exp_nonpos8(_mm512_min_pd(x, zero)));
    }
    row_exp_sub_plain(s + j, shv + j, n - j);
}

/* row_exp_avx512 and row_exp_sub_avx512 with AVX2 + FMA: lse_exp_nonpos4
 * is lse_exp_nonpos8 lane for lane, and each 8-lane vector is a pair of
 * 4-lane ones, summed in _mm512_reduce_add_pd's order (the 256-bit halves,
 * then the 128-bit halves, then the two lanes). On AVX2 the passes took
 * the plain lse_exp_nonpos, a third of the time at T = 65 536 (2.15 x the
 * roofline on Zen 3: docs/performance.md, "Session 18"). */
LSE_TARGET_AVX2_FMA
static inline __m256d exp_sub4(const double *s, __m256d sh)
{
    const __m256d x = _mm256_sub_pd(_mm256_loadu_pd(s), sh);
    return lse_exp_nonpos4(_mm256_min_pd(x, _mm256_setzero_pd()));
}

LSE_TARGET_AVX2_FMA
static double row_exp_avx2(double *s, size_t n, double shift)
{
    const __m256d sh = _mm256_set1_pd(shift), zero = _mm256_setzero_pd();
    /* acc0 (lanes 0-3, 4-7), acc1 the same: the AVX-512 copy's two sums */
    __m256d a0l = zero, a0h = zero, a1l = zero, a1h = zero;
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256d x0l = exp_sub4(s + j, sh), x0h = exp_sub4(s + j + 4, sh);
        const __m256d x1l = exp_sub4(s + j + 8, sh);
        const __m256d x1h = exp_sub4(s + j + 12, sh);
        _mm256_storeu_pd(s + j, x0l);
        _mm256_storeu_pd(s + j + 4, x0h);
        _mm256_storeu_pd(s + j + 8, x1l);
        _mm256_storeu_pd(s + j + 12, x1h);
        a0l = _mm256_add_pd(a0l, x0l);
        a0h = _mm256_add_pd(a0h, x0h);
        a1l = _mm256_add_pd(a1l, x1l);
        a1h = _mm256_add_pd(a1h, x1h);
    }
    for (; j + 8 <= n; j += 8) {
        const __m256d x0l = exp_sub4(s + j, sh), x0h = exp_sub4(s + j + 4, sh);
        _mm256_storeu_pd(s + j, x0l);
        _mm256_storeu_pd(s + j + 4, x0h);
        a0l = _mm256_add_pd(a0l, x0l);
        a0h = _mm256_add_pd(a0h, x0h);
    }
    const __m256d h = _mm256_add_pd(_mm256_add_pd(a0h, a1h),
                                    _mm256_add_pd(a0l, a1l));
    const __m128d q = _mm_add_pd(_mm256_extractf128_pd(h, 1),
                                 _mm256_castpd256_pd128(h));
    double r = _mm_cvtsd_f64(q) + _mm_cvtsd_f64(_mm_unpackhi_pd(q, q));
    return row_exp_tail(s, j, n, shift, r);
}

LSE_TARGET_AVX2_FMA
static void row_exp_sub_avx2(double *s, const double *shv, size_t n)
{
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        _mm256_storeu_pd(s + j, exp_sub4(s + j, _mm256_loadu_pd(shv + j)));
    row_exp_sub_plain(s + j, shv + j, n - j);
}
#endif

static double row_max(const stream_ctx *c, const double *s, size_t n)
{
#if LSE_HAVE_AVX2_PATH
    if (c->avx512)
        return row_max_avx512(s, n);
#endif
    (void)c;
    return row_max_plain(s, n);
}

static double row_exp(const stream_ctx *c, double *s, size_t n, double shift)
{
#if LSE_HAVE_AVX2_PATH
    if (c->avx512)
        return row_exp_avx512(s, n, shift);
    if (c->avx2)
        return row_exp_avx2(s, n, shift);
#endif
    (void)c;
    return row_exp_plain(s, n, shift);
}

static void row_exp_sub(const stream_ctx *c, double *s, const double *sh,
                        size_t n)
{
#if LSE_HAVE_AVX2_PATH
    if (c->avx512) {
        row_exp_sub_avx512(s, sh, n);
        return;
    }
    if (c->avx2) {
        row_exp_sub_avx2(s, sh, n);
        return;
    }
#endif
    (void)c;
    row_exp_sub_plain(s, sh, n);
}

/* ---------------------------------------------------------------- */
/* Masks on positions: query row i, key row j. */

/* 0: no pair of the tile allowed; 1: all allowed; 2: some. */
static int tile_kind(unsigned mask, size_t r0, size_t r1, size_t c0,
                     size_t c1)
{
    const int causal = (mask & LSE_MASK_CAUSAL) != 0;
    const int noself = (mask & LSE_MASK_NO_SELF) != 0;
    if (causal && c0 > r1 - 1) /* every j > i */
        return 0;
    if (causal && noself && c0 >= r1 - 1) /* every j >= i */
        return 0;
    if (noself && !causal && r1 - r0 == 1 && c1 - c0 == 1 && r0 == c0)
        return 0;
    const int some = (causal && c1 - 1 > r0) ||
                     (noself && r0 < c1 && c0 < r1);
    return some ? 2 : 1;
}

static int allowed(unsigned mask, size_t i, size_t j)
{
    if ((mask & LSE_MASK_CAUSAL) && j > i)
        return 0;
    if ((mask & LSE_MASK_NO_SELF) && j == i)
        return 0;
    return 1;
}

/* ---------------------------------------------------------------- */

/* Pass 1 on query block [r0, r1). */
static void pass1_block(const stream_ctx *c, size_t r0, size_t r1, double *w)
{
    const size_t bq = r1 - r0, dv = c->dv;
    double *s = w;                        /* (bq, BK) */
    double *mrow = w + (size_t)BQ * BK;   /* (bq) running max */
    double *lrow = mrow + BQ;             /* (bq) running sum */
    double *o = c->o + r0 * dv;           /* (bq, dv) */
    for (size_t r = 0; r < bq; r++) {
        mrow[r] = -INFINITY;
        lrow[r] = 0.0;
    }
    memset(o, 0, bq * dv * sizeof *o);
    for (size_t c0 = 0; c0 < c->m; c0 += BK) {
        const size_t c1 = c0 + BK < c->m ? c0 + BK : c->m, bk = c1 - c0;
        const int kind = tile_kind(c->mask, r0, r1, c0, c1);
        if (kind == 0)
            continue;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk,
                    (int)c->d, 1.0, c->qs + r0 * c->d, (int)c->d,
                    c->k + c0 * c->ldk, (int)c->ldk, 0.0, s, BK);
        for (size_t r = 0; r < bq; r++) {
            double *sr = s + r * BK;
            if (kind == 2)
                for (size_t j = 0; j < bk; j++)
                    if (!allowed(c->mask, r0 + r, c0 + j))
                        sr[j] = -INFINITY;
            const double mx = row_max(c, sr, bk);
            const double mold = mrow[r];
            const double mnew = mx > mold ? mx : mold;
            if (mnew == -INFINITY) { /* nothing allowed yet */
                memset(sr, 0, bk * sizeof *sr);
                continue;
            }
            const double sum = row_exp(c, sr, bk, mnew);
            if (mnew != mold) {
                const double corr = lse_exp_nonpos(mold - mnew);
                lrow[r] *= corr;
                double *orow = o + r * dv;
                for (size_t t = 0; t < dv; t++)
                    orow[t] *= corr;
                mrow[r] = mnew;
            }
            lrow[r] += sum;
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq,
                    (int)dv, (int)bk, 1.0, s, BK, c->v + c0 * c->ldv,
                    (int)c->ldv, 1.0, o, (int)dv);
    }
    for (size_t r = 0; r < bq; r++) {
        double *orow = o + r * dv;
        if (lrow[r] > 0.0) {
            c->lse[r0 + r] = mrow[r] + log(lrow[r]);
            const double inv = 1.0 / lrow[r];
            for (size_t t = 0; t < dv; t++)
                orow[t] *= inv;
        } else {
            c->lse[r0 + r] = -INFINITY;
            memset(orow, 0, dv * sizeof *orow);
        }
    }
}

/* Pass 2 on key block [c0, c1): dk rows (bk, d) += -a P^T Q. */
static void pass2_block(const stream_ctx *c, size_t c0, size_t c1,
                        double scale, double *dk, size_t lddk, double *w)
{
    const size_t bk = c1 - c0, d = c->d;
    double *s = w;                      /* (bk, BQ) */
    double *acc = w + (size_t)BQ * BK;  /* (bk, d) */
    double *sh = acc + (size_t)BK * d;  /* (BQ) shifts */
    memset(acc, 0, bk * d * sizeof *acc);
    for (size_t r0 = 0; r0 < c->n; r0 += BQ) {
        const size_t r1 = r0 + BQ < c->n ? r0 + BQ : c->n, bq = r1 - r0;
        const int kind = tile_kind(c->mask, r0, r1, c0, c1);
        if (kind == 0)
            continue;
        for (size_t r = 0; r < bq; r++) {
            const double l = c->lse[r0 + r];
            sh[r] = l == -INFINITY ? INFINITY : l; /* masked row: P = 0 */
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bk, (int)bq,
                    (int)d, 1.0, c->k + c0 * c->ldk, (int)c->ldk,
                    c->qs + r0 * d, (int)d, 0.0, s, BQ);
        for (size_t j = 0; j < bk; j++) {
            double *sj = s + j * BQ;
            if (kind == 2)
                for (size_t r = 0; r < bq; r++)
                    if (!allowed(c->mask, r0 + r, c0 + j))
                        sj[r] = -INFINITY;
            row_exp_sub(c, sj, sh, bq);
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk,
                    (int)d, (int)bq, 1.0, s, BQ, c->q + r0 * c->ldq,
                    (int)c->ldq, 1.0, acc, (int)d);
    }
    for (size_t j = 0; j < bk; j++) {
        double *out = dk + (c0 + j) * lddk;
        const double *a = acc + j * d;
        for (size_t t = 0; t < d; t++)
            out[t] += -scale * a[t];
    }
}

static int finite_matrix(const gsl_matrix *x)
{
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return 0;
    return 1;
}

/* Validation shared by both entry points. */
static lse_status check_args(const char *fn, const gsl_matrix *q,
                             const gsl_matrix *k, const gsl_matrix *v,
                             double beta, double scale, unsigned mask,
                             lse_error *err)
{
    if (q == NULL || k == NULL || v == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL q, k or v");
    if (q->size2 != k->size2)
        return lse_error_set(err, LSE_EDIM, fn,
                             "q is %zux%zu and k %zux%zu: the columns differ",
                             q->size1, q->size2, k->size1, k->size2);
    if (v->size1 != k->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "v has %zu rows and k %zu", v->size1, k->size1);
    if (q->size1 > INT32_MAX || k->size1 > INT32_MAX || q->size2 > INT32_MAX ||
        v->size2 > INT32_MAX)
        return lse_error_set(err, LSE_EDIM, fn,
                             "q, k or v has more than %d rows or columns",
                             INT32_MAX);
    if (!(beta > 0.0) || !isfinite(beta) || !isfinite(scale))
        return lse_error_set(err, LSE_EDOM, fn,
                             "beta = %g and scale = %g: beta must be finite "
                             "and > 0, scale finite",
                             beta, scale);
    if ((mask & ~(unsigned)(LSE_MASK_CAUSAL | LSE_MASK_NO_SELF)) != 0)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown mask bits 0x%x",
                             mask);
    if (!finite_matrix(q) || !finite_matrix(k) || !finite_matrix(v))
        return lse_error_set(err, LSE_EDOM, fn,
                             "q, k or v has a NaN or infinite entry");
    return LSE_OK;
}

/* Pass 1 (and pass 2 when dk != NULL); c->o and c->lse filled. */
static lse_status run(stream_ctx *c, const gsl_matrix *q, double beta,
                      double scale, gsl_matrix *dk)
{
    const size_t n = c->n, d = c->d;
    size_t nd = 0, ndv = 0, wlen = 0;
    if (lse_size_mul(n, d, &nd) || lse_size_mul(n, c->dv, &ndv))
        return LSE_ENOMEM;
    wlen = (size_t)BQ * BK + (size_t)BK * (d > c->dv ? d : c->dv) + 2 * BQ;
    const size_t nbq = (n + BQ - 1) / BQ, nbk = (c->m + BK - 1) / BK;
    const size_t ntask = nbq > nbk ? nbq : nbk;
    const int nt = lse_threads_for(ntask);
    size_t wall = 0;
    if (lse_size_mul(wlen, (size_t)nt, &wall))
        return LSE_ENOMEM;
    double *qs = malloc((nd ? nd : 1) * sizeof *qs);
    c->lse = malloc((n ? n : 1) * sizeof *c->lse);
    c->o = malloc((ndv ? ndv : 1) * sizeof *c->o);
    c->buf = malloc(wall * sizeof *c->buf);
    c->buf_len = wlen;
    if (qs == NULL || c->lse == NULL || c->o == NULL || c->buf == NULL) {
        free(qs);
        return LSE_ENOMEM;
    }
    const double f = beta * scale;
    for (size_t i = 0; i < n; i++)
        for (size_t t = 0; t < d; t++)
            qs[i * d + t] = f * q->data[i * q->tda + t];
    c->qs = qs;
    const int saved = lse_blas_serial_begin(nt);
    const long nb1 = (long)nbq;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
#endif
    for (long b = 0; b < nb1; b++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        const size_t r0 = (size_t)b * BQ;
        pass1_block(c, r0, r0 + BQ < n ? r0 + BQ : n,
                    c->buf + (size_t)tid * wlen);
    }
    if (dk != NULL) {
        const long nb2 = (long)nbk;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
#endif
        for (long b = 0; b < nb2; b++) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            const size_t c0 = (size_t)b * BK;
            pass2_block(c, c0, c0 + BK < c->m ? c0 + BK : c->m, scale,
                        dk->data, dk->tda, c->buf + (size_t)tid * wlen);
        }
    }
    lse_blas_serial_end(saved);
    c->qs = NULL;
    free(qs);
    return LSE_OK;
}

static void ctx_free(stream_ctx *c)
{
    free(c->lse);
    free(c->o);
    free(c->buf);
}

static stream_ctx ctx_make(const gsl_matrix *q, const gsl_matrix *k,
                           const gsl_matrix *v, unsigned mask)
{
    stream_ctx c;
    memset(&c, 0, sizeof c);
    c.n = q->size1;
    c.m = k->size1;
    c.d = q->size2;
    c.dv = v->size2;
    c.q = q->data;
    c.ldq = q->tda;
    c.k = k->data;
    c.ldk = k->tda;
    c.v = v->data;
    c.ldv = v->tda;
    c.mask = mask;
    c.avx512 = lse_cpu_avx512();
    c.avx2 = !c.avx512 && lse_cpu_avx2_fma();
    return c;
}

static double energy_of(const stream_ctx *c, double beta)
{
    double e = 0.0;
    for (size_t i = 0; i < c->n; i++)
        if (c->lse[i] != -INFINITY)
            e -= c->lse[i] / beta;
    return e;
}

lse_status lse_attn_stream(const gsl_matrix *q, const gsl_matrix *k,
                           double beta, double scale, unsigned mask,
                           double *energy, gsl_matrix *dq, gsl_matrix *dk,
                           lse_error *err)
{
    static const char fn[] = "lse_attn_stream";
    if (energy == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL energy");
    lse_status st = check_args(fn, q, k, k, beta, scale, mask, err);
    if (st != LSE_OK)
        return st;
    if ((dq != NULL && (dq->size1 != q->size1 || dq->size2 != q->size2)) ||
        (dk != NULL && (dk->size1 != k->size1 || dk->size2 != k->size2)))
        return lse_error_set(err, LSE_EDIM, fn,
                             "dq must be %zux%zu and dk %zux%zu", q->size1,
                             q->size2, k->size1, k->size2);
    stream_ctx c = ctx_make(q, k, k, mask);
    if (c.n == 0 || c.m == 0) { /* every row masked */
        *energy = 0.0;
        return LSE_OK;
    }
    st = run(&c, q, beta, scale, dk);
    if (st != LSE_OK) {
        ctx_free(&c);
        return lse_error_set(err, st, fn, "%zu queries x %zu keys, d = %zu: "
                             "out of memory", c.n, c.m, c.d);
    }
    *energy = energy_of(&c, beta);
    if (dq != NULL)
        for (size_t i = 0; i < c.n; i++)
            for (size_t t = 0; t < c.d; t++)
                dq->data[i * dq->tda + t] += -scale * c.o[i * c.d + t];
    ctx_free(&c);
    return LSE_OK;
}

lse_status lse_attn_stream_apply(const gsl_matrix *q, const gsl_matrix *k,
                                 const gsl_matrix *v, double beta,
                                 double scale, unsigned mask, gsl_matrix *out,
                                 double *energy, lse_error *err)
{
    static const char fn[] = "lse_attn_stream_apply";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL out");
    lse_status st = check_args(fn, q, k, v, beta, scale, mask, err);
    if (st != LSE_OK)
        return st;
    if (out->size1 != q->size1 || out->size2 != v->size2)
        return lse_error_set(err, LSE_EDIM, fn, "out is %zux%zu, expected "
                             "%zux%zu", out->size1, out->size2, q->size1,
                             v->size2);
    stream_ctx c = ctx_make(q, k, v, mask);
    if (c.n == 0 || c.m == 0) {
        gsl_matrix_set_zero(out);
        if (energy != NULL)
            *energy = 0.0;
        return LSE_OK;
    }
    st = run(&c, q, beta, scale, NULL);
    if (st != LSE_OK) {
        ctx_free(&c);
        return lse_error_set(err, st, fn, "%zu queries x %zu keys, d = %zu: "
                             "out of memory", c.n, c.m, c.d);
    }
    if (energy != NULL)
        *energy = energy_of(&c, beta);
    for (size_t i = 0; i < c.n; i++)
        for (size_t t = 0; t < c.dv; t++)
            out->data[i * out->tda + t] = c.o[i * c.dv + t];
    ctx_free(&c);
    return LSE_OK;
}
