#ifndef LSEGRAPH_KERNELS_PRIVATE_H
#define LSEGRAPH_KERNELS_PRIVATE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Small vectorizable kernels shared by the hot loops (never installed).
 *
 * The library is compiled for the baseline of its architecture (x86-64:
 * SSE2). Hot loops exist twice: a plain version and, on x86 with GCC or
 * clang, a copy compiled with LSE_TARGET_AVX2 that the caller selects at
 * run time with lse_cpu_avx2(). Both copies compute the same operations in
 * the same order (-std=c11 keeps floating-point contraction off, and no
 * loop reassociates a sum), so they differ only where they call different
 * exp implementations; on one machine the choice never changes, which is
 * all the thread-count invariance needs. docs/performance.md.
 */

/* Bodies shared by the plain and the AVX2 copies must be inlined into
 * both (a separate out-of-line copy would be compiled for the baseline). */
#if defined(__GNUC__) || defined(__clang__)
#define LSE_KERNEL static inline __attribute__((always_inline))
#else
#define LSE_KERNEL static inline
#endif

#if (defined(__GNUC__) || defined(__clang__)) &&                               \
    (defined(__x86_64__) || defined(__i386__))
#define LSE_HAVE_AVX2_PATH 1
#define LSE_TARGET_AVX2 __attribute__((target("avx2")))
#define LSE_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
/* Environment variable name set to a non-empty value other than "0": the
 * tests use LSE_NO_SIMD (no AVX2 copy at all) and LSE_NO_AVX512 to run the
 * other copies on a machine that has the instructions. Read when a term or
 * workspace is created (and by each graph evaluation). */
static inline int lse_cpu_env_off(const char *name)
{
    const char *e = getenv(name);
    return e != NULL && e[0] != '\0' && !(e[0] == '0' && e[1] == '\0');
}
static inline int lse_cpu_avx2(void)
{
    __builtin_cpu_init(); /* idempotent; needed before constructors run */
    return __builtin_cpu_supports("avx2") != 0 && !lse_cpu_env_off("LSE_NO_SIMD");
}
/* AVX2 and FMA: kernels that call fma() explicitly (rounding differs from
 * the plain copy, which multiplies and adds; on one machine the choice
 * never changes) */
static inline int lse_cpu_avx2_fma(void)
{
    return lse_cpu_avx2() && __builtin_cpu_supports("fma") != 0;
}
/* AVX-512F (with AVX2 and FMA): the 8-wide copies of the FMA kernels.
 * Kernels that only widen a sum of fused multiply-adds per entry give the
 * same bits as their AVX2 copy; the softmax does not (row sums). */
#define LSE_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f")))
static inline int lse_cpu_avx512(void)
{
    return lse_cpu_avx2_fma() && __builtin_cpu_supports("avx512f") != 0 &&
           !lse_cpu_env_off("LSE_NO_AVX512");
}
#else
#define LSE_HAVE_AVX2_PATH 0
#define LSE_TARGET_AVX2
#define LSE_TARGET_AVX2_FMA
#define LSE_TARGET_AVX512
static inline int lse_cpu_avx2(void) { return 0; }
static inline int lse_cpu_avx2_fma(void) { return 0; }
static inline int lse_cpu_avx512(void) { return 0; }
#endif

/*
 * exp(x) for x <= 0 (the argument of a shifted softmax), including
 * x = -INFINITY (0). Branch-free so that loops over it vectorize:
 * x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by its
 * Taylor polynomial of degree 13 (truncation below 1e-17 relative; Estrin
 * evaluation), times 2^k built in the exponent bits. Relative error below
 * 5e-16 against libm on [-708, 0]; x < -708 gives 0 (libm would give a
 * value below 3e-308,
 * negligible next to the softmax maximum 1). Also exact for x = 0
 * (returns 1). Not for x > 0 beyond 709 or NaN (callers never pass them).
 */
