/* lsefit: fit Gaussian mixtures and switching linear dynamics to CSV data
 * from the command line (docs/lsefit.md).
 *
 * This file holds main(), the top-level help, messages, option values,
 * progress lines and the --log-json stream, and atomic output. The commands
 * live in lsefit_gmm.c and lsefit_slds.c, the data handling in
 * lsefit_data.c. */
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

#include <sys/stat.h>

#include "lsefit.h"

#ifndef LSEFIT_VERSION
#define LSEFIT_VERSION "unknown"
#endif

int lsefit_quiet = 0;
int lsefit_verbose = 0;
void (*lsefit_fail_hook)(const char *message) = NULL;

/* ------------------------------------------------------------------ */
/* Messages                                                            */

int lsefit_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (lsefit_fail_hook != NULL) { /* --mpi: agreed and printed later */
        char msg[1024];
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        lsefit_fail_hook(msg);
        return LSEFIT_FAIL;
    }
    fputs("lsefit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return LSEFIT_FAIL;
}

int lsefit_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lsefit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'lsefit%s%s --help')\n", cmd[0] ? " " : "", cmd);
    va_end(ap);
    return LSEFIT_USAGE;
}

const char *lsefit_strip(const lse_error *err)
{
    const char *msg = err->message;
    if (strncmp(msg, "lse_", 4) != 0)
        return msg;
    const char *q = msg;
    while (isalnum((unsigned char)*q) || *q == '_')
        q++;
    return (q[0] == ':' && q[1] == ' ') ? q + 2 : msg;
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
    va_list ap;
    va_start(ap, fmt);
    fputs("lsefit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The library speaks only through this hook. */
static void log_handler(lse_log_level level, const char *message, void *user)
{
    (void)user;
    if (lsefit_quiet)
        return;
    if (level == LSE_LOG_WARN)
        fprintf(stderr, "lsefit: warning: %s\n", message);
    else if (level == LSE_LOG_INFO && lsefit_verbose)
        fprintf(stderr, "lsefit: %s\n", message);
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

int lsefit_opt_krange(const char *cmd, const char *s, size_t *kmin,
                      size_t *kmax)
{
    const char *colon = strchr(s, ':');
    if (colon == NULL) {
        const int rc = lsefit_opt_size(cmd, "-k", s, 1, kmin);
        if (rc == LSEFIT_OK)
            *kmax = *kmin;
        return rc;
    }
    char lo[64];
    const size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof lo)
        return lsefit_usage(cmd, "-k '%s': expected K or a range A:B", s);
    memcpy(lo, s, n);
    lo[n] = '\0';
    int rc = lsefit_opt_size(cmd, "-k", lo, 1, kmin);
    if (rc == LSEFIT_OK)
        rc = lsefit_opt_size(cmd, "-k", colon + 1, 1, kmax);
    if (rc == LSEFIT_OK && *kmax < *kmin)
        return lsefit_usage(cmd, "-k %s: empty range (%zu > %zu)", s, *kmin,
                            *kmax);
    return rc;
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

int lsefit_opt_bad(const char *cmd, int c, char *const *argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':') {
        if (optopt != 0)
            return lsefit_usage(cmd, "option -%c needs a value", optopt);
        return lsefit_usage(cmd, "option '%s' needs a value", arg);
    }
    if (optopt != 0 && strncmp(arg, "--", 2) != 0)
        return lsefit_usage(cmd, "unknown option -%c", optopt);
    return lsefit_usage(cmd, "unknown option '%s'", arg);
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
    fprintf(stderr,
            "lsefit: %s K=%zu run %zu/%zu iteration %zu energy %.10g "
            "change %.3g elapsed %.2fs\n",
            p->model, p->k, run + 1, p->n_init, iter, -loglik, -change,
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

/* Write to a file that is not a regular file (a device such as
 * /dev/null, a FIFO): renaming over it would replace the device itself. */
static int write_direct(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return lsefit_fail("cannot open '%s': %s", path, strerror(errno));
    const int bad = fwrite(text, 1, len, f) != len;
    if (fclose(f) != 0 || bad)
        return lsefit_fail("cannot write '%s': %s", path, strerror(errno));
    return LSEFIT_OK;
}

int lsefit_write(const char *path, const char *text, size_t len)
{
    lse_error err;
    if (strcmp(path, "-") == 0) {
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
            return lsefit_fail("cannot write to standard output: %s",
                               strerror(errno));
        return LSEFIT_OK;
    }
    /* atomic replacement only for regular files; through a symbolic link
     * the file it points to is replaced, not the link */
    struct stat sb;
    char *real = NULL;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode))
            return write_direct(path, text, len);
        real = realpath(path, NULL);
    }
    const lse_status st =
        lse_file_write_atomic(real != NULL ? real : path, text, len, &err);
    free(real);
    if (st != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    return LSEFIT_OK;
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

/* ------------------------------------------------------------------ */
/* main                                                                */

static void usage_main(FILE *f)
{
    fputs(
        "Usage: lsefit COMMAND [ARGS...]\n"
        "\n"
        "Fit energy-based models on log-sum-exp graphs to CSV data.\n"
        "\n"
        "Commands:\n"
        "  gmm DATA.csv -k K [options]       fit a Gaussian mixture\n"
        "  gmm predict MODEL.json DATA.csv   most likely component per row\n"
        "  gmm score MODEL.json DATA.csv     log-likelihood per row\n"
        "  gmm sample MODEL.json -n N        draw samples\n"
        "  slds SERIES.csv -k K [options]    fit switching linear dynamics\n"
        "  slds segment MODEL.json SERIES.csv  mode posteriors per step\n"
        "  slds simulate MODEL.json -T N     simulate a series\n"
        "\n"
        "Options:\n"
        "  -h, --help       this help; 'lsefit COMMAND --help' for a command\n"
        "  -V, --version    print the version\n"
        "  --threads N      threads for the E- and M-steps, with any command\n"
        "                   (default: LSE_NUM_THREADS, else OpenMP's "
        "default);\n"
        "                   results are bit-identical for every N\n"
        "\n"
        "BIC and AIC follow scikit-learn's conventions: lower is better.\n"
        "Exit status: 0 success, 1 bad input or failed fit, 2 usage error.\n",
        f);
}

/* Take "--threads N" (or "--threads=N") out of argv, wherever it stands
 * after the command, and apply it: every command accepts it, and the
 * commands' own option parsers never see it. Returns LSEFIT_OK or a usage
 * error. */
static int take_threads(int *argc, char **argv)
{
    int out = 2;
    int rc = LSEFIT_OK;
    for (int i = 2; i < *argc; i++) {
        const char *arg = argv[i], *val = NULL;
        if (strcmp(arg, "--") == 0) { /* operands only from here on */
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(arg, "--threads") == 0) {
            if (i + 1 >= *argc)
                return lsefit_usage(argv[1], "--threads needs a value");
            val = argv[++i];
        } else if (strncmp(arg, "--threads=", 10) == 0) {
            val = arg + 10;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        size_t n;
        rc = lsefit_opt_size(argv[1], "--threads", val, 1, &n);
        if (rc != LSEFIT_OK)
            return rc;
        if (n > 4096)
            return lsefit_usage(argv[1], "--threads %zu: at most 4096", n);
        lse_set_num_threads((int)n);
    }
    argv[out] = NULL;
    *argc = out;
    return rc;
}

int main(int argc, char **argv)
{
    lse_set_log_handler(log_handler, NULL);
    if (argc < 2)
        return usage_main(stderr), LSEFIT_USAGE;
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0)
        return usage_main(stdout), LSEFIT_OK;
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("lsefit (lsegraph) %s\n", LSEFIT_VERSION);
        return LSEFIT_OK;
    }
    int rc = take_threads(&argc, argv);
    if (rc != LSEFIT_OK)
        return rc;
    if (strcmp(cmd, "gmm") == 0)
        rc = lsefit_gmm_main(argc - 1, argv + 1);
    else if (strcmp(cmd, "slds") == 0)
        rc = lsefit_slds_main(argc - 1, argv + 1);
    else if (cmd[0] == '-')
        rc = lsefit_usage("", "unknown option '%s'", cmd);
    else
        rc = lsefit_usage("", "unknown command '%s' (expected gmm or slds)",
                          cmd);
    if (fflush(stdout) != 0 && rc == LSEFIT_OK)
        rc =
            lsefit_fail("cannot write to standard output: %s", strerror(errno));
    return rc;
}
