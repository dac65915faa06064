/*
 * mclust's constrained covariance M-steps for lse_sim_gaussian
 * (lse_gaussian_config.model; Celeux & Govaert 1995). Derivations and the
 * iterative schemes: docs/sim-gaussian.md, section 6.
 *
 * Every model maximizes, over its constraint set, the covariance part of
 * the expected complete-data log-likelihood; up to -1/2 that is minimizing
 *
 *   F = sum_k [ n_k log det Sigma_k + tr(W_k Sigma_k^-1) ]
 *
 * where W_k is component k's weighted scatter about its new mean (plus
 * n_k reg_covar I, so reg_covar = 0 gives mclust's estimate) and
 * Sigma_k = lambda_k D_k A_k D_k' (volume, orientation, shape; det A = 1).
 * Closed forms: EII, EEI, EVI, EEV, EVV (VII, VVI, EEE, VVV are the four
 * existing types and never come here). Alternating (block coordinate)
 * minimization, each block in closed form so F never increases: VEI, VEE,
 * VEV (volumes vs. shape), EVE, VVE (volumes and shapes vs. a common
 * orientation D, improved by exact plane rotations of pairs of its
 * columns: Jacobi sweeps, the pairwise scheme of Flury & Gautschi).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_eigen.h>

#include <lsegraph/cov.h>
#include <gsl/gsl_linalg.h>

#include "gauss-private.h"
#include "../linalg-private.h"

/* inner iterations stop when F decreases by less than this (relative) */
#define MCL_TOL 1e-15
#define MCL_MAXIT 100000

struct lse_gauss_mclust {
    gsl_matrix *w;   /* (K*d, d) scatter W_k (diag: (K, d); sph: (K, 1)) */
    gsl_matrix *v;   /* (K*d, d) eigenvectors of W_k (columns) */
    gsl_matrix *om;  /* (K, d) eigenvalues (decreasing) or diag(D'W_kD) */
    gsl_matrix *sig; /* (K, d) eigenvalues of Sigma_k */
    gsl_vector *lam; /* (K) volumes */
    gsl_matrix *dm;  /* (d, d) common D or C */
    gsl_matrix *s;   /* (d, d) scratch */
    gsl_matrix *t;   /* (d, d) scratch */
    gsl_eigen_symmv_workspace *ew;
    gsl_vector *ev;  /* (d) */
    unsigned char *act; /* (K) component not empty */
};

int lse_gauss_mclust_active(const lse_gauss_work *w)
{
    switch (w->model) {
    case LSE_COV_MODEL_NONE:
    case LSE_COV_VII:
    case LSE_COV_VVI:
    case LSE_COV_EEE:
    case LSE_COV_VVV:
        return 0;
    default:
        return 1;
    }
}

