/* lsefit gmm FILE -k A:B --covariance all|LIST: mclust's model selection,
 * a BIC (and ICL) table over mclust's 14 covariance models and a range of
 * K, with its top three (docs/lsefit.md, "Model tables"). Each fit is EM
 * on the gaussian similarity with the model's M-step
 * (lse_gaussian_config.model); by default the better of two fits: one
 * from the best of several short runs from k-means++ / Lloyd partitions
 * (emEM), one from mclust's hcVVV partition (--init emem+hc). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_rng.h>

#include "lsefit_cmd.h"
#include "lsefit_data.h"

#define N_MODELS 14
#define HC_DEFAULT_MAX_ROWS 2000

typedef struct sel_args {
    lsefit_data_opts data;
    size_t kmin, kmax;
    int models[N_MODELS + 1]; /* lse_cov_model flags */
    size_t n_init, short_iter, max_iter;
    double tol, reg_covar;
    int squarem; /* --accel squarem */
    int hc;      /* --init hc (1: Ward / EII, 2: hcvvv, mclust's) */
    unsigned long seed;
    const char *out;
} sel_args;

typedef struct cell {
    double loglik, bic, icl;
    size_t n_params, n_iter; /* n_iter: EM steps of the final run */
    int ok;
} cell;

/* Does lse_gmm_fit accelerate model m? SQUAREM's straight line stays in
 * the model only where its constraints are linear in the Cholesky
 * factors (models/gmm_fit.c): the other 8 models run plain EM. */
static int model_squarem(lse_cov_model m)
{
    return m == LSE_COV_EII || m == LSE_COV_VII || m == LSE_COV_EEI ||
           m == LSE_COV_VVI || m == LSE_COV_EEE || m == LSE_COV_VVV;
}

/* The cell of a fitted model: BIC and ICL (BIC + 2 sum_i log max_k z_ik,
 * mclust's icl) from its posterior on x. */
static cell cell_of(const lse_gmm *g, const gsl_matrix *x, lse_cov_model m)
{
    cell out = {.ok = 0};
    const size_t n = x->size1, k = lse_gmm_k(g);
    gsl_matrix *z = gsl_matrix_alloc(n, k);
    if (z == NULL ||
        lse_gmm_posterior(g, x, LSE_GMM_MISSING_ERROR, z, NULL, NULL) !=
            LSE_OK) {
        gsl_matrix_free(z);
        return out;
    }
    const lse_gmm_fit_info *info = lse_gmm_info(g);
    out.ok = 1;
    out.loglik = info->loglik;
    out.n_iter = info->n_iter;
    out.n_params = lse_cov_model_n_params(m, k, x->size2);
    out.bic = lse_cov_model_bic(m, k, x->size2, n, info->loglik);
    double c = 0.0;
    for (size_t i = 0; i < n; i++) {
        double mx = 0.0;
        for (size_t j = 0; j < k; j++)
            mx = fmax(mx, gsl_matrix_get(z, i, j));
        c += log(mx);
    }
    out.icl = out.bic + 2.0 * c;
    gsl_matrix_free(z);
    return out;
}

/* The library's warnings during the table (EM energy rises of the
 * iterative M-steps with reg_covar 0, mostly in the first iterations from
 * a start): counted and summarized in one line, not printed per step. */
static size_t n_warn;

static void count_warn(lse_log_level level, const char *message, void *user)
{
    (void)message;
    (void)user;
    n_warn += level == LSE_LOG_WARN;
}

/* One cell by the library's fit (lse_gmm_fit_emem): emEM, n_init short
 * runs of short_iter iterations from k-means++ seeds refined by Lloyd's
 * algorithm to convergence, the best continued to convergence; or, with
 * the tree pairs (--init hc, hcvvv), the one start of its cut into k. If
 * the accelerated run ends singular (the likelihood is unbounded near a
 * collapsing component), the same starts again with plain EM; if the
 * best short run turns singular, all of them continued (the best that
 * does not). */
