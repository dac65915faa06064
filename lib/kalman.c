#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_permutation.h>

#include <lsegraph/kalman.h>

#include "linalg-private.h"

/* Kalman filter and RTS smoother (include/lsegraph/kalman.h). Every
 * buffer is allocated once in lse_kalman_smooth; the time loops only take
 * views of them. */

#define LOG_2PI 1.8378770664093454836

static const char FN[] = "lse_kalman_smooth";

typedef struct kwork {
    size_t T, D, N;
    double *pm, *pP; /* predicted means (T, D), covariances (T, D*D) */
    double *fm, *fP; /* filtered */
    double *sm, *sP; /* smoothed */
    double *cr;      /* cross covariances (T, D*D) */
    gsl_matrix *Co, *PCt, *S, *Kt, *IKC, *tmp, *tmp2, *M;
    gsl_vector *e, *v, *v2;
    gsl_permutation *perm;
    size_t *oidx;
} kwork;

static void kwork_free(kwork *w)
{
    free(w->pm);
    free(w->pP);
    free(w->fm);
    free(w->fP);
    free(w->sm);
    free(w->sP);
    free(w->cr);
    gsl_matrix_free(w->Co);
    gsl_matrix_free(w->PCt);
    gsl_matrix_free(w->S);
    gsl_matrix_free(w->Kt);
    gsl_matrix_free(w->IKC);
    gsl_matrix_free(w->tmp);
    gsl_matrix_free(w->tmp2);
    gsl_matrix_free(w->M);
    gsl_vector_free(w->e);
    gsl_vector_free(w->v);
    gsl_vector_free(w->v2);
    gsl_permutation_free(w->perm);
    free(w->oidx);
}

static int kwork_alloc(kwork *w, size_t T, size_t D, size_t N)
{
    memset(w, 0, sizeof *w);
    w->T = T;
    w->D = D;
    w->N = N;
    const size_t td = T * D, tdd = T * D * D;
    w->pm = malloc(td * sizeof(double));
    w->fm = malloc(td * sizeof(double));
    w->sm = malloc(td * sizeof(double));
    w->pP = malloc(tdd * sizeof(double));
    w->fP = malloc(tdd * sizeof(double));
    w->sP = malloc(tdd * sizeof(double));
    w->cr = calloc(tdd, sizeof(double));
    w->Co = gsl_matrix_alloc(N, D);
    w->PCt = gsl_matrix_alloc(D, N);
    w->S = gsl_matrix_alloc(N, N);
    w->Kt = gsl_matrix_alloc(N, D);
    w->IKC = gsl_matrix_alloc(D, D);
    w->tmp = gsl_matrix_alloc(D, D);
    w->tmp2 = gsl_matrix_alloc(D, D);
    w->M = gsl_matrix_alloc(D, D);
    w->e = gsl_vector_alloc(N);
    w->v = gsl_vector_alloc(D);
    w->v2 = gsl_vector_alloc(D);
    w->perm = gsl_permutation_alloc(D);
    w->oidx = malloc(N * sizeof(size_t));
    return w->pm && w->fm && w->sm && w->pP && w->fP && w->sP && w->cr &&
           w->Co && w->PCt && w->S && w->Kt && w->IKC && w->tmp && w->tmp2 &&
           w->M && w->e && w->v && w->v2 && w->perm && w->oidx;
}

static int all_finite_m(const gsl_matrix *a)
{
    if (a == NULL)
        return 1;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            if (!isfinite(gsl_matrix_get(a, i, j)))
                return 0;
    return 1;
}

static int all_finite_v(const gsl_vector *a)
{
    if (a == NULL)
        return 1;
    for (size_t i = 0; i < a->size; i++)
        if (!isfinite(gsl_vector_get(a, i)))
            return 0;
    return 1;
}

/* Row t of a (1 or T)-row parameter matrix. */
static const double *row_of(const gsl_matrix *a, size_t t)
{
    return a->data + (a->size1 == 1 ? 0 : t) * a->tda;
}

static void symmetrize(gsl_matrix *a)
{
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < i; j++) {
            const double s =
                0.5 * (gsl_matrix_get(a, i, j) + gsl_matrix_get(a, j, i));
            gsl_matrix_set(a, i, j, s);
            gsl_matrix_set(a, j, i, s);
        }
}

