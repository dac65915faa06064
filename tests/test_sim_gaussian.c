#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lib/sim/gaussian.c (+ lib/sim/gauss_common.c): lse_sim_gaussian. */

enum { P_LOGW = 0, P_CHOL = 1 };

static const lse_cov_type all_cov[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                        LSE_COV_SPHERICAL, LSE_COV_TIED};

/* One instance of the similarity: values, shape and workspace. */
typedef struct inst {
    lse_gaussian_config cfg;
    size_t n, K, d;
    gsl_matrix *child;    /* (n, d) */
    gsl_matrix *parent;   /* (K, d) means */
    gsl_matrix *param[2]; /* logw (K, 1) or NULL, chol */
    size_t rows[2], cols[2];
    lse_sim_shape shape;
    void *work;
} inst;

static size_t chol_cols(lse_cov_type cov, size_t d)
{
    return cov == LSE_COV_DIAG ? d : cov == LSE_COV_SPHERICAL ? 1 : d * d;
}

/* Random chol parameter: diagonals of mixed sign, well away from 0; the
 * upper triangle of full/tied factors holds garbage (must be ignored). */
static void fill_chol(gsl_matrix *chol, lse_cov_type cov, size_t d,
                      gsl_rng *rng)
{
    for (size_t k = 0; k < chol->size1; k++) {
        if (cov == LSE_COV_DIAG || cov == LSE_COV_SPHERICAL) {
            for (size_t j = 0; j < chol->size2; j++) {
                const double v = 0.55 + 0.5 * gsl_rng_uniform(rng);
                gsl_matrix_set(chol, k, j, (k + j) % 3 == 1 ? -v : v);
            }
            continue;
        }
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double v;
                if (j < i)
                    v = 0.35 * (gsl_rng_uniform(rng) - 0.5);
                else if (j == i)
                    v = (0.6 + 0.45 * gsl_rng_uniform(rng)) *
                        ((i + k) % 3 == 1 ? -1.0 : 1.0);
                else
                    v = 7.25 + gsl_rng_uniform(rng); /* ignored */
                gsl_matrix_set(chol, k, i * d + j, v);
            }
    }
}

static void inst_init(inst *in, lse_cov_type cov, size_t n, size_t K, size_t d,
                      int with_logw, unsigned long seed)
{
    memset(in, 0, sizeof *in);
    in->cfg.cov = cov;
    in->n = n;
    in->K = K;
    in->d = d;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(rng);
    gsl_rng_set(rng, seed);
    in->child = gsl_matrix_alloc(n, d);
    in->parent = gsl_matrix_alloc(K, d);
    ck_assert_ptr_nonnull(in->child);
    ck_assert_ptr_nonnull(in->parent);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(in->child, i, j,
                           0.3 + 1.1 * gsl_ran_gaussian(rng, 1.0));
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(in->parent, k, j,
                           0.7 * gsl_ran_gaussian(rng, 1.0) + 0.1 * (double)k);
    if (with_logw) {
        in->param[P_LOGW] = gsl_matrix_alloc(K, 1);
        ck_assert_ptr_nonnull(in->param[P_LOGW]);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(in->param[P_LOGW], k, 0,
                           0.4127 + 0.9 * gsl_rng_uniform(rng) -
                               0.3 * (double)k);
        in->rows[P_LOGW] = K;
        in->cols[P_LOGW] = 1;
    }
    const size_t cr = cov == LSE_COV_TIED ? 1 : K;
    in->param[P_CHOL] = gsl_matrix_alloc(cr, chol_cols(cov, d));
    ck_assert_ptr_nonnull(in->param[P_CHOL]);
    fill_chol(in->param[P_CHOL], cov, d, rng);
    in->rows[P_CHOL] = cr;
    in->cols[P_CHOL] = chol_cols(cov, d);
    gsl_rng_free(rng);
}

/* shape for a view of n rows with the given block, check, work_new */
static void inst_work(inst *in, size_t block)
{
    in->shape = (lse_sim_shape){.n_child = in->n,
                                .block = block,
                                .n_parent = in->K,
                                .d_child = in->d,
                                .d_parent = in->d,
                                .d_context = 0,
                                .n_param = 2,
                                .param_rows = in->rows,
                                .param_cols = in->cols};
    char msg[256] = "";
    const lse_status st =
        lse_sim_gaussian->check(&in->shape, &in->cfg, msg, sizeof msg);
    ck_assert_msg(st == LSE_OK, "check: %s", msg);
    lse_assert_ok(lse_sim_gaussian->work_new(&in->shape, &in->cfg, &in->work));
    ck_assert_ptr_nonnull(in->work);
}

static lse_sim_args inst_args(const inst *in, const gsl_matrix *child)
{
    return (lse_sim_args){.child = child != NULL ? child : in->child,
                          .parent = in->parent,
                          .context = NULL,
                          .child_offset = 0,
                          .param = (const gsl_matrix *const *)in->param,
                          .config = &in->cfg,
                          .work = in->work};
}

static void inst_free(inst *in)
{
    if (in->work != NULL)
        lse_sim_gaussian->work_free(in->work);
    gsl_matrix_free(in->child);
    gsl_matrix_free(in->parent);
    gsl_matrix_free(in->param[0]);
    gsl_matrix_free(in->param[1]);
    memset(in, 0, sizeof *in);
}

/* S = eval over all children (prepare first) */
static lse_status inst_eval(inst *in, gsl_matrix *s)
{
    const lse_sim_args a = inst_args(in, NULL);
    lse_status st = lse_sim_gaussian->prepare(&a);
    if (st == LSE_OK)
        st = lse_sim_gaussian->eval(&a, s);
    return st;
}

/* Sigma_k (d, d) built from the chol parameter by the stated layout. */
static void sigma_of(const inst *in, size_t k, gsl_matrix *sig)
{
    const size_t d = in->d;
    const gsl_matrix *c = in->param[P_CHOL];
    gsl_matrix_set_zero(sig);
    switch (in->cfg.cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED: {
        const size_t row = in->cfg.cov == LSE_COV_TIED ? 0 : k;
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double v = 0.0;
                for (size_t l = 0; l <= (i < j ? i : j); l++)
                    v += gsl_matrix_get(c, row, i * d + l) *
                         gsl_matrix_get(c, row, j * d + l);
                gsl_matrix_set(sig, i, j, v);
            }
        break;
    }
    case LSE_COV_DIAG:
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(sig, j, j, gsl_pow_2(gsl_matrix_get(c, k, j)));
        break;
    case LSE_COV_SPHERICAL:
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(sig, j, j, gsl_pow_2(gsl_matrix_get(c, k, 0)));
        break;
    }
}

/* log pi_k from logw (0 without logw) */
static double log_pi(const inst *in, size_t k)
{
    const gsl_matrix *w = in->param[P_LOGW];
    if (w == NULL)
        return 0.0;
    double sum = 0.0;
    for (size_t l = 0; l < in->K; l++)
        sum += exp(gsl_matrix_get(w, l, 0));
    return gsl_matrix_get(w, k, 0) - log(sum);
}

/* log N(x; mu_k, Sigma_k), computed independently of the library: a fresh
 * Cholesky factorization of Sigma_k = L L' (full/tied), or products of
 * gsl_ran_gaussian_pdf (diag/spherical). */
static double log_density(const inst *in, size_t i, size_t k)
{
    const size_t d = in->d;
    const gsl_matrix *c = in->param[P_CHOL];
    if (in->cfg.cov == LSE_COV_DIAG || in->cfg.cov == LSE_COV_SPHERICAL) {
        double lp = 0.0;
        for (size_t j = 0; j < d; j++) {
            const double sd =
                fabs(gsl_matrix_get(c, k, in->cfg.cov == LSE_COV_DIAG ? j : 0));
            lp += log(gsl_ran_gaussian_pdf(gsl_matrix_get(in->child, i, j) -
                                               gsl_matrix_get(in->parent, k, j),
                                           sd));
        }
        return lp;
    }
    gsl_matrix *sig = gsl_matrix_alloc(d, d);
    gsl_vector *r = gsl_vector_alloc(d), *u = gsl_vector_alloc(d);
    sigma_of(in, k, sig);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(sig), GSL_SUCCESS);
    for (size_t j = 0; j < d; j++)
        gsl_vector_set(r, j,
                       gsl_matrix_get(in->child, i, j) -
                           gsl_matrix_get(in->parent, k, j));
    ck_assert_int_eq(gsl_linalg_cholesky_solve(sig, r, u), GSL_SUCCESS);
    double quad = 0.0, logdet = 0.0;
    for (size_t j = 0; j < d; j++) {
        quad += gsl_vector_get(r, j) * gsl_vector_get(u, j);
        logdet += 2.0 * log(gsl_matrix_get(sig, j, j));
    }
    gsl_matrix_free(sig);
    gsl_vector_free(r);
    gsl_vector_free(u);
    return -0.5 * quad - 0.5 * ((double)d * log(2.0 * M_PI) + logdet);
}

static double rel_err(double a, double b)
{
    const double den = fmax(1.0, fmax(fabs(a), fabs(b)));
    return fabs(a - b) / den;
}

/* ------------------------------------------------------------------ */

