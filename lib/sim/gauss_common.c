#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>

#include "gauss-fused-private.h"
#include "gauss-private.h"
#include "sim-size-private.h"
#include "kernels-private.h"
#include "../threads-private.h"
#include "../linalg-private.h"
#include "../rows-private.h"

/* Shared code of the Gaussian family: factor cache, residual scoring,
 * gradients through the residuals and the covariance part of the M-step.
 * Derivations: docs/sim-gaussian.md. */

static const lse_gaussian_config default_config = {.cov = LSE_COV_FULL};

static size_t group_width(const lse_gauss_work *w);

static lse_cov_type config_cov(const void *config)
{
    const lse_gaussian_config *c =
        config != NULL ? (const lse_gaussian_config *)config : &default_config;
    return c->cov;
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
    if (lse_cov_name(cov) == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: unknown covariance type %d (expected "
                              "full, diag, spherical or tied)",
                              name, (int)cov);
    if (config != NULL &&
        ((const lse_gaussian_config *)config)->model != LSE_COV_MODEL_NONE &&
        chol_index != 1)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: covariance models are for gaussian only",
                              name);
    const lse_status mst = lse_gauss_mclust_check(name, config, msg, msg_len);
    if (mst != LSE_OK)
        return mst;
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
    const size_t er = lse_cov_chol_rows(cov, K);
    const size_t ec = lse_cov_chol_cols(cov, d);
    if (cr != er || cc != ec)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: chol is %zux%zu, expected %s = %zux%zu "
                              "(cov=%s)",
                              name, cr, cc, chol_expect(cov), er, ec,
                              lse_cov_name(cov));
    return LSE_OK;
}

/* A zeroed (n1, n2) matrix for the SIMD kernels: tda n2 rounded up to 8
 * and every row starting `lead` doubles before a 64-byte boundary, so that
 * their 8-wide loads and stores of whole rows (Q, R, the statistics: lead
 * 0; V, whose first entry is the constant 1: lead 1) never straddle two
 * cache lines, whatever address malloc would have given. gsl_matrix_free
 * frees it (gsl_block_free calls free(), which takes aligned_alloc's
 * memory). NULL on failure or overflow. */
static gsl_matrix *matrix_lines(size_t n1, size_t n2, size_t lead)
{
    size_t tda, n, bytes;
    if (n1 == 0 || n2 == 0 || lead >= 8 || lse_size_add(n2, 7, &tda))
        return NULL;
    tda = tda / 8 * 8;
    if (lse_size_mul(n1, tda, &n) || lse_size_add(n, 8, &n) ||
        lse_size_mul(n, sizeof(double), &bytes))
        return NULL;
    gsl_block *blk = malloc(sizeof *blk);
    gsl_matrix *m = malloc(sizeof *m);
    double *data = aligned_alloc(64, bytes); /* a multiple of 64 */
    if (blk == NULL || m == NULL || data == NULL) {
        free(blk);
        free(m);
        free(data);
        return NULL;
    }
    memset(data, 0, bytes);
    blk->size = n;
    blk->data = data;
    m->size1 = n1;
    m->size2 = n2;
    m->tda = tda;
    m->data = data + (8 - lead) % 8;
    m->block = blk;
    m->owner = 1;
    return m;
}

/* n doubles on a cache line, zeroed; NULL on failure or overflow */
static double *doubles_lines(size_t n1, size_t n2, size_t extra)
{
    size_t n, bytes;
    if (lse_size_mul(n1, n2, &n) || lse_size_add(n, extra + 7, &n))
        return NULL;
    n = n / 8 * 8;
    if (lse_size_mul(n, sizeof(double), &bytes))
        return NULL;
    double *p = aligned_alloc(64, bytes);
    if (p != NULL)
        memset(p, 0, bytes);
    return p;
}

/* The scratch of the fused diagonal pass, when it applies (1: fine,
 * also when it does not apply; 0: out of memory). */
static int fused_buffer(lse_gauss_work *w)
{
    const size_t n = lse_gauss_fused_scratch(w->dim, w->n_comp);
    w->fused_isa = lse_gauss_fused_isa();
    if (n == 0 || w->fused_isa < 0)
        return 1;
    w->fused = doubles_lines(n, 1, 0);
    return w->fused != NULL;
}

