#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <graphviz/cgraph.h>

#include <lsegraph/viz.h>
#include "../size-private.h"

/* Model specs: a DOT graph (read with libcgraph) turned into an lse_graph
 * through the public API only. Grammar: docs/energyviz.md, "Model specs".
 *
 * Line numbers. cgraph keeps no source position for nodes or edges, so the
 * reader finds them itself: it tokenizes the DOT text (identifiers,
 * numerals, quoted and HTML strings, comments, '#' lines, edge operators,
 * brackets), and
 * - a node's line is that of its first node statement (the name at
 *   bracket depth 0, not next to an edge operator, '=' or ':'), else of its
 *   first mention in an edge statement;
 * - the k-th edge from T to H is the k-th place where the tokens
 *   "T -> H" (or "T -- H", either order in an undirected graph) follow each
 *   other at bracket depth 0 (ports skipped), else the tail node's line.
 * Edges written with subgraph endpoints ("{a b} -> f") fall back to the
 * node's line. */

static const char fn[] = "lse_viz_read_spec";

/* Graphviz error text (agerr), collected rather than printed. */
static char gv_msg[512];

static int collect(char *msg)
{
    const size_t used = strlen(gv_msg);
    if (used + 1 < sizeof gv_msg)
        snprintf(gv_msg + used, sizeof gv_msg - used, "%s", msg);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Tokens, for line numbers                                            */

typedef enum tok_type {
    TOK_ID,     /* identifier, numeral, quoted or HTML string */
    TOK_EDGEOP, /* -> or -- */
    TOK_PUNCT   /* one of [ ] { } = ; , : and anything else */
} tok_type;

typedef struct token {
    tok_type type;
    int quoted;  /* quoted or HTML string (never a keyword) */
    char punct;  /* TOK_PUNCT: the character */
    size_t line; /* 1-based */
    char *text;  /* TOK_ID: the value, unescaped */
} token;

typedef struct token_list {
    token *t;
    size_t n, cap;
    int failed;
} token_list;

static void tokens_free(token_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->t[i].text);
    free(l->t);
    l->t = NULL;
    l->n = l->cap = 0;
}

static void push(token_list *l, tok_type type, int quoted, char punct,
                 size_t line, const char *s, size_t len)
{
    if (l->failed)
        return;
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 256;
        token *t = realloc(l->t, cap * sizeof *t);
        if (t == NULL) {
            l->failed = 1;
            return;
        }
        l->t = t;
        l->cap = cap;
    }
    char *text = NULL;
    if (type == TOK_ID) {
        text = malloc(len + 1);
        if (text == NULL) {
            l->failed = 1;
            return;
        }
        size_t k = 0;
        for (size_t i = 0; i < len; i++) {
            /* quoted strings: \" is a quote, backslash-newline a
             * continuation; other escapes stay as written (as cgraph) */
            if (quoted == 1 && s[i] == '\\' && i + 1 < len) {
                if (s[i + 1] == '"') {
                    text[k++] = '"';
                    i++;
                    continue;
                }
                if (s[i + 1] == '\n') {
                    i++;
                    continue;
                }
                if (s[i + 1] == '\r' && i + 2 < len && s[i + 2] == '\n') {
                    i += 2;
                    continue;
                }
            }
            text[k++] = s[i];
        }
        text[k] = '\0';
    }
    l->t[l->n++] = (token){.type = type,
                           .quoted = quoted,
                           .punct = punct,
                           .line = line,
                           .text = text};
}

static int id_start(unsigned char c)
{
    return isalpha(c) || c == '_' || c >= 0x80;
}

static int id_char(unsigned char c) { return id_start(c) || isdigit(c); }

static void tokenize(const char *s, token_list *l)
{
    size_t line = 1, i = 0;
    int line_start = 1;
    while (s[i] != '\0' && !l->failed) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            line++;
            i++;
            line_start = 1;
            continue;
        }
        if (isspace(c)) {
            i++;
            continue;
        }
        if (c == '#' && line_start) { /* preprocessor output line */
            while (s[i] != '\0' && s[i] != '\n')
                i++;
            continue;
        }
        line_start = 0;
        if (c == '/' && s[i + 1] == '/') {
            while (s[i] != '\0' && s[i] != '\n')
                i++;
            continue;
        }
        if (c == '/' && s[i + 1] == '*') {
            i += 2;
            while (s[i] != '\0' && !(s[i] == '*' && s[i + 1] == '/')) {
                if (s[i] == '\n')
                    line++;
                i++;
            }
            if (s[i] != '\0')
                i += 2;
            continue;
        }
        if (c == '"') {
            const size_t start = ++i, at = line;
            while (s[i] != '\0' && s[i] != '"') {
                if (s[i] == '\\' && s[i + 1] != '\0') {
                    if (s[i + 1] == '\n')
                        line++;
                    i += 2;
                    continue;
                }
                if (s[i] == '\n')
                    line++;
                i++;
            }
            push(l, TOK_ID, 1, 0, at, s + start, i - start);
            if (s[i] != '\0')
                i++;
            continue;
        }
        if (c == '<') { /* HTML string: balanced angle brackets */
            const size_t start = ++i, at = line;
            int depth = 1;
            while (s[i] != '\0') {
                if (s[i] == '<')
                    depth++;
                else if (s[i] == '>' && --depth == 0)
                    break;
                else if (s[i] == '\n')
                    line++;
                i++;
            }
            push(l, TOK_ID, 2, 0, at, s + start, i - start);
            if (s[i] != '\0')
                i++;
            continue;
        }
        if (c == '-' && (s[i + 1] == '>' || s[i + 1] == '-')) {
            push(l, TOK_EDGEOP, 0, 0, line, NULL, 0);
            i += 2;
            continue;
        }
        if (isdigit(c) ||
            ((c == '-' || c == '.') &&
             (isdigit((unsigned char)s[i + 1]) ||
              (s[i + 1] == '.' && isdigit((unsigned char)s[i + 2]))))) {
            const size_t start = i;
            if (s[i] == '-')
                i++;
            while (isdigit((unsigned char)s[i]) || s[i] == '.')
                i++;
            push(l, TOK_ID, 0, 0, line, s + start, i - start);
            continue;
        }
        if (id_start(c)) {
            const size_t start = i;
            while (id_char((unsigned char)s[i]))
                i++;
            push(l, TOK_ID, 0, 0, line, s + start, i - start);
            continue;
        }
        push(l, TOK_PUNCT, 0, (char)c, line, NULL, 0);
        i++;
    }
}

