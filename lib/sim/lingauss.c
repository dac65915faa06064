#include <float.h>
#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include "../exactsum-private.h"
#include "gauss_solve-private.h"
#include "kernels-private.h"
#include "lingauss-private.h"
#include "../linalg-private.h"

/*
 * lse_sim_lingauss: linear-Gaussian dynamics (SLDS modes).
 *   S_ik = log pi_k + log N(y_i; A_k x_i + b_k, Sigma_k)
 * with child rows y (x_{t+1}), context rows x (x_t) and parent rows the
 * offsets b_k (K, d). params: logw (K, 1, optional), A (K, d * dc) with
 * row k the row-major d x dc matrix A_k, chol as lse_sim_gaussian.
 * Derivations and the M-step: docs/sim-gaussian.md.
 */

static const char NAME[] = "lingauss";
static const char *const param_names[N_PARAM] = {"logw", "A", "chol"};
static const lse_gaussian_config default_config = {.cov = LSE_COV_FULL};

static lse_status check(const lse_sim_shape *shape, const void *config,
                        char *msg, size_t msg_len)
{
    lse_status st =
        lse_gauss_check_common(NAME, shape, config, P_CHOL, msg, msg_len);
    if (st != LSE_OK)
        return st;
    const size_t K = shape->n_parent, d = shape->d_child;
    const size_t dc = shape->d_context;
    if (dc == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: needs a context (x_t for child x_{t+1})",
                              NAME);
    const size_t ar = shape->param_rows[P_A], ac = shape->param_cols[P_A];
    if (ar == 0)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: the A parameter is required", NAME);
    if (ar != K || ac != d * dc)
        return lse_gauss_fail(msg, msg_len, LSE_EDIM,
                              "%s: A is %zux%zu, expected K x d_child*d_context"
                              " = %zux%zu",
                              NAME, ar, ac, K, d * dc);
    return LSE_OK;
}

static lse_status work_new(const lse_sim_shape *shape, const void *config,
                           void **out)
{
    if (out == NULL)
        return LSE_EFAULT;
    lse_gauss_work *w = NULL;
    lse_status st = LSE_OK;
    if (shape == NULL)
        st = LSE_EFAULT;
    else if (shape->d_context == 0)
        st = LSE_EINVAL;
    else
        st = lse_gauss_work_new(shape, config, &w);
    *out = w;
    return st;
}

static lse_status prepare(const lse_sim_args *a)
{
    if (a == NULL || a->work == NULL || a->param == NULL)
        return LSE_EFAULT;
    return lse_gauss_prepare(a->work, a->param[P_LOGW], a->param[P_CHOL], NULL);
}

/* A_k as a (d, dc) matrix: row k of A, row-major */
static _gsl_matrix_const_view mode_a(const gsl_matrix *a, size_t k, size_t d,
                                     size_t dc)
{
    return gsl_matrix_const_view_array(gsl_matrix_const_ptr(a, k, 0), d, dc);
}

/* R (b, d) <- Y - X A_k' - 1 b_k' (one dgemm) */
static lse_status residuals(const lse_sim_args *a, const lse_gauss_work *w,
                            size_t k, gsl_matrix *r)
{
    const size_t b = r->size1, d = w->dim, dc = w->dim_ctx;
    const gsl_matrix_const_view ak = mode_a(a->param[P_A], k, d, dc);
    int rc = gsl_matrix_memcpy(r, a->child);
    if (rc == GSL_SUCCESS)
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, a->context,
                            &ak.matrix, 1.0, r);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    const double *off = gsl_matrix_const_ptr(a->parent, k, 0);
    for (size_t i = 0; i < b; i++) {
        double *ri = gsl_matrix_ptr(r, i, 0);
        for (size_t j = 0; j < d; j++)
            ri[j] -= off[j];
    }
    return LSE_OK;
}