lse_status lse_gauss_mclust_check(const char *name, const void *config,
                                  char *msg, size_t msg_len)
{
    if (config == NULL)
        return LSE_OK;
    const lse_gaussian_config *c = config;
    if (c->model == LSE_COV_MODEL_NONE)
        return LSE_OK;
    const char *mn = lse_cov_model_name(c->model);
    if (mn == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: unknown covariance model %d (expected EII "
                              "... VVV)",
                              name, (int)c->model);
    if (c->cov != lse_cov_model_layout(c->model))
        return lse_gauss_fail(msg, msg_len, LSE_EINVAL,
                              "%s: model %s is stored as cov=%s, not cov=%s",
                              name, mn,
                              lse_cov_name(lse_cov_model_layout(c->model)),
                              lse_cov_name(c->cov) != NULL
                                  ? lse_cov_name(c->cov)
                                  : "?");
    return LSE_OK;
}

void lse_gauss_mclust_work_free(struct lse_gauss_mclust *m)
{
    if (m == NULL)
        return;
    gsl_matrix_free(m->w);
    gsl_matrix_free(m->v);
    gsl_matrix_free(m->om);
    gsl_matrix_free(m->sig);
    gsl_vector_free(m->lam);
    gsl_matrix_free(m->dm);
    gsl_matrix_free(m->s);
    gsl_matrix_free(m->t);
    if (m->ew != NULL)
        gsl_eigen_symmv_free(m->ew);
    gsl_vector_free(m->ev);
    free(m->act);
    free(m);
}

lse_status lse_gauss_mclust_work_new(lse_gauss_work *w)
{
    w->mcl = NULL;
    if (!lse_gauss_mclust_active(w))
        return LSE_OK;
    const size_t K = w->n_comp, d = w->dim;
    if (d != 0 && K > SIZE_MAX / d / d)
        return LSE_ENOMEM;
    struct lse_gauss_mclust *m = calloc(1, sizeof *m);
    if (m == NULL)
        return LSE_ENOMEM;
    const int ok = (m->w = gsl_matrix_alloc(K * d, d)) != NULL &&
                   (m->v = gsl_matrix_alloc(K * d, d)) != NULL &&
                   (m->om = gsl_matrix_alloc(K, d)) != NULL &&
                   (m->sig = gsl_matrix_alloc(K, d)) != NULL &&
                   (m->lam = gsl_vector_alloc(K)) != NULL &&
                   (m->dm = gsl_matrix_alloc(d, d)) != NULL &&
                   (m->s = gsl_matrix_alloc(d, d)) != NULL &&
                   (m->t = gsl_matrix_alloc(d, d)) != NULL &&
                   (m->ew = gsl_eigen_symmv_alloc(d)) != NULL &&
                   (m->ev = gsl_vector_alloc(d)) != NULL &&
                   (m->act = malloc(K)) != NULL;
    if (!ok) {
        lse_gauss_mclust_work_free(m);
        return LSE_ENOMEM;
    }
    w->mcl = m;
    return LSE_OK;
}

static lse_status singular(const char *name, const char *model, size_t k,
                           double n_k, double reg, char *msg, size_t len)
{
    return lse_gauss_fail(msg, len, LSE_ENUMERIC,
                          "%s: %s: the scatter of component %zu (N_k = %g) "
                          "is singular with reg_covar = %g (use a larger "
                          "reg_covar, fewer components or another model)",
                          name, model, k, n_k, reg);
}

/* geometric mean of v[0..d-1] (all > 0): det^(1/d) */
static double geomean(const double *v, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += log(v[j]);
    return exp(s / (double)d);
}

/* eigen-decomposition of the symmetric a (d, d; destroyed): values
 * decreasing into val, vectors (columns) into vec */
static lse_status eigen(struct lse_gauss_mclust *m, gsl_matrix *a, double *val,
                        gsl_matrix *vec)
{
    if (lse_eigen_symmv(a, m->ev, vec, m->ew) != GSL_SUCCESS)
        return LSE_ENUMERIC;
    gsl_eigen_symmv_sort(m->ev, vec, GSL_EIGEN_SORT_VAL_DESC);
    for (size_t j = 0; j < a->size1; j++)
        val[j] = gsl_vector_get(m->ev, j);
    return LSE_OK;
}

/* F for Sigma_k with eigenvalues sig_k and the "data" e_k = diag(D'W_kD)
 * in the same basis: sum_k n_k sum_j (log sig_kj + e_kj / (n_k sig_kj)) */
static double objective(const double *n, const unsigned char *act, size_t K,
                        size_t d, const gsl_matrix *e, const gsl_matrix *sig)
{
    double f = 0.0;
    for (size_t k = 0; k < K; k++) {
        if (!act[k])
            continue;
        for (size_t j = 0; j < d; j++) {
            const double s = gsl_matrix_get(sig, k, j);
            f += n[k] * log(s) + gsl_matrix_get(e, k, j) / s;
        }
    }
    return f;
}

/* volumes lambda_k and one shape a (d) for eigenvalue-like data e_k
 * (VEI, VEV): alternate a_j ∝ sum_k e_kj / lambda_k (det 1) and
 * lambda_k = sum_j e_kj / a_j / (d n_k); writes sig_kj = lambda_k a_j */
static void volumes_shape(struct lse_gauss_mclust *m, const double *n,
                          const unsigned char *act, size_t K, size_t d,
                          int common_volume)
{
    double *a = m->ev->data; /* d */
    for (size_t k = 0; k < K; k++) {
        double t = 0.0;
        for (size_t j = 0; j < d; j++)
            t += gsl_matrix_get(m->om, k, j);
        gsl_vector_set(m->lam, k, act[k] ? t / ((double)d * n[k]) : 1.0);
    }
    double fold = INFINITY;
    for (int it = 0; it < MCL_MAXIT; it++) {
        for (size_t j = 0; j < d; j++) {
            a[j] = 0.0;
            for (size_t k = 0; k < K; k++)
                if (act[k])
                    a[j] +=
                        gsl_matrix_get(m->om, k, j) / gsl_vector_get(m->lam, k);
        }
        const double g = geomean(a, d);
        for (size_t j = 0; j < d; j++)
            a[j] /= g;
        double tot = 0.0, ntot = 0.0;
        for (size_t k = 0; k < K; k++) {
            if (!act[k])
                continue;
            double t = 0.0;
            for (size_t j = 0; j < d; j++)
                t += gsl_matrix_get(m->om, k, j) / a[j];
            gsl_vector_set(m->lam, k, t / ((double)d * n[k]));
            tot += t;
            ntot += n[k];
        }
        if (common_volume)
            for (size_t k = 0; k < K; k++)
                gsl_vector_set(m->lam, k, tot / ((double)d * ntot));
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(m->sig, k, j, gsl_vector_get(m->lam, k) * a[j]);
        const double f = objective(n, act, K, d, m->om, m->sig);
        if (common_volume || !(fold - f > MCL_TOL * fabs(f)))
            break;
        fold = f;
    }
}

/* VEE: Sigma_k = lambda_k C, det C = 1: alternate C ∝ sum_k W_k/lambda_k
 * and lambda_k = tr(W_k C^-1) / (d n_k). C into m->dm. */
static lse_status vee(struct lse_gauss_mclust *m, const double *n,
                      const unsigned char *act, size_t K, size_t d)
{
    for (size_t k = 0; k < K; k++) {
        double t = 0.0;
        for (size_t j = 0; j < d; j++)
            t += gsl_matrix_get(m->w, k * d + j, j);
        gsl_vector_set(m->lam, k, act[k] ? t / ((double)d * n[k]) : 1.0);
    }
    double fold = INFINITY;
    for (int it = 0; it < MCL_MAXIT; it++) {
        gsl_matrix_set_zero(m->dm);
        for (size_t k = 0; k < K; k++) {
            if (!act[k])
                continue;
            gsl_matrix_const_view wk =
                gsl_matrix_const_submatrix(m->w, k * d, 0, d, d);
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++)
                    *gsl_matrix_ptr(m->dm, i, j) +=
                        gsl_matrix_get(&wk.matrix, i, j) /
                        gsl_vector_get(m->lam, k);
        }
        /* C = S / det(S)^(1/d) through a Cholesky factor of S */
        gsl_matrix_memcpy(m->s, m->dm);
        if (lse_chol_decomp1(m->s) != GSL_SUCCESS)
            return LSE_ENUMERIC;
        double ld = 0.0;
        for (size_t j = 0; j < d; j++)
            ld += 2.0 * log(gsl_matrix_get(m->s, j, j));
        const double sc = exp(ld / (double)d);
        gsl_matrix_scale(m->dm, 1.0 / sc);
        /* inverse of C: S^-1 sc */
        if (gsl_linalg_cholesky_invert(m->s) != GSL_SUCCESS)
            return LSE_ENUMERIC;
        gsl_matrix_scale(m->s, sc);
        double f = 0.0;
        for (size_t k = 0; k < K; k++) {
            if (!act[k])
                continue;
            double tr = 0.0;
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++)
                    tr += gsl_matrix_get(m->w, k * d + i, j) *
                          gsl_matrix_get(m->s, j, i);
            const double l = tr / ((double)d * n[k]);
            gsl_vector_set(m->lam, k, l);
            f += n[k] * (double)d * log(l) + tr / l;
        }
        if (!(fold - f > MCL_TOL * fabs(f)))
            break;
        fold = f;
    }
    return LSE_OK;
}

