/* Conventions users bring to lsefit and energyviz (docs/lsefit.md,
 * docs/energyviz.md): global options before the command, --init names as
 * scikit-learn spells them and --init-file, "did you mean" for misspelt
 * options and commands, -V/--version in both tools, a write error on
 * standard output is an error, messages without the library's function
 * names, and one spelling of non-finite numbers (Inf, -Inf, NaN).
 *
 * The tools' paths come from the LSEFIT and ENERGYVIZ environment
 * variables (tests/meson.build; ENERGYVIZ is unset when energyviz is not
 * built). tools/cliutil.c, the edit distance both tools use, is compiled
 * in and tested directly. */
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/cliutil.h"
#include "lse_check.h"
#include "lse_tmpdir.h"

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

extern char **environ;

static char dir[64];
static char *out_text, *err_text;
static const char *stdout_path; /* stdout of the next run, or NULL */

static void setup(void)
{
    lse_tmpdir_make(dir, sizeof dir, "cli");
    out_text = err_text = NULL;
    stdout_path = NULL;
}

static void teardown(void)
{
    lse_tmpdir_remove(dir);
    free(out_text);
    free(err_text);
    out_text = err_text = NULL;
}

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    lse_error err;
    if (lse_file_read(path, &text, &len, &err) != LSE_OK)
        return strdup("");
    return text;
}

