#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>

#include "gauss-private.h"

/* Shared code of the Gaussian family: factor cache, residual scoring,
 * gradients through the residuals and the covariance part of the M-step.
 * Derivations: docs/sim-gaussian.md. */

static const lse_gaussian_config default_config = {.cov = LSE_COV_FULL};

/* M-step defaults when the caller passes no options (as
 * lse_mstep_opts_default). */
#define DEFAULT_REG_COVAR 1e-6
#define DEFAULT_MIN_COUNT 1e-10

static lse_cov_type config_cov(const void *config)
{
    const lse_gaussian_config *c =
        config != NULL ? (const lse_gaussian_config *)config : &default_config;
    return c->cov;
}

lse_status lse_gauss_fail(char *msg, size_t msg_len, lse_status st,
                          const char *fmt, ...)
{
    if (msg != NULL && msg_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_len, fmt, ap);
        va_end(ap);
    }
    return st;
}

const char *lse_gauss_cov_name(lse_cov_type cov)
{
    switch (cov) {
    case LSE_COV_FULL:
        return "full";
    case LSE_COV_DIAG:
        return "diag";
    case LSE_COV_SPHERICAL:
        return "spherical";
    case LSE_COV_TIED:
        return "tied";
    }
    return NULL;
}

size_t lse_gauss_chol_cols(lse_cov_type cov, size_t d)
{
    switch (cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED:
        return d * d;
    case LSE_COV_DIAG:
        return d;
    case LSE_COV_SPHERICAL:
        return 1;
    }
    return 0;
}

size_t lse_gauss_chol_rows(lse_cov_type cov, size_t n_comp)
{
    return cov == LSE_COV_TIED ? 1 : n_comp;
}

static const char *chol_expect(lse_cov_type cov)
{
    switch (cov) {
    case LSE_COV_FULL:
        return "K x d*d";
    case LSE_COV_TIED:
        return "1 x d*d";
    case LSE_COV_DIAG:
        return "K x d";
    case LSE_COV_SPHERICAL:
        return "K x 1";
    }
    return "?";
}

