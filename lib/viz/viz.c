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
                      .title = NULL,
                      .plates = NULL,
                      .n_plates = 0,
                      .legend = 0,
                      .theme = "screen",
                      .dpi = 0};
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

/* The plates of a factor view: one cluster per label. */
typedef struct plates {
    Agraph_t **g;
    char **label;
    size_t n;
    int clusters; /* the layout draws clusters (dot, fdp) */
    int edge_labels; /* dot places edge labels beside the edge; the spring
                        layouts put them on it, so the row ranges go into
                        the factor's label instead */
    const lse_viz_opts *o;
    const char *font;
} plates;

/* The plate label of @p n into @p buf, or NULL: the caller's name, or
 * "R rows" for an unnamed node that belongs in a plate. */
static const char *plate_label(lse_graph *g, const plates *P, const lse_node *n,
                               char *buf, size_t len)
{
    for (size_t i = 0; i < P->o->n_plates; i++)
        if (P->o->plates[i].node != NULL &&
            strcmp(P->o->plates[i].node, lse_node_name(n)) == 0)
            return P->o->plates[i].label;
    if (!plated(g, n))
        return NULL;
    snprintf(buf, len, "%zu rows", lse_node_rows(n));
    return buf;
}

/* The number of distinct plates of @p g's factor view (at most a few
 * hundred labels are compared), the first one's label into @p first. */
static size_t count_plates(lse_graph *g, const lse_viz_opts *o, char *first,
                           size_t len)
{
    const plates P = {.o = o};
    size_t n = 0;
    first[0] = '\0';
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        char buf[64];
        const char *l = plate_label(g, &P, lse_graph_node(g, i), buf, sizeof buf);
        if (l == NULL)
            continue;
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++) {
            char kb[64];
            const char *lk = plate_label(g, &P, lse_graph_node(g, k), kb,
                                         sizeof kb);
            seen = lk != NULL && strcmp(lk, l) == 0;
        }
        if (!seen && n++ == 0)
            snprintf(first, len, "%s", l);
    }
    return n;
}

