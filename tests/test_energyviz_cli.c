/* The energyviz command: every built-in model in every format, the DOT
 * read back with libcgraph and checked against the model's graph, the
 * SVG checked for well-formed XML, fitted-model JSON and spec inputs, the
 * matrix and expanded views, and every bad input with its one-line message
 * and exit status. Run by meson with the tool's path as argv[1]. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <graphviz/cgraph.h>

#include "lse_check.h"
#include <lsegraph/viz.h>

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

static const char *tool; /* the energyviz binary */
static char dir[64];     /* this test's scratch directory */
static char out_text[8192], err_text[8192];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/lse-energyviz-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void slurp(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return;
    const size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Run energyviz with @p args (a shell fragment; files are relative to the
 * scratch directory); returns its exit status, stdout and stderr in
 * out_text, err_text. */
static int run(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >stdout.txt 2>stderr.txt",
             dir, tool, args);
    const int rc = system(cmd);
    ck_assert_msg(rc != -1 && WIFEXITED(rc), "cannot run %s", cmd);
    char path[256];
    snprintf(path, sizeof path, "%s/stdout.txt", dir);
    slurp(path, out_text, sizeof out_text);
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    slurp(path, err_text, sizeof err_text);
    return WEXITSTATUS(rc);
}

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

static void write_text(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* ------------------------------------------------------------------ */
/* A small XML well-formedness checker: tags balance with one root,
 * attributes are quoted, '<' never appears raw in text or values, entity
 * references are well-formed; comments, processing instructions, the
 * DOCTYPE and CDATA sections are skipped. Returns NULL or the reason. */

static int name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' ||
           c == ':';
}

static const char *check_entity(const char **p)
{
    const char *s = *p + 1; /* after '&' */
    if (*s == '#') {
        s++;
        if (*s == 'x')
            s++;
        if (!isxdigit((unsigned char)*s))
            return "bad character reference";
        while (isxdigit((unsigned char)*s))
            s++;
    } else {
        if (!isalpha((unsigned char)*s))
            return "bad entity reference";
        while (name_char(*s))
            s++;
    }
    if (*s != ';')
        return "entity reference without ';'";
    *p = s + 1;
    return NULL;
}

static const char *xml_check(const char *s)
{
    static char why[160];
    char stack[64][64];
    size_t depth = 0, roots = 0;
    const char *p = s;
    while (*p) {
        if (*p == '&') {
            const char *e = check_entity(&p);
            if (e != NULL)
                return e;
            continue;
        }
        if (*p != '<') {
            if (depth == 0 && !isspace((unsigned char)*p))
                return "text outside the root element";
            p++;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            const char *e = strstr(p + 4, "-->");
            if (e == NULL)
                return "unterminated comment";
            p = e + 3;
        } else if (strncmp(p, "<?", 2) == 0) {
            const char *e = strstr(p + 2, "?>");
            if (e == NULL)
                return "unterminated processing instruction";
            p = e + 2;
        } else if (strncmp(p, "<![CDATA[", 9) == 0) {
            const char *e = strstr(p + 9, "]]>");
            if (e == NULL)
                return "unterminated CDATA";
            p = e + 3;
        } else if (strncmp(p, "<!DOCTYPE", 9) == 0) {
            const char *e = strchr(p, '>');
            if (e == NULL || depth > 0 || roots > 0)
                return "misplaced DOCTYPE";
            p = e + 1;
        } else if (p[1] == '/') {
            const char *n = p + 2, *e = n;
            while (name_char(*e))
                e++;
            const size_t len = (size_t)(e - n);
            while (isspace((unsigned char)*e))
                e++;
            if (*e != '>' || depth == 0 || len != strlen(stack[depth - 1]) ||
                strncmp(n, stack[depth - 1], len) != 0) {
                snprintf(why, sizeof why, "end tag </%.*s> does not match <%s>",
                         (int)len, n, depth ? stack[depth - 1] : "(none)");
                return why;
            }
            depth--;
            p = e + 1;
        } else {
            const char *n = p + 1, *e = n;
            while (name_char(*e))
                e++;
            const size_t len = (size_t)(e - n);
            if (len == 0 || len >= sizeof stack[0])
                return "bad tag name";
            /* attributes: name = "value" or 'value' */
            for (;;) {
                while (isspace((unsigned char)*e))
                    e++;
                if (*e == '>' || (e[0] == '/' && e[1] == '>'))
                    break;
                const char *a = e;
                while (name_char(*e))
                    e++;
                if (e == a)
                    return "bad attribute name";
                while (isspace((unsigned char)*e))
                    e++;
                if (*e++ != '=')
                    return "attribute without '='";
                while (isspace((unsigned char)*e))
                    e++;
                const char q = *e++;
                if (q != '"' && q != '\'')
                    return "unquoted attribute value";
                while (*e && *e != q) {
                    if (*e == '<')
                        return "'<' in an attribute value";
                    if (*e == '&') {
                        const char *err = check_entity(&e);
                        if (err != NULL)
                            return err;
                        continue;
                    }
                    e++;
                }
                if (*e++ != q)
                    return "unterminated attribute value";
            }
            if (depth == 0 && roots++ > 0)
                return "more than one root element";
            if (*e == '/') {
                p = e + 2;
            } else {
                if (depth == 64)
                    return "nesting too deep";
                snprintf(stack[depth++], sizeof stack[0], "%.*s", (int)len, n);
                p = e + 1;
            }
        }
    }
    if (depth != 0) {
        snprintf(why, sizeof why, "unclosed <%s>", stack[depth - 1]);
        return why;
    }
    return roots == 1 ? NULL : "no root element";
}

