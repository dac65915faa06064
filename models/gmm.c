#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/*
 * Gaussian mixture model as an LSE graph: data node "x" (N, d), clamped;
 * PARAM nodes "mu" (K, d), "logw" (K, 1), "chol" (lse_cov_type layout); one
 * LSE term "mixture" with lse_sim_gaussian. The energy is the negative
 * log-likelihood; EM is lse_solver_em, whose M-step is the similarity's
 * closed form. Everything goes through the public API. Derivations:
 * docs/models/gmm.md.
 */

/* Child rows per similarity kernel call (set on every graph we build, so
 * the initial M-step can call the kernels in blocks of this size). */
#define GMM_BLOCK 256

struct lse_gmm {
    size_t k, d;
    lse_cov_type cov;
    gsl_vector *weights; /* (K), sum 1 */
    gsl_matrix *means;   /* (K, d) */
    gsl_matrix *chol;    /* graph layout: (K or 1, d*d | d | 1) */
    gsl_matrix *covs;    /* native: full (K*d, d), tied (d, d), diag (K, d),
                            spherical (K, 1) */
    lse_gmm_fit_info info;
    lse_gmm_event *events;
    size_t n_events;
};

/* ------------------------------------------------------------------ */
/* Shapes and names                                                    */

const char *lse_gmm_cov_name(lse_cov_type cov) { return lse_cov_name(cov); }

lse_status lse_gmm_cov_parse(const char *name, lse_cov_type *out)
{
    return lse_cov_parse(name, out);
}

static lse_gmm_fit_info empty_info(void)
{
    lse_gmm_fit_info i;
    memset(&i, 0, sizeof i);
    i.loglik = NAN;
    i.loglik_per_sample = NAN;
    i.n_eff = NAN;
    i.bic = NAN;
    i.aic = NAN;
    return i;
}

/* ------------------------------------------------------------------ */
/* Lifecycle and getters                                               */

void lse_gmm_free(lse_gmm *m)
{
    if (m == NULL)
        return;
    gsl_vector_free(m->weights);
    gsl_matrix_free(m->means);
    gsl_matrix_free(m->chol);
    gsl_matrix_free(m->covs);
    free(m->events);
    free(m);
}

lse_status lse_gmm_new(size_t k, size_t d, lse_cov_type cov, lse_gmm **out)
{
    if (out == NULL)
        return LSE_EFAULT;
    *out = NULL;
    lse_gsl_quiet();
    if (k == 0 || d == 0 || lse_gmm_cov_name(cov) == NULL)
        return LSE_EINVAL;
    lse_gmm *m = calloc(1, sizeof *m);
    if (m == NULL)
        return LSE_ENOMEM;
    m->k = k;
    m->d = d;
    m->cov = cov;
    m->weights = gsl_vector_alloc(k);
    m->means = gsl_matrix_calloc(k, d);
    m->chol =
        gsl_matrix_alloc(lse_cov_chol_rows(cov, k), lse_cov_chol_cols(cov, d));
    m->covs = gsl_matrix_alloc(lse_cov_rows(cov, k, d), lse_cov_cols(cov, d));
    if (m->weights == NULL || m->means == NULL || m->chol == NULL ||
        m->covs == NULL) {
        lse_gmm_free(m);
        return LSE_ENOMEM;
    }
    gsl_vector_set_all(m->weights, 1.0 / (double)k);
    lse_cov_chol_scaled_identity(cov, d, 1.0, m->chol);
    lse_cov_from_chol(cov, d, m->chol, m->covs);
    m->info = empty_info();
    *out = m;
    return LSE_OK;
}

size_t lse_gmm_k(const lse_gmm *m) { return m != NULL ? m->k : 0; }
size_t lse_gmm_dim(const lse_gmm *m) { return m != NULL ? m->d : 0; }
lse_cov_type lse_gmm_cov_type(const lse_gmm *m)
{
    return m != NULL ? m->cov : LSE_COV_FULL;
}
const gsl_vector *lse_gmm_weights(const lse_gmm *m)
{
    return m != NULL ? m->weights : NULL;
}
const gsl_matrix *lse_gmm_means(const lse_gmm *m)
{
    return m != NULL ? m->means : NULL;
}
const gsl_matrix *lse_gmm_covariances(const lse_gmm *m)
{
    return m != NULL ? m->covs : NULL;
}
const gsl_matrix *lse_gmm_chol(const lse_gmm *m)
{
    return m != NULL ? m->chol : NULL;
}
const lse_gmm_fit_info *lse_gmm_info(const lse_gmm *m)
{
    return m != NULL ? &m->info : NULL;
}
size_t lse_gmm_n_events(const lse_gmm *m)
{
    return m != NULL ? m->n_events : 0;
}
const lse_gmm_event *lse_gmm_event_get(const lse_gmm *m, size_t i)
{
    return m != NULL && i < m->n_events ? &m->events[i] : NULL;
}

size_t lse_gmm_n_params(const lse_gmm *m)
{
    if (m == NULL)
        return 0;
    const size_t k = m->k, d = m->d;
    size_t p_cov = 0;
    switch (m->cov) {
    case LSE_COV_FULL:
        p_cov = k * d * (d + 1) / 2;
        break;
    case LSE_COV_DIAG:
        p_cov = k * d;
        break;
    case LSE_COV_SPHERICAL:
        p_cov = k;
        break;
    case LSE_COV_TIED:
        p_cov = d * (d + 1) / 2;
        break;
    }
    return p_cov + k * d + k - 1;
}

