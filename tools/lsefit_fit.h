/* lsefit: the fit pipeline the models share (lsefit_fit.c); private to
 * tools/lsefit*.c.
 *
 *   parse options -> declare the files -> [MPI begin] -> --init-file
 *   -> load the data (or this process's share) -> check (columns of the
 *   restart model, constant columns, rows) -> standardize or check the
 *   scale -> fit every K of -k A:B -> select by BIC/AIC -> model JSON ->
 *   read it back -> per-row outputs / summary -> commit [MPI end]
 *
 * A model plugs in with one lsefit_model table (lsefit_gmm.c gmm_model,
 * lsefit_slds.c slds_model, lsefit_lslds.c lslds_model): its getopt
 * table, its own options, its model file, and the steps that differ (the
 * latent SLDS also a second range D fitted next to K, its own --select
 * criterion and its own model-file keys). Options every fit takes are parsed
 * here (the LSEFIT_FIT_OPT_* codes); a model's own options take codes
 * from LSEFIT_FIT_OPT_MODEL up and are handed to lsefit_model.option. */
#ifndef LSEFIT_FIT_H
#define LSEFIT_FIT_H

#include <getopt.h>

#include "lsefit_data.h"
#include "lsefit_mpi.h"

/* Option codes of every fit (a model's getopt table uses these for the
 * options it shares; short options: -k, -o, -q, -v, -h). */
enum {
    LSEFIT_FIT_OPT_COV = 256,
    LSEFIT_FIT_OPT_INIT,
    LSEFIT_FIT_OPT_INIT_FILE,
    LSEFIT_FIT_OPT_NINIT,
    LSEFIT_FIT_OPT_MAXITER,
    LSEFIT_FIT_OPT_TOL,
    LSEFIT_FIT_OPT_REG,
    LSEFIT_FIT_OPT_SEED,
    LSEFIT_FIT_OPT_COLUMNS,
    LSEFIT_FIT_OPT_IGNORE,
    LSEFIT_FIT_OPT_STANDARDIZE,
    LSEFIT_FIT_OPT_MISSING,
    LSEFIT_FIT_OPT_SELECT,
    LSEFIT_FIT_OPT_LOGJSON,
    LSEFIT_FIT_OPT_MPI,
    LSEFIT_FIT_OPT_SHARDS,
    /* a model's own options: this code and up */
    LSEFIT_FIT_OPT_MODEL = 320
};

/* The getopt_long entries of every fit, in three runs that keep the order
 * of the options in the tables (a model's own options go between them):
 *   {"components"/"n-modes", ..., 'k'}, [model's], LSEFIT_FIT_OPTIONS_MODEL,
 *   [model's], LSEFIT_FIT_OPTIONS_RUN, [model's], LSEFIT_FIT_OPTIONS_END */
#define LSEFIT_FIT_OPTIONS_MODEL                                               \
    {"covariance", required_argument, NULL, LSEFIT_FIT_OPT_COV},               \
        {"init", required_argument, NULL, LSEFIT_FIT_OPT_INIT},                \
        {"init-file", required_argument, NULL, LSEFIT_FIT_OPT_INIT_FILE},      \
        {"n-init", required_argument, NULL, LSEFIT_FIT_OPT_NINIT},             \
        {"max-iter", required_argument, NULL, LSEFIT_FIT_OPT_MAXITER},         \
        {"tol", required_argument, NULL, LSEFIT_FIT_OPT_TOL},                  \
        {"reg-covar", required_argument, NULL, LSEFIT_FIT_OPT_REG},            \
        {"seed", required_argument, NULL, LSEFIT_FIT_OPT_SEED},                \
        {"columns", required_argument, NULL, LSEFIT_FIT_OPT_COLUMNS},          \
        {"ignore", required_argument, NULL, LSEFIT_FIT_OPT_IGNORE},            \
        {"standardize", no_argument, NULL, LSEFIT_FIT_OPT_STANDARDIZE}
#define LSEFIT_FIT_OPTIONS_RUN                                                 \
    {"select", required_argument, NULL, LSEFIT_FIT_OPT_SELECT},                \
        {"log-json", required_argument, NULL, LSEFIT_FIT_OPT_LOGJSON},         \
        {"mpi", no_argument, NULL, LSEFIT_FIT_OPT_MPI},                        \
        {"shards", required_argument, NULL, LSEFIT_FIT_OPT_SHARDS}
