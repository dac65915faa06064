#ifndef LSEGRAPH_MODELS_MIXFIT_PRIVATE_H
#define LSEGRAPH_MODELS_MIXFIT_PRIVATE_H

/*
 * Independent fits side by side (models/gmm_par.c), shared by emEM
 * (models/mixfit.c) and split-and-merge EM (models/gmm_smem.c); never
 * installed.
 */

#include <stddef.h>

#include <lsegraph/models/gmm.h>

/* run i of lse_gmm_par_run on thread tid (0 .. nt - 1) */
typedef void (*lse_gmm_par_task)(void *ctx, size_t i, int tid);

/* threads for n_tasks independent fits of m's kind: 1 under o->reduce
 * (every process must make the same calls in the same order), for mclust's
 * models (their iterative M-steps start from the mixture's last
 * parameters) and with fewer than two tasks; else lse_get_num_threads()
 * (1 inside a parallel region), at most n_tasks */
int lse_gmm_par_threads(const lse_gmm *m, const lse_gmm_fit_opts *o,
                        size_t n_tasks);

/* task(ctx, i, tid) for i = 0 .. n_task - 1 on nt threads, each taking the
 * next i when done with one. Run 0 reports live; the log messages of
 * the others are recorded and replayed in run order after the last, so a log
 * handler sees what one thread would have shown and is never called from
 * two threads at once. A task must write only its own outputs. */
void lse_gmm_par_run(lse_gmm_par_task task, void *ctx, size_t n_task, int nt,
                     const lse_gmm_fit_opts *o);

/* A crew of the calling thread for the lse_gmm_par_run calls until the
 * matching end: nt - 1 POSIX threads that live across the calls and keep
 * their fit cache scopes open between them (a thread started per call
 * began each call with a cold cache). Calls of up to nt threads from this
 * thread use the crew; others, and calls from other threads, start their
 * own threads as without one. Nested begins share the outermost crew;
 * nt < 2 or a thread that cannot be started leaves the calls as they
 * were. The results are the same bits with or without a crew. */
void lse_gmm_par_begin(int nt);
void lse_gmm_par_end(void);

/* inside a task: fo's progress callback recorded for replay (a run that
 * is not live), else left as it is */
void lse_gmm_par_progress(lse_gmm_fit_opts *fo);

/* A scope of the calling thread in which lse_gmm_fit and the queries keep
 * their graph and scratch for the next call on the same data and shape
 * (models/gmm_cache.c; the same bits as building them anew). Scopes nest;
 * the outermost end frees what is kept. lse_gmm_par_run opens one on each
 * of its threads. LSE_GMM_NO_REUSE=1 (read when the outermost opens)
 * keeps nothing. */
void lse_gmm_cache_begin(void);
void lse_gmm_cache_end(void);

#endif
