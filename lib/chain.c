#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"
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
    c->trans = gsl_matrix_alloc(K, K);
    c->logT = gsl_matrix_alloc(K, K);
    c->logp0 = gsl_vector_alloc(K);
    c->xi = gsl_matrix_calloc(K, K);
    c->post0 = gsl_matrix_calloc(1, K);
    c->tmp = malloc(K * sizeof *c->tmp);
    if (c->starts == NULL || c->alpha == NULL || c->beta == NULL ||
        c->em == NULL || c->scale == NULL || c->trans == NULL ||
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

lse_status lse_chain_eval(lse_term *t, int want_grad, double *energy)
{
    lse_chain *c = t->chain;
    const size_t K = c->K;
    double *tmp = c->tmp;
    const gsl_matrix *S = t->s, *u = t->chain_init->value,
                     *V = t->chain_trans->value;
    /* normalized log initial and transition probabilities */
    const double lz0 = lse_logsumexp(gsl_matrix_const_ptr(u, 0, 0), K, 1, 1.0);
    for (size_t k = 0; k < K; k++)
        gsl_vector_set(c->logp0, k, gsl_matrix_get(u, 0, k) - lz0);
    for (size_t j = 0; j < K; j++) {
        const double lz =
            lse_logsumexp(gsl_matrix_const_ptr(V, j, 0), K, 1, 1.0);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(c->logT, j, k, gsl_matrix_get(V, j, k) - lz);
    }
    gsl_matrix_set_zero(c->xi);
    gsl_matrix_set_zero(c->post0);
    /* Forward-backward in scaled probability space (Rabiner): emissions
     * e_t = exp(S_t - max_k S_tk), forward rows normalized to sum 1 by
     * c_t, log-likelihood sum_t (log c_t + max S_t). Every quantity stays
     * O(1), so posteriors keep full precision over long sequences, and a
     * step costs K exponentials instead of 3 K^2 + K (and 2K logs). */
    double *p0 = tmp; /* K */
    double total = 0.0;
    const size_t ta = c->alpha->tda, ts = S->tda;
    double *al = c->alpha->data, *be = c->beta->data, *em = c->em->data;
    double *tr = c->trans->data;
    const size_t tt = c->trans->tda;
    for (size_t j = 0; j < K; j++)
        for (size_t k = 0; k < K; k++)
            tr[j * tt + k] = exp(gsl_matrix_get(c->logT, j, k));
    double *xi = c->xi->data, *post = t->a->data;
    const size_t tx = c->xi->tda, tp = t->a->tda;
    for (size_t k = 0; k < K; k++)
        p0[k] = exp(gsl_vector_get(c->logp0, k));
    for (size_t q = 0; q < c->n_seq; q++) {
        const size_t s0 = c->starts[q], s1 = c->starts[q + 1];
        double ll = 0.0;
        for (size_t i = s0; i < s1; i++) {
            const double *si = S->data + i * ts;
            double m = -INFINITY;
            for (size_t k = 0; k < K; k++)
                m = si[k] > m ? si[k] : m;
            double *ei = em + i * ta, *ai = al + i * ta;
            for (size_t k = 0; k < K; k++)
                ei[k] = exp(si[k] - m);
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
            gsl_vector_set(c->scale, i, sum);
            const double inv = 1.0 / sum;
            for (size_t k = 0; k < K; k++)
                ai[k] *= inv;
            ll += log(sum) + m;
        }
        if (!isfinite(ll))
            return lse_graph_fail(t->graph, LSE_ENONFINITE, "lse_graph_energy",
                                  "term '%s': chain log-likelihood of sequence "
                                  "%zu is %g",
                                  t->name, q, ll);
        total += ll;
        /* backward, posteriors, expected transitions */
        double *bl = be + (s1 - 1) * ta;
        for (size_t k = 0; k < K; k++)
            bl[k] = 1.0;
        for (size_t i = s1 - 1; i > s0; i--) {
            const double *ei = em + i * ta, *bi = be + i * ta;
            const double *ap = al + (i - 1) * ta;
            double *bp = be + (i - 1) * ta;
            const double inv = 1.0 / gsl_vector_get(c->scale, i);
            for (size_t j = 0; j < K; j++) {
                double v = 0.0;
                for (size_t k = 0; k < K; k++) {
                    const double w = tr[j * tt + k] * ei[k] * bi[k] * inv;
                    v += w;
                    xi[j * tx + k] += ap[j] * w;
                }
                bp[j] = v;
            }
        }
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
        for (size_t k = 0; k < K; k++)
            *gsl_matrix_ptr(c->post0, 0, k) += post[s0 * tp + k];
    }
    *energy = -total;
    if (want_grad) {
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
    return LSE_OK;
}
