#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lse_check.h"

/* Loss gradients against central differences of the loss, for every free
 * node (children, parents, parameters, values) and several similarities. */

#define NC 6
#define NP 4
#define D 3

typedef struct lcase {
    const char *name;
    const lse_sim_type *const *sim;
    const void *config;
    size_t n_param;
    size_t rows[2], cols[2];
    double pos; /* > 0: parameter entries made positive (widths) */
} lcase;

static const lse_gaussian_config diag_cfg = {.cov = LSE_COV_DIAG};

static const lcase cases[] = {
    {"dot", &lse_sim_dot, NULL, 0, {0, 0}, {0, 0}, 0},
    {"scaled-dot", &lse_sim_scaled_dot, NULL, 0, {0, 0}, {0, 0}, 0},
    {"cosine", &lse_sim_cosine, NULL, 0, {0, 0}, {0, 0}, 0},
    {"neg-dist", &lse_sim_neg_dist, NULL, 0, {0, 0}, {0, 0}, 0},
    {"idw", &lse_sim_idw, NULL, 0, {0, 0}, {0, 0}, 0},
    {"dar", &lse_sim_dar, NULL, 0, {0, 0}, {0, 0}, 0},
    {"bilinear", &lse_sim_bilinear, NULL, 2, {2, 2}, {D, D}, 0},
    {"gaussian", &lse_sim_gaussian, &diag_cfg, 2, {NP, NP}, {1, D}, 1},
};

typedef struct lsetup {
    lse_graph *g;
    lse_node *x, *p, *par[2], *v;
    lse_term *t;
} lsetup;

static void fill(lse_node *n, double a, double b)
{
    gsl_matrix *m = lse_node_value(n);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, a * sin(b * (double)(i * m->size2 + j) + 0.3 * a));
}

static void build(lsetup *s, const lcase *c, double beta, int self,
                  size_t block)
{
    s->g = lse_graph_new();
    lse_graph_set_block_rows(s->g, block);
    lse_assert_ok(lse_graph_add_node(s->g, "x", NC, D, 0, &s->x));
    lse_assert_ok(lse_graph_add_node(s->g, "p", NP, D, LSE_NODE_PARAM, &s->p));
    lse_assert_ok(lse_graph_add_node(s->g, "v", NP, 2, LSE_NODE_PARAM, &s->v));
    fill(s->x, 0.8, 1.3);
    fill(s->p, 0.9, 2.1);
    fill(s->v, 1.1, 0.7);
    s->par[0] = s->par[1] = NULL;
    for (size_t k = 0; k < c->n_param; k++) {
        char name[24];
        snprintf(name, sizeof name, "th%zu", k);
        lse_assert_ok(lse_graph_add_node(s->g, name, c->rows[k], c->cols[k],
                                         LSE_NODE_PARAM, &s->par[k]));
        fill(s->par[k], 0.7, 1.7 + (double)k);
        if (c->pos > 0 && k == 1) { /* widths of the gaussian */
            gsl_matrix *m = lse_node_value(s->par[k]);
            for (size_t i = 0; i < m->size1; i++)
                for (size_t j = 0; j < m->size2; j++)
                    gsl_matrix_set(m, i, j, 0.8 + 0.3 * fabs(gsl_matrix_get(m, i, j)));
        }
    }
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(s->x);
    spec.parent = self ? lse_view_rows(s->x, 0, NP) : lse_view_all(s->p);
    spec.sim = *c->sim;
    spec.config = c->config;
    spec.param = s->par;
    spec.beta = beta;
    lse_assert_ok(lse_graph_add_lse(s->g, "t", &spec, &s->t));
}

typedef lse_status (*loss_fn)(lsetup *s, int want_grad, double *l);

static size_t labels[NC] = {0, 3, 1, LSE_LOSS_IGNORE, 2, 1};
static gsl_vector *wts;

static lse_status xent(lsetup *s, int want_grad, double *l)
{
    return lse_loss_xent(s->t, labels, wts, 0.7, want_grad, l);
}

