#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

/* Heads terms (lib/heads.c): the energy and every gradient equal those of
 * H separate single-head LSE terms over the projected similarity; central
 * differences for every node and parameter, with every base, shared keys
 * and queries, context, masks and losses; thread counts; solvers and the
 * optimizer; refused inputs. */

#define NC 7
#define NP 6
#define DC 5
#define DP 4
#define DX 2
#define K 3

typedef struct hcase {
    const char *name;
    const lse_sim_type *const *base;
    const void *config;
    int context;                  /* the base reads a context */
    size_t n_param;               /* base parameters */
    size_t rows[3], cols[3];      /* per head */
    int pos[3];                   /* entries made positive (widths) */
    int self;                     /* parents from the child node */
} hcase;

static const lse_gaussian_config diag_cfg = {.cov = LSE_COV_DIAG};
static const lse_dar_config dar_cfg = {.lambda = 0.3, .alpha = 4, .rho = 0.2,
                                       .beta = 0, .steps = 0,
                                       .gate = LSE_GATE_SIGMOID, .eps = 1e-12};

static const hcase cases[] = {
    {"scaled-dot", &lse_sim_scaled_dot, NULL, 0, 0, {0}, {0}, {0}, 0},
    {"dot", &lse_sim_dot, NULL, 0, 0, {0}, {0}, {0}, 0},
    {"cosine", &lse_sim_cosine, NULL, 0, 0, {0}, {0}, {0}, 0},
    {"neg-dist", &lse_sim_neg_dist, NULL, 0, 0, {0}, {0}, {0}, 0},
    {"idw", &lse_sim_idw, NULL, 0, 0, {0}, {0}, {0}, 0},
    {"dar", &lse_sim_dar, &dar_cfg, 0, 0, {0}, {0}, {0}, 0},
    {"bilinear", &lse_sim_bilinear, NULL, 0, 2, {2, 2}, {K, K}, {0}, 0},
    {"gaussian", &lse_sim_gaussian, &diag_cfg, 0, 2, {NP, NP}, {1, K},
     {0, 1}, 0},
    {"lingauss", &lse_sim_lingauss, &diag_cfg, 1, 3, {NP, NP, NP},
     {1, K * DX, K}, {0, 0, 1}, 0},
    {"causal self scaled-dot", &lse_sim_scaled_dot, NULL, 0, 0, {0}, {0},
     {0}, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

typedef struct hsetup {
    lse_graph *g;
    lse_node *x, *p, *ctx, *wc, *wp, *bp[3];
    lse_term *t;
} hsetup;

static void fill(lse_node *n, double a, double b)
{
    gsl_matrix *m = lse_node_value(n);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j,
                           a * sin(b * (double)(i * m->size2 + j) + 0.3 * a));
}

static void positive(lse_node *n)
{
    gsl_matrix *m = lse_node_value(n);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, 0.8 + 0.3 * fabs(gsl_matrix_get(m, i, j)));
}

/* Nodes of a heads term (H heads, share flags) or, with split, of H
 * single-head LSE terms over project with one node per head. */
