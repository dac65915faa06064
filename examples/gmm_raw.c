/* A Gaussian mixture written on the raw graph API: a clamped data node, the
 * means, log-weights and Cholesky factors as parameter nodes, one LSE term
 * with the gaussian similarity, and the EM solver. Its energy is minus the
 * log-likelihood. Read this first (docs/architecture.md); lsefit gmm and
 * lse_gmm_fit add starts, selection over K and files around the same core.
 *     build/examples/gmm_raw [data/faithful.csv [K]] */
#include <stdio.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

static void check(lse_status st, const char *msg)
{
    if (st != LSE_OK) {
        fprintf(stderr, "gmm_raw: %s (%s)\n", msg, lse_strerror(st));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : LSE_DATA_DIR "/faithful.csv";
    const size_t K = argc > 2 ? strtoul(argv[2], NULL, 10) : 2;
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    check(lse_table_read(path, NULL, &t, &err), err.message);
    check(lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &x, NULL, &err),
          err.message);
    const size_t n = x->size1, d = x->size2;
    if (K < 1 || K > n)
        check(LSE_EINVAL, "K must be in 1..rows");
    lse_graph *g = lse_graph_new();
    lse_node *data, *mu, *logw, *chol; /* logw starts at 0: equal weights */
    check(lse_graph_add_node(g, "x", n, d, LSE_NODE_CLAMPED, &data), "x");
    check(lse_graph_add_node(g, "mu", K, d, LSE_NODE_PARAM, &mu), "mu");
    check(lse_graph_add_node(g, "logw", K, 1, LSE_NODE_PARAM, &logw), "logw");
    check(lse_graph_add_node(g, "chol", K, d * d, LSE_NODE_PARAM, &chol), "L");
    gsl_matrix_memcpy(lse_node_value(data), x);
    for (size_t k = 0; k < K; k++) { /* evenly spaced rows, unit factors */
        gsl_vector_const_view row = gsl_matrix_const_row(x, k * (n / K));
        gsl_matrix_set_row(lse_node_value(mu), k, &row.vector);
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(lse_node_value(chol), k, j * d + j, 10.0);
    }
    const lse_gaussian_config cov = {.cov = LSE_COV_FULL};
    lse_node *params[2] = {logw, chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(data);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &cov;
    spec.param = params;
    check(lse_graph_add_lse(g, "mixture", &spec, NULL), lse_graph_errmsg(g));
    lse_solver *s = lse_solver_new(g, lse_solver_em);
    lse_solver_opts o = lse_solver_opts_default(); /* stop at |dE| <= 1e-10 */
    o.tol_energy = 1e-10;
    check(lse_solver_set_opts(s, &o), "options");
    lse_solver_result r;
    check(lse_solver_run(s, 10000, NULL, NULL, &r), lse_graph_errmsg(g));
    printf("loglik %.12f after %zu EM iterations\n", -r.energy, r.n_iter);
    lse_solver_free(s);
    lse_graph_free(g);
    gsl_matrix_free(x);
    lse_table_free(t);
    return 0;
}
