#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

/* Weighted sum of similarities (docs/learning.md section 4):
 *
 *   S = sum_m alpha_m S_m,   G_m = alpha_m G given to component m's own
 *   gradient kernel,   dE/dalpha_m = sum_ij G_ij S_m(i, j).
 *
 * alpha is the optional parameter in slot 0 (1, n), else the config's fixed
 * weights; component m's parameters follow in its own slots. */

#define MAXT LSE_SUM_MAX_TERMS
#define N_PARAM (1 + LSE_SUM_MAX_PARAM)

static const lse_sum_config sum_default = {0, {NULL}, {NULL}, {0}};
static const char *const sum_names[N_PARAM] = {
    "alpha", "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"};

typedef struct sum_work {
    lse_sum_config cfg;
    size_t off[MAXT]; /* first slot of each component's parameters */
    void *work[MAXT];
    gsl_matrix *sm; /* (block, n_parent) a component's S */
    gsl_matrix *gm; /* (block, n_parent) alpha_m G */
} sum_work;

static const lse_sum_config *get_config(const void *config)
{
    return config != NULL ? config : &sum_default;
}

static const void *comp_config(const lse_sum_config *c, size_t m)
{
    return c->config[m] != NULL ? c->config[m] : c->type[m]->config_default;
}

static lse_sim_shape comp_shape(const lse_sim_shape *s, const lse_sim_type *t,
                                size_t off)
{
    lse_sim_shape cs = *s;
    cs.n_param = t->n_param;
    cs.param_rows = s->param_rows + off;
    cs.param_cols = s->param_cols + off;
    return cs;
}

static lse_status sum_check(const lse_sim_shape *shape, const void *config,
                            char *msg, size_t msg_len)
{
    const lse_sum_config *c = get_config(config);
    if (c->n == 0 || c->n > MAXT) {
        snprintf(msg, msg_len, "sum: config.n = %zu components, want 1..%d",
                 c->n, MAXT);
        return LSE_EDOM;
    }
    if (shape->n_param != N_PARAM || shape->param_rows == NULL ||
        shape->param_cols == NULL) {
        snprintf(msg, msg_len, "sum: expects %d parameter slots", N_PARAM);
        return LSE_EDIM;
    }
    const size_t *r = shape->param_rows, *cl = shape->param_cols;
    if (r[0] != 0 && (r[0] != 1 || cl[0] != c->n)) {
        snprintf(msg, msg_len, "sum: alpha is %zux%zu, expected 1x%zu", r[0],
                 cl[0], c->n);
        return LSE_EDIM;
    }
    size_t off = 1;
    for (size_t m = 0; m < c->n; m++) {
        const lse_sim_type *t = c->type[m];
        if (t == NULL) {
            snprintf(msg, msg_len, "sum: component %zu has no type", m);
            return LSE_EFAULT;
        }
        if (t == lse_sim_sum) {
            snprintf(msg, msg_len, "sum: component %zu is sum itself", m);
            return LSE_EINVAL;
        }
        if (r[0] == 0 && !isfinite(c->weight[m])) {
            snprintf(msg, msg_len, "sum: weight %zu is %g", m, c->weight[m]);
            return LSE_EDOM;
        }
        if (off + t->n_param > N_PARAM) {
            snprintf(msg, msg_len,
                     "sum: the components have more than %d parameters",
                     LSE_SUM_MAX_PARAM);
            return LSE_EINVAL;
        }
        for (size_t i = 0; i < t->n_param; i++)
            if (r[off + i] == 0 && !(t->optional_params & (1u << i))) {
                snprintf(msg, msg_len,
                         "sum: component %zu (%s) parameter %s (slot %zu) is "
                         "required",
                         m, t->name, t->param_names[i], off + i);
                return LSE_EFAULT;
            }
        if ((t->flags & LSE_SIM_NEEDS_CONTEXT) && shape->d_context == 0) {
            snprintf(msg, msg_len, "sum: component %zu (%s) needs a context",
                     m, t->name);
            return LSE_EFAULT;
        }
        if ((t->flags & LSE_SIM_WHOLE_CHILDREN) &&
            shape->block < shape->n_child) {
            snprintf(msg, msg_len,
                     "sum: component %zu (%s) needs every child row at once: "
                     "set the graph's block rows to at least %zu "
                     "(lse_graph_set_block_rows)",
                     m, t->name, shape->n_child);
            return LSE_EDIM;
        }
        const lse_sim_shape cs = comp_shape(shape, t, off);
        if (t->check != NULL) {
            char inner[256];
            inner[0] = '\0';
            const lse_status st =
                t->check(&cs, comp_config(c, m), inner, sizeof inner);
            if (st != LSE_OK) {
                snprintf(msg, msg_len, "sum component %zu: %s", m, inner);
                return st;
            }
        }
        off += t->n_param;
    }
    for (; off < N_PARAM; off++)
        if (r[off] != 0) {
            snprintf(msg, msg_len,
                     "sum: parameter slot %zu is given but no component uses it",
                     off);
            return LSE_EDIM;
        }
    return LSE_OK;
}

