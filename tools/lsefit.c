/* lsefit: fit Gaussian mixtures and switching linear dynamics to CSV data
 * from the command line (docs/lsefit.md).
 *
 * This file is the dispatcher: main(), the top-level help, the global
 * options and the choice of the command. The helpers every command calls
 * live in lsefit_common.c, the data handling in lsefit_data.c, the shared
 * fit pipeline in lsefit_fit.c and the commands in lsefit_gmm.c and
 * lsefit_slds.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cliutil.h"
#include "lsefit_cmd.h"
#include "lsefit_common.h"
#include "tool_outputs.h"

#ifndef LSEFIT_VERSION
#define LSEFIT_VERSION "unknown"
#endif

/* The library speaks only through this hook. */
static void log_handler(lse_log_level level, const char *message, void *user)
{
    (void)user;
    if (lsefit_quiet)
        return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", message);
    cli_clean_message(msg);
    if (level == LSE_LOG_WARN)
        fprintf(stderr, "lsefit: warning: %s\n", msg);
    else if (level == LSE_LOG_INFO && lsefit_verbose)
        fprintf(stderr, "lsefit: %s\n", msg);
}

/* ------------------------------------------------------------------ */
/* main                                                                */

static void usage_main(FILE *f)
{
    fputs(
        "Usage: lsefit COMMAND [ARGS...]\n"
        "       lsefit [GLOBAL OPTIONS] COMMAND [ARGS...]\n"
        "\n"
        "Fit energy-based models on log-sum-exp graphs to CSV data.\n"
        "\n"
        "Commands:\n"
        "  gmm DATA.csv -k K [options]       fit a Gaussian mixture\n"
        "  gmm predict MODEL.json DATA.csv   most likely component per row\n"
        "  gmm score MODEL.json DATA.csv     log-likelihood per row\n"
        "  gmm sample MODEL.json -n N        draw samples\n"
        "  gmm plot MODEL.json DATA.csv -o FIG  BIC, classification, "
        "uncertainty, density\n"
        "  slds SERIES.csv -k K [options]    fit switching linear dynamics\n"
        "  slds segment MODEL.json SERIES.csv  mode posteriors per step\n"
        "  slds simulate MODEL.json -T N     simulate a series\n"
        "  slds summary MODEL.json SERIES.csv  parameters, standard errors\n"
        "  slds plot MODEL.json SERIES.csv -o FIG  segmentation plot\n"
        "\n"
        "Global options (before or after the command):\n"
        "  --threads N      threads for the E- and M-steps\n"
        "                   (default: LSE_NUM_THREADS, else OpenMP's "
        "default);\n"
        "                   results are bit-identical for every N\n"
        "  -q, --quiet      no progress lines, notes or warnings\n"
        "  -v, --verbose    a progress line every EM iteration\n"
        "  -h, --help       this help; 'lsefit COMMAND --help' for a command\n"
        "  -V, --version    print the version\n"
        "\n"
        "BIC and AIC follow scikit-learn's conventions: lower is better.\n"
        "Exit status: 0 success, 1 bad input or failed fit (also a write\n"
        "error on standard output), 2 usage error.\n",
        f);
}

/* The value of --threads: 1..4096 threads, applied at once. */
static int set_threads(const char *cmd, const char *val)
{
    size_t n;
    const int rc = lsefit_opt_size(cmd, "--threads", val, 1, &n);
    if (rc != LSEFIT_OK)
        return rc;
    if (n > 4096)
        return lsefit_usage(cmd, "--threads %zu: at most 4096", n);
    lse_set_num_threads((int)n);
    return LSEFIT_OK;
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
        rc = set_threads(argv[1], val);
        if (rc != LSEFIT_OK)
            return rc;
    }
    argv[out] = NULL;
    *argc = out;
    return rc;
}

/* The global options before the command (lsefit --threads 2 -q gmm ...):
 * applied, and *first set to the index of the command. *done is set when
 * --help or --version answered. */
static int take_leading(int argc, char **argv, int *first, int *done)
{
    int i = 1;
    *done = 0;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_main(stdout);
            *done = 1;
            return LSEFIT_OK;
        }
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf("lsefit (lsegraph) %s\n", LSEFIT_VERSION);
            *done = 1;
            return LSEFIT_OK;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            lsefit_quiet = 1;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            lsefit_verbose = 1;
        } else if (strcmp(a, "--threads") == 0) {
            if (i + 1 >= argc)
                return lsefit_usage("", "--threads needs a value");
            const int rc = set_threads("", argv[++i]);
            if (rc != LSEFIT_OK)
                return rc;
        } else if (strncmp(a, "--threads=", 10) == 0) {
            const int rc = set_threads("", a + 10);
            if (rc != LSEFIT_OK)
                return rc;
        } else {
            char hint[160];
            char name[128];
            snprintf(name, sizeof name, "%s", a + (a[1] == '-' ? 2 : 1));
            name[strcspn(name, "=")] = '\0';
            if (a[1] == '-' && lsefit_suggest_option(name, NULL, hint, sizeof hint))
                return lsefit_usage("", "unknown option '--%s'; did you mean "
                                        "%s?",
                                    name, hint);
            return lsefit_usage("",
                                "unknown global option '%s' (global options "
                                "are --threads, -q, -v; the options of a "
                                "command go after it: 'lsefit gmm DATA.csv "
                                "%s ...')",
                                a, a);
        }
    }
    *first = i;
    return LSEFIT_OK;
}

static int run_main(int argc, char **argv)
{
    lse_set_log_handler(log_handler, NULL);
    if (argc < 2)
        return usage_main(stderr), LSEFIT_USAGE;
    int first = 1, done = 0;
    int rc = take_leading(argc, argv, &first, &done);
    if (rc != LSEFIT_OK || done)
        return rc;
    if (first >= argc)
        return lsefit_usage("", "missing the command (gmm or slds)");
    /* the command becomes argv[1] of what follows */
    argv += first - 1;
    argc -= first - 1;
    const char *cmd = argv[1];
    rc = take_threads(&argc, argv);
    if (rc != LSEFIT_OK)
        return rc;
    tool_outputs_signals();
    static const char *const commands[] = {"gmm", "slds"};
    if (strcmp(cmd, "gmm") == 0) {
        rc = lsefit_gmm_main(argc - 1, argv + 1);
    } else if (strcmp(cmd, "slds") == 0) {
        rc = lsefit_slds_main(argc - 1, argv + 1);
    } else {
        const char *near = cli_suggest(cmd, commands, 2);
        if (near != NULL)
            rc = lsefit_usage("", "unknown command '%s'; did you mean '%s'?",
                              cmd, near);
        else
            rc = lsefit_usage("",
                              "unknown command '%s' (expected gmm or slds)",
                              cmd);
    }
    return lsefit_outputs_finish(rc); /* all outputs, or none */
}

int main(int argc, char **argv)
{
    lsefit_save_argv(argc, argv);
    int rc = run_main(argc, argv);
    /* every output to stdout (help, version, tables, models) must have
     * reached it: a full disk or a closed pipe is an error */
    if (cli_close_stdout("lsefit", rc != LSEFIT_OK) != 0 && rc == LSEFIT_OK)
        rc = LSEFIT_FAIL;
    return rc;
}
