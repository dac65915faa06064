/* The per-pair fallback: a user writes sim(c, p; x) and its gradient for
 * one pair (lse_sim_pair_fns); this type loops them over a block. The
 * config holds borrowed pointers: the fns table and the params must
 * outlive every term that uses them. See docs/sim-dar-daam.md. */
#include <stdio.h>

#include <lsegraph/core.h>

static lse_status pair_config(const void *config, char *msg, size_t msg_len)
{
    const lse_sim_pair_config *cfg = config;
    if (cfg == NULL) {
        if (msg != NULL)
            snprintf(msg, msg_len,
                     "pairwise: config with pair functions required");
        return LSE_EFAULT;
    }
    if (cfg->fns == NULL) {
        if (msg != NULL)
            snprintf(msg, msg_len, "pairwise: config.fns is NULL");
        return LSE_EFAULT;
    }
    if (cfg->fns->eval == NULL || cfg->fns->grad == NULL) {
        if (msg != NULL)
            snprintf(msg, msg_len, "pairwise: pair functions '%s' lack %s",
                     cfg->fns->name != NULL ? cfg->fns->name : "?",
                     cfg->fns->eval == NULL ? "eval" : "grad");
        return LSE_EINVAL;
    }
    return LSE_OK;
}

static lse_status pair_check(const lse_sim_shape *shape, const void *config,
                             char *msg, size_t msg_len)
{
    if (shape == NULL) {
        snprintf(msg, msg_len, "pairwise: NULL shape");
        return LSE_EFAULT;
    }
    if (shape->n_param != 0) {
        snprintf(msg, msg_len,
                 "pairwise: takes no parameter nodes (got %zu); pass "
                 "parameters through config.params",
                 shape->n_param);
        return LSE_EINVAL;
    }
    return pair_config(config, msg, msg_len);
}

/* The operands agree with each other. */
static lse_status pair_operands(const lse_sim_args *a)
{
    if (a == NULL || a->child == NULL || a->parent == NULL)
        return LSE_EFAULT;
    const lse_status st = pair_config(a->config, NULL, 0);
    if (st != LSE_OK)
        return st;
    if (a->context != NULL && a->context->size1 != a->child->size1)
        return LSE_EDIM;
    return LSE_OK;
}

static lse_status pair_eval(const lse_sim_args *a, gsl_matrix *s)
{
    const lse_status st = pair_operands(a);
    if (st != LSE_OK)
        return st;
    if (s == NULL)
        return LSE_EFAULT;
    const lse_sim_pair_config *cfg = a->config;
    const size_t b = a->child->size1, n = a->parent->size1;
    if (s->size1 != b || s->size2 != n)
        return LSE_EDIM;
    for (size_t i = 0; i < b; i++) {
        gsl_vector_const_view ci = gsl_matrix_const_row(a->child, i);
        /* (the child row stands in when there is no context) */
        gsl_vector_const_view xi =
            gsl_matrix_const_row(a->context != NULL ? a->context : a->child, i);
        const gsl_vector *x = a->context != NULL ? &xi.vector : NULL;
        for (size_t j = 0; j < n; j++) {
            gsl_vector_const_view pj = gsl_matrix_const_row(a->parent, j);
            gsl_matrix_set(
                s, i, j,
                cfg->fns->eval(&ci.vector, &pj.vector, x, cfg->params));
        }
    }
    return LSE_OK;
}

static lse_status pair_grad(const lse_sim_args *a, const gsl_matrix *g,
                            const lse_sim_grads *out)
{
    const lse_status st = pair_operands(a);
    if (st != LSE_OK)
        return st;
    if (g == NULL || out == NULL)
        return LSE_EFAULT;
    const lse_sim_pair_config *cfg = a->config;
    const size_t b = a->child->size1, n = a->parent->size1;
    if (g->size1 != b || g->size2 != n)
        return LSE_EDIM;
    if (out->child != NULL &&
        (out->child->size1 != b || out->child->size2 != a->child->size2))
        return LSE_EDIM;
    if (out->parent != NULL &&
        (out->parent->size1 != n || out->parent->size2 != a->parent->size2))
        return LSE_EDIM;
    gsl_matrix *gx_out = a->context != NULL ? out->context : NULL;
    if (gx_out != NULL &&
        (gx_out->size1 != b || gx_out->size2 != a->context->size2))
        return LSE_EDIM;
    if (out->child == NULL && out->parent == NULL && gx_out == NULL)
        return LSE_OK;
    for (size_t i = 0; i < b; i++) {
        gsl_vector_const_view ci = gsl_matrix_const_row(a->child, i);
        /* (the child row stands in when there is no context) */
        gsl_vector_const_view xi =
            gsl_matrix_const_row(a->context != NULL ? a->context : a->child, i);
        const gsl_vector *x = a->context != NULL ? &xi.vector : NULL;
        gsl_vector_view gci, gxi;
        gsl_vector *gc = NULL, *gx = NULL;
        if (out->child != NULL) {
            gci = gsl_matrix_row(out->child, i);
            gc = &gci.vector;
        }
        if (gx_out != NULL) {
            gxi = gsl_matrix_row(gx_out, i);
            gx = &gxi.vector;
        }
        for (size_t j = 0; j < n; j++) {
            gsl_vector_const_view pj = gsl_matrix_const_row(a->parent, j);
            gsl_vector_view gpj;
            gsl_vector *gp = NULL;
            if (out->parent != NULL) {
                gpj = gsl_matrix_row(out->parent, j);
                gp = &gpj.vector;
            }
            cfg->fns->grad(&ci.vector, &pj.vector, x, gsl_matrix_get(g, i, j),
                           gc, gp, gx, cfg->params);
        }
    }
    return LSE_OK;
}

static int pair_describe(const void *config, char *buf, size_t len)
{
    const lse_sim_pair_config *cfg = config;
    const char *name = cfg != NULL && cfg->fns != NULL && cfg->fns->name != NULL
                           ? cfg->fns->name
                           : "?";
    return snprintf(buf, len, "fns=%s", name);
}

static const lse_sim_type pairwise_type = {
    .name = "pairwise",
    .n_param = 0,
    .param_names = NULL,
    .optional_params = 0,
    .config_size = sizeof(lse_sim_pair_config),
    .config_default = NULL, /* a term must pass one */
    .flags = 0,
    .check = pair_check,
    .work_new = NULL,
    .work_free = NULL,
    .prepare = NULL,
    .eval = pair_eval,
    .grad = pair_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = pair_describe,
};

const lse_sim_type *const lse_sim_pairwise = &pairwise_type;