static void sum_work_free(void *work)
{
    sum_work *w = work;
    if (w == NULL)
        return;
    for (size_t m = 0; m < w->cfg.n; m++)
        if (w->work[m] != NULL && w->cfg.type[m]->work_free != NULL)
            w->cfg.type[m]->work_free(w->work[m]);
    gsl_matrix_free(w->sm);
    gsl_matrix_free(w->gm);
    free(w);
}

static lse_status sum_work_new(const lse_sim_shape *shape, const void *config,
                               void **out)
{
    *out = NULL;
    lse_gsl_quiet();
    const lse_sum_config *c = get_config(config);
    if (c->n == 0 || c->n > MAXT || shape->param_rows == NULL)
        return LSE_EDOM;
    if (LSE_SIZE_PAIRS_OVERFLOW(shape->block, shape->n_parent))
        return LSE_ENOMEM;
    sum_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->cfg = *c;
    const size_t b = shape->block > 0 ? shape->block : 1;
    const size_t np = shape->n_parent > 0 ? shape->n_parent : 1;
    w->sm = gsl_matrix_alloc(b, np);
    w->gm = gsl_matrix_alloc(b, np);
    if (w->sm == NULL || w->gm == NULL) {
        sum_work_free(w);
        return LSE_ENOMEM;
    }
    size_t off = 1;
    for (size_t m = 0; m < c->n; m++) {
        const lse_sim_type *t = c->type[m];
        w->off[m] = off;
        if (t->work_new != NULL) {
            const lse_sim_shape cs = comp_shape(shape, t, off);
            const lse_status st = t->work_new(&cs, comp_config(c, m), &w->work[m]);
            if (st != LSE_OK) {
                w->cfg.n = m; /* free only what exists */
                sum_work_free(w);
                return st;
            }
        }
        off += t->n_param;
    }
    *out = w;
    return LSE_OK;
}

static lse_sim_args comp_args(const lse_sim_args *a, const sum_work *w,
                              size_t m)
{
    lse_sim_args ca = *a;
    ca.param = a->param + w->off[m];
    ca.config = comp_config(&w->cfg, m);
    ca.work = w->work[m];
    return ca;
}

static double alpha(const lse_sim_args *a, const sum_work *w, size_t m)
{
    return a->param[0] != NULL ? gsl_matrix_get(a->param[0], 0, m)
                               : w->cfg.weight[m];
}

static lse_status sum_prepare(const lse_sim_args *a)
{
    const sum_work *w = a->work;
    if (w == NULL || a->param == NULL)
        return LSE_EFAULT;
    for (size_t m = 0; m < w->cfg.n; m++)
        if (w->cfg.type[m]->prepare != NULL) {
            const lse_sim_args ca = comp_args(a, w, m);
            const lse_status st = w->cfg.type[m]->prepare(&ca);
            if (st != LSE_OK)
                return st;
        }
    return LSE_OK;
}

