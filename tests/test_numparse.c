#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lse_check.h"
#include "numparse-private.h"

/* The CSV reader's fast decimal parser (lib/numparse.c) against strtod:
 * every string it accepts must give strtod's bits, the common forms must
 * be accepted (or the test proves nothing about speed), and its table of
 * powers of five must be what exact arithmetic gives. */

#include "numparse-pow5.h" /* the table lib/numparse.c compiles in */

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* n, or n / 20 under valgrind (there 1 + 2^-63 == 1 in long double on
 * x86, where the hardware has 64 bits), which runs this 50 times slower. */
static int reps(int n)
{
#if LDBL_MANT_DIG == 64 && (defined(__x86_64__) || defined(__i386__))
    volatile long double one = 1.0L, tiny = 0x1p-63L;
    if (one + tiny == one)
        return n / 20;
#endif
    return n;
}

/* Three pages, the outer two inaccessible: a string copied to the end of
 * the middle one (or its start) shows a read past its end (or before its
 * start) as a crash, as the CSV reader's cell may end the buffer. */
static char *guard;
static size_t page;

static void guard_setup(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    void *mem = NULL;
    ck_assert_int_eq(posix_memalign(&mem, page, 3 * page), 0);
    guard = mem;
    ck_assert_int_eq(mprotect(guard, page, PROT_NONE), 0);
    ck_assert_int_eq(mprotect(guard + 2 * page, page, PROT_NONE), 0);
}

static void guard_teardown(void)
{
    mprotect(guard, page, PROT_READ | PROT_WRITE);
    mprotect(guard + 2 * page, page, PROT_READ | PROT_WRITE);
    free(guard);
}

/* 1 when accepted (and then equal to strtod, asserted). */
static int check(const char *s)
{
    static unsigned flip;
    const size_t n = strlen(s);
    char *at = guard + page + (++flip & 1 ? page - n : 0);
    memcpy(at, s, n);
    double fast = 0.0;
    if (!lse_parse_decimal(at, n, &fast))
        return 0;
    char *stop = NULL;
    const double ref = strtod(s, &stop);
    /* if + ck_abort_msg: ck_assert_msg records every passing check with a
     * write to the forked runner, seconds of system time here */
    if (*stop != '\0')
        ck_abort_msg("'%s' accepted, strtod stops at '%s'", s, stop);
    if (memcmp(&fast, &ref, sizeof ref) != 0)
        ck_abort_msg("'%s': fast %a, strtod %a", s, fast, ref);
    return 1;
}

/* ---- the table, recomputed with a little big-integer arithmetic ---- */

enum { BN = 48 }; /* 32-bit limbs, least significant first: 1536 bits */
typedef struct bn {
    uint32_t d[BN];
} bn;

static bn bn_small(uint32_t x)
{
    bn a = {{0}};
    a.d[0] = x;
    return a;
}

static bn bn_of_t(const uint64_t t[2]) /* hi, lo */
{
    bn a = {{0}};
    a.d[0] = (uint32_t)t[1];
    a.d[1] = (uint32_t)(t[1] >> 32);
    a.d[2] = (uint32_t)t[0];
    a.d[3] = (uint32_t)(t[0] >> 32);
    return a;
}

static int bn_bits(const bn *a)
{
    for (int i = BN - 1; i >= 0; i--)
        for (int j = 31; j >= 0; j--)
            if (a->d[i] >> j & 1)
                return 32 * i + j + 1;
    return 0;
}

static bn bn_mul(const bn *a, const bn *b)
{
    if (bn_bits(a) + bn_bits(b) > 32 * BN)
        ck_abort_msg("big integer overflow");
    bn c = {{0}};
    for (int i = 0; i < BN; i++) {
        uint64_t carry = 0;
        for (int j = 0; i + j < BN; j++) {
            const uint64_t x = (uint64_t)a->d[i] * b->d[j] + c.d[i + j] + carry;
            c.d[i + j] = (uint32_t)x;
            carry = x >> 32;
        }
    }
    return c;
}