/* Cholesky factor in place (lower triangle); 0 on success. */
static int chol(gsl_matrix *a)
{
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    const int st = lse_chol_decomp1(a);
    gsl_set_error_handler(old);
    if (st != GSL_SUCCESS)
        return -1;
    for (size_t i = 0; i < a->size1; i++)
        if (!(gsl_matrix_get(a, i, i) > 0.0))
            return -1;
    return 0;
}

static lse_status check_model(const lse_kalman_model *m, const gsl_matrix *y,
                              const unsigned char *observed, lse_error *err)
{
    if (m == NULL || y == NULL || m->A == NULL || m->Q == NULL ||
        m->C == NULL || m->R == NULL || m->m0 == NULL || m->P0 == NULL)
        return lse_error_set(err, LSE_EFAULT, FN,
                             "model, y, A, Q, C, R, m0 and P0 are required");
    const size_t T = y->size1, N = y->size2, D = m->C->size2;
    if (T == 0 || N == 0 || D == 0)
        return lse_error_set(err, LSE_EINVAL, FN,
                             "empty problem: T = %zu, N = %zu, D = %zu", T, N,
                             D);
    if (D > 65535 || N > 65535 || T > SIZE_MAX / sizeof(double) / D / D / 8 ||
        N > SIZE_MAX / sizeof(double) / (D > N ? D : N))
        return lse_error_set(err, LSE_ENOMEM, FN,
                             "sizes overflow: T = %zu, N = %zu, D = %zu", T, N,
                             D);
    const size_t DD = D * D;
#define ROWS_OK(a) ((a)->size1 == 1 || (a)->size1 == T)
    if (m->C->size1 != N)
        return lse_error_set(err, LSE_EDIM, FN, "C is %zux%zu, y has %zu columns",
                             m->C->size1, m->C->size2, N);
    if (!ROWS_OK(m->A) || m->A->size2 != DD)
        return lse_error_set(err, LSE_EDIM, FN,
                             "A is %zux%zu, want 1 or %zu rows of %zu", m->A->size1,
                             m->A->size2, T, DD);
    if (!ROWS_OK(m->Q) || m->Q->size2 != DD)
        return lse_error_set(err, LSE_EDIM, FN,
                             "Q is %zux%zu, want 1 or %zu rows of %zu", m->Q->size1,
                             m->Q->size2, T, DD);
    if (m->b != NULL && (!ROWS_OK(m->b) || m->b->size2 != D))
        return lse_error_set(err, LSE_EDIM, FN,
                             "b is %zux%zu, want 1 or %zu rows of %zu", m->b->size1,
                             m->b->size2, T, D);
#undef ROWS_OK
    if (m->d != NULL && m->d->size != N)
        return lse_error_set(err, LSE_EDIM, FN, "d has %zu entries, want %zu",
                             m->d->size, N);
    if (m->R->size1 != N || m->R->size2 != N)
        return lse_error_set(err, LSE_EDIM, FN, "R is %zux%zu, want %zux%zu",
                             m->R->size1, m->R->size2, N, N);
    if (m->m0->size != D || m->P0->size1 != D || m->P0->size2 != D)
        return lse_error_set(err, LSE_EDIM, FN,
                             "m0 (%zu) and P0 (%zux%zu) must have D = %zu",
                             m->m0->size, m->P0->size1, m->P0->size2, D);
    if (m->J != NULL && (m->J->size1 != T || m->J->size2 != DD))
        return lse_error_set(err, LSE_EDIM, FN, "J is %zux%zu, want %zux%zu",
                             m->J->size1, m->J->size2, T, DD);
    if (m->h != NULL && (m->h->size1 != T || m->h->size2 != D))
        return lse_error_set(err, LSE_EDIM, FN, "h is %zux%zu, want %zux%zu",
                             m->h->size1, m->h->size2, T, D);
    if (!all_finite_m(m->A) || !all_finite_m(m->b) || !all_finite_m(m->Q) ||
        !all_finite_m(m->C) || !all_finite_v(m->d) || !all_finite_m(m->R) ||
        !all_finite_v(m->m0) || !all_finite_m(m->P0) || !all_finite_m(m->J) ||
        !all_finite_m(m->h))
        return lse_error_set(err, LSE_ENONFINITE, FN,
                             "NaN or infinity in a model parameter");
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < N; i++)
            if ((observed == NULL || observed[t * N + i]) &&
                !isfinite(gsl_matrix_get(y, t, i)))
                return lse_error_set(err, LSE_ENONFINITE, FN,
                                     "y row %zu column %zu is observed and "
                                     "not finite (mask it as missing)",
                                     t + 1, i + 1);
    return LSE_OK;
}