static lse_status check_a(const lse_gauss_work *w, const lse_sim_args *a)
{
    const gsl_matrix *am = a->param[P_A];
    if (am == NULL || a->param[P_CHOL] == NULL)
        return LSE_EFAULT;
    if (am->size1 != w->n_comp || am->size2 != w->dim * w->dim_ctx)
        return LSE_EDIM;
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Fused kernels (docs/performance.md): per row and mode, the residual
 * r = y - A_k x - b_k, its score, and the statistics, in registers. The
 * bodies take d and dc as arguments and are inlined into copies for the
 * common small sizes (d = dc = 1, 2, 3), where the compiler unrolls every
 * inner loop, and into a generic copy. */

/* r (d) = y - A_k x - b_k */
LSE_KERNEL void lg_residual(const double *y, const double *x, const double *ak,
                            const double *bk, double *r, const size_t d,
                            const size_t dc)
{
    for (size_t j = 0; j < d; j++) {
        double v = y[j] - bk[j];
        for (size_t m = 0; m < dc; m++)
            v -= ak[j * dc + m] * x[m];
        r[j] = v;
    }
}

/* Rows of a block: S_ik = c_k - 1/2 q_k(r_ik). r: scratch of d doubles. */
LSE_KERNEL void lg_eval_body(const lse_gauss_work *w, const lse_sim_args *a,
                             gsl_matrix *s, double *r, size_t i0,
                             const size_t d, const size_t dc)
{
    /* mode by mode, so that the loop over rows is the inner one (for the
     * small fixed sizes the compiler unrolls the rest and keeps r in
     * registers) */
    const size_t b = a->child->size1, K = w->n_comp;
    const gsl_matrix *am = a->param[P_A], *bm = a->parent;
    const gsl_matrix *y = a->child, *x = a->context;
    const size_t yt = y->tda, xt = x->tda, st = s->tda;
    const lse_cov_type cov = w->cov;
    for (size_t k = 0; k < K; k++) {
        const double *ak = am->data + k * am->tda, *bk = bm->data + k * bm->tda;
        const double cnk = w->cnst->data[k];
        const size_t f = cov == LSE_COV_TIED ? 0 : k;
        const double *mv = w->minv != NULL ? w->minv->data + f * d : NULL;
        const size_t mt = w->minv != NULL ? w->minv->tda : 0;
        const double *inv = w->inv->data + k * w->inv->tda;
        for (size_t i = i0; i < b; i++) {
            lg_residual(y->data + i * yt, x->data + i * xt, ak, bk, r, d, dc);
            double q = 0.0;
            if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
                /* z = L^-1 r: z_j = sum_{m <= j} r_m (L^-T)(m, j) */
                for (size_t j = 0; j < d; j++) {
                    double z = 0.0;
                    for (size_t m = 0; m <= j; m++)
                        z += r[m] * mv[m * mt + j];
                    q += z * z;
                }
            } else if (cov == LSE_COV_DIAG) {
                for (size_t j = 0; j < d; j++) {
                    const double z = r[j] * inv[j];
                    q += z * z;
                }
            } else {
                for (size_t j = 0; j < d; j++)
                    q += r[j] * r[j];
                q *= inv[0] * inv[0];
            }
            s->data[i * st + k] = cnk - 0.5 * q;
        }
    }
}

/* The lane kernels of the small sizes (LG_LN rows per vector, shared with
 * the fused pass of lingauss_fused.c) are in lingauss-private.h. */

/* lg_eval_body's scores of the rows [0, b - b % LG_LN), LG_LN rows at a
 * time (the same arithmetic per row: the same bits); returns the first row
 * not done. */
LSE_KERNEL size_t lg_eval8_body(const lse_gauss_work *w, const lse_sim_args *a,
                                gsl_matrix *s, const size_t d, const size_t dc)
{
    const size_t b = a->child->size1, K = w->n_comp, b8 = b - b % LG_LN;
    const gsl_matrix *am = a->param[P_A], *bm = a->parent;
    const size_t st = s->tda;
#if LG_SHUFFLE
    /* contiguous score rows of K <= 4: stored by shuffles */
    const int oshuf = st == K && K <= 4;
    lg_perm opm[4];
    for (size_t q = 0; oshuf && q < K; q++)
        lg_perm_out_make(&opm[q], K, q);
#endif
    for (size_t i0 = 0; i0 < b8; i0 += LG_LN) {
        lg_v yv[3], xv[3], r[3];
#if LG_SHUFFLE
        lg_v sk[4];
#endif
        lg_load8(a->child, a->context, i0, yv, xv, d, dc);
        for (size_t k = 0; k < K; k++) {
            const double *ak = am->data + k * am->tda;
            const double *bk = bm->data + k * bm->tda;
            lg_residual8(yv, xv, ak, bk, r, d, dc);
            lg_v sv;
            lg_score8(w, k, r, &sv, d);
#if LG_SHUFFLE
            if (oshuf) {
                sk[k] = sv;
                continue;
            }
#endif
            for (size_t l = 0; l < LG_LN; l++)
                s->data[(i0 + l) * st + k] = sv[l];
        }
#if LG_SHUFFLE
        if (oshuf)
            lg_store_rows(s->data + i0 * st, sk, opm, K);
#endif
    }
    return b8;
}

/* lg_stats_mode over the rows [0, b - b % LG_LN) with one running sum per
 * lane (lg_stats8_run), the lanes summed at the end (lg_hsum) into loc:
 * n | sxx (m x m, upper) | srx (d x m) | srr (lower of d x d, or d, or 1).
 * Returns the first row not done. */
LSE_KERNEL size_t lg_stats8_mode(const lse_gauss_work *w, const lse_sim_args *a,
                                 const gsl_matrix *resp,
                                 const gsl_vector *weight, size_t k,
                                 double *loc, const size_t d, const size_t dc)
{
    const size_t b = a->child->size1, b8 = b - b % LG_LN;
    lg_src src;
    lg_src_rows(&src, resp, weight, k, w->n_comp);
    lg_v v[LG_NSUM] = {{0.0}};
    lg_stats8_run(w, a, &src, k, v, 0, b8, d, dc);
    lg_sums_out(w, v, loc, d, dc);
    return b8;
}

