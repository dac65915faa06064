/* lsefit slds --latent-dim D: the switching LDS with latent states
 * (lse_lslds, models/lslds.h). The fit runs on the shared pipeline
 * (lsefit_fit.c) with the lslds_model table: the latent dimension is the
 * second range next to K, selection by BIC on the ELBO, AIC or the
 * held-out log p(y) (--select heldout), and the model file keeps the
 * latent schema ("model": "slds-latent"). segment and score read their
 * options with lsefit_query_parse, simulate is an lsefit_draw_main draw.
 * Reached from lsefit_slds_main when --latent-dim is given or the model
 * file of a subcommand says "slds-latent" (lsefit_lslds_wanted). Data are
 * used in their own units (no --standardize). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit_cmd.h"
#include "lsefit_fit.h"
#include "lsefit_plot.h"

static const char *CMD = "slds";

static void help(FILE *f)
{
    const lse_lslds_opts d = lse_lslds_opts_default();
    fprintf(f,
            "Usage: lsefit slds SERIES.csv -k K --latent-dim D [options]\n"
            "       lsefit slds segment MODEL.json SERIES.csv [options]\n"
            "       lsefit slds score MODEL.json SERIES.csv [options]\n"
            "       lsefit slds simulate MODEL.json -T N [options]\n"
            "\n"
            "Switching linear dynamical system with latent states (structured\n"
            "variational EM; docs/models/slds.md). The fit writes the model\n"
            "file (-o; without it the model is printed); segment prints per\n"
            "row the mode posteriors p0..p(K-1), the most likely mode, the\n"
            "Viterbi path of q(z) (Markov; the mode for a mixture), the\n"
            "default segmentation 'path' (the path of q(z) with the most\n"
            "rows expected right; the mode when every transition is\n"
            "possible) and the smoothed latent means x0..x(D-1) (and\n"
            "variances v0.. with --variances); score prints the ELBO and an\n"
            "importance-sampled log p(y) with its standard error; simulate\n"
            "draws (z, x, y).\n"
            "\n"
            "Options of the fit (the others of 'lsefit slds --help' do not\n"
            "apply):\n"
            "  -k, --n-modes K|A:B     modes; a range fits each (--select)\n"
            "  --latent-dim D|A:B      latent dimension (D <= columns)\n"
            "  --select CRIT           bic (default; BIC on the ELBO), aic or\n"
            "                          heldout (log p(y) of --validation)\n"
            "  --validation FILE       held-out series (scored for every fit)\n"
            "  --samples N             importance samples (default 1000)\n"
            "  --markov                Markov switching (default: mixture)\n"
            "  --emission E            shared (default) or per-mode C, d, R\n"
            "  --lags L                latent lags: x_t depends on x_{t-1}..\n"
            "                          x_{t-L} (1; every sequence needs more\n"
            "                          than L rows)\n"
            "  --fit-initial           fit the initial-state mean and\n"
            "                          covariance too (default: kept at the\n"
            "                          spread of the states)\n"
            "  --n-init N              initializations, best ELBO kept (%zu)\n"
            "  --max-iter N            EM iterations (%zu; 0: the start after\n"
            "                          one E-step)\n"
            "  --tol X                 stop when the ELBO gains <= X per row\n"
            "                          (%g)\n"
            "  --reg-covar X           added to the diagonals of Q, P0, R (%g)\n"
            "  --seed S                random seed (%lu)\n"
            "  --columns LIST, --ignore LIST, --sequence COLUMN\n"
            "  --missing POLICY        error (default), drop or marginalize\n"
            "%s"
            "  -o, --output FILE       the model file (\"-\": stdout)\n"
            "  -q, --quiet; -v, --verbose (the latent fit prints no\n"
            "                          per-iteration lines); -h, --help\n"
            "  --mpi, --shards PATTERN as for the observed fit (docs/mpi.md)\n"
            "segment, score: --columns, --ignore, --sequence, --missing, the\n"
            "  reading options, -o, -q; segment --variances; score --samples\n"
            "  N, --seed S. simulate: -T, --length N; --seed S; -o FILE;\n"
            "  --modes FILE (the mode of each row, also a column).\n",
            d.n_init, d.max_iter, d.tol, d.reg, d.seed, LSEFIT_DATA_HELP);
}

/* Options of the latent fit and its subcommands besides those of every
 * fit; OPT_NA: an option of the observed-state fit, refused. */
enum {
    OPT_LATENT = LSEFIT_FIT_OPT_MODEL,
    OPT_MARKOV,
    OPT_SEQUENCE,
    OPT_EMIS,
    OPT_FIT0,
    OPT_VALID,
    OPT_SAMPLES,
    OPT_VAR,
    OPT_SEED,
    OPT_NA,
    OPT_FITONLY,
    OPT_LAGS,
    OPT_LAGSFILE
};