/* Measurement update of (m, P) with the observed entries of y_t; adds the
 * log-likelihood of those entries given y_1..t-1 to *ll. */
static int measure(kwork *w, const lse_kalman_model *mod, const double *yt,
                   const unsigned char *obs, gsl_vector *m, gsl_matrix *P,
                   double *ll)
{
    const size_t D = w->D, N = w->N;
    size_t k = 0;
    for (size_t i = 0; i < N; i++)
        if (obs == NULL || obs[i])
            w->oidx[k++] = i;
    if (k == 0)
        return 0;
    gsl_matrix_view Co = gsl_matrix_submatrix(w->Co, 0, 0, k, D);
    gsl_matrix_view PCt = gsl_matrix_submatrix(w->PCt, 0, 0, D, k);
    gsl_matrix_view S = gsl_matrix_submatrix(w->S, 0, 0, k, k);
    gsl_matrix_view Kt = gsl_matrix_submatrix(w->Kt, 0, 0, k, D);
    gsl_vector_view e = gsl_vector_subvector(w->e, 0, k);
    for (size_t a = 0; a < k; a++) {
        const size_t i = w->oidx[a];
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(&Co.matrix, a, j, gsl_matrix_get(mod->C, i, j));
        for (size_t b = 0; b < k; b++)
            gsl_matrix_set(&S.matrix, a, b,
                           gsl_matrix_get(mod->R, i, w->oidx[b]));
        gsl_vector_set(&e.vector, a,
                       yt[i] - (mod->d ? gsl_vector_get(mod->d, i) : 0.0));
    }
    /* e = y_o - d_o - C_o m; PCt = P C_o'; S = C_o P C_o' + R_oo */
    gsl_blas_dgemv(CblasNoTrans, -1.0, &Co.matrix, m, 1.0, &e.vector);
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, P, &Co.matrix, 0.0,
                   &PCt.matrix);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &Co.matrix, &PCt.matrix,
                   1.0, &S.matrix);
    symmetrize(&S.matrix);
    if (chol(&S.matrix) != 0)
        return -1;
    double logdet = 0.0;
    for (size_t a = 0; a < k; a++)
        logdet += 2.0 * log(gsl_matrix_get(&S.matrix, a, a));
    /* K' = S^{-1} (P C_o')' = L^-T L^-1 C_o P */
    gsl_matrix_transpose_memcpy(&Kt.matrix, &PCt.matrix);
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, 1.0,
                   &S.matrix, &Kt.matrix);
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasTrans, CblasNonUnit, 1.0,
                   &S.matrix, &Kt.matrix);
    /* quadratic form e' S^-1 e = |L^-1 e|^2, using a copy of e */
    double q = 0.0;
    {
        gsl_vector_view u = gsl_vector_subvector(w->e, 0, k);
        /* m += K e first (needs e), then reduce e in place */
        gsl_blas_dgemv(CblasTrans, 1.0, &Kt.matrix, &u.vector, 1.0, m);
        gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, &S.matrix,
                       &u.vector);
        gsl_blas_ddot(&u.vector, &u.vector, &q);
    }
    *ll -= 0.5 * ((double)k * LOG_2PI + logdet + q);
    /* Joseph form: P = (I - K C_o) P (I - K C_o)' + K R_oo K' */
    gsl_matrix_set_identity(w->IKC);
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, -1.0, &Kt.matrix, &Co.matrix, 1.0,
                   w->IKC);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, w->IKC, P, 0.0, w->tmp);
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, w->tmp, w->IKC, 0.0, P);
    /* K R_oo K': reuse S's storage for R_oo, PCt for R_oo K' */
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++)
            gsl_matrix_set(&S.matrix, a, b,
                           gsl_matrix_get(mod->R, w->oidx[a], w->oidx[b]));
    gsl_matrix_view RK = gsl_matrix_submatrix(w->Co, 0, 0, k, D);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &S.matrix, &Kt.matrix, 0.0,
                   &RK.matrix);
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &Kt.matrix, &RK.matrix, 1.0,
                   P);
    symmetrize(P);
    return 0;
}

