#ifndef LSEGRAPH_MODELS_STATTN_H
#define LSEGRAPH_MODELS_STATTN_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stdint.h>

#include <gsl/gsl_matrix.h>
#include <lsegraph/graph.h>
#include <lsegraph/ode.h>
#include <lsegraph/optim.h>
#include <lsegraph/sim.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file stattn.h
 * @brief Spatiotemporal attention (models/stattn.c,
 * docs/models/stattn.md).
 *
 * L layers over T time steps; layer l has K_l slots of dimension D_l and
 * is one node (T K_l, D_l), row t K_l + k holding slot k at time t. Layer
 * 0 holds the data (clamped), layers 1 .. L-1 are free states. With
 * S(a, b) = base(W_c a, W_p b) (the `project` similarity over a base,
 * neg-dist by default; every term has its own W_c, W_p) the energy is
 *
 *   E = - sum_l sum_t sum_c (1/b_v) log sum_k exp(b_v S_v(x_{l-1,c,t}, x_{l,k,t}))
 *       - sum_l sum_t sum_k (1/b_c) log sum_{k' != k} exp(b_c S_c(x_{l,k,t}, x_{l,k',t}))
 *       - sum_l sum_{t >= 1} sum_k (1/b_t) log sum_{t - w <= t' < t}
 *                                          exp(b_t S_t(x_{l,k,t}, x_{l,k,t'}))
 *       + bound/2 sum_{l >= 1} ||x_l||^2
 *
 * (inter-layer: every child explained by the slots of the layer above at
 * the same time; intra-layer: every slot by the other slots of its layer
 * and time, the diagonal masked with LSE_MASK_NO_SELF; temporal: every
 * slot by its own previous w states, w = 1 by default: t-1 -> t). A term
 * whose beta is 0 is left out. Terms: "inter<l>.t<t>" and "intra<l>.t<t>"
 * (one per layer and time step), "temporal<l>" (one per layer, a user
 * mask keeps slot k's own past), "bound<l>". Parameter nodes
 * "inter<l>.Wc" (k_l, D_{l-1}), "inter<l>.Wp" (k_l, D_l), "intra<l>.Wc",
 * "intra<l>.Wp", "temporal<l>.Wc", "temporal<l>.Wp" (k_l, D_l), started
 * at the rectangular identity plus seeded N(0, init_sd^2) noise.
 * Inference: the gradient flow (lse_ode) or gradient descent
 * (lse_solver_gd) over the state layers; learning: lse_optim (Adam) on
 * the projections along dE/dW at the inferred states.
 */

typedef struct lse_stattn lse_stattn;

/** Most layers (data layer included). */
#define LSE_STATTN_MAX_LAYERS 8

/** @brief Shapes and settings. */
typedef struct lse_stattn_config {
    size_t n_layers; /**< L, 2 .. LSE_STATTN_MAX_LAYERS (layer 0: data) */
    size_t n_slots[LSE_STATTN_MAX_LAYERS]; /**< K_l >= 1 (K_0: data rows
                                              per step); >= 2 where the
                                              intra-layer term is on */
    size_t dim[LSE_STATTN_MAX_LAYERS];     /**< D_l >= 1 */
    size_t proj_dim[LSE_STATTN_MAX_LAYERS]; /**< k_l of layer l's terms
                                               (inter-layer l-1 -> l, intra,
                                               temporal); 0: D_l */
    size_t T;              /**< time steps >= 1 */
    double beta_inter;     /**< >= 0, 0: no inter-layer terms; default 1 */
    double beta_intra;     /**< >= 0, 0: no intra-layer terms; default 1 */
    double beta_temporal;  /**< >= 0, 0: no temporal terms; default 1 */
    size_t window;         /**< temporal parents t-w .. t-1, w >= 1
                              (default 1; T - 1: all of the past) */
    double bound;          /**< >= 0: bound/2 ||x_l||^2 on every state
                              layer (default 0: none; needed with an
                              inner-product base) */
    const lse_sim_type *base; /**< base of the projected similarity; no
                                 required parameters; NULL: neg-dist */
    double init_sd;        /**< noise on the identity projections (0.0) */
    uint64_t seed;         /**< seed of that noise (1) */
} lse_stattn_config;

/** @brief L = 0, sizes 0 (must be set); the other defaults as listed. */
LSE_API lse_stattn_config lse_stattn_config_default(void);

/** The three kinds of terms (for lse_stattn_proj). */
typedef enum lse_stattn_kind {
    LSE_STATTN_INTER = 0,
    LSE_STATTN_INTRA = 1,
    LSE_STATTN_TEMPORAL = 2
} lse_stattn_kind;

/** How to infer the states. */
typedef enum lse_stattn_solver {
    LSE_STATTN_ODE = 0, /**< gradient flow, lse_ode (default options) */
    LSE_STATTN_GD = 1   /**< gradient descent, lse_solver_gd (Armijo) */
} lse_stattn_solver;

/** @brief What one inference did. */
typedef struct lse_stattn_info {
    size_t n_steps;        /**< accepted ODE steps or GD iterations */
    double energy_initial; /**< E at the starting states */
    double energy;         /**< E at the inferred states */
    double max_increase;   /**< largest rise of E over one step (<= 0:
                              monotone) */
} lse_stattn_info;

/**
 * @brief Build the graph, the solvers and the optimizer (Adam, lr 0.01,
 * on every projection). The data layer starts at 0, the states at 0
 * (see lse_stattn_init_slots). @param[out] out owned by the caller.
 * @return LSE_OK; LSE_EFAULT (NULL config or out); LSE_EDOM (L out of
 * range, a size 0, K_l < 2 with the intra-layer term on, T = 1 with the
 * temporal term on, a beta, bound or init_sd negative or not finite, every
 * term off); LSE_EINVAL (a base with required parameters); LSE_ENOMEM
 * (also when a size product overflows); a graph error. Message in @p err
 * (may be NULL).
 */
LSE_API lse_status lse_stattn_new(const lse_stattn_config *config,
                                  lse_stattn **out, lse_error *err);
/** @brief Free; NULL is a no-op. */
LSE_API void lse_stattn_free(lse_stattn *m);
/** @brief The graph (borrowed). */
LSE_API lse_graph *lse_stattn_graph(const lse_stattn *m);
/** @brief Layer @p l's node (T K_l, D_l), borrowed and writable; NULL if
 *  l >= L. */
LSE_API lse_node *lse_stattn_layer(const lse_stattn *m, size_t l);
/** @brief Projection of a term kind of layer @p l (1 .. L-1): @p side 0
 *  W_c, 1 W_p; NULL if out of range. Borrowed, writable value. */
LSE_API lse_node *lse_stattn_proj(const lse_stattn *m, lse_stattn_kind kind,
                                  size_t l, int side);
/** @brief The inter-layer term of layer @p l (1 .. L-1) at time @p t, or
 *  NULL (its softmax: which slot explains each child). */
LSE_API lse_term *lse_stattn_inter_term(const lse_stattn *m, size_t l,
                                        size_t t);

/** @brief Copy the data (T K_0, D_0) into layer 0.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE. */
LSE_API lse_status lse_stattn_set_data(lse_stattn *m, const gsl_matrix *x,
                                       lse_error *err);
/** @brief Start every state layer's slot k at the same point in every
 *  time step: N(0, sd^2) entries drawn with @p seed.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDOM (sd negative or not finite). */
LSE_API lse_status lse_stattn_init_slots(lse_stattn *m, double sd,
                                         uint64_t seed, lse_error *err);
/** @brief Replace the gradient flow's options. @return LSE_OK;
 *  LSE_EFAULT; LSE_EDOM. */
LSE_API lse_status lse_stattn_set_ode_opts(lse_stattn *m,
                                           const lse_ode_opts *opts,
                                           lse_error *err);
/** @brief Replace the optimizer's options (its state is reset).
 *  @return LSE_OK; LSE_EFAULT; LSE_EDOM. */
LSE_API lse_status lse_stattn_set_optim(lse_stattn *m,
                                        const lse_optim_opts *opts,
                                        lse_error *err);

/** @brief E at the current values. @return LSE_OK; LSE_EFAULT;
 *  LSE_ENONFINITE. */
LSE_API lse_status lse_stattn_energy(lse_stattn *m, double *energy,
                                     lse_error *err);

/**
 * @brief Infer the state layers from their current values: the gradient
 * flow to t1 (LSE_STATTN_ODE) or at most @p max_iter gradient-descent
 * steps with an energy tolerance of 1e-10 (LSE_STATTN_GD; max_iter is
 * unused by the ODE). @param info may be NULL.
 * @return LSE_OK (also at the step limit); LSE_EFAULT; LSE_EINVAL (an
 * unknown solver); a solver error.
 */
LSE_API lse_status lse_stattn_infer(lse_stattn *m, lse_stattn_solver solver,
                                    size_t max_iter, lse_stattn_info *info,
                                    lse_error *err);

/**
 * @brief One learning step: infer the states by the gradient flow from
 * their current values, then one optimizer step on the projections along
 * dE/dW at the inferred states. @param energy (may be NULL) E at the
 * inferred states, before the step. @param info may be NULL.
 * @return LSE_OK; LSE_EFAULT; an inference or optimizer error.
 */
LSE_API lse_status lse_stattn_learn_step(lse_stattn *m, double *energy,
                                         lse_stattn_info *info,
                                         lse_error *err);

/**
 * @brief Which slot of layer @p l explains each row of layer l-1 at time
 * @p t: the argmax of the inter-layer softmax at the current values,
 * K_{l-1} labels < K_l. @return LSE_OK; LSE_EFAULT; LSE_ERANGE (l or t);
 * LSE_EINVAL (the inter-layer term is off); an evaluation error.
 */
LSE_API lse_status lse_stattn_assign(lse_stattn *m, size_t l, size_t t,
                                     size_t *labels, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_STATTN_H */
