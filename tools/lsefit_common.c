/* lsefit: the helpers every command calls (lsefit_common.h): messages,
 * option values, progress lines and the --log-json stream, and the
 * command's output set (all outputs or none). The dispatcher (lsefit.c)
 * and the commands call these; nothing here calls a command. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glob.h>
#include <sys/stat.h>

#include "cliutil.h"
#include "lsefit_common.h"
#include "tool_outputs.h"

int lsefit_quiet = 0;
int lsefit_verbose = 0;
void (*lsefit_fail_hook)(const char *message) = NULL;

/* ------------------------------------------------------------------ */
/* Messages                                                            */

/* Messages for the user: no library function names nested inside, Inf
 * and NaN spelled as in the CSV files (cli_clean_message). */
int lsefit_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_clean_message(msg);
    if (lsefit_fail_hook != NULL) { /* --mpi: agreed and printed later */
        lsefit_fail_hook(msg);
        return LSEFIT_FAIL;
    }
    fprintf(stderr, "lsefit: %s\n", msg);
    return LSEFIT_FAIL;
}

int lsefit_usage(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_clean_message(msg);
    fprintf(stderr, "lsefit: %s (see 'lsefit%s%s --help')\n", msg,
            cmd[0] ? " " : "", cmd);
    return LSEFIT_USAGE;
}

const char *lsefit_strip(const lse_error *err)
{
    return cli_strip_function(err->message);
}

int lsefit_fail_lib(const lse_error *err, const char *hint)
{
    const char *msg = lsefit_strip(err);
    if (msg[0] == '\0')
        msg = lse_strerror(err->status);
    if (hint != NULL)
        return lsefit_fail("%s%s", msg, hint);
    return lsefit_fail("%s", msg);
}

void lsefit_note(const char *fmt, ...)
{
    if (lsefit_quiet)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_clean_message(msg);
    fprintf(stderr, "lsefit: %s\n", msg);
}

/* ------------------------------------------------------------------ */
/* Option values                                                       */

int lsefit_opt_size(const char *cmd, const char *opt, const char *s, size_t min,
                    size_t *out)
{
    char *end = NULL;
    errno = 0;
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '\0')
        return lsefit_usage(cmd, "%s '%s': expected an integer >= %zu", opt, s,
                            min);
    const unsigned long long v = strtoull(p, &end, 10);
    if (end == p || *end != '\0' || errno == ERANGE || v > (size_t)-1)
        return lsefit_usage(cmd, "%s '%s': expected an integer >= %zu", opt, s,
                            min);
    if (v < min)
        return lsefit_usage(cmd, "%s %s: must be >= %zu", opt, s, min);
    *out = (size_t)v;
    return LSEFIT_OK;
}

int lsefit_opt_double(const char *cmd, const char *opt, const char *s,
                      double min, int min_inclusive, double *out)
{
    char *end = NULL;
    errno = 0;
    const double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
        return lsefit_usage(cmd, "%s '%s': expected a finite number", opt, s);
    if (min_inclusive ? v < min : v <= min)
        return lsefit_usage(cmd, "%s %s: must be %s %g", opt, s,
                            min_inclusive ? ">=" : ">", min);
    *out = v;
    return LSEFIT_OK;
}

int lsefit_opt_seed(const char *cmd, const char *s, unsigned long *out)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0')
        return lsefit_usage(cmd, "--seed '%s': expected an integer >= 0", s);
    const unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v > LLONG_MAX ||
        v > ULONG_MAX)
        return lsefit_usage(cmd, "--seed '%s': expected an integer >= 0", s);
    *out = (unsigned long)v;
    return LSEFIT_OK;
}

int lsefit_opt_range(const char *cmd, const char *opt, const char *what,
                     const char *s, size_t *lo_out, size_t *hi_out)
{
    const char *colon = strchr(s, ':');
    if (colon == NULL) {
        const int rc = lsefit_opt_size(cmd, opt, s, 1, lo_out);
        if (rc == LSEFIT_OK)
            *hi_out = *lo_out;
        return rc;
    }
    char lo[64];
    const size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof lo)
        return lsefit_usage(cmd, "%s '%s': expected %s or a range A:B", opt, s,
                            what);
    if (colon[1] == '\0')
        return lsefit_usage(cmd, "%s %s: the range needs an upper end, e.g. "
                                 "%s8", opt, s, s);
    memcpy(lo, s, n);
    lo[n] = '\0';
    int rc = lsefit_opt_size(cmd, opt, lo, 1, lo_out);
    if (rc == LSEFIT_OK)
        rc = lsefit_opt_size(cmd, opt, colon + 1, 1, hi_out);
    if (rc == LSEFIT_OK && *hi_out < *lo_out)
        return lsefit_usage(cmd, "%s %s: empty range (%zu > %zu)", opt, s,
                            *lo_out, *hi_out);
    return rc;
}

