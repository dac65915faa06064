/* lsefit slds: fit switching linear dynamics (lse_slds, models/slds.h) to
 * a CSV series, segment a series with a model file, simulate from one.
 *
 * As for the GMM, every output of a fit is computed from the model read
 * back from the very text written to -o, so "lsefit slds segment" on the
 * file reproduces the --modes table bit for bit. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>

#include "lsefit.h"
#include "lsefit_mpi.h"
#include "lsefit_plot.h"

/* ------------------------------------------------------------------ */
/* Help                                                                */

static void help_fit(FILE *f)
{
    const lse_slds_opts d = lse_slds_opts_default();
    fputs("Usage: lsefit slds SERIES.csv -k K [options]\n"
          "       lsefit slds segment MODEL.json SERIES.csv [options]\n"
          "       lsefit slds simulate MODEL.json -T N [--seed S] [options]\n"
          "       lsefit slds summary MODEL.json SERIES.csv [options]\n"
          "         (parameters with standard errors, d = 1)\n"
          "       lsefit slds plot MODEL.json SERIES.csv -o FIG.svg|png|pdf\n"
          "         (segmentation and mode probabilities: 'lsefit slds plot "
          "--help')\n",
          f);
    fprintf(
        f,
        "\n"
        "Fit switching linear dynamics to the rows of SERIES.csv (in time\n"
        "order; \"-\" reads standard input): K linear-Gaussian modes\n"
        "  x_t = A_k [x_(t-1); ...; x_(t-L)] + b_k + e_t,  e_t ~ N(0, "
        "Sigma_k)\n"
        "chosen independently at each step (mixture, weights pi_k) or by a\n"
        "hidden Markov chain (--markov: initial p0, transition matrix P), by\n"
        "EM. The first L rows of every sequence are conditioned on. Without\n"
        "-o the fitted model is printed.\n"
        "\n"
        "Model:\n"
        "  -k, --n-modes K|A:B     number of modes (>= 1); a range A:B fits\n"
        "                          each K and keeps the best (--select)\n"
        "  --select bic|aic        criterion for a range of K (default bic)\n"
        "  --markov                Markov switching (default: mixture)\n"
        "  --lags L                autoregressive order (default 1)\n"
        "  --covariance TYPE       noise covariance: full, diag, spherical or\n"
        "                          tied (default full)\n"
        "Fitting:\n"
        "  --init METHOD           kmeans++ (default; k-means++, kmeans:\n"
        "                          k-means on pooled-fit residuals), random\n"
        "  --init-file FILE        restart from a model (or --init PATH)\n"
        "  --n-init N              initializations, best kept (default %zu)\n"
        "  --max-iter N            EM iterations per run (default %zu)\n"
        "  --tol X                 stop when the log-likelihood per step\n"
        "                          changes by <= X (default %g)\n"
        "  --reg-covar X           added to covariance diagonals (default "
        "%g)\n"
        "  --seed S                random seed (default %lu)\n"
        "  --exact-sums            exact M-step sums: the same bits for any\n"
        "                          --threads and mpirun -n (slower EM)\n"
        "Data:\n"
        "  --columns LIST          columns to use, by name or 1-based index\n"
        "                          (default: all but --ignore and --sequence)\n"
        "  --ignore LIST           columns to leave out\n"
        "  --sequence COLUMN       ids splitting the file into independent\n"
        "                          sequences (a new one wherever the id\n"
        "                          changes); no transition crosses them\n"
        "  --missing POLICY        error (default) or drop; a dropped row\n"
        "                          also ends its sequence (marginalize is not\n"
        "                          supported)\n"
        "%s"
        "  --standardize           fit on (x - mean) / sd (stored in the\n"
        "                          model, applied by segment and simulate)\n"
        "Output:\n"
        "  -o, --output FILE       write the model JSON (\"-\": stdout)\n"
        "  --modes FILE            per data row: mode posteriors p0..p(K-1)\n"
        "                          (Markov: smoothed), the most likely mode,\n"
        "                          and with --markov the Viterbi path; empty\n"
        "                          cells for rows that are not steps\n"
        "  --log-json FILE         one JSON object per EM iteration\n"
        "  -q, --quiet             no progress lines or warnings\n"
        "  -v, --verbose           a progress line every iteration\n"
        "  --threads N             threads (default: LSE_NUM_THREADS or all\n"
        "                          processors); results do not depend on N\n"
        "  -h, --help              this help\n"
        "Several processes (docs/mpi.md):\n"
        "  --mpi                   under mpirun -n P: each process reads a\n"
        "                          contiguous block of rows (a byte range of\n"
        "                          SERIES.csv) plus the L rows before it; EM\n"
        "                          statistics are summed with MPI_Allreduce,\n"
        "                          and with --markov the forward-backward\n"
        "                          pass runs on the gathered emission\n"
        "                          log-likelihoods (exact); same model as one\n"
        "                          process; process 0 writes the outputs\n"
        "  --shards PATTERN        with --mpi, instead of SERIES.csv: one file\n"
        "                          per process, in the sorted order of the\n"
        "                          glob PATTERN's matches\n"
        "\n"
        "BIC = -2 loglik + p log(steps) and AIC = -2 loglik + 2 p follow\n"
        "scikit-learn's conventions: lower is better. Exit status: 0 ok,\n"
        "1 bad input or failed fit, 2 usage error.\n",
        d.n_init, d.max_iter, d.tol, d.reg_covar, d.seed, LSEFIT_DATA_HELP);
    fputs("\n"
          "Latent states (--latent-dim D; lsefit slds --latent-dim D --help):\n"
          "  lsefit slds SERIES.csv -k K --latent-dim D -o MODEL.json fits\n"
          "  y_t = C x_t + d + v_t with x_t switching linear dynamics, by\n"
          "  structured variational EM (docs/models/slds.md). It accepts -k,\n"
          "  --latent-dim, --markov, --n-init, --max-iter, --seed, --columns,\n"
          "  --sequence, --missing error|drop|marginalize, -o, -q; segment\n"
          "  (p0.., mode, viterbi, x0.., --variances), score (ELBO and\n"
          "  importance-sampled log p(y), --samples N) and simulate (-n T)\n"
          "  take a latent model file. The other options above do not apply.\n",
          f);
}

