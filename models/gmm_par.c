/* Independent fits side by side (models/mixfit-private.h): emEM's runs
 * (models/mixfit.c) and split-and-merge EM's candidates (gmm_smem.c), on
 * the public API. Moved here from mixfit.c, unchanged, so that both use it
 * without depending on each other. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <gsl/gsl_errno.h>

#include <lsegraph/core.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>

#include "mixfit-private.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* threads of the runs, at most */
#define EMEM_MAX_THREADS 64

/*
 * The runs are independent fits (their own seed, start and options): they
 * run on up to lse_get_num_threads() threads (one process only: under
 * o->reduce every process must make the same calls in the same order),
 * and their outcomes are collected in run order by the caller, so the
 * result is the same for every thread count. Inside, the fits run on one
 * thread (no nested teams, lse_get_num_threads). Run 0 reports live; the
 * log messages and progress calls of the other runs are recorded and
 * replayed in run order after the loop, so a log handler or progress
 * callback sees the sequence of one thread and is never called from two
 * threads at once.
 */

/* a recorded log message (prog 0) or progress call (prog 1) */
typedef struct run_ev {
    int prog;
    lse_log_level level;
    size_t run, iter;
    double energy, change;
    char *msg;
} run_ev;

typedef struct run_rec {
    run_ev *ev;
    size_t n, cap;
} run_rec;

/* the record of the run this thread is fitting (NULL: live), and the log
 * handler rec_log forwards to */
static _Thread_local run_rec *rec_cur;
static lse_log_fn rec_fn;
static void *rec_user;
static int rec_depth;

static int rec_push(run_rec *r, const run_ev *e)
{
    if (r->n == r->cap) {
        const size_t cap = r->cap > 0 ? 2 * r->cap : 8;
        run_ev *v = realloc(r->ev, cap * sizeof *v);
        if (v == NULL)
            return 0;
        r->ev = v;
        r->cap = cap;
    }
    r->ev[r->n++] = *e;
    return 1;
}

/* the log handler while runs are side by side (live when out of memory) */
static void rec_log(lse_log_level level, const char *msg, void *user)
{
    (void)user;
    run_rec *r = rec_cur;
    if (r != NULL) {
        const size_t len = strlen(msg) + 1;
        run_ev e = {.prog = 0, .level = level, .msg = malloc(len)};
        if (e.msg != NULL) {
            memcpy(e.msg, msg, len);
            if (rec_push(r, &e))
                return;
            free(e.msg);
        }
    }
    if (rec_fn != NULL)
        rec_fn(level, msg, rec_user);
}

static void rec_progress(size_t run, size_t iter, double energy,
                         double change, void *user)
{
    const run_ev e = {.prog = 1, .run = run, .iter = iter, .energy = energy,
                      .change = change};
    (void)rec_push(user, &e); /* out of memory: a progress call lost */
}

/* route the log through rec_log (nested and concurrent calls: the first
 * begin installs it, the last end restores the handler) */
static void rec_begin(void)
{
#ifdef _OPENMP
#pragma omp critical(lse_emem_log)
#endif
    {
        if (rec_depth++ == 0) {
            lse_get_log_handler(&rec_fn, &rec_user);
            lse_set_log_handler(rec_log, NULL);
        }
    }
}

static void rec_end(void)
{
#ifdef _OPENMP
#pragma omp critical(lse_emem_log)
#endif
    {
        if (--rec_depth == 0)
            lse_set_log_handler(rec_fn, rec_user);
    }
}

/* replay r's events (progress to o->progress) and free them */
static void rec_replay(run_rec *r, const lse_gmm_fit_opts *o)
{
    lse_log_fn fn;
    void *user;
    lse_get_log_handler(&fn, &user);
    for (size_t i = 0; i < r->n; i++) {
        const run_ev *e = &r->ev[i];
        if (e->prog && o->progress != NULL)
            o->progress(e->run, e->iter, e->energy, e->change,
                        o->progress_user);
        else if (!e->prog && fn != NULL)
            fn(e->level, e->msg, user);
        free(e->msg);
    }
    free(r->ev);
    r->ev = NULL;
    r->n = r->cap = 0;
}