static gsl_matrix *target;

static lse_status recon(lsetup *s, int want_grad, double *l)
{
    return lse_loss_recon(s->t, lse_view_all(s->v), target, wts, 1.3, want_grad, l);
}

static size_t rlabels[NC] = {0, 1, 1, LSE_LOSS_IGNORE, 0, 1};

static lse_status readout(lsetup *s, int want_grad, double *l)
{
    return lse_loss_readout_xent(s->t, lse_view_all(s->v), rlabels, wts, 0.9,
                                 want_grad, l, NULL);
}

static const loss_fn losses[3] = {xent, recon, readout};
static const char *const loss_names[3] = {"xent", "recon", "readout-xent"};

/* max relative error of the analytic gradient over every free entry */
static double fd_check(lsetup *s, loss_fn f, size_t *n_checked)
{
    lse_assert_ok(lse_graph_zero_grad(s->g));
    double l0;
    lse_assert_ok(f(s, 1, &l0));
    ck_assert(isfinite(l0));
    double worst = 0.0;
    *n_checked = 0;
    for (size_t k = 0; k < lse_graph_n_nodes(s->g); k++) {
        lse_node *n = lse_graph_node(s->g, k);
        if (lse_node_is_clamped(n))
            continue;
        gsl_matrix *val = lse_node_value(n);
        const gsl_matrix *gr = lse_node_grad(n);
        for (size_t i = 0; i < val->size1; i++)
            for (size_t j = 0; j < val->size2; j++) {
                const double x0 = gsl_matrix_get(val, i, j), h = 1e-6;
                double lp, lm;
                gsl_matrix_set(val, i, j, x0 + h);
                lse_assert_ok(f(s, 0, &lp));
                gsl_matrix_set(val, i, j, x0 - h);
                lse_assert_ok(f(s, 0, &lm));
                gsl_matrix_set(val, i, j, x0);
                const double num = (lp - lm) / (2 * h), an = gsl_matrix_get(gr, i, j);
                const double err =
                    fabs(an - num) / fmax(1.0, fmax(fabs(an), fabs(num)));
                if (err > worst)
                    worst = err;
                (*n_checked)++;
            }
    }
    return worst;
}

static void setup_data(void)
{
    wts = gsl_vector_alloc(NC);
    for (size_t c = 0; c < NC; c++)
        gsl_vector_set(wts, c, 0.5 + 0.25 * (double)c);
    target = gsl_matrix_alloc(NC, 2);
    for (size_t c = 0; c < NC; c++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(target, c, j, cos(1.9 * c + 0.8 * j));
    gsl_matrix_set(target, 2, 1, NAN); /* not scored */
}

static void free_data(void)
{
    gsl_vector_free(wts);
    gsl_matrix_free(target);
}

START_TEST(test_fd_every_similarity)
{
    setup_data();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int which = 0; which < 3; which++) {
            lsetup s;
            build(&s, &cases[i], 1.7, 0, 0);
            size_t n;
            const double err = fd_check(&s, losses[which], &n);
            ck_assert_msg(err < 1e-6, "%s %s: error %g", cases[i].name,
                          loss_names[which], err);
            /* x, p, v and the parameters */
            ck_assert_uint_ge(n, NC * D + NP * D + NP * 2);
            lse_graph_free(s.g);
        }
    }
    free_data();
}
END_TEST

