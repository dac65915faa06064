#ifndef LSEGRAPH_ODE_H
#define LSEGRAPH_ODE_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <lsegraph/graph.h>
#include <lsegraph/solver.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file ode.h
 * @brief Inference by the gradient flow dv/dt = -dE/dv over a graph's free
 * state nodes, integrated from t = 0 to t1 by an adaptive embedded
 * Runge-Kutta pair (Heun, order 2, with Euler, order 1, as the error
 * estimate) under a PID step-size controller (docs/learning.md).
 *
 * Same INITIALIZE / ITERATE / TEST split as lse_solver: one iterate is one
 * attempted step (accepted or rejected); test says whether t1 is reached
 * (or the gradient is below tol_grad). Scratch space is allocated by
 * lse_ode_init, never while iterating; the result does not depend on the
 * thread count (the graph's gradients do not).
 *
 * @code
 * lse_ode *o = lse_ode_new(g);           // default: every free state node
 * lse_ode_opts opts = lse_ode_opts_default();  // rtol = atol = 1e-3, t1 = 20
 * lse_ode_set_opts(o, &opts);
 * lse_solver_result r;
 * if (lse_ode_run(o, &r) != LSE_OK)
 *     fprintf(stderr, "%s\n", lse_graph_errmsg(g));
 * lse_ode_free(o);
 * @endcode
 */

typedef struct lse_ode lse_ode;

typedef struct lse_ode_opts {
    double t1;        /**< end time > 0 (default 20) */
    double rtol;      /**< relative tolerance >= 0 (default 1e-3) */
    double atol;      /**< absolute tolerance >= 0 (default 1e-3);
                         rtol + atol > 0 */
    double h0;        /**< initial step; 0 (default): chosen from the
                         gradient (Hairer, Norsett and Wanner II.4) */
    size_t max_steps; /**< attempted steps (accepted + rejected) that
                         lse_ode_run takes at most (default 4096) */
    double pcoeff;    /**< PID coefficients of the controller: the step */
    double icoeff;    /**< factor is safety * e_n^-(p+i+d)/k *
                         e_{n-1}^(p+2d)/k * e_{n-2}^-d/k with k = 2; */
    double dcoeff;    /**< default p = 0.4, i = 0.3, d = 0 (a PI
                         controller); p = d = 0, i = 1 is the plain
                         integral controller of the reference code */
    double safety;    /**< default 0.9 */
    double factor_min; /**< step factor bounds, default 0.2 and 10 */
    double factor_max;
    double h_min;     /**< smallest step (default 0: none); a rejection
                         below it is an error (LSE_ENUMERIC) */
    double tol_grad;  /**< also stop when the RMS of dE/dv <= tol_grad
                         (default 0: off) */
} lse_ode_opts;

/** @brief The defaults listed in lse_ode_opts. */
LSE_API lse_ode_opts lse_ode_opts_default(void);

/** @brief An integrator on @p g (borrowed; must outlive it), or NULL if
 *  out of memory or @p g is NULL. */
LSE_API lse_ode *lse_ode_new(lse_graph *g);
LSE_API void lse_ode_free(lse_ode *o);
/** @brief Options (copied). @return LSE_OK, LSE_EFAULT or LSE_EDOM. */
LSE_API lse_status lse_ode_set_opts(lse_ode *o, const lse_ode_opts *opts);
/** @brief Integrate over @p nodes only (copied; NULL/0: every node that is
 *  neither clamped nor a parameter). Clamped nodes never move. */
LSE_API lse_status lse_ode_set_nodes(lse_ode *o, lse_node *const *nodes,
                                     size_t n);

/** @brief INITIALIZE: allocate the scratch, set t = 0, evaluate the energy
 *  and gradient at the nodes' current values and choose the first step.
 *  @return LSE_OK, LSE_ENOMEM, LSE_ENONFINITE, or a graph error. */
LSE_API lse_status lse_ode_init(lse_ode *o);
/** @brief ITERATE: one attempted step from t to min(t + h, t1). On
 *  acceptance the nodes move and the energy and gradient are evaluated at
 *  the new point; on rejection the nodes keep their values. A trial point
 *  with a non-finite energy is a rejection (the step shrinks by
 *  factor_min). Allocation-free. @return LSE_OK, LSE_EINVAL (not
 *  initialised), LSE_ENUMERIC (step below h_min), or a graph error. */
LSE_API lse_status lse_ode_iterate(lse_ode *o);
/** @brief TEST: LSE_OK when t has reached t1 or the gradient RMS is below
 *  tol_grad, else LSE_CONTINUE. */
LSE_API lse_status lse_ode_test(const lse_ode *o);
/** @brief init, then iterate/test until done or max_steps attempted steps
 *  (then res->converged = 0, reason LSE_STOP_MAX_ITER, status LSE_OK).
 *  Afterwards the node gradients (lse_node_grad) are those at the final
 *  point. Reason on success: LSE_STOP_NONE (t1 reached) or LSE_STOP_GRAD
 *  (tol_grad). @p res may be NULL. */
LSE_API lse_status lse_ode_run(lse_ode *o, lse_solver_result *res);

LSE_API double lse_ode_t(const lse_ode *o);
/** @brief The step the next iterate will attempt. */
LSE_API double lse_ode_h(const lse_ode *o);
/** @brief Energy at the current (last accepted) point. */
LSE_API double lse_ode_energy(const lse_ode *o);
/** @brief RMS of dE/dv over the integrated entries at the current point. */
LSE_API double lse_ode_grad_rms(const lse_ode *o);
/** @brief Scaled RMS error estimate of the last attempted step (<= 1:
 *  accepted). */
LSE_API double lse_ode_error(const lse_ode *o);
LSE_API size_t lse_ode_n_accepted(const lse_ode *o);
LSE_API size_t lse_ode_n_rejected(const lse_ode *o);
/** @brief Energy and gradient evaluations so far (since init). */
LSE_API size_t lse_ode_n_eval(const lse_ode *o);
/** @brief 1 if the last iterate was accepted. */
LSE_API int lse_ode_last_accepted(const lse_ode *o);
/** @brief Largest energy rise E_{n+1} - E_n over accepted steps since init
 *  (<= 0 when the energy never rose). The exact flow never raises E; the
 *  integrated one can by about the local error. */
LSE_API double lse_ode_max_increase(const lse_ode *o);
/** @brief The graph (borrowed). */
LSE_API lse_graph *lse_ode_graph(const lse_ode *o);
/** @brief Number of integrated entries (sum of rows * dim). */
LSE_API size_t lse_ode_size(const lse_ode *o);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_ODE_H */
