#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"
#include "size-private.h"
#include "threads-private.h"

/* Term verbs for models that drive EM themselves (include/lsegraph/
 * mstep.h). */

lse_status lse_term_shape(const lse_term *t, lse_sim_shape *out)
{
    if (t == NULL || out == NULL || t->kind != LSE_TERM_LSE)
        return LSE_EFAULT;
    *out = t->shape;
    return LSE_OK;
}

/* Rows of a whole responsibility matrix (lse_term_mstep). */
static void copy_rows(size_t i0, gsl_matrix *out, void *user)
{
    const gsl_matrix *resp = user;
    gsl_matrix_const_view v =
        gsl_matrix_const_submatrix(resp, i0, 0, out->size1, out->size2);
    gsl_matrix_memcpy(out, &v.matrix);
}

/* stats over the blocks of the term's child rows into acc (zeroed), or
 * stats_exact into xacc when it is not NULL; rblk (block, n_parent)
 * scratch for the responsibilities. */
static lse_status block_stats(lse_term *t, lse_sim_args *a, lse_resp_fn fill,
                              void *user, gsl_matrix *rblk, double *acc,
                              lse_xsum *xacc)
{
    const gsl_matrix *whole = a->child, *ctx = a->context;
    const size_t n = whole->size1, K = rblk->size2, B = t->shape.block;
    lse_status st = LSE_OK;
    for (size_t i0 = 0; st == LSE_OK && i0 < n; i0 += B) {
        const size_t b = n - i0 < B ? n - i0 : B;
        gsl_matrix_const_view cv =
            gsl_matrix_const_submatrix(whole, i0, 0, b, whole->size2);
        gsl_matrix_const_view xv = /* the block's context rows */
            gsl_matrix_const_submatrix(ctx != NULL ? ctx : whole, i0, 0, b,
                                       ctx != NULL ? ctx->size2 : 1);
        if (ctx != NULL)
            a->context = &xv.matrix;
        gsl_matrix_view rv = gsl_matrix_submatrix(rblk, 0, 0, b, K);
        fill(i0, &rv.matrix, user);
        gsl_vector wrows; /* rows i0.. of the row weights */
        const gsl_vector *w = NULL;
        if (t->row_weight != NULL) {
            gsl_vector_const_view wv =
                gsl_vector_const_subvector(t->row_weight, i0, b);
            wrows = wv.vector;
            w = &wrows;
        }
        a->child = &cv.matrix;
        a->child_offset = i0;
        st = xacc != NULL ? t->sim->stats_exact(a, &rv.matrix, w, xacc)
                          : t->sim->stats(a, &rv.matrix, w, acc);
    }
    a->child = whole;
    a->context = ctx;
    a->child_offset = 0;
    return st;
}

static lse_status check_mstep(const lse_term *t, lse_error *err)
{
    static const char fn[] = "lse_term_mstep";
    if (t == NULL || t->kind != LSE_TERM_LSE)
        return lse_error_set(err, LSE_EFAULT, fn, "not an LSE term");
    const lse_sim_type *sim = t->sim;
    if (sim->stats == NULL || sim->solve == NULL || sim->stats_size == NULL)
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "term '%s': similarity '%s' has no closed-form "
                             "M-step",
                             t->name, sim->name);
    return LSE_OK;
}

/* The buffers of a term's M-step (include/lsegraph/mstep.h). */
struct lse_mstep_ws {
    const lse_term *t;
    size_t n_acc;
    double *acc;       /* (n_acc + 1) statistics */
    lse_xsum *xacc;    /* (n_acc) exact accumulators, or NULL */
    gsl_matrix **outs; /* (n_param + 1) parameter outputs */
    gsl_matrix *rblk;  /* (block, n_parent) responsibilities of a block */
};