lse_status lse_gauss_check_common(const char *name, const lse_sim_shape *shape,
                                  const void *config, size_t chol_index,
                                  char *msg, size_t msg_len)
{
    if (shape == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EFAULT, "%s: NULL shape", name);
    const lse_cov_type cov = config_cov(config);
    if (lse_gauss_cov_name(cov) == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: unknown covariance type %d (expected "
                              "full, diag, spherical or tied)",
                              name, (int)cov);
    const size_t K = shape->n_parent, d = shape->d_child;
    if (K == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: no components (0 parent rows)", name);
    if (d == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: children have 0 columns", name);
    if (shape->d_parent != d)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: parents have %zu columns, children %zu "
                              "(they must match)",
                              name, shape->d_parent, d);
    if (shape->n_param <= chol_index || shape->param_rows == NULL ||
        shape->param_cols == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: expected %zu parameters, got %zu", name,
                              chol_index + 1, shape->n_param);
    const size_t wr = shape->param_rows[LSE_GAUSS_LOGW];
    const size_t wc = shape->param_cols[LSE_GAUSS_LOGW];
    if (wr != 0 && (wr != K || wc != 1))
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: logw is %zux%zu, expected K x 1 = %zux1",
                              name, wr, wc, K);
    const size_t cr = shape->param_rows[chol_index];
    const size_t cc = shape->param_cols[chol_index];
    if (cr == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: the chol parameter is required", name);
    const size_t er = lse_gauss_chol_rows(cov, K);
    const size_t ec = lse_gauss_chol_cols(cov, d);
    if (cr != er || cc != ec)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: chol is %zux%zu, expected %s = %zux%zu "
                              "(cov=%s)",
                              name, cr, cc, chol_expect(cov), er, ec,
                              lse_gauss_cov_name(cov));
    return LSE_OK;
}

void lse_gauss_work_free(void *work)
{
    lse_gauss_work *w = work;
    if (w == NULL)
        return;
    gsl_vector_free(w->logpi);
    gsl_vector_free(w->cnst);
    gsl_matrix_free(w->inv);
    gsl_matrix_free(w->minv);
    gsl_vector_free(w->center);
    gsl_matrix_free(w->off);
    gsl_matrix_free(w->zall);
    gsl_matrix_free(w->zg);
    gsl_matrix_free(w->macc);
    gsl_matrix_free(w->uacc);
    gsl_vector_free(w->ones);
    gsl_matrix_free(w->res);
    gsl_matrix_free(w->tmp);
    gsl_matrix_free(w->aug);
    gsl_matrix_free(w->augw);
    gsl_vector_free(w->rw);
    gsl_matrix_free(w->dd);
    gsl_vector_free(w->colsum);
    gsl_matrix_free(w->new_parent);
    gsl_matrix_free(w->new_chol);
    gsl_matrix_free(w->new_a);
    gsl_matrix_free(w->pool);
    gsl_matrix_free(w->sxx);
    gsl_matrix_free(w->delta);
    gsl_vector_free(w->rcond_work);
    free(w);
}

lse_status lse_gauss_work_new(const lse_sim_shape *shape, const void *config,
                              lse_gauss_work **out)
{
    if (shape == NULL || out == NULL)
        return LSE_EFAULT;
    *out = NULL;
    lse_gsl_quiet();
    const lse_cov_type cov = config_cov(config);
    if (lse_gauss_cov_name(cov) == NULL)
        return LSE_EINVAL;
    const size_t K = shape->n_parent, d = shape->d_child;
    const size_t dc = shape->d_context;
    size_t block = shape->block != 0 ? shape->block : shape->n_child;
    if (block == 0)
        block = 1;
    if (K == 0 || d == 0)
        return LSE_EDIM;
    lse_gauss_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->cov = cov;
    w->n_comp = K;
    w->dim = d;
    w->dim_ctx = dc;
    w->block = block;
    w->prepared = 0;
    int ok =
        (w->logpi = gsl_vector_calloc(K)) != NULL &&
        (w->cnst = gsl_vector_calloc(K)) != NULL &&
        (w->res = gsl_matrix_alloc(block, d)) != NULL &&
        (w->tmp = gsl_matrix_alloc(block, d)) != NULL &&
        (w->rw = gsl_vector_alloc(block)) != NULL &&
        (w->dd = gsl_matrix_calloc(d, d)) != NULL &&
        (w->colsum = gsl_vector_alloc(K)) != NULL &&
        (w->new_parent = gsl_matrix_alloc(K, d)) != NULL &&
        (w->new_chol = gsl_matrix_alloc(lse_gauss_chol_rows(cov, K),
                                        lse_gauss_chol_cols(cov, d))) != NULL;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    w->nfac = cov == LSE_COV_TIED ? 1 : K;
    size_t chunk = LSE_GAUSS_CHUNK_DOUBLES / (K * d);
    if (chunk < 8)
        chunk = 8;
    w->chunk = chunk < block ? chunk : block;
    if (ok && tri)
        ok = (w->inv = gsl_matrix_calloc(w->nfac, d)) != NULL &&
             (w->minv = gsl_matrix_calloc(d, K * d)) != NULL &&
             (w->pool = gsl_matrix_calloc(d, d)) != NULL;
    else if (ok)
        ok = (w->inv = gsl_matrix_calloc(K, cov == LSE_COV_DIAG ? d : 1)) !=
             NULL;
    if (ok && tri && dc == 0) /* the wide kernels of lse_sim_gaussian */
        ok = (w->center = gsl_vector_calloc(d)) != NULL &&
             (w->off = gsl_matrix_calloc(K, d)) != NULL &&
             (w->zall = gsl_matrix_alloc(w->chunk, K * d)) != NULL &&
             (w->zg = gsl_matrix_alloc(w->chunk, K * d)) != NULL &&
             (w->macc = gsl_matrix_alloc(w->nfac * d, d)) != NULL &&
             (w->uacc = gsl_matrix_alloc(K, d)) != NULL &&
             (w->ones = gsl_vector_alloc(w->chunk)) != NULL;
    if (ok && w->ones != NULL)
        gsl_vector_set_all(w->ones, 1.0);
    if (ok && dc > 0)
        ok = (w->aug = gsl_matrix_alloc(block, dc + 1)) != NULL &&
             (w->augw = gsl_matrix_alloc(block, dc + 1)) != NULL &&
             (w->new_a = gsl_matrix_alloc(K, d * dc)) != NULL &&
             (w->sxx = gsl_matrix_alloc(dc + 1, dc + 1)) != NULL &&
             (w->delta = gsl_matrix_alloc(d, dc + 1)) != NULL &&
             (w->rcond_work = gsl_vector_alloc(3 * (dc + 1))) != NULL;
    if (!ok) {
        lse_gauss_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

/* Factor f of a full/tied chol parameter: 1/L_jj into inv, log det Sigma
 * into *logdet, L^-T into block f of minv. */
static lse_status prepare_factor(lse_gauss_work *w, const gsl_matrix *chol,
                                 size_t f, double *logdet)
{
    const size_t d = w->dim;
    const double *row = gsl_matrix_const_ptr(chol, f, 0);
    gsl_matrix *l = w->dd;
    double ld = 0.0;
    for (size_t i = 0; i < d; i++) {
        for (size_t j = 0; j < d; j++) {
            const double v = j <= i ? row[i * d + j] : 0.0;
            if (!isfinite(v))
                return LSE_ENONFINITE;
            gsl_matrix_set(l, i, j, v);
        }
        const double lii = gsl_matrix_get(l, i, i);
        if (lii == 0.0)
            return LSE_ENUMERIC;
        gsl_matrix_set(w->inv, f, i, 1.0 / lii);
        ld += 2.0 * log(fabs(lii));
    }
    const int rc = gsl_linalg_tri_invert(CblasLower, CblasNonUnit, l);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    /* minv(i, f d + j) = (L^-1)(j, i), zero where j < i */
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(w->minv, i, f * d + j,
                           j >= i ? gsl_matrix_get(l, j, i) : 0.0);
    *logdet = ld;
    return LSE_OK;
}

lse_status lse_gauss_prepare(lse_gauss_work *w, const gsl_matrix *logw,
                             const gsl_matrix *chol, const gsl_matrix *parent)
{
    if (w == NULL || chol == NULL)
        return LSE_EFAULT;
    w->prepared = 0;
    w->has_offsets = 0;
    const size_t K = w->n_comp, d = w->dim;
    if (chol->size1 != lse_gauss_chol_rows(w->cov, K) ||
        chol->size2 != lse_gauss_chol_cols(w->cov, d))
        return LSE_EDIM;

    /* log pi_k = logw_k - logsumexp(logw); -INFINITY (log 0) is legal */
    if (logw != NULL) {
        if (logw->size1 != K || logw->size2 != 1)
            return LSE_EDIM;
        for (size_t k = 0; k < K; k++) {
            const double v = gsl_matrix_get(logw, k, 0);
            if (isnan(v) || v == INFINITY)
                return LSE_ENONFINITE;
        }
        const double lse = lse_logsumexp(logw->data, K, logw->tda, 1.0);
        if (lse == -INFINITY)
            return LSE_EDOM; /* every weight is zero */
        for (size_t k = 0; k < K; k++)
            gsl_vector_set(w->logpi, k, gsl_matrix_get(logw, k, 0) - lse);
    } else {
        gsl_vector_set_zero(w->logpi);
    }

    const double log2pi_d = (double)d * log(2.0 * M_PI);
    double logdet = 0.0; /* log det Sigma_k = 2 sum_j log |L_jj| */
    for (size_t k = 0; k < K; k++) {
        lse_status st = LSE_OK;
        switch (w->cov) {
        case LSE_COV_FULL:
            st = prepare_factor(w, chol, k, &logdet);
            break;
        case LSE_COV_TIED:
            if (k == 0) { /* one factor for every k, copied to K blocks */
                st = prepare_factor(w, chol, 0, &logdet);
                for (size_t c = 1; st == LSE_OK && c < K; c++) {
                    gsl_matrix_const_view b0 =
                        gsl_matrix_const_submatrix(w->minv, 0, 0, d, d);
                    gsl_matrix_view bc =
                        gsl_matrix_submatrix(w->minv, 0, c * d, d, d);
                    st = lse_status_from_gsl(
                        gsl_matrix_memcpy(&bc.matrix, &b0.matrix));
                }
            }
            break;
        case LSE_COV_DIAG:
        case LSE_COV_SPHERICAL: {
            const size_t nc = w->inv->size2;
            logdet = 0.0;
            for (size_t j = 0; j < nc; j++) {
                const double v = gsl_matrix_get(chol, k, j);
                if (!isfinite(v))
                    return LSE_ENONFINITE;
                if (v == 0.0)
                    return LSE_ENUMERIC;
                gsl_matrix_set(w->inv, k, j, 1.0 / v);
                logdet += 2.0 * log(fabs(v));
            }
            if (w->cov == LSE_COV_SPHERICAL)
                logdet *= (double)d;
            break;
        }
        }
        if (st != LSE_OK)
            return st;
        gsl_vector_set(w->cnst, k,
                       gsl_vector_get(w->logpi, k) - 0.5 * (log2pi_d + logdet));
    }

    /* wide kernels: center c = mean of the means, off_k = (mu_k - c) L^-T */
    if (parent != NULL && w->off != NULL) {
        if (parent->size1 != K || parent->size2 != d)
            return LSE_EDIM;
        gsl_vector_set_zero(w->center);
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < d; j++) {
                const double v = gsl_matrix_get(parent, k, j);
                if (!isfinite(v))
                    return LSE_ENONFINITE;
                *gsl_vector_ptr(w->center, j) += v / (double)K;
            }
        for (size_t k = 0; k < K; k++) {
            const size_t f = w->cov == LSE_COV_TIED ? 0 : k;
            double *o = gsl_matrix_ptr(w->off, k, 0);
            for (size_t j = 0; j < d; j++)
                o[j] = 0.0;
            for (size_t i = 0; i < d; i++) {
                const double m =
                    gsl_matrix_get(parent, k, i) - gsl_vector_get(w->center, i);
                const double *mi = gsl_matrix_const_ptr(w->minv, i, f * d);
                for (size_t j = i; j < d; j++) /* block is upper */
                    o[j] += m * mi[j];
            }
        }
        w->has_offsets = 1;
    }
    w->prepared = 1;
    return LSE_OK;
}

/* block f of minv: L_f^-T (d, d) */
static _gsl_matrix_const_view minv_block(const lse_gauss_work *w, size_t k)
{
    const size_t d = w->dim;
    return gsl_matrix_const_submatrix(
        w->minv, 0, (w->cov == LSE_COV_TIED ? 0 : k) * d, d, d);
}

lse_status lse_gauss_score(lse_gauss_work *w, size_t k, const gsl_matrix *r,
                           gsl_matrix *s)
{
    const size_t b = r->size1, d = w->dim;
    const double c = gsl_vector_get(w->cnst, k);
    switch (w->cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        /* Z = R L^-T: row i is (L^-1 r_i)' */
        const gsl_matrix_const_view mi = minv_block(w, k);
        gsl_matrix_view z = gsl_matrix_submatrix(w->tmp, 0, 0, b, d);
        const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, r,
                                      &mi.matrix, 0.0, &z.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            const double *zi = gsl_matrix_const_ptr(&z.matrix, i, 0);
            gsl_matrix_set(s, i, k, c - 0.5 * lse_gauss_sq_norm(zi, d));
        }
        break;
    }
    case LSE_COV_DIAG: {
        const double *inv = gsl_matrix_const_ptr(w->inv, k, 0);
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            gsl_matrix_set(s, i, k,
                           c - 0.5 * lse_gauss_sq_norm_scaled(x, inv, d));
        }
        break;
    }
    case LSE_COV_SPHERICAL: {
        const double inv = gsl_matrix_get(w->inv, k, 0);
        const double inv2 = inv * inv;
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            gsl_matrix_set(s, i, k, c - 0.5 * inv2 * lse_gauss_sq_norm(x, d));
        }
        break;
    }
    }
    return LSE_OK;
}

