/* Pictures as a reader sees them (docs/energyviz.md): energyviz output laid
 * out by Graphviz in this process and checked for what a reader would
 * notice: plates named after the model's indices, no edge through a plate
 * label or the legend, rows of the expanded view in order, nodes that do
 * not overlap with the spring layouts, raster sizes that follow --dpi and
 * stay bounded, the options that are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include "lse_check.h"
#include <lsegraph/viz.h>

#ifdef LSE_HAVE_PLOTS
#include <png.h>
#endif

static const char *tool;   /* the energyviz binary */
static const char *lsefit; /* the lsefit binary (second argument) */
static char dir[64];
static char err_text[4096];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/lse-pictures-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static int run_prog(const char *prog, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >/dev/null 2>stderr.txt",
             dir, prog, args);
    const int rc = system(cmd);
    ck_assert_msg(rc != -1 && WIFEXITED(rc), "cannot run %s", cmd);
    char path[256];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    err_text[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
        const size_t n = fread(err_text, 1, sizeof err_text - 1, f);
        err_text[n] = '\0';
        fclose(f);
    }
    return WEXITSTATUS(rc);
}

static int run(const char *args) { return run_prog(tool, args); }

static char *read_file(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no output file %s", path);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len != NULL)
        *len = (size_t)n;
    return buf;
}

/* energyviz ARGS -o p.dot, laid out with @p layout here: the graph with
 * pos/width/height (nodes) and pos (edges) attributes. */
static Agraph_t *laid_out(const char *args, const char *layout)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -o p.dot", args);
    ck_assert_msg(run(cmd) == 0, "%s: %s", cmd, err_text);
    char *dot = read_file("p.dot", NULL);
    static GVC_t *gvc = NULL; /* one context (see lib/viz/viz.c) */
    if (gvc == NULL)
        gvc = gvContext();
    Agraph_t *G = agmemread(dot);
    free(dot);
    ck_assert_ptr_nonnull(G);
    ck_assert_int_eq(gvLayout(gvc, G, layout), 0);
    char *data = NULL;
    unsigned len = 0;
    ck_assert_int_eq(gvRenderData(gvc, G, "dot", &data, &len), 0);
    gvFreeLayout(gvc, G);
    agclose(G);
    Agraph_t *L = agmemread(data);
    gvFreeRenderData(data);
    ck_assert_ptr_nonnull(L);
    return L;
}

typedef struct rect {
    double x0, y0, x1, y1;
} rect;

/* A node's rect in points (pos is the centre, width/height in inches). */
static rect node_box(Agnode_t *n)
{
    double x = 0, y = 0;
    ck_assert_int_eq(sscanf(agget(n, (char *)"pos"), "%lf,%lf", &x, &y), 2);
    const double w = 36 * strtod(agget(n, (char *)"width"), NULL);
    const double h = 36 * strtod(agget(n, (char *)"height"), NULL);
    return (rect){x - w, y - h, x + w, y + h};
}

static int inside(rect b, double x, double y, double slack)
{
    return x > b.x0 + slack && x < b.x1 - slack && y > b.y0 + slack &&
           y < b.y1 - slack;
}

/* Does edge @p e's spline pass through @p b? The B-spline control points
 * of "pos" sampled along each cubic piece. */
static int edge_hits(Agedge_t *e, rect b)
{
    const char *p = agget(e, (char *)"pos");
    if (p == NULL || *p == '\0')
        return 0;
    double pt[512][2];
    size_t n = 0;
    while (*p && n < 512) {
        while (*p == ' ')
            p++;
        if ((p[0] == 'e' || p[0] == 's') && p[1] == ',') { /* arrow ends */
            p += 2;
            double x, y;
            int used = 0;
            if (sscanf(p, "%lf,%lf%n", &x, &y, &used) != 2)
                break;
            p += used;
            continue;
        }
        int used = 0;
        if (sscanf(p, "%lf,%lf%n", &pt[n][0], &pt[n][1], &used) != 2)
            break;
        p += used;
        n++;
    }
    for (size_t i = 0; i + 3 < n; i += 3)
        for (int k = 0; k <= 20; k++) {
            const double t = k / 20.0, u = 1 - t;
            const double x = u * u * u * pt[i][0] + 3 * u * u * t * pt[i + 1][0] +
                             3 * u * t * t * pt[i + 2][0] +
                             t * t * t * pt[i + 3][0];
            const double y = u * u * u * pt[i][1] + 3 * u * u * t * pt[i + 1][1] +
                             3 * u * t * t * pt[i + 2][1] +
                             t * t * t * pt[i + 3][1];
            if (inside(b, x, y, 1.0))
                return 1;
        }
    return 0;
}

/* The plate (cluster) holding node @p name: its "plate" attribute. */
static const char *plate_of(Agraph_t *G, const char *name)
{
    for (Agraph_t *c = agfstsubg(G); c != NULL; c = agnxtsubg(c)) {
        const char *k = agget(c, (char *)"kind");
        if (k != NULL && strcmp(k, "plate") == 0 &&
            agnode(c, (char *)name, 0) != NULL)
            return agget(c, (char *)"plate");
    }
    return NULL;
}

static const struct {
    const char *args, *node, *plate;
} plates[] = {
    {"hopfield", "memories", "K = 4 patterns"},
    {"hopfield", "state", "N = 2 states"},
    {"self-attention", "x", "N = 6 tokens"},
    {"slds", "x", "T = 200 steps"},
    {"slds", "b", "K = 2 modes"},
    {"slds --markov -k 3", "trans", "K = 3 modes"},
    {"layernorm", "x", "B = 4 vectors"},
    {"dar-attention", "queries", "N = 6 queries"},
    {"dar-attention", "keys", "M = 6 keys"},
    {"gmm", "x", "N = 272 observations"},
    {"gmm", "chol", "K = 3 components"},
    {"daam", "c", "H = 4 heads"},
    {"idwnet", "keys", "P = 20 prototypes"},
    {"slot-attention", "slots", "S = 3 slots"},
    {"stattn", "x1", "T = 3 steps x K = 3 slots"},
    {"dma", "next", "T-1 = 199 transitions"},
    {"dma", "m", "K = 2 modes"},
    {"et", "tokens", "N = 16 patch tokens"},
    {"et", "memories", "M = 6 memories"},
    {"capsnet", "children", "N = 6 child capsules"},
    {"capsnet", "parents", "S = 3 parent capsules"},
};
#define N_PLATES (sizeof plates / sizeof plates[0])

/* Plates carry the model's own index names; queries and keys of the same
 * size stay in separate plates. */
START_TEST(test_plate_names)
{
    make_dir();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -o p.dot", plates[_i].args);
    ck_assert_msg(run(cmd) == 0, "%s: %s", cmd, err_text);
    char *dot = read_file("p.dot", NULL);
    Agraph_t *G = agmemread(dot);
    free(dot);
    ck_assert_ptr_nonnull(G);
    const char *p = plate_of(G, plates[_i].node);
    ck_assert_msg(p != NULL && strcmp(p, plates[_i].plate) == 0,
                  "%s: node %s in plate '%s', want '%s'", plates[_i].args,
                  plates[_i].node, p ? p : "(none)", plates[_i].plate);
    /* the label is a text node inside the plate */
    int labels = 0;
    for (Agnode_t *n = agfstnode(G); n != NULL; n = agnxtnode(G, n)) {
        const char *k = agget(n, (char *)"kind");
        if (k != NULL && strcmp(k, "plate") == 0 &&
            strcmp(agget(n, (char *)"label"), plates[_i].plate) == 0)
            labels++;
    }
    ck_assert_int_eq(labels, 1);
    if (strcmp(plates[_i].args, "dar-attention") == 0)
        ck_assert_str_ne(plate_of(G, "queries"), plate_of(G, "keys"));
    agclose(G);
    remove_dir();
}
END_TEST