START_TEST(test_type_object)
{
    const lse_sim_type *t = lse_sim_gaussian;
    ck_assert_str_eq(t->name, "gaussian");
    ck_assert_uint_eq(t->n_param, 2);
    ck_assert_str_eq(t->param_names[0], "logw");
    ck_assert_str_eq(t->param_names[1], "chol");
    ck_assert_uint_eq(t->optional_params, 1u);
    ck_assert_uint_eq(t->config_size, sizeof(lse_gaussian_config));
    ck_assert_int_eq(((const lse_gaussian_config *)t->config_default)->cov,
                     LSE_COV_FULL);
    ck_assert_uint_eq(t->flags & LSE_SIM_NEEDS_CONTEXT, 0);
    ck_assert(t->stats != NULL && t->solve != NULL && t->prepare != NULL);
    const char *want[4] = {"cov=full", "cov=diag", "cov=spherical", "cov=tied"};
    for (int c = 0; c < 4; c++) {
        const lse_gaussian_config cfg = {.cov = all_cov[c]};
        char buf[64];
        ck_assert_int_eq(t->describe(&cfg, buf, sizeof buf),
                         (int)strlen(want[c]));
        ck_assert_str_eq(buf, want[c]);
    }
}
END_TEST

/* S_ik = log pi_k + log N(x_i; mu_k, Sigma_k) for every covariance type,
 * with and without logw, with a block smaller than the data */
START_TEST(test_eval_is_log_density)
{
    for (int c = 0; c < 4; c++)
        for (int lw = 0; lw < 2; lw++) {
            inst in;
            inst_init(&in, all_cov[c], 37, 4, 3, lw, 11u + (unsigned)c);
            inst_work(&in, 16);
            gsl_matrix *s = gsl_matrix_alloc(16, in.K);
            const lse_sim_args a0 = inst_args(&in, NULL);
            lse_assert_ok(lse_sim_gaussian->prepare(&a0));
            for (size_t r0 = 0; r0 < in.n; r0 += 16) {
                const size_t b = in.n - r0 < 16 ? in.n - r0 : 16;
                gsl_matrix_view blk =
                    gsl_matrix_submatrix(in.child, r0, 0, b, in.d);
                gsl_matrix_view sb = gsl_matrix_submatrix(s, 0, 0, b, in.K);
                const lse_sim_args a = inst_args(&in, &blk.matrix);
                lse_assert_ok(lse_sim_gaussian->eval(&a, &sb.matrix));
                for (size_t i = 0; i < b; i++)
                    for (size_t k = 0; k < in.K; k++) {
                        const double want =
                            log_pi(&in, k) + log_density(&in, r0 + i, k);
                        const double got = gsl_matrix_get(s, i, k);
                        ck_assert_msg(rel_err(got, want) < 1e-12,
                                      "cov %d logw %d S(%zu,%zu) = %.15g, "
                                      "want %.15g",
                                      c, lw, r0 + i, k, got, want);
                    }
            }
            gsl_matrix_free(s);
            inst_free(&in);
        }
}
END_TEST

/* sum_k exp(S(x, k)) is a probability density: it integrates to 1
 * (this is what the log det term buys). d = 1 for every type; d = 2 full. */
START_TEST(test_mixture_integrates_to_one)
{
    for (int c = 0; c < 4; c++) {
        const size_t d = c == 0 ? 2 : 1;
        const size_t m = d == 1 ? 6001 : 321; /* grid points per axis */
        const double lo = -9.0, hi = 9.0, h = (hi - lo) / (double)(m - 1);
        inst in;
        inst_init(&in, all_cov[c], d == 1 ? m : m * m, 3, d, 1, 5u);
        for (size_t i = 0; i < in.n; i++) {
            gsl_matrix_set(in.child, i, 0, lo + h * (double)(i % m));
            if (d == 2)
                gsl_matrix_set(in.child, i, 1, lo + h * (double)(i / m));
        }
        inst_work(&in, in.n);
        gsl_matrix *s = gsl_matrix_alloc(in.n, in.K);
        lse_assert_ok(inst_eval(&in, s));
        double total = 0.0; /* trapezoid; the tails are negligible */
        for (size_t i = 0; i < in.n; i++) {
            double wgt = 1.0;
            if (i % m == 0 || i % m == m - 1)
                wgt *= 0.5;
            if (d == 2 && (i / m == 0 || i / m == m - 1))
                wgt *= 0.5;
            for (size_t k = 0; k < in.K; k++)
                total += wgt * exp(gsl_matrix_get(s, i, k));
        }
        total *= d == 1 ? h : h * h;
        ck_assert_msg(fabs(total - 1.0) < 1e-8, "cov %d: integral %.12f", c,
                      total);
        gsl_matrix_free(s);
        inst_free(&in);
    }
}
END_TEST

/* data and means far from the origin (1e7) with unit-scale spread: the
 * kernels work with differences, so S keeps full relative accuracy (a
 * kernel expanding (x - mu) around 0 would lose about 9 digits) */
START_TEST(test_eval_far_from_origin)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 25, 4, 3, 1, 71u);
        gsl_matrix_add_constant(in.child, 1e7);
        gsl_matrix_add_constant(in.parent, 1e7);
        inst_work(&in, 10);
        gsl_matrix *s = gsl_matrix_alloc(in.n, in.K);
        const lse_sim_args a0 = inst_args(&in, NULL);
        lse_assert_ok(lse_sim_gaussian->prepare(&a0));
        for (size_t r0 = 0; r0 < in.n; r0 += 10) {
            const size_t b = in.n - r0 < 10 ? in.n - r0 : 10;
            gsl_matrix_view blk =
                gsl_matrix_submatrix(in.child, r0, 0, b, in.d);
            gsl_matrix_view sb = gsl_matrix_submatrix(s, r0, 0, b, in.K);
            const lse_sim_args a = inst_args(&in, &blk.matrix);
            lse_assert_ok(lse_sim_gaussian->eval(&a, &sb.matrix));
        }
        for (size_t i = 0; i < in.n; i++)
            for (size_t k = 0; k < in.K; k++) {
                const double want = log_pi(&in, k) + log_density(&in, i, k);
                ck_assert_msg(rel_err(gsl_matrix_get(s, i, k), want) < 1e-12,
                              "cov %d S(%zu,%zu) = %.15g want %.15g", c, i, k,
                              gsl_matrix_get(s, i, k), want);
            }
        gsl_matrix_free(s);
        inst_free(&in);
    }
}
END_TEST

/* a log weight of -INFINITY (log 0) is legal: its column is -INFINITY */
START_TEST(test_eval_log_zero_weight)
{
    inst in;
    inst_init(&in, LSE_COV_FULL, 6, 3, 2, 1, 3u);
    gsl_matrix_set(in.param[P_LOGW], 1, 0, -INFINITY);
    inst_work(&in, in.n);
    gsl_matrix *s = gsl_matrix_alloc(in.n, in.K);
    lse_assert_ok(inst_eval(&in, s));
    for (size_t i = 0; i < in.n; i++) {
        ck_assert(gsl_matrix_get(s, i, 1) == -INFINITY);
        ck_assert(isfinite(gsl_matrix_get(s, i, 0)));
        ck_assert(rel_err(gsl_matrix_get(s, i, 2),
                          log_pi(&in, 2) + log_density(&in, i, 2)) < 1e-12);
    }
    gsl_matrix_free(s);
    inst_free(&in);
}
END_TEST

/* child, parent, logw and chol gradients against central differences */
START_TEST(test_gradients)
{
    for (int c = 0; c < 4; c++)
        for (int lw = 0; lw < 2; lw++) {
            inst in;
            inst_init(&in, all_cov[c], 7, 3, 3, lw, 101u + (unsigned)c);
            lse_gradcheck res;
            lse_error err = {0};
            lse_assert_ok(lse_sim_check_gradient(
                lse_sim_gaussian, &in.cfg, in.child, in.parent, NULL,
                (const gsl_matrix *const *)in.param, 1e-6, 1.0, &res, &err));
            ck_assert_msg(res.max_error < 1e-6,
                          "cov %d logw %d: error %g at %s (analytic %.10g, "
                          "numeric %.10g)",
                          c, lw, res.max_error, res.where, res.analytic,
                          res.numeric);
            const size_t want =
                in.n * in.d + in.K * in.d + (lw ? in.K : 0) +
                in.param[P_CHOL]->size1 * in.param[P_CHOL]->size2;
            ck_assert_uint_eq(res.n_checked, want);
            inst_free(&in);
        }
}
END_TEST

/* the block path of grad (b < n): summing block gradients equals one call
 * over all rows */
