#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"
#include "kernels-private.h"
#include "size-private.h"

/* Chain reduction of an LSE term: a hidden Markov chain over the child rows
 * with emission log-weights S (n, K), initial logits u (1, K) and transition
 * logits V (K, K) (row-softmax). Scaled forward-backward (Rabiner: each
 * forward row normalized to sum 1, the scales give the log-likelihood):
 *   E = -sum_seq log sum_paths exp(log p0(k_s) + S_s,k_s
 *                                  + sum_t [log T(k_t-1, k_t) + S_t,k_t])
 *   dE/dS_tk = -gamma_t(k)                 (posterior marginals)
 *   dE/du_k  = -(sum_seq gamma_s(k) - n_seq p0(k))
 *   dE/dV_jk = -(xi_jk - (sum_k' xi_jk') T_jk)   (xi: expected counts)
 * docs/core.md ("Chain reduction") states the energy and gradients. */

struct lse_chain {
    size_t n, K;
    size_t *starts; /* n_seq + 1 entries, starts[n_seq] = n */
    size_t n_seq;
    gsl_matrix *alpha;  /* (n, K) scaled forward, rows sum to 1 */
    gsl_matrix *beta;   /* (n, K) scaled backward */
    gsl_matrix *em;     /* (n, K) exp(S - rowmax S) */
    gsl_vector *scale;  /* (n) c_t: alpha_t before normalization sums to it */
    double *rowmax;     /* (n) max_k S_tk */
    double *lgm;        /* (n) log c_t + max_k S_tk */
    gsl_matrix *trans;  /* (K, K) transition probabilities exp(logT) */
    gsl_matrix *logT;   /* (K, K) */
    gsl_vector *logp0;  /* (K) */
    gsl_matrix *xi;     /* (K, K) expected transition counts */
    gsl_matrix *post0;  /* (1, K) summed posterior at sequence starts */
    double *tmp;        /* K */
};

void lse_chain_free(lse_chain *c)
{
    if (c == NULL)
        return;
    free(c->starts);
    gsl_matrix_free(c->alpha);
    gsl_matrix_free(c->beta);
    gsl_matrix_free(c->em);
    gsl_vector_free(c->scale);
    free(c->rowmax);
    free(c->lgm);
    gsl_matrix_free(c->trans);
    gsl_matrix_free(c->logT);
    gsl_vector_free(c->logp0);
    gsl_matrix_free(c->xi);
    gsl_matrix_free(c->post0);
    free(c->tmp);
    free(c);
}

lse_status lse_chain_new(lse_term *t, const size_t *starts, size_t n_starts,
                         lse_chain **out)
{
    static const char fn[] = "lse_graph_add_lse";
    *out = NULL;
    const size_t n = t->child.count, K = t->parent.count;
    lse_chain *c = calloc(1, sizeof *c);
    if (c == NULL)
        return LSE_ENOMEM;
    c->n = n;
    c->K = K;
    size_t n_alloc;
    if (lse_size_add(n_starts, 2, &n_alloc) ||
        lse_size_mul(n_alloc, sizeof *c->starts, &n_alloc) ||
        lse_size_matrix_overflows(n, K) || lse_size_matrix_overflows(K, K)) {
        lse_chain_free(c);
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn,
                              "term '%s': a chain of %zu rows, %zu states and "
                              "%zu starts exceeds the address space",
                              t->name, n, K, n_starts);
    }
    c->starts = malloc(n_alloc);
    c->alpha = gsl_matrix_alloc(n, K);
    c->beta = gsl_matrix_alloc(n, K);
    c->em = gsl_matrix_alloc(n, K);
    c->scale = gsl_vector_alloc(n);
    c->rowmax = malloc((n > 0 ? n : 1) * sizeof *c->rowmax);
    c->lgm = malloc((n > 0 ? n : 1) * sizeof *c->lgm);
    c->trans = gsl_matrix_alloc(K, K);
    c->logT = gsl_matrix_alloc(K, K);
    c->logp0 = gsl_vector_alloc(K);
    c->xi = gsl_matrix_calloc(K, K);
    c->post0 = gsl_matrix_calloc(1, K);
    c->tmp = malloc(K * sizeof *c->tmp);
    if (c->starts == NULL || c->alpha == NULL || c->beta == NULL ||
        c->em == NULL || c->scale == NULL || c->rowmax == NULL ||
        c->lgm == NULL || c->trans == NULL ||
        c->logT == NULL || c->logp0 == NULL || c->xi == NULL ||
        c->post0 == NULL || c->tmp == NULL) {
        lse_chain_free(c);
        return LSE_ENOMEM;
    }
    c->starts[c->n_seq++] = 0;
    for (size_t i = 0; i < n_starts; i++) {
        const size_t s = starts[i];
        if (s == 0)
            continue;
        if (s >= n || s <= c->starts[c->n_seq - 1]) {
            lse_chain_free(c);
            return lse_graph_fail(t->graph, LSE_ERANGE, fn,
                                  "term '%s': chain start %zu is not ascending "
                                  "within [1, %zu)",
                                  t->name, s, n);
        }
        c->starts[c->n_seq++] = s;
    }
    c->starts[c->n_seq] = n;
    *out = c;
    return LSE_OK;
}

