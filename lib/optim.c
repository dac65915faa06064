#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_math.h>

#include "graph-private.h"

/* Parameter learning: update rules, clipping, schedules, state save and
 * resume, seeded mini-batches, infer -> learn (docs/learning.md). */

struct lse_optim {
    lse_graph *g;
    lse_optim_opts opts;
    lse_node **nodes;
    size_t n_nodes;
    size_t n;      /* optimized entries */
    double *m;     /* first moments / SGD momentum buffer (n) */
    double *v;     /* second moments (n) */
    double *vmax;  /* running max of v (n) */
    double *gbuf;  /* gradients (n), reduced across processes */
    lse_xsum *acc; /* exact gradient sums (n), allocated on first use */
    double *xbuf;  /* their exports (n LSE_XSUM_EXPORT) for the hook */
    size_t n_acc;  /* gradients accumulated since the last step */
    size_t t;      /* steps taken */
    double gnorm;  /* last global gradient norm, before clipping */
    lse_reduce_fn reduce;
    void *reduce_user;
};

lse_optim_opts lse_optim_opts_default(void)
{
    lse_optim_opts o;
    memset(&o, 0, sizeof o);
    o.rule = LSE_OPTIM_ADAM;
    o.lr = 1e-3;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.schedule = LSE_LR_CONSTANT;
    o.step_size = 1000;
    o.gamma = 0.1;
    o.total_steps = 1000;
    o.lr_min = 0.0;
    return o;
}

const char *lse_optim_rule_name(lse_optim_rule rule)
{
    switch (rule) {
    case LSE_OPTIM_SGD:
        return "sgd";
    case LSE_OPTIM_ADAM:
        return "adam";
    case LSE_OPTIM_ADAMW:
        return "adamw";
    case LSE_OPTIM_AMSGRAD:
        return "amsgrad";
    }
    return NULL;
}

static lse_status check_opts(lse_graph *g, const lse_optim_opts *p)
{
    static const char fn[] = "lse_optim_set_opts";
    if (lse_optim_rule_name(p->rule) == NULL)
        return lse_graph_fail(g, LSE_EDOM, fn, "unknown rule %d", (int)p->rule);
    if (!isfinite(p->lr) || p->lr <= 0.0)
        return lse_graph_fail(g, LSE_EDOM, fn, "lr = %g, want > 0", p->lr);
    if (!(p->momentum >= 0.0 && p->momentum < 1.0))
        return lse_graph_fail(g, LSE_EDOM, fn, "momentum = %g, want [0, 1)",
                              p->momentum);
    if (!(p->beta1 >= 0.0 && p->beta1 < 1.0) ||
        !(p->beta2 >= 0.0 && p->beta2 < 1.0))
        return lse_graph_fail(g, LSE_EDOM, fn,
                              "beta1 = %g, beta2 = %g, want [0, 1)", p->beta1,
                              p->beta2);
    if (!isfinite(p->eps) || p->eps <= 0.0)
        return lse_graph_fail(g, LSE_EDOM, fn, "eps = %g, want > 0", p->eps);
    if (!isfinite(p->weight_decay) || p->weight_decay < 0.0)
        return lse_graph_fail(g, LSE_EDOM, fn, "weight_decay = %g, want >= 0",
                              p->weight_decay);
    if (!isfinite(p->clip_norm) || p->clip_norm < 0.0)
        return lse_graph_fail(g, LSE_EDOM, fn, "clip_norm = %g, want >= 0",
                              p->clip_norm);
    switch (p->schedule) {
    case LSE_LR_CONSTANT:
        break;
    case LSE_LR_STEP:
        if (p->step_size == 0 || !(p->gamma > 0.0 && p->gamma <= 1.0))
            return lse_graph_fail(g, LSE_EDOM, fn,
                                  "step schedule: step_size = %zu, gamma = %g; "
                                  "want >= 1 and (0, 1]",
                                  p->step_size, p->gamma);
        break;
    case LSE_LR_COSINE:
        if (p->total_steps == 0 || !isfinite(p->lr_min) || p->lr_min < 0.0 ||
            p->lr_min > p->lr)
            return lse_graph_fail(g, LSE_EDOM, fn,
                                  "cosine schedule: total_steps = %zu, lr_min = "
                                  "%g; want >= 1 and [0, lr]",
                                  p->total_steps, p->lr_min);
        break;
    default:
        return lse_graph_fail(g, LSE_EDOM, fn, "unknown schedule %d",
                              (int)p->schedule);
    }
    return LSE_OK;
}

