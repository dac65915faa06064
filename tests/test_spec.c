#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <graphviz/cgraph.h>

#include "lse_check.h"
#include <lsegraph/viz.h>

/* Model specs (lib/viz/spec.c): round trips graph -> DOT -> graph for
 * graphs that use every built-in similarity a spec can name, both custom
 * terms, views, masks, chains and name clashes; and every malformed spec
 * with its status, message and line number. */

static lse_node *node(lse_graph *g, const char *name, size_t n, size_t d,
                      unsigned flags)
{
    lse_node *x = NULL;
    lse_assert_ok(lse_graph_add_node(g, name, n, d, flags, &x));
    return x;
}

/* Fill every node with values of high entropy (not 0 or 1), so energies
 * compare meaningfully; Cholesky nodes keep a positive diagonal. */
static void fill(lse_graph *g)
{
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        const char *name = lse_node_name(lse_graph_node(g, i));
        const double shift =
            strcmp(name, "chol") == 0 || strcmp(name, "c") == 0 ? 1.5 : 0.0;
        gsl_matrix *v = lse_node_value(lse_graph_node(g, i));
        for (size_t r = 0; r < v->size1; r++)
            for (size_t c = 0; c < v->size2; c++)
                gsl_matrix_set(v, r, c,
                               shift +
                                   0.4127 * sin(1.7 * (double)(r + 1) +
                                                0.9 * (double)c + (double)i));
    }
}

/* 1: GMM (gaussian, full, logw + chol) and a quadratic prior on mu */
static lse_graph *graph_gmm(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x = node(g, "x", 7, 2, LSE_NODE_CLAMPED);
    lse_node *mu = node(g, "mu", 3, 2, LSE_NODE_PARAM);
    lse_node *logw = node(g, "logw", 3, 1, LSE_NODE_PARAM);
    lse_node *chol = node(g, "chol", 3, 4, LSE_NODE_PARAM);
    lse_term_spec s = lse_term_spec_default();
    s.child = lse_view_all(x);
    s.parent = lse_view_all(mu);
    s.sim = lse_sim_gaussian;
    lse_node *p[] = {logw, chol};
    s.param = p;
    const lse_gaussian_config cfg = {.cov = LSE_COV_FULL};
    s.config = &cfg;
    lse_assert_ok(lse_graph_add_lse(g, "mixture", &s, NULL));
    const lse_quadratic_config q = {.scale = 0.25};
    const lse_view v = lse_view_all(mu);
    lse_assert_ok(lse_graph_add_custom(g, "prior", lse_custom_quadratic, &q, &v,
                                       1, NULL));
    return g;
}

/* 2: causal unrolled DAR self-attention on a row range, beta 2 */
static lse_graph *graph_dar(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x = node(g, "x", 6, 3, 0);
    lse_term_spec s = lse_term_spec_default();
    s.child = lse_view_rows(x, 1, 5);
    s.parent = lse_view_rows(x, 0, 5);
    s.sim = lse_sim_dar;
    const lse_dar_config cfg = {.lambda = 0.3,
                                .alpha = 6,
                                .rho = 0.4,
                                .beta = 0.2,
                                .steps = 3,
                                .gate = LSE_GATE_TANH,
                                .eps = 1e-12};
    s.config = &cfg;
    s.beta = 2.0;
    s.mask = LSE_MASK_CAUSAL;
    lse_assert_ok(lse_graph_add_lse(g, "self", &s, NULL));
    const lse_view v = lse_view_all(x);
    lse_assert_ok(lse_graph_add_custom(g, "bound", lse_custom_quadratic, NULL,
                                       &v, 1, NULL));
    return g;
}

/* 3: Markov SLDS: lingauss (diag) over views of one node, chain reduction */
static lse_graph *graph_slds(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x = node(g, "x", 9, 2, LSE_NODE_CLAMPED);
    lse_node *b = node(g, "b", 2, 2, LSE_NODE_PARAM);
    lse_node *a = node(g, "A", 2, 4, LSE_NODE_PARAM);
    lse_node *chol = node(g, "chol", 2, 2, LSE_NODE_PARAM);
    lse_node *init = node(g, "init", 1, 2, LSE_NODE_PARAM);
    lse_node *trans = node(g, "trans", 2, 2, LSE_NODE_PARAM);
    lse_term_spec s = lse_term_spec_default();
    s.child = lse_view_rows(x, 1, 8);
    s.context = lse_view_rows(x, 0, 8);
    s.parent = lse_view_all(b);
    s.sim = lse_sim_lingauss;
    const lse_gaussian_config cfg = {.cov = LSE_COV_DIAG};
    s.config = &cfg;
    lse_node *p[] = {NULL, a, chol};
    s.param = p;
    s.reduce = LSE_REDUCE_CHAIN;
    s.chain_init = init;
    s.chain_trans = trans;
    lse_assert_ok(lse_graph_add_lse(g, "dynamics", &s, NULL));
    return g;
}