const gsl_matrix *lse_chain_xi(const lse_chain *c) { return c->xi; }
const gsl_matrix *lse_chain_init_post(const lse_chain *c) { return c->post0; }

/* Normalized log initial (logp0) and transition (logT) probabilities of
 * the logits u (1, K) and V (K, K), and the transitions exp(logT) into
 * trans. */
static void chain_probs(lse_chain *c, const gsl_matrix *u, const gsl_matrix *V)
{
    const size_t K = c->K;
    const double lz0 = lse_logsumexp(gsl_matrix_const_ptr(u, 0, 0), K, 1, 1.0);
    for (size_t k = 0; k < K; k++)
        gsl_vector_set(c->logp0, k, gsl_matrix_get(u, 0, k) - lz0);
    for (size_t j = 0; j < K; j++) {
        const double lz =
            lse_logsumexp(gsl_matrix_const_ptr(V, j, 0), K, 1, 1.0);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(c->logT, j, k, gsl_matrix_get(V, j, k) - lz);
    }
    double *tr = c->trans->data;
    const size_t tt = c->trans->tda;
    for (size_t j = 0; j < K; j++)
        for (size_t k = 0; k < K; k++)
            tr[j * tt + k] = exp(gsl_matrix_get(c->logT, j, k));
}

/* Emissions of rows [s0, s1): rowmax_t = max_k S_tk, em_tk = exp(S_tk -
 * rowmax_t) by lse_exp_nonpos in one loop over the rows' entries (it
 * vectorizes; a row of K entries does not). */
LSE_KERNEL void chain_emit_body(lse_chain *c, const gsl_matrix *S, size_t s0,
                                size_t s1)
{
    const size_t K = c->K, ta = c->em->tda, ts = S->tda;
    double *em = c->em->data, *mx = c->rowmax;
    for (size_t i = s0; i < s1; i++) {
        const double *si = S->data + i * ts;
        double m = -INFINITY;
        for (size_t k = 0; k < K; k++)
            m = si[k] > m ? si[k] : m;
        mx[i] = m;
        double *ei = em + i * ta;
        for (size_t k = 0; k < K; k++)
            ei[k] = si[k] - m;
    }
    /* a fully masked row (m = -INFINITY) gives NaN: its log-likelihood
     * is not finite and lse_chain_eval fails, as with libm's exp */
    const size_t nr = ta == K ? 1 : s1 - s0, len = ta == K ? (s1 - s0) * K : K;
    for (size_t r = 0; r < nr; r++) {
        double *e = em + (s0 + r) * ta;
        for (size_t j = 0; j < len; j++)
            e[j] = lse_exp_nonpos(e[j]);
    }
}

/* lgm_t = log c_t + rowmax_t of rows [s0, s1) by lse_log_pos (vectorized)
 * where c_t is a positive normal number, else by libm's log. */