static int is_keyword(const token *t)
{
    static const char *const kw[] = {"node",    "edge",     "graph",
                                     "digraph", "subgraph", "strict"};
    if (t->type != TOK_ID || t->quoted)
        return 0;
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcasecmp(t->text, kw[i]) == 0)
            return 1;
    return 0;
}

static int is_punct(const token_list *l, size_t i, char c)
{
    return i < l->n && l->t[i].type == TOK_PUNCT && l->t[i].punct == c;
}

/* Token i is the name @p name used as a node ID at bracket depth 0. */
static int names(const token_list *l, size_t i, const char *name)
{
    const token *t = &l->t[i];
    return t->type == TOK_ID && !is_keyword(t) && strcmp(t->text, name) == 0 &&
           !(i > 0 && (is_punct(l, i - 1, '=') || is_punct(l, i - 1, ':'))) &&
           !is_punct(l, i + 1, '=');
}

/* Index just past a node ID at i and its optional ":port[:compass]". */
static size_t skip_port(const token_list *l, size_t i)
{
    i++;
    while (is_punct(l, i, ':') && i + 1 < l->n && l->t[i + 1].type == TOK_ID)
        i += 2;
    return i;
}

static size_t node_line(const token_list *l, const char *name)
{
    size_t depth = 0, mention = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (is_punct(l, i, '['))
            depth++;
        else if (is_punct(l, i, ']') && depth > 0)
            depth--;
        if (depth != 0 || !names(l, i, name))
            continue;
        const size_t next = skip_port(l, i);
        const int in_edge = (i > 0 && l->t[i - 1].type == TOK_EDGEOP) ||
                            (next < l->n && l->t[next].type == TOK_EDGEOP);
        if (!in_edge)
            return l->t[i].line;
        if (mention == 0)
            mention = l->t[i].line;
    }
    return mention;
}

/* Line of the k-th (0-based) edge statement from @p tail to @p head. */
static size_t edge_line(const token_list *l, const char *tail, const char *head,
                        size_t k, int directed)
{
    size_t depth = 0, seen = 0, last = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (is_punct(l, i, '['))
            depth++;
        else if (is_punct(l, i, ']') && depth > 0)
            depth--;
        if (depth != 0 || l->t[i].type != TOK_ID || is_keyword(&l->t[i]))
            continue;
        const size_t op = skip_port(l, i);
        if (op + 1 >= l->n || l->t[op].type != TOK_EDGEOP ||
            l->t[op + 1].type != TOK_ID)
            continue;
        const char *a = l->t[i].text, *b = l->t[op + 1].text;
        const int match =
            (strcmp(a, tail) == 0 && strcmp(b, head) == 0) ||
            (!directed && strcmp(a, head) == 0 && strcmp(b, tail) == 0);
        if (!match || !names(l, i, a))
            continue;
        last = l->t[i].line;
        if (seen++ == k)
            return last;
    }
    return last != 0 ? last : node_line(l, tail);
}

/* ------------------------------------------------------------------ */
/* The reader's state and its error reporting                          */

typedef struct reader {
    const char *name; /* file name for messages */
    Agraph_t *G;
    token_list tokens;
    lse_graph *g;
    lse_error *err;
    size_t entries; /* rows x dim summed over the variables so far */
} reader;

