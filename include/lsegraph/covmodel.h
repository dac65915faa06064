#ifndef LSEGRAPH_COVMODEL_H
#define LSEGRAPH_COVMODEL_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>
#include <lsegraph/sim.h>
#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file covmodel.h
 * @brief mclust's parsimonious covariance models (lib/covmodel.c): names,
 * the chol layout each one uses, and the free-parameter counts of BIC
 * exactly as mclust counts them (nVarParams, nMclustParams). The
 * constrained M-steps are those of lse_sim_gaussian with
 * lse_gaussian_config.model set (docs/sim-gaussian.md, section 6).
 */

/** @brief "EII" ... "VVV" (mclust's spelling), or NULL for NONE or a bad
 *  value. */
LSE_API const char *lse_cov_model_name(lse_cov_model m);

/** @brief Parse one of the 14 names (any case) or scikit-learn's four
 *  aliases: full = VVV, diag = VVI, spherical = VII, tied = EEE.
 *  @return LSE_OK, LSE_EFAULT, or LSE_EINVAL for an unknown name. */
LSE_API lse_status lse_cov_model_parse(const char *name, lse_cov_model *out);

/** @brief The chol layout the model's covariances are stored in: EII, VII
 *  spherical; EEI, VEI, EVI, VVI diag; EEE tied; the rest full. A bad
 *  value (or NONE) gives (lse_cov_type)-1. */
LSE_API lse_cov_type lse_cov_model_layout(lse_cov_model m);

/** @brief The similarity configuration of model @p m: {layout, m}. */
LSE_API lse_gaussian_config lse_cov_model_config(lse_cov_model m);

/** @brief Free covariance parameters of @p m for K components in d
 *  dimensions, mclust's nVarParams (e.g. VEV: K + (d - 1) + K d(d-1)/2);
 *  0 for a bad value. */
LSE_API size_t lse_cov_model_n_cov_params(lse_cov_model m, size_t k, size_t d);

/** @brief All free parameters of the mixture, mclust's nMclustParams
 *  without noise and with free proportions: covariances + K d means +
 *  K - 1 weights. */
LSE_API size_t lse_cov_model_n_params(lse_cov_model m, size_t k, size_t d);

/** @brief BIC in mclust's convention, 2 loglik - n_params log n (larger is
 *  better; scikit-learn's bic() is its negative). */
LSE_API double lse_cov_model_bic(lse_cov_model m, size_t k, size_t d, size_t n,
                                 double loglik);

#ifdef __cplusplus
}
#endif

#endif /* LSEGRAPH_COVMODEL_H */
