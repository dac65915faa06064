#include <math.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"

/* lib/sim/dot.c: dot and scaled-dot. */

/* high-entropy, deterministic test values */
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

/* check + work_new + eval (if s) + grad (if g) + work_free */
static lse_status run(const lse_sim_type *t, const void *cfg,
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
    if (t->work_new != NULL && (st = t->work_new(&shape, cfg, &work)) != LSE_OK)
        return st;
    const lse_sim_args a = {
        .child = c, .parent = p, .config = cfg, .work = work};
    if (s != NULL)
        st = t->eval(&a, s);
    if (st == LSE_OK && g != NULL) {
        const lse_sim_grads out = {.child = gc, .parent = gp};
        st = t->grad(&a, g, &out);
    }
    if (work != NULL)
        t->work_free(work);
    return st;
}

/* A = row softmax of S */
static void softmax_rows(const gsl_matrix *s, gsl_matrix *a)
{
    for (size_t i = 0; i < s->size1; i++)
        lse_assert_ok(lse_softmax(gsl_matrix_const_ptr(s, i, 0), s->size2, 1,
                                  1.0, gsl_matrix_ptr(a, i, 0), NULL));
}

START_TEST(test_names)
{
    ck_assert_str_eq(lse_sim_dot->name, "dot");
    ck_assert_str_eq(lse_sim_scaled_dot->name, "scaled-dot");
    ck_assert_uint_eq(lse_sim_dot->n_param, 0);
    ck_assert_uint_eq(lse_sim_scaled_dot->n_param, 0);
}
END_TEST

START_TEST(test_eval_matches_formula)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4), *s2 = gsl_matrix_alloc(5, 4);
    fill(c, 0.3);
    fill(p, 1.9);
    lse_assert_ok(run(lse_sim_dot, NULL, c, p, s, NULL, NULL, NULL));
    lse_assert_ok(run(lse_sim_scaled_dot, NULL, c, p, s2, NULL, NULL, NULL));
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 4; j++) {
            double dot = 0.0;
            for (size_t k = 0; k < 3; k++)
                dot += gsl_matrix_get(c, i, k) * gsl_matrix_get(p, j, k);
            ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), dot, 1e-13);
            ck_assert_double_eq_tol(gsl_matrix_get(s2, i, j), dot / sqrt(3.0),
                                    1e-13);
        }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(s2);
}
END_TEST

static void gradcheck(const lse_sim_type *t, const gsl_matrix *c,
                      const gsl_matrix *p)
{
    lse_gradcheck res;
    lse_error err;
    lse_assert_ok(lse_sim_check_gradient(t, NULL, c, p, NULL, NULL, 1e-6, 1.0,
                                         &res, &err));
    ck_assert_msg(res.max_error < 1e-6, "%s: error %g at %s (%g vs %g)",
                  t->name, res.max_error, res.where, res.analytic, res.numeric);
    ck_assert_uint_eq(res.n_checked, c->size1 * c->size2 + p->size1 * p->size2);
}

START_TEST(test_gradients)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    fill(c, 0.7);
    fill(p, -1.2);
    gradcheck(lse_sim_dot, c, p);
    gradcheck(lse_sim_scaled_dot, c, p);
    /* self terms: the same matrix as children and parents */
    gradcheck(lse_sim_dot, c, c);
    gradcheck(lse_sim_scaled_dot, c, c);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* Tschantz eqs (7), (8) (cross attention) and (10), (11) (Hopfield):
 * -dE/dq_c = sum_p A_cp k_p, -dE/dk_p = sum_c A_cp q_c, with A the row
 * softmax. The library returns dE/dv for G = dE/dS = -A. */