LSE_KERNEL void chain_loglik_body(lse_chain *c, size_t s0, size_t s1)
{
    const double *sc = c->scale->data, *mx = c->rowmax;
    double *lgm = c->lgm;
    for (size_t i = s0; i < s1; i++)
        lgm[i] = lse_log_pos(sc[i]) + mx[i];
    for (size_t i = s0; i < s1; i++)
        if (!(sc[i] >= DBL_MIN && sc[i] <= DBL_MAX))
            lgm[i] = log(sc[i]) + mx[i];
}

static void chain_emit_plain(lse_chain *c, const gsl_matrix *S, size_t s0,
                             size_t s1)
{
    chain_emit_body(c, S, s0, s1);
}

static void chain_loglik_plain(lse_chain *c, size_t s0, size_t s1)
{
    chain_loglik_body(c, s0, s1);
}

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX2
static void chain_emit_avx2(lse_chain *c, const gsl_matrix *S, size_t s0,
                            size_t s1)
{
    chain_emit_body(c, S, s0, s1);
}

LSE_TARGET_AVX2
static void chain_loglik_avx2(lse_chain *c, size_t s0, size_t s1)
{
    chain_loglik_body(c, s0, s1);
}
#endif

/* The forward recursion of rows [s0, s1) on the emissions (K a constant
 * in the common cases, so that the loops unroll and the transitions stay in
 * registers): normalized alpha and the scales. */
LSE_KERNEL void chain_fwd_body(lse_chain *c, const double *p0, size_t s0,
                               size_t s1, const size_t K)
{
    const size_t ta = c->alpha->tda, tt = c->trans->tda;
    double *al = c->alpha->data, *sc = c->scale->data;
    const double *tr = c->trans->data, *em = c->em->data;
    for (size_t i = s0; i < s1; i++) {
        const double *ei = em + i * ta;
        double *ai = al + i * ta;
        if (i == s0) {
            for (size_t k = 0; k < K; k++)
                ai[k] = p0[k] * ei[k];
        } else {
            const double *ap = al + (i - 1) * ta;
            for (size_t k = 0; k < K; k++) {
                double v = 0.0;
                for (size_t j = 0; j < K; j++)
                    v += ap[j] * tr[j * tt + k];
                ai[k] = v * ei[k];
            }
        }
        double sum = 0.0;
        for (size_t k = 0; k < K; k++)
            sum += ai[k];
        sc[i] = sum;
        const double inv = 1.0 / sum;
        for (size_t k = 0; k < K; k++)
            ai[k] *= inv;
    }
}

/* Scaled forward pass over rows [s0, s1) of S from the initial
 * probabilities p0: emissions em (exp(S_t - max S_t), computed first for
 * the whole sequence), normalized alpha, scales; returns the sequence's
 * log-likelihood sum_t (log c_t + max S_t), summed in the order of t. */
static double chain_forward(lse_chain *c, const gsl_matrix *S, const double *p0,
                            size_t s0, size_t s1)
{
#if LSE_HAVE_AVX2_PATH
    const int avx2 = lse_cpu_avx2();
    if (avx2)
        chain_emit_avx2(c, S, s0, s1);
    else
#endif
        chain_emit_plain(c, S, s0, s1);
    switch (c->K) {
    case 2:
        chain_fwd_body(c, p0, s0, s1, 2);
        break;
    case 3:
        chain_fwd_body(c, p0, s0, s1, 3);
        break;
    case 4:
        chain_fwd_body(c, p0, s0, s1, 4);
        break;
    default:
        chain_fwd_body(c, p0, s0, s1, c->K);
        break;
    }
#if LSE_HAVE_AVX2_PATH
    if (avx2)
        chain_loglik_avx2(c, s0, s1);
    else
#endif
        chain_loglik_plain(c, s0, s1);
    double ll = 0.0;
    for (size_t i = s0; i < s1; i++)
        ll += c->lgm[i];
    return ll;
}

/* Largest K whose expected counts the backward pass keeps in locals */
#define CHAIN_LOCAL 4

/* Backward pass over rows [s0, s1), adding the expected transitions into
 * xi; then the posteriors of those rows into post (tda tp). K a constant
 * up to CHAIN_LOCAL: the counts are summed in locals (the same additions
 * in the same order) and added to xi at the end. */
