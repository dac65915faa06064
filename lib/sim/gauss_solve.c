#include <math.h>

#include <gsl/gsl_errno.h>

#include "gauss_solve-private.h"
#include "../rows-private.h"

/* Shared pieces of the gaussian and lingauss M-steps and gradients
 * (declarations and contracts in gauss_solve-private.h). */

lse_status lse_gauss_solve_shape_fail(const char *name, char *msg,
                                      size_t msg_len)
{
    return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                          "%s: solve outputs do not match the term's "
                          "shapes",
                          name);
}

lse_status lse_gauss_solve_begin(const lse_sim_args *a, const double *acc,
                                 gsl_matrix *parent, gsl_matrix *const *param,
                                 size_t p_chol, size_t p_logw, int more_null,
                                 const char *name, char *msg, size_t msg_len)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    if (w == NULL || a->parent == NULL || a->param == NULL || acc == NULL ||
        parent == NULL || param == NULL || param[p_chol] == NULL ||
        a->param[p_chol] == NULL || more_null)
        return lse_gauss_fail(msg, msg_len, LSE_EFAULT,
                              "%s: NULL argument to solve", name);
    lse_gsl_quiet();
    const size_t d = w->dim, K = w->n_comp;
    const gsl_matrix *chol = a->param[p_chol];
    if (parent->size1 != K || parent->size2 != d || a->parent->size1 != K ||
        a->parent->size2 != d || param[p_chol]->size1 != chol->size1 ||
        param[p_chol]->size2 != chol->size2 ||
        chol->size1 != w->new_chol->size1 ||
        chol->size2 != w->new_chol->size2 ||
        (param[p_logw] != NULL &&
         (param[p_logw]->size1 != K || param[p_logw]->size2 != 1)))
        return lse_gauss_solve_shape_fail(name, msg, msg_len);
    return LSE_OK;
}

lse_status lse_gauss_check_counts(const char *name, const double *acc,
                                  size_t n_acc, size_t K, double *total,
                                  char *msg, size_t msg_len)
{
    for (size_t i = 0; i < n_acc; i++)
        if (!isfinite(acc[i]))
            return lse_gauss_fail(msg, msg_len, LSE_ENONFINITE,
                                  "%s: statistic %zu is not finite", name, i);
    double sum = 0.0;
    for (size_t k = 0; k < K; k++) {
        if (acc[k] < 0.0)
            return lse_gauss_fail(msg, msg_len, LSE_EDOM,
                                  "%s: component %zu has negative count %g",
                                  name, k, acc[k]);
        sum += acc[k];
    }
    if (!(sum > 0.0))
        return lse_gauss_fail(msg, msg_len, LSE_EDOM,
                              "%s: total responsibility is 0", name);
    *total = sum;
    return LSE_OK;
}

lse_status lse_gauss_solve_pooled(lse_gauss_work *w, const char *name,
                                  double total, double reg_covar, char *msg,
                                  size_t msg_len)
{
    const size_t d = w->dim;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) {
            const double v = 0.5 *
                             (gsl_matrix_get(w->pool, i, j) +
                              gsl_matrix_get(w->pool, j, i)) /
                             total;
            gsl_matrix_set(w->dd, i, j, v);
            gsl_matrix_set(w->dd, j, i, v);
        }
    return lse_gauss_chol_from_cov(w, name, 0, w->dd, reg_covar, total, msg,
                                   msg_len);
}

lse_status lse_gauss_solve_commit(lse_gauss_work *w, const char *name,
                                  const double *acc, double min_count,
                                  gsl_matrix *parent, gsl_matrix *chol,
                                  gsl_matrix *a, gsl_matrix *logw,
                                  lse_mstep_report *report, char *msg,
                                  size_t msg_len)
{
    int rc = lse_copy_rows_checked(parent, w->new_parent);
    if (rc == GSL_SUCCESS && a != NULL)
        rc = lse_copy_rows_checked(a, w->new_a);
    if (rc == GSL_SUCCESS)
        rc = lse_copy_rows_checked(chol, w->new_chol);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc), "%s: %s",
                              name, gsl_strerror(rc));
    lse_gauss_finish_weights(acc, w->n_comp, min_count, logw, report);
    w->prepared = 0; /* the factor cache is stale now */
    return LSE_OK;
}

lse_status lse_gauss_grad_logw_tail(lse_gauss_work *w, const gsl_matrix *logw,
                                    const gsl_matrix *g, gsl_matrix *glogw)
{
    if (glogw != NULL && logw != NULL) {
        if (glogw->size1 != w->n_comp || glogw->size2 != 1)
            return LSE_EDIM;
        lse_gauss_grad_logw(w, g, glogw);
    }
    return LSE_OK;
}
