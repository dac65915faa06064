#include <ctype.h>
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

/* The generating model of the tests: 2 modes, D = 2, N = 3. */
static lse_lslds_params *truth(void)
{
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
    return p;
}

/* Simulate T rows of @p p into dir/NAME (columns a,b,c; with @p holes,
 * an empty cell in column b every 37 rows); the modes into z. */
static void write_series(const lse_lslds_params *p, const char *name,
                         size_t T, unsigned long seed, int holes, size_t *z,
                         gsl_matrix *y)
{
    lse_assert_ok(lse_lslds_simulate(p, seed, y, NULL, z, NULL));
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c\n");
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < 3; i++) {
            if (!(holes && t % 37 == 5 && i == 1))
                fprintf(f, "%.17g", gsl_matrix_get(y, t, i));
            fputc(i == 2 ? '\n' : ',', f);
        }
    fclose(f);
}

START_TEST(test_cli)
{
    lse_tmpdir_make(dir, sizeof dir, "lsefit_lslds");
    /* a 2-mode series, D = 2, N = 3, with a few empty cells */
    lse_lslds_params *p = truth();
    const size_t T = 600;
    gsl_matrix *y = gsl_matrix_alloc(T, 3);
    size_t *z = malloc(T * sizeof(size_t));
    write_series(p, "y.csv", T, 7, 1, z, y);
    char path[700];

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
    int all_moves = 1; /* then the default path is the per-row mode */
    for (size_t j = 0; j < 4; j++)
        all_moves &= g->trans->data[j / 2 * g->trans->tda + j % 2] > 0.0;
    lse_lslds_params_free(g);

    /* segment: T rows, modes close to the truth */
    ck_assert_int_eq(run("slds segment m.json y.csv --missing marginalize "
                         "--variances"),
                     0);
    char *out = slurp("out");
    ck_assert(strncmp(out, "row,p0,p1,mode,viterbi,path,x0,x1,v0,v1\n", 40) ==
              0);
    size_t same = 0, vsame = 0, n = 0;
    char *line = strchr(out, '\n') + 1;
    while (*line) {
        size_t row, mode, vit, mea;
        double p0, p1;
        ck_assert_int_eq(sscanf(line, "%zu,%lg,%lg,%zu,%zu,%zu", &row, &p0,
                                &p1, &mode, &vit, &mea),
                         6);
        ck_assert_uint_lt(vit, 2);
        ck_assert(all_moves && mea == mode);
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

    /* a mixture: the viterbi and path columns are the mode column */
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 --max-iter 20 "
                         "--missing marginalize -o mix.json"),
                     0);
    ck_assert_int_eq(run("slds segment mix.json y.csv --missing marginalize"),
                     0);
    out = slurp("out");
    ck_assert(strncmp(out, "row,p0,p1,mode,viterbi,path,x0,x1\n", 34) == 0);
    n = 0;
    for (line = strchr(out, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        size_t row, mode, vit, mea;
        double p0, p1;
        ck_assert_int_eq(sscanf(line, "%zu,%lg,%lg,%zu,%zu,%zu", &row, &p0,
                                &p1, &mode, &vit, &mea),
                         6);
        ck_assert_uint_eq(vit, mode);
        ck_assert_uint_eq(mea, mode);
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

    /* simulate: -T N as for the observed model; --modes FILE holds the
     * mode column of the table */
    ck_assert_int_eq(run("slds simulate m.json -T 5 --seed 3 --modes z.csv"),
                     0);
    out = strdup(slurp("out"));
    ck_assert_ptr_nonnull(out);
    ck_assert(strncmp(out, "a,b,c,mode,x0,x1\n", 17) == 0);
    size_t lines = 0;
    for (char *c = out; *c; c++)
        lines += *c == '\n';
    ck_assert_uint_eq(lines, 6);
    char *zs = strdup(slurp("z.csv"));
    ck_assert_ptr_nonnull(zs);
    ck_assert(strncmp(zs, "mode\n", 5) == 0);
    line = strchr(out, '\n') + 1;
    for (const char *zl = zs + 5; *zl; zl = strchr(zl, '\n') + 1) {
        size_t zi = 9, zt = 8; /* the mode after the three values */
        ck_assert_int_eq(sscanf(zl, "%zu", &zi), 1);
        ck_assert_int_eq(sscanf(line, "%*[^,],%*[^,],%*[^,],%zu", &zt), 1);
        ck_assert_uint_eq(zi, zt);
        line = strchr(line, '\n') + 1;
    }
    free(zs);
    free(out);
    ck_assert_int_eq(run("slds simulate m.json -n 5"), 2);
    ck_assert(strstr(slurp("err"), "-n") != NULL);

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

/* One row of the selection table: K, D, params, ELBO, BIC, AIC, iter,
 * then converged (yes/no) [, held-out log p(y), se]; the number of rows
 * read and the best one. */
static size_t read_table(const char *out, double (*row)[9], int held,
                         size_t *chosen)
{
    size_t n = 0;
    const char *line = strchr(out, '\n') + 1; /* after the header */
    while (line != NULL && isdigit((unsigned char)line[strspn(line, " ")]) &&
           n < 16) {
        char conv[8], one[512];
        double *r = row[n];
        snprintf(one, sizeof one, "%.*s", (int)strcspn(line, "\n"), line);
        const int got = sscanf(one, "%lg %lg %lg %lg %lg %lg %lg %7s %lg %lg",
                               &r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6],
                               conv, &r[7], &r[8]);
        const int want = held ? 10 : 8;
        ck_assert_int_eq(got, want);
        const char *eol = strchr(line, '\n');
        if (strstr(line, "<- best") != NULL &&
            (eol == NULL || strstr(line, "<- best") < eol))
            *chosen = n;
        n++;
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

START_TEST(test_select)
{
    lse_tmpdir_make(dir, sizeof dir, "lsefit_lslds_sel");
    lse_lslds_params *p = truth();
    gsl_matrix *y = gsl_matrix_alloc(500, 3), *v = gsl_matrix_alloc(300, 3);
    size_t *z = malloc(500 * sizeof(size_t));
    write_series(p, "y.csv", 500, 11, 0, z, y);
    write_series(p, "v.csv", 300, 12, 0, z, v);
    /* BIC on the ELBO over K = 1..2, D = 1..2 */
    ck_assert_int_eq(run("slds y.csv -k 1:2 --latent-dim 1:2 --markov "
                         "--max-iter 40 -o b.json"),
                     0);
    double row[16][9];
    size_t chosen = 99;
    char *out = slurp("out");
    ck_assert_msg(strstr(out, "BIC on the ELBO") != NULL, "%s", out);
    ck_assert_uint_eq(read_table(out, row, 0, &chosen), 4);
    ck_assert_uint_lt(chosen, 4);
    for (size_t i = 0; i < 4; i++) {
        /* K, D in order; BIC = -2 ELBO + params log T; chosen = least */
        ck_assert_double_eq(row[i][0], (double)(1 + i / 2));
        ck_assert_double_eq(row[i][1], (double)(1 + i % 2));
        ck_assert_double_eq_tol(row[i][4], -2.0 * row[i][3] + row[i][2] * log(500.0),
                                1e-3);
        ck_assert_double_eq_tol(row[i][5], -2.0 * row[i][3] + 2.0 * row[i][2],
                                1e-3);
        ck_assert(row[chosen][4] <= row[i][4]);
    }
    /* parameters of K = 2, D = 2, N = 3, Markov: A, b, Q 2 (4 + 2 + 3),
     * C, d, R 6 + 3 + 3, initial 1, transition 2, less the 4 + 2 of an
     * affine change of x (m0, P0 are not fitted by default) */
    ck_assert_double_eq(row[3][2], 27.0);
    /* the data have D = 2: a one-dimensional state is far worse */
    ck_assert_double_eq(row[chosen][1], 2.0);
    lse_lslds_params *g = NULL;
    char path[700];
    snprintf(path, sizeof path, "%s/b.json", dir);
    lse_assert_ok(lse_lslds_load(path, &g, NULL, NULL));
    ck_assert_double_eq((double)g->K, row[chosen][0]);
    ck_assert_double_eq((double)g->D, row[chosen][1]);
    lse_lslds_params_free(g);

    /* held-out log p(y) of v.csv: the chosen row has the largest */
    ck_assert_int_eq(run("slds y.csv -k 1:2 --latent-dim 1:2 --markov "
                         "--max-iter 40 --select heldout --validation v.csv "
                         "--samples 100 -o h.json"),
                     0);
    out = slurp("out");
    ck_assert_uint_eq(read_table(out, row, 1, &chosen), 4);
    ck_assert_msg(strstr(out, "by held-out log p(y) (higher is better)") !=
                      NULL,
                  "%s", out);
    for (size_t i = 0; i < 4; i++) {
        ck_assert(isfinite(row[i][7]) && row[i][8] >= 0.0);
        ck_assert(row[chosen][7] >= row[i][7]);
    }
    ck_assert_double_eq(row[chosen][1], 2.0);
    /* ... and equals what score reports for that model on v.csv */
    ck_assert_int_eq(run("slds score h.json v.csv --samples 100"), 0);
    out = slurp("out");
    double sc[6];
    ck_assert_int_eq(sscanf(strchr(out, '\n') + 1, "%lg,%lg,%lg,%lg,%lg,%lg",
                            &sc[0], &sc[1], &sc[2], &sc[3], &sc[4], &sc[5]),
                     6);
    ck_assert_double_eq_tol(sc[3], row[chosen][7], 1e-3);

    /* --select aic: the least AIC on the ELBO */
    ck_assert_int_eq(run("slds y.csv -k 1:2 --latent-dim 1:2 --markov "
                         "--max-iter 40 --select aic -o a.json"),
                     0);
    out = slurp("out");
    ck_assert_msg(strstr(out, "by AIC on the ELBO") != NULL, "%s", out);
    ck_assert_uint_eq(read_table(out, row, 0, &chosen), 4);
    for (size_t i = 0; i < 4; i++)
        ck_assert(row[chosen][5] <= row[i][5]);

    /* per-mode emissions: the file says so, segment and score read it,
     * and the selection counts K (N D + 2 N) emission parameters */
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 --markov --emission "
                         "per-mode --max-iter 30 -o pm.json"),
                     0);
    ck_assert(strstr(slurp("pm.json"), "\"emission\": \"per-mode\"") != NULL);
    ck_assert(strstr(slurp("pm.json"), "\"n_params\": 39") != NULL);
    ck_assert_int_eq(run("slds segment pm.json v.csv"), 0);
    ck_assert(strncmp(slurp("out"), "row,p0,p1,mode,viterbi,path,x0,x1\n", 34) == 0);
    ck_assert_int_eq(run("slds score pm.json v.csv --samples 50"), 0);
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 1 --emission twice "
                         "-o x.json"),
                     2);
    ck_assert(strstr(slurp("err"), "--emission") != NULL);

    /* errors name the option */
    ck_assert_int_eq(run("slds y.csv -k 1:2 --latent-dim 1 --select heldout "
                         "-o x.json"),
                     2);
    ck_assert(strstr(slurp("err"), "--validation") != NULL);
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2:1 -o x.json"), 2);
    ck_assert(strstr(slurp("err"), "--latent-dim") != NULL);
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 1 --select aic "
                         "-o x.json"),
                     2);
    ck_assert(strstr(slurp("err"), "--select needs a range of K or D") !=
              NULL);
    ck_assert_int_eq(run("slds y.csv -k 1:2 --latent-dim 1 --select icl "
                         "-o x.json"),
                     2);
    ck_assert(strstr(slurp("err"), "expected bic, aic or heldout") != NULL);

    free(z);
    gsl_matrix_free(y);
    gsl_matrix_free(v);
    lse_lslds_params_free(p);
    lse_tmpdir_remove(dir);
}
END_TEST

