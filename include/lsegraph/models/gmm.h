#ifndef LSEGRAPH_MODELS_GMM_H
#define LSEGRAPH_MODELS_GMM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

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
 * @file gmm.h
 * @brief Gaussian mixture model as an LSE graph (models/gmm.c).
 *
 * The graph: a clamped data node "x" (N, d), a PARAM node "mu" (K, d) of
 * means, a PARAM node "logw" (K, 1) of log-weights (logits: pi =
 * softmax(logw)) and a PARAM node "chol" holding the Cholesky factors in the
 * layout of lse_cov_type, joined by one LSE term "mixture" with
 * lse_sim_gaussian. Its energy is exactly the negative log-likelihood
 *
 *     E = - sum_i w_i log sum_k pi_k N(x_i; mu_k, Sigma_k)
 *
 * (w_i = 1 without sample weights). Fitting is lse_solver_em: the E-step is
 * the term's softmax, the M-step the similarity's closed form. Every query
 * (predict, scores) builds the same graph on the query data: there is no
 * second implementation of the density. Derivations: docs/models/gmm.md.
 *
 * @code
 * lse_gmm *m = NULL;
 * lse_error err;
 * lse_status st = lse_gmm_new(2, 2, LSE_COV_FULL, &m, &err);
 * lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
 * o.seed = 42;
 * if (st == LSE_OK)
 *     st = lse_gmm_fit(m, x, &o, &err);   // x: (272, 2)
 * if (st != LSE_OK)
 *     fprintf(stderr, "%s\n", err.message);
 * else
 *     printf("%g\n", lse_gmm_info(m)->loglik_per_sample);
 * lse_gmm_free(m);
 * @endcode
 *
 * Missing values: with opts.missing = LSE_GMM_MISSING_MARGINALIZE, NaN
 * entries of X are missing values and each row contributes the exact
 * marginal likelihood of its observed coordinates (one LSE term per
 * missingness pattern, EM with expected sufficient statistics);
 * lse_gmm_posterior scores such rows. Otherwise NaN is an error.
 */

/** @brief A Gaussian mixture: K components in d dimensions. Opaque. */
typedef struct lse_gmm lse_gmm;

/** @brief How lse_gmm_fit starts each run. */
typedef enum lse_gmm_init {
    /** k-means++ seeding (D^2 sampling, weighted by the sample weights),
     *  then up to lloyd_iter Lloyd iterations; responsibilities = hard
     *  assignment to the nearest mean; one closed-form M-step. */
    LSE_GMM_INIT_KMEANSPP = 0,
    /** uniform random responsibilities (normalized per row), one M-step */
    LSE_GMM_INIT_RANDOM = 1,
    /** start from the model's current parameters (set by the setters or a
     *  previous fit); n_init is then ignored (one run) */
    LSE_GMM_INIT_GIVEN = 2
} lse_gmm_init;

/** @brief What lse_gmm_fit and lse_gmm_posterior do with NaN in the data
 *  (infinities are always an error). */
typedef enum lse_gmm_missing {
    /** NaN is an error: LSE_ENONFINITE naming the row and column */
    LSE_GMM_MISSING_ERROR = 0,
    /** NaN marks a missing value: a row contributes the marginal
     *  likelihood of its observed coordinates; rows with nothing observed
     *  contribute nothing (log-likelihood 0, responsibilities = weights) */
    LSE_GMM_MISSING_MARGINALIZE = 1
} lse_gmm_missing;

/** @brief Acceleration of lse_gmm_fit's EM (docs/models/gmm.md,
 *  "Acceleration"). */
typedef enum lse_gmm_accel {
    /** plain EM */
    LSE_GMM_ACCEL_NONE = 0,
    /** SQUAREM (Varadhan & Roland 2008; default): squared extrapolation
     *  over two EM iterations, kept only when it raises the
     *  log-likelihood at least as much as EM guarantees (reg_covar > 0
     *  lets EM itself lower it by a bound; never beyond) */
    LSE_GMM_ACCEL_SQUAREM = 1
} lse_gmm_accel;

/** @brief Progress callback: called after EM iteration @p iter (1-based)
 *  of run @p run (0-based) with the energy (negative log-likelihood at the
 *  parameters the iteration's E-step saw) and its change from the previous
 *  iteration (NaN at the first). */
typedef void (*lse_gmm_progress_fn)(size_t run, size_t iter, double energy,
                                    double change, void *user);

