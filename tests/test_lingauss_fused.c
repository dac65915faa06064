#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "lse_check.h"
#include "sim/lingauss-fused-private.h"
#include "softmax-private.h"

/* The fused block pass of lse_sim_lingauss (lib/sim/lingauss_fused.c and
 * lib/softmax.c compiled in): against the separate steps (eval, the
 * library's softmax, stats) bit for bit where it runs (its AVX-512F copy,
 * blocks of a multiple of 8 rows; its AVX2 + FMA copy, of 4 rows: on
 * AVX-512 machines also with LSE_NO_AVX512), and
 * against a plain evaluation in long double from the scores (log-sum-exp,
 * responsibilities, the weighted least-squares statistics) for every
 * covariance type, size copy and K <= 4, with and without row weights;
 * the blocks it refuses; then SLDS mixture fits with and without it
 * (LSE_NO_FUSED: the same bits) and on the AVX2 copies (LSE_NO_AVX512). */

enum { P_LOGW = 0, P_A = 1, P_CHOL = 2, N_PARAM = 3 };

static int have_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("avx512f");
}

static int have_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           getenv("LSE_NO_SIMD") == NULL;
}

/* The rows per vector of the copy the pass runs here (8: AVX-512F, 4:
 * AVX2 + FMA), 0 for none (read as the workspace reads it, at creation) */
static size_t pass_lanes(void)
{
    if (have_avx512() && getenv("LSE_NO_AVX512") == NULL &&
        getenv("LSE_NO_SIMD") == NULL)
        return 8;
    return have_fma() ? 4 : 0;
}

/* One block: y (b, d), x (b, dc), offsets (K, d), logw, A, chol, row
 * weights, and a prepared workspace. */
typedef struct blk {
    lse_gaussian_config cfg;
    size_t b, K, d, dc;
    gsl_matrix *y, *x, *off, *param[N_PARAM];
    size_t rows[N_PARAM], cols[N_PARAM];
    double *w;
    lse_sim_shape shape;
    void *work;
    lse_sim_args args;
} blk;

static void blk_chol(gsl_matrix *c, lse_cov_type cov, size_t d, gsl_rng *r)
{
    for (size_t k = 0; k < c->size1; k++)
        for (size_t j = 0; j < c->size2; j++) {
            const size_t row = j / d, col = j % d;
            double v = 0.6 + 0.6 * gsl_rng_uniform(r); /* a diagonal */
            if ((cov == LSE_COV_FULL || cov == LSE_COV_TIED) && col < row)
                v = 0.4 * (gsl_rng_uniform(r) - 0.5);
            else if ((cov == LSE_COV_FULL || cov == LSE_COV_TIED) &&
                     col > row)
                v = 0.0;
            gsl_matrix_set(c, k, j, v);
        }
}

