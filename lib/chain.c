#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"

/* Chain reduction of an LSE term: a hidden Markov chain over the child rows
 * with emission log-weights S (n, K), initial logits u (1, K) and transition
 * logits V (K, K) (row-softmax). Forward-backward in log space:
 *   E = -sum_seq log sum_paths exp(log p0(k_s) + S_s,k_s
 *                                  + sum_t [log T(k_t-1, k_t) + S_t,k_t])
 *   dE/dS_tk = -gamma_t(k)                 (posterior marginals)
 *   dE/du_k  = -(sum_seq gamma_s(k) - n_seq p0(k))
 *   dE/dV_jk = -(xi_jk - (sum_k' xi_jk') T_jk)   (xi: expected counts)
 * docs/chain.md derives it. */

struct lse_chain {
    size_t n, K;
    size_t *starts; /* n_seq + 1 entries, starts[n_seq] = n */
    size_t n_seq;
    gsl_matrix *alpha;  /* (n, K) log forward */
    gsl_matrix *beta;   /* (n, K) log backward */
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
    c->starts = malloc((n_starts + 2) * sizeof *c->starts);
    c->alpha = gsl_matrix_alloc(n, K);
    c->beta = gsl_matrix_alloc(n, K);
    c->logT = gsl_matrix_alloc(K, K);
    c->logp0 = gsl_vector_alloc(K);
    c->xi = gsl_matrix_calloc(K, K);
    c->post0 = gsl_matrix_calloc(1, K);
    c->tmp = malloc(K * sizeof *c->tmp);
    if (c->starts == NULL || c->alpha == NULL || c->beta == NULL ||
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
    double total = 0.0;
    for (size_t q = 0; q < c->n_seq; q++) {
        const size_t s0 = c->starts[q], s1 = c->starts[q + 1];
        /* forward */
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(c->alpha, s0, k,
                           gsl_vector_get(c->logp0, k) + gsl_matrix_get(S, s0, k));
        for (size_t i = s0 + 1; i < s1; i++) {
            for (size_t k = 0; k < K; k++) {
                for (size_t j = 0; j < K; j++)
                    tmp[j] = gsl_matrix_get(c->alpha, i - 1, j) +
                             gsl_matrix_get(c->logT, j, k);
                gsl_matrix_set(c->alpha, i, k,
                               gsl_matrix_get(S, i, k) +
                                   lse_logsumexp(tmp, K, 1, 1.0));
            }
        }
        const double ll =
            lse_logsumexp(gsl_matrix_const_ptr(c->alpha, s1 - 1, 0), K, 1, 1.0);
        if (!isfinite(ll))
            return lse_graph_fail(t->graph, LSE_ENONFINITE, "lse_graph_energy",
                                  "term '%s': chain log-likelihood of sequence "
                                  "%zu is %g",
                                  t->name, q, ll);
        total += ll;
        /* backward */
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(c->beta, s1 - 1, k, 0.0);
        for (size_t i = s1 - 1; i > s0; i--) {
            for (size_t j = 0; j < K; j++) {
                for (size_t k = 0; k < K; k++)
                    tmp[k] = gsl_matrix_get(c->logT, j, k) +
                             gsl_matrix_get(S, i, k) +
                             gsl_matrix_get(c->beta, i, k);
                gsl_matrix_set(c->beta, i - 1, j, lse_logsumexp(tmp, K, 1, 1.0));
            }
        }
        /* posteriors and expected transitions */
        for (size_t i = s0; i < s1; i++) {
            double rs = 0.0;
            for (size_t k = 0; k < K; k++) {
                const double v = exp(gsl_matrix_get(c->alpha, i, k) +
                                     gsl_matrix_get(c->beta, i, k) - ll);
                gsl_matrix_set(t->a, i, k, v);
                rs += v;
            }
            /* equal to 1 up to round-off: make it exact */
            for (size_t k = 0; k < K; k++)
                *gsl_matrix_ptr(t->a, i, k) /= rs;
            if (i == s0)
                continue;
            for (size_t j = 0; j < K; j++) {
                const double aj = gsl_matrix_get(c->alpha, i - 1, j) - ll;
                for (size_t k = 0; k < K; k++) {
                    const double v =
                        exp(aj + gsl_matrix_get(c->logT, j, k) +
                            gsl_matrix_get(S, i, k) + gsl_matrix_get(c->beta, i, k));
                    *gsl_matrix_ptr(c->xi, 0 + j, k) += v;
                }
            }
        }
        for (size_t k = 0; k < K; k++)
            *gsl_matrix_ptr(c->post0, 0, k) += gsl_matrix_get(t->a, s0, k);
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
