#ifndef LSEGRAPH_LINGAUSS_FUSED_PRIVATE_H
#define LSEGRAPH_LINGAUSS_FUSED_PRIVATE_H

#include <lsegraph/core.h>

/* The fused block pass of lse_sim_lingauss (lib/sim/lingauss_fused.c;
 * the contract of lse_sim_fused_fn, sim-fused-private.h): scores, softmax,
 * log-sum-exp and statistics of a block in one pass over the rows, 8 or 4
 * rows per vector, with the arithmetic of the separate steps on this
 * machine (eval, lib/softmax.c's softmax, stats: the same bits).
 * Done by the AVX-512 copy (blocks of a multiple of 8 rows) or the AVX2
 * + FMA copy (of 4 rows; its separate steps: eval, softmax_tr4, stats) for
 * (d, dc) = (1, 1), (1, 2), (2, 2), (3, 3) and K <= 4 modes; returns 0
 * otherwise (and on a NaN or +INFINITY score, acc untouched). */
int lse_lingauss_fused(const lse_sim_args *a, const double *weight,
                       double *lse, double *acc);

#endif /* LSEGRAPH_LINGAUSS_FUSED_PRIVATE_H */
