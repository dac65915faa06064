#ifndef LSEGRAPH_LOSS_H
#define LSEGRAPH_LOSS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stdint.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file loss.h
 * @brief Supervised objectives on an LSE term's softmax rows (lib/loss.c,
 * docs/learning.md). A loss evaluates the term at the current node values
 * and, when asked, ADDS scale * dLoss/dv into the node gradients (the
 * similarity's own gradient kernel chains dLoss/dS into children, parents,
 * context and every parameter node), so the optimizer of optim.h trains on
 * energy + loss, or on the loss alone after lse_graph_zero_grad:
 *
 * @code
 * lse_graph_zero_grad(g);               // or lse_graph_gradient(g, &e)
 * double l;
 * lse_loss_xent(term, labels, NULL, 1.0 / n, 1, &l);
 * lse_optim_step(opt);
 * @endcode
 *
 * Both need a rows-reduction term that keeps its matrices
 * (keep_matrices = 1, the default); others give LSE_ENOTSUP.
 */

/** A label that excludes its row from the cross-entropy. */
#define LSE_LOSS_IGNORE SIZE_MAX

/** @brief Set every node gradient to zero. @return LSE_OK, LSE_EFAULT. */
LSE_API lse_status lse_graph_zero_grad(lse_graph *g);

/**
 * @brief Cross-entropy of the term's softmax rows against labels:
 * L = scale sum_c w_c (-log A(c, y_c)), A = softmax_p(beta S(c, .)), so
 * dL/dS(c, p) = scale w_c beta (A(c, p) - [p = y_c]).
 * @param labels n_child parent indices (LSE_LOSS_IGNORE: skip the row).
 * @param weight n_child weights >= 0, or NULL for 1.
 * @param want_grad non-zero: add scale dL/dv into the free nodes' grads.
 * @param[out] loss may be NULL.
 * @return LSE_OK; LSE_EFAULT; LSE_ENOTSUP (custom, chain or streaming
 *  term); LSE_EDIM (weight size); LSE_ERANGE (label >= n_parent); LSE_EDOM
 *  (a label on a masked pair: its probability is 0); an evaluation error.
 *  Messages on the term's graph.
 */
LSE_API lse_status lse_loss_xent(lse_term *t, const size_t *labels,
                                 const gsl_vector *weight, double scale,
                                 int want_grad, double *loss);

/**
 * @brief Squared error of the reconstruction R = A V (A the term's softmax
 * (n_child, n_parent), V the rows of @p values, one per parent) against
 * @p target (n_child, dim V): L = scale/2 sum_c w_c sum_j (R_cj - T_cj)^2
 * over the entries where T is not NaN (NaN marks an entry that is not
 * scored: masked completion). With D = dL/dR,
 * dL/dS(c, p) = beta A(c, p) (D_c . V_p - sum_q A(c, q) D_c . V_q) and
 * dL/dV += A' D.
 * @param values a view with n_parent rows; a NULL node: the parent view.
 * @return as lse_loss_xent, LSE_EDIM for shapes.
 */
LSE_API lse_status lse_loss_recon(lse_term *t, lse_view values,
                                  const gsl_matrix *target,
                                  const gsl_vector *weight, double scale,
                                  int want_grad, double *loss);

/**
 * @brief Cross-entropy of a classifier read out through the term's
 * attention: logits R = A V (A the term's softmax (n_child, n_parent), V the
 * rows of @p values, one per parent, one column per class; the IDW
 * prototype classifier), L = scale sum_c w_c (lse(R_c) - R_c,y_c). With
 * D = dL/dR = scale w_c (softmax(R_c) - e_y), the chain rule is that of
 * lse_loss_recon: dL/dS(c, p) = beta A(c, p) (D_c . V_p - sum_q A(c, q)
 * D_c . V_q) into the similarity's nodes and parameters, dL/dV += A' D.
 * @param values a view with n_parent rows (columns: classes); a NULL node:
 *  the parent view.
 * @param labels n_child classes < dim V (LSE_LOSS_IGNORE: skip the row,
 *  e.g. the padding of a short mini-batch).
 * @param[out] logits (n_child, dim V) receives R, or NULL.
 * @return as lse_loss_xent; LSE_EDIM for shapes, LSE_ENONFINITE for a
 *  non-finite loss (nothing is added to the gradients).
 */
LSE_API lse_status lse_loss_readout_xent(lse_term *t, lse_view values,
                                         const size_t *labels,
                                         const gsl_vector *weight, double scale,
                                         int want_grad, double *loss,
                                         gsl_matrix *logits);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_LOSS_H */
