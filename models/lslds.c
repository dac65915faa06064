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

/* inverse and log-determinant of an SPD matrix; 0 on success */
static int spd_inv(const gsl_matrix *a, gsl_matrix *inv, double *logdet,
                   gsl_matrix *work)
{
    gsl_matrix_memcpy(work, a);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_linalg_cholesky_decomp1(work);
    if (st == GSL_SUCCESS) {
        double ld = 0.0;
        for (size_t i = 0; i < a->size1; i++)
            ld += 2.0 * log(gsl_matrix_get(work, i, i));
        if (logdet)
            *logdet = ld;
        if (inv) {
            gsl_matrix_memcpy(inv, work);
            st = gsl_linalg_cholesky_invert(inv);
        }
        if (!isfinite(ld))
            st = GSL_EDOM;
    }
    gsl_set_error_handler(old);
    return st == GSL_SUCCESS ? 0 : -1;
}

static double trace_prod(const gsl_matrix *a, const gsl_matrix *b)
{
    double s = 0.0; /* tr(a b) for symmetric b */
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            s += gsl_matrix_get(a, i, j) * gsl_matrix_get(b, j, i);
    return s;
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

/* Per-mode inverses and log-determinants of Q_k. */
static int mode_inverses(const lse_lslds_params *p, gsl_matrix *Qi, double *ld,
                         gsl_matrix *work)
{
    const size_t D = p->D, DD = D * D;
    for (size_t k = 0; k < p->K; k++) {
        gsl_matrix_const_view Qk =
            gsl_matrix_const_view_array(p->Q->data + k * p->Q->tda, D, D);
        gsl_matrix_view Qik = gsl_matrix_view_array(Qi->data + k * DD, D, D);
        if (spd_inv(&Qk.matrix, &Qik.matrix, &ld[k], work) != 0)
            return -1;
    }
    return 0;
}

/* Scratch of mix_modes: the q(z_t)-weighted sums over the modes of the
 * precisions Lam = sum w Qi_k, SA = sum w Qi_k A_k, SAA = sum w A_k' Qi_k
 * A_k, g = sum w Qi_k b_k, sAb = sum w A_k' Qi_k b_k; tmp and tv are
 * scratch. */
typedef struct xmix {
    gsl_matrix *Lam, *SA, *SAA, *tmp;
    gsl_vector *g, *sAb, *tv;
} xmix;

/* Row t's mode mixture of the transition potentials (weights q(z_t), or
 * uniform before q(z) exists) into x, with sum w b' Qi b and sum w log
 * det Qi_k (ld) in *sbQb and *sld. */
static void mix_modes(const lse_lslds_params *p, const lse_lslds_post *q,
                      size_t t, const gsl_matrix *Qi, const double *ld,
                      xmix *x, double *sbQb, double *sld)
{
    const size_t K = p->K, D = p->D, DD = D * D;
    *sbQb = 0.0;
    *sld = 0.0;
    gsl_matrix_set_zero(x->Lam);
    gsl_matrix_set_zero(x->SA);
    gsl_matrix_set_zero(x->SAA);
    gsl_vector_set_zero(x->g);
    gsl_vector_set_zero(x->sAb);
    for (size_t k = 0; k < K; k++) {
        const double w =
            q->have_z ? gsl_matrix_get(q->w, t, k) : 1.0 / (double)K;
        if (w == 0.0)
            continue;
        gsl_matrix_const_view Qik =
            gsl_matrix_const_view_array(Qi->data + k * DD, D, D);
        gsl_matrix_const_view Ak =
            gsl_matrix_const_view_array(p->A->data + k * p->A->tda, D, D);
        gsl_vector_const_view bk = gsl_matrix_const_row(p->b, k);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &Qik.matrix,
                       &Ak.matrix, 0.0, x->tmp); /* Qi A */
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++) {
                gsl_matrix_set(x->Lam, i, j,
                               gsl_matrix_get(x->Lam, i, j) +
                                   w * gsl_matrix_get(&Qik.matrix, i, j));
                gsl_matrix_set(x->SA, i, j,
                               gsl_matrix_get(x->SA, i, j) +
                                   w * gsl_matrix_get(x->tmp, i, j));
            }
        gsl_blas_dgemm(CblasTrans, CblasNoTrans, w, &Ak.matrix, x->tmp, 1.0,
                       x->SAA); /* A'QiA */
        gsl_blas_dgemv(CblasNoTrans, 1.0, &Qik.matrix, &bk.vector, 0.0,
                       x->tv); /* Qi b */
        gsl_blas_daxpy(w, x->tv, x->g);
        gsl_blas_dgemv(CblasTrans, w, &Ak.matrix, x->tv, 1.0, x->sAb);
        double bqb;
        gsl_blas_ddot(&bk.vector, x->tv, &bqb);
        *sbQb += w * bqb;
        *sld += w * ld[k];
    }
}

/* The residual potential on x_{t-1} of the mixed transition (Ae = Qe SA,
 * be = Qe g): J += SAA - SA' Qe SA (symmetrized), h += -(sAb - SA' be);
 * x->SAA is overwritten, tv2 is scratch. */
static void residual_potential(xmix *x, const gsl_matrix *Ae,
                               const gsl_vector *be, gsl_matrix *J,
                               gsl_vector *h, gsl_vector *tv2)
{
    const size_t D = J->size1;
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, -1.0, x->SA, Ae, 1.0, x->SAA);
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(J, i, j,
                           gsl_matrix_get(J, i, j) +
                               0.5 * (gsl_matrix_get(x->SAA, i, j) +
                                      gsl_matrix_get(x->SAA, j, i)));
    gsl_blas_dgemv(CblasTrans, 1.0, x->SA, be, 0.0, tv2);
    gsl_vector_sub(h, x->sAb);
    gsl_vector_add(h, tv2);
}

/* Adds the observation potentials obs (layout of update_x_impl) to J (T x
 * D*D) and h (T x D); returns their constant. */