/* xc (cb, d) <- rows [r0, r0 + cb) of x minus the center */
static void centered(const lse_gauss_work *w, const gsl_matrix *x, size_t r0,
                     gsl_matrix *xc)
{
    const size_t d = w->dim;
    const double *c = w->center->data;
    const size_t cs = w->center->stride;
    for (size_t i = 0; i < xc->size1; i++) {
        const double *xi = gsl_matrix_const_ptr(x, r0 + i, 0);
        double *yi = gsl_matrix_ptr(xc, i, 0);
        for (size_t j = 0; j < d; j++)
            yi[j] = xi[j] - c[j * cs];
    }
}

lse_status lse_gauss_eval_wide(lse_gauss_work *w, const gsl_matrix *x,
                               gsl_matrix *s)
{
    if (!w->has_offsets)
        return LSE_EINTERNAL;
    const size_t b = x->size1, d = w->dim, K = w->n_comp;
    const size_t nf = w->nfac;
    const gsl_matrix_const_view mv =
        gsl_matrix_const_submatrix(w->minv, 0, 0, d, nf * d);
    const double *off = w->off->data, *cn = w->cnst->data;
    const size_t otda = w->off->tda, cs = w->cnst->stride;
    for (size_t r0 = 0; r0 < b; r0 += w->chunk) {
        const size_t cb = b - r0 < w->chunk ? b - r0 : w->chunk;
        gsl_matrix_view xc = gsl_matrix_submatrix(w->res, 0, 0, cb, d);
        gsl_matrix_view z = gsl_matrix_submatrix(w->zall, 0, 0, cb, nf * d);
        centered(w, x, r0, &xc.matrix);
        /* one GEMM for every component: Z = (X - c) [L_1^-T ... L_K^-T] */
        const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0,
                                      &xc.matrix, &mv.matrix, 0.0, &z.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < cb; i++) {
            const double *zi = gsl_matrix_const_ptr(&z.matrix, i, 0);
            double *si = gsl_matrix_ptr(s, r0 + i, 0);
            for (size_t k = 0; k < K; k++) {
                /* L_k^-1 (x - mu_k) = L_k^-1 (x - c) - L_k^-1 (mu_k - c) */
                const double *zk = zi + (nf == 1 ? 0 : k * d);
                const double *o = off + k * otda;
                si[k] = cn[k * cs] - 0.5 * lse_gauss_sq_dist(zk, o, d);
            }
        }
    }
    return LSE_OK;
}

