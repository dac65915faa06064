#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels-private.h"
#include "softmax-private.h"

/* The softmax of a term's score rows and the check for NaN and +INFINITY
 * before it: a plain copy and, on x86 with GCC or clang, AVX2, AVX2 + FMA
 * and AVX-512 copies selected at run time (lse_softmax_isa_detect).
 * lib/term.c calls lse_softmax_find_bad and lse_softmax_rows once per
 * block of child rows. */

/* Any NaN or +INFINITY among n doubles: -INFINITY (a masked pair) is
 * legal. On the bit patterns, so that the loop vectorizes: exponent all
 * ones and not -INFINITY. */
LSE_KERNEL int row_has_bad(const double *x, size_t n)
{
    uint64_t bad = 0;
    for (size_t j = 0; j < n; j++) {
        uint64_t b;
        memcpy(&b, &x[j], sizeof b);
        const uint64_t expo = b & UINT64_C(0x7FF0000000000000);
        bad |= (expo == UINT64_C(0x7FF0000000000000)) &
               (b != UINT64_C(0xFFF0000000000000));
    }
    return bad != 0;
}

static int block_has_bad_plain(const gsl_matrix *s)
{
    if (s->tda == s->size2) /* contiguous rows: one loop */
        return row_has_bad(s->data, s->size1 * s->size2);
    int bad = 0;
    for (size_t r = 0; r < s->size1; r++)
        bad |= row_has_bad(s->data + r * s->tda, s->size2);
    return bad;
}

#if LSE_HAVE_AVX2_PATH
/* n doubles from x: any not below +INFINITY (unordered: NaN, or +INF)?
 * -INFINITY and finite values compare below. One compare and one or per
 * vector of four, against five integer operations of row_has_bad's
 * vectorized loop: the scan runs before every block's softmax, 2-3 % of
 * the small fits' instructions. */
LSE_TARGET_AVX2
static __m256d span_not_below_inf(const double *x, size_t n, __m256d bad)
{
    const __m256d inf = _mm256_set1_pd(INFINITY);
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        bad = _mm256_or_pd(
            bad, _mm256_cmp_pd(_mm256_loadu_pd(x + j), inf, _CMP_NLT_UQ));
    for (; j < n; j++)
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(_mm256_set1_pd(x[j]), inf,
                                              _CMP_NLT_UQ));
    return bad;
}

LSE_TARGET_AVX2
static int block_has_bad_avx2(const gsl_matrix *s)
{
    __m256d bad = _mm256_setzero_pd();
    if (s->tda == s->size2) /* contiguous rows: one loop */
        bad = span_not_below_inf(s->data, s->size1 * s->size2, bad);
    else
        for (size_t r = 0; r < s->size1; r++)
            bad = span_not_below_inf(s->data + r * s->tda, s->size2, bad);
    return _mm256_movemask_pd(bad) != 0;
}
#endif

int lse_softmax_find_bad(const gsl_matrix *s, const lse_softmax_isa *isa,
                         size_t *row, size_t *col)
{
#if LSE_HAVE_AVX2_PATH
    const int any = isa->avx2 ? block_has_bad_avx2(s) : block_has_bad_plain(s);
#else
    const int any = block_has_bad_plain(s);
    (void)isa;
#endif
    if (!any)
        return 0;
    for (size_t r = 0; r < s->size1; r++)
        for (size_t j = 0; j < s->size2; j++) {
            const double v = gsl_matrix_get(s, r, j);
            if (isnan(v) || v == INFINITY) {
                *row = r;
                *col = j;
                return 1;
            }
        }
    return 0;
}

/* Softmax of row s (n entries, no NaN or +INFINITY) into a (may alias s);
 * returns (1/beta) log sum_j exp(beta s_j). A row of -INFINITY (fully
 * masked) gives a = 0 and -INFINITY. One exp per entry and no temporary:
 * a holds the exponentials, then their normalized values. fast selects
 * lse_exp_nonpos (vectorized) over libm's exp. */
LSE_KERNEL double row_softmax(const double *s, double *a, size_t n, double beta,
                              int fast)
{
    /* four running maxima: one chain of max would wait on its latency */
    double m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        m0 = s[j] > m0 ? s[j] : m0;
        m1 = s[j + 1] > m1 ? s[j + 1] : m1;
        m2 = s[j + 2] > m2 ? s[j + 2] : m2;
        m3 = s[j + 3] > m3 ? s[j + 3] : m3;
    }
    for (; j < n; j++)
        m0 = s[j] > m0 ? s[j] : m0;
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    const double m = m2 > m0 ? m2 : m0;
    if (m == -INFINITY) {
        for (size_t q = 0; q < n; q++)
            a[q] = 0.0;
        return -INFINITY;
    }
    if (fast) {
        for (size_t q = 0; q < n; q++)
            a[q] = lse_exp_nonpos(beta * (s[q] - m));
    } else {
        for (size_t q = 0; q < n; q++)
            a[q] = exp(beta * (s[q] - m));
    }
    /* four partial sums in a fixed order */
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += a[j];
        s1 += a[j + 1];
        s2 += a[j + 2];
        s3 += a[j + 3];
    }
    for (; j < n; j++)
        s0 += a[j];
    const double sum = (s0 + s1) + (s2 + s3);
    const double inv = 1.0 / sum;
    for (size_t q = 0; q < n; q++)
        a[q] *= inv;
    return m + log(sum) / beta;
}

