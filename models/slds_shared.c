#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include <lsegraph/lsegraph.h>

#include "slds-private.h"

/*
 * The M-step of the dynamics when the modes share some of their parts
 * (lse_slds_config.shared): the intercepts b_k, the lag matrices A_k or
 * the regressor coefficients B_k are one value for every mode. With
 * z~_t = [1; x_{t-1}; ...; x_{t-L}; u_t] (q = 1 + dL + p columns) and
 * mode k's coefficients C_k = [b_k A_k B_k] (d x q), the expected
 * complete-data log-likelihood is, up to constants,
 *   -1/2 sum_k sum_t r_tk (y_t - C_k z~_t)' W_k (y_t - C_k z~_t),
 * W_k = Sigma_k^-1. Given the covariances it is a quadratic in the free
 * coefficients (the shared columns once, the switching ones per mode):
 * with S_k = sum_t r_tk z~ z~' and Y_k = sum_t r_tk y z~', its normal
 * equations are sum_k (S_k (x) W_k) restricted to the free entries, right
 * side sum_k vec(W_k Y_k) (vec over (column, row)). The covariances then
 * follow from the residuals about the new coefficients as in the
 * unconstrained M-step (per mode; tied: pooled over the modes). Each of
 * the two steps maximizes the expected log-likelihood given the other,
 * so EM stays monotone (an ECM step, Meng and Rubin 1993). When nothing
 * is shared it is the per-mode weighted least squares of lse_sim_lingauss.
 */

/* Column c of z~ (0: intercept, 1..dL: lags, then the regressors) is
 * shared by the modes. */
static int col_shared(const lse_slds *m, size_t c)
{
    const size_t dl = m->d * m->L;
    if (c == 0)
        return (m->shared & LSE_SLDS_SHARE_INTERCEPT) != 0u;
    if (c <= dl)
        return (m->shared & LSE_SLDS_SHARE_AR) != 0u;
    return (m->shared & LSE_SLDS_SHARE_EXOG) != 0u;
}

typedef struct shared_ws {
    size_t q, ns, nw, nu; /* columns; shared, switching ones; unknowns */
    size_t *ord;          /* (q) ordinal of column c among its kind */
    gsl_matrix *S, *Y, *W, *G, *C;
    gsl_vector *h, *zt, *rw;
} shared_ws;

static void ws_free(shared_ws *w)
{
    free(w->ord);
    gsl_matrix_free(w->S);
    gsl_matrix_free(w->Y);
    gsl_matrix_free(w->W);
    gsl_matrix_free(w->G);
    gsl_matrix_free(w->C);
    gsl_vector_free(w->h);
    gsl_vector_free(w->zt);
    gsl_vector_free(w->rw);
}

/* Index of coefficient (row i, column c) of mode k among the unknowns. */
static size_t unk(const lse_slds *m, const shared_ws *w, size_t k, size_t c,
                  size_t i)
{
    if (col_shared(m, c))
        return w->ord[c] * m->d + i;
    return w->ns * m->d + (k * w->nw + w->ord[c]) * m->d + i;
}

/* z~ of step t into w->zt. */
static void ztilde(const gsl_matrix *z, size_t t, gsl_vector *zt)
{
    gsl_vector_set(zt, 0, 1.0);
    for (size_t c = 0; c < z->size2; c++)
        gsl_vector_set(zt, c + 1, gsl_matrix_get(z, t, c));
}

/* The covariances of prev (chol layout) as a model's: Sigma_k into *out
 * for mode k, through a scratch model sharing m's configuration. */
static lse_status scratch_model(const lse_slds *m, const gsl_matrix *prev,
                                lse_slds **out)
{
    *out = slds_model_alloc(m->K, m->d, m->L, m->p, m->markov, m->cov);
    if (*out == NULL)
        return LSE_ENOMEM;
    gsl_matrix_memcpy((*out)->chol, prev);
    return LSE_OK;
}

