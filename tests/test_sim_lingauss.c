#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_permutation.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lib/sim/lingauss.c (+ lib/sim/gauss_common.c): lse_sim_lingauss,
 * S_ik = log pi_k + log N(y_i; A_k x_i + b_k, Sigma_k). */

enum { P_LOGW = 0, P_A = 1, P_CHOL = 2, N_PARAM = 3 };

static const lse_cov_type all_cov[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                        LSE_COV_SPHERICAL, LSE_COV_TIED};

typedef struct inst {
    lse_gaussian_config cfg;
    size_t n, K, d, dc;
    gsl_matrix *child;          /* (n, d): y = x_{t+1} */
    gsl_matrix *context;        /* (n, dc): x = x_t */
    gsl_matrix *parent;         /* (K, d): offsets b_k */
    gsl_matrix *param[N_PARAM]; /* logw (K, 1) or NULL, A (K, d*dc), chol */
    size_t rows[N_PARAM], cols[N_PARAM];
    lse_sim_shape shape;
    void *work;
} inst;

static size_t chol_cols(lse_cov_type cov, size_t d)
{
    return cov == LSE_COV_DIAG ? d : cov == LSE_COV_SPHERICAL ? 1 : d * d;
}

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
                    v = -4.5 - gsl_rng_uniform(rng); /* ignored */
                gsl_matrix_set(chol, k, i * d + j, v);
            }
    }
}

static void inst_init(inst *in, lse_cov_type cov, size_t n, size_t K, size_t d,
                      size_t dc, int with_logw, unsigned long seed)
{
    memset(in, 0, sizeof *in);
    in->cfg.cov = cov;
    in->n = n;
    in->K = K;
    in->d = d;
    in->dc = dc;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(rng);
    gsl_rng_set(rng, seed);
    in->child = gsl_matrix_alloc(n, d);
    in->context = gsl_matrix_alloc(n, dc);
    in->parent = gsl_matrix_alloc(K, d);
    in->param[P_A] = gsl_matrix_alloc(K, d * dc);
    const size_t cr = cov == LSE_COV_TIED ? 1 : K;
    in->param[P_CHOL] = gsl_matrix_alloc(cr, chol_cols(cov, d));
    ck_assert(in->child && in->context && in->parent && in->param[P_A] &&
              in->param[P_CHOL]);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < dc; j++)
            gsl_matrix_set(in->context, i, j, 0.2 + gsl_ran_gaussian(rng, 1.0));
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(in->child, i, j,
                           -0.1 + 1.2 * gsl_ran_gaussian(rng, 1.0));
    }
    for (size_t k = 0; k < K; k++) {
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(in->parent, k, j, 0.5 * gsl_ran_gaussian(rng, 1.0));
        for (size_t j = 0; j < d * dc; j++)
            gsl_matrix_set(in->param[P_A], k, j,
                           0.6 * (gsl_rng_uniform(rng) - 0.45));
    }
    if (with_logw) {
        in->param[P_LOGW] = gsl_matrix_alloc(K, 1);
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(in->param[P_LOGW], k, 0,
                           -0.2 + 0.8 * gsl_rng_uniform(rng));
        in->rows[P_LOGW] = K;
        in->cols[P_LOGW] = 1;
    }
    fill_chol(in->param[P_CHOL], cov, d, rng);
    in->rows[P_A] = K;
    in->cols[P_A] = d * dc;
    in->rows[P_CHOL] = cr;
    in->cols[P_CHOL] = chol_cols(cov, d);
    gsl_rng_free(rng);
}

static void inst_work(inst *in, size_t block)
{
    in->shape = (lse_sim_shape){.n_child = in->n,
                                .block = block,
                                .n_parent = in->K,
                                .d_child = in->d,
                                .d_parent = in->d,
                                .d_context = in->dc,
                                .n_param = N_PARAM,
                                .param_rows = in->rows,
                                .param_cols = in->cols};
    char msg[256] = "";
    const lse_status st =
        lse_sim_lingauss->check(&in->shape, &in->cfg, msg, sizeof msg);
    ck_assert_msg(st == LSE_OK, "check: %s", msg);
    lse_assert_ok(lse_sim_lingauss->work_new(&in->shape, &in->cfg, &in->work));
    ck_assert_ptr_nonnull(in->work);
}

/* args for rows [r0, r0 + b) */
static lse_sim_args inst_args(const inst *in, size_t r0, size_t b,
                              gsl_matrix_view *cv, gsl_matrix_view *xv)
{
    *cv = gsl_matrix_submatrix(in->child, r0, 0, b, in->d);
    *xv = gsl_matrix_submatrix(in->context, r0, 0, b, in->dc);
    return (lse_sim_args){.child = &cv->matrix,
                          .parent = in->parent,
                          .context = &xv->matrix,
                          .child_offset = r0,
                          .param = (const gsl_matrix *const *)in->param,
                          .config = &in->cfg,
                          .work = in->work};
}