/* e_kj = d_j' W_k d_j for the columns d_j of m->dm into m->om */
static void rotated_diag(struct lse_gauss_mclust *m, const unsigned char *act,
                         size_t K, size_t d)
{
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++) {
            double e = 0.0;
            if (act[k])
                for (size_t a = 0; a < d; a++)
                    for (size_t b = 0; b < d; b++)
                        e += gsl_matrix_get(m->dm, a, j) *
                             gsl_matrix_get(m->w, k * d + a, b) *
                             gsl_matrix_get(m->dm, b, j);
            gsl_matrix_set(m->om, k, j, e);
        }
}

/* eigenvalues sig_k of Sigma_k in the basis D from e = diag(D'W_kD):
 * EVE lambda A_k (common volume), VVE lambda_k A_k (= e_k / n_k) */
static void common_d_sig(struct lse_gauss_mclust *m, const double *n,
                         const unsigned char *act, size_t K, size_t d, int eve)
{
    double gs = 0.0, ntot = 0.0;
    for (size_t k = 0; k < K; k++) {
        if (!act[k])
            continue;
        const double *e = gsl_matrix_const_ptr(m->om, k, 0);
        const double g = geomean(e, d);
        gsl_vector_set(m->lam, k, g);
        gs += g;
        ntot += n[k];
    }
    for (size_t k = 0; k < K; k++) {
        if (!act[k])
            continue;
        const double g = gsl_vector_get(m->lam, k);
        for (size_t j = 0; j < d; j++) {
            const double e = gsl_matrix_get(m->om, k, j);
            gsl_matrix_set(m->sig, k, j, eve ? (gs / ntot) * e / g : e / n[k]);
        }
    }
}

