#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* DAAM trained on a task (models/daam_net.c): the loss is the softmax
 * regression over the gated features, training learns the task and the
 * gates, the importance factors are the normalised mean gates, refusals. */

#define N 60
#define D 4
#define C 3

/* feature c is high for class c (c < 3), feature 3 is noise */
static void make_data(gsl_matrix **x, size_t **y)
{
    *x = gsl_matrix_alloc(N, D);
    *y = malloc(N * sizeof **y);
    for (size_t i = 0; i < N; i++) {
        (*y)[i] = i % C;
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(*x, i, j, (j == i % C ? 1.5 : 0.0) +
                                         0.3 * sin(1.7 * (double)(i * (j + 1)) + 0.4 * j));
    }
}

START_TEST(test_loss_is_softmax_regression)
{
    gsl_matrix *x;
    size_t *y;
    make_data(&x, &y);
    lse_daam_net *m;
    lse_error err;
    lse_assert_ok(lse_daam_net_new(2, 2, C, 8, x, &m, &err));
    lse_assert_ok(lse_daam_net_init(m, 3, &model_err));
    gsl_matrix *w = lse_node_value(lse_daam_net_weights(m));
    for (size_t i = 0; i < w->size1; i++)
        for (size_t j = 0; j < w->size2; j++)
            gsl_matrix_set(w, i, j, 0.3 * cos(0.9 * (double)(i * w->size2 + j)));
    double loss, acc;
    lse_assert_ok(lse_daam_net_evaluate(m, x, y, &loss, &acc, &model_err));
    /* by hand: logits = Phi W', mean cross-entropy and argmax */
    gsl_matrix *phi = gsl_matrix_alloc(N, 2 * D);
    lse_assert_ok(lse_gate_features(lse_daam_net_gate(m),
                                    lse_node_value(lse_daam_net_delta(m)),
                                    lse_node_value(lse_daam_net_width(m)), x, NULL, phi));
    double want = 0.0;
    size_t correct = 0;
    for (size_t i = 0; i < N; i++) {
        double l[C], mx = -INFINITY, z = 0.0;
        size_t best = 0;
        for (size_t c = 0; c < C; c++) {
            l[c] = 0.0;
            for (size_t j = 0; j < 2 * D; j++)
                l[c] += gsl_matrix_get(phi, i, j) * gsl_matrix_get(w, c, j);
            mx = fmax(mx, l[c]);
            if (l[c] > l[best])
                best = c;
        }
        for (size_t c = 0; c < C; c++)
            z += exp(l[c] - mx);
        want += mx + log(z) - l[y[i]];
        correct += best == y[i];
    }
    ck_assert_double_eq_tol(loss, want / N, 1e-12);
    ck_assert_double_eq_tol(acc, (double)correct / N, 1e-15);
    /* the normalisation: mean and sd of the columns */
    const lse_gate_config *g = lse_daam_net_gate(m);
    double mean = 0.0;
    for (size_t i = 0; i < N; i++)
        mean += gsl_matrix_get(x, i, 0) / N;
    ck_assert_double_eq_tol(g->center[0], mean, 1e-14);
    ck_assert(g->scale[0] > 0.5 && g->n_head == 2 && g->n_gauss == 2);
    ck_assert_ptr_eq(lse_term_sim(lse_daam_net_term(m)), lse_sim_gate);
    ck_assert_ptr_nonnull(lse_daam_net_graph(m));
    gsl_matrix_free(phi);
    lse_daam_net_free(m);
    gsl_matrix_free(x);
    free(y);
}
END_TEST

