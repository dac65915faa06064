/* Tests of the lsefit command-line tool: they run the built binary (path in
 * the LSEFIT environment variable, set by tests/meson.build) with
 * posix_spawn on the bundled data and on data generated from hand-written
 * models, and check the files it writes with the library's own CSV and
 * JSON readers. LSEFIT_VALGRIND=1 runs every lsefit process under valgrind
 * (exit status 99 on a memory error or leak).
 *
 * Tolerances for known-answer fits are stated where they are used: for the
 * GMM five standard errors of each estimate; for SLDS fixed bounds a few
 * times the sampling error of a 4000-step series. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

extern char **environ;

/* ------------------------------------------------------------------ */
/* Fixture: a temporary directory per test, captured output            */

static char dir[64];
static char *out_text;         /* stdout of the last run */
static char *err_text;         /* stderr of the last run */
static const char *stdin_path; /* standard input of the next run, or NULL */

#define N_PATHS 64
static char paths[N_PATHS][512];
static size_t n_paths;

static void setup(void)
{
    lse_tmpdir_make(dir, sizeof dir, "lsefit");
    n_paths = 0;
    out_text = NULL;
    err_text = NULL;
}

static void teardown(void)
{
    lse_tmpdir_remove(dir);
    free(out_text);
    free(err_text);
    out_text = err_text = NULL;
}