lse_status lse_gauss_grad_wide(lse_gauss_work *w, const gsl_matrix *x,
                               const gsl_matrix *g, gsl_matrix *gchild,
                               gsl_matrix *gparent, gsl_matrix *gchol)
{
    if (!w->has_offsets)
        return LSE_EINTERNAL;
    const size_t b = x->size1, d = w->dim, K = w->n_comp;
    const size_t nf = w->nfac;
    const int tied = w->cov == LSE_COV_TIED;
    const gsl_matrix_const_view mv =
        gsl_matrix_const_submatrix(w->minv, 0, 0, d, nf * d);
    gsl_matrix_set_zero(w->macc);
    gsl_matrix_set_zero(w->uacc);
    gsl_vector_set_zero(w->colsum);
    int rc = GSL_SUCCESS;
    for (size_t r0 = 0; r0 < b; r0 += w->chunk) {
        const size_t cb = b - r0 < w->chunk ? b - r0 : w->chunk;
        gsl_matrix_view xc = gsl_matrix_submatrix(w->res, 0, 0, cb, d);
        gsl_matrix_view z = gsl_matrix_submatrix(w->zall, 0, 0, cb, K * d);
        gsl_matrix_view zg = gsl_matrix_submatrix(w->zg, 0, 0, cb, K * d);
        gsl_matrix_view zx =
            gsl_matrix_submatrix(tied ? w->tmp : w->zall, 0, 0, cb, nf * d);
        centered(w, x, r0, &xc.matrix);
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &xc.matrix,
                            &mv.matrix, 0.0, &zx.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        /* z_ik = L^-1 (x_i - mu_k) and G_ik z_ik for every k */
        const double *off = w->off->data;
        double *colsum = w->colsum->data;
        const size_t otda = w->off->tda, cstr = w->colsum->stride;
        for (size_t i = 0; i < cb; i++) {
            const double *gi = gsl_matrix_const_ptr(g, r0 + i, 0);
            const double *src = gsl_matrix_const_ptr(&zx.matrix, i, 0);
            double *zi = gsl_matrix_ptr(&z.matrix, i, 0);
            double *zgi = gsl_matrix_ptr(&zg.matrix, i, 0);
            for (size_t k = 0; k < K; k++) {
                const double *restrict o = off + k * otda;
                const double *restrict sk = src + (tied ? 0 : k * d);
                double *restrict zk = zi + k * d;
                double *restrict zgk = zgi + k * d;
                const double gik = gi[k];
                for (size_t j = 0; j < d; j++) {
                    const double t = sk[j] - o[j];
                    zk[j] = t;
                    zgk[j] = gik * t;
                }
                colsum[k * cstr] += gik;
            }
        }
        if (gparent != NULL) { /* u_k += Z_k' g_k: all k in one GEMV */
            gsl_vector_view u = gsl_vector_view_array(w->uacc->data, K * d);
            gsl_vector_view one = gsl_vector_subvector(w->ones, 0, cb);
            rc = gsl_blas_dgemv(CblasTrans, 1.0, &zg.matrix, &one.vector, 1.0,
                                &u.vector);
        }
        if (gchol != NULL)
            for (size_t k = 0; k < K && rc == GSL_SUCCESS; k++) {
                gsl_matrix_view zk =
                    gsl_matrix_submatrix(&z.matrix, 0, k * d, cb, d);
                gsl_matrix_view zgk =
                    gsl_matrix_submatrix(&zg.matrix, 0, k * d, cb, d);
                gsl_matrix_view m =
                    gsl_matrix_submatrix(w->macc, (tied ? 0 : k) * d, 0, d, d);
                rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &zgk.matrix,
                                    &zk.matrix, 1.0, &m.matrix);
            }
        if (rc == GSL_SUCCESS && gchild != NULL) {
            /* dE/dx_i = -sum_k G_ik L_k^-T z_ik: rows (G_ik z_ik)' L_k^-1 */
            gsl_matrix_view gc = gsl_matrix_submatrix(gchild, r0, 0, cb, d);
            /* tied: the K blocks of minv are copies of L^-T */
            rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, &zg.matrix,
                                w->minv, 1.0, &gc.matrix);
        }
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    /* dE/dmu_k = L_k^-T sum_i G_ik z_ik: (u_k' L_k^-1)' */
    if (gparent != NULL)
        for (size_t k = 0; k < K; k++) {
            const gsl_matrix_const_view mi = minv_block(w, k);
            const double *u = gsl_matrix_const_ptr(w->uacc, k, 0);
            double *gp = gsl_matrix_ptr(gparent, k, 0);
            for (size_t i = 0; i < d; i++) {
                const double *row = gsl_matrix_const_ptr(&mi.matrix, i, 0);
                double v = 0.0;
                for (size_t j = i; j < d; j++)
                    v += row[j] * u[j];
                gp[i] += v;
            }
        }
    /* dE/dL_f = lower(L_f^-T M_f) - (sum G) diag(1/L_f) */
    if (gchol != NULL)
        for (size_t f = 0; f < nf; f++) {
            const gsl_matrix_const_view mi = minv_block(w, f);
            gsl_matrix_view m = gsl_matrix_submatrix(w->macc, f * d, 0, d, d);
            rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &mi.matrix,
                                &m.matrix, 0.0, w->dd);
            if (rc != GSL_SUCCESS)
                return lse_status_from_gsl(rc);
            double gsum = 0.0;
            for (size_t k = 0; k < K; k++)
                if (tied || k == f)
                    gsum += gsl_vector_get(w->colsum, k);
            double *out = gsl_matrix_ptr(gchol, f, 0);
            for (size_t i = 0; i < d; i++) {
                const double *t = gsl_matrix_const_ptr(w->dd, i, 0);
                for (size_t j = 0; j < i; j++)
                    out[i * d + j] += t[j];
                out[i * d + i] += t[i] - gsum * gsl_matrix_get(w->inv, f, i);
            }
        }
    return LSE_OK;
}