void lse_mstep_ws_free(lse_mstep_ws *ws)
{
    if (ws == NULL)
        return;
    free(ws->acc);
    free(ws->xacc);
    free(ws->outs);
    gsl_matrix_free(ws->rblk);
    free(ws);
}

lse_status lse_mstep_ws_new(const lse_term *t, unsigned flags,
                            lse_mstep_ws **out, lse_error *err)
{
    static const char fn[] = "lse_mstep_ws_new";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    *out = NULL;
    lse_status st = check_mstep(t, err);
    if (st != LSE_OK)
        return st;
    const int exact = (flags & LSE_MSTEP_EXACT) != 0;
    if (exact && t->sim->stats_exact == NULL)
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "term '%s': similarity '%s' has no exact "
                             "statistics",
                             t->name, t->sim->name);
    lse_mstep_ws *ws = calloc(1, sizeof *ws);
    if (ws == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    ws->t = t;
    ws->n_acc = t->sim->stats_size(&t->shape, t->config);
    size_t n_alloc;
    if (lse_size_add(ws->n_acc, 1, &n_alloc) ||
        lse_size_array_overflows(n_alloc, 1, sizeof *ws->xacc)) {
        const size_t n_acc = ws->n_acc;
        free(ws);
        return lse_error_set(err, LSE_ENOMEM, fn,
                             "term '%s': %zu statistics exceed the address "
                             "space",
                             t->name, n_acc);
    }
    ws->acc = malloc((ws->n_acc + 1) * sizeof *ws->acc);
    ws->xacc = exact ? malloc((ws->n_acc + 1) * sizeof *ws->xacc) : NULL;
    ws->outs = calloc(t->sim->n_param + 1, sizeof *ws->outs);
    ws->rblk = t->shape.block > 0
                   ? gsl_matrix_alloc(t->shape.block, t->shape.n_parent)
                   : NULL;
    if (ws->acc == NULL || (exact && ws->xacc == NULL) || ws->outs == NULL ||
        ws->rblk == NULL) {
        lse_mstep_ws_free(ws);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    *out = ws;
    return LSE_OK;
}

/* The M-step of lse_term_mstep_rows in the buffers of ws (checked). */
static lse_status mstep_body(lse_term *t, lse_resp_fn fill, void *user,
                            const lse_mstep_opts *opts,
                            lse_mstep_report *report, lse_comm *comm,
                            lse_mstep_ws *ws, lse_error *err)
{
    static const char fn[] = "lse_term_mstep";
    const lse_sim_type *sim = t->sim;
    const size_t n_acc = ws->n_acc;
    double *acc = ws->acc;
    memset(acc, 0, (n_acc + 1) * sizeof *acc);
    if (ws->xacc != NULL)
        memset(ws->xacc, 0, (n_acc + 1) * sizeof *ws->xacc);
    lse_sim_args a;
    lse_status st = lse_term_sim_args(t, &a);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "term '%s': prepare: %s", t->name,
                             lse_strerror(st));
    st = block_stats(t, &a, fill, user, ws->rblk, acc, ws->xacc);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "term '%s': M-step statistics: %s",
                             t->name, lse_strerror(st));
    st = ws->xacc != NULL ? lse_comm_xsum(comm, ws->xacc, n_acc, acc, fn, err)
                          : lse_comm_sum(comm, acc, n_acc, fn, err);
    if (st != LSE_OK)
        return st;
    for (size_t k = 0; k < sim->n_param; k++)
        ws->outs[k] = t->param[k] != NULL ? t->param[k]->value : NULL;
    gsl_matrix_view pv = lse_view_value(&t->parent);
    const lse_mstep_opts mo = opts != NULL ? *opts : lse_mstep_opts_default();
    lse_mstep_report rep = {0};
    if (report == NULL)
        report = &rep;
    if (report->empty != NULL)
        memset(report->empty, 0, t->shape.n_parent);
    char msg[400] = "";
    st =
        sim->solve(&a, acc, &pv.matrix, ws->outs, &mo, report, msg, sizeof msg);
    if (st != LSE_OK)
        lse_error_set(err, st, fn, "term '%s': %s", t->name,
                      msg[0] ? msg : lse_strerror(st));
    return st;
}

