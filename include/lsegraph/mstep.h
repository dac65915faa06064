#ifndef LSEGRAPH_MSTEP_H
#define LSEGRAPH_MSTEP_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <lsegraph/comm.h>
#include <lsegraph/graph.h>
#include <lsegraph/sim.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file mstep.h
 * @brief Verbs on one LSE term for models that drive EM themselves
 * (lib/mstep.c): its shape, its closed-form M-step from given
 * responsibilities, its scores at given parameters. A model calls these
 * instead of a similarity's kernel slots, so it never builds an
 * lse_sim_shape or a workspace by hand.
 */

/** @brief The shape the term's similarity was checked against (child rows,
 *  block, parent rows, widths, parameter shapes; the parameter arrays are
 *  borrowed from the term). @return LSE_OK; LSE_EFAULT (NULL, or not an
 *  LSE term). */
LSE_API lse_status lse_term_shape(const lse_term *t, lse_sim_shape *out);

/**
 * @brief One closed-form M-step of the LSE term @p t from the
 * responsibilities @p resp (n_child, n_parent), or NULL for the term's
 * kept softmax of the last evaluation (lse_term_softmax): the similarity's
 * stats over the child rows in blocks of the term's block size, with the
 * term's row weights, summed in block order into one accumulator, summed
 * over the processes of @p comm (NULL: one process), then its solve, which
 * writes the parent rows and the parameter nodes in place. The similarity
 * is prepared at the current values first. @p report (may be NULL) gets
 * the empty parents (report->empty: n_parent flags, may be NULL).
 * @return LSE_OK; LSE_EFAULT; LSE_ENOTSUP (no closed form, or resp NULL
 * and no kept softmax); LSE_EDIM; the kernels' status (LSE_ENUMERIC ...)
 * with "lse_term_mstep: term 'name': ..." in @p err; LSE_ENOMEM.
 */
LSE_API lse_status lse_term_mstep(lse_term *t, const gsl_matrix *resp,
                                  const lse_mstep_opts *opts,
                                  lse_mstep_report *report, lse_comm *comm,
                                  lse_error *err);

/** @brief Writes rows [i0, i0 + out->size1) of the responsibilities into
 *  @p out (out->size2 = n_parent). lse_term_mstep_rows calls it once per
 *  block, in row order, every row once. */
typedef void (*lse_resp_fn)(size_t i0, gsl_matrix *out, void *user);

/** @brief lse_term_mstep with the responsibilities made a block at a time
 *  by @p fill (so that no (n_child, n_parent) matrix is held); the same
 *  arithmetic. */
LSE_API lse_status lse_term_mstep_rows(lse_term *t, lse_resp_fn fill,
                                       void *user, const lse_mstep_opts *opts,
                                       lse_mstep_report *report, lse_comm *comm,
                                       lse_error *err);

/**
 * @brief Scores S (b, n_parent) of the rows @p child (b, d_child; no
 * context) under @p parent (n_parent, d_parent) and the parameter values
 * @p param (n_param entries as the term binds them), through the term's
 * similarity with a workspace of its own: no node and no cache of the
 * term change. For a query at parameters other than the graph's (e.g. a
 * model's snapshot of the last E-step).
 * @return LSE_OK; LSE_EFAULT; LSE_EINVAL (the type needs a context);
 * LSE_EDIM; LSE_ENOMEM; the kernels' status.
 */
LSE_API lse_status lse_term_scores(const lse_term *t, const gsl_matrix *child,
                                   const gsl_matrix *parent,
                                   const gsl_matrix *const *param,
                                   gsl_matrix *scores, lse_error *err);

/** @brief Index of the parameter called @p name in @p type->param_names,
 *  or (size_t)-1 when the type has none of that name (or an argument is
 *  NULL). */
LSE_API size_t lse_sim_param_index(const lse_sim_type *type, const char *name);

/**
 * @brief Bind parameters by name instead of by position: @p out
 * (type->n_param entries, caller-owned, for lse_term_spec.param) gets
 * nodes[i] at the position of names[i], NULL elsewhere (an absent optional
 * parameter). @return LSE_OK; LSE_EFAULT; LSE_EINVAL (an unknown or
 * repeated name, naming it and the type's parameters in @p err).
 */
