/* demo_slds: a 2-mode Markov-switching AR(1) model (autoregressive HMM) of
 * US real GDP growth, quarterly 1959Q2-2009Q3 (data/gdp_growth.csv,
 * column growth_pct = 100 * diff(log real GDP)), in the spirit of
 * Hamilton (1989): one regime of low or negative growth, one of normal
 * growth. Prints each regime's AR coefficient, offset, implied mean,
 * innovation variance, the transition matrix, and the quarters the Viterbi
 * path assigns to the low-growth regime.
 *
 * Run: build/examples/demo_slds [path/to/gdp_growth.csv] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

#define MAX_ROWS 4096

/* Read columns "quarter" and "growth_pct" of a simple CSV (no quoting). */
static int read_gdp(const char *path, double *growth, char (*quarter)[16],
                    size_t *n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    char line[512];
    int col_g = -1, col_q = -1;
    if (fgets(line, sizeof line, f) != NULL) {
        int c = 0;
        for (char *tok = strtok(line, ",\r\n"); tok != NULL;
             tok = strtok(NULL, ",\r\n"), c++) {
            if (strcmp(tok, "growth_pct") == 0)
                col_g = c;
            else if (strcmp(tok, "quarter") == 0)
                col_q = c;
        }
    }
    if (col_g < 0 || col_q < 0) {
        fprintf(stderr, "%s: no 'growth_pct' or 'quarter' column\n", path);
        fclose(f);
        return -1;
    }
    *n = 0;
    while (fgets(line, sizeof line, f) != NULL && *n < MAX_ROWS) {
        int c = 0, got = 0;
        for (char *tok = strtok(line, ",\r\n"); tok != NULL;
             tok = strtok(NULL, ",\r\n"), c++) {
            if (c == col_g) {
                char *end;
                growth[*n] = strtod(tok, &end);
                got += end != tok;
            } else if (c == col_q) {
                snprintf(quarter[*n], sizeof quarter[*n], "%s", tok);
                got++;
            }
        }
        if (got == 2)
            (*n)++;
    }
    fclose(f);
    return 0;
}