#define LSEFIT_FIT_OPTIONS_END                                                 \
    LSEFIT_DATA_LONG_OPTIONS, {"quiet", no_argument, NULL, 'q'},               \
        {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'}, \
    {                                                                          \
        NULL, 0, NULL, 0                                                       \
    }

/* The numbers every fit takes, from the model's default fit options @p o
 * into f (FROM) and back into the options of the run (TO): the fields
 * n_init, max_iter, tol, reg_covar and seed of both. */
#define LSEFIT_FIT_FROM_OPTS(f, o)                                             \
    ((f)->n_init = (o).n_init, (f)->max_iter = (o).max_iter,                   \
     (f)->tol = (o).tol, (f)->reg_covar = (o).reg_covar, (f)->seed = (o).seed)
#define LSEFIT_FIT_TO_OPTS(f, o)                                               \
    ((o).n_init = (f)->n_init, (o).max_iter = (f)->max_iter,                   \
     (o).tol = (f)->tol, (o).reg_covar = (f)->reg_covar, (o).seed = (f)->seed)

/* The model-file functions of an lsefit_model table for the library model
 * lse_NAME (lse_NAME_from_json, _dim, _free, _to_json): NAME_from_json,
 * NAME_dim, NAME_free, NAME_to_json. */
#define LSEFIT_MODEL_FILE_FUNCTIONS(NAME)                                      \
    static lse_status NAME##_from_json(const lse_json *doc, const char *path,  \
                                       void **m, char ***names,                \
                                       lse_error *err)                         \
    {                                                                          \
        lse_##NAME *model = NULL;                                              \
        const lse_status st =                                                  \
            lse_##NAME##_from_json(doc, path, &model, names, err);             \
        *m = model;                                                            \
        return st;                                                             \
    }                                                                          \
    static size_t NAME##_dim(const void *m) { return lse_##NAME##_dim(m); }    \
    static void NAME##_free(void *m) { lse_##NAME##_free(m); }                 \
    static lse_status NAME##_to_json(const void *m, const char *const *names,  \
                                     lse_json *doc, lse_error *err)            \
    {                                                                          \
        return lse_##NAME##_to_json(m, names, doc, err);                       \
    }

/* The steps every model defines, by name: NAME_defaults, NAME_option,
 * NAME_check_mpi, NAME_finish, NAME_outputs, NAME_restart, NAME_prepare,
 * NAME_create, NAME_fit, NAME_result, NAME_json_options, NAME_write_rows,
 * NAME_summary, and the model-file functions of
 * LSEFIT_MODEL_FILE_FUNCTIONS(NAME); for the designated initializer of
 * an lsefit_model (the optional steps are named there). */
#define LSEFIT_MODEL_STEPS(NAME)                                               \
    .from_json = NAME##_from_json, .dim = NAME##_dim, .free = NAME##_free,     \
    .to_json = NAME##_to_json, .defaults = NAME##_defaults,                    \
    .option = NAME##_option, .check_mpi = NAME##_check_mpi,                    \
    .finish = NAME##_finish, .outputs = NAME##_outputs,                        \
    .restart = NAME##_restart, .prepare = NAME##_prepare,                      \
    .create = NAME##_create, .fit = NAME##_fit, .result = NAME##_result,       \
    .json_options = NAME##_json_options, .write_rows = NAME##_write_rows,      \
    .summary = NAME##_summary

/* A model file: the model, its feature names, its standardization. */
typedef struct lsefit_model_file {
    void *m;           /* lse_gmm *, lse_slds *, ... */
    char **names;      /* (d) one malloc'ed block */
    gsl_vector *mean;  /* (d) or NULL */
    gsl_vector *scale; /* (d) or NULL */
} lsefit_model_file;

/* What one fit of K gave, in data units. */
typedef struct lsefit_fit_result {
    size_t k, n_params, n_iter;
    size_t n_rows;    /* rows of the whole data set */
    size_t n_seq;     /* sequences (series models) */
    size_t n_steps;   /* fitted steps (series models) */
    size_t n_missing; /* NaN cells marginalized */
    double loglik, loglik_per, bic, aic; /* loglik_per: per sample/step */
    int converged;
    size_t sub;         /* the value of the model's second range (D) */
    double crit, crit_se; /* the model's own criterion (higher is better,
                             lsefit_model.crit_label) and its se, or NaN */
} lsefit_fit_result;

typedef struct lsefit_model lsefit_model;

