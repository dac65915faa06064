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

lse_status lse_gmm_copy(lse_gmm *dst, const lse_gmm *src, lse_error *err)
{
    static const char fn[] = "lse_gmm_copy";
    if (dst == NULL || src == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (dst->k != src->k || dst->d != src->d || dst->cov != src->cov ||
        dst->model != src->model)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "the mixtures differ in K, d or covariance");
    if (dst == src)
        return LSE_OK;
    lse_gmm_event *ev = NULL;
    if (src->n_events > 0) {
        ev = malloc(src->n_events * sizeof *ev);
        if (ev == NULL)
            return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        memcpy(ev, src->events, src->n_events * sizeof *ev);
    }
    gsl_vector_memcpy(dst->weights, src->weights);
    gsl_matrix_memcpy(dst->means, src->means);
    gsl_matrix_memcpy(dst->chol, src->chol);
    gsl_matrix_memcpy(dst->covs, src->covs);
    dst->info = src->info;
    free(dst->events);
    dst->events = ev;
    dst->n_events = src->n_events;
    return LSE_OK;
}

lse_status lse_gmm_new(size_t k, size_t d, lse_cov_type cov, lse_gmm **out,
                       lse_error *err)
{
    static const char fn[] = "lse_gmm_new";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *out = NULL;
    lse_gsl_quiet();
    if (k == 0 || d == 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "k = %zu and d = %zu must both be positive", k, d);
    if (lse_gmm_cov_name(cov) == NULL)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown covariance type %d",
                             (int)cov);
    lse_gmm *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
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
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_vector_set_all(m->weights, 1.0 / (double)k);
    lse_cov_chol_scaled_identity(cov, d, 1.0, m->chol);
    lse_cov_from_chol(cov, d, m->chol, m->covs);
    m->info = gmm_empty_info();
    *out = m;
    return LSE_OK;
}

lse_status lse_gmm_new_model(size_t k, size_t d, lse_cov_model model,
                             lse_gmm **out, lse_error *err)
{
    const lse_cov_type cov = lse_cov_model_layout(model);
    if (out != NULL)
        *out = NULL;
    if (out != NULL && lse_cov_model_name(model) == NULL)
        return lse_error_set(err, LSE_EINVAL, "lse_gmm_new_model",
                             "unknown covariance model %d", (int)model);
    const lse_status st = lse_gmm_new(k, d, cov, out, err);
    if (st == LSE_OK)
        (*out)->model = model;
    return st;
}

lse_cov_model lse_gmm_cov_model(const lse_gmm *m)
{
    return m != NULL ? m->model : LSE_COV_MODEL_NONE;
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
    if (m->model != LSE_COV_MODEL_NONE)
        return lse_cov_model_n_params(m->model, k, d);
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
void gmm_params_to_graph(const gsl_vector *weights, const gsl_matrix *means,
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
lse_status gmm_graph_build(const lse_gmm *m, const gsl_matrix *x,
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
    if (st == LSE_OK) /* written only here: no check per evaluation */
        st = lse_node_seal(gg->x);
    if (st != LSE_OK)
        return graph_fail(gg, st, fn, err);
    gmm_params_to_graph(m->weights, m->means, m->chol, gg);
    const lse_gaussian_config cfg = {.cov = m->cov, .model = m->model};
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
    lse_status st = LSE_OK;
    if (gmm_cache_take_query(m, x, gg)) /* kept by a scope: m's values */
        gmm_params_to_graph(m->weights, m->means, m->chol, gg);
    else
        st = gmm_graph_build(m, x, NULL, 1, gg, fn, err);
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
    gmm_graph_release(m, &gg);
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
    gmm_graph_release(m, &gg);
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
    gmm_graph_release(m, &gg);
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
    gmm_graph_release(m, &gg);
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
    o.accel = LSE_GMM_ACCEL_SQUAREM; /* docs/lsefit.md, "Acceleration" */
    return o;
}

/* The fit's list of re-seeding events (gmm_fit.c, gmm_missing.c). */
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
