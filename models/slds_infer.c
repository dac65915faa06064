#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include <lsegraph/lsegraph.h>

#include "slds-private.h"

/* Inference on a fitted SLDS through its public API only: filtered mode
 * probabilities (the forward pass of the chain) and standard errors from
 * the numerical Hessian of the exact log-likelihood, the two quantities
 * statsmodels' MarkovRegression reports beside the smoothed marginals. */

static double log_sum_exp(const double *a, size_t n)
{
    double mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        mx = a[i] > mx ? a[i] : mx;
    if (!isfinite(mx))
        return mx;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += exp(a[i] - mx);
    return mx + log(s);
}

static void clear(lse_error *err)
{
    if (err != NULL) {
        err->status = LSE_OK;
        err->message[0] = '\0';
    }
}

lse_status lse_slds_filtered(const lse_slds *m, const gsl_matrix *x,
                             const size_t *seq, gsl_matrix *filt,
                             lse_error *err)
{
    static const char fn[] = "lse_slds_filtered";
    gsl_set_error_handler_off();
    clear(err);
    if (m == NULL || x == NULL || filt == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (!lse_slds_is_markov(m)) /* independent modes: filtered = smoothed */
        return lse_slds_posteriors(m, x, seq, filt, err);
    if (lse_slds_obs_var(m) > 0)
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "filtered probabilities need observed states "
                             "(the model has latent states)");
    size_t n = 0;
    lse_status st = lse_slds_steps(m, x->size1, seq, NULL, &n, err);
    if (st != LSE_OK)
        return st;
    const size_t K = lse_slds_n_modes(m);
    if (filt->size1 != n || filt->size2 != K)
        return lse_error_set(err, LSE_EDIM, fn,
                             "filtered probabilities are %zux%zu, expected "
                             "n_steps x K = %zux%zu",
                             filt->size1, filt->size2, n, K);
    size_t *rows = malloc(n * sizeof *rows);
    gsl_matrix *P = gsl_matrix_alloc(K, K);
    gsl_vector *p0 = gsl_vector_alloc(K);
    double *prev = malloc(2 * K * sizeof *prev), *cur = prev + K;
    double *tmp = malloc(K * sizeof *tmp);
    lse_graph *g = NULL;
    if (rows == NULL || P == NULL || p0 == NULL || prev == NULL ||
        tmp == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    if ((st = lse_slds_steps(m, x->size1, seq, rows, &n, err)) != LSE_OK ||
        (st = lse_slds_get_transition(m, P)) != LSE_OK ||
        (st = lse_slds_get_initial(m, p0)) != LSE_OK ||
        (st = lse_slds_graph_new(m, x, seq, &g, err)) != LSE_OK)
        goto done;
    double e;
    if ((st = lse_graph_energy(g, &e)) != LSE_OK) {
        lse_error_set(err, st, fn, "%s", lse_graph_errmsg(g));
        goto done;
    }
    const lse_term *chain = NULL;
    for (size_t i = 0; i < lse_graph_n_terms(g); i++)
        if (lse_term_reduce(lse_graph_term(g, i)) == LSE_REDUCE_CHAIN)
            chain = lse_graph_term(g, i);
    const gsl_matrix *S = chain != NULL ? lse_term_similarity(chain) : NULL;
    if (S == NULL || S->size1 != n || S->size2 != K) {
        st = lse_error_set(err, LSE_EINVAL, fn,
                           "the model's graph has no chain term of n_steps "
                           "x K emissions");
        goto done;
    }
    /* forward pass in log space: a_t(k) = S_tk + log sum_j exp(a_t-1(j)
     * + log P_jk), normalized every step; a new sequence (a gap in the
     * step rows or a new id) restarts from p0 */
    for (size_t t = 0; t < n; t++) {
        const int start =
            t == 0 || rows[t] != rows[t - 1] + 1 ||
            (seq != NULL && seq[rows[t]] != seq[rows[t - 1]]);
        for (size_t k = 0; k < K; k++) {
            if (start)
                cur[k] = log(gsl_vector_get(p0, k));
            else {
                for (size_t j = 0; j < K; j++)
                    tmp[j] = prev[j] + log(gsl_matrix_get(P, j, k));
                cur[k] = log_sum_exp(tmp, K);
            }
            cur[k] += gsl_matrix_get(S, t, k);
        }
        const double c = log_sum_exp(cur, K);
        if (!isfinite(c)) {
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "step %zu has probability 0 under every mode",
                               t);
            goto done;
        }
        for (size_t k = 0; k < K; k++) {
            prev[k] = cur[k] - c;
            gsl_matrix_set(filt, t, k, exp(prev[k]));
        }
    }
done:
    lse_graph_free(g);
    free(rows);
    free(prev);
    free(tmp);
    gsl_matrix_free(P);
    gsl_vector_free(p0);
    return st;
}

