#ifndef LSEGRAPH_GAUSS_PRIVATE_H
#define LSEGRAPH_GAUSS_PRIVATE_H

#include <lsegraph/core.h>

#include "kernels-private.h" /* LSE_HAVE_AVX2_PATH, LSE_TARGET_* */

/*
 * Shared machinery of the Gaussian family (lib/sim/gauss_common.c; its
 * vectorized kernels in gauss_simd.c, the M-step helpers from
 * lse_gauss_s2_size on in gauss_mstep.c):
 * lse_sim_gaussian (lib/sim/gaussian.c) and lse_sim_lingauss
 * (lib/sim/lingauss.c). Both score a residual r_ik (the data minus the
 * component's prediction) with
 *
 *   S_ik = log pi_k - 1/2 r_ik' Sigma_k^-1 r_ik - 1/2 log det(2 pi Sigma_k)
 *
 * where Sigma_k = L_k L_k' comes from the "chol" parameter in one of four
 * layouts (lse_cov_type). The type files form the residuals; this file
 * turns residuals into scores, gradients and covariances.
 * Derivations: docs/sim-gaussian.md.
 */

/* Index of the optional log-weight parameter in both types. */
#define LSE_GAUSS_LOGW 0

/* Rows per internal chunk of the wide kernels: a chunk's (rows, K*d)
 * scratch holds about this many doubles (512 KiB), so the working set stays
 * in cache whatever block size the term uses. A tuning constant, not a
 * numerical one: results do not depend on it beyond round-off. */
#define LSE_GAUSS_CHUNK_DOUBLES 65536

/* Workspace of one term. The factor cache is filled by prepare(); the
 * block buffers are sized by shape->block rows (the wide buffers by the
 * chunk); the solve buffers are used by the closed-form M-step only.
 * nfac = K for full, 1 for tied (number of distinct factors). */
