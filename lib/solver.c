#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exactsum-private.h"
#include "size-private.h"
#include "threads-private.h"
#include "rows-private.h"

/* Solvers: gradient descent with Armijo backtracking, and EM coordinate
 * ascent with closed-form M-steps (docs/solvers.md). */

struct lse_solver_type {
    const char *name;
    int em;
};

static const lse_solver_type gd_type = {"gd", 0};
static const lse_solver_type em_type = {"em", 1};
const lse_solver_type *const lse_solver_gd = &gd_type;
const lse_solver_type *const lse_solver_em = &em_type;

const char *lse_solver_type_name(const lse_solver_type *type)
{
    return type != NULL ? type->name : NULL;
}

typedef struct cf_term { /* an LSE term solved in closed form */
    lse_term *t;
    size_t offset, size; /* its statistics in the buffer */
    double *acc;         /* (n_chunk, size) per-chunk statistics, summed in
                            chunk order (lib/threads-private.h) */
    size_t n_chunk;
    int exact;      /* exact statistics (opts.exact_stats): */
    lse_xsum *xacc; /* (n_chunk, size) per-chunk accumulators */
    double *stats;  /* (size) the rounded sums, for solve */
    size_t n_buf;   /* doubles in the buffer: size, or size * EXPORT */
    gsl_matrix *parent_scratch; /* when the parent is not a free param */
    gsl_matrix **param_scratch; /* idem per parameter */
    gsl_matrix **param_out;
    unsigned char *empty; /* n_parent flags */
} cf_term;

struct lse_solver {
    lse_graph *g;
    const lse_solver_type *type;
    lse_solver_opts opts;
    lse_node **sel; /* selected nodes, or NULL = all free */
    size_t n_sel;
    lse_estep_fn estep;
    void *estep_user;
    lse_mstep_fn mstep_hook;
    void *mstep_user;
    lse_reduce_fn reduce;
    void *reduce_user;
    lse_mstep_group grp; /* grp.stats NULL: none */

    int ready;
    double energy, prev_energy, delta, grad_norm, step;
    size_t n_iter, n_increase;
    int no_step;
    /* curvature pairs: x0/d0 hold the point and gradient of the last
     * accepted step on bb_nodes (valid when bb_valid) */
    lse_node *const *bb_nodes;
    size_t bb_n;
    int bb_valid;
    size_t bb_iter; /* accepted steps with a curvature pair, for BB1/BB2 */

    /* scratch, allocated by init */
    lse_node **upd; /* nodes updated by gradient steps */
    size_t n_upd;
    lse_node **state, **gparam; /* EM: state nodes, gradient-step params */
    size_t n_state, n_gparam;
    gsl_matrix **x0; /* saved values, one per graph node */
    gsl_matrix **d0; /* saved gradients */
    cf_term *cf;
    size_t n_cf;
    lse_term **chains;
    size_t n_chain;
    double *buf; /* [energy, stats..., chain stats..., gradients (gd)] */
    size_t n_buf;
    double xbuf[LSE_XSUM_EXPORT]; /* exact_stats: the exported energy */
};

lse_solver_opts lse_solver_opts_default(void)
{
    lse_solver_opts o;
    memset(&o, 0, sizeof o);
    o.step = 1.0;
    o.line_search = 1;
    o.armijo = 1e-4;
    o.shrink = 0.5;
    o.grow = 2.0;
    o.max_backtrack = 60;
    o.tol_energy = 1e-8;
    o.tol_grad = 0.0;
    o.estep_steps = 1;
    o.mstep_steps = 1;
    o.increase_tol = 1e-10;
    o.mstep = lse_mstep_opts_default();
    return o;
}

lse_mstep_opts lse_mstep_opts_default(void)
{
    lse_mstep_opts m = {.reg_covar = 1e-6, .min_count = 1e-10};
    return m;
}

static void free_scratch(lse_solver *s)
{
    for (size_t i = 0; s->x0 != NULL && i < lse_graph_n_nodes(s->g); i++) {
        gsl_matrix_free(s->x0[i]);
        gsl_matrix_free(s->d0[i]);
    }
    free(s->x0);
    free(s->d0);
    s->x0 = s->d0 = NULL;
    for (size_t i = 0; i < s->n_cf; i++) {
        cf_term *c = &s->cf[i];
        gsl_matrix_free(c->parent_scratch);
        free(c->acc);
        free(c->xacc);
        free(c->stats);
        for (size_t k = 0; c->param_scratch && k < c->t->sim->n_param; k++)
            gsl_matrix_free(c->param_scratch[k]);
        free(c->param_scratch);
        free(c->param_out);
        free(c->empty);
    }
    free(s->cf);
    s->cf = NULL;
    s->n_cf = 0;
    free(s->chains);
    s->chains = NULL;
    s->n_chain = 0;
    free(s->upd);
    free(s->state);
    free(s->gparam);
    s->upd = s->state = s->gparam = NULL;
    free(s->buf);
    s->buf = NULL;
    s->ready = 0;
}

lse_solver *lse_solver_new(lse_graph *g, const lse_solver_type *type)
{
    lse_gsl_quiet();
    if (g == NULL || type == NULL)
        return NULL;
    lse_solver *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->g = g;
    s->type = type;
    s->opts = lse_solver_opts_default();
    s->energy = s->prev_energy = s->delta = NAN;
    return s;
}

void lse_solver_free(lse_solver *s)
{
    if (s == NULL)
        return;
    free_scratch(s);
    free(s->sel);
    free(s);
}

