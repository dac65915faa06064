#ifndef LSEGRAPH_SOLVER_H
#define LSEGRAPH_SOLVER_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <lsegraph/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file solver.h
 * @brief Minimizers of a graph's energy, split into INITIALIZE, ITERATE and
 * TEST so the caller owns the loop (lse_solver_run is a convenience loop).
 *
 * @code
 * lse_solver *s = lse_solver_new(g, lse_solver_em);
 * lse_status st = lse_solver_init(s);
 * for (size_t it = 0; st == LSE_OK && it < 500; it++) {
 *     st = lse_solver_iterate(s);
 *     if (st == LSE_OK)
 *         st = lse_solver_test(s);       // LSE_CONTINUE until converged
 *     if (st == LSE_CONTINUE)
 *         st = LSE_OK;
 *     else if (st == LSE_OK)
 *         break;                          // converged
 * }
 * lse_solver_free(s);
 * @endcode
 */

typedef struct lse_solver lse_solver;
typedef struct lse_solver_type lse_solver_type;

/** Gradient descent on the selected nodes (default: every free node), with
 *  backtracking (Armijo) line search or a fixed step. */
LSE_API extern const lse_solver_type *const lse_solver_gd;
/** EM coordinate ascent: E-step = responsibilities (softmax of each LSE
 *  term) and state updates (the estep hook, else gradient steps on free
 *  state nodes); M-step = closed form for every parameter a similarity
 *  solves, gradient steps for the other free parameters. */
LSE_API extern const lse_solver_type *const lse_solver_em;

LSE_API const char *lse_solver_type_name(const lse_solver_type *type);

typedef struct lse_solver_opts {
    double step;          /**< initial (or fixed) step, default 1 */
    int line_search;      /**< 1 (default): Armijo backtracking */
    double armijo;        /**< sufficient-decrease constant, default 1e-4 */
    double shrink;        /**< step factor per backtrack, default 0.5 */
    double grow;          /**< step factor after an accepted step, default 2
                             (GD: used only without a curvature pair; the
                             trial step is Barzilai-Borwein otherwise) */
    size_t max_backtrack; /**< default 60 */
    double tol_energy;    /**< converged when |E_t - E_{t-1}| <= tol_energy
                             (absolute; default 1e-8) */
    double tol_grad;      /**< or when the gradient norm <= tol_grad
                             (default 0: off) */
    size_t estep_steps;   /**< EM: gradient steps on states per E-step (1) */
    size_t mstep_steps;   /**< EM: gradient steps on other parameters (1) */
    double increase_tol;  /**< EM: relative energy increase reported as a
                             violation of monotonicity (default 1e-10) */
    lse_mstep_opts mstep; /**< closed-form M-step options */
    int exact_stats;      /**< EM: 1 = sum the M-step statistics of every
                             closed-form term whose similarity has
                             stats_exact exactly (lse_xsum), so that they
                             do not depend on the chunks, threads or
                             processes (the reduction hook then gets the
                             exported accumulators: LSE_XSUM_EXPORT doubles
                             per statistic). Rows terms then take a
                             statistics pass after the E-step (a second
                             pass over the rows unless the term keeps its
                             softmax). The EM energy is summed exactly
                             too: each row's log-sum-exp of a rows term,
                             the other terms' energies as they are, one
                             more reduction of LSE_XSUM_EXPORT doubles.
                             Read by lse_solver_init. Default 0.
                             docs/core.md */
} lse_solver_opts;

/** @brief The defaults listed in lse_solver_opts. */
LSE_API lse_solver_opts lse_solver_opts_default(void);

/** @brief A solver on @p g (borrowed; must outlive the solver), or NULL if
 *  out of memory. Scratch space is allocated here, not while iterating. */
LSE_API lse_solver *lse_solver_new(lse_graph *g, const lse_solver_type *type);
LSE_API void lse_solver_free(lse_solver *s);
/** @brief Options (copied). @return LSE_OK or LSE_EDOM for a bad value. */
LSE_API lse_status lse_solver_set_opts(lse_solver *s,
                                       const lse_solver_opts *opts);
/** @brief Restrict updates to @p nodes (copied array; NULL/0 = every free
 *  node). Clamped nodes are never updated. */
LSE_API lse_status lse_solver_set_nodes(lse_solver *s, lse_node *const *nodes,
                                        size_t n);

/** @brief Closed-form state update called in each E-step after the
 *  responsibilities are fresh (e.g. Hopfield's CCCP step). */
typedef lse_status (*lse_estep_fn)(lse_graph *g, void *user);
LSE_API void lse_solver_set_estep(lse_solver *s, lse_estep_fn fn, void *user);

/** @brief Called after each closed-form M-step of an LSE term, with the
 *  report (empty parents), so a model can re-seed or floor them; also
 *  after the M-step of each chain term (its initial and transition
 *  logits), with an empty report (report->empty NULL), where the term's
 *  posteriors (lse_term_softmax) are still those of this E-step. */
