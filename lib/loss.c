#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "graph-private.h"

/* Supervised objectives on an LSE term's softmax (docs/learning.md):
 * dLoss/dS is built here and chained into the node gradients by the
 * similarity's own gradient kernel. */

lse_status lse_graph_zero_grad(lse_graph *g)
{
    if (g == NULL)
        return LSE_EFAULT;
    for (size_t k = 0; k < g->n_nodes; k++)
        gsl_matrix_set_zero(g->nodes[k]->grad);
    return LSE_OK;
}

static int is_free(const lse_node *n)
{
    return n != NULL && !(n->flags & LSE_NODE_CLAMPED);
}

/* Evaluate t at the current values (S and A fresh) after the checks
 * shared by both losses. */
static lse_status prepare_term(lse_term *t, const gsl_vector *weight,
                               const char *fn)
{
    if (t->kind != LSE_TERM_LSE || t->reduce != LSE_REDUCE_ROWS || !t->keep)
        return lse_graph_fail(t->graph, LSE_ENOTSUP, fn,
                              "term '%s': a rows-reduction LSE term that keeps "
                              "its matrices is required",
                              t->name);
    if (weight != NULL) {
        if (weight->size != t->child.count)
            return lse_graph_fail(t->graph, LSE_EDIM, fn,
                                  "term '%s': %zu weights for %zu child rows",
                                  t->name, weight->size, t->child.count);
        for (size_t c = 0; c < weight->size; c++) {
            const double w = gsl_vector_get(weight, c);
            if (!isfinite(w) || w < 0.0)
                return lse_graph_fail(t->graph, LSE_EDOM, fn,
                                      "term '%s': weight %zu is %g", t->name,
                                      c, w);
        }
    }
    t->graph->errmsg[0] = '\0';
    lse_status st = lse_term_eval(t, 0);
    if (st != LSE_OK && t->graph->errmsg[0] == '\0')
        lse_graph_fail(t->graph, st, fn, "term '%s': %s", t->name,
                       lse_strerror(st));
    return st;
}

/* Add the chain rule of G = dL/dS (n_child, n_parent) into the free node
 * gradients, block by block as the term evaluates. */
static lse_status chain_sim(lse_term *t, const gsl_matrix *gm, const char *fn)
{
    lse_sim_args whole;
    lse_status st = lse_term_sim_args(t, &whole);
    if (st != LSE_OK)
        return lse_graph_fail(t->graph, st, fn, "term '%s': prepare failed",
                              t->name);
    const size_t n_param = t->sim->n_param;
    gsl_matrix **pg = calloc(n_param + 1, sizeof *pg);
    if (pg == NULL)
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    for (size_t k = 0; k < n_param; k++)
        pg[k] = is_free(t->param[k]) ? t->param[k]->grad : NULL;
    const size_t nc = t->child.count, np = t->parent.count;
    const size_t block = t->block > 0 ? t->block : nc;
    gsl_matrix_view pgv;
    gsl_matrix *gparent = NULL;
    if (is_free(t->parent.node)) {
        pgv = lse_view_grad(&t->parent);
        gparent = &pgv.matrix;
    }
    for (size_t i0 = 0; st == LSE_OK && i0 < nc; i0 += block) {
        const size_t b = nc - i0 < block ? nc - i0 : block;
        lse_sim_args a = whole;
        gsl_matrix_const_view cv =
            gsl_matrix_const_submatrix(whole.child, i0, 0, b, whole.child->size2);
        a.child = &cv.matrix;
        const gsl_matrix *xm = whole.context != NULL ? whole.context : whole.child;
        gsl_matrix_const_view xv = gsl_matrix_const_submatrix(xm, i0, 0, b, xm->size2);
        a.context = whole.context != NULL ? &xv.matrix : NULL;
        a.child_offset = i0;
        gsl_matrix_const_view gb = gsl_matrix_const_submatrix(gm, i0, 0, b, np);
        lse_sim_grads out = {NULL, gparent, NULL, pg};
        gsl_matrix_view cg, xg;
        if (is_free(t->child.node)) {
            cg = gsl_matrix_submatrix(t->child.node->grad, t->child.first + i0,
                                      0, b, t->child.node->grad->size2);
            out.child = &cg.matrix;
        }
        if (is_free(t->context.node)) {
            xg = gsl_matrix_submatrix(t->context.node->grad,
                                      t->context.first + i0, 0, b,
                                      t->context.node->grad->size2);
            out.context = &xg.matrix;
        }
        st = t->sim->grad(&a, &gb.matrix, &out);
        if (st != LSE_OK)
            lse_graph_fail(t->graph, st, fn, "term '%s': similarity gradient: %s",
                           t->name, lse_strerror(st));
    }
    free(pg);
    return st;
}

