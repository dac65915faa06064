#include <math.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"

/* lib/sim/dist.c: neg-dist, gauss-kernel, inv-dist, idw. */

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

static double get(const gsl_matrix *m, size_t i, size_t j)
{
    return gsl_matrix_get(m, i, j);
}

static double dist2(const gsl_matrix *c, size_t i, const gsl_matrix *p,
                    size_t j)
{
    double s = 0.0;
    for (size_t k = 0; k < c->size2; k++) {
        const double t = get(c, i, k) - get(p, j, k);
        s += t * t;
    }
    return s;
}

/* the four scores of the IDW paper (eqs 1-4), pair by pair */
static double score(const lse_sim_type *t, const lse_dist_config *cfg,
                    double d2)
{
    const double d = sqrt(d2);
    if (t == lse_sim_neg_dist)
        return -d2;
    if (t == lse_sim_gauss_kernel)
        return exp(-d2 / (cfg->s * cfg->s));
    if (t == lse_sim_inv_dist)
        return 1.0 / (cfg->eps + pow(d, cfg->p));
    return -log(cfg->eps + pow(d, cfg->p));
}

static lse_status run(const lse_sim_type *t, const lse_dist_config *cfg,
                      const gsl_matrix *c, const gsl_matrix *p, gsl_matrix *s,
                      const gsl_matrix *g, gsl_matrix *gc, gsl_matrix *gp)
{
    const lse_sim_shape shape = {.n_child = c->size1,
                                 .block = c->size1,
                                 .n_parent = p->size1,
                                 .d_child = c->size2,
                                 .d_parent = p->size2};
    char msg[256];
    lse_status st = t->check(&shape, cfg, msg, sizeof msg);
    if (st != LSE_OK)
        return st;
    void *work = NULL;
    if ((st = t->work_new(&shape, cfg, &work)) != LSE_OK)
        return st;
    const lse_sim_args a = {
        .child = c, .parent = p, .config = cfg, .work = work};
    if (s != NULL)
        st = t->eval(&a, s);
    if (st == LSE_OK && g != NULL) {
        const lse_sim_grads out = {.child = gc, .parent = gp};
        st = t->grad(&a, g, &out);
    }
    t->work_free(work);
    return st;
}

static const lse_sim_type *all_types(size_t i)
{
    const lse_sim_type *t[] = {lse_sim_neg_dist, lse_sim_gauss_kernel,
                               lse_sim_inv_dist, lse_sim_idw};
    return t[i];
}

static const lse_dist_config configs[] = {{.p = 2.0, .eps = 1e-3, .s = 1.0},
                                          {.p = 1.0, .eps = 0.05, .s = 0.8},
                                          {.p = 1.5, .eps = 0.2, .s = 1.7},
                                          {.p = 3.0, .eps = 1e-3, .s = 0.6},
                                          {.p = 0.7, .eps = 0.4127, .s = 2.3}};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

START_TEST(test_types)
{
    const char *names[] = {"neg-dist", "gauss-kernel", "inv-dist", "idw"};
    for (size_t i = 0; i < 4; i++) {
        const lse_sim_type *t = all_types(i);
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_uint_eq(t->n_param, 0);
        ck_assert_uint_eq(t->config_size, sizeof(lse_dist_config));
        const lse_dist_config *def = t->config_default;
        ck_assert_double_eq(def->p, 2.0);
        ck_assert_double_eq(def->eps, 1e-3);
        ck_assert_double_eq(def->s, 1.0);
    }
    char buf[64];
    lse_sim_idw->describe(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "p=2, eps=0.001");
    lse_sim_inv_dist->describe(&configs[2], buf, sizeof buf);
    ck_assert_str_eq(buf, "p=1.5, eps=0.2");
    lse_sim_gauss_kernel->describe(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "s=1");
    ck_assert(lse_sim_neg_dist->describe == NULL);
}
END_TEST