typedef lse_status (*lse_mstep_fn)(lse_graph *g, lse_term *t,
                                   const lse_mstep_report *report,
                                   void *user);
LSE_API void lse_solver_set_mstep_hook(lse_solver *s, lse_mstep_fn fn,
                                       void *user);

/**
 * @brief An M-step the caller supplies for parameters that several terms
 * share (e.g. a mixture whose pattern terms see parts of one set of means
 * and covariances: lse_gauss_missing). The EM solver leaves @p nodes
 * alone (no closed form, no gradient steps on them, nor on any term whose
 * parent and parameters are all among them); after each E-step it calls
 * @p stats to write @p n_stats doubles (the terms' softmax is that of the
 * E-step), sums them over the processes with the energy and the other
 * statistics, then, after the terms' own M-steps, calls @p solve with the
 * sums; @p solve writes the nodes (and whatever they derive). With
 * exact_stats the group's statistics are summed plainly.
 */
typedef struct lse_mstep_group {
    size_t n_stats;
    lse_status (*stats)(lse_graph *g, double *acc, void *user);
    lse_status (*solve)(lse_graph *g, const double *acc, void *user);
    void *user;
    lse_node *const *nodes; /**< the nodes the group writes (borrowed) */
    size_t n_nodes;
} lse_mstep_group;

/** @brief Set (copy) the solver's group M-step, or remove it (NULL); read
 *  by lse_solver_init. @return LSE_OK; LSE_EFAULT (no solver, or a group
 *  without stats/solve); LSE_EINVAL (not an EM solver). */
LSE_API lse_status lse_solver_set_group(lse_solver *s,
                                        const lse_mstep_group *grp);

/** @brief Reduction hook: replace buf[0..n) in place by its sum over all
 *  processes (MPI_Allreduce with MPI_SUM). The EM solver calls it once per
 *  iteration on [energy, M-step statistics...]; the GD solver on
 *  [energy, gradient...]. NULL (default): one process. */
typedef lse_status (*lse_reduce_fn)(double *buf, size_t n, void *user);
LSE_API void lse_solver_set_reduce(lse_solver *s, lse_reduce_fn fn,
                                   void *user);

/** @brief Evaluate the starting energy (and gradient for GD). */
LSE_API lse_status lse_solver_init(lse_solver *s);
/** @brief One iteration. @return LSE_OK or an error (LSE_ENONFINITE stops
 *  on a non-finite energy; LSE_ENUMERIC on a failed closed form). */
LSE_API lse_status lse_solver_iterate(lse_solver *s);
/** @brief LSE_OK when converged by the tolerances, else LSE_CONTINUE. */
LSE_API lse_status lse_solver_test(const lse_solver *s);
/** @brief Evaluate the energy (and responsibilities) at the final values:
 *  after EM's last M-step the stored energy is that of the previous
 *  parameters until this is called. */
LSE_API lse_status lse_solver_finish(lse_solver *s);

/** @brief Energy: GD, at the current point; EM, at the parameters the last
 *  E-step saw (the monotone sequence E_0 >= E_1 >= ...). */
LSE_API double lse_solver_energy(const lse_solver *s);
/** @brief Energy change of the last iteration (E_t - E_{t-1}). */
LSE_API double lse_solver_delta(const lse_solver *s);
LSE_API double lse_solver_grad_norm(const lse_solver *s);
LSE_API double lse_solver_step(const lse_solver *s);
LSE_API size_t lse_solver_n_iter(const lse_solver *s);
/** @brief EM iterations whose energy rose by more than increase_tol. */
LSE_API size_t lse_solver_n_increase(const lse_solver *s);
LSE_API lse_graph *lse_solver_graph(const lse_solver *s);

typedef enum lse_stop_reason {
    LSE_STOP_NONE = 0,
    LSE_STOP_ENERGY = 1,   /**< energy change below tol_energy */
    LSE_STOP_GRAD = 2,     /**< gradient norm below tol_grad */
    LSE_STOP_MAX_ITER = 3, /**< max_iter reached */
    LSE_STOP_ERROR = 4,    /**< an iteration failed (see status) */
    LSE_STOP_CALLBACK = 5, /**< the callback asked to stop */
    LSE_STOP_NO_STEP = 6   /**< line search found no decrease */
} lse_stop_reason;

typedef struct lse_solver_result {
    lse_status status;      /**< LSE_OK, or the error that stopped it */
    lse_stop_reason reason;
    size_t n_iter;
    double energy;          /**< after lse_solver_finish */
    double grad_norm;
    int converged;
} lse_solver_result;

/** @brief Per-iteration callback; return non-zero to stop. */
typedef int (*lse_iter_fn)(const lse_solver *s, void *user);

/** @brief init, then iterate/test up to @p max_iter times, calling @p cb
 *  (may be NULL) after each iteration, then finish. */
LSE_API lse_status lse_solver_run(lse_solver *s, size_t max_iter,
                                  lse_iter_fn cb, void *user,
                                  lse_solver_result *res);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_SOLVER_H */