/* A path in the temporary directory (valid for the test). */
static const char *tmp(const char *name)
{
    ck_assert_uint_lt(n_paths, N_PATHS);
    char *p = paths[n_paths++];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

/* A bundled data set. */
static const char *data(const char *name)
{
    ck_assert_uint_lt(n_paths, N_PATHS);
    char *p = paths[n_paths++];
    snprintf(p, sizeof paths[0], "%s/%s", LSE_DATA_DIR, name);
    return p;
}

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    lse_error err;
    const lse_status st = lse_file_read(path, &text, &len, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return text;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Run lsefit with the NULL-terminated arguments; returns the exit status
 * (stdout and stderr in out_text and err_text). */
static int run(const char *arg0, ...)
{
    const char *bin = getenv("LSEFIT");
    ck_assert_msg(bin != NULL, "LSEFIT is not set");
    const char *argv[80];
    size_t n = 0;
    if (getenv("LSEFIT_VALGRIND") != NULL) {
        argv[n++] = "valgrind";
        argv[n++] = "-q";
        argv[n++] = "--error-exitcode=99";
        argv[n++] = "--leak-check=full";
        argv[n++] = "--errors-for-leak-kinds=definite,indirect";
        argv[n++] = "--show-possibly-lost=no"; /* OpenMP's thread stacks */
    }
    argv[n++] = bin;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL; a = va_arg(ap, const char *)) {
        ck_assert_uint_lt(n, 78);
        argv[n++] = a;
    }
    va_end(ap);
    argv[n] = NULL;

    char out_path[128], err_path[128];
    snprintf(out_path, sizeof out_path, "%s/.stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/.stderr", dir);
    posix_spawn_file_actions_t fa;
    ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(
                         &fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(
                         &fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    if (stdin_path != NULL)
        ck_assert_int_eq(
            posix_spawn_file_actions_addopen(&fa, 0, stdin_path, O_RDONLY, 0),
            0);
    pid_t pid;
    const int rc =
        posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(rc == 0, "cannot run %s: %s", argv[0], strerror(rc));
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    free(out_text);
    free(err_text);
    out_text = slurp(out_path);
    err_text = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    ck_assert_msg(WIFEXITED(status), "lsefit died (signal %d); stderr: %s",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, err_text);
    ck_assert_msg(WEXITSTATUS(status) != 99, "valgrind: %s", err_text);
    return WEXITSTATUS(status);
}

#define RUN(...) run(__VA_ARGS__, (const char *)NULL)

/* The run must have succeeded. */
#define ASSERT_OK(expr)                                                        \
    do {                                                                       \
        const int rc_ = (expr);                                                \
        ck_assert_msg(rc_ == 0, "exit %d; stderr: %s", rc_, err_text);         \
    } while (0)

/* The run failed with @p want and one line "lsefit: ...@p msg...". */
static void assert_error(int got, int want, const char *msg)
{
    ck_assert_msg(got == want, "exit %d, want %d; stderr: %s", got, want,
                  err_text);
    ck_assert_msg(strncmp(err_text, "lsefit: ", 8) == 0, "stderr: %s",
                  err_text);
    ck_assert_msg(strstr(err_text, msg) != NULL, "want '%s' in: %s", msg,
                  err_text);
    const char *nl = strchr(err_text, '\n');
    ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", err_text);
}

/* ------------------------------------------------------------------ */
/* Reading what lsefit wrote                                           */

static lse_json *load_json(const char *path)
{
    lse_json *doc = NULL;
    lse_error err;
    const lse_status st = lse_json_load(path, &doc, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return doc;
}

static double jnum(const lse_json *doc, const char *key)
{
    double x = NAN;
    lse_error err;
    const lse_status st = lse_json_get_number(doc, key, &x, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return x;
}

static long long jint(const lse_json *doc, const char *key)
{
    long long x = 0;
    lse_error err;
    const lse_status st = lse_json_get_integer(doc, key, &x, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return x;
}

static int jbool(const lse_json *doc, const char *key)
{
    int x = -1;
    lse_error err;
    const lse_status st = lse_json_get_bool(doc, key, &x, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return x;
}

static gsl_vector *jvec(const lse_json *doc, const char *key, size_t n)
{
    gsl_vector *v = NULL;
    lse_error err;
    const lse_status st = lse_json_get_vector(doc, key, n, &v, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return v;
}

static gsl_matrix *jmat(const lse_json *doc, const char *key, size_t r,
                        size_t c)
{
    gsl_matrix *m = NULL;
    lse_error err;
    const lse_status st = lse_json_get_matrix(doc, key, r, c, &m, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return m;
}

static gsl_matrix *jstack(const lse_json *doc, const char *key, size_t k,
                          size_t r, size_t c)
{
    gsl_matrix *m = NULL;
    lse_error err;
    const lse_status st = lse_json_get_stack(doc, key, k, r, c, &m, NULL, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return m;
}

/* The top-level keys of a model file, in order, joined by ','. The writer
 * indents top-level keys by exactly two spaces. */
static void top_keys(const char *path, char *out, size_t size)
{
    char *text = slurp(path);
    out[0] = '\0';
    for (const char *line = text; line != NULL && *line != '\0';) {
        if (strncmp(line, "  \"", 3) == 0) {
            const char *end = strchr(line + 3, '"');
            ck_assert_ptr_nonnull(end);
            if (out[0] != '\0')
                strncat(out, ",", size - strlen(out) - 1);
            strncat(out, line + 3,
                    (size_t)(end - line - 3) < size - strlen(out) - 1
                        ? (size_t)(end - line - 3)
                        : size - strlen(out) - 1);
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    free(text);
}

/* Numeric columns of a CSV file (all of them), (n, c). */
static gsl_matrix *read_csv(const char *path, lse_missing missing)
{
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    lse_error err;
    lse_status st = lse_table_read(path, NULL, &t, &err);
    if (st == LSE_OK)
        st = lse_table_to_matrix(t, NULL, 0, missing, &m, NULL, &err);
    lse_table_free(t);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    return m;
}

/* ------------------------------------------------------------------ */
/* Help and version                                                    */

START_TEST(test_help_version)
{
    ASSERT_OK(RUN("--version"));
    ck_assert_msg(strncmp(out_text, "lsefit (lsegraph) ", 18) == 0, "%s",
                  out_text);
    ASSERT_OK(RUN("--help"));
    ck_assert_ptr_nonnull(strstr(out_text, "Usage: lsefit COMMAND"));
    /* the plot subcommands are listed by the command and its parent */
    ck_assert_ptr_nonnull(strstr(out_text, "gmm plot MODEL.json"));
    ck_assert_ptr_nonnull(strstr(out_text, "slds plot MODEL.json"));
    ck_assert_ptr_nonnull(strstr(out_text, "lower is better"));
    const char *cmds[][2] = {{"gmm", NULL},       {"gmm", "predict"},
                             {"gmm", "score"},    {"gmm", "sample"},
                             {"gmm", "plot"},     {"slds", NULL},
                             {"slds", "segment"}, {"slds", "simulate"},
                             {"slds", "summary"},
                             {"slds", "plot"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (cmds[i][1] == NULL)
            ASSERT_OK(RUN(cmds[i][0], "--help"));
        else
            ASSERT_OK(RUN(cmds[i][0], cmds[i][1], "--help"));
        ck_assert_msg(strncmp(out_text, "Usage: lsefit ", 14) == 0, "%s",
                      out_text);
        ck_assert_str_eq(err_text, "");
    }
    /* the fit commands list every option with its default */
    ASSERT_OK(RUN("gmm", "-h"));
    const char *gmm_opts[] = {
        "--covariance",  "--init",          "--n-init",    "--max-iter",
        "--tol",         "--reg-covar",     "--seed",      "--columns",
        "--ignore",      "--standardize",   "--weights",   "--missing",
        "--output",      "--labels",        "--proba",     "--select",
        "--log-json",    "--quiet",         "default 1000", "default 1e-09",
        "default 1e-06", "lower is better", "scikit-learn",
        "lsefit gmm plot MODEL.json", "lsefit gmm plot --help"};
    for (size_t i = 0; i < sizeof gmm_opts / sizeof gmm_opts[0]; i++)
        ck_assert_msg(strstr(out_text, gmm_opts[i]) != NULL, "no '%s'",
                      gmm_opts[i]);
    ASSERT_OK(RUN("slds", "--help"));
    const char *slds_opts[] = {"--markov",   "--lags",     "--sequence",
                               "--modes",    "--log-json", "lower is better",
                               "default 500", "lsefit slds plot MODEL.json",
                               "lsefit slds plot --help"};
    for (size_t i = 0; i < sizeof slds_opts / sizeof slds_opts[0]; i++)
        ck_assert_msg(strstr(out_text, slds_opts[i]) != NULL, "no '%s'",
                      slds_opts[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* slds segment --filtered and slds summary (statsmodels' quantities;   */
/* the values themselves: tests/test_statsmodels.c)                    */

START_TEST(test_slds_filtered_summary)
{
    const char *gdp = data("gdp_growth.csv"), *model = tmp("gdp.json");
    ASSERT_OK(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2",
                  "--markov", "--seed", "1", "-q", "-o", model));
    ASSERT_OK(RUN("slds", "segment", model, gdp, "--filtered"));
    ck_assert_msg(strncmp(out_text, "p0,p1,mode,viterbi,f0,f1\n", 25) == 0,
                  "%.60s", out_text);
    /* row 0 is conditioned on: empty; every step's f0 + f1 = 1; the last
     * step's filtered probability is its smoothed one; some step differs */
    const char *line = strchr(out_text, '\n') + 1;
    ck_assert(strncmp(line, ",,,,,\n", 6) == 0);
    size_t steps = 0;
    double gap = 0, last_p = NAN, last_f = NAN;
    for (line = strchr(line, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        double p0, p1, f0, f1;
        int mode, vit;
        ck_assert_int_eq(sscanf(line, "%lf,%lf,%d,%d,%lf,%lf", &p0, &p1, &mode,
                                &vit, &f0, &f1),
                         6);
        ck_assert_double_eq_tol(f0 + f1, 1.0, 1e-12);
        gap = fmax(gap, fabs(f0 - p0));
        last_p = p0;
        last_f = f0;
        steps++;
    }
    ck_assert_uint_eq(steps, 201);
    ck_assert_double_gt(gap, 0.1);
    ck_assert_double_eq_tol(last_f, last_p, 1e-12);
    /* the summary: statsmodels' parameter names, z = estimate / std_err */
    ASSERT_OK(RUN("slds", "summary", model, gdp));
    ck_assert_msg(strncmp(out_text, "parameter,estimate,std_err,z\n", 29) == 0,
                  "%.60s", out_text);
    static const char *const names[] = {"p[0->0]",  "p[1->0]",  "const[0]",
                                        "const[1]", "ar.L1[0]", "ar.L1[1]",
                                        "sigma2[0]", "sigma2[1]"};
    line = strchr(out_text, '\n') + 1;
    for (size_t i = 0; i < 8; i++) {
        char name[32];
        double est, se, z;
        ck_assert_int_eq(sscanf(line, "%31[^,],%lf,%lf,%lf", name, &est, &se,
                                &z),
                         4);
        ck_assert_str_eq(name, names[i]);
        ck_assert_double_gt(se, 0.0);
        ck_assert_double_lt(se, 0.5);
        ck_assert_double_eq_tol(z, est / se, 1e-9 * fabs(z));
        line = strchr(line, '\n') + 1;
    }
    ck_assert_str_eq(line, "");
    ck_assert_ptr_nonnull(strstr(err_text, "log-likelihood"));
    /* refused: --filtered with summary, a standardized model, d = 2 */
    assert_error(RUN("slds", "summary", model, gdp, "--filtered"), 2,
                 "--filtered");
    const char *std = tmp("std.json");
    ASSERT_OK(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2",
                  "--markov", "--standardize", "-q", "-o", std));
    assert_error(RUN("slds", "summary", std, gdp), 1, "--standardize");
    const char *two = tmp("two.json");
    ASSERT_OK(RUN("slds", gdp, "--columns", "realgdp,growth_pct", "-k", "2",
                  "-q", "-o", two));
    assert_error(RUN("slds", "summary", two, gdp), 1, "n_features = 1");
    ASSERT_OK(RUN("slds", "summary", "--help"));
    ck_assert_ptr_nonnull(strstr(out_text, "statsmodels"));
}
END_TEST

/* slds --exog and --switching: the model file's keys, segment and summary
 * read the regressor by name, the shared parts print once; usage errors */
START_TEST(test_slds_exog_switching)
{
    const char *dax = data("dax_vol.csv"), *model = tmp("dax-exog.json");
    ASSERT_OK(RUN("slds", dax, "--ignore", "time_decimal_year", "--exog",
                  "abs_prev_pct", "--markov", "-k", "2", "--switching",
                  "intercept,variance", "--seed", "1", "-q", "-o", model));
    char *json = slurp(model);
    ck_assert_ptr_nonnull(strstr(json, "\"exog_names\": [\"abs_prev_pct\"]"));
    ck_assert_ptr_nonnull(strstr(json, "\"shared\": [\"ar\", \"exog\"]"));
    ck_assert_ptr_nonnull(strstr(json, "\"feature_names\": [\"logret_pct\"]"));
    free(json);
    ASSERT_OK(RUN("slds", "summary", model, dax));
    static const char *const names[] = {
        "p[0->0]",      "p[1->0]",   "const[0]", "const[1]", "ar.L1",
        "abs_prev_pct", "sigma2[0]", "sigma2[1]"};
    const char *line = strchr(out_text, '\n') + 1;
    for (size_t i = 0; i < 8; i++) {
        char name[32];
        ck_assert_int_eq(sscanf(line, "%31[^,],", name), 1);
        ck_assert_str_eq(name, names[i]);
        line = strchr(line, '\n') + 1;
    }
    ck_assert_str_eq(line, "");
    ASSERT_OK(RUN("slds", "segment", model, dax, "-q"));
    ck_assert(strncmp(out_text, "p0,p1,mode,viterbi\n", 19) == 0);
    /* the file without the regressor column */
    assert_error(RUN("slds", "segment", model, data("dax_returns.csv")), 1,
                 "abs_prev_pct");
    /* usage */
    const char *gdp = data("gdp_growth.csv");
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2",
                     "--switching", "slope"),
                 2, "unknown part 'slope'");
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2",
                     "--switching", "intercept", "--covariance", "diag"),
                 2, "tied");
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2",
                     "--exog", "realgdp", "--standardize"),
                 2, "--standardize");
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2",
                     "--exog", "growth_pct"),
                 2, "also a column");
    /* simulate: the regressors from --exog-file, printed after the series */
    ASSERT_OK(RUN("slds", "simulate", model, "-T", "3", "--exog-file", dax));
    ck_assert(strncmp(out_text, "logret_pct,abs_prev_pct\n", 24) == 0);
    line = strchr(out_text, '\n') + 1;
    double v, u;
    ck_assert_int_eq(sscanf(line, "%lf,%lf", &v, &u), 2);
    ck_assert_double_eq_tol(u, 0.9326550004, 1e-12);
    assert_error(RUN("slds", "simulate", model, "-T", "3"), 1, "--exog-file");
    assert_error(RUN("slds", "simulate", model, "-T", "5000", "--exog-file",
                     dax),
                 1, "fewer than -T 5000");
    ASSERT_OK(RUN("slds", "--help"));
    ck_assert_ptr_nonnull(strstr(out_text, "--switching LIST"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Old Faithful, K = 2, full covariances                               */

/* log N(x; mu, S) for d = 2, written out (independent of the library). */
static double log_normal2(double x0, double x1, const double *mu,
                          const double *s)
{
    const double a = s[0], b = s[1], d = s[3];
    const double det = a * d - b * b;
    const double e0 = x0 - mu[0], e1 = x1 - mu[1];
    const double q = (d * e0 * e0 - 2.0 * b * e0 * e1 + a * e1 * e1) / det;
    return -log(2.0 * 3.14159265358979323846) - 0.5 * log(det) - 0.5 * q;
}

START_TEST(test_faithful_k2)
{
    const char *model = tmp("faithful.json");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2", "-o", model));
    ck_assert_ptr_nonnull(strstr(err_text, "wrote"));
    char keys[512];
    top_keys(model, keys, sizeof keys);
    ck_assert_str_eq(keys, "model,covariance_type,n_components,n_features,"
                           "feature_names,weights,means,covariances,loglik,"
                           "loglik_per_sample,n_iter,converged,bic,aic,"
                           "options");
    lse_json *doc = load_json(model);
    const char *s = NULL;
    lse_error err;
    lse_assert_ok(lse_json_get_string(doc, "model", &s, &err));
    ck_assert_str_eq(s, "gmm");
    lse_assert_ok(lse_json_get_string(doc, "covariance_type", &s, &err));
    ck_assert_str_eq(s, "full");
    ck_assert_int_eq(jint(doc, "n_components"), 2);
    ck_assert_int_eq(jint(doc, "n_features"), 2);
    char **names = NULL;
    size_t n_names = 0;
    lse_assert_ok(
        lse_json_get_strings(doc, "feature_names", &names, &n_names, &err));
    ck_assert_uint_eq(n_names, 2);
    ck_assert_str_eq(names[0], "eruptions");
    ck_assert_str_eq(names[1], "waiting");
    free(names);
    ck_assert_int_eq(jbool(doc, "converged"), 1);
    ck_assert_int_ge(jint(doc, "n_iter"), 1);

    gsl_vector *w = jvec(doc, "weights", 2);
    gsl_matrix *mu = jmat(doc, "means", 2, 2);
    gsl_matrix *cov = jstack(doc, "covariances", 2, 2, 2);
    ck_assert_double_eq_tol(gsl_vector_get(w, 0) + gsl_vector_get(w, 1), 1.0,
                            1e-12);
    /* the long-eruption cluster is the larger one (about 64%) */
    const size_t big = gsl_vector_get(w, 0) > gsl_vector_get(w, 1) ? 0 : 1;
    ck_assert_double_eq_tol(gsl_vector_get(w, big), 0.644, 0.01);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, big, 0), 4.29, 0.02);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, big, 1), 79.97, 0.1);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, 1 - big, 0), 2.04, 0.02);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, 1 - big, 1), 54.48, 0.1);
    for (size_t k = 0; k < 2; k++) { /* symmetric positive definite */
        const double a = gsl_matrix_get(cov, 2 * k, 0);
        const double b = gsl_matrix_get(cov, 2 * k, 1);
        const double c = gsl_matrix_get(cov, 2 * k + 1, 0);
        const double d = gsl_matrix_get(cov, 2 * k + 1, 1);
        ck_assert(a > 0 && d > 0 && a * d - b * c > 0);
        ck_assert_double_eq(b, c);
    }

    /* the log-likelihood, recomputed here from the file's parameters */
    gsl_matrix *x = read_csv(data("faithful.csv"), LSE_MISSING_ERROR);
    ck_assert_uint_eq(x->size1, 272);
    double total = 0.0;
    for (size_t i = 0; i < x->size1; i++) {
        double l[2];
        for (size_t k = 0; k < 2; k++) {
            const double m2[2] = {gsl_matrix_get(mu, k, 0),
                                  gsl_matrix_get(mu, k, 1)};
            const double s2[4] = {gsl_matrix_get(cov, 2 * k, 0),
                                  gsl_matrix_get(cov, 2 * k, 1),
                                  gsl_matrix_get(cov, 2 * k + 1, 0),
                                  gsl_matrix_get(cov, 2 * k + 1, 1)};
            l[k] = log(gsl_vector_get(w, k)) +
                   log_normal2(gsl_matrix_get(x, i, 0), gsl_matrix_get(x, i, 1),
                               m2, s2);
        }
        const double m = fmax(l[0], l[1]);
        total += m + log(exp(l[0] - m) + exp(l[1] - m));
    }
    const double ll = jnum(doc, "loglik");
    ck_assert_double_eq_tol(ll, total, 1e-9 * fabs(total));
    ck_assert_double_eq_tol(jnum(doc, "loglik_per_sample"), ll / 272.0, 1e-12);
    /* -4.1554 per sample in minutes (scikit-learn gives the same fit) */
    ck_assert_double_eq_tol(ll / 272.0, -4.1554, 1e-3);
    /* scikit-learn's BIC/AIC: 11 free parameters for K = 2, d = 2, full */
    ck_assert_double_eq_tol(jnum(doc, "bic"), -2.0 * ll + 11.0 * log(272.0),
                            1e-9);
    ck_assert_double_eq_tol(jnum(doc, "aic"), -2.0 * ll + 22.0, 1e-9);

    /* options: every option, including the seed */
    lse_json *opt = NULL;
    lse_assert_ok(lse_json_get_object(doc, "options", &opt, &err));
    const char *opt_keys[] = {
        "data", "columns", "missing",  "standardize", "covariance", "k",
        "init", "n_init",  "max_iter", "tol",         "reg_covar",  "seed"};
    for (size_t i = 0; i < sizeof opt_keys / sizeof opt_keys[0]; i++)
        ck_assert_msg(lse_json_has(opt, opt_keys[i]), "no options.%s",
                      opt_keys[i]);
    ck_assert_int_eq(jint(opt, "seed"), 0);
    lse_json_free(opt);

    /* without -o the summary goes to stdout */
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2"));
    ck_assert_ptr_nonnull(strstr(out_text, "Gaussian mixture: K = 2"));
    ck_assert_ptr_nonnull(strstr(out_text, "log-likelihood"));
    ck_assert_ptr_nonnull(strstr(out_text, "BIC"));
    ck_assert_ptr_nonnull(strstr(out_text, "converged"));
    ck_assert_ptr_nonnull(strstr(out_text, "component 1: weight"));
    ck_assert_ptr_nonnull(strstr(out_text, "covariance"));
    gsl_matrix_free(x);
    gsl_vector_free(w);
    gsl_matrix_free(mu);
    gsl_matrix_free(cov);
    lse_json_free(doc);
}
END_TEST

/* --standardize stores the transform; the log-likelihood stays in data
 * units (same optimum as the raw fit), and score/predict/sample apply it. */
START_TEST(test_standardize)
{
    const char *raw = tmp("raw.json"), *std = tmp("std.json");
    const char *lab = tmp("lab.csv"), *lab2 = tmp("lab2.csv");
    const char *sc = tmp("score.csv"), *smp = tmp("sample.csv");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2", "-q", "-o", raw));
    ck_assert_str_eq(err_text, "");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2", "--standardize", "-o",
                  std, "--labels", lab));
    char keys[512];
    top_keys(std, keys, sizeof keys);
    ck_assert_ptr_nonnull(strstr(keys, "options,standardize"));
    lse_json *a = load_json(raw), *b = load_json(std);
    ck_assert_double_eq_tol(jnum(a, "loglik"), jnum(b, "loglik"), 1e-4);
    lse_json *s = NULL;
    lse_error err;
    lse_assert_ok(lse_json_get_object(b, "standardize", &s, &err));
    gsl_vector *mean = jvec(s, "mean", 2), *scale = jvec(s, "scale", 2);
    ck_assert_double_eq_tol(gsl_vector_get(mean, 0), 3.4877830882352941, 1e-12);
    ck_assert_double_eq_tol(gsl_vector_get(scale, 1), 13.57, 0.01);
    /* the means in the file are standardized */
    gsl_matrix *mu = jmat(b, "means", 2, 2);
    ck_assert(fabs(gsl_matrix_get(mu, 0, 1)) < 3.0);

    ASSERT_OK(RUN("gmm", "predict", std, data("faithful.csv"), "-o", lab2));
    char *t1 = slurp(lab), *t2 = slurp(lab2);
    ck_assert_str_eq(t1, t2);
    free(t1);
    free(t2);
    ASSERT_OK(RUN("gmm", "score", std, data("faithful.csv"), "-o", sc));
    gsl_matrix *ll = read_csv(sc, LSE_MISSING_ERROR);
    double total = 0.0;
    for (size_t i = 0; i < ll->size1; i++)
        total += gsl_matrix_get(ll, i, 0);
    ck_assert_double_eq_tol(total, jnum(b, "loglik"), 1e-9 * fabs(total));
    ASSERT_OK(
        RUN("gmm", "sample", std, "-n", "2000", "--seed", "4", "-o", smp));
    gsl_matrix *x = read_csv(smp, LSE_MISSING_ERROR);
    double m1 = 0.0;
    for (size_t i = 0; i < x->size1; i++)
        m1 += gsl_matrix_get(x, i, 1) / (double)x->size1;
    ck_assert_double_eq_tol(m1, 70.9, 1.5); /* waiting, in minutes */
    gsl_matrix_free(x);
    gsl_matrix_free(ll);
    gsl_matrix_free(mu);
    gsl_vector_free(mean);
    gsl_vector_free(scale);
    lse_json_free(s);
    lse_json_free(a);
    lse_json_free(b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Iris, K = 3, labels against the species                             */

START_TEST(test_iris_k3)
{
    const char *model = tmp("iris.json"), *lab = tmp("labels.csv");
    ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "3", "--ignore", "species",
                  "-o", model, "--labels", lab));
    lse_json *doc = load_json(model);
    ck_assert_int_eq(jint(doc, "n_features"), 4);
    ck_assert_int_eq(jint(doc, "n_components"), 3);
    char **names = NULL;
    size_t n = 0;
    lse_error err;
    lse_assert_ok(lse_json_get_strings(doc, "feature_names", &names, &n, &err));
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(names[3], "petal_width");
    free(names);

    lse_table *t = NULL;
    lse_assert_ok(lse_table_read(data("iris.csv"), NULL, &t, &err));
    gsl_matrix *l = read_csv(lab, LSE_MISSING_ERROR);
    ck_assert_uint_eq(l->size1, 150);
    size_t conf[3][3] = {{0}};
    const char *species[3] = {"setosa", "versicolor", "virginica"};
    for (size_t i = 0; i < 150; i++) {
        const char *sp = lse_table_cell(t, i, 4);
        size_t s = 3;
        for (size_t j = 0; j < 3; j++)
            if (strcmp(sp, species[j]) == 0)
                s = j;
        ck_assert_uint_lt(s, 3);
        const double v = gsl_matrix_get(l, i, 0);
        ck_assert(v == 0.0 || v == 1.0 || v == 2.0);
        conf[s][(size_t)v]++;
    }
    /* best matching of components to species */
    const size_t perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                               {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    size_t best = 0;
    for (size_t p = 0; p < 6; p++) {
        size_t hit = 0;
        for (size_t s = 0; s < 3; s++)
            hit += conf[s][perm[p][s]];
        if (hit > best)
            best = hit;
    }
    /* a full-covariance GMM separates the species well (145/150 here;
     * scikit-learn reports about 97%) */
    ck_assert_uint_ge(best, 140);
    lse_table_free(t);
    gsl_matrix_free(l);
    lse_json_free(doc);

    /* without --ignore the species column is an error with its position */
    assert_error(RUN("gmm", data("iris.csv"), "-k", "3"), 1,
                 "iris.csv:2:5: 'setosa' is not a number (column 'species')");
    ck_assert_ptr_nonnull(strstr(err_text, "--ignore"));
    /* --columns picks and orders columns by name or index */
    ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "2", "--columns",
                  "petal_width,1", "-o", model));
    doc = load_json(model);
    lse_assert_ok(lse_json_get_strings(doc, "feature_names", &names, &n, &err));
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(names[0], "petal_width");
    ck_assert_str_eq(names[1], "sepal_length");
    free(names);
    lse_json_free(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Model selection                                                     */

START_TEST(test_select)
{
    const char *model = tmp("sel.json");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "1:4", "--select", "bic",
                  "-o", model, "-q"));
    /* table: header, 4 rows, "best K = ..." */
    double bic[5] = {0}, aic[5] = {0};
    size_t n_rows = 0, marked = 0;
    for (const char *line = strchr(out_text, '\n') + 1;
         line != NULL && *line != '\0';) {
        size_t k, p, it;
        double ll, b, a;
        if (sscanf(line, "%zu %zu %lf %lf %lf %zu", &k, &p, &ll, &b, &a, &it) ==
            6) {
            ck_assert_uint_eq(k, n_rows + 1);
            bic[k] = b;
            aic[k] = a;
            /* scikit-learn's parameter count */
            ck_assert_uint_eq(p, k * 2 + k * 3 + k - 1);
            ck_assert_double_eq_tol(b, -2 * ll + (double)p * log(272.0),
                                    1e-5 * fabs(b));
            if (strstr(line, "<- best") != NULL &&
                strchr(line, '\n') > strstr(line, "<- best"))
                marked = k;
            n_rows++;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    ck_assert_uint_eq(n_rows, 4);
    ck_assert_ptr_nonnull(strstr(out_text, "best K = 2 by BIC"));
    ck_assert_uint_eq(marked, 2);
    for (size_t k = 1; k <= 4; k++)
        ck_assert(bic[2] <= bic[k]);
    lse_json *doc = load_json(model);
    ck_assert_int_eq(jint(doc, "n_components"), 2);
    lse_json_free(doc);

    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "1:4", "--select", "aic",
                  "-o", model, "-q"));
    doc = load_json(model);
    const long long best = jint(doc, "n_components");
    for (size_t k = 1; k <= 4; k++)
        ck_assert(aic[best] <= aic[k] + 1e-6 * fabs(aic[k]));
    lse_json_free(doc);
    /* --select without a range is a usage error */
    assert_error(RUN("gmm", data("faithful.csv"), "-k", "2", "--select", "bic"),
                 2, "--select needs a range");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Reproducibility and round trips                                     */

START_TEST(test_seed_reproducible)
{
    const char *a = tmp("a.json"), *b = tmp("b.json"), *c = tmp("c.json");
    ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "3", "--ignore", "species",
                  "--init", "random", "--n-init", "3", "--seed", "12345", "-o",
                  a, "-q"));
    ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "3", "--ignore", "species",
                  "--init", "random", "--n-init", "3", "--seed", "12345", "-o",
                  b, "-q"));
    char *ta = slurp(a), *tb = slurp(b);
    ck_assert_str_eq(ta, tb);
    ck_assert_ptr_nonnull(strstr(ta, "\"seed\": 12345"));
    free(ta);
    free(tb);
    ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "3", "--ignore", "species",
                  "--init", "random", "--n-init", "3", "--seed", "12346", "-o",
                  c, "-q"));
    char *tc = slurp(c);
    ck_assert_ptr_nonnull(strstr(tc, "\"seed\": 12346"));
    free(tc);
}
END_TEST