static double add_potentials(const double *obs, gsl_matrix *J, gsl_matrix *h)
{
    const size_t T = J->size1, D = h->size2, DD = D * D;
    for (size_t t = 0; t < T; t++) {
        const double *o = obs + t * (DD + D);
        for (size_t i = 0; i < DD; i++)
            J->data[t * J->tda + i] += o[i];
        for (size_t i = 0; i < D; i++)
            h->data[t * h->tda + i] += o[DD + i];
    }
    return obs[T * (DD + D)];
}

/* The q(x) update. With @p obs (several processes) y is not read: the
 * observations enter as the potentials obs[t*(DD+D) ..] (J_t then h_t) of
 * every global row, with the constant obs[T*(DD+D)], and the Kalman
 * smoother sees no observed entry. */
static lse_status update_x_impl(const lse_lslds_params *p, const gsl_matrix *y,
                                const unsigned char *observed,
                                const size_t *seq, lse_lslds_post *q,
                                double *logzx, const double *obs,
                                const char *fn, lse_error *err)
{
    lse_status st = LSE_OK;
    const size_t T = q->T, K = p->K, D = p->D, DD = D * D;
    const size_t N = obs ? 1 : p->N;
    gsl_matrix *ydum = NULL, *Cdum = NULL;
    unsigned char *nomask = NULL;
    if (obs != NULL) {
        ydum = gsl_matrix_calloc(T, 1);
        Cdum = gsl_matrix_calloc(1, D);
        nomask = calloc(T, 1);
        if (!ydum || !Cdum || !nomask) {
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
            gsl_matrix_free(ydum);
            gsl_matrix_free(Cdum);
            free(nomask);
            return st;
        }
    }
    gsl_matrix *Ae = gsl_matrix_calloc(T, DD), *be = gsl_matrix_calloc(T, D);
    gsl_matrix *Qe = gsl_matrix_calloc(T, DD), *J = gsl_matrix_calloc(T, DD);
    gsl_matrix *h = gsl_matrix_calloc(T, D), *R = gsl_matrix_calloc(N, N);
    gsl_matrix *Qi = gsl_matrix_alloc(K, DD), *work = gsl_matrix_alloc(D, D);
    gsl_matrix *Lam = gsl_matrix_alloc(D, D), *QeT = gsl_matrix_alloc(D, D);
    gsl_matrix *SA = gsl_matrix_alloc(D, D), *SAA = gsl_matrix_alloc(D, D);
    gsl_matrix *tmp = gsl_matrix_alloc(D, D);
    gsl_vector *g = gsl_vector_alloc(D), *sAb = gsl_vector_alloc(D);
    gsl_vector *tv = gsl_vector_alloc(D), *tv2 = gsl_vector_alloc(D);
    double *ld = malloc(K * sizeof(double));
    if (!Ae || !be || !Qe || !J || !h || !R || !Qi || !work || !Lam || !QeT ||
        !SA || !SAA || !tmp || !g || !sAb || !tv || !tv2 || !ld) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    if (mode_inverses(p, Qi, ld, work) != 0) {
        st = lse_error_set(err, LSE_ENUMERIC, fn,
                           "a Q_k is not positive definite");
        goto done;
    }
    xmix mx = {Lam, SA, SAA, tmp, g, sAb, tv};
    double csum = 0.0;
    for (size_t t = 0; t < T; t++) {
        if (is_start(seq, t))
            continue;
        double sbQb, sld;
        mix_modes(p, q, t, Qi, ld, &mx, &sbQb, &sld);
        double ldLam;
        if (spd_inv(Lam, QeT, &ldLam, work) != 0) {
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "weighted precision of row %zu is singular",
                               t + 1);
            goto done;
        }
        gsl_matrix_view Qet = gsl_matrix_view_array(Qe->data + t * DD, D, D);
        gsl_matrix_memcpy(&Qet.matrix, QeT);
        gsl_matrix_view Aet = gsl_matrix_view_array(Ae->data + t * DD, D, D);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, QeT, SA, 0.0,
                       &Aet.matrix);
        gsl_vector_view bet = gsl_matrix_row(be, t);
        gsl_blas_dgemv(CblasNoTrans, 1.0, QeT, g, 0.0, &bet.vector);
        /* residual potential on x_{t-1}: J += SAA - SA' Qe SA,
         * h += -(sAb - SA' Qe g) */
        gsl_matrix_view Jt = gsl_matrix_view_array(J->data + (t - 1) * DD, D, D);
        gsl_vector_view ht = gsl_matrix_row(h, t - 1);
        residual_potential(&mx, &Aet.matrix, &bet.vector, &Jt.matrix,
                           &ht.vector, tv2);
        double gQg;
        gsl_blas_ddot(g, &bet.vector, &gQg);
        csum += -0.5 * sbQb + 0.5 * gQg - 0.5 * sld - 0.5 * ldLam;
    }
    for (size_t i = 0; i < N; i++)
        gsl_matrix_set(R, i, i, obs ? 1.0 : gsl_vector_get(p->r, i));
    if (obs != NULL)
        csum += add_potentials(obs, J, h);
    lse_kalman_model km = {Ae, be, Qe, obs ? Cdum : p->C, obs ? NULL : p->d,
                           R, p->m0, p->P0, J, h};
    lse_kalman_result kr = {NULL, NULL, q->mean, q->cov, q->cross};
    double ll;
    lse_error kerr;
    st = lse_kalman_smooth(&km, obs ? ydum : y, obs ? nomask : observed, seq,
                           &ll, &kr, &kerr);
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "%s", kerr.message);
        goto done;
    }
    q->have_x = 1;
    if (logzx)
        *logzx = ll + csum;
done:
    gsl_matrix_free(Ae);
    gsl_matrix_free(be);
    gsl_matrix_free(Qe);
    gsl_matrix_free(J);
    gsl_matrix_free(h);
    gsl_matrix_free(R);
    gsl_matrix_free(Qi);
    gsl_matrix_free(work);
    gsl_matrix_free(Lam);
    gsl_matrix_free(QeT);
    gsl_matrix_free(SA);
    gsl_matrix_free(SAA);
    gsl_matrix_free(tmp);
    gsl_vector_free(g);
    gsl_vector_free(sAb);
    gsl_vector_free(tv);
    gsl_vector_free(tv2);
    free(ld);
    gsl_matrix_free(ydum);
    gsl_matrix_free(Cdum);
    free(nomask);
    return st;
}

