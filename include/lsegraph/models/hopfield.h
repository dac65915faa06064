#ifndef LSEGRAPH_MODELS_HOPFIELD_H
#define LSEGRAPH_MODELS_HOPFIELD_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <lsegraph/status.h>
#include <lsegraph/graph.h>
#include <lsegraph/solver.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file hopfield.h
 * @brief Modern (continuous) Hopfield network of Ramsauer et al. (2020) as
 * an LSE graph (models/hopfield.c; Tschantz section 4).
 *
 * The graph: a clamped PARAM node "memories" M (K, d) holding the stored
 * patterns as parents, a free state node "state" Xi (n, d) holding n
 * states as children, an LSE term "attract" with lse_sim_dot and inverse
 * temperature beta, and a custom term "bound" (lse_custom_quadratic,
 * scale 1) on the states, so that the energy
 *
 *     E(Xi) = - sum_i (1/beta) log sum_mu exp(beta xi_i . m_mu)
 *             + 1/2 sum_i ||xi_i||^2
 *
 * is bounded below (Ramsauer's energy without its
 * constants (1/beta) log K + max_mu ||m_mu||^2 / 2). Retrieval minimises E
 * over the states, starting from the queries, in one of two ways:
 * the CCCP update xi <- M' softmax(beta M xi) run as the E-step hook of
 * lse_solver_em, or gradient descent (lse_solver_gd, Armijo line search).
 * Both lower E at every iteration. Derivation: docs/models/hopfield.md.
 *
 * @code
 * lse_hopfield *h = NULL;
 * lse_error err;
 * if (lse_hopfield_new(patterns, 100.0, &h, &err) != LSE_OK)  // (K, d)
 *     fprintf(stderr, "%s\n", err.message);
 * lse_hopfield_info info;
 * if (lse_hopfield_retrieve(h, queries, LSE_HOPFIELD_CCCP, 100, states,
 *                           &info, &err) != LSE_OK)                  // (n, d)
 *     fprintf(stderr, "%s\n", err.message);
 * const gsl_matrix *a = lse_hopfield_softmax(h);  // (n, K) at the result
 * lse_hopfield_free(h);
 * @endcode
 */

/** @brief A modern Hopfield network storing K patterns of dimension d.
 *  Opaque. */
typedef struct lse_hopfield lse_hopfield;

/** @brief How lse_hopfield_retrieve() minimises the energy. */
typedef enum lse_hopfield_method {
    /** lse_solver_em whose E-step hook is the concave-convex procedure
     *  xi <- M' softmax(beta M xi), the softmax read from the "attract"
     *  term (lse_term_softmax): Ramsauer's update rule */
    LSE_HOPFIELD_CCCP = 0,
    /** lse_solver_gd on the state node with Armijo backtracking (initial
     *  step 1; note that one full step of size 1 equals the CCCP update) */
    LSE_HOPFIELD_GD = 1
} lse_hopfield_method;

/** @brief What lse_hopfield_retrieve() did. */
typedef struct lse_hopfield_info {
    size_t n_iter;          /**< iterations run */
    int converged;          /**< 1 if a tolerance was met before max_iter */
    lse_stop_reason reason; /**< why it stopped */
    double energy_initial;  /**< E at the queries */
    double energy;          /**< E at the returned states */
    double grad_norm;       /**< ||dE/dXi||_F at the returned states */
    size_t n_increase;      /**< iterations whose energy rose by more than
                               1e-12 max(1, |E|) (0 in exact arithmetic) */
    double max_increase;    /**< largest rise E_t - E_{t-1} (<= 0 when the
                               sequence is monotone) */
} lse_hopfield_info;

/**
 * @brief Build a network storing the rows of @p patterns (K, d).
 * The state node starts with one row; retrieval resizes it.
 * @param patterns borrowed, copied. @param beta inverse temperature > 0.
 * @param[out] out the network, owned by the caller (lse_hopfield_free());
 *             NULL on failure.
 * @param err may be NULL; filled on failure.
 * @return LSE_OK; LSE_EFAULT (NULL patterns or out); LSE_EDOM (beta not
 *  finite and > 0); LSE_ENONFINITE (NaN/inf in patterns); LSE_ENOMEM.
 */