static void check_seed_eqs(size_t nq, size_t nk, size_t d, double seed)
{
    gsl_matrix *q = gsl_matrix_alloc(nq, d), *k = gsl_matrix_alloc(nk, d);
    gsl_matrix *s = gsl_matrix_alloc(nq, nk), *a = gsl_matrix_alloc(nq, nk);
    gsl_matrix *gq = gsl_matrix_calloc(nq, d), *gk = gsl_matrix_calloc(nk, d);
    fill(q, seed);
    fill(k, seed + 2.5);
    lse_assert_ok(run(lse_sim_dot, NULL, q, k, s, NULL, NULL, NULL));
    softmax_rows(s, a);
    gsl_matrix_scale(a, -1.0); /* G = -A */
    lse_assert_ok(run(lse_sim_dot, NULL, q, k, NULL, a, gq, gk));
    gsl_matrix_scale(a, -1.0);
    for (size_t c = 0; c < nq; c++)
        for (size_t x = 0; x < d; x++) {
            double rhs = 0.0; /* eq 7 / 10 */
            for (size_t p = 0; p < nk; p++)
                rhs += gsl_matrix_get(a, c, p) * gsl_matrix_get(k, p, x);
            ck_assert_double_eq_tol(-gsl_matrix_get(gq, c, x), rhs, 1e-13);
        }
    for (size_t p = 0; p < nk; p++)
        for (size_t x = 0; x < d; x++) {
            double rhs = 0.0; /* eq 8 / 11 */
            for (size_t c = 0; c < nq; c++)
                rhs += gsl_matrix_get(a, c, p) * gsl_matrix_get(q, c, x);
            ck_assert_double_eq_tol(-gsl_matrix_get(gk, p, x), rhs, 1e-13);
        }
    /* and the convention itself: gq is dE/dq for E = -sum_c lse(S_c) */
    const double h = 1e-6;
    for (size_t c = 0; c < nq; c++)
        for (size_t x = 0; x < d; x++) {
            double e[2];
            const double v = gsl_matrix_get(q, c, x);
            for (int side = 0; side < 2; side++) {
                gsl_matrix_set(q, c, x, v + (side == 0 ? h : -h));
                lse_assert_ok(
                    run(lse_sim_dot, NULL, q, k, s, NULL, NULL, NULL));
                e[side] = 0.0;
                for (size_t r = 0; r < nq; r++)
                    e[side] -= lse_logsumexp(gsl_matrix_const_ptr(s, r, 0), nk,
                                             1, 1.0);
            }
            gsl_matrix_set(q, c, x, v);
            ck_assert_double_eq_tol(gsl_matrix_get(gq, c, x),
                                    (e[0] - e[1]) / (2 * h), 1e-7);
        }
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(s);
    gsl_matrix_free(a);
    gsl_matrix_free(gq);
    gsl_matrix_free(gk);
}

START_TEST(test_seed_cross_attention_eqs_7_8) { check_seed_eqs(5, 4, 3, 0.41); }
END_TEST

START_TEST(test_seed_hopfield_eqs_10_11) { check_seed_eqs(6, 3, 4, -0.93); }
END_TEST

START_TEST(test_check_errors)
{
    const lse_sim_type *types[] = {lse_sim_dot, lse_sim_scaled_dot};
    for (size_t t = 0; t < 2; t++) {
        char msg[256] = "";
        lse_sim_shape shape = {.n_child = 5,
                               .block = 5,
                               .n_parent = 4,
                               .d_child = 3,
                               .d_parent = 4};
        lse_assert_status(types[t]->check(&shape, NULL, msg, sizeof msg),
                          LSE_EDIM);
        ck_assert_ptr_nonnull(strstr(msg, types[t]->name));
        ck_assert_ptr_nonnull(strstr(msg, "d_parent = 4"));
        shape.d_parent = 3;
        lse_assert_ok(types[t]->check(&shape, NULL, msg, sizeof msg));
        shape.d_context = 2;
        lse_assert_status(types[t]->check(&shape, NULL, msg, sizeof msg),
                          LSE_EDIM);
        ck_assert_ptr_nonnull(strstr(msg, "context"));
        shape.d_context = 0;
        shape.d_child = shape.d_parent = 0;
        lse_assert_status(types[t]->check(&shape, NULL, msg, sizeof msg),
                          LSE_EDIM);
    }
}
END_TEST

START_TEST(test_kernel_shape_errors)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(4, 4);
    fill(c, 0.1);
    fill(p, 0.2);
    const lse_sim_args a = {.child = c, .parent = p};
    lse_assert_status(lse_sim_dot->eval(&a, s), LSE_EDIM);
    lse_assert_status(lse_sim_dot->eval(&a, NULL), LSE_EFAULT);
    const lse_sim_args bad = {.child = c, .parent = NULL};
    gsl_matrix_view sv = gsl_matrix_submatrix(s, 0, 0, 4, 4);
    lse_assert_status(lse_sim_scaled_dot->eval(&bad, &sv.matrix), LSE_EFAULT);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_dot");
    TCase *tc = tcase_create("dot");
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_eval_matches_formula);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_seed_cross_attention_eqs_7_8);
    tcase_add_test(tc, test_seed_hopfield_eqs_10_11);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_kernel_shape_errors);
    suite_add_tcase(s, tc);
    return s;
}
