#include <math.h>
#include <string.h>
#include <gsl/gsl_blas.h>

#include "lse_check.h"

/* Streaming attention (lib/attn_stream.c, opts.stream of
 * models/attention.c) against the dense LSE term: energy and every
 * gradient to 1e-12 relative, finite differences, 1 vs 2 threads. Sizes
 * cross the tile edges (128 query rows, 256 key rows) with partial tiles. */

static void fill(gsl_matrix *m, double seed, double amp)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j,
                           amp * sin(seed + 1.37 * (double)i +
                                     0.71 * (double)j * (double)(j + 1) +
                                     0.53 * (double)(i * j * j)));
}

static gsl_matrix *mat(size_t r, size_t c, double seed, double amp)
{
    gsl_matrix *m = gsl_matrix_alloc(r, c);
    ck_assert_ptr_nonnull(m);
    fill(m, seed, amp);
    return m;
}

/* max |a - b| / max |b| */
static double rel_diff(const gsl_matrix *a, const gsl_matrix *b)
{
    ck_assert_uint_eq(a->size1, b->size1);
    ck_assert_uint_eq(a->size2, b->size2);
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            num = fmax(num, fabs(gsl_matrix_get(a, i, j) -
                                 gsl_matrix_get(b, i, j)));
            den = fmax(den, fabs(gsl_matrix_get(b, i, j)));
        }
    return den > 0.0 ? num / den : num;
}

static lse_attention *self_model(size_t n, size_t d, size_t k, unsigned mask,
                                 int stream, double beta, double scale)
{
    gsl_matrix *x = mat(n, d, 0.3, 1.0), *wq = mat(k, d, 1.1, 0.8),
               *wk = mat(k, d, 2.3, 0.7);
    lse_attention_opts o = lse_attention_opts_default();
    const lse_bilinear_config cfg = {.scale = scale};
    o.config = &cfg;
    o.beta = beta;
    o.mask = mask;
    o.stream = stream;
    lse_attention *a = NULL;
    lse_error err;
    const lse_status st = lse_attention_self_new(x, wq, wk, &o, &a, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    gsl_matrix_free(x);
    gsl_matrix_free(wq);
    gsl_matrix_free(wk);
    return a;
}

static const gsl_matrix *grad_of(lse_attention *a, const char *name)
{
    return lse_node_grad(lse_attention_node(a, name));
}

/* Self attention, every mask: stream == dense. */
START_TEST(test_self_matches_dense)
{
    static const unsigned masks[] = {0, LSE_MASK_CAUSAL, LSE_MASK_NO_SELF,
                                     LSE_MASK_CAUSAL | LSE_MASK_NO_SELF};
    static const char *const nodes[] = {"x", "W_Q", "W_K"};
    for (size_t mi = 0; mi < 4; mi++) {
        lse_attention *dn = self_model(300, 6, 5, masks[mi], 0, 1.3, 0.4);
        lse_attention *sn = self_model(300, 6, 5, masks[mi], 1, 1.3, 0.4);
        double ed = 0.0, es = 0.0;
        ck_assert_int_eq(lse_graph_gradient(lse_attention_graph(dn), &ed),
                         LSE_OK);
        ck_assert_int_eq(lse_graph_gradient(lse_attention_graph(sn), &es),
                         LSE_OK);
        ck_assert_msg(fabs(es - ed) <= 1e-12 * fabs(ed),
                      "mask %u: energy %.17g vs %.17g", masks[mi], es, ed);
        for (size_t v = 0; v < 3; v++) {
            const double r = rel_diff(grad_of(sn, nodes[v]),
                                      grad_of(dn, nodes[v]));
            ck_assert_msg(r <= 1e-12, "mask %u: dE/d%s rel diff %g",
                          masks[mi], nodes[v], r);
        }
        ck_assert_ptr_null(lse_attention_softmax(sn));
        ck_assert_ptr_nonnull(lse_attention_softmax(dn));
        lse_attention_free(dn);
        lse_attention_free(sn);
    }
}
END_TEST

/* The kernel itself against a dense term with free keys (dE/dk too),
 * cross shapes n != m, masks on positions, and A V. */
START_TEST(test_kernel_matches_dense)
{
    static const unsigned masks[] = {0, LSE_MASK_CAUSAL,
                                     LSE_MASK_CAUSAL | LSE_MASK_NO_SELF};
    const size_t n = 270, m = 530, d = 7, dv = 3;
    const double beta = 0.9, scale = 0.6;
    for (size_t mi = 0; mi < 3; mi++) {
        gsl_matrix *q = mat(n, d, 0.2, 1.0), *k = mat(m, d, 0.9, 1.2);
        gsl_matrix *v = mat(m, dv, 1.7, 1.0);
        lse_graph *g = lse_graph_new();
        lse_node *qn = NULL, *kn = NULL;
        ck_assert_int_eq(lse_graph_add_node(g, "q", n, d, 0, &qn), LSE_OK);
        ck_assert_int_eq(lse_graph_add_node(g, "k", m, d, 0, &kn), LSE_OK);
        gsl_matrix *qsc = gsl_matrix_alloc(n, d);
        gsl_matrix_memcpy(qsc, q);
        gsl_matrix_scale(qsc, scale); /* dot(a q, k) = a q.k */
        lse_node_set_value(qn, qsc);
        lse_node_set_value(kn, k);
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(qn);
        spec.parent = lse_view_all(kn);
        spec.sim = lse_sim_dot;
        spec.beta = beta;
        spec.mask = masks[mi];
        lse_term *t = NULL;
        ck_assert_int_eq(lse_graph_add_lse(g, "attend", &spec, &t), LSE_OK);
        double ed = 0.0, es = 0.0;
        ck_assert_int_eq(lse_graph_gradient(g, &ed), LSE_OK);
        gsl_matrix *dq = gsl_matrix_calloc(n, d), *dk = gsl_matrix_calloc(m, d);
        lse_error err;
        ck_assert_int_eq(lse_attn_stream(q, k, beta, scale, masks[mi], &es, dq,
                                         dk, &err),
                         LSE_OK);
        ck_assert_msg(fabs(es - ed) <= 1e-12 * fabs(ed), "%.17g vs %.17g", es,
                      ed);
        gsl_matrix *dqd = gsl_matrix_alloc(n, d);
        gsl_matrix_memcpy(dqd, lse_node_grad(qn));
        gsl_matrix_scale(dqd, scale); /* chain rule through a q */
        ck_assert_double_le(rel_diff(dq, dqd), 1e-12);
        ck_assert_double_le(rel_diff(dk, lse_node_grad(kn)), 1e-12);
        /* A V */
        gsl_matrix *av = gsl_matrix_alloc(n, dv), *avd = gsl_matrix_alloc(n, dv);
        double ea = 0.0;
        ck_assert_int_eq(lse_attn_stream_apply(q, k, v, beta, scale, masks[mi],
                                               av, &ea, &err),
                         LSE_OK);
        ck_assert_int_eq(gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0,
                                        lse_term_softmax(t), v, 0.0, avd),
                         0);
        ck_assert_double_le(rel_diff(av, avd), 1e-12);
        ck_assert_double_eq(ea, es);
        gsl_matrix_free(av);
        gsl_matrix_free(avd);
        gsl_matrix_free(dqd);
        gsl_matrix_free(dq);
        gsl_matrix_free(dk);
        gsl_matrix_free(qsc);
        gsl_matrix_free(q);
        gsl_matrix_free(k);
        gsl_matrix_free(v);
        lse_graph_free(g);
    }
}
END_TEST

