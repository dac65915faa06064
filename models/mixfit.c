/* Starts, emEM and the parametric bootstrap for lse_gmm (mixfit.h), on
 * its public API only. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>

#include <lsegraph/core.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>

/* copy the parameters of src into dst (same K, d, type) */
static lse_status copy_params(lse_gmm *dst, const lse_gmm *src, lse_error *err)
{
    lse_status st = lse_gmm_set_weights(dst, lse_gmm_weights(src), err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(dst, lse_gmm_means(src), err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(dst, lse_gmm_covariances(src), err);
    return st;
}

static lse_status clone(const lse_gmm *src, lse_gmm **out, lse_error *err)
{
    lse_status st = lse_gmm_new(lse_gmm_k(src), lse_gmm_dim(src),
                                lse_gmm_cov_type(src), out, NULL);
    if (st != LSE_OK)
        return lse_error_set(err, st, "lse_gmm", "out of memory");
    st = copy_params(*out, src, err);
    if (st != LSE_OK) {
        lse_gmm_free(*out);
        *out = NULL;
    }
    return st;
}

/* 1 when the symmetric d x d matrix a is positive definite */
static int is_pd(const gsl_matrix *a, gsl_matrix *tmp)
{
    gsl_matrix_memcpy(tmp, a);
    gsl_error_handler_t *h = gsl_set_error_handler_off();
    const int rc = gsl_linalg_cholesky_decomp1(tmp);
    gsl_set_error_handler(h);
    return rc == GSL_SUCCESS;
}

/* The scatter matrices W_k about the means mu (block k of w) and the
 * data's covariance about mall (into all), both zeroed before. */
static void scatter(const gsl_matrix *x, const size_t *labels,
                    const gsl_matrix *mu, const gsl_vector *mall,
                    gsl_matrix *w, gsl_matrix *all)
{
    const size_t n = x->size1, d = x->size2;
    for (size_t i = 0; i < n; i++) {
        const size_t c = labels[i];
        for (size_t a = 0; a < d; a++) {
            const double ea = gsl_matrix_get(x, i, a) - gsl_matrix_get(mu, c, a);
            const double fa = gsl_matrix_get(x, i, a) - gsl_vector_get(mall, a);
            for (size_t b = 0; b < d; b++) {
                *gsl_matrix_ptr(w, c * d + a, b) +=
                    ea * (gsl_matrix_get(x, i, b) - gsl_matrix_get(mu, c, b));
                *gsl_matrix_ptr(all, a, b) +=
                    fa * (gsl_matrix_get(x, i, b) - gsl_vector_get(mall, b)) /
                    (double)n;
            }
        }
    }
}

/* The covariances of the given type from the full ones in w (k d x d),
 * the tied one falling back to the data's covariance all; *out is NULL
 * when out of memory. -1 for an unknown type. */
static int cov_of_type(lse_cov_type type, const gsl_matrix *w,
                       const gsl_matrix *all, gsl_matrix *tmp, size_t n,
                       double reg_covar, gsl_matrix **out)
{
    const size_t d = w->size2, k = w->size1 / d;
    gsl_matrix *cov = NULL;
    switch (type) {
    case LSE_COV_FULL:
        cov = gsl_matrix_alloc(k * d, d);
        if (cov != NULL)
            gsl_matrix_memcpy(cov, w);
        break;
    case LSE_COV_DIAG:
        cov = gsl_matrix_alloc(k, d);
        for (size_t c = 0; cov != NULL && c < k; c++)
            for (size_t a = 0; a < d; a++)
                gsl_matrix_set(cov, c, a, gsl_matrix_get(w, c * d + a, a));
        break;
    case LSE_COV_SPHERICAL:
        cov = gsl_matrix_alloc(k, 1);
        for (size_t c = 0; cov != NULL && c < k; c++) {
            double t = 0.0;
            for (size_t a = 0; a < d; a++)
                t += gsl_matrix_get(w, c * d + a, a);
            gsl_matrix_set(cov, c, 0, t / (double)d);
        }
        break;
    case LSE_COV_TIED:
        cov = gsl_matrix_calloc(d, d);
        for (size_t c = 0; cov != NULL && c < k; c++)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++)
                    *gsl_matrix_ptr(cov, a, b) +=
                        gsl_matrix_get(w, c * d + a, b) / (double)n;
        for (size_t a = 0; cov != NULL && a < d; a++)
            *gsl_matrix_ptr(cov, a, a) += reg_covar;
        if (cov != NULL && !is_pd(cov, tmp))
            gsl_matrix_memcpy(cov, all);
        break;
    default:
        return -1;
    }
    *out = cov;
    return 0;
}

lse_status lse_gmm_init_labels(lse_gmm *m, const gsl_matrix *x,
                               const size_t *labels, double reg_covar,
                               lse_error *err)
{
    static const char fn[] = "lse_gmm_init_labels";
    if (m == NULL || x == NULL || labels == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m), n = x->size1;
    if (x->size2 != d || n == 0)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data are %zu x %zu, the model d = %zu", n,
                             x->size2, d);
    if (!(reg_covar >= 0.0) || !isfinite(reg_covar))
        return lse_error_set(err, LSE_EDOM, fn, "reg_covar must be >= 0");
    for (size_t i = 0; i < n; i++) {
        if (labels[i] >= k)
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "row %zu: label %zu >= K = %zu", i,
                                 labels[i], k);
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu column %zu is not finite", i, j);
    }
    const lse_cov_type type = lse_gmm_cov_type(m);
    gsl_vector *cnt = gsl_vector_calloc(k);
    gsl_matrix *mu = gsl_matrix_calloc(k, d), *all = gsl_matrix_calloc(d, d);
    gsl_matrix *w = gsl_matrix_calloc(k * d, d), *tmp = gsl_matrix_alloc(d, d);
    gsl_vector *mall = gsl_vector_calloc(d);
    gsl_matrix *cov = NULL;
    lse_status st = LSE_OK;
    if (cnt == NULL || mu == NULL || all == NULL || w == NULL ||
        tmp == NULL || mall == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t c = labels[i];
        *gsl_vector_ptr(cnt, c) += 1.0;
        for (size_t j = 0; j < d; j++) {
            *gsl_matrix_ptr(mu, c, j) += gsl_matrix_get(x, i, j);
            *gsl_vector_ptr(mall, j) += gsl_matrix_get(x, i, j) / (double)n;
        }
    }
    for (size_t c = 0; c < k; c++) {
        if (gsl_vector_get(cnt, c) == 0.0) {
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "component %zu has no rows", c);
            goto out;
        }
        for (size_t j = 0; j < d; j++)
            *gsl_matrix_ptr(mu, c, j) /= gsl_vector_get(cnt, c);
    }
    scatter(x, labels, mu, mall, w, all);
    /* full per-component covariances, with the fallback, in w */
    for (size_t c = 0; c < k; c++) {
        gsl_matrix_view blk = gsl_matrix_submatrix(w, c * d, 0, d, d);
        const double nk = gsl_vector_get(cnt, c);
        gsl_matrix_memcpy(tmp, &blk.matrix);
        gsl_matrix_scale(tmp, 1.0 / nk);
        for (size_t a = 0; a < d; a++)
            *gsl_matrix_ptr(tmp, a, a) += reg_covar;
        gsl_matrix *chk = gsl_matrix_alloc(d, d);
        if (chk == NULL) {
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
            goto out;
        }
        const int pd = is_pd(tmp, chk);
        gsl_matrix_free(chk);
        if (type != LSE_COV_TIED && !pd) {
            gsl_matrix_add(&blk.matrix, all);
            gsl_matrix_scale(&blk.matrix, 1.0 / (nk + 1.0));
        } else if (type != LSE_COV_TIED) {
            gsl_matrix_scale(&blk.matrix, 1.0 / nk);
        }
        if (type != LSE_COV_TIED)
            for (size_t a = 0; a < d; a++)
                *gsl_matrix_ptr(&blk.matrix, a, a) += reg_covar;
    }
    if (cov_of_type(type, w, all, tmp, n, reg_covar, &cov) != 0) {
        st = lse_error_set(err, LSE_EINVAL, fn, "unknown covariance type");
        goto out;
    }
    if (cov == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    gsl_vector_scale(cnt, 1.0 / (double)n);
    st = lse_gmm_set_weights(m, cnt, err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(m, mu, err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(m, cov, err);
out:
    gsl_vector_free(cnt);
    gsl_vector_free(mall);
    gsl_matrix_free(mu);
    gsl_matrix_free(all);
    gsl_matrix_free(w);
    gsl_matrix_free(tmp);
    gsl_matrix_free(cov);
    return st;
}

lse_status lse_gmm_fit_emem(lse_gmm *m, const gsl_matrix *x,
                            const lse_gmm_fit_opts *o, size_t n_starts,
                            size_t short_iter, size_t n_keep,
                            const size_t *labels, lse_error *err)
{
    static const char fn[] = "lse_gmm_fit_emem";
    if (m == NULL || x == NULL || o == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (n_starts == 0 || short_iter == 0 || n_keep == 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "n_starts, short_iter and n_keep must be >= 1");
    if (o->init == LSE_GMM_INIT_GIVEN)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "emEM draws its starts: init must not be "
                             "LSE_GMM_INIT_GIVEN");
    lse_gmm **keep = calloc(n_keep + 1, sizeof *keep);
    double *kll = malloc((n_keep + 1) * sizeof *kll);
    size_t n_kept = 0;
    lse_status st = LSE_OK, last = LSE_OK;
    lse_error e2;
    if (keep == NULL || kll == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    /* short runs on m; the n_keep best, in decreasing order */
    for (size_t s = 0; s < n_starts + (labels != NULL); s++) {
        lse_gmm_fit_opts so = *o;
        so.n_init = 1;
        so.max_iter = short_iter;
        so.seed = o->seed + s;
        so.progress = NULL;
        if (s == n_starts) { /* the given partition */
            so.init = LSE_GMM_INIT_GIVEN;
            last = lse_gmm_init_labels(m, x, labels, o->reg_covar, &e2);
            if (last != LSE_OK)
                continue;
        }
        last = lse_gmm_fit(m, x, &so, &e2);
        if (last != LSE_OK)
            continue;
        const double ll = lse_gmm_info(m)->loglik;
        size_t pos = n_kept;
        while (pos > 0 && kll[pos - 1] < ll)
            pos--;
        if (pos >= n_keep)
            continue;
        lse_gmm *c = NULL;
        st = clone(m, &c, err);
        if (st != LSE_OK)
            goto out;
        if (n_kept == n_keep) {
            lse_gmm_free(keep[n_keep - 1]);
            n_kept--;
        }
        memmove(keep + pos + 1, keep + pos, (n_kept - pos) * sizeof *keep);
        memmove(kll + pos + 1, kll + pos, (n_kept - pos) * sizeof *kll);
        keep[pos] = c;
        kll[pos] = ll;
        n_kept++;
    }
    if (n_kept == 0) {
        if (err != NULL)
            *err = e2;
        st = last;
        goto out;
    }
    /* the kept ones to convergence, on m; remember the best's start */
    lse_gmm_fit_opts fo = *o;
    fo.init = LSE_GMM_INIT_GIVEN;
    fo.n_init = 1;
    double best = -INFINITY;
    size_t best_i = n_kept, last_ok = n_kept;
    for (size_t i = 0; i < n_kept; i++) {
        st = copy_params(m, keep[i], err);
        if (st != LSE_OK)
            goto out;
        last = lse_gmm_fit(m, x, &fo, &e2);
        if (last != LSE_OK)
            continue;
        last_ok = i;
        if (lse_gmm_info(m)->loglik > best) {
            best = lse_gmm_info(m)->loglik;
            best_i = i;
        }
    }
    if (best_i == n_kept) {
        if (err != NULL)
            *err = e2;
        st = last;
        goto out;
    }
    if (best_i != last_ok || last != LSE_OK) {
        /* rerun the winner (deterministic) so that m holds its fit info */
        st = copy_params(m, keep[best_i], err);
        if (st == LSE_OK)
            st = lse_gmm_fit(m, x, &fo, err);
    }
out:
    for (size_t i = 0; keep != NULL && i < n_kept; i++)
        lse_gmm_free(keep[i]);
    free(keep);
    free(kll);
    return st;
}

void lse_gmm_boot_free(lse_gmm_boot *b)
{
    if (b == NULL)
        return;
    gsl_vector_free(b->weights);
    gsl_matrix_free(b->means);
    gsl_matrix_free(b->covariances);
    memset(b, 0, sizeof *b);
}

lse_status lse_gmm_bootstrap(const lse_gmm *m, size_t n, size_t n_boot,
                             unsigned long seed, const lse_gmm_fit_opts *o,
                             lse_gmm_boot *out, lse_error *err)
{
    static const char fn[] = "lse_gmm_bootstrap";
    if (m == NULL || o == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    memset(out, 0, sizeof *out);
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    if (n_boot < 2)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%zu replicates: need at least 2", n_boot);
    if (n < k || n < 2)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%zu rows for K = %zu components", n, k);
    const gsl_matrix *c0 = lse_gmm_covariances(m);
    const size_t cr = c0->size1, cc = c0->size2;
    /* running sums (Welford) of the parameters as one vector */
    const size_t np = k + k * d + cr * cc;
    double *mean = calloc(np, sizeof *mean), *m2 = calloc(np, sizeof *m2);
    double *v = malloc(np * sizeof *v);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    lse_gmm *r = NULL;
    lse_status st = LSE_OK;
    if (mean == NULL || m2 == NULL || v == NULL || x == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    st = clone(m, &r, err);
    if (st != LSE_OK)
        goto out;
    lse_gmm_fit_opts fo = *o;
    fo.init = LSE_GMM_INIT_GIVEN;
    fo.n_init = 1;
    fo.sample_weight = NULL;
    fo.missing = LSE_GMM_MISSING_ERROR;
    fo.progress = NULL;
    size_t done = 0, draw = 0, failed = 0;
    lse_error e2;
    while (done < n_boot) {
        if (failed > 10 * n_boot) {
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "%zu of %zu refits failed; the last: %s",
                               failed, failed + done, e2.message);
            goto out;
        }
        draw++;
        st = lse_gmm_sample(m, seed + draw, x, NULL, err);
        if (st == LSE_OK)
            st = copy_params(r, m, err);
        if (st != LSE_OK)
            goto out;
        if (lse_gmm_fit(r, x, &fo, &e2) != LSE_OK) {
            failed++;
            continue;
        }
        const gsl_vector *w = lse_gmm_weights(r);
        const gsl_matrix *mu = lse_gmm_means(r), *cv = lse_gmm_covariances(r);
        for (size_t i = 0; i < k; i++)
            v[i] = gsl_vector_get(w, i);
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < d; j++)
                v[k + i * d + j] = gsl_matrix_get(mu, i, j);
        for (size_t i = 0; i < cr; i++)
            for (size_t j = 0; j < cc; j++)
                v[k + k * d + i * cc + j] = gsl_matrix_get(cv, i, j);
        done++;
        for (size_t i = 0; i < np; i++) {
            const double delta = v[i] - mean[i];
            mean[i] += delta / (double)done;
            m2[i] += delta * (v[i] - mean[i]);
        }
    }
    out->weights = gsl_vector_alloc(k);
    out->means = gsl_matrix_alloc(k, d);
    out->covariances = gsl_matrix_alloc(cr, cc);
    if (out->weights == NULL || out->means == NULL ||
        out->covariances == NULL) {
        lse_gmm_boot_free(out);
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < np; i++)
        v[i] = sqrt(m2[i] / (double)(n_boot - 1));
    for (size_t i = 0; i < k; i++)
        gsl_vector_set(out->weights, i, v[i]);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(out->means, i, j, v[k + i * d + j]);
    for (size_t i = 0; i < cr; i++)
        for (size_t j = 0; j < cc; j++)
            gsl_matrix_set(out->covariances, i, j, v[k + k * d + i * cc + j]);
    out->n_boot = n_boot;
    out->n_failed = failed;
out:
    free(mean);
    free(m2);
    free(v);
    gsl_matrix_free(x);
    lse_gmm_free(r);
    return st;
}
