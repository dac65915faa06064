#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"

/* lib/sim/bilinear.c: eval, gradients, Tschantz eqs 13/14 and the
 * section 10 closed-form M-step. */

static void fill(gsl_matrix *m, double seed)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j,
                           1.1 * sin(seed + 2.137 * (double)i +
                                     1.371 * (double)j +
                                     0.311 * (double)(i * j)) +
                               0.0417);
}

/* A term's worth of state: shape, workspace, args. */
typedef struct fixture {
    size_t rows[2], cols[2];
    lse_sim_shape shape;
    void *work;
    const gsl_matrix *param[2];
    lse_sim_args args;
} fixture;

static lse_status setup(fixture *f, const void *cfg, const gsl_matrix *c,
                        const gsl_matrix *p, const gsl_matrix *wc,
                        const gsl_matrix *wp)
{
    memset(f, 0, sizeof *f);
    f->rows[0] = wc->size1;
    f->cols[0] = wc->size2;
    f->rows[1] = wp->size1;
    f->cols[1] = wp->size2;
    f->shape = (lse_sim_shape){.n_child = c->size1,
                               .block = c->size1,
                               .n_parent = p->size1,
                               .d_child = c->size2,
                               .d_parent = p->size2,
                               .n_param = 2,
                               .param_rows = f->rows,
                               .param_cols = f->cols};
    char msg[256];
    lse_status st = lse_sim_bilinear->check(&f->shape, cfg, msg, sizeof msg);
    if (st == LSE_OK)
        st = lse_sim_bilinear->work_new(&f->shape, cfg, &f->work);
    f->param[0] = wc;
    f->param[1] = wp;
    f->args = (lse_sim_args){.child = c,
                             .parent = p,
                             .param = f->param,
                             .config = cfg,
                             .work = f->work};
    return st;
}

static void teardown(fixture *f) { lse_sim_bilinear->work_free(f->work); }

static double get(const gsl_matrix *m, size_t i, size_t j)
{
    return gsl_matrix_get(m, i, j);
}

/* (W x)_r for row x of m */
static double proj(const gsl_matrix *w, size_t r, const gsl_matrix *m, size_t i)
{
    double s = 0.0;
    for (size_t k = 0; k < w->size2; k++)
        s += get(w, r, k) * get(m, i, k);
    return s;
}

static void softmax_rows(const gsl_matrix *s, gsl_matrix *a)
{
    for (size_t i = 0; i < s->size1; i++)
        lse_assert_ok(lse_softmax(gsl_matrix_const_ptr(s, i, 0), s->size2, 1,
                                  1.0, gsl_matrix_ptr(a, i, 0), NULL));
}

START_TEST(test_type)
{
    const lse_sim_type *t = lse_sim_bilinear;
    ck_assert_str_eq(t->name, "bilinear");
    ck_assert_uint_eq(t->n_param, 2);
    ck_assert_str_eq(t->param_names[0], "W_c");
    ck_assert_str_eq(t->param_names[1], "W_p");
    ck_assert_uint_eq(t->optional_params, 0);
    const lse_bilinear_config *def = t->config_default;
    ck_assert_double_eq(def->scale, 1.0);
    char buf[64];
    const lse_bilinear_config cfg = {.scale = 0.25};
    t->describe(&cfg, buf, sizeof buf);
    ck_assert_str_eq(buf, "scale=0.25");
    ck_assert(t->stats != NULL && t->stats_size != NULL);
    ck_assert(t->solve != NULL);
}
END_TEST

