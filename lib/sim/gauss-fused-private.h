#ifndef LSEGRAPH_GAUSS_FUSED_PRIVATE_H
#define LSEGRAPH_GAUSS_FUSED_PRIVATE_H

#include <stddef.h>

/* The fused block pass of lse_sim_gaussian's diagonal covariances on the
 * quadratic path (lib/sim/gauss_diag_fused.c): with y = x - c and the
 * monomials V = [1, y', (y.^2)'] (nv = 1 + 2 d), for a block of rows
 *   S = V Q, A = softmax of the rows of S, rho = A times the row weights,
 *   acc (nv, K) row-major += V' rho, lse_i = log sum_k exp(S_ik)
 * (the statistics layout of lse_gauss_stats_diag on that path), in tiles
 * of 8 rows: S of a tile stays in L1, the softmax runs with the rows in
 * the lanes of a vector and the statistics of the block are summed in a
 * buffer of their own, added to acc once the block is done. Rows of
 * K <= 16 components take the order of lib/softmax.c's narrow rows
 * (softmax_narrow8_body), rows of K > 16 that of row_softmax (fast); the
 * exponentials are the pass's own (lse_gauss_fused_exp), the log
 * lse_log_pos. */
typedef struct lse_gauss_fused {
    size_t b, d, K, kp;  /* rows, dimension, components, K rounded up to 8 */
    const double *x;     /* (b, d) the rows, tda xt */
    size_t xt;
    const double *c;     /* (d) the center */
    const double *q;     /* (nv, kp) Q, zero-padded */
    const double *w;     /* (b) row weights or NULL */
    double *lse;         /* (b) out */
    double *acc;         /* (nv, K) ADDED to */
    double *scratch;     /* lse_gauss_fused_scratch doubles, 64-byte aligned */
} lse_gauss_fused;

/* The kernel copies: AVX-512F, AVX2 + FMA, and a portable one that calls
 * fma() (a single instruction on a CPU that has it); the same bits. */
enum { LSE_FUSED_PLAIN = 0, LSE_FUSED_AVX2 = 1, LSE_FUSED_AVX512 = 2 };

/* The copy this machine runs (the workspace's choice: the AVX-512F copy
 * where lse_cpu_avx512, the AVX2 one where lse_cpu_avx2_fma, the portable
 * one where the CPU has FMA and LSE_NO_SIMD is set), or -1 (no FMA: the
 * separate steps run). */
int lse_gauss_fused_isa(void);

/* Doubles of scratch (any block size: tiles of 8 rows and the block's
 * statistics); 0 when the pass does not apply (K or d 0). */
size_t lse_gauss_fused_scratch(size_t d, size_t K);

/* One block with copy isa (one this machine runs). 0: done; 1: a score is
 * NaN or +INFINITY, acc untouched (lse may be partly written). */
int lse_gauss_fused_run(const lse_gauss_fused *f, int isa);

/* The pass's exponential (fz_exp of gauss_diag_fused_body.h) with copy
 * isa, y_i = exp(x_i) for x_i <= 0 or -INFINITY (0 below -708); for the
 * tests. */
void lse_gauss_fused_exp(const double *x, double *y, size_t n, int isa);

#endif /* LSEGRAPH_GAUSS_FUSED_PRIVATE_H */
