#ifndef LSEGRAPH_MODELS_SLDS_H
#define LSEGRAPH_MODELS_SLDS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include <lsegraph/graph.h>
#include <lsegraph/io.h>
#include <lsegraph/sim.h>
#include <lsegraph/solver.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file slds.h
 * @brief Switching linear dynamics (Tschantz section 8) as an LSE graph:
 * K linear-Gaussian modes x_t ~ N(A_k [x_{t-1}; ...; x_{t-L}] + b_k,
 * Sigma_k), switching independently (mixture: weights pi_k) or by a hidden
 * Markov chain (autoregressive HMM: initial p0, transition matrix P).
 *
 * The graph (docs/models/slds.md): a clamped series node "x" (T, d), one
 * LSE term "dynamics" with the lse_sim_lingauss similarity whose children
 * are x[L..T-1] and whose context rows are the L previous values (for
 * L = 1 and one sequence: views x[1..T-1] and x[0..T-2] of the same node;
 * otherwise stacked nodes "x" (children) and "z" (lagged context) built
 * per sequence), parents "b" (K, d), parameters "logw" (K, 1, mixture
 * only), "A" (K, d*d*L), "chol" (covariance factors). The Markov version
 * reduces the same term with LSE_REDUCE_CHAIN over the logit nodes "init"
 * (1, K) and "trans" (K, K). The energy is exactly the negative
 * log-likelihood of x[L..] given the first L values of every sequence.
 *
 * @code
 * lse_slds_config cfg = lse_slds_config_default();
 * cfg.n_modes = 2; cfg.dim = 1; cfg.markov = 1;
 * lse_slds *m = NULL;
 * lse_error err;
 * lse_slds_opts o = lse_slds_opts_default();
 * o.n_init = 10;
 * if (lse_slds_new(&cfg, &m, &err) != LSE_OK ||
 *     lse_slds_fit(m, x, NULL, &o, &err) != LSE_OK)
 *     fprintf(stderr, "%s\n", err.message);
 * lse_slds_free(m);
 * @endcode
 *
 * Sequences: functions that take a series take @p seq, an array of T
 * sequence ids or NULL (one sequence). A new sequence starts at row t
 * whenever seq[t] != seq[t-1]. A "step" is a row t of X with at least L
 * predecessors in its own sequence; steps are numbered in row order and
 * are the rows of every per-step output (posteriors, paths).
 *
 * Errors: every fallible call returns an lse_status and, when @p err is
 * not NULL, fills it with "function: facts".
 */

/** @brief An SLDS model (opaque). */
typedef struct lse_slds lse_slds;

/** @brief What an SLDS model is; fixed at creation. */
typedef struct lse_slds_config {
    size_t n_modes;   /**< K >= 1 (default 2) */
    size_t dim;       /**< d >= 1, columns of the series (default 1) */
    size_t lags;      /**< L >= 1 (default 1) */
    int markov;       /**< 0 (default): mixture; 1: Markov switching */
    lse_cov_type cov; /**< noise covariance structure (default full) */
    /** p >= 0 exogenous regressors (default 0): with p > 0 every series
     *  argument has d + p columns, the d modeled values then the p
     *  regressors u_t, and mode k's mean is A_k [x_{t-1}; ...] + b_k +
     *  B_k u_t (B_k = lse_slds_get_beta, d x p); the regressors are data,
     *  never modeled (docs/models/slds.md "Exogenous regressors"). */
    size_t n_exog;
    /** Parts of the dynamics every mode shares (0, default: every part
     *  switches): an OR of LSE_SLDS_SHARE_* flags. Whether the noise
     *  switches is the covariance type (tied: shared). Shared parts are
     *  fitted jointly over the modes, weighted by the responsibilities
     *  and the modes' noise (an ECM step, docs/models/slds.md). */
    unsigned shared;
} lse_slds_config;

/** @brief Flags of lse_slds_config.shared. */
enum {
    LSE_SLDS_SHARE_INTERCEPT = 1u, /**< b_k = b */
    LSE_SLDS_SHARE_AR = 2u,        /**< A_k = A */
    LSE_SLDS_SHARE_EXOG = 4u       /**< B_k = B */
};

/** @brief K = 2, d = 1, L = 1, mixture, full covariances. */
LSE_API lse_slds_config lse_slds_config_default(void);