START_TEST(test_xml_checker)
{
    ck_assert_ptr_null(xml_check("<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n"
                                 "<svg a=\"1\"><!-- c --><g b='&amp;'>x &lt; y"
                                 "<text/></g></svg>\n"));
    ck_assert_ptr_nonnull(xml_check("<svg><g></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg><g></g>"));
    ck_assert_ptr_nonnull(xml_check("<svg a=1></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg a=\"<\"></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg>&amp</svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg></svg><svg></svg>"));
    ck_assert_ptr_nonnull(xml_check("<svg></svg> text"));
    ck_assert_ptr_nonnull(xml_check(""));
}
END_TEST

/* ------------------------------------------------------------------ */
/* The built-in models and what their graphs hold                      */

typedef struct model_case {
    const char *args;       /* model and options */
    const char *vars[10];   /* variable and parameter nodes */
    const char *factors[4]; /* factor nodes (terms) */
    const char *labels[4];  /* each factor's label holds this */
    int n_edges;
    const char *shape_node; /* a node and its "rows,dim" */
    const char *shape;
} model_case;

static const model_case cases[] = {
    {"gmm",
     {"x", "mu", "logw", "chol"},
     {"mixture"},
     {"LSE gaussian(cov=full)"},
     4,
     "x",
     "272,2"},
    {"gmm -k 4 -d 3 -n 50 --covariance diag",
     {"x", "mu", "logw", "chol"},
     {"mixture"},
     {"LSE gaussian(cov=diag)"},
     4,
     "chol",
     "4,3"},
    {"hopfield",
     {"memories", "state"},
     {"attract", "bound"},
     {"LSE dot", "quadratic(scale=1)"},
     3,
     "memories",
     "4,16"},
    {"cross-attention",
     {"queries", "keys"},
     {"attend", "bound"},
     {"LSE scaled-dot", "quadratic(scale=0.353553)"},
     3,
     "keys",
     "6,8"},
    {"cross-attention --sim daam",
     {"queries", "keys", "c"},
     {"attend", "bound"},
     {"LSE daam", "quadratic"},
     4,
     "c",
     "6,1"},
    {"self-attention --causal",
     {"x", "W_Q", "W_K"},
     {"self", "bound"},
     {"LSE bilinear(scale=1)", "quadratic"},
     5,
     "W_Q",
     "4,8"},
    {"slot-attention",
     {"tokens", "slots", "W_K", "W_Q"},
     {"assign", "bound"},
     {"LSE bilinear", "quadratic"},
     5,
     "tokens",
     "16,8"},
    {"predcoding",
     {"x", "h1", "h2", "W1", "b1", "W2", "b2"},
     {"pc1", "pc2", "prior"},
     {"LSE nonlinear(f=identity)", "LSE nonlinear", "quadratic"},
     9,
     "W1",
     "8,4"},
    {"slds",
     {"x", "b", "logw", "A", "chol"},
     {"dynamics"},
     {"LSE lingauss(cov=full)"},
     6,
     "x",
     "200,1"},
    {"slds --markov -k 3 -d 2",
     {"x", "b", "A", "chol", "init", "trans"},
     {"dynamics"},
     {"LSE lingauss(cov=full)"},
     7,
     "trans",
     "3,3"},
    {"layernorm",
     {"x", "gamma", "delta"},
     {"layernorm"},
     {"layernorm(eps=1e-05)"},
     3,
     "delta",
     "1,8"},
    {"idwnet",
     {"q", "keys", "values"},
     {"attention"},
     {"LSE idw(p=2, eps=0.001)"},
     2,
     "keys",
     "20,8"},
    {"daam",
     {"x", "delta", "c"},
     {"daam"},
     {"LSE daam(axis=features, eps=1e-05)"},
     3,
     "delta",
     "4,16"},
    {"dar-attention --lambda 0.3 --rho 0.4",
     {"queries", "keys"},
     {"attend", "bound"},
     {"LSE dar(lambda=0.3, alpha=8, rho=0.4, gate=sigmoid)", "quadratic"},
     3,
     "queries",
     "6,8"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static int count(const char *const *list, size_t max)
{
    int n = 0;
    while ((size_t)n < max && list[n] != NULL)
        n++;
    return n;
}

/* The DOT output of a model against its expected graph, and against the
 * lse_graph lse_viz_read_spec rebuilds from it. */
static void check_model_dot(const model_case *c, const char *dot)
{
    Agraph_t *G = agmemread(dot);
    ck_assert_msg(G != NULL, "%s: DOT does not parse", c->args);
    const int nv = count(c->vars, 10), nf = count(c->factors, 4);
    ck_assert_int_eq(model_nodes(G), nv + nf);
    ck_assert_int_eq(model_edges(G), c->n_edges);
    for (int i = 0; i < nv; i++) {
        Agnode_t *n = agnode(G, (char *)c->vars[i], 0);
        ck_assert_msg(n != NULL, "%s: no node %s", c->args, c->vars[i]);
        const char *kind = agget(n, (char *)"kind");
        ck_assert(strcmp(kind, "variable") == 0 || strcmp(kind, "param") == 0);
        /* the label shows the shape */
        char shape[64];
        snprintf(shape, sizeof shape, "%sx%s", agget(n, (char *)"rows"),
                 agget(n, (char *)"dim"));
        ck_assert_ptr_nonnull(strstr(agget(n, (char *)"label"), shape));
    }
    for (int i = 0; i < nf; i++) {
        Agnode_t *f = agnode(G, (char *)c->factors[i], 0);
        ck_assert_msg(f != NULL, "%s: no factor %s", c->args, c->factors[i]);
        ck_assert_str_eq(agget(f, (char *)"kind"), "factor");
        ck_assert_msg(strstr(agget(f, (char *)"label"), c->labels[i]) != NULL,
                      "%s: factor %s label '%s' lacks '%s'", c->args,
                      c->factors[i], agget(f, (char *)"label"), c->labels[i]);
        /* every edge of a factor joins it to a variable and has a role */
        int ne = 0;
        for (Agedge_t *e = agfstedge(G, f); e != NULL; e = agnxtedge(G, e, f)) {
            Agnode_t *v = agtail(e) == f ? aghead(e) : agtail(e);
            ck_assert_str_ne(agget(v, (char *)"kind"), "factor");
            ck_assert_str_ne(agget(e, (char *)"role"), "");
            ne++;
        }
        ck_assert_int_gt(ne, 0);
    }
    Agnode_t *s = agnode(G, (char *)c->shape_node, 0);
    char shape[64];
    snprintf(shape, sizeof shape, "%s,%s", agget(s, (char *)"rows"),
             agget(s, (char *)"dim"));
    ck_assert_str_eq(shape, c->shape);
    /* the DOT is a spec: the graph it describes has the same nodes,
     * shapes, terms and labels */
    lse_graph *g = NULL;
    lse_error err;
    const lse_status st = lse_viz_read_spec(c->args, dot, &g, &err);
    ck_assert_msg(st == LSE_OK, "%s", err.message);
    ck_assert_int_eq((int)lse_graph_n_nodes(g), nv);
    ck_assert_int_eq((int)lse_graph_n_terms(g), nf);
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        const lse_node *n = lse_graph_node(g, i);
        Agnode_t *v = agnode(G, (char *)lse_node_name(n), 0);
        ck_assert_ptr_nonnull(v);
        ck_assert_uint_eq(strtoul(agget(v, (char *)"rows"), NULL, 10),
                          lse_node_rows(n));
        ck_assert_uint_eq(strtoul(agget(v, (char *)"dim"), NULL, 10),
                          lse_node_dim(n));
        ck_assert_str_eq(agget(v, (char *)"observed"),
                         lse_node_is_clamped(n) ? "true" : "false");
    }
    int edges = 0;
    for (size_t m = 0; m < lse_graph_n_terms(g); m++) {
        const lse_term *t = lse_graph_term(g, m);
        char desc[256];
        lse_term_describe(t, desc, sizeof desc);
        Agnode_t *f = agnode(G, (char *)lse_term_name(t), 0);
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(strstr(agget(f, (char *)"label"), desc));
        if (lse_term_kind_of(t) == LSE_TERM_CUSTOM) {
            edges += (int)lse_term_n_views(t);
            continue;
        }
        edges += 2 + (lse_term_context(t).node != NULL) +
                 (lse_term_chain_init(t) != NULL) +
                 (lse_term_chain_trans(t) != NULL);
        for (size_t k = 0; k < lse_term_n_param(t); k++)
            edges += lse_term_param(t, k) != NULL;
    }
    ck_assert_int_eq(edges, c->n_edges);
    double e;
    lse_assert_ok(lse_graph_energy(g, &e));
    lse_graph_free(g);
    agclose(G);
}

static void check_svg(const char *name)
{
    char *svg = read_file(name, NULL);
    ck_assert_msg(strstr(svg, "<svg") != NULL, "%s is not SVG", name);
    const char *why = xml_check(svg);
    ck_assert_msg(why == NULL, "%s is not well-formed XML: %s", name, why);
    free(svg);
}

static void check_magic(const char *name, const char *magic, size_t n)
{
    size_t len = 0;
    char *data = read_file(name, &len);
    ck_assert_uint_gt(len, 100);
    ck_assert_msg(memcmp(data, magic, n) == 0, "%s: wrong file type", name);
    free(data);
}

START_TEST(test_models)
{
    const model_case *c = &cases[_i];
    make_dir();
    static const char *const formats[] = {"dot", "svg", "png", "pdf"};
    for (size_t f = 0; f < 4; f++) {
        char args[512];
        snprintf(args, sizeof args, "%s -o out.%s", c->args, formats[f]);
        const int rc = run(args);
        ck_assert_msg(rc == 0, "energyviz %s: status %d: %s", args, rc,
                      err_text);
        ck_assert_str_eq(err_text, "");
    }
    char *dot = read_file("out.dot", NULL);
    check_model_dot(c, dot);
    free(dot);
    check_svg("out.svg");
    check_magic("out.png", "\x89PNG\r\n\x1a\n", 8);
    check_magic("out.pdf", "%PDF-", 5);
    remove_dir();
}
END_TEST

/* The built-ins whose terms a spec cannot describe (a heads term, a
 * model's own similarity), so their DOT is not read back: every format,
 * and the DOT holds their nodes, factors, labels and shapes. */
static const struct {
    const char *args, *items[8];
} nospec[] = {
    {"et", {"tokens", "W_Q", "W_K", "memories", "attend0", "memory",
            "heads(H=4, base=dot)", "rows=32"}},
    {"capsnet -n 5 -k 4", {"children", "parents", "W", "route0", "bound",
                           "readout", "LSE capsule", "rows=20"}},
};

START_TEST(test_models_nospec)
{
    make_dir();
    static const char *const formats[] = {"dot", "svg", "png", "pdf"};
    for (size_t f = 0; f < 4; f++) {
        char args[512];
        snprintf(args, sizeof args, "%s -o out.%s", nospec[_i].args,
                 formats[f]);
        const int rc = run(args);
        ck_assert_msg(rc == 0, "energyviz %s: status %d: %s", args, rc,
                      err_text);
        ck_assert_str_eq(err_text, "");
    }
    char *dot = read_file("out.dot", NULL);
    for (size_t i = 0; i < 8; i++)
        ck_assert_msg(strstr(dot, nospec[_i].items[i]) != NULL,
                      "%s: the DOT lacks %s", nospec[_i].args,
                      nospec[_i].items[i]);
    free(dot);
    check_svg("out.svg");
    check_magic("out.png", "\x89PNG\r\n\x1a\n", 8);
    check_magic("out.pdf", "%PDF-", 5);
    remove_dir();
}
END_TEST

/* --format overrides the extension; the layouts; the expanded view. */
START_TEST(test_views)
{
    make_dir();
    ck_assert_int_eq(run("gmm --format svg -o picture.out"), 0);
    check_svg("picture.out");
    static const char *const layouts[] = {"dot", "fdp"}; /* neato, circo:
                                                    refused (plates) */
    for (size_t i = 0; i < 2; i++) {
        char args[128];
        snprintf(args, sizeof args, "slot-attention --layout %s -o l.svg",
                 layouts[i]);
        ck_assert_msg(run(args) == 0, "%s: %s", args, err_text);
        check_svg("l.svg");
    }
    /* expanded: one node per drawn row, edges weighted by the softmax */
    ck_assert_int_eq(run("gmm -n 30 --expand --max-rows 12 -o e.dot"), 0);
    char *dot = read_file("e.dot", NULL);
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    ck_assert_str_eq(agget(G, (char *)"view"), "expanded");
    ck_assert_int_eq(model_nodes(G), 12 + 3); /* x rows 0..11, mu rows 0..2 */
    ck_assert_ptr_nonnull(agnode(G, (char *)"x[11]", 0));
    ck_assert_ptr_null(agnode(G, (char *)"x[12]", 0));
    /* responsibilities of a row sum to 1, and rows of well-separated
     * clusters are drawn to (at least) one mean */
    ck_assert_int_ge(model_edges(G), 12);
    for (Agnode_t *n = agfstnode(G); n != NULL; n = agnxtnode(G, n)) {
        if (strncmp(agnameof(n), "x[", 2) != 0)
            continue;
        double sum = 0;
        for (Agedge_t *e = agfstin(G, n); e != NULL; e = agnxtin(G, e)) {
            if (strcmp(agget(e, (char *)"role"), "order") == 0)
                continue; /* keeps the rows in order */
            ck_assert_str_eq(agget(e, (char *)"role"), "weight");
            ck_assert_str_eq(agget(e, (char *)"term"), "mixture");
            sum += strtod(agget(e, (char *)"weight_value"), NULL);
        }
        ck_assert_double_le(sum, 1 + 1e-5);
        ck_assert_double_gt(sum, 0.96); /* edges below 0.01 are left out */
    }
    agclose(G);
    free(dot);
    ck_assert_int_eq(run("self-attention --causal --expand -o e.svg"), 0);
    check_svg("e.svg");
    /* an expanded picture is not a spec */
    ck_assert_int_eq(run("e.dot -o again.svg"), 1);
    ck_assert_ptr_nonnull(strstr(err_text, "expanded picture"));
    remove_dir();
}
END_TEST

/* Heat maps: softmax rows sum to 1 (checked through the legend range),
 * the resonance and importance views, in svg and dot. */
START_TEST(test_matrix)
{
    make_dir();
    static const char *const ok[] = {
        "dar-attention --matrix attend -o m.svg",
        "dar-attention --matrix attend --what similarity -o m.svg",
        "dar-attention --matrix attend --what resonance -o m.svg",
        "dar-attention --steps 3 --matrix attend --what resonance -o m.svg",
        "daam --matrix daam --what importance -o m.svg",
        "daam --matrix daam --what softmax -o m.svg",
        "self-attention --causal --matrix self -o m.svg",
        "gmm --matrix mixture --max-rows 100 -o m.svg",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ck_assert_msg(run(ok[i]) == 0, "%s: %s", ok[i], err_text);
        check_svg("m.svg");
    }
    ck_assert_int_eq(run("dar-attention --matrix attend --what resonance "
                         "-o r.dot"),
                     0);
    char *dot = read_file("r.dot", NULL);
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    ck_assert_str_eq(agget(G, (char *)"view"), "matrix");
    agclose(G);
    /* 6 x 6 cells, resonance values lie in [0, 1] */
    size_t cells = 0;
    for (const char *p = dot; (p = strstr(p, "TITLE=\"")) != NULL; p += 7) {
        const double v = strtod(p + 7, NULL);
        ck_assert(v >= 0 && v <= 1);
        cells++;
    }
    ck_assert_uint_eq(cells, 36);
    ck_assert_ptr_nonnull(strstr(dot, "resonance of 'attend'"));
    free(dot);
    /* the causal mask shows as grey cells above the diagonal */
    ck_assert_int_eq(run("self-attention --causal --matrix self -o c.dot"), 0);
    dot = read_file("c.dot", NULL);
    size_t grey = 0;
    for (const char *p = dot; (p = strstr(p, "#bbbbbb")) != NULL; p++)
        grey++;
    ck_assert_uint_eq(grey, 6 * 5 / 2);
    free(dot);
    /* importance factors span exactly [0, 1] */
    ck_assert_int_eq(run("daam --matrix daam --what importance -o i.dot"), 0);
    dot = read_file("i.dot", NULL);
    double lo = 2, hi = -1;
    for (const char *p = dot; (p = strstr(p, "TITLE=\"")) != NULL; p += 7) {
        const double v = strtod(p + 7, NULL);
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    ck_assert_double_eq(lo, 0);
    ck_assert_double_eq(hi, 1);
    free(dot);
    remove_dir();
}
END_TEST

static const char gmm_json[] =
    "{\"model\": \"gmm\", \"covariance_type\": \"full\", \"n_components\": 2,\n"
    " \"n_features\": 2, \"feature_names\": [\"a\", \"b\"],\n"
    " \"weights\": [0.4, 0.6], \"means\": [[0, 0], [3, 3]],\n"
    " \"covariances\": [[[1, 0], [0, 1]], [[0.5, 0.1], [0.1, 0.5]]],\n"
    " \"loglik\": -30.0, \"loglik_per_sample\": -2.5}\n";

static const char slds_json[] =
    "{\"model\": \"slds\", \"markov\": true, \"n_modes\": 2, \"n_features\": "
    "1,\n"
    " \"feature_names\": [\"y\"], \"weights\": [0.5, 0.5],\n"
    " \"A\": [[[0.5]], [[-0.5]]], \"b\": [[1], [-1]],\n"
    " \"covariances\": [[[1]], [[0.5]]],\n"
    " \"transition\": [[0.9, 0.1], [0.2, 0.8]], \"initial\": [0.5, 0.5],\n"
    " \"loglik\": -20.0, \"loglik_per_step\": -2.0}\n";

/* Fitted models: real dimensions; with data, the responsibilities. */
START_TEST(test_fitted)
{
    make_dir();
    write_text("gmm.json", gmm_json);
    write_text("slds.json", slds_json);
    write_text("data.csv", "b,a,label\n0.1,0.2,x\n3.1,2.9,y\n0.3,-0.2,x\n"
                           "2.8,3.3,y\n");
    write_text("series.csv", "y\n0.1\n1.2\n0.4\n-0.9\n-1.5\n-0.2\n");
    ck_assert_int_eq(run("gmm.json -o g.dot"), 0);
    char *dot = read_file("g.dot", NULL);
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    /* N = loglik / loglik_per_sample = 12 */
    ck_assert_str_eq(agget(agnode(G, (char *)"x", 0), (char *)"rows"), "12");
    ck_assert_str_eq(agget(agnode(G, (char *)"mu", 0), (char *)"rows"), "2");
    ck_assert_ptr_nonnull(
        strstr(agget(agnode(G, (char *)"mixture", 0), (char *)"label"),
               "gaussian(cov=full)"));
    agclose(G);
    free(dot);
    /* columns are found by name (b, a are swapped in the file) */
    ck_assert_msg(run("gmm.json --data data.csv --expand -o gx.dot") == 0, "%s",
                  err_text);
    dot = read_file("gx.dot", NULL);
    G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    ck_assert_int_eq(model_nodes(G), 4 + 2);
    /* rows 0 and 2 lie at (0.2, 0.1) and (-0.2, 0.3): component 0 */
    Agedge_t *e = agedge(G, agnode(G, (char *)"mu[0]", 0),
                         agnode(G, (char *)"x[2]", 0), NULL, 0);
    ck_assert_ptr_nonnull(e);
    ck_assert_double_gt(strtod(agget(e, (char *)"weight_value"), NULL), 0.99);
    ck_assert_ptr_null(agedge(G, agnode(G, (char *)"mu[1]", 0),
                              agnode(G, (char *)"x[2]", 0), NULL, 0));
    agclose(G);
    free(dot);
    ck_assert_int_eq(run("gmm.json --data data.csv --matrix mixture -o gm.svg"),
                     0);
    check_svg("gm.svg");
    ck_assert_msg(run("slds.json -o s.dot") == 0, "%s", err_text);
    dot = read_file("s.dot", NULL);
    G = agmemread(dot);
    /* T = 10 steps + 1 lag; the Markov chain's logits */
    ck_assert_str_eq(agget(agnode(G, (char *)"x", 0), (char *)"rows"), "11");
    ck_assert_ptr_nonnull(agnode(G, (char *)"trans", 0));
    ck_assert_str_eq(agget(agnode(G, (char *)"dynamics", 0), (char *)"reduce"),
                     "chain");
    agclose(G);
    free(dot);
    ck_assert_msg(run("slds.json --data series.csv --expand -o sx.svg") == 0,
                  "%s", err_text);
    check_svg("sx.svg");
    remove_dir();
}
END_TEST

/* Specs: the composite example, and a spec read back from DOT output. */
START_TEST(test_specs)
{
    make_dir();
    ck_assert_msg(run("'" LSE_SOURCE_DIR "/models/composite.dot' -o c.dot") ==
                      0,
                  "%s", err_text);
    char *dot = read_file("c.dot", NULL);
    Agraph_t *G = agmemread(dot);
    ck_assert_ptr_nonnull(G);
    ck_assert_int_eq(model_nodes(G), 5 + 3);
    ck_assert_int_eq(model_edges(G), 4 + 2 + 1);
    ck_assert_ptr_nonnull(strstr(
        agget(agnode(G, (char *)"recall", 0), (char *)"label"), "LSE dot"));
    ck_assert_ptr_nonnull(
        strstr(agget(agnode(G, (char *)"assign", 0), (char *)"label"),
               "LSE bilinear"));
    agclose(G);
    free(dot);
    ck_assert_int_eq(
        run("'" LSE_SOURCE_DIR "/models/composite.dot' --expand -o c.svg"), 0);
    check_svg("c.svg");
    /* DOT output is itself a spec, also under the .gv extension */
    ck_assert_int_eq(run("slds --markov -o s.gv"), 0);
    ck_assert_int_eq(run("s.gv -o s2.dot"), 0);
    ck_assert_int_eq(run("s2.dot --matrix dynamics -o s.svg"), 0);
    check_svg("s.svg");
    remove_dir();
}
END_TEST

START_TEST(test_help_version)
{
    make_dir();
    ck_assert_int_eq(run("--help"), 0);
    static const char *const names[] = {"gmm",
                                        "hopfield",
                                        "cross-attention",
                                        "self-attention",
                                        "slot-attention",
                                        "predcoding",
                                        "slds",
                                        "layernorm",
                                        "idwnet",
                                        "daam",
                                        "dar-attention",
                                        "stattn",
                                        "dma",
                                        "--covariance",
                                        "--markov",
                                        "--causal",
                                        "--expand",
                                        "--matrix",
                                        "--layout"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(strstr(out_text, names[i]) != NULL, "--help lacks %s",
                      names[i]);
    ck_assert_int_eq(run("--version"), 0);
    ck_assert_ptr_nonnull(strstr(out_text, "energyviz"));
    remove_dir();
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bad input: the exit status, one line on stderr, and its words.      */

typedef struct bad_case {
    const char *args;
    int status;
    const char *want;
} bad_case;

static const bad_case bad[] = {
    {"", 2, "no MODEL given"},
    {"gmm", 2, "no output file"},
    {"gmm -o x.bmp", 2, "cannot tell the format of 'x.bmp'"},
    {"gmm -o x.svg --format jpg", 2, "--format 'jpg'"},
    {"nosuch -o x.svg", 2, "unknown model 'nosuch'"},
    {"gmm -k 0 -o x.svg", 2, "-k '0': expected a positive integer"},
    {"gmm -k 3x -o x.svg", 2, "-k '3x'"},
    {"gmm --markov -o x.svg", 2, "model gmm takes no option --markov"},
    {"hopfield --covariance full -o x.svg", 2,
     "model hopfield takes no option --covariance"},
    {"gmm --bogus -o x.svg", 2, "unknown option '--bogus'"},
    {"gmm -o", 2, "option '-o' needs a value"},
    {"gmm --expand=yes -o x.svg", 2, "takes no value"},
    {"gmm extra -o x.svg", 2, "unexpected argument 'extra'"},
    {"gmm --covariance round -o x.svg", 2, "--covariance 'round'"},
    {"gmm --layout twopi -o x.svg", 2, "--layout 'twopi'"},
    {"gmm --layout neato -o x.svg", 2,
     "--layout 'neato' draws no plates (Graphviz clusters) and this graph has 2"},
    {"slds --layout circo -o x.svg", 2, "use dot or fdp"},
    {"daam --matrix daam --layout fdp -o x.png", 2, "drop --layout fdp"},
    {"gmm --what softmax -o x.svg", 2, "--what needs --matrix"},
    {"gmm --matrix mixture --what foo -o x.svg", 2, "--what 'foo'"},
    {"gmm --matrix mixture --expand -o x.svg", 2, "choose one"},
    {"gmm --data d.csv -o x.svg", 2, "--data goes with a fitted model"},
    {"hopfield --beta -1 -o x.svg", 2, "--beta '-1': must be > 0"},
    {"cross-attention --sim gaussian -o x.svg", 2, "has parameter nodes"},
    {"cross-attention --sim nope -o x.svg", 2, "--sim 'nope'"},
    {"idwnet --score bilinear -o x.svg", 1, "idwnet"},
    {"predcoding --dims 8 -o x.svg", 2, "--dims '8'"},
    {"predcoding --act cubic -o x.svg", 2, "--act 'cubic'"},
    {"daam --axis diagonal -o x.svg", 2, "--axis 'diagonal'"},
    {"slds -T 1 -o x.svg", 2, "-T 1"},
    {"gmm -o /nonexistent-dir/x.svg", 1,
     "cannot write '/nonexistent-dir/x.svg'"},
    {"gmm -o /nonexistent-dir/x.dot", 1, "cannot write"},
    {"gmm --matrix nosuch -o x.svg", 1, "no term 'nosuch' (terms: mixture)"},
    {"hopfield --matrix bound -o x.svg", 1, "'bound' is a custom term"},
    {"gmm --matrix mixture --what resonance -o x.svg", 1,
     "uses gaussian, not dar"},
    {"dar-attention --matrix attend --what importance -o x.svg", 1,
     "uses dar, not daam"},
    {"missing.json -o x.svg", 1, "cannot open 'missing.json'"},
    {"missing.dot -o x.svg", 1, "cannot open 'missing.dot'"},
    {"bad.json -o x.svg", 1, "bad.json:1:"},
    {"hmm.json -o x.svg", 1, "model 'hmm' cannot be drawn"},
    {"nomeans.json -o x.svg", 1, "no key 'means'"},
    {"gmm.json --expand -o x.svg", 2, "needs --data"},
    {"gmm.json -k 3 -o x.svg", 2, "option -k is for built-in models"},
    {"gmm.json --data nodata.csv -o x.svg", 1, "nodata.csv"},
    {"gmm.json --data three.csv -o x.svg", 1,
     "three.csv has 3 columns, the model has 2 features"},
    {"gmm.json --data text.csv -o x.svg", 1, "not a number"},
    {"spec.dot --data d.csv -o x.svg", 2, "--data goes with a fitted model"},
    {"unknown.dot -o x.svg", 1,
     "unknown.dot:4: factor 'f': unknown similarity"},
    {"rows.dot -o x.svg", 1, "rows.dot:3: variable 'y' has no rows"},
    /* sizes: rows * 8 wrapped around and --expand crashed; a huge but
     * representable count allocated 16 GB before drawing 40 rows */
    {"huge.dot --expand -o x.svg", 1,
     "huge.dot:2: node 'a': rows=2305843009213693953 x dim=1"},
    {"huge.dot -o x.svg", 1, "more than 16777216 entries"},
    {"billion.dot --expand -o x.svg", 1,
     "billion.dot:2: node 'a': rows=1000000000"},
    {"pairs.dot -o x.svg", 1,
     "pairs.dot:4: factor 'f': 100000 child rows x 100000 parent rows"},
    {"gmm --expand --max-rows 5000 -o x.svg", 1, "at most 1000 rows per node"},
    {"syntax.dot -o x.svg", 1, "syntax.dot:3: DOT syntax error"},
    {"role.dot -o x.svg", 1, "role.dot:6: edge 'mu' -> 'f': unknown role"},
    {"dims.dot -o x.svg", 1, "dims.dot:4: factor 'f'"},
    {"orphan.dot -o x.svg", 1, "orphan.dot:4: factor 'f' has no children"},
};
#define N_BAD (sizeof bad / sizeof bad[0])

static void write_bad_inputs(void)
{
    write_text("gmm.json", gmm_json);
    write_text("bad.json", "{ \"model\": gmm }\n");
    write_text("hmm.json", "{\"model\": \"hmm\"}\n");
    write_text("nomeans.json",
               "{\"model\": \"gmm\", \"covariance_type\": \"full\", "
               "\"n_components\": 2, \"n_features\": 2, "
               "\"weights\": [0.5, 0.5]}\n");
    write_text("three.csv", "1,2,3\n4,5,6\n");
    write_text("text.csv", "a,b\n1,x\n");
    write_text("spec.dot", "digraph { x [rows=2 dim=2] }\n");
    write_text("unknown.dot", "digraph {\n  x [rows=2 dim=2]\n"
                              "  mu [kind=param rows=2 dim=2]\n"
                              "  f [kind=factor sim=gravity]\n"
                              "  mu -> f [role=parent]; f -> x [role=child]\n"
                              "}\n");
    write_text("rows.dot", "digraph {\n  x [rows=2 dim=2]\n  y [dim=2]\n}\n");
    write_text("huge.dot",
               "digraph {\n  a [rows=2305843009213693953, dim=1];\n}\n");
    write_text("billion.dot", "digraph {\n  a [rows=1000000000, dim=1];\n}\n");
    write_text("pairs.dot", "digraph {\n  x [rows=100000 dim=2]\n"
                            "  mu [kind=param rows=100000 dim=2]\n"
                            "  f [kind=factor sim=dot]\n"
                            "  mu -> f [role=parent]; f -> x [role=child]\n"
                            "}\n");
    write_text("syntax.dot", "digraph {\n  x [rows=2 dim=2]\n  -> x\n}\n");
    write_text("role.dot", "digraph {\n  x [rows=2 dim=2]\n"
                           "  mu [kind=param rows=2 dim=2]\n"
                           "  f [kind=factor sim=dot]\n"
                           "  f -> x [role=child]\n"
                           "  mu -> f [role=uncle]\n}\n");
    write_text("dims.dot", "digraph {\n  x [rows=2 dim=2]\n"
                           "  mu [kind=param rows=2 dim=3]\n"
                           "  f [kind=factor sim=dot]\n"
                           "  mu -> f [role=parent]; f -> x [role=child]\n"
                           "}\n");
    write_text("orphan.dot", "digraph {\n  x [rows=2 dim=2]\n"
                             "  mu [kind=param rows=2 dim=2]\n"
                             "  f [kind=factor sim=dot]\n"
                             "  mu -> f [role=parent]\n}\n");
}

START_TEST(test_bad_input)
{
    make_dir();
    write_bad_inputs();
    const bad_case *b = &bad[_i];
    const int rc = run(b->args);
    ck_assert_msg(rc == b->status, "energyviz %s: status %d, want %d (%s)",
                  b->args, rc, b->status, err_text);
    /* exactly one line, "energyviz: ..." */
    ck_assert_msg(strncmp(err_text, "energyviz: ", 11) == 0, "%s", err_text);
    const char *nl = strchr(err_text, '\n');
    ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", err_text);
    ck_assert_msg(strstr(err_text, b->want) != NULL, "'%s' not in '%s'",
                  b->want, err_text);
    ck_assert_str_eq(out_text, "");
    /* nothing is written on failure */
    char path[128];
    snprintf(path, sizeof path, "%s/x.svg", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    remove_dir();
}
END_TEST

/* Once: "energyviz spec.dot -o spec.dot" replaced the spec with exit 0.
 * An output that is the model or --data is refused before any work, a
 * read-only output is not replaced, a replaced file keeps its mode. */
START_TEST(test_outputs)
{
    make_dir();
    static const char spec[] = "digraph g { a [rows=2, dim=1]; }\n";
    write_text("spec.dot", spec);
    write_text("gmm.json", gmm_json);
    write_text("d.csv", "a,b\n0,0\n3,3\n");
    char path[256];
    snprintf(path, sizeof path, "%s/link.dot", dir);
    ck_assert_int_eq(symlink("spec.dot", path), 0);
    static const char *const refused[] = {
        "spec.dot -o spec.dot", "spec.dot -o ./link.dot",
        "spec.dot --matrix a -o spec.dot",
        "gmm.json --data d.csv --expand -o d.csv --format svg",
        "gmm.json -o gmm.json --format dot"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert_msg(run(refused[i]) == 2, "%s: %s", refused[i], err_text);
        ck_assert_msg(strstr(err_text, "is the same file as") != NULL &&
                          strstr(err_text, "choose another output file"),
                      "%s: %s", refused[i], err_text);
    }
    char *t = read_file("spec.dot", NULL);
    ck_assert_str_eq(t, spec);
    free(t);
    t = read_file("gmm.json", NULL);
    ck_assert_str_eq(t, gmm_json);
    free(t);
    t = read_file("d.csv", NULL);
    ck_assert_str_eq(t, "a,b\n0,0\n3,3\n");
    free(t);
    /* read-only: refused, untouched */
    write_text("out.svg", "old");
    snprintf(path, sizeof path, "%s/out.svg", dir);
    ck_assert_int_eq(chmod(path, 0444), 0);
    ck_assert_int_eq(run("spec.dot -o out.svg"), 1);
    ck_assert_msg(strstr(err_text, "'out.svg'") != NULL &&
                      strstr(err_text, "is read-only") != NULL &&
                      strstr(err_text, "chmod u+w") != NULL,
                  "%s", err_text);
    t = read_file("out.svg", NULL);
    ck_assert_str_eq(t, "old");
    free(t);
    /* writable: replaced, with its mode */
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_msg(run("spec.dot -o out.svg") == 0, "%s", err_text);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq((int)(sb.st_mode & 07777), 0640);
    check_svg("out.svg");
    remove_dir();
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("energyviz");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_xml_checker);
    tcase_add_loop_test(tc, test_models, 0, (int)N_CASES);
    tcase_add_loop_test(tc, test_models_nospec, 0,
                        (int)(sizeof nospec / sizeof nospec[0]));
    tcase_add_test(tc, test_views);
    tcase_add_test(tc, test_matrix);
    tcase_add_test(tc, test_fitted);
    tcase_add_test(tc, test_specs);
    tcase_add_test(tc, test_help_version);
    tcase_add_loop_test(tc, test_bad_input, 0, (int)N_BAD);
    tcase_add_test(tc, test_outputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/TO/energyviz\n", argv[0]);
        return 2;
    }
    /* meson passes a path relative to the build directory; the tests run
     * the tool from their scratch directories */
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