START_TEST(test_self_attention_and_blocks)
{
    /* child and parent views on one node; blocks of 2 rows give the
     * gradients of one block */
    setup_data();
    for (int self = 0; self < 2; self++) {
        lsetup s, b;
        build(&s, &cases[6], 0.9, self, 0);
        build(&b, &cases[6], 0.9, self, 2);
        size_t n;
        ck_assert_double_lt(fd_check(&s, xent, &n), 1e-6);
        ck_assert_double_lt(fd_check(&s, recon, &n), 1e-6);
        ck_assert_double_lt(fd_check(&b, xent, &n), 1e-6);
        ck_assert_double_lt(fd_check(&b, readout, &n), 1e-6);
        for (int which = 0; which < 3; which++) {
            double ls, lb;
            lse_assert_ok(lse_graph_zero_grad(s.g));
            lse_assert_ok(lse_graph_zero_grad(b.g));
            lse_assert_ok(losses[which](&s, 1, &ls));
            lse_assert_ok(losses[which](&b, 1, &lb));
            ck_assert_double_eq_tol(ls, lb, 1e-12);
            for (size_t k = 0; k < lse_graph_n_nodes(s.g); k++) {
                const gsl_matrix *gs = lse_node_grad(lse_graph_node(s.g, k));
                const gsl_matrix *gb = lse_node_grad(lse_graph_node(b.g, k));
                for (size_t i = 0; i < gs->size1; i++)
                    for (size_t j = 0; j < gs->size2; j++)
                        ck_assert_double_eq_tol(gsl_matrix_get(gs, i, j),
                                                gsl_matrix_get(gb, i, j), 1e-12);
            }
        }
        lse_graph_free(s.g);
        lse_graph_free(b.g);
    }
    free_data();
}
END_TEST

START_TEST(test_xent_values_and_combination)
{
    setup_data();
    lsetup s;
    build(&s, &cases[0], 1.7, 0, 0);
    /* the value: -sum w log A(c, y) from the term's softmax */
    double e, l;
    lse_assert_ok(lse_graph_energy(s.g, &e));
    const gsl_matrix *a = lse_term_softmax(s.t);
    double want = 0.0;
    for (size_t c = 0; c < NC; c++)
        if (labels[c] != LSE_LOSS_IGNORE)
            want -= gsl_vector_get(wts, c) * log(gsl_matrix_get(a, c, labels[c]));
    lse_assert_ok(lse_loss_xent(s.t, labels, wts, 0.7, 0, &l));
    ck_assert_double_eq_tol(l, 0.7 * want, 1e-12);
    /* energy gradient + loss gradient = the sum of the two */
    lse_assert_ok(lse_graph_gradient(s.g, &e));
    gsl_matrix *ge = gsl_matrix_alloc(NP, D);
    gsl_matrix_memcpy(ge, lse_node_grad(s.p));
    lse_assert_ok(lse_graph_zero_grad(s.g));
    lse_assert_ok(lse_loss_xent(s.t, labels, wts, 0.7, 1, NULL));
    gsl_matrix *gl = gsl_matrix_alloc(NP, D);
    gsl_matrix_memcpy(gl, lse_node_grad(s.p));
    lse_assert_ok(lse_graph_gradient(s.g, &e));
    lse_assert_ok(lse_loss_xent(s.t, labels, wts, 0.7, 1, NULL));
    for (size_t i = 0; i < NP; i++)
        for (size_t j = 0; j < D; j++)
            ck_assert_double_eq_tol(gsl_matrix_get(lse_node_grad(s.p), i, j),
                                    gsl_matrix_get(ge, i, j) + gsl_matrix_get(gl, i, j),
                                    1e-12);
    /* errors */
    size_t bad[NC] = {0, 0, 0, 0, 0, NP};
    lse_assert_status(lse_loss_xent(s.t, bad, NULL, 1.0, 0, &l), LSE_ERANGE);
    gsl_vector *w3 = gsl_vector_alloc(3);
    gsl_vector_set_all(w3, 1.0);
    lse_assert_status(lse_loss_xent(s.t, labels, w3, 1.0, 0, &l), LSE_EDIM);
    gsl_vector_free(w3);
    lse_assert_status(lse_loss_xent(s.t, NULL, NULL, 1.0, 0, &l), LSE_EFAULT);
    lse_assert_status(lse_loss_xent(s.t, labels, NULL, NAN, 0, &l), LSE_EDOM);
    gsl_matrix *t3 = gsl_matrix_alloc(NC, 3);
    gsl_matrix_set_zero(t3);
    lse_assert_status(lse_loss_recon(s.t, lse_view_all(s.v), t3, NULL, 1.0, 0, &l),
                      LSE_EDIM);
    /* default values = the parents (dim 3) */
    lse_assert_ok(lse_loss_recon(s.t, lse_view_all(NULL), t3, NULL, 1.0, 0, &l));
    ck_assert(isfinite(l) && l > 0.0);
    gsl_matrix_free(t3);
    lse_term *q;
    const lse_view vx = lse_view_all(s.x);
    lse_assert_ok(lse_graph_add_custom(s.g, "q", lse_custom_quadratic, NULL, &vx, 1, &q));
    lse_assert_status(lse_loss_xent(q, labels, NULL, 1.0, 0, &l), LSE_ENOTSUP);
    gsl_matrix_free(ge);
    gsl_matrix_free(gl);
    lse_graph_free(s.g);

    /* a label on a masked pair */
    lse_graph *g = lse_graph_new();
    lse_node *x;
    lse_assert_ok(lse_graph_add_node(g, "x", 3, 2, 0, &x));
    fill(x, 1.0, 0.5);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = spec.parent = lse_view_all(x);
    spec.sim = lse_sim_dot;
    spec.mask = LSE_MASK_CAUSAL;
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "self", &spec, &t));
    size_t lab[3] = {0, 1, 2};
    lse_assert_ok(lse_loss_xent(t, lab, NULL, 1.0, 1, &l));
    size_t lab2[3] = {1, 1, 2}; /* row 0 cannot see parent 1 */
    lse_assert_status(lse_loss_xent(t, lab2, NULL, 1.0, 0, &l), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(lse_graph_errmsg(g), "masked"));
    lse_graph_free(g);
    free_data();
}
END_TEST