START_TEST(test_eval_matches_formula)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4), *ss = gsl_matrix_alloc(5, 5);
    fill(c, 0.3);
    fill(p, 1.9);
    for (size_t t = 0; t < 4; t++)
        for (size_t v = 0; v < N_CONFIGS; v++) {
            const lse_sim_type *type = all_types(t);
            const lse_dist_config *cfg = &configs[v];
            lse_assert_ok(run(type, cfg, c, p, s, NULL, NULL, NULL));
            for (size_t i = 0; i < 5; i++)
                for (size_t j = 0; j < 4; j++) {
                    const double want = score(type, cfg, dist2(c, i, p, j));
                    ck_assert_msg(fabs(get(s, i, j) - want) <=
                                      1e-12 * fmax(1.0, fabs(want)),
                                  "%s v%zu [%zu,%zu]: %.17g vs %.17g",
                                  type->name, v, i, j, get(s, i, j), want);
                }
            /* self term: the diagonal distance is exactly 0 */
            lse_assert_ok(run(type, cfg, c, c, ss, NULL, NULL, NULL));
            for (size_t i = 0; i < 5; i++)
                ck_assert_double_eq(get(ss, i, i), score(type, cfg, 0.0));
        }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(ss);
}
END_TEST

static void gradcheck(const lse_sim_type *t, const lse_dist_config *cfg,
                      const gsl_matrix *c, const gsl_matrix *p)
{
    lse_gradcheck res;
    lse_error err;
    lse_assert_ok(lse_sim_check_gradient(t, cfg, c, p, NULL, NULL, 1e-6, 1.0,
                                         &res, &err));
    ck_assert_msg(res.max_error < 1e-6, "%s p=%g: error %g at %s (%g vs %g)",
                  t->name, cfg->p, res.max_error, res.where, res.analytic,
                  res.numeric);
    ck_assert_uint_eq(res.n_checked, c->size1 * c->size2 + p->size1 * p->size2);
}

START_TEST(test_gradients)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    fill(c, 0.7);
    fill(p, -1.2);
    for (size_t t = 0; t < 4; t++)
        for (size_t v = 0; v < N_CONFIGS; v++) {
            gradcheck(all_types(t), &configs[v], c, p);
            /* self terms, including c == p with p < 2 */
            gradcheck(all_types(t), &configs[v], c, c);
        }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* Gradient formula d sim/dc = phi'(D2) 2 (c - p) = dphi/d(d^p) p d^(p-2)
 * (c - p), pair by pair, for idw and inv-dist. */
START_TEST(test_gradient_formula)
{
    gsl_matrix *c = gsl_matrix_alloc(3, 4), *p = gsl_matrix_alloc(2, 4);
    gsl_matrix *g = gsl_matrix_alloc(3, 2);
    fill(c, 2.2);
    fill(p, -0.4);
    fill(g, 0.9);
    for (size_t t = 2; t < 4; t++)
        for (size_t v = 0; v < N_CONFIGS; v++) {
            const lse_sim_type *type = all_types(t);
            const lse_dist_config *cfg = &configs[v];
            gsl_matrix *gc = gsl_matrix_calloc(3, 4);
            gsl_matrix *gp = gsl_matrix_calloc(2, 4);
            lse_assert_ok(run(type, cfg, c, p, NULL, g, gc, gp));
            for (size_t i = 0; i < 3; i++)
                for (size_t k = 0; k < 4; k++) {
                    double want = 0.0;
                    for (size_t j = 0; j < 2; j++) {
                        const double d = sqrt(dist2(c, i, p, j));
                        const double den = cfg->eps + pow(d, cfg->p);
                        const double outer = type == lse_sim_idw
                                                 ? -1.0 / den
                                                 : -1.0 / (den * den);
                        want += get(g, i, j) * outer * cfg->p *
                                pow(d, cfg->p - 2.0) *
                                (get(c, i, k) - get(p, j, k));
                    }
                    ck_assert_double_eq_tol(get(gc, i, k), want,
                                            1e-12 * fmax(1.0, fabs(want)));
                }
            gsl_matrix_free(gc);
            gsl_matrix_free(gp);
        }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(g);
}
END_TEST

/* The singular point: at c == p the gradient of ||c - p||^p is undefined for
 * p < 2; it is defined as 0 (the subgradient at the minimum). */