static const char *const builtins[] = {
    "gmm",           "hopfield",   "cross-attention",  "self-attention --causal",
    "slot-attention", "predcoding", "slds",             "slds --markov -k 3",
    "layernorm",     "idwnet",     "daam",             "dar-attention",
    "predcoding --mixture",
    "stattn",
    "dma", "et", "capsnet"};
#define N_BUILTINS (sizeof builtins / sizeof builtins[0])

/* No edge passes through a plate label or the legend, in any built-in. */
START_TEST(test_no_edge_through_labels)
{
    make_dir();
    Agraph_t *G = laid_out(builtins[_i], "dot");
    int labels = 0;
    for (Agnode_t *n = agfstnode(G); n != NULL; n = agnxtnode(G, n)) {
        const char *k = agget(n, (char *)"kind");
        if (k == NULL || (strcmp(k, "plate") != 0 && strcmp(k, "legend") != 0))
            continue;
        labels++;
        const rect b = node_box(n);
        for (Agnode_t *v = agfstnode(G); v != NULL; v = agnxtnode(G, v))
            for (Agedge_t *e = agfstout(G, v); e != NULL; e = agnxtout(G, e))
                ck_assert_msg(!edge_hits(e, b),
                              "%s: edge %s -> %s crosses the label '%s'",
                              builtins[_i], agnameof(agtail(e)),
                              agnameof(aghead(e)), agget(n, (char *)"label"));
    }
    ck_assert_int_ge(labels, 2); /* a plate label and the legend */
    /* the check itself: every edge passes through the whole drawing */
    double x0, y0, x1, y1;
    ck_assert_int_eq(sscanf(agget(G, (char *)"bb"), "%lf,%lf,%lf,%lf", &x0,
                            &y0, &x1, &y1),
                     4);
    const rect all = {x0 - 10, y0 - 10, x1 + 10, y1 + 10};
    Agnode_t *v0 = agfstnode(G);
    while (v0 != NULL && agfstout(G, v0) == NULL)
        v0 = agnxtnode(G, v0);
    ck_assert_ptr_nonnull(v0);
    ck_assert(edge_hits(agfstout(G, v0), all));
    agclose(G);
    remove_dir();
}
END_TEST

/* SVG as Graphviz writes it ------------------------------------------- */

/* One text element (its box in SVG user units, from the anchor, the font
 * size and Helvetica's advance widths, which are wider than Times') or one
 * edge drawing (the spline sampled along each cubic piece, or an arrow
 * head's corners), with the title of the group that holds it. */
typedef struct svg_item {
    int group;
    char title[160];
    char text[160];
    rect box;     /* text */
    double *pt;   /* edge: x0, y0, x1, y1, ... */
    size_t n_pt;
} svg_item;

typedef struct svg_doc {
    svg_item *text, *edge;
    size_t n_text, n_edge;
} svg_doc;

/* Helvetica's advance width of character @p c, in em. */
static double char_em(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return 0.556;
    if (strchr(" ft!,.:;|/", c) != NULL && c != '\0')
        return 0.278;
    if (strchr("ijl'", c) != NULL && c != '\0')
        return 0.222;
    if (strchr("r()[]-", c) != NULL && c != '\0')
        return 0.333;
    if (c == 'm' || c == 'M' || c == 'W')
        return 0.833;
    if (c == 'w')
        return 0.722;
    if (c == 'I')
        return 0.278;
    if (c >= 'A' && c <= 'Z')
        return 0.667;
    if (c >= 'a' && c <= 'z')
        return 0.556;
    return 0.6; /* symbols, = + <, non-ASCII letters */
}

/* The text between > and </text>, with entities and UTF-8 sequences
 * counted as one character: its width in em. */
static double text_em(const char *s, const char *end, char *copy, size_t len)
{
    double em = 0;
    size_t k = 0;
    while (s < end) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') {
            const char *semi = memchr(s, ';', (size_t)(end - s));
            if (semi != NULL) {
                if (strncmp(s, "&#45;", 5) == 0)
                    c = '-';
                else if (strncmp(s, "&#160;", 6) == 0)
                    c = ' ';
                else
                    c = '=';
                s = semi + 1;
            } else
                s++;
        } else if (c >= 0x80) { /* one UTF-8 character */
            s++;
            while (s < end && ((unsigned char)*s & 0xC0) == 0x80)
                s++;
            c = 0x80;
        } else
            s++;
        em += char_em(c);
        if (k + 1 < len)
            copy[k++] = (char)(c < 0x80 ? c : '?');
    }
    copy[k] = '\0';
    return em;
}

static double attr_num(const char *tag, const char *name)
{
    const char *p = strstr(tag, name);
    ck_assert_msg(p != NULL, "no %s in %.80s", name, tag);
    return strtod(p + strlen(name), NULL);
}

static void add_point(svg_item *it, double x, double y)
{
    double *more = realloc(it->pt, (it->n_pt + 1) * 2 * sizeof *more);
    ck_assert_ptr_nonnull(more);
    it->pt = more;
    it->pt[2 * it->n_pt] = x;
    it->pt[2 * it->n_pt + 1] = y;
    it->n_pt++;
}

