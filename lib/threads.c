#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels-private.h"
#include "threads-private.h"

/* Thread count of the batched kernels (docs/performance.md). */

#ifdef LSE_HAVE_OPENBLAS
/* OpenBLAS extensions (its cblas.h declares them, but that header clashes
 * with gsl_cblas.h). */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char *openblas_get_corename(void);
#if LSE_HAVE_AVX2_PATH
/* Exported by OpenBLAS builds with DYNAMIC_ARCH (Debian's) only, hence
 * weak: NULL where they do not exist. */
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
#endif
/* OpenBLAS's own constructor (driver/others/memory.c), which returns at
 * once when it has run; weak: NULL where it is not exported. */
void gotoblas_init(void) __attribute__((weak));

/* OpenBLAS initialised before the constructors below look at it. With the
 * shared libopenblas (a dependency) it is: its constructor ran first. In a
 * static link (lsefit, tools/meson.build) the constructors run in link
 * order, the library's objects before OpenBLAS's, so they call it. */
static void blas_ready(void)
{
    if (gotoblas_init != NULL)
        gotoblas_init();
}
#endif

#if defined(LSE_HAVE_OPENBLAS) && LSE_HAVE_AVX2_PATH
/* OpenBLAS's kernel sets without AVX2 (driver/others/dynamic.c names): the
 * ones it falls back to on a CPU it does not recognise. */
static int core_pre_avx2(const char *name)
{
    static const char *const old[] = {
        "Katmai",     "Coppermine",   "Northwood", "Prescott",  "Banias",
        "Atom",       "Core2",        "Penryn",    "Dunnington", "Nehalem",
        "Athlon",     "Opteron_SSE3", "Opteron",   "Barcelona", "Nano",
        "Sandybridge", "Bobcat",      "Bulldozer", "Piledriver"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        if (strcmp(name, old[i]) == 0)
            return 1;
    return 0;
}

/* Once, when the library is loaded (OpenBLAS initialised first,
 * blas_ready): if OpenBLAS runs one of its pre-AVX2 kernel sets on a CPU
 * with AVX2 and FMA -- its fallback on a CPU model it does not know, or a
 * forced OPENBLAS_CORETYPE -- switch it to its Haswell (AVX2 + FMA) kernels
 * through its own start-up path (the variable it reads, then its
 * re-initialisation), and put the environment back. Nothing runs in
 * OpenBLAS yet at this point. LSE_BLAS_KEEP_CORE=1 keeps OpenBLAS's choice.
 * docs/design-notes.md, "OpenBLAS's kernel set". */
__attribute__((constructor)) static void blas_core_check(void)
{
    if (gotoblas_dynamic_init == NULL || gotoblas_dynamic_quit == NULL ||
        lse_cpu_env_off("LSE_BLAS_KEEP_CORE"))
        return;
    blas_ready();
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return;
    const char *name = openblas_get_corename();
    if (name == NULL || !core_pre_avx2(name))
        return;
    const char *env = getenv("OPENBLAS_CORETYPE");
    char saved[64];
    const int had = env != NULL;
    if (had && strlen(env) >= sizeof saved)
        return;
    if (had)
        strcpy(saved, env);
    if (setenv("OPENBLAS_CORETYPE", "Haswell", 1) != 0)
        return;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    if (had)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
}
#endif

#ifdef LSE_HAVE_OPENBLAS
/* OpenBLAS's thread pool (driver/others/blas_server.c and openblas_env.c),
 * exported by its builds; weak: NULL where they do not exist. */
int openblas_get_parallel(void) __attribute__((weak));
int blas_thread_init(void) __attribute__((weak));
int blas_thread_shutdown_(void) __attribute__((weak));
void openblas_read_env(void) __attribute__((weak));

/* Once, when the library is loaded: OpenBLAS's pthreads build starts its
 * worker threads in its own constructor, and a worker without work spins
 * in sched_yield for 2^28 cycles (OPENBLAS_THREAD_TIMEOUT's default, about
 * 0.08 s here) before it sleeps -- at start-up, and after every job. The
 * library gives OpenBLAS no job (every BLAS call of it runs serial,
 * lse_blas_serial_enter), so that spin is all OpenBLAS's threads ever do in
 * a library run: a core burnt for the first 0.08 s of every process, beside
 * the library's own threads (a fifth of the CPU of `lsefit gmm` on Iris,
 * docs/performance.md). So the pool is restarted through OpenBLAS's own
 * start-up path with a timeout of 2^20 cycles (about 0.3 ms), and the
 * environment is put back. A user's OPENBLAS_THREAD_TIMEOUT is left alone,
 * and so is OpenBLAS with LSE_BLAS_KEEP_THREADS=1. */
__attribute__((constructor)) static void blas_threads_quiet(void)
{
    blas_ready();
    if (openblas_get_parallel == NULL || blas_thread_init == NULL ||
        blas_thread_shutdown_ == NULL || openblas_read_env == NULL ||
        openblas_get_parallel() != 1 || /* 1: OpenBLAS's own pthreads */
        openblas_get_num_threads() <= 1 ||
        getenv("OPENBLAS_THREAD_TIMEOUT") != NULL ||
        lse_cpu_env_off("LSE_BLAS_KEEP_THREADS"))
        return;
    if (setenv("OPENBLAS_THREAD_TIMEOUT", "20", 1) != 0)
        return;
    openblas_read_env();
    blas_thread_shutdown_();
    blas_thread_init();
    unsetenv("OPENBLAS_THREAD_TIMEOUT");
    openblas_read_env(); /* the pool keeps its timeout */
}
#endif

/* 0: the default (LSE_NUM_THREADS, else OpenMP's). */
static int n_threads_set = 0;

#ifdef _OPENMP
static int env_threads(void)
{
    const char *s = getenv("LSE_NUM_THREADS");
    if (s == NULL || *s == '\0')
        return 0;
    char *end = NULL;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 1 || v > 4096)
        return 0;
    return (int)v;
}

