#include <math.h>
#include <stdint.h>

#include "exactsum-carry-private.h"

/* Carries and non-finite terms of lse_xsum (the layout: lib/exactsum.c). */

enum { D = LSE_XSUM_DIGITS };

void lse_xsum_carry(lse_xsum *x)
{
    /* from the lowest non-zero digit until the carry dies out above the
     * highest one (terms of one statistic use a few digits) */
    size_t lo = 0, hi = D - 1;
    while (lo < D - 1 && x->digit[lo] == 0)
        lo++;
    while (hi > lo && x->digit[hi] == 0)
        hi--;
    int64_t carry = 0;
    for (size_t i = lo; i + 1 < D && (i <= hi || carry != 0); i++) {
        const int64_t v = x->digit[i] + carry;
        const int64_t low = (int64_t)((uint64_t)v & UINT64_C(0xffffffff));
        carry = (v - low) / (INT64_C(1) << 32); /* exact: v - low = c 2^32 */
        x->digit[i] = low;
    }
    x->digit[D - 1] += carry;
    x->n_add = 0;
}

void lse_xsum_add_special(lse_xsum *x, double v)
{
    if (isnan(v))
        x->n_nan++;
    else if (v > 0)
        x->n_pinf++;
    else
        x->n_ninf++;
}