static void build_nodes(hsetup *s, const hcase *c, size_t H, unsigned share)
{
    s->g = lse_graph_new();
    const size_t dp = c->self ? DC : DP;
    lse_assert_ok(lse_graph_add_node(s->g, "x", NC, DC, 0, &s->x));
    lse_assert_ok(lse_graph_add_node(s->g, "p", NP, dp, LSE_NODE_PARAM, &s->p));
    fill(s->x, 0.8, 1.3);
    fill(s->p, 0.9, 2.1);
    s->ctx = NULL;
    if (c->context) {
        lse_assert_ok(lse_graph_add_node(s->g, "ctx", NC, DX, 0, &s->ctx));
        fill(s->ctx, 0.6, 0.9);
    }
    const size_t hc = (share & LSE_HEADS_SHARE_CHILD) ? 1 : H;
    const size_t hp = (share & LSE_HEADS_SHARE_PARENT) ? 1 : H;
    lse_assert_ok(lse_graph_add_node(s->g, "Wc", hc * K, DC, LSE_NODE_PARAM, &s->wc));
    lse_assert_ok(lse_graph_add_node(s->g, "Wp", hp * K, dp, LSE_NODE_PARAM, &s->wp));
    fill(s->wc, 0.7, 0.37);
    fill(s->wp, 0.6, 0.53);
    for (size_t i = 0; i < 3; i++)
        s->bp[i] = NULL;
    for (size_t i = 0; i < c->n_param; i++) {
        char nm[24];
        snprintf(nm, sizeof nm, "b%zu", i);
        lse_assert_ok(lse_graph_add_node(s->g, nm, H * c->rows[i], c->cols[i],
                                         LSE_NODE_PARAM, &s->bp[i]));
        fill(s->bp[i], 0.5, 1.1 + (double)i);
        if (c->pos[i])
            positive(s->bp[i]);
    }
}

static lse_heads_spec spec_of(const hsetup *s, const hcase *c, size_t H,
                              unsigned share)
{
    lse_heads_spec sp = lse_heads_spec_default();
    sp.child = lse_view_all(s->x);
    sp.parent = c->self ? lse_view_all(s->x) : lse_view_all(s->p);
    sp.context = lse_view_all(s->ctx);
    sp.n_heads = H;
    sp.share = share;
    sp.base = *c->base;
    sp.base_config = c->config;
    sp.w_child = s->wc;
    sp.w_parent = s->wp;
    sp.base_param = s->bp;
    sp.beta = 1.3;
    sp.mask = c->self ? LSE_MASK_CAUSAL : 0;
    return sp;
}

static void build(hsetup *s, const hcase *c, size_t H, unsigned share)
{
    build_nodes(s, c, H, share);
    lse_heads_spec sp = spec_of(s, c, H, share);
    lse_status st = lse_graph_add_heads(s->g, "heads", &sp, &s->t);
    ck_assert_msg(st == LSE_OK, "%s: %s", c->name, lse_graph_errmsg(s->g));
}

/* The same model as H LSE terms over project in a second graph whose
 * parameter nodes are copies of each head's rows. */
typedef struct split {
    lse_graph *g;
    lse_node *x, *p, *ctx, *wc[4], *wp[4], *bp[4][3];
} split;

static lse_node *rows_copy(lse_graph *g, const char *nm, lse_node *src,
                           size_t r0, size_t nr, unsigned flags)
{
    lse_node *n;
    const size_t d = lse_node_dim(src);
    lse_assert_ok(lse_graph_add_node(g, nm, nr, d, flags, &n));
    gsl_matrix_view v = gsl_matrix_submatrix(lse_node_value(src), r0, 0, nr, d);
    gsl_matrix_memcpy(lse_node_value(n), &v.matrix);
    return n;
}