START_TEST(test_grad_blocks_add_up)
{
    for (int c = 0; c < 4; c++) {
        inst in, whole;
        inst_init(&in, all_cov[c], 21, 3, 4, 1, 7u);
        inst_init(&whole, all_cov[c], 21, 3, 4, 1, 7u);
        inst_work(&in, 8);
        inst_work(&whole, 21);
        gsl_matrix *g = gsl_matrix_alloc(in.n, in.K);
        for (size_t i = 0; i < in.n; i++)
            for (size_t k = 0; k < in.K; k++)
                gsl_matrix_set(g, i, k,
                               0.4127 * sin(1.3 * (double)i + (double)k));
        gsl_matrix *gc[2], *gp[2], *gw[2], *gl[2];
        for (int v = 0; v < 2; v++) {
            gc[v] = gsl_matrix_calloc(in.n, in.d);
            gp[v] = gsl_matrix_calloc(in.K, in.d);
            gw[v] = gsl_matrix_calloc(in.K, 1);
            gl[v] = gsl_matrix_calloc(in.param[P_CHOL]->size1,
                                      in.param[P_CHOL]->size2);
        }
        {
            const lse_sim_args a = inst_args(&whole, NULL);
            gsl_matrix *pg[2] = {gw[0], gl[0]};
            const lse_sim_grads out = {
                .child = gc[0], .parent = gp[0], .param = pg};
            lse_assert_ok(lse_sim_gaussian->prepare(&a));
            lse_assert_ok(lse_sim_gaussian->grad(&a, g, &out));
        }
        const lse_sim_args a0 = inst_args(&in, NULL);
        lse_assert_ok(lse_sim_gaussian->prepare(&a0));
        for (size_t r0 = 0; r0 < in.n; r0 += 8) {
            const size_t b = in.n - r0 < 8 ? in.n - r0 : 8;
            gsl_matrix_view cb = gsl_matrix_submatrix(in.child, r0, 0, b, in.d);
            gsl_matrix_view gb = gsl_matrix_submatrix(g, r0, 0, b, in.K);
            gsl_matrix_view ob = gsl_matrix_submatrix(gc[1], r0, 0, b, in.d);
            gsl_matrix *pg[2] = {gw[1], gl[1]};
            const lse_sim_grads out = {
                .child = &ob.matrix, .parent = gp[1], .param = pg};
            const lse_sim_args a = inst_args(&in, &cb.matrix);
            lse_assert_ok(lse_sim_gaussian->grad(&a, &gb.matrix, &out));
        }
        const gsl_matrix *pairs[4][2] = {
            {gc[0], gc[1]}, {gp[0], gp[1]}, {gw[0], gw[1]}, {gl[0], gl[1]}};
        for (int p = 0; p < 4; p++)
            for (size_t i = 0; i < pairs[p][0]->size1; i++)
                for (size_t j = 0; j < pairs[p][0]->size2; j++)
                    ck_assert(rel_err(gsl_matrix_get(pairs[p][0], i, j),
                                      gsl_matrix_get(pairs[p][1], i, j)) <
                              1e-12);
        for (int v = 0; v < 2; v++) {
            gsl_matrix_free(gc[v]);
            gsl_matrix_free(gp[v]);
            gsl_matrix_free(gw[v]);
            gsl_matrix_free(gl[v]);
        }
        gsl_matrix_free(g);
        inst_free(&in);
        inst_free(&whole);
    }
}
END_TEST

/* many components in many dimensions: the wide kernels split a call into
 * row chunks; chunked and unchunked results agree, and S is still the log
 * density */
START_TEST(test_wide_chunks)
{
    const lse_cov_type covs[2] = {LSE_COV_FULL, LSE_COV_TIED};
    for (int c = 0; c < 2; c++) {
        inst big, small;
        inst_init(&big, covs[c], 250, 20, 30, 1, 123u);
        inst_init(&small, covs[c], 250, 20, 30, 1, 123u);
        inst_work(&big, 250);  /* chunks of 65536 / 600 = 109 rows inside */
        inst_work(&small, 50); /* calls of 50 rows, one chunk each */
        gsl_matrix *s = gsl_matrix_alloc(big.n, big.K);
        lse_assert_ok(inst_eval(&big, s));
        for (size_t i = 0; i < big.n; i += 7)
            for (size_t k = 0; k < big.K; k++)
                ck_assert(rel_err(gsl_matrix_get(s, i, k),
                                  log_pi(&big, k) + log_density(&big, i, k)) <
                          1e-11);
        gsl_matrix *g = gsl_matrix_alloc(big.n, big.K);
        for (size_t i = 0; i < big.n; i++)
            for (size_t k = 0; k < big.K; k++)
                gsl_matrix_set(g, i, k, 0.3 + sin(0.37 * (double)(i * 3 + k)));
        gsl_matrix *gc[2], *gp[2], *gl[2];
        for (int v = 0; v < 2; v++) {
            gc[v] = gsl_matrix_calloc(big.n, big.d);
            gp[v] = gsl_matrix_calloc(big.K, big.d);
            gl[v] = gsl_matrix_calloc(big.param[P_CHOL]->size1,
                                      big.param[P_CHOL]->size2);
        }
        {
            const lse_sim_args a = inst_args(&big, NULL);
            gsl_matrix *pg[2] = {NULL, gl[0]};
            const lse_sim_grads out = {
                .child = gc[0], .parent = gp[0], .param = pg};
            lse_assert_ok(lse_sim_gaussian->grad(&a, g, &out));
        }
        const lse_sim_args a0 = inst_args(&small, NULL);
        lse_assert_ok(lse_sim_gaussian->prepare(&a0));
        for (size_t r0 = 0; r0 < small.n; r0 += 50) {
            gsl_matrix_view cb =
                gsl_matrix_submatrix(small.child, r0, 0, 50, small.d);
            gsl_matrix_view gb = gsl_matrix_submatrix(g, r0, 0, 50, small.K);
            gsl_matrix_view ob =
                gsl_matrix_submatrix(gc[1], r0, 0, 50, small.d);
            gsl_matrix *pg[2] = {NULL, gl[1]};
            const lse_sim_grads out = {
                .child = &ob.matrix, .parent = gp[1], .param = pg};
            const lse_sim_args a = inst_args(&small, &cb.matrix);
            lse_assert_ok(lse_sim_gaussian->grad(&a, &gb.matrix, &out));
        }
        const gsl_matrix *pairs[3][2] = {
            {gc[0], gc[1]}, {gp[0], gp[1]}, {gl[0], gl[1]}};
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < pairs[p][0]->size1; i++)
                for (size_t j = 0; j < pairs[p][0]->size2; j++)
                    ck_assert_msg(rel_err(gsl_matrix_get(pairs[p][0], i, j),
                                          gsl_matrix_get(pairs[p][1], i, j)) <
                                      1e-11,
                                  "cov %d grad %d (%zu,%zu)", c, p, i, j);
        for (int v = 0; v < 2; v++) {
            gsl_matrix_free(gc[v]);
            gsl_matrix_free(gp[v]);
            gsl_matrix_free(gl[v]);
        }
        gsl_matrix_free(g);
        gsl_matrix_free(s);
        inst_free(&big);
        inst_free(&small);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* M-step                                                              */

/* positive responsibilities (rows sum to 1) and optional row weights */
static gsl_matrix *make_resp(size_t n, size_t K, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    gsl_matrix *r = gsl_matrix_alloc(n, K);
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double v = 0.05 + gsl_rng_uniform(rng);
            gsl_matrix_set(r, i, k, v);
            sum += v;
        }
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(r, i, k, gsl_matrix_get(r, i, k) / sum);
    }
    gsl_rng_free(rng);
    return r;
}

static gsl_vector *make_weight(size_t n)
{
    gsl_vector *w = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(w, i, 0.6 + 0.5 * fabs(sin(0.77 * (double)i + 0.4127)));
    return w;
}

/* stats over all rows (one call per block of in->shape.block rows), then
 * solve in place */
static lse_status run_mstep(inst *in, const gsl_matrix *resp,
                            const gsl_vector *weight,
                            const lse_mstep_opts *opts,
                            lse_mstep_report *report, char *msg, size_t len)
{
    const size_t ns = lse_sim_gaussian->stats_size(&in->shape, &in->cfg);
    double *acc = calloc(ns, sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    const size_t blk = in->shape.block;
    lse_status st = LSE_OK;
    for (size_t r0 = 0; r0 < in->n && st == LSE_OK; r0 += blk) {
        const size_t b = in->n - r0 < blk ? in->n - r0 : blk;
        gsl_matrix_view cb = gsl_matrix_submatrix(in->child, r0, 0, b, in->d);
        gsl_matrix_const_view rb =
            gsl_matrix_const_submatrix(resp, r0, 0, b, in->K);
        const lse_sim_args a = inst_args(in, &cb.matrix);
        if (weight != NULL) {
            gsl_vector_const_view wb =
                gsl_vector_const_subvector(weight, r0, b);
            st = lse_sim_gaussian->stats(&a, &rb.matrix, &wb.vector, acc);
        } else {
            st = lse_sim_gaussian->stats(&a, &rb.matrix, NULL, acc);
        }
    }
    if (st == LSE_OK) {
        const lse_sim_args a = inst_args(in, NULL);
        st = lse_sim_gaussian->solve(&a, acc, in->parent, in->param, opts,
                                     report, msg, len);
    }
    free(acc);
    return st;
}

/* reference weighted mean m_k and scatter C_k = sum w r (x-m)(x-m)'/N_k */
static double ref_moments(const inst *in, const gsl_matrix *resp,
                          const gsl_vector *weight, size_t k, double *m,
                          gsl_matrix *cov)
{
    const size_t d = in->d;
    double nk = 0.0;
    for (size_t j = 0; j < d; j++)
        m[j] = 0.0;
    for (size_t i = 0; i < in->n; i++) {
        const double r = gsl_matrix_get(resp, i, k) *
                         (weight != NULL ? gsl_vector_get(weight, i) : 1.0);
        nk += r;
        for (size_t j = 0; j < d; j++)
            m[j] += r * gsl_matrix_get(in->child, i, j);
    }
    for (size_t j = 0; j < d; j++)
        m[j] /= nk;
    gsl_matrix_set_zero(cov);
    for (size_t i = 0; i < in->n; i++) {
        const double r = gsl_matrix_get(resp, i, k) *
                         (weight != NULL ? gsl_vector_get(weight, i) : 1.0);
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++)
                *gsl_matrix_ptr(cov, a, b) +=
                    r * (gsl_matrix_get(in->child, i, a) - m[a]) *
                    (gsl_matrix_get(in->child, i, b) - m[b]);
    }
    gsl_matrix_scale(cov, 1.0 / nk);
    return nk;
}