lse_status lse_solver_set_opts(lse_solver *s, const lse_solver_opts *o)
{
    static const char fn[] = "lse_solver_set_opts";
    if (s == NULL || o == NULL)
        return LSE_EFAULT;
    if (!(o->step > 0.0) || !isfinite(o->step) || !(o->shrink > 0.0) ||
        !(o->shrink < 1.0) || !(o->grow >= 1.0) || !(o->armijo > 0.0) ||
        !(o->armijo < 1.0) || !(o->tol_energy >= 0.0) ||
        !(o->tol_grad >= 0.0) || !(o->increase_tol >= 0.0) ||
        !(o->mstep.reg_covar >= 0.0) || !(o->mstep.min_count >= 0.0))
        return lse_graph_fail(s->g, LSE_EDOM, fn,
                              "step > 0, 0 < shrink < 1, grow >= 1, 0 < armijo "
                              "< 1 and non-negative tolerances required");
    s->opts = *o;
    return LSE_OK;
}

lse_status lse_solver_set_nodes(lse_solver *s, lse_node *const *nodes, size_t n)
{
    if (s == NULL)
        return LSE_EFAULT;
    free(s->sel);
    s->sel = NULL;
    s->n_sel = 0;
    s->ready = 0;
    if (nodes == NULL || n == 0)
        return LSE_OK;
    for (size_t i = 0; i < n; i++)
        if (nodes[i] == NULL || lse_node_graph(nodes[i]) != s->g)
            return lse_graph_fail(s->g, LSE_EINVAL, "lse_solver_set_nodes",
                                  "node %zu is NULL or of another graph", i);
    s->sel = calloc(n, sizeof *s->sel); /* calloc checks n * size */
    if (s->sel == NULL)
        return lse_graph_fail(s->g, LSE_ENOMEM, "lse_solver_set_nodes",
                              "out of memory");
    memcpy(s->sel, nodes, n * sizeof *s->sel);
    s->n_sel = n;
    return LSE_OK;
}

void lse_solver_set_estep(lse_solver *s, lse_estep_fn fn, void *user)
{
    if (s != NULL) {
        s->estep = fn;
        s->estep_user = user;
    }
}

lse_status lse_solver_set_group(lse_solver *s, const lse_mstep_group *grp)
{
    if (s == NULL || (grp != NULL && (grp->stats == NULL ||
                                      grp->solve == NULL ||
                                      (grp->n_nodes > 0 && grp->nodes == NULL))))
        return LSE_EFAULT;
    if (!s->type->em)
        return lse_graph_fail(s->g, LSE_EINVAL, "lse_solver_set_group",
                              "a group M-step needs the EM solver");
    if (grp != NULL)
        s->grp = *grp;
    else
        memset(&s->grp, 0, sizeof s->grp);
    s->ready = 0;
    return LSE_OK;
}

void lse_solver_set_mstep_hook(lse_solver *s, lse_mstep_fn fn, void *user)
{
    if (s != NULL) {
        s->mstep_hook = fn;
        s->mstep_user = user;
    }
}

void lse_solver_set_reduce(lse_solver *s, lse_reduce_fn fn, void *user)
{
    if (s != NULL) {
        s->reduce = fn;
        s->reduce_user = user;
    }
}

static int selected(const lse_solver *s, const lse_node *n)
{
    if (n->flags & LSE_NODE_CLAMPED)
        return 0;
    if (s->sel == NULL)
        return 1;
    for (size_t i = 0; i < s->n_sel; i++)
        if (s->sel[i] == n)
            return 1;
    return 0;
}

static int in_group(const lse_solver *s, const lse_node *n)
{
    for (size_t i = 0; s->grp.stats != NULL && i < s->grp.n_nodes; i++)
        if (s->grp.nodes[i] == n)
            return 1;
    return 0;
}

static int free_param(const lse_solver *s, const lse_node *n)
{
    return n != NULL && (n->flags & LSE_NODE_PARAM) && selected(s, n) &&
           !in_group(s, n);
}

static lse_status do_reduce(lse_solver *s, double *buf, size_t n)
{
    if (s->reduce == NULL || n == 0)
        return LSE_OK;
    const lse_status st = s->reduce(buf, n, s->reduce_user);
    if (st != LSE_OK)
        return lse_graph_fail(s->g, st, "lse_solver_iterate",
                              "reduction hook failed: %s", lse_strerror(st));
    return LSE_OK;
}

/* exact_stats: the energy of the graph just evaluated, summed exactly --
 * every row's -w log-sum-exp of a rows term (its row_lse), the other terms'
 * energies as they are (a chain's or a custom term's value does not depend
 * on threads or blocks) -- over the processes too, rounded once, so that
 * it has the same bits for any split of the rows. */
static lse_status exact_energy(lse_solver *s, double *e)
{
    lse_xsum x;
    lse_xsum_init(&x);
    for (size_t m = 0; m < s->g->n_terms; m++) {
        const lse_term *t = s->g->terms[m];
        if (!t->enabled)
            continue;
        if (t->kind != LSE_TERM_LSE || t->reduce != LSE_REDUCE_ROWS) {
            lse_xsum_add(&x, t->energy);
            continue;
        }
        const size_t n = t->row_lse->size, st = t->row_lse->stride;
        const double *l = t->row_lse->data;
        const double *w = t->row_weight != NULL ? t->row_weight->data : NULL;
        const size_t sw = t->row_weight != NULL ? t->row_weight->stride : 0;
        for (size_t r = 0; r < n; r++) /* as lib/term.c adds them */
            if (l[r * st] != -INFINITY) /* a masked row adds nothing */
                lse_xsum_add(&x, -(w != NULL ? w[r * sw] : 1.0) * l[r * st]);
    }
    if (s->reduce != NULL) {
        lse_xsum_export(&x, s->xbuf);
        lse_status st = do_reduce(s, s->xbuf, LSE_XSUM_EXPORT);
        if (st == LSE_OK && lse_xsum_import(&x, s->xbuf) != LSE_OK)
            st = lse_graph_fail(s->g, LSE_EDOM, "lse_solver_iterate",
                                "energy: the reduction did not sum exported "
                                "exact accumulators");
        if (st != LSE_OK)
            return st;
    }
    *e = lse_xsum_round(&x);
    return LSE_OK;
}

