/* lsefit slds --latent-dim D: the switching LDS with latent states
 * (lse_lslds, models/lslds.h): fit, segment, score, simulate. Reached from
 * lsefit_slds_main when --latent-dim is given or the model file of a
 * subcommand says "slds-latent" (lsefit_lslds_wanted). Data are used in
 * their own units (no standardization). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit_data.h"
#include "lsefit_mpi.h"
#include "lsefit_plot.h"

int lsefit_lslds_wanted(int argc, char **argv);
int lsefit_lslds_main(int argc, char **argv);

static const char *CMD = "slds";

static void help(FILE *f)
{
    fputs("Usage: lsefit slds SERIES.csv -k K --latent-dim D [options]\n"
          "       lsefit slds segment MODEL.json SERIES.csv [options]\n"
          "       lsefit slds score MODEL.json SERIES.csv [options]\n"
          "       lsefit slds simulate MODEL.json -n T [options]\n"
          "\n"
          "Switching linear dynamical system with latent states (structured\n"
          "variational EM; docs/models/slds.md). fit writes the model file\n"
          "(-o) and prints the ELBO; segment prints per row the mode\n"
          "posteriors p0..p(K-1), the most likely mode, the Viterbi path of\n"
          "q(z) (Markov; the mode for a mixture) and the smoothed latent\n"
          "means x0..x(D-1) (and variances v0.. with --variances); score prints\n"
          "the ELBO and an importance-sampled log p(y) with its standard error;\n"
          "simulate draws (z, x, y).\n"
          "\n"
          "Options:\n"
          "  -k K                modes (fit); a range A:B fits each and keeps\n"
          "                      the best by --select\n"
          "  --latent-dim D      latent dimension (fit; D <= columns); or A:B\n"
          "  --select CRIT       with ranges: bic (default; BIC on the ELBO) or\n"
          "                      heldout (log p(y) of --validation, sampled)\n"
          "  --validation FILE   held-out series for --select heldout\n"
          "  --markov            Markov switching (default: mixture)\n"
          "  --emission E        shared (default) or per-mode: C, d, R per mode\n"
          "  --fit-initial       fit the initial-state mean and covariance too\n"
          "                      (default: kept at the spread of the states;\n"
          "                      fitted from few sequence starts they collapse)\n"
          "  --n-init N          initializations, best ELBO kept (1)\n"
          "  --max-iter N        EM iterations (200)\n"
          "  --seed S            random seed (0)\n"
          "  --columns LIST      columns to use\n"
          "  --sequence COLUMN   sequence ids\n"
          "  --missing POLICY    error (default), drop or marginalize\n"
          "  --samples N         importance samples for score (1000)\n"
          "  --variances         segment: also the latent variances\n"
          "  --mpi               fit under mpirun -n P: each process reads its\n"
          "                      share of the rows (docs/mpi.md)\n"
          "  --shards PATTERN    with --mpi, instead of SERIES.csv: one file per\n"
          "                      process\n"
          "  -n T                rows to simulate\n"
          "  -o, --output FILE   model file (fit) or table (others); fit needs it\n"
          "  -q, --quiet         no summary on stderr\n"
          "  -h, --help          this help\n",
          f);
}

enum {
    OPT_LATENT = 256,
    OPT_MARKOV,
    OPT_NINIT,
    OPT_MAXIT,
    OPT_SEED,
    OPT_COLUMNS,
    OPT_SEQUENCE,
    OPT_MISSING,
    OPT_SAMPLES,
    OPT_VAR,
    OPT_MPI,
    OPT_SHARDS,
    OPT_SELECT,
    OPT_VALID,
    OPT_EMIS,
    OPT_FIT0
};

static const struct option options[] = {
    {"latent-dim", required_argument, NULL, OPT_LATENT},
    {"markov", no_argument, NULL, OPT_MARKOV},
    {"n-init", required_argument, NULL, OPT_NINIT},
    {"max-iter", required_argument, NULL, OPT_MAXIT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"columns", required_argument, NULL, OPT_COLUMNS},
    {"sequence", required_argument, NULL, OPT_SEQUENCE},
    {"missing", required_argument, NULL, OPT_MISSING},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"variances", no_argument, NULL, OPT_VAR},
    {"mpi", no_argument, NULL, OPT_MPI},
    {"select", required_argument, NULL, OPT_SELECT},
    {"emission", required_argument, NULL, OPT_EMIS},
    {"fit-initial", no_argument, NULL, OPT_FIT0},
    {"validation", required_argument, NULL, OPT_VALID},
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"output", required_argument, NULL, 'o'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct args {
    size_t k, D, T_sim, n_init, max_iter, samples;
    size_t kmax, Dmax; /* ranges k..kmax, D..Dmax */
    int markov, variances, help, mpi, heldout, per_mode, fit0;
    unsigned long seed;
    const char *out, *shards, *valid;
    lsefit_data_opts data;
    const char *pos[2];
    size_t n_pos;
} args;

