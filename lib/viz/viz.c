#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <lsegraph/viz.h>

/* Factor-graph export through libcgraph and rendering through libgvc.
 * Only the public lsegraph API is used: a model written in C renders
 * exactly like the built-in ones. */

/* Graphviz reports through agerr, which prints unless a handler is set:
 * collect its text instead (the library never prints). */
static char gv_msg[512];

static int collect(char *msg)
{
    const size_t used = strlen(gv_msg);
    if (used + 1 < sizeof gv_msg)
        snprintf(gv_msg + used, sizeof gv_msg - used, "%s", msg);
    return 0;
}

static void gv_quiet(void)
{
    gv_msg[0] = '\0';
    agseterrf(collect);
    agseterr(AGERR);
}

static const char *gv_error(void)
{
    size_t n = strlen(gv_msg);
    while (n > 0 && (gv_msg[n - 1] == '\n' || gv_msg[n - 1] == ' '))
        gv_msg[--n] = '\0';
    return gv_msg[0] ? gv_msg : "unknown Graphviz error";
}

lse_viz_opts lse_viz_opts_default(void)
{
    lse_viz_opts o = {.expand = 0,
                      .max_rows = 40,
                      .min_weight = 0.01,
                      .layout = "dot",
                      .title = NULL};
    return o;
}

static int known_layout(const char *l)
{
    static const char *const ok[] = {"dot",   "neato", "fdp",
                                     "circo", "twopi", "sfdp"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(l, ok[i]) == 0)
            return 1;
    return 0;
}

static void set(void *obj, const char *name, const char *value)
{
    agsafeset(obj, (char *)name, (char *)value, (char *)"");
}

static void setf(void *obj, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void setf(void *obj, const char *name, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    set(obj, name, buf);
}

static int plated(lse_graph *g, const lse_node *n);

/* Does the plate of @p rows hold observed data (a clamped variable that
 * is not a parameter)? Then it is labelled "N = rows", else "K = rows". */
static int plate_observed(lse_graph *g, size_t rows)
{
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        const lse_node *n = lse_graph_node(g, i);
        if (lse_node_rows(n) == rows && lse_node_is_clamped(n) &&
            !lse_node_is_param(n) && plated(g, n))
            return 1;
    }
    return 0;
}

/* Does @p n belong in a plate? Every variable with more than one row
 * does; a parameter only when it is a term's parent or its rows index the
 * parents of a term it serves (log-weights, covariance factors, dynamics
 * and gate widths of the gaussian, lingauss and daam similarities, the
 * chain's transition logits: one row per component), not when they are
 * the rows of a weight matrix (bilinear, nonlinear). */
static int plated(lse_graph *g, const lse_node *n)
{
    const size_t rows = lse_node_rows(n);
    if (rows <= 1)
        return 0;
    if (!lse_node_is_param(n))
        return 1;
    for (size_t m = 0; m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        const lse_view p = lse_term_parent(t);
        if (p.node == NULL)
            continue;
        if (p.node == n)
            return 1;
        /* per-component parameters: those of the built-in similarities
         * whose parameters have one row per parent, and the chain's
         * transition logits */
        const char *sim = lse_term_sim(t)->name;
        const int per_parent = strcmp(sim, "gaussian") == 0 ||
                               strcmp(sim, "lingauss") == 0 ||
                               strcmp(sim, "daam") == 0;
        int serves = lse_term_chain_trans(t) == n;
        for (size_t k = 0; per_parent && k < lse_term_n_param(t); k++)
            serves |= lse_term_param(t, k) == n;
        if (serves && p.count == rows)
            return 1;
    }
    return 0;
}

