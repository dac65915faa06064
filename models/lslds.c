#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "lslds-private.h"

/* Switching LDS with latent states by structured variational EM
 * (include/lsegraph/models/lslds.h, docs/models/slds.md). D and K are
 * small; the per-row work uses small dense matrices. */

#define LOG_2PI 1.8378770664093454836
/* share of importance samples drawn from the prior p(z) */
#define LSE_LSLDS_IS_PRIOR 0.1

static int is_start(const size_t *seq, size_t t)
{
    return t == 0 || (seq != NULL && seq[t] != seq[t - 1]);
}

/* Several processes (lse_lslds_opts.reduce): this process's y rows
 * [ctx, ctx + n_own) are the global rows [offset, offset + n_own); the
 * latent chain (q, seq) has the global rows. NULL: one process, y rows =
 * q rows. */
typedef struct par {
    lse_comm comm;
    size_t ctx, n_own, offset;
} par;

lse_status lse_lslds_params_new(size_t K, size_t D, size_t N, int markov,
                                lse_lslds_params **out, lse_error *err)
{
    static const char fn[] = "lse_lslds_params_new";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "out is NULL");
    *out = NULL;
    if (K == 0 || D == 0 || N == 0 || K > 4096 || D > 4096 || N > 65536)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "K = %zu, D = %zu, N = %zu: each must be in "
                             "1..4096 (N: 1..65536)",
                             K, D, N);
    lse_gsl_quiet();
    lse_lslds_params *p = calloc(1, sizeof *p);
    if (p == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    p->K = K;
    p->D = D;
    p->N = N;
    p->markov = markov != 0;
    p->lags = 1;
    p->A = gsl_matrix_calloc(K, D * D);
    p->b = gsl_matrix_calloc(K, D);
    p->Q = gsl_matrix_calloc(K, D * D);
    p->C = gsl_matrix_calloc(N, D);
    p->d = gsl_vector_calloc(N);
    p->r = gsl_vector_alloc(N);
    p->m0 = gsl_vector_calloc(D);
    p->P0 = gsl_matrix_alloc(D, D);
    p->init = gsl_vector_alloc(K);
    p->trans = gsl_matrix_alloc(K, K);
    if (!p->A || !p->b || !p->Q || !p->C || !p->d || !p->r || !p->m0 ||
        !p->P0 || !p->init || !p->trans) {
        lse_lslds_params_free(p);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < D; i++) {
            gsl_matrix_set(p->A, k, i * D + i, 0.9);
            gsl_matrix_set(p->Q, k, i * D + i, 1.0);
        }
    for (size_t i = 0; i < N && i < D; i++)
        gsl_matrix_set(p->C, i, i, 1.0);
    gsl_vector_set_all(p->r, 1.0);
    gsl_matrix_set_identity(p->P0);
    gsl_vector_set_all(p->init, 1.0 / (double)K);
    gsl_matrix_set_all(p->trans, 1.0 / (double)K);
    *out = p;
    return LSE_OK;
}

void lse_lslds_params_free(lse_lslds_params *p)
{
    if (p == NULL)
        return;
    gsl_matrix_free(p->A);
    gsl_matrix_free(p->b);
    gsl_matrix_free(p->Q);
    gsl_matrix_free(p->C);
    gsl_vector_free(p->d);
    gsl_vector_free(p->r);
    gsl_vector_free(p->m0);
    gsl_matrix_free(p->P0);
    gsl_vector_free(p->init);
    gsl_matrix_free(p->trans);
    free(p);
}

/* emission blocks: K per mode, else 1 */
#define NE(p) ((p)->per_mode_emission ? (p)->K : (size_t)1)

lse_status lse_lslds_params_emission_per_mode(lse_lslds_params *p,
                                              lse_error *err)
{
    static const char fn[] = "lse_lslds_params_emission_per_mode";
    if (p == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "p is NULL");
    if (p->per_mode_emission)
        return LSE_OK;
    const size_t K = p->K, N = p->N, D = p->D;
    if (N > SIZE_MAX / K)
        return lse_error_set(err, LSE_EINVAL, fn, "K N overflows");
    gsl_matrix *C = gsl_matrix_alloc(K * N, D);
    gsl_vector *d = gsl_vector_alloc(K * N), *r = gsl_vector_alloc(K * N);
    if (!C || !d || !r) {
        gsl_matrix_free(C);
        gsl_vector_free(d);
        gsl_vector_free(r);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_view Ck = gsl_matrix_submatrix(C, k * N, 0, N, D);
        gsl_matrix_memcpy(&Ck.matrix, p->C);
        gsl_vector_view dk = gsl_vector_subvector(d, k * N, N);
        gsl_vector_memcpy(&dk.vector, p->d);
        gsl_vector_view rk = gsl_vector_subvector(r, k * N, N);
        gsl_vector_memcpy(&rk.vector, p->r);
    }
    gsl_matrix_free(p->C);
    gsl_vector_free(p->d);
    gsl_vector_free(p->r);
    p->C = C;
    p->d = d;
    p->r = r;
    p->per_mode_emission = 1;
    return LSE_OK;
}

/* New parameters of the shape of @p p (per-mode emissions too). */
static lse_status params_new_like(const lse_lslds_params *p,
                                  lse_lslds_params **out, lse_error *err)
{
    lse_status st = lse_lslds_params_new(p->K, p->D, p->N, p->markov, out, err);
    if (st == LSE_OK && p->lags > 1 &&
        (st = lse_lslds_params_set_lags(*out, p->lags, err)) != LSE_OK) {
        lse_lslds_params_free(*out);
        *out = NULL;
    }
    if (st == LSE_OK && p->per_mode_emission) {
        st = lse_lslds_params_emission_per_mode(*out, err);
        if (st != LSE_OK) {
            lse_lslds_params_free(*out);
            *out = NULL;
        }
    }
    return st;
}

static void params_copy(lse_lslds_params *dst, const lse_lslds_params *src)
{
    gsl_matrix_memcpy(dst->A, src->A);
    gsl_matrix_memcpy(dst->b, src->b);
    gsl_matrix_memcpy(dst->Q, src->Q);
    gsl_matrix_memcpy(dst->C, src->C);
    gsl_vector_memcpy(dst->d, src->d);
    gsl_vector_memcpy(dst->r, src->r);
    gsl_vector_memcpy(dst->m0, src->m0);
    gsl_matrix_memcpy(dst->P0, src->P0);
    gsl_vector_memcpy(dst->init, src->init);
    gsl_matrix_memcpy(dst->trans, src->trans);
}