/** @brief Options of lse_gmm_fit; start from lse_gmm_fit_opts_default(). */
typedef struct lse_gmm_fit_opts {
    lse_gmm_init init;  /**< default LSE_GMM_INIT_KMEANSPP */
    size_t n_init;      /**< runs (>= 1); the best final log-likelihood is
                           kept (default 1) */
    size_t max_iter;    /**< EM iterations per run (default 1000; 0 = only
                           initialize) */
    double tol;         /**< converged when the log-likelihood changes by
                           at most tol |log-likelihood| between iterations
                           (relative; default 1e-9: the reported
                           log-likelihoods are then within 1e-7 of the
                           converged value on the bundled data) */
    double reg_covar;   /**< added to every covariance diagonal in the
                           M-step (default 1e-6) */
    size_t lloyd_iter;  /**< Lloyd iterations after k-means++ seeding
                           (default 10; stops early when assignments stop
                           changing) */
    unsigned long seed; /**< seed of the gsl_rng mt19937 behind every random
                           choice (default 0): equal seeds give bit-identical
                           fits */
    const gsl_vector *sample_weight; /**< (N) weights >= 0 with a positive
                           sum, borrowed for the call; NULL = all 1. They
                           are the term's row weights (weighted EM), and
                           weight the k-means++ seeding */
    lse_gmm_missing missing;         /**< default LSE_GMM_MISSING_ERROR */
    lse_gmm_progress_fn progress;    /**< NULL: silent */
    void *progress_user;             /**< passed back to progress, borrowed */
    /** Data-parallel fitting (docs/mpi.md), NULL (default): one process.
     *  Otherwise x holds this process's share of the rows (the shares of
     *  processes 0, 1, ... in that order make up the data set, each at
     *  least one row) and every process calls lse_gmm_fit with the same
     *  options; reduce must replace buf[0..n) by its sum over the processes
     *  (MPI_Allreduce with MPI_SUM) and leave the same values on every
     *  process. Every sum the fit needs (initialization, E-step energy,
     *  M-step statistics, re-seeding) goes through it, the same number of
     *  times on every process, and the random draws are those of the whole
     *  data set: the fit equals the one-process fit of the concatenated
     *  data up to rounding. A hook error ends the fit with that status.
     *  Missing values (LSE_GMM_MISSING_MARGINALIZE with NaN) are not
     *  supported then (LSE_ENOTSUP). Events and info count rows of the
     *  whole data set. */
    lse_reduce_fn reduce;
    void *reduce_user; /**< passed to reduce, borrowed */
    size_t rank;       /**< this process, 0 <= rank < n_ranks (default 0) */
    size_t n_ranks;    /**< processes sharing the data (default 1; 0
                          counts as 1 without a hook) */
    lse_gmm_accel accel; /**< default LSE_GMM_ACCEL_SQUAREM */
} lse_gmm_fit_opts;

/** @brief The defaults listed in lse_gmm_fit_opts. */
LSE_API lse_gmm_fit_opts lse_gmm_fit_opts_default(void);

/** @brief Outcome of the last fit (NaN / 0 before any fit, and after a
 *  setter changed the parameters). */
typedef struct lse_gmm_fit_info {
    int fitted;               /**< 1 after a successful lse_gmm_fit */
    double loglik;            /**< total (weighted) log-likelihood of the
                                 training data at the final parameters */
    double loglik_per_sample; /**< loglik / n_eff */
    double n_eff;             /**< number of samples: the sum of the sample
                                 weights (N without weights) over the rows
                                 with at least one observed value */
    size_t n_samples;         /**< rows of the training data */
    size_t n_missing;         /**< NaN entries marginalized (missing =
                                 LSE_GMM_MISSING_MARGINALIZE), else 0 */
    size_t n_iter;            /**< EM iterations of the kept run */
    int converged;            /**< the kept run met tol within max_iter */
    size_t best_run;          /**< index of the kept run (0-based) */
    size_t n_increase;        /**< EM iterations whose energy rose (0 in
                                 exact arithmetic; reported by the solver) */
    double bic;               /**< -2 loglik + p log(n_eff) (lower is better) */
    double aic;               /**< -2 loglik + 2 p (lower is better) */
} lse_gmm_fit_info;

/** @brief What happened to a component during a fit. */
typedef enum lse_gmm_action {
    /** the component received (almost) no responsibility in an M-step
     *  (total below min count 1e-10) and was re-seeded at the training
     *  sample with the lowest log-likelihood under the current model */
    LSE_GMM_RESEED = 0
} lse_gmm_action;