/* The observation potentials (layout of update_x_impl) of the y rows
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

lse_status lse_lslds_update_x(const lse_lslds_params *p, const gsl_matrix *y,
                              const unsigned char *observed, const size_t *seq,
                              lse_lslds_post *q, double *logzx, lse_error *err)
{
    static const char fn[] = "lse_lslds_update_x";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK || !p->per_mode_emission)
        return st != LSE_OK
                   ? st
                   : update_x_impl(p, y, observed, seq, q, logzx, NULL, fn, err);
    /* per-mode emissions: the mode-weighted observations as potentials */
    const size_t W = p->D * p->D + p->D;
    if (q->T > (SIZE_MAX / sizeof(double) - 1) / W)
        return lse_error_set(err, LSE_EINVAL, fn, "T = %zu is too large", q->T);
    double *obs = malloc((q->T * W + 1) * sizeof(double));
    if (obs == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    obs_potentials(p, y, observed, q, NULL, NULL, obs);
    st = update_x_impl(p, y, observed, seq, q, logzx, obs, fn, err);
    free(obs);
    return st;
}

/* Several processes: the observation potentials of this process's rows,
 * summed over the processes into @p obs (T (DD + D) + 1 doubles), then
 * the q(x) update. */
static lse_status update_x_par(const lse_lslds_params *p, const gsl_matrix *y,
                               const unsigned char *observed, const size_t *seq,
                               lse_lslds_post *q, par *pr, double *obs,
                               lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    const size_t W = p->D * p->D + p->D;
    obs_potentials(p, y, observed, q, pr, NULL, obs);
    lse_status st = lse_comm_sum(&pr->comm, obs, q->T * W + 1, fn, err);
    if (st != LSE_OK)
        return st;
    return update_x_impl(p, y, observed, seq, q, NULL, obs, fn, err);
}

/* Emission scores s (T, K): E_q(x)[log N(x_t; A_k x_{t-1} + b_k, Q_k)],
 * 0 at sequence starts. */
static int scores(const lse_lslds_params *p, const size_t *seq,
                  const lse_lslds_post *q, gsl_matrix *s)
{
    const size_t T = q->T, K = p->K, D = p->D, DD = D * D;
    gsl_matrix *Qi = gsl_matrix_alloc(K, DD), *work = gsl_matrix_alloc(D, D);
    gsl_matrix *E = gsl_matrix_alloc(D, D), *AX = gsl_matrix_alloc(D, D);
    gsl_matrix *AP = gsl_matrix_alloc(D, D);
    gsl_vector *e = gsl_vector_alloc(D);
    double *ld = malloc(K * sizeof(double));
    int rc = -2;
    if (!Qi || !work || !E || !AX || !AP || !e || !ld)
        goto done;
    rc = -1;
    if (mode_inverses(p, Qi, ld, work) != 0)
        goto done;
    rc = 0;
    gsl_matrix_set_zero(s);
    for (size_t t = 0; t < T; t++) {
        if (is_start(seq, t))
            continue;
        gsl_matrix_const_view Pt =
            gsl_matrix_const_view_array(q->cov->data + t * q->cov->tda, D, D);
        gsl_matrix_const_view Pp = gsl_matrix_const_view_array(
            q->cov->data + (t - 1) * q->cov->tda, D, D);
        gsl_matrix_const_view X =
            gsl_matrix_const_view_array(q->cross->data + t * q->cross->tda, D, D);
        gsl_vector_const_view mt = gsl_matrix_const_row(q->mean, t);
        gsl_vector_const_view mp = gsl_matrix_const_row(q->mean, t - 1);
        for (size_t k = 0; k < K; k++) {
            gsl_matrix_const_view Ak =
                gsl_matrix_const_view_array(p->A->data + k * p->A->tda, D, D);
            gsl_matrix_const_view Qik =
                gsl_matrix_const_view_array(Qi->data + k * DD, D, D);
            /* E = P_t - A X' - X A' + A P_{t-1} A' + e e' */
            gsl_matrix_memcpy(E, &Pt.matrix);
            gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &Ak.matrix,
                           &X.matrix, 0.0, AX);
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++)
                    gsl_matrix_set(E, i, j,
                                   gsl_matrix_get(E, i, j) -
                                       gsl_matrix_get(AX, i, j) -
                                       gsl_matrix_get(AX, j, i));
            gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &Ak.matrix,
                           &Pp.matrix, 0.0, AP);
            gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, AP, &Ak.matrix, 1.0,
                           E);
            gsl_vector_memcpy(e, &mt.vector);
            gsl_blas_dgemv(CblasNoTrans, -1.0, &Ak.matrix, &mp.vector, 1.0, e);
            gsl_vector_const_view bk = gsl_matrix_const_row(p->b, k);
            gsl_vector_sub(e, &bk.vector);
            gsl_blas_dger(1.0, e, e, E);
            gsl_matrix_set(s, t, k,
                           -0.5 * ((double)D * LOG_2PI + ld[k] +
                                   trace_prod(&Qik.matrix, E)));
        }
    }
done:
    gsl_matrix_free(Qi);
    gsl_matrix_free(work);
    gsl_matrix_free(E);
    gsl_matrix_free(AX);
    gsl_matrix_free(AP);
    gsl_vector_free(e);
    free(ld);
    return rc;
}

static double xlogy(double x, double y) { return x > 0.0 ? x * log(y) : 0.0; }

/* Without Markov dependence: q(z_t = k) ∝ init_k exp(s_tk) into q->w;
 * returns the entropy of q(z). */