/* Rows of at most this many entries are done a block at a time. */
#define NARROW_ROWS 16

/* Softmax of every row of a block of narrow rows (n <= NARROW_ROWS, e.g.
 * mixture components): the row maxima first, then one pass of
 * exponentials over the whole block and one of logarithms over its rows,
 * loops long enough to vectorize where a row of 3 entries is not.
 * m: scratch of b doubles. Same results as row_softmax except for the
 * summation order of rows of 4 or more entries. */
LSE_KERNEL void softmax_block(const gsl_matrix *s, gsl_matrix *a, double beta,
                              double *lse, double *m, const int fast)
{
    const size_t b = s->size1, n = s->size2, st = s->tda, at = a->tda;
    for (size_t r = 0; r < b; r++) {
        const double *sr = s->data + r * st;
        double mx = -INFINITY;
        for (size_t j = 0; j < n; j++)
            mx = sr[j] > mx ? sr[j] : mx;
        m[r] = mx;
        double *ar = a->data + r * at;
        /* a fully masked row keeps -INFINITY (exp gives 0) */
        const double sh = mx == -INFINITY ? 0.0 : mx;
        for (size_t j = 0; j < n; j++)
            ar[j] = beta * (sr[j] - sh);
    }
    /* one loop over the block when its rows are contiguous */
    const size_t nr = at == n ? 1 : b, len = at == n ? b * n : n;
    for (size_t r = 0; r < nr; r++) {
        double *ar = a->data + r * at;
        if (fast)
            for (size_t j = 0; j < len; j++)
                ar[j] = lse_exp_nonpos(ar[j]);
        else
            for (size_t j = 0; j < len; j++)
                ar[j] = exp(ar[j]);
    }
    for (size_t r = 0; r < b; r++) {
        double *ar = a->data + r * at;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        size_t j = 0;
        for (; j + 4 <= n; j += 4) {
            s0 += ar[j];
            s1 += ar[j + 1];
            s2 += ar[j + 2];
            s3 += ar[j + 3];
        }
        for (; j < n; j++)
            s0 += ar[j];
        const double sum = (s0 + s1) + (s2 + s3);
        const double inv = sum > 0.0 ? 1.0 / sum : 0.0; /* masked: 0 */
        for (size_t q = 0; q < n; q++)
            ar[q] *= inv;
        lse[r] = sum > 0.0 ? sum : 1.0; /* the log pass reads it */
    }
    /* a masked row has m = -INFINITY and sum 1: -INFINITY + 0 */
    if (fast)
        for (size_t r = 0; r < b; r++)
            lse[r] = m[r] + lse_log_pos(lse[r]) / beta;
    else
        for (size_t r = 0; r < b; r++)
            lse[r] = m[r] + log(lse[r]) / beta;
}

