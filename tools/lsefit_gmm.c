/* lsefit gmm: fit a Gaussian mixture (lse_gmm, models/gmm.h) to CSV data,
 * select K by BIC/AIC, and predict, score or sample from a model file.
 *
 * The model file is written from the fitted model and every output of the
 * fit (labels, responsibilities, the printed summary) is computed from the
 * model read back from that very text, so "lsefit gmm predict" on the file
 * reproduces them bit for bit. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit_cmd.h"
#include "lsefit_fit.h"
#include "lsefit_gmmstart.h"
#include "lsefit_plot.h"

/* ------------------------------------------------------------------ */
/* Help                                                                */

static void help_fit(FILE *f)
{
    const lse_gmm_fit_opts d = lse_gmm_fit_opts_default();
    fprintf(
        f,
        "Usage: lsefit gmm DATA.csv -k K [options]\n"
        "       lsefit gmm predict MODEL.json DATA.csv [options]\n"
        "       lsefit gmm score MODEL.json DATA.csv [options]\n"
        "       lsefit gmm sample MODEL.json -n N [--seed S] [options]\n"
        "       lsefit gmm plot MODEL.json DATA.csv -o FIG.svg|png|pdf "
        "[--what W]\n"
        "         (bic, classification, uncertainty, density: 'lsefit gmm plot "
        "--help')\n"
        "\n"
        "Fit a Gaussian mixture of K components to the rows of DATA.csv by EM\n"
        "(\"-\" reads standard input). The CSV may be comma, semicolon or tab\n"
        "separated, with or without a header row, with quoted fields and '#'\n"
        "comment lines. Without -o the fitted model is printed.\n"
        "\n"
        "Model:\n"
        "  -k, --components K|A:B  number of components (>= 1); a range A:B\n"
        "                          fits each K and keeps the best (--select)\n"
        "  --select bic|aic        criterion for a range of K (default bic)\n"
        "  --covariance TYPE       full, diag, spherical or tied (default "
        "full),\n"
        "                          or one of mclust's models (EII ... VVV);\n"
        "                          a list, all, or a model with a range of K\n"
        "                          prints mclust's BIC table\n"
        "Fitting:\n"
        "  --init METHOD           kmeans++ (also k-means++):\n"
        "                          k-means++ seeds and 10 Lloyd iterations;\n"
        "                          kmeans: k-means to convergence\n"
        "                          (scikit-learn's default); random;\n"
        "                          hcvvv: mclust's default, one start per K\n"
        "                          from its hcVVV tree of the data;\n"
        "                          emem (default): short runs from k-means++,\n"
        "                          random and split starts, the best to\n"
        "                          convergence (docs/lsefit.md, Starts);\n"
        "                          emem+hc: emem with the hcvvv start too\n"
        "  --init-file FILE        restart from a model file (K, covariance\n"
        "                          type, columns and standardization come\n"
        "                          from it; --init PATH does the same)\n"
        "  --n-init N              runs from different starts; the best\n"
        "                          log-likelihood is kept (default %zu)\n"
        "  --max-iter N            EM iterations per run (default %zu)\n"
        "  --tol X                 stop when the log-likelihood changes by\n"
        "                          <= X |log-likelihood| (default %g)\n"
        "  --reg-covar X           added to covariance diagonals (default "
        "%g);\n"
        "                          needed to fit a constant column\n"
        "  --bootstrap B           standard errors of the weights, means and\n"
        "                          covariances from B parametric bootstrap\n"
        "                          refits (mclust's MclustBootstrap \"pb\");\n"
        "                          printed and saved as \"bootstrap\"\n"
        "  --seed S                random seed (default %lu); equal seeds "
        "give\n"
        "                          bit-identical fits\n"
        "  --accel none|squarem    EM acceleration (default squarem: fewer\n"
        "                          iterations; it extrapolates and stays\n"
        "                          monotone)\n"
        "  --smem N                emem: split-and-merge moves tried per\n"
        "                          round on the final fit (default 40; 0:\n"
        "                          off, faster on large data)\n",
        d.n_init, d.max_iter, d.tol, d.reg_covar, d.seed);
    fputs(
        "Data:\n"
        "  --columns LIST          columns to use, by name or 1-based index,\n"
        "                          comma-separated (default: all but "
        "--ignore)\n"
        "  --ignore LIST           columns to leave out (e.g. a class label)\n"
        "  --weights COLUMN        per-row sample weights (>= 0)\n"
        "  --missing POLICY        empty/NA/NaN cells: error (default), drop\n"
        "                          the row, or marginalize (each row gives\n"
        "                          the exact marginal likelihood of its\n"
        "                          observed coordinates)\n"
        LSEFIT_DATA_HELP
        "  --standardize           fit on (x - mean) / sd; the mean and sd "
        "are\n"
        "                          stored in the model and applied by "
        "predict,\n"
        "                          score and sample\n",
        stdout);
    /* two strings: C99 promises only 4095 characters in one literal */
    fputs(
        "Output:\n"
        "  -o, --output FILE       write the model JSON (\"-\": stdout)\n"
        "  --labels FILE           most likely component (0-based) per row\n"
        "  --proba FILE            responsibilities p0..p(K-1) per row and\n"
        "                          the uncertainty 1 - max_k p_k\n"
        "  --log-json FILE         one JSON object per EM iteration\n"
        "  -q, --quiet             no progress lines or warnings\n"
        "  -v, --verbose           a progress line every iteration\n"
        "  --threads N             threads (default: LSE_NUM_THREADS or all\n"
        "                          processors); results do not depend on N\n"
        "  -h, --help              this help\n"
        "Several processes (docs/mpi.md):\n"
        "  --mpi                   under mpirun -n P: each process reads its\n"
        "                          share of the rows (a byte range of\n"
        "                          DATA.csv) and the EM statistics are summed\n"
        "                          with MPI_Allreduce; same model as one\n"
        "                          process; process 0 writes the outputs\n"
        "  --shards PATTERN        with --mpi, instead of DATA.csv: one file\n"
        "                          per process, the sorted matches of the\n"
        "                          glob PATTERN (e.g. 'part-*.csv')\n"
        "\n"
        "BIC = -2 loglik + p log(n) and AIC = -2 loglik + 2 p follow\n"
        "scikit-learn's conventions: lower is better. p counts means,\n"
        "covariances and K-1 weights; n is the number of rows (or the sum of\n"
        "the weights). All outputs are written atomically. Exit status: 0 ok,\n"
        "1 bad input or failed fit, 2 usage error.\n",
        f);
}