static void build_split(split *q, const hsetup *s, const hcase *c, size_t H,
                        unsigned share)
{
    q->g = lse_graph_new();
    q->x = rows_copy(q->g, "x", s->x, 0, NC, 0);
    q->p = rows_copy(q->g, "p", s->p, 0, NP, LSE_NODE_PARAM);
    q->ctx = s->ctx != NULL ? rows_copy(q->g, "ctx", s->ctx, 0, NC, 0) : NULL;
    static lse_project_config pc[4];
    for (size_t h = 0; h < H; h++) {
        char nm[48];
        snprintf(nm, sizeof nm, "Wc%zu", h);
        const size_t rc = (share & LSE_HEADS_SHARE_CHILD) ? 0 : h * K;
        const size_t rp = (share & LSE_HEADS_SHARE_PARENT) ? 0 : h * K;
        q->wc[h] = rows_copy(q->g, nm, s->wc, rc, K, LSE_NODE_PARAM);
        snprintf(nm, sizeof nm, "Wp%zu", h);
        q->wp[h] = rows_copy(q->g, nm, s->wp, rp, K, LSE_NODE_PARAM);
        lse_node *par[6] = {q->wc[h], q->wp[h], NULL, NULL, NULL, NULL};
        for (size_t i = 0; i < c->n_param; i++) {
            snprintf(nm, sizeof nm, "b%zu_%zu", h, i);
            q->bp[h][i] = rows_copy(q->g, nm, s->bp[i], h * c->rows[i],
                                    c->rows[i], LSE_NODE_PARAM);
            par[2 + i] = q->bp[h][i];
        }
        pc[h].base = *c->base;
        pc[h].base_config = c->config;
        lse_term_spec ts = lse_term_spec_default();
        ts.child = lse_view_all(q->x);
        ts.parent = c->self ? lse_view_all(q->x) : lse_view_all(q->p);
        ts.context = lse_view_all(q->ctx);
        ts.sim = lse_sim_project;
        ts.config = &pc[h];
        ts.param = par;
        ts.beta = 1.3;
        ts.mask = c->self ? LSE_MASK_CAUSAL : 0;
        snprintf(nm, sizeof nm, "head%zu", h);
        lse_status st = lse_graph_add_lse(q->g, nm, &ts, NULL);
        ck_assert_msg(st == LSE_OK, "%s: %s", c->name, lse_graph_errmsg(q->g));
    }
}

static double max_rel(const gsl_matrix *a, const gsl_matrix *b)
{
    double m = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            const double x = gsl_matrix_get(a, i, j), y = gsl_matrix_get(b, i, j);
            const double e = fabs(x - y) / fmax(1.0, fabs(y));
            if (e > m)
                m = e;
        }
    return m;
}

static const unsigned shares[] = {0, LSE_HEADS_SHARE_PARENT,
                                  LSE_HEADS_SHARE_CHILD,
                                  LSE_HEADS_SHARE_CHILD | LSE_HEADS_SHARE_PARENT};

START_TEST(test_equals_separate_heads)
{
    const size_t H = 3;
    for (size_t k = 0; k < N_CASES; k++)
        for (size_t m = 0; m < 4; m++) {
            const hcase *c = &cases[k];
            hsetup s;
            build(&s, c, H, shares[m]);
            split q;
            build_split(&q, &s, c, H, shares[m]);
            double e1, e2;
            lse_assert_ok(lse_graph_gradient(s.g, &e1));
            lse_assert_ok(lse_graph_gradient(q.g, &e2));
            ck_assert_msg(fabs(e1 - e2) <= 1e-12 * fmax(1.0, fabs(e2)),
                          "%s share %u: %.17g vs %.17g", c->name, shares[m],
                          e1, e2);
            ck_assert_msg(fabs(lse_term_energy(s.t) - e1) == 0.0, "term energy");
            ck_assert(max_rel(lse_node_grad(s.x), lse_node_grad(q.x)) <= 1e-12);
            ck_assert(max_rel(lse_node_grad(s.p), lse_node_grad(q.p)) <= 1e-12);
            if (s.ctx != NULL)
                ck_assert(max_rel(lse_node_grad(s.ctx), lse_node_grad(q.ctx)) <=
                          1e-12);
            /* W grads: each head's rows, or the sum over heads if shared */
            for (int side = 0; side < 2; side++) {
                const int sh = side == 0 ? (shares[m] & LSE_HEADS_SHARE_CHILD)
                                         : (shares[m] & LSE_HEADS_SHARE_PARENT);
                lse_node *w = side == 0 ? s.wc : s.wp;
                gsl_matrix *sum = gsl_matrix_calloc(K, lse_node_dim(w));
                for (size_t h = 0; h < H; h++) {
                    const gsl_matrix *gh =
                        lse_node_grad(side == 0 ? q.wc[h] : q.wp[h]);
                    if (sh) {
                        gsl_matrix_add(sum, gh);
                        continue;
                    }
                    gsl_matrix_const_view v = gsl_matrix_const_submatrix(
                        lse_node_grad(w), h * K, 0, K, lse_node_dim(w));
                    ck_assert_msg(max_rel(&v.matrix, gh) <= 1e-12,
                                  "%s: W grad of head %zu", c->name, h);
                }
                if (sh)
                    ck_assert_msg(max_rel(lse_node_grad(w), sum) <= 1e-12,
                                  "%s: shared W grad", c->name);
                gsl_matrix_free(sum);
            }
            for (size_t i = 0; i < c->n_param; i++)
                for (size_t h = 0; h < H; h++) {
                    gsl_matrix_const_view v = gsl_matrix_const_submatrix(
                        lse_node_grad(s.bp[i]), h * c->rows[i], 0, c->rows[i],
                        c->cols[i]);
                    ck_assert_msg(max_rel(&v.matrix, lse_node_grad(q.bp[h][i])) <=
                                      1e-12,
                                  "%s: base param %zu head %zu", c->name, i, h);
                }
            lse_graph_free(s.g);
            lse_graph_free(q.g);
        }
}
END_TEST