/* ------------------------------------------------------------------ */
/* Whitened full path (kappa > 1e4: the triangle-aware kernels)        */

/* Full covariances with the means spread a thousand standard deviations
 * apart and each child near one mean; returns kappa = max_k |L_k^-1 (mu_k
 * - c)|^2, c the mean of the means (the quadratic path's limit is 1e4). */
static double far_inst(inst *in, size_t n, size_t K, size_t d,
                       unsigned long seed)
{
    inst_init(in, LSE_COV_FULL, n, K, d, 1, seed);
    gsl_matrix_scale(in->parent, 1000.0);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            *gsl_matrix_ptr(in->child, i, j) +=
                gsl_matrix_get(in->parent, i % K, j);
    double kappa = 0.0;
    gsl_matrix *sig = gsl_matrix_alloc(d, d);
    gsl_vector *r = gsl_vector_alloc(d);
    for (size_t k = 0; k < K; k++) {
        sigma_of(in, k, sig);
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(sig), GSL_SUCCESS);
        for (size_t j = 0; j < d; j++) {
            double c = 0.0;
            for (size_t l = 0; l < K; l++)
                c += gsl_matrix_get(in->parent, l, j) / (double)K;
            gsl_vector_set(r, j, gsl_matrix_get(in->parent, k, j) - c);
        }
        gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, sig, r);
        const double q = gsl_blas_dnrm2(r);
        kappa = fmax(kappa, q * q);
    }
    gsl_matrix_free(sig);
    gsl_vector_free(r);
    return kappa;
}

/* E-step scores against the independent log density, and the M-step's
 * defining property (weighted means and covariances), for d below, at and
 * above one strip of 8 columns, blocks shorter and longer than a tile of
 * rows, and with the AVX2 copy of the kernels (same bits as AVX-512). */
START_TEST(test_whitened_full_path)
{
    static const size_t dims[] = {3, 8, 13, 30};
    static const size_t blocks[] = {5, 29, 70};
    for (size_t q = 0; q < 4; q++)
        for (size_t bq = 0; bq < 3; bq++) {
            const size_t d = dims[q], K = 2 + 4 * bq, n = 70;
            inst in;
            ck_assert_double_gt(far_inst(&in, n, K, d, 71u + q), 1e5);
            inst_work(&in, n);
            gsl_matrix *s = gsl_matrix_alloc(n, K), *s2 = gsl_matrix_alloc(n, K);
            lse_assert_ok(inst_eval(&in, s));
            for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < K; k++)
                    ck_assert_msg(rel_err(gsl_matrix_get(s, i, k),
                                          log_pi(&in, k) +
                                              log_density(&in, i, k)) < 1e-11,
                                  "d %zu K %zu S(%zu,%zu)", d, K, i, k);
            /* the AVX2 copy (a new workspace reads the switch) */
            lse_sim_gaussian->work_free(in.work);
            ck_assert_int_eq(setenv("LSE_NO_AVX512", "1", 1), 0);
            inst_work(&in, n);
            ck_assert_int_eq(unsetenv("LSE_NO_AVX512"), 0);
            lse_assert_ok(inst_eval(&in, s2));
            for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < K; k++)
                    ck_assert(gsl_matrix_get(s, i, k) ==
                              gsl_matrix_get(s2, i, k));
            /* M-step in blocks of blocks[bq] rows */
            lse_sim_gaussian->work_free(in.work);
            inst_work(&in, blocks[bq]);
            gsl_matrix *resp = make_resp(n, K, 5u + q);
            gsl_vector *weight = make_weight(n);
            const double reg = 1e-6;
            const lse_mstep_opts opts = {.reg_covar = reg, .min_count = 1e-10};
            gsl_matrix *cov = gsl_matrix_alloc(d, d), *sig = gsl_matrix_alloc(d, d);
            double *m = malloc(d * sizeof *m);
            gsl_matrix *means = gsl_matrix_alloc(K, d);
            gsl_matrix *covs = gsl_matrix_alloc(K * d, d);
            for (size_t k = 0; k < K; k++) {
                ref_moments(&in, resp, weight, k, m, cov);
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(means, k, j, m[j]);
                gsl_matrix_view ck = gsl_matrix_submatrix(covs, k * d, 0, d, d);
                gsl_matrix_memcpy(&ck.matrix, cov);
            }
            char msg[256] = "";
            const lse_status st =
                run_mstep(&in, resp, weight, &opts, NULL, msg, sizeof msg);
            ck_assert_msg(st == LSE_OK, "%s", msg);
            for (size_t k = 0; k < K; k++) {
                for (size_t j = 0; j < d; j++) {
                    const double want = gsl_matrix_get(means, k, j);
                    ck_assert(fabs(gsl_matrix_get(in.parent, k, j) - want) <=
                              1e-12 * fabs(want) + 1e-12);
                }
                sigma_of(&in, k, sig);
                double scale = 0.0; /* the covariance's largest variance */
                for (size_t i = 0; i < d; i++)
                    scale = fmax(scale, gsl_matrix_get(covs, k * d + i, i));
                for (size_t i = 0; i < d; i++)
                    for (size_t j = 0; j < d; j++) {
                        const double want = gsl_matrix_get(covs, k * d + i, j) +
                                            (i == j ? reg : 0.0);
                        ck_assert_msg(fabs(gsl_matrix_get(sig, i, j) - want) <
                                          1e-12 * scale,
                                      "d %zu K %zu Sigma_%zu(%zu,%zu) %.15g vs "
                                      "%.15g",
                                      d, K, k, i, j, gsl_matrix_get(sig, i, j),
                                      want);
                    }
            }
            free(m);
            gsl_matrix_free(means);
            gsl_matrix_free(covs);
            gsl_matrix_free(cov);
            gsl_matrix_free(sig);
            gsl_matrix_free(resp);
            gsl_vector_free(weight);
            gsl_matrix_free(s);
            gsl_matrix_free(s2);
            inst_free(&in);
        }
}
END_TEST

/* run_mstep, but each block scored first (eval) with the same workspace,
 * so that stats reuses what eval kept (the EM solver's fused pass) */