static cell fit_one(const gsl_matrix *x, lse_cov_model m, size_t k,
                    const sel_args *a, const size_t *pairs)
{
    cell out = {.ok = 0};
    const size_t n = x->size1, d = x->size2;
    lse_gmm *g = NULL, *start = NULL;
    size_t *labels = NULL;
    if (lse_gmm_new_model(k, d, m, &g, NULL) != LSE_OK)
        return out;
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.lloyd_iter = 1000;
    o.max_iter = a->max_iter;
    o.tol = a->tol;
    o.reg_covar = a->reg_covar;
    o.seed = a->seed + 7919 * k + 104729 * (size_t)m;
    o.accel = a->squarem ? LSE_GMM_ACCEL_SQUAREM : LSE_GMM_ACCEL_NONE;
    lse_gmm_emem_opts e = {.n_starts = k == 1 ? 1 : a->n_init,
                           .short_iter = a->short_iter,
                           .n_keep = 1,
                           .n_rounds = 1};
    int ok = 1;
    if (pairs != NULL) { /* the one partition of the tree into k */
        labels = malloc(n * sizeof *labels);
        ok = labels != NULL && lse_hc_cut(n, pairs, k, labels) == LSE_OK &&
             lse_gmm_new_model(k, d, m, &start, NULL) == LSE_OK &&
             lse_gmm_init_labels(start, x, labels, a->reg_covar, NULL) ==
                 LSE_OK;
        e.n_starts = 0;
    }
    const lse_gmm *const given[1] = {start};
    lse_status st = LSE_EINVAL;
    if (ok) {
        st = lse_gmm_fit_emem(g, x, &o, &e, given, start != NULL, NULL);
        if (st != LSE_OK && o.accel == LSE_GMM_ACCEL_SQUAREM &&
            model_squarem(m)) {
            o.accel = LSE_GMM_ACCEL_NONE;
            st = lse_gmm_fit_emem(g, x, &o, &e, given, start != NULL, NULL);
        }
        if (st != LSE_OK && e.n_starts > 1) {
            /* the best short run turns singular: every one continued,
             * the best that does not */
            e.n_keep = e.n_starts;
            st = lse_gmm_fit_emem(g, x, &o, &e, given, start != NULL, NULL);
        }
    }
    if (st == LSE_OK)
        out = cell_of(g, x, m);
    free(labels);
    lse_gmm_free(start);
    lse_gmm_free(g);
    return out;
}

/* --init emem+hc: the better of the emEM fit and the hcVVV-start fit */
static cell fit_cell(const gsl_matrix *x, lse_cov_model m, size_t k,
                     const sel_args *a, const size_t *pairs)
{
    if (a->hc != 3)
        return fit_one(x, m, k, a, pairs);
    const cell h = fit_one(x, m, k, a, pairs);
    const cell e = fit_one(x, m, k, a, NULL);
    return !h.ok || (e.ok && e.loglik > h.loglik) ? e : h;
}

int lsefit_select_wanted(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--covariance") == 0) {
            const char *v = argv[i + 1];
            lse_cov_type t;
            lse_cov_model m;
            if (lse_cov_parse(v, &t) == LSE_OK)
                return 0; /* one of the four */
            /* one mclust model and one K: an ordinary fit of that model */
            for (int j = 1; j + 1 < argc; j++)
                if ((strcmp(argv[j], "-k") == 0 ||
                     strcmp(argv[j], "--components") == 0) &&
                    strchr(argv[j + 1], ':') == NULL &&
                    lse_cov_model_parse(v, &m) == LSE_OK)
                    return 0;
            return 1;
        }
    return 0;
}

/* --init hc: Ward / EII agglomeration (lse_hc_ward) of the whitened data
 * (centred, times the inverse Cholesky factor of the sample covariance: the
 * tree of mclust's hcUse = "SVD" up to a rotation, which Ward ignores) */
