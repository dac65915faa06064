#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* IDW prototype classifier (the IDW paper sections 2-3; docs/models/idwnet.md).
 *
 *   graph  q (B, d) clamped, keys (P, d) param,
 *          LSE term "attention": child q, parent keys, sim = score
 *   model  values V (P, C); logits = A V with A = lse_term_softmax (B, P)
 *   loss   L = (1/b) sum_i [lse(logits_i) - logits_i,y_i] (rows i < b)
 *   grads  D = (softmax(logits) - Y) / b           (B, C), 0 on padding
 *          dL/dV = A' D                            (P, C)
 *          g = D V',  G_ij = A_ij (g_ij - sum_k A_ik g_ik)   (B, P)
 *          dL/dK = score->grad(q, K; G).parent     (P, d)
 */

#define PI 3.14159265358979323846

/* Everything whose size depends on the number of prototypes P. */
typedef struct parts {
    lse_graph *g;
    lse_node *q, *keys;
    lse_term *term;
    gsl_matrix *values; /* (P, C) */
    gsl_matrix *gm;     /* (B, P): g = D V', then G = dL/dS */
    gsl_matrix *dk;     /* (P, d) training scratch */
    gsl_matrix *dv;     /* (P, C) training scratch */
} parts;

struct lse_idwnet {
    parts p;
    const lse_sim_type *score;
    void *config; /* copy of the score's config, or NULL */
    size_t n_proto, dim, n_class, batch;
    gsl_matrix *logits; /* (B, C) */
    gsl_matrix *dlogit; /* (B, C) */
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
    gsl_matrix_free(p->values);
    gsl_matrix_free(p->gm);
    gsl_matrix_free(p->dk);
    gsl_matrix_free(p->dv);
    memset(p, 0, sizeof *p);
}

/* A graph and workspaces for P prototypes; keys and values zero. On
 * failure the graph's message (if any) is copied to msg. */
static lse_status parts_new(const lse_idwnet *m, size_t P, parts *p, char *msg,
                            size_t msg_len)
{
    memset(p, 0, sizeof *p);
    msg[0] = '\0';
    p->g = lse_graph_new();
    p->values = gsl_matrix_calloc(P, m->n_class);
    p->gm = gsl_matrix_alloc(m->batch, P);
    p->dk = gsl_matrix_alloc(P, m->dim);
    p->dv = gsl_matrix_alloc(P, m->n_class);
    if (p->g == NULL || p->values == NULL || p->gm == NULL || p->dk == NULL ||
        p->dv == NULL) {
        parts_free(p);
        return LSE_ENOMEM;
    }
    /* one block holds the whole batch: lse_term_sim_args needs that */
    lse_graph_set_block_rows(p->g, m->batch);
    lse_status st = lse_graph_add_node(p->g, "q", m->batch, m->dim,
                                       LSE_NODE_CLAMPED, &p->q);
    if (st == LSE_OK)
        st = lse_graph_add_node(p->g, "keys", P, m->dim, LSE_NODE_PARAM,
                                &p->keys);
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
    gsl_matrix_free(m->dlogit);
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
    m->dlogit = gsl_matrix_alloc(batch, n_class);
    if (m->logits == NULL || m->dlogit == NULL)
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
    return m != NULL ? m->p.values : NULL;
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

lse_status lse_idwnet_init(lse_idwnet *m, const gsl_matrix *x, double noise,
                           unsigned long seed)
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
    gsl_matrix_set_zero(m->p.values);
    return LSE_OK;
}

/* Copy rows idx[0..b) (or rows first .. first+b-1 when idx is NULL) of x
 * into the query node, padding with the first of them; evaluate the graph
 * (softmax A) and the logits A V (B, C). */
