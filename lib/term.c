#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "exactsum-private.h"
#include "kernels-private.h"
#include "sim-clean-private.h"
#include "sim-fused-private.h"
#include "size-private.h"
#include "softmax-private.h"
#include "threads-private.h"

/* LSE terms: E = -sum_c w_c (1/beta) log sum_{p allowed} exp(beta S_cp),
 * evaluated on blocks of child rows (the only code path: a dense term keeps
 * the whole S and softmax and its blocks are views into them, a streaming
 * term reuses one block). */

#define DEFAULT_BLOCK 256

lse_term_spec lse_term_spec_default(void)
{
    lse_term_spec s;
    memset(&s, 0, sizeof s);
    s.beta = 1.0;
    s.reduce = LSE_REDUCE_ROWS;
    s.keep_matrices = 1;
    return s;
}

static void par_free(lse_term *t);

/* The LSE part of a term (lse_term_free frees the rest). */
static void lse_kind_free(lse_term *t)
{
    par_free(t);
    if (t->work != NULL && t->sim != NULL && t->sim->work_free != NULL)
        t->sim->work_free(t->work);
    free(t->param);
    free(t->param_rows);
    free(t->param_cols);
    free(t->param_values);
    free(t->param_grads);
    free(t->param_gv);
    gsl_matrix_free(t->user_mask);
    gsl_vector_free(t->row_weight);
    gsl_matrix_free(t->s);
    gsl_matrix_free(t->a);
    gsl_matrix_free(t->g);
    gsl_vector_free(t->row_lse);
    lse_chain_free(t->chain);
}

static lse_status lse_term_restat(lse_term *t);
static const lse_term_ops lse_ops = {lse_term_eval, lse_kind_free,
                                     lse_term_restat};

static int is_allowed(const lse_term *t, size_t i, size_t j)
{
    const size_t pc = t->child.first + i, pp = t->parent.first + j;
    if ((t->mask & LSE_MASK_CAUSAL) && pp > pc)
        return 0;
    if ((t->mask & LSE_MASK_NO_SELF) && pp == pc)
        return 0;
    if (t->user_mask != NULL && gsl_matrix_get(t->user_mask, i, j) == 0.0)
        return 0;
    return 1;
}

static lse_status par_new(lse_term *t);

/* Refuse a shape whose matrices or workspaces cannot be addressed
 * (lse_size_shape_overflow), so no allocation downstream wraps around. */
static lse_status check_shape_sizes(lse_term *t)
{
    const lse_sim_shape *sh = &t->shape;
    size_t d = sh->d_child > sh->d_parent ? sh->d_child : sh->d_parent;
    if (sh->d_context > d)
        d = sh->d_context;
    const char *what = lse_size_shape_overflow(sh->n_child, sh->block,
                                               sh->n_parent, d, t->keep);
    if (what == NULL)
        return LSE_OK;
    return lse_graph_fail(t->graph, LSE_ENOMEM, "lse_graph_add_lse",
                          "term '%s': %zu child rows (block %zu), %zu parent "
                          "rows, dimension %zu: %s doubles exceed the address "
                          "space",
                          t->name, sh->n_child, sh->block, sh->n_parent, d,
                          what);
}

/* The stages of lse_graph_add_lse, in order; each names the failure on g
 * (function fn, term name) and returns its status. */

/* The views, beta and the fixed masks of spec, copied into t. */
static lse_status check_views(lse_graph *g, lse_term *t, const char *fn,
                              const char *name)
{
    const lse_sim_type *sim = t->sim;
    lse_status st = lse_check_view(g, &t->child, "child", fn, name);
    if (st == LSE_OK)
        st = lse_check_view(g, &t->parent, "parent", fn, name);
    if (st == LSE_OK && t->context.node != NULL) {
        st = lse_check_view(g, &t->context, "context", fn, name);
        if (st == LSE_OK && t->context.count != t->child.count)
            st = lse_graph_fail(g, LSE_ERANGE, fn,
                                "term '%s': context has %zu rows, child %zu",
                                name, t->context.count, t->child.count);
    }
    if (st == LSE_OK && t->context.node == NULL &&
        (sim->flags & LSE_SIM_NEEDS_CONTEXT))
        st = lse_graph_fail(g, LSE_EFAULT, fn,
                            "term '%s': similarity '%s' needs a context view",
                            name, sim->name);
    if (st == LSE_OK && (!(t->beta > 0.0) || !isfinite(t->beta)))
        st = lse_graph_fail(g, LSE_EDOM, fn,
                            "term '%s': beta = %g, must be finite and > 0",
                            name, t->beta);
    if (st == LSE_OK &&
        (t->mask & ~(unsigned)(LSE_MASK_CAUSAL | LSE_MASK_NO_SELF)) != 0)
        st = lse_graph_fail(g, LSE_EINVAL, fn, "term '%s': unknown mask 0x%x",
                            name, t->mask);
    return st;
}

/* The parameter arrays and the parameter nodes of spec (optional ones may
 * be absent). */