lse_status lse_lslds_post_new(size_t T, size_t K, size_t D,
                              lse_lslds_post **out, lse_error *err)
{
    static const char fn[] = "lse_lslds_post_new";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "out is NULL");
    *out = NULL;
    if (T == 0 || K == 0 || D == 0 || D > 4096 || K > 4096 ||
        T > ((size_t)-1) / sizeof(double) / D / D / 4)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "T = %zu, K = %zu, D = %zu out of range", T, K,
                             D);
    lse_lslds_post *q = calloc(1, sizeof *q);
    if (q == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    q->T = T;
    q->K = K;
    q->D = D;
    q->w = gsl_matrix_alloc(T, K);
    q->xi = gsl_matrix_calloc(K, K);
    q->mean = gsl_matrix_calloc(T, D);
    q->cov = gsl_matrix_calloc(T, D * D);
    q->cross = gsl_matrix_calloc(T, D * D);
    q->lags = 1;
    if (!q->w || !q->xi || !q->mean || !q->cov || !q->cross) {
        lse_lslds_post_free(q);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_matrix_set_all(q->w, 1.0 / (double)K);
    *out = q;
    return LSE_OK;
}

void lse_lslds_post_free(lse_lslds_post *q)
{
    if (q == NULL)
        return;
    gsl_matrix_free(q->w);
    gsl_matrix_free(q->xi);
    gsl_matrix_free(q->mean);
    gsl_matrix_free(q->cov);
    gsl_matrix_free(q->cross);
    gsl_matrix_free(q->lagcov);
    free(q);
}

static lse_status check_args(const char *fn, const lse_lslds_params *p,
                             const gsl_matrix *y, const lse_lslds_post *q,
                             lse_error *err)
{
    if (p == NULL || y == NULL || q == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params, y and q are required");
    if (y->size2 != p->N || q->T != y->size1 || q->K != p->K || q->D != p->D)
        return lse_error_set(err, LSE_EDIM, fn,
                             "y is %zux%zu, q is for T = %zu, K = %zu, D = %zu; "
                             "the model has N = %zu, K = %zu, D = %zu",
                             y->size1, y->size2, q->T, q->K, q->D, p->N, p->K,
                             p->D);
    return LSE_OK;
}

/* The workspace's transition blocks from p: LSE_ENUMERIC when a Q_k (or,
 * with @p need_p0, P0) is not positive definite. */
static lse_status ws_modes(lsw *w, const lse_lslds_params *p, int need_p0,
                           const char *fn, lse_error *err)
{
    const int rc = lse_lsw_modes(w, p);
    if (rc == -1 || (rc == -2 && need_p0))
        return lse_error_set(err, LSE_ENUMERIC, fn,
                             rc == -1 ? "a Q_k is not positive definite"
                                      : "P0 is not positive definite");
    return LSE_OK;
}

static lse_status ws_alloc(lsw *w, size_t T, const lse_lslds_params *p,
                           const char *fn, lse_error *err)
{
    if (lse_lsw_alloc(w, T, p->K, p->D, p->lags) != 0)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory (T = %zu)", T);
    return LSE_OK;
}

/* L > 1: q gets its lag covariances (lse_lslds_post.lagcov), and every
 * sequence must have more than L rows. */
static lse_status post_lags(const lse_lslds_params *p, const size_t *seq,
                            lse_lslds_post *q, const char *fn, lse_error *err)
{
    const size_t L = p->lags, T = q->T;
    if (L > 1) {
        size_t ts = 0;
        for (size_t t = 0; t < T; t++)
            if (t + 1 == T || (seq != NULL && seq[t + 1] != seq[t])) {
                if (t + 1 - ts <= L)
                    return lse_error_set(err, LSE_EINVAL, fn,
                                         "the sequence of rows %zu..%zu has "
                                         "%zu rows; %zu lags need more than "
                                         "%zu",
                                         ts + 1, t + 1, t + 1 - ts, L, L);
                ts = t + 1;
            }
    }
    if (q->lags == L && (L == 1 || q->lagcov != NULL))
        return LSE_OK;
    gsl_matrix_free(q->lagcov);
    q->lagcov = NULL;
    q->lags = L;
    q->have_x = 0;
    if (L > 1 && (q->lagcov = gsl_matrix_calloc(T, L * p->D * p->D)) == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    return LSE_OK;
}

/* Observed entries of y must be finite. */
static lse_status check_y(const gsl_matrix *y, const unsigned char *observed,
                          const char *fn, lse_error *err)
{
    const size_t N = y->size2;
    for (size_t t = 0; t < y->size1; t++)
        for (size_t i = 0; i < N; i++)
            if ((observed == NULL || observed[t * N + i]) &&
                !isfinite(y->data[t * y->tda + i]))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "y row %zu column %zu is observed and "
                                     "not finite (mask it as missing)",
                                     t + 1, i + 1);
    return LSE_OK;
}

/* obs_potentials with one shared emission block: C' R^-1 C once, the
 * rows' linear terms and constants; rows with a missing entry sum their
 * observed columns. 0, or -1 out of memory. */
static int obs_shared(const lse_lslds_params *p, const gsl_matrix *y,
                      const unsigned char *observed, size_t T, size_t rows,
                      size_t ctx, size_t off, double *obs)
{
    const size_t D = p->D, DD = D * D, N = p->N, W = DD + D;
    double *Ct = malloc((N * D + DD + N) * sizeof(double));
    if (Ct == NULL)
        return -1;
    double *Jsh = Ct + N * D, *lr = Jsh + DD;
    const double *C = p->C->data, *r = p->r->data, *d = p->d->data;
    const size_t ct = p->C->tda, rs = p->r->stride, ds = p->d->stride;
    memset(Jsh, 0, DD * sizeof(double));
    for (size_t i = 0; i < N; i++) {
        const double ri = r[i * rs];
        lr[i] = LOG_2PI + log(ri);
        for (size_t a = 0; a < D; a++) {
            Ct[i * D + a] = C[i * ct + a] / ri;
            for (size_t b = 0; b < D; b++)
                Jsh[a * D + b] += C[i * ct + a] * C[i * ct + b] / ri;
        }
    }
    memset(obs, 0, (T * W + 1) * sizeof(double));
    double c = 0.0;
    for (size_t tl = 0; tl < rows; tl++) {
        const size_t ty = ctx + tl;
        const double *yr = y->data + ty * y->tda;
        const unsigned char *ob = observed ? observed + ty * N : NULL;
        double *o = obs + (off + tl) * W, *h = o + DD;
        int full = 1;
        for (size_t i = 0; ob != NULL && i < N; i++)
            full &= ob[i] != 0;
        if (full)
            memcpy(o, Jsh, DD * sizeof(double));
        for (size_t i = 0; i < N; i++) {
            if (!full && !ob[i])
                continue;
            const double ri = r[i * rs], e = yr[i] - d[i * ds];
            const double *cti = Ct + i * D;
            for (size_t a = 0; a < D; a++)
                h[a] += cti[a] * e;
            if (!full)
                for (size_t a = 0; a < D; a++)
                    for (size_t b = 0; b < D; b++)
                        o[a * D + b] += C[i * ct + a] * C[i * ct + b] / ri;
            c += -0.5 * (lr[i] + e * e / ri);
        }
    }
    obs[T * W] = c;
    free(Ct);
    return 0;
}

/* The observation potentials (layout of lsw.obs) of the y rows
 * [ctx, ctx + rows) as q rows [offset, ..) (pr NULL: all rows), each
 * emission block k weighted by q(z_t = k) (uniform before q(z) exists),
 * or by the mode path @p path (global rows) when given. */
static void obs_potentials(const lse_lslds_params *p, const gsl_matrix *y,
                           const unsigned char *observed,
                           const lse_lslds_post *q, const par *pr,
                           const size_t *path, double *obs)
{
    const size_t T = q->T, D = p->D, DD = D * D, N = p->N, W = DD + D;
    const size_t rows = pr ? pr->n_own : T, ctx = pr ? pr->ctx : 0;
    const size_t off = pr ? pr->offset : 0, E = NE(p);
    if (E == 1 && obs_shared(p, y, observed, T, rows, ctx, off, obs) == 0)
        return;
    memset(obs, 0, (T * W + 1) * sizeof(double));
    double c = 0.0;
    for (size_t tl = 0; tl < rows; tl++) {
        const size_t ty = ctx + tl, tq = off + tl;
        double *o = obs + tq * W;
        for (size_t k = 0; k < E; k++) {
            double w = 1.0;
            if (path != NULL)
                w = path[tq] == k || E == 1 ? 1.0 : 0.0;
            else if (E > 1)
                w = q->have_z ? gsl_matrix_get(q->w, tq, k) : 1.0 / (double)E;
            if (w == 0.0)
                continue;
            for (size_t i = 0; i < N; i++) {
                if (observed != NULL && !observed[ty * N + i])
                    continue;
                const size_t ik = k * N + i;
                const double ri = gsl_vector_get(p->r, ik) / w;
                const double e =
                    gsl_matrix_get(y, ty, i) - gsl_vector_get(p->d, ik);
                for (size_t a = 0; a < D; a++) {
                    const double ca = gsl_matrix_get(p->C, ik, a);
                    for (size_t b = 0; b < D; b++)
                        o[a * D + b] += ca * gsl_matrix_get(p->C, ik, b) / ri;
                    o[DD + a] += ca * e / ri;
                }
                c += w * -0.5 *
                     (LOG_2PI + log(gsl_vector_get(p->r, ik)) +
                      e * e / gsl_vector_get(p->r, ik));
            }
        }
    }
    obs[T * W] = c;
}

/* w->obs for p and q(z): this process's rows (pr) summed over the
 * processes, or all rows. */
static lse_status ws_obs(lsw *w, const lse_lslds_params *p,
                         const gsl_matrix *y, const unsigned char *observed,
                         const lse_lslds_post *q, par *pr, const char *fn,
                         lse_error *err)
{
    obs_potentials(p, y, observed, q, pr, NULL, w->obs);
    if (pr == NULL)
        return LSE_OK;
    return lse_comm_sum(&pr->comm, w->obs, q->T * (p->D * p->D + p->D) + 1,
                        fn, err);
}

/* The q(x) update from the workspace's transition blocks and observation
 * potentials. */
static lse_status ws_smooth(lsw *w, const size_t *seq, lse_lslds_post *q,
                            double *logzx, const char *fn, lse_error *err)
{
    if (q->lags != w->lags)
        return lse_error_set(err, LSE_EINVAL, fn, "q is for %zu lags, the "
                             "model has %zu", q->lags, w->lags);
    double lz, hx;
    const size_t bad = lse_lsw_smooth(w, seq, q, &lz, &hx);
    if (bad != 0)
        return lse_error_set(err, LSE_ENUMERIC, fn,
                             "posterior precision of row %zu is not positive "
                             "definite",
                             bad);
    q->hx = hx;
    q->have_x = 1;
    if (logzx)
        *logzx = lz;
    return LSE_OK;
}

lse_status lse_lslds_update_x(const lse_lslds_params *p, const gsl_matrix *y,
                              const unsigned char *observed, const size_t *seq,
                              lse_lslds_post *q, double *logzx, lse_error *err)
{
    static const char fn[] = "lse_lslds_update_x";
    lse_status st = check_args(fn, p, y, q, err);
    if (st == LSE_OK)
        st = check_y(y, observed, fn, err);
    if (st == LSE_OK)
        st = post_lags(p, seq, q, fn, err);
    lsw w;
    if (st != LSE_OK || (st = ws_alloc(&w, q->T, p, fn, err)) != LSE_OK)
        return st;
    st = ws_modes(&w, p, 1, fn, err);
    if (st == LSE_OK) {
        obs_potentials(p, y, observed, q, NULL, NULL, w.obs);
        st = ws_smooth(&w, seq, q, logzx, fn, err);
    }
    lse_lsw_free(&w);
    return st;
}

/* Emission scores s (T, K): E_q(x)[log N(x_t; A_k x_{t-1} + b_k, Q_k)],
 * 0 at sequence starts. -2 out of memory, -1 a Q_k not positive
 * definite. */
static int scores(const lse_lslds_params *p, const size_t *seq,
                  const lse_lslds_post *q, gsl_matrix *s)
{
    lsw w;
    if (lse_lsw_alloc(&w, q->T, p->K, p->D, p->lags) != 0)
        return -2;
    int rc = lse_lsw_modes(&w, p) == -1 ? -1 : 0;
    if (rc == 0) {
        lse_lsw_moments(&w, q, seq);
        lse_lsw_scores(&w);
        for (size_t t = 0; t < q->T; t++)
            memcpy(s->data + t * s->tda, w.s + t * p->K, p->K * sizeof(double));
    }
    lse_lsw_free(&w);
    return rc;
}

static double xlogy(double x, double y) { return x > 0.0 ? x * log(y) : 0.0; }

/* Without Markov dependence: q(z_t = k) ∝ init_k exp(s_tk) into q->w;
 * returns the entropy of q(z). */
static double mixture_posterior(const lse_lslds_params *p, const double *s,
                                lse_lslds_post *q)
{
    const size_t T = q->T, K = p->K;
    double hz = 0.0;
    for (size_t t = 0; t < T; t++) {
        double *wt = q->w->data + t * q->w->tda;
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++)
            mx = fmax(mx, log(gsl_vector_get(p->init, k)) + s[t * K + k]);
        double z = 0.0;
        for (size_t k = 0; k < K; k++) {
            wt[k] = exp(log(gsl_vector_get(p->init, k)) + s[t * K + k] - mx);
            z += wt[k];
        }
        for (size_t k = 0; k < K; k++) {
            wt[k] /= z;
            hz -= xlogy(wt[k], wt[k]);
        }
    }
    return hz;
}

/* Scratch of the mode chain's forward-backward (T x K each, T). */
typedef struct fbw {
    double *alpha, *beta, *e, *c;
} fbw;

/* The scaled backward pass: beta from the emission weights e and the
 * forward pass's normalizers c. */
static void backward_pass(const lse_lslds_params *p, const size_t *seq,
                          size_t T, fbw *f)
{
    const size_t K = p->K;
    const double *P = p->trans->data;
    const size_t pt = p->trans->tda;
    for (size_t t = T; t-- > 0;) {
        const int last = t + 1 == T || is_start(seq, t + 1);
        double *b = f->beta + t * K;
        const double *b1 = f->beta + (t + 1) * K, *e1 = f->e + (t + 1) * K;
        for (size_t j = 0; j < K; j++) {
            double v = 1.0;
            if (!last) {
                v = 0.0;
                for (size_t k = 0; k < K; k++)
                    v += P[j * pt + k] * e1[k] * b1[k];
                v /= f->c[t + 1];
            }
            b[j] = v;
        }
    }
}

/* Forward pass: alpha (rows normalized), e = exp(s - max), c; log Z into
 * *logz. 0, or the 1-based row where it underflows. */
static size_t forward_pass(const lse_lslds_params *p, const size_t *seq,
                           const double *s, size_t T, fbw *f, double *logz)
{
    const size_t K = p->K, pt = p->trans->tda;
    const double *P = p->trans->data;
    double lz = 0.0;
    for (size_t t = 0; t < T; t++) {
        const double *st = s + t * K;
        double *a = f->alpha + t * K, *e = f->e + t * K;
        const double *a0 = f->alpha + (t - (t > 0)) * K;
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++)
            mx = fmax(mx, st[k]);
        double z = 0.0;
        const int start = is_start(seq, t);
        for (size_t k = 0; k < K; k++) {
            double v = 0.0;
            if (start)
                v = gsl_vector_get(p->init, k);
            else
                for (size_t j = 0; j < K; j++)
                    v += a0[j] * P[j * pt + k];
            e[k] = exp(st[k] - mx);
            a[k] = v * e[k];
            z += a[k];
        }
        if (!(z > 0.0) || !isfinite(z))
            return t + 1;
        f->c[t] = z;
        lz += log(z) + mx;
        for (size_t k = 0; k < K; k++)
            a[k] /= z;
    }
    *logz = lz;
    return 0;
}

/* q(z) (Markov): posteriors, expected transitions, entropy. */
static lse_status markov_posterior(const lse_lslds_params *p,
                                   const size_t *seq, const double *s,
                                   lse_lslds_post *q, const char *fn,
                                   lse_error *err)
{
    const size_t T = q->T, K = p->K, pt = p->trans->tda;
    const double *P = p->trans->data;
    fbw f = {malloc(T * K * sizeof(double)), malloc(T * K * sizeof(double)),
             malloc(T * K * sizeof(double)), malloc(T * sizeof(double))};
    lse_status st = LSE_OK;
    double logz = 0.0;
    size_t bad;
    if (!f.alpha || !f.beta || !f.e || !f.c)
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    else if ((bad = forward_pass(p, seq, s, T, &f, &logz)) != 0)
        st = lse_error_set(err, LSE_ENUMERIC, fn,
                           "forward pass underflows at row %zu", bad);
    if (st != LSE_OK)
        goto done;
    backward_pass(p, seq, T, &f);
    double *xi = q->xi->data;
    const size_t xt = q->xi->tda;
    gsl_matrix_set_zero(q->xi);
    double sws = 0.0, ez = 0.0;
    for (size_t t = 0; t < T; t++) {
        double *wt = q->w->data + t * q->w->tda;
        const double *a = f.alpha + t * K, *b = f.beta + t * K;
        const int start = is_start(seq, t);
        for (size_t k = 0; k < K; k++) {
            wt[k] = a[k] * b[k];
            sws += wt[k] * s[t * K + k];
            if (start)
                ez += xlogy(wt[k], gsl_vector_get(p->init, k));
        }
        if (start)
            continue;
        const double *a0 = f.alpha + (t - 1) * K, *e = f.e + t * K;
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                xi[j * xt + k] += a0[j] * P[j * pt + k] * e[k] * b[k] / f.c[t];
    }
    for (size_t j = 0; j < K; j++)
        for (size_t k = 0; k < K; k++)
            ez += xlogy(xi[j * xt + k], P[j * pt + k]);
    /* q(z) = p(z) exp(sum s) / Z: H = log Z - E[log p(z)] - E[sum s] */
    q->hz = logz - ez - sws;
done:
    free(f.alpha);
    free(f.beta);
    free(f.e);
    free(f.c);
    return st;
}

