#ifndef LSEGRAPH_COMM_H
#define LSEGRAPH_COMM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <lsegraph/sim.h>
#include <lsegraph/solver.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file comm.h
 * @brief Collectives over the solver's reduction hook (lib/comm.c).
 *
 * A data set spread over n_ranks processes in rank order (docs/mpi.md):
 * this process holds rows [offset, offset + n_local) of n_total. The only
 * communication primitive is an lse_reduce_fn (a sum over the processes,
 * e.g. MPI_Allreduce with MPI_SUM); sum, exact sum, gather and broadcast
 * are built on it here, so a model or an MPI layer never writes its own.
 * Every collective calls the hook exactly once (none for one process), so
 * all processes must make the same sequence of calls; control flow may
 * depend only on reduced values. With reduce NULL (one process) every
 * collective is the identity and the arithmetic is that of serial code.
 */

/** @brief Most doubles one process contributes to lse_comm_gather when
 *  the output is the communicator's own scratch (tmp). */
#define LSE_COMM_GATHER_MAX 8

/** @brief This process's place in a data set spread over processes. */
typedef struct lse_comm {
    lse_reduce_fn reduce; /**< sum over processes, or NULL */
    void *user;           /**< passed to reduce */
    size_t rank, n_ranks;
    size_t n_local, offset, n_total; /**< rows here, before, everywhere */
    double *tmp; /**< (n_ranks * LSE_COMM_GATHER_MAX) gather scratch */
    int failed;  /**< a reduction failed: the computation must end */
} lse_comm;

/** @brief Set up @p c (zeroed first) for @p n_local rows on process
 *  @p rank of @p n_ranks (reduce NULL and n_ranks 0: one process). One
 *  collective (the row counts). LSE_EINVAL (rank >= n_ranks, several
 *  processes without reduce), LSE_ENOMEM, or the hook's status, with a
 *  message naming @p fn in @p err (may be NULL). */
LSE_API lse_status lse_comm_init(lse_comm *c, lse_reduce_fn reduce, void *user,
                                 size_t rank, size_t n_ranks, size_t n_local,
                                 const char *fn, lse_error *err);
/** @brief Free the scratch of @p c (NULL is fine); no collective. */
LSE_API void lse_comm_free(lse_comm *c);
/** @brief 1 when @p c (may be NULL) spans several processes. */
LSE_API int lse_comm_parallel(const lse_comm *c);
/** @brief An lse_reduce_fn for lse_solver_set_reduce (user = the
 *  lse_comm): calls the hook, records a failure in c->failed and never
 *  calls the hook again after one (LSE_EIO). */
LSE_API lse_status lse_comm_reduce(double *buf, size_t n, void *user);

/** @brief buf[0..n) = its sum over the processes (identity for one
 *  process or @p c NULL). */
LSE_API lse_status lse_comm_sum(lse_comm *c, double *buf, size_t n,
                                const char *fn, lse_error *err);
/** @brief out[0..n) = the sums of the exact accumulators x[0..n) over the
 *  processes, each rounded once to the nearest double: the same bits for
 *  any split of the terms into processes. One collective of
 *  n * LSE_XSUM_EXPORT doubles when parallel; x is normalized in place.
 *  LSE_ENOMEM, LSE_EDOM (the hook did not sum the exports) or the hook's
 *  status. */
LSE_API lse_status lse_comm_xsum(lse_comm *c, lse_xsum *x, size_t n,
                                 double *out, const char *fn, lse_error *err);
/** @brief all[r * m + j] = mine[j] of process r (all: n_ranks * m
 *  doubles; c->tmp may serve when m <= LSE_COMM_GATHER_MAX). */
LSE_API lse_status lse_comm_gather(lse_comm *c, const double *mine, size_t m,
                                   double *all, const char *fn, lse_error *err);
/** @brief buf[0..n) = the values of the one process that passes
 *  owner = 1 (the others' are ignored), exactly (x + 0 = x). */
LSE_API lse_status lse_comm_bcast(lse_comm *c, int owner, double *buf, size_t n,
                                  const char *fn, lse_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_COMM_H */
