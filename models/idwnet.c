#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* IDW prototype classifier (the IDW paper sections 2-3; docs/models/idwnet.md).
 *
 *   graph  q (B, d) clamped, keys (P, d) param, values (P, C) param,
 *          LSE term "attention": child q, parent keys, sim = score
 *   model  logits = A V with A = lse_term_softmax (B, P)
 *   loss   L = (1/b) sum_i [lse(logits_i) - logits_i,y_i] (rows i < b):
 *          lse_loss_readout_xent, whose chain rule fills dL/dK and dL/dV
 *          in the node gradients; lse_optim (AMSGrad) takes the steps.
 */

#define PI 3.14159265358979323846

/* Everything whose size depends on the number of prototypes P. */
typedef struct parts {
    lse_graph *g;
    lse_node *q, *keys, *values;
    lse_term *term;
} parts;

struct lse_idwnet {
    parts p;
    const lse_sim_type *score;
    void *config; /* copy of the score's config, or NULL */
    size_t n_proto, dim, n_class, batch;
    gsl_matrix *logits; /* (B, C) */
    size_t *lab;        /* (B) labels of the batch, LSE_LOSS_IGNORE on padding */
    char errmsg[512];
};

static lse_status fail(lse_idwnet *m, lse_status st, const char *fn,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static lse_status fail(lse_idwnet *m, lse_status st, const char *fn,
                       const char *fmt, ...)
{
    if (m == NULL)
        return st;
    va_list ap;
    va_start(ap, fmt);
    lse_util_vfail(m->errmsg, sizeof m->errmsg, st, fn, fmt, ap);
    va_end(ap);
    return st;
}

/* Forward a graph failure: its message already names the function. */
static lse_status graph_fail(lse_idwnet *m, lse_status st, const char *fn)
{
    const char *msg = lse_graph_errmsg(m->p.g);
    return fail(m, st, fn, "%s", msg[0] != '\0' ? msg : lse_strerror(st));
}

static void parts_free(parts *p)
{
    lse_graph_free(p->g);
    memset(p, 0, sizeof *p);
}

/* A graph for P prototypes; keys and values zero. On failure the graph's
 * message (if any) is copied to msg. */
static lse_status parts_new(const lse_idwnet *m, size_t P, parts *p, char *msg,
                            size_t msg_len)
{
    memset(p, 0, sizeof *p);
    msg[0] = '\0';
    p->g = lse_graph_new();
    if (p->g == NULL)
        return LSE_ENOMEM;
    /* one block holds the whole batch */
    lse_graph_set_block_rows(p->g, m->batch);
    lse_status st = lse_graph_add_node(p->g, "q", m->batch, m->dim,
                                       LSE_NODE_CLAMPED, &p->q);
    if (st == LSE_OK)
        st = lse_graph_add_node(p->g, "keys", P, m->dim, LSE_NODE_PARAM,
                                &p->keys);
    if (st == LSE_OK)
        st = lse_graph_add_node(p->g, "values", P, m->n_class, LSE_NODE_PARAM,
                                &p->values);
    if (st == LSE_OK) {
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(p->q);
        spec.parent = lse_view_all(p->keys);
        spec.sim = m->score;
        spec.config = m->config;
        st = lse_graph_add_lse(p->g, "attention", &spec, &p->term);
    }
    if (st != LSE_OK) {
        snprintf(msg, msg_len, "%s", lse_graph_errmsg(p->g));
        parts_free(p);
    }
    return st;
}

void lse_idwnet_free(lse_idwnet *m)
{
    if (m == NULL)
        return;
    parts_free(&m->p);
    free(m->config);
    gsl_matrix_free(m->logits);
    free(m->lab);
    free(m);
}

lse_status lse_idwnet_new(size_t n_proto, size_t dim, size_t n_class,
                          const lse_sim_type *score, const void *config,
                          size_t batch, lse_idwnet **out, lse_error *err)
{
    static const char fn[] = "lse_idwnet_new";
    lse_gsl_quiet();
    if (out == NULL || score == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL %s", fn,
                                  out == NULL ? "out" : "score");
    *out = NULL;
    if (n_proto == 0 || dim == 0 || n_class == 0 || batch == 0)
        return lse_util_set_error(
            err, LSE_EINVAL,
            "%s: n_proto = %zu, dim = %zu, n_class = %zu, batch = "
            "%zu: all must be > 0",
            fn, n_proto, dim, n_class, batch);
    if (score->n_param != 0)
        return lse_util_set_error(
            err, LSE_EINVAL,
            "%s: score '%s' takes %zu parameter nodes; only "
            "parameter-free scores are supported",
            fn, score->name, score->n_param);
    lse_idwnet *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    m->score = score;
    m->n_proto = n_proto;
    m->dim = dim;
    m->n_class = n_class;
    m->batch = batch;
    if (config != NULL && score->config_size > 0) {
        m->config = malloc(score->config_size);
        if (m->config == NULL)
            goto nomem;
        memcpy(m->config, config, score->config_size);
    }
    m->logits = gsl_matrix_alloc(batch, n_class);
    m->lab = malloc(batch * sizeof *m->lab);
    if (m->logits == NULL || m->lab == NULL)
        goto nomem;
    char msg[512];
    const lse_status st = parts_new(m, n_proto, &m->p, msg, sizeof msg);
    if (st != LSE_OK) {
        lse_util_set_error(err, st, "%s: %s", fn,
                           msg[0] != '\0' ? msg : lse_strerror(st));
        lse_idwnet_free(m);
        return st;
    }
    *out = m;
    return LSE_OK;
nomem:
    lse_idwnet_free(m);
    return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
}

const char *lse_idwnet_errmsg(const lse_idwnet *m)
{
    return m != NULL ? m->errmsg : "";
}

lse_graph *lse_idwnet_graph(const lse_idwnet *m)
{
    return m != NULL ? m->p.g : NULL;
}

lse_term *lse_idwnet_term(const lse_idwnet *m)
{
    return m != NULL ? m->p.term : NULL;
}

gsl_matrix *lse_idwnet_keys(lse_idwnet *m)
{
    return m != NULL ? lse_node_value(m->p.keys) : NULL;
}

gsl_matrix *lse_idwnet_values(lse_idwnet *m)
{
    return m != NULL ? lse_node_value(m->p.values) : NULL;
}

size_t lse_idwnet_n_proto(const lse_idwnet *m)
{
    return m != NULL ? m->n_proto : 0;
}

size_t lse_idwnet_dim(const lse_idwnet *m) { return m != NULL ? m->dim : 0; }

size_t lse_idwnet_n_class(const lse_idwnet *m)
{
    return m != NULL ? m->n_class : 0;
}

size_t lse_idwnet_batch(const lse_idwnet *m)
{
    return m != NULL ? m->batch : 0;
}

static lse_status lse_idwnet_init_impl(lse_idwnet *m, const gsl_matrix *x,
                                       double noise, unsigned long seed)
{
    static const char fn[] = "lse_idwnet_init";
    if (m == NULL || x == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL data");
    m->errmsg[0] = '\0';
    if (x->size2 != m->dim || x->size1 == 0)
        return fail(m, LSE_EDIM, fn, "data is %zux%zu, expected n x %zu",
                    x->size1, x->size2, m->dim);
    if (!(noise >= 0.0) || !isfinite(noise))
        return fail(m, LSE_EDOM, fn, "noise = %g, must be finite and >= 0",
                    noise);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL)
        return fail(m, LSE_ENOMEM, fn, "out of memory");
    gsl_rng_set(r, seed);
    gsl_matrix *keys = lse_node_value(m->p.keys);
    const double n = (double)x->size1;
    for (size_t j = 0; j < m->dim; j++) {
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < x->size1; i++)
            mean += gsl_matrix_get(x, i, j);
        mean /= n;
        for (size_t i = 0; i < x->size1; i++) {
            const double dv = gsl_matrix_get(x, i, j) - mean;
            var += dv * dv;
        }
        const double sd = noise * sqrt(var / n);
        for (size_t k = 0; k < m->n_proto; k++)
            gsl_matrix_set(keys, k, j, mean + gsl_ran_gaussian(r, sd));
    }
    gsl_rng_free(r);
    gsl_matrix_set_zero(lse_node_value(m->p.values));
    return LSE_OK;
}