/** @brief A new model with A_k = 0, b_k = 0, Sigma_k = I and uniform
 *  weights, initial and transition probabilities.
 *  @param cfg borrowed. @param[out] out the model, owned by the caller
 *  (lse_slds_free); NULL on failure.
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (K, d or L is 0, unknown
 *  covariance type); LSE_ENOMEM. */
LSE_API lse_status lse_slds_new(const lse_slds_config *cfg, lse_slds **out,
                                lse_error *err);
/** @brief Free @p m; NULL is a no-op. */
LSE_API void lse_slds_free(lse_slds *m);

LSE_API size_t lse_slds_n_modes(const lse_slds *m);
LSE_API size_t lse_slds_dim(const lse_slds *m);
LSE_API size_t lse_slds_lags(const lse_slds *m);
LSE_API int lse_slds_is_markov(const lse_slds *m);
LSE_API lse_cov_type lse_slds_cov_type(const lse_slds *m);
/** @brief p, the exogenous regressors (lse_slds_config.n_exog). */
LSE_API size_t lse_slds_n_exog(const lse_slds *m);
/** @brief The LSE_SLDS_SHARE_* flags (lse_slds_config.shared). */
LSE_API unsigned lse_slds_shared(const lse_slds *m);

/* ------------------------------------------------------------------ */
/* Parameters. Getters copy into caller-owned outputs and return LSE_OK,
 * LSE_EFAULT, LSE_ERANGE (k >= K) or LSE_EDIM (wrong output shape).
 * Setters copy their (borrowed) input and also return LSE_EDOM or
 * LSE_ENONFINITE for invalid values; they leave the model unchanged on
 * failure. */

/** @brief Mixture weights pi (K). LSE_ENOTSUP for a Markov model. */
LSE_API lse_status lse_slds_get_weights(const lse_slds *m, gsl_vector *w);
/** @brief Set pi from @p w (K): entries finite and > 0, normalized to sum
 *  1. LSE_ENOTSUP for a Markov model. */
LSE_API lse_status lse_slds_set_weights(lse_slds *m, const gsl_vector *w,
                                        lse_error *err);
/** @brief A_k (d, d*L) = [A_k^1 ... A_k^L], A_k^j multiplying x_{t-j}. */
LSE_API lse_status lse_slds_get_a(const lse_slds *m, size_t k, gsl_matrix *a);
LSE_API lse_status lse_slds_set_a(lse_slds *m, size_t k, const gsl_matrix *a,
                                  lse_error *err);
/** @brief B_k (d, p), the coefficients of the exogenous regressors;
 *  LSE_EDIM also when p = 0. */
LSE_API lse_status lse_slds_get_beta(const lse_slds *m, size_t k,
                                     gsl_matrix *beta);
LSE_API lse_status lse_slds_set_beta(lse_slds *m, size_t k,
                                     const gsl_matrix *beta, lse_error *err);
/** @brief Offset b_k (d). */
LSE_API lse_status lse_slds_get_b(const lse_slds *m, size_t k, gsl_vector *b);
LSE_API lse_status lse_slds_set_b(lse_slds *m, size_t k, const gsl_vector *b,
                                  lse_error *err);
/** @brief Noise covariance Sigma_k (d, d) (tied: the same for every k). */
LSE_API lse_status lse_slds_get_cov(const lse_slds *m, size_t k,
                                    gsl_matrix *cov);
/** @brief Set Sigma_k (d, d), symmetric positive definite (LSE_ENUMERIC
 *  otherwise); diag needs zero off-diagonal entries and spherical equal
 *  diagonal entries (relative 1e-12), else LSE_EINVAL; tied sets the
 *  shared matrix whatever k < K. */
LSE_API lse_status lse_slds_set_cov(lse_slds *m, size_t k,
                                    const gsl_matrix *cov, lse_error *err);
/** @brief Transition matrix P (K, K), P(j, k) = p(mode k at t | mode j at
 *  t-1). LSE_ENOTSUP for a mixture. */
LSE_API lse_status lse_slds_get_transition(const lse_slds *m, gsl_matrix *p);
/** @brief Set P from @p p (K, K): entries finite and > 0; each row is
 *  normalized to sum 1. LSE_ENOTSUP for a mixture. */