LSE_KERNEL void chain_bwd_body(lse_chain *c, double *post, size_t tp,
                               size_t s0, size_t s1, const size_t K)
{
    const size_t ta = c->alpha->tda, tt = c->trans->tda;
    const size_t tx = c->xi->tda;
    const double *al = c->alpha->data, *em = c->em->data, *tr = c->trans->data;
    const double *sc = c->scale->data;
    double *be = c->beta->data, *xg = c->xi->data;
    double xl[CHAIN_LOCAL * CHAIN_LOCAL];
    const int local = K <= CHAIN_LOCAL;
    double *xi = local ? xl : xg;
    const size_t tl = local ? K : tx;
    if (local)
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                xl[j * K + k] = xg[j * tx + k];
    double *bl = be + (s1 - 1) * ta;
    for (size_t k = 0; k < K; k++)
        bl[k] = 1.0;
    for (size_t i = s1 - 1; i > s0; i--) {
        const double *ei = em + i * ta, *bi = be + i * ta;
        const double *ap = al + (i - 1) * ta;
        double *bp = be + (i - 1) * ta;
        const double inv = 1.0 / sc[i];
        for (size_t j = 0; j < K; j++) {
            double v = 0.0;
            for (size_t k = 0; k < K; k++) {
                const double w = tr[j * tt + k] * ei[k] * bi[k] * inv;
                v += w;
                xi[j * tl + k] += ap[j] * w;
            }
            bp[j] = v;
        }
    }
    if (local)
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                xg[j * tx + k] = xl[j * K + k];
    /* gamma_t = alpha_t beta_t sums to 1 only in exact arithmetic (the
     * scaled products drift by a few ulps per step): renormalize each
     * row, so every posterior is in [0, 1] (x / s <= 1 for 0 <= x <= s
     * in rounded division) and each row sums to 1 within rounding */
    for (size_t i = s0; i < s1; i++) {
        double *pi = post + i * tp, sum = 0.0;
        for (size_t k = 0; k < K; k++) {
            pi[k] = al[i * ta + k] * be[i * ta + k];
            sum += pi[k];
        }
        const double inv = 1.0 / sum;
        for (size_t k = 0; k < K; k++) {
            const double p = pi[k] * inv;
            pi[k] = p < 1.0 ? p : 1.0;
        }
    }
}

static void chain_backward(lse_chain *c, double *post, size_t tp, size_t s0,
                           size_t s1)
{
    switch (c->K) {
    case 2:
        chain_bwd_body(c, post, tp, s0, s1, 2);
        break;
    case 3:
        chain_bwd_body(c, post, tp, s0, s1, 3);
        break;
    case 4:
        chain_bwd_body(c, post, tp, s0, s1, 4);
        break;
    default:
        chain_bwd_body(c, post, tp, s0, s1, c->K);
        break;
    }
}

/* dE/d(init logits) and dE/d(transition logits) into the free nodes'
 * grads, from the posteriors of the sequence starts and xi. */
static void chain_grads(lse_term *t, const lse_chain *c)
{
    const size_t K = c->K;
    if (!(t->chain_init->flags & LSE_NODE_CLAMPED))
        for (size_t k = 0; k < K; k++)
            *gsl_matrix_ptr(t->chain_init->grad, 0, k) -=
                gsl_matrix_get(c->post0, 0, k) -
                (double)c->n_seq * exp(gsl_vector_get(c->logp0, k));
    if (!(t->chain_trans->flags & LSE_NODE_CLAMPED))
        for (size_t j = 0; j < K; j++) {
            double row = 0.0;
            for (size_t k = 0; k < K; k++)
                row += gsl_matrix_get(c->xi, j, k);
            for (size_t k = 0; k < K; k++)
                *gsl_matrix_ptr(t->chain_trans->grad, j, k) -=
                    gsl_matrix_get(c->xi, j, k) -
                    row * exp(gsl_matrix_get(c->logT, j, k));
        }
}