static Agnode_t *variable(Agraph_t *G, Agraph_t **plates, size_t *plate_rows,
                          size_t *n_plates, lse_graph *g, const lse_node *n,
                          size_t order)
{
    const size_t rows = lse_node_rows(n);
    Agraph_t *where = G;
    if (plated(g, n)) {
        size_t p = 0;
        while (p < *n_plates && plate_rows[p] != rows)
            p++;
        if (p == *n_plates) {
            char name[64];
            snprintf(name, sizeof name, "cluster_plate_%zu", rows);
            plates[p] = agsubg(G, name, 1);
            if (plates[p] == NULL)
                return NULL;
            plate_rows[p] = rows;
            (*n_plates)++;
            setf(plates[p], "label", "%s = %zu",
                 plate_observed(g, rows) ? "N" : "K", rows);
            set(plates[p], "style", "rounded");
            set(plates[p], "labeljust", "r");
            /* with rankdir=BT, "b" puts the label at the top, where dot
             * reserves room for it ("t" overlaps the nodes) */
            set(plates[p], "labelloc", "b");
            set(plates[p], "kind", "plate");
            setf(plates[p], "rows", "%zu", rows);
        }
        where = plates[p];
    }
    Agnode_t *v = agnode(where, (char *)lse_node_name(n), 1);
    if (v == NULL)
        return NULL;
    const int param = lse_node_is_param(n), obs = lse_node_is_clamped(n);
    set(v, "kind", param ? "param" : "variable");
    setf(v, "order", "%zu", order);
    setf(v, "rows", "%zu", rows);
    setf(v, "dim", "%zu", lse_node_dim(n));
    set(v, "observed", obs ? "true" : "false");
    setf(v, "label", "%s\\n%zux%zu", lse_node_name(n), rows, lse_node_dim(n));
    set(v, "shape", param ? "box" : "circle");
    set(v, "style", obs ? "filled" : (param ? "rounded" : "solid"));
    if (obs)
        set(v, "fillcolor", "gray80");
    set(v, "fontsize", "10");
    return v;
}

static void view_attrs(Agedge_t *e, lse_view v)
{
    if (v.first != 0 || v.count != lse_node_rows(v.node)) {
        setf(e, "first", "%zu", v.first);
        setf(e, "count", "%zu", v.count);
        setf(e, "label", "[%zu:%zu)", v.first, v.first + v.count);
        set(e, "fontsize", "8");
    }
}

static Agedge_t *edge(Agraph_t *G, Agnode_t *t, Agnode_t *h, const char *role,
                      const char *style)
{
    Agedge_t *e = agedge(G, t, h, NULL, 1);
    set(e, "role", role);
    if (style != NULL)
        set(e, "style", style);
    return e;
}

/* A factor node named after its term; when a variable has that name the
 * node gets a free id "term:NAME" (or "term:NAME:2", ...) and keeps the
 * term's name in the attribute "name", which lse_viz_read_spec reads. */
static Agnode_t *factor_node(Agraph_t *G, const char *name)
{
    if (agnode(G, (char *)name, 0) == NULL)
        return agnode(G, (char *)name, 1);
    const size_t len = strlen(name) + 32;
    char *id = malloc(len);
    if (id == NULL)
        return NULL;
    snprintf(id, len, "term:%s", name);
    for (unsigned k = 2; agnode(G, id, 0) != NULL; k++)
        snprintf(id, len, "term:%s:%u", name, k);
    Agnode_t *f = agnode(G, id, 1);
    free(id);
    if (f != NULL)
        set(f, "name", name);
    return f;
}