static bn bn_shl(const bn *a, int k) /* a 2^k, k >= 0 */
{
    if (bn_bits(a) + k > 32 * BN)
        ck_abort_msg("big integer overflow");
    bn c = {{0}};
    for (int i = 0; i < 32 * BN - k; i++)
        if (a->d[i / 32] >> (i % 32) & 1)
            c.d[(i + k) / 32] |= UINT32_C(1) << ((i + k) % 32);
    return c;
}

static bn bn_inc(bn a)
{
    for (int i = 0; i < BN && ++a.d[i] == 0; i++)
        ;
    return a;
}

static int bn_cmp(const bn *a, const bn *b)
{
    for (int i = BN - 1; i >= 0; i--)
        if (a->d[i] != b->d[i])
            return a->d[i] < b->d[i] ? -1 : 1;
    return 0;
}

/* Every entry: T in [2^127, 2^128) and T = floor(5^q 2^-s), that is
 * T 2^s <= 5^q < (T + 1) 2^s (equality when s <= 0) for q >= 0, and
 * T 5^-q <= 2^-s < (T + 1) 5^-q for q < 0. */
START_TEST(test_pow5_table)
{
    const int n = LSE_POW5_QMAX - LSE_POW5_QMIN + 1;
    ck_assert_int_eq(sizeof lse_pow5_t / sizeof *lse_pow5_t, n);
    ck_assert_int_eq(sizeof lse_pow5_s / sizeof *lse_pow5_s, n);
    const bn five = bn_small(5), one = bn_small(1);
    bn p = one; /* 5^|q| */
    for (int q = 0; q <= LSE_POW5_QMAX || -q >= LSE_POW5_QMIN; q++) {
        for (int sign = 1; sign >= -1; sign -= 2) {
            const int qq = sign * q;
            if (qq < LSE_POW5_QMIN || qq > LSE_POW5_QMAX ||
                (q == 0 && sign < 0))
                continue;
            const uint64_t *t = lse_pow5_t[qq - LSE_POW5_QMIN];
            const int s = lse_pow5_s[qq - LSE_POW5_QMIN];
            ck_assert_msg(t[0] >> 63 == 1, "q = %d: T below 2^127", qq);
            const bn tb = bn_of_t(t), tb1 = bn_inc(tb);
            if (qq >= 0 && s <= 0) {
                const bn x = bn_shl(&p, -s);
                ck_assert_msg(bn_cmp(&x, &tb) == 0, "q = %d: not 5^q", qq);
            } else if (qq >= 0) {
                const bn lo = bn_shl(&tb, s), hi = bn_shl(&tb1, s);
                ck_assert_msg(bn_cmp(&lo, &p) <= 0 && bn_cmp(&p, &hi) < 0,
                              "q = %d: not floor(5^q 2^-s)", qq);
            } else {
                const bn lo = bn_mul(&tb, &p), hi = bn_mul(&tb1, &p);
                const bn two = bn_shl(&one, -s);
                ck_assert_msg(bn_cmp(&lo, &two) <= 0 && bn_cmp(&two, &hi) < 0,
                              "q = %d: not floor(2^-s / 5^-q)", qq);
            }
        }
        p = bn_mul(&p, &five);
    }
}
END_TEST