void lse_gmm_par_progress(lse_gmm_fit_opts *fo)
{
    if (fo->progress != NULL && rec_cur != NULL) {
        fo->progress = rec_progress;
        fo->progress_user = rec_cur;
    }
}

/* threads for n_tasks runs of emEM on m: 1 under o->reduce, and for
 * mclust's models (lse_gmm_new_model): their iterative M-steps start from
 * the working mixture's last parameters, so a run's result depends on the
 * run before it on the same mixture (measured: a different table from
 * lsefit gmm --covariance VEI,... on every 2-thread run) */
int lse_gmm_par_threads(const lse_gmm *m, const lse_gmm_fit_opts *o,
                        size_t n_tasks)
{
#ifdef _OPENMP
    if (o->reduce != NULL || n_tasks < 2 ||
        lse_gmm_cov_model(m) != LSE_COV_MODEL_NONE)
        return 1;
    int nt = lse_get_num_threads(); /* 1 inside a parallel region */
    if (nt > EMEM_MAX_THREADS)
        nt = EMEM_MAX_THREADS;
    return (size_t)nt < n_tasks ? nt : (int)n_tasks;
#else
    (void)m;
    (void)o;
    (void)n_tasks;
    return 1;
#endif
}

/* one thread of lse_gmm_par_run: takes the next run until none is left */
typedef struct par_worker {
    lse_gmm_par_task task;
    void *ctx;
    int nt, tid;
    size_t n_task;
    atomic_size_t *next;
    run_rec *recs;
} par_worker;

/* w's share of the runs: the next one until none is left */
static void par_loop(const par_worker *w)
{
    for (;;) {
        const size_t i = atomic_fetch_add(w->next, 1);
        if (i >= w->n_task)
            break;
        rec_cur = w->nt > 1 && i > 0 ? &w->recs[i] : NULL;
        w->task(w->ctx, i, w->tid);
        rec_cur = NULL;
    }
}

static void *par_worker_main(void *arg)
{
    const par_worker *w = arg;
    lse_gmm_cache_begin(); /* the thread's fits share their scratch */
#ifdef _OPENMP
    /* the fits of this thread on one thread: no OpenMP region of theirs
     * can be active (lse_get_num_threads is 1), so they start no team */
    const int levels = omp_get_max_active_levels();
    if (w->nt > 1)
        omp_set_max_active_levels(0);
#endif
    par_loop(w);
#ifdef _OPENMP
    if (w->nt > 1)
        omp_set_max_active_levels(levels);
#endif
    lse_gmm_cache_end();
    return NULL;
}

/*
 * Waiting on a crew: a thread that waits for the next batch, or for the
 * others to finish one, first watches the state it waits for for up to
 * LSE_SPIN_US microseconds (default LSE_CREW_SPIN_US) before it sleeps on
 * the condition variable. Between two batches of a fit chain there are
 * often only tens of microseconds of the caller's serial work, and waking
 * a sleeping thread on an idle core costs about as much again, more where
 * the core itself halted (a virtual machine's idle vCPU). The state it
 * watches is written under the crew's lock with atomic stores (PUT) and
 * read without it (PEEK); what it reads is then checked again under the
 * lock, so the spin only decides whether to sleep.
 */
#define LSE_CREW_SPIN_US 50
#define PEEK(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define PUT(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

static long spin_ns = -1; /* read once (crew_spin_init) */
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

