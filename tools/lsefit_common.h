/* lsefit: the helpers every command calls (lsefit_common.c); private to
 * tools/lsefit*.c (not installed).
 *
 * lsefit.c        main, the global options, the choice of the command
 * lsefit_common.c messages, option values, progress, the output set
 * lsefit_data.c   CSV data sets: column choice, weights, sequences,
 *                 missing values, constant columns, standardization
 * lsefit_fit.c    the fit pipeline shared by the models: load, check,
 *                 standardize, fit over a range of K, select, save
 * lsefit_gmm.c    lsefit gmm [predict|score|sample] and its model table
 * lsefit_slds.c   lsefit slds [segment|simulate] and its model table
 *
 * Conventions: every command function returns an exit status (LSEFIT_OK,
 * LSEFIT_FAIL after a one-line message on stderr, LSEFIT_USAGE for usage
 * errors); nothing calls exit() below main(), so every path frees what it
 * allocated (valgrind-clean). */
#ifndef LSEFIT_COMMON_H
#define LSEFIT_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include <lsegraph/lsegraph.h>

/** Exit statuses. */
enum { LSEFIT_OK = 0, LSEFIT_FAIL = 1, LSEFIT_USAGE = 2 };

/* ------------------------------------------------------------------ */
/* Messages (lsefit_common.c)                                                 */

/** Global switches set by --quiet / --verbose (shared by every command). */
extern int lsefit_quiet;
extern int lsefit_verbose;

/** The light lsefit (lsefit_full.c): main saves its argv; the commands that
 *  need MPI or PLplot call lsefit_exec_full before any output, which
 *  replaces the process by lsefit-full with that argv when lsefit-full was
 *  built and is found, and otherwise returns. */
void lsefit_save_argv(int argc, char **argv);
void lsefit_exec_full(void);

/** "lsefit: <message>\n" on stderr; returns LSEFIT_FAIL. */
int lsefit_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** When set (lsefit --mpi, lsefit_mpi.c), lsefit_fail hands its message
 *  (without "lsefit: ") to this hook instead of printing it. */
extern void (*lsefit_fail_hook)(const char *message);