LSE_API lse_status lse_slds_set_transition(lse_slds *m, const gsl_matrix *p,
                                           lse_error *err);
/** @brief Initial mode probabilities p0 (K): the mode of the first step
 *  of each sequence. LSE_ENOTSUP for a mixture. */
LSE_API lse_status lse_slds_get_initial(const lse_slds *m, gsl_vector *p0);
LSE_API lse_status lse_slds_set_initial(lse_slds *m, const gsl_vector *p0,
                                        lse_error *err);

/* ------------------------------------------------------------------ */
/* Latent continuous states                                            */

/** @brief Treat the series as noisy observations y_t of latent states
 *  x_t: the graph gets a free state node "x" (T, d) initialized at the
 *  observations, a clamped node "y" and a custom lse_custom_quadratic term
 *  "observation" (1/(2 obs_var)) ||x - y||^2; EM then takes gradient steps
 *  on x in every E-step (lse_slds_opts.estep_steps) and keeps the noise
 *  covariances at their initial values (their joint MAP with the states is
 *  degenerate: docs/models/slds.md). @p obs_var > 0 turns it on, 0 off.
 *  Needs L = 1 and one sequence (lse_slds_fit returns LSE_ENOTSUP
 *  otherwise). @return LSE_OK, LSE_EFAULT, LSE_EDOM. */
LSE_API lse_status lse_slds_set_latent(lse_slds *m, double obs_var,
                                       lse_error *err);
/** @brief The observation variance, 0 when the states are observed. */
LSE_API double lse_slds_obs_var(const lse_slds *m);
/** @brief Latent states (T, d) inferred by the last fit, or NULL (not
 *  latent, or not fitted). Borrowed, valid until the next fit or free. */
LSE_API const gsl_matrix *lse_slds_states(const lse_slds *m);

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

typedef enum lse_slds_init {
    /** pooled least-squares fit of all steps, k-means++ (and Lloyd
     *  iterations) on its one-step residuals joined with the steps x_t
     *  (each column standardized), then one M-step from the cluster
     *  labels (default) */
    LSE_SLDS_INIT_KMEANSPP = 0,
    /** random responsibilities, then one M-step */
    LSE_SLDS_INIT_RANDOM = 1,
    /** start from the model's current parameters (n_init is taken as 1) */
    LSE_SLDS_INIT_GIVEN = 2
} lse_slds_init;

/** @brief Progress callback, called after every EM iteration of
 *  initialization @p run (0-based) with the iteration count, the negative
 *  energy (the log-likelihood when the states are observed) and its change;
 *  return non-zero to stop that run. */
typedef int (*lse_slds_progress_fn)(size_t run, size_t iter, double loglik,
                                    double delta, void *user);

typedef struct lse_slds_opts {
    lse_slds_init init; /**< default LSE_SLDS_INIT_KMEANSPP */
    size_t n_init;      /**< initializations, best log-likelihood kept (1) */
    size_t max_iter;    /**< EM iterations per initialization (500) */
    double tol;         /**< converged when the log-likelihood changes by
                           at most tol per step (1e-6) */
    double reg_covar;   /**< added to covariance diagonals (1e-6) */
    unsigned long seed; /**< random seed (0) */
    size_t estep_steps; /**< latent states: gradient steps per E-step (5) */
    lse_slds_progress_fn progress; /**< or NULL */
    void *user;                    /**< passed to progress */
    /** Data-parallel fitting (docs/mpi.md), NULL (default): one process.
     *  Otherwise the series is split into contiguous blocks of rows, one
     *  per process in rank order, and x (with seq) holds this process's
     *  block preceded by context_rows = min(L, rows before the block) rows
     *  that repeat the end of the previous blocks (they are context for
     *  the first steps, never steps themselves). Every process calls
     *  lse_slds_fit with the same options and must own at least one step;
     *  reduce replaces buf[0..n) by its sum over the processes
     *  (MPI_Allreduce with MPI_SUM), leaving the same values everywhere.
     *  Initialization, energies and M-step statistics are summed through
     *  it and the random draws are those of the whole series, so the fit
     *  equals the one-process fit of the whole series up to rounding. The
     *  Markov version is exact across blocks: every process's emission
     *  log-likelihoods (its steps x K) are summed into the whole (steps, K)
     *  matrix, on which every process runs the same forward-backward pass
     *  (memory and communication O(steps K) per iteration). Latent states
     *  are not supported (LSE_ENOTSUP). */
    lse_reduce_fn reduce;
    void *reduce_user;   /**< passed to reduce, borrowed */
    size_t rank;         /**< this process, 0 <= rank < n_ranks (0) */
    size_t n_ranks;      /**< processes (1; 0 counts as 1 without a hook) */
    size_t context_rows; /**< leading rows of x from earlier blocks (0) */
    /** Sum the M-step statistics exactly (0, off): every per-step term is
     *  added to an exact accumulator and each statistic is rounded once
     *  (lse_solver_opts.exact_stats, docs/mpi.md), so the fit is the same
     *  to the last bit for any number of threads and processes and any
     *  split of the series. Off, they agree to rounding (about 1e-14
     *  relative); on, an EM iteration costs about 2.7 times as much. */
    int exact_sums;
} lse_slds_opts;

