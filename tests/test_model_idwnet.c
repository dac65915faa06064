#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* IDW prototype classifier (models/idwnet.c, docs/models/idwnet.md). */

static void fill_random(gsl_matrix *m, unsigned long seed, double mean,
                        double sd)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(r);
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, mean + gsl_ran_gaussian(r, sd));
    gsl_rng_free(r);
}

/* Digits scaled to [0, 1]; rows [first, first + n). */
static void read_digits(size_t first, size_t n, gsl_matrix **x, size_t **y)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *all = NULL;
    lse_assert_ok(lse_table_read(LSE_DATA_DIR "/digits.csv", NULL, &t, &err));
    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &all, NULL, &err));
    lse_table_free(t);
    ck_assert_uint_eq(all->size1, 1797);
    ck_assert_uint_eq(all->size2, 65);
    ck_assert(first + n <= all->size1);
    *x = gsl_matrix_alloc(n, 64);
    *y = malloc(n * sizeof **y);
    ck_assert_ptr_nonnull(*x);
    ck_assert_ptr_nonnull(*y);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < 64; j++)
            gsl_matrix_set(*x, i, j, gsl_matrix_get(all, first + i, j) / 16.0);
        (*y)[i] = (size_t)gsl_matrix_get(all, first + i, 64);
    }
    gsl_matrix_free(all);
}

static const lse_sim_type *score_type(int i)
{
    switch (i) {
    case 0:
        return lse_sim_neg_dist;
    case 1:
        return lse_sim_gauss_kernel;
    case 2:
        return lse_sim_inv_dist;
    case 3:
        return lse_sim_idw;
    case 4:
        return lse_sim_scaled_dot;
    default:
        return lse_sim_idw; /* 5: idw with p = 3, eps = 0.05 */
    }
}

/* dL/dK and dL/dV against central differences of the loss, for every
 * score, with a partial batch (5 of 6 rows: the padding must not count). */
START_TEST(test_loss_gradient)
{
    const int k = _i;
    lse_dist_config cfg = {.p = 2.0, .eps = 1e-3, .s = 1.0};
    if (k == 1)
        cfg.s = 1.7;
    if (k == 5) {
        cfg.p = 3.0;
        cfg.eps = 0.05;
    }
    const size_t P = 5, d = 4, C = 3, B = 6, b = 5;
    lse_idwnet *net = NULL;
    lse_error err;
    lse_assert_ok(lse_idwnet_new(P, d, C, score_type(k), &cfg, B, &net, &err));
    fill_random(lse_idwnet_keys(net), 3, 0.2, 0.7);
    fill_random(lse_idwnet_values(net), 4, 0.0, 1.3);
    gsl_matrix *x = gsl_matrix_alloc(b, d);
    fill_random(x, 5, 0.1, 0.8);
    const size_t y[5] = {0, 2, 1, 2, 0};
    gsl_matrix *dk = gsl_matrix_alloc(P, d), *dv = gsl_matrix_alloc(P, C);
    double loss;
    lse_assert_ok(lse_idwnet_loss_grad(net, x, y, &loss, dk, dv, &model_err));
    ck_assert(isfinite(loss) && loss > 0.0);
    const double h = 1e-6;
    double worst = 0.0;
    for (int which = 0; which < 2; which++) {
        gsl_matrix *theta =
            which == 0 ? lse_idwnet_keys(net) : lse_idwnet_values(net);
        const gsl_matrix *an = which == 0 ? dk : dv;
        for (size_t i = 0; i < theta->size1; i++)
            for (size_t j = 0; j < theta->size2; j++) {
                const double v = gsl_matrix_get(theta, i, j);
                double up, down;
                gsl_matrix_set(theta, i, j, v + h);
                lse_assert_ok(lse_idwnet_loss_grad(net, x, y, &up, NULL, NULL,
                                                   &model_err));
                gsl_matrix_set(theta, i, j, v - h);
                lse_assert_ok(lse_idwnet_loss_grad(net, x, y, &down, NULL, NULL,
                                                   &model_err));
                gsl_matrix_set(theta, i, j, v);
                const double num = (up - down) / (2 * h);
                const double a = gsl_matrix_get(an, i, j);
                double den = fabs(a) > fabs(num) ? fabs(a) : fabs(num);
                den = den > 1e-4 ? den : 1e-4;
                const double e = fabs(a - num) / den;
                ck_assert_msg(e < 1e-6, "score %d %s[%zu,%zu]: %g vs %g", k,
                              which == 0 ? "keys" : "values", i, j, a, num);
                worst = e > worst ? e : worst;
            }
    }
    /* the full-batch loss is the same number through evaluate */
    double loss2;
    lse_assert_ok(lse_idwnet_evaluate(net, x, y, &loss2, NULL, &model_err));
    ck_assert_double_eq_tol(loss2, loss, 1e-12);
    gsl_matrix_free(dk);
    gsl_matrix_free(dv);
    gsl_matrix_free(x);
    lse_idwnet_free(net);
}
END_TEST