static int hc_tree(const gsl_matrix *x, int vvv, size_t **out)
{
    const size_t n = x->size1, d = x->size2;
    gsl_matrix *z = gsl_matrix_alloc(n, d), *c = gsl_matrix_calloc(d, d);
    size_t *pairs = malloc(2 * (n > 1 ? n - 1 : 1) * sizeof *pairs);
    double *cost = malloc((n > 1 ? n - 1 : 1) * sizeof *cost);
    int rc = LSEFIT_FAIL;
    if (z != NULL && c != NULL && pairs != NULL && cost != NULL) {
        gsl_matrix_memcpy(z, x);
        for (size_t j = 0; j < d; j++) {
            double m = 0.0;
            for (size_t i = 0; i < n; i++)
                m += gsl_matrix_get(z, i, j);
            m /= (double)n;
            for (size_t i = 0; i < n; i++)
                *gsl_matrix_ptr(z, i, j) -= m;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b <= a; b++)
                    *gsl_matrix_ptr(c, a, b) +=
                        gsl_matrix_get(z, i, a) * gsl_matrix_get(z, i, b) /
                        (double)n;
        lse_error err;
        if (vvv) {
            /* mclust's default: hcVVV of the SVD-transformed data */
            if (lse_hc_svd(x, z, &err) == LSE_OK &&
                lse_hc_vvv(z, pairs, cost, &err) == LSE_OK)
                rc = LSEFIT_OK;
            else
                lsefit_fail("--init hcvvv: %s", lsefit_strip(&err));
        } else if (gsl_linalg_cholesky_decomp1(c) == GSL_SUCCESS) {
            /* z <- z L^-T */
            gsl_blas_dtrsm(CblasRight, CblasLower, CblasTrans, CblasNonUnit,
                           1.0, c, z);
            if (lse_hc_ward(z, pairs, cost, &err) == LSE_OK)
                rc = LSEFIT_OK;
            else
                lsefit_fail_lib(&err, NULL);
        } else {
            lsefit_fail("--init hc: the data's covariance is singular (a "
                        "constant or collinear column); drop it with "
                        "--ignore");
        }
    } else {
        lsefit_fail("out of memory");
    }
    gsl_matrix_free(z);
    gsl_matrix_free(c);
    free(cost);
    if (rc != LSEFIT_OK) {
        free(pairs);
        pairs = NULL;
    }
    *out = pairs;
    return rc;
}

static int parse_models(const char *s, int *models)
{
    if (strcmp(s, "all") == 0) {
        for (int m = 1; m <= N_MODELS; m++)
            models[m] = 1;
        return LSEFIT_OK;
    }
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return LSEFIT_USAGE;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        lse_cov_model m;
        if (lse_cov_model_parse(tok, &m) != LSE_OK)
            return LSEFIT_USAGE;
        models[m] = 1;
    }
    return LSEFIT_OK;
}

static void help_select(FILE *f)
{
    fprintf(f,
            "usage: lsefit gmm FILE --covariance all|MODEL[,MODEL...] "
            "[-k A:B] [options]\n"
            "mclust's model table: BIC and ICL for each covariance model "
            "(EII VII EEI VEI EVI\nVVI EEE VEE EVE VVE EEV VEV EVV VVV; "
            "full = VVV, diag = VVI, spherical = VII,\ntied = EEE) and each "
            "K, and the top three by BIC.\n"
            "  -k A:B                 components (default 1:9)\n"
            "  --columns LIST, --ignore LIST   columns to use / skip\n"
            "  --n-init N             short EM runs from k-means++ starts "
            "(default 10)\n"
            "  --short-iter N         iterations of each short run "
            "(default 20)\n"
            "  --max-iter N           iterations of the final run "
            "(default 10000)\n"
            "  --tol X                stop when |change of loglik| <= X "
            "|loglik| (default 1e-10)\n"
            "  --reg-covar X          added to the covariances "
            "(default 0, as mclust)\n"
            "  --accel none|squarem   acceleration of the final runs "
            "(default squarem: for\n"
            "                         EII VII EEI VVI EEE VVV; VEI EVI VEE "
            "EVE VVE EEV VEV EVV\n"
            "                         always run plain EM)\n"
            "  --init kmeans|hc|hcvvv|emem+hc\n"
            "                         kmeans: emEM from k-means++ starts; "
            "hc, hcvvv: one start\n"
            "                         per K from a Ward/EII hierarchical "
            "tree of the whitened data\n"
            "                         (hc) or from mclust's hcVVV tree of "
            "the SVD-transformed\n"
            "                         data (hcvvv, mclust's default); "
            "emem+hc (default): the\n"
            "                         better of the emEM fit and the hcvvv one\n"
            "  --seed S               (default 0)\n"
            "  -o FILE                the table as CSV (model,K,loglik,"
            "n_params,BIC,ICL)\n");
}