/* ------------------------------------------------------------------ */
/* Standard errors                                                     */

size_t lse_slds_n_stderr(const lse_slds *m)
{
    if (m == NULL || lse_slds_dim(m) != 1)
        return 0;
    const size_t K = lse_slds_n_modes(m), L = lse_slds_lags(m);
    const size_t probs = lse_slds_is_markov(m) ? K * (K - 1) : K - 1;
    const size_t vars = lse_slds_cov_type(m) == LSE_COV_TIED ? 1 : K;
    const size_t ki = m->shared & LSE_SLDS_SHARE_INTERCEPT ? 1 : K,
                 ka = m->shared & LSE_SLDS_SHARE_AR ? 1 : K,
                 ke = m->shared & LSE_SLDS_SHARE_EXOG ? 1 : K;
    return probs + ki + ka * L + ke * m->p + vars;
}

/* Coefficient c of mode k of a univariate model: c = 0 the intercept
 * b_k, 1..L the lags, then the regressors. */
static double *coef_ptr(lse_slds *m, size_t k, size_t c)
{
    return c == 0 ? gsl_matrix_ptr(m->b, k, 0) : gsl_matrix_ptr(m->a, k, c - 1);
}
static double coef(const lse_slds *m, size_t k, size_t c)
{
    return c == 0 ? gsl_matrix_get(m->b, k, 0) : gsl_matrix_get(m->a, k, c - 1);
}
static int coef_shared(const lse_slds *m, size_t c)
{
    const unsigned f = c == 0        ? LSE_SLDS_SHARE_INTERCEPT
                       : c <= m->L ? LSE_SLDS_SHARE_AR
                                   : LSE_SLDS_SHARE_EXOG;
    return (m->shared & f) != 0u;
}
/* statsmodels' names: const, ar.L<l> (its exog column x<l> when the lags
 * are the regressors), exog<j>; "[k]" when the part switches. */
static void coef_name(const lse_slds *m, size_t c, const size_t *k,
                      char *out)
{
    char base[24];
    if (c == 0)
        snprintf(base, sizeof base, "const");
    else if (c <= m->L)
        snprintf(base, sizeof base, "ar.L%u", (unsigned)(c % 100000));
    else
        snprintf(base, sizeof base, "exog%u", (unsigned)((c - m->L) % 100000));
    if (k != NULL)
        snprintf(out, 32, "%s[%u]", base, (unsigned)(*k % 1000));
    else
        snprintf(out, 32, "%s", base);
}

/* The parameter vector: see lse_slds_stderr. */
static lse_status get_theta(const lse_slds *m, gsl_vector *th,
                            char (*names)[32])
{
    const size_t K = lse_slds_n_modes(m), L = lse_slds_lags(m);
    const int markov = lse_slds_is_markov(m);
    gsl_matrix *P = gsl_matrix_alloc(K, K), *A = gsl_matrix_alloc(1, L),
               *C = gsl_matrix_alloc(1, 1);
    gsl_vector *w = gsl_vector_alloc(K), *b = gsl_vector_alloc(1);
    lse_status st = LSE_OK;
    size_t i = 0;
    if (P == NULL || A == NULL || C == NULL || w == NULL || b == NULL) {
        st = LSE_ENOMEM;
        goto done;
    }
    if (markov) {
        lse_slds_get_transition(m, P);
        for (size_t j = 0; j + 1 < K; j++)
            for (size_t s = 0; s < K; s++, i++) {
                gsl_vector_set(th, i, gsl_matrix_get(P, s, j));
                if (names != NULL)
                    snprintf(names[i], 32, "p[%u->%u]", (unsigned)(s % 1000), (unsigned)(j % 1000));
            }
    } else {
        lse_slds_get_weights(m, w);
        for (size_t k = 0; k + 1 < K; k++, i++) {
            gsl_vector_set(th, i, gsl_vector_get(w, k));
            if (names != NULL)
                snprintf(names[i], 32, "pi[%u]", (unsigned)(k % 1000));
        }
    }
    for (size_t c = 0; c < 1 + L + m->p; c++) {
        const size_t nk = coef_shared(m, c) ? 1 : K;
        for (size_t k = 0; k < nk; k++, i++) {
            gsl_vector_set(th, i, coef(m, k, c));
            if (names != NULL)
                coef_name(m, c, nk == 1 ? NULL : &k, names[i]);
        }
    }
    const size_t vars = lse_slds_cov_type(m) == LSE_COV_TIED ? 1 : K;
    for (size_t k = 0; k < vars; k++, i++) {
        lse_slds_get_cov(m, k, C);
        gsl_vector_set(th, i, gsl_matrix_get(C, 0, 0));
        if (names != NULL) {
            if (vars == 1)
                snprintf(names[i], 32, "sigma2");
            else
                snprintf(names[i], 32, "sigma2[%u]", (unsigned)(k % 1000));
        }
    }
done:
    gsl_matrix_free(P);
    gsl_matrix_free(A);
    gsl_matrix_free(C);
    gsl_vector_free(w);
    gsl_vector_free(b);
    return st;
}

