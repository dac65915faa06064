/* VLFeat's vl_gmm (diagonal covariances) on a benchmark data set, from the
 * same initialization as the other tools (docs/performance.md).
 *
 *   vlfeat_gmm DIR TAG THREADS [ITERS]
 *
 * vl_gmm_em with max_num_iterations = n runs n M-steps between n + 1
 * E-steps and returns the log-likelihood of the last E-step, i.e. at the
 * final parameters. It also stops early when the log-likelihood changes by
 * less than 1e-5 relative, so the program counts the iterations from
 * VLFeat's own progress messages and reports them. Time per iteration =
 * (median t(ITERS) - median t(0)) / ITERS over BENCH_REPS runs (default 5). VLFeat leaves out the
 * constant -d/2 log(2 pi) per sample; it is added back so the
 * log-likelihoods compare directly. */

#include <math.h>
#include <stdarg.h>

#include <vl/generic.h>
#include <vl/gmm.h>

#include "bench_util.h"

static int n_estep = 0;

/* Counts VLFeat's "iteration" messages; prints nothing. */
static int count_printf(char const *format, ...)
{
    if (strstr(format, "iteration %d") != NULL)
        n_estep++;
    return 0;
}

static gsl_matrix *load(const char *dir, const char *tag, const char *what)
{
    char name[256], path[4096];
    snprintf(name, sizeof name, "gmm_%s%s.bin", tag, what);
    bench_path(path, sizeof path, dir, name);
    return bench_read(path);
}

static double fit(const gsl_matrix *x, const gsl_matrix *means,
                  const gsl_matrix *var, const gsl_matrix *w, size_t iters,
                  double *ll, int *n_iter)
{
    const size_t n = x->size1, d = x->size2, k = means->size1;
    VlGMM *g = vl_gmm_new(VL_TYPE_DOUBLE, d, k);
    vl_gmm_set_initialization(g, VlGMMCustom);
    vl_gmm_set_covariance_lower_bound(g, 1e-12); /* no clamping */
    vl_gmm_set_means(g, means->data);
    vl_gmm_set_covariances(g, var->data);
    vl_gmm_set_priors(g, w->data);
    vl_gmm_set_max_num_iterations(g, iters);
    vl_gmm_set_verbosity(g, 1);
    n_estep = 0;
    const double t0 = bench_now();
    const double l = vl_gmm_em(g, x->data, n);
    const double s = bench_now() - t0;
    *ll = l;               /* VLFeat 0.9.21 includes -d/2 log(2 pi) */
    *n_iter = n_estep - 1; /* M-steps = E-steps - 1 */
    vl_gmm_delete(g);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s DIR TAG THREADS [ITERS]\n", argv[0]);
        return 2;
    }
    const int threads = atoi(argv[3]);
    const size_t iters = argc > 4 ? (size_t)atol(argv[4]) : 20;
    vl_set_num_threads((vl_size)threads);
    vl_set_printf_func(count_printf);
    gsl_matrix *x = load(argv[1], argv[2], "");
    gsl_matrix *m = load(argv[1], argv[2], "_means");
    gsl_matrix *v = load(argv[1], argv[2], "_var");
    gsl_matrix *w = load(argv[1], argv[2], "_w");
    if (x == NULL || m == NULL || v == NULL || w == NULL)
        return 1;
    double t0[99], t1[99], ll = NAN, ll0;
    int it = 0, it0;
    const int reps = bench_reps();
    for (int rep = 0; rep < reps; rep++) {
        t0[rep] = fit(x, m, v, w, 0, &ll0, &it0);
        t1[rep] = fit(x, m, v, w, iters, &ll, &it);
    }
    const double best0 = bench_median(t0, reps), best = bench_median(t1, reps);
    printf("RESULT tool=vlfeat case=gmm-%s-diag threads=%d iters=%d "
           "ms_per_iter=%.3f loglik=%.10e rss_mib=%.1f\n",
           argv[2], threads, it, 1e3 * (best - best0) / (double)it, ll,
           bench_maxrss_mib());
    gsl_matrix_free(x);
    gsl_matrix_free(m);
    gsl_matrix_free(v);
    gsl_matrix_free(w);
    return 0;
}