/* The options of the model table; *help when --help was answered. */
static int select_parse(int argc, char **argv, sel_args *out, int *help)
{
    const char *cmd = "gmm";
    sel_args a = {.kmin = 1,
                  .kmax = 9,
                  .n_init = 10,
                  .short_iter = 20,
                  .max_iter = 10000,
                  .tol = 1e-10,
                  .reg_covar = 0.0,
                  .squarem = 1,
                  .hc = 3, /* emem+hc: docs/lsefit.md, "Model tables" */
                  .seed = 0};
    a.data.missing = LSE_MISSING_ERROR;
    enum { O_COV = 256, O_COLS, O_IGN, O_NINIT, O_SHORT, O_MAXIT, O_TOL,
           O_REG, O_SEED, O_ACCEL, O_INIT };
    static const struct option opts[] = {
        {"covariance", required_argument, NULL, O_COV},
        {"columns", required_argument, NULL, O_COLS},
        {"ignore", required_argument, NULL, O_IGN},
        {"n-init", required_argument, NULL, O_NINIT},
        {"short-iter", required_argument, NULL, O_SHORT},
        {"max-iter", required_argument, NULL, O_MAXIT},
        {"tol", required_argument, NULL, O_TOL},
        {"reg-covar", required_argument, NULL, O_REG},
        {"seed", required_argument, NULL, O_SEED},
        {"accel", required_argument, NULL, O_ACCEL},
        {"init", required_argument, NULL, O_INIT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c, rc = LSEFIT_OK;
    optind = 1;
    opterr = 0;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":k:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'k':
            rc = lsefit_opt_krange(cmd, optarg, &a.kmin, &a.kmax);
            break;
        case 'o':
            a.out = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'h':
            help_select(stdout);
            *help = 1;
            return LSEFIT_OK;
        case O_COV:
            if (parse_models(optarg, a.models) != LSEFIT_OK)
                rc = lsefit_usage(cmd,
                                  "--covariance '%s': expected all, full, "
                                  "diag, spherical, tied or mclust's names "
                                  "(EII,VII,...,VVV) separated by commas",
                                  optarg);
            break;
        case O_COLS:
            a.data.columns = optarg;
            break;
        case O_IGN:
            a.data.ignore = optarg;
            break;
        case O_NINIT:
            rc = lsefit_opt_size(cmd, "--n-init", optarg, 1, &a.n_init);
            break;
        case O_SHORT:
            rc = lsefit_opt_size(cmd, "--short-iter", optarg, 1, &a.short_iter);
            break;
        case O_MAXIT:
            rc = lsefit_opt_size(cmd, "--max-iter", optarg, 1, &a.max_iter);
            break;
        case O_TOL:
            rc = lsefit_opt_double(cmd, "--tol", optarg, 0.0, 1, &a.tol);
            break;
        case O_REG:
            rc = lsefit_opt_double(cmd, "--reg-covar", optarg, 0.0, 1,
                                   &a.reg_covar);
            break;
        case O_SEED:
            rc = lsefit_opt_seed(cmd, optarg, &a.seed);
            break;
        case O_INIT:
            if (strcmp(optarg, "kmeans") == 0 || strcmp(optarg, "hc") == 0 ||
                strcmp(optarg, "hcvvv") == 0 || strcmp(optarg, "emem+hc") == 0)
                a.hc = strcmp(optarg, "hc") == 0        ? 1
                       : strcmp(optarg, "hcvvv") == 0   ? 2
                       : strcmp(optarg, "emem+hc") == 0 ? 3
                                                        : 0;
            else
                rc = lsefit_usage(cmd,
                                  "--init '%s': expected kmeans, hc, hcvvv or "
                                  "emem+hc",
                                  optarg);
            break;
        case O_ACCEL:
            if (strcmp(optarg, "none") == 0 || strcmp(optarg, "squarem") == 0)
                a.squarem = strcmp(optarg, "squarem") == 0;
            else
                rc = lsefit_usage(cmd,
                                  "--accel '%s': expected none or squarem",
                                  optarg);
            break;
        default:
            rc = lsefit_usage(cmd,
                              "%s: not an option of the model table "
                              "(--covariance all); see lsefit gmm "
                              "--covariance all --help",
                              argv[optind - 1]);
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 1)
        return lsefit_usage(cmd, "--covariance all: expected one data file");
    a.data.path = argv[optind];
    *out = a;
    return LSEFIT_OK;
}

/* The BIC and ICL tables over K and the models, each with its top 3. */
static void print_criteria(FILE *f, const sel_args *sa, const cell *tab)
{
    const sel_args a = *sa;
    const char *what[2] = {"BIC", "ICL"};
    for (int w = 0; w < 2; w++) {
        fprintf(f, "%s (mclust's sign: 2 loglik - n_params log n, larger is "
                   "better;\n     scikit-learn's bic() is minus this, "
                   "smaller is better)%s\n",
                what[w],
                w == 1 ? "\n     ICL = BIC + 2 sum_i log max_k z_ik" : "");
        fprintf(f, "%3s", "K");
        for (int m = 1; m <= N_MODELS; m++)
            if (a.models[m])
                fprintf(f, " %10s", lse_cov_model_name((lse_cov_model)m));
        fprintf(f, "\n");
        for (size_t k = a.kmin; k <= a.kmax; k++) {
            fprintf(f, "%3zu", k);
            for (int m = 1; m <= N_MODELS; m++) {
                if (!a.models[m])
                    continue;
                const cell *c2 = &tab[(k - a.kmin) * (N_MODELS + 1) + (size_t)m];
                if (c2->ok)
                    fprintf(f, " %10.3f", w == 0 ? c2->bic : c2->icl);
                else
                    fprintf(f, " %10s", "NA");
            }
            fprintf(f, "\n");
        }
        /* top three */
        fprintf(f, "Top 3 models by %s:", what[w]);
        int used[3][2] = {{0}};
        for (int r = 0; r < 3; r++) {
            double best = -INFINITY;
            int bm = 0;
            size_t bk = 0;
            for (int m = 1; m <= N_MODELS; m++)
                for (size_t k = a.kmin; k <= a.kmax && a.models[m]; k++) {
                    const cell *c2 =
                        &tab[(k - a.kmin) * (N_MODELS + 1) + (size_t)m];
                    const double v = w == 0 ? c2->bic : c2->icl;
                    int taken = 0;
                    for (int q = 0; q < r; q++)
                        taken |= used[q][0] == m && used[q][1] == (int)k;
                    if (c2->ok && !taken && v > best) {
                        best = v;
                        bm = m;
                        bk = k;
                    }
                }
            if (bm == 0)
                break;
            used[r][0] = bm;
            used[r][1] = (int)bk;
            fprintf(f, "%s %s,%zu = %.3f", r ? ";" : "",
                    lse_cov_model_name((lse_cov_model)bm), bk, best);
        }
        fprintf(f, "\n\n");
    }
}

int lsefit_select_main(int argc, char **argv)
{
    sel_args a;
    int help = 0;
    int rc = select_parse(argc, argv, &a, &help);
    if (help || rc != LSEFIT_OK)
        return rc;
    lsefit_data data = {0};
    rc = lsefit_data_load(&a.data, &data);
    if (rc != LSEFIT_OK)
        return rc;
    const size_t nk = a.kmax - a.kmin + 1;
    cell *tab = calloc(nk * (N_MODELS + 1), sizeof *tab);
    if (tab == NULL) {
        lsefit_data_free(&data);
        return lsefit_fail("out of memory");
    }
    const double t0 = lsefit_now();
    size_t *pairs = NULL;
    if (a.hc == 3 && data.x->size1 > HC_DEFAULT_MAX_ROWS) {
        /* the tree costs O(n^2) memory and O(n^3) time: emEM alone */
        lsefit_note("%zu rows: the default start is emEM alone (the hcVVV "
                    "start is used up to %d rows; --init hcvvv forces it)",
                    data.x->size1, HC_DEFAULT_MAX_ROWS);
        a.hc = 0;
    }
    if (a.hc) {
        rc = hc_tree(data.x, a.hc >= 2, &pairs);
        if (rc != LSEFIT_OK) {
            free(tab);
            lsefit_data_free(&data);
            return rc;
        }
    }
    lse_log_fn old_fn;
    void *old_user;
    lse_get_log_handler(&old_fn, &old_user);
    lse_set_log_handler(count_warn, NULL);
    for (int m = 1; m <= N_MODELS; m++)
        if (a.models[m])
            for (size_t k = a.kmin; k <= a.kmax; k++)
                tab[(k - a.kmin) * (N_MODELS + 1) + (size_t)m] =
                    fit_cell(data.x, (lse_cov_model)m, k, &a, pairs);
    lse_set_log_handler(old_fn, old_user);
    if (n_warn > 0)
        lsefit_note("%zu library warnings during the fits (EM energy rises "
                    "of the iterative M-steps; lsefit gmm -k K --covariance "
                    "MODEL shows them for one cell)",
                    n_warn);
    const double secs = lsefit_now() - t0;

    FILE *f = stdout;
    print_criteria(f, &a, tab);
    if (a.hc == 3)
        fprintf(f, "%zu rows, d = %zu; the better of %zu short runs of %zu "
                   "iterations from k-means++ starts, the best, and the "
                   "hcVVV start (--init emem+hc), each ",
                data.x->size1, data.x->size2, a.n_init, a.short_iter);
    else if (a.hc)
        fprintf(f, "%zu rows, d = %zu; one start per K from the %s tree "
                   "(--init %s), ",
                data.x->size1, data.x->size2,
                a.hc == 2 ? "hcVVV" : "Ward/EII", a.hc == 2 ? "hcvvv" : "hc");
    else
        fprintf(f, "%zu rows, d = %zu; %zu short runs of %zu iterations from "
                   "k-means++ starts, the best ",
                data.x->size1, data.x->size2, a.n_init, a.short_iter);
    size_t final_steps = 0;
    for (size_t c = 0; c < nk * (N_MODELS + 1); c++)
        final_steps += tab[c].ok ? tab[c].n_iter : 0;
    fprintf(f, "to |change| <= %g |loglik| "
               "(--accel %s: %zu EM steps in the final runs); %.2f s\n",
            a.tol, a.squarem ? "squarem" : "none", final_steps, secs);
    if (a.squarem)
        fprintf(f, "SQUAREM accelerates EII VII EEI VVI EEE VVV; VEI EVI VEE "
                   "EVE VVE EEV VEV EVV run\nplain EM (their constraints are "
                   "not linear in the Cholesky factors)\n");
    if (a.out != NULL) {
        lsefit_buf b;
        rc = lsefit_buf_open(&b);
        if (rc == LSEFIT_OK) {
            fprintf(b.f, "model,K,loglik,n_params,BIC,ICL\n");
            for (int m = 1; m <= N_MODELS; m++)
                for (size_t k = a.kmin; k <= a.kmax && a.models[m]; k++) {
                    const cell *c2 =
                        &tab[(k - a.kmin) * (N_MODELS + 1) + (size_t)m];
                    if (c2->ok)
                        fprintf(b.f, "%s,%zu,%.17g,%zu,%.17g,%.17g\n",
                                lse_cov_model_name((lse_cov_model)m), k,
                                c2->loglik, c2->n_params, c2->bic, c2->icl);
                    else
                        fprintf(b.f, "%s,%zu,NA,NA,NA,NA\n",
                                lse_cov_model_name((lse_cov_model)m), k);
                }
            rc = lsefit_buf_write(&b, a.out);
            lsefit_buf_free(&b);
        }
    }
    free(tab);
    free(pairs);
    lsefit_data_free(&data);
    return rc;
}