/* Cross attention model, scaled-dot and dot, and its step with values. */
START_TEST(test_cross_model)
{
    const lse_sim_type *sims[] = {lse_sim_scaled_dot, lse_sim_dot};
    gsl_matrix *q = mat(140, 8, 0.4, 1.0), *k = mat(300, 8, 1.4, 1.0);
    gsl_matrix *v = mat(300, 2, 2.4, 1.0);
    for (size_t si = 0; si < 2; si++) {
        lse_attention *a[2] = {NULL, NULL};
        gsl_matrix *out[2];
        double e[2];
        for (int s = 0; s < 2; s++) {
            lse_attention_opts o = lse_attention_opts_default();
            o.sim = sims[si];
            o.beta = 1.7;
            o.mask = LSE_MASK_CAUSAL;
            o.stream = s;
            lse_error err;
            ck_assert_int_eq(lse_attention_cross_new(q, k, &o, &a[s], &err),
                             LSE_OK);
            ck_assert_int_eq(lse_graph_gradient(lse_attention_graph(a[s]),
                                                &e[s]),
                             LSE_OK);
            out[s] = gsl_matrix_alloc(140, 2);
            const lse_status st = lse_attention_step(a[s], v, out[s], &err);
            ck_assert_msg(st == LSE_OK, "stream %d: %s", s, err.message);
        }
        ck_assert_double_le(fabs(e[1] - e[0]), 1e-12 * fabs(e[0]));
        ck_assert_double_le(rel_diff(grad_of(a[1], "queries"),
                                     grad_of(a[0], "queries")),
                            1e-12);
        ck_assert_double_le(rel_diff(out[1], out[0]), 1e-12);
        for (int s = 0; s < 2; s++) {
            gsl_matrix_free(out[s]);
            lse_attention_free(a[s]);
        }
    }
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(v);
}
END_TEST