static lse_status run_mstep_fused(inst *in, const gsl_matrix *resp,
                                  const gsl_vector *weight,
                                  const lse_mstep_opts *opts, char *msg,
                                  size_t len)
{
    const size_t ns = lse_sim_gaussian->stats_size(&in->shape, &in->cfg);
    double *acc = calloc(ns, sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    const size_t blk = in->shape.block;
    gsl_matrix *s = gsl_matrix_alloc(blk, in->K);
    const lse_sim_args a0 = inst_args(in, NULL);
    lse_status st = lse_sim_gaussian->prepare(&a0);
    for (size_t r0 = 0; r0 < in->n && st == LSE_OK; r0 += blk) {
        const size_t b = in->n - r0 < blk ? in->n - r0 : blk;
        gsl_matrix_view cb = gsl_matrix_submatrix(in->child, r0, 0, b, in->d);
        gsl_matrix_view sb = gsl_matrix_submatrix(s, 0, 0, b, in->K);
        gsl_matrix_const_view rb =
            gsl_matrix_const_submatrix(resp, r0, 0, b, in->K);
        gsl_vector_const_view wb = gsl_vector_const_subvector(weight, r0, b);
        const lse_sim_args a = inst_args(in, &cb.matrix);
        st = lse_sim_gaussian->eval(&a, &sb.matrix);
        if (st == LSE_OK)
            st = lse_sim_gaussian->stats(&a, &rb.matrix, &wb.vector, acc);
    }
    if (st == LSE_OK)
        st = lse_sim_gaussian->solve(&a0, acc, in->parent, in->param, opts,
                                     NULL, msg, len);
    gsl_matrix_free(s);
    free(acc);
    return st;
}

/* The quadratic path of full and tied covariances (kappa <= 1e4): the
 * AVX-512 E-step forms no V (8 rows in the lanes of a vector, tiles of
 * 16 and 8 components, the last group of 8 rows overlapping) and the
 * M-step statistics form V 4 rows at a time; the AVX2 copy forms V of the
 * whole block. Scores and the M-step give the same bits in both, for
 * dimensions below, at and above 8 and 16, component counts that leave
 * masked tiles, and blocks of 9 to 70 rows (odd last blocks); scores
 * agree with the independent log density. */
START_TEST(test_quadratic_full_copies)
{
    static const size_t cfg[][4] = {/* d, K, n, block */
                                    {2, 3, 70, 70},   {5, 9, 70, 29},
                                    {8, 16, 61, 61},  {11, 17, 70, 70},
                                    {16, 16, 45, 45}, {17, 20, 70, 13},
                                    {16, 5, 70, 9},   {3, 24, 33, 33}};
    for (size_t q = 0; q < 2 * sizeof cfg / sizeof cfg[0]; q++) {
        const size_t *c = cfg[q / 2];
        const lse_cov_type cov = q % 2 ? LSE_COV_TIED : LSE_COV_FULL;
        const size_t d = c[0], K = c[1], n = c[2];
        inst in;
        inst_init(&in, cov, n, K, d, 1, 301u + q);
        gsl_matrix *s1 = gsl_matrix_alloc(n, K), *s2 = gsl_matrix_alloc(n, K);
        inst_work(&in, n);
        lse_assert_ok(inst_eval(&in, s1));
        lse_sim_gaussian->work_free(in.work);
        ck_assert_int_eq(setenv("LSE_NO_AVX512", "1", 1), 0);
        inst_work(&in, n);
        ck_assert_int_eq(unsetenv("LSE_NO_AVX512"), 0);
        lse_assert_ok(inst_eval(&in, s2));
        lse_sim_gaussian->work_free(in.work);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < K; k++) {
                ck_assert_msg(gsl_matrix_get(s1, i, k) == gsl_matrix_get(s2, i, k),
                              "q %zu S(%zu,%zu) %.17g vs %.17g", q, i, k,
                              gsl_matrix_get(s1, i, k), gsl_matrix_get(s2, i, k));
                ck_assert_msg(rel_err(gsl_matrix_get(s1, i, k),
                                      log_pi(&in, k) + log_density(&in, i, k)) <
                                  1e-9,
                              "q %zu S(%zu,%zu)", q, i, k);
            }
        /* the M-step, from the same parameters, with either copy */
        gsl_matrix *resp = make_resp(n, K, 7u + q);
        gsl_vector *weight = make_weight(n);
        const lse_mstep_opts opts = {.reg_covar = 1e-6, .min_count = 1e-10};
        gsl_matrix *p0 = gsl_matrix_alloc(K, d), *l0 = gsl_matrix_alloc(
                                                     in.param[P_CHOL]->size1,
                                                     in.param[P_CHOL]->size2);
        gsl_matrix *w0 = gsl_matrix_alloc(K, 1);
        gsl_matrix_memcpy(p0, in.parent);
        gsl_matrix_memcpy(l0, in.param[P_CHOL]);
        gsl_matrix_memcpy(w0, in.param[P_LOGW]);
        gsl_matrix *res[4][3];
        for (int v = 0; v < 4; v++) { /* AVX-512, AVX2; stats alone, fused */
            gsl_matrix_memcpy(in.parent, p0);
            gsl_matrix_memcpy(in.param[P_CHOL], l0);
            gsl_matrix_memcpy(in.param[P_LOGW], w0);
            if (v % 2)
                ck_assert_int_eq(setenv("LSE_NO_AVX512", "1", 1), 0);
            inst_work(&in, c[3]);
            ck_assert_int_eq(unsetenv("LSE_NO_AVX512"), 0);
            char msg[256] = "";
            ck_assert_msg((v < 2 ? run_mstep(&in, resp, weight, &opts, NULL,
                                             msg, sizeof msg)
                                 : run_mstep_fused(&in, resp, weight, &opts,
                                                   msg, sizeof msg)) == LSE_OK,
                          "%s", msg);
            lse_sim_gaussian->work_free(in.work);
            in.work = NULL;
            res[v][0] = gsl_matrix_alloc(K, d);
            gsl_matrix_memcpy(res[v][0], in.parent);
            res[v][1] = gsl_matrix_alloc(l0->size1, l0->size2);
            gsl_matrix_memcpy(res[v][1], in.param[P_CHOL]);
            res[v][2] = gsl_matrix_alloc(K, 1);
            gsl_matrix_memcpy(res[v][2], in.param[P_LOGW]);
        }
        for (int m = 0; m < 3; m++) {
            for (int v = 1; v < 4; v++) {
                ck_assert_msg(gsl_matrix_equal(res[0][m], res[v][m]),
                              "q %zu run %d result %d", q, v, m);
                gsl_matrix_free(res[v][m]);
            }
            gsl_matrix_free(res[0][m]);
        }
        gsl_matrix_free(p0);
        gsl_matrix_free(l0);
        gsl_matrix_free(w0);
        gsl_matrix_free(resp);
        gsl_vector_free(weight);
        gsl_matrix_free(s1);
        gsl_matrix_free(s2);
        inst_free(&in);
    }
}
END_TEST

/* after solve: means = weighted means, covariances = weighted covariances
 * + reg (projected to the type), weights = N_k / N summing to 1 */
START_TEST(test_mstep_defining_properties)
{
    const double reg = 1e-3;
    for (int c = 0; c < 4; c++)
        for (int wt = 0; wt < 2; wt++) {
            inst in;
            inst_init(&in, all_cov[c], 160, 3, 3, 1, 31u + (unsigned)c);
            /* current means far from the data: exercises the shift */
            gsl_matrix_add_constant(in.parent, 3.0);
            inst_work(&in, 48);
            gsl_matrix *resp = make_resp(in.n, in.K, 9u);
            gsl_vector *weight = wt ? make_weight(in.n) : NULL;
            const lse_mstep_opts opts = {.reg_covar = reg, .min_count = 1e-10};
            unsigned char empty[3] = {9, 9, 9};
            lse_mstep_report rep = {.empty = empty};
            char msg[256] = "";
            const lse_status st =
                run_mstep(&in, resp, weight, &opts, &rep, msg, sizeof msg);
            ck_assert_msg(st == LSE_OK, "%s", msg);
            ck_assert_uint_eq(rep.n_empty, 0);
            const size_t d = in.d;
            gsl_matrix *cov = gsl_matrix_alloc(d, d);
            gsl_matrix *pooled = gsl_matrix_calloc(d, d);
            gsl_matrix *sig = gsl_matrix_alloc(d, d);
            double m[3], n_tot = 0.0, nk[3], wsum = 0.0;
            for (size_t k = 0; k < in.K; k++)
                n_tot += nk[k] = ref_moments(&in, resp, weight, k, m, cov);
            for (size_t k = 0; k < in.K; k++) {
                ck_assert_uint_eq(empty[k], 0);
                ref_moments(&in, resp, weight, k, m, cov);
                for (size_t j = 0; j < d; j++) {
                    const double got = gsl_matrix_get(in.parent, k, j);
                    ck_assert_msg(fabs(got - m[j]) <=
                                      1e-12 * fabs(m[j]) + 1e-15,
                                  "cov %d mean %zu,%zu: %.17g vs %.17g", c, k,
                                  j, got, m[j]);
                }
                const double lw = gsl_matrix_get(in.param[P_LOGW], k, 0);
                ck_assert(fabs(lw - log(nk[k] / n_tot)) < 1e-12);
                wsum += exp(lw);
                gsl_matrix_scale(cov, nk[k] / n_tot);
                gsl_matrix_add(pooled, cov);
                gsl_matrix_scale(cov, n_tot / nk[k]);
                if (all_cov[c] == LSE_COV_TIED)
                    continue;
                sigma_of(&in, k, sig);
                for (size_t i = 0; i < d; i++)
                    for (size_t j = 0; j < d; j++) {
                        double want = gsl_matrix_get(cov, i, j);
                        if (all_cov[c] != LSE_COV_FULL)
                            want = i != j ? 0.0 : want;
                        if (all_cov[c] == LSE_COV_SPHERICAL && i == j) {
                            want = 0.0;
                            for (size_t l = 0; l < d; l++)
                                want += gsl_matrix_get(cov, l, l) / (double)d;
                        }
                        if (i == j)
                            want += reg;
                        ck_assert_msg(
                            fabs(gsl_matrix_get(sig, i, j) - want) < 1e-10,
                            "cov %d Sigma_%zu(%zu,%zu) %.15g vs %.15g", c, k, i,
                            j, gsl_matrix_get(sig, i, j), want);
                    }
            }
            ck_assert(fabs(wsum - 1.0) < 1e-14);
            if (all_cov[c] == LSE_COV_TIED) {
                sigma_of(&in, 0, sig);
                for (size_t i = 0; i < d; i++)
                    for (size_t j = 0; j < d; j++)
                        ck_assert(fabs(gsl_matrix_get(sig, i, j) -
                                       gsl_matrix_get(pooled, i, j) -
                                       (i == j ? reg : 0.0)) < 1e-10);
            }
            /* the factor written is lower-triangular with a zero upper part */
            if (all_cov[c] == LSE_COV_FULL || all_cov[c] == LSE_COV_TIED)
                for (size_t i = 0; i < d; i++)
                    for (size_t j = i + 1; j < d; j++)
                        ck_assert(gsl_matrix_get(in.param[P_CHOL], 0,
                                                 i * d + j) == 0.0);
            gsl_matrix_free(cov);
            gsl_matrix_free(pooled);
            gsl_matrix_free(sig);
            gsl_matrix_free(resp);
            gsl_vector_free(weight);
            inst_free(&in);
        }
}
END_TEST

