#ifndef LSEGRAPH_SIM_H
#define LSEGRAPH_SIM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stdint.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file sim.h
 * @brief Similarity functions: the pluggable part of an LSE term.
 *
 * A similarity is a const type object (a name plus function pointers).
 * An LSE term evaluates it on blocks of child rows against all parent rows:
 * S(i, j) = sim(child_i, parent_j; context_i, theta). Hyper-parameters
 * (fixed numbers such as DAR's lambda) live in a per-type config struct
 * that the term copies; learnable parameters (matrices such as W_K or the
 * Cholesky factors of covariances) are parameter nodes of the graph, bound
 * to the term, so they get gradients like any other node.
 * Derivations for every built-in type: docs/similarities.md.
 */

/** @brief Shapes a similarity instance is built for. */
typedef struct lse_sim_shape {
    size_t n_child;          /**< child rows in the term's view */
    size_t block;            /**< most child rows one eval/grad call gets
                                (<= n_child): size workspaces by it */
    size_t n_parent;         /**< parent rows */
    size_t d_child;          /**< columns of the child node */
    size_t d_parent;         /**< columns of the parent node */
    size_t d_context;        /**< columns of the context node; 0 = none */
    size_t n_param;          /**< = type->n_param */
    const size_t *param_rows; /**< n_param entries; 0 for an absent optional
                                 parameter */
    const size_t *param_cols; /**< n_param entries */
} lse_sim_shape;

/** @brief Everything a kernel reads. Matrices are borrowed for the call. */
typedef struct lse_sim_args {
    const gsl_matrix *child;   /**< (b, d_child): a block of child rows */
    const gsl_matrix *parent;  /**< (n_parent, d_parent): all parents */
    const gsl_matrix *context; /**< (b, d_context), aligned with child; or
                                  NULL */
    size_t child_offset;       /**< index of child row 0 within the term's
                                  child view (for caches made by prepare) */
    const gsl_matrix *const *param; /**< n_param values; NULL entry for an
                                       absent optional parameter */
    const void *config;        /**< the type's config struct (copied) */
    void *work;                /**< workspace from work_new, or NULL */
} lse_sim_args;

/** @brief Where a gradient kernel ADDS its results (each may be NULL:
 *  not wanted). Shapes as the matching value in lse_sim_args. */
typedef struct lse_sim_grads {
    gsl_matrix *child;    /**< += sum_j G(i,j) dsim/dchild_i   (b, d_child) */
    gsl_matrix *parent;   /**< += sum_i G(i,j) dsim/dparent_j  (n_parent, d_parent) */
    gsl_matrix *context;  /**< += sum_j G(i,j) dsim/dcontext_i (b, d_context) */
    gsl_matrix *const *param; /**< n_param entries, each NULL or += dE/dtheta */
} lse_sim_grads;

/** @brief Options of a closed-form M-step. */
typedef struct lse_mstep_opts {
    double reg_covar;  /**< added to covariance diagonals (default 1e-6) */
    double min_count;  /**< parents with less total responsibility are left
                          unchanged and reported empty (default 1e-10) */
} lse_mstep_opts;

/** @brief Defaults: reg_covar = 1e-6, min_count = 1e-10. */
LSE_API lse_mstep_opts lse_mstep_opts_default(void);

/* ------------------------------------------------------------------ */
/* Exact (order-independent) sums of doubles (docs/core.md).           */

/** Digits of an lse_xsum: 32 bits of significance each, digit 0 weighing
 *  2^-1074 (the smallest subnormal), 64 bits of headroom above DBL_MAX. */
#define LSE_XSUM_DIGITS 68
/** Doubles of an exported lse_xsum: the digits, then the counts of +inf,
 *  -inf and NaN terms. */
#define LSE_XSUM_EXPORT (LSE_XSUM_DIGITS + 3)

/**
 * @brief A fixed-point "superaccumulator" holding the exact sum of any
 * number (< 2^62) of finite doubles: adding is exact, so the sum does not
 * depend on the order of the terms or on how they were split into partial
 * accumulators (merged exactly); lse_xsum_round gives the correctly
 * rounded (to nearest, ties to even) double. Non-finite terms are counted
 * and make the result +-inf or NaN as IEEE addition would. Zero it with
 * lse_xsum_init (or memset / calloc: all-zero bits are an empty sum).
 * Fields are private.
 */
typedef struct lse_xsum {
    int64_t digit[LSE_XSUM_DIGITS]; /**< signed digits, carries deferred */
    int64_t n_add;                  /**< additions since the last carry */
    int64_t n_pinf, n_ninf, n_nan;  /**< non-finite terms */
} lse_xsum;

/** @brief The empty sum (0). */
LSE_API void lse_xsum_init(lse_xsum *x);
/** @brief x += v exactly (v any double; +-inf/NaN are counted). */
LSE_API void lse_xsum_add(lse_xsum *x, double v);
/** @brief x += v[0] + ... + v[n-1] exactly (as n lse_xsum_add calls,
 *  without a call per term). */
LSE_API void lse_xsum_add_array(lse_xsum *x, const double *v, size_t n);
/** @brief The correctly rounded exact sum of v[0] .. v[n-1]: the value of
 *  lse_xsum_init, lse_xsum_add_array and lse_xsum_round, faster when the
 *  terms' exponents span few bits (as a fit's row energies do). */
LSE_API double lse_xsum_sum(const double *v, size_t n);
/** @brief x += y exactly. */
LSE_API void lse_xsum_merge(lse_xsum *x, const lse_xsum *y);
/** @brief The sum rounded to the nearest double (ties to even): 0.0 for an
 *  empty or exactly cancelling sum, +-inf on overflow or an infinite term,
 *  NaN for a NaN term or +inf and -inf terms. */
LSE_API double lse_xsum_round(const lse_xsum *x);
/**
 * @brief Write x (normalized first, hence not const) as LSE_XSUM_EXPORT
 * doubles, each an integer of magnitude < 2^32 (the counts: < 2^32 as
 * well), so that an element-wise sum of the exports of up to 2^20
 * accumulators in double precision (MPI_Allreduce with MPI_SUM, in any
 * order) is exact and imports as their merged sum.
 */
LSE_API void lse_xsum_export(lse_xsum *x, double *out);
/** @brief x = the sum of exported accumulators in @p in (LSE_XSUM_EXPORT
 *  doubles). @return LSE_OK, or LSE_EDOM (x unchanged) when an entry is
 *  not an integer of magnitude < 2^52 (not a sum of <= 2^20 exports). */
LSE_API lse_status lse_xsum_import(lse_xsum *x, const double *in);

/** @brief The part of a similarity type's closed-form M-step that is
 *  reported back: which parents were empty, and (bilinear) the norms that
 *  reveal a collapse towards zero. */
typedef struct lse_mstep_report {
    unsigned char *empty; /**< n_parent flags set to 1 for empty parents,
                             or NULL; caller-owned */
    size_t n_empty;       /**< number of empty parents */
    double norm_before;   /**< type-specific scale before the step (bilinear:
                             ||W_c||_F ||W_p||_F), 0 if unused */
    double norm_after;    /**< the same after the step */
} lse_mstep_report;

/** Type flags. */
enum {
    /** the kernels need every child row at once (no child blocking) */
    LSE_SIM_WHOLE_CHILDREN = 1u << 0,
    /** the type needs a context view */
    LSE_SIM_NEEDS_CONTEXT = 1u << 1
};

/**
 * @brief A similarity type object.
 *
 * eval writes S (b, n_parent) for a block of b child rows. grad receives
 * G = dE/dS for the same block and ADDS the chain rule into @p out.
 * prepare (optional) runs once per evaluation of the term with the whole
 * child view (b = n_child) before any block, to cache parent-side factors
 * (Cholesky factors, norms) in the workspace. The optional closed-form
 * M-step is split so that statistics can be summed across processes:
 * stats ADDS the sufficient statistics of a block to @p acc (stats_size
 * doubles, zeroed by the caller), solve turns the summed statistics into
 * new parent rows and parameters, written in place.
 */
typedef struct lse_sim_type {
    const char *name;               /**< stable: lse_sim_find() uses it */
    size_t n_param;                 /**< parameter nodes bound to a term */
    const char *const *param_names; /**< n_param names */
    unsigned optional_params;       /**< bit i set: parameter i may be NULL */
    size_t config_size;             /**< sizeof the config struct, or 0 */
    const void *config_default;     /**< used when a term passes NULL */
    unsigned flags;                 /**< LSE_SIM_* */
    /** validate shapes and config; on error write a message to msg */
    lse_status (*check)(const lse_sim_shape *shape, const void *config,
                        char *msg, size_t msg_len);
    /** workspace for one term, or NULL; *out NULL if none needed */
    lse_status (*work_new)(const lse_sim_shape *shape, const void *config,
                           void **out);
    void (*work_free)(void *work);
    lse_status (*prepare)(const lse_sim_args *a);
    lse_status (*eval)(const lse_sim_args *a, gsl_matrix *s);
    lse_status (*grad)(const lse_sim_args *a, const gsl_matrix *g,
                       const lse_sim_grads *out);
    size_t (*stats_size)(const lse_sim_shape *shape, const void *config);
    lse_status (*stats)(const lse_sim_args *a, const gsl_matrix *resp,
                        const gsl_vector *weight, double *acc);
    lse_status (*solve)(const lse_sim_args *a, const double *acc,
                        gsl_matrix *parent, gsl_matrix *const *param,
                        const lse_mstep_opts *opts, lse_mstep_report *report,
                        char *msg, size_t msg_len);
    /** write "lambda=0.2, rho=0.5" (config summary for labels); may be NULL */
    int (*describe)(const void *config, char *buf, size_t len);
    /** optional (NULL: not supported): the statistics of stats, but each
     *  row's contribution (the same products, rounded as stats rounds
     *  them) added exactly to @p acc (stats_size accumulators, zeroed by
     *  the caller): the rounded sums do not depend on how the rows are
     *  split into blocks, threads or processes. Entries that stats fills
     *  by symmetry (a mirrored triangle) may be left empty: solve reads
     *  only what stats_exact fills. The caller rounds the accumulators
     *  (lse_xsum_round) and passes them to solve. Needs the same prepare
     *  as stats. */
    lse_status (*stats_exact)(const lse_sim_args *a, const gsl_matrix *resp,
                              const gsl_vector *weight, lse_xsum *acc);
} lse_sim_type;

/* ------------------------------------------------------------------ */
/* Per-pair fallback: write the formula, the library loops it.         */

/** @brief A similarity given pair by pair. Vectors are borrowed rows;
 *  @p context is NULL when the term has none. */
typedef struct lse_sim_pair_fns {
    const char *name;
    double (*eval)(const gsl_vector *child, const gsl_vector *parent,
                   const gsl_vector *context, const void *params);
    /** ADD w * dsim/d(child, parent, context) into gc, gp, gx (each may be
     *  NULL) */
    void (*grad)(const gsl_vector *child, const gsl_vector *parent,
                 const gsl_vector *context, double w, gsl_vector *gc,
                 gsl_vector *gp, gsl_vector *gx, const void *params);
} lse_sim_pair_fns;

/** @brief Config of the built-in type lse_sim_pairwise: a borrowed table
 *  of pair functions and borrowed params, both of which must outlive the
 *  graph. */
typedef struct lse_sim_pair_config {
    const lse_sim_pair_fns *fns;
    const void *params;
} lse_sim_pair_config;

/* ------------------------------------------------------------------ */
/* Built-in similarity types (one file each in lib/sim/).              */

/** c.p  (d_child == d_parent) */
LSE_API extern const lse_sim_type *const lse_sim_dot;
/** c.p / sqrt(d) */
LSE_API extern const lse_sim_type *const lse_sim_scaled_dot;
/** c.p / (|c| |p|); config lse_cosine_config (zero-norm floor) */
LSE_API extern const lse_sim_type *const lse_sim_cosine;
/** (W_c c).(W_p p); params W_c (k, d_child), W_p (k, d_parent);
 *  config lse_bilinear_config (scale). Closed-form M-step: Tschantz sec 10 */
LSE_API extern const lse_sim_type *const lse_sim_bilinear;
/** -1/2 ||c - f(W p + b)||^2; params W (d_child, d_parent), b (1, d_child)
 *  (b optional); config lse_nonlinear_config */
LSE_API extern const lse_sim_type *const lse_sim_nonlinear;
/** Gaussian log-density plus log-weight; parent rows are the means.
 *  params: logw (n_parent, 1) optional (absent: no weight term; present:
 *  log pi = logw - logsumexp(logw)), chol (see lse_gaussian_config).
 *  Closed-form M-step (weights, means, covariances). */
LSE_API extern const lse_sim_type *const lse_sim_gaussian;
/** Linear-Gaussian dynamics: residual c - A_k x - b_k with context x,
 *  parent rows are the offsets b_k. params: logw (K, 1) optional,
 *  A (K, d_child * d_context), chol as gaussian. Closed-form M-step:
 *  weighted least squares. */
LSE_API extern const lse_sim_type *const lse_sim_lingauss;
/** DAR: c.p/sqrt(d) + lambda r(cos); config lse_dar_config */
LSE_API extern const lse_sim_type *const lse_sim_dar;
/** -||c - p||^2 */
LSE_API extern const lse_sim_type *const lse_sim_neg_dist;
/** exp(-||c - p||^2 / s^2); config lse_dist_config (s) */
LSE_API extern const lse_sim_type *const lse_sim_gauss_kernel;
/** 1 / (eps + ||c - p||^p); config lse_dist_config (p, eps) */
LSE_API extern const lse_sim_type *const lse_sim_inv_dist;
/** -log(eps + ||c - p||^p); config lse_dist_config (p, eps) */
LSE_API extern const lse_sim_type *const lse_sim_idw;
/** DAAM Gaussian gate; parents are the head offsets delta_h (H, d);
 *  param c (H, 1) gate widths; config lse_daam_config */
LSE_API extern const lse_sim_type *const lse_sim_daam;
/** loops an lse_sim_pair_fns table; config lse_sim_pair_config */
LSE_API extern const lse_sim_type *const lse_sim_pairwise;

/** @brief Built-in type by name ("gaussian", "scaled-dot", ...), or NULL. */
LSE_API const lse_sim_type *lse_sim_find(const char *name);
/** @brief Number of built-in types, and the i-th (NULL past the end). */
LSE_API size_t lse_sim_count(void);
LSE_API const lse_sim_type *lse_sim_get(size_t i);

/* ------------------------------------------------------------------ */
/* Configs of the built-in types.                                      */

typedef struct lse_cosine_config {
    double eps; /**< norms below eps are taken as eps (default 1e-12) */
} lse_cosine_config;

typedef struct lse_bilinear_config {
    double scale; /**< S = scale (W_c c).(W_p p); default 1 */
} lse_bilinear_config;

typedef enum lse_activation {
    LSE_ACT_IDENTITY = 0,
    LSE_ACT_TANH = 1,
    LSE_ACT_SIGMOID = 2,
    LSE_ACT_RELU = 3
} lse_activation;

typedef struct lse_nonlinear_config {
    lse_activation f; /**< default identity */
} lse_nonlinear_config;

/** Covariance structure; what the chol parameter node holds. */
typedef enum lse_cov_type {
    LSE_COV_FULL = 0,      /**< chol (K, d*d): row-major lower-triangular
                              L_k, Sigma_k = L_k L_k'; upper part ignored */
    LSE_COV_DIAG = 1,      /**< chol (K, d): Sigma_k = diag(l_k^2) */
    LSE_COV_SPHERICAL = 2, /**< chol (K, 1): Sigma_k = l_k^2 I */
    LSE_COV_TIED = 3       /**< chol (1, d*d): one L for every component */
} lse_cov_type;

/** mclust's eigen-decomposition models Sigma_k = lambda_k D_k A_k D_k'
 *  (Celeux & Govaert 1995): letters for volume, shape, orientation,
 *  E(qual), V(ariable) or I(dentity). Names, counts: lsegraph/covmodel.h. */
typedef enum lse_cov_model {
    LSE_COV_MODEL_NONE = 0, /**< the plain M-step of lse_cov_type */
    LSE_COV_EII, LSE_COV_VII, LSE_COV_EEI, LSE_COV_VEI, LSE_COV_EVI,
    LSE_COV_VVI, LSE_COV_EEE, LSE_COV_VEE, LSE_COV_EVE, LSE_COV_VVE,
    LSE_COV_EEV, LSE_COV_VEV, LSE_COV_EVV, LSE_COV_VVV
} lse_cov_model;

typedef struct lse_gaussian_config {
    lse_cov_type cov; /**< default LSE_COV_FULL */
    /** gaussian only: NONE (default) or an mclust model whose constrained
     *  M-step replaces cov's; cov must be its layout
     *  (lse_cov_model_layout). VII, VVI, EEE, VVV run cov's own M-step. */
    lse_cov_model model;
} lse_gaussian_config;

typedef enum lse_gate {
    LSE_GATE_SIGMOID = 0, /**< r = sigma(a) */
    LSE_GATE_TANH = 1,    /**< r = (1 + tanh(a)) / 2 */
    LSE_GATE_LINEAR = 2   /**< r = clip(a + 1/2, 0, 1) (slope in alpha) */
} lse_gate;

typedef struct lse_dar_config {
    double lambda;  /**< strength (default 0.2) */
    double alpha;   /**< sharpness > 0 (default 8) */
    double rho;     /**< vigilance in [-1, 1] (default 0.5) */
    double beta;    /**< resonance feedback for the unroll (default 0) */
    unsigned steps; /**< T_u: 0 = static gate, else unrolled steps */
    lse_gate gate;  /**< default sigmoid */
    double eps;     /**< norm floor for the cosine (default 1e-12) */
} lse_dar_config;

/**
 * @brief DAR's resonance r(cos) for one cosine under @p cfg (NULL: the
 * defaults): gate(alpha (cos - rho)) for the static gate, else T_u = steps
 * unrolled steps r <- gate(alpha (cos + beta r - rho)) from r = 0
 * (docs/sim-dar-daam.md 1.1). The same function the similarity scores with:
 * S = c.p / sqrt(d) + lambda r.
 */
LSE_API double lse_dar_resonance(const lse_dar_config *cfg, double cosv);

/**
 * @brief DAR's resonance of every child/parent pair: @p r (n_c, n_p)
 * r_ij = lse_dar_resonance(cfg, cos_ij) with
 * cos_ij = c_i.p_j / (max(|c_i|, eps) max(|p_j|, eps)). Masks are the
 * caller's (energyviz draws masked pairs with lse_term_allowed).
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (columns differ, r not n_c x n_p).
 */
LSE_API lse_status lse_dar_resonance_matrix(const lse_dar_config *cfg,
                                            const gsl_matrix *child,
                                            const gsl_matrix *parent,
                                            gsl_matrix *r, lse_error *err);

typedef struct lse_dist_config {
    double p;   /**< power (inv-dist, idw; default 2) */
    double eps; /**< > 0 (inv-dist, idw; default 1e-3) */
    double s;   /**< width (gauss-kernel; default 1) */
} lse_dist_config;

typedef enum lse_daam_axis {
    LSE_DAAM_FEATURES = 0, /**< mean/var of each child row over its d
                              features */
    LSE_DAAM_ROWS = 1      /**< mean/var of each feature over all child rows */
} lse_daam_axis;

typedef struct lse_daam_config {
    lse_daam_axis axis; /**< default LSE_DAAM_FEATURES */
    double eps;         /**< variance floor (default 1e-5) */
} lse_daam_config;

/**
 * @brief DAAM's density attention of each entry (the DAAM paper;
 * docs/sim-dar-daam.md 2.3): @p da (N, d)
 * DA_ij = sum_h A_ih g_ihj, the heads' Gaussian gates
 * g_ihj = exp(-y_ihj^2 / (2 c_h^2)), y_ihj = (x_ij - m - delta_hj) /
 * sqrt(v + eps) with m, v the mean and population variance along
 * @p cfg's axis (NULL: the defaults), weighted by @p a (N, H), the term's
 * softmax over the heads. Min-max scaled over the map it gives the
 * importance factors energyviz draws; lse_daam_importance averages it over
 * the rows.
 * @param x (N, d) the children; @param delta (H, d) the heads (parents);
 * @param c (H, 1) the widths.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM.
 */
LSE_API lse_status lse_daam_density(const lse_daam_config *cfg,
                                    const gsl_matrix *x,
                                    const gsl_matrix *delta,
                                    const gsl_matrix *c, const gsl_matrix *a,
                                    gsl_matrix *da, lse_error *err);

/* ------------------------------------------------------------------ */
/* Checking a similarity: for users who write their own.               */

/** @brief Result of a finite-difference gradient check. */
typedef struct lse_gradcheck {
    double max_error;   /**< max over entries of |a - n| / max(floor, |a|, |n|) */
    double analytic;    /**< values at the worst entry */
    double numeric;
    char where[128];    /**< "parent[2,1]", "node 'x'[3,0]", ... */
    size_t n_checked;   /**< entries compared */
} lse_gradcheck;

/**
 * @brief Check every gradient of @p type (children, parents, context and
 * each parameter) against central differences of its eval, with
 * E = sum_ij G(i,j) S(i,j) for a fixed pseudo-random G.
 * @param h step (e.g. 1e-6); @param floor denominator floor (e.g. 1).
 * Arguments are borrowed; @p context and entries of @p param may be NULL.
 * @return LSE_OK (then compare res->max_error), or the kernel's error.
 */
LSE_API lse_status lse_sim_check_gradient(const lse_sim_type *type,
                                          const void *config,
                                          const gsl_matrix *child,
                                          const gsl_matrix *parent,
                                          const gsl_matrix *context,
                                          const gsl_matrix *const *param,
                                          double h, double floor,
                                          lse_gradcheck *res, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_SIM_H */