static void help_predict(FILE *f, const char *what)
{
    if (strcmp(what, "predict") == 0)
        fputs("Usage: lsefit gmm predict MODEL.json DATA.csv [options]\n"
              "\n"
              "Print the most likely component (0-based, column 'label') of\n"
              "each data row of DATA.csv under the model.\n",
              f);
    else
        fputs("Usage: lsefit gmm score MODEL.json DATA.csv [options]\n"
              "\n"
              "Print the log-likelihood log p(x) of each data row (column\n"
              "'loglik', in the units of the data also for a standardized\n"
              "model); the total and the mean go to stderr.\n",
              f);
    fputs("\n"
          "The columns are the model's feature_names when DATA.csv has a\n"
          "header, else every column not in --ignore. Rows dropped by\n"
          "--missing drop get an empty cell, so the output has one line per\n"
          "data row.\n"
          "\n"
          "Options:\n"
          "  --columns LIST     columns to use, by name or 1-based index\n"
          "  --ignore LIST      columns to leave out\n"
          "  --missing POLICY   error (default), drop or marginalize\n"
          "  --delimiter C, --header, --no-header, --max-input-size SIZE\n"
          "                     how DATA.csv is read, as for the fit\n"
          "  -o, --output FILE  write here instead of stdout\n",
          f);
    if (strcmp(what, "predict") == 0)
        fputs("  --proba FILE       also write the responsibilities and the\n"
              "                     uncertainty 1 - max_k p_k\n",
              f);
    fputs("  -q, --quiet        no summary on stderr, no warnings\n"
          "  -h, --help         this help\n"
          "\n"
          "Values are written with 17 significant digits. Exit status: 0 ok,\n"
          "1 bad input, 2 usage error.\n",
          f);
}

static void help_sample(FILE *f)
{
    fputs("Usage: lsefit gmm sample MODEL.json -n N [--seed S] [options]\n"
          "\n"
          "Draw N rows from the model: a component by weight, then its\n"
          "Gaussian (in data units for a standardized model). CSV with the\n"
          "model's feature_names as header, 17 significant digits.\n"
          "\n"
          "Options:\n"
          "  -n, --samples N    rows to draw (>= 1, required)\n"
          "  --seed S           random seed (default 0)\n"
          "  -o, --output FILE  write here instead of stdout\n"
          "  --labels FILE      the component (0-based) of each row\n"
          "  -q, --quiet        no warnings\n"
          "  -h, --help         this help\n",
          f);
}