lse_status lse_idwnet_init(lse_idwnet *m, const gsl_matrix *x, double noise,
                           unsigned long seed, lse_error *err)
{
    return lse_util_report(err, lse_idwnet_init_impl(m, x, noise, seed),
                           "lse_idwnet_init", lse_idwnet_errmsg(m));
}

/* Copy rows idx[0..b) (or rows first .. first+b-1 when idx is NULL) of x
 * into the query node, padding with the first of them (label ignored),
 * and evaluate the logits A V and the cross-entropy of the b rows against
 * y (NULL: no labels, loss 0) times scale; with want_grad, add its
 * gradient into the node gradients (lse_loss_readout_xent). */
static lse_status run_batch(lse_idwnet *m, const gsl_matrix *x,
                            const size_t *y, const size_t *idx, size_t first,
                            size_t b, double scale, int want_grad,
                            double *loss, const char *fn)
{
    gsl_matrix *q = lse_node_value(m->p.q);
    for (size_t r = 0; r < m->batch; r++) {
        const size_t src = r < b ? (idx != NULL ? idx[r] : first + r)
                                 : (idx != NULL ? idx[0] : first);
        gsl_vector_const_view row = gsl_matrix_const_row(x, src);
        gsl_matrix_set_row(q, r, &row.vector);
        m->lab[r] = (r < b && y != NULL) ? y[src] : LSE_LOSS_IGNORE;
    }
    const lse_status st = lse_loss_readout_xent(
        m->p.term, lse_view_all(m->p.values), m->lab, NULL, scale, want_grad,
        loss, m->logits);
    return st != LSE_OK ? graph_fail(m, st, fn) : LSE_OK;
}