lse_status lse_gauss_grad_resid(lse_gauss_work *w, size_t k,
                                const gsl_matrix *g, gsl_matrix *r,
                                gsl_matrix *gchol)
{
    const size_t b = r->size1, d = w->dim;
    double gsum = 0.0;
    for (size_t i = 0; i < b; i++)
        gsum += gsl_matrix_get(g, i, k);
    switch (w->cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        const gsl_matrix_const_view mi = minv_block(w, k);
        gsl_matrix_view z = gsl_matrix_submatrix(w->tmp, 0, 0, b, d);
        /* Z = R L^-T (rows z_i = L^-1 r_i), then R <- Z L^-1 (rows
         * L^-T z_i = Sigma^-1 r_i), scaled by g_i */
        int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, r, &mi.matrix,
                                0.0, &z.matrix);
        if (rc == GSL_SUCCESS)
            rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &z.matrix,
                                &mi.matrix, 0.0, r);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            gsl_vector_view row = gsl_matrix_row(r, i);
            gsl_vector_scale(&row.vector, gsl_matrix_get(g, i, k));
        }
        if (gchol == NULL)
            break;
        /* dE/dL = lower(sum_i g_i (Sigma^-1 r_i) z_i') - gsum diag(1/L) */
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, r, &z.matrix, 0.0,
                            w->dd);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        const size_t f = w->cov == LSE_COV_TIED ? 0 : k;
        double *out = gsl_matrix_ptr(gchol, f, 0);
        for (size_t i = 0; i < d; i++) {
            const double *m = gsl_matrix_const_ptr(w->dd, i, 0);
            for (size_t j = 0; j < i; j++)
                out[i * d + j] += m[j];
            out[i * d + i] += m[i] - gsum * gsl_matrix_get(w->inv, f, i);
        }
        break;
    }
    case LSE_COV_DIAG: {
        /* dsim/dl_j = (r_j^2 / l_j^2 - 1) / l_j */
        const double *inv = gsl_matrix_const_ptr(w->inv, k, 0);
        double *acc = gsl_matrix_ptr(w->dd, 0, 0); /* d entries */
        for (size_t j = 0; j < d; j++)
            acc[j] = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double gi = gsl_matrix_get(g, i, k);
            double *x = gsl_matrix_ptr(r, i, 0);
            for (size_t j = 0; j < d; j++) {
                const double gr = gi * x[j];
                acc[j] += gr * x[j];
                x[j] = gr * inv[j] * inv[j];
            }
        }
        if (gchol != NULL) {
            double *out = gsl_matrix_ptr(gchol, k, 0);
            for (size_t j = 0; j < d; j++)
                out[j] += acc[j] * inv[j] * inv[j] * inv[j] - gsum * inv[j];
        }
        break;
    }
    case LSE_COV_SPHERICAL: {
        /* dsim/dl = ||r||^2 / l^3 - d / l */
        const double inv = gsl_matrix_get(w->inv, k, 0);
        const double inv2 = inv * inv;
        double acc = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double gi = gsl_matrix_get(g, i, k);
            double *x = gsl_matrix_ptr(r, i, 0);
            double q = 0.0;
            for (size_t j = 0; j < d; j++) {
                q += x[j] * x[j];
                x[j] *= gi * inv2;
            }
            acc += gi * q;
        }
        if (gchol != NULL)
            *gsl_matrix_ptr(gchol, k, 0) +=
                acc * inv2 * inv - gsum * (double)d * inv;
        break;
    }
    }
    return LSE_OK;
}

