/* Dynamic mixture attention on a simulated switching series
 * (docs/models/dma.md), built on the public API only.
 *
 *   demo_dma [--check] [--write SERIES.csv] [--seed S] [--iter N]
 *
 * Each transition x_t -> x_{t+1} chooses among K = 2 modes; mode k's score
 * is an attention similarity of x_t to the mode's parent plus a
 * linear-dynamics similarity, inside one log-sum-exp (lse_sim_sum):
 *
 *   S_tk = x_t . m_k  +  log N(x_{t+1}; A_k x_t + b_k, s_k^2)
 *   E    = - sum_t log sum_k exp(S_tk)  +  sum_t log sum_k exp(x_t . m_k)
 *
 * The attention part (W_Q x_t)'(W_K z_k) with learned z_k, W_Q, W_K is
 * x_t . m_k with m_k = W_Q' W_K z_k, one free vector per mode. The second
 * (custom) term normalises the attention over the modes, so that E is the
 * negative log-likelihood of the series given x_0 (a mixture of linear
 * regressions gated by softmax_k(x_t . m_k)); without it E is unbounded
 * below in m. Fitted by gradient descent (lse_solver_gd, Armijo) on every
 * parameter. --check: every gradient against central differences (step
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

#define T 600
#define K 2

/* --- attention of the context x_t to the mode's parent: S = x_t . m_k --- */
static lse_status ca_check(const lse_sim_shape *sh, const void *cfg, char *msg,
                           size_t len)
{
    (void)cfg;
    if (sh->d_context == 0 || sh->param_rows[0] != sh->n_parent ||
        sh->param_cols[0] != sh->d_context) {
        snprintf(msg, len, "context-attention: m must be (n_parent, d_context)");
        return LSE_EDIM;
    }
    return LSE_OK;
}
static lse_status ca_work_new(const lse_sim_shape *sh, const void *cfg,
                              void **out)
{
    (void)sh;
    (void)cfg;
    *out = NULL;
    return LSE_OK;
}
static void ca_work_free(void *w) { (void)w; }
static lse_status ca_eval(const lse_sim_args *a, gsl_matrix *s)
{
    const gsl_matrix *m = a->param[0], *x = a->context;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t k = 0; k < m->size1; k++) {
            double d = 0.0;
            for (size_t j = 0; j < x->size2; j++)
                d += gsl_matrix_get(x, i, j) * gsl_matrix_get(m, k, j);
            gsl_matrix_set(s, i, k, d);
        }
    return LSE_OK;
}
static lse_status ca_grad(const lse_sim_args *a, const gsl_matrix *g,
                          const lse_sim_grads *out)
{
    const gsl_matrix *m = a->param[0], *x = a->context;
    gsl_matrix *gm = out->param != NULL ? out->param[0] : NULL;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t k = 0; k < m->size1; k++) {
            const double gik = gsl_matrix_get(g, i, k);
            for (size_t j = 0; j < x->size2; j++) {
                if (out->context != NULL)
                    *gsl_matrix_ptr(out->context, i, j) +=
                        gik * gsl_matrix_get(m, k, j);
                if (gm != NULL)
                    *gsl_matrix_ptr(gm, k, j) += gik * gsl_matrix_get(x, i, j);
            }
        }
    return LSE_OK;
}
static const char *const ca_params[] = {"m"};
static const lse_sim_type ca_type = {
    .name = "context-attention", .n_param = 1, .param_names = ca_params,
    .flags = LSE_SIM_NEEDS_CONTEXT, .check = ca_check,
    .work_new = ca_work_new, .work_free = ca_work_free, .eval = ca_eval,
    .grad = ca_grad};

