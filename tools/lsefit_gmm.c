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

#include "lsefit.h"
#include "lsefit_gmmstart.h"
#include "lsefit_mpi.h"
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
        "full)\n"
        "Fitting:\n"
        "  --init METHOD           kmeans++ (also k-means++):\n"
        "                          k-means++ seeds and 10 Lloyd iterations;\n"
        "                          kmeans: k-means to convergence\n"
        "                          (scikit-learn's default); random;\n"
        "                          hcvvv: mclust's default, one start per K\n"
        "                          from its hcVVV tree of the data;\n"
        "                          emem (default): 20 short runs (or\n"
        "                          --n-init N) of 20 iterations, the best\n"
        "                          3 to convergence;\n"
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
        d.n_init, d.max_iter, d.tol, d.reg_covar, d.seed);
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

/* A model with its feature names and standardization. */
typedef struct gmm_file {
    lse_gmm *m;
    char **names;      /* (d) one malloc'ed block */
    gsl_vector *mean;  /* (d) or NULL */
    gsl_vector *scale; /* (d) or NULL */
} gmm_file;

static void gmm_file_free(gmm_file *f)
{
    lse_gmm_free(f->m);
    free(f->names);
    gsl_vector_free(f->mean);
    gsl_vector_free(f->scale);
    memset(f, 0, sizeof *f);
}