void lse_gauss_grad_logw(lse_gauss_work *w, const gsl_matrix *g,
                         gsl_matrix *glogw)
{
    const size_t K = w->n_comp, b = g->size1;
    gsl_vector_set_zero(w->colsum);
    double *cs = w->colsum->data;
    const size_t stride = w->colsum->stride;
    for (size_t i = 0; i < b; i++) {
        const double *row = gsl_matrix_const_ptr(g, i, 0);
        for (size_t k = 0; k < K; k++)
            cs[k * stride] += row[k];
    }
    double total = 0.0;
    for (size_t k = 0; k < K; k++)
        total += cs[k * stride];
    for (size_t k = 0; k < K; k++) {
        const double pi = exp(gsl_vector_get(w->logpi, k));
        *gsl_matrix_ptr(glogw, k, 0) += cs[k * stride] - pi * total;
    }
}

lse_status lse_gauss_check_args(const lse_gauss_work *w, const lse_sim_args *a,
                                const gsl_matrix *bk)
{
    if (w == NULL || a == NULL || a->child == NULL || a->parent == NULL ||
        a->param == NULL)
        return LSE_EFAULT;
    const size_t b = a->child->size1;
    if (b > w->block || a->child->size2 != w->dim ||
        a->parent->size1 != w->n_comp || a->parent->size2 != w->dim)
        return LSE_EDIM;
    if (bk != NULL && (bk->size1 != b || bk->size2 != w->n_comp))
        return LSE_EDIM;
    if (w->dim_ctx > 0) {
        if (a->context == NULL)
            return LSE_EFAULT;
        if (a->context->size1 != b || a->context->size2 != w->dim_ctx)
            return LSE_EDIM;
    }
    return LSE_OK;
}