static void crew_spin_init(void)
{
    long us = LSE_CREW_SPIN_US;
    const char *e = getenv("LSE_SPIN_US");
    if (e != NULL && *e != '\0') {
        char *end = NULL;
        const long v = strtol(e, &end, 10);
        if (end != e && *end == '\0' && v >= 0 && v <= 1000000)
            us = v;
    }
    spin_ns = 1000 * us;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* With mu held: wait on cv until woken, after spinning (mu released) for
 * up to spin_ns while ready(arg) is 0; returns with mu held, at once when
 * ready(arg) is 1 (the caller checks its condition again). Every change
 * ready() watches is made under mu, so its look under mu before sleeping
 * cannot miss a signal. */
static void crew_wait(pthread_cond_t *cv, pthread_mutex_t *mu,
                      int (*ready)(const void *), const void *arg)
{
    if (spin_ns > 0) {
        pthread_mutex_unlock(mu);
        const double t0 = now_ns();
        int ok = 0;
        for (unsigned it = 1; !(ok = ready(arg)); it++) {
            cpu_relax();
            if (it % 64 == 0 && now_ns() - t0 > (double)spin_ns)
                break;
        }
        pthread_mutex_lock(mu);
        /* under the lock again: what changed since the last look (a
         * signal sent meanwhile would be lost to a sleeper) */
        if (ok || ready(arg))
            return;
    }
    pthread_cond_wait(cv, mu);
}

/* A crew (lse_gmm_par_begin): helper t (1 .. n_help) waits for the next
 * call (gen), runs job[t] when t < job_nt, and reports it done (pending);
 * quit ends it. */
typedef struct par_crew {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned gen;
    int quit, depth, n_help, pending, job_nt;
    int blas; /* the caller's hold of OpenBLAS serial, for the crew's life */
    const par_worker *job;
    lse_gmm_bg *bg; /* work ahead, NULL: none */
    pthread_t th[EMEM_MAX_THREADS];
    int tid[EMEM_MAX_THREADS];
} par_crew;

/* Work ahead (lse_gmm_bg_begin): task i is QUEUED until a thread takes it,
 * AHEAD while a crew helper runs it, NOW when the caller took it, then
 * DONE. The states change under the crew's lock, except the caller's
 * QUEUED -> NOW -> DONE, which only it reads before lse_gmm_bg_collect
 * returns. */
enum { BG_QUEUED, BG_AHEAD, BG_NOW, BG_DONE };

struct lse_gmm_bg {
    par_crew *c;
    lse_gmm_par_task task;
    void *ctx;
    size_t n, next; /* next: no queued task below it */
    int stop;       /* no more tasks taken ahead */
    int running;    /* tasks the helpers run now */
    int *state;
    run_rec *recs;
    pthread_cond_t idle; /* a helper finished a task */
    gsl_error_handler_t *gsl_h;
};

/* the next task to run ahead into *i (under c->mu): 0 when none */
static int bg_take(lse_gmm_bg *b, size_t *i)
{
    if (b->stop)
        return 0;
    size_t next = b->next;
    while (next < b->n && b->state[next] != BG_QUEUED)
        next++;
    PUT(b->next, next);
    if (next == b->n)
        return 0;
    *i = next;
    PUT(b->next, next + 1);
    PUT(b->state[*i], BG_AHEAD);
    b->running++;
    return 1;
}

/* task i of b on this thread (a helper, or the caller through
 * lse_gmm_par_run), its log recorded, its fits on the thread's background
 * cache */
static void bg_exec(lse_gmm_bg *b, size_t i, int tid)
{
    run_rec *saved = rec_cur;
    rec_cur = &b->recs[i];
    const int cache = lse_gmm_cache_ahead(1);
    b->task(b->ctx, i, tid);
    lse_gmm_cache_ahead(cache);
    rec_cur = saved;
}

/* the crew of the calling thread, NULL without one */
static _Thread_local par_crew *crew_cur;

typedef struct crew_arg {
    par_crew *c;
    int tid;
} crew_arg;

/* Under c->mu: one task of the work ahead run on this thread (the lock
 * released meanwhile), when one is left: 1, else 0 */
static int bg_step(par_crew *c, int tid)
{
    size_t i;
    lse_gmm_bg *b = c->bg;
    if (b == NULL || !bg_take(b, &i))
        return 0;
    pthread_mutex_unlock(&c->mu);
    bg_exec(b, i, tid);
    pthread_mutex_lock(&c->mu);
    PUT(b->state[i], BG_DONE);
    b->running--;
    pthread_cond_broadcast(&b->idle);
    return 1;
}

/* 1 when c's work ahead may have a task left (read without the lock) */
static int bg_left(const par_crew *c)
{
    lse_gmm_bg *b = PEEK(((par_crew *)c)->bg);
    return b != NULL && !PEEK(b->stop) && PEEK(b->next) < b->n;
}

/* what the waits below watch */
typedef struct go_arg {
    const par_crew *c;
    unsigned seen;
} go_arg;

static int go_ready(const void *p) /* a helper: a batch, the end, a task */
{
    const go_arg *a = p;
    par_crew *c = (par_crew *)a->c;
    return PEEK(c->gen) != a->seen || PEEK(c->quit) || bg_left(c);
}

static int done_ready(const void *p) /* the caller: the helpers, a task */
{
    par_crew *c = (par_crew *)p;
    return PEEK(c->pending) == 0 || bg_left(c);
}

static void *crew_main(void *arg)
{
    par_crew *c = ((crew_arg *)arg)->c;
    const int tid = ((crew_arg *)arg)->tid;
    free(arg);
    /* OpenBLAS serial for the crew's life: every pass's own hold is then
     * this thread's alone (lse_blas_serial_enter) */
    const int blas = lse_blas_serial_enter();
    lse_gmm_cache_begin(); /* kept from call to call */
    lse_gmm_cache_ahead(1); /* and the work ahead's, from task to task */
    lse_gmm_cache_begin();
    lse_gmm_cache_ahead(0);
    unsigned seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        const go_arg ga = {.c = c, .seen = seen};
        while (c->gen == seen && !c->quit)
            if (!bg_step(c, tid)) /* work ahead, else wait */
                crew_wait(&c->go, &c->mu, go_ready, &ga);
        if (c->quit)
            break;
        seen = c->gen;
        const par_worker *w = tid < c->job_nt ? &c->job[tid] : NULL;
        pthread_mutex_unlock(&c->mu);
        if (w != NULL) {
#ifdef _OPENMP
            /* as par_worker_main; the caller restores the levels when
             * every helper is done */
            omp_set_max_active_levels(0);
#endif
            par_loop(w);
        }
        pthread_mutex_lock(&c->mu);
        PUT(c->pending, c->pending - 1);
        if (c->pending == 0)
            pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->mu);
    lse_gmm_cache_ahead(1);
    lse_gmm_cache_end();
    lse_gmm_cache_ahead(0);
    lse_gmm_cache_end();
    lse_blas_serial_leave(blas);
    return NULL;
}

