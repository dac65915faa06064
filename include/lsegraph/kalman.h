#ifndef LSEGRAPH_KALMAN_H
#define LSEGRAPH_KALMAN_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file kalman.h
 * @brief Kalman filter and Rauch-Tung-Striebel smoother for the linear-
 * Gaussian state-space model (docs/core.md, "Kalman filter and smoother")
 *
 *     x_s ~ N(m0, P0)                       (first row s of a sequence)
 *     x_t = A_t x_{t-1} + b_t + N(0, Q_t)   (other rows)
 *     y_t = C x_t + d + N(0, R)             (observed entries of y_t)
 *
 * optionally multiplied by per-row Gaussian potentials
 * exp(-x_t' J_t x_t / 2 + h_t' x_t) (J_t symmetric positive semidefinite),
 * which is how the mode-weighted dynamics of structured variational
 * inference for switching models enter (docs/models/slds.md). The returned
 * log-likelihood is then log of the integral over x of the (unnormalized)
 * product; without potentials it is log p(y), the exact marginal
 * likelihood of the observed entries.
 *
 * Shapes: T rows, latent dimension D, observation dimension N. A, b, Q
 * have 1 row (time-invariant) or T rows (row t: the step into x_t; rows
 * of sequence starts are not used); A and Q rows hold D x D matrices in
 * row-major order. Sequences: @p seq as in lse_slds (T ids or NULL; a new
 * sequence starts at row t whenever seq[t] != seq[t-1]). Missing
 * observations: @p observed (T*N bytes, row-major, nonzero = observed; NULL
 * = all observed); masked entries of y are never read (they may hold NaN),
 * a row with no observed entry is a pure prediction step.
 *
 * Numerics: covariance-form filter with Cholesky factorizations of the
 * innovation covariance and the Joseph-form update, potentials absorbed
 * through the Cholesky factor of the filtered covariance, RTS smoother
 * with the Cholesky factor of the predicted covariance. All workspace is
 * allocated once per call, none in the time loop.
 */

/** @brief The model (all borrowed). */
typedef struct lse_kalman_model {
    const gsl_matrix *A;  /**< (1 or T, D*D) transition matrices */
    const gsl_matrix *b;  /**< (1 or T, D) offsets, or NULL (0) */
    const gsl_matrix *Q;  /**< (1 or T, D*D) SPD noise covariances */
    const gsl_matrix *C;  /**< (N, D) emission matrix */
    const gsl_vector *d;  /**< (N) emission offset, or NULL (0) */
    const gsl_matrix *R;  /**< (N, N) SPD observation noise covariance */
    const gsl_vector *m0; /**< (D) initial mean of every sequence */
    const gsl_matrix *P0; /**< (D, D) SPD initial covariance */
    const gsl_matrix *J;  /**< (T, D*D) potential precisions, or NULL */
    const gsl_matrix *h;  /**< (T, D) potential linear terms, or NULL
                             (both NULL: no potentials; h alone: J = 0) */
} lse_kalman_model;

/** @brief Outputs, caller-owned; any may be NULL (not computed). The
 *  smoother runs when mean, cov or cross is requested. */
typedef struct lse_kalman_result {
    gsl_matrix *filt_mean; /**< (T, D) E[x_t | y_1..t] */
    gsl_matrix *filt_cov;  /**< (T, D*D) Cov[x_t | y_1..t] */
    gsl_matrix *mean;      /**< (T, D) E[x_t | all y] */
    gsl_matrix *cov;       /**< (T, D*D) Cov[x_t | all y] */
    gsl_matrix *cross;     /**< (T, D*D) Cov[x_t, x_{t-1} | all y], row-
                              major (i, j) = Cov(x_t[i], x_{t-1}[j]); rows
                              of sequence starts are 0 */
} lse_kalman_result;

/**
 * @brief Filter (and smooth) the series @p y (T, N).
 * @param seq T sequence ids or NULL. @param observed T*N mask or NULL.
 * @param[out] loglik the log-likelihood (may be NULL).
 * @param res outputs (may be NULL: log-likelihood only).
 * @return LSE_OK; LSE_EFAULT (model, y or a required matrix NULL);
 * LSE_EDIM (a shape disagrees); LSE_EINVAL (T = 0, D = 0 or N = 0);
 * LSE_ENONFINITE (NaN or infinity in a parameter or an observed entry,
 * or a non-finite log-likelihood); LSE_ENUMERIC (P0 or R, an innovation
 * covariance or, when smoothing, a predicted covariance not positive
 * definite; I + P J singular); LSE_ENOMEM. Q_t is not factored: a Q_t
 * that is not positive semidefinite shows up through those checks or not
 * at all. The message is in @p err (may be NULL).
 */
LSE_API lse_status lse_kalman_smooth(const lse_kalman_model *model,
                                     const gsl_matrix *y,
                                     const unsigned char *observed,
                                     const size_t *seq, double *loglik,
                                     lse_kalman_result *res, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_KALMAN_H */