static size_t argmax_row(const gsl_matrix *l, size_t r)
{
    size_t best = 0;
    for (size_t k = 1; k < l->size2; k++)
        if (gsl_matrix_get(l, r, k) > gsl_matrix_get(l, r, best))
            best = k;
    return best;
}

static lse_status check_labels(lse_idwnet *m, const size_t *y, size_t n,
                               const char *fn)
{
    for (size_t i = 0; i < n; i++)
        if (y[i] >= m->n_class)
            return fail(m, LSE_EINVAL, fn,
                        "label %zu of row %zu >= %zu classes", y[i], i,
                        m->n_class);
    return LSE_OK;
}

static lse_status check_x(lse_idwnet *m, const gsl_matrix *x, const char *fn)
{
    if (x == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL data");
    if (x->size2 != m->dim || x->size1 == 0)
        return fail(m, LSE_EDIM, fn, "data is %zux%zu, expected n x %zu",
                    x->size1, x->size2, m->dim);
    return LSE_OK;
}

static lse_status lse_idwnet_loss_grad_impl(lse_idwnet *m, const gsl_matrix *x,
                                            const size_t *y, double *loss,
                                            gsl_matrix *dkeys,
                                            gsl_matrix *dvalues)
{
    static const char fn[] = "lse_idwnet_loss_grad";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    lse_status st = check_x(m, x, fn);
    if (st != LSE_OK)
        return st;
    if (y == NULL || loss == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL labels or loss");
    const size_t b = x->size1;
    if (b > m->batch)
        return fail(m, LSE_EDIM, fn, "%zu rows, more than the batch of %zu", b,
                    m->batch);
    if ((dkeys != NULL &&
         (dkeys->size1 != m->n_proto || dkeys->size2 != m->dim)) ||
        (dvalues != NULL &&
         (dvalues->size1 != m->n_proto || dvalues->size2 != m->n_class)))
        return fail(m, LSE_EDIM, fn,
                    "gradients must be %zux%zu (keys) and %zux%zu (values)",
                    m->n_proto, m->dim, m->n_proto, m->n_class);
    st = check_labels(m, y, b, fn);
    if (st == LSE_OK)
        st = lse_graph_zero_grad(m->p.g);
    if (st == LSE_OK)
        st = run_batch(m, x, y, NULL, 0, b, 1.0 / (double)b, 1, loss, fn);
    if (st != LSE_OK)
        return st;
    if (dkeys != NULL)
        gsl_matrix_memcpy(dkeys, lse_node_grad(m->p.keys));
    if (dvalues != NULL)
        gsl_matrix_memcpy(dvalues, lse_node_grad(m->p.values));
    return LSE_OK;
}

lse_status lse_idwnet_loss_grad(lse_idwnet *m, const gsl_matrix *x,
                                const size_t *y, double *loss,
                                gsl_matrix *dkeys, gsl_matrix *dvalues,
                                lse_error *err)
{
    return lse_util_report(
        err, lse_idwnet_loss_grad_impl(m, x, y, loss, dkeys, dvalues),
        "lse_idwnet_loss_grad", lse_idwnet_errmsg(m));
}

/* Loss sum, correct count and optionally logits/attention of all rows. */
static lse_status sweep(lse_idwnet *m, const gsl_matrix *x, const size_t *y,
                        gsl_matrix *logits, gsl_matrix *attn, size_t *labels,
                        double *sum, size_t *correct, const char *fn)
{
    const size_t n = x->size1;
    for (size_t first = 0; first < n; first += m->batch) {
        const size_t b = n - first < m->batch ? n - first : m->batch;
        double l = 0.0;
        lse_status st = run_batch(m, x, y, NULL, first, b, 1.0, 0, &l, fn);
        if (st != LSE_OK)
            return st;
        const gsl_matrix *a = lse_term_softmax(m->p.term);
        if (sum != NULL)
            *sum += l;
        for (size_t r = 0; r < b; r++) {
            if (correct != NULL && argmax_row(m->logits, r) == y[first + r])
                (*correct)++;
            if (labels != NULL)
                labels[first + r] = argmax_row(m->logits, r);
            if (logits != NULL) {
                gsl_vector_const_view lr = gsl_matrix_const_row(m->logits, r);
                gsl_matrix_set_row(logits, first + r, &lr.vector);
            }
            if (attn != NULL) {
                gsl_vector_const_view ar = gsl_matrix_const_row(a, r);
                gsl_matrix_set_row(attn, first + r, &ar.vector);
            }
        }
    }
    return LSE_OK;
}

static lse_status lse_idwnet_forward_impl(lse_idwnet *m, const gsl_matrix *x,
                                          gsl_matrix *logits, gsl_matrix *attn)
{
    static const char fn[] = "lse_idwnet_forward";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    lse_status st = check_x(m, x, fn);
    if (st != LSE_OK)
        return st;
    if (logits == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL logits");
    if (logits->size1 != x->size1 || logits->size2 != m->n_class ||
        (attn != NULL &&
         (attn->size1 != x->size1 || attn->size2 != m->n_proto)))
        return fail(m, LSE_EDIM, fn,
                    "logits must be %zux%zu and attention %zux%zu", x->size1,
                    m->n_class, x->size1, m->n_proto);
    return sweep(m, x, NULL, logits, attn, NULL, NULL, NULL, fn);
}

lse_status lse_idwnet_forward(lse_idwnet *m, const gsl_matrix *x,
                              gsl_matrix *logits, gsl_matrix *attn,
                              lse_error *err)
{
    return lse_util_report(err, lse_idwnet_forward_impl(m, x, logits, attn),
                           "lse_idwnet_forward", lse_idwnet_errmsg(m));
}

static lse_status lse_idwnet_evaluate_impl(lse_idwnet *m, const gsl_matrix *x,
                                           const size_t *y, double *loss,
                                           double *accuracy)
{
    static const char fn[] = "lse_idwnet_evaluate";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    lse_status st = check_x(m, x, fn);
    if (st != LSE_OK)
        return st;
    if (y == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL labels");
    st = check_labels(m, y, x->size1, fn);
    double sum = 0.0;
    size_t correct = 0;
    if (st == LSE_OK)
        st = sweep(m, x, y, NULL, NULL, NULL, &sum, &correct, fn);
    if (st != LSE_OK)
        return st;
    if (loss != NULL)
        *loss = sum / (double)x->size1;
    if (accuracy != NULL)
        *accuracy = (double)correct / (double)x->size1;
    return LSE_OK;
}

lse_status lse_idwnet_evaluate(lse_idwnet *m, const gsl_matrix *x,
                               const size_t *y, double *loss, double *accuracy,
                               lse_error *err)
{
    return lse_util_report(err,
                           lse_idwnet_evaluate_impl(m, x, y, loss, accuracy),
                           "lse_idwnet_evaluate", lse_idwnet_errmsg(m));
}

static lse_status lse_idwnet_predict_impl(lse_idwnet *m, const gsl_matrix *x,
                                          size_t *labels)
{
    static const char fn[] = "lse_idwnet_predict";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    lse_status st = check_x(m, x, fn);
    if (st != LSE_OK)
        return st;
    if (labels == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL labels");
    return sweep(m, x, NULL, NULL, NULL, labels, NULL, NULL, fn);
}

lse_status lse_idwnet_predict(lse_idwnet *m, const gsl_matrix *x,
                              size_t *labels, lse_error *err)
{
    return lse_util_report(err, lse_idwnet_predict_impl(m, x, labels),
                           "lse_idwnet_predict", lse_idwnet_errmsg(m));
}

lse_idwnet_train_opts lse_idwnet_train_opts_default(void)
{
    const lse_idwnet_train_opts o = {.epochs = 20,
                                     .lr = 1e-3,
                                     .beta1 = 0.9,
                                     .beta2 = 0.999,
                                     .adam_eps = 1e-8,
                                     .amsgrad = 1,
                                     .cosine = 1,
                                     .seed = 1,
                                     .callback = NULL,
                                     .user = NULL};
    return o;
}

static lse_status
check_train_opts(lse_idwnet *m, const lse_idwnet_train_opts *o, const char *fn)
{
    if (!(o->lr > 0.0) || !isfinite(o->lr) || !(o->beta1 >= 0.0) ||
        !(o->beta1 < 1.0) || !(o->beta2 >= 0.0) || !(o->beta2 < 1.0) ||
        !(o->adam_eps > 0.0) || !isfinite(o->adam_eps))
        return fail(m, LSE_EDOM, fn,
                    "lr = %g, beta1 = %g, beta2 = %g, adam_eps = %g: need lr "
                    "> 0, 0 <= beta < 1, adam_eps > 0",
                    o->lr, o->beta1, o->beta2, o->adam_eps);
    return LSE_OK;
}

static lse_status lse_idwnet_train_impl(lse_idwnet *m, const gsl_matrix *x,
                                        const size_t *y,
                                        const lse_idwnet_train_opts *opts,
                                        lse_idwnet_train_report *report)
{
    static const char fn[] = "lse_idwnet_train";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    const lse_idwnet_train_opts o =
        opts != NULL ? *opts : lse_idwnet_train_opts_default();
    lse_status st = check_x(m, x, fn);
    if (st != LSE_OK)
        return st;
    if (y == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL labels");
    st = check_train_opts(m, &o, fn);
    if (st == LSE_OK)
        st = check_labels(m, y, x->size1, fn);
    if (st != LSE_OK)
        return st;
    const size_t n = x->size1;
    lse_idwnet_train_report rep = {.loss_before = NAN, .loss_after = NAN};
    /* the optimizer: AMSGrad (or Adam) over keys and values, the learning
     * rate of each epoch set before its first step */
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = o.amsgrad ? LSE_OPTIM_AMSGRAD : LSE_OPTIM_ADAM;
    oo.lr = o.lr;
    oo.beta1 = o.beta1;
    oo.beta2 = o.beta2;
    oo.eps = o.adam_eps;
    size_t *perm = malloc(n * sizeof *perm);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    lse_optim *opt = NULL;
    if (perm == NULL || r == NULL) {
        st = fail(m, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    opt = lse_optim_new(m->p.g, &oo);
    if (opt == NULL) {
        st = graph_fail(m, LSE_ENOMEM, fn);
        goto done;
    }
    gsl_rng_set(r, o.seed);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    st = lse_idwnet_evaluate_impl(m, x, y, &rep.loss_before, NULL);
    if (st != LSE_OK)
        goto done;
    for (size_t e = 0; e < o.epochs; e++) {
        oo.lr = o.cosine ? 0.5 * o.lr *
                               (1.0 + cos(PI * (double)e / (double)o.epochs))
                         : o.lr;
        if (!(oo.lr > 0.0)) /* cos(pi e / E) = -1 never happens for e < E */
            oo.lr = DBL_MIN;
        st = lse_optim_set_opts(opt, &oo);
        if (st != LSE_OK) {
            st = graph_fail(m, st, fn);
            goto done;
        }
        gsl_ran_shuffle(r, perm, n, sizeof *perm);
        double epoch_loss = 0.0;
        size_t n_batch = 0;
        for (size_t first = 0; first < n; first += m->batch) {
            const size_t b = n - first < m->batch ? n - first : m->batch;
            double l;
            st = lse_graph_zero_grad(m->p.g);
            if (st == LSE_OK)
                st = run_batch(m, x, y, perm + first, 0, b, 1.0 / (double)b, 1,
                               &l, fn);
            if (st == LSE_ENONFINITE) {
                st = fail(m, st, fn, "the loss is not finite in epoch %zu "
                                     "(lower the learning rate)",
                          e + 1);
                goto done;
            }
            if (st == LSE_OK) {
                st = lse_optim_step(opt);
                if (st != LSE_OK)
                    st = graph_fail(m, st, fn);
            }
            if (st != LSE_OK)
                goto done;
            rep.steps++;
            epoch_loss += l;
            n_batch++;
        }
        rep.epochs = e + 1;
        if (o.callback != NULL &&
            o.callback(m, e + 1, epoch_loss / (double)n_batch, o.user))
            break;
    }
    st = lse_idwnet_evaluate_impl(m, x, y, &rep.loss_after, NULL);
done:
    free(perm);
    gsl_rng_free(r);
    lse_optim_free(opt);
    if (report != NULL)
        *report = rep;
    return st;
}

lse_status lse_idwnet_train(lse_idwnet *m, const gsl_matrix *x, const size_t *y,
                            const lse_idwnet_train_opts *opts,
                            lse_idwnet_train_report *report, lse_error *err)
{
    return lse_util_report(err, lse_idwnet_train_impl(m, x, y, opts, report),
                           "lse_idwnet_train", lse_idwnet_errmsg(m));
}

static lse_status lse_idwnet_add_prototype_impl(lse_idwnet *m,
                                                const gsl_vector *key,
                                                const gsl_vector *value)
{
    static const char fn[] = "lse_idwnet_add_prototype";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (key == NULL || value == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL key or value");
    if (key->size != m->dim || value->size != m->n_class)
        return fail(m, LSE_EDIM, fn,
                    "key has %zu entries, value %zu; expected %zu and %zu",
                    key->size, value->size, m->dim, m->n_class);
    for (size_t j = 0; j < key->size; j++)
        if (!isfinite(gsl_vector_get(key, j)))
            return fail(m, LSE_ENONFINITE, fn, "key[%zu] is not finite", j);
    for (size_t j = 0; j < value->size; j++)
        if (!isfinite(gsl_vector_get(value, j)))
            return fail(m, LSE_ENONFINITE, fn, "value[%zu] is not finite", j);
    const size_t P = m->n_proto;
    parts p;
    char msg[512];
    const lse_status st = parts_new(m, P + 1, &p, msg, sizeof msg);
    if (st != LSE_OK)
        return fail(m, st, fn, "%s", msg[0] != '\0' ? msg : lse_strerror(st));
    gsl_matrix *keys = lse_node_value(p.keys);
    gsl_matrix *values = lse_node_value(p.values);
    gsl_matrix_view kold = gsl_matrix_submatrix(keys, 0, 0, P, m->dim);
    gsl_matrix_view vold = gsl_matrix_submatrix(values, 0, 0, P, m->n_class);
    gsl_matrix_memcpy(&kold.matrix, lse_node_value(m->p.keys));
    gsl_matrix_memcpy(&vold.matrix, lse_node_value(m->p.values));
    gsl_matrix_set_row(keys, P, key);
    gsl_matrix_set_row(values, P, value);
    parts_free(&m->p);
    m->p = p;
    m->n_proto = P + 1;
    return LSE_OK;
}

lse_status lse_idwnet_add_prototype(lse_idwnet *m, const gsl_vector *key,
                                    const gsl_vector *value, lse_error *err)
{
    return lse_util_report(err, lse_idwnet_add_prototype_impl(m, key, value),
                           "lse_idwnet_add_prototype", lse_idwnet_errmsg(m));
}

static lse_status lse_idwnet_special_case_impl(lse_idwnet *m,
                                               const gsl_vector *q, size_t c,
                                               double margin, double *eta,
                                               int *inserted)
{
    static const char fn[] = "lse_idwnet_special_case";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (eta != NULL)
        *eta = 0.0;
    if (inserted != NULL)
        *inserted = 0;
    if (q == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL query");
    if (q->size != m->dim)
        return fail(m, LSE_EDIM, fn, "query has %zu entries, expected %zu",
                    q->size, m->dim);
    if (m->score != lse_sim_idw)
        return fail(m, LSE_EINVAL, fn,
                    "equation 7 needs the idw score, the network uses '%s'",
                    m->score->name);
    if (c >= m->n_class)
        return fail(m, LSE_EINVAL, fn, "class %zu >= %zu classes", c,
                    m->n_class);
    if (!(margin >= 0.0) || !isfinite(margin))
        return fail(m, LSE_EDOM, fn, "margin = %g, must be finite and >= 0",
                    margin);
    const lse_dist_config *cfg = lse_term_config(m->p.term);
    if (cfg == NULL)
        return fail(m, LSE_EINTERNAL, fn, "idw term without config");
    const double p = cfg->p, eps = cfg->eps;
    /* Shepard weights w_j = 1 / (eps + d_j^p) and their sum W */
    const gsl_matrix *keys = lse_node_value(m->p.keys);
    const gsl_matrix *v = lse_node_value(m->p.values);
    const size_t P = m->n_proto, C = m->n_class;
    double wsum = 0.0;
    gsl_vector *w = gsl_vector_alloc(P);
    gsl_vector *l = gsl_vector_calloc(C);
    gsl_vector *value = gsl_vector_calloc(C);
    lse_status st = LSE_OK;
    if (w == NULL || l == NULL || value == NULL) {
        st = fail(m, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < P; j++) {
        double d2 = 0.0;
        for (size_t k = 0; k < m->dim; k++) {
            const double t = gsl_vector_get(q, k) - gsl_matrix_get(keys, j, k);
            d2 += t * t;
        }
        const double u = p == 2.0 ? d2 : pow(d2, 0.5 * p);
        gsl_vector_set(w, j, 1.0 / (eps + u));
        wsum += 1.0 / (eps + u);
    }
    /* sigma' over the P old keys when the new one sits at distance 0 */
    const double denom = wsum + 1.0 / eps;
    for (size_t j = 0; j < P; j++)
        for (size_t k = 0; k < C; k++)
            *gsl_vector_ptr(l, k) +=
                gsl_vector_get(w, j) / denom * gsl_matrix_get(v, j, k);
    size_t best = 0;
    for (size_t k = 1; k < C; k++)
        if (gsl_vector_get(l, k) > gsl_vector_get(l, best))
            best = k;
    if (best == c)
        goto done; /* already predicted: nothing to add */
    double rival = -INFINITY;
    for (size_t k = 0; k < C; k++)
        if (k != c && gsl_vector_get(l, k) > rival)
            rival = gsl_vector_get(l, k);
    const double scale = 1.0 + eps * wsum;
    const double e = scale * (rival - gsl_vector_get(l, c)) + scale * margin;
    gsl_vector_set(value, c, e);
    st = lse_idwnet_add_prototype_impl(m, q, value);
    if (st != LSE_OK)
        goto done;
    if (eta != NULL)
        *eta = e;
    if (inserted != NULL)
        *inserted = 1;
done:
    gsl_vector_free(w);
    gsl_vector_free(l);
    gsl_vector_free(value);
    return st;
}

lse_status lse_idwnet_special_case(lse_idwnet *m, const gsl_vector *q, size_t c,
                                   double margin, double *eta, int *inserted,
                                   lse_error *err)
{
    return lse_util_report(
        err, lse_idwnet_special_case_impl(m, q, c, margin, eta, inserted),
        "lse_idwnet_special_case", lse_idwnet_errmsg(m));
}