/* ------------------------------------------------------------------ */
/* Model files                                                         */

LSEFIT_MODEL_FILE_FUNCTIONS(gmm)

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

/* The options of lsefit gmm besides those of every fit (f->own). */
typedef struct gmm_own {
    lse_gmm_fit_opts opts;
    const char *labels, *proba;
    size_t bootstrap;         /* --bootstrap B (0: none) */
    lsefit_gmm_start start;   /* --init hcvvv / emem / emem+hc state */
} gmm_own;

static void progress_cb(size_t run, size_t iter, double energy, double change,
                        void *user)
{
    lsefit_progress_step(user, run, iter, -energy, -change);
}

/* sum_i w_i log|J_i|: turns the log-likelihood of standardized rows into
 * one in data units (J_i over the observed coordinates of row i). */
static double total_log_jacobian(const lsefit_data *data)
{
    if (data->scale == NULL)
        return 0.0;
    double s = 0.0;
    for (size_t i = 0; i < data->x->size1; i++)
        s += (data->weight != NULL ? gsl_vector_get(data->weight, i) : 1.0) *
             lsefit_row_log_jacobian(data->x, i, data->scale);
    return s;
}

static lsefit_fit_result gmm_result(const lsefit_fit *f, const void *model)
{
    const lse_gmm *m = model;
    const lsefit_data *data = &f->d;
    const lse_gmm_fit_info *info = lse_gmm_info(m);
    lsefit_fit_result r = {0};
    r.k = lse_gmm_k(m);
    r.n_params = lse_gmm_n_params(m);
    r.n_iter = info->n_iter;
    r.converged = info->converged;
    r.n_missing = info->n_missing;
    r.n_rows = info->n_samples;
    /* --mpi: no missing values, so the rows' Jacobians sum to n_eff times
     * one row's (this process holds only its rows) */
    const double logj =
        lsefit_mpi_active()
            ? (data->scale != NULL ? info->n_eff *
                                         lsefit_log_jacobian(data->scale)
                                   : 0.0)
            : total_log_jacobian(data);
    if (logj == 0.0) {
        r.loglik = info->loglik;
        r.loglik_per = info->loglik_per_sample;
        r.bic = info->bic;
        r.aic = info->aic;
    } else { /* the density of x = mean + scale z is p(z) / prod(scale) */
        const double p = (double)r.n_params;
        r.loglik = info->loglik - logj;
        r.loglik_per = r.loglik / info->n_eff;
        r.bic = -2.0 * r.loglik + p * log(info->n_eff);
        r.aic = -2.0 * r.loglik + 2.0 * p;
    }
    return r;
}

/* "lloyd_iter" after "reg_covar" in the "options" of the model file. */
static lse_status gmm_json_options(const lsefit_fit *f, lse_json *o, int where,
                                   lse_error *err)
{
    const gmm_own *g = f->own;
    if (where == LSEFIT_JSON_AFTER_SEED)
        return lse_json_set_string(
            o, "accel",
            g->opts.accel == LSE_GMM_ACCEL_SQUAREM ? "squarem" : "none", err);
    if (where != LSEFIT_JSON_AFTER_REG_COVAR)
        return LSE_OK;
    return lse_json_set_integer(o, "lloyd_iter", (long long)g->opts.lloyd_iter,
                                err);
}

/* ------------------------------------------------------------------ */
/* Printing                                                            */

/* Sigma in data units: S Sigma_z S with S = diag(scale). */
static void to_data_units(gsl_matrix *s, const gsl_vector *scale)
{
    for (size_t i = 0; scale != NULL && i < s->size1; i++)
        for (size_t j = 0; j < s->size2; j++)
            gsl_matrix_set(s, i, j,
                           gsl_matrix_get(s, i, j) * gsl_vector_get(scale, i) *
                               gsl_vector_get(scale, j));
}

