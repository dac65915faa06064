#ifndef LSEGRAPH_GAUSS_PRIVATE_H
#define LSEGRAPH_GAUSS_PRIVATE_H

#include <lsegraph/lsegraph.h>

/*
 * Shared machinery of the Gaussian family (lib/sim/gauss_common.c):
 * lse_sim_gaussian (lib/sim/gaussian.c) and lse_sim_lingauss
 * (lib/sim/lingauss.c). Both score a residual r_ik (the data minus the
 * component's prediction) with
 *
 *   S_ik = log pi_k - 1/2 r_ik' Sigma_k^-1 r_ik - 1/2 log det(2 pi Sigma_k)
 *
 * where Sigma_k = L_k L_k' comes from the "chol" parameter in one of four
 * layouts (lse_cov_type). The type files form the residuals; this file
 * turns residuals into scores, gradients and covariances.
 * Derivations: docs/sim-gaussian.md.
 */

/* Index of the optional log-weight parameter in both types. */
#define LSE_GAUSS_LOGW 0

/* Workspace of one term. The "factor" cache is filled by prepare(); the
 * block buffers are sized by shape->block rows; the solve buffers are
 * used by the closed-form M-step only. */
typedef struct lse_gauss_work {
    lse_cov_type cov;
    size_t n_comp;  /* K = n_parent */
    size_t dim;     /* d = d_child */
    size_t dim_ctx; /* d_context (lingauss), 0 for gaussian */
    size_t block;   /* most child rows per call */
    int prepared;   /* factor cache valid (prepare ran since work_new/solve) */

    /* factor cache (prepare) */
    gsl_vector *logpi; /* (K) log pi_k, 0 when there is no logw */
    gsl_vector *cnst;  /* (K) log pi_k - 1/2 log det(2 pi Sigma_k) */
    gsl_matrix *fac;   /* full: (K*d, d), tied: (d, d) lower L_k, zero
                          upper; NULL for diag and spherical */
    gsl_matrix *inv;   /* diag: (K, d) 1/l_kj; spherical: (K, 1) 1/l_k;
                          NULL for full and tied */

    /* block buffers */
    gsl_matrix *res;  /* (block, d): residuals */
    gsl_matrix *tmp;  /* (block, d): scratch */
    gsl_matrix *aug;  /* (block, d_context + 1): [x, 1] (lingauss) */
    gsl_matrix *augw; /* (block, d_context + 1): weighted [x, 1] */
    gsl_vector *rw;   /* (block): responsibility times row weight */
    gsl_matrix *dd;   /* (d, d) scratch */
    gsl_vector *colsum; /* (K) column sums of G */

    /* solve buffers */
    gsl_matrix *new_parent; /* (K, d) */
    gsl_matrix *new_chol;   /* (K or 1, chol columns) */
    gsl_matrix *new_a;      /* (K, d * d_context) lingauss */
    gsl_matrix *pool;       /* (d, d): tied pooled scatter */
    gsl_matrix *sxx;        /* (dc + 1, dc + 1) lingauss */
    gsl_matrix *delta;      /* (d, dc + 1) lingauss */
    gsl_vector *rcond_work; /* (3 (dc + 1)) lingauss */
} lse_gauss_work;

/* Columns and rows of the chol parameter for a covariance type. */
size_t lse_gauss_chol_cols(lse_cov_type cov, size_t d);
size_t lse_gauss_chol_rows(lse_cov_type cov, size_t n_comp);

/* Name of a covariance type ("full", ...), or NULL if invalid. */
const char *lse_gauss_cov_name(lse_cov_type cov);

/* Validate config (cov type) and, for the parameter at index chol_index,
 * the chol shape, plus the optional logw at LSE_GAUSS_LOGW. @p name is
 * the type's name, used in messages. */
lse_status lse_gauss_check_common(const char *name, const lse_sim_shape *shape,
                                  const void *config, size_t chol_index,
                                  char *msg, size_t msg_len);

/* Allocate a workspace (d = d_child, dc = d_context). */
lse_status lse_gauss_work_new(const lse_sim_shape *shape, const void *config,
                              lse_gauss_work **out);
void lse_gauss_work_free(void *work);

