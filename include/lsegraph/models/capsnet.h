#ifndef LSEGRAPH_MODELS_CAPSNET_H
#define LSEGRAPH_MODELS_CAPSNET_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stdint.h>

#include <gsl/gsl_matrix.h>
#include <lsegraph/status.h>
#include <lsegraph/graph.h>
#include <lsegraph/optim.h>
#include <lsegraph/solver.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file capsnet.h
 * @brief Two-level capsules with energy-based routing (models/capsnet.c,
 * docs/models/capsules.md).
 *
 * One example has N child capsules u_i (dimension dc) and S parent
 * capsules v_j (dimension dp); every pair has its own transformation
 * W_ij (dp x dc), the prediction of child i for parent j is
 * uhat_ij = W_ij u_i, and the routing energy is
 *
 *     E(v) = - sum_i (1/beta) log sum_j exp(beta uhat_ij . v_j)
 *            + 1/2 sum_j ||v_j||^2 .
 *
 * The routing coefficients are c_ij = softmax_j(beta uhat_ij . v_j), the
 * softmax of the child-to-parent log-sum-exp; dE/dv_j = v_j - sum_i c_ij
 * uhat_ij, so a fixed point of routing is v_j = sum_i c_ij uhat_ij.
 * Routing minimises E over the parents by gradient descent (lse_solver_gd,
 * Armijo line search, from v = 0), so E never rises along it.
 *
 * The graph, for a batch of B examples routed at once: a clamped node
 * "children" (B N, dc), a free state node "parents" (B S, dp), a PARAM
 * node "W" (N S, dp dc) (row i S + j holds W_ij row-major), one LSE term
 * "route<b>" per example with the similarity lse_capsnet_sim, a quadratic
 * term "bound" on the parents, and a custom term "readout" (off during
 * routing): the cross-entropy of the class logits
 * z_j = 1/2 ||sum_i c_ij W_ij u_i||^2 with the routing coefficients c held
 * at their routed values (the E-step), averaged over the labelled examples.
 * Learning (lse_capsnet_train_step) alternates: route (E-step), then one
 * optimizer step (lse_optim, Adam by default) on W along the gradient of
 * the readout with c fixed (an EM-like M-step). Classification: the
 * parent with the largest ||v_j|| after routing.
 */

typedef struct lse_capsnet lse_capsnet;

/** @brief Shapes and settings of a capsule network. */
typedef struct lse_capsnet_opts {
    size_t n_child;   /**< N child capsules per example (>= 1) */
    size_t d_child;   /**< dc (>= 1) */
    size_t n_parent;  /**< S parent capsules (classes, >= 2) */
    size_t d_parent;  /**< dp (>= 1) */
    size_t batch;     /**< B examples per routing (>= 1); default 50 */
    double beta;      /**< routing inverse temperature > 0; default 1 */
    double init_sd;   /**< W entries start N(0, init_sd^2); default 0.1 */
    uint64_t seed;    /**< seed of the initial W; default 1 */
    size_t route_iter; /**< most gradient steps per routing; default 50 */
    double route_tol; /**< routing stops when E changes by at most this
                         (absolute); default 1e-8 */
} lse_capsnet_opts;

/** @brief N = dc = dp = 0 (must be set), S = 0 (must be set), the other
 *  defaults as listed. */
LSE_API lse_capsnet_opts lse_capsnet_opts_default(void);

/** @brief What one routing did (summed over the batch). */
typedef struct lse_capsnet_route_info {
    size_t n_iter;         /**< gradient steps taken */
    double energy_initial; /**< E at v = 0 */
    double energy;         /**< E at the routed parents */
    size_t n_increase;     /**< steps whose E rose by more than
                              1e-12 max(1, |E|) */
    double max_increase;   /**< largest E_t - E_{t-1} (<= 0: monotone) */
} lse_capsnet_route_info;