START_TEST(test_training_and_importance)
{
    gsl_matrix *x;
    size_t *y;
    make_data(&x, &y);
    lse_daam_net *m, *f;
    lse_assert_ok(lse_daam_net_new(1, 1, C, 10, x, &m, NULL));
    lse_assert_ok(lse_daam_net_new(1, 1, C, 10, x, &f, NULL));
    lse_assert_ok(lse_daam_net_init(m, 1, &model_err));
    lse_assert_ok(lse_daam_net_init(f, 1, &model_err));
    lse_daam_net_train_opts o = lse_daam_net_train_opts_default();
    o.epochs = 60;
    o.lr = 0.05;
    lse_daam_net_train_report rep;
    lse_assert_ok(lse_daam_net_train(m, x, y, &o, &rep, &model_err));
    ck_assert_double_eq_tol(rep.loss_before, log(3.0), 1e-12);
    ck_assert_double_lt(rep.loss_after, 0.3 * rep.loss_before);
    ck_assert_uint_eq(rep.steps, 60 * (N / 10));
    double acc;
    lse_assert_ok(lse_daam_net_evaluate(m, x, y, NULL, &acc, &model_err));
    ck_assert_double_ge(acc, 0.95);
    /* the gates moved; with train_gates = 0 they stay */
    gsl_matrix *d0 = gsl_matrix_alloc(1, D);
    gsl_matrix_memcpy(d0, lse_node_value(lse_daam_net_delta(f)));
    o.train_gates = 0;
    lse_assert_ok(lse_daam_net_train(f, x, y, &o, &rep, &model_err));
    ck_assert(gsl_matrix_equal(d0, lse_node_value(lse_daam_net_delta(f))));
    ck_assert(!gsl_matrix_equal(d0, lse_node_value(lse_daam_net_delta(m))));
    ck_assert_double_lt(rep.loss_after, rep.loss_before);
    /* importance = min-max of the mean gates */
    gsl_vector *da = gsl_vector_alloc(D), *imp = gsl_vector_alloc(D);
    lse_assert_ok(lse_daam_net_importance(m, x, da, imp, &model_err));
    gsl_matrix *gates = gsl_matrix_alloc(N, D);
    lse_assert_ok(lse_gate_features(lse_daam_net_gate(m),
                                    lse_node_value(lse_daam_net_delta(m)),
                                    lse_node_value(lse_daam_net_width(m)), x, gates, NULL));
    double lo = INFINITY, hi = -INFINITY;
    for (size_t j = 0; j < D; j++) {
        double s = 0.0;
        for (size_t i = 0; i < N; i++)
            s += gsl_matrix_get(gates, i, j) / N;
        ck_assert_double_eq_tol(gsl_vector_get(da, j), s, 1e-14);
        lo = fmin(lo, s);
        hi = fmax(hi, s);
    }
    for (size_t j = 0; j < D; j++)
        ck_assert_double_eq_tol(gsl_vector_get(imp, j),
                                (gsl_vector_get(da, j) - lo) / (hi - lo), 1e-14);
    ck_assert_double_eq(gsl_vector_min(imp), 0.0);
    ck_assert_double_eq(gsl_vector_max(imp), 1.0);
    /* equal gates everywhere: every IF is 1 */
    gsl_matrix_set_zero(lse_node_value(lse_daam_net_delta(f)));
    gsl_matrix_set_all(lse_node_value(lse_daam_net_width(f)), 1e300);
    lse_assert_ok(lse_daam_net_importance(f, x, NULL, imp, &model_err));
    for (size_t j = 0; j < D; j++)
        ck_assert_double_eq(gsl_vector_get(imp, j), 1.0);
    gsl_matrix_free(gates);
    gsl_vector_free(da);
    gsl_vector_free(imp);
    gsl_matrix_free(d0);
    lse_daam_net_free(m);
    lse_daam_net_free(f);
    gsl_matrix_free(x);
    free(y);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x;
    size_t *y;
    make_data(&x, &y);
    lse_daam_net *m = NULL;
    lse_error err;
    lse_assert_status(lse_daam_net_new(0, 1, C, 8, x, &m, &err), LSE_EINVAL);
    lse_assert_status(lse_daam_net_new(1, 1, C, 8, NULL, &m, &err), LSE_EFAULT);
    lse_assert_status(lse_daam_net_new(1, 1, C, 8, x, NULL, &err), LSE_EFAULT);
    gsl_matrix_set(x, 3, 2, NAN);
    lse_assert_status(lse_daam_net_new(1, 1, C, 8, x, &m, &err), LSE_ENONFINITE);
    gsl_matrix_set(x, 3, 2, 0.5);
    lse_assert_ok(lse_daam_net_new(1, 1, C, 8, x, &m, &err));
    lse_assert_ok(lse_daam_net_init(m, 1, &model_err));
    lse_daam_net_train_opts o = lse_daam_net_train_opts_default();
    o.lr = -1.0;
    lse_assert_status(lse_daam_net_train(m, x, y, &o, NULL, &model_err),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(model_err.message, "lr"));
    y[5] = C;
    lse_assert_status(lse_daam_net_train(m, x, y, NULL, NULL, &model_err),
                      LSE_EINVAL);
    lse_assert_status(lse_daam_net_evaluate(m, x, y, NULL, NULL, &model_err),
                      LSE_EINVAL);
    y[5] = 2;
    gsl_matrix_view few = gsl_matrix_submatrix(x, 0, 0, 5, D);
    lse_assert_status(
        lse_daam_net_train(m, &few.matrix, y, NULL, NULL, &model_err),
        LSE_EDIM);
    gsl_matrix_view cols = gsl_matrix_submatrix(x, 0, 0, N, 2);
    lse_assert_status(
        lse_daam_net_evaluate(m, &cols.matrix, y, NULL, NULL, &model_err),
        LSE_EDIM);
    lse_assert_status(lse_daam_net_evaluate(m, x, NULL, NULL, NULL, &model_err),
                      LSE_EFAULT);
    gsl_vector *v3 = gsl_vector_alloc(3);
    lse_assert_status(lse_daam_net_importance(m, x, NULL, v3, &model_err),
                      LSE_EDIM);
    lse_assert_status(lse_daam_net_importance(m, x, NULL, NULL, &model_err),
                      LSE_EFAULT);
    gsl_matrix_set(lse_node_value(lse_daam_net_width(m)), 0, 1, 0.0);
    lse_assert_status(lse_daam_net_importance(m, x, NULL, NULL, &model_err),
                      LSE_EFAULT);
    gsl_vector *v4 = gsl_vector_alloc(D);
    lse_assert_status(lse_daam_net_importance(m, x, NULL, v4, &model_err),
                      LSE_EDOM);
    lse_assert_status(lse_daam_net_evaluate(m, x, y, NULL, NULL, &model_err),
                      LSE_EDOM);
    lse_assert_status(lse_daam_net_init(NULL, 1, &model_err), LSE_EFAULT);
    ck_assert_str_eq(lse_daam_net_errmsg(NULL), "");
    ck_assert_ptr_null(lse_daam_net_gate(NULL));
    gsl_vector_free(v3);
    gsl_vector_free(v4);
    lse_daam_net_free(m);
    lse_daam_net_free(NULL);
    gsl_matrix_free(x);
    free(y);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_daam_net_init(NULL, 1, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_daam_net_init"));
    ck_assert_int_eq(lse_daam_net_init(NULL, 1, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_daam_net");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_loss_is_softmax_regression);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_training_and_importance);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
