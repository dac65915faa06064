#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/*
 * What the performance work must not change (docs/performance.md):
 * - any thread count gives bit-identical energies, gradients and EM models
 *   (the rows are split into chunks fixed by the shapes, per-chunk sums
 *   are added in chunk order);
 * - a streaming LSE term (keep_matrices = 0) equals the dense one, and
 *   both equal the textbook formula, to 1e-12.
 * Nothing here is timed.
 */

/* Thread counts compared with the single-threaded run. */
static const int thread_counts[] = {2, 3};
#define N_COUNTS (sizeof thread_counts / sizeof thread_counts[0])

/* Bits of two doubles equal (NaN-safe, 0.0 != -0.0). */
static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Every pass uses the thread count set, however small (the tests compare
 * 1, 2 and 3 threads on small data); teardown restores both defaults. */
static void setup(void) { lse_set_thread_min_work(0.0); }

static void teardown(void)
{
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
}

/* x (n, d): k well-separated blobs with random spread. */
static void blobs(gsl_matrix *x, size_t k, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < x->size1; i++) {
        const size_t c = i % k;
        for (size_t j = 0; j < x->size2; j++)
            gsl_matrix_set(x, i, j,
                           1.5 * cos(1.7 * (double)c + 0.9 * (double)j) +
                               gsl_ran_gaussian(r, 0.8 + 0.2 * (double)c));
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------ */
/* EM on a Gaussian mixture graph driven directly (graph + solver).    */

typedef struct em_run {
    gsl_matrix *mu, *logw, *chol;
    double energy[12];
    size_t n_iter;
} em_run;

static int record_energy(const lse_solver *s, void *user)
{
    em_run *r = user;
    const size_t i = lse_solver_n_iter(s) - 1;
    if (i < 12)
        r->energy[i] = lse_solver_energy(s);
    return 0;
}

static void gmm_em(const gsl_matrix *x, size_t k, lse_cov_type cov, int threads,
                   em_run *out)
{
    const size_t n = x->size1, d = x->size2;
    lse_set_num_threads(threads);
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_graph_set_block_rows(g, 128); /* 4000 rows: 32 blocks, 16 chunks */
    lse_node *xn, *mu, *logw, *chol;
    const size_t cc = cov == LSE_COV_FULL ? d * d : d;
    lse_assert_ok(lse_graph_add_node(g, "x", n, d, LSE_NODE_CLAMPED, &xn));
    lse_assert_ok(lse_graph_add_node(g, "mu", k, d, LSE_NODE_PARAM, &mu));
    lse_assert_ok(lse_graph_add_node(g, "logw", k, 1, LSE_NODE_PARAM, &logw));
    lse_assert_ok(lse_graph_add_node(g, "chol", k, cc, LSE_NODE_PARAM, &chol));
    lse_assert_ok(lse_node_set_value(xn, x));
    /* the start: rows of x (modulo n: the small cases have 9 and 13 rows,
     * and past them a release build, without GSL's range checks, read
     * whatever memory followed x) */
    for (size_t c = 0; c < k; c++) {
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(lse_node_value(mu), c, j,
                           gsl_matrix_get(x, (37 * c + 5) % n, j) + 0.4127);
        gsl_matrix_set(lse_node_value(logw), c, 0, 0.1 * (double)c);
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(lse_node_value(chol), c,
                           cov == LSE_COV_FULL ? j * d + j : j, 1.3);
    }
    const lse_gaussian_config cfg = {.cov = cov};
    lse_node *params[2] = {logw, chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(xn);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &cfg;
    spec.param = params;
    lse_assert_ok(lse_graph_add_lse(g, "mixture", &spec, NULL));
    lse_solver *s = lse_solver_new(g, lse_solver_em);
    ck_assert_ptr_nonnull(s);
    lse_solver_opts o = lse_solver_opts_default();
    o.tol_energy = 0.0;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    memset(out->energy, 0, sizeof out->energy);
    lse_solver_result res;
    lse_assert_ok(lse_solver_run(s, 12, record_energy, out, &res));
    out->n_iter = res.n_iter;
    ck_assert_int_eq(lse_solver_n_increase(s), 0);
    out->mu = gsl_matrix_alloc(k, d);
    out->logw = gsl_matrix_alloc(k, 1);
    out->chol = gsl_matrix_alloc(k, cc);
    gsl_matrix_memcpy(out->mu, lse_node_value(mu));
    gsl_matrix_memcpy(out->logw, lse_node_value(logw));
    gsl_matrix_memcpy(out->chol, lse_node_value(chol));
    lse_solver_free(s);
    lse_graph_free(g);
}

static void em_run_free(em_run *r)
{
    gsl_matrix_free(r->mu);
    gsl_matrix_free(r->logw);
    gsl_matrix_free(r->chol);
}

/* x (n, d): k blobs a thousand times further apart than their spread,
 * so that the full covariances run the whitened (triangle-aware) path
 * (docs/performance.md section 3: kappa above 1e4). */
static void far_blobs(gsl_matrix *x, size_t k, unsigned long seed)
{
    blobs(x, k, seed);
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++)
            *gsl_matrix_ptr(x, i, j) +=
                1500.0 * cos(1.7 * (double)(i % k) + 0.9 * (double)j);
}

static void check_em_threads_on(lse_cov_type cov, size_t d, int far)
{
    gsl_matrix *x = gsl_matrix_alloc(4000, d);
    if (far)
        far_blobs(x, 4, 11);
    else
        blobs(x, 4, 11);
    em_run one;
    gmm_em(x, 4, cov, 1, &one);
    /* far blobs: EM reaches its fixed point (no change) in a few steps */
    ck_assert_int_eq(one.n_iter, far ? one.n_iter : 12);
    ck_assert_int_ge(one.n_iter, 3);
    for (size_t q = 0; q < N_COUNTS; q++) {
        em_run many;
        gmm_em(x, 4, cov, thread_counts[q], &many);
        ck_assert_int_eq(many.n_iter, one.n_iter);
        for (size_t i = 0; i < 12; i++)
            ck_assert_msg(same_double(one.energy[i], many.energy[i]),
                          "%d threads, iteration %zu: %.17g vs %.17g",
                          thread_counts[q], i, many.energy[i], one.energy[i]);
        ck_assert(lse_same_matrix(one.mu, many.mu));
        ck_assert(lse_same_matrix(one.logw, many.logw));
        ck_assert(lse_same_matrix(one.chol, many.chol));
        em_run_free(&many);
    }
    /* the run is a real EM: the energy went down */
    ck_assert(one.energy[one.n_iter - 1] < one.energy[0]);
    em_run_free(&one);
    gsl_matrix_free(x);
}

static void check_em_threads(lse_cov_type cov)
{
    check_em_threads_on(cov, 3, 0);
}

START_TEST(test_em_full_threads_identical) { check_em_threads(LSE_COV_FULL); }
END_TEST

/* full covariances on the whitened path, d = 11 (a whole and a padded
 * strip of 8 columns in the triangle-aware kernels) */
START_TEST(test_em_full_far_threads_identical)
{
    check_em_threads_on(LSE_COV_FULL, 11, 1);
}
END_TEST

START_TEST(test_em_diag_threads_identical) { check_em_threads(LSE_COV_DIAG); }
END_TEST

/* ------------------------------------------------------------------ */
/* The copies of the kernels (plain C, AVX2 + FMA, AVX-512) agree.     */

/* Largest |a - b| / max(|b|, 1) over the entries. */
static double max_scaled_diff(const gsl_matrix *a, const gsl_matrix *b)
{
    double m = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            const double v = gsl_matrix_get(b, i, j);
            const double e =
                fabs(gsl_matrix_get(a, i, j) - v) / (fabs(v) > 1.0 ? fabs(v) : 1.0);
            m = e > m ? e : m;
        }
    return m;
}