/* The buffers of the triangle-aware whitened path (w->tri). */
static int tri_buffers(lse_gauss_work *w)
{
    const size_t K = w->n_comp, d = w->dim, b = w->block;
    w->dp = (d + 7) / 8 * 8;
    const size_t nst = w->dp / 8;
    w->ustr = 32 * (nst - 1) * nst + 8 * d;
    w->tri = (w->utri = doubles_lines(K, w->ustr, 0)) != NULL &&
             (w->otri = doubles_lines(K, w->dp, 0)) != NULL &&
             (w->mtri = doubles_lines(K, w->dp, 0)) != NULL &&
             (w->xtri = doubles_lines(b, w->dp, 0)) != NULL &&
             /* (+ 2 dp: the AVX2 copy's padded panels, ts_size) */
             (w->wtri = doubles_lines(b, w->dp, 2 * w->dp + 16)) != NULL &&
             (w->xqtri = doubles_lines(b, w->dp, 2 * w->dp)) != NULL &&
             (w->rhot = doubles_lines(b, 1, 0)) != NULL;
    return w->tri;
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
    gsl_matrix_free(w->zblk);
    gsl_matrix_free(w->wgrp);
    gsl_matrix_free(w->vblk);
    gsl_matrix_free(w->qcoef);
    gsl_matrix_free(w->rbuf);
    gsl_matrix_free(w->qacc);
    gsl_matrix_free(w->mom1);
    gsl_matrix_free(w->mom2);
    gsl_matrix_free(w->xblk);
    gsl_matrix_free(w->mut);
    gsl_matrix_free(w->invt);
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
    free(w->utri);
    free(w->otri);
    free(w->mtri);
    free(w->xtri);
    free(w->wtri);
    free(w->xqtri);
    free(w->rhot);
    free(w->fused);
    free(w->pkey);
    lse_gauss_mclust_work_free(w->mcl);
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
    if (lse_cov_name(cov) == NULL)
        return LSE_EINVAL;
    const size_t K = shape->n_parent, d = shape->d_child;
    const size_t dc = shape->d_context;
    size_t block = shape->block != 0 ? shape->block : shape->n_child;
    if (block == 0)
        block = 1;
    if (K == 0 || d == 0)
        return LSE_EDIM;
    /* every matrix below is at most block x K x (d + 1), (K or block) x
     * (d + 1)^2 (dc <= d is not assumed: the larger of the two counts) or
     * block x (K rounded up to 8) doubles */
    if (lse_size_shape_overflow(block, block, K, d > dc ? d : dc, 0) != NULL ||
        LSE_SIZE_PAIRS_OVERFLOW(block, K + 8))
        return LSE_ENOMEM;
    lse_gauss_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->cov = cov;
    w->model = config != NULL ? ((const lse_gaussian_config *)config)->model
                              : LSE_COV_MODEL_NONE;
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
        (w->new_chol = gsl_matrix_alloc(lse_cov_chol_rows(cov, K),
                                        lse_cov_chol_cols(cov, d))) != NULL;
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
    if (ok && dc == 0) /* lse_sim_gaussian: center, E-step cache */
        ok = (w->center = gsl_vector_calloc(d)) != NULL &&
             (w->xblk = gsl_matrix_alloc(block, d)) != NULL &&
             (w->mom1 = gsl_matrix_alloc(K, d)) != NULL &&
             (w->mom2 = gsl_matrix_alloc(
                  w->nfac * d, cov == LSE_COV_SPHERICAL ? 1 : d)) != NULL;
    if (ok && tri && dc == 0) /* the wide kernels of lse_sim_gaussian */
        ok = (w->off = gsl_matrix_calloc(K, d)) != NULL &&
             (w->zall = gsl_matrix_alloc(w->chunk, K * d)) != NULL &&
             (w->zg = gsl_matrix_alloc(w->chunk, K * d)) != NULL &&
             (w->macc = gsl_matrix_alloc(w->nfac * d, d)) != NULL &&
             (w->uacc = gsl_matrix_alloc(K, d)) != NULL &&
             (w->ones = gsl_vector_alloc(w->chunk)) != NULL;
    if (ok && tri && dc == 0) /* whitened path */
        ok = (w->zblk = gsl_matrix_alloc(block, w->nfac * d)) != NULL &&
             (w->wgrp = gsl_matrix_alloc(
                  block, cov == LSE_COV_TIED ? d : group_width(w) * d)) != NULL;
    /* quadratic path (full/tied: when its nv coefficients per component
     * are not many more than the d^2 of the whitening product) */
    const size_t nv = tri                   ? 1 + d + d * (d + 1) / 2
                      : cov == LSE_COV_DIAG ? 1 + 2 * d
                                            : 2 + d;
    if (ok && dc == 0 && (!tri || (d >= 2 && nv <= d * (d + 1)))) {
        w->nv = nv;
        const size_t kp = (K + 7) / 8 * 8; /* whole tiles of 8 */
        /* 7 rows more: the AVX-512 full/tied kernels keep V transposed by
         * whole groups of 8 rows (vt_groups) */
        ok = (w->vblk = matrix_lines(block + 7, nv, 1)) != NULL &&
             (w->qcoef = matrix_lines(nv, kp, 0)) != NULL &&
             (w->rbuf = matrix_lines(block, kp, 0)) != NULL &&
             (w->qacc = matrix_lines(nv, kp, 0)) != NULL;
    }
    if (ok && !tri && dc == 0) /* transposed parameters of the fused loops */
        ok = (w->mut = gsl_matrix_calloc(d, K)) != NULL &&
             (w->invt = gsl_matrix_calloc(cov == LSE_COV_DIAG ? d : 1, K)) !=
                 NULL;
    if (ok && w->ones != NULL)
        gsl_vector_set_all(w->ones, 1.0);
    w->avx2 = lse_cpu_avx2();
    /* 1: AVX2 + FMA kernels; 2: their AVX-512 copies (same bits) */
    w->fma = lse_cpu_avx512() ? 2 : lse_cpu_avx2_fma();
    if (ok && cov == LSE_COV_FULL && dc == 0 && w->fma)
        ok = tri_buffers(w);
    if (ok && cov == LSE_COV_DIAG && w->nv > 0)
        ok = fused_buffer(w);
    if (ok && dc > 0)
        ok = (w->aug = gsl_matrix_alloc(block, dc + 1)) != NULL &&
             (w->augw = gsl_matrix_alloc(block, dc + 1)) != NULL &&
             (w->new_a = gsl_matrix_alloc(K, d * dc)) != NULL &&
             (w->sxx = gsl_matrix_alloc(dc + 1, dc + 1)) != NULL &&
             (w->delta = gsl_matrix_alloc(d, dc + 1)) != NULL &&
             (w->rcond_work = gsl_vector_alloc(3 * (dc + 1))) != NULL;
    if (ok)
        ok = lse_gauss_mclust_work_new(w) == LSE_OK;
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
    const size_t lt = l->tda;
    double *inv = gsl_matrix_ptr(w->inv, f, 0);
    double ld = 0.0;
    /* raw rows (the entries and checks of gsl_matrix_set/get, without
     * their index checks: 3 passes of d^2 entries per component, the
     * largest part of the M-step's serial prepare at d = 64) */
    for (size_t i = 0; i < d; i++) {
        double *li = l->data + i * lt;
        const double *ri = row + i * d;
        int bad = 0;
        for (size_t j = 0; j <= i; j++) {
            li[j] = ri[j];
            bad |= !isfinite(ri[j]);
        }
        for (size_t j = i + 1; j < d; j++)
            li[j] = 0.0;
        if (bad)
            return LSE_ENONFINITE;
        const double lii = li[i];
        if (lii == 0.0)
            return LSE_ENUMERIC;
        inv[i] = 1.0 / lii;
        ld += 2.0 * log(fabs(lii));
    }
    const int rc = lse_tri_invert_lower(l);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    /* minv(i, f d + j) = (L^-1)(j, i), zero where j < i */
    const size_t mt = w->minv->tda;
    for (size_t i = 0; i < d; i++) {
        double *mi = w->minv->data + i * mt + f * d;
        for (size_t j = 0; j < i; j++)
            mi[j] = 0.0;
        for (size_t j = i; j < d; j++)
            mi[j] = l->data[j * lt + i];
    }
    *logdet = ld;
    return LSE_OK;
}

static void fast_coefficients(lse_gauss_work *w, const gsl_matrix *parent);

/* log pi_k = logw_k - logsumexp(logw) into logpi (0 without logw);
 * -INFINITY (log 0) is legal. */
static lse_status prepare_weights(lse_gauss_work *w, const gsl_matrix *logw)
{
    const size_t K = w->n_comp;
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
    return LSE_OK;
}

/* Per component: the inverse factor (inv, minv) and the constant
 * log pi_k - 1/2 (d log 2 pi + log det Sigma_k) into cnst. */
static lse_status prepare_factors(lse_gauss_work *w, const gsl_matrix *chol)
{
    const size_t K = w->n_comp, d = w->dim;
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
                        lse_copy_rows_checked(&bc.matrix, &b0.matrix));
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
    return LSE_OK;
}

/* The packed factors (L_k^-T by strips of 8 columns, see utri), padded
 * offsets and means of the triangle-aware path. */