/* mstep_body with OpenBLAS serial, as the solver's M-steps (solver.c,
 * cf_solve_all): the statistics' products and the closed forms' Cholesky
 * inversions and eigen-decompositions then round the same for any
 * OPENBLAS_NUM_THREADS, and no OpenBLAS thread is woken to spin */
static lse_status mstep_run(lse_term *t, lse_resp_fn fill, void *user,
                            const lse_mstep_opts *opts,
                            lse_mstep_report *report, lse_comm *comm,
                            lse_mstep_ws *ws, lse_error *err)
{
    const int saved = lse_blas_serial_begin(1);
    const lse_status st =
        mstep_body(t, fill, user, opts, report, comm, ws, err);
    lse_blas_serial_end(saved);
    return st;
}

lse_status lse_term_mstep_rows(lse_term *t, lse_resp_fn fill, void *user,
                               const lse_mstep_opts *opts,
                               lse_mstep_report *report, lse_comm *comm,
                               lse_error *err)
{
    static const char fn[] = "lse_term_mstep";
    lse_status st = check_mstep(t, err);
    if (st != LSE_OK)
        return st;
    if (fill == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL fill");
    lse_mstep_ws *ws = NULL;
    st = lse_mstep_ws_new(t, 0, &ws, err);
    if (st == LSE_OK)
        st = mstep_run(t, fill, user, opts, report, comm, ws, err);
    lse_mstep_ws_free(ws);
    return st;
}

/* resp checked against t's shape (NULL: the kept softmax), or an error. */
static lse_status check_resp(const lse_term *t, const gsl_matrix **resp,
                             lse_error *err)
{
    static const char fn[] = "lse_term_mstep";
    if (*resp == NULL)
        *resp = lse_term_softmax(t);
    if (*resp == NULL)
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "term '%s' keeps no softmax: pass the "
                             "responsibilities",
                             t->name);
    if ((*resp)->size1 != t->shape.n_child ||
        (*resp)->size2 != t->shape.n_parent)
        return lse_error_set(err, LSE_EDIM, fn,
                             "term '%s': responsibilities %zu x %zu, expected "
                             "%zu x %zu",
                             t->name, (*resp)->size1, (*resp)->size2,
                             t->shape.n_child, t->shape.n_parent);
    return LSE_OK;
}

lse_status lse_term_mstep_ws(lse_term *t, const gsl_matrix *resp,
                             const lse_mstep_opts *opts,
                             lse_mstep_report *report, lse_comm *comm,
                             lse_mstep_ws *ws, lse_error *err)
{
    static const char fn[] = "lse_term_mstep";
    lse_status st = check_mstep(t, err);
    if (st != LSE_OK)
        return st;
    if (ws == NULL || ws->t != t)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "term '%s': a workspace made for another term",
                             t->name);
    st = check_resp(t, &resp, err);
    if (st != LSE_OK)
        return st;
    return mstep_run(t, copy_rows, (void *)(uintptr_t)resp, opts, report, comm,
                     ws, err);
}

lse_status lse_term_mstep(lse_term *t, const gsl_matrix *resp,
                          const lse_mstep_opts *opts, lse_mstep_report *report,
                          lse_comm *comm, lse_error *err)
{
    lse_status st = check_mstep(t, err);
    if (st == LSE_OK)
        st = check_resp(t, &resp, err);
    if (st != LSE_OK)
        return st;
    return lse_term_mstep_rows(t, copy_rows, (void *)(uintptr_t)resp, opts,
                               report, comm, err);
}

