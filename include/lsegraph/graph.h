#ifndef LSEGRAPH_GRAPH_H
#define LSEGRAPH_GRAPH_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/status.h>
#include <lsegraph/sim.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file graph.h
 * @brief Nodes, views, energy terms and the graph that sums them.
 *
 * @code
 * lse_graph *g = lse_graph_new();
 * lse_node *x, *mu;
 * lse_graph_add_node(g, "x", 272, 2, LSE_NODE_CLAMPED, &x);  // data
 * lse_graph_add_node(g, "mu", 3, 2, LSE_NODE_PARAM, &mu);    // means
 * lse_term_spec spec = lse_term_spec_default();
 * spec.child = lse_view_all(x);
 * spec.parent = lse_view_all(mu);
 * spec.sim = lse_sim_neg_dist;
 * lse_term *t;
 * if (lse_graph_add_lse(g, "assign", &spec, &t) != LSE_OK)
 *     fprintf(stderr, "%s\n", lse_graph_errmsg(g));
 * double e;
 * lse_graph_gradient(g, &e);  // dE/dv on every free node
 * lse_graph_free(g);
 * @endcode
 */

typedef struct lse_graph lse_graph;
typedef struct lse_node lse_node;
typedef struct lse_term lse_term;

/** Node flags. */
enum {
    LSE_NODE_PARAM = 1u << 0,  /**< a parameter (EM M-step), not a state */
    LSE_NODE_CLAMPED = 1u << 1 /**< observed: no gradient, never updated */
};

/** @brief Rows [first, first + count) of a node. */
typedef struct lse_view {
    lse_node *node; /**< NULL: no view */
    size_t first;
    size_t count;
} lse_view;

/** @brief Every row of @p node (a NULL node gives the empty view). */
LSE_API lse_view lse_view_all(lse_node *node);
/** @brief Rows [first, first + count) of @p node (checked when used). */
LSE_API lse_view lse_view_rows(lse_node *node, size_t first, size_t count);

/* ------------------------------------------------------------------ */
/* Graph                                                               */

/** @brief A new empty graph, or NULL when out of memory. Turns GSL's
 *  abort handler off (lse_gsl_quiet). Free with lse_graph_free. */
LSE_API lse_graph *lse_graph_new(void);
/** @brief Free @p g with every node and term it owns; NULL is a no-op. */
LSE_API void lse_graph_free(lse_graph *g);
/** @brief "function: facts" of the last failure on @p g ("" if none);
 *  valid until the next call on @p g. */
LSE_API const char *lse_graph_errmsg(const lse_graph *g);

/** @brief Add a node of @p n rows of dimension @p dim, zero-filled.
 *  @p name is copied; OUT @p out is owned by @p g.
 *  @return LSE_OK, LSE_EFAULT, LSE_EINVAL (empty name, n or dim 0, unknown
 *  flag), LSE_EEXIST, LSE_ENOMEM (also when n x dim doubles exceed the
 *  address space: every size product is overflow-checked). */
LSE_API lse_status lse_graph_add_node(lse_graph *g, const char *name,
                                      size_t n, size_t dim, unsigned flags,
                                      lse_node **out);
LSE_API size_t lse_graph_n_nodes(const lse_graph *g);
/** @brief i-th node in creation order, NULL past the end (borrowed). */
LSE_API lse_node *lse_graph_node(const lse_graph *g, size_t i);
/** @brief Node named @p name, or NULL (borrowed). */
LSE_API lse_node *lse_graph_find_node(const lse_graph *g, const char *name);

LSE_API size_t lse_graph_n_terms(const lse_graph *g);
LSE_API lse_term *lse_graph_term(const lse_graph *g, size_t i);
LSE_API lse_term *lse_graph_find_term(const lse_graph *g, const char *name);

/** @brief Total energy of the enabled terms. Also refreshes every LSE
 *  term's similarity, softmax and row values.
 *  @return LSE_OK, LSE_ENONFINITE (a NaN energy or a non-finite node value,
 *  named in the message), or a similarity's error. */