static lse_status fail_at(reader *r, lse_status st, size_t line,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lse_status fail_at(reader *r, lse_status st, size_t line,
                          const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        return lse_error_set(r->err, st, fn, "%s:%zu: %s", r->name, line, msg);
    return lse_error_set(r->err, st, fn, "%s: %s", r->name, msg);
}

static size_t line_of_node(reader *r, Agnode_t *n)
{
    return node_line(&r->tokens, agnameof(n));
}

static size_t line_of_edge(reader *r, Agedge_t *e)
{
    Agnode_t *t = agtail(e), *h = aghead(e);
    size_t k = 0;
    for (Agedge_t *o = agfstout(r->G, t); o != NULL; o = agnxtout(r->G, o))
        if (aghead(o) == h && AGSEQ(o) < AGSEQ(e))
            k++;
    return edge_line(&r->tokens, agnameof(t), agnameof(h), k,
                     agisdirected(r->G));
}

/* An attribute's value, or NULL when absent or empty. */
static const char *attr(void *obj, const char *name)
{
    const char *v = agget(obj, (char *)name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static int parse_size(const char *s, size_t *out)
{
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return 0;
    errno = 0;
    char *end = NULL;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > (unsigned long long)SIZE_MAX)
        return 0;
    *out = (size_t)v;
    return 1;
}

static int parse_double(const char *s, double *out)
{
    if (s == NULL)
        return 0;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '\0')
        return 0;
    errno = 0;
    char *end = NULL;
    const double v = strtod(s, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (errno == ERANGE || *end != '\0' || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* 1 true, 0 false, -1 not a boolean */
static int parse_bool(const char *s)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return 1;
        if (strcasecmp(s, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Configs of the built-in similarities and custom terms               */

typedef union any_config {
    lse_cosine_config cosine;
    lse_bilinear_config bilinear;
    lse_nonlinear_config nonlinear;
    lse_gaussian_config gaussian;
    lse_dar_config dar;
    lse_dist_config dist;
    lse_daam_config daam;
    lse_quadratic_config quadratic;
    lse_layernorm_config layernorm;
} any_config;

/* The keys each type accepts, in describe() order. */
static const char *config_keys(const char *type)
{
    static const struct {
        const char *type, *keys;
    } table[] = {
        {"cosine", "eps"},
        {"bilinear", "scale"},
        {"nonlinear", "f"},
        {"gaussian", "cov"},
        {"lingauss", "cov"},
        {"dar", "lambda, alpha, rho, beta, steps, gate, eps"},
        {"neg-dist", "p, eps, s"},
        {"gauss-kernel", "p, eps, s"},
        {"inv-dist", "p, eps, s"},
        {"idw", "p, eps, s"},
        {"daam", "axis, eps"},
        {"quadratic", "scale"},
        {"layernorm", "eps"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(type, table[i].type) == 0)
            return table[i].keys;
    return "";
}

static int pick(const char *v, const char *const *names, size_t n, int *out)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = (int)i;
            return 1;
        }
    return 0;
}

/* Set @p key of the config of @p type to @p val. Returns LSE_OK,
 * LSE_ENOTFOUND (no such key) or LSE_EPARSE (bad value); @p msg says
 * why. */
static lse_status set_key(const char *type, any_config *c, const char *key,
                          const char *val, char *msg, size_t len)
{
    static const char *const acts[] = {"identity", "tanh", "sigmoid", "relu"};
    static const char *const covs[] = {"full", "diag", "spherical", "tied"};
    static const char *const gates[] = {"sigmoid", "tanh", "linear"};
    static const char *const axes[] = {"features", "rows"};
    double *num = NULL;
    int e = 0;
    if (strcmp(type, "cosine") == 0 && strcmp(key, "eps") == 0)
        num = &c->cosine.eps;
    else if (strcmp(type, "bilinear") == 0 && strcmp(key, "scale") == 0)
        num = &c->bilinear.scale;
    else if (strcmp(type, "quadratic") == 0 && strcmp(key, "scale") == 0)
        num = &c->quadratic.scale;
    else if (strcmp(type, "layernorm") == 0 && strcmp(key, "eps") == 0)
        num = &c->layernorm.eps;
    else if (strcmp(type, "nonlinear") == 0 && strcmp(key, "f") == 0) {
        if (!pick(val, acts, 4, &e))
            goto bad_name;
        c->nonlinear.f = (lse_activation)e;
        return LSE_OK;
    } else if ((strcmp(type, "gaussian") == 0 ||
                strcmp(type, "lingauss") == 0) &&
               strcmp(key, "cov") == 0) {
        if (!pick(val, covs, 4, &e))
            goto bad_name;
        c->gaussian.cov = (lse_cov_type)e;
        return LSE_OK;
    } else if (strcmp(type, "dar") == 0) {
        if (strcmp(key, "lambda") == 0)
            num = &c->dar.lambda;
        else if (strcmp(key, "alpha") == 0)
            num = &c->dar.alpha;
        else if (strcmp(key, "rho") == 0)
            num = &c->dar.rho;
        else if (strcmp(key, "beta") == 0)
            num = &c->dar.beta;
        else if (strcmp(key, "eps") == 0)
            num = &c->dar.eps;
        else if (strcmp(key, "steps") == 0) {
            size_t steps;
            if (!parse_size(val, &steps) || steps > 1000000) {
                snprintf(msg, len, "steps='%s' is not a count", val);
                return LSE_EPARSE;
            }
            c->dar.steps = (unsigned)steps;
            return LSE_OK;
        } else if (strcmp(key, "gate") == 0) {
            if (!pick(val, gates, 3, &e))
                goto bad_name;
            c->dar.gate = (lse_gate)e;
            return LSE_OK;
        }
    } else if (strcmp(type, "neg-dist") == 0 ||
               strcmp(type, "gauss-kernel") == 0 ||
               strcmp(type, "inv-dist") == 0 || strcmp(type, "idw") == 0) {
        if (strcmp(key, "p") == 0)
            num = &c->dist.p;
        else if (strcmp(key, "eps") == 0)
            num = &c->dist.eps;
        else if (strcmp(key, "s") == 0)
            num = &c->dist.s;
    } else if (strcmp(type, "daam") == 0) {
        if (strcmp(key, "eps") == 0)
            num = &c->daam.eps;
        else if (strcmp(key, "axis") == 0) {
            if (!pick(val, axes, 2, &e))
                goto bad_name;
            c->daam.axis = (lse_daam_axis)e;
            return LSE_OK;
        }
    }
    if (num == NULL) {
        const char *keys = config_keys(type);
        snprintf(msg, len, "'%s' is not a parameter of %s (%s)", key, type,
                 keys[0] ? keys : "it takes none");
        return LSE_ENOTFOUND;
    }
    if (!parse_double(val, num)) {
        snprintf(msg, len, "%s='%s' is not a finite number", key, val);
        return LSE_EPARSE;
    }
    return LSE_OK;
bad_name:
    snprintf(msg, len, "%s='%s' is not a valid value for %s", key, val, type);
    return LSE_EPARSE;
}

/* Apply `config="k=v, k=v"` and then the separate attributes. */
static lse_status read_config(reader *r, Agnode_t *f, const char *type,
                              any_config *c)
{
    char msg[300];
    const char *text = attr(f, "config");
    if (text != NULL) {
        char *copy = strdup(text);
        if (copy == NULL)
            return fail_at(r, LSE_ENOMEM, 0, "out of memory");
        lse_status st = LSE_OK;
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save);
             item != NULL && st == LSE_OK; item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            char *k = item;
            while (isspace((unsigned char)*k))
                k++;
            if (eq == NULL) {
                if (*k == '\0')
                    continue;
                st = fail_at(r, LSE_EPARSE, line_of_node(r, f),
                             "factor '%s': config item '%s' is not key=value",
                             agnameof(f), k);
                break;
            }
            *eq = '\0';
            char *v = eq + 1, *end = eq;
            while (end > k && isspace((unsigned char)end[-1]))
                *--end = '\0';
            while (isspace((unsigned char)*v))
                v++;
            end = v + strlen(v);
            while (end > v && isspace((unsigned char)end[-1]))
                *--end = '\0';
            const lse_status ks = set_key(type, c, k, v, msg, sizeof msg);
            if (ks != LSE_OK)
                st = fail_at(r, LSE_EPARSE, line_of_node(r, f),
                             "factor '%s': config: %s", agnameof(f), msg);
        }
        free(copy);
        if (st != LSE_OK)
            return st;
    }
    /* separate attributes override the config text */
    char keys[64];
    snprintf(keys, sizeof keys, "%s", config_keys(type));
    char *save = NULL;
    for (char *k = strtok_r(keys, ", ", &save); k != NULL;
         k = strtok_r(NULL, ", ", &save)) {
        const int dar_beta = strcmp(type, "dar") == 0 && strcmp(k, "beta") == 0;
        const char *v = attr(f, dar_beta ? "dar_beta" : k);
        if (v == NULL)
            continue;
        if (set_key(type, c, k, v, msg, sizeof msg) != LSE_OK)
            return fail_at(r, LSE_EPARSE, line_of_node(r, f), "factor '%s': %s",
                           agnameof(f), msg);
    }
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */

typedef enum node_kind { KIND_VARIABLE, KIND_PARAM, KIND_FACTOR } node_kind;

typedef struct entry {
    Agnode_t *n;
    node_kind kind;
    double order; /* "order" attribute, or +inf */
    size_t seq;   /* cgraph creation order */
} entry;

static int by_order(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static lse_status classify(reader *r, entry *e, Agnode_t *n)
{
    const char *kind = attr(n, "kind");
    e->n = n;
    e->seq = (size_t)AGSEQ(n);
    e->order = INFINITY;
    const char *order = attr(n, "order");
    double o;
    if (order != NULL && parse_double(order, &o))
        e->order = o;
    if (kind == NULL || strcmp(kind, "variable") == 0)
        e->kind = KIND_VARIABLE;
    else if (strcmp(kind, "param") == 0)
        e->kind = KIND_PARAM;
    else if (strcmp(kind, "factor") == 0)
        e->kind = KIND_FACTOR;
    else
        return fail_at(r, LSE_EPARSE, line_of_node(r, n),
                       "node '%s': unknown kind '%s' (variable, param, factor)",
                       agnameof(n), kind);
    return LSE_OK;
}

static lse_status add_variable(reader *r, const entry *e)
{
    Agnode_t *n = e->n;
    const char *name = agnameof(n);
    size_t rows = 0, dim = 0;
    const char *keys[2] = {"rows", "dim"};
    size_t *vals[2] = {&rows, &dim};
    for (size_t i = 0; i < 2; i++) {
        const char *v = attr(n, keys[i]);
        if (v == NULL)
            return fail_at(r, LSE_EPARSE, line_of_node(r, n),
                           "%s '%s' has no %s attribute",
                           e->kind == KIND_PARAM ? "param" : "variable", name,
                           keys[i]);
        if (!parse_size(v, vals[i]) || *vals[i] == 0)
            return fail_at(r, LSE_EPARSE, line_of_node(r, n),
                           "node '%s': %s='%s' is not a positive integer", name,
                           keys[i], v);
    }
    /* the reader allocates every node (values and gradients): bounded so
     * that an absurd rows= is a clean error, not an out-of-memory */
    size_t entries;
    if (lse_size_mul(rows, dim, &entries) ||
        lse_size_add(r->entries, entries, &r->entries) ||
        r->entries > LSE_VIZ_SPEC_MAX_ENTRIES)
        return fail_at(r, LSE_EDOM, line_of_node(r, n),
                       "node '%s': rows=%zu x dim=%zu brings the spec to more "
                       "than %zu entries (rows x dim over all variables), "
                       "the limit of a spec; draw the model with fewer rows",
                       name, rows, dim, (size_t)LSE_VIZ_SPEC_MAX_ENTRIES);
    unsigned flags = e->kind == KIND_PARAM ? LSE_NODE_PARAM : 0;
    const char *obs = attr(n, "observed");
    if (obs != NULL) {
        const int b = parse_bool(obs);
        if (b < 0)
            return fail_at(r, LSE_EPARSE, line_of_node(r, n),
                           "node '%s': observed='%s' is not true or false",
                           name, obs);
        if (b)
            flags |= LSE_NODE_CLAMPED;
    }
    const lse_status st =
        lse_graph_add_node(r->g, name, rows, dim, flags, NULL);
    if (st != LSE_OK)
        return fail_at(r, st, line_of_node(r, n), "node '%s': %s", name,
                       lse_graph_errmsg(r->g));
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Factors                                                             */

typedef enum role {
    ROLE_CHILD,
    ROLE_PARENT,
    ROLE_CONTEXT,
    ROLE_PARAM,
    ROLE_VIEW
} role;

static int parse_role(const char *s, role *out)
{
    static const char *const names[] = {"child", "parent", "context", "param",
                                        "view"};
    int i;
    if (s == NULL || !pick(s, names, 5, &i))
        return 0;
    *out = (role)i;
    return 1;
}

/* The variable at the other end of @p e from factor @p f, as a view. */
static lse_status edge_view(reader *r, Agedge_t *e, Agnode_t *f, lse_view *out)
{
    Agnode_t *v = agtail(e) == f ? aghead(e) : agtail(e);
    lse_node *node = lse_graph_find_node(r->g, agnameof(v));
    if (node == NULL) /* another factor (variables were added first) */
        return fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                       "edge '%s' -> '%s' joins two factors; edges join a "
                       "variable and a factor",
                       agnameof(agtail(e)), agnameof(aghead(e)));
    const size_t rows = lse_node_rows(node);
    const char *fs = attr(e, "first"), *cs = attr(e, "count");
    size_t first = 0, count;
    if (fs != NULL && !parse_size(fs, &first))
        return fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                       "edge '%s' -> '%s': first='%s' is not a row index",
                       agnameof(agtail(e)), agnameof(aghead(e)), fs);
    count = first < rows ? rows - first : 0;
    if (cs != NULL && (!parse_size(cs, &count) || count == 0))
        return fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                       "edge '%s' -> '%s': count='%s' is not a positive "
                       "integer",
                       agnameof(agtail(e)), agnameof(aghead(e)), cs);
    if (first >= rows || count > rows - first)
        return fail_at(r, LSE_ERANGE, line_of_edge(r, e),
                       "edge '%s' -> '%s': rows [%zu, %zu) lie outside node "
                       "'%s' (%zu rows)",
                       agnameof(agtail(e)), agnameof(aghead(e)), first,
                       first + count, lse_node_name(node), rows);
    *out = lse_view_rows(node, first, count);
    return LSE_OK;
}

/* Identity-like starting values for the parameters that need them. */
static void init_params(lse_term *t)
{
    const lse_sim_type *sim = lse_term_sim(t);
    if (sim == NULL)
        return;
    if (strcmp(sim->name, "gaussian") == 0 ||
        strcmp(sim->name, "lingauss") == 0) {
        const lse_gaussian_config *cfg = lse_term_config(t);
        const lse_cov_type cov = cfg != NULL ? cfg->cov : LSE_COV_FULL;
        const size_t d = lse_node_dim(lse_term_child(t).node);
        for (size_t k = 0; k < lse_term_n_param(t); k++) {
            lse_node *p = lse_term_param(t, k);
            if (p == NULL || strcmp(sim->param_names[k], "chol") != 0)
                continue;
            gsl_matrix *v = lse_node_value(p);
            for (size_t i = 0; i < v->size1; i++) {
                if (cov == LSE_COV_FULL || cov == LSE_COV_TIED) {
                    for (size_t j = 0; j < d && j * d + j < v->size2; j++)
                        gsl_matrix_set(v, i, j * d + j, 1.0);
                } else {
                    for (size_t j = 0; j < v->size2; j++)
                        gsl_matrix_set(v, i, j, 1.0);
                }
            }
        }
    } else if (strcmp(sim->name, "daam") == 0) {
        lse_node *c = lse_term_n_param(t) > 0 ? lse_term_param(t, 0) : NULL;
        if (c != NULL)
            gsl_matrix_set_all(lse_node_value(c), 1.0);
    }
}

static const char *term_name(Agnode_t *f)
{
    const char *name = attr(f, "name");
    return name != NULL ? name : agnameof(f);
}

/* The similarity a factor names, one a spec can build. */
static lse_status find_lse_sim(reader *r, const char *sim_name,
                               const char *fname, size_t line,
                               const lse_sim_type **out)
{
    const lse_sim_type *sim = lse_sim_find(sim_name);
    if (sim == NULL) {
        char known[400] = "";
        for (size_t i = 0; i < lse_sim_count(); i++) {
            const size_t used = strlen(known);
            snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                     lse_sim_get(i)->name);
        }
        return fail_at(r, LSE_ENOTFOUND, line,
                       "factor '%s': unknown similarity '%s' (built-in: %s)",
                       fname, sim_name, known);
    }
    if (strcmp(sim->name, "pairwise") == 0)
        return fail_at(r, LSE_ENOTSUP, line,
                       "factor '%s': the pairwise similarity needs C "
                       "functions and cannot be read from a spec",
                       fname);
    *out = sim;
    return LSE_OK;
}

/* A factor's beta, mask, reduce and enabled attributes. */
static lse_status read_lse_attrs(reader *r, Agnode_t *f, const char *fname,
                                 size_t line, lse_term_spec *spec,
                                 int *enabled)
{
    const char *v;
    if ((v = attr(f, "beta")) != NULL && !parse_double(v, &spec->beta))
        return fail_at(r, LSE_EPARSE, line,
                       "factor '%s': beta='%s' is not a finite number", fname,
                       v);
    if ((v = attr(f, "mask")) != NULL) {
        size_t m;
        if (parse_size(v, &m) && m <= 3)
            spec->mask = (unsigned)m;
        else if (strcmp(v, "none") == 0)
            spec->mask = 0;
        else if (strcmp(v, "causal") == 0)
            spec->mask = LSE_MASK_CAUSAL;
        else if (strcmp(v, "no_self") == 0)
            spec->mask = LSE_MASK_NO_SELF;
        else if (strcmp(v, "causal|no_self") == 0 ||
                 strcmp(v, "no_self|causal") == 0)
            spec->mask = LSE_MASK_CAUSAL | LSE_MASK_NO_SELF;
        else
            return fail_at(r, LSE_EPARSE, line,
                           "factor '%s': mask='%s' (0-3, none, causal, "
                           "no_self, causal|no_self)",
                           fname, v);
    }
    if ((v = attr(f, "reduce")) != NULL) {
        if (strcmp(v, "rows") == 0)
            spec->reduce = LSE_REDUCE_ROWS;
        else if (strcmp(v, "chain") == 0)
            spec->reduce = LSE_REDUCE_CHAIN;
        else
            return fail_at(r, LSE_EPARSE, line,
                           "factor '%s': reduce='%s' (rows or chain)", fname,
                           v);
    }
    if ((v = attr(f, "enabled")) != NULL && (*enabled = parse_bool(v)) < 0)
        return fail_at(r, LSE_EPARSE, line,
                       "factor '%s': enabled='%s' is not true or false", fname,
                       v);
    return LSE_OK;
}

/* A param edge: the node @p view binds to its slot (a similarity
 * parameter or a chain table) once. */
static lse_status bind_param(reader *r, Agedge_t *e, const char *fname,
                             const lse_sim_type *sim, lse_view view,
                             lse_term_spec *spec, lse_node **params)
{
    const char *slot = attr(e, "slot");
    lse_node **where = NULL;
    if (slot != NULL && strcmp(slot, "chain_init") == 0)
        where = &spec->chain_init;
    else if (slot != NULL && strcmp(slot, "chain_trans") == 0)
        where = &spec->chain_trans;
    for (size_t k = 0; slot != NULL && where == NULL && k < sim->n_param;
         k++)
        if (strcmp(slot, sim->param_names[k]) == 0)
            where = &params[k];
    if (where == NULL) {
        char names[200] = "";
        for (size_t k = 0; k < sim->n_param; k++) {
            const size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s, ",
                     sim->param_names[k]);
        }
        return fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                       "edge '%s' -> '%s': %s slot%s%s%s; %s takes %s"
                       "chain_init, chain_trans",
                       agnameof(agtail(e)), agnameof(aghead(e)),
                       slot == NULL ? "param edge without a" : "unknown",
                       slot == NULL ? "" : " '", slot == NULL ? "" : slot,
                       slot == NULL ? "" : "'", sim->name, names);
    }
    if (*where != NULL)
        return fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                       "factor '%s': slot '%s' is bound twice", fname,
                       slot);
    if (view.first != 0 || view.count != lse_node_rows(view.node))
        return fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                       "edge '%s' -> '%s': a param edge takes the whole "
                       "node (no first/count)",
                       agnameof(agtail(e)), agnameof(aghead(e)));
    *where = view.node;
    return LSE_OK;
}