static void softmax_rows_plain(const gsl_matrix *s, gsl_matrix *a, double beta,
                               double *lse, double *m)
{
    if (s->size2 <= NARROW_ROWS) {
        softmax_block(s, a, beta, lse, m, 0);
        return;
    }
    for (size_t r = 0; r < s->size1; r++)
        lse[r] = row_softmax(s->data + r * s->tda, a->data + r * a->tda,
                             s->size2, beta, 0);
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX2
static void softmax_rows_avx2(const gsl_matrix *s, gsl_matrix *a, double beta,
                              double *lse, double *m)
{
    if (s->size2 <= NARROW_ROWS) {
        softmax_block(s, a, beta, lse, m, 1);
        return;
    }
    for (size_t r = 0; r < s->size1; r++)
        lse[r] = row_softmax(s->data + r * s->tda, a->data + r * a->tda,
                             s->size2, beta, 1);
}
#endif

#if LSE_HAVE_AVX2_PATH
/* Rows [r0, r0 + nr) of softmax_narrow_body, nr rows at once so that the
 * dependency chains of different rows overlap: unnormalized exponentials
 * to a, their sums to lse, the maxima to m. */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void softmax4_rows(const gsl_matrix *s, gsl_matrix *a, double beta,
                              double *lse, double *m, size_t r0,
                              const size_t nr, const size_t nvec, __m256i tail)
{
    const size_t st = s->tda, at = a->tda;
    const __m256d tailpd = _mm256_castsi256_pd(tail);
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
    const __m256d vbeta = _mm256_set1_pd(beta);
    __m256d v[4][4], sum[4];
    double mr[4];
    for (size_t i = 0; i < nr; i++) {
        const double *sr = s->data + (r0 + i) * st;
        for (size_t q = 0; q + 1 < nvec; q++)
            v[i][q] = _mm256_loadu_pd(sr + 4 * q);
        v[i][nvec - 1] = _mm256_blendv_pd(
            ninf, _mm256_maskload_pd(sr + 4 * (nvec - 1), tail), tailpd);
        __m256d mx = v[i][0];
        for (size_t q = 1; q < nvec; q++)
            mx = _mm256_max_pd(v[i][q], mx);
        mx = _mm256_max_pd(mx, _mm256_permute2f128_pd(mx, mx, 1));
        mx = _mm256_max_pd(mx, _mm256_permute_pd(mx, 5));
        mr[i] = _mm256_cvtsd_f64(mx);
    }
    for (size_t i = 0; i < nr; i++) {
        m[r0 + i] = mr[i];
        /* a fully masked row keeps -INFINITY (exp gives 0) */
        const __m256d sh = _mm256_set1_pd(mr[i] == -INFINITY ? 0.0 : mr[i]);
        sum[i] = _mm256_setzero_pd();
        for (size_t q = 0; q < nvec; q++) {
            v[i][q] = lse_exp_nonpos4(
                _mm256_mul_pd(vbeta, _mm256_sub_pd(v[i][q], sh)));
            sum[i] = _mm256_add_pd(sum[i], v[i][q]);
        }
    }
    for (size_t i = 0; i < nr; i++) {
        double *ar = a->data + (r0 + i) * at; /* may alias the row of s */
        const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(sum[i]),
                                      _mm256_extractf128_pd(sum[i], 1));
        const double tot =
            _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
        /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
        lse[r0 + i] = tot > 0.0 ? tot : 1.0;
        /* normalized before the one store (softmax8_rows) */
        const __m256d inv = _mm256_set1_pd(1.0 / lse[r0 + i]);
        for (size_t q = 0; q + 1 < nvec; q++)
            _mm256_storeu_pd(ar + 4 * q, _mm256_mul_pd(v[i][q], inv));
        lse_store_lanes4(ar + 4 * (nvec - 1),
                         _mm256_mul_pd(v[i][nvec - 1], inv),
                         s->size2 - 4 * (nvec - 1));
    }
}

/* In-register transpose of four vectors of four. */
LSE_TARGET_AVX2_FMA
static inline void tr4(__m256d *r)
{
    const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]);
    const __m256d t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]);
    const __m256d t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/* Four rows from r0 of softmax_narrow_body across the rows: the rows are
 * loaded as softmax4_rows loads them and transposed (four vectors of four
 * per group of four columns), so that column j is one vector with the
 * four rows in its lanes. The maximum and the sum follow softmax4_rows's
 * order lane for lane (over the vectors of a row, then lanes (0, 2) and
 * (1, 3), then the two; the masked tail holds -INFINITY, whose exponential
 * +0 leaves a sum unchanged), so the results are its bits; a row costs
 * n / 4 exponentials of four instead of nvec. Writes the normalized rows,
 * m and the (positive) sum to lse. */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void softmax_tr4(const gsl_matrix *s, gsl_matrix *a, double beta,
                            double *lse, double *m, size_t r0,
                            const size_t nvec, __m256i tail)
{
    const size_t st = s->tda, at = a->tda, n = s->size2;
    const __m256d tailpd = _mm256_castsi256_pd(tail);
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
    __m256d c[4][4]; /* c[q][k]: column 4 q + k of the four rows */
    for (size_t q = 0; q < nvec; q++) {
        for (size_t i = 0; i < 4; i++) {
            const double *sr = s->data + (r0 + i) * st + 4 * q;
            c[q][i] = q + 1 < nvec
                          ? _mm256_loadu_pd(sr)
                          : _mm256_blendv_pd(ninf, _mm256_maskload_pd(sr, tail),
                                             tailpd);
        }
        tr4(c[q]);
    }
    __m256d mk[4];
    for (size_t k = 0; k < 4; k++) {
        mk[k] = c[0][k];
        for (size_t q = 1; q < nvec; q++)
            mk[k] = _mm256_max_pd(c[q][k], mk[k]);
    }
    const __m256d mx =
        _mm256_max_pd(_mm256_max_pd(mk[0], mk[2]), _mm256_max_pd(mk[1], mk[3]));
    /* a fully masked row keeps -INFINITY (exp gives 0) */
    const __m256d sh =
        _mm256_andnot_pd(_mm256_cmp_pd(mx, ninf, _CMP_EQ_OQ), mx);
    const __m256d vbeta = _mm256_set1_pd(beta);
    __m256d sk[4];
    for (size_t k = 0; k < 4; k++)
        for (size_t q = 0; q < nvec; q++) {
            c[q][k] = 4 * q + k < n ? lse_exp_nonpos4(_mm256_mul_pd(
                                          vbeta, _mm256_sub_pd(c[q][k], sh)))
                                    : _mm256_setzero_pd();
            sk[k] = q == 0 ? c[q][k] : _mm256_add_pd(sk[k], c[q][k]);
        }
    __m256d tot =
        _mm256_add_pd(_mm256_add_pd(sk[0], sk[2]), _mm256_add_pd(sk[1], sk[3]));
    /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
    tot = _mm256_blendv_pd(_mm256_set1_pd(1.0), tot,
                           _mm256_cmp_pd(tot, _mm256_setzero_pd(), _CMP_GT_OQ));
    _mm256_storeu_pd(m + r0, mx);
    _mm256_storeu_pd(lse + r0, tot);
    const __m256d inv = _mm256_div_pd(_mm256_set1_pd(1.0), tot);
    for (size_t q = 0; q < nvec; q++) {
        for (size_t k = 0; k < 4; k++)
            c[q][k] = _mm256_mul_pd(c[q][k], inv);
        tr4(c[q]);
        for (size_t i = 0; i < 4; i++) {
            double *ar = a->data + (r0 + i) * at + 4 * q;
            if (q + 1 < nvec)
                _mm256_storeu_pd(ar, c[q][i]);
            else
                lse_store_lanes4(ar, c[q][i], n - 4 * q);
        }
    }
}

