#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"

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

void lse_term_free(lse_term *t)
{
    if (t == NULL)
        return;
    if (t->work != NULL && t->sim != NULL && t->sim->work_free != NULL)
        t->sim->work_free(t->work);
    free(t->config_owned);
    free(t->name);
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
    free(t->views);
    free(t->value_views);
    free(t->grad_views);
    free(t->values);
    free(t->grads);
    free(t);
}

lse_status lse_check_view(lse_graph *g, const lse_view *v, const char *what,
                          const char *fn, const char *term)
{
    if (v->node == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "term '%s': %s view has no node",
                              term, what);
    if (v->node->graph != g)
        return lse_graph_fail(g, LSE_EINVAL, fn,
                              "term '%s': %s node '%s' belongs to another graph",
                              term, what, v->node->name);
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
                                   const char *fn, lse_term **out)
{
    if (name == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL term name");
    if (name[0] == '\0')
        return lse_graph_fail(g, LSE_EINVAL, fn, "empty term name");
    if (lse_graph_find_term(g, name) != NULL ||
        lse_graph_find_node(g, name) != NULL)
        return lse_graph_fail(g, LSE_EEXIST, fn, "name '%s' exists", name);
    if (g->n_terms == g->cap_terms) {
        const size_t cap = g->cap_terms ? 2 * g->cap_terms : 8;
        lse_term **terms = realloc(g->terms, cap * sizeof *terms);
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
    t->enabled = 1;
    *out = t;
    return LSE_OK;
}

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
    const lse_sim_type *sim = spec->sim;
    lse_term *t = NULL;
    lse_status st = lse_graph_add_term_slot(g, name, fn, &t);
    if (st != LSE_OK)
        return st;
    t->kind = LSE_TERM_LSE;
    t->sim = sim;
    t->child = spec->child;
    t->parent = spec->parent;
    t->context = spec->context;
    t->beta = spec->beta;
    t->mask = spec->mask;
    t->reduce = spec->reduce;
    t->keep = spec->keep_matrices || spec->reduce == LSE_REDUCE_CHAIN;

    st = lse_check_view(g, &t->child, "child", fn, name);
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
                            "term '%s': beta = %g, must be finite and > 0", name,
                            t->beta);
    if (st == LSE_OK &&
        (t->mask & ~(unsigned)(LSE_MASK_CAUSAL | LSE_MASK_NO_SELF)) != 0)
        st = lse_graph_fail(g, LSE_EINVAL, fn, "term '%s': unknown mask 0x%x",
                            name, t->mask);
    if (st != LSE_OK)
        goto fail;

    const size_t nc = t->child.count, np = t->parent.count, K = sim->n_param;
    t->param = calloc(K + 1, sizeof *t->param);
    t->param_rows = calloc(K + 1, sizeof *t->param_rows);
    t->param_cols = calloc(K + 1, sizeof *t->param_cols);
    t->param_values = calloc(K + 1, sizeof *t->param_values);
    t->param_grads = calloc(K + 1, sizeof *t->param_grads);
    t->param_gv = calloc(K + 1, sizeof *t->param_gv);
    t->row_lse = gsl_vector_alloc(nc);
    if (t->param == NULL || t->param_rows == NULL || t->param_cols == NULL ||
        t->param_values == NULL || t->param_grads == NULL ||
        t->param_gv == NULL || t->row_lse == NULL) {
        st = lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < K; k++) {
        lse_node *p = spec->param != NULL ? spec->param[k] : NULL;
        const char *pname = sim->param_names != NULL ? sim->param_names[k] : "?";
        if (p == NULL) {
            if (!(sim->optional_params & (1u << k))) {
                st = lse_graph_fail(g, LSE_EFAULT, fn,
                                    "term '%s': %s needs parameter '%s'", name,
                                    sim->name, pname);
                goto fail;
            }
            continue;
        }
        if (p->graph != g) {
            st = lse_graph_fail(g, LSE_EINVAL, fn,
                                "term '%s': parameter '%s' is a node of "
                                "another graph",
                                name, pname);
            goto fail;
        }
        t->param[k] = p;
        t->param_rows[k] = p->value->size1;
        t->param_cols[k] = p->value->size2;
    }

    /* config: copy (or borrow a pairwise-style config of size 0) */
    const void *config = spec->config != NULL ? spec->config : sim->config_default;
    if (sim->config_size > 0) {
        t->config_owned = malloc(sim->config_size);
        if (t->config_owned == NULL) {
            st = lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
            goto fail;
        }
        if (config != NULL) {
            memcpy(t->config_owned, config, sim->config_size);
            t->config = t->config_owned;
        } /* else NULL: the type's check decides */
    } else {
        t->config = config;
    }
    config = t->config;

    size_t block = g->block_rows ? g->block_rows : DEFAULT_BLOCK;
    if ((sim->flags & LSE_SIM_WHOLE_CHILDREN) || block > nc)
        block = nc;
    if (t->reduce == LSE_REDUCE_CHAIN && block > nc)
        block = nc;
    t->block = block;
    t->shape = (lse_sim_shape){
        .n_child = nc, .block = block, .n_parent = np,
        .d_child = t->child.node->value->size2,
        .d_parent = t->parent.node->value->size2,
        .d_context = t->context.node != NULL ? t->context.node->value->size2 : 0,
        .n_param = K, .param_rows = t->param_rows, .param_cols = t->param_cols};
    if (sim->check != NULL) {
        char msg[512] = "";
        st = sim->check(&t->shape, config, msg, sizeof msg);
        if (st != LSE_OK) {
            lse_graph_fail(g, st, fn, "term '%s': %s", name,
                           msg[0] ? msg : lse_strerror(st));
            goto fail;
        }
    }
    if (spec->user_mask != NULL) {
        if (spec->user_mask->size1 != nc || spec->user_mask->size2 != np) {
            st = lse_graph_fail(g, LSE_EDIM, fn,
                                "term '%s': mask is %zux%zu, expected %zux%zu",
                                name, spec->user_mask->size1,
                                spec->user_mask->size2, nc, np);
            goto fail;
        }
        t->user_mask = gsl_matrix_alloc(nc, np);
        if (t->user_mask == NULL) {
            st = lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
            goto fail;
        }
        gsl_matrix_memcpy(t->user_mask, spec->user_mask);
    }
    t->has_mask = t->mask != 0 || t->user_mask != NULL;
    if (spec->row_weight != NULL) {
        st = lse_term_set_row_weight(t, spec->row_weight);
        if (st != LSE_OK)
            goto fail;
    }
    const size_t srows = t->keep ? nc : block;
    t->s = gsl_matrix_alloc(srows, np);
    t->a = gsl_matrix_alloc(srows, np);
    t->g = gsl_matrix_alloc(block, np);
    if (t->s == NULL || t->a == NULL || t->g == NULL) {
        st = lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        goto fail;
    }
    if (sim->work_new != NULL) {
        st = sim->work_new(&t->shape, t->config, &t->work);
        if (st != LSE_OK) {
            lse_graph_fail(g, st, fn, "term '%s': %s workspace: %s", name,
                           sim->name, lse_strerror(st));
            goto fail;
        }
    }
    if (t->reduce == LSE_REDUCE_CHAIN) {
        if (spec->chain_init == NULL || spec->chain_trans == NULL) {
            st = lse_graph_fail(g, LSE_EFAULT, fn,
                                "term '%s': chain reduction needs chain_init "
                                "and chain_trans nodes",
                                name);
            goto fail;
        }
        if (spec->chain_init->graph != g || spec->chain_trans->graph != g) {
            st = lse_graph_fail(g, LSE_EINVAL, fn,
                                "term '%s': chain nodes of another graph", name);
            goto fail;
        }
        if (spec->chain_init->value->size1 != 1 ||
            spec->chain_init->value->size2 != np ||
            spec->chain_trans->value->size1 != np ||
            spec->chain_trans->value->size2 != np) {
            st = lse_graph_fail(g, LSE_EDIM, fn,
                                "term '%s': chain_init must be 1x%zu and "
                                "chain_trans %zux%zu",
                                name, np, np, np);
            goto fail;
        }
        if (t->beta != 1.0 || t->has_mask || t->row_weight != NULL) {
            st = lse_graph_fail(g, LSE_EINVAL, fn,
                                "term '%s': chain reduction takes beta = 1, no "
                                "masks and no row weights",
                                name);
            goto fail;
        }
        t->chain_init = spec->chain_init;
        t->chain_trans = spec->chain_trans;
        st = lse_chain_new(t, spec->chain_starts, spec->n_chain_starts,
                           &t->chain);
        if (st != LSE_OK) {
            if (g->errmsg[0] == '\0')
                lse_graph_fail(g, st, fn, "term '%s': %s", name,
                               lse_strerror(st));
            goto fail;
        }
    } else if (t->reduce != LSE_REDUCE_ROWS) {
        st = lse_graph_fail(g, LSE_EINVAL, fn, "term '%s': unknown reduction %d",
                            name, (int)t->reduce);
        goto fail;
    }
    g->terms[g->n_terms++] = t;
    if (out != NULL)
        *out = t;
    return LSE_OK;
fail:
    lse_term_free(t);
    return st;
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

static int free_node(const lse_node *n)
{
    return n != NULL && !(n->flags & LSE_NODE_CLAMPED);
}

/* Gradient outputs: views of node grads (NULL for clamped nodes). */
static void grad_outputs(lse_term *t, lse_sim_grads *out,
                         gsl_matrix_view *cgv, gsl_matrix_view *pgv,
                         gsl_matrix_view *xgv, size_t i0, size_t b)
{
    out->child = NULL;
    out->parent = NULL;
    out->context = NULL;
    if (free_node(t->child.node)) {
        *cgv = gsl_matrix_submatrix(t->child.node->grad, t->child.first + i0,
                                    0, b, t->child.node->grad->size2);
        out->child = &cgv->matrix;
    }
    if (free_node(t->parent.node)) {
        *pgv = lse_view_grad(&t->parent);
        out->parent = &pgv->matrix;
    }
    if (free_node(t->context.node)) {
        *xgv = gsl_matrix_submatrix(t->context.node->grad,
                                    t->context.first + i0, 0, b,
                                    t->context.node->grad->size2);
        out->context = &xgv->matrix;
    }
    for (size_t k = 0; k < t->sim->n_param; k++)
        t->param_grads[k] = free_node(t->param[k]) ? t->param[k]->grad : NULL;
    out->param = t->param_grads;
}

static lse_status check_block(lse_term *t, const gsl_matrix *s, size_t i0)
{
    for (size_t r = 0; r < s->size1; r++) {
        const double *row = gsl_matrix_const_ptr(s, r, 0);
        for (size_t j = 0; j < s->size2; j++)
            if (isnan(row[j]) || row[j] == INFINITY)
                return lse_graph_fail(t->graph, LSE_ENONFINITE,
                                      "lse_graph_energy",
                                      "term '%s' (%s): similarity[%zu,%zu] = %g",
                                      t->name, t->sim->name, i0 + r, j, row[j]);
    }
    return LSE_OK;
}

static lse_status eval_rows(lse_term *t, int want_grad, lse_sim_args *a)
{
    const size_t nc = t->child.count, np = t->parent.count;
    const lse_sim_type *sim = t->sim;
    double energy = 0.0;
    for (size_t i0 = 0; i0 < nc; i0 += t->block) {
        const size_t b = nc - i0 < t->block ? nc - i0 : t->block;
        gsl_matrix_view cv, xv;
        block_args(t, i0, b, a, &cv, &xv);
        const size_t srow = t->keep ? i0 : 0;
        gsl_matrix_view sv = gsl_matrix_submatrix(t->s, srow, 0, b, np);
        gsl_matrix_view av = gsl_matrix_submatrix(t->a, srow, 0, b, np);
        lse_status st = sim->eval(a, &sv.matrix);
        if (st != LSE_OK)
            return lse_graph_fail(t->graph, st, "lse_graph_energy",
                                  "term '%s': %s eval: %s", t->name, sim->name,
                                  lse_strerror(st));
        if (t->has_mask)
            for (size_t r = 0; r < b; r++)
                for (size_t j = 0; j < np; j++)
                    if (!is_allowed(t, i0 + r, j))
                        gsl_matrix_set(&sv.matrix, r, j, -INFINITY);
        st = check_block(t, &sv.matrix, i0);
        if (st != LSE_OK)
            return st;
        for (size_t r = 0; r < b; r++) {
            double lse;
            st = lse_softmax(gsl_matrix_const_ptr(&sv.matrix, r, 0), np, 1,
                             t->beta, gsl_matrix_ptr(&av.matrix, r, 0), &lse);
            if (st != LSE_OK)
                return lse_graph_fail(t->graph, st, "lse_graph_energy",
                                      "term '%s': softmax of row %zu: %s",
                                      t->name, i0 + r, lse_strerror(st));
            gsl_vector_set(t->row_lse, i0 + r, lse);
            if (lse != -INFINITY) {
                const double w =
                    t->row_weight ? gsl_vector_get(t->row_weight, i0 + r) : 1.0;
                energy -= w * lse;
            }
        }
        if (!want_grad)
            continue;
        gsl_matrix_view gv = gsl_matrix_submatrix(t->g, 0, 0, b, np);
        for (size_t r = 0; r < b; r++) {
            const double w =
                t->row_weight ? gsl_vector_get(t->row_weight, i0 + r) : 1.0;
            const double *ar = gsl_matrix_const_ptr(&av.matrix, r, 0);
            double *gr = gsl_matrix_ptr(&gv.matrix, r, 0);
            for (size_t j = 0; j < np; j++)
                gr[j] = -w * ar[j];
        }
        lse_sim_grads out;
        gsl_matrix_view cgv, pgv, xgv;
        grad_outputs(t, &out, &cgv, &pgv, &xgv, i0, b);
        st = sim->grad(a, &gv.matrix, &out);
        if (st != LSE_OK)
            return lse_graph_fail(t->graph, st, "lse_graph_gradient",
                                  "term '%s': %s grad: %s", t->name, sim->name,
                                  lse_strerror(st));
    }
    t->energy = energy;
    return LSE_OK;
}

static lse_status eval_chain(lse_term *t, int want_grad, lse_sim_args *a)
{
    const size_t nc = t->child.count, np = t->parent.count;
    const lse_sim_type *sim = t->sim;
    for (size_t i0 = 0; i0 < nc; i0 += t->block) {
        const size_t b = nc - i0 < t->block ? nc - i0 : t->block;
        gsl_matrix_view cv, xv;
        block_args(t, i0, b, a, &cv, &xv);
        gsl_matrix_view sv = gsl_matrix_submatrix(t->s, i0, 0, b, np);
        lse_status st = sim->eval(a, &sv.matrix);
        if (st == LSE_OK)
            st = check_block(t, &sv.matrix, i0);
        if (st != LSE_OK)
            return st;
    }
    double energy;
    lse_status st = lse_chain_eval(t, want_grad, &energy);
    if (st != LSE_OK)
        return st;
    t->energy = energy;
    if (!want_grad)
        return LSE_OK;
    for (size_t i0 = 0; i0 < nc; i0 += t->block) {
        const size_t b = nc - i0 < t->block ? nc - i0 : t->block;
        gsl_matrix_view cv, xv;
        block_args(t, i0, b, a, &cv, &xv);
        gsl_matrix_view av = gsl_matrix_submatrix(t->a, i0, 0, b, np);
        gsl_matrix_view gv = gsl_matrix_submatrix(t->g, 0, 0, b, np);
        gsl_matrix_memcpy(&gv.matrix, &av.matrix);
        gsl_matrix_scale(&gv.matrix, -1.0);
        lse_sim_grads out;
        gsl_matrix_view cgv, pgv, xgv;
        grad_outputs(t, &out, &cgv, &pgv, &xgv, i0, b);
        st = sim->grad(a, &gv.matrix, &out);
        if (st != LSE_OK)
            return lse_graph_fail(t->graph, st, "lse_graph_gradient",
                                  "term '%s': %s grad: %s", t->name, sim->name,
                                  lse_strerror(st));
    }
    return LSE_OK;
}

lse_status lse_term_eval(lse_term *t, int want_grad)
{
    lse_sim_args a;
    whole_args(t, &a);
    if (t->sim->prepare != NULL) {
        const lse_status st = t->sim->prepare(&a);
        if (st != LSE_OK)
            return lse_graph_fail(t->graph, st, "lse_graph_energy",
                                  "term '%s': %s prepare: %s", t->name,
                                  t->sim->name, lse_strerror(st));
    }
    return t->reduce == LSE_REDUCE_CHAIN ? eval_chain(t, want_grad, &a)
                                         : eval_rows(t, want_grad, &a);
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