/* EVE / VVE: Sigma_k = D diag(sig_k) D' with a common orthogonal D. */
static lse_status common_d(struct lse_gauss_mclust *m, const double *n,
                           const unsigned char *act, size_t K, size_t d,
                           int eve)
{
    /* start: eigenvectors of the pooled scatter */
    gsl_matrix_set_zero(m->s);
    for (size_t k = 0; k < K; k++)
        if (act[k]) {
            gsl_matrix_const_view wk =
                gsl_matrix_const_submatrix(m->w, k * d, 0, d, d);
            gsl_matrix_add(m->s, &wk.matrix);
        }
    double *val = gsl_matrix_ptr(m->t, 0, 0); /* d scratch values */
    gsl_matrix *vec = m->dm;
    gsl_matrix_view tmp = gsl_matrix_submatrix(m->v, 0, 0, d, d);
    if (eigen(m, m->s, val, &tmp.matrix) != LSE_OK)
        return LSE_ENUMERIC;
    gsl_matrix_memcpy(vec, &tmp.matrix);
    double fold = INFINITY;
    for (int it = 0; it < MCL_MAXIT; it++) {
        rotated_diag(m, act, K, d);
        common_d_sig(m, n, act, K, d, eve);
        const double f = objective(n, act, K, d, m->om, m->sig);
        if (!(fold - f > MCL_TOL * fabs(f)))
            break;
        fold = f;
        /* one Jacobi sweep: the best rotation of each pair of columns of
         * D with the sig fixed. With u, v the columns and c_kj = 1/sig_kj,
         * the objective in the angle t is const + alpha cos 2t + beta
         * sin 2t, alpha = sum_k (P_k - Q_k)/2 (c_kp - c_kq), beta = sum_k
         * R_k (c_kp - c_kq), P = u'W_k u, Q = v'W_k v, R = u'W_k v. */
        for (size_t p = 0; p + 1 < d; p++)
            for (size_t q = p + 1; q < d; q++) {
                double al = 0.0, be = 0.0;
                for (size_t k = 0; k < K; k++) {
                    if (!act[k])
                        continue;
                    double P = 0.0, Q = 0.0, R = 0.0;
                    for (size_t a = 0; a < d; a++)
                        for (size_t b = 0; b < d; b++) {
                            const double wab =
                                gsl_matrix_get(m->w, k * d + a, b);
                            const double ua = gsl_matrix_get(vec, a, p);
                            const double va = gsl_matrix_get(vec, a, q);
                            const double ub = gsl_matrix_get(vec, b, p);
                            const double vb = gsl_matrix_get(vec, b, q);
                            P += ua * wab * ub;
                            Q += va * wab * vb;
                            R += ua * wab * vb;
                        }
                    const double dc = 1.0 / gsl_matrix_get(m->sig, k, p) -
                                      1.0 / gsl_matrix_get(m->sig, k, q);
                    al += 0.5 * (P - Q) * dc;
                    be += R * dc;
                }
                if (al == 0.0 && be == 0.0)
                    continue;
                const double t = 0.5 * atan2(-be, -al);
                const double c = cos(t), s = sin(t);
                for (size_t a = 0; a < d; a++) {
                    const double ua = gsl_matrix_get(vec, a, p);
                    const double va = gsl_matrix_get(vec, a, q);
                    gsl_matrix_set(vec, a, p, c * ua + s * va);
                    gsl_matrix_set(vec, a, q, -s * ua + c * va);
                }
            }
    }
    return LSE_OK;
}