/* Set @p m's parameters from @p th (get_theta's order); LSE_EDOM when a
 * probability row leaves (0, 1) or a variance is not positive. */
static lse_status set_theta(lse_slds *m, const gsl_vector *th)
{
    const size_t K = lse_slds_n_modes(m), L = lse_slds_lags(m);
    gsl_matrix *P = gsl_matrix_alloc(K, K), *A = gsl_matrix_alloc(1, L),
               *C = gsl_matrix_alloc(1, 1);
    gsl_vector *w = gsl_vector_alloc(K), *b = gsl_vector_alloc(1);
    lse_status st = LSE_OK;
    size_t i = 0;
    if (P == NULL || A == NULL || C == NULL || w == NULL || b == NULL) {
        st = LSE_ENOMEM;
        goto done;
    }
    if (lse_slds_is_markov(m)) {
        for (size_t s = 0; s < K; s++)
            gsl_matrix_set(P, s, K - 1, 1.0);
        for (size_t j = 0; j + 1 < K; j++)
            for (size_t s = 0; s < K; s++, i++) {
                const double p = gsl_vector_get(th, i);
                gsl_matrix_set(P, s, j, p);
                *gsl_matrix_ptr(P, s, K - 1) -= p;
            }
        for (size_t s = 0; s < K && st == LSE_OK; s++)
            for (size_t j = 0; j < K; j++)
                if (!(gsl_matrix_get(P, s, j) > 0))
                    st = LSE_EDOM;
        if (st == LSE_OK)
            st = lse_slds_set_transition(m, P, NULL);
    } else {
        gsl_vector_set(w, K - 1, 1.0);
        for (size_t k = 0; k + 1 < K; k++, i++) {
            gsl_vector_set(w, k, gsl_vector_get(th, i));
            *gsl_vector_ptr(w, K - 1) -= gsl_vector_get(th, i);
        }
        for (size_t k = 0; k < K && st == LSE_OK; k++)
            if (!(gsl_vector_get(w, k) > 0))
                st = LSE_EDOM;
        if (st == LSE_OK)
            st = lse_slds_set_weights(m, w, NULL);
    }
    for (size_t c = 0; c < 1 + L + m->p && st == LSE_OK; c++) {
        const size_t nk = coef_shared(m, c) ? 1 : K;
        for (size_t k = 0; k < K; k++)
            *coef_ptr(m, k, c) = gsl_vector_get(th, i + (nk == 1 ? 0 : k));
        i += nk;
    }
    const size_t vars = lse_slds_cov_type(m) == LSE_COV_TIED ? 1 : K;
    for (size_t k = 0; k < vars && st == LSE_OK; k++, i++) {
        gsl_matrix_set(C, 0, 0, gsl_vector_get(th, i));
        st = gsl_vector_get(th, i) > 0 ? lse_slds_set_cov(m, k, C, NULL)
                                       : LSE_EDOM;
    }
done:
    gsl_matrix_free(P);
    gsl_matrix_free(A);
    gsl_matrix_free(C);
    gsl_vector_free(w);
    gsl_vector_free(b);
    return st;
}

/* A copy of @p m's configuration and parameters. */
static lse_status copy_model(const lse_slds *m, lse_slds **out,
                             lse_error *err)
{
    const lse_slds_config cfg = {.n_modes = lse_slds_n_modes(m),
                                 .dim = lse_slds_dim(m),
                                 .lags = lse_slds_lags(m),
                                 .markov = lse_slds_is_markov(m),
                                 .cov = lse_slds_cov_type(m),
                                 .n_exog = lse_slds_n_exog(m),
                                 .shared = lse_slds_shared(m)};
    lse_status st = lse_slds_new(&cfg, out, err);
    if (st != LSE_OK)
        return st;
    const size_t K = cfg.n_modes;
    gsl_vector *p0 = gsl_vector_alloc(K);
    if (p0 == NULL) {
        lse_slds_free(*out);
        *out = NULL;
        return lse_error_set(err, LSE_ENOMEM, "lse_slds_stderr",
                             "out of memory");
    }
    if (cfg.markov) {
        lse_slds_get_initial(m, p0);
        st = lse_slds_set_initial(*out, p0, err);
    }
    gsl_vector_free(p0);
    return st;
}