/* --threads: any count gives the same model file, byte for byte (the
 * chunked reductions of docs/performance.md); bad counts are usage errors. */
START_TEST(test_threads)
{
    const char *a = tmp("t1.json"), *b = tmp("t2.json"), *c = tmp("t3.json");
    ASSERT_OK(RUN("gmm", data("digits.csv"), "-k", "6", "--ignore", "label",
                  "--covariance", "diag", "--reg-covar", "1e-2", "--max-iter",
                  "15", "--threads", "1", "-o", a, "-q"));
    ASSERT_OK(RUN("gmm", "--threads=2", data("digits.csv"), "-k", "6",
                  "--ignore", "label", "--covariance", "diag", "--reg-covar",
                  "1e-2", "--max-iter", "15", "-o", b, "-q"));
    char *ta = slurp(a), *tb = slurp(b);
    ck_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    ASSERT_OK(RUN("slds", data("dax_returns.csv"), "--columns", "logret_pct",
                  "-k", "2", "--markov", "--max-iter", "10", "--threads", "1",
                  "-o", a, "-q"));
    ASSERT_OK(RUN("slds", data("dax_returns.csv"), "--columns", "logret_pct",
                  "-k", "2", "--markov", "--max-iter", "10", "--threads", "3",
                  "-o", c, "-q"));
    ta = slurp(a);
    char *tc = slurp(c);
    ck_assert_str_eq(ta, tc);
    free(ta);
    free(tc);
    assert_error(RUN("gmm", data("faithful.csv"), "-k", "2", "--threads", "0"),
                 2, "--threads 0");
    assert_error(RUN("slds", data("gdp_growth.csv"), "-k", "2", "--threads"), 2,
                 "--threads needs a value");
    assert_error(RUN("gmm", data("faithful.csv"), "-k", "2", "--threads=x"), 2,
                 "--threads");
}
END_TEST

/* Fit-time outputs equal those of predict on the written file, bit for
 * bit, for every covariance type; the file has the native shape. */
START_TEST(test_roundtrip)
{
    const char *types[] = {"full", "diag", "spherical", "tied"};
    for (size_t i = 0; i < 4; i++) {
        const char *model = tmp("m.json"), *l1 = tmp("l1.csv");
        const char *p1 = tmp("p1.csv"), *l2 = tmp("l2.csv");
        const char *p2 = tmp("p2.csv"), *sc = tmp("sc.csv");
        ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "3", "--ignore", "species",
                      "--covariance", types[i], "-o", model, "--labels", l1,
                      "--proba", p1, "-q"));
        lse_json *doc = load_json(model);
        gsl_matrix *c = NULL;
        gsl_vector *v = NULL;
        lse_error err;
        if (i == 0)
            lse_assert_ok(lse_json_get_stack(doc, "covariances", 3, 4, 4, &c,
                                             NULL, &err));
        else if (i == 1)
            lse_assert_ok(
                lse_json_get_matrix(doc, "covariances", 3, 4, &c, &err));
        else if (i == 2)
            lse_assert_ok(lse_json_get_vector(doc, "covariances", 3, &v, &err));
        else
            lse_assert_ok(
                lse_json_get_matrix(doc, "covariances", 4, 4, &c, &err));
        gsl_matrix_free(c);
        gsl_vector_free(v);
        const double ll = jnum(doc, "loglik");
        lse_json_free(doc);

        ASSERT_OK(RUN("gmm", "predict", model, data("iris.csv"), "-o", l2,
                      "--proba", p2));
        char *a = slurp(l1), *b = slurp(l2);
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
        a = slurp(p1);
        b = slurp(p2);
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
        /* the file's log-likelihood is the sum of the scores */
        ASSERT_OK(RUN("gmm", "score", model, data("iris.csv"), "-o", sc));
        gsl_matrix *s = read_csv(sc, LSE_MISSING_ERROR);
        ck_assert_uint_eq(s->size1, 150);
        double total = 0.0;
        for (size_t r = 0; r < s->size1; r++)
            total += gsl_matrix_get(s, r, 0);
        ck_assert_double_eq_tol(total, ll, 1e-9 * fabs(ll));
        ck_assert_ptr_nonnull(strstr(err_text, "150 rows: total"));
        gsl_matrix_free(s);
    }
    /* predict prints to stdout by default: header + one label per row */
    ASSERT_OK(RUN("gmm", "predict", tmp("m.json"), data("iris.csv")));
    ck_assert(strncmp(out_text, "label\n", 6) == 0);
    size_t lines = 0;
    for (const char *c = out_text; *c != '\0'; c++)
        lines += *c == '\n';
    ck_assert_uint_eq(lines, 151);
    /* sample: header, N rows, reproducible */
    ASSERT_OK(RUN("gmm", "sample", tmp("m.json"), "-n", "5", "--seed", "3"));
    char *first = strdup(out_text);
    ck_assert(strncmp(first,
                      "sepal_length,sepal_width,petal_length,"
                      "petal_width\n",
                      50) == 0);
    ASSERT_OK(RUN("gmm", "sample", tmp("m.json"), "-n", "5", "--seed", "3"));
    ck_assert_str_eq(first, out_text);
    free(first);
}
END_TEST

/* --init FILE.json restarts from the file: EM cannot lower the
 * log-likelihood, and K comes from the file. */
START_TEST(test_init_restart)
{
    const char *a = tmp("a.json"), *b = tmp("b.json");
    ASSERT_OK(RUN("gmm", data("iris.csv"), "-k", "3", "--ignore", "species",
                  "--max-iter", "3", "-o", a, "-q"));
    ASSERT_OK(RUN("gmm", data("iris.csv"), "--init", a, "-o", b, "-q"));
    lse_json *da = load_json(a), *db = load_json(b);
    ck_assert_int_eq(jint(db, "n_components"), 3);
    /* EM with reg_covar may lose a little (docs/models/gmm.md,
     * "Acceleration": 3e-9 here, the regularized fixed point) */
    ck_assert(jnum(db, "loglik") >= jnum(da, "loglik") -
                                        1e-10 * fabs(jnum(da, "loglik")));
    lse_json_free(da);
    lse_json_free(db);
    assert_error(RUN("gmm", data("iris.csv"), "--init", a, "-k", "2"), 1,
                 "n_components = 3 but -k is 2");
    assert_error(RUN("gmm", data("faithful.csv"), "--init", a), 1,
                 "no column 'sepal_length'");
}
END_TEST

