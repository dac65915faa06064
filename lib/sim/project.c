#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

/* Projected similarity (docs/learning.md section 4):
 *
 *   S = base(K_c, K_p; x, theta),  K_c = C W_c^T (b, k_c),  K_p = P W_p^T
 *   (n_parent, k_p).
 *
 * With dK_c, dK_p the base's gradients with respect to its child and
 * parent operands (G = dE/dS given):
 *   dE/dC = dK_c W_c,  dE/dP = dK_p W_p,  dE/dW_c = dK_c^T C,
 *   dE/dW_p = dK_p^T P,  context and base parameters: the base's own. */

#define MAXB LSE_PROJECT_MAX_BASE_PARAM
#define N_PARAM (2 + MAXB)

static const lse_project_config project_default = {NULL, NULL};
static const char *const project_names[N_PARAM] = {
    "W_c", "W_p", "base0", "base1", "base2", "base3"};

typedef struct project_work {
    const lse_sim_type *base;
    const void *bcfg;
    void *bwork;
    size_t block, n_child, n_parent, d_c, d_p, k_c, k_p;
    gsl_matrix *kc;  /* (rows, k_c): rows = n_child with a prepare, else block */
    gsl_matrix *kp;  /* (n_parent, k_p) */
    gsl_matrix *dkc; /* (block, k_c) */
    gsl_matrix *dkp; /* (n_parent, k_p) */
} project_work;

static const lse_project_config *get_config(const void *config)
{
    return config != NULL ? config : &project_default;
}

static const void *base_config(const lse_project_config *c)
{
    return c->base_config != NULL ? c->base_config : c->base->config_default;
}

/* The base's shape: projected dimensions, its own parameter slots. */
static lse_sim_shape base_shape(const lse_sim_shape *s, const lse_sim_type *b)
{
    lse_sim_shape bs = *s;
    bs.d_child = s->param_rows[0];
    bs.d_parent = s->param_rows[1];
    bs.n_param = b->n_param;
    bs.param_rows = s->param_rows + 2;
    bs.param_cols = s->param_cols + 2;
    return bs;
}

static lse_status project_check(const lse_sim_shape *shape, const void *config,
                                char *msg, size_t msg_len)
{
    const lse_project_config *cfg = get_config(config);
    const lse_sim_type *b = cfg->base;
    if (b == NULL) {
        snprintf(msg, msg_len, "project: config.base (the base similarity) "
                               "is required");
        return LSE_EFAULT;
    }
    if (b == lse_sim_project) {
        snprintf(msg, msg_len, "project: the base cannot be project itself");
        return LSE_EINVAL;
    }
    if (b->n_param > MAXB) {
        snprintf(msg, msg_len, "project: base '%s' has %zu parameters, at most "
                               "%d supported",
                 b->name, b->n_param, MAXB);
        return LSE_EINVAL;
    }
    if (shape->n_param != N_PARAM || shape->param_rows == NULL ||
        shape->param_cols == NULL) {
        snprintf(msg, msg_len, "project: expects %d parameter slots", N_PARAM);
        return LSE_EDIM;
    }
    const size_t *r = shape->param_rows, *c = shape->param_cols;
    if (r[0] == 0 || c[0] != shape->d_child) {
        snprintf(msg, msg_len,
                 "project: W_c is %zux%zu, expected k_c x d_child (d_child = "
                 "%zu, k_c >= 1)",
                 r[0], c[0], shape->d_child);
        return LSE_EDIM;
    }
    if (r[1] == 0 || c[1] != shape->d_parent) {
        snprintf(msg, msg_len,
                 "project: W_p is %zux%zu, expected k_p x d_parent (d_parent "
                 "= %zu, k_p >= 1)",
                 r[1], c[1], shape->d_parent);
        return LSE_EDIM;
    }
    for (size_t i = 0; i < MAXB; i++) {
        const int present = r[2 + i] != 0;
        if (i >= b->n_param && present) {
            snprintf(msg, msg_len,
                     "project: parameter slot %zu is given but base '%s' has "
                     "%zu parameters",
                     2 + i, b->name, b->n_param);
            return LSE_EDIM;
        }
        if (i < b->n_param && !present && !(b->optional_params & (1u << i))) {
            snprintf(msg, msg_len,
                     "project: base '%s' parameter %s (slot %zu) is required",
                     b->name, b->param_names[i], 2 + i);
            return LSE_EFAULT;
        }
    }
    if ((b->flags & LSE_SIM_NEEDS_CONTEXT) && shape->d_context == 0) {
        snprintf(msg, msg_len, "project: base '%s' needs a context view",
                 b->name);
        return LSE_EFAULT;
    }
    if ((b->flags & LSE_SIM_WHOLE_CHILDREN) && shape->block < shape->n_child) {
        snprintf(msg, msg_len,
                 "project: base '%s' needs every child row at once: set the "
                 "graph's block rows to at least %zu (lse_graph_set_block_rows)",
                 b->name, shape->n_child);
        return LSE_EDIM;
    }
    const lse_sim_shape bs = base_shape(shape, b);
    if (b->check != NULL) {
        char inner[256];
        inner[0] = '\0';
        const lse_status st = b->check(&bs, base_config(cfg), inner, sizeof inner);
        if (st != LSE_OK) {
            snprintf(msg, msg_len, "project over %s", inner);
            return st;
        }
    }
    return LSE_OK;
}