START_TEST(test_edge_cases)
{
    static const char *const yes[] = {
        "0", "-0", "+0.0", "1", "1.", ".5", "-.5e-3", "9007199254740996",
        "9007199254740992", "9007199254740991", "1e22", "1e24", "1e-22",
        "1e-23", "123456789012345678", "1234567890123456789", "0.1",
        "0.30000000000000004", "-2.901030705860594", "-3.5097227672100932",
        "1.5e-26", "1.5e27", "00000.0001", "1e-00005", "1E5", "7.0e+00",
        "0.000000000000000000000000001", "1844674407370955161e-10",
        "9999999999999999999", "1.7976931348623157", "2.2250738585072014",
        "0e999999", "4.35", "3.14159265358979323",
        /* the x87 path refused these; the integer method decides them */
        "9007199254740993", "9007199254740995", "18014398509481986",
        "1e23", "8.5e23", "2.2250738585072014e-308", "2.2250738585072011e-308",
        "4.9e-324", "5e-324", "2.4703282292062328e-324",
        "1.7976931348623157e308", "1.7976931348623158e308", "1e28", "1e-28",
        "1e-323", "1e308", "9.999999999999999999e307", "2.5e-324",
        "0.000000000000000000000000000000000000000000001e-270",
        "123456789012345678e-340", "-0.0e-999999",
        /* exact doubles and exact ties w 10^q with -27 <= q < 0 */
        "0.5", "1.0", "-7757996469615014.0", "4503599627370496.5",
        "4503599627370497.5", "2251799813685248.25", "2251799813685248.75",
        "1125899906842624.125", "0.000000000000000000000000001e27",
        "7450580596923828125e-27", "1.4210854715202004e-14"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        ck_assert_msg(check(yes[i]), "'%s' refused", yes[i]);
    static const char *const no[] = {
        "", "-", "+", ".", "e5", "1e", "1e+", "1e-", "0x1p3", "inf",
        "-Infinity", "nan", "NA", "1,5", " 1", "1 ", "1..2", "1.2.3", "--1",
        "12345678901234567890", "1.000000000000000000000001", "1d5", "1e5x",
        "+-1", "1e-324e0", "12345678:", "1234567:", "1:345678",
        "0.1234567?", "1.23456789;0", "123456789012345>", "-12345678<1",
        "1234567/", "12345678 ", "1234567\x7f",
        /* out of range: 0 or infinity, with ERANGE, are strtod's */
        "1.7976931348623159e308", "1e309", "2e-324", "1e-342", "1e-343",
        "99999999999999999e999999",
        };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        ck_assert_msg(!check(no[i]), "'%s' accepted", no[i]);
    /* the whole text is read, never more: a number cut short */
    double v = 0.0;
    ck_assert(lse_parse_decimal("1234567890123456", 8, &v) && v == 12345678.0);
    ck_assert(lse_parse_decimal("0.12345678x", 10, &v) && v == 0.12345678);
}
END_TEST

/* x the way Python's repr writes it (what the benchmark reads): the
 * fewest of 15, 16 or 17 significant digits that read back as x,
 * trailing zeros dropped, fixed notation for 1e-4 <= |x| < 1e16, else
 * d.ddde-XX. */
static void repr_like(double x, char *buf, size_t cap)
{
    char tmp[64];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    char dig[32];
    int nd = 0;
    const char *p = tmp;
    const int neg = *p == '-';
    p += neg;
    for (; *p != 'e'; p++)
        if (*p != '.')
            dig[nd++] = *p;
    const int x10 = atoi(p + 1);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    dig[nd] = '\0';
    size_t k = 0;
    if (neg)
        buf[k++] = '-';
    if (x10 >= -4 && x10 < 16) {
        if (x10 < 0) {
            k += (size_t)snprintf(buf + k, cap - k, "0.%0*d%s", -x10 - 1, 0,
                                  dig);
            if (x10 == -1) /* "%0*d" with width 0 still wrote a 0 */
                memmove(buf + k - nd - 1, buf + k - nd, (size_t)nd + 1), k--;
        } else {
            for (int i = 0; i <= x10; i++)
                buf[k++] = i < nd ? dig[i] : '0';
            buf[k++] = '.';
            if (nd > x10 + 1)
                for (int i = x10 + 1; i < nd; i++)
                    buf[k++] = dig[i];
            else
                buf[k++] = '0';
            buf[k] = '\0';
        }
    } else {
        buf[k++] = dig[0];
        if (nd > 1) {
            buf[k++] = '.';
            for (int i = 1; i < nd; i++)
                buf[k++] = dig[i];
        }
        snprintf(buf + k, cap - k, "e%c%02d", x10 < 0 ? '-' : '+', abs(x10));
    }
}

static double random_double(void) /* every finite bit pattern */
{
    for (;;) {
        const uint64_t bits = next();
        double x;
        memcpy(&x, &bits, sizeof x);
        if (isfinite(x))
            return x;
    }
}

/* repr of random doubles of every magnitude (subnormals one in eight),
 * and of data-like values in 1e-6 .. 1e6: all but the odd ambiguous
 * product must be accepted. */
START_TEST(test_repr_against_strtod)
{
    char buf[128];
    size_t accepted = 0, total = 0;
    for (int i = 0; i < reps(1200000); i++) {
        double x = random_double();
        if (i % 8 == 0) { /* subnormal */
            const uint64_t bits = (next() >> 12) | (next() & 1) << 63;
            memcpy(&x, &bits, sizeof x);
        }
        repr_like(x, buf, sizeof buf);
        const int ok = check(buf);
        if (!ok && x != 0.0)
            ck_abort_msg("'%s' refused", buf);
        const double y = ldexp((double)(next() >> 11), -53) *
                         pow(10.0, (double)((int)(next() % 13) - 6)) *
                         ((next() & 1) ? -1.0 : 1.0);
        repr_like(y, buf, sizeof buf);
        accepted += (size_t)check(buf);
        total++;
    }
    ck_assert_msg(accepted + (total >> 16) >= total, "accepted %zu of %zu",
                  accepted, total);
}
END_TEST

/* printf's forms with 1 to 25 significant digits, and digit strings with
 * a point anywhere and an exponent over the whole range and past it. */
START_TEST(test_random_against_strtod)
{
    char buf[128];
    for (int i = 0; i < reps(700000); i++) {
        const double x = random_double();
        snprintf(buf, sizeof buf, "%.*g", 1 + (int)(next() % 19), x);
        check(buf);
        snprintf(buf, sizeof buf, "%.*e", (int)(next() % 25), x);
        check(buf);
        snprintf(buf, sizeof buf, "%.*f", (int)(next() % 12),
                 ldexp(x, -(int)(next() % 1000) + 960) * 0 +
                     ldexp((double)(next() >> 11),
                           (int)(next() % 80) - 70));
        check(buf);
        /* sign, leading zeros, digits, point, exponent */
        const int nd = 1 + (int)(next() % (next() & 7 ? 19 : 25));
        const int pt = (int)(next() % (nd + 2)); /* nd + 1: no point */
        size_t k = 0;
        if (next() & 1)
            buf[k++] = next() & 1 ? '-' : '+';
        for (int z = (int)(next() % 4) - 1; z > 0; z--)
            buf[k++] = '0';
        for (int j = 0; j < nd; j++) {
            if (j == pt)
                buf[k++] = '.';
            buf[k++] = (char)('0' + next() % 10);
        }
        if (next() & 3) {
            const uint64_t r = next();
            const int x10 = r & 1 ? (int)(r >> 1) % 700 - 370
                                  : (int)(r >> 1) % 61 - 30;
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%c%d",
                                  next() & 1 ? 'e' : 'E', x10);
        }
        buf[k] = '\0';
        check(buf);
        /* one character replaced by any byte: the syntax must be strtod's */
        if (k > 0) {
            buf[next() % k] = (char)(1 + next() % 255);
            check(buf);
        }
    }
}
END_TEST