/* --log-json: one object per iteration; EM never lowers the likelihood. */
START_TEST(test_log_json)
{
    const char *model = tmp("m.json"), *log_path = tmp("log.jsonl");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "3", "--init", "random",
                  "--seed", "2", "--tol", "1e-8", "--max-iter", "500",
                  "--log-json", log_path, "-o", model, "-q"));
    lse_json *doc = load_json(model);
    const long long n_iter = jint(doc, "n_iter");
    lse_json_free(doc);
    char *text = slurp(log_path);
    long long lines = 0;
    double prev = -INFINITY;
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        lse_json *o = NULL;
        lse_error err;
        lse_assert_ok(
            lse_json_parse(line, (size_t)(nl - line), "log", &o, &err));
        ck_assert_int_eq(jint(o, "iter"), lines + 1);
        ck_assert_int_eq(jint(o, "k"), 3);
        const double ll = jnum(o, "loglik");
        ck_assert_double_eq_tol(jnum(o, "energy"), -ll, 1e-9);
        ck_assert_msg(ll >= prev - 1e-9 * fabs(ll), "loglik fell: %g -> %g",
                      prev, ll);
        prev = ll;
        lse_json_free(o);
        lines++;
        line = nl + 1;
    }
    ck_assert_int_eq(lines, n_iter);
    ck_assert_int_ge(lines, 5);
    free(text);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Known answers                                                       */

static const char truth_gmm[] =
    "{\"model\": \"gmm\", \"covariance_type\": \"full\", \"n_components\": 3,\n"
    " \"n_features\": 2, \"feature_names\": [\"x\", \"y\"],\n"
    " \"weights\": [0.5, 0.3, 0.2],\n"
    " \"means\": [[0, 0], [5, 5], [-4, 6]],\n"
    " \"covariances\": [[[1, 0.5], [0.5, 2]], [[0.5, -0.2], [-0.2, 0.3]],\n"
    "                   [[2, 0], [0, 0.5]]]}\n";

START_TEST(test_known_gmm)
{
    const char *truth = tmp("truth.json"), *x = tmp("x.csv");
    const char *fit = tmp("fit.json"), *comp = tmp("comp.csv");
    write_file(truth, truth_gmm);
    const double n = 4000.0;
    ASSERT_OK(RUN("gmm", "sample", truth, "-n", "4000", "--seed", "11", "-o", x,
                  "--labels", comp));
    ASSERT_OK(RUN("gmm", x, "-k", "3", "--n-init", "3", "--seed", "1", "-o",
                  fit, "-q"));
    lse_json *t = load_json(truth), *f = load_json(fit);
    gsl_vector *tw = jvec(t, "weights", 3), *fw = jvec(f, "weights", 3);
    gsl_matrix *tm = jmat(t, "means", 3, 2), *fm = jmat(f, "means", 3, 2);
    gsl_matrix *tc = jstack(t, "covariances", 3, 2, 2);
    gsl_matrix *fc = jstack(f, "covariances", 3, 2, 2);
    int used[3] = {0, 0, 0};
    for (size_t k = 0; k < 3; k++) {
        size_t j = 3; /* the fitted component with the nearest mean */
        double best = INFINITY;
        for (size_t c = 0; c < 3; c++) {
            const double d0 =
                gsl_matrix_get(fm, c, 0) - gsl_matrix_get(tm, k, 0);
            const double d1 =
                gsl_matrix_get(fm, c, 1) - gsl_matrix_get(tm, k, 1);
            if (d0 * d0 + d1 * d1 < best) {
                best = d0 * d0 + d1 * d1;
                j = c;
            }
        }
        ck_assert(!used[j]);
        used[j] = 1;
        /* tolerance: 5 standard errors of each estimate */
        const double w = gsl_vector_get(tw, k), nk = n * w;
        ck_assert_double_eq_tol(gsl_vector_get(fw, j), w,
                                5 * sqrt(w * (1 - w) / n));
        for (size_t a = 0; a < 2; a++) {
            const double saa = gsl_matrix_get(tc, 2 * k + a, a);
            ck_assert_double_eq_tol(gsl_matrix_get(fm, j, a),
                                    gsl_matrix_get(tm, k, a),
                                    5 * sqrt(saa / nk));
            for (size_t b = 0; b < 2; b++) {
                const double sab = gsl_matrix_get(tc, 2 * k + a, b);
                const double sbb = gsl_matrix_get(tc, 2 * k + b, b);
                ck_assert_double_eq_tol(gsl_matrix_get(fc, 2 * j + a, b), sab,
                                        5 * sqrt((saa * sbb + sab * sab) / nk));
            }
        }
    }
    gsl_vector_free(tw);
    gsl_vector_free(fw);
    gsl_matrix_free(tm);
    gsl_matrix_free(fm);
    gsl_matrix_free(tc);
    gsl_matrix_free(fc);
    lse_json_free(t);
    lse_json_free(f);
}
END_TEST

static const char truth_mix[] =
    "{\"model\": \"slds\", \"markov\": false, \"n_modes\": 2,\n"
    " \"n_features\": 2, \"feature_names\": [\"u\", \"v\"],\n"
    " \"weights\": [0.3, 0.7],\n"
    " \"A\": [[[0.9, 0.1], [-0.2, 0.7]], [[-0.5, 0.0], [0.3, 0.4]]],\n"
    " \"b\": [[1.0, -0.5], [-1.0, 2.0]],\n"
    " \"covariances\": [[[0.04, 0.01], [0.01, 0.09]],\n"
    "                   [[0.25, -0.05], [-0.05, 0.16]]]}\n";

static const char truth_markov[] =
    "{\"model\": \"slds\", \"markov\": true, \"n_modes\": 2,\n"
    " \"n_features\": 1, \"feature_names\": [\"y\"],\n"
    " \"weights\": [0.5, 0.5],\n"
    " \"A\": [[[0.8]], [[-0.3]]], \"b\": [[1.0], [-0.5]],\n"
    " \"covariances\": [[[0.09]], [[0.49]]],\n"
    " \"transition\": [[0.95, 0.05], [0.1, 0.9]],\n"
    " \"initial\": [0.5, 0.5]}\n";

/* Fit an SLDS to a series simulated from @p truth_text and compare after
 * matching modes by their offsets b; returns the fitted mode of each true
 * mode in @p match. */
static void check_slds(const char *truth_text, int markov, size_t d,
                       size_t match[2])
{
    const char *truth = tmp("truth.json"), *x = tmp("x.csv");
    const char *fit = tmp("fit.json");
    write_file(truth, truth_text);
    ASSERT_OK(RUN("slds", "simulate", truth, "-T", "4000", "--seed", "5", "-o",
                  x, "--modes", tmp("true_modes.csv")));
    if (markov)
        ASSERT_OK(RUN("slds", x, "-k", "2", "--markov", "--n-init", "2", "-o",
                      fit, "--modes", tmp("modes.csv"), "-q"));
    else
        ASSERT_OK(RUN("slds", x, "-k", "2", "--n-init", "2", "-o", fit,
                      "--modes", tmp("modes.csv"), "-q"));
    char keys[512];
    top_keys(fit, keys, sizeof keys);
    ck_assert_str_eq(keys,
                     markov ? "model,markov,n_modes,n_features,feature_names,"
                              "weights,A,b,covariances,transition,initial,"
                              "loglik,loglik_per_step,n_iter,converged,bic,"
                              "aic,options"
                            : "model,markov,n_modes,n_features,feature_names,"
                              "weights,A,b,covariances,loglik,"
                              "loglik_per_step,n_iter,converged,bic,aic,"
                              "options");
    lse_json *t = load_json(truth), *f = load_json(fit);
    ck_assert_int_eq(jbool(f, "markov"), markov);
    ck_assert_int_eq(jint(f, "n_modes"), 2);
    ck_assert_int_eq(jint(f, "n_features"), (long long)d);
    ck_assert_double_eq_tol(jnum(f, "loglik_per_step") * 3999.0,
                            jnum(f, "loglik"), 1e-9 * fabs(jnum(f, "loglik")));
    gsl_matrix *ta = jstack(t, "A", 2, d, d), *fa = jstack(f, "A", 2, d, d);
    gsl_matrix *tb = jmat(t, "b", 2, d), *fb = jmat(f, "b", 2, d);
    gsl_matrix *tc = jstack(t, "covariances", 2, d, d);
    gsl_matrix *fc = jstack(f, "covariances", 2, d, d);
    /* match by the distance between offsets */
    double same = 0.0, swap = 0.0;
    for (size_t j = 0; j < d; j++) {
        same += fabs(gsl_matrix_get(fb, 0, j) - gsl_matrix_get(tb, 0, j)) +
                fabs(gsl_matrix_get(fb, 1, j) - gsl_matrix_get(tb, 1, j));
        swap += fabs(gsl_matrix_get(fb, 1, j) - gsl_matrix_get(tb, 0, j)) +
                fabs(gsl_matrix_get(fb, 0, j) - gsl_matrix_get(tb, 1, j));
    }
    match[0] = same <= swap ? 0 : 1;
    match[1] = 1 - match[0];
    /* tolerances: A 0.05, b 0.15 (the intercept's error grows with the
     * regressor's mean), covariances 15% of the largest entry; the
     * sampling errors are about a third of these at 4000 steps */
    for (size_t k = 0; k < 2; k++) {
        const size_t m = match[k];
        double cmax = 0.0;
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                cmax = fmax(cmax, fabs(gsl_matrix_get(tc, k * d + i, j)));
        for (size_t i = 0; i < d; i++) {
            ck_assert_double_eq_tol(gsl_matrix_get(fb, m, i),
                                    gsl_matrix_get(tb, k, i), 0.15);
            for (size_t j = 0; j < d; j++) {
                ck_assert_double_eq_tol(gsl_matrix_get(fa, m * d + i, j),
                                        gsl_matrix_get(ta, k * d + i, j), 0.05);
                ck_assert_double_eq_tol(gsl_matrix_get(fc, m * d + i, j),
                                        gsl_matrix_get(tc, k * d + i, j),
                                        0.15 * cmax);
            }
        }
    }
    if (!markov) {
        gsl_vector *tw = jvec(t, "weights", 2), *fw = jvec(f, "weights", 2);
        for (size_t k = 0; k < 2; k++) /* 5 standard errors: 0.036 */
            ck_assert_double_eq_tol(gsl_vector_get(fw, match[k]),
                                    gsl_vector_get(tw, k), 0.04);
        gsl_vector_free(tw);
        gsl_vector_free(fw);
    } else {
        gsl_matrix *tp = jmat(t, "transition", 2, 2);
        gsl_matrix *fp = jmat(f, "transition", 2, 2);
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(fp, match[i], match[j]),
                                        gsl_matrix_get(tp, i, j), 0.03);
        gsl_vector *w = jvec(f, "weights", 2), *p0 = jvec(f, "initial", 2);
        /* weights: the stationary distribution of the fitted chain */
        const double p01 = gsl_matrix_get(fp, 0, 1);
        const double p10 = gsl_matrix_get(fp, 1, 0);
        ck_assert_double_eq_tol(gsl_vector_get(w, 0), p10 / (p01 + p10), 1e-9);
        ck_assert_double_eq_tol(gsl_vector_get(p0, 0) + gsl_vector_get(p0, 1),
                                1.0, 1e-9);
        gsl_vector_free(w);
        gsl_vector_free(p0);
        gsl_matrix_free(tp);
        gsl_matrix_free(fp);
    }
    gsl_matrix_free(ta);
    gsl_matrix_free(fa);
    gsl_matrix_free(tb);
    gsl_matrix_free(fb);
    gsl_matrix_free(tc);
    gsl_matrix_free(fc);
    lse_json_free(t);
    lse_json_free(f);
}

/* Fraction of steps whose column @p col of the modes table, mapped through
 * @p match, equals the true mode. */
static double mode_accuracy(const size_t match[2], size_t col)
{
    gsl_matrix *truth = read_csv(tmp("true_modes.csv"), LSE_MISSING_ERROR);
    gsl_matrix *modes = read_csv(tmp("modes.csv"), LSE_MISSING_KEEP);
    ck_assert_uint_eq(truth->size1, 4000);
    ck_assert_uint_eq(modes->size1, 4000);
    ck_assert(isnan(gsl_matrix_get(modes, 0, col))); /* not a step */
    size_t hit = 0;
    for (size_t i = 1; i < 4000; i++) {
        const size_t want = match[(size_t)gsl_matrix_get(truth, i, 0)];
        hit += (size_t)gsl_matrix_get(modes, i, col) == want;
    }
    gsl_matrix_free(truth);
    gsl_matrix_free(modes);
    return (double)hit / 3999.0;
}

