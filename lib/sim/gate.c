#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

/* DAAM-gated similarity (docs/models/daam.md, "Trained on a task"):
 *
 *   S = base(Phi(C), P; x, theta),  Phi(c)_(h,j) = c_j g_hj(c_j)   (b, H d)
 *   g_hj(c_j) = (1/K) sum_k exp(-u_hkj^2 / 2),  u_hkj = (y_j - delta_hkj) / w_hkj,
 *   y_j = (c_j - center_j) / scale_j
 *
 * (the heads' outputs concatenated, as the DAAM paper's Algorithm 1). With
 * dPhi the base's gradient with respect to its child operand and
 * e_hkj = exp(-u_hkj^2 / 2) / K:
 *   dE/dc_j      = sum_h dPhi_(h,j) (g_hj - c_j sum_k e_hkj u_hkj / (w_hkj scale_j))
 *   dE/ddelta_hkj = sum_i dPhi_i,(h,j) c_ij e_hkij u_hkij / w_hkj
 *   dE/dw_hkj     = sum_i dPhi_i,(h,j) c_ij e_hkij u_hkij^2 / w_hkj
 * parent, context and base parameters: the base's own. */

#define MAXB LSE_GATE_MAX_BASE_PARAM
#define N_PARAM (2 + MAXB)

static const lse_gate_config gate_default = {NULL, NULL, 1, 1, NULL, NULL};
static const char *const gate_names[N_PARAM] = {"delta", "width", "base0",
                                                "base1", "base2", "base3"};

typedef struct gate_work {
    const lse_sim_type *base;
    const void *bcfg;
    void *bwork;
    size_t block, d, n_head, n_gauss;
    gsl_matrix *phi;  /* (block, H d) */
    gsl_matrix *dphi; /* (block, H d) */
} gate_work;

static const lse_gate_config *get_config(const void *config)
{
    return config != NULL ? config : &gate_default;
}

static const void *base_config(const lse_gate_config *c)
{
    return c->base_config != NULL ? c->base_config : c->base->config_default;
}

static lse_sim_shape base_shape(const lse_sim_shape *s, const lse_sim_type *b,
                                size_t n_head)
{
    lse_sim_shape bs = *s;
    bs.d_child = s->d_child * n_head;
    bs.n_param = b->n_param;
    bs.param_rows = s->param_rows + 2;
    bs.param_cols = s->param_cols + 2;
    return bs;
}

