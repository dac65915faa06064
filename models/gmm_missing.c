#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_math.h>

#include <lsegraph/lsegraph.h>

#include "gmm-private.h"

/*
 * The Gaussian mixture with missing values (opts.missing =
 * LSE_GMM_MISSING_MARGINALIZE): the shared nodes "logw", "mu", "chol" and
 * the pattern terms of lse_gauss_missing (the marginal likelihood of the
 * observed coordinates), fitted by lse_solver_em with the
 * expected-statistics M-step as its group M-step; and the posterior of
 * rows with NaN. docs/models/gmm.md, "Missing data".
 */

/* The shared nodes (holding the model's values) and the pattern terms of
 * x (NaN = missing) with row weights w, in a new graph gg->g. */
static lse_status miss_graph(const lse_gmm *m, const gsl_matrix *x,
                             const gsl_vector *w, gmm_graph *gg,
                             lse_gauss_missing **gm, const char *fn,
                             lse_error *err)
{
    memset(gg, 0, sizeof *gg);
    *gm = NULL;
    gg->g = lse_graph_new();
    if (gg->g == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_graph_set_block_rows(gg->g, GMM_BLOCK);
    lse_status st =
        lse_graph_add_node(gg->g, "logw", m->k, 1, LSE_NODE_PARAM, &gg->logw);
    if (st == LSE_OK)
        st = lse_graph_add_node(gg->g, "mu", m->k, m->d, LSE_NODE_PARAM,
                                &gg->mu);
    if (st == LSE_OK)
        st = lse_graph_add_node(gg->g, "chol", m->chol->size1, m->chol->size2,
                                LSE_NODE_PARAM, &gg->chol);
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "%s", lse_graph_errmsg(gg->g));
        lse_graph_free(gg->g);
        gg->g = NULL;
        return st;
    }
    gmm_params_to_graph(m->weights, m->means, m->chol, gg);
    lse_error e;
    st = lse_gauss_missing_new(gg->g, NULL, x, w, gg->logw, gg->mu, gg->chol,
                               m->cov, gm, &e);
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "%s", e.message);
        lse_graph_free(gg->g);
        gg->g = NULL;
    }
    return st;
}

void gmm_miss_work_free(miss_work *mw)
{
    if (mw == NULL)
        return;
    lse_gauss_missing_free(mw->gm);
    gsl_matrix_free(mw->imputed);
    gsl_vector_free(mw->w_eff);
    free(mw->acc);
    free(mw->empty);
    free(mw->rrow);
    free(mw);
}

/* Mean-impute x for the starts; w_eff = w on rows with an observed value,
 * else 0. LSE_EINVAL for a column without observed value (weighted). */
static lse_status impute(miss_work *mw, const gsl_vector *w, lse_error *err)
{
    const gsl_matrix *x = mw->x;
    const size_t n = x->size1, d = x->size2;
    mw->total = 0.0;
    mw->n_missing = 0;
    for (size_t i = 0; i < n; i++) {
        size_t n_obs = 0;
        for (size_t j = 0; j < d; j++)
            n_obs += !isnan(gsl_matrix_get(x, i, j));
        mw->n_missing += d - n_obs;
        gsl_vector_set(mw->w_eff, i,
                       n_obs == 0 ? 0.0
                                  : (w != NULL ? gsl_vector_get(w, i) : 1.0));
        mw->total += gsl_vector_get(mw->w_eff, i);
    }
    for (size_t j = 0; j < d; j++) {
        double s = 0.0, sw = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double v = gsl_matrix_get(x, i, j);
            const double wi = gsl_vector_get(mw->w_eff, i);
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
            gsl_matrix_set(mw->imputed, i, j, isnan(v) ? s / sw : v);
        }
    }
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

/* The row to re-seed at: the lowest log-likelihood of the last E-step
 * among rows with an observed value and a positive weight that differ
 * from those chosen in this pass (else among all of them); n if none. */
static size_t lowest_row(const miss_work *mw, size_t n_chosen)
{
    const fit_ctx *c = mw->c;
    const size_t n = mw->x->size1;
    size_t best = n, any = n;
    double vbest = 0.0, vany = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v;
        if (!(gmm_row_weight(c, i) > 0.0) ||
            !lse_gauss_missing_row(mw->gm, i, &v, NULL))
            continue;
        if (any == n || v < vany) {
            any = i;
            vany = v;
        }
        int used = 0;
        for (size_t t = 0; t < n_chosen && !used; t++)
            used = rows_equal_nan(mw->x, i, c->chosen[t]);
        if (!used && (best == n || v < vbest)) {
            best = i;
            vbest = v;
        }
    }
    return best < n ? best : any;
}

