#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Hierarchical predictive coding (Tschantz section 7), built only through
 * the public graph API (docs/models/predcoding.md):
 *
 *   nodes  x (N, d0) clamped, h_l (R_l, d_l) states, W_l (d_{l-1}, d_l)
 *          and b_l (1, d_{l-1}) parameters, l = 1..L
 *   terms  pc_l: LSE, child = layer l-1, parent = layer l,
 *                sim = -1/2 ||c - f_l(W_l p + b_l)||^2 (lse_sim_nonlinear);
 *                per-sample layout: R_l = N and a diagonal user mask, so
 *                E_l = sum_i 1/2 ||h_{l-1,i} - f_l(W_l h_{l,i} + b_l)||^2;
 *                mixture layout: R_l = K_l, no mask (seed eq. 17).
 *          prior: quadratic prior/2 ||h_L||^2; decay_l: quadratic on W_l.
 */

struct lse_predcoding {
    lse_graph *g;
    size_t n_layers;
    lse_pc_layout layout;
    size_t *dims;        /* L + 1: d_0 .. d_L */
    size_t *rows;        /* L + 1: rows of x, h_1 .. h_L */
    lse_activation *act; /* L */
    lse_node **layer;    /* L + 1: x, h_1 .. h_L */
    lse_node **w, **b;   /* L */
    lse_term **pred;     /* L */
    gsl_matrix *mask;    /* (N, N) identity for the per-sample layout */
    lse_solver *gd;      /* gradient descent on the latents (inference) */
    double gd_step;      /* its last accepted step, reused as the next start */
    size_t estep_steps;  /* inference iterations per EM E-step */
};

lse_predcoding_opts lse_predcoding_opts_default(void)
{
    const lse_predcoding_opts o = {.layout = LSE_PC_PER_SAMPLE,
                                   .rows = NULL,
                                   .act = NULL,
                                   .prior = 1.0,
                                   .weight_decay = 0.0,
                                   .init_sd = 0.1,
                                   .seed = 1};
    return o;
}

lse_predcoding_fit_opts lse_predcoding_fit_opts_default(void)
{
    const lse_predcoding_fit_opts o = {.max_iter = 200,
                                       .estep_steps = 10,
                                       .mstep_steps = 5,
                                       .tol = 1e-8,
                                       .callback = NULL,
                                       .user = NULL};
    return o;
}

void lse_predcoding_free(lse_predcoding *m)
{
    if (m == NULL)
        return;
    lse_solver_free(m->gd); /* before the graph it borrows */
    lse_graph_free(m->g);
    free(m->dims);
    free(m->rows);
    free(m->act);
    free(m->layer);
    free(m->w);
    free(m->b);
    free(m->pred);
    gsl_matrix_free(m->mask);
    free(m);
}

static lse_status check_opts(const gsl_matrix *x, size_t n_layers,
                             const size_t *dims, const lse_predcoding_opts *o,
                             lse_error *err)
{
    static const char fn[] = "lse_predcoding_new";
    if (n_layers == 0)
        return lse_util_set_error(err, LSE_EINVAL, "%s: n_layers is 0", fn);
    if (x->size1 == 0 || x->size2 == 0)
        return lse_util_set_error(err, LSE_EINVAL, "%s: data is %zux%zu", fn,
                                  x->size1, x->size2);
    if (lse_util_find_nonfinite(x, NULL, NULL))
        return lse_util_set_error(err, LSE_ENONFINITE,
                                  "%s: data holds NaN or inf", fn);
    if (o->layout != LSE_PC_PER_SAMPLE && o->layout != LSE_PC_MIXTURE)
        return lse_util_set_error(err, LSE_EINVAL, "%s: unknown layout %d", fn,
                                  (int)o->layout);
    if (o->layout == LSE_PC_MIXTURE && o->rows == NULL)
        return lse_util_set_error(
            err, LSE_EFAULT, "%s: the mixture layout needs opts.rows (K_l)",
            fn);
    for (size_t l = 0; l < n_layers; l++) {
        if (dims[l] == 0)
            return lse_util_set_error(
                err, LSE_EINVAL, "%s: layer %zu has dimension 0", fn, l + 1);
        if (o->layout == LSE_PC_MIXTURE && o->rows[l] == 0)
            return lse_util_set_error(err, LSE_EINVAL,
                                      "%s: layer %zu has 0 rows (K_%zu)", fn,
                                      l + 1, l + 1);
        if (o->act != NULL && ((int)o->act[l] < (int)LSE_ACT_IDENTITY ||
                               (int)o->act[l] > (int)LSE_ACT_RELU))
            return lse_util_set_error(err, LSE_EINVAL,
                                      "%s: layer %zu: unknown activation %d",
                                      fn, l + 1, (int)o->act[l]);
    }
    if (!isfinite(o->prior) || o->prior < 0.0)
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: prior = %g, must be finite and >= 0", fn,
                                  o->prior);
    if (!isfinite(o->weight_decay) || o->weight_decay < 0.0)
        return lse_util_set_error(
            err, LSE_EDOM, "%s: weight_decay = %g, must be finite and >= 0", fn,
            o->weight_decay);
    if (!isfinite(o->init_sd) || !(o->init_sd > 0.0))
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: init_sd = %g, must be finite and > 0",
                                  fn, o->init_sd);
    return LSE_OK;
}