static void inst_free(inst *in)
{
    if (in->work != NULL)
        lse_sim_lingauss->work_free(in->work);
    gsl_matrix_free(in->child);
    gsl_matrix_free(in->context);
    gsl_matrix_free(in->parent);
    for (int p = 0; p < N_PARAM; p++)
        gsl_matrix_free(in->param[p]);
    memset(in, 0, sizeof *in);
}

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

/* residual y_i - A_k x_i - b_k by explicit loops */
static void resid(const inst *in, size_t i, size_t k, gsl_vector *r)
{
    for (size_t a = 0; a < in->d; a++) {
        double v =
            gsl_matrix_get(in->child, i, a) - gsl_matrix_get(in->parent, k, a);
        for (size_t b = 0; b < in->dc; b++)
            v -= gsl_matrix_get(in->param[P_A], k, a * in->dc + b) *
                 gsl_matrix_get(in->context, i, b);
        gsl_vector_set(r, a, v);
    }
}

/* log N(y_i; A_k x_i + b_k, Sigma_k) by a fresh Cholesky factorization */
static double log_density(const inst *in, size_t i, size_t k)
{
    const size_t d = in->d;
    gsl_matrix *sig = gsl_matrix_alloc(d, d);
    gsl_vector *r = gsl_vector_alloc(d), *u = gsl_vector_alloc(d);
    sigma_of(in, k, sig);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(sig), GSL_SUCCESS);
    resid(in, i, k, r);
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
    return fabs(a - b) / fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* ------------------------------------------------------------------ */

START_TEST(test_type_object)
{
    const lse_sim_type *t = lse_sim_lingauss;
    ck_assert_str_eq(t->name, "lingauss");
    ck_assert_uint_eq(t->n_param, 3);
    ck_assert_str_eq(t->param_names[0], "logw");
    ck_assert_str_eq(t->param_names[1], "A");
    ck_assert_str_eq(t->param_names[2], "chol");
    ck_assert_uint_eq(t->optional_params, 1u);
    ck_assert_uint_eq(t->flags & LSE_SIM_NEEDS_CONTEXT, LSE_SIM_NEEDS_CONTEXT);
    ck_assert_uint_eq(t->config_size, sizeof(lse_gaussian_config));
    ck_assert(t->stats != NULL && t->solve != NULL && t->prepare != NULL);
    const lse_gaussian_config cfg = {.cov = LSE_COV_SPHERICAL};
    char buf[32];
    t->describe(&cfg, buf, sizeof buf);
    ck_assert_str_eq(buf, "cov=spherical");
    t->describe(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "cov=full");
}
END_TEST

START_TEST(test_eval_is_log_density)
{
    for (int c = 0; c < 4; c++)
        for (int lw = 0; lw < 2; lw++) {
            inst in;
            inst_init(&in, all_cov[c], 29, 3, 3, 2, lw, 41u + (unsigned)c);
            inst_work(&in, 10);
            gsl_matrix *s = gsl_matrix_alloc(10, in.K);
            gsl_matrix_view cv, xv;
            lse_sim_args a = inst_args(&in, 0, in.n, &cv, &xv);
            lse_assert_ok(lse_sim_lingauss->prepare(&a));
            for (size_t r0 = 0; r0 < in.n; r0 += 10) {
                const size_t b = in.n - r0 < 10 ? in.n - r0 : 10;
                a = inst_args(&in, r0, b, &cv, &xv);
                gsl_matrix_view sb = gsl_matrix_submatrix(s, 0, 0, b, in.K);
                lse_assert_ok(lse_sim_lingauss->eval(&a, &sb.matrix));
                for (size_t i = 0; i < b; i++)
                    for (size_t k = 0; k < in.K; k++) {
                        const double want =
                            log_pi(&in, k) + log_density(&in, r0 + i, k);
                        ck_assert_msg(rel_err(gsl_matrix_get(s, i, k), want) <
                                          1e-12,
                                      "cov %d S(%zu,%zu) = %.15g want %.15g", c,
                                      r0 + i, k, gsl_matrix_get(s, i, k), want);
                    }
            }
            gsl_matrix_free(s);
            inst_free(&in);
        }
}
END_TEST

/* child, parent (offsets), context, logw, A and chol gradients */
START_TEST(test_gradients)
{
    for (int c = 0; c < 4; c++)
        for (int lw = 0; lw < 2; lw++) {
            inst in;
            inst_init(&in, all_cov[c], 6, 3, 2, 3, lw, 211u + (unsigned)c);
            lse_gradcheck res;
            lse_error err = {0};
            lse_assert_ok(lse_sim_check_gradient(
                lse_sim_lingauss, &in.cfg, in.child, in.parent, in.context,
                (const gsl_matrix *const *)in.param, 1e-6, 1.0, &res, &err));
            ck_assert_msg(res.max_error < 1e-6,
                          "cov %d logw %d: error %g at %s (analytic %.10g, "
                          "numeric %.10g)",
                          c, lw, res.max_error, res.where, res.analytic,
                          res.numeric);
            const size_t want =
                in.n * in.d + in.K * in.d + in.n * in.dc + (lw ? in.K : 0) +
                in.K * in.d * in.dc +
                in.param[P_CHOL]->size1 * in.param[P_CHOL]->size2;
            ck_assert_uint_eq(res.n_checked, want);
            inst_free(&in);
        }
}
END_TEST