/* Strings on and next to the midpoints between two doubles (where a
 * rounding rule shows), near powers of ten and of two. */
START_TEST(test_ties_against_strtod)
{
    char buf[128];
    int exact_ties = 0;
    for (int i = 0; i < reps(400000); i++) {
        /* exact ties c 5^q 2^j written as w e q with w = c 2^(j-q):
         * integers, decided by the exact products (q <= 55) */
        const int q = (int)(next() % 23);
        double fq = 1.0;
        for (int j = 0; j < q; j++)
            fq *= 5.0; /* exact: 5^22 < 2^53 */
        const uint64_t p5 = (uint64_t)fq;
        const uint64_t c = ((UINT64_C(1) << 53) / p5 + 1 +
                            next() % ((UINT64_C(1) << 53) / p5)) |
                           1; /* odd, c 5^q in [2^53, 2^54) */
        const int j = q + (int)(next() % 8);
        if ((c * p5) >> 54 == 0 && j - q < 10) {
            const uint64_t w = c << (j - q);
            snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)w, q);
            exact_ties += check(buf);
            for (int dw = -1; dw <= 1; dw += 2) {
                snprintf(buf, sizeof buf, "%llue%d",
                         (unsigned long long)(w + (uint64_t)dw), q);
                check(buf);
            }
            /* and with the point moved left: w 10^-k ties, k <= 3 */
            const int kk = (int)(next() % 4);
            if (kk <= q) {
                uint64_t u = w;
                for (int z = 0; z < q - kk; z++)
                    u *= 10; /* may exceed 19 digits: then refused */
                if (q - kk <= 2) {
                    snprintf(buf, sizeof buf, "%llu.%0*d",
                             (unsigned long long)u, kk, 0);
                    check(buf);
                }
            }
        }
        /* exact ties (2m + 1) 2^-k = (2m + 1) 5^k 10^-k, k = 1 .. 4 */
        const int kq = 1 + (int)(next() % 4);
        uint64_t odd = ((UINT64_C(1) << 53) | (next() >> 11)) | 1;
        uint64_t w = odd;
        for (int z = 0; z < kq; z++)
            w *= 5;
        const uint64_t ip = w;
        snprintf(buf, sizeof buf, "%llue-%d", (unsigned long long)ip, kq);
        check(buf);
        /* near a midpoint of any magnitude: 17 to 20 significant digits
         * of (d + next(d)) / 2 (exact in a 64-bit long double) */
        const double d = fabs(random_double());