/* Softmax of the rows of a block of narrow rows (n <= NARROW_ROWS) with
 * AVX2 and FMA: a row in nvec = ceil(n / 4) vectors (the last one masked),
 * four rows at a time (across the rows by softmax_tr4 for n < 8, else
 * and for the last b % 4 rows by softmax4_rows, same bits): maximum,
 * exponentials (lse_exp_nonpos4), sum, the scaled row (the four rows'
 * divisions overlap; a second pass over the block would load each row
 * behind the masked store of the row before, which blocks the store
 * forwarding), and one log per row as softmax_block. Same results as softmax_block up to the
 * rounding of the fused exponential and the order of the row sum (lane-wise
 * over the vectors, then across lanes). */
LSE_TARGET_AVX2_FMA
LSE_KERNEL void softmax_narrow_body(const gsl_matrix *s, gsl_matrix *a,
                                    double beta, double *lse, double *m,
                                    const size_t nvec)
{
    const size_t b = s->size1, n = s->size2;
    const size_t rem = n - (nvec - 1) * 4; /* 1 to 4 entries in the last */
    const __m256i tail = lse_lanes4_mask(rem);
    /* rows of 8 or more entries are faster row by row (bench/softmax_bench:
     * the transposes cost more than the reductions they save) */
    const size_t r0 = n < 8 ? b - b % 4 : 0;
    for (size_t r = 0; r < r0; r += 4)
        softmax_tr4(s, a, beta, lse, m, r, nvec, tail);
    size_t r = r0;
    for (; r + 4 <= b; r += 4)
        softmax4_rows(s, a, beta, lse, m, r, 4, nvec, tail);
    for (; r < b; r++)
        softmax4_rows(s, a, beta, lse, m, r, 1, nvec, tail);
    /* a masked row has m = -INFINITY and sum 1: -INFINITY + 0; four
     * logarithms at once (lse_log_pos4, same bits); at beta 1 (every
     * mixture) without the division, which returns its operand exactly
     * then and held the add behind a 13-cycle divide */
    const __m256d vbeta = _mm256_set1_pd(beta);
    if (beta == 1.0)
        for (r = 0; r + 4 <= b; r += 4)
            _mm256_storeu_pd(
                lse + r, _mm256_add_pd(_mm256_loadu_pd(m + r),
                                       lse_log_pos4(_mm256_loadu_pd(lse + r))));
    for (r = beta == 1.0 ? b - b % 4 : 0; r + 4 <= b; r += 4)
        _mm256_storeu_pd(
            lse + r,
            _mm256_add_pd(
                _mm256_loadu_pd(m + r),
                _mm256_div_pd(lse_log_pos4(_mm256_loadu_pd(lse + r)), vbeta)));
    for (; r < b; r++)
        lse[r] = m[r] + lse_log_pos(lse[r]) / beta;
}