static int default_threads(void)
{
    const int e = env_threads();
    if (e > 0)
        return e;
    const int m = omp_get_max_threads();
    return m > 0 ? m : 1;
}
#endif

void lse_set_num_threads(int n) { n_threads_set = n > 0 ? n : 0; }

/* 1 where no new OpenMP region could be active: inside an active region
 * (nested regions off, OpenMP's default), or in a thread that turned them
 * off (omp_set_max_active_levels(0): emEM's parallel runs,
 * models/mixfit.c). The library starts no nested teams. */
int lse_get_num_threads(void)
{
#ifdef _OPENMP
    if (omp_get_active_level() >= omp_get_max_active_levels())
        return 1;
    return n_threads_set > 0 ? n_threads_set : default_threads();
#else
    return 1;
#endif
}

int lse_threads_for(size_t n_tasks)
{
    const int n = lse_get_num_threads();
    if (n_tasks < 1)
        return 1;
    return (size_t)n < n_tasks ? n : (int)n_tasks;
}

/* Work (rows x columns x (1 + d)^2, about the flops of one pass of a
 * Gaussian term with d columns) below which a pass runs on one thread,
 * whatever the thread count: waking a second thread costs microseconds on
 * an idle machine and up to a scheduler time slice on a busy one, more than
 * such a pass takes (docs/performance.md, "Round two"). An explicit count
 * used to be honoured at any size, and `lsefit --threads 2` beside another
 * busy process then spent 16 s on fits that take 0.3 s (every small pass
 * waited for the descheduled thread). lse_set_thread_min_work changes it. */
#define LSE_THREADS_MIN_WORK 1048576.0

static double thread_min_work = LSE_THREADS_MIN_WORK;

void lse_set_thread_min_work(double work)
{
    thread_min_work = work >= 0.0 ? work : LSE_THREADS_MIN_WORK; /* NaN too */
}

double lse_get_thread_min_work(void) { return thread_min_work; }

int lse_threads_for_work(size_t n_tasks, double work)
{
    if (!(work >= thread_min_work)) /* also for a NaN estimate */
        return 1;
    return lse_threads_for(n_tasks);
}

/* Doubles below which a sum of per-chunk buffers runs on one thread even
 * when lse_set_thread_min_work lowered the threshold of the passes (as the
 * tests do): such a sum takes some tens of microseconds (the 66 000
 * statistics of the c/diag benchmark, 16 chunks), while starting a region
 * must wait for the other thread, which on a loaded machine may have been
 * descheduled -- 1.6 ms per iteration of c/diag on 2 threads
 * (docs/performance.md, "Two threads, session 11"). Each entry is summed
 * by one thread in chunk order either way. */
#define LSE_THREADS_MIN_SUM 262144.0

int lse_threads_for_sum(size_t n_tasks, double n_doubles)
{
    if (!(n_doubles >= LSE_THREADS_MIN_SUM)) /* also for a NaN estimate */
        return 1;
    return lse_threads_for_work(n_tasks, n_doubles);
}

int lse_threads_procs(void)
{
#ifdef _OPENMP
    const int p = omp_get_num_procs();
    return p > 0 ? p : 1;
#else
    return 1;
#endif
}

/* Nested begin/end pairs, also from concurrent threads (fits running side
 * by side, models/mixfit.c): the first begin makes OpenBLAS serial and the
 * last end restores it, so no fit sees OpenBLAS threaded while another is
 * inside its pair. */
#ifdef LSE_HAVE_OPENBLAS
static int blas_depth = 0, blas_saved = 1;
/* this thread's pairs: only its outermost takes the lock (a pass inside a
 * hold of its thread, e.g. a crew thread's, touches nothing shared) */
static _Thread_local int blas_tl_depth = 0;
#endif

int lse_blas_serial_begin(int nt)
{
    /* also for nt == 1: OpenBLAS's threaded dgemm does not round like its
     * serial one, so a block must never see a thread-dependent BLAS */
    (void)nt;
#ifdef LSE_HAVE_OPENBLAS
    if (blas_tl_depth++ > 0) /* held by this thread already */
        return 1;
#ifdef _OPENMP
#pragma omp critical(lse_blas_serial)
#endif
    {
        if (blas_depth++ == 0) {
            blas_saved = openblas_get_num_threads();
            if (blas_saved != 1)
                openblas_set_num_threads(1);
        }
    }
    return 1;
#else
    return 0;
#endif
}

void lse_blas_serial_end(int saved)
{
#ifdef LSE_HAVE_OPENBLAS
    if (saved == 0 || --blas_tl_depth > 0)
        return;
#ifdef _OPENMP
#pragma omp critical(lse_blas_serial)
#endif
    {
        if (--blas_depth == 0 && blas_saved > 1)
            openblas_set_num_threads(blas_saved);
    }
#else
    (void)saved;
#endif
}

int lse_blas_serial_enter(void) { return lse_blas_serial_begin(1); }

void lse_blas_serial_leave(int held) { lse_blas_serial_end(held); }