static void tri_factors(lse_gauss_work *w, const gsl_matrix *parent)
{
    const size_t K = w->n_comp, d = w->dim, dp = w->dp;
    for (size_t k = 0; k < K; k++) {
        for (size_t st = 0; st < dp / 8; st++) {
            double *pan = w->utri + k * w->ustr + 32 * st * (st + 1);
            const size_t rows = 8 * st + 8 < d ? 8 * st + 8 : d;
            for (size_t m = 0; m < rows; m++) {
                const double *mm = gsl_matrix_const_ptr(w->minv, m, k * d);
                for (size_t e = 0; e < 8; e++) {
                    const size_t j = 8 * st + e;
                    pan[8 * m + e] = j < d ? mm[j] : 0.0;
                }
            }
        }
        memcpy(w->otri + k * dp, gsl_matrix_const_ptr(w->off, k, 0),
               d * sizeof(double));
        memcpy(w->mtri + k * dp, gsl_matrix_const_ptr(parent, k, 0),
               d * sizeof(double));
    }
}

/* The wide kernels (full/tied): center c = mean of the means,
 * off_k = (mu_k - c) L^-T, and the quadratic path when it is accurate. */
static lse_status prepare_wide(lse_gauss_work *w, const gsl_matrix *chol,
                               const gsl_matrix *parent)
{
    const size_t K = w->n_comp, d = w->dim;
    if (parent->size1 != K || parent->size2 != d)
        return LSE_EDIM;
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(parent, k, j)))
                return LSE_ENONFINITE;
    lse_gauss_mean_of_means(parent, w->center->data);
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
    if (w->tri)
        tri_factors(w, parent);
    w->fast = lse_gauss_fast_path(w, parent, chol, w->dd->data);
    if (w->fast)
        fast_coefficients(w, parent);
    return LSE_OK;
}

/* diag/spherical: parameters transposed for the fused loops, and the
 * quadratic path when it is accurate. */
static lse_status prepare_fused(lse_gauss_work *w, const gsl_matrix *chol,
                                const gsl_matrix *parent)
{
    const size_t K = w->n_comp, d = w->dim;
    if (parent->size1 != K || parent->size2 != d)
        return LSE_EDIM;
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++) {
            const double v = gsl_matrix_get(parent, k, j);
            if (!isfinite(v))
                return LSE_ENONFINITE;
            gsl_matrix_set(w->mut, j, k, v);
        }
    for (size_t k = 0; k < K; k++) {
        if (w->cov == LSE_COV_DIAG) {
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(w->invt, j, k, gsl_matrix_get(w->inv, k, j));
        } else {
            const double v = gsl_matrix_get(w->inv, k, 0);
            gsl_matrix_set(w->invt, 0, k, v * v);
        }
    }
    lse_gauss_mean_of_means(parent, w->center->data);
    w->has_offsets = 1;
    w->fast = lse_gauss_fast_path(w, parent, chol, w->dd->data);
    if (w->fast)
        fast_coefficients(w, parent);
    return LSE_OK;
}

/* The key of prepare_same: the values of logw (if any), chol and parent,
 * row by row. store: copy them into w->pkey (grown to fit; no key when out
 * of memory); else compare (1: the same bits). */
static int prepare_key(lse_gauss_work *w, const gsl_matrix *const m[3],
                       int store)
{
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        if (m[i] != NULL)
            n += m[i]->size1 * m[i]->size2;
    if (store && n != w->pkey_n) {
        free(w->pkey);
        w->pkey = malloc(n * sizeof *w->pkey);
        w->pkey_n = w->pkey != NULL ? n : 0;
    }
    if (w->pkey_n != n || n == 0)
        return 0;
    double *k = w->pkey;
    for (int i = 0; i < 3; i++)
        for (size_t r = 0; m[i] != NULL && r < m[i]->size1; r++) {
            const double *row = m[i]->data + r * m[i]->tda;
            const size_t len = m[i]->size2 * sizeof *row;
            if (store)
                memcpy(k, row, len);
            else if (memcmp(k, row, len) != 0)
                return 0;
            k += m[i]->size2;
        }
    return 1;
}

/* Was w prepared from these very values (with parents: full/tied, and
 * diag/spherical's fused loops)? Then
 * the factor cache and the E-step cache stand: the M-step's own prepare
 * (lse_term_sim_args) repeats the E-step's, on the same parameters, and
 * at d = 64, K = 32 it is 32 triangular inverses on the main thread, 1 %
 * of an iteration on one thread and twice that on two (docs/performance.md,
 * "Full covariances, session 9"). */
static int prepare_same(lse_gauss_work *w, const gsl_matrix *const m[3])
{
    const size_t K = w->n_comp, d = w->dim;
    if (!w->prepared || !w->has_offsets || (w->off == NULL && w->mut == NULL) ||
        m[2] == NULL ||
        (m[0] != NULL && (m[0]->size1 != K || m[0]->size2 != 1)) ||
        m[1]->size1 != lse_cov_chol_rows(w->cov, K) ||
        m[1]->size2 != lse_cov_chol_cols(w->cov, d) || m[2]->size1 != K ||
        m[2]->size2 != d)
        return 0;
    return prepare_key(w, m, 0);
}

lse_status lse_gauss_prepare(lse_gauss_work *w, const gsl_matrix *logw,
                             const gsl_matrix *chol, const gsl_matrix *parent)
{
    if (w == NULL || chol == NULL)
        return LSE_EFAULT;
    const gsl_matrix *const key[3] = {logw, chol, parent};
    if (prepare_same(w, key))
        return LSE_OK;
    w->prepared = 0;
    w->has_offsets = 0;
    w->fast = 0;
    w->gen++; /* whatever follows, the E-step cache is stale */
    const size_t K = w->n_comp, d = w->dim;
    if (chol->size1 != lse_cov_chol_rows(w->cov, K) ||
        chol->size2 != lse_cov_chol_cols(w->cov, d))
        return LSE_EDIM;

    lse_status st = prepare_weights(w, logw);
    if (st == LSE_OK) {
        /* the triangular inverses call dtrmv, which OpenBLAS threads at any
         * size: held serial, so a prepare outside the library's passes
         * (a model's set-up) rounds as one inside them */
        const int tri = w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED;
        const int held = tri ? lse_blas_serial_begin(1) : 0;
        st = prepare_factors(w, chol);
        lse_blas_serial_end(held);
    }
    if (st == LSE_OK && parent != NULL && w->off != NULL)
        st = prepare_wide(w, chol, parent);
    if (st == LSE_OK && parent != NULL && w->mut != NULL)
        st = prepare_fused(w, chol, parent);
    if (st != LSE_OK)
        return st;
    w->prepared = 1;
    if (parent != NULL && (w->off != NULL || w->mut != NULL))
        prepare_key(w, key, 1);
    return LSE_OK;
}