LSE_TARGET_AVX2_FMA
static void softmax_narrow_fma(const gsl_matrix *s, gsl_matrix *a, double beta,
                               double *lse, double *m)
{
    switch ((s->size2 + 3) / 4) {
    case 1:
        softmax_narrow_body(s, a, beta, lse, m, 1);
        break;
    case 2:
        softmax_narrow_body(s, a, beta, lse, m, 2);
        break;
    case 3:
        softmax_narrow_body(s, a, beta, lse, m, 3);
        break;
    default:
        softmax_narrow_body(s, a, beta, lse, m, 4);
        break;
    }
}
#endif

#if LSE_HAVE_AVX2_PATH
/* Rows [r0, r0 + nr) of softmax_narrow8_body: nr rows at once, so that
 * the dependency chains of different rows (maximum, exponentials, sum)
 * overlap. The normalized rows to a, their sums to lse. */
LSE_TARGET_AVX512
LSE_KERNEL void softmax8_rows(const gsl_matrix *s, gsl_matrix *a, double beta,
                              double *lse, double *m, size_t r0,
                              const size_t nr, const size_t nvec, __mmask8 tail)
{
    const size_t st = s->tda, at = a->tda;
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    const __m512d vbeta = _mm512_set1_pd(beta);
    __m512d v[4][2], sum[4];
    double mr[4];
    for (size_t i = 0; i < nr; i++) {
        const double *sr = s->data + (r0 + i) * st;
        if (nvec == 2)
            v[i][0] = _mm512_loadu_pd(sr);
        v[i][nvec - 1] = _mm512_mask_loadu_pd(ninf, tail, sr + 8 * (nvec - 1));
        const __m512d mx =
            nvec == 2 ? _mm512_max_pd(v[i][1], v[i][0]) : v[i][0];
        mr[i] = _mm512_reduce_max_pd(mx);
    }
    for (size_t i = 0; i < nr; i++) {
        m[r0 + i] = mr[i];
        /* a fully masked row keeps -INFINITY (exp gives 0) */
        const __m512d sh = _mm512_set1_pd(mr[i] == -INFINITY ? 0.0 : mr[i]);
        sum[i] = _mm512_setzero_pd();
        for (size_t q = 0; q < nvec; q++) {
            v[i][q] = lse_exp_nonpos8(
                _mm512_mul_pd(vbeta, _mm512_sub_pd(v[i][q], sh)));
            sum[i] = _mm512_add_pd(sum[i], v[i][q]);
        }
    }
    for (size_t i = 0; i < nr; i++) {
        double *ar = a->data + (r0 + i) * at; /* may alias the row of s */
        const double tot = _mm512_reduce_add_pd(sum[i]);
        /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
        lse[r0 + i] = tot > 0.0 ? tot : 1.0;
        /* normalized before the one store: a second pass would load each
         * row behind the masked store of the row before, whose 64 bytes
         * overlap it and block the store forwarding (rows of 9 to 15
         * entries: 1.4 times slower) */
        const __m512d inv = _mm512_set1_pd(1.0 / lse[r0 + i]);
        if (nvec == 2)
            _mm512_storeu_pd(ar, _mm512_mul_pd(v[i][0], inv));
        _mm512_mask_storeu_pd(ar + 8 * (nvec - 1), tail,
                              _mm512_mul_pd(v[i][nvec - 1], inv));
    }
}

/* Rows of at most this many entries in contiguous blocks are done eight
 * rows at a time across the rows (softmax_cols8). */
#define COLS_ROWS 4

/* The permutations between eight contiguous rows of n <= COLS_ROWS entries
 * (n vectors of 8, row-major) and their n columns (one vector of 8 rows
 * each): column j takes lane i from flat entry i n + j, i.e. lane
 * (i n + j) % 8 of vector (i n + j) / 8. */
typedef struct cols8_perm {
    __m512i in_idx[COLS_ROWS][COLS_ROWS], out_idx[COLS_ROWS][COLS_ROWS];
    __mmask8 in_mask[COLS_ROWS][COLS_ROWS], out_mask[COLS_ROWS][COLS_ROWS];
} cols8_perm;

LSE_TARGET_AVX512
static void cols8_perm_make(cols8_perm *p, size_t n)
{
    for (size_t j = 0; j < n; j++)
        for (size_t q = 0; q < n; q++) {
            int64_t ii[8] = {0}, oi[8] = {0};
            unsigned im = 0, om = 0;
            for (size_t i = 0; i < 8; i++) {
                const size_t f = i * n + j; /* column j, row i */
                if (f / 8 == q) {
                    ii[i] = (int64_t)(f % 8);
                    im |= 1u << i;
                }
                const size_t g = 8 * q + i; /* vector q, lane i */
                if (g % n == j) {
                    oi[i] = (int64_t)(g / n);
                    om |= 1u << i;
                }
            }
            p->in_idx[j][q] = _mm512_loadu_si512(ii);
            p->out_idx[j][q] = _mm512_loadu_si512(oi);
            p->in_mask[j][q] = (__mmask8)im;
            p->out_mask[j][q] = (__mmask8)om;
        }
}

