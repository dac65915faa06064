#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "exactsum-private.h"
#include "kernels-private.h"

#if LSE_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

/*
 * lse_xsum: exact sums of doubles in a fixed-point superaccumulator
 * (docs/core.md, "Exact statistics"). The number held is
 *   sum_i digit[i] 2^(32 i - 1074)
 * with signed int64 digits whose carries are deferred: an addition puts
 * parts < 2^32 into three digits (exactsum-private.h), lse_xsum_carry
 * brings digits 0 .. D-2 back to [0, 2^32) (the top digit keeps the sign).
 * 68 digits hold 2176 bits: 2098 for the range of the doubles (2^-1074 to
 * 2^1024) and 78 of headroom, more than any count of terms below 2^62
 * needs.
 */

enum { D = LSE_XSUM_DIGITS };

void lse_xsum_init(lse_xsum *x)
{
    if (x != NULL)
        memset(x, 0, sizeof *x);
}

void lse_xsum_add(lse_xsum *x, double v) { lse_xsum_add_inline(x, v); }

void lse_xsum_add_array(lse_xsum *x, const double *v, size_t n)
{
    /* two-digit additions (exactsum-private.h), room reserved once per
     * chunk instead of a count and a test per term: the same exact sum in
     * about two thirds of the instructions (row energies of small EM fits,
     * docs/lsefit.md "Cost per EM step, session 13") */
    while (n > 0) {
        const size_t m = n < LSE_XSUM_FAST_MAX ? n : LSE_XSUM_FAST_MAX;
        lse_xsum_reserve2(x, 1, (int64_t)m);
        for (size_t i = 0; i < m; i++)
            lse_xsum_add2(x, v[i]);
        v += m;
        n -= m;
    }
}

#ifdef __SIZEOF_INT128__
/* Terms of fast_sum at most (17 bits of count) and the span of their
 * exponents at most: 53 + FAST_SPAN + 17 = 126 bits, below the sign bit
 * of a 128-bit accumulator. */
#define FAST_MAX_N 65536
#define FAST_SPAN 56
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* The range of the biased exponents (1 for subnormals) of the non-zero
 * terms v[i0 .. n) merged into *emin, *emax; 0 when a term is not
 * finite. */
static int range_tail(const double *v, size_t i0, size_t n, int *emin,
                      int *emax)
{
    for (size_t i = i0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &v[i], sizeof b);
        const int e = (int)((b >> 52) & 0x7FF);
        if (e == 0x7FF)
            return 0;
        if ((b << 1) == 0)
            continue; /* +-0 */
        const int ee = e > 0 ? e : 1;
        *emin = ee < *emin ? ee : *emin;
        *emax = ee > *emax ? ee : *emax;
    }
    return 1;
}

/* sum + the terms v[i0 .. n) as integers in units of 2^(emin - 1075), in
 * wrapping unsigned arithmetic (exact while |sum| < 2^126). Two's
 * complement without a branch on the sign (row energies of either sign
 * would mispredict it): t, or -t = (t ^ ~0) + 1. */
static u128 acc_tail(const double *v, size_t i0, size_t n, int emin, u128 sum)
{
    for (size_t i = i0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &v[i], sizeof b);
        const int e = (int)((b >> 52) & 0x7FF);
        const uint64_t m = (b & UINT64_C(0x000FFFFFFFFFFFFF)) |
                           (e > 0 ? UINT64_C(1) << 52 : 0);
        /* a zero term (m = 0) may lie below emin: shifted by 0 */
        const int sh = (e > 0 ? e : 1) - emin;
        const u128 t = (u128)m << (unsigned)(sh > 0 ? sh : 0);
        const u128 sg = (u128)0 - (u128)(b >> 63); /* all ones if negative */
        sum += (t ^ sg) - sg;
    }
    return sum;
}

#if LSE_HAVE_AVX2_PATH
/* range_tail four terms at a time: the exponents in the low 32 bits of
 * each 64-bit lane, compared as 32-bit integers (the high halves hold 2047
 * for the minimum, 0 for the maximum, so they never win). */
