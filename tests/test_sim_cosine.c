#include <math.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"

/* lib/sim/cosine.c */

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

static lse_status run(const void *cfg, const gsl_matrix *c, const gsl_matrix *p,
                      gsl_matrix *s, const gsl_matrix *g, gsl_matrix *gc,
                      gsl_matrix *gp)
{
    const lse_sim_type *t = lse_sim_cosine;
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

static double norm_row(const gsl_matrix *m, size_t i)
{
    double s = 0.0;
    for (size_t k = 0; k < m->size2; k++)
        s += gsl_matrix_get(m, i, k) * gsl_matrix_get(m, i, k);
    return sqrt(s);
}

static void gradcheck(const lse_cosine_config *cfg, const gsl_matrix *c,
                      const gsl_matrix *p)
{
    lse_gradcheck res;
    lse_error err;
    lse_assert_ok(lse_sim_check_gradient(lse_sim_cosine, cfg, c, p, NULL, NULL,
                                         1e-6, 1.0, &res, &err));
    ck_assert_msg(res.max_error < 1e-6, "error %g at %s (%g vs %g)",
                  res.max_error, res.where, res.analytic, res.numeric);
    ck_assert_uint_eq(res.n_checked, c->size1 * c->size2 + p->size1 * p->size2);
}

START_TEST(test_type)
{
    ck_assert_str_eq(lse_sim_cosine->name, "cosine");
    ck_assert_uint_eq(lse_sim_cosine->n_param, 0);
    ck_assert_uint_eq(lse_sim_cosine->config_size, sizeof(lse_cosine_config));
    const lse_cosine_config *def = lse_sim_cosine->config_default;
    ck_assert_double_eq(def->eps, 1e-12);
    char buf[64];
    lse_sim_cosine->describe(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "eps=1e-12");
}
END_TEST

START_TEST(test_eval_matches_formula)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4);
    fill(c, 0.3);
    fill(p, 1.9);
    lse_assert_ok(run(NULL, c, p, s, NULL, NULL, NULL));
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 4; j++) {
            double dot = 0.0;
            for (size_t k = 0; k < 3; k++)
                dot += gsl_matrix_get(c, i, k) * gsl_matrix_get(p, j, k);
            ck_assert_double_eq_tol(gsl_matrix_get(s, i, j),
                                    dot / (norm_row(c, i) * norm_row(p, j)),
                                    1e-14);
        }
    /* self term: cos(c, c) = 1 */
    gsl_matrix *ss = gsl_matrix_alloc(5, 5);
    lse_assert_ok(run(NULL, c, c, ss, NULL, NULL, NULL));
    for (size_t i = 0; i < 5; i++)
        ck_assert_double_eq_tol(gsl_matrix_get(ss, i, i), 1.0, 1e-15);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(ss);
}
END_TEST

START_TEST(test_gradients)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    fill(c, 0.7);
    fill(p, -1.2);
    gradcheck(NULL, c, p);
    gradcheck(NULL, c, c); /* self terms */
    gsl_matrix_free(c);
    gsl_matrix_free(p);
}
END_TEST

/* dcos/dc = (p_hat - cos c_hat) / |c|, pair by pair */
START_TEST(test_gradient_formula)
{
    gsl_matrix *c = gsl_matrix_alloc(3, 4), *p = gsl_matrix_alloc(2, 4);
    gsl_matrix *s = gsl_matrix_alloc(3, 2), *g = gsl_matrix_alloc(3, 2);
    gsl_matrix *gc = gsl_matrix_calloc(3, 4), *gp = gsl_matrix_calloc(2, 4);
    fill(c, 2.2);
    fill(p, -0.4);
    fill(g, 0.9);
    lse_assert_ok(run(NULL, c, p, s, g, gc, gp));
    for (size_t i = 0; i < 3; i++)
        for (size_t k = 0; k < 4; k++) {
            double want = 0.0;
            for (size_t j = 0; j < 2; j++) {
                const double nc = norm_row(c, i), np = norm_row(p, j);
                const double cs = gsl_matrix_get(s, i, j);
                want += gsl_matrix_get(g, i, j) *
                        (gsl_matrix_get(p, j, k) / np -
                         cs * gsl_matrix_get(c, i, k) / nc) /
                        nc;
            }
            ck_assert_double_eq_tol(gsl_matrix_get(gc, i, k), want, 1e-14);
        }
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
    gsl_matrix_free(gp);
}
END_TEST