/* ------------------------------------------------------------------ */
/* M-step                                                              */

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

static lse_status stats_rows(inst *in, size_t r0, size_t b,
                             const gsl_matrix *resp, const gsl_vector *weight,
                             double *acc)
{
    gsl_matrix_view cv, xv;
    const lse_sim_args a = inst_args(in, r0, b, &cv, &xv);
    gsl_matrix_const_view rb =
        gsl_matrix_const_submatrix(resp, r0, 0, b, in->K);
    if (weight == NULL)
        return lse_sim_lingauss->stats(&a, &rb.matrix, NULL, acc);
    gsl_vector_const_view wb = gsl_vector_const_subvector(weight, r0, b);
    return lse_sim_lingauss->stats(&a, &rb.matrix, &wb.vector, acc);
}

static lse_status run_mstep(inst *in, const gsl_matrix *resp,
                            const gsl_vector *weight,
                            const lse_mstep_opts *opts,
                            lse_mstep_report *report, char *msg, size_t len)
{
    const size_t ns = lse_sim_lingauss->stats_size(&in->shape, &in->cfg);
    double *acc = calloc(ns, sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    const size_t blk = in->shape.block;
    lse_status st = LSE_OK;
    for (size_t r0 = 0; r0 < in->n && st == LSE_OK; r0 += blk)
        st = stats_rows(in, r0, in->n - r0 < blk ? in->n - r0 : blk, resp,
                        weight, acc);
    if (st == LSE_OK) {
        gsl_matrix_view cv, xv;
        const lse_sim_args a = inst_args(in, 0, in->n, &cv, &xv);
        st = lse_sim_lingauss->solve(&a, acc, in->parent, in->param, opts,
                                     report, msg, len);
    }
    free(acc);
    return st;
}

/* Direct weighted least squares for mode k via the normal equations
 * (LU, not Cholesky): B (d, dc+1) = [A_k b_k]; cov = sum w r e e' / N_k.
 * Returns N_k. */
static double ref_wls(const inst *in, const gsl_matrix *resp,
                      const gsl_vector *weight, size_t k, gsl_matrix *B,
                      gsl_matrix *cov)
{
    const size_t d = in->d, dc = in->dc, m = dc + 1;
    gsl_matrix *M = gsl_matrix_calloc(m, m);
    gsl_matrix *rhs = gsl_matrix_calloc(m, d);
    gsl_vector *a = gsl_vector_alloc(m), *col = gsl_vector_alloc(m),
               *sol = gsl_vector_alloc(m), *e = gsl_vector_alloc(d);
    gsl_permutation *perm = gsl_permutation_alloc(m);
    double nk = 0.0;
    for (size_t i = 0; i < in->n; i++) {
        const double r = gsl_matrix_get(resp, i, k) *
                         (weight != NULL ? gsl_vector_get(weight, i) : 1.0);
        nk += r;
        for (size_t j = 0; j < dc; j++)
            gsl_vector_set(a, j, gsl_matrix_get(in->context, i, j));
        gsl_vector_set(a, dc, 1.0);
        for (size_t p = 0; p < m; p++) {
            for (size_t q = 0; q < m; q++)
                *gsl_matrix_ptr(M, p, q) +=
                    r * gsl_vector_get(a, p) * gsl_vector_get(a, q);
            for (size_t q = 0; q < d; q++)
                *gsl_matrix_ptr(rhs, p, q) +=
                    r * gsl_vector_get(a, p) * gsl_matrix_get(in->child, i, q);
        }
    }
    int sgn;
    ck_assert_int_eq(gsl_linalg_LU_decomp(M, perm, &sgn), GSL_SUCCESS);
    for (size_t q = 0; q < d; q++) {
        gsl_matrix_get_col(col, rhs, q);
        ck_assert_int_eq(gsl_linalg_LU_solve(M, perm, col, sol), GSL_SUCCESS);
        gsl_matrix_set_row(B, q, sol);
    }
    gsl_matrix_set_zero(cov);
    for (size_t i = 0; i < in->n; i++) {
        const double r = gsl_matrix_get(resp, i, k) *
                         (weight != NULL ? gsl_vector_get(weight, i) : 1.0);
        for (size_t q = 0; q < d; q++) {
            double v =
                gsl_matrix_get(in->child, i, q) - gsl_matrix_get(B, q, dc);
            for (size_t j = 0; j < dc; j++)
                v -=
                    gsl_matrix_get(B, q, j) * gsl_matrix_get(in->context, i, j);
            gsl_vector_set(e, q, v);
        }
        for (size_t p = 0; p < d; p++)
            for (size_t q = 0; q < d; q++)
                *gsl_matrix_ptr(cov, p, q) +=
                    r * gsl_vector_get(e, p) * gsl_vector_get(e, q);
    }
    gsl_matrix_scale(cov, 1.0 / nk);
    gsl_matrix_free(M);
    gsl_matrix_free(rhs);
    gsl_vector_free(a);
    gsl_vector_free(col);
    gsl_vector_free(sol);
    gsl_vector_free(e);
    gsl_permutation_free(perm);
    return nk;
}

/* y generated by K modes, so the fit is not trivial; current parameters
 * far from the solution (exercises the shifted statistics) */
static void make_dynamics(inst *in)
{
    for (size_t i = 0; i < in->n; i++)
        for (size_t q = 0; q < in->d; q++) {
            double v = 0.3 * sin(1.1 * (double)i + (double)q);
            for (size_t j = 0; j < in->dc; j++)
                v += (0.5 - 0.2 * (double)((i + j + q) % 3)) *
                     gsl_matrix_get(in->context, i, j);
            *gsl_matrix_ptr(in->child, i, q) += v;
        }
    gsl_matrix_add_constant(in->parent, 2.0);
}

START_TEST(test_mstep_equals_wls)
{
    const double reg = 1e-3;
    for (int c = 0; c < 4; c++)
        for (int wt = 0; wt < 2; wt++) {
            inst in;
            inst_init(&in, all_cov[c], 150, 3, 3, 2, 1, 61u + (unsigned)c);
            make_dynamics(&in);
            inst_work(&in, 40);
            gsl_matrix *resp = make_resp(in.n, in.K, 8u + (unsigned)wt);
            gsl_vector *weight = wt ? make_weight(in.n) : NULL;
            const lse_mstep_opts opts = {.reg_covar = reg, .min_count = 1e-10};
            lse_mstep_report rep = {0};
            char msg[256] = "";
            const lse_status st =
                run_mstep(&in, resp, weight, &opts, &rep, msg, sizeof msg);
            ck_assert_msg(st == LSE_OK, "%s", msg);
            ck_assert_uint_eq(rep.n_empty, 0);
            const size_t d = in.d, dc = in.dc;
            gsl_matrix *B = gsl_matrix_alloc(d, dc + 1);
            gsl_matrix *cov = gsl_matrix_alloc(d, d);
            gsl_matrix *pooled = gsl_matrix_calloc(d, d);
            gsl_matrix *sig = gsl_matrix_alloc(d, d);
            double nk[3], n_tot = 0.0, wsum = 0.0;
            for (size_t k = 0; k < in.K; k++)
                n_tot += nk[k] = ref_wls(&in, resp, weight, k, B, cov);
            for (size_t k = 0; k < in.K; k++) {
                ref_wls(&in, resp, weight, k, B, cov);
                for (size_t q = 0; q < d; q++) {
                    for (size_t j = 0; j < dc; j++)
                        ck_assert_msg(rel_err(gsl_matrix_get(in.param[P_A], k,
                                                             q * dc + j),
                                              gsl_matrix_get(B, q, j)) < 1e-10,
                                      "cov %d A_%zu(%zu,%zu)", c, k, q, j);
                    ck_assert_msg(rel_err(gsl_matrix_get(in.parent, k, q),
                                          gsl_matrix_get(B, q, dc)) < 1e-10,
                                  "cov %d b_%zu(%zu)", c, k, q);
                }
                const double lw = gsl_matrix_get(in.param[P_LOGW], k, 0);
                ck_assert(fabs(lw - log(nk[k] / n_tot)) < 1e-12);
                wsum += exp(lw);
                for (size_t p = 0; p < d; p++)
                    for (size_t q = 0; q < d; q++)
                        *gsl_matrix_ptr(pooled, p, q) +=
                            nk[k] / n_tot * gsl_matrix_get(cov, p, q);
                if (all_cov[c] == LSE_COV_TIED)
                    continue;
                sigma_of(&in, k, sig);
                double tr = 0.0;
                for (size_t p = 0; p < d; p++)
                    tr += gsl_matrix_get(cov, p, p) / (double)d;
                for (size_t p = 0; p < d; p++)
                    for (size_t q = 0; q < d; q++) {
                        double want = gsl_matrix_get(cov, p, q);
                        if (all_cov[c] != LSE_COV_FULL && p != q)
                            want = 0.0;
                        if (all_cov[c] == LSE_COV_SPHERICAL && p == q)
                            want = tr;
                        if (p == q)
                            want += reg;
                        ck_assert_msg(
                            fabs(gsl_matrix_get(sig, p, q) - want) < 1e-10,
                            "cov %d Sigma_%zu(%zu,%zu) %.15g vs "
                            "%.15g",
                            c, k, p, q, gsl_matrix_get(sig, p, q), want);
                    }
            }
            ck_assert(fabs(wsum - 1.0) < 1e-14);
            if (all_cov[c] == LSE_COV_TIED) {
                sigma_of(&in, 0, sig);
                for (size_t p = 0; p < d; p++)
                    for (size_t q = 0; q < d; q++)
                        ck_assert(fabs(gsl_matrix_get(sig, p, q) -
                                       gsl_matrix_get(pooled, p, q) -
                                       (p == q ? reg : 0.0)) < 1e-10);
            }
            gsl_matrix_free(B);
            gsl_matrix_free(cov);
            gsl_matrix_free(pooled);
            gsl_matrix_free(sig);
            gsl_matrix_free(resp);
            gsl_vector_free(weight);
            inst_free(&in);
        }
}
END_TEST

/* reg_covar = 0: the gradient of E = -sum w R S with respect to offsets,
 * A, chol and logw vanishes at the M-step solution */
START_TEST(test_mstep_zero_gradient)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 100, 3, 2, 2, 1, 88u + (unsigned)c);
        make_dynamics(&in);
        inst_work(&in, in.n);
        gsl_matrix *resp = make_resp(in.n, in.K, 3u);
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
        gsl_matrix *pg[N_PARAM];
        for (int p = 0; p < N_PARAM; p++)
            pg[p] = gsl_matrix_calloc(in.param[p]->size1, in.param[p]->size2);
        const lse_sim_grads out = {.parent = gp, .param = pg};
        gsl_matrix_view cv, xv;
        const lse_sim_args a = inst_args(&in, 0, in.n, &cv, &xv);
        lse_assert_ok(lse_sim_lingauss->prepare(&a));
        lse_assert_ok(lse_sim_lingauss->grad(&a, g, &out));
        const gsl_matrix *all[4] = {gp, pg[0], pg[1], pg[2]};
        for (int p = 0; p < 4; p++)
            for (size_t i = 0; i < all[p]->size1; i++)
                for (size_t j = 0; j < all[p]->size2; j++)
                    ck_assert_msg(fabs(gsl_matrix_get(all[p], i, j)) < 1e-9,
                                  "cov %d grad %d (%zu,%zu) = %g", c, p, i, j,
                                  gsl_matrix_get(all[p], i, j));
        gsl_matrix_free(g);
        gsl_matrix_free(gp);
        for (int p = 0; p < N_PARAM; p++)
            gsl_matrix_free(pg[p]);
        gsl_matrix_free(resp);
        gsl_vector_free(weight);
        inst_free(&in);
    }
}
END_TEST