START_TEST(test_known_slds_mixture)
{
    size_t match[2];
    check_slds(truth_mix, 0, 2, match);
    /* p0, p1, mode: the modes are well separated */
    ck_assert(mode_accuracy(match, 2) > 0.9);
    /* segment on the written file reproduces the fit's table */
    const char *seg = tmp("seg.csv");
    ASSERT_OK(RUN("slds", "segment", tmp("fit.json"), tmp("x.csv"), "-o", seg));
    char *a = slurp(tmp("modes.csv")), *b = slurp(seg);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    ck_assert_ptr_nonnull(strstr(err_text, "3999 steps: log-likelihood"));
}
END_TEST

START_TEST(test_known_slds_markov)
{
    size_t match[2];
    check_slds(truth_markov, 1, 1, match);
    /* p0, p1, mode, viterbi */
    ck_assert(mode_accuracy(match, 3) > 0.9);
    ck_assert(mode_accuracy(match, 2) > 0.9);
    ASSERT_OK(RUN("slds", "segment", tmp("fit.json"), tmp("x.csv")));
    char *a = slurp(tmp("modes.csv"));
    ck_assert_str_eq(a, out_text);
    free(a);
    /* simulate is reproducible */
    ASSERT_OK(
        RUN("slds", "simulate", tmp("fit.json"), "-T", "50", "--seed", "9"));
    char *first = strdup(out_text);
    ASSERT_OK(
        RUN("slds", "simulate", tmp("fit.json"), "-T", "50", "--seed", "9"));
    ck_assert_str_eq(first, out_text);
    free(first);
}
END_TEST

/* Real series: GDP growth with a Markov switch, lags, sequences. */
START_TEST(test_slds_gdp)
{
    const char *model = tmp("gdp.json"), *modes = tmp("modes.csv");
    ASSERT_OK(RUN("slds", data("gdp_growth.csv"), "--columns", "growth_pct",
                  "--markov", "-k", "2", "-o", model, "--modes", modes));
    lse_json *doc = load_json(model);
    ck_assert_int_eq(jbool(doc, "converged"), 1);
    const double ll = jnum(doc, "loglik");
    ck_assert(isfinite(ll));
    ck_assert_double_eq_tol(jnum(doc, "loglik_per_step"), ll / 201.0, 1e-12);
    lse_json_free(doc);
    /* standardized: the same fit, log-likelihood in data units */
    const char *std = tmp("gdp_std.json");
    ASSERT_OK(RUN("slds", data("gdp_growth.csv"), "--columns", "growth_pct",
                  "--markov", "-k", "2", "--standardize", "-o", std, "-q"));
    doc = load_json(std);
    ck_assert_double_eq_tol(jnum(doc, "loglik"), ll, 1e-4 * fabs(ll));
    ck_assert(lse_json_has(doc, "standardize"));
    lse_json_free(doc);
    gsl_matrix *m = read_csv(modes, LSE_MISSING_KEEP);
    ck_assert_uint_eq(m->size1, 202);
    ck_assert_uint_eq(m->size2, 4);
    for (size_t i = 1; i < 202; i++)
        ck_assert_double_eq_tol(
            gsl_matrix_get(m, i, 0) + gsl_matrix_get(m, i, 1), 1.0, 1e-9);
    gsl_matrix_free(m);
    /* two lags: A is [K][d][d L] */
    ASSERT_OK(RUN("slds", data("gdp_growth.csv"), "--columns", "growth_pct",
                  "-k", "2", "--lags", "2", "-o", model, "-q"));
    doc = load_json(model);
    gsl_matrix *a = jstack(doc, "A", 2, 1, 2);
    gsl_matrix_free(a);
    lse_json_free(doc);
    /* --sequence: two sequences, the first step of each has no mode */
    const char *s = tmp("seq.csv");
    FILE *f = fopen(s, "w");
    ck_assert_ptr_nonnull(f);
    fputs("id,y\n", f);
    for (int i = 0; i < 60; i++)
        fprintf(f, "%s,%.4f\n", i < 30 ? "a" : "b",
                sin(0.7 * i) + 0.1 * cos(3.1 * i * i));
    fclose(f);
    ASSERT_OK(RUN("slds", s, "--sequence", "id", "-k", "2", "--modes", modes,
                  "-o", model, "-q"));
    m = read_csv(modes, LSE_MISSING_KEEP);
    ck_assert_uint_eq(m->size1, 60);
    ck_assert(isnan(gsl_matrix_get(m, 0, 0)));
    ck_assert(isnan(gsl_matrix_get(m, 30, 0)));
    ck_assert(!isnan(gsl_matrix_get(m, 29, 0)));
    ck_assert(!isnan(gsl_matrix_get(m, 31, 0)));
    gsl_matrix_free(m);
    doc = load_json(model);
    ck_assert_double_eq_tol(jnum(doc, "loglik_per_step") * 58.0,
                            jnum(doc, "loglik"), 1e-9);
    lse_json_free(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bad input: one line "lsefit: ...", status 1 (2 for usage errors)    */

START_TEST(test_bad_input)
{
    const char *empty = tmp("empty.csv"), *hdr = tmp("hdr.csv");
    const char *ragged = tmp("ragged.csv"), *text = tmp("text.csv");
    const char *nan = tmp("nan.csv"), *inf = tmp("inf.csv");
    const char *two = tmp("two.csv"), *cst = tmp("const.csv");
    const char *w = tmp("w.csv"), *bad = tmp("bad.json");
    const char *model = tmp("model.json"), *shape = tmp("shape.json");
    const char *slds = tmp("slds.json"), *out = tmp("out.json");
    write_file(empty, "");
    write_file(hdr, "a,b\n");
    write_file(ragged, "a,b\n1,2\n3\n");
    write_file(text, "a,b\n1,2\n3,x\n");
    write_file(nan, "a,b\n1,2\n3,NaN\n");
    write_file(inf, "a,b\n1,2\n3,inf\n");
    write_file(two, "a,b\n1,2\n3,5\n");
    write_file(cst, "a,b\n1,2\n3,2\n4,2\n5,2\n");
    write_file(w, "a,b,w\n1,2,1\n3,1,-1\n4,4,1\n");
    write_file(bad, "{\"model\": \"gmm\", ");
    write_file(slds, truth_markov);

    assert_error(RUN("gmm", tmp("missing.csv"), "-k", "2"), 1, "cannot open");
    assert_error(RUN("gmm", empty, "-k", "2"), 1, "empty.csv: no data rows");
    assert_error(RUN("gmm", hdr, "-k", "2"), 1, "hdr.csv:1: no data rows");
    assert_error(RUN("gmm", ragged, "-k", "2"), 1,
                 "ragged.csv:3: 1 field, expected 2");
    assert_error(RUN("gmm", text, "-k", "2"), 1,
                 "text.csv:3:2: 'x' is not a number (column 'b')");
    assert_error(RUN("gmm", nan, "-k", "2"), 1,
                 "nan.csv:3:2: missing value (column 'b')");
    assert_error(RUN("gmm", inf, "-k", "2"), 1,
                 "inf.csv:3:2: 'inf' is not finite (column 'b')");
    assert_error(RUN("gmm", two, "-k", "3"), 1,
                 "two.csv: 2 usable rows but K = 3 components");
    assert_error(RUN("gmm", two, "-k", "0"), 2, "-k 0: must be >= 1");
    assert_error(RUN("gmm", two, "-k", "-1"), 2, "-k '-1'");
    assert_error(RUN("gmm", cst, "-k", "1"), 1,
                 "const.csv: column 'b' is constant");
    ck_assert_ptr_nonnull(strstr(err_text, "--reg-covar"));
    ASSERT_OK(RUN("gmm", cst, "-k", "1", "--reg-covar", "1e-3", "-q"));
    assert_error(RUN("gmm", w, "-k", "1", "--weights", "w"), 1,
                 "w.csv:3:3: weight -1 is negative (column 'w')");
    assert_error(RUN("gmm", two, "-k", "1", "--bogus"), 1 + 1,
                 "unknown option '--bogus'");
    assert_error(RUN("gmm", two, "-k", "1", "-x"), 2, "unknown option -x");
    assert_error(RUN("gmm", two, "-k"), 2, "option -k needs a value");
    /* a long option's value missing: its name, not its option code */
    assert_error(RUN("gmm", two, "-k", "1", "--tol"), 2,
                 "option '--tol' needs a value");
    assert_error(RUN("slds", "segment", "--sequence"), 2,
                 "option '--sequence' needs a value");
    assert_error(RUN("gmm", two), 2, "missing -k K");
    assert_error(RUN("gmm", "-k", "2"), 2, "missing the data file");
    assert_error(RUN("gmm", two, "-k", "1", "--covariance", "round"), 2,
                 "--covariance 'round'");
    assert_error(RUN("gmm", two, "-k", "1", "--tol", "abc"), 2, "--tol 'abc'");
    assert_error(RUN("frobnicate"), 2, "unknown command 'frobnicate'");
    assert_error(RUN("slds", two, "-k", "1", "--missing", "marginalize"), 1,
                 "--missing marginalize is not supported");
    assert_error(RUN("gmm", two, "-k", "1", "--missing", "all"), 2,
                 "--missing 'all'");
    assert_error(RUN("slds", two, "-k", "1", "--weights", "a"), 2,
                 "--weights is not supported by slds");

    /* model files */
    assert_error(RUN("gmm", "predict", bad, two), 1, "bad.json:1:");
    assert_error(RUN("gmm", "predict", tmp("none.json"), two), 1,
                 "cannot open");
    assert_error(RUN("gmm", "predict", slds, two), 1,
                 "model is 'slds', expected 'gmm'");
    assert_error(RUN("slds", "segment", bad, two), 1, "bad.json:1:");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2", "-o", model, "-q"));
    assert_error(RUN("slds", "segment", model, two), 1,
                 "model is 'gmm', expected 'slds'");
    assert_error(RUN("gmm", "predict", model, two), 1, "no column 'eruptions'");
    assert_error(RUN("gmm", "predict", model, two, "--columns", "a"), 1,
                 "1 data column but the model");
    assert_error(
        RUN("gmm", "predict", model, data("iris.csv"), "--columns", "1,2,3"), 1,
        "3 data columns but the model");
    assert_error(RUN("gmm", "score", model, two, "--columns", "a"), 1,
                 "n_features = 2");
    write_file(shape, "{\"model\": \"gmm\", \"covariance_type\": \"full\",\n"
                      " \"n_components\": 2, \"n_features\": 2,\n"
                      " \"feature_names\": [\"a\", \"b\"],\n"
                      " \"weights\": [0.5, 0.5], \"means\": [[0, 0]],\n"
                      " \"covariances\": [[[1, 0], [0, 1]], [[1, 0], [0, "
                      "1]]]}\n");
    assert_error(RUN("gmm", "predict", shape, two), 1,
                 "key 'means' must be a 2 x 2 array");
    write_file(shape, "{\"model\": \"gmm\", \"covariance_type\": \"full\",\n"
                      " \"n_components\": 1, \"n_features\": 2,\n"
                      " \"feature_names\": [\"a\", \"b\"],\n"
                      " \"weights\": [1], \"means\": [[0, 0]],\n"
                      " \"covariances\": [[[1, 2], [2, 1]]]}\n");
    assert_error(RUN("gmm", "sample", shape, "-n", "3"), 1,
                 "key 'covariances'");
    assert_error(RUN("slds", "simulate", slds), 2, "missing -T N");
    assert_error(RUN("slds", two, "-k", "2"), 1,
                 "two.csv: 1 usable steps but K = 2 modes");

    /* an output is written completely or not at all */
    write_file(out, "keep");
    assert_error(RUN("gmm", text, "-k", "1", "-o", out), 1, "not a number");
    char *kept = slurp(out);
    ck_assert_str_eq(kept, "keep");
    free(kept);
    assert_error(RUN("gmm", two, "-k", "1", "-o", tmp("no/such/dir.json")), 1,
                 "dir.json");
    ck_assert(!file_exists(tmp("no/such/dir.json")));
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    const struct dirent *e;
    while ((e = readdir(dd)) != NULL)
        ck_assert_msg(strstr(e->d_name, ".tmp.") == NULL, "left over: %s",
                      e->d_name);
    closedir(dd);
}
END_TEST

/* A component left without data is re-seeded, and the fit says which
 * component, at which iteration and what it did; --quiet silences it. */
START_TEST(test_collapse)
{
    const char *f = tmp("dup.csv"), *model = tmp("dup.json");
    FILE *o = fopen(f, "w");
    ck_assert_ptr_nonnull(o);
    fputs("x,y\n", o);
    for (int i = 0; i < 20; i++)
        fputs("0,0\n10,10\n", o);
    fputs("5,5\n", o);
    fclose(o);
    ASSERT_OK(RUN("gmm", f, "-k", "4", "-o", model));
    ck_assert_msg(strstr(err_text, "lsefit: warning: ") != NULL &&
                      strstr(err_text, "iteration") != NULL &&
                      strstr(err_text, "component") != NULL &&
                      strstr(err_text, "re-seeded at sample") != NULL,
                  "%s", err_text);
    ASSERT_OK(RUN("gmm", f, "-k", "4", "-o", model, "--quiet"));
    ck_assert_str_eq(err_text, "");
}
END_TEST

/* Outputs replace regular files atomically; a FIFO or device (such as
 * /dev/null) is written in place, never renamed over, and a symbolic link
 * keeps pointing at the replaced file. */
START_TEST(test_output_files)
{
    const char *fifo = tmp("fifo"), *real = tmp("real.json");
    const char *link_path = tmp("link.json");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const int fd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader */
    ck_assert_int_ge(fd, 0);
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2", "-o", fifo, "-q"));
    char buf[256];
    const ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    ck_assert_int_gt(got, 20);
    buf[got] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "\"model\": \"gmm\""));
    struct stat sb;
    ck_assert_int_eq(lstat(fifo, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));

    write_file(real, "old");
    ck_assert_int_eq(symlink("real.json", link_path), 0);
    ASSERT_OK(
        RUN("gmm", data("faithful.csv"), "-k", "2", "-o", link_path, "-q"));
    ck_assert_int_eq(lstat(link_path, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    char *t = slurp(real);
    ck_assert_ptr_nonnull(strstr(t, "\"n_components\": 2"));
    free(t);
}
END_TEST

/* --missing drop and sample weights */
START_TEST(test_missing_weights)
{
    const char *f = tmp("m.csv"), *lab = tmp("lab.csv");
    const char *model = tmp("m.json");
    write_file(f, "# a comment\n"
                  "a;b;w\n"
                  "1.0;2.0;1\n"
                  "NA;2.5;1\n"
                  "2.0;;1\n"
                  "1.5;2.2;2\n"
                  "3.0;1.0;0.5\n");
    assert_error(RUN("gmm", f, "-k", "1", "--weights", "w"), 1,
                 "m.csv:4:1: missing value (column 'a')");
    ASSERT_OK(RUN("gmm", f, "-k", "1", "--weights", "w", "--missing", "drop",
                  "--labels", lab, "-o", model, "-q"));
    char *t = slurp(lab);
    ck_assert_str_eq(t, "label\n0\n\n\n0\n0\n");
    free(t);
    lse_json *doc = load_json(model);
    gsl_matrix *mu = jmat(doc, "means", 1, 2);
    /* weighted mean of the kept rows: (1 + 3 + 1.5) / 3.5 */
    ck_assert_double_eq_tol(gsl_matrix_get(mu, 0, 0), 5.5 / 3.5, 1e-9);
    ck_assert_double_eq_tol(jnum(doc, "loglik_per_sample") * 3.5,
                            jnum(doc, "loglik"), 1e-9);
    gsl_matrix_free(mu);
    lse_json_free(doc);
    /* per-row outputs keep one line per data row */
    ASSERT_OK(RUN("gmm", "score", model, f, "--missing", "drop"));
    double v[3];
    ck_assert_int_eq(
        sscanf(out_text, "loglik\n%lf\n\n\n%lf\n%lf\n", &v[0], &v[1], &v[2]),
        3);
    /* standard input */
    stdin_path = data("faithful.csv");
    ASSERT_OK(RUN("gmm", "-", "-k", "2"));
    stdin_path = NULL;
    ck_assert_ptr_nonnull(strstr(out_text, "per sample -4.155"));
}
END_TEST

/* --missing marginalize: each row gives the marginal likelihood of its
 * observed coordinates. */
static const char truth_2d[] =
    "{\"model\": \"gmm\", \"covariance_type\": \"full\", \"n_components\": 2,\n"
    " \"n_features\": 2, \"feature_names\": [\"x\", \"y\"],\n"
    " \"weights\": [0.6, 0.4], \"means\": [[0, 0], [6, 3]],\n"
    " \"covariances\": [[[1, 0.6], [0.6, 1.5]], [[0.8, -0.3], [-0.3, 0.6]]]}\n";

START_TEST(test_marginalize)
{
    const char *truth = tmp("truth.json"), *x = tmp("x.csv");
    const char *xm = tmp("xm.csv"), *fit = tmp("fit.json");
    const char *fit_s = tmp("fit_s.json"), *sc = tmp("sc.csv");
    const char *lab = tmp("lab.csv");
    write_file(truth, truth_2d);
    ASSERT_OK(
        RUN("gmm", "sample", truth, "-n", "2000", "--seed", "21", "-o", x));
    gsl_matrix *v = read_csv(x, LSE_MISSING_ERROR);
    FILE *f = fopen(xm, "w");
    ck_assert_ptr_nonnull(f);
    fputs("x,y\n", f);
    for (size_t i = 0; i < v->size1; i++) { /* y missing in 20% of rows, x
                                               in 14%, both in some */
        if (i % 7 != 3)
            fprintf(f, "%.17g", gsl_matrix_get(v, i, 0));
        fputc(',', f);
        if (i % 5 != 1)
            fprintf(f, "%.17g", gsl_matrix_get(v, i, 1));
        fputc('\n', f);
    }
    fclose(f);
    gsl_matrix_free(v);
    assert_error(RUN("gmm", xm, "-k", "2"), 1, "xm.csv:3:2: missing value");
    ASSERT_OK(RUN("gmm", xm, "-k", "2", "--missing", "marginalize", "-o", fit,
                  "--labels", lab, "-q"));
    lse_json *doc = load_json(fit), *opt = NULL;
    lse_error err;
    const char *s = NULL;
    lse_assert_ok(lse_json_get_object(doc, "options", &opt, &err));
    lse_assert_ok(lse_json_get_string(opt, "missing", &s, &err));
    ck_assert_str_eq(s, "marginalize");
    lse_json_free(opt);
    gsl_vector *w = jvec(doc, "weights", 2);
    gsl_matrix *mu = jmat(doc, "means", 2, 2);
    gsl_matrix *cov = jstack(doc, "covariances", 2, 2, 2);
    const size_t a = gsl_matrix_get(mu, 0, 0) < 3.0 ? 0 : 1;
    /* about 5 standard errors with 1200 and 800 rows, a fifth missing */
    ck_assert_double_eq_tol(gsl_vector_get(w, a), 0.6, 0.06);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, a, 0), 0.0, 0.15);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, a, 1), 0.0, 0.2);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, 1 - a, 0), 6.0, 0.15);
    ck_assert_double_eq_tol(gsl_matrix_get(mu, 1 - a, 1), 3.0, 0.15);
    ck_assert_double_eq_tol(gsl_matrix_get(cov, 2 * a, 1), 0.6, 0.2);

    /* the scores sum to the file's log-likelihood; a row without y scores
     * log sum_k w_k N(x; mu_k0, S_k00), recomputed here */
    ASSERT_OK(
        RUN("gmm", "score", fit, xm, "--missing", "marginalize", "-o", sc));
    gsl_matrix *ll = read_csv(sc, LSE_MISSING_KEEP);
    gsl_matrix *data_m = read_csv(xm, LSE_MISSING_KEEP);
    ck_assert_uint_eq(ll->size1, 2000);
    double total = 0.0;
    for (size_t i = 0; i < ll->size1; i++)
        total += gsl_matrix_get(ll, i, 0);
    ck_assert_double_eq_tol(total, jnum(doc, "loglik"), 1e-9 * fabs(total));
    const size_t row = 1; /* i % 5 == 1: y missing */
    ck_assert(isnan(gsl_matrix_get(data_m, row, 1)));
    const double x0 = gsl_matrix_get(data_m, row, 0);
    double p = 0.0;
    for (size_t k = 0; k < 2; k++) {
        const double s00 = gsl_matrix_get(cov, 2 * k, 0);
        const double e = x0 - gsl_matrix_get(mu, k, 0);
        p += gsl_vector_get(w, k) * exp(-0.5 * e * e / s00) /
             sqrt(2.0 * 3.14159265358979323846 * s00);
    }
    ck_assert_double_eq_tol(gsl_matrix_get(ll, row, 0), log(p), 1e-10);
    /* a row with nothing observed contributes 0 */
    ck_assert_double_eq_tol(gsl_matrix_get(ll, 31, 0), 0.0, 1e-300);
    /* standardizing changes units, not the fit: same log-likelihood in
     * data units (the Jacobian counts observed coordinates only) */
    ASSERT_OK(RUN("gmm", xm, "-k", "2", "--missing", "marginalize",
                  "--standardize", "-o", fit_s, "-q"));
    lse_json *ds = load_json(fit_s);
    ck_assert_double_eq_tol(jnum(ds, "loglik"), jnum(doc, "loglik"),
                            1e-4 * fabs(total));
    lse_json_free(ds);
    /* labels: one per row, also for rows with missing cells */
    gsl_matrix *l = read_csv(lab, LSE_MISSING_ERROR);
    ck_assert_uint_eq(l->size1, 2000);
    gsl_matrix_free(l);
    gsl_matrix_free(ll);
    gsl_matrix_free(data_m);
    gsl_vector_free(w);
    gsl_matrix_free(mu);
    gsl_matrix_free(cov);
    lse_json_free(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Input a user really has                                          */

/* Two well separated clusters of n rows each, "x<sep>y" lines after the
 * header line @p header (NULL: none). */
static void write_clusters(const char *path, const char *header, char sep,
                           size_t n)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    if (header != NULL)
        fprintf(f, "%s\n", header);
    for (size_t i = 0; i < 2 * n; i++) {
        const double c = i < n ? 0.0 : 10.0;
        fprintf(f, "%g%c%g\n", c + 0.1 * (double)(i % 7),
                sep, c - 0.2 * (double)(i % 5));
    }
    ck_assert_int_eq(fclose(f), 0);
}