/* Normal equations of the coefficients given the covariances of sc. */
static lse_status normal_equations(const lse_slds *m, const sgraph *sg,
                                   const gsl_matrix *resp, lse_slds *sc,
                                   shared_ws *w)
{
    const size_t K = m->K, d = m->d, q = w->q, n = resp->size1;
    const gsl_matrix *y = lse_node_value(sg->x), *z = lse_node_value(sg->z);
    gsl_matrix_set_zero(w->G);
    gsl_vector_set_zero(w->h);
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_set_zero(w->S);
        gsl_matrix_set_zero(w->Y);
        for (size_t t = 0; t < n; t++) {
            const double r = gsl_matrix_get(resp, t, k);
            if (r == 0.0)
                continue;
            ztilde(z, t, w->zt);
            gsl_blas_dsyr(CblasLower, r, w->zt, w->S);
            for (size_t i = 0; i < d; i++)
                for (size_t c = 0; c < q; c++)
                    *gsl_matrix_ptr(w->Y, i, c) +=
                        r * gsl_matrix_get(y, t, i) * gsl_vector_get(w->zt, c);
        }
        for (size_t a = 0; a < q; a++)
            for (size_t b = a + 1; b < q; b++)
                gsl_matrix_set(w->S, a, b, gsl_matrix_get(w->S, b, a));
        /* W_k = Sigma_k^-1 */
        if (lse_slds_get_cov(sc, k, w->W) != LSE_OK ||
            gsl_linalg_cholesky_decomp1(w->W) != GSL_SUCCESS ||
            gsl_linalg_cholesky_invert(w->W) != GSL_SUCCESS)
            return LSE_ENUMERIC;
        for (size_t c1 = 0; c1 < q; c1++)
            for (size_t i1 = 0; i1 < d; i1++) {
                const size_t u1 = unk(m, w, k, c1, i1);
                double rhs = 0.0;
                for (size_t i2 = 0; i2 < d; i2++)
                    rhs += gsl_matrix_get(w->W, i1, i2) *
                           gsl_matrix_get(w->Y, i2, c1);
                *gsl_vector_ptr(w->h, u1) += rhs;
                for (size_t c2 = 0; c2 < q; c2++)
                    for (size_t i2 = 0; i2 < d; i2++)
                        *gsl_matrix_ptr(w->G, u1, unk(m, w, k, c2, i2)) +=
                            gsl_matrix_get(w->S, c1, c2) *
                            gsl_matrix_get(w->W, i1, i2);
            }
    }
    return LSE_OK;
}

/* The covariances about coefficients C (K d, q; mode k in rows k d..)
 * into sc by the covariance type, reg_covar on the diagonal. */
static lse_status residual_covariances(const lse_slds *m, const sgraph *sg,
                                       const gsl_matrix *resp,
                                       const gsl_matrix *C, double reg,
                                       lse_slds *sc, shared_ws *w)
{
    const size_t K = m->K, d = m->d, n = resp->size1;
    const gsl_matrix *y = lse_node_value(sg->x), *z = lse_node_value(sg->z);
    gsl_matrix *V = gsl_matrix_calloc(d, d), *pool = gsl_matrix_calloc(d, d);
    gsl_vector *e = gsl_vector_alloc(d);
    lse_status st = V && pool && e ? LSE_OK : LSE_ENOMEM;
    double total = 0.0;
    for (size_t k = 0; k < K && st == LSE_OK; k++) {
        gsl_matrix_set_zero(V);
        double nk = 0.0;
        const gsl_matrix_const_view ck =
            gsl_matrix_const_submatrix(C, k * d, 0, d, w->q);
        for (size_t t = 0; t < n; t++) {
            const double r = gsl_matrix_get(resp, t, k);
            if (r == 0.0)
                continue;
            nk += r;
            ztilde(z, t, w->zt);
            for (size_t i = 0; i < d; i++)
                gsl_vector_set(e, i, gsl_matrix_get(y, t, i));
            gsl_blas_dgemv(CblasNoTrans, -1.0, &ck.matrix, w->zt, 1.0, e);
            gsl_blas_dsyr(CblasLower, r, e, V);
        }
        for (size_t i = 0; i < d; i++)
            for (size_t j = i + 1; j < d; j++)
                gsl_matrix_set(V, i, j, gsl_matrix_get(V, j, i));
        total += nk;
        if (m->cov == LSE_COV_TIED) {
            gsl_matrix_add(pool, V);
            continue;
        }
        if (!(nk > 0.0)) {
            st = LSE_ENUMERIC;
            break;
        }
        gsl_matrix_scale(V, 1.0 / nk);
        if (m->cov != LSE_COV_FULL)
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++)
                    if (i != j)
                        gsl_matrix_set(V, i, j, 0.0);
        if (m->cov == LSE_COV_SPHERICAL) {
            double tr = 0.0;
            for (size_t i = 0; i < d; i++)
                tr += gsl_matrix_get(V, i, i);
            for (size_t i = 0; i < d; i++)
                gsl_matrix_set(V, i, i, tr / (double)d);
        }
        for (size_t i = 0; i < d; i++)
            *gsl_matrix_ptr(V, i, i) += reg;
        st = lse_slds_set_cov(sc, k, V, NULL);
    }
    if (st == LSE_OK && m->cov == LSE_COV_TIED) {
        gsl_matrix_scale(pool, 1.0 / total);
        for (size_t i = 0; i < d; i++)
            *gsl_matrix_ptr(pool, i, i) += reg;
        st = lse_slds_set_cov(sc, 0, pool, NULL);
    }
    gsl_matrix_free(V);
    gsl_matrix_free(pool);
    gsl_vector_free(e);
    return st;
}