/* Eight contiguous rows of n <= COLS_ROWS entries from row r0 (a may alias
 * s): the softmax8_rows arithmetic lane for lane with the rows in the
 * lanes and the entries in n vectors, so that no lane is idle. The maximum
 * and the sum follow _mm512_reduce_max_pd's and _mm512_reduce_add_pd's
 * order over the row (lanes n..7 hold -INFINITY and exp gives +0 there,
 * which leave a maximum and a sum unchanged), so the results are those of
 * softmax8_rows bit for bit. Writes the normalized row, m and the
 * (positive) sum to lse as softmax_narrow8_body's first pass. */
LSE_TARGET_AVX512
LSE_KERNEL void softmax_cols8(const double *s, double *a, double beta,
                              double *lse, double *m, size_t r0,
                              const cols8_perm *p, const size_t n)
{
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    __m512d v[COLS_ROWS], c[COLS_ROWS];
    for (size_t q = 0; q < n; q++)
        v[q] = _mm512_loadu_pd(s + r0 * n + 8 * q);
    for (size_t j = 0; j < n; j++) {
        c[j] = ninf;
        for (size_t q = 0; q < n; q++)
            c[j] = _mm512_mask_permutexvar_pd(c[j], p->in_mask[j][q],
                                              p->in_idx[j][q], v[q]);
    }
    for (size_t j = n; j < COLS_ROWS; j++)
        c[j] = ninf;
    /* _mm512_reduce_max_pd: max(max(c2, c0), max(c3, c1)) */
    const __m512d mx =
        _mm512_max_pd(_mm512_max_pd(c[2], c[0]), _mm512_max_pd(c[3], c[1]));
    /* a fully masked row keeps -INFINITY (exp gives 0) */
    const __mmask8 allm = _mm512_cmp_pd_mask(mx, ninf, _CMP_EQ_OQ);
    const __m512d sh = _mm512_mask_mov_pd(mx, allm, _mm512_setzero_pd());
    const __m512d vbeta = _mm512_set1_pd(beta);
    for (size_t j = 0; j < COLS_ROWS; j++)
        c[j] =
            j < n
                ? lse_exp_nonpos8(_mm512_mul_pd(vbeta, _mm512_sub_pd(c[j], sh)))
                : _mm512_setzero_pd();
    /* _mm512_reduce_add_pd: (c2 + c0) + (c3 + c1) */
    __m512d tot =
        _mm512_add_pd(_mm512_add_pd(c[2], c[0]), _mm512_add_pd(c[3], c[1]));
    /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
    const __mmask8 pos =
        _mm512_cmp_pd_mask(tot, _mm512_setzero_pd(), _CMP_GT_OQ);
    tot = _mm512_mask_mov_pd(_mm512_set1_pd(1.0), pos, tot);
    _mm512_storeu_pd(m + r0, mx);
    _mm512_storeu_pd(lse + r0, tot);
    const __m512d inv = _mm512_div_pd(_mm512_set1_pd(1.0), tot);
    for (size_t j = 0; j < n; j++)
        c[j] = _mm512_mul_pd(c[j], inv);
    for (size_t q = 0; q < n; q++) {
        __m512d o = _mm512_setzero_pd();
        for (size_t j = 0; j < n; j++)
            o = _mm512_mask_permutexvar_pd(o, p->out_mask[j][q],
                                           p->out_idx[j][q], c[j]);
        _mm512_storeu_pd(a + r0 * n + 8 * q, o);
    }
}

/* The rows [0, b8) (b8 a multiple of 8) of a contiguous block of n <=
 * COLS_ROWS entries per row by softmax_cols8. */
LSE_TARGET_AVX512
static void softmax_cols8_rows(const gsl_matrix *s, gsl_matrix *a, double beta,
                               double *lse, double *m, size_t b8)
{
    const size_t n = s->size2;
    cols8_perm p;
    cols8_perm_make(&p, n);
    for (size_t r = 0; r < b8; r += 8) {
        switch (n) {
        case 1:
            softmax_cols8(s->data, a->data, beta, lse, m, r, &p, 1);
            break;
        case 2:
            softmax_cols8(s->data, a->data, beta, lse, m, r, &p, 2);
            break;
        case 3:
            softmax_cols8(s->data, a->data, beta, lse, m, r, &p, 3);
            break;
        default:
            softmax_cols8(s->data, a->data, beta, lse, m, r, &p, 4);
            break;
        }
    }
}

