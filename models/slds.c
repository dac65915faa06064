#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "slds-private.h"

/*
 * Switching linear dynamics (Tschantz section 8) built through the public
 * graph API: one lse_sim_lingauss LSE term "dynamics" whose children are
 * the steps x_t and whose context rows are [x_{t-1}, ..., x_{t-L}]; rows
 * reduction for the mixture, chain reduction for the Markov version.
 * Derivations: docs/models/slds.md.
 */

#define BLOCK_ROWS 256 /* child rows per kernel call and M-step block */

/* ------------------------------------------------------------------ */
/* Errors                                                              */

lse_status slds_graph_fail(lse_error *err, lse_status st, const char *fn,
                           const lse_graph *g)
{
    return lse_error_set(err, st, fn, "%s",
                         g != NULL && lse_graph_errmsg(g)[0] != '\0'
                             ? lse_graph_errmsg(g)
                             : lse_strerror(st));
}

/* ------------------------------------------------------------------ */
/* Layout of the steps                                                 */

static void layout_free(layout *lay)
{
    free(lay->seg0);
    free(lay->seg1);
    free(lay->starts);
    memset(lay, 0, sizeof *lay);
}

static lse_status layout_make(const lse_slds *m, size_t T, const size_t *seq,
                              layout *lay, const char *fn, lse_error *err)
{
    memset(lay, 0, sizeof *lay);
    lay->T = T;
    if (T == 0)
        return lse_error_set(err, LSE_EINVAL, fn, "empty series (T = 0)");
    lay->seg0 = malloc(T * sizeof *lay->seg0);
    lay->seg1 = malloc(T * sizeof *lay->seg1);
    lay->starts = malloc((T + 1) * sizeof *lay->starts);
    if (lay->seg0 == NULL || lay->seg1 == NULL || lay->starts == NULL) {
        layout_free(lay);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    size_t s0 = 0;
    for (size_t t = 1; t <= T; t++) {
        if (t < T && (seq == NULL || seq[t] == seq[t - 1]))
            continue;
        lay->n_raw++;
        if (t - s0 > m->L) {
            lay->seg0[lay->n_seg] = s0;
            lay->seg1[lay->n_seg] = t;
            lay->starts[lay->n_seg] = lay->n_steps;
            lay->n_seg++;
            lay->n_steps += t - s0 - m->L;
        }
        s0 = t;
    }
    lay->starts[lay->n_seg] = lay->n_steps;
    if (lay->n_steps == 0) {
        layout_free(lay);
        return lse_error_set(
            err, LSE_EINVAL, fn,
            "no step: every sequence has T <= L = %zu rows (T = %zu)", m->L, T);
    }
    /* regressors or shared parts: always stacked (the shared M-step reads
     * the nodes "x" and "z") */
    lay->views = m->L == 1 && lay->n_raw == 1 && m->p == 0 && m->shared == 0u;
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* The graph                                                           */

static void sgraph_free(sgraph *sg)
{
    lse_graph_free(sg->g);
    layout_free(&sg->lay);
    memset(sg, 0, sizeof *sg);
}

static lse_status check_series(const lse_slds *m, const gsl_matrix *x,
                               const char *fn, lse_error *err)
{
    if (x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL series");
    if (x->size2 != m->d + m->p && m->p == 0)
        return lse_error_set(err, LSE_EDIM, fn,
                             "series has %zu columns, the model d = %zu",
                             x->size2, m->d);
    if (x->size2 != m->d + m->p)
        return lse_error_set(err, LSE_EDIM, fn,
                             "series has %zu columns, the model d + p = %zu + "
                             "%zu (values, then exogenous regressors)",
                             x->size2, m->d, m->p);
    return slds_check_finite(x, fn, "x", err);
}

/* Copy the model's parameters into the graph's parameter nodes. */
lse_status slds_load_params(const lse_slds *m, sgraph *sg, const char *fn,
                            lse_error *err)
{
    lse_status st = lse_node_set_value(sg->b, m->b);
    if (st == LSE_OK)
        st = lse_node_set_value(sg->a, m->a);
    if (st == LSE_OK)
        st = lse_node_set_value(sg->chol, m->chol);
    if (st == LSE_OK && sg->logw != NULL)
        st = lse_node_set_value(sg->logw, m->logw);
    if (st == LSE_OK && sg->init != NULL)
        st = lse_node_set_value(sg->init, m->init);
    if (st == LSE_OK && sg->trans != NULL)
        st = lse_node_set_value(sg->trans, m->trans);
    if (st != LSE_OK)
        return slds_graph_fail(err, st, fn, sg->g);
    return LSE_OK;
}

/* Copy the graph's parameter nodes into the model. */
static void store_params(lse_slds *m, sgraph *sg)
{
    gsl_matrix_memcpy(m->b, lse_node_value(sg->b));
    gsl_matrix_memcpy(m->a, lse_node_value(sg->a));
    gsl_matrix_memcpy(m->chol, lse_node_value(sg->chol));
    if (sg->logw != NULL)
        gsl_matrix_memcpy(m->logw, lse_node_value(sg->logw));
    if (sg->init != NULL)
        gsl_matrix_memcpy(m->init, lse_node_value(sg->init));
    if (sg->trans != NULL)
        gsl_matrix_memcpy(m->trans, lse_node_value(sg->trans));
}

static lse_status add_node(sgraph *sg, const char *name, size_t rows,
                           size_t dim, unsigned flags, lse_node **out,
                           const char *fn, lse_error *err)
{
    const lse_status st =
        lse_graph_add_node(sg->g, name, rows, dim, flags, out);
    if (st != LSE_OK)
        return slds_graph_fail(err, st, fn, sg->g);
    return LSE_OK;
}

/* What build_graph builds (flags): */
enum {
    SG_LATENT = 1u,   /* latent states (m->obs_var > 0) */
    SG_EMISSION = 2u, /* see build_graph */
    SG_STREAM = 4u    /* a rows term that does not keep S and its softmax
                         (nothing reads them: the fit of a mixture), so
                         that its E-step takes the fused pass (lib/sim/
                         lingauss_fused.c) */
};

/* Build the graph of model m on series x (checked by the caller). With
 * SG_EMISSION a Markov model gets a rows term without weights, whose
 * similarity is the emission log-likelihood of every step and mode (the
 * chain then runs on the whole series, see par_ctx); "init" and "trans"
 * are still there, holding the chain's parameters. */
static lse_status build_graph(const lse_slds *m, const gsl_matrix *x,
                              const size_t *seq, unsigned how, sgraph *sg,
                              const char *fn, lse_error *err)
{
    const int latent = (how & SG_LATENT) != 0;
    const int emission = (how & SG_EMISSION) != 0;
    memset(sg, 0, sizeof *sg);
    lse_status st = layout_make(m, x->size1, seq, &sg->lay, fn, err);
    if (st != LSE_OK)
        return st;
    layout *lay = &sg->lay;
    const size_t K = m->K, d = m->d, L = m->L, T = x->size1, n = lay->n_steps;
    const size_t p = m->p, dc = d * L + p;
    if (latent && !lay->views) {
        layout_free(lay);
        return lse_error_set(
            err, LSE_ENOTSUP, fn,
            "latent states need one sequence, L = 1, no regressors and no "
            "shared parts (got %zu sequences, L = %zu, p = %zu, shared "
            "0x%x)",
            lay->n_raw, L, p, m->shared);
    }
    sg->latent = latent;
    sg->g = lse_graph_new();
    if (sg->g == NULL) {
        layout_free(lay);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    lse_graph_set_block_rows(sg->g, BLOCK_ROWS);
    lse_view child, context;
    if (lay->views) {
        st = add_node(sg, "x", T, d, latent ? 0u : LSE_NODE_CLAMPED, &sg->x, fn,
                      err);
        if (st == LSE_OK)
            gsl_matrix_memcpy(lse_node_value(sg->x), x);
        if (st == LSE_OK && latent) {
            st = add_node(sg, "y", T, d, LSE_NODE_CLAMPED, &sg->y, fn, err);
            if (st == LSE_OK)
                gsl_matrix_memcpy(lse_node_value(sg->y), x);
        }
        child = lse_view_rows(sg->x, 1, T - 1);
        context = lse_view_rows(sg->x, 0, T - 1);
    } else {
        st = add_node(sg, "x", n, d, LSE_NODE_CLAMPED, &sg->x, fn, err);
        if (st == LSE_OK)
            st = add_node(sg, "z", n, dc, LSE_NODE_CLAMPED, &sg->z, fn, err);
        if (st == LSE_OK) {
            gsl_matrix *xv = lse_node_value(sg->x), *zv = lse_node_value(sg->z);
            size_t i = 0;
            for (size_t q = 0; q < lay->n_seg; q++)
                for (size_t t = lay->seg0[q] + L; t < lay->seg1[q]; t++, i++)
                    for (size_t j = 0; j < d; j++) {
                        gsl_matrix_set(xv, i, j, gsl_matrix_get(x, t, j));
                        for (size_t l = 1; l <= L; l++)
                            gsl_matrix_set(zv, i, (l - 1) * d + j,
                                           gsl_matrix_get(x, t - l, j));
                    }
            i = 0; /* the regressors of the step's own row */
            for (size_t q = 0; q < lay->n_seg; q++)
                for (size_t t = lay->seg0[q] + L; t < lay->seg1[q]; t++, i++)
                    for (size_t j = 0; j < p; j++)
                        gsl_matrix_set(zv, i, d * L + j,
                                       gsl_matrix_get(x, t, d + j));
        }
        child = lse_view_all(sg->x);
        context = lse_view_all(sg->z);
    }
    if (st == LSE_OK)
        st = add_node(sg, "b", K, d, LSE_NODE_PARAM, &sg->b, fn, err);
    if (st == LSE_OK && !m->markov)
        st = add_node(sg, "logw", K, 1, LSE_NODE_PARAM, &sg->logw, fn, err);
    if (st == LSE_OK)
        st = add_node(sg, "A", K, d * dc, LSE_NODE_PARAM, &sg->a, fn, err);
    if (st == LSE_OK)
        st = add_node(sg, "chol", m->chol->size1, m->chol->size2,
                      LSE_NODE_PARAM, &sg->chol, fn, err);
    if (st == LSE_OK && m->markov)
        st = add_node(sg, "init", 1, K, LSE_NODE_PARAM, &sg->init, fn, err);
    if (st == LSE_OK && m->markov)
        st = add_node(sg, "trans", K, K, LSE_NODE_PARAM, &sg->trans, fn, err);
    if (st == LSE_OK)
        st = slds_load_params(m, sg, fn, err);
    if (st == LSE_OK) {
        const lse_gaussian_config gcfg = {.cov = m->cov};
        lse_node *params[3] = {sg->logw, sg->a, sg->chol};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = child;
        spec.parent = lse_view_all(sg->b);
        spec.context = context;
        spec.sim = lse_sim_lingauss;
        spec.config = &gcfg;
        spec.param = params;
        spec.keep_matrices = (how & SG_STREAM) == 0;
        if (m->markov && !emission) {
            spec.reduce = LSE_REDUCE_CHAIN;
            spec.chain_init = sg->init;
            spec.chain_trans = sg->trans;
            spec.chain_starts = lay->starts;
            spec.n_chain_starts = lay->n_seg;
        }
        st = lse_graph_add_lse(sg->g, "dynamics", &spec, &sg->dyn);
        if (st != LSE_OK)
            st = slds_graph_fail(err, st, fn, sg->g);
    }
    if (st == LSE_OK && latent) {
        const lse_quadratic_config qcfg = {.scale = 1.0 / m->obs_var};
        const lse_view views[2] = {lse_view_all(sg->x), lse_view_all(sg->y)};
        st = lse_graph_add_custom(sg->g, "observation", lse_custom_quadratic,
                                  &qcfg, views, 2, &sg->obs);
        if (st != LSE_OK)
            st = slds_graph_fail(err, st, fn, sg->g);
    }
    if (st != LSE_OK)
        sgraph_free(sg);
    return st;
}

/* Evaluate the energy (fresh similarity and softmax); fails with the
 * graph's message. */
static lse_status graph_energy(sgraph *sg, double *e, const char *fn,
                               lse_error *err)
{
    const lse_status st = lse_graph_energy(sg->g, e);
    if (st != LSE_OK)
        return slds_graph_fail(err, st, fn, sg->g);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Several processes (docs/mpi.md)                                     */

static void par_free(par_ctx *pc)
{
    lse_solver_free(pc->csolver);
    lse_graph_free(pc->cg);
    lse_mstep_ws_free(pc->ws);
    free(pc->prev_last);
    free(pc->all);
    free(pc->starts);
    lse_comm_free(&pc->dist);
    memset(pc, 0, sizeof *pc);
}

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

lse_slds_opts lse_slds_opts_default(void)
{
    lse_slds_opts o = {.init = LSE_SLDS_INIT_KMEANSPP,
                       .n_init = 1,
                       .max_iter = 500,
                       .tol = 1e-6,
                       .reg_covar = 1e-6,
                       .seed = 0,
                       .estep_steps = 5,
                       .progress = NULL,
                       .user = NULL,
                       .reduce = NULL,
                       .reduce_user = NULL,
                       .rank = 0,
                       .n_ranks = 1,
                       .context_rows = 0,
                       .exact_sums = 0};
    return o;
}

typedef struct progress_ctx {
    const lse_slds_opts *o;
    size_t run;
} progress_ctx;

static int on_iter(const lse_solver *s, void *user)
{
    const progress_ctx *c = user;
    return c->o->progress(c->run, lse_solver_n_iter(s), -lse_solver_energy(s),
                          -lse_solver_delta(s), c->o->user);
}

/* The processes of a fit (dist over the steps); for a Markov model over
 * several processes also the chain graph on the whole series (par_ctx). */
static lse_status par_init(par_ctx *pc, const lse_slds *m,
                           const lse_slds_opts *o, const sgraph *sg,
                           const char *fn, lse_error *err)
{
    memset(pc, 0, sizeof *pc);
    pc->exact = o->exact_sums != 0;
    const layout *lay = &sg->lay;
    const size_t K = m->K;
    lse_status st = lse_comm_init(&pc->dist, o->reduce, o->reduce_user, o->rank,
                                  o->n_ranks, lay->n_steps, fn, err);
    if (st != LSE_OK || !lse_comm_parallel(&pc->dist) || !m->markov)
        return st;
    pc->markov = 1;
    const size_t P = pc->dist.n_ranks, N = pc->dist.n_total;
    pc->prev_last = calloc(K, sizeof *pc->prev_last);
    pc->all = calloc(P * K, sizeof *pc->all);
    double *ind = calloc(N, sizeof *ind);
    if (pc->prev_last == NULL || pc->all == NULL || ind == NULL) {
        free(ind);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    /* the first step continues the previous process's chain when it is
     * the first row of this block (its L predecessors are the context
     * rows) and the previous block ends with a step */
    const double mine[2] = {o->context_rows > 0 &&
                                lay->seg0[0] + m->L == o->context_rows,
                            lay->seg1[lay->n_seg - 1] == lay->T};
    st = lse_comm_gather(&pc->dist, mine, 2, pc->dist.tmp, fn, err);
    if (st == LSE_OK)
        pc->cont = pc->dist.rank > 0 && mine[0] != 0.0 &&
                   pc->dist.tmp[2 * (pc->dist.rank - 1) + 1] != 0.0;
    /* the chain starts of the whole series */
    for (size_t q = 0; st == LSE_OK && q < lay->n_seg; q++)
        if (q > 0 || !pc->cont)
            ind[pc->dist.offset + lay->starts[q]] = 1.0;
    if (st == LSE_OK)
        st = lse_comm_sum(&pc->dist, ind, N, fn, err);
    if (st == LSE_OK) {
        pc->starts = malloc(N * sizeof *pc->starts);
        if (pc->starts == NULL)
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        for (size_t i = 1; st == LSE_OK && i < N; i++)
            if (ind[i] != 0.0)
                pc->starts[pc->n_starts++] = i;
    }
    free(ind);
    if (st != LSE_OK)
        return st;
    /* the chain graph: S = s eye' = s exactly */
    pc->cg = lse_graph_new();
    if (pc->cg == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_graph_set_block_rows(pc->cg, BLOCK_ROWS);
    st = lse_graph_add_node(pc->cg, "s", N, K, LSE_NODE_CLAMPED, &pc->cs);
    if (st == LSE_OK)
        st = lse_graph_add_node(pc->cg, "eye", K, K, LSE_NODE_CLAMPED,
                                &pc->ceye);
    if (st == LSE_OK)
        st = lse_graph_add_node(pc->cg, "init", 1, K, LSE_NODE_PARAM,
                                &pc->cinit);
    if (st == LSE_OK)
        st = lse_graph_add_node(pc->cg, "trans", K, K, LSE_NODE_PARAM,
                                &pc->ctrans);
    if (st == LSE_OK) {
        gsl_matrix_set_identity(lse_node_value(pc->ceye));
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(pc->cs);
        spec.parent = lse_view_all(pc->ceye);
        spec.sim = lse_sim_dot;
        spec.reduce = LSE_REDUCE_CHAIN;
        spec.chain_init = pc->cinit;
        spec.chain_trans = pc->ctrans;
        spec.chain_starts = pc->starts;
        spec.n_chain_starts = pc->n_starts;
        st = lse_graph_add_lse(pc->cg, "chain", &spec, &pc->ct);
    }
    if (st != LSE_OK)
        return slds_graph_fail(err, st, fn, pc->cg);
    if (lse_node_value(pc->cs)->tda != K)
        return lse_error_set(err, LSE_EINTERNAL, fn,
                             "chain node is not contiguous");
    pc->csolver = lse_solver_new(pc->cg, lse_solver_em);
    if (pc->csolver == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    return LSE_OK;
}

/* Markov over several processes: the emission log-likelihoods of this
 * process's steps at the current parameters (its graph's similarity),
 * summed with the others' into the chain node "s" (N, K). */
static lse_status emissions(par_ctx *pc, sgraph *sg, const char *fn,
                            lse_error *err)
{
    double e;
    lse_status st = graph_energy(sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *S = lse_term_similarity(sg->dyn);
    if (S == NULL)
        return lse_error_set(err, LSE_EINTERNAL, fn, "no emission matrix");
    gsl_matrix *all = lse_node_value(pc->cs);
    gsl_matrix_set_zero(all);
    gsl_matrix_view own =
        gsl_matrix_submatrix(all, pc->dist.offset, 0, S->size1, S->size2);
    gsl_matrix_memcpy(&own.matrix, S);
    return lse_comm_sum(&pc->dist, all->data, all->size1 * all->size2, fn, err);
}

/* The chain solver's M-step hook (Markov over several processes): after
 * the chain M-step, the posteriors of this process's steps give the
 * lingauss M-step (statistics summed), and the emissions at the new
 * parameters are summed into "s" for the next E-step (or the final
 * energy). */
typedef struct chain_hook_ctx {
    par_ctx *pc;
    sgraph *sg;
    const lse_slds *m;
    const lse_mstep_opts *mo;
    const char *fn;
    lse_error *err;
    int failed; /* err holds the message */
} chain_hook_ctx;

static lse_status chain_mstep_hook(lse_graph *g, lse_term *t,
                                   const lse_mstep_report *rep, void *user)
{
    (void)g;
    (void)rep;
    chain_hook_ctx *c = user;
    const gsl_matrix *post = lse_term_softmax(t);
    gsl_matrix_const_view own = gsl_matrix_const_submatrix(
        post, c->pc->dist.offset, 0, c->sg->lay.n_steps, c->m->K);
    lse_status st = slds_lingauss_mstep(c->m, c->sg, &own.matrix, c->mo, c->pc,
                                        "M-step", c->fn, c->err);
    if (st == LSE_OK)
        st = emissions(c->pc, c->sg, c->fn, c->err);
    c->failed = st != LSE_OK;
    return st;
}

/* EM for a Markov model over several processes on the chain solver: its
 * E-step runs forward-backward on the whole series' emissions, its M-step
 * the chain's probabilities, and its hook the lingauss M-step. */
static lse_status run_markov_par(par_ctx *pc, sgraph *sg, const lse_slds *m,
                                 const lse_slds_opts *o,
                                 const lse_solver_opts *so, size_t run,
                                 lse_solver_result *res, const char *fn,
                                 lse_error *err)
{
    lse_solver *cs = pc->csolver;
    memset(res, 0, sizeof *res);
    res->reason = LSE_STOP_ERROR;
    lse_status st = lse_solver_set_opts(cs, so);
    if (st != LSE_OK)
        return res->status = slds_graph_fail(err, st, fn, pc->cg);
    gsl_matrix_memcpy(lse_node_value(pc->cinit), lse_node_value(sg->init));
    gsl_matrix_memcpy(lse_node_value(pc->ctrans), lse_node_value(sg->trans));
    chain_hook_ctx hc = {
        .pc = pc, .sg = sg, .m = m, .mo = &so->mstep, .fn = fn, .err = err};
    lse_solver_set_mstep_hook(cs, chain_mstep_hook, &hc);
    st = emissions(pc, sg, fn, err);
    if (st == LSE_OK) {
        progress_ctx ctx = {.o = o, .run = run};
        st = lse_solver_run(cs, o->max_iter, o->progress ? on_iter : NULL, &ctx,
                            res);
        if (st != LSE_OK && !hc.failed)
            st = slds_graph_fail(err, st, fn, pc->cg);
    }
    lse_solver_set_mstep_hook(cs, NULL, NULL);
    gsl_matrix_memcpy(lse_node_value(sg->init), lse_node_value(pc->cinit));
    gsl_matrix_memcpy(lse_node_value(sg->trans), lse_node_value(pc->ctrans));
    res->status = st;
    return st;
}

/* Shared parts (lse_slds_config.shared): after the lingauss M-step of
 * the dynamics term (the call with a report of its parents; the chain's
 * call has none) the shared M-step replaces b, A and the covariances,
 * from the same responsibilities and the covariances of the iterate. */
typedef struct shared_hook_ctx {
    const lse_slds *m;
    sgraph *sg;
    gsl_matrix *prev; /* the iterate's covariance factors */
    double reg_covar;
    const char *fn;
    lse_error *err;
    int failed; /* err holds the message */
} shared_hook_ctx;

static lse_status shared_mstep_hook(lse_graph *g, lse_term *t,
                                    const lse_mstep_report *rep, void *user)
{
    (void)g;
    shared_hook_ctx *c = user;
    if (t != c->sg->dyn || rep->empty == NULL)
        return LSE_OK;
    const lse_status st =
        slds_shared_mstep(c->m, c->sg, lse_term_softmax(t), c->prev,
                          c->reg_covar, c->fn, c->err);
    c->failed = st != LSE_OK;
    return st;
}

/* The checks of lse_slds_fit's options and series (before any graph). */
static lse_status fit_check(const lse_slds *m, const gsl_matrix *x,
                            const lse_slds_opts *o, const char *fn,
                            lse_error *err)
{
    if (o->init != LSE_SLDS_INIT_KMEANSPP && o->init != LSE_SLDS_INIT_RANDOM &&
        o->init != LSE_SLDS_INIT_GIVEN)
        return lse_error_set(err, LSE_EINVAL, fn, "unknown init %d",
                             (int)o->init);
    if (o->n_init < 1)
        return lse_error_set(err, LSE_EINVAL, fn, "n_init = 0, need >= 1");
    if (!(o->tol >= 0.0) || !isfinite(o->tol))
        return lse_error_set(err, LSE_EINVAL, fn, "tol = %g, need finite >= 0",
                             o->tol);
    if (!(o->reg_covar >= 0.0) || !isfinite(o->reg_covar))
        return lse_error_set(err, LSE_EINVAL, fn,
                             "reg_covar = %g, need finite >= 0", o->reg_covar);
    const int par = o->reduce != NULL;
    if (o->context_rows > 0 && (!par || o->rank == 0 || o->context_rows > m->L))
        return lse_error_set(
            err, LSE_EINVAL, fn,
            "context_rows = %zu needs a reduction hook, rank > 0 and "
            "at most L = %zu",
            o->context_rows, m->L);
    if (par && m->obs_var > 0.0)
        return lse_error_set(
            err, LSE_ENOTSUP, fn,
            "latent states are not supported with several processes");
    if (par && (m->shared != 0u || m->p > 0))
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "regressors (p = %zu) and shared parts (shared "
                             "0x%x) are not supported with several processes",
                             m->p, m->shared);
    const lse_status st = check_series(m, x, fn, err);
    if (st != LSE_OK)
        return st;
    if (par && o->context_rows >= x->size1)
        return lse_error_set(
            err, LSE_EINVAL, fn,
            "process %zu: its block has no row after the %zu context "
            "rows",
            o->rank, o->context_rows);
    return LSE_OK;
}

/* What a fit holds across its initializations. */
typedef struct fit_state {
    const lse_slds_opts *o;
    sgraph sg;
    par_ctx pc;
    lse_solver *s;
    lse_solver_opts so;
    gsl_rng *rng;
    gsl_matrix *prev_chol;   /* shared parts: the iterate's covariances */
    lse_slds *best;          /* parameters and results of the best run */
    gsl_matrix *best_states; /* its latent states (latent) */
    int have;                /* a run succeeded */
    double best_obj;
} fit_state;

/* Initialization run and its EM: LSE_OK and the objective in *obj, or the
 * status with the message in err. */
static lse_status fit_run(fit_state *f, const lse_slds *m, const gsl_matrix *x,
                          size_t run, lse_solver_result *res, double *obj,
                          const char *fn, lse_error *err)
{
    sgraph *sg = &f->sg;
    par_ctx *pc = &f->pc;
    if (sg->latent) /* every run starts from the observations */
        gsl_matrix_memcpy(lse_node_value(sg->x), x);
    lse_status rs = slds_load_params(m, sg, fn, err);
    if (rs == LSE_OK)
        rs = slds_initialize(m, sg, f->o, &f->so.mstep, f->rng, pc, fn, err);
    /* latent states: the noise covariances stay at their initial
     * values (jointly with the states their MAP is degenerate: a
     * noiseless state path and Sigma -> 0 send the energy to -inf) */
    if (sg->latent)
        lse_node_set_clamped(sg->chol, 1);
    *obj = NAN;
    if (rs == LSE_OK && pc->markov) {
        rs = run_markov_par(pc, sg, m, f->o, &f->so, run, res, fn, err);
        *obj = -res->energy;
    } else if (rs == LSE_OK) {
        shared_hook_ctx hc = {.m = m,
                              .sg = sg,
                              .prev = f->prev_chol,
                              .reg_covar = f->o->reg_covar,
                              .fn = fn,
                              .err = err};
        if (m->shared != 0u) {
            /* the start obeys the sharing: one shared M-step from the
             * responsibilities at the initial parameters */
            double e;
            gsl_matrix_memcpy(f->prev_chol, lse_node_value(sg->chol));
            rs = graph_energy(sg, &e, fn, err);
            if (rs == LSE_OK)
                rs = slds_shared_mstep(m, sg, lse_term_softmax(sg->dyn),
                                       f->prev_chol, f->o->reg_covar, fn, err);
            lse_solver_set_mstep_hook(f->s, shared_mstep_hook, &hc);
        }
        progress_ctx ctx = {.o = f->o, .run = run};
        if (rs == LSE_OK) {
            rs = lse_solver_run(f->s, f->o->max_iter,
                                f->o->progress ? on_iter : NULL, &ctx, res);
            if (rs != LSE_OK && !hc.failed)
                rs = slds_graph_fail(err, rs, fn, sg->g);
        }
        lse_solver_set_mstep_hook(f->s, NULL, NULL);
        *obj = -lse_solver_energy(f->s);
    }
    return rs;
}

/* Keep the run just finished as the best when it is. */
static void fit_keep(fit_state *f, const lse_solver_result *res, double obj)
{
    if (f->have && !(obj > f->best_obj))
        return;
    const sgraph *sg = &f->sg;
    f->have = 1;
    f->best_obj = obj;
    store_params(f->best, &f->sg);
    /* the term's own energy excludes the observation term of
     * latent states; over several processes the summed energy */
    f->best->loglik = f->o->reduce != NULL || (f->o->exact_sums && !sg->latent)
                          ? obj /* exact: summed exactly */
                          : -lse_term_energy(sg->dyn);
    f->best->n_iter = res->n_iter;
    f->best->converged = res->converged;
    f->best->n_increase =
        lse_solver_n_increase(f->pc.markov ? f->pc.csolver : f->s);
    if (sg->latent)
        gsl_matrix_memcpy(f->best_states, lse_node_value(sg->x));
}

/* The graph, processes, generator, solver and best-run store of a fit. */
static lse_status fit_setup(fit_state *f, const lse_slds *m,
                            const gsl_matrix *x, const size_t *seq,
                            const char *fn, lse_error *err)
{
    const lse_slds_opts *o = f->o;
    const int par = o->reduce != NULL;
    /* a mixture on one process without shared parts or exact sums reads
     * neither S nor the softmax of the term (the chain, the shared
     * M-step and the exact statistics pass do) */
    const int stream = !m->markov && m->obs_var <= 0.0 && m->shared == 0u &&
                       !par && !o->exact_sums;
    lse_status st = build_graph(
        m, x, seq,
        (m->obs_var > 0.0 ? SG_LATENT : 0u) |
            (par && m->markov ? SG_EMISSION : 0u) | (stream ? SG_STREAM : 0u),
        &f->sg, fn, err);
    if (st != LSE_OK) {
        if (par && st == LSE_EINVAL)
            lse_error_set(
                err, st, fn,
                "process %zu has no step in its block of %zu rows (use fewer "
                "processes)",
                o->rank, x->size1 - o->context_rows);
        return st;
    }
    /* the data nodes are written only here (x is checked finite by
     * check_series): no scan per evaluation */
    if (!f->sg.latent)
        st = lse_node_seal(f->sg.x);
    if (st == LSE_OK && f->sg.y != NULL)
        st = lse_node_seal(f->sg.y);
    if (st == LSE_OK && f->sg.z != NULL)
        st = lse_node_seal(f->sg.z);
    if (st != LSE_OK)
        return slds_graph_fail(err, st, fn, f->sg.g);
    st = par_init(&f->pc, m, o, &f->sg, fn, err);
    if (st != LSE_OK)
        return st;
    const size_t n = f->pc.dist.n_total;
    if (n < m->K && o->init != LSE_SLDS_INIT_GIVEN)
        return lse_error_set(err, LSE_EINVAL, fn, "%zu steps for K = %zu modes",
                             n, m->K);
    f->best = slds_model_alloc(m->K, m->d, m->L, m->p, m->markov, m->cov);
    f->rng = gsl_rng_alloc(gsl_rng_mt19937);
    f->s = lse_solver_new(f->sg.g, lse_solver_em);
    f->best_states = f->sg.latent ? gsl_matrix_alloc(x->size1, x->size2) : NULL;
    f->prev_chol = gsl_matrix_alloc(m->chol->size1, m->chol->size2);
    if (f->best == NULL || f->rng == NULL || f->s == NULL ||
        f->prev_chol == NULL ||
        (f->sg.latent && f->best_states == NULL))
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    gsl_rng_set(f->rng, o->seed);
    f->so = lse_solver_opts_default();
    f->so.tol_energy = o->tol * (double)n;
    f->so.estep_steps = o->estep_steps;
    f->so.mstep.reg_covar = o->reg_covar;
    /* exact_sums: every statistics pass sums exactly, like lingauss_mstep
     * over several processes (bit-identical fits for any number of
     * processes and threads; docs/mpi.md) */
    f->so.exact_stats = o->exact_sums != 0;
    st = lse_solver_set_opts(f->s, &f->so);
    if (st != LSE_OK)
        return slds_graph_fail(err, st, fn, f->sg.g);
    if (par)
        lse_solver_set_reduce(f->s, lse_comm_reduce, &f->pc.dist);
    return LSE_OK;
}

static void fit_free(fit_state *f)
{
    gsl_matrix_free(f->best_states);
    gsl_matrix_free(f->prev_chol);
    lse_solver_free(f->s);
    gsl_rng_free(f->rng);
    lse_slds_free(f->best);
    par_free(&f->pc);
    sgraph_free(&f->sg);
}

lse_status lse_slds_fit(lse_slds *m, const gsl_matrix *x, const size_t *seq,
                        const lse_slds_opts *opts, lse_error *err)
{
    static const char fn[] = "lse_slds_fit";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (m == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL model");
    const lse_slds_opts o = opts != NULL ? *opts : lse_slds_opts_default();
    lse_status st = fit_check(m, x, &o, fn, err);
    if (st != LSE_OK)
        return st;
    fit_state f;
    memset(&f, 0, sizeof f);
    f.o = &o;
    f.best_obj = -INFINITY;
    st = fit_setup(&f, m, x, seq, fn, err);
    const size_t runs = o.init == LSE_SLDS_INIT_GIVEN ? 1 : o.n_init;
    lse_status last = LSE_OK;
    lse_error last_err;
    slds_clear_err(&last_err);
    for (size_t run = 0; st == LSE_OK && run < runs; run++) {
        lse_solver_result res = {0};
        double obj;
        const lse_status rs = fit_run(&f, m, x, run, &res, &obj, fn, &last_err);
        if (rs == LSE_ENOMEM || f.pc.dist.failed)
            st = lse_error_set(err, rs, fn, "%s", last_err.message);
        else if (rs != LSE_OK)
            last = rs;
        else
            fit_keep(&f, &res, obj);
    }
    if (st == LSE_OK && !f.have)
        st = lse_error_set(err, last, fn,
                           "every initialization failed; last: %s",
                           last_err.message);
    if (st == LSE_OK) {
        slds_copy_params(m, f.best);
        m->loglik = f.best->loglik;
        m->n_iter = f.best->n_iter;
        m->converged = f.best->converged;
        m->n_increase = f.best->n_increase;
        m->n_steps = f.pc.dist.n_total;
        gsl_matrix_free(m->states);
        m->states = f.best_states;
        f.best_states = NULL;
    }
    fit_free(&f);
    return st;
}

lse_status lse_slds_steps(const lse_slds *m, size_t T, const size_t *seq,
                          size_t *rows, size_t *n_steps, lse_error *err)
{
    static const char fn[] = "lse_slds_steps";
    slds_clear_err(err);
    if (m == NULL || n_steps == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    layout lay;
    const lse_status st = layout_make(m, T, seq, &lay, fn, err);
    if (st != LSE_OK)
        return st;
    *n_steps = lay.n_steps;
    if (rows != NULL) {
        size_t i = 0;
        for (size_t q = 0; q < lay.n_seg; q++)
            for (size_t t = lay.seg0[q] + m->L; t < lay.seg1[q]; t++)
                rows[i++] = t;
    }
    layout_free(&lay);
    return LSE_OK;
}

/* Build the observed-series graph and evaluate it. */
static lse_status eval_graph(const lse_slds *m, const gsl_matrix *x,
                             const size_t *seq, sgraph *sg, double *e,
                             const char *fn, lse_error *err)
{
    if (m == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL model");
    lse_status st = check_series(m, x, fn, err);
    if (st == LSE_OK)
        st = build_graph(m, x, seq, 0u, sg, fn, err);
    if (st != LSE_OK)
        return st;
    st = graph_energy(sg, e, fn, err);
    if (st != LSE_OK)
        sgraph_free(sg);
    return st;
}

lse_status lse_slds_score(const lse_slds *m, const gsl_matrix *x,
                          const size_t *seq, double *loglik, lse_error *err)
{
    static const char fn[] = "lse_slds_score";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (loglik == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    const lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    *loglik = -e;
    sgraph_free(&sg);
    return LSE_OK;
}

lse_status lse_slds_posteriors(const lse_slds *m, const gsl_matrix *x,
                               const size_t *seq, gsl_matrix *post,
                               lse_error *err)
{
    static const char fn[] = "lse_slds_posteriors";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (post == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    const lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *a = lse_term_softmax(sg.dyn);
    lse_status out = LSE_OK;
    if (post->size1 != a->size1 || post->size2 != a->size2)
        out = lse_error_set(err, LSE_EDIM, fn,
                            "posteriors are %zux%zu, expected "
                            "n_steps x K = %zux%zu",
                            post->size1, post->size2, a->size1, a->size2);
    else
        gsl_matrix_memcpy(post, a);
    sgraph_free(&sg);
    return out;
}

lse_status lse_slds_most_likely(const lse_slds *m, const gsl_matrix *x,
                                const size_t *seq, size_t *modes,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_most_likely";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (modes == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    const lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *a = lse_term_softmax(sg.dyn);
    for (size_t i = 0; i < a->size1; i++) {
        const gsl_vector_const_view row = gsl_matrix_const_row(a, i);
        modes[i] = gsl_vector_max_index(&row.vector);
    }
    sgraph_free(&sg);
    return LSE_OK;
}

lse_status lse_slds_viterbi(const lse_slds *m, const gsl_matrix *x,
                            const size_t *seq, size_t *path, lse_error *err)
{
    static const char fn[] = "lse_slds_viterbi";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (path == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *S = lse_term_similarity(sg.dyn); /* (n, K) */
    const size_t n = S->size1, K = m->K;
    if (!m->markov) { /* independent modes: argmax of the similarity */
        for (size_t i = 0; i < n; i++) {
            const gsl_vector_const_view row = gsl_matrix_const_row(S, i);
            path[i] = gsl_vector_max_index(&row.vector);
        }
        sgraph_free(&sg);
        return LSE_OK;
    }
    gsl_vector *logp0 = gsl_vector_alloc(K);
    gsl_matrix *logT = gsl_matrix_alloc(K, K);
    if (logp0 == NULL || logT == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    } else {
        slds_log_normalize(gsl_matrix_const_ptr(m->init, 0, 0), K, 1,
                           logp0->data, 1);
        for (size_t j = 0; j < K; j++)
            slds_log_normalize(gsl_matrix_const_ptr(m->trans, j, 0), K, 1,
                               gsl_matrix_ptr(logT, j, 0), 1);
        st = lse_chain_viterbi(S, logp0, logT, sg.lay.starts, sg.lay.n_seg,
                               path, err);
    }
    gsl_vector_free(logp0);
    gsl_matrix_free(logT);
    sgraph_free(&sg);
    return st;
}

lse_status lse_slds_graph_new(const lse_slds *m, const gsl_matrix *x,
                              const size_t *seq, lse_graph **g, lse_error *err)
{
    static const char fn[] = "lse_slds_graph_new";
    lse_gsl_quiet();
    slds_clear_err(err);
    if (g == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    *g = NULL;
    if (m == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL model");
    lse_status st = check_series(m, x, fn, err);
    if (st != LSE_OK)
        return st;
    sgraph sg;
    st = build_graph(m, x, seq, m->obs_var > 0.0 ? SG_LATENT : 0u, &sg, fn,
                     err);
    if (st != LSE_OK)
        return st;
    *g = sg.g;
    sg.g = NULL;
    sgraph_free(&sg);
    return LSE_OK;
}