START_TEST(test_singular_point_gradient_is_zero)
{
    gsl_matrix *c = gsl_matrix_alloc(1, 3), *g = gsl_matrix_alloc(1, 1);
    gsl_matrix *s = gsl_matrix_alloc(1, 1);
    fill(c, 0.61);
    gsl_matrix_set(g, 0, 0, 0.8173);
    for (size_t t = 0; t < 4; t++)
        for (size_t v = 0; v < N_CONFIGS; v++) {
            gsl_matrix *gc = gsl_matrix_calloc(1, 3);
            gsl_matrix *gp = gsl_matrix_calloc(1, 3);
            lse_assert_ok(run(all_types(t), &configs[v], c, c, s, g, gc, gp));
            ck_assert(isfinite(get(s, 0, 0)));
            ck_assert_msg(gsl_matrix_isnull(gc) && gsl_matrix_isnull(gp),
                          "%s p=%g", all_types(t)->name, configs[v].p);
            gsl_matrix_free(gc);
            gsl_matrix_free(gp);
        }
    gsl_matrix_free(c);
    gsl_matrix_free(g);
    gsl_matrix_free(s);
}
END_TEST

/* Nearly coincident rows: the distance is recomputed directly, so it is
 * accurate where |c|^2 + |p|^2 - 2 c.p would cancel. */
START_TEST(test_near_pairs_accurate)
{
    const lse_dist_config cfg = {.p = 1.0, .eps = 1e-3, .s = 1.0};
    gsl_matrix *c = gsl_matrix_alloc(2, 3), *p = gsl_matrix_alloc(2, 3);
    gsl_matrix *s = gsl_matrix_alloc(2, 2);
    fill(c, 0.3);
    gsl_matrix_scale(c, 100.0); /* large norms make the cancellation worse */
    gsl_matrix_memcpy(p, c);
    *gsl_matrix_ptr(p, 0, 1) += 3e-9;
    lse_assert_ok(run(lse_sim_idw, &cfg, c, p, s, NULL, NULL, NULL));
    const double want = -log(1e-3 + sqrt(dist2(c, 0, p, 0)));
    ck_assert_double_eq_tol(get(s, 0, 0), want, 1e-13);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
}
END_TEST

/* phi' = dphi/dD2 of the four scores, in long double */
static long double dphi_ld(const lse_sim_type *t, const lse_dist_config *cfg,
                           long double d2)
{
    if (t == lse_sim_neg_dist)
        return -1.0L;
    if (t == lse_sim_gauss_kernel) {
        const long double s2 = (long double)cfg->s * cfg->s;
        return -expl(-d2 / s2) / s2;
    }
    const long double u = powl(d2, 0.5L * cfg->p);
    const long double den = cfg->eps + u;
    const long double du = d2 > 0 ? 0.5L * cfg->p * u / d2 : 0.0L;
    return t == lse_sim_inv_dist ? -du / (den * den) : -du / den;
}

/* Far from the origin: unit-spread rows shifted by 1e3, 1e4 and 1e6 give
 * the similarities and gradients of a direct per-pair computation in long
 * double to 1e-13 relative (the GEMM expansion |c|^2 - 2 c.p + |p|^2 of
 * uncentered rows kept only ~1e-10 at 1e3 and ~1e-8 at 1e4). */