static void help_segment(FILE *f)
{
    fputs(
        "Usage: lsefit slds segment MODEL.json SERIES.csv [options]\n"
        "\n"
        "Print, per data row of SERIES.csv, the posterior of each mode\n"
        "(p0..p(K-1); Markov: smoothed over the whole sequence), the most\n"
        "likely mode ('mode') and, for a Markov model, the Viterbi path\n"
        "('viterbi'). Rows that are not steps (the first L of every\n"
        "sequence, dropped rows) get empty cells. The log-likelihood goes to\n"
        "stderr.\n"
        "\n"
        "Options:\n"
        "  --columns LIST      columns to use (default: the model's\n"
        "                      feature_names when the file has a header)\n"
        "  --ignore LIST       columns to leave out\n"
        "  --sequence COLUMN   sequence ids, as for fitting\n"
        "  --missing POLICY    error (default) or drop\n"
        "  --delimiter C, --header, --no-header, --max-input-size SIZE\n"
        "                      how SERIES.csv is read, as for the fit\n"
        "  --filtered          also the filtered probabilities f0..f(K-1):\n"
        "                      Markov, p(mode | rows up to this step), as\n"
        "                      statsmodels' filtered_marginal_probabilities\n"
        "  -o, --output FILE   write here instead of stdout\n"
        "  -q, --quiet         no summary on stderr, no warnings\n"
        "  -h, --help          this help\n",
        f);
}

static void help_summary(FILE *f)
{
    fputs(
        "Usage: lsefit slds summary MODEL.json SERIES.csv [options]\n"
        "\n"
        "Print the parameters of a univariate model (n_features = 1) with\n"
        "standard errors from the numerical Hessian of the exact\n"
        "log-likelihood of SERIES.csv (central differences):\n"
        "std_err = sqrt(diag((-H)^-1)), as statsmodels' MarkovRegression\n"
        "reports by default. CSV columns parameter, estimate, std_err, z;\n"
        "parameters in statsmodels' order and names: p[i->j] = P(j | i)\n"
        "for j < K-1 (Markov; p0 held fixed) or pi[k] for k < K-1\n"
        "(mixture), const[k] (b), ar.Ll[k] (A's lag-l coefficient),\n"
        "sigma2[k] (one sigma2 when tied). Fit to convergence first (the\n"
        "Hessian must be negative definite).\n"
        "\n"
        "Options: --columns, --ignore, --sequence, --missing, --delimiter,\n"
        "  --header, --no-header, --max-input-size, -o, -q, -h as for\n"
        "  'lsefit slds segment'.\n",
        f);
}

static void help_simulate(FILE *f)
{
    fputs("Usage: lsefit slds simulate MODEL.json -T N [--seed S] [options]\n"
          "\n"
          "Simulate N rows from the model (the L values before the first row\n"
          "are 0 in the model's units, i.e. the mean for a standardized\n"
          "model). CSV with the model's feature_names as header, 17\n"
          "significant digits.\n"
          "\n"
          "Options:\n"
          "  -T, --length N      rows to simulate (>= 1, required)\n"
          "  --seed S            random seed (default 0)\n"
          "  -o, --output FILE   write here instead of stdout\n"
          "  --modes FILE        the mode (0-based) of each row\n"
          "  -q, --quiet         no warnings\n"
          "  -h, --help          this help\n",
          f);
}

/* ------------------------------------------------------------------ */
/* Model files                                                         */

typedef struct slds_file {
    lse_slds *m;
    char **names;      /* (d) one block */
    gsl_vector *mean;  /* (d) or NULL */
    gsl_vector *scale; /* (d) */
} slds_file;

static void slds_file_free(slds_file *f)
{
    lse_slds_free(f->m);
    free(f->names);
    gsl_vector_free(f->mean);
    gsl_vector_free(f->scale);
    memset(f, 0, sizeof *f);
}

