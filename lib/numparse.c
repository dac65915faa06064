#include <float.h>
#include <stdint.h>
#include <string.h>

#include "numparse-private.h"

/* docs/io.md "Speed": the CSV reader's numbers. Every value returned here
 * equals strtod's (round to nearest, ties to even); tests/test_numparse.c
 * compares the two on millions of strings and checks the table below. */

#include "numparse-pow5.h" /* lse_pow5_t, lse_pow5_s: tools/gen_numparse_pow5.py */

#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 lse_u128; /* GCC, Clang: one mul */
#endif

/* a * b = *hi * 2^64 + *lo, exactly. */
static inline uint64_t mul_64x64(uint64_t a, uint64_t b, uint64_t *lo)
{
#if defined(__SIZEOF_INT128__)
    const lse_u128 p = (lse_u128)a * b;
    *lo = (uint64_t)p;
    return (uint64_t)(p >> 64);
#else
    /* schoolbook on 32-bit halves; the middle sum cannot overflow:
     * (2^32-1)^2 + 2 (2^32-1) < 2^64 */
    const uint64_t al = a & 0xFFFFFFFFu, ah = a >> 32;
    const uint64_t bl = b & 0xFFFFFFFFu, bh = b >> 32;
    const uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    const uint64_t mid = (ll >> 32) + (lh & 0xFFFFFFFFu) + (hl & 0xFFFFFFFFu);
    *lo = (mid << 32) | (ll & 0xFFFFFFFFu);
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}

static inline int clz64(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_clzll(x);
#else
    int n = 0;
    for (; !(x >> 63); x <<= 1)
        n++;
    return n;
#endif
}

/* w 10^q for w != 0 as the bits of a double, correctly rounded (ties to
 * even); 0 when the result is not certain (then strtod decides), overflows,
 * or is below the smallest subnormal.
 *
 * The Eisel-Lemire method (D. Lemire, "Number Parsing at a Gigabyte per
 * Second", Software: Practice and Experience 51(8), 2021), in this form:
 * with w normalised to wn = w 2^lz in [2^63, 2^64) and the table's
 * T = floor(t), t = 5^q 2^-s in [2^127, 2^128), the value is
 * X 2^(q + s - lz) with X = wn t. The 192-bit product P = wn T is computed
 * in full (two 64 x 64 multiplications) and P <= X < P + wn < P + 2^64;
 * P = X when T is exact (q >= 0 and s <= 0, i.e. q <= 55). After a shift
 * that puts the top bit of P at bit 191 (the bound becomes 2^65), the
 * result's 53 (fewer when subnormal) bits are the top ones and bit r below
 * them decides the rounding. X rounds like P unless the remainder R of P
 * below bit r + 1 is within 2^65 under the half-way point 2^r or under
 * the next multiple 2^(r+1), or is exactly 2^r: there X may lie on either
 * side. When P = X the remainder decides exactly, ties to even included.
 * For -27 <= q < 0 X cannot be near such a point without being on it
 * (below), which settles exact doubles such as 0.5 and exact ties such as
 * 4503599627370496.5. Elsewhere this returns 0 (strtod decides): a chance
 * of about 2^-73 for a random number, and no exact double or tie there
 * (for q < -27 they would need 5^-q | w; for q > 55, 5^q < 2^54). */
