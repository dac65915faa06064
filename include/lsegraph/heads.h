#ifndef LSEGRAPH_HEADS_H
#define LSEGRAPH_HEADS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/graph.h>
#include <lsegraph/compose.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file heads.h
 * @brief A head axis for attention-like LSE terms (lib/heads.c,
 * docs/learning.md section 6): H heads share the child and parent views,
 * each scores them with its own projections over a base similarity (the
 * projected similarity of compose.h), and their energies add up, in one
 * term:
 *
 *   E = -sum_h sum_c (1/beta) log sum_p exp(beta S_h(c, p)),
 *   S_h(c, p) = base(W_c^h c, W_p^h p; x_c, theta_h).
 *
 * The projections of all heads are rows of one parameter node each:
 * W_c (H k_c, d_child), head h in rows [h k_c, (h + 1) k_c), likewise W_p.
 * A shared side (multi-query attention: one key projection for every head)
 * is one block: W_p (k_p, d_parent) with LSE_HEADS_SHARE_PARENT. Base
 * parameters are stacked per head the same way (rows H r, head h in rows
 * [h r, (h + 1) r)). The term is a custom term (lse_custom_heads) whose
 * views are, in order: child, parent, W_c, W_p, the context (when given),
 * then the present base parameters. Heads run in parallel; each head
 * accumulates into its own buffers, summed in head order, so the result
 * does not depend on the thread count.
 */

/** Most heads of one term. */
#define LSE_HEADS_MAX 64

/** Sharing flags: one projection block for every head. */
enum {
    LSE_HEADS_SHARE_CHILD = 1u << 0, /**< W_c is (k_c, d_child) */
    LSE_HEADS_SHARE_PARENT = 1u << 1 /**< W_p is (k_p, d_parent):
                                        multi-query (shared keys) */
};

/** @brief Everything that defines a heads term. Start from
 *  lse_heads_spec_default(). */
typedef struct lse_heads_spec {
    lse_view child;    /**< required */
    lse_view parent;   /**< required */
    lse_view context;  /**< optional (node NULL), rows aligned with child */
    size_t n_heads;    /**< H, 1 .. LSE_HEADS_MAX (default 1) */
    unsigned share;    /**< LSE_HEADS_SHARE_* */
    const lse_sim_type *base; /**< required; not project, not a base that
                                 needs every child row at once */
    const void *base_config;  /**< borrowed (must outlive the graph); NULL:
                                 the base's default */
    lse_node *w_child;  /**< (H k_c, d_child), or (k_c, d_child) shared */
    lse_node *w_parent; /**< (H k_p, d_parent), or (k_p, d_parent) shared */
    lse_node *const *base_param; /**< base->n_param nodes (NULL entry: an
                                    absent optional one), each (H r, c);
                                    the array is borrowed; NULL: none */
    double beta;        /**< inverse temperature > 0 (default 1) */
    unsigned mask;      /**< LSE_MASK_CAUSAL / LSE_MASK_NO_SELF on the row
                           positions of the child and parent views */
} lse_heads_spec;

/** @brief H = 1, beta = 1, nothing shared, no mask, views and nodes NULL. */
LSE_API lse_heads_spec lse_heads_spec_default(void);

/**
 * @brief The config the custom term keeps (filled by lse_graph_add_heads;
 * documented so that lse_term_config can be read).
 */
typedef struct lse_heads_config {
    size_t n_heads;
    unsigned share;
    const lse_sim_type *base;
    const void *base_config;  /**< borrowed */
    double beta;
    unsigned mask;
    size_t child_first;       /**< row positions for the masks */
    size_t parent_first;
    int has_context;          /**< a context view follows W_p */
    unsigned base_present;    /**< bit i: base parameter i is a view */
} lse_heads_config;

/** The custom type of heads terms (add them with lse_graph_add_heads). */
LSE_API extern const lse_custom_type *const lse_custom_heads;

/**
 * @brief Add a heads term. OUT @p out (may be NULL) is owned by @p g.
 * @return LSE_OK; LSE_EFAULT (NULL graph, spec, base, view or projection
 *  node, a required base parameter missing, a context the base needs);
 *  LSE_EINVAL (H out of range, base project or a whole-children base,
 *  unknown mask or share flag, nodes of another graph); LSE_EDIM
 *  (projection rows not H k or k, columns not the view's dimension,
 *  context rows, shapes the base rejects); LSE_EDOM (beta); LSE_ERANGE
 *  (a view outside its node); LSE_EEXIST; LSE_ENOMEM. Message on @p g.
 */
LSE_API lse_status lse_graph_add_heads(lse_graph *g, const char *name,
                                       const lse_heads_spec *spec,
                                       lse_term **out);

/** @brief 1 when @p t is a heads term. */
LSE_API int lse_term_is_heads(const lse_term *t);

/**
 * @brief Head @p head's softmax A_h = softmax_p(beta S_h(c, .)) at the
 * current node values into @p a (n_child, n_parent); fully masked rows are
 * 0. @return LSE_OK; LSE_EFAULT; LSE_EINVAL (not a heads term); LSE_ERANGE
 * (head >= H); LSE_EDIM; an evaluation error (message on the graph).
 */
LSE_API lse_status lse_heads_attention(lse_term *t, size_t head,
                                       gsl_matrix *a);

/**
 * @brief Cross-entropy of every head's softmax against the labels, summed
 * over heads (the heads' product of experts):
 * L = scale sum_c w_c sum_h (-log A_h(c, y_c)); with H = 1 it is
 * lse_loss_xent. lse_loss_xent calls it for a heads term.
 * Arguments and errors as lse_loss_xent.
 */
LSE_API lse_status lse_heads_loss_xent(lse_term *t, const size_t *labels,
                                       const gsl_vector *weight, double scale,
                                       int want_grad, double *loss);

/**
 * @brief Squared error of the heads' reconstruction against @p target
 * (NaN entries not scored): with values V of dim V = dim T columns (shared
 * by the heads) R = (1/H) sum_h A_h V; with H dim T columns, head h's
 * values are columns [h dim T, (h + 1) dim T) and R = sum_h A_h V_h.
 * L = scale/2 sum_c w_c sum_j (R_cj - T_cj)^2. With H = 1 it is
 * lse_loss_recon. lse_loss_recon calls it for a heads term.
 * @param values n_parent rows; a NULL node: the parent view.
 * Arguments and errors as lse_loss_recon.
 */
LSE_API lse_status lse_heads_loss_recon(lse_term *t, lse_view values,
                                        const gsl_matrix *target,
                                        const gsl_vector *weight,
                                        double scale, int want_grad,
                                        double *loss);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_HEADS_H */
