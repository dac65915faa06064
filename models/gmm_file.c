#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>
#include "util.h"

/* GMM model files (JSON, schema in docs/lsefit.md): the library's own
 * reader and writer, used by lsefit and energyviz. */

lse_status lse_gmm_to_json(const lse_gmm *m, const char *const *names,
                           lse_json *doc, lse_error *err)
{
    static const char fn[] = "lse_gmm_to_json";
    if (m == NULL || names == NULL || doc == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const lse_cov_type cov = lse_gmm_cov_type(m);
    const gsl_matrix *c = lse_gmm_covariances(m);
    const size_t k = lse_gmm_k(m);
    lse_status st = lse_json_set_string(doc, "model", "gmm", err);
    if (st == LSE_OK)
        st = lse_json_set_string(
            doc, "covariance_type",
            lse_gmm_cov_model(m) != LSE_COV_MODEL_NONE
                ? lse_cov_model_name(lse_gmm_cov_model(m))
                : lse_gmm_cov_name(cov),
            err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_components", (long long)k, err);
    if (st == LSE_OK)
        st = lse_json_set_integer(doc, "n_features", (long long)lse_gmm_dim(m),
                                  err);
    if (st == LSE_OK)
        st = lse_json_set_strings(doc, "feature_names", names, lse_gmm_dim(m),
                                  err);
    if (st == LSE_OK)
        st = lse_json_set_vector(doc, "weights", lse_gmm_weights(m), err);
    if (st == LSE_OK)
        st = lse_json_set_matrix(doc, "means", lse_gmm_means(m), err);
    if (st == LSE_OK) {
        if (cov == LSE_COV_FULL) {
            st = lse_json_set_stack(doc, "covariances", c, k, err);
        } else if (cov == LSE_COV_SPHERICAL) {
            gsl_vector_const_view v = gsl_matrix_const_column(c, 0);
            st = lse_json_set_vector(doc, "covariances", &v.vector, err);
        } else {
            st = lse_json_set_matrix(doc, "covariances", c, err);
        }
    }
    return st;
}

/* Covariances in their native shape (lse_gmm_covariances). */
static lse_status read_covariances(const lse_json *doc, lse_cov_type cov,
                                   size_t k, size_t d, gsl_matrix **out,
                                   lse_error *err)
{
    lse_status st = LSE_OK;
    gsl_vector *v = NULL;
    switch (cov) {
    case LSE_COV_FULL:
        st = lse_json_get_stack(doc, "covariances", k, d, d, out, NULL, err);
        break;
    case LSE_COV_DIAG:
        st = lse_json_get_matrix(doc, "covariances", k, d, out, err);
        break;
    case LSE_COV_TIED:
        st = lse_json_get_matrix(doc, "covariances", d, d, out, err);
        break;
    case LSE_COV_SPHERICAL:
        st = lse_json_get_vector(doc, "covariances", k, &v, err);
        if (st == LSE_OK) {
            *out = gsl_matrix_alloc(k, 1);
            if (*out != NULL)
                gsl_matrix_set_col(*out, 0, v);
            else
                st = lse_error_set(err, LSE_ENOMEM, "lse_gmm_from_json",
                                   "out of memory");
            gsl_vector_free(v);
        }
        break;
    }
    return st;
}

/* A count key in 1..1000000. */
static lse_status get_count(const lse_json *doc, const char *src,
                            const char *key, size_t *out, lse_error *err)
{
    long long v = 0;
    const lse_status st = lse_json_get_integer(doc, key, &v, err);
    if (st != LSE_OK)
        return st;
    if (v < 1 || v > 1000000)
        return lse_error_set(err, LSE_EPARSE, src,
                             "key '%s' is %lld: expected an integer in "
                             "1..1000000",
                             key, v);
    *out = (size_t)v;
    return LSE_OK;
}

/* The keys model .. feature_names; *names owned by the caller. */
static lse_status read_header(const lse_json *doc, const char *src,
                              lse_cov_type *cov, lse_cov_model *model,
                              size_t *k, size_t *d, char ***names,
                              lse_error *err)
{
    const char *s = NULL;
    lse_status st = lse_json_get_string(doc, "model", &s, err);
    if (st == LSE_OK && strcmp(s, "gmm") != 0)
        return lse_error_set(err, LSE_EPARSE, src,
                             "model is '%s', expected 'gmm'", s);
    if (st == LSE_OK)
        st = lse_json_get_string(doc, "covariance_type", &s, err);
    *model = LSE_COV_MODEL_NONE;
    if (st == LSE_OK && lse_gmm_cov_parse(s, cov) != LSE_OK) {
        if (lse_cov_model_parse(s, model) != LSE_OK)
            return lse_error_set(err, LSE_EPARSE, src,
                                 "unknown covariance_type '%s' (expected "
                                 "full, diag, spherical, tied or one of "
                                 "mclust's models EII ... VVV)",
                                 s);
        *cov = lse_cov_model_layout(*model);
    }
    if (st == LSE_OK)
        st = get_count(doc, src, "n_components", k, err);
    if (st == LSE_OK)
        st = get_count(doc, src, "n_features", d, err);
    size_t n = *d;
    if (st == LSE_OK && names != NULL)
        st = lse_json_get_strings(doc, "feature_names", names, &n, err);
    if (st == LSE_OK && names != NULL && n != *d) {
        free(*names);
        *names = NULL;
        return lse_error_set(err, LSE_EPARSE, src,
                             "key 'feature_names' has %zu names but "
                             "n_features is %zu",
                             n, *d);
    }
    if (st == LSE_OK && names != NULL)
        st = lse_model_names_unique(*names, n, src, err);
    if (st != LSE_OK && names != NULL) {
        free(*names);
        *names = NULL;
    }
    return st;
}

/* "src: key 'key': <setter's message without its function name>"
 * (file messages name the file, as lse_json's getters do) */
static lse_status setter_fail(lse_error *err, const char *src, const char *key)
{
    if (err == NULL)
        return LSE_EINVAL;
    char msg[sizeof err->message];
    const char *m = err->message;
    const char *colon = strstr(m, ": ");
    if (strncmp(m, "lse_", 4) == 0 && colon != NULL)
        m = colon + 2;
    snprintf(msg, sizeof msg, "%s", m);
    return lse_error_set(err, err->status, src, "key '%s': %s", key, msg);
}

lse_status lse_gmm_from_json(const lse_json *doc, const char *source,
                             lse_gmm **out, char ***names, lse_error *err)
{
    static const char fn[] = "lse_gmm_from_json";
    if (doc == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const char *src = source != NULL ? source : "<model>";
    *out = NULL;
    lse_cov_type cov = LSE_COV_FULL;
    lse_cov_model model = LSE_COV_MODEL_NONE;
    size_t k = 0, d = 0;
    char **nm = NULL;
    gsl_vector *w = NULL;
    gsl_matrix *means = NULL, *covs = NULL;
    lse_gmm *m = NULL;
    lse_status st =
        read_header(doc, src, &cov, &model, &k, &d, names != NULL ? &nm : NULL,
                    err);
    if (st == LSE_OK)
        st = lse_json_get_vector(doc, "weights", k, &w, err);
    if (st == LSE_OK) {
        double sum = 0.0;
        for (size_t i = 0; i < k; i++)
            sum += gsl_vector_get(w, i);
        if (fabs(sum - 1.0) > 1e-6)
            st = lse_error_set(err, LSE_EPARSE, src,
                               "key 'weights' sums to %.17g, not 1", sum);
    }
    if (st == LSE_OK)
        st = lse_json_get_matrix(doc, "means", k, d, &means, err);
    if (st == LSE_OK)
        st = read_covariances(doc, cov, k, d, &covs, err);
    if (st == LSE_OK &&
        (st = model != LSE_COV_MODEL_NONE
                  ? lse_gmm_new_model(k, d, model, &m, err)
                  : lse_gmm_new(k, d, cov, &m, err)) != LSE_OK)
        lse_error_set(err, st, fn, "out of memory");
    if (st == LSE_OK && (st = lse_gmm_set_weights(m, w, err)) != LSE_OK)
        setter_fail(err, src, "weights");
    if (st == LSE_OK && (st = lse_gmm_set_means(m, means, err)) != LSE_OK)
        setter_fail(err, src, "means");
    if (st == LSE_OK && (st = lse_gmm_set_covariances(m, covs, err)) != LSE_OK)
        setter_fail(err, src, "covariances");
    gsl_vector_free(w);
    gsl_matrix_free(means);
    gsl_matrix_free(covs);
    if (st != LSE_OK) {
        lse_gmm_free(m);
        free(nm);
        return st;
    }
    *out = m;
    if (names != NULL)
        *names = nm;
    return LSE_OK;
}

lse_status lse_gmm_save(const lse_gmm *m, const char *const *names,
                        const char *path, lse_error *err)
{
    lse_json *doc = lse_json_new_object();
    if (doc == NULL)
        return lse_error_set(err, LSE_ENOMEM, "lse_gmm_save", "out of memory");
    lse_status st = lse_gmm_to_json(m, names, doc, err);
    const lse_gmm_fit_info *i = m != NULL ? lse_gmm_info(m) : NULL;
    if (st == LSE_OK && i->fitted) {
        st = lse_json_set_number(doc, "loglik", i->loglik, err);
        if (st == LSE_OK)
            st = lse_json_set_number(doc, "loglik_per_sample",
                                     i->loglik_per_sample, err);
        if (st == LSE_OK)
            st = lse_json_set_integer(doc, "n_iter", (long long)i->n_iter, err);
        if (st == LSE_OK)
            st = lse_json_set_bool(doc, "converged", i->converged, err);
        if (st == LSE_OK)
            st = lse_json_set_number(doc, "bic", i->bic, err);
        if (st == LSE_OK)
            st = lse_json_set_number(doc, "aic", i->aic, err);
    }
    if (st == LSE_OK)
        st = lse_json_save(doc, path, err);
    lse_json_free(doc);
    return st;
}

lse_status lse_gmm_load(const char *path, lse_gmm **out, char ***names,
                        lse_error *err)
{
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, "lse_gmm_load", "NULL out");
    lse_json *doc = NULL;
    lse_status st = lse_json_load(path, &doc, err);
    if (st == LSE_OK)
        st = lse_gmm_from_json(doc, path, out, names, err);
    lse_json_free(doc);
    return st;
}
