#ifndef LSEGRAPH_SIM_FUSED_PRIVATE_H
#define LSEGRAPH_SIM_FUSED_PRIVATE_H

#include <lsegraph/sim.h>

/* The optional fused block pass of a similarity type (never installed;
 * an extension of lse_sim_type kept out of the public vtable). An LSE
 * term's E-step with statistics (lib/term.c: scores, softmax and M-step
 * statistics of a block, when nothing else reads S: no mask, beta 1, no
 * kept matrices, no gradient, rounded statistics) calls it on each block
 * instead of eval, the finiteness check, the softmax and stats:
 *   a       the block's arguments (as eval; prepare has run)
 *   weight  the block's row weights (a->child->size1) or NULL
 *   lse     out: the rows' log-sum-exp, as lse_softmax_rows writes it
 *   acc     the statistics of stats, ADDED to
 * It returns 1 when it did the block, 0 when it did not (the parameters
 * or the block do not suit it, or a score is NaN or +INFINITY: then acc is
 * untouched and the separate steps run and report the score). Its results
 * are those of the separate steps on this machine or documented where
 * they are not (docs/performance.md, "Fused diagonal pass (session 8)"). */
typedef int (*lse_sim_fused_fn)(const lse_sim_args *a, const double *weight,
                                double *lse, double *acc);

/* The fused pass of type, or NULL (lib/sim/fused.c: the table of the
 * types that have one). */
lse_sim_fused_fn lse_sim_fused_find(const lse_sim_type *type);

/* The passes of that table: lse_sim_gaussian's (lib/sim/gaussian.c),
 * lse_sim_lingauss's (lib/sim/lingauss_fused.c, declared with its
 * conditions in lib/sim/lingauss-fused-private.h). */
int lse_gaussian_fused(const lse_sim_args *a, const double *weight,
                       double *lse, double *acc);

#endif /* LSEGRAPH_SIM_FUSED_PRIVATE_H */