/* EM with the copies the CPU allows (default), without the AVX-512 ones
 * (LSE_NO_AVX512) and with the plain C ones only (LSE_NO_SIMD): the
 * softmax (rows of K entries: one masked vector, two, or the wide-row
 * code) and the quadratic-path kernels (tiles of 16 and 8 components,
 * masked) differ only in rounding. On a CPU without AVX2 all three runs
 * take the plain path and agree trivially. */
static void check_simd_copies(lse_cov_type cov, size_t k)
{
    gsl_matrix *x = gsl_matrix_alloc(4000, 3);
    blobs(x, k, 29);
    em_run ref;
    gmm_em(x, k, cov, 2, &ref);
    static const char *const vars[] = {"LSE_NO_AVX512", "LSE_NO_SIMD"};
    for (size_t v = 0; v < 2; v++) {
        ck_assert_int_eq(setenv(vars[v], "1", 1), 0);
        em_run other;
        gmm_em(x, k, cov, 2, &other);
        ck_assert_int_eq(unsetenv(vars[v]), 0);
        ck_assert_int_eq(other.n_iter, ref.n_iter);
        for (size_t i = 0; i < 12; i++)
            ck_assert_msg(fabs(other.energy[i] - ref.energy[i]) <=
                              1e-11 * fabs(ref.energy[i]),
                          "%s, K = %zu, iteration %zu: %.17g vs %.17g",
                          vars[v], k, i, other.energy[i], ref.energy[i]);
        ck_assert_double_lt(max_scaled_diff(other.mu, ref.mu), 1e-9);
        ck_assert_double_lt(max_scaled_diff(other.logw, ref.logw), 1e-9);
        ck_assert_double_lt(max_scaled_diff(other.chol, ref.chol), 1e-9);
        em_run_free(&other);
    }
    ck_assert(ref.energy[11] < ref.energy[0]);
    em_run_free(&ref);
    gsl_matrix_free(x);
}