static void free_state(lse_optim *o)
{
    free(o->nodes);
    free(o->m);
    free(o->v);
    free(o->vmax);
    free(o->gbuf);
    free(o->acc);
    free(o->xbuf);
    o->nodes = NULL;
    o->m = o->v = o->vmax = o->gbuf = o->xbuf = NULL;
    o->acc = NULL;
    o->n_nodes = o->n = o->n_acc = 0;
}

/* nodes: the selection, or NULL for every free PARAM node */
static lse_status alloc_state(lse_optim *o, lse_node *const *nodes, size_t k)
{
    static const char fn[] = "lse_optim_set_nodes";
    lse_graph *g = o->g;
    const size_t cap = nodes != NULL ? k : g->n_nodes;
    lse_node **sel = calloc(cap + 1, sizeof *sel);
    if (sel == NULL)
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    size_t ns = 0, n = 0;
    for (size_t i = 0; i < cap; i++) {
        lse_node *node = nodes != NULL ? nodes[i] : g->nodes[i];
        if (nodes == NULL && (!(node->flags & LSE_NODE_PARAM) ||
                              (node->flags & LSE_NODE_CLAMPED)))
            continue;
        if (node == NULL || node->graph != g) {
            free(sel);
            return lse_graph_fail(g, LSE_EINVAL, fn,
                                  "node %zu is NULL or of another graph", i);
        }
        for (size_t j = 0; j < ns; j++)
            if (sel[j] == node) {
                free(sel);
                return lse_graph_fail(g, LSE_EINVAL, fn,
                                      "node '%s' listed twice", node->name);
            }
        const size_t r = node->value->size1, c = node->value->size2;
        if ((c != 0 && r > SIZE_MAX / c) ||
            r * c > SIZE_MAX / (3 * sizeof(double)) - n) {
            free(sel);
            return lse_graph_fail(g, LSE_ENOMEM, fn, "state too large");
        }
        n += r * c;
        sel[ns++] = node;
    }
    double *m = calloc(n + 1, sizeof *m), *v = calloc(n + 1, sizeof *v),
           *vmax = calloc(n + 1, sizeof *vmax), *gb = calloc(n + 1, sizeof *gb);
    if (m == NULL || v == NULL || vmax == NULL || gb == NULL) {
        free(sel);
        free(m);
        free(v);
        free(vmax);
        free(gb);
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    }
    free_state(o);
    o->nodes = sel;
    o->n_nodes = ns;
    o->n = n;
    o->m = m;
    o->v = v;
    o->vmax = vmax;
    o->gbuf = gb;
    o->t = 0;
    o->gnorm = NAN;
    return LSE_OK;
}

lse_optim *lse_optim_new(lse_graph *g, const lse_optim_opts *opts)
{
    lse_gsl_quiet();
    if (g == NULL)
        return NULL;
    lse_optim_opts o0 = opts != NULL ? *opts : lse_optim_opts_default();
    if (check_opts(g, &o0) != LSE_OK)
        return NULL;
    lse_optim *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->g = g;
    o->opts = o0;
    if (alloc_state(o, NULL, 0) != LSE_OK) {
        free(o);
        return NULL;
    }
    return o;
}

void lse_optim_free(lse_optim *o)
{
    if (o == NULL)
        return;
    free_state(o);
    free(o);
}

lse_status lse_optim_set_opts(lse_optim *o, const lse_optim_opts *opts)
{
    if (o == NULL || opts == NULL)
        return LSE_EFAULT;
    lse_status st = check_opts(o->g, opts);
    if (st == LSE_OK)
        o->opts = *opts;
    return st;
}

lse_status lse_optim_set_nodes(lse_optim *o, lse_node *const *nodes, size_t n)
{
    if (o == NULL)
        return LSE_EFAULT;
    return alloc_state(o, (nodes != NULL && n > 0) ? nodes : NULL,
                       (nodes != NULL && n > 0) ? n : 0);
}