START_TEST(test_accurate_far_from_origin)
{
    enum { B = 17, M = 13, D = 5 };
    const double offsets[] = {1e3, 1e4, 1e6};
    const lse_dist_config cfg = {.p = 1.5, .eps = 0.2, .s = 1.7};
    gsl_matrix *c = gsl_matrix_alloc(B, D), *p = gsl_matrix_alloc(M, D);
    gsl_matrix *s = gsl_matrix_alloc(B, M), *g = gsl_matrix_alloc(B, M);
    gsl_matrix *gc = gsl_matrix_alloc(B, D), *gp = gsl_matrix_alloc(M, D);
    fill(g, 0.37);
    for (size_t o = 0; o < 3; o++) {
        fill(c, 0.3);
        fill(p, 1.9);
        for (size_t k = 0; k < D; k++) { /* a different offset per axis */
            const double off = offsets[o] * (1.0 - 0.3 * (double)k);
            for (size_t i = 0; i < B; i++)
                *gsl_matrix_ptr(c, i, k) += off;
            for (size_t j = 0; j < M; j++)
                *gsl_matrix_ptr(p, j, k) += off;
        }
        for (size_t t = 0; t < 4; t++) {
            const lse_sim_type *type = all_types(t);
            gsl_matrix_set_zero(gc);
            gsl_matrix_set_zero(gp);
            lse_assert_ok(run(type, &cfg, c, p, s, g, gc, gp));
            long double wc[B][D] = {{0}}, wp[M][D] = {{0}};
            double gmax = 0.0;
            for (size_t i = 0; i < B; i++)
                for (size_t j = 0; j < M; j++) {
                    long double d2 = 0.0L;
                    for (size_t k = 0; k < D; k++) {
                        const long double dk =
                            (long double)get(c, i, k) - get(p, j, k);
                        d2 += dk * dk;
                    }
                    const double want = score(type, &cfg, (double)d2);
                    const double err = fabs(get(s, i, j) - want);
                    ck_assert_msg(err <= 1e-13 * fabs(want) + 1e-300,
                                  "%s at %g [%zu,%zu]: %.17g vs %.17g (%g)",
                                  type->name, offsets[o], i, j, get(s, i, j),
                                  want, err / fabs(want));
                    const long double v =
                        2.0L * get(g, i, j) * dphi_ld(type, &cfg, d2);
                    for (size_t k = 0; k < D; k++) {
                        const long double t2 =
                            v * ((long double)get(c, i, k) - get(p, j, k));
                        wc[i][k] += t2;
                        wp[j][k] -= t2;
                    }
                }
            for (size_t i = 0; i < B; i++)
                for (size_t k = 0; k < D; k++)
                    gmax = fmax(gmax, fabs((double)wc[i][k]));
            for (size_t i = 0; i < B; i++)
                for (size_t k = 0; k < D; k++)
                    ck_assert_msg(fabs(get(gc, i, k) - (double)wc[i][k]) <=
                                      1e-13 * gmax,
                                  "%s at %g: dE/dc[%zu,%zu] %.17g vs %.17g",
                                  type->name, offsets[o], i, k, get(gc, i, k),
                                  (double)wc[i][k]);
            for (size_t j = 0; j < M; j++)
                for (size_t k = 0; k < D; k++)
                    ck_assert_msg(fabs(get(gp, j, k) - (double)wp[j][k]) <=
                                      1e-13 * gmax,
                                  "%s at %g: dE/dp[%zu,%zu] %.17g vs %.17g",
                                  type->name, offsets[o], j, k, get(gp, j, k),
                                  (double)wp[j][k]);
            /* finite differences still agree away from the origin (at
             * 1e3 a step of 1e-6 is still ~1e7 ulps of the coordinates) */
            if (o == 0)
                gradcheck(type, &cfg, c, p);
        }
    }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
}
END_TEST

/* IDW paper eq 5: softmax of the idw score equals Shepard's weights
 * (eps + d_i^p)^-1 / sum_j (eps + d_j^p)^-1. */
START_TEST(test_idw_softmax_is_shepard)
{
    gsl_matrix *q = gsl_matrix_alloc(5, 3), *k = gsl_matrix_alloc(6, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 6);
    double a[6];
    fill(q, 0.55);
    fill(k, -1.85);
    for (size_t v = 0; v < N_CONFIGS; v++) {
        const lse_dist_config *cfg = &configs[v];
        lse_assert_ok(run(lse_sim_idw, cfg, q, k, s, NULL, NULL, NULL));
        for (size_t i = 0; i < 5; i++) {
            lse_assert_ok(
                lse_softmax(gsl_matrix_const_ptr(s, i, 0), 6, 1, 1.0, a, NULL));
            double total = 0.0;
            for (size_t j = 0; j < 6; j++)
                total +=
                    1.0 / (cfg->eps + pow(sqrt(dist2(q, i, k, j)), cfg->p));
            for (size_t j = 0; j < 6; j++) {
                const double w =
                    1.0 / (cfg->eps + pow(sqrt(dist2(q, i, k, j)), cfg->p)) /
                    total;
                ck_assert_double_eq_tol(a[j], w, 1e-12);
            }
        }
    }
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(s);
}
END_TEST

