/* lsefit: private declarations shared by tools/lsefit*.c (not installed).
 *
 * lsefit.c        main, dispatch, messages, option values, progress, output
 * lsefit_data.c   CSV data sets: column choice, weights, sequences,
 *                 missing values, constant columns, standardization
 * lsefit_gmm.c    lsefit gmm [predict|score|sample] and the GMM model JSON
 * lsefit_slds.c   lsefit slds [segment|simulate] and the SLDS model JSON
 *
 * Conventions: every command function returns an exit status (LSEFIT_OK,
 * LSEFIT_FAIL after a one-line message on stderr, LSEFIT_USAGE for usage
 * errors); nothing calls exit() below main(), so every path frees what it
 * allocated (valgrind-clean). */
#ifndef LSEFIT_H
#define LSEFIT_H

#include <stddef.h>
#include <stdio.h>

#include <lsegraph/lsegraph.h>

/** Exit statuses. */
enum { LSEFIT_OK = 0, LSEFIT_FAIL = 1, LSEFIT_USAGE = 2 };

/* ------------------------------------------------------------------ */
/* Messages (lsefit.c)                                                 */

/** Global switches set by --quiet / --verbose (shared by every command). */
extern int lsefit_quiet;
extern int lsefit_verbose;

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
/* Option values (lsefit.c); each returns LSEFIT_OK or prints a usage   */
/* error naming the option and returns LSEFIT_USAGE.                    */

int lsefit_opt_size(const char *cmd, const char *opt, const char *s, size_t min,
                    size_t *out);
int lsefit_opt_double(const char *cmd, const char *opt, const char *s,
                      double min, int min_inclusive, double *out);
int lsefit_opt_seed(const char *cmd, const char *s, unsigned long *out);
/** "K" or "A:B" with 1 <= A <= B. */
int lsefit_opt_krange(const char *cmd, const char *s, size_t *kmin,
                      size_t *kmax);
/** error, drop or marginalize (LSE_MISSING_KEEP). */
int lsefit_opt_missing(const char *cmd, const char *s, lse_missing *out);
/** One getopt_long failure ('?' or ':') turned into a usage message; an
 *  unknown long option gets the nearest of @p opts (or of the global
 *  options) as "did you mean". */
struct option;
int lsefit_opt_bad(const char *cmd, int c, char *const *argv,
                   const struct option *opts);

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
/* Progress and the --log-json file (lsefit.c)                         */

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
/* Output (lsefit.c)                                                   */

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

/* ------------------------------------------------------------------ */
/* Data sets (lsefit_data.c)                                           */

typedef struct lsefit_data_opts {
    const char *path;     /* CSV file or "-" */
    const char *columns;  /* --columns LIST or NULL */
    const char *ignore;   /* --ignore LIST or NULL */
    const char *weights;  /* --weights COLUMN or NULL */
    const char *sequence; /* --sequence COLUMN or NULL */
    lse_missing missing;  /* ERROR, DROP or KEEP (NaN for marginalizing) */
    const char *const *model_names; /* a model's feature names, or NULL */
    size_t n_model_names;
    const char *model_path; /* the model file, for messages */
    char delimiter;         /* --delimiter: 0 auto, ' ' white space */
    int header;             /* 0 auto, 1 --header, 2 --no-header */
    size_t max_input;       /* --max-input-size in bytes, 0: default */
} lsefit_data_opts;

/* Options of every command that reads a CSV file, handled by
 * lsefit_data_option(): put LSEFIT_DATA_LONG_OPTIONS in the getopt_long
 * table and call lsefit_data_option() before the switch. */
enum {
    LSEFIT_OPT_DELIMITER = 1000,
    LSEFIT_OPT_HEADER,
    LSEFIT_OPT_NO_HEADER,
    LSEFIT_OPT_MAX_INPUT
};
#define LSEFIT_DATA_LONG_OPTIONS                                               \
    {"delimiter", required_argument, NULL, LSEFIT_OPT_DELIMITER},              \
        {"sep", required_argument, NULL, LSEFIT_OPT_DELIMITER},                \
        {"header", no_argument, NULL, LSEFIT_OPT_HEADER},                      \
        {"no-header", no_argument, NULL, LSEFIT_OPT_NO_HEADER},                \
        {"max-input-size", required_argument, NULL, LSEFIT_OPT_MAX_INPUT}
/** The help lines of LSEFIT_DATA_LONG_OPTIONS (column 2, 23 wide). */
#define LSEFIT_DATA_HELP                                                       \
    "  --delimiter, --sep C    field separator: ',', ';', tab, space\n"       \
    "                          (runs of spaces/tabs, as in .dat files) or\n"  \
    "                          auto (default: detected)\n"                    \
    "  --header, --no-header   the first row is (not) the column names\n"     \
    "                          (default: a header when a cell is text)\n"     \
    "  --max-input-size SIZE   refuse a larger input (default 4G; K, M, G,\n" \
    "                          T suffixes)\n"