void lse_gauss_mean_of_means(const gsl_matrix *parent, double *c)
{
    const size_t K = parent->size1, d = parent->size2;
    for (size_t j = 0; j < d; j++)
        c[j] = 0.0;
    for (size_t k = 0; k < K; k++) {
        const double *p = gsl_matrix_const_ptr(parent, k, 0);
        for (size_t j = 0; j < d; j++)
            c[j] += p[j] / (double)K;
    }
}

/* block f of minv: L_f^-T (d, d) */
static _gsl_matrix_const_view minv_block(const lse_gauss_work *w, size_t k)
{
    const size_t d = w->dim;
    return gsl_matrix_const_submatrix(
        w->minv, 0, (w->cov == LSE_COV_TIED ? 0 : k) * d, d, d);
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

/* ------------------------------------------------------------------ */
/* E-step and M-step statistics of lse_sim_gaussian (no context).      *
 * docs/sim-gaussian.md section 3 and docs/performance.md.             *
 *                                                                     *
 * Two paths, chosen by prepare from the parameters (the same choice   *
 * in solve):                                                          *
 * - quadratic: with y = x - c (c = mean of the means), every score is *
 *   a linear function of the monomials V = [1, y', q(y)'] (q = vech   *
 *   (y y') for full/tied, y^2 for diag, |y|^2 for spherical): one     *
 *   GEMM S = V Q for all components, and the statistics are V' R, one *
 *   more GEMM on the same V. Accurate to about eps * kappa, kappa the *
 *   largest squared distance from c to a mean in standard deviations  *
 *   of its component; used when kappa <= LSE_GAUSS_FAST_KAPPA.        *
 * - whitened (full/tied) or direct (diag/spherical): per-component    *
 *   residuals, accurate to eps * sqrt(kappa) or better.               *
 * Both keep what they computed for the block eval scored, so that     *
 * stats on the same block (the EM solver's fused pass) reuses it.      */

/* Components per GEMM of the whitened path: about this many columns. */
#define GROUP_COLS 256

static size_t group_width(const lse_gauss_work *w)
{
    size_t g = GROUP_COLS / w->dim;
    if (g < 1)
        g = 1;
    return g < w->n_comp ? g : w->n_comp;
}

/* Is x the block the cache holds (same rows, bit for bit, and the same
 * factors)? */
static int cache_holds(const lse_gauss_work *w, const gsl_matrix *x)
{
    if (w->zrows == 0 || w->zrows != x->size1 || w->zgen != w->gen)
        return 0;
    const size_t d = w->dim;
    if (x->tda == d && w->xblk->tda == d) /* both contiguous: one compare */
        return memcmp(x->data, w->xblk->data, x->size1 * d * sizeof(double)) ==
               0;
    for (size_t i = 0; i < x->size1; i++)
        if (memcmp(gsl_matrix_const_ptr(x, i, 0),
                   gsl_matrix_const_ptr(w->xblk, i, 0),
                   d * sizeof(double)) != 0)
            return 0;
    return 1;
}

static void cache_store(lse_gauss_work *w, const gsl_matrix *x)
{
    const size_t b = x->size1;
    gsl_matrix_view head = gsl_matrix_submatrix(w->xblk, 0, 0, b, w->dim);
    lse_copy_rows(&head.matrix, x);
    w->zrows = b;
    w->zgen = w->gen;
}

/* --- quadratic path ------------------------------------------------- */

int lse_gauss_fast_path(const lse_gauss_work *w, const gsl_matrix *parent,
                        const gsl_matrix *chol, double *scratch)
{
    if (w->nv == 0)
        return 0;
    const size_t d = w->dim, K = w->n_comp;
    double *c = scratch, *z = scratch + d;
    lse_gauss_mean_of_means(parent, c);
    for (size_t k = 0; k < K; k++) {
        const double *mu = gsl_matrix_const_ptr(parent, k, 0);
        double q = 0.0;
        switch (w->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED: {
            const double *l =
                gsl_matrix_const_ptr(chol, w->cov == LSE_COV_TIED ? 0 : k, 0);
            for (size_t i = 0; i < d; i++) { /* z = L^-1 (mu - c) */
                double v = mu[i] - c[i];
                for (size_t m = 0; m < i; m++)
                    v -= l[i * d + m] * z[m];
                z[i] = v / l[i * d + i];
                q += z[i] * z[i];
            }
            break;
        }
        case LSE_COV_DIAG: {
            const double *l = gsl_matrix_const_ptr(chol, k, 0);
            for (size_t i = 0; i < d; i++) {
                const double v = (mu[i] - c[i]) / l[i];
                q += v * v;
            }
            break;
        }
        case LSE_COV_SPHERICAL: {
            const double l = gsl_matrix_get(chol, k, 0);
            for (size_t i = 0; i < d; i++) {
                const double v = (mu[i] - c[i]) / l;
                q += v * v;
            }
            break;
        }
        }
        if (!(q <= LSE_GAUSS_FAST_KAPPA)) /* also NaN */
            return 0;
    }
    return 1;
}

/* Columns q_k of Q (nv, K) from the cache of prepare. With
 * delta_k = mu_k - c and P_k = Sigma_k^-1:
 *   S_ik = c_k - 1/2 (y - delta)' P (y - delta)
 *        = [c_k - 1/2 delta' P delta] + (P delta)' y - 1/2 y' P y.
 * full/tied: o_k = L^-1 delta (cached), P = L^-T L^-1, y' P y =
 * sum_a P_aa y_a^2 + 2 sum_{a<b} P_ab y_a y_b; diag: P = diag(1/l^2);
 * spherical: P = I / l^2. */
static void fast_coefficients(lse_gauss_work *w, const gsl_matrix *parent)
{
    const size_t d = w->dim, K = w->n_comp;
    const size_t qt = w->qcoef->tda;
    double *q = w->qcoef->data;
    const double *c = w->center->data;
    for (size_t k = 0; k < K; k++) {
        const double cn = gsl_vector_get(w->cnst, k);
        if (w->cov == LSE_COV_DIAG || w->cov == LSE_COV_SPHERICAL) {
            const double *mu = gsl_matrix_const_ptr(parent, k, 0);
            const double *inv = gsl_matrix_const_ptr(w->inv, k, 0);
            double dpd = 0.0;
            for (size_t a = 0; a < d; a++) {
                const double i2 =
                    w->cov == LSE_COV_DIAG ? inv[a] * inv[a] : inv[0] * inv[0];
                const double del = mu[a] - c[a];
                dpd += del * del * i2;
                q[(1 + a) * qt + k] = del * i2;
                if (w->cov == LSE_COV_DIAG)
                    q[(1 + d + a) * qt + k] = -0.5 * i2;
            }
            if (w->cov == LSE_COV_SPHERICAL)
                q[(1 + d) * qt + k] = -0.5 * inv[0] * inv[0];
            q[k] = cn - 0.5 * dpd;
            continue;
        }
        const size_t f = w->cov == LSE_COV_TIED ? 0 : k;
        const double *o = gsl_matrix_const_ptr(w->off, k, 0);
        q[k] = cn - 0.5 * lse_gauss_sq_norm(o, d);
        /* (P delta)_a = (L^-T o)_a = sum_m Minv(a, m) o_m (upper part) */
        for (size_t a = 0; a < d; a++) {
            const double *ma = gsl_matrix_const_ptr(w->minv, a, f * d);
            double v = 0.0;
            for (size_t m = a; m < d; m++)
                v += ma[m] * o[m];
            q[(1 + a) * qt + k] = v;
        }
        /* P_ab = row a . row b of L^-T */
        size_t p = 1 + d;
        for (size_t a = 0; a < d; a++) {
            const double *ma = gsl_matrix_const_ptr(w->minv, a, f * d);
            for (size_t b = a; b < d; b++, p++) {
                const double *mb = gsl_matrix_const_ptr(w->minv, b, f * d);
                double v = 0.0;
                for (size_t m = b; m < d; m++)
                    v += ma[m] * mb[m];
                q[p * qt + k] = a == b ? -0.5 * v : -v;
            }
        }
    }
}

/* The groups of 8 rows' transposed V of the full/tied AVX-512 kernels:
 * vblk (block + 7 rows) from its first 64-byte boundary. */
static double *vt_groups(const lse_gauss_work *w)
{
    return (double *)(((uintptr_t)w->vblk->data + 63) & ~(uintptr_t)63);
}

/* Diagonal and spherical blocks whose V takes at most this many doubles
 * (32 KiB, about L1) keep it whole for stats, as full and tied always do;
 * larger blocks build V a few rows at a time in L1, once for the scores
 * and again for the statistics. */
#define V_WHOLE_DOUBLES 4096

/* Does this block's V go whole into vblk (built once, kept for stats)? */
static int v_whole(const lse_gauss_work *w, size_t b)
{
    return w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED ||
           b * w->vblk->tda <= V_WHOLE_DOUBLES;
}

/* V of the block x into vblk, remembered for stats. */
static void fast_block(lse_gauss_work *w, const gsl_matrix *x)
{
    w->zrows = 0;
    lse_gauss_v_rows(w, x);
    cache_store(w, x);
}

static lse_status fast_eval(lse_gauss_work *w, const gsl_matrix *x,
                            gsl_matrix *s)
{
    const size_t b = x->size1, nv = w->nv, K = w->n_comp;
#if LSE_HAVE_AVX2_PATH
    if (w->fma == 2 && b >= 8 &&
        (w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED)) {
        /* V transposed by groups of 8 rows, kept for stats */
        w->zrows = 0;
        w->s_clean = !lse_gauss_qfull_eval_avx512(w, x, s, vt_groups(w));
        cache_store(w, x);
        return LSE_OK;
    }
    if (w->fma && b >= 6) {
        /* large diag/spherical blocks: V of 6 rows at a time into the
         * head of vblk (it stays in L1), then S of those rows; stats
         * recomputes V the same way. full/tied (V is 10 times longer) and
         * small blocks: V of the whole block, remembered for stats (the
         * same V, the same bits). */
        const int whole = v_whole(w, b);
        w->zrows = 0;
        double *v = w->vblk->data;
        const size_t vt = w->vblk->tda;
        const double *q = w->qcoef->data;
        const size_t kp = w->qcoef->tda;
        if (whole) {
            lse_gauss_v_rows_fma(w, x->data, x->tda, b, v, vt);
            cache_store(w, x);
        }
        for (size_t i = 0; i < b; i += 6) {
            /* the last group overlaps the previous one rather than run
             * short: its rows are recomputed identically */
            const size_t i0 = i + 6 <= b ? i : b - 6;
            const double *vg = v + i0 * vt;
            if (!whole) {
                lse_gauss_v_rows6_fma(w, gsl_matrix_const_ptr(x, i0, 0),
                                      x->tda, v, vt);
                vg = v;
            }
            if (w->fma == 2)
                lse_gauss_qeval6_avx512(vg, vt, nv, q, kp, K,
                                        gsl_matrix_ptr(s, i0, 0), s->tda);
            else
                lse_gauss_qeval6_avx2(vg, vt, nv, q, kp, K,
                                      gsl_matrix_ptr(s, i0, 0), s->tda);
        }
        return LSE_OK;
    }
    fast_block(w, x);
    if (w->fma && b >= 4) {
        const double *v = w->vblk->data, *q = w->qcoef->data;
        const size_t vt = w->vblk->tda, kp = w->qcoef->tda;
        for (size_t i = 0; i < b; i += 4) {
            const size_t i0 = i + 4 <= b ? i : b - 4;
            lse_gauss_qeval4_avx2(v + i0 * vt, vt, nv, q, kp, K,
                                  gsl_matrix_ptr(s, i0, 0), s->tda);
        }
        return LSE_OK;
    }
#else
    fast_block(w, x);
#endif
    gsl_matrix_const_view v = gsl_matrix_const_submatrix(w->vblk, 0, 0, b, nv);
    gsl_matrix_const_view q = gsl_matrix_const_submatrix(w->qcoef, 0, 0, nv, K);
    /* S = V Q: every component in one GEMM */
    const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &v.matrix,
                                  &q.matrix, 0.0, s);
    return lse_status_from_gsl(rc);
}

