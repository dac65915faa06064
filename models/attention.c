#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Cross-, self- and slot attention, built only through the public graph
 * API (docs/models/attention.md):
 *
 *   cross  queries Q (n, d) state -> keys K (m, d) clamped, any sim
 *          E = -sum_i (1/beta) lse_j(beta S_ij) + lambda/2 ||Q||^2
 *   self   x X (N, d) state, child and parent; sim bilinear,
 *          W_c = W_Q, W_p = W_K (k, d); optional causal mask
 *   slot   tokens X (N, d) clamped -> slots mu (S, d_s) state; bilinear,
 *          W_c = W_K (k, d), W_p = W_Q (k, d_s); EM with the closed-form
 *          M-step of the bilinear similarity and a collapse detector.
 *
 * The quadratic "bound" term keeps the dot-product energies bounded below
 * in the state (hence the quadratic term). */

struct lse_attention {
    lse_attention_kind kind;
    lse_graph *g;
    lse_node *state; /* queries / x / slots */
    lse_term *term;  /* attend / self / assign */
    lse_term *bound; /* or NULL */
    double lambda;   /* 0 without a bound term */
    lse_error last;
    int stream; /* the LSE term is the streaming custom term below */
    /* slot attention */
    lse_slot_fit_opts fit;
    lse_slot_report rep;
};

lse_attention_opts lse_attention_opts_default(void)
{
    const lse_attention_opts o = {.sim = NULL,
                                  .config = NULL,
                                  .param = NULL,
                                  .beta = 1.0,
                                  .mask = 0,
                                  .bound = -1.0,
                                  .stream = 0};
    return o;
}

lse_slot_fit_opts lse_slot_fit_opts_default(void)
{
    const lse_slot_fit_opts o = {.max_iter = 50,
                                 .estep_steps = 5,
                                 .tol = 1e-8,
                                 .shrink_ratio = 0.5,
                                 .patience = 3,
                                 .total_ratio = 0.5,
                                 .norm_floor = 1e-8,
                                 .cb = NULL,
                                 .user = NULL};
    return o;
}

static int all_finite(const gsl_matrix *m)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            if (!isfinite(gsl_matrix_get(m, i, j)))
                return 0;
    return 1;
}

/* NULL and finiteness checks of the input matrices, and of the options. */
static lse_status check_inputs(const char *fn, const gsl_matrix *const *m,
                               const char *const *names, size_t n,
                               const lse_attention_opts *o, lse_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (m[i] == NULL)
            return lse_error_set(err, LSE_EFAULT, fn, "NULL %s", names[i]);
        if (!all_finite(m[i]))
            return lse_error_set(err, LSE_ENONFINITE, fn,
                                 "%s holds NaN or infinity", names[i]);
    }
    if (!isfinite(o->beta) || !(o->beta > 0.0))
        return lse_error_set(err, LSE_EDOM, fn,
                             "beta = %g, must be finite and > 0", o->beta);
    if (!isfinite(o->bound))
        return lse_error_set(err, LSE_EDOM, fn, "bound = %g, must be finite",
                             o->bound);
    return LSE_OK;
}