lse_status lse_term_scores(const lse_term *t, const gsl_matrix *child,
                           const gsl_matrix *parent,
                           const gsl_matrix *const *param, gsl_matrix *scores,
                           lse_error *err)
{
    static const char fn[] = "lse_term_scores";
    if (t == NULL || t->kind != LSE_TERM_LSE || child == NULL ||
        parent == NULL || scores == NULL ||
        (param == NULL && t->sim->n_param > 0))
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const lse_sim_type *sim = t->sim;
    if (t->shape.d_context > 0 || (sim->flags & LSE_SIM_NEEDS_CONTEXT))
        return lse_error_set(err, LSE_EINVAL, fn,
                             "term '%s' has a context: not supported", t->name);
    if (child->size1 == 0 || child->size2 != t->shape.d_child ||
        parent->size1 != t->shape.n_parent ||
        parent->size2 != t->shape.d_parent || scores->size1 != child->size1 ||
        scores->size2 != parent->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "term '%s': child %zu x %zu, parent %zu x %zu, "
                             "scores %zu x %zu",
                             t->name, child->size1, child->size2, parent->size1,
                             parent->size2, scores->size1, scores->size2);
    lse_sim_shape shape = t->shape;
    shape.n_child = child->size1;
    shape.block = child->size1;
    void *work = NULL;
    lse_status st = LSE_OK;
    if (sim->work_new != NULL)
        st = sim->work_new(&shape, t->config, &work);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "term '%s': workspace: %s", t->name,
                             lse_strerror(st));
    const lse_sim_args a = {.child = child,
                            .parent = parent,
                            .context = NULL,
                            .child_offset = 0,
                            .param = param,
                            .config = t->config,
                            .work = work};
    if (sim->prepare != NULL)
        st = sim->prepare(&a);
    if (st == LSE_OK)
        st = sim->eval(&a, scores);
    if (st != LSE_OK)
        lse_error_set(err, st, fn, "term '%s': %s", t->name, lse_strerror(st));
    if (work != NULL)
        sim->work_free(work);
    return st;
}

size_t lse_sim_param_index(const lse_sim_type *type, const char *name)
{
    if (type == NULL || name == NULL || type->param_names == NULL)
        return (size_t)-1;
    for (size_t k = 0; k < type->n_param; k++)
        if (type->param_names[k] != NULL &&
            strcmp(type->param_names[k], name) == 0)
            return k;
    return (size_t)-1;
}

lse_status lse_sim_params_bind(const lse_sim_type *type,
                               const char *const *names, lse_node *const *nodes,
                               size_t n, lse_node **out, lse_error *err)
{
    static const char fn[] = "lse_sim_params_bind";
    if (type == NULL || out == NULL ||
        (n > 0 && (names == NULL || nodes == NULL)))
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    for (size_t k = 0; k < type->n_param; k++)
        out[k] = NULL;
    for (size_t i = 0; i < n; i++) {
        const size_t k = lse_sim_param_index(type, names[i]);
        if (k == (size_t)-1 || out[k] != NULL) {
            char list[256] = "";
            size_t len = 0;
            for (size_t j = 0; j < type->n_param && len < sizeof list; j++) {
                const int w = snprintf(list + len, sizeof list - len, "%s%s",
                                       j > 0 ? ", " : "", type->param_names[j]);
                len += w > 0 ? (size_t)w : 0;
            }
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "similarity '%s': %s parameter '%s' "
                                 "(parameters: %s)",
                                 type->name,
                                 k == (size_t)-1 ? "no" : "repeated",
                                 names[i] != NULL ? names[i] : "(null)",
                                 type->n_param > 0 ? list : "none");
        }
        out[k] = nodes[i];
    }
    return LSE_OK;
}

lse_node *lse_term_param_named(const lse_term *t, const char *name)
{
    if (t == NULL || t->kind != LSE_TERM_LSE)
        return NULL;
    const size_t k = lse_sim_param_index(t->sim, name);
    return k == (size_t)-1 ? NULL : t->param[k];
}
