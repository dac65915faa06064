#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "threads-private.h"

/* Thread count of the batched kernels (docs/performance.md). */

#ifdef LSE_HAVE_OPENBLAS
/* OpenBLAS extensions (its cblas.h declares them, but that header clashes
 * with gsl_cblas.h). */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
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

int lse_get_num_threads(void)
{
#ifdef _OPENMP
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

int lse_threads_procs(void)
{
#ifdef _OPENMP
    const int p = omp_get_num_procs();
    return p > 0 ? p : 1;
#else
    return 1;
#endif
}

int lse_blas_serial_begin(int nt)
{
    /* also for nt == 1: OpenBLAS's threaded dgemm does not round like its
     * serial one, so a block must never see a thread-dependent BLAS */
    (void)nt;
#ifdef LSE_HAVE_OPENBLAS
    const int saved = openblas_get_num_threads();
    if (saved != 1)
        openblas_set_num_threads(1);
    return saved;
#else
    return 0;
#endif
}

void lse_blas_serial_end(int saved)
{
#ifdef LSE_HAVE_OPENBLAS
    if (saved > 1)
        openblas_set_num_threads(saved);
#else
    (void)saved;
#endif
}
