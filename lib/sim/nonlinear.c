#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

/* Nonlinear prediction similarity (docs/similarities.md, "nonlinear"), the
 * predictive-coding score of Tschantz section 7:
 *
 *   S(i, j) = -1/2 ||c_i - f(W p_j + b)||^2
 *   C (b, d_c), P (n_parent, d_p), W (d_c, d_p), b (1, d_c) optional.
 *
 * Per call: Z = P W^T + 1 b, F = f(Z) (n_parent, d_c), and
 *   S = C F^T - 1/2 |c_i|^2 - 1/2 |f_j|^2.
 * Gradients with r_i = sum_j G(i,j), q_j = sum_i G(i,j):
 *   dE/dC = G F - diag(r) C
 *   dE/dF = G^T C - diag(q) F,   dE/dZ = dE/dF .* f'(Z)
 *   dE/dP = dE/dZ W,  dE/dW = dE/dZ^T P,  dE/db = 1^T dE/dZ.
 * f'(Z) is read off F: 1 (identity), 1 - F^2 (tanh), F (1 - F) (sigmoid),
 * [F > 0] (relu; so relu'(0) = 0 by definition). */

#define N_PARAM 2

typedef struct nonlinear_work {
    size_t block, n_parent, d_c, d_p;
    gsl_matrix *f;  /* (n_parent, d_c) F = f(P W^T + b) */
    gsl_matrix *h;  /* (n_parent, d_c) dE/dF, then dE/dZ */
    gsl_vector *nf; /* (n_parent) |f_j|^2 */
    gsl_vector *cs; /* (n_parent) column sums of G */
} nonlinear_work;

static const lse_nonlinear_config nonlinear_default = {.f = LSE_ACT_IDENTITY};
static const char *const nonlinear_names[N_PARAM] = {"W", "b"};

static const lse_nonlinear_config *get_config(const void *config)
{
    return config != NULL ? config : &nonlinear_default;
}

static const char *act_name(lse_activation f)
{
    switch (f) {
    case LSE_ACT_IDENTITY:
        return "identity";
    case LSE_ACT_TANH:
        return "tanh";
    case LSE_ACT_SIGMOID:
        return "sigmoid";
    case LSE_ACT_RELU:
        return "relu";
    }
    return NULL;
}

static lse_status nonlinear_check(const lse_sim_shape *shape,
                                  const void *config, char *msg, size_t msg_len)
{
    const lse_nonlinear_config *cfg = get_config(config);
    if (act_name(cfg->f) == NULL) {
        snprintf(msg, msg_len,
                 "nonlinear: activation %d is not identity (0), tanh (1), "
                 "sigmoid (2) or relu (3)",
                 (int)cfg->f);
        return LSE_EDOM;
    }
    if (shape->n_param != N_PARAM || shape->param_rows == NULL ||
        shape->param_cols == NULL) {
        snprintf(msg, msg_len, "nonlinear: expects %d parameters (W, b)",
                 N_PARAM);
        return LSE_EDIM;
    }
    if (shape->d_context != 0) {
        snprintf(msg, msg_len, "nonlinear: takes no context (d_context = %zu)",
                 shape->d_context);
        return LSE_EDIM;
    }
    if (shape->d_child == 0 || shape->d_parent == 0) {
        snprintf(msg, msg_len,
                 "nonlinear: d_child = %zu, d_parent = %zu: both must be > 0",
                 shape->d_child, shape->d_parent);
        return LSE_EDIM;
    }
    if (shape->param_rows[0] != shape->d_child ||
        shape->param_cols[0] != shape->d_parent) {
        snprintf(msg, msg_len,
                 "nonlinear: W is %zux%zu, expected d_child x d_parent = "
                 "%zux%zu",
                 shape->param_rows[0], shape->param_cols[0], shape->d_child,
                 shape->d_parent);
        return LSE_EDIM;
    }
    const int has_b = shape->param_rows[1] != 0;
    if (has_b &&
        (shape->param_rows[1] != 1 || shape->param_cols[1] != shape->d_child)) {
        snprintf(msg, msg_len,
                 "nonlinear: b is %zux%zu, expected 1 x d_child = 1x%zu",
                 shape->param_rows[1], shape->param_cols[1], shape->d_child);
        return LSE_EDIM;
    }
    return LSE_OK;
}

