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


/* Squared Euclidean distance between row i of x and row j of c. */
double lse_util_dist2(const gsl_matrix *x, size_t i, const gsl_matrix *c,
                      size_t j);

/*
 * A data set spread over n_ranks processes in rank order (docs/mpi.md):
 * this process holds rows [offset, offset + n_local) of n_total. Every
 * collective below calls reduce (a sum over the processes, e.g.
 * MPI_Allreduce) exactly once, so all processes must make the same
 * sequence of calls; control flow may depend only on reduced values. With
 * reduce NULL (one process) every collective is the identity and the
 * arithmetic is exactly that of the serial code.
 */
typedef struct lse_util_dist {
    lse_reduce_fn reduce; /* sum over processes, or NULL */
    void *user;
    size_t rank, n_ranks;
    size_t n_local, offset, n_total;
    double *tmp; /* (n_ranks * LSE_UTIL_GATHER_MAX) gather scratch */
    int failed;  /* a reduction failed: the fit must end */
} lse_util_dist;

/* Most doubles one process contributes to lse_util_gather. */
#define LSE_UTIL_GATHER_MAX 8

/* Set up d (zeroed first) for n_local rows on process rank of n_ranks;
 * one collective (the row counts). LSE_EINVAL (rank >= n_ranks, n_ranks 0,
 * several processes without reduce), LSE_ENOMEM, or the hook's status,
 * with a message naming fn. */
lse_status lse_util_dist_init(lse_util_dist *d, lse_reduce_fn reduce,
                              void *user, size_t rank, size_t n_ranks,
                              size_t n_local, const char *fn, lse_error *err);
void lse_util_dist_free(lse_util_dist *d);
/* 1 when d spans several processes. */
int lse_util_dist_parallel(const lse_util_dist *d);
/* An lse_reduce_fn for lse_solver_set_reduce (user = the lse_util_dist):
 * calls the hook and records a failure in d->failed. */
lse_status lse_util_dist_reduce(double *buf, size_t n, void *user);

/* buf[0..n) = its sum over the processes (identity for one process or
 * d == NULL). On failure err names fn. */
lse_status lse_util_sum(lse_util_dist *d, double *buf, size_t n,
                        const char *fn, lse_error *err);
/* out[0..n) = the sums of the exact accumulators x[0..n) over the
 * processes, each rounded once to the nearest double: the same bits for
 * any split of the terms into processes (docs/mpi.md). One collective of
 * n * LSE_XSUM_EXPORT doubles (exported accumulators) when parallel; x is
 * normalized in place. LSE_ENOMEM, LSE_EDOM (the hook did not sum the
 * exports) or the hook's status, with a message naming fn. */
lse_status lse_util_xsum(lse_util_dist *d, lse_xsum *x, size_t n,
                         double *out, const char *fn, lse_error *err);

/* all[r * m + j] = mine[j] of process r (all: n_ranks * m; d->tmp holds
 * n_ranks * LSE_UTIL_GATHER_MAX). */
lse_status lse_util_gather(lse_util_dist *d, const double *mine,
                           size_t m, double *all, const char *fn,
                           lse_error *err);
/* buf[0..n) = the values of the one process that passes owner = 1 (the
 * others' are ignored). */
lse_status lse_util_bcast(lse_util_dist *d, int owner, double *buf,
                          size_t n, const char *fn, lse_error *err);

/* Check optional sample weights w (n): finite, >= 0, positive sum (over
 * every process of dist, which may be NULL; one collective, also without
 * weights). Returns LSE_OK and the sum in *total (the number of rows
 * without weights), or LSE_EDIM / LSE_EDOM (naming the global row) / the
 * hook's status, with a message naming fn. */
lse_status lse_util_check_weights(const gsl_vector *w, size_t n,
                                  lse_util_dist *dist, double *total,
                                  const char *fn, lse_error *err);

/*
 * k-means++ seeding (Arthur and Vassilvitskii 2007): the first center is
 * drawn with probability proportional to w_i, each next one with
 * probability proportional to w_i D(x_i)^2, D = distance to the nearest
 * center so far (proportional to w_i alone when every D is 0). Rows with
 * w_i = 0 are never drawn. x (n, d); w (n) or NULL for 1; centers (k, d)
 * written; d2 (n) scratch. Every random number comes from rng.
 * dist (NULL: one process): x is this process's share; the draws are those
 * of the whole data set (the same rng sequence on every process), so the
 * centers do not depend on the split (up to rounding of the sums).
 * LSE_EINVAL when no row has a positive weight; the hook's status.
 */
lse_status lse_util_kmeanspp(const gsl_matrix *x, const gsl_vector *w,
                             gsl_rng *rng, gsl_matrix *centers, gsl_vector *d2,
                             lse_util_dist *dist);

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
 * scratch. dist (NULL: one process): the weights, the center sums and the
 * count of changed labels are reduced over the processes. LSE_OK,
 * LSE_ENOMEM or the hook's status.
 */
lse_status lse_util_lloyd(const gsl_matrix *x, const gsl_vector *w,
                          gsl_matrix *centers, size_t max_iter, size_t *labels,
                          gsl_vector *sums, size_t *n_iter,
                          lse_util_dist *dist);

#endif /* LSEGRAPH_MODELS_UTIL_H */