static int print_summary(FILE *f, const lsefit_model_file *g,
                         const lsefit_fit_result *r,
                         const lsefit_data *data, const char *path, double tol)
{
    const lse_gmm *m = g->m;
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    const lse_cov_type cov = lse_gmm_cov_type(m);
    gsl_matrix *s = gsl_matrix_alloc(d, d);
    gsl_vector *mu = gsl_vector_alloc(d);
    if (s == NULL || mu == NULL) {
        gsl_matrix_free(s);
        gsl_vector_free(mu);
        return lsefit_fail("out of memory");
    }
    fprintf(f, "Gaussian mixture: K = %zu, %s covariance%s, d = %zu (", k,
            lse_gmm_cov_name(cov), cov == LSE_COV_TIED ? "" : "s", d);
    for (size_t j = 0; j < d; j++)
        fprintf(f, "%s%s", j ? ", " : "", data->names[j]);
    fprintf(f, ")\n");
    fprintf(f, "data: %s, %zu rows%s", path, r->n_rows,
            data->weight != NULL ? ", weighted" : "");
    if (r->n_missing > 0)
        fprintf(f, ", %zu missing values marginalized", r->n_missing);
    fprintf(f, "%s\n",
            g->mean != NULL ? ", standardized (parameters below in data "
                              "units)"
                            : "");
    fprintf(f, "log-likelihood %.10g (per sample %.10g)\n", r->loglik,
            r->loglik_per);
    fprintf(f, "BIC %.10g  AIC %.10g  (%zu parameters; lower is better)\n",
            r->bic, r->aic, r->n_params);
    fprintf(f, "EM: %zu iteration%s, %s (tol %g)\n", r->n_iter,
            r->n_iter == 1 ? "" : "s",
            r->converged ? "converged" : "NOT converged", tol);
    const gsl_vector *w = lse_gmm_weights(m);
    const gsl_matrix *means = lse_gmm_means(m);
    for (size_t c = 0; c < k; c++) {
        fprintf(f, "\ncomponent %zu: weight %.6g\n", c, gsl_vector_get(w, c));
        for (size_t j = 0; j < d; j++) {
            const double z = gsl_matrix_get(means, c, j);
            gsl_vector_set(mu, j,
                           g->mean != NULL ? gsl_vector_get(g->mean, j) +
                                                 gsl_vector_get(g->scale, j) * z
                                           : z);
        }
        lsefit_print_row(f, "mean", mu->data, d, 1);
        if (cov == LSE_COV_TIED && c > 0)
            continue;
        lse_gmm_get_covariance(m, c, s);
        to_data_units(s, g->scale);
        if (cov == LSE_COV_DIAG || cov == LSE_COV_SPHERICAL) {
            lsefit_print_row(f, "variances", s->data, d, s->tda + 1);
        } else {
            for (size_t i = 0; i < d; i++)
                lsefit_print_row(f,
                          i > 0                 ? ""
                          : cov == LSE_COV_TIED ? "covariance*"
                                                : "covariance",
                          gsl_matrix_const_ptr(s, i, 0), d, 1);
        }
    }
    if (cov == LSE_COV_TIED)
        fprintf(f, "\n* tied: one covariance shared by every component\n");
    gsl_matrix_free(s);
    gsl_vector_free(mu);
    return LSEFIT_OK;
}

/* ------------------------------------------------------------------ */
/* Per-row outputs: one line per data row of the table; rows left out by
 * --missing drop get empty cells. */

static int write_labels(const char *path, const lsefit_data *data,
                        const size_t *labels, const char *column)
{
    lsefit_buf b;
    int rc = lsefit_buf_open(&b);
    if (rc != LSEFIT_OK)
        return rc;
    fprintf(b.f, "%s\n", column);
    size_t r = 0;
    for (size_t i = 0; i < data->n_table; i++) {
        if (r < data->x->size1 && data->rows[r] == i)
            fprintf(b.f, "%zu", labels[r++]);
        fputc('\n', b.f);
    }
    rc = lsefit_buf_write(&b, path);
    lsefit_buf_free(&b);
    return rc;
}

/* Columns of @p v (n, c) named prefix0.. or @p name (c = 1). */
static int write_values(const char *path, const lsefit_data *data,
                        const gsl_matrix *v, const char *prefix,
                        const char *name, const char *last)
{
    lsefit_buf b;
    int rc = lsefit_buf_open(&b);
    if (rc != LSEFIT_OK)
        return rc;
    for (size_t j = 0; j < v->size2; j++) {
        if (name != NULL)
            fputs(name, b.f);
        else if (last != NULL && j + 1 == v->size2)
            fprintf(b.f, ",%s", last);
        else
            fprintf(b.f, "%s%s%zu", j ? "," : "", prefix, j);
    }
    fputc('\n', b.f);
    size_t r = 0;
    for (size_t i = 0; i < data->n_table; i++) {
        const int kept = r < v->size1 && data->rows[r] == i;
        for (size_t j = 0; j < v->size2; j++) {
            if (j > 0)
                fputc(',', b.f);
            if (kept)
                lsefit_csv_number(b.f, gsl_matrix_get(v, r, j));
        }
        r += (size_t)kept;
        fputc('\n', b.f);
    }
    rc = lsefit_buf_write(&b, path);
    lsefit_buf_free(&b);
    return rc;
}