static void fill_normal(gsl_matrix *m, const gsl_rng *r, double sd)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, gsl_ran_gaussian(r, sd));
}

/* Nodes and terms of the graph; on failure the message is on the graph. */
static lse_status build(lse_predcoding *m, const gsl_matrix *x,
                        const lse_predcoding_opts *o)
{
    lse_graph *g = m->g;
    const size_t L = m->n_layers;
    char name[32];
    lse_status st = lse_graph_add_node(g, "x", x->size1, x->size2,
                                       LSE_NODE_CLAMPED, &m->layer[0]);
    if (st == LSE_OK)
        st = lse_node_set_value(m->layer[0], x);
    for (size_t l = 1; st == LSE_OK && l <= L; l++) {
        snprintf(name, sizeof name, "h%zu", l);
        st = lse_graph_add_node(g, name, m->rows[l], m->dims[l], 0,
                                &m->layer[l]);
        if (st != LSE_OK)
            break;
        snprintf(name, sizeof name, "W%zu", l);
        st = lse_graph_add_node(g, name, m->dims[l - 1], m->dims[l],
                                LSE_NODE_PARAM, &m->w[l - 1]);
        if (st != LSE_OK)
            break;
        snprintf(name, sizeof name, "b%zu", l);
        st = lse_graph_add_node(g, name, 1, m->dims[l - 1], LSE_NODE_PARAM,
                                &m->b[l - 1]);
    }
    for (size_t l = 1; st == LSE_OK && l <= L; l++) {
        const lse_nonlinear_config cfg = {.f = m->act[l - 1]};
        lse_node *params[2] = {m->w[l - 1], m->b[l - 1]};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(m->layer[l - 1]);
        spec.parent = lse_view_all(m->layer[l]);
        spec.sim = lse_sim_nonlinear;
        spec.config = &cfg;
        spec.param = params;
        spec.user_mask = m->mask; /* NULL for the mixture layout */
        snprintf(name, sizeof name, "pc%zu", l);
        st = lse_graph_add_lse(g, name, &spec, &m->pred[l - 1]);
    }
    if (st == LSE_OK && o->prior > 0.0) {
        const lse_quadratic_config q = {.scale = o->prior};
        const lse_view v = lse_view_all(m->layer[L]);
        st = lse_graph_add_custom(g, "prior", lse_custom_quadratic, &q, &v, 1,
                                  NULL);
    }
    for (size_t l = 1; st == LSE_OK && o->weight_decay > 0.0 && l <= L; l++) {
        const lse_quadratic_config q = {.scale = o->weight_decay};
        const lse_view v = lse_view_all(m->w[l - 1]);
        snprintf(name, sizeof name, "decay%zu", l);
        st = lse_graph_add_custom(g, name, lse_custom_quadratic, &q, &v, 1,
                                  NULL);
    }
    if (st != LSE_OK)
        return st;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL)
        return LSE_ENOMEM;
    gsl_rng_set(r, o->seed);
    for (size_t l = 1; l <= L; l++) {
        fill_normal(lse_node_value(m->w[l - 1]), r, o->init_sd);
        fill_normal(lse_node_value(m->layer[l]), r, o->init_sd);
    }
    gsl_rng_free(r);
    return LSE_OK;
}

