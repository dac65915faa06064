/* Results do not depend on OPENBLAS_NUM_THREADS (include/lsegraph/status.h,
 * lse_blas_serial_enter; include/lsegraph/cov.h, lse_eigen_symm): OpenBLAS
 * splits dtrmv, dsymv and dsyr2 over its threads at every size, so a GSL
 * eigen-decomposition or triangular inverse outside the library's serial
 * hold rounds by OpenBLAS's thread count. Before the hold, emEM's guard and
 * splits made `lsefit gmm iris.csv -k 1:8 --covariance diag` print another
 * model under OPENBLAS_NUM_THREADS=2 than under 1. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <check.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

#ifdef LSE_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
#endif

#ifdef LSE_HAVE_OPENBLAS
/* another thread's pairs, in steps the test drives */
typedef struct other {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int step, done, held;
} other;

static void other_wait(other *o, int step)
{
    pthread_mutex_lock(&o->mu);
    while (o->step < step)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
}

static void other_done(other *o, int done)
{
    pthread_mutex_lock(&o->mu);
    o->done = done;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void *other_main(void *arg)
{
    other *o = arg;
    other_wait(o, 1);
    o->held = lse_blas_serial_enter(); /* nested in its own pairs too */
    const int inner = lse_blas_serial_enter();
    lse_blas_serial_leave(inner);
    other_done(o, 1);
    other_wait(o, 2);
    lse_blas_serial_leave(o->held);
    other_done(o, 2);
    return NULL;
}

static void step_to(other *o, int step)
{
    pthread_mutex_lock(&o->mu);
    o->step = step;
    pthread_cond_broadcast(&o->cv);
    while (o->done < step)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
}
#endif

/* pairs of two threads: OpenBLAS is serial from the first enter of either
 * to the last leave of both (each thread's nested pairs count once) */
START_TEST(test_two_threads)
{
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(2);
    other o = {.mu = PTHREAD_MUTEX_INITIALIZER,
               .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, other_main, &o), 0);
    const int a = lse_blas_serial_enter();
    step_to(&o, 1); /* the other holds too */
    lse_blas_serial_leave(a);
    ck_assert_int_eq(openblas_get_num_threads(), 1); /* the other's hold */
    const int b = lse_blas_serial_enter();
    step_to(&o, 2); /* the other let go */
    ck_assert_int_eq(openblas_get_num_threads(), 1); /* b */
    lse_blas_serial_leave(b);
    ck_assert_int_eq(openblas_get_num_threads(), 2);
    pthread_join(th, NULL);
#endif
}
END_TEST

/* enter makes OpenBLAS serial, pairs nest, the last leave restores it */
START_TEST(test_enter_leave)
{
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(2);
    const int before = openblas_get_num_threads();
    const int a = lse_blas_serial_enter();
    ck_assert_int_eq(openblas_get_num_threads(), 1);
    const int b = lse_blas_serial_enter();
    lse_blas_serial_leave(b);
    ck_assert_int_eq(openblas_get_num_threads(), 1);
    lse_blas_serial_leave(a);
    ck_assert_int_eq(openblas_get_num_threads(), before);
#else
    lse_blas_serial_leave(lse_blas_serial_enter()); /* no-ops */
#endif
}
END_TEST

/* a random symmetric n x n matrix, seed s */
static gsl_matrix *sym(size_t n, unsigned long s)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, s);
    gsl_matrix *a = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            const double v = gsl_rng_uniform(r) - 0.5;
            gsl_matrix_set(a, i, j, v);
            gsl_matrix_set(a, j, i, v);
        }
    gsl_rng_free(r);
    return a;
}

/* lse_eigen_symm(v) under a threaded OpenBLAS give GSL's serial results to
 * the bit, and the eigenpairs satisfy A v = lambda v */
