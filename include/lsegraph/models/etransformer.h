#ifndef LSEGRAPH_MODELS_ETRANSFORMER_H
#define LSEGRAPH_MODELS_ETRANSFORMER_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stdint.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/status.h>
#include <lsegraph/graph.h>
#include <lsegraph/optim.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file etransformer.h
 * @brief An Energy Transformer block (Hoover et al. 2023) on image patches
 * (models/etransformer.c, docs/models/etransformer.md).
 *
 * An image of side x side pixels is cut into N = (side/patch)^2 patches of
 * P = patch^2 pixels. Token i starts at x_i = W_enc p_i + pos_i (a hidden
 * patch: x_i = mask + pos_i). The tokens are layer-normalized by the
 * library's LayerNorm Lagrangian, g_i = dL/dx_i = gamma (x_i - mean)/sd +
 * delta, and the energy of the normalized tokens of one image is
 *
 *   E(g) = - sum_h sum_c (1/b) log sum_{p != c} exp(b (W_Q^h g_c).(W_K^h g_p))
 *          - sum_i (1/beta_mem) log sum_mu exp(beta_mem xi_mu . g_i)
 *
 * (b = 1/sqrt(k): a heads term of lib/heads.c with per-head Q, K
 * projections, plus a Hopfield memory LSE term over the memories xi). The
 * tokens descend it by the block's update x <- x - alpha dE/dg (T steps):
 * since dg/dx is symmetric and positive semi-definite, the continuous flow
 * never raises E. The completion of a hidden patch is W_dec g_i + b_dec at
 * the last step. Every parameter (W_enc, pos, mask, gamma, delta, W_Q, W_K,
 * xi, W_dec, b_dec) is learned by lse_optim on the squared error of the
 * hidden pixels after the T steps, its gradient back-propagated through
 * the unrolled steps (Hessian-vector products by central differences of
 * the graph's exact gradients).
 */

typedef struct lse_et lse_et;

/** @brief Shapes and settings. Start from lse_et_config_default(). */
typedef struct lse_et_config {
    size_t side;       /**< image side in pixels (default 8) */
    size_t patch;      /**< patch side, divides side (default 2); at least
                          two patches */
    size_t dim;        /**< token dimension D >= 2 (default 32) */
    size_t n_heads;    /**< H, 1 .. LSE_HEADS_MAX (default 4) */
    size_t head_dim;   /**< k >= 1 (default 8) */
    size_t n_memories; /**< M >= 1 Hopfield memories (default 32) */
    double beta_mem;   /**< Hopfield inverse temperature > 0 (default 1) */
    size_t batch;      /**< B images per evaluation >= 1 (default 40) */
    size_t steps;      /**< T descent steps >= 1 (default 3) */
    double alpha;      /**< step size > 0 (default 0.2) */
    double eps;        /**< LayerNorm eps > 0 (default 1e-5) */
    uint64_t seed;     /**< seed of the initial parameters (default 1) */
} lse_et_config;

/** @brief The defaults listed in lse_et_config. */
LSE_API lse_et_config lse_et_config_default(void);

/**
 * @brief A block with seeded initial parameters and an Adam optimizer
 * (lr 0.01) over all of them.
 * @return LSE_OK; LSE_EFAULT; LSE_EDOM (a size 0, patch not dividing side,
 * one patch only, D < 2, H > LSE_HEADS_MAX, beta_mem, alpha or eps not
 * finite and > 0); LSE_ERANGE (sizes whose products overflow); LSE_ENOMEM.
 * Message in @p err (may be NULL).
 */
LSE_API lse_status lse_et_new(const lse_et_config *cfg, lse_et **out,
                              lse_error *err);
/** @brief Free; NULL is a no-op. */
LSE_API void lse_et_free(lse_et *et);
/** @brief The energy graph (borrowed): state node "tokens" (B N, D) holding
 *  g, PARAM nodes "W_Q", "W_K" (H k, D) and "memories" (M, D), one heads
 *  term "attend<b>" per image and the LSE term "memory". */
LSE_API lse_graph *lse_et_graph(const lse_et *et);
/** @brief The configuration (borrowed). */
LSE_API const lse_et_config *lse_et_config_of(const lse_et *et);
/** @brief Number of tokens N per image and pixels P per token. */
LSE_API size_t lse_et_n_tokens(const lse_et *et);
LSE_API size_t lse_et_token_pixels(const lse_et *et);
/** @brief Number of learned parameters. */
LSE_API size_t lse_et_n_params(const lse_et *et);
/** @brief Copy every parameter into @p theta (lse_et_n_params entries, in
 *  the order W_enc (D, P), pos (N, D), mask (1, D), gamma (1, 1), delta
 *  (1, D), W_Q, W_K, memories, W_dec (P, D), b_dec (1, P), row-major).
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM. */
LSE_API lse_status lse_et_params_get(const lse_et *et, gsl_vector *theta,
                                     lse_error *err);
/** @brief Set every parameter from @p theta (that order). @return LSE_OK;
 *  LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE. */
LSE_API lse_status lse_et_params_set(lse_et *et, const gsl_vector *theta,
                                     lse_error *err);
/** @brief Replace the optimizer's options (its state is reset).
 *  @return LSE_OK; LSE_EFAULT; LSE_EDOM. */
LSE_API lse_status lse_et_set_optim(lse_et *et, const lse_optim_opts *opts,
                                    lse_error *err);

/**
 * @brief The initial tokens of B images: @p images (B, side^2), pixel
 * (r, c) in column r side + c; @p hidden (B, N), 1 for a hidden patch, 0
 * for a visible one (patch (r / patch, c / patch) is token
 * (r / patch) (side / patch) + c / patch). @p x (B N, D) receives them.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_EDOM (a hidden entry not 0 or
 * 1); LSE_ENONFINITE (a visible pixel).
 */
LSE_API lse_status lse_et_embed(lse_et *et, const gsl_matrix *images,
                                const gsl_matrix *hidden, gsl_matrix *x,
                                lse_error *err);

/**
 * @brief The block's energy at raw tokens @p x (B N, D): E(LayerNorm(x)),
 * summed over the B images, and (when @p grad_x is not NULL) its gradient
 * with respect to x, dE/dx = (dg/dx) dE/dg.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE; a graph error.
 */
LSE_API lse_status lse_et_energy(lse_et *et, const gsl_matrix *x,
                                 double *energy, gsl_matrix *grad_x,
                                 lse_error *err);

/**
 * @brief Complete B images: embed, T steps x <- x - alpha dE/dg, decode
 * the hidden patches. @p out (B, side^2) receives the images with the
 * hidden pixels replaced (visible pixels copied). @p trace (T + 1, may be
 * NULL) receives the energy at every step.
 * @return as lse_et_embed, or a graph error.
 */
LSE_API lse_status lse_et_complete(lse_et *et, const gsl_matrix *images,
                                   const gsl_matrix *hidden, gsl_matrix *out,
                                   gsl_vector *trace, lse_error *err);

/**
 * @brief The training loss L = 1/(2 n) sum (y - p)^2 over the n hidden
 * pixels of the B images after the T steps, and (when @p grad is not NULL)
 * dL/dtheta (lse_et_n_params entries, the order of lse_et_params_get).
 * @return as lse_et_complete; LSE_EDOM when no patch is hidden.
 */
LSE_API lse_status lse_et_loss(lse_et *et, const gsl_matrix *images,
                               const gsl_matrix *hidden, double *loss,
                               gsl_vector *grad, lse_error *err);

/**
 * @brief One optimizer step on the loss of a batch. @p loss (may be NULL)
 * receives the loss before the step. @return as lse_et_loss, or an
 * optimizer error.
 */
LSE_API lse_status lse_et_train_step(lse_et *et, const gsl_matrix *images,
                                     const gsl_matrix *hidden, double *loss,
                                     lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_ETRANSFORMER_H */
