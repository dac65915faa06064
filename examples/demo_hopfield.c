/* Modern Hopfield network on the bundled handwritten digits
 * (docs/models/hopfield.md).
 *
 * Stores 16 mutually distinct 8x8 digits (each image centred and scaled to
 * unit norm; cosine between any two stored images < 0.6), corrupts each by
 * masking 25% of its pixels (set to 0) or by Gaussian noise (sd 0.05 per
 * pixel), and retrieves it at beta = 100 with the CCCP update and with
 * gradient descent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

#define N_ROWS 1797
#define DIM 64
#define N_PAT 16

/* Read the pixel columns of digits.csv, centre each row and scale it to
 * unit norm; labels into @p label. */
static int load(gsl_matrix *x, int *label)
{
    const char *path = LSE_DATA_DIR "/digits.csv";
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "demo_hopfield: cannot open %s\n", path);
        return 1;
    }
    char line[4096];
    size_t n = 0;
    if (fgets(line, sizeof line, f) == NULL) /* header */
        n = N_ROWS + 1;
    while (n < N_ROWS && fgets(line, sizeof line, f) != NULL) {
        char *p = line, *end;
        double mean = 0.0, norm = 0.0;
        for (size_t j = 0; j < DIM; j++, p = end + 1) {
            const double v = strtod(p, &end);
            gsl_matrix_set(x, n, j, v);
            mean += v / DIM;
        }
        label[n] = (int)strtol(p, NULL, 10);
        for (size_t j = 0; j < DIM; j++) {
            const double v = gsl_matrix_get(x, n, j) - mean;
            gsl_matrix_set(x, n, j, v);
            norm += v * v;
        }
        for (size_t j = 0; j < DIM; j++)
            gsl_matrix_set(x, n, j, gsl_matrix_get(x, n, j) / sqrt(norm));
        n++;
    }
    fclose(f);
    if (n != N_ROWS) {
        fprintf(stderr, "demo_hopfield: %s: expected %d rows\n", path, N_ROWS);
        return 1;
    }
    return 0;
}

static void show(const char *title, const gsl_matrix *m, size_t row)
{
    static const char shade[] = " .:-=+*#%@";
    printf("%s\n", title);
    for (size_t r = 0; r < 8; r++) {
        printf("    ");
        for (size_t c = 0; c < 8; c++) {
            const double v = gsl_matrix_get(m, row, 8 * r + c);
            int k = (int)floor((v + 0.15) / 0.45 * 9.0);
            k = k < 0 ? 0 : (k > 9 ? 9 : k);
            putchar(shade[k]);
            putchar(shade[k]);
        }
        putchar('\n');
    }
}

static int run(lse_hopfield *h, const gsl_matrix *patterns, const gsl_matrix *q,
               lse_hopfield_method method, const char *what, gsl_matrix *out)
{
    lse_hopfield_info info;
    if (lse_hopfield_retrieve(h, q, method, 200, out, &info, &model_err) !=
        LSE_OK) {
        fprintf(stderr, "demo_hopfield: %s\n", model_err.message);
        return 1;
    }
    const gsl_matrix *a = lse_hopfield_softmax(h);
    size_t right = 0;
    double err = 0.0;
    for (size_t k = 0; k < N_PAT; k++) {
        size_t best = 0;
        for (size_t m = 1; m < N_PAT; m++)
            if (gsl_matrix_get(a, k, m) > gsl_matrix_get(a, k, best))
                best = m;
        right += best == k;
        for (size_t j = 0; j < DIM; j++)
            err = fmax(err, fabs(gsl_matrix_get(out, k, j) -
                                 gsl_matrix_get(patterns, k, j)));
    }
    printf("  %-5s %-6s retrieved %2zu/%d  iterations %3zu  E %9.5f -> "
           "%9.5f  energy rises %zu  max |xi - m| %.1e\n",
           method == LSE_HOPFIELD_CCCP ? "cccp" : "gd", what, right, N_PAT,
           info.n_iter, info.energy_initial, info.energy, info.n_increase, err);
    return 0;
}

int main(void)
{
    gsl_matrix *x = gsl_matrix_alloc(N_ROWS, DIM);
    gsl_matrix *patterns = gsl_matrix_alloc(N_PAT, DIM);
    gsl_matrix *masked = gsl_matrix_alloc(N_PAT, DIM);
    gsl_matrix *noisy = gsl_matrix_alloc(N_PAT, DIM);
    gsl_matrix *out = gsl_matrix_alloc(N_PAT, DIM);
    int *label = malloc(N_ROWS * sizeof *label);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    lse_hopfield *h = NULL;
    int rc = 1;
    if (x == NULL || patterns == NULL || masked == NULL || noisy == NULL ||
        out == NULL || label == NULL || rng == NULL || load(x, label) != 0)
        goto done;
    /* greedy choice of mutually distinct stored patterns */
    size_t kept = 0;
    int labels[N_PAT];
    for (size_t i = 0; i < N_ROWS && kept < N_PAT; i++) {
        int ok = 1;
        for (size_t k = 0; k < kept && ok; k++) {
            double c = 0.0;
            for (size_t j = 0; j < DIM; j++)
                c += gsl_matrix_get(x, i, j) * gsl_matrix_get(patterns, k, j);
            ok = c < 0.6;
        }
        if (ok) {
            gsl_vector_const_view r = gsl_matrix_const_row(x, i);
            gsl_matrix_set_row(patterns, kept, &r.vector);
            labels[kept++] = label[i];
        }
    }
    printf("stored %zu patterns, labels:", kept);
    for (size_t k = 0; k < kept; k++)
        printf(" %d", labels[k]);
    printf("\n");
    /* corrupted queries */
    gsl_rng_set(rng, 7);
    gsl_matrix_memcpy(masked, patterns);
    gsl_matrix_memcpy(noisy, patterns);
    for (size_t k = 0; k < N_PAT; k++) {
        size_t idx[DIM], pick[DIM / 4];
        for (size_t j = 0; j < DIM; j++)
            idx[j] = j;
        gsl_ran_choose(rng, pick, DIM / 4, idx, DIM, sizeof(size_t));
        for (size_t j = 0; j < DIM / 4; j++)
            gsl_matrix_set(masked, k, pick[j], 0.0);
        for (size_t j = 0; j < DIM; j++)
            *gsl_matrix_ptr(noisy, k, j) += gsl_ran_gaussian(rng, 0.05);
    }
    lse_error err;
    if (lse_hopfield_new(patterns, 100.0, &h, &err) != LSE_OK) {
        fprintf(stderr, "demo_hopfield: %s\n", err.message);
        goto done;
    }
    printf("beta = %g, 25%% of the pixels masked or noise sd 0.05:\n",
           lse_hopfield_beta(h));
    if (run(h, patterns, masked, LSE_HOPFIELD_CCCP, "masked", out) != 0 ||
        run(h, patterns, noisy, LSE_HOPFIELD_CCCP, "noisy", out) != 0 ||
        run(h, patterns, noisy, LSE_HOPFIELD_GD, "noisy", out) != 0 ||
        run(h, patterns, masked, LSE_HOPFIELD_GD, "masked", out) != 0)
        goto done;
    show("stored pattern 2:", patterns, 2);
    show("masked query:", masked, 2);
    show("retrieved from the masked query (gd):", out, 2);
    rc = 0;
done:
    lse_hopfield_free(h);
    gsl_rng_free(rng);
    free(label);
    gsl_matrix_free(x);
    gsl_matrix_free(patterns);
    gsl_matrix_free(masked);
    gsl_matrix_free(noisy);
    gsl_matrix_free(out);
    return rc;
}
