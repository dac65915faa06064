#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include <lsegraph/lsegraph.h>

/* Latent SLDS model files (JSON; schema in docs/models/slds.md, "Model
 * files of the latent model"). */

#define MAX_COUNT 4096   /* largest n_modes / latent_dim a file may give */
#define MAX_FEATURES 65536
#define SIMPLEX_TOL 1e-6 /* probabilities in a file sum to 1 within this */

lse_status lse_lslds_to_json(const lse_lslds_params *p,
                             const char *const *names, lse_json *doc,
                             lse_error *err)
{
    static const char fn[] = "lse_lslds_to_json";
    if (p == NULL || names == NULL || doc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t K = p->K, D = p->D, N = p->N, P = p->lags * D;
    gsl_matrix *a = gsl_matrix_alloc(K * D, P), *q = gsl_matrix_alloc(K * D, D);
    if (a == NULL || q == NULL) {
        gsl_matrix_free(a);
        gsl_matrix_free(q);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i < D; i++) {
            for (size_t j = 0; j < P; j++)
                gsl_matrix_set(a, k * D + i, j,
                               gsl_matrix_get(p->A, k, i * P + j));
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(q, k * D + i, j,
                               gsl_matrix_get(p->Q, k, i * D + j));
        }
    lse_status st = lse_json_set_string(doc, "model", "slds-latent", err);
    if (st == LSE_OK)
        st = lse_json_set_bool(doc, "markov", p->markov, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_modes", (long long)K, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "latent_dim", (long long)D, err);
    if (st == LSE_OK && p->lags > 1) /* without the key: one lag */
        st = lse_json_set_integer(doc, "lags", (long long)p->lags, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_features", (long long)N, err);
    if (st == LSE_OK)
        st = lse_json_set_strings(doc, "feature_names", names, N, err);
    if (st == LSE_OK)
        st = lse_json_set_stack(doc, "A", a, K, err);
    if (st == LSE_OK)
        st = lse_json_set_matrix(doc, "b", p->b, err);
    if (st == LSE_OK)
        st = lse_json_set_stack(doc, "Q", q, K, err);
    if (st == LSE_OK && !p->per_mode_emission) {
        st = lse_json_set_matrix(doc, "C", p->C, err);
        if (st == LSE_OK)
            st = lse_json_set_vector(doc, "d", p->d, err);
        if (st == LSE_OK)
            st = lse_json_set_vector(doc, "R_diag", p->r, err);
    } else if (st == LSE_OK) { /* per mode: C [K][N][D], d and R_diag [K][N] */
        gsl_matrix_const_view dv =
            gsl_matrix_const_view_vector(p->d, K, N);
        gsl_matrix_const_view rv =
            gsl_matrix_const_view_vector(p->r, K, N);
        st = lse_json_set_string(doc, "emission", "per-mode", err);
        if (st == LSE_OK)
            st = lse_json_set_stack(doc, "C", p->C, K, err);
        if (st == LSE_OK)
            st = lse_json_set_matrix(doc, "d", &dv.matrix, err);
        if (st == LSE_OK)
            st = lse_json_set_matrix(doc, "R_diag", &rv.matrix, err);
    }
    if (st == LSE_OK)
        st = lse_json_set_vector(doc, "initial_mean", p->m0, err);
    if (st == LSE_OK)
        st = lse_json_set_matrix(doc, "initial_cov", p->P0, err);
    if (st == LSE_OK)
        st = lse_json_set_vector(doc, p->markov ? "initial" : "weights",
                                 p->init, err);
    if (st == LSE_OK && p->markov)
        st = lse_json_set_matrix(doc, "transition", p->trans, err);
    gsl_matrix_free(a);
    gsl_matrix_free(q);
    return st;
}

static lse_status get_count(const lse_json *doc, const char *src,
                            const char *key, size_t max, size_t *out,
                            lse_error *err)
{
    long long v;
    lse_status st = lse_json_get_integer(doc, key, &v, err);
    if (st != LSE_OK)
        return st;
    if (v < 1 || (unsigned long long)v > max)
        return lse_error_set(err, LSE_EDOM, "lse_lslds_from_json",
                             "%s: key '%s' is %lld, want 1..%zu", src, key, v,
                             max);
    *out = (size_t)v;
    return LSE_OK;
}

/* entries >= 0 summing to 1 within SIMPLEX_TOL, then renormalized */
static lse_status simplex(double *x, size_t n, size_t stride, const char *src,
                          const char *key, size_t row, lse_error *err)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i * stride] >= 0.0))
            return lse_error_set(err, LSE_EDOM, "lse_lslds_from_json",
                                 "%s: key '%s' row %zu has a negative entry",
                                 src, key, row + 1);
        s += x[i * stride];
    }
    if (fabs(s - 1.0) > SIMPLEX_TOL)
        return lse_error_set(err, LSE_EDOM, "lse_lslds_from_json",
                             "%s: key '%s' row %zu sums to %.9g, not 1", src,
                             key, row + 1, s);
    for (size_t i = 0; i < n; i++)
        x[i * stride] /= s;
    return LSE_OK;
}