size_t lse_gauss_s2_size(lse_cov_type cov, size_t n_comp, size_t d)
{
    switch (cov) {
    case LSE_COV_FULL:
        return n_comp * d * d;
    case LSE_COV_TIED:
        return d * d;
    case LSE_COV_DIAG:
        return n_comp * d;
    case LSE_COV_SPHERICAL:
        return n_comp;
    }
    return 0;
}

double lse_gauss_row_weights(const gsl_matrix *resp, size_t k,
                             const gsl_vector *weight, gsl_vector *rw)
{
    double sum = 0.0;
    for (size_t i = 0; i < resp->size1; i++) {
        double v = gsl_matrix_get(resp, i, k);
        if (weight != NULL)
            v *= gsl_vector_get(weight, i);
        gsl_vector_set(rw, i, v);
        sum += v;
    }
    return sum;
}

lse_status lse_gauss_stats_s2(lse_gauss_work *w, size_t k, const gsl_matrix *r,
                              const gsl_vector *rw, double *acc2)
{
    const size_t b = r->size1, d = w->dim;
    switch (w->cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        /* s2 += R' diag(rw) R */
        gsl_matrix_view t = gsl_matrix_submatrix(w->tmp, 0, 0, b, d);
        int rc = gsl_matrix_memcpy(&t.matrix, r);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        for (size_t i = 0; i < b; i++) {
            gsl_vector_view row = gsl_matrix_row(&t.matrix, i);
            gsl_vector_scale(&row.vector, gsl_vector_get(rw, i));
        }
        gsl_matrix_view c = gsl_matrix_view_array(
            acc2 + (w->cov == LSE_COV_TIED ? 0 : k * d * d), d, d);
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, r, &t.matrix, 1.0,
                            &c.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        break;
    }
    case LSE_COV_DIAG: {
        double *c = acc2 + k * d;
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            const double ri = gsl_vector_get(rw, i);
            for (size_t j = 0; j < d; j++)
                c[j] += ri * x[j] * x[j];
        }
        break;
    }
    case LSE_COV_SPHERICAL: {
        double q = 0.0;
        for (size_t i = 0; i < b; i++) {
            const double *x = gsl_matrix_const_ptr(r, i, 0);
            double qi = 0.0;
            for (size_t j = 0; j < d; j++)
                qi += x[j] * x[j];
            q += gsl_vector_get(rw, i) * qi;
        }
        acc2[k] += q;
        break;
    }
    }
    return LSE_OK;
}