lse_status lse_chain_eval(lse_term *t, int want_grad, double *energy)
{
    lse_chain *c = t->chain;
    const size_t K = c->K;
    chain_probs(c, t->chain_init->value, t->chain_trans->value);
    gsl_matrix_set_zero(c->xi);
    gsl_matrix_set_zero(c->post0);
    /* Forward-backward in scaled probability space (Rabiner): emissions
     * e_t = exp(S_t - max_k S_tk), forward rows normalized to sum 1 by
     * c_t, log-likelihood sum_t (log c_t + max S_t). Every quantity stays
     * O(1), so posteriors keep full precision over long sequences, and a
     * step costs K exponentials instead of 3 K^2 + K (and 2K logs). */
    double *p0 = c->tmp; /* K */
    for (size_t k = 0; k < K; k++)
        p0[k] = exp(gsl_vector_get(c->logp0, k));
    double *post = t->a->data;
    const size_t tp = t->a->tda;
    double total = 0.0;
    for (size_t q = 0; q < c->n_seq; q++) {
        const size_t s0 = c->starts[q], s1 = c->starts[q + 1];
        const double ll = chain_forward(c, t->s, p0, s0, s1);
        if (!isfinite(ll))
            return lse_graph_fail(t->graph, LSE_ENONFINITE, "lse_graph_energy",
                                  "term '%s': chain log-likelihood of sequence "
                                  "%zu is %g",
                                  t->name, q, ll);
        total += ll;
        chain_backward(c, post, tp, s0, s1);
        for (size_t k = 0; k < K; k++)
            *gsl_matrix_ptr(c->post0, 0, k) += post[s0 * tp + k];
    }
    *energy = -total;
    if (want_grad)
        chain_grads(t, c);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Most likely path and stationary distribution (public, graph.h)      */

#include <gsl/gsl_linalg.h>

lse_status lse_chain_viterbi(const gsl_matrix *logem, const gsl_vector *logp0,
                             const gsl_matrix *logT, const size_t *starts,
                             size_t n_starts, size_t *path, lse_error *err)
{
    static const char fn[] = "lse_chain_viterbi";
    if (logem == NULL || logp0 == NULL || logT == NULL || path == NULL ||
        (starts == NULL && n_starts > 0))
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t n = logem->size1, K = logem->size2;
    if (logp0->size != K || logT->size1 != K || logT->size2 != K)
        return lse_error_set(err, LSE_EDIM, fn,
                             "emissions (%zu, %zu), initial %zu, transitions "
                             "(%zu, %zu): expected K = %zu everywhere",
                             n, K, logp0->size, logT->size1, logT->size2, K);
    size_t prev = 0;
    for (size_t q = 0; q < n_starts; q++) {
        if (starts[q] == 0 && q == 0)
            continue;
        if (starts[q] <= prev || starts[q] >= n)
            return lse_error_set(err, LSE_ERANGE, fn,
                                 "start %zu is not ascending within [1, %zu)",
                                 starts[q], n);
        prev = starts[q];
    }
    if (n == 0)
        return LSE_OK;
    if (K > SIZE_MAX / n || n * K > SIZE_MAX / sizeof(double))
        return lse_error_set(err, LSE_ENOMEM, fn, "%zu x %zu path table", n, K);
    double *delta = malloc(n * K * sizeof *delta);
    size_t *psi = malloc(n * K * sizeof *psi);
    if (delta == NULL || psi == NULL) {
        free(delta);
        free(psi);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    size_t q = n_starts > 0 && starts[0] == 0 ? 1 : 0;
    for (size_t s0 = 0; s0 < n;) {
        const size_t s1 = q < n_starts ? starts[q++] : n;
        for (size_t k = 0; k < K; k++)
            delta[s0 * K + k] =
                gsl_vector_get(logp0, k) + gsl_matrix_get(logem, s0, k);
        for (size_t i = s0 + 1; i < s1; i++)
            for (size_t k = 0; k < K; k++) {
                size_t arg = 0;
                double best = -INFINITY;
                for (size_t j = 0; j < K; j++) {
                    const double v =
                        delta[(i - 1) * K + j] + gsl_matrix_get(logT, j, k);
                    if (v > best) {
                        best = v;
                        arg = j;
                    }
                }
                delta[i * K + k] = best + gsl_matrix_get(logem, i, k);
                psi[i * K + k] = arg;
            }
        size_t k = 0;
        for (size_t j = 1; j < K; j++)
            if (delta[(s1 - 1) * K + j] > delta[(s1 - 1) * K + k])
                k = j;
        path[s1 - 1] = k;
        for (size_t i = s1 - 1; i > s0; i--)
            path[i - 1] = psi[i * K + path[i]];
        s0 = s1;
    }
    free(delta);
    free(psi);
    return LSE_OK;
}

/* Stationary distribution of the irreducible chain on the states idx[0..m)
 * of P (their rows carry all their mass among them), by the GTH
 * elimination (Grassmann, Taksar and Heyman 1985): no subtraction, so
 * every entry keeps full relative precision. a (m * m) scratch; out (m). */
static void gth(const gsl_matrix *P, const size_t *idx, size_t m, double *a,
                double *out)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < m; j++)
            a[i * m + j] = gsl_matrix_get(P, idx[i], idx[j]);
    for (size_t l = m; l-- > 1;) {
        double s = 0.0;
        for (size_t j = 0; j < l; j++)
            s += a[l * m + j];
        for (size_t i = 0; i < l; i++)
            a[i * m + l] /= s;
        for (size_t i = 0; i < l; i++)
            for (size_t j = 0; j < l; j++)
                a[i * m + j] += a[i * m + l] * a[l * m + j];
    }
    double sum = out[0] = 1.0;
    for (size_t j = 1; j < m; j++) {
        double v = 0.0;
        for (size_t i = 0; i < j; i++)
            v += out[i] * a[i * m + j];
        out[j] = v;
        sum += v;
    }
    for (size_t j = 0; j < m; j++)
        out[j] /= sum;
}