/* Parse the text elements and edge drawings of a Graphviz SVG. */
static svg_doc svg_parse(const char *svg)
{
    svg_doc d = {0};
    size_t cap_t = 0, cap_e = 0;
    int group = -1, edge = 0;
    char title[160] = "";
    for (const char *line = svg; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        if (eol == NULL)
            eol = line + strlen(line);
        if (strncmp(line, "<g id=", 6) == 0) {
            group++;
            edge = strstr(line, "class=\"edge\"") != NULL &&
                   strstr(line, "class=\"edge\"") < eol;
            title[0] = '\0';
        } else if (strncmp(line, "<title>", 7) == 0) {
            const char *e = strstr(line, "</title>");
            const size_t n = e != NULL && e < eol ? (size_t)(e - line - 7) : 0;
            snprintf(title, sizeof title, "%.*s", (int)n, line + 7);
        } else if (strncmp(line, "<text ", 6) == 0) {
            const char *gt = strchr(line, '>'), *e = strstr(line, "</text>");
            ck_assert(gt != NULL && e != NULL && e < eol);
            if (d.n_text == cap_t) {
                cap_t = cap_t ? 2 * cap_t : 32;
                d.text = realloc(d.text, cap_t * sizeof *d.text);
                ck_assert_ptr_nonnull(d.text);
            }
            svg_item *it = &d.text[d.n_text++];
            memset(it, 0, sizeof *it);
            it->group = group;
            snprintf(it->title, sizeof it->title, "%s", title);
            const double fs = attr_num(line, "font-size=\"");
            const double x = attr_num(line, " x=\""), y = attr_num(line, " y=\"");
            const double w = fs * text_em(gt + 1, e, it->text, sizeof it->text);
            const double x0 = strstr(line, "anchor=\"middle\"") ? x - w / 2
                              : strstr(line, "anchor=\"end\"")  ? x - w
                                                                : x;
            it->box = (rect){x0, y - 0.75 * fs, x0 + w, y + 0.2 * fs};
        } else if (edge && (strncmp(line, "<path ", 6) == 0 ||
                            strncmp(line, "<polygon ", 9) == 0)) {
            if (d.n_edge == cap_e) {
                cap_e = cap_e ? 2 * cap_e : 32;
                d.edge = realloc(d.edge, cap_e * sizeof *d.edge);
                ck_assert_ptr_nonnull(d.edge);
            }
            svg_item *it = &d.edge[d.n_edge++];
            memset(it, 0, sizeof *it);
            it->group = group;
            snprintf(it->title, sizeof it->title, "%s", title);
            const int path = line[1] == 'p' && line[2] == 'a';
            const char *p = strstr(line, path ? " d=\"M" : " points=\"");
            ck_assert(p != NULL && p < eol);
            p += path ? 5 : 9;
            double c[4][2];
            size_t n = 0;
            while (p < eol && *p != '"') {
                while (*p == ' ' || *p == 'C')
                    p++;
                char *q;
                const double x = strtod(p, &q);
                if (q == p || *q != ',')
                    break;
                const double y = strtod(q + 1, &q);
                p = q;
                if (!path) { /* polygon corners and side midpoints */
                    if (it->n_pt > 0)
                        add_point(it, (x + it->pt[2 * it->n_pt - 2]) / 2,
                                  (y + it->pt[2 * it->n_pt - 1]) / 2);
                    add_point(it, x, y);
                    continue;
                }
                c[n][0] = x;
                c[n][1] = y;
                if (++n == 4) { /* a cubic piece, sampled */
                    for (int k = 0; k <= 20; k++) {
                        const double t = k / 20.0, u = 1 - t;
                        double b[2];
                        for (int j = 0; j < 2; j++)
                            b[j] = u * u * u * c[0][j] +
                                   3 * u * u * t * c[1][j] +
                                   3 * u * t * t * c[2][j] +
                                   t * t * t * c[3][j];
                        add_point(it, b[0], b[1]);
                    }
                    c[0][0] = c[3][0];
                    c[0][1] = c[3][1];
                    n = 1;
                }
            }
        }
        line = *eol ? eol + 1 : eol;
    }
    return d;
}

static void svg_free(svg_doc *d)
{
    for (size_t i = 0; i < d->n_edge; i++)
        free(d->edge[i].pt);
    free(d->edge);
    free(d->text);
}

/* The first text element that an edge passes through or that overlaps a
 * text of another group (1 unit of slack), described into @p why; 0 when
 * there is none. */
static int svg_overlap(const svg_doc *d, char *why, size_t len)
{
    for (size_t i = 0; i < d->n_text; i++) {
        const svg_item *t = &d->text[i];
        for (size_t e = 0; e < d->n_edge; e++)
            for (size_t k = 0; k < d->edge[e].n_pt; k++)
                if (inside(t->box, d->edge[e].pt[2 * k],
                           d->edge[e].pt[2 * k + 1], 1.0)) {
                    snprintf(why, len, "edge %s crosses the text '%s' of %s",
                             d->edge[e].title, t->text, t->title);
                    return 1;
                }
        for (size_t j = i + 1; j < d->n_text; j++) {
            const rect a = t->box, b = d->text[j].box;
            if (d->text[j].group != t->group && a.x0 + 1 < b.x1 - 1 &&
                b.x0 + 1 < a.x1 - 1 && a.y0 + 1 < b.y1 - 1 &&
                b.y0 + 1 < a.y1 - 1) {
                snprintf(why, len, "the text '%s' of %s overlaps '%s' of %s",
                         t->text, t->title, d->text[j].text,
                         d->text[j].title);
                return 1;
            }
        }
    }
    return 0;
}

/* The checker itself: an edge drawn through a label, and two labels on
 * top of each other, are found; the same drawing with the label moved
 * aside passes. */
START_TEST(test_svg_checker)
{
    static const char *const through =
        "<g id=\"node1\" class=\"node\">\n<title>plate:0</title>\n"
        "<text text-anchor=\"middle\" x=\"50\" y=\"-20\" font-family=\"H\" "
        "font-size=\"10.00\">N = 6 tokens</text>\n</g>\n"
        "<g id=\"edge1\" class=\"edge\">\n<title>a&#45;&gt;b</title>\n"
        "<path fill=\"none\" stroke=\"black\" d=\"M50,0C50,-10 50,-30 "
        "50,-40\"/>\n<polygon fill=\"black\" stroke=\"black\" "
        "points=\"47,-40 50,-50 53,-40 47,-40\"/>\n</g>\n";
    char why[1024] = "";
    svg_doc d = svg_parse(through);
    ck_assert_uint_eq(d.n_text, 1);
    ck_assert_uint_eq(d.n_edge, 2);
    ck_assert_int_eq(svg_overlap(&d, why, sizeof why), 1);
    ck_assert_ptr_nonnull(strstr(why, "N = 6 tokens"));
    /* about 60 units wide (12 characters at 10 units) */
    ck_assert_double_gt(d.text[0].box.x1 - d.text[0].box.x0, 45);
    ck_assert_double_lt(d.text[0].box.x1 - d.text[0].box.x0, 70);
    svg_free(&d);
    char *aside = strdup(through);
    ck_assert_ptr_nonnull(aside);
    char *x = strstr(aside, "x=\"50\"");
    memcpy(x, "x=\"99\"", 6); /* the label beside the edge */
    d = svg_parse(aside);
    ck_assert_int_eq(svg_overlap(&d, why, sizeof why), 0);
    svg_free(&d);
    free(aside);
    static const char *const stacked =
        "<g id=\"node1\" class=\"node\">\n<title>a</title>\n"
        "<text text-anchor=\"start\" x=\"0\" y=\"0\" font-family=\"H\" "
        "font-size=\"10.00\">first</text>\n</g>\n"
        "<g id=\"node2\" class=\"node\">\n<title>b</title>\n"
        "<text text-anchor=\"start\" x=\"10\" y=\"3\" font-family=\"H\" "
        "font-size=\"10.00\">second</text>\n</g>\n";
    d = svg_parse(stacked);
    ck_assert_int_eq(svg_overlap(&d, why, sizeof why), 1);
    ck_assert_ptr_nonnull(strstr(why, "overlaps"));
    svg_free(&d);
}
END_TEST

/* The SVG of every built-in, with both layouts that draw plates, of the
 * print theme, the expanded view and the composite spec: no edge passes
 * through a text (factor label, plate label, edge label, legend, title)
 * and no two texts of different elements overlap. */
static const char *const svg_cases[] = {
    "--theme print", "--layout fdp", "--layout fdp --theme print"};