lse_status lse_gauss_opts(const char *name, const lse_mstep_opts *opts,
                          lse_mstep_opts *out, char *msg, size_t msg_len)
{
    lse_mstep_opts o = {.reg_covar = DEFAULT_REG_COVAR,
                        .min_count = DEFAULT_MIN_COUNT};
    if (opts != NULL)
        o = *opts;
    if (!(o.reg_covar >= 0.0) || !isfinite(o.reg_covar))
        return lse_gauss_fail(msg, msg_len, LSE_EDOM,
                              "%s: reg_covar must be finite and >= 0 (got %g)",
                              name, o.reg_covar);
    if (!(o.min_count >= 0.0) || !isfinite(o.min_count))
        return lse_gauss_fail(msg, msg_len, LSE_EDOM,
                              "%s: min_count must be finite and >= 0 (got %g)",
                              name, o.min_count);
    *out = o;
    return LSE_OK;
}

static lse_status not_pd(const char *name, size_t k, int tied, double n_k,
                         double reg_covar, char *msg, size_t msg_len)
{
    if (tied)
        return lse_gauss_fail(msg, msg_len, LSE_ENUMERIC,
                              "%s: the tied covariance is not positive "
                              "definite; use a larger reg_covar (now %g)",
                              name, reg_covar);
    return lse_gauss_fail(msg, msg_len, LSE_ENUMERIC,
                          "%s: component %zu: covariance is not positive "
                          "definite (N_k = %g); use a larger reg_covar "
                          "(now %g)",
                          name, k, n_k, reg_covar);
}

lse_status lse_gauss_chol_from_cov(lse_gauss_work *w, const char *name,
                                   size_t k, gsl_matrix *c, double reg_covar,
                                   double n_k, char *msg, size_t msg_len)
{
    const size_t d = w->dim;
    for (size_t i = 0; i < d; i++)
        *gsl_matrix_ptr(c, i, i) += reg_covar;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++)
            if (!isfinite(gsl_matrix_get(c, i, j)))
                return not_pd(name, k, w->cov == LSE_COV_TIED, n_k, reg_covar,
                              msg, msg_len);
    const int rc = gsl_linalg_cholesky_decomp1(c);
    if (rc == GSL_EDOM)
        return not_pd(name, k, w->cov == LSE_COV_TIED, n_k, reg_covar, msg,
                      msg_len);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc),
                              "%s: Cholesky factorization failed: %s", name,
                              gsl_strerror(rc));
    double *out = gsl_matrix_ptr(w->new_chol, k, 0);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            out[i * d + j] = j <= i ? gsl_matrix_get(c, i, j) : 0.0;
    return LSE_OK;
}

lse_status lse_gauss_chol_from_var(lse_gauss_work *w, const char *name,
                                   size_t k, double *v, double reg_covar,
                                   double n_k, char *msg, size_t msg_len)
{
    const size_t n = w->cov == LSE_COV_DIAG ? w->dim : 1;
    for (size_t j = 0; j < n; j++) {
        const double var = v[j] + reg_covar;
        if (!(var > 0.0) || !isfinite(var))
            return not_pd(name, k, 0, n_k, reg_covar, msg, msg_len);
        gsl_matrix_set(w->new_chol, k, j, sqrt(var));
    }
    return LSE_OK;
}

int lse_gauss_describe(const void *config, char *buf, size_t len)
{
    const char *name = lse_gauss_cov_name(config_cov(config));
    return snprintf(buf, len, "cov=%s", name != NULL ? name : "?");
}

int lse_gauss_is_empty(double n_k, double min_count)
{
    return !(n_k >= min_count) || !(n_k > 0.0);
}

void lse_gauss_finish_weights(const double *n, size_t n_comp, double min_count,
                              gsl_matrix *logw, lse_mstep_report *report)
{
    double total = 0.0;
    for (size_t k = 0; k < n_comp; k++)
        total += n[k];
    size_t n_empty = 0;
    for (size_t k = 0; k < n_comp; k++) {
        const int empty = lse_gauss_is_empty(n[k], min_count);
        n_empty += (size_t)empty;
        if (report != NULL && report->empty != NULL)
            report->empty[k] = (unsigned char)empty;
        if (logw != NULL && n[k] > 0.0)
            gsl_matrix_set(logw, k, 0, log(n[k] / total));
    }
    if (report != NULL) {
        report->n_empty = n_empty;
        report->norm_before = 0.0;
        report->norm_after = 0.0;
    }
}