void lse_gmm_par_begin(int nt)
{
    if (crew_cur != NULL) {
        crew_cur->depth++;
        return;
    }
    if (nt < 2)
        return;
    if (nt > EMEM_MAX_THREADS)
        nt = EMEM_MAX_THREADS;
    pthread_once(&spin_once, crew_spin_init);
    par_crew *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return;
    }
    pthread_cond_init(&c->go, NULL);
    pthread_cond_init(&c->done, NULL);
    c->depth = 1;
    for (int t = 1; t < nt; t++) {
        crew_arg *a = malloc(sizeof *a);
        if (a == NULL)
            break;
        *a = (crew_arg){.c = c, .tid = t};
        if (pthread_create(&c->th[t], NULL, crew_main, a) != 0) {
            free(a);
            break;
        }
        c->n_help = t;
    }
    c->blas = lse_blas_serial_enter();
    crew_cur = c;
}

void lse_gmm_par_end(void)
{
    par_crew *c = crew_cur;
    if (c == NULL || --c->depth > 0)
        return;
    pthread_mutex_lock(&c->mu);
    PUT(c->quit, 1);
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    for (int t = 1; t <= c->n_help; t++)
        pthread_join(c->th[t], NULL);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->mu);
    lse_blas_serial_leave(c->blas);
    free(c);
    crew_cur = NULL;
}

/* w[0 .. nt - 1] on the crew c (nt - 1 <= c->n_help) and this thread */
static void crew_run(par_crew *c, const par_worker *w, int nt)
{
#ifdef _OPENMP
    const int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(0);
#endif
    lse_gmm_cache_begin();
    pthread_mutex_lock(&c->mu);
    c->job = w;
    c->job_nt = nt;
    PUT(c->pending, c->n_help);
    PUT(c->gen, c->gen + 1);
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    par_loop(&w[0]);
    pthread_mutex_lock(&c->mu);
    while (c->pending > 0) /* waiting for a helper: work ahead meanwhile */
        if (!bg_step(c, 0))
            crew_wait(&c->done, &c->mu, done_ready, c);
    c->job = NULL;
    pthread_mutex_unlock(&c->mu);
    lse_gmm_cache_end();
#ifdef _OPENMP
    omp_set_max_active_levels(levels);
#endif
}