/* One fit command: the options every fit takes, then the run's state. */
typedef struct lsefit_fit {
    const lsefit_model *model;
    lsefit_data_opts data;
    size_t kmin, kmax;
    size_t smin, smax; /* the model's second range (sub_label), 0:0 without */
    size_t sub;        /* its value for the fit under way */
    int k_given, select_given;
    const char *select; /* "bic", "aic" or the model's select_own */
    lse_cov_type cov;
    lse_cov_model cov_model; /* one of mclust's models, or NONE */
    int cov_given;
    const char *init; /* a method of model->inits, or a model file */
    int init_file;    /* init is a model file (--init-file, --init PATH) */
    size_t n_init, max_iter;
    double tol, reg_covar;
    unsigned long seed;
    int reg_given, standardize;
    const char *missing_name;
    const char *output, *log_json;
    int mpi;            /* --mpi */
    const char *shards; /* --shards PATTERN */
    void *own;          /* the model's own options and state */
    /* the run */
    lsefit_mpi *comm; /* NULL without --mpi */
    lsefit_data d;
    lsefit_model_file start; /* --init-file */
    lsefit_progress prog;
} lsefit_fit;

/* Where lsefit_model.json_options adds its keys to the "options" object. */
enum {
    LSEFIT_JSON_AFTER_COVARIANCE,
    LSEFIT_JSON_AFTER_REG_COVAR,
    LSEFIT_JSON_AFTER_SEED
};

struct lsefit_model {
    const char *name;       /* command, "model" of its files, progress */
    const char *data_word;  /* "DATA.csv" in messages */
    const char *data_role;  /* "the data" in messages */
    const char *k_noun;     /* "components" */
    const char *k_example;  /* "1:8" in the --select message */
    const char *per_key;    /* "loglik_per_sample" in the model file */
    const char *const *subcommands;
    size_t n_subcommands;
    const lsefit_init_name *inits; /* --init names */
    const struct option *options;  /* the getopt_long table of the fit */
    void (*help)(FILE *f);
    int cov_models; /* --covariance also takes mclust's names (EII ... VVV) */
    int no_standardize; /* fits in data units only: the scale check's
                           message does not offer --standardize */
    /* the --reg-covar value the constant-column message suggests (NULL:
     * "1e-3"); the latent SLDS's ridge must stay small against the data's
     * variance or its M-step no longer raises the ELBO */
    const char *reg_example;
    /* optional (NULL: as for the GMM): "model" of its files (default
     * name); a second range fitted next to K ("D": f->smin..smax, the
     * model sets it); the name of loglik in tables and notes ("ELBO"); a
     * --select criterion besides bic and aic ("heldout", computed by
     * scored into lsefit_fit_result.crit) and its column in the table */
    const char *file_model;
    const char *fit_hint; /* " (try ...)" after a failed fit (default: a
                             larger --reg-covar for a numerical failure) */
    const char *sub_label;
    const char *loglik_label;
    const char *select_own;
    const char *crit_label;

    /* the model file (lse_<model>_from_json, _dim, _free, _to_json) */
    lse_status (*from_json)(const lse_json *doc, const char *path, void **m,
                            char ***names, lse_error *err);
    size_t (*dim)(const void *m);
    void (*free)(void *m);
    lse_status (*to_json)(const void *m, const char *const *names,
                          lse_json *doc, lse_error *err);

    /* options: defaults of the common fields and f->own; one of the
     * model's own options (code >= LSEFIT_FIT_OPT_MODEL; argv for
     * messages); checks under --mpi (before the operands are read);
     * the end of parsing (after the common checks) */
    void (*defaults)(lsefit_fit *f);
    int (*option)(lsefit_fit *f, int c, const char *arg, char **argv);
    int (*check_mpi)(const lsefit_fit *f);
    int (*finish)(lsefit_fit *f);
    /* the model's outputs besides -o and --log-json (declared between);
     * its inputs besides the data and --init-file (may be NULL) */
    size_t (*outputs)(const lsefit_fit *f, lsefit_path *out);
    size_t (*inputs)(const lsefit_fit *f, lsefit_path *in);
    /* --init-file: check the restart model against the options and take
     * its shape (K, covariance, ...) */
    int (*restart)(lsefit_fit *f);

