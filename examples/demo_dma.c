/* Dynamic mixture attention on a simulated switching series
 * (docs/models/dma.md), built on the public API only.
 *
 *   demo_dma [--check] [--write SERIES.csv] [--seed S] [--iter N]
 *
 * Each transition x_t -> x_{t+1} chooses among K = 2 modes; mode k's score
 * is an attention similarity of x_t to the mode's parent plus a
 * linear-dynamics similarity, inside one log-sum-exp (the library's
 * builder lse_dma_new, models/dma.c):
 *
 *   S_tk = x_t . m_k  +  log N(x_{t+1}; A_k x_t + b_k, s_k^2)
 *   E    = - sum_t log sum_k exp(S_tk)  +  sum_t log sum_k exp(x_t . m_k)
 *
 * The attention part (W_Q x_t)'(W_K z_k) with learned z_k, W_Q, W_K is
 * x_t . m_k with m_k = W_Q' W_K z_k, one free vector per mode. The second
 * term normalises the attention over the modes, so that E is the
 * negative log-likelihood of the series given x_0 (a mixture of linear
 * regressions gated by softmax_k(x_t . m_k)); without it E is unbounded
 * below in m. Fitted by gradient descent (lse_dma_fit: lse_solver_gd,
 * Armijo) on every parameter from a seeded start set here. --check: every gradient against central differences (step
 * 1e-5, relative error below 1e-4 with floor 1e-4; the energy is about 600,
 * so round-off alone gives about 1e-6) and 200 descent steps that never
 * raise the energy (exit 1 on failure).
 *
 * Data: T = 600 steps of a threshold switching AR(1):
 *   x_{t+1} = 0.8 x_t + 0.5 + 0.3 e  if x_t < 0,  0.8 x_t - 0.5 + 0.3 e  else. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#define NT 600
#define K 2

int main(int argc, char **argv)
{
    int check = 0;
    const char *write = NULL;
    unsigned long seed = 3;
    size_t iters = 1000;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--check") == 0)
            check = 1;
        else if (strcmp(argv[a], "--write") == 0 && a + 1 < argc)
            write = argv[++a];
        else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc)
            seed = strtoul(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "--iter") == 0 && a + 1 < argc)
            iters = strtoul(argv[++a], NULL, 10);
        else {
            fprintf(stderr, "demo_dma: unknown option '%s'; usage: demo_dma "
                            "[--check] [--write CSV] [--seed S] [--iter N]\n",
                    argv[a]);
            return 2;
        }
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    double x[NT];
    int mode[NT];
    x[0] = 0.0;
    for (size_t t = 0; t + 1 < NT; t++) {
        mode[t] = x[t] >= 0.0;
        x[t + 1] = 0.8 * x[t] + (mode[t] ? -0.5 : 0.5) +
                   0.3 * gsl_ran_gaussian(rng, 1.0);
    }
    if (write != NULL) {
        FILE *f = fopen(write, "w");
        if (f == NULL) {
            fprintf(stderr, "demo_dma: cannot write %s\n", write);
            return 1;
        }
        fprintf(f, "x\n");
        for (size_t t = 0; t < NT; t++)
            fprintf(f, "%.17g\n", x[t]);
        if (fclose(f) != 0)
            return 1;
    }

    lse_dma_config dc = lse_dma_config_default();
    dc.n_modes = K;
    dc.dim = 1;
    dc.T = NT;
    lse_dma *model = NULL;
    lse_error err = {0};
    gsl_matrix_view xv = gsl_matrix_view_array(x, NT, 1);
    lse_status st = lse_dma_new(&dc, &model, &err);
    if (st == LSE_OK)
        st = lse_dma_set_series(model, &xv.matrix, &err);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_dma: %s\n", err.message);
        return 1;
    }
    lse_graph *g = lse_dma_graph(model);
    lse_node *b = lse_dma_node(model, LSE_DMA_B), *m = lse_dma_node(model, LSE_DMA_M);
    lse_node *A = lse_dma_node(model, LSE_DMA_A);
    lse_node *chol = lse_dma_node(model, LSE_DMA_CHOL);
    lse_node *prev = lse_graph_find_node(g, "prev");
    lse_node *next = lse_graph_find_node(g, "next");
    /* a start that does not know the answer: modes differ a little */
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_set(lse_node_value(b), k, 0, 0.1 * gsl_ran_gaussian(rng, 1.0));
        gsl_matrix_set(lse_node_value(m), k, 0, 0.1 * gsl_ran_gaussian(rng, 1.0));
        gsl_matrix_set(lse_node_value(A), k, 0, 0.5);
        gsl_matrix_set(lse_node_value(chol), k, 0, 1.0);
    }
    int fail = 0;
    if (check) {
        lse_node_set_clamped(prev, 0);
        lse_node_set_clamped(next, 0);
        lse_gradcheck gc;
        st = lse_graph_check_gradient(g, NULL, 1e-5, 1e-4, &gc);
        printf("gradient check: %zu entries, max relative error %.1e at %s\n",
               gc.n_checked, gc.max_error, gc.where);
        fail |= st != LSE_OK || !(gc.max_error < 1e-4);
        lse_node_set_clamped(prev, 1);
        lse_node_set_clamped(next, 1);
    }
    lse_dma_fit_info res;
    st = lse_dma_fit(model, check ? 200 : iters, &res, &err);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_dma: %s\n", err.message);
        return 1;
    }
    if (check) {
        printf("descent: %zu iterations, energy %.4f -> %.4f, rises %zu\n",
               res.n_iter, res.energy_initial, res.energy, res.n_increase);
        fail |= res.n_increase != 0 || !(res.energy < res.energy_initial);
    } else {
        const gsl_matrix *r = lse_term_softmax(lse_dma_modes(model));
        size_t agree = 0;
        for (size_t t = 0; t + 1 < NT; t++)
            agree += (gsl_matrix_get(r, t, 1) > gsl_matrix_get(r, t, 0)) ==
                     (mode[t] == 1);
        if (agree < (NT - 1) / 2)
            agree = NT - 1 - agree; /* labels are exchangeable */
        printf("dynamic mixture attention, K = %d, %d transitions, %zu "
               "gradient steps (converged %s), energy rises %zu\n",
               K, NT - 1, res.n_iter, res.converged ? "yes" : "no",
               res.n_increase);
        printf("log-likelihood %.2f (per step %.4f)\n", -res.energy,
               -res.energy / (NT - 1));
        for (size_t k = 0; k < K; k++)
            printf("mode %zu: x' = %.3f x %+.3f, sd %.3f, attention m %+.3f\n",
                   k, gsl_matrix_get(lse_node_value(A), k, 0),
                   gsl_matrix_get(lse_node_value(b), k, 0),
                   fabs(gsl_matrix_get(lse_node_value(chol), k, 0)),
                   gsl_matrix_get(lse_node_value(m), k, 0));
        printf("most responsible mode = true mode: %zu of %d transitions\n",
               agree, NT - 1);
    }
    lse_dma_free(model);
    gsl_rng_free(rng);
    return fail;
}