/* The term keeps its (child x parent) matrices and its similarity's
 * workspace grows like child x parent x dim: bounded like the nodes. */
static lse_status check_size(reader *r, const char *fname, size_t line,
                             const lse_term_spec *spec)
{
    size_t d = lse_node_dim(spec->child.node), pairs, work;
    if (lse_node_dim(spec->parent.node) > d)
        d = lse_node_dim(spec->parent.node);
    if (spec->context.node != NULL && lse_node_dim(spec->context.node) > d)
        d = lse_node_dim(spec->context.node);
    if (lse_size_mul(spec->child.count, spec->parent.count, &pairs) ||
        pairs > LSE_VIZ_SPEC_MAX_PAIRS || lse_size_mul(pairs, d, &work) ||
        work > LSE_VIZ_SPEC_MAX_WORK)
        return fail_at(r, LSE_EDOM, line,
                       "factor '%s': %zu child rows x %zu parent rows (dim "
                       "%zu) exceed the limits of a spec (%zu pairs, %zu "
                       "pairs x dim); draw the model with fewer rows",
                       fname, spec->child.count, spec->parent.count, d,
                       (size_t)LSE_VIZ_SPEC_MAX_PAIRS,
                       (size_t)LSE_VIZ_SPEC_MAX_WORK);
    return LSE_OK;
}