/* The triangle-aware kernels of the whitened full path: the AVX-512 and
 * the AVX2 copies give the same bits; the plain build (LSE_NO_SIMD: the
 * GEMMs of the whitened path) agrees to rounding. */
START_TEST(test_tri_copies_agree)
{
    static const size_t dims[] = {5, 8, 11, 19};
    for (size_t q = 0; q < 4; q++) {
        gsl_matrix *x = gsl_matrix_alloc(2000, dims[q]);
        far_blobs(x, 4, 37 + q);
        em_run ref, avx2, plain;
        gmm_em(x, 4, LSE_COV_FULL, 2, &ref);
        ck_assert_int_eq(setenv("LSE_NO_AVX512", "1", 1), 0);
        gmm_em(x, 4, LSE_COV_FULL, 2, &avx2);
        ck_assert_int_eq(unsetenv("LSE_NO_AVX512"), 0);
        ck_assert_int_eq(setenv("LSE_NO_SIMD", "1", 1), 0);
        gmm_em(x, 4, LSE_COV_FULL, 2, &plain);
        ck_assert_int_eq(unsetenv("LSE_NO_SIMD"), 0);
        for (size_t i = 0; i < 12; i++) {
            ck_assert_msg(same_double(avx2.energy[i], ref.energy[i]),
                          "d = %zu, iteration %zu: %.17g vs %.17g", dims[q], i,
                          avx2.energy[i], ref.energy[i]);
            /* (the plain run may reach its fixed point a step apart) */
            ck_assert_msg(i >= plain.n_iter || i >= ref.n_iter ||
                              fabs(plain.energy[i] - ref.energy[i]) <=
                                  1e-11 * fabs(ref.energy[i]),
                          "d = %zu, iteration %zu: %.17g vs %.17g", dims[q], i,
                          plain.energy[i], ref.energy[i]);
        }
        ck_assert(lse_same_matrix(avx2.mu, ref.mu));
        ck_assert(lse_same_matrix(avx2.chol, ref.chol));
        ck_assert(lse_same_matrix(avx2.logw, ref.logw));
        ck_assert_double_lt(max_scaled_diff(plain.mu, ref.mu), 1e-9);
        ck_assert_double_lt(max_scaled_diff(plain.chol, ref.chol), 1e-9);
        ck_assert_double_lt(max_scaled_diff(plain.logw, ref.logw), 1e-9);
        ck_assert_int_eq(avx2.n_iter, ref.n_iter);
        ck_assert_int_ge(ref.n_iter, 3);
        ck_assert(ref.energy[ref.n_iter - 1] < ref.energy[0]);
        em_run_free(&ref);
        em_run_free(&avx2);
        em_run_free(&plain);
        gsl_matrix_free(x);
    }
}
END_TEST

/* The quadratic path of full covariances without V (AVX-512: 8 rows in
 * the lanes, tiles of 16 and 8 components, the last group of rows
 * overlapping; the statistics' V 4 rows at a time): EM gives the same bits
 * on 1, 2 and 3 threads, for odd row counts (last blocks of 211, 13 and 9
 * rows), dimensions and component counts (masked tiles), and agrees with
 * the AVX2 copies (V of the whole block; their softmax rounds differently)
 * to 1e-11. tests/test_sim_gaussian.c compares the kernels bit for bit. */