static double mixture_posterior(const lse_lslds_params *p,
                                const gsl_matrix *s, lse_lslds_post *q)
{
    const size_t T = q->T, K = p->K;
    double hz = 0.0;
    for (size_t t = 0; t < T; t++) {
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++)
            mx = fmax(mx, log(gsl_vector_get(p->init, k)) +
                              gsl_matrix_get(s, t, k));
        double z = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double v = exp(log(gsl_vector_get(p->init, k)) +
                                 gsl_matrix_get(s, t, k) - mx);
            gsl_matrix_set(q->w, t, k, v);
            z += v;
        }
        for (size_t k = 0; k < K; k++) {
            const double v = gsl_matrix_get(q->w, t, k) / z;
            gsl_matrix_set(q->w, t, k, v);
            hz -= xlogy(v, v);
        }
    }
    return hz;
}

/* The scaled backward pass of the mode chain: beta from the scores s,
 * their row maxima M and the forward pass's normalizers c. */
static void backward_pass(const lse_lslds_params *p, const size_t *seq,
                          const gsl_matrix *s, const double *M,
                          const double *c, gsl_matrix *beta)
{
    const size_t T = s->size1, K = p->K;
    for (size_t t = T; t-- > 0;) {
        const int last = t + 1 == T || is_start(seq, t + 1);
        for (size_t j = 0; j < K; j++) {
            double b = 1.0;
            if (!last) {
                b = 0.0;
                for (size_t k = 0; k < K; k++)
                    b += gsl_matrix_get(p->trans, j, k) *
                         exp(gsl_matrix_get(s, t + 1, k) - M[t + 1]) *
                         gsl_matrix_get(beta, t + 1, k);
                b /= c[t + 1];
            }
            gsl_matrix_set(beta, t, j, b);
        }
    }
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

static lse_status update_z_impl(const lse_lslds_params *p, const size_t *seq,
                                const gsl_matrix *es, lse_lslds_post *q,
                                const char *fn, lse_error *err)
{
    if (p == NULL || q == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params and q are required");
    if (q->K != p->K || q->D != p->D)
        return lse_error_set(err, LSE_EDIM, fn, "q and params disagree on K, D");
    if (!q->have_x)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(x) has not been computed (lse_lslds_update_x)");
    const size_t T = q->T, K = p->K;
    gsl_matrix *s = gsl_matrix_alloc(T, K), *alpha = gsl_matrix_alloc(T, K);
    gsl_matrix *beta = gsl_matrix_alloc(T, K);
    double *c = malloc(T * sizeof(double)), *M = malloc(T * sizeof(double));
    lse_status st = LSE_OK;
    if (!s || !alpha || !beta || !c || !M) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    int rc = scores(p, seq, q, s);
    if (rc != 0) {
        st = lse_error_set(err, rc == -2 ? LSE_ENOMEM : LSE_ENUMERIC, fn,
                           rc == -2 ? "out of memory"
                                    : "a Q_k is not positive definite");
        goto done;
    }
    if (es != NULL)
        gsl_matrix_add(s, es);
    double hz = 0.0;
    if (!p->markov) {
        hz = mixture_posterior(p, s, q);
        gsl_matrix_set_zero(q->xi);
    } else {
        double logz = 0.0;
        for (size_t t = 0; t < T; t++) {
            double mx = -INFINITY;
            for (size_t k = 0; k < K; k++)
                mx = fmax(mx, gsl_matrix_get(s, t, k));
            M[t] = mx;
            double z = 0.0;
            for (size_t k = 0; k < K; k++) {
                double a = 0.0;
                if (is_start(seq, t))
                    a = gsl_vector_get(p->init, k);
                else
                    for (size_t j = 0; j < K; j++)
                        a += gsl_matrix_get(alpha, t - 1, j) *
                             gsl_matrix_get(p->trans, j, k);
                a *= exp(gsl_matrix_get(s, t, k) - mx);
                gsl_matrix_set(alpha, t, k, a);
                z += a;
            }
            if (!(z > 0.0) || !isfinite(z)) {
                st = lse_error_set(err, LSE_ENUMERIC, fn,
                                   "forward pass underflows at row %zu", t + 1);
                goto done;
            }
            c[t] = z;
            logz += log(z) + mx;
            for (size_t k = 0; k < K; k++)
                gsl_matrix_set(alpha, t, k, gsl_matrix_get(alpha, t, k) / z);
        }
        backward_pass(p, seq, s, M, c, beta);
        gsl_matrix_set_zero(q->xi);
        double sws = 0.0, ez = 0.0;
        for (size_t t = 0; t < T; t++) {
            for (size_t k = 0; k < K; k++) {
                const double w =
                    gsl_matrix_get(alpha, t, k) * gsl_matrix_get(beta, t, k);
                gsl_matrix_set(q->w, t, k, w);
                sws += w * gsl_matrix_get(s, t, k);
                if (is_start(seq, t))
                    ez += xlogy(w, gsl_vector_get(p->init, k));
            }
            if (is_start(seq, t))
                continue;
            for (size_t j = 0; j < K; j++)
                for (size_t k = 0; k < K; k++) {
                    const double x = gsl_matrix_get(alpha, t - 1, j) *
                                     gsl_matrix_get(p->trans, j, k) *
                                     exp(gsl_matrix_get(s, t, k) - M[t]) *
                                     gsl_matrix_get(beta, t, k) / c[t];
                    gsl_matrix_set(q->xi, j, k, gsl_matrix_get(q->xi, j, k) + x);
                }
        }
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                ez += xlogy(gsl_matrix_get(q->xi, j, k),
                            gsl_matrix_get(p->trans, j, k));
        /* q(z) = p(z) exp(sum s) / Z: H = log Z - E[log p(z)] - E[sum s] */
        hz = logz - ez - sws;
    }
    q->hz = hz;
    q->have_z = 1;
done:
    gsl_matrix_free(s);
    gsl_matrix_free(alpha);
    gsl_matrix_free(beta);
    free(c);
    free(M);
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
    if (!q->have_x)
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

/* *acc += E_q log p(y_t | x_t, z_t) under q(z_t) (per-mode emissions) or
 * with the shared emission. */
static void obs_term(const lse_lslds_params *p, const gsl_matrix *y,
                     const unsigned char *observed, size_t ty,
                     const lse_lslds_post *q, size_t tq, gsl_vector *cp,
                     double *acc)
{
    if (!p->per_mode_emission) {
        obs_term_k(p, y, observed, ty, q, tq, 0, 1.0, cp, acc);
        return;
    }
    for (size_t k = 0; k < p->K; k++) {
        const double w = gsl_matrix_get(q->w, tq, k);
        if (w > 0.0)
            obs_term_k(p, y, observed, ty, q, tq, k, w, cp, acc);
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
                            const lse_lslds_post *q, par *pr, double *elbo,
                            const char *fn, lse_error *err);

lse_status lse_lslds_elbo(const lse_lslds_params *p, const gsl_matrix *y,
                          const unsigned char *observed, const size_t *seq,
                          const lse_lslds_post *q, double *elbo, lse_error *err)
{
    static const char fn[] = "lse_lslds_elbo";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK)
        return st;
    return elbo_impl(p, y, observed, seq, q, NULL, elbo, fn, err);
}

/* With @p pr (several processes) the observation terms of this process's
 * rows, summed over the processes. */
static lse_status elbo_impl(const lse_lslds_params *p, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            const lse_lslds_post *q, par *pr, double *elbo,
                            const char *fn, lse_error *err)
{
    lse_status st = LSE_OK;
    if (elbo == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "elbo is NULL");
    if (!q->have_x || !q->have_z)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(z) and q(x) must both be computed");
    const size_t T = q->T, K = p->K, D = p->D;
    gsl_matrix *s = gsl_matrix_alloc(T, K), *work = gsl_matrix_alloc(D, D);
    gsl_matrix *P0i = gsl_matrix_alloc(D, D), *E = gsl_matrix_alloc(D, D);
    gsl_matrix *Pi = gsl_matrix_alloc(D, D), *cond = gsl_matrix_alloc(D, D);
    gsl_matrix *XP = gsl_matrix_alloc(D, D);
    gsl_vector *e = gsl_vector_alloc(D), *cp = gsl_vector_alloc(D);
    if (!s || !work || !P0i || !E || !Pi || !cond || !XP || !e || !cp) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    int rc = scores(p, seq, q, s);
    double ldP0;
    if (rc != 0 || spd_inv(p->P0, P0i, &ldP0, work) != 0) {
        st = lse_error_set(err, rc == -2 ? LSE_ENOMEM : LSE_ENUMERIC, fn,
                           "Q_k or P0 is not positive definite");
        goto done;
    }
    double total = q->hz;
    for (size_t t = 0; t < T; t++) {
        const int start = is_start(seq, t);
        for (size_t k = 0; k < K; k++) {
            const double w = gsl_matrix_get(q->w, t, k);
            total += w * gsl_matrix_get(s, t, k);
            if (!p->markov || start)
                total += xlogy(w, gsl_vector_get(p->init, k));
        }
        gsl_matrix_const_view Pt =
            gsl_matrix_const_view_array(q->cov->data + t * q->cov->tda, D, D);
        gsl_vector_const_view mt = gsl_matrix_const_row(q->mean, t);
        double ldc;
        if (start) {
            gsl_matrix_memcpy(E, &Pt.matrix);
            gsl_vector_memcpy(e, &mt.vector);
            gsl_vector_sub(e, p->m0);
            gsl_blas_dger(1.0, e, e, E);
            total += -0.5 * ((double)D * LOG_2PI + ldP0 + trace_prod(P0i, E));
            gsl_matrix_memcpy(cond, &Pt.matrix);
        } else {
            /* H(x_t | x_{t-1}): cov P_t - X P_{t-1}^-1 X' */
            gsl_matrix_const_view Pp = gsl_matrix_const_view_array(
                q->cov->data + (t - 1) * q->cov->tda, D, D);
            gsl_matrix_const_view X = gsl_matrix_const_view_array(
                q->cross->data + t * q->cross->tda, D, D);
            if (spd_inv(&Pp.matrix, Pi, NULL, work) != 0) {
                st = lse_error_set(err, LSE_ENUMERIC, fn,
                                   "Cov_q[x] of row %zu is singular", t);
                goto done;
            }
            gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &X.matrix, Pi, 0.0,
                           XP);
            gsl_matrix_memcpy(cond, &Pt.matrix);
            gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0, XP, &X.matrix, 1.0,
                           cond);
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < i; j++) {
                    const double v = 0.5 * (gsl_matrix_get(cond, i, j) +
                                            gsl_matrix_get(cond, j, i));
                    gsl_matrix_set(cond, i, j, v);
                    gsl_matrix_set(cond, j, i, v);
                }
        }
        if (spd_inv(cond, NULL, &ldc, work) != 0) {
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "conditional covariance of row %zu is not "
                               "positive definite",
                               t + 1);
            goto done;
        }
        total += 0.5 * ((double)D * (1.0 + LOG_2PI) + ldc);
        /* E log p(y_t | x_t), observed entries */
        if (pr == NULL)
            obs_term(p, y, observed, t, q, t, cp, &total);
    }
    if (pr != NULL) {
        double o = 0.0;
        for (size_t tl = 0; tl < pr->n_own; tl++)
            obs_term(p, y, observed, pr->ctx + tl, q, pr->offset + tl, cp, &o);
        st = lse_comm_sum(&pr->comm, &o, 1, fn, err);
        if (st != LSE_OK)
            goto done;
        total += o;
    }
    if (p->markov)
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                total += xlogy(gsl_matrix_get(q->xi, j, k),
                               gsl_matrix_get(p->trans, j, k));
    if (!isfinite(total)) {
        st = lse_error_set(err, LSE_ENONFINITE, fn, "ELBO is not finite");
        goto done;
    }
    *elbo = total;
