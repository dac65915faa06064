/* emEM's degeneracy guard (mixfit.h: lse_gmm_min_eigenvalue,
 * lse_gmm_emem_threshold), used by emEM (mixfit.c) and split-and-merge EM
 * (gmm_smem.c); moved here from mixfit.c, unchanged, on the public API. */
#include <math.h>

#include <gsl/gsl_eigen.h>

#include <lsegraph/cov.h>
#include <lsegraph/core.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>

lse_status lse_gmm_min_eigenvalue(const lse_gmm *m, double *out,
                                  lse_error *err)
{
    static const char fn[] = "lse_gmm_min_eigenvalue";
    if (m == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    gsl_matrix *c = gsl_matrix_alloc(d, d);
    gsl_vector *ev = gsl_vector_alloc(d);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(d);
    lse_status st = c == NULL || ev == NULL || w == NULL
                        ? lse_error_set(err, LSE_ENOMEM, fn, "out of memory")
                        : LSE_OK;
    double lo = INFINITY;
    /* tied: one shared covariance */
    const size_t nc = lse_gmm_cov_type(m) == LSE_COV_TIED ? 1 : k;
    for (size_t i = 0; st == LSE_OK && i < nc; i++) {
        st = lse_gmm_get_covariance(m, i, c);
        if (st != LSE_OK) {
            st = lse_error_set(err, st, fn, "covariance of component %zu", i);
            break;
        }
        lse_eigen_symm(c, ev, w);
        if (gsl_vector_min(ev) < lo)
            lo = gsl_vector_min(ev);
    }
    if (st == LSE_OK)
        *out = lo;
    if (w != NULL)
        gsl_eigen_symm_free(w);
    gsl_vector_free(ev);
    gsl_matrix_free(c);
    return st;
}

lse_status lse_gmm_emem_threshold(const lse_gmm *m, const gsl_matrix *x,
                                  const lse_gmm_fit_opts *o, double factor,
                                  double *thr, lse_error *err)
{
    static const char fn[] = "lse_gmm_emem_threshold";
    if (m == NULL || x == NULL || o == NULL || thr == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *thr = 0.0;
    if (!(factor > 0.0) || !(o->reg_covar > 0.0))
        return LSE_OK;
    /* the data's own spread: the one-component fit of m's covariance
     * structure (one M-step from all rows; under o->mpi the whole data's) */
    lse_gmm *one = NULL;
    lse_status st =
        lse_gmm_cov_model(m) != LSE_COV_MODEL_NONE
            ? lse_gmm_new_model(1, lse_gmm_dim(m), lse_gmm_cov_model(m), &one,
                                err)
            : lse_gmm_new(1, lse_gmm_dim(m), lse_gmm_cov_type(m), &one, err);
    lse_gmm_fit_opts g = *o;
    g.init = LSE_GMM_INIT_KMEANSPP;
    g.n_init = 1;
    g.max_iter = 1;
    g.accel = LSE_GMM_ACCEL_NONE;
    g.progress = NULL;
    double lo = 0.0;
    if (st == LSE_OK)
        st = lse_gmm_fit(one, x, &g, err);
    if (st == LSE_OK)
        st = lse_gmm_min_eigenvalue(one, &lo, err);
    lse_gmm_free(one);
    if (st == LSE_OK && lo >= factor * o->reg_covar)
        *thr = factor * o->reg_covar;
    return st;
}