/* Labels (argmax of the responsibilities) and responsibilities, with NaN
 * marginalized under --missing marginalize (lse_gmm_posterior). */
static int predict_outputs(const lse_gmm *m, const lsefit_data *data,
                           lse_gmm_missing missing, const char *labels_path,
                           const char *proba_path)
{
    if (labels_path == NULL && proba_path == NULL)
        return LSEFIT_OK;
    lse_error err;
    const size_t n = data->x->size1, k = lse_gmm_k(m);
    gsl_matrix *resp = gsl_matrix_alloc(n, k + 1); /* + uncertainty */
    size_t *labels = malloc(n * sizeof *labels);
    int rc = LSEFIT_OK;
    if (resp == NULL || labels == NULL)
        rc = lsefit_fail("out of memory");
    if (rc == LSEFIT_OK) {
        gsl_matrix_view p = gsl_matrix_submatrix(resp, 0, 0, n, k);
        if (lse_gmm_posterior(m, data->x, missing, &p.matrix, NULL, &err) !=
            LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
    }
    for (size_t i = 0; rc == LSEFIT_OK && i < n; i++) {
        size_t best = 0;
        for (size_t c = 1; c < k; c++)
            if (gsl_matrix_get(resp, i, c) > gsl_matrix_get(resp, i, best))
                best = c;
        labels[i] = best;
        gsl_matrix_set(resp, i, k, 1.0 - gsl_matrix_get(resp, i, best));
    }
    if (rc == LSEFIT_OK && labels_path != NULL)
        rc = write_labels(labels_path, data, labels, "label");
    if (rc == LSEFIT_OK && proba_path != NULL)
        rc = write_values(proba_path, data, resp, "p", NULL, "uncertainty");
    gsl_matrix_free(resp);
    free(labels);
    return rc;
}

/* ------------------------------------------------------------------ */
/* lsefit gmm DATA.csv                                                 */

/* Options of lsefit gmm (and of predict, score, sample) that not every
 * fit takes; a new option of the gmm fit goes into fit_options and
 * gmm_option (or, when every model's fit takes it, into lsefit_fit.c). */
enum {
    OPT_WEIGHTS = LSEFIT_FIT_OPT_MODEL,
    OPT_LABELS,
    OPT_PROBA,
    OPT_COV = LSEFIT_FIT_OPT_COV,
    OPT_COLUMNS = LSEFIT_FIT_OPT_COLUMNS,
    OPT_IGNORE = LSEFIT_FIT_OPT_IGNORE,
    OPT_MISSING = LSEFIT_FIT_OPT_MISSING,
    OPT_ACCEL = LSEFIT_FIT_OPT_MODEL + 3,
    OPT_BOOTSTRAP,
    OPT_SMEM
};

static const struct option fit_options[] = {
    {"components", required_argument, NULL, 'k'},
    LSEFIT_FIT_OPTIONS_MODEL,
    {"accel", required_argument, NULL, OPT_ACCEL},
    {"bootstrap", required_argument, NULL, OPT_BOOTSTRAP},
    {"smem", required_argument, NULL, OPT_SMEM},
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"missing", required_argument, NULL, LSEFIT_FIT_OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"proba", required_argument, NULL, OPT_PROBA},
    LSEFIT_FIT_OPTIONS_RUN,
    LSEFIT_FIT_OPTIONS_END};

/* --init names: scikit-learn's GaussianMixture init_params spellings
 * where they mean the same algorithm. "kmeans" is scikit-learn's default:
 * a k-means clustering run to convergence (k-means++ seeding, then Lloyd
 * iterations until no assignment changes, at most KMEANS_LLOYD_ITER, its
 * KMeans max_iter); "kmeans++" stops after the library's lloyd_iter (10)
 * iterations. */
