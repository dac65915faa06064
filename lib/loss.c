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

/* Shapes and checks shared by the readout losses: values (a view with
 * n_parent rows; NULL node: the parent view), the target's rows. */
static lse_status check_readout(lse_term *t, lse_view *values, size_t rows,
                                size_t cols, int check_cols, const char *fn)
{
    if (values->node == NULL)
        *values = t->parent;
    lse_status st = lse_check_view(t->graph, values, "values", fn, t->name);
    if (st != LSE_OK)
        return st;
    const size_t nc = t->child.count, np = t->parent.count;
    const size_t dv = values->node->value->size2;
    if (values->count != np || rows != nc || (check_cols && cols != dv))
        return lse_graph_fail(t->graph, LSE_EDIM, fn,
                              "term '%s': values (%zu, %zu) for %zu parents, "
                              "target (%zu, %zu) for %zu children",
                              t->name, values->count, dv, np, rows,
                              check_cols ? cols : dv, nc);
    return LSE_OK;
}

/* The chain rule of a loss on the readout R = A V, given D = dL/dR in d
 * (n_child, dim V): dL/dA = D V', dL/dS = beta A (dL/dA - rowsum(A dL/dA))
 * chained by the similarity's kernel, and dL/dV += A' D. */
static lse_status readout_backward(lse_term *t, const lse_view *values,
                                   const gsl_matrix *v, const gsl_matrix *d,
                                   const char *fn)
{
    const size_t nc = t->child.count, np = t->parent.count;
    gsl_matrix *da = gsl_matrix_alloc(nc, np);
    if (da == NULL)
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, d, v, 0.0, da);
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
    if (is_free(values->node)) { /* dL/dV += A' D */
        gsl_matrix_view gv = lse_view_grad(values);
        gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, t->a, d, 1.0,
                       &gv.matrix);
    }
    const lse_status st = chain_sim(t, da, fn);
    gsl_matrix_free(da);
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
    lse_status st =
        check_readout(t, &values, target->size1, target->size2, 1, fn);
    if (st == LSE_OK)
        st = prepare_term(t, weight, fn);
    if (st != LSE_OK)
        return st;
    const size_t nc = t->child.count;
    const size_t dv = values.node->value->size2;
    gsl_matrix *r = gsl_matrix_alloc(nc, dv);
    if (r == NULL)
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
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
    if (want_grad)
        st = readout_backward(t, &values, v, r, fn);
    gsl_matrix_free(r);
    if (st == LSE_OK && loss != NULL)
        *loss = scale * l;
    return st;
}

lse_status lse_loss_readout_xent(lse_term *t, lse_view values,
                                 const size_t *labels, const gsl_vector *weight,
                                 double scale, int want_grad, double *loss,
                                 gsl_matrix *logits)
{
    static const char fn[] = "lse_loss_readout_xent";
    if (loss != NULL)
        *loss = NAN;
    if (t == NULL)
        return LSE_EFAULT;
    if (labels == NULL)
        return lse_graph_fail(t->graph, LSE_EFAULT, fn, "NULL labels");
    if (!isfinite(scale))
        return lse_graph_fail(t->graph, LSE_EDOM, fn, "scale = %g", scale);
    lse_status st = check_readout(t, &values, t->child.count, 0, 0, fn);
    if (st != LSE_OK)
        return st;
    const size_t nc = t->child.count;
    const size_t dv = values.node->value->size2;
    if (logits != NULL && (logits->size1 != nc || logits->size2 != dv))
        return lse_graph_fail(t->graph, LSE_EDIM, fn,
                              "term '%s': logits are (%zu, %zu), want (%zu, %zu)",
                              t->name, logits->size1, logits->size2, nc, dv);
    for (size_t c = 0; c < nc; c++)
        if (labels[c] != LSE_LOSS_IGNORE && labels[c] >= dv)
            return lse_graph_fail(t->graph, LSE_ERANGE, fn,
                                  "term '%s': label %zu of row %zu, %zu classes",
                                  t->name, labels[c], c, dv);
    st = prepare_term(t, weight, fn);
    if (st != LSE_OK)
        return st;
    gsl_matrix *r = gsl_matrix_alloc(nc, dv);
    if (r == NULL)
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    gsl_matrix_view vv = lse_view_value(&values);
    const gsl_matrix *v = &vv.matrix;
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, t->a, v, 0.0, r); /* R = A V */
    if (logits != NULL)
        gsl_matrix_memcpy(logits, r);
    /* r <- D = scale w (softmax(R) - e_y), 0 on ignored rows */
    double l = 0.0;
    for (size_t c = 0; c < nc; c++) {
        double *row = gsl_matrix_ptr(r, c, 0);
        const size_t y = labels[c];
        const double w = weight != NULL ? gsl_vector_get(weight, c) : 1.0;
        if (y == LSE_LOSS_IGNORE) {
            memset(row, 0, dv * sizeof *row);
            continue;
        }
        const double lse = lse_logsumexp(row, dv, 1, 1.0);
        l += w * (lse - row[y]);
        const double f = scale * w;
        for (size_t k = 0; k < dv; k++)
            row[k] = f * (exp(row[k] - lse) - (k == y ? 1.0 : 0.0));
    }
    if (!isfinite(l))
        st = lse_graph_fail(t->graph, LSE_ENONFINITE, fn,
                            "term '%s': the loss is %g", t->name, l);
    if (st == LSE_OK && want_grad)
        st = readout_backward(t, &values, v, r, fn);
    gsl_matrix_free(r);
    if (st == LSE_OK && loss != NULL)
        *loss = scale * l;
    return st;
}
