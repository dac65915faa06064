#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

/* Cosine similarity (docs/similarities.md, "cosine").
 *
 *   S(i, j) = c_i . p_j / (n(c_i) n(p_j)),   n(x) = max(|x|, eps)
 *
 * For |c| >= eps:  dS/dc = p / (n(c) n(p)) - S c / n(c)^2
 *                        = (p_hat - cos c_hat) / |c|;
 * for |c| < eps the norm is the constant eps and the second term drops.
 * Batched with H(i, j) = G(i, j) / (n(c_i) n(p_j)) and
 * r_i = sum_j G(i, j) S(i, j), r'_j = sum_i G(i, j) S(i, j):
 *   dE/dC = H P   - diag(a_i r_i / n(c_i)^2) C
 *   dE/dP = H^T C - diag(a'_j r'_j / n(p_j)^2) P
 * where a_i = 1 if |c_i| >= eps, else 0. */

typedef struct cosine_work {
    size_t block, n_parent;
    gsl_vector *nc; /* (block) floored child norms */
    gsl_vector *np; /* (n_parent) floored parent norms */
    gsl_matrix *s;  /* (block, n_parent) scores */
    gsl_matrix *h;  /* (block, n_parent) scaled G */
} cosine_work;

static const lse_cosine_config cosine_default = {.eps = 1e-12};

static const lse_cosine_config *get_config(const void *config)
{
    return config != NULL ? config : &cosine_default;
}

static lse_status cosine_check(const lse_sim_shape *shape, const void *config,
                               char *msg, size_t msg_len)
{
    const lse_cosine_config *cfg = get_config(config);
    if (shape->d_child != shape->d_parent) {
        snprintf(msg, msg_len,
                 "cosine: d_child = %zu, d_parent = %zu: must be equal",
                 shape->d_child, shape->d_parent);
        return LSE_EDIM;
    }
    if (shape->d_child == 0) {
        snprintf(msg, msg_len, "cosine: vectors have dimension 0");
        return LSE_EDIM;
    }
    if (shape->d_context != 0) {
        snprintf(msg, msg_len, "cosine: takes no context (d_context = %zu)",
                 shape->d_context);
        return LSE_EDIM;
    }
    if (!(cfg->eps > 0.0) || !isfinite(cfg->eps)) {
        snprintf(msg, msg_len, "cosine: eps = %g, must be finite and > 0",
                 cfg->eps);
        return LSE_EDOM;
    }
    return LSE_OK;
}

static void cosine_work_free(void *work)
{
    cosine_work *w = work;
    if (w == NULL)
        return;
    gsl_vector_free(w->nc);
    gsl_vector_free(w->np);
    gsl_matrix_free(w->s);
    gsl_matrix_free(w->h);
    free(w);
}