LSE_API lse_status lse_graph_energy(lse_graph *g, double *energy);
/** @brief Energy and dE/dv of every node that is not clamped (child side
 *  plus parent side of each term, Tschantz eq. 4 with our sign: the
 *  gradient of the energy). Read them with lse_node_grad. */
LSE_API lse_status lse_graph_gradient(lse_graph *g, double *energy);

/** @brief Block size (child rows per kernel call) used by LSE terms made
 *  after this call; 0 = default (256). Results do not depend on it beyond
 *  round-off of parameter-gradient sums. */
LSE_API void lse_graph_set_block_rows(lse_graph *g, size_t rows);

/**
 * @brief Reuse of the last evaluation (default off). When on,
 * lse_graph_energy first compares, bit for bit, the values of every node
 * and every term's settings (enabled, beta, mask, row weights, user mask)
 * with those of the last successful lse_graph_energy; when nothing
 * differs, the LSE terms that keep their softmax (rows reduction) are not
 * scored again: their energy stands and only the M-step statistics an EM
 * solver asks for are taken from the kept softmax. Other terms are
 * evaluated as usual. The results are the same bits as without reuse.
 * Costs a copy of the node values. Used by lse_gmm_fit, whose SQUAREM
 * evaluates an extrapolated point and then takes an EM step from it.
 */
LSE_API void lse_graph_set_reuse(lse_graph *g, int on);

/**
 * @brief Check the analytic gradient of @p node (or of every free node if
 * NULL) against central differences of lse_graph_energy.
 * @param h step; @param floor denominator floor of the relative error.
 * Node values are restored afterwards.
 */
LSE_API lse_status lse_graph_check_gradient(lse_graph *g, lse_node *node,
                                            double h, double floor,
                                            lse_gradcheck *res);

/* ------------------------------------------------------------------ */
/* Nodes                                                               */

LSE_API const char *lse_node_name(const lse_node *node);
LSE_API size_t lse_node_rows(const lse_node *node);
LSE_API size_t lse_node_dim(const lse_node *node);
LSE_API unsigned lse_node_flags(const lse_node *node);
LSE_API int lse_node_is_param(const lse_node *node);
LSE_API int lse_node_is_clamped(const lse_node *node);
/** @brief Clamp (observed) or free @p node. */
LSE_API void lse_node_set_clamped(lse_node *node, int clamped);
/** @brief The value (rows, dim), borrowed and writable: models and solvers
 *  update it in place (it breaks an lse_node_seal). */
LSE_API gsl_matrix *lse_node_value(lse_node *node);
/** @brief dE/dvalue from the last lse_graph_gradient (zero for clamped
 *  nodes); borrowed. */
LSE_API const gsl_matrix *lse_node_grad(const lse_node *node);
/** @brief Copy @p value (rows, dim) into @p node.
 *  @return LSE_OK, LSE_EFAULT, LSE_EDIM, LSE_ENONFINITE. */
LSE_API lse_status lse_node_set_value(lse_node *node, const gsl_matrix *value);
/** @brief Seal a clamped @p node whose values are all finite: from now on
 *  they change only through lse_node_set_value (which rejects non-finite
 *  values), so the evaluations skip their check of this node's values.
 *  lse_node_value (a writable pointer) and lse_node_set_clamped break the
 *  seal. For a model's own data node whose pointer never leaves the
 *  model: a large one costs a pass over memory per evaluation otherwise.
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (not clamped), LSE_ENONFINITE
 *  (a non-finite value): then the node is not sealed. */
LSE_API lse_status lse_node_seal(lse_node *node);
/** @brief The graph that owns @p node. */
LSE_API lse_graph *lse_node_graph(const lse_node *node);

/* ------------------------------------------------------------------ */
/* LSE terms                                                           */

/** Mask flags of an LSE term, on row positions first + i of each view:
 *  CAUSAL allows parent position <= child position, NO_SELF forbids equal
 *  positions; CAUSAL | NO_SELF is the strict p < c. */
