/*
 * lsefit gmm's default chain over K (tools/lsefit_gmmstart.c) prints and
 * writes the same bytes for 1, 2 and 3 threads and for the default: emEM's
 * batches run on one crew of threads per fit (lse_gmm_par_begin,
 * models/gmm_par.c), whose helpers keep their fit caches from batch to
 * batch, and on threads started per batch without one; neither may change
 * a bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lse_check.h"
#include "lse_run.h"
#include "lse_tmpdir.h"

static char dir[64];

/* the whole of path (NUL-terminated) in *buf, its length returned */
static size_t slurp(const char *path, char **buf)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t n = 0, cap = 4096;
    char *b = malloc(cap);
    ck_assert(b != NULL);
    size_t r;
    while ((r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            b = realloc(b, cap);
            ck_assert(b != NULL);
        }
    }
    fclose(f);
    b[n] = '\0';
    *buf = b;
    return n;
}

/* -k 1:8 on data with extra options, covariance cov: the table printed
 * (-q: no progress lines under load) and the model written by --threads 1 equal those of 2, 3 and the default */
static void check_cell(const char *data, const char *extra, const char *cov)
{
    const char *threads[] = {"--threads 1", "--threads 2", "--threads 3",
                             ""};
    char *out0 = NULL, *mod0 = NULL;
    size_t n_out0 = 0, n_mod0 = 0;
    for (size_t i = 0; i < 4; i++) {
        char out[128], model[128], args[1024];
        snprintf(out, sizeof out, "%s/out%zu.txt", dir, i);
        snprintf(model, sizeof model, "%s/m.json", dir); /* printed */
        snprintf(args, sizeof args,
                 "gmm '%s/%s' %s -k 1:8 --covariance %s %s -q -o '%s'",
                 LSE_DATA_DIR, data, extra, cov, threads[i], model);
        ck_assert_int_eq(lse_run_lsefit(args, out), 0);
        char *o, *m;
        const size_t no = slurp(out, &o), nm = slurp(model, &m);
        ck_assert(no > 0 && nm > 0);
        if (i == 0) {
            out0 = o;
            mod0 = m;
            n_out0 = no;
            n_mod0 = nm;
            continue;
        }
        ck_assert_msg(no == n_out0 && memcmp(o, out0, no) == 0,
                      "%s %s: the output of '%s' differs from --threads 1",
                      data, cov, threads[i]);
        ck_assert_msg(nm == n_mod0 && memcmp(m, mod0, nm) == 0,
                      "%s %s: the model of '%s' differs from --threads 1",
                      data, cov, threads[i]);
        free(o);
        free(m);
    }
    free(out0);
    free(mod0);
}

START_TEST(test_faithful_full)
{
    lse_tmpdir_make(dir, sizeof dir, "emem_chain");
    check_cell("faithful.csv", "", "full");
    lse_tmpdir_remove(dir);
}
END_TEST

START_TEST(test_iris_diag)
{
    lse_tmpdir_make(dir, sizeof dir, "emem_chain");
    check_cell("iris.csv", "--ignore species", "diag");
    lse_tmpdir_remove(dir);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("emem_chain_threads");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_faithful_full);
    tcase_add_test(tc, test_iris_diag);
    suite_add_tcase(s, tc);
    return s;
}
