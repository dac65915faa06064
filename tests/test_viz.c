#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <graphviz/cgraph.h>

#include "lse_check.h"
#include <lsegraph/viz.h>

/* A GMM-shaped graph: x (6, 2) observed, mu/logw/chol (2 rows) params, one
 * LSE term, plus a custom quadratic term on mu. */

/* Nodes and edges of the model, not the drawing aids lse_viz_to_dot adds
 * (plate labels and the legend, kind=plate/legend; the invisible edges
 * that keep expanded rows in order, role=order). */
static int model_nodes(Agraph_t *G)
{
    int n = 0;
    for (Agnode_t *v = agfstnode(G); v != NULL; v = agnxtnode(G, v)) {
        const char *k = agget(v, (char *)"kind");
        n += k == NULL || (strcmp(k, "plate") != 0 && strcmp(k, "legend") != 0);
    }
    return n;
}

static int model_edges(Agraph_t *G)
{
    int n = 0;
    for (Agnode_t *v = agfstnode(G); v != NULL; v = agnxtnode(G, v))
        for (Agedge_t *e = agfstout(G, v); e != NULL; e = agnxtout(G, e)) {
            const char *r = agget(e, (char *)"role");
            n += r == NULL || strcmp(r, "order") != 0;
        }
    return n;
}

static lse_graph *gmm_like(void)
{
    lse_graph *g = lse_graph_new();
    lse_node *x, *mu, *logw, *chol;
    lse_assert_ok(lse_graph_add_node(g, "x", 6, 2, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "mu", 2, 2, LSE_NODE_PARAM, &mu));
    lse_assert_ok(lse_graph_add_node(g, "logw", 2, 1, LSE_NODE_PARAM, &logw));
    lse_assert_ok(lse_graph_add_node(g, "chol", 2, 4, LSE_NODE_PARAM, &chol));
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(lse_node_value(x), i, j, sin(1.3 * i + j));
    for (size_t k = 0; k < 2; k++) {
        gsl_matrix_set(lse_node_value(mu), k, 0, k ? 0.5 : -0.5);
        gsl_matrix_set(lse_node_value(chol), k, 0, 1.0);
        gsl_matrix_set(lse_node_value(chol), k, 3, 1.0);
    }
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_gaussian;
    lse_node *params[] = {logw, chol};
    spec.param = params;
    lse_assert_ok(lse_graph_add_lse(g, "mixture", &spec, NULL));
    const lse_view v[] = {lse_view_all(mu)};
    lse_assert_ok(lse_graph_add_custom(g, "prior", lse_custom_quadratic, NULL, v, 1, NULL));
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    return g;
}

START_TEST(test_dot_reads_back)
{
    lse_graph *g = gmm_like();
    char *dot = NULL;
    lse_error err;
    lse_assert_ok(lse_viz_to_dot(g, NULL, &dot, &err));
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    /* 4 variables + 2 factors */
    ck_assert_int_eq(model_nodes(G), 6);
    Agnode_t *x = agnode(G, (char *)"x", 0), *f = agnode(G, (char *)"mixture", 0);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(agget(x, (char *)"observed"), "true");
    ck_assert_str_eq(agget(x, (char *)"rows"), "6");
    ck_assert_str_eq(agget(f, (char *)"sim"), "gaussian");
    ck_assert_str_eq(agget(f, (char *)"kind"), "factor");
    ck_assert_ptr_nonnull(strstr(agget(f, (char *)"label"), "LSE gaussian(cov=full)"));
    /* edges: mu->mixture (parent), mixture->x (child), logw, chol (param),
     * mu->prior (view) */
    ck_assert_int_eq(model_edges(G), 5);
    Agedge_t *e = agedge(G, f, x, NULL, 0);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(agget(e, (char *)"role"), "child");
    Agnode_t *mu = agnode(G, (char *)"mu", 0);
    ck_assert_str_eq(agget(agedge(G, mu, f, NULL, 0), (char *)"role"), "parent");
    ck_assert_str_eq(agget(mu, (char *)"kind"), "param");
    agclose(G);
    free(dot);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_expanded_and_render)
{
    lse_graph *g = gmm_like();
    lse_viz_opts o = lse_viz_opts_default();
    o.expand = 1;
    char *dot = NULL;
    lse_error err;
    lse_assert_ok(lse_viz_to_dot(g, &o, &dot, &err));
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    /* rows of x (6) and mu (2); logw and chol are parameters only, not
     * children or parents, so their rows are not drawn */
    ck_assert_int_eq(model_nodes(G), 6 + 2);
    /* every edge weight is the softmax entry, heavy enough to draw */
    ck_assert_int_gt(model_edges(G), 0);
    ck_assert_int_le(model_edges(G), 12);
    agclose(G);
    free(dot);
    char dir[] = "/tmp/lse-viz-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    const char *formats[] = {"svg", "png", "pdf", "dot"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/g.%s", dir, formats[i]);
        lse_assert_ok(lse_viz_render(g, NULL, formats[i], path, &err));
        FILE *f = fopen(path, "rb");
        ck_assert_ptr_nonnull(f);
        char head[8] = {0};
        ck_assert_uint_gt(fread(head, 1, 5, f), 3);
        fclose(f);
        if (i == 1)
            ck_assert(memcmp(head, "\x89PNG", 4) == 0);
        if (i == 2)
            ck_assert(memcmp(head, "%PDF", 4) == 0);
        unlink(path);
    }
    lse_assert_status(lse_viz_render(g, NULL, "bmpx", path, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "unknown format"));
    o.expand = 0;
    o.layout = "nolayout";
    lse_assert_status(lse_viz_to_dot(g, &o, &dot, &err), LSE_EINVAL);
    /* neato and circo draw no plates: refused for a graph that has any,
     * and for DOT text with a cluster */
    o.layout = "neato";
    lse_assert_status(lse_viz_to_dot(g, &o, &dot, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "draws no plates"));
    ck_assert_ptr_nonnull(strstr(err.message, "use dot or fdp"));
    o.expand = 1;
    lse_assert_status(lse_viz_to_dot(g, &o, &dot, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "expanded view"));
    o.expand = 0;
    snprintf(path, sizeof path, "%s/c.svg", dir);
    lse_assert_status(
        lse_viz_render_dot("digraph { subgraph cluster_a { a } a -> b }",
                           "circo", "svg", path, &err),
        LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "cluster_a"));
    lse_assert_ok(lse_viz_render_dot("digraph { a -> b }", "circo", "svg",
                                     path, &err));
    unlink(path);
    lse_assert_status(lse_viz_render_dot("digraph {", "dot", "svg", path, &err),
                      LSE_EPARSE);
    snprintf(path, sizeof path, "%s/no/such/dir/g.svg", dir);
    lse_assert_status(lse_viz_render(g, NULL, "svg", path, &err), LSE_EIO);
    rmdir(dir);
    lse_graph_free(g);
}
END_TEST

