#ifndef LSEGRAPH_MODELS_LSLDS_H
#define LSEGRAPH_MODELS_LSLDS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include <lsegraph/io.h>
#include <lsegraph/solver.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file lslds.h
 * @brief Switching linear dynamical system with latent continuous states
 * (docs/models/slds.md, "Latent states: the real SLDS"):
 *
 *     z_t ~ Markov(init, trans)  (or i.i.d. from init: mixture)
 *     x_s ~ N(m0, P0) at the first row s of a sequence,
 *     x_t = A_{z_t} x_{t-1} + b_{z_t} + N(0, Q_{z_t}) otherwise,
 *
 * or with L lags (lse_lslds_params_set_lags; docs/models/slds.md
 * "Several lags") x_t ~ N(m0, P0) independently at the first L rows of a
 * sequence and x_t = sum_l A_{z_t,l} x_{t-l} + b_{z_t} + N(0, Q_{z_t})
 * after them,
 *     y_t = C x_t + d + N(0, diag(r))   (observed entries only)
 *
 * or, with per-mode emissions (lse_lslds_params_emission_per_mode),
 * y_t = C_{z_t} x_t + d_{z_t} + N(0, diag(r_{z_t})),
 *
 * fitted by structured variational EM with q(z) q(x): q(z) by forward-
 * backward with the expected Gaussian log-likelihoods as emission scores,
 * q(x) by an information-form smoother of the block-tridiagonal precision
 * (mode-weighted dynamics, observation potentials; models/lslds_kern.c),
 * and closed-form M-steps. Shapes: T rows, K modes, latent dimension D,
 * N observed columns; sequences (@p seq) and missing entries
 * (@p observed, T*N bytes, nonzero = observed, NULL = all) as in
 * kalman.h.
 */

/** @brief Parameters: plain data, owned by the struct (lse_lslds_params_free). */
typedef struct lse_lslds_params {
    size_t K, D, N;
    int markov;        /**< 1: Markov switching; 0: mixture */
    gsl_matrix *A;     /**< (K, D*L*D): row k is A_k = [A_{k,1} ...
                          A_{k,L}] (D x L D) row-major, A_{k,l}
                          multiplying x_{t-l} */
    gsl_matrix *b;     /**< (K, D) */
    gsl_matrix *Q;     /**< (K, D*D) SPD */
    gsl_matrix *C;     /**< (N, D); per-mode emissions: (K*N, D), rows
                          k*N .. k*N+N-1 are C_k */
    gsl_vector *d;     /**< (N), or (K*N): d_k at k*N */
    gsl_vector *r;     /**< (N), or (K*N): observation noise variances
                          (diagonal R, R_k) */
    int per_mode_emission; /**< 1: C, d, r per mode (K blocks) */
    gsl_vector *m0;    /**< (D) */
    gsl_matrix *P0;    /**< (D, D) SPD */
    gsl_vector *init;  /**< (K) initial (Markov) or mixture probabilities */
    gsl_matrix *trans; /**< (K, K) transition probabilities (Markov) */
    size_t lags;       /**< L >= 1 (lse_lslds_params_set_lags; 1 by
                          default) */
} lse_lslds_params;

/** @brief New parameters: A_k = 0.9 I, b = 0, Q = I, C = the first D
 *  unit vectors, d = 0, r = 1, m0 = 0, P0 = I, uniform probabilities.
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (a size 0); LSE_ENOMEM. */
LSE_API lse_status lse_lslds_params_new(size_t K, size_t D, size_t N,
                                        int markov, lse_lslds_params **out,
                                        lse_error *err);
LSE_API void lse_lslds_params_free(lse_lslds_params *p);
/** @brief Make C, d and r per mode: every mode gets a copy of the shared
 *  ones (no-op when they already are per mode). Inference, the M-step,
 *  the ELBO, simulation, log p(y) and the model files follow
 *  (docs/models/slds.md); lse_lslds_update_z then needs the emission
 *  scores (lse_lslds_update_z_with).
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (K*N too large); LSE_ENOMEM. */
LSE_API lse_status lse_lslds_params_emission_per_mode(lse_lslds_params *p,
                                                      lse_error *err);