/** When @p c is one of LSEFIT_DATA_LONG_OPTIONS, apply it to @p o, set
 *  *rc (LSEFIT_OK or a usage error naming the option) and return 1; else
 *  return 0. */
int lsefit_data_option(const char *cmd, int c, const char *arg,
                       lsefit_data_opts *o, int *rc);
/** The reader's options for @p o (delimiter, header, input limit). */
lse_csv_opts lsefit_data_csv_opts(const lsefit_data_opts *o);

typedef struct lsefit_data {
    lse_table *table;
    gsl_matrix *x;  /* (n, d) the selected numeric columns */
    size_t *rows;   /* (n) 0-based table row of each row of x */
    size_t n_table; /* data rows of the table */
    size_t d;
    size_t *cols;       /* (d) 0-based table columns */
    const char **names; /* (d) column names, borrowed from the table */
    gsl_vector *weight; /* (n) sample weights, or NULL */
    size_t *seq;        /* (n) sequence ids, or NULL */
    gsl_vector *mean;   /* (d) standardization, or NULL */
    gsl_vector *scale;  /* (d) */
} lsefit_data;

/** Read the data set described by @p o into @p out (zeroed first). */
int lsefit_data_load(const lsefit_data_opts *o, lsefit_data *out);
/** The same from a table already read (taken over: freed with @p out, or
 *  on failure); o->path is not read. */
int lsefit_data_from_table(const lsefit_data_opts *o, lse_table *t,
                           lsefit_data *out);
void lsefit_data_free(lsefit_data *data);
/** Refuse a column without an observed value, and a constant column
 *  unless @p reg_covar_given (NaN cells are skipped). */
int lsefit_data_check_constant(const lsefit_data *data, int reg_covar_given);
/** Refuse values whose squares or products overflow in a covariance
 *  summed over @p total_rows rows (every process's rows under --mpi; fits
 *  without --standardize); warn (unless -q) when the squares underflow
 *  (subnormal data). */
int lsefit_data_check_scale(const lsefit_data *data, size_t total_rows);
/** Need at least @p k rows (what = "components") or steps (what =
 *  "modes"). */
int lsefit_data_check_rows(const lsefit_data *data, size_t n_needed, size_t k,
                           const char *what);
/** Compute the mean and scale (population standard deviation; 1 for a
 *  constant column) of the observed values of every column and
 *  standardize x in place (NaN stays NaN). */
int lsefit_data_standardize(lsefit_data *data);
/** Standardize x with a model's @p mean and @p scale (copied). */
int lsefit_data_apply_standardize(lsefit_data *data, const gsl_vector *mean,
                                  const gsl_vector *scale);
/** sum_j log scale_j (0 without standardization): the log-Jacobian that
 *  turns a density of standardized data into one in data units. */
double lsefit_log_jacobian(const gsl_vector *scale);
/** The log-Jacobian of row @p i of @p x: the sum over its observed
 *  (non-NaN) coordinates only, as a marginal density needs. */
double lsefit_row_log_jacobian(const gsl_matrix *x, size_t i,
                               const gsl_vector *scale);
/** x = mean + scale * z, row by row, in place (no-op when mean is NULL). */
void lsefit_unstandardize(gsl_matrix *x, const gsl_vector *mean,
                          const gsl_vector *scale);

/** Store a standardization as the object "standardize" {"mean", "scale"}
 *  of @p doc (nothing when @p mean is NULL). */
int lsefit_json_set_standardize(lse_json *doc, const gsl_vector *mean,
                                const gsl_vector *scale);
/** Read the optional "standardize" object of a model file: NULL outputs
 *  when absent. */
int lsefit_json_get_standardize(const lse_json *doc, const char *path, size_t d,
                                gsl_vector **mean, gsl_vector **scale);
/** Check "model" == @p model. */
int lsefit_json_check_model(const lse_json *doc, const char *path,
                            const char *model);
/** Read a positive integer key. */
int lsefit_json_get_count(const lse_json *doc, const char *path,
                          const char *key, size_t *out);

/** Parse a comma-separated list into a NULL-terminated array of strings
 *  (one malloc'ed block: free(*out)). */
int lsefit_split_list(const char *s, char ***out, size_t *n);

/* ------------------------------------------------------------------ */
/* Commands                                                            */

int lsefit_gmm_main(int argc, char **argv);
/* lsefit_select.c: --covariance all or mclust's names (the model table) */
int lsefit_select_wanted(int argc, char **argv);
int lsefit_select_main(int argc, char **argv);
int lsefit_slds_main(int argc, char **argv);

#endif /* LSEFIT_H */