START_TEST(test_heatmap)
{
    gsl_matrix *m = gsl_matrix_alloc(3, 4);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 4; j++)
            gsl_matrix_set(m, i, j, (double)(i * 4 + j));
    gsl_matrix_set(m, 2, 3, -INFINITY);
    char *dot = NULL;
    lse_error err;
    lse_assert_ok(lse_viz_matrix_to_dot(m, "softmax <A>", "children", "parents", &dot, &err));
    ck_assert_ptr_nonnull(strstr(dot, "#440154")); /* the minimum colour */
    ck_assert_ptr_nonnull(strstr(dot, "#bbbbbb")); /* masked cell */
    ck_assert_ptr_nonnull(strstr(dot, "softmax &lt;A&gt;"));
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    agclose(G);
    free(dot);
    gsl_matrix *big = gsl_matrix_alloc(201, 2);
    lse_assert_status(lse_viz_matrix_to_dot(big, NULL, NULL, NULL, &dot, &err), LSE_EDIM);
    gsl_matrix_free(big);
    gsl_matrix_free(m);
}
END_TEST

/* Rendered files get the mode of a new file (0666 minus the umask), not
 * mkstemp's 0600, and the heat map keeps its columns square. */
START_TEST(test_file_mode_and_heatmap_cells)
{
    lse_graph *g = gmm_like();
    char dir[] = "/tmp/lse-viz-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const mode_t old = umask(022);
    const char *formats[] = {"svg", "dot"};
    char path[256];
    lse_error err;
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/g.%s", dir, formats[i]);
        lse_assert_ok(lse_viz_render(g, NULL, formats[i], path, &err));
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        ck_assert_int_eq(sb.st_mode & 0777, 0644);
        unlink(path);
    }
    umask(old);
    rmdir(dir);
    gsl_matrix *m = gsl_matrix_alloc(2, 3);
    gsl_matrix_set_all(m, 0.5);
    char *dot = NULL;
    lse_assert_ok(lse_viz_matrix_to_dot(m, "a\nb", NULL, NULL, &dot, &err));
    /* a constant matrix: every cell the lowest colour; 6 fixed-size cells
     * plus 11 legend swatches; the newline of the title is a line break */
    size_t fixed = 0;
    for (const char *p = dot; (p = strstr(p, "FIXEDSIZE")) != NULL; p++)
        fixed++;
    ck_assert_uint_eq(fixed, 3 + 6 + 11); /* column indices, cells, legend */
    ck_assert_ptr_nonnull(strstr(dot, "a<BR/>b"));
    free(dot);
    gsl_matrix_free(m);
    lse_graph_free(g);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("viz");
    TCase *tc = tcase_create("viz");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dot_reads_back);
    tcase_add_test(tc, test_expanded_and_render);
    tcase_add_test(tc, test_heatmap);
    tcase_add_test(tc, test_file_mode_and_heatmap_cells);
    suite_add_tcase(s, tc);
    return s;
}