/** @brief Give the model L lags (1..64): A becomes (K, D*L*D) with
 *  A_{k,1} the old A_k and A_{k,l} = 0 for l > 1 (L = 1 keeps A). Every
 *  sequence then needs more than L rows (the fit, q(x) and the ELBO
 *  refuse shorter ones with LSE_EINVAL).
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (L out of range); LSE_ENOMEM. */
LSE_API lse_status lse_lslds_params_set_lags(lse_lslds_params *p, size_t L,
                                             lse_error *err);

/** @brief The variational posterior q(z) q(x), owned by the struct. */
typedef struct lse_lslds_post {
    size_t T, K, D;
    gsl_matrix *w;     /**< (T, K) q(z_t = k) */
    gsl_matrix *xi;    /**< (K, K) sum over t of q(z_{t-1} = j, z_t = k) */
    gsl_matrix *mean;  /**< (T, D) E_q[x_t] */
    gsl_matrix *cov;   /**< (T, D*D) Cov_q[x_t] */
    gsl_matrix *cross; /**< (T, D*D) Cov_q[x_t, x_{t-1}] (0 at starts) */
    double hz;         /**< entropy of q(z) */
    double hx;         /**< entropy of q(x) (set with it) */
    int have_z, have_x; /**< which factors have been computed */
    size_t lags;       /**< L of the last q(x) update (1 before any) */
    gsl_matrix *lagcov; /**< L > 1: (T, L*D*D), block l-1 of row t is
                           Cov_q[x_t, x_{t-l}] (0 before the sequence
                           start), made by the q(x) update; NULL at
                           L = 1 */
} lse_lslds_post;

LSE_API lse_status lse_lslds_post_new(size_t T, size_t K, size_t D,
                                      lse_lslds_post **out, lse_error *err);
LSE_API void lse_lslds_post_free(lse_lslds_post *q);

/** @brief q(x) update: the smoother (information form; block-banded with
 *  L > 1 lags, which also sets q->lagcov, allocated here) with the dynamics
 *  weighted by q(z) (uniform weights when q(z) has not been computed; per-mode
 *  emissions: the emissions too, entering as Gaussian potentials of x_t);
 *  @p logzx (may be NULL) gets log of its normalizer. */
LSE_API lse_status lse_lslds_update_x(const lse_lslds_params *p,
                                      const gsl_matrix *y,
                                      const unsigned char *observed,
                                      const size_t *seq, lse_lslds_post *q,
                                      double *logzx, lse_error *err);
/** @brief q(z) update: forward-backward (Markov) or per-row softmax
 *  (mixture) with emission scores E_q(x)[log N(x_t; A_k x_{t-1} + b_k,
 *  Q_k)] (0 at sequence starts; with L lags A_k [x_{t-1}; ...; x_{t-L}]
 *  and 0 at the first L rows). Needs q(x) for the model's lags
 *  (LSE_EINVAL otherwise). */
LSE_API lse_status lse_lslds_update_z(const lse_lslds_params *p,
                                      const size_t *seq, lse_lslds_post *q,
                                      lse_error *err);
/** @brief The q(z) update with the emission scores @p es (T, K) added to
 *  the dynamics scores (lse_lslds_emission_scores; NULL: none, which is
 *  lse_lslds_update_z). Per-mode emissions need them: lse_lslds_update_z
 *  refuses such a model (LSE_EINVAL). */
LSE_API lse_status lse_lslds_update_z_with(const lse_lslds_params *p,
                                           const size_t *seq,
                                           const gsl_matrix *es,
                                           lse_lslds_post *q, lse_error *err);
/** @brief es(t, k) = E_q(x)[log N(y_t; C_k x_t + d_k, diag(r_k))] over
 *  the observed entries of row t (the same for every k when the emission
 *  is shared). Needs q(x); LSE_EFAULT, LSE_EDIM, LSE_EINVAL. */
LSE_API lse_status lse_lslds_emission_scores(const lse_lslds_params *p,
                                             const gsl_matrix *y,
                                             const unsigned char *observed,
                                             const lse_lslds_post *q,
                                             gsl_matrix *es, lse_error *err);
/** @brief The emission scores @p s (T, K) that lse_lslds_update_z uses:
 *  s(t, k) = E_q(x)[log N(x_t; A_k x_{t-1} + b_k, Q_k)], 0 at sequence
 *  starts (L lags: A_k [x_{t-1}; ...; x_{t-L}], 0 at the first L rows;
 *  @p seq as for the other calls, may be NULL). With the log
 *  initial and transition probabilities they give the most likely mode
 *  path of q(z) (lse_chain_viterbi). Needs q(x) (LSE_EINVAL otherwise);
 *  LSE_EFAULT, LSE_EDIM, LSE_ENOMEM, LSE_ENUMERIC (a Q_k not positive
 *  definite). */