START_TEST(test_svg_text_clear)
{
    make_dir();
    char cmd[1024], why[1024];
    const size_t nb = N_BUILTINS;
    for (size_t v = 0; v < 1 + sizeof svg_cases / sizeof *svg_cases; v++) {
        const size_t b = (size_t)_i;
        if (b > nb && v > 1)
            break;
        if (b < nb)
            snprintf(cmd, sizeof cmd, "%s %s -o t.svg", builtins[b],
                     v ? svg_cases[v - 1] : "");
        else if (b == nb)
            snprintf(cmd, sizeof cmd, "'%s/models/composite.dot' %s -o t.svg",
                     LSE_SOURCE_DIR, v ? svg_cases[v - 1] : "");
        else /* the expanded views are laid out by dot only */
            snprintf(cmd, sizeof cmd, "%s --expand %s -o t.svg",
                     b == nb + 1 ? "self-attention --causal" : "gmm -n 24",
                     v == 1 ? "--theme print" : "");
        ck_assert_msg(run(cmd) == 0, "%s: %s", cmd, err_text);
        char *svg = read_file("t.svg", NULL);
        svg_doc d = svg_parse(svg);
        ck_assert_msg(d.n_text >= 3 && d.n_edge >= 2, "%s: %zu texts, %zu "
                      "edge drawings", cmd, d.n_text, d.n_edge);
        ck_assert_msg(!svg_overlap(&d, why, sizeof why), "%s: %s", cmd, why);
        svg_free(&d);
        free(svg);
    }
    remove_dir();
}
END_TEST

/* Factor labels show beta and the mask. */
START_TEST(test_factor_labels)
{
    make_dir();
    ck_assert_int_eq(run("hopfield -o h.dot"), 0);
    char *dot = read_file("h.dot", NULL);
    Agraph_t *G = agmemread(dot);
    free(dot);
    const char *l = agget(agnode(G, (char *)"attract", 0), (char *)"label");
    ck_assert_msg(strstr(l, "LSE dot") && strstr(l, "\xce\xb2 = 4"), "%s", l);
    agclose(G);
    ck_assert_int_eq(run("self-attention --causal -o s.dot"), 0);
    dot = read_file("s.dot", NULL);
    G = agmemread(dot);
    free(dot);
    l = agget(agnode(G, (char *)"self", 0), (char *)"label");
    ck_assert_msg(strstr(l, "mask: causal") != NULL, "%s", l);
    agclose(G);
    /* the legend names the line styles the picture uses */
    ck_assert_int_eq(run("slds -o m.dot"), 0);
    dot = read_file("m.dot", NULL);
    G = agmemread(dot);
    free(dot);
    Agnode_t *leg = agnode(G, (char *)"legend", 0);
    ck_assert_ptr_nonnull(leg);
    ck_assert_ptr_nonnull(strstr(agget(leg, (char *)"label"), "context"));
    agclose(G);
    ck_assert_int_eq(run("hopfield --no-legend -o n.dot"), 0);
    dot = read_file("n.dot", NULL);
    G = agmemread(dot);
    free(dot);
    ck_assert_ptr_null(agnode(G, (char *)"legend", 0));
    agclose(G);
    remove_dir();
}
END_TEST

/* A spec whose nodes have one row each: no plates. */
static const char flat_spec[] =
    "digraph flat {\n"
    "  q [rows=1, dim=4, observed=true];\n  k [rows=1, dim=4];\n"
    "  m [kind=param, rows=1, dim=4];\n"
    "  attend [kind=factor, sim=dot];\n"
    "  k -> attend [role=parent];\n  attend -> q [role=child];\n"
    "  recall [kind=factor, sim=dot, beta=4];\n"
    "  m -> recall [role=parent];\n  recall -> k [role=child];\n}\n";

/* Every layout energyviz accepts either draws the picture or is refused:
 * dot and fdp draw plates; neato and circo, which draw no clusters, are
 * refused (exit 2, naming the option and the layouts that work) for a
 * graph with plates and draw one without. No two nodes overlap and no
 * edge crosses a text. */
