#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

lse_status lse_util_check_weights(const gsl_vector *w, size_t n,
                                  lse_util_dist *dist, double *total,
                                  const char *fn, lse_error *err)
{
    const size_t offset = dist != NULL ? dist->offset : 0;
    double sum = 0.0;
    if (w == NULL) {
        sum = (double)n;
    } else {
        if (w->size != n)
            return lse_util_fail(err, LSE_EDIM, fn,
                                 "%zu sample weights for %zu samples",
                                 w->size, n);
        for (size_t i = 0; i < n; i++) {
            const double v = gsl_vector_get(w, i);
            if (!isfinite(v) || v < 0.0)
                return lse_util_fail(err, LSE_EDOM, fn,
                                     "sample weight %zu is %g (weights must "
                                     "be finite and >= 0)",
                                     offset + i, v);
            sum += v;
        }
    }
    const lse_status st = lse_util_sum(dist, &sum, 1, fn, err);
    if (st != LSE_OK)
        return st;
    if (w != NULL && (!(sum > 0.0) || !isfinite(sum)))
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

/* ------------------------------------------------------------------ */
/* Data spread over processes                                          */

lse_status lse_util_dist_init(lse_util_dist *d, lse_reduce_fn reduce,
                              void *user, size_t rank, size_t n_ranks,
                              size_t n_local, const char *fn, lse_error *err)
{
    memset(d, 0, sizeof *d);
    if (reduce == NULL && n_ranks == 0) /* zeroed options: one process */
        n_ranks = 1;
    if (n_ranks == 0 || rank >= n_ranks)
        return lse_util_fail(err, LSE_EINVAL, fn,
                             "process %zu of %zu (need rank < n_ranks)", rank,
                             n_ranks);
    if (reduce == NULL && n_ranks > 1)
        return lse_util_fail(err, LSE_EINVAL, fn,
                             "%zu processes need a reduction hook", n_ranks);
    d->reduce = reduce;
    d->user = user;
    d->rank = rank;
    d->n_ranks = n_ranks;
    d->n_local = n_local;
    d->tmp = calloc(n_ranks * LSE_UTIL_GATHER_MAX, sizeof *d->tmp);
    if (d->tmp == NULL)
        return lse_util_fail(err, LSE_ENOMEM, fn, "out of memory");
    const double mine = (double)n_local;
    double *counts = malloc(n_ranks * sizeof *counts);
    if (counts == NULL) {
        lse_util_dist_free(d);
        return lse_util_fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    const lse_status st = lse_util_gather(d, &mine, 1, counts, fn, err);
    if (st == LSE_OK) {
        for (size_t r = 0; r < n_ranks; r++) {
            const size_t c = (size_t)counts[r];
            if (r < rank)
                d->offset += c;
            d->n_total += c;
        }
    }
    free(counts);
    if (st != LSE_OK)
        lse_util_dist_free(d);
    return st;
}

void lse_util_dist_free(lse_util_dist *d)
{
    if (d == NULL)
        return;
    free(d->tmp);
    d->tmp = NULL;
}

lse_status lse_util_dist_reduce(double *buf, size_t n, void *user)
{
    lse_util_dist *d = user;
    if (d->failed) /* never call the hook again after a failure */
        return LSE_EIO;
    const lse_status st = d->reduce(buf, n, d->user);
    if (st != LSE_OK)
        d->failed = 1;
    return st;
}

int lse_util_dist_parallel(const lse_util_dist *d)
{
    return d != NULL && d->reduce != NULL;
}

lse_status lse_util_sum(lse_util_dist *d, double *buf, size_t n,
                        const char *fn, lse_error *err)
{
    if (!lse_util_dist_parallel(d) || n == 0)
        return LSE_OK;
    const lse_status st = lse_util_dist_reduce(buf, n, d);
    if (st != LSE_OK)
        return lse_util_fail(err, st, fn,
                             "the reduction over %zu processes failed (%s)",
                             d->n_ranks, lse_strerror(st));
    return LSE_OK;
}

lse_status lse_util_xsum(lse_util_dist *d, lse_xsum *x, size_t n,
                         double *out, const char *fn, lse_error *err)
{
    if (!lse_util_dist_parallel(d)) {
        for (size_t i = 0; i < n; i++)
            out[i] = lse_xsum_round(&x[i]);
        return LSE_OK;
    }
    double *buf = malloc((n * LSE_XSUM_EXPORT + 1) * sizeof *buf);
    if (buf == NULL)
        return lse_util_fail(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < n; i++)
        lse_xsum_export(&x[i], buf + i * LSE_XSUM_EXPORT);
    lse_status st = lse_util_sum(d, buf, n * LSE_XSUM_EXPORT, fn, err);
    for (size_t i = 0; st == LSE_OK && i < n; i++) {
        if (lse_xsum_import(&x[i], buf + i * LSE_XSUM_EXPORT) != LSE_OK)
            st = lse_util_fail(err, LSE_EDOM, fn,
                               "the reduction hook did not sum the exact "
                               "accumulators");
        else
            out[i] = lse_xsum_round(&x[i]);
    }
    free(buf);
    return st;
}

lse_status lse_util_gather(lse_util_dist *d, const double *mine,
                           size_t m, double *all, const char *fn,
                           lse_error *err)
{
    const size_t n_ranks = d != NULL ? d->n_ranks : 1;
    const size_t rank = d != NULL ? d->rank : 0;
    for (size_t i = 0; i < n_ranks * m; i++)
        all[i] = 0.0;
    for (size_t j = 0; j < m; j++)
        all[rank * m + j] = mine[j];
    return lse_util_sum(d, all, n_ranks * m, fn, err);
}

lse_status lse_util_bcast(lse_util_dist *d, int owner, double *buf,
                          size_t n, const char *fn, lse_error *err)
{
    if (!lse_util_dist_parallel(d))
        return LSE_OK;
    if (!owner) /* x + 0 = x exactly: the sum is the owner's values */
        for (size_t i = 0; i < n; i++)
            buf[i] = 0.0;
    return lse_util_sum(d, buf, n, fn, err);
}

/* ------------------------------------------------------------------ */
/* k-means++ and Lloyd                                                 */

/* A row drawn with probability p_i / sum p over every process, p_i = w_i *
 * (use_d2 ? d2_i : 1); only rows with p_i > 0. The draw scans the per-
 * process totals in rank order, then the owner's rows, so one process gives
 * exactly the serial scan. Out: *n_pos rows with p_i > 0 (0: none, nothing
 * drawn), and row (d + 1): [global index, x row] of the drawn row on every
 * process. */
static lse_status draw(const gsl_matrix *x, const gsl_vector *w,
                       const gsl_vector *d2, int use_d2, gsl_rng *rng,
                       lse_util_dist *dist, size_t *n_pos, double *row)
{
    static const char fn[] = "k-means++";
    const size_t n = d2->size, d = x->size2;
    const size_t n_ranks = dist != NULL ? dist->n_ranks : 1;
    const size_t rank = dist != NULL ? dist->rank : 0;
    const size_t offset = dist != NULL ? dist->offset : 0;
    double total = 0.0, npos = 0.0, last = -1.0;
    for (size_t i = 0; i < n; i++) {
        const double p = weight_of(w, i) * (use_d2 ? gsl_vector_get(d2, i) : 1);
        if (p > 0.0) {
            total += p;
            last = (double)i;
            npos += 1.0;
        }
    }
    const double mine[3] = {total, npos, last};
    double *all = dist != NULL ? dist->tmp : (double[3]){0};
    lse_status st = lse_util_gather(dist, mine, 3, all, fn, NULL);
    if (st != LSE_OK)
        return st;
    double n_all = 0.0;
    for (size_t r = 0; r < n_ranks; r++)
        n_all += all[3 * r + 1];
    *n_pos = (size_t)n_all;
    if (*n_pos == 0)
        return LSE_OK;
    double grand = 0.0;
    for (size_t r = 0; r < n_ranks; r++)
        if (all[3 * r + 1] > 0.0)
            grand += all[3 * r];
    const double u = gsl_rng_uniform(rng) * grand;
    /* the process whose running total first exceeds u (round-off: the last
     * process with a candidate) and the running total before it */
    size_t owner = n_ranks, last_rank = 0;
    double before = 0.0, cum = 0.0;
    for (size_t r = 0; r < n_ranks; r++) {
        if (!(all[3 * r + 1] > 0.0))
            continue;
        last_rank = r;
        const double next = cum + all[3 * r];
        if (owner == n_ranks && u < next) {
            owner = r;
            before = cum;
        }
        cum = next;
    }
    int round_off = 0;
    if (owner == n_ranks) {
        owner = last_rank;
        round_off = 1;
    }
    size_t pick = (size_t)all[3 * owner + 2];
    if (rank == owner && !round_off) {
        double c = before;
        for (size_t i = 0; i < n; i++) {
            const double p =
                weight_of(w, i) * (use_d2 ? gsl_vector_get(d2, i) : 1);
            if (!(p > 0.0))
                continue;
            c += p;
            if (u < c) {
                pick = i;
                break;
            }
        }
    }
    if (rank == owner) {
        row[0] = (double)(offset + pick);
        for (size_t j = 0; j < d; j++)
            row[1 + j] = gsl_matrix_get(x, pick, j);
    }
    return lse_util_bcast(dist, rank == owner, row, d + 1, fn, NULL);
}

lse_status lse_util_kmeanspp(const gsl_matrix *x, const gsl_vector *w,
                             gsl_rng *rng, gsl_matrix *centers, gsl_vector *d2,
                             lse_util_dist *dist)
{
    const size_t n = x->size1, k = centers->size1, d = x->size2;
    if (n == 0 || d2->size != n || centers->size2 != d)
        return LSE_EDIM;
    double *row = malloc((d + 1) * sizeof *row);
    if (row == NULL)
        return LSE_ENOMEM;
    size_t n_pos;
    lse_status st = draw(x, w, d2, 0, rng, dist, &n_pos, row);
    if (st == LSE_OK && n_pos == 0)
        st = LSE_EINVAL;
    for (size_t c = 0; st == LSE_OK && c < k; c++) {
        if (c > 0) {
            st = draw(x, w, d2, 1, rng, dist, &n_pos, row);
            if (st == LSE_OK && n_pos == 0) /* every row sits on a center */
                st = draw(x, w, d2, 0, rng, dist, &n_pos, row);
            if (st != LSE_OK)
                break;
        }
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(centers, c, j, row[1 + j]);
        for (size_t i = 0; i < n; i++) {
            const double dist2 = lse_util_dist2(x, i, centers, c);
            if (c == 0 || dist2 < gsl_vector_get(d2, i))
                gsl_vector_set(d2, i, dist2);
        }
    }
    free(row);
    return st;
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

lse_status lse_util_lloyd(const gsl_matrix *x, const gsl_vector *w,
                          gsl_matrix *centers, size_t max_iter, size_t *labels,
                          gsl_vector *sums, size_t *n_iter,
                          lse_util_dist *dist)
{
    static const char fn[] = "Lloyd";
    const size_t n = x->size1, d = x->size2, k = centers->size1;
    /* acc: (k * d) center sums, then the count of changed labels */
    double *acc = malloc((k * d + 1) * sizeof *acc);
    if (acc == NULL)
        return LSE_ENOMEM;
    lse_util_nearest(x, centers, labels, NULL, 0);
    lse_status st = LSE_OK;
    size_t it = 0;
    for (; it < max_iter; it++) {
        gsl_vector_set_zero(sums);
        for (size_t i = 0; i < n; i++)
            *gsl_vector_ptr(sums, labels[i]) += weight_of(w, i);
        st = lse_util_sum(dist, sums->data, k, fn, NULL);
        if (st != LSE_OK)
            break;
        /* new centers: weighted means (a center without weight stays) */
        for (size_t i = 0; i < k * d; i++)
            acc[i] = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double s = gsl_vector_get(sums, labels[i]);
            if (!(s > 0.0))
                continue;
            const double f = weight_of(w, i) / s;
            const double *xi = gsl_matrix_const_ptr(x, i, 0);
            double *ci = acc + labels[i] * d;
            for (size_t j = 0; j < d; j++)
                ci[j] += f * xi[j];
        }
        st = lse_util_sum(dist, acc, k * d, fn, NULL);
        if (st != LSE_OK)
            break;
        for (size_t c = 0; c < k; c++)
            if (gsl_vector_get(sums, c) > 0.0)
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(centers, c, j, acc[c * d + j]);
        acc[0] = (double)lse_util_nearest(x, centers, labels, NULL, 1);
        st = lse_util_sum(dist, acc, 1, fn, NULL);
        if (st != LSE_OK)
            break;
        if (acc[0] == 0.0) {
            it++;
            break;
        }
    }
    free(acc);
    if (n_iter != NULL)
        *n_iter = it;
    return st;
}
