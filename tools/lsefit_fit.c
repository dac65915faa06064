/* lsefit: the fit pipeline the models share (lsefit_fit.h): options,
 * files, data, checks, standardization, the fits over a range of K, the
 * selection and the model file, driven by one lsefit_model table.
 *
 * The model file is written from the fitted model and every output of the
 * fit (per-row tables, the printed summary) is computed from the model
 * read back from that very text, so "lsefit MODEL predict|segment" on the
 * file reproduces them bit for bit. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit_fit.h"

/* ------------------------------------------------------------------ */
/* Model files                                                         */

void lsefit_model_file_free(const lsefit_model *model, lsefit_model_file *f)
{
    if (f->m != NULL)
        model->free(f->m);
    free(f->names);
    gsl_vector_free(f->mean);
    gsl_vector_free(f->scale);
    memset(f, 0, sizeof *f);
}

int lsefit_model_from_json(const lsefit_model *model, const lse_json *doc,
                           const char *path, lsefit_model_file *f)
{
    memset(f, 0, sizeof *f);
    lse_error err;
    int rc = lsefit_json_check_model(
        doc, path, model->file_model ? model->file_model : model->name);
    if (rc == LSEFIT_OK &&
        model->from_json(doc, path, &f->m, &f->names, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_get_standardize(doc, path, model->dim(f->m),
                                         &f->mean, &f->scale);
    if (rc != LSEFIT_OK)
        lsefit_model_file_free(model, f);
    return rc;
}

int lsefit_model_read(const lsefit_model *model, const char *path,
                      lsefit_model_file *f)
{
    lse_error err;
    lse_json *doc = NULL;
    memset(f, 0, sizeof *f);
    if (lse_json_load(path, &doc, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    const int rc = lsefit_model_from_json(model, doc, path, f);
    lse_json_free(doc);
    return rc;
}

int lsefit_model_data(const lsefit_model *model, const char *model_path,
                      lsefit_data_opts *dopt, lsefit_model_file *g,
                      lsefit_data *data)
{
    memset(data, 0, sizeof *data);
    int rc = lsefit_model_read(model, model_path, g);
    if (rc != LSEFIT_OK)
        return rc;
    const size_t d = model->dim(g->m);
    dopt->model_names = (const char *const *)g->names;
    dopt->n_model_names = d;
    dopt->model_path = model_path;
    rc = lsefit_data_load(dopt, data);
    if (rc == LSEFIT_OK && data->d != d)
        rc = lsefit_fail_columns(dopt->path, data->d, model_path, d);
    if (rc == LSEFIT_OK && g->mean != NULL)
        rc = lsefit_data_apply_standardize(data, g->mean, g->scale);
    return rc;
}

int lsefit_fail_columns(const char *data_path, size_t d,
                        const char *model_path, size_t model_d)
{
    return lsefit_fail("%s: %zu data column%s but the model %s has "
                       "n_features = %zu",
                       data_path, d, d == 1 ? "" : "s", model_path, model_d);
}

void lsefit_print_row(FILE *f, const char *label, const double *x, size_t n,
                      size_t stride)
{
    fprintf(f, "  %-11s", label);
    for (size_t j = 0; j < n; j++)
        fprintf(f, " %12.6g", x[j * stride]);
    fputc('\n', f);
}

/* ------------------------------------------------------------------ */
/* Options                                                             */

/* --init METHOD or --init-file FILE. */
static int option_init(lsefit_fit *f, int c, const char *arg, int *init_given)
{
    const char *cmd = f->model->name;
    int rc = LSEFIT_OK;
    if (*init_given)
        rc = lsefit_usage(cmd, "give one --init or --init-file");
    *init_given = 1;
    f->init = arg;
    f->init_file = c == LSEFIT_FIT_OPT_INIT_FILE;
    if (rc == LSEFIT_OK && c == LSEFIT_FIT_OPT_INIT) {
        const char *method = NULL;
        rc = lsefit_opt_init(cmd, arg, f->model->inits, &method);
        f->init = method != NULL ? method : arg;
        f->init_file = method == NULL;
    }
    return rc;
}

/* One option every fit takes; -1 for an unknown one. */
static int option_common(lsefit_fit *f, int c, const char *arg,
                         int *init_given)
{
    const char *cmd = f->model->name;
    switch (c) {
    case 'k':
        f->k_given = 1;
        return lsefit_opt_krange(cmd, arg, &f->kmin, &f->kmax);
    case LSEFIT_FIT_OPT_COV:
        f->cov_given = 1;
        f->cov_model = LSE_COV_MODEL_NONE;
        if (lse_gmm_cov_parse(arg, &f->cov) == LSE_OK)
            return LSEFIT_OK;
        if (f->model->cov_models &&
            lse_cov_model_parse(arg, &f->cov_model) == LSE_OK) {
            f->cov = lse_cov_model_layout(f->cov_model);
            return LSEFIT_OK;
        }
        return lsefit_usage(cmd,
                            "--covariance '%s': expected full, diag, "
                            "spherical or tied%s",
                            arg,
                            f->model->cov_models
                                ? " or one of mclust's models (EII ... VVV)"
                                : "");
    case LSEFIT_FIT_OPT_INIT:
    case LSEFIT_FIT_OPT_INIT_FILE:
        return option_init(f, c, arg, init_given);
    case LSEFIT_FIT_OPT_NINIT:
        return lsefit_opt_size(cmd, "--n-init", arg, 1, &f->n_init);
    case LSEFIT_FIT_OPT_MAXITER:
        return lsefit_opt_size(cmd, "--max-iter", arg, 0, &f->max_iter);
    case LSEFIT_FIT_OPT_TOL:
        return lsefit_opt_double(cmd, "--tol", arg, 0.0, 1, &f->tol);
    case LSEFIT_FIT_OPT_REG:
        f->reg_given = 1;
        return lsefit_opt_double(cmd, "--reg-covar", arg, 0.0, 1,
                                 &f->reg_covar);
    case LSEFIT_FIT_OPT_SEED:
        return lsefit_opt_seed(cmd, arg, &f->seed);
    case LSEFIT_FIT_OPT_COLUMNS:
        f->data.columns = arg;
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_IGNORE:
        f->data.ignore = arg;
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_STANDARDIZE:
        f->standardize = 1;
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_MISSING: {
        const int rc = lsefit_opt_missing(cmd, arg, &f->data.missing);
        f->missing_name = f->data.missing == LSE_MISSING_DROP   ? "drop"
                          : f->data.missing == LSE_MISSING_KEEP ? "marginalize"
                                                                : "error";
        return rc;
    }
    case 'o':
        f->output = arg;
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_SELECT:
        f->select = arg;
        f->select_given = 1;
        if (strcmp(arg, "bic") != 0 && strcmp(arg, "aic") != 0 &&
            (f->model->select_own == NULL ||
             strcmp(arg, f->model->select_own) != 0))
            return lsefit_usage(cmd, "--select '%s': expected bic%s aic%s%s",
                                arg, f->model->select_own ? "," : " or",
                                f->model->select_own ? " or " : "",
                                f->model->select_own ? f->model->select_own
                                                     : "");
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_LOGJSON:
        f->log_json = arg;
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_MPI:
        f->mpi = 1;
        return LSEFIT_OK;
    case LSEFIT_FIT_OPT_SHARDS:
        f->shards = arg;
        return LSEFIT_OK;
    case 'q':
        lsefit_quiet = 1;
        return LSEFIT_OK;
    case 'v':
        lsefit_verbose = 1;
        return LSEFIT_OK;
    default:
        return -1;
    }
}

/* The operands and the checks between options, after getopt_long. */
static int parse_operands(lsefit_fit *f, int argc, char **argv)
{
    const lsefit_model *M = f->model;
    const char *cmd = M->name;
    if (f->shards != NULL && !f->mpi)
        return lsefit_usage(cmd, "--shards needs --mpi");
    if (f->shards != NULL && optind < argc)
        return lsefit_usage(cmd, "give %s or --shards, not both",
                            M->data_word);
    int rc = M->check_mpi(f);
    if (rc != LSEFIT_OK)
        return rc;
    if (f->shards == NULL && optind >= argc)
        return lsefit_usage(cmd, "missing %s file %s", M->data_role,
                            M->data_word);
    if (optind + 1 < argc)
        return lsefit_bad_operand(cmd, argv[optind], argv[optind + 1],
                                  M->subcommands, M->n_subcommands);
    if (f->shards == NULL) {
        rc = lsefit_bad_operand(cmd, argv[optind], NULL, NULL, 0);
        if (rc != LSEFIT_OK)
            return rc;
    }
    f->data.path = f->shards != NULL ? f->shards : argv[optind];
    if (!f->k_given && !f->init_file)
        return lsefit_usage(cmd, "missing -k K (the number of %s)", M->k_noun);
    if (f->select_given && f->kmin == f->kmax && f->k_given &&
        f->smin == f->smax)
        return lsefit_usage(cmd, "--select needs a range of K%s%s such as -k %s",
                            M->sub_label ? " or " : "",
                            M->sub_label ? M->sub_label : "", M->k_example);
    if (f->init_file && f->kmin != f->kmax)
        return lsefit_usage(cmd, "--init-file FILE fixes K: a range of K "
                                 "cannot be used with it");
    return M->finish(f);
}

static int parse(lsefit_fit *f, int argc, char **argv, int *help)
{
    const lsefit_model *M = f->model;
    f->init = "kmeans++";
    f->select = "bic";
    f->missing_name = "error";
    f->data.missing = LSE_MISSING_ERROR;
    M->defaults(f);
    *help = 0;
    int init_given = 0;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":k:o:qvh", M->options, NULL)) != -1) {
        if (lsefit_data_option(M->name, c, optarg, &f->data, &rc))
            continue;
        if (c == 'h') {
            *help = 1;
            return LSEFIT_OK;
        }
        if (c >= LSEFIT_FIT_OPT_MODEL) {
            rc = M->option(f, c, optarg, argv);
            continue;
        }
        rc = option_common(f, c, optarg, &init_given);
        if (rc == -1)
            rc = lsefit_opt_bad(M->name, c, argv, M->options);
    }
    if (rc != LSEFIT_OK)
        return rc;
    return parse_operands(f, argc, argv);
}

/* The files of a fit, declared before any work (lsefit_plan). */
static int plan(const lsefit_fit *f)
{
    lsefit_path in[4] = {
        {f->shards != NULL ? NULL : f->data.path, f->model->data_role},
        {f->init_file ? f->init : NULL, "--init"}};
    const size_t n_in = 2 + (f->model->inputs ? f->model->inputs(f, in + 2) : 0);
    lsefit_path out[8] = {{f->output, "-o"}};
    size_t n_out = 1 + (f->model->outputs ? f->model->outputs(f, out + 1) : 0);
    out[n_out++] = (lsefit_path){f->log_json, "--log-json"};
    int rc =
        f->shards != NULL ? lsefit_plan_glob(f->shards, "--shards") : LSEFIT_OK;
    if (rc == LSEFIT_OK)
        rc = lsefit_plan(in, n_in, out, n_out);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Data                                                                */

/* --init FILE: the model to restart from, checked by the model. */
static int restart(lsefit_fit *f)
{
    const lsefit_model *M = f->model;
    int rc = lsefit_model_read(M, f->init, &f->start);
    if (rc == LSEFIT_OK)
        rc = M->restart(f);
    if (rc != LSEFIT_OK)
        return rc;
    f->data.model_names = (const char *const *)f->start.names;
    f->data.n_model_names = M->dim(f->start.m);
    f->data.model_path = f->init;
    return LSEFIT_OK;
}

/* Load (this process's share of) the data, check it, standardize it. */
static int load(lsefit_fit *f)
{
    const lsefit_model *M = f->model;
    lsefit_mpi *comm = f->comm;
    lsefit_data *d = &f->d;
    int rc = comm != NULL
                 ? lsefit_mpi_data_load(comm, &f->data, f->shards,
                                        M->lags != NULL ? M->lags(f) : 0, d)
                 : lsefit_data_load(&f->data, d);
    if (rc == LSEFIT_OK && M->loaded != NULL)
        rc = M->loaded(f);
    if (rc == LSEFIT_OK && f->init_file && d->d != M->dim(f->start.m))
        rc = lsefit_fail_columns(f->data.path, d->d, f->init,
                                 M->dim(f->start.m));
    if (rc == LSEFIT_OK) /* over every process's rows under --mpi */
        rc = lsefit_data_check_constant(d, f->reg_given, M->reg_example);
    if (rc == LSEFIT_OK && M->check != NULL)
        rc = M->check(f);
    if (rc != LSEFIT_OK)
        return rc;
    if (f->start.mean != NULL)
        return lsefit_data_apply_standardize(d, f->start.mean, f->start.scale);
    if (f->standardize)
        return lsefit_data_standardize(d);
    /* every process checks its rows */
    return lsefit_data_check_scale(
        d, comm != NULL ? lsefit_mpi_total_rows(comm) : d->x->size1,
        !M->no_standardize);
}

/* ------------------------------------------------------------------ */
/* Fitting over K                                                      */

/* Fits of the command: every K of the range (by every value of the
 * model's second range, inner). */
static size_t n_fits(const lsefit_fit *f)
{
    return (f->kmax - f->kmin + 1) * (f->smax - f->smin + 1);
}

/* Is fit i better than fit b by --select? (the first of equals wins) */
static int better(const lsefit_fit *f, const lsefit_fit_result *i,
                  const lsefit_fit_result *b)
{
    if (strcmp(f->select, "aic") == 0)
        return i->aic < b->aic;
    if (strcmp(f->select, "bic") == 0)
        return i->bic < b->bic;
    return i->crit > b->crit; /* the model's own: higher is better */
}

/* ", D = 2" of a model with a second range, else "". */
static const char *sub_text(const lsefit_fit *f, size_t sub, char *buf,
                            size_t size)
{
    buf[0] = '\0';
    if (f->model->sub_label != NULL)
        snprintf(buf, size, ", %s = %zu", f->model->sub_label, sub);
    return buf;
}

/* Fit every K of the range into models[] and res[]; *best by --select. */
static int fit_all(lsefit_fit *f, void **models, lsefit_fit_result *res,
                   size_t *best)
{
    const lsefit_model *M = f->model;
    const size_t n_sub = f->smax - f->smin + 1;
    int rc = LSEFIT_OK;
    lse_error err;
    *best = 0;
    for (size_t i = 0; rc == LSEFIT_OK && i < n_fits(f); i++) {
        const size_t k = f->kmin + i / n_sub;
        f->sub = f->smin + i % n_sub;
        if (f->init_file) {
            models[i] = f->start.m;
            f->start.m = NULL;
        } else {
            rc = M->create(f, k, &models[i]);
        }
        if (rc == LSEFIT_OK && M->before_fit != NULL)
            rc = M->before_fit(f, models[i]);
        if (rc != LSEFIT_OK)
            break;
        lsefit_progress_start(&f->prog, k, f->init_file ? 1 : f->n_init);
        if (M->fit(f, models[i], &err) != LSE_OK) {
            const char *hint = NULL;
            char sub[64];
            if (M->fit_hint != NULL)
                hint = M->fit_hint;
            else if (err.status == LSE_ENUMERIC)
                hint = " (try a larger --reg-covar)";
            return lsefit_fail("%s: K = %zu%s: %s%s", f->data.path, k,
                               sub_text(f, f->sub, sub, sizeof sub),
                               lsefit_strip(&err), hint ? hint : "");
        }
        res[i] = M->result(f, models[i]);
        res[i].sub = f->sub;
        res[i].crit = res[i].crit_se = NAN;
        if (M->scored != NULL)
            rc = M->scored(f, models[i], &res[i]);
        if (rc == LSEFIT_OK && i > 0 && better(f, &res[i], &res[*best]))
            *best = i;
    }
    return rc;
}

/* The table of the fits over K (and the model's second range). */
static void print_table(FILE *f, const lsefit_fit *fit,
                        const lsefit_fit_result *res, size_t n, size_t best)
{
    const lsefit_model *M = fit->model;
    const char *sub = M->sub_label, *crit = NULL;
    for (size_t i = 0; i < n; i++) /* the model's criterion, when computed */
        if (!isnan(res[i].crit))
            crit = M->crit_label;
    const int own = strcmp(fit->select, "bic") != 0 &&
                    strcmp(fit->select, "aic") != 0;
    fprintf(f, "%4s ", "K");
    if (sub != NULL)
        fprintf(f, "%4s ", sub);
    fprintf(f, "%7s %16s %16s %16s %6s %9s", "params",
            M->loglik_label ? M->loglik_label : "loglik", "BIC", "AIC", "iter",
            "converged");
    if (crit != NULL)
        fprintf(f, " %20s %10s", crit, "se");
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%4zu ", res[i].k);
        if (sub != NULL)
            fprintf(f, "%4zu ", res[i].sub);
        fprintf(f, "%7zu %16.8g %16.8g %16.8g %6zu %9s", res[i].n_params,
                res[i].loglik, res[i].bic, res[i].aic, res[i].n_iter,
                res[i].converged ? "yes" : "no");
        if (crit != NULL)
            fprintf(f, " %20.8g %10.4g", res[i].crit, res[i].crit_se);
        fprintf(f, "%s\n", i == best ? "  <- best" : "");
    }
    char sb[64];
    fprintf(f, "best K = %zu%s by %s%s%s (%s is better)\n", res[best].k,
            sub_text(fit, res[best].sub, sb, sizeof sb),
            own ? M->crit_label
                : strcmp(fit->select, "aic") == 0 ? "AIC" : "BIC",
            !own && M->loglik_label ? " on the " : "",
            !own && M->loglik_label ? M->loglik_label : "",
            own ? "higher" : "lower");
}

/* ------------------------------------------------------------------ */
/* The model file                                                      */

static lse_status set_list(lse_json *o, const char *key, const char *list,
                           lse_error *err)
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

/* The data keys of "options": which file, columns and rows. */
static lse_status options_data(const lsefit_fit *f, lse_json *o,
                               lse_error *err)
{
    const lsefit_data_opts *a = &f->data;
    lse_status st = lse_json_set_string(o, "data", a->path, err);
    if (st == LSE_OK)
        st = lse_json_set_strings(o, "columns", f->d.names, f->d.d, err);
    if (st == LSE_OK && a->ignore != NULL)
        st = set_list(o, "ignore", a->ignore, err);
    if (st == LSE_OK && a->weights != NULL)
        st = lse_json_set_string(o, "weights", a->weights, err);
    if (st == LSE_OK && a->sequence != NULL)
        st = lse_json_set_string(o, "sequence", a->sequence, err);
    if (st == LSE_OK)
        st = lse_json_set_string(o, "missing", f->missing_name, err);
    if (st == LSE_OK)
        st = lse_json_set_bool(o, "standardize", f->d.mean != NULL, err);
    return st;
}

/* The "options" object: everything needed to redo the fit. */
static lse_json *options_json(const lsefit_fit *f, size_t k, lse_error *err)
{
    const lsefit_model *M = f->model;
    lse_json *o = lse_json_new_object();
    if (o == NULL) {
        lse_error_set(err, LSE_ENOMEM, "lsefit", "out of memory");
        return NULL;
    }
    lse_status st = options_data(f, o, err);
    if (st == LSE_OK)
        st = lse_json_set_string(o, "covariance",
                                 f->cov_model != LSE_COV_MODEL_NONE
                                     ? lse_cov_model_name(f->cov_model)
                                     : lse_gmm_cov_name(f->cov),
                                 err);
    if (st == LSE_OK)
        st = M->json_options(f, o, LSEFIT_JSON_AFTER_COVARIANCE, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "k", (long long)k, err);
    if (st == LSE_OK && f->kmin != f->kmax) {
        char range[64];
        snprintf(range, sizeof range, "%zu:%zu", f->kmin, f->kmax);
        st = lse_json_set_string(o, "k_range", range, err);
        if (st == LSE_OK)
            st = lse_json_set_string(o, "select", f->select, err);
    }
    if (st == LSE_OK)
        st = lse_json_set_string(o, "init", f->init, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "n_init", (long long)f->n_init, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "max_iter", (long long)f->max_iter, err);
    if (st == LSE_OK)
        st = lse_json_set_number(o, "tol", f->tol, err);
    if (st == LSE_OK)
        st = lse_json_set_number(o, "reg_covar", f->reg_covar, err);
    if (st == LSE_OK)
        st = M->json_options(f, o, LSEFIT_JSON_AFTER_REG_COVAR, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o, "seed", (long long)f->seed, err);
    if (st == LSE_OK)
        st = M->json_options(f, o, LSEFIT_JSON_AFTER_SEED, err);
    if (st != LSE_OK) {
        lse_json_free(o);
        return NULL;
    }
    return o;
}

/* The fit summary keys after the parameters (data units). */
static lse_status summary_json(lse_json *doc, const char *per_key,
                               const lsefit_fit_result *r, lse_error *err)
{
    lse_status st = lse_json_set_number(doc, "loglik", r->loglik, err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, per_key, r->loglik_per, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_iter", (long long)r->n_iter, err);
    if (st == LSE_OK)
        st = lse_json_set_bool(doc, "converged", r->converged, err);
    if (st == LSE_OK)
        st = lse_json_set_number(doc, "bic", r->bic, err);
    return st == LSE_OK ? lse_json_set_number(doc, "aic", r->aic, err) : st;
}

/* The model file: parameters, summary, "options", then "standardize". */
static int model_json(const lsefit_fit *f, const void *m,
                      const lsefit_fit_result *r, lse_json **out)
{
    lse_error err;
    *out = NULL;
    lse_json *doc = lse_json_new_object();
    if (doc == NULL)
        return lsefit_fail("out of memory");
    lse_json *opt = NULL;
    lse_status st = f->model->to_json(m, f->d.names, doc, &err);
    if (st == LSE_OK)
        st = summary_json(doc, f->model->per_key, r, &err);
    if (st == LSE_OK) {
        opt = options_json(f, r->k, &err);
        st = opt == NULL ? err.status : LSE_OK;
    }
    if (st == LSE_OK)
        st = lse_json_set_object(doc, "options", opt, &err);
    lse_json_free(opt);
    int rc = st == LSE_OK ? LSEFIT_OK : lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_set_standardize(doc, f->d.mean, f->d.scale);
    if (rc != LSEFIT_OK) {
        lse_json_free(doc);
        return rc;
    }
    *out = doc;
    return LSEFIT_OK;
}

/* Write the model, read it back, and compute every output from it. */
static int save(lsefit_fit *f, const void *m, const lsefit_fit_result *r)
{
    const lsefit_model *M = f->model;
    const char *name = f->output ? f->output : "<model>";
    lse_json *doc = NULL, *back_doc = NULL;
    lsefit_model_file back = {0};
    char *text = NULL;
    lse_error err;
    char sub[64];
    int rc = M->model_json != NULL ? M->model_json(f, m, r, &doc)
                                   : model_json(f, m, r, &doc);
    if (rc == LSEFIT_OK && M->after_json != NULL)
        rc = M->after_json(f, m, doc);
    if (rc == LSEFIT_OK && lse_json_to_string(doc, &text, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK &&
        lse_json_parse(text, strlen(text), name, &back_doc, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_model_from_json(M, back_doc, name, &back);
    if (rc == LSEFIT_OK && M->write_rows != NULL)
        rc = M->write_rows(f, &back);
    if (rc == LSEFIT_OK && f->output != NULL) {
        rc = lsefit_write(f->output, text, strlen(text));
        if (rc == LSEFIT_OK && strcmp(f->output, "-") != 0)
            lsefit_note("wrote %s: K = %zu%s, %s %.10g, BIC %.10g, %s "
                        "after %zu iterations",
                        f->output, r->k, sub_text(f, r->sub, sub, sizeof sub),
                        M->loglik_label ? M->loglik_label : "loglik",
                        r->loglik, r->bic,
                        r->converged ? "converged" : "NOT converged",
                        r->n_iter);
    } else if (rc == LSEFIT_OK) {
        rc = M->summary(f, stdout, &back, r);
    }
    if (rc == LSEFIT_OK && !r->converged)
        lsefit_note("warning: EM did not converge in %zu iterations (raise "
                    "--max-iter or --tol)",
                    f->max_iter);
    free(text);
    lse_json_free(doc);
    lse_json_free(back_doc);
    lsefit_model_file_free(M, &back);
    return rc;
}

/* ------------------------------------------------------------------ */
/* The command                                                         */

/* Data, fits, outputs; the caller frees f's run state. */
static int run(lsefit_fit *f, void ***models_out, size_t *n_k)
{
    const lsefit_model *M = f->model;
    int rc = f->init_file ? restart(f) : LSEFIT_OK;
    if (rc == LSEFIT_OK)
        rc = load(f);
    if (rc == LSEFIT_OK)
        rc = lsefit_progress_open(&f->prog, M->name, f->log_json);
    if (rc != LSEFIT_OK)
        return rc;
    *n_k = n_fits(f);
    lsefit_fit_result *res = calloc(*n_k, sizeof *res);
    void **models = calloc(*n_k, sizeof *models);
    *models_out = models;
    size_t best = 0;
    if (res == NULL || models == NULL)
        rc = lsefit_fail("out of memory");
    M->prepare(f);
    if (rc == LSEFIT_OK)
        rc = fit_all(f, models, res, &best);
    const int rc_log = lsefit_progress_close(
        &f->prog, lsefit_mpi_is_root(f->comm) ? f->log_json : NULL);
    if (rc == LSEFIT_OK)
        rc = rc_log;
    /* process 0 writes every output */
    if (rc == LSEFIT_OK && lsefit_mpi_is_root(f->comm) && *n_k > 1) {
        FILE *tf =
            (f->output != NULL && strcmp(f->output, "-") == 0) ? stderr : stdout;
        print_table(tf, f, res, *n_k, best);
        if (f->output == NULL)
            fputc('\n', tf);
    }
    if (rc == LSEFIT_OK && lsefit_mpi_is_root(f->comm))
        rc = save(f, models[best], &res[best]);
    free(res);
    return rc;
}

int lsefit_fit_main(const lsefit_model *model, void *own, int argc,
                    char **argv)
{
    lsefit_fit f;
    memset(&f, 0, sizeof f);
    f.model = model;
    f.own = own;
    int help = 0;
    int rc = parse(&f, argc, argv, &help);
    if (help) {
        model->help(stdout);
        return LSEFIT_OK;
    }
    if (rc == LSEFIT_OK)
        rc = plan(&f);
    if (rc != LSEFIT_OK)
        return rc;
    if (f.mpi && lsefit_mpi_begin(&f.comm) != LSEFIT_OK)
        return LSEFIT_FAIL;
    void **models = NULL;
    size_t n_k = 0;
    rc = run(&f, &models, &n_k);
    for (size_t i = 0; models != NULL && i < n_k; i++)
        if (models[i] != NULL)
            model->free(models[i]);
    free(models);
    lsefit_model_file_free(model, &f.start);
    lsefit_data_free(&f.d);
    if (f.comm != NULL) /* commit on process 0 before the outcome is agreed */
        rc = lsefit_outputs_finish(rc);
    return lsefit_mpi_end(f.comm, rc);
}

/* ------------------------------------------------------------------ */
/* Queries of a model file                                             */

int lsefit_query_parse(const lsefit_query *q, int argc, char **argv,
                       lsefit_data_opts *dopt, const char **model_path,
                       const char **output, int *help)
{
    *output = "-";
    *help = 0;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":o:qh", q->options, NULL)) != -1) {
        if (lsefit_data_option(q->cmd, c, optarg, dopt, &rc))
            continue;
        if (c >= LSEFIT_FIT_OPT_MODEL)
            rc = q->option(q->user, c, optarg, dopt);
        else if (c == LSEFIT_FIT_OPT_COLUMNS)
            dopt->columns = optarg;
        else if (c == LSEFIT_FIT_OPT_IGNORE)
            dopt->ignore = optarg;
        else if (c == LSEFIT_FIT_OPT_MISSING)
            rc = lsefit_opt_missing(q->cmd, optarg, &dopt->missing);
        else if (c == 'o')
            *output = optarg;
        else if (c == 'q')
            lsefit_quiet = 1;
        else if (c == 'h')
            return *help = 1, LSEFIT_OK;
        else
            rc = lsefit_opt_bad(q->cmd, c, argv, q->options);
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 2)
        return lsefit_usage(q->cmd, "expected MODEL.json and %s",
                            q->data_word);
    *model_path = argv[optind];
    dopt->path = argv[optind + 1];
    return LSEFIT_OK;
}

/* ------------------------------------------------------------------ */
/* Drawing from a model file                                           */

static int draw_parse(const lsefit_draw *dr, int argc, char **argv,
                      size_t *n, unsigned long *seed, const char **output,
                      const char **labels, int *help)
{
    const struct option opts[] = {
        {dr->count_long, required_argument, NULL, dr->count},
        {"seed", required_argument, NULL, LSEFIT_FIT_OPT_SEED},
        {"output", required_argument, NULL, 'o'},
        {dr->labels_opt + 2, required_argument, NULL, LSEFIT_FIT_OPT_MODEL},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char shorts[] = {':', dr->count, ':', 'o', ':', 'q', 'h', '\0'};
    const char count_opt[] = {'-', dr->count, '\0'};
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
        if (c == dr->count)
            rc = lsefit_opt_size(dr->cmd, count_opt, optarg, 1, n);
        else if (c == LSEFIT_FIT_OPT_SEED)
            rc = lsefit_opt_seed(dr->cmd, optarg, seed);
        else if (c == 'o')
            *output = optarg;
        else if (c == LSEFIT_FIT_OPT_MODEL)
            *labels = optarg;
        else if (c == 'q')
            lsefit_quiet = 1;
        else if (c == 'h')
            return *help = 1, LSEFIT_OK;
        else
            rc = lsefit_opt_bad(dr->cmd, c, argv, opts);
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 1)
        return lsefit_usage(dr->cmd, "expected one MODEL.json");
    if (*n == 0)
        return lsefit_usage(dr->cmd, "missing -%c N (%s)", dr->count,
                            dr->count_what);
    const lsefit_path in[] = {{argv[optind], "the model"}};
    const lsefit_path out[] = {{*output, "-o"}, {*labels, dr->labels_opt}};
    return lsefit_plan(in, 1, out, 2);
}

/* The labels column of a draw. */
static int draw_labels(const lsefit_draw *dr, const char *path,
                       const size_t *labels, size_t n)
{
    lsefit_buf b;
    int rc = lsefit_buf_open(&b);
    if (rc == LSEFIT_OK) {
        fprintf(b.f, "%s\n", dr->labels_column);
        for (size_t i = 0; i < n; i++)
            fprintf(b.f, "%zu\n", labels[i]);
        rc = lsefit_buf_write(&b, path);
    }
    lsefit_buf_free(&b);
    return rc;
}

int lsefit_draw_main(const lsefit_model *model, const lsefit_draw *dr,
                     int argc, char **argv)
{
    const char *output = "-", *labels_path = NULL;
    size_t n = 0;
    unsigned long seed = 0;
    int help = 0;
    int rc = draw_parse(dr, argc, argv, &n, &seed, &output, &labels_path,
                        &help);
    if (help) {
        dr->help(stdout);
        return LSEFIT_OK;
    }
    lsefit_model_file g;
    if (rc == LSEFIT_OK)
        rc = lsefit_model_read(model, argv[optind], &g);
    if (rc != LSEFIT_OK)
        return rc;
    lse_error err;
    const size_t d = model->dim(g.m), w = d + (dr->extra ? dr->extra(g.m) : 0);
    gsl_matrix *x = gsl_matrix_alloc(n, w);
    size_t *labels = malloc(n * sizeof *labels);
    const char **names = malloc(w * sizeof *names);
    char(*extra)[32] = malloc((w - d + 1) * sizeof *extra);
    if (x == NULL || labels == NULL || names == NULL || extra == NULL)
        rc = lsefit_fail("out of memory");
    else if (dr->draw(g.m, n, seed, x, labels, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    for (size_t j = 0; rc == LSEFIT_OK && j < w; j++) {
        if (j >= d)
            dr->extra_name(g.m, j - d, extra[j - d], sizeof *extra);
        names[j] = j < d ? g.names[j] : extra[j - d];
    }
    if (rc == LSEFIT_OK) {
        gsl_matrix_view v = gsl_matrix_submatrix(x, 0, 0, n, d);
        lsefit_unstandardize(&v.matrix, g.mean, g.scale);
        char *text = NULL;
        size_t len = 0;
        if (lse_matrix_format_csv(x, names, 17, &text, &len, &err) != LSE_OK)
            rc = lsefit_fail_lib(&err, NULL);
        if (rc == LSEFIT_OK)
            rc = lsefit_write(output, text, len);
        free(text);
    }
    if (rc == LSEFIT_OK && labels_path != NULL)
        rc = draw_labels(dr, labels_path, labels, n);
    gsl_matrix_free(x);
    free(labels);
    free(names);
    free(extra);
    lsefit_model_file_free(model, &g);
    return rc;
}