/* Fill the factor cache from logw ((K, 1) or NULL) and chol.
 * LSE_ENUMERIC for a zero diagonal entry of a factor, LSE_ENONFINITE for a
 * non-finite factor entry or logw entry, LSE_EDOM when every logw is
 * -INFINITY. */
lse_status lse_gauss_prepare(lse_gauss_work *w, const gsl_matrix *logw,
                             const gsl_matrix *chol);

/* Column k of S from the residuals r (b, d) of component k:
 * S(i, k) = cnst_k - 1/2 ||L_k^-1 r_i||^2. r is overwritten. */
lse_status lse_gauss_score(const lse_gauss_work *w, size_t k, gsl_matrix *r,
                           gsl_matrix *s);

/* Gradient through the residuals of component k. On input r (b, d) holds
 * the residuals r_i; on output row i is g_i Sigma_k^-1 r_i with
 * g = G(:, k), i.e. -dE/dr_i. dE/dchol for component k is ADDED to
 * @p gchol (the whole chol gradient matrix; may be NULL). */
lse_status lse_gauss_grad_resid(lse_gauss_work *w, size_t k,
                                const gsl_matrix *g, gsl_matrix *r,
                                gsl_matrix *gchol);

/* ADD dE/dlogw into glogw (K, 1): sum_i G_ik - pi_k sum_ik G_ik. */
void lse_gauss_grad_logw(lse_gauss_work *w, const gsl_matrix *g,
                         gsl_matrix *glogw);

/* Check that a block's kernel arguments fit the workspace: child rows
 * <= block, parent/params present, G or resp of shape (b, K). */
lse_status lse_gauss_check_args(const lse_gauss_work *w, const lse_sim_args *a,
                                const gsl_matrix *bk);

/* Statistics layout shared by both types: N (K), then the type's own
 * blocks, then the second-moment block: K * s2 doubles (s2 = d*d, d or 1)
 * or one pooled d*d block for tied. */
size_t lse_gauss_s2_size(lse_cov_type cov, size_t n_comp, size_t d);

/* ADD the second moment of the weighted residuals r (b, d) with weights
 * rw (b) to acc2 (K * s2 layout above) for component k. Uses w->tmp. */
lse_status lse_gauss_stats_s2(lse_gauss_work *w, size_t k,
                              const gsl_matrix *r, const gsl_vector *rw,
                              double *acc2);

/* rw_i = resp(i, k) * weight_i (weight may be NULL); returns sum_i rw_i. */
double lse_gauss_row_weights(const gsl_matrix *resp, size_t k,
                             const gsl_vector *weight, gsl_vector *rw);

/* Validated M-step options: NULL gives the defaults. */
lse_status lse_gauss_opts(const char *name, const lse_mstep_opts *opts,
                          lse_mstep_opts *out, char *msg, size_t msg_len);

/* Turn covariance c (d, d; a scatter already divided by the count, without
 * reg) into row k of w->new_chol for the work's cov type (full, diag,
 * spherical: c is projected; tied: call with k = 0). Adds reg_covar to the
 * diagonal first. c is overwritten. LSE_ENUMERIC with a message when the
 * matrix is not positive definite. */
lse_status lse_gauss_chol_from_cov(lse_gauss_work *w, const char *name,
                                   size_t k, gsl_matrix *c, double reg_covar,
                                   double n_k, char *msg, size_t msg_len);

/* Same for diag (v = d variances) and spherical (v = 1 variance) without
 * reg added; v is overwritten. */
lse_status lse_gauss_chol_from_var(lse_gauss_work *w, const char *name,
                                   size_t k, double *v, double reg_covar,
                                   double n_k, char *msg, size_t msg_len);

/* Write a printf-style message into msg (may be NULL) and return st. */
lse_status lse_gauss_fail(char *msg, size_t msg_len, lse_status st,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* describe(): "cov=full". */
int lse_gauss_describe(const void *config, char *buf, size_t len);

/* Emptiness rule of the M-step: component with count n_k is left alone. */
int lse_gauss_is_empty(double n_k, double min_count);

/* Fill report (may be NULL) from per-component counts; writes logw
 * (may be NULL) as log(N_k / N) for N_k > 0. */
void lse_gauss_finish_weights(const double *n, size_t n_comp,
                              double min_count, gsl_matrix *logw,
                              lse_mstep_report *report);

#endif /* LSEGRAPH_GAUSS_PRIVATE_H */
