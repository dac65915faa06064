#ifndef LSE_GAUSS_SOLVE_PRIVATE_H
#define LSE_GAUSS_SOLVE_PRIVATE_H

#include "gauss-private.h"

/*
 * The pieces of the closed-form M-step (solve) and of the gradient that
 * lse_sim_gaussian and lse_sim_lingauss share word for word
 * (lib/sim/gauss_solve.c). Each keeps the arithmetic order both had.
 */

/* The start of solve: the arguments are there (else LSE_EFAULT; @p
 * more_null adds the type's own NULL tests), the outputs and the term's
 * means, chol and logw have the term's shapes (else LSE_EDIM; the type
 * checks its own parameters after). Silences GSL's abort handler. */
lse_status lse_gauss_solve_begin(const lse_sim_args *a, const double *acc,
                                 gsl_matrix *parent, gsl_matrix *const *param,
                                 size_t p_chol, size_t p_logw, int more_null,
                                 const char *name, char *msg, size_t msg_len);

/* The message of a solve whose outputs do not fit the term (LSE_EDIM). */
lse_status lse_gauss_solve_shape_fail(const char *name, char *msg,
                                      size_t msg_len);

/* The statistics acc[0 .. n_acc) are finite, the counts acc[0 .. K) not
 * negative and not all 0; @p total gets their sum. The messages name
 * @p name. */
lse_status lse_gauss_check_counts(const char *name, const double *acc,
                                  size_t n_acc, size_t K, double *total,
                                  char *msg, size_t msg_len);

/* The tied covariance: w->pool (the pooled scatter, symmetrized) over the
 * total count, factored into row 0 of w->new_chol with reg_covar added. */
lse_status lse_gauss_solve_pooled(lse_gauss_work *w, const char *name,
                                  double total, double reg_covar, char *msg,
                                  size_t msg_len);

/* The end of solve: copy w->new_parent into @p parent, w->new_chol into
 * @p chol and, when @p a is not NULL, w->new_a into it (the args' const
 * pointers may alias the outputs, so nothing is written before); then the
 * weights and the report from the counts acc[0 .. K), and the factor cache
 * is marked stale. */
lse_status lse_gauss_solve_commit(lse_gauss_work *w, const char *name,
                                  const double *acc, double min_count,
                                  gsl_matrix *parent, gsl_matrix *chol,
                                  gsl_matrix *a, gsl_matrix *logw,
                                  lse_mstep_report *report, char *msg,
                                  size_t msg_len);

/* The end of grad: ADD dE/dlogw into @p glogw (K, 1) when both it and the
 * term's logw are given; LSE_EDIM for a glogw of another shape. */
lse_status lse_gauss_grad_logw_tail(lse_gauss_work *w, const gsl_matrix *logw,
                                    const gsl_matrix *g, gsl_matrix *glogw);

#endif