/* q(z) from the scores s (T x K, raw, emission scores included). */
static lse_status update_z_s(const lse_lslds_params *p, const size_t *seq,
                             const double *s, lse_lslds_post *q,
                             const char *fn, lse_error *err)
{
    if (!p->markov) {
        q->hz = mixture_posterior(p, s, q);
        gsl_matrix_set_zero(q->xi);
    } else {
        lse_status st = markov_posterior(p, seq, s, q, fn, err);
        if (st != LSE_OK)
            return st;
    }
    q->have_z = 1;
    return LSE_OK;
}

static lse_status update_z_impl(const lse_lslds_params *p, const size_t *seq,
                                const gsl_matrix *es, lse_lslds_post *q,
                                const char *fn, lse_error *err);

lse_status lse_lslds_update_z(const lse_lslds_params *p, const size_t *seq,
                              lse_lslds_post *q, lse_error *err)
{
    static const char fn[] = "lse_lslds_update_z";
    if (p != NULL && p->per_mode_emission)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "per-mode emissions: give the emission scores "
                             "(lse_lslds_update_z_with)");
    return update_z_impl(p, seq, NULL, q, fn, err);
}

lse_status lse_lslds_update_z_with(const lse_lslds_params *p, const size_t *seq,
                                   const gsl_matrix *es, lse_lslds_post *q,
                                   lse_error *err)
{
    static const char fn[] = "lse_lslds_update_z_with";
    if (p != NULL && q != NULL && es != NULL &&
        (es->size1 != q->T || es->size2 != p->K))
        return lse_error_set(err, LSE_EDIM, fn, "es must be %zu x %zu", q->T,
                             p->K);
    if (p != NULL && p->per_mode_emission && es == NULL)
        return lse_error_set(err, LSE_EFAULT, fn,
                             "per-mode emissions need the emission scores");
    return update_z_impl(p, seq, es, q, fn, err);
}

/* w->s += es */
static void add_es(lsw *w, const gsl_matrix *es)
{
    for (size_t t = 0; t < w->T; t++)
        for (size_t k = 0; k < w->K; k++)
            w->s[t * w->K + k] += es->data[t * es->tda + k];
}

static lse_status update_z_impl(const lse_lslds_params *p, const size_t *seq,
                                const gsl_matrix *es, lse_lslds_post *q,
                                const char *fn, lse_error *err)
{
    if (p == NULL || q == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params and q are required");
    if (q->K != p->K || q->D != p->D)
        return lse_error_set(err, LSE_EDIM, fn, "q and params disagree on K, D");
    if (!q->have_x || q->lags != p->lags)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(x) has not been computed (lse_lslds_update_x)");
    lsw w;
    lse_status st = ws_alloc(&w, q->T, p, fn, err);
    if (st != LSE_OK)
        return st;
    st = ws_modes(&w, p, 0, fn, err);
    if (st == LSE_OK) {
        lse_lsw_moments(&w, q, seq);
        lse_lsw_scores(&w);
        if (es != NULL)
            add_es(&w, es);
        st = update_z_s(p, seq, w.s, q, fn, err);
    }
    lse_lsw_free(&w);
    return st;
}

lse_status lse_lslds_scores(const lse_lslds_params *p, const size_t *seq,
                            const lse_lslds_post *q, gsl_matrix *s,
                            lse_error *err)
{
    static const char fn[] = "lse_lslds_scores";
    if (p == NULL || q == NULL || s == NULL)
        return lse_error_set(err, LSE_EFAULT, fn,
                             "params, q and s are required");
    if (q->K != p->K || q->D != p->D)
        return lse_error_set(err, LSE_EDIM, fn, "q and params disagree on K, D");
    if (s->size1 != q->T || s->size2 != p->K)
        return lse_error_set(err, LSE_EDIM, fn,
                             "s is %zu x %zu, expected %zu x %zu", s->size1,
                             s->size2, q->T, p->K);
    if (!q->have_x || q->lags != p->lags)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(x) has not been computed (lse_lslds_update_x)");
    const int rc = scores(p, seq, q, s);
    if (rc != 0)
        return lse_error_set(err, rc == -2 ? LSE_ENOMEM : LSE_ENUMERIC, fn,
                             rc == -2 ? "out of memory"
                                      : "a Q_k is not positive definite");
    return LSE_OK;
}

/* *acc += E_q log p(y_t | x_t) over the observed entries of y row ty,
 * with the moments of q row tq. */
static void obs_term_k(const lse_lslds_params *p, const gsl_matrix *y,
                       const unsigned char *observed, size_t ty,
                       const lse_lslds_post *q, size_t tq, size_t k, double w,
                       gsl_vector *cp, double *acc)
{
    const size_t N = p->N, D = p->D;
    gsl_matrix_const_view Pt =
        gsl_matrix_const_view_array(q->cov->data + tq * q->cov->tda, D, D);
    gsl_vector_const_view mt = gsl_matrix_const_row(q->mean, tq);
    for (size_t i = 0; i < N; i++) {
        if (observed != NULL && !observed[ty * N + i])
            continue;
        const size_t ik = k * N + i;
        gsl_vector_const_view ci = gsl_matrix_const_row(p->C, ik);
        double cm, cPc;
        gsl_blas_ddot(&ci.vector, &mt.vector, &cm);
        gsl_blas_dgemv(CblasNoTrans, 1.0, &Pt.matrix, &ci.vector, 0.0, cp);
        gsl_blas_ddot(&ci.vector, cp, &cPc);
        const double ri = gsl_vector_get(p->r, ik);
        const double res =
            gsl_matrix_get(y, ty, i) - cm - gsl_vector_get(p->d, ik);
        const double v = -0.5 * (LOG_2PI + log(ri) + (res * res + cPc) / ri);
        *acc += w == 1.0 ? v : w * v;
    }
}

/* es (T, K) = E_q(x) log N(y_t; C_k x_t + d_k, R_k) of this process's rows
 * (all rows when pr is NULL), summed over the processes. */
static lse_status emis_scores(const lse_lslds_params *p, const gsl_matrix *y,
                              const unsigned char *observed,
                              const lse_lslds_post *q, par *pr, gsl_matrix *es,
                              const char *fn, lse_error *err)
{
    gsl_vector *cp = gsl_vector_alloc(p->D);
    if (cp == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    gsl_matrix_set_zero(es);
    const size_t rows = pr ? pr->n_own : q->T;
    for (size_t tl = 0; tl < rows; tl++) {
        const size_t ty = pr ? pr->ctx + tl : tl, tq = pr ? pr->offset + tl : tl;
        for (size_t k = 0; k < p->K; k++) {
            double v = 0.0;
            obs_term_k(p, y, observed, ty, q, tq, p->per_mode_emission ? k : 0,
                       1.0, cp, &v);
            gsl_matrix_set(es, tq, k, v);
        }
    }
    gsl_vector_free(cp);
    if (pr != NULL)
        return lse_comm_sum(&pr->comm, es->data, q->T * p->K, fn, err);
    return LSE_OK;
}

lse_status lse_lslds_emission_scores(const lse_lslds_params *p,
                                     const gsl_matrix *y,
                                     const unsigned char *observed,
                                     const lse_lslds_post *q, gsl_matrix *es,
                                     lse_error *err)
{
    static const char fn[] = "lse_lslds_emission_scores";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK)
        return st;
    if (es == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "es is NULL");
    if (es->size1 != q->T || es->size2 != p->K || es->tda != p->K)
        return lse_error_set(err, LSE_EDIM, fn, "es must be %zu x %zu", q->T,
                             p->K);
    if (!q->have_x)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(x) has not been computed (lse_lslds_update_x)");
    return emis_scores(p, y, observed, q, NULL, es, fn, err);
}

static lse_status elbo_impl(const lse_lslds_params *p, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            const lse_lslds_post *q, double *elbo,
                            const char *fn, lse_error *err);

lse_status lse_lslds_elbo(const lse_lslds_params *p, const gsl_matrix *y,
                          const unsigned char *observed, const size_t *seq,
                          const lse_lslds_post *q, double *elbo, lse_error *err)
{
    static const char fn[] = "lse_lslds_elbo";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK)
        return st;
    return elbo_impl(p, y, observed, seq, q, elbo, fn, err);
}

/* The residual part of E_q log p(y | x, z) over this process's rows (all
 * rows without pr): sum over the observed entries and emission blocks
 * (weighted by q(z_t = k)) of -1/2 (log 2 pi r + (y - c'm - d)^2 / r);
 * with -1/2 tr(J_t P_t) of the potentials it is the expectation, without
 * the cancellation of the potentials' constant against h'm when r is
 * tiny. */
static double obs_residuals(const lse_lslds_params *p, const gsl_matrix *y,
                            const unsigned char *observed,
                            const lse_lslds_post *q, const par *pr)
{
    const size_t D = p->D, N = p->N, E = NE(p);
    const size_t rows = pr ? pr->n_own : q->T, ctx = pr ? pr->ctx : 0;
    const size_t off = pr ? pr->offset : 0, ct = p->C->tda;
    const size_t rs = p->r->stride, ds = p->d->stride;
    double tot = 0.0, *lr = malloc(E * N * sizeof(double));
    for (size_t ik = 0; lr != NULL && ik < E * N; ik++)
        lr[ik] = LOG_2PI + log(p->r->data[ik * rs]);
    for (size_t tl = 0; tl < rows; tl++) {
        const size_t ty = ctx + tl, tq = off + tl;
        const double *yr = y->data + ty * y->tda;
        const double *m = q->mean->data + tq * q->mean->tda;
        for (size_t k = 0; k < E; k++) {
            const double w = E > 1 ? gsl_matrix_get(q->w, tq, k) : 1.0;
            if (w == 0.0)
                continue;
            double a = 0.0;
            for (size_t i = 0; i < N; i++) {
                if (observed != NULL && !observed[ty * N + i])
                    continue;
                const size_t ik = k * N + i;
                const double *c = p->C->data + ik * ct, ri = p->r->data[ik * rs];
                double res = yr[i] - p->d->data[ik * ds];
                for (size_t j = 0; j < D; j++)
                    res -= c[j] * m[j];
                a += -0.5 * ((lr ? lr[ik] : LOG_2PI + log(ri)) + res * res / ri);
            }
            tot += E > 1 ? w * a : a;
        }
    }
    free(lr);
    return tot;
}

/* The ELBO from the workspace: its scores w->s (p and q(x)), observation
 * potentials w->obs (p and q(z); with several processes already summed)
 * and initial-state terms, the entropies q->hz, q->hx. */
static lse_status elbo_ws(const lsw *w, const lse_lslds_params *p,
                          const gsl_matrix *y, const unsigned char *observed,
                          const size_t *seq, const lse_lslds_post *q, par *pr,
                          double *elbo, const char *fn, lse_error *err)
{
    const size_t T = q->T, K = p->K, D = p->D, DD = D * D;
    double total = q->hz + q->hx;
    for (size_t t = 0; t < T; t++) {
        const int start = is_start(seq, t);
        const double *wt = q->w->data + t * q->w->tda, *s = w->s + t * K;
        for (size_t k = 0; k < K; k++) {
            total += wt[k] * s[k];
            if (!p->markov || start)
                total += xlogy(wt[k], gsl_vector_get(p->init, k));
        }
        const double *J = w->obs + t * (DD + D);
        const double *P = q->cov->data + t * q->cov->tda;
        double tr = 0.0;
        for (size_t i = 0; i < DD; i++)
            tr += J[i] * P[i];
        total -= 0.5 * tr;
    }
    total += lse_lsw_start_expect(w, q, seq);
    double o = obs_residuals(p, y, observed, q, pr);
    if (pr != NULL) {
        lse_status st = lse_comm_sum(&pr->comm, &o, 1, fn, err);
        if (st != LSE_OK)
            return st;
    }
    total += o;
    if (p->markov)
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                total += xlogy(gsl_matrix_get(q->xi, j, k),
                               gsl_matrix_get(p->trans, j, k));
    if (!isfinite(total))
        return lse_error_set(err, LSE_ENONFINITE, fn, "ELBO is not finite");
    *elbo = total;
    return LSE_OK;
}