static lse_status reduced_energy(lse_solver *s, int grad, double *e)
{
    lse_status st =
        grad ? lse_graph_gradient(s->g, e) : lse_graph_energy(s->g, e);
    if (st != LSE_OK)
        return st;
    if (s->opts.exact_stats && s->type->em)
        return exact_energy(s, e);
    if (s->reduce != NULL) {
        double v = *e;
        st = do_reduce(s, &v, 1);
        *e = v;
    }
    return st;
}

static int in_cf(const lse_solver *s, const lse_node *n)
{
    for (size_t i = 0; i < s->n_cf; i++) {
        const lse_term *t = s->cf[i].t;
        if (t->parent.node == n)
            return 1;
        for (size_t k = 0; k < t->sim->n_param; k++)
            if (t->param[k] == n)
                return 1;
    }
    for (size_t i = 0; i < s->n_chain; i++)
        if (s->chains[i]->chain_init == n || s->chains[i]->chain_trans == n)
            return 1;
    return 0;
}

/* Write one double of every page of p (n doubles, calloc'd): the pages of
 * a large calloc are mapped on first write, and the chunk statistics of a
 * fit (16 MiB at d = 64, K = 32) took their page faults in the first
 * E-step, a fifth of that iteration's time on one thread. Here they are
 * part of the set-up, as the allocation is. */
static void prefault(double *p, size_t n)
{
    volatile double *v = p;
    for (size_t i = 0; i < n; i += 4096 / sizeof *p)
        v[i] = 0.0;
}

static lse_status setup_cf(lse_solver *s, size_t *n_stats)
{
    lse_graph *g = s->g;
    const size_t nt = lse_graph_n_terms(g);
    s->cf = calloc(nt + 1, sizeof *s->cf);
    s->chains = calloc(nt + 1, sizeof *s->chains);
    if (s->cf == NULL || s->chains == NULL)
        return LSE_ENOMEM;
    size_t off = 1; /* buf[0] = energy */
    for (size_t m = 0; m < nt; m++) {
        lse_term *t = g->terms[m];
        if (t->kind != LSE_TERM_LSE || !t->enabled)
            continue;
        const lse_sim_type *sim = t->sim;
        int any = free_param(s, t->parent.node);
        for (size_t k = 0; k < sim->n_param; k++)
            any = any || free_param(s, t->param[k]);
        /* rows terms accumulate their statistics while the E-step
         * evaluates them (streaming terms too); chain terms keep their
         * posteriors and run a statistics pass */
        if (any && sim->stats != NULL && sim->solve != NULL &&
            sim->stats_size != NULL &&
            (t->keep || t->reduce == LSE_REDUCE_ROWS)) {
            cf_term *c = &s->cf[s->n_cf++];
            c->t = t;
            c->offset = off;
            c->size = sim->stats_size(&t->shape, t->config);
            c->n_chunk = lse_term_n_chunk(t);
            c->exact = s->opts.exact_stats && sim->stats_exact != NULL;
            size_t n_acc; /* (n_chunk, size) accumulators + 1 */
            if (lse_size_mul(c->size, c->exact ? LSE_XSUM_EXPORT : 1,
                             &c->n_buf) ||
                lse_size_add(off, c->n_buf, &off) ||
                lse_size_mul(c->n_chunk, c->size, &n_acc) ||
                lse_size_add(n_acc, 1, &n_acc) ||
                lse_size_array_overflows(n_acc, 1,
                                         c->exact ? sizeof *c->xacc
                                                  : sizeof *c->acc))
                return LSE_ENOMEM;
            if (c->exact) {
                c->xacc = calloc(n_acc, sizeof *c->xacc);
                c->stats = calloc(c->size + 1, sizeof *c->stats);
                if (c->xacc == NULL || c->stats == NULL)
                    return LSE_ENOMEM;
            } else {
                c->acc = calloc(n_acc, sizeof *c->acc);
                if (c->acc == NULL)
                    return LSE_ENOMEM;
                prefault(c->acc, n_acc);
            }
            c->param_scratch =
                calloc(sim->n_param + 1, sizeof *c->param_scratch);
            c->param_out = calloc(sim->n_param + 1, sizeof *c->param_out);
            c->empty = calloc(t->parent.count, 1);
            if (c->param_scratch == NULL || c->param_out == NULL ||
                c->empty == NULL)
                return LSE_ENOMEM;
            if (!free_param(s, t->parent.node)) {
                c->parent_scratch =
                    gsl_matrix_alloc(t->parent.count, t->shape.d_parent);
                if (c->parent_scratch == NULL)
                    return LSE_ENOMEM;
            }
            for (size_t k = 0; k < sim->n_param; k++) {
                if (t->param[k] == NULL || free_param(s, t->param[k]))
                    continue;
                c->param_scratch[k] =
                    gsl_matrix_alloc(t->param_rows[k], t->param_cols[k]);
                if (c->param_scratch[k] == NULL)
                    return LSE_ENOMEM;
            }
        }
        if (t->reduce == LSE_REDUCE_CHAIN &&
            (free_param(s, t->chain_init) || free_param(s, t->chain_trans))) {
            s->chains[s->n_chain++] = t;
            const size_t K = t->parent.count; /* post0, xi, n_seq */
            size_t kk;
            if (lse_size_mul(K, K, &kk) || lse_size_add(off, kk, &off) ||
                lse_size_add(off, K + 1, &off))
                return LSE_ENOMEM;
        }
    }
    if (s->grp.stats != NULL && lse_size_add(off, s->grp.n_stats, &off))
        return LSE_ENOMEM;
    *n_stats = off;
    return LSE_OK;
}