LSE_TARGET_AVX2
static int range_avx2(const double *v, size_t n, int *emin, int *emax)
{
    const __m256i f = _mm256_set1_epi64x(0x7FF), one = _mm256_set1_epi64x(1);
    const __m256i hi = _mm256_set1_epi64x(INT64_C(0x7FF) << 32);
    const __m256i z = _mm256_setzero_si256();
    __m256i lo4 = _mm256_set1_epi32(2047), hi4 = z, bad = z;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(v + i));
        const __m256i e = _mm256_and_si256(_mm256_srli_epi64(b, 52), f);
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi64(e, f));
        const __m256i zero = _mm256_cmpeq_epi64(_mm256_slli_epi64(b, 1), z);
        const __m256i ee = _mm256_max_epi32(e, one);
        lo4 = _mm256_min_epi32(
            lo4, _mm256_or_si256(_mm256_blendv_epi8(ee, f, zero), hi));
        hi4 = _mm256_max_epi32(hi4, _mm256_andnot_si256(zero, ee));
    }
    if (!_mm256_testz_si256(bad, bad))
        return 0;
    __m128i l = _mm_min_epi32(_mm256_castsi256_si128(lo4),
                              _mm256_extracti128_si256(lo4, 1));
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(hi4),
                              _mm256_extracti128_si256(hi4, 1));
    l = _mm_min_epi32(l, _mm_shuffle_epi32(l, 0x4E));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    const int a = _mm_cvtsi128_si32(l), c = _mm_cvtsi128_si32(h);
    *emin = a < *emin ? a : *emin;
    *emax = c > *emax ? c : *emax;
    return range_tail(v, i, n, emin, emax);
}

/* acc_tail four terms at a time: a term m 2^sh (m < 2^53, 0 <= sh <=
 * FAST_SPAN) is lo + 2^64 hi with lo = m << sh mod 2^64 and hi = m >>
 * (64 - sh) < 2^45, added as three signed parts, lo's two halves and hi,
 * each in its own 64-bit lane sum (at most 2^14 terms a lane: below 2^59);
 * a zero term below emin has a negative shift, which vpsllvq and vpsrlvq
 * treat as one of 64 or more: 0. The exact integer is the same as
 * acc_tail's, so the same bits. */
LSE_TARGET_AVX2
static u128 acc_avx2(const double *v, size_t n, int emin)
{
    const __m256i f = _mm256_set1_epi64x(0x7FF), one = _mm256_set1_epi64x(1);
    const __m256i mant = _mm256_set1_epi64x(INT64_C(0x000FFFFFFFFFFFFF));
    const __m256i imp = _mm256_set1_epi64x(INT64_C(1) << 52);
    const __m256i low = _mm256_set1_epi64x(INT64_C(0xFFFFFFFF));
    const __m256i v64 = _mm256_set1_epi64x(64), ve = _mm256_set1_epi64x(emin);
    const __m256i z = _mm256_setzero_si256();
    __m256i s0 = z, s1 = z, s2 = z;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(v + i));
        const __m256i e = _mm256_and_si256(_mm256_srli_epi64(b, 52), f);
        const __m256i nz = _mm256_cmpgt_epi64(e, z);
        const __m256i m = _mm256_or_si256(_mm256_and_si256(b, mant),
                                          _mm256_and_si256(imp, nz));
        const __m256i sh = _mm256_sub_epi64(
            _mm256_add_epi64(e, _mm256_andnot_si256(nz, one)), ve);
        const __m256i lo = _mm256_sllv_epi64(m, sh);
        const __m256i hi = _mm256_srlv_epi64(m, _mm256_sub_epi64(v64, sh));
        const __m256i sg = _mm256_cmpgt_epi64(z, b); /* all ones if negative */
        s0 = _mm256_add_epi64(
            s0, _mm256_sub_epi64(
                    _mm256_xor_si256(_mm256_and_si256(lo, low), sg), sg));
        s1 = _mm256_add_epi64(
            s1, _mm256_sub_epi64(
                    _mm256_xor_si256(_mm256_srli_epi64(lo, 32), sg), sg));
        s2 = _mm256_add_epi64(s2,
                              _mm256_sub_epi64(_mm256_xor_si256(hi, sg), sg));
    }
    int64_t p[3][4];
    _mm256_storeu_si256((__m256i *)p[0], s0);
    _mm256_storeu_si256((__m256i *)p[1], s1);
    _mm256_storeu_si256((__m256i *)p[2], s2);
    const int64_t t0 = p[0][0] + p[0][1] + p[0][2] + p[0][3];
    const int64_t t1 = p[1][0] + p[1][1] + p[1][2] + p[1][3];
    const int64_t t2 = p[2][0] + p[2][1] + p[2][2] + p[2][3];
    const u128 sum = (u128)(i128)t0 + ((u128)(i128)t1 << 32) +
                     ((u128)(i128)t2 << 64);
    return acc_tail(v, i, n, emin, sum);
}