/* with reg_covar = 0 the M-step maximizes sum_ik R_ik S_ik: the gradient
 * of E = -sum R S with respect to means, logw and chol vanishes there */
START_TEST(test_mstep_zero_gradient)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 120, 3, 3, 1, 57u + (unsigned)c);
        inst_work(&in, in.n);
        gsl_matrix *resp = make_resp(in.n, in.K, 4u);
        gsl_vector *weight = make_weight(in.n);
        const lse_mstep_opts opts = {.reg_covar = 0.0, .min_count = 1e-10};
        char msg[256] = "";
        lse_status st =
            run_mstep(&in, resp, weight, &opts, NULL, msg, sizeof msg);
        ck_assert_msg(st == LSE_OK, "%s", msg);
        gsl_matrix *g = gsl_matrix_alloc(in.n, in.K);
        for (size_t i = 0; i < in.n; i++)
            for (size_t k = 0; k < in.K; k++)
                gsl_matrix_set(g, i, k,
                               -gsl_matrix_get(resp, i, k) *
                                   gsl_vector_get(weight, i));
        gsl_matrix *gp = gsl_matrix_calloc(in.K, in.d);
        gsl_matrix *gw = gsl_matrix_calloc(in.K, 1);
        gsl_matrix *gl =
            gsl_matrix_calloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix *pg[2] = {gw, gl};
        const lse_sim_grads out = {.parent = gp, .param = pg};
        const lse_sim_args a = inst_args(&in, NULL);
        lse_assert_ok(lse_sim_gaussian->prepare(&a));
        lse_assert_ok(lse_sim_gaussian->grad(&a, g, &out));
        const gsl_matrix *all[3] = {gp, gw, gl};
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < all[p]->size1; i++)
                for (size_t j = 0; j < all[p]->size2; j++)
                    ck_assert_msg(fabs(gsl_matrix_get(all[p], i, j)) < 1e-9,
                                  "cov %d grad %d (%zu,%zu) = %g", c, p, i, j,
                                  gsl_matrix_get(all[p], i, j));
        gsl_matrix_free(g);
        gsl_matrix_free(gp);
        gsl_matrix_free(gw);
        gsl_matrix_free(gl);
        gsl_matrix_free(resp);
        gsl_vector_free(weight);
        inst_free(&in);
    }
}
END_TEST

/* stats are additive over rows: two halves (as on two MPI ranks) give the
 * statistics of the whole */
START_TEST(test_stats_additive)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 90, 4, 3, 1, 77u);
        inst_work(&in, in.n);
        gsl_matrix *resp = make_resp(in.n, in.K, 5u);
        gsl_vector *weight = make_weight(in.n);
        const size_t ns = lse_sim_gaussian->stats_size(&in.shape, &in.cfg);
        const size_t d = in.d, K = in.K;
        const size_t s2 = all_cov[c] == LSE_COV_FULL   ? K * d * d
                          : all_cov[c] == LSE_COV_TIED ? d * d
                          : all_cov[c] == LSE_COV_DIAG ? K * d
                                                       : K;
        ck_assert_uint_eq(ns, K + K * d + s2);
        double *whole = calloc(ns, sizeof *whole);
        double *halves = calloc(ns, sizeof *halves);
        const lse_sim_args a = inst_args(&in, NULL);
        lse_assert_ok(lse_sim_gaussian->stats(&a, resp, weight, whole));
        const size_t cut[3] = {0, 41, in.n};
        for (int h = 0; h < 2; h++) {
            const size_t r0 = cut[h], b = cut[h + 1] - cut[h];
            gsl_matrix_view cb = gsl_matrix_submatrix(in.child, r0, 0, b, d);
            gsl_matrix_view rb = gsl_matrix_submatrix(resp, r0, 0, b, K);
            gsl_vector_view wb = gsl_vector_subvector(weight, r0, b);
            const lse_sim_args ah = inst_args(&in, &cb.matrix);
            lse_assert_ok(
                lse_sim_gaussian->stats(&ah, &rb.matrix, &wb.vector, halves));
        }
        for (size_t i = 0; i < ns; i++)
            ck_assert_msg(rel_err(whole[i], halves[i]) < 1e-12,
                          "cov %d stat %zu: %.17g vs %.17g", c, i, whole[i],
                          halves[i]);
        /* N_k is the weighted responsibility mass */
        for (size_t k = 0; k < K; k++) {
            double nk = 0.0;
            for (size_t i = 0; i < in.n; i++)
                nk += gsl_matrix_get(resp, i, k) * gsl_vector_get(weight, i);
            ck_assert(rel_err(whole[k], nk) < 1e-13);
        }
        free(whole);
        free(halves);
        gsl_matrix_free(resp);
        gsl_vector_free(weight);
        inst_free(&in);
    }
}
END_TEST

/* The statistics of a small block whose V eval kept (diag/spherical keep a
 * block's V whole when it fits in about L1) must not take that V after a
 * large block's statistics overwrote the head of the same buffer: the order
 * eval(small), stats(large), stats(small) happens when one thread runs
 * another chunk's blocks between them. Bits against a fresh work. */
START_TEST(test_stats_after_large_block)
{
    const lse_cov_type covs[2] = {LSE_COV_DIAG, LSE_COV_SPHERICAL};
    for (int c = 0; c < 2; c++) {
        inst in, fresh;
        inst_init(&in, covs[c], 76, 8, 64, 1, 91u);
        inst_init(&fresh, covs[c], 76, 8, 64, 1, 91u);
        inst_work(&in, 64);
        inst_work(&fresh, 64);
        gsl_matrix *resp = make_resp(in.n, in.K, 7u);
        const size_t ns = lse_sim_gaussian->stats_size(&in.shape, &in.cfg);
        double *got = calloc(ns, sizeof *got), *want = calloc(ns, sizeof *want);
        double *large = calloc(ns, sizeof *large);
        ck_assert(got != NULL && want != NULL && large != NULL);
        gsl_matrix_view xl = gsl_matrix_submatrix(in.child, 0, 0, 64, in.d);
        gsl_matrix_view xs = gsl_matrix_submatrix(in.child, 64, 0, 12, in.d);
        gsl_matrix_view rl = gsl_matrix_submatrix(resp, 0, 0, 64, in.K);
        gsl_matrix_view rs = gsl_matrix_submatrix(resp, 64, 0, 12, in.K);
        gsl_matrix *s = gsl_matrix_alloc(12, in.K);
        ck_assert_ptr_nonnull(s);
        const lse_sim_args a0 = inst_args(&in, NULL);
        lse_assert_ok(lse_sim_gaussian->prepare(&a0));
        const lse_sim_args as = inst_args(&in, &xs.matrix);
        const lse_sim_args al = inst_args(&in, &xl.matrix);
        lse_assert_ok(lse_sim_gaussian->eval(&as, s));
        lse_assert_ok(lse_sim_gaussian->stats(&al, &rl.matrix, NULL, large));
        lse_assert_ok(lse_sim_gaussian->stats(&as, &rs.matrix, NULL, got));
        const lse_sim_args f0 = inst_args(&fresh, NULL);
        lse_assert_ok(lse_sim_gaussian->prepare(&f0));
        gsl_matrix_view fs = gsl_matrix_submatrix(fresh.child, 64, 0, 12, in.d);
        const lse_sim_args fa = inst_args(&fresh, &fs.matrix);
        lse_assert_ok(lse_sim_gaussian->stats(&fa, &rs.matrix, NULL, want));
        ck_assert_msg(memcmp(got, want, ns * sizeof *got) == 0,
                      "cov %d: the small block's statistics changed", c);
        gsl_matrix_free(s);
        free(got);
        free(want);
        free(large);
        gsl_matrix_free(resp);
        inst_free(&in);
        inst_free(&fresh);
    }
}
END_TEST

/* components with N_k < min_count are left unchanged and reported; logw
 * follows N_k / N only when N_k > 0 */