static lse_status elbo_impl(const lse_lslds_params *p, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            const lse_lslds_post *q, double *elbo,
                            const char *fn, lse_error *err)
{
    if (elbo == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "elbo is NULL");
    if (!q->have_x || !q->have_z || q->lags != p->lags)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(z) and q(x) must both be computed");
    lsw w;
    lse_status st = ws_alloc(&w, q->T, p, fn, err);
    if (st != LSE_OK)
        return st;
    if (lse_lsw_modes(&w, p) != 0) {
        st = lse_error_set(err, LSE_ENUMERIC, fn,
                           "Q_k or P0 is not positive definite");
    } else {
        lse_lsw_moments(&w, q, seq);
        lse_lsw_scores(&w);
        obs_potentials(p, y, observed, q, NULL, NULL, w.obs);
        st = elbo_ws(&w, p, y, observed, seq, q, NULL, elbo, fn, err);
    }
    lse_lsw_free(&w);
    return st;
}

/* Solve W S = B for W (rows of B), S SPD (n x n): W = B S^-1. */
static int solve_right(const gsl_matrix *S, gsl_matrix *B, gsl_matrix *work)
{
    gsl_matrix_memcpy(work, S);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_linalg_cholesky_decomp1(work);
    gsl_set_error_handler(old);
    if (st != GSL_SUCCESS)
        return -1;
    for (size_t i = 0; i < B->size1; i++) {
        gsl_vector_view r = gsl_matrix_row(B, i);
        gsl_linalg_cholesky_svx(work, &r.vector);
    }
    return 0;
}

/* The initial state (m0, P0 + reg I) from the sequence starts, the mode
 * probabilities and (Markov) the transitions from q(z). */
static void mstep_start(lse_lslds_params *p, const size_t *seq,
                        const lse_lslds_post *q, double reg)
{
    const size_t T = q->T, K = p->K, D = p->D, L = p->lags;
    double ns = 0.0;
    size_t s0 = 0;
    gsl_vector_set_zero(p->m0);
    for (size_t t = 0; t < T; t++)
        if (lse_lsw_head(seq, t, L, &s0)) {
            ns += 1.0;
            for (size_t i = 0; i < D; i++)
                gsl_vector_set(p->m0, i,
                               gsl_vector_get(p->m0, i) +
                                   gsl_matrix_get(q->mean, t, i));
        }
    gsl_vector_scale(p->m0, 1.0 / ns);
    gsl_matrix_set_zero(p->P0);
    for (size_t t = 0; t < T; t++)
        if (lse_lsw_head(seq, t, L, &s0))
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++) {
                    const double di =
                        gsl_matrix_get(q->mean, t, i) - gsl_vector_get(p->m0, i);
                    const double dj =
                        gsl_matrix_get(q->mean, t, j) - gsl_vector_get(p->m0, j);
                    gsl_matrix_set(p->P0, i, j,
                                   gsl_matrix_get(p->P0, i, j) +
                                       (gsl_matrix_get(q->cov, t, i * D + j) +
                                        di * dj) / ns);
                }
    for (size_t i = 0; i < D; i++)
        gsl_matrix_set(p->P0, i, i, gsl_matrix_get(p->P0, i, i) + reg);
    gsl_vector_set_zero(p->init);
    for (size_t t = 0; t < T; t++)
        if (!p->markov || is_start(seq, t))
            for (size_t k = 0; k < K; k++)
                gsl_vector_set(p->init, k,
                               gsl_vector_get(p->init, k) +
                                   gsl_matrix_get(q->w, t, k));
    const double si = gsl_blas_dasum(p->init);
    gsl_vector_scale(p->init, 1.0 / si);
    if (p->markov)
        for (size_t j = 0; j < K; j++) {
            gsl_vector_const_view row = gsl_matrix_const_row(q->xi, j);
            const double sr = gsl_blas_dasum(&row.vector);
            if (sr <= 0.0)
                continue; /* never visited: keep the row */
            for (size_t k = 0; k < K; k++)
                gsl_matrix_set(p->trans, j, k,
                               gsl_matrix_get(q->xi, j, k) / sr);
        }
}

/* Mode k's expected dynamics statistics from the weighted moment sums WM
 * (lse_lsw_moment_sums): Sxx = E[x~ x~'] of the previous states x~ =
 * (x_{t-1}, 1), Stx = E[x_t x~'], Stt = E[x_t x_t'], weighted by
 * q(z_t = k) over the rows that are not sequence starts. Returns the
 * total weight. */
static double dyn_stats(const double *WM, size_t D, size_t P, size_t k,
                        gsl_matrix *Sxx, gsl_matrix *Stx, gsl_matrix *Stt)
{
    const size_t DD = D * D, M = DD + D * P + P * P + D + P + 1;
    const double *r = WM + k * M, *Sp = r + DD + D * P, *m1 = Sp + P * P;
    const double *m0 = m1 + D;
    const double n = r[M - 1];
    for (size_t i = 0; i < P; i++) {
        for (size_t j = 0; j < P; j++)
            gsl_matrix_set(Sxx, i, j, Sp[i * P + j]);
        gsl_matrix_set(Sxx, i, P, 0.5 * m0[i]);
        gsl_matrix_set(Sxx, P, i, 0.5 * m0[i]);
    }
    for (size_t i = 0; i < D; i++) {
        for (size_t j = 0; j < P; j++)
            gsl_matrix_set(Stx, i, j, -0.5 * r[DD + i * P + j]);
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(Stt, i, j, r[i * D + j]);
        gsl_matrix_set(Stx, i, P, -0.5 * m1[i]);
    }
    gsl_matrix_set(Sxx, P, P, n);
    return n;
}

/* Emission statistics of one shared block, per column (layout of
 * mstep_impl's es: Sxx (D1 D1), Sy (D1), n, yy): the moments of all own
 * rows once, minus the rows where the column is missing. */
static int emis_stats_shared(const gsl_matrix *y,
                              const unsigned char *observed,
                              const lse_lslds_post *q, const par *pr,
                              size_t N, double *es)
{
    const size_t D = q->D, D1 = D + 1, SW = D1 * D1 + D1 + 2;
    const size_t rows = pr ? pr->n_own : q->T;
    double *com = calloc(2 * D1 * D1, sizeof(double)), *rowS = com + D1 * D1;
    if (com == NULL)
        return -1;
    for (size_t tl = 0; tl < rows; tl++) {
        const size_t t = pr ? pr->ctx + tl : tl, tq = pr ? pr->offset + tl : tl;
        const double *m = q->mean->data + tq * q->mean->tda;
        const double *P = q->cov->data + tq * q->cov->tda;
        for (size_t a = 0; a < D1; a++)
            for (size_t c = 0; c < D1; c++) {
                const double ma = a < D ? m[a] : 1.0, mc = c < D ? m[c] : 1.0;
                rowS[a * D1 + c] = (a < D && c < D ? P[a * D + c] : 0.0) + ma * mc;
            }
        for (size_t i = 0; i < D1 * D1; i++)
            com[i] += rowS[i];
        const double *yr = y->data + t * y->tda;
        for (size_t i = 0; i < N; i++) {
            double *e = es + i * SW, *ey = e + D1 * D1;
            if (observed != NULL && !observed[t * N + i]) {
                for (size_t a = 0; a < D1 * D1; a++)
                    e[a] -= rowS[a];
                continue;
            }
            const double yt = yr[i];
            for (size_t a = 0; a < D; a++)
                ey[a] += yt * m[a];
            ey[D] += yt;
            e[SW - 2] += 1.0;
            e[SW - 1] += yt * yt;
        }
    }
    for (size_t i = 0; i < N; i++)
        for (size_t a = 0; a < D1 * D1; a++)
            es[i * SW + a] += com[a];
    free(com);
    return 0;
}

/* Emission statistics of the blocks (per mode: rows weighted by
 * q(z_t = k)), per observed column. */
static void emis_stats_modes(const lse_lslds_params *p, const gsl_matrix *y,
                             const unsigned char *observed,
                             const lse_lslds_post *q, const par *pr,
                             double *es)
{
    const size_t T = q->T, D = p->D, N = p->N, D1 = D + 1, E = NE(p);
    const size_t SW = D1 * D1 + D1 + 2;
    for (size_t ik = 0; ik < E * N; ik++) {
        const size_t i = ik % N, k = ik / N;
        double *e = es + ik * SW, *eS = e, *ey = e + D1 * D1;
        double n = 0.0, yy = 0.0;
        const size_t rows = pr ? pr->n_own : T;
        for (size_t tl = 0; tl < rows; tl++) {
            const size_t t = pr ? pr->ctx + tl : tl; /* y row */
            const size_t tq = pr ? pr->offset + tl : tl; /* q row */
            if (observed != NULL && !observed[t * N + i])
                continue;
            const double w = gsl_matrix_get(q->w, tq, k);
            const double yt = gsl_matrix_get(y, t, i), wy = w * yt;
            const double *m = q->mean->data + tq * q->mean->tda;
            const double *P = q->cov->data + tq * q->cov->tda;
            n += w;
            yy += wy * yt;
            for (size_t a = 0; a < D1; a++) {
                const double ma = a < D ? m[a] : 1.0;
                ey[a] += wy * ma;
                for (size_t c = 0; c < D1; c++) {
                    const double mc = c < D ? m[c] : 1.0;
                    const double v = (a < D && c < D) ? P[a * D + c] : 0.0;
                    eS[a * D1 + c] += w * (v + ma * mc);
                }
            }
        }
        e[SW - 2] = n;
        e[SW - 1] = yy;
    }
}

static lse_status mstep_impl(lse_lslds_params *p, const gsl_matrix *y,
                             const unsigned char *observed, const size_t *seq,
                             const lse_lslds_post *q, double reg, par *pr,
                             lsw *ws, const char *fn, lse_error *err);

lse_status lse_lslds_mstep(lse_lslds_params *p, const gsl_matrix *y,
                           const unsigned char *observed, const size_t *seq,
                           const lse_lslds_post *q, double reg, lse_error *err)
{
    static const char fn[] = "lse_lslds_mstep";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK)
        return st;
    return mstep_impl(p, y, observed, seq, q, reg, NULL, NULL, fn, err);
}

/* The dynamics of every mode from the moment sums WM. */
static void mstep_dynamics(lse_lslds_params *p, const double *WM, double reg,
                           gsl_matrix *Sxx, gsl_matrix *Stx, gsl_matrix *Stt,
                           gsl_matrix *W, gsl_matrix *work)
{
    const size_t D = p->D, P = p->lags * D;
    for (size_t k = 0; k < p->K; k++) {
        const double n = dyn_stats(WM, D, P, k, Sxx, Stx, Stt);
        if (n < 1e-8)
            continue;
        gsl_matrix_memcpy(W, Stx);
        if (solve_right(Sxx, W, work) != 0)
            continue; /* degenerate statistics: keep this mode */
        /* Q = (Stt - W Stx') / n + reg I */
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, W, Stx, 1.0, Stt);
        for (size_t i = 0; i < D; i++) {
            for (size_t j = 0; j < D; j++) {
                const double v = 0.5 * (gsl_matrix_get(Stt, i, j) +
                                        gsl_matrix_get(Stt, j, i)) / n +
                                 (i == j ? reg : 0.0);
                gsl_matrix_set(p->Q, k, i * D + j, v);
            }
            for (size_t j = 0; j < P; j++)
                gsl_matrix_set(p->A, k, i * P + j, gsl_matrix_get(W, i, j));
            gsl_matrix_set(p->b, k, i, gsl_matrix_get(W, i, P));
        }
    }
}

/* The emission blocks from the per-column statistics es. */
static void mstep_emission(lse_lslds_params *p, const double *es, double reg,
                           gsl_matrix *Sxx, gsl_matrix *Wy, gsl_vector *sy,
                           gsl_matrix *work)
{
    const size_t D = p->D, N = p->N, D1 = D + 1, E = NE(p);
    const size_t SW = D1 * D1 + D1 + 2;
    for (size_t ik = 0; ik < E * N; ik++) {
        const double *e = es + ik * SW;
        const double n = e[SW - 2], yy = e[SW - 1];
        for (size_t a = 0; a < D1; a++) {
            Wy->data[a] = e[D1 * D1 + a];
            for (size_t c = 0; c < D1; c++)
                gsl_matrix_set(Sxx, a, c, e[a * D1 + c]);
        }
        if (n < (E > 1 ? 1e-8 : 1.0))
            continue;
        for (size_t a = 0; a < D1; a++)
            gsl_vector_set(sy, a, Wy->data[a]); /* keeps Sy */
        if (solve_right(Sxx, Wy, work) != 0)
            continue;
        double wsy = 0.0;
        for (size_t a = 0; a < D1; a++)
            wsy += Wy->data[a] * gsl_vector_get(sy, a);
        for (size_t a = 0; a < D; a++)
            gsl_matrix_set(p->C, ik, a, Wy->data[a]);
        gsl_vector_set(p->d, ik, Wy->data[D]);
        gsl_vector_set(p->r, ik, fmax((yy - wsy) / n, 0.0) + reg);
    }
}

