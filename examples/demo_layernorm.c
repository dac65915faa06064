/* LayerNorm as the gradient of an energy, on the iris measurements
 * (docs/models/layernorm.md).
 *
 * Normalises each of the 150 rows (4 measurements in cm) with gamma = 2,
 * delta = (0.1, 0.2, 0.3, 0.4), computing the output as dE/dx of the graph,
 * compares it with the direct formula, checks the gradient of the energy
 * by finite differences, and shows why a per-dimension gain has no energy:
 * the Jacobian of x -> gamma_j (x_j - mean)/sd is not symmetric. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

#define N 150
#define D 4

static int load_iris(gsl_matrix *x)
{
    const char *path = LSE_DATA_DIR "/iris.csv";
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "demo_layernorm: cannot open %s\n", path);
        return 1;
    }
    char line[256];
    size_t n = 0;
    if (fgets(line, sizeof line, f) == NULL)
        n = N + 1;
    while (n < N && fgets(line, sizeof line, f) != NULL) {
        char *p = line, *end;
        for (size_t j = 0; j < D; j++, p = end + 1)
            gsl_matrix_set(x, n, j, strtod(p, &end));
        n++;
    }
    fclose(f);
    if (n != N) {
        fprintf(stderr, "demo_layernorm: %s: expected %d rows\n", path, N);
        return 1;
    }
    return 0;
}

/* y_j = gamma_j (x_j - mean) / sqrt(var + eps) + delta_j */
static void direct(const double *x, const double *gamma, const double *delta,
                   double eps, double *y)
{
    double mean = 0.0, var = 0.0;
    for (size_t j = 0; j < D; j++)
        mean += x[j] / D;
    for (size_t j = 0; j < D; j++)
        var += (x[j] - mean) * (x[j] - mean) / D;
    for (size_t j = 0; j < D; j++)
        y[j] = gamma[j] * (x[j] - mean) / sqrt(var + eps) + delta[j];
}

static double jacobian_asymmetry(const double *x, const double *gamma,
                                 double eps)
{
    const double zero[D] = {0}, h = 1e-6;
    double J[D][D];
    for (size_t k = 0; k < D; k++) {
        double xp[D], xm[D], yp[D], ym[D];
        for (size_t j = 0; j < D; j++)
            xp[j] = xm[j] = x[j];
        xp[k] += h;
        xm[k] -= h;
        direct(xp, gamma, zero, eps, yp);
        direct(xm, gamma, zero, eps, ym);
        for (size_t j = 0; j < D; j++)
            J[j][k] = (yp[j] - ym[j]) / (2 * h);
    }
    double a = 0.0;
    for (size_t j = 0; j < D; j++)
        for (size_t k = 0; k < D; k++)
            a = fmax(a, fabs(J[j][k] - J[k][j]));
    return a;
}

int main(void)
{
    gsl_matrix *x = gsl_matrix_alloc(N, D), *y = gsl_matrix_alloc(N, D);
    gsl_vector *delta = gsl_vector_alloc(D);
    lse_layernorm *ln = NULL;
    int rc = 1;
    if (x == NULL || y == NULL || delta == NULL || load_iris(x) != 0)
        goto done;
    const double gamma = 2.0, eps = 1e-5;
    const double gv[D] = {gamma, gamma, gamma, gamma};
    for (size_t j = 0; j < D; j++)
        gsl_vector_set(delta, j, 0.1 * (double)(j + 1));
    lse_error err;
    if (lse_layernorm_new(x, gamma, delta, eps, &ln, &err) != LSE_OK) {
        fprintf(stderr, "demo_layernorm: %s\n", err.message);
        goto done;
    }
    double e;
    if (lse_layernorm_forward(ln, y, &e, &model_err) != LSE_OK) {
        fprintf(stderr, "demo_layernorm: %s\n", model_err.message);
        goto done;
    }
    double gap = 0.0;
    for (size_t i = 0; i < N; i++) {
        double row[D], ref[D];
        for (size_t j = 0; j < D; j++)
            row[j] = gsl_matrix_get(x, i, j);
        direct(row, gv, delta->data, eps, ref);
        for (size_t j = 0; j < D; j++)
            gap = fmax(gap, fabs(ref[j] - gsl_matrix_get(y, i, j)));
    }
    printf("LayerNorm of %d iris rows (D = %d) as dE/dx, gamma %g, eps %g\n", N,
           D, gamma, eps);
    printf("  energy E = %.6f\n", e);
    printf("  row 0: x = (%.1f, %.1f, %.1f, %.1f) -> y = (%.4f, %.4f, %.4f, "
           "%.4f)\n",
           gsl_matrix_get(x, 0, 0), gsl_matrix_get(x, 0, 1),
           gsl_matrix_get(x, 0, 2), gsl_matrix_get(x, 0, 3),
           gsl_matrix_get(y, 0, 0), gsl_matrix_get(y, 0, 1),
           gsl_matrix_get(y, 0, 2), gsl_matrix_get(y, 0, 3));
    printf("  max |dE/dx - direct LayerNorm| = %.1e\n", gap);
    lse_gradcheck res;
    if (lse_graph_check_gradient(lse_layernorm_graph(ln), NULL, 1e-6, 1e-3,
                                 &res) != LSE_OK) {
        fprintf(stderr, "demo_layernorm: %s\n",
                lse_graph_errmsg(lse_layernorm_graph(ln)));
        goto done;
    }
    printf("  gradient check of E (x, gamma, delta; %zu entries): max "
           "relative error %.1e\n",
           res.n_checked, res.max_error);
    const double row0[D] = {gsl_matrix_get(x, 0, 0), gsl_matrix_get(x, 0, 1),
                            gsl_matrix_get(x, 0, 2), gsl_matrix_get(x, 0, 3)};
    const double unequal[D] = {0.5, 1.0, 1.5, 2.0};
    printf("  Jacobian asymmetry max |J - J'| at row 0: equal gains %.1e, "
           "gains (0.5, 1, 1.5, 2) %.3f -> no energy for a per-dimension "
           "gain\n",
           jacobian_asymmetry(row0, gv, eps),
           jacobian_asymmetry(row0, unequal, eps));
    rc = 0;
done:
    lse_layernorm_free(ln);
    gsl_matrix_free(x);
    gsl_matrix_free(y);
    gsl_vector_free(delta);
    return rc;
}