lse_status lse_solver_init(lse_solver *s)
{
    static const char fn[] = "lse_solver_init";
    if (s == NULL)
        return LSE_EFAULT;
    free_scratch(s);
    lse_graph *g = s->g;
    const size_t nn = lse_graph_n_nodes(g);
    s->x0 = calloc(nn + 1, sizeof *s->x0);
    s->d0 = calloc(nn + 1, sizeof *s->d0);
    s->upd = calloc(nn + 1, sizeof *s->upd);
    s->state = calloc(nn + 1, sizeof *s->state);
    s->gparam = calloc(nn + 1, sizeof *s->gparam);
    if (s->x0 == NULL || s->d0 == NULL || s->upd == NULL || s->state == NULL ||
        s->gparam == NULL)
        goto nomem;
    size_t n_stats = 1;
    if (s->type->em && setup_cf(s, &n_stats) != LSE_OK)
        goto nomem;
    s->n_upd = s->n_state = s->n_gparam = 0;
    size_t n_grad = 0;
    for (size_t i = 0; i < nn; i++) {
        lse_node *n = g->nodes[i];
        if (!selected(s, n))
            continue;
        s->x0[i] = gsl_matrix_alloc(n->value->size1, n->value->size2);
        s->d0[i] = gsl_matrix_alloc(n->value->size1, n->value->size2);
        if (s->x0[i] == NULL || s->d0[i] == NULL)
            goto nomem;
        if (!s->type->em) {
            s->upd[s->n_upd++] = n;
            if (lse_size_add(n_grad, n->value->size1 * n->value->size2,
                             &n_grad))
                goto toobig;
        } else if (!(n->flags & LSE_NODE_PARAM)) {
            s->state[s->n_state++] = n;
        } else if (!in_cf(s, n) && !in_group(s, n)) {
            s->gparam[s->n_gparam++] = n;
        }
    }
    if (lse_size_add(n_stats, n_grad, &s->n_buf) ||
        lse_size_array_overflows(s->n_buf, 1, sizeof *s->buf))
        goto toobig;
    s->buf = calloc(s->n_buf, sizeof *s->buf);
    if (s->buf == NULL)
        goto nomem;
    s->n_iter = s->n_increase = 0;
    s->no_step = 0;
    s->step = s->opts.step;
    s->bb_valid = 0;
    s->bb_iter = 0;
    s->delta = NAN;
    s->prev_energy = NAN;
    s->ready = 1;
    lse_status st = reduced_energy(s, !s->type->em, &s->energy);
    if (st != LSE_OK)
        return st;
    if (!isfinite(s->energy))
        return lse_graph_fail(g, LSE_ENONFINITE, fn, "initial energy is %g",
                              s->energy);
    return LSE_OK;
nomem:
    free_scratch(s);
    return lse_graph_fail(g, LSE_ENOMEM, fn,
                          "out of memory (or statistics sizes that exceed "
                          "the address space)");
toobig:
    free_scratch(s);
    return lse_graph_fail(g, LSE_ENOMEM, fn,
                          "the free nodes' gradients exceed the address space");
}

/* Squared norm of the gradient over nodes (reduced across processes when a
 * hook is set: the gradient itself is summed first). */
static lse_status grad_norm2(lse_solver *s, lse_node *const *nodes, size_t n,
                             double *out)
{
    if (s->reduce != NULL) {
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            const gsl_matrix *gr = nodes[i]->grad;
            for (size_t r = 0; r < gr->size1; r++)
                for (size_t c = 0; c < gr->size2; c++)
                    s->buf[off++] = gsl_matrix_get(gr, r, c);
        }
        lse_status st = do_reduce(s, s->buf, off);
        if (st != LSE_OK)
            return st;
        off = 0;
        for (size_t i = 0; i < n; i++) {
            gsl_matrix *gr = nodes[i]->grad;
            for (size_t r = 0; r < gr->size1; r++)
                for (size_t c = 0; c < gr->size2; c++)
                    gsl_matrix_set(gr, r, c, s->buf[off++]);
        }
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const gsl_matrix *gr = nodes[i]->grad;
        for (size_t r = 0; r < gr->size1; r++)
            for (size_t c = 0; c < gr->size2; c++) {
                const double v = gsl_matrix_get(gr, r, c);
                sum += v * v;
            }
    }
    *out = sum;
    return LSE_OK;
}

static size_t node_index(const lse_solver *s, const lse_node *n)
{
    for (size_t i = 0; i < s->g->n_nodes; i++)
        if (s->g->nodes[i] == n)
            return i;
    return 0;
}

/* Barzilai-Borwein trial step from the curvature pair of the last accepted
 * step on the same nodes: u = x - x_prev, y = g - g_prev, alternating
 * BB1 = u.u / u.y (long) and BB2 = u.y / y.y (short), which damps the
 * zig-zag of either alone. Returns 0 (no step) without positive curvature;
 * kept within [opts.step 1e-10, opts.step 1e10]. */