START_TEST(test_layouts)
{
    static const char *const layouts[] = {"neato", "fdp", "circo"};
    const char *l = layouts[_i];
    const int drawn = strcmp(l, "fdp") == 0;
    make_dir();
    char args[512], why[1024];
    for (size_t b = 0; b < N_BUILTINS && !drawn; b++) {
        snprintf(args, sizeof args, "%s --layout %s -o r.svg", builtins[b], l);
        ck_assert_msg(run(args) == 2, "%s: accepted", args);
        ck_assert_msg(strstr(err_text, "--layout") != NULL &&
                          strstr(err_text, l) != NULL &&
                          strstr(err_text, "draws no plates") != NULL &&
                          strstr(err_text, "use dot or fdp") != NULL &&
                          strchr(err_text, '\n') == err_text + strlen(err_text) - 1,
                      "%s: %s", args, err_text);
    }
    char spec[256];
    snprintf(spec, sizeof spec, "%s/flat.dot", dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs(flat_spec, f);
    fclose(f);
    snprintf(args, sizeof args, "%s --layout %s", drawn ? "slot-attention" : "flat.dot", l);
    Agraph_t *G = laid_out(args, l);
    for (Agnode_t *a = agfstnode(G); a != NULL; a = agnxtnode(G, a))
        for (Agnode_t *b = agnxtnode(G, a); b != NULL; b = agnxtnode(G, b)) {
            const rect p = node_box(a), q = node_box(b);
            const int overlap = p.x0 < q.x1 - 1 && q.x0 < p.x1 - 1 &&
                                p.y0 < q.y1 - 1 && q.y0 < p.y1 - 1;
            ck_assert_msg(!overlap, "%s: %s overlaps %s", l, agnameof(a),
                          agnameof(b));
        }
    size_t clusters = 0;
    for (Agraph_t *c = agfstsubg(G); c != NULL; c = agnxtsubg(c))
        clusters += strncmp(agnameof(c), "cluster", 7) == 0;
    ck_assert_uint_eq(clusters, drawn ? 2 : 0); /* tokens, slots */
    agclose(G);
    /* the picture as drawn */
    snprintf(args, sizeof args, "%s --layout %s -o r.svg",
             drawn ? "slot-attention" : "flat.dot", l);
    ck_assert_msg(run(args) == 0, "%s: %s", args, err_text);
    char *svg = read_file("r.svg", NULL);
    ck_assert_uint_eq(strstr(svg, "class=\"cluster\"") != NULL, drawn);
    svg_doc d = svg_parse(svg);
    ck_assert_uint_ge(d.n_edge, 4);
    ck_assert_msg(!svg_overlap(&d, why, sizeof why), "%s: %s", args, why);
    svg_free(&d);
    free(svg);
    remove_dir();
}
END_TEST

/* Expanded view: rows left to right in order, a legend, a parent and a
 * child copy of a node that is both. */
START_TEST(test_expanded_order)
{
    make_dir();
    Agraph_t *G = laid_out("self-attention --causal --expand", "dot");
    for (int side = 0; side < 2; side++) {
        double last = -INFINITY;
        for (int r = 0; r < 6; r++) {
            char name[32];
            snprintf(name, sizeof name, "x[%d]%s", r, side ? "'" : "");
            Agnode_t *n = agnode(G, name, 0);
            ck_assert_msg(n != NULL, "no node %s", name);
            const rect b = node_box(n);
            ck_assert_msg(b.x0 > last, "%s is left of the row before", name);
            last = b.x0;
        }
    }
    ck_assert_ptr_nonnull(agnode(G, (char *)"legend", 0));
    agclose(G);
    /* every built-in with a softmax: the rows of every node in order (the
     * order edges alone did not keep them: 0 25 26 27 2 3 ...) */
    size_t models = 0;
    for (size_t b = 0; b < N_BUILTINS; b++) {
        char args[256];
        snprintf(args, sizeof args, "%s --expand", builtins[b]);
        G = laid_out(args, "dot");
        size_t checked = 0;
        for (Agnode_t *n = agfstnode(G); n != NULL; n = agnxtnode(G, n)) {
            const char *row = agget(n, (char *)"row");
            if (row == NULL || *row == '\0' || strcmp(row, "0") == 0)
                continue;
            /* row r sits right of row r - 1 of the same copy */
            char prev[300];
            const char *name = agnameof(n), *br = strrchr(name, '[');
            ck_assert_ptr_nonnull(br);
            snprintf(prev, sizeof prev, "%.*s[%ld]%s", (int)(br - name), name,
                     strtol(row, NULL, 10) - 1, strchr(br, ']') + 1);
            Agnode_t *p = agnode(G, prev, 0);
            ck_assert_msg(p != NULL, "%s: no %s", builtins[b], prev);
            ck_assert_msg(node_box(p).x0 < node_box(n).x0,
                          "%s --expand: %s is not left of %s", builtins[b],
                          prev, name);
            checked++;
        }
        models += checked >= 4; /* layernorm has no softmax: no rows */
        agclose(G);
    }
    ck_assert_uint_ge(models, N_BUILTINS - 1);
    /* the SLDS's parent rows are its modes, and say so */
    ck_assert_int_eq(run("slds --expand -o se.dot"), 0);
    char *dot = read_file("se.dot", NULL);
    ck_assert_ptr_nonnull(strstr(dot, "b (K = 2 modes)"));
    ck_assert_ptr_nonnull(strstr(dot, "x (T = 200 steps): first 40 of 200"));
    free(dot);
    remove_dir();
}
END_TEST

/* PNG width and height from the IHDR chunk. */
static void png_size(const char *name, unsigned *w, unsigned *h)
{
    size_t len = 0;
    unsigned char *b = (unsigned char *)read_file(name, &len);
    ck_assert_uint_ge(len, 24);
    ck_assert(memcmp(b, "\x89PNG", 4) == 0);
    *w = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 |
         b[19];
    *h = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 |
         b[23];
    free(b);
}

/* --dpi and --theme: the raster scales with the resolution; 150 expanded
 * rows stay within 16 x 10 inches. */
START_TEST(test_dpi_theme_size)
{
    make_dir();
    unsigned w96, h96, w300, h300, w, h;
    ck_assert_int_eq(run("hopfield -o a.png"), 0);
    png_size("a.png", &w96, &h96);
    ck_assert_int_eq(run("hopfield --dpi 300 -o b.png"), 0);
    png_size("b.png", &w300, &h300);
    ck_assert_double_eq_tol((double)w300 / w96, 300.0 / 96, 0.1);
    ck_assert_uint_ge(w96, 500); /* a screen picture, not a stamp */
    ck_assert_int_eq(run("hopfield --theme print -o c.png"), 0);
    png_size("c.png", &w, &h);
    ck_assert_uint_ge(w, 3 * w96 - 200); /* print: 300 dpi */
    char *dot = NULL;
    ck_assert_int_eq(run("hopfield --theme print -o c.dot"), 0);
    dot = read_file("c.dot", NULL);
    ck_assert_ptr_nonnull(strstr(dot, "Times-Roman"));
    free(dot);
    ck_assert_int_eq(run("gmm -n 150 --expand --max-rows 150 -o e.png"), 0);
    png_size("e.png", &w, &h);
    ck_assert_uint_le(w, 16 * 96 + 40);
    ck_assert_uint_le(h, 10 * 96 + 40);
    /* refused */
    ck_assert_int_eq(run("hopfield --dpi 5 -o x.png"), 2);
    ck_assert_ptr_nonnull(strstr(err_text, "--dpi"));
    ck_assert_int_eq(run("hopfield --theme poster -o x.png"), 2);
    ck_assert_ptr_nonnull(strstr(err_text, "screen or print"));
    ck_assert_int_eq(run("hopfield --expand --layout neato -o x.png"), 2);
    ck_assert_ptr_nonnull(strstr(err_text, "dot only"));
    remove_dir();
}
END_TEST

/* --what transition: the row softmax of a Markov chain term's logits,
 * so every row sums to 1 (read from the DOT heat map's cell values);
 * refused for a term without a chain. */
START_TEST(test_transition)
{
    make_dir();
    ck_assert_msg(run("slds --markov -k 3 --matrix dynamics --what transition "
                      "-o t.dot") == 0,
                  "%s", err_text);
    char *dot = read_file("t.dot", NULL);
    double row[3] = {0, 0, 0};
    size_t cells = 0;
    for (const char *p = dot; (p = strstr(p, "TITLE=\"")) != NULL; p += 7) {
        row[cells / 3] += strtod(p + 7, NULL);
        cells++;
    }
    ck_assert_uint_eq(cells, 9);
    for (int i = 0; i < 3; i++)
        ck_assert_double_eq_tol(row[i], 1.0, 1e-3);
    free(dot);
    ck_assert_int_eq(run("slds --matrix dynamics --what transition -o x.png"),
                     1);
    ck_assert_ptr_nonnull(strstr(err_text, "not a Markov chain"));
    remove_dir();
}
END_TEST

/* The library refuses a plate naming no node, a bad theme or dpi. */
START_TEST(test_opts_refused)
{
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_node *x = NULL;
    lse_assert_ok(lse_graph_add_node(g, "x", 3, 2, 0, &x));
    lse_viz_opts o = lse_viz_opts_default();
    const lse_viz_plate p[1] = {{"y", "N = 3"}};
    o.plates = p;
    o.n_plates = 1;
    char *dot = NULL;
    lse_error err;
    lse_assert_status(lse_viz_to_dot(g, &o, &dot, &err), LSE_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "y"));
    const lse_viz_plate q[1] = {{"x", "I = 3 items"}};
    o.plates = q;
    lse_assert_ok(lse_viz_to_dot(g, &o, &dot, &err));
    ck_assert_ptr_nonnull(strstr(dot, "I = 3 items"));
    free(dot);
    o.theme = "poster";
    lse_assert_status(lse_viz_to_dot(g, &o, &dot, &err), LSE_EINVAL);
    o.theme = "print";
    o.dpi = 5000;
    lse_assert_status(lse_viz_to_dot(g, &o, &dot, &err), LSE_EINVAL);
    lse_graph_free(g);
}
END_TEST

#ifdef LSE_HAVE_PLOTS
/* A PNG read into 8-bit RGB. */
typedef struct image {
    unsigned w, h;
    unsigned char *rgb;
} image;

static image read_png(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(&pi, path), "%s: %s", path,
                  pi.message);
    pi.format = PNG_FORMAT_RGB;
    image im = {pi.width, pi.height, malloc(PNG_IMAGE_SIZE(pi))};
    ck_assert_ptr_nonnull(im.rgb);
    ck_assert(png_image_finish_read(&pi, NULL, im.rgb, 0, NULL));
    return im;
}

/* Pixels within @p tol (per channel) of the colour r, g, b. */
static size_t count_colour(image im, int r, int g, int b, int tol)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)im.w * im.h; i++) {
        const unsigned char *p = im.rgb + 3 * i;
        n += abs(p[0] - r) <= tol && abs(p[1] - g) <= tol && abs(p[2] - b) <= tol;
    }
    return n;
}

/* Distinct colours (quantized to 4 bits per channel) in the middle of
 * the plot area (the central 40 % of the picture). */