/** @brief One event of a fit, for tools to print. */
typedef struct lse_gmm_event {
    size_t run;       /**< 0-based run (n_init) */
    size_t iteration; /**< 1-based EM iteration; 0 = the initial M-step */
    size_t component; /**< 0-based component index */
    lse_gmm_action action;
    size_t sample; /**< 0-based row of X used as the new mean */
} lse_gmm_event;

/** @brief A new mixture of @p k components in @p d dimensions with
 *  covariance structure @p cov: equal weights, zero means, identity
 *  covariances. OUT @p out is owned by the caller (lse_gmm_free). On
 *  failure @p err (may be NULL) holds the status and "lse_gmm_new: facts",
 *  as for every model constructor.
 *  @return LSE_OK; LSE_EFAULT (NULL out); LSE_EINVAL (k or d is 0, unknown
 *  cov); LSE_ENOMEM. */
LSE_API lse_status lse_gmm_new(size_t k, size_t d, lse_cov_type cov,
                               lse_gmm **out, lse_error *err);
/** @brief lse_gmm_new with one of mclust's 14 covariance models
 *  (<lsegraph/covmodel.h>): the covariances are kept in the model's layout
 *  (lse_cov_model_layout, lse_gmm_cov_type) and lse_gmm_fit runs the
 *  model's constrained M-step (docs/models/gmm.md, "mclust's covariance
 *  models"); lse_gmm_n_params and BIC count its free parameters as mclust
 *  does; model files name it ("covariance_type": "VEV"). VVV, VVI, VII and
 *  EEE fit as full, diag, spherical and tied. Missing values cannot be
 *  marginalized with a constrained model (lse_gmm_fit: LSE_ENOTSUP).
 *  @return as lse_gmm_new; LSE_EINVAL also for LSE_COV_MODEL_NONE or an
 *  unknown model. */
LSE_API lse_status lse_gmm_new_model(size_t k, size_t d, lse_cov_model model,
                                     lse_gmm **out, lse_error *err);
/** @brief The mclust model of @p m, or LSE_COV_MODEL_NONE for a mixture
 *  made by lse_gmm_new (or NULL). */
LSE_API lse_cov_model lse_gmm_cov_model(const lse_gmm *m);
/** @brief Free @p m; NULL is a no-op. */
LSE_API void lse_gmm_free(lse_gmm *m);
/** @brief Copy everything of @p src (parameters, fit info, re-seeding
 *  events) into @p dst, a mixture of the same K, d, covariance type and
 *  model. @return LSE_OK; LSE_EFAULT; LSE_EINVAL (another shape);
 *  LSE_ENOMEM. */
LSE_API lse_status lse_gmm_copy(lse_gmm *dst, const lse_gmm *src,
                                lse_error *err);

/** @brief Number of components K. */
LSE_API size_t lse_gmm_k(const lse_gmm *m);
/** @brief Dimension d. */
LSE_API size_t lse_gmm_dim(const lse_gmm *m);
/** @brief Covariance structure. */
LSE_API lse_cov_type lse_gmm_cov_type(const lse_gmm *m);
/** @brief "full", "diag", "spherical", "tied", or NULL for a bad value. */
LSE_API const char *lse_gmm_cov_name(lse_cov_type cov);
/** @brief Parse a covariance name into @p out.
 *  @return LSE_OK, LSE_EFAULT, or LSE_EINVAL for an unknown name. */
LSE_API lse_status lse_gmm_cov_parse(const char *name, lse_cov_type *out);

/**
 * @brief Fit @p m to the rows of @p x (N, d) by EM (lse_solver_em on the
 * model's graph; with missing values, the per-pattern graph and an
 * expected-statistics M-step, docs/models/gmm.md). The previous parameters are
 * replaced by those of the best of n_init runs (the largest final
 * log-likelihood; the first on ties). Empty components are re-seeded
 * (lse_gmm_event, and an LSE_LOG_WARN message through lse_log). On failure @p m
 * is left unchanged.
 * @param x borrowed; @param opts borrowed, NULL = defaults;
 * @param err may be NULL; else "lse_gmm_fit: facts".
 * @return LSE_OK (also when max_iter was reached: see info->converged);
 * LSE_EFAULT; LSE_EDIM (x has the wrong number of columns, or the sample
 * weights the wrong length); LSE_EINVAL ("k = 5 > 3 samples", n_init 0,
 * unknown init or missing policy); LSE_EDOM (tol or reg_covar negative or
 * not finite, negative or non-finite weights, weights summing to 0);
 * LSE_ENONFINITE (infinity in x, or NaN unless missing values are
 * marginalized, named by row and column); LSE_EINVAL also for a column
 * with no observed value when marginalizing;
 * LSE_ENUMERIC (a covariance is not positive definite: the message names
 * the component and asks for a larger reg_covar); LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_fit(lse_gmm *m, const gsl_matrix *x,
                               const lse_gmm_fit_opts *opts, lse_error *err);

/** @brief The outcome of the last fit (borrowed; valid until the next
 *  mutating call on @p m). */