START_TEST(test_readout_xent_values)
{
    /* L = sum w (lse(R_c) - R_c,y) with R = A V, the logits returned */
    setup_data();
    lsetup s;
    build(&s, &cases[4], 1.3, 0, 0);
    double e, l;
    lse_assert_ok(lse_graph_energy(s.g, &e));
    const gsl_matrix *a = lse_term_softmax(s.t);
    const gsl_matrix *v = lse_node_value(s.v);
    gsl_matrix *r = gsl_matrix_alloc(NC, 2);
    lse_assert_ok(lse_loss_readout_xent(s.t, lse_view_all(s.v), rlabels, wts,
                                        0.9, 0, &l, r));
    double want = 0.0;
    for (size_t c = 0; c < NC; c++) {
        double rc[2];
        for (size_t k = 0; k < 2; k++) {
            rc[k] = 0.0;
            for (size_t p = 0; p < NP; p++)
                rc[k] += gsl_matrix_get(a, c, p) * gsl_matrix_get(v, p, k);
            ck_assert_double_eq_tol(gsl_matrix_get(r, c, k), rc[k], 1e-14);
        }
        if (rlabels[c] != LSE_LOSS_IGNORE)
            want += gsl_vector_get(wts, c) *
                    (log(exp(rc[0]) + exp(rc[1])) - rc[rlabels[c]]);
    }
    ck_assert_double_eq_tol(l, 0.9 * want, 1e-12);
    /* errors: a class out of range, logits of the wrong shape, values
     * with the wrong number of rows */
    size_t bad[NC] = {0, 0, 2, 0, 0, 0};
    lse_assert_status(lse_loss_readout_xent(s.t, lse_view_all(s.v), bad, NULL,
                                            1.0, 0, &l, NULL),
                      LSE_ERANGE);
    gsl_matrix *r3 = gsl_matrix_alloc(NC, 3);
    lse_assert_status(lse_loss_readout_xent(s.t, lse_view_all(s.v), rlabels,
                                            NULL, 1.0, 0, &l, r3),
                      LSE_EDIM);
    lse_assert_status(lse_loss_readout_xent(s.t, lse_view_all(s.x), rlabels,
                                            NULL, 1.0, 0, &l, NULL),
                      LSE_EDIM);
    lse_assert_status(lse_loss_readout_xent(s.t, lse_view_all(s.v), NULL, NULL,
                                            1.0, 0, &l, NULL),
                      LSE_EFAULT);
    lse_assert_status(lse_loss_readout_xent(s.t, lse_view_all(s.v), rlabels,
                                            NULL, INFINITY, 0, &l, NULL),
                      LSE_EDOM);
    gsl_matrix_free(r3);
    gsl_matrix_free(r);
    lse_graph_free(s.g);
    free_data();
}
END_TEST