done:
    gsl_matrix_free(s);
    gsl_matrix_free(work);
    gsl_matrix_free(P0i);
    gsl_matrix_free(E);
    gsl_matrix_free(Pi);
    gsl_matrix_free(cond);
    gsl_matrix_free(XP);
    gsl_vector_free(e);
    gsl_vector_free(cp);
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

/* Mode k's expected dynamics statistics, weighted by q(z_t = k) over the
 * rows that are not sequence starts: Sxx = E[x~ x~'] of the previous
 * states x~ = (x_{t-1}, 1), Stx = E[x_t x~'], Stt = E[x_t x_t']. Returns
 * the total weight. */
static double dyn_stats(const lse_lslds_post *q, const size_t *seq, size_t k,
                        gsl_matrix *Sxx, gsl_matrix *Stx, gsl_matrix *Stt)
{
    const size_t T = q->T, D = Stt->size1, D1 = D + 1;
    double n = 0.0;
    gsl_matrix_set_zero(Sxx);
    gsl_matrix_set_zero(Stx);
    gsl_matrix_set_zero(Stt);
    for (size_t t = 0; t < T; t++) {
        if (is_start(seq, t))
            continue;
        const double w = gsl_matrix_get(q->w, t, k);
        n += w;
        for (size_t i = 0; i < D1; i++)
            for (size_t j = 0; j < D1; j++) {
                const double mi =
                    i < D ? gsl_matrix_get(q->mean, t - 1, i) : 1.0;
                const double mj =
                    j < D ? gsl_matrix_get(q->mean, t - 1, j) : 1.0;
                const double c =
                    (i < D && j < D)
                        ? gsl_matrix_get(q->cov, t - 1, i * D + j)
                        : 0.0;
                gsl_matrix_set(Sxx, i, j,
                               gsl_matrix_get(Sxx, i, j) + w * (c + mi * mj));
            }
        for (size_t i = 0; i < D; i++) {
            const double mi = gsl_matrix_get(q->mean, t, i);
            for (size_t j = 0; j < D1; j++) {
                const double mj =
                    j < D ? gsl_matrix_get(q->mean, t - 1, j) : 1.0;
                const double c =
                    j < D ? gsl_matrix_get(q->cross, t, i * D + j) : 0.0;
                gsl_matrix_set(Stx, i, j,
                               gsl_matrix_get(Stx, i, j) + w * (c + mi * mj));
            }
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(Stt, i, j,
                               gsl_matrix_get(Stt, i, j) +
                                   w * (gsl_matrix_get(q->cov, t, i * D + j) +
                                        mi * gsl_matrix_get(q->mean, t, j)));
        }
    }
    return n;
}