typedef struct lse_gauss_work {
    lse_cov_type cov;
    lse_cov_model model;          /* gaussian: mclust model or NONE */
    struct lse_gauss_mclust *mcl; /* its M-step scratch (gauss_mclust.c) */
    size_t n_comp;   /* K = n_parent */
    size_t dim;      /* d = d_child */
    size_t dim_ctx;  /* d_context (lingauss), 0 for gaussian */
    size_t block;    /* most child rows per call */
    size_t chunk;    /* rows per chunk of the wide kernels */
    size_t nfac;     /* full: K, tied: 1, diag/spherical: K */
    int prepared;    /* factor cache valid (prepare ran since work_new/solve) */
    int has_offsets; /* prepare got the parents: center and off are valid */
    unsigned gen;    /* bumped by every prepare (tags the E-step cache) */
    int s_clean;     /* the last eval's scores are all checked: no NaN, no
                        +INFINITY (lse_sim_clean_fn) */
    double *pkey;    /* full/tied: the logw | chol | parent values of the
                        last successful prepare (lse_gauss_prepare skips
                        a prepare of the same values), or NULL */
    size_t pkey_n;   /* its doubles; 0: no key */
    int avx2;        /* run the AVX2 copies of the fused loops */
    int moments;     /* solve gets the moments N | s1 | s2 shifted by the
                        current means (lse_gauss_s2_size layout) instead of
                        the statistics of the path prepare chose (the
                        expected statistics of lib/mstep_missing.c) */

    /* factor cache (prepare) */
    gsl_vector *logpi;  /* (K) log pi_k, 0 when there is no logw */
    gsl_vector *cnst;   /* (K) log pi_k - 1/2 log det(2 pi Sigma_k) */
    gsl_matrix *inv;    /* full/tied: (nfac, d) 1/L_jj; diag: (K, d) 1/l_kj;
                           spherical: (K, 1) 1/l_k */
    gsl_matrix *minv;   /* full/tied: (d, nfac*d), block f = L_f^-T, so that
                           R * block f = Z (rows L_f^-1 r_i); else NULL */
    gsl_vector *center; /* (d) mean of the parents (gaussian full/tied) */
    gsl_matrix *off;    /* (K, d) (mu_k - center) L_k^-T (gaussian) */
    gsl_matrix *mut;    /* diag/spherical gaussian: (d, K) the means
                           transposed, so the fused loops run along k */
    gsl_matrix *invt;   /* diag: (d, K) 1/l_kj transposed; spherical:
                           (1, K) 1/l_k^2 */

    /* block buffers */
    gsl_matrix *res;    /* (block, d): residuals */
    gsl_matrix *tmp;    /* (block, d): scratch */
    gsl_matrix *aug;    /* (block, d_context + 1): [x, 1] (lingauss) */
    gsl_matrix *augw;   /* (block, d_context + 1): weighted [x, 1] */
    gsl_vector *rw;     /* (block): responsibility times row weight */
    gsl_matrix *dd;     /* (d, d) scratch */
    gsl_vector *colsum; /* (K) column sums of G */

    /* wide kernels (gaussian full/tied) */
    gsl_matrix *zall; /* (chunk, K*d) whitened residuals of every k */
    gsl_matrix *zg;   /* (chunk, K*d) the same scaled by G */
    gsl_matrix *macc; /* (nfac*d, d) sum_i G_ik z_ik z_ik' */
    gsl_matrix *uacc; /* (K, d) sum_i G_ik z_ik, contiguous */
    gsl_vector *ones; /* (chunk) all 1 */

    /* E-step cache (gaussian full/tied): eval keeps the whitened rows of
     * the block it scored (or, on the quadratic path, its monomials), so
     * that stats on the same block (right after the softmax, in the EM
     * solver's fused pass) does not redo the work */
    gsl_matrix *zblk; /* (block, nfac*d) (X - c) [L_f^-T] of that block */
    gsl_matrix *xblk; /* (block, d) its rows, compared bit for bit */
    size_t zrows;     /* rows cached; 0 = nothing cached */
    unsigned zgen;    /* gen of the factors the cache was made with */

    /* quadratic path (gaussian, docs/performance.md): with y = x - c,
     * S_ik = V_i q_k for monomials V_i = [1, y', vech(y y')'] (or y.^2,
     * |y|^2): one GEMM S = V Q for every k, and the M-step statistics are
     * V' R, another GEMM on the same V, kept from eval */
    int fast;          /* prepare chose the quadratic path */
    int fma;           /* AVX2 + FMA kernels instead of dgemm */
    size_t nv;         /* monomials per row (full 1 + d + d(d+1)/2, diag
                          1 + 2d, spherical 2 + d), 0 = path off */
    gsl_matrix *vblk;  /* (block, nv) V of the block eval scored */
    gsl_matrix *qcoef; /* (nv, kp) coefficients q_k as columns, zero-padded
                          to kp = K rounded up to 8 */
    gsl_matrix *rbuf;  /* (block, kp) R scaled by the row weights */
    gsl_matrix *qacc;  /* (nv, kp) statistics of one block (FMA kernels) */
    gsl_matrix *wgrp;  /* whitened path: (block, group * d) rho-scaled
                          whitened rows of a group of components */

    /* triangle-aware whitened path (full covariance with the FMA kernels
     * of gauss_tri_body.h; otherwise the GEMMs above): the E-step is
     * y L_k^-T with the zero half of each factor skipped, the M-step the
     * upper triangle of sum_i rho_ik r_ik r_ik' (r_ik = x_i - mu_k), so
     * each does about N K d^2 flops instead of 2 N K d^2 */
    int tri;          /* this workspace runs them */
    size_t dp;        /* d rounded up to a multiple of 8 */
    double *utri;     /* L_k^-T, K blocks of ustr doubles: strip s (columns
                         8 s .. 8 s + 7, zero-padded) as its rows m <
                         min(d, 8 s + 8), 8 doubles each, from 32 s (s + 1) */
    size_t ustr;      /* doubles per block of utri */
    double *otri;     /* (K, dp) (mu_k - c) L_k^-T, zero-padded */
    double *mtri;     /* (K, dp) the means, zero-padded */
    double *xtri;     /* (block, dp) the block's rows, zero-padded */
    double *wtri;     /* (block, dp) + 2 dp + 16: rho_ik (x_i - mu_k) */
    double *xqtri;    /* (block, dp) + 2 dp: xtri quad-major (the AVX2
                         copy, panels padded: ts_size) */
    double *rhot;     /* (block) rho_ik of one component */

    /* fused block pass of the diagonal quadratic path (gauss_diag_fused.c,
     * gauss-fused-private.h): its scratch (NULL: not available) and copy */
    double *fused;
    int fused_isa;

    /* solve buffers */
    gsl_matrix *new_parent; /* (K, d) */
    gsl_matrix *mom1;       /* gaussian full/tied: (K, d) s1 */
    gsl_matrix *mom2;       /* (nfac*d, d) s2 of every component (tied: 1) */
    gsl_matrix *new_chol;   /* (K or 1, chol columns) */
    gsl_matrix *new_a;      /* (K, d * d_context) lingauss */
    gsl_matrix *pool;       /* (d, d): tied pooled scatter */
    gsl_matrix *sxx;        /* (dc + 1, dc + 1) lingauss */
    gsl_matrix *delta;      /* (d, dc + 1) lingauss */
    gsl_vector *rcond_work; /* (3 (dc + 1)) lingauss */
} lse_gauss_work;

