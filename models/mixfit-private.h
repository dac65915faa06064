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

/* Work ahead: a crew of nt threads for the calling thread (as
 * lse_gmm_par_begin; the lse_gmm_par_run calls until lse_gmm_bg_end use
 * it) whose helpers, whenever they have no batch to run, take tasks
 * task(ctx, i, tid), i = 0 .. n - 1, in order, each once. A task's log
 * messages are recorded and shown by lse_gmm_bg_collect, so a log handler
 * sees them where the caller collects them, in task order. While open, the
 * log goes through the recorder (live for the caller's own messages) and
 * GSL's error handler is off, as inside lse_gmm_par_run. A task runs on
 * the thread's background cache (lse_gmm_cache_ahead). NULL (nothing runs
 * ahead; the caller then runs its work itself) when nt < 2, n = 0, the
 * thread has a crew already, no helper can be started, or out of
 * memory. */
typedef struct lse_gmm_bg lse_gmm_bg;
lse_gmm_bg *lse_gmm_bg_begin(int nt, lse_gmm_par_task task, void *ctx,
                             size_t n);

/* Tasks first .. first + n - 1 done: the ones not started run now on up
 * to nt threads (lse_gmm_par_run), the ones a helper runs are waited for;
 * then their recorded messages are shown, in task order (progress calls
 * to o->progress). 1 on success; 0 (nothing done) for a range outside
 * b's tasks, b NULL, or out of memory. Call it once per task. */
int lse_gmm_bg_collect(lse_gmm_bg *b, size_t first, size_t n, int nt,
                       const lse_gmm_fit_opts *o);

/* End: no task is started any more, the ones running are waited for, the
 * messages of tasks never collected are dropped, and the crew ends. */
void lse_gmm_bg_end(lse_gmm_bg *b);

/* short runs lse_gmm_fit_emem took from the work ahead
 * (lse_gmm_emem_ahead_begin) on this thread so far (the tests) */
size_t gmm_ahead_taken(void);

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

/* switch the calling thread to its background cache (on = 1) or back to
 * its own (on = 0); returns the previous choice. Each has its own scopes. */
int lse_gmm_cache_ahead(int on);

#endif
