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

typedef struct em {
    lse_gaussian_config cfg;
    lse_sim_shape shape;
    size_t rows[2], cols[2];
    gsl_matrix *param[2];
    gsl_matrix *mu, *s, *r;
    const gsl_matrix *x;
    double *acc;
    void *work;
    size_t n, d, k;
} em;

static void em_free(em *e)
{
    if (e->work != NULL)
        lse_sim_gaussian->work_free(e->work);
    gsl_matrix_free(e->param[0]);
    gsl_matrix_free(e->param[1]);
    gsl_matrix_free(e->mu);
    gsl_matrix_free(e->s);
    gsl_matrix_free(e->r);
    free(e->acc);
    memset(e, 0, sizeof *e);
}

static int em_new(em *e, const gsl_matrix *x, lse_cov_model m, size_t k)
{
    memset(e, 0, sizeof *e);
    e->cfg = lse_cov_model_config(m);
    e->x = x;
    e->n = x->size1;
    e->d = x->size2;
    e->k = k;
    e->rows[0] = k;
    e->cols[0] = 1;
    e->rows[1] = lse_cov_chol_rows(e->cfg.cov, k);
    e->cols[1] = lse_cov_chol_cols(e->cfg.cov, e->d);
    e->shape = (lse_sim_shape){.n_child = e->n,
                               .block = e->n,
                               .n_parent = k,
                               .d_child = e->d,
                               .d_parent = e->d,
                               .n_param = 2,
                               .param_rows = e->rows,
                               .param_cols = e->cols};
    e->param[0] = gsl_matrix_calloc(k, 1);
    e->param[1] = gsl_matrix_calloc(e->rows[1], e->cols[1]);
    e->mu = gsl_matrix_calloc(k, e->d);
    e->s = gsl_matrix_alloc(e->n, k);
    e->r = gsl_matrix_calloc(e->n, k);
    e->acc = malloc(lse_sim_gaussian->stats_size(&e->shape, &e->cfg) *
                    sizeof *e->acc);
    if (e->param[0] == NULL || e->param[1] == NULL || e->mu == NULL ||
        e->s == NULL || e->r == NULL || e->acc == NULL ||
        lse_sim_gaussian->work_new(&e->shape, &e->cfg, &e->work) != LSE_OK) {
        em_free(e);
        return LSEFIT_FAIL;
    }
    lse_cov_chol_scaled_identity(e->cfg.cov, e->d, 1.0, e->param[1]);
    return LSEFIT_OK;
}

static lse_sim_args em_args(const em *e)
{
    return (lse_sim_args){.child = e->x,
                          .parent = e->mu,
                          .param = (const gsl_matrix *const *)e->param,
                          .config = &e->cfg,
                          .work = e->work};
}

/* E-step: responsibilities; returns the log-likelihood (NaN on failure) */
static double em_estep(em *e)
{
    const lse_sim_args a = em_args(e);
    if (lse_sim_gaussian->prepare(&a) != LSE_OK ||
        lse_sim_gaussian->eval(&a, e->s) != LSE_OK)
        return NAN;
    double ll = 0.0;
    for (size_t i = 0; i < e->n; i++) {
        double mx = -INFINITY;
        for (size_t k = 0; k < e->k; k++)
            mx = fmax(mx, gsl_matrix_get(e->s, i, k));
        double t = 0.0;
        for (size_t k = 0; k < e->k; k++)
            t += exp(gsl_matrix_get(e->s, i, k) - mx);
        const double l = mx + log(t);
        ll += l;
        for (size_t k = 0; k < e->k; k++)
            gsl_matrix_set(e->r, i, k, exp(gsl_matrix_get(e->s, i, k) - l));
    }
    return ll;
}