static lse_status bind_params(lse_graph *g, lse_term *t,
                              const lse_term_spec *spec, const char *fn,
                              const char *name)
{
    const lse_sim_type *sim = t->sim;
    const size_t nc = t->child.count, K = sim->n_param;
    t->param = calloc(K + 1, sizeof *t->param);
    t->param_rows = calloc(K + 1, sizeof *t->param_rows);
    t->param_cols = calloc(K + 1, sizeof *t->param_cols);
    t->param_values = calloc(K + 1, sizeof *t->param_values);
    t->param_grads = calloc(K + 1, sizeof *t->param_grads);
    t->param_gv = calloc(K + 1, sizeof *t->param_gv);
    t->row_lse = gsl_vector_alloc(nc);
    if (t->param == NULL || t->param_rows == NULL || t->param_cols == NULL ||
        t->param_values == NULL || t->param_grads == NULL ||
        t->param_gv == NULL || t->row_lse == NULL)
        return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    for (size_t k = 0; k < K; k++) {
        lse_node *p = spec->param != NULL ? spec->param[k] : NULL;
        const char *pname =
            sim->param_names != NULL ? sim->param_names[k] : "?";
        if (p == NULL) {
            if (!(sim->optional_params & (1u << k)))
                return lse_graph_fail(g, LSE_EFAULT, fn,
                                      "term '%s': %s needs parameter '%s'",
                                      name, sim->name, pname);
            continue;
        }
        if (p->graph != g)
            return lse_graph_fail(g, LSE_EINVAL, fn,
                                  "term '%s': parameter '%s' is a node of "
                                  "another graph",
                                  name, pname);
        t->param[k] = p;
        t->param_rows[k] = p->value->size1;
        t->param_cols[k] = p->value->size2;
    }
    return LSE_OK;
}

/* The config: a copy (or a borrowed pairwise-style config of size 0). */
static lse_status copy_config(lse_graph *g, lse_term *t,
                              const lse_term_spec *spec, const char *fn)
{
    const lse_sim_type *sim = t->sim;
    const void *config =
        spec->config != NULL ? spec->config : sim->config_default;
    if (sim->config_size > 0) {
        t->config_owned = malloc(sim->config_size);
        if (t->config_owned == NULL)
            return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        if (config != NULL) {
            memcpy(t->config_owned, config, sim->config_size);
            t->config = t->config_owned;
        } /* else NULL: the type's check decides */
    } else {
        t->config = config;
    }
    return LSE_OK;
}

/* The block size and the shape, checked by the similarity and against the
 * address space. */
static lse_status make_shape(lse_graph *g, lse_term *t, const char *fn,
                             const char *name)
{
    const lse_sim_type *sim = t->sim;
    const size_t nc = t->child.count, np = t->parent.count;
    size_t block = g->block_rows ? g->block_rows : DEFAULT_BLOCK;
    if ((sim->flags & LSE_SIM_WHOLE_CHILDREN) || block > nc)
        block = nc;
    if (t->reduce == LSE_REDUCE_CHAIN && block > nc)
        block = nc;
    t->block = block;
    t->shape = (lse_sim_shape){.n_child = nc,
                               .block = block,
                               .n_parent = np,
                               .d_child = t->child.node->value->size2,
                               .d_parent = t->parent.node->value->size2,
                               .d_context = t->context.node != NULL
                                                ? t->context.node->value->size2
                                                : 0,
                               .n_param = sim->n_param,
                               .param_rows = t->param_rows,
                               .param_cols = t->param_cols};
    if (sim->check != NULL) {
        char msg[512] = "";
        const lse_status st = sim->check(&t->shape, t->config, msg, sizeof msg);
        if (st != LSE_OK) {
            lse_graph_fail(g, st, fn, "term '%s': %s", name,
                           msg[0] ? msg : lse_strerror(st));
            return st;
        }
    }
    return check_shape_sizes(t);
}

/* The user mask and row weights of spec, the kept S and softmax, the
 * similarity's workspace and the per-thread scratch. */
static lse_status make_buffers(lse_graph *g, lse_term *t,
                               const lse_term_spec *spec, const char *fn,
                               const char *name)
{
    const lse_sim_type *sim = t->sim;
    const size_t nc = t->child.count, np = t->parent.count;
    lse_status st;
    if (spec->user_mask != NULL) {
        if (spec->user_mask->size1 != nc || spec->user_mask->size2 != np)
            return lse_graph_fail(
                g, LSE_EDIM, fn, "term '%s': mask is %zux%zu, expected %zux%zu",
                name, spec->user_mask->size1, spec->user_mask->size2, nc, np);
        t->user_mask = gsl_matrix_alloc(nc, np);
        if (t->user_mask == NULL)
            return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        gsl_matrix_memcpy(t->user_mask, spec->user_mask);
    }
    t->has_mask = t->mask != 0 || t->user_mask != NULL;
    if (spec->row_weight != NULL) {
        st = lse_term_set_row_weight(t, spec->row_weight);
        if (st != LSE_OK)
            return st;
    }
    if (t->keep) { /* streaming terms use per-thread blocks (par_new) */
        t->s = gsl_matrix_alloc(nc, np);
        t->a = gsl_matrix_alloc(nc, np);
        if (t->s == NULL || t->a == NULL)
            return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
    }
    if (sim->work_new != NULL) {
        st = sim->work_new(&t->shape, t->config, &t->work);
        if (st != LSE_OK) {
            lse_graph_fail(g, st, fn, "term '%s': %s workspace: %s", name,
                           sim->name, lse_strerror(st));
            return st;
        }
    }
    st = par_new(t);
    if (st != LSE_OK)
        lse_graph_fail(g, st, fn, "term '%s': %s workspace: %s", name,
                       sim->name, lse_strerror(st));
    return st;
}