static char **model_names(const char *path, size_t *n)
{
    lse_json *doc = load_json(path);
    char **names = NULL;
    lse_error err;
    lse_assert_ok(lse_json_get_strings(doc, "feature_names", &names, n, &err));
    lse_json_free(doc);
    return names;
}

/* Duplicate column names in a header or a model file, and a header that
 * is not UTF-8, are refused before any fit. */
START_TEST(test_input_names)
{
    const char *dup = tmp("d.csv"), *m = tmp("m.json"), *m2 = tmp("m2.json");
    const char *lat = tmp("latin1.csv"), *out = tmp("out.json");
    write_file(dup, "a,a\n1,2\n3,4\n5,7\n2,2\n");
    assert_error(RUN("gmm", dup, "-k", "1", "-o", out), 1,
                 "d.csv:1: columns 1 and 2 are both named 'a'");
    ck_assert_ptr_nonnull(strstr(err_text, "rename one of them"));
    ck_assert_int_eq(file_exists(out), 0);

    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "2", "-q", "-o", m));
    lse_json *doc = load_json(m);
    lse_error err;
    const char *const twice[] = {"waiting", "waiting"};
    lse_assert_ok(lse_json_set_strings(doc, "feature_names", twice, 2, &err));
    lse_assert_ok(lse_json_save(doc, m2, &err));
    lse_json_free(doc);
    assert_error(RUN("gmm", "predict", m2, data("faithful.csv")), 1,
                 "m2.json: key 'feature_names' names 'waiting' twice "
                 "(entries 1 and 2)");
    assert_error(RUN("gmm", "score", m2, data("faithful.csv")), 1,
                 "names 'waiting' twice");
    assert_error(RUN("gmm", data("faithful.csv"), "--init", m2), 1,
                 "names 'waiting' twice");

    write_file(lat, "caf\xe9,b\n1,2\n3,4\n5,7\n2,2.5\n");
    assert_error(RUN("gmm", lat, "-k", "1", "-o", out), 1,
                 "latin1.csv: the header name of column 1 is not valid "
                 "UTF-8 (byte 4 is 0xE9");
    ck_assert_ptr_nonnull(strstr(err_text, "iconv -f LATIN1 -t UTF-8"));
    ck_assert_int_eq(file_exists(out), 0);
}
END_TEST

/* --delimiter/--sep, --header/--no-header on every command that reads
 * CSV, and white-space separated files found without them. */