/* A new model with an empty graph. */
static lse_status model_new(lse_attention_kind kind, const char *fn,
                            lse_attention **out, lse_error *err)
{
    lse_attention *a = calloc(1, sizeof *a);
    if (a == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    a->kind = kind;
    a->g = lse_graph_new();
    if (a->g == NULL) {
        free(a);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    a->fit = lse_slot_fit_opts_default();
    *out = a;
    return LSE_OK;
}

/* Add a node holding a copy of @p value. */
static lse_status add_node(lse_graph *g, const char *name,
                           const gsl_matrix *value, unsigned flags,
                           lse_node **out)
{
    lse_status st =
        lse_graph_add_node(g, name, value->size1, value->size2, flags, out);
    if (st == LSE_OK)
        st = lse_node_set_value(*out, value);
    return st;
}

/* The quadratic term lambda/2 ||state||^2 ("bound"), lambda resolved from
 * opts->bound (< 0: 1/sqrt(d_state)). */
static lse_status add_bound(lse_attention *a, double bound)
{
    const double lambda =
        bound < 0.0 ? 1.0 / sqrt((double)lse_node_dim(a->state)) : bound;
    a->lambda = 0.0;
    if (lambda == 0.0)
        return LSE_OK;
    const lse_quadratic_config q = {.scale = lambda};
    const lse_view v = lse_view_all(a->state);
    const lse_status st = lse_graph_add_custom(
        a->g, "bound", lse_custom_quadratic, &q, &v, 1, &a->bound);
    if (st == LSE_OK)
        a->lambda = lambda;
    return st;
}

/* Unwind a half-built model: copy the graph's message to err. */
static lse_status build_failed(lse_attention *a, lse_status st, const char *fn,
                               lse_error *err)
{
    lse_error_set(err, st, fn, "%s", lse_graph_errmsg(a->g));
    lse_attention_free(a);
    return st;
}

/* ------------------------------------------------------------------ */
/* Streaming LSE term (opts.stream): a custom term evaluated by
 * lse_attn_stream, never holding the (n, m) scores.
 *   cross: views queries (n, d), keys (m, d); S = a q.k
 *   self:  views x (N, d), W_Q (k, d), W_K (k, d); S = a (W_Q x).(W_K x),
 *          Q = X W_Q', K = X W_K' (N, k) formed per evaluation, then
 *          dE/dX = dQ W_Q + dK W_K, dE/dW_Q = dQ' X, dE/dW_K = dK' X. */

typedef struct stream_cfg {
    double beta, scale;
    unsigned mask;
    int self;
} stream_cfg;

static lse_status stream_check(const gsl_matrix *const *value, size_t n_view,
                               const void *config, char *msg, size_t msg_len)
{
    const stream_cfg *c = config;
    if (c == NULL)
        return LSE_EFAULT;
    if (n_view != (c->self ? 3u : 2u)) {
        snprintf(msg, msg_len, "streaming attention takes %d views, got %zu",
                 c->self ? 3 : 2, n_view);
        return LSE_EINVAL;
    }
    const size_t d = value[0]->size2;
    if (!c->self && value[1]->size2 != d) {
        snprintf(msg, msg_len, "queries have %zu columns and keys %zu", d,
                 value[1]->size2);
        return LSE_EDIM;
    }
    if (c->self && (value[1]->size2 != d || value[2]->size2 != d ||
                    value[1]->size1 != value[2]->size1)) {
        snprintf(msg, msg_len,
                 "x is N x %zu, W_Q %zux%zu and W_K %zux%zu: expected both "
                 "k x %zu",
                 d, value[1]->size1, value[1]->size2, value[2]->size1,
                 value[2]->size2, d);
        return LSE_EDIM;
    }
    return LSE_OK;
}

/* Q = X W_Q', K = X W_K' of the self term (caller frees). */
static lse_status stream_project(const gsl_matrix *const *value,
                                 gsl_matrix **q, gsl_matrix **k)
{
    const size_t n = value[0]->size1, kd = value[1]->size1;
    *q = gsl_matrix_alloc(n, kd);
    *k = gsl_matrix_alloc(n, kd);
    if (*q == NULL || *k == NULL)
        return LSE_ENOMEM;
    int rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, value[0], value[1],
                            0.0, *q);
    if (rc == 0)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, value[0], value[2],
                            0.0, *k);
    return lse_status_from_gsl(rc);
}

