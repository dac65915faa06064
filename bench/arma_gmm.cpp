/* Armadillo's gmm_full / gmm_diag (C++, OpenMP) on a benchmark data set,
 * from the same initialization as the other tools (docs/performance.md).
 *
 *   arma_gmm DIR TAG full|diag THREADS [ITERS]
 *
 * learn(..., keep_existing, km_iter = 0, em_iter = ITERS, var_floor, ...)
 * starts from the parameters given by set_params and runs at most ITERS EM
 * iterations; it stops earlier only when the mean log-likelihood changes by
 * machine epsilon, so the program counts the iterations from Armadillo's
 * own progress lines (sent to a string stream) and reports them. Time per
 * iteration = (median t(ITERS) - median t(0)) / ITERS over BENCH_REPS runs
 * (default 5): learn's input checks cancel. Armadillo has no reg_covar: it
 * floors the diagonal of each covariance at var_floor instead, set to
 * 1e-12 (no effective clamping on these sets), so its log-likelihood
 * differs slightly from lsegraph's and scikit-learn's for full covariances
 * (reg_covar 1e-6 there). The log-likelihood is sum_log_p at the final
 * parameters. */

#include <cmath>
#include <sstream>
#include <string>

#include <armadillo>
#include <omp.h>

#include "bench_util.h"

namespace {

gsl_matrix *load(const char *dir, const char *tag, const char *what)
{
    char name[256], path[4096];
    std::snprintf(name, sizeof name, "gmm_%s%s.bin", tag, what);
    bench_path(path, sizeof path, dir, name);
    return bench_read(path);
}

/* A row-major rows x cols buffer read column-major is its transpose:
 * samples become columns, as Armadillo wants. */
arma::mat columns(const gsl_matrix *m)
{
    return arma::mat(m->data, m->size2, m->size1);
}

int count_iterations(const std::string &log)
{
    int n = 0;
    for (std::size_t at = log.find("EM: iteration:"); at != std::string::npos;
         at = log.find("EM: iteration:", at + 1))
        n++;
    return n;
}

template <class Model>
double fit(Model &model, const arma::mat &x, unsigned iters, double *ll,
           int *n_iter)
{
    std::ostringstream log;
    arma::set_cout_stream(log);
    const double t0 = bench_now();
    const bool ok = model.learn(x, model.n_gaus(), arma::eucl_dist,
                                arma::keep_existing, 0, iters, 1e-12, true);
    const double s = bench_now() - t0;
    arma::set_cout_stream(std::cout);
    *ll = ok ? model.sum_log_p(x) : NAN;
    *n_iter = count_iterations(log.str());
    return s;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s DIR TAG full|diag THREADS [ITERS]\n",
                     argv[0]);
        return 2;
    }
    const std::string cov = argv[3];
    if (cov != "full" && cov != "diag") {
        std::fprintf(stderr, "%s: covariance must be full or diag\n", argv[0]);
        return 2;
    }
    omp_set_num_threads(std::atoi(argv[4]));
    const unsigned iters = argc > 5 ? (unsigned)std::atol(argv[5]) : 20;
    gsl_matrix *xg = load(argv[1], argv[2], "");
    gsl_matrix *mg = load(argv[1], argv[2], "_means");
    gsl_matrix *cg = load(argv[1], argv[2], cov == "full" ? "_cov" : "_var");
    gsl_matrix *wg = load(argv[1], argv[2], "_w");
    if (xg == NULL || mg == NULL || cg == NULL || wg == NULL)
        return 1;
    const arma::mat x = columns(xg), means = columns(mg);
    const arma::rowvec w(wg->data, wg->size1);
    const arma::uword d = means.n_rows, k = means.n_cols;
    double t0[99], t1[99], ll = NAN, ll0;
    int it = 0, it0;
    const int reps = bench_reps();
    for (int rep = 0; rep < reps; rep++) {
        if (cov == "full") {
            const arma::cube c(cg->data, d, d, k); /* symmetric slices */
            arma::gmm_full g0, g1;
            g0.set_params(means, c, w);
            g1.set_params(means, c, w);
            t0[rep] = fit(g0, x, 0, &ll0, &it0);
            t1[rep] = fit(g1, x, iters, &ll, &it);
        } else {
            const arma::mat v = columns(cg);
            arma::gmm_diag g0, g1;
            g0.set_params(means, v, w);
            g1.set_params(means, v, w);
            t0[rep] = fit(g0, x, 0, &ll0, &it0);
            t1[rep] = fit(g1, x, iters, &ll, &it);
        }
    }
    const double m0 = bench_median(t0, reps), m1 = bench_median(t1, reps);
    std::printf("RESULT tool=armadillo case=gmm-%s-%s threads=%s iters=%d "
                "ms_per_iter=%.3f loglik=%.10e rss_mib=%.1f\n",
                argv[2], cov.c_str(), argv[4], it,
                1e3 * (m1 - m0) / (double)(it > 0 ? it : 1), ll,
                bench_maxrss_mib());
    gsl_matrix_free(xg);
    gsl_matrix_free(mg);
    gsl_matrix_free(cg);
    gsl_matrix_free(wg);
    return 0;
}