/* Statistics of mode k over the rows of a block into sums n, sxx (upper
 * triangle of m x m), srx (d x m), srr (lower triangle of d x d, or d
 * for diag, or 1 for spherical), m = dc + 1. r: scratch of d doubles. */
LSE_KERNEL void lg_stats_mode(const lse_gauss_work *w, const lse_sim_args *a,
                              const gsl_matrix *resp, const gsl_vector *weight,
                              size_t k, double *n, double *sxx, double *srx,
                              double *srr, double *r, size_t i0,
                              const size_t d, const size_t dc)
{
    const size_t b = a->child->size1, m = dc + 1;
    const gsl_matrix *y = a->child, *x = a->context;
    const double *ak = a->param[P_A]->data + k * a->param[P_A]->tda;
    const double *bk = a->parent->data + k * a->parent->tda;
    const lse_cov_type cov = w->cov;
    for (size_t i = i0; i < b; i++) {
        double rho = resp->data[i * resp->tda + k];
        if (weight != NULL)
            rho *= weight->data[i * weight->stride];
        const double *yi = y->data + i * y->tda, *xi = x->data + i * x->tda;
        lg_residual(yi, xi, ak, bk, r, d, dc);
        *n += rho;
        /* a = [x, 1] */
        for (size_t p = 0; p < m; p++) {
            const double ap = p < dc ? xi[p] : 1.0;
            const double rap = rho * ap;
            for (size_t q = p; q < m; q++)
                sxx[p * m + q] += rap * (q < dc ? xi[q] : 1.0);
        }
        for (size_t j = 0; j < d; j++) {
            const double rr = rho * r[j];
            for (size_t p = 0; p < m; p++)
                srx[j * m + p] += rr * (p < dc ? xi[p] : 1.0);
            if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
                for (size_t l = 0; l <= j; l++)
                    srr[j * d + l] += rr * r[l];
            } else if (cov == LSE_COV_DIAG) {
                srr[j] += rr * r[j];
            } else {
                srr[0] += rr * r[j];
            }
        }
    }
}

/* Every mode of a block into acc (layout of stats_size), then the mirrored
 * halves of the symmetric blocks. local: 1 = accumulate in a local array
 * first (small sizes: registers), 0 = in acc directly. */
LSE_KERNEL void lg_stats_body(const lse_gauss_work *w, const lse_sim_args *a,
                              const gsl_matrix *resp, const gsl_vector *weight,
                              double *acc, double *r, const size_t d,
                              const size_t dc, const int local,
                              const int lanes)
{
    const size_t K = w->n_comp, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const size_t s2 = tri ? d * d : cov == LSE_COV_DIAG ? d : 1;
    double *axx = acc + K, *arx = axx + K * m * m, *arr = arx + K * d * m;
    for (size_t k = 0; k < K; k++) {
        if (local) {
            double loc[LG_LOCAL] = {0.0};
            double *lxx = loc + 1, *lrx = lxx + m * m, *lrr = lrx + d * m;
            /* rows in groups of LG_LN across the lanes, the rest row by
             * row */
            const size_t b8 =
                lanes ? lg_stats8_mode(w, a, resp, weight, k, loc, d, dc) : 0;
            lg_stats_mode(w, a, resp, weight, k, loc, lxx, lrx, lrr, r, b8, d,
                          dc);
            lg_stats_add(w, acc, k, loc, d, dc);
        } else {
            double *sxx = axx + k * m * m, *srx = arx + k * d * m;
            double *srr = arr + (cov == LSE_COV_TIED ? 0 : k * s2);
            lg_stats_mode(w, a, resp, weight, k, acc + k, sxx, srx, srr, r, 0,
                          d, dc);
        }
    }
    lg_stats_mirror(w, acc, d, dc);
}

/* Exact statistics (stats_exact): the products of lg_stats_mode, computed
 * in the same order and rounded the same way, each added exactly to its
 * accumulator (layout of stats_size; sxx only in its upper, srr only in its
 * lower triangle). Mode by mode over steps of rows, so that one mode's
 * accumulators stay in the L1 cache. fast: the two-digit additions, room
 * reserved per step (lse_xsum_reserve2); else the checked ones. */
#define LG_XADD(X, V)                                                          \
    do {                                                                       \
        if (fast)                                                              \
            lse_xsum_add2((X), (V));                                           \
        else                                                                   \
            lse_xsum_add_inline((X), (V));                                     \
    } while (0)