START_TEST(test_input_dialects)
{
    const char *ws = tmp("ws.dat"), *bar = tmp("bar.csv");
    const char *num = tmp("num.csv"), *m = tmp("m.json"), *lab = tmp("l.csv");
    write_clusters(ws, "x   y", ' ', 30);
    ASSERT_OK(RUN("gmm", ws, "-k", "2", "-q", "-o", m));
    size_t n = 0;
    char **names = model_names(m, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(names[0], "x");
    ck_assert_str_eq(names[1], "y");
    free(names);
    ASSERT_OK(RUN("gmm", "predict", m, ws, "-o", lab));
    gsl_matrix *l = read_csv(lab, LSE_MISSING_ERROR);
    ck_assert_uint_eq(l->size1, 60);
    ck_assert_double_ne(gsl_matrix_get(l, 0, 0), gsl_matrix_get(l, 59, 0));
    gsl_matrix_free(l);
    const char *sm = tmp("slds.json");
    ASSERT_OK(
        RUN("slds", ws, "-k", "1", "-q", "--delimiter", "space", "-o", sm));
    ASSERT_OK(RUN("slds", "segment", sm, ws, "-q", "--sep", "whitespace"));

    write_clusters(bar, "a|b", '|', 30);
    assert_error(RUN("gmm", bar, "-k", "2"), 1,
                 "the file was read as one column: give the field separator "
                 "with --delimiter");
    ASSERT_OK(RUN("gmm", bar, "-k", "2", "-q", "--delimiter", "|", "-o", m));
    ASSERT_OK(RUN("gmm", "score", m, bar, "--sep", "|", "-q"));
    ASSERT_OK(RUN("gmm", "predict", m, bar, "--sep=|", "-q"));
    assert_error(RUN("gmm", "predict", m, bar), 1, "--delimiter");
    assert_error(RUN("gmm", bar, "-k", "2", "--delimiter", "ab"), 2,
                 "--delimiter 'ab': expected one character");

    /* a header of numbers is data unless --header says otherwise */
    write_clusters(num, "10,20", ',', 30);
    ASSERT_OK(RUN("gmm", num, "-k", "2", "-q", "--header", "-o", m));
    names = model_names(m, &n);
    ck_assert_str_eq(names[0], "10");
    ck_assert_str_eq(names[1], "20");
    free(names);
    assert_error(RUN("gmm", ws, "-k", "2", "--no-header"), 1,
                 "ws.dat:1:1: 'x' is not a number");
}
END_TEST

/* Binary input fails at once; an input past --max-input-size stops with
 * the option named. */
START_TEST(test_input_limits)
{
    const char *big = tmp("big.csv"), *small = tmp("small.csv");
    write_clusters(big, "a,b", ',', 200);   /* more than 1K */
    write_clusters(small, "a,b", ',', 10);  /* less than 1K */
    assert_error(RUN("gmm", "/dev/zero", "-k", "1"), 1,
                 "/dev/zero:1:1: NUL byte in text");
    assert_error(RUN("slds", "/dev/zero", "-k", "1"), 1, "NUL byte in text");
    assert_error(RUN("gmm", big, "-k", "1", "--max-input-size", "1K"), 1,
                 "big.csv: the input is larger than the limit of 1K "
                 "(--max-input-size): raise it, e.g. --max-input-size 4K");
    stdin_path = big;
    assert_error(RUN("gmm", "-", "-k", "1", "--max-input-size", "1k"), 1,
                 "<stdin>: the input is larger than the limit of 1K");
    stdin_path = NULL;
    ASSERT_OK(RUN("gmm", small, "-k", "1", "-q", "--max-input-size", "1KiB"));
    ASSERT_OK(RUN("gmm", big, "-k", "1", "-q", "--max-input-size", "1M"));
    assert_error(RUN("gmm", small, "-k", "1", "--max-input-size", "0"), 2,
                 "--max-input-size '0': expected a size");
    assert_error(RUN("gmm", small, "-k", "1", "--max-input-size", "3X"), 2,
                 "--max-input-size '3X'");
}
END_TEST

/* Values whose squares overflow are refused before fitting, with the way
 * out; --standardize fits them; subnormal data get a warning. */
START_TEST(test_input_scale)
{
    const char *huge = tmp("huge.csv"), *top = tmp("top.csv");
    const char *sub = tmp("sub.csv"), *m = tmp("m.json");
    write_file(huge, "x,y\n1e200,2e200\n-1e200,1\n3e199,4\n5,-1e200\n"
                     "7e199,3\n");
    write_file(top, "x,y\n1.7e308,1.2e308\n-1.7e308,1\n3e307,4\n"
                    "5,-1.5e308\n0,0\n");
    write_file(sub, "x,y\n1e-310,2e-310\n3e-310,1e-310\n2e-310,4e-310\n"
                    "-1e-310,-1e-310\n5e-310,3e-310\n4e-310,-2e-310\n");
    assert_error(RUN("gmm", huge, "-k", "1"), 1,
                 "huge.csv:2:1: value 1e+200 (column 'x') is too large for "
                 "a covariance");
    ck_assert_ptr_nonnull(strstr(err_text, "pass --standardize, or divide "
                                           "the column by 1e200"));
    assert_error(RUN("gmm", huge, "-k", "2"), 1, "too large for a covariance");
    assert_error(RUN("slds", huge, "-k", "1"), 1, "too large for a covariance");
    ASSERT_OK(RUN("gmm", huge, "-k", "1", "-q", "--standardize", "-o", m));
    lse_json *doc = load_json(m);
    ck_assert(isfinite(jnum(doc, "loglik")));
    lse_json_free(doc);
    ASSERT_OK(RUN("gmm", "score", m, huge, "-q"));
    ASSERT_OK(RUN("gmm", top, "-k", "1", "-q", "--standardize", "-o", m));
    doc = load_json(m);
    ck_assert(isfinite(jnum(doc, "loglik")));
    gsl_matrix *mu = NULL;
    lse_error err;
    lse_assert_ok(lse_json_get_matrix(doc, "means", 1, 2, &mu, &err));
    ck_assert_double_eq_tol(gsl_matrix_get(mu, 0, 0), 0.0, 1e-12);
    gsl_matrix_free(mu);
    lse_json_free(doc);

    ASSERT_OK(RUN("gmm", sub, "-k", "2"));
    ck_assert_msg(strstr(err_text, "warning: ") != NULL &&
                      strstr(err_text, "column 'x' has no value larger than "
                                       "5e-310 in magnitude: its squares "
                                       "underflow") != NULL,
                  "stderr: %s", err_text);
    ASSERT_OK(RUN("gmm", sub, "-k", "2", "-q"));
    ck_assert_str_eq(err_text, "");
    ASSERT_OK(RUN("gmm", sub, "-k", "2", "--standardize"));
    ck_assert_ptr_null(strstr(err_text, "underflow"));
}
END_TEST

/* Messages that name the option and the way out. */
START_TEST(test_input_messages)
{
    const char *mis = tmp("mis.csv"), *two = tmp("two.csv");
    write_file(mis, "x,y\n1,\n,2\n3,NA\n");
    write_file(two, "a,b\n1,2\n3,5\n4,4\n");
    assert_error(RUN("gmm", mis, "-k", "1", "--missing", "drop"), 1,
                 "mis.csv: no complete row is left after --missing drop");
    ck_assert_ptr_nonnull(strstr(err_text, "--missing marginalize"));
    ck_assert_ptr_null(strstr(err_text, "use --missing drop"));
    assert_error(RUN("gmm", two, "-k", "1:"), 2,
                 "-k 1:: the range needs an upper end, e.g. 1:8");
    assert_error(RUN("gmm", two, "-k", "1", "--columns", ""), 1,
                 "--columns '': empty name in the list");
    assert_error(RUN("gmm", two, "-k", "1", "--columns", "a,"), 1,
                 "--columns 'a,': empty name");
    assert_error(RUN("gmm", two, "-k", "1", "--ignore", " "), 1,
                 "--ignore ' ': empty name");
}
END_TEST

/* --accel squarem (the default): the same optimum as --accel none on
 * Faithful K = 4 in fewer iterations, recorded in the model's options; a
 * bad value is a one-line usage error. */
START_TEST(test_accel)
{
    const char *plain = tmp("plain.json"), *fast = tmp("fast.json");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "4", "--accel", "none",
                  "-q", "-o", plain));
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "4", "-q", "-o", fast));
    lse_json *a = load_json(plain), *b = load_json(fast);
    lse_error err;
    double la, lb;
    lse_assert_ok(lse_json_get_number(a, "loglik", &la, &err));
    lse_assert_ok(lse_json_get_number(b, "loglik", &lb, &err));
    ck_assert_double_eq_tol(la, lb, 1e-6 * fabs(la));
    ck_assert_int_lt(2 * jint(b, "n_iter"), jint(a, "n_iter"));
    char *text = slurp(fast);
    ck_assert_ptr_nonnull(strstr(text, "\"accel\": \"squarem\""));
    free(text);
    text = slurp(plain);
    ck_assert_ptr_nonnull(strstr(text, "\"accel\": \"none\""));
    free(text);
    lse_json_free(a);
    lse_json_free(b);
    assert_error(RUN("gmm", data("faithful.csv"), "-k", "2", "--accel", "fast"),
                 2, "--accel 'fast': expected none or squarem");
}
END_TEST

/* --covariance VEV with one K: an ordinary fit of mclust's model, whose
 * file names it and whose predict/score work. */