/* Sums of squares with four independent partial sums (a single running
 * sum is bound by the latency of the floating-point add); inline because
 * they run once per (row, component) pair. */
static inline double lse_gauss_sq_dist(const double *a, const double *b,
                                       size_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    const size_t n4 = n - n % 4;
    size_t j = 0;
    for (; j < n4; j += 4) {
        const double t0 = a[j] - b[j], t1 = a[j + 1] - b[j + 1];
        const double t2 = a[j + 2] - b[j + 2], t3 = a[j + 3] - b[j + 3];
        s0 += t0 * t0;
        s1 += t1 * t1;
        s2 += t2 * t2;
        s3 += t3 * t3;
    }
    for (; j < n; j++) {
        const double t = a[j] - b[j];
        s0 += t * t;
    }
    return (s0 + s1) + (s2 + s3);
}

/* ||a||^2 and sum_j (a_j s_j)^2 */
static inline double lse_gauss_sq_norm(const double *a, size_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    const size_t n4 = n - n % 4;
    size_t j = 0;
    for (; j < n4; j += 4) {
        s0 += a[j] * a[j];
        s1 += a[j + 1] * a[j + 1];
        s2 += a[j + 2] * a[j + 2];
        s3 += a[j + 3] * a[j + 3];
    }
    for (; j < n; j++)
        s0 += a[j] * a[j];
    return (s0 + s1) + (s2 + s3);
}

static inline double lse_gauss_sq_norm_scaled(const double *a, const double *s,
                                              size_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    const size_t n4 = n - n % 4;
    size_t j = 0;
    for (; j < n4; j += 4) {
        const double t0 = a[j] * s[j], t1 = a[j + 1] * s[j + 1];
        const double t2 = a[j + 2] * s[j + 2], t3 = a[j + 3] * s[j + 3];
        s0 += t0 * t0;
        s1 += t1 * t1;
        s2 += t2 * t2;
        s3 += t3 * t3;
    }
    for (; j < n; j++) {
        const double t = a[j] * s[j];
        s0 += t * t;
    }
    return (s0 + s1) + (s2 + s3);
}

/* Names and shapes of the covariance layouts: include/lsegraph/cov.h. */

/* Validate config (cov type) and, for the parameter at index chol_index,
 * the chol shape, plus the optional logw at LSE_GAUSS_LOGW. @p name is
 * the type's name, used in messages. */