LSE_KERNEL void lg_stats_exact_rows(const lse_gauss_work *w,
                                    const lse_sim_args *a,
                                    const gsl_matrix *resp,
                                    const gsl_vector *weight, lse_xsum *acc,
                                    size_t k, size_t i0, size_t i1, int fast,
                                    double *r, const size_t d, const size_t dc)
{
    const size_t K = w->n_comp, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const int tri = cov == LSE_COV_FULL || cov == LSE_COV_TIED;
    const size_t s2 = tri ? d * d : cov == LSE_COV_DIAG ? d : 1;
    const gsl_matrix *y = a->child, *x = a->context, *am = a->param[P_A];
    const double *ak = am->data + k * am->tda;
    const double *bk = a->parent->data + k * a->parent->tda;
    lse_xsum *axx = acc + K, *arx = axx + K * m * m, *arr = arx + K * d * m;
    lse_xsum *sxx = axx + k * m * m, *srx = arx + k * d * m;
    lse_xsum *srr = arr + (cov == LSE_COV_TIED ? 0 : k * s2);
    for (size_t i = i0; i < i1; i++) {
        double rho = resp->data[i * resp->tda + k];
        if (weight != NULL)
            rho *= weight->data[i * weight->stride];
        if (rho == 0.0)
            continue; /* every product is +-0: adds nothing */
        const double *yi = y->data + i * y->tda, *xi = x->data + i * x->tda;
        lg_residual(yi, xi, ak, bk, r, d, dc);
        LG_XADD(acc + k, rho);
        for (size_t p = 0; p < m; p++) {
            const double ap = p < dc ? xi[p] : 1.0;
            const double rap = rho * ap;
            for (size_t q = p; q < m; q++)
                LG_XADD(sxx + p * m + q, rap * (q < dc ? xi[q] : 1.0));
        }
        for (size_t j = 0; j < d; j++) {
            const double rr = rho * r[j];
            for (size_t p = 0; p < m; p++)
                LG_XADD(srx + j * m + p, rr * (p < dc ? xi[p] : 1.0));
            if (tri) {
                for (size_t l = 0; l <= j; l++)
                    LG_XADD(srr + j * d + l, rr * r[l]);
            } else if (cov == LSE_COV_DIAG) {
                LG_XADD(srr + j, rr * r[j]);
            } else {
                LG_XADD(srr, rr * r[j]);
            }
        }
    }
}
#undef LG_XADD

LSE_KERNEL void lg_stats_exact_body(const lse_gauss_work *w,
                                    const lse_sim_args *a,
                                    const gsl_matrix *resp,
                                    const gsl_vector *weight, lse_xsum *acc,
                                    double *r, const size_t d, const size_t dc)
{
    const size_t b = a->child->size1, K = w->n_comp, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const size_t s2 = lse_gauss_s2_size(cov, K, d);
    const size_t n_acc = K * (1 + m * m + d * m) + s2;
    /* the most terms an accumulator gets per row (Srr: K when tied, d when
     * spherical) */
    const size_t per_row = (cov == LSE_COV_TIED ? K : 1) *
                           (cov == LSE_COV_SPHERICAL ? d : 1);
    const int fast = per_row <= LSE_XSUM_FAST_MAX;
    const size_t step = fast ? LSE_XSUM_FAST_MAX / per_row : b;
    for (size_t i0 = 0; i0 < b; i0 += step) {
        const size_t i1 = b - i0 < step ? b : i0 + step;
        if (fast)
            lse_xsum_reserve2(acc, n_acc, (int64_t)((i1 - i0) * per_row));
        for (size_t k = 0; k < K; k++)
            lg_stats_exact_rows(w, a, resp, weight, acc, k, i0, i1, fast, r,
                                d, dc);
    }
}

/* The copies: (d, dc) = (1, 1), (1, 2), (2, 2), (3, 3) and any. LANES: run
 * the small sizes LG_LN rows per vector (the AVX-512 copy, where a vector
 * of 8 doubles is one register; with AVX2 or SSE2 GCC splits it and the
 * two-vector shuffles, and the row loops are faster). */