START_TEST(test_stats_additive)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 70, 3, 3, 2, 1, 99u);
        inst_work(&in, in.n);
        gsl_matrix *resp = make_resp(in.n, in.K, 5u);
        gsl_vector *weight = make_weight(in.n);
        const size_t ns = lse_sim_lingauss->stats_size(&in.shape, &in.cfg);
        const size_t K = in.K, d = in.d, m = in.dc + 1;
        const size_t s2 = all_cov[c] == LSE_COV_FULL   ? K * d * d
                          : all_cov[c] == LSE_COV_TIED ? d * d
                          : all_cov[c] == LSE_COV_DIAG ? K * d
                                                       : K;
        ck_assert_uint_eq(ns, K * (1 + m * m + d * m) + s2);
        double *whole = calloc(ns, sizeof *whole);
        double *halves = calloc(ns, sizeof *halves);
        lse_assert_ok(stats_rows(&in, 0, in.n, resp, weight, whole));
        lse_assert_ok(stats_rows(&in, 0, 33, resp, weight, halves));
        lse_assert_ok(stats_rows(&in, 33, in.n - 33, resp, weight, halves));
        for (size_t i = 0; i < ns; i++)
            ck_assert_msg(rel_err(whole[i], halves[i]) < 1e-12,
                          "cov %d stat %zu: %.17g vs %.17g", c, i, whole[i],
                          halves[i]);
        free(whole);
        free(halves);
        gsl_matrix_free(resp);
        gsl_vector_free(weight);
        inst_free(&in);
    }
}
END_TEST

