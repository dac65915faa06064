#include <float.h>
#include <stdint.h>
#include <string.h>

#include "numparse-private.h"

/* docs/io.md "Speed": the CSV reader's numbers. Every value returned here
 * equals strtod's; tests/test_numparse.c compares the two on random and
 * edge-case strings. */

static const double pow10_d[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#if LDBL_MANT_DIG == 64 && (defined(__x86_64__) || defined(__i386__))
#define LSE_X87_PATH 1
/* 10^k exact in 64 bits for k <= 27 (5^27 < 2^64). */
static const long double pow10_ld[28] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
#else
#define LSE_X87_PATH 0
#endif

int lse_parse_decimal_x87(void)
{
#if LSE_X87_PATH
    /* 1 + 2^-63 needs the 64-bit significand: false when the x87
     * precision control was set to 53 bits, or under valgrind, which
     * computes long doubles in double precision */
    volatile long double one = 1.0L, tiny = 0x1p-63L;
    return one + tiny != one;
#else
    return 0;
#endif
}

/* Digits from p while below e: accumulated into *w (10 *w + d, wrapping
 * harmlessly past 19 digits, which the caller refuses); returns the end. */
static const char *digits(const char *p, const char *e, uint64_t *w)
{
    uint64_t x = *w;
    for (; p < e; p++) {
        const unsigned d = (unsigned)(unsigned char)*p - '0';
        if (d > 9)
            break;
        x = 10 * x + d;
    }
    *w = x;
    return p;
}

int lse_parse_decimal(const char *s, size_t n, double *v, int x87)
{
    const char *p = s, *e = s + n;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) {
        neg = *p == '-';
        p++;
    }
    const char *start = p;
    while (p < e && *p == '0')
        p++; /* leading zeros */
    uint64_t w = 0;
    const char *q = digits(p, e, &w);
    long nd = q - p; /* significant digits so far */
    long exp10 = 0;
    int any = q > start;
    p = q;
    if (p < e && *p == '.') {
        p++;
        const char *f = p;
        if (nd == 0) { /* 0.000ddd: zeros after the point are not digits */
            while (p < e && *p == '0')
                p++;
        }
        q = digits(p, e, &w);
        nd += q - p;
        exp10 = -(long)(q - f);
        any = any || q > f;
        p = q;
    }
    if (!any || nd > 19)
        return 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p == e || (unsigned)(unsigned char)*p - '0' > 9)
            return 0; /* "1e": strtod stops before the e */
        long x = 0;
        for (; p < e && (unsigned)(unsigned char)*p - '0' <= 9; p++)
            if (x < 100000)
                x = 10 * x + (*p - '0');
        exp10 += eneg ? -x : x;
    }
    if (p != e)
        return 0;
    double r;
    if (w == 0) {
        r = 0.0;
    } else if (w <= (UINT64_C(1) << 53) && exp10 >= -22 && exp10 <= 22) {
        /* Clinger: w and 10^|q| exact, one correctly rounded operation */
        r = exp10 < 0 ? (double)w / pow10_d[-exp10]
                      : (double)w * pow10_d[exp10];
    } else {
#if LSE_X87_PATH
        if (exp10 < -27 || exp10 > 27 || !x87)
            return 0;
        /* one rounding to 64 bits; the rounding to 53 bits is then right
         * unless the 64-bit result is exactly a midpoint between two
         * doubles (the 11 dropped bits 10000000000), where the first
         * rounding may have decided it: leave those to strtod. The range
         * (1e-27 .. 1e46) keeps both roundings among normal numbers. */
        long double x = (long double)w;
        x = exp10 < 0 ? x / pow10_ld[-exp10] : x * pow10_ld[exp10];
        uint64_t mant;
        memcpy(&mant, &x, sizeof mant); /* x87: the 64-bit significand */
        if ((mant & 0x7FF) == 0x400)
            return 0;
        r = (double)x;
#else
        (void)x87;
        return 0;
#endif
    }
    *v = neg ? -r : r;
    return 1;
}
