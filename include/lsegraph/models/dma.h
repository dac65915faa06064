#ifndef LSEGRAPH_MODELS_DMA_H
#define LSEGRAPH_MODELS_DMA_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <lsegraph/graph.h>
#include <lsegraph/sim.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file dma.h
 * @brief Dynamic mixture attention (models/dma.c, docs/models/dma.md).
 *
 * A series x_0 .. x_{T-1} (dimension d). Each transition x_t -> x_{t+1}
 * chooses among K modes; mode k's score is an attention similarity of x_t
 * to the mode's parent plus a linear-dynamics similarity, inside one
 * log-sum-exp (lse_sim_sum of lse_dma_attention_sim and lse_sim_lingauss):
 *
 *   S_tk = x_t . m_k + log N(x_{t+1}; A_k x_t + b_k, Sigma_k)
 *   E    = - sum_t log sum_k exp(S_tk) + sum_t log sum_k exp(x_t . m_k)
 *
 * The second term (lse_dma_gate_norm) normalises the attention over the
 * modes, so E is the negative log-likelihood of x_1 .. x_{T-1} given x_0
 * under a mixture of linear regressions gated by softmax_k(x_t . m_k).
 * Graph: clamped nodes "next" (T-1, d) and "prev" (T-1, d); PARAM nodes
 * "b" (K, d; the parents: the offsets), "m" (K, d), "A" (K, d d), "chol"
 * (the layout of cov); terms "modes" (LSE) and "gate-norm" (custom).
 * Fitted by gradient descent on every parameter (lse_solver_gd, Armijo
 * line search: E never rises).
 */

typedef struct lse_dma lse_dma;

/** Most modes. */
#define LSE_DMA_MAX_MODES 16

/** @brief Shapes. */
typedef struct lse_dma_config {
    size_t n_modes; /**< K, 1 .. LSE_DMA_MAX_MODES */
    size_t dim;     /**< d >= 1 */
    size_t T;       /**< observations >= 2 (T - 1 transitions) */
    lse_cov_type cov; /**< noise covariance layout; default spherical */
} lse_dma_config;

/** @brief K = d = T = 0 (must be set), cov spherical. */
LSE_API lse_dma_config lse_dma_config_default(void);

/** @brief What a fit did. */
typedef struct lse_dma_fit_info {
    size_t n_iter;         /**< gradient steps */
    int converged;         /**< |E change| <= 1e-10 before max_iter */
    double energy_initial; /**< E before */
    double energy;         /**< E after (the negative log-likelihood) */
    size_t n_increase;     /**< steps whose E rose by more than
                              1e-12 max(1, |E|) */
} lse_dma_fit_info;

/** The parameter nodes. */
typedef enum lse_dma_param {
    LSE_DMA_B = 0,   /**< b (K, d): offsets, the term's parents */
    LSE_DMA_M = 1,   /**< m (K, d): attention vectors */
    LSE_DMA_A = 2,   /**< A (K, d d): row k holds A_k row-major */
    LSE_DMA_CHOL = 3 /**< chol: noise factors (layout of cov) */
} lse_dma_param;

/**
 * @brief Build the graph and the solver. Parameters start at b = m = 0,
 * A = 0, chol = the identity; the series at 0.
 * @return LSE_OK; LSE_EFAULT; LSE_EDOM (K out of range, d 0, T < 2);
 * LSE_EINVAL (cov tied or unknown); LSE_ENOMEM (also when a size product
 * overflows); a graph error. Message in @p err (may be NULL).
 */
LSE_API lse_status lse_dma_new(const lse_dma_config *config, lse_dma **out,
                               lse_error *err);
/** @brief Free; NULL is a no-op. */
LSE_API void lse_dma_free(lse_dma *m);
/** @brief The graph (borrowed). */
LSE_API lse_graph *lse_dma_graph(const lse_dma *m);
/** @brief A parameter node (borrowed, writable value), NULL if unknown. */
LSE_API lse_node *lse_dma_node(const lse_dma *m, lse_dma_param which);
/** @brief The "modes" term: its softmax (T-1, K) holds each transition's
 *  mode responsibilities at the last evaluation (borrowed). */
LSE_API lse_term *lse_dma_modes(const lse_dma *m);

/** @brief Set the series @p x (T, d): prev = rows 0 .. T-2, next = rows
 *  1 .. T-1. @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE. */
LSE_API lse_status lse_dma_set_series(lse_dma *m, const gsl_matrix *x,
                                      lse_error *err);

/** @brief E at the current values (the negative log-likelihood).
 *  @return LSE_OK; LSE_EFAULT; LSE_ENONFINITE; a similarity error. */
LSE_API lse_status lse_dma_energy(lse_dma *m, double *energy,
                                  lse_error *err);

/**
 * @brief At most @p max_iter gradient-descent steps on every parameter
 * (Armijo line search, stop when E changes by at most 1e-10).
 * @param info may be NULL. @return LSE_OK (also at max_iter); LSE_EFAULT;
 * a solver error.
 */
LSE_API lse_status lse_dma_fit(lse_dma *m, size_t max_iter,
                               lse_dma_fit_info *info, lse_error *err);

/** The attention of the context x_t to the mode's parent: S(t, k) =
 *  x_t . m_k; one parameter "m" (n_parent, d_context); needs a context. */
LSE_API extern const lse_sim_type *const lse_dma_attention_sim;
/** The gate normaliser + sum_t log sum_k exp(x_t . m_k); views x (n, d)
 *  and m (K, d), K <= LSE_DMA_MAX_MODES; no config. */
LSE_API extern const lse_custom_type *const lse_dma_gate_norm;

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_DMA_H */