/* pi (P - I) = 0 with the last equation replaced by sum pi = 1, by LU
 * with partial pivoting: 1 when it gave a distribution (finite, >= 0). */
static int stationary_lu(const gsl_matrix *P, gsl_vector *pi, gsl_matrix *a,
                         gsl_vector *rhs, gsl_permutation *perm)
{
    const size_t K = P->size1;
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++)
            gsl_matrix_set(a, i, j,
                           (i == K - 1) ? 1.0
                                        : gsl_matrix_get(P, j, i) -
                                              (i == j ? 1.0 : 0.0));
    gsl_vector_set_zero(rhs);
    gsl_vector_set(rhs, K - 1, 1.0);
    int sign = 0;
    if (gsl_linalg_LU_decomp(a, perm, &sign) != GSL_SUCCESS)
        return 0;
    for (size_t i = 0; i < K; i++)
        if (gsl_matrix_get(a, i, i) == 0.0)
            return 0;
    if (gsl_linalg_LU_solve(a, perm, rhs, pi) != GSL_SUCCESS)
        return 0;
    for (size_t i = 0; i < K; i++)
        if (!isfinite(gsl_vector_get(pi, i)) || gsl_vector_get(pi, i) < 0.0)
            return 0;
    return 1;
}

/* reach (K * K): reach[i K + j] = 1 when j can be reached from i in zero
 * or more steps with positive probability (Warshall). cls (K): the closed
 * class of each recurrent state (0-based), K for a transient state.
 * Returns the number of closed classes. */
static size_t closed_classes(const gsl_matrix *P, unsigned char *reach,
                             size_t *cls)
{
    const size_t K = P->size1;
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++)
            reach[i * K + j] = i == j || gsl_matrix_get(P, i, j) > 0.0;
    for (size_t l = 0; l < K; l++)
        for (size_t i = 0; i < K; i++)
            if (reach[i * K + l])
                for (size_t j = 0; j < K; j++)
                    reach[i * K + j] |= reach[l * K + j];
    size_t n_cls = 0;
    for (size_t i = 0; i < K; i++) {
        cls[i] = K;
        int closed = 1; /* i returns from everywhere it can go */
        for (size_t j = 0; j < K && closed; j++)
            closed = !reach[i * K + j] || reach[j * K + i];
        if (!closed)
            continue;
        for (size_t j = 0; j < i && cls[i] == K; j++)
            if (cls[j] < K && reach[i * K + j])
                cls[i] = cls[j];
        if (cls[i] == K)
            cls[i] = n_cls++;
    }
    return n_cls;
}