/* Sigma = V diag(sig) V' (V (d, d) columns) into out (d, d) */
static void compose(const gsl_matrix *v, const double *sig, size_t d,
                    gsl_matrix *out)
{
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (size_t a = 0; a < d; a++)
                s += gsl_matrix_get(v, i, a) * sig[a] * gsl_matrix_get(v, j, a);
            gsl_matrix_set(out, i, j, s);
            gsl_matrix_set(out, j, i, s);
        }
}

/* Equal shape (EEI, EEV): every active component's eigenvalues (rows of
 * m->om) pooled, sig_kj = sum_k' om_k'j / nt for every k. */
static void equal_shape(struct lse_gauss_mclust *m, const unsigned char *act,
                        size_t K, size_t d, double nt)
{
    for (size_t j = 0; j < d; j++) {
        double t = 0.0;
        for (size_t k = 0; k < K; k++)
            if (act[k])
                t += gsl_matrix_get(m->om, k, j);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(m->sig, k, j, t / nt);
    }
}

/* Equal volume (EVI, EVV): each active component keeps its shape
 * om_k / |om_k|^(1/d), scaled by the pooled volume sum_k |om_k|^(1/d) / nt. */
static void equal_volume(struct lse_gauss_mclust *m, const unsigned char *act,
                         size_t K, size_t d, double nt)
{
    double gs = 0.0;
    for (size_t k = 0; k < K; k++)
        if (act[k])
            gs += geomean(gsl_matrix_const_ptr(m->om, k, 0), d);
    for (size_t k = 0; k < K; k++) {
        if (!act[k])
            continue;
        const double g = geomean(gsl_matrix_const_ptr(m->om, k, 0), d);
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(m->sig, k, j,
                           (gs / nt) * gsl_matrix_get(m->om, k, j) / g);
    }
}

/* EII, the spherical layout: s2 holds sum rho ||x - mu_k||^2. */
static lse_status solve_eii(lse_gauss_work *w, const char *name, const char *mn,
                            const double *n, const double *s1, const double *s2,
                            double reg, char *msg, size_t msg_len)
{
    struct lse_gauss_mclust *m = w->mcl;
    const size_t K = w->n_comp, d = w->dim;
    const unsigned char *act = m->act;
    lse_status st = LSE_OK;
    double t = 0.0, nt = 0.0;
    for (size_t k = 0; k < K; k++) {
        if (!act[k])
            continue;
        double m2 = 0.0;
        for (size_t j = 0; j < d; j++)
            m2 += s1[k * d + j] * s1[k * d + j];
        t += s2[k] - m2 / n[k] + n[k] * (double)d * reg;
        nt += n[k];
    }
    double v = t / ((double)d * nt);
    if (!(v > 0.0) || !isfinite(v))
        return singular(name, mn, 0, nt, reg, msg, msg_len);
    for (size_t k = 0; k < K && st == LSE_OK; k++) {
        double vk = v;
        if (act[k])
            st = lse_gauss_chol_from_var(w, name, k, &vk, 0.0, n[k], msg,
                                         msg_len);
    }
    return st;
}

