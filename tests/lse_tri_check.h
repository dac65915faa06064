/* Helpers of the triangle kernels' bit-for-bit tests (test_tri_eval_avx2.c,
 * test_tri_stats_avx2.c): bit equality and a deterministic stream of
 * values of varied magnitude and sign. */
#ifndef LSE_TRI_CHECK_H
#define LSE_TRI_CHECK_H

#include <string.h>

static inline int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static inline double val(unsigned long *s)
{
    *s = *s * 6364136223846793005UL + 1442695040888963407UL;
    const double u = (double)(*s >> 11) / 9007199254740992.0;
    return (u - 0.4) * (1.0 + 30.0 * u * u);
}

#endif
