/* lsegraph side of the benchmark (docs/performance.md).
 *
 *   lse_bench gmm DIR TAG full|diag THREADS [ITERS]
 *   lse_bench slds DIR mixture|markov THREADS [ITERS]
 *   lse_bench attention T D THREADS [BLOCK]
 *
 * gmm and slds fit with the model APIs (lse_gmm_fit, lse_slds_fit) from
 * the initialization written by lse_bench_gen, with tol = 0 so that
 * exactly ITERS (default 20) EM iterations run. The time per iteration is
 * (median t(ITERS) - median t(0)) / ITERS over BENCH_REPS runs each
 * (default 5), so graph building,
 * initialization and the final evaluation cancel as they do for the peers.
 * attention evaluates the energy and gradient of one self-attention term
 * (scaled dot product, streaming: keep_matrices = 0) on T random rows.
 * Each prints one line "RESULT key=value ...". */

#include <math.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "bench_util.h"

static gsl_matrix *load(const char *dir, const char *name)
{
    char path[4096];
    bench_path(path, sizeof path, dir, name);
    return bench_read(path);
}

/* One GMM fit of iters iterations from the initialization; seconds. */
static int gmm_fit(const gsl_matrix *x, const gsl_matrix *means,
                   const gsl_matrix *cov, const gsl_matrix *w0,
                   lse_cov_type type, size_t iters, double *seconds,
                   double *loglik, size_t *n_iter)
{
    const size_t k = means->size1, d = means->size2;
    lse_gmm *m = NULL;
    lse_error err = {0};
    lse_status st = lse_gmm_new(k, d, type, &m, NULL);
    gsl_vector_const_view wv = gsl_matrix_const_column(w0, 0);
    if (st == LSE_OK)
        st = lse_gmm_set_weights(m, &wv.vector, &err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(m, means, &err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(m, cov, &err);
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    o.init = LSE_GMM_INIT_GIVEN;
    o.max_iter = iters;
    o.tol = 0.0;
    o.reg_covar = type == LSE_COV_FULL ? 1e-6 : 0.0;
    /* plain EM, as the peers run it: SQUAREM (the default since session 6)
     * moves the log-likelihoods off scikit-learn's and changes what an
     * iteration costs */
    o.accel = LSE_GMM_ACCEL_NONE;
    const double t0 = bench_now();
    if (st == LSE_OK)
        st = lse_gmm_fit(m, x, &o, &err);
    *seconds = bench_now() - t0;
    if (st != LSE_OK) {
        fprintf(stderr, "lse_gmm: %s\n", err.message);
        lse_gmm_free(m);
        return -1;
    }
    const lse_gmm_fit_info *info = lse_gmm_info(m);
    *loglik = info->loglik;
    *n_iter = info->n_iter;
    lse_gmm_free(m);
    return 0;
}

static int run_gmm(const char *dir, const char *tag, const char *cov,
                   size_t iters)
{
    char name[256];
    const int full = strcmp(cov, "full") == 0;
    if (!full && strcmp(cov, "diag") != 0) {
        fprintf(stderr, "covariance must be full or diag\n");
        return 2;
    }
    snprintf(name, sizeof name, "gmm_%s.bin", tag);
    gsl_matrix *x = load(dir, name);
    snprintf(name, sizeof name, "gmm_%s_means.bin", tag);
    gsl_matrix *means = load(dir, name);
    snprintf(name, sizeof name, "gmm_%s_%s.bin", tag, full ? "cov" : "var");
    gsl_matrix *c = load(dir, name);
    snprintf(name, sizeof name, "gmm_%s_w.bin", tag);
    gsl_matrix *w = load(dir, name);
    if (x == NULL || means == NULL || c == NULL || w == NULL)
        return 1;
    const lse_cov_type type = full ? LSE_COV_FULL : LSE_COV_DIAG;
    double t0[99], t1[99], ll0, ll = NAN;
    size_t it0, it = 0;
    const int reps = bench_reps();
    for (int rep = 0; rep < reps; rep++) {
        double s;
        if (gmm_fit(x, means, c, w, type, 0, &s, &ll0, &it0) != 0)
            return 1;
        t0[rep] = s;
        if (gmm_fit(x, means, c, w, type, iters, &s, &ll, &it) != 0)
            return 1;
        t1[rep] = s;
    }
    const double best0 = bench_median(t0, reps), best = bench_median(t1, reps);
    printf("RESULT tool=lsegraph case=gmm-%s-%s threads=%d iters=%zu "
           "ms_per_iter=%.3f loglik=%.10e rss_mib=%.1f n=%zu d=%zu k=%zu\n",
           tag, cov, lse_get_num_threads(), it,
           1e3 * (best - best0) / (double)iters, ll, bench_maxrss_mib(),
           x->size1, x->size2, means->size1);
    gsl_matrix_free(x);
    gsl_matrix_free(means);
    gsl_matrix_free(c);
    gsl_matrix_free(w);
    return 0;
}

typedef struct slds_init {
    gsl_matrix *x, *a, *b, *cov, *w, *p, *p0;
} slds_init;

static int slds_fit(const slds_init *in, int markov, size_t iters,
                    double *seconds, double *loglik, size_t *n_iter)
{
    const size_t k = in->a->size1, d = in->x->size2;
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = k;
    cfg.dim = d;
    cfg.lags = 1;
    cfg.markov = markov;
    cfg.cov = LSE_COV_FULL;
    lse_slds *m = NULL;
    lse_error err = {0};
    lse_status st = lse_slds_new(&cfg, &m, &err);
    for (size_t q = 0; st == LSE_OK && q < k; q++) {
        gsl_matrix_const_view a = gsl_matrix_const_view_array(
            gsl_matrix_const_ptr(in->a, q, 0), d, d);
        gsl_matrix_const_view c = gsl_matrix_const_view_array(
            gsl_matrix_const_ptr(in->cov, q, 0), d, d);
        gsl_vector_const_view b = gsl_matrix_const_row(in->b, q);
        st = lse_slds_set_a(m, q, &a.matrix, &err);
        if (st == LSE_OK)
            st = lse_slds_set_b(m, q, &b.vector, &err);
        if (st == LSE_OK)
            st = lse_slds_set_cov(m, q, &c.matrix, &err);
    }
    if (st == LSE_OK && !markov) {
        gsl_vector_const_view wv = gsl_matrix_const_column(in->w, 0);
        st = lse_slds_set_weights(m, &wv.vector, &err);
    }
    if (st == LSE_OK && markov) {
        gsl_vector_const_view pv = gsl_matrix_const_row(in->p0, 0);
        st = lse_slds_set_transition(m, in->p, &err);
        if (st == LSE_OK)
            st = lse_slds_set_initial(m, &pv.vector, &err);
    }
    lse_slds_opts o = lse_slds_opts_default();
    o.init = LSE_SLDS_INIT_GIVEN;
    o.max_iter = iters;
    o.tol = 0.0;
    o.reg_covar = 1e-6;
    const double t0 = bench_now();
    if (st == LSE_OK)
        st = lse_slds_fit(m, in->x, NULL, &o, &err);
    *seconds = bench_now() - t0;
    if (st != LSE_OK) {
        fprintf(stderr, "lse_slds: %s\n", err.message);
        lse_slds_free(m);
        return -1;
    }
    *loglik = lse_slds_loglik(m);
    *n_iter = lse_slds_n_iter(m);
    lse_slds_free(m);
    return 0;
}

static int run_slds(const char *dir, const char *kind, size_t iters)
{
    const int markov = strcmp(kind, "markov") == 0;
    if (!markov && strcmp(kind, "mixture") != 0) {
        fprintf(stderr, "kind must be mixture or markov\n");
        return 2;
    }
    slds_init in = {load(dir, "slds.bin"),   load(dir, "slds_A.bin"),
                    load(dir, "slds_b.bin"), load(dir, "slds_cov.bin"),
                    load(dir, "slds_w.bin"), load(dir, "slds_P.bin"),
                    load(dir, "slds_p0.bin")};
    if (in.x == NULL || in.a == NULL || in.b == NULL || in.cov == NULL ||
        in.w == NULL || in.p == NULL || in.p0 == NULL)
        return 1;
    double t0[99], t1[99], ll0, ll = NAN;
    size_t it0, it = 0;
    const int reps = bench_reps();
    for (int rep = 0; rep < reps; rep++) {
        double s;
        if (slds_fit(&in, markov, 0, &s, &ll0, &it0) != 0)
            return 1;
        t0[rep] = s;
        if (slds_fit(&in, markov, iters, &s, &ll, &it) != 0)
            return 1;
        t1[rep] = s;
    }
    const double best0 = bench_median(t0, reps), best = bench_median(t1, reps);
    printf("RESULT tool=lsegraph case=slds-%s threads=%d iters=%zu "
           "ms_per_iter=%.3f loglik=%.10e rss_mib=%.1f n=%zu d=%zu k=%zu\n",
           kind, lse_get_num_threads(), it,
           1e3 * (best - best0) / (double)iters, ll, bench_maxrss_mib(),
           in.x->size1, in.x->size2, in.a->size1);
    gsl_matrix *all[] = {in.x, in.a, in.b, in.cov, in.w, in.p, in.p0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsl_matrix_free(all[i]);
    return 0;
}

/* Energy + gradient of E = -sum_c log sum_p exp(x_c . x_p / sqrt(d)) over
 * T random rows, with the term streaming its blocks. */
static int run_attention(size_t T, size_t d, size_t block)
{
    lse_graph *g = lse_graph_new();
    lse_node *x = NULL;
    lse_term *t = NULL;
    if (g == NULL)
        return 1;
    if (block > 0)
        lse_graph_set_block_rows(g, block);
    lse_status st = lse_graph_add_node(g, "x", T, d, 0, &x);
    if (st == LSE_OK) {
        gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
        gsl_rng_set(r, 7);
        gsl_matrix *v = lse_node_value(x);
        for (size_t i = 0; i < T; i++)
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(v, i, j, gsl_ran_gaussian(r, 1.0));
        gsl_rng_free(r);
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(x);
        spec.parent = lse_view_all(x);
        spec.sim = lse_sim_scaled_dot;
        spec.keep_matrices = 0;
        st = lse_graph_add_lse(g, "self", &spec, &t);
    }
    double e = NAN;
    const double t0 = bench_now();
    if (st == LSE_OK)
        st = lse_graph_gradient(g, &e);
    const double sec = bench_now() - t0;
    if (st != LSE_OK) {
        fprintf(stderr, "attention: %s\n", lse_graph_errmsg(g));
        lse_graph_free(g);
        return 1;
    }
    double gn = 0.0;
    const gsl_matrix *gr = lse_node_grad(x);
    for (size_t i = 0; i < T; i++)
        for (size_t j = 0; j < d; j++)
            gn += gsl_matrix_get(gr, i, j) * gsl_matrix_get(gr, i, j);
    printf("RESULT tool=lsegraph case=attention-T%zu-d%zu threads=%d "
           "seconds=%.3f energy=%.10e grad_norm=%.6e rss_mib=%.1f "
           "dense_s_mib=%.1f\n",
           T, d, lse_get_num_threads(), sec, e, sqrt(gn), bench_maxrss_mib(),
           (double)T * (double)T * 8.0 / 1048576.0);
    lse_graph_free(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "gmm") == 0) {
        lse_set_num_threads(atoi(argv[5]));
        return run_gmm(argv[2], argv[3], argv[4],
                       argc > 6 ? (size_t)atol(argv[6]) : 20);
    }
    if (argc >= 5 && strcmp(argv[1], "slds") == 0) {
        lse_set_num_threads(atoi(argv[4]));
        return run_slds(argv[2], argv[3],
                        argc > 5 ? (size_t)atol(argv[5]) : 20);
    }
    if (argc >= 5 && strcmp(argv[1], "attention") == 0) {
        lse_set_num_threads(atoi(argv[4]));
        return run_attention((size_t)atol(argv[2]), (size_t)atol(argv[3]),
                             argc > 5 ? (size_t)atol(argv[5]) : 0);
    }
    fprintf(stderr,
            "usage: %s gmm DIR TAG full|diag THREADS [ITERS]\n"
            "       %s slds DIR mixture|markov THREADS [ITERS]\n"
            "       %s attention T D THREADS [BLOCK]\n",
            argv[0], argv[0], argv[0]);
    return 2;
}