static double bb_step(lse_solver *s, lse_node *const *nodes, size_t n)
{
    if (!s->bb_valid || s->bb_nodes != nodes || s->bb_n != n)
        return 0.0;
    double uu = 0.0, uy = 0.0, yy = 0.0;
    for (size_t i = 0; i < n; i++) {
        const size_t k = node_index(s, nodes[i]);
        const gsl_matrix *x = nodes[i]->value, *g = nodes[i]->grad;
        const gsl_matrix *x0 = s->x0[k], *g0 = s->d0[k];
        for (size_t r = 0; r < x->size1; r++)
            for (size_t c = 0; c < x->size2; c++) {
                const double u = gsl_matrix_get(x, r, c) - gsl_matrix_get(x0, r, c);
                const double y = gsl_matrix_get(g, r, c) - gsl_matrix_get(g0, r, c);
                uu += u * u;
                uy += u * y;
                yy += y * y;
            }
    }
    if (!(uy > 0.0) || !isfinite(uu) || !isfinite(yy) || !(yy > 0.0))
        return 0.0;
    double t = s->bb_iter % 2 == 0 ? uu / uy : uy / yy;
    const double lo = s->opts.step * 1e-10, hi = s->opts.step * 1e10;
    if (!isfinite(t))
        return 0.0;
    return t < lo ? lo : t > hi ? hi : t;
}

/* One descent step on nodes from the gradient just computed (node grads
 * hold dE/dv at energy *e). Updates *e; sets *moved. The trial step is,
 * with use_bb (the GD solver), the Barzilai-Borwein step when the last
 * accepted step on the same nodes gives a curvature pair; else (and for
 * EM's gradient steps) the remembered step: opts.step at first, then the
 * last accepted step times grow. Armijo backtracking keeps the energy
 * monotone. */
static lse_status descend(lse_solver *s, lse_node *const *nodes, size_t n,
                          int use_bb, double *e, int *moved)
{
    *moved = 0;
    if (n == 0)
        return LSE_OK;
    double gn2;
    lse_status st = grad_norm2(s, nodes, n, &gn2);
    if (st != LSE_OK)
        return st;
    s->grad_norm = sqrt(gn2);
    if (gn2 == 0.0)
        return LSE_OK;
    const double bb =
        use_bb && s->opts.line_search ? bb_step(s, nodes, n) : 0.0;
    for (size_t i = 0; i < n; i++) {
        const size_t k = node_index(s, nodes[i]);
        lse_copy_rows_checked(s->x0[k], nodes[i]->value);
        lse_copy_rows_checked(s->d0[k], nodes[i]->grad);
    }
    s->bb_valid = 0; /* until a step is accepted */
    const double e0 = *e;
    double step = bb > 0.0 ? bb : s->step;
    const size_t tries = s->opts.line_search ? s->opts.max_backtrack + 1 : 1;
    for (size_t t = 0; t < tries; t++) {
        for (size_t i = 0; i < n; i++) {
            const size_t k = node_index(s, nodes[i]);
            lse_copy_rows_checked(nodes[i]->value, s->x0[k]);
            gsl_matrix_scale(s->d0[k], -step);
            gsl_matrix_add(nodes[i]->value, s->d0[k]);
            gsl_matrix_scale(s->d0[k], -1.0 / step);
        }
        double e1;
        st = reduced_energy(s, 0, &e1);
        if (st == LSE_ENONFINITE && s->opts.line_search) {
            e1 = INFINITY; /* overshoot: shrink */
            st = LSE_OK;
        }
        if (st != LSE_OK)
            return st;
        if (!s->opts.line_search || e1 <= e0 - s->opts.armijo * step * gn2) {
            if (!isfinite(e1))
                return lse_graph_fail(
                    s->g, LSE_ENONFINITE, "lse_solver_iterate",
                    "energy is %g after a step of %g", e1, step);
            *e = e1;
            *moved = 1;
            s->step = s->opts.line_search ? step * s->opts.grow : step;
            if (use_bb && s->opts.line_search) {
                s->bb_iter += bb > 0.0;
                s->bb_nodes = nodes;
                s->bb_n = n;
                s->bb_valid = 1;
            }
            return LSE_OK;
        }
        step *= s->opts.shrink;
    }
    /* no decrease: restore */
    for (size_t i = 0; i < n; i++) {
        const size_t k = node_index(s, nodes[i]);
        lse_copy_rows_checked(nodes[i]->value, s->x0[k]);
    }
    st = reduced_energy(s, 0, e);
    s->no_step = 1;
    return st;
}

static lse_status iterate_gd(lse_solver *s)
{
    /* gradient at the current point is fresh from init or the last step */
    double e = s->energy;
    int moved;
    lse_status st = descend(s, s->upd, s->n_upd, 1, &e, &moved);
    if (st != LSE_OK)
        return st;
    s->prev_energy = s->energy;
    s->energy = e;
    s->delta = e - s->prev_energy;
    /* fresh gradient for the next iteration and for the test */
    st = reduced_energy(s, 1, &e);
    if (st != LSE_OK)
        return st;
    double gn2;
    st = grad_norm2(s, s->upd, s->n_upd, &gn2);
    s->grad_norm = sqrt(gn2);
    return st;
}

static lse_status gradient_steps(lse_solver *s, lse_node *const *nodes,
                                 size_t n, size_t steps, double *e)
{
    for (size_t k = 0; k < steps && n > 0; k++) {
        lse_status st = reduced_energy(s, 1, e);
        if (st != LSE_OK)
            return st;
        int moved;
        st = descend(s, nodes, n, 0, e, &moved);
        if (st != LSE_OK)
            return st;
        if (!moved)
            break;
    }
    return LSE_OK;
}