static lse_status stream_grad(const gsl_matrix *const *value, size_t n_view,
                              const void *config, gsl_matrix *const *grad,
                              double *energy)
{
    (void)n_view;
    const stream_cfg *c = config;
    if (!c->self)
        return lse_attn_stream(value[0], value[1], c->beta, c->scale, c->mask,
                               energy, grad != NULL ? grad[0] : NULL,
                               grad != NULL ? grad[1] : NULL, NULL);
    gsl_matrix *q = NULL, *k = NULL, *dq = NULL, *dk = NULL;
    lse_status st = stream_project(value, &q, &k);
    const int want = grad != NULL &&
                     (grad[0] != NULL || grad[1] != NULL || grad[2] != NULL);
    if (st == LSE_OK && want) {
        dq = gsl_matrix_calloc(q->size1, q->size2);
        dk = gsl_matrix_calloc(k->size1, k->size2);
        if (dq == NULL || dk == NULL)
            st = LSE_ENOMEM;
    }
    if (st == LSE_OK)
        st = lse_attn_stream(q, k, c->beta, c->scale, c->mask, energy, dq, dk,
                             NULL);
    int rc = 0;
    if (st == LSE_OK && want && grad[0] != NULL) {
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, dq, value[1],
                            1.0, grad[0]);
        if (rc == 0)
            rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, dk, value[2],
                                1.0, grad[0]);
    }
    if (st == LSE_OK && want && rc == 0 && grad[1] != NULL)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, dq, value[0], 1.0,
                            grad[1]);
    if (st == LSE_OK && want && rc == 0 && grad[2] != NULL)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, dk, value[0], 1.0,
                            grad[2]);
    if (st == LSE_OK && rc != 0)
        st = lse_status_from_gsl(rc);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(dq);
    gsl_matrix_free(dk);
    return st;
}

static lse_status stream_energy(const gsl_matrix *const *value, size_t n_view,
                                const void *config, double *energy)
{
    return stream_grad(value, n_view, config, NULL, energy);
}

static int stream_describe(const void *config, char *buf, size_t len)
{
    const stream_cfg *c = config;
    return snprintf(buf, len, "streaming %s, beta=%g, scale=%g",
                    c->self ? "bilinear" : "dot", c->beta, c->scale);
}

static const lse_custom_type stream_type = {
    .name = "attention-stream",
    .config_size = sizeof(stream_cfg),
    .check = stream_check,
    .energy = stream_energy,
    .grad = stream_grad,
    .describe = stream_describe,
};

/* The streaming term over views v[0..n_view). */
static lse_status add_stream_term(lse_attention *a, const char *name,
                                  const lse_view *v, size_t n_view,
                                  const stream_cfg *cfg)
{
    a->stream = 1;
    return lse_graph_add_custom(a->g, name, &stream_type, cfg, v, n_view,
                                &a->term);
}