/* --latent-dim D or A:B */
static int dim_range(const char *s, size_t *lo, size_t *hi)
{
    const char *colon = strchr(s, ':');
    char buf[64];
    if (colon == NULL) {
        const int rc = lsefit_opt_size(CMD, "--latent-dim", s, 1, lo);
        *hi = *lo;
        return rc;
    }
    const size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof buf || colon[1] == '\0')
        return lsefit_usage(CMD, "--latent-dim '%s': expected D or a range "
                                 "A:B",
                            s);
    memcpy(buf, s, n);
    buf[n] = '\0';
    int rc = lsefit_opt_size(CMD, "--latent-dim", buf, 1, lo);
    if (rc == LSEFIT_OK)
        rc = lsefit_opt_size(CMD, "--latent-dim", colon + 1, 1, hi);
    if (rc == LSEFIT_OK && *hi < *lo)
        rc = lsefit_usage(CMD, "--latent-dim %s: empty range", s);
    return rc;
}

static int parse(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->n_init = 1;
    a->max_iter = 200;
    a->samples = 1000;
    a->data.missing = LSE_MISSING_ERROR;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":k:n:o:qh", options, NULL)) != -1) {
        switch (c) {
        case 'k':
            rc = lsefit_opt_krange(CMD, optarg, &a->k, &a->kmax);
            break;
        case 'n':
            rc = lsefit_opt_size(CMD, "-n", optarg, 1, &a->T_sim);
            break;
        case OPT_LATENT:
            rc = dim_range(optarg, &a->D, &a->Dmax);
            break;
        case OPT_SELECT:
            if (strcmp(optarg, "bic") == 0 || strcmp(optarg, "heldout") == 0)
                a->heldout = optarg[0] == 'h';
            else
                rc = lsefit_usage(CMD, "--select %s: use bic or heldout",
                                  optarg);
            break;
        case OPT_VALID:
            a->valid = optarg;
            break;
        case OPT_FIT0:
            a->fit0 = 1;
            break;
        case OPT_EMIS:
            if (strcmp(optarg, "shared") == 0 || strcmp(optarg, "per-mode") == 0)
                a->per_mode = optarg[0] == 'p';
            else
                rc = lsefit_usage(CMD, "--emission %s: use shared or per-mode",
                                  optarg);
            break;
        case OPT_MARKOV:
            a->markov = 1;
            break;
        case OPT_NINIT:
            rc = lsefit_opt_size(CMD, "--n-init", optarg, 1, &a->n_init);
            break;
        case OPT_MAXIT:
            rc = lsefit_opt_size(CMD, "--max-iter", optarg, 1, &a->max_iter);
            break;
        case OPT_SAMPLES:
            rc = lsefit_opt_size(CMD, "--samples", optarg, 2, &a->samples);
            break;
        case OPT_SEED:
            rc = lsefit_opt_seed(CMD, optarg, &a->seed);
            break;
        case OPT_COLUMNS:
            a->data.columns = optarg;
            break;
        case OPT_SEQUENCE:
            a->data.sequence = optarg;
            break;
        case OPT_MISSING:
            rc = lsefit_opt_missing(CMD, optarg, &a->data.missing);
            break;
        case OPT_VAR:
            a->variances = 1;
            break;
        case OPT_MPI:
            a->mpi = 1;
            break;
        case OPT_SHARDS:
            a->shards = optarg;
            break;
        case 'o':
            a->out = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'h':
            a->help = 1;
            break;
        default:
            rc = lsefit_opt_bad(CMD, c, argv, options);
        }
    }
    for (int i = optind; rc == LSEFIT_OK && i < argc; i++) {
        if (a->n_pos == 2)
            rc = lsefit_usage(CMD, "unexpected argument '%s'", argv[i]);
        else
            a->pos[a->n_pos++] = argv[i];
    }
    return rc;
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
static double n_params(size_t K, size_t D, size_t N, int markov,
                       int per_mode, int fit0)
{
    const double k = (double)K, d = (double)D, n = (double)N;
    return k * (d * d + d + d * (d + 1) / 2) +
           (per_mode ? k : 1.0) * (n * d + 2 * n) +
           (fit0 ? d + d * (d + 1) / 2 : 0.0) + (k - 1) +
           (markov ? k * (k - 1) : 0.0) - (d * d + d);
}

