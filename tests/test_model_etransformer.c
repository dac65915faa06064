#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Energy Transformer block (models/etransformer.c). Small blocks: 4x4
 * images of 2x2 patches (N = 4 tokens of P = 4 pixels), D = 5, 2 heads of
 * k = 3, 4 memories, batch 2, T = 3 steps. */

static lse_et_config small(void)
{
    lse_et_config c = lse_et_config_default();
    c.side = 4;
    c.patch = 2;
    c.dim = 5;
    c.n_heads = 2;
    c.head_dim = 3;
    c.n_memories = 4;
    c.batch = 2;
    c.steps = 3;
    c.alpha = 0.3;
    c.beta_mem = 1.5;
    c.seed = 5;
    return c;
}

static lse_et *make(const lse_et_config *c)
{
    lse_et *et = NULL;
    lse_error err;
    lse_assert_ok(lse_et_new(c, &et, &err));
    return et;
}

static gsl_matrix *randu(size_t r, size_t k, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    gsl_matrix *m = gsl_matrix_alloc(r, k);
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < k; j++)
            gsl_matrix_set(m, i, j, gsl_rng_uniform(rng));
    gsl_rng_free(rng);
    return m;
}

/* move every parameter off its start (so that no gradient is zero by
 * symmetry: mask 0, delta 0, b_dec 0 at the start) */
static void perturb(lse_et *et, unsigned long seed)
{
    gsl_vector *th = gsl_vector_alloc(lse_et_n_params(et));
    lse_assert_ok(lse_et_params_get(et, th, NULL));
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    for (size_t i = 0; i < th->size; i++)
        *gsl_vector_ptr(th, i) += gsl_ran_gaussian(rng, 0.3);
    gsl_rng_free(rng);
    lse_assert_ok(lse_et_params_set(et, th, NULL));
    gsl_vector_free(th);
}

/* hidden: image 0 token 1, image 1 tokens 0 and 3 */
static gsl_matrix *mask2(void)
{
    gsl_matrix *h = gsl_matrix_calloc(2, 4);
    gsl_matrix_set(h, 0, 1, 1);
    gsl_matrix_set(h, 1, 0, 1);
    gsl_matrix_set(h, 1, 3, 1);
    return h;
}

/* dE/dg, dE/dW_Q, dE/dW_K, dE/dmemories of the energy graph against
 * central differences */
START_TEST(test_energy_graph_gradient_fd)
{
    lse_et_config c = small();
    lse_et *et = make(&c);
    perturb(et, 11);
    gsl_matrix *x = randu(8, 5, 3);
    double e;
    lse_assert_ok(lse_et_energy(et, x, &e, NULL, NULL));
    lse_gradcheck res;
    lse_assert_ok(
        lse_graph_check_gradient(lse_et_graph(et), NULL, 1e-5, 1e-4, &res));
    ck_assert_uint_eq(res.n_checked, 8 * 5 + 2 * 6 * 5 + 4 * 5);
    ck_assert_msg(res.max_error < 1e-7, "max relative error %g at %s",
                  res.max_error, res.where);
    gsl_matrix_free(x);
    lse_et_free(et);
}
END_TEST

/* dE(LN(x))/dx = J dE/dg against central differences of lse_et_energy, and
 * the descent direction lowers E: dE/dx . dE/dg = u' J u >= 0 */
START_TEST(test_energy_x_gradient_fd)
{
    lse_et_config c = small();
    lse_et *et = make(&c);
    perturb(et, 12);
    gsl_matrix *x = randu(8, 5, 4), *gx = gsl_matrix_alloc(8, 5);
    double e, ep, em, worst = 0, dot = 0;
    lse_assert_ok(lse_et_energy(et, x, &e, gx, NULL));
    const gsl_matrix *u = lse_node_grad(
        lse_graph_find_node(lse_et_graph(et), "tokens"));
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 5; j++)
            dot += gsl_matrix_get(gx, i, j) * gsl_matrix_get(u, i, j);
    ck_assert_msg(dot > 0, "u' J u = %g", dot);
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 5; j++) {
            const double v = gsl_matrix_get(x, i, j), h = 1e-5;
            gsl_matrix_set(x, i, j, v + h);
            lse_assert_ok(lse_et_energy(et, x, &ep, NULL, NULL));
            gsl_matrix_set(x, i, j, v - h);
            lse_assert_ok(lse_et_energy(et, x, &em, NULL, NULL));
            gsl_matrix_set(x, i, j, v);
            const double fd = (ep - em) / (2 * h), an = gsl_matrix_get(gx, i, j);
            const double r = fabs(fd - an) / fmax(1e-4, fabs(fd));
            worst = fmax(worst, r);
        }
    ck_assert_msg(worst < 1e-7, "max relative error %g", worst);
    gsl_matrix_free(x);
    gsl_matrix_free(gx);
    lse_et_free(et);
}
END_TEST