/* The options every lsefit fit takes behave the same with --latent-dim
 * (the shared pipeline, tools/lsefit_fit.c). */
START_TEST(test_common_options)
{
    lse_tmpdir_make(dir, sizeof dir, "lsefit_lslds_common");
    lse_lslds_params *p = truth();
    gsl_matrix *y = gsl_matrix_alloc(300, 3);
    size_t *z = malloc(300 * sizeof(size_t));
    write_series(p, "y.csv", 300, 5, 0, z, y);
    const char *fit = "slds y.csv -k 2 --latent-dim 2 --markov --max-iter 15";
    char cmd[512];

    /* -v is accepted and changes no bit of the model file */
    snprintf(cmd, sizeof cmd, "%s -o a.json", fit);
    ck_assert_int_eq(run(cmd), 0);
    char *a = strdup(slurp("a.json"));
    ck_assert_ptr_nonnull(a);
    snprintf(cmd, sizeof cmd, "%s -v -o b.json", fit);
    ck_assert_int_eq(run(cmd), 0);
    ck_assert_str_eq(slurp("b.json"), a);
    /* the note names K, D and the ELBO; 15 iterations did not converge */
    ck_assert_msg(strstr(slurp("err"), "wrote b.json: K = 2, D = 2, ELBO ") !=
                      NULL,
                  "%s", slurp("err"));
    ck_assert(strstr(slurp("err"), "did not converge in 15 iterations") !=
              NULL);
    free(a);

    /* --max-iter 0: the start after one E-step, written and readable */
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 --max-iter 0 "
                         "-o z.json"),
                     0);
    ck_assert(strstr(slurp("z.json"), "\"n_iter\": 0,") != NULL);
    ck_assert(strstr(slurp("err"), "did not converge in 0 iterations") != NULL);
    ck_assert_int_eq(run("slds score z.json y.csv --samples 20"), 0);

    /* --tol: a loose tolerance stops early, converged (no warning) */
    ck_assert_int_eq(run("slds y.csv -k 2 --latent-dim 2 --tol 1 -o t.json"),
                     0);
    ck_assert(strstr(slurp("err"), "did not converge") == NULL);
    /* (the first iteration always runs on: its gain is from -inf) */
    ck_assert(strstr(slurp("t.json"), "\"n_iter\": 2,") != NULL);

    /* without -o the model is printed */
    snprintf(cmd, sizeof cmd, "%s -q", fit);
    ck_assert_int_eq(run(cmd), 0);
    const char *out = slurp("out");
    ck_assert_msg(strncmp(out, "Latent switching LDS: K = 2 modes, Markov "
                               "switching, D = 2, N = 3 (a, b, c)",
                          60) == 0,
                  "%s", out);
    ck_assert(strstr(out, "transition P(from row mode") != NULL);
    ck_assert_str_eq(slurp("err"), "");

    /* --ignore: the columns of the model */
    ck_assert_int_eq(run("slds y.csv -k 1 --latent-dim 1 --ignore c "
                         "--max-iter 5 -q -o i.json"),
                     0);
    ck_assert(strstr(slurp("i.json"), "\"n_features\": 2,") != NULL);

    /* a constant column: refused as by every fit, unless --reg-covar */
    FILE *f = fopen(strcat(strcpy(cmd, dir), "/c.csv"), "w");
    ck_assert_ptr_nonnull(f);
    fputs("a,b\n", f);
    for (size_t t = 0; t < 300; t++)
        fprintf(f, "%.17g,2.5\n", gsl_matrix_get(y, t, 0));
    fclose(f);
    ck_assert_int_eq(run("slds c.csv -k 1 --latent-dim 1 -o x.json"), 1);
    ck_assert_msg(strstr(slurp("err"), "column 'b' is constant") != NULL,
                  "%s", slurp("err"));
    /* the value the message suggests is one the latent fit can take */
    ck_assert_msg(strstr(slurp("err"), "--reg-covar X (e.g. 1e-6)") != NULL,
                  "%s", slurp("err"));
    /* (given explicitly, the default ridge: larger ones stop in the
     * library's M-step check, which allows a smaller ELBO decrease than
     * a ridge on a near-zero observation variance causes) */
    ck_assert_int_eq(run("slds c.csv -k 1 --latent-dim 1 --max-iter 5 "
                         "--reg-covar 1e-6 -q -o x.json"),
                     0);

    /* values whose squares overflow: refused, without offering
     * --standardize (the latent fit has none) */
    f = fopen(strcat(strcpy(cmd, dir), "/h.csv"), "w");
    ck_assert_ptr_nonnull(f);
    fputs("a\n", f);
    for (size_t t = 0; t < 300; t++)
        fprintf(f, "%.17g\n", 1e200 * gsl_matrix_get(y, t, 0));
    fclose(f);
    ck_assert_int_eq(run("slds h.csv -k 1 --latent-dim 1 -o x.json"), 1);
    ck_assert_msg(strstr(slurp("err"), "is too large for a covariance") !=
                          NULL &&
                      strstr(slurp("err"), "--standardize") == NULL,
                  "%s", slurp("err"));

    /* observed-state options are refused by name */
    snprintf(cmd, sizeof cmd, "%s --covariance diag -o x.json", fit);
    ck_assert_int_eq(run(cmd), 2);
    ck_assert_msg(strstr(slurp("err"), "'--covariance' is an option of the "
                                       "observed-state fit") != NULL,
                  "%s", slurp("err"));
    /* segment and score take their own options only */
    ck_assert_int_eq(run("slds segment a.json y.csv --samples 5"), 2);
    ck_assert(strstr(slurp("err"), "'lsefit slds score'") != NULL);
    ck_assert_int_eq(run("slds score a.json y.csv --variances"), 2);
    ck_assert(strstr(slurp("err"), "'lsefit slds segment'") != NULL);
    ck_assert_int_eq(run("slds segment a.json y.csv --latent-dim 2"), 2);
    ck_assert(strstr(slurp("err"), "for the fit only") != NULL);

    free(z);
    gsl_matrix_free(y);
    lse_lslds_params_free(p);
    lse_tmpdir_remove(dir);
}
END_TEST