START_TEST(test_mstep_empty_components)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 60, 4, 2, 1, 13u);
        inst_work(&in, 25);
        gsl_matrix *resp = make_resp(in.n, in.K, 6u);
        for (size_t i = 0; i < in.n; i++) {
            gsl_matrix_set(resp, i, 1, 0.0);   /* N_1 = 0 */
            gsl_matrix_set(resp, i, 3, 1e-14); /* 0 < N_3 < min_count */
        }
        gsl_matrix *mu0 = gsl_matrix_alloc(in.K, in.d);
        gsl_matrix *ch0 =
            gsl_matrix_alloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix_memcpy(mu0, in.parent);
        gsl_matrix_memcpy(ch0, in.param[P_CHOL]);
        const double lw1 = gsl_matrix_get(in.param[P_LOGW], 1, 0);
        unsigned char empty[4] = {7, 7, 7, 7};
        lse_mstep_report rep = {.empty = empty, .n_empty = 99};
        const lse_mstep_opts opts = {.reg_covar = 1e-6, .min_count = 1e-10};
        char msg[256] = "";
        lse_status st =
            run_mstep(&in, resp, NULL, &opts, &rep, msg, sizeof msg);
        ck_assert_msg(st == LSE_OK, "%s", msg);
        ck_assert_uint_eq(rep.n_empty, 2);
        ck_assert_uint_eq(empty[0], 0);
        ck_assert_uint_eq(empty[1], 1);
        ck_assert_uint_eq(empty[2], 0);
        ck_assert_uint_eq(empty[3], 1);
        double n_tot = 0.0;
        for (size_t i = 0; i < in.n; i++)
            for (size_t k = 0; k < in.K; k++)
                n_tot += gsl_matrix_get(resp, i, k);
        for (size_t k = 1; k < in.K; k += 2) {
            for (size_t j = 0; j < in.d; j++)
                ck_assert(gsl_matrix_get(in.parent, k, j) ==
                          gsl_matrix_get(mu0, k, j));
            if (all_cov[c] != LSE_COV_TIED)
                for (size_t j = 0; j < ch0->size2; j++)
                    ck_assert(gsl_matrix_get(in.param[P_CHOL], k, j) ==
                              gsl_matrix_get(ch0, k, j));
        }
        ck_assert(gsl_matrix_get(in.param[P_LOGW], 1, 0) == lw1);
        ck_assert(fabs(gsl_matrix_get(in.param[P_LOGW], 3, 0) -
                       log(1e-14 * (double)in.n / n_tot)) < 1e-9);
        /* the others moved */
        ck_assert(gsl_matrix_get(in.parent, 0, 0) != gsl_matrix_get(mu0, 0, 0));
        gsl_matrix_free(mu0);
        gsl_matrix_free(ch0);
        gsl_matrix_free(resp);
        inst_free(&in);
    }
}
END_TEST

/* a degenerate component with reg_covar = 0: LSE_ENUMERIC with a message
 * naming the component and reg_covar; nothing is written */
START_TEST(test_mstep_singular)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 12, 2, 3, 1, 17u);
        inst_work(&in, in.n);
        /* every point sits on mean 0; component 1 gets nothing */
        for (size_t i = 0; i < in.n; i++)
            for (size_t j = 0; j < in.d; j++)
                gsl_matrix_set(in.child, i, j, gsl_matrix_get(in.parent, 0, j));
        gsl_matrix *resp = gsl_matrix_calloc(in.n, in.K);
        for (size_t i = 0; i < in.n; i++)
            gsl_matrix_set(resp, i, 0, 1.0);
        gsl_matrix *mu0 = gsl_matrix_alloc(in.K, in.d);
        gsl_matrix *ch0 =
            gsl_matrix_alloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix *lw0 = gsl_matrix_alloc(in.K, 1);
        gsl_matrix_memcpy(mu0, in.parent);
        gsl_matrix_memcpy(ch0, in.param[P_CHOL]);
        gsl_matrix_memcpy(lw0, in.param[P_LOGW]);
        const lse_mstep_opts opts = {.reg_covar = 0.0, .min_count = 1e-10};
        char msg[256] = "";
        lse_assert_status(
            run_mstep(&in, resp, NULL, &opts, NULL, msg, sizeof msg),
            LSE_ENUMERIC);
        ck_assert_msg(strstr(msg, "reg_covar") != NULL, "%s", msg);
        ck_assert_msg(strncmp(msg, "gaussian: ", 10) == 0, "%s", msg);
        if (all_cov[c] != LSE_COV_TIED)
            ck_assert_msg(strstr(msg, "component 0") != NULL, "%s", msg);
        ck_assert(gsl_matrix_equal(mu0, in.parent));
        ck_assert(gsl_matrix_equal(ch0, in.param[P_CHOL]));
        ck_assert(gsl_matrix_equal(lw0, in.param[P_LOGW]));
        /* the same data with a regularized covariance succeeds */
        const lse_mstep_opts reg = {.reg_covar = 1e-4, .min_count = 1e-10};
        lse_assert_ok(run_mstep(&in, resp, NULL, &reg, NULL, msg, sizeof msg));
        gsl_matrix *sig = gsl_matrix_alloc(in.d, in.d);
        sigma_of(&in, 0, sig);
        ck_assert(fabs(gsl_matrix_get(sig, 1, 1) - 1e-4) < 1e-15);
        gsl_matrix_free(sig);
        gsl_matrix_free(mu0);
        gsl_matrix_free(ch0);
        gsl_matrix_free(lw0);
        gsl_matrix_free(resp);
        inst_free(&in);
    }
}
END_TEST

START_TEST(test_mstep_bad_input)
{
    inst in;
    inst_init(&in, LSE_COV_DIAG, 10, 2, 2, 0, 23u);
    inst_work(&in, in.n);
    const size_t ns = lse_sim_gaussian->stats_size(&in.shape, &in.cfg);
    double *acc = calloc(ns, sizeof *acc);
    const lse_sim_args a = inst_args(&in, NULL);
    char msg[256];
    /* no data at all */
    lse_assert_status(lse_sim_gaussian->solve(&a, acc, in.parent, in.param,
                                              NULL, NULL, msg, sizeof msg),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "total responsibility"));
    gsl_matrix *resp = make_resp(in.n, in.K, 2u);
    lse_assert_ok(lse_sim_gaussian->stats(&a, resp, NULL, acc));
    const lse_mstep_opts neg = {.reg_covar = -1.0, .min_count = 0.0};
    lse_assert_status(lse_sim_gaussian->solve(&a, acc, in.parent, in.param,
                                              &neg, NULL, msg, sizeof msg),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(msg, "reg_covar"));
    const lse_mstep_opts negc = {.reg_covar = 0.0, .min_count = -1.0};
    lse_assert_status(lse_sim_gaussian->solve(&a, acc, in.parent, in.param,
                                              &negc, NULL, msg, sizeof msg),
                      LSE_EDOM);
    acc[ns - 1] = NAN;
    lse_assert_status(lse_sim_gaussian->solve(&a, acc, in.parent, in.param,
                                              NULL, NULL, msg, sizeof msg),
                      LSE_ENONFINITE);
    acc[ns - 1] = 1.0;
    acc[0] = -2.0;
    lse_assert_status(lse_sim_gaussian->solve(&a, acc, in.parent, in.param,
                                              NULL, NULL, msg, sizeof msg),
                      LSE_EDOM);
    /* resp of the wrong shape, weight of the wrong length */
    gsl_matrix_view rbad = gsl_matrix_submatrix(resp, 0, 0, in.n, 1);
    lse_assert_status(lse_sim_gaussian->stats(&a, &rbad.matrix, NULL, acc),
                      LSE_EDIM);
    gsl_vector *wbad = gsl_vector_alloc(3);
    gsl_vector_set_all(wbad, 1.0);
    lse_assert_status(lse_sim_gaussian->stats(&a, resp, wbad, acc), LSE_EDIM);
    /* NULL options give the defaults (reg_covar 1e-6) */
    memset(acc, 0, ns * sizeof *acc);
    lse_assert_ok(lse_sim_gaussian->stats(&a, resp, NULL, acc));
    lse_assert_ok(lse_sim_gaussian->solve(&a, acc, in.parent, in.param, NULL,
                                          NULL, msg, sizeof msg));
    gsl_vector_free(wbad);
    gsl_matrix_free(resp);
    free(acc);
    inst_free(&in);
}
END_TEST

/* ------------------------------------------------------------------ */
/* check() and runtime error paths                                      */

static lse_status check_shape(lse_cov_type cov, size_t K, size_t d, size_t dp,
                              size_t dc, size_t n_param, size_t wr, size_t wc,
                              size_t cr, size_t cc, char *msg, size_t len)
{
    const size_t rows[2] = {wr, cr}, cols[2] = {wc, cc};
    const lse_sim_shape shape = {.n_child = 5,
                                 .block = 5,
                                 .n_parent = K,
                                 .d_child = d,
                                 .d_parent = dp,
                                 .d_context = dc,
                                 .n_param = n_param,
                                 .param_rows = rows,
                                 .param_cols = cols};
    const lse_gaussian_config cfg = {.cov = cov};
    msg[0] = '\0';
    return lse_sim_gaussian->check(&shape, &cfg, msg, len);
}