#define LG_EVAL8(L, D, DC) ((L) ? lg_eval8_body(w, a, s, D, DC) : 0)
#define LG_COPIES(SUFFIX, TARGET, LANES)                                       \
    TARGET static void lg_eval_##SUFFIX(const lse_gauss_work *w,               \
                                        const lse_sim_args *a, gsl_matrix *s,  \
                                        double *r)                             \
    {                                                                          \
        const size_t d = w->dim, dc = w->dim_ctx;                              \
        double rl[3];                                                          \
        if (d == 1 && dc == 1)                                                 \
            lg_eval_body(w, a, s, rl, LG_EVAL8(LANES, 1, 1), 1, 1);        \
        else if (d == 1 && dc == 2)                                            \
            lg_eval_body(w, a, s, rl, LG_EVAL8(LANES, 1, 2), 1, 2);        \
        else if (d == 2 && dc == 2)                                            \
            lg_eval_body(w, a, s, rl, LG_EVAL8(LANES, 2, 2), 2, 2);        \
        else if (d == 3 && dc == 3)                                            \
            lg_eval_body(w, a, s, rl, LG_EVAL8(LANES, 3, 3), 3, 3);        \
        else                                                                   \
            lg_eval_body(w, a, s, r, 0, d, dc);                                \
    }                                                                          \
    TARGET static void lg_stats_##SUFFIX(                                      \
        const lse_gauss_work *w, const lse_sim_args *a,                        \
        const gsl_matrix *resp, const gsl_vector *weight, double *acc,         \
        double *r)                                                             \
    {                                                                          \
        const size_t d = w->dim, dc = w->dim_ctx;                              \
        double rl[3];                                                          \
        if (d == 1 && dc == 1)                                                 \
            lg_stats_body(w, a, resp, weight, acc, rl, 1, 1, 1, LANES);        \
        else if (d == 1 && dc == 2)                                            \
            lg_stats_body(w, a, resp, weight, acc, rl, 1, 2, 1, LANES);        \
        else if (d == 2 && dc == 2)                                            \
            lg_stats_body(w, a, resp, weight, acc, rl, 2, 2, 1, LANES);        \
        else if (d == 3 && dc == 3)                                            \
            lg_stats_body(w, a, resp, weight, acc, rl, 3, 3, 1, LANES);        \
        else                                                                   \
            lg_stats_body(w, a, resp, weight, acc, r, d, dc, 0, 0);            \
    }                                                                          \
    TARGET static void lg_stats_exact_##SUFFIX(                                \
        const lse_gauss_work *w, const lse_sim_args *a,                        \
        const gsl_matrix *resp, const gsl_vector *weight, lse_xsum *acc,       \
        double *r)                                                             \
    {                                                                          \
        const size_t d = w->dim, dc = w->dim_ctx;                              \
        double rl[3];                                                          \
        if (d == 1 && dc == 1)                                                 \
            lg_stats_exact_body(w, a, resp, weight, acc, rl, 1, 1);            \
        else if (d == 2 && dc == 2)                                            \
            lg_stats_exact_body(w, a, resp, weight, acc, rl, 2, 2);            \
        else if (d == 3 && dc == 3)                                            \
            lg_stats_exact_body(w, a, resp, weight, acc, rl, 3, 3);            \
        else                                                                   \
            lg_stats_exact_body(w, a, resp, weight, acc, r, d, dc);            \
    }

LG_COPIES(plain, , 0)
#if LSE_HAVE_AVX2_PATH
LG_COPIES(avx2, LSE_TARGET_AVX2, 0)
LG_COPIES(avx512, LSE_TARGET_AVX512, 1)
#endif

static void lg_eval(const lse_gauss_work *w, const lse_sim_args *a,
                    gsl_matrix *s, double *r)
{
#if LSE_HAVE_AVX2_PATH
    if (w->fma == 2) {
        lg_eval_avx512(w, a, s, r);
        return;
    }
    if (w->avx2) {
        lg_eval_avx2(w, a, s, r);
        return;
    }
#endif
    lg_eval_plain(w, a, s, r);
}

static void lg_stats(const lse_gauss_work *w, const lse_sim_args *a,
                     const gsl_matrix *resp, const gsl_vector *weight,
                     double *acc, double *r)
{
#if LSE_HAVE_AVX2_PATH
    if (w->fma == 2) {
        lg_stats_avx512(w, a, resp, weight, acc, r);
        return;
    }
    if (w->avx2) {
        lg_stats_avx2(w, a, resp, weight, acc, r);
        return;
    }
#endif
    lg_stats_plain(w, a, resp, weight, acc, r);
}

static void lg_stats_exact(const lse_gauss_work *w, const lse_sim_args *a,
                           const gsl_matrix *resp, const gsl_vector *weight,
                           lse_xsum *acc, double *r)
{
#if LSE_HAVE_AVX2_PATH
    if (w->fma == 2) {
        lg_stats_exact_avx512(w, a, resp, weight, acc, r);
        return;
    }
    if (w->avx2) {
        lg_stats_exact_avx2(w, a, resp, weight, acc, r);
        return;
    }
#endif
    lg_stats_exact_plain(w, a, resp, weight, acc, r);
}

static lse_status eval(const lse_sim_args *a, gsl_matrix *s)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    lse_status st = lse_gauss_check_args(w, a, s);
    if (st == LSE_OK)
        st = check_a(w, a);
    if (st != LSE_OK)
        return st;
    if (!w->prepared)
        return LSE_EINTERNAL;
    if (a->child->size1 == 0)
        return LSE_OK;
    lg_eval(w, a, s, w->res->data);
    return LSE_OK;
}

