/* demo_gmm: fit a two-component full-covariance Gaussian mixture to the Old
 * Faithful eruptions (data/faithful.csv: eruptions, waiting; 272 rows) and
 * print what it found. Run: build/examples/demo_gmm */
#include <stdio.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

/* Read the two numeric columns of faithful.csv (header line skipped). */
static gsl_matrix *read_faithful(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char line[256];
    double buf[2 * 1024];
    size_t n = 0;
    if (fgets(line, sizeof line, f) == NULL) { /* header */
        fclose(f);
        return NULL;
    }
    while (n < 1024 && fscanf(f, "%lf,%lf", &buf[2 * n], &buf[2 * n + 1]) == 2)
        n++;
    fclose(f);
    if (n == 0)
        return NULL;
    gsl_matrix *x = gsl_matrix_alloc(n, 2);
    if (x == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        gsl_matrix_set(x, i, 0, buf[2 * i]);
        gsl_matrix_set(x, i, 1, buf[2 * i + 1]);
    }
    return x;
}

int main(void)
{
    const char *path = LSE_DATA_DIR "/faithful.csv";
    gsl_matrix *x = read_faithful(path);
    if (x == NULL) {
        fprintf(stderr, "demo_gmm: cannot read %s\n", path);
        return EXIT_FAILURE;
    }
    lse_gmm *m = NULL;
    lse_error err = {0};
    lse_status st = lse_gmm_new(2, 2, LSE_COV_FULL, &m, &err);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.seed = 1;
    o.n_init = 3;
    o.tol = 1e-6;
    if (st == LSE_OK)
        st = lse_gmm_fit(m, x, &o, &err);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_gmm: %s\n",
                err.message[0] ? err.message : lse_strerror(st));
        lse_gmm_free(m);
        gsl_matrix_free(x);
        return EXIT_FAILURE;
    }
    const lse_gmm_fit_info *info = lse_gmm_info(m);
    printf("Old Faithful (%zu samples), K = 2, full covariances\n",
           info->n_samples);
    printf("EM iterations: %zu (%s), best of %zu runs: run %zu\n", info->n_iter,
           info->converged ? "converged" : "not converged", o.n_init,
           info->best_run);
    printf("log-likelihood: %.6f total, %.6f per sample\n", info->loglik,
           info->loglik_per_sample);
    printf("BIC %.4f  AIC %.4f  (%zu free parameters)\n", info->bic, info->aic,
           lse_gmm_n_params(m));
    gsl_matrix *cov = gsl_matrix_alloc(2, 2);
    for (size_t k = 0; cov != NULL && k < 2; k++) {
        lse_gmm_get_covariance(m, k, cov);
        printf("component %zu: weight %.4f  mean (%.4f, %.4f)  "
               "cov [[%.4f, %.4f], [%.4f, %.4f]]\n",
               k, gsl_vector_get(lse_gmm_weights(m), k),
               gsl_matrix_get(lse_gmm_means(m), k, 0),
               gsl_matrix_get(lse_gmm_means(m), k, 1),
               gsl_matrix_get(cov, 0, 0), gsl_matrix_get(cov, 0, 1),
               gsl_matrix_get(cov, 1, 0), gsl_matrix_get(cov, 1, 1));
    }
    gsl_matrix_free(cov);
    lse_gmm_free(m);
    gsl_matrix_free(x);
    return EXIT_SUCCESS;
}