/* Runs 0..n_task on nt threads, each taking the next run when it is done
 * with one (the calling thread and nt - 1 POSIX threads: the calling
 * thread's crew when it has one of enough threads, lse_gmm_par_begin, else
 * started here).
 * POSIX threads, not an OpenMP team: OpenMP's idle threads spin before
 * they sleep, and each fit's OpenMP regions (inactive, one thread) nested
 * in an active team took the threads' shared locks: on a loaded 2-core
 * machine that spinning cost more CPU than the runs themselves
 * (docs/lsefit.md, "Speed of small fits"). A thread that cannot be
 * started leaves its runs to the others; without memory for the records
 * the runs go on one thread. */
void lse_gmm_par_run(lse_gmm_par_task task, void *ctx, size_t n_task, int nt,
                     const lse_gmm_fit_opts *o)
{
    atomic_size_t next;
    atomic_init(&next, 0);
    par_worker w[EMEM_MAX_THREADS];
    pthread_t th[EMEM_MAX_THREADS];
    int started[EMEM_MAX_THREADS];
    gsl_error_handler_t *h = NULL;
    if (nt > EMEM_MAX_THREADS)
        nt = EMEM_MAX_THREADS;
    if ((size_t)nt > n_task)
        nt = n_task > 0 ? (int)n_task : 1;
    run_rec *recs = nt > 1 ? calloc(n_task, sizeof *recs) : NULL;
    if (recs == NULL)
        nt = 1;
    if (nt > 1) { /* every fit's lse_gsl_quiet then sees the same handler */
        h = gsl_set_error_handler_off();
        rec_begin();
#ifdef _OPENMP
        /* OpenMP's threads of earlier regions (an explicit thread count)
         * would spin on the cores the runs need: end them (a later region
         * starts them again) */
        omp_pause_resource_all(omp_pause_soft);
#endif
    }
    par_crew *c = crew_cur;
    const int on_crew = nt > 1 && c != NULL && nt - 1 <= c->n_help;
    for (int t = 0; t < nt; t++) {
        w[t] = (par_worker){.task = task, .ctx = ctx, .nt = nt, .tid = t,
                            .n_task = n_task, .next = &next, .recs = recs};
        started[t] = !on_crew && t > 0 &&
                     pthread_create(&th[t], NULL, par_worker_main,
                                    &w[t]) == 0;
    }
    if (on_crew) {
        crew_run(c, w, nt);
    } else {
        par_worker_main(&w[0]);
        for (int t = 1; t < nt; t++)
            if (started[t])
                pthread_join(th[t], NULL);
    }
    if (nt > 1) {
        rec_end();
        gsl_set_error_handler(h);
        for (size_t i = 0; i < n_task; i++)
            rec_replay(&recs[i], o);
    }
    free(recs);
}


lse_gmm_bg *lse_gmm_bg_begin(int nt, lse_gmm_par_task task, void *ctx,
                             size_t n)
{
    if (nt < 2 || n == 0 || crew_cur != NULL)
        return NULL;
    lse_gmm_bg *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->state = calloc(n, sizeof *b->state); /* BG_QUEUED */
    b->recs = calloc(n, sizeof *b->recs);
    if (b->state == NULL || b->recs == NULL ||
        pthread_cond_init(&b->idle, NULL) != 0) {
        free(b->state);
        free(b->recs);
        free(b);
        return NULL;
    }
    lse_gmm_par_begin(nt);
    par_crew *c = crew_cur;
    if (c == NULL || c->n_help < 1) { /* no helper could be started */
        lse_gmm_par_end();
        pthread_cond_destroy(&b->idle);
        free(b->state);
        free(b->recs);
        free(b);
        return NULL;
    }
    b->c = c;
    b->task = task;
    b->ctx = ctx;
    b->n = n;
    /* as inside lse_gmm_par_run, for as long as tasks may run: the log
     * goes through the recorder, and GSL's handler stays off, so that
     * every lse_gsl_quiet sees the same one */
    b->gsl_h = gsl_set_error_handler_off();
    rec_begin();
    lse_gmm_cache_ahead(1); /* the caller's cache for the tasks it runs */
    lse_gmm_cache_begin();
    lse_gmm_cache_ahead(0);
    pthread_mutex_lock(&c->mu);
    PUT(c->bg, b);
    pthread_cond_broadcast(&c->go); /* the helpers start on it */
    pthread_mutex_unlock(&c->mu);
    return b;
}