static const struct option fit_options[] = {
    {"n-modes", required_argument, NULL, 'k'},
    {"latent-dim", required_argument, NULL, OPT_LATENT},
    {"markov", no_argument, NULL, OPT_MARKOV},
    {"sequence", required_argument, NULL, OPT_SEQUENCE},
    {"emission", required_argument, NULL, OPT_EMIS},
    {"fit-initial", no_argument, NULL, OPT_FIT0},
    {"n-init", required_argument, NULL, LSEFIT_FIT_OPT_NINIT},
    {"max-iter", required_argument, NULL, LSEFIT_FIT_OPT_MAXITER},
    {"tol", required_argument, NULL, LSEFIT_FIT_OPT_TOL},
    {"reg-covar", required_argument, NULL, LSEFIT_FIT_OPT_REG},
    {"seed", required_argument, NULL, LSEFIT_FIT_OPT_SEED},
    {"columns", required_argument, NULL, LSEFIT_FIT_OPT_COLUMNS},
    {"ignore", required_argument, NULL, LSEFIT_FIT_OPT_IGNORE},
    {"missing", required_argument, NULL, LSEFIT_FIT_OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"select", required_argument, NULL, LSEFIT_FIT_OPT_SELECT},
    {"validation", required_argument, NULL, OPT_VALID},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"mpi", no_argument, NULL, LSEFIT_FIT_OPT_MPI},
    {"shards", required_argument, NULL, LSEFIT_FIT_OPT_SHARDS},
    {"covariance", required_argument, NULL, OPT_NA},
    {"init", required_argument, NULL, OPT_NA},
    {"init-file", required_argument, NULL, OPT_NA},
    {"standardize", no_argument, NULL, OPT_NA},
    {"log-json", required_argument, NULL, OPT_NA},
    {"lags", required_argument, NULL, OPT_LAGS},
    {"weights", required_argument, NULL, OPT_NA},
    {"modes", required_argument, NULL, OPT_NA},
    {"exact-sums", no_argument, NULL, OPT_NA},
    {"exog", required_argument, NULL, OPT_NA},
    {"switching", required_argument, NULL, OPT_NA},
    LSEFIT_FIT_OPTIONS_END};

/* The latent fit's own options and state (lsefit_fit.own). */
typedef struct lslds_own {
    int markov, per_mode, fit0;
    size_t lags; /* --lags L (1) */
    size_t samples;
    const char *valid; /* --validation FILE */
    lse_lslds_opts opts;
    unsigned char *mask, *vmask; /* NaN cells of the data, --validation */
    lsefit_data vdata;
    size_t n_rows; /* of every process */
    double elbo;   /* of the last fit */
    size_t n_iter;
} lslds_own;

/* ------------------------------------------------------------------ */
/* Model files                                                         */

static lse_status lslds_from_json(const lse_json *doc, const char *path,
                                  void **m, char ***names, lse_error *err)
{
    lse_lslds_params *p = NULL;
    const lse_status st = lse_lslds_from_json(doc, path, &p, names, err);
    *m = p;
    return st;
}
static size_t lslds_dim(const void *m)
{
    return ((const lse_lslds_params *)m)->N;
}
static void lslds_free(void *m) { lse_lslds_params_free(m); }
static lse_status lslds_to_json(const void *m, const char *const *names,
                                lse_json *doc, lse_error *err)
{
    return lse_lslds_to_json(m, names, doc, err);
}

/* The observed mask of x (NaN = missing); NULL when all are observed. */
static int make_mask(const gsl_matrix *x, unsigned char **mask)
{
    *mask = NULL;
    int any = 0;
    for (size_t i = 0; i < x->size1 * x->size2 && !any; i++)
        any = isnan(x->data[(i / x->size2) * x->tda + i % x->size2]);
    if (!any)
        return LSEFIT_OK;
    *mask = malloc(x->size1 * x->size2);
    if (*mask == NULL)
        return lsefit_fail("out of memory");
    for (size_t t = 0; t < x->size1; t++)
        for (size_t j = 0; j < x->size2; j++)
            (*mask)[t * x->size2 + j] = !isnan(gsl_matrix_get(x, t, j));
    return LSEFIT_OK;
}

/* Variational inference at fixed parameters: q(x), then q(z) and q(x) in
 * turn until the ELBO stops rising. */