lse_status lse_slds_stderr(const lse_slds *m, const gsl_matrix *x,
                           const size_t *seq, gsl_vector *est, gsl_vector *se,
                           char (*names)[32], lse_error *err)
{
    static const char fn[] = "lse_slds_stderr";
    gsl_set_error_handler_off();
    clear(err);
    if (m == NULL || x == NULL || est == NULL || se == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (lse_slds_dim(m) != 1 || lse_slds_obs_var(m) > 0)
        return lse_error_set(err, LSE_ENOTSUP, fn,
                             "standard errors are computed for univariate "
                             "series (d = 1) with observed states, not d = "
                             "%zu%s",
                             lse_slds_dim(m),
                             lse_slds_obs_var(m) > 0 ? ", latent states" : "");
    const size_t n = lse_slds_n_stderr(m);
    if (est->size != n || se->size != n)
        return lse_error_set(err, LSE_EDIM, fn,
                             "est and se have %zu and %zu entries, expected "
                             "%zu (lse_slds_n_stderr)",
                             est->size, se->size, n);
    lse_slds *c = NULL;
    lse_status st = copy_model(m, &c, err);
    if (st != LSE_OK)
        return st;
    gsl_vector *th = gsl_vector_alloc(n), *h = gsl_vector_alloc(n);
    gsl_matrix *H = gsl_matrix_alloc(n, n);
    if (th == NULL || h == NULL || H == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    if ((st = get_theta(m, th, names)) != LSE_OK) {
        lse_error_set(err, st, fn, "out of memory");
        goto done;
    }
    gsl_vector_memcpy(est, th);
    /* steps: 1e-4 of the parameter's size (at least 1e-5), within the
     * probability simplex; O(h^2) truncation, roundoff |f| 1e-16 / h^2 */
    for (size_t i = 0; i < n; i++) {
        double s = 1e-4 * fmax(fabs(gsl_vector_get(th, i)), 0.1);
        const double v = gsl_vector_get(th, i);
        if (v < 1.0 && s > 0.25 * v)
            s = 0.25 * v;
        gsl_vector_set(h, i, s);
    }
    double f0 = 0;
#define LOGLIK(out)                                                            \
    do {                                                                       \
        if ((st = set_theta(c, th)) != LSE_OK) {                               \
            lse_error_set(err, st, fn,                                         \
                          "a parameter is too close to its bound for "         \
                          "finite differences");                               \
            goto done;                                                         \
        }                                                                      \
        if ((st = lse_slds_score(c, x, seq, &(out), err)) != LSE_OK)           \
            goto done;                                                         \
    } while (0)
    LOGLIK(f0);
    for (size_t i = 0; i < n; i++) {
        const double ti = gsl_vector_get(th, i), hi = gsl_vector_get(h, i);
        double fp, fm;
        gsl_vector_set(th, i, ti + hi);
        LOGLIK(fp);
        gsl_vector_set(th, i, ti - hi);
        LOGLIK(fm);
        gsl_vector_set(th, i, ti);
        gsl_matrix_set(H, i, i, (fp - 2 * f0 + fm) / (hi * hi));
        for (size_t j = 0; j < i; j++) {
            const double tj = gsl_vector_get(th, j), hj = gsl_vector_get(h, j);
            double f[4];
            for (int q = 0; q < 4; q++) {
                gsl_vector_set(th, i, ti + (q & 1 ? -hi : hi));
                gsl_vector_set(th, j, tj + (q & 2 ? -hj : hj));
                LOGLIK(f[q]);
            }
            gsl_vector_set(th, i, ti);
            gsl_vector_set(th, j, tj);
            const double hij = (f[0] - f[1] - f[2] + f[3]) / (4 * hi * hj);
            gsl_matrix_set(H, i, j, hij);
            gsl_matrix_set(H, j, i, hij);
        }
    }
#undef LOGLIK
    /* covariance = (-H)^-1: Cholesky of -H, which must be positive
     * definite at a maximum */
    gsl_matrix_scale(H, -1.0);
    if (gsl_linalg_cholesky_decomp1(H) != GSL_SUCCESS ||
        gsl_linalg_cholesky_invert(H) != GSL_SUCCESS) {
        st = lse_error_set(err, LSE_ENUMERIC, fn,
                           "the negative Hessian of the log-likelihood is "
                           "not positive definite (not at a maximum: refit "
                           "to convergence)");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(se, i, sqrt(gsl_matrix_get(H, i, i)));
done:
    lse_slds_free(c);
    gsl_vector_free(th);
    gsl_vector_free(h);
    gsl_matrix_free(H);
    return st;
}
