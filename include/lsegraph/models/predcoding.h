#ifndef LSEGRAPH_MODELS_PREDCODING_H
#define LSEGRAPH_MODELS_PREDCODING_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <lsegraph/status.h>
#include <lsegraph/sim.h>
#include <lsegraph/graph.h>
#include <lsegraph/solver.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file predcoding.h
 * @brief Hierarchical predictive coding (Tschantz section 7) as a graph:
 * data X (N, d_0) clamped, latent layers H_1 .. H_L, layer l predicting
 * layer l-1 through sim(c, mu) = -1/2 ||c - f_l(W_l mu + b_l)||^2
 * (lse_sim_nonlinear), and a Gaussian prior prior/2 ||H_L||^2 on the top.
 * Derivation, layouts and fitting: docs/models/predcoding.md.
 *
 * @code
 * const size_t dims[2] = {4, 2};             // d_1, d_2
 * lse_predcoding_opts o = lse_predcoding_opts_default();
 * lse_predcoding *pc = NULL;
 * lse_error err;
 * if (lse_predcoding_new(x, 2, dims, &o, &pc, &err) != LSE_OK)
 *     fprintf(stderr, "%s\n", err.message);
 * lse_predcoding_fit_opts f = lse_predcoding_fit_opts_default();
 * lse_solver_result r;
 * lse_predcoding_learn(pc, &f, &r, &err);          // EM: latents, then W, b
 * double mse;
 * lse_predcoding_error(pc, 1, &mse, &err);         // reconstruction of X
 * lse_predcoding_free(pc);
 * @endcode
 */

/** @brief How latent rows are paired with the rows they explain. */
typedef enum lse_pc_layout {
    /** every layer has N rows and row i of layer l explains only row i of
     *  layer l-1 (a diagonal user mask): classic per-sample predictive
     *  coding, E = sum_l sum_i 1/2 ||h_{l-1,i} - f_l(W_l h_{l,i} + b_l)||^2
     *  + prior/2 ||H_L||^2. Costs O(N^2) per layer (dense masked S). */
    LSE_PC_PER_SAMPLE = 0,
    /** layer l has K_l rows (opts.rows) and every row of layer l-1 is
     *  explained by a softmax over all of them: the seed's equation (17)
     *  per layer, a mixture of nonlinear prototypes. */
    LSE_PC_MIXTURE = 1
} lse_pc_layout;

/** @brief Construction options; start from lse_predcoding_opts_default(). */
typedef struct lse_predcoding_opts {
    lse_pc_layout layout;      /**< default LSE_PC_PER_SAMPLE */
    const size_t *rows;        /**< LSE_PC_MIXTURE: K_1 .. K_L (n_layers
                                  entries, each > 0), borrowed; ignored for
                                  per-sample */
    const lse_activation *act; /**< f_1 .. f_L (n_layers entries), f_l maps
                                  layer l to its prediction of layer l-1;
                                  borrowed; NULL: identity everywhere */
    double prior;              /**< scale of the top-layer quadratic
                                  prior/2 ||H_L||^2, >= 0 (0: no prior term);
                                  default 1 */
    double weight_decay;       /**< >= 0: adds weight_decay/2 ||W_l||^2 per
                                  layer (default 0: none) */
    double init_sd;            /**< > 0: W_l and H_l start N(0, init_sd^2),
                                  b_l at 0 (default 0.1) */
    unsigned long seed;        /**< seed of the initialisation (default 1) */
} lse_predcoding_opts;

/** @brief Defaults: per-sample, identity, prior 1, no weight decay,
 *  init_sd 0.1, seed 1. */
LSE_API lse_predcoding_opts lse_predcoding_opts_default(void);

/** @brief Options of lse_predcoding_learn(). */
typedef struct lse_predcoding_fit_opts {
    size_t max_iter;      /**< EM iterations (default 200) */
    size_t estep_steps;   /**< inference (GD) iterations on the latents per
                             E-step (default 10) */
    size_t mstep_steps;   /**< gradient steps on W, b per M-step (default 5) */
    double tol;           /**< stop when an iteration lowers E by <= tol
                             (absolute; default 1e-8) */
    lse_iter_fn callback; /**< called after every EM iteration with the EM
                             solver (lse_solver_energy() is the energy after
                             that iteration's E-step); non-zero stops;
                             NULL: none */
    void *user;           /**< passed to @p callback, borrowed */
} lse_predcoding_fit_opts;

/** @brief max_iter 200, estep_steps 10, mstep_steps 5, tol 1e-8, no
 *  callback. */
LSE_API lse_predcoding_fit_opts lse_predcoding_fit_opts_default(void);

typedef struct lse_predcoding lse_predcoding;