START_TEST(test_train_classifier)
{
    /* a prototype classifier trained on the cross-entropy alone with Adam
     * and mini-batches: 3 classes in 2-D, one learned prototype each */
    const size_t n = 60, batch = 12;
    gsl_matrix *data = gsl_matrix_alloc(n, 2), *lab = gsl_matrix_alloc(n, 1);
    for (size_t i = 0; i < n; i++) {
        const size_t y = i % 3;
        gsl_matrix_set(data, i, 0, 2.0 * cos(2.1 * y) + 0.4 * sin(7.3 * i));
        gsl_matrix_set(data, i, 1, 2.0 * sin(2.1 * y) + 0.4 * cos(5.1 * i));
        gsl_matrix_set(lab, i, 0, (double)y);
    }
    lse_graph *g = lse_graph_new();
    lse_node *x, *p;
    lse_assert_ok(lse_graph_add_node(g, "x", batch, 2, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "protos", 3, 2, LSE_NODE_PARAM, &p));
    gsl_matrix_set(lse_node_value(p), 0, 0, 0.1); /* all near the origin */
    gsl_matrix_set(lse_node_value(p), 1, 1, 0.1);
    gsl_matrix_set(lse_node_value(p), 2, 0, -0.1);
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(p);
    spec.sim = lse_sim_neg_dist;
    lse_term *t;
    lse_assert_ok(lse_graph_add_lse(g, "classify", &spec, &t));
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.05;
    lse_optim *opt = lse_optim_new(g, &oo);
    lse_batcher *b;
    lse_assert_ok(lse_batcher_new(n, batch, 3, 1, &b, NULL));
    gsl_matrix *yb = gsl_matrix_alloc(batch, 1);
    size_t yl[12];
    double first = 0.0, last = 0.0;
    for (size_t step = 0; step < 300; step++) {
        lse_assert_ok(lse_batcher_next(b));
        lse_assert_ok(lse_batcher_gather(b, data, lse_node_value(x)));
        lse_assert_ok(lse_batcher_gather(b, lab, yb));
        for (size_t i = 0; i < batch; i++)
            yl[i] = (size_t)gsl_matrix_get(yb, i, 0);
        double l;
        lse_assert_ok(lse_graph_zero_grad(g));
        lse_assert_ok(lse_loss_xent(t, yl, NULL, 1.0 / batch, 1, &l));
        lse_assert_ok(lse_optim_step(opt));
        if (step < 10)
            first += l / 10;
        if (step >= 290)
            last += l / 10;
    }
    ck_assert_double_lt(last, 0.1 * first);
    /* every training point goes to its class's prototype */
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        double bd = INFINITY;
        for (size_t k = 0; k < 3; k++) {
            const double dx = gsl_matrix_get(data, i, 0) - gsl_matrix_get(lse_node_value(p), k, 0);
            const double dy = gsl_matrix_get(data, i, 1) - gsl_matrix_get(lse_node_value(p), k, 1);
            if (dx * dx + dy * dy < bd) {
                bd = dx * dx + dy * dy;
                best = k;
            }
        }
        ck_assert_uint_eq(best, i % 3);
    }
    gsl_matrix_free(yb);
    lse_batcher_free(b);
    lse_optim_free(opt);
    lse_graph_free(g);
    gsl_matrix_free(data);
    gsl_matrix_free(lab);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fd_every_similarity);
    tcase_add_test(tc, test_self_attention_and_blocks);
    tcase_add_test(tc, test_xent_values_and_combination);
    tcase_add_test(tc, test_readout_xent_values);
    tcase_add_test(tc, test_train_classifier);
    suite_add_tcase(s, tc);
    return s;
}