START_TEST(test_eval_matches_formula)
{
    const lse_bilinear_config cfg = {.scale = 0.7311};
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 4);
    gsl_matrix *wc = gsl_matrix_alloc(2, 3), *wp = gsl_matrix_alloc(2, 4);
    gsl_matrix *s = gsl_matrix_alloc(5, 4);
    fill(c, 0.3);
    fill(p, 1.9);
    fill(wc, -0.8);
    fill(wp, 2.6);
    const void *cfgs[2] = {NULL, &cfg};
    for (int v = 0; v < 2; v++) {
        const double scale = v == 0 ? 1.0 : cfg.scale;
        fixture f;
        lse_assert_ok(setup(&f, cfgs[v], c, p, wc, wp));
        lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
        for (size_t i = 0; i < 5; i++)
            for (size_t j = 0; j < 4; j++) {
                double want = 0.0;
                for (size_t r = 0; r < 2; r++)
                    want += proj(wc, r, c, i) * proj(wp, r, p, j);
                ck_assert_double_eq_tol(get(s, i, j), scale * want, 1e-13);
            }
        teardown(&f);
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(wc);
    gsl_matrix_free(wp);
    gsl_matrix_free(s);
}
END_TEST

static void gradcheck(const lse_bilinear_config *cfg, const gsl_matrix *c,
                      const gsl_matrix *p, const gsl_matrix *wc,
                      const gsl_matrix *wp)
{
    const gsl_matrix *param[2] = {wc, wp};
    lse_gradcheck res;
    lse_error err;
    lse_assert_ok(lse_sim_check_gradient(lse_sim_bilinear, cfg, c, p, NULL,
                                         param, 1e-6, 1.0, &res, &err));
    ck_assert_msg(res.max_error < 1e-6, "error %g at %s (%g vs %g)",
                  res.max_error, res.where, res.analytic, res.numeric);
    ck_assert_uint_eq(res.n_checked, c->size1 * c->size2 + p->size1 * p->size2 +
                                         wc->size1 * wc->size2 +
                                         wp->size1 * wp->size2);
}

START_TEST(test_gradients)
{
    const lse_bilinear_config cfg = {.scale = 0.577};
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 4);
    gsl_matrix *wc = gsl_matrix_alloc(2, 3), *wp = gsl_matrix_alloc(2, 4);
    gsl_matrix *wp3 = gsl_matrix_alloc(2, 3);
    fill(c, 0.7);
    fill(p, -1.2);
    fill(wc, 0.33);
    fill(wp, 1.71);
    fill(wp3, -2.05);
    gradcheck(NULL, c, p, wc, wp);
    gradcheck(&cfg, c, p, wc, wp);
    /* self terms (self-attention): children = parents */
    gradcheck(NULL, c, c, wc, wp3);
    gradcheck(&cfg, c, c, wc, wp3);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(wc);
    gsl_matrix_free(wp);
    gsl_matrix_free(wp3);
}
END_TEST

/* Tschantz eqs (13), (14), by hand:
 *   -dE/dx_j  = sum_i A_ji W_K^T W_Q mu_i
 *   -dE/dmu_i = sum_j A_ji W_Q^T W_K x_j
 * against the library's child/parent gradients with G = -A. */
