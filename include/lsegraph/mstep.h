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

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_MSTEP_H */
