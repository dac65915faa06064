#ifndef LSEGRAPH_ENERGY_H
#define LSEGRAPH_ENERGY_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief (1/beta) log sum_i exp(beta x[i*stride]), computed with the max
 *  shifted out. Returns -INFINITY for n == 0 or when every x is -INFINITY
 *  (log 0); +INFINITY or NaN inputs propagate. @p beta must be > 0. */
LSE_API double lse_logsumexp(const double *x, size_t n, size_t stride,
                             double beta);

/** @brief p[i*stride] = softmax(beta x)_i from the same shift as
 *  lse_logsumexp; writes the log-sum-exp to @p lse if non-NULL.
 *  When every x is -INFINITY (or n == 0) p is all zero and *lse is
 *  -INFINITY: the row "contributes nothing".
 *  @return LSE_OK; LSE_EFAULT for NULL x/p with n > 0; LSE_EDOM for
 *  beta <= 0; LSE_ENONFINITE if an x is NaN or +INFINITY. */
LSE_API lse_status lse_softmax(const double *x, size_t n, size_t stride,
                               double beta, double *p, double *lse);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_ENERGY_H */