/* Print the runs of steps whose mode is k as "first-last" quarters. */
static void print_runs(const size_t *path, size_t n, size_t k,
                       const size_t *rows, char (*quarter)[16])
{
    size_t count = 0;
    int col = 0;
    for (size_t i = 0; i < n; i++) {
        if (path[i] != k)
            continue;
        count++;
        if (i > 0 && path[i - 1] == k)
            continue;
        size_t j = i;
        while (j + 1 < n && path[j + 1] == k)
            j++;
        if (col > 60) {
            printf("\n");
            col = 0;
        }
        col += printf(" %s", quarter[rows[i]]);
        if (j > i)
            col += printf("-%s", quarter[rows[j]]);
    }
    printf("\n  (%zu of %zu quarters)\n", count, n);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : LSE_DATA_DIR "/gdp_growth.csv";
    static double growth[MAX_ROWS];
    static char quarter[MAX_ROWS][16];
    size_t T = 0;
    if (read_gdp(path, growth, quarter, &T) != 0)
        return EXIT_FAILURE;
    gsl_matrix_view x = gsl_matrix_view_array(growth, T, 1);

    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 2;
    cfg.dim = 1;
    cfg.lags = 1;
    cfg.markov = 1;
    cfg.cov = LSE_COV_TIED; /* one innovation variance, as Hamilton */
    lse_slds *m = NULL;
    lse_error err;
    lse_slds_opts o = lse_slds_opts_default();
    o.n_init = 20;
    o.seed = 1;
    o.tol = 1e-9;
    size_t *path_k = malloc(T * sizeof *path_k);
    size_t *rows = malloc(T * sizeof *rows);
    size_t n_steps = 0;
    if (path_k == NULL || rows == NULL ||
        lse_slds_new(&cfg, &m, &err) != LSE_OK ||
        lse_slds_fit(m, &x.matrix, NULL, &o, &err) != LSE_OK ||
        lse_slds_steps(m, T, NULL, rows, &n_steps, &err) != LSE_OK ||
        lse_slds_viterbi(m, &x.matrix, NULL, path_k, &err) != LSE_OK) {
        fprintf(stderr, "demo_slds: %s\n", err.message);
        lse_slds_free(m);
        free(path_k);
        free(rows);
        return EXIT_FAILURE;
    }
    printf("US real GDP growth %s-%s (%zu quarters, %% per quarter)\n",
           quarter[0], quarter[T - 1], T);
    printf("2-regime Markov-switching AR(1): x_t = a_k x_{t-1} + b_k + "
           "N(0, s2_k)\n");
    printf("log-likelihood %.3f, %zu EM iterations (%s), BIC %.2f\n\n",
           lse_slds_loglik(m), lse_slds_n_iter(m),
           lse_slds_converged(m) ? "converged" : "not converged",
           lse_slds_bic(m));

    /* order regimes by implied mean, low first */
    double a[2], b[2], s2[2], mu[2];
    for (size_t k = 0; k < 2; k++) {
        gsl_matrix *ak = gsl_matrix_alloc(1, 1), *sk = gsl_matrix_alloc(1, 1);
        gsl_vector *bk = gsl_vector_alloc(1);
        lse_slds_get_a(m, k, ak);
        lse_slds_get_b(m, k, bk);
        lse_slds_get_cov(m, k, sk);
        a[k] = gsl_matrix_get(ak, 0, 0);
        b[k] = gsl_vector_get(bk, 0);
        s2[k] = gsl_matrix_get(sk, 0, 0);
        mu[k] = b[k] / (1.0 - a[k]);
        gsl_matrix_free(ak);
        gsl_matrix_free(sk);
        gsl_vector_free(bk);
    }
    const size_t lo = mu[0] <= mu[1] ? 0 : 1, hi = 1 - lo;
    gsl_matrix *p = gsl_matrix_alloc(2, 2);
    lse_slds_get_transition(m, p);
    const size_t order[2] = {lo, hi};
    const char *name[2] = {"low growth", "normal growth"};
    printf("%-14s %8s %8s %10s %8s %10s\n", "regime", "a_k", "b_k",
           "mean b/(1-a)", "s2_k", "duration");
    for (size_t r = 0; r < 2; r++) {
        const size_t k = order[r];
        printf("%-14s %8.3f %8.3f %12.3f %8.3f %8.1f q\n", name[r], a[k], b[k],
               mu[k], s2[k], 1.0 / (1.0 - gsl_matrix_get(p, k, k)));
    }
    printf("\ntransition matrix P(row -> column):\n");
    for (size_t r = 0; r < 2; r++)
        printf("  %-14s %6.3f %6.3f\n", name[r],
               gsl_matrix_get(p, order[r], order[0]),
               gsl_matrix_get(p, order[r], order[1]));

    printf("\nlow-growth quarters on the Viterbi path:\n");
    print_runs(path_k, n_steps, lo, rows, quarter);

    /* the same model with one variance per regime */
    lse_slds *mf = NULL;
    cfg.cov = LSE_COV_FULL;
    if (lse_slds_new(&cfg, &mf, &err) != LSE_OK ||
        lse_slds_fit(mf, &x.matrix, NULL, &o, &err) != LSE_OK ||
        lse_slds_viterbi(mf, &x.matrix, NULL, path_k, &err) != LSE_OK) {
        fprintf(stderr, "demo_slds: %s\n", err.message);
    } else {
        gsl_matrix *s0 = gsl_matrix_alloc(1, 1), *s1 = gsl_matrix_alloc(1, 1);
        lse_slds_get_cov(mf, 0, s0);
        lse_slds_get_cov(mf, 1, s1);
        const size_t hv =
            gsl_matrix_get(s0, 0, 0) > gsl_matrix_get(s1, 0, 0) ? 0 : 1;
        printf("\nwith one variance per regime: log-likelihood %.3f, BIC "
               "%.2f;\nthe regimes split by volatility (variances %.3f and "
               "%.3f);\nhigh-variance quarters on the Viterbi path:\n",
               lse_slds_loglik(mf), lse_slds_bic(mf),
               gsl_matrix_get(hv == 0 ? s0 : s1, 0, 0),
               gsl_matrix_get(hv == 0 ? s1 : s0, 0, 0));
        print_runs(path_k, n_steps, hv, rows, quarter);
        gsl_matrix_free(s0);
        gsl_matrix_free(s1);
    }
    lse_slds_free(mf);
    gsl_matrix_free(p);
    free(path_k);
    free(rows);
    lse_slds_free(m);
    return EXIT_SUCCESS;
}
