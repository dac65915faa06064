#include <math.h>
#include <string.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* LayerNorm as the gradient of an energy (models/layernorm.c). */

#define B 4
#define D 6

static void fill(gsl_matrix *m, double seed, double amp)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j,
                           amp *
                               sin(seed + 1.37 * (double)i + 0.71 * (double)j +
                                   0.53 * (double)(i * j * j)));
}

/* The direct formula, per-dimension gain allowed:
 * y_j = gamma_j (x_j - mean) / sqrt(var + eps) + delta_j. */
static void direct_row(const double *x, const double *gamma,
                       const double *delta, double eps, double *y)
{
    double mean = 0.0, var = 0.0;
    for (size_t j = 0; j < D; j++)
        mean += x[j] / D;
    for (size_t j = 0; j < D; j++)
        var += (x[j] - mean) * (x[j] - mean) / D;
    const double sd = sqrt(var + eps);
    for (size_t j = 0; j < D; j++)
        y[j] = gamma[j] * (x[j] - mean) / sd + (delta != NULL ? delta[j] : 0.0);
}

START_TEST(test_apply_equals_direct_formula)
{
    gsl_matrix *x = gsl_matrix_alloc(B, D), *y = gsl_matrix_alloc(B, D);
    gsl_vector *delta = gsl_vector_alloc(D);
    fill(x, 0.4127, 2.3);
    for (size_t j = 0; j < D; j++)
        gsl_vector_set(delta, j, 0.3 * cos(2.385 + (double)j));
    const double gamma = 1.7, eps = 1e-5;
    double g[D];
    for (size_t j = 0; j < D; j++)
        g[j] = gamma;
    for (int with_delta = 0; with_delta < 2; with_delta++) {
        lse_assert_ok(lse_layernorm_apply(x, gamma, with_delta ? delta : NULL,
                                          eps, y, NULL));
        for (size_t i = 0; i < B; i++) {
            double row[D], ref[D];
            for (size_t j = 0; j < D; j++)
                row[j] = gsl_matrix_get(x, i, j);
            direct_row(row, g, with_delta ? delta->data : NULL, eps, ref);
            for (size_t j = 0; j < D; j++)
                ck_assert_double_eq_tol(gsl_matrix_get(y, i, j), ref[j], 1e-12);
        }
    }
    /* in place */
    gsl_matrix *z = gsl_matrix_alloc(B, D);
    gsl_matrix_memcpy(z, x);
    lse_assert_ok(lse_layernorm_apply(z, gamma, delta, eps, z, NULL));
    for (size_t i = 0; i < B; i++)
        for (size_t j = 0; j < D; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(z, i, j),
                                    gsl_matrix_get(y, i, j), 1e-15);
    gsl_matrix_free(z);
    gsl_matrix_free(x);
    gsl_matrix_free(y);
    gsl_vector_free(delta);
}
END_TEST

/* Energy by hand, then a gradient check of E w.r.t. x, gamma and delta. */
START_TEST(test_energy_and_gradient_check)
{
    gsl_matrix *x = gsl_matrix_alloc(B, D);
    gsl_vector *delta = gsl_vector_alloc(D);
    fill(x, 2.385, 1.9);
    for (size_t j = 0; j < D; j++)
        gsl_vector_set(delta, j, 0.41 * sin(0.4127 * (double)(j + 1)));
    const double gamma = 0.8731, eps = 1e-3;
    lse_layernorm *ln = NULL;
    lse_assert_ok(lse_layernorm_new(x, gamma, delta, eps, &ln, NULL));
    lse_graph *g = lse_layernorm_graph(ln);
    ck_assert_ptr_nonnull(lse_graph_find_node(g, "x"));
    ck_assert(lse_node_is_param(lse_graph_find_node(g, "gamma")));
    ck_assert(lse_node_is_param(lse_graph_find_node(g, "delta")));
    lse_term *t = lse_graph_find_term(g, "layernorm");
    ck_assert_ptr_eq(lse_term_custom(t), lse_custom_layernorm);
    double e, hand = 0.0;
    lse_assert_ok(lse_layernorm_energy(ln, &e, &model_err));
    for (size_t i = 0; i < B; i++) {
        double mean = 0.0, var = 0.0, dx = 0.0;
        for (size_t j = 0; j < D; j++)
            mean += gsl_matrix_get(x, i, j) / D;
        for (size_t j = 0; j < D; j++) {
            const double r = gsl_matrix_get(x, i, j) - mean;
            var += r * r / D;
            dx += gsl_vector_get(delta, j) * gsl_matrix_get(x, i, j);
        }
        hand += D * gamma * sqrt(var + eps) + dx;
    }
    ck_assert_double_eq_tol(e, hand, 1e-12);
    lse_gradcheck res;
    lse_assert_ok(lse_graph_check_gradient(g, NULL, 1e-6, 1e-3, &res));
    ck_assert_uint_eq(res.n_checked, B * D + 1 + D);
    ck_assert_msg(res.max_error < 1e-6, "%g at %s", res.max_error, res.where);
    /* forward = the gradient on x; energy returned alongside */
    gsl_matrix *y = gsl_matrix_alloc(B, D);
    double e2;
    lse_assert_ok(lse_layernorm_forward(ln, y, &e2, &model_err));
    ck_assert_double_eq(e2, e);
    /* new inputs */
    fill(x, -1.1, 0.7);
    lse_assert_ok(lse_layernorm_set_input(ln, x, &model_err));
    lse_assert_ok(lse_layernorm_forward(ln, y, NULL, &model_err));
    double row[D], ref[D], gv[D];
    for (size_t j = 0; j < D; j++) {
        row[j] = gsl_matrix_get(x, 2, j);
        gv[j] = gamma;
    }
    direct_row(row, gv, delta->data, eps, ref);
    for (size_t j = 0; j < D; j++)
        ck_assert_double_eq_tol(gsl_matrix_get(y, 2, j), ref[j], 1e-12);
    gsl_matrix_free(y);
    lse_layernorm_free(ln);
    gsl_matrix_free(x);
    gsl_vector_free(delta);
}
END_TEST