/** @brief The defaults listed in lse_slds_opts. */
LSE_API lse_slds_opts lse_slds_opts_default(void);

/**
 * @brief Fit the model to the series @p x (T, d) by EM on its graph.
 *
 * E-step: responsibilities (mixture: softmax of the term; Markov: the
 * forward-backward posteriors) and, for latent states, gradient steps on
 * x; M-step: weighted least squares for A_k, b_k, the covariances and the
 * weights (lse_sim_lingauss), closed-form initial and transition
 * probabilities (chain reduction).
 * @param seq T sequence ids or NULL (borrowed). @param opts borrowed; NULL
 * gives the defaults. With p regressors @p x is (T, d + p) (every series
 * argument below likewise); with shared parts the M-step is
 * docs/models/slds.md's ECM step. LSE_ENOTSUP for regressors or shared
 * parts with several processes or latent states.
 * @return LSE_OK (converged or not: see lse_slds_converged); LSE_EFAULT;
 * LSE_EDIM (x has not d columns); LSE_EINVAL (no step: T <= L in every
 * sequence; bad option); LSE_ENONFINITE (NaN or infinity in x);
 * LSE_ENOTSUP (latent states with L > 1 or several sequences, or with
 * several processes); LSE_EINVAL also for bad data-parallel options (a
 * process without a step, context_rows > L);
 * LSE_ENUMERIC (singular least squares in every initialization);
 * LSE_ENOMEM. On failure the parameters are those before the call.
 */
LSE_API lse_status lse_slds_fit(lse_slds *m, const gsl_matrix *x,
                                const size_t *seq, const lse_slds_opts *opts,
                                lse_error *err);

/** @brief Rows of X that are steps: @p n_steps gets their number and, if
 *  @p rows is not NULL (room for T entries), rows[i] the row of step i.
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL when there is no step. */
LSE_API lse_status lse_slds_steps(const lse_slds *m, size_t T,
                                  const size_t *seq, size_t *rows,
                                  size_t *n_steps, lse_error *err);

/** @brief Log-likelihood of @p x (T, d) at the current parameters:
 *  -energy of the graph with x observed. Errors as lse_slds_fit. */
LSE_API lse_status lse_slds_score(const lse_slds *m, const gsl_matrix *x,
                                  const size_t *seq, double *loglik,
                                  lse_error *err);
/** @brief Mode posteriors (n_steps, K): mixture, the responsibilities
 *  softmax_k(sim); Markov, the smoothed marginals p(k_t | all of x).
 *  @p x is taken as observed. LSE_EDIM when @p post has the wrong shape. */
LSE_API lse_status lse_slds_posteriors(const lse_slds *m, const gsl_matrix *x,
                                       const size_t *seq, gsl_matrix *post,
                                       lse_error *err);
/** @brief Most likely mode path (n_steps entries in @p path): Markov,
 *  Viterbi in log space over each sequence; mixture, argmax_k of the
 *  similarity per step (the modes are independent). @p path has room for
 *  n_steps entries. */
LSE_API lse_status lse_slds_viterbi(const lse_slds *m, const gsl_matrix *x,
                                    const size_t *seq, size_t *path,
                                    lse_error *err);