static int em_mstep(em *e, double reg)
{
    const lse_sim_args a = em_args(e);
    memset(e->acc, 0,
           lse_sim_gaussian->stats_size(&e->shape, &e->cfg) * sizeof *e->acc);
    /* the statistics are taken about the current parameters: their cache
     * must be theirs (SQUAREM and restarts set parameters directly) */
    if (lse_sim_gaussian->prepare(&a) != LSE_OK ||
        lse_sim_gaussian->stats(&a, e->r, NULL, e->acc) != LSE_OK)
        return LSEFIT_FAIL;
    const lse_mstep_opts o = {.reg_covar = reg, .min_count = 1e-10};
    char msg[256];
    return lse_sim_gaussian->solve(&a, e->acc, e->mu, e->param, &o, NULL, msg,
                                   sizeof msg) == LSE_OK
               ? LSEFIT_OK
               : LSEFIT_FAIL;
}

/* up to max_iter EM iterations from the current responsibilities;
 * returns the log-likelihood (NaN: a singular fit) */
static size_t em_steps;    /* EM steps (M-steps), all runs */
static size_t final_steps; /* those of the final runs */

static double em_run(em *e, double reg, size_t max_iter, double tol)
{
    double prev = NAN;
    for (size_t it = 0; it < max_iter; it++) {
        em_steps++;
        if (em_mstep(e, reg) != LSEFIT_OK)
            return NAN;
        const double ll = em_estep(e);
        if (!isfinite(ll))
            return NAN;
        if (isfinite(prev) && fabs(ll - prev) <= tol * fabs(ll))
            return ll;
        prev = ll;
    }
    return prev;
}

/* the parameters (logw, means, chol) as one vector and back */
static size_t em_size(const em *e)
{
    return e->k + e->k * e->d + e->rows[1] * e->cols[1];
}

static void em_get(const em *e, double *v)
{
    memcpy(v, e->param[0]->data, e->k * sizeof *v);
    memcpy(v + e->k, e->mu->data, e->k * e->d * sizeof *v);
    memcpy(v + e->k + e->k * e->d, e->param[1]->data,
           e->rows[1] * e->cols[1] * sizeof *v);
}

static void em_put(em *e, const double *v)
{
    memcpy(e->param[0]->data, v, e->k * sizeof *v);
    memcpy(e->mu->data, v + e->k, e->k * e->d * sizeof *v);
    memcpy(e->param[1]->data, v + e->k + e->k * e->d,
           e->rows[1] * e->cols[1] * sizeof *v);
}

/* SQUAREM (Varadhan & Roland 2008, scheme S3 with the monotone
 * safeguard): from theta0, two EM steps theta1 = F(theta0), theta2 =
 * F(theta1); r = theta1 - theta0, v = theta2 - 2 theta1 + theta0,
 * alpha = -|r| / |v| (at most -1); theta' = theta0 - 2 alpha r + alpha^2 v,
 * then one EM step from theta' (which also makes the covariances feasible
 * for the constrained models). If that is not finite or its
 * log-likelihood is below theta2's, theta2 is kept (plain EM) and the
 * largest step allowed is halved, else doubled (up to unbounded). Stops
 * like em_run on the change of the log-likelihood between cycles. On
 * entry e->r holds the responsibilities of the current parameters. */
