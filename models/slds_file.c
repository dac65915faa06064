#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>
#include "util.h"

/* SLDS model files (JSON, schema in docs/lsefit.md): the library's own
 * reader and writer, used by lsefit. */

#define MAX_COUNT 1000000 /* largest n_modes / n_features a file may give */
#define SIMPLEX_TOL                                                            \
    1e-6 /* weights and probabilities in a file sum to 1                       \
            within this (they are printed rounded) */

/* Mixture weights, or the stationary distribution of the Markov chain. */
static lse_status mode_weights(const lse_slds *m, gsl_vector *w, lse_error *err)
{
    static const char fn[] = "lse_slds_to_json";
    if (!lse_slds_is_markov(m))
        return lse_slds_get_weights(m, w);
    const size_t k = lse_slds_n_modes(m);
    gsl_matrix *p = gsl_matrix_alloc(k, k);
    gsl_vector *p0 = gsl_vector_alloc(k);
    lse_status st = p == NULL || p0 == NULL
                        ? lse_error_set(err, LSE_ENOMEM, fn, "out of memory")
                        : LSE_OK;
    if (st == LSE_OK)
        st = lse_slds_get_transition(m, p);
    if (st == LSE_OK)
        st = lse_slds_get_initial(m, p0);
    if (st == LSE_OK)
        st = lse_chain_stationary(p, p0, w, NULL, err);
    gsl_matrix_free(p);
    gsl_vector_free(p0);
    return st;
}

/* The parameters as the file stores them: A (K d, d L), b (K, d),
 * covariances (K d, d), the mode weights, and for a Markov model P and
 * p0. */
typedef struct file_params {
    gsl_matrix *a, *b, *cov, *p;
    gsl_vector *w, *p0;
    gsl_matrix *beta; /* (K d, p) regressor coefficients, p > 0 only */
} file_params;

/* Names of the LSE_SLDS_SHARE_* flags in the key "shared". */
static const struct {
    const char *name;
    unsigned flag;
} share_names[] = {{"intercept", LSE_SLDS_SHARE_INTERCEPT},
                   {"ar", LSE_SLDS_SHARE_AR},
                   {"exog", LSE_SLDS_SHARE_EXOG}};
#define N_SHARE (sizeof share_names / sizeof share_names[0])

static void params_free(file_params *f)
{
    gsl_matrix_free(f->a);
    gsl_matrix_free(f->b);
    gsl_matrix_free(f->cov);
    gsl_matrix_free(f->p);
    gsl_vector_free(f->w);
    gsl_vector_free(f->p0);
    gsl_matrix_free(f->beta);
}

static lse_status params_get(const lse_slds *m, file_params *f, lse_error *err)
{
    static const char fn[] = "lse_slds_to_json";
    const size_t k = lse_slds_n_modes(m), d = lse_slds_dim(m),
                 l = lse_slds_lags(m), p = lse_slds_n_exog(m);
    memset(f, 0, sizeof *f);
    if (p > 0 && (f->beta = gsl_matrix_alloc(k * d, p)) == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; p > 0 && i < k; i++) {
        gsl_matrix_view bi = gsl_matrix_submatrix(f->beta, i * d, 0, d, p);
        lse_slds_get_beta(m, i, &bi.matrix);
    }
    f->a = gsl_matrix_alloc(k * d, d * l);
    f->b = gsl_matrix_alloc(k, d);
    f->cov = gsl_matrix_alloc(k * d, d);
    f->p = gsl_matrix_alloc(k, k);
    f->w = gsl_vector_alloc(k);
    f->p0 = gsl_vector_alloc(k);
    if (f->a == NULL || f->b == NULL || f->cov == NULL || f->p == NULL ||
        f->w == NULL || f->p0 == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < k; i++) {
        gsl_matrix_view ai = gsl_matrix_submatrix(f->a, i * d, 0, d, d * l);
        gsl_vector_view bi = gsl_matrix_row(f->b, i);
        gsl_matrix_view ci = gsl_matrix_submatrix(f->cov, i * d, 0, d, d);
        lse_slds_get_a(m, i, &ai.matrix);
        lse_slds_get_b(m, i, &bi.vector);
        lse_slds_get_cov(m, i, &ci.matrix);
    }
    lse_status st = mode_weights(m, f->w, err);
    if (st == LSE_OK && lse_slds_is_markov(m)) {
        lse_slds_get_transition(m, f->p);
        lse_slds_get_initial(m, f->p0);
    }
    return st;
}