LSE_API lse_status lse_lslds_scores(const lse_lslds_params *p,
                                    const size_t *seq,
                                    const lse_lslds_post *q, gsl_matrix *s,
                                    lse_error *err);
/** @brief The evidence lower bound E_q[log p(y, x, z)] + H(q), exactly.
 *  Needs both factors (LSE_EINVAL otherwise). */
LSE_API lse_status lse_lslds_elbo(const lse_lslds_params *p,
                                  const gsl_matrix *y,
                                  const unsigned char *observed,
                                  const size_t *seq, const lse_lslds_post *q,
                                  double *elbo, lse_error *err);
/** @brief Closed-form M-step: the parameters maximizing the ELBO for the
 *  given q (reg >= 0 added to the diagonals of Q_k, P0 and to r). A mode
 *  with expected count below 1e-8 keeps its A, b, Q. */
LSE_API lse_status lse_lslds_mstep(lse_lslds_params *p, const gsl_matrix *y,
                                   const unsigned char *observed,
                                   const size_t *seq, const lse_lslds_post *q,
                                   double reg, lse_error *err);

/** @brief Fitting options. */
typedef struct lse_lslds_opts {
    int init_given;     /**< 1: start from the given parameters (0) */
    size_t n_init;      /**< initializations, best ELBO kept (1) */
    size_t max_iter;    /**< EM iterations (200) */
    double tol;         /**< stop when the ELBO gains <= tol per row (1e-7) */
    double reg;         /**< M-step ridge (1e-6) */
    unsigned long seed; /**< (0) */
    /** 1: keep the initial-state mean and covariance (m0, P0) at their
     *  starting values instead of fitting them (0). Fitted from the few
     *  sequence starts (one per sequence) P0 collapses, and the first row
     *  of every held-out sequence is then scored far too low; fixed, they
     *  stay at the spread of the latent states over all rows. */
    int fix_initial;
    /* Several processes (docs/mpi.md, "Latent SLDS"): y, observed and seq
     * hold this process's rows in rank order, after @p context_rows (0 or
     * 1) leading rows that belong to the previous process (the row before
     * the block: only its sequence id is read, telling whether the block
     * continues that sequence). The latent chain is replicated: q(z) and
     * q(x) have the rows of all processes; the observation-side sums are
     * summed over the processes with @p reduce. */
    lse_reduce_fn reduce; /**< sum over processes, or NULL (one process) */
    void *reduce_user;    /**< passed to reduce */
    size_t rank, n_ranks; /**< this process, of n_ranks (0: one process) */
    size_t context_rows;  /**< leading rows of the previous process (0, 1) */
} lse_lslds_opts;
LSE_API lse_lslds_opts lse_lslds_opts_default(void);

/** @brief Initialization: probabilistic PCA of y (missing entries at
 *  their column means) for C, d, r and the latent means; with K > 1 and
 *  N > D, 20 EM iterations of the one-mode model from there, whose C, d,
 *  r and smoothed means replace them; then the autoregressive HMM /
 *  mixture (lse_slds_fit, seeded) on those means for A_k, b_k, Q_k and
 *  the mode probabilities (per-mode emissions: every mode gets the same
 *  C, d, r). */
LSE_API lse_status lse_lslds_init(lse_lslds_params *p, const gsl_matrix *y,
                                  const unsigned char *observed,
                                  const size_t *seq, unsigned long seed,
                                  lse_error *err);

/** @brief Fit: per iteration update_z, update_x, M-step; the ELBO after
 *  each of them is checked not to decrease by more than 1e-8 relative
 *  (the M-step: nor by more than reg T (N + D), the ridge's effect;
 *  LSE_EINCREASE otherwise). K > 1 with N > D starts from the smoothed
 *  states of a one-mode fit (20 EM iterations) on the PCA start. @p q (may be NULL) gets the final posterior
 *  (shape T, K, D; with several processes T is the rows of all of
 *  them, the same on every process), @p elbo the final ELBO, @p n_iter
 *  the iterations. With several processes every process must call with
 *  the same options (LSE_EIO when a reduction fails; the result is the
 *  one-process fit up to the rounding of sums in another order). */
