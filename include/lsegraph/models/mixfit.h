#ifndef LSEGRAPH_MODELS_MIXFIT_H
#define LSEGRAPH_MODELS_MIXFIT_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file mixfit.h
 * @brief Starts, multi-start EM and bootstrap standard errors for lse_gmm
 * (models/mixfit.c), built on its public API: a start from a hard
 * partition (for hierarchical agglomeration, lse_hc_vvv), emEM (many short
 * runs, the best few to convergence) and mclust's parametric bootstrap.
 */

/**
 * @brief Set the parameters of @p m (K components, d) from a hard
 * partition of the rows of @p x (N, d): labels[i] in 0..K-1, every
 * component non-empty. Weights n_k / N, means the cluster means,
 * covariances the maximum-likelihood ones of the model's type (full
 * W_k / n_k; diag its diagonal; spherical tr / d; tied sum_k W_k / N) plus
 * @p reg_covar on the diagonal. A covariance that is not positive definite
 * (a cluster of fewer than d + 1 distinct rows) is replaced by
 * (W_k + S) / (n_k + 1), S the covariance of all rows: one pseudo-row of
 * the data's spread. The fit info is cleared; a fit with
 * LSE_GMM_INIT_GIVEN starts here.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (x not N x d); LSE_EINVAL (a label
 * >= K, an empty component); LSE_ENONFINITE; LSE_ENUMERIC; LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_init_labels(lse_gmm *m, const gsl_matrix *x,
                                       const size_t *labels, double reg_covar,
                                       lse_error *err);

/** @name emEM's default budget (lse_gmm_emem_opts_default)
 *  n_starts = STARTS + STARTS_PER_K K, n_random = RANDOM + RANDOM_PER_K K.
 *  Session 10 (after split-and-merge EM) measured cheaper budgets on the
 *  start table (bench/gmm_starts.py, 64 cells; docs/lsefit.md, "Budget
 *  after split-and-merge EM") and chose the cheapest that keeps every cell
 *  at or above the session-9 default: 61 cells reached (was 58), 17 % fewer
 *  instructions.
 *  @{ */
/** k-means++ starts, constant part: 5 (session 10; was 10); 4 or fewer
 *  leave Iris spherical K = 7, 8 at -243.19, -224.54 (0.14 below) */
#define LSE_GMM_EMEM_STARTS 5
/** k-means++ starts per component: 2; 1 loses Iris spherical K = 7, 8 */
#define LSE_GMM_EMEM_STARTS_PER_K 2
#define LSE_GMM_EMEM_RANDOM 0
/** random-responsibility starts per component: 2; 1 loses Iris spherical
 *  K = 7, 8 */
#define LSE_GMM_EMEM_RANDOM_PER_K 2
/** EM steps of a short run: 25 (session 10; was 30); 22 and 20 lose
 *  Faithful full and diag K = 6..8 */
#define LSE_GMM_EMEM_SHORT 25
/** short runs continued to convergence: 3 (session 10; was 2): SMEM then
 *  starts from better fits: Iris full K = 5..8 end 1.3 to 5.9 higher
 *  (K = 5..7 reach their targets), no cell lower */
#define LSE_GMM_EMEM_KEEP 3
#define LSE_GMM_EMEM_ROUNDS 1
#define LSE_GMM_EMEM_SHORT_TOL 0.0
#define LSE_GMM_EMEM_DEGENERATE 100.0
/** @} */