/* Re-seeding with missing values: as in the complete-data fit, over the
 * rows with an observed value; the new mean takes the row's observed
 * coordinates and the owner's mean on the missing ones. */
static lse_status reseed(miss_work *mw, gmm_graph *gg)
{
    fit_ctx *c = mw->c;
    gsl_matrix *mu = lse_node_value(gg->mu);
    gsl_matrix *logw = lse_node_value(gg->logw);
    gsl_matrix *chol = lse_node_value(gg->chol);
    const size_t K = mu->size1, d = mu->size2;
    size_t n_chosen = 0;
    for (size_t k = 0; k < K; k++) {
        if (!mw->empty[k])
            continue;
        const size_t i = lowest_row(mw, n_chosen);
        if (i == mw->x->size1)
            return lse_error_set(c->err, LSE_EINTERNAL, "lse_gmm_fit",
                                 "no sample to re-seed component %zu", k);
        lse_gauss_missing_row(mw->gm, i, NULL, mw->rrow);
        size_t owner = K;
        for (size_t o = 0; o < K; o++)
            if (!mw->empty[o] &&
                (owner == K || mw->rrow[o] > mw->rrow[owner]))
                owner = o;
        const size_t src = owner < K ? owner : k;
        for (size_t j = 0; j < d; j++) {
            const double v = gsl_matrix_get(mw->x, i, j);
            gsl_matrix_set(mu, k, j, isnan(v) ? gsl_matrix_get(mu, src, j) : v);
        }
        if (owner < K) {
            if (c->cov != LSE_COV_TIED) {
                gsl_vector_view from = gsl_matrix_row(chol, owner);
                gsl_matrix_set_row(chol, k, &from.vector);
            }
            const double lw = gsl_matrix_get(logw, owner, 0) - M_LN2;
            gsl_matrix_set(logw, owner, 0, lw);
            gsl_matrix_set(logw, k, 0, lw);
        } else {
            gsl_matrix_set(logw, k, 0, 0.0);
        }
        c->chosen[n_chosen++] = i;
        lse_log(LSE_LOG_WARN,
                "lse_gmm_fit: run %zu, iteration %zu: component %zu has no "
                "responsibility; re-seeded at sample %zu",
                c->run, c->iteration, k, i);
        const lse_status st = gmm_add_event(c, k, i);
        if (st != LSE_OK)
            return st;
    }
    return LSE_OK;
}

/* An error of a gauss_missing verb, with the run and iteration. */
static lse_status miss_fail(fit_ctx *c, lse_status st, const lse_error *e)
{
    const char *msg = strchr(e->message, ':');
    c->hook_failed = 1;
    return lse_error_set(c->err, st, "lse_gmm_fit",
                         "run %zu, iteration %zu: %s", c->run, c->iteration,
                         msg != NULL ? msg + 2 : e->message);
}

lse_status gmm_miss_sync(fit_work *fw)
{
    lse_error e;
    const lse_status st = lse_gauss_missing_sync(fw->miss->gm, &e);
    return st != LSE_OK ? miss_fail(fw->miss->c, st, &e) : LSE_OK;
}

/* The M-step from the statistics acc, the re-seeding, the sync. */
static lse_status miss_solve(fit_work *fw, const double *acc)
{
    miss_work *mw = fw->miss;
    lse_mstep_report rep = {.empty = mw->empty};
    lse_error e;
    lse_status st = lse_gauss_missing_solve(mw->gm, acc, &mw->mo, &rep, &e);
    if (st != LSE_OK)
        return miss_fail(mw->c, st, &e);
    if (rep.n_empty == 0)
        return LSE_OK;
    st = reseed(mw, &fw->gg);
    return st != LSE_OK ? st : gmm_miss_sync(fw);
}

static lse_status group_stats(lse_graph *g, double *acc, void *user)
{
    (void)g;
    fit_work *fw = user;
    lse_error e;
    const lse_status st = lse_gauss_missing_stats(fw->miss->gm, NULL, acc, &e);
    return st != LSE_OK ? miss_fail(fw->miss->c, st, &e) : LSE_OK;
}

static lse_status group_solve(lse_graph *g, const double *acc, void *user)
{
    (void)g;
    return miss_solve(user, acc);
}

