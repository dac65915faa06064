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

#include "gmm-private.h"

/*
 * Gaussian mixture model as an LSE graph: data node "x" (N, d), clamped;
 * PARAM nodes "mu" (K, d), "logw" (K, 1), "chol" (lse_cov_type layout); one
 * LSE term "mixture" with lse_sim_gaussian. The energy is the negative
 * log-likelihood; EM is lse_solver_em, whose M-step is the similarity's
 * closed form. Everything goes through the public API. Derivations:
 * docs/models/gmm.md.
 */


/* ------------------------------------------------------------------ */
/* Shapes and names                                                    */

const char *lse_gmm_cov_name(lse_cov_type cov) { return lse_cov_name(cov); }

lse_status lse_gmm_cov_parse(const char *name, lse_cov_type *out)
{
    return lse_cov_parse(name, out);
}

lse_gmm_fit_info gmm_empty_info(void)
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
    m->info = gmm_empty_info();
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
void gmm_weights_from_logw(const gsl_matrix *logw, gsl_vector *weights)
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
lse_status gmm_query(const lse_gmm *m, const gsl_matrix *x, gmm_graph *gg,
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
    const lse_status st = gmm_query(m, x, &gg, NULL, fn, err);
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
    const lse_status st = gmm_query(m, x, &gg, NULL, fn, err);
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
    const lse_status st = gmm_query(m, x, &gg, NULL, fn, err);
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
    const lse_status st = gmm_query(m, x, &gg, NULL, fn, err);
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
    const lse_status st = gmm_query(m, x, &gg, &e, fn, err);
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
    m->info = gmm_empty_info();
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


double gmm_row_weight(const fit_ctx *c, size_t i)
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
        if (!(gmm_row_weight(c, i) > 0.0))
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

lse_status gmm_add_event(fit_ctx *c, size_t k, size_t sample)
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
        st = gmm_add_event(c, k, i);
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
        buf[0] += gmm_row_weight(c, i);
    for (size_t j = 0; j < d; j++)
        for (size_t i = 0; i < n; i++)
            buf[1 + j] += gmm_row_weight(c, i) * gsl_matrix_get(x, i, j);
    lse_status st = lse_comm_sum(c->dist, buf, d + 1, fn, c->err);
    const double total = buf[0];
    for (size_t j = 0; st == LSE_OK && j < d; j++) {
        const double mean = buf[1 + j] / total;
        double s2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - mean;
            s2 += gmm_row_weight(c, i) * t * t;
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


void gmm_init_work_free(init_work *iw)
{
    gsl_rng_free(iw->rng);
    gsl_matrix_free(iw->resp);
    gsl_vector_free(iw->d2);
    gsl_vector_free(iw->sums);
    free(iw->labels);
}

int gmm_init_work_alloc(init_work *iw, size_t n, size_t k,
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
lse_status gmm_init_start(const fit_ctx *c, lse_cov_type cov,
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
        const double wi = gmm_row_weight(c, i);
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
    gmm_init_work_free(&fw->iw);
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
        gmm_init_start(c, m->cov, o, &fw->iw, lse_node_value(gg->mu),
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
    const int iw_ok = gmm_init_work_alloc(&fw->iw, n, K, o->seed, 0);
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
        return st != LSE_OK ? st : gmm_fit_missing(m, x, &o, err);
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
    lse_gmm_fit_info best = gmm_empty_info();
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
    gmm_weights_from_logw(fw.best_logw, m->weights);
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