LSE_API const lse_gmm_fit_info *lse_gmm_info(const lse_gmm *m);

/** @brief Number of events recorded by the last fit (all runs). */
LSE_API size_t lse_gmm_n_events(const lse_gmm *m);
/** @brief Event @p i (borrowed; NULL past the end). */
LSE_API const lse_gmm_event *lse_gmm_event_get(const lse_gmm *m, size_t i);

/* ------------------------------------------------------------------ */
/* Queries: each builds the model's graph on the query data.           */

/** @brief Most responsible component of each row of @p x (N, d).
 *  @param labels caller-owned array of N entries.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE; LSE_ENOMEM. */
LSE_API lse_status lse_gmm_predict(const lse_gmm *m, const gsl_matrix *x,
                                   size_t *labels, lse_error *err);
/** @brief Responsibilities p(k | x_i) into @p resp (N, K).
 *  @return as lse_gmm_predict. */
LSE_API lse_status lse_gmm_predict_proba(const lse_gmm *m, const gsl_matrix *x,
                                         gsl_matrix *resp, lse_error *err);
/** @brief log p(x_i) of each row into @p loglik (N).
 *  @return as lse_gmm_predict. */
LSE_API lse_status lse_gmm_score_samples(const lse_gmm *m, const gsl_matrix *x,
                                         gsl_vector *loglik, lse_error *err);
/**
 * @brief Responsibilities and log-likelihoods of the rows of @p x (N, d),
 * with NaN handled as @p missing says: under LSE_GMM_MISSING_MARGINALIZE a
 * row with NaN gets the marginal log-likelihood of its observed coordinates
 * and p(k | observed coordinates); a row with nothing observed gets 0 and
 * the weights. Without NaN this equals lse_gmm_predict_proba and
 * lse_gmm_score_samples.
 * @param resp (N, K) or NULL; @param loglik (N) or NULL.
 * @return as lse_gmm_predict; LSE_EINVAL for an unknown @p missing.
 */
LSE_API lse_status lse_gmm_posterior(const lse_gmm *m, const gsl_matrix *x,
                                     lse_gmm_missing missing, gsl_matrix *resp,
                                     gsl_vector *loglik, lse_error *err);
/** @brief BIC of the model on @p x: -2 sum_i log p(x_i) + p log N.
 *  @return as lse_gmm_predict. */
LSE_API lse_status lse_gmm_bic(const lse_gmm *m, const gsl_matrix *x,
                               double *bic, lse_error *err);
/** @brief AIC of the model on @p x: -2 sum_i log p(x_i) + 2 p.
 *  @return as lse_gmm_predict. */
LSE_API lse_status lse_gmm_aic(const lse_gmm *m, const gsl_matrix *x,
                               double *aic, lse_error *err);

/** @brief Draw out->size1 samples into @p out (n, d): component by weight,
 *  then mu_k + L_k z with z standard normal (gsl_rng mt19937 seeded with
 *  @p seed). @p labels (n entries, may be NULL) gets the components.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENOMEM. */
LSE_API lse_status lse_gmm_sample(const lse_gmm *m, unsigned long seed,
                                  gsl_matrix *out, size_t *labels,
                                  lse_error *err);

/** @brief Free parameters, scikit-learn's count: covariances (full
 *  K d(d+1)/2, diag K d, spherical K, tied d(d+1)/2) + K d means + K - 1
 *  weights. */
LSE_API size_t lse_gmm_n_params(const lse_gmm *m);

/**
 * @brief The graph the model uses, on data @p x (N, d): nodes "x"
 * (clamped, a copy of @p x), "mu", "logw", "chol" (PARAM, the model's
 * current values) and the LSE term "mixture" (lse_sim_gaussian). Its energy
 * is the negative log-likelihood of @p x. OUT @p out is owned by the caller
 * (lse_graph_free); the model is not tied to it.
 * @return as lse_gmm_predict.
 */
LSE_API lse_status lse_gmm_graph_new(const lse_gmm *m, const gsl_matrix *x,
                                     lse_graph **out, lse_error *err);

/* ------------------------------------------------------------------ */
/* Model files (JSON; the schema is in docs/lsefit.md).                */