#define KMEANS_LLOYD_ITER 300
static const lsefit_init_name gmm_inits[] = {{"kmeans++", "kmeans++"},
                                             {"k-means++", "kmeans++"},
                                             {"kmeans", "kmeans"},
                                             {"random", "random"},
                                             {"hcvvv", "hcvvv"},
                                             {"emem", "emem"},
                                             {"emem+hc", "emem+hc"},
                                             {NULL, NULL}};

static void gmm_defaults(lsefit_fit *f)
{
    gmm_own *g = f->own;
    g->opts = lse_gmm_fit_opts_default();
    LSEFIT_FIT_FROM_OPTS(f, g->opts);
    f->init = "emem"; /* docs/lsefit.md, "Starts" */
}

static int gmm_option(lsefit_fit *f, int c, const char *arg, char **argv)
{
    gmm_own *g = f->own;
    (void)argv;
    switch (c) {
    case OPT_WEIGHTS:
        f->data.weights = arg;
        break;
    case OPT_LABELS:
        g->labels = arg;
        break;
    case OPT_PROBA:
        g->proba = arg;
        break;
    case OPT_ACCEL:
        if (strcmp(arg, "none") != 0 && strcmp(arg, "squarem") != 0)
            return lsefit_usage("gmm", "--accel '%s': expected none or squarem",
                                arg);
        g->opts.accel = strcmp(arg, "squarem") == 0 ? LSE_GMM_ACCEL_SQUAREM
                                                    : LSE_GMM_ACCEL_NONE;
        break;
    case OPT_BOOTSTRAP:
        return lsefit_opt_size("gmm", "--bootstrap", arg, 2, &g->bootstrap);
    case OPT_SMEM:
        g->start.smem_set = 1;
        return lsefit_opt_size("gmm", "--smem", arg, 0, &g->start.smem);
    default:
        return lsefit_opt_bad("gmm", c, argv, fit_options);
    }
    return LSEFIT_OK;
}

static int gmm_check_mpi(const lsefit_fit *f)
{
    const gmm_own *g = f->own;
    if (f->mpi && (g->labels != NULL || g->proba != NULL))
        return lsefit_usage("gmm", "--labels and --proba are not written with "
                                   "--mpi (each process holds only its rows); "
                                   "run 'lsefit gmm predict' on the model");
    if (f->mpi && f->data.missing == LSE_MISSING_KEEP)
        return lsefit_usage("gmm", "--missing marginalize is not supported "
                                   "with --mpi; use --missing drop");
    return LSEFIT_OK;
}

static int gmm_finish(lsefit_fit *f)
{
    gmm_own *g = f->own;
    if (g->labels != NULL && g->proba != NULL &&
        strcmp(g->labels, g->proba) == 0)
        return lsefit_usage("gmm", "--labels and --proba name the same file");
    if (f->data.missing == LSE_MISSING_KEEP)
        g->opts.missing = LSE_GMM_MISSING_MARGINALIZE;
    g->opts.init = f->init_file                      ? LSE_GMM_INIT_GIVEN
                   : strcmp(f->init, "random") == 0 ? LSE_GMM_INIT_RANDOM
                                                    : LSE_GMM_INIT_KMEANSPP;
    if (!f->init_file && strcmp(f->init, "kmeans") == 0)
        g->opts.lloyd_iter = KMEANS_LLOYD_ITER;
    if (f->mpi && g->bootstrap > 0)
        return lsefit_usage("gmm", "--bootstrap refits on one process: not "
                                   "with --mpi");
    g->start.method = f->init_file ? NULL : f->init;
    return lsefit_gmm_start_check(g->start.method, f->mpi,
                                  f->data.weights != NULL,
                                  f->data.missing == LSE_MISSING_KEEP);
}

static size_t gmm_outputs(const lsefit_fit *f, lsefit_path *out)
{
    const gmm_own *g = f->own;
    out[0] = (lsefit_path){g->labels, "--labels"};
    out[1] = (lsefit_path){g->proba, "--proba"};
    return 2;
}