enum {
    LSE_MASK_CAUSAL = 1u << 0,
    LSE_MASK_NO_SELF = 1u << 1
};

/** How the term reduces S over parents. */
typedef enum lse_reduce {
    /** E = -sum_c w_c (1/beta) log sum_p exp(beta S_cp) */
    LSE_REDUCE_ROWS = 0,
    /** hidden Markov chain over child rows: E = -log sum over paths of
     *  exp(sum_t S_t,k_t + log init + log trans), by forward-backward in log
     *  space; chain_init (1, K) and chain_trans (K, K) are logit nodes. */
    LSE_REDUCE_CHAIN = 1
} lse_reduce;

/** @brief Everything that defines an LSE term. Start from
 *  lse_term_spec_default() and fill in the views and the similarity. */
typedef struct lse_term_spec {
    lse_view child;       /**< required */
    lse_view parent;      /**< required */
    lse_view context;     /**< optional (node NULL), aligned with child */
    const lse_sim_type *sim; /**< required */
    const void *config;   /**< copied; NULL: the type's default */
    lse_node *const *param; /**< sim->n_param nodes (NULL entry: absent
                               optional parameter); the array is borrowed */
    double beta;          /**< inverse temperature > 0 (default 1) */
    unsigned mask;        /**< LSE_MASK_* */
    const gsl_matrix *user_mask; /**< (n_child, n_parent): 0 forbids a pair;
                                    copied; or NULL */
    const gsl_vector *row_weight; /**< (n_child) weights w_c >= 0, copied; or
                                     NULL for 1 */
    lse_reduce reduce;    /**< default LSE_REDUCE_ROWS */
    lse_node *chain_init; /**< LSE_REDUCE_CHAIN: (1, K) logits */
    lse_node *chain_trans; /**< LSE_REDUCE_CHAIN: (K, K) row logits */
    const size_t *chain_starts; /**< LSE_REDUCE_CHAIN: child rows where an
                                   independent sequence starts (row 0 is
                                   always one), ascending; copied; or NULL */
    size_t n_chain_starts;
    int keep_matrices;    /**< 1 (default): keep S and the softmax
                             (n_child, n_parent); 0: stream blocks (memory
                             O(block * n_parent)) */
} lse_term_spec;

/** @brief beta = 1, no mask, rows reduction, keep_matrices = 1, rest NULL. */
LSE_API lse_term_spec lse_term_spec_default(void);

/** @brief Add an LSE term; OUT @p out (may be NULL) is owned by @p g.
 *  @return LSE_OK; LSE_EFAULT (NULL graph/spec/sim/view node, a missing
 *  required parameter or context, chain nodes missing);
 *  LSE_ERANGE (a view outside its node, context rows != child rows);
 *  LSE_EDIM (shapes the similarity rejects, mask/weight sizes);
 *  LSE_EDOM (beta <= 0 or not finite, negative weight, bad config);
 *  LSE_EINVAL (nodes of another graph, unknown mask or reduction);
 *  LSE_EEXIST (name taken); LSE_ENOMEM (also when the term's matrices or
 *  workspaces, products of up to three shape extents, exceed the address
 *  space). */
LSE_API lse_status lse_graph_add_lse(lse_graph *g, const char *name,
                                     const lse_term_spec *spec,
                                     lse_term **out);

/* ------------------------------------------------------------------ */
/* Custom terms                                                        */

/** @brief A custom energy term over views. Values are borrowed views of the
 *  node rows; grad[i] is NULL for clamped nodes, else the kernel ADDS
 *  dE/dvalue[i] to it. */
typedef struct lse_custom_type {
    const char *name;
    size_t config_size; /**< bytes copied from the config; 0: the config
                           pointer is borrowed and must outlive the graph */
    lse_status (*check)(const gsl_matrix *const *value, size_t n_view,
                        const void *config, char *msg, size_t msg_len);
    lse_status (*energy)(const gsl_matrix *const *value, size_t n_view,
                         const void *config, double *energy);
    lse_status (*grad)(const gsl_matrix *const *value, size_t n_view,
                       const void *config, gsl_matrix *const *grad,
                       double *energy);
    int (*describe)(const void *config, char *buf, size_t len);
} lse_custom_type;

