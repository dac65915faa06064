/* Two-layer predictive coding on the bundled digits
 * (docs/models/predcoding.md): the first 100 images (8x8 pixels scaled to [0,
 * 1]) are explained by 16-dimensional latents (identity), themselves explained
 * by 4-dimensional latents through tanh, with a unit Gaussian prior on the top
 * layer. Usage: demo_predcoding [N_IMAGES] [EM_ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <lsegraph/lsegraph.h>

static gsl_matrix *read_pixels(const char *path, size_t n_rows)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *all = NULL, *x = NULL;
    size_t cols[64];
    for (size_t j = 0; j < 64; j++)
        cols[j] = j; /* p0 .. p63; the label (column 64) is not used */
    if (lse_table_read(path, NULL, &t, &err) != LSE_OK ||
        lse_table_to_matrix(t, cols, 64, LSE_MISSING_ERROR, &all, NULL, &err) !=
            LSE_OK) {
        fprintf(stderr, "demo_predcoding: %s\n", err.message);
        lse_table_free(t);
        return NULL;
    }
    lse_table_free(t);
    if (n_rows > all->size1)
        n_rows = all->size1;
    x = gsl_matrix_alloc(n_rows, 64);
    if (x != NULL) {
        gsl_matrix_const_view top =
            gsl_matrix_const_submatrix(all, 0, 0, n_rows, 64);
        gsl_matrix_memcpy(x, &top.matrix);
        gsl_matrix_scale(x, 1.0 / 16.0);
    }
    gsl_matrix_free(all);
    return x;
}

/* mean over columns of the column variances (the mse of predicting the mean) */
static double pixel_variance(const gsl_matrix *x)
{
    double v = 0.0;
    for (size_t j = 0; j < x->size2; j++) {
        double m = 0.0, s = 0.0;
        for (size_t i = 0; i < x->size1; i++)
            m += gsl_matrix_get(x, i, j);
        m /= (double)x->size1;
        for (size_t i = 0; i < x->size1; i++) {
            const double d = gsl_matrix_get(x, i, j) - m;
            s += d * d;
        }
        v += s / (double)x->size1;
    }
    return v / (double)x->size2;
}

static int report(const lse_solver *s, void *user)
{
    const size_t *every = user;
    const size_t it = lse_solver_n_iter(s);
    if (it % *every == 0)
        printf("  EM iteration %3zu  energy %.4f\n", it, lse_solver_energy(s));
    return 0;
}

int main(int argc, char **argv)
{
    const size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 100;
    const size_t iters = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 60;
    gsl_matrix *x = read_pixels(LSE_DATA_DIR "/digits.csv", n);
    if (x == NULL || n == 0)
        return 1;
    const size_t dims[2] = {16, 4};
    const lse_activation acts[2] = {LSE_ACT_IDENTITY, LSE_ACT_TANH};
    lse_predcoding_opts o = lse_predcoding_opts_default();
    o.act = acts;
    o.weight_decay = 1e-3;
    lse_predcoding *pc = NULL;
    lse_error err;
    if (lse_predcoding_new(x, 2, dims, &o, &pc, &err) != LSE_OK) {
        fprintf(stderr, "demo_predcoding: %s\n", err.message);
        gsl_matrix_free(x);
        return 1;
    }
    const clock_t t0 = clock();
    lse_solver_result r;
    double mse1, mse2;
    lse_status st = lse_predcoding_infer(pc, 500, 1e-9, &r, NULL);
    if (st == LSE_OK)
        st = lse_predcoding_error(pc, 1, &mse1, NULL);
    if (st == LSE_OK)
        st = lse_predcoding_error(pc, 2, &mse2, NULL);
    if (st != LSE_OK)
        goto fail;
    printf("predictive coding on %zu digits: 64 <- 16 (identity) <- 4 (tanh)\n",
           x->size1);
    printf("before learning: energy %.4f, pixel mse %.5f, layer-1 mse %.5f\n",
           r.energy, mse1, mse2);
    size_t every = 10;
    lse_predcoding_fit_opts f = lse_predcoding_fit_opts_default();
    f.max_iter = iters;
    f.callback = report;
    f.user = &every;
    st = lse_predcoding_learn(pc, &f, &r, NULL);
    if (st == LSE_OK)
        st = lse_predcoding_infer(pc, 500, 1e-9, &r, NULL);
    if (st == LSE_OK)
        st = lse_predcoding_error(pc, 1, &mse1, NULL);
    if (st == LSE_OK)
        st = lse_predcoding_error(pc, 2, &mse2, NULL);
    if (st != LSE_OK)
        goto fail;
    printf("after %zu EM iterations: energy %.4f, pixel mse %.5f, layer-1 mse "
           "%.5f\n",
           iters, r.energy, mse1, mse2);
    printf("(pixel variance %.5f; %.1f s)\n", pixel_variance(x),
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    lse_predcoding_free(pc);
    gsl_matrix_free(x);
    return 0;
fail:
    fprintf(stderr, "demo_predcoding: %s: %s\n", lse_strerror(st),
            lse_graph_errmsg(lse_predcoding_graph(pc)));
    lse_predcoding_free(pc);
    gsl_matrix_free(x);
    return 1;
}