static lse_status gate_check(const lse_sim_shape *shape, const void *config,
                             char *msg, size_t msg_len)
{
    const lse_gate_config *cfg = get_config(config);
    const lse_sim_type *b = cfg->base;
    if (b == NULL) {
        snprintf(msg, msg_len, "gate: config.base (the base similarity) is "
                               "required");
        return LSE_EFAULT;
    }
    if (b == lse_sim_gate || b->prepare != NULL) {
        snprintf(msg, msg_len,
                 "gate: base '%s' is not supported (it needs a pass over "
                 "every child row first, or is gate itself)",
                 b->name);
        return LSE_EINVAL;
    }
    if (b->n_param > MAXB) {
        snprintf(msg, msg_len,
                 "gate: base '%s' has %zu parameters, at most %d supported",
                 b->name, b->n_param, MAXB);
        return LSE_EINVAL;
    }
    if (cfg->n_head == 0 || cfg->n_gauss == 0 ||
        cfg->n_head > SIZE_MAX / cfg->n_gauss ||
        shape->d_child > SIZE_MAX / cfg->n_head) {
        snprintf(msg, msg_len, "gate: n_head = %zu, n_gauss = %zu: both must "
                               "be >= 1 (and their products fit)",
                 cfg->n_head, cfg->n_gauss);
        return LSE_EINVAL;
    }
    for (size_t j = 0; cfg->scale != NULL && j < shape->d_child; j++)
        if (!(cfg->scale[j] > 0.0) || !isfinite(cfg->scale[j])) {
            snprintf(msg, msg_len, "gate: scale[%zu] = %g, must be > 0", j,
                     cfg->scale[j]);
            return LSE_EDOM;
        }
    for (size_t j = 0; cfg->center != NULL && j < shape->d_child; j++)
        if (!isfinite(cfg->center[j])) {
            snprintf(msg, msg_len, "gate: center[%zu] is not finite", j);
            return LSE_EDOM;
        }
    if (shape->n_param != N_PARAM || shape->param_rows == NULL ||
        shape->param_cols == NULL) {
        snprintf(msg, msg_len, "gate: expects %d parameter slots", N_PARAM);
        return LSE_EDIM;
    }
    const size_t *r = shape->param_rows, *c = shape->param_cols;
    const size_t hk = cfg->n_head * cfg->n_gauss;
    for (int k = 0; k < 2; k++)
        if (r[k] != hk || c[k] != shape->d_child) {
            snprintf(msg, msg_len,
                     "gate: %s is %zux%zu, expected (n_head n_gauss) x d_child "
                     "= %zux%zu",
                     gate_names[k], r[k], c[k], hk, shape->d_child);
            return LSE_EDIM;
        }
    for (size_t i = 0; i < MAXB; i++) {
        const int present = r[2 + i] != 0;
        if (i >= b->n_param && present) {
            snprintf(msg, msg_len,
                     "gate: parameter slot %zu is given but base '%s' has %zu "
                     "parameters",
                     2 + i, b->name, b->n_param);
            return LSE_EDIM;
        }
        if (i < b->n_param && !present && !(b->optional_params & (1u << i))) {
            snprintf(msg, msg_len,
                     "gate: base '%s' parameter %s (slot %zu) is required",
                     b->name, b->param_names[i], 2 + i);
            return LSE_EFAULT;
        }
    }
    if ((b->flags & LSE_SIM_NEEDS_CONTEXT) && shape->d_context == 0) {
        snprintf(msg, msg_len, "gate: base '%s' needs a context view", b->name);
        return LSE_EFAULT;
    }
    if ((b->flags & LSE_SIM_WHOLE_CHILDREN) && shape->block < shape->n_child) {
        snprintf(msg, msg_len,
                 "gate: base '%s' needs every child row at once: set the "
                 "graph's block rows to at least %zu (lse_graph_set_block_rows)",
                 b->name, shape->n_child);
        return LSE_EDIM;
    }
    const lse_sim_shape bs = base_shape(shape, b, cfg->n_head);
    if (b->check != NULL) {
        char inner[256];
        inner[0] = '\0';
        const lse_status st = b->check(&bs, base_config(cfg), inner, sizeof inner);
        if (st != LSE_OK) {
            snprintf(msg, msg_len, "gate over %s", inner);
            return st;
        }
    }
    return LSE_OK;
}

static void gate_work_free(void *work)
{
    gate_work *w = work;
    if (w == NULL)
        return;
    if (w->bwork != NULL && w->base->work_free != NULL)
        w->base->work_free(w->bwork);
    gsl_matrix_free(w->phi);
    gsl_matrix_free(w->dphi);
    free(w);
}

static lse_status gate_work_new(const lse_sim_shape *shape, const void *config,
                                void **out)
{
    *out = NULL;
    lse_gsl_quiet();
    const lse_gate_config *cfg = get_config(config);
    if (cfg->base == NULL || shape->n_param != N_PARAM ||
        shape->param_rows == NULL || cfg->n_head == 0 ||
        shape->d_child > SIZE_MAX / cfg->n_head)
        return LSE_EFAULT;
    const size_t block = shape->block > 0 ? shape->block : 1;
    if (LSE_SIZE_PAIRS_OVERFLOW(block, shape->d_child * cfg->n_head, block,
                                shape->d_child * cfg->n_head))
        return LSE_ENOMEM;
    gate_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->base = cfg->base;
    w->bcfg = base_config(cfg);
    w->block = block;
    w->d = shape->d_child;
    w->n_head = cfg->n_head;
    w->n_gauss = cfg->n_gauss;
    w->phi = gsl_matrix_alloc(block, w->d * w->n_head);
    w->dphi = gsl_matrix_alloc(block, w->d * w->n_head);
    if (w->phi == NULL || w->dphi == NULL) {
        gate_work_free(w);
        return LSE_ENOMEM;
    }
    if (w->base->work_new != NULL) {
        const lse_sim_shape bs = base_shape(shape, w->base, w->n_head);
        const lse_status st = w->base->work_new(&bs, w->bcfg, &w->bwork);
        if (st != LSE_OK) {
            gate_work_free(w);
            return st;
        }
    }
    *out = w;
    return LSE_OK;
}