/* --init FILE: take K and the covariance type from it. */
static int gmm_restart(lsefit_fit *f)
{
    const lse_gmm *m = f->start.m;
    const size_t k = lse_gmm_k(m);
    const lse_cov_type cov = lse_gmm_cov_type(m);
    if (f->k_given && f->kmin != k)
        return lsefit_fail("--init %s: the model has n_components = %zu but "
                           "-k is %zu",
                           f->init, k, f->kmin);
    if (f->cov_given && (f->cov != cov || f->cov_model != lse_gmm_cov_model(m)))
        return lsefit_fail("--init %s: the model has covariance_type '%s' but "
                           "--covariance is '%s'",
                           f->init, lse_gmm_cov_name(cov),
                           lse_gmm_cov_name(f->cov));
    if (f->standardize && f->start.mean == NULL)
        return lsefit_fail("--init %s: the model was not fit with "
                           "--standardize, so it cannot restart a "
                           "standardized fit",
                           f->init);
    f->kmin = f->kmax = k;
    f->cov = cov;
    f->cov_model = lse_gmm_cov_model(m);
    return LSEFIT_OK;
}

/* At least one row per component. */
static int gmm_check(lsefit_fit *f)
{
    return lsefit_data_check_rows(
        &f->d, f->comm != NULL ? lsefit_mpi_total_rows(f->comm) : f->d.x->size1,
        f->kmax, "components");
}

static void gmm_prepare(lsefit_fit *f)
{
    gmm_own *g = f->own;
    LSEFIT_FIT_TO_OPTS(f, g->opts);
    g->opts.sample_weight = f->d.weight;
    g->opts.progress = progress_cb;
    g->opts.progress_user = &f->prog;
    lsefit_mpi_gmm_opts(f->comm, &g->opts);
}

static int gmm_create(lsefit_fit *f, size_t k, void **m)
{
    lse_gmm *g = NULL;
    if ((f->cov_model != LSE_COV_MODEL_NONE
             ? lse_gmm_new_model(k, f->d.d, f->cov_model, &g, NULL)
             : lse_gmm_new(k, f->d.d, f->cov, &g, NULL)) != LSE_OK)
        return lsefit_fail("out of memory");
    *m = g;
    return LSEFIT_OK;
}

static lse_status gmm_fit(lsefit_fit *f, void *m, lse_error *err)
{
    gmm_own *g = f->own;
    g->start.kmax = f->kmax;
    return lsefit_gmm_start_fit(&g->start, m, f->d.x, &g->opts, err);
}

/* --bootstrap B: standard errors into the model file ("bootstrap"). */
static int gmm_after_json(lsefit_fit *f, const void *m, lse_json *doc)
{
    const gmm_own *g = f->own;
    if (g->bootstrap == 0)
        return LSEFIT_OK;
    return lsefit_gmm_bootstrap(
        m, f->d.x->size1, g->bootstrap, g->opts.seed, &g->opts, doc,
        lsefit_quiet                                       ? NULL
        : (f->output != NULL && strcmp(f->output, "-") == 0) ? stderr
                                                           : stdout);
}

static int gmm_write_rows(lsefit_fit *f, const lsefit_model_file *back)
{
    const gmm_own *g = f->own;
    return predict_outputs(back->m, &f->d, g->opts.missing, g->labels,
                           g->proba);
}

static int gmm_summary(const lsefit_fit *f, FILE *out,
                       const lsefit_model_file *back,
                       const lsefit_fit_result *r)
{
    return print_summary(out, back, r, &f->d, f->data.path, f->tol);
}

static const char *const gmm_subcommands[] = {"predict", "score", "sample"};

static const lsefit_model gmm_model = {
    .name = "gmm",
    .data_word = "DATA.csv",
    .data_role = "the data",
    .k_noun = "components",
    .k_example = "1:8",
    .per_key = "loglik_per_sample",
    .subcommands = gmm_subcommands,
    .n_subcommands = 3,
    .inits = gmm_inits,
    .options = fit_options,
    .help = help_fit,
    LSEFIT_MODEL_STEPS(gmm),
    .check = gmm_check,
    .after_json = gmm_after_json,
    .cov_models = 1,
};


/* ------------------------------------------------------------------ */
/* lsefit gmm predict|score MODEL.json DATA.csv                        */