/* In-register transpose of eight vectors of eight. */
LSE_TARGET_AVX512
static inline void tr8(__m512d *r)
{
    __m512d t[8], u[8];
    for (size_t i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);     /* columns 0 2 4 6 */
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]); /* columns 1 3 5 7 */
    }
    for (size_t h = 0; h < 8; h += 4) {                        /* rows h..h+3 */
        u[h] = _mm512_shuffle_f64x2(t[h], t[h + 2], 0x88);     /* 0 4 */
        u[h + 1] = _mm512_shuffle_f64x2(t[h], t[h + 2], 0xDD); /* 2 6 */
        u[h + 2] = _mm512_shuffle_f64x2(t[h + 1], t[h + 3], 0x88); /* 1 5 */
        u[h + 3] = _mm512_shuffle_f64x2(t[h + 1], t[h + 3], 0xDD); /* 3 7 */
    }
    r[0] = _mm512_shuffle_f64x2(u[0], u[4], 0x88);
    r[4] = _mm512_shuffle_f64x2(u[0], u[4], 0xDD);
    r[2] = _mm512_shuffle_f64x2(u[1], u[5], 0x88);
    r[6] = _mm512_shuffle_f64x2(u[1], u[5], 0xDD);
    r[1] = _mm512_shuffle_f64x2(u[2], u[6], 0x88);
    r[5] = _mm512_shuffle_f64x2(u[2], u[6], 0xDD);
    r[3] = _mm512_shuffle_f64x2(u[3], u[7], 0x88);
    r[7] = _mm512_shuffle_f64x2(u[3], u[7], 0xDD);
}

/* Eight rows from r0 of softmax_narrow8_body across the rows, any tda:
 * the rows are loaded as softmax8_rows loads them and transposed (tr8, per
 * vector of a row), so that column j is one vector with the eight rows in
 * its lanes. The maximum and the sum follow softmax8_rows's order lane for
 * lane (the two vectors of a row lane-wise, then _mm512_reduce_max_pd's
 * and _mm512_reduce_add_pd's tree: lanes k and k + 4, then k and k + 2,
 * then 0 and 1; the masked tail holds -INFINITY, whose exponential +0
 * leaves a sum unchanged), so the results are its bits; a row costs n / 8
 * exponentials of eight instead of nvec and no horizontal reductions.
 * Writes the normalized rows, m and the (positive) sum to lse. */
LSE_TARGET_AVX512
LSE_KERNEL void softmax_tr8(const gsl_matrix *s, gsl_matrix *a, double beta,
                            double *lse, double *m, size_t r0,
                            const size_t nvec, __mmask8 tail)
{
    const size_t st = s->tda, at = a->tda, n = s->size2;
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    __m512d c[2][8]; /* c[q][k]: column 8 q + k of the eight rows */
    for (size_t q = 0; q < nvec; q++) {
        for (size_t i = 0; i < 8; i++) {
            const double *sr = s->data + (r0 + i) * st + 8 * q;
            c[q][i] = q + 1 < nvec ? _mm512_loadu_pd(sr)
                                   : _mm512_mask_loadu_pd(ninf, tail, sr);
        }
        tr8(c[q]);
    }
    __m512d w[8];
    for (size_t k = 0; k < 8; k++)
        w[k] = nvec == 2 ? _mm512_max_pd(c[1][k], c[0][k]) : c[0][k];
    for (size_t k = 0; k < 4; k++)
        w[k] = _mm512_max_pd(w[k + 4], w[k]);
    for (size_t k = 0; k < 2; k++)
        w[k] = _mm512_max_pd(w[k + 2], w[k]);
    const __m512d mx = _mm512_max_pd(w[0], w[1]);
    /* a fully masked row keeps -INFINITY (exp gives 0) */
    const __mmask8 allm = _mm512_cmp_pd_mask(mx, ninf, _CMP_EQ_OQ);
    const __m512d sh = _mm512_mask_mov_pd(mx, allm, _mm512_setzero_pd());
    const __m512d vbeta = _mm512_set1_pd(beta);
    for (size_t q = 0; q < nvec; q++)
        for (size_t k = 0; k < 8; k++)
            c[q][k] = 8 * q + k < n ? lse_exp_nonpos8(_mm512_mul_pd(
                                          vbeta, _mm512_sub_pd(c[q][k], sh)))
                                    : _mm512_setzero_pd();
    for (size_t k = 0; k < 8; k++)
        w[k] = nvec == 2 ? _mm512_add_pd(c[0][k], c[1][k]) : c[0][k];
    for (size_t k = 0; k < 4; k++)
        w[k] = _mm512_add_pd(w[k + 4], w[k]);
    for (size_t k = 0; k < 2; k++)
        w[k] = _mm512_add_pd(w[k + 2], w[k]);
    __m512d tot = _mm512_add_pd(w[0], w[1]);
    /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
    const __mmask8 pos =
        _mm512_cmp_pd_mask(tot, _mm512_setzero_pd(), _CMP_GT_OQ);
    tot = _mm512_mask_mov_pd(_mm512_set1_pd(1.0), pos, tot);
    _mm512_storeu_pd(m + r0, mx);
    _mm512_storeu_pd(lse + r0, tot);
    const __m512d inv = _mm512_div_pd(_mm512_set1_pd(1.0), tot);
    for (size_t q = 0; q < nvec; q++) {
        for (size_t k = 0; k < 8; k++)
            c[q][k] = _mm512_mul_pd(c[q][k], inv);
        tr8(c[q]);
        for (size_t i = 0; i < 8; i++) {
            double *ar = a->data + (r0 + i) * at + 8 * q;
            if (q + 1 < nvec)
                _mm512_storeu_pd(ar, c[q][i]);
            else
                _mm512_mask_storeu_pd(ar, tail, c[q][i]);
        }
    }
}