static size_t centre_colours(image im)
{
    static unsigned char seen[4096];
    memset(seen, 0, sizeof seen);
    size_t n = 0;
    for (unsigned y = im.h * 3 / 10; y < im.h * 7 / 10; y++)
        for (unsigned x = im.w * 3 / 10; x < im.w * 7 / 10; x++) {
            const unsigned char *p = im.rgb + 3 * ((size_t)y * im.w + x);
            const unsigned q = (p[0] >> 4) << 8 | (p[1] >> 4) << 4 | p[2] >> 4;
            n += !seen[q];
            seen[q] = 1;
        }
    return n;
}

/* Heat maps are PLplot raster images a reader can use: a bounded page,
 * a filled plot area, both ends of the viridis colour bar, grey cells
 * exactly when pairs are masked, long series left to right. */
static size_t count_in(image im, double x0, double x1, double y0, double y1,
                       int r, int g, int b, int tol)
{
    size_t n = 0;
    for (unsigned y = (unsigned)(y0 * im.h); y < (unsigned)(y1 * im.h); y++)
        for (unsigned x = (unsigned)(x0 * im.w); x < (unsigned)(x1 * im.w);
             x++) {
            const unsigned char *p = im.rgb + 3 * ((size_t)y * im.w + x);
            n += abs(p[0] - r) <= tol && abs(p[1] - g) <= tol &&
                 abs(p[2] - b) <= tol;
        }
    return n;
}

START_TEST(test_heatmaps)
{
    make_dir();
    ck_assert_msg(run("dar-attention --matrix attend --what resonance -o r.png") ==
                      0,
                  "%s", err_text);
    image im = read_png("r.png");
    ck_assert_uint_ge(im.w, 500);
    ck_assert_uint_le(im.w, 1200);
    ck_assert_uint_ge(im.h, 400);
    ck_assert_uint_le(im.h, 1000);
    ck_assert_uint_ge(centre_colours(im), 4); /* cells, not a blank page */
    /* the colour bar: both ends of viridis (dark purple, yellow) */
    ck_assert_uint_gt(count_colour(im, 68, 1, 84, 12), 50);
    ck_assert_uint_gt(count_colour(im, 253, 231, 37, 12), 50);
    /* nothing is masked: no grey cells (a few anti-aliased text pixels) */
    ck_assert_uint_lt(count_colour(im, 160, 160, 160, 2),
                      (size_t)im.w * im.h / 1000);
    free(im.rgb);
    /* the causal mask: 15 grey cells of 36, about 40 % of the plot area */
    ck_assert_int_eq(run("self-attention --causal --matrix self -o c.png"), 0);
    im = read_png("c.png");
    const size_t grey = count_colour(im, 160, 160, 160, 2);
    ck_assert_uint_gt(grey, (size_t)im.w * im.h / 10);
    /* 36 cells wide enough for their values: black or white digits */
    const size_t digits = count_in(im, 0.12, 0.78, 0.18, 0.82, 0, 0, 0, 40) +
                          count_in(im, 0.12, 0.78, 0.18, 0.82, 255, 255, 255, 40);
    ck_assert_uint_gt(digits, 500);
    free(im.rgb);
    /* 40 x 3 cells are too narrow for "0.00": no digits run together
     * (viridis has neither black nor white) */
    ck_assert_int_eq(run("gmm --matrix mixture -o n.png"), 0);
    im = read_png("n.png");
    ck_assert_uint_lt(count_in(im, 0.12, 0.78, 0.18, 0.82, 0, 0, 0, 40) +
                          count_in(im, 0.12, 0.78, 0.18, 0.82, 255, 255, 255, 40),
                      20);
    free(im.rgb);
    /* a long series (272 x 2 responsibilities) runs left to right */
    ck_assert_int_eq(run("gmm --matrix mixture --max-rows 272 -o g.png"), 0);
    im = read_png("g.png");
    ck_assert_uint_gt(im.w, 2 * im.h);
    ck_assert_uint_ge(centre_colours(im), 2);
    free(im.rgb);
    /* --dpi scales the raster */
    ck_assert_int_eq(run("daam --matrix daam --what importance --dpi 192 -o "
                         "d.png"),
                     0);
    im = read_png("d.png");
    ck_assert_uint_ge(im.w, 1200);
    free(im.rgb);
    /* svg and pdf from the same code */
    ck_assert_int_eq(run("daam --matrix daam --what importance -o d.svg"), 0);
    char *svg = read_file("d.svg", NULL);
    ck_assert_ptr_nonnull(strstr(svg, "<svg"));
    free(svg);
    ck_assert_int_eq(run("daam --matrix daam -o d.pdf"), 0);
    char *pdf = read_file("d.pdf", NULL);
    ck_assert(memcmp(pdf, "%PDF", 4) == 0);
    free(pdf);
    remove_dir();
}
END_TEST

/* Pixels of colour r, g, b (within tol) in the box x0..x1, y0..y1 given
 * as fractions of the picture. */

/* The Okabe-Ito class colours of tools/plot.c. */
static const int okabe[4][3] = {
    {0, 114, 178}, {230, 159, 0}, {0, 158, 115}, {204, 121, 167}};

/* lsefit's fit plots: a two-component fit of Old Faithful shows exactly
 * two class colours, in the plot and in the legend (top right); the BIC
 * plot four (one per covariance model); the SLDS plot its mode bands. */
