#ifndef LSEGRAPH_EXACTSUM_PRIVATE_H
#define LSEGRAPH_EXACTSUM_PRIVATE_H

#include <stdint.h>
#include <string.h>

#include <lsegraph/sim.h>

#include "exactsum-carry-private.h"

/*
 * The hot part of lse_xsum (lib/exactsum.c, docs/core.md): an inline
 * exact add for kernels (never installed).
 *
 * A finite double is m 2^(b - 1074) with an integer m < 2^53 and
 * b = max(e, 1) - 1 (e the biased exponent field): its bits start at bit
 * b of the fixed-point number whose bit 0 weighs 2^-1074. Digit i holds
 * bits [32 i, 32 i + 32); m shifted by s = b mod 32 spans three digits,
 * each getting a part < 2^32 (signed). A digit can take 2^31 such parts
 * before its int64 could overflow; carries are propagated (lse_xsum_carry)
 * every LSE_XSUM_CARRY_EVERY additions.
 */

/* A flag of lse_term_run (with LSE_RUN_STATS, threads-private.h): the
 * similarity's stats_exact instead of stats; acc then holds lse_xsum
 * arrays (passed as double *, stride = accumulators * LSE_XSUM_DOUBLES). */
#define LSE_RUN_STATS_EXACT (1u << 8)
/* sizeof(lse_xsum) in doubles */
#define LSE_XSUM_DOUBLES (sizeof(lse_xsum) / sizeof(double))

/* A finite double v's parts (lse_xsum_split): digit index i, the low part
 * lo < 2^32 for digit i, the high part hi (< 2^53) for the digits above,
 * and the sign mask neg (0 or all ones: a part p enters as (p ^ neg) -
 * neg). */
typedef struct lse_xsum_parts {
    unsigned i;
    uint64_t lo, hi, neg;
} lse_xsum_parts;

/* Split v into its parts; 0 (and nothing written) for a non-finite v.
 * Always inlined: without it GCC stops inlining lse_xsum_add2 into the
 * exact-statistics kernel of lingauss.c (callgrind: more instructions). */
static inline __attribute__((always_inline)) int
lse_xsum_split(const double v, lse_xsum_parts *p)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    const unsigned e = (unsigned)(bits >> 52) & 0x7ffu;
    if (e == 0x7ffu)
        return 0;
    const uint64_t mant = (bits & ((UINT64_C(1) << 52) - 1)) |
                          ((uint64_t)(e != 0) << 52);
    const unsigned b = e - (e != 0); /* max(e, 1) - 1 */
    const unsigned s = b & 31u;
    p->i = b >> 5;
    p->lo = (mant << s) & 0xffffffffu;
    p->hi = (mant >> 1) >> (31u - s); /* mant >> (32 - s), < 2^53 */
    p->neg = (uint64_t)0 - (bits >> 63);
    return 1;
}

/* x += v, without the count of additions: the caller has reserved room
 * (lse_xsum_reserve). Branch-free but for non-finite v (the sign of a
 * residual is unpredictable). */
static inline void lse_xsum_add_unchecked(lse_xsum *x, const double v)
{
    lse_xsum_parts p;
    if (!lse_xsum_split(v, &p)) {
        lse_xsum_add_special(x, v);
        return;
    }
    /* negate by (p ^ m) - m with m = 0 or -1 */
    int64_t *dg = x->digit + p.i;
    dg[0] += (int64_t)((p.lo ^ p.neg) - p.neg);
    dg[1] += (int64_t)(((p.hi & 0xffffffffu) ^ p.neg) - p.neg);
    dg[2] += (int64_t)(((p.hi >> 32) ^ p.neg) - p.neg);
}

/* Room for n_more additions (lse_xsum_add_unchecked) to each of x[0..n)
 * without a carry in between (n_more <= LSE_XSUM_CARRY_EVERY). */
static inline void lse_xsum_reserve(lse_xsum *x, size_t n, int64_t n_more)
{
    for (size_t j = 0; j < n; j++) {
        if (x[j].n_add + n_more >= 2 * LSE_XSUM_CARRY_EVERY)
            lse_xsum_carry(&x[j]);
        x[j].n_add += n_more;
    }
}

/* The two-digit addition (lse_xsum_add2): its upper part (< 2^53) goes
 * unsplit into the second digit, so it counts as 2^21 single parts. At
 * most LSE_XSUM_FAST_MAX of them between reservations. */
#define LSE_XSUM_FAST_UNITS 21
#define LSE_XSUM_FAST_MAX 256

/* Room for n_more (<= LSE_XSUM_FAST_MAX) lse_xsum_add2 to each of
 * x[0..n). */
static inline void lse_xsum_reserve2(lse_xsum *x, size_t n, int64_t n_more)
{
    lse_xsum_reserve(x, n, n_more << LSE_XSUM_FAST_UNITS);
}

/* x += v in two digits (fewer instructions; reserve with
 * lse_xsum_reserve2). */
static inline void lse_xsum_add2(lse_xsum *x, const double v)
{
    lse_xsum_parts p;
    if (!lse_xsum_split(v, &p)) {
        lse_xsum_add_special(x, v);
        return;
    }
    int64_t *dg = x->digit + p.i;
    dg[0] += (int64_t)((p.lo ^ p.neg) - p.neg);
    dg[1] += (int64_t)((p.hi ^ p.neg) - p.neg);
}

static inline void lse_xsum_add_inline(lse_xsum *x, const double v)
{
    lse_xsum_add_unchecked(x, v);
    if (++x->n_add >= LSE_XSUM_CARRY_EVERY)
        lse_xsum_carry(x);
}

#endif /* LSEGRAPH_EXACTSUM_PRIVATE_H */