/* Jacobian J_jk = dy_j/dx_k of one row by central differences. */
static void jacobian(const double *x, const double *gamma, double eps,
                     double J[D][D])
{
    const double h = 1e-6;
    for (size_t k = 0; k < D; k++) {
        double xp[D], xm[D], yp[D], ym[D];
        memcpy(xp, x, sizeof xp);
        memcpy(xm, x, sizeof xm);
        xp[k] += h;
        xm[k] -= h;
        direct_row(xp, gamma, NULL, eps, yp);
        direct_row(xm, gamma, NULL, eps, ym);
        for (size_t j = 0; j < D; j++)
            J[j][k] = (yp[j] - ym[j]) / (2 * h);
    }
}

static double asymmetry(double J[D][D])
{
    double a = 0.0;
    for (size_t j = 0; j < D; j++)
        for (size_t k = 0; k < D; k++)
            a = fmax(a, fabs(J[j][k] - J[k][j]));
    return a;
}

/* Why gamma must be a scalar: a map that is the gradient of an energy has
 * a symmetric Jacobian (the Hessian). With unequal gamma_j the Jacobian of
 * x -> gamma_j (x_j - mean)/sd is clearly asymmetric, so no energy has it
 * as gradient; with equal gamma_j it is symmetric and equals the Hessian
 * of the library's energy (differences of its gradient). */
