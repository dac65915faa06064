#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

/* Private helpers of the models: messages, input checks, k-means++. */

lse_status lse_util_fail(lse_error *err, lse_status st, const char *fn,
                         const char *fmt, ...)
{
    if (err == NULL)
        return st;
    err->status = st;
    int n = snprintf(err->message, sizeof err->message, "%s: ", fn);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof err->message) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message + n, sizeof err->message - (size_t)n, fmt, ap);
        va_end(ap);
    }
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

lse_status lse_util_check_weights(const gsl_vector *w, size_t n, double *total,
                                  const char *fn, lse_error *err)
{
    if (w == NULL) {
        *total = (double)n;
        return LSE_OK;
    }
    if (w->size != n)
        return lse_util_fail(err, LSE_EDIM, fn,
                             "%zu sample weights for %zu samples", w->size, n);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = gsl_vector_get(w, i);
        if (!isfinite(v) || v < 0.0)
            return lse_util_fail(err, LSE_EDOM, fn,
                                 "sample weight %zu is %g (weights must be "
                                 "finite and >= 0)",
                                 i, v);
        sum += v;
    }
    if (!(sum > 0.0) || !isfinite(sum))
        return lse_util_fail(err, LSE_EDOM, fn,
                             "the sample weights sum to %g (must be > 0)", sum);
    *total = sum;
    return LSE_OK;
}

double lse_util_dist2(const gsl_matrix *x, size_t i, const gsl_matrix *c,
                      size_t j)
{
    const double *xi = gsl_matrix_const_ptr(x, i, 0);
    const double *cj = gsl_matrix_const_ptr(c, j, 0);
    double s = 0.0;
    for (size_t l = 0; l < x->size2; l++) {
        const double t = xi[l] - cj[l];
        s += t * t;
    }
    return s;
}

static double weight_of(const gsl_vector *w, size_t i)
{
    return w != NULL ? gsl_vector_get(w, i) : 1.0;
}

/* Index drawn with probability p_i / sum p, p_i = w_i * (use_d2 ? d2_i : 1);
 * only rows with p_i > 0. n_pos: number of such rows (0: none). */
static size_t draw(const gsl_vector *w, const gsl_vector *d2, int use_d2,
                   gsl_rng *rng, size_t *n_pos)
{
    const size_t n = d2->size;
    double total = 0.0;
    size_t last = 0;
    *n_pos = 0;
    for (size_t i = 0; i < n; i++) {
        const double p = weight_of(w, i) * (use_d2 ? gsl_vector_get(d2, i) : 1);
        if (p > 0.0) {
            total += p;
            last = i;
            (*n_pos)++;
        }
    }
    if (*n_pos == 0)
        return 0;
    const double u = gsl_rng_uniform(rng) * total;
    double cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double p = weight_of(w, i) * (use_d2 ? gsl_vector_get(d2, i) : 1);
        if (!(p > 0.0))
            continue;
        cum += p;
        if (u < cum)
            return i;
    }
    return last; /* round-off: u landed on the total */
}

lse_status lse_util_kmeanspp(const gsl_matrix *x, const gsl_vector *w,
                             gsl_rng *rng, gsl_matrix *centers, gsl_vector *d2)
{
    const size_t n = x->size1, k = centers->size1;
    if (n == 0 || d2->size != n || centers->size2 != x->size2)
        return LSE_EDIM;
    size_t n_pos;
    size_t pick = draw(w, d2, 0, rng, &n_pos);
    if (n_pos == 0)
        return LSE_EINVAL;
    for (size_t c = 0; c < k; c++) {
        if (c > 0) {
            pick = draw(w, d2, 1, rng, &n_pos);
            if (n_pos == 0) /* every row sits on a center */
                pick = draw(w, d2, 0, rng, &n_pos);
        }
        gsl_vector_const_view xr = gsl_matrix_const_row(x, pick);
        gsl_matrix_set_row(centers, c, &xr.vector);
        for (size_t i = 0; i < n; i++) {
            const double dist = lse_util_dist2(x, i, centers, c);
            if (c == 0 || dist < gsl_vector_get(d2, i))
                gsl_vector_set(d2, i, dist);
        }
    }
    return LSE_OK;
}

size_t lse_util_nearest(const gsl_matrix *x, const gsl_matrix *centers,
                        size_t *labels, gsl_vector *d2, int changed_from)
{
    size_t changed = 0;
    for (size_t i = 0; i < x->size1; i++) {
        size_t best = 0;
        double best_d = lse_util_dist2(x, i, centers, 0);
        for (size_t c = 1; c < centers->size1; c++) {
            const double dist = lse_util_dist2(x, i, centers, c);
            if (dist < best_d) {
                best_d = dist;
                best = c;
            }
        }
        if (changed_from && labels[i] != best)
            changed++;
        labels[i] = best;
        if (d2 != NULL)
            gsl_vector_set(d2, i, best_d);
    }
    return changed;
}

void lse_util_lloyd(const gsl_matrix *x, const gsl_vector *w,
                    gsl_matrix *centers, size_t max_iter, size_t *labels,
                    gsl_vector *sums, size_t *n_iter)
{
    const size_t n = x->size1, d = x->size2, k = centers->size1;
    lse_util_nearest(x, centers, labels, NULL, 0);
    size_t it = 0;
    for (; it < max_iter; it++) {
        gsl_vector_set_zero(sums);
        for (size_t i = 0; i < n; i++)
            *gsl_vector_ptr(sums, labels[i]) += weight_of(w, i);
        /* new centers: weighted means (a center without weight stays) */
        for (size_t c = 0; c < k; c++)
            if (gsl_vector_get(sums, c) > 0.0) {
                gsl_vector_view row = gsl_matrix_row(centers, c);
                gsl_vector_set_zero(&row.vector);
            }
        for (size_t i = 0; i < n; i++) {
            const double s = gsl_vector_get(sums, labels[i]);
            if (!(s > 0.0))
                continue;
            const double f = weight_of(w, i) / s;
            const double *xi = gsl_matrix_const_ptr(x, i, 0);
            double *ci = gsl_matrix_ptr(centers, labels[i], 0);
            for (size_t j = 0; j < d; j++)
                ci[j] += f * xi[j];
        }
        if (lse_util_nearest(x, centers, labels, NULL, 1) == 0) {
            it++;
            break;
        }
    }
    if (n_iter != NULL)
        *n_iter = it;
}