/* Several closed classes: pi = sum_c a_c pi_c, a_c the probability that
 * the chain started from p0 ends in class c, pi_c its stationary
 * distribution. h (n_tr x n_cls) solves (I - P_TT) h = P_TC 1 on the
 * transient states. */
static lse_status stationary_mixture(const gsl_matrix *P, const gsl_vector *p0,
                                     const size_t *cls, size_t n_cls,
                                     gsl_vector *pi, const char *fn,
                                     lse_error *err)
{
    const size_t K = P->size1;
    size_t *idx = calloc(K, sizeof *idx), *tr = malloc(K * sizeof *tr);
    double *a = malloc(K * K * sizeof *a), *w = malloc(K * sizeof *w);
    double *absorb = calloc(n_cls, sizeof *absorb);
    gsl_matrix *m = NULL, *h = NULL;
    gsl_permutation *perm = NULL;
    lse_status st = LSE_OK;
    size_t n_tr = 0;
    for (size_t i = 0; tr != NULL && i < K; i++)
        if (cls[i] == K)
            tr[n_tr++] = i;
    if (n_tr > 0) {
        m = gsl_matrix_alloc(n_tr, n_tr);
        h = gsl_matrix_calloc(n_tr, n_cls);
        perm = gsl_permutation_alloc(n_tr);
    }
    if (idx == NULL || tr == NULL || a == NULL || w == NULL || absorb == NULL ||
        (n_tr > 0 && (m == NULL || h == NULL || perm == NULL)))
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK && n_tr > 0) {
        for (size_t i = 0; i < n_tr; i++) {
            for (size_t j = 0; j < n_tr; j++)
                gsl_matrix_set(m, i, j,
                               (i == j) - gsl_matrix_get(P, tr[i], tr[j]));
            for (size_t j = 0; j < K; j++)
                if (cls[j] < K)
                    *gsl_matrix_ptr(h, i, cls[j]) +=
                        gsl_matrix_get(P, tr[i], j);
        }
        int sign = 0;
        if (gsl_linalg_LU_decomp(m, perm, &sign) != GSL_SUCCESS)
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "absorption probabilities: singular system");
        for (size_t c = 0; st == LSE_OK && c < n_cls; c++) {
            gsl_vector_view col = gsl_matrix_column(h, c);
            if (gsl_linalg_LU_svx(m, perm, &col.vector) != GSL_SUCCESS)
                st = lse_error_set(err, LSE_ENUMERIC, fn,
                                   "absorption probabilities: singular system");
        }
        for (size_t i = 0; st == LSE_OK && i < n_tr; i++)
            for (size_t c = 0; c < n_cls; c++)
                absorb[c] +=
                    gsl_vector_get(p0, tr[i]) * gsl_matrix_get(h, i, c);
    }
    for (size_t i = 0; st == LSE_OK && i < K; i++)
        if (cls[i] < K)
            absorb[cls[i]] += gsl_vector_get(p0, i);
    gsl_vector_set_zero(pi);
    for (size_t c = 0; st == LSE_OK && c < n_cls; c++) {
        size_t mc = 0;
        for (size_t i = 0; i < K; i++)
            if (cls[i] == c)
                idx[mc++] = i;
        gth(P, idx, mc, a, w);
        for (size_t i = 0; i < mc; i++)
            gsl_vector_set(pi, idx[i], absorb[c] * w[i]);
    }
    free(idx);
    free(tr);
    free(a);
    free(w);
    free(absorb);
    gsl_matrix_free(m);
    gsl_matrix_free(h);
    gsl_permutation_free(perm);
    return st;
}

/* Entries finite and >= 0 summing to 1 (LSE_CHAIN_SUM_TOL); what names
 * the vector in messages. */