lse_status lse_loss_xent(lse_term *t, const size_t *labels,
                         const gsl_vector *weight, double scale, int want_grad,
                         double *loss)
{
    static const char fn[] = "lse_loss_xent";
    if (loss != NULL)
        *loss = NAN;
    if (lse_term_is_heads(t)) /* lib/heads.c: one loss per head */
        return lse_heads_loss_xent(t, labels, weight, scale, want_grad, loss);
    if (t == NULL || labels == NULL)
        return t != NULL ? lse_graph_fail(t->graph, LSE_EFAULT, fn, "NULL labels")
                         : LSE_EFAULT;
    if (!isfinite(scale))
        return lse_graph_fail(t->graph, LSE_EDOM, fn, "scale = %g", scale);
    lse_status st = prepare_term(t, weight, fn);
    if (st != LSE_OK)
        return st;
    const size_t nc = t->child.count, np = t->parent.count;
    for (size_t c = 0; c < nc; c++) {
        if (labels[c] == LSE_LOSS_IGNORE)
            continue;
        if (labels[c] >= np)
            return lse_graph_fail(t->graph, LSE_ERANGE, fn,
                                  "term '%s': label %zu of row %zu, %zu parents",
                                  t->name, labels[c], c, np);
        if (gsl_matrix_get(t->s, c, labels[c]) == -INFINITY)
            return lse_graph_fail(t->graph, LSE_EDOM, fn,
                                  "term '%s': row %zu's label %zu is masked",
                                  t->name, c, labels[c]);
    }
    gsl_matrix *gm = want_grad ? gsl_matrix_calloc(nc, np) : NULL;
    if (want_grad && gm == NULL)
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    double l = 0.0;
    const double beta = t->beta;
    for (size_t c = 0; c < nc; c++) {
        const size_t y = labels[c];
        if (y == LSE_LOSS_IGNORE)
            continue;
        const double w = weight != NULL ? gsl_vector_get(weight, c) : 1.0;
        /* -log A(c, y) = beta (lse_c - S(c, y)), no log of a tiny A */
        const double nll =
            beta * (gsl_vector_get(t->row_lse, c) - gsl_matrix_get(t->s, c, y));
        l += w * nll;
        if (gm != NULL && w != 0.0) {
            const double f = scale * w * beta;
            for (size_t p = 0; p < np; p++)
                gsl_matrix_set(gm, c, p,
                               f * (gsl_matrix_get(t->a, c, p) - (p == y)));
        }
    }
    if (gm != NULL) {
        st = chain_sim(t, gm, fn);
        gsl_matrix_free(gm);
    }
    if (st == LSE_OK && loss != NULL)
        *loss = scale * l;
    return st;
}

lse_status lse_loss_recon(lse_term *t, lse_view values, const gsl_matrix *target,
                          const gsl_vector *weight, double scale, int want_grad,
                          double *loss)
{
    static const char fn[] = "lse_loss_recon";
    if (loss != NULL)
        *loss = NAN;
    if (t == NULL)
        return LSE_EFAULT;
    if (lse_term_is_heads(t)) /* lib/heads.c */
        return lse_heads_loss_recon(t, values, target, weight, scale,
                                    want_grad, loss);
    if (target == NULL)
        return lse_graph_fail(t->graph, LSE_EFAULT, fn, "NULL target");
    if (!isfinite(scale))
        return lse_graph_fail(t->graph, LSE_EDOM, fn, "scale = %g", scale);
    if (values.node == NULL)
        values = t->parent;
    lse_status st = lse_check_view(t->graph, &values, "values", fn, t->name);
    if (st != LSE_OK)
        return st;
    const size_t nc = t->child.count, np = t->parent.count;
    const size_t dv = values.node->value->size2;
    if (values.count != np || target->size1 != nc || target->size2 != dv)
        return lse_graph_fail(t->graph, LSE_EDIM, fn,
                              "term '%s': values (%zu, %zu) for %zu parents, "
                              "target (%zu, %zu) for %zu children",
                              t->name, values.count, dv, np, target->size1,
                              target->size2, nc);
    st = prepare_term(t, weight, fn);
    if (st != LSE_OK)
        return st;
    gsl_matrix *r = gsl_matrix_alloc(nc, dv);
    gsl_matrix *da = want_grad ? gsl_matrix_alloc(nc, np) : NULL;
    if (r == NULL || (want_grad && da == NULL)) {
        gsl_matrix_free(r);
        gsl_matrix_free(da);
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_matrix_view vv = lse_view_value(&values);
    const gsl_matrix *v = &vv.matrix;
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, t->a, v, 0.0, r); /* R = A V */
    /* r <- D = scale w (R - T), 0 where T is NaN */
    double l = 0.0;
    for (size_t c = 0; c < nc; c++) {
        const double w = weight != NULL ? gsl_vector_get(weight, c) : 1.0;
        for (size_t j = 0; j < dv; j++) {
            const double tv = gsl_matrix_get(target, c, j);
            double d = 0.0;
            if (!isnan(tv)) {
                const double e = gsl_matrix_get(r, c, j) - tv;
                l += 0.5 * w * e * e;
                d = scale * w * e;
            }
            gsl_matrix_set(r, c, j, d);
        }
    }
    if (want_grad) {
        /* dL/dA = D V', then dL/dS = beta A (dL/dA - rowsum(A dL/dA)) */
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, r, v, 0.0, da);
        for (size_t c = 0; c < nc; c++) {
            double s = 0.0;
            for (size_t p = 0; p < np; p++)
                s += gsl_matrix_get(t->a, c, p) * gsl_matrix_get(da, c, p);
            for (size_t p = 0; p < np; p++) {
                const double ac = gsl_matrix_get(t->a, c, p);
                gsl_matrix_set(da, c, p,
                               ac == 0.0 ? 0.0
                                         : t->beta * ac *
                                               (gsl_matrix_get(da, c, p) - s));
            }
        }
        if (is_free(values.node)) { /* dL/dV += A' D */
            gsl_matrix_view gv = lse_view_grad(&values);
            gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, t->a, r, 1.0,
                           &gv.matrix);
        }
        st = chain_sim(t, da, fn);
    }
    gsl_matrix_free(r);
    gsl_matrix_free(da);
    if (st == LSE_OK && loss != NULL)
        *loss = scale * l;
    return st;
}