/* The unrolled loss's gradient (every parameter) against central
 * differences of the loss */
START_TEST(test_loss_gradient_fd)
{
    lse_et_config c = small();
    lse_et *et = make(&c);
    perturb(et, 13);
    gsl_matrix *img = randu(2, 16, 5), *hid = mask2();
    const size_t n = lse_et_n_params(et);
    ck_assert_uint_eq(n, 5 * 4 + 4 * 5 + 5 + 1 + 5 + 2 * 6 * 5 + 4 * 5 +
                             4 * 5 + 4);
    gsl_vector *g = gsl_vector_alloc(n), *th = gsl_vector_alloc(n);
    double l, lp, lm, worst = 0;
    size_t at = 0;
    lse_assert_ok(lse_et_loss(et, img, hid, &l, g, NULL));
    ck_assert(l > 0);
    lse_assert_ok(lse_et_params_get(et, th, NULL));
    for (size_t k = 0; k < n; k++) {
        const double v = gsl_vector_get(th, k), h = 1e-5;
        gsl_vector_set(th, k, v + h);
        lse_assert_ok(lse_et_params_set(et, th, NULL));
        lse_assert_ok(lse_et_loss(et, img, hid, &lp, NULL, NULL));
        gsl_vector_set(th, k, v - h);
        lse_assert_ok(lse_et_params_set(et, th, NULL));
        lse_assert_ok(lse_et_loss(et, img, hid, &lm, NULL, NULL));
        gsl_vector_set(th, k, v);
        const double fd = (lp - lm) / (2 * h);
        const double r = fabs(fd - gsl_vector_get(g, k)) / fmax(1e-3, fabs(fd));
        if (r > worst) {
            worst = r;
            at = k;
        }
    }
    lse_assert_ok(lse_et_params_set(et, th, NULL));
    ck_assert_msg(worst < 1e-6, "max relative error %g at parameter %zu", worst,
                  at);
    gsl_vector_free(g);
    gsl_vector_free(th);
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    lse_et_free(et);
}
END_TEST

/* The energy never rises along the descent (T = 40 steps), and a smaller
 * step takes it less far per step */
START_TEST(test_energy_nonincreasing)
{
    lse_et_config c = small();
    c.steps = 40;
    lse_et *et = make(&c);
    perturb(et, 14);
    gsl_matrix *img = randu(2, 16, 6), *hid = mask2(),
               *out = gsl_matrix_alloc(2, 16);
    gsl_vector *tr = gsl_vector_alloc(41);
    lse_assert_ok(lse_et_complete(et, img, hid, out, tr, NULL));
    for (size_t t = 0; t < 40; t++)
        ck_assert_msg(gsl_vector_get(tr, t + 1) <= gsl_vector_get(tr, t) + 1e-12,
                      "step %zu: %.15g -> %.15g", t, gsl_vector_get(tr, t),
                      gsl_vector_get(tr, t + 1));
    ck_assert(gsl_vector_get(tr, 40) < gsl_vector_get(tr, 0) - 1e-3);
    /* visible pixels are copied */
    for (size_t p = 0; p < 16; p++)
        if (gsl_matrix_get(hid, 0, (p / 8) * 2 + (p % 4) / 2) == 0)
            ck_assert(gsl_matrix_get(out, 0, p) == gsl_matrix_get(img, 0, p));
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    gsl_matrix_free(out);
    gsl_vector_free(tr);
    lse_et_free(et);
}
END_TEST

/* Training on a fixed batch lowers the loss */
START_TEST(test_training_lowers_loss)
{
    lse_et_config c = small();
    lse_et *et = make(&c);
    gsl_matrix *img = randu(2, 16, 7), *hid = mask2();
    double l0 = 0, l = 0;
    for (int s = 0; s < 150; s++) {
        lse_assert_ok(lse_et_train_step(et, img, hid, &l, NULL));
        if (s == 0)
            l0 = l;
    }
    lse_assert_ok(lse_et_loss(et, img, hid, &l, NULL, NULL));
    ck_assert_msg(l < 0.2 * l0, "loss %g -> %g", l0, l);
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    lse_et_free(et);
}
END_TEST

/* Digits: a short training beats the mean training image on held-out
 * images (top-left 4x4 block hidden). */