static inline double lse_exp_nonpos(double x)
{
    static const double lo = -708.0;
    uint64_t xb, lob;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&lob, &lo, sizeof lob);
    /* x < lo, as an unsigned compare of the bit patterns (valid for every
     * non-NaN x: negative values order by magnitude; a float compare and
     * select does not vectorize under -ftrapping-math) */
    const uint64_t under = xb > lob ? ~UINT64_C(0) : UINT64_C(0);
    xb = (xb & ~under) | (lob & under);
    double xc;
    memcpy(&xc, &xb, sizeof xc);
    const double shift = 0x1.8p52; /* round to nearest by the FPU */
    const double t = xc * 0x1.71547652b82fep0 + shift;
    const double k = t - shift;
    const double r =
        (xc - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    /* Estrin's scheme: a shallow dependency tree, so that the few
     * exponentials of a short row do not wait on 13 chained steps */
    const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const double p01 = 1.0 + r, p23 = 0.5 + r * (1.0 / 6.0);
    const double p45 = 1.0 / 24.0 + r * (1.0 / 120.0);
    const double p67 = 1.0 / 720.0 + r * (1.0 / 5040.0);
    const double p89 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
    const double p1011 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0);
    const double p1213 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0);
    const double q0 = p01 + r2 * p23, q1 = p45 + r2 * p67;
    const double q2 = p89 + r2 * p1011;
    const double t0 = q0 + r4 * q1, t1 = q2 + r4 * p1213;
    const double p = t0 + r8 * t1;
    int64_t ti;
    memcpy(&ti, &t, sizeof ti);
    const uint64_t sb =
        ((uint64_t)(ti - INT64_C(0x4338000000000000) + 1023) << 52) & ~under;
    double s;
    memcpy(&s, &sb, sizeof s);
    return p * s;
}

/*
 * log(x) for positive, finite, normal x (the sum of a softmax row, in
 * [1, n]). Branch-free so that loops over it vectorize: x = 2^e m with
 * m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1),
 * |s| < 0.172, by its odd series to s^21 (truncation below 1e-17
 * relative), plus e ln 2 with a Cody-Waite split. Relative error below
 * 7e-16 against libm; log(1) = 0 exactly.
 */
LSE_KERNEL double lse_log_pos(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    /* mantissa with exponent 0, halved when it exceeds sqrt(2) */
    uint64_t mb =
        (b & UINT64_C(0x000FFFFFFFFFFFFF)) | UINT64_C(0x3FF0000000000000);
    const uint64_t big = mb > UINT64_C(0x3FF6A09E667F3BCD) ? 1 : 0;
    mb -= big << 52;
    double m;
    memcpy(&m, &mb, sizeof m);
    /* the exponent (plus 1 when halved) as a double, built in the bits of
     * 2^52 + e so that no integer conversion is needed */
    const uint64_t eb = UINT64_C(0x4330000000000000) | ((b >> 52) + big);
    double e;
    memcpy(&e, &eb, sizeof e);
    e -= 0x1p52 + 1023.0;
    const double f = m - 1.0, sd = f / (m + 1.0), z = sd * sd;
    const double z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
    /* 1 + z/3 + z^2/5 + ... + z^10/21 (Estrin) */
    const double c01 = 1.0 + z * (1.0 / 3.0), c23 = 1.0 / 5.0 + z * (1.0 / 7.0);
    const double c45 = 1.0 / 9.0 + z * (1.0 / 11.0);
    const double c67 = 1.0 / 13.0 + z * (1.0 / 15.0);
    const double c89 = 1.0 / 17.0 + z * (1.0 / 19.0);
    const double d0 = c01 + z2 * c23, d1 = c45 + z2 * c67;
    const double t0 = d0 + z4 * d1, t1 = c89 + z2 * (1.0 / 21.0);
    const double p = t0 + z8 * t1;
    return e * 6.93147180369123816490e-01 +
           (2.0 * sd * p + e * 1.90821492927058770002e-10);
}