lse_status lse_gate_features(const lse_gate_config *cfg,
                             const gsl_matrix *delta, const gsl_matrix *width,
                             const gsl_matrix *x, gsl_matrix *gates,
                             gsl_matrix *phi)
{
    if (cfg == NULL || delta == NULL || width == NULL || x == NULL)
        return LSE_EFAULT;
    const size_t d = x->size2, H = cfg->n_head, K = cfg->n_gauss;
    if (H == 0 || K == 0 || H > SIZE_MAX / K || d > SIZE_MAX / H)
        return LSE_EINVAL;
    if (delta->size1 != H * K || delta->size2 != d || width->size1 != H * K ||
        width->size2 != d ||
        (gates != NULL && (gates->size1 != x->size1 || gates->size2 != H * d)) ||
        (phi != NULL && (phi->size1 != x->size1 || phi->size2 != H * d)))
        return LSE_EDIM;
    for (size_t r = 0; r < H * K; r++)
        for (size_t j = 0; j < d; j++)
            if (gsl_matrix_get(width, r, j) == 0.0 ||
                !isfinite(gsl_matrix_get(width, r, j)))
                return LSE_EDOM;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < d; j++) {
            const double c = gsl_matrix_get(x, i, j);
            const double y =
                (c - (cfg->center != NULL ? cfg->center[j] : 0.0)) /
                (cfg->scale != NULL ? cfg->scale[j] : 1.0);
            for (size_t h = 0; h < H; h++) {
                double g = 0.0;
                for (size_t k = 0; k < K; k++) {
                    const double u = (y - gsl_matrix_get(delta, h * K + k, j)) /
                                     gsl_matrix_get(width, h * K + k, j);
                    g += exp(-0.5 * u * u);
                }
                g /= (double)K;
                if (gates != NULL)
                    gsl_matrix_set(gates, i, h * d + j, g);
                if (phi != NULL)
                    gsl_matrix_set(phi, i, h * d + j, c * g);
            }
        }
    return LSE_OK;
}

/* Gate the child block; fill the base's arguments. */
static lse_status gate_args(const lse_sim_args *a, lse_sim_args *ba,
                            gsl_matrix_view *phv, gate_work **wout)
{
    if (a->child == NULL || a->parent == NULL || a->param == NULL ||
        a->param[0] == NULL || a->param[1] == NULL || a->work == NULL)
        return LSE_EFAULT;
    gate_work *w = a->work;
    const size_t b = a->child->size1;
    if (b > w->block || a->child->size2 != w->d)
        return LSE_EDIM;
    *phv = gsl_matrix_submatrix(w->phi, 0, 0, b, w->d * w->n_head);
    const lse_status st = lse_gate_features(get_config(a->config), a->param[0],
                                            a->param[1], a->child, NULL,
                                            &phv->matrix);
    if (st != LSE_OK)
        return st;
    *ba = *a;
    ba->child = &phv->matrix;
    ba->param = a->param + 2;
    ba->config = w->bcfg;
    ba->work = w->bwork;
    *wout = w;
    return LSE_OK;
}

static lse_status gate_eval(const lse_sim_args *a, gsl_matrix *s)
{
    lse_sim_args ba;
    gsl_matrix_view phv;
    gate_work *w;
    lse_status st = gate_args(a, &ba, &phv, &w);
    return st == LSE_OK ? w->base->eval(&ba, s) : st;
}