static lse_status grad(const lse_sim_args *a, const gsl_matrix *g,
                       const lse_sim_grads *out)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    lse_status st = lse_gauss_check_args(w, a, g);
    if (st == LSE_OK)
        st = check_a(w, a);
    if (st != LSE_OK)
        return st;
    if (out == NULL)
        return LSE_EFAULT;
    if (!w->prepared)
        return LSE_EINTERNAL;
    const size_t b = a->child->size1, d = w->dim, K = w->n_comp;
    const size_t dc = w->dim_ctx;
    if (b == 0)
        return LSE_OK;
    gsl_matrix *gchol = out->param != NULL ? out->param[P_CHOL] : NULL;
    gsl_matrix *glogw = out->param != NULL ? out->param[P_LOGW] : NULL;
    gsl_matrix *ga = out->param != NULL ? out->param[P_A] : NULL;
    if ((out->child != NULL &&
         (out->child->size1 != b || out->child->size2 != d)) ||
        (out->parent != NULL &&
         (out->parent->size1 != K || out->parent->size2 != d)) ||
        (out->context != NULL &&
         (out->context->size1 != b || out->context->size2 != dc)) ||
        (ga != NULL && (ga->size1 != K || ga->size2 != d * dc)) ||
        (gchol != NULL && (gchol->size1 != a->param[P_CHOL]->size1 ||
                           gchol->size2 != a->param[P_CHOL]->size2)))
        return LSE_EDIM;

    if (out->child != NULL || out->parent != NULL || out->context != NULL ||
        ga != NULL || gchol != NULL) {
        gsl_matrix_view r = gsl_matrix_submatrix(w->res, 0, 0, b, d);
        for (size_t k = 0; k < K; k++) {
            st = residuals(a, w, k, &r.matrix);
            /* rows become P_i = G_ik Sigma_k^-1 r_ik */
            if (st == LSE_OK)
                st = lse_gauss_grad_resid(w, k, g, &r.matrix, gchol);
            if (st != LSE_OK)
                return st;
            const gsl_matrix *p = &r.matrix;
            int rc = GSL_SUCCESS;
            /* dsim/dy = -Sigma^-1 r, dsim/db = Sigma^-1 r,
             * dsim/dx = A' Sigma^-1 r, dsim/dA = Sigma^-1 r x' */
            if (out->child != NULL)
                rc = gsl_matrix_sub(out->child, p);
            if (rc == GSL_SUCCESS && out->context != NULL) {
                const gsl_matrix_const_view ak =
                    mode_a(a->param[P_A], k, d, dc);
                rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, p,
                                    &ak.matrix, 1.0, out->context);
            }
            if (rc == GSL_SUCCESS && ga != NULL) {
                gsl_matrix_view gak =
                    gsl_matrix_view_array(gsl_matrix_ptr(ga, k, 0), d, dc);
                rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, p,
                                    a->context, 1.0, &gak.matrix);
            }
            if (rc != GSL_SUCCESS)
                return lse_status_from_gsl(rc);
            if (out->parent != NULL) {
                double *gp = gsl_matrix_ptr(out->parent, k, 0);
                for (size_t i = 0; i < b; i++) {
                    const double *pi = gsl_matrix_const_ptr(p, i, 0);
                    for (size_t j = 0; j < d; j++)
                        gp[j] += pi[j];
                }
            }
        }
    }
    return lse_gauss_grad_logw_tail(w, a->param[P_LOGW], g, glogw);
}

/* acc: N (K) | Sxx (K, (dc+1)^2) | Srx (K, d (dc+1)) | Srr (s2 layout) */
static size_t stats_size(const lse_sim_shape *shape, const void *config)
{
    const lse_gaussian_config *c =
        config != NULL ? (const lse_gaussian_config *)config : &default_config;
    const size_t K = shape->n_parent, d = shape->d_child;
    const size_t m = shape->d_context + 1;
    return K * (1 + m * m + d * m) + lse_gauss_s2_size(c->cov, K, d);
}

/* The checks of stats and stats_exact (acc: their accumulator). */
static lse_status stats_args(const lse_sim_args *a, const gsl_matrix *resp,
                             const gsl_vector *weight, const void *acc)
{
    lse_gauss_work *w = a != NULL ? a->work : NULL;
    lse_status st = lse_gauss_check_args(w, a, resp);
    if (st == LSE_OK)
        st = check_a(w, a);
    if (st != LSE_OK)
        return st;
    if (acc == NULL)
        return LSE_EFAULT;
    if (weight != NULL && weight->size != a->child->size1)
        return LSE_EDIM;
    return LSE_OK;
}

static lse_status stats(const lse_sim_args *a, const gsl_matrix *resp,
                        const gsl_vector *weight, double *acc)
{
    const lse_status st = stats_args(a, resp, weight, acc);
    if (st == LSE_OK && a->child->size1 > 0)
        lg_stats(a->work, a, resp, weight, acc,
                 ((lse_gauss_work *)a->work)->res->data);
    return st;
}

static lse_status stats_exact(const lse_sim_args *a, const gsl_matrix *resp,
                              const gsl_vector *weight, lse_xsum *acc)
{
    const lse_status st = stats_args(a, resp, weight, acc);
    if (st == LSE_OK && a->child->size1 > 0)
        lg_stats_exact(a->work, a, resp, weight, acc,
                       ((lse_gauss_work *)a->work)->res->data);
    return st;
}

/* delta (d, m) <- Srx Sxx^-1 for component k; LSE_ENUMERIC if Sxx is
 * singular to working precision */
