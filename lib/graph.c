#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"
#include "kernels-private.h"
#include "size-private.h"
#include "threads-private.h"
#include "rows-private.h"

/* The graph: a container of nodes and terms, and the sum of their energies.
 * The energy/gradient of each kind of term lives in its own file (LSE
 * terms lib/term.c, custom terms lib/custom.c), which registers the term
 * here with its lse_term_ops; the graph calls them only through those. */

static char *copy_string(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

lse_graph *lse_graph_new(void)
{
    lse_gsl_quiet();
    lse_graph *g = calloc(1, sizeof *g);
    return g;
}

static void node_free(lse_node *n)
{
    if (n == NULL)
        return;
    free(n->name);
    gsl_matrix_free(n->value);
    gsl_matrix_free(n->grad);
    free(n);
}

void lse_graph_free(lse_graph *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n_terms; i++)
        lse_term_free(g->terms[i]);
    for (size_t i = 0; i < g->n_nodes; i++)
        node_free(g->nodes[i]);
    free(g->terms);
    free(g->nodes);
    free(g->memo);
    free(g);
}

const char *lse_graph_errmsg(const lse_graph *g)
{
    return g != NULL ? g->errmsg : "lse_graph_errmsg: NULL graph";
}

void lse_graph_set_block_rows(lse_graph *g, size_t rows)
{
    if (g != NULL)
        g->block_rows = rows;
}

void lse_graph_set_reuse(lse_graph *g, int on)
{
    if (g == NULL)
        return;
    g->reuse = on != 0;
    g->memo_ok = 0;
}

lse_node *lse_graph_find_node(const lse_graph *g, const char *name)
{
    if (g == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0)
            return g->nodes[i];
    return NULL;
}

