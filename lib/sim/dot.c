#include <math.h>
#include <stdio.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/core.h>
#include "sim-check-private.h"

/* Dot-product similarities (docs/similarities.md, "dot, scaled-dot").
 *
 *   dot:         S = C P^T              C (b, d), P (n_parent, d)
 *   scaled-dot:  S = C P^T / sqrt(d)
 *
 * With G = dE/dS (b, n_parent) and a = 1 or 1/sqrt(d):
 *   dE/dC = a G P        (b, d)
 *   dE/dP = a G^T C      (n_parent, d)
 * One dgemm each; no parameters, no config, no workspace. */

static double dot_scale(const gsl_matrix *child, int scaled)
{
    return scaled ? 1.0 / sqrt((double)child->size2) : 1.0;
}

static lse_status dot_check(const lse_sim_shape *shape, const void *config,
                            char *msg, size_t msg_len)
{
    (void)config;
    return lse_sim_check_vectors("dot", shape, msg, msg_len);
}

static lse_status scaled_dot_check(const lse_sim_shape *shape,
                                   const void *config, char *msg,
                                   size_t msg_len)
{
    (void)config;
    return lse_sim_check_vectors("scaled-dot", shape, msg, msg_len);
}

static lse_status args_ok(const lse_sim_args *a)
{
    if (a->child == NULL || a->parent == NULL)
        return LSE_EFAULT;
    if (a->child->size2 != a->parent->size2)
        return LSE_EDIM;
    return LSE_OK;
}

static lse_status eval_any(const lse_sim_args *a, gsl_matrix *s, int scaled)
{
    const lse_status st = args_ok(a);
    if (st != LSE_OK)
        return st;
    if (s == NULL)
        return LSE_EFAULT;
    if (s->size1 != a->child->size1 || s->size2 != a->parent->size1)
        return LSE_EDIM;
    const double alpha = dot_scale(a->child, scaled);
    const int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, alpha, a->child,
                                  a->parent, 0.0, s);
    return lse_status_from_gsl(rc);
}

static lse_status grad_any(const lse_sim_args *a, const gsl_matrix *g,
                           const lse_sim_grads *out, int scaled)
{
    const lse_status st = args_ok(a);
    if (st != LSE_OK)
        return st;
    if (g == NULL || out == NULL)
        return LSE_EFAULT;
    if (g->size1 != a->child->size1 || g->size2 != a->parent->size1)
        return LSE_EDIM;
    const double alpha = dot_scale(a->child, scaled);
    if (out->child != NULL) {
        /* child (b, d) += a G (b, n_parent) P (n_parent, d) */
        const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, alpha, g,
                                      a->parent, 1.0, out->child);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    if (out->parent != NULL) {
        /* parent (n_parent, d) += a G^T C (b, d) */
        const int rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, alpha, g,
                                      a->child, 1.0, out->parent);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    return LSE_OK;
}

static lse_status dot_eval(const lse_sim_args *a, gsl_matrix *s)
{
    return eval_any(a, s, 0);
}

static lse_status dot_grad(const lse_sim_args *a, const gsl_matrix *g,
                           const lse_sim_grads *out)
{
    return grad_any(a, g, out, 0);
}

static lse_status scaled_dot_eval(const lse_sim_args *a, gsl_matrix *s)
{
    return eval_any(a, s, 1);
}

static lse_status scaled_dot_grad(const lse_sim_args *a, const gsl_matrix *g,
                                  const lse_sim_grads *out)
{
    return grad_any(a, g, out, 1);
}

static const lse_sim_type dot_type = {
    .name = "dot",
    .n_param = 0,
    .param_names = NULL,
    .optional_params = 0,
    .config_size = 0,
    .config_default = NULL,
    .flags = 0,
    .check = dot_check,
    .work_new = NULL,
    .work_free = NULL,
    .prepare = NULL,
    .eval = dot_eval,
    .grad = dot_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = NULL,
};

static const lse_sim_type scaled_dot_type = {
    .name = "scaled-dot",
    .n_param = 0,
    .param_names = NULL,
    .optional_params = 0,
    .config_size = 0,
    .config_default = NULL,
    .flags = 0,
    .check = scaled_dot_check,
    .work_new = NULL,
    .work_free = NULL,
    .prepare = NULL,
    .eval = scaled_dot_eval,
    .grad = scaled_dot_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = NULL,
};

const lse_sim_type *const lse_sim_dot = &dot_type;
const lse_sim_type *const lse_sim_scaled_dot = &scaled_dot_type;
