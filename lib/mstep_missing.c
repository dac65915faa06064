#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include "graph-private.h"
#include "sim/gauss-private.h"
#include "size-private.h"
#include "linalg-private.h"

/*
 * A Gaussian mixture over rows with missing entries (include/lsegraph/
 * mstep.h, docs/core.md "Missing entries"). Rows are grouped by
 * missingness pattern; pattern p with observed columns O gets a clamped
 * node (its rows, columns O), a mean node mu_O and a factor node of
 * Sigma_OO, and an LSE term with lse_sim_gaussian sharing the caller's
 * logw. The marginal of a Gaussian on O is N(mu_O, Sigma_OO), so the
 * energy of the terms is -sum_i w_i log p(x_iO). The pattern nodes are
 * derived from the shared (logw, mu, chol) by lse_gauss_missing_sync; the
 * M-step takes expected sufficient statistics and runs the gaussian
 * similarity's own closed form on them.
 */

typedef struct pattern {
    unsigned char *observed; /* (d) 1 = observed */
    size_t n_obs, n_mis;
    size_t *obs, *mis; /* observed / missing column indices, ascending */
    size_t n_rows;
    size_t *rows;            /* rows of X with this pattern */
    lse_node *x, *mu, *chol; /* this pattern's nodes */
    lse_term *t;
} pattern;

struct lse_gauss_missing {
    lse_graph *g;
    lse_node *logw, *mu, *chol; /* shared, (K, 1), (K, d), cov layout */
    const gsl_matrix *x;        /* (N, d) borrowed */
    const gsl_vector *w;        /* (N) borrowed, or NULL */
    pattern *pat;
    size_t n_pat;
    size_t *row_pat; /* (N) pattern of each row; SIZE_MAX: nothing observed */
    size_t *row_pos; /* (N) position of the row within its pattern */
    size_t k, d;
    lse_cov_type cov;
    lse_node **nodes; /* shared and derived nodes, for the solver */
    size_t n_nodes;
    gsl_matrix *sig;     /* (K*d, d) full covariances (tied: block 0) */
    gsl_matrix *soo;     /* (d, d) Sigma_OO, then its Cholesky factor */
    gsl_matrix *b;       /* (d, d) B = Sigma_MO Sigma_OO^-1 (n_mis, n_obs) */
    gsl_matrix *cmm;     /* (d, d) Sigma_MM - B Sigma_OM (n_mis, n_mis) */
    gsl_vector *v1, *v2; /* (d) */
    double *y;           /* (d) a centered expected row */
    /* the gaussian similarity's M-step on the full dimensions */
    lse_gauss_work *work;
    size_t prow[2], pcol[2];
};

void lse_gauss_missing_free(lse_gauss_missing *gm)
{
    if (gm == NULL)
        return;
    for (size_t p = 0; gm->pat != NULL && p < gm->n_pat; p++) {
        free(gm->pat[p].observed);
        free(gm->pat[p].obs);
        free(gm->pat[p].mis);
        free(gm->pat[p].rows);
    }
    free(gm->pat);
    free(gm->row_pat);
    free(gm->row_pos);
    free(gm->nodes);
    gsl_matrix_free(gm->sig);
    gsl_matrix_free(gm->soo);
    gsl_matrix_free(gm->b);
    gsl_matrix_free(gm->cmm);
    gsl_vector_free(gm->v1);
    gsl_vector_free(gm->v2);
    free(gm->y);
    lse_gauss_work_free(gm->work);
    free(gm);
}