static int infer(const lse_lslds_params *p, const lsefit_data *d,
                 const unsigned char *mask, lse_lslds_post *q, double *elbo)
{
    lse_error err;
    gsl_matrix *es = NULL; /* emission scores: per-mode emissions */
    if (p->per_mode_emission &&
        (es = gsl_matrix_alloc(d->x->size1, p->K)) == NULL)
        return lsefit_fail("out of memory");
    int rc = LSEFIT_OK;
    if (lse_lslds_update_x(p, d->x, mask, d->seq, q, NULL, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    double prev = -INFINITY;
    for (size_t it = 0; rc == LSEFIT_OK && it < 500; it++) {
        if ((es != NULL && lse_lslds_emission_scores(p, d->x, mask, q, es,
                                                     &err) != LSE_OK) ||
            lse_lslds_update_z_with(p, d->seq, es, q, &err) != LSE_OK ||
            lse_lslds_update_x(p, d->x, mask, d->seq, q, NULL, &err) != LSE_OK ||
            lse_lslds_elbo(p, d->x, mask, d->seq, q, elbo, &err) != LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
        else if (*elbo - prev <= 1e-10 * fabs(*elbo))
            break;
        prev = *elbo;
    }
    gsl_matrix_free(es);
    return rc;
}

/* Free parameters of a (K, D, N) model: A, b, Q per mode, C, d, R, the
 * initial state (with --fit-initial), the mode probabilities, less the
 * D^2 + D of an affine
 * change of the latent coordinates (which leaves p(y) unchanged). */
static double n_params(size_t K, size_t D, size_t N, size_t L, int markov,
                       int per_mode, int fit0)
{
    const double k = (double)K, d = (double)D, n = (double)N;
    return k * (d * d * (double)L + d + d * (d + 1) / 2) +
           (per_mode ? k : 1.0) * (n * d + 2 * n) +
           (fit0 ? d + d * (d + 1) / 2 : 0.0) + (k - 1) +
           (markov ? k * (k - 1) : 0.0) - (d * d + d);
}

/* ------------------------------------------------------------------ */
/* The fit: the steps of the lslds_model table                         */

static void lslds_defaults(lsefit_fit *f)
{
    lslds_own *s = f->own;
    s->opts = lse_lslds_opts_default();
    s->samples = 1000;
    s->lags = 1;
    f->n_init = s->opts.n_init;
    f->max_iter = s->opts.max_iter;
    f->tol = s->opts.tol;
    f->reg_covar = s->opts.reg;
    f->seed = s->opts.seed;
}

/* The option word of the current getopt_long entry ("--covariance"). */
static int opt_word(char **argv, char *buf, size_t size)
{
    const char *a = argv[optind - 1];
    if (strncmp(a, "--", 2) != 0 && optind >= 2)
        a = argv[optind - 2]; /* the value of "--covariance full" */
    snprintf(buf, size, "%s", a);
    buf[strcspn(buf, "=")] = '\0';
    return 0;
}

static int lslds_option(lsefit_fit *f, int c, const char *arg, char **argv)
{
    lslds_own *s = f->own;
    char word[64];
    switch (c) {
    case OPT_LATENT:
        return lsefit_opt_range(CMD, "--latent-dim", "D", arg, &f->smin,
                                &f->smax);
    case OPT_MARKOV:
        s->markov = 1;
        return LSEFIT_OK;
    case OPT_SEQUENCE:
        f->data.sequence = arg;
        return LSEFIT_OK;
    case OPT_EMIS:
        if (strcmp(arg, "shared") != 0 && strcmp(arg, "per-mode") != 0)
            return lsefit_usage(CMD, "--emission %s: use shared or per-mode",
                                arg);
        s->per_mode = arg[0] == 'p';
        return LSEFIT_OK;
    case OPT_FIT0:
        s->fit0 = 1;
        return LSEFIT_OK;
    case OPT_VALID:
        s->valid = arg;
        return LSEFIT_OK;
    case OPT_SAMPLES:
        return lsefit_opt_size(CMD, "--samples", arg, 2, &s->samples);
    case OPT_LAGS:
        if (lsefit_opt_size(CMD, "--lags", arg, 1, &s->lags) != LSEFIT_OK)
            return LSEFIT_USAGE;
        if (s->lags > 64)
            return lsefit_usage(CMD, "--lags %s: use 1..64", arg);
        return LSEFIT_OK;
    default: /* OPT_NA */
        opt_word(argv, word, sizeof word);
        return lsefit_usage(CMD,
                            "'%s' is an option of the observed-state fit; it "
                            "does not apply with --latent-dim",
                            word);
    }
}

static int lslds_check_mpi(const lsefit_fit *f)
{
    const lslds_own *s = f->own;
    if (s->valid != NULL && f->mpi)
        return lsefit_usage(CMD, "--validation is not read under --mpi (use "
                                 "--select bic)");
    return LSEFIT_OK;
}

static int lslds_finish(lsefit_fit *f)
{
    const lslds_own *s = f->own;
    if (f->smin == 0)
        return lsefit_usage(CMD, "give --latent-dim D");
    if (strcmp(f->select, "heldout") == 0 && s->valid == NULL)
        return lsefit_usage(CMD, "--select heldout needs --validation "
                                 "FILE.csv");
    return LSEFIT_OK;
}

static size_t lslds_inputs(const lsefit_fit *f, lsefit_path *in)
{
    const lslds_own *s = f->own;
    in[0] = (lsefit_path){s->valid, "--validation"};
    return 1;
}

/* --validation FILE.csv: its columns by the data's names, and its mask. */
static int load_validation(lsefit_fit *f)
{
    lslds_own *s = f->own;
    const lsefit_data *data = &f->d;
    lsefit_data_opts vo = f->data;
    vo.path = s->valid;
    vo.model_names = (const char *const *)data->names;
    vo.n_model_names = data->d;
    vo.model_path = f->data.path;
    int rc = lsefit_data_load(&vo, &s->vdata);
    if (rc == LSEFIT_OK && s->vdata.d != data->d)
        rc = lsefit_fail("%s: %zu columns but %s has %zu (choose them with "
                         "--columns)",
                         s->valid, s->vdata.d, f->data.path, data->d);
    if (rc == LSEFIT_OK)
        rc = make_mask(s->vdata.x, &s->vmask);
    return rc;
}

/* After the common checks: D against the columns, the masks. */
static int lslds_check(lsefit_fit *f)
{
    lslds_own *s = f->own;
    const lsefit_data *d = &f->d;
    s->n_rows = f->comm != NULL ? lsefit_mpi_total_rows(f->comm) : d->x->size1;
    if (f->smax > d->d)
        return lsefit_usage(CMD,
                            "--latent-dim %zu is more than the %zu data "
                            "column%s (the PCA start needs D <= columns)",
                            f->smax, d->d, d->d == 1 ? "" : "s");
    for (size_t t = 0, t0 = 0; s->lags > 1 && f->comm == NULL &&
                               t < d->x->size1;
         t++)
        if (t + 1 == d->x->size1 ||
            (d->seq != NULL && d->seq[t + 1] != d->seq[t])) {
            if (t + 1 - t0 <= s->lags)
                return lsefit_usage(CMD,
                                    "--lags %zu: the sequence of data rows "
                                    "%zu..%zu has only %zu rows (each needs "
                                    "more than %zu; use fewer lags)",
                                    s->lags, t0 + 1, t + 1, t + 1 - t0,
                                    s->lags);
            t0 = t + 1;
        }
    int rc = make_mask(d->x, &s->mask);
    if (rc == LSEFIT_OK && s->valid != NULL)
        rc = load_validation(f);
    return rc;
}

/* The fit's options: the command line's, and (mpi) the reduction over
 * the processes. */
static void lslds_prepare(lsefit_fit *f)
{
    lslds_own *s = f->own;
    lse_lslds_opts *o = &s->opts;
    o->n_init = f->n_init;
    o->max_iter = f->max_iter;
    o->tol = f->tol;
    o->reg = f->reg_covar;
    o->seed = f->seed;
    o->fix_initial = !s->fit0;
    if (f->comm != NULL) {
        o->reduce = lsefit_mpi_reduce;
        o->reduce_user = f->comm;
        o->rank = (size_t)lsefit_mpi_rank(f->comm);
        o->n_ranks = (size_t)lsefit_mpi_size(f->comm);
        o->context_rows = lsefit_mpi_context_rows(f->comm);
    }
}

/* --mpi: one context row (the row before this process's block) tells
 * whether the block continues a sequence */
static size_t lslds_lags(const lsefit_fit *f)
{
    (void)f;
    return 1;
}

static int lslds_create(lsefit_fit *f, size_t k, void **m)
{
    const lslds_own *s = f->own;
    lse_lslds_params *p = NULL;
    lse_error err;
    const int ok =
        lse_lslds_params_new(k, f->sub, f->d.d, s->markov, &p, &err) ==
            LSE_OK &&
        lse_lslds_params_set_lags(p, s->lags, &err) == LSE_OK &&
        (!s->per_mode || lse_lslds_params_emission_per_mode(p, &err) == LSE_OK);
    *m = p;
    return ok ? LSEFIT_OK : lsefit_fail_lib(&err, NULL);
}

static lse_status lslds_fit(lsefit_fit *f, void *m, lse_error *err)
{
    lslds_own *s = f->own;
    return lse_lslds_fit(m, f->d.x, s->mask, f->d.seq, &s->opts, NULL,
                         &s->elbo, &s->n_iter, err);
}

/* The ELBO in place of the log-likelihood: BIC = -2 ELBO + p log T (an
 * upper bound of the BIC, looser where q fits worse), AIC likewise;
 * converged: stopped before --max-iter. */
static lsefit_fit_result lslds_result(const lsefit_fit *f, const void *m)
{
    const lslds_own *s = f->own;
    const lse_lslds_params *p = m;
    const double npar =
        n_params(p->K, p->D, p->N, p->lags, s->markov, s->per_mode, s->fit0);
    lsefit_fit_result r = {0};
    r.k = p->K;
    r.n_params = (size_t)npar;
    r.n_iter = s->n_iter;
    r.n_rows = s->n_rows;
    r.loglik = s->elbo;
    r.loglik_per = s->elbo / (double)s->n_rows;
    r.bic = -2.0 * s->elbo + npar * log((double)s->n_rows);
    r.aic = -2.0 * s->elbo + 2.0 * npar;
    r.converged = s->n_iter < f->max_iter;
    return r;
}

/* --validation: the held-out log p(y) (importance sampled) at the fit. */
static int lslds_scored(lsefit_fit *f, const void *m, lsefit_fit_result *r)
{
    const lslds_own *s = f->own;
    const lse_lslds_params *p = m;
    const lsefit_data *v = &s->vdata;
    if (s->valid == NULL)
        return LSEFIT_OK;
    lse_lslds_post *q = NULL;
    lse_error err;
    double e;
    if (lse_lslds_post_new(v->x->size1, p->K, p->D, &q, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    int rc = infer(p, v, s->vmask, q, &e);
    if (rc == LSEFIT_OK &&
        lse_lslds_log_marginal(p, v->x, s->vmask, v->seq, q, s->samples,
                               f->seed, &r->crit, &r->crit_se,
                               &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, s->valid);
    lse_lslds_post_free(q);
    return rc;
}

/* The latent model file: the parameters, then elbo, n_iter, n_params,
 * bic_elbo and (--validation) heldout_loglik. */
static int lslds_model_json(const lsefit_fit *f, const void *m,
                            const lsefit_fit_result *r, lse_json **out)
{
    const lslds_own *s = f->own;
    lse_error err;
    lse_json *doc = lse_json_new_object();
    *out = NULL;
    if (doc == NULL)
        return lsefit_fail("out of memory");
    if (lse_lslds_to_json(m, f->d.names, doc, &err) != LSE_OK ||
        lse_json_set_number(doc, "elbo", r->loglik, &err) != LSE_OK ||
        lse_json_set_integer(doc, "n_iter", (long long)r->n_iter, &err) !=
            LSE_OK ||
        lse_json_set_integer(doc, "n_params", (long long)r->n_params, &err) !=
            LSE_OK ||
        lse_json_set_number(doc, "bic_elbo", r->bic, &err) != LSE_OK ||
        (s->valid != NULL &&
         lse_json_set_number(doc, "heldout_loglik", r->crit, &err) != LSE_OK)) {
        lse_json_free(doc);
        return lsefit_fail_lib(&err, NULL);
    }
    *out = doc;
    return LSEFIT_OK;
}

/* A D x D block of rows (row-major at x) under a label. */
static void print_block(FILE *f, const char *label, const double *x,
                        size_t rows, size_t cols)
{
    for (size_t i = 0; i < rows; i++)
        lsefit_print_row(f, i == 0 ? label : "", x + i * cols, cols, 1);
}

/* The emission block of mode k (its own with per-mode emissions). */
static void print_emission(FILE *f, const lse_lslds_params *p, size_t k)
{
    const size_t N = p->N, D = p->D, o = p->per_mode_emission ? k * N : 0;
    print_block(f, "C", gsl_matrix_const_ptr(p->C, o, 0), N, D);
    lsefit_print_row(f, "d", p->d->data + o * p->d->stride, N, p->d->stride);
    lsefit_print_row(f, "R (diag)", p->r->data + o * p->r->stride, N,
                     p->r->stride);
}

/* Without -o: the model (data units) on stdout. */
static int lslds_summary(const lsefit_fit *f, FILE *out,
                         const lsefit_model_file *back,
                         const lsefit_fit_result *r)
{
    const lse_lslds_params *p = back->m;
    const size_t K = p->K, D = p->D, N = p->N;
    fprintf(out, "Latent switching LDS: K = %zu modes, %s, D = %zu, ", K,
            p->markov ? "Markov switching" : "mixture (independent modes)", D);
    if (p->lags > 1)
        fprintf(out, "%zu lags, ", p->lags);
    fprintf(out, "N = %zu (", N);
    for (size_t j = 0; j < N; j++)
        fprintf(out, "%s%s", j ? ", " : "", f->d.names[j]);
    fprintf(out, "), %s emission\n", p->per_mode_emission ? "per-mode" : "shared");
    fprintf(out, "data: %s, %zu rows\n", f->data.path, r->n_rows);
    fprintf(out, "ELBO %.10g (per row %.10g)\n", r->loglik, r->loglik_per);
    fprintf(out, "BIC %.10g  AIC %.10g  (on the ELBO; %zu parameters; lower "
                 "is better)\n",
            r->bic, r->aic, r->n_params);
    fprintf(out, "EM: %zu iteration%s, %s (tol %g)\n", r->n_iter,
            r->n_iter == 1 ? "" : "s",
            r->converged ? "converged" : "NOT converged", f->tol);
    if (!p->per_mode_emission) {
        fputs("\nemission y = C x + d + noise:\n", out);
        print_emission(out, p, 0);
    }
    fputs("\ninitial state:\n", out);
    lsefit_print_row(out, "mean", p->m0->data, D, p->m0->stride);
    print_block(out, "covariance", p->P0->data, D, D);
    if (p->markov) {
        fputs("\ntransition P(from row mode to column mode):\n", out);
        for (size_t i = 0; i < K; i++) {
            char label[32];
            snprintf(label, sizeof label, "from %zu", i);
            lsefit_print_row(out, label, gsl_matrix_const_ptr(p->trans, i, 0),
                             K, 1);
        }
    }
    for (size_t k = 0; k < K; k++) {
        fprintf(out, "\nmode %zu: %s %.6g\n", k,
                p->markov ? "initial probability" : "weight",
                gsl_vector_get(p->init, k));
        char al[32] = "A";
        if (p->lags > 1) /* the row blocks [A_1 ... A_L] */
            snprintf(al, sizeof al, "A_1..A_%zu", p->lags);
        print_block(out, al, gsl_matrix_const_ptr(p->A, k, 0), D, D * p->lags);
        lsefit_print_row(out, "b", gsl_matrix_const_ptr(p->b, k, 0), D, 1);
        print_block(out, "Q", gsl_matrix_const_ptr(p->Q, k, 0), D, D);
        if (p->per_mode_emission)
            print_emission(out, p, k);
    }
    return LSEFIT_OK;
}

static const char *const lslds_subcommands[] = {"segment", "score",
                                                "simulate"};

static const lsefit_model lslds_model = {
    .name = "slds",
    .data_word = "SERIES.csv",
    .data_role = "the series",
    .k_noun = "modes",
    .k_example = "1:4",
    .subcommands = lslds_subcommands,
    .n_subcommands = 3,
    .options = fit_options,
    .help = help,
    .no_standardize = 1,
    .reg_example = "1e-6",
    .file_model = "slds-latent",
    .fit_hint = " (try other -k, --latent-dim or --seed)",
    .sub_label = "D",
    .loglik_label = "ELBO",
    .select_own = "heldout",
    .crit_label = "held-out log p(y)",
    .from_json = lslds_from_json,
    .dim = lslds_dim,
    .free = lslds_free,
    .to_json = lslds_to_json,
    .defaults = lslds_defaults,
    .option = lslds_option,
    .check_mpi = lslds_check_mpi,
    .finish = lslds_finish,
    .inputs = lslds_inputs,
    .lags = lslds_lags,
    .check = lslds_check,
    .prepare = lslds_prepare,
    .create = lslds_create,
    .fit = lslds_fit,
    .result = lslds_result,
    .summary = lslds_summary,
    .scored = lslds_scored,
    .model_json = lslds_model_json,
};

/* ------------------------------------------------------------------ */
/* segment, score: a model file and a series                           */

static const struct option query_options[] = {
    {"columns", required_argument, NULL, LSEFIT_FIT_OPT_COLUMNS},
    {"ignore", required_argument, NULL, LSEFIT_FIT_OPT_IGNORE},
    {"sequence", required_argument, NULL, OPT_SEQUENCE},
    {"missing", required_argument, NULL, LSEFIT_FIT_OPT_MISSING},
    {"output", required_argument, NULL, 'o'},
    {"variances", no_argument, NULL, OPT_VAR},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"seed", required_argument, NULL, OPT_SEED},
    {"latent-dim", required_argument, NULL, OPT_FITONLY},
    {"mpi", no_argument, NULL, OPT_FITONLY},
    {"shards", required_argument, NULL, OPT_FITONLY},
    {"lags", required_argument, NULL, OPT_LAGSFILE},
    LSEFIT_DATA_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* The options of segment and score besides the shared ones. */
typedef struct query_own {
    const char *cmd;
    int score;
    int variances;
    size_t samples;
    unsigned long seed;
} query_own;

static int query_option(void *user, int c, const char *arg,
                        lsefit_data_opts *dopt)
{
    query_own *o = user;
    switch (c) {
    case OPT_SEQUENCE:
        dopt->sequence = arg;
        return LSEFIT_OK;
    case OPT_VAR:
        o->variances = 1;
        return o->score ? lsefit_usage(o->cmd, "--variances belongs to "
                                               "'lsefit slds segment'")
                        : LSEFIT_OK;
    case OPT_SAMPLES:
    case OPT_SEED:
        if (!o->score)
            return lsefit_usage(o->cmd, "--samples and --seed belong to "
                                        "'lsefit slds score'");
        return c == OPT_SEED
                   ? lsefit_opt_seed(o->cmd, arg, &o->seed)
                   : lsefit_opt_size(o->cmd, "--samples", arg, 2, &o->samples);
    case OPT_LAGSFILE:
        return lsefit_usage(o->cmd, "--lags is for the fit only (the model "
                                    "file gives the lags)");
    default: /* OPT_FITONLY */
        return lsefit_usage(o->cmd, "--latent-dim, --mpi and --shards are "
                                    "for the fit only (the model file gives "
                                    "D)");
    }
}

/* A model file, a series and the posterior at the file's parameters. */
typedef struct loaded {
    lsefit_model_file g;
    const lse_lslds_params *p;
    lsefit_data data;
    unsigned char *mask;
    lse_lslds_post *q;
    double elbo;
} loaded;

static void loaded_free(loaded *l)
{
    lsefit_model_file_free(&lslds_model, &l->g);
    lsefit_data_free(&l->data);
    free(l->mask);
    lse_lslds_post_free(l->q);
    memset(l, 0, sizeof *l);
}

/* Load MODEL.json and SERIES.csv, run VI at the model's parameters. */
static int load_and_infer(const char *model_path, lsefit_data_opts *dopt,
                          loaded *l)
{
    memset(l, 0, sizeof *l);
    lse_error err;
    int rc = lsefit_model_data(&lslds_model, model_path, dopt, &l->g,
                               &l->data);
    if (rc == LSEFIT_OK) {
        l->p = l->g.m;
        rc = make_mask(l->data.x, &l->mask);
    }
    if (rc == LSEFIT_OK &&
        lse_lslds_post_new(l->data.x->size1, l->p->K, l->p->D, &l->q, &err) !=
            LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = infer(l->p, &l->data, l->mask, l->q, &l->elbo);
    return rc;
}

/* The most likely mode path of q(z): Viterbi on the expected emission
 * scores with the model's log initial and transition probabilities
 * (Markov); the per-row argmax of q(z) for a mixture. */
static int viterbi_path(const loaded *l, size_t *path)
{
    const size_t T = l->data.x->size1, K = l->p->K;
    if (!l->p->markov) {
        for (size_t t = 0; t < T; t++) {
            path[t] = 0;
            for (size_t k = 1; k < K; k++)
                if (gsl_matrix_get(l->q->w, t, k) >
                    gsl_matrix_get(l->q->w, t, path[t]))
                    path[t] = k;
        }
        return LSEFIT_OK;
    }
    gsl_matrix *s = gsl_matrix_alloc(T, K), *logT = gsl_matrix_alloc(K, K);
    gsl_vector *logp0 = gsl_vector_alloc(K);
    size_t *starts = malloc(T * sizeof(size_t)), n_starts = 0;
    lse_error err;
    int rc = LSEFIT_OK;
    if (!s || !logT || !logp0 || !starts)
        rc = lsefit_fail("out of memory");
    if (rc == LSEFIT_OK) {
        for (size_t j = 0; j < K; j++) {
            gsl_vector_set(logp0, j, log(gsl_vector_get(l->p->init, j)));
            for (size_t k = 0; k < K; k++)
                gsl_matrix_set(logT, j, k, log(gsl_matrix_get(l->p->trans, j, k)));
        }
        for (size_t t = 1; l->data.seq != NULL && t < T; t++)
            if (l->data.seq[t] != l->data.seq[t - 1])
                starts[n_starts++] = t;
        gsl_matrix *es = l->p->per_mode_emission ? gsl_matrix_alloc(T, K) : NULL;
        if (l->p->per_mode_emission && es == NULL)
            rc = lsefit_fail("out of memory");
        else if (lse_lslds_scores(l->p, l->data.seq, l->q, s, &err) != LSE_OK ||
                 (es != NULL &&
                  (lse_lslds_emission_scores(l->p, l->data.x, l->mask, l->q, es,
                                             &err) != LSE_OK ||
                   gsl_matrix_add(s, es) != GSL_SUCCESS)) ||
                 lse_chain_viterbi(s, logp0, logT, starts, n_starts, path,
                                   &err) != LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
        gsl_matrix_free(es);
    }
    gsl_matrix_free(s);
    gsl_matrix_free(logT);
    gsl_vector_free(logp0);
    free(starts);
    return rc;
}

/* The segment table of l on b. */
static void print_segment(FILE *f, const loaded *l, const size_t *vit,
                          const size_t *mea, int variances)
{
    const size_t K = l->p->K, D = l->p->D;
    fprintf(f, "row");
    for (size_t k = 0; k < K; k++)
        fprintf(f, ",p%zu", k);
    fprintf(f, ",mode,viterbi,path");
    for (size_t i = 0; i < D; i++)
        fprintf(f, ",x%zu", i);
    for (size_t i = 0; variances && i < D; i++)
        fprintf(f, ",v%zu", i);
    fputc('\n', f);
    for (size_t t = 0; t < l->data.x->size1; t++) {
        fprintf(f, "%zu", l->data.rows[t] + 1);
        size_t best = 0;
        for (size_t k = 0; k < K; k++) {
            fprintf(f, ",%.17g", gsl_matrix_get(l->q->w, t, k));
            if (gsl_matrix_get(l->q->w, t, k) > gsl_matrix_get(l->q->w, t, best))
                best = k;
        }
        fprintf(f, ",%zu,%zu,%zu", best, vit[t], mea[t]);
        for (size_t i = 0; i < D; i++)
            fprintf(f, ",%.17g", gsl_matrix_get(l->q->mean, t, i));
        for (size_t i = 0; variances && i < D; i++)
            fprintf(f, ",%.17g", gsl_matrix_get(l->q->cov, t, i * D + i));
        fputc('\n', f);
    }
}

/* segment: the table; score: ELBO and log p(y). */
static int query_write(const loaded *l, const query_own *o, int score,
                       const char *output)
{
    const size_t T = l->data.x->size1;
    double est = NAN, se = NAN;
    size_t *vit = NULL, *mea = NULL;
    lse_error err;
    int rc = LSEFIT_OK;
    if (score &&
        lse_lslds_log_marginal(l->p, l->data.x, l->mask, l->data.seq, l->q,
                               o->samples, o->seed, &est, &se, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (!score) {
        vit = malloc(T * sizeof *vit);
        mea = malloc(T * sizeof *mea);
        rc = vit == NULL || mea == NULL ? lsefit_fail("out of memory")
                                        : viterbi_path(l, vit);
        if (rc == LSEFIT_OK &&
            lse_lslds_mea_path(l->p, l->data.seq, l->q, mea, &err) != LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
    }
    lsefit_buf b = {0};
    if (rc == LSEFIT_OK)
        rc = lsefit_buf_open(&b);
    if (rc == LSEFIT_OK) {
        if (score) {
            fprintf(b.f, "rows,elbo,elbo_per_row,loglik,loglik_se,"
                         "loglik_per_row\n");
            fprintf(b.f, "%zu,%.17g,%.17g,%.17g,%.17g,%.17g\n", T, l->elbo,
                    l->elbo / (double)T, est, se, est / (double)T);
        } else {
            print_segment(b.f, l, vit, mea, o->variances);
        }
        rc = lsefit_buf_write(&b, output);
    }
    if (rc == LSEFIT_OK && !score)
        lsefit_note("%zu rows: ELBO %.17g, per row %.17g", T, l->elbo,
                    l->elbo / (double)T);
    lsefit_buf_free(&b);
    free(vit);
    free(mea);
    return rc;
}

/* lsefit slds segment|score MODEL.json SERIES.csv [options] */
static int query_main(int argc, char **argv)
{
    const int score = strcmp(argv[0], "score") == 0;
    query_own o = {CMD, score, 0, 1000, 0}; /* messages: 'lsefit slds --help' */
    const lsefit_query q = {o.cmd, query_options, "SERIES.csv", query_option,
                            &o};
    lsefit_data_opts dopt = {0};
    const char *output = "-", *model_path = NULL;
    int help_given = 0;
    int rc = lsefit_query_parse(&q, argc, argv, &dopt, &model_path, &output,
                                &help_given);
    if (help_given) {
        help(stdout);
        return LSEFIT_OK;
    }
    if (rc != LSEFIT_OK)
        return rc;
    const lsefit_path in[] = {{model_path, "the model"},
                              {dopt.path, "the series"}};
    const lsefit_path out[] = {{output, "-o"}};
    rc = lsefit_plan(in, 2, out, 1);
    loaded l;
    memset(&l, 0, sizeof l);
    if (rc == LSEFIT_OK)
        rc = load_and_infer(model_path, &dopt, &l);
    if (rc == LSEFIT_OK)
        rc = query_write(&l, &o, score, output);
    loaded_free(&l);
    return rc;
}

/* ------------------------------------------------------------------ */
/* simulate: draw (z, x, y)                                            */

/* The draw: y in the model's columns, then the mode and x0..x(D-1). */
static lse_status lslds_draw(const void *m, size_t n, unsigned long seed,
                             gsl_matrix *out, size_t *z, lse_error *err)
{
    const lse_lslds_params *p = m;
    gsl_matrix *y = gsl_matrix_alloc(n, p->N), *x = gsl_matrix_alloc(n, p->D);
    lse_status st = y == NULL || x == NULL
                        ? lse_error_set(err, LSE_ENOMEM, "lsefit", "out of "
                                                                   "memory")
                        : lse_lslds_simulate(p, seed, y, x, z, err);
    for (size_t t = 0; st == LSE_OK && t < n; t++)
        for (size_t j = 0; j < p->N + 1 + p->D; j++)
            gsl_matrix_set(out, t, j,
                           j < p->N    ? gsl_matrix_get(y, t, j)
                           : j == p->N ? (double)z[t]
                                       : gsl_matrix_get(x, t, j - p->N - 1));
    gsl_matrix_free(y);
    gsl_matrix_free(x);
    return st;
}

static size_t lslds_draw_extra(const void *m)
{
    return 1 + ((const lse_lslds_params *)m)->D;
}

static void lslds_draw_name(const void *m, size_t j, char *buf, size_t size)
{
    (void)m;
    if (j == 0)
        snprintf(buf, size, "mode");
    else
        snprintf(buf, size, "x%zu", j - 1);
}

static const lsefit_draw lslds_simulate = {
    .cmd = "slds", /* messages: 'lsefit slds --help' */
    .count = 'T',
    .count_long = "length",
    .count_what = "the length of the series",
    .labels_opt = "--modes",
    .labels_column = "mode",
    .help = help,
    .draw = lslds_draw,
    .extra = lslds_draw_extra,
    .extra_name = lslds_draw_name,
};

/* ------------------------------------------------------------------ */
/* lsefit slds plot (lsefit_plot.c)                                    */

int lsefit_lslds_is_latent(const char *model)
{
    lse_json *doc = NULL;
    const char *name = NULL;
    int yes = 0;
    if (lse_json_load(model, &doc, NULL) == LSE_OK &&
        lse_json_get_string(doc, "model", &name, NULL) == LSE_OK)
        yes = strcmp(name, "slds-latent") == 0;
    lse_json_free(doc);
    return yes;
}

void lsefit_lslds_view_free(lsefit_lslds_view *v)
{
    lsefit_data_free(&v->data);
    free(v->names);
    free(v->path);
    gsl_matrix_free(v->w);
    gsl_matrix_free(v->x);
    gsl_matrix_free(v->v);
    memset(v, 0, sizeof *v);
}

int lsefit_lslds_view_load(const char *model, lsefit_data_opts *dopt,
                           lsefit_lslds_view *v)
{
    memset(v, 0, sizeof *v);
    loaded l;
    int rc = load_and_infer(model, dopt, &l);
    const size_t T = rc == LSEFIT_OK ? l.data.x->size1 : 0;
    if (rc == LSEFIT_OK) {
        v->K = l.p->K;
        v->D = l.p->D;
        v->markov = l.p->markov;
        v->path = malloc(T * sizeof(size_t));
        v->x = gsl_matrix_alloc(T, v->D);
        v->v = gsl_matrix_alloc(T, v->D);
        if (!v->path || !v->x || !v->v)
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK)
        rc = viterbi_path(&l, v->path);
    for (size_t t = 0; rc == LSEFIT_OK && t < T; t++)
        for (size_t i = 0; i < v->D; i++) {
            gsl_matrix_set(v->x, t, i, gsl_matrix_get(l.q->mean, t, i));
            gsl_matrix_set(v->v, t, i,
                           gsl_matrix_get(l.q->cov, t, i * v->D + i));
        }
    if (rc == LSEFIT_OK) { /* hand over the data, names and q(z) */
        v->data = l.data;
        memset(&l.data, 0, sizeof l.data);
        v->names = l.g.names;
        l.g.names = NULL;
        v->w = l.q->w;
        l.q->w = NULL;
    }
    loaded_free(&l);
    if (rc != LSEFIT_OK)
        lsefit_lslds_view_free(v);
    return rc;
}

/* ------------------------------------------------------------------ */
/* The command                                                         */

int lsefit_lslds_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--latent-dim", 12) == 0)
            return 1;
    if (argc >= 2 && strcmp(argv[1], "score") == 0)
        return 1;
    if (argc >= 3 && (strcmp(argv[1], "segment") == 0 ||
                      strcmp(argv[1], "simulate") == 0))
        return lsefit_lslds_is_latent(argv[2]);
    return 0;
}

int lsefit_lslds_main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "segment") == 0 ||
                      strcmp(argv[1], "score") == 0))
        return query_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "simulate") == 0)
        return lsefit_draw_main(&lslds_model, &lslds_simulate, argc - 1,
                                argv + 1);
    lslds_own own; /* lsefit slds SERIES.csv --latent-dim D ...: a fit */
    memset(&own, 0, sizeof own);
    const int rc = lsefit_fit_main(&lslds_model, &own, argc, argv);
    free(own.mask);
    free(own.vmask);
    lsefit_data_free(&own.vdata);
    return rc;
}