/* The factor view; 0 when out of memory. */
static int factor_graph(Agraph_t *G, lse_graph *g)
{
    const size_t nn = lse_graph_n_nodes(g);
    Agraph_t **plates = calloc(nn + 1, sizeof *plates);
    size_t *plate_rows = calloc(nn + 1, sizeof *plate_rows);
    size_t n_plates = 0;
    int ok = plates != NULL && plate_rows != NULL;
    for (size_t i = 0; ok && i < nn; i++)
        ok = variable(G, plates, plate_rows, &n_plates, g, lse_graph_node(g, i),
                      i) != NULL;
    for (size_t m = 0; ok && m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        Agnode_t *f = factor_node(G, lse_term_name(t));
        if (f == NULL) {
            ok = 0;
            break;
        }
        char desc[256];
        lse_term_describe(t, desc, sizeof desc);
        set(f, "kind", "factor");
        setf(f, "order", "%zu", nn + m);
        setf(f, "label", "%s\\n%s", lse_term_name(t), desc);
        set(f, "shape", "box");
        set(f, "style", lse_term_enabled(t) ? "filled" : "filled,dashed");
        set(f, "fillcolor", lse_term_enabled(t) ? "gray20" : "gray60");
        set(f, "fontcolor", "white");
        set(f, "fontsize", "9");
        set(f, "enabled", lse_term_enabled(t) ? "true" : "false");
        if (lse_term_kind_of(t) == LSE_TERM_CUSTOM) {
            set(f, "term", "custom");
            set(f, "custom", lse_term_custom(t)->name);
            const lse_custom_type *ct = lse_term_custom(t);
            if (ct->describe != NULL && lse_term_config(t) != NULL) {
                char cfg[256] = "";
                ct->describe(lse_term_config(t), cfg, sizeof cfg);
                set(f, "config", cfg);
            }
            for (size_t i = 0; i < lse_term_n_views(t); i++) {
                const lse_view v = lse_term_view(t, i);
                Agnode_t *src = agnode(G, (char *)lse_node_name(v.node), 0);
                Agedge_t *e = edge(G, src, f, "view", NULL);
                set(e, "dir", "none");
                setf(e, "index", "%zu", i);
                view_attrs(e, v);
            }
            continue;
        }
        const lse_sim_type *sim = lse_term_sim(t);
        set(f, "term", "lse");
        set(f, "sim", sim->name);
        if (sim->describe != NULL && lse_term_config(t) != NULL) {
            char cfg[256] = "";
            sim->describe(lse_term_config(t), cfg, sizeof cfg);
            set(f, "config", cfg);
        }
        setf(f, "beta", "%.17g", lse_term_beta(t));
        setf(f, "mask", "%u", lse_term_mask(t));
        set(f, "reduce",
            lse_term_reduce(t) == LSE_REDUCE_CHAIN ? "chain" : "rows");
        const lse_view c = lse_term_child(t), p = lse_term_parent(t),
                       x = lse_term_context(t);
        view_attrs(edge(G, agnode(G, (char *)lse_node_name(p.node), 0), f,
                        "parent", NULL),
                   p);
        view_attrs(edge(G, f, agnode(G, (char *)lse_node_name(c.node), 0),
                        "child", "bold"),
                   c);
        if (x.node != NULL)
            view_attrs(edge(G, agnode(G, (char *)lse_node_name(x.node), 0), f,
                            "context", "dashed"),
                       x);
        for (size_t k = 0; k < lse_term_n_param(t); k++) {
            const lse_node *pn = lse_term_param(t, k);
            if (pn == NULL)
                continue;
            Agedge_t *e = edge(G, agnode(G, (char *)lse_node_name(pn), 0), f,
                               "param", "dotted");
            set(e, "slot", sim->param_names != NULL ? sim->param_names[k] : "");
        }
        const lse_node *ci = lse_term_chain_init(t),
                       *ct = lse_term_chain_trans(t);
        if (ci != NULL)
            set(edge(G, agnode(G, (char *)lse_node_name(ci), 0), f, "param",
                     "dotted"),
                "slot", "chain_init");
        if (ct != NULL)
            set(edge(G, agnode(G, (char *)lse_node_name(ct), 0), f, "param",
                     "dotted"),
                "slot", "chain_trans");
    }
    free(plates);
    free(plate_rows);
    return ok;
}

/* Does node @p n take part in an enabled LSE term with a softmax? */
static int in_softmax_term(lse_graph *g, const lse_node *n)
{
    for (size_t m = 0; m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        if (lse_term_softmax(t) != NULL && lse_term_enabled(t) &&
            (lse_term_child(t).node == n || lse_term_parent(t).node == n))
            return 1;
    }
    return 0;
}

static int is_parent(lse_graph *g, const lse_node *n)
{
    for (size_t m = 0; m < lse_graph_n_terms(g); m++)
        if (lse_term_parent(lse_graph_term(g, m)).node == n)
            return 1;
    return 0;
}

/* Expanded view: one node per row (at most max_rows per variable) of
 * every variable that is a child or parent of an LSE term, one edge per
 * child-parent pair whose softmax weight reaches min_weight, drawn from
 * the parent row to the child row with width and opacity following the
 * weight; one colour per term. Rows of parameters that are neither (log
 * weights, Cholesky factors) are left out. */