/** @brief emEM's budget (lse_gmm_fit_emem). */
typedef struct lse_gmm_emem_opts {
    size_t n_starts;   /**< short runs from the starts o->init draws */
    size_t n_random;   /**< short runs from random responsibilities
                            (LSE_GMM_INIT_RANDOM) */
    size_t short_iter; /**< EM iterations of each short run (>= 1) */
    size_t n_keep;     /**< best short runs continued to convergence (>= 1) */
    size_t n_rounds;   /**< rounds of short_iter iterations: after each, the
                            best third of the runs (at least n_keep, and the
                            best of each kind of start) go on (0 or 1: one
                            round) */
    double short_tol;  /**< a short run stops early when the log-likelihood
                            changes by at most this (relative; the larger of
                            it and o->tol). Default 0: the short runs stop
                            only at o->tol, so a fit under --mpi makes the
                            same choices as one process (an early stop at
                            1e-5 was 15 % faster on the start table but
                            decides on energies that agree across process
                            counts only to rounding) */
    double degenerate; /**< the degeneracy guard: a run whose smallest
                            covariance eigenvalue (lse_gmm_min_eigenvalue)
                            is below degenerate x o->reg_covar is
                            degenerate (a component collapsed onto a
                            lattice line or a few rows, bounded only by
                            reg_covar) and ranks below every run that is
                            not, whatever their log-likelihoods; 0: off;
                            off, too, on data as thin themselves
                            (lse_gmm_emem_threshold).
                            Default LSE_GMM_EMEM_DEGENERATE (100) */
    size_t smem;       /**< split-and-merge EM on the final fit
                            (lse_gmm_smem, lse_gmm_smem_opts_default with
                            n_tries = smem and this guard): moves tried per
                            round; 0: off. Default LSE_GMM_SMEM_TRIES */
} lse_gmm_emem_opts;

/** @brief The default budget for K components: the LSE_GMM_EMEM_* values
 *  above (more starts for larger K). */
LSE_API lse_gmm_emem_opts lse_gmm_emem_opts_default(size_t k);

/**
 * @brief The smallest eigenvalue of @p m's component covariances (as
 * lse_gmm_get_covariance returns them, reg_covar included) into @p out.
 * emEM's degeneracy guard compares it with a multiple of reg_covar
 * (lse_gmm_emem_opts.degenerate).
 * @return LSE_OK; LSE_EFAULT; LSE_ENOMEM; lse_gmm_get_covariance's errors.
 */
LSE_API lse_status lse_gmm_min_eigenvalue(const lse_gmm *m, double *out,
                                          lse_error *err);

/**
 * @brief The eigenvalue threshold of emEM's degeneracy guard on the data
 * @p x: @p factor x o->reg_covar, or 0 (the guard off) when @p factor or
 * o->reg_covar is not positive, or when the data themselves are that thin:
 * the one-component fit of @p m's covariance structure (o->sample_weight
 * and o->mpi honoured) has an eigenvalue below it (a constant column, say,
 * where every fit is "degenerate" and the guard could only cost time).
 * lse_gmm_fit_emem applies it to e->degenerate; a caller ranking fits of
 * its own (lsefit's merges) uses it with lse_gmm_min_eigenvalue.
 * @return LSE_OK; LSE_EFAULT; lse_gmm_new's and lse_gmm_fit's errors.
 */
LSE_API lse_status lse_gmm_emem_threshold(const lse_gmm *m, const gsl_matrix *x,
                                          const lse_gmm_fit_opts *o,
                                          double factor, double *thr,
                                          lse_error *err);