static void blk_make(blk *p, lse_cov_type cov, size_t b, size_t K, size_t d,
                     size_t dc, int weighted, unsigned long seed)
{
    memset(p, 0, sizeof *p);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    p->cfg.cov = cov;
    p->b = b;
    p->K = K;
    p->d = d;
    p->dc = dc;
    p->y = gsl_matrix_alloc(b, d);
    p->x = gsl_matrix_alloc(b, dc);
    p->off = gsl_matrix_alloc(K, d);
    p->param[P_LOGW] = gsl_matrix_alloc(K, 1);
    p->param[P_A] = gsl_matrix_alloc(K, d * dc);
    const size_t cr = cov == LSE_COV_TIED ? 1 : K;
    const size_t cc = cov == LSE_COV_DIAG ? d : cov == LSE_COV_SPHERICAL ? 1
                                                                          : d * d;
    p->param[P_CHOL] = gsl_matrix_alloc(cr, cc);
    for (size_t i = 0; i < b; i++) {
        for (size_t j = 0; j < dc; j++)
            gsl_matrix_set(p->x, i, j, 0.3 + gsl_ran_gaussian(r, 1.0));
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(p->y, i, j, -0.2 + 1.5 * gsl_ran_gaussian(r, 1.0));
    }
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_set(p->param[P_LOGW], k, 0, -1.0 + gsl_rng_uniform(r));
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(p->off, k, j, 0.7 * gsl_ran_gaussian(r, 1.0));
        for (size_t j = 0; j < d * dc; j++)
            gsl_matrix_set(p->param[P_A], k, j, gsl_rng_uniform(r) - 0.5);
    }
    blk_chol(p->param[P_CHOL], cov, d, r);
    if (weighted) {
        p->w = malloc(b * sizeof *p->w);
        for (size_t i = 0; i < b; i++)
            p->w[i] = 0.25 + gsl_rng_uniform(r);
    }
    gsl_rng_free(r);
    for (int q = 0; q < N_PARAM; q++) {
        p->rows[q] = p->param[q]->size1;
        p->cols[q] = p->param[q]->size2;
    }
    p->shape = (lse_sim_shape){.n_child = b, .block = 256, .n_parent = K,
                               .d_child = d, .d_parent = d, .d_context = dc,
                               .n_param = N_PARAM, .param_rows = p->rows,
                               .param_cols = p->cols};
    lse_assert_ok(lse_sim_lingauss->work_new(&p->shape, &p->cfg, &p->work));
    p->args = (lse_sim_args){.child = p->y, .parent = p->off,
                             .context = p->x,
                             .param = (const gsl_matrix *const *)p->param,
                             .config = &p->cfg, .work = p->work};
    lse_assert_ok(lse_sim_lingauss->prepare(&p->args));
}

static void blk_free(blk *p)
{
    lse_sim_lingauss->work_free(p->work);
    gsl_matrix_free(p->y);
    gsl_matrix_free(p->x);
    gsl_matrix_free(p->off);
    for (int q = 0; q < N_PARAM; q++)
        gsl_matrix_free(p->param[q]);
    free(p->w);
}

static size_t acc_size(const blk *p)
{
    return lse_sim_lingauss->stats_size(&p->shape, &p->cfg);
}

/* The separate steps of the term: eval, the library's softmax (beta 1),
 * stats; acc starts at `start`. S: the scores out (b, K). */
static void separate(const blk *p, double start, double *lse, double *acc,
                     gsl_matrix *s)
{
    gsl_matrix *a = gsl_matrix_alloc(p->b, p->K);
    double *m = malloc(p->b * sizeof *m);
    lse_assert_ok(lse_sim_lingauss->eval(&p->args, s));
    const lse_softmax_isa isa = lse_softmax_isa_detect();
    lse_softmax_rows(s, a, 1.0, lse, m, &isa);
    for (size_t i = 0; i < acc_size(p); i++)
        acc[i] = start;
    gsl_vector_view wv;
    const gsl_vector *w = NULL;
    if (p->w != NULL) {
        wv = gsl_vector_view_array(p->w, p->b);
        w = &wv.vector;
    }
    lse_assert_ok(lse_sim_lingauss->stats(&p->args, a, w, acc));
    gsl_matrix_free(a);
    free(m);
}

/* The plain evaluation from the scores s in long double: lse, and the
 * statistics (layout of stats_size: N | Sxx | Srx | Srr, symmetric blocks
 * whole) added to `start`. */