/** @brief Filtered mode probabilities (n_steps, K): Markov, p(k_t | x up
 *  to step t) by the forward pass in log space, restarted from p0 at
 *  every sequence (statsmodels' filtered_marginal_probabilities); mixture,
 *  the responsibilities (the modes are independent). The last step of a
 *  sequence equals its smoothed marginal. LSE_EDIM when @p filt has the
 *  wrong shape; LSE_ENOTSUP for latent states (models/slds_infer.c). */
LSE_API lse_status lse_slds_filtered(const lse_slds *m, const gsl_matrix *x,
                                     const size_t *seq, gsl_matrix *filt,
                                     lse_error *err);
/** @brief Number of parameters lse_slds_stderr reports (0 unless d = 1). */
LSE_API size_t lse_slds_n_stderr(const lse_slds *m);
/** @brief Standard errors of a univariate SLDS (d = 1) from the numerical
 *  Hessian of the exact log-likelihood lse_slds_score at the current
 *  parameters (central differences, steps 1e-4 of each parameter's size):
 *  se = sqrt(diag((-H)^-1)), as statsmodels' MarkovRegression reports by
 *  default (cov_type "approx"). The parameters, in its order and names:
 *  Markov p[i->j] = P(j | i) for j < K-1 and every i (the last column is
 *  1 - the others; p0 is held fixed), mixture pi[k] for k < K-1; const[k]
 *  (b_k); ar.Ll[k] (A_k's lag-l coefficient, statsmodels' exog column xl
 *  when the lags are the regressors); exog<j>[k] (B_k's regressor j,
 *  1-based); sigma2[k] (one "sigma2" when tied). A shared part appears
 *  once, without "[k]".
 *  @p est and @p se have lse_slds_n_stderr(m) entries; @p names (may be
 *  NULL) as many. @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENOTSUP (d >
 *  1 or latent states); LSE_EDOM (a probability within 4 steps of 0);
 *  LSE_ENUMERIC (-H not positive definite: not at a maximum); the
 *  status of lse_slds_score. */
LSE_API lse_status lse_slds_stderr(const lse_slds *m, const gsl_matrix *x,
                                   const size_t *seq, gsl_vector *est,
                                   gsl_vector *se, char (*names)[32],
                                   lse_error *err);
/** @brief argmax_k of lse_slds_posteriors per step (n_steps entries). */
LSE_API lse_status lse_slds_most_likely(const lse_slds *m, const gsl_matrix *x,
                                        const size_t *seq, size_t *modes,
                                        lse_error *err);

/** @brief Draw a series of T rows into @p x (T, d) and its modes into
 *  @p modes (T entries, or NULL). With p regressors @p x is (T, d + p) and
 *  its last p columns are input (u_t, finite; LSE_ENONFINITE otherwise),
 *  left unchanged. The L values before row 0 are taken as zero; mixture modes are drawn i.i.d. from pi, Markov modes start from
 *  p0 and follow P. Deterministic for a given @p seed.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_EINVAL (T = 0); LSE_ENOMEM. */
LSE_API lse_status lse_slds_simulate(const lse_slds *m, size_t T,
                                     unsigned long seed, gsl_matrix *x,
                                     size_t *modes, lse_error *err);

/* ------------------------------------------------------------------ */
/* Results of the last fit (NAN / 0 before the first fit; setters do   */
/* not change them)                                                    */

/** @brief Log-likelihood of the fitted series at the final parameters
 *  (latent states: of the inferred states, the observation term
 *  excluded). */
LSE_API double lse_slds_loglik(const lse_slds *m);
/** @brief lse_slds_loglik divided by the number of steps. */
LSE_API double lse_slds_loglik_per_step(const lse_slds *m);
/** @brief Steps of the fitted series. */
LSE_API size_t lse_slds_n_fit_steps(const lse_slds *m);
/** @brief EM iterations of the kept initialization. */
LSE_API size_t lse_slds_n_iter(const lse_slds *m);
/** @brief 1 when the kept initialization met the tolerance. */
LSE_API int lse_slds_converged(const lse_slds *m);
/** @brief EM iterations whose energy rose (lse_solver_n_increase) in the
 *  kept initialization; 0 for a correct EM. */
