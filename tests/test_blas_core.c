/* OpenBLAS's kernel set (lib/threads.c, docs/design-notes.md): run with
 * OPENBLAS_CORETYPE=Prescott, the SSE3 kernels OpenBLAS falls back to on a
 * CPU model it does not know. On a CPU with AVX2 and FMA the library must
 * have switched OpenBLAS to its Haswell kernels when it was loaded and put
 * the environment back; with LSE_BLAS_KEEP_CORE=1 it must have left
 * OpenBLAS alone. A dgemm must still compute the product. Exit 77 (skip)
 * without OpenBLAS, on other CPUs or when the environment is not set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/lsegraph.h>

#ifdef LSE_HAVE_OPENBLAS
char *openblas_get_corename(void);
#endif

int main(void)
{
#if defined(LSE_HAVE_OPENBLAS) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
    (void)lse_get_num_threads(); /* the library is loaded and initialised */
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (env == NULL || strcmp(env, "Prescott") != 0) {
        printf("skip: run with OPENBLAS_CORETYPE=Prescott\n");
        return 77;
    }
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("skip: no AVX2 + FMA, Prescott is right here\n");
        return 77;
    }
    const char *keep = getenv("LSE_BLAS_KEEP_CORE");
    const int kept = keep != NULL && strcmp(keep, "1") == 0;
    const char *core = openblas_get_corename();
    const char *want = kept ? "Prescott" : "Haswell";
    int fail = 0;
    if (core == NULL || strcmp(core, want) != 0) {
        printf("FAIL: OpenBLAS core %s, expected %s\n", core ? core : "(null)",
               want);
        fail = 1;
    }
    /* the environment is the user's again */
    env = getenv("OPENBLAS_CORETYPE");
    if (env == NULL || strcmp(env, "Prescott") != 0) {
        printf("FAIL: OPENBLAS_CORETYPE not restored (%s)\n",
               env ? env : "unset");
        fail = 1;
    }
    /* the switched kernels compute: integer-valued entries, exact sums */
    gsl_matrix *a = gsl_matrix_alloc(37, 29), *b = gsl_matrix_alloc(29, 41);
    gsl_matrix *c = gsl_matrix_alloc(37, 41);
    if (a == NULL || b == NULL || c == NULL)
        return 1;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            gsl_matrix_set(a, i, j, (double)((i * 7 + j * 3) % 11) - 5.0);
    for (size_t i = 0; i < b->size1; i++)
        for (size_t j = 0; j < b->size2; j++)
            gsl_matrix_set(b, i, j, (double)((i * 5 + j * 2) % 13) - 6.0);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, a, b, 0.0, c);
    for (size_t i = 0; i < c->size1; i++)
        for (size_t j = 0; j < c->size2; j++) {
            double s = 0.0;
            for (size_t p = 0; p < a->size2; p++)
                s += gsl_matrix_get(a, i, p) * gsl_matrix_get(b, p, j);
            if (gsl_matrix_get(c, i, j) != s) {
                printf("FAIL: dgemm entry (%zu, %zu) %g, expected %g\n", i, j,
                       gsl_matrix_get(c, i, j), s);
                fail = 1;
                i = c->size1 - 1;
                break;
            }
        }
    gsl_matrix_free(a);
    gsl_matrix_free(b);
    gsl_matrix_free(c);
    printf("%s: OpenBLAS core %s\n", fail ? "FAIL" : "ok", core);
    return fail;
#else
    printf("skip: not built with OpenBLAS on x86\n");
    return 77;
#endif
}