static lse_status add_lse(reader *r, Agnode_t *f)
{
    const char *fname = agnameof(f);
    const size_t line = line_of_node(r, f);
    const char *sim_name = attr(f, "sim");
    if (sim_name == NULL)
        return fail_at(r, LSE_EPARSE, line, "factor '%s' has no sim attribute",
                       fname);
    const lse_sim_type *sim = NULL;
    lse_status st = find_lse_sim(r, sim_name, fname, line, &sim);
    if (st != LSE_OK)
        return st;
    any_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (sim->config_size > sizeof cfg)
        return fail_at(r, LSE_EINTERNAL, line, "config of '%s' too large",
                       sim->name);
    if (sim->config_size > 0 && sim->config_default != NULL)
        memcpy(&cfg, sim->config_default, sim->config_size);
    st = read_config(r, f, sim->name, &cfg);
    if (st != LSE_OK)
        return st;

    lse_term_spec spec = lse_term_spec_default();
    spec.sim = sim;
    spec.config = sim->config_size > 0 ? &cfg : NULL;
    int enabled = 1;
    if ((st = read_lse_attrs(r, f, fname, line, &spec, &enabled)) != LSE_OK)
        return st;

    lse_node *params[16] = {NULL};
    if (sim->n_param > 16)
        return fail_at(r, LSE_EINTERNAL, line, "too many parameters");
    int have[3] = {0, 0, 0}; /* child, parent, context */
    for (Agedge_t *e = agfstedge(r->G, f); e != NULL;
         e = agnxtedge(r->G, e, f)) {
        const char *rs = attr(e, "role");
        role ro;
        if (rs == NULL || !parse_role(rs, &ro))
            return fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                           "edge '%s' -> '%s': %s role%s%s%s (child, parent, "
                           "context, param)",
                           agnameof(agtail(e)), agnameof(aghead(e)),
                           rs == NULL ? "no" : "unknown",
                           rs == NULL ? "" : " '", rs == NULL ? "" : rs,
                           rs == NULL ? "" : "'");
        lse_view view;
        if ((st = edge_view(r, e, f, &view)) != LSE_OK)
            return st;
        if (ro == ROLE_VIEW)
            return fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                           "edge '%s' -> '%s': role=view belongs to custom "
                           "factors; '%s' is an LSE factor",
                           agnameof(agtail(e)), agnameof(aghead(e)), fname);
        if (ro != ROLE_PARAM) {
            if (have[ro]++)
                return fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                               "factor '%s' has more than one %s edge", fname,
                               rs);
            if (ro == ROLE_CHILD)
                spec.child = view;
            else if (ro == ROLE_PARENT)
                spec.parent = view;
            else
                spec.context = view;
            continue;
        }
        if ((st = bind_param(r, e, fname, sim, view, &spec, params)) !=
            LSE_OK)
            return st;
    }
    if (!have[ROLE_CHILD] || !have[ROLE_PARENT])
        return fail_at(r, LSE_EINVAL, line,
                       "factor '%s' has no %s (an edge with role=%s)", fname,
                       !have[ROLE_CHILD] ? "children" : "parents",
                       !have[ROLE_CHILD] ? "child" : "parent");
    for (size_t k = 0; k < sim->n_param; k++)
        if (params[k] == NULL && !(sim->optional_params & (1u << k)))
            return fail_at(r, LSE_EINVAL, line,
                           "factor '%s': %s needs parameter '%s' (an edge "
                           "with role=param slot=%s)",
                           fname, sim->name, sim->param_names[k],
                           sim->param_names[k]);
    spec.param = sim->n_param > 0 ? params : NULL;
    if ((st = check_size(r, fname, line, &spec)) != LSE_OK)
        return st;
    lse_term *t = NULL;
    st = lse_graph_add_lse(r->g, term_name(f), &spec, &t);
    if (st != LSE_OK)
        return fail_at(r, st, line, "factor '%s': %s", fname,
                       lse_graph_errmsg(r->g));
    if (!enabled)
        lse_term_set_enabled(t, 0);
    init_params(t);
    return LSE_OK;
}

