/* Where a threaded run of the library spends its parallel regions
 * (docs/performance.md, "Two threads, session 11"): a shim preloaded in
 * front of libgomp that times, per OpenMP thread, the work inside each
 * region and the waits around it, without touching the library.
 *
 *   LD_PRELOAD=BUILD/bench/libgomp_profile.so PROGRAM ARGS...
 *
 * At exit it prints to stderr, per thread number, what all regions
 * (GOMP_parallel) together took:
 *   regions  regions the thread ran
 *   late_ms  from the region's call (the master's clock) to the thread
 *            entering its body: wake-up and start of the team
 *   work_ms  wall time in the body outside work-sharing barriers
 *   cpu_ms   thread CPU time (CLOCK_THREAD_CPUTIME_ID) of the same
 *   bar_ms   wall time in the barrier at the end of a work-shared loop
 *            (GOMP_loop_end): the imbalance of the dynamic schedule
 *   tail_ms  master only: from its body's end to the region's return (the
 *            join barrier)
 *   chunks   loop iterations handed to the thread (schedule(dynamic, 1):
 *            chunks of lib/term.c)
 * and the master's wall time inside regions (region_ms) and the number of
 * regions. Times use the thread's own clocks; a thread descheduled by
 * another process counts its wait in work_ms but not in cpu_ms. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

#define MAXT 16

typedef struct prof {
    long regions, chunks;
    double late, work, cpu, bar, tail;
} prof;

static prof pt[MAXT];
static long n_region;
static double region_wall;
static double region_t0; /* the current region's call, master's clock */

/* per region body (the compiler's outlined function): calls, master's wall
 * time, CPU time of all threads */
#define MAXF 32
typedef struct site {
    void (*fn)(void *);
    long calls;
    double wall, cpu;
} site;
static site sites[MAXF];

static site *site_of(void (*fn)(void *))
{
    for (int i = 0; i < MAXF; i++) {
        if (sites[i].fn == fn || sites[i].fn == NULL) {
            sites[i].fn = fn;
            return &sites[i];
        }
    }
    return &sites[MAXF - 1];
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int tid(void)
{
    const int t = omp_get_thread_num();
    return t >= 0 && t < MAXT ? t : MAXT - 1;
}

/* per thread, inside a body: barrier time and its CPU so far */
static __thread double bar_wall, bar_cpu;

/* libgomp's entry points (the ABI of gcc's -fopenmp code), wrapped here */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned n, unsigned fl);
_Bool GOMP_loop_nonmonotonic_dynamic_start(long s, long e, long i, long c,
                                           long *is, long *ie);
_Bool GOMP_loop_nonmonotonic_dynamic_next(long *is, long *ie);
void GOMP_loop_end(void);

typedef struct tramp {
    void (*fn)(void *);
    void *data;
    site *at;
} tramp;

static void body(void *arg)
{
    const tramp *tr = arg;
    const int t = tid();
    const double w0 = wall(), c0 = cpu();
    bar_wall = bar_cpu = 0.0;
    tr->fn(tr->data);
    const double w1 = wall(), c1 = cpu();
    prof *p = &pt[t];
    p->regions++;
    p->late += w0 - region_t0;
    p->work += (w1 - w0) - bar_wall;
    p->cpu += (c1 - c0) - bar_cpu;
    p->bar += bar_wall;
#pragma omp atomic
    tr->at->cpu += c1 - c0;
    if (t == 0)
        p->tail -= w1; /* + the region's return, below */
}

void GOMP_parallel(void (*fn)(void *), void *data, unsigned n, unsigned fl)
{
    static void (*real)(void (*)(void *), void *, unsigned, unsigned);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "GOMP_parallel");
    tramp tr = {fn, data, site_of(fn)};
    region_t0 = wall();
    real(body, &tr, n, fl);
    const double w1 = wall();
    pt[0].tail += w1;
    region_wall += w1 - region_t0;
    n_region++;
    tr.at->calls++;
    tr.at->wall += w1 - region_t0;
}

static void count_chunk(int got)
{
    if (got)
        pt[tid()].chunks++;
}

_Bool GOMP_loop_nonmonotonic_dynamic_start(long s, long e, long i, long c,
                                           long *is, long *ie)
{
    static _Bool (*real)(long, long, long, long, long *, long *);
    if (real == NULL)
        *(void **)&real =
            dlsym(RTLD_NEXT, "GOMP_loop_nonmonotonic_dynamic_start");
    const _Bool got = real(s, e, i, c, is, ie);
    count_chunk(got);
    return got;
}

_Bool GOMP_loop_nonmonotonic_dynamic_next(long *is, long *ie)
{
    static _Bool (*real)(long *, long *);
    if (real == NULL)
        *(void **)&real =
            dlsym(RTLD_NEXT, "GOMP_loop_nonmonotonic_dynamic_next");
    const _Bool got = real(is, ie);
    count_chunk(got);
    return got;
}

void GOMP_loop_end(void)
{
    static void (*real)(void);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "GOMP_loop_end");
    const double w0 = wall(), c0 = cpu();
    real();
    bar_wall += wall() - w0;
    bar_cpu += cpu() - c0;
}

__attribute__((destructor)) static void report(void)
{
    if (n_region == 0)
        return;
    fprintf(stderr, "gomp_profile: %ld regions, region_ms=%.1f\n", n_region,
            1e3 * region_wall);
    for (int i = 0; i < MAXF && sites[i].fn != NULL; i++) {
        Dl_info info = {0};
        char name[512] = "?";
        const void *at = *(void **)&sites[i].fn;
        /* a static body has no dynamic symbol: its file and offset
         * (nm FILE | grep the offset names it) */
        if (dladdr(at, &info) != 0 && info.dli_sname != NULL)
            snprintf(name, sizeof name, "%s", info.dli_sname);
        else if (info.dli_fname != NULL)
            snprintf(name, sizeof name, "%s+0x%lx", info.dli_fname,
                     (unsigned long)((const char *)at -
                                     (const char *)info.dli_fbase));
        fprintf(stderr,
                "gomp_profile: region %s calls=%ld wall_ms=%.1f "
                "cpu_ms=%.1f\n",
                name, sites[i].calls, 1e3 * sites[i].wall,
                1e3 * sites[i].cpu);
    }
    for (int t = 0; t < MAXT; t++) {
        const prof *p = &pt[t];
        if (p->regions == 0)
            continue;
        fprintf(stderr,
                "gomp_profile: thread %d regions=%ld late_ms=%.1f "
                "work_ms=%.1f cpu_ms=%.1f bar_ms=%.1f tail_ms=%.1f "
                "chunks=%ld\n",
                t, p->regions, 1e3 * p->late, 1e3 * p->work, 1e3 * p->cpu,
                1e3 * p->bar, t == 0 ? 1e3 * p->tail : 0.0, p->chunks);
    }
}