/**
 * @brief emEM: short fits of e->short_iter EM iterations (fewer when the
 * relative change falls to e->short_tol) from
 * e->n_starts starts that o->init draws (seeds o->seed, o->seed + 1, ...;
 * one run each), then e->n_random from random responsibilities (the seeds
 * that follow), then one from each of the @p n_given mixtures @p given
 * (their parameters, e.g. lse_gmm_init_labels of a cut of lse_hc_vvv's
 * tree, or lse_gmm_split of a fit with one component fewer; same K, d and
 * covariance type as @p m); with e->n_rounds > 1, after each round of
 * short_iter iterations the best third (at least n_keep, and the best of
 * each kind of start) go on for another round; then the e->n_keep best of
 * them by log-likelihood (runs that reached the same point, within 1e-10
 * relative, count once) continued to convergence (o->max_iter, o->tol,
 * o->accel).
 * The degeneracy guard (e->degenerate > 0): runs are ranked first by
 * being non-degenerate, then by log-likelihood, both when the short runs
 * are chosen and when the final fit is; when every continued run ends
 * degenerate, the next short runs in that order are continued, one at a
 * time, until one ends non-degenerate (at most n_keep more). When every
 * final run is degenerate, the highest is returned and an LSE_LOG_INFO
 * message says so (check the result with lse_gmm_min_eigenvalue).
 * @p m gets the best final fit and its fit info (the info of the run that
 * produced it). o->progress sees only the final runs. n_keep is capped at
 * the number of short runs that succeeded. With one start and n_keep = 1
 * this is lse_gmm_fit. With e->smem > 0, split-and-merge EM
 * (lse_gmm_smem, e->smem moves tried per round, e's guard) then starts
 * from the best final fit; @p m gets its result.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (no start, short_iter or n_keep
 * 0, init LSE_GMM_INIT_GIVEN with n_starts > 0, a given start of another
 * shape); lse_gmm_fit's errors when every short run fails.
 */
LSE_API lse_status lse_gmm_fit_emem(lse_gmm *m, const gsl_matrix *x,
                                    const lse_gmm_fit_opts *o,
                                    const lse_gmm_emem_opts *e,
                                    const lse_gmm *const *given,
                                    size_t n_given, lse_error *err);

/**
 * @brief Short runs ahead: open a scope of the calling thread in which
 * threads that would otherwise wait run, in the background, the short runs
 * lse_gmm_fit_emem draws (its e->n_starts starts of o->init and e->n_random
 * random ones) for K = @p k_lo .. @p k_hi components with the budget
 * @p e[K - k_lo], on the data @p x with the options @p o and mixtures of
 * @p like's d and covariance type. A call of lse_gmm_fit_emem by this
 * thread inside the scope, on the same @p x (the same matrix, unchanged),
 * for a K of the range, with the same options (o->max_iter, o->n_init and
 * o->progress may differ) and the same budget (n_starts, n_random,
 * short_iter, short_tol, degenerate) takes those runs' results instead of
 * running them, once per K; every other call runs as without the scope.
 * Each short run depends only on its start, so the results are the same
 * bits, for any thread count and any order of the calls. Meant for a chain
 * of fits over K whose serial parts (the continued runs, split-and-merge
 * EM, a caller's own steps between the fits) leave threads idle: lsefit's
 * -k ranges. While the scope is open, this thread's side-by-side fits run
 * on the scope's threads, GSL's error handler is off, OpenBLAS is held
 * single-threaded (lse_blas_serial_enter) while runs go ahead, and a log
 * handler sees a short run's messages when lse_gmm_fit_emem takes it.
 * The scope is open but nothing runs ahead with one thread
 * (lse_get_num_threads), under o->reduce, for mclust's models
 * (lse_gmm_new_model), with o->init LSE_GMM_INIT_GIVEN, or when a pass of
 * the largest K uses several threads itself (rows x k_hi x (1 + d)^2 at or
 * above lse_get_thread_min_work): there every thread is busy already.
 * Close it with lse_gmm_emem_ahead_end.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (k_lo = 0 or above k_hi, a scope
 * open already on this thread, more short runs than a size_t counts);
 * LSE_ENOMEM; lse_gmm_emem_threshold's errors.
 */
LSE_API lse_status lse_gmm_emem_ahead_begin(const lse_gmm *like,
                                            const gsl_matrix *x,
                                            const lse_gmm_fit_opts *o,
                                            const lse_gmm_emem_opts *e,
                                            size_t k_lo, size_t k_hi,
                                            lse_error *err);

/** @brief Close the calling thread's scope of lse_gmm_emem_ahead_begin
 *  (none open: nothing happens): the runs still running are waited for,
 *  and the results never taken are freed. */
LSE_API void lse_gmm_emem_ahead_end(void);