static Agnode_t *variable(Agraph_t *G, plates *P, lse_graph *g,
                          const lse_node *n, size_t order)
{
    const size_t rows = lse_node_rows(n);
    Agraph_t *where = G;
    char buf[64];
    const char *label = plate_label(g, P, n, buf, sizeof buf);
    Agraph_t *plate = NULL;
    int first = 0;
    if (label != NULL && P->clusters) {
        size_t p = 0;
        while (p < P->n && strcmp(P->label[p], label) != 0)
            p++;
        if (p == P->n) {
            char name[64];
            snprintf(name, sizeof name, "cluster_plate_%zu", p);
            P->label[p] = strdup(label);
            P->g[p] = agsubg(G, name, 1);
            if (P->label[p] == NULL || P->g[p] == NULL)
                return NULL;
            P->n++;
            first = 1;
            /* the label is a text node inside the plate, not the
             * cluster's label: dot routes edges around nodes, while a
             * cluster label is only room reserved at the plate's edge,
             * which edges entering the plate cross */
            set(P->g[p], "kind", "plate");
            set(P->g[p], "label", ""); /* not the inherited title */
            set(P->g[p], "plate", label);
            setf(P->g[p], "rows", "%zu", rows);
            set(P->g[p], "style", "rounded");
            set(P->g[p], "margin", "10");
        }
        plate = P->g[p];
        where = plate;
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
    if (label != NULL)
        set(v, "plate", label);
    set(v, "shape", param ? "box" : "circle");
    set(v, "style", obs ? "filled" : (param ? "rounded" : "solid"));
    if (obs)
        set(v, "fillcolor", "gray85");
    set(v, "fontsize", "10");
    if (first) {
        char name[64];
        snprintf(name, sizeof name, "plate:%zu", P->n - 1);
        Agnode_t *l = agnode(plate, name, 1);
        Agraph_t *same = agsubg(plate, name, 1);
        if (l == NULL || same == NULL)
            return NULL;
        set(l, "kind", "plate");
        set(l, "label", label);
        set(l, "shape", "plaintext");
        set(l, "fontsize", "10");
        set(l, "margin", "0.02");
        set(l, "width", "0");
        set(l, "height", "0");
        set(same, "rank", "same");
        agsubnode(same, l, 1);
        agsubnode(same, v, 1);
    }
    return v;
}

/* The rows a term reads from a node: attributes first and count, and the
 * range "[first:end)" as the edge label (dot) or, when @p ranges is not
 * NULL (spring layouts, which draw edge labels across the edge), as a line
 * "role x[first:end)" appended to @p ranges for the factor's label. */
static void view_attrs(Agedge_t *e, lse_view v, const char *role,
                       char *ranges, size_t len)
{
    if (v.first != 0 || v.count != lse_node_rows(v.node)) {
        setf(e, "first", "%zu", v.first);
        setf(e, "count", "%zu", v.count);
        if (ranges == NULL) {
            setf(e, "label", "[%zu:%zu)", v.first, v.first + v.count);
            set(e, "fontsize", "8");
        } else {
            const size_t used = strlen(ranges);
            snprintf(ranges + used, len - used, "\\n%s %s[%zu:%zu)", role,
                     lse_node_name(v.node), v.first, v.first + v.count);
        }
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

/* "mask causal", "mask no self", both, or "mask 0x4" for other bits */
static void mask_text(unsigned mask, char *buf, size_t len)
{
    const unsigned known = LSE_MASK_CAUSAL | LSE_MASK_NO_SELF;
    snprintf(buf, len, "%s%s%s", (mask & LSE_MASK_CAUSAL) ? "causal" : "",
             (mask & LSE_MASK_CAUSAL) && (mask & LSE_MASK_NO_SELF) ? ", " : "",
             (mask & LSE_MASK_NO_SELF) ? "no self" : "");
    if (mask & ~known) {
        const size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s0x%x", used ? ", " : "",
                 mask & ~known);
    }
}

/* Legend of the factor view: one sample per shape and line style the
 * picture uses (kind=legend, which lse_viz_read_spec skips). */
static void factor_legend(Agraph_t *G, const int used[4], int observed,
                          int params, const char *font)
{
    strbuf b = {0};
    sb_add(&b, "<TABLE BORDER=\"1\" COLOR=\"gray60\" CELLBORDER=\"0\" "
               "CELLSPACING=\"0\" CELLPADDING=\"2\">"
               "<TR><TD COLSPAN=\"2\"><B>Legend</B></TD></TR>");
    sb_add(&b, "<TR><TD ALIGN=\"LEFT\">&#9675;</TD><TD ALIGN=\"LEFT\">"
               "variable (name, rows x dim)%s</TD></TR>",
           observed ? "; shaded: observed" : "");
    if (params)
        sb_add(&b, "<TR><TD ALIGN=\"LEFT\">&#9633;</TD><TD ALIGN=\"LEFT\">"
                   "parameter</TD></TR>");
    sb_add(&b, "<TR><TD ALIGN=\"LEFT\">&#9632;</TD><TD ALIGN=\"LEFT\">"
               "energy term: similarity, &#946;, mask</TD></TR>");
    static const char *const what[4] = {
        "&#8212;&#8212;&#9656; parent &#8594; term",
        "&#9473;&#9473;&#9656; term &#8594; child (bold)",
        "- - -&#9656; context", "&#183;&#183;&#183;&#9656; parameter"};
    for (size_t k = 0; k < 4; k++)
        if (used[k])
            sb_add(&b, "<TR><TD COLSPAN=\"2\" ALIGN=\"LEFT\">%s</TD></TR>",
                   what[k]);
    sb_add(&b, "<TR><TD ALIGN=\"LEFT\">&#9634;</TD><TD ALIGN=\"LEFT\">"
               "plate: repeated over its index</TD></TR></TABLE>");
    if (b.failed) {
        free(b.s);
        return;
    }
    Agnode_t *l = agnode(G, (char *)"legend", 1);
    if (l != NULL) {
        set(l, "kind", "legend");
        agsafeset(l, (char *)"label", agstrdup_html(G, b.s), "");
        set(l, "shape", "plaintext");
        set(l, "fontsize", "9");
        set(l, "fontname", font);
    }
    free(b.s);
}

/* The factor label's suffix of an LSE term: beta, mask, chain. */
static void factor_extra(const lse_term *t, char *extra, size_t size)
{
    if (lse_term_kind_of(t) == LSE_TERM_LSE) {
        char mk[48] = "";
        mask_text(lse_term_mask(t), mk, sizeof mk);
        snprintf(extra, size, "\\n\u03b2 = %g%s%s", lse_term_beta(t),
                 mk[0] ? ", mask: " : "", mk);
        if (lse_term_reduce(t) == LSE_REDUCE_CHAIN) {
            const size_t used_len = strlen(extra);
            snprintf(extra + used_len, size - used_len, ", chain");
        }
    }
}

/* The attributes every factor box has. */
static void factor_style(Agnode_t *f, const lse_term *t, size_t order)
{
    set(f, "kind", "factor");
    setf(f, "order", "%zu", order);
    set(f, "shape", "box");
    set(f, "style", lse_term_enabled(t) ? "filled" : "filled,dashed");
    set(f, "fillcolor", lse_term_enabled(t) ? "gray20" : "gray60");
    set(f, "fontcolor", "white");
    set(f, "fontsize", "9");
    set(f, "enabled", lse_term_enabled(t) ? "true" : "false");
}

/* A custom term: its type, configuration and one edge per view. */
static void custom_factor(Agraph_t *G, Agnode_t *f, const lse_term *t,
                          char *rg, size_t rg_size)
{
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
        char role[32];
        snprintf(role, sizeof role, "view %zu", i);
        view_attrs(e, v, role, rg, rg_size);
    }
}

/* An LSE term's similarity, configuration, beta, mask and reduction. */
static void lse_factor_attrs(Agnode_t *f, const lse_term *t)
{
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
    set(f, "reduce", lse_term_reduce(t) == LSE_REDUCE_CHAIN ? "chain" : "rows");
}

/* An LSE term's parent, child and context edges; marks the legend's
 * entries they use. */
static void lse_factor_views(Agraph_t *G, Agnode_t *f, const lse_term *t,
                             int used[4], char *rg, size_t rg_size)
{
    const lse_view c = lse_term_child(t), p = lse_term_parent(t),
                   x = lse_term_context(t);
    used[0] = used[1] = 1;
    used[2] |= x.node != NULL;
    used[3] |= lse_term_n_param(t) > 0 || lse_term_chain_init(t) != NULL ||
               lse_term_chain_trans(t) != NULL;
    view_attrs(edge(G, agnode(G, (char *)lse_node_name(p.node), 0), f,
                    "parent", NULL),
               p, "parent", rg, rg_size);
    view_attrs(edge(G, f, agnode(G, (char *)lse_node_name(c.node), 0),
                    "child", "bold"),
               c, "child", rg, rg_size);
    if (x.node != NULL)
        view_attrs(edge(G, agnode(G, (char *)lse_node_name(x.node), 0), f,
                        "context", "dashed"),
                   x, "context", rg, rg_size);
}

/* An LSE term's parameter edges (similarity slots, chain tables). */
static void lse_factor_params(Agraph_t *G, Agnode_t *f, const lse_term *t)
{
    const lse_sim_type *sim = lse_term_sim(t);
    for (size_t k = 0; k < lse_term_n_param(t); k++) {
        const lse_node *pn = lse_term_param(t, k);
        if (pn == NULL)
            continue;
        Agedge_t *e = edge(G, agnode(G, (char *)lse_node_name(pn), 0), f,
                           "param", "dotted");
        set(e, "slot", sim->param_names != NULL ? sim->param_names[k] : "");
    }
    const lse_node *ci = lse_term_chain_init(t), *ct = lse_term_chain_trans(t);
    if (ci != NULL)
        set(edge(G, agnode(G, (char *)lse_node_name(ci), 0), f, "param",
                 "dotted"),
            "slot", "chain_init");
    if (ct != NULL)
        set(edge(G, agnode(G, (char *)lse_node_name(ct), 0), f, "param",
                 "dotted"),
            "slot", "chain_trans");
}

/* The factor view; 0 when out of memory. */
static int factor_graph(Agraph_t *G, lse_graph *g, const lse_viz_opts *o,
                        int clusters, int edge_labels, const char *font)
{
    const size_t nn = lse_graph_n_nodes(g);
    plates P = {.g = calloc(nn + 1, sizeof *P.g),
                .label = calloc(nn + 1, sizeof *P.label),
                .clusters = clusters,
                .edge_labels = edge_labels,
                .o = o,
                .font = font};
    int ok = P.g != NULL && P.label != NULL;
    int used[4] = {0, 0, 0, 0}, observed = 0, params = 0;
    for (size_t i = 0; ok && i < nn; i++) {
        const lse_node *n = lse_graph_node(g, i);
        ok = variable(G, &P, g, n, i) != NULL;
        observed |= lse_node_is_clamped(n);
        params |= lse_node_is_param(n);
    }
    for (size_t m = 0; ok && m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        Agnode_t *f = factor_node(G, lse_term_name(t));
        if (f == NULL) {
            ok = 0;
            break;
        }
        char desc[256], extra[96] = "", ranges[512] = "";
        char *rg = P.edge_labels ? NULL : ranges;
        lse_term_describe(t, desc, sizeof desc);
        factor_extra(t, extra, sizeof extra);
        factor_style(f, t, nn + m);
        if (lse_term_kind_of(t) == LSE_TERM_CUSTOM) {
            custom_factor(G, f, t, rg, sizeof ranges);
            setf(f, "label", "%s\\n%s%s%s", lse_term_name(t), desc, extra,
                 ranges);
            continue;
        }
        lse_factor_attrs(f, t);
        lse_factor_views(G, f, t, used, rg, sizeof ranges);
        setf(f, "label", "%s\\n%s%s%s", lse_term_name(t), desc, extra, ranges);
        lse_factor_params(G, f, t);
    }
    if (ok && o->legend)
        factor_legend(G, used, observed, params, font);
    for (size_t p = 0; P.label != NULL && p < P.n; p++)
        free(P.label[p]);
    free(P.g);
    free(P.label);
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

/* The rows of @p n in the expanded view: a cluster labelled with the
 * node's name and plate, rows left to right in order. @p dual: 0, or 1
 * (parent side) / 2 (child side, names "x[3]'") of a node that is both. */
static void expanded_rows(Agraph_t *G, const lse_node *n,
                          const lse_viz_opts *o, size_t maxr, int dual,
                          int child_side)
{
    char name[300];
    const char *suffix = dual == 2 ? "'" : "";
    snprintf(name, sizeof name, "cluster_%s%s", lse_node_name(n),
             dual == 2 ? "_child" : "");
    Agraph_t *c = agsubg(G, name, 1);
    const size_t rows = lse_node_rows(n);
    const char *index = NULL; /* the caller's plate label */
    for (size_t k = 0; k < o->n_plates; k++)
        if (strcmp(o->plates[k].node, lse_node_name(n)) == 0)
            index = o->plates[k].label;
    char what[200];
    snprintf(what, sizeof what, "%s%s%s%s%s", lse_node_name(n),
             dual == 1 ? " as parent" : (dual == 2 ? " as child" : ""),
             index ? " (" : "", index ? index : "", index ? ")" : "");
    if (rows > maxr)
        setf(c, "label", "%s: first %zu of %zu rows", what, maxr, rows);
    else
        setf(c, "label", "%s", what);
    set(c, "kind", "rows");
    /* label on the side away from the weight edges: parents sit on top
     * (their label above), children below (label underneath) */
    set(c, "labelloc", child_side ? "b" : "t");
    set(c, "fontsize", "10");
    set(c, "style", lse_node_is_clamped(n) ? "filled" : "rounded");
    if (lse_node_is_clamped(n))
        set(c, "fillcolor", "gray92");
    /* rows left to right in order: a same-rank subgraph whose invisible
     * edges r -> r + 1 (role=order) fix the order */
    snprintf(name, sizeof name, "rank_%s%s", lse_node_name(n),
             dual == 2 ? "_child" : "");
    Agraph_t *same = agsubg(c, name, 1);
    set(same, "rank", "same");
    Agnode_t *prev = NULL;
    const size_t drawn = rows < maxr ? rows : maxr;
    /* bounded size: smaller circles for many rows */
    const double w = drawn > 40 ? fmax(0.12, 12.0 / (double)drawn) : 0.3;
    for (size_t r = 0; r < drawn; r++) {
        snprintf(name, sizeof name, "%s[%zu]%s", lse_node_name(n), r, suffix);
        Agnode_t *v = agnode(same, name, 1);
        if (v == NULL)
            return;
        if (prev != NULL) {
            Agedge_t *e = agedge(G, prev, v, NULL, 1);
            set(e, "style", "invis");
            set(e, "role", "order");
        }
        prev = v;
        setf(v, "width", "%.3f", w);
        setf(v, "height", "%.3f", w);
        set(v, "fontsize", w < 0.3 ? "5" : "8");
        setf(v, "label", "%zu", r);
        set(v, "shape", lse_node_is_param(n) ? "box" : "circle");
        set(v, "fixedsize", "true");
        set(v, "node", lse_node_name(n));
        setf(v, "row", "%zu", r);
    }
}

static int is_child(lse_graph *g, const lse_node *n)
{
    for (size_t m = 0; m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        if (lse_term_softmax(t) != NULL && lse_term_child(t).node == n)
            return 1;
    }
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
    /* dot's final crossing minimization over the whole graph reorders
     * rows inside clusters against their order edges (0 25 26 27 2 ...);
     * without it the rows stay in order */
    set(G, "remincross", "false");
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        const lse_node *n = lse_graph_node(g, i);
        if (!in_softmax_term(g, n))
            continue;
        /* a node that is both child and parent (self-attention) is drawn
         * twice: its rows as parents above, as children below */
        const int dual = is_parent(g, n) && is_child(g, n);
        for (int side = 0; side <= dual; side++)
            expanded_rows(G, n, o, maxr, dual ? side + 1 : 0,
                          side == 1 || !is_parent(g, n));
    }
    size_t n_drawn = 0;
    strbuf b = {0}; /* the legend: one colour per term, width = weight */
    sb_add(&b, "<TABLE BORDER=\"1\" COLOR=\"gray60\" CELLBORDER=\"0\" "
               "CELLSPACING=\"0\" CELLPADDING=\"2\"><TR><TD COLSPAN=\"2\">"
               "<B>Softmax weight of child row i on parent row j</B></TD></TR>");
    set(G, "nodesep", "0.08");
    set(G, "ranksep", "1.2");
    set(G, "size", "16,10"); /* at most 16 x 10 inches: scaled down */
    for (size_t m = 0; m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        const gsl_matrix *A = lse_term_softmax(t);
        if (A == NULL || !lse_term_enabled(t))
            continue;
        const char *hue = palette[n_drawn++ % 6];
        sb_add(&b, "<TR><TD BGCOLOR=\"%s\" WIDTH=\"24\"> </TD>"
                   "<TD ALIGN=\"LEFT\">term ", hue);
        escape(&b, lse_term_name(t));
        sb_add(&b, "</TD></TR>");
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
                snprintf(name, sizeof name, "%s[%zu]%s", lse_node_name(c.node),
                         c.first + i,
                         is_parent(g, c.node) && is_child(g, c.node) ? "'"
                                                                     : "");
                Agnode_t *h = agnode(G, name, 0);
                if (a == NULL || h == NULL)
                    continue;
                Agedge_t *e = agedge(G, a, h, NULL, 1);
                set(e, "role", "weight");
                set(e, "term", lse_term_name(t));
                setf(e, "weight_value", "%.6g", w);
                setf(e, "penwidth", "%.3f", 0.3 + 3.0 * w);
                setf(e, "color", "%s%02x", hue,
                     (unsigned)(40 + 215 * (w > 1 ? 1 : w)));
                set(e, "arrowsize", "0.4");
                if (a == h) /* a row attending to itself */
                    set(e, "dir", "none");
            }
        }
    }
    sb_add(&b, "<TR><TD COLSPAN=\"2\" ALIGN=\"LEFT\">width 0.3 + 3 w pt, "
               "opacity w; w &lt; %g not drawn</TD></TR>"
               "<TR><TD COLSPAN=\"2\" ALIGN=\"LEFT\">edges run parent row "
               "&#8594; child row</TD></TR></TABLE>",
           o->min_weight);
    if (o->legend && n_drawn > 0 && !b.failed) {
        Agnode_t *l = agnode(G, (char *)"legend", 1);
        if (l != NULL) {
            set(l, "kind", "legend");
            agsafeset(l, (char *)"label", agstrdup_html(G, b.s), "");
            set(l, "shape", "plaintext");
            set(l, "fontsize", "9");
        }
    }
    free(b.s);
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
    const int print = o.theme != NULL && strcmp(o.theme, "print") == 0;
    if (o.theme != NULL && !print && strcmp(o.theme, "screen") != 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "unknown theme '%s' (screen, print)", o.theme);
    if (!(o.dpi >= 0 && o.dpi <= 1200))
        return lse_error_set(err, LSE_EINVAL, fn,
                             "dpi %g is outside [0, 1200] (0: the theme's)",
                             o.dpi);
    for (size_t i = 0; i < o.n_plates; i++)
        if (o.plates == NULL || o.plates[i].node == NULL ||
            lse_graph_find_node(g, o.plates[i].node) == NULL)
            return lse_error_set(
                err, LSE_EINVAL, fn, "plate %zu names no node of the graph (%s)",
                i,
                o.plates != NULL && o.plates[i].node ? o.plates[i].node
                                                     : "NULL");
    const char *layout = o.layout != NULL ? o.layout : "dot";
    /* dot and fdp draw clusters; the others ignore them (or draw each
     * as the bounding box of its nodes, across other nodes), so a
     * picture with plates is refused rather than drawn without them */
    const int clusters = strcmp(layout, "dot") == 0 || strcmp(layout, "fdp") == 0;
    if (!clusters) {
        char first[64] = "";
        const size_t np = o.expand ? 0 : count_plates(g, &o, first, sizeof first);
        if (o.expand)
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "layout '%s' draws no clusters, which hold "
                                 "the rows of the expanded view; use dot",
                                 layout);
        if (np > 0)
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "layout '%s' draws no plates (Graphviz "
                                 "clusters) and this graph has %zu (%s%s); "
                                 "use dot or fdp",
                                 layout, np, first, np > 1 ? ", ..." : "");
    }
    const char *font = print ? "Times-Roman" : "Helvetica";
    gv_quiet();
    Agraph_t *G = agopen((char *)"lsegraph", Agdirected, NULL);
    if (G == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "Graphviz: %s", gv_error());
    agattr(G, AGRAPH, (char *)"fontname", (char *)font);
    agattr(G, AGNODE, (char *)"fontname", (char *)font);
    agattr(G, AGEDGE, (char *)"fontname", (char *)font);
    if (print) {
        agattr(G, AGNODE, (char *)"penwidth", (char *)"1.3");
        agattr(G, AGEDGE, (char *)"penwidth", (char *)"1.3");
    }
    set(G, "layout", layout);
    set(G, "rankdir", "BT");
    set(G, "fontsize", "11");
    set(G, "view", o.expand ? "expanded" : "factor");
    set(G, "theme", print ? "print" : "screen");
    setf(G, "dpi", "%g", o.dpi > 0 ? o.dpi : (print ? 300.0 : 96.0));
    if (!clusters || strcmp(layout, "fdp") == 0) {
        /* spring and circular layouts: no overlapping nodes, room for
         * edge labels */
        set(G, "overlap", "false");
        set(G, "sep", "+8");
        set(G, "splines", "true");
    }
    if (o.title != NULL) {
        set(G, "label", o.title);
        set(G, "labelloc", "t");
    }
    if (o.expand)
        expanded_graph(G, g, &o);
    else if (!factor_graph(G, g, &o, clusters, strcmp(layout, "dot") == 0,
                              font)) {
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
    if (strcmp(layout, "dot") != 0 && strcmp(layout, "fdp") != 0)
        for (Agraph_t *c = agfstsubg(G); c != NULL; c = agnxtsubg(c))
            if (strncmp(agnameof(c), "cluster", 7) == 0) {
                const lse_status cs = lse_error_set(
                    err, LSE_EINVAL, fn,
                    "layout '%s' draws no clusters and the graph has one "
                    "(%s); use dot or fdp",
                    layout, agnameof(c));
                agclose(G);
                return cs;
            }
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
    size_t masked = 0;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            masked += !isfinite(gsl_matrix_get(m, i, j));
    /* scale labels to three significant digits of the range: 4.456e-26
     * on a [0, 1] scale reads 0.00 */
    const double mag = floor(log10(span));
    const int decimals = mag >= 2 ? 0 : (int)(2 - mag);
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
           "CELLPADDING=\"1\"><TR><TD><FONT POINT-SIZE=\"9\">%.*f "
           "</FONT></TD>",
           decimals > 12 ? 12 : decimals, lo + 0.0);
    for (int k = 0; k <= 10; k++) {
        char col[8];
        colour(k / 10.0, col);
        sb_add(&b,
               "<TD BGCOLOR=\"%s\" WIDTH=\"12\" HEIGHT=\"8\" "
               "FIXEDSIZE=\"TRUE\"></TD>",
               col);
    }
    sb_add(&b, "<TD><FONT POINT-SIZE=\"9\"> %.*f</FONT></TD></TR>\n",
           decimals > 12 ? 12 : decimals, hi + 0.0);
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
    if (masked > 0)
        sb_add(&b, "grey = masked (%zu cells)", masked);
    sb_add(&b, "</FONT></TD></TR></TABLE>>];\n"
               "  m -> legend [style=invis];\n}\n");
    if (b.failed) {
        free(b.s);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    *out = b.s;
    return LSE_OK;
}