static lse_status run_batch(lse_idwnet *m, const gsl_matrix *x,
                            const size_t *idx, size_t first, size_t b,
                            const char *fn)
{
    gsl_matrix *q = lse_node_value(m->p.q);
    for (size_t r = 0; r < m->batch; r++) {
        const size_t src = r < b ? (idx != NULL ? idx[r] : first + r)
                                 : (idx != NULL ? idx[0] : first);
        gsl_vector_const_view row = gsl_matrix_const_row(x, src);
        gsl_matrix_set_row(q, r, &row.vector);
    }
    double e;
    lse_status st = lse_graph_energy(m->p.g, &e);
    if (st != LSE_OK)
        return graph_fail(m, st, fn);
    const gsl_matrix *a = lse_term_softmax(m->p.term);
    if (a == NULL)
        return fail(m, LSE_EINTERNAL, fn, "attention term has no softmax");
    const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, a,
                                  m->p.values, 0.0, m->logits);
    if (rc != GSL_SUCCESS)
        return fail(m, lse_status_from_gsl(rc), fn, "dgemm: %s",
                    lse_strerror(lse_status_from_gsl(rc)));
    return LSE_OK;
}

static size_t argmax_row(const gsl_matrix *l, size_t r)
{
    size_t best = 0;
    for (size_t k = 1; k < l->size2; k++)
        if (gsl_matrix_get(l, r, k) > gsl_matrix_get(l, r, best))
            best = k;
    return best;
}

/* Cross-entropy of the first b rows after run_batch: adds the summed loss
 * to *sum and the correct predictions to *correct; with want_d, fills
 * dlogit = (softmax - Y) * scale (rows >= b zero). */
static void batch_ce(lse_idwnet *m, const size_t *y, const size_t *idx,
                     size_t first, size_t b, double scale, int want_d,
                     double *sum, size_t *correct)
{
    const size_t C = m->n_class;
    if (want_d)
        gsl_matrix_set_zero(m->dlogit);
    for (size_t r = 0; r < b; r++) {
        const size_t label = y[idx != NULL ? idx[r] : first + r];
        const double *row = gsl_matrix_const_ptr(m->logits, r, 0);
        const double lse = lse_logsumexp(row, C, 1, 1.0);
        *sum += lse - row[label];
        if (correct != NULL && argmax_row(m->logits, r) == label)
            (*correct)++;
        if (!want_d)
            continue;
        double *d = gsl_matrix_ptr(m->dlogit, r, 0);
        for (size_t k = 0; k < C; k++)
            d[k] = scale * (exp(row[k] - lse) - (k == label ? 1.0 : 0.0));
    }
}

/* Gradients after batch_ce: dk = dL/dK, dv = dL/dV (each may be NULL). */
static lse_status batch_grad(lse_idwnet *m, gsl_matrix *dk, gsl_matrix *dv,
                             const char *fn)
{
    const gsl_matrix *a = lse_term_softmax(m->p.term);
    int rc = GSL_SUCCESS;
    if (dv != NULL)
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, a, m->dlogit, 0.0,
                            dv);
    if (rc != GSL_SUCCESS)
        return fail(m, lse_status_from_gsl(rc), fn, "dgemm failed");
    if (dk == NULL)
        return LSE_OK;
    /* g = D V' (B, P); then G_ij = A_ij (g_ij - sum_k A_ik g_ik) */
    gsl_matrix *gm = m->p.gm;
    rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, m->dlogit, m->p.values,
                        0.0, gm);
    if (rc != GSL_SUCCESS)
        return fail(m, lse_status_from_gsl(rc), fn, "dgemm failed");
    for (size_t i = 0; i < gm->size1; i++) {
        const double *ai = gsl_matrix_const_ptr(a, i, 0);
        double *gi = gsl_matrix_ptr(gm, i, 0);
        double mean = 0.0;
        for (size_t j = 0; j < gm->size2; j++)
            mean += ai[j] * gi[j];
        for (size_t j = 0; j < gm->size2; j++)
            gi[j] = ai[j] * (gi[j] - mean);
    }
    lse_sim_args args;
    lse_status st = lse_term_sim_args(m->p.term, &args);
    if (st != LSE_OK)
        return fail(m, st, fn, "lse_term_sim_args: %s", lse_strerror(st));
    gsl_matrix_set_zero(dk);
    const lse_sim_grads out = {
        .child = NULL, .parent = dk, .context = NULL, .param = NULL};
    st = m->score->grad(&args, gm, &out);
    if (st != LSE_OK)
        return fail(m, st, fn, "%s gradient kernel: %s", m->score->name,
                    lse_strerror(st));
    return LSE_OK;
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