lse_status lse_gmm_get_covariance(const lse_gmm *m, size_t k, gsl_matrix *out)
{
    if (m == NULL || out == NULL)
        return LSE_EFAULT;
    if (k >= m->k)
        return LSE_ERANGE;
    const size_t d = m->d;
    if (out->size1 != d || out->size2 != d)
        return LSE_EDIM;
    gsl_matrix_set_zero(out);
    switch (m->cov) {
    case LSE_COV_FULL: {
        gsl_matrix_const_view b =
            gsl_matrix_const_submatrix(m->covs, k * d, 0, d, d);
        gsl_matrix_memcpy(out, &b.matrix);
        break;
    }
    case LSE_COV_TIED:
        gsl_matrix_memcpy(out, m->covs);
        break;
    case LSE_COV_DIAG:
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(out, j, j, gsl_matrix_get(m->covs, k, j));
        break;
    case LSE_COV_SPHERICAL:
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(out, j, j, gsl_matrix_get(m->covs, k, 0));
        break;
    }
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* The graph                                                           */

typedef struct gmm_graph {
    lse_graph *g;
    lse_node *x, *mu, *logw, *chol;
    lse_term *t;
} gmm_graph;

/* Copy weights (as log-weights), means and factors into the graph. */
static void params_to_graph(const gsl_vector *weights, const gsl_matrix *means,
                            const gsl_matrix *chol, gmm_graph *gg)
{
    gsl_matrix_memcpy(lse_node_value(gg->mu), means);
    gsl_matrix *lw = lse_node_value(gg->logw);
    for (size_t k = 0; k < weights->size; k++)
        gsl_matrix_set(lw, k, 0, log(gsl_vector_get(weights, k)));
    gsl_matrix_memcpy(lse_node_value(gg->chol), chol);
}

/* weights = softmax(logw (K, 1)) */
static void weights_from_logw(const gsl_matrix *logw, gsl_vector *weights)
{
    const size_t k = logw->size1;
    const double *lw = gsl_matrix_const_ptr(logw, 0, 0);
    const double lse = lse_logsumexp(lw, k, logw->tda, 1.0);
    for (size_t i = 0; i < k; i++)
        gsl_vector_set(weights, i, exp(gsl_matrix_get(logw, i, 0) - lse));
}

static lse_status graph_fail(gmm_graph *gg, lse_status st, const char *fn,
                             lse_error *err)
{
    lse_error_set(err, st, fn, "%s", lse_graph_errmsg(gg->g));
    lse_graph_free(gg->g);
    gg->g = NULL;
    return st;
}

/* Build the model's graph on x (N, d) with row weights w (or NULL); the
 * parameter nodes hold the model's values. x must be finite. keep: the
 * mixture term keeps its dense S and softmax (N, K) (the queries read
 * them); the fit does not (streaming term: O(block K) memory; its EM
 * statistics are accumulated during the E-step). */
static lse_status graph_build(const lse_gmm *m, const gsl_matrix *x,
                              const gsl_vector *w, int keep, gmm_graph *gg,
                              const char *fn, lse_error *err)
{
    memset(gg, 0, sizeof *gg);
    gg->g = lse_graph_new();
    if (gg->g == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_graph_set_block_rows(gg->g, GMM_BLOCK);
    lse_status st = lse_graph_add_node(gg->g, "x", x->size1, m->d,
                                       LSE_NODE_CLAMPED, &gg->x);
    if (st == LSE_OK)
        st = lse_graph_add_node(gg->g, "mu", m->k, m->d, LSE_NODE_PARAM,
                                &gg->mu);
    if (st == LSE_OK)
        st = lse_graph_add_node(gg->g, "logw", m->k, 1, LSE_NODE_PARAM,
                                &gg->logw);
    if (st == LSE_OK)
        st = lse_graph_add_node(gg->g, "chol", m->chol->size1, m->chol->size2,
                                LSE_NODE_PARAM, &gg->chol);
    if (st == LSE_OK)
        st = lse_node_set_value(gg->x, x);
    if (st != LSE_OK)
        return graph_fail(gg, st, fn, err);
    params_to_graph(m->weights, m->means, m->chol, gg);
    const lse_gaussian_config cfg = {.cov = m->cov};
    lse_node *params[2] = {gg->logw, gg->chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(gg->x);
    spec.parent = lse_view_all(gg->mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &cfg;
    spec.param = params;
    spec.row_weight = w;
    spec.keep_matrices = keep;
    st = lse_graph_add_lse(gg->g, "mixture", &spec, &gg->t);
    if (st != LSE_OK)
        return graph_fail(gg, st, fn, err);
    return LSE_OK;
}

/* Common checks of the query functions; builds and evaluates the graph. */
static lse_status query(const lse_gmm *m, const gsl_matrix *x, gmm_graph *gg,
                        double *energy, const char *fn, lse_error *err)
{
    memset(gg, 0, sizeof *gg);
    if (m == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (x->size2 != m->d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data have %zu columns, the model d = %zu",
                             x->size2, m->d);
    size_t r, c;
    if (lse_util_find_nonfinite(x, &r, &c))
        return lse_error_set(err, LSE_ENONFINITE, fn,
                             "row %zu, column %zu is %g (lse_gmm_posterior "
                             "marginalizes missing values)",
                             r, c, gsl_matrix_get(x, r, c));
    lse_status st = graph_build(m, x, NULL, 1, gg, fn, err);
    if (st != LSE_OK)
        return st;
    double e;
    st = lse_graph_energy(gg->g, &e);
    if (st != LSE_OK)
        return graph_fail(gg, st, fn, err);
    if (energy != NULL)
        *energy = e;
    return LSE_OK;
}

lse_status lse_gmm_graph_new(const lse_gmm *m, const gsl_matrix *x,
                             lse_graph **out, lse_error *err)
{
    static const char fn[] = "lse_gmm_graph_new";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *out = NULL;
    gmm_graph gg;
    const lse_status st = query(m, x, &gg, NULL, fn, err);
    if (st == LSE_OK)
        *out = gg.g;
    return st;
}

lse_status lse_gmm_predict_proba(const lse_gmm *m, const gsl_matrix *x,
                                 gsl_matrix *resp, lse_error *err)
{
    static const char fn[] = "lse_gmm_predict_proba";
    if (resp == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (m != NULL && x != NULL &&
        (resp->size1 != x->size1 || resp->size2 != m->k))
        return lse_error_set(err, LSE_EDIM, fn,
                             "resp is %zu x %zu, expected %zu x %zu",
                             resp->size1, resp->size2, x->size1, m->k);
    gmm_graph gg;
    const lse_status st = query(m, x, &gg, NULL, fn, err);
    if (st != LSE_OK)
        return st;
    gsl_matrix_memcpy(resp, lse_term_softmax(gg.t));
    lse_graph_free(gg.g);
    return LSE_OK;
}

lse_status lse_gmm_predict(const lse_gmm *m, const gsl_matrix *x,
                           size_t *labels, lse_error *err)
{
    static const char fn[] = "lse_gmm_predict";
    if (labels == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    gmm_graph gg;
    const lse_status st = query(m, x, &gg, NULL, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *a = lse_term_softmax(gg.t);
    for (size_t i = 0; i < a->size1; i++) {
        size_t best = 0;
        for (size_t k = 1; k < a->size2; k++)
            if (gsl_matrix_get(a, i, k) > gsl_matrix_get(a, i, best))
                best = k;
        labels[i] = best;
    }
    lse_graph_free(gg.g);
    return LSE_OK;
}

lse_status lse_gmm_score_samples(const lse_gmm *m, const gsl_matrix *x,
                                 gsl_vector *loglik, lse_error *err)
{
    static const char fn[] = "lse_gmm_score_samples";
    if (loglik == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (x != NULL && loglik->size != x->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "loglik has %zu entries for %zu samples",
                             loglik->size, x->size1);
    gmm_graph gg;
    const lse_status st = query(m, x, &gg, NULL, fn, err);
    if (st != LSE_OK)
        return st;
    gsl_vector_memcpy(loglik, lse_term_row_lse(gg.t));
    lse_graph_free(gg.g);
    return LSE_OK;
}

static lse_status criterion(const lse_gmm *m, const gsl_matrix *x, double *out,
                            int bic, const char *fn, lse_error *err)
{
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    gmm_graph gg;
    double e = 0.0; /* set by query on success (gcc -O3 cannot tell) */
    const lse_status st = query(m, x, &gg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    lse_graph_free(gg.g);
    const double p = (double)lse_gmm_n_params(m);
    *out = 2.0 * e + (bic ? p * log((double)x->size1) : 2.0 * p);
    return LSE_OK;
}

lse_status lse_gmm_bic(const lse_gmm *m, const gsl_matrix *x, double *bic,
                       lse_error *err)
{
    return criterion(m, x, bic, 1, "lse_gmm_bic", err);
}

lse_status lse_gmm_aic(const lse_gmm *m, const gsl_matrix *x, double *aic,
                       lse_error *err)
{
    return criterion(m, x, aic, 0, "lse_gmm_aic", err);
}

lse_status lse_gmm_sample(const lse_gmm *m, unsigned long seed, gsl_matrix *out,
                          size_t *labels, lse_error *err)
{
    static const char fn[] = "lse_gmm_sample";
    if (m == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t d = m->d;
    if (out->size2 != d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "out has %zu columns, the model d = %zu",
                             out->size2, d);
    lse_gsl_quiet();
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_ran_discrete_t *table =
        gsl_ran_discrete_preproc(m->k, gsl_vector_const_ptr(m->weights, 0));
    double *z = malloc(d * sizeof *z);
    if (rng == NULL || table == NULL || z == NULL) {
        gsl_rng_free(rng);
        gsl_ran_discrete_free(table);
        free(z);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_rng_set(rng, seed);
    for (size_t i = 0; i < out->size1; i++) {
        const size_t k = gsl_ran_discrete(rng, table);
        for (size_t j = 0; j < d; j++)
            z[j] = gsl_ran_gaussian(rng, 1.0);
        const double *mu = gsl_matrix_const_ptr(m->means, k, 0);
        const double *l =
            gsl_matrix_const_ptr(m->chol, m->cov == LSE_COV_TIED ? 0 : k, 0);
        double *o = gsl_matrix_ptr(out, i, 0);
        for (size_t j = 0; j < d; j++) {
            double v = mu[j];
            switch (m->cov) {
            case LSE_COV_FULL:
            case LSE_COV_TIED:
                for (size_t t = 0; t <= j; t++)
                    v += l[j * d + t] * z[t];
                break;
            case LSE_COV_DIAG:
                v += l[j] * z[j];
                break;
            case LSE_COV_SPHERICAL:
                v += l[0] * z[j];
                break;
            }
            o[j] = v;
        }
        if (labels != NULL)
            labels[i] = k;
    }
    gsl_rng_free(rng);
    gsl_ran_discrete_free(table);
    free(z);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Setters                                                             */

static void clear_fit(lse_gmm *m)
{
    m->info = empty_info();
    free(m->events);
    m->events = NULL;
    m->n_events = 0;
}

lse_status lse_gmm_set_weights(lse_gmm *m, const gsl_vector *w, lse_error *err)
{
    static const char fn[] = "lse_gmm_set_weights";
    if (m == NULL || w == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (w->size != m->k)
        return lse_error_set(err, LSE_EDIM, fn, "%zu weights for K = %zu",
                             w->size, m->k);
    double sum = 0.0;
    for (size_t k = 0; k < m->k; k++) {
        const double v = gsl_vector_get(w, k);
        if (!isfinite(v))
            return lse_error_set(err, LSE_ENONFINITE, fn, "weight %zu is %g", k,
                                 v);
        if (!(v > 0.0))
            return lse_error_set(err, LSE_EDOM, fn,
                                 "weight %zu is %g (must be > 0)", k, v);
        sum += v;
    }
    if (!isfinite(sum))
        return lse_error_set(err, LSE_ENONFINITE, fn, "weights sum to %g", sum);
    for (size_t k = 0; k < m->k; k++)
        gsl_vector_set(m->weights, k, gsl_vector_get(w, k) / sum);
    clear_fit(m);
    return LSE_OK;
}

lse_status lse_gmm_set_means(lse_gmm *m, const gsl_matrix *means,
                             lse_error *err)
{
    static const char fn[] = "lse_gmm_set_means";
    if (m == NULL || means == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (means->size1 != m->k || means->size2 != m->d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "means are %zu x %zu, expected %zu x %zu",
                             means->size1, means->size2, m->k, m->d);
    size_t r, c;
    if (lse_util_find_nonfinite(means, &r, &c))
        return lse_error_set(err, LSE_ENONFINITE, fn, "mean %zu[%zu] is %g", r,
                             c, gsl_matrix_get(means, r, c));
    gsl_matrix_memcpy(m->means, means);
    clear_fit(m);
    return LSE_OK;
}

lse_status lse_gmm_set_covariances(lse_gmm *m, const gsl_matrix *cov,
                                   lse_error *err)
{
    static const char fn[] = "lse_gmm_set_covariances";
    if (m == NULL || cov == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t d = m->d;
    const size_t rows = lse_cov_rows(m->cov, m->k, d);
    const size_t cols = lse_cov_cols(m->cov, d);
    if (cov->size1 != rows || cov->size2 != cols)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%s covariances are %zu x %zu, expected %zu x %zu",
                             lse_gmm_cov_name(m->cov), cov->size1, cov->size2,
                             rows, cols);
    lse_error e;
    const lse_status st = lse_cov_to_chol(m->cov, d, cov, m->chol, &e);
    if (st != LSE_OK) /* the message as this function's */
        return lse_error_set(err, st, fn, "%s",
                             e.message + sizeof "lse_cov_to_chol: " - 1);
    lse_cov_from_chol(m->cov, d, m->chol, m->covs);
    clear_fit(m);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

lse_gmm_fit_opts lse_gmm_fit_opts_default(void)
{
    lse_gmm_fit_opts o;
    memset(&o, 0, sizeof o);
    o.init = LSE_GMM_INIT_KMEANSPP;
    o.n_init = 1;
    o.max_iter = 1000;
    o.tol = 1e-9; /* relative: docs/lsefit.md, "Convergence" */
    o.reg_covar = 1e-6;
    o.lloyd_iter = 10;
    o.seed = 0;
    o.sample_weight = NULL;
    o.missing = LSE_GMM_MISSING_ERROR;
    o.progress = NULL;
    o.progress_user = NULL;
    o.reduce = NULL;
    o.reduce_user = NULL;
    o.rank = 0;
    o.n_ranks = 1;
    return o;
}

/* State shared by the fit loop and the M-step hook. */
typedef struct fit_ctx {
    const gsl_matrix *x; /* (N, d) training data, borrowed */
    const gsl_vector *w; /* (N) sample weights or NULL */
    lse_cov_type cov;
    size_t run, iteration;
    lse_gmm_event *events;
    size_t n_events, cap_events;
    size_t *chosen; /* (K) rows used by one re-seeding pass (missing data) */
    double *chosen_rows;        /* (K, d) their values (complete data) */
    lse_comm *dist;        /* processes sharing x, or NULL */
    lse_error *err;
    int hook_failed; /* the hook wrote err */
    /* the fit's mixture term streams (keeps no softmax): the parameters of
     * the last E-step and one row's scores (1, K), to recompute a
     * re-seeding row's responsibilities (lse_term_scores) */
    gsl_matrix *e_mu, *e_logw, *e_chol, *srow;
} fit_ctx;

static double row_weight(const fit_ctx *c, size_t i)
{
    return c->w != NULL ? gsl_vector_get(c->w, i) : 1.0;
}

static int row_equals(const gsl_matrix *x, size_t a, const double *v)
{
    const double *xa = gsl_matrix_const_ptr(x, a, 0);
    for (size_t j = 0; j < x->size2; j++)
        if (xa[j] != v[j])
            return 0;
    return 1;
}

/* Remember the parameters the next E-step evaluates (c->e_*). */
static void snapshot_estep(fit_ctx *c, const gmm_graph *gg)
{
    gsl_matrix_memcpy(c->e_mu, lse_node_value(gg->mu));
    gsl_matrix_memcpy(c->e_logw, lse_node_value(gg->logw));
    gsl_matrix_memcpy(c->e_chol, lse_node_value(gg->chol));
}

/* The re-seeding scratch of c for the fit graph gg (freed by
 * fit_ctx_free). */
static lse_status fit_ctx_alloc(fit_ctx *c, const gmm_graph *gg)
{
    const gsl_matrix *mu = lse_node_value(gg->mu);
    const gsl_matrix *chol = lse_node_value(gg->chol);
    const size_t K = mu->size1, d = mu->size2;
    c->e_mu = gsl_matrix_alloc(K, d);
    c->e_logw = gsl_matrix_alloc(K, 1);
    c->e_chol = gsl_matrix_alloc(chol->size1, chol->size2);
    c->srow = gsl_matrix_alloc(1, K);
    if (c->e_mu == NULL || c->e_logw == NULL || c->e_chol == NULL ||
        c->srow == NULL)
        return LSE_ENOMEM;
    return LSE_OK;
}

static void fit_ctx_free(fit_ctx *c)
{
    gsl_matrix_free(c->e_mu);
    gsl_matrix_free(c->e_logw);
    gsl_matrix_free(c->e_chol);
    gsl_matrix_free(c->srow);
}

/* Responsibilities (K) of row i of c->x under the parameters of the last
 * E-step (c->e_*), through the mixture term's similarity on that row
 * alone: the softmax of its scores. */
static lse_status resp_row(fit_ctx *c, lse_term *t, size_t i, double *out)
{
    gsl_matrix_const_view xv =
        gsl_matrix_const_submatrix(c->x, i, 0, 1, c->x->size2);
    const gsl_matrix *params[2] = {c->e_logw, c->e_chol};
    const lse_status st =
        lse_term_scores(t, &xv.matrix, c->e_mu, params, c->srow, NULL);
    if (st != LSE_OK)
        return st;
    const size_t K = c->srow->size2;
    const double *sr = c->srow->data;
    double mx = -INFINITY, sum = 0.0;
    for (size_t k = 0; k < K; k++)
        mx = sr[k] > mx ? sr[k] : mx;
    for (size_t k = 0; k < K; k++) {
        out[k] = exp(sr[k] - mx);
        sum += out[k];
    }
    for (size_t k = 0; k < K; k++)
        out[k] /= sum;
    return LSE_OK;
}

/* The sample with the lowest log-likelihood (row_lse) among rows with a
 * positive weight that differ from every row chosen so far in this pass;
 * if there is none, the lowest among all rows with a positive weight.
 * Lowest index on ties. Over every process (c->dist): each proposes its
 * own candidates, the lowest value wins (lowest global index on ties) and
 * its owner sends the row. Out: row (1 + d + K) = [global index, x_i,
 * resp_i] on every process. resp: the term's kept softmax, or NULL to
 * recompute the row's (resp_row). */
static lse_status lowest_row(fit_ctx *c, lse_term *term, const gsl_vector *rl,
                             const gsl_matrix *resp, size_t n_chosen,
                             double *row)
{
    static const char fn[] = "lse_gmm_fit";
    const size_t n = c->x->size1, d = c->x->size2;
    const size_t K = lse_term_parent(term).count;
    const size_t offset = c->dist != NULL ? c->dist->offset : 0;
    const size_t n_ranks = c->dist != NULL ? c->dist->n_ranks : 1;
    const size_t rank = c->dist != NULL ? c->dist->rank : 0;
    size_t best = n, any = n;
    for (size_t i = 0; i < n; i++) {
        if (!(row_weight(c, i) > 0.0))
            continue;
        const double v = gsl_vector_get(rl, i);
        if (any == n || v < gsl_vector_get(rl, any))
            any = i;
        int used = 0;
        for (size_t t = 0; t < n_chosen && !used; t++)
            used = row_equals(c->x, i, c->chosen_rows + t * d);
        if (!used && (best == n || v < gsl_vector_get(rl, best)))
            best = i;
    }
    const double mine[6] = {
        best < n, best < n ? gsl_vector_get(rl, best) : 0.0,
        (double)(offset + best), any < n,
        any < n ? gsl_vector_get(rl, any) : 0.0, (double)(offset + any)};
    double one[6];
    double *all = c->dist != NULL ? c->dist->tmp : one;
    lse_status st = lse_comm_gather(c->dist, mine, 6, all, fn, c->err);
    if (st != LSE_OK) {
        c->hook_failed = 1;
        return st;
    }
    /* a process with an unused candidate wins over every "any" */
    size_t win = n_ranks;
    int use_best = 0;
    for (size_t r = 0; r < n_ranks; r++)
        use_best |= all[6 * r] != 0.0;
    const size_t f = use_best ? 0 : 3;
    for (size_t r = 0; r < n_ranks; r++)
        if (all[6 * r + f] != 0.0 &&
            (win == n_ranks || all[6 * r + f + 1] < all[6 * win + f + 1]))
            win = r;
    if (win == n_ranks) {
        c->hook_failed = 1;
        return lse_error_set(c->err, LSE_EINTERNAL, fn,
                             "no sample with a positive weight to re-seed at");
    }
    lse_status rst = LSE_OK;
    if (rank == win) {
        const size_t i = use_best ? best : any;
        row[0] = (double)(offset + i);
        for (size_t j = 0; j < d; j++)
            row[1 + j] = gsl_matrix_get(c->x, i, j);
        if (resp != NULL)
            for (size_t k = 0; k < K; k++)
                row[1 + d + k] = gsl_matrix_get(resp, i, k);
        else
            rst = resp_row(c, term, i, row + 1 + d);
        if (rst != LSE_OK) /* cannot happen: the E-step scored this row */
            for (size_t k = 0; k < K; k++)
                row[1 + d + k] = 0.0;
    }
    st = lse_comm_bcast(c->dist, rank == win, row, 1 + d + K, fn, c->err);
    if (st == LSE_OK && rst != LSE_OK)
        st = lse_error_set(c->err, rst, fn,
                           "re-seeding: scoring sample %zu failed: %s",
                           (size_t)row[0], lse_strerror(rst));
    if (st != LSE_OK)
        c->hook_failed = 1;
    return st;
}

static lse_status add_event(fit_ctx *c, size_t k, size_t sample)
{
    if (c->n_events == c->cap_events) {
        const size_t cap = c->cap_events > 0 ? 2 * c->cap_events : 16;
        lse_gmm_event *e = realloc(c->events, cap * sizeof *e);
        if (e == NULL) {
            c->hook_failed = 1;
            return lse_error_set(c->err, LSE_ENOMEM, "lse_gmm_fit",
                                 "out of memory");
        }
        c->events = e;
        c->cap_events = cap;
    }
    c->events[c->n_events++] = (lse_gmm_event){.run = c->run,
                                               .iteration = c->iteration,
                                               .component = k,
                                               .action = LSE_GMM_RESEED,
                                               .sample = sample};
    return LSE_OK;
}

/*
 * Re-seed every empty component k: its mean becomes the sample i with the
 * lowest log-likelihood under the model of the last E-step (the term's
 * row_lse); it takes the covariance factor of the non-empty component o
 * most responsible for x_i (tied: shared anyway) and half of o's weight
 * (logw_o and logw_k both become logw_o - log 2). Deterministic.
 */
static lse_status reseed(fit_ctx *c, lse_term *t, const unsigned char *empty)
{
    const gsl_vector *rl = lse_term_row_lse(t);
    const gsl_matrix *resp = lse_term_softmax(t); /* NULL: streaming */
    if (rl == NULL || (resp == NULL && c->srow == NULL)) {
        c->hook_failed = 1;
        return lse_error_set(c->err, LSE_EINTERNAL, "lse_gmm_fit",
                             "the mixture term kept no responsibilities");
    }
    gsl_matrix *mu = lse_node_value(lse_term_parent(t).node);
    gsl_matrix *logw = lse_node_value(lse_term_param(t, 0));
    gsl_matrix *chol = lse_node_value(lse_term_param(t, 1));
    const size_t K = mu->size1, d = mu->size2;
    double *row = malloc((1 + d + K) * sizeof *row);
    if (row == NULL) {
        c->hook_failed = 1;
        return lse_error_set(c->err, LSE_ENOMEM, "lse_gmm_fit",
                             "out of memory");
    }
    size_t n_chosen = 0;
    lse_status st = LSE_OK;
    for (size_t k = 0; k < K; k++) {
        if (!empty[k])
            continue;
        st = lowest_row(c, t, rl, resp, n_chosen, row);
        if (st != LSE_OK)
            break;
        const size_t i = (size_t)row[0];
        const double *ri = row + 1 + d;
        size_t owner = K;
        for (size_t o = 0; o < K; o++)
            if (!empty[o] && (owner == K || ri[o] > ri[owner]))
                owner = o;
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(mu, k, j, row[1 + j]);
        if (owner < K) {
            if (c->cov != LSE_COV_TIED) {
                gsl_vector_view src = gsl_matrix_row(chol, owner);
                gsl_matrix_set_row(chol, k, &src.vector);
            }
            const double lw = gsl_matrix_get(logw, owner, 0) - M_LN2;
            gsl_matrix_set(logw, owner, 0, lw);
            gsl_matrix_set(logw, k, 0, lw);
        } else { /* every component empty: keep chol, equal weight */
            gsl_matrix_set(logw, k, 0, 0.0);
        }
        memcpy(c->chosen_rows + n_chosen * d, row + 1, d * sizeof *row);
        n_chosen++;
        lse_log(LSE_LOG_WARN,
                "lse_gmm_fit: run %zu, iteration %zu: component %zu has no "
                "responsibility; re-seeded at sample %zu",
                c->run, c->iteration, k, i);
        st = add_event(c, k, i);
        if (st != LSE_OK)
            break;
    }
    free(row);
    return st;
}

static lse_status mstep_hook(lse_graph *g, lse_term *t,
                             const lse_mstep_report *report, void *user)
{
    (void)g;
    if (report == NULL || report->empty == NULL || report->n_empty == 0)
        return LSE_OK;
    return reseed(user, t, report->empty);
}

/* Provisional model for an initialization: spherical covariance v I,
 * v = mean weighted variance of the data x (N, d) + reg_covar (1 if that is
 * not positive), equal weights (logw = 0). Its only use is to give the
 * re-seeding of components left empty by the initial M-step a
 * log-likelihood to rank samples by. The sums run over every process
 * (c->dist). */
static lse_status provisional(const fit_ctx *c, lse_cov_type cov,
                              double reg_covar, gsl_matrix *chol,
                              gsl_matrix *logw)
{
    static const char fn[] = "lse_gmm_fit";
    const gsl_matrix *x = c->x;
    const size_t n = x->size1, d = x->size2;
    /* buf: [total, sum w x_j (d)], then [sum w (x_j - mean_j)^2 (d)] */
    double *buf = calloc(2 * d + 1, sizeof *buf);
    if (buf == NULL)
        return lse_error_set(c->err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < n; i++)
        buf[0] += row_weight(c, i);
    for (size_t j = 0; j < d; j++)
        for (size_t i = 0; i < n; i++)
            buf[1 + j] += row_weight(c, i) * gsl_matrix_get(x, i, j);
    lse_status st = lse_comm_sum(c->dist, buf, d + 1, fn, c->err);
    const double total = buf[0];
    for (size_t j = 0; st == LSE_OK && j < d; j++) {
        const double mean = buf[1 + j] / total;
        double s2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - mean;
            s2 += row_weight(c, i) * t * t;
        }
        buf[1 + d + j] = s2;
    }
    if (st == LSE_OK)
        st = lse_comm_sum(c->dist, buf + 1 + d, d, fn, c->err);
    if (st == LSE_OK) {
        double var = 0.0;
        for (size_t j = 0; j < d; j++)
            var += buf[1 + d + j] / total;
        double v = var / (double)d + reg_covar;
        if (!(v > 0.0) || !isfinite(v))
            v = 1.0;
        lse_cov_chol_scaled_identity(cov, d, sqrt(v), chol);
        gsl_matrix_set_zero(logw);
    }
    free(buf);
    return st;
}

/* Scratch of an initialization. The initial responsibilities are made a
 * block of rows at a time (init_resp_rows) when the initial M-step needs
 * them, so that a fit never holds an (N, K) matrix; only the missing-data
 * fit, whose M-step takes them whole, asks for resp. */
typedef struct init_work {
    gsl_rng *rng;
    gsl_matrix *resp; /* (N, K) initial responsibilities, or NULL */
    gsl_vector *d2;   /* (N) k-means++ distances */
    gsl_vector *sums; /* (K) Lloyd weights */
    size_t *labels;   /* (N) k-means++ / Lloyd labels */
    int random;       /* random init: rows drawn from rng in row order */
    size_t after;     /* rows of later processes whose draws are skipped */
} init_work;

static void init_work_free(init_work *iw)
{
    gsl_rng_free(iw->rng);
    gsl_matrix_free(iw->resp);
    gsl_vector_free(iw->d2);
    gsl_vector_free(iw->sums);
    free(iw->labels);
}

static int init_work_alloc(init_work *iw, size_t n, size_t k,
                           unsigned long seed, int whole)
{
    iw->rng = gsl_rng_alloc(gsl_rng_mt19937);
    iw->resp = whole ? gsl_matrix_alloc(n, k) : NULL;
    iw->d2 = gsl_vector_alloc(n);
    iw->sums = gsl_vector_alloc(k);
    iw->labels = calloc(n, sizeof *iw->labels);
    if (iw->rng == NULL || (whole && iw->resp == NULL) ||
        iw->d2 == NULL || iw->sums == NULL || iw->labels == NULL)
        return 0;
    gsl_rng_set(iw->rng, seed);
    return 1;
}

/* Rows [i0, i0 + out->size1) of the initial responsibilities into out:
 * one-hot labels (k-means++), or uniform draws normalized per row
 * (random; call in row order, every row once, then init_resp_done). */
static void init_resp_rows(init_work *iw, size_t i0, gsl_matrix *out)
{
    const size_t b = out->size1, K = out->size2;
    if (!iw->random) {
        gsl_matrix_set_zero(out);
        for (size_t i = 0; i < b; i++)
            gsl_matrix_set(out, i, iw->labels[i0 + i], 1.0);
        return;
    }
    for (size_t i = 0; i < b; i++) {
        double s = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double u = gsl_rng_uniform(iw->rng);
            gsl_matrix_set(out, i, k, u);
            s += u;
        }
        if (s > 0.0)
            for (size_t k = 0; k < K; k++)
                *gsl_matrix_ptr(out, i, k) /= s;
    }
}

/* After the last row: the draws of the later processes' rows, so that
 * every process leaves the generator in the same state. */
static void init_resp_done(init_work *iw, size_t K)
{
    if (iw->random)
        for (size_t i = 0; i < iw->after * K; i++)
            (void)gsl_rng_uniform(iw->rng);
}

/* Starting point of a k-means++ or random initialization on the data x
 * (N, d) with weights w (c->x, c->w): means mu (K, d), the provisional
 * chol and logw, and the responsibilities iw->resp for the initial
 * M-step. Over several processes (c->dist) every process draws the random
 * numbers of the whole data set, so the start does not depend on the
 * split. */
static lse_status init_start(const fit_ctx *c, lse_cov_type cov,
                             const lse_gmm_fit_opts *o, init_work *iw,
                             gsl_matrix *mu, gsl_matrix *chol, gsl_matrix *logw)
{
    static const char fn[] = "lse_gmm_fit";
    const gsl_matrix *x = c->x;
    const size_t n = x->size1, K = mu->size1, d = x->size2;
    lse_status st = provisional(c, cov, o->reg_covar, chol, logw);
    if (st != LSE_OK)
        return st;
    iw->random = o->init != LSE_GMM_INIT_KMEANSPP;
    iw->after = 0;
    if (o->init == LSE_GMM_INIT_KMEANSPP) {
        st = lse_kmeans_seed(x, c->w, iw->rng, mu, iw->d2, 0, c->dist,
                             NULL);
        if (st == LSE_OK)
            st = lse_kmeans_lloyd(x, c->w, mu, o->lloyd_iter, iw->labels,
                                  iw->sums, NULL, 0, c->dist, NULL);
        if (st != LSE_OK)
            return lse_error_set(c->err, st, fn, "k-means++ seeding failed%s",
                                 st == LSE_EINVAL ? ""
                                 : st == LSE_ENOMEM
                                     ? ": out of memory"
                                     : ": the reduction over processes "
                                       "failed");
        if (iw->resp != NULL)
            init_resp_rows(iw, 0, iw->resp);
        return LSE_OK;
    }
    /* random: provisional means at the weighted data mean */
    double *m0 = calloc(d + 1, sizeof *m0); /* [sum w x (d), total] */
    if (m0 == NULL)
        return lse_error_set(c->err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const double wi = row_weight(c, i);
        m0[d] += wi;
        for (size_t j = 0; j < d; j++)
            m0[j] += wi * gsl_matrix_get(x, i, j);
    }
    st = lse_comm_sum(c->dist, m0, d + 1, fn, c->err);
    if (st == LSE_OK)
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(mu, k, j, m0[j] * (1.0 / m0[d]));
    free(m0);
    if (st != LSE_OK)
        return st;
    /* the draws of the rows before this share, then its own (drawn by
     * init_resp_rows when they are used), then the rest (init_resp_done):
     * every process leaves the generator in the same state */
    const size_t before = c->dist != NULL ? c->dist->offset : 0;
    iw->after = c->dist != NULL ? c->dist->n_total - c->dist->offset - n : 0;
    for (size_t i = 0; i < before * K; i++)
        (void)gsl_rng_uniform(iw->rng);
    if (iw->resp != NULL) {
        init_resp_rows(iw, 0, iw->resp);
        init_resp_done(iw, K);
    }
    return LSE_OK;
}

/* Scratch of one fit. */
typedef struct fit_work {
    gmm_graph gg;
    lse_solver *solver;
    init_work iw;
    unsigned char *empty; /* (K) */
    gsl_matrix *best_mu, *best_logw, *best_chol;
} fit_work;

static void fit_work_free(fit_work *fw)
{
    lse_solver_free(fw->solver);
    lse_graph_free(fw->gg.g);
    init_work_free(&fw->iw);
    free(fw->empty);
    gsl_matrix_free(fw->best_mu);
    gsl_matrix_free(fw->best_logw);
    gsl_matrix_free(fw->best_chol);
}

static void init_resp_fill(size_t i0, gsl_matrix *out, void *user)
{
    init_resp_rows(user, i0, out);
}

/* One closed-form M-step of the mixture term from the initial
 * responsibilities (init_resp_rows, a block at a time) through
 * lse_term_mstep_rows, followed by the re-seeding of empty components. The
 * graph must have been evaluated at the provisional model. */
static lse_status initial_mstep(fit_ctx *c, fit_work *fw, double reg_covar)
{
    static const char fn[] = "lse_gmm_fit";
    lse_term *t = fw->gg.t;
    const size_t K = lse_term_parent(t).count;
    lse_mstep_opts mo = lse_mstep_opts_default();
    mo.reg_covar = reg_covar;
    lse_mstep_report rep = {.empty = fw->empty};
    lse_error e;
    lse_status st = lse_term_mstep_rows(t, init_resp_fill, &fw->iw, &mo, &rep,
                                        c->dist, &e);
    init_resp_done(&fw->iw, K);
    if (st != LSE_OK)
        return lse_error_set(c->err, st, fn, "run %zu, initial M-step: %s",
                             c->run, e.message + sizeof "lse_term_mstep: " - 1);
    if (rep.n_empty > 0) {
        st = reseed(c, t, fw->empty);
        if (st != LSE_OK)
            return st;
    }
    return LSE_OK;
}

static lse_status initialize(fit_ctx *c, const lse_gmm *m,
                             const lse_gmm_fit_opts *o, fit_work *fw)
{
    gmm_graph *gg = &fw->gg;
    c->iteration = 0;
    if (o->init == LSE_GMM_INIT_GIVEN) {
        params_to_graph(m->weights, m->means, m->chol, gg);
        return LSE_OK;
    }
    lse_status st =
        init_start(c, m->cov, o, &fw->iw, lse_node_value(gg->mu),
                   lse_node_value(gg->chol), lse_node_value(gg->logw));
    if (st != LSE_OK)
        return st;
    double e;
    snapshot_estep(c, gg);
    st = lse_graph_energy(gg->g, &e);
    if (st != LSE_OK)
        return lse_error_set(c->err, st, "lse_gmm_fit", "run %zu: %s", c->run,
                             lse_graph_errmsg(gg->g));
    return initial_mstep(c, fw, o->reg_covar);
}

/* The checks that need no other process: options and shapes. */
static lse_status check_fit_opts(const lse_gmm *m, const gsl_matrix *x,
                                 const lse_gmm_fit_opts *o, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    if (m == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (x->size2 != m->d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data have %zu columns, the model d = %zu",
                             x->size2, m->d);
    if (o->init != LSE_GMM_INIT_KMEANSPP && o->init != LSE_GMM_INIT_RANDOM &&
        o->init != LSE_GMM_INIT_GIVEN)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown init %d",
                             (int)o->init);
    if (o->n_init == 0)
        return lse_error_set(err, LSE_EINVAL, fn, "n_init must be >= 1");
    if (!(o->tol >= 0.0) || !isfinite(o->tol))
        return lse_error_set(err, LSE_EDOM, fn,
                             "tol must be finite and >= 0 (got %g)", o->tol);
    if (!(o->reg_covar >= 0.0) || !isfinite(o->reg_covar))
        return lse_error_set(err, LSE_EDOM, fn,
                             "reg_covar must be finite and >= 0 (got %g)",
                             o->reg_covar);
    if (o->missing != LSE_GMM_MISSING_ERROR &&
        o->missing != LSE_GMM_MISSING_MARGINALIZE)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown missing policy %d",
                             (int)o->missing);
    return LSE_OK;
}

/* K <= N, finite data (NaN only when marginalized), sample weights; rows
 * are numbered over every process (dist). */
static lse_status check_fit_data(const lse_gmm *m, const gsl_matrix *x,
                                 const lse_gmm_fit_opts *o,
                                 lse_comm *dist, double *total,
                                 int *has_nan, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    const size_t n_total = dist->n_total, offset = dist->offset;
    if (m->k > n_total)
        return lse_error_set(err, LSE_EINVAL, fn, "k = %zu > %zu samples", m->k,
                             n_total);
    *has_nan = 0;
    size_t nan_row = 0;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++) {
            const double v = gsl_matrix_get(x, i, j);
            if (isnan(v) && !*has_nan)
                nan_row = i;
            if (isinf(v))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu, column %zu is %g", offset + i,
                                     j, v);
            if (isnan(v) && o->missing == LSE_GMM_MISSING_ERROR)
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu, column %zu is %g (a missing "
                                     "value; missing = "
                                     "LSE_GMM_MISSING_MARGINALIZE "
                                     "marginalizes it)",
                                     offset + i, j, v);
            *has_nan |= isnan(v) != 0;
        }
    if (*has_nan && lse_comm_parallel(dist))
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "row %zu has a missing value: marginalizing "
                             "missing values is not supported with several "
                             "processes",
                             offset + nan_row);
    return lse_util_check_weights(o->sample_weight, x->size1, dist, total, fn,
                                  err);
}

static lse_status fit_work_new(const lse_gmm *m, const gsl_matrix *x,
                               const lse_gmm_fit_opts *o, double total,
                               fit_work *fw, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    const size_t n = x->size1, K = m->k;
    lse_status st = graph_build(m, x, o->sample_weight, 0, &fw->gg, fn, err);
    if (st != LSE_OK)
        return st;
    fw->solver = lse_solver_new(fw->gg.g, lse_solver_em);
    const int iw_ok = init_work_alloc(&fw->iw, n, K, o->seed, 0);
    fw->empty = calloc(K, 1);
    fw->best_mu = gsl_matrix_alloc(K, m->d);
    fw->best_logw = gsl_matrix_alloc(K, 1);
    fw->best_chol = gsl_matrix_alloc(m->chol->size1, m->chol->size2);
    if (fw->solver == NULL || !iw_ok || fw->empty == NULL ||
        fw->best_mu == NULL || fw->best_logw == NULL || fw->best_chol == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 0.0; /* run_em tests |change| <= tol |energy| */
    (void)total;
    so.mstep.reg_covar = o->reg_covar;
    st = lse_solver_set_opts(fw->solver, &so);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "%s", lse_graph_errmsg(fw->gg.g));
    return LSE_OK;
}

/* One EM run from the initialized graph. */
static lse_status run_em(fit_ctx *c, const lse_gmm_fit_opts *o, fit_work *fw,
                         int *converged)
{
    static const char fn[] = "lse_gmm_fit";
    lse_solver *s = fw->solver;
    lse_graph *g = fw->gg.g;
    *converged = 0;
    lse_status st = lse_solver_init(s);
    for (size_t it = 0; st == LSE_OK && it < o->max_iter; it++) {
        c->iteration = it + 1;
        snapshot_estep(c, &fw->gg);
        st = lse_solver_iterate(s);
        if (st != LSE_OK)
            break;
        if (o->progress != NULL)
            o->progress(c->run, it + 1, lse_solver_energy(s),
                        lse_solver_delta(s), o->progress_user);
        const double dlt = lse_solver_delta(s);
        if (lse_solver_test(s) == LSE_OK ||
            (isfinite(dlt) &&
             fabs(dlt) <= o->tol * fabs(lse_solver_energy(s)))) {
            *converged = 1;
            break;
        }
    }
    if (st == LSE_OK)
        st = lse_solver_finish(s);
    if (st != LSE_OK && !c->hook_failed)
        lse_error_set(c->err, st, fn, "run %zu, iteration %zu: %s", c->run,
                      c->iteration, lse_graph_errmsg(g));
    return st;
}

/* ------------------------------------------------------------------ */
/* Missing data: the marginal likelihood of the observed coordinates   */

/*
 * Rows are grouped by missingness pattern. Each pattern p with observed
 * columns O gets its own clamped node "x.p" (its rows, columns O), PARAM
 * nodes "mu.p" (K, |O|) and "chol.p" (Cholesky factors of Sigma_k[O, O] in
 * the layout of the covariance type), and an LSE term "mixture.p" with
 * lse_sim_gaussian; every term shares the node "logw". The marginal of a
 * Gaussian on O is N(mu_O, Sigma_OO), so the graph's energy is exactly
 * -sum_i w_i log p(x_i,O). The pattern nodes are derived from the model's
 * parameters before each evaluation (sync); the E-step reads each term's
 * softmax and the M-step uses expected sufficient statistics.
 */

typedef struct pattern {
    unsigned char *observed; /* (d) 1 = observed */
    size_t n_obs, n_mis;
    size_t *obs, *mis; /* observed / missing column indices */
    size_t n_rows;
    size_t *rows;            /* rows of X with this pattern */
    lse_node *x, *mu, *chol; /* this pattern's nodes */
    lse_term *t;             /* "mixture.p" */
} pattern;

typedef struct mgraph {
    lse_graph *g;
    lse_node *logw; /* (K, 1), shared */
    pattern *pat;
    size_t n_pat;
    size_t *row_pat; /* (N) pattern of each row; SIZE_MAX: nothing observed */
    size_t *row_pos; /* (N) position of the row within its pattern */
    size_t k, d;
    lse_cov_type cov;
    gsl_matrix *sig;     /* (K*d, d) full covariances (tied: block 0) */
    gsl_matrix *soo;     /* (d, d) Sigma_OO, then its Cholesky factor */
    gsl_matrix *b;       /* (d, d) B = Sigma_MO Sigma_OO^-1, (n_mis, n_obs) */
    gsl_matrix *cmm;     /* (d, d) Sigma_MM - B Sigma_OM, (n_mis, n_mis) */
    gsl_vector *v1, *v2; /* (d) */
} mgraph;

static void mgraph_free(mgraph *mg)
{
    lse_graph_free(mg->g);
    for (size_t p = 0; mg->pat != NULL && p < mg->n_pat; p++) {
        free(mg->pat[p].observed);
        free(mg->pat[p].obs);
        free(mg->pat[p].mis);
        free(mg->pat[p].rows);
    }
    free(mg->pat);
    free(mg->row_pat);
    free(mg->row_pos);
    gsl_matrix_free(mg->sig);
    gsl_matrix_free(mg->soo);
    gsl_matrix_free(mg->b);
    gsl_matrix_free(mg->cmm);
    gsl_vector_free(mg->v1);
    gsl_vector_free(mg->v2);
    memset(mg, 0, sizeof *mg);
}

/* Group the rows of x by pattern (rows with nothing observed belong to
 * none). Returns 0 when out of memory. */
static int find_patterns(mgraph *mg, const gsl_matrix *x)
{
    const size_t n = x->size1, d = x->size2;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        size_t n_obs = 0;
        for (size_t j = 0; j < d; j++)
            n_obs += !isnan(gsl_matrix_get(x, i, j));
        mg->row_pat[i] = SIZE_MAX;
        if (n_obs == 0)
            continue;
        size_t p = 0;
        for (; p < mg->n_pat; p++) {
            size_t j = 0;
            while (j < d &&
                   mg->pat[p].observed[j] == !isnan(gsl_matrix_get(x, i, j)))
                j++;
            if (j == d)
                break;
        }
        if (p == mg->n_pat) {
            if (mg->n_pat == cap) {
                cap = cap > 0 ? 2 * cap : 4;
                pattern *np = realloc(mg->pat, cap * sizeof *np);
                if (np == NULL)
                    return 0;
                mg->pat = np;
            }
            pattern *q = &mg->pat[mg->n_pat++];
            memset(q, 0, sizeof *q);
            q->observed = malloc(d);
            q->obs = malloc(d * sizeof *q->obs);
            q->mis = malloc(d * sizeof *q->mis);
            if (q->observed == NULL || q->obs == NULL || q->mis == NULL)
                return 0;
            for (size_t j = 0; j < d; j++) {
                q->observed[j] = !isnan(gsl_matrix_get(x, i, j));
                if (q->observed[j])
                    q->obs[q->n_obs++] = j;
                else
                    q->mis[q->n_mis++] = j;
            }
        }
        mg->row_pat[i] = p;
        mg->row_pos[i] = mg->pat[p].n_rows++;
    }
    for (size_t p = 0; p < mg->n_pat; p++) {
        mg->pat[p].rows = malloc(mg->pat[p].n_rows * sizeof(size_t));
        if (mg->pat[p].rows == NULL)
            return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (mg->row_pat[i] != SIZE_MAX)
            mg->pat[mg->row_pat[i]].rows[mg->row_pos[i]] = i;
    return 1;
}

static lse_status mgraph_graph_fail(mgraph *mg, lse_status st, const char *fn,
                                    lse_error *err)
{
    lse_error_set(err, st, fn, "%s", lse_graph_errmsg(mg->g));
    mgraph_free(mg);
    return st;
}

/* Build the pattern graph of x (N, d; NaN = missing) with row weights w
 * (or NULL). The parameter nodes are filled by mgraph_sync. */
static lse_status mgraph_build(const lse_gmm *m, const gsl_matrix *x,
                               const gsl_vector *w, mgraph *mg, const char *fn,
                               lse_error *err)
{
    const size_t n = x->size1, d = m->d, K = m->k;
    memset(mg, 0, sizeof *mg);
    mg->k = K;
    mg->d = d;
    mg->cov = m->cov;
    mg->row_pat = malloc(n * sizeof *mg->row_pat);
    mg->row_pos = malloc(n * sizeof *mg->row_pos);
    mg->sig = gsl_matrix_alloc(K * d, d);
    mg->soo = gsl_matrix_alloc(d, d);
    mg->b = gsl_matrix_alloc(d, d);
    mg->cmm = gsl_matrix_alloc(d, d);
    mg->v1 = gsl_vector_alloc(d);
    mg->v2 = gsl_vector_alloc(d);
    mg->g = lse_graph_new();
    if (mg->row_pat == NULL || mg->row_pos == NULL || mg->sig == NULL ||
        mg->soo == NULL || mg->b == NULL || mg->cmm == NULL || mg->v1 == NULL ||
        mg->v2 == NULL || mg->g == NULL || !find_patterns(mg, x)) {
        mgraph_free(mg);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    lse_graph_set_block_rows(mg->g, GMM_BLOCK);
    lse_status st =
        lse_graph_add_node(mg->g, "logw", K, 1, LSE_NODE_PARAM, &mg->logw);
    if (st != LSE_OK)
        return mgraph_graph_fail(mg, st, fn, err);
    const lse_gaussian_config cfg = {.cov = m->cov};
    for (size_t p = 0; p < mg->n_pat; p++) {
        pattern *q = &mg->pat[p];
        char name[64];
        snprintf(name, sizeof name, "x.%zu", p);
        st = lse_graph_add_node(mg->g, name, q->n_rows, q->n_obs,
                                LSE_NODE_CLAMPED, &q->x);
        snprintf(name, sizeof name, "mu.%zu", p);
        if (st == LSE_OK)
            st = lse_graph_add_node(mg->g, name, K, q->n_obs, LSE_NODE_PARAM,
                                    &q->mu);
        snprintf(name, sizeof name, "chol.%zu", p);
        if (st == LSE_OK)
            st = lse_graph_add_node(mg->g, name, lse_cov_chol_rows(m->cov, K),
                                    lse_cov_chol_cols(m->cov, q->n_obs),
                                    LSE_NODE_PARAM, &q->chol);
        if (st != LSE_OK)
            return mgraph_graph_fail(mg, st, fn, err);
        gsl_matrix *xv = lse_node_value(q->x);
        for (size_t r = 0; r < q->n_rows; r++)
            for (size_t a = 0; a < q->n_obs; a++)
                gsl_matrix_set(xv, r, a,
                               gsl_matrix_get(x, q->rows[r], q->obs[a]));
        gsl_vector *rw = NULL;
        if (w != NULL) {
            rw = gsl_vector_alloc(q->n_rows);
            if (rw == NULL) {
                mgraph_free(mg);
                return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
            }
            for (size_t r = 0; r < q->n_rows; r++)
                gsl_vector_set(rw, r, gsl_vector_get(w, q->rows[r]));
        }
        lse_node *params[2] = {mg->logw, q->chol};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(q->x);
        spec.parent = lse_view_all(q->mu);
        spec.sim = lse_sim_gaussian;
        spec.config = &cfg;
        spec.param = params;
        spec.row_weight = rw;
        snprintf(name, sizeof name, "mixture.%zu", p);
        st = lse_graph_add_lse(mg->g, name, &spec, &q->t);
        gsl_vector_free(rw);
        if (st != LSE_OK)
            return mgraph_graph_fail(mg, st, fn, err);
    }
    return LSE_OK;
}

/* Full covariance of block b (component, or 0 for tied) from the factors
 * in the model layout, into the (d, d) block b of mg->sig. */
static void full_cov(const mgraph *mg, const gsl_matrix *chol, size_t b)
{
    const size_t d = mg->d;
    gsl_matrix_view s = gsl_matrix_submatrix(mg->sig, b * d, 0, d, d);
    gsl_matrix_set_zero(&s.matrix);
    const double *l = gsl_matrix_const_ptr(chol, b, 0);
    for (size_t i = 0; i < d; i++)
        switch (mg->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED:
            for (size_t j = 0; j <= i; j++) {
                double v = 0.0;
                for (size_t t = 0; t <= j; t++)
                    v += l[i * d + t] * l[j * d + t];
                gsl_matrix_set(&s.matrix, i, j, v);
                gsl_matrix_set(&s.matrix, j, i, v);
            }
            break;
        case LSE_COV_DIAG:
            gsl_matrix_set(&s.matrix, i, i, l[i] * l[i]);
            break;
        case LSE_COV_SPHERICAL:
            gsl_matrix_set(&s.matrix, i, i, l[0] * l[0]);
            break;
        }
}

/* First row of component k's covariance in mg->sig (tied: block 0). */
static size_t sig_row(const mgraph *mg, size_t k)
{
    return (mg->cov == LSE_COV_TIED ? 0 : k) * mg->d;
}

/* Cholesky factor of Sigma_k[O, O] into mg->soo (top-left n_obs block).
 * LSE_ENUMERIC if it is not positive definite. */
static lse_status factor_oo(mgraph *mg, const pattern *q, size_t k)
{
    gsl_matrix_const_view sv =
        gsl_matrix_const_submatrix(mg->sig, sig_row(mg, k), 0, mg->d, mg->d);
    const gsl_matrix *s = &sv.matrix;
    gsl_matrix_view f = gsl_matrix_submatrix(mg->soo, 0, 0, q->n_obs, q->n_obs);
    for (size_t a = 0; a < q->n_obs; a++)
        for (size_t c = 0; c < q->n_obs; c++)
            gsl_matrix_set(&f.matrix, a, c,
                           gsl_matrix_get(s, q->obs[a], q->obs[c]));
    const int rc = gsl_linalg_cholesky_decomp1(&f.matrix);
    return rc == GSL_SUCCESS ? LSE_OK
           : rc == GSL_EDOM  ? LSE_ENUMERIC
                             : lse_status_from_gsl(rc);
}

/* Model parameters (mu (K, d), logw (K, 1), chol in the model layout) into
 * the pattern nodes: mu_O, logw, and the factors of Sigma_OO. */
static lse_status mgraph_sync(mgraph *mg, const gsl_matrix *mu,
                              const gsl_matrix *logw, const gsl_matrix *chol)
{
    const size_t K = mg->k, nb = mg->cov == LSE_COV_TIED ? 1 : K;
    gsl_matrix_memcpy(lse_node_value(mg->logw), logw);
    for (size_t b = 0; b < nb; b++)
        full_cov(mg, chol, b);
    for (size_t p = 0; p < mg->n_pat; p++) {
        const pattern *q = &mg->pat[p];
        gsl_matrix *mp = lse_node_value(q->mu);
        gsl_matrix *cp = lse_node_value(q->chol);
        for (size_t k = 0; k < K; k++)
            for (size_t a = 0; a < q->n_obs; a++)
                gsl_matrix_set(mp, k, a, gsl_matrix_get(mu, k, q->obs[a]));
        for (size_t b = 0; b < cp->size1; b++) {
            if (mg->cov == LSE_COV_DIAG) {
                for (size_t a = 0; a < q->n_obs; a++)
                    gsl_matrix_set(cp, b, a,
                                   gsl_matrix_get(chol, b, q->obs[a]));
                continue;
            }
            if (mg->cov == LSE_COV_SPHERICAL) {
                gsl_matrix_set(cp, b, 0, gsl_matrix_get(chol, b, 0));
                continue;
            }
            const lse_status st = factor_oo(mg, q, b);
            if (st != LSE_OK)
                return st;
            const size_t no = q->n_obs;
            double *out = gsl_matrix_ptr(cp, b, 0);
            for (size_t a = 0; a < no; a++)
                for (size_t c = 0; c < no; c++)
                    out[a * no + c] =
                        c <= a ? gsl_matrix_get(mg->soo, a, c) : 0.0;
        }
    }
    return LSE_OK;
}

/* For full/tied covariances: B = Sigma_MO Sigma_OO^-1 (n_mis, n_obs) into
 * mg->b and C = Sigma_MM - B Sigma_OM into mg->cmm, for component k. */
static lse_status conditional(mgraph *mg, const pattern *q, size_t k)
{
    lse_status st = factor_oo(mg, q, k);
    if (st != LSE_OK)
        return st;
    gsl_matrix_const_view sv =
        gsl_matrix_const_submatrix(mg->sig, sig_row(mg, k), 0, mg->d, mg->d);
    const gsl_matrix *s = &sv.matrix;
    const size_t no = q->n_obs, nm = q->n_mis;
    gsl_matrix_view f = gsl_matrix_submatrix(mg->soo, 0, 0, no, no);
    gsl_vector_view rhs = gsl_vector_subvector(mg->v1, 0, no);
    gsl_vector_view sol = gsl_vector_subvector(mg->v2, 0, no);
    for (size_t a = 0; a < nm; a++) {
        for (size_t o = 0; o < no; o++)
            gsl_vector_set(&rhs.vector, o,
                           gsl_matrix_get(s, q->obs[o], q->mis[a]));
        const int rc =
            gsl_linalg_cholesky_solve(&f.matrix, &rhs.vector, &sol.vector);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t o = 0; o < no; o++)
            gsl_matrix_set(mg->b, a, o, gsl_vector_get(&sol.vector, o));
    }
    for (size_t a = 0; a < nm; a++)
        for (size_t c = 0; c <= a; c++) {
            double v = gsl_matrix_get(s, q->mis[a], q->mis[c]);
            for (size_t o = 0; o < no; o++)
                v -= gsl_matrix_get(mg->b, a, o) *
                     gsl_matrix_get(s, q->obs[o], q->mis[c]);
            gsl_matrix_set(mg->cmm, a, c, v);
            gsl_matrix_set(mg->cmm, c, a, v);
        }
    return LSE_OK;
}

/* Responsibility of row i for component k from the last evaluation. */
static double mg_resp(const mgraph *mg, size_t i, size_t k)
{
    const pattern *q = &mg->pat[mg->row_pat[i]];
    return gsl_matrix_get(lse_term_softmax(q->t), mg->row_pos[i], k);
}

static double mg_loglik(const mgraph *mg, size_t i)
{
    const pattern *q = &mg->pat[mg->row_pat[i]];
    return gsl_vector_get(lse_term_row_lse(q->t), mg->row_pos[i]);
}

/* State of a fit with missing values. The current parameters live in
 * mu/logw/chol (model layout) and are synced into the graph. */
typedef struct mfit {
    fit_ctx *c;          /* run, iteration, events, err; c->x is the
                            mean-imputed data and c->w the effective
                            weights (0 for rows with nothing observed), both
                            used by the initialization only */
    const gsl_matrix *x; /* (N, d) data with NaN */
    const gsl_vector *w; /* (N) sample weights or NULL */
    mgraph mg;
    init_work iw;
    gsl_matrix *mu, *logw, *chol;             /* current parameters */
    gsl_matrix *new_mu, *new_logw, *new_chol; /* M-step scratch */
    gsl_matrix *best_mu, *best_logw, *best_chol;
    gsl_matrix *s2;       /* (d, d) scratch */
    gsl_matrix *pool;     /* (d, d) tied pooled scatter */
    gsl_vector *y;        /* (d) shifted expected sample */
    double *acc;          /* N (K) | s1 (K, d) | s2 (K, d, d) */
    unsigned char *empty; /* (K) */
    gsl_matrix *imputed;  /* (N, d) */
    gsl_vector *w_eff;    /* (N) */
    double reg_covar, min_count;
} mfit;

static void mfit_free(mfit *f)
{
    mgraph_free(&f->mg);
    init_work_free(&f->iw);
    gsl_matrix_free(f->mu);
    gsl_matrix_free(f->logw);
    gsl_matrix_free(f->chol);
    gsl_matrix_free(f->new_mu);
    gsl_matrix_free(f->new_logw);
    gsl_matrix_free(f->new_chol);
    gsl_matrix_free(f->best_mu);
    gsl_matrix_free(f->best_logw);
    gsl_matrix_free(f->best_chol);
    gsl_matrix_free(f->s2);
    gsl_matrix_free(f->pool);
    gsl_vector_free(f->y);
    free(f->acc);
    free(f->empty);
    gsl_matrix_free(f->imputed);
    gsl_vector_free(f->w_eff);
}

/* Sync the parameters into the graph and evaluate it. */
static lse_status m_energy(mfit *f, double *e)
{
    fit_ctx *c = f->c;
    lse_status st = mgraph_sync(&f->mg, f->mu, f->logw, f->chol);
    if (st != LSE_OK)
        return lse_error_set(c->err, st, "lse_gmm_fit",
                             "run %zu, iteration %zu: a marginal covariance "
                             "is not positive definite; use a larger "
                             "reg_covar",
                             c->run, c->iteration);
    st = lse_graph_energy(f->mg.g, e);
    if (st != LSE_OK)
        return lse_error_set(c->err, st, "lse_gmm_fit",
                             "run %zu, iteration %zu: %s", c->run, c->iteration,
                             lse_graph_errmsg(f->mg.g));
    return LSE_OK;
}

static int rows_equal_nan(const gsl_matrix *x, size_t a, size_t b)
{
    for (size_t j = 0; j < x->size2; j++) {
        const double u = gsl_matrix_get(x, a, j), v = gsl_matrix_get(x, b, j);
        if (!(u == v || (isnan(u) && isnan(v))))
            return 0;
    }
    return 1;
}

/* Re-seeding with missing values: as reseed(), over the rows with an
 * observed value; the new mean takes the row's observed coordinates and
 * the owner's mean on the missing ones. */
static lse_status m_reseed(mfit *f)
{
    fit_ctx *c = f->c;
    const mgraph *mg = &f->mg;
    const size_t n = f->x->size1, K = mg->k, d = mg->d;
    size_t n_chosen = 0;
    for (size_t k = 0; k < K; k++) {
        if (!f->empty[k])
            continue;
        size_t best = n, any = n;
        for (size_t i = 0; i < n; i++) {
            if (mg->row_pat[i] == SIZE_MAX ||
                !((f->w != NULL ? gsl_vector_get(f->w, i) : 1.0) > 0.0))
                continue;
            const double v = mg_loglik(mg, i);
            if (any == n || v < mg_loglik(mg, any))
                any = i;
            int used = 0;
            for (size_t t = 0; t < n_chosen && !used; t++)
                used = rows_equal_nan(f->x, i, c->chosen[t]);
            if (!used && (best == n || v < mg_loglik(mg, best)))
                best = i;
        }
        const size_t i = best < n ? best : any;
        if (i == n)
            return lse_error_set(c->err, LSE_EINTERNAL, "lse_gmm_fit",
                                 "no sample to re-seed component %zu", k);
        size_t owner = K;
        for (size_t o = 0; o < K; o++)
            if (!f->empty[o] &&
                (owner == K || mg_resp(mg, i, o) > mg_resp(mg, i, owner)))
                owner = o;
        const size_t src = owner < K ? owner : k;
        for (size_t j = 0; j < d; j++) {
            const double v = gsl_matrix_get(f->x, i, j);
            gsl_matrix_set(f->mu, k, j,
                           isnan(v) ? gsl_matrix_get(f->mu, src, j) : v);
        }
        if (owner < K) {
            if (mg->cov != LSE_COV_TIED) {
                gsl_vector_view from = gsl_matrix_row(f->chol, owner);
                gsl_matrix_set_row(f->chol, k, &from.vector);
            }
            const double lw = gsl_matrix_get(f->logw, owner, 0) - M_LN2;
            gsl_matrix_set(f->logw, owner, 0, lw);
            gsl_matrix_set(f->logw, k, 0, lw);
        } else {
            gsl_matrix_set(f->logw, k, 0, 0.0);
        }
        c->chosen[n_chosen++] = i;
        lse_log(LSE_LOG_WARN,
                "lse_gmm_fit: run %zu, iteration %zu: component %zu has no "
                "responsibility; re-seeded at sample %zu",
                c->run, c->iteration, k, i);
        const lse_status st = add_event(c, k, i);
        if (st != LSE_OK)
            return st;
    }
    return LSE_OK;
}

static lse_status m_not_pd(const mfit *f, size_t k, double n_k)
{
    const fit_ctx *c = f->c;
    if (f->mg.cov == LSE_COV_TIED)
        return lse_error_set(c->err, LSE_ENUMERIC, "lse_gmm_fit",
                             "run %zu, iteration %zu: the tied covariance is "
                             "not positive definite; use a larger reg_covar "
                             "(now %g)",
                             c->run, c->iteration, f->reg_covar);
    return lse_error_set(c->err, LSE_ENUMERIC, "lse_gmm_fit",
                         "run %zu, iteration %zu: component %zu: covariance "
                         "is not positive definite (N_k = %g); use a larger "
                         "reg_covar (now %g)",
                         c->run, c->iteration, k, n_k, f->reg_covar);
}

/* Cholesky of f->s2 (+ reg on the diagonal) into row b of new_chol. */
static lse_status m_chol_full(mfit *f, size_t b, size_t k, double n_k)
{
    const size_t d = f->mg.d;
    for (size_t j = 0; j < d; j++)
        *gsl_matrix_ptr(f->s2, j, j) += f->reg_covar;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++)
            if (!isfinite(gsl_matrix_get(f->s2, i, j)))
                return m_not_pd(f, k, n_k);
    const int rc = gsl_linalg_cholesky_decomp1(f->s2);
    if (rc == GSL_EDOM)
        return m_not_pd(f, k, n_k);
    if (rc != GSL_SUCCESS)
        return lse_error_set(f->c->err, lse_status_from_gsl(rc), "lse_gmm_fit",
                             "Cholesky factorization: %s", gsl_strerror(rc));
    double *out = gsl_matrix_ptr(f->new_chol, b, 0);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            out[i * d + j] = j <= i ? gsl_matrix_get(f->s2, i, j) : 0.0;
    return LSE_OK;
}

/*
 * M-step with expected sufficient statistics. For row i of pattern (O, M)
 * and component k, with y_i = E[x_i | x_iO, k] - mu_k:
 *   y_O = x_O - mu_O,  y_M = B_k y_O,  B_k = Sigma_MO Sigma_OO^-1,
 *   E[(x - mu)(x - mu)' | x_O, k] = y y' + [0 0; 0 C_k],
 *   C_k = Sigma_MM - B_k Sigma_OM.
 * Statistics (shifted by the current means, weights r_ik w_i):
 *   N_k = sum r,  s1 = sum r y,  s2 = sum r (y y' + C)
 * give mu_k += s1 / N_k and S_k = s2 / N_k - (s1/N_k)(s1/N_k)', projected on
 * the covariance type as in the complete-data M-step, plus reg_covar.
 * resp: (N, K) explicit responsibilities, or NULL for the terms' softmax.
 */
/* Expected sufficient statistics of the current responsibilities (resp,
 * or the pattern terms' kept softmax) into f->acc: counts (K), sums
 * (K, d) and the lower triangles of the second moments (K, d, d) of the
 * centered rows with the missing coordinates imputed. */
static lse_status m_stats(mfit *f, const gsl_matrix *resp)
{
    mgraph *mg = &f->mg;
    const size_t K = mg->k, d = mg->d;
    const lse_cov_type cov = mg->cov;
    const int full_like = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    double *n = f->acc, *s1 = f->acc + K, *s2 = f->acc + K + K * d;
    memset(f->acc, 0, (K + K * d + K * d * d) * sizeof *f->acc);
    double *y = gsl_vector_ptr(f->y, 0);
    for (size_t p = 0; p < mg->n_pat; p++) {
        const pattern *q = &mg->pat[p];
        const gsl_matrix *a =
            resp != NULL ? NULL : lse_term_softmax(q->t); /* (rows, K) */
        for (size_t k = 0; k < K; k++) {
            if (full_like && q->n_mis > 0) {
                const lse_status st = conditional(mg, q, k);
                if (st != LSE_OK)
                    return m_not_pd(f, k, n[k]);
            }
            const double *mu = gsl_matrix_const_ptr(f->mu, k, 0);
            double *s1k = s1 + k * d, *s2k = s2 + k * d * d;
            double sum_r = 0.0;
            for (size_t r = 0; r < q->n_rows; r++) {
                const size_t i = q->rows[r];
                double rik = resp != NULL ? gsl_matrix_get(resp, i, k)
                                          : gsl_matrix_get(a, r, k);
                if (f->w != NULL)
                    rik *= gsl_vector_get(f->w, i);
                if (!(rik > 0.0))
                    continue;
                for (size_t o = 0; o < q->n_obs; o++)
                    y[q->obs[o]] =
                        gsl_matrix_get(f->x, i, q->obs[o]) - mu[q->obs[o]];
                for (size_t m = 0; m < q->n_mis; m++) {
                    double v = 0.0;
                    if (full_like)
                        for (size_t o = 0; o < q->n_obs; o++)
                            v += gsl_matrix_get(mg->b, m, o) * y[q->obs[o]];
                    y[q->mis[m]] = v;
                }
                sum_r += rik;
                for (size_t j = 0; j < d; j++) {
                    s1k[j] += rik * y[j];
                    for (size_t l = 0; l <= j; l++)
                        s2k[j * d + l] += rik * y[j] * y[l];
                }
            }
            n[k] += sum_r;
            if (!(sum_r > 0.0))
                continue;
            gsl_matrix_const_view sv = gsl_matrix_const_submatrix(
                mg->sig, sig_row(mg, k), 0, mg->d, mg->d);
            const gsl_matrix *sig = &sv.matrix;
            for (size_t m = 0; m < q->n_mis; m++)
                for (size_t l = 0; l <= m; l++) {
                    const size_t jm = q->mis[m], jl = q->mis[l];
                    double v = 0.0;
                    if (full_like)
                        v = gsl_matrix_get(mg->cmm, m, l);
                    else if (m == l)
                        v = gsl_matrix_get(sig, jm, jm);
                    /* mis is ascending: jm >= jl, the lower triangle */
                    s2k[jm * d + jl] += sum_r * v;
                }
        }
    }
    return LSE_OK;
}

/* The M-step from the statistics of m_stats, then the re-seeding. */
static lse_status m_solve(mfit *f)
{
    mgraph *mg = &f->mg;
    const size_t K = mg->k, d = mg->d;
    const lse_cov_type cov = mg->cov;
    const double *n = f->acc, *s1 = f->acc + K, *s2 = f->acc + K + K * d;
    double total = 0.0;
    for (size_t k = 0; k < K; k++)
        total += n[k];
    if (!(total > 0.0) || !isfinite(total))
        return lse_error_set(f->c->err, LSE_EDOM, "lse_gmm_fit",
                             "run %zu, iteration %zu: total responsibility "
                             "is %g",
                             f->c->run, f->c->iteration, total);
    gsl_matrix_memcpy(f->new_mu, f->mu);
    gsl_matrix_memcpy(f->new_chol, f->chol);
    gsl_matrix_memcpy(f->new_logw, f->logw);
    gsl_matrix_set_zero(f->pool);
    size_t n_empty = 0;
    for (size_t k = 0; k < K; k++) {
        const double n_k = n[k];
        f->empty[k] = !(n_k >= f->min_count) || !(n_k > 0.0);
        if (n_k > 0.0)
            gsl_matrix_set(f->new_logw, k, 0, log(n_k / total));
        if (f->empty[k]) {
            n_empty++;
            continue;
        }
        const double *s1k = s1 + k * d, *s2k = s2 + k * d * d;
        for (size_t j = 0; j < d; j++)
            *gsl_matrix_ptr(f->new_mu, k, j) += s1k[j] / n_k;
        for (size_t j = 0; j < d; j++)
            for (size_t l = 0; l <= j; l++) {
                const double v =
                    s2k[j * d + l] / n_k - (s1k[j] / n_k) * (s1k[l] / n_k);
                gsl_matrix_set(f->s2, j, l, v);
                gsl_matrix_set(f->s2, l, j, v);
            }
        lse_status st = LSE_OK;
        switch (cov) {
        case LSE_COV_FULL:
            st = m_chol_full(f, k, k, n_k);
            break;
        case LSE_COV_TIED:
            for (size_t j = 0; j < d; j++)
                for (size_t l = 0; l < d; l++)
                    *gsl_matrix_ptr(f->pool, j, l) +=
                        n_k * gsl_matrix_get(f->s2, j, l);
            break;
        case LSE_COV_DIAG:
            for (size_t j = 0; j < d; j++) {
                const double v = gsl_matrix_get(f->s2, j, j) + f->reg_covar;
                if (!(v > 0.0) || !isfinite(v)) {
                    st = m_not_pd(f, k, n_k);
                    break;
                }
                gsl_matrix_set(f->new_chol, k, j, sqrt(v));
            }
            break;
        case LSE_COV_SPHERICAL: {
            double tr = 0.0;
            for (size_t j = 0; j < d; j++)
                tr += gsl_matrix_get(f->s2, j, j);
            const double v = tr / (double)d + f->reg_covar;
            if (!(v > 0.0) || !isfinite(v))
                st = m_not_pd(f, k, n_k);
            else
                gsl_matrix_set(f->new_chol, k, 0, sqrt(v));
            break;
        }
        }
        if (st != LSE_OK)
            return st;
    }
    if (cov == LSE_COV_TIED) {
        for (size_t j = 0; j < d; j++)
            for (size_t l = 0; l <= j; l++) {
                const double v = gsl_matrix_get(f->pool, j, l) / total;
                gsl_matrix_set(f->s2, j, l, v);
                gsl_matrix_set(f->s2, l, j, v);
            }
        const lse_status st = m_chol_full(f, 0, 0, total);
        if (st != LSE_OK)
            return st;
    }
    gsl_matrix_memcpy(f->mu, f->new_mu);
    gsl_matrix_memcpy(f->chol, f->new_chol);
    gsl_matrix_memcpy(f->logw, f->new_logw);
    return n_empty > 0 ? m_reseed(f) : LSE_OK;
}

static lse_status m_mstep(mfit *f, const gsl_matrix *resp)
{
    const lse_status st = m_stats(f, resp);
    return st != LSE_OK ? st : m_solve(f);
}

/* One run: initialize, EM until converged or max_iter, final evaluation. */
static lse_status m_run(mfit *f, const lse_gmm *m, const lse_gmm_fit_opts *o,
                        double total, lse_gmm_fit_info *res)
{
    (void)total; /* the rule is relative: |change| <= tol |energy| */
    fit_ctx *c = f->c;
    c->iteration = 0;
    double e;
    lse_status st;
    if (o->init == LSE_GMM_INIT_GIVEN) {
        gsl_matrix_memcpy(f->mu, m->means);
        for (size_t k = 0; k < m->k; k++)
            gsl_matrix_set(f->logw, k, 0, log(gsl_vector_get(m->weights, k)));
        gsl_matrix_memcpy(f->chol, m->chol);
    } else {
        st = init_start(c, m->cov, o, &f->iw, f->mu, f->chol, f->logw);
        if (st == LSE_OK)
            st = m_energy(f, &e);
        if (st == LSE_OK)
            st = m_mstep(f, f->iw.resp);
        if (st != LSE_OK)
            return st;
    }
    double prev = NAN;
    res->converged = 0;
    res->n_iter = 0;
    res->n_increase = 0;
    for (size_t it = 1; it <= o->max_iter; it++) {
        c->iteration = it;
        st = m_energy(f, &e);
        if (st != LSE_OK)
            return st;
        const double delta = it > 1 ? e - prev : NAN;
        if (it > 1 && delta > 1e-10 * fmax(1.0, fabs(prev))) {
            res->n_increase++;
            lse_log(LSE_LOG_WARN,
                    "lse_gmm_fit: EM energy rose from %.17g to %.17g at "
                    "iteration %zu",
                    prev, e, it);
        }
        if (o->progress != NULL)
            o->progress(c->run, it, e, delta, o->progress_user);
        st = m_mstep(f, NULL);
        if (st != LSE_OK)
            return st;
        res->n_iter = it;
        prev = e;
        if (isfinite(delta) && fabs(delta) <= o->tol * fabs(e)) {
            res->converged = 1;
            break;
        }
    }
    st = m_energy(f, &e);
    if (st != LSE_OK)
        return st;
    res->loglik = -e;
    return LSE_OK;
}

/* Mean-impute x for the initialization; w_eff = w on rows with an
 * observed value, else 0. LSE_EINVAL for a column without observed value
 * (weighted). */
static lse_status m_impute(mfit *f, lse_error *err)
{
    const gsl_matrix *x = f->x;
    const size_t n = x->size1, d = x->size2;
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(f->w_eff, i,
                       f->mg.row_pat[i] == SIZE_MAX
                           ? 0.0
                           : (f->w != NULL ? gsl_vector_get(f->w, i) : 1.0));
    for (size_t j = 0; j < d; j++) {
        double s = 0.0, sw = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double v = gsl_matrix_get(x, i, j);
            const double wi = gsl_vector_get(f->w_eff, i);
            if (!isnan(v) && wi > 0.0) {
                s += wi * v;
                sw += wi;
            }
        }
        if (!(sw > 0.0))
            return lse_error_set(err, LSE_EINVAL, "lse_gmm_fit",
                                 "column %zu has no observed value", j);
        for (size_t i = 0; i < n; i++) {
            const double v = gsl_matrix_get(x, i, j);
            gsl_matrix_set(f->imputed, i, j, isnan(v) ? s / sw : v);
        }
    }
    return LSE_OK;
}

/* lse_gmm_fit on data with NaN (missing = MARGINALIZE). */
static lse_status fit_missing(lse_gmm *m, const gsl_matrix *x,
                              const lse_gmm_fit_opts *o, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    const size_t n = x->size1, K = m->k, d = m->d;
    mfit f;
    memset(&f, 0, sizeof f);
    fit_ctx c = {.cov = m->cov, .err = err};
    f.c = &c;
    f.x = x;
    f.w = o->sample_weight;
    f.reg_covar = o->reg_covar;
    f.min_count = lse_mstep_opts_default().min_count;
    lse_status st = mgraph_build(m, x, o->sample_weight, &f.mg, fn, err);
    if (st != LSE_OK)
        return st;
    const size_t cr = m->chol->size1, cc = m->chol->size2;
    const int iw_ok = init_work_alloc(&f.iw, n, K, o->seed, 1);
    f.mu = gsl_matrix_alloc(K, d);
    f.logw = gsl_matrix_alloc(K, 1);
    f.chol = gsl_matrix_alloc(cr, cc);
    f.new_mu = gsl_matrix_alloc(K, d);
    f.new_logw = gsl_matrix_alloc(K, 1);
    f.new_chol = gsl_matrix_alloc(cr, cc);
    f.best_mu = gsl_matrix_alloc(K, d);
    f.best_logw = gsl_matrix_alloc(K, 1);
    f.best_chol = gsl_matrix_alloc(cr, cc);
    f.s2 = gsl_matrix_alloc(d, d);
    f.pool = gsl_matrix_alloc(d, d);
    f.y = gsl_vector_alloc(d);
    f.acc = malloc((K + K * d + K * d * d) * sizeof *f.acc);
    f.empty = calloc(K, 1);
    f.imputed = gsl_matrix_alloc(n, d);
    f.w_eff = gsl_vector_alloc(n);
    c.chosen = calloc(K, sizeof *c.chosen);
    if (!iw_ok || f.mu == NULL || f.logw == NULL || f.chol == NULL ||
        f.new_mu == NULL || f.new_logw == NULL || f.new_chol == NULL ||
        f.best_mu == NULL || f.best_logw == NULL || f.best_chol == NULL ||
        f.s2 == NULL || f.pool == NULL || f.y == NULL || f.acc == NULL ||
        f.empty == NULL || f.imputed == NULL || f.w_eff == NULL ||
        c.chosen == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    st = m_impute(&f, err);
    if (st != LSE_OK)
        goto done;
    c.x = f.imputed;
    c.w = f.w_eff;
    double total = 0.0;
    size_t n_missing = 0;
    for (size_t i = 0; i < n; i++) {
        total += gsl_vector_get(f.w_eff, i);
        for (size_t j = 0; j < d; j++)
            n_missing += isnan(gsl_matrix_get(x, i, j)) != 0;
    }
    const size_t n_runs = o->init == LSE_GMM_INIT_GIVEN ? 1 : o->n_init;
    lse_gmm_fit_info best = empty_info();
    for (size_t run = 0; run < n_runs; run++) {
        c.run = run;
        lse_gmm_fit_info r = empty_info();
        st = m_run(&f, m, o, total, &r);
        if (st != LSE_OK)
            goto done;
        if (best.fitted && !(r.loglik > best.loglik))
            continue;
        best = r;
        best.fitted = 1;
        best.best_run = run;
        gsl_matrix_memcpy(f.best_mu, f.mu);
        gsl_matrix_memcpy(f.best_logw, f.logw);
        gsl_matrix_memcpy(f.best_chol, f.chol);
    }
    gsl_matrix_memcpy(m->means, f.best_mu);
    weights_from_logw(f.best_logw, m->weights);
    gsl_matrix_memcpy(m->chol, f.best_chol);
    lse_cov_from_chol(m->cov, d, m->chol, m->covs);
    const double p = (double)lse_gmm_n_params(m);
    best.n_eff = total;
    best.n_samples = n;
    best.n_missing = n_missing;
    best.loglik_per_sample = best.loglik / total;
    best.bic = -2.0 * best.loglik + p * log(total);
    best.aic = -2.0 * best.loglik + 2.0 * p;
    m->info = best;
    free(m->events);
    m->events = c.events;
    m->n_events = c.n_events;
    c.events = NULL;
done:
    free(c.events);
    free(c.chosen);
    mfit_free(&f);
    return st;
}

lse_status lse_gmm_posterior(const lse_gmm *m, const gsl_matrix *x,
                             lse_gmm_missing missing, gsl_matrix *resp,
                             gsl_vector *loglik, lse_error *err)
{
    static const char fn[] = "lse_gmm_posterior";
    if (m == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (missing != LSE_GMM_MISSING_ERROR &&
        missing != LSE_GMM_MISSING_MARGINALIZE)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown missing policy %d",
                             (int)missing);
    if (resp != NULL && (resp->size1 != x->size1 || resp->size2 != m->k))
        return lse_error_set(err, LSE_EDIM, fn,
                             "resp is %zu x %zu, expected %zu x %zu",
                             resp->size1, resp->size2, x->size1, m->k);
    if (loglik != NULL && loglik->size != x->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "loglik has %zu entries for %zu samples",
                             loglik->size, x->size1);
    if (x->size2 != m->d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data have %zu columns, the model d = %zu",
                             x->size2, m->d);
    int any_nan = 0;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++) {
            const double v = gsl_matrix_get(x, i, j);
            if (isinf(v) || (isnan(v) && missing == LSE_GMM_MISSING_ERROR))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu, column %zu is %g", i, j, v);
            any_nan |= isnan(v) != 0;
        }
    if (!any_nan) {
        gmm_graph gg;
        const lse_status st = query(m, x, &gg, NULL, fn, err);
        if (st != LSE_OK)
            return st;
        if (resp != NULL)
            gsl_matrix_memcpy(resp, lse_term_softmax(gg.t));
        if (loglik != NULL)
            gsl_vector_memcpy(loglik, lse_term_row_lse(gg.t));
        lse_graph_free(gg.g);
        return LSE_OK;
    }
    mgraph mg;
    lse_status st = mgraph_build(m, x, NULL, &mg, fn, err);
    if (st != LSE_OK)
        return st;
    gsl_matrix *logw = gsl_matrix_alloc(m->k, 1);
    if (logw == NULL) {
        mgraph_free(&mg);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t k = 0; k < m->k; k++)
        gsl_matrix_set(logw, k, 0, log(gsl_vector_get(m->weights, k)));
    st = mgraph_sync(&mg, m->means, logw, m->chol);
    gsl_matrix_free(logw);
    double e;
    if (st != LSE_OK)
        lse_error_set(err, st, fn,
                      "a marginal covariance is not positive definite");
    else if ((st = lse_graph_energy(mg.g, &e)) != LSE_OK)
        lse_error_set(err, st, fn, "%s", lse_graph_errmsg(mg.g));
    for (size_t i = 0; st == LSE_OK && i < x->size1; i++) {
        const int none = mg.row_pat[i] == SIZE_MAX;
        if (loglik != NULL)
            gsl_vector_set(loglik, i, none ? 0.0 : mg_loglik(&mg, i));
        for (size_t k = 0; resp != NULL && k < m->k; k++)
            gsl_matrix_set(resp, i, k,
                           none ? gsl_vector_get(m->weights, k)
                                : mg_resp(&mg, i, k));
    }
    mgraph_free(&mg);
    return st;
}

lse_status lse_gmm_fit(lse_gmm *m, const gsl_matrix *x,
                       const lse_gmm_fit_opts *opts, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    const lse_gmm_fit_opts o =
        opts != NULL ? *opts : lse_gmm_fit_opts_default();
    double total = 0.0;
    int has_nan = 0;
    lse_status st = check_fit_opts(m, x, &o, err);
    if (st != LSE_OK)
        return st;
    /* the shares of the processes (identity for one process) */
    lse_comm dist;
    st = lse_comm_init(&dist, o.reduce, o.reduce_user, o.rank, o.n_ranks,
                            x->size1, fn, err);
    if (st != LSE_OK)
        return st;
    st = check_fit_data(m, x, &o, &dist, &total, &has_nan, err);
    if (st != LSE_OK || has_nan) {
        lse_comm_free(&dist);
        return st != LSE_OK ? st : fit_missing(m, x, &o, err);
    }
    lse_gsl_quiet();
    fit_work fw;
    memset(&fw, 0, sizeof fw);
    fit_ctx c = {
        .x = x, .w = o.sample_weight, .cov = m->cov, .dist = &dist, .err = err};
    c.chosen_rows = calloc(m->k * m->d, sizeof *c.chosen_rows);
    if (c.chosen_rows == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    st = fit_work_new(m, x, &o, total, &fw, err);
    if (st != LSE_OK)
        goto done;
    st = fit_ctx_alloc(&c, &fw.gg);
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "out of memory");
        goto done;
    }
    lse_solver_set_mstep_hook(fw.solver, mstep_hook, &c);
    if (lse_comm_parallel(&dist))
        lse_solver_set_reduce(fw.solver, lse_comm_reduce, &dist);

    const size_t n_runs = o.init == LSE_GMM_INIT_GIVEN ? 1 : o.n_init;
    lse_gmm_fit_info best = empty_info();
    for (size_t run = 0; run < n_runs; run++) {
        c.run = run;
        st = initialize(&c, m, &o, &fw);
        if (st != LSE_OK)
            goto done;
        int converged;
        st = run_em(&c, &o, &fw, &converged);
        if (st != LSE_OK)
            goto done;
        const double ll = -lse_solver_energy(fw.solver);
        if (!(ll > best.loglik) && best.fitted)
            continue;
        best.fitted = 1;
        best.loglik = ll;
        best.n_iter = lse_solver_n_iter(fw.solver);
        best.converged = converged;
        best.best_run = run;
        best.n_increase = lse_solver_n_increase(fw.solver);
        gsl_matrix_memcpy(fw.best_mu, lse_node_value(fw.gg.mu));
        gsl_matrix_memcpy(fw.best_logw, lse_node_value(fw.gg.logw));
        gsl_matrix_memcpy(fw.best_chol, lse_node_value(fw.gg.chol));
    }
    /* commit */
    gsl_matrix_memcpy(m->means, fw.best_mu);
    weights_from_logw(fw.best_logw, m->weights);
    gsl_matrix_memcpy(m->chol, fw.best_chol);
    lse_cov_from_chol(m->cov, m->d, m->chol, m->covs);
    const double p = (double)lse_gmm_n_params(m);
    best.n_eff = total;
    best.n_samples = dist.n_total;
    best.loglik_per_sample = best.loglik / total;
    best.bic = -2.0 * best.loglik + p * log(total);
    best.aic = -2.0 * best.loglik + 2.0 * p;
    m->info = best;
    free(m->events);
    m->events = c.events;
    m->n_events = c.n_events;
    c.events = NULL;
done:
    free(c.events);
    free(c.chosen_rows);
    fit_ctx_free(&c);
    fit_work_free(&fw);
    lse_comm_free(&dist);
    return st;
}
