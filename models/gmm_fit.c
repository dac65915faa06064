#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_math.h>

#include <lsegraph/lsegraph.h>

#include "gmm-private.h"
#include "gmm_trace.h"


/*
 * lse_gmm_fit: EM on the model's graph with lse_solver_em, several runs,
 * the re-seeding of empty components (the solver's M-step hook), and the
 * same loop on the pattern graph of data with missing values
 * (models/gmm_missing.c). docs/models/gmm.md.
 */
static int row_equals(const gsl_matrix *x, size_t a, const double *v)
{
    const double *xa = gsl_matrix_const_ptr(x, a, 0);
    for (size_t j = 0; j < x->size2; j++)
        if (xa[j] != v[j])
            return 0;
    return 1;
}

/* dst = src (gsl_matrix_memcpy copies a row at a time through BLAS) */
static void copy_params(gsl_matrix *dst, const gsl_matrix *src)
{
    for (size_t i = 0; i < src->size1; i++)
        memcpy(gsl_matrix_ptr(dst, i, 0), gsl_matrix_const_ptr(src, i, 0),
               src->size2 * sizeof(double));
}

/* Remember the parameters the next E-step evaluates (c->e_*). */
static void snapshot_estep(fit_ctx *c, const gmm_graph *gg)
{
    copy_params(c->e_mu, lse_node_value(gg->mu));
    copy_params(c->e_logw, lse_node_value(gg->logw));
    copy_params(c->e_chol, lse_node_value(gg->chol));
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
    for (int i = 0; i < 2; i++) {
        c->tr_ok[i] = 0;
        c->tr_chol[i] = gsl_matrix_alloc(chol->size1, chol->size2);
        c->tr_val[i] = malloc(chol->size1 * sizeof *c->tr_val[i]);
        if (c->tr_chol[i] == NULL || c->tr_val[i] == NULL)
            return LSE_ENOMEM;
    }
    return LSE_OK;
}

static void fit_ctx_free(fit_ctx *c)
{
    gsl_matrix_free(c->e_mu);
    gsl_matrix_free(c->e_logw);
    gsl_matrix_free(c->e_chol);
    gsl_matrix_free(c->srow);
    for (int i = 0; i < 2; i++) {
        gsl_matrix_free(c->tr_chol[i]);
        free(c->tr_val[i]);
    }
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
    /* NULL: streaming, or kept only for reuse (recompute as streaming) */
    const gsl_matrix *resp = c->resp_recompute ? NULL : lse_term_softmax(t);
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

static void fit_work_free(fit_work *fw)
{
    lse_solver_free(fw->solver);
    gmm_miss_work_free(fw->miss);
    lse_graph_free(fw->gg.g);
    gmm_init_work_free(&fw->iw);
    free(fw->empty);
    gsl_matrix_free(fw->best_mu);
    gsl_matrix_free(fw->best_logw);
    gsl_matrix_free(fw->best_chol);
}

static void init_resp_fill(size_t i0, gsl_matrix *out, void *user)
{
    gmm_init_resp_rows(user, i0, out);
}

static lse_status provisional_estep(fit_ctx *c, fit_work *fw);

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
    gmm_init_resp_done(&fw->iw, K);
    if (st != LSE_OK)
        return lse_error_set(c->err, st, fn, "run %zu, initial M-step: %s",
                             c->run, e.message + sizeof "lse_term_mstep: " - 1);
    if (rep.n_empty > 0) {
        st = provisional_estep(c, fw);
        if (st == LSE_OK)
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
        gmm_params_to_graph(m->weights, m->means, m->chol, gg);
        return fw->miss != NULL ? gmm_miss_sync(fw) : LSE_OK;
    }
    lse_status st =
        gmm_init_start(c, m->cov, o, &fw->iw, lse_node_value(gg->mu),
                   lse_node_value(gg->chol), lse_node_value(gg->logw));
    if (st != LSE_OK)
        return st;
    if (fw->miss != NULL)
        return gmm_miss_initial_mstep(fw, &fw->iw);
    /* the E-step at this provisional model is needed only to re-seed
     * empty components after the initial M-step (provisional_estep): a
     * fifth of the evaluations of a short run otherwise */
    snapshot_estep(c, gg);
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
    if (o->accel != LSE_GMM_ACCEL_NONE && o->accel != LSE_GMM_ACCEL_SQUAREM)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown acceleration %d",
                             (int)o->accel);
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