#if LSE_HAVE_AVX2_PATH
/* fast_stats with the AVX2 + FMA (or AVX-512) tiles of V' R. */
static lse_status fast_stats_fma(lse_gauss_work *w, const gsl_matrix *x,
                                 const gsl_matrix *resp,
                                 const gsl_vector *weight, double *acc)
{
    const size_t b = x->size1, d = w->dim, K = w->n_comp, nv = w->nv;
    const int tied = w->cov == LSE_COV_TIED;
    const size_t kp = w->rbuf->tda;
    /* rho: R itself when it has no weights and whole tiles, else R
     * times the row weights (R itself: x 1 is exact), zero-padded, in
     * rbuf; its padding columns [K, kp) are zero from matrix_lines and
     * never written */
    const double *rho = w->rbuf->data;
    size_t rt = kp;
    /* R itself for any K on AVX2: qstats4's last tile loads only the K
     * entries of a row (not the copy to rbuf, 2 % of the small fits'
     * instructions) */
    if (weight == NULL && (K == kp || w->fma == 1)) {
        rho = resp->data;
        rt = resp->tda;
    } else if (weight == NULL) {
        for (size_t i = 0; i < b; i++) {
            const double *ri = gsl_matrix_const_ptr(resp, i, 0);
            double *o = gsl_matrix_ptr(w->rbuf, i, 0);
            for (size_t k = 0; k < K; k++)
                o[k] = ri[k];
        }
    } else {
        for (size_t i = 0; i < b; i++) {
            const double wi = gsl_vector_get(weight, i);
            const double *ri = gsl_matrix_const_ptr(resp, i, 0);
            double *o = gsl_matrix_ptr(w->rbuf, i, 0);
            for (size_t k = 0; k < K; k++)
                o[k] = ri[k] * wi;
        }
    }
    double *macc = w->qacc->data; /* (nv, kp) */
    memset(macc, 0, nv * kp * sizeof *macc);
    /* V as fast_eval made it: full/tied and small blocks the whole block
     * (kept by eval for this block, else made now), large diag/spherical
     * blocks 4 rows at a time at the head of vblk */
    /* (AVX-512: no row-major V for full/tied, see below) */
    const int ft = w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED;
    const int whole = ft ? w->fma != 2 || b < 8 : v_whole(w, b);
    double *v = w->vblk->data;
    const size_t vt = w->vblk->tda;
    /* a large diagonal/spherical block's rows below overwrite the head of
     * vblk: the V a small block left there is no longer whole (without
     * this, the statistics of a small block evaluated before a large one
     * in the same slot took that clobbered V, and the result depended on
     * which thread ran which chunk) */
    if (!ft && !whole)
        w->zrows = 0;
    if (whole && !cache_holds(w, x)) {
        w->zrows = 0;
        lse_gauss_v_rows_fma(w, x->data, x->tda, b, v, vt);
        cache_store(w, x);
    }
    size_t i = 0;
    if (w->fma == 2 && b >= 8 &&
        (w->cov == LSE_COV_FULL || w->cov == LSE_COV_TIED)) {
        /* V transposed by groups of 8 rows: as eval left it, else formed
         * group by group */
        const int kept = cache_holds(w, x);
        double *vt8 = vt_groups(w);
        for (; i + 8 <= b; i += 8)
            lse_gauss_qfull_stats8_avx512(
                w, gsl_matrix_const_ptr(x, i, 0), x->tda, rho + i * rt, rt,
                kept ? vt8 + i * nv : vt8, !kept, macc, kp);
        w->zrows = 0; /* the rows below overwrite vblk */
    }
    if (whole && w->fma == 1) { /* the rows 4 at a time, in one pass */
        const size_t n4 = (b - i) / 4 * 4;
        lse_gauss_qstats_rows_avx2(v + i * vt, vt, nv, rho + i * rt, rt, n4,
                                   macc, kp, K);
        i += n4;
    }
    for (; i + 4 <= b; i += 4) {
        const double *vg = v + i * vt;
        if (!whole) {
            lse_gauss_v_rows4_fma(w, gsl_matrix_const_ptr(x, i, 0), x->tda, v,
                                  vt);
            vg = v;
        }
        if (w->fma == 2)
            lse_gauss_qstats4_avx512(vg, vt, nv, rho + i * rt, rt, macc, kp);
        else
            lse_gauss_qstats4_avx2(vg, vt, nv, rho + i * rt, rt, macc, kp,
                                   K);
    }
    for (; i < b; i++) { /* the last rows one by one */
        const double *vg = v + i * vt;
        if (!whole) {
            lse_gauss_v_rows_fma(w, gsl_matrix_const_ptr(x, i, 0), x->tda, 1, v,
                                 vt);
            vg = v;
        }
        for (size_t p = 0; p < nv; p++) {
            const double vp = vg[p];
            for (size_t k = 0; k < K; k++)
                macc[p * kp + k] += vp * rho[i * rt + k];
        }
    }
    const size_t nh = tied ? 1 + d : nv;
    /* rows < nh per component; tied: the rest pooled over k */
    for (size_t p = 0; p < nh; p++)
        for (size_t k = 0; k < K; k++)
            acc[p * K + k] += macc[p * kp + k];
    for (size_t p = nh; p < nv; p++) {
        double sum = 0.0;
        for (size_t k = 0; k < K; k++)
            sum += macc[p * kp + k];
        acc[nh * K + (p - nh)] += sum;
    }
    return LSE_OK;
}
#endif