lse_status lse_attention_cross_new(const gsl_matrix *queries,
                                   const gsl_matrix *keys,
                                   const lse_attention_opts *opts,
                                   lse_attention **out, lse_error *err)
{
    static const char fn[] = "lse_attention_cross_new";
    lse_gsl_quiet();
    const lse_attention_opts o =
        opts != NULL ? *opts : lse_attention_opts_default();
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL out");
    *out = NULL;
    const gsl_matrix *const m[] = {queries, keys};
    const char *const names[] = {"queries", "keys"};
    lse_status st = check_inputs(fn, m, names, 2, &o, err);
    if (st != LSE_OK)
        return st;
    const lse_sim_type *sim = o.sim != NULL ? o.sim : lse_sim_scaled_dot;
    if (o.stream && sim != lse_sim_dot && sim != lse_sim_scaled_dot)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "streaming (stream = %d) takes the dot or "
                             "scaled-dot similarity, not '%s'",
                             o.stream, sim->name);
    for (size_t k = 0; o.param != NULL && k < sim->n_param; k++)
        if (o.param[k] != NULL && !all_finite(o.param[k]))
            return lse_error_set(err, LSE_ENONFINITE, fn,
                                 "parameter %zu holds NaN or infinity", k);
    lse_attention *a = NULL;
    st = model_new(LSE_ATTENTION_CROSS, fn, &a, err);
    if (st != LSE_OK)
        return st;
    lse_node **pn = calloc(sim->n_param + 1, sizeof *pn);
    if (pn == NULL) {
        lse_attention_free(a);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    lse_node *kn = NULL;
    st = add_node(a->g, "queries", queries, 0, &a->state);
    if (st == LSE_OK)
        st = add_node(a->g, "keys", keys, LSE_NODE_CLAMPED, &kn);
    for (size_t k = 0; st == LSE_OK && o.param != NULL && k < sim->n_param;
         k++) {
        if (o.param[k] == NULL)
            continue;
        char name[64];
        if (sim->param_names != NULL && sim->param_names[k] != NULL)
            snprintf(name, sizeof name, "%s", sim->param_names[k]);
        else
            snprintf(name, sizeof name, "param%zu", k);
        st = add_node(a->g, name, o.param[k], LSE_NODE_PARAM, &pn[k]);
    }
    if (st == LSE_OK && o.stream) {
        const stream_cfg cfg = {
            .beta = o.beta,
            .scale = sim == lse_sim_scaled_dot
                         ? 1.0 / sqrt((double)queries->size2)
                         : 1.0,
            .mask = o.mask,
            .self = 0};
        const lse_view v[] = {lse_view_all(a->state), lse_view_all(kn)};
        st = add_stream_term(a, "attend", v, 2, &cfg);
    } else if (st == LSE_OK) {
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(a->state);
        spec.parent = lse_view_all(kn);
        spec.sim = sim;
        spec.config = o.config;
        spec.param = pn;
        spec.beta = o.beta;
        spec.mask = o.mask;
        st = lse_graph_add_lse(a->g, "attend", &spec, &a->term);
    }
    free(pn);
    if (st == LSE_OK)
        st = add_bound(a, o.bound);
    if (st != LSE_OK)
        return build_failed(a, st, fn, err);
    *out = a;
    return LSE_OK;
}

lse_status lse_attention_self_new(const gsl_matrix *x, const gsl_matrix *w_q,
                                  const gsl_matrix *w_k,
                                  const lse_attention_opts *opts,
                                  lse_attention **out, lse_error *err)
{
    static const char fn[] = "lse_attention_self_new";
    lse_gsl_quiet();
    const lse_attention_opts o =
        opts != NULL ? *opts : lse_attention_opts_default();
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL out");
    *out = NULL;
    const gsl_matrix *const m[] = {x, w_q, w_k};
    const char *const names[] = {"x", "W_Q", "W_K"};
    lse_status st = check_inputs(fn, m, names, 3, &o, err);
    if (st != LSE_OK)
        return st;
    lse_attention *a = NULL;
    st = model_new(LSE_ATTENTION_SELF, fn, &a, err);
    if (st != LSE_OK)
        return st;
    lse_node *wq = NULL, *wk = NULL;
    st = add_node(a->g, "x", x, 0, &a->state);
    if (st == LSE_OK)
        st = add_node(a->g, "W_Q", w_q, LSE_NODE_PARAM, &wq);
    if (st == LSE_OK)
        st = add_node(a->g, "W_K", w_k, LSE_NODE_PARAM, &wk);
    if (st == LSE_OK && o.stream) {
        const lse_bilinear_config *bc = o.config;
        const stream_cfg cfg = {.beta = o.beta,
                                .scale = bc != NULL ? bc->scale : 1.0,
                                .mask = o.mask,
                                .self = 1};
        const lse_view v[] = {lse_view_all(a->state), lse_view_all(wq),
                              lse_view_all(wk)};
        st = add_stream_term(a, "self", v, 3, &cfg);
    } else if (st == LSE_OK) {
        lse_node *const pn[] = {wq, wk}; /* W_c = W_Q, W_p = W_K */
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(a->state);
        spec.parent = lse_view_all(a->state);
        spec.sim = lse_sim_bilinear;
        spec.config = o.config;
        spec.param = pn;
        spec.beta = o.beta;
        spec.mask = o.mask;
        st = lse_graph_add_lse(a->g, "self", &spec, &a->term);
    }
    if (st == LSE_OK)
        st = add_bound(a, o.bound);
    if (st != LSE_OK)
        return build_failed(a, st, fn, err);
    *out = a;
    return LSE_OK;
}