lse_status lse_gauss_check_common(const char *name, const lse_sim_shape *shape,
                                  const void *config, size_t chol_index,
                                  char *msg, size_t msg_len);

/* Allocate a workspace (d = d_child, dc = d_context). */
lse_status lse_gauss_work_new(const lse_sim_shape *shape, const void *config,
                              lse_gauss_work **out);
void lse_gauss_work_free(void *work);

/* Fill the factor cache from logw ((K, 1) or NULL) and chol; with
 * @p parent (the means, gaussian) also the center and whitened offsets of
 * the wide kernels. LSE_ENUMERIC for a zero diagonal entry of a factor,
 * LSE_ENONFINITE for a non-finite factor, logw or parent entry, LSE_EDOM
 * when every logw is -INFINITY. */
lse_status lse_gauss_prepare(lse_gauss_work *w, const gsl_matrix *logw,
                             const gsl_matrix *chol, const gsl_matrix *parent);

/* The quadratic path loses about eps * kappa relative accuracy in scores
 * and covariances, kappa = max_k ||L_k^-1 (mu_k - c)||^2 (the squared
 * distance, in standard deviations of the component, from the center c to
 * its mean); above this kappa the whitened path (loss eps * sqrt(kappa))
 * runs instead. */
#define LSE_GAUSS_FAST_KAPPA 1e4

/* 1 when the quadratic path may run for these parameters: the workspace
 * has it (w->nv > 0) and kappa <= LSE_GAUSS_FAST_KAPPA. The same arithmetic
 * in prepare and solve, so both take the same decision. scratch: 2 d. */
int lse_gauss_fast_path(const lse_gauss_work *w, const gsl_matrix *parent,
                        const gsl_matrix *chol, double *scratch);

/* Statistics of the wide M-step (gaussian full/tied, needs prepare with
 * the parents): with z_ik = L_k^-1 (x_i - mu_k), rho_ik = R_ik w_i and
 * c the mean of the means, ADDS to acc
 *   N_k = sum_i rho_ik                               (K)
 *   u_k = sum_i rho_ik z_ik                          (K, d)
 *   C   = sum_i (x_i - c) [rho_i1 z_i1' ... rho_iK z_iK']
 *         (d, K*d); tied: the sum of its K blocks (d, d)
 * one GEMM per chunk for every component; lse_gauss_wide_moments turns
 * them into the shifted moments of the M-step. Reuses the whitened rows of
 * the last eval when x is the block eval scored.
 * On the quadratic path (w->fast) the layout is instead, with y = x - c:
 *   full: (nv, K) row-major = sum_i [1, y_i', vech(y_i y_i')']' rho_i'
 *         (row 0 is N), i.e. N | s1c (d, K) | P (d(d+1)/2, K)
 *   tied: N (K) | s1c (d, K) | sum_k P_k (d(d+1)/2)
 * On the triangle-aware path (w->tri, full only) the moments themselves:
 *   N (K) | s1 (K, d) | s2 (K, d, d), upper triangles (lse_gauss_tri_stats)
 * All layouts fit in K + K d + (K d^2 or d^2) doubles. */
lse_status lse_gauss_stats_wide(lse_gauss_work *w, const gsl_matrix *x,
                                const gsl_matrix *resp,
                                const gsl_vector *weight, double *acc);

/* From the statistics above at the current parameters (parent = mu (K, d),
 * chol): s1_k = sum rho (x - mu_k) = L_k u_k into s1 (K, d) and
 * s2_k = sum rho (x - mu_k)(x - mu_k)' = (C_k - (mu_k - c) u_k') L_k'
 * into s2 (K*d*d; tied: the sum over k, d*d), symmetrized. Uses the
 * workspace's center and dd as scratch (solve runs after the E-step). */
void lse_gauss_wide_moments(lse_gauss_work *w, const gsl_matrix *parent,
                            const gsl_matrix *chol, const double *acc,
                            double *s1, double *s2);