lse_status lse_graph_add_node(lse_graph *g, const char *name, size_t n,
                              size_t dim, unsigned flags, lse_node **out)
{
    static const char fn[] = "lse_graph_add_node";
    if (out != NULL)
        *out = NULL;
    if (g == NULL)
        return LSE_EFAULT;
    g->errmsg[0] = '\0';
    if (name == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL name");
    if (name[0] == '\0')
        return lse_graph_fail(g, LSE_EINVAL, fn, "empty node name");
    if (n == 0 || dim == 0)
        return lse_graph_fail(g, LSE_EINVAL, fn,
                              "node '%s' is %zux%zu: rows and dim must be > 0",
                              name, n, dim);
    if ((flags & ~(unsigned)(LSE_NODE_PARAM | LSE_NODE_CLAMPED)) != 0)
        return lse_graph_fail(g, LSE_EINVAL, fn, "node '%s': unknown flags 0x%x",
                              name, flags);
    if (lse_size_matrix_overflows(n, dim))
        return lse_graph_fail(g, LSE_ENOMEM, fn,
                              "node '%s' is %zux%zu: %zu x %zu doubles exceed "
                              "the address space",
                              name, n, dim, n, dim);
    if (lse_graph_find_node(g, name) != NULL ||
        lse_graph_find_term(g, name) != NULL)
        return lse_graph_fail(g, LSE_EEXIST, fn, "name '%s' exists", name);
    if (g->n_nodes == g->cap_nodes) {
        size_t cap = 8, bytes;
        if ((g->cap_nodes && lse_size_mul(g->cap_nodes, 2, &cap)) ||
            lse_size_mul(cap, sizeof *g->nodes, &bytes))
            return lse_graph_fail(g, LSE_ENOMEM, fn, "too many nodes");
        lse_node **nodes = realloc(g->nodes, bytes);
        if (nodes == NULL)
            return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    lse_node *node = calloc(1, sizeof *node);
    if (node == NULL)
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    node->graph = g;
    node->flags = flags;
    node->name = copy_string(name);
    node->value = gsl_matrix_calloc(n, dim);
    node->grad = gsl_matrix_calloc(n, dim);
    if (node->name == NULL || node->value == NULL || node->grad == NULL) {
        node_free(node);
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    }
    g->nodes[g->n_nodes++] = node;
    if (out != NULL)
        *out = node;
    return LSE_OK;
}

size_t lse_graph_n_nodes(const lse_graph *g)
{
    return g != NULL ? g->n_nodes : 0;
}

lse_node *lse_graph_node(const lse_graph *g, size_t i)
{
    return g != NULL && i < g->n_nodes ? g->nodes[i] : NULL;
}

size_t lse_graph_n_terms(const lse_graph *g)
{
    return g != NULL ? g->n_terms : 0;
}

lse_term *lse_graph_term(const lse_graph *g, size_t i)
{
    return g != NULL && i < g->n_terms ? g->terms[i] : NULL;
}

lse_term *lse_graph_find_term(const lse_graph *g, const char *name)
{
    if (g == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < g->n_terms; i++)
        if (strcmp(g->terms[i]->name, name) == 0)
            return g->terms[i];
    return NULL;
}

/* Terms ---------------------------------------------------------------- */

void lse_term_free(lse_term *t)
{
    if (t == NULL)
        return;
    if (t->ops != NULL && t->ops->free_kind != NULL)
        t->ops->free_kind(t);
    free(t->config_owned);
    free(t->name);
    free(t);
}

lse_status lse_check_view(lse_graph *g, const lse_view *v, const char *what,
                          const char *fn, const char *term)
{
    if (v->node == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn,
                              "term '%s': %s view has no node", term, what);
    if (v->node->graph != g)
        return lse_graph_fail(
            g, LSE_EINVAL, fn,
            "term '%s': %s node '%s' belongs to another graph", term, what,
            v->node->name);
    const size_t rows = v->node->value->size1;
    if (v->count == 0 || v->first >= rows || v->count > rows - v->first)
        return lse_graph_fail(g, LSE_ERANGE, fn,
                              "term '%s': %s view rows [%zu, %zu) outside node "
                              "'%s' of %zu rows",
                              term, what, v->first, v->first + v->count,
                              v->node->name, rows);
    return LSE_OK;
}

lse_status lse_graph_add_term_slot(lse_graph *g, const char *name,
                                   const char *fn, const lse_term_ops *ops,
                                   lse_term **out)
{
    if (name == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL term name");
    if (name[0] == '\0')
        return lse_graph_fail(g, LSE_EINVAL, fn, "empty term name");
    if (lse_graph_find_term(g, name) != NULL ||
        lse_graph_find_node(g, name) != NULL)
        return lse_graph_fail(g, LSE_EEXIST, fn, "name '%s' exists", name);
    if (g->n_terms == g->cap_terms) {
        size_t cap = 8, bytes;
        if ((g->cap_terms && lse_size_mul(g->cap_terms, 2, &cap)) ||
            lse_size_mul(cap, sizeof *g->terms, &bytes))
            return lse_graph_fail(g, LSE_ENOMEM, fn, "too many terms");
        lse_term **terms = realloc(g->terms, bytes);
        if (terms == NULL)
            return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        g->terms = terms;
        g->cap_terms = cap;
    }
    lse_term *t = calloc(1, sizeof *t);
    if (t == NULL)
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    const size_t len = strlen(name) + 1;
    t->name = malloc(len);
    if (t->name == NULL) {
        free(t);
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    }
    memcpy(t->name, name, len);
    t->graph = g;
    t->ops = ops;
    t->enabled = 1;
    *out = t;
    return LSE_OK;
}

/* Any NaN or infinity among x[0, n): x - x is 0 for finite x and NaN
 * otherwise; eight independent sums so that the loop vectorizes. */
LSE_KERNEL int span_nonfinite(const double *x, size_t n)
{
    double a[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (size_t q = 0; q < 8; q++)
            a[q] += x[j + q] - x[j + q];
    for (; j < n; j++)
        a[0] += x[j] - x[j];
    const double sum =
        ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    return sum != 0.0; /* NaN != 0 */
}

static int span_nonfinite_plain(const double *x, size_t n)
{
    return span_nonfinite(x, n);
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX2
static int span_nonfinite_avx2(const double *x, size_t n)
{
    return span_nonfinite(x, n);
}
#endif

/* Doubles per task of the parallel check (and below which it is serial). */
#define CHECK_SPAN ((size_t)1 << 16)
/* nodes of fewer entries are scanned without AVX2 (check_values) */
#define CHECK_WIDE ((size_t)64)

/* Any non-finite entry among the entries [e0, e1) of v's row-major
 * sequence. */
static int range_nonfinite(const gsl_matrix *v, size_t e0, size_t e1,
                           int avx2)
{
    const size_t cols = v->size2;
    const int flat = v->tda == cols;
    const size_t len = flat ? v->size1 * cols : cols;
    int bad = 0;
    size_t e = e0;
    while (e < e1) {
        const size_t r = flat ? 0 : e / cols, c = flat ? e : e % cols;
        const size_t lim = flat ? len : cols;
        size_t n = lim - c;
        if (n > e1 - e)
            n = e1 - e;
        const double *x = v->data + r * v->tda + c;
#if LSE_HAVE_AVX2_PATH
        bad |= avx2 ? span_nonfinite_avx2(x, n) : span_nonfinite_plain(x, n);
#else
        bad |= span_nonfinite_plain(x, n);
#endif
        e += n;
    }
    (void)avx2;
    return bad;
}

/* Any non-finite entry in v: contiguous values are one span, split into
 * tasks of CHECK_SPAN doubles over the threads (only a yes/no answer, so
 * the thread count cannot change anything). A node of fewer than
 * lse_threads_for_sum's 2^18 doubles (below its pass threshold, 2^20 by
 * default) is checked without entering a parallel region, whatever the
 * thread count: libgomp allocates a team
 * even for one thread, the graph checks every free node at every
 * evaluation, and a region waits for the other thread, which on a busy
 * machine may have lost its core. The covariance factors of c/full (2^17
 * doubles, 1.6 checks per EM iteration) take some 50 us on one thread
 * (docs/performance.md, "Session 12"). */
static int matrix_nonfinite(const gsl_matrix *v, int avx2)
{
    const size_t total = v->size1 * v->size2; /* allocated: fits */
    if (total <= CHECK_SPAN)
        return range_nonfinite(v, 0, total, avx2);
    const size_t n_task = (total + CHECK_SPAN - 1) / CHECK_SPAN;
    const int nth = lse_threads_for_sum(n_task, (double)total);
    if (nth <= 1)
        return range_nonfinite(v, 0, total, avx2);
    int bad = 0;
    const long nt = (long)n_task;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(| : bad) num_threads(nth)
#endif
    for (long t = 0; t < nt; t++) {
        /* task t: entries [e0, e1), written without the product t * total
         * (it could overflow) */
        const size_t e0 = (size_t)t * CHECK_SPAN;
        const size_t e1 = total - e0 > CHECK_SPAN ? e0 + CHECK_SPAN : total;
        bad |= range_nonfinite(v, e0, e1, avx2);
    }
    return bad;
}

/* Every node's values finite, else LSE_ENONFINITE naming the first bad
 * entry. A sealed node (lse_node_seal) is finite by construction and not
 * scanned: the data of an EM fit, 2-3 % of an iteration otherwise. */
static lse_status check_values(lse_graph *g, const char *fn)
{
    /* the AVX2 scan only for nodes of CHECK_WIDE entries or more: asked
     * once, when the first such node comes (lse_cpu_avx2 reads the
     * environment; the small nodes of a small fit are scanned sooner
     * than it answers) */
    int avx2 = -1;
    for (size_t k = 0; k < g->n_nodes; k++) {
        const gsl_matrix *v = g->nodes[k]->value;
        if (g->nodes[k]->sealed)
            continue;
        if (avx2 < 0 && v->size1 * v->size2 >= CHECK_WIDE)
            avx2 = lse_cpu_avx2();
        if (!matrix_nonfinite(v, avx2 > 0))
            continue;
        /* a second pass only to name the first bad entry */
        for (size_t i = 0; i < v->size1; i++)
            for (size_t j = 0; j < v->size2; j++)
                if (!isfinite(gsl_matrix_get(v, i, j)))
                    return lse_graph_fail(
                        g, LSE_ENONFINITE, fn,
                        "node '%s' has a non-finite value at [%zu,%zu]",
                        g->nodes[k]->name, i, j);
    }
    return LSE_OK;
}

/* The memo of lse_graph_set_reuse: the values of every node (the last
 * added first), then of each
 * term its settings (enabled, beta, mask, has_mask) and its row weights
 * and user mask when it has them, in that order. memo_walk visits them as
 * (pointer, count) runs; with store it copies them into g->memo (grown to
 * fit; 0 when out of memory), else it compares (1: all equal). */
typedef struct memo_cursor {
    lse_graph *g;
    size_t at;
    int store, equal;
} memo_cursor;

static void memo_run(memo_cursor *c, const double *v, size_t n)
{
    if (!c->equal)
        return;
    if (c->store) {
        memcpy(c->g->memo + c->at, v, n * sizeof *v);
    } else if (c->at + n > c->g->memo_len ||
               memcmp(c->g->memo + c->at, v, n * sizeof *v) != 0) {
        c->equal = 0;
    }
    c->at += n;
}

static void memo_matrix(memo_cursor *c, const gsl_matrix *m)
{
    if (m->tda == m->size2) {
        memo_run(c, m->data, m->size1 * m->size2);
        return;
    }
    for (size_t i = 0; i < m->size1; i++)
        memo_run(c, m->data + i * m->tda, m->size2);
}

static size_t memo_size(const lse_graph *g)
{
    size_t n = 0;
    for (size_t k = 0; k < g->n_nodes; k++)
        n += g->nodes[k]->value->size1 * g->nodes[k]->value->size2;
    for (size_t m = 0; m < g->n_terms; m++) {
        const lse_term *t = g->terms[m];
        n += 4;
        if (t->row_weight != NULL)
            n += t->row_weight->size;
        if (t->user_mask != NULL)
            n += t->user_mask->size1 * t->user_mask->size2;
    }
    return n;
}

static int memo_walk(lse_graph *g, int store)
{
    const size_t len = memo_size(g);
    if (store && len > g->memo_len) {
        double *m = realloc(g->memo, len * sizeof *m);
        if (m == NULL)
            return 0;
        g->memo = m;
    }
    if (!store && len != g->memo_len)
        return 0;
    g->memo_len = len;
    memo_cursor c = {g, 0, store, 1};
    /* the last nodes first: a model adds its data before its parameters,
     * and the parameters are what differs when a reuse is refused, so
     * the compare stops before the (larger) data */
    for (size_t k = g->n_nodes; k-- > 0;)
        memo_matrix(&c, g->nodes[k]->value);
    for (size_t m = 0; m < g->n_terms; m++) {
        const lse_term *t = g->terms[m];
        const double set[4] = {(double)t->enabled, t->beta, (double)t->mask,
                               (double)t->has_mask};
        memo_run(&c, set, 4);
        if (t->row_weight != NULL) {
            const gsl_vector *w = t->row_weight;
            if (w->stride == 1)
                memo_run(&c, w->data, w->size);
            else
                for (size_t i = 0; i < w->size; i++)
                    memo_run(&c, w->data + i * w->stride, 1);
        }
        if (t->user_mask != NULL)
            memo_matrix(&c, t->user_mask);
    }
    return c.equal;
}

/* May a term keep its last evaluation (lse_graph_set_reuse)? An LSE term
 * with the rows reduction that keeps its softmax whole. */
static int term_reusable(const lse_term *t)
{
    return t->ops->restat != NULL && t->kind == LSE_TERM_LSE &&
           t->reduce == LSE_REDUCE_ROWS && t->keep;
}

/* Does any term of g keep what a reuse would take (term_reusable)? */
static int any_reusable(const lse_graph *g)
{
    for (size_t m = 0; m < g->n_terms; m++)
        if (g->terms[m]->enabled && term_reusable(g->terms[m]))
            return 1;
    return 0;
}

static lse_status evaluate(lse_graph *g, int want_grad, double *energy,
                           const char *fn)
{
    if (energy != NULL)
        *energy = NAN;
    if (g == NULL)
        return LSE_EFAULT;
    g->errmsg[0] = '\0';
    /* the values were checked when the memo was stored */
    const int reuse = !want_grad && g->reuse && g->memo_ok && memo_walk(g, 0);
    g->memo_ok = 0;
    lse_status st = reuse ? LSE_OK : check_values(g, fn);
    if (st != LSE_OK)
        return st;
    if (want_grad)
        for (size_t k = 0; k < g->n_nodes; k++)
            gsl_matrix_set_zero(g->nodes[k]->grad);
    double total = 0.0;
    for (size_t m = 0; m < g->n_terms; m++) {
        lse_term *t = g->terms[m];
        if (!t->enabled)
            continue;
        st = reuse && term_reusable(t) ? t->ops->restat(t)
                                        : t->ops->eval(t, want_grad);
        if (st != LSE_OK) {
            if (g->errmsg[0] == '\0')
                lse_graph_fail(g, st, fn, "term '%s': %s", t->name,
                               lse_strerror(st));
            return st;
        }
        total += t->energy;
    }
    if (isnan(total) || total == -INFINITY)
        return lse_graph_fail(g, LSE_ENONFINITE, fn, "energy is %g", total);
    if (energy != NULL)
        *energy = total;
    if (!want_grad && g->reuse)
        g->memo_ok = reuse || (any_reusable(g) && memo_walk(g, 1));
    return LSE_OK;
}

lse_status lse_graph_energy(lse_graph *g, double *energy)
{
    return evaluate(g, 0, energy, "lse_graph_energy");
}

lse_status lse_graph_gradient(lse_graph *g, double *energy)
{
    return evaluate(g, 1, energy, "lse_graph_gradient");
}

/* Nodes ---------------------------------------------------------------- */

lse_view lse_view_all(lse_node *node)
{
    lse_view v = {node, 0, node != NULL ? node->value->size1 : 0};
    return v;
}

lse_view lse_view_rows(lse_node *node, size_t first, size_t count)
{
    lse_view v = {node, first, count};
    return v;
}

gsl_matrix_view lse_view_value(const lse_view *v)
{
    return gsl_matrix_submatrix(v->node->value, v->first, 0, v->count,
                                v->node->value->size2);
}

gsl_matrix_view lse_view_grad(const lse_view *v)
{
    return gsl_matrix_submatrix(v->node->grad, v->first, 0, v->count,
                                v->node->grad->size2);
}

const char *lse_node_name(const lse_node *node)
{
    return node != NULL ? node->name : NULL;
}

size_t lse_node_rows(const lse_node *node)
{
    return node != NULL ? node->value->size1 : 0;
}

size_t lse_node_dim(const lse_node *node)
{
    return node != NULL ? node->value->size2 : 0;
}

unsigned lse_node_flags(const lse_node *node)
{
    return node != NULL ? node->flags : 0;
}

int lse_node_is_param(const lse_node *node)
{
    return node != NULL && (node->flags & LSE_NODE_PARAM) != 0;
}

int lse_node_is_clamped(const lse_node *node)
{
    return node != NULL && (node->flags & LSE_NODE_CLAMPED) != 0;
}

void lse_node_set_clamped(lse_node *node, int clamped)
{
    if (node == NULL)
        return;
    if (clamped)
        node->flags |= LSE_NODE_CLAMPED;
    else
        node->flags &= ~(unsigned)LSE_NODE_CLAMPED;
    node->sealed = 0; /* a free node is written by the solvers */
}

gsl_matrix *lse_node_value(lse_node *node)
{
    if (node == NULL)
        return NULL;
    node->sealed = 0; /* the caller may write through the pointer */
    return node->value;
}

lse_status lse_node_seal(lse_node *node)
{
    if (node == NULL)
        return LSE_EFAULT;
    node->sealed = 0;
    if (!(node->flags & LSE_NODE_CLAMPED))
        return LSE_EINVAL;
    if (matrix_nonfinite(node->value, lse_cpu_avx2()))
        return LSE_ENONFINITE;
    node->sealed = 1;
    return LSE_OK;
}

const gsl_matrix *lse_node_grad(const lse_node *node)
{
    return node != NULL ? node->grad : NULL;
}

lse_graph *lse_node_graph(const lse_node *node)
{
    return node != NULL ? node->graph : NULL;
}

lse_status lse_node_set_value(lse_node *node, const gsl_matrix *value)
{
    static const char fn[] = "lse_node_set_value";
    if (node == NULL)
        return LSE_EFAULT;
    lse_graph *g = node->graph;
    if (value == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL value for node '%s'",
                              node->name);
    if (value->size1 != node->value->size1 ||
        value->size2 != node->value->size2)
        return lse_graph_fail(g, LSE_EDIM, fn, "node '%s' is %zux%zu, value is %zux%zu",
                              node->name, node->value->size1,
                              node->value->size2, value->size1, value->size2);
    for (size_t i = 0; i < value->size1; i++)
        for (size_t j = 0; j < value->size2; j++)
            if (!isfinite(gsl_matrix_get(value, i, j)))
                return lse_graph_fail(g, LSE_ENONFINITE, fn,
                                      "node '%s': value[%zu,%zu] is not finite",
                                      node->name, i, j);
    lse_copy_rows(node->value, value);
    return LSE_OK;
}

/* Gradient check of a whole graph ------------------------------------- */

static void record(lse_gradcheck *res, double a, double n, double floor,
                   const lse_node *node, size_t i, size_t j)
{
    double den = fabs(a) > fabs(n) ? fabs(a) : fabs(n);
    if (den < floor)
        den = floor;
    double err = fabs(a - n) / den;
    if (isnan(err))
        err = INFINITY;
    res->n_checked++;
    if (err > res->max_error || res->n_checked == 1) {
        if (err > res->max_error) {
            res->max_error = err;
        }
        res->analytic = a;
        res->numeric = n;
        snprintf(res->where, sizeof res->where, "node '%s'[%zu,%zu]",
                 node->name, i, j);
    }
}

lse_status lse_graph_check_gradient(lse_graph *g, lse_node *node, double h,
                                    double floor, lse_gradcheck *res)
{
    static const char fn[] = "lse_graph_check_gradient";
    if (g == NULL || res == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL argument");
    if (!(h > 0.0) || !(floor > 0.0))
        return lse_graph_fail(g, LSE_EDOM, fn, "h and floor must be > 0");
    if (node != NULL && node->graph != g)
        return lse_graph_fail(g, LSE_EINVAL, fn, "node of another graph");
    *res = (lse_gradcheck){0};
    double e;
    lse_status st = lse_graph_gradient(g, &e);
    if (st != LSE_OK)
        return st;
    for (size_t k = 0; k < g->n_nodes; k++) {
        lse_node *nd = g->nodes[k];
        if ((node != NULL && nd != node) || (nd->flags & LSE_NODE_CLAMPED))
            continue;
        gsl_matrix *analytic = gsl_matrix_alloc(nd->grad->size1, nd->grad->size2);
        if (analytic == NULL)
            return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        gsl_matrix_memcpy(analytic, nd->grad);
        for (size_t i = 0; i < nd->value->size1 && st == LSE_OK; i++) {
            for (size_t j = 0; j < nd->value->size2; j++) {
                const double v = gsl_matrix_get(nd->value, i, j);
                double up = 0, down = 0;
                gsl_matrix_set(nd->value, i, j, v + h);
                st = lse_graph_energy(g, &up);
                if (st == LSE_OK) {
                    gsl_matrix_set(nd->value, i, j, v - h);
                    st = lse_graph_energy(g, &down);
                }
                gsl_matrix_set(nd->value, i, j, v);
                if (st != LSE_OK)
                    break;
                record(res, gsl_matrix_get(analytic, i, j),
                       (up - down) / (2 * h), floor, nd, i, j);
            }
        }
        gsl_matrix_free(analytic);
        if (st != LSE_OK)
            return st;
    }
    /* leave the graph evaluated at the original point */
    return lse_graph_gradient(g, &e);
}