static void nonlinear_work_free(void *work)
{
    nonlinear_work *w = work;
    if (w == NULL)
        return;
    gsl_matrix_free(w->f);
    gsl_matrix_free(w->h);
    gsl_vector_free(w->nf);
    gsl_vector_free(w->cs);
    free(w);
}

static lse_status nonlinear_work_new(const lse_sim_shape *shape,
                                     const void *config, void **out)
{
    (void)config;
    *out = NULL;
    lse_gsl_quiet(); /* a constructor: GSL must not abort */
    if (shape->n_parent == 0 || shape->d_child == 0)
        return LSE_OK; /* nothing to compute */
    if (LSE_SIZE_PAIRS_OVERFLOW(shape->n_parent, shape->d_child))
        return LSE_ENOMEM;
    nonlinear_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->block = shape->block;
    w->n_parent = shape->n_parent;
    w->d_c = shape->d_child;
    w->d_p = shape->d_parent;
    w->f = gsl_matrix_alloc(shape->n_parent, shape->d_child);
    w->h = gsl_matrix_alloc(shape->n_parent, shape->d_child);
    w->nf = gsl_vector_alloc(shape->n_parent);
    w->cs = gsl_vector_alloc(shape->n_parent);
    if (w->f == NULL || w->h == NULL || w->nf == NULL || w->cs == NULL) {
        nonlinear_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

static double sigmoid(double z)
{
    if (z >= 0.0)
        return 1.0 / (1.0 + exp(-z));
    const double e = exp(z);
    return e / (1.0 + e);
}

static double act(lse_activation f, double z)
{
    switch (f) {
    case LSE_ACT_IDENTITY:
        return z;
    case LSE_ACT_TANH:
        return tanh(z);
    case LSE_ACT_SIGMOID:
        return sigmoid(z);
    case LSE_ACT_RELU:
        return z > 0.0 ? z : 0.0;
    }
    return NAN;
}

/* f'(z) written through y = f(z) */
static double act_deriv(lse_activation f, double y)
{
    switch (f) {
    case LSE_ACT_IDENTITY:
        return 1.0;
    case LSE_ACT_TANH:
        return 1.0 - y * y;
    case LSE_ACT_SIGMOID:
        return y * (1.0 - y);
    case LSE_ACT_RELU:
        return y > 0.0 ? 1.0 : 0.0;
    }
    return NAN;
}

static lse_status args_ok(const lse_sim_args *a, nonlinear_work **wout)
{
    if (a->child == NULL || a->parent == NULL || a->param == NULL ||
        a->param[0] == NULL)
        return LSE_EFAULT;
    const gsl_matrix *wm = a->param[0], *bm = a->param[1];
    if (a->child->size2 != wm->size1 || a->parent->size2 != wm->size2 ||
        (bm != NULL && (bm->size1 != 1 || bm->size2 != wm->size1)))
        return LSE_EDIM;
    if (a->child->size1 == 0 || a->parent->size1 == 0) {
        *wout = NULL;
        return LSE_OK;
    }
    nonlinear_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    if (a->child->size1 > w->block || a->parent->size1 != w->n_parent ||
        a->child->size2 != w->d_c || a->parent->size2 != w->d_p)
        return LSE_EDIM;
    *wout = w;
    return LSE_OK;
}

/* F = f(P W^T + 1 b) into w->f and |f_j|^2 into w->nf */
static lse_status predict(const lse_sim_args *a, nonlinear_work *w)
{
    const lse_activation f = get_config(a->config)->f;
    const gsl_matrix *bm = a->param[1];
    const int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->parent,
                                  a->param[0], 0.0, w->f);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    for (size_t j = 0; j < w->f->size1; j++) {
        double *row = gsl_matrix_ptr(w->f, j, 0);
        double n2 = 0.0;
        for (size_t k = 0; k < w->f->size2; k++) {
            const double z =
                row[k] + (bm != NULL ? gsl_matrix_get(bm, 0, k) : 0.0);
            row[k] = act(f, z);
            n2 += row[k] * row[k];
        }
        gsl_vector_set(w->nf, j, n2);
    }
    return LSE_OK;
}

static double row_norm2(const gsl_matrix *x, size_t i)
{
    gsl_vector_const_view r = gsl_matrix_const_row(x, i);
    double n2 = 0.0;
    gsl_blas_ddot(&r.vector, &r.vector, &n2);
    return n2;
}

static lse_status nonlinear_eval(const lse_sim_args *a, gsl_matrix *s)
{
    nonlinear_work *w = NULL;
    lse_status st = args_ok(a, &w);
    if (st != LSE_OK)
        return st;
    if (s == NULL)
        return LSE_EFAULT;
    if (s->size1 != a->child->size1 || s->size2 != a->parent->size1)
        return LSE_EDIM;
    if (w == NULL)
        return LSE_OK; /* empty block */
    st = predict(a, w);
    if (st != LSE_OK)
        return st;
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->child, w->f, 0.0, s);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    for (size_t i = 0; i < s->size1; i++) {
        const double hc = 0.5 * row_norm2(a->child, i);
        double *row = gsl_matrix_ptr(s, i, 0);
        for (size_t j = 0; j < s->size2; j++)
            row[j] -= hc + 0.5 * gsl_vector_get(w->nf, j);
    }
    return LSE_OK;
}