lse_status lse_attention_slot_new(const gsl_matrix *tokens,
                                  const gsl_matrix *slots,
                                  const gsl_matrix *w_k, const gsl_matrix *w_q,
                                  const lse_attention_opts *opts,
                                  lse_attention **out, lse_error *err)
{
    static const char fn[] = "lse_attention_slot_new";
    lse_gsl_quiet();
    const lse_attention_opts o =
        opts != NULL ? *opts : lse_attention_opts_default();
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL out");
    *out = NULL;
    const gsl_matrix *const m[] = {tokens, slots, w_k, w_q};
    const char *const names[] = {"tokens", "slots", "W_K", "W_Q"};
    lse_status st = check_inputs(fn, m, names, 4, &o, err);
    if (st != LSE_OK)
        return st;
    if (o.mask != 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "slot attention takes no mask (mask = 0x%x)",
                             o.mask);
    if (o.stream)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "slot attention does not stream (stream = %d): "
                             "its M-step needs the softmax",
                             o.stream);
    lse_attention *a = NULL;
    st = model_new(LSE_ATTENTION_SLOT, fn, &a, err);
    if (st != LSE_OK)
        return st;
    lse_node *tn = NULL, *wk = NULL, *wq = NULL;
    st = add_node(a->g, "tokens", tokens, LSE_NODE_CLAMPED, &tn);
    if (st == LSE_OK)
        st = add_node(a->g, "slots", slots, 0, &a->state);
    if (st == LSE_OK)
        st = add_node(a->g, "W_K", w_k, LSE_NODE_PARAM, &wk);
    if (st == LSE_OK)
        st = add_node(a->g, "W_Q", w_q, LSE_NODE_PARAM, &wq);
    if (st == LSE_OK) {
        lse_node *const pn[] = {wk, wq}; /* W_c = W_K, W_p = W_Q */
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(tn);
        spec.parent = lse_view_all(a->state);
        spec.sim = lse_sim_bilinear;
        spec.config = o.config;
        spec.param = pn;
        spec.beta = o.beta;
        st = lse_graph_add_lse(a->g, "assign", &spec, &a->term);
    }
    if (st == LSE_OK)
        st = add_bound(a, o.bound);
    if (st != LSE_OK)
        return build_failed(a, st, fn, err);
    a->rep.norm_initial = NAN;
    a->rep.norm = NAN;
    a->rep.last_ratio = NAN;
    a->rep.max_ratio = NAN;
    *out = a;
    return LSE_OK;
}

void lse_attention_free(lse_attention *a)
{
    if (a == NULL)
        return;
    lse_graph_free(a->g);
    free(a);
}

const char *lse_attention_errmsg(const lse_attention *a)
{
    return a != NULL ? a->last.message : "";
}

lse_attention_kind lse_attention_kind_of(const lse_attention *a)
{
    return a != NULL ? a->kind : LSE_ATTENTION_CROSS;
}

lse_graph *lse_attention_graph(const lse_attention *a)
{
    return a != NULL ? a->g : NULL;
}

lse_term *lse_attention_term(const lse_attention *a)
{
    return a != NULL ? a->term : NULL;
}

lse_node *lse_attention_state(const lse_attention *a)
{
    return a != NULL ? a->state : NULL;
}

lse_node *lse_attention_node(const lse_attention *a, const char *name)
{
    return a != NULL && name != NULL ? lse_graph_find_node(a->g, name) : NULL;
}