LSE_API lse_status lse_lslds_fit(lse_lslds_params *p, const gsl_matrix *y,
                                 const unsigned char *observed,
                                 const size_t *seq, const lse_lslds_opts *o,
                                 lse_lslds_post *q, double *elbo,
                                 size_t *n_iter, lse_error *err);

/** @brief Importance-sampled log p(y): z paths drawn from the defensive
 *  mixture m(z) = 0.9 q(z) + 0.1 p(z), q(z) ∝ p(z) exp(sum_t s_{t,z_t})
 *  (the q(z) update's distribution for the stored q(x) and the given
 *  parameters, sampled by forward filtering and backward sampling; the
 *  prior share keeps the weights bounded by 10 p(y | z) when q(z) is
 *  overconfident), each weighted by p(z) p(y | z) / m(z) with p(y | z) exact
 *  (lse_kalman_smooth on the path's dynamics); @p estimate = log of the
 *  mean weight, @p se (may be NULL) its delta-method standard error
 *  sd(weights) / (sqrt(n) mean(weights)). Needs q(x) and n_samples >= 2.
 *  Deterministic for a given @p seed. */
LSE_API lse_status lse_lslds_log_marginal(const lse_lslds_params *p,
                                          const gsl_matrix *y,
                                          const unsigned char *observed,
                                          const size_t *seq,
                                          const lse_lslds_post *q,
                                          size_t n_samples, unsigned long seed,
                                          double *estimate, double *se,
                                          lse_error *err);

/** @brief Draw one sequence: y (T, N), x (T, D) and z (T) (x, z may be
 *  NULL); with L lags the first L rows of x from N(m0, P0). */
LSE_API lse_status lse_lslds_simulate(const lse_lslds_params *p,
                                      unsigned long seed, gsl_matrix *y,
                                      gsl_matrix *x, size_t *z,
                                      lse_error *err);

/* ------------------------------------------------------------------ */
/* Model files (JSON; schema in docs/models/slds.md)                   */

/** @brief Write the keys "model" ("slds-latent"), "markov", "n_modes",
 *  "latent_dim", "n_features", "feature_names" (the N strings @p names),
 *  "A" [K][D][D] (L > 1 lags: also "lags": L, and "A" [K][D][L D]),
 *  "b" [K][D], "Q" [K][D][D], "C" [N][D], "d" [N],
 *  "R_diag" [N], "initial_mean" [D], "initial_cov" [D][D], and "initial"
 *  [K] with "transition" [K][K] (Markov) or "weights" [K] (mixture).
 *  Per-mode emissions: "emission": "per-mode", "C" [K][N][D], "d" and
 *  "R_diag" [K][N] (without the key, or "shared": the shapes above).
 *  @return LSE_OK; LSE_EFAULT; LSE_ENONFINITE; LSE_ENOMEM. */
LSE_API lse_status lse_lslds_to_json(const lse_lslds_params *p,
                                     const char *const *names, lse_json *doc,
                                     lse_error *err);
/** @brief Read what lse_lslds_to_json writes: "model" must be
 *  "slds-latent" (LSE_EINVAL otherwise; the observed-state SLDS files say
 *  "slds"), counts in 1..4096 (n_features 1..65536; "lags" 1..64, absent:
 *  1), probabilities >= 0
 *  summing to 1 within 1e-6 (renormalized), R_diag > 0 (LSE_EDOM), Q_k
 *  and initial_cov symmetric positive definite (LSE_ENUMERIC); absent or
 *  misshapen keys give LSE_ENOTFOUND / LSE_EPARSE / LSE_EDIM. @p source
 *  (NULL: "<model>") names the document in messages; @p names (may be
 *  NULL) gets the N feature names in one malloc'ed block. */
LSE_API lse_status lse_lslds_from_json(const lse_json *doc, const char *source,
                                       lse_lslds_params **out, char ***names,
                                       lse_error *err);
/** @brief lse_lslds_to_json written atomically to @p path. */
LSE_API lse_status lse_lslds_save(const lse_lslds_params *p,
                                  const char *const *names, const char *path,
                                  lse_error *err);
/** @brief lse_json_load then lse_lslds_from_json. */
LSE_API lse_status lse_lslds_load(const char *path, lse_lslds_params **out,
                                  char ***names, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_LSLDS_H */