/* IDW attention = Shepard's weights w_j / sum_l w_l, w_j = 1/(eps + d^p),
 * and logits = A V. */
START_TEST(test_idw_softmax_is_shepard)
{
    const size_t P = 7, d = 3, C = 4, n = 9;
    const lse_dist_config cfg = {.p = 2.5, .eps = 0.01, .s = 1.0};
    lse_idwnet *net = NULL;
    lse_assert_ok(lse_idwnet_new(P, d, C, lse_sim_idw, &cfg, 4, &net, NULL));
    gsl_matrix *keys = lse_idwnet_keys(net), *v = lse_idwnet_values(net);
    fill_random(keys, 8, 0.0, 1.0);
    fill_random(v, 9, 0.0, 1.0);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    fill_random(x, 10, 0.0, 1.0);
    /* a query sitting on a key: its weight dominates (1/eps) */
    gsl_vector_view k2 = gsl_matrix_row(keys, 2);
    gsl_matrix_set_row(x, 4, &k2.vector);
    gsl_matrix *logits = gsl_matrix_alloc(n, C), *attn = gsl_matrix_alloc(n, P);
    lse_assert_ok(lse_idwnet_forward(net, x, logits, attn, &model_err));
    for (size_t i = 0; i < n; i++) {
        double w[7], sum = 0.0;
        for (size_t j = 0; j < P; j++) {
            double d2 = 0.0;
            for (size_t c = 0; c < d; c++) {
                const double t =
                    gsl_matrix_get(x, i, c) - gsl_matrix_get(keys, j, c);
                d2 += t * t;
            }
            w[j] = 1.0 / (0.01 + pow(sqrt(d2), 2.5));
            sum += w[j];
        }
        for (size_t j = 0; j < P; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(attn, i, j), w[j] / sum,
                                    1e-13);
        for (size_t c = 0; c < C; c++) {
            double l = 0.0;
            for (size_t j = 0; j < P; j++)
                l += w[j] / sum * gsl_matrix_get(v, j, c);
            ck_assert_double_eq_tol(gsl_matrix_get(logits, i, c), l, 1e-12);
        }
    }
    ck_assert_double_gt(gsl_matrix_get(attn, 4, 2), 0.98);
    gsl_matrix_free(x);
    gsl_matrix_free(logits);
    gsl_matrix_free(attn);
    lse_idwnet_free(net);
}
END_TEST