START_TEST(test_seed_slot_eqs_13_14)
{
    const size_t n = 5, ns = 4, d = 3, k = 2;
    gsl_matrix *x = gsl_matrix_alloc(n, d), *mu = gsl_matrix_alloc(ns, d);
    gsl_matrix *wk = gsl_matrix_alloc(k, d), *wq = gsl_matrix_alloc(k, d);
    gsl_matrix *s = gsl_matrix_alloc(n, ns), *a = gsl_matrix_alloc(n, ns);
    gsl_matrix *gx = gsl_matrix_calloc(n, d), *gmu = gsl_matrix_calloc(ns, d);
    fill(x, 0.5);
    fill(mu, -0.7);
    fill(wk, 1.3);
    fill(wq, 2.9);
    fixture f;
    lse_assert_ok(setup(&f, NULL, x, mu, wk, wq));
    lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
    softmax_rows(s, a);
    gsl_matrix_scale(a, -1.0);
    const lse_sim_grads out = {.child = gx, .parent = gmu};
    lse_assert_ok(lse_sim_bilinear->grad(&f.args, a, &out));
    gsl_matrix_scale(a, -1.0);
    for (size_t j = 0; j < n; j++)
        for (size_t e = 0; e < d; e++) {
            double rhs = 0.0; /* eq 13 */
            for (size_t i = 0; i < ns; i++)
                for (size_t r = 0; r < k; r++)
                    rhs += get(a, j, i) * get(wk, r, e) * proj(wq, r, mu, i);
            ck_assert_double_eq_tol(-get(gx, j, e), rhs, 1e-13);
        }
    for (size_t i = 0; i < ns; i++)
        for (size_t e = 0; e < d; e++) {
            double rhs = 0.0; /* eq 14 */
            for (size_t j = 0; j < n; j++)
                for (size_t r = 0; r < k; r++)
                    rhs += get(a, j, i) * get(wq, r, e) * proj(wk, r, x, j);
            ck_assert_double_eq_tol(-get(gmu, i, e), rhs, 1e-13);
        }
    teardown(&f);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(wk);
    gsl_matrix_free(wq);
    gsl_matrix_free(s);
    gsl_matrix_free(a);
    gsl_matrix_free(gx);
    gsl_matrix_free(gmu);
}
END_TEST

/* The weighted least squares gradients of Tschantz section 10:
 *   gq = sum_ji w_j A_ji (W_c x_j - W_p mu_i) mu_i^T   (k, d_p)
 *   gk = sum_ji w_j A_ji (W_c x_j - W_p mu_i) x_j^T    (k, d_c)
 * returns max |entry| of the requested one. */
static double wls_grad_max(const gsl_matrix *x, const gsl_matrix *mu,
                           const gsl_matrix *a, const double *w,
                           const gsl_matrix *wc, const gsl_matrix *wp,
                           int wrt_wp)
{
    const size_t k = wc->size1;
    const gsl_matrix *other = wrt_wp ? mu : x;
    double worst = 0.0;
    for (size_t r = 0; r < k; r++)
        for (size_t e = 0; e < other->size2; e++) {
            double sum = 0.0;
            for (size_t j = 0; j < x->size1; j++)
                for (size_t i = 0; i < mu->size1; i++) {
                    const double resid = proj(wc, r, x, j) - proj(wp, r, mu, i);
                    const double z = wrt_wp ? get(mu, i, e) : get(x, j, e);
                    sum += (w != NULL ? w[j] : 1.0) * get(a, j, i) * resid * z;
                }
            if (fabs(sum) > worst)
                worst = fabs(sum);
        }
    return worst;
}

static double frob(const gsl_matrix *m)
{
    double s = 0.0;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            s += get(m, i, j) * get(m, i, j);
    return sqrt(s);
}

/* stats over the rows [lo, hi) of x and a */
static void stats_block(fixture *f, const gsl_matrix *x, const gsl_matrix *a,
                        const gsl_vector *w, size_t lo, size_t hi, double *acc)
{
    gsl_matrix_const_view xb =
        gsl_matrix_const_submatrix(x, lo, 0, hi - lo, x->size2);
    gsl_matrix_const_view ab =
        gsl_matrix_const_submatrix(a, lo, 0, hi - lo, a->size2);
    lse_sim_args args = f->args;
    args.child = &xb.matrix;
    args.child_offset = lo;
    if (w == NULL) {
        lse_assert_ok(lse_sim_bilinear->stats(&args, &ab.matrix, NULL, acc));
        return;
    }
    gsl_vector_const_view wb = gsl_vector_const_subvector(w, lo, hi - lo);
    lse_assert_ok(lse_sim_bilinear->stats(&args, &ab.matrix, &wb.vector, acc));
}