START_TEST(test_fd_every_node)
{
    for (size_t k = 0; k < N_CASES; k++)
        for (size_t m = 0; m < 4; m++) {
            const hcase *c = &cases[k];
            hsetup s;
            build(&s, c, 2, shares[m]);
            lse_gradcheck r;
            lse_assert_ok(lse_graph_check_gradient(s.g, NULL, 1e-6, 1.0, &r));
            ck_assert_msg(r.max_error < 1e-6, "%s share %u: %g at %s (%g vs %g)",
                          c->name, shares[m], r.max_error, r.where, r.analytic,
                          r.numeric);
            ck_assert(r.n_checked > 0);
            lse_graph_free(s.g);
        }
}
END_TEST

/* Central differences of a loss value over every free entry. */
typedef lse_status (*loss_fn)(lse_term *t, void *u, int want, double *l);

static double fd_loss(lse_graph *g, lse_term *t, loss_fn f, void *u)
{
    lse_assert_ok(lse_graph_zero_grad(g));
    double l0;
    lse_assert_ok(f(t, u, 1, &l0));
    double worst = 0.0;
    for (size_t k = 0; k < lse_graph_n_nodes(g); k++) {
        lse_node *n = lse_graph_node(g, k);
        if (lse_node_is_clamped(n))
            continue;
        gsl_matrix *v = lse_node_value(n);
        gsl_matrix *an = gsl_matrix_alloc(v->size1, v->size2);
        gsl_matrix_memcpy(an, lse_node_grad(n));
        for (size_t i = 0; i < v->size1; i++)
            for (size_t j = 0; j < v->size2; j++) {
                const double x = gsl_matrix_get(v, i, j), h = 1e-6;
                double lp, lm;
                gsl_matrix_set(v, i, j, x + h);
                lse_assert_ok(f(t, u, 0, &lp));
                gsl_matrix_set(v, i, j, x - h);
                lse_assert_ok(f(t, u, 0, &lm));
                gsl_matrix_set(v, i, j, x);
                const double num = (lp - lm) / (2 * h), a = gsl_matrix_get(an, i, j);
                const double e = fabs(num - a) / fmax(1.0, fabs(a));
                if (e > worst)
                    worst = e;
            }
        gsl_matrix_free(an);
    }
    return worst;
}

typedef struct loss_args {
    size_t labels[NC];
    lse_view values;
    gsl_matrix *target;
} loss_args;

static lse_status xent(lse_term *t, void *u, int want, double *l)
{
    const loss_args *a = u;
    return lse_loss_xent(t, a->labels, NULL, 0.7, want, l);
}

static lse_status recon(lse_term *t, void *u, int want, double *l)
{
    const loss_args *a = u;
    return lse_loss_recon(t, a->values, a->target, NULL, 0.9, want, l);
}