/* The solver's options of a fit. */
static lse_status solver_opts(const lse_gmm_fit_opts *o, fit_work *fw,
                              lse_error *err)
{
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 0.0; /* run_em tests |change| <= tol |energy| */
    so.increase_tol = INFINITY; /* em_step checks, with reg_covar's bound */
    so.mstep.reg_covar = o->reg_covar;
    const lse_status st = lse_solver_set_opts(fw->solver, &so);
    if (st != LSE_OK)
        return lse_error_set(err, st, "lse_gmm_fit", "%s",
                             lse_graph_errmsg(fw->gg.g));
    return LSE_OK;
}

/* May the fit's scratch be kept for the next fit (models/gmm_cache.c)?
 * Not with sample weights (the term borrows them) or several processes
 * (called before the pattern graph of missing values is built). */
static int fit_cacheable(const lse_gmm_fit_opts *o, const fit_ctx *c)
{
    return o->sample_weight == NULL && c->dist != NULL &&
           !lse_comm_parallel(c->dist);
}

/* A kept fit's scratch made what fit_work_new would have built: a new
 * generator state from the seed, the start's labels and the empty flags
 * zeroed as calloc gives them, no memo of an earlier evaluation, this
 * fit's solver options. The graph's parameters, the solver's state and
 * the best run are written by every run before they are read. */
static lse_status fit_work_reset(const lse_gmm_fit_opts *o, const fit_ctx *c,
                                 fit_work *fw, lse_error *err)
{
    gsl_rng_set(fw->iw.rng, o->seed);
    memset(fw->iw.labels, 0, c->x->size1 * sizeof *fw->iw.labels);
    memset(fw->empty, 0, lse_node_rows(fw->gg.mu));
    lse_graph_set_reuse(fw->gg.g, c->resp_recompute);
    return solver_opts(o, fw, err);
}

/* The fit's graph, solver and scratch: the model's graph, or with missing
 * values (has_nan) the pattern graph (models/gmm_missing.c), or those a
 * scope kept from the last fit on the same data (models/gmm_cache.c). */