/* The small sizes (d, dc) = (1, 1), (1, 2), (2, 2), (3, 3) run 8 rows per
 * vector (lib/sim/lingauss.c, lg_eval8_body / lg_stats8_mode) and the rows
 * left over one at a time: a block of 37 rows gives the scores of 37
 * one-row blocks bit for bit, and the statistics of the one-row blocks to
 * rounding (another summation order); responsibilities with padded rows
 * (not contiguous: loaded lane by lane) give the same bits as contiguous
 * ones (vector loads and shuffles when K <= 4). */
START_TEST(test_lane_rows_agree)
{
    const size_t dd[4][2] = {{1, 1}, {1, 2}, {2, 2}, {3, 3}};
    for (int c = 0; c < 4; c++)
        for (size_t q = 0; q < 4; q++)
            for (size_t K = 1; K <= 5; K++) {
                const size_t n = 37;
                inst in;
                inst_init(&in, all_cov[c], n, K, dd[q][0], dd[q][1], 1,
                          300u + (unsigned)(c * 40 + (int)(q * 8 + K)));
                inst_work(&in, n);
                gsl_matrix_view cv, xv;
                lse_sim_args a = inst_args(&in, 0, n, &cv, &xv);
                lse_assert_ok(lse_sim_lingauss->prepare(&a));
                gsl_matrix *s1 = gsl_matrix_alloc(n, K);
                gsl_matrix *s2 = gsl_matrix_alloc(n, K);
                lse_assert_ok(lse_sim_lingauss->eval(&a, s1));
                for (size_t i = 0; i < n; i++) {
                    a = inst_args(&in, i, 1, &cv, &xv);
                    gsl_matrix_view sb = gsl_matrix_submatrix(s2, i, 0, 1, K);
                    lse_assert_ok(lse_sim_lingauss->eval(&a, &sb.matrix));
                }
                for (size_t i = 0; i < n; i++)
                    for (size_t k = 0; k < K; k++) {
                        const double v = gsl_matrix_get(s1, i, k);
                        ck_assert_msg(memcmp(&v, gsl_matrix_const_ptr(s2, i, k),
                                             sizeof v) == 0,
                                      "cov %d d %zu K %zu S(%zu,%zu) %.17g vs "
                                      "%.17g",
                                      c, in.d, K, i, k, v,
                                      gsl_matrix_get(s2, i, k));
                        const double want =
                            log_pi(&in, k) + log_density(&in, i, k);
                        ck_assert_msg(rel_err(v, want) < 1e-12,
                                      "cov %d S(%zu,%zu) = %.15g want %.15g",
                                      c, i, k, v, want);
                    }
                gsl_matrix *resp = make_resp(n, K, 11u + K);
                gsl_matrix *pad = gsl_matrix_alloc(n, K + 2);
                gsl_matrix_view rp = gsl_matrix_submatrix(pad, 0, 0, n, K);
                gsl_matrix_memcpy(&rp.matrix, resp);
                gsl_vector *weight = make_weight(n);
                const size_t ns =
                    lse_sim_lingauss->stats_size(&in.shape, &in.cfg);
                double *whole = calloc(ns, sizeof *whole);
                double *padded = calloc(ns, sizeof *padded);
                double *rows = calloc(ns, sizeof *rows);
                lse_assert_ok(stats_rows(&in, 0, n, resp, weight, whole));
                lse_assert_ok(stats_rows(&in, 0, n, &rp.matrix, weight, padded));
                for (size_t i = 0; i < n; i++)
                    lse_assert_ok(stats_rows(&in, i, 1, resp, weight, rows));
                for (size_t p = 0; p < ns; p++) {
                    ck_assert_msg(memcmp(&whole[p], &padded[p],
                                         sizeof whole[p]) == 0,
                                  "cov %d d %zu K %zu stat %zu: %.17g vs %.17g",
                                  c, in.d, K, p, whole[p], padded[p]);
                    ck_assert_msg(fabs(whole[p] - rows[p]) <=
                                      1e-12 * (1.0 + fabs(rows[p])),
                                  "cov %d d %zu K %zu stat %zu: %.17g vs %.17g",
                                  c, in.d, K, p, whole[p], rows[p]);
                }
                free(whole);
                free(padded);
                free(rows);
                gsl_matrix_free(resp);
                gsl_matrix_free(pad);
                gsl_vector_free(weight);
                gsl_matrix_free(s1);
                gsl_matrix_free(s2);
                inst_free(&in);
            }
}
END_TEST