/* With @p pr (several processes) the emission statistics of this
 * process's rows, summed over the processes. @p ws: a workspace whose
 * moment rows are those of q (NULL: made here). */
static lse_status mstep_impl(lse_lslds_params *p, const gsl_matrix *y,
                             const unsigned char *observed, const size_t *seq,
                             const lse_lslds_post *q, double reg, par *pr,
                             lsw *ws, const char *fn, lse_error *err)
{
    lse_status st = LSE_OK;
    if (!q->have_x || !q->have_z || q->lags != p->lags)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(z) and q(x) must both be computed");
    if (!(reg >= 0.0) || !isfinite(reg))
        return lse_error_set(err, LSE_EDOM, fn, "reg = %g must be >= 0", reg);
    const size_t K = p->K, D = p->D, N = p->N, D1 = D + 1;
    const size_t P = p->lags * D, P1 = P + 1;
    const size_t M = D * D + D * P + P * P + D + P + 1;
    lsw own;
    if (ws == NULL) {
        if ((st = ws_alloc(&own, q->T, p, fn, err)) != LSE_OK)
            return st;
        lse_lsw_moments(&own, q, seq);
    }
    gsl_matrix *Sxx = gsl_matrix_alloc(D1, D1), *Stx = gsl_matrix_alloc(D, P1);
    gsl_matrix *Stt = gsl_matrix_alloc(D, D), *work = gsl_matrix_alloc(D1, D1);
    gsl_matrix *W = gsl_matrix_alloc(D, P1), *Wy = gsl_matrix_alloc(1, D1);
    gsl_matrix *Spp = gsl_matrix_alloc(P1, P1), *wpp = gsl_matrix_alloc(P1, P1);
    gsl_vector *sy = gsl_vector_alloc(D1);
    /* emission statistics per column: Sxx (D1 D1), Sy (D1), n, yy */
    const size_t SW = D1 * D1 + D1 + 2, E = NE(p);
    double *es = calloc(E * N * SW, sizeof(double));
    double *WM = malloc(K * M * sizeof(double));
    if (!Sxx || !Stx || !Stt || !work || !W || !sy || !Wy || !es || !WM ||
        !Spp || !wpp) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    lse_lsw_moment_sums(ws ? ws : &own, q, WM);
    mstep_dynamics(p, WM, reg, Spp, Stx, Stt, W, wpp);
    if (E > 1)
        emis_stats_modes(p, y, observed, q, pr, es);
    else if (emis_stats_shared(y, observed, q, pr, N, es) != 0) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    if (pr != NULL &&
        (st = lse_comm_sum(&pr->comm, es, E * N * SW, fn, err)) != LSE_OK)
        goto done;
    mstep_emission(p, es, reg, Sxx, Wy, sy, work);
    mstep_start(p, seq, q, reg); /* initial state and mode probabilities */
done:
    if (ws == NULL)
        lse_lsw_free(&own);
    gsl_matrix_free(Sxx);
    gsl_matrix_free(Stx);
    gsl_matrix_free(Stt);
    gsl_matrix_free(work);
    gsl_matrix_free(Spp);
    gsl_matrix_free(wpp);
    gsl_matrix_free(W);
    gsl_vector_free(sy);
    gsl_matrix_free(Wy);
    free(es);
    free(WM);
    return st;
}

lse_lslds_opts lse_lslds_opts_default(void)
{
    lse_lslds_opts o = {.init_given = 0,
                        .n_init = 1,
                        .max_iter = 200,
                        .tol = 1e-7,
                        .reg = 1e-6,
                        .seed = 0};
    return o;
}

/* Probabilistic PCA from the eigenpairs (lam descending, U) of the
 * data's covariance: the first emission block C (N x D) and the noise
 * variance, which it returns. */
static double pca_emission(lse_lslds_params *p, const gsl_vector *lam,
                           const gsl_matrix *U)
{
    const size_t N = p->N, D = p->D;
    double sig2 = 0.0, tr = 0.0;
    for (size_t i = 0; i < N; i++)
        tr += fmax(gsl_vector_get(lam, i), 0.0);
    for (size_t i = D; i < N; i++)
        sig2 += fmax(gsl_vector_get(lam, i), 0.0) / (double)(N - D);
    sig2 = fmax(sig2, 1e-3 * tr / (double)N + 1e-12);
    for (size_t j = 0; j < D; j++) {
        const double sc = sqrt(fmax(gsl_vector_get(lam, j) - sig2,
                                    1e-6 * gsl_vector_get(lam, 0) + 1e-12));
        for (size_t i = 0; i < N; i++)
            gsl_matrix_set(p->C, i, j, gsl_matrix_get(U, i, j) * sc);
    }
    return sig2;
}

/* The latent means of the centred rows Yc: x_t = (C'C + sig2 I)^-1 C'
 * (y_t - d) into Xo. -1 when out of memory, 1 when the projection is
 * singular. */
static int pca_states(const gsl_matrix *C0, double sig2, const gsl_matrix *Yc,
                      gsl_matrix *Xo)
{
    const size_t N = C0->size1, D = C0->size2;
    gsl_matrix *M = gsl_matrix_alloc(D, D), *W = gsl_matrix_alloc(N, D);
    gsl_matrix *wk = gsl_matrix_alloc(D, D);
    if (!M || !W || !wk) {
        gsl_matrix_free(M);
        gsl_matrix_free(W);
        gsl_matrix_free(wk);
        return -1;
    }
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, C0, C0, 0.0, M);
    for (size_t i = 0; i < D; i++)
        gsl_matrix_set(M, i, i, gsl_matrix_get(M, i, i) + sig2);
    gsl_matrix_memcpy(W, C0);
    int bad = 0;
    {
        gsl_matrix_view Wt = gsl_matrix_submatrix(W, 0, 0, N, D);
        bad = solve_right(M, &Wt.matrix, wk);
    }
    if (!bad)
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, Yc, W, 0.0, Xo);
    gsl_matrix_free(M);
    gsl_matrix_free(W);
    gsl_matrix_free(wk);
    return bad ? 1 : 0;
}

/* The modes' dynamics (A, b, Q) and probabilities from the ARHMM fit m;
 * a, cv (D x D) and bv (D) are scratch. */
static void modes_from_slds(lse_lslds_params *p, const lse_slds *m,
                            gsl_matrix *a, gsl_vector *bv, gsl_matrix *cv)
{
    const size_t D = p->D, K = p->K, P = p->lags * D;
    for (size_t k = 0; k < K; k++) {
        lse_slds_get_a(m, k, a);
        lse_slds_get_b(m, k, bv);
        lse_slds_get_cov(m, k, cv);
        for (size_t i = 0; i < D; i++) {
            gsl_matrix_set(p->b, k, i, gsl_vector_get(bv, i));
            for (size_t j = 0; j < P; j++)
                gsl_matrix_set(p->A, k, i * P + j, gsl_matrix_get(a, i, j));
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(p->Q, k, i * D + j, gsl_matrix_get(cv, i, j));
        }
    }
    if (p->markov) {
        lse_slds_get_initial(m, p->init);
        lse_slds_get_transition(m, p->trans);
    } else {
        lse_slds_get_weights(m, p->init);
    }
}

/* The initial state: mean and covariance (+ 1e-6 I) of the states X. */
static void init_state_of(lse_lslds_params *p, const gsl_matrix *X)
{
    const size_t T = X->size1, D = p->D;
    gsl_vector_set_zero(p->m0);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < D; i++)
            gsl_vector_set(p->m0, i,
                           gsl_vector_get(p->m0, i) +
                               gsl_matrix_get(X, t, i) / (double)T);
    gsl_matrix_set_zero(p->P0);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(
                    p->P0, i, j,
                    gsl_matrix_get(p->P0, i, j) +
                        (gsl_matrix_get(X, t, i) - gsl_vector_get(p->m0, i)) *
                            (gsl_matrix_get(X, t, j) -
                             gsl_vector_get(p->m0, j)) /
                            (double)T);
    for (size_t i = 0; i < D; i++)
        gsl_matrix_set(p->P0, i, i, gsl_matrix_get(p->P0, i, i) + 1e-6);
}

/* The autoregressive HMM / mixture of p's shape fitted to the states X
 * into *m (freed by the caller either way). */
static lse_status fit_arhmm(const lse_lslds_params *p, const gsl_matrix *X,
                            const size_t *seq, unsigned long seed,
                            lse_slds **m, const char *fn, lse_error *err)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = p->K;
    cfg.dim = p->D;
    cfg.lags = p->lags;
    cfg.markov = p->markov;
    lse_error serr;
    lse_status st = lse_slds_new(&cfg, m, &serr);
    if (st == LSE_OK) {
        lse_slds_opts so = lse_slds_opts_default();
        so.seed = seed;
        so.max_iter = 100;
        st = lse_slds_fit(*m, X, seq, &so, &serr);
    }
    if (st != LSE_OK)
        lse_error_set(err, st, fn, "ARHMM on the PCA states: %s", serr.message);
    return st;
}

/* Per column i: the sum (sn[i]) and count (sn[N + i]) of the observed
 * entries of rows [y0, y0 + To). */
static void column_sums(const gsl_matrix *y, const unsigned char *observed,
                        size_t N, size_t y0, size_t To, double *sn)
{
    for (size_t i = 0; i < N; i++) {
        double s = 0.0, n = 0.0;
        for (size_t t = y0; t < y0 + To; t++)
            if (observed == NULL || observed[t * N + i]) {
                s += gsl_matrix_get(y, t, i);
                n += 1.0;
            }
        sn[i] = s;
        sn[N + i] = n;
    }
}

static lse_status init_impl(lse_lslds_params *p, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            par *pr, unsigned long seed, const char *fn,
                            lse_error *err);

/* LSE_LSLDS_INIT_LDS_ITERS EM iterations of the one-mode model from the
 * PCA emission of block 0 of @p p (its C, d, r are replaced by the
 * result's), A = 0.9 I, Q = I; X (T, D, all rows) becomes the smoothed
 * means. */
#define LSE_LSLDS_INIT_LDS_ITERS 20
static lse_status lds_refine(lse_lslds_params *p, const gsl_matrix *y,
                             const unsigned char *observed, const size_t *seq,
                             par *pr, gsl_matrix *X, const char *fn,
                             lse_error *err)
{
    const size_t T = X->size1, D = p->D, N = p->N;
    lse_lslds_params *p1 = NULL;
    lse_lslds_post *q = NULL;
    lsw w;
    int have_w = 0;
    lse_status st = lse_lslds_params_new(1, D, N, 1, &p1, err);
    if (st == LSE_OK)
        st = lse_lslds_post_new(T, 1, D, &q, err);
    if (st == LSE_OK && (st = ws_alloc(&w, T, p1, fn, err)) == LSE_OK)
        have_w = 1;
    if (st != LSE_OK)
        goto done;
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(p1->C, i, j, gsl_matrix_get(p->C, i, j));
        gsl_vector_set(p1->d, i, gsl_vector_get(p->d, i));
        gsl_vector_set(p1->r, i, gsl_vector_get(p->r, i));
    }
    for (size_t it = 0; st == LSE_OK && it <= LSE_LSLDS_INIT_LDS_ITERS; it++) {
        st = ws_modes(&w, p1, 1, fn, err);
        if (st == LSE_OK)
            st = ws_obs(&w, p1, y, observed, q, pr, fn, err);
        if (st == LSE_OK)
            st = ws_smooth(&w, seq, q, NULL, fn, err);
        if (st != LSE_OK || it == LSE_LSLDS_INIT_LDS_ITERS)
            break;
        lse_lsw_moments(&w, q, seq);
        lse_lsw_scores(&w);
        st = update_z_s(p1, seq, w.s, q, fn, err);
        if (st == LSE_OK)
            st = mstep_impl(p1, y, observed, seq, q, 1e-6, pr, &w, fn, err);
    }
    if (st != LSE_OK)
        goto done;
    gsl_matrix_memcpy(X, q->mean);
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(p->C, i, j, gsl_matrix_get(p1->C, i, j));
        gsl_vector_set(p->d, i, gsl_vector_get(p1->d, i));
        gsl_vector_set(p->r, i, gsl_vector_get(p1->r, i));
    }
done:
    if (have_w)
        lse_lsw_free(&w);
    lse_lslds_params_free(p1);
    lse_lslds_post_free(q);
    return st;
}