/** @brief Add a custom term over @p n_view views (copied); OUT @p out. */
LSE_API lse_status lse_graph_add_custom(lse_graph *g, const char *name,
                                        const lse_custom_type *type,
                                        const void *config,
                                        const lse_view *views, size_t n_view,
                                        lse_term **out);

/** views: x (n, d) [, x0 (n, d) or (1, d)]; E = scale/2 ||x - x0||^2;
 *  config lse_quadratic_config. */
LSE_API extern const lse_custom_type *const lse_custom_quadratic;
typedef struct lse_quadratic_config {
    double scale; /**< >= 0, default 1 when the config is NULL */
} lse_quadratic_config;

/** views: x (B, D), gamma (1, 1), delta (1, D). E = sum_i [D gamma
 *  sqrt(var_i + eps) + delta . x_i]; dE/dx is LayerNorm(x) with scalar gain
 *  gamma and bias delta. config lse_layernorm_config. */
LSE_API extern const lse_custom_type *const lse_custom_layernorm;
typedef struct lse_layernorm_config {
    double eps; /**< > 0, default 1e-5 when the config is NULL */
} lse_layernorm_config;

/* ------------------------------------------------------------------ */
/* Term access                                                         */

typedef enum lse_term_kind { LSE_TERM_LSE = 0, LSE_TERM_CUSTOM = 1 } lse_term_kind;

LSE_API const char *lse_term_name(const lse_term *t);
LSE_API lse_term_kind lse_term_kind_of(const lse_term *t);
/** @brief Similarity type (LSE terms) or NULL. */
LSE_API const lse_sim_type *lse_term_sim(const lse_term *t);
/** @brief Custom type (custom terms) or NULL. */
LSE_API const lse_custom_type *lse_term_custom(const lse_term *t);
/** @brief The term's copy of its config (borrowed), or NULL. */
LSE_API const void *lse_term_config(const lse_term *t);
/** @brief Label "LSE dar(lambda=0.2, rho=0.5)", "custom quadratic". */
LSE_API int lse_term_describe(const lse_term *t, char *buf, size_t len);
LSE_API lse_view lse_term_child(const lse_term *t);
LSE_API lse_view lse_term_parent(const lse_term *t);
LSE_API lse_view lse_term_context(const lse_term *t);
LSE_API size_t lse_term_n_param(const lse_term *t);
/** @brief i-th parameter node (LSE) or i-th view's node (custom). */
LSE_API lse_node *lse_term_param(const lse_term *t, size_t i);
LSE_API size_t lse_term_n_views(const lse_term *t);
LSE_API lse_view lse_term_view(const lse_term *t, size_t i);
LSE_API double lse_term_beta(const lse_term *t);
LSE_API unsigned lse_term_mask(const lse_term *t);
LSE_API lse_reduce lse_term_reduce(const lse_term *t);
LSE_API lse_node *lse_term_chain_init(const lse_term *t);
LSE_API lse_node *lse_term_chain_trans(const lse_term *t);
/** @brief 1 when child i may attend parent j (masks combined). */
LSE_API int lse_term_allowed(const lse_term *t, size_t i, size_t j);
/** @brief Energy of the term at the last evaluation. */
LSE_API double lse_term_energy(const lse_term *t);
/** @brief S (n_child, n_parent) of the last evaluation; masked pairs hold
 *  -INFINITY; NULL when streaming or for custom terms. Borrowed. */
LSE_API const gsl_matrix *lse_term_similarity(const lse_term *t);
/** @brief Softmax / responsibilities (n_child, n_parent) of the last
 *  evaluation (rows reduction: softmax of beta S; chain: posterior
 *  marginals); NULL when streaming or custom. Borrowed. */
