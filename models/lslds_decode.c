/* Decoding a mode path from the smoothed marginals of q(z): the maximum-
 * expected-accuracy path (include/lsegraph/models/lslds_decode.h;
 * docs/models/slds.md, "Versus ssm"). */
#include <math.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

/* LSE_OK when every entry of the n x m array with row stride tda is
 * finite and >= 0. */
static int nonneg_finite(const double *a, size_t n, size_t m, size_t tda)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            if (!isfinite(a[i * tda + j]) || a[i * tda + j] < 0.0)
                return 0;
    return 1;
}

lse_status lse_chain_mea_path(const gsl_matrix *w, const gsl_vector *p0,
                              const gsl_matrix *P, const size_t *starts,
                              size_t n_starts, size_t *path, lse_error *err)
{
    static const char fn[] = "lse_chain_mea_path";
    if (w == NULL || p0 == NULL || P == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t n = w->size1, K = w->size2;
    if (p0->size != K || P->size1 != K || P->size2 != K)
        return lse_error_set(err, LSE_EDIM, fn,
                             "marginals (%zu, %zu), initial %zu, transitions "
                             "(%zu, %zu): expected K = %zu everywhere",
                             n, K, p0->size, P->size1, P->size2, K);
    if (!nonneg_finite(w->data, n, K, w->tda) ||
        !nonneg_finite(P->data, K, K, P->tda))
        return lse_error_set(err, LSE_EINVAL, fn,
                             "marginals and transition probabilities must "
                             "be finite and >= 0");
    for (size_t k = 0; k < K; k++)
        if (!isfinite(gsl_vector_get(p0, k)) || gsl_vector_get(p0, k) < 0.0)
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "initial probabilities must be finite and "
                                 ">= 0");
    gsl_vector *lp0 = gsl_vector_alloc(K);
    gsl_matrix *lT = gsl_matrix_alloc(K, K);
    if (lp0 == NULL || lT == NULL) {
        gsl_vector_free(lp0);
        gsl_matrix_free(lT);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    /* the allowed moves cost nothing, the forbidden ones -infinity: the
     * Viterbi pass over w maximizes sum_t w(t, k_t) over allowed paths */
    for (size_t j = 0; j < K; j++) {
        gsl_vector_set(lp0, j, gsl_vector_get(p0, j) > 0.0 ? 0.0 : -INFINITY);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(lT, j, k,
                           gsl_matrix_get(P, j, k) > 0.0 ? 0.0 : -INFINITY);
    }
    lse_status st = lse_chain_viterbi(w, lp0, lT, starts, n_starts, path, err);
    /* Viterbi returns an allowed path whenever one exists */
    size_t q = n_starts > 0 && starts[0] == 0 ? 1 : 0;
    for (size_t t = 0; st == LSE_OK && t < n; t++) {
        const int start = t == 0 || (q < n_starts && starts[q] == t);
        if (start && t > 0)
            q++;
        if (start ? gsl_vector_get(lp0, path[t]) < 0.0
                  : gsl_matrix_get(lT, path[t - 1], path[t]) < 0.0)
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "no path of nonzero probability (row %zu)",
                               t + 1);
    }
    gsl_vector_free(lp0);
    gsl_matrix_free(lT);
    return st;
}

/* The mixture: per row the most probable mode among those of nonzero
 * weight (ties to the lowest). */
static lse_status mixture_path(const lse_lslds_params *p,
                               const lse_lslds_post *q, size_t *path,
                               lse_error *err)
{
    size_t first = p->K;
    for (size_t k = p->K; k-- > 0;)
        if (gsl_vector_get(p->init, k) > 0.0)
            first = k;
    if (first == p->K)
        return lse_error_set(err, LSE_EINVAL, "lse_lslds_mea_path",
                             "no mode of nonzero weight");
    for (size_t t = 0; t < q->T; t++) {
        size_t best = first;
        for (size_t k = first + 1; k < p->K; k++)
            if (gsl_vector_get(p->init, k) > 0.0 &&
                gsl_matrix_get(q->w, t, k) > gsl_matrix_get(q->w, t, best))
                best = k;
        path[t] = best;
    }
    return LSE_OK;
}

lse_status lse_lslds_mea_path(const lse_lslds_params *p, const size_t *seq,
                              const lse_lslds_post *q, size_t *path,
                              lse_error *err)
{
    static const char fn[] = "lse_lslds_mea_path";
    if (p == NULL || q == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (q->K != p->K)
        return lse_error_set(err, LSE_EDIM, fn, "q has %zu modes, the model %zu",
                             q->K, p->K);
    if (!q->have_z)
        return lse_error_set(err, LSE_EINVAL, fn, "q(z) has not been computed");
    if (!p->markov)
        return mixture_path(p, q, path, err);
    const size_t T = q->T;
    size_t *starts = T > 0 ? malloc(T * sizeof *starts) : NULL, n_starts = 0;
    if (T > 0 && starts == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t t = 1; seq != NULL && t < T; t++)
        if (seq[t] != seq[t - 1])
            starts[n_starts++] = t;
    const lse_status st =
        lse_chain_mea_path(q->w, p->init, p->trans, starts, n_starts, path, err);
    free(starts);
    return st;
}