void lse_optim_reset(lse_optim *o)
{
    if (o == NULL)
        return;
    memset(o->m, 0, (o->n + 1) * sizeof *o->m);
    memset(o->v, 0, (o->n + 1) * sizeof *o->v);
    memset(o->vmax, 0, (o->n + 1) * sizeof *o->vmax);
    o->t = 0;
    o->gnorm = NAN;
    if (o->acc != NULL)
        memset(o->acc, 0, o->n * sizeof *o->acc);
    o->n_acc = 0;
}

/* learning rate of step index s (0-based) */
static double lr_at(const lse_optim_opts *p, size_t s)
{
    switch (p->schedule) {
    case LSE_LR_STEP:
        return p->lr * pow(p->gamma, (double)(s / p->step_size));
    case LSE_LR_COSINE: {
        const double T = (double)p->total_steps;
        const double x = s < p->total_steps ? (double)s : T;
        return p->lr_min +
               (p->lr - p->lr_min) * 0.5 * (1.0 + cos(M_PI * x / T));
    }
    default:
        return p->lr;
    }
}

double lse_optim_lr(const lse_optim *o)
{
    return o != NULL ? lr_at(&o->opts, o->t) : NAN;
}

lse_status lse_optim_accumulate(lse_optim *o)
{
    static const char fn[] = "lse_optim_accumulate";
    if (o == NULL)
        return LSE_EFAULT;
    if (o->acc == NULL) {
        if (o->n > SIZE_MAX / LSE_XSUM_EXPORT / sizeof(double) - 1)
            return lse_graph_fail(o->g, LSE_ENOMEM, fn, "state too large");
        o->acc = calloc(o->n + 1, sizeof *o->acc);
        o->xbuf = calloc(o->n * LSE_XSUM_EXPORT + 1, sizeof *o->xbuf);
        if (o->acc == NULL || o->xbuf == NULL) {
            free(o->acc);
            free(o->xbuf);
            o->acc = NULL;
            o->xbuf = NULL;
            return lse_graph_fail(o->g, LSE_ENOMEM, fn, "out of memory");
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < o->n_nodes; i++) {
        const lse_node *node = o->nodes[i];
        const gsl_matrix *gr = node->grad;
        const int skip = (node->flags & LSE_NODE_CLAMPED) != 0;
        for (size_t r = 0; r < gr->size1; r++) {
            const double *q = gsl_matrix_const_ptr(gr, r, 0);
            for (size_t j = 0; j < gr->size2; j++, k++)
                if (!skip)
                    lse_xsum_add(&o->acc[k], q[j]);
        }
    }
    o->n_acc++;
    return LSE_OK;
}

size_t lse_optim_n_accumulated(const lse_optim *o)
{
    return o != NULL ? o->n_acc : 0;
}

/* gbuf = the accumulated exact sums, summed over the processes through the
 * hook (exports of integers: exact in any order), rounded once; the
 * accumulators are emptied. */
static lse_status take_accumulated(lse_optim *o, const char *fn)
{
    lse_status st = LSE_OK;
    const size_t ne = o->n * LSE_XSUM_EXPORT;
    if (o->reduce != NULL) {
        for (size_t k = 0; k < o->n; k++)
            lse_xsum_export(&o->acc[k], o->xbuf + k * LSE_XSUM_EXPORT);
        st = o->reduce(o->xbuf, ne, o->reduce_user);
        if (st != LSE_OK)
            st = lse_graph_fail(o->g, st, fn, "reduction hook failed: %s",
                                lse_strerror(st));
        for (size_t k = 0; st == LSE_OK && k < o->n; k++)
            if (lse_xsum_import(&o->acc[k], o->xbuf + k * LSE_XSUM_EXPORT) !=
                LSE_OK)
                st = lse_graph_fail(o->g, LSE_EDOM, fn,
                                    "the reduction hook did not sum the exact "
                                    "accumulators");
    }
    for (size_t k = 0; st == LSE_OK && k < o->n; k++)
        o->gbuf[k] = lse_xsum_round(&o->acc[k]);
    memset(o->acc, 0, o->n * sizeof *o->acc);
    o->n_acc = 0;
    return st;
}

lse_status lse_optim_step(lse_optim *o)
{
    static const char fn[] = "lse_optim_step";
    if (o == NULL)
        return LSE_EFAULT;
    const lse_optim_opts *p = &o->opts;
    size_t k0 = 0;
    if (o->n_acc > 0) {
        const lse_status st = take_accumulated(o, fn);
        if (st != LSE_OK)
            return st;
        goto reduced;
    }
    /* gather the gradients of the nodes that move (0 for clamped ones) */
    for (size_t i = 0; i < o->n_nodes; i++) {
        const lse_node *node = o->nodes[i];
        const gsl_matrix *gr = node->grad;
        const int skip = (node->flags & LSE_NODE_CLAMPED) != 0;
        for (size_t r = 0; r < gr->size1; r++) {
            const double *q = gsl_matrix_const_ptr(gr, r, 0);
            for (size_t j = 0; j < gr->size2; j++)
                o->gbuf[k0++] = skip ? 0.0 : q[j];
        }
    }
    if (o->reduce != NULL) {
        const lse_status rs = o->reduce(o->gbuf, o->n, o->reduce_user);
        if (rs != LSE_OK)
            return lse_graph_fail(o->g, rs, fn, "reduction hook failed: %s",
                                  lse_strerror(rs));
    }
reduced:;
    double s2 = 0.0;
    k0 = 0;
    for (size_t i = 0; i < o->n_nodes; i++) {
        const lse_node *node = o->nodes[i];
        const gsl_matrix *gr = node->grad;
        for (size_t r = 0; r < gr->size1; r++)
            for (size_t j = 0; j < gr->size2; j++, k0++) {
                const double q = o->gbuf[k0];
                if (!isfinite(q))
                    return lse_graph_fail(o->g, LSE_ENONFINITE, fn,
                                          "gradient of '%s'[%zu,%zu] is %g",
                                          node->name, r, j, q);
                s2 += q * q;
            }
    }
    const double norm = sqrt(s2);
    o->gnorm = norm;
    const double clip =
        (p->clip_norm > 0.0 && norm > p->clip_norm) ? p->clip_norm / norm : 1.0;
    const double lr = lr_at(p, o->t);
    o->t++;
    const double t = (double)o->t;
    const double wd = p->weight_decay;
    const double bc1 = 1.0 - pow(p->beta1, t), bc2 = 1.0 - pow(p->beta2, t);
    size_t k = 0;
    for (size_t i = 0; i < o->n_nodes; i++) {
        lse_node *node = o->nodes[i];
        gsl_matrix *val = node->value;
        if (node->flags & LSE_NODE_CLAMPED) {
            k += val->size1 * val->size2;
            continue;
        }
        for (size_t r = 0; r < val->size1; r++) {
            double *x = gsl_matrix_ptr(val, r, 0);
            for (size_t j = 0; j < val->size2; j++, k++) {
                double gj = clip * o->gbuf[k];
                switch (p->rule) {
                case LSE_OPTIM_SGD:
                    gj += wd * x[j];
                    if (p->momentum > 0.0) {
                        o->m[k] = o->t == 1 ? gj : p->momentum * o->m[k] + gj;
                        gj = p->nesterov ? gj + p->momentum * o->m[k] : o->m[k];
                    }
                    x[j] -= lr * gj;
                    break;
                case LSE_OPTIM_ADAMW:
                    x[j] *= 1.0 - lr * wd;
                    /* fall through: Adam without L2 */
                    /* FALLTHROUGH */
                case LSE_OPTIM_ADAM:
                case LSE_OPTIM_AMSGRAD: {
                    if (p->rule != LSE_OPTIM_ADAMW)
                        gj += wd * x[j];
                    o->m[k] = p->beta1 * o->m[k] + (1.0 - p->beta1) * gj;
                    o->v[k] = p->beta2 * o->v[k] + (1.0 - p->beta2) * gj * gj;
                    double vk = o->v[k];
                    if (p->rule == LSE_OPTIM_AMSGRAD) {
                        if (vk > o->vmax[k])
                            o->vmax[k] = vk;
                        vk = o->vmax[k];
                    }
                    x[j] -= lr * (o->m[k] / bc1) / (sqrt(vk / bc2) + p->eps);
                    break;
                }
                }
            }
        }
    }
    return LSE_OK;
}

void lse_optim_set_reduce(lse_optim *o, lse_reduce_fn fn, void *user)
{
    if (o != NULL) {
        o->reduce = fn;
        o->reduce_user = user;
    }
}

size_t lse_optim_n_step(const lse_optim *o) { return o ? o->t : 0; }
double lse_optim_grad_norm(const lse_optim *o) { return o ? o->gnorm : NAN; }
size_t lse_optim_n_nodes(const lse_optim *o) { return o ? o->n_nodes : 0; }
lse_node *lse_optim_node(const lse_optim *o, size_t i)
{
    return (o != NULL && i < o->n_nodes) ? o->nodes[i] : NULL;
}

size_t lse_optim_state_size(const lse_optim *o)
{
    return o != NULL ? 1 + 3 * o->n : 0;
}

lse_status lse_optim_state_get(const lse_optim *o, double *buf, size_t n)
{
    if (o == NULL || buf == NULL)
        return LSE_EFAULT;
    if (n != lse_optim_state_size(o))
        return lse_graph_fail(o->g, LSE_EDIM, "lse_optim_state_get",
                              "buffer of %zu doubles, want %zu", n,
                              lse_optim_state_size(o));
    buf[0] = (double)o->t;
    memcpy(buf + 1, o->m, o->n * sizeof *buf);
    memcpy(buf + 1 + o->n, o->v, o->n * sizeof *buf);
    memcpy(buf + 1 + 2 * o->n, o->vmax, o->n * sizeof *buf);
    return LSE_OK;
}

lse_status lse_optim_state_set(lse_optim *o, const double *buf, size_t n)
{
    static const char fn[] = "lse_optim_state_set";
    if (o == NULL || buf == NULL)
        return LSE_EFAULT;
    if (n != lse_optim_state_size(o))
        return lse_graph_fail(o->g, LSE_EDIM, fn,
                              "buffer of %zu doubles, want %zu", n,
                              lse_optim_state_size(o));
    if (!(buf[0] >= 0.0 && buf[0] <= 9007199254740992.0) ||
        buf[0] != floor(buf[0]))
        return lse_graph_fail(o->g, LSE_EDOM, fn,
                              "step count %g is not a non-negative integer",
                              buf[0]);
    for (size_t i = 1; i < n; i++) {
        if (!isfinite(buf[i]))
            return lse_graph_fail(o->g, LSE_EDOM, fn, "entry %zu is %g", i,
                                  buf[i]);
        if (i > o->n && buf[i] < 0.0)
            return lse_graph_fail(o->g, LSE_EDOM, fn,
                                  "second moment %zu is negative (%g)", i,
                                  buf[i]);
    }
    o->t = (size_t)buf[0];
    memcpy(o->m, buf + 1, o->n * sizeof *buf);
    memcpy(o->v, buf + 1 + o->n, o->n * sizeof *buf);
    memcpy(o->vmax, buf + 1 + 2 * o->n, o->n * sizeof *buf);
    return LSE_OK;
}

static int param_key(char *key, size_t len, const lse_node *node)
{
    const int w = snprintf(key, len, "param.%s", node->name);
    return w >= 0 && (size_t)w < len;
}

lse_status lse_optim_save_json(const lse_optim *o, lse_json *doc,
                               lse_error *err)
{
    static const char fn[] = "lse_optim_save_json";
    if (o == NULL || doc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL optimizer or document");
    const size_t ns = lse_optim_state_size(o);
    double *buf = malloc(ns * sizeof *buf);
    const char **names = calloc(o->n_nodes + 1, sizeof *names);
    lse_status st = LSE_OK;
    if (buf == NULL || names == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    lse_optim_state_get(o, buf, ns);
    for (size_t i = 0; i < o->n_nodes; i++)
        names[i] = o->nodes[i]->name;
    st = lse_json_set_string(doc, "optimizer", lse_optim_rule_name(o->opts.rule),
                             err);
    if (st == LSE_OK)
        st = lse_json_set_strings(doc, "nodes", names, o->n_nodes, err);
    gsl_vector_view sv = gsl_vector_view_array(buf, ns);
    if (st == LSE_OK)
        st = lse_json_set_vector(doc, "state", &sv.vector, err);
    for (size_t i = 0; st == LSE_OK && i < o->n_nodes; i++) {
        char key[300];
        if (!param_key(key, sizeof key, o->nodes[i])) {
            st = lse_error_set(err, LSE_EINVAL, fn, "node name too long");
            break;
        }
        st = lse_json_set_matrix(doc, key, o->nodes[i]->value, err);
    }
done:
    free(buf);
    free(names);
    return st;
}

lse_status lse_optim_load_json(lse_optim *o, const lse_json *doc,
                               lse_error *err)
{
    static const char fn[] = "lse_optim_load_json";
    if (o == NULL || doc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL optimizer or document");
    const char *rule = NULL;
    char **names = NULL;
    size_t n_names = 0;
    gsl_vector *state = NULL;
    gsl_matrix **vals = calloc(o->n_nodes + 1, sizeof *vals);
    lse_status st = vals == NULL
                        ? lse_error_set(err, LSE_ENOMEM, fn, "out of memory")
                        : lse_json_get_string(doc, "optimizer", &rule, err);
    if (st == LSE_OK && strcmp(rule, lse_optim_rule_name(o->opts.rule)) != 0)
        st = lse_error_set(err, LSE_EINVAL, fn,
                           "saved optimizer is '%s', this one is '%s'", rule,
                           lse_optim_rule_name(o->opts.rule));
    if (st == LSE_OK)
        st = lse_json_get_strings(doc, "nodes", &names, &n_names, err);
    if (st == LSE_OK && n_names != o->n_nodes)
        st = lse_error_set(err, LSE_EDIM, fn, "%zu saved nodes, %zu optimized",
                           n_names, o->n_nodes);
    for (size_t i = 0; st == LSE_OK && i < o->n_nodes; i++)
        if (strcmp(names[i], o->nodes[i]->name) != 0)
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "saved node %zu is '%s', optimized is '%s'", i,
                               names[i], o->nodes[i]->name);
    if (st == LSE_OK)
        st = lse_json_get_vector(doc, "state", lse_optim_state_size(o), &state,
                                 err);
    for (size_t i = 0; st == LSE_OK && i < o->n_nodes; i++) {
        char key[300];
        if (!param_key(key, sizeof key, o->nodes[i]))
            st = lse_error_set(err, LSE_EINVAL, fn, "node name too long");
        else
            st = lse_json_get_matrix(doc, key, o->nodes[i]->value->size1,
                                     o->nodes[i]->value->size2, &vals[i], err);
    }
    for (size_t i = 0; st == LSE_OK && i < o->n_nodes; i++)
        for (size_t r = 0; st == LSE_OK && r < vals[i]->size1; r++)
            for (size_t j = 0; j < vals[i]->size2; j++)
                if (!isfinite(gsl_matrix_get(vals[i], r, j))) {
                    st = lse_error_set(err, LSE_ENONFINITE, fn,
                                       "param.%s[%zu,%zu] is not finite",
                                       o->nodes[i]->name, r, j);
                    break;
                }
    if (st == LSE_OK) {
        /* the state first: it validates; then the values cannot fail */
        st = lse_optim_state_set(o, state->data, state->size);
        if (st != LSE_OK)
            lse_error_set(err, st, fn, "%s", lse_graph_errmsg(o->g));
    }
    for (size_t i = 0; st == LSE_OK && i < o->n_nodes; i++)
        gsl_matrix_memcpy(o->nodes[i]->value, vals[i]);
    for (size_t i = 0; vals != NULL && i < o->n_nodes; i++)
        gsl_matrix_free(vals[i]);
    free(vals);
    gsl_vector_free(state);
    free(names);
    return st;
}

/* ------------------------------------------------------------------ */
/* Mini-batches                                                        */

struct lse_batcher {
    size_t n_rows, batch, n_batches;
    uint64_t seed;
    int shuffle;
    size_t *perm;    /* permutation of the current epoch */
    size_t epoch;    /* of the current batch */
    size_t index;    /* of the current batch; SIZE_MAX: none yet */
    size_t next_epoch, next_index;
    size_t perm_epoch; /* epoch perm holds; SIZE_MAX: none */
};

/* splitmix64 (Steele, Lea and Flood 2014): a fixed, portable generator */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [0, n) by rejection */
static uint64_t below(uint64_t *s, uint64_t n)
{
    const uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do
        r = splitmix(s);
    while (r >= lim);
    return r % n;
}

static void make_perm(lse_batcher *b, size_t epoch)
{
    for (size_t i = 0; i < b->n_rows; i++)
        b->perm[i] = i;
    if (b->shuffle) {
        uint64_t s = b->seed ^ (0xd1b54a32d192ed03ULL * ((uint64_t)epoch + 1));
        (void)splitmix(&s);
        for (size_t i = b->n_rows; i > 1; i--) { /* Fisher-Yates */
            const size_t j = (size_t)below(&s, (uint64_t)i);
            const size_t tmp = b->perm[i - 1];
            b->perm[i - 1] = b->perm[j];
            b->perm[j] = tmp;
        }
    }
    b->perm_epoch = epoch;
}

lse_status lse_batcher_new(size_t n_rows, size_t batch, uint64_t seed,
                           int shuffle, lse_batcher **out, lse_error *err)
{
    static const char fn[] = "lse_batcher_new";
    lse_gsl_quiet();
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL out");
    *out = NULL;
    if (batch == 0 || batch > n_rows)
        return lse_error_set(err, LSE_EDOM, fn,
                             "batch of %zu rows over %zu rows: want 1..n_rows",
                             batch, n_rows);
    lse_batcher *b = calloc(1, sizeof *b);
    if (b == NULL || n_rows > SIZE_MAX / sizeof(size_t)) {
        free(b);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    b->perm = malloc(n_rows * sizeof *b->perm);
    if (b->perm == NULL) {
        free(b);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    b->n_rows = n_rows;
    b->batch = batch;
    b->n_batches = n_rows / batch;
    b->seed = seed;
    b->shuffle = shuffle != 0;
    b->index = SIZE_MAX;
    b->perm_epoch = SIZE_MAX;
    *out = b;
    return LSE_OK;
}

void lse_batcher_free(lse_batcher *b)
{
    if (b == NULL)
        return;
    free(b->perm);
    free(b);
}

lse_status lse_batcher_next(lse_batcher *b)
{
    if (b == NULL)
        return LSE_EFAULT;
    b->epoch = b->next_epoch;
    b->index = b->next_index;
    if (b->perm_epoch != b->epoch)
        make_perm(b, b->epoch);
    b->next_index = b->index + 1;
    b->next_epoch = b->epoch;
    if (b->next_index == b->n_batches) {
        b->next_index = 0;
        b->next_epoch++;
    }
    return LSE_OK;
}

lse_status lse_batcher_seek(lse_batcher *b, size_t epoch, size_t index)
{
    if (b == NULL)
        return LSE_EFAULT;
    if (index >= b->n_batches)
        return LSE_ERANGE;
    b->next_epoch = epoch;
    b->next_index = index;
    return LSE_OK;
}

const size_t *lse_batcher_rows(const lse_batcher *b)
{
    if (b == NULL || b->index == SIZE_MAX)
        return NULL;
    return b->perm + b->index * b->batch;
}

size_t lse_batcher_size(const lse_batcher *b) { return b ? b->batch : 0; }
size_t lse_batcher_n_batches(const lse_batcher *b)
{
    return b ? b->n_batches : 0;
}
size_t lse_batcher_epoch(const lse_batcher *b) { return b ? b->epoch : 0; }
size_t lse_batcher_index(const lse_batcher *b)
{
    return (b && b->index != SIZE_MAX) ? b->index : 0;
}

lse_status lse_batcher_gather(const lse_batcher *b, const gsl_matrix *src,
                              gsl_matrix *dst)
{
    if (b == NULL || src == NULL || dst == NULL)
        return LSE_EFAULT;
    const size_t *rows = lse_batcher_rows(b);
    if (rows == NULL)
        return LSE_EINVAL;
    if (src->size1 != b->n_rows || dst->size1 != b->batch ||
        dst->size2 != src->size2)
        return LSE_EDIM;
    for (size_t i = 0; i < b->batch; i++)
        memcpy(gsl_matrix_ptr(dst, i, 0), gsl_matrix_const_ptr(src, rows[i], 0),
               src->size2 * sizeof(double));
    return LSE_OK;
}

/* ------------------------------------------------------------------ */

lse_status lse_learn_step(lse_ode *infer, lse_optim *opt, double *energy)
{
    static const char fn[] = "lse_learn_step";
    if (opt == NULL)
        return LSE_EFAULT;
    lse_status st;
    if (infer != NULL) {
        if (lse_ode_graph(infer) != opt->g)
            return lse_graph_fail(opt->g, LSE_EINVAL, fn,
                                  "integrator and optimizer on different graphs");
        st = lse_ode_run(infer, NULL);
        if (st != LSE_OK)
            return st;
    }
    double e;
    st = lse_graph_gradient(opt->g, &e);
    if (st != LSE_OK)
        return st;
    if (energy != NULL)
        *energy = e;
    return lse_optim_step(opt);
}