static lse_status check_simplex(const double *p, size_t n, size_t stride,
                                const char *what, size_t row, const char *fn,
                                lse_error *err)
{
    double sum = 0.0;
    for (size_t j = 0; j < n; j++) {
        const double v = p[j * stride];
        if (!isfinite(v))
            return lse_error_set(err, LSE_ENONFINITE, fn,
                                 "%s %zu: entry %zu is %g", what, row, j, v);
        if (v < 0.0)
            return lse_error_set(err, LSE_EDOM, fn,
                                 "%s %zu: entry %zu is %g, need >= 0", what,
                                 row, j, v);
        sum += v;
    }
    if (!(fabs(sum - 1.0) <= LSE_CHAIN_SUM_TOL))
        return lse_error_set(err, LSE_EDOM, fn, "%s %zu sums to %.17g, not 1",
                             what, row, sum);
    return LSE_OK;
}

lse_status lse_chain_stationary(const gsl_matrix *P, const gsl_vector *p0,
                                gsl_vector *pi, size_t *n_closed,
                                lse_error *err)
{
    static const char fn[] = "lse_chain_stationary";
    if (P == NULL || pi == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t K = P->size1;
    if (K == 0 || P->size2 != K || pi->size != K ||
        (p0 != NULL && p0->size != K))
        return lse_error_set(err, LSE_EDIM, fn,
                             "P is %zu x %zu, pi has %zu entries%s: need "
                             "K x K and K >= 1",
                             P->size1, P->size2, pi->size,
                             p0 != NULL && p0->size != K ? ", p0 another size"
                                                         : "");
    lse_status st = LSE_OK;
    for (size_t i = 0; st == LSE_OK && i < K; i++)
        st = check_simplex(gsl_matrix_const_ptr(P, i, 0), K, 1, "row", i, fn,
                           err);
    if (st == LSE_OK && p0 != NULL)
        st = check_simplex(p0->data, K, p0->stride, "p0", 0, fn, err);
    if (st != LSE_OK)
        return st;
    unsigned char *reach = malloc(K * K);
    size_t *cls = malloc(K * sizeof *cls);
    gsl_matrix *a = gsl_matrix_alloc(K, K);
    gsl_vector *rhs = gsl_vector_alloc(K);
    gsl_permutation *perm = gsl_permutation_alloc(K);
    size_t *idx = malloc(K * sizeof *idx);
    double *w = malloc(K * sizeof *w);
    if (reach == NULL || cls == NULL || a == NULL || rhs == NULL ||
        perm == NULL || idx == NULL || w == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    const size_t n_cls = closed_classes(P, reach, cls);
    if (n_closed != NULL)
        *n_closed = n_cls;
    if (n_cls > 1 && p0 == NULL) {
        st = lse_error_set(err, LSE_EDOM, fn,
                           "the chain has %zu closed classes: its stationary "
                           "distribution is not unique (pass p0 for the "
                           "long-run average from it)",
                           n_cls);
        goto done;
    }
    if (n_cls > 1) {
        st = stationary_mixture(P, p0, cls, n_cls, pi, fn, err);
    } else if (!stationary_lu(P, pi, a, rhs, perm)) {
        /* singular or inaccurate elimination: GTH on the closed class,
         * zero on the transient states */
        size_t m = 0;
        for (size_t i = 0; i < K; i++)
            if (cls[i] == 0)
                idx[m++] = i;
        gth(P, idx, m, a->data, w);
        gsl_vector_set_zero(pi);
        for (size_t i = 0; i < m; i++)
            gsl_vector_set(pi, idx[i], w[i]);
    }
    if (st == LSE_OK) {
        double sum = 0.0;
        for (size_t i = 0; i < K; i++)
            sum += gsl_vector_get(pi, i);
        gsl_vector_scale(pi, 1.0 / sum);
    }
done:
    free(reach);
    free(cls);
    gsl_matrix_free(a);
    gsl_vector_free(rhs);
    gsl_permutation_free(perm);
    free(idx);
    free(w);
    return st;
}
