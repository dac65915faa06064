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

/* Fill err (may be NULL) with "fn: message" and return st. */
lse_status lse_util_fail(lse_error *err, lse_status st, const char *fn,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* 1 and the position of the first NaN or infinity of x (row-major order),
 * else 0. row/col may be NULL. */
int lse_util_find_nonfinite(const gsl_matrix *x, size_t *row, size_t *col);

/* Check optional sample weights w (n): finite, >= 0, positive sum.
 * Returns LSE_OK and the sum in *total (n without weights), or LSE_EDIM /
 * LSE_EDOM with a message naming fn. */
lse_status lse_util_check_weights(const gsl_vector *w, size_t n, double *total,
                                  const char *fn, lse_error *err);

/* Squared Euclidean distance between row i of x and row j of c. */
double lse_util_dist2(const gsl_matrix *x, size_t i, const gsl_matrix *c,
                      size_t j);

/*
 * k-means++ seeding (Arthur and Vassilvitskii 2007): the first center is
 * drawn with probability proportional to w_i, each next one with
 * probability proportional to w_i D(x_i)^2, D = distance to the nearest
 * center so far (proportional to w_i alone when every D is 0). Rows with
 * w_i = 0 are never drawn. x (n, d); w (n) or NULL for 1; centers (k, d)
 * written; d2 (n) scratch. Every random number comes from rng.
 * LSE_EINVAL when no row has a positive weight.
 */
lse_status lse_util_kmeanspp(const gsl_matrix *x, const gsl_vector *w,
                             gsl_rng *rng, gsl_matrix *centers, gsl_vector *d2);

/* labels[i] = index of the nearest center to row i of x (lowest index on
 * ties); d2 (n, may be NULL) gets the squared distance. Returns the number
 * of labels that changed compared to the input labels when changed_from is
 * non-zero, else 0. */
size_t lse_util_nearest(const gsl_matrix *x, const gsl_matrix *centers,
                        size_t *labels, gsl_vector *d2, int changed_from);

/*
 * Lloyd's k-means iterations from the given centers: assign each row to the
 * nearest center, move each center to the weighted mean of its rows (a
 * center without weight stays), until no assignment changes or max_iter
 * updates. labels (n) gets the final assignment (nearest to the final
 * centers); *n_iter (may be NULL) the number of center updates. sums (k)
 * scratch.
 */
void lse_util_lloyd(const gsl_matrix *x, const gsl_vector *w,
                    gsl_matrix *centers, size_t max_iter, size_t *labels,
                    gsl_vector *sums, size_t *n_iter);

#endif /* LSEGRAPH_MODELS_UTIL_H */