/* 4: slot attention (bilinear) under a Hopfield memory (dot) and a
 * disabled term */
static lse_graph *graph_slots(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *tok = node(g, "tokens", 8, 4, LSE_NODE_CLAMPED);
    lse_node *slots = node(g, "slots", 3, 4, 0);
    lse_node *wk = node(g, "W_K", 2, 4, LSE_NODE_PARAM);
    lse_node *wq = node(g, "W_Q", 2, 4, LSE_NODE_PARAM);
    lse_node *mem =
        node(g, "memories", 5, 4, LSE_NODE_PARAM | LSE_NODE_CLAMPED);
    lse_term_spec s = lse_term_spec_default();
    s.child = lse_view_all(tok);
    s.parent = lse_view_all(slots);
    s.sim = lse_sim_bilinear;
    const lse_bilinear_config bc = {.scale = 0.5};
    s.config = &bc;
    lse_node *p[] = {wk, wq};
    s.param = p;
    lse_assert_ok(lse_graph_add_lse(g, "assign", &s, NULL));
    lse_term_spec h = lse_term_spec_default();
    h.child = lse_view_all(slots);
    h.parent = lse_view_all(mem);
    h.sim = lse_sim_dot;
    h.beta = 4.0;
    lse_assert_ok(lse_graph_add_lse(g, "hopfield", &h, NULL));
    lse_term_spec c = lse_term_spec_default();
    c.child = lse_view_all(slots);
    c.parent = lse_view_all(slots);
    c.sim = lse_sim_cosine;
    const lse_cosine_config cc = {.eps = 1e-6};
    c.config = &cc;
    c.mask = LSE_MASK_NO_SELF;
    lse_term *off = NULL;
    lse_assert_ok(lse_graph_add_lse(g, "repel", &c, &off));
    lse_term_set_enabled(off, 0);
    const lse_quadratic_config q = {.scale = 1.0};
    const lse_view v = lse_view_all(slots);
    lse_assert_ok(lse_graph_add_custom(g, "bound", lse_custom_quadratic, &q, &v,
                                       1, NULL));
    return g;
}

/* 5: two-layer predictive coding (nonlinear tanh, W and b) and LayerNorm */
static lse_graph *graph_pc(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x = node(g, "x", 4, 5, LSE_NODE_CLAMPED);
    lse_node *h1 = node(g, "h1", 4, 3, 0);
    lse_node *h2 = node(g, "h2", 4, 2, 0);
    lse_node *w1 = node(g, "W1", 5, 3, LSE_NODE_PARAM);
    lse_node *b1 = node(g, "b1", 1, 5, LSE_NODE_PARAM);
    lse_node *w2 = node(g, "W2", 3, 2, LSE_NODE_PARAM);
    lse_node *gamma = node(g, "gamma", 1, 1, LSE_NODE_PARAM);
    lse_node *delta = node(g, "delta", 1, 5, LSE_NODE_PARAM);
    const lse_nonlinear_config f1 = {.f = LSE_ACT_TANH};
    const lse_nonlinear_config f2 = {.f = LSE_ACT_RELU};
    lse_term_spec s = lse_term_spec_default();
    s.child = lse_view_all(x);
    s.parent = lse_view_all(h1);
    s.sim = lse_sim_nonlinear;
    s.config = &f1;
    lse_node *p1[] = {w1, b1};
    s.param = p1;
    lse_assert_ok(lse_graph_add_lse(g, "pc1", &s, NULL));
    s.child = lse_view_all(h1);
    s.parent = lse_view_all(h2);
    s.config = &f2;
    lse_node *p2[] = {w2, NULL};
    s.param = p2;
    lse_assert_ok(lse_graph_add_lse(g, "pc2", &s, NULL));
    const lse_layernorm_config ln = {.eps = 1e-3};
    const lse_view v[] = {lse_view_all(x), lse_view_all(gamma),
                          lse_view_all(delta)};
    lse_assert_ok(
        lse_graph_add_custom(g, "norm", lse_custom_layernorm, &ln, v, 3, NULL));
    return g;
}