static pattern *new_pattern(lse_gauss_missing *gm, size_t *cap, size_t i)
{
    const size_t d = gm->d;
    if (gm->n_pat == *cap) {
        *cap = *cap > 0 ? 2 * *cap : 4;
        pattern *np = realloc(gm->pat, *cap * sizeof *np);
        if (np == NULL)
            return NULL;
        gm->pat = np;
    }
    pattern *q = &gm->pat[gm->n_pat++];
    memset(q, 0, sizeof *q);
    q->observed = malloc(d);
    q->obs = malloc(d * sizeof *q->obs);
    q->mis = malloc(d * sizeof *q->mis);
    if (q->observed == NULL || q->obs == NULL || q->mis == NULL)
        return NULL;
    for (size_t j = 0; j < d; j++) {
        q->observed[j] = !isnan(gsl_matrix_get(gm->x, i, j));
        if (q->observed[j])
            q->obs[q->n_obs++] = j;
        else
            q->mis[q->n_mis++] = j;
    }
    return q;
}

/* Group the rows by pattern in order of first appearance (rows with
 * nothing observed belong to none). Returns 0 when out of memory. */
static int find_patterns(lse_gauss_missing *gm)
{
    const gsl_matrix *x = gm->x;
    const size_t n = x->size1, d = x->size2;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        size_t n_obs = 0;
        for (size_t j = 0; j < d; j++)
            n_obs += !isnan(gsl_matrix_get(x, i, j));
        gm->row_pat[i] = SIZE_MAX;
        if (n_obs == 0)
            continue;
        size_t p = 0;
        for (; p < gm->n_pat; p++) {
            size_t j = 0;
            while (j < d &&
                   gm->pat[p].observed[j] == !isnan(gsl_matrix_get(x, i, j)))
                j++;
            if (j == d)
                break;
        }
        if (p == gm->n_pat && new_pattern(gm, &cap, i) == NULL)
            return 0;
        gm->row_pat[i] = p;
        gm->row_pos[i] = gm->pat[p].n_rows++;
    }
    for (size_t p = 0; p < gm->n_pat; p++) {
        gm->pat[p].rows = malloc(gm->pat[p].n_rows * sizeof(size_t));
        if (gm->pat[p].rows == NULL)
            return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (gm->row_pat[i] != SIZE_MAX)
            gm->pat[gm->row_pat[i]].rows[gm->row_pos[i]] = i;
    return 1;
}

