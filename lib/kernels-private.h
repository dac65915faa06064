#ifndef LSEGRAPH_KERNELS_PRIVATE_H
#define LSEGRAPH_KERNELS_PRIVATE_H

#include <math.h>
#include <stdint.h>
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
static inline int lse_cpu_avx2(void)
{
    __builtin_cpu_init(); /* idempotent; needed before constructors run */
    return __builtin_cpu_supports("avx2") != 0;
}
/* AVX2 and FMA: kernels that call fma() explicitly (rounding differs from
 * the plain copy, which multiplies and adds; on one machine the choice
 * never changes) */
static inline int lse_cpu_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 &&
           __builtin_cpu_supports("fma") != 0;
}
#else
#define LSE_HAVE_AVX2_PATH 0
#define LSE_TARGET_AVX2
#define LSE_TARGET_AVX2_FMA
static inline int lse_cpu_avx2(void) { return 0; }
static inline int lse_cpu_avx2_fma(void) { return 0; }
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

#endif /* LSEGRAPH_KERNELS_PRIVATE_H */