double lse_attention_bound(const lse_attention *a)
{
    return a != NULL ? a->lambda : NAN;
}

const gsl_matrix *lse_attention_softmax(const lse_attention *a)
{
    return a != NULL ? lse_term_softmax(a->term) : NULL;
}

static lse_status fail_graph(lse_attention *a, lse_status st, const char *fn)
{
    const char *msg = lse_graph_errmsg(a->g);
    return lse_error_set(&a->last, st, fn, "%s",
                         msg[0] != '\0' ? msg : lse_strerror(st));
}

static lse_status lse_attention_energy_impl(lse_attention *a, double *energy)
{
    static const char fn[] = "lse_attention_energy";
    if (a == NULL)
        return LSE_EFAULT;
    a->last = (lse_error){0};
    if (energy == NULL)
        return lse_error_set(&a->last, LSE_EFAULT, fn, "NULL energy");
    const lse_status st = lse_graph_energy(a->g, energy);
    return st == LSE_OK ? LSE_OK : fail_graph(a, st, fn);
}

lse_status lse_attention_energy(lse_attention *a, double *energy,
                                lse_error *err)
{
    return lse_util_report(err, lse_attention_energy_impl(a, energy),
                           "lse_attention_energy", lse_attention_errmsg(a));
}

/* A V of a streaming model at the current node values (as the dense
 * step, the energy and gradient are evaluated first). */
static lse_status stream_step(lse_attention *a, const gsl_matrix *values,
                              gsl_matrix *out)
{
    static const char fn[] = "lse_attention_step";
    double e;
    lse_status st = lse_graph_gradient(a->g, &e);
    if (st != LSE_OK)
        return fail_graph(a, st, fn);
    const stream_cfg *c = lse_term_config(a->term);
    const size_t nv = c->self ? 3 : 2;
    const gsl_matrix *val[3];
    for (size_t i = 0; i < nv; i++)
        val[i] = lse_node_value(lse_term_param(a->term, i));
    gsl_matrix *q = NULL, *k = NULL;
    if (c->self)
        st = stream_project(val, &q, &k);
    if (st == LSE_OK)
        st = lse_attn_stream_apply(c->self ? q : val[0], c->self ? k : val[1],
                                   values, c->beta, c->scale, c->mask, out,
                                   NULL, &a->last);
    else
        lse_error_set(&a->last, st, fn, "out of memory");
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    return st;
}

static lse_status lse_attention_step_impl(lse_attention *a,
                                          const gsl_matrix *values,
                                          gsl_matrix *out)
{
    static const char fn[] = "lse_attention_step";
    if (a == NULL)
        return LSE_EFAULT;
    a->last = (lse_error){0};
    if (out == NULL)
        return lse_error_set(&a->last, LSE_EFAULT, fn, "NULL out");
    /* a streaming (custom) term: views queries, keys or x, W_Q, W_K */
    const size_t nc = a->stream ? lse_term_view(a->term, 0).count
                                : lse_term_child(a->term).count;
    const size_t np =
        a->stream ? lse_term_view(a->term, a->kind == LSE_ATTENTION_CROSS)
                        .count
                  : lse_term_parent(a->term).count;
    const gsl_matrix *x = lse_node_value(a->state);
    if (values != NULL) {
        if (values->size1 != np || out->size1 != nc ||
            out->size2 != values->size2)
            return lse_error_set(&a->last, LSE_EDIM, fn,
                                 "values are %zux%zu and out %zux%zu, "
                                 "expected %zu x d_v and %zu x d_v",
                                 values->size1, values->size2, out->size1,
                                 out->size2, np, nc);
    } else {
        if (a->lambda == 0.0)
            return lse_error_set(&a->last, LSE_EINVAL, fn,
                                 "a gradient step needs the bound term "
                                 "(lambda > 0); pass values instead");
        if (out->size1 != x->size1 || out->size2 != x->size2)
            return lse_error_set(&a->last, LSE_EDIM, fn,
                                 "out is %zux%zu, state '%s' %zux%zu",
                                 out->size1, out->size2,
                                 lse_node_name(a->state), x->size1, x->size2);
    }
    if (a->stream && values != NULL)
        return stream_step(a, values, out);
    double e;
    lse_status st = lse_graph_gradient(a->g, &e);
    if (st != LSE_OK)
        return fail_graph(a, st, fn);
    if (values != NULL) {
        const gsl_matrix *p = lse_term_softmax(a->term); /* (nc, np) */
        if (p == NULL)
            return lse_error_set(&a->last, LSE_EINTERNAL, fn,
                                 "the term keeps no softmax");
        const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, p,
                                      values, 0.0, out);
        if (rc != 0)
            return lse_error_set(&a->last, lse_status_from_gsl(rc), fn,
                                 "A V: GSL error %d", rc);
        return LSE_OK;
    }
    const gsl_matrix *gr = lse_node_grad(a->state);
    const double eta = 1.0 / a->lambda;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++)
            gsl_matrix_set(out, i, j,
                           gsl_matrix_get(x, i, j) -
                               eta * gsl_matrix_get(gr, i, j));
    return LSE_OK;
}