START_TEST(test_mstep_empty_components)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 50, 3, 2, 2, 1, 15u);
        inst_work(&in, 20);
        gsl_matrix *resp = make_resp(in.n, in.K, 6u);
        for (size_t i = 0; i < in.n; i++)
            gsl_matrix_set(resp, i, 2, 0.0);
        gsl_matrix *b0 = gsl_matrix_alloc(in.K, in.d);
        gsl_matrix *a0 = gsl_matrix_alloc(in.K, in.d * in.dc);
        gsl_matrix *ch0 =
            gsl_matrix_alloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix_memcpy(b0, in.parent);
        gsl_matrix_memcpy(a0, in.param[P_A]);
        gsl_matrix_memcpy(ch0, in.param[P_CHOL]);
        const double lw2 = gsl_matrix_get(in.param[P_LOGW], 2, 0);
        unsigned char empty[3] = {5, 5, 5};
        lse_mstep_report rep = {.empty = empty};
        char msg[256] = "";
        lse_status st = run_mstep(&in, resp, NULL, NULL, &rep, msg, sizeof msg);
        ck_assert_msg(st == LSE_OK, "%s", msg);
        ck_assert_uint_eq(rep.n_empty, 1);
        ck_assert_uint_eq(empty[0], 0);
        ck_assert_uint_eq(empty[1], 0);
        ck_assert_uint_eq(empty[2], 1);
        for (size_t j = 0; j < in.d; j++)
            ck_assert(gsl_matrix_get(in.parent, 2, j) ==
                      gsl_matrix_get(b0, 2, j));
        for (size_t j = 0; j < in.d * in.dc; j++) {
            ck_assert(gsl_matrix_get(in.param[P_A], 2, j) ==
                      gsl_matrix_get(a0, 2, j));
            ck_assert(gsl_matrix_get(in.param[P_A], 0, j) !=
                      gsl_matrix_get(a0, 0, j));
        }
        if (all_cov[c] != LSE_COV_TIED)
            for (size_t j = 0; j < ch0->size2; j++)
                ck_assert(gsl_matrix_get(in.param[P_CHOL], 2, j) ==
                          gsl_matrix_get(ch0, 2, j));
        ck_assert(gsl_matrix_get(in.param[P_LOGW], 2, 0) == lw2);
        gsl_matrix_free(b0);
        gsl_matrix_free(a0);
        gsl_matrix_free(ch0);
        gsl_matrix_free(resp);
        inst_free(&in);
    }
}
END_TEST