static lse_status fit_work_new(const lse_gmm *m, const gsl_matrix *x,
                               const lse_gmm_fit_opts *o, int has_nan,
                               fit_ctx *c, fit_work *fw, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit";
    const size_t n = x->size1, K = m->k;
    int iw_ok = 1;
    lse_status st;
    if (has_nan) {
        st = gmm_miss_work_new(m, x, o, c, fw, err);
    } else {
        /* small: the term keeps its softmax, so that a repeated
         * evaluation is only its statistics (lse_graph_set_reuse) */
        c->resp_recompute = n * K <= GMM_KEEP_MAX;
        if (fit_cacheable(o, c) &&
            gmm_cache_take_fit(m, x, c->resp_recompute, fw))
            return fit_work_reset(o, c, fw, err);
        st = gmm_graph_build(m, x, o->sample_weight, c->resp_recompute,
                             &fw->gg, fn, err);
        fw->solver = lse_solver_new(fw->gg.g, lse_solver_em);
        iw_ok = gmm_init_work_alloc(&fw->iw, n, K, o->seed, 0);
    }
    if (st != LSE_OK)
        return st;
    /* SQUAREM evaluates the extrapolated point, then its EM step
     * evaluates it again: the second time only the statistics are taken
     * (lse_graph_set_reuse; the same bits). Only where the softmax is
     * kept: otherwise the memo (a copy of the data, compared at every
     * evaluation) would cost time and memory and save nothing */
    lse_graph_set_reuse(fw->gg.g, c->resp_recompute);
    fw->empty = calloc(K, 1);
    fw->best_mu = gsl_matrix_alloc(K, m->d);
    fw->best_logw = gsl_matrix_alloc(K, 1);
    fw->best_chol = gsl_matrix_alloc(m->chol->size1, m->chol->size2);
    if (fw->solver == NULL || !iw_ok || fw->empty == NULL ||
        fw->best_mu == NULL || fw->best_logw == NULL || fw->best_chol == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    return solver_opts(o, fw, err);
}

static int same_matrix(const gsl_matrix *a, const gsl_matrix *b)
{
    for (size_t i = 0; i < a->size1; i++)
        if (memcmp(gsl_matrix_const_ptr(a, i, 0), gsl_matrix_const_ptr(b, i, 0),
                   a->size2 * sizeof(double)) != 0)
            return 0;
    return 1;
}

/* tr(Sigma^-1) of every factor of chol (lse_gmm_traces): from the cache
 * when chol is one of the two factors of reg_bound's last call (the same
 * bits: the same function of the same values), else computed into the
 * slot whose values are not in_use (what the caller still reads, or NULL)
 * and remembered there. */
static const double *traces_of(fit_ctx *c, const gsl_matrix *chol, size_t d,
                               const double *in_use)
{
    for (int i = 0; i < 2; i++)
        if (c->tr_ok[i] && same_matrix(c->tr_chol[i], chol))
            return c->tr_val[i];
    const int slot = in_use == c->tr_val[0] ? 1 : 0;
    lse_gmm_traces(c->cov, d, chol, c->tr_val[slot]);
    copy_params(c->tr_chol[slot], chol);
    c->tr_ok[slot] = 1;
    return c->tr_val[slot];
}

/*
 * How far the energy may rise in the EM iteration from the parameters of
 * the last E-step (c->e_chol) to the graph's: with reg_covar eps the
 * M-step maximizes Q(theta) - eps / 2 sum_k N_k tr(Sigma_k^-1), not Q, so
 * EM only guarantees
 *   E(new) - E(old) <= eps / 2 sum_k N_k (tr(Sigma_old,k^-1) - tr(Sigma_new,k^-1))
 * with N_k = total pi_new,k (the M-step's weights); 0 when eps = 0 (plain
 * EM is monotone). The bound of the M-step just done. +Inf where it does
 * not apply (d above LSE_GMM_TRACE_MAXD).
 */
static double reg_bound(fit_ctx *c, const gmm_graph *gg)
{
    if (!(c->reg_covar > 0.0))
        return 0.0;
    const gsl_matrix *chol = lse_node_value(gg->chol);
    const gsl_matrix *logw = lse_node_value(gg->logw);
    const size_t K = logw->size1, d = c->x->size2;
    if ((c->cov == LSE_COV_FULL || c->cov == LSE_COV_TIED) &&
        d > LSE_GMM_TRACE_MAXD)
        return INFINITY;
    const double *t_old = traces_of(c, c->e_chol, d, NULL);
    const double *t_new = traces_of(c, chol, d, t_old);
    const double lse = lse_logsumexp(logw->data, K, logw->tda, 1.0);
    double b = 0.0;
    for (size_t k = 0; k < chol->size1; k++) {
        const double nk = chol->size1 == 1
                              ? c->total
                              : c->total * exp(gsl_matrix_get(logw, k, 0) - lse);
        b += nk * (t_old[k] - t_new[k]);
    }
    return 0.5 * c->reg_covar * b;
}

/* One EM iteration (E-step at the current parameters, M-step) with the
 * progress callback; *converged when the stopping rule holds. The energy
 * may not rise by more than reg_bound (or what SQUAREM allowed, c->allow)
 * plus rounding (1e-10 relative); a larger rise is counted and logged.
 * Not checked after a re-seeding. */
static lse_status em_step(fit_ctx *c, const lse_gmm_fit_opts *o, fit_work *fw,
                          int *converged)
{
    lse_solver *s = fw->solver;
    const size_t n = lse_solver_n_iter(s);
    double allow = NAN;
    if (n > 0 && c->n_events == c->ev_mark)
        allow = isnan(c->allow) ? reg_bound(c, &fw->gg) : c->allow;
    c->allow = NAN;
    c->ev_mark = c->n_events;
    c->iteration = n + 1;
    const double e0 = lse_solver_energy(s);
    snapshot_estep(c, &fw->gg);
    const lse_status st = lse_solver_iterate(s);
    if (st != LSE_OK)
        return st;
    const double dlt = lse_solver_delta(s), e = lse_solver_energy(s);
    if (e - e0 > allow + 1e-10 * fmax(1.0, fabs(e0))) {
        c->n_rise++;
        lse_log(LSE_LOG_WARN,
                "lse_gmm_fit: run %zu: EM energy rose from %.17g to %.17g at "
                "iteration %zu (more than reg_covar's bound, %.3g)",
                c->run, e0, e, n, allow);
    }
    if (o->progress != NULL)
        o->progress(c->run, c->iteration, e, dlt, o->progress_user);
    *converged = lse_solver_test(s) == LSE_OK ||
                 (isfinite(dlt) && fabs(dlt) <= o->tol * fabs(e));
    return LSE_OK;
}

/* The parameters (logw, mu, chol) as one vector and back (put derives the
 * pattern nodes of a fit with missing values). */
static size_t theta_size(const gmm_graph *gg)
{
    const gsl_matrix *m[3] = {lse_node_value(gg->logw), lse_node_value(gg->mu),
                              lse_node_value(gg->chol)};
    return m[0]->size1 + m[1]->size1 * m[1]->size2 +
           m[2]->size1 * m[2]->size2;
}

static void theta_get(const gmm_graph *gg, double *v)
{
    lse_node *n[3] = {gg->logw, gg->mu, gg->chol};
    for (size_t i = 0; i < 3; i++) {
        const gsl_matrix *m = lse_node_value(n[i]);
        memcpy(v, m->data, m->size1 * m->size2 * sizeof *v);
        v += m->size1 * m->size2;
    }
}

static void theta_put(const gmm_graph *gg, const double *v)
{
    lse_node *n[3] = {gg->logw, gg->mu, gg->chol};
    for (size_t i = 0; i < 3; i++) {
        gsl_matrix *m = lse_node_value(n[i]);
        memcpy(m->data, v, m->size1 * m->size2 * sizeof *v);
        v += m->size1 * m->size2;
    }
}

/* The E-step at the provisional model of initialize (its snapshot), the
 * initial M-step's parameters set aside meanwhile: reseed takes the row
 * energies and responsibilities of that model. The same values as when
 * the E-step ran before the M-step: the M-step from the initial
 * responsibilities reads no evaluation. */
static lse_status provisional_estep(fit_ctx *c, fit_work *fw)
{
    gmm_graph *gg = &fw->gg;
    double *keep = malloc(theta_size(gg) * sizeof *keep);
    if (keep == NULL)
        return lse_error_set(c->err, LSE_ENOMEM, "lse_gmm_fit",
                             "out of memory");
    theta_get(gg, keep);
    copy_params(lse_node_value(gg->mu), c->e_mu);
    copy_params(lse_node_value(gg->logw), c->e_logw);
    copy_params(lse_node_value(gg->chol), c->e_chol);
    double e;
    const lse_status st = lse_graph_energy(gg->g, &e);
    if (st != LSE_OK)
        lse_error_set(c->err, st, "lse_gmm_fit", "run %zu: %s", c->run,
                      lse_graph_errmsg(gg->g));
    theta_put(gg, keep);
    free(keep);
    return st;
}

/* *e = the energy of the mixture term's last evaluation summed exactly
 * over its rows and the processes (lse_xsum), the same bits for any split
 * of the rows; *e unchanged for a fit with missing values (one process,
 * pattern terms). So SQUAREM's comparisons do not depend on the split. A
 * failing reduction is the fit's error (c->err). */
static lse_status row_sum(fit_ctx *c, fit_work *fw, double *e)
{
    const gsl_vector *rl =
        fw->miss == NULL ? lse_term_row_lse(fw->gg.t) : NULL;
    if (rl == NULL)
        return LSE_OK;
    /* unweighted and no row masked (the common case): the row terms whole,
     * in one call, summed as l and the sum negated (exact, and rounding to
     * nearest is symmetric: the same bits as summing -l); one process
     * only, whose sum lse_comm_xsum would only round: lse_xsum_sum, the
     * same rounded exact sum with its fast path */
    int whole = c->w == NULL && rl->stride == 1 && !lse_comm_parallel(c->dist);
    for (size_t i = 0; whole && i < rl->size; i++)
        whole = rl->data[i] != -INFINITY;
    if (whole) {
        *e = lse_xsum_sum(rl->data, rl->size);
        if (*e != 0.0 && !isnan(*e))
            *e = -*e; /* an empty or cancelling sum stays +0, NaN stays NaN */
        return LSE_OK;
    }
    lse_xsum x;
    lse_xsum_init(&x);
    for (size_t i = 0; i < rl->size; i++) {
        const double l = gsl_vector_get(rl, i);
        if (l != -INFINITY) /* a masked row adds nothing */
            lse_xsum_add(&x, -(c->w != NULL ? gsl_vector_get(c->w, i) : 1.0) *
                                 l);
    }
    const lse_status st =
        lse_comm_xsum(c->dist, &x, 1, e, "lse_gmm_fit", c->err);
    c->hook_failed |= st != LSE_OK;
    return st;
}

/* *en = the energy at the parameters v (summed over the processes), or
 * +Inf when they are infeasible (a singular covariance) on any process. */
static lse_status energy_at(fit_ctx *c, fit_work *fw, const double *v,
                            double *en)
{
    theta_put(&fw->gg, v);
    lse_error e;
    *en = INFINITY;
    if (fw->miss != NULL &&
        lse_gauss_missing_sync(fw->miss->gm, &e) != LSE_OK)
        return LSE_OK; /* one process */
    double mine = INFINITY;
    if (lse_graph_energy(fw->gg.g, &mine) != LSE_OK)
        mine = INFINITY;
    /* every process takes part in the sums, feasible or not */
    double buf[2] = {isfinite(mine) ? mine : 0.0, isfinite(mine) ? 0.0 : 1.0};
    lse_status st = lse_comm_sum(c->dist, buf, 2, "lse_gmm_fit", c->err);
    if (st != LSE_OK) {
        c->hook_failed = 1;
        return st;
    }
    if (buf[1] != 0.0)
        return LSE_OK;
    *en = buf[0];
    return row_sum(c, fw, en);
}

/* The extrapolated point tp = t0 - 2 alpha r + alpha^2 v (r = t1 - t0,
 * v = t2 - 2 t1 + t0), its log-weights renormalized; 0 when it leaves the
 * set regularized EM can reach: a covariance factor's diagonal entry that
 * is not finite, changes sign against t2's or falls below sqrt(reg_covar)
 * (every EM M-step adds reg_covar to the covariances, so their factors'
 * diagonals are at least that), or a weight that underflows. */
static int extrapolate(const gmm_graph *gg, lse_cov_type cov, double reg_covar,
                       const double *t0, const double *t1, const double *t2,
                       double alpha, double *tp)
{
    const gsl_matrix *chol = lse_node_value(gg->chol);
    const size_t K = lse_node_value(gg->logw)->size1;
    const size_t np = theta_size(gg), c0 = np - chol->size1 * chol->size2;
    for (size_t i = 0; i < np; i++) {
        const double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
        tp[i] = t0[i] - 2.0 * alpha * r + alpha * alpha * v;
    }
    const double lse = lse_logsumexp(tp, K, 1, 1.0);
    for (size_t k = 0; k < K; k++) {
        tp[k] -= lse;
        if (!(tp[k] > -700.0))
            return 0;
    }
    const size_t cols = chol->size2;
    const size_t d = cov == LSE_COV_FULL || cov == LSE_COV_TIED
                         ? (size_t)sqrt((double)cols) : cols;
    const double floor = sqrt(reg_covar);
    for (size_t b = 0; b < chol->size1; b++)
        for (size_t j = 0; j < d; j++) {
            const size_t at = c0 + b * cols +
                              (cov == LSE_COV_FULL || cov == LSE_COV_TIED
                                   ? j * d + j : j);
            if (!isfinite(tp[at]) || tp[at] * t2[at] <= 0.0 ||
                fabs(tp[at]) < floor)
                return 0;
        }
    for (size_t i = K; i < c0; i++)
        if (!isfinite(tp[i]))
            return 0;
    return 1;
}

/*
 * SQUAREM (Varadhan & Roland 2008, scheme S3), made monotone: from theta0
 * two EM iterations give theta1 and theta2; with r = theta1 - theta0 and
 * v = theta2 - 2 theta1 + theta0, alpha = -|r| / |v| (at most -1, at least
 * -amax) and theta' = theta0 - 2 alpha r + alpha^2 v (extrapolate: weights
 * renormalized, factors kept feasible). theta' is kept (the next
 * iteration's E-step starts there) when its energy is finite and at most
 * E(theta1) + min(0, reg_bound(theta1 -> theta2)): no rise, and no less
 * than the plain EM step it replaces is guaranteed to gain; otherwise
 * theta2, and amax halves (else it doubles). The EM steps from
 * theta' are EM steps, so the energies never rise by more than
 * reg_covar's bound (em_step checks it). Iterations, the stopping rule and max_iter
 * count EM iterations as run_em does. docs/models/gmm.md, "Acceleration".
 */
static lse_status squarem(fit_ctx *c, const lse_gmm_fit_opts *o, fit_work *fw,
                          int *converged)
{
    lse_solver *s = fw->solver;
    const size_t np = theta_size(&fw->gg);
    double *t0 = malloc(4 * np * sizeof *t0);
    if (t0 == NULL)
        return LSE_ENOMEM;
    double *t1 = t0 + np, *t2 = t1 + np, *tp = t2 + np, amax = INFINITY;
    lse_status st = LSE_OK;
    while (st == LSE_OK && !*converged &&
           lse_solver_n_iter(s) + 2 <= o->max_iter) {
        theta_get(&fw->gg, t0);
        st = em_step(c, o, fw, converged);
        if (st != LSE_OK || *converged)
            break;
        theta_get(&fw->gg, t1);
        st = em_step(c, o, fw, converged);
        if (st != LSE_OK || *converged)
            break;
        theta_get(&fw->gg, t2);
        double rr = 0.0, vv = 0.0;
        for (size_t i = 0; i < np; i++) {
            const double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
            rr += r * r;
            vv += v * v;
        }
        const double alpha = fmax(fmin(-sqrt(rr / vv), -1.0), -amax);
        if (!(vv > 0.0) || !(alpha < -1.0))
            continue;
        /* theta' may not be worse than what EM guarantees for theta2 */
        double e1 = lse_solver_energy(s); /* the rows still hold theta1's */
        st = row_sum(c, fw, &e1);
        if (st != LSE_OK)
            break;
        const double b = reg_bound(c, &fw->gg);
        const double ref = e1 + (b < 0.0 ? b : 0.0);
        double ep = INFINITY;
        if (extrapolate(&fw->gg, c->cov, o->reg_covar, t0, t1, t2, alpha,
                        tp)) {
            st = energy_at(c, fw, tp, &ep);
            if (st != LSE_OK)
                break;
        }
        const int ok = ep <= ref;
        if (ok)
            c->allow = ref - e1;
        if (ok) {
            amax = 2.0 * amax;
        } else { /* back to theta2 (and its pattern nodes) */
            theta_put(&fw->gg, t2);
            if (fw->miss != NULL)
                st = gmm_miss_sync(fw);
            amax = fmax(1.0, -alpha / 2.0);
        }
    }
    free(t0);
    return st;
}

/* One EM run from the initialized graph (accelerated by SQUAREM when
 * asked; the last iterations before max_iter are plain). */
static lse_status run_em(fit_ctx *c, const lse_gmm_fit_opts *o, fit_work *fw,
                         int *converged)
{
    static const char fn[] = "lse_gmm_fit";
    lse_solver *s = fw->solver;
    *converged = 0;
    c->allow = NAN;
    c->n_rise = 0;
    lse_status st = lse_solver_init(s);
    if (st == LSE_OK && c->squarem)
        st = squarem(c, o, fw, converged);
    while (st == LSE_OK && !*converged && lse_solver_n_iter(s) < o->max_iter)
        st = em_step(c, o, fw, converged);
    if (st == LSE_OK)
        st = lse_solver_finish(s);
    if (st != LSE_OK && !c->hook_failed)
        lse_error_set(c->err, st, fn, "run %zu, iteration %zu: %s", c->run,
                      c->iteration,
                      st == LSE_ENOMEM ? "out of memory"
                                       : lse_graph_errmsg(fw->gg.g));
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
    if (st == LSE_OK && has_nan && m->model != LSE_COV_MODEL_NONE &&
        m->model != LSE_COV_VVV && m->model != LSE_COV_VVI &&
        m->model != LSE_COV_VII && m->model != LSE_COV_EEE)
        st = lse_error_set(err, LSE_ENOTSUP, fn,
                           "covariance model %s: missing values can be "
                           "marginalized only with full, diag, spherical or "
                           "tied covariances",
                           lse_cov_model_name(m->model));
    if (st != LSE_OK) {
        lse_comm_free(&dist);
        return st;
    }
    lse_gsl_quiet();
    fit_work fw;
    memset(&fw, 0, sizeof fw);
    fit_ctx c = {.x = x,
                 .w = o.sample_weight,
                 .cov = m->cov,
                 .dist = has_nan ? NULL : &dist, /* one process */
                 .err = err};
    c.chosen_rows = calloc(m->k * m->d, sizeof *c.chosen_rows);
    if (c.chosen_rows == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    st = fit_work_new(m, x, &o, has_nan, &c, &fw, err);
    if (st != LSE_OK)
        goto done;
    if (has_nan)
        total = fw.miss->total;
    c.total = total;
    /* SQUAREM's straight line stays in the model only where its
     * constraints are linear in the factors: not for VEI ... VEV */
    c.squarem = o.accel == LSE_GMM_ACCEL_SQUAREM &&
                (m->model == LSE_COV_MODEL_NONE || m->model == LSE_COV_VVV ||
                 m->model == LSE_COV_VVI || m->model == LSE_COV_VII ||
                 m->model == LSE_COV_EEE || m->model == LSE_COV_EII ||
                 m->model == LSE_COV_EEI);
    c.reg_covar = o.reg_covar;
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
        best.n_increase = c.n_rise;
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
    best.n_missing = has_nan ? fw.miss->n_missing : 0;
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
    free(c.chosen);
    fit_ctx_free(&c);
    if (st == LSE_OK && fit_cacheable(&o, &c) && fw.miss == NULL)
        gmm_cache_put_fit(m, c.resp_recompute, &fw, fit_work_free);
    else
        fit_work_free(&fw);
    lse_comm_free(&dist);
    return st;
}
