#ifndef LSEGRAPH_MODELS_UTIL_H
#define LSEGRAPH_MODELS_UTIL_H

/*
 * Private helpers shared by the models (models/util.c); never installed.
 * Built only on the public API, like the models themselves.
 */

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/lsegraph.h>

/* 1 and the position of the first NaN or infinity of x (row-major order),
 * else 0. row/col may be NULL. */
int lse_util_find_nonfinite(const gsl_matrix *x, size_t *row, size_t *col);

/* Check optional sample weights w (n): finite, >= 0, positive sum (over
 * every process of dist, which may be NULL; one collective, also without
 * weights). Returns LSE_OK and the sum in *total (the number of rows
 * without weights), or LSE_EDIM / LSE_EDOM (naming the global row) / the
 * hook's status, with a message naming fn. */
lse_status lse_util_check_weights(const gsl_vector *w, size_t n, lse_comm *dist,
                                  double *total, const char *fn,
                                  lse_error *err);

/*
 * Transitional names for models/slds.c until it calls the library's
 * collectives (include/lsegraph/comm.h), error setter (lse_error_set) and
 * k-means (include/lsegraph/kmeans.h) directly. New code uses those.
 */
typedef lse_comm lse_util_dist;
#define LSE_UTIL_GATHER_MAX LSE_COMM_GATHER_MAX
#define lse_util_fail lse_error_set
#define lse_util_dist_init lse_comm_init
#define lse_util_dist_free lse_comm_free
#define lse_util_dist_parallel lse_comm_parallel
#define lse_util_dist_reduce lse_comm_reduce
#define lse_util_sum lse_comm_sum
#define lse_util_xsum lse_comm_xsum
#define lse_util_gather lse_comm_gather
#define lse_util_bcast lse_comm_bcast
#define lse_util_dist2 lse_kmeans_dist2

#endif /* LSEGRAPH_MODELS_UTIL_H */
