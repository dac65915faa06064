#include <math.h>
#include <stdio.h>

#include "util.h"

/* Private helpers of the models: input checks. */

lse_status lse_util_set_error(lse_error *err, lse_status st, const char *fmt,
                              ...)
{
    if (err == NULL)
        return st;
    err->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return st;
}

lse_status lse_util_report(lse_error *err, lse_status st, const char *fn,
                           const char *msg)
{
    if (err == NULL || st <= 0)
        return st;
    err->status = st;
    if (msg != NULL && msg[0] != '\0')
        snprintf(err->message, sizeof err->message, "%s", msg);
    else
        snprintf(err->message, sizeof err->message, "%s: NULL argument", fn);
    return st;
}

lse_status lse_util_vfail(char *errmsg, size_t len, lse_status st,
                          const char *fn, const char *fmt, va_list ap)
{
    char buf[400];
    vsnprintf(buf, sizeof buf, fmt, ap);
    snprintf(errmsg, len, "%s: %s", fn, buf);
    return st;
}

int lse_util_find_nonfinite(const gsl_matrix *x, size_t *row, size_t *col)
{
    for (size_t i = 0; i < x->size1; i++) {
        const double *xi = gsl_matrix_const_ptr(x, i, 0);
        for (size_t j = 0; j < x->size2; j++)
            if (!isfinite(xi[j])) {
                if (row != NULL)
                    *row = i;
                if (col != NULL)
                    *col = j;
                return 1;
            }
    }
    return 0;
}

lse_status lse_util_check_weights(const gsl_vector *w, size_t n, lse_comm *dist,
                                  double *total, const char *fn, lse_error *err)
{
    const size_t offset = dist != NULL ? dist->offset : 0;
    double sum = 0.0;
    if (w == NULL) {
        sum = (double)n;
    } else {
        if (w->size != n)
            return lse_error_set(err, LSE_EDIM, fn,
                                 "%zu sample weights for %zu samples", w->size,
                                 n);
        for (size_t i = 0; i < n; i++) {
            const double v = gsl_vector_get(w, i);
            if (!isfinite(v) || v < 0.0)
                return lse_error_set(err, LSE_EDOM, fn,
                                     "sample weight %zu is %g (weights must "
                                     "be finite and >= 0)",
                                     offset + i, v);
            sum += v;
        }
    }
    const lse_status st = lse_comm_sum(dist, &sum, 1, fn, err);
    if (st != LSE_OK)
        return st;
    if (w != NULL && (!(sum > 0.0) || !isfinite(sum)))
        return lse_error_set(err, LSE_EDOM, fn,
                             "the sample weights sum to %g (must be > 0)", sum);
    *total = sum;
    return LSE_OK;
}

lse_status lse_model_names_unique(char *const *names, size_t n,
                                  const char *src, lse_error *err)
{
    size_t first = 0, second = SIZE_MAX;
    const lse_status st = lse_names_find_repeat((const char *const *)names, n,
                                                &first, &second, err);
    if (st != LSE_OK || second == SIZE_MAX)
        return st;
    return lse_error_set(err, LSE_EPARSE, src,
                         "key 'feature_names' names '%.60s' twice (entries "
                         "%zu and %zu): each feature needs its own name; fix "
                         "the model file or refit it from data with unique "
                         "column names",
                         names[second], first + 1, second + 1);
}