static lse_status nonlinear_grad(const lse_sim_args *a, const gsl_matrix *g,
                                 const lse_sim_grads *out)
{
    nonlinear_work *w = NULL;
    lse_status st = args_ok(a, &w);
    if (st != LSE_OK)
        return st;
    if (g == NULL || out == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1, m = a->parent->size1;
    if (g->size1 != b || g->size2 != m)
        return LSE_EDIM;
    if (w == NULL)
        return LSE_OK;
    gsl_matrix *gw = out->param != NULL ? out->param[0] : NULL;
    gsl_matrix *gb =
        out->param != NULL && a->param[1] != NULL ? out->param[1] : NULL;
    st = predict(a, w);
    if (st != LSE_OK)
        return st;
    int rc = GSL_SUCCESS;
    if (out->child != NULL) {
        /* child += G F - diag(rowsum G) C */
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, g, w->f, 1.0,
                            out->child);
        for (size_t i = 0; rc == GSL_SUCCESS && i < b; i++) {
            double r = 0.0;
            for (size_t j = 0; j < m; j++)
                r += gsl_matrix_get(g, i, j);
            gsl_vector_const_view ci = gsl_matrix_const_row(a->child, i);
            gsl_vector_view oi = gsl_matrix_row(out->child, i);
            rc = gsl_blas_daxpy(-r, &ci.vector, &oi.vector);
        }
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    if (out->parent == NULL && gw == NULL && gb == NULL)
        return LSE_OK;
    /* H = G^T C - diag(colsum G) F, then H .*= f'(Z) */
    rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, g, a->child, 0.0, w->h);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    gsl_vector_set_zero(w->cs);
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < m; j++)
            *gsl_vector_ptr(w->cs, j) += gsl_matrix_get(g, i, j);
    const lse_activation f = get_config(a->config)->f;
    for (size_t j = 0; j < m; j++) {
        const double q = gsl_vector_get(w->cs, j);
        double *hr = gsl_matrix_ptr(w->h, j, 0);
        const double *fr = gsl_matrix_const_ptr(w->f, j, 0);
        for (size_t k = 0; k < w->d_c; k++)
            hr[k] = (hr[k] - q * fr[k]) * act_deriv(f, fr[k]);
    }
    if (out->parent != NULL)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, w->h, a->param[0],
                            1.0, out->parent);
    if (rc == GSL_SUCCESS && gw != NULL)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, w->h, a->parent, 1.0,
                            gw);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    if (gb != NULL) {
        if (gb->size1 != 1 || gb->size2 != w->d_c)
            return LSE_EDIM;
        for (size_t j = 0; j < m; j++)
            for (size_t k = 0; k < w->d_c; k++)
                *gsl_matrix_ptr(gb, 0, k) += gsl_matrix_get(w->h, j, k);
    }
    return LSE_OK;
}

static int nonlinear_describe(const void *config, char *buf, size_t len)
{
    const char *name = act_name(get_config(config)->f);
    return snprintf(buf, len, "f=%s", name != NULL ? name : "?");
}

static const lse_sim_type nonlinear_type = {
    .name = "nonlinear",
    .n_param = N_PARAM,
    .param_names = nonlinear_names,
    .optional_params = 1u << 1, /* b */
    .config_size = sizeof(lse_nonlinear_config),
    .config_default = &nonlinear_default,
    .flags = 0,
    .check = nonlinear_check,
    .work_new = nonlinear_work_new,
    .work_free = nonlinear_work_free,
    .prepare = NULL,
    .eval = nonlinear_eval,
    .grad = nonlinear_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = nonlinear_describe,
};

const lse_sim_type *const lse_sim_nonlinear = &nonlinear_type;
