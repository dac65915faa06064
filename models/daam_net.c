#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* DAAM trained on a task (docs/models/daam.md, "Trained on a task"): a
 * softmax classifier over DAAM-gated features,
 *
 *   graph  q (B, d) clamped, weights W (C, H d), delta and width (H K, d)
 *          params; LSE term "classify": child q, parent W,
 *          sim = gate over dot (lse_sim_gate), params delta, width
 *   model  logits = Phi(q) W', Phi the heads' gated features
 *   loss   lse_loss_xent (the term's softmax against the labels), steps by
 *          lse_optim (Adam) over seeded mini-batches (lse_batcher). */

struct lse_daam_net {
    lse_graph *g;
    lse_node *q, *w, *delta, *width;
    lse_term *term;
    lse_gate_config cfg;
    double *center, *scale; /* (d) the training columns' mean and sd */
    size_t n_head, n_gauss, dim, n_class, batch;
    size_t *lab; /* (B) */
    char errmsg[512];
};

static lse_status fail(lse_daam_net *m, lse_status st, const char *fn,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static lse_status fail(lse_daam_net *m, lse_status st, const char *fn,
                       const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    snprintf(m->errmsg, sizeof m->errmsg, "%s: %s", fn, buf);
    return st;
}

static lse_status graph_fail(lse_daam_net *m, lse_status st, const char *fn)
{
    const char *msg = lse_graph_errmsg(m->g);
    return fail(m, st, fn, "%s", msg[0] != '\0' ? msg : lse_strerror(st));
}

void lse_daam_net_free(lse_daam_net *m)
{
    if (m == NULL)
        return;
    lse_graph_free(m->g);
    free(m->center);
    free(m->scale);
    free(m->lab);
    free(m);
}

lse_status lse_daam_net_new(size_t n_head, size_t n_gauss, size_t n_class,
                            size_t batch, const gsl_matrix *x,
                            lse_daam_net **out, lse_error *err)
{
    static const char fn[] = "lse_daam_net_new";
    lse_gsl_quiet();
    if (out == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             out == NULL ? "out" : "data");
    *out = NULL;
    const size_t d = x->size2, n = x->size1;
    if (n_head == 0 || n_gauss == 0 || n_class == 0 || batch == 0 || d == 0 ||
        n == 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "n_head = %zu, n_gauss = %zu, n_class = %zu, "
                             "batch = %zu, data %zux%zu: all must be > 0",
                             n_head, n_gauss, n_class, batch, n, d);
    if (n_head > SIZE_MAX / n_gauss || d > SIZE_MAX / n_head / n_class)
        return lse_error_set(err, LSE_ENOMEM, fn, "sizes overflow");
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "data[%zu,%zu] is not finite", i, j);
    lse_daam_net *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    m->n_head = n_head;
    m->n_gauss = n_gauss;
    m->dim = d;
    m->n_class = n_class;
    m->batch = batch;
    m->center = malloc(d * sizeof *m->center);
    m->scale = malloc(d * sizeof *m->scale);
    m->lab = malloc(batch * sizeof *m->lab);
    m->g = lse_graph_new();
    if (m->center == NULL || m->scale == NULL || m->lab == NULL || m->g == NULL) {
        lse_daam_net_free(m);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    /* y = (x - mean) / sqrt(var + eps), the paper's normalisation with the
     * training columns' statistics (eps = LSE_DAAM_NET_EPS) */
    for (size_t j = 0; j < d; j++) {
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++)
            mean += gsl_matrix_get(x, i, j);
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - mean;
            var += t * t;
        }
        m->center[j] = mean;
        m->scale[j] = sqrt(var / (double)n + LSE_DAAM_NET_EPS);
    }
    m->cfg.base = lse_sim_dot;
    m->cfg.base_config = NULL;
    m->cfg.n_head = n_head;
    m->cfg.n_gauss = n_gauss;
    m->cfg.center = m->center;
    m->cfg.scale = m->scale;
    lse_graph *g = m->g;
    lse_graph_set_block_rows(g, batch);
    const size_t hk = n_head * n_gauss;
    lse_status st = lse_graph_add_node(g, "q", batch, d, LSE_NODE_CLAMPED, &m->q);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "weights", n_class, n_head * d,
                                LSE_NODE_PARAM, &m->w);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "delta", hk, d, LSE_NODE_PARAM, &m->delta);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "width", hk, d, LSE_NODE_PARAM, &m->width);
    if (st == LSE_OK) {
        gsl_matrix_set_all(lse_node_value(m->width), 1.0);
        lse_node *par[6] = {m->delta, m->width, NULL, NULL, NULL, NULL};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(m->q);
        spec.parent = lse_view_all(m->w);
        spec.sim = lse_sim_gate;
        spec.config = &m->cfg;
        spec.param = par;
        st = lse_graph_add_lse(g, "classify", &spec, &m->term);
    }
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "%s", lse_graph_errmsg(g));
        lse_daam_net_free(m);
        return st;
    }
    *out = m;
    return LSE_OK;
}

