#ifndef LSEGRAPH_HC_H
#define LSEGRAPH_HC_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>
#include <gsl/gsl_matrix.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file hc.h
 * @brief Model-based hierarchical agglomeration (lib/hc.c) for starting
 * EM, as mclust's hc(): start from singletons and repeatedly merge the two
 * clusters whose merge lowers the classification log-likelihood least.
 * Implemented for mclust's EII model (hcEII), where that decrease is
 * proportional to Ward's cost n_a n_b / (n_a + n_b) |m_a - m_b|^2 (the
 * increase of the within-cluster sum of squares).
 */

/**
 * @brief Ward / EII agglomeration of the n rows of @p x. Merge t
 * (0 <= t < n - 1) joins the clusters represented by rows pairs[2t] <
 * pairs[2t+1] (the smaller index represents the union) at cost cost[t]
 * (nondecreasing). O(n^2) time and n^2 doubles of memory.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (n = 0); LSE_ENONFINITE; LSE_ENOMEM;
 * with a message in @p err (may be NULL).
 */
LSE_API lse_status lse_hc_ward(const gsl_matrix *x, size_t *pairs, double *cost,
                               lse_error *err);

/**
 * @brief mclust's hcVVV (model-based agglomeration with unconstrained
 * covariances, lib/hc_vvv.c) of the n rows of @p x, from singletons (as
 * mclust's hc(), identical rows included): each merge joins the two
 * clusters whose union lowers the regularized classification likelihood
 *   sum_g T_g,  T = l log(beta (tr W + alpha) / l)  (l <= d or l = 2),
 *               T = l log(|W / l| + beta (tr W + alpha) / l)  (else),
 * (W the cluster's scatter matrix, alpha = tr W_all / (n d), beta = 1)
 * least: cost[t] = T(a + b) - T(a) - T(b), ties to the last pair in
 * mclust's slot order. Clusters are named by their first row: merge t joins
 * pairs[2t] < pairs[2t+1] and the union keeps pairs[2t] (as lse_hc_ward,
 * so lse_hc_cut applies). Mclust's default start is this on
 * lse_hc_svd(data). O(n^3) time (O(n^2 d^3) cost evaluations), n^2
 * doubles of memory.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (no rows or columns);
 * LSE_ENONFINITE; LSE_ENOMEM; with a message in @p err (may be NULL).
 */
LSE_API lse_status lse_hc_vvv(const gsl_matrix *x, size_t *pairs, double *cost,
                              lse_error *err);

/**
 * @brief mclust's hcUse = "SVD" transform: the columns of @p x (n, d)
 * centred and scaled to unit standard deviation (n - 1), then rotated onto
 * the right singular vectors V of that matrix and divided by the square
 * roots of its singular values: z = X_std V S^(-1/2) (up to the signs of
 * the columns, which the hc criteria ignore).
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (z not n x d, n < 2);
 * LSE_ENONFINITE; LSE_EDOM (a constant column, collinear columns);
 * LSE_ENUMERIC; LSE_ENOMEM.
 */
LSE_API lse_status lse_hc_svd(const gsl_matrix *x, gsl_matrix *z,
                              lse_error *err);

/** @brief Partition into k clusters: the first n - k merges of @p pairs;
 *  labels (n) in 0..k-1, numbered in order of first appearance.
 *  @return LSE_OK, LSE_EFAULT, LSE_EDIM (k = 0 or k > n), LSE_ENOMEM. */
LSE_API lse_status lse_hc_cut(size_t n, const size_t *pairs, size_t k,
                              size_t *labels);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_HC_H */
