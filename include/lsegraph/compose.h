#ifndef LSEGRAPH_COMPOSE_H
#define LSEGRAPH_COMPOSE_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <lsegraph/sim.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file compose.h
 * @brief Similarities built from other similarities (lib/sim/project.c,
 * lib/sim/sum.c,
 * docs/learning.md section 4).
 */

/** Most parameters a base similarity of lse_sim_project may have. */
#define LSE_PROJECT_MAX_BASE_PARAM 4

/**
 * Projected similarity S = base(W_c c, W_p p; x, theta_base): any base
 * similarity on learned projections of the child and parent rows.
 * Parameters: W_c (k_c, d_child), W_p (k_p, d_parent), then the base's
 * parameters (slots 2 .. 2 + base->n_param - 1, shaped for the projected
 * dimensions k_c, k_p; the remaining slots absent). The base sees the
 * term's context unchanged. Config lse_project_config. No closed-form
 * M-step. A base that needs every child row at once (DAAM over rows)
 * needs the term in one block (lse_graph_set_block_rows >= n_child).
 * Memory: the projected parents (n_parent, k_p) and a block of projected
 * children, plus all projected children (n_child, k_c) when the base has a
 * prepare kernel.
 */
LSE_API extern const lse_sim_type *const lse_sim_project;

typedef struct lse_project_config {
    const lse_sim_type *base; /**< required */
    const void *base_config;  /**< borrowed (must outlive the graph); NULL:
                                 the base's default */
} lse_project_config;


/** Most similarities in an lse_sim_sum, and most parameters they have in
 *  all. */
#define LSE_SUM_MAX_TERMS 4
#define LSE_SUM_MAX_PARAM 8

/**
 * Weighted sum of similarities in one LSE term (the reference's
 * "multi-LSE", a dynamic mixture of attention scores):
 * S = sum_m alpha_m S_m(c, p; x, theta_m). Parameters: slot 0 "alpha"
 * (1, n), optional: learned weights (absent: the config's fixed weights);
 * then the components' parameters in order, component m's in the slots
 * 1 + (sum of the earlier components' n_param) onwards (shapes as each
 * component wants them). Every component sees the same child, parent and
 * context rows. Config lse_sum_config. No closed-form M-step.
 */
LSE_API extern const lse_sim_type *const lse_sim_sum;

typedef struct lse_sum_config {
    size_t n;                                    /**< 1 .. LSE_SUM_MAX_TERMS */
    const lse_sim_type *type[LSE_SUM_MAX_TERMS]; /**< the components */
    const void *config[LSE_SUM_MAX_TERMS]; /**< borrowed (must outlive the
                                              graph); NULL: defaults */
    double weight[LSE_SUM_MAX_TERMS]; /**< fixed alpha_m, used when the
                                         alpha parameter is absent */
} lse_sum_config;

/** Most parameters a base similarity of lse_sim_gate may have. */
#define LSE_GATE_MAX_BASE_PARAM 4

/**
 * DAAM-gated similarity (docs/models/daam.md, "Trained on a task"): any
 * base similarity on the child rows modulated by the Density Adaptive
 * Attention gates of H heads with K Gaussians each,
 *   S = base(Phi(C), P; x, theta),  Phi(c)_(h,j) = c_j g_hj(c_j)  (H d),
 *   g_hj(c_j) = (1/K) sum_k exp(-(y_j - delta_hk,j)^2 / (2 width_hk,j^2)),
 *   y_j = (c_j - center_j) / scale_j,
 * the heads' gated features concatenated (the DAAM paper's Algorithm 1,
 * with a mean offset and a width per head, Gaussian and feature: 2 H K d
 * parameters, the paper's 2 H d for K = 1). Parameters: "delta" and
 * "width" (H K, d_child), row h K + k for Gaussian k of head h; then the
 * base's (slots 2 .., shaped for the gated dimension H d_child). Widths
 * must be non-zero (LSE_EDOM at evaluation). Bases with a prepare kernel
 * are refused. Config lse_gate_config. No closed-form M-step.
 */
LSE_API extern const lse_sim_type *const lse_sim_gate;

typedef struct lse_gate_config {
    const lse_sim_type *base; /**< required */
    const void *base_config;  /**< borrowed; NULL: the base's default */
    size_t n_head;            /**< H >= 1 */
    size_t n_gauss;           /**< K >= 1 Gaussians per head */
    const double *center;     /**< d_child entries (borrowed, must outlive
                                 the graph), or NULL: 0 */
    const double *scale;      /**< d_child entries > 0 (borrowed), or NULL:
                                 1 */
} lse_gate_config;

/**
 * @brief The gates and gated features of rows @p x (n, d) under @p cfg:
 * @p gates (n, H d) = g, @p phi (n, H d) = Phi (either may be NULL).
 * @return LSE_OK, LSE_EFAULT, LSE_EINVAL (H or K zero), LSE_EDIM (shapes:
 *  delta and width (H K, d)), LSE_EDOM (a zero or non-finite width).
 */
LSE_API lse_status lse_gate_features(const lse_gate_config *cfg,
                                     const gsl_matrix *delta,
                                     const gsl_matrix *width,
                                     const gsl_matrix *x, gsl_matrix *gates,
                                     gsl_matrix *phi);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_COMPOSE_H */