#if LSE_HAVE_AVX2_PATH
#include <immintrin.h> /* only inside LSE_TARGET_AVX2_FMA functions */

/* The mask of a 4-lane maskload of the first n (0 to 4) lanes. */
LSE_TARGET_AVX2_FMA
static inline __m256i lse_lanes4_mask(size_t n)
{
    static const int64_t mtab[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(const void *)(mtab + 4 - n));
}

/*
 * The first rem (0 to 4) lanes of v to p with plain stores. A masked
 * store (vmaskmovpd) is microcoded on AMD's Zen 2 and 3, many times the
 * cost of a store there; this is one 128-bit and one 64-bit store at most.
 */
LSE_TARGET_AVX2_FMA
static inline void lse_store_lanes4(double *p, __m256d v, size_t rem)
{
    if (rem >= 4) {
        _mm256_storeu_pd(p, v);
        return;
    }
    const __m128d lo = _mm256_castpd256_pd128(v);
    if (rem == 1)
        _mm_store_sd(p, lo);
    if (rem < 2)
        return;
    _mm_storeu_pd(p, lo);
    if (rem == 3)
        _mm_store_sd(p + 2, _mm256_extractf128_pd(v, 1));
}

/*
 * Four lse_exp_nonpos at once with AVX2 and FMA, for callers compiled with
 * LSE_TARGET_AVX2_FMA: the same reduction and the same degree-13 Taylor
 * polynomial (Estrin), with fused multiply-adds, so results may differ from
 * lse_exp_nonpos in the last bit (relative error below 5e-16 as well).
 * x <= 0 or -INFINITY, never NaN; x < -708 gives 0.
 */
LSE_TARGET_AVX2_FMA
static inline __m256d lse_exp_nonpos4(__m256d x)
{
    const __m256d lo = _mm256_set1_pd(-708.0);
    const __m256d under = _mm256_cmp_pd(x, lo, _CMP_LT_OQ);
    x = _mm256_max_pd(x, lo);
    const __m256d shift = _mm256_set1_pd(0x1.8p52);
    const __m256d t =
        _mm256_fmadd_pd(x, _mm256_set1_pd(0x1.71547652b82fep0), shift);
    const __m256d k = _mm256_sub_pd(t, shift);
    /* k * ln2_hi is exact (ln2_hi has 11 trailing zero bits) */
    __m256d r =
        _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);
    const __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2);
    const __m256d r8 = _mm256_mul_pd(r4, r4);
    const __m256d p01 = _mm256_add_pd(_mm256_set1_pd(1.0), r);
    const __m256d p23 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 6.0),
                                        _mm256_set1_pd(0.5));
    const __m256d p45 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 120.0),
                                        _mm256_set1_pd(1.0 / 24.0));
    const __m256d p67 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 5040.0),
                                        _mm256_set1_pd(1.0 / 720.0));
    const __m256d p89 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 362880.0),
                                        _mm256_set1_pd(1.0 / 40320.0));
    const __m256d p1011 = _mm256_fmadd_pd(
        r, _mm256_set1_pd(1.0 / 39916800.0), _mm256_set1_pd(1.0 / 3628800.0));
    const __m256d p1213 =
        _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 6227020800.0),
                        _mm256_set1_pd(1.0 / 479001600.0));
    const __m256d q0 = _mm256_fmadd_pd(r2, p23, p01);
    const __m256d q1 = _mm256_fmadd_pd(r2, p67, p45);
    const __m256d q2 = _mm256_fmadd_pd(r2, p1011, p89);
    const __m256d t0 = _mm256_fmadd_pd(r4, q1, q0);
    const __m256d t1 = _mm256_fmadd_pd(r4, p1213, q2);
    const __m256d p = _mm256_fmadd_pd(r8, t1, t0);
    /* 2^k in the exponent bits: the low bits of t hold k */
    const __m256i kb = _mm256_sub_epi64(
        _mm256_castpd_si256(t),
        _mm256_set1_epi64x(INT64_C(0x4338000000000000) - 1023));
    const __m256d sc = _mm256_andnot_pd(
        under, _mm256_castsi256_pd(_mm256_slli_epi64(kb, 52)));
    return _mm256_mul_pd(p, sc);
}