START_TEST(test_mstep_zero_gradient)
{
    const size_t n = 7, ns = 4, dc = 3, dp = 3, k = 2;
    gsl_matrix *x = gsl_matrix_alloc(n, dc), *mu = gsl_matrix_alloc(ns, dp);
    gsl_matrix *wc = gsl_matrix_alloc(k, dc), *wp = gsl_matrix_alloc(k, dp);
    gsl_matrix *wc0 = gsl_matrix_alloc(k, dc), *wp0 = gsl_matrix_alloc(k, dp);
    gsl_matrix *mu0 = gsl_matrix_alloc(ns, dp);
    gsl_matrix *s = gsl_matrix_alloc(n, ns), *a = gsl_matrix_alloc(n, ns);
    gsl_vector *w = gsl_vector_alloc(n);
    fill(x, 0.5);
    fill(mu, -0.7);
    fill(wc, 1.3);
    fill(wp, 2.9);
    for (size_t j = 0; j < n; j++)
        gsl_vector_set(w, j, 0.6 + 0.35 * sin(1.7 * (double)j + 0.2));
    gsl_matrix_memcpy(wc0, wc);
    gsl_matrix_memcpy(wp0, wp);
    gsl_matrix_memcpy(mu0, mu);

    for (int weighted = 0; weighted < 2; weighted++) {
        gsl_matrix_memcpy(wc, wc0);
        gsl_matrix_memcpy(wp, wp0);
        const gsl_vector *wv = weighted ? w : NULL;
        fixture f;
        lse_assert_ok(setup(&f, NULL, x, mu, wc, wp));
        lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
        softmax_rows(s, a);
        const size_t size = lse_sim_bilinear->stats_size(&f.shape, NULL);
        ck_assert_uint_eq(size, dc * dp + dp * dp + dc * dc + ns);
        double *acc = calloc(size, sizeof *acc);
        double *acc1 = calloc(size, sizeof *acc1);
        ck_assert_ptr_nonnull(acc);
        ck_assert_ptr_nonnull(acc1);
        /* two blocks sum to the same statistics as one */
        stats_block(&f, x, a, wv, 0, 4, acc);
        stats_block(&f, x, a, wv, 4, n, acc);
        stats_block(&f, x, a, wv, 0, n, acc1);
        for (size_t i = 0; i < size; i++)
            ck_assert_double_eq_tol(acc[i], acc1[i], 1e-13);
        /* the per-parent counts are the weighted column sums */
        for (size_t i = 0; i < ns; i++) {
            double cnt = 0.0;
            for (size_t j = 0; j < n; j++)
                cnt += (weighted ? gsl_vector_get(w, j) : 1.0) * get(a, j, i);
            ck_assert_double_eq_tol(acc[size - ns + i], cnt, 1e-14);
        }
        const lse_mstep_opts opts = {.reg_covar = 1e-6, .min_count = 1e-10};
        unsigned char empty[4] = {9, 9, 9, 9};
        lse_mstep_report rep = {.empty = empty};
        char msg[256] = "";
        gsl_matrix *params[2] = {wc, wp};
        lse_assert_ok(lse_sim_bilinear->solve(&f.args, acc, mu, params, &opts,
                                              &rep, msg, sizeof msg));
        /* slots untouched */
        ck_assert(gsl_matrix_equal(mu, mu0));
        ck_assert_uint_eq(rep.n_empty, 0);
        for (size_t i = 0; i < ns; i++)
            ck_assert_uint_eq(empty[i], 0);
        ck_assert_double_eq_tol(rep.norm_before, frob(wc0) * frob(wp0), 1e-12);
        ck_assert_double_eq_tol(rep.norm_after, frob(wc) * frob(wp), 1e-12);
        double wbuf[7];
        for (size_t j = 0; j < n; j++)
            wbuf[j] = weighted ? gsl_vector_get(w, j) : 1.0;
        /* dWLS/dW_p = 0 at (old W_c, new W_p) */
        const double gq = wls_grad_max(x, mu, a, wbuf, wc0, wp, 1);
        ck_assert_msg(gq < 1e-10, "W_p gradient %g", gq);
        /* dWLS/dW_c = 0 at (new W_c, new W_p) */
        const double gk = wls_grad_max(x, mu, a, wbuf, wc, wp, 0);
        ck_assert_msg(gk < 1e-10, "W_c gradient %g", gk);
        /* and the step did something */
        ck_assert(!gsl_matrix_equal(wc, wc0));
        ck_assert(wls_grad_max(x, mu, a, wbuf, wc0, wp0, 1) > 1e-3);
        free(acc);
        free(acc1);
        teardown(&f);
    }
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(mu0);
    gsl_matrix_free(wc);
    gsl_matrix_free(wp);
    gsl_matrix_free(wc0);
    gsl_matrix_free(wp0);
    gsl_matrix_free(s);
    gsl_matrix_free(a);
    gsl_vector_free(w);
}
END_TEST