/* Build the model described by @p doc (read from @p path). */
static int gmm_from_json(const lse_json *doc, const char *path, gmm_file *f)
{
    memset(f, 0, sizeof *f);
    lse_error err;
    int rc = lsefit_json_check_model(doc, path, "gmm");
    if (rc == LSEFIT_OK &&
        lse_gmm_from_json(doc, path, &f->m, &f->names, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_get_standardize(doc, path, lse_gmm_dim(f->m),
                                         &f->mean, &f->scale);
    if (rc != LSEFIT_OK)
        gmm_file_free(f);
    return rc;
}

static int gmm_read(const char *path, gmm_file *f)
{
    lse_error err;
    lse_json *doc = NULL;
    memset(f, 0, sizeof *f);
    if (lse_json_load(path, &doc, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    const int rc = gmm_from_json(doc, path, f);
    lse_json_free(doc);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

typedef struct fit_args {
    lsefit_data_opts data;
    size_t kmin, kmax;
    int k_given;
    const char *select; /* "bic" or "aic" */
    lse_cov_type cov;
    int cov_given;
    const char *init; /* "kmeans++", "kmeans", "random" or a model file */
    int init_file;    /* init is a model file (--init-file, --init PATH) */
    lse_gmm_fit_opts opts;
    int reg_given;
    int standardize;
    const char *missing_name;
    const char *output, *labels, *proba, *log_json;
    int mpi;            /* --mpi */
    const char *shards; /* --shards PATTERN */
    size_t bootstrap;   /* --bootstrap B (0: none) */
} fit_args;

/* What one fit of K components gave, in data units. */
typedef struct fit_result {
    size_t k;
    size_t n_rows; /* rows of the whole data set */
    size_t n_params;
    double loglik, loglik_per_sample, bic, aic;
    size_t n_iter;
    int converged;
    size_t n_missing; /* NaN cells marginalized */
} fit_result;

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

static fit_result result_of(const lse_gmm *m, const lsefit_data *data)
{
    const lse_gmm_fit_info *info = lse_gmm_info(m);
    fit_result r;
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
        r.loglik_per_sample = info->loglik_per_sample;
        r.bic = info->bic;
        r.aic = info->aic;
    } else { /* the density of x = mean + scale z is p(z) / prod(scale) */
        const double p = (double)r.n_params;
        r.loglik = info->loglik - logj;
        r.loglik_per_sample = r.loglik / info->n_eff;
        r.bic = -2.0 * r.loglik + p * log(info->n_eff);
        r.aic = -2.0 * r.loglik + 2.0 * p;
    }
    return r;
}

static lse_status set_strings_opt(lse_json *o, const char *key,
                                  const char *list, lse_error *err)
{
    char **items = NULL;
    size_t n = 0;
    if (lsefit_split_list(list, &items, &n) != LSEFIT_OK)
        return lse_error_set(err, LSE_ENOMEM, "lsefit", "out of memory");
    const lse_status st =
        lse_json_set_strings(o, key, (const char *const *)items, n, err);
    free(items);
    return st;
}

/* The "options" object: everything needed to redo the fit. */
static lse_json *options_json(const fit_args *a, const lsefit_data *data,
                              size_t k, lse_error *err)
{
    lse_json *o = lse_json_new_object();
    if (o == NULL) {
        lse_error_set(err, LSE_ENOMEM, "lsefit", "out of memory");
        return NULL;
    }
    const lse_gmm_fit_opts *f = &a->opts;
    lse_status st = lse_json_set_string(o, "data", a->data.path, err);
    if (st == LSE_OK)
        st = lse_json_set_strings(o, "columns", data->names, data->d, err);
    if (st == LSE_OK && a->data.ignore != NULL)
        st = set_strings_opt(o, "ignore", a->data.ignore, err);
    if (st == LSE_OK && a->data.weights != NULL)
        st = lse_json_set_string(o, "weights", a->data.weights, err);
    if (st == LSE_OK)
        st = lse_json_set_string(o, "missing", a->missing_name, err);
    if (st == LSE_OK)
        st = lse_json_set_bool(o, "standardize", data->mean != NULL, err);
    if (st == LSE_OK)
        st =
            lse_json_set_string(o, "covariance", lse_gmm_cov_name(a->cov), err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "k", (long long)k, err);
    if (st == LSE_OK && a->kmin != a->kmax) {
        char range[64];
        snprintf(range, sizeof range, "%zu:%zu", a->kmin, a->kmax);
        st = lse_json_set_string(o, "k_range", range, err);
        if (st == LSE_OK)
            st = lse_json_set_string(o, "select", a->select, err);
    }
    if (st == LSE_OK)
        st = lse_json_set_string(o, "init", a->init, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "n_init", (long long)f->n_init, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "max_iter", (long long)f->max_iter, err);
    if (st == LSE_OK)
        st = lse_json_set_number(o, "tol", f->tol, err);
    if (st == LSE_OK)
        st = lse_json_set_number(o, "reg_covar", f->reg_covar, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "lloyd_iter", (long long)f->lloyd_iter,
                                  err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "seed", (long long)f->seed, err);
    if (st != LSE_OK) {
        lse_json_free(o);
        return NULL;
    }
    return o;
}

/* The model file: keys in a fixed order, then "standardize". */
static int gmm_to_json(const lse_gmm *m, const fit_result *r, const fit_args *a,
                       const lsefit_data *data, lse_json **out)
{
    lse_error err;
    *out = NULL;
    lse_json *doc = lse_json_new_object();
    if (doc == NULL)
        return lsefit_fail("out of memory");
    lse_json *opt = NULL;
    lse_status st = lse_gmm_to_json(m, data->names, doc, &err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "loglik", r->loglik, &err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "loglik_per_sample", r->loglik_per_sample,
                                 &err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_iter", (long long)r->n_iter, &err);
    if (st == LSE_OK)
        st = lse_json_set_bool(doc, "converged", r->converged, &err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "bic", r->bic, &err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "aic", r->aic, &err);
    if (st == LSE_OK) {
        opt = options_json(a, data, r->k, &err);
        st = opt == NULL ? err.status : LSE_OK;
    }
    if (st == LSE_OK)
        st = lse_json_set_object(doc, "options", opt, &err);
    lse_json_free(opt);
    int rc = st == LSE_OK ? LSEFIT_OK : lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_set_standardize(doc, data->mean, data->scale);
    if (rc != LSEFIT_OK) {
        lse_json_free(doc);
        return rc;
    }
    *out = doc;
    return LSEFIT_OK;
}

/* ------------------------------------------------------------------ */
/* Printing                                                            */

static void print_row(FILE *f, const char *label, const double *x, size_t n,
                      size_t stride)
{
    fprintf(f, "  %-11s", label);
    for (size_t j = 0; j < n; j++)
        fprintf(f, " %12.6g", x[j * stride]);
    fputc('\n', f);
}

/* Sigma in data units: S Sigma_z S with S = diag(scale). */
static void to_data_units(gsl_matrix *s, const gsl_vector *scale)
{
    for (size_t i = 0; scale != NULL && i < s->size1; i++)
        for (size_t j = 0; j < s->size2; j++)
            gsl_matrix_set(s, i, j,
                           gsl_matrix_get(s, i, j) * gsl_vector_get(scale, i) *
                               gsl_vector_get(scale, j));
}

static int print_summary(FILE *f, const gmm_file *g, const fit_result *r,
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
            r->loglik_per_sample);
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
        print_row(f, "mean", mu->data, d, 1);
        if (cov == LSE_COV_TIED && c > 0)
            continue;
        lse_gmm_get_covariance(m, c, s);
        to_data_units(s, g->scale);
        if (cov == LSE_COV_DIAG || cov == LSE_COV_SPHERICAL) {
            print_row(f, "variances", s->data, d, s->tda + 1);
        } else {
            for (size_t i = 0; i < d; i++)
                print_row(f,
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

enum {
    OPT_COV = 256,
    OPT_INIT,
    OPT_NINIT,
    OPT_MAXITER,
    OPT_TOL,
    OPT_REG,
    OPT_SEED,
    OPT_COLUMNS,
    OPT_IGNORE,
    OPT_STANDARDIZE,
    OPT_WEIGHTS,
    OPT_MISSING,
    OPT_LABELS,
    OPT_PROBA,
    OPT_SELECT,
    OPT_LOGJSON,
    OPT_MPI,
    OPT_SHARDS,
    OPT_INIT_FILE,
    OPT_BOOTSTRAP
};

static const struct option fit_options[] = {
    {"components", required_argument, NULL, 'k'},
    {"covariance", required_argument, NULL, OPT_COV},
    {"init", required_argument, NULL, OPT_INIT},
    {"init-file", required_argument, NULL, OPT_INIT_FILE},
    {"bootstrap", required_argument, NULL, OPT_BOOTSTRAP},
    {"n-init", required_argument, NULL, OPT_NINIT},
    {"max-iter", required_argument, NULL, OPT_MAXITER},
    {"tol", required_argument, NULL, OPT_TOL},
    {"reg-covar", required_argument, NULL, OPT_REG},
    {"seed", required_argument, NULL, OPT_SEED},
    {"columns", required_argument, NULL, OPT_COLUMNS},
    {"ignore", required_argument, NULL, OPT_IGNORE},
    {"standardize", no_argument, NULL, OPT_STANDARDIZE},
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"missing", required_argument, NULL, OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"proba", required_argument, NULL, OPT_PROBA},
    {"select", required_argument, NULL, OPT_SELECT},
    {"log-json", required_argument, NULL, OPT_LOGJSON},
    {"mpi", no_argument, NULL, OPT_MPI},
    {"shards", required_argument, NULL, OPT_SHARDS},
    LSEFIT_DATA_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

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

static int parse_fit(int argc, char **argv, fit_args *a, int *help)
{
    static const char *cmd = "gmm";
    memset(a, 0, sizeof *a);
    a->opts = lse_gmm_fit_opts_default();
    a->init = "emem"; /* docs/lsefit.md, "Starts" */
    a->select = "bic";
    a->missing_name = "error";
    a->data.missing = LSE_MISSING_ERROR;
    *help = 0;
    int select_given = 0, init_given = 0;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":k:o:qvh", fit_options, NULL)) != -1) {
        if (lsefit_data_option(cmd, c, optarg, &a->data, &rc))
            continue;
        switch (c) {
        case 'k':
            rc = lsefit_opt_krange(cmd, optarg, &a->kmin, &a->kmax);
            a->k_given = 1;
            break;
        case OPT_COV:
            if (lse_gmm_cov_parse(optarg, &a->cov) != LSE_OK)
                rc = lsefit_usage(cmd,
                                  "--covariance '%s': expected full, diag, "
                                  "spherical or tied",
                                  optarg);
            a->cov_given = 1;
            break;
        case OPT_INIT:
        case OPT_INIT_FILE:
            if (init_given)
                rc = lsefit_usage(cmd, "give one --init or --init-file");
            init_given = 1;
            a->init = optarg;
            a->init_file = c == OPT_INIT_FILE;
            if (rc == LSEFIT_OK && c == OPT_INIT) {
                const char *method = NULL;
                rc = lsefit_opt_init(cmd, optarg, gmm_inits, &method);
                a->init = method != NULL ? method : optarg;
                a->init_file = method == NULL;
            }
            break;
        case OPT_NINIT:
            rc = lsefit_opt_size(cmd, "--n-init", optarg, 1, &a->opts.n_init);
            break;
        case OPT_MAXITER:
            rc = lsefit_opt_size(cmd, "--max-iter", optarg, 0,
                                 &a->opts.max_iter);
            break;
        case OPT_TOL:
            rc = lsefit_opt_double(cmd, "--tol", optarg, 0.0, 1, &a->opts.tol);
            break;
        case OPT_REG:
            rc = lsefit_opt_double(cmd, "--reg-covar", optarg, 0.0, 1,
                                   &a->opts.reg_covar);
            a->reg_given = 1;
            break;
        case OPT_SEED:
            rc = lsefit_opt_seed(cmd, optarg, &a->opts.seed);
            break;
        case OPT_COLUMNS:
            a->data.columns = optarg;
            break;
        case OPT_IGNORE:
            a->data.ignore = optarg;
            break;
        case OPT_STANDARDIZE:
            a->standardize = 1;
            break;
        case OPT_WEIGHTS:
            a->data.weights = optarg;
            break;
        case OPT_MISSING:
            rc = lsefit_opt_missing(cmd, optarg, &a->data.missing);
            a->missing_name = a->data.missing == LSE_MISSING_DROP ? "drop"
                              : a->data.missing == LSE_MISSING_KEEP
                                  ? "marginalize"
                                  : "error";
            break;
        case 'o':
            a->output = optarg;
            break;
        case OPT_LABELS:
            a->labels = optarg;
            break;
        case OPT_PROBA:
            a->proba = optarg;
            break;
        case OPT_SELECT:
            if (strcmp(optarg, "bic") != 0 && strcmp(optarg, "aic") != 0)
                rc = lsefit_usage(cmd, "--select '%s': expected bic or aic",
                                  optarg);
            a->select = optarg;
            select_given = 1;
            break;
        case OPT_LOGJSON:
            a->log_json = optarg;
            break;
        case OPT_MPI:
            a->mpi = 1;
            break;
        case OPT_SHARDS:
            a->shards = optarg;
            break;
        case OPT_BOOTSTRAP:
            rc = lsefit_opt_size(cmd, "--bootstrap", optarg, 2,
                                 &a->bootstrap);
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'v':
            lsefit_verbose = 1;
            break;
        case 'h':
            *help = 1;
            return LSEFIT_OK;
        default:
            rc = lsefit_opt_bad(cmd, c, argv, fit_options);
            break;
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (a->shards != NULL && !a->mpi)
        return lsefit_usage(cmd, "--shards needs --mpi");
    if (a->shards != NULL && optind < argc)
        return lsefit_usage(cmd, "give DATA.csv or --shards, not both");
    if (a->mpi && (a->labels != NULL || a->proba != NULL))
        return lsefit_usage(cmd, "--labels and --proba are not written with "
                                 "--mpi (each process holds only its rows); "
                                 "run 'lsefit gmm predict' on the model");
    if (a->mpi && a->data.missing == LSE_MISSING_KEEP)
        return lsefit_usage(cmd, "--missing marginalize is not supported with "
                                 "--mpi; use --missing drop");
    if (a->shards == NULL && optind >= argc)
        return lsefit_usage(cmd, "missing the data file DATA.csv");
    if (optind + 1 < argc) {
        static const char *const subs[] = {"predict", "score", "sample"};
        return lsefit_bad_operand(cmd, argv[optind], argv[optind + 1], subs,
                                  3);
    }
    if (a->shards == NULL) {
        const int rc_op = lsefit_bad_operand(cmd, argv[optind], NULL, NULL, 0);
        if (rc_op != LSEFIT_OK)
            return rc_op;
    }
    a->data.path = a->shards != NULL ? a->shards : argv[optind];
    const int from_file = a->init_file;
    if (!a->k_given && !from_file)
        return lsefit_usage(cmd, "missing -k K (the number of components)");
    if (select_given && a->kmin == a->kmax && a->k_given)
        return lsefit_usage(cmd, "--select needs a range of K such as -k 1:8");
    if (from_file && a->kmin != a->kmax)
        return lsefit_usage(cmd, "--init-file FILE fixes K: a range of K "
                                 "cannot be used with it");
    if (a->labels != NULL && a->proba != NULL &&
        strcmp(a->labels, a->proba) == 0)
        return lsefit_usage(cmd, "--labels and --proba name the same file");
    if (a->data.missing == LSE_MISSING_KEEP)
        a->opts.missing = LSE_GMM_MISSING_MARGINALIZE;
    a->opts.init = from_file                      ? LSE_GMM_INIT_GIVEN
                   : strcmp(a->init, "random") == 0 ? LSE_GMM_INIT_RANDOM
                                                    : LSE_GMM_INIT_KMEANSPP;
    if (!from_file && strcmp(a->init, "kmeans") == 0)
        a->opts.lloyd_iter = KMEANS_LLOYD_ITER;
    if (a->mpi && a->bootstrap > 0)
        return lsefit_usage(cmd, "--bootstrap refits on one process: not "
                                 "with --mpi");
    return lsefit_gmm_start_check(from_file ? NULL : a->init, a->mpi,
                                  a->data.weights != NULL,
                                  a->data.missing == LSE_MISSING_KEEP);
}

/* --init FILE: take K, covariance type and standardization from it. */
static int setup_init_file(fit_args *a, gmm_file *init)
{
    int rc = gmm_read(a->init, init);
    if (rc != LSEFIT_OK)
        return rc;
    const size_t k = lse_gmm_k(init->m);
    const lse_cov_type cov = lse_gmm_cov_type(init->m);
    if (a->k_given && a->kmin != k)
        return lsefit_fail("--init %s: the model has n_components = %zu but "
                           "-k is %zu",
                           a->init, k, a->kmin);
    if (a->cov_given && a->cov != cov)
        return lsefit_fail("--init %s: the model has covariance_type '%s' but "
                           "--covariance is '%s'",
                           a->init, lse_gmm_cov_name(cov),
                           lse_gmm_cov_name(a->cov));
    if (a->standardize && init->mean == NULL)
        return lsefit_fail("--init %s: the model was not fit with "
                           "--standardize, so it cannot restart a "
                           "standardized fit",
                           a->init);
    a->kmin = a->kmax = k;
    a->cov = cov;
    a->data.model_names = (const char *const *)init->names;
    a->data.n_model_names = lse_gmm_dim(init->m);
    a->data.model_path = a->init;
    return LSEFIT_OK;
}

static void print_table(FILE *f, const fit_result *res, size_t n, size_t best,
                        const char *select)
{
    fprintf(f, "%4s %7s %16s %16s %16s %6s %9s\n", "K", "params", "loglik",
            "BIC", "AIC", "iter", "converged");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%4zu %7zu %16.8g %16.8g %16.8g %6zu %9s%s\n", res[i].k,
                res[i].n_params, res[i].loglik, res[i].bic, res[i].aic,
                res[i].n_iter, res[i].converged ? "yes" : "no",
                i == best ? "  <- best" : "");
    fprintf(f, "best K = %zu by %s (lower is better)\n", res[best].k,
            strcmp(select, "aic") == 0 ? "AIC" : "BIC");
}

/* The files of a fit, declared before any work (lsefit_plan). */
static int fit_plan(const fit_args *a)
{
    const lsefit_path in[] = {
        {a->shards != NULL ? NULL : a->data.path, "the data"},
        {a->init_file ? a->init : NULL, "--init"}};
    const lsefit_path out[] = {{a->output, "-o"},
                               {a->labels, "--labels"},
                               {a->proba, "--proba"},
                               {a->log_json, "--log-json"}};
    int rc =
        a->shards != NULL ? lsefit_plan_glob(a->shards, "--shards") : LSEFIT_OK;
    if (rc == LSEFIT_OK)
        rc = lsefit_plan(in, 2, out, 4);
    return rc;
}

static int fit_main(int argc, char **argv)
{
    fit_args a;
    int help = 0;
    int rc = parse_fit(argc, argv, &a, &help);
    if (help) {
        help_fit(stdout);
        return LSEFIT_OK;
    }
    if (rc == LSEFIT_OK)
        rc = fit_plan(&a);
    if (rc != LSEFIT_OK)
        return rc;
    const int from_file = a.opts.init == LSE_GMM_INIT_GIVEN;
    gmm_file init = {0};
    lsefit_data data = {0};
    lsefit_progress prog = {0};
    fit_result *res = NULL;
    lse_gmm **models = NULL;
    lse_json *doc = NULL, *back_doc = NULL;
    char *text = NULL;
    gmm_file back = {0};
    size_t n_k = 0, best = 0;
    lse_error err;
    lsefit_mpi *mpi = NULL;
    lsefit_gmm_start start = {.method = from_file ? NULL : a.init};

    if (a.mpi && lsefit_mpi_begin(&mpi) != LSEFIT_OK)
        return LSEFIT_FAIL;
    if (from_file)
        rc = setup_init_file(&a, &init);
    if (rc == LSEFIT_OK)
        rc = mpi != NULL
                 ? lsefit_mpi_data_load(mpi, &a.data, a.shards, 0, &data)
                 : lsefit_data_load(&a.data, &data);
    if (rc == LSEFIT_OK && from_file && data.d != lse_gmm_dim(init.m))
        rc = lsefit_fail("%s: %zu data column%s but the model %s has "
                         "n_features = %zu",
                         a.data.path, data.d, data.d == 1 ? "" : "s", a.init,
                         lse_gmm_dim(init.m));
    if (rc == LSEFIT_OK)
        rc = mpi != NULL ? lsefit_mpi_check_constant(mpi, &data, a.reg_given)
                         : lsefit_data_check_constant(&data, a.reg_given);
    if (rc == LSEFIT_OK)
        rc = lsefit_data_check_rows(
            &data, mpi != NULL ? lsefit_mpi_total_rows(mpi) : data.x->size1,
            a.kmax, "components");
    if (rc == LSEFIT_OK && init.mean != NULL)
        rc = lsefit_data_apply_standardize(&data, init.mean, init.scale);
    else if (rc == LSEFIT_OK && a.standardize)
        rc = mpi != NULL ? lsefit_mpi_standardize(mpi, &data)
                         : lsefit_data_standardize(&data);
    else if (rc == LSEFIT_OK) /* every process checks its rows */
        rc = lsefit_data_check_scale(
            &data, mpi != NULL ? lsefit_mpi_total_rows(mpi) : data.x->size1);
    if (rc == LSEFIT_OK)
        rc = lsefit_progress_open(&prog, "gmm", a.log_json);
    if (rc == LSEFIT_OK) {
        n_k = a.kmax - a.kmin + 1;
        res = calloc(n_k, sizeof *res);
        models = calloc(n_k, sizeof *models);
        if (res == NULL || models == NULL)
            rc = lsefit_fail("out of memory");
    }
    a.opts.sample_weight = data.weight;
    a.opts.progress = progress_cb;
    a.opts.progress_user = &prog;
    lsefit_mpi_gmm_opts(mpi, &a.opts);
    for (size_t i = 0; rc == LSEFIT_OK && i < n_k; i++) {
        const size_t k = a.kmin + i;
        if (from_file) {
            models[i] = init.m;
            init.m = NULL;
        } else if (lse_gmm_new(k, data.d, a.cov, &models[i]) != LSE_OK) {
            rc = lsefit_fail("out of memory");
            break;
        }
        lsefit_progress_start(&prog, k, from_file ? 1 : a.opts.n_init);
        if (lsefit_gmm_start_fit(&start, models[i], data.x, &a.opts, &err) !=
            LSE_OK) {
            const char *hint = NULL;
            if (err.status == LSE_ENUMERIC)
                hint = " (try a larger --reg-covar)";
            rc = lsefit_fail("%s: K = %zu: %s%s", a.data.path, k,
                             lsefit_strip(&err), hint ? hint : "");
            break;
        }
        res[i] = result_of(models[i], &data);
        const double crit_i =
            strcmp(a.select, "aic") == 0 ? res[i].aic : res[i].bic;
        const double crit_b =
            strcmp(a.select, "aic") == 0 ? res[best].aic : res[best].bic;
        if (i > 0 && crit_i < crit_b)
            best = i;
    }
    {
        const int rc_log = lsefit_progress_close(
            &prog, lsefit_mpi_is_root(mpi) ? a.log_json : NULL);
        if (rc == LSEFIT_OK)
            rc = rc_log;
    }
    if (!lsefit_mpi_is_root(mpi)) /* process 0 writes every output */
        goto done;
    if (rc == LSEFIT_OK && n_k > 1) {
        FILE *tf =
            (a.output != NULL && strcmp(a.output, "-") == 0) ? stderr : stdout;
        print_table(tf, res, n_k, best, a.select);
        if (a.output == NULL)
            fputc('\n', tf);
    }
    /* write the model, read it back, and compute every output from it */
    if (rc == LSEFIT_OK)
        rc = gmm_to_json(models[best], &res[best], &a, &data, &doc);
    if (rc == LSEFIT_OK && a.bootstrap > 0)
        rc = lsefit_gmm_bootstrap(
            models[best], data.x->size1, a.bootstrap, a.opts.seed, &a.opts,
            doc,
            lsefit_quiet ? NULL
            : (a.output != NULL && strcmp(a.output, "-") == 0) ? stderr
                                                               : stdout);
    if (rc == LSEFIT_OK && lse_json_to_string(doc, &text, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK &&
        lse_json_parse(text, strlen(text), a.output ? a.output : "<model>",
                       &back_doc, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = gmm_from_json(back_doc, a.output ? a.output : "<model>", &back);
    if (rc == LSEFIT_OK)
        rc = predict_outputs(back.m, &data, a.opts.missing, a.labels, a.proba);
    if (rc == LSEFIT_OK && a.output != NULL) {
        rc = lsefit_write(a.output, text, strlen(text));
        if (rc == LSEFIT_OK && strcmp(a.output, "-") != 0)
            lsefit_note("wrote %s: K = %zu, loglik %.10g, BIC %.10g, %s "
                        "after %zu iterations",
                        a.output, res[best].k, res[best].loglik, res[best].bic,
                        res[best].converged ? "converged" : "NOT converged",
                        res[best].n_iter);
    } else if (rc == LSEFIT_OK) {
        rc = print_summary(stdout, &back, &res[best], &data, a.data.path,
                           a.opts.tol);
    }
    if (rc == LSEFIT_OK && !res[best].converged)
        lsefit_note("warning: EM did not converge in %zu iterations (raise "
                    "--max-iter or --tol)",
                    a.opts.max_iter);
done:
    for (size_t i = 0; models != NULL && i < n_k; i++)
        lse_gmm_free(models[i]);
    free(models);
    free(res);
    free(text);
    lse_json_free(doc);
    lse_json_free(back_doc);
    gmm_file_free(&back);
    gmm_file_free(&init);
    lsefit_gmm_start_free(&start);
    lsefit_data_free(&data);
    if (mpi != NULL) /* commit on process 0 before the outcome is agreed */
        rc = lsefit_outputs_finish(rc);
    return lsefit_mpi_end(mpi, rc);
}

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

static int query_main(int argc, char **argv, int score)
{
    const char *cmd = score ? "gmm score" : "gmm predict";
    lsefit_data_opts dopt = {0};
    const char *output = "-", *proba = NULL;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":o:qh", query_options, NULL)) != -1) {
        if (lsefit_data_option(cmd, c, optarg, &dopt, &rc))
            continue;
        switch (c) {
        case OPT_COLUMNS:
            dopt.columns = optarg;
            break;
        case OPT_IGNORE:
            dopt.ignore = optarg;
            break;
        case OPT_MISSING:
            rc = lsefit_opt_missing(cmd, optarg, &dopt.missing);
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_PROBA:
            if (score)
                rc = lsefit_usage(cmd, "unknown option '--proba'");
            proba = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'h':
            help_predict(stdout, score ? "score" : "predict");
            return LSEFIT_OK;
        default:
            rc = lsefit_opt_bad(cmd, c, argv, query_options);
            break;
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 2)
        return lsefit_usage(cmd, "expected MODEL.json and DATA.csv");
    const lse_gmm_missing missing = dopt.missing == LSE_MISSING_KEEP
                                        ? LSE_GMM_MISSING_MARGINALIZE
                                        : LSE_GMM_MISSING_ERROR;
    const char *model_path = argv[optind];
    dopt.path = argv[optind + 1];
    {
        const lsefit_path in[] = {{model_path, "the model"},
                                  {dopt.path, "the data"}};
        const lsefit_path out[] = {{output, "-o"}, {proba, "--proba"}};
        rc = lsefit_plan(in, 2, out, 2);
        if (rc != LSEFIT_OK)
            return rc;
    }
    gmm_file g;
    lsefit_data data = {0};
    gsl_vector *ll = NULL;
    lse_error err;
    rc = gmm_read(model_path, &g);
    if (rc != LSEFIT_OK)
        return rc;
    const size_t d = lse_gmm_dim(g.m);
    dopt.model_names = (const char *const *)g.names;
    dopt.n_model_names = d;
    dopt.model_path = model_path;
    rc = lsefit_data_load(&dopt, &data);
    if (rc == LSEFIT_OK && data.d != d)
        rc = lsefit_fail("%s: %zu data column%s but the model %s has "
                         "n_features = %zu",
                         dopt.path, data.d, data.d == 1 ? "" : "s", model_path,
                         d);
    if (rc == LSEFIT_OK && g.mean != NULL)
        rc = lsefit_data_apply_standardize(&data, g.mean, g.scale);
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
    gmm_file_free(&g);
    return rc;
}

/* ------------------------------------------------------------------ */
/* lsefit gmm sample MODEL.json -n N                                   */

static const struct option sample_options[] = {
    {"samples", required_argument, NULL, 'n'},
    {"seed", required_argument, NULL, OPT_SEED},
    {"output", required_argument, NULL, 'o'},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static int sample_main(int argc, char **argv)
{
    const char *cmd = "gmm sample";
    const char *output = "-", *labels_path = NULL;
    size_t n = 0;
    unsigned long seed = 0;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK && (c = getopt_long(argc, argv, ":n:o:qh",
                                               sample_options, NULL)) != -1) {
        switch (c) {
        case 'n':
            rc = lsefit_opt_size(cmd, "-n", optarg, 1, &n);
            break;
        case OPT_SEED:
            rc = lsefit_opt_seed(cmd, optarg, &seed);
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_LABELS:
            labels_path = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'h':
            help_sample(stdout);
            return LSEFIT_OK;
        default:
            rc = lsefit_opt_bad(cmd, c, argv, sample_options);
            break;
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 1)
        return lsefit_usage(cmd, "expected one MODEL.json");
    if (n == 0)
        return lsefit_usage(cmd, "missing -n N (the number of samples)");
    {
        const lsefit_path in[] = {{argv[optind], "the model"}};
        const lsefit_path out[] = {{output, "-o"}, {labels_path, "--labels"}};
        rc = lsefit_plan(in, 1, out, 2);
        if (rc != LSEFIT_OK)
            return rc;
    }
    gmm_file g;
    rc = gmm_read(argv[optind], &g);
    if (rc != LSEFIT_OK)
        return rc;
    lse_error err;
    const size_t d = lse_gmm_dim(g.m);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    size_t *labels = malloc(n * sizeof *labels);
    if (x == NULL || labels == NULL)
        rc = lsefit_fail("out of memory");
    else if (lse_gmm_sample(g.m, seed, x, labels, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK) {
        lsefit_unstandardize(x, g.mean, g.scale);
        char *text = NULL;
        size_t len = 0;
        if (lse_matrix_format_csv(x, (const char *const *)g.names, 17, &text,
                                  &len, &err) != LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
        if (rc == LSEFIT_OK)
            rc = lsefit_write(output, text, len);
        free(text);
    }
    if (rc == LSEFIT_OK && labels_path != NULL) {
        lsefit_buf b;
        rc = lsefit_buf_open(&b);
        if (rc == LSEFIT_OK) {
            fputs("component\n", b.f);
            for (size_t i = 0; i < n; i++)
                fprintf(b.f, "%zu\n", labels[i]);
            rc = lsefit_buf_write(&b, labels_path);
        }
        lsefit_buf_free(&b);
    }
    gsl_matrix_free(x);
    free(labels);
    gmm_file_free(&g);
    return rc;
}

int lsefit_gmm_main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "predict") == 0)
        return query_main(argc - 1, argv + 1, 0);
    if (argc >= 2 && strcmp(argv[1], "score") == 0)
        return query_main(argc - 1, argv + 1, 1);
    if (argc >= 2 && strcmp(argv[1], "sample") == 0)
        return sample_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "plot") == 0) /* lsefit_plot.c */
        return lsefit_gmm_plot_main(argc - 1, argv + 1);
    if (lsefit_select_wanted(argc, argv))
        return lsefit_select_main(argc, argv);
    return fit_main(argc, argv);
}