typedef struct task_arg {
    lse_gmm_bg *b;
    size_t i;
} task_arg;

static int task_ready(const void *p) /* the caller: task i done, a task */
{
    const task_arg *a = p;
    return PEEK(a->b->state[a->i]) == BG_DONE || bg_left(a->b->c);
}

/* lse_gmm_bg_collect's tasks taken by the caller, as tasks of
 * lse_gmm_par_run */
typedef struct bg_now {
    lse_gmm_bg *b;
    const size_t *idx;
} bg_now;

static void bg_now_task(void *ctx, size_t j, int tid)
{
    const bg_now *w = ctx;
    bg_exec(w->b, w->idx[j], tid);
}

int lse_gmm_bg_collect(lse_gmm_bg *b, size_t first, size_t n, int nt,
                       const lse_gmm_fit_opts *o)
{
    if (b == NULL || first > b->n || n > b->n - first)
        return 0;
    size_t *idx = malloc((n > 0 ? n : 1) * sizeof *idx);
    if (idx == NULL)
        return 0;
    size_t m = 0;
    pthread_mutex_lock(&b->c->mu);
    for (size_t i = first; i < first + n; i++)
        if (b->state[i] == BG_QUEUED) {
            PUT(b->state[i], BG_NOW);
            idx[m++] = i;
        }
    pthread_mutex_unlock(&b->c->mu);
    if (m > 0) {
        bg_now w = {.b = b, .idx = idx};
        lse_gmm_par_run(bg_now_task, &w, m, nt, o);
    }
    pthread_mutex_lock(&b->c->mu);
    for (size_t j = 0; j < m; j++)
        PUT(b->state[idx[j]], BG_DONE);
    for (size_t i = first; i < first + n; i++) {
        const task_arg ta = {.b = b, .i = i};
        while (b->state[i] != BG_DONE) /* a helper's: work ahead meanwhile */
            if (!bg_step(b->c, 0))
                crew_wait(&b->idle, &b->c->mu, task_ready, &ta);
    }
    pthread_mutex_unlock(&b->c->mu);
    free(idx);
    for (size_t i = first; i < first + n; i++) /* in task order */
        rec_replay(&b->recs[i], o);
    return 1;
}

void lse_gmm_bg_end(lse_gmm_bg *b)
{
    if (b == NULL)
        return;
    par_crew *c = b->c;
    pthread_mutex_lock(&c->mu);
    PUT(b->stop, 1);
    while (b->running > 0)
        pthread_cond_wait(&b->idle, &c->mu);
    PUT(c->bg, NULL);
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < b->n; i++) { /* never collected: dropped */
        for (size_t e = 0; e < b->recs[i].n; e++)
            free(b->recs[i].ev[e].msg);
        free(b->recs[i].ev);
    }
    lse_gmm_cache_ahead(1);
    lse_gmm_cache_end();
    lse_gmm_cache_ahead(0);
    rec_end();
    gsl_set_error_handler(b->gsl_h);
    lse_gmm_par_end();
    pthread_cond_destroy(&b->idle);
    free(b->state);
    free(b->recs);
    free(b);
}

/* lse_gmm_fit_batch's fits as tasks of lse_gmm_par_run */
typedef struct batch_job {
    lse_gmm *const *m;
    const gsl_matrix *x;
    const lse_gmm_fit_opts *o;
    lse_status *status;
    lse_error *errs;
} batch_job;