lse_status lse_attention_step(lse_attention *a, const gsl_matrix *values,
                              gsl_matrix *out, lse_error *err)
{
    return lse_util_report(err, lse_attention_step_impl(a, values, out),
                           "lse_attention_step", lse_attention_errmsg(a));
}

/* ------------------------------------------------------------------ */
/* Slot attention EM                                                    */

/* Called after each closed-form M-step: the bilinear solve reports
 * ||W_c||_F ||W_p||_F before and after. */
static lse_status shrink_hook(lse_graph *g, lse_term *t,
                              const lse_mstep_report *r, void *user)
{
    (void)g;
    lse_attention *a = user;
    if (t != a->term || r == NULL)
        return LSE_OK;
    lse_slot_report *p = &a->rep;
    p->n_mstep++;
    if (p->n_mstep == 1)
        p->norm_initial = r->norm_before;
    const double ratio =
        r->norm_before > 0.0 ? r->norm_after / r->norm_before : 0.0;
    p->last_ratio = ratio;
    if (!(ratio <= p->max_ratio))
        p->max_ratio = ratio;
    p->norm = r->norm_after;
    if (ratio < a->fit.shrink_ratio) {
        p->n_shrink++;
        p->run++;
        if (p->run > p->max_run)
            p->max_run = p->run;
    } else {
        p->run = 0;
    }
    const int fast = p->run >= a->fit.patience;
    const int slow = !(r->norm_after >= a->fit.total_ratio * p->norm_initial);
    const int tiny = !(r->norm_after >= a->fit.norm_floor);
    if (!p->collapsed && (fast || slow || tiny)) {
        p->collapsed = 1;
        p->collapse_mstep = p->n_mstep;
        char why[160];
        if (tiny)
            snprintf(why, sizeof why, "below the floor %g", a->fit.norm_floor);
        else if (fast)
            snprintf(why, sizeof why,
                     "%zu consecutive M-steps shrank it by more than a "
                     "factor %g",
                     p->run, a->fit.shrink_ratio);
        else
            snprintf(why, sizeof why, "below %g times its start value",
                     a->fit.total_ratio);
        lse_log(LSE_LOG_WARN,
                "lse_attention_slot_fit: W_K and W_Q collapse towards zero at "
                "M-step %zu: ||W_K|| ||W_Q|| = %.6g, %.3g times its start "
                "value %.6g (%s)",
                p->n_mstep, r->norm_after,
                p->norm_initial > 0.0 ? r->norm_after / p->norm_initial : 0.0,
                p->norm_initial, why);
    }
    return LSE_OK;
}