/* Statistics per chunk summed in chunk order: out[i] = src[i] + src[size +
 * i] + ... for every i. The entries are split between threads (slices of
 * RED_SLICE doubles, 1 MiB per chunk for the c/full benchmark, 16 chunks:
 * serial, this pass was a few per cent of a 2-thread iteration), each
 * entry is still summed by one thread in chunk order: the same bits for
 * any thread count. */
#define RED_SLICE 4096

/* slice q of chunk_sum */
static void slice_sum(double *out, const double *src, size_t n_chunk,
                      size_t size, size_t q)
{
    const size_t i0 = q * RED_SLICE;
    const size_t n = size - i0 < RED_SLICE ? size - i0 : RED_SLICE;
    double *o = out + i0;
    memcpy(o, src + i0, n * sizeof *o);
    for (size_t k = 1; k < n_chunk; k++) {
        const double *sk = src + k * size + i0;
        for (size_t i = 0; i < n; i++)
            o[i] += sk[i];
    }
}

static void chunk_sum(double *out, const double *src, size_t n_chunk,
                      size_t size)
{
    const size_t n_slice = (size + RED_SLICE - 1) / RED_SLICE;
    const int nt = lse_threads_for_sum(n_slice, (double)n_chunk * (double)size);
    const long ns = (long)n_slice;
    if (nt <= 1) { /* no region for one thread (libgomp makes a team) */
        for (long q = 0; q < ns; q++)
            slice_sum(out, src, n_chunk, size, (size_t)q);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (long q = 0; q < ns; q++)
        slice_sum(out, src, n_chunk, size, (size_t)q);
}

/* Sum the per-chunk statistics of c in chunk order into the buffer; chain
 * terms first run their statistics pass over the kept posteriors (rows
 * terms filled c->acc during the E-step evaluation). */
static lse_status cf_stats(lse_solver *s, cf_term *c)
{
    lse_term *t = c->t;
    if (c->exact) {
        /* a statistics pass (rows terms that do not keep their softmax
         * recompute it), chunks merged exactly, exported for the
         * reduction */
        unsigned flags = LSE_RUN_STATS | LSE_RUN_STATS_EXACT;
        if (t->reduce != LSE_REDUCE_CHAIN && !t->keep)
            flags |= LSE_RUN_SCORE | LSE_RUN_SOFTMAX;
        const lse_status st = lse_term_run(t, flags, (double *)(void *)c->xacc,
                                           c->size * LSE_XSUM_DOUBLES);
        if (st != LSE_OK)
            return st;
        double *out = s->buf + c->offset;
        for (size_t i = 0; i < c->size; i++) {
            lse_xsum *x = &c->xacc[i];
            for (size_t k = 1; k < c->n_chunk; k++)
                lse_xsum_merge(x, &c->xacc[k * c->size + i]);
            lse_xsum_export(x, out + i * LSE_XSUM_EXPORT);
        }
        return LSE_OK;
    }
    if (t->reduce == LSE_REDUCE_CHAIN) {
        const lse_status st = lse_term_run(t, LSE_RUN_STATS, c->acc, c->size);
        if (st != LSE_OK)
            return st;
    }
    chunk_sum(s->buf + c->offset, c->acc, c->n_chunk, c->size);
    return LSE_OK;
}

/* Exact statistics: the (reduced) exported accumulators, rounded once. */
static lse_status cf_round(lse_solver *s, cf_term *c)
{
    if (!c->exact)
        return LSE_OK;
    const double *in = s->buf + c->offset;
    lse_xsum x;
    for (size_t i = 0; i < c->size; i++) {
        if (lse_xsum_import(&x, in + i * LSE_XSUM_EXPORT) != LSE_OK)
            return lse_graph_fail(s->g, LSE_EDOM, "lse_solver_iterate",
                                  "term '%s': statistic %zu: the reduction "
                                  "did not sum exported exact accumulators",
                                  c->t->name, i);
        c->stats[i] = lse_xsum_round(&x);
    }
    return LSE_OK;
}

/* Energy of the E-step; rows terms solved in closed form also accumulate
 * their M-step statistics in the same pass over the data. */
static lse_status estep_energy(lse_solver *s, double *e)
{
    for (size_t i = 0; i < s->n_cf; i++) {
        cf_term *c = &s->cf[i];
        if (c->exact)
            continue; /* cf_stats takes its own pass */
        /* every chunk of an enabled rows term zeroes its own statistics
         * before it accumulates (lib/term.c run_chunk): no serial pass
         * over all of them here (16 MiB per iteration for c/full) */
        if (c->t->reduce != LSE_REDUCE_ROWS || !c->t->enabled)
            memset(c->acc, 0, c->n_chunk * c->size * sizeof *c->acc);
        if (c->t->reduce == LSE_REDUCE_ROWS)
            lse_term_set_stats_sink(c->t, c->acc, c->size);
    }
    const lse_status st = lse_graph_energy(s->g, e);
    for (size_t i = 0; i < s->n_cf; i++)
        lse_term_set_stats_sink(s->cf[i].t, NULL, 0);
    return st;
}

static lse_status cf_solve(lse_solver *s, cf_term *c)
{
    lse_term *t = c->t;
    lse_sim_args a;
    lse_status st = lse_term_sim_args(t, &a);
    if (st != LSE_OK)
        return st;
    gsl_matrix *parent = c->parent_scratch;
    gsl_matrix_view pv;
    if (parent == NULL) {
        pv = lse_view_value(&t->parent);
        parent = &pv.matrix;
    } else {
        lse_copy_rows_checked(parent, a.parent);
    }
    for (size_t k = 0; k < t->sim->n_param; k++) {
        c->param_out[k] = NULL;
        if (t->param[k] == NULL)
            continue;
        if (c->param_scratch[k] != NULL) {
            lse_copy_rows_checked(c->param_scratch[k], t->param[k]->value);
            c->param_out[k] = c->param_scratch[k];
        } else {
            c->param_out[k] = t->param[k]->value;
        }
    }
    memset(c->empty, 0, t->parent.count);
    lse_mstep_report rep = {.empty = c->empty};
    char msg[512] = "";
    const double *stats = c->exact ? c->stats : s->buf + c->offset;
    st = t->sim->solve(&a, stats, parent, c->param_out, &s->opts.mstep, &rep,
                       msg, sizeof msg);
    if (st != LSE_OK)
        return lse_graph_fail(s->g, st, "lse_solver_iterate",
                              "term '%s': M-step: %s", t->name,
                              msg[0] ? msg : lse_strerror(st));
    if (s->mstep_hook != NULL) {
        st = s->mstep_hook(s->g, t, &rep, s->mstep_user);
        if (st != LSE_OK)
            return st;
    }
    return LSE_OK;
}

/* The closed-form M-steps with a single-threaded BLAS. Their products are
 * of the parameters' size (d x d factors, K x K), too small to gain from
 * OpenBLAS's threads, and a threaded call leaves OpenBLAS's workers
 * spinning in sched_yield for a while after it, on the cores the next
 * E-step's threads need (a tenth of the samples of a 2-thread c/full fit;
 * docs/performance.md, "Full covariances, session 8"). So the M-step
 * also rounds the same for any OpenBLAS thread count. */
static lse_status cf_solve_all(lse_solver *s)
{
    const int saved = lse_blas_serial_begin(1);
    lse_status st = LSE_OK;
    for (size_t i = 0; st == LSE_OK && i < s->n_cf; i++)
        st = cf_solve(s, &s->cf[i]);
    lse_blas_serial_end(saved);
    return st;
}

static size_t chain_offset(const lse_solver *s, size_t i)
{
    size_t off = 1;
    for (size_t k = 0; k < s->n_cf; k++)
        off += s->cf[k].n_buf;
    for (size_t k = 0; k < i; k++) {
        const size_t K = s->chains[k]->parent.count;
        off += K + K * K + 1;
    }
    return off;
}

static void chain_stats(lse_solver *s, size_t i)
{
    const lse_term *t = s->chains[i];
    const size_t K = t->parent.count;
    double *acc = s->buf + chain_offset(s, i);
    const gsl_matrix *post0 = lse_chain_init_post(t->chain);
    const gsl_matrix *xi = lse_chain_xi(t->chain);
    for (size_t k = 0; k < K; k++)
        acc[k] = gsl_matrix_get(post0, 0, k);
    for (size_t j = 0; j < K; j++)
        for (size_t k = 0; k < K; k++)
            acc[K + j * K + k] = gsl_matrix_get(xi, j, k);
    double nseq = 0.0;
    for (size_t k = 0; k < K; k++)
        nseq += acc[k];
    acc[K + K * K] = nseq;
}

static void chain_solve(lse_solver *s, size_t i)
{
    lse_term *t = s->chains[i];
    const size_t K = t->parent.count;
    const double *acc = s->buf + chain_offset(s, i);
    const double floor =
        s->opts.mstep.min_count > 0 ? s->opts.mstep.min_count : 1e-300;
    if (free_param(s, t->chain_init)) {
        const double total = acc[K + K * K];
        for (size_t k = 0; k < K; k++) {
            const double v = acc[k] > floor ? acc[k] : floor;
            gsl_matrix_set(t->chain_init->value, 0, k, log(v / total));
        }
    }
    if (free_param(s, t->chain_trans)) {
        for (size_t j = 0; j < K; j++) {
            double row = 0.0;
            for (size_t k = 0; k < K; k++)
                row += acc[K + j * K + k];
            if (!(row > floor))
                continue; /* never visited: keep the old row */
            for (size_t k = 0; k < K; k++) {
                const double v =
                    acc[K + j * K + k] > floor ? acc[K + j * K + k] : floor;
                gsl_matrix_set(t->chain_trans->value, j, k, log(v / row));
            }
        }
    }
}

static lse_status iterate_em(lse_solver *s)
{
    static const char fn[] = "lse_solver_iterate";
    lse_graph *g = s->g;
    double e;
    lse_status st = LSE_OK;
    /* E-step: responsibilities at the current parameters; the last
     * evaluation also accumulates the M-step statistics */
    if (s->estep != NULL) {
        st = lse_graph_energy(g, &e);
        if (st == LSE_OK)
            st = s->estep(g, s->estep_user);
    } else if (s->n_state > 0) {
        st = lse_graph_energy(g, &e);
        double er = e;
        if (st == LSE_OK)
            st = gradient_steps(s, s->state, s->n_state, s->opts.estep_steps,
                                &er);
    }
    if (st == LSE_OK)
        st = estep_energy(s, &e);
    if (st != LSE_OK)
        return st;
    /* M-step statistics, summed across processes with the energy */
    s->buf[0] = e;
    for (size_t i = 0; i < s->n_cf; i++) {
        st = cf_stats(s, &s->cf[i]);
        if (st != LSE_OK)
            return st;
    }
    for (size_t i = 0; i < s->n_chain; i++)
        chain_stats(s, i);
    const size_t goff = chain_offset(s, s->n_chain);
    if (s->grp.stats != NULL) {
        st = s->grp.stats(g, s->buf + goff, s->grp.user);
        if (st != LSE_OK)
            return st;
    }
    st = do_reduce(s, s->buf,
                   goff + (s->grp.stats != NULL ? s->grp.n_stats : 0));
    if (st != LSE_OK)
        return st;
    e = s->buf[0];
    if (s->opts.exact_stats) { /* the same energy, summed exactly */
        st = exact_energy(s, &e);
        if (st != LSE_OK)
            return st;
    }
    if (!isfinite(e))
        return lse_graph_fail(g, LSE_ENONFINITE, fn, "energy is %g", e);
    for (size_t i = 0; i < s->n_cf; i++) {
        st = cf_round(s, &s->cf[i]);
        if (st != LSE_OK)
            return st;
    }
    s->prev_energy = s->n_iter > 0 ? s->energy : NAN;
    if (s->n_iter > 0) {
        const double scale = fabs(s->energy) > 1.0 ? fabs(s->energy) : 1.0;
        if (e - s->energy > s->opts.increase_tol * scale) {
            s->n_increase++;
            lse_log(LSE_LOG_WARN,
                    "lse_solver_iterate: EM energy rose from %.17g to %.17g at "
                    "iteration %zu",
                    s->energy, e, s->n_iter);
        }
    }
    s->delta = s->n_iter > 0 ? e - s->energy : NAN;
    s->energy = e;
    st = cf_solve_all(s);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < s->n_chain; i++) {
        chain_solve(s, i);
        if (s->mstep_hook != NULL) { /* no parents to report */
            const lse_mstep_report rep = {0};
            st = s->mstep_hook(g, s->chains[i], &rep, s->mstep_user);
            if (st != LSE_OK)
                return st;
        }
    }
    if (s->grp.stats != NULL) {
        st = s->grp.solve(g, s->buf + goff, s->grp.user);
        if (st != LSE_OK)
            return st;
    }
    if (s->n_gparam > 0) {
        double er;
        st =
            gradient_steps(s, s->gparam, s->n_gparam, s->opts.mstep_steps, &er);
        if (st != LSE_OK)
            return st;
    }
    return LSE_OK;
}

