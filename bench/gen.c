/* Benchmark data sets with fixed seeds (docs/performance.md).
 *
 *   lse_bench_gen OUTDIR
 *
 * GMM data sets (a: N=1e5 d=16 K=16, b: N=1e6 d=2 K=8, c: N=2e4 d=64 K=32)
 * drawn from a mixture with random means and covariances, and the shared
 * initialization every tool starts from: K distinct data rows as means,
 * the global data covariance for every component (its diagonal for diag
 * fits), equal weights. Files gmm_<s>.bin (N, d), gmm_<s>_means.bin (K, d),
 * gmm_<s>_cov.bin (K*d, d), gmm_<s>_var.bin (K, d), gmm_<s>_w.bin (K, 1).
 *
 * SLDS series (T = 5e5, d = 2, K = 3) from a Markov-switching linear
 * dynamical system, and its initialization: slds.bin (T, d),
 * slds_A.bin (K, d*d), slds_b.bin (K, d), slds_cov.bin (K, d*d),
 * slds_w.bin (K, 1), slds_P.bin (K, K), slds_p0.bin (1, K). */

#include <math.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "bench_util.h"

static int save(const char *dir, const char *name, const gsl_matrix *m)
{
    char path[4096];
    bench_path(path, sizeof path, dir, name);
    if (bench_write(path, m) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* One GMM data set and its initialization. spread: standard deviation of
 * the true means around 0. */
static int gen_gmm(const char *dir, const char *tag, size_t n, size_t d,
                   size_t k, double spread, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    gsl_matrix *mu = gsl_matrix_alloc(k, d);
    gsl_matrix *chol = gsl_matrix_calloc(k * d, d);
    gsl_matrix *a = gsl_matrix_alloc(d, d);
    double *w = malloc(k * sizeof *w);
    /* true components: Sigma = A A' / d + 0.1 I, weights ~ U(0.5, 1.5) */
    double wsum = 0.0;
    for (size_t c = 0; c < k; c++) {
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(mu, c, j, gsl_ran_gaussian(r, spread));
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(a, i, j, gsl_ran_gaussian(r, 1.0));
        gsl_matrix_view l = gsl_matrix_submatrix(chol, c * d, 0, d, d);
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0 / (double)d, a, a, 0.0,
                       &l.matrix);
        for (size_t i = 0; i < d; i++)
            *gsl_matrix_ptr(&l.matrix, i, i) += 0.1;
        gsl_linalg_cholesky_decomp1(&l.matrix);
        w[c] = 0.5 + gsl_rng_uniform(r);
        wsum += w[c];
    }
    gsl_ran_discrete_t *pick = gsl_ran_discrete_preproc(k, w);
    double *z = malloc(d * sizeof *z);
    for (size_t i = 0; i < n; i++) {
        const size_t c = gsl_ran_discrete(r, pick);
        for (size_t j = 0; j < d; j++)
            z[j] = gsl_ran_gaussian(r, 1.0);
        double *xi = gsl_matrix_ptr(x, i, 0);
        for (size_t p = 0; p < d; p++) {
            double v = gsl_matrix_get(mu, c, p);
            for (size_t q = 0; q <= p; q++)
                v += gsl_matrix_get(chol, c * d + p, q) * z[q];
            xi[p] = v;
        }
    }
    gsl_ran_discrete_free(pick);
    free(z);

    /* initialization: K distinct rows, global covariance, equal weights */
    gsl_matrix *m0 = gsl_matrix_alloc(k, d);
    gsl_matrix *cov = gsl_matrix_calloc(k * d, d);
    gsl_matrix *var = gsl_matrix_alloc(k, d);
    gsl_matrix *w0 = gsl_matrix_alloc(k, 1);
    size_t *rows = malloc(n * sizeof *rows);
    size_t *chosen = malloc(k * sizeof *chosen);
    for (size_t i = 0; i < n; i++)
        rows[i] = i;
    gsl_ran_choose(r, chosen, k, rows, n, sizeof *rows);
    gsl_ran_shuffle(r, chosen, k, sizeof *chosen);
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(m0, c, j, gsl_matrix_get(x, chosen[c], j));
    double *mean = calloc(d, sizeof *mean);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            mean[j] += gsl_matrix_get(x, i, j) / (double)n;
    gsl_matrix *g = gsl_matrix_calloc(d, d);
    for (size_t i = 0; i < n; i++) {
        const double *xi = gsl_matrix_const_ptr(x, i, 0);
        for (size_t p = 0; p < d; p++)
            for (size_t q = 0; q < d; q++)
                *gsl_matrix_ptr(g, p, q) +=
                    (xi[p] - mean[p]) * (xi[q] - mean[q]) / (double)n;
    }
    for (size_t c = 0; c < k; c++) {
        gsl_matrix_set(w0, c, 0, 1.0 / (double)k);
        for (size_t p = 0; p < d; p++) {
            gsl_matrix_set(var, c, p, gsl_matrix_get(g, p, p));
            for (size_t q = 0; q < d; q++)
                gsl_matrix_set(cov, c * d + p, q, gsl_matrix_get(g, p, q));
        }
    }
    char name[256];
    int rc = 0;
    snprintf(name, sizeof name, "gmm_%s.bin", tag);
    rc |= save(dir, name, x);
    snprintf(name, sizeof name, "gmm_%s_means.bin", tag);
    rc |= save(dir, name, m0);
    snprintf(name, sizeof name, "gmm_%s_cov.bin", tag);
    rc |= save(dir, name, cov);
    snprintf(name, sizeof name, "gmm_%s_var.bin", tag);
    rc |= save(dir, name, var);
    snprintf(name, sizeof name, "gmm_%s_w.bin", tag);
    rc |= save(dir, name, w0);
    printf("gmm_%s: N=%zu d=%zu K=%zu\n", tag, n, d, k);
    free(mean);
    free(rows);
    free(chosen);
    free(w);
    gsl_matrix_free(g);
    gsl_matrix_free(m0);
    gsl_matrix_free(cov);
    gsl_matrix_free(var);
    gsl_matrix_free(w0);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(chol);
    gsl_matrix_free(a);
    gsl_rng_free(r);
    return rc;
}

/* SLDS: x_t = A_k x_{t-1} + b_k + e, e ~ N(0, Sigma_k), k Markov. */
static int gen_slds(const char *dir, size_t T, unsigned long seed)
{
    enum { K = 3, D = 2 };
    const double ang[K] = {0.10, -0.30, 0.05};
    const double rad[K] = {0.97, 0.90, 0.60};
    const double off[K][D] = {{0.05, 0.0}, {-0.05, 0.03}, {0.2, -0.2}};
    const double sd[K] = {0.05, 0.10, 0.20};
    const double stay = 0.98;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(T, D);
    double prev[D] = {0.0, 0.0};
    size_t k = 0;
    for (size_t t = 0; t < T; t++) {
        if (t > 0 && gsl_rng_uniform(r) > stay)
            k = (k + 1 + gsl_rng_uniform_int(r, K - 1)) % K;
        const double c = rad[k] * cos(ang[k]), s = rad[k] * sin(ang[k]);
        const double e0 = gsl_ran_gaussian(r, sd[k]);
        const double e1 = gsl_ran_gaussian(r, sd[k]);
        const double x0 = c * prev[0] - s * prev[1] + off[k][0] + e0;
        const double x1 = s * prev[0] + c * prev[1] + off[k][1] + 0.3 * e0 + e1;
        gsl_matrix_set(x, t, 0, x0);
        gsl_matrix_set(x, t, 1, x1);
        prev[0] = x0;
        prev[1] = x1;
    }
    /* initialization shared by every implementation */
    gsl_matrix *a = gsl_matrix_calloc(K, D * D), *b = gsl_matrix_calloc(K, D);
    gsl_matrix *cov = gsl_matrix_calloc(K, D * D), *w = gsl_matrix_alloc(K, 1);
    gsl_matrix *p = gsl_matrix_alloc(K, K), *p0 = gsl_matrix_alloc(1, K);
    for (size_t q = 0; q < K; q++) {
        const double g = 0.6 + 0.15 * (double)q;
        gsl_matrix_set(a, q, 0, g);
        gsl_matrix_set(a, q, 3, g);
        gsl_matrix_set(a, q, 1, 0.05 * (double)q);
        gsl_matrix_set(b, q, 0, 0.02 * (double)q);
        gsl_matrix_set(cov, q, 0, 0.02 * (double)(q + 1));
        gsl_matrix_set(cov, q, 3, 0.02 * (double)(q + 1));
        gsl_matrix_set(w, q, 0, 1.0 / K);
        gsl_matrix_set(p0, 0, q, 1.0 / K);
        for (size_t j = 0; j < K; j++)
            gsl_matrix_set(p, q, j, q == j ? 0.9 : 0.1 / (K - 1));
    }
    int rc = save(dir, "slds.bin", x) | save(dir, "slds_A.bin", a) |
             save(dir, "slds_b.bin", b) | save(dir, "slds_cov.bin", cov) |
             save(dir, "slds_w.bin", w) | save(dir, "slds_P.bin", p) |
             save(dir, "slds_p0.bin", p0);
    printf("slds: T=%zu d=%d K=%d\n", T, D, K);
    gsl_matrix_free(x);
    gsl_matrix_free(a);
    gsl_matrix_free(b);
    gsl_matrix_free(cov);
    gsl_matrix_free(w);
    gsl_matrix_free(p);
    gsl_matrix_free(p0);
    gsl_rng_free(r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int rc = gen_gmm(dir, "a", 100000, 16, 16, 1.0, 1001);
    rc |= gen_gmm(dir, "b", 1000000, 2, 8, 3.0, 1002);
    rc |= gen_gmm(dir, "c", 20000, 64, 32, 0.5, 1003);
    rc |= gen_slds(dir, 500000, 1004);
    return rc != 0;
}