/* The models of the diagonal layout (EEI, EVI, VEI). */
static lse_status solve_diag(lse_gauss_work *w, const char *name,
                             const char *mn, const double *n, const double *s1,
                             const double *s2, double reg, char *msg,
                             size_t msg_len)
{
    struct lse_gauss_mclust *m = w->mcl;
    const size_t K = w->n_comp, d = w->dim;
    const unsigned char *act = m->act;
    lse_status st = LSE_OK;
    /* w_kj = s2_kj - s1_kj^2 / n_k + n_k reg into om */
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++) {
            double e = 1.0;
            if (act[k]) {
                e = s2[k * d + j] - s1[k * d + j] * s1[k * d + j] / n[k] +
                    n[k] * reg;
                if (!(e > 0.0) || !isfinite(e))
                    return singular(name, mn, k, n[k], reg, msg, msg_len);
            }
            gsl_matrix_set(m->om, k, j, e);
        }
    double nt = 0.0;
    for (size_t k = 0; k < K; k++)
        nt += act[k] ? n[k] : 0.0;
    switch (w->model) {
    case LSE_COV_EEI:
        equal_shape(m, act, K, d, nt);
        break;
    case LSE_COV_EVI:
        equal_volume(m, act, K, d, nt);
        break;
    case LSE_COV_VEI:
        volumes_shape(m, n, act, K, d, 0);
        break;
    default:
        return lse_gauss_fail(msg, msg_len, LSE_EINTERNAL,
                              "%s: model %s in the diag layout", name, mn);
    }
    for (size_t k = 0; k < K && st == LSE_OK; k++)
        if (act[k])
            st = lse_gauss_chol_from_var(w, name, k,
                                         gsl_matrix_ptr(m->sig, k, 0), 0.0,
                                         n[k], msg, msg_len);
    return st;
}