START_TEST(test_eigen_serial)
{
    const size_t n = 48;
    gsl_matrix *a0 = sym(n, 7), *a = gsl_matrix_alloc(n, n);
    gsl_matrix *v = gsl_matrix_alloc(n, n), *vref = gsl_matrix_alloc(n, n);
    gsl_vector *e = gsl_vector_alloc(n), *eref = gsl_vector_alloc(n);
    gsl_vector *e2 = gsl_vector_alloc(n);
    gsl_eigen_symmv_workspace *wv = gsl_eigen_symmv_alloc(n);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(n);
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(1);
#endif
    gsl_matrix_memcpy(a, a0);
    ck_assert_int_eq(gsl_eigen_symmv(a, eref, vref, wv), GSL_SUCCESS);
#ifdef LSE_HAVE_OPENBLAS
    openblas_set_num_threads(2);
#endif
    gsl_matrix_memcpy(a, a0);
    ck_assert_int_eq(lse_eigen_symmv(a, e, v, wv), GSL_SUCCESS);
    gsl_matrix_memcpy(a, a0);
    ck_assert_int_eq(lse_eigen_symm(a, e2, w), GSL_SUCCESS);
#ifdef LSE_HAVE_OPENBLAS
    ck_assert_int_eq(openblas_get_num_threads(), 2); /* restored */
#endif
    ck_assert_mem_eq(e->data, eref->data, n * sizeof(double));
    ck_assert_mem_eq(v->data, vref->data, n * n * sizeof(double));
    for (size_t j = 0; j < n; j++) {
        /* gsl_eigen_symm runs the same QR sweeps without vectors */
        double best = INFINITY;
        for (size_t i = 0; i < n; i++)
            best = fmin(best, fabs(gsl_vector_get(e2, i) -
                                   gsl_vector_get(e, j)));
        ck_assert_double_le(best, 1e-12);
        for (size_t i = 0; i < n; i++) {
            double av = 0.0;
            for (size_t k = 0; k < n; k++)
                av += gsl_matrix_get(a0, i, k) * gsl_matrix_get(v, k, j);
            ck_assert_double_le(
                fabs(av - gsl_vector_get(e, j) * gsl_matrix_get(v, i, j)),
                1e-12);
        }
    }
    gsl_eigen_symm_free(w);
    gsl_eigen_symmv_free(wv);
    gsl_vector_free(e2);
    gsl_vector_free(eref);
    gsl_vector_free(e);
    gsl_matrix_free(vref);
    gsl_matrix_free(v);
    gsl_matrix_free(a);
    gsl_matrix_free(a0);
}
END_TEST

static char dir[64];

/* lsefit ARGS with OPENBLAS_NUM_THREADS=nt, stdout and stderr into out */
static void run_nt(int nt, const char *args, const char *out)
{
    const char *bin = getenv("LSEFIT");
    ck_assert_msg(bin != NULL, "LSEFIT is not set");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=%d '%s' %s > '%s' 2>&1",
             nt, bin, args, out);
    const int st = system(cmd);
    ck_assert(st != -1 && WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
}

/* the whole file, NUL-terminated (caller frees) */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (n + 1 >= cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        buf[n++] = (char)c;
    }
    fclose(f);
    if (buf == NULL)
        buf = calloc(1, 1);
    ck_assert_ptr_nonnull(buf);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void assert_same_file(const char *p, const char *q)
{
    size_t np, nq;
    char *a = slurp(p, &np), *b = slurp(q, &nq);
    ck_assert_msg(np == nq && memcmp(a, b, np) == 0, "%s and %s differ", p,
                  q);
    ck_assert_uint_gt(np, 0);
    free(a);
    free(b);
}

/* the fitted model, the BIC table, a simulation and a latent SLDS fit are
 * byte-identical under OPENBLAS_NUM_THREADS=1 and 2 */
START_TEST(test_cli_openblas_threads)
{
    lse_tmpdir_make(dir, sizeof dir, "blas_serial");
    char args[1024], out[2][128], model[2][128], sim[2][128];
    for (int i = 0; i < 2; i++) {
        snprintf(out[i], sizeof out[i], "%s/out%d.txt", dir, i + 1);
        snprintf(model[i], sizeof model[i], "%s/m%d.json", dir, i + 1);
        snprintf(sim[i], sizeof sim[i], "%s/sim%d.txt", dir, i + 1);
        snprintf(args, sizeof args,
                 "gmm '%s/iris.csv' --ignore species -k 1:8 --covariance "
                 "diag -q -o '%s'",
                 LSE_DATA_DIR, model[i]);
        run_nt(i + 1, args, out[i]);
    }
    assert_same_file(model[0], model[1]);
    assert_same_file(out[0], out[1]);
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "slds '%s/gdp_growth.csv' --columns growth_pct -k 2 "
                 "--markov --seed 1 -q -o '%s'",
                 LSE_DATA_DIR, model[i]);
        run_nt(1, args, out[i]);
        snprintf(args, sizeof args, "slds simulate '%s' -T 30 --seed 4",
                 model[0]);
        run_nt(i + 1, args, sim[i]);
    }
    assert_same_file(sim[0], sim[1]);
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "slds '%s/faithful.csv' -k 2 --latent-dim 2 --tol 1e-3 "
                 "--reg-covar 1e-5 --seed 2 -q -o '%s'",
                 LSE_DATA_DIR, model[i]);
        run_nt(i + 1, args, out[i]);
    }
    assert_same_file(model[0], model[1]);
    lse_tmpdir_remove(dir);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("blas_serial");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_enter_leave);
    tcase_add_test(tc, test_two_threads);
    tcase_add_test(tc, test_eigen_serial);
    tcase_add_test(tc, test_cli_openblas_threads);
    suite_add_tcase(s, tc);
    return s;
}