/* Finite differences of the streaming graph (x, W_Q, W_K). */
START_TEST(test_stream_gradcheck)
{
    static const unsigned masks[] = {0, LSE_MASK_CAUSAL | LSE_MASK_NO_SELF};
    for (size_t mi = 0; mi < 2; mi++) {
        lse_attention *a = self_model(19, 4, 3, masks[mi], 1, 1.2, 0.5);
        lse_gradcheck res;
        ck_assert_int_eq(lse_graph_check_gradient(lse_attention_graph(a), NULL,
                                                  1e-5, 1.0, &res),
                         LSE_OK);
        ck_assert_uint_gt(res.n_checked, 19 * 4);
        ck_assert_msg(res.max_error < 1e-7, "%s: %g", res.where,
                      res.max_error);
        lse_attention_free(a);
    }
}
END_TEST

/* The same bits on 1 and 2 threads. */
START_TEST(test_threads_same_bits)
{
#ifdef LSE_TEST_OPENMP
    double e[2];
    gsl_matrix *g[2][3];
    static const char *const nodes[] = {"x", "W_Q", "W_K"};
    for (int t = 0; t < 2; t++) {
        lse_set_num_threads(t + 1);
        lse_attention *a = self_model(700, 9, 6, LSE_MASK_CAUSAL, 1, 1.0, 0.3);
        ck_assert_int_eq(lse_graph_gradient(lse_attention_graph(a), &e[t]),
                         LSE_OK);
        for (int v = 0; v < 3; v++) {
            const gsl_matrix *gr = grad_of(a, nodes[v]);
            g[t][v] = gsl_matrix_alloc(gr->size1, gr->size2);
            gsl_matrix_memcpy(g[t][v], gr);
        }
        lse_attention_free(a);
    }
    lse_set_num_threads(0);
    ck_assert(memcmp(&e[0], &e[1], sizeof e[0]) == 0);
    for (int v = 0; v < 3; v++) {
        ck_assert(memcmp(g[0][v]->data, g[1][v]->data,
                         g[0][v]->size1 * g[0][v]->size2 * sizeof(double)) ==
                  0);
        gsl_matrix_free(g[0][v]);
        gsl_matrix_free(g[1][v]);
    }
#endif
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *q = mat(5, 3, 0.1, 1.0), *k = mat(6, 3, 0.2, 1.0);
    gsl_matrix *k4 = mat(6, 4, 0.2, 1.0);
    lse_error err;
    double e = 0.0;
    ck_assert_int_eq(lse_attn_stream(q, k, 1.0, 1.0, 0, NULL, NULL, NULL, &err),
                     LSE_EFAULT);
    ck_assert_int_eq(lse_attn_stream(q, k4, 1.0, 1.0, 0, &e, NULL, NULL, &err),
                     LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "columns differ"));
    ck_assert_int_eq(lse_attn_stream(q, k, 0.0, 1.0, 0, &e, NULL, NULL, &err),
                     LSE_EDOM);
    ck_assert_int_eq(lse_attn_stream(q, k, 1.0, 1.0, 8u, &e, NULL, NULL, &err),
                     LSE_EINVAL);
    gsl_matrix_set(k, 2, 1, NAN);
    ck_assert_int_eq(lse_attn_stream(q, k, 1.0, 1.0, 0, &e, NULL, NULL, &err),
                     LSE_EDOM);
    lse_attention_opts o = lse_attention_opts_default();
    o.stream = 1;
    o.sim = lse_sim_cosine;
    lse_attention *a = NULL;
    ck_assert_int_eq(lse_attention_cross_new(q, k4, &o, &a, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "dot or scaled-dot"));
    o.sim = NULL;
    gsl_matrix *sl = mat(2, 2, 0.5, 1.0), *wk = mat(2, 3, 0.6, 1.0),
               *wq = mat(2, 2, 0.7, 1.0), *tok = mat(5, 3, 0.8, 1.0);
    ck_assert_int_eq(lse_attention_slot_new(tok, sl, wk, wq, &o, &a, &err),
                     LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "does not stream"));
    ck_assert_ptr_null(a);
    gsl_matrix_free(sl);
    gsl_matrix_free(wk);
    gsl_matrix_free(wq);
    gsl_matrix_free(tok);
    gsl_matrix_free(q);
    gsl_matrix_free(k);
    gsl_matrix_free(k4);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("attn_stream");
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_self_matches_dense);
    tcase_add_test(tc, test_kernel_matches_dense);
    tcase_add_test(tc, test_cross_model);
    tcase_add_test(tc, test_stream_gradcheck);
    tcase_add_test(tc, test_threads_same_bits);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