static lse_status add_custom(reader *r, Agnode_t *f)
{
    const char *fname = agnameof(f);
    const size_t line = line_of_node(r, f);
    const char *cname = attr(f, "custom");
    const lse_custom_type *type = NULL;
    if (cname == NULL)
        return fail_at(r, LSE_EPARSE, line,
                       "custom factor '%s' has no custom attribute "
                       "(quadratic, layernorm)",
                       fname);
    if (strcmp(cname, "quadratic") == 0)
        type = lse_custom_quadratic;
    else if (strcmp(cname, "layernorm") == 0)
        type = lse_custom_layernorm;
    else
        return fail_at(r, LSE_ENOTFOUND, line,
                       "factor '%s': unknown custom term '%s' (quadratic, "
                       "layernorm)",
                       fname, cname);
    any_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.quadratic.scale = 1.0;
    if (type == lse_custom_layernorm)
        cfg.layernorm.eps = 1e-5;
    const int has_config =
        attr(f, "config") != NULL ||
        attr(f, type == lse_custom_layernorm ? "eps" : "scale") != NULL;
    lse_status st = read_config(r, f, cname, &cfg);
    if (st != LSE_OK)
        return st;
    int enabled = 1;
    const char *v = attr(f, "enabled");
    if (v != NULL && (enabled = parse_bool(v)) < 0)
        return fail_at(r, LSE_EPARSE, line,
                       "factor '%s': enabled='%s' is not true or false", fname,
                       v);

    size_t n_view = 0;
    for (Agedge_t *e = agfstedge(r->G, f); e != NULL; e = agnxtedge(r->G, e, f))
        n_view++;
    if (n_view == 0)
        return fail_at(r, LSE_EINVAL, line,
                       "factor '%s' has no views (edges with role=view)",
                       fname);
    lse_view *views = calloc(n_view, sizeof *views);
    if (views == NULL)
        return fail_at(r, LSE_ENOMEM, 0, "out of memory");
    size_t next = 0;
    for (Agedge_t *e = agfstedge(r->G, f); e != NULL && st == LSE_OK;
         e = agnxtedge(r->G, e, f)) {
        const char *rs = attr(e, "role");
        role ro;
        if (rs == NULL || !parse_role(rs, &ro)) {
            st =
                fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                        "edge '%s' -> '%s': %s role%s%s%s (custom factors take "
                        "view)",
                        agnameof(agtail(e)), agnameof(aghead(e)),
                        rs == NULL ? "no" : "unknown", rs == NULL ? "" : " '",
                        rs == NULL ? "" : rs, rs == NULL ? "" : "'");
            break;
        }
        if (ro != ROLE_VIEW) {
            st =
                fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                        "edge '%s' -> '%s': custom factor '%s' takes role=view "
                        "edges, not %s",
                        agnameof(agtail(e)), agnameof(aghead(e)), fname, rs);
            break;
        }
        const char *is = attr(e, "index");
        size_t idx = next;
        if (is != NULL && !parse_size(is, &idx)) {
            st = fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                         "edge '%s' -> '%s': index='%s' is not a view index",
                         agnameof(agtail(e)), agnameof(aghead(e)), is);
            break;
        }
        if (is == NULL && n_view > 1) {
            st = fail_at(r, LSE_EPARSE, line_of_edge(r, e),
                         "edge '%s' -> '%s': factor '%s' has %zu views, so "
                         "each view edge needs an index",
                         agnameof(agtail(e)), agnameof(aghead(e)), fname,
                         n_view);
            break;
        }
        if (idx >= n_view || views[idx].node != NULL) {
            st = fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                         "edge '%s' -> '%s': view index %zu is %s (factor "
                         "'%s' has %zu views: 0..%zu, each once)",
                         agnameof(agtail(e)), agnameof(aghead(e)), idx,
                         idx >= n_view ? "out of range" : "used twice", fname,
                         n_view, n_view - 1);
            break;
        }
        st = edge_view(r, e, f, &views[idx]);
        next++;
    }
    lse_term *t = NULL;
    if (st == LSE_OK) {
        st = lse_graph_add_custom(r->g, term_name(f), type,
                                  has_config ? &cfg : NULL, views, n_view, &t);
        if (st != LSE_OK)
            st = fail_at(r, st, line, "factor '%s': %s", fname,
                         lse_graph_errmsg(r->g));
        else if (!enabled)
            lse_term_set_enabled(t, 0);
    }
    free(views);
    return st;
}