static lse_status regress(lse_gauss_work *w, size_t k, const double *sxx_k,
                          const double *srx_k, double n_k, char *msg,
                          size_t msg_len)
{
    const size_t d = w->dim, m = w->dim_ctx + 1;
    const gsl_matrix_const_view sxx = gsl_matrix_const_view_array(sxx_k, m, m);
    const gsl_matrix_const_view srx = gsl_matrix_const_view_array(srx_k, d, m);
    int rc = gsl_matrix_memcpy(w->sxx, &sxx.matrix);
    if (rc == GSL_SUCCESS)
        rc = gsl_matrix_memcpy(w->delta, &srx.matrix);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc), "%s: %s",
                              NAME, gsl_strerror(rc));
    /* the upper triangle is the statistic (stats_exact fills only it) */
    for (size_t p = 0; p < m; p++)
        for (size_t q = p + 1; q < m; q++)
            gsl_matrix_set(w->sxx, q, p, gsl_matrix_get(w->sxx, p, q));
    rc = lse_chol_decomp1(w->sxx);
    double rcond = 0.0;
    if (rc == GSL_SUCCESS)
        rc = gsl_linalg_cholesky_rcond(w->sxx, &rcond, w->rcond_work);
    if (rc == GSL_EDOM || (rc == GSL_SUCCESS && !(rcond >= DBL_EPSILON)))
        return lse_gauss_fail(
            msg, msg_len, LSE_ENUMERIC,
            "%s: component %zu: the weighted normal equations "
            "sum_i r_i [x_i; 1][x_i; 1]' are singular (N_k = %g, rcond = %g): "
            "the mode's context rows are collinear or too few",
            NAME, k, n_k, rcond);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc),
                              "%s: Cholesky factorization failed: %s", NAME,
                              gsl_strerror(rc));
    /* delta = Srx L^-T L^-1 */
    rc = gsl_blas_dtrsm(CblasRight, CblasLower, CblasTrans, CblasNonUnit, 1.0,
                        w->sxx, w->delta);
    if (rc == GSL_SUCCESS)
        rc = gsl_blas_dtrsm(CblasRight, CblasLower, CblasNoTrans, CblasNonUnit,
                            1.0, w->sxx, w->delta);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc), "%s: %s",
                              NAME, gsl_strerror(rc));
    return LSE_OK;
}

/* Component k's residual covariance about its new fit, Srr - delta Srx'
 * (w->delta from regress; srx its Srx, arr every component's Srr), divided
 * by n_k into w->new_chol; tied: added into the pooled w->pool. */
static lse_status residual_cov(lse_gauss_work *w, size_t k, const double *srx,
                               const double *arr, double n_k, double reg_covar,
                               char *msg, size_t msg_len)
{
    const size_t d = w->dim, m = w->dim_ctx + 1;
    const lse_cov_type cov = w->cov;
    lse_status st = LSE_OK;
    int rc;
    const gsl_matrix_const_view srx_m = gsl_matrix_const_view_array(srx, d, m);
    switch (cov) {
    case LSE_COV_FULL: {
        const gsl_matrix_const_view srr =
            gsl_matrix_const_view_array(arr + k * d * d, d, d);
        rc = gsl_matrix_memcpy(w->dd, &srr.matrix);
        for (size_t i = 0; i < d; i++)
            for (size_t j = i + 1; j < d; j++)
                gsl_matrix_set(w->dd, i, j, gsl_matrix_get(w->dd, j, i));
        if (rc == GSL_SUCCESS)
            rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, w->delta,
                                &srx_m.matrix, 1.0, w->dd);
        if (rc != GSL_SUCCESS)
            return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc),
                                  "%s: %s", NAME, gsl_strerror(rc));
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j <= i; j++) {
                const double v = 0.5 *
                                 (gsl_matrix_get(w->dd, i, j) +
                                  gsl_matrix_get(w->dd, j, i)) /
                                 n_k;
                gsl_matrix_set(w->dd, i, j, v);
                gsl_matrix_set(w->dd, j, i, v);
            }
        st = lse_gauss_chol_from_cov(w, NAME, k, w->dd, reg_covar, n_k, msg,
                                     msg_len);
        break;
    }
    case LSE_COV_TIED:
        rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, w->delta,
                            &srx_m.matrix, 1.0, w->pool);
        if (rc != GSL_SUCCESS)
            return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc),
                                  "%s: %s", NAME, gsl_strerror(rc));
        break;
    case LSE_COV_DIAG:
    case LSE_COV_SPHERICAL: {
        /* diagonal of Srr - delta Srx' */
        double *v = gsl_matrix_ptr(w->dd, 0, 0);
        double trace = 0.0;
        for (size_t i = 0; i < d; i++) {
            const double *del = gsl_matrix_const_ptr(w->delta, i, 0);
            const double *sr = srx + i * m;
            double dot = 0.0;
            for (size_t j = 0; j < m; j++)
                dot += del[j] * sr[j];
            if (cov == LSE_COV_DIAG)
                v[i] = (arr[k * d + i] - dot) / n_k;
            else
                trace += dot;
        }
        if (cov == LSE_COV_SPHERICAL)
            v[0] = (arr[k] - trace) / (n_k * (double)d);
        st = lse_gauss_chol_from_var(w, NAME, k, v, reg_covar, n_k, msg,
                                     msg_len);
        break;
    }
    }
    return st;
}

