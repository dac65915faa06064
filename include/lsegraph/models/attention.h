#ifndef LSEGRAPH_MODELS_ATTENTION_H
#define LSEGRAPH_MODELS_ATTENTION_H
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
 * @file attention.h
 * @brief Cross-, self- and slot attention as LSE graphs (models/attention.c;
 * Tschantz sections 3, 5, 6 and 10; Vaswani et al.).
 *
 * Each kind is one LSE term plus (optionally) a quadratic term
 * lambda/2 ||state||^2 on its free state node, which keeps the energy
 * bounded below:
 *
 * - cross: children "queries" Q (n, d) (free state), parents "keys"
 *   K (m, d) (clamped), any similarity (default lse_sim_scaled_dot; DAR,
 *   IDW, DAAM, ... are passed as type + config + parameter values);
 *   term "attend", E = -sum_i (1/beta) log sum_j exp(beta S_ij)
 *   + lambda/2 ||Q||^2.
 * - self: one node "x" X (N, d) is child and parent, S_cp =
 *   scale (W_Q x_c).(W_K x_p) (lse_sim_bilinear with W_c = W_Q, W_p = W_K,
 *   PARAM nodes "W_Q", "W_K" (k, d)), optional causal mask; term "self".
 * - slot: children "tokens" X (N, d) (clamped), parents "slots" mu (S, d_s)
 *   (free state), S_ji = scale (W_K x_j).(W_Q mu_i) (lse_sim_bilinear with
 *   W_c = W_K (k, d), W_p = W_Q (k, d_s), PARAM nodes); term "assign".
 *   Fitted by EM (lse_attention_slot_fit): E-step gradient steps on the
 *   slots, M-step the bilinear closed form (Tschantz section 10), whose
 *   shrinking of W_K, W_Q towards zero is detected and reported.
 *
 * The quadratic term is named "bound" in all three graphs.
 *
 * One attention step: lse_attention_step() evaluates the graph and returns
 * either A V (A = the term's softmax, any values V), or the gradient step
 * state - (1/lambda) dE/dstate; for cross attention with the scaled-dot
 * similarity, beta = 1 and lambda = 1/sqrt(d) (the default) both equal
 * textbook attention softmax(Q K'/sqrt(d)) V (with V = K for the gradient
 * step). Derivations: docs/models/attention.md.
 *
 * @code
 * lse_attention *a = NULL;
 * lse_error err;
 * if (lse_attention_cross_new(q, k, NULL, &a, &err) != LSE_OK) // (n,d),(m,d)
 *     fprintf(stderr, "%s\n", err.message);
 * lse_attention_step(a, v, out, &err);   // out (n, d_v) = softmax(QK'/sqrt d)
 * V lse_attention_free(a);
 * @endcode
 */

/** @brief An attention graph. Opaque. */
typedef struct lse_attention lse_attention;

/** @brief Which of the three graphs. */
typedef enum lse_attention_kind {
    LSE_ATTENTION_CROSS = 0,
    LSE_ATTENTION_SELF = 1,
    LSE_ATTENTION_SLOT = 2
} lse_attention_kind;

/** @brief Construction options; start from lse_attention_opts_default(). */
typedef struct lse_attention_opts {
    /** cross only: the similarity (NULL: lse_sim_scaled_dot). Self and
     *  slot attention always use lse_sim_bilinear. */
    const lse_sim_type *sim;
    /** the similarity's config, copied by the term (NULL: the type's
     *  default). Self and slot: an lse_bilinear_config (NULL: scale 1, as
     *  in Tschantz; use 1/sqrt(k) for the textbook scaling). */
    const void *config;
    /** cross only: initial values of the similarity's sim->n_param
     *  parameters (e.g. DAAM's gate widths c (H, 1)), copied into free
     *  PARAM nodes named after sim->param_names; a NULL entry leaves an
     *  optional parameter absent. Borrowed array; NULL if n_param is 0. */
    const gsl_matrix *const *param;
    double beta;   /**< inverse temperature > 0 (default 1) */
    unsigned mask; /**< LSE_MASK_CAUSAL / LSE_MASK_NO_SELF on row positions
                      (default 0); slot attention takes none */
    /** lambda of the quadratic term lambda/2 ||state||^2 on the free state
     *  node (queries, x or slots): > 0 adds the term "bound", 0 adds none,
     *  < 0 (default -1) means 1/sqrt(d_state) (Ramsauer's beta = 1/sqrt(d)
     *  correspondence for scaled-dot attention). */
    double bound;
    /** cross (dot or scaled-dot similarity) and self attention: 1 evaluates
     *  the LSE term by streaming (lse_attn_stream, <lsegraph/stream.h>):
     *  a custom term "attend"/"self" that never holds the (n, m) score or
     *  softmax matrix, for long sequences; lse_attention_softmax is then
     *  NULL and lse_attention_step streams A V. 0 (default): the dense LSE
     *  term. Slot attention takes 0. */
    int stream;
} lse_attention_opts;

/** @brief sim NULL, config NULL, param NULL, beta 1, mask 0, bound -1,
 *  stream 0. */
LSE_API lse_attention_opts lse_attention_opts_default(void);

/**
 * @brief Cross attention of @p queries (n, d_q) to @p keys (m, d_k).
 * Nodes: "queries" (free state), "keys" (clamped: lse_node_set_clamped()
 * on lse_attention_node(a, "keys") frees them), the similarity's
 * parameters (free PARAM nodes); terms "attend" and, if lambda > 0,
 * "bound".
 * @param queries, keys borrowed, copied. @param opts borrowed; NULL:
 * defaults. @param[out] out owned by the caller (lse_attention_free());
 * NULL on failure. @param err may be NULL.
 * @return LSE_OK; LSE_EFAULT; LSE_EDOM (beta, bound not finite; beta <= 0);
 * LSE_ENONFINITE; LSE_ENOMEM; any error of lse_graph_add_lse (LSE_EDIM for
 * shapes the similarity rejects, LSE_EFAULT when a required parameter
 * of the similarity is missing from opts->param, ...).
 */
LSE_API lse_status lse_attention_cross_new(const gsl_matrix *queries,
                                           const gsl_matrix *keys,
                                           const lse_attention_opts *opts,
                                           lse_attention **out, lse_error *err);

/**
 * @brief Self-attention over the rows of @p x (N, d) with projections
 * @p w_q, @p w_k (k, d): S_cp = scale (W_Q x_c).(W_K x_p), masked by
 * opts->mask (LSE_MASK_CAUSAL: p <= c; with LSE_MASK_NO_SELF: p < c, so
 * row 0 attends to nothing and contributes 0 to E). Nodes "x" (free
 * state), "W_Q", "W_K" (free PARAM); terms "self" and "bound".
 * opts->sim and opts->param are ignored. Ownership and returns as
 * lse_attention_cross_new().
 */
LSE_API lse_status lse_attention_self_new(const gsl_matrix *x,
                                          const gsl_matrix *w_q,
                                          const gsl_matrix *w_k,
                                          const lse_attention_opts *opts,
                                          lse_attention **out, lse_error *err);

/**
 * @brief Slot attention: @p tokens (N, d) clamped children, @p slots
 * (S, d_s) initial slot values (free state parents), @p w_k (k, d) and
 * @p w_q (k, d_s): S_ji = scale (W_K x_j).(W_Q mu_i). Nodes "tokens",
 * "slots", "W_K", "W_Q" (free PARAM); terms "assign" and "bound".
 * opts->sim, opts->param and opts->mask are ignored (mask must be 0).
 * Ownership and returns as lse_attention_cross_new().
 */
LSE_API lse_status lse_attention_slot_new(const gsl_matrix *tokens,
                                          const gsl_matrix *slots,
                                          const gsl_matrix *w_k,
                                          const gsl_matrix *w_q,
                                          const lse_attention_opts *opts,
                                          lse_attention **out, lse_error *err);

/** @brief Free @p a and its graph; NULL is a no-op. */
LSE_API void lse_attention_free(lse_attention *a);

/** @brief "function: facts" of the last failure on @p a ("" if none).
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_attention_errmsg(const lse_attention *a);

LSE_API lse_attention_kind lse_attention_kind_of(const lse_attention *a);
/** @brief The graph, owned by @p a (borrowed). */
LSE_API lse_graph *lse_attention_graph(const lse_attention *a);
/** @brief The LSE term ("attend", "self" or "assign"), borrowed. */
LSE_API lse_term *lse_attention_term(const lse_attention *a);
/** @brief The free state node (queries, x or slots), borrowed. */
LSE_API lse_node *lse_attention_state(const lse_attention *a);
/** @brief Node by name ("queries", "keys", "x", "W_Q", ...), or NULL. */
LSE_API lse_node *lse_attention_node(const lse_attention *a, const char *name);
/** @brief lambda of the "bound" term (0 when there is none). */
LSE_API double lse_attention_bound(const lse_attention *a);
/** @brief Softmax A (n_child, n_parent) of the last evaluation; masked
 *  pairs are 0 and a fully masked row is all 0. Borrowed. */
LSE_API const gsl_matrix *lse_attention_softmax(const lse_attention *a);

/** @brief Energy at the current node values (refreshes the softmax).
 *  @return LSE_OK, LSE_EFAULT or the graph's error. */
LSE_API lse_status lse_attention_energy(lse_attention *a, double *energy,
                                        lse_error *err);

/**
 * @brief One attention step at the current node values. Evaluates the
 * graph's energy and gradient, then:
 * - @p values (n_parent, d_v) given: @p out (n_child, d_v) = A V with
 *   A = lse_attention_softmax() (row i: sum_j A_ij v_j);
 * - @p values NULL: @p out (rows, dim of the state node) = state -
 *   (1/lambda) dE/dstate, one gradient step of size 1/lambda on the free
 *   state node (needs lambda > 0): the concave-convex (CCCP) step of the
 *   bounded energy. For cross attention with scaled-dot, beta 1 and
 *   lambda = 1/sqrt(d) it equals softmax(Q K'/sqrt(d)) K.
 * Node values are not changed. @param out caller-owned, written.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (values or out of the wrong shape);
 *  LSE_EINVAL (values NULL without a bound term); the graph's errors.
 */
LSE_API lse_status lse_attention_step(lse_attention *a,
                                      const gsl_matrix *values, gsl_matrix *out,
                                      lse_error *err);

/* ------------------------------------------------------------------ */
/* Slot attention: EM and the detection of a collapse of W_K, W_Q.     */

/** @brief Options of lse_attention_slot_fit(); start from
 *  lse_slot_fit_opts_default(). */
typedef struct lse_slot_fit_opts {
    size_t max_iter;    /**< EM iterations (default 50) */
    size_t estep_steps; /**< gradient steps on the slots per E-step
                           (default 5) */
    double tol;         /**< stop when |E_t - E_{t-1}| <= tol (default 1e-8) */
    /** an M-step "shrinks" when ||W_K||_F ||W_Q||_F falls below
     *  shrink_ratio times its value before the step (default 0.5) */
    double shrink_ratio;
    /** collapse, rule (a): this many consecutive shrinking M-steps
     *  (default 3) */
    size_t patience;
    /** rule (b), slow shrinking: ||W_K||_F ||W_Q||_F below total_ratio
     *  times its value before the first M-step (default 0.5) */
    double total_ratio;
    /** rule (c): ||W_K||_F ||W_Q||_F below this floor after an M-step
     *  (default 1e-8) */
    double norm_floor;
    /** called after every EM iteration (may be NULL); it can read
     *  lse_solver_energy() and lse_attention_slot_report(); non-zero stops
     *  the fit. */
    lse_iter_fn cb;
    void *user; /**< passed to @p cb, borrowed */
} lse_slot_fit_opts;

/** @brief max_iter 50, estep_steps 5, tol 1e-8, shrink_ratio 0.5,
 *  patience 3, total_ratio 0.5, norm_floor 1e-8, no callback. */
LSE_API lse_slot_fit_opts lse_slot_fit_opts_default(void);

/** @brief What the slot EM did, including the collapse detector. */
typedef struct lse_slot_report {
    size_t n_iter;          /**< EM iterations */
    int converged;          /**< tolerance met */
    lse_stop_reason reason; /**< why it stopped */
    double energy_initial;  /**< E before the first iteration */
    double energy;          /**< E at the final values */
    size_t n_increase;      /**< iterations whose energy rose (the seed's
                               M-step does not minimise E: reported, see
                               docs) */
    size_t n_mstep;         /**< closed-form M-steps run */
    size_t n_shrink;        /**< M-steps that shrank (see shrink_ratio) */
    size_t run;             /**< current run of consecutive shrinking steps */
    size_t max_run;         /**< longest such run */
    int collapsed;          /**< 1 once the collapse rule fired (a warning
                               is logged through lse_log when it fires) */
    size_t collapse_mstep;  /**< M-step (1-based) at which it first fired */
    double norm_initial;    /**< ||W_K||_F ||W_Q||_F before the first
                               M-step */
    double norm;            /**< the same after the last M-step */
    double last_ratio;      /**< norm after / before of the last M-step */
    double max_ratio;       /**< largest such ratio (> 1: W grew; the
                               seed's M-step can also blow W up) */
} lse_slot_report;

/**
 * @brief Fit slot attention by EM (lse_solver_em): E-step =
 * opts->estep_steps Armijo gradient steps on the slots with W fixed;
 * M-step = lse_sim_bilinear's closed form for W_K, W_Q given the
 * responsibilities and slots (Tschantz section 10), followed by the
 * collapse check. The energy of each iteration is logged at
 * LSE_LOG_INFO and passed to opts->cb.
 * @param opts borrowed; NULL: defaults. @param rep may be NULL; also
 *  readable with lse_attention_slot_report().
 * @return LSE_OK (a detected collapse is not an error: see rep->collapsed);
 *  LSE_EFAULT; LSE_EINVAL (not a slot graph); LSE_EDOM (bad options);
 *  LSE_ENUMERIC (singular M-step statistics, e.g. after the slots
 *  collapsed too); the solver's errors. Message in @p err.
 */
LSE_API lse_status lse_attention_slot_fit(lse_attention *a,
                                          const lse_slot_fit_opts *opts,
                                          lse_slot_report *rep, lse_error *err);

/** @brief The live report of the current or last slot fit (borrowed),
 *  or NULL for other kinds. */
LSE_API const lse_slot_report *
lse_attention_slot_report(const lse_attention *a);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_ATTENTION_H */