static const char *tmp(const char *name)
{
    static char paths[16][512];
    static size_t next;
    char *p = paths[next++ % 16];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static const char *data(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", LSE_DATA_DIR, name);
    return p;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* Run the tool named by the environment variable @p var with the
 * NULL-terminated arguments; the exit status, stdout and stderr in
 * out_text and err_text (stdout to stdout_path when that is set). */
static int run(const char *var, ...)
{
    const char *bin = getenv(var);
    ck_assert_msg(bin != NULL, "%s is not set", var);
    const char *argv[40];
    size_t n = 0;
    argv[n++] = bin;
    va_list ap;
    va_start(ap, var);
    for (const char *a = va_arg(ap, const char *); a != NULL;
         a = va_arg(ap, const char *)) {
        ck_assert_uint_lt(n, 38);
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
                         &fa, 1, stdout_path ? stdout_path : out_path,
                         O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(
                         &fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    pid_t pid;
    const int rc =
        posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
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
    ck_assert_msg(WIFEXITED(status), "%s died; stderr: %s", bin, err_text);
    return WEXITSTATUS(status);
}

#define LSEFIT(...) run("LSEFIT", __VA_ARGS__, (const char *)NULL)
#define ENERGYVIZ(...) run("ENERGYVIZ", __VA_ARGS__, (const char *)NULL)

#define ASSERT_OK(expr)                                                        \
    do {                                                                       \
        const int rc_ = (expr);                                                \
        ck_assert_msg(rc_ == 0, "exit %d; stderr: %s", rc_, err_text);         \
    } while (0)

/* Failed with @p want: one line "PROG: ...", containing @p msg. */
static void assert_error(int got, int want, const char *prog, const char *msg)
{
    ck_assert_msg(got == want, "exit %d, want %d; stderr: %s", got, want,
                  err_text);
    ck_assert_msg(strncmp(err_text, prog, strlen(prog)) == 0 &&
                      strncmp(err_text + strlen(prog), ": ", 2) == 0,
                  "stderr: %s", err_text);
    ck_assert_msg(strstr(err_text, msg) != NULL, "want '%s' in: %s", msg,
                  err_text);
    const char *nl = strchr(err_text, '\n');
    ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", err_text);
}

/* No library function name ("lse_graph_energy: ") in @p text. */
static void assert_no_function_names(const char *text)
{
    for (const char *p = strstr(text, "lse_"); p != NULL;
         p = strstr(p + 1, "lse_")) {
        const char *q = p + 4;
        while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
               *q == '_')
            q++;
        ck_assert_msg(!(q[0] == ':' && q[1] == ' '), "internal name in: %s",
                      text);
    }
}

/* ------------------------------------------------------------------ */
/* tools/cliutil.c                                                     */

START_TEST(test_edit_distance)
{
    ck_assert_uint_eq(cli_edit_distance("", ""), 0);
    ck_assert_uint_eq(cli_edit_distance("abc", ""), 3);
    ck_assert_uint_eq(cli_edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(cli_edit_distance("layuot", "layout"), 1); /* swap */
    ck_assert_uint_eq(cli_edit_distance("n_init", "n-init"), 0);
    ck_assert_uint_eq(cli_edit_distance("n-components", "components"), 2);
    /* symmetric */
    ck_assert_uint_eq(cli_edit_distance("sitting", "kitten"), 3);
    static const char *const opts[] = {"components", "n-init", "init",
                                       "init-file", "threads"};
    ck_assert_str_eq(cli_suggest("n_init", opts, 5), "n-init");
    ck_assert_str_eq(cli_suggest("n_components", opts, 5), "components");
    ck_assert_str_eq(cli_suggest("thread", opts, 5), "threads");
    ck_assert_ptr_null(cli_suggest("bogus", opts, 5));
    ck_assert_ptr_null(cli_suggest("x", opts, 5));
    char msg[128] = "f: lse_graph_energy: term 't': x = -nan, y=inf, "
                    "'inf' (-inf) [nan]";
    cli_clean_message(msg);
    ck_assert_str_eq(msg, "f: term 't': x = NaN, y=Inf, 'inf' (-Inf) [NaN]");
    ck_assert_str_eq(cli_strip_function("lse_a: lse_b_c: rest"), "rest");
    ck_assert_str_eq(cli_strip_function("lse_a rest"), "lse_a rest");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Item: global options before the command                             */

START_TEST(test_global_options)
{
    const char *a = tmp("a.json"), *b = tmp("b.json"), *c = tmp("c.json");
    ASSERT_OK(LSEFIT("--threads", "2", "gmm", data("faithful.csv"), "-k", "2",
                     "-q", "-o", a));
    ASSERT_OK(LSEFIT("--threads=1", "-q", "gmm", data("faithful.csv"), "-k",
                     "2", "-o", b));
    ck_assert_str_eq(err_text, ""); /* -q before the command */
    ASSERT_OK(LSEFIT("gmm", data("faithful.csv"), "-k", "2", "-q",
                     "--threads", "2", "-o", c));
    char *ta = slurp(a), *tb = slurp(b), *tc = slurp(c);
    ck_assert_str_eq(ta, tb);
    ck_assert_str_eq(ta, tc);
    free(ta);
    free(tb);
    free(tc);
    /* -v before the command: a progress line per iteration */
    ASSERT_OK(LSEFIT("-v", "gmm", data("faithful.csv"), "-k", "2",
                     "--init", "kmeans++", "--max-iter", "3", "-o", a));
    ck_assert_msg(strstr(err_text, "iteration 3") != NULL, "%s", err_text);
    ASSERT_OK(LSEFIT("--quiet", "slds", "segment", "--help"));
    assert_error(LSEFIT("--threads", "0", "gmm", data("faithful.csv"), "-k",
                        "2"),
                 2, "lsefit", "--threads 0");
    assert_error(LSEFIT("--threads"), 2, "lsefit", "--threads needs a value");
    assert_error(LSEFIT("-q"), 2, "lsefit", "missing the command");
    assert_error(LSEFIT("-k", "2", "gmm", data("faithful.csv")), 2, "lsefit",
                 "the options of a command go after it");
    assert_error(LSEFIT("--thread", "2", "gmm"), 2, "lsefit",
                 "did you mean --threads?");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Item: --init names, --init-file                                     */

START_TEST(test_init_names)
{
    const char *a = tmp("a.json"), *b = tmp("b.json"), *c = tmp("c.json");
    const char *km = tmp("kmeans.json");
    /* scikit-learn's k-means++ spelling is lsefit's kmeans++ */
    ASSERT_OK(LSEFIT("gmm", data("iris.csv"), "--ignore", "species", "-k", "3",
                     "--init", "k-means++", "-q", "-o", a));
    ASSERT_OK(LSEFIT("gmm", data("iris.csv"), "--ignore", "species", "-k", "3",
                     "--init", "kmeans++", "-q", "-o", b));
    char *ta = slurp(a), *tb = slurp(b);
    ck_assert_str_eq(ta, tb);
    ck_assert_ptr_nonnull(strstr(ta, "\"init\": \"kmeans++\""));
    free(ta);
    free(tb);
    /* kmeans: scikit-learn's default, k-means run to convergence */
    ASSERT_OK(LSEFIT("gmm", data("iris.csv"), "--ignore", "species", "-k", "3",
                     "--init", "kmeans", "-q", "-o", km));
    char *tk = slurp(km);
    ck_assert_ptr_nonnull(strstr(tk, "\"init\": \"kmeans\""));
    free(tk);
    /* a model file: --init-file, or --init with a path that exists */
    ASSERT_OK(LSEFIT("gmm", data("iris.csv"), "--init-file", a, "-q", "-o",
                     b));
    ASSERT_OK(LSEFIT("gmm", data("iris.csv"), "--init", a, "-q", "-o", c));
    ta = slurp(b);
    tb = slurp(c);
    ck_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    /* slds: its k-means++ start is a k-means, so kmeans names it too */
    ASSERT_OK(LSEFIT("slds", data("dax_returns.csv"), "--columns",
                     "logret_pct", "-k", "2", "--max-iter", "5", "--init",
                     "kmeans", "-q", "-o", a));
    ASSERT_OK(LSEFIT("slds", data("dax_returns.csv"), "--columns",
                     "logret_pct", "-k", "2", "--max-iter", "5", "-q", "-o",
                     b));
    ta = slurp(a);
    tb = slurp(b);
    ck_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    /* not a method, not a file */
    assert_error(LSEFIT("gmm", data("iris.csv"), "-k", "3", "--init", "kmean"),
                 2, "lsefit", "--init 'kmean': unknown method; did you mean");
    assert_error(LSEFIT("gmm", data("iris.csv"), "-k", "3", "--init",
                        "random_from_data"),
                 2, "lsefit", "--init-file FILE");
    ck_assert_ptr_nonnull(strstr(err_text, "kmeans++, k-means++, kmeans, "
                                           "random"));
    assert_error(LSEFIT("slds", data("iris.csv"), "-k", "3", "--init",
                        "kmeens"),
                 2, "lsefit", "did you mean kmeans");
    assert_error(LSEFIT("gmm", data("iris.csv"), "--init-file",
                        tmp("none.json")),
                 1, "lsefit", "none.json");
    assert_error(LSEFIT("gmm", data("iris.csv"), "-k", "3", "--init", "kmeans",
                        "--init-file", a),
                 2, "lsefit", "give one --init or --init-file");
    assert_error(LSEFIT("gmm", data("iris.csv"), "-k", "2:3", "--init-file",
                        a),
                 2, "lsefit", "--init-file FILE fixes K");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Item: did you mean                                                  */

START_TEST(test_did_you_mean)
{
    const char *m = tmp("m.json");
    const char *x = data("faithful.csv");
    assert_error(LSEFIT("gmm", x, "-k", "2", "--n_init", "3"), 2, "lsefit",
                 "unknown option '--n_init'; did you mean --n-init?");
    assert_error(LSEFIT("gmm", x, "--n-components", "2"), 2, "lsefit",
                 "did you mean -k/--components?");
    assert_error(LSEFIT("gmm", x, "-k", "2", "--n_components=2"), 2, "lsefit",
                 "unknown option '--n_components'; did you mean "
                 "-k/--components?");
    assert_error(LSEFIT("slds", x, "-k", "2", "--lgas", "2"), 2, "lsefit",
                 "did you mean --lags?");
    assert_error(LSEFIT("gmm", "predict", m, x, "--probba", "p.csv"), 2,
                 "lsefit", "did you mean --proba?");
    assert_error(LSEFIT("gmm", x, "-k", "2", "--bogus"), 2, "lsefit",
                 "unknown option '--bogus'");
    ck_assert_ptr_null(strstr(err_text, "did you mean"));
    assert_error(LSEFIT("gmm", "fit", x, "-k", "2"), 2, "lsefit",
                 "did you mean 'lsefit gmm");
    ck_assert_msg(strstr(err_text, x) != NULL, "%s", err_text);
    assert_error(LSEFIT("slds", "fit", x, "-k", "2"), 2, "lsefit",
                 "did you mean 'lsefit slds");
    assert_error(LSEFIT("gmm", "fit", "-k", "2"), 2, "lsefit",
                 "did you mean 'lsefit gmm DATA.csv'?");
    assert_error(LSEFIT("gmm", "predcit", m, x), 2, "lsefit",
                 "did you mean 'lsefit gmm predict'?");
    assert_error(LSEFIT("slds", "segmnet", m, x), 2, "lsefit",
                 "did you mean 'lsefit slds segment'?");
    assert_error(LSEFIT("gmmm", x), 2, "lsefit", "did you mean 'gmm'?");
    if (getenv("ENERGYVIZ") == NULL)
        return;
    assert_error(ENERGYVIZ("gmm", "--layuot", "dot", "-o", tmp("x.svg")), 2,
                 "energyviz", "did you mean --layout?");
    assert_error(ENERGYVIZ("gmn", "-o", tmp("x.svg")), 2, "energyviz",
                 "unknown model 'gmn'; did you mean gmm?");
    assert_error(ENERGYVIZ("gmm", "--bogus", "-o", tmp("x.svg")), 2,
                 "energyviz", "unknown option '--bogus'");
    ck_assert_ptr_null(strstr(err_text, "did you mean"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Item: -V/--version, write errors on standard output                 */

START_TEST(test_version)
{
    ASSERT_OK(LSEFIT("-V"));
    char *v = strdup(out_text);
    ASSERT_OK(LSEFIT("--version"));
    ck_assert_str_eq(v, out_text);
    ck_assert_msg(strncmp(v, "lsefit (lsegraph) ", 18) == 0, "%s", v);
    free(v);
    if (getenv("ENERGYVIZ") == NULL)
        return;
    ASSERT_OK(ENERGYVIZ("-V"));
    v = strdup(out_text);
    ASSERT_OK(ENERGYVIZ("--version"));
    ck_assert_str_eq(v, out_text);
    ck_assert_msg(strncmp(v, "energyviz (lsegraph) ", 21) == 0, "%s", v);
    /* one version for both tools */
    ASSERT_OK(LSEFIT("--version"));
    ck_assert_str_eq(v + strlen("energyviz"), out_text + strlen("lsefit"));
    free(v);
}
END_TEST

START_TEST(test_stdout_full)
{
    if (access("/dev/full", W_OK) != 0)
        return; /* no /dev/full here */
    const char *m = tmp("m.json");
    ASSERT_OK(LSEFIT("gmm", data("faithful.csv"), "-k", "2", "-q", "-o", m));
    stdout_path = "/dev/full";
    assert_error(LSEFIT("--help"), 1, "lsefit",
                 "cannot write to standard output");
    assert_error(LSEFIT("-V"), 1, "lsefit", "cannot write to standard output");
    assert_error(LSEFIT("gmm", "--help"), 1, "lsefit",
                 "cannot write to standard output");
    assert_error(LSEFIT("slds", "simulate", "-h"), 1, "lsefit",
                 "cannot write to standard output");
    assert_error(LSEFIT("gmm", "predict", m, data("faithful.csv")), 1,
                 "lsefit", "cannot write to standard output");
    assert_error(LSEFIT("gmm", "sample", m, "-n", "5"), 1, "lsefit",
                 "cannot write to standard output");
    /* the fitted model printed to stdout */
    assert_error(LSEFIT("gmm", data("faithful.csv"), "-k", "2", "-q"), 1,
                 "lsefit", "cannot write to standard output");
    if (getenv("ENERGYVIZ") == NULL)
        return;
    assert_error(ENERGYVIZ("--help"), 1, "energyviz",
                 "cannot write to standard output");
    assert_error(ENERGYVIZ("-V"), 1, "energyviz",
                 "cannot write to standard output");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Item: messages without function names, one spelling of Inf and NaN */

START_TEST(test_messages)
{
    /* values too large for a covariance: the library's message, as the
     * user sees it (no lse_graph_energy, no -nan) */
    const char *big = tmp("big.csv");
    write_file(big, "a,b\n1e308,-1e308\n1.5e308,1e308\n-1e308,1.2e308\n"
                    "1e307,1e308\n");
    ck_assert_int_eq(LSEFIT("gmm", big, "-k", "1"), 1);
    assert_no_function_names(err_text);
    ck_assert_msg(strstr(err_text, "nan") == NULL &&
                      strstr(err_text, "inf ") == NULL,
                  "%s", err_text);
    /* --standardize scales before it sums, so these values fit */
    ck_assert_int_eq(LSEFIT("gmm", big, "-k", "1", "-q", "--standardize"), 0);
    assert_no_function_names(err_text);
    ck_assert_msg(strstr(err_text, "nan") == NULL, "%s", err_text);
    if (getenv("ENERGYVIZ") == NULL)
        return;
    /* the file, what went wrong, the way out; no "render: lse_...: " */
    assert_error(ENERGYVIZ("gmm", "-o", "/nonexistent-dir/x.svg"), 1,
                 "energyviz", "cannot write '/nonexistent-dir/x.svg'");
    assert_no_function_names(err_text);
    ck_assert_ptr_null(strstr(err_text, "energyviz: render:"));
    ck_assert_ptr_nonnull(strstr(err_text, "give -o a path"));
    const char *spec = tmp("s.dot");
    write_file(spec, "digraph { a [rows=0, dim=1]; }\n");
    assert_error(ENERGYVIZ(spec, "-o", tmp("x.svg")), 1, "energyviz",
                 "s.dot:1:");
    assert_no_function_names(err_text);
    ck_assert_ptr_null(strstr(err_text, "energyviz: spec:"));
    ck_assert_ptr_nonnull(strstr(err_text, "docs/energyviz.md"));
    const char *model = tmp("m.json");
    write_file(model, "{\"model\": \"gmm\"}\n");
    assert_error(ENERGYVIZ(model, "-o", tmp("x.svg")), 1, "energyviz",
                 "m.json: ");
    assert_no_function_names(err_text);
    ck_assert_ptr_null(strstr(err_text, "energyviz: model:"));
    ck_assert_ptr_nonnull(strstr(err_text, "lsefit writes"));
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("conventions");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_edit_distance);
    tcase_add_test(tc, test_global_options);
    tcase_add_test(tc, test_init_names);
    tcase_add_test(tc, test_did_you_mean);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_stdout_full);
    tcase_add_test(tc, test_messages);
    suite_add_tcase(s, tc);
    return s;
}
