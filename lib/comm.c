#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/comm.h>

#include "size-private.h"

/* Collectives over one reduction hook (include/lsegraph/comm.h). */

lse_status lse_comm_init(lse_comm *c, lse_reduce_fn reduce, void *user,
                         size_t rank, size_t n_ranks, size_t n_local,
                         const char *fn, lse_error *err)
{
    memset(c, 0, sizeof *c);
    if (reduce == NULL && n_ranks == 0) /* zeroed options: one process */
        n_ranks = 1;
    if (n_ranks == 0 || rank >= n_ranks)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "process %zu of %zu (need rank < n_ranks)", rank,
                             n_ranks);
    if (reduce == NULL && n_ranks > 1)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%zu processes need a reduction hook", n_ranks);
    c->reduce = reduce;
    c->user = user;
    c->rank = rank;
    c->n_ranks = n_ranks;
    c->n_local = n_local;
    if (lse_size_array_overflows(n_ranks, LSE_COMM_GATHER_MAX,
                                 sizeof *c->tmp))
        return lse_error_set(err, LSE_ENOMEM, fn,
                             "%zu processes x %d gathered values exceed the "
                             "address space",
                             n_ranks, (int)LSE_COMM_GATHER_MAX);
    c->tmp = calloc(n_ranks * LSE_COMM_GATHER_MAX, sizeof *c->tmp);
    if (c->tmp == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    const double mine = (double)n_local;
    double *counts = malloc(n_ranks * sizeof *counts);
    if (counts == NULL) {
        lse_comm_free(c);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    const lse_status st = lse_comm_gather(c, &mine, 1, counts, fn, err);
    if (st == LSE_OK) {
        for (size_t r = 0; r < n_ranks; r++) {
            const size_t cnt = (size_t)counts[r];
            if (r < rank)
                c->offset += cnt;
            c->n_total += cnt;
        }
    }
    free(counts);
    if (st != LSE_OK)
        lse_comm_free(c);
    return st;
}

void lse_comm_free(lse_comm *c)
{
    if (c == NULL)
        return;
    free(c->tmp);
    c->tmp = NULL;
}

lse_status lse_comm_reduce(double *buf, size_t n, void *user)
{
    lse_comm *c = user;
    if (c->failed) /* never call the hook again after a failure */
        return LSE_EIO;
    const lse_status st = c->reduce(buf, n, c->user);
    if (st != LSE_OK)
        c->failed = 1;
    return st;
}

int lse_comm_parallel(const lse_comm *c)
{
    return c != NULL && c->reduce != NULL;
}

lse_status lse_comm_sum(lse_comm *c, double *buf, size_t n, const char *fn,
                        lse_error *err)
{
    if (!lse_comm_parallel(c) || n == 0)
        return LSE_OK;
    const lse_status st = lse_comm_reduce(buf, n, c);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn,
                             "the reduction over %zu processes failed (%s)",
                             c->n_ranks, lse_strerror(st));
    return LSE_OK;
}

lse_status lse_comm_xsum(lse_comm *c, lse_xsum *x, size_t n, double *out,
                         const char *fn, lse_error *err)
{
    if (!lse_comm_parallel(c)) {
        for (size_t i = 0; i < n; i++)
            out[i] = lse_xsum_round(&x[i]);
        return LSE_OK;
    }
    if (n > (SIZE_MAX - 1) / LSE_XSUM_EXPORT / sizeof(double))
        return lse_error_set(err, LSE_ENOMEM, fn, "%zu sums overflow", n);
    double *buf = malloc((n * LSE_XSUM_EXPORT + 1) * sizeof *buf);
    if (buf == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < n; i++)
        lse_xsum_export(&x[i], buf + i * LSE_XSUM_EXPORT);
    lse_status st = lse_comm_sum(c, buf, n * LSE_XSUM_EXPORT, fn, err);
    for (size_t i = 0; st == LSE_OK && i < n; i++) {
        if (lse_xsum_import(&x[i], buf + i * LSE_XSUM_EXPORT) != LSE_OK)
            st = lse_error_set(err, LSE_EDOM, fn,
                               "the reduction hook did not sum the exact "
                               "accumulators");
        else
            out[i] = lse_xsum_round(&x[i]);
    }
    free(buf);
    return st;
}

lse_status lse_comm_gather(lse_comm *c, const double *mine, size_t m,
                           double *all, const char *fn, lse_error *err)
{
    const size_t n_ranks = c != NULL ? c->n_ranks : 1;
    const size_t rank = c != NULL ? c->rank : 0;
    for (size_t i = 0; i < n_ranks * m; i++)
        all[i] = 0.0;
    for (size_t j = 0; j < m; j++)
        all[rank * m + j] = mine[j];
    return lse_comm_sum(c, all, n_ranks * m, fn, err);
}

lse_status lse_comm_bcast(lse_comm *c, int owner, double *buf, size_t n,
                          const char *fn, lse_error *err)
{
    if (!lse_comm_parallel(c))
        return LSE_OK;
    if (!owner) /* x + 0 = x exactly: the sum is the owner's values */
        for (size_t i = 0; i < n; i++)
            buf[i] = 0.0;
    return lse_comm_sum(c, buf, n, fn, err);
}