int lsefit_opt_krange(const char *cmd, const char *s, size_t *kmin,
                      size_t *kmax)
{
    return lsefit_opt_range(cmd, "-k", "K", s, kmin, kmax);
}

int lsefit_opt_missing(const char *cmd, const char *s, lse_missing *out)
{
    if (strcmp(s, "error") == 0)
        *out = LSE_MISSING_ERROR;
    else if (strcmp(s, "drop") == 0)
        *out = LSE_MISSING_DROP;
    else if (strcmp(s, "marginalize") == 0 || strcmp(s, "marginalise") == 0)
        *out = LSE_MISSING_KEEP;
    else
        return lsefit_usage(cmd,
                            "--missing '%s': expected error, drop or "
                            "marginalize",
                            s);
    return LSEFIT_OK;
}

/* Global options, taken by main() before the command and by every
 * command after it (take_global): candidates for "did you mean" too. */
static const struct option global_options[] = {
    {"threads", required_argument, NULL, 0},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0}};

/* The long option of @p opts (then of the global options) nearest to
 * @p name, as "-k/--components" or "--n-init" in @p out; 0 if none. */
int lsefit_suggest_option(const char *name, const struct option *opts,
                          char *out, size_t size)
{
    const char *names[128];
    const struct option *defs[128];
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (const struct option *o = pass ? global_options : opts;
             o != NULL && o->name != NULL && n < 128; o++) {
            names[n] = o->name;
            defs[n++] = o;
        }
    const char *best = cli_suggest(name, names, n);
    if (best == NULL)
        return 0;
    size_t i = 0;
    while (names[i] != best)
        i++;
    const int val = defs[i]->val;
    if (val > 0 && val < 128 && isalpha(val))
        snprintf(out, size, "-%c/--%s", val, best);
    else
        snprintf(out, size, "--%s", best);
    return 1;
}

int lsefit_opt_bad(const char *cmd, int c, char *const *argv,
                   const struct option *opts)
{
    const char *arg = argv[optind - 1];
    if (c == ':') { /* a long option's optopt is its code, not a letter */
        if (optopt > 0 && optopt < 128 && strncmp(arg, "--", 2) != 0)
            return lsefit_usage(cmd, "option -%c needs a value", optopt);
        return lsefit_usage(cmd, "option '%s' needs a value", arg);
    }
    if (optopt != 0 && strncmp(arg, "--", 2) != 0)
        return lsefit_usage(cmd, "unknown option -%c", optopt);
    /* "--n_init=3": the name alone */
    char name[128];
    snprintf(name, sizeof name, "%s", strncmp(arg, "--", 2) == 0 ? arg + 2 : arg);
    name[strcspn(name, "=")] = '\0';
    char hint[160];
    if (lsefit_suggest_option(name, opts, hint, sizeof hint))
        return lsefit_usage(cmd, "unknown option '--%s'; did you mean %s?",
                            name, hint);
    return lsefit_usage(cmd, "unknown option '%s'", arg);
}

int lsefit_opt_init(const char *cmd, const char *s,
                    const lsefit_init_name *names, const char **method)
{
    for (const lsefit_init_name *m = names; m->name != NULL; m++)
        if (strcmp(s, m->name) == 0) {
            *method = m->method;
            return LSEFIT_OK;
        }
    struct stat sb;
    if (stat(s, &sb) == 0) { /* --init FILE, as before --init-file */
        *method = NULL;
        return LSEFIT_OK;
    }
    const char *list[16];
    char methods[256] = "";
    size_t n = 0;
    for (const lsefit_init_name *m = names; m->name != NULL && n < 16; m++) {
        list[n++] = m->name;
        const size_t used = strlen(methods);
        snprintf(methods + used, sizeof methods - used, "%s%s", n > 1 ? ", " : "",
                 m->name);
    }
    const char *near = cli_suggest(s, list, n);
    if (near != NULL)
        return lsefit_usage(cmd,
                            "--init '%s': unknown method; did you mean %s? "
                            "(methods: %s; a model file to restart from: "
                            "--init-file FILE)",
                            s, near, methods);
    return lsefit_usage(cmd,
                        "--init '%s': no such method or file (methods: %s; a "
                        "model file to restart from: --init-file FILE)",
                        s, methods);
}