START_TEST(test_check_errors)
{
    char msg[256];
    /* valid shapes for each type */
    lse_assert_ok(
        check_shape(LSE_COV_FULL, 3, 2, 2, 0, 2, 3, 1, 3, 4, msg, 256));
    lse_assert_ok(
        check_shape(LSE_COV_DIAG, 3, 2, 2, 0, 2, 0, 0, 3, 2, msg, 256));
    lse_assert_ok(
        check_shape(LSE_COV_SPHERICAL, 3, 2, 2, 0, 2, 3, 1, 3, 1, msg, 256));
    lse_assert_ok(
        check_shape(LSE_COV_TIED, 3, 2, 2, 0, 2, 3, 1, 1, 4, msg, 256));
    /* chol shape per type */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 2, 0, 2, 3, 1, 3, 5, msg, 256),
        LSE_EDIM);
    ck_assert_str_eq(
        msg, "gaussian: chol is 3x5, expected K x d*d = 3x4 (cov=full)");
    lse_assert_status(
        check_shape(LSE_COV_DIAG, 3, 2, 2, 0, 2, 3, 1, 3, 4, msg, 256),
        LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "expected K x d = 3x2"));
    lse_assert_status(
        check_shape(LSE_COV_SPHERICAL, 3, 2, 2, 0, 2, 3, 1, 3, 2, msg, 256),
        LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "expected K x 1 = 3x1"));
    lse_assert_status(
        check_shape(LSE_COV_TIED, 3, 2, 2, 0, 2, 3, 1, 3, 4, msg, 256),
        LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "expected 1 x d*d = 1x4"));
    /* chol missing */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 2, 0, 2, 3, 1, 0, 0, msg, 256),
        LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "chol"));
    /* logw of the wrong shape */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 2, 0, 2, 2, 1, 3, 4, msg, 256),
        LSE_EDIM);
    ck_assert_str_eq(msg, "gaussian: logw is 2x1, expected K x 1 = 3x1");
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 2, 0, 2, 3, 2, 3, 4, msg, 256),
        LSE_EDIM);
    /* d_parent != d_child */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 3, 0, 2, 3, 1, 3, 4, msg, 256),
        LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "parents have 3 columns, children 2"));
    /* no components, no columns */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 0, 2, 2, 0, 2, 0, 0, 0, 4, msg, 256),
        LSE_EDIM);
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 0, 0, 0, 2, 3, 1, 3, 0, msg, 256),
        LSE_EDIM);
    /* too few parameters */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 2, 0, 1, 3, 1, 3, 4, msg, 256),
        LSE_EINVAL);
    /* a context is refused */
    lse_assert_status(
        check_shape(LSE_COV_FULL, 3, 2, 2, 2, 2, 3, 1, 3, 4, msg, 256),
        LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "context"));
    /* unknown covariance type */
    lse_assert_status(
        check_shape((lse_cov_type)7, 3, 2, 2, 0, 2, 3, 1, 3, 4, msg, 256),
        LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "covariance type 7"));
    /* NULL config means the default (full) */
    const size_t rows[2] = {0, 3}, cols[2] = {0, 4};
    const lse_sim_shape shape = {.n_child = 5,
                                 .block = 5,
                                 .n_parent = 3,
                                 .d_child = 2,
                                 .d_parent = 2,
                                 .n_param = 2,
                                 .param_rows = rows,
                                 .param_cols = cols};
    lse_assert_ok(lse_sim_gaussian->check(&shape, NULL, msg, sizeof msg));
    /* work_new rejects a bad config too */
    void *work = (void *)&shape;
    const lse_gaussian_config bad = {.cov = (lse_cov_type)9};
    lse_assert_status(lse_sim_gaussian->work_new(&shape, &bad, &work),
                      LSE_EINVAL);
    ck_assert_ptr_null(work);
}
END_TEST

START_TEST(test_runtime_errors)
{
    inst in;
    inst_init(&in, LSE_COV_FULL, 6, 2, 2, 1, 29u);
    inst_work(&in, 4);
    gsl_matrix *s = gsl_matrix_alloc(6, 2);
    gsl_matrix_view s4 = gsl_matrix_submatrix(s, 0, 0, 4, 2);
    gsl_matrix_view c4 = gsl_matrix_submatrix(in.child, 0, 0, 4, 2);
    const lse_sim_args a4 = inst_args(&in, &c4.matrix);
    /* eval before prepare */
    lse_assert_status(lse_sim_gaussian->eval(&a4, &s4.matrix), LSE_EINTERNAL);
    lse_assert_ok(lse_sim_gaussian->prepare(&a4));
    lse_assert_ok(lse_sim_gaussian->eval(&a4, &s4.matrix));
    /* more rows than the block */
    const lse_sim_args a6 = inst_args(&in, NULL);
    lse_assert_status(lse_sim_gaussian->eval(&a6, s), LSE_EDIM);
    /* S of the wrong shape */
    gsl_matrix_view s41 = gsl_matrix_submatrix(s, 0, 0, 4, 1);
    lse_assert_status(lse_sim_gaussian->eval(&a4, &s41.matrix), LSE_EDIM);
    /* a zero on the diagonal of a factor */
    gsl_matrix_set(in.param[P_CHOL], 1, 3, 0.0);
    lse_assert_status(lse_sim_gaussian->prepare(&a4), LSE_ENUMERIC);
    lse_assert_status(lse_sim_gaussian->eval(&a4, &s4.matrix), LSE_EINTERNAL);
    gsl_matrix_set(in.param[P_CHOL], 1, 3, 0.8);
    /* a zero in the (ignored) upper part is fine */
    gsl_matrix_set(in.param[P_CHOL], 1, 1, 0.0);
    lse_assert_ok(lse_sim_gaussian->prepare(&a4));
    gsl_matrix_set(in.param[P_CHOL], 1, 2, NAN);
    lse_assert_status(lse_sim_gaussian->prepare(&a4), LSE_ENONFINITE);
    gsl_matrix_set(in.param[P_CHOL], 1, 2, 0.1);
    /* logw: NaN, +inf, all -inf */
    gsl_matrix_set(in.param[P_LOGW], 0, 0, NAN);
    lse_assert_status(lse_sim_gaussian->prepare(&a4), LSE_ENONFINITE);
    gsl_matrix_set(in.param[P_LOGW], 0, 0, INFINITY);
    lse_assert_status(lse_sim_gaussian->prepare(&a4), LSE_ENONFINITE);
    gsl_matrix_set_all(in.param[P_LOGW], -INFINITY);
    lse_assert_status(lse_sim_gaussian->prepare(&a4), LSE_EDOM);
    gsl_matrix_set_all(in.param[P_LOGW], 0.25);
    lse_assert_ok(lse_sim_gaussian->prepare(&a4));
    /* diagonal and spherical zero scale */
    inst dg;
    inst_init(&dg, LSE_COV_DIAG, 4, 2, 2, 0, 3u);
    inst_work(&dg, 4);
    const lse_sim_args ad = inst_args(&dg, NULL);
    gsl_matrix_set(dg.param[P_CHOL], 1, 1, 0.0);
    lse_assert_status(lse_sim_gaussian->prepare(&ad), LSE_ENUMERIC);
    /* grad with a wrong-shaped output */
    gsl_matrix_set(dg.param[P_CHOL], 1, 1, 0.5);
    lse_assert_ok(lse_sim_gaussian->prepare(&ad));
    gsl_matrix *g = gsl_matrix_calloc(4, 2), *gc = gsl_matrix_calloc(3, 2);
    const lse_sim_grads out = {.child = gc};
    lse_assert_status(lse_sim_gaussian->grad(&ad, g, &out), LSE_EDIM);
    lse_assert_status(lse_sim_gaussian->grad(&ad, g, NULL), LSE_EFAULT);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(s);
    inst_free(&dg);
    inst_free(&in);
}
END_TEST

/* Workspace constructors can be called with any declared shape: one whose
 * matrices of doubles cannot be addressed is LSE_ENOMEM, not a wrapped-around
 * small allocation (the shapes below are only described, never allocated). */
START_TEST(test_work_new_size_overflow)
{
    const size_t big = (size_t)1 << 31; /* big * big * 8 = 2^65 */
    const size_t prow[] = {0, 0, 0}, pcol[] = {0, 0, 0};
    const lse_sim_shape shapes[] = {
        {.n_child = 4, .block = 4, .n_parent = big, .d_child = big,
         .d_parent = big, .d_context = 0, .n_param = 2,
         .param_rows = prow, .param_cols = pcol},
        {.n_child = big, .block = big, .n_parent = big, .d_child = 2,
         .d_parent = 2, .d_context = 0, .n_param = 2,
         .param_rows = prow, .param_cols = pcol},
        {.n_child = SIZE_MAX / 2, .block = SIZE_MAX / 2, .n_parent = 2, .d_child = 2,
         .d_parent = 2, .d_context = 0, .n_param = 2,
         .param_rows = prow, .param_cols = pcol},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        void *work = &work;
        lse_assert_status(lse_sim_gaussian->work_new(&shapes[i], NULL, &work),
                          LSE_ENOMEM);
        ck_assert_ptr_null(work);
    }
    /* the same construction succeeds at a small size */
    lse_sim_shape ok = shapes[0];
    ok.n_child = ok.block = ok.n_parent = 3;
    ok.d_child = ok.d_parent = 2;
    void *work = NULL;
    lse_assert_ok(lse_sim_gaussian->work_new(&ok, NULL, &work));
    lse_sim_gaussian->work_free(work);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_gaussian");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_type_object);
    tcase_add_test(tc, test_eval_is_log_density);
    tcase_add_test(tc, test_mixture_integrates_to_one);
    tcase_add_test(tc, test_eval_far_from_origin);
    tcase_add_test(tc, test_eval_log_zero_weight);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_grad_blocks_add_up);
    tcase_add_test(tc, test_wide_chunks);
    tcase_add_test(tc, test_whitened_full_path);
    tcase_add_test(tc, test_quadratic_full_copies);
    tcase_add_test(tc, test_mstep_defining_properties);
    tcase_add_test(tc, test_mstep_zero_gradient);
    tcase_add_test(tc, test_stats_additive);
    tcase_add_test(tc, test_stats_after_large_block);
    tcase_add_test(tc, test_mstep_empty_components);
    tcase_add_test(tc, test_mstep_singular);
    tcase_add_test(tc, test_mstep_bad_input);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_work_new_size_overflow);
    tcase_add_test(tc, test_runtime_errors);
    suite_add_tcase(s, tc);
    return s;
}
