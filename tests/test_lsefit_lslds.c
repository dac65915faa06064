#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

/* lsefit slds --latent-dim (tools/lsefit_lslds.c): fit, segment, score,
 * simulate through the built tool (path in $LSEFIT). */

static char dir[512];

/* Run "$LSEFIT args > dir/out 2> dir/err"; the exit status. */
static int run(const char *args)
{
    const char *bin = getenv("LSEFIT");
    ck_assert_ptr_nonnull(bin);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > out 2> err", dir, bin,
             args);
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 20];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(test_cli)
{
    lse_tmpdir_make(dir, sizeof dir, "lsefit_lslds");
    /* a 2-mode series, D = 2, N = 3, with a few empty cells */
    lse_lslds_params *p = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 2, 3, 1, &p, NULL));
    const double ang[2] = {0.1, 0.6}, rad[2] = {0.97, 0.9};
    for (size_t k = 0; k < 2; k++) {
        const double c = rad[k] * cos(ang[k]), s = rad[k] * sin(ang[k]);
        const double a[4] = {c, -s, s, c}, q[4] = {0.05, 0.01, 0.01, 0.05};
        memcpy(p->A->data + 4 * k, a, sizeof a);
        memcpy(p->Q->data + 4 * k, q, sizeof q);
        gsl_matrix_set(p->b, k, 0, k ? 0.3 : -0.2);
    }
    const double C[6] = {1.0, 0.2, -0.5, 0.8, 0.3, -0.7};
    memcpy(p->C->data, C, sizeof C);
    gsl_vector_set_all(p->r, 0.05);
    const double P[4] = {0.98, 0.02, 0.03, 0.97};
    memcpy(p->trans->data, P, sizeof P);
    const size_t T = 600;
    gsl_matrix *y = gsl_matrix_alloc(T, 3);
    size_t *z = malloc(T * sizeof(size_t));
    lse_assert_ok(lse_lslds_simulate(p, 7, y, NULL, z, NULL));
    char path[700];
    snprintf(path, sizeof path, "%s/y.csv", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "a,b,c\n");
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < 3; i++) {
            if (t % 37 == 5 && i == 1)
                fprintf(f, "%s", "");
            else
                fprintf(f, "%.17g", gsl_matrix_get(y, t, i));
            fputc(i == 2 ? '\n' : ',', f);
        }
    fclose(f);

    /* missing cells need --missing marginalize */
    ck_assert_int_ne(run("slds y.csv -k 2 --latent-dim 2 --markov -o m.json"), 0);
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 --markov --n-init 2 "
                         "--missing marginalize -o m.json"),
                     0);
    lse_lslds_params *g = NULL;
    lse_assert_ok(lse_lslds_load(strcat(strcpy(path, dir), "/m.json"), &g,
                                 NULL, NULL));
    ck_assert_uint_eq(g->K, 2);
    ck_assert_uint_eq(g->D, 2);
    lse_lslds_params_free(g);

    /* segment: T rows, modes close to the truth */
    ck_assert_int_eq(run("slds segment m.json y.csv --missing marginalize "
                         "--variances"),
                     0);
    char *out = slurp("out");
    ck_assert(strncmp(out, "row,p0,p1,mode,viterbi,x0,x1,v0,v1\n", 35) == 0);
    size_t same = 0, vsame = 0, n = 0;
    char *line = strchr(out, '\n') + 1;
    while (*line) {
        size_t row, mode, vit;
        double p0, p1;
        ck_assert_int_eq(sscanf(line, "%zu,%lg,%lg,%zu,%zu", &row, &p0, &p1,
                                &mode, &vit),
                         5);
        ck_assert_uint_lt(vit, 2);
        same += mode == z[row - 1];
        vsame += vit == z[row - 1];
        n++;
        line = strchr(line, '\n') + 1;
    }
    ck_assert_uint_eq(n, T);
    const double acc = (double)(same > T - same ? same : T - same) / (double)T;
    ck_assert_msg(acc > 0.9, "segmentation accuracy %g", acc);
    /* the Viterbi path (same labels as the modes) agrees with the true
     * modes about as well as the per-row argmax (which maximizes the
     * expected number of right rows, so it may be slightly better) */
    const double vacc = (double)(same > T - same ? vsame : T - vsame) / (double)T;
    ck_assert_msg(vacc > 0.95 && vacc >= acc - 0.02,
                  "Viterbi accuracy %g, argmax %g", vacc, acc);

    /* help: the slds help lists the latent options; with --latent-dim
     * the latent help is printed */
    ck_assert_int_eq(run("slds --help"), 0);
    out = slurp("out");
    ck_assert(strstr(out, "Latent states (--latent-dim D") != NULL);
    ck_assert(strstr(out, "--samples") != NULL);
    ck_assert_int_eq(run("slds --latent-dim 2 --help"), 0);
    out = slurp("out");
    const char *usage = "Usage: lsefit slds SERIES.csv -k K --latent-dim D";
    ck_assert(strncmp(out, usage, strlen(usage)) == 0);
    ck_assert(strstr(out, "viterbi") != NULL || strstr(out, "Viterbi") != NULL);

    /* a mixture: the viterbi column is the mode column */
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 --max-iter 20 "
                         "--missing marginalize -o mix.json"),
                     0);
    ck_assert_int_eq(run("slds segment mix.json y.csv --missing marginalize"),
                     0);
    out = slurp("out");
    ck_assert(strncmp(out, "row,p0,p1,mode,viterbi,x0,x1\n", 29) == 0);
    n = 0;
    for (line = strchr(out, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        size_t row, mode, vit;
        double p0, p1;
        ck_assert_int_eq(sscanf(line, "%zu,%lg,%lg,%zu,%zu", &row, &p0, &p1,
                                &mode, &vit),
                         5);
        ck_assert_uint_eq(vit, mode);
        n++;
    }
    ck_assert_uint_eq(n, T);

    /* score: the importance-sampled log p(y) is above the ELBO (within
     * its error) */
    ck_assert_int_eq(run("slds score m.json y.csv --missing marginalize "
                         "--samples 300"),
                     0);
    out = slurp("out");
    size_t rows;
    double elbo, epr, ll, se, lpr;
    ck_assert_int_eq(sscanf(strchr(out, '\n') + 1, "%zu,%lg,%lg,%lg,%lg,%lg",
                            &rows, &elbo, &epr, &ll, &se, &lpr),
                     6);
    ck_assert_uint_eq(rows, T);
    ck_assert(isfinite(ll) && se >= 0.0);
    ck_assert_msg(ll >= elbo - 4.0 * se - 1e-9, "loglik %g < elbo %g", ll, elbo);

    /* simulate */
    ck_assert_int_eq(run("slds simulate m.json -n 5 --seed 3"), 0);
    out = slurp("out");
    ck_assert(strncmp(out, "a,b,c,mode,x0,x1\n", 17) == 0);
    size_t lines = 0;
    for (char *c = out; *c; c++)
        lines += *c == '\n';
    ck_assert_uint_eq(lines, 6);

    /* errors name the option or the file */
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 4 --missing "
                         "marginalize -o m2.json"),
                     2);
    ck_assert(strstr(slurp("err"), "--latent-dim") != NULL);
    ck_assert_int_eq(run("slds score nosuch.json y.csv"), 1);
    ck_assert(strstr(slurp("err"), "nosuch.json") != NULL);
    /* an output that is an input is refused before any work; the input
     * stays as it was */
    char *before = strdup(slurp("y.csv"));
    ck_assert_ptr_nonnull(before);
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 -o y.csv"), 2);
    ck_assert(strstr(slurp("err"), "same file") != NULL);
    ck_assert_str_eq(slurp("y.csv"), before);
    ck_assert_int_eq(run("slds segment m.json y.csv -o m.json"), 2);
    ck_assert(strstr(slurp("err"), "same file") != NULL);
    free(before);

    free(z);
    gsl_matrix_free(y);
    lse_lslds_params_free(p);
    lse_tmpdir_remove(dir);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("lsefit_lslds");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cli);
    suite_add_tcase(s, tc);
    return s;
}