LSE_API const gsl_matrix *lse_term_softmax(const lse_term *t);
/** @brief Per child row (1/beta) log sum_p exp(beta S) (rows reduction;
 *  -INFINITY for fully masked rows), or NULL. Borrowed. */
LSE_API const gsl_vector *lse_term_row_lse(const lse_term *t);
/** @brief Chain reduction: expected transition counts (K, K) and initial
 *  posterior (1, K) of the last gradient/energy evaluation, else NULL. */
LSE_API const gsl_matrix *lse_term_chain_xi(const lse_term *t);

/** @brief Most likely state path of a hidden Markov chain (Viterbi, in log
 *  space): for each sequence, the path k maximizing
 *  logp0(k_s0) + logem(s0, k_s0) + sum_t [logT(k_t-1, k_t) + logem(t, k_t)].
 *  Ties go to the lowest state. @p logem (n, K) log emission weights (for
 *  a chain term, lse_term_similarity); @p logp0 (K) log initial and
 *  @p logT (K, K) log transition probabilities (row j: from state j), as a
 *  chain term normalizes its logit nodes; @p starts ascending rows where a
 *  new sequence begins (0 optional), @p n_starts of them, as
 *  lse_term_spec.chain_starts; @p path (n) gets the states.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ERANGE (starts not ascending
 *  within [1, n)); LSE_ENOMEM; the message in @p err (may be NULL). */
LSE_API lse_status lse_chain_viterbi(const gsl_matrix *logem,
                                     const gsl_vector *logp0,
                                     const gsl_matrix *logT,
                                     const size_t *starts, size_t n_starts,
                                     size_t *path, lse_error *err);

/** Rows of a transition matrix (and an initial distribution) must sum to
 *  1 within this absolute tolerance (lse_chain_stationary). */
#define LSE_CHAIN_SUM_TOL 1e-9

/** @brief Stationary distribution pi (K) of the row-stochastic @p P
 *  (K, K): pi P = pi, sum pi = 1.
 *
 *  With one closed class (irreducible chains, periodic ones included, and
 *  chains whose transient states all lead to one class) pi is unique and
 *  @p p0 is not used: it is solved by LU elimination of pi (P - I) = 0
 *  with one equation replaced by sum pi = 1, and by the subtraction-free
 *  GTH elimination on the closed class when that system is singular or
 *  its solution not a distribution; transient states get 0. With several
 *  closed classes every mixture of their stationary distributions is
 *  stationary: given @p p0 (K, an initial distribution), pi is the
 *  long-run average occupation of the chain started from p0, sum_c a_c
 *  pi_c (a_c: the probability of ending in class c); without it the call
 *  fails with LSE_EDOM. @p n_closed (may be NULL) gets the number of
 *  closed classes (states that reach each other with positive
 *  probability and leave the class with none).
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE or LSE_EDOM (an
 *  entry < 0, a row of P or p0 not summing to 1 within
 *  LSE_CHAIN_SUM_TOL, several closed classes without p0); LSE_ENUMERIC;
 *  LSE_ENOMEM; the message in @p err (may be NULL). */
LSE_API lse_status lse_chain_stationary(const gsl_matrix *P,
                                        const gsl_vector *p0, gsl_vector *pi,
                                        size_t *n_closed, lse_error *err);
/** @brief Row weights (NULL for 1). */
LSE_API const gsl_vector *lse_term_row_weight(const lse_term *t);
/** @brief Replace the row weights (copied; NULL: all 1). */
LSE_API lse_status lse_term_set_row_weight(lse_term *t, const gsl_vector *w);
LSE_API int lse_term_enabled(const lse_term *t);
/** @brief Switch a term off (0) or on (1); an off term adds nothing. */
LSE_API void lse_term_set_enabled(lse_term *t, int enabled);
/** @brief Arguments for calling the term's similarity kernels directly on
 *  the whole child view (M-steps, tools): filled from the current node
 *  values; workspace prepared. Borrowed pointers valid until the next
 *  mutating call. */
LSE_API lse_status lse_term_sim_args(lse_term *t, lse_sim_args *args);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_GRAPH_H */