static lse_status gate_grad(const lse_sim_args *a, const gsl_matrix *g,
                            const lse_sim_grads *out)
{
    lse_sim_args ba;
    gsl_matrix_view phv;
    gate_work *w;
    lse_status st = gate_args(a, &ba, &phv, &w);
    if (st != LSE_OK)
        return st;
    const lse_gate_config *cfg = get_config(a->config);
    const size_t b = a->child->size1, d = w->d, H = w->n_head, K = w->n_gauss;
    gsl_matrix_view dph = gsl_matrix_submatrix(w->dphi, 0, 0, b, d * H);
    gsl_matrix_set_zero(&dph.matrix);
    gsl_matrix *none[MAXB] = {NULL, NULL, NULL, NULL};
    gsl_matrix *const *bparam = out->param != NULL ? out->param + 2 : none;
    const lse_sim_grads bout = {&dph.matrix, out->parent, out->context, bparam};
    st = w->base->grad(&ba, g, &bout);
    if (st != LSE_OK)
        return st;
    gsl_matrix *gd = out->param != NULL ? out->param[0] : NULL;
    gsl_matrix *gw = out->param != NULL ? out->param[1] : NULL;
    if (out->child == NULL && gd == NULL && gw == NULL)
        return LSE_OK;
    const gsl_matrix *delta = a->param[0], *width = a->param[1];
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < d; j++) {
            const double c = gsl_matrix_get(a->child, i, j);
            const double sc = cfg->scale != NULL ? cfg->scale[j] : 1.0;
            const double y = (c - (cfg->center != NULL ? cfg->center[j] : 0.0)) / sc;
            double dc = 0.0;
            for (size_t h = 0; h < H; h++) {
                const double dp = gsl_matrix_get(&dph.matrix, i, h * d + j);
                if (dp == 0.0)
                    continue;
                double gsum = 0.0, dgdy = 0.0;
                for (size_t k = 0; k < K; k++) {
                    const size_t r = h * K + k;
                    const double wd = gsl_matrix_get(width, r, j);
                    const double u = (y - gsl_matrix_get(delta, r, j)) / wd;
                    const double e = exp(-0.5 * u * u) / (double)K;
                    gsum += e;
                    dgdy -= e * u / wd;
                    if (gd != NULL) /* dg/ddelta = e u / w */
                        *gsl_matrix_ptr(gd, r, j) += dp * c * e * u / wd;
                    if (gw != NULL) /* dg/dw = e u^2 / w */
                        *gsl_matrix_ptr(gw, r, j) += dp * c * e * u * u / wd;
                }
                dc += dp * (gsum + c * dgdy / sc);
            }
            if (out->child != NULL)
                *gsl_matrix_ptr(out->child, i, j) += dc;
        }
    return LSE_OK;
}

static int gate_describe(const void *config, char *buf, size_t len)
{
    const lse_gate_config *cfg = get_config(config);
    if (cfg->base == NULL)
        return snprintf(buf, len, "base=?");
    char inner[200] = "";
    if (cfg->base->describe != NULL)
        cfg->base->describe(base_config(cfg), inner, sizeof inner);
    return inner[0] != '\0'
               ? snprintf(buf, len, "base=%s(%s), H=%zu, K=%zu",
                          cfg->base->name, inner, cfg->n_head, cfg->n_gauss)
               : snprintf(buf, len, "base=%s, H=%zu, K=%zu", cfg->base->name,
                          cfg->n_head, cfg->n_gauss);
}

static const lse_sim_type gate_type = {
    .name = "gate",
    .n_param = N_PARAM,
    .param_names = gate_names,
    .optional_params = ((1u << MAXB) - 1u) << 2,
    .config_size = sizeof(lse_gate_config),
    .config_default = &gate_default,
    .flags = 0,
    .check = gate_check,
    .work_new = gate_work_new,
    .work_free = gate_work_free,
    .prepare = NULL,
    .eval = gate_eval,
    .grad = gate_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = gate_describe,
    .stats_exact = NULL,
};

const lse_sim_type *const lse_sim_gate = &gate_type;