typedef struct cell {
    size_t K, D, n_iter;
    double elbo, npar, bic, held, held_se;
} cell;

/* The held-out log p(y) of @p v (importance sampled) at @p p. */
static int heldout(const args *a, const lse_lslds_params *p,
                   const lsefit_data *v, const unsigned char *vmask,
                   double *est, double *se)
{
    lse_lslds_post *q = NULL;
    lse_error err;
    double e;
    if (lse_lslds_post_new(v->x->size1, p->K, p->D, &q, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    int rc = infer(p, v, vmask, q, &e);
    if (rc == LSEFIT_OK &&
        lse_lslds_log_marginal(p, v->x, vmask, v->seq, q, a->samples, a->seed,
                               est, se, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, a->valid);
    lse_lslds_post_free(q);
    return rc;
}

static void print_cells(FILE *f, const cell *c, size_t n, size_t best,
                        int held)
{
    fprintf(f, "   K   D  params          ELBO     BIC(ELBO)%s\n",
            held ? "   held-out log p(y)      se" : "");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%4zu%4zu%8.0f%14.4f%14.4f", c[i].K, c[i].D, c[i].npar,
                c[i].elbo, c[i].bic);
        if (held)
            fprintf(f, "%20.4f%8.4f", c[i].held, c[i].held_se);
        fprintf(f, "%s\n", i == best ? "  <- chosen" : "");
    }
    fprintf(f, "chosen by %s\n",
            held ? "the largest held-out log p(y) (importance sampled)"
                 : "the smallest BIC on the ELBO, -2 ELBO + params log T: "
                   "the ELBO is a lower bound of log p(y), so this is an "
                   "upper bound of the BIC, looser where q fits worse");
}

/* The options of fit that go together. */
static int check_fit_args(const args *a)
{
    if (a->shards != NULL && !a->mpi)
        return lsefit_usage(CMD, "--shards needs --mpi");
    if (a->n_pos != (a->shards != NULL ? 0u : 1u))
        return lsefit_usage(CMD, a->shards != NULL
                                     ? "give SERIES.csv or --shards, not both"
                                     : "fit needs one SERIES.csv");
    if (a->k == 0)
        return lsefit_usage(CMD, "give the number of modes with -k K");
    if (a->out == NULL)
        return lsefit_usage(CMD, "give the model file with -o MODEL.json");
    if (a->heldout && a->valid == NULL)
        return lsefit_usage(CMD, "--select heldout needs --validation FILE.csv");
    if (a->valid != NULL && a->mpi)
        return lsefit_usage(CMD, "--validation is not read under --mpi (use "
                                 "--select bic)");
    return LSEFIT_OK;
}

/* The fit's options: the command line's, and (mpi) the reduction over
 * the processes. */
static lse_lslds_opts fit_opts(const args *a, lsefit_mpi *mpi)
{
    lse_lslds_opts o = lse_lslds_opts_default();
    o.n_init = a->n_init;
    o.max_iter = a->max_iter;
    o.seed = a->seed;
    o.fix_initial = !a->fit0;
    if (mpi != NULL) {
        o.reduce = lsefit_mpi_reduce;
        o.reduce_user = mpi;
        o.rank = (size_t)lsefit_mpi_rank(mpi);
        o.n_ranks = (size_t)lsefit_mpi_size(mpi);
        o.context_rows = lsefit_mpi_context_rows(mpi);
    }
    return o;
}

/* --validation FILE.csv: its columns by the data's names, and its mask. */
static int load_validation(const args *a, const lsefit_data *data,
                           lsefit_data *vdata, unsigned char **vmask)
{
    int rc;
    lsefit_data_opts vo = a->data;
    vo.path = a->valid;
    vo.model_names = (const char *const *)data->names;
    vo.n_model_names = data->d;
    vo.model_path = a->pos[0];
    rc = lsefit_data_load(&vo, vdata);
    if (rc == LSEFIT_OK && vdata->d != data->d)
        rc = lsefit_fail("%s: %zu columns but %s has %zu (choose them with "
                         "--columns)",
                         a->valid, vdata->d, a->pos[0], data->d);
    if (rc == LSEFIT_OK)
        rc = make_mask(vdata->x, vmask);
    return rc;
}

static int fit_main(args *a)
{
    int rc = check_fit_args(a);
    if (rc != LSEFIT_OK)
        return rc;
    a->data.path = a->n_pos > 0 ? a->pos[0] : NULL;
    const size_t nK = a->kmax - a->k + 1, nD = a->Dmax - a->D + 1;
    lsefit_data data = {0}, vdata = {0};
    unsigned char *mask = NULL, *vmask = NULL;
    lse_lslds_params *p = NULL, *best = NULL;
    lse_json *doc = NULL;
    lse_error err;
    lsefit_mpi *mpi = NULL;
    cell *cells = calloc(nK * nD, sizeof *cells);
    size_t ib = 0;
    if (cells == NULL)
        return lsefit_fail("out of memory");
    if (a->mpi && lsefit_mpi_begin(&mpi) != LSEFIT_OK) {
        free(cells);
        return LSEFIT_FAIL;
    }
    /* --mpi: one context row (the row before this process's block) tells
     * whether the block continues a sequence */
    rc = mpi != NULL ? lsefit_mpi_data_load(mpi, &a->data, a->shards, 1,
                                                &data)
                         : lsefit_data_load(&a->data, &data);
    const size_t n_rows =
        mpi != NULL ? lsefit_mpi_total_rows(mpi) : (data.x ? data.x->size1 : 0);
    if (rc == LSEFIT_OK && a->Dmax > data.d)
        rc = lsefit_usage(CMD,
                          "--latent-dim %zu is more than the %zu data "
                          "column%s (the PCA start needs D <= columns)",
                          a->Dmax, data.d, data.d == 1 ? "" : "s");
    if (rc == LSEFIT_OK)
        rc = make_mask(data.x, &mask);
    if (rc == LSEFIT_OK && a->valid != NULL)
        rc = load_validation(a, &data, &vdata, &vmask);
    double best_crit = -INFINITY;
    for (size_t i = 0; rc == LSEFIT_OK && i < nK * nD; i++) {
        cell *c = &cells[i];
        c->K = a->k + i / nD;
        c->D = a->D + i % nD;
        c->held = c->held_se = NAN;
        if (lse_lslds_params_new(c->K, c->D, data.d, a->markov, &p, &err) !=
                LSE_OK ||
            (a->per_mode && lse_lslds_params_emission_per_mode(p, &err) !=
                                LSE_OK)) {
            rc = lsefit_fail_lib(&err, NULL);
            break;
        }
        const lse_lslds_opts o = fit_opts(a, mpi);
        if (lse_lslds_fit(p, data.x, mask, data.seq, &o, NULL, &c->elbo,
                          &c->n_iter, &err) != LSE_OK) {
            rc = lsefit_fail_lib(&err, "; try other -k, --latent-dim or --seed");
            break;
        }
        c->npar = n_params(c->K, c->D, data.d, a->markov, a->per_mode, a->fit0);
        c->bic = -2.0 * c->elbo + c->npar * log((double)n_rows);
        if (a->valid != NULL)
            rc = heldout(a, p, &vdata, vmask, &c->held, &c->held_se);
        const double crit = a->heldout ? c->held : -c->bic;
        if (rc == LSEFIT_OK && (best == NULL || crit > best_crit)) {
            lse_lslds_params_free(best);
            best = p;
            p = NULL;
            best_crit = crit;
            ib = i;
        }
        lse_lslds_params_free(p);
        p = NULL;
    }
    if (!lsefit_mpi_is_root(mpi)) /* process 0 writes the model */
        goto done;
    if (rc == LSEFIT_OK && nK * nD > 1)
        print_cells(strcmp(a->out, "-") == 0 ? stderr : stdout, cells,
                    nK * nD, ib, a->valid != NULL);
    const cell *cb = &cells[ib];
    if (rc == LSEFIT_OK) {
        doc = lse_json_new_object();
        if (doc == NULL)
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK &&
        (lse_lslds_to_json(best, data.names, doc, &err) != LSE_OK ||
         lse_json_set_number(doc, "elbo", cb->elbo, &err) != LSE_OK ||
         lse_json_set_integer(doc, "n_iter", (long long)cb->n_iter, &err) !=
             LSE_OK ||
         lse_json_set_integer(doc, "n_params", (long long)cb->npar, &err) !=
             LSE_OK ||
         lse_json_set_number(doc, "bic_elbo", cb->bic, &err) != LSE_OK ||
         (a->valid != NULL &&
          lse_json_set_number(doc, "heldout_loglik", cb->held, &err) != LSE_OK)))
        rc = lsefit_fail_lib(&err, NULL);
    char *text = NULL;
    if (rc == LSEFIT_OK && lse_json_to_string(doc, &text, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_write(a->out, text, strlen(text));
    free(text);
    if (rc == LSEFIT_OK && !lsefit_quiet)
        fprintf(stderr,
                "lsefit: slds latent K = %zu, D = %zu, %s: ELBO %.6f (%.6f per "
                "row), %zu iterations -> %s\n",
                cb->K, cb->D, a->markov ? "Markov" : "mixture", cb->elbo,
                cb->elbo / (double)n_rows, cb->n_iter, a->out);
done:
    lse_json_free(doc);
    lse_lslds_params_free(p);
    lse_lslds_params_free(best);
    free(mask);
    free(vmask);
    free(cells);
    lsefit_data_free(&data);
    lsefit_data_free(&vdata);
    if (mpi != NULL) /* commit on process 0 before the outcome is agreed */
        rc = lsefit_outputs_finish(rc);
    return lsefit_mpi_end(mpi, rc);
}

/* Load MODEL.json and SERIES.csv, run VI at the model's parameters. */
typedef struct loaded {
    lse_lslds_params *p;
    char **names;
    lsefit_data data;
    unsigned char *mask;
    lse_lslds_post *q;
    double elbo;
} loaded;

static void loaded_free(loaded *l)
{
    lse_lslds_params_free(l->p);
    free(l->names);
    lsefit_data_free(&l->data);
    free(l->mask);
    lse_lslds_post_free(l->q);
}

static int load_and_infer(args *a, loaded *l)
{
    memset(l, 0, sizeof *l);
    lse_error err;
    if (a->n_pos != 2)
        return lsefit_usage(CMD, "give MODEL.json and SERIES.csv");
    if (lse_lslds_load(a->pos[0], &l->p, &l->names, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    a->data.path = a->pos[1];
    a->data.model_names = (const char *const *)l->names;
    a->data.n_model_names = l->p->N;
    a->data.model_path = a->pos[0];
    int rc = lsefit_data_load(&a->data, &l->data);
    if (rc == LSEFIT_OK && l->data.d != l->p->N)
        rc = lsefit_fail("%s: %zu data columns but the model %s has "
                         "n_features = %zu (choose them with --columns)",
                         a->pos[1], l->data.d, a->pos[0], l->p->N);
    if (rc == LSEFIT_OK)
        rc = make_mask(l->data.x, &l->mask);
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

static int segment_main(args *a)
{
    loaded l;
    int rc = load_and_infer(a, &l);
    size_t *vit = NULL;
    if (rc == LSEFIT_OK) {
        vit = malloc(l.data.x->size1 * sizeof(size_t));
        rc = vit == NULL ? lsefit_fail("out of memory") : viterbi_path(&l, vit);
    }
    lsefit_buf b = {0};
    if (rc == LSEFIT_OK)
        rc = lsefit_buf_open(&b);
    if (rc == LSEFIT_OK) {
        const size_t K = l.p->K, D = l.p->D;
        fprintf(b.f, "row");
        for (size_t k = 0; k < K; k++)
            fprintf(b.f, ",p%zu", k);
        fprintf(b.f, ",mode,viterbi");
        for (size_t i = 0; i < D; i++)
            fprintf(b.f, ",x%zu", i);
        for (size_t i = 0; a->variances && i < D; i++)
            fprintf(b.f, ",v%zu", i);
        fputc('\n', b.f);
        for (size_t t = 0; t < l.data.x->size1; t++) {
            fprintf(b.f, "%zu", l.data.rows[t] + 1);
            size_t best = 0;
            for (size_t k = 0; k < K; k++) {
                fprintf(b.f, ",%.17g", gsl_matrix_get(l.q->w, t, k));
                if (gsl_matrix_get(l.q->w, t, k) > gsl_matrix_get(l.q->w, t, best))
                    best = k;
            }
            fprintf(b.f, ",%zu,%zu", best, vit[t]);
            for (size_t i = 0; i < D; i++)
                fprintf(b.f, ",%.17g", gsl_matrix_get(l.q->mean, t, i));
            for (size_t i = 0; a->variances && i < D; i++)
                fprintf(b.f, ",%.17g", gsl_matrix_get(l.q->cov, t, i * D + i));
            fputc('\n', b.f);
        }
        rc = lsefit_buf_write(&b, a->out ? a->out : "-");
        if (rc == LSEFIT_OK && !lsefit_quiet)
            fprintf(stderr, "lsefit: ELBO %.6f\n", l.elbo);
    }
    lsefit_buf_free(&b);
    free(vit);
    loaded_free(&l);
    return rc;
}

static int score_main(args *a)
{
    loaded l;
    int rc = load_and_infer(a, &l);
    double est = NAN, se = NAN;
    lse_error err;
    if (rc == LSEFIT_OK &&
        lse_lslds_log_marginal(l.p, l.data.x, l.mask, l.data.seq, l.q,
                               a->samples, a->seed, &est, &se, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK) {
        lsefit_buf b = {0};
        rc = lsefit_buf_open(&b);
        if (rc == LSEFIT_OK) {
            const double n = (double)l.data.x->size1;
            fprintf(b.f, "rows,elbo,elbo_per_row,loglik,loglik_se,loglik_per_row\n");
            fprintf(b.f, "%zu,%.17g,%.17g,%.17g,%.17g,%.17g\n",
                    l.data.x->size1, l.elbo, l.elbo / n, est, se, est / n);
            rc = lsefit_buf_write(&b, a->out ? a->out : "-");
        }
        lsefit_buf_free(&b);
    }
    loaded_free(&l);
    return rc;
}

static int simulate_main(args *a)
{
    if (a->n_pos != 1)
        return lsefit_usage(CMD, "simulate needs MODEL.json");
    if (a->T_sim == 0)
        return lsefit_usage(CMD, "give the number of rows with -n T");
    lse_lslds_params *p = NULL;
    char **names = NULL;
    lse_error err;
    if (lse_lslds_load(a->pos[0], &p, &names, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    const size_t T = a->T_sim, D = p->D, N = p->N;
    gsl_matrix *y = gsl_matrix_alloc(T, N), *x = gsl_matrix_alloc(T, D);
    size_t *z = malloc(T * sizeof(size_t));
    int rc = LSEFIT_OK;
    if (y == NULL || x == NULL || z == NULL)
        rc = lsefit_fail("out of memory (-n %zu)", T);
    if (rc == LSEFIT_OK &&
        lse_lslds_simulate(p, a->seed, y, x, z, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    lsefit_buf b = {0};
    if (rc == LSEFIT_OK)
        rc = lsefit_buf_open(&b);
    if (rc == LSEFIT_OK) {
        for (size_t i = 0; i < N; i++) {
            lsefit_csv_cell(b.f, names[i]);
            fputc(',', b.f);
        }
        fprintf(b.f, "mode");
        for (size_t i = 0; i < D; i++)
            fprintf(b.f, ",x%zu", i);
        fputc('\n', b.f);
        for (size_t t = 0; t < T; t++) {
            for (size_t i = 0; i < N; i++)
                fprintf(b.f, "%.17g,", gsl_matrix_get(y, t, i));
            fprintf(b.f, "%zu", z[t]);
            for (size_t i = 0; i < D; i++)
                fprintf(b.f, ",%.17g", gsl_matrix_get(x, t, i));
            fputc('\n', b.f);
        }
        rc = lsefit_buf_write(&b, a->out ? a->out : "-");
    }
    lsefit_buf_free(&b);
    gsl_matrix_free(y);
    gsl_matrix_free(x);
    free(z);
    free(names);
    lse_lslds_params_free(p);
    return rc;
}

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
    args a;
    memset(&a, 0, sizeof a);
    a.data = *dopt;
    a.pos[0] = model;
    a.pos[1] = dopt->path;
    a.n_pos = 2;
    loaded l;
    int rc = load_and_infer(&a, &l);
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
        v->names = l.names;
        l.names = NULL;
        v->w = l.q->w;
        l.q->w = NULL;
    }
    loaded_free(&l);
    if (rc != LSEFIT_OK)
        lsefit_lslds_view_free(v);
    return rc;
}

int lsefit_lslds_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--latent-dim", 12) == 0)
            return 1;
    if (argc >= 2 && strcmp(argv[1], "score") == 0)
        return 1;
    if (argc >= 3 && (strcmp(argv[1], "segment") == 0 ||
                      strcmp(argv[1], "simulate") == 0)) {
        lse_json *doc = NULL;
        const char *model = NULL;
        int yes = 0;
        if (lse_json_load(argv[2], &doc, NULL) == LSE_OK &&
            lse_json_get_string(doc, "model", &model, NULL) == LSE_OK)
            yes = strcmp(model, "slds-latent") == 0;
        lse_json_free(doc);
        return yes;
    }
    return 0;
}

int lsefit_lslds_main(int argc, char **argv)
{
    int sub = 0; /* 0 fit, 1 segment, 2 score, 3 simulate */
    if (argc >= 2 && strcmp(argv[1], "segment") == 0)
        sub = 1;
    else if (argc >= 2 && strcmp(argv[1], "score") == 0)
        sub = 2;
    else if (argc >= 2 && strcmp(argv[1], "simulate") == 0)
        sub = 3;
    if (sub != 0) {
        argc--;
        argv++;
    }
    args a;
    int rc = parse(argc, argv, &a);
    if (a.help) {
        help(stdout);
        return LSEFIT_OK;
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (sub != 0 && (a.mpi || a.shards != NULL))
        return lsefit_usage(CMD, "--mpi and --shards are for the fit only");
    /* the files of the command, before any work: no output may be an
     * input or another output (all outputs are committed at the end) */
    const lsefit_path in[] = {{a.n_pos > 0 ? a.pos[0] : NULL,
                               sub == 0 ? "the series" : "the model"},
                              {a.n_pos > 1 ? a.pos[1] : NULL, "the series"},
                              {a.valid, "--validation"}};
    const lsefit_path out[] = {{a.out, "-o"}};
    rc = lsefit_plan(in, 3, out, 1);
    if (rc != LSEFIT_OK)
        return rc;
    switch (sub) {
    case 1:
        return segment_main(&a);
    case 2:
        return score_main(&a);
    case 3:
        return simulate_main(&a);
    default:
        if (a.D == 0)
            return lsefit_usage(CMD, "give --latent-dim D");
        return fit_main(&a);
    }
}