static lse_status add_factor(reader *r, Agnode_t *f)
{
    const char *term = attr(f, "term");
    if (term == NULL)
        term = attr(f, "custom") != NULL ? "custom" : "lse";
    if (strcmp(term, "lse") == 0)
        return add_lse(r, f);
    if (strcmp(term, "custom") == 0)
        return add_custom(r, f);
    return fail_at(r, LSE_EPARSE, line_of_node(r, f),
                   "factor '%s': unknown term '%s' (lse, custom)", agnameof(f),
                   term);
}

/* Every edge must join a variable and a factor. */
static lse_status check_edges(reader *r, const entry *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].kind == KIND_FACTOR)
            continue;
        Agnode_t *v = nodes[i].n;
        for (Agedge_t *e = agfstout(r->G, v); e != NULL;
             e = agnxtout(r->G, e)) {
            const char *k = attr(aghead(e), "kind");
            if (k == NULL || strcmp(k, "factor") != 0)
                return fail_at(r, LSE_EINVAL, line_of_edge(r, e),
                               "edge '%s' -> '%s' joins two variables; edges "
                               "join a variable and a factor",
                               agnameof(agtail(e)), agnameof(aghead(e)));
        }
    }
    return LSE_OK;
}

/* "Error: syntax error in line 4 near ']'" -> line 4, "near ']'" */
static lse_status syntax_error(reader *r)
{
    size_t n = strlen(gv_msg);
    while (n > 0 && (gv_msg[n - 1] == '\n' || gv_msg[n - 1] == ' '))
        gv_msg[--n] = '\0';
    const char *at = strstr(gv_msg, "in line ");
    if (at != NULL) {
        char *end = NULL;
        const unsigned long line = strtoul(at + 8, &end, 10);
        while (end != NULL && *end == ' ')
            end++;
        return fail_at(r, LSE_EPARSE, (size_t)line, "DOT syntax error%s%s",
                       end != NULL && *end ? " " : "", end != NULL ? end : "");
    }
    const char *msg = gv_msg;
    if (strncmp(msg, "Error: ", 7) == 0)
        msg += 7;
    return fail_at(r, LSE_EPARSE, 0, "%s",
                   msg[0] ? msg : "no graph (empty or not DOT)");
}