/* a constant context column makes [x; 1] collinear: LSE_ENUMERIC, a
 * message naming the component, nothing written */
START_TEST(test_mstep_singular_context)
{
    for (int c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, all_cov[c], 40, 2, 2, 2, 1, 19u);
        inst_work(&in, in.n);
        for (size_t i = 0; i < in.n; i++)
            gsl_matrix_set(in.context, i, 1, 0.4127);
        gsl_matrix *resp = make_resp(in.n, in.K, 2u);
        gsl_matrix *b0 = gsl_matrix_alloc(in.K, in.d);
        gsl_matrix *a0 = gsl_matrix_alloc(in.K, in.d * in.dc);
        gsl_matrix *ch0 =
            gsl_matrix_alloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix *lw0 = gsl_matrix_alloc(in.K, 1);
        gsl_matrix_memcpy(b0, in.parent);
        gsl_matrix_memcpy(a0, in.param[P_A]);
        gsl_matrix_memcpy(ch0, in.param[P_CHOL]);
        gsl_matrix_memcpy(lw0, in.param[P_LOGW]);
        char msg[256] = "";
        lse_assert_status(run_mstep(&in, resp, NULL, NULL, NULL, msg, 256),
                          LSE_ENUMERIC);
        ck_assert_msg(strstr(msg, "lingauss: component 0") != NULL, "%s", msg);
        ck_assert_msg(strstr(msg, "singular") != NULL, "%s", msg);
        ck_assert(gsl_matrix_equal(b0, in.parent));
        ck_assert(gsl_matrix_equal(a0, in.param[P_A]));
        ck_assert(gsl_matrix_equal(ch0, in.param[P_CHOL]));
        ck_assert(gsl_matrix_equal(lw0, in.param[P_LOGW]));
        gsl_matrix_free(b0);
        gsl_matrix_free(a0);
        gsl_matrix_free(ch0);
        gsl_matrix_free(lw0);
        gsl_matrix_free(resp);
        inst_free(&in);
    }
}
END_TEST

/* an exact fit with reg_covar = 0 (d = 1, one mode, two rows, dc = 1):
 * the residual covariance is 0 -> LSE_ENUMERIC naming reg_covar */
START_TEST(test_mstep_singular_covariance)
{
    inst in;
    inst_init(&in, LSE_COV_DIAG, 2, 1, 1, 1, 0, 3u);
    gsl_matrix_set(in.context, 0, 0, 1.0);
    gsl_matrix_set(in.context, 1, 0, 2.0);
    gsl_matrix_set(in.child, 0, 0, 3.0); /* y = 2 x + 1 */
    gsl_matrix_set(in.child, 1, 0, 5.0);
    gsl_matrix_set(in.param[P_A], 0, 0, 2.0);
    gsl_matrix_set(in.parent, 0, 0, 1.0);
    inst_work(&in, in.n);
    gsl_matrix *resp = gsl_matrix_alloc(2, 1);
    gsl_matrix_set_all(resp, 1.0);
    const lse_mstep_opts opts = {.reg_covar = 0.0, .min_count = 1e-10};
    char msg[256] = "";
    lse_assert_status(run_mstep(&in, resp, NULL, &opts, NULL, msg, 256),
                      LSE_ENUMERIC);
    ck_assert_msg(strstr(msg, "reg_covar") != NULL, "%s", msg);
    gsl_matrix_free(resp);
    inst_free(&in);
}
END_TEST

/* ------------------------------------------------------------------ */

static lse_status check_shape(lse_cov_type cov, size_t dc, size_t ar, size_t ac,
                              size_t cr, size_t cc, char *msg)
{
    const size_t rows[3] = {3, ar, cr}, cols[3] = {1, ac, cc};
    const lse_sim_shape shape = {.n_child = 5,
                                 .block = 5,
                                 .n_parent = 3,
                                 .d_child = 2,
                                 .d_parent = 2,
                                 .d_context = dc,
                                 .n_param = 3,
                                 .param_rows = rows,
                                 .param_cols = cols};
    const lse_gaussian_config cfg = {.cov = cov};
    msg[0] = '\0';
    return lse_sim_lingauss->check(&shape, &cfg, msg, 256);
}