/* The reduction: rows, or a chain over spec's init/trans nodes. */
static lse_status make_reduction(lse_graph *g, lse_term *t,
                                 const lse_term_spec *spec, const char *fn,
                                 const char *name)
{
    const size_t np = t->parent.count;
    if (t->reduce == LSE_REDUCE_ROWS)
        return LSE_OK;
    if (t->reduce != LSE_REDUCE_CHAIN)
        return lse_graph_fail(g, LSE_EINVAL, fn,
                              "term '%s': unknown reduction %d", name,
                              (int)t->reduce);
    if (spec->chain_init == NULL || spec->chain_trans == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn,
                              "term '%s': chain reduction needs chain_init "
                              "and chain_trans nodes",
                              name);
    if (spec->chain_init->graph != g || spec->chain_trans->graph != g)
        return lse_graph_fail(g, LSE_EINVAL, fn,
                              "term '%s': chain nodes of another graph", name);
    if (spec->chain_init->value->size1 != 1 ||
        spec->chain_init->value->size2 != np ||
        spec->chain_trans->value->size1 != np ||
        spec->chain_trans->value->size2 != np)
        return lse_graph_fail(g, LSE_EDIM, fn,
                              "term '%s': chain_init must be 1x%zu and "
                              "chain_trans %zux%zu",
                              name, np, np, np);
    if (t->beta != 1.0 || t->has_mask || t->row_weight != NULL)
        return lse_graph_fail(g, LSE_EINVAL, fn,
                              "term '%s': chain reduction takes beta = 1, no "
                              "masks and no row weights",
                              name);
    t->chain_init = spec->chain_init;
    t->chain_trans = spec->chain_trans;
    const lse_status st =
        lse_chain_new(t, spec->chain_starts, spec->n_chain_starts, &t->chain);
    if (st != LSE_OK && g->errmsg[0] == '\0')
        lse_graph_fail(g, st, fn, "term '%s': %s", name, lse_strerror(st));
    return st;
}