/* --- normaliser: + sum_t log sum_k exp(x_t . m_k); views x (n, d), m --- */
static lse_status norm_check(const gsl_matrix *const *v, size_t n,
                             const void *cfg, char *msg, size_t len)
{
    (void)cfg;
    if (n != 2 || v[0]->size2 != v[1]->size2) {
        snprintf(msg, len, "gate normaliser: views x (n, d) and m (K, d)");
        return LSE_EDIM;
    }
    return LSE_OK;
}
static lse_status norm_eval(const gsl_matrix *const *v, gsl_matrix *const *gr,
                            double *energy)
{
    const gsl_matrix *x = v[0], *m = v[1];
    double e = 0.0, z[16];
    if (m->size1 > 16)
        return LSE_EDIM;
    for (size_t i = 0; i < x->size1; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (size_t k = 0; k < m->size1; k++) {
            z[k] = 0.0;
            for (size_t j = 0; j < x->size2; j++)
                z[k] += gsl_matrix_get(x, i, j) * gsl_matrix_get(m, k, j);
            mx = fmax(mx, z[k]);
        }
        for (size_t k = 0; k < m->size1; k++)
            sum += exp(z[k] - mx);
        e += mx + log(sum);
        if (gr == NULL)
            continue;
        for (size_t k = 0; k < m->size1; k++) {
            const double p = exp(z[k] - mx) / sum;
            for (size_t j = 0; j < x->size2; j++) {
                if (gr[0] != NULL)
                    *gsl_matrix_ptr(gr[0], i, j) += p * gsl_matrix_get(m, k, j);
                if (gr[1] != NULL)
                    *gsl_matrix_ptr(gr[1], k, j) += p * gsl_matrix_get(x, i, j);
            }
        }
    }
    *energy = e;
    return LSE_OK;
}
static lse_status norm_energy(const gsl_matrix *const *v, size_t n,
                              const void *cfg, double *energy)
{
    (void)n;
    (void)cfg;
    return norm_eval(v, NULL, energy);
}
static lse_status norm_grad(const gsl_matrix *const *v, size_t n,
                            const void *cfg, gsl_matrix *const *gr,
                            double *energy)
{
    (void)n;
    (void)cfg;
    return norm_eval(v, gr, energy);
}
static const lse_custom_type norm_type = {
    .name = "gate-normaliser", .config_size = 0, .check = norm_check,
    .energy = norm_energy, .grad = norm_grad};