static lse_status lse_attention_slot_fit_impl(lse_attention *a,
                                              const lse_slot_fit_opts *opts,
                                              lse_slot_report *rep)
{
    static const char fn[] = "lse_attention_slot_fit";
    if (a == NULL)
        return LSE_EFAULT;
    a->last = (lse_error){0};
    if (a->kind != LSE_ATTENTION_SLOT)
        return lse_error_set(&a->last, LSE_EINVAL, fn,
                             "not a slot-attention graph");
    const lse_slot_fit_opts o =
        opts != NULL ? *opts : lse_slot_fit_opts_default();
    if (!(o.tol >= 0.0) || !isfinite(o.tol) || !(o.shrink_ratio > 0.0) ||
        !(o.shrink_ratio <= 1.0) || o.patience == 0 ||
        !(o.total_ratio >= 0.0) || !(o.total_ratio <= 1.0) ||
        !(o.norm_floor >= 0.0) || !isfinite(o.norm_floor))
        return lse_error_set(&a->last, LSE_EDOM, fn,
                             "tol >= 0, 0 < shrink_ratio <= 1, patience >= 1, "
                             "0 <= total_ratio <= 1 and norm_floor >= 0 "
                             "required");
    a->fit = o;
    a->rep = (lse_slot_report){.reason = LSE_STOP_MAX_ITER,
                               .norm_initial = NAN,
                               .norm = NAN,
                               .last_ratio = NAN,
                               .max_ratio = NAN};
    lse_solver *s = lse_solver_new(a->g, lse_solver_em);
    if (s == NULL)
        return lse_error_set(&a->last, LSE_ENOMEM, fn, "out of memory");
    lse_solver_opts so = lse_solver_opts_default();
    so.estep_steps = o.estep_steps;
    so.tol_energy = o.tol;
    lse_status st = lse_solver_set_opts(s, &so);
    lse_solver_set_mstep_hook(s, shrink_hook, a);
    if (st == LSE_OK)
        st = lse_solver_init(s);
    a->rep.energy_initial = lse_solver_energy(s);
    for (size_t it = 0; st == LSE_OK && it < o.max_iter; it++) {
        st = lse_solver_iterate(s);
        if (st != LSE_OK)
            break;
        lse_log(LSE_LOG_INFO,
                "lse_attention_slot_fit: iteration %zu energy %.12g "
                "||W_K|| ||W_Q|| %.6g",
                lse_solver_n_iter(s), lse_solver_energy(s), a->rep.norm);
        if (o.cb != NULL && o.cb(s, o.user)) {
            a->rep.reason = LSE_STOP_CALLBACK;
            break;
        }
        if (lse_solver_test(s) == LSE_OK) {
            a->rep.converged = 1;
            a->rep.reason = LSE_STOP_ENERGY;
            break;
        }
    }
    if (st == LSE_OK)
        st = lse_solver_finish(s);
    a->rep.n_iter = lse_solver_n_iter(s);
    a->rep.n_increase = lse_solver_n_increase(s);
    a->rep.energy = lse_solver_energy(s);
    lse_solver_free(s);
    if (st != LSE_OK)
        a->rep.reason = LSE_STOP_ERROR;
    if (rep != NULL)
        *rep = a->rep;
    return st == LSE_OK ? LSE_OK : fail_graph(a, st, fn);
}

lse_status lse_attention_slot_fit(lse_attention *a,
                                  const lse_slot_fit_opts *opts,
                                  lse_slot_report *rep, lse_error *err)
{
    return lse_util_report(err, lse_attention_slot_fit_impl(a, opts, rep),
                           "lse_attention_slot_fit", lse_attention_errmsg(a));
}

const lse_slot_report *lse_attention_slot_report(const lse_attention *a)
{
    return a != NULL && a->kind == LSE_ATTENTION_SLOT ? &a->rep : NULL;
}