/* Scaled-dot attention: the textbook softmax(q K' / sqrt(d)) V. */
START_TEST(test_scaled_dot_forward)
{
    const size_t P = 5, d = 4, C = 3, n = 3;
    lse_idwnet *net = NULL;
    lse_assert_ok(
        lse_idwnet_new(P, d, C, lse_sim_scaled_dot, NULL, 2, &net, NULL));
    fill_random(lse_idwnet_keys(net), 1, 0.0, 1.0);
    fill_random(lse_idwnet_values(net), 2, 0.0, 1.0);
    gsl_matrix *x = gsl_matrix_alloc(n, d), *logits = gsl_matrix_alloc(n, C);
    fill_random(x, 3, 0.0, 1.0);
    lse_assert_ok(lse_idwnet_forward(net, x, logits, NULL, &model_err));
    const gsl_matrix *k = lse_idwnet_keys(net), *v = lse_idwnet_values(net);
    for (size_t i = 0; i < n; i++) {
        double s[5], mx = -INFINITY, sum = 0.0;
        for (size_t j = 0; j < P; j++) {
            s[j] = 0.0;
            for (size_t c = 0; c < d; c++)
                s[j] += gsl_matrix_get(x, i, c) * gsl_matrix_get(k, j, c);
            s[j] /= 2.0; /* sqrt(4) */
            mx = s[j] > mx ? s[j] : mx;
        }
        for (size_t j = 0; j < P; j++)
            sum += exp(s[j] - mx);
        for (size_t c = 0; c < C; c++) {
            double l = 0.0;
            for (size_t j = 0; j < P; j++)
                l += exp(s[j] - mx) / sum * gsl_matrix_get(v, j, c);
            ck_assert_double_eq_tol(gsl_matrix_get(logits, i, c), l, 1e-13);
        }
    }
    gsl_matrix_free(x);
    gsl_matrix_free(logits);
    lse_idwnet_free(net);
}
END_TEST

START_TEST(test_init_like_paper)
{
    const size_t n = 50, d = 3, P = 4000;
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    fill_random(x, 12, 2.0, 1.5);
    lse_idwnet *net = NULL;
    lse_assert_ok(lse_idwnet_new(P, d, 2, lse_sim_idw, NULL, 8, &net, NULL));
    gsl_matrix_set_all(lse_idwnet_values(net), 0.7);
    lse_assert_ok(lse_idwnet_init(net, x, 0.0, 1, &model_err));
    const gsl_matrix *k = lse_idwnet_keys(net);
    double mean[3], sd[3];
    for (size_t j = 0; j < d; j++) {
        double m = 0.0, v = 0.0;
        for (size_t i = 0; i < n; i++)
            m += gsl_matrix_get(x, i, j);
        m /= (double)n;
        for (size_t i = 0; i < n; i++)
            v += pow(gsl_matrix_get(x, i, j) - m, 2);
        mean[j] = m;
        sd[j] = sqrt(v / (double)n);
        ck_assert_double_eq_tol(gsl_matrix_get(k, 17, j), m, 1e-12);
    }
    ck_assert_double_eq(gsl_matrix_max(lse_idwnet_values(net)), 0.0);
    ck_assert_double_eq(gsl_matrix_min(lse_idwnet_values(net)), 0.0);
    /* noise 0.1: keys ~ N(mean_j, (0.1 sd_j)^2), P = 4000 draws */
    lse_assert_ok(lse_idwnet_init(net, x, 0.1, 2, &model_err));
    for (size_t j = 0; j < d; j++) {
        double m = 0.0, v = 0.0;
        for (size_t i = 0; i < P; i++)
            m += gsl_matrix_get(k, i, j);
        m /= (double)P;
        for (size_t i = 0; i < P; i++)
            v += pow(gsl_matrix_get(k, i, j) - m, 2);
        const double s = sqrt(v / (double)P);
        ck_assert_double_eq_tol(m, mean[j], 0.01 * sd[j]);
        ck_assert_double_eq_tol(s, 0.1 * sd[j], 0.005 * sd[j]);
    }
    gsl_matrix_free(x);
    lse_idwnet_free(net);
}
END_TEST

static int count_epochs(const lse_idwnet *m, size_t epoch, double loss,
                        void *user)
{
    (void)m;
    size_t *seen = user;
    ck_assert(isfinite(loss));
    ck_assert_uint_eq(epoch, *seen + 1);
    *seen = epoch;
    return 0;
}

