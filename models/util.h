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

#endif /* LSEGRAPH_MODELS_UTIL_H */