static void project_work_free(void *work)
{
    project_work *w = work;
    if (w == NULL)
        return;
    if (w->bwork != NULL && w->base->work_free != NULL)
        w->base->work_free(w->bwork);
    gsl_matrix_free(w->kc);
    gsl_matrix_free(w->kp);
    gsl_matrix_free(w->dkc);
    gsl_matrix_free(w->dkp);
    free(w);
}

static lse_status project_work_new(const lse_sim_shape *shape,
                                   const void *config, void **out)
{
    *out = NULL;
    lse_gsl_quiet();
    const lse_project_config *cfg = get_config(config);
    if (cfg->base == NULL || shape->n_param != N_PARAM ||
        shape->param_rows == NULL)
        return LSE_EFAULT;
    {
        const size_t nc = shape->n_child > shape->block ? shape->n_child
                                                        : shape->block;
        if (LSE_SIZE_PAIRS_OVERFLOW(nc, shape->param_rows[0],
                                    shape->n_parent, shape->param_rows[1]))
            return LSE_ENOMEM;
    }
    project_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->base = cfg->base;
    w->bcfg = base_config(cfg);
    w->block = shape->block > 0 ? shape->block : 1;
    w->n_child = shape->n_child > 0 ? shape->n_child : 1;
    w->n_parent = shape->n_parent > 0 ? shape->n_parent : 1;
    w->d_c = shape->d_child;
    w->d_p = shape->d_parent;
    w->k_c = shape->param_rows[0];
    w->k_p = shape->param_rows[1];
    const size_t rows = w->base->prepare != NULL
                            ? (w->n_child > w->block ? w->n_child : w->block)
                            : w->block;
    w->kc = gsl_matrix_alloc(rows, w->k_c);
    w->kp = gsl_matrix_alloc(w->n_parent, w->k_p);
    w->dkc = gsl_matrix_alloc(w->block, w->k_c);
    w->dkp = gsl_matrix_alloc(w->n_parent, w->k_p);
    if (w->kc == NULL || w->kp == NULL || w->dkc == NULL || w->dkp == NULL) {
        project_work_free(w);
        return LSE_ENOMEM;
    }
    if (w->base->work_new != NULL) {
        const lse_sim_shape bs = base_shape(shape, w->base);
        const lse_status st = w->base->work_new(&bs, w->bcfg, &w->bwork);
        if (st != LSE_OK) {
            project_work_free(w);
            return st;
        }
    }
    *out = w;
    return LSE_OK;
}