static int spd(const gsl_matrix *a, gsl_matrix *work)
{
    gsl_matrix_memcpy(work, a);
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < i; j++)
            if (fabs(gsl_matrix_get(a, i, j) - gsl_matrix_get(a, j, i)) >
                1e-12 * (fabs(gsl_matrix_get(a, i, j)) + 1e-300))
                return 0;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    const int st = gsl_linalg_cholesky_decomp1(work);
    gsl_set_error_handler(old);
    return st == GSL_SUCCESS;
}

/* "emission": "shared" (*pm = 0) or "per-mode" (*pm = 1). */
static lse_status read_emission_kind(const lse_json *doc, const char *src,
                                     int *pm, lse_error *err)
{
    static const char fn[] = "lse_lslds_from_json";
    const char *em;
    lse_status st = lse_json_get_string(doc, "emission", &em, err);
    if (st == LSE_OK && strcmp(em, "per-mode") != 0 &&
        strcmp(em, "shared") != 0)
        st = lse_error_set(err, LSE_EINVAL, fn,
                           "%s: key 'emission' is '%s', want 'shared' or "
                           "'per-mode'",
                           src, em);
    *pm = st == LSE_OK && strcmp(em, "per-mode") == 0;
    return st;
}

/* The emission blocks C, offsets d and noise variances R_diag: one shared
 * block, or (pm) one per mode with d and r stacked mode after mode. */
static lse_status read_emission(const lse_json *doc, int pm, size_t K,
                                size_t N, size_t D, gsl_matrix **C,
                                gsl_vector **d, gsl_vector **r,
                                lse_error *err)
{
    static const char fn[] = "lse_lslds_from_json";
    lse_status st = LSE_OK;
    if (pm) {
        gsl_matrix *dm = NULL, *rm = NULL;
        st = lse_json_get_stack(doc, "C", K, N, D, C, NULL, err);
        if (st == LSE_OK)
            st = lse_json_get_matrix(doc, "d", K, N, &dm, err);
        if (st == LSE_OK)
            st = lse_json_get_matrix(doc, "R_diag", K, N, &rm, err);
        if (st == LSE_OK &&
            ((*d = gsl_vector_alloc(K * N)) == NULL ||
             (*r = gsl_vector_alloc(K * N)) == NULL))
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        for (size_t i = 0; st == LSE_OK && i < K * N; i++) {
            gsl_vector_set(*d, i, gsl_matrix_get(dm, i / N, i % N));
            gsl_vector_set(*r, i, gsl_matrix_get(rm, i / N, i % N));
        }
        gsl_matrix_free(dm);
        gsl_matrix_free(rm);
    } else {
        st = lse_json_get_matrix(doc, "C", N, D, C, err);
        if (st == LSE_OK)
            st = lse_json_get_vector(doc, "d", N, d, err);
        if (st == LSE_OK)
            st = lse_json_get_vector(doc, "R_diag", N, r, err);
    }
    return st;
}