/* The AVX2 copies, chosen once per process (LSE_NO_SIMD read then); both
 * give the same integers, so the choice never shows in a result. */
static int use_avx2(void)
{
    static _Atomic int avx2 = -1;
    int a = atomic_load_explicit(&avx2, memory_order_relaxed);
    if (a < 0) {
        a = lse_cpu_avx2();
        atomic_store_explicit(&avx2, a, memory_order_relaxed);
    }
    return a;
}
#endif

/* The exact sum of n finite doubles as a 128-bit integer in units of
 * 2^(emin - 1075), emin the smallest biased exponent of the non-zero
 * terms (1 for subnormals), rounded as lse_xsum_round rounds: the 64 bits
 * below the leading one with the rest OR-ed into bit 0, converted (to
 * nearest even) and scaled exactly. The same bits as lse_xsum_round (the
 * 64 bits and the sticky bit are those of the same exact value; the
 * scaling is exact for a normal result). 0 when it does not apply: a term
 * not finite, exponents spanning more than FAST_SPAN, a result outside
 * the normal range. A row energy sum of a small fit spans about 20. */
static int fast_sum(const double *v, size_t n, double *out)
{
    int emin = 2047, emax = 0;
#if LSE_HAVE_AVX2_PATH
    const int avx2 = use_avx2();
    if (!(avx2 ? range_avx2(v, n, &emin, &emax)
               : range_tail(v, 0, n, &emin, &emax)))
        return 0;
#else
    if (!range_tail(v, 0, n, &emin, &emax))
        return 0;
#endif
    if (emax == 0) {
        *out = 0.0; /* every term zero: lse_xsum_round's +0 */
        return 1;
    }
    if (emax - emin > FAST_SPAN)
        return 0;
#if LSE_HAVE_AVX2_PATH
    const u128 sum = avx2 ? acc_avx2(v, n, emin) : acc_tail(v, 0, n, emin, 0);
#else
    const u128 sum = acc_tail(v, 0, n, emin, 0);
#endif
    const i128 acc = (i128)sum;
    if (acc == 0) {
        *out = 0.0;
        return 1;
    }
    const int minus = acc < 0;
    const u128 mag = minus ? -(u128)acc : (u128)acc;
    const uint64_t hi = (uint64_t)(mag >> 64);
    const unsigned nb = hi != 0 ? 128u - (unsigned)__builtin_clzll(hi)
                                : 64u - (unsigned)__builtin_clzll((uint64_t)mag);
    const int lead = (int)nb - 1 + emin - 1075; /* exponent of the leading bit */
    if (lead < -1022 || lead > 1023)
        return 0;
    const unsigned pos = nb > 64 ? nb - 64 : 0;
    uint64_t u = (uint64_t)(mag >> pos);
    if (pos > 0 && (mag & (((u128)1 << pos) - 1)) != 0)
        u |= 1; /* sticky, below the rounding bit */
    const double r = ldexp((double)u, (int)pos + emin - 1075);
    *out = minus ? -r : r;
    return 1;
}
#endif

double lse_xsum_sum(const double *v, size_t n)
{
#ifdef __SIZEOF_INT128__
    double r;
    if (n <= FAST_MAX_N && fast_sum(v, n, &r))
        return r;
#endif
    lse_xsum x;
    lse_xsum_init(&x);
    lse_xsum_add_array(&x, v, n);
    return lse_xsum_round(&x);
}

