/* lsefit: CSV data sets (lsefit_data.c) and the model-file pieces shared
 * by the models; private to tools/lsefit*.c. */
#ifndef LSEFIT_DATA_H
#define LSEFIT_DATA_H

#include "lsefit_common.h"

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

/* Under --mpi each process holds a share of the rows: the checks and the
 * standardization sum their column statistics over every process through
 * this (lsefit_mpi.c); one process has none. */
typedef enum lsefit_op { LSEFIT_OP_SUM, LSEFIT_OP_MIN, LSEFIT_OP_MAX } lsefit_op;
typedef struct lsefit_share {
    size_t first;      /* leading rows that belong to earlier processes */
    size_t total_rows; /* rows of every process (without those) */
    const char *name;  /* the data's name in messages */
    /* buf[0..n) becomes its sum, min or max over the processes */
    int (*reduce)(void *user, double *buf, size_t n, lsefit_op op);
    void *user;
} lsefit_share;

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
    const lsefit_share *share; /* --mpi, or NULL (borrowed) */
} lsefit_data;

/** Read the data set described by @p o into @p out (zeroed first). */
int lsefit_data_load(const lsefit_data_opts *o, lsefit_data *out);
/** The same from a table already read (taken over: freed with @p out, or
 *  on failure); o->path is not read. */
int lsefit_data_from_table(const lsefit_data_opts *o, lse_table *t,
                           lsefit_data *out);
void lsefit_data_free(lsefit_data *data);
/** Refuse a column without an observed value, and a constant column
 *  unless @p reg_covar_given (NaN cells are skipped; under --mpi over
 *  every process's rows); the message suggests --reg-covar @p reg_example
 *  (NULL: "1e-3"). */
int lsefit_data_check_constant(const lsefit_data *data, int reg_covar_given,
                               const char *reg_example);
/** Refuse values whose squares or products overflow in a covariance
 *  summed over @p total_rows rows (every process's rows under --mpi; fits
 *  without --standardize); warn (unless -q) when the squares underflow
 *  (subnormal data). The messages offer --standardize when
 *  @p can_standardize. */
int lsefit_data_check_scale(const lsefit_data *data, size_t total_rows,
                            int can_standardize);
/** Need at least @p k rows (what = "components") or steps (what =
 *  "modes"). */
int lsefit_data_check_rows(const lsefit_data *data, size_t n_needed, size_t k,
                           const char *what);
/** Compute the mean and scale (population standard deviation; 1 for a
 *  constant column) of the observed values of every column (under --mpi
 *  of every process's rows) and standardize x in place (NaN stays NaN). */
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

#endif /* LSEFIT_DATA_H */