START_TEST(test_check_errors)
{
    char msg[256] = "";
    lse_sim_shape shape = {
        .n_child = 5, .block = 5, .n_parent = 4, .d_child = 3, .d_parent = 2};
    for (size_t t = 0; t < 4; t++) {
        const lse_sim_type *type = all_types(t);
        shape.d_parent = 2;
        lse_assert_status(type->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
        ck_assert_ptr_nonnull(strstr(msg, type->name));
        ck_assert_ptr_nonnull(strstr(msg, "d_child = 3, d_parent = 2"));
        shape.d_parent = 3;
        lse_assert_ok(type->check(&shape, NULL, msg, sizeof msg));
        shape.d_context = 3;
        lse_assert_status(type->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
        shape.d_context = 0;
        shape.d_child = shape.d_parent = 0;
        lse_assert_status(type->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
        shape.d_child = shape.d_parent = 3;
    }
    /* p and eps: inv-dist and idw */
    const lse_dist_config bad_p[] = {{.p = 0.0, .eps = 1e-3, .s = 1.0},
                                     {.p = -1.0, .eps = 1e-3, .s = 1.0},
                                     {.p = NAN, .eps = 1e-3, .s = 1.0},
                                     {.p = INFINITY, .eps = 1e-3, .s = 1.0}};
    const lse_dist_config bad_eps[] = {{.p = 2.0, .eps = 0.0, .s = 1.0},
                                       {.p = 2.0, .eps = -1e-3, .s = 1.0},
                                       {.p = 2.0, .eps = NAN, .s = 1.0}};
    const lse_dist_config bad_s[] = {{.p = 2.0, .eps = 1e-3, .s = 0.0},
                                     {.p = 2.0, .eps = 1e-3, .s = -2.0},
                                     {.p = 2.0, .eps = 1e-3, .s = NAN}};
    for (size_t t = 2; t < 4; t++) {
        const lse_sim_type *type = all_types(t);
        for (size_t i = 0; i < 4; i++) {
            lse_assert_status(type->check(&shape, &bad_p[i], msg, sizeof msg),
                              LSE_EDOM);
            ck_assert_ptr_nonnull(strstr(msg, ": p = "));
        }
        for (size_t i = 0; i < 3; i++) {
            lse_assert_status(type->check(&shape, &bad_eps[i], msg, sizeof msg),
                              LSE_EDOM);
            ck_assert_ptr_nonnull(strstr(msg, ": eps = "));
            /* s is not used by these two */
            lse_assert_ok(type->check(&shape, &bad_s[i], msg, sizeof msg));
        }
    }
    for (size_t i = 0; i < 3; i++) {
        lse_assert_status(
            lse_sim_gauss_kernel->check(&shape, &bad_s[i], msg, sizeof msg),
            LSE_EDOM);
        ck_assert_ptr_nonnull(strstr(msg, "gauss-kernel: s = "));
        /* p and eps are not used by the gauss kernel or neg-dist */
        lse_assert_ok(
            lse_sim_gauss_kernel->check(&shape, &bad_p[i], msg, sizeof msg));
        lse_assert_ok(
            lse_sim_neg_dist->check(&shape, &bad_s[i], msg, sizeof msg));
    }
}
END_TEST

START_TEST(test_kernel_errors)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4), *sbad = gsl_matrix_alloc(5, 3);
    fill(c, 0.1);
    fill(p, 0.2);
    const lse_sim_args nowork = {.child = c, .parent = p};
    lse_assert_status(lse_sim_idw->eval(&nowork, s), LSE_EFAULT);
    const lse_sim_shape shape = {
        .n_child = 5, .block = 5, .n_parent = 4, .d_child = 3, .d_parent = 3};
    void *work = NULL;
    lse_assert_ok(lse_sim_idw->work_new(&shape, NULL, &work));
    const lse_sim_args a = {.child = c, .parent = p, .work = work};
    lse_assert_status(lse_sim_idw->eval(&a, sbad), LSE_EDIM);
    lse_assert_ok(lse_sim_idw->eval(&a, s));
    lse_sim_idw->work_free(work);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(sbad);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_dist");
    TCase *tc = tcase_create("dist");
    tcase_add_test(tc, test_types);
    tcase_add_test(tc, test_eval_matches_formula);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_gradient_formula);
    tcase_add_test(tc, test_singular_point_gradient_is_zero);
    tcase_add_test(tc, test_near_pairs_accurate);
    tcase_add_test(tc, test_accurate_far_from_origin);
    tcase_add_test(tc, test_idw_softmax_is_shepard);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_kernel_errors);
    suite_add_tcase(s, tc);
    return s;
}