static int count_rises(const lse_solver *s, void *user)
{
    double *st = user; /* [previous E, rises] */
    const double e = lse_solver_energy(s);
    if (e > st[0] + 1e-12 * fmax(1.0, fabs(e)))
        st[1] += 1.0;
    st[0] = e;
    return 0;
}

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
    double x[T];
    int mode[T];
    x[0] = 0.0;
    for (size_t t = 0; t + 1 < T; t++) {
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
        for (size_t t = 0; t < T; t++)
            fprintf(f, "%.17g\n", x[t]);
        if (fclose(f) != 0)
            return 1;
    }

    lse_graph *g = lse_graph_new();
    lse_node *next, *prev, *b, *m, *A, *chol;
    lse_status st = lse_graph_add_node(g, "next", T - 1, 1, LSE_NODE_CLAMPED, &next);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "prev", T - 1, 1, LSE_NODE_CLAMPED, &prev);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "b", K, 1, LSE_NODE_PARAM, &b);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "m", K, 1, LSE_NODE_PARAM, &m);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "A", K, 1, LSE_NODE_PARAM, &A);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "chol", K, 1, LSE_NODE_PARAM, &chol);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_dma: %s\n", lse_graph_errmsg(g));
        return 1;
    }
    for (size_t t = 0; t + 1 < T; t++) {
        gsl_matrix_set(lse_node_value(prev), t, 0, x[t]);
        gsl_matrix_set(lse_node_value(next), t, 0, x[t + 1]);
    }
    /* a start that does not know the answer: modes differ a little */
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_set(lse_node_value(b), k, 0, 0.1 * gsl_ran_gaussian(rng, 1.0));
        gsl_matrix_set(lse_node_value(m), k, 0, 0.1 * gsl_ran_gaussian(rng, 1.0));
        gsl_matrix_set(lse_node_value(A), k, 0, 0.5);
        gsl_matrix_set(lse_node_value(chol), k, 0, 1.0);
    }
    static const lse_gaussian_config gcfg = {.cov = LSE_COV_SPHERICAL};
    lse_sum_config sc;
    memset(&sc, 0, sizeof sc);
    sc.n = 2;
    sc.type[0] = &ca_type;
    sc.type[1] = lse_sim_lingauss;
    sc.config[1] = &gcfg;
    sc.weight[0] = sc.weight[1] = 1.0;
    /* alpha; m; logw, A, chol; the rest of the sum's slots absent */
    lse_node *params[1 + LSE_SUM_MAX_PARAM] = {NULL, m, NULL, A, chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(next);
    spec.parent = lse_view_all(b);
    spec.context = lse_view_all(prev);
    spec.sim = lse_sim_sum;
    spec.config = &sc;
    spec.param = params;
    lse_term *modes;
    st = lse_graph_add_lse(g, "modes", &spec, &modes);
    lse_view nv[2] = {lse_view_all(prev), lse_view_all(m)};
    if (st == LSE_OK)
        st = lse_graph_add_custom(g, "gate-norm", &norm_type, NULL, nv, 2, NULL);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_dma: %s\n", lse_graph_errmsg(g));
        return 1;
    }
    int fail = 0;
    if (check) {
        lse_node_set_clamped(prev, 0);
        lse_node_set_clamped(next, 0);
        lse_gradcheck res;
        st = lse_graph_check_gradient(g, NULL, 1e-5, 1e-4, &res);
        printf("gradient check: %zu entries, max relative error %.1e at %s\n",
               res.n_checked, res.max_error, res.where);
        fail |= st != LSE_OK || !(res.max_error < 1e-4);
        lse_node_set_clamped(prev, 1);
        lse_node_set_clamped(next, 1);
    }
    lse_solver *s = lse_solver_new(g, lse_solver_gd);
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 1e-10;
    lse_solver_set_opts(s, &so);
    double e0;
    lse_graph_energy(g, &e0);
    double mon[2] = {e0, 0.0};
    lse_solver_result res;
    st = lse_solver_run(s, check ? 200 : iters, count_rises, mon, &res);
    if (st != LSE_OK) {
        fprintf(stderr, "demo_dma: %s\n", lse_graph_errmsg(g));
        return 1;
    }
    if (check) {
        printf("descent: %zu iterations, energy %.4f -> %.4f, rises %g\n",
               res.n_iter, e0, res.energy, mon[1]);
        fail |= mon[1] != 0.0 || !(res.energy < e0);
    } else {
        const gsl_matrix *r = lse_term_softmax(modes);
        size_t agree = 0;
        for (size_t t = 0; t + 1 < T; t++)
            agree += (gsl_matrix_get(r, t, 1) > gsl_matrix_get(r, t, 0)) ==
                     (mode[t] == 1);
        if (agree < (T - 1) / 2)
            agree = T - 1 - agree; /* labels are exchangeable */
        printf("dynamic mixture attention, K = %d, %d transitions, %zu "
               "gradient steps (converged %s), energy rises %g\n",
               K, T - 1, res.n_iter, res.converged ? "yes" : "no", mon[1]);
        printf("log-likelihood %.2f (per step %.4f)\n", -res.energy,
               -res.energy / (T - 1));
        for (size_t k = 0; k < K; k++)
            printf("mode %zu: x' = %.3f x %+.3f, sd %.3f, attention m %+.3f\n",
                   k, gsl_matrix_get(lse_node_value(A), k, 0),
                   gsl_matrix_get(lse_node_value(b), k, 0),
                   fabs(gsl_matrix_get(lse_node_value(chol), k, 0)),
                   gsl_matrix_get(lse_node_value(m), k, 0));
        printf("most responsible mode = true mode: %zu of %d transitions\n",
               agree, T - 1);
    }
    lse_solver_free(s);
    lse_graph_free(g);
    gsl_rng_free(rng);
    return fail;
}