lse_status lse_graph_add_lse(lse_graph *g, const char *name,
                             const lse_term_spec *spec, lse_term **out)
{
    static const char fn[] = "lse_graph_add_lse";
    if (out != NULL)
        *out = NULL;
    if (g == NULL)
        return LSE_EFAULT;
    g->errmsg[0] = '\0';
    if (spec == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL spec");
    if (spec->sim == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "term '%s': NULL similarity",
                              name != NULL ? name : "?");
    lse_term *t = NULL;
    lse_status st = lse_graph_add_term_slot(g, name, fn, &lse_ops, &t);
    if (st != LSE_OK)
        return st;
    t->kind = LSE_TERM_LSE;
    t->sim = spec->sim;
    t->child = spec->child;
    t->parent = spec->parent;
    t->context = spec->context;
    t->beta = spec->beta;
    t->mask = spec->mask;
    t->reduce = spec->reduce;
    t->keep = spec->keep_matrices || spec->reduce == LSE_REDUCE_CHAIN;
    st = check_views(g, t, fn, name);
    if (st == LSE_OK)
        st = bind_params(g, t, spec, fn, name);
    if (st == LSE_OK)
        st = copy_config(g, t, spec, fn);
    if (st == LSE_OK)
        st = make_shape(g, t, fn, name);
    if (st == LSE_OK)
        st = make_buffers(g, t, spec, fn, name);
    if (st == LSE_OK)
        st = make_reduction(g, t, spec, fn, name);
    if (st != LSE_OK) {
        lse_term_free(t);
        return st;
    }
    g->terms[g->n_terms++] = t;
    if (out != NULL)
        *out = t;
    return LSE_OK;
}

/* Chunks and threads ---------------------------------------------------- *
 *
 * The child rows are split into n_chunk chunks of whole blocks, fixed at
 * creation from the shapes alone. Each chunk accumulates its energy and,
 * when there is more than one chunk, its parent and parameter gradients in
 * private buffers; the chunks are summed in chunk order after the parallel
 * region, so the result does not depend on how many threads ran them or in
 * which order. Child and context gradients are rows of their own chunk and
 * go straight to the node. Scratch that does not hold results (similarity
 * workspaces, block buffers) belongs to thread slots instead, so its size
 * grows with the processors, not with the chunks. docs/performance.md. */

/* At most this many chunks (enough for 16 threads). */
#define MAX_CHUNKS 16
/* Private gradient buffers of all chunks together stay below this. */
#define CHUNK_BUDGET ((size_t)128 << 20)

enum { FAIL_PREPARE, FAIL_EVAL, FAIL_CHECK, FAIL_STATS, FAIL_GRAD };

typedef struct term_chunk {
    size_t first, count; /* child rows [first, first + count) */
    gsl_matrix *gparent; /* (n_parent, d_parent) private dE/dparent */
    gsl_matrix **gparam; /* n_param private dE/dparam (NULL entries) */
    gsl_matrix **gout;   /* n_param pointers handed to the kernel */
    double energy;
    lse_status st; /* first failure in the chunk, and where */
    int what;
    size_t row, col;
    double value;
} term_chunk;

typedef struct thread_slot {
    void *work;      /* similarity workspace (slot 0: t->work) */
    gsl_matrix *buf; /* (block, n_parent): dE/dS of a dense term; S, the
                        softmax and dE/dS in place for a streaming term */
    double *rowmax;  /* (block) scratch of the softmax */
    lse_status st;   /* prepare status */
} thread_slot;

typedef struct lse_term_par {
    size_t n_chunk, n_slot;
    term_chunk *chunk;
    thread_slot *slot;
    int private_grads; /* parent/param gradients go to chunk buffers */
    lse_softmax_isa isa; /* softmax copies this machine runs */
    lse_sim_fused_fn fused; /* the type's fused block pass, or NULL */
    lse_sim_clean_fn clean; /* did eval check its scores? or NULL */
    double *sink;      /* statistics sink of lse_term_set_stats_sink */
    size_t sink_stride;
} lse_term_par;

static int free_node(const lse_node *n)
{
    return n != NULL && !(n->flags & LSE_NODE_CLAMPED);
}

static void par_free(lse_term *t)
{
    lse_term_par *p = t->par;
    if (p == NULL)
        return;
    for (size_t c = 0; p->chunk != NULL && c < p->n_chunk; c++) {
        term_chunk *ch = &p->chunk[c];
        gsl_matrix_free(ch->gparent);
        for (size_t k = 0; ch->gparam != NULL && k < t->sim->n_param; k++)
            gsl_matrix_free(ch->gparam[k]);
        free(ch->gparam);
        free(ch->gout);
    }
    for (size_t i = 0; p->slot != NULL && i < p->n_slot; i++) {
        if (i > 0 && p->slot[i].work != NULL && t->sim->work_free != NULL)
            t->sim->work_free(p->slot[i].work);
        gsl_matrix_free(p->slot[i].buf);
        free(p->slot[i].rowmax);
    }
    free(p->chunk);
    free(p->slot);
    free(p);
    t->par = NULL;
}

static lse_status par_new(lse_term *t)
{
    const size_t nc = t->child.count, np = t->parent.count;
    const size_t n_block = (nc + t->block - 1) / t->block;
    const size_t K = t->sim->n_param;
    lse_term_par *p = calloc(1, sizeof *p);
    if (p == NULL)
        return LSE_ENOMEM;
    t->par = p;
    p->isa = lse_softmax_isa_detect();
    /* LSE_NO_FUSED (tests, benchmarks): the separate steps only */
    p->fused = lse_cpu_env_off("LSE_NO_FUSED") ? NULL
                                                : lse_sim_fused_find(t->sim);
    p->clean = lse_sim_clean_find(t->sim);
    /* doubles of private gradient per chunk */
    size_t priv = 0, bytes = 0; /* node sizes: each fits, their sum may not */
    if (free_node(t->parent.node))
        priv = np * t->shape.d_parent;
    for (size_t k = 0; k < K; k++)
        if (free_node(t->param[k]))
            lse_size_add(priv, t->param_rows[k] * t->param_cols[k], &priv);
    lse_size_mul(priv, sizeof(double), &bytes); /* SIZE_MAX on overflow */
    size_t n_chunk = n_block < MAX_CHUNKS ? n_block : MAX_CHUNKS;
    if (n_chunk > 1 && priv > 0) {
        const size_t cap = CHUNK_BUDGET / bytes;
        if (cap < n_chunk)
            n_chunk = cap > 1 ? cap : 1;
    }
    if (n_chunk < 1)
        n_chunk = 1;
    const size_t procs = (size_t)lse_threads_procs();
    p->n_chunk = n_chunk;
    p->n_slot = procs < n_chunk ? procs : n_chunk;
    p->private_grads = n_chunk > 1 && priv > 0;
    p->chunk = calloc(n_chunk, sizeof *p->chunk);
    p->slot = calloc(p->n_slot, sizeof *p->slot);
    if (p->chunk == NULL || p->slot == NULL)
        return LSE_ENOMEM;
    for (size_t c = 0; c < n_chunk; c++) {
        term_chunk *ch = &p->chunk[c];
        /* floor(c n_block / n_chunk) without the product c * n_block */
        const size_t q = n_block / n_chunk, r = n_block % n_chunk;
        const size_t b0 = c * q + c * r / n_chunk;
        const size_t b1 = (c + 1) * q + (c + 1) * r / n_chunk;
        ch->first = b0 * t->block;
        ch->count = (b1 * t->block < nc ? b1 * t->block : nc) - ch->first;
        ch->gparam = calloc(K + 1, sizeof *ch->gparam);
        ch->gout = calloc(K + 1, sizeof *ch->gout);
        if (ch->gparam == NULL || ch->gout == NULL)
            return LSE_ENOMEM;
        if (!p->private_grads)
            continue;
        if (free_node(t->parent.node)) {
            ch->gparent = gsl_matrix_alloc(np, t->shape.d_parent);
            if (ch->gparent == NULL)
                return LSE_ENOMEM;
        }
        for (size_t k = 0; k < K; k++) {
            if (!free_node(t->param[k]))
                continue;
            ch->gparam[k] =
                gsl_matrix_alloc(t->param_rows[k], t->param_cols[k]);
            if (ch->gparam[k] == NULL)
                return LSE_ENOMEM;
        }
    }
    for (size_t i = 0; i < p->n_slot; i++) {
        thread_slot *sl = &p->slot[i];
        sl->buf = gsl_matrix_alloc(t->block, np);
        sl->rowmax = malloc(t->block * sizeof *sl->rowmax);
        if (sl->buf == NULL || sl->rowmax == NULL)
            return LSE_ENOMEM;
        if (i == 0) {
            sl->work = t->work;
        } else if (t->sim->work_new != NULL) {
            const lse_status st =
                t->sim->work_new(&t->shape, t->config, &sl->work);
            if (st != LSE_OK)
                return st;
        }
    }
    return LSE_OK;
}

size_t lse_term_n_chunk(const lse_term *t)
{
    return t != NULL && t->par != NULL ? t->par->n_chunk : 1;
}

void lse_term_set_stats_sink(lse_term *t, double *acc, size_t stride)
{
    if (t == NULL || t->par == NULL)
        return;
    t->par->sink = acc;
    t->par->sink_stride = stride;
}

/* The M-step statistics of the kept softmax (t->keep) into the stats
 * sink (lse_term_set_stats_sink), without scoring again: what
 * lse_term_eval adds to the last evaluation when a sink is set; nothing
 * without a sink (the restat op, for lse_graph_set_reuse). */
static lse_status lse_term_restat(lse_term *t)
{
    if (t->par->sink == NULL)
        return LSE_OK;
    return lse_term_run(t, LSE_RUN_STATS, t->par->sink, t->par->sink_stride);
}

/* Fill args for rows [i0, i0 + b) of the child view. */
static void block_args(lse_term *t, size_t i0, size_t b, lse_sim_args *a,
                       gsl_matrix_view *cv, gsl_matrix_view *xv)
{
    *cv = gsl_matrix_submatrix(&t->child_mv.matrix, i0, 0, b,
                               t->child_mv.matrix.size2);
    a->child = &cv->matrix;
    if (t->context.node != NULL) {
        *xv = gsl_matrix_submatrix(&t->context_mv.matrix, i0, 0, b,
                                   t->context_mv.matrix.size2);
        a->context = &xv->matrix;
    } else {
        a->context = NULL;
    }
    a->child_offset = i0;
}

static void whole_args(lse_term *t, lse_sim_args *a)
{
    t->child_mv = lse_view_value(&t->child);
    t->parent_mv = lse_view_value(&t->parent);
    if (t->context.node != NULL)
        t->context_mv = lse_view_value(&t->context);
    for (size_t k = 0; k < t->sim->n_param; k++)
        t->param_values[k] = t->param[k] != NULL ? t->param[k]->value : NULL;
    a->child = &t->child_mv.matrix;
    a->parent = &t->parent_mv.matrix;
    a->context = t->context.node != NULL ? &t->context_mv.matrix : NULL;
    a->child_offset = 0;
    a->param = t->param_values;
    a->config = t->config;
    a->work = t->work;
}

lse_status lse_term_sim_args(lse_term *t, lse_sim_args *args)
{
    if (t == NULL || args == NULL || t->kind != LSE_TERM_LSE)
        return LSE_EFAULT;
    whole_args(t, args);
    if (t->sim->prepare != NULL)
        return t->sim->prepare(args);
    return LSE_OK;
}

/* Gradient outputs of rows [i0, i0 + b): child and context rows of the
 * node grads, parent and parameters in the chunk's private buffers or the
 * node grads. */
static void grad_outputs(const lse_term *t, term_chunk *ch, lse_sim_grads *out,
                         gsl_matrix_view *cgv, gsl_matrix_view *pgv,
                         gsl_matrix_view *xgv, size_t i0, size_t b)
{
    const int priv = t->par->private_grads;
    out->child = NULL;
    out->parent = NULL;
    out->context = NULL;
    if (free_node(t->child.node)) {
        *cgv = gsl_matrix_submatrix(t->child.node->grad, t->child.first + i0, 0,
                                    b, t->child.node->grad->size2);
        out->child = &cgv->matrix;
    }
    if (free_node(t->parent.node)) {
        if (priv) {
            out->parent = ch->gparent;
        } else {
            *pgv = lse_view_grad(&t->parent);
            out->parent = &pgv->matrix;
        }
    }
    if (free_node(t->context.node)) {
        *xgv =
            gsl_matrix_submatrix(t->context.node->grad, t->context.first + i0,
                                 0, b, t->context.node->grad->size2);
        out->context = &xgv->matrix;
    }
    for (size_t k = 0; k < t->sim->n_param; k++) {
        ch->gout[k] = NULL;
        if (free_node(t->param[k]))
            ch->gout[k] = priv ? ch->gparam[k] : t->param[k]->grad;
    }
    out->param = ch->gout;
}

/* S (b, np) of rows from i0: masked pairs to -INFINITY. */
static void apply_mask(const lse_term *t, gsl_matrix *s, size_t i0)
{
    const size_t b = s->size1, np = s->size2;
    for (size_t r = 0; r < b; r++) {
        double *row = gsl_matrix_ptr(s, r, 0);
        const size_t pc = t->child.first + i0 + r; /* child position */
        if (t->user_mask != NULL) {
            const double *m = gsl_matrix_const_ptr(t->user_mask, i0 + r, 0);
            for (size_t j = 0; j < np; j++)
                if (m[j] == 0.0)
                    row[j] = -INFINITY;
        }
        /* parent position pp = parent.first + j */
        if (t->mask & LSE_MASK_CAUSAL) { /* pp > pc masked */
            const size_t j0 =
                pc >= t->parent.first ? pc - t->parent.first + 1 : 0;
            for (size_t j = j0; j < np; j++)
                row[j] = -INFINITY;
        }
        if ((t->mask & LSE_MASK_NO_SELF) && pc >= t->parent.first &&
            pc - t->parent.first < np)
            row[pc - t->parent.first] = -INFINITY;
    }
}

static int chunk_fail(term_chunk *ch, lse_status st, int what)
{
    ch->st = st;
    ch->what = what;
    return 1;
}

/* e - sum_r w_r lse_r over the rows whose lse is not -INFINITY, one row
 * after the other. Not inlined: inside the chunk loop the compiler kept the
 * running sum in memory, a store and a load on the chain of every row. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static double energy_sub(double e, const double *lse, const double *w, size_t b)
{
    for (size_t r = 0; r < b; r++)
        if (lse[r] != -INFINITY)
            e -= (w != NULL ? w[r] : 1.0) * lse[r];
    return e;
}

/* Rows [i0, i0 + b) by the type's fused pass (scores, softmax and
 * statistics at once) when nothing else reads S: the E-step with rounded
 * statistics, no mask, beta 1, no kept matrices, no gradient. 1 when it
 * did the block; 0 leaves it to the separate steps (which also report a
 * non-finite score). */
static int run_fused(lse_term *t, const lse_sim_args *a, unsigned flags,
                     size_t i0, size_t b, double *acc, double *energy)
{
    const lse_sim_fused_fn fn = t->par->fused;
    if (fn == NULL ||
        flags != (LSE_RUN_SCORE | LSE_RUN_SOFTMAX | LSE_RUN_STATS) ||
        t->keep || t->has_mask || t->beta != 1.0)
        return 0;
    const double *w =
        t->row_weight != NULL ? gsl_vector_ptr(t->row_weight, i0) : NULL;
    double *lse = gsl_vector_ptr(t->row_lse, i0);
    if (!fn(a, w, lse, acc))
        return 0;
    *energy = energy_sub(*energy, lse, w, b);
    return 1;
}

/* The blocks of one chunk. acc: the chunk's statistics (STATS). */
static void run_chunk(lse_term *t, term_chunk *ch, thread_slot *sl,
                      lse_sim_args *a, unsigned flags, double *acc,
                      size_t stride)
{
    const lse_sim_type *sim = t->sim;
    const size_t np = t->parent.count;
    const size_t end = ch->first + ch->count;
    ch->st = LSE_OK;
    ch->energy = 0.0;
    if (sl->st != LSE_OK) {
        chunk_fail(ch, sl->st, FAIL_PREPARE);
        return;
    }
    if (acc != NULL)
        memset(acc, 0, stride * sizeof *acc);
    if ((flags & LSE_RUN_GRAD) && t->par->private_grads) {
        if (ch->gparent != NULL)
            gsl_matrix_set_zero(ch->gparent);
        for (size_t k = 0; k < sim->n_param; k++)
            if (ch->gparam[k] != NULL)
                gsl_matrix_set_zero(ch->gparam[k]);
    }
    double energy = 0.0;
    for (size_t i0 = ch->first; i0 < end; i0 += t->block) {
        const size_t b = end - i0 < t->block ? end - i0 : t->block;
        gsl_matrix_view cv, xv, sv, av;
        block_args(t, i0, b, a, &cv, &xv);
        if (run_fused(t, a, flags, i0, b, acc, &energy))
            continue;
        if (t->keep) {
            sv = gsl_matrix_submatrix(t->s, i0, 0, b, np);
            av = gsl_matrix_submatrix(t->a, i0, 0, b, np);
        } else {
            sv = gsl_matrix_submatrix(sl->buf, 0, 0, b, np);
            av = sv;
        }
        if (flags & LSE_RUN_SCORE) {
            lse_status st = sim->eval(a, &sv.matrix);
            if (st != LSE_OK && chunk_fail(ch, st, FAIL_EVAL))
                return;
            if (t->has_mask)
                apply_mask(t, &sv.matrix, i0);
            size_t r, j;
            /* a mask only writes -INFINITY, a legal score */
            const int clean = t->par->clean != NULL && t->par->clean(a);
            if (!clean &&
                lse_softmax_find_bad(&sv.matrix, &t->par->isa, &r, &j)) {
                chunk_fail(ch, LSE_ENONFINITE, FAIL_CHECK);
                ch->row = i0 + r;
                ch->col = j;
                ch->value = gsl_matrix_get(&sv.matrix, r, j);
                return;
            }
        }
        if (flags & LSE_RUN_SOFTMAX) {
            double *lse = gsl_vector_ptr(t->row_lse, i0);
            lse_softmax_rows(&sv.matrix, &av.matrix, t->beta, lse, sl->rowmax,
                             &t->par->isa);
            const double *w = t->row_weight != NULL
                                  ? gsl_vector_ptr(t->row_weight, i0)
                                  : NULL;
            energy = energy_sub(energy, lse, w, b);
        }
        if (flags & LSE_RUN_STATS) {
            gsl_vector_view wv;
            const gsl_vector *w = NULL;
            if (t->row_weight != NULL) {
                wv = gsl_vector_subvector(t->row_weight, i0, b);
                w = &wv.vector;
            }
            /* exact: acc holds lse_xsum accumulators (zeroed above) */
            const lse_status st =
                (flags & LSE_RUN_STATS_EXACT)
                    ? sim->stats_exact(a, &av.matrix, w,
                                       (lse_xsum *)(void *)acc)
                    : sim->stats(a, &av.matrix, w, acc);
            if (st != LSE_OK && chunk_fail(ch, st, FAIL_STATS))
                return;
        }
        if (flags & LSE_RUN_GRAD) {
            /* G = dE/dS = -w A (in place for a streaming term) */
            gsl_matrix_view gv =
                t->keep ? gsl_matrix_submatrix(sl->buf, 0, 0, b, np) : av;
            const double *w = t->row_weight != NULL
                                  ? gsl_vector_ptr(t->row_weight, i0)
                                  : NULL;
            for (size_t r = 0; r < b; r++) {
                const double wr = w != NULL ? -w[r] : -1.0;
                const double *ar = gsl_matrix_const_ptr(&av.matrix, r, 0);
                double *gr = gsl_matrix_ptr(&gv.matrix, r, 0);
                for (size_t j = 0; j < np; j++)
                    gr[j] = wr * ar[j];
            }
            lse_sim_grads out;
            gsl_matrix_view cgv, pgv, xgv;
            grad_outputs(t, ch, &out, &cgv, &pgv, &xgv, i0, b);
            const lse_status st = sim->grad(a, &gv.matrix, &out);
            if (st != LSE_OK && chunk_fail(ch, st, FAIL_GRAD))
                return;
        }
    }
    ch->energy = energy;
}

/* Can chunks write their child and context rows concurrently? Not when
 * the context is another range of the child node (rows would be shared
 * between neighbouring chunks). */
static int rows_disjoint(const lse_term *t)
{
    return !(free_node(t->context.node) && t->context.node == t->child.node);
}

/* Everything a thread of run_chunks needs. */
typedef struct run_ctx {
    lse_term *t;
    const lse_sim_args *base;
    unsigned flags;
    double *acc;
    size_t stride;
} run_ctx;

/* One thread: prepare its slot's workspace, then take chunks. Called
 * inside the parallel region (team: the chunks shared out), or alone
 * (every chunk in order, outside any work-sharing: a caller inside an
 * active region of its own must not share them with that team). */
static void run_thread(const run_ctx *x, int tid, int team)
{
    /* tid < n_slot: the caller never starts more threads than slots */
    lse_term *t = x->t;
    lse_term_par *p = t->par;
    thread_slot *sl = &p->slot[tid];
    lse_sim_args a = *x->base;
    a.work = sl->work;
    sl->st = t->sim->prepare != NULL ? t->sim->prepare(&a) : LSE_OK;
    const long n = (long)p->n_chunk;
    if (!team) {
        /* a scoring pass takes the chunks last to first, so that what
         * the similarity keeps of the last block it scored (the
         * Gaussian's monomials of the rows) is the first chunk's, which
         * a statistics pass on the kept softmax (lse_term_restat) takes
         * first: at N = 272 (blocks of 256 and 16) it then rebuilds 16
         * rows, not 256. The chunks are independent (a team's threads
         * take them in any order): the same bits. Not with gradients:
         * without private copies they add up in chunk order. */
        const int rev = (x->flags & LSE_RUN_SCORE) &&
                        !(x->flags & LSE_RUN_GRAD);
        for (long i = 0; i < n; i++) {
            const long c = rev ? n - 1 - i : i;
            run_chunk(t, &p->chunk[c], sl, &a, x->flags,
                      x->acc != NULL ? x->acc + (size_t)c * x->stride : NULL,
                      x->stride);
        }
        return;
    }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (long c = 0; c < n; c++)
        run_chunk(t, &p->chunk[c], sl, &a, x->flags,
                  x->acc != NULL ? x->acc + (size_t)c * x->stride : NULL,
                  x->stride);
}

static lse_status chunk_error(lse_term *t, const term_chunk *ch, unsigned flags)
{
    const char *fn =
        (flags & LSE_RUN_GRAD) ? "lse_graph_gradient" : "lse_graph_energy";
    switch (ch->what) {
    case FAIL_PREPARE:
        return lse_graph_fail(t->graph, ch->st, "lse_graph_energy",
                              "term '%s': %s prepare: %s", t->name,
                              t->sim->name, lse_strerror(ch->st));
    case FAIL_EVAL:
        return lse_graph_fail(t->graph, ch->st, "lse_graph_energy",
                              "term '%s': %s eval: %s", t->name, t->sim->name,
                              lse_strerror(ch->st));
    case FAIL_CHECK:
        return lse_graph_fail(t->graph, LSE_ENONFINITE, "lse_graph_energy",
                              "term '%s' (%s): similarity[%zu,%zu] = %g",
                              t->name, t->sim->name, ch->row, ch->col,
                              ch->value);
    case FAIL_STATS:
        return lse_graph_fail(t->graph, ch->st, "lse_solver_iterate",
                              "term '%s': %s statistics: %s", t->name,
                              t->sim->name, lse_strerror(ch->st));
    default:
        return lse_graph_fail(t->graph, ch->st, fn, "term '%s': %s grad: %s",
                              t->name, t->sim->name, lse_strerror(ch->st));
    }
}

lse_status lse_term_run(lse_term *t, unsigned flags, double *acc, size_t stride)
{
    lse_term_par *p = t->par;
    if ((flags & LSE_RUN_STATS) &&
        (acc == NULL ||
         ((flags & LSE_RUN_STATS_EXACT) ? t->sim->stats_exact == NULL
                                        : t->sim->stats == NULL) ||
         (!(flags & LSE_RUN_SOFTMAX) && !t->keep)))
        return LSE_EINTERNAL;
    if (!(flags & LSE_RUN_SOFTMAX) && (flags & LSE_RUN_GRAD) && !t->keep)
        return LSE_EINTERNAL;
    lse_sim_args base;
    whole_args(t, &base);
    const double dc = 1.0 + (double)t->shape.d_child;
    int nt = lse_threads_for_work(p->n_chunk, (double)t->child.count *
                                                  (double)t->parent.count *
                                                  dc * dc);
    if (nt > (int)p->n_slot)
        nt = (int)p->n_slot;
    if ((flags & LSE_RUN_GRAD) && !rows_disjoint(t))
        nt = 1;
    const run_ctx x = {t, &base, flags, acc, stride};
    const int saved = lse_blas_serial_begin(nt);
    /* one thread: no region (libgomp makes a team even for one thread,
     * about 1 % of a small fit's instructions) */
    if (nt <= 1) {
        run_thread(&x, 0, 0);
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
        run_thread(&x, omp_get_thread_num(), 1);
#else
        run_thread(&x, 0, 0);
#endif
    }
    lse_blas_serial_end(saved);
    /* the first failing chunk, in chunk order */
    for (size_t c = 0; c < p->n_chunk; c++)
        if (p->chunk[c].st != LSE_OK)
            return chunk_error(t, &p->chunk[c], flags);
    if (flags & LSE_RUN_SOFTMAX) {
        double energy = 0.0;
        for (size_t c = 0; c < p->n_chunk; c++)
            energy += p->chunk[c].energy;
        t->energy = energy;
    }
    if ((flags & LSE_RUN_GRAD) && p->private_grads) {
        gsl_matrix_view pg;
        if (free_node(t->parent.node))
            pg = lse_view_grad(&t->parent);
        for (size_t c = 0; c < p->n_chunk; c++) {
            const term_chunk *ch = &p->chunk[c];
            if (ch->gparent != NULL)
                gsl_matrix_add(&pg.matrix, ch->gparent);
            for (size_t k = 0; k < t->sim->n_param; k++)
                if (ch->gparam[k] != NULL)
                    gsl_matrix_add(t->param[k]->grad, ch->gparam[k]);
        }
    }
    return LSE_OK;
}

lse_status lse_term_eval(lse_term *t, int want_grad)
{
    if (t->reduce != LSE_REDUCE_CHAIN) {
        unsigned flags = LSE_RUN_SCORE | LSE_RUN_SOFTMAX;
        double *acc = NULL;
        if (want_grad)
            flags |= LSE_RUN_GRAD;
        else if (t->par->sink != NULL) {
            flags |= LSE_RUN_STATS;
            acc = t->par->sink;
        }
        return lse_term_run(t, flags, acc, t->par->sink_stride);
    }
    lse_status st = lse_term_run(t, LSE_RUN_SCORE, NULL, 0);
    if (st != LSE_OK)
        return st;
    double energy;
    st = lse_chain_eval(t, want_grad, &energy);
    if (st != LSE_OK)
        return st;
    t->energy = energy;
    if (!want_grad)
        return LSE_OK;
    return lse_term_run(t, LSE_RUN_GRAD, NULL, 0);
}

/* Access ---------------------------------------------------------------- */

const char *lse_term_name(const lse_term *t) { return t ? t->name : NULL; }
lse_term_kind lse_term_kind_of(const lse_term *t)
{
    return t ? t->kind : LSE_TERM_LSE;
}
const lse_sim_type *lse_term_sim(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE ? t->sim : NULL;
}
const lse_custom_type *lse_term_custom(const lse_term *t)
{
    return t && t->kind == LSE_TERM_CUSTOM ? t->custom : NULL;
}
const void *lse_term_config(const lse_term *t) { return t ? t->config : NULL; }

int lse_term_describe(const lse_term *t, char *buf, size_t len)
{
    if (t == NULL || buf == NULL || len == 0)
        return -1;
    char cfg[256] = "";
    if (t->kind == LSE_TERM_LSE) {
        if (t->sim->describe != NULL && t->config != NULL)
            t->sim->describe(t->config, cfg, sizeof cfg);
        if (cfg[0] != '\0')
            return snprintf(buf, len, "LSE %s(%s)", t->sim->name, cfg);
        return snprintf(buf, len, "LSE %s", t->sim->name);
    }
    if (t->custom->describe != NULL && t->config != NULL)
        t->custom->describe(t->config, cfg, sizeof cfg);
    if (cfg[0] != '\0')
        return snprintf(buf, len, "%s(%s)", t->custom->name, cfg);
    return snprintf(buf, len, "%s", t->custom->name);
}

static const lse_view empty_view;

lse_view lse_term_child(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE ? t->child : empty_view;
}
lse_view lse_term_parent(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE ? t->parent : empty_view;
}
lse_view lse_term_context(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE ? t->context : empty_view;
}
size_t lse_term_n_param(const lse_term *t)
{
    if (t == NULL)
        return 0;
    return t->kind == LSE_TERM_LSE ? t->sim->n_param : t->n_view;
}
lse_node *lse_term_param(const lse_term *t, size_t i)
{
    if (t == NULL || i >= lse_term_n_param(t))
        return NULL;
    return t->kind == LSE_TERM_LSE ? t->param[i] : t->views[i].node;
}
size_t lse_term_n_views(const lse_term *t)
{
    return t && t->kind == LSE_TERM_CUSTOM ? t->n_view : 0;
}
lse_view lse_term_view(const lse_term *t, size_t i)
{
    if (t == NULL || t->kind != LSE_TERM_CUSTOM || i >= t->n_view)
        return empty_view;
    return t->views[i];
}
double lse_term_beta(const lse_term *t) { return t ? t->beta : 0.0; }
unsigned lse_term_mask(const lse_term *t) { return t ? t->mask : 0; }
lse_reduce lse_term_reduce(const lse_term *t)
{
    return t ? t->reduce : LSE_REDUCE_ROWS;
}
lse_node *lse_term_chain_init(const lse_term *t)
{
    return t ? t->chain_init : NULL;
}
lse_node *lse_term_chain_trans(const lse_term *t)
{
    return t ? t->chain_trans : NULL;
}
int lse_term_allowed(const lse_term *t, size_t i, size_t j)
{
    if (t == NULL || t->kind != LSE_TERM_LSE || i >= t->child.count ||
        j >= t->parent.count)
        return 0;
    return is_allowed(t, i, j);
}
double lse_term_energy(const lse_term *t) { return t ? t->energy : NAN; }
const gsl_matrix *lse_term_similarity(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE && t->keep ? t->s : NULL;
}
const gsl_matrix *lse_term_softmax(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE && t->keep ? t->a : NULL;
}
const gsl_vector *lse_term_row_lse(const lse_term *t)
{
    return t && t->kind == LSE_TERM_LSE && t->reduce == LSE_REDUCE_ROWS
               ? t->row_lse
               : NULL;
}
const gsl_matrix *lse_term_chain_xi(const lse_term *t)
{
    return t && t->chain ? lse_chain_xi(t->chain) : NULL;
}
const gsl_vector *lse_term_row_weight(const lse_term *t)
{
    return t ? t->row_weight : NULL;
}

lse_status lse_term_set_row_weight(lse_term *t, const gsl_vector *w)
{
    static const char fn[] = "lse_term_set_row_weight";
    if (t == NULL)
        return LSE_EFAULT;
    if (t->kind != LSE_TERM_LSE)
        return lse_graph_fail(t->graph, LSE_EINVAL, fn,
                              "term '%s' is not an LSE term", t->name);
    if (w == NULL) {
        gsl_vector_free(t->row_weight);
        t->row_weight = NULL;
        return LSE_OK;
    }
    if (t->reduce == LSE_REDUCE_CHAIN)
        return lse_graph_fail(t->graph, LSE_EINVAL, fn,
                              "term '%s': chain terms take no row weights",
                              t->name);
    if (w->size != t->child.count)
        return lse_graph_fail(t->graph, LSE_EDIM, fn,
                              "term '%s': %zu weights for %zu child rows",
                              t->name, w->size, t->child.count);
    for (size_t i = 0; i < w->size; i++) {
        const double v = gsl_vector_get(w, i);
        if (!isfinite(v) || v < 0.0)
            return lse_graph_fail(t->graph, LSE_EDOM, fn,
                                  "term '%s': weight[%zu] = %g, must be "
                                  "finite and >= 0",
                                  t->name, i, v);
    }
    if (t->row_weight == NULL) {
        t->row_weight = gsl_vector_alloc(w->size);
        if (t->row_weight == NULL)
            return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_vector_memcpy(t->row_weight, w);
    return LSE_OK;
}

int lse_term_enabled(const lse_term *t) { return t ? t->enabled : 0; }
void lse_term_set_enabled(lse_term *t, int enabled)
{
    if (t != NULL)
        t->enabled = enabled != 0;
}