START_TEST(test_fit_plots)
{
    if (lsefit == NULL)
        return;
    make_dir();
    ck_assert_msg(run_prog(lsefit, "gmm '" LSE_SOURCE_DIR
                                   "/data/faithful.csv' -k 2 --seed 1 "
                                   "--quiet -o m.json") == 0,
                  "%s", err_text);
    ck_assert_msg(run_prog(lsefit, "gmm plot m.json '" LSE_SOURCE_DIR
                                   "/data/faithful.csv' -o c.png") == 0,
                  "%s", err_text);
    image im = read_png("c.png");
    ck_assert_uint_ge(im.w, 500);
    ck_assert_uint_le(im.w, 1500);
    ck_assert_uint_ge(centre_colours(im), 3);
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_gt(count_colour(im, okabe[k][0], okabe[k][1],
                                       okabe[k][2], 10),
                          200);
        /* the legend's symbol, top right */
        ck_assert_uint_gt(count_in(im, 0.55, 1.0, 0.0, 0.3, okabe[k][0],
                                   okabe[k][1], okabe[k][2], 10),
                          10);
    }
    for (int k = 2; k < 4; k++)
        ck_assert_uint_lt(count_colour(im, okabe[k][0], okabe[k][1],
                                       okabe[k][2], 10),
                          20);
    free(im.rgb);
    static const char *const what[] = {"uncertainty", "density"};
    for (int i = 0; i < 2; i++) {
        char args[512];
        snprintf(args, sizeof args,
                 "gmm plot m.json '" LSE_SOURCE_DIR "/data/faithful.csv' "
                 "--what %s -o w.png",
                 what[i]);
        ck_assert_msg(run_prog(lsefit, args) == 0, "%s: %s", args, err_text);
        im = read_png("w.png");
        ck_assert_uint_ge(centre_colours(im), 3);
        free(im.rgb);
    }
    ck_assert_msg(run_prog(lsefit, "gmm plot m.json '" LSE_SOURCE_DIR
                                   "/data/faithful.csv' --what bic --k-max 4 "
                                   "-o b.svg") == 0,
                  "%s", err_text);
    ck_assert_int_eq(run_prog(lsefit, "gmm plot m.json '" LSE_SOURCE_DIR
                                      "/data/faithful.csv' --what bic "
                                      "--k-max 4 -o b.png"),
                     0);
    im = read_png("b.png");
    for (int k = 0; k < 4; k++)
        ck_assert_uint_gt(count_colour(im, okabe[k][0], okabe[k][1],
                                       okabe[k][2], 10),
                          30);
    free(im.rgb);
    /* four Iris features: a pairs plot with three class colours */
    ck_assert_msg(run_prog(lsefit, "gmm '" LSE_SOURCE_DIR
                                   "/data/iris.csv' --ignore species -k 3 --seed 1 "
                                   "--quiet "
                                   "-o i.json") == 0,
                  "%s", err_text);
    ck_assert_int_eq(run_prog(lsefit, "gmm plot i.json '" LSE_SOURCE_DIR
                                      "/data/iris.csv' -o i.png"),
                     0);
    im = read_png("i.png");
    for (int k = 0; k < 3; k++)
        ck_assert_uint_gt(count_colour(im, okabe[k][0], okabe[k][1],
                                       okabe[k][2], 10),
                          300);
    ck_assert_uint_lt(count_colour(im, okabe[3][0], okabe[3][1], okabe[3][2],
                                   10),
                      20);
    free(im.rgb);
    /* the print theme: 300 dpi */
    ck_assert_int_eq(run_prog(lsefit, "gmm plot m.json '" LSE_SOURCE_DIR
                                      "/data/faithful.csv' --theme print -o "
                                      "t.png"),
                     0);
    im = read_png("t.png");
    ck_assert_uint_eq(im.w, 7 * 300);
    free(im.rgb);
    /* SLDS: the series over mode bands, the probabilities below */
    ck_assert_msg(run_prog(lsefit, "slds '" LSE_SOURCE_DIR
                                   "/data/gdp_growth.csv' --columns "
                                   "growth_pct -k 2 --markov --seed 1 "
                                   "--quiet -o s.json") == 0,
                  "%s", err_text);
    ck_assert_msg(run_prog(lsefit, "slds plot s.json '" LSE_SOURCE_DIR
                                   "/data/gdp_growth.csv' -o s.png") == 0,
                  "%s", err_text);
    im = read_png("s.png");
    ck_assert_uint_gt(im.w, im.h);
    /* band tints: 1/3 of each class colour over white */
    for (int k = 0; k < 2; k++) {
        const int t[3] = {255 - (255 - okabe[k][0]) / 3,
                          255 - (255 - okabe[k][1]) / 3,
                          255 - (255 - okabe[k][2]) / 3};
        ck_assert_uint_gt(count_colour(im, t[0], t[1], t[2], 6),
                          (size_t)im.w * im.h / 50);
    }
    free(im.rgb);
    /* the latent SLDS: a third panel in the middle with the smoothed
     * latent mean (dark grey line) over its +- 2 sd band (lavender);
     * no band colour in the series (top) or probability (bottom) panels;
     * the mode bands in the top panel (y fractions from the top) */
    {   /* a simulated two-column series with visible state uncertainty */
        char path[128];
        snprintf(path, sizeof path, "%s/g.json", dir);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs("{\"model\": \"slds-latent\", \"markov\": true, "
              "\"n_modes\": 2, \"latent_dim\": 1, \"n_features\": 2, "
              "\"feature_names\": [\"u\", \"v\"], \"A\": [[[0.98]], "
              "[[0.6]]], \"b\": [[0.05], [-0.2]], \"Q\": [[[0.05]], "
              "[[0.3]]], \"C\": [[1], [0.7]], \"d\": [0, 1], \"R_diag\": "
              "[0.3, 0.3], \"initial_mean\": [0], \"initial_cov\": [[1]], "
              "\"initial\": [0.5, 0.5], \"transition\": [[0.97, 0.03], "
              "[0.05, 0.95]]}\n",
              f);
        fclose(f);
    }
    ck_assert_msg(run_prog(lsefit, "slds simulate g.json -T 300 --seed 2 "
                                   "-o g.csv") == 0,
                  "%s", err_text);
    ck_assert_msg(run_prog(lsefit, "slds g.csv -k 2 --latent-dim 1 --markov "
                                   "--seed 1 --max-iter 30 --quiet "
                                   "--columns u,v -o l.json") == 0,
                  "%s", err_text);
    ck_assert_msg(run_prog(lsefit, "slds plot l.json g.csv --columns u,v "
                                   "-o l.png") == 0,
                  "%s", err_text);
    im = read_png("l.png");
    ck_assert_uint_gt(im.w, im.h);
    ck_assert_uint_gt(im.h * 10, im.w * 7); /* 9 x 7.5 in: taller */
    ck_assert_uint_gt(count_in(im, 0.1, 0.95, 0.41, 0.60, 60, 60, 60, 12), 300);
    ck_assert_uint_gt(count_in(im, 0.1, 0.95, 0.41, 0.60, 225, 215, 245, 6),
                      (size_t)im.w * im.h / 100);
    ck_assert_uint_lt(count_in(im, 0.1, 0.95, 0.07, 0.33, 225, 215, 245, 6),
                      50);
    ck_assert_uint_lt(count_in(im, 0.1, 0.95, 0.69, 0.90, 225, 215, 245, 6),
                      50);
    for (int k = 0; k < 2; k++) {
        const int t[3] = {255 - (255 - okabe[k][0]) / 3,
                          255 - (255 - okabe[k][1]) / 3,
                          255 - (255 - okabe[k][2]) / 3};
        ck_assert_uint_gt(count_in(im, 0.1, 0.95, 0.07, 0.34, t[0], t[1],
                                   t[2], 6),
                          (size_t)im.w * im.h / 100);
    }
    free(im.rgb);
    /* refused */
    ck_assert_int_eq(run_prog(lsefit, "gmm plot m.json x.csv --what pie -o "
                                      "p.png"),
                     2);
    ck_assert_ptr_nonnull(strstr(err_text, "--what 'pie'"));
    ck_assert_int_eq(run_prog(lsefit, "gmm plot m.json x.csv -o p.bmp"), 2);
    ck_assert_ptr_nonnull(strstr(err_text, "format"));
    ck_assert_int_eq(run_prog(lsefit, "gmm plot m.json x.csv"), 2);
    ck_assert_ptr_nonnull(strstr(err_text, "-o"));
    remove_dir();
}
END_TEST

/* What an SVG says, independent of coordinates and version comments: the
 * contents of its <title> and <text> elements, sorted, one per line. */
static char *svg_words(const char *svg)
{
    size_t cap = strlen(svg) + 1, n = 0, count = 0;
    char **items = malloc(cap / 4 * sizeof *items + sizeof *items);
    ck_assert_ptr_nonnull(items);
    static const char *const open[2] = {"<title>", "<text"};
    for (int k = 0; k < 2; k++)
        for (const char *p = svg; (p = strstr(p, open[k])) != NULL;) {
            p = strchr(p, '>');
            if (p == NULL)
                break;
            p++;
            const char *e = strstr(p, k == 0 ? "</title>" : "</text>");
            if (e == NULL)
                break;
            char *it = malloc((size_t)(e - p) + 3);
            ck_assert_ptr_nonnull(it);
            it[0] = (char)('0' + k);
            memcpy(it + 1, p, (size_t)(e - p));
            it[e - p + 1] = '\0';
            items[count++] = it;
            p = e;
        }
    for (size_t i = 1; i < count; i++) /* insertion sort: few items */
        for (size_t j = i; j > 0 && strcmp(items[j - 1], items[j]) > 0; j--) {
            char *t = items[j];
            items[j] = items[j - 1];
            items[j - 1] = t;
        }
    char *out = malloc(cap + 2 * count + 1);
    ck_assert_ptr_nonnull(out);
    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        const size_t l = strlen(items[i]);
        memcpy(out + n, items[i], l);
        n += l;
        out[n++] = '\n';
        free(items[i]);
    }
    out[n] = '\0';
    free(items);
    return out;
}