START_TEST(test_fd_losses)
{
    const size_t H = 3;
    for (size_t k = 0; k < N_CASES; k++)
        for (size_t m = 0; m < 2; m++) {
            const hcase *c = &cases[k];
            if (c->self)
                continue;
            hsetup s;
            build(&s, c, H, shares[m]);
            loss_args a;
            for (size_t i = 0; i < NC; i++)
                a.labels[i] = i == 2 ? LSE_LOSS_IGNORE : (i * 5) % NP;
            double w = fd_loss(s.g, s.t, xent, &a);
            ck_assert_msg(w < 1e-6, "%s xent: %g", c->name, w);
            /* per-head values (H * 2 columns) and shared values (2) */
            for (int per = 0; per < 2; per++) {
                lse_node *v;
                char nm[24];
                snprintf(nm, sizeof nm, "v%d", per);
                lse_assert_ok(lse_graph_add_node(s.g, nm, NP, per ? H * 2 : 2,
                                                 LSE_NODE_PARAM, &v));
                fill(v, 1.1, 0.7 + per);
                a.values = lse_view_all(v);
                a.target = gsl_matrix_alloc(NC, 2);
                for (size_t i = 0; i < NC; i++)
                    for (size_t j = 0; j < 2; j++)
                        gsl_matrix_set(a.target, i, j,
                                       (i + j) % 4 == 1 ? NAN : cos((double)(i + 3 * j)));
                w = fd_loss(s.g, s.t, recon, &a);
                ck_assert_msg(w < 1e-6, "%s recon per-head %d: %g", c->name, per, w);
                gsl_matrix_free(a.target);
                lse_node_set_clamped(v, 1);
            }
            lse_graph_free(s.g);
        }
}
END_TEST

/* H = 1: the losses are lse_loss_* of the single LSE term. */
START_TEST(test_one_head_losses)
{
    const hcase *c = &cases[0];
    hsetup s;
    build(&s, c, 1, 0);
    split q;
    build_split(&q, &s, c, 1, 0);
    lse_term *t1 = lse_graph_find_term(q.g, "head0");
    size_t labels[NC];
    for (size_t i = 0; i < NC; i++)
        labels[i] = (i * 3) % NP;
    double l1, l2;
    lse_assert_ok(lse_graph_zero_grad(s.g));
    lse_assert_ok(lse_graph_zero_grad(q.g));
    lse_assert_ok(lse_loss_xent(s.t, labels, NULL, 1.0, 1, &l1));
    lse_assert_ok(lse_loss_xent(t1, labels, NULL, 1.0, 1, &l2));
    ck_assert(fabs(l1 - l2) <= 1e-12 * fabs(l2));
    ck_assert(max_rel(lse_node_grad(s.wc), lse_node_grad(q.wc[0])) <= 1e-12);
    ck_assert(max_rel(lse_node_grad(s.x), lse_node_grad(q.x)) <= 1e-12);
    gsl_matrix *tg = gsl_matrix_alloc(NC, DP);
    for (size_t i = 0; i < NC; i++)
        for (size_t j = 0; j < DP; j++)
            gsl_matrix_set(tg, i, j, sin((double)(i * DP + j)));
    const lse_view none = {NULL, 0, 0};
    lse_assert_ok(lse_graph_zero_grad(s.g));
    lse_assert_ok(lse_graph_zero_grad(q.g));
    lse_assert_ok(lse_loss_recon(s.t, none, tg, NULL, 1.0, 1, &l1));
    lse_assert_ok(lse_loss_recon(t1, none, tg, NULL, 1.0, 1, &l2));
    ck_assert(fabs(l1 - l2) <= 1e-12 * fabs(l2));
    ck_assert(max_rel(lse_node_grad(s.p), lse_node_grad(q.p)) <= 1e-12);
    ck_assert(max_rel(lse_node_grad(s.wp), lse_node_grad(q.wp[0])) <= 1e-12);
    /* the attention of the head is the term's softmax */
    gsl_matrix *a = gsl_matrix_alloc(NC, NP);
    lse_assert_ok(lse_heads_attention(s.t, 0, a));
    double e;
    lse_assert_ok(lse_graph_energy(q.g, &e));
    ck_assert(max_rel(a, lse_term_softmax(t1)) <= 1e-14);
    gsl_matrix_free(a);
    gsl_matrix_free(tg);
    lse_graph_free(s.g);
    lse_graph_free(q.g);
}
END_TEST