START_TEST(test_mclust_single_fit)
{
    const char *model = tmp("vev.json");
    ASSERT_OK(RUN("gmm", data("faithful.csv"), "-k", "3", "--covariance",
                  "VEV", "-q", "-o", model));
    lse_json *doc = load_json(model);
    lse_error err;
    const char *s = NULL;
    lse_assert_ok(lse_json_get_string(doc, "covariance_type", &s, &err));
    ck_assert_str_eq(s, "VEV");
    double ll;
    lse_assert_ok(lse_json_get_number(doc, "loglik", &ll, &err));
    /* mclust's VEV, K = 3 optimum (tests/ref/mclust_ref.txt) */
    ck_assert_double_eq_tol(ll, -1122.5493903326844, 1e-6 * 1122.5);
    lse_json_free(doc);
    ASSERT_OK(RUN("gmm", "score", model, data("faithful.csv")));
    ck_assert_ptr_nonnull(strstr(err_text, "total log-likelihood -1122.549"));
    ASSERT_OK(RUN("gmm", "predict", model, data("faithful.csv")));
    ck_assert_ptr_nonnull(strstr(out_text, "label\n"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Outputs: never an input, all or none, signals, modes               */

/* Start lsefit with argv (NULL-terminated, without the binary) and stdout
 * sent to @p out_path; @p env_extra ("NAME=value") is added to the
 * environment when not NULL; stderr goes to DIR/.stderr. */
static pid_t spawn_start(const char *const *args, const char *out_path,
                         const char *env_extra)
{
    const char *bin = getenv("LSEFIT");
    ck_assert_msg(bin != NULL, "LSEFIT is not set");
    const char *argv[40];
    size_t n = 0;
    argv[n++] = bin;
    for (size_t i = 0; args[i] != NULL; i++) {
        ck_assert_uint_lt(n, 38);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    char *envp[512];
    size_t ne = 0;
    for (char **e = environ; *e != NULL && ne < 510; e++)
        envp[ne++] = *e;
    if (env_extra != NULL)
        envp[ne++] = (char *)env_extra;
    envp[ne] = NULL;
    char err_path[128];
    snprintf(err_path, sizeof err_path, "%s/.stderr", dir);
    posix_spawn_file_actions_t fa;
    ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(
                         &fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(
                         &fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    pid_t pid;
    const int rc =
        posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(rc == 0, "cannot run %s: %s", argv[0], strerror(rc));
    return pid;
}

/* Wait for a process of spawn_start: its wait status; stderr in err_text. */
static int spawn_wait(pid_t pid)
{
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char err_path[128];
    snprintf(err_path, sizeof err_path, "%s/.stderr", dir);
    free(err_text);
    err_text = slurp(err_path);
    unlink(err_path);
    return status;
}

static int spawn_status(const char *const *args, const char *out_path,
                        const char *env_extra)
{
    return spawn_wait(spawn_start(args, out_path, env_extra));
}

/* 1 when an entry of the test directory holds ".tmp." */
static int has_tmp(void)
{
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    const struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(dd)) != NULL)
        found = strstr(e->d_name, ".tmp.") != NULL;
    closedir(dd);
    return found;
}

/* No temporary file is left in the test directory. */
static void assert_no_tmp(void)
{
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    const struct dirent *e;
    while ((e = readdir(dd)) != NULL)
        ck_assert_msg(strstr(e->d_name, ".tmp.") == NULL, "left over: %s",
                      e->d_name);
    closedir(dd);
}

static void assert_text(const char *path, const char *want)
{
    char *t = slurp(path);
    ck_assert_str_eq(t, want);
    free(t);
}

/* Once: an output that is an input destroyed it with exit 0. Every
 * command refuses it before any work, with exit 2 and one line naming
 * both files and the way out; nothing is written. */
START_TEST(test_output_is_input)
{
    const char *x = tmp("x.csv"), *m = tmp("m.json"), *y = tmp("y.json");
    const char *s = tmp("s.json"), *lnk = tmp("link.csv");
    char *orig = slurp(data("faithful.csv"));
    write_file(x, orig);
    ASSERT_OK(RUN("gmm", x, "-k", "2", "-q", "-o", m));
    char *model = slurp(m);

    assert_error(RUN("gmm", x, "-k", "2", "-q", "--labels", x, "-o", m), 2,
                 "--labels '");
    ck_assert_ptr_nonnull(strstr(err_text, "is the same file as the data"));
    ck_assert_ptr_nonnull(strstr(err_text, "choose another output file"));
    assert_error(RUN("gmm", x, "-k", "2", "-q", "-o", x), 2, "-o '");
    assert_error(RUN("gmm", x, "-k", "2", "-q", "--proba", x), 2, "--proba");
    assert_error(RUN("gmm", x, "-k", "2", "-q", "--log-json", x, "-o", y), 2,
                 "--log-json");
    ck_assert(!file_exists(y));
    assert_error(RUN("gmm", x, "-k", "2", "-q", "--labels", y, "-o", y), 2,
                 "each output needs its own file");
    ck_assert(!file_exists(y));
    /* the same file under another name: a symbolic link, a "./" path */
    ck_assert_int_eq(symlink("x.csv", lnk), 0);
    assert_error(RUN("gmm", x, "-k", "2", "-q", "-o", lnk), 2, "the data");
    char dotted[600];
    snprintf(dotted, sizeof dotted, "%s/./y.json", dir);
    assert_error(RUN("gmm", x, "-k", "2", "-q", "--labels", dotted, "-o", y), 2,
                 "each output needs its own file");
    assert_error(RUN("gmm", x, "-k", "2", "-q", "--init", m, "-o", m), 2,
                 "--init '");
    assert_error(RUN("gmm", "predict", m, x, "-o", m), 2, "the model");
    assert_error(RUN("gmm", "predict", m, x, "--proba", x), 2, "the data");
    assert_error(RUN("gmm", "predict", m, x, "-o", y, "--proba", y), 2,
                 "own file");
    assert_error(RUN("gmm", "score", m, x, "-o", x), 2, "the data");
    assert_error(RUN("gmm", "sample", m, "-n", "5", "-o", m), 2, "the model");
    assert_error(RUN("gmm", "sample", m, "-n", "5", "--labels", m), 2,
                 "the model");
    /* --shards: every file the pattern matches is an input (refused before
     * MPI starts, so this holds with and without MPI) */
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/x*.csv", dir);
    assert_error(RUN("gmm", "--mpi", "--shards", pattern, "-k", "2", "-o", x),
                 2, "--shards");
    /* slds: fit, segment, simulate */
    const char *gdp = tmp("gdp.csv");
    char *gdp_text = slurp(data("gdp_growth.csv"));
    write_file(gdp, gdp_text);
    ASSERT_OK(
        RUN("slds", gdp, "--columns", "growth_pct", "-k", "2", "-q", "-o", s));
    char *smodel = slurp(s);
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2", "-q",
                     "--modes", gdp, "-o", y),
                 2, "the series");
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2", "-q",
                     "--log-json", y, "-o", y),
                 2, "own file");
    assert_error(RUN("slds", gdp, "--columns", "growth_pct", "-k", "2", "-q",
                     "--init", s, "-o", s),
                 2, "--init");
    assert_error(
        RUN("slds", "segment", s, gdp, "--columns", "growth_pct", "-o", gdp), 2,
        "the series");
    assert_error(RUN("slds", "simulate", s, "-T", "5", "-o", s), 2,
                 "the model");
    assert_error(RUN("slds", "simulate", s, "-T", "5", "--modes", s), 2,
                 "the model");
    ck_assert(!file_exists(y));
    /* nothing was touched */
    assert_text(x, orig);
    assert_text(m, model);
    assert_text(s, smodel);
    assert_text(gdp, gdp_text);
    /* devices are not files: /dev/null may take several outputs, "-" too */
    ASSERT_OK(RUN("gmm", x, "-k", "2", "-q", "-o", "/dev/null", "--labels",
                  "/dev/null", "--log-json", "/dev/null"));
    ASSERT_OK(RUN("gmm", "predict", m, x, "-o", "-", "--proba", "-"));
    assert_no_tmp();
    free(orig);
    free(model);
    free(smodel);
    free(gdp_text);
}
END_TEST

/* Once: with several outputs one failure left the others written (the
 * model although the table to stdout failed). Every output is committed
 * only when all succeeded, stdout included. */
START_TEST(test_outputs_all_or_none)
{
    const char *m = tmp("m.json"), *p = tmp("p.csv"), *l = tmp("l.csv");
    const char *x = data("faithful.csv");
    write_file(m, "old model");
    write_file(p, "old proba");
    /* the table of a range of K goes to stdout, which fails */
    const char *fit[] = {"gmm", x,         "-k", "1:2",      "-q", "-o",
                         m,     "--proba", p,    "--labels", l,    NULL};
    int st = spawn_status(fit, "/dev/full", NULL);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st,
                  err_text);
    ck_assert_ptr_nonnull(strstr(err_text, "standard output"));
    assert_text(m, "old model");
    assert_text(p, "old proba");
    ck_assert(!file_exists(l));
    assert_no_tmp();
    /* predict to stdout fails: the --proba file is not written either */
    write_file(m, "");
    ASSERT_OK(RUN("gmm", x, "-k", "2", "-q", "-o", m));
    const char *pred[] = {"gmm", "predict", m, x, "--proba", p, NULL};
    st = spawn_status(pred, "/dev/full", NULL);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_text(p, "old proba");
    /* a failing output among several: nothing is written */
    char *model = slurp(m);
    assert_error(RUN("gmm", x, "-k", "2", "-q", "-o", tmp("new.json"),
                     "--proba", "/dev/full"),
                 1, "/dev/full");
    ck_assert(!file_exists(tmp("new.json")));
    assert_error(
        RUN("gmm", "sample", m, "-n", "3", "-o", p, "--labels", "/dev/full"), 1,
        "/dev/full");
    assert_text(p, "old proba");
    assert_text(m, model);
    assert_no_tmp();
    free(model);
}
END_TEST

/* Once: SIGINT while writing left "p.csv.tmp.XXXXXX" behind. The signal
 * arrives after every output was written to its temporary file (the test
 * hook LSEGRAPH_TEST_SIGNAL_BEFORE_COMMIT raises it there): lsefit dies
 * of it, no temporary file is left and the old files are untouched. */
START_TEST(test_outputs_signal)
{
    const char *m = tmp("m.json"), *p = tmp("p.csv"), *lg = tmp("log.json");
    const char *big = tmp("big.csv");
    FILE *f = fopen(big, "w");
    ck_assert_ptr_nonnull(f);
    fputs("a,b\n", f);
    for (int i = 0; i < 100000; i++) /* two clusters, deterministic */
        fprintf(f, "%d.%d,%d\n", (i % 2) * 10 + i % 7, i % 10, i % 13);
    ck_assert_int_eq(fclose(f), 0);
    write_file(m, "old model");
    write_file(p, "old proba");
    const int sigs[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        char env[64];
        snprintf(env, sizeof env, "LSEGRAPH_TEST_SIGNAL_BEFORE_COMMIT=%d",
                 sigs[i]);
        const char *args[] = {"gmm", big,       "-k", "2",          "-q", "-o",
                              m,     "--proba", p,    "--log-json", lg,   NULL};
        const int st = spawn_status(args, "/dev/null", env);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i],
                      "status %d: %s", st, err_text);
        assert_text(m, "old model");
        assert_text(p, "old proba");
        ck_assert(!file_exists(lg));
        assert_no_tmp();
    }
    /* a real Ctrl-C, sent the moment a temporary file appears: lsefit
     * either dies of it with the old files untouched, or had committed
     * already and every file is new; never a mix, never a temporary */
    for (int round = 0; round < 3; round++) {
        const char *args[] = {"gmm", big, "-k",      "2", "-q",
                              "-o",  m,   "--proba", p,   NULL};
        const pid_t pid = spawn_start(args, "/dev/null", NULL);
        int st = 0;
        pid_t done = 0;
        while ((done = waitpid(pid, &st, WNOHANG)) == 0)
            if (has_tmp()) {
                kill(pid, SIGINT);
                break;
            }
        if (done != pid) /* not reaped yet */
            st = spawn_wait(pid);
        else {
            free(err_text);
            err_text = slurp(tmp(".stderr"));
        }
        char *mt = slurp(m), *pt = slurp(p);
        if (WIFSIGNALED(st)) {
            ck_assert_int_eq(WTERMSIG(st), SIGINT);
            ck_assert_str_eq(mt, "old model");
            ck_assert_str_eq(pt, "old proba");
        } else {
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s",
                          err_text);
            ck_assert(strncmp(mt, "{", 1) == 0);
            ck_assert(strncmp(pt, "p0,p1,uncertainty\n", 18) == 0);
            write_file(m, "old model");
            write_file(p, "old proba");
        }
        free(mt);
        free(pt);
        assert_no_tmp();
    }
    /* without the signal the same command replaces all three */
    const char *args[] = {"gmm", big,       "-k", "2",          "-q", "-o",
                          m,     "--proba", p,    "--log-json", lg,   NULL};
    const int st = spawn_status(args, "/dev/null", NULL);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err_text);
    ck_assert(file_exists(lg));
    char *t = slurp(p);
    ck_assert(strncmp(t, "p0,p1,uncertainty\n", 18) == 0);
    free(t);
    assert_no_tmp();
}
END_TEST

/* Once: a read-only target was silently replaced, and a replaced file
 * lost its mode. */
START_TEST(test_outputs_modes)
{
    const char *m = tmp("m.json"), *l = tmp("l.csv");
    const char *x = data("faithful.csv");
    write_file(m, "keep me");
    ck_assert_int_eq(chmod(m, 0444), 0);
    assert_error(RUN("gmm", x, "-k", "2", "-q", "-o", m, "--labels", l), 1,
                 "is read-only");
    ck_assert_ptr_nonnull(strstr(err_text, "chmod u+w"));
    assert_text(m, "keep me");
    ck_assert(!file_exists(l));
    /* a writable file keeps its permission bits when replaced */
    ck_assert_int_eq(chmod(m, 0640), 0);
    write_file(l, "old");
    ck_assert_int_eq(chmod(l, 0604), 0);
    ASSERT_OK(RUN("gmm", x, "-k", "2", "-q", "-o", m, "--labels", l));
    struct stat sb;
    ck_assert_int_eq(stat(m, &sb), 0);
    ck_assert_int_eq((int)(sb.st_mode & 07777), 0640);
    ck_assert_int_eq(stat(l, &sb), 0);
    ck_assert_int_eq((int)(sb.st_mode & 07777), 0604);
    /* a directory, or a missing directory, is refused before the fit */
    assert_error(RUN("gmm", x, "-k", "2", "-q", "-o", dir), 1,
                 "is a directory");
    assert_error(RUN("gmm", x, "-k", "2", "-q", "-o", tmp("no/m.json")), 1,
                 "No such file or directory");
    assert_no_tmp();
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("lsefit");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_help_version);
    tcase_add_test(tc, test_slds_filtered_summary);
    tcase_add_test(tc, test_slds_exog_switching);
    tcase_add_test(tc, test_faithful_k2);
    tcase_add_test(tc, test_standardize);
    tcase_add_test(tc, test_iris_k3);
    tcase_add_test(tc, test_select);
    tcase_add_test(tc, test_seed_reproducible);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_init_restart);
    tcase_add_test(tc, test_log_json);
    tcase_add_test(tc, test_known_gmm);
    tcase_add_test(tc, test_known_slds_mixture);
    tcase_add_test(tc, test_known_slds_markov);
    tcase_add_test(tc, test_slds_gdp);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_missing_weights);
    tcase_add_test(tc, test_marginalize);
    tcase_add_test(tc, test_collapse);
    tcase_add_test(tc, test_output_files);
    tcase_add_test(tc, test_input_names);
    tcase_add_test(tc, test_input_dialects);
    tcase_add_test(tc, test_input_limits);
    tcase_add_test(tc, test_input_scale);
    tcase_add_test(tc, test_input_messages);
    tcase_add_test(tc, test_accel);
    tcase_add_test(tc, test_mclust_single_fit);
    tcase_add_test(tc, test_output_is_input);
    tcase_add_test(tc, test_outputs_all_or_none);
    tcase_add_test(tc, test_outputs_signal);
    tcase_add_test(tc, test_outputs_modes);
    suite_add_tcase(s, tc);
    return s;
}
