#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>

#include "gmm-private.h"

/*
 * The Gaussian mixture with missing values (opts.missing =
 * LSE_GMM_MISSING_MARGINALIZE): one LSE term per missingness pattern on the
 * observed coordinates, EM with expected sufficient statistics, and the
 * posterior of rows with NaN. docs/models/gmm.md, "Missing data".
 */

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
    gmm_init_work_free(&f->iw);
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
        const lse_status st = gmm_add_event(c, k, i);
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
        st = gmm_init_start(c, m->cov, o, &f->iw, f->mu, f->chol, f->logw);
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
lse_status gmm_fit_missing(lse_gmm *m, const gsl_matrix *x,
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
    const int iw_ok = gmm_init_work_alloc(&f.iw, n, K, o->seed, 1);
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
    lse_gmm_fit_info best = gmm_empty_info();
    for (size_t run = 0; run < n_runs; run++) {
        c.run = run;
        lse_gmm_fit_info r = gmm_empty_info();
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
    gmm_weights_from_logw(f.best_logw, m->weights);
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
        const lse_status st = gmm_query(m, x, &gg, NULL, fn, err);
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