lse_status lse_viz_read_spec(const char *path, const char *text,
                             lse_graph **out, lse_error *err)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL || (path == NULL && text == NULL))
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             out == NULL ? "out" : "path and text");
    reader r = {.name = path != NULL ? path : "<memory>", .err = err};
    char *buf = NULL;
    if (text == NULL) {
        size_t len = 0;
        lse_error io;
        const lse_status st = lse_file_read(path, &buf, &len, &io);
        if (st != LSE_OK)
            return lse_error_set(err, st, fn, "%s", io.message);
        if (strlen(buf) != len) {
            free(buf);
            return fail_at(&r, LSE_EPARSE, 0, "NUL byte in the file");
        }
        text = buf;
    }
    gv_msg[0] = '\0';
    agseterrf(collect);
    agseterr(AGERR);
    r.G = agmemread(text);
    /* cgraph keeps unread input for the next call: drain it, so that a
     * second graph in this text never leaks into another read */
    int extra = 0;
    for (Agraph_t *more; (more = agmemread("")) != NULL;) {
        extra = 1;
        agclose(more);
    }
    lse_status st = LSE_OK;
    entry *nodes = NULL;
    size_t n_nodes = 0;
    if (r.G == NULL) {
        st = syntax_error(&r);
        goto done;
    }
    tokenize(text, &r.tokens);
    if (r.tokens.failed) {
        st = fail_at(&r, LSE_ENOMEM, 0, "out of memory");
        goto done;
    }
    /* agmemread reads the first graph only; anything after its closing
     * brace is a second graph (or garbage) that would be ignored */
    for (size_t i = 0, depth = 0, opened = 0; i < r.tokens.n; i++) {
        if (opened && depth == 0) {
            st = fail_at(&r, LSE_EPARSE, r.tokens.t[i].line,
                         "more than one graph; a spec is one DOT graph");
            goto done;
        }
        if (is_punct(&r.tokens, i, '{')) {
            depth++;
            opened = 1;
        } else if (is_punct(&r.tokens, i, '}') && depth > 0) {
            depth--;
        }
    }
    if (extra) {
        st = fail_at(&r, LSE_EPARSE, 0,
                     "more than one graph; a spec is one DOT graph");
        goto done;
    }
    const char *view = attr(r.G, "view");
    if (view != NULL && strcmp(view, "factor") != 0) {
        st = fail_at(&r, LSE_EPARSE, 0,
                     "this is a%s %s picture (view=%s), not a model spec; "
                     "export the factor view",
                     strcmp(view, "expanded") == 0 ? "n" : "", view, view);
        goto done;
    }
    const int total = agnnodes(r.G);
    nodes = calloc(total > 0 ? (size_t)total : 1, sizeof *nodes);
    r.g = lse_graph_new();
    if (nodes == NULL || r.g == NULL) {
        st = fail_at(&r, LSE_ENOMEM, 0, "out of memory");
        goto done;
    }
    for (Agnode_t *n = agfstnode(r.G); n != NULL && st == LSE_OK;
         n = agnxtnode(r.G, n)) {
        /* drawing aids of lse_viz_to_dot: plate labels and the legend */
        const char *k = attr(n, "kind");
        if (k != NULL && (strcmp(k, "plate") == 0 || strcmp(k, "legend") == 0))
            continue;
        st = classify(&r, &nodes[n_nodes++], n);
    }
    if (st != LSE_OK)
        goto done;
    if (n_nodes == 0) {
        st = fail_at(&r, LSE_EPARSE, 0, "the graph has no nodes");
        goto done;
    }
    qsort(nodes, n_nodes, sizeof *nodes, by_order);
    for (size_t i = 0; i < n_nodes && st == LSE_OK; i++)
        if (nodes[i].kind != KIND_FACTOR)
            st = add_variable(&r, &nodes[i]);
    if (st == LSE_OK)
        st = check_edges(&r, nodes, n_nodes);
    for (size_t i = 0; i < n_nodes && st == LSE_OK; i++)
        if (nodes[i].kind == KIND_FACTOR)
            st = add_factor(&r, nodes[i].n);
done:
    free(nodes);
    tokens_free(&r.tokens);
    if (r.G != NULL)
        agclose(r.G);
    free(buf);
    if (st != LSE_OK) {
        lse_graph_free(r.g);
        return st;
    }
    *out = r.g;
    return LSE_OK;
}