static lse_status fast_stats(lse_gauss_work *w, const gsl_matrix *x,
                             const gsl_matrix *resp, const gsl_vector *weight,
                             double *acc)
{
    const size_t b = x->size1, d = w->dim, K = w->n_comp, nv = w->nv;
    const int tied = w->cov == LSE_COV_TIED;
#if LSE_HAVE_AVX2_PATH
    if (w->fma)
        return fast_stats_fma(w, x, resp, weight, acc);
#endif
    if (!cache_holds(w, x))
        fast_block(w, x);
    /* rho = R times the row weights (the padding stays zero) */
    for (size_t i = 0; i < b; i++) {
        const double wi = weight != NULL ? gsl_vector_get(weight, i) : 1.0;
        const double *ri = gsl_matrix_const_ptr(resp, i, 0);
        double *o = gsl_matrix_ptr(w->rbuf, i, 0);
        for (size_t k = 0; k < K; k++)
            o[k] = ri[k] * wi;
    }
    const size_t nh = tied ? 1 + d : nv;
    gsl_matrix_const_view rho = gsl_matrix_const_submatrix(w->rbuf, 0, 0, b, K);
    gsl_matrix_view head = gsl_matrix_view_array(acc, nh, K);
    gsl_matrix_const_view v = gsl_matrix_const_submatrix(w->vblk, 0, 0, b, nh);
    /* [N; s1c; second moments] += V' R */
    int rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &v.matrix,
                            &rho.matrix, 1.0, &head.matrix);
    if (rc == GSL_SUCCESS && tied) {
        /* the pooled second moment: V' (R 1) */
        double *rs = w->rw->data;
        for (size_t i = 0; i < b; i++) {
            const double *ri = gsl_matrix_const_ptr(&rho.matrix, i, 0);
            double sum = 0.0;
            for (size_t k = 0; k < K; k++)
                sum += ri[k];
            rs[i] = sum;
        }
        gsl_vector_view rsv = gsl_vector_subvector(w->rw, 0, b);
        gsl_vector_view tail =
            gsl_vector_view_array(acc + (1 + d) * K, nv - 1 - d);
        gsl_matrix_const_view vq =
            gsl_matrix_const_submatrix(w->vblk, 0, 1 + d, b, nv - 1 - d);
        rc = gsl_blas_dgemv(CblasTrans, 1.0, &vq.matrix, &rsv.vector, 1.0,
                            &tail.vector);
    }
    return lse_status_from_gsl(rc);
}

/* Shifted moments from the statistics of the quadratic path: with
 * delta_k = mu_k - c and s1c, the second moments taken about c,
 *   s1_k = s1c_k - N_k delta_k
 *   s2_k = P_k - s1c_k delta_k' - delta_k s1c_k' + N_k delta_k delta_k'
 * (diag: its diagonal; spherical: its trace). */