/** "lsefit: <message> (see 'lsefit CMD --help')\n"; returns LSEFIT_USAGE. */
int lsefit_usage(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Print a library error without its "lse_function: " prefix, followed by
 *  @p hint when not NULL; returns LSEFIT_FAIL. */
int lsefit_fail_lib(const lse_error *err, const char *hint);

/** The library message of @p err without its "lse_function: " prefix. */
const char *lsefit_strip(const lse_error *err);

/** "lsefit: <message>" on stderr unless --quiet. */
void lsefit_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ */
/* Option values (lsefit_common.c); each returns LSEFIT_OK or prints a usage   */
/* error naming the option and returns LSEFIT_USAGE.                    */

int lsefit_opt_size(const char *cmd, const char *opt, const char *s, size_t min,
                    size_t *out);
int lsefit_opt_double(const char *cmd, const char *opt, const char *s,
                      double min, int min_inclusive, double *out);
int lsefit_opt_seed(const char *cmd, const char *s, unsigned long *out);
/** "K" or "A:B" with 1 <= A <= B (-k). */
int lsefit_opt_krange(const char *cmd, const char *s, size_t *kmin,
                      size_t *kmax);
/** The same for the option @p opt of a count named @p what ("D"). */
int lsefit_opt_range(const char *cmd, const char *opt, const char *what,
                     const char *s, size_t *lo, size_t *hi);
/** error, drop or marginalize (LSE_MISSING_KEEP). */
int lsefit_opt_missing(const char *cmd, const char *s, lse_missing *out);
/** One getopt_long failure ('?' or ':') turned into a usage message; an
 *  unknown long option gets the nearest of @p opts (or of the global
 *  options) as "did you mean". */
struct option;
int lsefit_opt_bad(const char *cmd, int c, char *const *argv,
                   const struct option *opts);
/** The long option of @p opts (then of the global options --threads,
 *  --quiet, --verbose, --help, --version) nearest to @p name, as
 *  "-k/--components" or "--n-init" in @p out; 0 if none. */
int lsefit_suggest_option(const char *name, const struct option *opts,
                          char *out, size_t size);

/** A name of --init: @p name as typed (scikit-learn's spellings too), the
 *  canonical @p method it selects. Lists end with a NULL name. */
typedef struct lsefit_init_name {
    const char *name;
    const char *method;
} lsefit_init_name;
/** --init METHOD: *method = the canonical name of a method in @p names;
 *  an existing path (a model file, as --init-file) gives *method = NULL;
 *  anything else is a usage error listing the methods. */
int lsefit_opt_init(const char *cmd, const char *s,
                    const lsefit_init_name *names, const char **method);
/** The usage error for a second operand @p second after @p first where
 *  one was expected: "lsefit gmm fit X.csv" suggests "lsefit gmm X.csv",
 *  a misspelt subcommand the nearest of @p subcommands. With @p second
 *  NULL (one operand), only "fit" that is no file is an error; else
 *  LSEFIT_OK. */
int lsefit_bad_operand(const char *cmd, const char *first, const char *second,
                       const char *const *subcommands, size_t n_sub);

/* ------------------------------------------------------------------ */
/* Progress and the --log-json file (lsefit_common.c)                         */

typedef struct lsefit_progress {
    const char *model; /* "gmm" or "slds" */
    size_t k;          /* components / modes of the fit being run */
    size_t n_init;     /* runs of that fit */
    double start;      /* monotonic seconds at the start of the fit */
    double last_print; /* when a progress line was last printed */
    FILE *log;         /* memory stream of JSON lines, or NULL */
    char *log_text;
    size_t log_len;
} lsefit_progress;

/** Start a --log-json stream when @p log_path is not NULL.
 *  @return LSEFIT_OK or LSEFIT_FAIL (out of memory). */
int lsefit_progress_open(lsefit_progress *p, const char *model,
                         const char *log_path);
/** Mark the start of one fit of @p k components with @p n_init runs. */
void lsefit_progress_start(lsefit_progress *p, size_t k, size_t n_init);
/** One EM iteration: a progress line on stderr (every iteration with
 *  --verbose; at most once a second after the first second otherwise; never
 *  with --quiet) and one JSON line in the log. */
void lsefit_progress_step(lsefit_progress *p, size_t run, size_t iter,
                          double loglik, double change);
/** Write the log atomically to @p log_path (if any) and free it.
 *  @return LSEFIT_OK or LSEFIT_FAIL. */
int lsefit_progress_close(lsefit_progress *p, const char *log_path);

/** Monotonic clock in seconds. */
double lsefit_now(void);

/* ------------------------------------------------------------------ */
/* Output (lsefit_common.c)                                                   */

/** A file of the command line and its role in messages ("the data",
 *  "--labels"); NULL paths are skipped. */
typedef struct lsefit_path {
    const char *path;
    const char *what;
} lsefit_path;

/** Declare a command's input and output files before any work (the
 *  library's output set, lse_outputs_add): an output that is an input or
 *  another output is refused (LSEFIT_USAGE), and so is a read-only file,
 *  a directory or a missing directory (LSEFIT_FAIL), after a message. */
int lsefit_plan(const lsefit_path *inputs, size_t n_in,
                const lsefit_path *outputs, size_t n_out);
/** Declare every file that matches the glob @p pattern as an input. */
int lsefit_plan_glob(const char *pattern, const char *what);

/** Write the whole contents of the output @p path ("-": stdout): a
 *  regular file goes to its temporary file, stdout and devices are kept;
 *  nothing is replaced before lsefit_outputs_finish(). Prints the error and
 *  returns LSEFIT_FAIL (or LSEFIT_USAGE for a clash) on failure. */
int lsefit_write(const char *path, const char *text, size_t len);

/** The end of a command: when @p rc is LSEFIT_OK, flush stdout and commit
 *  every output written (all of them or none: a failure removes every
 *  temporary file); otherwise remove the temporary files. Returns the
 *  final status. Called by main, and before lsefit_mpi_end under --mpi so
 *  that every process agrees on the outcome. A no-op the second time. */
int lsefit_outputs_finish(int rc);

/** A growing text buffer on open_memstream. */
typedef struct lsefit_buf {
    FILE *f;
    char *text;
    size_t len;
} lsefit_buf;
int lsefit_buf_open(lsefit_buf *b);
/** Close the stream and write the text to @p path (lsefit_write). */
int lsefit_buf_write(lsefit_buf *b, const char *path);
void lsefit_buf_free(lsefit_buf *b);

/** Print a number as lse_matrix_format_csv does: %.17g (bit-exact when
 *  read back), NaN, Inf and -Inf (docs/io.md). */
void lsefit_csv_number(FILE *f, double x);

/** Print a CSV cell: quoted when it holds a delimiter, quote or newline. */
void lsefit_csv_cell(FILE *f, const char *s);

#endif /* LSEFIT_COMMON_H */