/* The initial state (m0, P0 + reg I) from the sequence starts, the mode
 * probabilities and (Markov) the transitions from q(z). */
static void mstep_start(lse_lslds_params *p, const size_t *seq,
                        const lse_lslds_post *q, double reg)
{
    const size_t T = q->T, K = p->K, D = p->D;
    double ns = 0.0;
    gsl_vector_set_zero(p->m0);
    for (size_t t = 0; t < T; t++)
        if (is_start(seq, t)) {
            ns += 1.0;
            for (size_t i = 0; i < D; i++)
                gsl_vector_set(p->m0, i,
                               gsl_vector_get(p->m0, i) +
                                   gsl_matrix_get(q->mean, t, i));
        }
    gsl_vector_scale(p->m0, 1.0 / ns);
    gsl_matrix_set_zero(p->P0);
    for (size_t t = 0; t < T; t++)
        if (is_start(seq, t))
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

static lse_status mstep_impl(lse_lslds_params *p, const gsl_matrix *y,
                             const unsigned char *observed, const size_t *seq,
                             const lse_lslds_post *q, double reg, par *pr,
                             const char *fn, lse_error *err);

lse_status lse_lslds_mstep(lse_lslds_params *p, const gsl_matrix *y,
                           const unsigned char *observed, const size_t *seq,
                           const lse_lslds_post *q, double reg, lse_error *err)
{
    static const char fn[] = "lse_lslds_mstep";
    lse_status st = check_args(fn, p, y, q, err);
    if (st != LSE_OK)
        return st;
    return mstep_impl(p, y, observed, seq, q, reg, NULL, fn, err);
}

/* With @p pr (several processes) the emission statistics of this
 * process's rows, summed over the processes. */
static lse_status mstep_impl(lse_lslds_params *p, const gsl_matrix *y,
                             const unsigned char *observed, const size_t *seq,
                             const lse_lslds_post *q, double reg, par *pr,
                             const char *fn, lse_error *err)
{
    lse_status st = LSE_OK;
    if (!q->have_x || !q->have_z)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "q(z) and q(x) must both be computed");
    if (!(reg >= 0.0) || !isfinite(reg))
        return lse_error_set(err, LSE_EDOM, fn, "reg = %g must be >= 0", reg);
    const size_t T = q->T, K = p->K, D = p->D, N = p->N, D1 = D + 1;
    gsl_matrix *Sxx = gsl_matrix_alloc(D1, D1), *Stx = gsl_matrix_alloc(D, D1);
    gsl_matrix *Stt = gsl_matrix_alloc(D, D), *work = gsl_matrix_alloc(D1, D1);
    gsl_matrix *W = gsl_matrix_alloc(D, D1), *Wy = gsl_matrix_alloc(1, D1);
    gsl_vector *sy = gsl_vector_alloc(D1);
    /* emission statistics per column: Sxx (D1 D1), Sy (D1), n, yy */
    const size_t SW = D1 * D1 + D1 + 2, E = NE(p);
    double *es = calloc(E * N * SW, sizeof(double));
    if (!Sxx || !Stx || !Stt || !work || !W || !sy || !Wy || !es) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    /* dynamics, per mode */
    for (size_t k = 0; k < K; k++) {
        const double n = dyn_stats(q, seq, k, Sxx, Stx, Stt);
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
                gsl_matrix_set(p->A, k, i * D + j, gsl_matrix_get(W, i, j));
            }
            gsl_matrix_set(p->b, k, i, gsl_matrix_get(W, i, D));
        }
    }
    /* emission, per observed column (diagonal R) and emission block (per
     * mode: rows weighted by q(z_t = k)) */
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
            const double w = E > 1 ? gsl_matrix_get(q->w, tq, k) : 1.0;
            const double yt = gsl_matrix_get(y, t, i), wy = w * yt;
            n += w;
            yy += wy * yt;
            for (size_t a = 0; a < D1; a++) {
                const double ma = a < D ? gsl_matrix_get(q->mean, tq, a) : 1.0;
                ey[a] += wy * ma;
                for (size_t c = 0; c < D1; c++) {
                    const double mc =
                        c < D ? gsl_matrix_get(q->mean, tq, c) : 1.0;
                    const double v = (a < D && c < D)
                                         ? gsl_matrix_get(q->cov, tq, a * D + c)
                                         : 0.0;
                    eS[a * D1 + c] = E > 1 ? eS[a * D1 + c] + w * (v + ma * mc)
                                           : eS[a * D1 + c] + v + ma * mc;
                }
            }
        }
        e[SW - 2] = n;
        e[SW - 1] = yy;
    }
    if (pr != NULL &&
        (st = lse_comm_sum(&pr->comm, es, E * N * SW, fn, err)) != LSE_OK)
        goto done;
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
    mstep_start(p, seq, q, reg); /* initial state and mode probabilities */