lse_status gmm_miss_initial_mstep(fit_work *fw, const init_work *iw)
{
    miss_work *mw = fw->miss;
    lse_error e;
    double en;
    lse_status st = gmm_miss_sync(fw);
    if (st == LSE_OK && (st = lse_graph_energy(fw->gg.g, &en)) != LSE_OK) {
        mw->c->hook_failed = 1;
        return lse_error_set(mw->c->err, st, "lse_gmm_fit", "run %zu: %s",
                             mw->c->run, lse_graph_errmsg(fw->gg.g));
    }
    if (st == LSE_OK &&
        (st = lse_gauss_missing_stats(mw->gm, iw->resp, mw->acc, &e)) != LSE_OK)
        return miss_fail(mw->c, st, &e);
    return st != LSE_OK ? st : miss_solve(fw, mw->acc);
}

lse_status gmm_miss_work_new(const lse_gmm *m, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o, fit_ctx *c,
                             fit_work *fw, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    const size_t n = x->size1, K = m->k, d = m->d;
    miss_work *mw = fw->miss = calloc(1, sizeof *mw);
    if (mw == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    mw->x = x;
    mw->c = c;
    mw->mo = lse_mstep_opts_default();
    mw->mo.reg_covar = o->reg_covar;
    lse_status st = miss_graph(m, x, o->sample_weight, &fw->gg, &mw->gm, fn,
                               err);
    if (st != LSE_OK)
        return st;
    mw->imputed = gsl_matrix_alloc(n, d);
    mw->w_eff = gsl_vector_alloc(n);
    mw->acc = malloc(lse_gauss_missing_stats_size(mw->gm) * sizeof *mw->acc);
    mw->empty = calloc(K, 1);
    mw->rrow = malloc(K * sizeof *mw->rrow);
    c->chosen = calloc(K, sizeof *c->chosen);
    fw->solver = lse_solver_new(fw->gg.g, lse_solver_em);
    if (mw->imputed == NULL || mw->w_eff == NULL || mw->acc == NULL ||
        mw->empty == NULL || mw->rrow == NULL || c->chosen == NULL ||
        fw->solver == NULL ||
        !gmm_init_work_alloc(&fw->iw, n, K, o->seed, 1))
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    st = impute(mw, o->sample_weight, err);
    if (st != LSE_OK)
        return st;
    c->x = mw->imputed; /* the starts see the imputed data */
    c->w = mw->w_eff;
    lse_mstep_group grp = {.n_stats = lse_gauss_missing_stats_size(mw->gm),
                           .stats = group_stats,
                           .solve = group_solve,
                           .user = fw};
    grp.nodes = lse_gauss_missing_nodes(mw->gm, &grp.n_nodes);
    st = lse_solver_set_group(fw->solver, &grp);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "%s", lse_graph_errmsg(fw->gg.g));
    return LSE_OK;
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
        const lse_status st = gmm_query(m, x, &gg, NULL, fn, err);
        if (st != LSE_OK)
            return st;
        if (resp != NULL)
            gsl_matrix_memcpy(resp, lse_term_softmax(gg.t));
        if (loglik != NULL)
            gsl_vector_memcpy(loglik, lse_term_row_lse(gg.t));
        gmm_graph_release(m, &gg);
        return LSE_OK;
    }
    gmm_graph gg;
    lse_gauss_missing *gm;
    lse_status st = miss_graph(m, x, NULL, &gg, &gm, fn, err);
    if (st != LSE_OK)
        return st;
    lse_error e;
    double en;
    if ((st = lse_gauss_missing_sync(gm, &e)) != LSE_OK)
        lse_error_set(err, st, fn,
                      "a marginal covariance is not positive definite");
    else if ((st = lse_graph_energy(gg.g, &en)) != LSE_OK)
        lse_error_set(err, st, fn, "%s", lse_graph_errmsg(gg.g));
    for (size_t i = 0; st == LSE_OK && i < x->size1; i++) {
        double ll = 0.0;
        double *ri = resp != NULL ? gsl_matrix_ptr(resp, i, 0) : NULL;
        if (!lse_gauss_missing_row(gm, i, &ll, ri))
            for (size_t k = 0; ri != NULL && k < m->k; k++)
                ri[k] = gsl_vector_get(m->weights, k);
        if (loglik != NULL)
            gsl_vector_set(loglik, i, ll);
    }
    lse_gauss_missing_free(gm);
    lse_graph_free(gg.g);
    return st;
}