static lse_status solve(const lse_sim_args *a, const double *acc,
                        gsl_matrix *parent, gsl_matrix *const *param,
                        const lse_mstep_opts *opts, lse_mstep_report *report,
                        char *msg, size_t msg_len)
{
    lse_status st = lse_gauss_solve_begin(
        a, acc, parent, param, P_CHOL, P_LOGW,
        param != NULL && a != NULL && a->param != NULL &&
            (param[P_A] == NULL || a->param[P_A] == NULL),
        NAME, msg, msg_len);
    if (st != LSE_OK)
        return st;
    lse_gauss_work *w = a->work;
    const size_t d = w->dim, K = w->n_comp, dc = w->dim_ctx, m = dc + 1;
    const lse_cov_type cov = w->cov;
    const gsl_matrix *chol = a->param[P_CHOL], *am = a->param[P_A];
    if (am->size1 != K || am->size2 != d * dc || param[P_A]->size1 != K ||
        param[P_A]->size2 != d * dc)
        return lse_gauss_solve_shape_fail(NAME, msg, msg_len);
    lse_mstep_opts o;
    st = lse_gauss_opts(NAME, opts, &o, msg, msg_len);
    if (st != LSE_OK)
        return st;
    const size_t n_acc = K * (1 + m * m + d * m) + lse_gauss_s2_size(cov, K, d);
    double total = 0.0;
    st = lse_gauss_check_counts(NAME, acc, n_acc, K, &total, msg, msg_len);
    if (st != LSE_OK)
        return st;
    const double *axx = acc + K, *arx = axx + K * m * m;
    const double *arr = arx + K * d * m;

    /* everything goes to scratch first: nothing is written on failure */
    int rc = gsl_matrix_memcpy(w->new_parent, a->parent);
    if (rc == GSL_SUCCESS)
        rc = gsl_matrix_memcpy(w->new_chol, chol);
    if (rc == GSL_SUCCESS)
        rc = gsl_matrix_memcpy(w->new_a, am);
    if (rc != GSL_SUCCESS)
        return lse_gauss_fail(msg, msg_len, lse_status_from_gsl(rc), "%s: %s",
                              NAME, gsl_strerror(rc));
    /* Srr: its lower triangle is the statistic (stats_exact fills only
     * that; stats mirrors it) */
    if (cov == LSE_COV_TIED)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(w->pool, i, j,
                               j <= i ? arr[i * d + j] : arr[j * d + i]);

    for (size_t k = 0; k < K; k++) {
        const double n_k = acc[k];
        if (lse_gauss_is_empty(n_k, o.min_count))
            continue;
        const double *srx = arx + k * d * m;
        st = regress(w, k, axx + k * m * m, srx, n_k, msg, msg_len);
        if (st != LSE_OK)
            return st;
        /* [A_k b_k] += delta */
        double *ak = gsl_matrix_ptr(w->new_a, k, 0);
        double *bk = gsl_matrix_ptr(w->new_parent, k, 0);
        for (size_t i = 0; i < d; i++) {
            const double *del = gsl_matrix_const_ptr(w->delta, i, 0);
            for (size_t j = 0; j < dc; j++)
                ak[i * dc + j] += del[j];
            bk[i] += del[dc];
        }
        st = residual_cov(w, k, srx, arr, n_k, o.reg_covar, msg, msg_len);
        if (st != LSE_OK)
            return st;
    }
    if (cov == LSE_COV_TIED) {
        st = lse_gauss_solve_pooled(w, NAME, total, o.reg_covar, msg, msg_len);
        if (st != LSE_OK)
            return st;
    }

    return lse_gauss_solve_commit(w, NAME, acc, o.min_count, parent,
                                  param[P_CHOL], param[P_A], param[P_LOGW],
                                  report, msg, msg_len);
}

static const lse_sim_type lingauss_type = {
    .name = NAME,
    .n_param = N_PARAM,
    .param_names = param_names,
    .optional_params = 1u << P_LOGW,
    .config_size = sizeof(lse_gaussian_config),
    .config_default = &default_config,
    .flags = LSE_SIM_NEEDS_CONTEXT,
    .check = check,
    .work_new = work_new,
    .work_free = lse_gauss_work_free,
    .prepare = prepare,
    .eval = eval,
    .grad = grad,
    .stats_size = stats_size,
    .stats = stats,
    .stats_exact = stats_exact,
    .solve = solve,
    .describe = lse_gauss_describe,
};

const lse_sim_type *const lse_sim_lingauss = &lingauss_type;