done:
    gsl_matrix_free(Sxx);
    gsl_matrix_free(Stx);
    gsl_matrix_free(Stt);
    gsl_matrix_free(work);
    gsl_matrix_free(W);
    gsl_vector_free(sy);
    gsl_matrix_free(Wy);
    free(es);
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
    const size_t D = p->D, K = p->K;
    for (size_t k = 0; k < K; k++) {
        lse_slds_get_a(m, k, a);
        lse_slds_get_b(m, k, bv);
        lse_slds_get_cov(m, k, cv);
        for (size_t i = 0; i < D; i++) {
            gsl_matrix_set(p->b, k, i, gsl_vector_get(bv, i));
            for (size_t j = 0; j < D; j++) {
                gsl_matrix_set(p->A, k, i * D + j, gsl_matrix_get(a, i, j));
                gsl_matrix_set(p->Q, k, i * D + j, gsl_matrix_get(cv, i, j));
            }
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
static lse_status update_x_par(const lse_lslds_params *p, const gsl_matrix *y,
                               const unsigned char *observed, const size_t *seq,
                               lse_lslds_post *q, par *pr, double *obs,
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
    const size_t T = X->size1, D = p->D, N = p->N, W = D * D + D;
    lse_lslds_params *p1 = NULL;
    lse_lslds_post *q = NULL;
    double *obs = NULL;
    lse_status st = lse_lslds_params_new(1, D, N, 1, &p1, err);
    if (st == LSE_OK)
        st = lse_lslds_post_new(T, 1, D, &q, err);
    if (st == LSE_OK && pr != NULL &&
        (obs = malloc((T * W + 1) * sizeof(double))) == NULL)
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st != LSE_OK)
        goto done;
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(p1->C, i, j, gsl_matrix_get(p->C, i, j));
        gsl_vector_set(p1->d, i, gsl_vector_get(p->d, i));
        gsl_vector_set(p1->r, i, gsl_vector_get(p->r, i));
    }
    for (size_t it = 0; st == LSE_OK && it <= LSE_LSLDS_INIT_LDS_ITERS; it++) {
        st = pr ? update_x_par(p1, y, observed, seq, q, pr, obs, err)
                : update_x_impl(p1, y, observed, seq, q, NULL, NULL, fn, err);
        if (st == LSE_OK && it < LSE_LSLDS_INIT_LDS_ITERS)
            st = update_z_impl(p1, seq, NULL, q, fn, err);
        if (st == LSE_OK && it < LSE_LSLDS_INIT_LDS_ITERS)
            st = mstep_impl(p1, y, observed, seq, q, 1e-6, pr, fn, err);
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
    lse_lslds_params_free(p1);
    lse_lslds_post_free(q);
    free(obs);
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
    gsl_matrix *a = gsl_matrix_alloc(D, D), *cv = gsl_matrix_alloc(D, D);
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
    gsl_eigen_symmv(S, lam, U, ew);
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
    dst->hz = src->hz;
    dst->have_x = dst->have_z = 1;
}

/* The q(x) update of lse_lslds_fit: on this process alone, or (pr) over
 * the processes with the potentials buffer obs. */
static lse_status update_x_any(const lse_lslds_params *p, const gsl_matrix *y,
                               const unsigned char *observed, const size_t *seq,
                               lse_lslds_post *q, par *pr, double *obs,
                               lse_error *err)
{
    return pr ? update_x_par(p, y, observed, seq, q, pr, obs, err)
              : lse_lslds_update_x(p, y, observed, seq, q, NULL, err);
}

/* One E-step of lse_lslds_fit: (emission scores,) q(z), the ELBO e1, q(x),
 * the ELBO e2. */
static lse_status fit_estep(const lse_lslds_params *cur, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            lse_lslds_post *qc, par *pr, double *obs,
                            gsl_matrix *es, size_t it, double prev,
                            double *e1, double *e2, lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    lse_status st = es ? emis_scores(cur, y, observed, qc, pr, es, fn, err)
                       : LSE_OK;
    if (st == LSE_OK)
        st = update_z_impl(cur, seq, es, qc, fn, err);
    if (st == LSE_OK)
        st = elbo_impl(cur, y, observed, seq, qc, pr, e1, fn, err);
    if (st == LSE_OK)
        st = update_x_any(cur, y, observed, seq, qc, pr, obs, err);
    if (st == LSE_OK)
        st = elbo_impl(cur, y, observed, seq, qc, pr, e2, fn, err);
    if (st == LSE_OK && (dropped(prev, *e1) || dropped(*e1, *e2)))
        st = lse_error_set(err, LSE_EINCREASE, fn,
                           "ELBO decreased in the E-step of iteration "
                           "%zu (%.17g, %.17g, %.17g)",
                           it, prev, *e1, *e2);
    return st;
}

/* One M-step of lse_lslds_fit (m0, P0 kept with opts->fix_initial, in
 * m0s, P0s), then the ELBO e3. */
static lse_status fit_mstep(lse_lslds_params *cur, const gsl_matrix *y,
                            const unsigned char *observed, const size_t *seq,
                            const lse_lslds_post *qc, par *pr,
                            const lse_lslds_opts *opts, gsl_vector *m0s,
                            gsl_matrix *P0s, size_t it, double e2, double *e3,
                            lse_error *err)
{
    static const char fn[] = "lse_lslds_fit";
    if (opts->fix_initial) { /* keep m0, P0 */
        gsl_vector_memcpy(m0s, cur->m0);
        gsl_matrix_memcpy(P0s, cur->P0);
    }
    lse_status st =
        mstep_impl(cur, y, observed, seq, qc, opts->reg, pr, fn, err);
    if (opts->fix_initial) {
        gsl_vector_memcpy(cur->m0, m0s);
        gsl_matrix_memcpy(cur->P0, P0s);
    }
    if (st == LSE_OK)
        st = elbo_impl(cur, y, observed, seq, qc, pr, e3, fn, err);
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
    par prv, *pr = NULL;
    gsl_matrix *es = NULL; /* emission scores (per-mode emissions) */
    gsl_vector *m0s = NULL; /* fix_initial: m0, P0 kept across M-steps */
    gsl_matrix *P0s = NULL;
    size_t *gseq = NULL;
    double *obs = NULL;
    lse_status st = LSE_OK;
    if (y->size2 != p->N)
        return lse_error_set(err, LSE_EDIM, fn, "y has %zu columns, want %zu",
                             y->size2, p->N);
    if (opts.reduce != NULL) {
        pr = &prv;
        st = par_setup(pr, &opts, y, seq, p->D, &gseq, &obs, err);
        if (st != LSE_OK)
            goto done;
        seq = gseq;
    }
    const size_t T = pr ? pr->comm.n_total : y->size1;
    st = params_new_like(p, &cur, err);
    if (st == LSE_OK)
        st = params_new_like(p, &best, err);
    if (st == LSE_OK && p->per_mode_emission &&
        (es = gsl_matrix_alloc(T, p->K)) == NULL)
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK && ((m0s = gsl_vector_alloc(p->D)) == NULL ||
                         (P0s = gsl_matrix_alloc(p->D, p->D)) == NULL))
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK)
        st = lse_lslds_post_new(T, p->K, p->D, &qc, err);
    if (st == LSE_OK)
        st = lse_lslds_post_new(T, p->K, p->D, &qb, err);
    if (st != LSE_OK)
        goto done;
    double best_elbo = -INFINITY;
    size_t best_iter = 0;
    for (size_t run = 0; run < runs; run++) {
        params_copy(cur, p);
        if (!opts.init_given) {
            st = init_impl(cur, y, observed, seq, pr, opts.seed + run, fn, err);
            if (st != LSE_OK)
                goto done;
        }
        qc->have_z = 0;
        qc->have_x = 0;
        st = update_x_any(cur, y, observed, seq, qc, pr, obs, err);
        if (st != LSE_OK)
            goto done;
        double prev = -INFINITY, e1 = 0, e2 = 0, e3 = -INFINITY;
        size_t it = 0;
        for (it = 1; it <= opts.max_iter; it++) {
            st = fit_estep(cur, y, observed, seq, qc, pr, obs, es, it, prev,
                           &e1, &e2, err);
            if (st != LSE_OK)
                goto done;
            st = fit_mstep(cur, y, observed, seq, qc, pr, &opts, m0s, P0s, it,
                           e2, &e3, err);
            if (st != LSE_OK)
                goto done;
            const double gain = e3 - prev;
            prev = e3;
            if (gain <= opts.tol * (double)T)
                break;
        }
        if (it > opts.max_iter)
            it = opts.max_iter;
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
    if (pr != NULL)
        lse_comm_free(&pr->comm);
    free(gseq);
    free(obs);
    gsl_matrix_free(es);
    gsl_vector_free(m0s);
    gsl_matrix_free(P0s);
    return st;
}

