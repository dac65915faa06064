/* The library leaves no OpenBLAS thread spinning (lib/threads.c,
 * blas_threads_quiet): OpenBLAS's pthreads build starts its workers in its
 * constructor, and an idle worker spins in sched_yield for 2^28 cycles
 * before it sleeps, a core burnt for the first ~0.08 s of every process.
 * Here the process sleeps 0.3 s right after start-up and must use almost
 * no CPU meanwhile. With LSE_BLAS_KEEP_THREADS=1 (the library leaves
 * OpenBLAS alone) the spin is measured too, as a check that the test can
 * see it: "spin" is printed, not asserted, since a loaded machine may not
 * give the spinning thread a core. Exit 77 (skip) without OpenBLAS's
 * pthreads pool of at least 2 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <lsegraph/lsegraph.h>

#ifdef LSE_HAVE_OPENBLAS
int openblas_get_parallel(void);
int openblas_get_num_threads(void);
#endif

static double cpu_seconds(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + 1e-6 * (double)r.ru_utime.tv_usec +
           (double)r.ru_stime.tv_sec + 1e-6 * (double)r.ru_stime.tv_usec;
}

int main(void)
{
#ifdef LSE_HAVE_OPENBLAS
    if (openblas_get_parallel() != 1 || openblas_get_num_threads() < 2) {
        printf("skip: no OpenBLAS pthreads pool of 2 or more threads\n");
        return 77;
    }
    const double c0 = cpu_seconds();
    const struct timespec nap = {0, 300000000L};
    nanosleep(&nap, NULL);
    const double used = cpu_seconds() - c0;
    const char *keep = getenv("LSE_BLAS_KEEP_THREADS");
    /* a library call, so the test links the library and its constructor */
    printf("%s: %.4f s of CPU while sleeping 0.3 s (%d library threads)\n",
           keep != NULL ? "kept OpenBLAS pool" : "quiet pool", used,
           lse_get_num_threads());
    if (keep != NULL)
        return 0;
    if (used > 0.02) {
        printf("FAIL: OpenBLAS's idle threads spun for %.4f s\n", used);
        return 1;
    }
    return 0;
#else
    printf("skip: built without OpenBLAS\n");
    return 77;
#endif
}