/* Multiply N(m, P) by exp(-x'Jx/2 + h'x): (m, P) become the normalized
 * product's moments and *ll gets log of the integral of the product. */
static int absorb(kwork *w, const gsl_matrix *J, const gsl_vector *h,
                  gsl_vector *m, gsl_matrix *P, double *ll)
{
    const size_t D = w->D;
    /* g = h - J m */
    if (h)
        gsl_vector_memcpy(w->v, h);
    else
        gsl_vector_set_zero(w->v);
    double quad = 0.0, lin = 0.0;
    if (h)
        gsl_blas_ddot(h, m, &lin);
    if (J) {
        gsl_blas_dgemv(CblasNoTrans, 1.0, J, m, 0.0, w->v2);
        gsl_blas_ddot(m, w->v2, &quad);
        gsl_vector_sub(w->v, w->v2);
    }
    /* M = I + P J, P' = M^-1 P, g'P'g */
    gsl_matrix_set_identity(w->M);
    if (J)
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, P, J, 1.0, w->M);
    int sgn = 0;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_linalg_LU_decomp(w->M, w->perm, &sgn);
    double logdet = 0.0;
    if (st == GSL_SUCCESS) {
        logdet = gsl_linalg_LU_lndet(w->M);
        if (gsl_linalg_LU_sgndet(w->M, sgn) <= 0 || !isfinite(logdet))
            st = GSL_ESING;
    }
    if (st == GSL_SUCCESS) {
        gsl_matrix_memcpy(w->tmp, P);
        for (size_t j = 0; j < D && st == GSL_SUCCESS; j++) {
            gsl_vector_view c = gsl_matrix_column(w->tmp, j);
            st = gsl_linalg_LU_svx(w->M, w->perm, &c.vector);
        }
    }
    gsl_set_error_handler(old);
    if (st != GSL_SUCCESS)
        return -1;
    gsl_matrix_memcpy(P, w->tmp);
    symmetrize(P);
    gsl_blas_dgemv(CblasNoTrans, 1.0, P, w->v, 0.0, w->v2); /* P'g */
    double gPg = 0.0;
    gsl_blas_ddot(w->v, w->v2, &gPg);
    gsl_vector_add(m, w->v2);
    *ll += -0.5 * logdet + lin - 0.5 * quad + 0.5 * gPg;
    return 0;
}

/* The result matrices that are given must be T x (D or D*D). */
static lse_status check_result(const lse_kalman_result *res, size_t T,
                               size_t D, lse_error *err)
{
    const size_t DD = D * D;
    const gsl_matrix *outs[] = {res->filt_mean, res->filt_cov, res->mean,
                                res->cov, res->cross};
    const size_t cols[] = {D, DD, D, DD, DD};
    const char *names[] = {"filt_mean", "filt_cov", "mean", "cov",
                           "cross"};
    for (size_t i = 0; i < 5; i++)
        if (outs[i] != NULL &&
            (outs[i]->size1 != T || outs[i]->size2 != cols[i]))
            return lse_error_set(err, LSE_EDIM, FN,
                                 "result %s is %zux%zu, want %zux%zu",
                                 names[i], outs[i]->size1,
                                 outs[i]->size2, T, cols[i]);
    return LSE_OK;
}

/* Prediction of row t (t > 0, not a sequence start) from the filtered
   row t-1: pm = A fm + b, pP = A fP A' + Q. */
