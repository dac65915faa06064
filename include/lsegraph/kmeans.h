#ifndef LSEGRAPH_KMEANS_H
#define LSEGRAPH_KMEANS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/comm.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file kmeans.h
 * @brief The one k-means of the library: k-means++ seeding and Lloyd
 * iterations (lib/kmeans.c), for every model's starts.
 *
 * Rows of x (n, d) with optional weights w (n, >= 0; NULL = all 1). Over
 * several processes (comm non-NULL and parallel) x is this process's
 * share: the draws are those of the whole data set (the same rng sequence
 * on every process) and the sums are reduced, so the result does not
 * depend on the split (up to rounding of the sums).
 */

/** @brief Flags of lse_kmeans_seed and lse_kmeans_lloyd. */
enum {
    /** seeding: the first center, and a center drawn when every row sits
     *  on a center, is a uniform draw over all n_total rows
     *  (gsl_rng_uniform_int) ignoring the weights; default: a draw with
     *  probability proportional to w_i (gsl_rng_uniform) */
    LSE_KMEANS_UNIFORM_FIRST = 1u << 0,
    /** Lloyd: a center is sum_i (w_i x_i) / s (one division per term);
     *  default: sum_i (w_i / s) x_i. Equal in exact arithmetic, not in
     *  rounding. */
    LSE_KMEANS_DIVIDE = 1u << 1
};

/** @brief Squared Euclidean distance between row i of x and row j of c. */
LSE_API double lse_kmeans_dist2(const gsl_matrix *x, size_t i,
                                const gsl_matrix *c, size_t j);

/**
 * @brief k-means++ seeding (Arthur and Vassilvitskii 2007): the first
 * center drawn with probability proportional to w_i, each next one with
 * probability proportional to w_i D(x_i)^2, D = distance to the nearest
 * center so far (proportional to w_i alone when every D is 0). Rows with
 * w_i = 0 are never drawn. centers (k, d) written; d2 (n) gets each row's
 * squared distance to its nearest center. Every random number comes from
 * rng. LSE_EDIM (shapes, n = 0), LSE_EINVAL (no row with positive
 * weight), LSE_ENOMEM or the hook's status, with a message in err (may be
 * NULL).
 */
LSE_API lse_status lse_kmeans_seed(const gsl_matrix *x, const gsl_vector *w,
                                   gsl_rng *rng, gsl_matrix *centers,
                                   gsl_vector *d2, unsigned flags,
                                   lse_comm *comm, lse_error *err);

/** @brief labels[i] = index of the nearest center to row i of x (lowest
 *  index on ties); d2 (n, may be NULL) gets the squared distance. Returns
 *  the number of labels that changed compared to the input labels when
 *  changed_from is non-zero, else 0. Local rows only: no collective. */
LSE_API size_t lse_kmeans_nearest(const gsl_matrix *x,
                                  const gsl_matrix *centers, size_t *labels,
                                  gsl_vector *d2, int changed_from);

/**
 * @brief Lloyd's iterations from the given centers: assign each row to the
 * nearest center, move each center to the weighted mean of its rows (a
 * center without weight stays), until no assignment changes or max_iter
 * center updates. labels (n) gets the final assignment (nearest to the
 * final centers); *n_iter (may be NULL) the number of center updates.
 * sums (k) scratch. LSE_EDIM, LSE_ENOMEM or the hook's status.
 */
LSE_API lse_status lse_kmeans_lloyd(const gsl_matrix *x, const gsl_vector *w,
                                    gsl_matrix *centers, size_t max_iter,
                                    size_t *labels, gsl_vector *sums,
                                    size_t *n_iter, unsigned flags,
                                    lse_comm *comm, lse_error *err);

/** @brief The k-means objective sum_i w_i |x_i - c_{labels[i]}|^2 over
 *  this process's rows (sum it with lse_comm_sum for the whole set). */
LSE_API double lse_kmeans_objective(const gsl_matrix *x, const gsl_vector *w,
                                    const gsl_matrix *centers,
                                    const size_t *labels);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_KMEANS_H */