/* The models of the full layout (EEV, EVV, VEV, VEE, EVE, VVE). */
static lse_status solve_full(lse_gauss_work *w, const char *name,
                             const char *mn, const double *n, const double *s1,
                             const double *s2, double reg, char *msg,
                             size_t msg_len)
{
    struct lse_gauss_mclust *m = w->mcl;
    const size_t K = w->n_comp, d = w->dim;
    const unsigned char *act = m->act;
    lse_status st = LSE_OK;
    /* full layout: W_k = s2_k - s1_k s1_k' / n_k + n_k reg I */
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j <= i; j++) {
                double v = (i == j) ? 1.0 : 0.0;
                if (act[k]) {
                    v = 0.5 * (s2[k * d * d + i * d + j] +
                               s2[k * d * d + j * d + i]) -
                        s1[k * d + i] * s1[k * d + j] / n[k] +
                        (i == j ? n[k] * reg : 0.0);
                }
                gsl_matrix_set(m->w, k * d + i, j, v);
                gsl_matrix_set(m->w, k * d + j, i, v);
            }
    for (size_t k = 0; k < K; k++) {
        if (!act[k])
            continue;
        gsl_matrix_const_view wk =
            gsl_matrix_const_submatrix(m->w, k * d, 0, d, d);
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(&wk.matrix, j, j)))
                return singular(name, mn, k, n[k], reg, msg, msg_len);
        if (w->model == LSE_COV_EEV || w->model == LSE_COV_VEV ||
            w->model == LSE_COV_EVV) {
            gsl_matrix_memcpy(m->s, &wk.matrix);
            gsl_matrix_view vk = gsl_matrix_submatrix(m->v, k * d, 0, d, d);
            if (eigen(m, m->s, gsl_matrix_ptr(m->om, k, 0), &vk.matrix) !=
                    LSE_OK ||
                !(gsl_matrix_get(m->om, k, d - 1) > 0.0))
                return singular(name, mn, k, n[k], reg, msg, msg_len);
        }
    }
    double nt = 0.0;
    for (size_t k = 0; k < K; k++)
        nt += act[k] ? n[k] : 0.0;
    const int own_v = w->model == LSE_COV_EEV || w->model == LSE_COV_VEV ||
                      w->model == LSE_COV_EVV;
    switch (w->model) {
    case LSE_COV_EEV: /* Sigma_k = D_k (sum_k Omega_k / n) D_k' */
        equal_shape(m, act, K, d, nt);
        break;
    case LSE_COV_EVV: /* Sigma_k = (sum_k |W_k|^(1/d) / n) W_k/|W_k|^(1/d) */
        equal_volume(m, act, K, d, nt);
        break;
    case LSE_COV_VEV:
        volumes_shape(m, n, act, K, d, 0);
        break;
    case LSE_COV_VEE:
        if (vee(m, n, act, K, d) != LSE_OK)
            return singular(name, mn, 0, nt, reg, msg, msg_len);
        break;
    case LSE_COV_EVE:
    case LSE_COV_VVE:
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < d; j++)
                if (act[k] && !(gsl_matrix_get(m->w, k * d + j, j) > 0.0))
                    return singular(name, mn, k, n[k], reg, msg, msg_len);
        if (common_d(m, n, act, K, d, w->model == LSE_COV_EVE) != LSE_OK)
            return singular(name, mn, 0, nt, reg, msg, msg_len);
        break;
    default:
        return lse_gauss_fail(msg, msg_len, LSE_EINTERNAL,
                              "%s: model %s in the full layout", name, mn);
    }
    for (size_t k = 0; k < K && st == LSE_OK; k++) {
        if (!act[k])
            continue;
        if (w->model == LSE_COV_VEE) {
            gsl_matrix_memcpy(m->t, m->dm);
            gsl_matrix_scale(m->t, gsl_vector_get(m->lam, k));
        } else if (own_v) {
            gsl_matrix_const_view vk =
                gsl_matrix_const_submatrix(m->v, k * d, 0, d, d);
            compose(&vk.matrix, gsl_matrix_const_ptr(m->sig, k, 0), d, m->t);
        } else {
            compose(m->dm, gsl_matrix_const_ptr(m->sig, k, 0), d, m->t);
        }
        st = lse_gauss_chol_from_cov(w, name, k, m->t, 0.0, n[k], msg,
                                     msg_len);
    }
    return st;
}

lse_status lse_gauss_mclust_solve(lse_gauss_work *w, const char *name,
                                  const double *n, const double *s1,
                                  const double *s2, const lse_mstep_opts *o,
                                  char *msg, size_t msg_len)
{
    struct lse_gauss_mclust *m = w->mcl;
    if (m == NULL)
        return lse_gauss_fail(msg, msg_len, LSE_EINTERNAL,
                              "%s: no workspace for the covariance model",
                              name);
    const size_t K = w->n_comp;
    const char *mn = lse_cov_model_name(w->model);
    const double reg = o->reg_covar;
    unsigned char *act = m->act;
    size_t n_act = 0;
    for (size_t k = 0; k < K; k++) {
        act[k] = (unsigned char)!lse_gauss_is_empty(n[k], o->min_count);
        n_act += act[k];
    }
    if (n_act == 0)
        return LSE_OK;
    if (w->model == LSE_COV_EII)
        return solve_eii(w, name, mn, n, s1, s2, reg, msg, msg_len);
    if (w->cov == LSE_COV_DIAG)
        return solve_diag(w, name, mn, n, s1, s2, reg, msg, msg_len);
    return solve_full(w, name, mn, n, s1, s2, reg, msg, msg_len);
}