int lsefit_bad_operand(const char *cmd, const char *first, const char *second,
                       const char *const *subcommands, size_t n_sub)
{
    struct stat sb;
    if (stat(first, &sb) != 0) { /* a word, not the data file */
        if (strcmp(first, "fit") == 0)
            return lsefit_usage(cmd,
                                "'%s fit' is not a command; did you mean "
                                "'lsefit %s %s'? (a fit takes the data file "
                                "right after '%s')",
                                cmd, cmd, second != NULL ? second : "DATA.csv",
                                cmd);
        if (second == NULL)
            return LSEFIT_OK;
        const char *near = cli_suggest(first, subcommands, n_sub);
        if (near != NULL)
            return lsefit_usage(cmd,
                                "unknown command '%s %s'; did you mean "
                                "'lsefit %s %s'?",
                                cmd, first, cmd, near);
    }
    if (second == NULL)
        return LSEFIT_OK;
    return lsefit_usage(cmd, "unexpected argument '%s'", second);
}

/* ------------------------------------------------------------------ */
/* Progress                                                            */

double lsefit_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int lsefit_progress_open(lsefit_progress *p, const char *model,
                         const char *log_path)
{
    memset(p, 0, sizeof *p);
    p->model = model;
    p->start = lsefit_now();
    if (log_path == NULL)
        return LSEFIT_OK;
    p->log = open_memstream(&p->log_text, &p->log_len);
    if (p->log == NULL)
        return lsefit_fail("--log-json: out of memory");
    return LSEFIT_OK;
}

void lsefit_progress_start(lsefit_progress *p, size_t k, size_t n_init)
{
    p->k = k;
    p->n_init = n_init;
    p->start = lsefit_now();
    p->last_print = p->start;
}

/* A JSON number, or null for NaN and infinities (JSON has neither). */
static void json_number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

void lsefit_progress_step(lsefit_progress *p, size_t run, size_t iter,
                          double loglik, double change)
{
    const double now = lsefit_now();
    const double elapsed = now - p->start;
    if (p->log != NULL) {
        fprintf(p->log,
                "{\"model\":\"%s\",\"k\":%zu,\"run\":%zu,\"iter\":%zu,"
                "\"loglik\":",
                p->model, p->k, run, iter);
        json_number(p->log, loglik);
        fputs(",\"energy\":", p->log);
        json_number(p->log, -loglik);
        fputs(",\"change\":", p->log);
        json_number(p->log, change);
        fputs(",\"elapsed\":", p->log);
        json_number(p->log, elapsed);
        fputs("}\n", p->log);
    }
    if (lsefit_quiet)
        return;
    if (!lsefit_verbose && (elapsed < 1.0 || now - p->last_print < 1.0))
        return;
    p->last_print = now;
    char delta[32] = "-"; /* the first iteration has no change yet */
    if (isfinite(change))
        snprintf(delta, sizeof delta, "%.3g", -change);
    fprintf(stderr,
            "lsefit: %s K=%zu run %zu/%zu iteration %zu energy %.10g "
            "change %s elapsed %.2fs\n",
            p->model, p->k, run + 1, p->n_init, iter, -loglik, delta,
            elapsed);
}