static char *slurp_path(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The committed pictures in docs/img are what the program draws now:
 * docs/img/make.sh run into a scratch directory; SVGs (Graphviz) compared
 * by their titles and texts, PNGs (PLplot) by size and colour histogram
 * (4 bits per channel, at most 3 % of the pixels moved), so that font
 * hinting on another machine does not matter but a changed picture does.
 * Every picture make.sh draws is checked in, and every checked-in one is
 * drawn. */
START_TEST(test_docs_img)
{
    if (lsefit == NULL)
        return;
    make_dir();
    char build[4096], cmd[8192];
    snprintf(build, sizeof build, "%s", tool);
    for (int k = 0; k < 2; k++) { /* BUILD/tools/energyviz -> BUILD */
        char *slash = strrchr(build, '/');
        ck_assert_ptr_nonnull(slash);
        *slash = '\0';
    }
    snprintf(cmd, sizeof cmd,
             "sh '" LSE_SOURCE_DIR "/docs/img/make.sh' '%s' '%s/img' "
             ">/dev/null 2>'%s/make.err'",
             build, dir, dir);
    ck_assert_msg(system(cmd) == 0, "docs/img/make.sh failed (%s/make.err)",
                  dir);
    size_t compared = 0;
    for (int side = 0; side < 2; side++) {
        char from[4200];
        snprintf(from, sizeof from, "%s", side == 0 ? LSE_SOURCE_DIR "/docs/img" : dir);
        if (side == 1)
            strcat(from, "/img");
        DIR *dp = opendir(from);
        ck_assert_ptr_nonnull(dp);
        const struct dirent *e;
        while ((e = readdir(dp)) != NULL) {
            const char *dot = strrchr(e->d_name, '.');
            if (dot == NULL ||
                (strcmp(dot, ".svg") != 0 && strcmp(dot, ".png") != 0))
                continue;
            char a[4400], b[4400];
            snprintf(a, sizeof a, LSE_SOURCE_DIR "/docs/img/%s", e->d_name);
            snprintf(b, sizeof b, "%s/img/%s", dir, e->d_name);
            ck_assert_msg(access(a, R_OK) == 0,
                          "make.sh draws %s, which docs/img lacks",
                          e->d_name);
            ck_assert_msg(access(b, R_OK) == 0,
                          "docs/img/%s is not drawn by make.sh", e->d_name);
            if (side == 1)
                continue;
            compared++;
            if (strcmp(dot, ".svg") == 0) {
                char *x = slurp_path(a), *y = slurp_path(b);
                char *wx = svg_words(x), *wy = svg_words(y);
                ck_assert_msg(strcmp(wx, wy) == 0,
                              "docs/img/%s differs from what energyviz "
                              "draws now (run docs/img/make.sh)",
                              e->d_name);
                free(wx);
                free(wy);
                free(x);
                free(y);
            } else {
                char rel[4400];
                snprintf(rel, sizeof rel, "img/%s", e->d_name);
                image y = read_png(rel);
                png_image pi;
                memset(&pi, 0, sizeof pi);
                pi.version = PNG_IMAGE_VERSION;
                ck_assert(png_image_begin_read_from_file(&pi, a));
                pi.format = PNG_FORMAT_RGB;
                image x = {pi.width, pi.height, malloc(PNG_IMAGE_SIZE(pi))};
                ck_assert(png_image_finish_read(&pi, NULL, x.rgb, 0, NULL));
                ck_assert_msg(x.w == y.w && x.h == y.h,
                              "docs/img/%s is %ux%u, now drawn %ux%u",
                              e->d_name, x.w, x.h, y.w, y.h);
                static long hx[4096], hy[4096];
                memset(hx, 0, sizeof hx);
                memset(hy, 0, sizeof hy);
                const size_t np = (size_t)x.w * x.h;
                for (size_t i = 0; i < np; i++) {
                    const unsigned char *p = x.rgb + 3 * i, *q = y.rgb + 3 * i;
                    hx[(p[0] >> 4) << 8 | (p[1] >> 4) << 4 | p[2] >> 4]++;
                    hy[(q[0] >> 4) << 8 | (q[1] >> 4) << 4 | q[2] >> 4]++;
                }
                long moved = 0;
                for (size_t i = 0; i < 4096; i++)
                    moved += labs(hx[i] - hy[i]);
                ck_assert_msg((double)moved / 2 <= 0.03 * (double)np,
                              "docs/img/%s: %.1f%% of the pixels changed "
                              "colour (run docs/img/make.sh)",
                              e->d_name, 50.0 * (double)moved / (double)np);
                free(x.rgb);
                free(y.rgb);
            }
        }
        closedir(dp);
    }
    ck_assert_uint_ge(compared, 20);
    remove_dir();
}
END_TEST
#endif

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("pictures");
    TCase *tc = tcase_create("pictures");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_plate_names, 0, (int)N_PLATES);
    tcase_add_loop_test(tc, test_no_edge_through_labels, 0, (int)N_BUILTINS);
    tcase_add_test(tc, test_svg_checker);
    tcase_add_loop_test(tc, test_svg_text_clear, 0, (int)N_BUILTINS + 3);
    tcase_add_test(tc, test_factor_labels);
    tcase_add_loop_test(tc, test_layouts, 0, 3);
    tcase_add_test(tc, test_expanded_order);
    tcase_add_test(tc, test_dpi_theme_size);
    tcase_add_test(tc, test_opts_refused);
    tcase_add_test(tc, test_transition);
#ifdef LSE_HAVE_PLOTS
    tcase_add_test(tc, test_heatmaps);
    tcase_add_test(tc, test_fit_plots);
    tcase_add_test(tc, test_docs_img);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s PATH/TO/energyviz [PATH/TO/lsefit]\n",
                argv[0]);
        return 2;
    }
    static char lsefit_path[4096];
    char here[2048];
    if (argc == 3 && getcwd(here, sizeof here) != NULL) {
        if (argv[2][0] == '/')
            snprintf(lsefit_path, sizeof lsefit_path, "%s", argv[2]);
        else
            snprintf(lsefit_path, sizeof lsefit_path, "%s/%s", here, argv[2]);
        lsefit = lsefit_path;
    }
    static char abs_path[4096];
    char cwd[2048];
    if (argv[1][0] == '/')
        snprintf(abs_path, sizeof abs_path, "%s", argv[1]);
    else if (getcwd(cwd, sizeof cwd) != NULL)
        snprintf(abs_path, sizeof abs_path, "%s/%s", cwd, argv[1]);
    if (access(abs_path, X_OK) != 0) {
        fprintf(stderr, "%s: no program '%s'\n", argv[0], argv[1]);
        return 2;
    }
    tool = abs_path;
    SRunner *runner = srunner_create(lse_test_suite());
    srunner_set_tap(runner, "-");
    srunner_run_all(runner, CK_SILENT);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