lse_status lse_slds_to_json(const lse_slds *m, const char *const *names,
                            lse_json *doc, lse_error *err)
{
    static const char fn[] = "lse_slds_to_json";
    if (m == NULL || names == NULL || doc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_slds_n_modes(m), d = lse_slds_dim(m);
    const int markov = lse_slds_is_markov(m);
    file_params f;
    lse_status st = params_get(m, &f, err);
    if (st == LSE_OK)
        st = lse_json_set_string(doc, "model", "slds", err);
    if (st == LSE_OK)
        st = lse_json_set_bool(doc, "markov", markov, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_modes", (long long)k, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_features", (long long)d, err);
    if (st == LSE_OK)
        st = lse_json_set_strings(doc, "feature_names", names, d, err);
    if (st == LSE_OK)
        st = lse_json_set_vector(doc, "weights", f.w, err);
    if (st == LSE_OK)
        st = lse_json_set_stack(doc, "A", f.a, k, err);
    if (st == LSE_OK)
        st = lse_json_set_matrix(doc, "b", f.b, err);
    if (st == LSE_OK)
        st = lse_json_set_stack(doc, "covariances", f.cov, k, err);
    if (st == LSE_OK && markov)
        st = lse_json_set_matrix(doc, "transition", f.p, err);
    if (st == LSE_OK && markov)
        st = lse_json_set_vector(doc, "initial", f.p0, err);
    /* regressors and shared parts: keys only when there are some, so that
     * the files of other models are those of before */
    const size_t p = lse_slds_n_exog(m);
    if (st == LSE_OK && p > 0)
        st = lse_json_set_integer(doc, "n_exog", (long long)p, err);
    if (st == LSE_OK && p > 0)
        st = lse_json_set_strings(doc, "exog_names", names + d, p, err);
    if (st == LSE_OK && p > 0)
        st = lse_json_set_stack(doc, "beta", f.beta, k, err);
    const unsigned sh = lse_slds_shared(m);
    if (st == LSE_OK && sh != 0u) {
        const char *sn[N_SHARE];
        size_t n = 0;
        for (size_t i = 0; i < N_SHARE; i++)
            if (sh & share_names[i].flag)
                sn[n++] = share_names[i].name;
        st = lse_json_set_strings(doc, "shared", sn, n, err);
    }
    params_free(&f);
    return st;
}

static lse_status get_count(const lse_json *doc, const char *src,
                            const char *key, size_t *out, lse_error *err);

/* names (d, a block) followed by more (p, a block) in one new block. */
static lse_status join_names(char ***names, char **more, size_t d, size_t p,
                             lse_error *err)
{
    size_t bytes = (d + p + 1) * sizeof(char *);
    for (size_t i = 0; i < d; i++)
        bytes += strlen((*names)[i]) + 1;
    for (size_t i = 0; i < p; i++)
        bytes += strlen(more[i]) + 1;
    char **out = malloc(bytes);
    if (out == NULL)
        return lse_error_set(err, LSE_ENOMEM, "lse_slds_from_json",
                             "out of memory");
    char *q = (char *)(out + d + p + 1);
    for (size_t i = 0; i < d + p; i++) {
        const char *s = i < d ? (*names)[i] : more[i - d];
        const size_t len = strlen(s) + 1;
        memcpy(q, s, len);
        out[i] = q;
        q += len;
    }
    out[d + p] = NULL;
    free(*names);
    *names = out;
    return LSE_OK;
}

/* The keys of regressors and shared parts (absent: none). */
static lse_status read_exog(const lse_json *doc, const char *src,
                            lse_slds_config *cfg, file_params *f,
                            char ***names, lse_error *err)
{
    static const char fn[] = "lse_slds_from_json";
    const size_t k = cfg->n_modes, d = cfg->dim;
    lse_status st = LSE_OK;
    if (lse_json_has(doc, "n_exog")) {
        char **en = NULL;
        size_t ne = 0;
        st = get_count(doc, src, "n_exog", &cfg->n_exog, err);
        if (st == LSE_OK)
            st = lse_json_get_strings(doc, "exog_names", &en, &ne, err);
        if (st == LSE_OK && ne != cfg->n_exog)
            st = lse_error_set(err, LSE_EDIM, fn,
                               "%s: key 'exog_names' has %zu names but n_exog "
                               "is %zu",
                               src, ne, cfg->n_exog);
        if (st == LSE_OK)
            st = join_names(names, en, d, ne, err);
        free(en);
        if (st == LSE_OK)
            st = lse_model_names_unique(*names, d + ne, src, err);
        if (st == LSE_OK)
            st = lse_json_get_stack(doc, "beta", k, d, cfg->n_exog, &f->beta,
                                    NULL, err);
    }
    if (st != LSE_OK || !lse_json_has(doc, "shared"))
        return st;
    char **sn = NULL;
    size_t ns = 0;
    st = lse_json_get_strings(doc, "shared", &sn, &ns, err);
    for (size_t i = 0; st == LSE_OK && i < ns; i++) {
        size_t j = 0;
        while (j < N_SHARE && strcmp(sn[i], share_names[j].name) != 0)
            j++;
        if (j == N_SHARE)
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "%s: key 'shared' [%zu] is '%s': expected "
                               "intercept, ar or exog",
                               src, i, sn[i]);
        else
            cfg->shared |= share_names[j].flag;
    }
    free(sn);
    return st;
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */

/* A row-stochastic input: entries >= 0 summing to 1 (SIMPLEX_TOL). */
static lse_status check_simplex(const char *src, const char *key,
                                const double *p, size_t n, size_t stride,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_from_json";
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!(p[i * stride] >= 0.0))
            return lse_error_set(err, LSE_EDOM, fn,
                                 "%s: key '%s' has a negative entry %g", src,
                                 key, p[i * stride]);
        sum += p[i * stride];
    }
    if (fabs(sum - 1.0) > SIMPLEX_TOL)
        return lse_error_set(err, LSE_EDOM, fn,
                             "%s: key '%s' sums to %.17g, not 1", src, key,
                             sum);
    return LSE_OK;
}