START_TEST(test_check_errors)
{
    char msg[256];
    lse_assert_ok(check_shape(LSE_COV_FULL, 4, 3, 8, 3, 4, msg));
    lse_assert_ok(check_shape(LSE_COV_TIED, 4, 3, 8, 1, 4, msg));
    lse_assert_ok(check_shape(LSE_COV_DIAG, 1, 3, 2, 3, 2, msg));
    lse_assert_ok(check_shape(LSE_COV_SPHERICAL, 1, 3, 2, 3, 1, msg));
    /* no context */
    lse_assert_status(check_shape(LSE_COV_FULL, 0, 3, 0, 3, 4, msg),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "context"));
    /* A missing, A of the wrong shape */
    lse_assert_status(check_shape(LSE_COV_FULL, 4, 0, 0, 3, 4, msg),
                      LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "A parameter is required"));
    lse_assert_status(check_shape(LSE_COV_FULL, 4, 3, 6, 3, 4, msg), LSE_EDIM);
    ck_assert_str_eq(msg, "lingauss: A is 3x6, expected K x "
                          "d_child*d_context = 3x8");
    lse_assert_status(check_shape(LSE_COV_FULL, 4, 2, 8, 3, 4, msg), LSE_EDIM);
    /* chol shapes */
    lse_assert_status(check_shape(LSE_COV_FULL, 4, 3, 8, 1, 4, msg), LSE_EDIM);
    ck_assert_str_eq(
        msg, "lingauss: chol is 1x4, expected K x d*d = 3x4 (cov=full)");
    lse_assert_status(check_shape(LSE_COV_TIED, 4, 3, 8, 3, 4, msg), LSE_EDIM);
    lse_assert_status(check_shape(LSE_COV_DIAG, 4, 3, 8, 3, 1, msg), LSE_EDIM);
    lse_assert_status(check_shape(LSE_COV_SPHERICAL, 4, 3, 8, 3, 2, msg),
                      LSE_EDIM);
    lse_assert_status(check_shape((lse_cov_type)-1, 4, 3, 8, 3, 4, msg),
                      LSE_EINVAL);
    /* work_new without a context */
    const size_t rows[3] = {3, 3, 3}, cols[3] = {1, 0, 4};
    const lse_sim_shape shape = {.n_child = 5,
                                 .block = 5,
                                 .n_parent = 3,
                                 .d_child = 2,
                                 .d_parent = 2,
                                 .n_param = 3,
                                 .param_rows = rows,
                                 .param_cols = cols};
    void *work = NULL;
    lse_assert_status(lse_sim_lingauss->work_new(&shape, NULL, &work),
                      LSE_EINVAL);
    ck_assert_ptr_null(work);
}
END_TEST

START_TEST(test_runtime_errors)
{
    inst in;
    inst_init(&in, LSE_COV_FULL, 6, 2, 2, 3, 1, 37u);
    inst_work(&in, in.n);
    gsl_matrix *s = gsl_matrix_alloc(in.n, in.K);
    gsl_matrix_view cv, xv;
    lse_sim_args a = inst_args(&in, 0, in.n, &cv, &xv);
    lse_assert_status(lse_sim_lingauss->eval(&a, s), LSE_EINTERNAL);
    lse_assert_ok(lse_sim_lingauss->prepare(&a));
    lse_assert_ok(lse_sim_lingauss->eval(&a, s));
    /* context rows must match the child rows */
    gsl_matrix_view x5 = gsl_matrix_submatrix(in.context, 0, 0, 5, in.dc);
    a.context = &x5.matrix;
    lse_assert_status(lse_sim_lingauss->eval(&a, s), LSE_EDIM);
    a.context = NULL;
    lse_assert_status(lse_sim_lingauss->eval(&a, s), LSE_EFAULT);
    a.context = &xv.matrix;
    /* solve after an M-step leaves the cache stale: eval needs prepare */
    gsl_matrix *resp = make_resp(in.n, in.K, 1u);
    lse_assert_ok(run_mstep(&in, resp, NULL, NULL, NULL, NULL, 0));
    lse_assert_status(lse_sim_lingauss->eval(&a, s), LSE_EINTERNAL);
    lse_assert_ok(lse_sim_lingauss->prepare(&a));
    lse_assert_ok(lse_sim_lingauss->eval(&a, s));
    for (size_t i = 0; i < in.n; i++)
        for (size_t k = 0; k < in.K; k++)
            ck_assert(rel_err(gsl_matrix_get(s, i, k),
                              log_pi(&in, k) + log_density(&in, i, k)) < 1e-12);
    gsl_matrix_free(resp);
    gsl_matrix_free(s);
    inst_free(&in);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_lingauss");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_type_object);
    tcase_add_test(tc, test_eval_is_log_density);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_mstep_equals_wls);
    tcase_add_test(tc, test_mstep_zero_gradient);
    tcase_add_test(tc, test_stats_additive);
    tcase_add_test(tc, test_lane_rows_agree);
    tcase_add_test(tc, test_mstep_empty_components);
    tcase_add_test(tc, test_mstep_singular_context);
    tcase_add_test(tc, test_mstep_singular_covariance);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_runtime_errors);
    suite_add_tcase(s, tc);
    return s;
}
