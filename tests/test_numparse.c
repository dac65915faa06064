#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"
#include "numparse-private.h"

/* The CSV reader's fast decimal parser (lib/numparse.c) against strtod:
 * every string it accepts must give strtod's bits; the common forms must
 * be accepted (or the test proves nothing about speed). */

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* 1 when accepted (and then equal to strtod, asserted). */
static int check(const char *s)
{
    double fast = 0.0;
    const int ok = lse_parse_decimal(s, strlen(s), &fast,
                                     lse_parse_decimal_x87());
    if (!ok)
        return 0;
    char *stop = NULL;
    const double ref = strtod(s, &stop);
    ck_assert_msg(*stop == '\0', "'%s' accepted, strtod stops at '%s'", s,
                  stop);
    ck_assert_msg(memcmp(&fast, &ref, sizeof ref) == 0,
                  "'%s': fast %.17g, strtod %.17g", s, fast, ref);
    return 1;
}

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
        "0e999999", "4.35", "3.14159265358979323"};
    /* without the x87 path only Clinger's cases are accepted */
    const int x87 = lse_parse_decimal_x87();
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        double v;
        const int clinger = lse_parse_decimal(yes[i], strlen(yes[i]), &v, 0);
        ck_assert_msg(check(yes[i]) || (!x87 && !clinger), "'%s' refused",
                      yes[i]);
    }
    static const char *const no[] = {
        "", "-", "+", ".", "e5", "1e", "1e+", "1e-", "0x1p3", "inf",
        "-Infinity", "nan", "NA", "1,5", " 1", "1 ", "1..2", "1.2.3", "--1",
        "12345678901234567890", "1.000000000000000000000001",
        "2.2250738585072014e-308", "4.9e-324", "1.7976931348623157e308",
        "1e28", "1e-28", "1d5", "1e5x", "+-1",
        "9007199254740993", "1e23" /* exact ties, left to strtod */};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        ck_assert_msg(!check(no[i]), "'%s' accepted", no[i]);
}
END_TEST

/* Random doubles as printf writes them (shortest round trip and fixed
 * precisions), random digit strings with a point and an exponent, and
 * 19-digit strings next to the midpoints between two doubles (the cases a
 * double rounding gets wrong). */
START_TEST(test_random_against_strtod)
{
    char buf[128];
    size_t accepted = 0, total = 0;
    for (int i = 0; i < 400000; i++) {
        uint64_t bits = next();
        double x;
        memcpy(&x, &bits, sizeof x);
        if (!isfinite(x))
            continue;
        const int prec = 1 + (int)(next() % 19);
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        check(buf);
        /* scaled to the usual data range */
        const double y = ldexp((double)(next() >> 11), -53) *
                         pow(10.0, (double)((int)(next() % 13) - 6)) *
                         ((next() & 1) ? -1.0 : 1.0);
        snprintf(buf, sizeof buf, "%.17g", y);
        accepted += (size_t)check(buf);
        snprintf(buf, sizeof buf, "%.*f", (int)(next() % 12), y);
        accepted += (size_t)check(buf);
        total += 2;
        /* digits, point, exponent */
        const int nd = 1 + (int)(next() % 21), pt = (int)(next() % (nd + 1));
        size_t k = 0;
        if (next() & 1)
            buf[k++] = '-';
        for (int j = 0; j < nd; j++) {
            if (j == pt)
                buf[k++] = '.';
            buf[k++] = (char)('0' + next() % 10);
        }
        if (next() & 1)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "e%d",
                                  (int)(next() % 61) - 30);
        buf[k] = '\0';
        check(buf);
#if LDBL_MANT_DIG == 64
        /* near a midpoint: 19 significant digits of (d + next(d)) / 2 */
        const double d = ldexp((double)(next() >> 11), -(int)(next() % 60));
        if (d > 0.0) {
            const long double mid =
                ((long double)d + (long double)nextafter(d, INFINITY)) / 2.0L;
            snprintf(buf, sizeof buf, "%.18Le", mid);
            check(buf);
            snprintf(buf, sizeof buf, "%.17Le", mid);
            check(buf);
        }
#endif
    }
    /* the data the benchmark reads: nearly all must take the fast path
     * (17 digits need the x87 path; without it, under valgrind or off x86,
     * the fixed-point strings of up to 15 digits still do) */
    if (lse_parse_decimal_x87())
        ck_assert_msg(accepted > total * 95 / 100, "accepted %zu of %zu",
                      accepted, total);
    else
        ck_assert_msg(accepted > total * 30 / 100, "accepted %zu of %zu",
                      accepted, total);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("numparse");
    TCase *tc = tcase_create("numparse");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_edge_cases);
    tcase_add_test(tc, test_random_against_strtod);
    suite_add_tcase(s, tc);
    return s;
}