static void predict(kwork *w, const lse_kalman_model *mod, size_t t,
                    gsl_vector *pm, gsl_matrix *pP)
{
    const size_t D = mod->C->size2, DD = D * D;
    gsl_matrix_const_view A = gsl_matrix_const_view_array(row_of(mod->A, t), D, D);
    gsl_matrix_const_view Q = gsl_matrix_const_view_array(row_of(mod->Q, t), D, D);
    gsl_vector_view fm0 = gsl_vector_view_array(w->fm + (t - 1) * D, D);
    gsl_matrix_view fP0 = gsl_matrix_view_array(w->fP + (t - 1) * DD, D, D);
    gsl_blas_dgemv(CblasNoTrans, 1.0, &A.matrix, &fm0.vector, 0.0, pm);
    if (mod->b != NULL) {
        const size_t r = mod->b->size1 == 1 ? 0 : t;
        gsl_vector_const_view b = gsl_matrix_const_row(mod->b, r);
        gsl_vector_add(pm, &b.vector);
    }
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &A.matrix, &fP0.matrix,
                   0.0, w->tmp);
    gsl_matrix_memcpy(pP, &Q.matrix);
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, w->tmp, &A.matrix, 1.0, pP);
    symmetrize(pP);
}

/* One Rauch-Tung-Striebel step: smoothed row t = t1 - 1 from the smoothed
   row t1 (in place in w->sm, w->sP), and the cross covariance of t1.
   Returns nonzero when the predicted covariance of t1 is not positive
   definite. */
static int rts_step(kwork *w, const lse_kalman_model *mod, size_t t1)
{
    const size_t t = t1 - 1, D = mod->C->size2, DD = D * D;
    gsl_matrix_const_view A = gsl_matrix_const_view_array(row_of(mod->A, t1), D, D);
    gsl_matrix_view pP1 = gsl_matrix_view_array(w->pP + t1 * DD, D, D);
    gsl_matrix_view fP = gsl_matrix_view_array(w->fP + t * DD, D, D);
    gsl_matrix_view sP = gsl_matrix_view_array(w->sP + t * DD, D, D);
    gsl_matrix_view sP1 = gsl_matrix_view_array(w->sP + t1 * DD, D, D);
    /* Gt = G' = Pp^-1 A fP */
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &A.matrix,
                   &fP.matrix, 0.0, w->IKC);
    gsl_matrix_memcpy(w->M, &pP1.matrix);
    if (chol(w->M) != 0)
        return -1;
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                   1.0, w->M, w->IKC);
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasTrans, CblasNonUnit,
                   1.0, w->M, w->IKC);
    /* means: sm_t = fm_t + G (sm_t1 - pm_t1) */
    for (size_t i = 0; i < D; i++)
        w->v->data[i * w->v->stride] =
            w->sm[t1 * D + i] - w->pm[t1 * D + i];
    gsl_vector_view sm = gsl_vector_view_array(w->sm + t * D, D);
    gsl_blas_dgemv(CblasTrans, 1.0, w->IKC, w->v, 1.0, &sm.vector);
    /* covariances: sP_t = fP_t + G (sP_t1 - pP_t1) G' */
    gsl_matrix_memcpy(w->tmp2, &sP1.matrix);
    gsl_matrix_sub(w->tmp2, &pP1.matrix);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, w->tmp2, w->IKC, 0.0,
                   w->tmp);
    gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, w->IKC, w->tmp, 1.0,
                   &sP.matrix);
    symmetrize(&sP.matrix);
    /* cross_t1 = Cov(x_t1, x_t) = sP_t1 G' */
    gsl_matrix_view cr = gsl_matrix_view_array(w->cr + t1 * DD, D, D);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &sP1.matrix,
                   w->IKC, 0.0, &cr.matrix);
    return 0;
}