LSE_API lse_status lse_sim_params_bind(const lse_sim_type *type,
                                       const char *const *names,
                                       lse_node *const *nodes, size_t n,
                                       lse_node **out, lse_error *err);

/** @brief The parameter node the term binds under @p name (NULL when the
 *  term's similarity has no such parameter or it is absent). */
LSE_API lse_node *lse_term_param_named(const lse_term *t, const char *name);

/** @brief The buffers of a term's M-step (statistics, exact accumulators,
 *  a block of responsibilities), made once so that an EM loop that calls
 *  lse_term_mstep_ws allocates nothing. */
typedef struct lse_mstep_ws lse_mstep_ws;

/** @brief Flag of lse_mstep_ws_new: sum the statistics exactly
 *  (stats_exact into lse_xsum accumulators, lse_comm_xsum over the
 *  processes, each statistic rounded once), so that they are the same
 *  bits for any split of the rows into blocks or processes, as
 *  lse_solver_opts.exact_stats does for the solver. */
#define LSE_MSTEP_EXACT 1u

/** @brief A workspace for the M-steps of @p t (borrowed; the workspace is
 *  for this term only), with @p flags 0 or LSE_MSTEP_EXACT.
 *  @return LSE_OK; LSE_EFAULT; LSE_ENOTSUP (no closed form, or no exact
 *  statistics for LSE_MSTEP_EXACT); LSE_ENOMEM; message in @p err. */
LSE_API lse_status lse_mstep_ws_new(const lse_term *t, unsigned flags,
                                    lse_mstep_ws **out, lse_error *err);
/** @brief Free @p ws; NULL is a no-op. */
LSE_API void lse_mstep_ws_free(lse_mstep_ws *ws);
/** @brief lse_term_mstep in the buffers of @p ws (the same arithmetic; with
 *  LSE_MSTEP_EXACT the exact sums): no allocation.
 *  @return as lse_term_mstep; LSE_EINVAL for a workspace of another term. */
LSE_API lse_status lse_term_mstep_ws(lse_term *t, const gsl_matrix *resp,
                                     const lse_mstep_opts *opts,
                                     lse_mstep_report *report, lse_comm *comm,
                                     lse_mstep_ws *ws, lse_error *err);

/**
 * @brief A Gaussian mixture over rows with missing entries: the terms of
 * its marginal likelihood in a graph and its expected-statistics M-step
 * (lib/mstep_missing.c; docs/core.md, "Missing entries"). Rows are grouped
 * by missingness pattern; each pattern p with observed columns O gets a
 * clamped node "<prefix>x.p" (its rows, columns O), parameter nodes
 * "<prefix>mu.p" (K, |O|) and "<prefix>chol.p" (the factors of
 * Sigma_k[O, O] in the covariance type's layout) and an LSE term
 * "<prefix>mixture.p" with lse_sim_gaussian that shares the log-weights.
 * The energy of these terms is -sum_i w_i log p(x_i,O): the marginal
 * likelihood of the observed entries. The pattern nodes are derived from
 * the shared nodes (logw, mu, chol) by lse_gauss_missing_sync; an EM step
 * is lse_gauss_missing_stats (the expected sufficient statistics, missing
 * entries imputed by their conditional means, the conditional covariance
 * added to the scatter) and lse_gauss_missing_solve (the gaussian
 * similarity's own closed-form M-step on them). In an EM solver, give it
 * lse_gauss_missing_nodes as the nodes of an lse_mstep_group.
 */
typedef struct lse_gauss_missing lse_gauss_missing;

/**
 * @brief Add the pattern nodes and terms of @p x (N, d; NaN = missing;
 * borrowed, must outlive @p out) with row weights @p w (N, borrowed, or
 * NULL) to @p g, sharing the PARAM nodes @p logw (K, 1), @p mu (K, d) and
 * @p chol (layout of @p cov for K components of dimension d; not bound to
 * any term). Names start with @p prefix (may be NULL). Rows with nothing
 * observed belong to no pattern (they add nothing). Call
 * lse_gauss_missing_sync before evaluating @p g.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENOMEM; the graph's status
 * (e.g. a repeated name), message in @p err.
 */
