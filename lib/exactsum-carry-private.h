#ifndef LSEGRAPH_EXACTSUM_CARRY_PRIVATE_H
#define LSEGRAPH_EXACTSUM_CARRY_PRIVATE_H

#include <stdint.h>

#include <lsegraph/sim.h>

/*
 * The bottom of lse_xsum (lib/exactsum_carry.c): carry propagation and the
 * count of non-finite terms, which the inline additions of
 * exactsum-private.h and the rest of lib/exactsum.c both call.
 */

/* Invariant: n_add < 2^30 and |digit| <= (n_add + 1) 2^32 < 2^63. One
 * addition raises n_add by 1; single additions carry at this count. */
#define LSE_XSUM_CARRY_EVERY (INT64_C(1) << 29)

/* Propagate the carries: digits 0 .. LSE_XSUM_DIGITS - 2 in [0, 2^32),
 * the top one signed; n_add = 0. */
void lse_xsum_carry(lse_xsum *x);
/* A non-finite term (counted). */
void lse_xsum_add_special(lse_xsum *x, double v);

#endif /* LSEGRAPH_EXACTSUM_CARRY_PRIVATE_H */