void lse_xsum_merge(lse_xsum *x, const lse_xsum *y)
{
    /* invariant: n_add < 2^30 and |digit| <= (n_add + 1) 2^32; the sum of
     * two with n_add < 2^29 keeps it with n_add = n_x + n_y + 1 */
    if (x->n_add >= LSE_XSUM_CARRY_EVERY)
        lse_xsum_carry(x);
    lse_xsum yc;
    if (y->n_add >= LSE_XSUM_CARRY_EVERY) {
        yc = *y;
        lse_xsum_carry(&yc);
        y = &yc;
    }
    for (size_t i = 0; i < D; i++)
        x->digit[i] += y->digit[i];
    x->n_add += y->n_add + 1;
    x->n_pinf += y->n_pinf;
    x->n_ninf += y->n_ninf;
    x->n_nan += y->n_nan;
    if (x->n_add >= LSE_XSUM_CARRY_EVERY)
        lse_xsum_carry(x);
}

/* Bit length of a positive value < 2^64. */
static unsigned bit_length(uint64_t v)
{
    unsigned n = 0;
    while (v != 0) {
        n++;
        v >>= 1;
    }
    return n;
}

double lse_xsum_round(const lse_xsum *x)
{
    if (x->n_nan > 0 || (x->n_pinf > 0 && x->n_ninf > 0))
        return NAN;
    if (x->n_pinf > 0)
        return INFINITY;
    if (x->n_ninf > 0)
        return -INFINITY;
    lse_xsum t = *x;
    lse_xsum_carry(&t);
    const int neg = t.digit[D - 1] < 0;
    if (neg) { /* the magnitude: negate and carry again */
        for (size_t i = 0; i < D; i++)
            t.digit[i] = -t.digit[i];
        lse_xsum_carry(&t);
    }
    size_t h = D;
    while (h > 0 && t.digit[h - 1] == 0)
        h--;
    if (h == 0)
        return 0.0;
    h--; /* the highest non-zero digit, in (0, 2^32) */
    const unsigned nb = 32u * (unsigned)h + bit_length((uint64_t)t.digit[h]);
    /* the 64 bits below the leading one, the rest OR-ed into bit 0 (the
     * conversion to double then rounds to nearest even correctly: the
     * sticky bit lies below the rounding bit) */
    const unsigned pos = nb > 64 ? nb - 64 : 0;
    const unsigned q = pos >> 5, r = pos & 31u;
    uint64_t u = 0;
    for (unsigned j = 0; j < 3 && q + j < D; j++) {
        const uint64_t part = (uint64_t)t.digit[q + j];
        const int sh = 32 * (int)j - (int)r;
        if (sh < 0)
            u |= part >> (unsigned)(-sh);
        else if (sh < 64)
            u |= part << (unsigned)sh;
    }
    int sticky = r > 0 && ((uint64_t)t.digit[q] & ((UINT64_C(1) << r) - 1));
    for (unsigned j = 0; j < q && !sticky; j++)
        sticky = t.digit[j] != 0;
    if (sticky)
        u |= 1;
    /* pos = 0: u is the exact value in units of 2^-1074 (a subnormal
     * result is exact; a normal one is rounded once by the conversion and
     * scaled exactly); pos > 0: the result is normal or overflows */
    const double m = ldexp((double)u, (int)pos - 1074);
    return neg ? -m : m;
}

void lse_xsum_export(lse_xsum *x, double *out)
{
    lse_xsum_carry(x);
    for (size_t i = 0; i < D; i++)
        out[i] = (double)x->digit[i];
    out[D] = (double)x->n_pinf;
    out[D + 1] = (double)x->n_ninf;
    out[D + 2] = (double)x->n_nan;
}

lse_status lse_xsum_import(lse_xsum *x, const double *in)
{
    const double lim = 4503599627370496.0; /* 2^52 */
    for (size_t i = 0; i < LSE_XSUM_EXPORT; i++) {
        const double v = in[i];
        if (!(fabs(v) < lim) || v != floor(v) || (i >= D && v < 0))
            return LSE_EDOM;
    }
    for (size_t i = 0; i < D; i++)
        x->digit[i] = (int64_t)in[i];
    x->n_add = INT64_C(1) << 20; /* |digit| < 2^52 = 2^20 2^32 */
    x->n_pinf = (int64_t)in[D];
    x->n_ninf = (int64_t)in[D + 1];
    x->n_nan = (int64_t)in[D + 2];
    return LSE_OK;
}