/* 6: the distance family, DAAM and scaled-dot on one query node */
static lse_graph *graph_dists(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *q = node(g, "queries", 4, 3, 0);
    lse_node *k = node(g, "prototypes", 5, 3, LSE_NODE_PARAM);
    lse_node *heads = node(g, "delta", 2, 3, LSE_NODE_PARAM);
    lse_node *c = node(g, "c", 2, 1, LSE_NODE_PARAM);
    const lse_dist_config idw = {.p = 1.5, .eps = 0.01, .s = 1};
    const lse_dist_config gk = {.p = 2, .eps = 1e-3, .s = 2.5};
    const lse_daam_config da = {.axis = LSE_DAAM_ROWS, .eps = 1e-4};
    const struct {
        const char *name;
        const lse_sim_type *sim;
        const void *cfg;
    } t[] = {{"idw", lse_sim_idw, &idw},
             {"inv", lse_sim_inv_dist, &idw},
             {"gk", lse_sim_gauss_kernel, &gk},
             {"neg", lse_sim_neg_dist, NULL},
             {"sdot", lse_sim_scaled_dot, NULL}};
    for (size_t i = 0; i < 5; i++) {
        lse_term_spec s = lse_term_spec_default();
        s.child = lse_view_all(q);
        s.parent = lse_view_all(k);
        s.sim = t[i].sim;
        s.config = t[i].cfg;
        lse_assert_ok(lse_graph_add_lse(g, t[i].name, &s, NULL));
    }
    lse_term_spec s = lse_term_spec_default();
    s.child = lse_view_all(q);
    s.parent = lse_view_all(heads);
    s.sim = lse_sim_daam;
    s.config = &da;
    lse_node *p[] = {c};
    s.param = p;
    lse_assert_ok(lse_graph_add_lse(g, "gate", &s, NULL));
    return g;
}

typedef lse_graph *(*maker)(void);
static const maker makers[] = {graph_gmm,   graph_dar, graph_slds,
                               graph_slots, graph_pc,  graph_dists};
#define N_MAKERS (sizeof makers / sizeof makers[0])

static void same_view(lse_view a, lse_view b)
{
    ck_assert((a.node == NULL) == (b.node == NULL));
    if (a.node == NULL)
        return;
    ck_assert_str_eq(lse_node_name(a.node), lse_node_name(b.node));
    ck_assert_uint_eq(a.first, b.first);
    ck_assert_uint_eq(a.count, b.count);
}

static const char *name_or_null(const lse_node *n)
{
    return n != NULL ? lse_node_name(n) : "(none)";
}

/* Same nodes (order, shape, flags) and terms (kind, type, config text,
 * beta, mask, reduction, views, parameters, enabled). */
static void same_graph(lse_graph *a, lse_graph *b)
{
    ck_assert_uint_eq(lse_graph_n_nodes(a), lse_graph_n_nodes(b));
    for (size_t i = 0; i < lse_graph_n_nodes(a); i++) {
        const lse_node *x = lse_graph_node(a, i), *y = lse_graph_node(b, i);
        ck_assert_str_eq(lse_node_name(x), lse_node_name(y));
        ck_assert_uint_eq(lse_node_rows(x), lse_node_rows(y));
        ck_assert_uint_eq(lse_node_dim(x), lse_node_dim(y));
        ck_assert_uint_eq(lse_node_flags(x), lse_node_flags(y));
    }
    ck_assert_uint_eq(lse_graph_n_terms(a), lse_graph_n_terms(b));
    for (size_t m = 0; m < lse_graph_n_terms(a); m++) {
        const lse_term *s = lse_graph_term(a, m), *t = lse_graph_term(b, m);
        ck_assert_str_eq(lse_term_name(s), lse_term_name(t));
        ck_assert_int_eq(lse_term_kind_of(s), lse_term_kind_of(t));
        char ds[256], dt[256];
        lse_term_describe(s, ds, sizeof ds);
        lse_term_describe(t, dt, sizeof dt);
        ck_assert_str_eq(ds, dt);
        ck_assert_int_eq(lse_term_enabled(s), lse_term_enabled(t));
        if (lse_term_kind_of(s) == LSE_TERM_CUSTOM) {
            ck_assert_ptr_eq(lse_term_custom(s), lse_term_custom(t));
            ck_assert_uint_eq(lse_term_n_views(s), lse_term_n_views(t));
            for (size_t i = 0; i < lse_term_n_views(s); i++)
                same_view(lse_term_view(s, i), lse_term_view(t, i));
            continue;
        }
        ck_assert_ptr_eq(lse_term_sim(s), lse_term_sim(t));
        ck_assert_double_eq(lse_term_beta(s), lse_term_beta(t));
        ck_assert_uint_eq(lse_term_mask(s), lse_term_mask(t));
        ck_assert_int_eq(lse_term_reduce(s), lse_term_reduce(t));
        same_view(lse_term_child(s), lse_term_child(t));
        same_view(lse_term_parent(s), lse_term_parent(t));
        same_view(lse_term_context(s), lse_term_context(t));
        ck_assert_uint_eq(lse_term_n_param(s), lse_term_n_param(t));
        for (size_t k = 0; k < lse_term_n_param(s); k++)
            ck_assert_str_eq(name_or_null(lse_term_param(s, k)),
                             name_or_null(lse_term_param(t, k)));
        ck_assert_str_eq(name_or_null(lse_term_chain_init(s)),
                         name_or_null(lse_term_chain_init(t)));
        ck_assert_str_eq(name_or_null(lse_term_chain_trans(s)),
                         name_or_null(lse_term_chain_trans(t)));
        const lse_sim_type *sim = lse_term_sim(s);
        if (sim->config_size > 0) {
            /* %g in describe(): configs agree to 6 digits */
            ck_assert_ptr_nonnull(lse_term_config(t));
        }
    }
}