static int eisel_lemire(uint64_t w, long q, uint64_t *bits)
{
    if (q < LSE_POW5_QMIN || q > LSE_POW5_QMAX)
        return 0; /* 0 or infinity: strtod's business (ERANGE) */
    const uint64_t *t = lse_pow5_t[q - LSE_POW5_QMIN];
    const int s = lse_pow5_s[q - LSE_POW5_QMIN];
    const int lz = clz64(w);
    const uint64_t wn = w << lz;
    uint64_t al, bl;
    const uint64_t ah = mul_64x64(wn, t[0], &al);
    const uint64_t bh = mul_64x64(wn, t[1], &bl);
    uint64_t p0 = bl, p1 = al + bh, p2 = ah + (p1 < al);
    int sh = 0;
    if (!(p2 >> 63)) { /* P in [2^190, 2^191): one shift to bit 191 */
        p2 = p2 << 1 | p1 >> 63;
        p1 = p1 << 1 | p0 >> 63;
        p0 <<= 1;
        sh = 1;
    }
    const long b = q + s - lz - sh; /* value = P 2^b, roughly */
    const long e2 = 191 + b;        /* value in [2^e2, 2^(e2+1)) */
    /* r: the rounding bit, 53 bits below the top or at 2^-1075 */
    const long r = e2 >= -1022 ? 138 : -1075 - b;
    if (r > 191)
        return 0; /* below 2^-1075: rounds to 0 */
    const int k = (int)(r - 128); /* in p2: 10 .. 63 */
    const uint64_t half = UINT64_C(1) << k, mask = 2 * half - 1;
    const uint64_t rh = p2 & mask;
    uint64_t m = k < 63 ? p2 >> (k + 1) : 0; /* 0: below 2^-1074 */
    /* R within 2^65 under 2^(r+1) or under 2^r, or exactly 2^r */
    const int near_b = rh == mask && p1 >= UINT64_MAX - 1;
    const int near_h = rh == half - 1 && p1 >= UINT64_MAX - 1;
    const int on_h = rh == half && (p1 | p0) == 0;
    int up;
    if (q >= 0 && s <= 0) { /* T exact, P = X */
        up = rh > half || (rh == half && ((p1 | p0) != 0 || (m & 1)));
    } else if (near_b || near_h || on_h) {
        /* -27 <= q < 0: X = wn 2^j / 5^-q with j = -s + sh >= 130, and
         * X - i 2^r (any i; r >= 138) has the numerator
         * wn 2^j - i 2^r 5^-q, a multiple of 2^130: X is 0 or at least
         * 2^130 / 5^27 > 2^67 away from a multiple of 2^r, and |X - P|
         * < 2^65. So near_b means X = 2^(r+1) (an exact double, round up
         * to it), near_h X = 2^r (an exact tie, to even); on_h cannot
         * happen (X - P > 0), which the return covers anyway. */
        if (q > 0 || q < -27 || on_h)
            return 0;
        up = near_b || (m & 1);
    } else {
        up = rh >= half; /* R + 2^65 <= 2^r, or 2^r < R < 2^(r+1) - 2^65 */
    }
    m += (uint64_t)up;
    /* normal: m in [2^52, 2^53] and a carry to 2^53 moves the exponent
     * field up by one; subnormal: m <= 2^52 is the whole pattern (2^52
     * being the smallest normal) */
    const uint64_t x = e2 >= -1022 ? ((uint64_t)(e2 + 1022) << 52) + m : m;
    if (x >= UINT64_C(0x7FF0000000000000))
        return 0; /* overflow to infinity */
    *bits = x;
    return 1;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LSE_SWAR 1 /* the first character in the low byte of a load */
#else
#define LSE_SWAR 0
#endif

#if LSE_SWAR
static inline int ctz64(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    for (; !(x & 1); x >>= 1)
        n++;
    return n;
#endif
}

static const uint64_t pow10_u[9] = {1,      10,      100,      1000,     10000,
                                    100000, 1000000, 10000000, 100000000};

static const uint64_t ascii0 = UINT64_C(0x3030303030303030); /* "00000000" */

/* The value of the 8 digits of v (first digit in the low byte), by merging
 * neighbours in three steps: bytes to 2-digit numbers in 16-bit lanes, to
 * 4-digit numbers in 32-bit lanes, to the 8-digit number. Each step's
 * products stay within their lanes (99 x 100 < 2^16, 9999 x 10^4 < 2^32);
 * the lane above the result of the last step is masked off. */
static inline uint64_t eight_value(uint64_t v)
{
    v -= ascii0;
    v = (v * 10 + (v >> 8)) & UINT64_C(0x00FF00FF00FF00FF);
    v = (v * 100 + (v >> 16)) & UINT64_C(0x0000FFFF0000FFFF);
    return (v * 10000 + (v >> 32)) & UINT64_C(0xFFFFFFFF);
}

/* The digits from p (s <= p <= e, e - s >= 8) appended to *w (wrapping
 * past 19 digits, which the caller checks); returns the end of the run.
 * Whole groups of 8 digits while 8 bytes are left, then one step that
 * takes the 0 to 8 digits that follow without a branch on their count:
 * it loads the 8 bytes at p, or when fewer are left the last 8 of the
 * text shifted down (zero bytes, not digits, fill in), so it never reads
 * outside [s, e) and the text may end right at the number. The count
 * comes from a mask of the bytes that are not digits (the high nibble is
 * not 3, or adding 6 carries out of the low nibble; a carry into the next
 * byte only comes from a byte already marked, and only the first marked
 * byte counts), and the digits are shifted to the top of an "00000000"
 * for eight_value. So 16 and 17 fractional digits (Python's repr) take
 * the same branches: cachegrind's branch simulation counts one
 * misprediction per number of the benchmark's data instead of two with a
 * digit-by-digit tail, for as many instructions. */
static const char *digits(const char *s, const char *p, const char *e,
                          uint64_t *w)
{
    (void)s; /* only for the contract above */
    uint64_t x = *w;
    const uint64_t f0 = UINT64_C(0xF0F0F0F0F0F0F0F0);
    const uint64_t c6 = UINT64_C(0x0606060606060606);
    unsigned n;
    do {
        while (e - p >= 8) {
            uint64_t v;
            memcpy(&v, p, sizeof v);
            if (((v & f0) ^ ascii0) | (((v + c6) & f0) ^ ascii0))
                break;
            x = x * 100000000u + eight_value(v);
            p += 8;
        }
        const char *q = e - p >= 8 ? p : e - 8;
        uint64_t v;
        memcpy(&v, q, sizeof v);
        const unsigned drop = 8 * (unsigned)(p - q); /* 0 .. 64 */
        v = (v >> (drop / 2)) >> (drop - drop / 2);
        const uint64_t bad = ((v & f0) ^ ascii0) | (((v + c6) & f0) ^ ascii0);
        n = bad != 0 ? (unsigned)ctz64(bad) / 8 : 8;
        const unsigned up = 64 - 8 * n; /* move the n digits to the top */
        v = ((v << (up / 2)) << (up - up / 2)) |
            ((ascii0 >> (4 * n)) >> (4 * n));
        x = x * pow10_u[n] + eight_value(v);
        p += n;
    } while (n == 8);
    *w = x;
    return p;
}
#endif

/* The same one digit at a time, for texts of fewer than 8 bytes (and
 * machines where a load does not put the first byte low). */
static const char *digits_short(const char *p, const char *e, uint64_t *w)
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

/* The run of digits from p in the text [s, e), appended to *w. */
static const char *scan_digits(const char *s, const char *p, const char *e,
                               uint64_t *w)
{
#if LSE_SWAR
    if (e - s >= 8)
        return digits(s, p, e, w);
#else
    (void)s;
#endif
    return digits_short(p, e, w);
}

/* w and its number of significant digits for the digits in [p, q) with
 * at most one '.' among them (the slow way, for runs of more than 19
 * digits counting leading zeros: 0.00123... ) */
static long significant(const char *p, const char *q, uint64_t *w)
{
    while (p < q && (*p == '0' || *p == '.'))
        p++;
    uint64_t x = 0;
    long nd = 0;
    for (; p < q; p++) {
        if (*p == '.')
            continue;
        x = 10 * x + (uint64_t)(*p - '0');
        nd++;
    }
    *w = x;
    return nd;
}

int lse_parse_decimal(const char *s, size_t n, double *v)
{
    const char *p = s, *e = s + n;
    if (n == 0)
        return 0;
    const int neg = *p == '-';
    p += neg || *p == '+';
    const char *start = p;
    uint64_t w = 0;
    const char *q;
    if (e - p >= 2 && p[1] == '.' && (unsigned)(unsigned char)*p - '0' <= 9) {
        w = (uint64_t)(*p - '0'); /* d.ddd, the commonest form: no loop */
        q = p + 1;
    } else {
        q = scan_digits(s, p, e, &w);
    }
    long nd = q - p; /* digits, leading zeros included */
    long exp10 = 0;
    p = q;
    if (p < e && *p == '.') {
        p++;
        q = scan_digits(s, p, e, &w);
        nd += q - p;
        exp10 = -(long)(q - p);
        p = q;
    }
    if (nd == 0)
        return 0; /* no digit on either side of the point */
    if (nd > 19 && significant(start, p, &w) > 19)
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
    uint64_t bits = 0; /* +0.0 when w = 0 */
    if (w != 0 && !eisel_lemire(w, exp10, &bits))
        return 0;
    bits |= (uint64_t)neg << 63;
    memcpy(v, &bits, sizeof bits);
    return 1;
}
