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

#include "lsefit_cmd.h"
#include "lsefit_fit.h"
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
          "Regressors and shared parts (statsmodels' MarkovRegression with\n"
          "exog and switching_*; docs/models/slds.md):\n"
          "  --exog LIST             exogenous regressors u_t (columns, by name\n"
          "                          or 1-based index): mode k's mean adds B_k\n"
          "                          u_t; they are left out of the series\n"
          "  --switching LIST        parts that differ between the modes:\n"
          "                          intercept, ar, exog, variance (default\n"
          "                          all); the others are shared (no variance:\n"
          "                          --covariance tied); not with --mpi or\n"
          "                          --standardize\n",
          f);
    fputs("\n"
          "Latent states (--latent-dim D; lsefit slds --latent-dim D --help):\n"
          "  lsefit slds SERIES.csv -k K --latent-dim D -o MODEL.json fits\n"
          "  y_t = C x_t + d + v_t with x_t switching linear dynamics, by\n"
          "  structured variational EM (docs/models/slds.md), on the same\n"
          "  options as this fit where they apply (-k, --n-init, --max-iter,\n"
          "  --tol, --reg-covar, --seed, --columns, --ignore, --sequence,\n"
          "  --missing error|drop|marginalize, the reading options, --select\n"
          "  bic|aic|heldout, -o, -q, -v, --mpi, --shards); segment (p0..,\n"
          "  mode, viterbi, x0.., --variances), score (ELBO and\n"
          "  importance-sampled log p(y), --samples N) and simulate (-T N)\n"
          "  take a latent model file.\n",
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
          "  --exog-file FILE    a model with regressors (--exog): their\n"
          "                      values, the columns named as the model's\n"
          "                      exog_names, one row per simulated row (also\n"
          "                      printed after the series' columns)\n"
          "  -q, --quiet         no warnings\n"
          "  -h, --help          this help\n",
          f);
}

/* ------------------------------------------------------------------ */
/* Model files                                                         */

/* The model-file functions of LSEFIT_MODEL_FILE_FUNCTIONS, but a model
 * with p regressors reads d + p columns (the values, then the regressors,
 * named by "feature_names" and "exog_names"). */