/**
 * @brief A network with seeded random W and the optimizer (Adam, lr 0.01)
 * on W. @param[out] out owned by the caller (lse_capsnet_free()).
 * @return LSE_OK; LSE_EFAULT; LSE_EDOM (a size 0, S < 2, beta or init_sd
 * bad, route_tol < 0); LSE_ENOMEM. Message in @p err (may be NULL).
 */
LSE_API lse_status lse_capsnet_new(const lse_capsnet_opts *opts,
                                   lse_capsnet **out, lse_error *err);
/** @brief Free; NULL is a no-op. */
LSE_API void lse_capsnet_free(lse_capsnet *c);
/** @brief "function: facts" of the last failure on @p c ("" if none).
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_capsnet_errmsg(const lse_capsnet *c);
/** @brief The graph (borrowed, owned by @p c). */
LSE_API lse_graph *lse_capsnet_graph(const lse_capsnet *c);
/** @brief The transformations W (N S, dp dc), borrowed and writable. */
LSE_API gsl_matrix *lse_capsnet_weights(const lse_capsnet *c);
/** @brief Number of learned parameters, N S dp dc. */
LSE_API size_t lse_capsnet_n_params(const lse_capsnet *c);
/** @brief Replace the optimizer's options (its state is reset).
 *  @return LSE_OK; LSE_EFAULT; LSE_EDOM. */
LSE_API lse_status lse_capsnet_set_optim(lse_capsnet *c,
                                         const lse_optim_opts *opts,
                                         lse_error *err);

/**
 * @brief Route one batch: set the children (B N, dc; example b owns rows
 * b N .. b N + N - 1), start the parents at 0 and minimise E over them.
 * @param parents (B S, dp) receives the routed parents (may be NULL).
 * @param info may be NULL.
 * @return LSE_OK (also when route_iter is reached); LSE_EFAULT; LSE_EDIM;
 * LSE_ENONFINITE; a solver error.
 */
LSE_API lse_status lse_capsnet_route(lse_capsnet *c, const gsl_matrix *children,
                                     gsl_matrix *parents,
                                     lse_capsnet_route_info *info,
                                     lse_error *err);

/** @brief Routing coefficients (N, S) of example @p b at the last
 *  routing or energy evaluation (borrowed), NULL if b >= B. */
LSE_API const gsl_matrix *lse_capsnet_coupling(const lse_capsnet *c, size_t b);

/** @brief The routing energy E at @p children (B N, dc) and @p parents
 *  (B S, dp). @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE. */
LSE_API lse_status lse_capsnet_energy(lse_capsnet *c,
                                      const gsl_matrix *children,
                                      const gsl_matrix *parents, double *energy,
                                      lse_error *err);

/**
 * @brief One learning step on a batch: route (E-step), then one optimizer
 * step on W along the gradient of the readout cross-entropy with the
 * routing coefficients fixed (M-step).
 * @param labels B class indices < S. @param loss (may be NULL) the
 * readout loss before the step.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ERANGE (a label >= S);
 * LSE_ENONFINITE; a solver or optimizer error.
 */
LSE_API lse_status lse_capsnet_train_step(lse_capsnet *c,
                                          const gsl_matrix *children,
                                          const size_t *labels, double *loss,
                                          lse_error *err);

/**
 * @brief Classify @p n examples, rows of @p children (n N, dc), in batches
 * of B (the last padded with zero children): label = argmax_j ||v_j||.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; a routing error.
 */
LSE_API lse_status lse_capsnet_predict(lse_capsnet *c,
                                       const gsl_matrix *children, size_t n,
                                       size_t *labels, lse_error *err);

/** @brief The capsule similarity S(i, j) = (W_ij u_i) . v_j with i the
 *  child's row within the term's view: one parameter "W" (n_child n_parent,
 *  d_parent d_child), no config. */
LSE_API extern const lse_sim_type *const lse_capsnet_sim;

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_CAPSNET_H */