static lse_status get_count(const lse_json *doc, const char *src,
                            const char *key, size_t *out, lse_error *err)
{
    long long v = 0;
    const lse_status st = lse_json_get_integer(doc, key, &v, err);
    if (st != LSE_OK)
        return st;
    if (v < 1 || v > MAX_COUNT)
        return lse_error_set(err, LSE_EDOM, "lse_slds_from_json",
                             "%s: key '%s' is %lld: expected an integer in "
                             "1..%d",
                             src, key, v, MAX_COUNT);
    *out = (size_t)v;
    return LSE_OK;
}

/* The configuration: markov, n_modes, n_features (and the feature names),
 * the lags from A's columns, the covariance type from options.covariance
 * (default full). */
static lse_status read_config(const lse_json *doc, const char *src,
                              lse_slds_config *cfg, file_params *f,
                              char ***names, lse_error *err)
{
    static const char fn[] = "lse_slds_from_json";
    const char *got = NULL;
    lse_status st = lse_json_get_string(doc, "model", &got, err);
    if (st == LSE_OK && strcmp(got, "slds") != 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%s: model is '%s', expected 'slds'", src, got);
    if (st == LSE_OK)
        st = lse_json_get_bool(doc, "markov", &cfg->markov, err);
    if (st == LSE_OK)
        st = get_count(doc, src, "n_modes", &cfg->n_modes, err);
    if (st == LSE_OK)
        st = get_count(doc, src, "n_features", &cfg->dim, err);
    const size_t k = cfg->n_modes, d = cfg->dim;
    size_t n_names = 0;
    if (st == LSE_OK)
        st = lse_json_get_strings(doc, "feature_names", names, &n_names, err);
    if (st == LSE_OK && n_names != d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%s: key 'feature_names' has %zu names but "
                             "n_features is %zu",
                             src, n_names, d);
    if (st == LSE_OK)
        st = lse_model_names_unique(*names, n_names, src, err);
    if (st == LSE_OK)
        st = lse_json_get_stack(doc, "A", k, d, 0, &f->a, NULL, err);
    if (st == LSE_OK && f->a->size2 % d != 0)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%s: key 'A' has %zu columns: expected d * lags "
                             "with d = %zu",
                             src, f->a->size2, d);
    if (st == LSE_OK)
        cfg->lags = f->a->size2 / d;
    if (st == LSE_OK)
        st = read_exog(doc, src, cfg, f, names, err);
    if (st != LSE_OK || !lse_json_has(doc, "options"))
        return st;
    lse_json *opt = NULL;
    const char *name = NULL;
    st = lse_json_get_object(doc, "options", &opt, err);
    if (st == LSE_OK && lse_json_has(opt, "covariance")) {
        st = lse_json_get_string(opt, "covariance", &name, err);
        if (st == LSE_OK && lse_cov_parse(name, &cfg->cov) != LSE_OK)
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "%s: options.covariance '%s': expected full, "
                               "diag, spherical or tied",
                               src, name);
    }
    lse_json_free(opt);
    return st;
}