/* The floating-point part of lse_log_pos (kernels-private.h) on a vector
 * of mantissas mv in [sqrt(1/2), sqrt(2)) and exponents e, in GCC/clang
 * vector arithmetic: each operator is the lane-wise IEEE operation of
 * lse_log_pos's scalar one, in the same order (no FMA: the project builds
 * with -ffp-contract=off), so every lane gets lse_log_pos's bits. One body
 * for the 4-lane copy below and lib/softmax.c's 8-lane one. */
#define LSE_LOG_POS_TAIL(NAME, VT, TARGET)                                     \
    TARGET static inline VT NAME(VT mv, VT e)                                  \
    {                                                                          \
        const VT sd = (mv - 1.0) / (mv + 1.0), z = sd * sd;                    \
        const VT z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;                       \
        const VT c01 = 1.0 + z * (1.0 / 3.0), c23 = 1.0 / 5.0 + z * (1.0 / 7.0); \
        const VT c45 = 1.0 / 9.0 + z * (1.0 / 11.0);                           \
        const VT c67 = 1.0 / 13.0 + z * (1.0 / 15.0);                          \
        const VT c89 = 1.0 / 17.0 + z * (1.0 / 19.0);                          \
        const VT d0 = c01 + z2 * c23, d1 = c45 + z2 * c67;                     \
        const VT t0 = d0 + z4 * d1, t1 = c89 + z2 * (1.0 / 21.0);              \
        const VT p = t0 + z8 * t1;                                             \
        return e * 6.93147180369123816490e-01 +                                \
               (2.0 * sd * p + e * 1.90821492927058770002e-10);                \
    }
LSE_LOG_POS_TAIL(lse_log_tail4, __m256d, LSE_TARGET_AVX2_FMA)

/* lse_log_pos of four positive doubles, lane for lane the same operations
 * (no FMA: the project builds with -ffp-contract=off), so the same bits.
 * The mantissas with exponent 0 are below 2^63, so the signed compare is
 * the unsigned one of lse_log_pos. */
LSE_TARGET_AVX2_FMA
static inline __m256d lse_log_pos4(__m256d x)
{
    const __m256i b = _mm256_castpd_si256(x);
    __m256i mb = _mm256_or_si256(
        _mm256_and_si256(b, _mm256_set1_epi64x(INT64_C(0x000FFFFFFFFFFFFF))),
        _mm256_set1_epi64x(INT64_C(0x3FF0000000000000)));
    const __m256i big =
        _mm256_cmpgt_epi64(/* all ones where halved */
                           mb, _mm256_set1_epi64x(INT64_C(0x3FF6A09E667F3BCD)));
    mb = _mm256_sub_epi64(
        mb, _mm256_and_si256(big, _mm256_set1_epi64x(INT64_C(1) << 52)));
    const __m256d mv = _mm256_castsi256_pd(mb);
    const __m256i eb =
        _mm256_or_si256(_mm256_set1_epi64x(INT64_C(0x4330000000000000)),
                        _mm256_sub_epi64(_mm256_srli_epi64(b, 52), big));
    const __m256d e =
        _mm256_sub_pd(_mm256_castsi256_pd(eb), _mm256_set1_pd(0x1p52 + 1023.0));
    return lse_log_tail4(mv, e);
}

LSE_LOG_POS_TAIL(lse_log_tail8, __m512d, LSE_TARGET_AVX512)

/* lse_log_pos4 with AVX-512F: lse_log_pos of eight positive doubles, lane for
 * lane (same bits). */