lse_status lse_predcoding_new(const gsl_matrix *x, size_t n_layers,
                              const size_t *dims,
                              const lse_predcoding_opts *opts,
                              lse_predcoding **out, lse_error *err)
{
    static const char fn[] = "lse_predcoding_new";
    lse_gsl_quiet();
    if (out == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL out", fn);
    *out = NULL;
    if (x == NULL || dims == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL data or dims", fn);
    const lse_predcoding_opts o =
        opts != NULL ? *opts : lse_predcoding_opts_default();
    lse_status st = check_opts(x, n_layers, dims, &o, err);
    if (st != LSE_OK)
        return st;
    const size_t L = n_layers;
    lse_predcoding *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    m->n_layers = L;
    m->layout = o.layout;
    m->dims = calloc(L + 1, sizeof *m->dims);
    m->rows = calloc(L + 1, sizeof *m->rows);
    m->act = calloc(L, sizeof *m->act);
    m->layer = calloc(L + 1, sizeof *m->layer);
    m->w = calloc(L, sizeof *m->w);
    m->b = calloc(L, sizeof *m->b);
    m->pred = calloc(L, sizeof *m->pred);
    m->g = lse_graph_new();
    if (m->dims == NULL || m->rows == NULL || m->act == NULL ||
        m->layer == NULL || m->w == NULL || m->b == NULL || m->pred == NULL ||
        m->g == NULL)
        goto nomem;
    m->dims[0] = x->size2;
    m->rows[0] = x->size1;
    for (size_t l = 1; l <= L; l++) {
        m->dims[l] = dims[l - 1];
        m->rows[l] = o.layout == LSE_PC_MIXTURE ? o.rows[l - 1] : x->size1;
        m->act[l - 1] = o.act != NULL ? o.act[l - 1] : LSE_ACT_IDENTITY;
    }
    if (o.layout == LSE_PC_PER_SAMPLE) {
        m->mask = gsl_matrix_alloc(x->size1, x->size1);
        if (m->mask == NULL)
            goto nomem;
        gsl_matrix_set_identity(m->mask);
    }
    st = build(m, x, &o);
    if (st != LSE_OK) {
        const char *msg = lse_graph_errmsg(m->g);
        lse_util_set_error(err, st, "%s: %s", fn,
                           msg[0] != '\0' ? msg : lse_strerror(st));
        lse_predcoding_free(m);
        return st;
    }
    *out = m;
    return LSE_OK;
nomem:
    lse_predcoding_free(m);
    return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
}

lse_graph *lse_predcoding_graph(const lse_predcoding *m)
{
    return m != NULL ? m->g : NULL;
}

/* The message of the last failing call: the graph's ("" for NULL m). */
static const char *pc_msg(const lse_predcoding *m)
{
    return m != NULL && m->g != NULL ? lse_graph_errmsg(m->g) : "";
}

size_t lse_predcoding_n_layers(const lse_predcoding *m)
{
    return m != NULL ? m->n_layers : 0;
}

lse_node *lse_predcoding_layer(const lse_predcoding *m, size_t l)
{
    return m != NULL && l <= m->n_layers ? m->layer[l] : NULL;
}

lse_node *lse_predcoding_weight(const lse_predcoding *m, size_t l)
{
    return m != NULL && l >= 1 && l <= m->n_layers ? m->w[l - 1] : NULL;
}

lse_node *lse_predcoding_bias(const lse_predcoding *m, size_t l)
{
    return m != NULL && l >= 1 && l <= m->n_layers ? m->b[l - 1] : NULL;
}

lse_term *lse_predcoding_term(const lse_predcoding *m, size_t l)
{
    return m != NULL && l >= 1 && l <= m->n_layers ? m->pred[l - 1] : NULL;
}

static lse_status lse_predcoding_set_data_impl(lse_predcoding *m,
                                               const gsl_matrix *x)
{
    if (m == NULL || x == NULL)
        return LSE_EFAULT;
    return lse_node_set_value(m->layer[0], x);
}

lse_status lse_predcoding_set_data(lse_predcoding *m, const gsl_matrix *x,
                                   lse_error *err)
{
    return lse_util_report(err, lse_predcoding_set_data_impl(m, x),
                           "lse_predcoding_set_data", pc_msg(m));
}

/* Inference on the latents with the model's own GD solver, whose step
 * size persists between calls (the EM solver's M-step keeps its own). */
static lse_status run_inference(lse_predcoding *m, size_t max_iter, double tol,
                                lse_solver_result *res)
{
    if (m->gd == NULL) {
        m->gd = lse_solver_new(m->g, lse_solver_gd);
        if (m->gd == NULL)
            return LSE_ENOMEM;
        const lse_status st =
            lse_solver_set_nodes(m->gd, m->layer + 1, m->n_layers);
        if (st != LSE_OK)
            return st;
    }
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = tol;
    if (m->gd_step > 0.0 && isfinite(m->gd_step))
        so.step = m->gd_step;
    lse_status st = lse_solver_set_opts(m->gd, &so);
    if (st != LSE_OK)
        return st;
    lse_solver_result r;
    st = lse_solver_run(m->gd, max_iter, NULL, NULL, &r);
    const double step = lse_solver_step(m->gd);
    /* keep a usable start: the line search grew it after the last step */
    if (st == LSE_OK && step > 1e-12 && isfinite(step))
        m->gd_step = step;
    if (res != NULL)
        *res = r;
    return st;
}

static lse_status lse_predcoding_infer_impl(lse_predcoding *m, size_t max_iter,
                                            double tol, lse_solver_result *res)
{
    if (m == NULL)
        return LSE_EFAULT;
    return run_inference(m, max_iter, tol, res);
}

lse_status lse_predcoding_infer(lse_predcoding *m, size_t max_iter, double tol,
                                lse_solver_result *res, lse_error *err)
{
    return lse_util_report(err,
                           lse_predcoding_infer_impl(m, max_iter, tol, res),
                           "lse_predcoding_infer", pc_msg(m));
}

/* EM E-step hook: estep_steps iterations of inference. */
static lse_status pc_estep(lse_graph *g, void *user)
{
    (void)g;
    lse_predcoding *m = user;
    return run_inference(m, m->estep_steps, 0.0, NULL);
}

static lse_status lse_predcoding_learn_impl(lse_predcoding *m,
                                            const lse_predcoding_fit_opts *opts,
                                            lse_solver_result *res)
{
    if (m == NULL)
        return LSE_EFAULT;
    const lse_predcoding_fit_opts o =
        opts != NULL ? *opts : lse_predcoding_fit_opts_default();
    lse_solver *s = lse_solver_new(m->g, lse_solver_em);
    if (s == NULL)
        return LSE_ENOMEM;
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = o.tol;
    so.mstep_steps = o.mstep_steps;
    m->estep_steps = o.estep_steps;
    lse_solver_set_estep(s, pc_estep, m);
    lse_status st = lse_solver_set_opts(s, &so);
    lse_solver_result r = {.status = st, .reason = LSE_STOP_ERROR};
    if (st == LSE_OK)
        st = lse_solver_run(s, o.max_iter, o.callback, o.user, &r);
    lse_solver_free(s);
    if (res != NULL)
        *res = r;
    return st;
}

lse_status lse_predcoding_learn(lse_predcoding *m,
                                const lse_predcoding_fit_opts *opts,
                                lse_solver_result *res, lse_error *err)
{
    return lse_util_report(err, lse_predcoding_learn_impl(m, opts, res),
                           "lse_predcoding_learn", pc_msg(m));
}

static double act_value(lse_activation f, double z)
{
    switch (f) {
    case LSE_ACT_IDENTITY:
        return z;
    case LSE_ACT_TANH:
        return tanh(z);
    case LSE_ACT_SIGMOID:
        return z >= 0.0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
    case LSE_ACT_RELU:
        return z > 0.0 ? z : 0.0;
    }
    return NAN;
}

static lse_status lse_predcoding_predict_impl(const lse_predcoding *m, size_t l,
                                              gsl_matrix *out)
{
    if (m == NULL || out == NULL)
        return LSE_EFAULT;
    if (l < 1 || l > m->n_layers)
        return LSE_ERANGE;
    if (out->size1 != m->rows[l] || out->size2 != m->dims[l - 1])
        return LSE_EDIM;
    /* out = H_l W_l' + 1 b_l, then f_l elementwise */
    lse_node *h = m->layer[l], *w = m->w[l - 1], *b = m->b[l - 1];
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, lse_node_value(h),
                       lse_node_value(w), 0.0, out);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    const gsl_matrix *bv = lse_node_value(b);
    for (size_t i = 0; i < out->size1; i++)
        for (size_t k = 0; k < out->size2; k++)
            gsl_matrix_set(
                out, i, k,
                act_value(m->act[l - 1], gsl_matrix_get(out, i, k) +
                                             gsl_matrix_get(bv, 0, k)));
    return LSE_OK;
}

lse_status lse_predcoding_predict(const lse_predcoding *m, size_t l,
                                  gsl_matrix *out, lse_error *err)
{
    return lse_util_report(err, lse_predcoding_predict_impl(m, l, out),
                           "lse_predcoding_predict", pc_msg(m));
}

static lse_status lse_predcoding_error_impl(lse_predcoding *m, size_t l,
                                            double *mse)
{
    if (m == NULL || mse == NULL)
        return LSE_EFAULT;
    if (l < 1 || l > m->n_layers)
        return LSE_ERANGE;
    double e;
    const lse_status st = lse_graph_energy(m->g, &e);
    if (st != LSE_OK)
        return st;
    const lse_term *t = m->pred[l - 1];
    const gsl_matrix *s = lse_term_similarity(t), *a = lse_term_softmax(t);
    if (s == NULL || a == NULL)
        return LSE_EINTERNAL;
    /* ||c_i - F_k||^2 = -2 S_ik; masked pairs have A = 0 and S = -inf */
    double sum = 0.0;
    for (size_t i = 0; i < s->size1; i++)
        for (size_t k = 0; k < s->size2; k++) {
            const double aik = gsl_matrix_get(a, i, k);
            if (aik > 0.0)
                sum += aik * -2.0 * gsl_matrix_get(s, i, k);
        }
    *mse = sum / ((double)m->rows[l - 1] * (double)m->dims[l - 1]);
    return LSE_OK;
}

lse_status lse_predcoding_error(lse_predcoding *m, size_t l, double *mse,
                                lse_error *err)
{
    return lse_util_report(err, lse_predcoding_error_impl(m, l, mse),
                           "lse_predcoding_error", pc_msg(m));
}