START_TEST(test_digits_beats_mean_image)
{
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    lse_error err;
    lse_assert_ok(lse_table_read(LSE_DATA_DIR "/digits.csv", NULL, &t, &err));
    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &m, NULL, &err));
    lse_table_free(t);
    lse_set_num_threads(1); /* tiny evaluations: threads only cost */
    lse_et_config c = lse_et_config_default();
    c.batch = 20;
    lse_et *et = make(&c);
    gsl_matrix *img = gsl_matrix_alloc(20, 64), *hid = gsl_matrix_calloc(20, 16),
               *out = gsl_matrix_alloc(20, 64);
    gsl_vector *mean = gsl_vector_calloc(64);
    for (size_t b = 0; b < 20; b++)
        for (size_t k = 0; k < 4; k++)
            gsl_matrix_set(hid, b, (k / 2) * 4 + k % 2, 1);
    for (size_t i = 0; i < 1000; i++)
        for (size_t p = 0; p < 64; p++)
            *gsl_vector_ptr(mean, p) += gsl_matrix_get(m, i, p) / 16000.0;
    for (size_t s = 0; s < 250; s++) {
        for (size_t b = 0; b < 20; b++)
            for (size_t p = 0; p < 64; p++)
                gsl_matrix_set(img, b, p,
                               gsl_matrix_get(m, (s * 20 + b) % 1000, p) / 16);
        lse_assert_ok(lse_et_train_step(et, img, hid, NULL, NULL));
    }
    double se = 0, sm = 0;
    for (size_t first = 1000; first < 1200; first += 20) {
        for (size_t b = 0; b < 20; b++)
            for (size_t p = 0; p < 64; p++)
                gsl_matrix_set(img, b, p, gsl_matrix_get(m, first + b, p) / 16);
        lse_assert_ok(lse_et_complete(et, img, hid, out, NULL, NULL));
        for (size_t b = 0; b < 20; b++)
            for (size_t r = 0; r < 4; r++)
                for (size_t q = 0; q < 4; q++) {
                    const size_t p = r * 8 + q;
                    const double y = gsl_matrix_get(img, b, p);
                    se += pow(gsl_matrix_get(out, b, p) - y, 2);
                    sm += pow(gsl_vector_get(mean, p) - y, 2);
                }
    }
    ck_assert_msg(se < 0.8 * sm, "block %g, mean image %g", se, sm);
    gsl_matrix_free(m);
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    gsl_matrix_free(out);
    gsl_vector_free(mean);
    lse_et_free(et);
    lse_set_num_threads(0);
}
END_TEST

static void expect(lse_status got, lse_status want, const lse_error *e,
                   const char *needle)
{
    ck_assert_int_eq(got, want);
    ck_assert_int_eq(e->status, want);
    ck_assert_msg(strstr(e->message, needle) != NULL, "'%s' lacks '%s'",
                  e->message, needle);
}