static void plain(const blk *p, const gsl_matrix *s, double start,
                  long double *lse, long double *acc)
{
    const size_t b = p->b, K = p->K, d = p->d, dc = p->dc, m = dc + 1;
    const lse_cov_type cov = p->cfg.cov;
    const size_t n = acc_size(p);
    for (size_t i = 0; i < n; i++)
        acc[i] = start;
    long double *xx = acc + K, *rx = xx + K * m * m, *rr = rx + K * d * m;
    for (size_t i = 0; i < b; i++) {
        long double mx = -INFINITY, sum = 0.0L;
        for (size_t k = 0; k < K; k++)
            mx = fmaxl(mx, gsl_matrix_get(s, i, k));
        for (size_t k = 0; k < K; k++)
            sum += expl(gsl_matrix_get(s, i, k) - mx);
        lse[i] = mx + logl(sum);
        long double a[4], r[3];
        for (size_t j = 0; j < m; j++)
            a[j] = j < dc ? gsl_matrix_get(p->x, i, j) : 1.0L;
        for (size_t k = 0; k < K; k++) {
            const long double rho = expl(gsl_matrix_get(s, i, k) - lse[i]) *
                                    (p->w != NULL ? p->w[i] : 1.0);
            for (size_t j = 0; j < d; j++) {
                r[j] = gsl_matrix_get(p->y, i, j) - gsl_matrix_get(p->off, k, j);
                for (size_t q = 0; q < dc; q++)
                    r[j] -= (long double)gsl_matrix_get(p->param[P_A], k,
                                                        j * dc + q) *
                            a[q];
            }
            acc[k] += rho;
            for (size_t u = 0; u < m; u++)
                for (size_t v = 0; v < m; v++)
                    xx[k * m * m + u * m + v] += rho * a[u] * a[v];
            for (size_t j = 0; j < d; j++)
                for (size_t u = 0; u < m; u++)
                    rx[k * d * m + j * m + u] += rho * r[j] * a[u];
            for (size_t j = 0; j < d; j++)
                for (size_t l = 0; l < d; l++) {
                    const long double t = rho * r[j] * r[l];
                    if (cov == LSE_COV_FULL)
                        rr[k * d * d + j * d + l] += t;
                    else if (cov == LSE_COV_TIED)
                        rr[j * d + l] += t;
                    else if (cov == LSE_COV_DIAG && j == l)
                        rr[k * d + j] += t;
                    else if (cov == LSE_COV_SPHERICAL && j == l)
                        rr[k] += t;
                }
        }
    }
}

static int same_bits(const double *a, const double *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* Every covariance type, size copy, K <= 4, with and without weights,
 * blocks of 4 to 256 rows: the pass against the separate steps (bits)
 * and the plain evaluation. Returns the blocks the pass did. */
static int fused_blocks(void)
{
    static const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_TIED,
                                         LSE_COV_DIAG, LSE_COV_SPHERICAL};
    static const size_t sizes[4][2] = {{1, 1}, {1, 2}, {2, 2}, {3, 3}};
    static const size_t bs[5] = {4, 8, 12, 136, 256};
    const size_t lanes = pass_lanes();
    int done = 0;
    for (size_t run = 0; run < 4 * 4 * 4 * 2 * 5; run++) {
        const lse_cov_type cov = covs[run % 4];
        const size_t d = sizes[run / 4 % 4][0], dc = sizes[run / 4 % 4][1];
        const size_t K = 1 + run / 16 % 4, b = bs[run / 64 % 5];
        const int weighted = (int)(run / 320);
        blk p;
        blk_make(&p, cov, b, K, d, dc, weighted, 100 + run);
        const size_t n = acc_size(&p);
        double *lse = malloc(b * sizeof *lse), *acc = malloc(n * sizeof *acc);
        double *lse2 = malloc(b * sizeof *lse2);
        double *acc2 = malloc(n * sizeof *acc2);
        long double *lse3 = malloc(b * sizeof *lse3);
        long double *acc3 = malloc(n * sizeof *acc3);
        gsl_matrix *s = gsl_matrix_alloc(b, K);
        for (size_t i = 0; i < n; i++)
            acc[i] = 0.5;
        const int rc = lse_lingauss_fused(&p.args, p.w, lse, acc);
        ck_assert_int_eq(rc, lanes != 0 && b % lanes == 0);
        separate(&p, 0.5, lse2, acc2, s);
        plain(&p, s, 0.5, lse3, acc3);
        if (rc) {
            done++;
            ck_assert_msg(same_bits(lse, lse2, b), "run %zu: lse", run);
            ck_assert_msg(same_bits(acc, acc2, n), "run %zu: statistics",
                          run);
        }
        /* the pass where it ran, else the separate steps */
        const double *l = rc ? lse : lse2, *st = rc ? acc : acc2;
        for (size_t i = 0; i < b; i++)
            ck_assert_double_eq_tol(l[i], (double)lse3[i],
                                    1e-13 * (1.0 + fabsl(lse3[i])));
        long double scale = 0.0L;
        for (size_t i = 0; i < n; i++)
            scale = fmaxl(scale, fabsl(acc3[i]));
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(fabsl(st[i] - acc3[i]) <= 1e-12L * scale,
                          "run %zu: statistic %zu: %.17g vs %.17Lg", run, i,
                          st[i], acc3[i]);
        gsl_matrix_free(s);
        free(lse);
        free(acc);
        free(lse2);
        free(acc2);
        free(lse3);
        free(acc3);
        blk_free(&p);
    }
    return done;
}

