#ifndef LSEGRAPH_MODELS_UTIL_H
#define LSEGRAPH_MODELS_UTIL_H

/*
 * Private helpers shared by the models (models/util.c); never installed.
 * Built only on the public API, like the models themselves.
 */

#include <stdarg.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/lsegraph.h>

/* The models' error channel (docs/architecture.md): st with the
 * printf-style message in err (may be NULL), written as given (callers
 * name the function themselves); returns st. */
lse_status lse_util_set_error(lse_error *err, lse_status st, const char *fmt,
                              ...) __attribute__((format(printf, 3, 4)));

/* Report a model call's status through the public lse_error channel:
 * when st > 0 and err != NULL, err gets st and msg (the model's message,
 * already "fn: facts"), or "fn: NULL argument" when msg is empty (a NULL
 * handle). Returns st. */
lse_status lse_util_report(lse_error *err, lse_status st, const char *fn,
                           const char *msg);

/* The per-model message buffer of the older models (lse_<model>_errmsg):
 * "fn: message" into errmsg (len bytes, the message cut at 400 bytes);
 * returns st. */
lse_status lse_util_vfail(char *errmsg, size_t len, lse_status st,
                          const char *fn, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

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

/* A model file's feature_names (n, borrowed) must all differ: data
 * columns are found by these names, and two alike would both take the
 * first column of that name. LSE_OK, LSE_EPARSE with a message naming the
 * file src and both 1-based entries, or LSE_ENOMEM. */
lse_status lse_model_names_unique(char *const *names, size_t n,
                                  const char *src, lse_error *err);

#endif /* LSEGRAPH_MODELS_UTIL_H */