lse_status lse_solver_iterate(lse_solver *s)
{
    if (s == NULL)
        return LSE_EFAULT;
    if (!s->ready)
        return lse_graph_fail(s->g, LSE_EINVAL, "lse_solver_iterate",
                              "call lse_solver_init first");
    s->no_step = 0;
    const lse_status st = s->type->em ? iterate_em(s) : iterate_gd(s);
    if (st == LSE_OK)
        s->n_iter++;
    return st;
}

lse_status lse_solver_test(const lse_solver *s)
{
    if (s == NULL)
        return LSE_EFAULT;
    if (s->no_step)
        return LSE_OK;
    if (s->n_iter == 0)
        return LSE_CONTINUE;
    if (!s->type->em && s->opts.tol_grad > 0 &&
        s->grad_norm <= s->opts.tol_grad)
        return LSE_OK;
    if (isfinite(s->delta) && fabs(s->delta) <= s->opts.tol_energy)
        return LSE_OK;
    return LSE_CONTINUE;
}

lse_status lse_solver_finish(lse_solver *s)
{
    if (s == NULL)
        return LSE_EFAULT;
    double e;
    const lse_status st = reduced_energy(s, 0, &e);
    if (st == LSE_OK)
        s->energy = e;
    return st;
}

double lse_solver_energy(const lse_solver *s) { return s ? s->energy : NAN; }
double lse_solver_delta(const lse_solver *s) { return s ? s->delta : NAN; }
double lse_solver_grad_norm(const lse_solver *s)
{
    return s ? s->grad_norm : NAN;
}
double lse_solver_step(const lse_solver *s) { return s ? s->step : NAN; }
size_t lse_solver_n_iter(const lse_solver *s) { return s ? s->n_iter : 0; }
size_t lse_solver_n_increase(const lse_solver *s)
{
    return s ? s->n_increase : 0;
}
lse_graph *lse_solver_graph(const lse_solver *s) { return s ? s->g : NULL; }

