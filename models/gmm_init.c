#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "gmm-private.h"

/*
 * The starts of lse_gmm_fit: k-means++ (the shared lse_kmeans) or random
 * responsibilities, and the provisional model the re-seeding of the
 * initial M-step ranks samples by. Over several processes every process
 * draws the random numbers of the whole data set.
 */
/* Provisional model for an initialization: spherical covariance v I,
 * v = mean weighted variance of the data x (N, d) + reg_covar (1 if that is
 * not positive), equal weights (logw = 0). Its only use is to give the
 * re-seeding of components left empty by the initial M-step a
 * log-likelihood to rank samples by. The sums run over every process
 * (c->dist). */
static lse_status provisional(const fit_ctx *c, lse_cov_type cov,
                              double reg_covar, gsl_matrix *chol,
                              gsl_matrix *logw)
{
    static const char fn[] = "lse_gmm_fit";
    const gsl_matrix *x = c->x;
    const size_t n = x->size1, d = x->size2;
    /* buf: [total, sum w x_j (d)], then [sum w (x_j - mean_j)^2 (d)] */
    double *buf = calloc(2 * d + 1, sizeof *buf);
    if (buf == NULL)
        return lse_error_set(c->err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < n; i++)
        buf[0] += gmm_row_weight(c, i);
    for (size_t j = 0; j < d; j++)
        for (size_t i = 0; i < n; i++)
            buf[1 + j] += gmm_row_weight(c, i) * gsl_matrix_get(x, i, j);
    lse_status st = lse_comm_sum(c->dist, buf, d + 1, fn, c->err);
    const double total = buf[0];
    for (size_t j = 0; st == LSE_OK && j < d; j++) {
        const double mean = buf[1 + j] / total;
        double s2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - mean;
            s2 += gmm_row_weight(c, i) * t * t;
        }
        buf[1 + d + j] = s2;
    }
    if (st == LSE_OK)
        st = lse_comm_sum(c->dist, buf + 1 + d, d, fn, c->err);
    if (st == LSE_OK) {
        double var = 0.0;
        for (size_t j = 0; j < d; j++)
            var += buf[1 + d + j] / total;
        double v = var / (double)d + reg_covar;
        if (!(v > 0.0) || !isfinite(v))
            v = 1.0;
        lse_cov_chol_scaled_identity(cov, d, sqrt(v), chol);
        gsl_matrix_set_zero(logw);
    }
    free(buf);
    return st;
}


void gmm_init_work_free(init_work *iw)
{
    gsl_rng_free(iw->rng);
    gsl_matrix_free(iw->resp);
    gsl_vector_free(iw->d2);
    gsl_vector_free(iw->sums);
    free(iw->labels);
}

int gmm_init_work_alloc(init_work *iw, size_t n, size_t k,
                           unsigned long seed, int whole)
{
    iw->rng = gsl_rng_alloc(gsl_rng_mt19937);
    iw->resp = whole ? gsl_matrix_alloc(n, k) : NULL;
    iw->d2 = gsl_vector_alloc(n);
    iw->sums = gsl_vector_alloc(k);
    iw->labels = calloc(n, sizeof *iw->labels);
    if (iw->rng == NULL || (whole && iw->resp == NULL) ||
        iw->d2 == NULL || iw->sums == NULL || iw->labels == NULL)
        return 0;
    gsl_rng_set(iw->rng, seed);
    return 1;
}

/* Rows [i0, i0 + out->size1) of the initial responsibilities into out:
 * one-hot labels (k-means++), or uniform draws normalized per row
 * (random; call in row order, every row once, then init_resp_done). */