START_TEST(test_threads_bits)
{
    /* several blocks of child rows, 4 heads, shared keys */
    lse_graph *g[2];
    lse_node *wc[2];
    double e[2];
    for (int r = 0; r < 2; r++) {
        lse_set_num_threads(r + 1);
        g[r] = lse_graph_new();
        lse_node *x, *p, *wp;
        lse_assert_ok(lse_graph_add_node(g[r], "x", 600, 8, 0, &x));
        lse_assert_ok(lse_graph_add_node(g[r], "p", 50, 8, LSE_NODE_PARAM, &p));
        lse_assert_ok(lse_graph_add_node(g[r], "Wc", 4 * 6, 8, LSE_NODE_PARAM, &wc[r]));
        lse_assert_ok(lse_graph_add_node(g[r], "Wp", 6, 8, LSE_NODE_PARAM, &wp));
        fill(x, 1.0, 0.31);
        fill(p, 1.0, 0.77);
        fill(wc[r], 0.5, 0.13);
        fill(wp, 0.5, 0.29);
        lse_heads_spec sp = lse_heads_spec_default();
        sp.child = lse_view_all(x);
        sp.parent = lse_view_all(p);
        sp.n_heads = 4;
        sp.share = LSE_HEADS_SHARE_PARENT;
        sp.base = lse_sim_scaled_dot;
        sp.w_child = wc[r];
        sp.w_parent = wp;
        lse_assert_ok(lse_graph_add_heads(g[r], "mqa", &sp, NULL));
        lse_assert_ok(lse_graph_gradient(g[r], &e[r]));
    }
    lse_set_num_threads(0);
    ck_assert(memcmp(&e[0], &e[1], sizeof e[0]) == 0);
    for (size_t k = 0; k < lse_graph_n_nodes(g[0]); k++) {
        const gsl_matrix *a = lse_node_grad(lse_graph_node(g[0], k));
        const gsl_matrix *b = lse_node_grad(lse_graph_node(g[1], k));
        ck_assert(memcmp(a->data, b->data,
                         a->size1 * a->size2 * sizeof(double)) == 0);
    }
    lse_graph_free(g[0]);
    lse_graph_free(g[1]);
}
END_TEST

/* Self-attention heads plus a quadratic bound: the flow and gradient
 * descent reach the same fixed point; Adam on the cross-entropy lowers
 * it. */