lse_status lse_lslds_simulate(const lse_lslds_params *p, unsigned long seed,
                              gsl_matrix *y, gsl_matrix *x, size_t *z,
                              lse_error *err)
{
    static const char fn[] = "lse_lslds_simulate";
    if (p == NULL || y == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "params and y are required");
    const size_t T = y->size1, D = p->D, N = p->N, K = p->K;
    if (y->size2 != N || (x != NULL && (x->size1 != T || x->size2 != D)))
        return lse_error_set(err, LSE_EDIM, fn, "y or x has the wrong shape");
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_matrix *L = gsl_matrix_alloc(D, D), *L0 = gsl_matrix_alloc(D, D);
    gsl_vector *xp = gsl_vector_alloc(D), *xt = gsl_vector_alloc(D);
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
        if (t == 0) {
            gsl_vector_memcpy(xt, p->m0);
            gsl_blas_dtrmv(CblasLower, CblasNoTrans, CblasNonUnit, L0, u);
            gsl_vector_add(xt, u);
        } else {
            gsl_matrix_const_view Ak =
                gsl_matrix_const_view_array(p->A->data + k * p->A->tda, D, D);
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
        gsl_vector_memcpy(xp, xt);
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
    if (!q->have_x)
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
        /* log p(z) + log p(y|z) - log m(z), with the proposal
         * m(z) = (1 - e) q(z) + e p(z) = p(z) [(1 - e) exp(sum s - log Z) + e] */
        const double lr = ssum - logz, e = LSE_LSLDS_IS_PRIOR;
        const double lmix = lr > 0.0 ? lr + log((1.0 - e) + e * exp(-lr))
                                     : log((1.0 - e) * exp(lr) + e);
        lw[n] = ll - lmix;
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