static double em_squarem(em *e, double reg, size_t max_iter, double tol)
{
    const size_t np = em_size(e);
    double *t0 = malloc(4 * np * sizeof *t0);
    gsl_matrix *r2 = gsl_matrix_alloc(e->n, e->k);
    if (t0 == NULL || r2 == NULL) {
        free(t0);
        gsl_matrix_free(r2);
        return em_run(e, reg, max_iter, tol);
    }
    double *t1 = t0 + np, *t2 = t1 + np, *tp = t2 + np;
    double prev = NAN, amax = INFINITY;
    size_t steps = 1;
    em_steps++;
    if (em_mstep(e, reg) != LSEFIT_OK || !isfinite(em_estep(e)))
        steps = max_iter + 1; /* singular: NaN below */
    while (steps < max_iter) {
        em_get(e, t0);
        em_steps += 2;
        steps += 2;
        if (em_mstep(e, reg) != LSEFIT_OK || !isfinite(em_estep(e))) {
            prev = NAN;
            break;
        }
        em_get(e, t1);
        if (em_mstep(e, reg) != LSEFIT_OK) {
            prev = NAN;
            break;
        }
        const double ll2 = em_estep(e);
        if (!isfinite(ll2)) {
            prev = NAN;
            break;
        }
        em_get(e, t2);
        gsl_matrix_memcpy(r2, e->r);
        double rr = 0.0, vv = 0.0;
        for (size_t i = 0; i < np; i++) {
            const double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
            rr += r * r;
            vv += v * v;
        }
        double ll = ll2;
        if (vv > 0.0) {
            double alpha = -sqrt(rr / vv);
            if (alpha > -1.0)
                alpha = -1.0;
            if (-alpha > amax)
                alpha = -amax;
            for (size_t i = 0; i < np; i++) {
                const double r = t1[i] - t0[i],
                             v = t2[i] - 2.0 * t1[i] + t0[i];
                tp[i] = t0[i] - 2.0 * alpha * r + alpha * alpha * v;
            }
            em_put(e, tp);
            int ok = alpha < -1.0 && isfinite(em_estep(e));
            double llp = NAN;
            if (ok) {
                em_steps++;
                steps++;
                ok = em_mstep(e, reg) == LSEFIT_OK;
                if (ok)
                    llp = em_estep(e);
                ok = ok && isfinite(llp) && llp >= ll2;
            }
            if (ok) {
                ll = llp;
                amax = fmin(2.0 * amax, INFINITY);
            } else {
                em_put(e, t2);
                gsl_matrix_memcpy(e->r, r2);
                if (alpha < -1.0)
                    amax = fmax(1.0, -alpha / 2.0);
            }
        }
        if (isfinite(prev) && fabs(ll - prev) <= tol * fabs(ll)) {
            prev = ll;
            break;
        }
        prev = ll;
    }
    free(t0);
    gsl_matrix_free(r2);
    if (!isfinite(prev))
        return NAN;
    return em_estep(e);
}

/* one-hot responsibilities from a k-means++ / Lloyd partition */
static int kmeans_start(em *e, gsl_rng *rng, size_t *labels, gsl_vector *ones)
{
    gsl_matrix *c = gsl_matrix_alloc(e->k, e->d);
    gsl_vector *d2 = gsl_vector_alloc(e->n), *sums = gsl_vector_alloc(e->k);
    int rc = LSEFIT_FAIL;
    if (c != NULL && d2 != NULL && sums != NULL &&
        lse_kmeans_seed(e->x, ones, rng, c, d2, 0, NULL, NULL) == LSE_OK &&
        lse_kmeans_lloyd(e->x, ones, c, 1000, labels, sums, NULL, 0, NULL,
                         NULL) == LSE_OK) {
        gsl_matrix_set_zero(e->r);
        for (size_t i = 0; i < e->n; i++)
            gsl_matrix_set(e->r, i, labels[i], 1.0);
        rc = LSEFIT_OK;
    }
    gsl_matrix_free(c);
    gsl_vector_free(d2);
    gsl_vector_free(sums);
    return rc;
}

typedef struct cell {
    double loglik, bic, icl;
    size_t n_params;
    int ok;
} cell;

/* emEM: n_init short runs from k-means partitions, the best one continued
 * to convergence */