/* Pattern q's clamped rows, mean and factor nodes and its term. */
static lse_status add_pattern(lse_gauss_missing *gm, size_t p,
                              const char *prefix)
{
    pattern *q = &gm->pat[p];
    lse_graph *g = gm->g;
    const size_t K = gm->k;
    char name[96];
    snprintf(name, sizeof name, "%sx.%zu", prefix, p);
    lse_status st = lse_graph_add_node(g, name, q->n_rows, q->n_obs,
                                       LSE_NODE_CLAMPED, &q->x);
    snprintf(name, sizeof name, "%smu.%zu", prefix, p);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, name, K, q->n_obs, LSE_NODE_PARAM, &q->mu);
    snprintf(name, sizeof name, "%schol.%zu", prefix, p);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, name, lse_cov_chol_rows(gm->cov, K),
                                lse_cov_chol_cols(gm->cov, q->n_obs),
                                LSE_NODE_PARAM, &q->chol);
    if (st != LSE_OK)
        return st;
    gsl_matrix *xv = lse_node_value(q->x);
    for (size_t r = 0; r < q->n_rows; r++)
        for (size_t a = 0; a < q->n_obs; a++)
            gsl_matrix_set(xv, r, a,
                           gsl_matrix_get(gm->x, q->rows[r], q->obs[a]));
    gsl_vector *rw = NULL;
    if (gm->w != NULL) {
        rw = gsl_vector_alloc(q->n_rows);
        if (rw == NULL)
            return LSE_ENOMEM;
        for (size_t r = 0; r < q->n_rows; r++)
            gsl_vector_set(rw, r, gsl_vector_get(gm->w, q->rows[r]));
    }
    const lse_gaussian_config cfg = {.cov = gm->cov};
    lse_node *params[2] = {gm->logw, q->chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(q->x);
    spec.parent = lse_view_all(q->mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &cfg;
    spec.param = params;
    spec.row_weight = rw;
    snprintf(name, sizeof name, "%smixture.%zu", prefix, p);
    st = lse_graph_add_lse(g, name, &spec, &q->t);
    gsl_vector_free(rw);
    gm->nodes[gm->n_nodes++] = q->mu;
    gm->nodes[gm->n_nodes++] = q->chol;
    return st;
}

/* The gaussian similarity's workspace on the full dimensions, set to take
 * moments (its M-step only). */
static lse_status solve_work(lse_gauss_missing *gm)
{
    const size_t K = gm->k, d = gm->d;
    gm->prow[0] = K;
    gm->pcol[0] = 1;
    gm->prow[1] = lse_cov_chol_rows(gm->cov, K);
    gm->pcol[1] = lse_cov_chol_cols(gm->cov, d);
    const lse_sim_shape shape = {.n_child = 1,
                                 .block = 1,
                                 .n_parent = K,
                                 .d_child = d,
                                 .d_parent = d,
                                 .n_param = 2,
                                 .param_rows = gm->prow,
                                 .param_cols = gm->pcol};
    const lse_gaussian_config cfg = {.cov = gm->cov};
    lse_status st = lse_gauss_work_new(&shape, &cfg, &gm->work);
    if (st != LSE_OK)
        return st;
    gm->work->moments = 1;
    return LSE_OK;
}

static int check_new_args(const lse_graph *g, const gsl_matrix *x,
                          const lse_node *logw, const lse_node *mu,
                          const lse_node *chol, lse_cov_type cov)
{
    if (g == NULL || x == NULL || logw == NULL || mu == NULL || chol == NULL)
        return 0;
    const gsl_matrix *lw = logw->value, *m = mu->value, *c = chol->value;
    const size_t K = m->size1, d = m->size2;
    return lse_cov_name(cov) != NULL && K > 0 && d > 0 && x->size2 == d &&
           lw->size1 == K && lw->size2 == 1 &&
           c->size1 == lse_cov_chol_rows(cov, K) &&
           c->size2 == lse_cov_chol_cols(cov, d);
}

lse_status lse_gauss_missing_new(lse_graph *g, const char *prefix,
                                 const gsl_matrix *x, const gsl_vector *w,
                                 lse_node *logw, lse_node *mu, lse_node *chol,
                                 lse_cov_type cov, lse_gauss_missing **out,
                                 lse_error *err)
{
    static const char fn[] = "lse_gauss_missing_new";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    *out = NULL;
    if (!check_new_args(g, x, logw, mu, chol, cov))
        return lse_error_set(err, x == NULL || g == NULL ? LSE_EFAULT : LSE_EDIM,
                             fn,
                             "need a graph, data (N, d) and nodes logw (K, "
                             "1), mu (K, d), chol in the layout of the "
                             "covariance type");
    if (w != NULL && w->size != x->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%zu row weights for %zu rows", w->size, x->size1);
    const size_t n = x->size1, d = x->size2, K = mu->value->size1;
    size_t dd;
    if (lse_size_mul(K, d, &dd) || lse_size_array_overflows(dd, d, 8) ||
        lse_size_array_overflows(n, 1, sizeof(size_t)))
        return lse_error_set(err, LSE_ENOMEM, fn, "sizes exceed memory");
    lse_gauss_missing *gm = calloc(1, sizeof *gm);
    if (gm == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    *gm = (lse_gauss_missing){
        .g = g, .logw = logw, .mu = mu, .chol = chol, .x = x, .w = w,
        .k = K, .d = d, .cov = cov};
    gm->row_pat = malloc((n + 1) * sizeof *gm->row_pat);
    gm->row_pos = malloc((n + 1) * sizeof *gm->row_pos);
    gm->sig = gsl_matrix_alloc(K * d, d);
    gm->soo = gsl_matrix_alloc(d, d);
    gm->b = gsl_matrix_alloc(d, d);
    gm->cmm = gsl_matrix_alloc(d, d);
    gm->v1 = gsl_vector_alloc(d);
    gm->v2 = gsl_vector_alloc(d);
    gm->y = malloc(d * sizeof *gm->y);
    lse_status st = LSE_ENOMEM;
    if (gm->row_pat != NULL && gm->row_pos != NULL && gm->sig != NULL &&
        gm->soo != NULL && gm->b != NULL && gm->cmm != NULL &&
        gm->v1 != NULL && gm->v2 != NULL && gm->y != NULL &&
        find_patterns(gm) &&
        (gm->nodes = malloc((3 + 2 * gm->n_pat) * sizeof *gm->nodes)) != NULL)
        st = solve_work(gm);
    if (st != LSE_OK) {
        lse_gauss_missing_free(gm);
        return lse_error_set(err, st, fn, "out of memory");
    }
    gm->nodes[gm->n_nodes++] = logw;
    gm->nodes[gm->n_nodes++] = mu;
    gm->nodes[gm->n_nodes++] = chol;
    for (size_t p = 0; p < gm->n_pat && st == LSE_OK; p++)
        st = add_pattern(gm, p, prefix != NULL ? prefix : "");
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "%s",
                      st == LSE_ENOMEM ? "out of memory" : lse_graph_errmsg(g));
        lse_gauss_missing_free(gm);
        return st;
    }
    *out = gm;
    return LSE_OK;
}

/* Full covariance of block b (component, or 0 for tied) from the shared
 * factors, into the (d, d) block b of gm->sig. */
static void full_cov(lse_gauss_missing *gm, const gsl_matrix *chol, size_t b)
{
    const size_t d = gm->d;
    gsl_matrix_view s = gsl_matrix_submatrix(gm->sig, b * d, 0, d, d);
    gsl_matrix_set_zero(&s.matrix);
    const double *l = gsl_matrix_const_ptr(chol, b, 0);
    for (size_t i = 0; i < d; i++)
        switch (gm->cov) {
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

/* Component k's covariance in gm->sig (tied: block 0). */
static _gsl_matrix_const_view sig_of(const lse_gauss_missing *gm, size_t k)
{
    const size_t row = (gm->cov == LSE_COV_TIED ? 0 : k) * gm->d;
    return gsl_matrix_const_submatrix(gm->sig, row, 0, gm->d, gm->d);
}

/* Cholesky factor of Sigma_k[O, O] into gm->soo (top-left n_obs block).
 * LSE_ENUMERIC if it is not positive definite. */
static lse_status factor_oo(lse_gauss_missing *gm, const pattern *q, size_t k)
{
    gsl_matrix_const_view sv = sig_of(gm, k);
    const gsl_matrix *s = &sv.matrix;
    gsl_matrix_view f = gsl_matrix_submatrix(gm->soo, 0, 0, q->n_obs, q->n_obs);
    for (size_t a = 0; a < q->n_obs; a++)
        for (size_t c = 0; c < q->n_obs; c++)
            gsl_matrix_set(&f.matrix, a, c,
                           gsl_matrix_get(s, q->obs[a], q->obs[c]));
    const int rc = lse_chol_decomp1(&f.matrix);
    return rc == GSL_SUCCESS ? LSE_OK
           : rc == GSL_EDOM  ? LSE_ENUMERIC
                             : lse_status_from_gsl(rc);
}

/* Pattern q's factor node from the shared factors chol. */
static lse_status sync_factor(lse_gauss_missing *gm, const pattern *q,
                              const gsl_matrix *chol)
{
    gsl_matrix *cp = lse_node_value(q->chol);
    for (size_t b = 0; b < cp->size1; b++) {
        if (gm->cov == LSE_COV_DIAG) {
            for (size_t a = 0; a < q->n_obs; a++)
                gsl_matrix_set(cp, b, a, gsl_matrix_get(chol, b, q->obs[a]));
            continue;
        }
        if (gm->cov == LSE_COV_SPHERICAL) {
            gsl_matrix_set(cp, b, 0, gsl_matrix_get(chol, b, 0));
            continue;
        }
        const lse_status st = factor_oo(gm, q, b);
        if (st != LSE_OK)
            return st;
        const size_t no = q->n_obs;
        double *out = gsl_matrix_ptr(cp, b, 0);
        for (size_t a = 0; a < no; a++)
            for (size_t c = 0; c < no; c++)
                out[a * no + c] = c <= a ? gsl_matrix_get(gm->soo, a, c) : 0.0;
    }
    return LSE_OK;
}

lse_status lse_gauss_missing_sync(lse_gauss_missing *gm, lse_error *err)
{
    static const char fn[] = "lse_gauss_missing_sync";
    if (gm == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const gsl_matrix *mu = gm->mu->value, *chol = gm->chol->value;
    const size_t K = gm->k, nb = gm->cov == LSE_COV_TIED ? 1 : K;
    for (size_t b = 0; b < nb; b++)
        full_cov(gm, chol, b);
    for (size_t p = 0; p < gm->n_pat; p++) {
        const pattern *q = &gm->pat[p];
        gsl_matrix *mp = lse_node_value(q->mu);
        for (size_t k = 0; k < K; k++)
            for (size_t a = 0; a < q->n_obs; a++)
                gsl_matrix_set(mp, k, a, gsl_matrix_get(mu, k, q->obs[a]));
        const lse_status st = sync_factor(gm, q, chol);
        if (st != LSE_OK)
            return lse_error_set(err, st, fn,
                                 "a marginal covariance is not positive "
                                 "definite; use a larger reg_covar");
    }
    return LSE_OK;
}

/* For full/tied covariances: B = Sigma_MO Sigma_OO^-1 (n_mis, n_obs) into
 * gm->b and C = Sigma_MM - B Sigma_OM into gm->cmm, for component k. */
static lse_status conditional(lse_gauss_missing *gm, const pattern *q,
                              size_t k)
{
    lse_status st = factor_oo(gm, q, k);
    if (st != LSE_OK)
        return st;
    gsl_matrix_const_view sv = sig_of(gm, k);
    const gsl_matrix *s = &sv.matrix;
    const size_t no = q->n_obs, nm = q->n_mis;
    gsl_matrix_view f = gsl_matrix_submatrix(gm->soo, 0, 0, no, no);
    gsl_vector_view rhs = gsl_vector_subvector(gm->v1, 0, no);
    gsl_vector_view sol = gsl_vector_subvector(gm->v2, 0, no);
    for (size_t a = 0; a < nm; a++) {
        for (size_t o = 0; o < no; o++)
            gsl_vector_set(&rhs.vector, o,
                           gsl_matrix_get(s, q->obs[o], q->mis[a]));
        const int rc =
            gsl_linalg_cholesky_solve(&f.matrix, &rhs.vector, &sol.vector);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t o = 0; o < no; o++)
            gsl_matrix_set(gm->b, a, o, gsl_vector_get(&sol.vector, o));
    }
    for (size_t a = 0; a < nm; a++)
        for (size_t c = 0; c <= a; c++) {
            double v = gsl_matrix_get(s, q->mis[a], q->mis[c]);
            for (size_t o = 0; o < no; o++)
                v -= gsl_matrix_get(gm->b, a, o) *
                     gsl_matrix_get(s, q->obs[o], q->mis[c]);
            gsl_matrix_set(gm->cmm, a, c, v);
            gsl_matrix_set(gm->cmm, c, a, v);
        }
    return LSE_OK;
}

size_t lse_gauss_missing_stats_size(const lse_gauss_missing *gm)
{
    if (gm == NULL)
        return 0;
    return gm->k + gm->k * gm->d + lse_gauss_s2_size(gm->cov, gm->k, gm->d);
}

/* Accumulate weight r times the centered expected row y (d) into s1 (d)
 * and the second moments s2 of the layout (full/tied: lower triangle of
 * (d, d); diag: (d); spherical: 1). */
static void add_row(lse_cov_type cov, size_t d, double r, const double *y,
                    double *s1, double *s2)
{
    for (size_t j = 0; j < d; j++)
        s1[j] += r * y[j];
    switch (cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED:
        for (size_t j = 0; j < d; j++)
            for (size_t l = 0; l <= j; l++)
                s2[j * d + l] += r * y[j] * y[l];
        break;
    case LSE_COV_DIAG:
        for (size_t j = 0; j < d; j++)
            s2[j] += r * y[j] * y[j];
        break;
    case LSE_COV_SPHERICAL: {
        double q = 0.0;
        for (size_t j = 0; j < d; j++)
            q += y[j] * y[j];
        s2[0] += r * q;
        break;
    }
    }
}

/* The conditional covariance of the missing coordinates, times the
 * pattern's responsibility sum_r, into s2. */
static void add_cond(const lse_gauss_missing *gm, const pattern *q, size_t k,
                     double sum_r, double *s2)
{
    const size_t d = gm->d;
    gsl_matrix_const_view sv = sig_of(gm, k);
    const gsl_matrix *sig = &sv.matrix;
    for (size_t m = 0; m < q->n_mis; m++) {
        const size_t jm = q->mis[m];
        switch (gm->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED:
            for (size_t l = 0; l <= m; l++) /* mis ascending: lower */
                s2[jm * d + q->mis[l]] += sum_r * gsl_matrix_get(gm->cmm, m, l);
            break;
        case LSE_COV_DIAG:
            s2[jm] += sum_r * gsl_matrix_get(sig, jm, jm);
            break;
        case LSE_COV_SPHERICAL:
            s2[0] += sum_r * gsl_matrix_get(sig, jm, jm);
            break;
        }
    }
}

/* Pattern q's expected statistics of component k (rows in order). */
static lse_status pattern_stats(lse_gauss_missing *gm, const pattern *q,
                                size_t k, const gsl_matrix *resp,
                                const gsl_matrix *soft, double *acc)
{
    const size_t K = gm->k, d = gm->d;
    const int full_like = gm->cov == LSE_COV_FULL || gm->cov == LSE_COV_TIED;
    if (full_like && q->n_mis > 0) {
        const lse_status st = conditional(gm, q, k);
        if (st != LSE_OK)
            return st;
    }
    const double *mu = gsl_matrix_const_ptr(gm->mu->value, k, 0);
    double *s1 = acc + K + k * d;
    double *s2 = acc + K + K * d;
    switch (gm->cov) {
    case LSE_COV_FULL:
        s2 += k * d * d;
        break;
    case LSE_COV_TIED:
        break;
    case LSE_COV_DIAG:
        s2 += k * d;
        break;
    case LSE_COV_SPHERICAL:
        s2 += k;
        break;
    }
    double *y = gm->y, sum_r = 0.0;
    for (size_t r = 0; r < q->n_rows; r++) {
        const size_t i = q->rows[r];
        double rik = resp != NULL ? gsl_matrix_get(resp, i, k)
                                  : gsl_matrix_get(soft, r, k);
        if (gm->w != NULL)
            rik *= gsl_vector_get(gm->w, i);
        if (!(rik > 0.0))
            continue;
        for (size_t o = 0; o < q->n_obs; o++)
            y[q->obs[o]] = gsl_matrix_get(gm->x, i, q->obs[o]) - mu[q->obs[o]];
        for (size_t m = 0; m < q->n_mis; m++) { /* y_M = B y_O */
            double v = 0.0;
            if (full_like)
                for (size_t o = 0; o < q->n_obs; o++)
                    v += gsl_matrix_get(gm->b, m, o) * y[q->obs[o]];
            y[q->mis[m]] = v;
        }
        sum_r += rik;
        add_row(gm->cov, d, rik, y, s1, s2);
    }
    acc[k] += sum_r;
    if (sum_r > 0.0)
        add_cond(gm, q, k, sum_r, s2);
    return LSE_OK;
}

lse_status lse_gauss_missing_stats(lse_gauss_missing *gm,
                                   const gsl_matrix *resp, double *acc,
                                   lse_error *err)
{
    static const char fn[] = "lse_gauss_missing_stats";
    if (gm == NULL || acc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t K = gm->k, d = gm->d;
    if (resp != NULL && (resp->size1 != gm->x->size1 || resp->size2 != K))
        return lse_error_set(err, LSE_EDIM, fn,
                             "responsibilities %zu x %zu, expected %zu x %zu",
                             resp->size1, resp->size2, gm->x->size1, K);
    memset(acc, 0, lse_gauss_missing_stats_size(gm) * sizeof *acc);
    for (size_t p = 0; p < gm->n_pat; p++) {
        const pattern *q = &gm->pat[p];
        const gsl_matrix *soft = resp != NULL ? NULL : lse_term_softmax(q->t);
        if (resp == NULL && soft == NULL)
            return lse_error_set(err, LSE_ENOTSUP, fn,
                                 "pattern %zu keeps no softmax: pass the "
                                 "responsibilities",
                                 p);
        for (size_t k = 0; k < K; k++) {
            const lse_status st = pattern_stats(gm, q, k, resp, soft, acc);
            if (st != LSE_OK)
                return lse_error_set(err, LSE_ENUMERIC, fn,
                                     "component %zu: covariance is not "
                                     "positive definite (N_k = %g)",
                                     k, acc[k]);
        }
    }
    if (gm->cov == LSE_COV_FULL || gm->cov == LSE_COV_TIED) {
        double *s2 = acc + K + K * d; /* mirror the lower triangles */
        const size_t nb = gm->cov == LSE_COV_TIED ? 1 : K;
        for (size_t b = 0; b < nb; b++)
            for (size_t j = 0; j < d; j++)
                for (size_t l = 0; l < j; l++)
                    s2[b * d * d + l * d + j] = s2[b * d * d + j * d + l];
    }
    return LSE_OK;
}

lse_status lse_gauss_missing_solve(lse_gauss_missing *gm, const double *acc,
                                   const lse_mstep_opts *opts,
                                   lse_mstep_report *report, lse_error *err)
{
    static const char fn[] = "lse_gauss_missing_solve";
    if (gm == NULL || acc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const gsl_matrix *param[2] = {gm->logw->value, gm->chol->value};
    gsl_matrix *outs[2] = {gm->logw->value, gm->chol->value}; /* may alias */
    const lse_sim_args a = {.parent = gm->mu->value,
                            .param = param,
                            .config = NULL,
                            .work = gm->work};
    const lse_mstep_opts mo = opts != NULL ? *opts : lse_mstep_opts_default();
    lse_mstep_report rep = {0};
    if (report == NULL)
        report = &rep;
    if (report->empty != NULL)
        memset(report->empty, 0, gm->k);
    char msg[400] = "";
    const lse_status st = lse_sim_gaussian->solve(
        &a, acc, gm->mu->value, outs, &mo, report, msg, sizeof msg);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "%s", msg[0] ? msg : lse_strerror(st));
    return lse_gauss_missing_sync(gm, err);
}

int lse_gauss_missing_row(const lse_gauss_missing *gm, size_t i,
                          double *loglik, double *resp)
{
    if (gm == NULL || i >= gm->x->size1 || gm->row_pat[i] == SIZE_MAX)
        return 0;
    const pattern *q = &gm->pat[gm->row_pat[i]];
    const gsl_vector *rl = lse_term_row_lse(q->t);
    const gsl_matrix *soft = lse_term_softmax(q->t);
    if (rl == NULL || soft == NULL)
        return 0;
    const size_t r = gm->row_pos[i];
    if (loglik != NULL)
        *loglik = gsl_vector_get(rl, r);
    for (size_t k = 0; resp != NULL && k < gm->k; k++)
        resp[k] = gsl_matrix_get(soft, r, k);
    return 1;
}

lse_node *const *lse_gauss_missing_nodes(const lse_gauss_missing *gm,
                                         size_t *n)
{
    if (n != NULL)
        *n = gm != NULL ? gm->n_nodes : 0;
    return gm != NULL ? gm->nodes : NULL;
}