START_TEST(test_solvers_and_optim)
{
    const hcase *c = &cases[0];
    double xs[2][NC * DC];
    for (int run = 0; run < 2; run++) {
        hsetup s;
        build(&s, c, 3, LSE_HEADS_SHARE_PARENT);
        lse_node_set_clamped(s.p, 1);
        lse_node_set_clamped(s.wc, 1);
        lse_node_set_clamped(s.wp, 1);
        lse_assert_ok(lse_graph_add_custom(s.g, "bound", lse_custom_quadratic,
                                           NULL, (lse_view[]){lse_view_all(s.x)},
                                           1, NULL));
        double e0, e1;
        lse_assert_ok(lse_graph_energy(s.g, &e0));
        lse_solver_result res;
        if (run == 0) {
            lse_ode *o = lse_ode_new(s.g);
            lse_ode_opts oo = lse_ode_opts_default();
            oo.rtol = oo.atol = 1e-6;
            oo.tol_grad = 1e-8;
            oo.t1 = 1e3;
            oo.max_steps = 20000;
            lse_assert_ok(lse_ode_set_opts(o, &oo));
            lse_assert_ok(lse_ode_run(o, &res));
            ck_assert_msg(lse_ode_max_increase(o) <= 1e-10, "rise %g",
                          lse_ode_max_increase(o));
            lse_ode_free(o);
        } else {
            lse_solver *sv = lse_solver_new(s.g, lse_solver_gd);
            lse_solver_opts so = lse_solver_opts_default();
            so.tol_energy = 0;
            so.tol_grad = 1e-9;
            lse_assert_ok(lse_solver_set_opts(sv, &so));
            lse_assert_ok(lse_solver_run(sv, 20000, NULL, NULL, &res));
            lse_solver_free(sv);
        }
        ck_assert(res.converged);
        lse_assert_ok(lse_graph_gradient(s.g, &e1));
        ck_assert(e1 < e0);
        memcpy(xs[run], lse_node_value(s.x)->data, sizeof xs[run]);
        lse_graph_free(s.g);
    }
    for (size_t i = 0; i < NC * DC; i++)
        ck_assert_msg(fabs(xs[0][i] - xs[1][i]) < 1e-6, "%zu: %g vs %g", i,
                      xs[0][i], xs[1][i]);
    /* Adam on the projections, cross-entropy alone */
    hsetup s;
    build(&s, c, 3, 0);
    fill(s.x, 1.5, 0.9); /* rows 4.5 rad apart: distinct */
    lse_node_set_clamped(s.x, 1);
    size_t labels[NC];
    for (size_t i = 0; i < NC; i++)
        labels[i] = i % NP;
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.1;
    lse_optim *opt = lse_optim_new(s.g, &oo);
    double l0 = 0, l = 0;
    for (int it = 0; it < 300; it++) {
        lse_assert_ok(lse_graph_zero_grad(s.g));
        lse_assert_ok(lse_loss_xent(s.t, labels, NULL, 1.0, 1, &l));
        if (it == 0)
            l0 = l;
        lse_assert_ok(lse_optim_step(opt));
    }
    ck_assert_msg(l < 0.2 * l0, "loss %g -> %g", l0, l);
    lse_optim_free(opt);
    lse_graph_free(s.g);
}
END_TEST