/* softmax_narrow_body with AVX-512F: a row in nvec = ceil(n / 8) vectors
 * of 8 (the last one masked), four rows at a time; the row sum is
 * _mm512_reduce_add_pd of the lane-wise sum. Blocks of eight rows go
 * across the rows with the same bits: contiguous rows of at most COLS_ROWS
 * entries by softmax_cols8, other rows of one vector by softmax_tr8; the
 * rest row by row (softmax8_rows). */
LSE_TARGET_AVX512
LSE_KERNEL void softmax_narrow8_body(const gsl_matrix *s, gsl_matrix *a,
                                     double beta, double *lse, double *m,
                                     const size_t nvec)
{
    const size_t b = s->size1, n = s->size2, at = a->tda;
    const size_t rem = n - (nvec - 1) * 8; /* 1 to 8 entries in the last */
    const __mmask8 tail = (__mmask8)((1u << rem) - 1u);
    /* rows of two vectors (9 to 16 entries) are faster row by row, now
     * that a row is scaled before its one store (bench/softmax_bench,
     * 272 rows: 18.6-19.1 against 18.8-25.8 ns per row) */
    const size_t r0 = nvec == 2 ? 0 : b - b % 8;
    if (n <= COLS_ROWS && s->tda == n && at == n && r0 > 0)
        softmax_cols8_rows(s, a, beta, lse, m, r0);
    else
        for (size_t r = 0; r < r0; r += 8)
            softmax_tr8(s, a, beta, lse, m, r, nvec, tail);
    size_t r = r0;
    for (; r + 4 <= b; r += 4)
        softmax8_rows(s, a, beta, lse, m, r, 4, nvec, tail);
    for (; r < b; r++)
        softmax8_rows(s, a, beta, lse, m, r, 1, nvec, tail);
    /* a masked row has m = -INFINITY and sum 1: -INFINITY + 0; eight
     * logarithms at once (lse_log_pos8, same bits), the last ones masked; x / 1
     * = x exactly, so beta = 1 skips the division */
    const __m512d vbeta = _mm512_set1_pd(beta);
    for (r = 0; r < b; r += 8) {
        const __mmask8 k = b - r >= 8 ? 0xFF : (__mmask8)((1u << (b - r)) - 1u);
        __m512d l =
            lse_log_pos8(_mm512_mask_loadu_pd(_mm512_set1_pd(1.0), k, lse + r));
        if (beta != 1.0)
            l = _mm512_div_pd(l, vbeta);
        _mm512_mask_storeu_pd(
            lse + r, k, _mm512_add_pd(_mm512_maskz_loadu_pd(k, m + r), l));
    }
}

LSE_TARGET_AVX512
static void softmax_narrow_avx512(const gsl_matrix *s, gsl_matrix *a,
                                  double beta, double *lse, double *m)
{
    if (s->size2 <= 8)
        softmax_narrow8_body(s, a, beta, lse, m, 1);
    else
        softmax_narrow8_body(s, a, beta, lse, m, 2);
}
#endif

void lse_softmax_rows(const gsl_matrix *s, gsl_matrix *a, double beta,
                      double *lse, double *m, const lse_softmax_isa *isa)
{
#if LSE_HAVE_AVX2_PATH
    if (isa->avx512 && s->size2 <= NARROW_ROWS && s->size2 > 0) {
        softmax_narrow_avx512(s, a, beta, lse, m);
        return;
    }
    if (isa->fma && s->size2 <= NARROW_ROWS && s->size2 > 0) {
        softmax_narrow_fma(s, a, beta, lse, m);
        return;
    }
    if (isa->avx2) {
        softmax_rows_avx2(s, a, beta, lse, m);
        return;
    }
#else
    (void)isa;
#endif
    softmax_rows_plain(s, a, beta, lse, m);
}