lse_status lse_lslds_init(lse_lslds_params *p, const gsl_matrix *y,
                          const unsigned char *observed, const size_t *seq,
                          unsigned long seed, lse_error *err)
{
    static const char fn[] = "lse_lslds_init";
    if (p == NULL || y == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params and y are required");
    if (y->size2 != p->N)
        return lse_error_set(err, LSE_EDIM, fn, "y has %zu columns, want %zu",
                             y->size2, p->N);
    return init_impl(p, y, observed, seq, NULL, seed, fn, err);
}

/* With @p pr (several processes) the PCA sums of this process's rows are
 * summed over the processes, the PCA states of all rows are gathered
 * (seq has the global rows), and the rest runs on every process alike. */
static lse_status init_impl(lse_lslds_params *p, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            par *pr, unsigned long seed, const char *fn,
                            lse_error *err)
{
    const size_t N = p->N, D = p->D, K = p->K;
    const size_t T = pr ? pr->comm.n_total : y->size1; /* all rows */
    const size_t To = pr ? pr->n_own : T, y0 = pr ? pr->ctx : 0; /* here */
    if (D > N)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "PCA initialization needs D = %zu <= N = %zu", D,
                             N);
    lse_status st = LSE_OK;
    gsl_matrix *Yc = gsl_matrix_calloc(To, N), *S = gsl_matrix_calloc(N, N);
    gsl_matrix *U = gsl_matrix_alloc(N, N), *X = gsl_matrix_calloc(T, D);
    double *sn = calloc(2 * N, sizeof(double));
    gsl_vector *lam = gsl_vector_alloc(N), *mu = gsl_vector_calloc(N);
    gsl_eigen_symmv_workspace *ew = gsl_eigen_symmv_alloc(N);
    gsl_matrix *a = gsl_matrix_alloc(D, D * p->lags);
    gsl_matrix *cv = gsl_matrix_alloc(D, D);
    gsl_vector *bv = gsl_vector_alloc(D);
    lse_slds *m = NULL;
    if (!Yc || !S || !U || !X || !lam || !mu || !ew || !a || !cv || !bv ||
        !sn) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    column_sums(y, observed, N, y0, To, sn);
    if (pr != NULL && (st = lse_comm_sum(&pr->comm, sn, 2 * N, fn, err)) !=
                          LSE_OK)
        goto done;
    for (size_t i = 0; i < N; i++) {
        const double s = sn[i], n = sn[N + i];
        if (n == 0.0) {
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "column %zu has no observed entry", i + 1);
            goto done;
        }
        gsl_vector_set(mu, i, s / n);
        for (size_t t = 0; t < To; t++)
            if (observed == NULL || observed[(y0 + t) * N + i])
                gsl_matrix_set(Yc, t, i, gsl_matrix_get(y, y0 + t, i) - s / n);
    }
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0 / (double)T, Yc, Yc, 0.0, S);
    if (pr != NULL &&
        (st = lse_comm_sum(&pr->comm, S->data, N * N, fn, err)) != LSE_OK)
        goto done;
    lse_eigen_symmv(S, lam, U, ew);
    gsl_eigen_symmv_sort(lam, U, GSL_EIGEN_SORT_VAL_DESC);
    const double sig2 = pca_emission(p, lam, U);
    gsl_vector_view d0 = gsl_vector_subvector(p->d, 0, N);
    gsl_vector_memcpy(&d0.vector, mu);
    gsl_vector_set_all(p->r, sig2);
    gsl_matrix_view C0v = gsl_matrix_submatrix(p->C, 0, 0, N, D);
    const gsl_matrix *C0 = &C0v.matrix; /* the first (or shared) block */
    /* latent means: x_t = (C'C + sig2 I)^-1 C' (y_t - d) */
    {
        gsl_matrix_view Xo =
            gsl_matrix_submatrix(X, pr ? pr->offset : 0, 0, To, D);
        const int rc = pca_states(C0, sig2, Yc, &Xo.matrix);
        if (rc < 0) {
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
            goto done;
        }
        if (rc > 0) {
            st = lse_error_set(err, LSE_ENUMERIC, fn, "PCA projection is singular");
            goto done;
        }
    }
    /* the PCA states of all rows on every process (zeros elsewhere) */
    if (pr != NULL &&
        (st = lse_comm_sum(&pr->comm, X->data, T * D, fn, err)) != LSE_OK)
        goto done;
    /* K > 1: a linear-Gaussian state-space model (K = 1) refines the PCA
     * emission and replaces the PCA states by its smoothed means, so the
     * mode fit below sees the dynamics rather than the observation noise
     * (on noisy data the PCA states favour a fast-switching mode fit);
     * with N = D there is no observation noise to separate from the
     * state noise (the one-mode fit would only shrink R) */
    if (K > 1 && N > D &&
        (st = lds_refine(p, y, observed, seq, pr, X, fn, err)) != LSE_OK)
        goto done;
    /* modes: autoregressive HMM / mixture on the latent means */
    if ((st = fit_arhmm(p, X, seq, seed, &m, fn, err)) != LSE_OK)
        goto done;
    modes_from_slds(p, m, a, bv, cv);
    init_state_of(p, X); /* mean and covariance of the PCA states */
    for (size_t k = 1; k < NE(p); k++) { /* per mode: copies of the PCA fit */
        gsl_matrix_view Ck = gsl_matrix_submatrix(p->C, k * N, 0, N, D);
        gsl_matrix_memcpy(&Ck.matrix, C0);
        gsl_vector_view dk = gsl_vector_subvector(p->d, k * N, N);
        gsl_vector_view rk = gsl_vector_subvector(p->r, k * N, N);
        gsl_vector_const_view d0c = gsl_vector_const_subvector(p->d, 0, N);
        gsl_vector_const_view r0c = gsl_vector_const_subvector(p->r, 0, N);
        gsl_vector_memcpy(&dk.vector, &d0c.vector);
        gsl_vector_memcpy(&rk.vector, &r0c.vector);
    }
done:
    lse_slds_free(m);
    gsl_matrix_free(Yc);
    gsl_matrix_free(S);
    gsl_matrix_free(U);
    gsl_matrix_free(X);
    gsl_vector_free(lam);
    gsl_vector_free(mu);
    if (ew)
        gsl_eigen_symmv_free(ew);
    gsl_matrix_free(a);
    gsl_matrix_free(cv);
    gsl_vector_free(bv);
    free(sn);
    return st;
}

static int dropped(double before, double after)
{
    return after < before - 1e-8 * fmax(1.0, fabs(before));
}

/* Several processes: the shares (one collective), the global sequence
 * ids (a sum of per-row start flags; a block continues the sequence of
 * its context row when their ids agree) and the buffer of the
 * observation potentials. */
static lse_status par_setup(par *pr, const lse_lslds_opts *o,
                            const gsl_matrix *y, const size_t *seq, size_t D,
                            size_t **gseq, double **obs, lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    memset(pr, 0, sizeof *pr);
    if (o->context_rows > 1 || y->size1 <= o->context_rows)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "context_rows = %zu with %zu rows here (want 0 "
                             "or 1 context row and at least one own row)",
                             o->context_rows, y->size1);
    pr->ctx = o->context_rows;
    pr->n_own = y->size1 - pr->ctx;
    lse_status st = lse_comm_init(&pr->comm, o->reduce, o->reduce_user,
                                  o->rank, o->n_ranks, pr->n_own, fn, err);
    if (st != LSE_OK)
        return st;
    pr->offset = pr->comm.offset;
    const size_t T = pr->comm.n_total, W = D * D + D;
    double *flag = calloc(T, sizeof(double));
    *gseq = malloc(T * sizeof(size_t));
    if (T > (SIZE_MAX / sizeof(double) - 1) / W)
        *obs = NULL;
    else
        *obs = malloc((T * W + 1) * sizeof(double));
    if (flag == NULL || *gseq == NULL || *obs == NULL) {
        free(flag);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory (T = %zu)", T);
    }
    for (size_t t = 0; t < pr->n_own; t++) {
        const size_t l = pr->ctx + t; /* local row */
        const int start = l == 0 || (seq != NULL && seq[l] != seq[l - 1]);
        flag[pr->offset + t] = start ? 1.0 : 0.0;
    }
    st = lse_comm_sum(&pr->comm, flag, T, fn, err);
    if (st == LSE_OK) {
        size_t id = 0;
        for (size_t t = 0; t < T; t++) {
            if (t > 0 && flag[t] != 0.0)
                id++;
            (*gseq)[t] = id;
        }
    }
    free(flag);
    return st;
}

/* dst = src, both of the same shape and both computed. */
static void post_copy(lse_lslds_post *dst, const lse_lslds_post *src)
{
    gsl_matrix_memcpy(dst->w, src->w);
    gsl_matrix_memcpy(dst->xi, src->xi);
    gsl_matrix_memcpy(dst->mean, src->mean);
    gsl_matrix_memcpy(dst->cov, src->cov);
    gsl_matrix_memcpy(dst->cross, src->cross);
    if (dst->lagcov != NULL && src->lagcov != NULL)
        gsl_matrix_memcpy(dst->lagcov, src->lagcov);
    dst->hz = src->hz;
    dst->hx = src->hx;
    dst->have_x = dst->have_z = 1;
}

/* The state of lse_lslds_fit's loop: the workspace (its transition
 * blocks are those of the current parameters, its scores those of the
 * current parameters and q(x), its observation potentials those of the
 * current parameters and, with per-mode emissions, q(z)), the emission
 * scores (per-mode emissions), several processes. */
typedef struct fitctx {
    const gsl_matrix *y;
    const unsigned char *observed;
    const size_t *seq;
    par *pr;
    lsw w;
    gsl_matrix *es;
} fitctx;

/* q(x) then its moments and the scores: the start of a run, and the
 * second half of the E-step. */
static lse_status fit_qx(fitctx *c, const lse_lslds_params *cur,
                         lse_lslds_post *qc, const char *fn, lse_error *err)
{
    lse_status st = ws_smooth(&c->w, c->seq, qc, NULL, fn, err);
    if (st == LSE_OK) {
        lse_lsw_moments(&c->w, qc, c->seq);
        lse_lsw_scores(&c->w);
    }
    (void)cur;
    return st;
}

/* One E-step of lse_lslds_fit: (emission scores,) q(z), the ELBO e1, q(x),
 * the ELBO e2. */
static lse_status fit_estep(fitctx *c, const lse_lslds_params *cur,
                            lse_lslds_post *qc, size_t it, double prev,
                            double *e1, double *e2, lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    lse_status st = LSE_OK;
    if (c->es != NULL) {
        st = emis_scores(cur, c->y, c->observed, qc, c->pr, c->es, fn, err);
        if (st != LSE_OK)
            return st;
        add_es(&c->w, c->es); /* the scores are recomputed after q(x) */
    }
    st = update_z_s(cur, c->seq, c->w.s, qc, fn, err);
    if (st == LSE_OK && c->es != NULL) { /* potentials weighted by q(z) */
        st = ws_obs(&c->w, cur, c->y, c->observed, qc, c->pr, fn, err);
        if (st == LSE_OK) /* the ELBO's scores without the emission ones */
            lse_lsw_scores(&c->w);
    }
    if (st == LSE_OK)
        st = elbo_ws(&c->w, cur, c->y, c->observed, c->seq, qc, c->pr, e1, fn, err);
    if (st == LSE_OK)
        st = fit_qx(c, cur, qc, fn, err);
    if (st == LSE_OK)
        st = elbo_ws(&c->w, cur, c->y, c->observed, c->seq, qc, c->pr, e2, fn, err);
    if (st == LSE_OK && (dropped(prev, *e1) || dropped(*e1, *e2)))
        st = lse_error_set(err, LSE_EINCREASE, fn,
                           "ELBO decreased in the E-step of iteration "
                           "%zu (%.17g, %.17g, %.17g)",
                           it, prev, *e1, *e2);
    return st;
}

/* One M-step of lse_lslds_fit (m0, P0 kept with opts->fix_initial, in
 * m0s, P0s), the workspace brought to the new parameters, then the ELBO
 * e3. */