void gmm_init_resp_rows(init_work *iw, size_t i0, gsl_matrix *out)
{
    const size_t b = out->size1, K = out->size2;
    if (!iw->random) {
        gsl_matrix_set_zero(out);
        for (size_t i = 0; i < b; i++)
            gsl_matrix_set(out, i, iw->labels[i0 + i], 1.0);
        return;
    }
    for (size_t i = 0; i < b; i++) {
        double s = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double u = gsl_rng_uniform(iw->rng);
            gsl_matrix_set(out, i, k, u);
            s += u;
        }
        if (s > 0.0)
            for (size_t k = 0; k < K; k++)
                *gsl_matrix_ptr(out, i, k) /= s;
    }
}

/* After the last row: the draws of the later processes' rows, so that
 * every process leaves the generator in the same state. */
void gmm_init_resp_done(init_work *iw, size_t K)
{
    if (iw->random)
        for (size_t i = 0; i < iw->after * K; i++)
            (void)gsl_rng_uniform(iw->rng);
}

/* Starting point of a k-means++ or random initialization on the data x
 * (N, d) with weights w (c->x, c->w): means mu (K, d), the provisional
 * chol and logw, and the responsibilities iw->resp for the initial
 * M-step. Over several processes (c->dist) every process draws the random
 * numbers of the whole data set, so the start does not depend on the
 * split. */
lse_status gmm_init_start(const fit_ctx *c, lse_cov_type cov,
                             const lse_gmm_fit_opts *o, init_work *iw,
                             gsl_matrix *mu, gsl_matrix *chol, gsl_matrix *logw)
{
    static const char fn[] = "lse_gmm_fit";
    const gsl_matrix *x = c->x;
    const size_t n = x->size1, K = mu->size1, d = x->size2;
    lse_status st = provisional(c, cov, o->reg_covar, chol, logw);
    if (st != LSE_OK)
        return st;
    iw->random = o->init != LSE_GMM_INIT_KMEANSPP;
    iw->after = 0;
    if (o->init == LSE_GMM_INIT_KMEANSPP) {
        st = lse_kmeans_seed(x, c->w, iw->rng, mu, iw->d2, 0, c->dist,
                             NULL);
        if (st == LSE_OK)
            st = lse_kmeans_lloyd(x, c->w, mu, o->lloyd_iter, iw->labels,
                                  iw->sums, NULL, 0, c->dist, NULL);
        if (st != LSE_OK)
            return lse_error_set(c->err, st, fn, "k-means++ seeding failed%s",
                                 st == LSE_EINVAL ? ""
                                 : st == LSE_ENOMEM
                                     ? ": out of memory"
                                     : ": the reduction over processes "
                                       "failed");
        if (iw->resp != NULL)
            gmm_init_resp_rows(iw, 0, iw->resp);
        return LSE_OK;
    }
    /* random: provisional means at the weighted data mean */
    double *m0 = calloc(d + 1, sizeof *m0); /* [sum w x (d), total] */
    if (m0 == NULL)
        return lse_error_set(c->err, LSE_ENOMEM, fn, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const double wi = gmm_row_weight(c, i);
        m0[d] += wi;
        for (size_t j = 0; j < d; j++)
            m0[j] += wi * gsl_matrix_get(x, i, j);
    }
    st = lse_comm_sum(c->dist, m0, d + 1, fn, c->err);
    if (st == LSE_OK)
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(mu, k, j, m0[j] * (1.0 / m0[d]));
    free(m0);
    if (st != LSE_OK)
        return st;
    /* the draws of the rows before this share, then its own (drawn by
     * init_resp_rows when they are used), then the rest (init_resp_done):
     * every process leaves the generator in the same state */
    const size_t before = c->dist != NULL ? c->dist->offset : 0;
    iw->after = c->dist != NULL ? c->dist->n_total - c->dist->offset - n : 0;
    for (size_t i = 0; i < before * K; i++)
        (void)gsl_rng_uniform(iw->rng);
    if (iw->resp != NULL) {
        gmm_init_resp_rows(iw, 0, iw->resp);
        gmm_init_resp_done(iw, K);
    }
    return LSE_OK;
}