/* Write @p text into dir/NAME. */
static void write_text(const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* The error file is one line naming @p what. */
static void one_line_error(const char *what)
{
    const char *e = slurp("err");
    ck_assert_msg(strstr(e, what) != NULL, "'%s' not in: %s", what, e);
    const char *nl = strchr(e, '\n');
    ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", e);
}

/* --lags 2 (docs/models/slds.md "Several lags"): simulate from a file
 * with "lags": 2 (a damped oscillation at D = 1 and a slow decay), fit,
 * segment and score it; the errors of bad lags. */
START_TEST(test_cli_lags)
{
    lse_tmpdir_make(dir, sizeof dir, "lsefit_lslds_lags");
    write_text("gen.json",
               "{\"model\": \"slds-latent\", \"markov\": true, \"n_modes\": 2,"
               " \"latent_dim\": 1, \"lags\": 2, \"n_features\": 2,"
               " \"feature_names\": [\"a\", \"b\"],"
               " \"A\": [[[1.6, -0.9]], [[0.6, 0.2]]], \"b\": [[0], [1]],"
               " \"Q\": [[[0.1]], [[0.2]]], \"C\": [[1], [0.5]], \"d\": [0, 1],"
               " \"R_diag\": [0.05, 0.1], \"initial_mean\": [0],"
               " \"initial_cov\": [[1]], \"initial\": [0.5, 0.5],"
               " \"transition\": [[0.97, 0.03], [0.05, 0.95]]}\n");
    ck_assert_int_eq(run("slds simulate gen.json -T 800 --seed 4 -o y.csv"), 0);
    char *sim = strdup(slurp("y.csv"));
    ck_assert(strncmp(sim, "a,b,mode,x0\n", 12) == 0);
    ck_assert_int_eq(run("slds y.csv --columns a,b -k 2 --latent-dim 1 "
                         "--lags 2 --markov --n-init 2 -o f.json"),
                     0);
    char path[700];
    lse_lslds_params *g = NULL;
    lse_assert_ok(lse_lslds_load(strcat(strcpy(path, dir), "/f.json"), &g,
                                 NULL, NULL));
    ck_assert_uint_eq(g->lags, 2);
    ck_assert_uint_eq(g->A->size2, 2);
    const size_t osc = gsl_matrix_get(g->A, 0, 1) < gsl_matrix_get(g->A, 1, 1) ? 0 : 1;
    ck_assert_msg(fabs(gsl_matrix_get(g->A, osc, 0) - 1.6) < 0.15 &&
                      fabs(gsl_matrix_get(g->A, osc, 1) + 0.9) < 0.15,
                  "A = [%g %g]", gsl_matrix_get(g->A, osc, 0),
                  gsl_matrix_get(g->A, osc, 1));
    ck_assert(strstr(slurp("f.json"), "\"lags\": 2") != NULL);
    /* segment: the smoothed x0 follows the simulated states */
    ck_assert_int_eq(run("slds segment f.json y.csv --columns a,b"), 0);
    char *out = slurp("out");
    ck_assert(strncmp(out, "row,p0,p1,mode,viterbi,path,x0\n", 31) == 0);
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    size_t n = 0;
    char *line = strchr(out, '\n') + 1, *sl = strchr(sim, '\n') + 1;
    while (*line && *sl) {
        size_t row, mode, vit, mea, zt;
        double p0, p1, xs, ya, yb, xt;
        ck_assert_int_eq(sscanf(line, "%zu,%lg,%lg,%zu,%zu,%zu,%lg", &row,
                                &p0, &p1, &mode, &vit, &mea, &xs),
                         7);
        ck_assert_int_eq(sscanf(sl, "%lg,%lg,%zu,%lg", &ya, &yb, &zt, &xt), 4);
        sx += xs;
        sy += xt;
        sxx += xs * xs;
        syy += xt * xt;
        sxy += xs * xt;
        n++;
        line = strchr(line, '\n') + 1;
        sl = strchr(sl, '\n') + 1;
    }
    ck_assert_uint_eq(n, 800);
    const double cov = sxy / n - sx / n * sy / n;
    const double corr =
        cov / sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
    ck_assert_msg(fabs(corr) > 0.97, "corr %g", corr);
    /* score: ELBO <= log p(y) (within its standard error) */
    ck_assert_int_eq(run("slds score f.json y.csv --columns a,b --samples 200 "
                         "--seed 1"),
                     0);
    double elbo, epr, ll, se;
    size_t rows;
    out = slurp("out");
    ck_assert_int_eq(sscanf(strchr(out, '\n') + 1, "%zu,%lg,%lg,%lg,%lg",
                            &rows, &elbo, &epr, &ll, &se),
                     5);
    ck_assert_uint_eq(rows, 800);
    ck_assert_msg(ll >= elbo - 4 * se && ll - elbo < 50.0 && se < 1.0,
                  "elbo %g log p(y) %g +- %g", elbo, ll, se);
    /* bad input: one-line errors */
    ck_assert_int_eq(run("slds y.csv --columns a,b -k 2 --latent-dim 1 --lags 0 "
                         "-o x.json"),
                     2);
    one_line_error("--lags");
    write_text("short.csv", "s,a,b\n1,0.1,0.2\n1,0.3,0.1\n1,0.2,0.5\n1,0.1,0.1\n"
                            "2,0.4,0.3\n2,0.2,0.2\n");
    ck_assert_int_ne(run("slds short.csv --columns a,b --sequence s -k 1 "
                         "--latent-dim 1 --lags 2 -o x.json"),
                     0);
    one_line_error("data rows 5..6 has only 2 rows");
    ck_assert_int_ne(run("slds segment f.json y.csv --columns a,b --lags 2"), 0);
    one_line_error("--lags is for the fit only");
    char *bad = strdup(slurp("f.json"));
    char *k = strstr(bad, "\"lags\": 2");
    k[8] = '0';
    write_text("bad.json", bad);
    ck_assert_int_ne(run("slds segment bad.json y.csv --columns a,b"), 0);
    one_line_error("'lags'");
    k[8] = '3'; /* A is 1 x 2, three lags want 1 x 3 */
    write_text("bad.json", bad);
    ck_assert_int_ne(run("slds score bad.json y.csv --columns a,b"), 0);
    one_line_error("A");
    free(bad);
    free(sim);
    lse_lslds_params_free(g);
    lse_tmpdir_remove(dir);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("lsefit_lslds");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cli);
    tcase_add_test(tc, test_select);
    tcase_add_test(tc, test_common_options);
    tcase_add_test(tc, test_cli_lags);
    suite_add_tcase(s, tc);
    return s;
}