static void batch_task(void *ctx, size_t i, int tid)
{
    const batch_job *j = ctx;
    lse_gmm_fit_opts fo = *j->o;
    lse_error e;
    (void)tid;
    lse_gmm_par_progress(&fo); /* recorded, unless this fit is live */
    j->status[i] = lse_gmm_fit(j->m[i], j->x, &fo, &e);
    if (j->errs != NULL)
        j->errs[i] = e;
}

lse_status lse_gmm_fit_batch(lse_gmm *const *m, size_t n, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o, lse_status *status,
                             lse_error *errs, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit_batch";
    if ((n > 0 && (m == NULL || status == NULL)) || x == NULL || o == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    int nt = n > 1 ? 2 : 1;
    for (size_t i = 0; i < n; i++) {
        if (m[i] == NULL)
            return lse_error_set(err, LSE_EFAULT, fn, "mixture %zu is NULL",
                                 i);
        for (size_t q = 0; q < i; q++)
            if (m[q] == m[i])
                return lse_error_set(err, LSE_EINVAL, fn,
                                     "mixtures %zu and %zu are the same", q,
                                     i);
        if (lse_gmm_par_threads(m[i], o, n) < 2)
            nt = 1; /* an mclust model, o->reduce, one thread */
    }
    if (nt > 1)
        nt = lse_gmm_par_threads(m[0], o, n);
    batch_job j = {.m = m, .x = x, .o = o, .status = status, .errs = errs};
    lse_gmm_cache_begin(); /* the fits of this thread share their scratch */
    lse_gmm_par_run(batch_task, &j, n, nt, o);
    lse_gmm_cache_end();
    return LSE_OK;
}

/* lse_gmm_loglik_batch's sums as tasks of lse_gmm_par_run (thread t
 * scores into ls[t]) */
typedef struct loglik_job {
    const lse_gmm *const *m;
    const gsl_matrix *x;
    const gsl_vector *w;
    gsl_vector **ls;
    double *ll;
} loglik_job;

static void loglik_task(void *ctx, size_t i, int tid)
{
    const loglik_job *j = ctx;
    gsl_vector *ls = j->ls[tid];
    const lse_status st = lse_gmm_score_samples(j->m[i], j->x, ls, NULL);
    double t = 0.0;
    for (size_t r = 0; st == LSE_OK && r < j->x->size1; r++)
        t += (j->w != NULL ? gsl_vector_get(j->w, r) : 1.0) *
             gsl_vector_get(ls, r);
    j->ll[i] = st == LSE_OK && isfinite(t) ? t : -INFINITY;
}

lse_status lse_gmm_loglik_batch(const lse_gmm *const *m, size_t n,
                                const gsl_matrix *x,
                                const gsl_vector *sample_weight, double *ll,
                                lse_error *err)
{
    static const char fn[] = "lse_gmm_loglik_batch";
    if ((n > 0 && (m == NULL || ll == NULL)) || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    for (size_t i = 0; i < n; i++)
        if (m[i] == NULL)
            return lse_error_set(err, LSE_EFAULT, fn, "mixture %zu is NULL",
                                 i);
    if (sample_weight != NULL && sample_weight->size != x->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%zu sample weights for %zu rows",
                             sample_weight->size, x->size1);
    if (n == 0)
        return LSE_OK;
    const lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    const int nt = lse_gmm_par_threads(m[0], &o, n);
    gsl_vector *ls[EMEM_MAX_THREADS] = {NULL};
    lse_status st = LSE_OK;
    for (int t = 0; t < nt; t++)
        if ((ls[t] = gsl_vector_alloc(x->size1 > 0 ? x->size1 : 1)) == NULL)
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK) {
        loglik_job j = {.m = m, .x = x, .w = sample_weight, .ls = ls,
                        .ll = ll};
        lse_gmm_cache_begin();
        lse_gmm_par_run(loglik_task, &j, n, nt, &o);
        lse_gmm_cache_end();
    }
    for (int t = 0; t < nt; t++)
        gsl_vector_free(ls[t]);
    return st;
}