LSE_API lse_status lse_gauss_missing_new(lse_graph *g, const char *prefix,
                                         const gsl_matrix *x,
                                         const gsl_vector *w, lse_node *logw,
                                         lse_node *mu, lse_node *chol,
                                         lse_cov_type cov,
                                         lse_gauss_missing **out,
                                         lse_error *err);
/** @brief Free @p gm (not its nodes and terms: they belong to the graph);
 *  NULL is a no-op. */
LSE_API void lse_gauss_missing_free(lse_gauss_missing *gm);
/** @brief Derive every pattern's mean and factor nodes from the shared
 *  nodes (Sigma_OO and its Cholesky factor). @return LSE_OK; LSE_EFAULT;
 *  LSE_ENUMERIC (a marginal covariance is not positive definite). */
LSE_API lse_status lse_gauss_missing_sync(lse_gauss_missing *gm,
                                          lse_error *err);
/** @brief Statistics lse_gauss_missing_stats writes: N (K) | s1 (K, d) |
 *  s2 (full (K, d, d), tied (d, d), diag (K, d), spherical (K)). */
LSE_API size_t lse_gauss_missing_stats_size(const lse_gauss_missing *gm);
/**
 * @brief Expected sufficient statistics into @p acc
 * (lse_gauss_missing_stats_size): with r_ik the responsibility times the
 * row weight and y_i = E[x_i | x_iO, k] - mu_k (y_O = x_O - mu_O,
 * y_M = Sigma_MO Sigma_OO^-1 y_O; diag/spherical: y_M = 0),
 * N_k = sum_i r_ik, s1_k = sum_i r_ik y_i and s2_k = sum_i r_ik (y_i y_i' +
 * [0 0; 0 C_k]) with C_k = Sigma_MM - Sigma_MO Sigma_OO^-1 Sigma_OM (diag:
 * its diagonal, spherical: the trace, tied: summed over k), summed per
 * pattern, component and row in that order. @p resp (N, K): the
 * responsibilities, or NULL for the pattern terms' softmax of the last
 * evaluation. The covariances are those of the last sync; the means the
 * shared node's. @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENOTSUP (resp
 * NULL before an evaluation); LSE_ENUMERIC (a marginal covariance is not
 * positive definite).
 */
LSE_API lse_status lse_gauss_missing_stats(lse_gauss_missing *gm,
                                           const gsl_matrix *resp,
                                           double *acc, lse_error *err);
/**
 * @brief The closed-form M-step of lse_sim_gaussian from the moments
 * @p acc of lse_gauss_missing_stats: writes mu, chol and logw (weights of
 * empty components kept, reported in @p report as lse_term_mstep does),
 * then syncs the pattern nodes. @return LSE_OK; LSE_EFAULT; the
 * similarity's status (LSE_EDOM no responsibility, LSE_ENUMERIC not
 * positive definite) with its message in @p err.
 */
LSE_API lse_status lse_gauss_missing_solve(lse_gauss_missing *gm,
                                           const double *acc,
                                           const lse_mstep_opts *opts,
                                           lse_mstep_report *report,
                                           lse_error *err);
/** @brief Row @p i of the last evaluation: its log-likelihood log p(x_iO)
 *  into @p loglik and its K responsibilities into @p resp (either may be
 *  NULL). @return 1; 0 when the row has nothing observed or @p i is out
 *  of range. */
LSE_API int lse_gauss_missing_row(const lse_gauss_missing *gm, size_t i,
                                  double *loglik, double *resp);
/** @brief The nodes @p gm writes (the shared ones, then every pattern's
 *  mean and factor), @p n of them. */
LSE_API lse_node *const *lse_gauss_missing_nodes(const lse_gauss_missing *gm,
                                                 size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_MSTEP_H */