static lse_status fit_mstep(fitctx *c, lse_lslds_params *cur,
                            const lse_lslds_post *qc,
                            const lse_lslds_opts *opts, gsl_vector *m0s,
                            gsl_matrix *P0s, size_t it, double e2, double *e3,
                            lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    if (opts->fix_initial) { /* keep m0, P0 */
        gsl_vector_memcpy(m0s, cur->m0);
        gsl_matrix_memcpy(P0s, cur->P0);
    }
    lse_status st = mstep_impl(cur, c->y, c->observed, c->seq, qc, opts->reg,
                               c->pr, &c->w, fn, err);
    if (opts->fix_initial) {
        gsl_vector_memcpy(cur->m0, m0s);
        gsl_matrix_memcpy(cur->P0, P0s);
    }
    if (st == LSE_OK)
        st = ws_modes(&c->w, cur, 1, fn, err);
    if (st == LSE_OK) {
        lse_lsw_scores(&c->w);
        st = ws_obs(&c->w, cur, c->y, c->observed, qc, c->pr, fn, err);
    }
    if (st == LSE_OK)
        st = elbo_ws(&c->w, cur, c->y, c->observed, c->seq, qc, c->pr, e3, fn, err);
    /* the ridge (reg added to Q_k, r, P0) moves the M-step off the ELBO's
     * maximum: a decrease up to reg T (N + D) nats is the ridge's, not an
     * error */
    if (st == LSE_OK && dropped(e2, *e3) &&
        e2 - *e3 > opts->reg * (double)qc->T * (double)(cur->N + cur->D))
        st = lse_error_set(err, LSE_EINCREASE, fn,
                           "ELBO decreased in the M-step of iteration "
                           "%zu (%.17g -> %.17g)",
                           it, e2, *e3);
    return st;
}

/* One run of lse_lslds_fit from cur (initialized): q(x) from uniform
 * weights, then EM until the ELBO gains <= tol per row. */
static lse_status fit_run(fitctx *c, lse_lslds_params *cur, lse_lslds_post *qc,
                          const lse_lslds_opts *opts, gsl_vector *m0s,
                          gsl_matrix *P0s, double *e_out, size_t *it_out,
                          lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    qc->have_z = 0;
    qc->have_x = 0;
    lse_status st = ws_modes(&c->w, cur, 1, fn, err);
    if (st == LSE_OK)
        st = ws_obs(&c->w, cur, c->y, c->observed, qc, c->pr, fn, err);
    if (st == LSE_OK)
        st = fit_qx(c, cur, qc, fn, err);
    double prev = -INFINITY, e1 = 0, e2 = 0, e3 = -INFINITY;
    size_t it = 0;
    for (it = 1; st == LSE_OK && it <= opts->max_iter; it++) {
        st = fit_estep(c, cur, qc, it, prev, &e1, &e2, err);
        if (st == LSE_OK)
            st = fit_mstep(c, cur, qc, opts, m0s, P0s, it, e2, &e3, err);
        if (st != LSE_OK)
            break;
        const double gain = e3 - prev;
        prev = e3;
        if (gain <= opts->tol * (double)qc->T)
            break;
    }
    if (it > opts->max_iter)
        it = opts->max_iter;
    if (st == LSE_OK && opts->max_iter == 0) /* the start, after one E-step */
        st = fit_estep(c, cur, qc, 0, prev, &e1, &e3, err);
    *e_out = e3;
    *it_out = it;
    return st;
}

lse_status lse_lslds_fit(lse_lslds_params *p, const gsl_matrix *y,
                         const unsigned char *observed, const size_t *seq,
                         const lse_lslds_opts *o, lse_lslds_post *q,
                         double *elbo, size_t *n_iter, lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    if (p == NULL || y == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params and y are required");
    const lse_lslds_opts opts = o ? *o : lse_lslds_opts_default();
    const size_t runs = opts.init_given || opts.n_init == 0 ? 1 : opts.n_init;
    lse_lslds_params *cur = NULL, *best = NULL;
    lse_lslds_post *qc = NULL, *qb = NULL;
    par prv;
    fitctx c = {y, observed, seq, NULL, {0}, NULL};
    int have_w = 0;
    gsl_vector *m0s = NULL; /* fix_initial: m0, P0 kept across M-steps */
    gsl_matrix *P0s = NULL;
    size_t *gseq = NULL;
    double *obs = NULL;
    lse_status st = LSE_OK;
    if (y->size2 != p->N)
        return lse_error_set(err, LSE_EDIM, fn, "y has %zu columns, want %zu",
                             y->size2, p->N);
    if ((st = check_y(y, observed, fn, err)) != LSE_OK)
        return st;
    if (opts.reduce != NULL) {
        c.pr = &prv;
        st = par_setup(c.pr, &opts, y, seq, p->D, &gseq, &obs, err);
        if (st != LSE_OK)
            goto done;
        c.seq = seq = gseq;
    }
    const size_t T = c.pr ? c.pr->comm.n_total : y->size1;
    st = params_new_like(p, &cur, err);
    if (st == LSE_OK)
        st = params_new_like(p, &best, err);
    if (st == LSE_OK && p->per_mode_emission &&
        (c.es = gsl_matrix_alloc(T, p->K)) == NULL)
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK && ((m0s = gsl_vector_alloc(p->D)) == NULL ||
                         (P0s = gsl_matrix_alloc(p->D, p->D)) == NULL))
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK)
        st = lse_lslds_post_new(T, p->K, p->D, &qc, err);
    if (st == LSE_OK)
        st = lse_lslds_post_new(T, p->K, p->D, &qb, err);
    if (st == LSE_OK)
        st = post_lags(p, seq, qc, fn, err);
    if (st == LSE_OK)
        st = post_lags(p, seq, qb, fn, err);
    if (st == LSE_OK && (st = ws_alloc(&c.w, T, p, fn, err)) == LSE_OK)
        have_w = 1;
    if (st != LSE_OK)
        goto done;
    double best_elbo = -INFINITY;
    size_t best_iter = 0;
    for (size_t run = 0; run < runs; run++) {
        params_copy(cur, p);
        if (!opts.init_given) {
            st = init_impl(cur, y, observed, seq, c.pr, opts.seed + run, fn,
                           err);
            if (st != LSE_OK)
                goto done;
        }
        double e3;
        size_t it;
        st = fit_run(&c, cur, qc, &opts, m0s, P0s, &e3, &it, err);
        if (st != LSE_OK)
            goto done;
        if (e3 > best_elbo) {
            best_elbo = e3;
            best_iter = it;
            params_copy(best, cur);
            post_copy(qb, qc);
        }
    }
    params_copy(p, best);
    if (q != NULL) {
        if (q->T != T || q->K != p->K || q->D != p->D) {
            st = lse_error_set(err, LSE_EDIM, fn, "q has the wrong shape");
            goto done;
        }
        if ((st = post_lags(p, seq, q, fn, err)) != LSE_OK)
            goto done;
        post_copy(q, qb);
    }
    if (elbo)
        *elbo = best_elbo;
    if (n_iter)
        *n_iter = best_iter;