/* A trained IDW network on 400 digits; shared by the next two tests. */
static lse_idwnet *trained_idw(gsl_matrix **xtr, size_t **ytr,
                               lse_idwnet_train_report *rep)
{
    read_digits(0, 400, xtr, ytr);
    const lse_dist_config cfg = {.p = 2, .eps = 1e-3, .s = 1};
    lse_idwnet *net = NULL;
    lse_assert_ok(lse_idwnet_new(20, 64, 10, lse_sim_idw, &cfg, 4, &net, NULL));
    lse_assert_ok(lse_idwnet_init(net, *xtr, 0.1, 1, &model_err));
    lse_idwnet_train_opts o = lse_idwnet_train_opts_default();
    o.epochs = 20;
    o.lr = 0.03;
    size_t seen = 0;
    o.callback = count_epochs;
    o.user = &seen;
    lse_assert_ok(lse_idwnet_train(net, *xtr, *ytr, &o, rep, &model_err));
    ck_assert_uint_eq(seen, 20);
    ck_assert_uint_eq(rep->epochs, 20);
    ck_assert_uint_eq(rep->steps, 20 * 100);
    return net;
}

START_TEST(test_training_reduces_loss)
{
    gsl_matrix *x = NULL;
    size_t *y = NULL;
    lse_idwnet_train_report rep;
    lse_idwnet *net = trained_idw(&x, &y, &rep);
    /* values 0 at the start: uniform logits, loss log 10 */
    ck_assert_double_eq_tol(rep.loss_before, log(10.0), 1e-12);
    /* measured: 2.3026 -> 0.6988, training accuracy 90.5% */
    ck_assert_msg(rep.loss_after < 0.4 * rep.loss_before, "loss %g -> %g",
                  rep.loss_before, rep.loss_after);
    double loss, acc;
    lse_assert_ok(lse_idwnet_evaluate(net, x, y, &loss, &acc, &model_err));
    ck_assert_double_eq_tol(loss, rep.loss_after, 1e-12);
    ck_assert_double_gt(acc, 0.85);
    free(y);
    gsl_matrix_free(x);
    lse_idwnet_free(net);
}
END_TEST