/* A row shorter than eps: its norm is the constant eps. */
START_TEST(test_norm_floor)
{
    const lse_cosine_config cfg = {.eps = 0.5};
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4);
    fill(c, 0.7);
    fill(p, -1.2);
    gsl_vector_view c1 = gsl_matrix_row(c, 1);
    gsl_vector_scale(&c1.vector, 0.2 / norm_row(c, 1)); /* |c_1| = 0.2 */
    gsl_vector_view p2 = gsl_matrix_row(p, 2);
    gsl_vector_scale(&p2.vector, 0.3 / norm_row(p, 2)); /* |p_2| = 0.3 */
    ck_assert_double_gt(norm_row(c, 0), 0.5);
    lse_assert_ok(run(&cfg, c, p, s, NULL, NULL, NULL));
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 4; j++) {
            double dot = 0.0;
            for (size_t k = 0; k < 3; k++)
                dot += gsl_matrix_get(c, i, k) * gsl_matrix_get(p, j, k);
            const double nc = fmax(norm_row(c, i), 0.5);
            const double np = fmax(norm_row(p, j), 0.5);
            ck_assert_double_eq_tol(gsl_matrix_get(s, i, j), dot / (nc * np),
                                    1e-14);
        }
    gradcheck(&cfg, c, p);
    gradcheck(&cfg, c, c);
    /* an all-zero row scores 0 with the default floor and a finite grad */
    gsl_matrix_set_zero(c);
    gsl_matrix *g = gsl_matrix_alloc(5, 4), *gc = gsl_matrix_calloc(5, 3);
    fill(g, 0.1);
    lse_assert_ok(run(NULL, c, p, s, g, gc, NULL));
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 4; j++)
            ck_assert_double_eq(gsl_matrix_get(s, i, j), 0.0);
    for (size_t i = 0; i < 5; i++)
        for (size_t k = 0; k < 3; k++)
            ck_assert(isfinite(gsl_matrix_get(gc, i, k)));
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
    gsl_matrix_free(g);
    gsl_matrix_free(gc);
}
END_TEST

START_TEST(test_check_errors)
{
    const lse_sim_type *t = lse_sim_cosine;
    char msg[256] = "";
    lse_sim_shape shape = {
        .n_child = 5, .block = 5, .n_parent = 4, .d_child = 3, .d_parent = 2};
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(msg, "cosine: d_child = 3, d_parent = 2"));
    shape.d_parent = 3;
    lse_assert_ok(t->check(&shape, NULL, msg, sizeof msg));
    shape.d_context = 1;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    shape.d_context = 0;
    shape.d_child = shape.d_parent = 0;
    lse_assert_status(t->check(&shape, NULL, msg, sizeof msg), LSE_EDIM);
    shape.d_child = shape.d_parent = 3;
    const lse_cosine_config bad[] = {
        {.eps = 0.0}, {.eps = -1e-3}, {.eps = NAN}, {.eps = INFINITY}};
    for (size_t i = 0; i < 4; i++) {
        msg[0] = '\0';
        lse_assert_status(t->check(&shape, &bad[i], msg, sizeof msg), LSE_EDOM);
        ck_assert_ptr_nonnull(strstr(msg, "cosine: eps"));
    }
}
END_TEST

START_TEST(test_kernel_errors)
{
    gsl_matrix *c = gsl_matrix_alloc(5, 3), *p = gsl_matrix_alloc(4, 3);
    gsl_matrix *s = gsl_matrix_alloc(5, 4);
    fill(c, 0.1);
    fill(p, 0.2);
    const lse_sim_args nowork = {.child = c, .parent = p};
    lse_assert_status(lse_sim_cosine->eval(&nowork, s), LSE_EFAULT);
    /* a block larger than the workspace */
    const lse_sim_shape shape = {
        .n_child = 2, .block = 2, .n_parent = 4, .d_child = 3, .d_parent = 3};
    void *work = NULL;
    lse_assert_ok(lse_sim_cosine->work_new(&shape, NULL, &work));
    const lse_sim_args big = {.child = c, .parent = p, .work = work};
    lse_assert_status(lse_sim_cosine->eval(&big, s), LSE_EDIM);
    lse_sim_cosine->work_free(work);
    gsl_matrix_free(c);
    gsl_matrix_free(p);
    gsl_matrix_free(s);
}
END_TEST

/* Workspace constructors can be called with any declared shape: one whose
 * matrices of doubles cannot be addressed is LSE_ENOMEM, not a wrapped-around
 * small allocation (the shapes below are only described, never allocated). */
START_TEST(test_work_new_size_overflow)
{
    const size_t big = (size_t)1 << 31; /* big * big * 8 = 2^65 */
    const size_t prow[] = {0}, pcol[] = {0};
    const lse_sim_shape shapes[] = {
        {.n_child = big, .block = big, .n_parent = big, .d_child = 2,
         .d_parent = 2, .d_context = 0, .n_param = 0,
         .param_rows = prow, .param_cols = pcol},
        {.n_child = SIZE_MAX / 4, .block = SIZE_MAX / 4, .n_parent = 3, .d_child = 2,
         .d_parent = 2, .d_context = 0, .n_param = 0,
         .param_rows = prow, .param_cols = pcol},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        void *work = &work;
        lse_assert_status(lse_sim_cosine->work_new(&shapes[i], NULL, &work),
                          LSE_ENOMEM);
        ck_assert_ptr_null(work);
    }
    /* the same construction succeeds at a small size */
    lse_sim_shape ok = shapes[0];
    ok.n_child = ok.block = ok.n_parent = 3;
    ok.d_child = ok.d_parent = 2;
    void *work = NULL;
    lse_assert_ok(lse_sim_cosine->work_new(&ok, NULL, &work));
    lse_sim_cosine->work_free(work);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("sim_cosine");
    TCase *tc = tcase_create("cosine");
    tcase_add_test(tc, test_type);
    tcase_add_test(tc, test_eval_matches_formula);
    tcase_add_test(tc, test_gradients);
    tcase_add_test(tc, test_gradient_formula);
    tcase_add_test(tc, test_norm_floor);
    tcase_add_test(tc, test_check_errors);
    tcase_add_test(tc, test_work_new_size_overflow);
    tcase_add_test(tc, test_kernel_errors);
    suite_add_tcase(s, tc);
    return s;
}