/* Every Q_k (stacked in q) and P0 are symmetric positive definite. */
static lse_status check_spd(const gsl_matrix *q, const gsl_matrix *P0,
                            size_t K, const char *src, lse_error *err)
{
    static const char fn[] = "lse_lslds_from_json";
    const size_t D = P0->size1;
    gsl_matrix *work = gsl_matrix_alloc(D, D);
    if (work == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_status st = LSE_OK;
    for (size_t k = 0; k < K && st == LSE_OK; k++) {
        gsl_matrix_const_view qk = gsl_matrix_const_submatrix(q, k * D, 0, D, D);
        if (!spd(&qk.matrix, work))
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "%s: key 'Q' [%zu] is not symmetric positive "
                               "definite",
                               src, k);
    }
    if (st == LSE_OK && !spd(P0, work))
        st = lse_error_set(err, LSE_ENUMERIC, fn,
                           "%s: key 'initial_cov' is not symmetric positive "
                           "definite",
                           src);
    gsl_matrix_free(work);
    return st;
}

/* A_k and Q_k from the stacks a (K D x L D) and q (K D x D). */
static void copy_dynamics(lse_lslds_params *p, const gsl_matrix *a,
                          const gsl_matrix *q)
{
    const size_t D = p->D, P = p->lags * D;
    for (size_t k = 0; k < p->K; k++)
        for (size_t i = 0; i < D; i++) {
            for (size_t j = 0; j < P; j++)
                gsl_matrix_set(p->A, k, i * P + j, gsl_matrix_get(a, k * D + i, j));
            for (size_t j = 0; j < D; j++)
                gsl_matrix_set(p->Q, k, i * D + j, gsl_matrix_get(q, k * D + i, j));
        }
}

