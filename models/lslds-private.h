#ifndef LSE_MODELS_LSLDS_PRIVATE_H
#define LSE_MODELS_LSLDS_PRIVATE_H
/* The latent SLDS's inference kernels (models/lslds_kern.c), shared by
 * models/lslds.c: raw row-major arrays, one workspace per fit. */

#include <stddef.h>

#include <lsegraph/lsegraph.h>

#define LSE_LSLDS_LOG_2PI 1.8378770664093454836

/* Workspace. Per mode k the row mb[k] holds the transition's quadratic
 * blocks [Qi | Qi A | A'Qi A | Qi b | A'Qi b | b'Qi b + log det Q + D
 * log 2 pi] (M = 3 D^2 + 2 D + 1 numbers, Qi = Q_k^-1): the q(z)-weighted
 * sums of these rows (mix = W mb, one dgemm) are the mixed transition
 * potentials of q(x), and with the moment rows of q(x) (mo, zero at
 * sequence starts) [E x_t x_t' | -2 E x_t x_{t-1}' | E x_{t-1} x_{t-1}' |
 * -2 E x_t | 2 E x_{t-1} | 1] the expected log-densities of all modes are
 * s = -1/2 mo mb' (one dgemm). obs holds the observation potentials of
 * every row (J_t (D x D), h_t (D)) and their constant at obs[T (DD + D)]. */
/* With L lags (P = L D, the stacked previous states s_{t-1} = [x_{t-1};
 * ...; x_{t-L}]) the rows are [Qi | Qi A (D x P) | A'Qi A (P x P) | Qi b
 * | A'Qi b (P) | b'Qi b + log det Q + D log 2 pi] (M = D^2 + D P + P^2 +
 * D + P + 1) and the moments [E x_t x_t' | -2 E x_t s' | E s s' | -2 E
 * x_t | 2 E s | 1], zero at the first L rows of a sequence; q(x) is then
 * the block-banded smoother of models/lslds_lags.c. */
typedef struct lsw {
    size_t T, K, D, M;
    size_t lags, P; /* L, L D */
    double *mb;  /* K x M */
    double *mo;  /* T x M */
    double *mix; /* T x M */
    double *wu;  /* T x K uniform weights (before q(z) exists) */
    double *s;   /* T x K scores */
    double *obs; /* T (DD + D) + 1 */
    double *L, *U, *uf; /* smoother: T x DD, T x DD, T x D */
    double *tmp; /* 6 DD + 4 D scratch */
    double *P0i, *P0im0; /* DD, D */
    double ldP0, m0P0im0;
    double *Lb, *ub; /* L > 1: banded factor T (L+1) DD, T D */
} lsw;

/* 0, or -1 out of memory (T (3 D^2 + 2 D + 1) overflow included). */
int lse_lsw_alloc(lsw *w, size_t T, size_t K, size_t D, size_t L);
void lse_lsw_free(lsw *w);
/* mb from the parameters and the initial-state terms; -1 when a Q_k is
 * not positive definite, -2 when P0 is not. */
int lse_lsw_modes(lsw *w, const lse_lslds_params *p);
/* mo from q(x). */
void lse_lsw_moments(lsw *w, const lse_lslds_post *q, const size_t *seq);
/* s = -1/2 mo mb' (needs lse_lsw_modes and lse_lsw_moments). */
void lse_lsw_scores(lsw *w);
/* The q(x) update from mb, the weights of q (uniform without q(z)) and
 * the observation potentials w->obs: mean, cov, cross of q; *logz the log
 * normalizer, *hx the entropy of q(x). 0, or 1 + the row whose precision
 * is not positive definite. */
size_t lse_lsw_smooth(lsw *w, const size_t *seq, lse_lslds_post *q,
                      double *logz, double *hx);
/* E_q log N(x_s; m0, P0) summed over the sequence starts. */
double lse_lsw_start_expect(const lsw *w, const lse_lslds_post *q,
                            const size_t *seq);
/* Weighted moment sums WM (K x M) = W' mo (W = q(z)). */
void lse_lsw_moment_sums(const lsw *w, const lse_lslds_post *q, double *WM);
/* The row is one of the first L of its sequence (s: that start). */
static inline int lse_lsw_head(const size_t *seq, size_t t, size_t L,
                               size_t *s)
{
    if (t == 0 || (seq != NULL && seq[t] != seq[t - 1]))
        *s = t;
    return t - *s < L;
}
/* The one-lag moments and q(x) update (models/lslds_kern.c), and
 * w->mix = W mb (the mode-weighted potentials both smoothers start from);
 * lse_lsw_moments / lse_lsw_smooth (models/lslds_lags.c) choose between
 * these and the L > 1 ones below. */
void lse_lsw_moments_one(lsw *w, const lse_lslds_post *q, const size_t *seq);
size_t lse_lsw_smooth_one(lsw *w, const size_t *seq, lse_lslds_post *q,
                          double *logz, double *hx);
void lse_lsw_mix(lsw *w, const lse_lslds_post *q);
/* L > 1 (models/lslds_lags.c): moments, smoother, and the log normalizer
 * of the potentials for the mode path z (log p(y | z) with the path's
 * observation potentials in w->obs). */
void lse_lsw_moments_lags(lsw *w, const lse_lslds_post *q, const size_t *seq);
size_t lse_lsw_smooth_lags(lsw *w, const size_t *seq, lse_lslds_post *q,
                           double *logz, double *hx);
size_t lse_lsw_logz_path(lsw *w, const size_t *seq, const size_t *z,
                         double *logz);
/* small dense helpers of models/lslds_kern.c (row-major, n x n) */
void lse_lsw_lsolve(const double *L, double *x, size_t n);
void lse_lsw_ltsolve_mat(const double *L, double *B, size_t n);
void lse_lsw_chol_inverse(const double *L, double *inv, double *li, size_t n);
/* lower Cholesky factor in place (n x n, row-major); 0 or -1 */
int lse_lsw_chol(double *a, size_t n);

#endif