/* "tail -> head" and the edge's attributes, for comparing edge sets */
static char *edge_key(Agraph_t *G, Agedge_t *e)
{
    char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s -> %s", agnameof(agtail(e)), agnameof(aghead(e)));
    for (Agsym_t *a = agnxtattr(G, AGEDGE, NULL); a != NULL;
         a = agnxtattr(G, AGEDGE, a))
        fprintf(f, " %s=%s", a->name, agxget(e, a));
    fclose(f);
    return key;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Two DOT texts hold the same nodes with the same attributes and the
 * same edges with the same attributes. */
static void same_dot(const char *a, const char *b)
{
    Agraph_t *A = agmemread(a);
    Agraph_t *B = agmemread(b);
    ck_assert_ptr_nonnull(A);
    ck_assert_ptr_nonnull(B);
    ck_assert_int_eq(agnnodes(A), agnnodes(B));
    ck_assert_int_eq(agnedges(A), agnedges(B));
    for (Agnode_t *n = agfstnode(A); n != NULL; n = agnxtnode(A, n)) {
        Agnode_t *m = agnode(B, agnameof(n), 0);
        ck_assert_msg(m != NULL, "node %s lost", agnameof(n));
        for (Agsym_t *s = agnxtattr(A, AGNODE, NULL); s != NULL;
             s = agnxtattr(A, AGNODE, s)) {
            const char *v = agget(m, s->name);
            ck_assert_msg(v != NULL && strcmp(v, agxget(n, s)) == 0,
                          "node %s: %s = '%s' became '%s'", agnameof(n),
                          s->name, agxget(n, s), v ? v : "(none)");
        }
    }
    const size_t ne = (size_t)agnedges(A);
    char **ka = calloc(ne + 1, sizeof *ka), **kb = calloc(ne + 1, sizeof *kb);
    size_t ia = 0, ib = 0;
    for (Agnode_t *n = agfstnode(A); n != NULL; n = agnxtnode(A, n))
        for (Agedge_t *e = agfstout(A, n); e != NULL; e = agnxtout(A, e))
            ka[ia++] = edge_key(A, e);
    for (Agnode_t *n = agfstnode(B); n != NULL; n = agnxtnode(B, n))
        for (Agedge_t *e = agfstout(B, n); e != NULL; e = agnxtout(B, e))
            kb[ib++] = edge_key(B, e);
    ck_assert_uint_eq(ia, ib);
    qsort(ka, ia, sizeof *ka, by_string);
    qsort(kb, ib, sizeof *kb, by_string);
    for (size_t i = 0; i < ia; i++) {
        ck_assert_str_eq(ka[i], kb[i]);
        free(ka[i]);
        free(kb[i]);
    }
    free(ka);
    free(kb);
    agclose(A);
    agclose(B);
}

START_TEST(test_round_trip)
{
    lse_graph *a = makers[_i]();
    fill(a);
    double ea;
    lse_assert_ok(lse_graph_energy(a, &ea));
    char *dot = NULL, *dot2 = NULL;
    lse_error err;
    lse_assert_ok(lse_viz_to_dot(a, NULL, &dot, &err));
    lse_graph *b = NULL;
    const lse_status st = lse_viz_read_spec(NULL, dot, &b, &err);
    ck_assert_msg(st == LSE_OK, "%s\n%s", err.message, dot);
    same_graph(a, b);
    /* the spec's own values are finite, so the graph can be evaluated */
    double eb;
    lse_assert_ok(lse_graph_energy(b, &eb));
    ck_assert(isfinite(eb));
    /* with the same values, the same energy: the terms are the same */
    for (size_t i = 0; i < lse_graph_n_nodes(a); i++)
        lse_assert_ok(lse_node_set_value(lse_graph_node(b, i),
                                         lse_node_value(lse_graph_node(a, i))));
    lse_assert_ok(lse_graph_energy(b, &eb));
    ck_assert_double_eq_tol(ea, eb, 1e-12 * (1 + fabs(ea)));
    /* and the second export is the first (up to the order in which
     * cgraph writes subgraphs) */
    lse_assert_ok(lse_viz_to_dot(b, NULL, &dot2, &err));
    same_dot(dot, dot2);
    free(dot);
    free(dot2);
    lse_graph_free(a);
    lse_graph_free(b);
}
END_TEST

/* Written by hand: separate attributes, undirected edges, comments, mask
 * names, default kinds; and the deterministic starting values. */
START_TEST(test_handwritten)
{
    static const char spec[] =
        "// a hand-written spec\n"
        "graph model {\n"
        "  x [rows=5, dim=2, observed=true]\n"
        "  /* means */ mu [kind=param rows=2 dim=2]\n"
        "  chol [kind=param, rows=2, dim=4]; tied [kind=param rows=1 dim=4]\n"
        "  mix [kind=factor, sim=gaussian, cov=full, beta=0.5]\n"
        "  tmix [kind=factor, sim=gaussian, config=\"cov=tied\"]\n"
        "  att [kind=factor sim=dar config=\"lambda=0.7, steps=2\" rho=0.25 "
        "dar_beta=0.3 mask=\"causal|no_self\"]\n"
        "  mix -- x [role=child]; mu -- mix [role=parent]\n"
        "  chol -- mix [role=param slot=chol]\n"
        "  tmix -- x [role=child]; mu -- tmix [role=parent]\n"
        "  tied -- tmix [role=param slot=chol]\n"
        "  att -- x [role=child first=1]; x -- att [role=parent, count=4]\n"
        "}\n";
    lse_graph *g = NULL;
    lse_error err;
    const lse_status st = lse_viz_read_spec("hand.gv", spec, &g, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    ck_assert_uint_eq(lse_graph_n_nodes(g), 4);
    ck_assert_uint_eq(lse_graph_n_terms(g), 3);
    const lse_term *mix = lse_graph_find_term(g, "mix");
    ck_assert_double_eq(lse_term_beta(mix), 0.5);
    const lse_term *att = lse_graph_find_term(g, "att");
    ck_assert_uint_eq(lse_term_mask(att), LSE_MASK_CAUSAL | LSE_MASK_NO_SELF);
    const lse_dar_config *dc = lse_term_config(att);
    ck_assert_double_eq(dc->lambda, 0.7);
    ck_assert_double_eq(dc->rho, 0.25);
    ck_assert_double_eq(dc->beta, 0.3);
    ck_assert_uint_eq(dc->steps, 2);
    ck_assert_double_eq(dc->alpha, 8.0); /* default kept */
    ck_assert_uint_eq(lse_term_child(att).first, 1);
    ck_assert_uint_eq(lse_term_child(att).count, 4);
    ck_assert_uint_eq(lse_term_parent(att).first, 0);
    ck_assert_uint_eq(lse_term_parent(att).count, 4);
    ck_assert(lse_node_is_clamped(lse_graph_find_node(g, "x")));
    ck_assert(lse_node_is_param(lse_graph_find_node(g, "mu")));
    /* Cholesky factors start at the identity, so the energy is finite */
    const gsl_matrix *L = lse_node_value(lse_graph_find_node(g, "chol"));
    ck_assert_double_eq(gsl_matrix_get(L, 1, 0), 1.0);
    ck_assert_double_eq(gsl_matrix_get(L, 1, 1), 0.0);
    ck_assert_double_eq(gsl_matrix_get(L, 1, 3), 1.0);
    const gsl_matrix *T = lse_node_value(lse_graph_find_node(g, "tied"));
    ck_assert_double_eq(gsl_matrix_get(T, 0, 0), 1.0);
    ck_assert_double_eq(gsl_matrix_get(T, 0, 3), 1.0);
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    ck_assert(isfinite(e));
    /* at x = mu = 0, Sigma = I, beta 0.5: the mixture energy is
     * -(1/beta) sum_i log(2 exp(beta (-log(2 pi)))) (no weights) */
    const double s = -log(2 * 3.14159265358979323846);
    const double want = -5 * (log(2.0) / 0.5 + s);
    ck_assert_double_eq_tol(lse_term_energy(mix), want, 1e-12);
    /* spec -> graph -> DOT -> graph gives the same graph */
    char *dot = NULL;
    lse_assert_ok(lse_viz_to_dot(g, NULL, &dot, &err));
    lse_graph *h = NULL;
    lse_assert_ok(lse_viz_read_spec(NULL, dot, &h, &err));
    same_graph(g, h);
    free(dot);
    lse_graph_free(h);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_daam_and_file)
{
    char path[] = "/tmp/lse-spec-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char spec[] = "digraph {\n"
                               "  x [rows=4 dim=3]\n"
                               "  delta [kind=param rows=2 dim=3]\n"
                               "  c [kind=param rows=2 dim=1]\n"
                               "  gate [kind=factor sim=daam axis=rows]\n"
                               "  delta -> gate [role=parent]\n"
                               "  gate -> x [role=child]\n"
                               "  c -> gate [role=param slot=c]\n"
                               "}\n";
    ck_assert_int_eq(write(fd, spec, sizeof spec - 1), (int)(sizeof spec - 1));
    close(fd);
    lse_graph *g = NULL;
    lse_error err;
    lse_assert_ok(lse_viz_read_spec(path, NULL, &g, &err));
    unlink(path);
    const gsl_matrix *c = lse_node_value(lse_graph_find_node(g, "c"));
    ck_assert_double_eq(gsl_matrix_get(c, 1, 0), 1.0); /* widths 1, not 0 */
    const lse_daam_config *dc = lse_term_config(lse_graph_find_term(g, "gate"));
    ck_assert_int_eq(dc->axis, LSE_DAAM_ROWS);
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    ck_assert(isfinite(e));
    lse_graph_free(g);
    lse_assert_status(lse_viz_read_spec(path, NULL, &g, &err), LSE_EIO);
    ck_assert_ptr_null(g);
    ck_assert_ptr_nonnull(strstr(err.message, path));
}
END_TEST

/* A malformed spec, its status, and words its message must hold
 * (including "<memory>:LINE:"). */
typedef struct bad_spec {
    const char *text;
    lse_status status;
    const char *want[3];
} bad_spec;

#define HEAD "digraph {\n  x [rows=4 dim=2]\n  mu [kind=param rows=2 dim=2]\n"
/* line 1: digraph, 2: x, 3: mu, 4.. the rest */
static const bad_spec bad[] = {
    {HEAD "  f [kind=factor sim=dot\n  mu -> f\n}\n",
     LSE_EPARSE,
     {"<memory>:5:", "syntax error near '->'"}},
    {HEAD "  f [kind=factor sim=nosuch]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_ENOTFOUND,
     {"<memory>:4:", "unknown similarity 'nosuch'", "gaussian"}},
    {HEAD "  y [rows=2 dim=3]\n  f [kind=factor sim=dot]\n"
          "  y -> f [role=parent]\n  f -> x [role=child]\n}\n",
     LSE_EDIM,
     {"<memory>:5:", "factor 'f'", "must be equal"}},
    {HEAD "  f [kind=factor sim=dot]\n  mu -> f [role=parent]\n}\n",
     LSE_EINVAL,
     {"<memory>:4:", "factor 'f' has no children"}},
    {HEAD "  f [kind=factor sim=dot]\n  f -> x [role=child]\n}\n",
     LSE_EINVAL,
     {"<memory>:4:", "factor 'f' has no parents"}},
    {HEAD "  f [kind=factor sim=dot]\n  f -> x [role=child]\n"
          "  mu -> f [role=mother]\n}\n",
     LSE_EPARSE,
     {"<memory>:6:", "unknown role 'mother'"}},
    {HEAD "  f [kind=factor sim=dot]\n  f -> x [role=child]\n"
          "  mu -> f\n}\n",
     LSE_EPARSE,
     {"<memory>:6:", "no role"}},
    {"digraph {\n  x [dim=2]\n}\n",
     LSE_EPARSE,
     {"<memory>:2:", "variable 'x' has no rows"}},
    {"digraph {\n\n  x [rows=3]\n}\n",
     LSE_EPARSE,
     {"<memory>:3:", "variable 'x' has no dim"}},
    {"digraph {\n  x [rows=3 dim=2]\n  w [kind=param dim=1]\n}\n",
     LSE_EPARSE,
     {"<memory>:3:", "param 'w' has no rows"}},
    {"digraph {\n  x [rows=abc dim=2]\n}\n",
     LSE_EPARSE,
     {"<memory>:2:", "rows='abc' is not a positive integer"}},
    {"digraph {\n  x [rows=0 dim=2]\n}\n",
     LSE_EPARSE,
     {"<memory>:2:", "rows='0'"}},
    {"digraph {\n  x [rows=2 dim=2 observed=maybe]\n}\n",
     LSE_EPARSE,
     {"<memory>:2:", "observed='maybe'"}},
    {"digraph {\n  x [rows=2 dim=2 kind=latent]\n}\n",
     LSE_EPARSE,
     {"<memory>:2:", "unknown kind 'latent'"}},
    {HEAD
     "  f [kind=factor]\n  mu -> f [role=parent]\n  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "no sim attribute"}},
    {HEAD "  f [kind=factor sim=pairwise]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_ENOTSUP,
     {"<memory>:4:", "pairwise"}},
    {HEAD "  f [kind=factor sim=dar config=\"lambda=0.1, kappa=2\"]\n"
          "  mu -> f [role=parent]\n  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "'kappa' is not a parameter of dar", "rho"}},
    {HEAD "  f [kind=factor sim=dar gate=step]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "gate='step'"}},
    {HEAD "  f [kind=factor sim=dar config=\"lambda=big\"]\n"
          "  mu -> f [role=parent]\n  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "lambda='big' is not a finite number"}},
    {HEAD "  f [kind=factor sim=dot config=\"lambda\"]\n"
          "  mu -> f [role=parent]\n  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "not key=value"}},
    {HEAD "  mu -> x [role=parent]\n}\n",
     LSE_EINVAL,
     {"<memory>:4:", "joins two variables"}},
    {HEAD "  f [kind=factor sim=dot]\n  g [kind=factor sim=dot]\n"
          "  f -> g [role=child]\n}\n",
     LSE_EINVAL,
     {"<memory>:6:", "joins two factors"}},
    {HEAD "  f [kind=factor sim=dot]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n  f -> mu [role=child]\n}\n",
     LSE_EINVAL,
     {"<memory>:7:", "more than one child edge"}},
    {HEAD "  f [kind=factor sim=gaussian]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n  mu -> f [role=param slot=sigma]\n}\n",
     LSE_EPARSE,
     {"<memory>:7:", "unknown slot 'sigma'", "logw, chol"}},
    {HEAD "  f [kind=factor sim=gaussian]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n  mu -> f [role=param]\n}\n",
     LSE_EPARSE,
     {"<memory>:7:", "without a slot"}},
    {HEAD "  c [kind=param rows=2 dim=4]\n  f [kind=factor sim=gaussian]\n"
          "  mu -> f [role=parent]\n  f -> x [role=child]\n"
          "  c -> f [role=param slot=chol]\n  c -> f [role=param slot=chol]\n"
          "}\n",
     LSE_EINVAL,
     {"<memory>:9:", "slot 'chol' is bound twice"}},
    {HEAD "  f [kind=factor sim=gaussian]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_EINVAL,
     {"<memory>:4:", "gaussian needs parameter 'chol'"}},
    {HEAD "  f [kind=factor sim=dot beta=-1]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_EDOM,
     {"<memory>:4:", "beta"}},
    {HEAD "  f [kind=factor sim=dot beta=hot]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "beta='hot'"}},
    {HEAD "  f [kind=factor sim=dot mask=upper]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "mask='upper'"}},
    {HEAD "  f [kind=factor sim=dot reduce=max]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "reduce='max'"}},
    {HEAD "  f [kind=factor sim=dot]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child first=3 count=2]\n}\n",
     LSE_ERANGE,
     {"<memory>:6:", "rows [3, 5)", "(4 rows)"}},
    {HEAD "  f [kind=factor sim=dot]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child first=-1]\n}\n",
     LSE_EPARSE,
     {"<memory>:6:", "first='-1'"}},
    {HEAD "  f [kind=factor sim=dot]\n  mu -> f [role=parent]\n"
          "  f -> x [role=child]\n  x -> f [role=view]\n}\n",
     LSE_EINVAL,
     {"<memory>:7:", "role=view belongs to custom factors"}},
    {HEAD
     "  f [kind=factor term=custom custom=cubic]\n  x -> f [role=view]\n}\n",
     LSE_ENOTFOUND,
     {"<memory>:4:", "unknown custom term 'cubic'"}},
    {HEAD "  f [kind=factor term=custom]\n  x -> f [role=view]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "no custom attribute"}},
    {HEAD "  f [kind=factor term=custom custom=quadratic]\n}\n",
     LSE_EINVAL,
     {"<memory>:4:", "has no views"}},
    {HEAD "  f [kind=factor term=custom custom=quadratic]\n"
          "  x -> f [role=view]\n  mu -> f [role=view]\n}\n",
     LSE_EPARSE,
     {"<memory>:5:", "needs an index"}},
    {HEAD "  f [kind=factor term=custom custom=quadratic]\n"
          "  x -> f [role=view index=0]\n  mu -> f [role=view index=0]\n}\n",
     LSE_EINVAL,
     {"<memory>:6:", "view index 0 is used twice"}},
    {HEAD "  f [kind=factor term=custom custom=quadratic]\n"
          "  x -> f [role=child]\n}\n",
     LSE_EINVAL,
     {"<memory>:5:", "takes role=view"}},
    {HEAD "  f [kind=factor term=custom custom=quadratic scale=-1]\n"
          "  x -> f [role=view]\n}\n",
     LSE_EDOM,
     {"<memory>:4:", "factor 'f'"}},
    {HEAD "  f [kind=factor term=tensor]\n}\n",
     LSE_EPARSE,
     {"<memory>:4:", "unknown term 'tensor'"}},
    {"digraph { a [rows=1 dim=1] }\ndigraph { b [rows=1 dim=1] }\n",
     LSE_EPARSE,
     {"<memory>:2:", "more than one graph"}},
    /* sizes the reader refuses before allocating (LSE_VIZ_SPEC_MAX_*) */
    {"digraph {\n  a [rows=2305843009213693953, dim=1];\n}\n",
     LSE_EDOM,
     {"<memory>:2:", "rows=2305843009213693953 x dim=1", "16777216 entries"}},
    {"digraph {\n  a [rows=4294967296, dim=4294967296];\n}\n",
     LSE_EDOM,
     {"<memory>:2:", "node 'a'", "fewer rows"}},
    {"digraph {\n  x [rows=5000 dim=1]\n  mu [kind=param rows=4000 dim=1]\n"
     "  f [kind=factor sim=dot]\n  mu -> f [role=parent]\n"
     "  f -> x [role=child]\n}\n",
     LSE_EDOM,
     {"<memory>:4:", "5000 child rows x 4000 parent rows", "16777216 pairs"}},
    {"digraph {\n  x [rows=3000 dim=8]\n  mu [kind=param rows=3000 dim=8]\n"
     "  f [kind=factor sim=\"neg-dist\"]\n  mu -> f [role=parent]\n"
     "  f -> x [role=child]\n}\n",
     LSE_EDOM,
     {"<memory>:4:", "(dim 8)", "67108864 pairs x dim"}},
    {"digraph { a [rows=1 dim=1] } digraph { b [rows=1 dim=1] }\n",
     LSE_EPARSE,
     {"<memory>:1:", "more than one graph"}},
    {"digraph { view=expanded; \"x[0]\" }\n",
     LSE_EPARSE,
     {"<memory>:", "expanded picture"}},
    {"", LSE_EPARSE, {"<memory>:", "no graph"}},
    {"digraph { }\n", LSE_EPARSE, {"<memory>:", "no nodes"}},
};
#define N_BAD (sizeof bad / sizeof bad[0])

START_TEST(test_malformed)
{
    const bad_spec *b = &bad[_i];
    lse_graph *g = (lse_graph *)&b; /* must be reset to NULL */
    lse_error err = {0};
    const lse_status st = lse_viz_read_spec(NULL, b->text, &g, &err);
    ck_assert_msg(st == b->status, "spec %d: got %s, want %s: %s", _i,
                  lse_strerror(st), lse_strerror(b->status), err.message);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(err.status, b->status);
    ck_assert_msg(strncmp(err.message, "lse_viz_read_spec: ", 19) == 0, "%s",
                  err.message);
    for (size_t k = 0; k < 3 && b->want[k] != NULL; k++)
        ck_assert_msg(strstr(err.message, b->want[k]) != NULL,
                      "spec %d: '%s' not in '%s'", _i, b->want[k], err.message);
    /* a failed read leaves no state behind: a good spec reads next */
    lse_assert_ok(
        lse_viz_read_spec(NULL, "digraph { a [rows=1 dim=1] }", &g, &err));
    ck_assert_uint_eq(lse_graph_n_nodes(g), 1);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_null_arguments)
{
    lse_graph *g = NULL;
    lse_error err;
    lse_assert_status(lse_viz_read_spec(NULL, NULL, &g, &err), LSE_EFAULT);
    lse_assert_status(lse_viz_read_spec(NULL, "digraph {}", NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_viz_read_spec(NULL, "digraph {}", &g, NULL),
                      LSE_EPARSE);
}
END_TEST

/* Line numbers survive comments, strings with newlines, '#' lines and
 * attribute values that spell a node's name. */
START_TEST(test_line_numbers)
{
    static const char spec[] =
        "# 1 \"preprocessed\"\n"                         /* 1 */
        "digraph { /* x [rows=1]\n"                      /* 2 */
        "   still a comment: f */ label=\"x\nf\"\n"      /* 3-4 */
        "  // x f\n"                                     /* 5 */
        "  mu [kind=param rows=2 dim=2 label=x]\n"       /* 6 */
        "  x [rows=3 dim=3]\n"                           /* 7 */
        "  \"f\" [kind=factor sim=dot]\n"                /* 8 */
        "  mu -> f [role=parent]; f -> x [role=child]\n" /* 9 */
        "}\n";
    lse_graph *g = NULL;
    lse_error err;
    lse_assert_status(lse_viz_read_spec("lines.dot", spec, &g, &err), LSE_EDIM);
    ck_assert_msg(strstr(err.message, "lines.dot:8: factor 'f'") != NULL, "%s",
                  err.message);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("spec");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_round_trip, 0, (int)N_MAKERS);
    tcase_add_test(tc, test_handwritten);
    tcase_add_test(tc, test_daam_and_file);
    tcase_add_loop_test(tc, test_malformed, 0, (int)N_BAD);
    tcase_add_test(tc, test_null_arguments);
    tcase_add_test(tc, test_line_numbers);
    suite_add_tcase(s, tc);
    return s;
}