START_TEST(test_refused)
{
    hsetup s;
    build_nodes(&s, &cases[0], 2, 0);
    lse_heads_spec sp = spec_of(&s, &cases[0], 2, 0);
    lse_heads_spec b = sp;
    b.n_heads = 0;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EINVAL);
    ck_assert(strstr(lse_graph_errmsg(s.g), "n_heads") != NULL);
    b = sp;
    b.n_heads = LSE_HEADS_MAX + 1;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EINVAL);
    b = sp;
    b.n_heads = 4; /* 2 K rows are not 4 k */
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EDIM);
    b = sp;
    b.base = NULL;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EFAULT);
    b = sp;
    b.base = lse_sim_project;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EINVAL);
    b = sp;
    b.base = lse_sim_daam;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EINVAL);
    b = sp;
    b.w_child = NULL;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EFAULT);
    b = sp;
    b.w_child = s.wp; /* wrong columns */
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EDIM);
    b = sp;
    b.beta = 0.0;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EDOM);
    b = sp;
    b.mask = 8;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EINVAL);
    b = sp;
    b.share = 4;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EINVAL);
    b = sp;
    b.base = lse_sim_lingauss; /* needs a context and parameters */
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EFAULT);
    lse_assert_status(lse_graph_add_heads(s.g, "a", NULL, NULL), LSE_EFAULT);
    lse_assert_status(lse_graph_add_heads(NULL, "a", &sp, NULL), LSE_EFAULT);
    ck_assert_int_eq((int)lse_graph_n_terms(s.g), 0);
    /* a base parameter whose rows are not H r */
    lse_node *odd;
    lse_assert_ok(lse_graph_add_node(s.g, "odd", 3, K, LSE_NODE_PARAM, &odd));
    lse_node *bp[2] = {odd, odd};
    b = sp;
    b.base = lse_sim_bilinear;
    b.base_param = bp;
    lse_assert_status(lse_graph_add_heads(s.g, "a", &b, NULL), LSE_EDIM);
    ck_assert(strstr(lse_graph_errmsg(s.g), "multiple of H") != NULL);
    /* a good term, then the accessors' refusals */
    lse_term *t;
    lse_assert_ok(lse_graph_add_heads(s.g, "ok", &sp, &t));
    ck_assert(lse_term_is_heads(t));
    ck_assert(lse_term_custom(t) == lse_custom_heads);
    ck_assert_int_eq((int)lse_term_n_views(t), 4);
    const lse_heads_config *hc = lse_term_config(t);
    ck_assert(hc->n_heads == 2 && hc->base == lse_sim_scaled_dot);
    ck_assert(!lse_term_is_heads(NULL));
    char buf[128];
    lse_term_describe(t, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "H=2") != NULL, "%s", buf);
    gsl_matrix *a = gsl_matrix_alloc(NC, NP);
    lse_assert_status(lse_heads_attention(t, 2, a), LSE_ERANGE);
    lse_assert_status(lse_heads_attention(t, 0, NULL), LSE_EFAULT);
    gsl_matrix *a2 = gsl_matrix_alloc(NC, NP + 1);
    lse_assert_status(lse_heads_attention(t, 0, a2), LSE_EDIM);
    gsl_matrix_free(a2);
    lse_term *q;
    lse_assert_ok(lse_graph_add_custom(s.g, "quad", lse_custom_quadratic, NULL,
                                       (lse_view[]){lse_view_all(s.x)}, 1, &q));
    ck_assert(!lse_term_is_heads(q));
    lse_assert_status(lse_heads_attention(q, 0, a), LSE_EINVAL);
    size_t labels[NC] = {0, 1, 2, 3, 4, 5, 0};
    lse_assert_status(lse_heads_loss_xent(q, labels, NULL, 1.0, 0, NULL),
                      LSE_EINVAL);
    labels[3] = NP;
    lse_assert_status(lse_loss_xent(t, labels, NULL, 1.0, 0, NULL), LSE_ERANGE);
    labels[3] = 0;
    lse_assert_status(lse_loss_xent(t, NULL, NULL, 1.0, 0, NULL), LSE_EFAULT);
    lse_assert_status(lse_loss_xent(t, labels, NULL, NAN, 0, NULL), LSE_EDOM);
    gsl_vector *w = gsl_vector_alloc(NC - 1);
    gsl_vector_set_all(w, 1.0);
    lse_assert_status(lse_loss_xent(t, labels, w, 1.0, 0, NULL), LSE_EDIM);
    gsl_vector_free(w);
    gsl_matrix *tg = gsl_matrix_alloc(NC, 3); /* values have DP columns */
    gsl_matrix_set_all(tg, 0.0);
    const lse_view none = {NULL, 0, 0};
    lse_assert_status(lse_loss_recon(t, none, tg, NULL, 1.0, 0, NULL), LSE_EDIM);
    lse_assert_status(lse_heads_loss_recon(q, none, tg, NULL, 1.0, 0, NULL),
                      LSE_EINVAL);
    lse_assert_status(lse_loss_recon(t, none, NULL, NULL, 1.0, 0, NULL),
                      LSE_EFAULT);
    gsl_matrix_free(tg);
    /* a non-finite score is an evaluation error naming the term */
    gsl_matrix_set(lse_node_value(s.wc), 0, 0, NAN);
    double e;
    ck_assert(lse_graph_energy(s.g, &e) != LSE_OK);
    lse_assert_status(lse_heads_attention(t, 0, a), LSE_ENONFINITE);
    ck_assert(strstr(lse_graph_errmsg(s.g), "'ok'") != NULL);
    gsl_matrix_free(a);
    lse_graph_free(s.g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("heads");
    TCase *tc = tcase_create("heads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_equals_separate_heads);
    tcase_add_test(tc, test_fd_every_node);
    tcase_add_test(tc, test_fd_losses);
    tcase_add_test(tc, test_one_head_losses);
    tcase_add_test(tc, test_threads_bits);
    tcase_add_test(tc, test_solvers_and_optim);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    return s;
}