const char *lse_daam_net_errmsg(const lse_daam_net *m)
{
    return m != NULL ? m->errmsg : "";
}
lse_graph *lse_daam_net_graph(const lse_daam_net *m) { return m ? m->g : NULL; }
lse_term *lse_daam_net_term(const lse_daam_net *m) { return m ? m->term : NULL; }
lse_node *lse_daam_net_delta(const lse_daam_net *m) { return m ? m->delta : NULL; }
lse_node *lse_daam_net_width(const lse_daam_net *m) { return m ? m->width : NULL; }
lse_node *lse_daam_net_weights(const lse_daam_net *m) { return m ? m->w : NULL; }
const lse_gate_config *lse_daam_net_gate(const lse_daam_net *m)
{
    return m != NULL ? &m->cfg : NULL;
}

static lse_status lse_daam_net_init_impl(lse_daam_net *m, unsigned long seed)
{
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL)
        return fail(m, LSE_ENOMEM, "lse_daam_net_init", "out of memory");
    gsl_rng_set(r, seed);
    gsl_matrix *dl = lse_node_value(m->delta);
    for (size_t i = 0; i < dl->size1; i++)
        for (size_t j = 0; j < dl->size2; j++)
            gsl_matrix_set(dl, i, j, gsl_ran_gaussian(r, 1.0));
    gsl_rng_free(r);
    gsl_matrix_set_all(lse_node_value(m->width), 1.0);
    gsl_matrix_set_zero(lse_node_value(m->w));
    return LSE_OK;
}

lse_status lse_daam_net_init(lse_daam_net *m, unsigned long seed,
                             lse_error *err)
{
    return lse_util_report(err, lse_daam_net_init_impl(m, seed),
                           "lse_daam_net_init", lse_daam_net_errmsg(m));
}

