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

/* Once, when the library is loaded (OpenBLAS, a dependency, has initialised
 * itself already): if OpenBLAS runs one of its pre-AVX2 kernel sets on a CPU
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
 * Gaussian term with d columns) below which the default thread count is
 * 1: waking a second thread costs microseconds on an idle machine and up
 * to a scheduler time slice on a busy one, more than such a pass takes
 * (docs/performance.md, "Round two"). */
#define LSE_THREADS_MIN_WORK 1048576.0

int lse_threads_for_work(size_t n_tasks, double work)
{
#ifdef _OPENMP
    if (n_threads_set == 0 && env_threads() == 0 &&
        !(work >= LSE_THREADS_MIN_WORK)) /* also for a NaN estimate */
        return 1;
#else
    (void)work;
#endif
    return lse_threads_for(n_tasks);
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
#endif

int lse_blas_serial_begin(int nt)
{
    /* also for nt == 1: OpenBLAS's threaded dgemm does not round like its
     * serial one, so a block must never see a thread-dependent BLAS */
    (void)nt;
#ifdef LSE_HAVE_OPENBLAS
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
    if (saved == 0)
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