START_TEST(test_per_dimension_gamma_has_no_energy)
{
    const double x[D] = {0.4127, -1.3318, 2.385, 0.9031, -0.2214, 1.1706};
    const double eps = 1e-5;
    const double unequal[D] = {0.5, 1.0, 1.5, 2.0, 0.7, 1.3};
    double J[D][D];
    jacobian(x, unequal, eps, J);
    const double a_unequal = asymmetry(J);
    ck_assert_double_gt(a_unequal, 0.05);
    /* exact form: J_jk = gamma_j/sd (delta_jk - 1/D - z_j z_k / D); the
     * bracket is symmetric, the row factor gamma_j is not */
    double mean = 0.0, var = 0.0;
    for (size_t j = 0; j < D; j++)
        mean += x[j] / D;
    for (size_t j = 0; j < D; j++)
        var += (x[j] - mean) * (x[j] - mean) / D;
    const double sd = sqrt(var + eps);
    for (size_t j = 0; j < D; j++)
        for (size_t k = 0; k < D; k++) {
            const double zj = (x[j] - mean) / sd, zk = (x[k] - mean) / sd;
            const double exact =
                unequal[j] / sd * ((j == k) - 1.0 / D - zj * zk / D);
            ck_assert_double_eq_tol(J[j][k], exact, 1e-7);
        }
    /* equal gains: symmetric */
    double equal[D];
    for (size_t j = 0; j < D; j++)
        equal[j] = 1.3;
    jacobian(x, equal, eps, J);
    ck_assert_double_lt(asymmetry(J), 1e-8);
    /* ... and the Hessian of the library's energy (gamma 1.3) is that J */
    gsl_matrix *xm = gsl_matrix_alloc(1, D);
    for (size_t j = 0; j < D; j++)
        gsl_matrix_set(xm, 0, j, x[j]);
    lse_layernorm *ln = NULL;
    lse_assert_ok(lse_layernorm_new(xm, 1.3, NULL, eps, &ln, NULL));
    gsl_matrix *yp = gsl_matrix_alloc(1, D), *ym = gsl_matrix_alloc(1, D);
    const double h = 1e-6;
    for (size_t k = 0; k < D; k++) {
        gsl_matrix_set(xm, 0, k, x[k] + h);
        lse_assert_ok(lse_layernorm_set_input(ln, xm, &model_err));
        lse_assert_ok(lse_layernorm_forward(ln, yp, NULL, &model_err));
        gsl_matrix_set(xm, 0, k, x[k] - h);
        lse_assert_ok(lse_layernorm_set_input(ln, xm, &model_err));
        lse_assert_ok(lse_layernorm_forward(ln, ym, NULL, &model_err));
        gsl_matrix_set(xm, 0, k, x[k]);
        for (size_t j = 0; j < D; j++)
            ck_assert_double_eq_tol(
                (gsl_matrix_get(yp, 0, j) - gsl_matrix_get(ym, 0, j)) / (2 * h),
                J[j][k], 1e-7);
    }
    gsl_matrix_free(yp);
    gsl_matrix_free(ym);
    gsl_matrix_free(xm);
    lse_layernorm_free(ln);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x = gsl_matrix_alloc(B, D), *y = gsl_matrix_alloc(B, D);
    gsl_matrix *wrong = gsl_matrix_alloc(B, D - 1);
    gsl_vector *d5 = gsl_vector_alloc(D - 1);
    gsl_vector_set_all(d5, 0.1);
    fill(x, 0.4127, 1.0);
    lse_layernorm *ln = NULL;
    lse_error err;
    lse_assert_status(lse_layernorm_new(NULL, 1.0, NULL, 1e-5, &ln, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_layernorm_new(x, 1.0, NULL, 1e-5, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_layernorm_new(x, 1.0, d5, 1e-5, &ln, &err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "delta"));
    lse_assert_status(lse_layernorm_new(x, 1.0, NULL, 0.0, &ln, &err),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "eps"));
    lse_assert_status(lse_layernorm_new(x, NAN, NULL, 1e-5, &ln, &err),
                      LSE_EDOM);
    ck_assert_ptr_null(ln);
    lse_assert_status(lse_layernorm_apply(x, 1.0, NULL, 1e-5, wrong, &err),
                      LSE_EDIM);
    lse_assert_status(lse_layernorm_apply(x, 1.0, NULL, 1e-5, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_layernorm_apply(x, 1.0, NULL, -1.0, y, &err),
                      LSE_EDOM);
    lse_assert_ok(lse_layernorm_new(x, 1.0, NULL, 1e-5, &ln, &err));
    lse_assert_status(lse_layernorm_forward(ln, wrong, NULL, &model_err),
                      LSE_EDIM);
    lse_assert_status(lse_layernorm_forward(ln, NULL, NULL, &model_err),
                      LSE_EFAULT);
    lse_assert_status(lse_layernorm_energy(ln, NULL, &model_err), LSE_EFAULT);
    lse_assert_status(lse_layernorm_set_input(ln, wrong, &model_err), LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(model_err.message, "lse_layernorm_set_input"));
    gsl_matrix_set(x, 1, 1, NAN);
    lse_assert_status(lse_layernorm_set_input(ln, x, &model_err),
                      LSE_ENONFINITE);
    lse_layernorm *ln2 = NULL;
    lse_assert_status(lse_layernorm_new(x, 1.0, NULL, 1e-5, &ln2, &err),
                      LSE_ENONFINITE);
    ck_assert_ptr_null(ln2);
    lse_layernorm_free(ln);
    lse_assert_status(lse_layernorm_forward(NULL, y, NULL, &model_err),
                      LSE_EFAULT);
    ck_assert_ptr_null(lse_layernorm_graph(NULL));
    ck_assert_str_eq(lse_layernorm_errmsg(NULL), "");
    lse_layernorm_free(NULL);
    gsl_matrix_free(x);
    gsl_matrix_free(y);
    gsl_matrix_free(wrong);
    gsl_vector_free(d5);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_layernorm_energy(NULL, &x, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_layernorm_energy"));
    ck_assert_int_eq(lse_layernorm_energy(NULL, &x, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_layernorm");
    TCase *tc = tcase_create("layernorm");
    tcase_add_test(tc, test_apply_equals_direct_formula);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_energy_and_gradient_check);
    tcase_add_test(tc, test_per_dimension_gamma_has_no_energy);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