lse_status slds_shared_mstep(const lse_slds *m, sgraph *sg,
                             const gsl_matrix *resp, gsl_matrix *prev,
                             double reg_covar, const char *fn, lse_error *err)
{
    const size_t K = m->K, d = m->d, dc = d * m->L + m->p;
    shared_ws w;
    memset(&w, 0, sizeof w);
    w.q = 1 + dc;
    w.ord = malloc(w.q * sizeof *w.ord);
    for (size_t c = 0; w.ord != NULL && c < w.q; c++)
        w.ord[c] = col_shared(m, c) ? w.ns++ : w.nw++;
    w.nu = d * (w.ns + K * w.nw);
    w.S = gsl_matrix_alloc(w.q, w.q);
    w.Y = gsl_matrix_alloc(d, w.q);
    w.W = gsl_matrix_alloc(d, d);
    w.G = gsl_matrix_alloc(w.nu, w.nu);
    w.C = gsl_matrix_alloc(K * d, w.q);
    w.h = gsl_vector_alloc(w.nu);
    w.zt = gsl_vector_alloc(w.q);
    w.rw = gsl_vector_alloc(3 * w.nu);
    lse_slds *sc = NULL;
    lse_status st = w.ord && w.S && w.Y && w.W && w.G && w.C && w.h && w.zt &&
                            w.rw
                        ? scratch_model(m, prev, &sc)
                        : LSE_ENOMEM;
    if (st == LSE_ENOMEM) {
        ws_free(&w);
        return lse_error_set(err, st, fn, "out of memory");
    }
    st = normal_equations(m, sg, resp, sc, &w);
    double rcond = 0.0;
    if (st == LSE_OK &&
        (gsl_linalg_cholesky_decomp1(w.G) != GSL_SUCCESS ||
         gsl_linalg_cholesky_rcond(w.G, &rcond, w.rw) != GSL_SUCCESS ||
         !(rcond >= DBL_EPSILON) ||
         gsl_linalg_cholesky_svx(w.G, w.h) != GSL_SUCCESS))
        st = LSE_ENUMERIC;
    if (st != LSE_OK) {
        lse_slds_free(sc);
        ws_free(&w);
        return lse_error_set(err, st, fn,
                             "M-step of the shared parts: the weighted normal "
                             "equations are singular (rcond %g): collinear "
                             "regressors or a mode without steps",
                             rcond);
    }
    for (size_t k = 0; k < K; k++)
        for (size_t c = 0; c < w.q; c++)
            for (size_t i = 0; i < d; i++)
                gsl_matrix_set(w.C, k * d + i, c,
                               gsl_vector_get(w.h, unk(m, &w, k, c, i)));
    st = residual_covariances(m, sg, resp, w.C, reg_covar, sc, &w);
    if (st != LSE_OK) {
        lse_slds_free(sc);
        ws_free(&w);
        return lse_error_set(err, st, fn,
                             "M-step of the shared parts: a mode's residual "
                             "covariance is not positive definite (%s)",
                             lse_strerror(st));
    }
    gsl_matrix *b = lse_node_value(sg->b), *a = lse_node_value(sg->a);
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < d; i++) {
            gsl_matrix_set(b, k, i, gsl_matrix_get(w.C, k * d + i, 0));
            for (size_t c = 1; c < w.q; c++)
                gsl_matrix_set(a, k, i * dc + c - 1,
                               gsl_matrix_get(w.C, k * d + i, c));
        }
    gsl_matrix_memcpy(lse_node_value(sg->chol), sc->chol);
    gsl_matrix_memcpy(prev, sc->chol);
    lse_slds_free(sc);
    ws_free(&w);
    return LSE_OK;
}