int lsefit_progress_close(lsefit_progress *p, const char *log_path)
{
    int rc = LSEFIT_OK;
    if (p->log != NULL) {
        if (fclose(p->log) != 0)
            rc = lsefit_fail("--log-json: out of memory");
        p->log = NULL;
        if (rc == LSEFIT_OK && log_path != NULL)
            rc = lsefit_write(log_path, p->log_text, p->log_len);
    }
    free(p->log_text);
    p->log_text = NULL;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

/* Every output of the command joins one set, committed at the end of the
 * command (lsefit_outputs_finish): all outputs or none (docs/lsefit.md,
 * "Outputs"). */
static lse_outputs *outputs;

/* A library error of the output set: a clash of names is a usage error. */
static int outputs_fail(const lse_error *err)
{
    const int rc = lsefit_fail_lib(err, NULL);
    return err->status == LSE_EINVAL ? LSEFIT_USAGE : rc;
}

int lsefit_plan(const lsefit_path *inputs, size_t n_in, const lsefit_path *outs,
                size_t n_out)
{
    lse_error err;
    if (outputs == NULL && lse_outputs_new(&outputs, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    for (size_t i = 0; i < n_in; i++)
        if (inputs[i].path != NULL &&
            lse_outputs_input(outputs, inputs[i].path, inputs[i].what, &err) !=
                LSE_OK)
            return outputs_fail(&err);
    for (size_t i = 0; i < n_out; i++)
        if (outs[i].path != NULL &&
            lse_outputs_add(outputs, outs[i].path, outs[i].what, &err) !=
                LSE_OK)
            return outputs_fail(&err);
    return LSEFIT_OK;
}

int lsefit_plan_glob(const char *pattern, const char *what)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    int rc = LSEFIT_OK;
    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t i = 0; rc == LSEFIT_OK && i < g.gl_pathc; i++) {
            const lsefit_path in = {g.gl_pathv[i], what};
            rc = lsefit_plan(&in, 1, NULL, 0);
        }
    globfree(&g);
    return rc;
}

int lsefit_write(const char *path, const char *text, size_t len)
{
    lse_error err;
    if (outputs == NULL && lse_outputs_new(&outputs, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    if (lse_outputs_write(outputs, path, text, len, &err) != LSE_OK)
        return outputs_fail(&err);
    return LSEFIT_OK;
}

int lsefit_outputs_finish(int rc)
{
    lse_error err;
    if (outputs == NULL)
        return rc;
    if (rc != LSEFIT_OK) {
        lse_outputs_free(outputs);
        outputs = NULL;
        return rc;
    }
    tool_outputs_test_hook();
    /* what the command printed to stdout must have arrived before any file
     * is replaced */
    const int flushed = fflush(stdout) == 0;
    if (!flushed || ferror(stdout)) {
        rc = lsefit_fail("cannot write to standard output: %s; no output "
                         "file was written",
                         flushed ? "a write failed" : strerror(errno));
        lse_outputs_free(outputs);
        outputs = NULL;
        return rc;
    }
    const lse_status st = lse_outputs_commit(outputs, &err);
    /* a signal held during the commit ends the process now, before any
     * message: `lsefit ... | head` dies of SIGPIPE quietly, as every
     * program in a pipeline does, and no file was replaced */
    tool_outputs_after_commit();
    if (st != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    lse_outputs_free(outputs);
    outputs = NULL;
    return rc;
}

int lsefit_buf_open(lsefit_buf *b)
{
    memset(b, 0, sizeof *b);
    b->f = open_memstream(&b->text, &b->len);
    if (b->f == NULL)
        return lsefit_fail("out of memory");
    return LSEFIT_OK;
}

int lsefit_buf_write(lsefit_buf *b, const char *path)
{
    const int bad = ferror(b->f);
    const int closed = fclose(b->f);
    b->f = NULL;
    if (bad || closed != 0)
        return lsefit_fail("out of memory while formatting '%s'", path);
    return lsefit_write(path, b->text, b->len);
}

void lsefit_buf_free(lsefit_buf *b)
{
    if (b->f != NULL)
        fclose(b->f);
    free(b->text);
    memset(b, 0, sizeof *b);
}

void lsefit_csv_number(FILE *f, double x)
{
    if (isnan(x))
        fputs("NaN", f);
    else if (isinf(x))
        fputs(x > 0 ? "Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", x);
}

void lsefit_csv_cell(FILE *f, const char *s)
{
    if (strpbrk(s, ",;\t\"\r\n") == NULL && s[0] != '#' && s[0] != '\0') {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *c = s; *c != '\0'; c++) {
        if (*c == '"')
            fputc('"', f);
        fputc(*c, f);
    }
    fputc('"', f);
}
