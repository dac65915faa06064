/* One inference + learning step of the masked-digits attention model
 * (examples/heads_digits.c, docs/performance.md "Attention heads"):
 * the forward pass of every head (scores, softmax, energy), the squared
 * error of the reconstruction (lse_loss_recon) with its gradient, one Adam
 * step (lse_optim). bench/heads_torch.py writes the inputs, runs this
 * program and the same computation in PyTorch, and compares them.
 *
 *   heads_step DIR H SHARE STEPS THREADS
 *
 * DIR holds query, bank, values, target, wc, wp (bench matrix files;
 * NaN targets are not scored). Writes DIR/lse_check (a 1 x n row: loss,
 * energy, dL/dW_c, dL/dW_p flattened, at the initial parameters, before
 * any step) and prints "RESULT ms_step=<median over BENCH_REPS runs of
 * STEPS steps>". */
#include <stdio.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

#include "bench_util.h"

static int fail(const char *what)
{
    fprintf(stderr, "heads_step: %s\n", what);
    return 1;
}

static gsl_matrix *load(const char *dir, const char *name)
{
    char path[4096];
    bench_path(path, sizeof path, dir, name);
    gsl_matrix *m = bench_read(path);
    if (m == NULL)
        fprintf(stderr, "heads_step: cannot read %s\n", path);
    return m;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return fail("usage: heads_step DIR H SHARE STEPS THREADS");
    const char *dir = argv[1];
    const size_t H = (size_t)atol(argv[2]);
    const unsigned share = atoi(argv[3]) ? LSE_HEADS_SHARE_PARENT : 0;
    const int steps = atoi(argv[4]);
    lse_set_num_threads(atoi(argv[5]));
    gsl_matrix *q = load(dir, "query"), *bank = load(dir, "bank");
    gsl_matrix *vals = load(dir, "values"), *target = load(dir, "target");
    gsl_matrix *wc0 = load(dir, "wc"), *wp0 = load(dir, "wp");
    if (!q || !bank || !vals || !target || !wc0 || !wp0 || H == 0 || steps < 1)
        return fail("bad inputs");
    lse_graph *g = lse_graph_new();
    lse_node *nq, *nb, *nv, *wc, *wp;
    if (lse_graph_add_node(g, "query", q->size1, q->size2, LSE_NODE_CLAMPED, &nq) ||
        lse_graph_add_node(g, "bank", bank->size1, bank->size2, LSE_NODE_CLAMPED, &nb) ||
        lse_graph_add_node(g, "values", vals->size1, vals->size2, LSE_NODE_CLAMPED, &nv) ||
        lse_graph_add_node(g, "W_c", wc0->size1, wc0->size2, LSE_NODE_PARAM, &wc) ||
        lse_graph_add_node(g, "W_p", wp0->size1, wp0->size2, LSE_NODE_PARAM, &wp))
        return fail(lse_graph_errmsg(g));
    gsl_matrix_memcpy(lse_node_value(nq), q);
    gsl_matrix_memcpy(lse_node_value(nb), bank);
    gsl_matrix_memcpy(lse_node_value(nv), vals);
    lse_heads_spec sp = lse_heads_spec_default();
    sp.child = lse_view_all(nq);
    sp.parent = lse_view_all(nb);
    sp.n_heads = H;
    sp.share = share;
    sp.base = lse_sim_scaled_dot;
    sp.w_child = wc;
    sp.w_parent = wp;
    lse_term *t;
    if (lse_graph_add_heads(g, "attend", &sp, &t) != LSE_OK)
        return fail(lse_graph_errmsg(g));
    lse_optim_opts oo = lse_optim_opts_default(); /* Adam */
    oo.lr = 0.03;
    const lse_view values = lse_view_all(nv);
    const double scale = 1.0 / (double)q->size1;
    const int reps = bench_reps();
    double *ms = malloc((size_t)reps * sizeof *ms);
    for (int r = 0; r <= reps; r++) {
        gsl_matrix_memcpy(lse_node_value(wc), wc0);
        gsl_matrix_memcpy(lse_node_value(wp), wp0);
        lse_optim *opt = lse_optim_new(g, &oo);
        if (r == 0) { /* the check: loss, energy, gradients */
            double loss, energy;
            if (lse_graph_zero_grad(g) ||
                lse_loss_recon(t, values, target, NULL, scale, 1, &loss) ||
                lse_graph_energy(g, &energy))
                return fail(lse_graph_errmsg(g));
            const size_t nwc = wc0->size1 * wc0->size2;
            const size_t nwp = wp0->size1 * wp0->size2;
            gsl_matrix *out = gsl_matrix_alloc(1, 2 + nwc + nwp);
            gsl_matrix_set(out, 0, 0, loss);
            gsl_matrix_set(out, 0, 1, energy);
            for (size_t i = 0; i < nwc; i++)
                gsl_matrix_set(out, 0, 2 + i, lse_node_grad(wc)->data[i]);
            for (size_t i = 0; i < nwp; i++)
                gsl_matrix_set(out, 0, 2 + nwc + i, lse_node_grad(wp)->data[i]);
            char path[4096];
            bench_path(path, sizeof path, dir, "lse_check");
            if (bench_write(path, out) != 0)
                return fail("cannot write lse_check");
            gsl_matrix_free(out);
        }
        /* run 0 also warms up */
        const double t0 = bench_now();
        for (int s = 0; s < steps; s++) {
            double loss;
            if (lse_graph_zero_grad(g) ||
                lse_loss_recon(t, values, target, NULL, scale, 1, &loss) ||
                lse_optim_step(opt))
                return fail(lse_graph_errmsg(g));
        }
        if (r > 0)
            ms[r - 1] = 1e3 * (bench_now() - t0) / steps;
        lse_optim_free(opt);
    }
    printf("RESULT ms_step=%.4f threads=%d\n", bench_median(ms, reps),
           lse_get_num_threads());
    free(ms);
    lse_graph_free(g);
    gsl_matrix_free(q);
    gsl_matrix_free(bank);
    gsl_matrix_free(vals);
    gsl_matrix_free(target);
    gsl_matrix_free(wc0);
    gsl_matrix_free(wp0);
    return 0;
}