/**
 * @brief Write the parameter keys of a model file to @p doc, in this
 * order: "model" ("gmm"), "covariance_type", "n_components", "n_features",
 * "feature_names" (the d strings @p names), "weights", "means",
 * "covariances" (native shape: full [K][d][d], tied [d][d], diag [K][d],
 * spherical [K]). A caller may append its own keys (lsefit adds the fit
 * summary, "options" and "standardize").
 * @return LSE_OK; LSE_EFAULT; the setters' status (LSE_ENOMEM).
 */
LSE_API lse_status lse_gmm_to_json(const lse_gmm *m, const char *const *names,
                                   lse_json *doc, lse_error *err);
/**
 * @brief Read a model from the keys lse_gmm_to_json writes (others are
 * ignored): "model" must be "gmm", the counts 1..1000000, the weights sum
 * to 1 within 1e-6, covariances symmetric positive definite (as
 * lse_gmm_set_covariances). @p source (NULL: "<model>") names the document
 * in messages. OUT @p out (lse_gmm_free) and, when @p names is non-NULL,
 * the d feature names in one malloc'ed block (free(*names)); with
 * @p names NULL "feature_names" is not read (and may be absent).
 * Messages name the document as lse_json's getters do ("source: key
 * 'weights' sums to 0.9, not 1").
 * @return LSE_OK; LSE_EFAULT; LSE_ENOTFOUND / LSE_EPARSE (a key absent or
 * of the wrong type or shape: "source: key 'means' must be ..."); the
 * setters' status ("source: key 'covariances': ..."); LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_from_json(const lse_json *doc, const char *source,
                                     lse_gmm **out, char ***names,
                                     lse_error *err);
/** @brief lse_gmm_to_json, then (after a fit) the fit summary keys
 *  "loglik", "loglik_per_sample", "n_iter", "converged", "bic", "aic" of
 *  lse_gmm_info, written atomically to @p path (lse_json_save). */
LSE_API lse_status lse_gmm_save(const lse_gmm *m, const char *const *names,
                                const char *path, lse_error *err);
/** @brief lse_json_load then lse_gmm_from_json (messages name @p path). */
LSE_API lse_status lse_gmm_load(const char *path, lse_gmm **out,
                                char ***names, lse_error *err);

/* ------------------------------------------------------------------ */
/* Parameters.                                                         */

/** @brief Weights pi (K), summing to 1; borrowed. */
LSE_API const gsl_vector *lse_gmm_weights(const lse_gmm *m);
/** @brief Means (K, d); borrowed. */
LSE_API const gsl_matrix *lse_gmm_means(const lse_gmm *m);
/**
 * @brief Covariances in the native shape of the type (scikit-learn's):
 * full (K*d, d), block k = rows k*d .. k*d+d-1 is Sigma_k; tied (d, d);
 * diag (K, d) variances; spherical (K, 1) variances. Borrowed.
 */
LSE_API const gsl_matrix *lse_gmm_covariances(const lse_gmm *m);
/** @brief The Cholesky factors in the graph's "chol" layout (see
 *  lse_cov_type); borrowed. */
LSE_API const gsl_matrix *lse_gmm_chol(const lse_gmm *m);
/** @brief Copy the full covariance Sigma_k (d, d) of component @p k into
 *  @p out, for every type. @return LSE_OK, LSE_EFAULT, LSE_ERANGE, LSE_EDIM. */
LSE_API lse_status lse_gmm_get_covariance(const lse_gmm *m, size_t k,
                                          gsl_matrix *out);

/** @brief Set the weights (K): finite and > 0; divided by their sum.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_EDOM (a weight <= 0);
 *  LSE_ENONFINITE. Clears the fit info. */
LSE_API lse_status lse_gmm_set_weights(lse_gmm *m, const gsl_vector *w,
                                       lse_error *err);
/** @brief Set the means (K, d), finite.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE. Clears the fit
 *  info. */
LSE_API lse_status lse_gmm_set_means(lse_gmm *m, const gsl_matrix *means,
                                     lse_error *err);
/**
 * @brief Set the covariances from the native shape (lse_gmm_covariances).
 * Full and tied matrices must be symmetric (entries equal up to a relative
 * 1e-12) and positive definite; variances must be > 0.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE; LSE_EINVAL (not
 * symmetric); LSE_ENUMERIC (not positive definite, naming the component).
 * Nothing changes on failure. Clears the fit info.
 */
LSE_API lse_status lse_gmm_set_covariances(lse_gmm *m, const gsl_matrix *cov,
                                           lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_GMM_H */