/* c = mean of the K rows of parent (d); the same arithmetic everywhere,
 * so stats and solve agree on c bit for bit. */
void lse_gauss_mean_of_means(const gsl_matrix *parent, double *c);

/* diag/spherical gaussian (need prepare with the parents): S (b, K) for
 * children x, and the statistics ADDED to acc: on the direct path the
 * shifted N | s1 | s2 (fused loops along k for eval and d for stats, AVX2
 * copies when the CPU has it); on the quadratic path (w->fast) the GEMMs
 * of lse_gauss_stats_wide with V = [1, y', (y.^2)'] (diag) or
 * [1, y', |y|^2] (spherical): N | s1c (d, K) | P (d, K) or (1, K). */
lse_status lse_gauss_eval_diag(lse_gauss_work *w, const gsl_matrix *x,
                               gsl_matrix *s);
lse_status lse_gauss_stats_diag(lse_gauss_work *w, const gsl_matrix *x,
                                const gsl_matrix *mu, const gsl_matrix *resp,
                                const gsl_vector *weight, double *acc);

/* The M-step moments N | s1 | s2 (shifted by the current means, layout of
 * lse_gauss_s2_size) from whatever statistics the path that prepare chose
 * accumulated: full/tied always (whitened or quadratic statistics), diag
 * and spherical on the quadratic path; returns 1 when s1, s2 were
 * written, 0 when acc holds them already (direct diag/spherical path). */
int lse_gauss_moments(lse_gauss_work *w, const gsl_matrix *parent,
                      const gsl_matrix *chol, const double *acc, double *s1,
                      double *s2);

/* Wide kernels of lse_sim_gaussian with full or tied covariance (need
 * prepare with the parents). eval: S (b, K) for children x (b, d).
 * grad: ADD dE/dx into gchild (b, d), dE/dmu into gparent (K, d), dE/dchol
 * into gchol; each may be NULL. One GEMM per chunk for all components. */
lse_status lse_gauss_eval_wide(lse_gauss_work *w, const gsl_matrix *x,
                               gsl_matrix *s);
lse_status lse_gauss_grad_wide(lse_gauss_work *w, const gsl_matrix *x,
                               const gsl_matrix *g, gsl_matrix *gchild,
                               gsl_matrix *gparent, gsl_matrix *gchol);

/* Gradient through the residuals of component k. On input r (b, d) holds
 * the residuals r_i; on output row i is g_i Sigma_k^-1 r_i with
 * g = G(:, k), i.e. -dE/dr_i. dE/dchol for component k is ADDED to
 * @p gchol (the whole chol gradient matrix; may be NULL). */
lse_status lse_gauss_grad_resid(lse_gauss_work *w, size_t k,
                                const gsl_matrix *g, gsl_matrix *r,
                                gsl_matrix *gchol);

/* ADD dE/dlogw into glogw (K, 1): sum_i G_ik - pi_k sum_ik G_ik. */
void lse_gauss_grad_logw(lse_gauss_work *w, const gsl_matrix *g,
                         gsl_matrix *glogw);

/* Check that a block's kernel arguments fit the workspace: child rows
 * <= block, parent/params present, G or resp of shape (b, K). */
lse_status lse_gauss_check_args(const lse_gauss_work *w, const lse_sim_args *a,
                                const gsl_matrix *bk);

/* M-step helpers (lib/sim/gauss_mstep.c) --------------------------- */

/* Statistics layout shared by both types: N (K), then the type's own
 * blocks, then the second-moment block: K * s2 doubles (s2 = d*d, d or 1)
 * or one pooled d*d block for tied. */
size_t lse_gauss_s2_size(lse_cov_type cov, size_t n_comp, size_t d);

/* rw_i = resp(i, k) * weight_i (weight may be NULL); returns sum_i rw_i. */
double lse_gauss_row_weights(const gsl_matrix *resp, size_t k,
                             const gsl_vector *weight, gsl_vector *rw);