LSE_TARGET_AVX512
static inline __m512d lse_log_pos8(__m512d x)
{
    const __m512i b = _mm512_castpd_si512(x);
    __m512i mb = _mm512_or_si512(
        _mm512_and_si512(b, _mm512_set1_epi64(INT64_C(0x000FFFFFFFFFFFFF))),
        _mm512_set1_epi64(INT64_C(0x3FF0000000000000)));
    const __mmask8 big = _mm512_cmpgt_epu64_mask(
        mb, _mm512_set1_epi64(INT64_C(0x3FF6A09E667F3BCD)));
    mb =
        _mm512_mask_sub_epi64(mb, big, mb, _mm512_set1_epi64(INT64_C(1) << 52));
    const __m512d mv = _mm512_castsi512_pd(mb);
    const __m512i b52 = _mm512_srli_epi64(b, 52);
    const __m512i eb = _mm512_or_si512(
        _mm512_set1_epi64(INT64_C(0x4330000000000000)),
        _mm512_mask_add_epi64(b52, big, b52, _mm512_set1_epi64(1)));
    const __m512d e =
        _mm512_sub_pd(_mm512_castsi512_pd(eb), _mm512_set1_pd(0x1p52 + 1023.0));
    return lse_log_tail8(mv, e);
}

/* Eight lse_exp_nonpos at once with AVX-512F: lse_exp_nonpos4's
 * arithmetic, lane for lane (same bits). */
LSE_TARGET_AVX512
static inline __m512d lse_exp_nonpos8(__m512d x)
{
    const __m512d lo = _mm512_set1_pd(-708.0);
    const __mmask8 under = _mm512_cmp_pd_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_pd(x, lo);
    const __m512d shift = _mm512_set1_pd(0x1.8p52);
    const __m512d t =
        _mm512_fmadd_pd(x, _mm512_set1_pd(0x1.71547652b82fep0), shift);
    const __m512d k = _mm512_sub_pd(t, shift);
    __m512d r =
        _mm512_fnmadd_pd(k, _mm512_set1_pd(6.93147180369123816490e-01), x);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.90821492927058770002e-10), r);
    const __m512d r2 = _mm512_mul_pd(r, r), r4 = _mm512_mul_pd(r2, r2);
    const __m512d r8 = _mm512_mul_pd(r4, r4);
    const __m512d p01 = _mm512_add_pd(_mm512_set1_pd(1.0), r);
    const __m512d p23 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 6.0),
                                        _mm512_set1_pd(0.5));
    const __m512d p45 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 120.0),
                                        _mm512_set1_pd(1.0 / 24.0));
    const __m512d p67 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 5040.0),
                                        _mm512_set1_pd(1.0 / 720.0));
    const __m512d p89 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 362880.0),
                                        _mm512_set1_pd(1.0 / 40320.0));
    const __m512d p1011 = _mm512_fmadd_pd(
        r, _mm512_set1_pd(1.0 / 39916800.0), _mm512_set1_pd(1.0 / 3628800.0));
    const __m512d p1213 =
        _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 6227020800.0),
                        _mm512_set1_pd(1.0 / 479001600.0));
    const __m512d q0 = _mm512_fmadd_pd(r2, p23, p01);
    const __m512d q1 = _mm512_fmadd_pd(r2, p67, p45);
    const __m512d q2 = _mm512_fmadd_pd(r2, p1011, p89);
    const __m512d t0 = _mm512_fmadd_pd(r4, q1, q0);
    const __m512d t1 = _mm512_fmadd_pd(r4, p1213, q2);
    const __m512d p = _mm512_fmadd_pd(r8, t1, t0);
    const __m512i kb = _mm512_sub_epi64(
        _mm512_castpd_si512(t),
        _mm512_set1_epi64(INT64_C(0x4338000000000000) - 1023));
    const __m512d sc = _mm512_maskz_mov_pd(
        (__mmask8)~under, _mm512_castsi512_pd(_mm512_slli_epi64(kb, 52)));
    return _mm512_mul_pd(p, sc);
}
#endif

#endif /* LSEGRAPH_KERNELS_PRIVATE_H */