/* Repeated alternating updates with fixed responsibilities shrink the
 * weights (the slot-attention collapse); the report exposes it. */
START_TEST(test_mstep_collapse_report)
{
    const size_t n = 9, ns = 4, d = 3, k = 3;
    gsl_matrix *x = gsl_matrix_alloc(n, d), *mu = gsl_matrix_alloc(ns, d);
    gsl_matrix *wc = gsl_matrix_alloc(k, d), *wp = gsl_matrix_alloc(k, d);
    gsl_matrix *s = gsl_matrix_alloc(n, ns), *a = gsl_matrix_alloc(n, ns);
    fill(x, 0.15);
    fill(mu, 1.45);
    fill(wc, -0.3);
    fill(wp, 0.8);
    fixture f;
    lse_assert_ok(setup(&f, NULL, x, mu, wc, wp));
    lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
    softmax_rows(s, a);
    const size_t size = lse_sim_bilinear->stats_size(&f.shape, NULL);
    double *acc = calloc(size, sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    lse_assert_ok(lse_sim_bilinear->stats(&f.args, a, NULL, acc));
    gsl_matrix *params[2] = {wc, wp};
    char msg[256];
    double first = 0.0, last = 0.0;
    for (int it = 0; it < 200; it++) {
        lse_mstep_report rep = {0};
        lse_assert_ok(lse_sim_bilinear->solve(&f.args, acc, mu, params, NULL,
                                              &rep, msg, sizeof msg));
        if (it == 0)
            first = rep.norm_before;
        last = rep.norm_after;
    }
    ck_assert_msg(last < 0.5 * first, "norm %g -> %g", first, last);
    free(acc);
    teardown(&f);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(wc);
    gsl_matrix_free(wp);
    gsl_matrix_free(s);
    gsl_matrix_free(a);
}
END_TEST

START_TEST(test_mstep_singular_and_empty)
{
    const size_t d = 3, k = 2;
    gsl_matrix *wc = gsl_matrix_alloc(k, d), *wp = gsl_matrix_alloc(k, d);
    gsl_matrix *wc0 = gsl_matrix_alloc(k, d), *wp0 = gsl_matrix_alloc(k, d);
    fill(wc, 0.4);
    fill(wp, -1.1);
    gsl_matrix_memcpy(wc0, wc);
    gsl_matrix_memcpy(wp0, wp);
    gsl_matrix *params[2] = {wc, wp};
    char msg[256];

    /* two slots in 3 dimensions: P has rank 2 */
    {
        gsl_matrix *x = gsl_matrix_alloc(6, d), *mu = gsl_matrix_alloc(2, d);
        gsl_matrix *s = gsl_matrix_alloc(6, 2), *a = gsl_matrix_alloc(6, 2);
        fill(x, 0.2);
        fill(mu, 2.2);
        fixture f;
        lse_assert_ok(setup(&f, NULL, x, mu, wc, wp));
        lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
        softmax_rows(s, a);
        const size_t size = lse_sim_bilinear->stats_size(&f.shape, NULL);
        double *acc = calloc(size, sizeof *acc);
        ck_assert_ptr_nonnull(acc);
        lse_assert_ok(lse_sim_bilinear->stats(&f.args, a, NULL, acc));
        msg[0] = '\0';
        lse_assert_status(lse_sim_bilinear->solve(&f.args, acc, mu, params,
                                                  NULL, NULL, msg, sizeof msg),
                          LSE_ENUMERIC);
        ck_assert_ptr_nonnull(strstr(msg, "P = sum A mu mu^T"));
        ck_assert_ptr_nonnull(strstr(msg, "singular"));
        ck_assert(gsl_matrix_equal(wc, wc0));
        ck_assert(gsl_matrix_equal(wp, wp0));
        free(acc);
        teardown(&f);
        gsl_matrix_free(x);
        gsl_matrix_free(mu);
        gsl_matrix_free(s);
        gsl_matrix_free(a);
    }
    /* two tokens in 3 dimensions: X has rank 2 */
    {
        gsl_matrix *x = gsl_matrix_alloc(2, d), *mu = gsl_matrix_alloc(4, d);
        gsl_matrix *s = gsl_matrix_alloc(2, 4), *a = gsl_matrix_alloc(2, 4);
        fill(x, 0.2);
        fill(mu, 2.2);
        fixture f;
        lse_assert_ok(setup(&f, NULL, x, mu, wc, wp));
        lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
        softmax_rows(s, a);
        const size_t size = lse_sim_bilinear->stats_size(&f.shape, NULL);
        double *acc = calloc(size, sizeof *acc);
        ck_assert_ptr_nonnull(acc);
        lse_assert_ok(lse_sim_bilinear->stats(&f.args, a, NULL, acc));
        msg[0] = '\0';
        lse_assert_status(lse_sim_bilinear->solve(&f.args, acc, mu, params,
                                                  NULL, NULL, msg, sizeof msg),
                          LSE_ENUMERIC);
        ck_assert_ptr_nonnull(strstr(msg, "X = sum A x x^T"));
        ck_assert(gsl_matrix_equal(wc, wc0));
        ck_assert(gsl_matrix_equal(wp, wp0));
        free(acc);
        teardown(&f);
        gsl_matrix_free(x);
        gsl_matrix_free(mu);
        gsl_matrix_free(s);
        gsl_matrix_free(a);
    }
    /* an empty slot is reported (and, like all slots, left unchanged) */
    {
        gsl_matrix *x = gsl_matrix_alloc(8, d), *mu = gsl_matrix_alloc(5, d);
        gsl_matrix *s = gsl_matrix_alloc(8, 5), *a = gsl_matrix_alloc(8, 5);
        fill(x, 0.9);
        fill(mu, -2.4);
        fixture f;
        lse_assert_ok(setup(&f, NULL, x, mu, wc, wp));
        lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
        for (size_t j = 0; j < 8; j++)
            gsl_matrix_set(s, j, 3, -INFINITY); /* slot 3 masked out */
        softmax_rows(s, a);
        const size_t size = lse_sim_bilinear->stats_size(&f.shape, NULL);
        double *acc = calloc(size, sizeof *acc);
        ck_assert_ptr_nonnull(acc);
        lse_assert_ok(lse_sim_bilinear->stats(&f.args, a, NULL, acc));
        unsigned char empty[5];
        lse_mstep_report rep = {.empty = empty};
        const lse_mstep_opts opts = {.reg_covar = 0.0, .min_count = 1e-10};
        lse_assert_ok(lse_sim_bilinear->solve(&f.args, acc, mu, params, &opts,
                                              &rep, msg, sizeof msg));
        ck_assert_uint_eq(rep.n_empty, 1);
        for (size_t i = 0; i < 5; i++)
            ck_assert_uint_eq(empty[i], i == 3);
        free(acc);
        teardown(&f);
        gsl_matrix_free(x);
        gsl_matrix_free(mu);
        gsl_matrix_free(s);
        gsl_matrix_free(a);
    }
    gsl_matrix_free(wc);
    gsl_matrix_free(wp);
    gsl_matrix_free(wc0);
    gsl_matrix_free(wp0);
}
END_TEST

START_TEST(test_check_errors)
{
    const lse_sim_type *t = lse_sim_bilinear;
    size_t rows[2] = {3, 3}, cols[2] = {5, 4};
    lse_sim_shape shape = {.n_child = 6,
                           .block = 6,
                           .n_parent = 2,
                           .d_child = 5,
                           .d_parent = 4,
                           .n_param = 2,
                           .param_rows = rows,
                           .param_cols = cols};
    char msg[256] = "";
    lse_assert_ok(t->check(&shape, NULL, msg, sizeof msg));

    cols[0] = 4; /* W_c 3x4 for d_child 5 */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_str_eq(msg, "bilinear: W_c is 3x4, expected k x d_child = 3x5");
    cols[0] = 5;

    rows[1] = 2; /* W_p with a different k */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_str_eq(msg, "bilinear: W_p is 2x4, expected k x d_parent = 3x4");
    rows[1] = 3;

    cols[1] = 5; /* W_p columns != d_parent */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "W_p is 3x5"));
    cols[1] = 4;

    rows[0] = 0; /* W_c absent */
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "W_c is missing"));
    rows[0] = 3;

    shape.d_context = 2;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "context"));
    shape.d_context = 0;

    shape.n_param = 1;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    shape.n_param = 2;

    shape.param_rows = NULL;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    shape.param_rows = rows;

    const lse_bilinear_config bad[] = {{.scale = NAN}, {.scale = INFINITY}};
    for (size_t i = 0; i < 2; i++) {
        lse_assert_status(t->check(&shape, &bad[i], msg, sizeof msg), LSE_EDOM);
        ck_assert_ptr_nonnull(strstr(msg, "bilinear: scale"));
    }
    lse_assert_ok(t->check(&shape, NULL, msg, sizeof msg));
}
END_TEST