static cell fit_one(const gsl_matrix *x, lse_cov_model m, size_t k,
                    const sel_args *a, const size_t *pairs)
{
    cell out = {.ok = 0};
    em e, best;
    if (em_new(&e, x, m, k) != LSEFIT_OK)
        return out;
    if (em_new(&best, x, m, k) != LSEFIT_OK) {
        em_free(&e);
        return out;
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    size_t *labels = calloc(x->size1, sizeof *labels);
    gsl_vector *ones = gsl_vector_alloc(x->size1);
    const size_t starts = k == 1 ? 1 : a->n_init;
    gsl_matrix **keep = calloc(starts, sizeof *keep);
    double *kll = calloc(starts, sizeof *kll);
    if (rng != NULL && labels != NULL && ones != NULL && keep != NULL &&
        kll != NULL) {
        gsl_vector_set_all(ones, 1.0);
        gsl_rng_set(rng, a->seed + 7919 * k + 104729 * (size_t)m);
        for (size_t s = 0; s < starts; s++) {
            kll[s] = -INFINITY;
            if (pairs != NULL) {
                /* --init hc: the one partition of the tree into k */
                if (s > 0 || lse_hc_cut(x->size1, pairs, k, labels) != LSE_OK)
                    continue;
                gsl_matrix_set_zero(e.r);
                for (size_t i = 0; i < x->size1; i++)
                    gsl_matrix_set(e.r, i, labels[i], 1.0);
                if ((keep[s] = gsl_matrix_alloc(x->size1, k)) != NULL) {
                    kll[s] = 0.0;
                    gsl_matrix_memcpy(keep[s], e.r);
                }
                continue;
            }
            if (kmeans_start(&e, rng, labels, ones) != LSEFIT_OK)
                continue;
            const double ll = em_run(&e, a->reg_covar, a->short_iter, a->tol);
            if (isfinite(ll) && (keep[s] = gsl_matrix_alloc(x->size1, k)) !=
                                    NULL) {
                kll[s] = ll;
                gsl_matrix_memcpy(keep[s], e.r);
            }
        }
        /* the best short run to convergence; if it turns singular, the
         * next best */
        for (size_t tries = 0; tries < starts && !out.ok; tries++) {
            size_t bs = starts;
            for (size_t s = 0; s < starts; s++)
                if (keep[s] != NULL && (bs == starts || kll[s] > kll[bs]))
                    bs = s;
            if (bs == starts)
                break;
            gsl_matrix_memcpy(best.r, keep[bs]);
            /* the responsibilities of the kept short run's parameters */
            const size_t s0 = em_steps;
            double ll =
                a->squarem
                    ? em_squarem(&best, a->reg_covar, a->max_iter, a->tol)
                    : em_run(&best, a->reg_covar, a->max_iter, a->tol);
            if (!isfinite(ll) && a->squarem) {
                /* an extrapolation ran into a singular covariance (the
                 * likelihood is unbounded there): plain EM from the same
                 * start instead */
                gsl_matrix_memcpy(best.r, keep[bs]);
                gsl_matrix_set_zero(best.param[0]);
                gsl_matrix_set_zero(best.mu);
                lse_cov_chol_scaled_identity(best.cfg.cov, best.d, 1.0,
                                             best.param[1]);
                ll = em_run(&best, a->reg_covar, a->max_iter, a->tol);
            }
            final_steps += em_steps - s0;
            gsl_matrix_free(keep[bs]);
            keep[bs] = NULL;
            if (isfinite(ll)) {
                out.ok = 1;
                out.loglik = ll;
                out.n_params = lse_cov_model_n_params(m, k, x->size2);
                out.bic = lse_cov_model_bic(m, k, x->size2, x->size1, ll);
                double c = 0.0; /* ICL: BIC + 2 sum_i log max_k z_ik */
                for (size_t i = 0; i < x->size1; i++) {
                    double mx = 0.0;
                    for (size_t j = 0; j < k; j++)
                        mx = fmax(mx, gsl_matrix_get(best.r, i, j));
                    c += log(mx);
                }
                out.icl = out.bic + 2.0 * c;
            }
        }
    }
    for (size_t s = 0; keep != NULL && s < starts; s++)
        gsl_matrix_free(keep[s]);
    free(keep);
    free(kll);
    gsl_rng_free(rng);
    free(labels);
    gsl_vector_free(ones);
    em_free(&e);
    em_free(&best);
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
            "(default squarem)\n"
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
    for (int m = 1; m <= N_MODELS; m++)
        if (a.models[m])
            for (size_t k = a.kmin; k <= a.kmax; k++)
                tab[(k - a.kmin) * (N_MODELS + 1) + (size_t)m] =
                    fit_cell(data.x, (lse_cov_model)m, k, &a, pairs);
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
    fprintf(f, "to |change| <= %g |loglik| "
               "(--accel %s: %zu EM steps, %zu in the final runs); %.2f s\n",
            a.tol,
            a.squarem ? "squarem" : "none", em_steps, final_steps, secs);
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
