#ifndef LSEGRAPH_MODELS_LSLDS_DECODE_H
#define LSEGRAPH_MODELS_LSLDS_DECODE_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include <lsegraph/models/lslds.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file lslds_decode.h
 * @brief Decoding a mode path from the smoothed marginals of q(z)
 * (docs/models/slds.md, "Versus ssm": which path `lsefit slds segment`
 * prints by default, and why).
 *
 * The maximum-expected-accuracy path: among the paths with nonzero prior
 * probability (p0(k_s) > 0 at every sequence start s, P(k_{t-1}, k_t) > 0
 * within a sequence) the one maximizing sum_t w(t, k_t), the expected
 * number of rows it labels correctly when the modes are distributed as
 * the marginals w. When every initial and transition probability is
 * positive it is the per-row most probable mode. It is a Viterbi pass
 * over w itself (0 and -infinity on the allowed and forbidden moves);
 * ties go to the path that is smallest when compared from its last row
 * backwards (at the last row of a sequence the lowest state, then at each
 * row the lowest predecessor), as in lse_chain_viterbi.
 */

/** @brief Maximum-expected-accuracy path of a hidden Markov chain.
 *  @p w (n, K) the smoothed marginals (finite, >= 0; rows need not sum
 *  to 1); @p p0 (K) initial and @p P (K, K) transition probabilities
 *  (row j: from state j; >= 0, only their zero pattern matters);
 *  @p starts / @p n_starts as for lse_chain_viterbi; @p path (n) gets
 *  the states.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ERANGE (starts); LSE_EINVAL
 *  (a non-finite or negative entry, or no path of nonzero probability);
 *  LSE_ENOMEM. */
LSE_API lse_status lse_chain_mea_path(const gsl_matrix *w,
                                      const gsl_vector *p0,
                                      const gsl_matrix *P,
                                      const size_t *starts, size_t n_starts,
                                      size_t *path, lse_error *err);

/** @brief The default segmentation of a latent SLDS: the maximum-
 *  expected-accuracy path of q(z) (lse_chain_mea_path with the model's
 *  initial and transition probabilities, sequences from @p seq as for
 *  the other calls, may be NULL); for a mixture the per-row most probable
 *  mode among those of nonzero weight. Needs q(z) (LSE_EINVAL otherwise);
 *  @p path (q->T). LSE_EFAULT, LSE_EDIM, LSE_EINVAL, LSE_ENOMEM. */
LSE_API lse_status lse_lslds_mea_path(const lse_lslds_params *p,
                                      const size_t *seq,
                                      const lse_lslds_post *q, size_t *path,
                                      lse_error *err);

#ifdef __cplusplus
}
#endif
#endif