lse_status lse_idwnet_loss_grad(lse_idwnet *m, const gsl_matrix *x,
                                const size_t *y, double *loss,
                                gsl_matrix *dkeys, gsl_matrix *dvalues)
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
        st = run_batch(m, x, NULL, 0, b, fn);
    if (st != LSE_OK)
        return st;
    double sum = 0.0;
    batch_ce(m, y, NULL, 0, b, 1.0 / (double)b, 1, &sum, NULL);
    *loss = sum / (double)b;
    return batch_grad(m, dkeys, dvalues, fn);
}

/* Loss sum, correct count and optionally logits/attention of all rows. */
static lse_status sweep(lse_idwnet *m, const gsl_matrix *x, const size_t *y,
                        gsl_matrix *logits, gsl_matrix *attn, size_t *labels,
                        double *sum, size_t *correct, const char *fn)
{
    const size_t n = x->size1;
    for (size_t first = 0; first < n; first += m->batch) {
        const size_t b = n - first < m->batch ? n - first : m->batch;
        lse_status st = run_batch(m, x, NULL, first, b, fn);
        if (st != LSE_OK)
            return st;
        if (y != NULL)
            batch_ce(m, y, NULL, first, b, 0.0, 0, sum, correct);
        const gsl_matrix *a = lse_term_softmax(m->p.term);
        for (size_t r = 0; r < b; r++) {
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

lse_status lse_idwnet_forward(lse_idwnet *m, const gsl_matrix *x,
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

lse_status lse_idwnet_evaluate(lse_idwnet *m, const gsl_matrix *x,
                               const size_t *y, double *loss, double *accuracy)
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

lse_status lse_idwnet_predict(lse_idwnet *m, const gsl_matrix *x,
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

/* Adam moments of one parameter matrix. */
typedef struct adam_state {
    gsl_matrix *m, *v, *vmax;
} adam_state;

static void adam_free(adam_state *a)
{
    gsl_matrix_free(a->m);
    gsl_matrix_free(a->v);
    gsl_matrix_free(a->vmax);
}

static int adam_alloc(adam_state *a, size_t r, size_t c)
{
    a->m = gsl_matrix_calloc(r, c);
    a->v = gsl_matrix_calloc(r, c);
    a->vmax = gsl_matrix_calloc(r, c);
    return a->m != NULL && a->v != NULL && a->vmax != NULL;
}

/* One (AMSGrad) Adam step at step number t >= 1 (PyTorch's form):
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; vmax = max(vmax, v);
 * theta -= lr / (1 - b1^t) * m / (sqrt(vmax / (1 - b2^t)) + eps). */
static void adam_step(adam_state *a, gsl_matrix *theta, const gsl_matrix *g,
                      const lse_idwnet_train_opts *o, double lr, size_t t)
{
    const double bc1 = 1.0 - pow(o->beta1, (double)t);
    const double bc2 = 1.0 - pow(o->beta2, (double)t);
    for (size_t i = 0; i < theta->size1; i++)
        for (size_t j = 0; j < theta->size2; j++) {
            const double gij = gsl_matrix_get(g, i, j);
            const double mij =
                o->beta1 * gsl_matrix_get(a->m, i, j) + (1 - o->beta1) * gij;
            const double vij = o->beta2 * gsl_matrix_get(a->v, i, j) +
                               (1 - o->beta2) * gij * gij;
            double vm = vij;
            if (o->amsgrad) {
                const double prev = gsl_matrix_get(a->vmax, i, j);
                vm = prev > vij ? prev : vij;
                gsl_matrix_set(a->vmax, i, j, vm);
            }
            gsl_matrix_set(a->m, i, j, mij);
            gsl_matrix_set(a->v, i, j, vij);
            const double upd = lr / bc1 * mij / (sqrt(vm / bc2) + o->adam_eps);
            *gsl_matrix_ptr(theta, i, j) -= upd;
        }
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

lse_status lse_idwnet_train(lse_idwnet *m, const gsl_matrix *x, const size_t *y,
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
    adam_state ak = {0}, av = {0};
    size_t *perm = malloc(n * sizeof *perm);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (perm == NULL || r == NULL || !adam_alloc(&ak, m->n_proto, m->dim) ||
        !adam_alloc(&av, m->n_proto, m->n_class)) {
        st = fail(m, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    gsl_rng_set(r, o.seed);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    st = lse_idwnet_evaluate(m, x, y, &rep.loss_before, NULL);
    if (st != LSE_OK)
        goto done;
    gsl_matrix *keys = lse_node_value(m->p.keys);
    for (size_t e = 0; e < o.epochs; e++) {
        const double lr =
            o.cosine
                ? 0.5 * o.lr * (1.0 + cos(PI * (double)e / (double)o.epochs))
                : o.lr;
        gsl_ran_shuffle(r, perm, n, sizeof *perm);
        double epoch_loss = 0.0;
        size_t n_batch = 0;
        for (size_t first = 0; first < n; first += m->batch) {
            const size_t b = n - first < m->batch ? n - first : m->batch;
            st = run_batch(m, x, perm + first, 0, b, fn);
            if (st != LSE_OK)
                goto done;
            double sum = 0.0;
            batch_ce(m, y, perm + first, 0, b, 1.0 / (double)b, 1, &sum, NULL);
            if (!isfinite(sum)) {
                st = fail(m, LSE_ENONFINITE, fn,
                          "loss is %g in epoch %zu (lower the learning rate)",
                          sum, e + 1);
                goto done;
            }
            st = batch_grad(m, m->p.dk, m->p.dv, fn);
            if (st != LSE_OK)
                goto done;
            rep.steps++;
            adam_step(&ak, keys, m->p.dk, &o, lr, rep.steps);
            adam_step(&av, m->p.values, m->p.dv, &o, lr, rep.steps);
            epoch_loss += sum / (double)b;
            n_batch++;
        }
        rep.epochs = e + 1;
        if (o.callback != NULL &&
            o.callback(m, e + 1, epoch_loss / (double)n_batch, o.user))
            break;
    }
    st = lse_idwnet_evaluate(m, x, y, &rep.loss_after, NULL);
done:
    free(perm);
    gsl_rng_free(r);
    adam_free(&ak);
    adam_free(&av);
    if (report != NULL)
        *report = rep;
    return st;
}

lse_status lse_idwnet_add_prototype(lse_idwnet *m, const gsl_vector *key,
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
    gsl_matrix_view kold = gsl_matrix_submatrix(keys, 0, 0, P, m->dim);
    gsl_matrix_view vold = gsl_matrix_submatrix(p.values, 0, 0, P, m->n_class);
    gsl_matrix_memcpy(&kold.matrix, lse_node_value(m->p.keys));
    gsl_matrix_memcpy(&vold.matrix, m->p.values);
    gsl_matrix_set_row(keys, P, key);
    gsl_matrix_set_row(p.values, P, value);
    parts_free(&m->p);
    m->p = p;
    m->n_proto = P + 1;
    return LSE_OK;
}

lse_status lse_idwnet_special_case(lse_idwnet *m, const gsl_vector *q, size_t c,
                                   double margin, double *eta, int *inserted)
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
    const gsl_matrix *v = m->p.values;
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
    st = lse_idwnet_add_prototype(m, q, value);
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
