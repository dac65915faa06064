#ifndef LSEGRAPH_STREAM_H
#define LSEGRAPH_STREAM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file stream.h
 * @brief Streaming dot-product attention energy (lib/attn_stream.c,
 * docs/performance.md "Streaming attention"): the energy of an LSE term
 * over a dot-product score and its gradients, without ever holding the
 * (n, m) score or softmax matrix. Tiles of query rows x key rows are
 * scored with dgemm and reduced by an online log-sum-exp (flash-attention
 * style); memory is O((n + m) d) plus a few tiles per thread.
 *
 *   E = -sum_i (1/beta) log sum_{j allowed} exp(beta a q_i . k_j)
 *
 * q (n, d) queries, k (m, d) keys, a = @p scale. Row i of q and row j of k
 * sit at positions i and j: LSE_MASK_CAUSAL forbids j > i, LSE_MASK_NO_SELF
 * j == i. A row with no allowed key contributes 0 (lse_softmax's
 * convention). The result does not depend on the thread count (fixed
 * tiles, each output row written by one thread, sums in row order).
 */

/** @brief Energy and gradients. @p dq (n, d) and @p dk (m, d), each
 *  optional (NULL), get dE/dq and dE/dk ADDED. LSE_EFAULT (NULL q, k or
 *  energy), LSE_EDIM, LSE_EDOM (beta or scale not finite, beta <= 0, a
 *  non-finite entry in q or k), LSE_EINVAL (unknown mask bits),
 *  LSE_ENOMEM; a message in @p err (may be NULL). */
LSE_API lse_status lse_attn_stream(const gsl_matrix *q, const gsl_matrix *k,
                                   double beta, double scale, unsigned mask,
                                   double *energy, gsl_matrix *dq,
                                   gsl_matrix *dk, lse_error *err);

/** @brief Attention output out = softmax(beta a Q K') V (n, d_v), V (m,
 *  d_v), streamed the same way; a row with no allowed key gets 0. The
 *  energy goes to @p energy if not NULL. Errors as lse_attn_stream. */
LSE_API lse_status lse_attn_stream_apply(const gsl_matrix *q,
                                         const gsl_matrix *k,
                                         const gsl_matrix *v, double beta,
                                         double scale, unsigned mask,
                                         gsl_matrix *out, double *energy,
                                         lse_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_STREAM_H */