lse_status lse_kalman_smooth(const lse_kalman_model *mod, const gsl_matrix *y,
                             const unsigned char *observed, const size_t *seq,
                             double *loglik, lse_kalman_result *res,
                             lse_error *err)
{
    lse_gsl_quiet();
    lse_status st = check_model(mod, y, observed, err);
    if (st != LSE_OK)
        return st;
    const size_t T = y->size1, N = y->size2, D = mod->C->size2, DD = D * D;
    if (res != NULL) {
        st = check_result(res, T, D, err);
        if (st != LSE_OK)
            return st;
    }
    kwork w;
    if (!kwork_alloc(&w, T, D, N)) {
        kwork_free(&w);
        return lse_error_set(err, LSE_ENOMEM, FN, "out of memory (T = %zu)",
                             T);
    }
    {
        /* P0 and R must be positive definite */
        gsl_matrix_view s = gsl_matrix_submatrix(w.S, 0, 0, N, N);
        gsl_matrix_memcpy(&s.matrix, mod->R);
        gsl_matrix_memcpy(w.tmp, mod->P0);
        if (chol(&s.matrix) != 0 || chol(w.tmp) != 0) {
            kwork_free(&w);
            return lse_error_set(err, LSE_ENUMERIC, FN,
                                 "R or P0 is not positive definite");
        }
    }
    double ll = 0.0;
    /* forward pass */
    for (size_t t = 0; t < T; t++) {
        const int start = t == 0 || (seq != NULL && seq[t] != seq[t - 1]);
        gsl_vector_view pm = gsl_vector_view_array(w.pm + t * D, D);
        gsl_matrix_view pP = gsl_matrix_view_array(w.pP + t * DD, D, D);
        if (start) {
            gsl_vector_memcpy(&pm.vector, mod->m0);
            gsl_matrix_memcpy(&pP.matrix, mod->P0);
        } else {
            predict(&w, mod, t, &pm.vector, &pP.matrix);
        }
        gsl_vector_view fm = gsl_vector_view_array(w.fm + t * D, D);
        gsl_matrix_view fP = gsl_matrix_view_array(w.fP + t * DD, D, D);
        gsl_vector_memcpy(&fm.vector, &pm.vector);
        gsl_matrix_memcpy(&fP.matrix, &pP.matrix);
        if (measure(&w, mod, y->data + t * y->tda,
                    observed ? observed + t * N : NULL, &fm.vector,
                    &fP.matrix, &ll) != 0) {
            kwork_free(&w);
            return lse_error_set(err, LSE_ENUMERIC, FN,
                                 "innovation covariance of row %zu is not "
                                 "positive definite",
                                 t + 1);
        }
        if (mod->J != NULL || mod->h != NULL) {
            gsl_matrix_const_view Jt =
                gsl_matrix_const_view_array(mod->J ? mod->J->data + t * mod->J->tda : w.cr, D, D);
            gsl_vector_const_view ht =
                gsl_vector_const_view_array(mod->h ? mod->h->data + t * mod->h->tda : w.cr, D);
            if (absorb(&w, mod->J ? &Jt.matrix : NULL,
                       mod->h ? &ht.vector : NULL, &fm.vector, &fP.matrix,
                       &ll) != 0) {
                kwork_free(&w);
                return lse_error_set(err, LSE_ENUMERIC, FN,
                                     "potential of row %zu: I + P J is "
                                     "singular (J not positive semidefinite?)",
                                     t + 1);
            }
        }
    }
    if (!isfinite(ll)) {
        kwork_free(&w);
        return lse_error_set(err, LSE_ENONFINITE, FN,
                             "log-likelihood is not finite");
    }
    const int smooth =
        res != NULL && (res->mean != NULL || res->cov != NULL ||
                        res->cross != NULL);
    if (smooth) {
        memcpy(w.sm, w.fm, T * D * sizeof(double));
        memcpy(w.sP, w.fP, T * DD * sizeof(double));
        for (size_t t1 = T; t1-- > 1;) {
            const size_t t = t1 - 1;
            if (seq != NULL && seq[t1] != seq[t])
                continue; /* t1 starts a sequence: t is a last row */
            if (rts_step(&w, mod, t1) != 0) {
                kwork_free(&w);
                return lse_error_set(err, LSE_ENUMERIC, FN,
                                     "predicted covariance of row %zu is "
                                     "not positive definite",
                                     t1 + 1);
            }
        }
    }
    if (res != NULL) {
        gsl_matrix_view v;
#define COPY(dst, src, cols)                                                   \
    if ((dst) != NULL) {                                                       \
        v = gsl_matrix_view_array((src), T, (cols));                           \
        gsl_matrix_memcpy((dst), &v.matrix);                                   \
    }
        COPY(res->filt_mean, w.fm, D)
        COPY(res->filt_cov, w.fP, DD)
        COPY(res->mean, w.sm, D)
        COPY(res->cov, w.sP, DD)
        COPY(res->cross, w.cr, DD)
#undef COPY
    }
    if (loglik != NULL)
        *loglik = ll;
    kwork_free(&w);
    return LSE_OK;
}