static void fast_moments(lse_gauss_work *w, const gsl_matrix *parent,
                         const double *acc, double *s1, double *s2)
{
    const size_t d = w->dim, K = w->n_comp;
    const lse_cov_type cov = w->cov;
    double *c = w->center->data;
    lse_gauss_mean_of_means(parent, c);
    const double *pv = acc + (1 + d) * K; /* second-moment rows */
    if (cov == LSE_COV_TIED) {            /* pooled P */
        size_t p = 0;
        for (size_t a = 0; a < d; a++)
            for (size_t b = a; b < d; b++, p++) {
                s2[a * d + b] = pv[p];
                s2[b * d + a] = pv[p];
            }
    }
    for (size_t k = 0; k < K; k++) {
        const double n = acc[k];
        const double *mu = gsl_matrix_const_ptr(parent, k, 0);
        if (cov == LSE_COV_DIAG || cov == LSE_COV_SPHERICAL) {
            double tr = 0.0;
            for (size_t a = 0; a < d; a++) {
                const double da = mu[a] - c[a];
                const double sa = acc[(1 + a) * K + k];
                s1[k * d + a] = sa - n * da;
                const double corr = -2.0 * sa * da + n * da * da;
                if (cov == LSE_COV_DIAG)
                    s2[k * d + a] = pv[a * K + k] + corr;
                else
                    tr += corr;
            }
            if (cov == LSE_COV_SPHERICAL)
                s2[k] = pv[k] + tr;
            continue;
        }
        double *out = s2 + (cov == LSE_COV_TIED ? 0 : k * d * d);
        size_t p = 0;
        for (size_t a = 0; a < d; a++) {
            const double da = mu[a] - c[a];
            const double sa = acc[(1 + a) * K + k];
            s1[k * d + a] = sa - n * da;
            for (size_t b = a; b < d; b++, p++) {
                const double db = mu[b] - c[b];
                const double sb = acc[(1 + b) * K + k];
                const double corr = -sa * db - da * sb + n * da * db;
                if (cov == LSE_COV_TIED) {
                    out[a * d + b] += corr;
                    if (b != a)
                        out[b * d + a] += corr;
                } else {
                    const double v = pv[p * K + k] + corr;
                    out[a * d + b] = v;
                    out[b * d + a] = v;
                }
            }
        }
    }
}

/* --- whitened path (full/tied) ------------------------------------- */

/* Centered rows of the block x into res, their whitened rows into zblk:
 * Z = (X - c) [L_1^-T ... L_K^-T], a GEMM per group of components (tied:
 * one d-column block), and remember the block. */
static lse_status whiten_block(lse_gauss_work *w, const gsl_matrix *x)
{
    const size_t b = x->size1, d = w->dim, nf = w->nfac;
    const size_t gw = nf == 1 ? 1 : group_width(w);
    w->zrows = 0;
    gsl_matrix_view xc = gsl_matrix_submatrix(w->res, 0, 0, b, d);
    centered(w, x, 0, &xc.matrix);
    for (size_t k0 = 0; k0 < nf; k0 += gw) {
        const size_t g = nf - k0 < gw ? nf - k0 : gw;
        const gsl_matrix_const_view mv =
            gsl_matrix_const_submatrix(w->minv, 0, k0 * d, d, g * d);
        gsl_matrix_view z = gsl_matrix_submatrix(w->zblk, 0, k0 * d, b, g * d);
        const int rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0,
                                      &xc.matrix, &mv.matrix, 0.0, &z.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    cache_store(w, x);
    return LSE_OK;
}

lse_status lse_gauss_eval_wide(lse_gauss_work *w, const gsl_matrix *x,
                               gsl_matrix *s)
{
    if (!w->has_offsets || w->zblk == NULL)
        return LSE_EINTERNAL;
    if (w->fast)
        return fast_eval(w, x, s);
    const size_t b = x->size1, d = w->dim, K = w->n_comp;
    const size_t nf = w->nfac;
    const double *off = w->off->data, *cn = w->cnst->data;
    const size_t otda = w->off->tda, cs = w->cnst->stride;
    if (w->tri) { /* the triangle-aware kernels; nothing cached */
        gsl_matrix_view xc = gsl_matrix_submatrix(w->res, 0, 0, b, d);
        centered(w, x, 0, &xc.matrix);
        w->zrows = 0;
        lse_gauss_tri_eval(w, xc.matrix.data, xc.matrix.tda, b, s);
        return LSE_OK;
    }
    const lse_status st = whiten_block(w, x);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < b; i++) {
        const double *zi = gsl_matrix_const_ptr(w->zblk, i, 0);
        double *si = gsl_matrix_ptr(s, i, 0);
        for (size_t k = 0; k < K; k++) {
            /* L_k^-1 (x - mu_k) = L_k^-1 (x - c) - L_k^-1 (mu_k - c) */
            const double *zk = zi + (nf == 1 ? 0 : k * d);
            const double *o = off + k * otda;
            si[k] = cn[k * cs] - 0.5 * lse_gauss_sq_dist(zk, o, d);
        }
    }
    return LSE_OK;
}