static lse_status cosine_work_new(const lse_sim_shape *shape,
                                  const void *config, void **out)
{
    (void)config;
    *out = NULL;
    lse_gsl_quiet(); /* a constructor: GSL must not abort */
    if (shape->block == 0 || shape->n_parent == 0)
        return LSE_OK; /* nothing to compute */
    if (LSE_SIZE_PAIRS_OVERFLOW(shape->block, shape->n_parent))
        return LSE_ENOMEM;
    cosine_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->block = shape->block;
    w->n_parent = shape->n_parent;
    w->nc = gsl_vector_alloc(shape->block);
    w->np = gsl_vector_alloc(shape->n_parent);
    w->s = gsl_matrix_alloc(shape->block, shape->n_parent);
    w->h = gsl_matrix_alloc(shape->block, shape->n_parent);
    if (w->nc == NULL || w->np == NULL || w->s == NULL || w->h == NULL) {
        cosine_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

/* out(i) = max(|row i of x|, eps) */
static void row_norms(const gsl_matrix *x, double eps, gsl_vector *out)
{
    for (size_t i = 0; i < x->size1; i++) {
        gsl_vector_const_view r = gsl_matrix_const_row(x, i);
        const double n = gsl_blas_dnrm2(&r.vector);
        gsl_vector_set(out, i, n < eps ? eps : n);
    }
}

/* S = C P^T / (nc np^T) into s, with norms into nc, np. */
static lse_status scores(const lse_sim_args *a, double eps, gsl_vector *nc,
                         gsl_vector *np, gsl_matrix *s)
{
    row_norms(a->child, eps, nc);
    row_norms(a->parent, eps, np);
    const int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->child,
                                  a->parent, 0.0, s);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    for (size_t i = 0; i < s->size1; i++) {
        const double ci = gsl_vector_get(nc, i);
        double *row = gsl_matrix_ptr(s, i, 0);
        for (size_t j = 0; j < s->size2; j++)
            row[j] /= ci * gsl_vector_get(np, j);
    }
    return LSE_OK;
}

typedef struct views {
    gsl_vector_view nc, np;
    gsl_matrix_view s, h;
} views;

static lse_status get_views(const lse_sim_args *a, views *v)
{
    if (a->child == NULL || a->parent == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1, m = a->parent->size1;
    if (a->child->size2 != a->parent->size2)
        return LSE_EDIM;
    if (b == 0 || m == 0)
        return LSE_OK;
    cosine_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    if (b > w->block || m != w->n_parent)
        return LSE_EDIM;
    v->nc = gsl_vector_subvector(w->nc, 0, b);
    v->np = gsl_vector_subvector(w->np, 0, m);
    v->s = gsl_matrix_submatrix(w->s, 0, 0, b, m);
    v->h = gsl_matrix_submatrix(w->h, 0, 0, b, m);
    return LSE_OK;
}

static lse_status cosine_eval(const lse_sim_args *a, gsl_matrix *s)
{
    views v;
    const lse_status st = get_views(a, &v);
    if (st != LSE_OK)
        return st;
    if (s == NULL)
        return LSE_EFAULT;
    if (s->size1 != a->child->size1 || s->size2 != a->parent->size1)
        return LSE_EDIM;
    if (s->size1 == 0 || s->size2 == 0)
        return LSE_OK;
    return scores(a, get_config(a->config)->eps, &v.nc.vector, &v.np.vector, s);
}

static lse_status cosine_grad(const lse_sim_args *a, const gsl_matrix *g,
                              const lse_sim_grads *out)
{
    views v;
    lse_status st = get_views(a, &v);
    if (st != LSE_OK)
        return st;
    if (g == NULL || out == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1, m = a->parent->size1;
    if (g->size1 != b || g->size2 != m)
        return LSE_EDIM;
    if (b == 0 || m == 0 || (out->child == NULL && out->parent == NULL))
        return LSE_OK;
    const double eps = get_config(a->config)->eps;
    gsl_vector *nc = &v.nc.vector, *np = &v.np.vector;
    gsl_matrix *s = &v.s.matrix, *h = &v.h.matrix;
    st = scores(a, eps, nc, np, s);
    if (st != LSE_OK)
        return st;
    /* h = G / (nc np^T); s <- G .* S (only the sums are needed below) */
    for (size_t i = 0; i < b; i++) {
        const double ci = gsl_vector_get(nc, i);
        for (size_t j = 0; j < m; j++) {
            const double gij = gsl_matrix_get(g, i, j);
            gsl_matrix_set(h, i, j, gij / (ci * gsl_vector_get(np, j)));
            gsl_matrix_set(s, i, j, gij * gsl_matrix_get(s, i, j));
        }
    }
    if (out->child != NULL) {
        int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, h, a->parent,
                                1.0, out->child);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            gsl_vector_const_view ci = gsl_matrix_const_row(a->child, i);
            const double n = gsl_blas_dnrm2(&ci.vector);
            if (n < eps) /* floored norm: constant, no second term */
                continue;
            double r = 0.0;
            for (size_t j = 0; j < m; j++)
                r += gsl_matrix_get(s, i, j);
            gsl_vector_view oi = gsl_matrix_row(out->child, i);
            rc = gsl_blas_daxpy(-r / (n * n), &ci.vector, &oi.vector);
            if (rc != GSL_SUCCESS)
                return lse_status_from_gsl(rc);
        }
    }
    if (out->parent != NULL) {
        int rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, h, a->child, 1.0,
                                out->parent);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t j = 0; j < m; j++) {
            gsl_vector_const_view pj = gsl_matrix_const_row(a->parent, j);
            const double n = gsl_blas_dnrm2(&pj.vector);
            if (n < eps)
                continue;
            double r = 0.0;
            for (size_t i = 0; i < b; i++)
                r += gsl_matrix_get(s, i, j);
            gsl_vector_view oj = gsl_matrix_row(out->parent, j);
            rc = gsl_blas_daxpy(-r / (n * n), &pj.vector, &oj.vector);
            if (rc != GSL_SUCCESS)
                return lse_status_from_gsl(rc);
        }
    }
    return LSE_OK;
}

static int cosine_describe(const void *config, char *buf, size_t len)
{
    return snprintf(buf, len, "eps=%g", get_config(config)->eps);
}

static const lse_sim_type cosine_type = {
    .name = "cosine",
    .n_param = 0,
    .param_names = NULL,
    .optional_params = 0,
    .config_size = sizeof(lse_cosine_config),
    .config_default = &cosine_default,
    .flags = 0,
    .check = cosine_check,
    .work_new = cosine_work_new,
    .work_free = cosine_work_free,
    .prepare = NULL,
    .eval = cosine_eval,
    .grad = cosine_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = cosine_describe,
};

const lse_sim_type *const lse_sim_cosine = &cosine_type;