/**
 * @brief A start for K + 1 components from a fit @p src of K: component
 * @p j is cut in two across the principal axis v of its
 * responsibility-weighted scatter of the complete rows of @p x (sample
 * weights @p sample_weight or NULL; rows with NaN left out). The halves
 * get half of its weight each, the means mu_j +- sqrt(2 lambda / pi) v
 * (lambda the axis' variance: the means of the two halves of a Gaussian
 * cut through its mean), and component j's covariance (tied: the shared
 * one); the others are copied, the new half is component K. Into @p dst
 * (K + 1 components, same d and type; the four plain covariance types).
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (dst's shape, an mclust model,
 * component j without complete rows); LSE_ERANGE (j >= K); LSE_EDIM;
 * LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_split(const lse_gmm *src, const gsl_matrix *x,
                                 const gsl_vector *sample_weight, size_t j,
                                 lse_gmm *dst, lse_error *err);

/**
 * @brief A start for K - 1 components from a fit @p src of K (the inverse
 * of lse_gmm_split; the merge moves of Ueda et al.'s split-and-merge EM,
 * 2000): components @p i < @p j become one whose weight is the sum of
 * theirs, whose mean is their weighted mean and whose covariance is that of
 * their two-component mixture (moment matched: the weighted within plus
 * between scatter; diag keeps its diagonal, spherical its mean variance,
 * tied keeps the shared covariance); component j is dropped, the others
 * keep their order. Into @p dst (K - 1 components, same d and type; the
 * four plain covariance types).
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (K < 2, dst's shape, an mclust
 * model); LSE_ERANGE (not i < j < K); LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_merge(const lse_gmm *src, size_t i, size_t j,
                                 lse_gmm *dst, lse_error *err);

/**
 * @brief Independent fits side by side: each of @p m[0 .. n - 1] fitted
 * from where it stands as lse_gmm_fit(m[i], x, o, ...) would, its status
 * into @p status[i] (and its error into @p errs[i] when @p errs is not
 * NULL). The fits run on up to lse_get_num_threads() threads (one under
 * o->reduce, for mclust's models and inside a parallel region), each fit on
 * one; every m[i] ends with the same bits for every thread count, as the
 * calls one after another would leave it. Log messages and o->progress
 * calls come in fit order from the calling thread's point of view (those of
 * fits after the first are recorded and replayed after the batch). The
 * m[i] must be distinct; a fit that fails leaves its mixture as
 * lse_gmm_fit leaves it.
 * @return LSE_OK when every fit was made (whatever its status); LSE_EFAULT
 * (a NULL argument or mixture); LSE_EINVAL (a mixture twice).
 */
LSE_API lse_status lse_gmm_fit_batch(lse_gmm *const *m, size_t n,
                                     const gsl_matrix *x,
                                     const lse_gmm_fit_opts *o,
                                     lse_status *status, lse_error *errs,
                                     lse_error *err);

/**
 * @brief The log-likelihoods of @p m[0 .. n - 1] on @p x side by side:
 * ll[i] = sum over the rows, in order, of w_r log p_i(x_r) (w: @p
 * sample_weight, or 1 when NULL), -inf when it cannot be computed (an error
 * of lse_gmm_score_samples, or a sum that is not finite). On up to
 * lse_get_num_threads() threads (one inside a parallel region), each
 * mixture's sum on one: the same bits for every thread count.
 * @return LSE_OK; LSE_EFAULT (a NULL argument or mixture); LSE_EDIM
 * (sample_weight's length); LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_loglik_batch(const lse_gmm *const *m, size_t n,
                                        const gsl_matrix *x,
                                        const gsl_vector *sample_weight,
                                        double *ll, lse_error *err);

/** @brief Bootstrap standard errors of a fitted mixture
 *  (lse_gmm_bootstrap); the matrices are owned (lse_gmm_boot_free). */