/* The model (lse_slds_from_json) and the standardization of a file. */
static int slds_from_json(const lse_json *doc, const char *path, slds_file *f)
{
    memset(f, 0, sizeof *f);
    lse_error err;
    int rc = lsefit_json_check_model(doc, path, "slds");
    if (rc == LSEFIT_OK &&
        lse_slds_from_json(doc, path, &f->m, &f->names, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_get_standardize(doc, path, lse_slds_dim(f->m),
                                         &f->mean, &f->scale);
    if (rc != LSEFIT_OK)
        slds_file_free(f);
    return rc;
}

static int slds_read(const char *path, slds_file *f)
{
    lse_error err;
    lse_json *doc = NULL;
    memset(f, 0, sizeof *f);
    if (lse_json_load(path, &doc, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    const int rc = slds_from_json(doc, path, f);
    lse_json_free(doc);
    return rc;
}

/* Mixture weights, or the stationary distribution of a Markov chain. */
static int mode_weights(const lse_slds *m, gsl_vector *w)
{
    if (!lse_slds_is_markov(m)) {
        if (lse_slds_get_weights(m, w) != LSE_OK)
            return lsefit_fail("internal error: cannot read the weights");
        return LSEFIT_OK;
    }
    const size_t k = lse_slds_n_modes(m);
    gsl_matrix *p = gsl_matrix_alloc(k, k);
    gsl_vector *p0 = gsl_vector_alloc(k);
    int rc =
        (p == NULL || p0 == NULL) ? lsefit_fail("out of memory") : LSEFIT_OK;
    if (rc == LSEFIT_OK && (lse_slds_get_transition(m, p) != LSE_OK ||
                            lse_slds_get_initial(m, p0) != LSE_OK))
        rc = lsefit_fail("internal error: cannot read the chain");
    lse_error err;
    if (rc == LSEFIT_OK &&
        lse_chain_stationary(p, p0, w, NULL, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    gsl_matrix_free(p);
    gsl_vector_free(p0);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

typedef struct fit_args {
    lsefit_data_opts data;
    size_t kmin, kmax;
    int k_given;
    const char *select;
    lse_slds_config cfg;
    int cov_given, lags_given, markov_given;
    const char *init; /* "kmeans++", "random" or a model file */
    int init_file;    /* init is a model file (--init-file, --init PATH) */
    lse_slds_opts opts;
    int reg_given;
    int standardize;
    const char *missing_name;
    const char *output, *modes, *log_json;
    int mpi;            /* --mpi */
    const char *shards; /* --shards PATTERN */
} fit_args;

typedef struct fit_result {
    size_t k, n_params, n_steps, n_iter;
    size_t n_rows, n_seq; /* of the whole series (print_summary) */
    double loglik, loglik_per_step, bic, aic;
    int converged;
} fit_result;

static int progress_cb(size_t run, size_t iter, double loglik, double delta,
                       void *user)
{
    lsefit_progress_step(user, run, iter, loglik, delta);
    return 0;
}

static fit_result result_of(const lse_slds *m, const gsl_vector *scale)
{
    fit_result r;
    r.k = lse_slds_n_modes(m);
    r.n_params = lse_slds_n_params(m);
    r.n_steps = lse_slds_n_fit_steps(m);
    r.n_iter = lse_slds_n_iter(m);
    r.converged = lse_slds_converged(m);
    const double logj = lsefit_log_jacobian(scale);
    if (logj == 0.0) {
        r.loglik = lse_slds_loglik(m);
        r.loglik_per_step = lse_slds_loglik_per_step(m);
        r.bic = lse_slds_bic(m);
        r.aic = lse_slds_aic(m);
    } else {
        const double n = (double)r.n_steps, p = (double)r.n_params;
        r.loglik = lse_slds_loglik(m) - n * logj;
        r.loglik_per_step = r.loglik / n;
        r.bic = -2.0 * r.loglik + p * log(n);
        r.aic = -2.0 * r.loglik + 2.0 * p;
    }
    return r;
}

static lse_json *options_json(const fit_args *a, const lsefit_data *data,
                              size_t k, lse_error *err)
{
    lse_json *o = lse_json_new_object();
    if (o == NULL) {
        lse_error_set(err, LSE_ENOMEM, "lsefit", "out of memory");
        return NULL;
    }
    const lse_slds_opts *f = &a->opts;
    lse_status st = lse_json_set_string(o, "data", a->data.path, err);
    if (st == LSE_OK)
        st = lse_json_set_strings(o, "columns", data->names, data->d, err);
    if (st == LSE_OK && a->data.ignore != NULL) {
        char **items = NULL;
        size_t n = 0;
        if (lsefit_split_list(a->data.ignore, &items, &n) != LSEFIT_OK)
            st = lse_error_set(err, LSE_ENOMEM, "lsefit", "out of memory");
        else
            st = lse_json_set_strings(o, "ignore", (const char *const *)items,
                                      n, err);
        free(items);
    }
    if (st == LSE_OK && a->data.sequence != NULL)
        st = lse_json_set_string(o, "sequence", a->data.sequence, err);
    if (st == LSE_OK)
        st = lse_json_set_string(o, "missing", a->missing_name, err);
    if (st == LSE_OK)
        st = lse_json_set_bool(o, "standardize", data->mean != NULL, err);
    if (st == LSE_OK)
        st = lse_json_set_string(o, "covariance", lse_gmm_cov_name(a->cfg.cov),
                                 err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "lags", (long long)a->cfg.lags, err);
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
        st = lse_json_set_integer(o, "seed", (long long)f->seed, err);
    if (st == LSE_OK && f->exact_sums)
        st = lse_json_set_bool(o, "exact_sums", 1, err);
    if (st != LSE_OK) {
        lse_json_free(o);
        return NULL;
    }
    return o;
}

/* The fit summary keys after the parameters (data units). */
static lse_status summary_json(lse_json *doc, const fit_result *r,
                               lse_error *err)
{
    lse_status st = lse_json_set_number(doc, "loglik", r->loglik, err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "loglik_per_step", r->loglik_per_step,
                                 err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_iter", (long long)r->n_iter, err);
    if (st == LSE_OK)
        st = lse_json_set_bool(doc, "converged", r->converged, err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "bic", r->bic, err);
    return st == LSE_OK ? lse_json_set_number(doc, "aic", r->aic, err) : st;
}

static int slds_to_json(const lse_slds *m, const fit_result *r,
                        const fit_args *a, const lsefit_data *data,
                        lse_json **out)
{
    *out = NULL;
    lse_error err;
    lse_json *doc = lse_json_new_object();
    lse_json *opt = NULL;
    if (doc == NULL)
        return lsefit_fail("out of memory");
    lse_status st = lse_slds_to_json(m, data->names, doc, &err);
    if (st == LSE_OK)
        st = summary_json(doc, r, &err);
    if (st == LSE_OK) {
        opt = options_json(a, data, lse_slds_n_modes(m), &err);
        st = opt == NULL ? err.status : LSE_OK;
    }
    if (st == LSE_OK)
        st = lse_json_set_object(doc, "options", opt, &err);
    int rc = st == LSE_OK ? LSEFIT_OK : lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_set_standardize(doc, data->mean, data->scale);
    lse_json_free(opt);
    if (rc != LSEFIT_OK) {
        lse_json_free(doc);
        return rc;
    }
    *out = doc;
    return LSEFIT_OK;
}

/* ------------------------------------------------------------------ */
/* Printing (in data units: x = mean + S z gives A_x = S A S^-1,       */
/* b_x = mean + S b - sum_j A_x^j mean, Sigma_x = S Sigma S)           */

static void print_row(FILE *f, const char *label, const double *x, size_t n,
                      size_t stride)
{
    fprintf(f, "  %-11s", label);
    for (size_t j = 0; j < n; j++)
        fprintf(f, " %12.6g", x[j * stride]);
    fputc('\n', f);
}

static int print_summary(FILE *f, const slds_file *g, const fit_result *r,
                         const lsefit_data *data, const char *path, double tol)
{
    const lse_slds *m = g->m;
    const size_t k = lse_slds_n_modes(m), d = lse_slds_dim(m),
                 l = lse_slds_lags(m);
    const int markov = lse_slds_is_markov(m);
    gsl_matrix *a = gsl_matrix_alloc(d, d * l);
    gsl_vector *b = gsl_vector_alloc(d);
    gsl_matrix *c = gsl_matrix_alloc(d, d);
    gsl_matrix *p = gsl_matrix_alloc(k, k);
    gsl_vector *w = gsl_vector_alloc(k), *p0 = gsl_vector_alloc(k);
    int rc = LSEFIT_OK;
    if (a == NULL || b == NULL || c == NULL || p == NULL || w == NULL ||
        p0 == NULL)
        rc = lsefit_fail("out of memory");
    if (rc == LSEFIT_OK)
        rc = mode_weights(m, w);
    if (rc != LSEFIT_OK)
        goto done;
    const size_t n_seq = r->n_seq;
    fprintf(f, "Switching linear dynamics: K = %zu modes, %s, d = %zu (", k,
            markov ? "Markov switching" : "mixture (independent modes)", d);
    for (size_t j = 0; j < d; j++)
        fprintf(f, "%s%s", j ? ", " : "", data->names[j]);
    fprintf(f, "), lags L = %zu, %s noise covariance%s\n", l,
            lse_gmm_cov_name(lse_slds_cov_type(m)),
            lse_slds_cov_type(m) == LSE_COV_TIED ? "" : "s");
    fprintf(f, "data: %s, %zu rows, %zu sequence%s, %zu steps%s\n", path,
            r->n_rows, n_seq, n_seq == 1 ? "" : "s", r->n_steps,
            g->mean != NULL ? ", standardized (parameters below in data "
                              "units)"
                            : "");
    fprintf(f, "log-likelihood %.10g (per step %.10g)\n", r->loglik,
            r->loglik_per_step);
    fprintf(f, "BIC %.10g  AIC %.10g  (%zu parameters; lower is better)\n",
            r->bic, r->aic, r->n_params);
    fprintf(f, "EM: %zu iteration%s, %s (tol %g)\n", r->n_iter,
            r->n_iter == 1 ? "" : "s",
            r->converged ? "converged" : "NOT converged", tol);
    if (markov) {
        lse_slds_get_transition(m, p);
        lse_slds_get_initial(m, p0);
        fprintf(f, "\ntransition P(from row mode to column mode):\n");
        for (size_t i = 0; i < k; i++) {
            char label[32];
            snprintf(label, sizeof label, "from %zu", i);
            print_row(f, label, gsl_matrix_const_ptr(p, i, 0), k, 1);
        }
        print_row(f, "initial", p0->data, k, p0->stride);
        print_row(f, "stationary", w->data, k, w->stride);
        fprintf(f, "expected duration of each mode (steps):\n");
        fprintf(f, "  %-11s", "");
        for (size_t i = 0; i < k; i++) {
            const double stay = gsl_matrix_get(p, i, i);
            fprintf(f, " %12.6g", stay < 1.0 ? 1.0 / (1.0 - stay) : INFINITY);
        }
        fputc('\n', f);
    }
    for (size_t i = 0; i < k; i++) {
        lse_slds_get_a(m, i, a);
        lse_slds_get_b(m, i, b);
        lse_slds_get_cov(m, i, c);
        if (g->mean != NULL) {
            for (size_t r1 = 0; r1 < d; r1++) {
                const double sr = gsl_vector_get(g->scale, r1);
                double bx =
                    gsl_vector_get(g->mean, r1) + sr * gsl_vector_get(b, r1);
                for (size_t q = 0; q < d * l; q++) {
                    const size_t jc = q % d;
                    const double ax = gsl_matrix_get(a, r1, q) * sr /
                                      gsl_vector_get(g->scale, jc);
                    gsl_matrix_set(a, r1, q, ax);
                    bx -= ax * gsl_vector_get(g->mean, jc);
                }
                gsl_vector_set(b, r1, bx);
                for (size_t q = 0; q < d; q++)
                    gsl_matrix_set(c, r1, q,
                                   gsl_matrix_get(c, r1, q) * sr *
                                       gsl_vector_get(g->scale, q));
            }
        }
        fprintf(f, "\nmode %zu: %s %.6g\n", i,
                markov ? "stationary probability" : "weight",
                gsl_vector_get(w, i));
        for (size_t r1 = 0; r1 < d; r1++)
            print_row(f, r1 == 0 ? (l > 1 ? "A (lag 1..)" : "A") : "",
                      gsl_matrix_const_ptr(a, r1, 0), d * l, 1);
        print_row(f, "b", b->data, d, b->stride);
        for (size_t r1 = 0; r1 < d; r1++)
            print_row(f, r1 == 0 ? "covariance" : "",
                      gsl_matrix_const_ptr(c, r1, 0), d, 1);
    }
done:
    gsl_matrix_free(a);
    gsl_vector_free(b);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_vector_free(w);
    gsl_vector_free(p0);
    return rc;
}

/* ------------------------------------------------------------------ */
/* The modes table: one line per data row of the table, empty cells for */
/* rows that are not steps.                                             */

/* segment --filtered: also the filtered probabilities f0..f(K-1) */
static int modes_filtered;

static int write_modes(const char *path, const lse_slds *m,
                       const lsefit_data *data, double *loglik,
                       size_t *n_steps_out)
{
    lse_error err;
    const size_t T = data->x->size1, k = lse_slds_n_modes(m);
    const int markov = lse_slds_is_markov(m);
    size_t n_steps = 0;
    size_t *steps = malloc(T * sizeof *steps);
    size_t *mode = malloc(T * sizeof *mode);
    size_t *path_v = malloc(T * sizeof *path_v);
    gsl_matrix *post = NULL, *filt = NULL;
    lsefit_buf b = {0};
    int rc = (steps == NULL || mode == NULL || path_v == NULL)
                 ? lsefit_fail("out of memory")
                 : LSEFIT_OK;
    if (rc == LSEFIT_OK &&
        lse_slds_steps(m, T, data->seq, steps, &n_steps, &err) != LSE_OK)
        rc = lsefit_fail("%s: %s", lse_table_name(data->table),
                         lsefit_strip(&err));
    if (rc == LSEFIT_OK) {
        post = gsl_matrix_alloc(n_steps, k);
        if (modes_filtered)
            filt = gsl_matrix_alloc(n_steps, k);
        if (post == NULL || (modes_filtered && filt == NULL))
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK && modes_filtered &&
        lse_slds_filtered(m, data->x, data->seq, filt, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK &&
        (lse_slds_posteriors(m, data->x, data->seq, post, &err) != LSE_OK ||
         lse_slds_most_likely(m, data->x, data->seq, mode, &err) != LSE_OK ||
         (markov &&
          lse_slds_viterbi(m, data->x, data->seq, path_v, &err) != LSE_OK) ||
         lse_slds_score(m, data->x, data->seq, loglik, &err) != LSE_OK))
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_buf_open(&b);
    if (rc == LSEFIT_OK) {
        for (size_t j = 0; j < k; j++)
            fprintf(b.f, "p%zu,", j);
        fputs(markov ? "mode,viterbi" : "mode", b.f);
        for (size_t j = 0; filt != NULL && j < k; j++)
            fprintf(b.f, ",f%zu", j);
        fputc('\n', b.f);
        size_t s = 0;
        for (size_t i = 0; i < data->n_table; i++) {
            const int is_step = s < n_steps && data->rows[steps[s]] == i;
            for (size_t j = 0; j < k; j++) {
                if (is_step)
                    lsefit_csv_number(b.f, gsl_matrix_get(post, s, j));
                fputc(',', b.f);
            }
            if (is_step) {
                fprintf(b.f, "%zu", mode[s]);
                if (markov)
                    fprintf(b.f, ",%zu", path_v[s]);
            } else if (markov) {
                fputc(',', b.f);
            }
            for (size_t j = 0; filt != NULL && j < k; j++) {
                fputc(',', b.f);
                if (is_step)
                    lsefit_csv_number(b.f, gsl_matrix_get(filt, s, j));
            }
            s += is_step;
            fputc('\n', b.f);
        }
        rc = lsefit_buf_write(&b, path);
    }
    *n_steps_out = n_steps;
    lsefit_buf_free(&b);
    gsl_matrix_free(post);
    gsl_matrix_free(filt);
    free(steps);
    free(mode);
    free(path_v);
    return rc;
}

/* ------------------------------------------------------------------ */
/* lsefit slds SERIES.csv                                              */

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
    OPT_MODES,
    OPT_SELECT,
    OPT_LOGJSON,
    OPT_MARKOV,
    OPT_LAGS,
    OPT_SEQUENCE,
    OPT_LABELS,
    OPT_PROBA,
    OPT_MPI,
    OPT_SHARDS,
    OPT_EXACT,
    OPT_INIT_FILE
};

static const struct option fit_options[] = {
    {"n-modes", required_argument, NULL, 'k'},
    {"markov", no_argument, NULL, OPT_MARKOV},
    {"lags", required_argument, NULL, OPT_LAGS},
    {"sequence", required_argument, NULL, OPT_SEQUENCE},
    {"covariance", required_argument, NULL, OPT_COV},
    {"init", required_argument, NULL, OPT_INIT},
    {"init-file", required_argument, NULL, OPT_INIT_FILE},
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
    {"modes", required_argument, NULL, OPT_MODES},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"proba", required_argument, NULL, OPT_PROBA},
    {"select", required_argument, NULL, OPT_SELECT},
    {"log-json", required_argument, NULL, OPT_LOGJSON},
    {"mpi", no_argument, NULL, OPT_MPI},
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"exact-sums", no_argument, NULL, OPT_EXACT},
    LSEFIT_DATA_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* --init names. The k-means++ start always runs Lloyd iterations until no
 * assignment changes (at most 100): it is a k-means clustering, so
 * scikit-learn's "kmeans" and "k-means++" name it too. */
static const lsefit_init_name slds_inits[] = {{"kmeans++", "kmeans++"},
                                              {"k-means++", "kmeans++"},
                                              {"kmeans", "kmeans++"},
                                              {"random", "random"},
                                              {NULL, NULL}};

static int parse_fit(int argc, char **argv, fit_args *a, int *help)
{
    static const char *cmd = "slds";
    memset(a, 0, sizeof *a);
    a->opts = lse_slds_opts_default();
    a->cfg = lse_slds_config_default();
    a->init = "kmeans++";
    a->select = "bic";
    a->missing_name = "error";
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
        case OPT_MARKOV:
            a->cfg.markov = 1;
            a->markov_given = 1;
            break;
        case OPT_LAGS:
            rc = lsefit_opt_size(cmd, "--lags", optarg, 1, &a->cfg.lags);
            a->lags_given = 1;
            break;
        case OPT_SEQUENCE:
            a->data.sequence = optarg;
            break;
        case OPT_COV:
            if (lse_gmm_cov_parse(optarg, &a->cfg.cov) != LSE_OK)
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
                rc = lsefit_opt_init(cmd, optarg, slds_inits, &method);
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
            rc = lsefit_usage(cmd, "--weights is not supported by slds "
                                   "(lse_slds_fit takes no sample weights)");
            break;
        case OPT_LABELS:
        case OPT_PROBA:
            rc = lsefit_usage(cmd,
                              "'%s' is a gmm option; slds writes mode "
                              "posteriors with --modes FILE",
                              argv[optind - 1]);
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
        case OPT_MODES:
            a->modes = optarg;
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
        case OPT_EXACT:
            a->opts.exact_sums = 1;
            break;
        case OPT_SHARDS:
            a->shards = optarg;
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
        return lsefit_usage(cmd, "give SERIES.csv or --shards, not both");
    if (a->mpi && a->modes != NULL)
        return lsefit_usage(cmd, "--modes is not written with --mpi (each "
                                 "process holds only its rows); run 'lsefit "
                                 "slds segment' on the model");
    if (a->shards == NULL && optind >= argc)
        return lsefit_usage(cmd, "missing the series file SERIES.csv");
    if (optind + 1 < argc) {
        static const char *const subs[] = {"segment", "simulate"};
        return lsefit_bad_operand(cmd, argv[optind], argv[optind + 1], subs,
                                  2);
    }
    if (a->shards == NULL) {
        const int rc_op = lsefit_bad_operand(cmd, argv[optind], NULL, NULL, 0);
        if (rc_op != LSEFIT_OK)
            return rc_op;
    }
    a->data.path = a->shards != NULL ? a->shards : argv[optind];
    const int from_file = a->init_file;
    if (!a->k_given && !from_file)
        return lsefit_usage(cmd, "missing -k K (the number of modes)");
    if (select_given && a->kmin == a->kmax && a->k_given)
        return lsefit_usage(cmd, "--select needs a range of K such as -k 1:4");
    if (from_file && a->kmin != a->kmax)
        return lsefit_usage(cmd, "--init-file FILE fixes K: a range of K "
                                 "cannot be used with it");
    if (a->data.missing == LSE_MISSING_KEEP)
        return lsefit_fail("--missing marginalize is not supported: the SLDS "
                           "library (lse_slds_fit) cannot fit rows with "
                           "missing values; use --missing drop");
    a->opts.init = from_file                      ? LSE_SLDS_INIT_GIVEN
                   : strcmp(a->init, "random") == 0 ? LSE_SLDS_INIT_RANDOM
                                                    : LSE_SLDS_INIT_KMEANSPP;
    return LSEFIT_OK;
}

static int setup_init_file(fit_args *a, slds_file *init)
{
    int rc = slds_read(a->init, init);
    if (rc != LSEFIT_OK)
        return rc;
    const lse_slds *m = init->m;
    const size_t k = lse_slds_n_modes(m);
    if (a->k_given && a->kmin != k)
        return lsefit_fail("--init %s: the model has n_modes = %zu but -k is "
                           "%zu",
                           a->init, k, a->kmin);
    if (a->markov_given && !lse_slds_is_markov(m))
        return lsefit_fail("--init %s: the model is a mixture, not --markov",
                           a->init);
    if (a->lags_given && a->cfg.lags != lse_slds_lags(m))
        return lsefit_fail("--init %s: the model has %zu lags but --lags is "
                           "%zu",
                           a->init, lse_slds_lags(m), a->cfg.lags);
    if (a->cov_given && a->cfg.cov != lse_slds_cov_type(m))
        return lsefit_fail("--init %s: the model has '%s' covariances but "
                           "--covariance is '%s'",
                           a->init, lse_gmm_cov_name(lse_slds_cov_type(m)),
                           lse_gmm_cov_name(a->cfg.cov));
    if (a->standardize && init->mean == NULL)
        return lsefit_fail("--init %s: the model was not fit with "
                           "--standardize, so it cannot restart a "
                           "standardized fit",
                           a->init);
    a->kmin = a->kmax = k;
    a->cfg.markov = lse_slds_is_markov(m);
    a->cfg.lags = lse_slds_lags(m);
    a->cfg.cov = lse_slds_cov_type(m);
    a->data.model_names = (const char *const *)init->names;
    a->data.n_model_names = lse_slds_dim(m);
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

/* Steps of the series for a model of this shape: at least K. */
static int check_steps(const lse_slds *m, const lsefit_data *data, size_t k)
{
    lse_error err;
    size_t n_steps = 0;
    if (lse_slds_steps(m, data->x->size1, data->seq, NULL, &n_steps, &err) !=
        LSE_OK)
        return lsefit_fail("%s: no step to fit: every sequence has at most "
                           "L = %zu rows",
                           lse_table_name(data->table), lse_slds_lags(m));
    return lsefit_data_check_rows(data, n_steps, k, "modes");
}

/* The files of a fit, declared before any work (lsefit_plan). */
static int fit_plan(const fit_args *a)
{
    const lsefit_path in[] = {
        {a->shards != NULL ? NULL : a->data.path, "the series"},
        {a->init_file ? a->init : NULL, "--init"}};
    const lsefit_path out[] = {
        {a->output, "-o"}, {a->modes, "--modes"}, {a->log_json, "--log-json"}};
    int rc =
        a->shards != NULL ? lsefit_plan_glob(a->shards, "--shards") : LSEFIT_OK;
    if (rc == LSEFIT_OK)
        rc = lsefit_plan(in, 2, out, 3);
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
    const int from_file = a.opts.init == LSE_SLDS_INIT_GIVEN;
    slds_file init = {0}, back = {0};
    lsefit_data data = {0};
    lsefit_progress prog = {0};
    fit_result *res = NULL;
    lse_slds **models = NULL;
    lse_json *doc = NULL, *back_doc = NULL;
    char *text = NULL;
    size_t n_k = 0, best = 0;
    lse_error err;
    lsefit_mpi *mpi = NULL;
    size_t n_rows = 0, n_seq = 0;

    if (a.mpi && lsefit_mpi_begin(&mpi) != LSEFIT_OK)
        return LSEFIT_FAIL;
    if (from_file)
        rc = setup_init_file(&a, &init);
    if (rc == LSEFIT_OK)
        rc = mpi != NULL ? lsefit_mpi_data_load(mpi, &a.data, a.shards,
                                                a.cfg.lags, &data)
                         : lsefit_data_load(&a.data, &data);
    if (rc == LSEFIT_OK) { /* rows and sequences for the summary */
        const size_t h = lsefit_mpi_context_rows(mpi);
        n_rows = mpi != NULL ? lsefit_mpi_total_rows(mpi) : data.x->size1;
        n_seq = lsefit_mpi_is_root(mpi) ? 1 : 0;
        for (size_t i = h > 0 ? h : 1; data.seq != NULL && i < data.x->size1;
             i++)
            n_seq += data.seq[i] != data.seq[i - 1];
        if (mpi != NULL)
            rc = lsefit_mpi_sum_size(mpi, &n_seq);
    }
    if (rc == LSEFIT_OK && from_file && data.d != lse_slds_dim(init.m))
        rc = lsefit_fail("%s: %zu data column%s but the model %s has "
                         "n_features = %zu",
                         a.data.path, data.d, data.d == 1 ? "" : "s", a.init,
                         lse_slds_dim(init.m));
    if (rc == LSEFIT_OK)
        rc = mpi != NULL ? lsefit_mpi_check_constant(mpi, &data, a.reg_given)
                         : lsefit_data_check_constant(&data, a.reg_given);
    if (rc == LSEFIT_OK && init.mean != NULL)
        rc = lsefit_data_apply_standardize(&data, init.mean, init.scale);
    else if (rc == LSEFIT_OK && a.standardize)
        rc = mpi != NULL ? lsefit_mpi_standardize(mpi, &data)
                         : lsefit_data_standardize(&data);
    else if (rc == LSEFIT_OK) /* every process checks its rows */
        rc = lsefit_data_check_scale(
            &data, mpi != NULL ? lsefit_mpi_total_rows(mpi) : data.x->size1);
    if (rc == LSEFIT_OK)
        rc = lsefit_progress_open(&prog, "slds", a.log_json);
    if (rc == LSEFIT_OK) {
        n_k = a.kmax - a.kmin + 1;
        res = calloc(n_k, sizeof *res);
        models = calloc(n_k, sizeof *models);
        if (res == NULL || models == NULL)
            rc = lsefit_fail("out of memory");
    }
    a.opts.progress = progress_cb;
    a.opts.user = &prog;
    lsefit_mpi_slds_opts(mpi, &a.opts);
    for (size_t i = 0; rc == LSEFIT_OK && i < n_k; i++) {
        const size_t k = a.kmin + i;
        if (from_file) {
            models[i] = init.m;
            init.m = NULL;
        } else {
            lse_slds_config cfg = a.cfg;
            cfg.n_modes = k;
            cfg.dim = data.d;
            if (lse_slds_new(&cfg, &models[i], &err) != LSE_OK) {
                rc = lsefit_fail_lib(&err, NULL);
                break;
            }
        }
        /* --mpi: the library counts the steps of every process */
        rc = mpi != NULL ? LSEFIT_OK : check_steps(models[i], &data, a.kmax);
        if (rc != LSEFIT_OK)
            break;
        lsefit_progress_start(&prog, k, from_file ? 1 : a.opts.n_init);
        if (lse_slds_fit(models[i], data.x, data.seq, &a.opts, &err) !=
            LSE_OK) {
            const char *hint = NULL;
            if (err.status == LSE_ENUMERIC)
                hint = " (try a larger --reg-covar)";
            rc = lsefit_fail("%s: K = %zu: %s%s", a.data.path, k,
                             lsefit_strip(&err), hint ? hint : "");
            break;
        }
        res[i] = result_of(models[i], data.scale);
        res[i].n_rows = n_rows;
        res[i].n_seq = n_seq;
        const int aic = strcmp(a.select, "aic") == 0;
        if (i > 0 &&
            (aic ? res[i].aic < res[best].aic : res[i].bic < res[best].bic))
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
    if (rc == LSEFIT_OK)
        rc = slds_to_json(models[best], &res[best], &a, &data, &doc);
    if (rc == LSEFIT_OK && lse_json_to_string(doc, &text, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK &&
        lse_json_parse(text, strlen(text), a.output ? a.output : "<model>",
                       &back_doc, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = slds_from_json(back_doc, a.output ? a.output : "<model>", &back);
    if (rc == LSEFIT_OK && a.modes != NULL) {
        double ll = 0.0;
        size_t n_steps = 0;
        rc = write_modes(a.modes, back.m, &data, &ll, &n_steps);
    }
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
        lse_slds_free(models[i]);
    free(models);
    free(res);
    free(text);
    lse_json_free(doc);
    lse_json_free(back_doc);
    slds_file_free(&back);
    slds_file_free(&init);
    lsefit_data_free(&data);
    if (mpi != NULL) /* commit on process 0 before the outcome is agreed */
        rc = lsefit_outputs_finish(rc);
    return lsefit_mpi_end(mpi, rc);
}

/* ------------------------------------------------------------------ */
/* lsefit slds segment MODEL.json SERIES.csv                           */

static const struct option segment_options[] = {
    {"columns", required_argument, NULL, OPT_COLUMNS},
    {"ignore", required_argument, NULL, OPT_IGNORE},
    {"sequence", required_argument, NULL, OPT_SEQUENCE},
    {"missing", required_argument, NULL, OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"filtered", no_argument, NULL, OPT_PROBA},
    LSEFIT_DATA_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* lsefit slds summary MODEL.json SERIES.csv: the parameters with
 * standard errors from the numerical Hessian of the log-likelihood (as
 * statsmodels' MarkovRegression summary), CSV on -o / stdout. */
static int write_summary(const char *path, const lse_slds *m,
                         const lsefit_data *data, double *loglik)
{
    lse_error err;
    const size_t n = lse_slds_n_stderr(m);
    if (n == 0)
        return lsefit_fail("standard errors are computed for univariate "
                           "series (n_features = 1); the model has %zu",
                           lse_slds_dim(m));
    if (data->scale != NULL)
        return lsefit_fail("the model was fitted with --standardize: its "
                           "parameters are on the standardized scale; refit "
                           "without --standardize for standard errors");
    gsl_vector *est = gsl_vector_alloc(n), *se = gsl_vector_alloc(n);
    char(*names)[32] = malloc(n * sizeof *names);
    lsefit_buf b = {0};
    int rc = est == NULL || se == NULL || names == NULL
                 ? lsefit_fail("out of memory")
                 : LSEFIT_OK;
    if (rc == LSEFIT_OK &&
        (lse_slds_score(m, data->x, data->seq, loglik, &err) != LSE_OK ||
         lse_slds_stderr(m, data->x, data->seq, est, se, names, &err) !=
             LSE_OK))
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_buf_open(&b);
    if (rc == LSEFIT_OK) {
        fputs("parameter,estimate,std_err,z\n", b.f);
        for (size_t i = 0; i < n; i++) {
            fprintf(b.f, "%s,", names[i]);
            lsefit_csv_number(b.f, gsl_vector_get(est, i));
            fputc(',', b.f);
            lsefit_csv_number(b.f, gsl_vector_get(se, i));
            fputc(',', b.f);
            lsefit_csv_number(b.f, gsl_vector_get(est, i) /
                                       gsl_vector_get(se, i));
            fputc('\n', b.f);
        }
        rc = lsefit_buf_write(&b, path);
    }
    lsefit_buf_free(&b);
    gsl_vector_free(est);
    gsl_vector_free(se);
    free(names);
    return rc;
}

static int segment_main(int argc, char **argv)
{
    const int summary = strcmp(argv[0], "summary") == 0;
    const char *cmd = summary ? "slds summary" : "slds segment";
    lsefit_data_opts dopt = {0};
    const char *output = "-";
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK && (c = getopt_long(argc, argv, ":o:qh",
                                               segment_options, NULL)) != -1) {
        if (lsefit_data_option(cmd, c, optarg, &dopt, &rc))
            continue;
        switch (c) {
        case OPT_COLUMNS:
            dopt.columns = optarg;
            break;
        case OPT_IGNORE:
            dopt.ignore = optarg;
            break;
        case OPT_SEQUENCE:
            dopt.sequence = optarg;
            break;
        case OPT_MISSING:
            rc = lsefit_opt_missing(cmd, optarg, &dopt.missing);
            break;
        case 'o':
            output = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case OPT_PROBA:
            if (summary)
                rc = lsefit_opt_bad(cmd, c, argv, segment_options);
            modes_filtered = 1;
            break;
        case 'h':
            if (summary)
                help_summary(stdout);
            else
                help_segment(stdout);
            return LSEFIT_OK;
        default:
            rc = lsefit_opt_bad(cmd, c, argv, segment_options);
            break;
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 2)
        return lsefit_usage(cmd, "expected MODEL.json and SERIES.csv");
    if (dopt.missing == LSE_MISSING_KEEP)
        return lsefit_fail("--missing marginalize is not supported: the SLDS "
                           "library cannot use rows with missing values; use "
                           "--missing drop");
    const char *model_path = argv[optind];
    dopt.path = argv[optind + 1];
    {
        const lsefit_path in[] = {{model_path, "the model"},
                                  {dopt.path, "the series"}};
        const lsefit_path out[] = {{output, "-o"}};
        rc = lsefit_plan(in, 2, out, 1);
        if (rc != LSEFIT_OK)
            return rc;
    }
    slds_file g;
    lsefit_data data = {0};
    rc = slds_read(model_path, &g);
    if (rc != LSEFIT_OK)
        return rc;
    const size_t d = lse_slds_dim(g.m);
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
    if (rc == LSEFIT_OK)
        rc = check_steps(g.m, &data, 1);
    if (rc == LSEFIT_OK) {
        double ll = 0.0;
        size_t n_steps = 0;
        if (summary) {
            rc = write_summary(output, g.m, &data, &ll);
            lse_slds_steps(g.m, data.x->size1, data.seq, NULL, &n_steps, NULL);
        } else
            rc = write_modes(output, g.m, &data, &ll, &n_steps);
        ll -= (double)n_steps * lsefit_log_jacobian(data.scale);
        if (rc == LSEFIT_OK)
            lsefit_note("%zu steps: log-likelihood %.17g, per step %.17g",
                        n_steps, ll, ll / (double)n_steps);
    }
    lsefit_data_free(&data);
    slds_file_free(&g);
    return rc;
}

/* ------------------------------------------------------------------ */
/* lsefit slds simulate MODEL.json -T N                                */

static const struct option simulate_options[] = {
    {"length", required_argument, NULL, 'T'},
    {"seed", required_argument, NULL, OPT_SEED},
    {"output", required_argument, NULL, 'o'},
    {"modes", required_argument, NULL, OPT_MODES},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static int simulate_main(int argc, char **argv)
{
    const char *cmd = "slds simulate";
    const char *output = "-", *modes_path = NULL;
    size_t T = 0;
    unsigned long seed = 0;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK && (c = getopt_long(argc, argv, ":T:o:qh",
                                               simulate_options, NULL)) != -1) {
        switch (c) {
        case 'T':
            rc = lsefit_opt_size(cmd, "-T", optarg, 1, &T);
            break;
        case OPT_SEED:
            rc = lsefit_opt_seed(cmd, optarg, &seed);
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_MODES:
            modes_path = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'h':
            help_simulate(stdout);
            return LSEFIT_OK;
        default:
            rc = lsefit_opt_bad(cmd, c, argv, simulate_options);
            break;
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 1)
        return lsefit_usage(cmd, "expected one MODEL.json");
    if (T == 0)
        return lsefit_usage(cmd, "missing -T N (the length of the series)");
    {
        const lsefit_path in[] = {{argv[optind], "the model"}};
        const lsefit_path out[] = {{output, "-o"}, {modes_path, "--modes"}};
        rc = lsefit_plan(in, 1, out, 2);
        if (rc != LSEFIT_OK)
            return rc;
    }
    slds_file g;
    rc = slds_read(argv[optind], &g);
    if (rc != LSEFIT_OK)
        return rc;
    lse_error err;
    gsl_matrix *x = gsl_matrix_alloc(T, lse_slds_dim(g.m));
    size_t *modes = malloc(T * sizeof *modes);
    if (x == NULL || modes == NULL)
        rc = lsefit_fail("out of memory");
    else if (lse_slds_simulate(g.m, T, seed, x, modes, &err) != LSE_OK)
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
    if (rc == LSEFIT_OK && modes_path != NULL) {
        lsefit_buf b;
        rc = lsefit_buf_open(&b);
        if (rc == LSEFIT_OK) {
            fputs("mode\n", b.f);
            for (size_t i = 0; i < T; i++)
                fprintf(b.f, "%zu\n", modes[i]);
            rc = lsefit_buf_write(&b, modes_path);
        }
        lsefit_buf_free(&b);
    }
    gsl_matrix_free(x);
    free(modes);
    slds_file_free(&g);
    return rc;
}

int lsefit_lslds_wanted(int argc, char **argv); /* tools/lsefit_lslds.c */
int lsefit_lslds_main(int argc, char **argv);

int lsefit_slds_main(int argc, char **argv)
{
    if (lsefit_lslds_wanted(argc, argv))
        return lsefit_lslds_main(argc, argv);
    if (argc >= 2 && (strcmp(argv[1], "segment") == 0 ||
                      strcmp(argv[1], "summary") == 0))
        return segment_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "simulate") == 0)
        return simulate_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "plot") == 0) /* lsefit_plot.c */
        return lsefit_slds_plot_main(argc - 1, argv + 1);
    return fit_main(argc, argv);
}