static lse_status check_xy(lse_daam_net *m, const gsl_matrix *x,
                           const size_t *y, const char *fn)
{
    if (x == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL data");
    if (x->size2 != m->dim || x->size1 == 0)
        return fail(m, LSE_EDIM, fn, "data is %zux%zu, expected n x %zu",
                    x->size1, x->size2, m->dim);
    for (size_t i = 0; y != NULL && i < x->size1; i++)
        if (y[i] >= m->n_class)
            return fail(m, LSE_EINVAL, fn, "label %zu of row %zu >= %zu classes",
                        y[i], i, m->n_class);
    return LSE_OK;
}

static lse_status lse_daam_net_evaluate_impl(lse_daam_net *m,
                                             const gsl_matrix *x,
                                             const size_t *y, double *loss,
                                             double *accuracy)
{
    static const char fn[] = "lse_daam_net_evaluate";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    lse_status st = check_xy(m, x, y, fn);
    if (st == LSE_OK && y == NULL)
        st = fail(m, LSE_EFAULT, fn, "NULL labels");
    if (st != LSE_OK)
        return st;
    const size_t n = x->size1;
    gsl_matrix *q = lse_node_value(m->q);
    double sum = 0.0;
    size_t correct = 0;
    for (size_t first = 0; first < n; first += m->batch) {
        const size_t b = n - first < m->batch ? n - first : m->batch;
        for (size_t r = 0; r < m->batch; r++) { /* padding: row first, ignored */
            const size_t src = r < b ? first + r : first;
            gsl_vector_const_view row = gsl_matrix_const_row(x, src);
            gsl_matrix_set_row(q, r, &row.vector);
            m->lab[r] = r < b ? y[src] : LSE_LOSS_IGNORE;
        }
        double l;
        st = lse_loss_xent(m->term, m->lab, NULL, 1.0, 0, &l);
        if (st != LSE_OK)
            return graph_fail(m, st, fn);
        sum += l;
        const gsl_matrix *a = lse_term_softmax(m->term);
        for (size_t r = 0; r < b; r++) {
            size_t best = 0;
            for (size_t k = 1; k < m->n_class; k++)
                if (gsl_matrix_get(a, r, k) > gsl_matrix_get(a, r, best))
                    best = k;
            correct += best == y[first + r];
        }
    }
    if (loss != NULL)
        *loss = sum / (double)n;
    if (accuracy != NULL)
        *accuracy = (double)correct / (double)n;
    return LSE_OK;
}

lse_status lse_daam_net_evaluate(lse_daam_net *m, const gsl_matrix *x,
                                 const size_t *y, double *loss,
                                 double *accuracy, lse_error *err)
{
    return lse_util_report(err,
                           lse_daam_net_evaluate_impl(m, x, y, loss, accuracy),
                           "lse_daam_net_evaluate", lse_daam_net_errmsg(m));
}

lse_daam_net_train_opts lse_daam_net_train_opts_default(void)
{
    const lse_daam_net_train_opts o = {
        .epochs = 20, .lr = 0.01, .seed = 1, .train_gates = 1};
    return o;
}

static lse_status lse_daam_net_train_impl(lse_daam_net *m, const gsl_matrix *x,
                                          const size_t *y,
                                          const lse_daam_net_train_opts *opts,
                                          lse_daam_net_train_report *report)
{
    static const char fn[] = "lse_daam_net_train";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    const lse_daam_net_train_opts o =
        opts != NULL ? *opts : lse_daam_net_train_opts_default();
    lse_status st = check_xy(m, x, y, fn);
    if (st == LSE_OK && y == NULL)
        st = fail(m, LSE_EFAULT, fn, "NULL labels");
    if (st != LSE_OK)
        return st;
    if (!(o.lr > 0.0) || !isfinite(o.lr))
        return fail(m, LSE_EDOM, fn, "lr = %g, must be > 0", o.lr);
    if (x->size1 < m->batch)
        return fail(m, LSE_EDIM, fn, "%zu rows, fewer than the batch of %zu",
                    x->size1, m->batch);
    lse_daam_net_train_report rep = {.loss_before = NAN, .loss_after = NAN};
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = LSE_OPTIM_ADAM;
    oo.lr = o.lr;
    lse_optim *opt = lse_optim_new(m->g, &oo);
    lse_batcher *b = NULL;
    gsl_matrix *yl = gsl_matrix_alloc(x->size1, 1), *yb = gsl_matrix_alloc(m->batch, 1);
    lse_error e2;
    if (opt == NULL || yl == NULL || yb == NULL) {
        st = fail(m, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    if (!o.train_gates) { /* the classifier alone: gates as initialised */
        st = lse_optim_set_nodes(opt, &m->w, 1);
        if (st != LSE_OK) {
            st = graph_fail(m, st, fn);
            goto done;
        }
    }
    st = lse_batcher_new(x->size1, m->batch, o.seed, 1, &b, &e2);
    if (st != LSE_OK) {
        st = fail(m, st, fn, "%s", e2.message);
        goto done;
    }
    for (size_t i = 0; i < x->size1; i++)
        gsl_matrix_set(yl, i, 0, (double)y[i]);
    st = lse_daam_net_evaluate_impl(m, x, y, &rep.loss_before, NULL);
    const size_t steps = o.epochs * lse_batcher_n_batches(b);
    for (size_t s = 0; st == LSE_OK && s < steps; s++) {
        st = lse_batcher_next(b);
        if (st == LSE_OK)
            st = lse_batcher_gather(b, x, lse_node_value(m->q));
        if (st == LSE_OK)
            st = lse_batcher_gather(b, yl, yb);
        for (size_t r = 0; st == LSE_OK && r < m->batch; r++)
            m->lab[r] = (size_t)gsl_matrix_get(yb, r, 0);
        if (st == LSE_OK)
            st = lse_graph_zero_grad(m->g);
        if (st == LSE_OK)
            st = lse_loss_xent(m->term, m->lab, NULL, 1.0 / (double)m->batch,
                               1, NULL);
        if (st == LSE_OK)
            st = lse_optim_step(opt);
        if (st != LSE_OK) {
            st = graph_fail(m, st, fn);
            break;
        }
        rep.steps++;
    }
    if (st == LSE_OK)
        st = lse_daam_net_evaluate_impl(m, x, y, &rep.loss_after, NULL);
done:
    lse_batcher_free(b);
    lse_optim_free(opt);
    gsl_matrix_free(yl);
    gsl_matrix_free(yb);
    if (report != NULL)
        *report = rep;
    return st;
}

lse_status lse_daam_net_train(lse_daam_net *m, const gsl_matrix *x,
                              const size_t *y,
                              const lse_daam_net_train_opts *opts,
                              lse_daam_net_train_report *report, lse_error *err)
{
    return lse_util_report(err, lse_daam_net_train_impl(m, x, y, opts, report),
                           "lse_daam_net_train", lse_daam_net_errmsg(m));
}

static lse_status lse_daam_net_importance_impl(lse_daam_net *m,
                                               const gsl_matrix *x,
                                               gsl_vector *da, gsl_vector *imp)
{
    static const char fn[] = "lse_daam_net_importance";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    lse_status st = check_xy(m, x, NULL, fn);
    if (st != LSE_OK)
        return st;
    if (imp == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL importance vector");
    if (imp->size != m->dim || (da != NULL && da->size != m->dim))
        return fail(m, LSE_EDIM, fn, "vectors must have %zu entries", m->dim);
    const size_t H = m->n_head, d = m->dim;
    gsl_matrix *gates = gsl_matrix_alloc(x->size1, H * d);
    if (gates == NULL)
        return fail(m, LSE_ENOMEM, fn, "out of memory");
    st = lse_gate_features(&m->cfg, lse_node_value(m->delta),
                           lse_node_value(m->width), x, gates, NULL);
    if (st != LSE_OK) {
        gsl_matrix_free(gates);
        return fail(m, st, fn, "gates: %s (a zero width?)", lse_strerror(st));
    }
    double lo = INFINITY, hi = -INFINITY;
    for (size_t j = 0; j < d; j++) {
        double s = 0.0;
        for (size_t i = 0; i < x->size1; i++)
            for (size_t h = 0; h < H; h++)
                s += gsl_matrix_get(gates, i, h * d + j);
        s /= (double)(x->size1 * H);
        gsl_vector_set(imp, j, s);
        lo = fmin(lo, s);
        hi = fmax(hi, s);
    }
    gsl_matrix_free(gates);
    if (da != NULL)
        gsl_vector_memcpy(da, imp);
    for (size_t j = 0; j < d; j++)
        gsl_vector_set(imp, j,
                       hi > lo ? (gsl_vector_get(imp, j) - lo) / (hi - lo) : 1.0);
    return LSE_OK;
}

lse_status lse_daam_net_importance(lse_daam_net *m, const gsl_matrix *x,
                                   gsl_vector *da, gsl_vector *imp,
                                   lse_error *err)
{
    return lse_util_report(err, lse_daam_net_importance_impl(m, x, da, imp),
                           "lse_daam_net_importance", lse_daam_net_errmsg(m));
}