/* Validated M-step options: NULL gives the defaults. */
lse_status lse_gauss_opts(const char *name, const lse_mstep_opts *opts,
                          lse_mstep_opts *out, char *msg, size_t msg_len);

/* Turn covariance c (d, d; a scatter already divided by the count, without
 * reg) into row k of w->new_chol for the work's cov type (full, diag,
 * spherical: c is projected; tied: call with k = 0). Adds reg_covar to the
 * diagonal first. c is overwritten. LSE_ENUMERIC with a message when the
 * matrix is not positive definite. */
lse_status lse_gauss_chol_from_cov(lse_gauss_work *w, const char *name,
                                   size_t k, gsl_matrix *c, double reg_covar,
                                   double n_k, char *msg, size_t msg_len);

/* Same for diag (v = d variances) and spherical (v = 1 variance) without
 * reg added; v is overwritten. */
lse_status lse_gauss_chol_from_var(lse_gauss_work *w, const char *name,
                                   size_t k, double *v, double reg_covar,
                                   double n_k, char *msg, size_t msg_len);

/* Write a printf-style message into msg (may be NULL) and return st. */
lse_status lse_gauss_fail(char *msg, size_t msg_len, lse_status st,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* describe(): "cov=full" (gauss_common.c). */
int lse_gauss_describe(const void *config, char *buf, size_t len);

/* Emptiness rule of the M-step: component with count n_k is left alone. */
int lse_gauss_is_empty(double n_k, double min_count);

/* Fill report (may be NULL) from per-component counts; writes logw
 * (may be NULL) as log(N_k / N) for N_k > 0. */
void lse_gauss_finish_weights(const double *n, size_t n_comp, double min_count,
                              gsl_matrix *logw, lse_mstep_report *report);

/* Vectorized kernels of lse_sim_gaussian (lib/sim/gauss_simd.c).
 * v_rows: the monomials V of the quadratic path for the block x into
 * w->vblk; v_rows_fma: V of nr rows of x (tda xt) into vd (tda vt) for the
 * FMA kernels. qeval: S (b, K) rows [i, i + 4 or 6) = V Q; qstats: the
 * statistics (nv, kp) += V' rho of 4 rows, on tiles of 8 components.
 * eval_diag_rows / stats_diag_rows: the fused loops of the diagonal and
 * spherical covariances (stats: for component k, weighted responsibilities
 * rho, ADD the shifted first and second moments to s1, s2). */
void lse_gauss_v_rows(const lse_gauss_work *w, const gsl_matrix *x);
void lse_gauss_eval_diag_rows(const lse_gauss_work *w, const gsl_matrix *x,
                              gsl_matrix *s);
void lse_gauss_stats_diag_rows(const gsl_matrix *x, const double *mu,
                               const double *rho, int sph, double *s1,
                               double *s2, int avx2);
#if LSE_HAVE_AVX2_PATH
void lse_gauss_v_rows_fma(const lse_gauss_work *w, const double *x, size_t xt,
                          size_t nr, double *vd, size_t vt);
/* lse_gauss_v_rows_fma of 6 and of 4 rows (the diag/spherical groups) */
void lse_gauss_v_rows6_fma(const lse_gauss_work *w, const double *x, size_t xt,
                           double *vd, size_t vt);
void lse_gauss_v_rows4_fma(const lse_gauss_work *w, const double *x, size_t xt,
                           double *vd, size_t vt);
LSE_TARGET_AVX2_FMA
void lse_gauss_qeval4_avx2(const double *v, size_t vt, size_t nv,
                           const double *q, size_t kp, size_t K, double *s,
                           size_t st);
LSE_TARGET_AVX2_FMA
void lse_gauss_qeval6_avx2(const double *v, size_t vt, size_t nv,
                           const double *q, size_t kp, size_t K, double *s,
                           size_t st);
/* S = V Q of a block of at least 8 rows for full/tied covariances without
 * forming V (AVX-512F; the bits of qeval6); leaves w->vblk without V. */
/* Full/tied quadratic path, AVX-512F, without the row-major V (the bits of
 * qeval6 / qstats4): qfull_eval: S = V Q of a block of at least 8 rows,
 * leaving the groups of 8 rows' V transposed at vt (64-byte aligned,
 * ceil(b / 8) nv 8 doubles), 1 when a score is NaN or +INFINITY; qfull_stats8: acc (nv, kp) += V' rho for 8
 * rows of x, their V transposed at vt (formed there when form). */
LSE_TARGET_AVX512
void lse_gauss_qfull_stats8_avx512(const lse_gauss_work *w, const double *x,
                                   size_t xt, const double *rho, size_t rt,
                                   double *vt, int form, double *acc,
                                   size_t kp);
LSE_TARGET_AVX512
int lse_gauss_qfull_eval_avx512(lse_gauss_work *w, const gsl_matrix *x,
                                gsl_matrix *s, double *vt);
LSE_TARGET_AVX512
void lse_gauss_qeval6_avx512(const double *v, size_t vt, size_t nv,
                             const double *q, size_t kp, size_t K, double *s,
                             size_t st);
LSE_TARGET_AVX2_FMA
void lse_gauss_qstats_rows_avx2(const double *v, size_t vt, size_t nv,
                                const double *rho, size_t rt, size_t nr,
                                double *acc, size_t kp, size_t K);
LSE_TARGET_AVX2_FMA
void lse_gauss_qstats4_avx2(const double *v, size_t vt, size_t nv,
                            const double *rho, size_t rt, double *acc,
                            size_t kp, size_t K);
LSE_TARGET_AVX512
void lse_gauss_qstats4_avx512(const double *v, size_t vt, size_t nv,
                              const double *rho, size_t rt, double *acc,
                              size_t kp);
#endif

/* The triangle-aware whitened path (w->tri, lib/sim/gauss_simd.c with
 * the kernels of gauss_tri_body.h). tri_eval: S (b, K) from the centred
 * rows y = x - c (b x d, tda yt) and the factor cache. tri_stats: ADDS to
 * acc N (K) | s1 (K, d) | s2 (K, d, d), with s1_k = sum_i rho_ik
 * (x_i - mu_k) and s2_k the upper triangle (a <= j) of sum_i rho_ik
 * (x_i - mu_k)(x_i - mu_k)' (the lower triangle is left alone), rho_ik =
 * resp_ik weight_i. */
void lse_gauss_tri_eval(const lse_gauss_work *w, const double *y, size_t yt,
                        size_t b, gsl_matrix *s);
void lse_gauss_tri_stats(lse_gauss_work *w, const gsl_matrix *x,
                         const gsl_matrix *resp, const gsl_vector *weight,
                         double *acc);

/* mclust's constrained M-steps (lib/sim/gauss_mclust.c). active: the
 * work's model has its own M-step (not NONE, VII, VVI, EEE, VVV). check:
 * the config's model is valid for this type and its cov is the model's
 * layout. work_new/free: the scratch (w->mcl, NULL when not active).
 * solve: from the counts n (K), the shifts s1 (K, d) and the shifted
 * second moments s2 (the layout's: K d d, K d or K) write the constrained
 * covariances into w->new_chol (empty components untouched). */
int lse_gauss_mclust_active(const lse_gauss_work *w);
lse_status lse_gauss_mclust_check(const char *name, const void *config,
                                  char *msg, size_t msg_len);
lse_status lse_gauss_mclust_work_new(lse_gauss_work *w);
void lse_gauss_mclust_work_free(struct lse_gauss_mclust *m);
lse_status lse_gauss_mclust_solve(lse_gauss_work *w, const char *name,
                                  const double *n, const double *s1,
                                  const double *s2, const lse_mstep_opts *o,
                                  char *msg, size_t msg_len);

#endif /* LSEGRAPH_GAUSS_PRIVATE_H */