START_TEST(test_builder_errors)
{
    lse_et *et = (lse_et *)&et;
    lse_error e;
    lse_et_config c = small();
    expect(lse_et_new(NULL, &et, &e), LSE_EFAULT, &e, "lse_et_new: NULL config");
    ck_assert_ptr_null(et);
    ck_assert_int_eq(lse_et_new(&c, NULL, NULL), LSE_EFAULT);
    const struct {
        size_t field;
        double value;
        lse_status st;
        const char *msg;
    } bad[] = {
        {0, 0, LSE_EDOM, "at least 1"},      {1, 3, LSE_EDOM, "divide"},
        {1, 4, LSE_EDOM, "two patches"},     {2, 1, LSE_EDOM, "at least 2"},
        {3, 65, LSE_EDOM, "at most 64"},     {4, 0, LSE_EDOM, "at least 1"},
        {5, 0, LSE_EDOM, "at least 1"},      {6, 0, LSE_EDOM, "at least 1"},
        {7, 0, LSE_EDOM, "at least 1"},      {8, -1, LSE_EDOM, "alpha -1"},
        {9, NAN, LSE_EDOM, "beta_mem"},  {10, 0, LSE_EDOM, "eps 0"},
        {11, 0, LSE_ERANGE, "overflow"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lse_et_config b = small();
        switch (bad[i].field) {
        case 0: b.side = 0; break;
        case 1: b.patch = (size_t)bad[i].value; break;
        case 2: b.dim = 1; break;
        case 3: b.n_heads = 65; break;
        case 4: b.head_dim = 0; break;
        case 5: b.n_memories = 0; break;
        case 6: b.batch = 0; break;
        case 7: b.steps = 0; break;
        case 8: b.alpha = bad[i].value; break;
        case 9: b.beta_mem = bad[i].value; break;
        case 10: b.eps = 0; break;
        default: b.batch = SIZE_MAX / 4; break;
        }
        expect(lse_et_new(&b, &et, &e), bad[i].st, &e, bad[i].msg);
        ck_assert_ptr_null(et);
    }
    /* call errors */
    et = make(&c);
    gsl_matrix *img = randu(2, 16, 8), *hid = mask2(), *out = gsl_matrix_alloc(2, 16),
               *wrong = gsl_matrix_alloc(3, 16), *none = gsl_matrix_calloc(2, 4);
    double l;
    expect(lse_et_complete(et, wrong, hid, out, NULL, &e), LSE_EDIM, &e,
           "images 3x16");
    gsl_matrix_set(hid, 0, 0, 0.5);
    expect(lse_et_complete(et, img, hid, out, NULL, &e), LSE_EDOM, &e,
           "hidden (1, 1) = 0.5");
    gsl_matrix_set(hid, 0, 0, 0);
    gsl_matrix_set(img, 0, 0, NAN);
    expect(lse_et_loss(et, img, hid, &l, NULL, &e), LSE_ENONFINITE, &e,
           "image 1 pixel 1 is visible");
    gsl_matrix_set(img, 1, 0, NAN); /* hidden: fine */
    gsl_matrix_set(img, 0, 0, 0.5);
    lse_assert_ok(lse_et_complete(et, img, hid, out, NULL, NULL));
    ck_assert(isnan(gsl_matrix_get(out, 1, 0)) == 0);
    expect(lse_et_loss(et, img, hid, &l, NULL, &e), LSE_ENONFINITE, &e,
           "image 2 pixel 1 is hidden");
    gsl_matrix_set(img, 1, 0, 0.5);
    expect(lse_et_loss(et, img, none, &l, NULL, &e), LSE_EDOM, &e,
           "no patch is hidden");
    gsl_vector *v = gsl_vector_alloc(3);
    expect(lse_et_params_get(et, v, &e), LSE_EDIM, &e, "theta has 3");
    expect(lse_et_loss(et, img, hid, &l, v, &e), LSE_EDIM, &e, "grad has 3");
    gsl_vector_free(v);
    v = gsl_vector_alloc(lse_et_n_params(et));
    lse_assert_ok(lse_et_params_get(et, v, NULL));
    gsl_vector_set(v, 2, INFINITY);
    expect(lse_et_params_set(et, v, &e), LSE_ENONFINITE, &e, "entry 3");
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = -1;
    ck_assert_int_eq(lse_et_set_optim(et, &oo, &e), LSE_EDOM);
    expect(lse_et_set_optim(NULL, &oo, &e), LSE_EFAULT, &e, "lse_et_set_optim");
    expect(lse_et_embed(et, img, hid, wrong, &e), LSE_EDIM, &e, "x is 3x16");
    ck_assert_ptr_null(lse_et_graph(NULL));
    ck_assert_uint_eq(lse_et_n_tokens(et), 4);
    ck_assert_uint_eq(lse_et_token_pixels(et), 4);
    ck_assert_uint_eq(lse_et_config_of(et)->dim, 5);
    gsl_vector_free(v);
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    gsl_matrix_free(out);
    gsl_matrix_free(wrong);
    gsl_matrix_free(none);
    lse_et_free(et);
    lse_et_free(NULL);
}
END_TEST

/* lse_et_embed: visible token = W_enc p + pos, hidden = mask + pos */
START_TEST(test_embed_formula)
{
    lse_et_config c = small();
    lse_et *et = make(&c);
    perturb(et, 15);
    gsl_matrix *img = randu(2, 16, 9), *hid = mask2(), *x = gsl_matrix_alloc(8, 5);
    lse_assert_ok(lse_et_embed(et, img, hid, x, NULL));
    gsl_vector *th = gsl_vector_alloc(lse_et_n_params(et));
    lse_assert_ok(lse_et_params_get(et, th, NULL));
    const double *enc = th->data, *pos = enc + 20, *mask = pos + 20;
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 4; t++)
            for (size_t j = 0; j < 5; j++) {
                double v = pos[t * 5 + j];
                if (gsl_matrix_get(hid, b, t) != 0)
                    v += mask[j];
                else
                    for (size_t q = 0; q < 4; q++) {
                        const size_t r = (t / 2) * 2 + q / 2, cc = (t % 2) * 2 + q % 2;
                        v += enc[j * 4 + q] * gsl_matrix_get(img, b, r * 4 + cc);
                    }
                ck_assert_double_eq_tol(gsl_matrix_get(x, b * 4 + t, j), v, 1e-12);
            }
    gsl_vector_free(th);
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    gsl_matrix_free(x);
    lse_et_free(et);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_etransformer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_energy_graph_gradient_fd);
    tcase_add_test(tc, test_energy_x_gradient_fd);
    tcase_add_test(tc, test_loss_gradient_fd);
    tcase_add_test(tc, test_energy_nonincreasing);
    tcase_add_test(tc, test_training_lowers_loss);
    tcase_add_test(tc, test_digits_beats_mean_image);
    tcase_add_test(tc, test_builder_errors);
    tcase_add_test(tc, test_embed_formula);
    suite_add_tcase(s, tc);
    return s;
}