LSE_API size_t lse_slds_n_increase(const lse_slds *m);
/** @brief Free parameters: K d^2 L + K d + K d p (each shared part
 *  once instead of K times) + covariance parameters
 *  (full K d(d+1)/2, diag K d, spherical K, tied d(d+1)/2), plus K - 1
 *  weights (mixture) or K - 1 + K (K - 1) probabilities (Markov). */
LSE_API size_t lse_slds_n_params(const lse_slds *m);
/** @brief -2 loglik + n_params log(n_steps). */
LSE_API double lse_slds_bic(const lse_slds *m);
/** @brief -2 loglik + 2 n_params. */
LSE_API double lse_slds_aic(const lse_slds *m);

/**
 * @brief The model's graph on @p x (T, d) at the current parameters, as
 * lse_slds_fit builds it (nodes "x", "z" if stacked, "y" if latent, "b",
 * "logw", "A", "chol", "init", "trans"; terms "dynamics", "observation"),
 * for energyviz, gradient checks or a custom solver.
 * @param[out] g owned by the caller (lse_graph_free); NULL on failure.
 * @return as lse_slds_fit's argument checks; LSE_ENOMEM.
 */
LSE_API lse_status lse_slds_graph_new(const lse_slds *m, const gsl_matrix *x,
                                      const size_t *seq, lse_graph **g,
                                      lse_error *err);

/* ------------------------------------------------------------------ */
/* Model files (JSON; the schema is in docs/lsefit.md)                 */

/**
 * @brief Write the parameter keys of a model file to @p doc, in this
 * order: "model" ("slds"), "markov", "n_modes", "n_features",
 * "feature_names" (the d strings @p names), "weights" (mixture weights,
 * or for a Markov model the stationary distribution of P,
 * lse_chain_stationary from p0), "A" [K][d][d L], "b" [K][d],
 * "covariances" [K][d][d], and for a Markov model "transition" [K][K] and
 * "initial" [K]; with p regressors then "n_exog", "exog_names" (@p names
 * then holds d + p strings: the features, then the regressors) and "beta"
 * [K][d][p]; with shared parts "shared" (a list of "intercept", "ar",
 * "exog"). The covariance type is read from "options.covariance"
 * (absent: full), which the caller writes (lse_slds_save does); a caller
 * may append its own keys (lsefit adds the fit summary, "options" and
 * "standardize").
 * @return LSE_OK; LSE_EFAULT; the setters' status (LSE_ENOMEM).
 */
LSE_API lse_status lse_slds_to_json(const lse_slds *m,
                                    const char *const *names, lse_json *doc,
                                    lse_error *err);
/**
 * @brief Read a model from the keys lse_slds_to_json writes and
 * "options.covariance" (others are ignored): "model" must be "slds", the
 * counts 1..1000000, A's columns a multiple of d (the lags), weights,
 * initial probabilities and transition rows >= 0 summing to 1 within
 * 1e-6, covariances as lse_slds_set_cov accepts them. @p source (NULL:
 * "<model>") names the document in messages. @p out gets the model
 * (lse_slds_free) and, when @p names is not NULL, the d feature names
 * (then the p regressor names) in one malloc'ed block (free(*names)).
 * @return LSE_OK; LSE_EFAULT; LSE_ENOTFOUND / LSE_EPARSE (a key absent or
 * of the wrong type or shape); LSE_EINVAL (another model, an unknown
 * covariance type); LSE_EDOM / LSE_EDIM ("source: key 'initial' sums to
 * ..."); the setters' status ("source: key 'covariances' [1]: ...");
 * LSE_ENOMEM.
 */
LSE_API lse_status lse_slds_from_json(const lse_json *doc, const char *source,
                                      lse_slds **out, char ***names,
                                      lse_error *err);
/** @brief lse_slds_to_json, then (after a fit) the fit summary keys
 *  "loglik", "loglik_per_step", "n_iter", "converged", "bic", "aic", and
 *  "options": {"covariance": ...}, written atomically to @p path
 *  (lse_json_save). */
LSE_API lse_status lse_slds_save(const lse_slds *m, const char *const *names,
                                 const char *path, lse_error *err);
/** @brief lse_json_load then lse_slds_from_json (messages name @p path). */
LSE_API lse_status lse_slds_load(const char *path, lse_slds **out,
                                 char ***names, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_SLDS_H */