static lse_status read_params(const lse_json *doc, const char *src,
                              const lse_slds_config *cfg, file_params *f,
                              lse_error *err)
{
    const size_t k = cfg->n_modes, d = cfg->dim;
    lse_status st = lse_json_get_matrix(doc, "b", k, d, &f->b, err);
    if (st == LSE_OK)
        st =
            lse_json_get_stack(doc, "covariances", k, d, d, &f->cov, NULL, err);
    if (st == LSE_OK && !cfg->markov)
        st = lse_json_get_vector(doc, "weights", k, &f->w, err);
    if (st == LSE_OK && !cfg->markov)
        st = check_simplex(src, "weights", f->w->data, k, f->w->stride, err);
    if (st == LSE_OK && cfg->markov)
        st = lse_json_get_matrix(doc, "transition", k, k, &f->p, err);
    if (st == LSE_OK && cfg->markov)
        st = lse_json_get_vector(doc, "initial", k, &f->p0, err);
    for (size_t i = 0; st == LSE_OK && cfg->markov && i < k; i++) {
        char key[64];
        snprintf(key, sizeof key, "transition[%zu]", i);
        st = check_simplex(src, key, gsl_matrix_const_ptr(f->p, i, 0), k, 1,
                           err);
    }
    if (st == LSE_OK && cfg->markov)
        st = check_simplex(src, "initial", f->p0->data, k, f->p0->stride, err);
    return st;
}

/* Prefix a setter's message (err) with the file and key. */
static lse_status setter_failed(lse_status st, const char *src, const char *key,
                                size_t i, int indexed, lse_error *err)
{
    char msg[sizeof err->message];
    const char *m = err->message;
    const char *colon = strstr(m, ": ");
    snprintf(msg, sizeof msg, "%s", colon != NULL ? colon + 2 : m);
    if (key == NULL)
        return lse_error_set(err, st, "lse_slds_from_json", "%s: %s", src, msg);
    if (indexed)
        return lse_error_set(err, st, "lse_slds_from_json",
                             "%s: key '%s' [%zu]: %s", src, key, i, msg);
    return lse_error_set(err, st, "lse_slds_from_json", "%s: key '%s': %s", src,
                         key, msg);
}

static lse_status set_params(lse_slds *m, const char *src,
                             const lse_slds_config *cfg, const file_params *f,
                             lse_error *err)
{
    const size_t k = cfg->n_modes, d = cfg->dim;
    lse_status st = LSE_OK;
    for (size_t i = 0; st == LSE_OK && i < k; i++) {
        gsl_matrix_const_view ai =
            gsl_matrix_const_submatrix(f->a, i * d, 0, d, f->a->size2);
        gsl_vector_const_view bi = gsl_matrix_const_row(f->b, i);
        gsl_matrix_const_view ci =
            gsl_matrix_const_submatrix(f->cov, i * d, 0, d, d);
        if ((st = lse_slds_set_a(m, i, &ai.matrix, err)) != LSE_OK)
            st = setter_failed(st, src, "A", i, 1, err);
        else if ((st = lse_slds_set_b(m, i, &bi.vector, err)) != LSE_OK)
            st = setter_failed(st, src, "b", i, 1, err);
        else if (f->beta != NULL) {
            gsl_matrix_const_view ei = gsl_matrix_const_submatrix(
                f->beta, i * d, 0, d, f->beta->size2);
            if ((st = lse_slds_set_beta(m, i, &ei.matrix, err)) != LSE_OK)
                st = setter_failed(st, src, "beta", i, 1, err);
        }
        if (st == LSE_OK && (cfg->cov != LSE_COV_TIED || i == 0) &&
            (st = lse_slds_set_cov(m, i, &ci.matrix, err)) != LSE_OK)
            st = setter_failed(st, src, "covariances", i, 1, err);
    }
    if (st == LSE_OK && !cfg->markov &&
        (st = lse_slds_set_weights(m, f->w, err)) != LSE_OK)
        st = setter_failed(st, src, "weights", 0, 0, err);
    if (st == LSE_OK && cfg->markov &&
        (st = lse_slds_set_transition(m, f->p, err)) != LSE_OK)
        st = setter_failed(st, src, "transition", 0, 0, err);
    if (st == LSE_OK && cfg->markov &&
        (st = lse_slds_set_initial(m, f->p0, err)) != LSE_OK)
        st = setter_failed(st, src, "initial", 0, 0, err);
    return st;
}