START_TEST(test_kernel_errors)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *wc = gsl_matrix_alloc(2, 3), *wp = gsl_matrix_alloc(2, 3);
    gsl_matrix *wbad = gsl_matrix_alloc(2, 2);
    gsl_matrix *s = gsl_matrix_alloc(5, 4), *sbad = gsl_matrix_alloc(4, 4);
    fill(c, 0.1);
    fill(p, 0.2);
    fill(wc, 0.3);
    fill(wp, 0.4);
    fill(wbad, 0.5);
    fixture f;
    lse_assert_ok(setup(&f, NULL, c, p, wc, wp));
    lse_assert_status(lse_sim_bilinear->eval(&f.args, sbad), LSE_EDIM);
    f.param[1] = wbad;
    lse_assert_status(lse_sim_bilinear->eval(&f.args, s), LSE_EDIM);
    f.param[1] = NULL;
    lse_assert_status(lse_sim_bilinear->eval(&f.args, s), LSE_EFAULT);
    f.param[1] = wp;
    lse_assert_ok(lse_sim_bilinear->eval(&f.args, s));
    f.args.work = NULL;
    lse_assert_status(lse_sim_bilinear->eval(&f.args, s), LSE_EFAULT);
    teardown(&f);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(wc);
    gsl_matrix_free(wp);
    gsl_matrix_free(wbad);
    gsl_matrix_free(s);
    gsl_matrix_free(sbad);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_bilinear");
    TCase *tc = tcase_create("bilinear");
    tcase_add_test(tc, test_type);
    tcase_add_test(tc, test_eval_matches_formula);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_seed_slot_eqs_13_14);
    tcase_add_test(tc, test_mstep_zero_gradient);
    tcase_add_test(tc, test_mstep_collapse_report);
    tcase_add_test(tc, test_mstep_singular_and_empty);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_kernel_errors);
    suite_add_tcase(s, tc);
    return s;
}