    /* the run: lags of a series (context rows under --mpi); after the
     * data are loaded (may be NULL); after the constant-column check (may
     * be NULL); fit options (weights, progress, --mpi) */
    size_t (*lags)(const lsefit_fit *f);
    int (*loaded)(lsefit_fit *f);
    int (*check)(lsefit_fit *f);
    void (*prepare)(lsefit_fit *f);
    /* a new model of k (not for --init-file); before its fit (may be
     * NULL); the fit; its result */
    int (*create)(lsefit_fit *f, size_t k, void **m);
    int (*before_fit)(lsefit_fit *f, void *m);
    lse_status (*fit)(lsefit_fit *f, void *m, lse_error *err);
    lsefit_fit_result (*result)(const lsefit_fit *f, const void *m);
    /* "options" keys of the model at the place @p where */
    lse_status (*json_options)(const lsefit_fit *f, lse_json *o, int where,
                               lse_error *err);
    /* per-row outputs of the model read back; the summary without -o */
    int (*write_rows)(lsefit_fit *f, const lsefit_model_file *back);
    int (*summary)(const lsefit_fit *f, FILE *out,
                   const lsefit_model_file *back, const lsefit_fit_result *r);
    /* more keys in the model file of the chosen model (may be NULL) */
    int (*after_json)(lsefit_fit *f, const void *m, lse_json *doc);
    /* optional: after result, the model's own criterion into r->crit */
    int (*scored)(lsefit_fit *f, const void *m, lsefit_fit_result *r);
    /* optional: the whole model file of the chosen model, instead of
     * parameters, summary keys, "options" and "standardize" */
    int (*model_json)(const lsefit_fit *f, const void *m,
                      const lsefit_fit_result *r, lse_json **doc);
};

/** lsefit MODEL DATA.csv ...: the whole fit command of @p model; @p own
 *  (the model's own options and state, zeroed) becomes f->own. */
int lsefit_fit_main(const lsefit_model *model, void *own, int argc,
                    char **argv);

/* lsefit gmm sample, lsefit slds simulate: draw rows from a model file
 * (CSV with the feature names, data units) and their labels. */
typedef struct lsefit_draw {
    const char *cmd;           /* "gmm sample" */
    char count;                /* the short option of the count: 'n' */
    const char *count_long;    /* its long name: "samples" */
    const char *count_what;    /* "the number of samples" */
    const char *labels_opt;    /* the labels' option: "--labels" */
    const char *labels_column; /* their column: "component" */
    void (*help)(FILE *f);
    lse_status (*draw)(const void *m, size_t n, unsigned long seed,
                       gsl_matrix *x, size_t *labels, lse_error *err);
    /* optional: columns drawn after the model's (x is n x (dim + extra));
     * the name of extra column j into buf */
    size_t (*extra)(const void *m);
    void (*extra_name)(const void *m, size_t j, char *buf, size_t size);
} lsefit_draw;

/** lsefit MODEL SUBCOMMAND MODEL.json -n N [--seed S] [-o FILE]
 *  [--LABELS FILE]. */
int lsefit_draw_main(const lsefit_model *model, const lsefit_draw *dr,
                     int argc, char **argv);


/* lsefit gmm predict|score, lsefit slds segment: MODEL.json DATA.csv and
 * the options of reading the data (--columns, --ignore, --missing, -o,
 * -q, -h and LSEFIT_DATA_LONG_OPTIONS, with the LSEFIT_FIT_OPT_* codes);
 * the command's own options (codes >= LSEFIT_FIT_OPT_MODEL) go to
 * option(user, c, arg, dopt). */
typedef struct lsefit_query {
    const char *cmd;               /* "gmm predict" */
    const struct option *options;  /* its getopt_long table */
    const char *data_word;         /* "DATA.csv" */
    int (*option)(void *user, int c, const char *arg, lsefit_data_opts *dopt);
    void *user;
} lsefit_query;

/** Parse a query's command line: *help when -h was given (nothing else
 *  done); else dopt->path, *model_path and *output ("-" by default). */
int lsefit_query_parse(const lsefit_query *q, int argc, char **argv,
                       lsefit_data_opts *dopt, const char **model_path,
                       const char **output, int *help);

/** Build the model file @p doc (read from @p path) of @p model into @p f
 *  (zeroed first; freed on failure): "model" checked, the model, its
 *  names and standardization. */
int lsefit_model_from_json(const lsefit_model *model, const lse_json *doc,
                           const char *path, lsefit_model_file *f);
/** The same from the file @p path. */
int lsefit_model_read(const lsefit_model *model, const char *path,
                      lsefit_model_file *f);
void lsefit_model_file_free(const lsefit_model *model, lsefit_model_file *f);

/** predict, score, segment: the model file @p model_path (into @p g), then
 *  the data of @p dopt (into @p data) with the model's columns, checked
 *  against it and standardized as it was. The caller frees both, also on
 *  failure. */
int lsefit_model_data(const lsefit_model *model, const char *model_path,
                      lsefit_data_opts *dopt, lsefit_model_file *g,
                      lsefit_data *data);

/** "%s: %zu data column%s but the model %s has n_features = %zu". */
int lsefit_fail_columns(const char *data_path, size_t d,
                        const char *model_path, size_t model_d);

/** "  LABEL       x0 x1 ..." rows of the printed summaries. */
void lsefit_print_row(FILE *f, const char *label, const double *x, size_t n,
                      size_t stride);

#endif /* LSEFIT_FIT_H */