START_TEST(test_special_case_insertion)
{
    gsl_matrix *x = NULL, *xte = NULL;
    size_t *y = NULL, *yte = NULL;
    lse_idwnet_train_report rep;
    lse_idwnet *net = trained_idw(&x, &y, &rep);
    read_digits(1300, 497, &xte, &yte);
    const size_t n = xte->size1;
    size_t *before = malloc(n * sizeof *before),
           *after = malloc(n * sizeof *after);
    ck_assert_ptr_nonnull(before);
    ck_assert_ptr_nonnull(after);
    lse_assert_ok(lse_idwnet_predict(net, xte, before, &model_err));

    /* already predicted: nothing inserted */
    gsl_vector_view q = gsl_matrix_row(xte, 0);
    double eta = -1.0;
    int inserted = -1;
    lse_assert_ok(lse_idwnet_special_case(net, &q.vector, before[0], 0.1, &eta,
                                          &inserted, &model_err));
    ck_assert_int_eq(inserted, 0);
    ck_assert_double_eq(eta, 0.0);
    ck_assert_uint_eq(lse_idwnet_n_proto(net), 20);

    /* flip test row 0 to another class with margin 0.01 */
    const size_t c = (before[0] + 3) % 10;
    lse_assert_ok(lse_idwnet_special_case(net, &q.vector, c, 0.01, &eta,
                                          &inserted, &model_err));
    ck_assert_int_eq(inserted, 1);
    ck_assert_double_gt(eta, 0.0);
    ck_assert_uint_eq(lse_idwnet_n_proto(net), 21);
    lse_assert_ok(lse_idwnet_predict(net, xte, after, &model_err));
    ck_assert_uint_eq(after[0], c);
    size_t changed = 0;
    for (size_t i = 1; i < n; i++)
        changed += after[i] != before[i];
    /* measured: 0 of the other 496 test predictions change (eta 0.0239) */
    ck_assert_msg(changed <= 2, "%zu other predictions changed", changed);
    /* the defining property of eta: logit_c - max_{k != c} logit_k = margin */
    gsl_matrix_const_view q1 = gsl_matrix_const_submatrix(xte, 0, 0, 1, 64);
    gsl_matrix *l = gsl_matrix_alloc(1, 10);
    lse_assert_ok(lse_idwnet_forward(net, &q1.matrix, l, NULL, &model_err));
    double rival = -INFINITY;
    for (size_t k = 0; k < 10; k++)
        if (k != c && gsl_matrix_get(l, 0, k) > rival)
            rival = gsl_matrix_get(l, 0, k);
    ck_assert_double_eq_tol(gsl_matrix_get(l, 0, c) - rival, 0.01, 1e-10);

    /* the paper's eta (margin 0) gives an exact tie at the query: flip row
     * 1 and check, then the new prototype's value is eta e_c */
    gsl_vector_view q2 = gsl_matrix_row(xte, 1);
    const size_t c2 = (after[1] + 1) % 10;
    lse_assert_ok(lse_idwnet_special_case(net, &q2.vector, c2, 0.0, &eta,
                                          &inserted, &model_err));
    ck_assert_int_eq(inserted, 1);
    gsl_matrix_const_view q2m = gsl_matrix_const_submatrix(xte, 1, 0, 1, 64);
    lse_assert_ok(lse_idwnet_forward(net, &q2m.matrix, l, NULL, &model_err));
    rival = -INFINITY;
    for (size_t k = 0; k < 10; k++)
        if (k != c2 && gsl_matrix_get(l, 0, k) > rival)
            rival = gsl_matrix_get(l, 0, k);
    ck_assert_double_eq_tol(gsl_matrix_get(l, 0, c2), rival, 1e-10);
    const gsl_matrix *v = lse_idwnet_values(net), *k = lse_idwnet_keys(net);
    ck_assert_uint_eq(v->size1, 22);
    for (size_t j = 0; j < 10; j++)
        ck_assert_double_eq(gsl_matrix_get(v, 21, j), j == c2 ? eta : 0.0);
    for (size_t j = 0; j < 64; j++)
        ck_assert_double_eq(gsl_matrix_get(k, 21, j),
                            gsl_matrix_get(xte, 1, j));
    gsl_matrix_free(l);
    free(before);
    free(after);
    free(y);
    free(yte);
    gsl_matrix_free(x);
    gsl_matrix_free(xte);
    lse_idwnet_free(net);
}
END_TEST

START_TEST(test_add_prototype_keeps_old)
{
    lse_idwnet *net = NULL;
    lse_assert_ok(
        lse_idwnet_new(3, 2, 2, lse_sim_neg_dist, NULL, 2, &net, NULL));
    fill_random(lse_idwnet_keys(net), 1, 0.0, 1.0);
    fill_random(lse_idwnet_values(net), 2, 0.0, 1.0);
    gsl_matrix *k0 = gsl_matrix_alloc(3, 2), *v0 = gsl_matrix_alloc(3, 2);
    gsl_matrix_memcpy(k0, lse_idwnet_keys(net));
    gsl_matrix_memcpy(v0, lse_idwnet_values(net));
    gsl_vector *key = gsl_vector_alloc(2), *val = gsl_vector_alloc(2);
    gsl_vector_set(key, 0, 0.4127);
    gsl_vector_set(key, 1, -1.25);
    gsl_vector_set(val, 0, 2.0);
    gsl_vector_set(val, 1, -0.5);
    lse_assert_ok(lse_idwnet_add_prototype(net, key, val, &model_err));
    ck_assert_uint_eq(lse_idwnet_n_proto(net), 4);
    ck_assert_uint_eq(
        lse_node_rows(lse_graph_find_node(lse_idwnet_graph(net), "keys")), 4);
    gsl_matrix_view k3 = gsl_matrix_submatrix(lse_idwnet_keys(net), 0, 0, 3, 2);
    gsl_matrix_view v3 =
        gsl_matrix_submatrix(lse_idwnet_values(net), 0, 0, 3, 2);
    ck_assert(gsl_matrix_equal(&k3.matrix, k0));
    ck_assert(gsl_matrix_equal(&v3.matrix, v0));
    ck_assert_double_eq(gsl_matrix_get(lse_idwnet_keys(net), 3, 0), 0.4127);
    ck_assert_double_eq(gsl_matrix_get(lse_idwnet_values(net), 3, 1), -0.5);
    /* failure leaves the network unchanged */
    gsl_vector_set(key, 1, NAN);
    lse_assert_status(lse_idwnet_add_prototype(net, key, val, &model_err),
                      LSE_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(model_err.message, "key[1]"));
    ck_assert_uint_eq(lse_idwnet_n_proto(net), 4);
    gsl_vector *bad = gsl_vector_alloc(3);
    lse_assert_status(lse_idwnet_add_prototype(net, bad, val, &model_err),
                      LSE_EDIM);
    lse_assert_status(lse_idwnet_add_prototype(net, NULL, val, &model_err),
                      LSE_EFAULT);
    gsl_vector_free(bad);
    gsl_vector_free(key);
    gsl_vector_free(val);
    gsl_matrix_free(k0);
    gsl_matrix_free(v0);
    lse_idwnet_free(net);
}
END_TEST