static const struct option query_options[] = {
    {"columns", required_argument, NULL, OPT_COLUMNS},
    {"ignore", required_argument, NULL, OPT_IGNORE},
    {"missing", required_argument, NULL, OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"proba", required_argument, NULL, OPT_PROBA},
    LSEFIT_DATA_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* --proba FILE: predict only. */
typedef struct query_own {
    int score;
    const char *proba;
} query_own;

static int query_option(void *user, int c, const char *arg,
                        lsefit_data_opts *dopt)
{
    query_own *q = user;
    (void)dopt;
    (void)c; /* OPT_PROBA, the only one of query_options */
    q->proba = arg;
    if (q->score)
        return lsefit_usage("gmm score", "unknown option '--proba'");
    return LSEFIT_OK;
}

static int query_main(int argc, char **argv, int score)
{
    const char *cmd = score ? "gmm score" : "gmm predict";
    lsefit_data_opts dopt = {0};
    const char *output = "-", *model_path = NULL;
    query_own own = {score, NULL};
    const lsefit_query q = {cmd, query_options, "DATA.csv", query_option,
                            &own};
    int help = 0;
    int rc =
        lsefit_query_parse(&q, argc, argv, &dopt, &model_path, &output, &help);
    if (help) {
        help_predict(stdout, score ? "score" : "predict");
        return LSEFIT_OK;
    }
    const char *proba = own.proba;
    if (rc != LSEFIT_OK)
        return rc;
    const lse_gmm_missing missing = dopt.missing == LSE_MISSING_KEEP
                                        ? LSE_GMM_MISSING_MARGINALIZE
                                        : LSE_GMM_MISSING_ERROR;
    {
        const lsefit_path in[] = {{model_path, "the model"},
                                  {dopt.path, "the data"}};
        const lsefit_path out[] = {{output, "-o"}, {proba, "--proba"}};
        rc = lsefit_plan(in, 2, out, 2);
        if (rc != LSEFIT_OK)
            return rc;
    }
    lsefit_model_file g;
    lsefit_data data = {0};
    gsl_vector *ll = NULL;
    lse_error err;
    rc = lsefit_model_data(&gmm_model, model_path, &dopt, &g, &data);
    if (rc == LSEFIT_OK && !score)
        rc = predict_outputs(g.m, &data, missing, output, proba);
    if (rc == LSEFIT_OK && score) {
        const size_t n = data.x->size1;
        ll = gsl_vector_alloc(n);
        if (ll == NULL)
            rc = lsefit_fail("out of memory");
        else if (lse_gmm_posterior(g.m, data.x, missing, NULL, ll, &err) !=
                 LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
    }
    if (rc == LSEFIT_OK && score) {
        double total = 0.0;
        for (size_t i = 0; i < ll->size; i++) {
            const double v = gsl_vector_get(ll, i) -
                             lsefit_row_log_jacobian(data.x, i, data.scale);
            gsl_vector_set(ll, i, v);
            total += v;
        }
        gsl_matrix_view col = gsl_matrix_view_vector(ll, ll->size, 1);
        rc = write_values(output, &data, &col.matrix, NULL, "loglik", NULL);
        if (rc == LSEFIT_OK)
            lsefit_note("%zu rows: total log-likelihood %.17g, per sample "
                        "%.17g",
                        ll->size, total, total / (double)ll->size);
    }
    gsl_vector_free(ll);
    lsefit_data_free(&data);
    lsefit_model_file_free(&gmm_model, &g);
    return rc;
}

/* ------------------------------------------------------------------ */
/* lsefit gmm sample MODEL.json -n N                                   */

static lse_status gmm_draw(const void *m, size_t n, unsigned long seed,
                           gsl_matrix *x, size_t *labels, lse_error *err)
{
    (void)n; /* the rows of x */
    return lse_gmm_sample(m, seed, x, labels, err);
}

static const lsefit_draw gmm_sample = {
    .cmd = "gmm sample",
    .count = 'n',
    .count_long = "samples",
    .count_what = "the number of samples",
    .labels_opt = "--labels",
    .labels_column = "component",
    .help = help_sample,
    .draw = gmm_draw,
};

int lsefit_gmm_main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "predict") == 0)
        return query_main(argc - 1, argv + 1, 0);
    if (argc >= 2 && strcmp(argv[1], "score") == 0)
        return query_main(argc - 1, argv + 1, 1);
    if (argc >= 2 && strcmp(argv[1], "sample") == 0)
        return lsefit_draw_main(&gmm_model, &gmm_sample, argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "plot") == 0) /* lsefit_plot.c */
        return lsefit_gmm_plot_main(argc - 1, argv + 1);
    if (lsefit_select_wanted(argc, argv))
        return lsefit_select_main(argc, argv);
    gmm_own own; /* lsefit gmm DATA.csv ...: a fit */
    memset(&own, 0, sizeof own);
    const int rc = lsefit_fit_main(&gmm_model, &own, argc, argv);
    lsefit_gmm_start_free(&own.start);
    return rc;
}