static lse_status slds_from_json(const lse_json *doc, const char *path,
                                 void **m, char ***names, lse_error *err)
{
    lse_slds *model = NULL;
    const lse_status st = lse_slds_from_json(doc, path, &model, names, err);
    *m = model;
    return st;
}
static size_t slds_dim(const void *m)
{
    return lse_slds_dim(m) + lse_slds_n_exog(m);
}
static void slds_free(void *m) { lse_slds_free(m); }
static lse_status slds_to_json(const void *m, const char *const *names,
                               lse_json *doc, lse_error *err)
{
    return lse_slds_to_json(m, names, doc, err);
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

/* The options of lsefit slds besides those of every fit (f->own), and
 * the rows and sequences of the whole series (for the summary). */
typedef struct slds_own {
    lse_slds_config cfg;
    lse_slds_opts opts;
    int lags_given, markov_given;
    const char *modes;
    const char *exog;      /* --exog LIST or NULL */
    const char *switching; /* --switching LIST or NULL */
    char ignore_buf[1024]; /* --ignore plus the --exog columns */
    size_t n_rows, n_seq;
} slds_own;

static int progress_cb(size_t run, size_t iter, double loglik, double delta,
                       void *user)
{
    lsefit_progress_step(user, run, iter, loglik, delta);
    return 0;
}

static lsefit_fit_result slds_result(const lsefit_fit *f, const void *model)
{
    const lse_slds *m = model;
    const slds_own *s = f->own;
    lsefit_fit_result r = {0};
    r.k = lse_slds_n_modes(m);
    r.n_params = lse_slds_n_params(m);
    r.n_steps = lse_slds_n_fit_steps(m);
    r.n_iter = lse_slds_n_iter(m);
    r.converged = lse_slds_converged(m);
    r.n_rows = s->n_rows;
    r.n_seq = s->n_seq;
    const double logj = lsefit_log_jacobian(f->d.scale);
    if (logj == 0.0) {
        r.loglik = lse_slds_loglik(m);
        r.loglik_per = lse_slds_loglik_per_step(m);
        r.bic = lse_slds_bic(m);
        r.aic = lse_slds_aic(m);
    } else {
        const double n = (double)r.n_steps, p = (double)r.n_params;
        r.loglik = lse_slds_loglik(m) - n * logj;
        r.loglik_per = r.loglik / n;
        r.bic = -2.0 * r.loglik + p * log(n);
        r.aic = -2.0 * r.loglik + 2.0 * p;
    }
    return r;
}

/* "lags" after "covariance", "exact_sums" (when set) after "seed". */
static lse_status slds_json_options(const lsefit_fit *f, lse_json *o,
                                    int where, lse_error *err)
{
    const slds_own *s = f->own;
    if (where == LSEFIT_JSON_AFTER_COVARIANCE)
        return lse_json_set_integer(o, "lags", (long long)s->cfg.lags, err);
    if (where == LSEFIT_JSON_AFTER_SEED && s->opts.exact_sums)
        return lse_json_set_bool(o, "exact_sums", 1, err);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Printing (in data units: x = mean + S z gives A_x = S A S^-1,       */
/* b_x = mean + S b - sum_j A_x^j mean, Sigma_x = S Sigma S)           */

/* The summary's chain block: transition matrix, initial and stationary
 * distributions, expected durations (p, p0 are work space). */
static void print_chain(FILE *f, const lse_slds *m, gsl_matrix *p,
                        gsl_vector *p0, const gsl_vector *w)
{
    const size_t k = p->size1;
    lse_slds_get_transition(m, p);
    lse_slds_get_initial(m, p0);
    fprintf(f, "\ntransition P(from row mode to column mode):\n");
    for (size_t i = 0; i < k; i++) {
        char label[32];
        snprintf(label, sizeof label, "from %zu", i);
        lsefit_print_row(f, label, gsl_matrix_const_ptr(p, i, 0), k, 1);
    }
    lsefit_print_row(f, "initial", p0->data, k, p0->stride);
    lsefit_print_row(f, "stationary", w->data, k, w->stride);
    fprintf(f, "expected duration of each mode (steps):\n");
    fprintf(f, "  %-11s", "");
    for (size_t i = 0; i < k; i++) {
        const double stay = gsl_matrix_get(p, i, i);
        fprintf(f, " %12.6g", stay < 1.0 ? 1.0 / (1.0 - stay) : INFINITY);
    }
    fputc('\n', f);
}

/* One mode's A (d x dL), b and covariance c from standardized to data units. */
static void unstandardize_mode(const lsefit_model_file *g, gsl_matrix *a,
                               gsl_vector *b, gsl_matrix *c)
{
    const size_t d = b->size, dl = a->size2;
    for (size_t r1 = 0; r1 < d; r1++) {
        const double sr = gsl_vector_get(g->scale, r1);
        double bx = gsl_vector_get(g->mean, r1) + sr * gsl_vector_get(b, r1);
        for (size_t q = 0; q < dl; q++) {
            const size_t jc = q % d;
            const double ax =
                gsl_matrix_get(a, r1, q) * sr / gsl_vector_get(g->scale, jc);
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

static int print_summary(FILE *f, const lsefit_model_file *g,
                         const lsefit_fit_result *r,
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
    const size_t ne = lse_slds_n_exog(m);
    if (ne > 0) {
        fprintf(f, "exogenous regressors (B): ");
        for (size_t j = 0; j < ne; j++)
            fprintf(f, "%s%s", j ? ", " : "", data->names[d + j]);
        fputc('\n', f);
    }
    const unsigned sh = lse_slds_shared(m);
    if (sh != 0u)
        fprintf(f, "shared by every mode:%s%s%s\n",
                sh & LSE_SLDS_SHARE_INTERCEPT ? " intercept b" : "",
                sh & LSE_SLDS_SHARE_AR ? " A" : "",
                sh & LSE_SLDS_SHARE_EXOG ? " B" : "");
    fprintf(f, "data: %s, %zu rows, %zu sequence%s, %zu steps%s\n", path,
            r->n_rows, n_seq, n_seq == 1 ? "" : "s", r->n_steps,
            g->mean != NULL ? ", standardized (parameters below in data "
                              "units)"
                            : "");
    fprintf(f, "log-likelihood %.10g (per step %.10g)\n", r->loglik,
            r->loglik_per);
    fprintf(f, "BIC %.10g  AIC %.10g  (%zu parameters; lower is better)\n",
            r->bic, r->aic, r->n_params);
    fprintf(f, "EM: %zu iteration%s, %s (tol %g)\n", r->n_iter,
            r->n_iter == 1 ? "" : "s",
            r->converged ? "converged" : "NOT converged", tol);
    if (markov)
        print_chain(f, m, p, p0, w);
    for (size_t i = 0; i < k; i++) {
        lse_slds_get_a(m, i, a);
        lse_slds_get_b(m, i, b);
        lse_slds_get_cov(m, i, c);
        if (g->mean != NULL)
            unstandardize_mode(g, a, b, c);
        fprintf(f, "\nmode %zu: %s %.6g\n", i,
                markov ? "stationary probability" : "weight",
                gsl_vector_get(w, i));
        for (size_t r1 = 0; r1 < d; r1++)
            lsefit_print_row(f, r1 == 0 ? (l > 1 ? "A (lag 1..)" : "A") : "",
                      gsl_matrix_const_ptr(a, r1, 0), d * l, 1);
        lsefit_print_row(f, "b", b->data, d, b->stride);
        gsl_matrix *be = ne > 0 ? gsl_matrix_alloc(d, ne) : NULL;
        if (be != NULL && lse_slds_get_beta(m, i, be) == LSE_OK)
            for (size_t r1 = 0; r1 < d; r1++)
                lsefit_print_row(f, r1 == 0 ? "B" : "",
                                 gsl_matrix_const_ptr(be, r1, 0), ne, 1);
        gsl_matrix_free(be);
        for (size_t r1 = 0; r1 < d; r1++)
            lsefit_print_row(f, r1 == 0 ? "covariance" : "",
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

/* ------------------------------------------------------------------ */
/* lsefit slds SERIES.csv                                              */

/* Options of lsefit slds (and of segment, simulate) that not every fit
 * takes; a new option of the slds fit goes into fit_options and
 * slds_option (or, when every model's fit takes it, into lsefit_fit.c). */
enum {
    OPT_WEIGHTS = LSEFIT_FIT_OPT_MODEL,
    OPT_MODES,
    OPT_MARKOV,
    OPT_LAGS,
    OPT_SEQUENCE,
    OPT_LABELS,
    OPT_PROBA,
    OPT_EXACT,
    OPT_EXOG,
    OPT_SWITCHING,
    OPT_COLUMNS = LSEFIT_FIT_OPT_COLUMNS,
    OPT_IGNORE = LSEFIT_FIT_OPT_IGNORE,
    OPT_MISSING = LSEFIT_FIT_OPT_MISSING
};

static const struct option fit_options[] = {
    {"n-modes", required_argument, NULL, 'k'},
    {"markov", no_argument, NULL, OPT_MARKOV},
    {"lags", required_argument, NULL, OPT_LAGS},
    {"sequence", required_argument, NULL, OPT_SEQUENCE},
    LSEFIT_FIT_OPTIONS_MODEL,
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"missing", required_argument, NULL, LSEFIT_FIT_OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"modes", required_argument, NULL, OPT_MODES},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"proba", required_argument, NULL, OPT_PROBA},
    LSEFIT_FIT_OPTIONS_RUN,
    {"exact-sums", no_argument, NULL, OPT_EXACT},
    {"exog", required_argument, NULL, OPT_EXOG},
    {"switching", required_argument, NULL, OPT_SWITCHING},
    LSEFIT_FIT_OPTIONS_END};

/* --init names. The k-means++ start always runs Lloyd iterations until no
 * assignment changes (at most 100): it is a k-means clustering, so
 * scikit-learn's "kmeans" and "k-means++" name it too. */
static const lsefit_init_name slds_inits[] = {{"kmeans++", "kmeans++"},
                                              {"k-means++", "kmeans++"},
                                              {"kmeans", "kmeans++"},
                                              {"random", "random"},
                                              {NULL, NULL}};

static void slds_defaults(lsefit_fit *f)
{
    slds_own *s = f->own;
    s->opts = lse_slds_opts_default();
    s->cfg = lse_slds_config_default();
    f->cov = s->cfg.cov;
    LSEFIT_FIT_FROM_OPTS(f, s->opts);
}

static int slds_option(lsefit_fit *f, int c, const char *arg, char **argv)
{
    slds_own *s = f->own;
    switch (c) {
    case OPT_MARKOV:
        s->cfg.markov = 1;
        s->markov_given = 1;
        return LSEFIT_OK;
    case OPT_LAGS:
        s->lags_given = 1;
        return lsefit_opt_size("slds", "--lags", arg, 1, &s->cfg.lags);
    case OPT_SEQUENCE:
        f->data.sequence = arg;
        return LSEFIT_OK;
    case OPT_WEIGHTS:
        return lsefit_usage("slds", "--weights is not supported by slds "
                                    "(lse_slds_fit takes no sample weights)");
    case OPT_LABELS:
    case OPT_PROBA:
        return lsefit_usage("slds",
                            "'%s' is a gmm option; slds writes mode "
                            "posteriors with --modes FILE",
                            argv[optind - 1]);
    case OPT_MODES:
        s->modes = arg;
        return LSEFIT_OK;
    case OPT_EXACT:
        s->opts.exact_sums = 1;
        return LSEFIT_OK;
    case OPT_EXOG:
        s->exog = arg;
        return LSEFIT_OK;
    case OPT_SWITCHING:
        s->switching = arg;
        return LSEFIT_OK;
    default:
        return lsefit_opt_bad("slds", c, argv, fit_options);
    }
}

static int slds_check_mpi(const lsefit_fit *f)
{
    const slds_own *s = f->own;
    if (f->mpi && s->modes != NULL)
        return lsefit_usage("slds", "--modes is not written with --mpi (each "
                                    "process holds only its rows); run "
                                    "'lsefit slds segment' on the model");
    return LSEFIT_OK;
}

static int slds_finish(lsefit_fit *f)
{
    slds_own *s = f->own;
    if (f->data.missing == LSE_MISSING_KEEP)
        return lsefit_fail("--missing marginalize is not supported: the SLDS "
                           "library (lse_slds_fit) cannot fit rows with "
                           "missing values; use --missing drop");
    s->cfg.cov = f->cov;
    if ((s->exog != NULL || s->switching != NULL) &&
        (f->standardize || f->mpi))
        return lsefit_usage("slds", "--exog and --switching do not combine "
                                    "with %s (fit in data units on one "
                                    "process)",
                            f->standardize ? "--standardize" : "--mpi");
    if (s->exog != NULL && f->data.columns == NULL) {
        /* the series: every column but --ignore, --sequence and --exog */
        const int n = snprintf(s->ignore_buf, sizeof s->ignore_buf, "%s%s%s",
                               f->data.ignore ? f->data.ignore : "",
                               f->data.ignore ? "," : "", s->exog);
        if (n < 0 || (size_t)n >= sizeof s->ignore_buf)
            return lsefit_usage("slds", "--ignore and --exog lists are too "
                                        "long together (use --columns)");
        f->data.ignore = s->ignore_buf;
    }
    if (s->switching != NULL) {
        /* parts left out of the list are shared by the modes */
        unsigned sw = 0u;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", s->switching);
        for (char *t = strtok(buf, ","); t != NULL; t = strtok(NULL, ",")) {
            if (strcmp(t, "intercept") == 0)
                sw |= LSE_SLDS_SHARE_INTERCEPT;
            else if (strcmp(t, "ar") == 0)
                sw |= LSE_SLDS_SHARE_AR;
            else if (strcmp(t, "exog") == 0)
                sw |= LSE_SLDS_SHARE_EXOG;
            else if (strcmp(t, "variance") == 0)
                sw |= 8u;
            else if (strcmp(t, "all") == 0)
                sw |= 15u;
            else
                return lsefit_usage("slds",
                                    "--switching '%s': unknown part '%s' "
                                    "(intercept, ar, exog, variance or all)",
                                    s->switching, t);
        }
        s->cfg.shared = ~sw & (LSE_SLDS_SHARE_INTERCEPT | LSE_SLDS_SHARE_AR |
                               (s->exog != NULL ? LSE_SLDS_SHARE_EXOG : 0u));
        if (!(sw & 8u)) {
            if (f->cov_given && f->cov != LSE_COV_TIED)
                return lsefit_usage("slds",
                                    "--switching without 'variance' shares "
                                    "the noise covariance (tied), but "
                                    "--covariance is '%s'",
                                    lse_gmm_cov_name(f->cov));
            s->cfg.cov = f->cov = LSE_COV_TIED;
        }
    }
    s->opts.init = f->init_file                      ? LSE_SLDS_INIT_GIVEN
                   : strcmp(f->init, "random") == 0 ? LSE_SLDS_INIT_RANDOM
                                                    : LSE_SLDS_INIT_KMEANSPP;
    return LSEFIT_OK;
}

static size_t slds_outputs(const lsefit_fit *f, lsefit_path *out)
{
    const slds_own *s = f->own;
    out[0] = (lsefit_path){s->modes, "--modes"};
    return 1;
}

/* --init FILE: take K, switching, lags and covariance type from it. */
static int slds_restart(lsefit_fit *f)
{
    slds_own *s = f->own;
    const lse_slds *m = f->start.m;
    const size_t k = lse_slds_n_modes(m);
    if (f->k_given && f->kmin != k)
        return lsefit_fail("--init %s: the model has n_modes = %zu but -k is "
                           "%zu",
                           f->init, k, f->kmin);
    if (s->markov_given && !lse_slds_is_markov(m))
        return lsefit_fail("--init %s: the model is a mixture, not --markov",
                           f->init);
    if (s->lags_given && s->cfg.lags != lse_slds_lags(m))
        return lsefit_fail("--init %s: the model has %zu lags but --lags is "
                           "%zu",
                           f->init, lse_slds_lags(m), s->cfg.lags);
    if (f->cov_given && s->cfg.cov != lse_slds_cov_type(m))
        return lsefit_fail("--init %s: the model has '%s' covariances but "
                           "--covariance is '%s'",
                           f->init, lse_gmm_cov_name(lse_slds_cov_type(m)),
                           lse_gmm_cov_name(s->cfg.cov));
    if (f->standardize && f->start.mean == NULL)
        return lsefit_fail("--init %s: the model was not fit with "
                           "--standardize, so it cannot restart a "
                           "standardized fit",
                           f->init);
    if ((lse_slds_n_exog(m) > 0) != (s->exog != NULL))
        return lsefit_fail("--init %s: the model has %zu exogenous "
                           "regressors; give the same with --exog",
                           f->init, lse_slds_n_exog(m));
    if (s->switching != NULL && s->cfg.shared != lse_slds_shared(m))
        return lsefit_fail("--init %s: the model's switching parts differ "
                           "from --switching %s",
                           f->init, s->switching);
    s->cfg.shared = lse_slds_shared(m);
    f->kmin = f->kmax = k;
    s->cfg.markov = lse_slds_is_markov(m);
    s->cfg.lags = lse_slds_lags(m);
    s->cfg.cov = f->cov = lse_slds_cov_type(m);
    return LSEFIT_OK;
}

static size_t slds_lags(const lsefit_fit *f)
{
    const slds_own *s = f->own;
    return s->cfg.lags;
}

/* --exog LIST: the regressors, read from the same file with the same
 * row policy, joined after the series' columns (the library's layout:
 * d values, then p regressors). */
static int load_exog(lsefit_fit *f)
{
    slds_own *s = f->own;
    lsefit_data_opts o = f->data;
    o.columns = s->exog;
    o.ignore = NULL;
    o.weights = NULL;
    o.sequence = NULL;
    o.model_names = NULL;
    o.n_model_names = 0;
    lsefit_data e;
    int rc = lsefit_data_load(&o, &e);
    if (rc != LSEFIT_OK)
        return rc;
    lsefit_data *d = &f->d;
    for (size_t i = 0; rc == LSEFIT_OK && i < d->d; i++)
        for (size_t j = 0; j < e.d; j++)
            if (d->cols[i] == e.cols[j])
                rc = lsefit_usage("slds",
                                  "--exog column '%s' is also a column of "
                                  "the series (leave it out with --ignore "
                                  "or --columns)",
                                  e.names[j]);
    if (rc == LSEFIT_OK && e.x->size1 != d->x->size1)
        rc = lsefit_fail("%s: --exog %s keeps %zu rows but the series %zu "
                         "(missing values: use --missing error)",
                         f->data.path, s->exog, e.x->size1, d->x->size1);
    const size_t n = d->x->size1, dd = d->d, p = e.d;
    gsl_matrix *x = rc == LSEFIT_OK ? gsl_matrix_alloc(n, dd + p) : NULL;
    size_t *cols = rc == LSEFIT_OK ? malloc((dd + p) * sizeof *cols) : NULL;
    const char **names =
        rc == LSEFIT_OK ? malloc((dd + p) * sizeof *names) : NULL;
    if (rc == LSEFIT_OK && (x == NULL || cols == NULL || names == NULL))
        rc = lsefit_fail("out of memory");
    if (rc == LSEFIT_OK) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < dd + p; j++)
                gsl_matrix_set(x, i, j,
                               j < dd ? gsl_matrix_get(d->x, i, j)
                                      : gsl_matrix_get(e.x, i, j - dd));
        for (size_t j = 0; j < dd + p; j++) {
            cols[j] = j < dd ? d->cols[j] : e.cols[j - dd];
            /* the same file: the series' table holds the name too */
            names[j] = j < dd ? d->names[j]
                              : lse_table_column_name(d->table, e.cols[j - dd]);
        }
        gsl_matrix_free(d->x);
        free(d->cols);
        free(d->names);
        d->x = x;
        d->cols = cols;
        d->names = names;
        d->d = dd + p;
        s->cfg.n_exog = p;
        x = NULL;
        cols = NULL;
        names = NULL;
    }
    gsl_matrix_free(x);
    free(cols);
    free(names);
    lsefit_data_free(&e);
    return rc;
}

/* The rows and sequences of the whole series, for the summary. */
static int slds_loaded(lsefit_fit *f)
{
    slds_own *s = f->own;
    const lsefit_data *data = &f->d;
    const size_t h = lsefit_mpi_context_rows(f->comm);
    s->n_rows = f->comm != NULL ? lsefit_mpi_total_rows(f->comm)
                                : data->x->size1;
    s->n_seq = lsefit_mpi_is_root(f->comm) ? 1 : 0;
    for (size_t i = h > 0 ? h : 1; data->seq != NULL && i < data->x->size1;
         i++)
        s->n_seq += data->seq[i] != data->seq[i - 1];
    if (f->comm != NULL)
        return lsefit_mpi_sum_size(f->comm, &s->n_seq);
    return s->exog != NULL ? load_exog(f) : LSEFIT_OK;
}

static void slds_prepare(lsefit_fit *f)
{
    slds_own *s = f->own;
    LSEFIT_FIT_TO_OPTS(f, s->opts);
    s->opts.progress = progress_cb;
    s->opts.user = &f->prog;
    lsefit_mpi_slds_opts(f->comm, &s->opts);
}

static int slds_create(lsefit_fit *f, size_t k, void **m)
{
    const slds_own *s = f->own;
    lse_slds_config cfg = s->cfg;
    cfg.n_modes = k;
    cfg.dim = f->d.d - cfg.n_exog;
    lse_slds *model = NULL;
    lse_error err;
    if (lse_slds_new(&cfg, &model, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    *m = model;
    return LSEFIT_OK;
}

/* --mpi: the library counts the steps of every process */
static int slds_before_fit(lsefit_fit *f, void *m)
{
    return f->comm != NULL ? LSEFIT_OK : check_steps(m, &f->d, f->kmax);
}

static lse_status slds_fit(lsefit_fit *f, void *m, lse_error *err)
{
    const slds_own *s = f->own;
    return lse_slds_fit(m, f->d.x, f->d.seq, &s->opts, err);
}

static int slds_write_rows(lsefit_fit *f, const lsefit_model_file *back)
{
    const slds_own *s = f->own;
    if (s->modes == NULL)
        return LSEFIT_OK;
    double ll = 0.0;
    size_t n_steps = 0;
    return write_modes(s->modes, back->m, &f->d, &ll, &n_steps);
}

static int slds_summary(const lsefit_fit *f, FILE *out,
                        const lsefit_model_file *back,
                        const lsefit_fit_result *r)
{
    return print_summary(out, back, r, &f->d, f->data.path, f->tol);
}

static const char *const slds_subcommands[] = {"segment", "simulate"};

static const lsefit_model slds_model = {
    .name = "slds",
    .data_word = "SERIES.csv",
    .data_role = "the series",
    .k_noun = "modes",
    .k_example = "1:4",
    .per_key = "loglik_per_step",
    .subcommands = slds_subcommands,
    .n_subcommands = 2,
    .inits = slds_inits,
    .options = fit_options,
    .help = help_fit,
    LSEFIT_MODEL_STEPS(slds),
    .lags = slds_lags,
    .loaded = slds_loaded,
    .before_fit = slds_before_fit,
};


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

/* --sequence COLUMN; --filtered (segment only). */
static int segment_option(void *user, int c, const char *arg,
                          lsefit_data_opts *dopt)
{
    const int summary = *(const int *)user;
    if (c == OPT_SEQUENCE) {
        dopt->sequence = arg;
        return LSEFIT_OK;
    }
    /* OPT_PROBA: --filtered */
    if (summary)
        return lsefit_usage("slds summary",
                            "option '--filtered' belongs to 'lsefit slds "
                            "segment'; summary prints the parameters");
    modes_filtered = 1;
    return LSEFIT_OK;
}

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
            /* the library's exog<j> is the regressor's column name */
            unsigned j = 0;
            int len = 0;
            if (sscanf(names[i], "exog%u%n", &j, &len) == 1 && j >= 1 &&
                j <= lse_slds_n_exog(m))
                fprintf(b.f, "%s%s,", data->names[lse_slds_dim(m) + j - 1],
                        names[i] + len);
            else
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
    const char *output = "-", *model_path = NULL;
    const lsefit_query q = {cmd, segment_options, "SERIES.csv",
                            segment_option, (void *)&summary};
    int help = 0;
    int rc =
        lsefit_query_parse(&q, argc, argv, &dopt, &model_path, &output, &help);
    if (help) {
        if (summary)
            help_summary(stdout);
        else
            help_segment(stdout);
        return LSEFIT_OK;
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (dopt.missing == LSE_MISSING_KEEP)
        return lsefit_fail("--missing marginalize is not supported: the SLDS "
                           "library cannot use rows with missing values; use "
                           "--missing drop");
    {
        const lsefit_path in[] = {{model_path, "the model"},
                                  {dopt.path, "the series"}};
        const lsefit_path out[] = {{output, "-o"}};
        rc = lsefit_plan(in, 2, out, 1);
        if (rc != LSEFIT_OK)
            return rc;
    }
    lsefit_model_file g;
    lsefit_data data = {0};
    rc = lsefit_model_data(&slds_model, model_path, &dopt, &g, &data);
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
    lsefit_model_file_free(&slds_model, &g);
    return rc;
}

/* ------------------------------------------------------------------ */
/* lsefit slds simulate MODEL.json -T N                                */

/* simulate --exog-file FILE: the file of the regressors' values and the
 * model file (for the regressors' names), found in main */
static const char *sim_exog_file, *sim_model_path;

/* The first n rows of the model's regressor columns of sim_exog_file into
 * x's last p columns. */
static lse_status read_sim_exog(const lse_slds *m, gsl_matrix *x,
                                lse_error *err)
{
    static const char fn[] = "slds simulate";
    const size_t d = lse_slds_dim(m), p = lse_slds_n_exog(m), n = x->size1;
    if (sim_exog_file == NULL)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "the model has %zu exogenous regressor%s: give "
                             "their values with --exog-file FILE",
                             p, p == 1 ? "" : "s");
    lse_slds *mm = NULL;
    char **names = NULL;
    lse_status st = lse_slds_load(sim_model_path, &mm, &names, err);
    lse_slds_free(mm);
    if (st != LSE_OK)
        return st;
    char cols[1024] = "";
    size_t len = 0;
    for (size_t j = 0; j < p && len < sizeof cols; j++)
        len += (size_t)snprintf(cols + len, sizeof cols - len, "%s%s",
                                j ? "," : "", names[d + j]);
    free(names);
    if (len >= sizeof cols)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "the regressors' names are too long");
    lsefit_data_opts o = {0};
    o.path = sim_exog_file;
    o.columns = cols;
    lsefit_data e;
    if (lsefit_data_load(&o, &e) != LSEFIT_OK)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "--exog-file %s: cannot read the columns %s",
                             sim_exog_file, cols);
    if (e.x->size1 < n) {
        st = lse_error_set(err, LSE_EINVAL, fn,
                           "--exog-file %s has %zu rows, fewer than -T %zu",
                           sim_exog_file, e.x->size1, n);
    } else {
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < p; j++)
                gsl_matrix_set(x, i, d + j, gsl_matrix_get(e.x, i, j));
    }
    lsefit_data_free(&e);
    return st;
}

static lse_status slds_draw(const void *m, size_t n, unsigned long seed,
                            gsl_matrix *x, size_t *modes, lse_error *err)
{
    if (lse_slds_n_exog(m) > 0) {
        const lse_status st = read_sim_exog(m, x, err);
        if (st != LSE_OK)
            return st;
    }
    return lse_slds_simulate(m, n, seed, x, modes, err);
}

/* lsefit slds simulate: take --exog-file FILE out of argv (the shared
 * draw command does not know it) and note the model file, the first
 * argument that is neither an option nor an option's value. */
static int take_exog_file(int argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--exog-file") == 0 && i + 1 < argc) {
            sim_exog_file = argv[++i];
            continue;
        }
        if (strncmp(argv[i], "--exog-file=", 12) == 0) {
            sim_exog_file = argv[i] + 12;
            continue;
        }
        argv[out++] = argv[i];
    }
    argv[out] = NULL;
    static const char *const with_value[] = {
        "-T", "--length", "--seed", "-o", "--output", "--modes"};
    for (int i = 1; i < out; i++) {
        int skip = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            skip |= strcmp(argv[i], with_value[k]) == 0;
        if (skip)
            i++;
        else if (argv[i][0] != '-' && sim_model_path == NULL)
            sim_model_path = argv[i];
    }
    return out;
}

static const lsefit_draw slds_simulate = {
    .cmd = "slds simulate",
    .count = 'T',
    .count_long = "length",
    .count_what = "the length of the series",
    .labels_opt = "--modes",
    .labels_column = "mode",
    .help = help_simulate,
    .draw = slds_draw,
};

int lsefit_slds_main(int argc, char **argv)
{
    if (lsefit_lslds_wanted(argc, argv))
        return lsefit_lslds_main(argc, argv);
    if (argc >= 2 && (strcmp(argv[1], "segment") == 0 ||
                      strcmp(argv[1], "summary") == 0))
        return segment_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "simulate") == 0)
        return lsefit_draw_main(&slds_model, &slds_simulate,
                                take_exog_file(argc - 1, argv + 1), argv + 1);
    if (argc >= 2 && strcmp(argv[1], "plot") == 0) /* lsefit_plot.c */
        return lsefit_slds_plot_main(argc - 1, argv + 1);
    slds_own own; /* lsefit slds SERIES.csv ...: a fit */
    memset(&own, 0, sizeof own);
    return lsefit_fit_main(&slds_model, &own, argc, argv);
}