static lse_status sum_eval(const lse_sim_args *a, gsl_matrix *s)
{
    const sum_work *w = a->work;
    if (w == NULL || a->param == NULL || a->child == NULL)
        return LSE_EFAULT;
    const size_t b = s->size1, np = s->size2;
    if (b > w->sm->size1 || np != w->sm->size2)
        return LSE_EDIM;
    gsl_matrix_view sm = gsl_matrix_submatrix(w->sm, 0, 0, b, np);
    gsl_matrix_set_zero(s);
    for (size_t m = 0; m < w->cfg.n; m++) {
        const lse_sim_args ca = comp_args(a, w, m);
        const lse_status st = w->cfg.type[m]->eval(&ca, &sm.matrix);
        if (st != LSE_OK)
            return st;
        gsl_matrix_scale(&sm.matrix, alpha(a, w, m));
        gsl_matrix_add(s, &sm.matrix);
    }
    return LSE_OK;
}

static lse_status sum_grad(const lse_sim_args *a, const gsl_matrix *g,
                           const lse_sim_grads *out)
{
    const sum_work *w = a->work;
    if (w == NULL || a->param == NULL || a->child == NULL)
        return LSE_EFAULT;
    const size_t b = g->size1, np = g->size2;
    if (b > w->gm->size1 || np != w->gm->size2)
        return LSE_EDIM;
    gsl_matrix_view gm = gsl_matrix_submatrix(w->gm, 0, 0, b, np);
    gsl_matrix_view sm = gsl_matrix_submatrix(w->sm, 0, 0, b, np);
    gsl_matrix *none[N_PARAM] = {NULL};
    gsl_matrix *const *op = out->param != NULL ? out->param : none;
    for (size_t m = 0; m < w->cfg.n; m++) {
        const lse_sim_args ca = comp_args(a, w, m);
        gsl_matrix_memcpy(&gm.matrix, g);
        gsl_matrix_scale(&gm.matrix, alpha(a, w, m));
        const lse_sim_grads co = {out->child, out->parent, out->context,
                                  op + w->off[m]};
        lse_status st = w->cfg.type[m]->grad(&ca, &gm.matrix, &co);
        if (st != LSE_OK)
            return st;
        if (a->param[0] != NULL && op[0] != NULL) { /* dE/dalpha_m */
            st = w->cfg.type[m]->eval(&ca, &sm.matrix);
            if (st != LSE_OK)
                return st;
            double acc = 0.0;
            for (size_t i = 0; i < b; i++) {
                const double *gr = gsl_matrix_const_ptr(g, i, 0);
                const double *sr = gsl_matrix_const_ptr(&sm.matrix, i, 0);
                for (size_t j = 0; j < np; j++)
                    if (gr[j] != 0.0) /* masked pairs: G = 0, S may be inf */
                        acc += gr[j] * sr[j];
            }
            *gsl_matrix_ptr(op[0], 0, m) += acc;
        }
    }
    return LSE_OK;
}

static int sum_describe(const void *config, char *buf, size_t len)
{
    const lse_sum_config *c = get_config(config);
    size_t used = 0;
    int w = 0;
    for (size_t m = 0; m < c->n && m < MAXT; m++) {
        char *dst = (buf != NULL && used < len) ? buf + used : NULL;
        w = snprintf(dst, dst != NULL ? len - used : 0, "%s%s",
                     m > 0 ? "+" : "", c->type[m] != NULL ? c->type[m]->name : "?");
        if (w < 0)
            return w;
        used += (size_t)w;
    }
    return (int)used;
}

static const lse_sim_type sum_type = {
    .name = "sum",
    .n_param = N_PARAM,
    .param_names = sum_names,
    .optional_params = (1u << N_PARAM) - 1u,
    .config_size = sizeof(lse_sum_config),
    .config_default = &sum_default,
    .flags = 0,
    .check = sum_check,
    .work_new = sum_work_new,
    .work_free = sum_work_free,
    .prepare = sum_prepare,
    .eval = sum_eval,
    .grad = sum_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = sum_describe,
    .stats_exact = NULL,
};

const lse_sim_type *const lse_sim_sum = &sum_type;
