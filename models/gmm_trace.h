#ifndef LSEGRAPH_GMM_TRACE_H
#define LSEGRAPH_GMM_TRACE_H

#include <lsegraph/lsegraph.h>

/* tr(Sigma^-1) for the reg_covar bound of lse_gmm_fit (models/gmm_fit.c,
 * reg_bound); never installed. */

/* The largest d of a full/tied factor these traces take (stack vectors). */
#define LSE_GMM_TRACE_MAXD 256

/* ||L^-1||_F^2 of the row-major lower triangular L (d, d), d <=
 * LSE_GMM_TRACE_MAXD: the bits of the column-by-column forward
 * substitution (L y_j = e_j, s -= l_im y_m for m = j .. i - 1 in order,
 * y_i = s / l_ii) with the squares summed column by column. */
double lse_gmm_frob_inv(size_t d, const double *l);

/* tr[f] = tr(Sigma_f^-1) for every row f of the factors chol in layout
 * cov (d dimensions; full/tied d <= LSE_GMM_TRACE_MAXD), in parallel over
 * f when the factors are full and large enough for it: each trace is
 * computed alone, the same bits for any thread count. */
void lse_gmm_traces(lse_cov_type cov, size_t d, const gsl_matrix *chol,
                    double *tr);

#endif