done:
    lse_lslds_params_free(cur);
    lse_lslds_params_free(best);
    lse_lslds_post_free(qc);
    lse_lslds_post_free(qb);
    if (c.pr != NULL)
        lse_comm_free(&c.pr->comm);
    if (have_w)
        lse_lsw_free(&c.w);
    free(gseq);
    free(obs);
    gsl_matrix_free(c.es);
    gsl_vector_free(m0s);
    gsl_matrix_free(P0s);
    return st;
}
static lse_status lslds_simulate_body(const lse_lslds_params *p,
                                      unsigned long seed, gsl_matrix *y,
                                      gsl_matrix *x, size_t *z, lse_error *err)
{
    static const char fn[] = "lse_lslds_simulate";
    if (p == NULL || y == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params and y are required");
    const size_t T = y->size1, D = p->D, N = p->N, K = p->K;
    if (y->size2 != N || (x != NULL && (x->size1 != T || x->size2 != D)))
        return lse_error_set(err, LSE_EDIM, fn, "y or x has the wrong shape");
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    const size_t P = p->lags * D; /* xp: x_{t-1}, ..., x_{t-L} */
    gsl_matrix *L = gsl_matrix_alloc(D, D), *L0 = gsl_matrix_alloc(D, D);
    gsl_vector *xp = gsl_vector_alloc(P), *xt = gsl_vector_alloc(D);
    gsl_vector *u = gsl_vector_alloc(D);
    lse_status st = LSE_OK;
    if (!r || !L || !L0 || !xp || !xt || !u) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    gsl_rng_set(r, seed);
    gsl_matrix_memcpy(L0, p->P0);
    if (gsl_linalg_cholesky_decomp1(L0) != GSL_SUCCESS) {
        st = lse_error_set(err, LSE_ENUMERIC, fn, "P0 is not positive definite");
        goto done;
    }
    size_t k = 0;
    for (size_t t = 0; t < T; t++) {
        const double uu = gsl_rng_uniform(r);
        double acc = 0.0;
        size_t nk = K - 1;
        for (size_t j = 0; j < K; j++) {
            acc += (t > 0 && p->markov) ? gsl_matrix_get(p->trans, k, j)
                                        : gsl_vector_get(p->init, j);
            if (uu < acc) {
                nk = j;
                break;
            }
        }
        k = nk;
        for (size_t i = 0; i < D; i++)
            gsl_vector_set(u, i, gsl_ran_gaussian(r, 1.0));
        if (t < p->lags) {
            gsl_vector_memcpy(xt, p->m0);
            gsl_blas_dtrmv(CblasLower, CblasNoTrans, CblasNonUnit, L0, u);
            gsl_vector_add(xt, u);
        } else {
            gsl_matrix_const_view Ak =
                gsl_matrix_const_view_array(p->A->data + k * p->A->tda, D, P);
            gsl_matrix_const_view Qk =
                gsl_matrix_const_view_array(p->Q->data + k * p->Q->tda, D, D);
            gsl_matrix_memcpy(L, &Qk.matrix);
            if (gsl_linalg_cholesky_decomp1(L) != GSL_SUCCESS) {
                st = lse_error_set(err, LSE_ENUMERIC, fn,
                                   "Q_%zu is not positive definite", k);
                goto done;
            }
            gsl_vector_const_view bk = gsl_matrix_const_row(p->b, k);
            gsl_vector_memcpy(xt, &bk.vector);
            gsl_blas_dgemv(CblasNoTrans, 1.0, &Ak.matrix, xp, 1.0, xt);
            gsl_blas_dtrmv(CblasLower, CblasNoTrans, CblasNonUnit, L, u);
            gsl_vector_add(xt, u);
        }
        for (size_t i = 0; i < N; i++) {
            const size_t ik = (p->per_mode_emission ? k * N : 0) + i;
            double v = gsl_vector_get(p->d, ik) +
                       gsl_ran_gaussian(r, sqrt(gsl_vector_get(p->r, ik)));
            for (size_t j = 0; j < D; j++)
                v += gsl_matrix_get(p->C, ik, j) * gsl_vector_get(xt, j);
            gsl_matrix_set(y, t, i, v);
        }
        if (x != NULL) {
            gsl_vector_view xr = gsl_matrix_row(x, t);
            gsl_vector_memcpy(&xr.vector, xt);
        }
        if (z != NULL)
            z[t] = k;
        memmove(xp->data + D, xp->data, (P - D) * sizeof(double));
        memcpy(xp->data, xt->data, D * sizeof(double));
    }
done:
    gsl_rng_free(r);
    gsl_matrix_free(L);
    gsl_matrix_free(L0);
    gsl_vector_free(xp);
    gsl_vector_free(xt);
    gsl_vector_free(u);
    return st;
}

/* OpenBLAS held serial, as lse_slds_simulate */
lse_status lse_lslds_simulate(const lse_lslds_params *p, unsigned long seed,
                              gsl_matrix *y, gsl_matrix *x, size_t *z,
                              lse_error *err)
{
    const int held = lse_blas_serial_enter();
    const lse_status st = lslds_simulate_body(p, seed, y, x, z, err);
    lse_blas_serial_leave(held);
    return st;
}

/* The path z's dynamics, row t from mode z[t]: A, Q (D*D) and b (D). */
static void path_dynamics(const lse_lslds_params *p, const size_t *z,
                          gsl_matrix *A, gsl_matrix *Qm, gsl_matrix *B)
{
    const size_t T = A->size1, D = p->D, DD = D * D;
    for (size_t t = 0; t < T; t++) {
        memcpy(A->data + t * A->tda, p->A->data + z[t] * p->A->tda,
               DD * sizeof(double));
        memcpy(Qm->data + t * Qm->tda, p->Q->data + z[t] * p->Q->tda,
               DD * sizeof(double));
        memcpy(B->data + t * B->tda, p->b->data + z[t] * p->b->tda,
               D * sizeof(double));
    }
}

/* obs_potentials' packed rows (J then h, T of them, then the constant)
 * into Jo (T x D*D) and ho (T x D); returns the constant. */
static double unpack_potentials(const double *obs, gsl_matrix *Jo,
                                gsl_matrix *ho)
{
    const size_t T = Jo->size1, D = ho->size2, DD = D * D;
    for (size_t t = 0; t < T; t++) {
        memcpy(Jo->data + t * Jo->tda, obs + t * (DD + D),
               DD * sizeof(double));
        memcpy(ho->data + t * ho->tda, obs + t * (DD + D) + DD,
               D * sizeof(double));
    }
    return obs[T * (DD + D)];
}

/* The proposal q(z) ∝ p(z) exp(sum s): forward filter into alpha (rows
 * normalized), its log Z added to *logz. 0, or the 1-based row where it
 * underflows. */
static size_t proposal_filter(const lse_lslds_params *p, const size_t *seq,
                              const gsl_matrix *s, gsl_matrix *alpha,
                              double *logz)
{
    const size_t T = s->size1, K = p->K;
    for (size_t t = 0; t < T; t++) {
        double mx = -INFINITY, tot = 0.0;
        for (size_t k = 0; k < K; k++)
            mx = fmax(mx, gsl_matrix_get(s, t, k));
        for (size_t k = 0; k < K; k++) {
            double a = 0.0;
            if (!p->markov || is_start(seq, t))
                a = gsl_vector_get(p->init, k);
            else
                for (size_t j = 0; j < K; j++)
                    a += gsl_matrix_get(alpha, t - 1, j) *
                         gsl_matrix_get(p->trans, j, k);
            a *= exp(gsl_matrix_get(s, t, k) - mx);
            gsl_matrix_set(alpha, t, k, a);
            tot += a;
        }
        if (!(tot > 0.0))
            return t + 1;
        *logz += log(tot) + mx;
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(alpha, t, k, gsl_matrix_get(alpha, t, k) / tot);
    }
    return 0;
}

/* A path z of the defensive mixture: with probability LSE_LSLDS_IS_PRIOR
 * one from the prior p(z), else one from q(z) by backward sampling
 * z_t ~ alpha_t(j) trans(j, z_{t+1}). Returns its sum of scores s. */
static double sample_path(const lse_lslds_params *p, const size_t *seq,
                          const gsl_matrix *s, const gsl_matrix *alpha,
                          gsl_rng *rng, size_t *z)
{
    const size_t T = s->size1, K = p->K;
    const int from_prior = gsl_rng_uniform(rng) < LSE_LSLDS_IS_PRIOR;
    double ssum = 0.0;
    if (from_prior) {
        for (size_t t = 0; t < T; t++) {
            const int st0 = !p->markov || is_start(seq, t);
            double u = gsl_rng_uniform(rng), acc = 0.0;
            size_t pick = K - 1;
            for (size_t j = 0; j < K; j++) {
                acc += st0 ? gsl_vector_get(p->init, j)
                           : gsl_matrix_get(p->trans, z[t - 1], j);
                if (u < acc) {
                    pick = j;
                    break;
                }
            }
            z[t] = pick;
            ssum += gsl_matrix_get(s, t, pick);
        }
    }
    for (size_t t = T; !from_prior && t-- > 0;) {
        const int last = t + 1 == T || is_start(seq, t + 1);
        double tot = 0.0;
        for (size_t j = 0; j < K; j++)
            tot += gsl_matrix_get(alpha, t, j) *
                   (last || !p->markov ? 1.0
                                       : gsl_matrix_get(p->trans, j, z[t + 1]));
        double u = gsl_rng_uniform(rng) * tot, acc = 0.0;
        size_t pick = K - 1;
        for (size_t j = 0; j < K; j++) {
            acc += gsl_matrix_get(alpha, t, j) *
                   (last || !p->markov
                        ? 1.0
                        : gsl_matrix_get(p->trans, j, z[t + 1]));
            if (u < acc) {
                pick = j;
                break;
            }
        }
        z[t] = pick;
        ssum += gsl_matrix_get(s, t, pick);
    }
    return ssum;
}

/* log of the mean of exp(lw[0..n)), and the delta-method standard error
 * of it when se is not NULL. */
static void is_mean(const double *lw, size_t n_samples, double *estimate,
                    double *se)
{
    double mx = -INFINITY;
    for (size_t n = 0; n < n_samples; n++)
        mx = fmax(mx, lw[n]);
    double m1 = 0.0, m2 = 0.0;
    for (size_t n = 0; n < n_samples; n++) {
        const double w = exp(lw[n] - mx);
        m1 += w;
        m2 += w * w;
    }
    m1 /= (double)n_samples;
    m2 /= (double)n_samples;
    *estimate = mx + log(m1);
    if (se != NULL) {
        const double var = fmax(m2 - m1 * m1, 0.0) * (double)n_samples /
                           (double)(n_samples - 1);
        *se = sqrt(var / (double)n_samples) / m1;
    }
}

/* The log importance weight of a path: log p(z) + log p(y | z) - log m(z)
 * with the proposal m(z) = (1 - e) q(z) + e p(z) = p(z) [(1 - e) exp(sum s
 * - log Z) + e]; ll = log p(y | z), ssum its sum of scores. */
static double log_weight(double ll, double ssum, double logz)
{
    const double lr = ssum - logz, e = LSE_LSLDS_IS_PRIOR;
    const double lmix = lr > 0.0 ? lr + log((1.0 - e) + e * exp(-lr))
                                 : log((1.0 - e) * exp(lr) + e);
    return ll - lmix;
}

/* L > 1: the log weights lw of n paths, p(y | z) the log normalizer of
 * the banded smoother's potentials for the path (models/lslds_lags.c),
 * and their estimate of log p(y). */
static lse_status lags_weights(const lse_lslds_params *p, const gsl_matrix *y,
                               const unsigned char *observed,
                               const size_t *seq, const lse_lslds_post *q,
                               const gsl_matrix *s, const gsl_matrix *alpha,
                               double logz, gsl_rng *rng, size_t *z,
                               size_t n_samples, double *lw, double *estimate,
                               double *se, const char *fn, lse_error *err)
{
    lsw w;
    lse_status st = ws_alloc(&w, q->T, p, fn, err);
    if (st != LSE_OK)
        return st;
    st = ws_modes(&w, p, 1, fn, err);
    if (st == LSE_OK && !p->per_mode_emission)
        obs_potentials(p, y, observed, q, NULL, NULL, w.obs);
    for (size_t n = 0; st == LSE_OK && n < n_samples; n++) {
        const double ssum = sample_path(p, seq, s, alpha, rng, z);
        if (p->per_mode_emission)
            obs_potentials(p, y, observed, q, NULL, z, w.obs);
        double ll;
        const size_t bad = lse_lsw_logz_path(&w, seq, z, &ll);
        if (bad != 0)
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "precision of row %zu is not positive "
                               "definite",
                               bad);
        else
            lw[n] = log_weight(ll, ssum, logz);
    }
    if (st == LSE_OK)
        is_mean(lw, n_samples, estimate, se);
    lse_lsw_free(&w);
    return st;
}

lse_status lse_lslds_log_marginal(const lse_lslds_params *p,
                                  const gsl_matrix *y,
                                  const unsigned char *observed,
                                  const size_t *seq, const lse_lslds_post *q,
                                  size_t n_samples, unsigned long seed,
                                  double *estimate, double *se,
                                  lse_error *err)
{
    static const char fn[] = "lse_lslds_log_marginal";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK)
        return st;
    if (estimate == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "estimate is NULL");
    if (!q->have_x || q->lags != p->lags)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(x) has not been computed (lse_lslds_update_x)");
    if (n_samples < 2)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "n_samples = %zu, need at least 2", n_samples);
    const size_t T = q->T, K = p->K, D = p->D, DD = D * D, N = p->N;
    gsl_matrix *s = gsl_matrix_alloc(T, K), *alpha = gsl_matrix_alloc(T, K);
    gsl_matrix *A = gsl_matrix_alloc(T, DD), *B = gsl_matrix_alloc(T, D);
    gsl_matrix *Qm = gsl_matrix_alloc(T, DD), *R = gsl_matrix_calloc(N, N);
    double *lw = malloc(n_samples * sizeof(double));
    size_t *z = malloc(T * sizeof(size_t));
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    /* per-mode emissions: the emission scores join the proposal, and
     * p(y | z) is the Kalman integral of the path's observation
     * potentials (no observed entry seen directly) */
    const int pm = p->per_mode_emission;
    gsl_matrix *es = pm ? gsl_matrix_alloc(T, K) : NULL;
    gsl_matrix *Jo = pm ? gsl_matrix_alloc(T, DD) : NULL;
    gsl_matrix *ho = pm ? gsl_matrix_alloc(T, D) : NULL;
    gsl_matrix *ydum = pm ? gsl_matrix_calloc(T, 1) : NULL;
    gsl_matrix *Cdum = pm ? gsl_matrix_calloc(1, D) : NULL;
    gsl_matrix *R1 = pm ? gsl_matrix_alloc(1, 1) : NULL;
    unsigned char *nomask = pm ? calloc(T, 1) : NULL;
    double *obs = pm && T <= (SIZE_MAX / sizeof(double) - 1) / (DD + D)
                      ? malloc((T * (DD + D) + 1) * sizeof(double))
                      : NULL;
    if (!s || !alpha || !A || !B || !Qm || !R || !lw || !z || !rng ||
        (pm && (!es || !Jo || !ho || !ydum || !Cdum || !R1 || !nomask || !obs))) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    gsl_rng_set(rng, seed);
    int rc = scores(p, seq, q, s);
    if (rc != 0) {
        st = lse_error_set(err, rc == -2 ? LSE_ENOMEM : LSE_ENUMERIC, fn,
                           "a Q_k is not positive definite");
        goto done;
    }
    if (pm) {
        st = emis_scores(p, y, observed, q, NULL, es, fn, err);
        if (st != LSE_OK)
            goto done;
        gsl_matrix_add(s, es);
    }
    for (size_t i = 0; i < N; i++)
        gsl_matrix_set(R, i, i, gsl_vector_get(p->r, i));
    if (pm)
        gsl_matrix_set(R1, 0, 0, 1.0);
    /* proposal q(z) ∝ p(z) exp(sum s): forward filter, log Z */
    double logz = 0.0;
    const size_t bad = proposal_filter(p, seq, s, alpha, &logz);
    if (bad != 0) {
        st = lse_error_set(err, LSE_ENUMERIC, fn,
                           "proposal underflows at row %zu", bad);
        goto done;
    }
    if (p->lags > 1) {
        st = lags_weights(p, y, observed, seq, q, s, alpha, logz, rng, z,
                          n_samples, lw, estimate, se, fn, err);
        goto done;
    }
    lse_kalman_model km = {A,     B,           Qm,    pm ? Cdum : p->C,
                           pm ? NULL : p->d,   pm ? R1 : R, p->m0,
                           p->P0, pm ? Jo : NULL, pm ? ho : NULL};
    const gsl_matrix *ky = pm ? ydum : y;
    const unsigned char *kobs = pm ? nomask : observed;

    for (size_t n = 0; n < n_samples; n++) {
        const double ssum = sample_path(p, seq, s, alpha, rng, z);
        path_dynamics(p, z, A, Qm, B);
        double ll, lc = 0.0;
        if (pm) {
            obs_potentials(p, y, observed, q, NULL, z, obs);
            lc = unpack_potentials(obs, Jo, ho);
        }
        lse_error kerr;
        st = lse_kalman_smooth(&km, ky, kobs, seq, &ll, NULL, &kerr);
        ll += lc;
        if (st != LSE_OK) {
            lse_error_set(err, st, fn, "%s", kerr.message);
            goto done;
        }
        lw[n] = log_weight(ll, ssum, logz);
    }
    is_mean(lw, n_samples, estimate, se);
done:
    gsl_matrix_free(s);
    gsl_matrix_free(alpha);
    gsl_matrix_free(A);
    gsl_matrix_free(B);
    gsl_matrix_free(Qm);
    gsl_matrix_free(R);
    free(lw);
    free(z);
    gsl_rng_free(rng);
    gsl_matrix_free(es);
    gsl_matrix_free(Jo);
    gsl_matrix_free(ho);
    gsl_matrix_free(ydum);
    gsl_matrix_free(Cdum);
    gsl_matrix_free(R1);
    free(nomask);
    free(obs);
    return st;
}
