#ifndef LSEGRAPH_MODELS_DAAM_H
#define LSEGRAPH_MODELS_DAAM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/status.h>
#include <lsegraph/sim.h>
#include <lsegraph/graph.h>
#include <lsegraph/compose.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file daam.h
 * @brief Multi-head Density Adaptive Attention over feature
 * vectors. For data X (N, d), head h = 1..H has an offset delta_h (d) and a
 * width c_h > 0; with m, v the mean and population variance over the
 * chosen axis (lse_daam_axis),
 *   y_ihj = (x_ij - (m + delta_hj)) / sqrt(v + eps),
 *   g_ihj = exp(-y_ihj^2 / (2 c_h^2))        (the Gaussian gate)
 *   x'_h = X .* g_h                           (the paper's per-head output)
 * The graph holds one LSE term with the heads as parents (lse_sim_daam):
 *   S_ih = sum_j log g_ihj,  A_ih = softmax_h S_ih (the term's softmax),
 * so a row's head responsibilities are the softmax of its log-gate sums.
 * Derivation, the density fit and the importance factors:
 * docs/models/daam.md.
 *
 * @code
 * lse_daam *m = NULL;
 * lse_error err;
 * lse_daam_new(3, 4, LSE_DAAM_ROWS, 1e-5, x, &m, &err);  // x (N, 4)
 * lse_daam_init(m, 1, &err);                  // heads at 3 random rows, c = 1
 * lse_daam_fit_report rep;
 * lse_daam_fit(m, 500, 1e-9, &rep, &err);     // density fit of delta, c
 * gsl_vector *imp = gsl_vector_alloc(4);
 * lse_daam_importance(m, NULL, imp, &err);    // IF per feature, in [0, 1]
 * lse_daam_free(m);
 * @endcode
 */

typedef struct lse_daam lse_daam;

/**
 * @brief A DAAM module of @p n_head heads over data @p x (N, dim).
 *
 * Graph: node "x" (N, dim) clamped copy of @p x; parameter nodes "delta"
 * (H, dim), zero, and "c" (H, 1), one; LSE term "daam" (child x, parent
 * delta, lse_sim_daam with config {axis, eps}, parameter c).
 * @param x borrowed, copied; its row count is fixed for the module.
 * @param[out] out owned by the caller (lse_daam_free()).
 * @param err may be NULL.
 * @return LSE_OK; LSE_EFAULT (NULL x or out); LSE_EINVAL (n_head 0, dim 0,
 *  unknown axis); LSE_EDIM (x not (N, dim) with N > 0); LSE_EDOM
 *  (eps <= 0 or not finite); LSE_ENONFINITE; LSE_ENOMEM.
 */
LSE_API lse_status lse_daam_new(size_t n_head, size_t dim, lse_daam_axis axis,
                                double eps, const gsl_matrix *x, lse_daam **out,
                                lse_error *err);

/** @brief Free @p m; NULL is a no-op. */
LSE_API void lse_daam_free(lse_daam *m);

/** @brief "function: facts" of the last failure on @p m ("" if none).
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_daam_errmsg(const lse_daam *m);

LSE_API lse_graph *lse_daam_graph(const lse_daam *m);
LSE_API lse_term *lse_daam_term(const lse_daam *m);
/** @brief Nodes "x", "delta" (H, dim) and "c" (H, 1); borrowed, values
 *  writable (c must stay non-zero). */
LSE_API lse_node *lse_daam_data(const lse_daam *m);
LSE_API lse_node *lse_daam_delta(const lse_daam *m);
LSE_API lse_node *lse_daam_width(const lse_daam *m);
LSE_API size_t lse_daam_n_head(const lse_daam *m);

/**
 * @brief Default floor on the gate widths |c_h| during lse_daam_fit():
 * a tenth of the spread of the standardized data. Such a gate is below
 * exp(-50) one spread unit from its centre, i.e. it attends to single
 * points; the maximum-likelihood fit of a head that sits on one row would
 * otherwise drive c_h to 0 and E_fit to -infinity.
 */
#define LSE_DAAM_MIN_WIDTH 0.1

/** @brief Set the floor on |c_h| used by lse_daam_fit() (default
 *  LSE_DAAM_MIN_WIDTH). @return LSE_OK; LSE_EFAULT; LSE_EDOM (not finite
 *  or <= 0). */
LSE_API lse_status lse_daam_set_min_width(lse_daam *m, double min_width,
                                          lse_error *err);

/** @brief The floor on |c_h| (NaN for NULL). */
LSE_API double lse_daam_min_width(const lse_daam *m);

/** @brief Replace the data (same shape, copied).
 *  @return LSE_OK, LSE_EFAULT, LSE_EDIM, LSE_ENONFINITE. */
LSE_API lse_status lse_daam_set_data(lse_daam *m, const gsl_matrix *x,
                                     lse_error *err);

/**
 * @brief Start the heads at @p n_head distinct data rows r_h drawn with the
 * GSL mt19937 generator seeded by @p seed: delta_h = x_{r_h} - m (for
 * LSE_DAAM_FEATURES, m is row r_h's own mean), c_h = 1.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (more heads than rows).
 */
LSE_API lse_status lse_daam_init(lse_daam *m, unsigned long seed,
                                 lse_error *err);

/** @brief Gate of head @p h: @p out (N, dim) = g_h, computed directly from
 *  the formula. @return LSE_OK; LSE_EFAULT; LSE_ERANGE (h >= H); LSE_EDIM;
 *  LSE_EDOM (c_h = 0). */
LSE_API lse_status lse_daam_gate(lse_daam *m, size_t h, gsl_matrix *out,
                                 lse_error *err);

/** @brief The paper's output (Algorithm 1): @p out (N, H dim) =
 *  [X .* g_1, ..., X .* g_H], heads concatenated along the columns. */
LSE_API lse_status lse_daam_forward(lse_daam *m, gsl_matrix *out,
                                    lse_error *err);

/** @brief Head-mixed output: @p out (N, dim) = sum_h A_ih (x_i .* g_ih),
 *  A the term's softmax over heads (evaluates the graph). */
LSE_API lse_status lse_daam_forward_mixed(lse_daam *m, gsl_matrix *out,
                                          lse_error *err);

/**
 * @brief Importance factors per feature (the paper's IF): the density attention
 * DA_j = (1/N) sum_i sum_h A_ih g_ihj (the head-mixed gate averaged over
 * rows), then IF_j = (DA_j - min DA) / (max DA - min DA) in [0, 1]; when
 * every DA_j is equal, IF_j = 1 for all j.
 * @param da (dim) or NULL; @param imp (dim), required.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; the graph's errors.
 */
LSE_API lse_status lse_daam_importance(lse_daam *m, gsl_vector *da,
                                       gsl_vector *imp, lse_error *err);

/**
 * @brief The density-fit energy and its gradient (docs/models/daam.md):
 * the negative log-likelihood of the standardized rows y_i under an
 * equal-weight mixture of H isotropic Gaussians N(delta_h', c_h^2 I):
 *   E_fit = -sum_i log sum_h exp(S_ih - dim log|c_h| - dim/2 log(2 pi)
 *                                 - log H),
 * i.e. the graph's LSE energy with the Gaussian normalizer the gate lacks
 * (without it the energy falls forever as c grows). S comes from the term;
 * the gradient from lse_sim_daam's kernel with G = -softmax_h(...) plus the
 * normalizer's dim R_h / c_h.
 * @param gdelta (H, dim) or NULL, @param gc (H, 1) or NULL: overwritten.
 */
LSE_API lse_status lse_daam_fit_energy(lse_daam *m, double *energy,
                                       gsl_matrix *gdelta, gsl_matrix *gc,
                                       lse_error *err);

/** @brief What lse_daam_fit() did. */
typedef struct lse_daam_fit_report {
    double energy_before; /**< E_fit at the start */
    double energy_after;  /**< E_fit at the end */
    size_t n_iter;        /**< accepted gradient steps */
    int converged;        /**< 1: |dE| <= tol (or no decreasing step) */
    size_t n_collapsed;   /**< heads that ended on the width floor with
                               E_fit still falling as they narrow: the
                               likelihood is unbounded there (a head on
                               too few rows); 0 for a proper fit */
} lse_daam_fit_report;

/**
 * @brief Fit delta and c by projected gradient descent with Armijo
 * backtracking on E_fit, keeping every |c_h| >= lse_daam_min_width() (a
 * starting width below the floor is raised to it; the sign of c_h is
 * kept), at most @p max_iter steps, until an accepted step lowers E_fit by
 * <= @p tol. A head held at the floor is reported in
 * report->n_collapsed; the status stays LSE_OK.
 * @param report may be NULL.
 * @return LSE_OK; LSE_EFAULT; LSE_EDOM (tol < 0); the graph's errors.
 */
LSE_API lse_status lse_daam_fit(lse_daam *m, size_t max_iter, double tol,
                                lse_daam_fit_report *report, lse_error *err);

/* ------------------------------------------------------------------ */
/* DAAM trained on a task (models/daam_net.c)                          */

/**
 * @brief A softmax classifier over DAAM-gated features, trained on the
 * cross-entropy through the core's loss and optimizer (docs/models/daam.md,
 * "Trained on a task"): for a row x (d), the gated features
 * Phi(x) = [x .* g_1(x), ..., x .* g_H(x)] (H d) of H heads with K
 * Gaussians each (lse_sim_gate: a mean offset and a width per head,
 * Gaussian and feature, in units of the training columns' standard
 * deviation), and logits W Phi(x) (W (C, H d)).
 *
 * Graph: node "q" (B, d) clamped (a batch), parameter nodes "weights"
 * (C, H d), "delta" and "width" (H K, d); LSE term "classify" (child q,
 * parent weights, lse_sim_gate over dot with parameters delta, width).
 *
 * @code
 * lse_daam_net *net;
 * lse_daam_net_new(2, 1, 10, 32, xtrain, &net, &err);  // H = 2, K = 1
 * lse_daam_net_init(net, 1, &err);
 * lse_daam_net_train(net, xtrain, ytrain, NULL, NULL, &err);  // Adam, 20
 * epochs lse_daam_net_evaluate(net, xtest, ytest, &loss, &acc, &err);
 * lse_daam_net_importance(net, xtrain, NULL, imp, &err);      // IF per feature
 * @endcode
 */
typedef struct lse_daam_net lse_daam_net;

/** The eps of the normalisation y = (x - mean) / sqrt(var + eps). */
#define LSE_DAAM_NET_EPS 1e-5

/**
 * @brief A classifier of @p n_class classes over the columns of @p x
 * (n, d), whose column means and population variances fix the gate's
 * normalisation; batches of @p batch rows. Weights 0, delta 0, widths 1.
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (a size 0); LSE_ENONFINITE;
 *  LSE_ENOMEM. The message is in @p err (may be NULL).
 */
LSE_API lse_status lse_daam_net_new(size_t n_head, size_t n_gauss,
                                    size_t n_class, size_t batch,
                                    const gsl_matrix *x, lse_daam_net **out,
                                    lse_error *err);
LSE_API void lse_daam_net_free(lse_daam_net *m);
/** @brief "function: facts" of the last failure ("" if none).
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_daam_net_errmsg(const lse_daam_net *m);
LSE_API lse_graph *lse_daam_net_graph(const lse_daam_net *m);
LSE_API lse_term *lse_daam_net_term(const lse_daam_net *m);
/** @brief Parameter nodes: delta, width (H K, d), weights (C, H d). */
LSE_API lse_node *lse_daam_net_delta(const lse_daam_net *m);
LSE_API lse_node *lse_daam_net_width(const lse_daam_net *m);
LSE_API lse_node *lse_daam_net_weights(const lse_daam_net *m);
/** @brief The gate's config (normalisation included), for
 *  lse_gate_features. */
LSE_API const lse_gate_config *lse_daam_net_gate(const lse_daam_net *m);
/** @brief delta ~ N(0, 1) (GSL mt19937 seeded by @p seed; breaks the
 *  symmetry between heads), widths 1, weights 0 (initial loss log C). */
LSE_API lse_status lse_daam_net_init(lse_daam_net *m, unsigned long seed,
                                     lse_error *err);

typedef struct lse_daam_net_train_opts {
    size_t epochs;     /**< default 20 */
    double lr;         /**< Adam's learning rate, default 0.01 */
    unsigned long seed; /**< mini-batch shuffling (lse_batcher), default 1 */
    int train_gates;   /**< 1 (default): learn delta and width with the
                          weights; 0: the weights alone (gates fixed) */
} lse_daam_net_train_opts;

typedef struct lse_daam_net_train_report {
    double loss_before, loss_after; /**< mean cross-entropy on the data */
    size_t steps;
} lse_daam_net_train_report;

LSE_API lse_daam_net_train_opts lse_daam_net_train_opts_default(void);
/**
 * @brief Adam (lse_optim) on the mean cross-entropy (lse_loss_xent) of
 * seeded mini-batches of B rows (lse_batcher: floor(n / B) per epoch).
 * @p opts NULL: the defaults; @p report may be NULL.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (fewer rows than B, wrong columns);
 *  LSE_EINVAL (a label >= C); LSE_EDOM (lr); the core's errors.
 */
LSE_API lse_status lse_daam_net_train(lse_daam_net *m, const gsl_matrix *x,
                                      const size_t *y,
                                      const lse_daam_net_train_opts *opts,
                                      lse_daam_net_train_report *report,
                                      lse_error *err);
/** @brief Mean cross-entropy and accuracy (argmax) on (x, y); either
 *  output may be NULL. */
LSE_API lse_status lse_daam_net_evaluate(lse_daam_net *m, const gsl_matrix *x,
                                         const size_t *y, double *loss,
                                         double *accuracy, lse_error *err);
/**
 * @brief The paper's importance factors from the trained gates:
 * DA_j = mean over the rows of @p x and the heads of g_hj(x_ij), then
 * IF_j = (DA_j - min DA) / (max DA - min DA) in [0, 1] (all 1 when every
 * DA_j is equal). @p da (d) may be NULL; @p imp (d) required.
 */
LSE_API lse_status lse_daam_net_importance(lse_daam_net *m, const gsl_matrix *x,
                                           gsl_vector *da, gsl_vector *imp,
                                           lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_DAAM_H */