static void expanded_graph(Agraph_t *G, lse_graph *g, const lse_viz_opts *o)
{
    static const char *const palette[] = {"#1f4e9c", "#c0392b", "#1e8449",
                                          "#7d3c98", "#b9770e", "#117a65"};
    const size_t maxr = o->max_rows ? o->max_rows : 40;
    char name[300];
    set(G, "rankdir", "TB");
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        const lse_node *n = lse_graph_node(g, i);
        if (!in_softmax_term(g, n))
            continue;
        snprintf(name, sizeof name, "cluster_%s", lse_node_name(n));
        Agraph_t *c = agsubg(G, name, 1);
        const size_t rows = lse_node_rows(n);
        if (rows > maxr)
            setf(c, "label", "%s (first %zu of %zu rows)", lse_node_name(n),
                 maxr, rows);
        else
            setf(c, "label", "%s", lse_node_name(n));
        set(c, "kind", "rows");
        /* label on the side away from the weight edges: parents sit on
         * top (their label above), children below (label underneath) */
        set(c, "labelloc", is_parent(g, n) ? "t" : "b");
        set(c, "fontsize", "10");
        set(c, "style", lse_node_is_clamped(n) ? "filled" : "rounded");
        if (lse_node_is_clamped(n))
            set(c, "fillcolor", "gray92");
        for (size_t r = 0; r < rows && r < maxr; r++) {
            snprintf(name, sizeof name, "%s[%zu]", lse_node_name(n), r);
            Agnode_t *v = agnode(c, name, 1);
            setf(v, "label", "%zu", r);
            set(v, "shape", lse_node_is_param(n) ? "box" : "circle");
            set(v, "fontsize", "8");
            set(v, "width", "0.3");
            set(v, "height", "0.3");
            set(v, "fixedsize", "true");
            set(v, "node", lse_node_name(n));
            setf(v, "row", "%zu", r);
        }
    }
    size_t n_drawn = 0;
    for (size_t m = 0; m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        const gsl_matrix *A = lse_term_softmax(t);
        if (A == NULL || !lse_term_enabled(t))
            continue;
        const char *hue = palette[n_drawn++ % 6];
        const lse_view c = lse_term_child(t), p = lse_term_parent(t);
        for (size_t i = 0; i < c.count; i++) {
            if (c.first + i >= maxr)
                break;
            for (size_t j = 0; j < p.count; j++) {
                if (p.first + j >= maxr)
                    break;
                const double w = gsl_matrix_get(A, i, j);
                if (!lse_term_allowed(t, i, j) || !(w >= o->min_weight))
                    continue;
                snprintf(name, sizeof name, "%s[%zu]", lse_node_name(p.node),
                         p.first + j);
                Agnode_t *a = agnode(G, name, 0);
                snprintf(name, sizeof name, "%s[%zu]", lse_node_name(c.node),
                         c.first + i);
                Agnode_t *b = agnode(G, name, 0);
                if (a == NULL || b == NULL)
                    continue;
                Agedge_t *e = agedge(G, a, b, NULL, 1);
                set(e, "role", "weight");
                set(e, "term", lse_term_name(t));
                setf(e, "weight_value", "%.6g", w);
                setf(e, "penwidth", "%.3f", 0.3 + 3.0 * w);
                setf(e, "color", "%s%02x", hue,
                     (unsigned)(40 + 215 * (w > 1 ? 1 : w)));
                set(e, "arrowsize", "0.4");
                if (a == b) /* a row attending to itself */
                    set(e, "dir", "none");
            }
        }
    }
}

static lse_status agraph_to_string(Agraph_t *G, char **out, lse_error *err,
                                   const char *fn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    const int rc = agwrite(G, f);
    fclose(f);
    if (rc != 0) {
        free(buf);
        return lse_error_set(err, LSE_EIO, fn, "Graphviz: %s", gv_error());
    }
    *out = buf;
    return LSE_OK;
}