START_TEST(test_fused_block)
{
    /* 4 x 4 x 4 x 2 runs per block size: all five sizes with 4 lanes,
     * the three of a multiple of 8 with 8 */
    const size_t lanes = pass_lanes();
    ck_assert_int_eq(fused_blocks(),
                     lanes == 8 ? 3 * 128 : lanes == 4 ? 5 * 128 : 0);
    if (lanes == 8) { /* the AVX2 copy on this machine too */
        ck_assert_int_eq(setenv("LSE_NO_AVX512", "1", 1), 0);
        ck_assert_int_eq(fused_blocks(), 5 * 128);
        ck_assert_int_eq(unsetenv("LSE_NO_AVX512"), 0);
    }
}
END_TEST

/* What the pass leaves to the separate steps: a block of no multiple of
 * its rows per vector, K = 5, a size without a copy, a NaN score (acc
 * untouched); a mode of weight 0 (scores -INFINITY) it does, as the
 * separate steps. */
START_TEST(test_fused_refuses)
{
    const size_t lanes = pass_lanes();
    if (lanes == 0)
        return;
    double lse[256], acc[512];
    blk p;
    blk_make(&p, LSE_COV_FULL, lanes == 8 ? 12 : 14, 3, 2, 2, 0, 7);
    ck_assert_int_eq(lse_lingauss_fused(&p.args, NULL, lse, acc), 0);
    blk_free(&p);
    blk_make(&p, LSE_COV_FULL, 16, 5, 2, 2, 0, 8);
    ck_assert_int_eq(lse_lingauss_fused(&p.args, NULL, lse, acc), 0);
    blk_free(&p);
    blk_make(&p, LSE_COV_DIAG, 16, 3, 2, 3, 0, 9);
    ck_assert_int_eq(lse_lingauss_fused(&p.args, NULL, lse, acc), 0);
    blk_free(&p);

    blk_make(&p, LSE_COV_FULL, 64, 3, 2, 2, 1, 10);
    const size_t n = acc_size(&p);
    for (size_t i = 0; i < n; i++)
        acc[i] = 1.5;
    gsl_matrix_set(p.y, 37, 1, NAN);
    ck_assert_int_eq(lse_lingauss_fused(&p.args, p.w, lse, acc), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert(acc[i] == 1.5);
    gsl_matrix_set(p.y, 37, 1, 0.25);
    gsl_matrix_set(p.param[P_LOGW], 1, 0, -INFINITY);
    lse_assert_ok(lse_sim_lingauss->prepare(&p.args));
    double lse2[64], acc2[512];
    gsl_matrix *s = gsl_matrix_alloc(64, 3);
    ck_assert_int_eq(lse_lingauss_fused(&p.args, p.w, lse, acc), 1);
    separate(&p, 1.5, lse2, acc2, s);
    ck_assert(same_bits(lse, lse2, 64));
    ck_assert(same_bits(acc, acc2, n));
    ck_assert(acc[1] == 1.5); /* N_1: nothing added */
    gsl_matrix_free(s);
    blk_free(&p);
}
END_TEST

/* An SLDS mixture series: K = 3 modes, d = 2, T rows. */
static gsl_matrix *series(size_t T, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_calloc(T, 2);
    static const double a[3][4] = {
        {0.9, 0.1, -0.1, 0.8}, {0.5, -0.3, 0.2, 0.4}, {-0.2, 0.0, 0.3, 0.6}};
    for (size_t t = 1; t < T; t++) {
        const size_t k = gsl_rng_uniform_int(r, 3);
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(x, t, j,
                           a[k][2 * j] * gsl_matrix_get(x, t - 1, 0) +
                               a[k][2 * j + 1] * gsl_matrix_get(x, t - 1, 1) +
                               0.3 * (double)k +
                               gsl_ran_gaussian(r, 0.2 + 0.2 * (double)k));
    }
    gsl_rng_free(r);
    return x;
}

typedef struct fit_out {
    double loglik;
    double a[3][4], b[3][2], cov[3][4], w[3];
} fit_out;

static void fit(const gsl_matrix *x, lse_cov_type cov, fit_out *out)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 3;
    cfg.dim = 2;
    cfg.cov = cov;
    lse_slds *m = NULL;
    lse_error err = {0};
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    lse_slds_opts o = lse_slds_opts_default();
    o.max_iter = 15;
    o.tol = 0.0;
    o.seed = 3;
    const lse_status st = lse_slds_fit(m, x, NULL, &o, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    memset(out, 0, sizeof *out);
    out->loglik = lse_slds_loglik(m);
    gsl_vector_view w = gsl_vector_view_array(out->w, 3);
    lse_assert_ok(lse_slds_get_weights(m, &w.vector));
    for (size_t k = 0; k < 3; k++) {
        gsl_matrix_view a = gsl_matrix_view_array(out->a[k], 2, 2);
        gsl_vector_view b = gsl_vector_view_array(out->b[k], 2);
        gsl_matrix_view c = gsl_matrix_view_array(out->cov[k], 2, 2);
        lse_assert_ok(lse_slds_get_a(m, k, &a.matrix));
        lse_assert_ok(lse_slds_get_b(m, k, &b.vector));
        lse_assert_ok(lse_slds_get_cov(m, k, &c.matrix));
    }
    lse_slds_free(m);
}

static void set_env(const char *name, int on)
{
    if (on)
        ck_assert_int_eq(setenv(name, "1", 1), 0);
    else
        ck_assert_int_eq(unsetenv(name), 0);
}

/* SLDS mixture fits (T not a multiple of the block: the last block takes
 * the separate steps) with the pass and without (LSE_NO_FUSED): the same
 * bits; on the AVX2 copies the same fit to 1e-9. */
START_TEST(test_slds_fit)
{
    gsl_matrix *x = series(3001, 4);
    static const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_TIED,
                                         LSE_COV_DIAG, LSE_COV_SPHERICAL};
    for (int c = 0; c < 4; c++) {
        fit_out f, s, v;
        fit(x, covs[c], &f);
        set_env("LSE_NO_FUSED", 1);
        fit(x, covs[c], &s);
        set_env("LSE_NO_FUSED", 0);
        ck_assert_msg(memcmp(&f, &s, sizeof f) == 0, "cov %d: not the same "
                      "bits (loglik %.17g vs %.17g)", c, f.loglik, s.loglik);
        set_env("LSE_NO_AVX512", 1);
        fit(x, covs[c], &v);
        set_env("LSE_NO_AVX512", 0);
        ck_assert_double_eq_tol(f.loglik, v.loglik, 1e-9 * fabs(v.loglik));
        for (size_t k = 0; k < 3; k++)
            for (size_t j = 0; j < 4; j++)
                ck_assert_double_eq_tol(f.a[k][j], v.a[k][j], 1e-8);
    }
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("lingauss_fused");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fused_block);
    tcase_add_test(tc, test_fused_refuses);
    tcase_add_test(tc, test_slds_fit);
    suite_add_tcase(s, tc);
    return s;
}