lse_status lse_slds_from_json(const lse_json *doc, const char *source,
                              lse_slds **out, char ***names, lse_error *err)
{
    static const char fn[] = "lse_slds_from_json";
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL output");
    *out = NULL;
    if (names != NULL)
        *names = NULL;
    if (doc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL document");
    const char *src = source != NULL ? source : "<model>";
    lse_slds_config cfg = lse_slds_config_default();
    file_params f;
    memset(&f, 0, sizeof f);
    char **nm = NULL;
    lse_slds *m = NULL;
    lse_status st = read_config(doc, src, &cfg, &f, &nm, err);
    if (st == LSE_OK)
        st = read_params(doc, src, &cfg, &f, err);
    if (st == LSE_OK && (st = lse_slds_new(&cfg, &m, err)) != LSE_OK)
        st = setter_failed(st, src, NULL, 0, 0, err);
    if (st == LSE_OK)
        st = set_params(m, src, &cfg, &f, err);
    params_free(&f);
    if (st != LSE_OK) {
        lse_slds_free(m);
        free(nm);
        return st;
    }
    *out = m;
    if (names != NULL)
        *names = nm;
    else
        free(nm);
    return LSE_OK;
}

lse_status lse_slds_save(const lse_slds *m, const char *const *names,
                         const char *path, lse_error *err)
{
    static const char fn[] = "lse_slds_save";
    if (m == NULL || names == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_json *doc = lse_json_new_object(), *opt = lse_json_new_object();
    if (doc == NULL || opt == NULL) {
        lse_json_free(doc);
        lse_json_free(opt);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    lse_status st = lse_slds_to_json(m, names, doc, err);
    if (st == LSE_OK && lse_slds_n_fit_steps(m) > 0) {
        st = lse_json_set_number(doc, "loglik", lse_slds_loglik(m), err);
        if (st == LSE_OK)
            st = lse_json_set_number(doc, "loglik_per_step",
                                     lse_slds_loglik_per_step(m), err);
        if (st == LSE_OK)
            st = lse_json_set_integer(doc, "n_iter",
                                      (long long)lse_slds_n_iter(m), err);
        if (st == LSE_OK)
            st =
                lse_json_set_bool(doc, "converged", lse_slds_converged(m), err);
        if (st == LSE_OK)
            st = lse_json_set_number(doc, "bic", lse_slds_bic(m), err);
        if (st == LSE_OK)
            st = lse_json_set_number(doc, "aic", lse_slds_aic(m), err);
    }
    if (st == LSE_OK)
        st = lse_json_set_string(opt, "covariance",
                                 lse_cov_name(lse_slds_cov_type(m)), err);
    if (st == LSE_OK)
        st = lse_json_set_object(doc, "options", opt, err);
    if (st == LSE_OK)
        st = lse_json_save(doc, path, err);
    lse_json_free(doc);
    lse_json_free(opt);
    return st;
}

lse_status lse_slds_load(const char *path, lse_slds **out, char ***names,
                         lse_error *err)
{
    static const char fn[] = "lse_slds_load";
    if (path == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *out = NULL;
    if (names != NULL)
        *names = NULL;
    lse_json *doc = NULL;
    lse_status st = lse_json_load(path, &doc, err);
    if (st == LSE_OK)
        st = lse_slds_from_json(doc, path, out, names, err);
    lse_json_free(doc);
    return st;
}