lse_status lse_solver_run(lse_solver *s, size_t max_iter, lse_iter_fn cb,
                          void *user, lse_solver_result *res)
{
    if (s == NULL)
        return LSE_EFAULT;
    lse_solver_result r = {.status = LSE_OK, .reason = LSE_STOP_MAX_ITER};
    lse_status st = lse_solver_init(s);
    for (size_t it = 0; st == LSE_OK && it < max_iter; it++) {
        st = lse_solver_iterate(s);
        if (st != LSE_OK)
            break;
        if (cb != NULL && cb(s, user)) {
            r.reason = LSE_STOP_CALLBACK;
            break;
        }
        const lse_status t = lse_solver_test(s);
        if (t == LSE_OK) {
            r.converged = 1;
            r.reason = s->no_step ? LSE_STOP_NO_STEP
                       : (!s->type->em && s->opts.tol_grad > 0 &&
                          s->grad_norm <= s->opts.tol_grad)
                           ? LSE_STOP_GRAD
                           : LSE_STOP_ENERGY;
            break;
        }
    }
    if (st == LSE_OK)
        st = lse_solver_finish(s);
    if (st != LSE_OK)
        r.reason = LSE_STOP_ERROR;
    r.status = st;
    r.n_iter = s->n_iter;
    r.energy = s->energy;
    r.grad_norm = s->grad_norm;
    if (res != NULL)
        *res = r;
    return st;
}