/**
 * @brief Build the predictive-coding graph for data @p x (N, d_0).
 *
 * Nodes: "x" (N, d_0) clamped copy of @p x; "h1".."hL" latent states
 * (N or K_l rows, dims[l-1] columns); parameters "W1".."WL"
 * (d_{l-1}, d_l) and "b1".."bL" (1, d_{l-1}). Terms: "pc1".."pcL"
 * (LSE, lse_sim_nonlinear, child layer l-1, parent layer l), "prior"
 * (quadratic on H_L, if prior > 0), "decay1".."decayL" (if
 * weight_decay > 0).
 * @param x borrowed, copied. @param dims d_1 .. d_L, borrowed.
 * @param opts borrowed; NULL: defaults.
 * @param[out] out the model, owned by the caller (lse_predcoding_free());
 *             NULL on failure.
 * @param err may be NULL; filled on failure.
 * @return LSE_OK; LSE_EFAULT (NULL x, dims, out, or rows for the mixture
 *  layout); LSE_EINVAL (n_layers 0, a zero dimension or K_l, unknown
 *  layout or activation); LSE_EDOM (prior or weight_decay < 0 or not
 *  finite, init_sd <= 0); LSE_ENONFINITE (x holds NaN/inf); LSE_ENOMEM.
 */
LSE_API lse_status lse_predcoding_new(const gsl_matrix *x, size_t n_layers,
                                      const size_t *dims,
                                      const lse_predcoding_opts *opts,
                                      lse_predcoding **out, lse_error *err);

/** @brief Free @p m and its graph; NULL is a no-op. */
LSE_API void lse_predcoding_free(lse_predcoding *m);

/** @brief The graph (owned by @p m). The calls below report through their
 *  @p err (may be NULL): the status and the graph's message. */
LSE_API lse_graph *lse_predcoding_graph(const lse_predcoding *m);
/** @brief Number of latent layers L. */
LSE_API size_t lse_predcoding_n_layers(const lse_predcoding *m);
/** @brief Node of layer @p l: 0 is the data "x", 1..L the latents; NULL out
 *  of range. Borrowed (owned by the graph). */
LSE_API lse_node *lse_predcoding_layer(const lse_predcoding *m, size_t l);
/** @brief W_l (d_{l-1}, d_l) for l in 1..L, else NULL. Borrowed. */
LSE_API lse_node *lse_predcoding_weight(const lse_predcoding *m, size_t l);
/** @brief b_l (1, d_{l-1}) for l in 1..L, else NULL. Borrowed. */
LSE_API lse_node *lse_predcoding_bias(const lse_predcoding *m, size_t l);
/** @brief The LSE term "pc<l>" in which layer l explains layer l-1
 *  (l in 1..L), else NULL. Borrowed. */
LSE_API lse_term *lse_predcoding_term(const lse_predcoding *m, size_t l);

/** @brief Replace the data by @p x (same shape; copied).
 *  @return LSE_OK, LSE_EFAULT, LSE_EDIM, LSE_ENONFINITE. */
LSE_API lse_status lse_predcoding_set_data(lse_predcoding *m,
                                           const gsl_matrix *x, lse_error *err);

/**
 * @brief Inference: gradient descent (lse_solver_gd, Armijo line search)
 * on the latent nodes only, W and b fixed, for at most @p max_iter
 * iterations or until an iteration lowers the energy by <= @p tol. The
 * solver is kept by the model, and its last step size is the next call's
 * first trial step.
 * @param res may be NULL; filled with the solver's result.
 * @return LSE_OK or the solver's error (LSE_EFAULT, LSE_EDOM for tol < 0,
 *  LSE_ENOMEM, LSE_ENONFINITE); message in @p err.
 */
LSE_API lse_status lse_predcoding_infer(lse_predcoding *m, size_t max_iter,
                                        double tol, lse_solver_result *res,
                                        lse_error *err);

/**
 * @brief Learning: EM coordinate descent (lse_solver_em) over the whole
 * graph. E-step (the solver's estep hook) = @p opts->estep_steps
 * iterations of the inference solver of lse_predcoding_infer() on the
 * latents; M-step = @p opts->mstep_steps gradient steps of the EM solver
 * on every W_l, b_l (the nonlinear similarity has no closed form). Both
 * use Armijo line search, each with its own step size, so the energy
 * after each E-step never increases.
 * @param opts borrowed; NULL: defaults. @param res may be NULL.
 * @return LSE_OK or the solver's error; LSE_EDOM for tol < 0.
 */
LSE_API lse_status lse_predcoding_learn(lse_predcoding *m,
                                        const lse_predcoding_fit_opts *opts,
                                        lse_solver_result *res, lse_error *err);

/**
 * @brief Top-down prediction of layer l-1 from layer l:
 * out = f_l(H_l W_l' + 1 b_l), shape (rows of layer l, d_{l-1}).
 * @param out caller-owned, written.
 * @return LSE_OK; LSE_EFAULT; LSE_ERANGE (l not in 1..L); LSE_EDIM.
 */
LSE_API lse_status lse_predcoding_predict(const lse_predcoding *m, size_t l,
                                          gsl_matrix *out, lse_error *err);

/**
 * @brief Mean squared prediction error of layer l-1 under layer l at the
 * current values: (1/(n_{l-1} d_{l-1})) sum_i sum_k A_ik ||c_i - F_k||^2
 * with A the term's softmax (per-sample: A = I, the plain error of
 * reconstructing row i from its own latent). l = 1 is the data
 * reconstruction error. Evaluates the graph first.
 * @return LSE_OK; LSE_EFAULT; LSE_ERANGE; the graph's errors.
 */
LSE_API lse_status lse_predcoding_error(lse_predcoding *m, size_t l,
                                        double *mse, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_PREDCODING_H */