#if LDBL_MANT_DIG >= 64
        if (d > 0.0 && d < DBL_MAX) {
            const long double mid =
                ((long double)d + (long double)nextafter(d, INFINITY)) / 2.0L;
            for (int pr = 16; pr <= 19; pr++) {
                snprintf(buf, sizeof buf, "%.*Le", pr, mid);
                check(buf);
            }
        }
#endif
        /* near powers of ten and of two */
        const int t = (int)(next() % 660) - 345;
        snprintf(buf, sizeof buf, "1e%d", t);
        check(buf);
        snprintf(buf, sizeof buf, "9.99999999999999999%de%d",
                 (int)(next() % 10), t - 1);
        check(buf);
        snprintf(buf, sizeof buf, "1.00000000000000000%de%d",
                 (int)(next() % 10), t);
        check(buf);
        const double p2 = ldexp(1.0, (int)(next() % 2098) - 1074);
        const double nb = next() & 1 ? nextafter(p2, 0.0) : p2;
        snprintf(buf, sizeof buf, "%.*e", 15 + (int)(next() % 4), nb);
        check(buf);
    }
    /* the exact path decides ties with q >= 0, as many as were made */
    ck_assert_int_gt(exact_ties, reps(100000));
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("numparse");
    TCase *tc = tcase_create("numparse");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, guard_setup, guard_teardown);
    tcase_add_test(tc, test_pow5_table);
    tcase_add_test(tc, test_edge_cases);
    tcase_add_test(tc, test_repr_against_strtod);
    tcase_add_test(tc, test_random_against_strtod);
    tcase_add_test(tc, test_ties_against_strtod);
    suite_add_tcase(s, tc);
    return s;
}
