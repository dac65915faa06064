#ifndef LSEGRAPH_SOFTMAX_PRIVATE_H
#define LSEGRAPH_SOFTMAX_PRIVATE_H

#include <stddef.h>

#include <gsl/gsl_matrix.h>

#include "kernels-private.h"

/* Row softmax of an LSE term's score blocks (lib/softmax.c; never
 * installed). The copies for the instruction sets of kernels-private.h are
 * chosen once per term (lse_softmax_isa_detect) so that a term gives the
 * same bits on every call and for every thread count. */

typedef struct lse_softmax_isa {
    int avx2;   /* vectorized softmax path */
    int fma;    /* AVX2 + FMA softmax of narrow rows */
    int avx512; /* AVX-512 softmax of narrow rows */
} lse_softmax_isa;

static inline lse_softmax_isa lse_softmax_isa_detect(void)
{
    lse_softmax_isa isa = {lse_cpu_avx2(), lse_cpu_avx2_fma(),
                           lse_cpu_avx512()};
    return isa;
}

/* First NaN or +INFINITY of S: 1 and its place, else 0 (-INFINITY, a
 * masked pair, is legal). */
int lse_softmax_find_bad(const gsl_matrix *s, const lse_softmax_isa *isa,
                         size_t *row, size_t *col);

/* Softmax of every row of s (no NaN or +INFINITY) into a (may alias s) at
 * inverse temperature beta; lse[r] = (1/beta) log sum_j exp(beta s_rj)
 * (-INFINITY for a fully masked row, whose softmax is 0); m: scratch of
 * s->size1 doubles. */
void lse_softmax_rows(const gsl_matrix *s, gsl_matrix *a, double beta,
                      double *lse, double *m, const lse_softmax_isa *isa);

#endif /* LSEGRAPH_SOFTMAX_PRIVATE_H */