typedef struct lse_gmm_boot {
    size_t n_boot;        /**< replicates that were refitted */
    size_t n_failed;      /**< replicates whose refit failed (redrawn) */
    gsl_vector *weights;  /**< (K) standard errors of the weights */
    gsl_matrix *means;    /**< (K, d) of the means */
    gsl_matrix *covariances; /**< of the covariances, in the native shape
                                  (lse_gmm_covariances) */
} lse_gmm_boot;

/**
 * @brief Parametric bootstrap (mclust's MclustBootstrap, type "pb"): for
 * b = 1..n_boot, draw @p n rows from @p m (lse_gmm_sample, seed
 * @p seed + b), refit them by EM started from @p m's parameters (@p o with
 * init LSE_GMM_INIT_GIVEN; its sample weights and missing policy are not
 * used), and report the standard deviation (denominator n_boot - 1) of the
 * refitted weights, means and covariances over the replicates. A refit
 * that fails (a singular covariance) is redrawn, at most 10 n_boot times.
 * Starting from the fitted parameters keeps the components' labels.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (n_boot < 2, n < K); LSE_ENUMERIC
 * (too many failed refits, with the last refit's message); LSE_ENOMEM.
 */
LSE_API lse_status lse_gmm_bootstrap(const lse_gmm *m, size_t n, size_t n_boot,
                                     unsigned long seed,
                                     const lse_gmm_fit_opts *o,
                                     lse_gmm_boot *out, lse_error *err);

/** @brief Free the matrices of @p b (NULL-safe) and zero it. */
LSE_API void lse_gmm_boot_free(lse_gmm_boot *b);

/** @name Split-and-merge EM's default budget (lse_gmm_smem_opts_default)
 *  @{ */
#define LSE_GMM_SMEM_TRIES 40
#define LSE_GMM_SMEM_PARTIAL 5
/** partial runs continued by keep_iter steps: 8; 4 reaches one cell fewer
 *  of the start table (60) for 6 % fewer instructions, 3 leaves Faithful
 *  full K = 8 1.3 lower */
#define LSE_GMM_SMEM_KEEP 8
/** their EM steps before the best goes on to convergence: 15 (session 10;
 *  was 25): the start table's cells unchanged */
#define LSE_GMM_SMEM_KEEP_ITER 15
#define LSE_GMM_SMEM_MOVES 10
#define LSE_GMM_SMEM_MIN_GAIN 1e-7
#define LSE_GMM_SMEM_SCORE 400
/** @} */

/** @brief How lse_gmm_smem orders the candidate moves. */
typedef enum lse_gmm_smem_rank {
    /** by the log-likelihood of each move's start (one E-step each; ties
     *  in Ueda et al.'s order); the default */
    LSE_GMM_SMEM_RANK_START = 0,
    /** Ueda et al.'s order: merge pairs by decreasing J_merge, for each
     *  the splits by decreasing J_split */
    LSE_GMM_SMEM_RANK_UEDA = 1
} lse_gmm_smem_rank;

/** @brief Split-and-merge EM's budget (lse_gmm_smem). */
typedef struct lse_gmm_smem_opts {
    size_t n_tries;      /**< candidate moves (merge i, j + split k) tried
                              per round, best-ranked first (>= 1) */
    size_t partial_iter; /**< EM iterations of each candidate's partial run
                              (>= 1) */
    size_t n_keep;       /**< best partial runs continued by keep_iter
                              more EM iterations (>= 1) */
    size_t keep_iter;    /**< those iterations; then the best of them is
                              continued to convergence (0: the n_keep all
                              to convergence) */
    size_t max_moves;    /**< accepted moves at most (0: none is tried) */
    double min_gain;     /**< a move is accepted when it raises the
                              log-likelihood by more than min_gain x
                              |log-likelihood| (>= 0) */
    double degenerate;   /**< the degeneracy guard as
                              lse_gmm_emem_opts.degenerate: a result whose
                              smallest covariance eigenvalue is below
                              degenerate x o->reg_covar is never accepted
                              (0: off; off, too, on data as thin,
                              lse_gmm_emem_threshold) */
    lse_gmm_smem_rank rank; /**< the order of the moves (default
                              LSE_GMM_SMEM_RANK_START) */
    size_t n_score;      /**< LSE_GMM_SMEM_RANK_START scores the first
                              n_score moves in Ueda et al.'s order (one
                              E-step each; K (K - 1) (K - 2) / 2 moves in
                              all: 360 at K = 10, 19600 at K = 50), the
                              others follow unscored; 0: all. Default
                              LSE_GMM_SMEM_SCORE (400: every move up to
                              K = 10) */
} lse_gmm_smem_opts;