lse_status lse_viz_to_dot(lse_graph *g, const lse_viz_opts *opts, char **out,
                          lse_error *err)
{
    static const char fn[] = "lse_viz_to_dot";
    if (out != NULL)
        *out = NULL;
    if (g == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const lse_viz_opts o = opts != NULL ? *opts : lse_viz_opts_default();
    if (o.layout != NULL && !known_layout(o.layout))
        return lse_error_set(err, LSE_EINVAL, fn,
                             "unknown layout '%s' (dot, neato, fdp, circo)",
                             o.layout);
    if (o.expand && o.max_rows > LSE_VIZ_MAX_EXPANDED_ROWS)
        return lse_error_set(err, LSE_EDOM, fn,
                             "the expanded view draws at most %zu rows per "
                             "node, not %zu",
                             (size_t)LSE_VIZ_MAX_EXPANDED_ROWS, o.max_rows);
    gv_quiet();
    Agraph_t *G = agopen((char *)"lsegraph", Agdirected, NULL);
    if (G == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "Graphviz: %s", gv_error());
    set(G, "layout", o.layout != NULL ? o.layout : "dot");
    set(G, "rankdir", "BT");
    set(G, "fontsize", "11");
    set(G, "view", o.expand ? "expanded" : "factor");
    if (o.title != NULL) {
        set(G, "label", o.title);
        set(G, "labelloc", "t");
    }
    if (o.expand)
        expanded_graph(G, g, &o);
    else if (!factor_graph(G, g)) {
        agclose(G);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    const lse_status st = agraph_to_string(G, out, err, fn);
    agclose(G);
    return st;
}

/* One Graphviz context for the process. Graphviz 2.43's pango plugin
 * caches a pointer to the last font name, which gvFreeContext frees: a
 * second context then reads freed memory (valgrind shows it). So the
 * context is made once and kept; it is reachable until exit. */
static GVC_t *shared_context(void)
{
    static GVC_t *gvc = NULL;
    if (gvc == NULL)
        gvc = gvContext();
    return gvc;
}

lse_status lse_viz_render_dot(const char *dot, const char *layout,
                              const char *format, const char *path,
                              lse_error *err)
{
    static const char fn[] = "lse_viz_render_dot";
    if (dot == NULL || format == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (layout == NULL)
        layout = "dot";
    if (!known_layout(layout))
        return lse_error_set(err, LSE_EINVAL, fn, "unknown layout '%s'",
                             layout);
    if (strcmp(format, "dot") == 0)
        return lse_file_write_atomic(path, dot, strlen(dot), err);
    if (strcmp(format, "svg") != 0 && strcmp(format, "png") != 0 &&
        strcmp(format, "pdf") != 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "unknown format '%s' (svg, png, pdf, dot)",
                             format);
    gv_quiet();
    Agraph_t *G = agmemread(dot);
    /* cgraph keeps unread input (a second graph) for the next call */
    for (Agraph_t *more; (more = agmemread("")) != NULL;)
        agclose(more);
    if (G == NULL)
        return lse_error_set(err, LSE_EPARSE, fn, "Graphviz: %s", gv_error());
    GVC_t *gvc = shared_context();
    lse_status st = LSE_OK;
    char *data = NULL;
    unsigned int len = 0;
    if (gvc == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    if (gvLayout(gvc, G, layout) != 0) {
        st = lse_error_set(err, LSE_EIO, fn, "layout '%s' failed: %s", layout,
                           gv_error());
        goto done;
    }
    /* render into memory, then write completely or not at all (in place
     * for devices such as /dev/null: lse_file_write_atomic decides) */
    const int rc = gvRenderData(gvc, G, format, &data, &len);
    gvFreeLayout(gvc, G);
    if (rc != 0 || data == NULL) {
        st = lse_error_set(err, LSE_EIO, fn, "cannot render %s: %s", format,
                           gv_error());
        goto done;
    }
    st = lse_file_write_atomic(path, data, len, err);
done:
    if (data != NULL)
        gvFreeRenderData(data);
    agclose(G);
    return st;
}

lse_status lse_viz_render(lse_graph *g, const lse_viz_opts *opts,
                          const char *format, const char *path, lse_error *err)
{
    char *dot = NULL;
    lse_status st = lse_viz_to_dot(g, opts, &dot, err);
    if (st == LSE_OK)
        st = lse_viz_render_dot(dot, opts != NULL ? opts->layout : NULL, format,
                                path, err);
    free(dot);
    return st;
}

/* Heat maps ------------------------------------------------------------- */

/* viridis, sampled at five points and interpolated linearly */
static void colour(double t, char out[8])
{
    static const double c[5][3] = {{68, 1, 84},
                                   {59, 82, 139},
                                   {33, 145, 140},
                                   {94, 201, 98},
                                   {253, 231, 37}};
    if (!(t >= 0))
        t = 0;
    if (t > 1)
        t = 1;
    const double s = t * 4;
    const size_t i = s >= 4 ? 3 : (size_t)s;
    const double f = s - (double)i;
    unsigned rgb[3];
    for (size_t k = 0; k < 3; k++)
        rgb[k] = (unsigned)lround(c[i][k] + f * (c[i + 1][k] - c[i][k]));
    snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

typedef struct strbuf {
    char *s;
    size_t len, cap;
    int failed;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_add(strbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(b->s ? b->s + b->len : NULL,
                                b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->s != NULL && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        const size_t cap = 2 * (b->cap + (size_t)n + 64);
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static void escape(strbuf *b, const char *s)
{
    for (; s != NULL && *s; s++) {
        switch (*s) {
        case '<':
            sb_add(b, "&lt;");
            break;
        case '>':
            sb_add(b, "&gt;");
            break;
        case '&':
            sb_add(b, "&amp;");
            break;
        case '"':
            sb_add(b, "&quot;");
            break;
        case '\n':
            sb_add(b, "<BR/>");
            break;
        default:
            sb_add(b, "%c", *s);
        }
    }
}

lse_status lse_viz_matrix_to_dot(const gsl_matrix *m, const char *title,
                                 const char *row_label, const char *col_label,
                                 char **out, lse_error *err)
{
    static const char fn[] = "lse_viz_matrix_to_dot";
    if (out != NULL)
        *out = NULL;
    if (m == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (m->size1 > 200 || m->size2 > 200)
        return lse_error_set(err, LSE_EDIM, fn,
                             "matrix is %zux%zu; at most 200x200 can be drawn",
                             m->size1, m->size2);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            if (isfinite(v)) {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
    if (!isfinite(lo)) {
        lo = 0;
        hi = 1;
    }
    const double span = hi > lo ? hi - lo : 1.0;
    const unsigned cell = m->size2 > 60 ? 6 : (m->size2 > 16 ? 14 : 20);
    /* Three pieces, so that no text widens the matrix columns: the title
     * is the graph label, the matrix a table of FIXEDSIZE square cells,
     * the legend and the axis names a second node below it. */
    strbuf b = {0};
    sb_add(&b, "digraph heatmap {\n  view=\"matrix\";\n  labelloc=t;\n"
               "  ranksep=0.1;\n");
    if (title != NULL) {
        sb_add(&b, "  label=<<B>");
        escape(&b, title);
        sb_add(&b, "</B>>;\n");
    }
    sb_add(&b, "  node [shape=plaintext];\n"
               "  m [label=<<TABLE BORDER=\"0\" CELLBORDER=\"0\" "
               "CELLSPACING=\"1\" CELLPADDING=\"0\">\n");
    if (m->size2 <= 60) { /* column indices */
        sb_add(&b, "<TR><TD></TD>");
        for (size_t j = 0; j < m->size2; j++)
            sb_add(&b,
                   "<TD WIDTH=\"%u\" FIXEDSIZE=\"TRUE\" HEIGHT=\"10\">"
                   "<FONT POINT-SIZE=\"7\">%zu</FONT></TD>",
                   cell, j);
        sb_add(&b, "</TR>\n");
    }
    for (size_t i = 0; i < m->size1; i++) {
        sb_add(&b,
               "<TR><TD ALIGN=\"RIGHT\"><FONT POINT-SIZE=\"7\">%zu "
               "</FONT></TD>",
               i);
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            char col[8] = "#bbbbbb"; /* masked / non-finite */
            if (isfinite(v))
                colour((v - lo) / span, col);
            sb_add(&b,
                   "<TD BGCOLOR=\"%s\" WIDTH=\"%u\" HEIGHT=\"%u\" "
                   "FIXEDSIZE=\"TRUE\" TITLE=\"%.4g\"></TD>",
                   col, cell, cell, v);
        }
        sb_add(&b, "</TR>\n");
    }
    sb_add(&b, "</TABLE>>];\n");
    /* legend: the colour scale from min to max, then the axes */
    sb_add(&b,
           "  legend [label=<<TABLE BORDER=\"0\" CELLSPACING=\"0\" "
           "CELLPADDING=\"1\"><TR><TD><FONT POINT-SIZE=\"9\">%.4g "
           "</FONT></TD>",
           lo);
    for (int k = 0; k <= 10; k++) {
        char col[8];
        colour(k / 10.0, col);
        sb_add(&b,
               "<TD BGCOLOR=\"%s\" WIDTH=\"12\" HEIGHT=\"8\" "
               "FIXEDSIZE=\"TRUE\"></TD>",
               col);
    }
    sb_add(&b, "<TD><FONT POINT-SIZE=\"9\"> %.4g</FONT></TD></TR>\n", hi);
    sb_add(&b, "<TR><TD COLSPAN=\"13\"><FONT POINT-SIZE=\"9\">");
    if (row_label != NULL) {
        sb_add(&b, "rows: ");
        escape(&b, row_label);
        sb_add(&b, "<BR/>");
    }
    if (col_label != NULL) {
        sb_add(&b, "columns: ");
        escape(&b, col_label);
        sb_add(&b, "<BR/>");
    }
    sb_add(&b, "grey = masked</FONT></TD></TR></TABLE>>];\n"
               "  m -> legend [style=invis];\n}\n");
    if (b.failed) {
        free(b.s);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    *out = b.s;
    return LSE_OK;
}