LSE_API lse_status lse_hopfield_new(const gsl_matrix *patterns, double beta,
                                    lse_hopfield **out, lse_error *err);

/** @brief Free @p h and its graph; NULL is a no-op. */
LSE_API void lse_hopfield_free(lse_hopfield *h);

/** @brief "function: facts" of the last failure of a call on @p h ("" if
 *  none); borrowed, valid until the next call on @p h.
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_hopfield_errmsg(const lse_hopfield *h);

/** @brief Number of stored patterns K. */
LSE_API size_t lse_hopfield_n_patterns(const lse_hopfield *h);
/** @brief Pattern dimension d. */
LSE_API size_t lse_hopfield_dim(const lse_hopfield *h);
/** @brief Inverse temperature beta. */
LSE_API double lse_hopfield_beta(const lse_hopfield *h);

/** @brief The graph: nodes "memories" (K, d) and "state" (n, d), terms
 *  "attract" (LSE, dot) and "bound" (quadratic). Borrowed, owned by @p h;
 *  valid until a call on @p h with a different number of state rows (the
 *  graph is then rebuilt). */
LSE_API lse_graph *lse_hopfield_graph(const lse_hopfield *h);

/** @brief Softmax (n, K) of the "attract" term at the last evaluation
 *  (after lse_hopfield_retrieve: at the returned states); row i is
 *  softmax(beta M xi_i). Borrowed, same lifetime as the graph. */
LSE_API const gsl_matrix *lse_hopfield_softmax(const lse_hopfield *h);

/**
 * @brief Convergence tolerances of lse_hopfield_retrieve(): stop when an
 * iteration changes E by at most @p tol_energy (absolute; default 1e-12)
 * or, for gradient descent, when ||dE/dXi||_F <= @p tol_grad (default
 * 1e-10; 0 turns it off).
 * @return LSE_OK; LSE_EFAULT; LSE_EDOM for a negative or non-finite
 *  tolerance.
 */
LSE_API lse_status lse_hopfield_set_tol(lse_hopfield *h, double tol_energy,
                                        double tol_grad, lse_error *err);

/** @brief Call @p cb (NULL: none) after every retrieval iteration with the
 *  solver (read lse_solver_energy() etc.); a non-zero return stops the
 *  retrieval (reason LSE_STOP_CALLBACK). @p user is borrowed. */
LSE_API void lse_hopfield_set_callback(lse_hopfield *h, lse_iter_fn cb,
                                       void *user);

/**
 * @brief Retrieve: minimise E over the states starting from @p queries
 * (n, d), for at most @p max_iter iterations, and write the result to
 * @p states (n, d).
 * @param queries borrowed; @param states caller-owned, written (may be the
 *  same matrix as @p queries). @param info may be NULL.
 * @return LSE_OK (also when max_iter is reached: see info->converged);
 *  LSE_EFAULT; LSE_EDIM (queries or states not (n, d) with n >= 1);
 *  LSE_EINVAL (unknown method); LSE_ENONFINITE; LSE_ENOMEM; a solver error.
 *  The message is in @p err.
 */
LSE_API lse_status lse_hopfield_retrieve(lse_hopfield *h,
                                         const gsl_matrix *queries,
                                         lse_hopfield_method method,
                                         size_t max_iter, gsl_matrix *states,
                                         lse_hopfield_info *info,
                                         lse_error *err);

/**
 * @brief Energy E at @p states (n, d): sets the state node and evaluates
 * the graph (which also refreshes lse_hopfield_softmax()).
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE; LSE_ENOMEM.
 */
LSE_API lse_status lse_hopfield_energy(lse_hopfield *h,
                                       const gsl_matrix *states, double *energy,
                                       lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_HOPFIELD_H */