lse_status lse_lslds_from_json(const lse_json *doc, const char *source,
                               lse_lslds_params **out, char ***names,
                               lse_error *err)
{
    static const char fn[] = "lse_lslds_from_json";
    const char *src = source ? source : "<model>";
    if (doc == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *out = NULL;
    if (names != NULL)
        *names = NULL;
    const char *model;
    lse_status st = lse_json_get_string(doc, "model", &model, err);
    if (st != LSE_OK)
        return st;
    if (strcmp(model, "slds-latent") != 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%s: key 'model' is '%s', want 'slds-latent'", src,
                             model);
    int markov;
    size_t K = 0, D = 0, N = 0, L = 1;
    st = lse_json_get_bool(doc, "markov", &markov, err);
    if (st == LSE_OK)
        st = get_count(doc, src, "n_modes", MAX_COUNT, &K, err);
    if (st == LSE_OK)
        st = get_count(doc, src, "latent_dim", MAX_COUNT, &D, err);
    if (st == LSE_OK)
        st = get_count(doc, src, "n_features", MAX_FEATURES, &N, err);
    if (st == LSE_OK && lse_json_has(doc, "lags"))
        st = get_count(doc, src, "lags", 64, &L, err);
    if (st != LSE_OK)
        return st;
    char **nm = NULL;
    size_t n_names = 0;
    gsl_matrix *a = NULL, *b = NULL, *q = NULL, *C = NULL, *P0 = NULL,
               *tr = NULL;
    gsl_vector *d = NULL, *r = NULL, *m0 = NULL, *init = NULL;
    lse_lslds_params *p = NULL;
    st = lse_json_get_strings(doc, "feature_names", &nm, &n_names, err);
    if (st == LSE_OK && n_names != N)
        st = lse_error_set(err, LSE_EDIM, fn,
                           "%s: key 'feature_names' has %zu names, want %zu",
                           src, n_names, N);
    if (st == LSE_OK)
        st = lse_json_get_stack(doc, "A", K, D, L * D, &a, NULL, err);
    if (st == LSE_OK)
        st = lse_json_get_matrix(doc, "b", K, D, &b, err);
    if (st == LSE_OK)
        st = lse_json_get_stack(doc, "Q", K, D, D, &q, NULL, err);
    int pm = 0; /* "emission": "per-mode" */
    if (st == LSE_OK && lse_json_has(doc, "emission"))
        st = read_emission_kind(doc, src, &pm, err);
    const size_t E = pm ? K : 1;
    if (st == LSE_OK)
        st = read_emission(doc, pm, K, N, D, &C, &d, &r, err);
    if (st == LSE_OK)
        st = lse_json_get_vector(doc, "initial_mean", D, &m0, err);
    if (st == LSE_OK)
        st = lse_json_get_matrix(doc, "initial_cov", D, D, &P0, err);
    if (st == LSE_OK)
        st = lse_json_get_vector(doc, markov ? "initial" : "weights", K, &init,
                                 err);
    if (st == LSE_OK && markov)
        st = lse_json_get_matrix(doc, "transition", K, K, &tr, err);
    if (st != LSE_OK)
        goto done;
    st = simplex(init->data, K, init->stride, src,
                 markov ? "initial" : "weights", 0, err);
    for (size_t j = 0; st == LSE_OK && markov && j < K; j++)
        st = simplex(tr->data + j * tr->tda, K, 1, src, "transition", j, err);
    for (size_t i = 0; st == LSE_OK && i < E * N; i++)
        if (!(gsl_vector_get(r, i) > 0.0))
            st = lse_error_set(err, LSE_EDOM, fn,
                               "%s: key 'R_diag' [%zu] = %g must be > 0", src,
                               i, gsl_vector_get(r, i));
    if (st != LSE_OK)
        goto done;
    st = check_spd(q, P0, K, src, err);
    if (st == LSE_OK)
        st = lse_lslds_params_new(K, D, N, markov, &p, err);
    if (st == LSE_OK && pm)
        st = lse_lslds_params_emission_per_mode(p, err);
    if (st == LSE_OK)
        st = lse_lslds_params_set_lags(p, L, err);
    if (st != LSE_OK)
        goto done;
    copy_dynamics(p, a, q);
    gsl_matrix_memcpy(p->b, b);
    gsl_matrix_memcpy(p->C, C);
    gsl_vector_memcpy(p->d, d);
    gsl_vector_memcpy(p->r, r);
    gsl_vector_memcpy(p->m0, m0);
    gsl_matrix_memcpy(p->P0, P0);
    gsl_vector_memcpy(p->init, init);
    if (markov)
        gsl_matrix_memcpy(p->trans, tr);
    *out = p;
    p = NULL;
    if (names != NULL) {
        *names = nm;
        nm = NULL;
    }
done:
    free(nm);
    lse_lslds_params_free(p);
    gsl_matrix_free(a);
    gsl_matrix_free(b);
    gsl_matrix_free(q);
    gsl_matrix_free(C);
    gsl_matrix_free(P0);
    gsl_matrix_free(tr);
    gsl_vector_free(d);
    gsl_vector_free(r);
    gsl_vector_free(m0);
    gsl_vector_free(init);
    return st;
}

lse_status lse_lslds_save(const lse_lslds_params *p, const char *const *names,
                          const char *path, lse_error *err)
{
    static const char fn[] = "lse_lslds_save";
    if (p == NULL || names == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_json *doc = lse_json_new_object();
    if (doc == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_status st = lse_lslds_to_json(p, names, doc, err);
    if (st == LSE_OK)
        st = lse_json_save(doc, path, err);
    lse_json_free(doc);
    return st;
}

lse_status lse_lslds_load(const char *path, lse_lslds_params **out,
                          char ***names, lse_error *err)
{
    static const char fn[] = "lse_lslds_load";
    if (path == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *out = NULL;
    if (names != NULL)
        *names = NULL;
    lse_json *doc = NULL;
    lse_status st = lse_json_load(path, &doc, err);
    if (st == LSE_OK)
        st = lse_lslds_from_json(doc, path, out, names, err);
    lse_json_free(doc);
    return st;
}
