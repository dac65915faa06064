#ifndef LSEGRAPH_THREADS_PRIVATE_H
#define LSEGRAPH_THREADS_PRIVATE_H

#include "graph-private.h"

/*
 * Threads and the chunked evaluation of LSE terms (lib/threads.c,
 * lib/term.c); never installed. docs/performance.md explains the scheme:
 * the child rows of a term are split into a fixed number of chunks that
 * depends only on the shapes (never on the thread count); each chunk
 * accumulates its energy, parent/parameter gradients and M-step statistics
 * into its own buffer, and the chunks are summed in chunk order, so every
 * thread count gives bit-identical results.
 */

/* Threads to use for n_tasks independent tasks: min(lse_get_num_threads(),
 * n_tasks), at least 1 (1 without OpenMP). */
int lse_threads_for(size_t n_tasks);

/* lse_threads_for for tasks that together do about @p work flops: 1 when
 * the thread count is the default (neither lse_set_num_threads nor
 * LSE_NUM_THREADS chose one) and the work is too small to gain from a
 * second thread; an explicit count is always honoured. The chunks do not
 * depend on it, so neither do the results. */
int lse_threads_for_work(size_t n_tasks, double work);

/* lse_threads_for_work for a sum of @p n_doubles doubles split into
 * n_tasks slices: 1 below a floor that holds also for an explicit thread
 * count (a region costs more than such a sum gains). */
int lse_threads_for_sum(size_t n_tasks, double n_doubles);

/* Processors available (omp_get_num_procs), at least 1. */
int lse_threads_procs(void);

/* Around a parallel region of nt threads (also nt = 1): make BLAS
 * single-threaded and restore it afterwards; begin returns the value to
 * pass to end. OpenBLAS would otherwise start its own threads inside ours,
 * and its threaded dgemm does not round like its serial one, which would
 * make results depend on the thread count. Pairs may nest and run in
 * concurrent threads: OpenBLAS is serial from the first begin to the last
 * end. */
int lse_blas_serial_begin(int nt);
void lse_blas_serial_end(int saved);

/* What lse_term_run does with each block of child rows. */
enum {
    LSE_RUN_SCORE = 1u << 0,   /* S = sim(block), masks, finiteness check */
    LSE_RUN_SOFTMAX = 1u << 1, /* softmax rows, row_lse, energy */
    LSE_RUN_STATS = 1u << 2,   /* M-step statistics from the softmax */
    LSE_RUN_GRAD = 1u << 3     /* G = -w A, similarity gradients */
};

/* Number of chunks of an LSE term (>= 1, fixed at creation). */
size_t lse_term_n_chunk(const lse_term *t);

/* Run the blocks of an LSE term with @p flags, in parallel over chunks.
 * STATS needs acc: n_chunk arrays of @p stride doubles (chunk c at
 * acc + c * stride), zeroed here; the caller sums them in chunk order.
 * Without SOFTMAX, STATS and GRAD read the kept softmax t->a (dense terms).
 * Energy (with SOFTMAX) goes to t->energy; gradients are added to the node
 * grads. Errors are recorded on the graph as lse_graph_energy would. */
lse_status lse_term_run(lse_term *t, unsigned flags, double *acc,
                        size_t stride);

/* Make lse_term_eval (called by lse_graph_energy without gradients) also
 * accumulate M-step statistics into @p acc (as lse_term_run); NULL turns
 * it off. Used by the EM solver to fuse its E-step with the statistics. */
void lse_term_set_stats_sink(lse_term *t, double *acc, size_t stride);

#endif /* LSEGRAPH_THREADS_PRIVATE_H */