lse_status lse_gauss_stats_wide(lse_gauss_work *w, const gsl_matrix *x,
                                const gsl_matrix *resp,
                                const gsl_vector *weight, double *acc)
{
    if (!w->has_offsets || w->zblk == NULL)
        return LSE_EINTERNAL;
    if (w->fast)
        return fast_stats(w, x, resp, weight, acc);
    if (w->tri) {
        lse_gauss_tri_stats(w, x, resp, weight, acc);
        return LSE_OK;
    }
    const size_t b = x->size1, d = w->dim, K = w->n_comp, nf = w->nfac;
    const int tied = w->cov == LSE_COV_TIED;
    gsl_matrix_view xc = gsl_matrix_submatrix(w->res, 0, 0, b, d);
    if (!cache_holds(w, x)) {
        const lse_status st = whiten_block(w, x);
        if (st != LSE_OK)
            return st;
    } else {
        centered(w, x, 0, &xc.matrix);
    }
    double *nacc = acc, *uacc = acc + K;
    double *cacc = acc + K + K * d; /* (d, K d) or (d, d) */
    const double *off = w->off->data;
    const size_t otda = w->off->tda;
    for (size_t i = 0; i < b; i++) {
        const double wi = weight != NULL ? gsl_vector_get(weight, i) : 1.0;
        const double *ri = gsl_matrix_const_ptr(resp, i, 0);
        for (size_t k = 0; k < K; k++)
            nacc[k] += ri[k] * wi;
    }
    const size_t gw = tied ? K : group_width(w);
    for (size_t k0 = 0; k0 < K; k0 += gw) {
        const size_t g = K - k0 < gw ? K - k0 : gw;
        /* W: rows [rho_ik z_ik' for k in the group] (tied: their sum) */
        gsl_matrix_view wm =
            gsl_matrix_submatrix(w->wgrp, 0, 0, b, tied ? d : g * d);
        for (size_t i = 0; i < b; i++) {
            const double *zi = gsl_matrix_const_ptr(w->zblk, i, 0);
            const double *ri = gsl_matrix_const_ptr(resp, i, 0);
            const double wi = weight != NULL ? gsl_vector_get(weight, i) : 1.0;
            double *wr = gsl_matrix_ptr(&wm.matrix, i, 0);
            if (tied)
                for (size_t j = 0; j < d; j++)
                    wr[j] = 0.0;
            for (size_t k = k0; k < k0 + g; k++) {
                const double rho = ri[k] * wi;
                const double *zk = zi + (nf == 1 ? 0 : k * d);
                const double *o = off + k * otda;
                double *u = uacc + k * d;
                if (tied) {
                    for (size_t j = 0; j < d; j++) {
                        const double v = rho * (zk[j] - o[j]);
                        wr[j] += v;
                        u[j] += v;
                    }
                } else {
                    double *wk = wr + (k - k0) * d;
                    for (size_t j = 0; j < d; j++) {
                        const double v = rho * (zk[j] - o[j]);
                        wk[j] = v;
                        u[j] += v;
                    }
                }
            }
        }
        gsl_matrix_view cm = tied ? gsl_matrix_view_array(cacc, d, d)
                                  : gsl_matrix_view_array_with_tda(
                                        cacc + k0 * d, d, g * d, K * d);
        const int rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &xc.matrix,
                                      &wm.matrix, 1.0, &cm.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    return LSE_OK;
}

int lse_gauss_moments(lse_gauss_work *w, const gsl_matrix *parent,
                      const gsl_matrix *chol, const double *acc, double *s1,
                      double *s2)
{
    if (w->cov == LSE_COV_DIAG || w->cov == LSE_COV_SPHERICAL) {
        if (!lse_gauss_fast_path(w, parent, chol, w->dd->data))
            return 0; /* the statistics are the moments already */
        fast_moments(w, parent, acc, s1, s2);
        return 1;
    }
    lse_gauss_wide_moments(w, parent, chol, acc, s1, s2);
    return 1;
}

void lse_gauss_wide_moments(lse_gauss_work *w, const gsl_matrix *parent,
                            const gsl_matrix *chol, const double *acc,
                            double *s1, double *s2)
{
    const size_t d = w->dim, K = w->n_comp;
    const int tied = w->cov == LSE_COV_TIED;
    if (lse_gauss_fast_path(w, parent, chol, w->dd->data)) {
        fast_moments(w, parent, acc, s1, s2);
        return;
    }
    if (w->tri) { /* the moments themselves, upper triangles of s2 */
        memcpy(s1, acc + K, K * d * sizeof(double));
        for (size_t k = 0; k < K; k++) {
            const double *in = acc + K + K * d + k * d * d;
            double *out = s2 + k * d * d;
            for (size_t a = 0; a < d; a++)
                for (size_t j = a; j < d; j++) {
                    out[a * d + j] = in[a * d + j];
                    out[j * d + a] = in[a * d + j];
                }
        }
        return;
    }
    const double *uacc = acc + K, *cacc = acc + K + K * d;
    const size_t ctda = tied ? d : K * d;
    double *c = w->center->data; /* scratch here: recomputed from parent */
    lse_gauss_mean_of_means(parent, c);
    double *t = w->dd->data; /* (d, d) scratch, tda d */
    const size_t ttda = w->dd->tda;
    if (tied)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                t[i * ttda + j] = cacc[i * ctda + j];
    for (size_t k = 0; k < K; k++) {
        const double *l = gsl_matrix_const_ptr(chol, tied ? 0 : k, 0);
        const double *u = uacc + k * d;
        const double *mu = gsl_matrix_const_ptr(parent, k, 0);
        /* s1_k = L u_k (lower triangle of L) */
        for (size_t i = 0; i < d; i++) {
            double v = 0.0;
            for (size_t m = 0; m <= i; m++)
                v += l[i * d + m] * u[m];
            s1[k * d + i] = v;
        }
        /* T = C_k - (mu_k - c) u_k' (tied: summed over k) */
        for (size_t i = 0; i < d; i++) {
            const double del = mu[i] - c[i];
            for (size_t j = 0; j < d; j++) {
                if (tied)
                    t[i * ttda + j] -= del * u[j];
                else
                    t[i * ttda + j] = cacc[i * ctda + k * d + j] - del * u[j];
            }
        }
        if (tied && k + 1 < K)
            continue;
        /* s2 = T L', symmetrized */
        double *out = s2 + (tied ? 0 : k * d * d);
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double v = 0.0;
                for (size_t m = 0; m <= j; m++)
                    v += t[i * ttda + m] * l[j * d + m];
                out[i * d + j] = v;
            }
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < i; j++) {
                const double v = 0.5 * (out[i * d + j] + out[j * d + i]);
                out[i * d + j] = v;
                out[j * d + i] = v;
            }
    }
}

/* ------------------------------------------------------------------ */
/* Diagonal and spherical gaussian: fused loops.                       */

lse_status lse_gauss_eval_diag(lse_gauss_work *w, const gsl_matrix *x,
                               gsl_matrix *s)
{
    if (w->fast)
        return fast_eval(w, x, s);
    lse_gauss_eval_diag_rows(w, x, s);
    return LSE_OK;
}

lse_status lse_gauss_stats_diag(lse_gauss_work *w, const gsl_matrix *x,
                                const gsl_matrix *mu, const gsl_matrix *resp,
                                const gsl_vector *weight, double *acc)
{
    if (w->fast)
        return fast_stats(w, x, resp, weight, acc);
    const size_t b = x->size1, d = w->dim, K = w->n_comp;
    const int sph = w->cov == LSE_COV_SPHERICAL;
    double *acc1 = acc + K, *acc2 = acc + K + K * d;
    gsl_vector_view rw = gsl_vector_subvector(w->rw, 0, b);
    for (size_t k = 0; k < K; k++) {
        acc[k] += lse_gauss_row_weights(resp, k, weight, &rw.vector);
        const double *m = gsl_matrix_const_ptr(mu, k, 0);
        double *s1 = acc1 + k * d, *s2 = acc2 + (sph ? k : k * d);
        lse_gauss_stats_diag_rows(x, m, rw.vector.data, sph, s1, s2, w->avx2);
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

int lse_gauss_describe(const void *config, char *buf, size_t len)
{
    const char *name = lse_cov_name(config_cov(config));
    const char *model =
        config != NULL
            ? lse_cov_model_name(((const lse_gaussian_config *)config)->model)
            : NULL;
    if (model != NULL)
        return snprintf(buf, len, "cov=%s model=%s",
                        name != NULL ? name : "?", model);
    return snprintf(buf, len, "cov=%s", name != NULL ? name : "?");
}