/** @brief The defaults: the LSE_GMM_SMEM_* values above, the guard
 *  LSE_GMM_EMEM_DEGENERATE. */
LSE_API lse_gmm_smem_opts lse_gmm_smem_opts_default(void);

/**
 * @brief Split-and-merge EM (Ueda, Nakano, Ghahramani & Hinton, Neural
 * Computation 12, 2000) from the current parameters of @p m (K >= 3; for
 * K < 3 there is no move and @p m is left as it is). A round ranks the
 * merge candidates (i, j) by the correlation of their posterior columns,
 * J_merge = P_i . P_j / (|P_i| |P_j|) (sample-weighted), and the split
 * candidates k by the local Kullback-Leibler divergence between the
 * responsibility-weighted empirical distribution of the rows, f_k, and the
 * component's Gaussian, J_split = sum_n f_kn log(f_kn / N(x_n; mu_k,
 * Sigma_k)). A move builds a K-component start: i and j moment-matched
 * into slot i as lse_gmm_merge does, k cut across the principal axis of
 * its responsibility-weighted scatter into slots k and j as lse_gmm_split
 * does (weights w_k / 2, means mu_k +- sqrt(2 lambda / pi) v, both with
 * k's covariance), the others unchanged. The moves are ranked (s->rank:
 * by default by the log-likelihood of their starts, one E-step each, ties
 * in Ueda et al.'s order, at most s->n_score of them; LSE_GMM_SMEM_RANK_UEDA: Ueda et al.'s order,
 * merge pairs by decreasing J_merge and for each the splits k != i, j by
 * decreasing J_split; on Faithful and Iris neither put the improving
 * moves near the top, docs/lsefit.md "Starts") and the first s->n_tries
 * each get a partial run of s->partial_iter EM iterations (lse_gmm_fit
 * with LSE_GMM_INIT_GIVEN and @p o's options; the library's EM updates
 * every component, so it is not Ueda et al.'s EM over the three
 * components alone); the s->n_keep best (non-degenerate first) get
 * s->keep_iter more, the best of them is continued to convergence
 * (o->max_iter, o->tol; keep_iter 0: all n_keep to convergence), and the
 * best result replaces @p m when it raises the log-likelihood by more
 * than s->min_gain x |log-likelihood| and the
 * guard does not call it degenerate; rounds repeat until no move is
 * accepted or s->max_moves were. The log-likelihood of @p m never falls;
 * @p m gets the accepted fit and its fit info (untouched without a move).
 * Every covariance type and mclust model (lse_gmm_new_model) is handled:
 * a start is set in the model's layout and the fit's first M-step imposes
 * the model's constraints. o->sample_weight, o->missing and o->reduce
 * (every process calls with its share of the rows: the scores are summed
 * through the hook, so every process makes the same moves) are honoured.
 * @p n_moves (may be NULL) gets the number of accepted moves.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (n_tries, partial_iter or n_keep
 * 0); LSE_EDIM (x's columns); LSE_EDOM (min_gain or degenerate negative or
 * not finite); lse_gmm_posterior's errors on the current parameters;
 * LSE_ENOMEM. A candidate whose fit fails (a singular covariance) is
 * skipped.
 */
LSE_API lse_status lse_gmm_smem(lse_gmm *m, const gsl_matrix *x,
                                const lse_gmm_fit_opts *o,
                                const lse_gmm_smem_opts *s, size_t *n_moves,
                                lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_MIXFIT_H */