static void check_qfull(lse_cov_type cov, size_t n, size_t d, size_t k,
                        unsigned long seed)
{
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    blobs(x, k, seed);
    em_run ref, avx2;
    gmm_em(x, k, cov, 1, &ref);
    ck_assert_int_eq(setenv("LSE_NO_AVX512", "1", 1), 0);
    gmm_em(x, k, cov, 1, &avx2);
    ck_assert_int_eq(unsetenv("LSE_NO_AVX512"), 0);
    ck_assert_int_eq(avx2.n_iter, ref.n_iter);
    for (size_t i = 0; i < ref.n_iter; i++)
        ck_assert_msg(fabs(avx2.energy[i] - ref.energy[i]) <=
                          1e-11 * fabs(ref.energy[i]),
                      "n %zu d %zu K %zu, iteration %zu: %.17g vs %.17g", n,
                      d, k, i, avx2.energy[i], ref.energy[i]);
    ck_assert_double_lt(max_scaled_diff(avx2.mu, ref.mu), 1e-9);
    for (size_t q = 0; q < N_COUNTS; q++) {
        em_run many;
        gmm_em(x, k, cov, thread_counts[q], &many);
        for (size_t i = 0; i < 12; i++)
            ck_assert(same_double(many.energy[i], ref.energy[i]));
        ck_assert(lse_same_matrix(many.mu, ref.mu));
        ck_assert(lse_same_matrix(many.chol, ref.chol));
        em_run_free(&many);
    }
    ck_assert(ref.energy[ref.n_iter - 1] < ref.energy[0]);
    em_run_free(&ref);
    em_run_free(&avx2);
    gsl_matrix_free(x);
}

START_TEST(test_qfull_copies_agree)
{
    static const size_t dims[] = {2, 5, 8, 11, 16, 17};
    static const size_t ks[] = {3, 9, 16, 20};
    for (size_t q = 0; q < 6; q++)
        check_qfull(LSE_COV_FULL, 2003, dims[q], ks[q % 4], 41 + q);
    check_qfull(LSE_COV_FULL, 1500, 16, 16, 47);
    check_qfull(LSE_COV_FULL, 13, 4, 2, 48);
    check_qfull(LSE_COV_FULL, 9, 3, 2, 49);
}
END_TEST