START_TEST(test_errors)
{
    lse_idwnet *net = NULL;
    lse_error err;
    lse_assert_status(lse_idwnet_new(3, 2, 2, NULL, NULL, 2, &net, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_idwnet_new(3, 2, 2, lse_sim_idw, NULL, 2, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_idwnet_new(0, 2, 2, lse_sim_idw, NULL, 2, &net, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_idwnet_new(3, 2, 2, lse_sim_idw, NULL, 0, &net, &err),
                      LSE_EINVAL);
    lse_assert_status(
        lse_idwnet_new(3, 2, 2, lse_sim_nonlinear, NULL, 2, &net, &err),
        LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "parameter"));
    const lse_dist_config bad = {.p = 2, .eps = -1, .s = 1};
    lse_assert_status(lse_idwnet_new(3, 2, 2, lse_sim_idw, &bad, 2, &net, &err),
                      LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(err.message, "eps"));
    ck_assert_ptr_null(net);

    lse_assert_ok(
        lse_idwnet_new(3, 2, 2, lse_sim_inv_dist, NULL, 2, &net, &err));
    gsl_matrix *x = gsl_matrix_alloc(3, 2), *x3 = gsl_matrix_alloc(3, 3);
    gsl_matrix *l = gsl_matrix_alloc(3, 2), *dk = gsl_matrix_alloc(2, 2);
    fill_random(x, 1, 0, 1);
    fill_random(x3, 1, 0, 1);
    const size_t y[3] = {0, 1, 0}, ybad[3] = {0, 2, 0};
    double loss;
    gsl_matrix_const_view x2 = gsl_matrix_const_submatrix(x, 0, 0, 2, 2);
    lse_assert_status(
        lse_idwnet_loss_grad(net, x, y, &loss, NULL, NULL, &model_err),
        LSE_EDIM); /* 3 rows > batch 2 */
    ck_assert_ptr_nonnull(strstr(model_err.message, "batch"));
    lse_assert_status(lse_idwnet_loss_grad(net, &x2.matrix, ybad + 1, &loss,
                                           NULL, NULL, &model_err),
                      LSE_EINVAL);
    lse_assert_status(
        lse_idwnet_loss_grad(net, &x2.matrix, y, &loss, dk, NULL, &model_err),
        LSE_EDIM);
    lse_assert_status(
        lse_idwnet_loss_grad(net, &x2.matrix, y, NULL, NULL, NULL, &model_err),
        LSE_EFAULT);
    lse_assert_ok(lse_idwnet_loss_grad(net, &x2.matrix, y, &loss, NULL, NULL,
                                       &model_err));
    ck_assert_str_eq(lse_idwnet_errmsg(net), "");
    lse_assert_status(lse_idwnet_forward(net, x3, l, NULL, &model_err),
                      LSE_EDIM);
    lse_assert_status(lse_idwnet_forward(net, x, x3, NULL, &model_err),
                      LSE_EDIM);
    lse_assert_status(
        lse_idwnet_evaluate(net, x, ybad, &loss, NULL, &model_err), LSE_EINVAL);
    lse_assert_status(lse_idwnet_predict(net, x, NULL, &model_err), LSE_EFAULT);
    lse_assert_status(lse_idwnet_init(net, x, -0.1, 1, &model_err), LSE_EDOM);
    lse_assert_status(lse_idwnet_init(net, x3, 0.1, 1, &model_err), LSE_EDIM);
    lse_idwnet_train_opts o = lse_idwnet_train_opts_default();
    o.lr = 0.0;
    lse_assert_status(lse_idwnet_train(net, x, y, &o, NULL, &model_err),
                      LSE_EDOM);
    o = lse_idwnet_train_opts_default();
    o.beta2 = 1.0;
    lse_assert_status(lse_idwnet_train(net, x, y, &o, NULL, &model_err),
                      LSE_EDOM);
    lse_assert_status(lse_idwnet_train(net, x, ybad, NULL, NULL, &model_err),
                      LSE_EINVAL);
    gsl_vector *q = gsl_vector_calloc(2), *q3 = gsl_vector_calloc(3);
    lse_assert_status(
        lse_idwnet_special_case(net, q, 1, 0.0, NULL, NULL, &model_err),
        LSE_EINVAL); /* inv-dist, not idw */
    ck_assert_ptr_nonnull(strstr(model_err.message, "idw"));
    lse_idwnet_free(net);
    lse_assert_ok(lse_idwnet_new(3, 2, 2, lse_sim_idw, NULL, 2, &net, &err));
    lse_assert_status(
        lse_idwnet_special_case(net, q, 2, 0.0, NULL, NULL, &model_err),
        LSE_EINVAL);
    lse_assert_status(
        lse_idwnet_special_case(net, q, 1, -1.0, NULL, NULL, &model_err),
        LSE_EDOM);
    lse_assert_status(
        lse_idwnet_special_case(net, q3, 1, 0.0, NULL, NULL, &model_err),
        LSE_EDIM);
    lse_assert_status(
        lse_idwnet_special_case(net, NULL, 1, 0.0, NULL, NULL, &model_err),
        LSE_EFAULT);
    lse_assert_status(
        lse_idwnet_special_case(NULL, q, 1, 0.0, NULL, NULL, &model_err),
        LSE_EFAULT);
    ck_assert_str_eq(lse_idwnet_errmsg(NULL), "");
    ck_assert_ptr_null(lse_idwnet_keys(NULL));
    ck_assert_uint_eq(lse_idwnet_batch(net), 2);
    ck_assert_uint_eq(lse_idwnet_dim(net), 2);
    ck_assert_uint_eq(lse_idwnet_n_class(net), 2);
    ck_assert_ptr_eq(lse_term_sim(lse_idwnet_term(net)), lse_sim_idw);
    gsl_vector_free(q);
    gsl_vector_free(q3);
    gsl_matrix_free(x);
    gsl_matrix_free(x3);
    gsl_matrix_free(l);
    gsl_matrix_free(dk);
    lse_idwnet_free(net);
    lse_idwnet_free(NULL);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_idwnet_forward(NULL, NULL, NULL, NULL, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_idwnet_forward"));
    ck_assert_int_eq(lse_idwnet_forward(NULL, NULL, NULL, NULL, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_idwnet");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_loss_gradient, 0, 6);
    tcase_add_test(tc, test_idw_softmax_is_shepard);
    tcase_add_test(tc, test_error_channel);
    tcase_add_test(tc, test_scaled_dot_forward);
    tcase_add_test(tc, test_init_like_paper);
    tcase_add_test(tc, test_training_reduces_loss);
    tcase_add_test(tc, test_special_case_insertion);
    tcase_add_test(tc, test_add_prototype_keeps_old);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