/* Project the child block and the parents; fill the base's arguments. */
static lse_status project_args(const lse_sim_args *a, lse_sim_args *ba,
                               gsl_matrix_view *kcv, project_work **wout)
{
    if (a->child == NULL || a->parent == NULL || a->param == NULL ||
        a->param[0] == NULL || a->param[1] == NULL || a->work == NULL)
        return LSE_EFAULT;
    project_work *w = a->work;
    const size_t b = a->child->size1;
    if (b > w->kc->size1 || a->child->size2 != w->d_c ||
        a->parent->size1 != w->kp->size1 || a->parent->size2 != w->d_p ||
        a->param[0]->size1 != w->k_c || a->param[0]->size2 != w->d_c ||
        a->param[1]->size1 != w->k_p || a->param[1]->size2 != w->d_p)
        return LSE_EDIM;
    *kcv = gsl_matrix_submatrix(w->kc, 0, 0, b, w->k_c);
    int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->child,
                            a->param[0], 0.0, &kcv->matrix);
    if (rc == GSL_SUCCESS)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, a->parent,
                            a->param[1], 0.0, w->kp);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    *ba = *a;
    ba->child = &kcv->matrix;
    ba->parent = w->kp;
    ba->param = a->param + 2;
    ba->config = w->bcfg;
    ba->work = w->bwork;
    *wout = w;
    return LSE_OK;
}

static lse_status project_prepare(const lse_sim_args *a)
{
    project_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    if (w->base->prepare == NULL)
        return LSE_OK;
    lse_sim_args ba;
    gsl_matrix_view kcv;
    lse_status st = project_args(a, &ba, &kcv, &w);
    return st == LSE_OK ? w->base->prepare(&ba) : st;
}

static lse_status project_eval(const lse_sim_args *a, gsl_matrix *s)
{
    lse_sim_args ba;
    gsl_matrix_view kcv;
    project_work *w = NULL;
    lse_status st = project_args(a, &ba, &kcv, &w);
    return st == LSE_OK ? w->base->eval(&ba, s) : st;
}

static lse_status project_grad(const lse_sim_args *a, const gsl_matrix *g,
                               const lse_sim_grads *out)
{
    lse_sim_args ba;
    gsl_matrix_view kcv;
    project_work *w = NULL;
    lse_status st = project_args(a, &ba, &kcv, &w);
    if (st != LSE_OK)
        return st;
    const size_t b = a->child->size1;
    gsl_matrix_view dkc = gsl_matrix_submatrix(w->dkc, 0, 0, b, w->k_c);
    gsl_matrix_set_zero(&dkc.matrix);
    gsl_matrix_set_zero(w->dkp);
    gsl_matrix *none[MAXB] = {NULL, NULL, NULL, NULL};
    gsl_matrix *const *bparam = out->param != NULL ? out->param + 2 : none;
    const lse_sim_grads bout = {&dkc.matrix, w->dkp, out->context, bparam};
    st = w->base->grad(&ba, g, &bout);
    if (st != LSE_OK)
        return st;
    int rc = GSL_SUCCESS;
    if (out->child != NULL)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &dkc.matrix,
                            a->param[0], 1.0, out->child);
    if (rc == GSL_SUCCESS && out->parent != NULL)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, w->dkp,
                            a->param[1], 1.0, out->parent);
    if (rc == GSL_SUCCESS && out->param != NULL && out->param[0] != NULL)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &dkc.matrix,
                            a->child, 1.0, out->param[0]);
    if (rc == GSL_SUCCESS && out->param != NULL && out->param[1] != NULL)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, w->dkp, a->parent,
                            1.0, out->param[1]);
    return lse_status_from_gsl(rc);
}

static int project_describe(const void *config, char *buf, size_t len)
{
    const lse_project_config *cfg = get_config(config);
    if (cfg->base == NULL)
        return snprintf(buf, len, "base=?");
    char inner[200] = "";
    if (cfg->base->describe != NULL)
        cfg->base->describe(base_config(cfg), inner, sizeof inner);
    return inner[0] != '\0' ? snprintf(buf, len, "base=%s(%s)", cfg->base->name, inner)
                            : snprintf(buf, len, "base=%s", cfg->base->name);
}

static const lse_sim_type project_type = {
    .name = "project",
    .n_param = N_PARAM,
    .param_names = project_names,
    .optional_params = ((1u << MAXB) - 1u) << 2,
    .config_size = sizeof(lse_project_config),
    .config_default = &project_default,
    .flags = 0,
    .check = project_check,
    .work_new = project_work_new,
    .work_free = project_work_free,
    .prepare = project_prepare,
    .eval = project_eval,
    .grad = project_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = project_describe,
    .stats_exact = NULL,
};

const lse_sim_type *const lse_sim_project = &project_type;