START_TEST(test_simd_copies_agree)
{
    static const size_t ks[] = {5, 12, 20};
    for (size_t q = 0; q < 3; q++) {
        check_simd_copies(LSE_COV_DIAG, ks[q]);
        check_simd_copies(LSE_COV_FULL, ks[q]);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The model APIs: lse_gmm_fit and lse_slds_fit.                       */

START_TEST(test_gmm_model_threads_identical)
{
    gsl_matrix *x = gsl_matrix_alloc(3000, 2);
    blobs(x, 3, 5);
    gsl_matrix *means = NULL, *chol = NULL;
    gsl_vector *w = NULL;
    double ll = 0.0;
    for (int q = 0; q <= (int)N_COUNTS; q++) {
        const int nt = q == 0 ? 1 : thread_counts[q - 1];
        lse_set_num_threads(nt);
        lse_gmm *m = NULL;
        lse_error err;
        lse_assert_ok(lse_gmm_new(3, 2, LSE_COV_FULL, &m, NULL));
        lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
        o.seed = 9;
        o.max_iter = 15;
        o.tol = 0.0;
        lse_assert_ok(lse_gmm_fit(m, x, &o, &err));
        const lse_gmm_fit_info *info = lse_gmm_info(m);
        if (q == 0) {
            means = gsl_matrix_alloc(3, 2);
            chol = gsl_matrix_alloc(lse_gmm_chol(m)->size1,
                                    lse_gmm_chol(m)->size2);
            w = gsl_vector_alloc(3);
            gsl_matrix_memcpy(means, lse_gmm_means(m));
            gsl_matrix_memcpy(chol, lse_gmm_chol(m));
            gsl_vector_memcpy(w, lse_gmm_weights(m));
            ll = info->loglik;
            ck_assert(isfinite(ll));
        } else {
            ck_assert_msg(same_double(info->loglik, ll),
                          "%d threads: %.17g vs %.17g", nt, info->loglik, ll);
            ck_assert(lse_same_matrix(lse_gmm_means(m), means));
            ck_assert(lse_same_matrix(lse_gmm_chol(m), chol));
            for (size_t c = 0; c < 3; c++)
                ck_assert(same_double(gsl_vector_get(lse_gmm_weights(m), c),
                                      gsl_vector_get(w, c)));
        }
        lse_gmm_free(m);
    }
    gsl_matrix_free(means);
    gsl_matrix_free(chol);
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

/* Markov-switching SLDS: lingauss kernels plus the chain reduction, whose
 * statistics run as a separate pass over the kept posteriors. */
START_TEST(test_slds_markov_threads_identical)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 2;
    cfg.dim = 2;
    cfg.markov = 1;
    lse_slds *gen = NULL;
    lse_error err;
    lse_assert_ok(lse_slds_new(&cfg, &gen, &err));
    gsl_matrix *a = gsl_matrix_alloc(2, 2);
    gsl_vector *b = gsl_vector_alloc(2);
    for (size_t k = 0; k < 2; k++) {
        const double th = k == 0 ? 0.2 : -0.5, rho = k == 0 ? 0.95 : 0.7;
        gsl_matrix_set(a, 0, 0, rho * cos(th));
        gsl_matrix_set(a, 0, 1, -rho * sin(th));
        gsl_matrix_set(a, 1, 0, rho * sin(th));
        gsl_matrix_set(a, 1, 1, rho * cos(th));
        gsl_vector_set(b, 0, k == 0 ? 0.3 : -0.2);
        gsl_vector_set(b, 1, 0.1);
        lse_assert_ok(lse_slds_set_a(gen, k, a, &err));
        lse_assert_ok(lse_slds_set_b(gen, k, b, &err));
    }
    gsl_matrix *x = gsl_matrix_alloc(3000, 2);
    lse_assert_ok(lse_slds_simulate(gen, 3000, 21, x, NULL, &err));
    lse_slds_free(gen);
    double ll = 0.0;
    gsl_matrix *a1 = gsl_matrix_alloc(2, 2), *t1 = gsl_matrix_alloc(2, 2);
    gsl_matrix *tr = gsl_matrix_alloc(2, 2);
    for (int q = 0; q <= (int)N_COUNTS; q++) {
        const int nt = q == 0 ? 1 : thread_counts[q - 1];
        lse_set_num_threads(nt);
        lse_slds *m = NULL;
        lse_assert_ok(lse_slds_new(&cfg, &m, &err));
        lse_slds_opts o = lse_slds_opts_default();
        o.seed = 4;
        o.max_iter = 10;
        o.tol = 0.0;
        lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
        lse_assert_ok(lse_slds_get_a(m, 1, a));
        lse_assert_ok(lse_slds_get_transition(m, tr));
        if (q == 0) {
            ll = lse_slds_loglik(m);
            ck_assert(isfinite(ll));
            gsl_matrix_memcpy(a1, a);
            gsl_matrix_memcpy(t1, tr);
        } else {
            ck_assert_msg(same_double(lse_slds_loglik(m), ll),
                          "%d threads: %.17g vs %.17g", nt, lse_slds_loglik(m),
                          ll);
            ck_assert(lse_same_matrix(a, a1));
            ck_assert(lse_same_matrix(tr, t1));
        }
        lse_slds_free(m);
    }
    gsl_matrix_free(a);
    gsl_matrix_free(a1);
    gsl_matrix_free(t1);
    gsl_matrix_free(tr);
    gsl_vector_free(b);
    gsl_matrix_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Attention terms: gradients for any thread count; streaming == dense. */

typedef struct attn {
    lse_graph *g;
    lse_node *x, *y;
    lse_term *self, *cross;
} attn;

/* Self-attention on x (n, d) (causal, beta 0.8, row weights) and
 * cross-attention from x to y (m, d) with a user mask, both dense or both
 * streaming, blocks of 64 rows. */
static void attn_build(attn *a, size_t n, size_t m, size_t d, int keep)
{
    a->g = lse_graph_new();
    ck_assert_ptr_nonnull(a->g);
    lse_graph_set_block_rows(a->g, 64);
    lse_assert_ok(lse_graph_add_node(a->g, "x", n, d, 0, &a->x));
    lse_assert_ok(lse_graph_add_node(a->g, "y", m, d, 0, &a->y));
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(lse_node_value(a->x), i, j,
                           gsl_ran_gaussian(r, 1.0));
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(lse_node_value(a->y), i, j,
                           gsl_ran_gaussian(r, 1.0));
    gsl_vector *w = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(w, i, 0.5 + gsl_rng_uniform(r));
    gsl_matrix *mask = gsl_matrix_alloc(n, m);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            gsl_matrix_set(mask, i, j, (i + 2 * j) % 5 != 0);
    gsl_rng_free(r);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(a->x);
    spec.parent = lse_view_all(a->x);
    spec.sim = lse_sim_scaled_dot;
    spec.mask = LSE_MASK_CAUSAL;
    spec.beta = 0.8;
    spec.row_weight = w;
    spec.keep_matrices = keep;
    lse_assert_ok(lse_graph_add_lse(a->g, "self", &spec, &a->self));
    spec = lse_term_spec_default();
    spec.child = lse_view_all(a->x);
    spec.parent = lse_view_all(a->y);
    spec.sim = lse_sim_dot;
    spec.user_mask = mask;
    spec.keep_matrices = keep;
    lse_assert_ok(lse_graph_add_lse(a->g, "cross", &spec, &a->cross));
    gsl_vector_free(w);
    gsl_matrix_free(mask);
}

START_TEST(test_attention_grad_threads_identical)
{
    for (int keep = 0; keep <= 1; keep++) {
        attn a1;
        attn_build(&a1, 1500, 700, 8, keep);
        lse_set_num_threads(1);
        double e1;
        lse_assert_ok(lse_graph_gradient(a1.g, &e1));
        for (size_t q = 0; q < N_COUNTS; q++) {
            attn a2;
            attn_build(&a2, 1500, 700, 8, keep);
            lse_set_num_threads(thread_counts[q]);
            double e2;
            lse_assert_ok(lse_graph_gradient(a2.g, &e2));
            ck_assert_msg(same_double(e1, e2), "keep %d, %d threads", keep,
                          thread_counts[q]);
            ck_assert(lse_same_matrix(lse_node_grad(a1.x), lse_node_grad(a2.x)));
            ck_assert(lse_same_matrix(lse_node_grad(a1.y), lse_node_grad(a2.y)));
            lse_graph_free(a2.g);
        }
        lse_graph_free(a1.g);
    }
}
END_TEST

static double max_rel_diff(const gsl_matrix *a, const gsl_matrix *b)
{
    double m = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            const double u = gsl_matrix_get(a, i, j),
                         v = gsl_matrix_get(b, i, j);
            const double s = fmax(1.0, fmax(fabs(u), fabs(v)));
            m = fmax(m, fabs(u - v) / s);
        }
    return m;
}

/* The self term by its definition, without the library's kernels:
 * E = -sum_c w_c (1/beta) log sum_{p <= c} exp(beta x_c.x_p / sqrt(d)). */
static double self_energy_textbook(const gsl_matrix *x, const gsl_vector *w,
                                   double beta)
{
    const size_t n = x->size1, d = x->size2;
    double e = 0.0;
    double *s = malloc(n * sizeof *s);
    for (size_t c = 0; c < n; c++) {
        for (size_t p = 0; p <= c; p++) {
            double dot = 0.0;
            for (size_t j = 0; j < d; j++)
                dot += gsl_matrix_get(x, c, j) * gsl_matrix_get(x, p, j);
            s[p] = dot / sqrt((double)d);
        }
        e -= gsl_vector_get(w, c) * lse_logsumexp(s, c + 1, 1, beta);
    }
    free(s);
    return e;
}

START_TEST(test_streaming_equals_dense)
{
    lse_set_num_threads(2);
    attn dense, stream;
    attn_build(&dense, 1100, 450, 6, 1);
    attn_build(&stream, 1100, 450, 6, 0);
    double ed, es;
    lse_assert_ok(lse_graph_gradient(dense.g, &ed));
    lse_assert_ok(lse_graph_gradient(stream.g, &es));
    ck_assert_msg(fabs(ed - es) <= 1e-12 * fabs(ed), "%.17g vs %.17g", ed, es);
    ck_assert(max_rel_diff(lse_node_grad(dense.x), lse_node_grad(stream.x)) <=
              1e-12);
    ck_assert(max_rel_diff(lse_node_grad(dense.y), lse_node_grad(stream.y)) <=
              1e-12);
    /* the streaming term keeps no matrix; its row log-sum-exps match */
    ck_assert_ptr_null(lse_term_softmax(stream.self));
    ck_assert_ptr_nonnull(lse_term_softmax(dense.self));
    const gsl_vector *rd = lse_term_row_lse(dense.self);
    const gsl_vector *rs = lse_term_row_lse(stream.self);
    for (size_t i = 0; i < rd->size; i++)
        ck_assert(fabs(gsl_vector_get(rd, i) - gsl_vector_get(rs, i)) <=
                  1e-12 * fmax(1.0, fabs(gsl_vector_get(rd, i))));
    /* and both equal the textbook sum */
    const double ref = self_energy_textbook(
        lse_node_value(stream.x), lse_term_row_weight(stream.self), 0.8);
    const double got = lse_term_energy(stream.self);
    ck_assert_msg(fabs(got - ref) <= 1e-12 * fabs(ref), "%.17g vs %.17g", got,
                  ref);
    lse_graph_free(dense.g);
    lse_graph_free(stream.g);
}
END_TEST

/* EM on a streaming mixture term (statistics accumulated during the
 * E-step, no n x K matrix kept) gives the dense term's model. */
START_TEST(test_em_streaming_equals_dense)
{
    gsl_matrix *x = gsl_matrix_alloc(2500, 2);
    blobs(x, 3, 17);
    gsl_matrix *mu[2];
    double energy[2];
    for (int keep = 0; keep <= 1; keep++) {
        lse_graph *g = lse_graph_new();
        lse_graph_set_block_rows(g, 100);
        lse_node *xn, *m, *logw, *chol;
        lse_assert_ok(
            lse_graph_add_node(g, "x", 2500, 2, LSE_NODE_CLAMPED, &xn));
        lse_assert_ok(lse_graph_add_node(g, "mu", 3, 2, LSE_NODE_PARAM, &m));
        lse_assert_ok(
            lse_graph_add_node(g, "logw", 3, 1, LSE_NODE_PARAM, &logw));
        lse_assert_ok(
            lse_graph_add_node(g, "chol", 3, 4, LSE_NODE_PARAM, &chol));
        lse_assert_ok(lse_node_set_value(xn, x));
        for (size_t c = 0; c < 3; c++) {
            gsl_matrix_set(lse_node_value(m), c, 0, 0.4127 * (double)c);
            gsl_matrix_set(lse_node_value(m), c, 1, -0.3 * (double)c);
            gsl_matrix_set(lse_node_value(chol), c, 0, 2.0);
            gsl_matrix_set(lse_node_value(chol), c, 3, 2.0);
        }
        lse_node *params[2] = {logw, chol};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(xn);
        spec.parent = lse_view_all(m);
        spec.sim = lse_sim_gaussian;
        spec.param = params;
        spec.keep_matrices = keep;
        lse_term *t;
        lse_assert_ok(lse_graph_add_lse(g, "mixture", &spec, &t));
        lse_solver *s = lse_solver_new(g, lse_solver_em);
        lse_solver_result res;
        lse_assert_ok(lse_solver_run(s, 10, NULL, NULL, &res));
        ck_assert_int_eq(res.n_iter, 10);
        ck_assert_int_eq(lse_solver_n_increase(s), 0);
        energy[keep] = res.energy;
        mu[keep] = gsl_matrix_alloc(3, 2);
        gsl_matrix_memcpy(mu[keep], lse_node_value(m));
        if (!keep)
            ck_assert_ptr_null(lse_term_softmax(t));
        lse_solver_free(s);
        lse_graph_free(g);
    }
    ck_assert(fabs(energy[0] - energy[1]) <= 1e-12 * fabs(energy[1]));
    ck_assert(max_rel_diff(mu[0], mu[1]) <= 1e-12);
    gsl_matrix_free(mu[0]);
    gsl_matrix_free(mu[1]);
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_num_threads_setting)
{
    lse_set_num_threads(3);
#ifdef LSE_TEST_OPENMP
    ck_assert_int_eq(lse_get_num_threads(), 3);
#else
    ck_assert_int_eq(lse_get_num_threads(), 1); /* always 1 without OpenMP */
#endif
    lse_set_num_threads(1);
    ck_assert_int_eq(lse_get_num_threads(), 1);
    lse_set_num_threads(0); /* back to the default */
    ck_assert_int_ge(lse_get_num_threads(), 1);
    lse_set_num_threads(-4);
    ck_assert_int_ge(lse_get_num_threads(), 1);
}
END_TEST

/* A small term (its work, rows x columns x (1 + d)^2, far below
 * lib/threads.c's threshold) runs on the calling thread for the default
 * count and for an explicit one; with the threshold at 0 an explicit count
 * is used; all give the same bits. */
static pthread_t spy_main;
static atomic_int spy_other;
static lse_status (*spy_eval_base)(const lse_sim_args *, gsl_matrix *);

static atomic_int spy_wait; /* the main thread waits for another one */

static lse_status spy_eval(const lse_sim_args *a, gsl_matrix *s)
{
    if (!pthread_equal(pthread_self(), spy_main)) {
        atomic_store(&spy_other, 1);
    } else if (atomic_load(&spy_wait)) {
        /* on a loaded machine the main thread could take every chunk
         * before the second one starts: give it up to 10 s to take one */
        const struct timespec ms = {0, 1000000};
        for (int i = 0; i < 10000 && !atomic_load(&spy_other); i++)
            nanosleep(&ms, NULL);
    }
    return spy_eval_base(a, s);
}

static double small_term_energy(int threads, int *other)
{
    lse_set_num_threads(threads);
    lse_sim_type spy = *lse_sim_dot;
    spy_eval_base = spy.eval;
    spy.eval = spy_eval;
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_graph_set_block_rows(g, 32); /* 600 rows: 19 blocks, 16 chunks */
    lse_node *xn, *pn;
    lse_assert_ok(lse_graph_add_node(g, "x", 600, 2, LSE_NODE_CLAMPED, &xn));
    lse_assert_ok(lse_graph_add_node(g, "p", 3, 2, LSE_NODE_PARAM, &pn));
    gsl_matrix *x = gsl_matrix_alloc(600, 2);
    blobs(x, 3, 11);
    lse_assert_ok(lse_node_set_value(xn, x));
    for (size_t c = 0; c < 3; c++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(pn), c, j, 0.3 * (double)(c + j));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(xn);
    spec.parent = lse_view_all(pn);
    spec.sim = &spy;
    lse_assert_ok(lse_graph_add_lse(g, "small", &spec, NULL));
    spy_main = pthread_self();
    atomic_store(&spy_other, 0);
    double e = 0.0;
    lse_assert_ok(lse_graph_energy(g, &e));
    *other = atomic_load(&spy_other);
    lse_graph_free(g);
    gsl_matrix_free(x);
    return e;
}

START_TEST(test_small_term_default_one_thread)
{
    int other_default = 0, other_two = 0, other_forced = 0;
    lse_set_thread_min_work(-1.0); /* the default threshold */
    const double e_default = small_term_energy(0, &other_default);
    const double e_two = small_term_energy(2, &other_two);
    lse_set_thread_min_work(0.0);
#ifdef LSE_TEST_OPENMP
    atomic_store(&spy_wait, 1);
#endif
    const double e_forced = small_term_energy(2, &other_forced);
    atomic_store(&spy_wait, 0);
    ck_assert_int_eq(other_default, 0);
    ck_assert_int_eq(other_two, 0); /* an explicit count is a maximum */
#ifdef LSE_TEST_OPENMP
    ck_assert_int_eq(other_forced, 1);
#else
    ck_assert_int_eq(other_forced, 0);
#endif
    ck_assert(e_default == e_two); /* bit for bit */
    ck_assert(e_default == e_forced);
    ck_assert(isfinite(e_default));
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("perf_invariants");
    TCase *tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_num_threads_setting);
    tcase_add_test(tc, test_small_term_default_one_thread);
    tcase_add_test(tc, test_em_full_threads_identical);
    tcase_add_test(tc, test_em_full_far_threads_identical);
    tcase_add_test(tc, test_tri_copies_agree);
    tcase_add_test(tc, test_em_diag_threads_identical);
    tcase_add_test(tc, test_simd_copies_agree);
    tcase_add_test(tc, test_qfull_copies_agree);
    tcase_add_test(tc, test_gmm_model_threads_identical);
    tcase_add_test(tc, test_slds_markov_threads_identical);
    tcase_add_test(tc, test_attention_grad_threads_identical);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("streaming");
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_set_timeout(ts, 120);
    tcase_add_test(ts, test_streaming_equals_dense);
    tcase_add_test(ts, test_em_streaming_equals_dense);
    suite_add_tcase(s, ts);
    return s;
}
