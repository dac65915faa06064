/* energyviz: draw the factor graph of an lsegraph model with Graphviz.
 *
 *   energyviz MODEL [model options] -o OUT.{svg,png,pdf,dot} [options]
 *
 * MODEL is a built-in model name, a fitted model JSON written by lsefit
 * ("model": "gmm" or "slds"), or a model spec (a DOT file, *.dot / *.gv).
 * Every graph is built through the public API (the models' constructors,
 * or lse_viz_read_spec) and drawn by liblsegraph-viz. Errors are one line
 * "energyviz: ..." on stderr and exit status 1 (2 for usage errors).
 * Documentation: docs/energyviz.md. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>

#include <lsegraph/lsegraph.h>
#include <lsegraph/viz.h>

#include "cliutil.h"
#include "tool_outputs.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;
#ifdef LSE_HAVE_PLOTS
#include "plot.h"
#endif

#define EXIT_USAGE 2
#define PI 3.14159265358979323846

#ifndef ENERGYVIZ_VERSION
#define ENERGYVIZ_VERSION "unknown"
#endif
static const char version[] = "energyviz (lsegraph) " ENERGYVIZ_VERSION;

/* ------------------------------------------------------------------ */
/* Options                                                             */

/* Model options: which model takes which is in the model table. */
typedef struct model_opts {
    size_t k, d, n, m, s, T, lags, heads, protos, classes, steps;
    const char *covariance, *sim, *score, *dims, *act, *axis;
    int causal, markov, mixture;
    double beta, lambda, rho, alpha;
} model_opts;

typedef struct options {
    const char *model;
    const char *output, *format, *layout, *matrix, *what, *title, *data;
    const char *theme;
    double dpi;
    int expand, no_legend;
    size_t max_rows;
    int max_rows_set;
    model_opts mo;
    char given[64][16]; /* model options given, for validation */
    size_t n_given;
} options;

/* Everything the program owns, freed by finish() on every exit path. */
typedef struct state {
    lse_graph *owned; /* graphs the program made */
    void *model;      /* the model object that owns the graph */
    void (*model_free)(void *);
    lse_json *json;
    lse_table *table;
    gsl_matrix *mats[8];
    size_t n_mats;
    gsl_rng *rng;
    char *dot;
    lse_viz_plate plates[16]; /* the model's index names */
    char plate_text[16][80];
    size_t n_plates;
} state;

static state S;

static void finish(void)
{
    if (S.model_free != NULL)
        S.model_free(S.model);
    lse_graph_free(S.owned);
    lse_json_free(S.json);
    lse_table_free(S.table);
    for (size_t i = 0; i < S.n_mats; i++)
        gsl_matrix_free(S.mats[i]);
    gsl_rng_free(S.rng);
    free(S.dot);
    memset(&S, 0, sizeof S);
}

static void die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line, always */
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    /* no library function names, one spelling of Inf and NaN */
    cli_clean_message(msg);
    fprintf(stderr, "energyviz: %s%s\n", msg,
            code == EXIT_USAGE ? " (energyviz --help)" : "");
    finish();
    exit(code);
}

/* A matrix the program keeps until exit. */
static gsl_matrix *keep(gsl_matrix *m)
{
    if (m == NULL)
        die(1, "out of memory");
    if (S.n_mats == sizeof S.mats / sizeof S.mats[0])
        die(1, "internal: too many matrices");
    S.mats[S.n_mats++] = m;
    return m;
}

/* Put @p node in the plate "fmt..." (the model's index name and size,
 * e.g. "K = 4 patterns"); nodes with the same text share a plate. */
static void plate(const char *node, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void plate(const char *node, const char *fmt, ...)
{
    if (S.n_plates == sizeof S.plates / sizeof S.plates[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(S.plate_text[S.n_plates], sizeof S.plate_text[0], fmt, ap);
    va_end(ap);
    S.plates[S.n_plates].node = node;
    S.plates[S.n_plates].label = S.plate_text[S.n_plates];
    S.n_plates++;
}

static gsl_matrix *matrix(size_t rows, size_t cols)
{
    return keep(gsl_matrix_calloc(rows, cols));
}

/* ------------------------------------------------------------------ */
/* Random data for the built-in models: fixed seed, so pictures are     */
/* reproducible.                                                        */

static double normal(void) { return gsl_ran_gaussian(S.rng, 1.0); }

static gsl_matrix *random_matrix(size_t rows, size_t cols, double sd)
{
    gsl_matrix *x = matrix(rows, cols);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            gsl_matrix_set(x, i, j, sd * normal());
    return x;
}

/* A library failure as one line for the user: the library's message
 * without its function names, after what energyviz was doing (@p what: an
 * option or a built-in model), and the way out. The library's messages
 * name the file (and line) themselves. */
static void check(lse_status st, const lse_error *err, const char *what)
{
    if (st == LSE_OK)
        return;
    const char *msg = err != NULL && err->message[0]
                          ? cli_strip_function(err->message)
                          : lse_strerror(st);
    if (strcmp(what, "render") == 0) {
        if (strncmp(msg, "layout '", 8) == 0 && strstr(msg, "draws no") != NULL)
            die(EXIT_USAGE, "--%s", msg); /* neato, circo: plates */
        if (strstr(msg, "cannot write") != NULL ||
            strstr(msg, "cannot open") != NULL ||
            strstr(msg, "cannot rename") != NULL)
            die(1, "%s (choose an -o path whose directory exists and is "
                   "writable)", msg);
        die(1, "%s (try another --layout or --format)", msg);
    }
    if (strcmp(what, "spec") == 0)
        die(1, "%s (fix the spec: docs/energyviz.md lists its attributes)",
            msg);
    if (strcmp(what, "model") == 0)
        die(1, "%s (energyviz draws the gmm and slds model files that "
               "lsefit writes)", msg);
    die(1, "%s: %s", what, msg);
}

/* ------------------------------------------------------------------ */
/* Built-in models                                                     */

static void free_hopfield(void *p) { lse_hopfield_free(p); }
static void free_attention(void *p) { lse_attention_free(p); }
static void free_predcoding(void *p) { lse_predcoding_free(p); }
static void free_layernorm(void *p) { lse_layernorm_free(p); }
static void free_idwnet(void *p) { lse_idwnet_free(p); }

static lse_cov_type parse_cov(const char *name)
{
    lse_cov_type cov = LSE_COV_FULL;
    if (name != NULL && lse_gmm_cov_parse(name, &cov) != LSE_OK)
        die(EXIT_USAGE,
            "--covariance '%s': expected full, diag, spherical or tied", name);
    return cov;
}

static const lse_sim_type *parse_sim(const char *name, const char *opt)
{
    const lse_sim_type *sim = lse_sim_find(name);
    if (sim == NULL) {
        char known[400] = "";
        for (size_t i = 0; i < lse_sim_count(); i++) {
            const size_t used = strlen(known);
            snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                     lse_sim_get(i)->name);
        }
        die(EXIT_USAGE, "%s '%s': unknown similarity (%s)", opt, name, known);
    }
    return sim;
}

/* gmm: K clusters around a circle, the means at the cluster centres. */
static lse_graph *build_gmm(const model_opts *o, char *title, size_t len)
{
    const size_t K = o->k, d = o->d, n = o->n;
    const lse_cov_type cov = parse_cov(o->covariance);
    lse_gmm *m = NULL;
    lse_error err = {0};
    check(lse_gmm_new(K, d, cov, &m, NULL), NULL, "gmm");
    gsl_matrix *mu = matrix(K, d), *x = matrix(n, d);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(mu, k, j,
                           3.0 * (j % 2 == 0
                                      ? cos(2 * PI * (double)k / (double)K)
                                      : sin(2 * PI * (double)k / (double)K)));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, i, j,
                           gsl_matrix_get(mu, i % K, j) + 0.7 * normal());
    lse_status st = lse_gmm_set_means(m, mu, &err);
    lse_graph *g = NULL;
    if (st == LSE_OK)
        st = lse_gmm_graph_new(m, x, &g, &err);
    lse_gmm_free(m);
    check(st, &err, "gmm");
    S.owned = g;
    plate("x", "N = %zu observations", n);
    plate("mu", "K = %zu components", K);
    plate("logw", "K = %zu components", K);
    plate("chol", "K = %zu components", K);
    snprintf(title, len, "GMM: K = %zu components, d = %zu, %s covariance", K,
             d, lse_gmm_cov_name(cov));
    return g;
}

static lse_graph *build_hopfield(const model_opts *o, char *title, size_t len)
{
    const size_t K = o->k, d = o->d, n = o->n;
    gsl_matrix *pat = matrix(K, d), *q = matrix(n, d);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(pat, k, j,
                           gsl_rng_uniform(S.rng) < 0.5 ? -1.0 : 1.0);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(q, i, j,
                           gsl_matrix_get(pat, i % K, j) *
                               (gsl_rng_uniform(S.rng) < 0.25 ? 0.0 : 1.0));
    lse_hopfield *h = NULL;
    lse_error err = {0};
    check(lse_hopfield_new(pat, o->beta, &h, &err), &err, "hopfield");
    S.model = h;
    S.model_free = free_hopfield;
    double e;
    if (lse_hopfield_energy(h, q, &e, &model_err) != LSE_OK)
        die(1, "hopfield: %s", cli_strip_function(model_err.message));
    plate("memories", "K = %zu patterns", K);
    plate("state", "N = %zu states", n);
    snprintf(title, len,
             "Modern Hopfield network: K = %zu patterns, d = %zu, beta = %g", K,
             d, o->beta);
    return lse_hopfield_graph(h);
}

/* Keep the attention model @p a made with status @p st; its graph. */
static lse_graph *attention_graph(lse_status st, lse_attention *a,
                                  const lse_error *err, const char *what)
{
    check(st, err, what);
    S.model = a;
    S.model_free = free_attention;
    return lse_attention_graph(a);
}

static lse_graph *build_cross(const model_opts *o, char *title, size_t len,
                              const lse_sim_type *sim, const void *config)
{
    const size_t n = o->n, m = o->m, d = o->d;
    /* key j is query j mod n plus noise, so the attention has structure */
    gsl_matrix *q = random_matrix(n, d, 1.0), *k = random_matrix(m, d, 0.6);
    for (size_t j = 0; j < m; j++)
        for (size_t c = 0; c < d; c++)
            gsl_matrix_set(
                k, j, c, gsl_matrix_get(k, j, c) + gsl_matrix_get(q, j % n, c));
    lse_attention_opts ao = lse_attention_opts_default();
    ao.sim = sim;
    ao.config = config;
    ao.beta = o->beta;
    const gsl_matrix *params[4] = {NULL, NULL, NULL, NULL};
    if (sim->n_param > 0) {
        /* DAAM's gate widths are the only parameters a cross-attention
         * picture needs; other parametrised similarities have their own
         * models (gmm, slds, slot-attention, predcoding) */
        if (strcmp(sim->name, "daam") != 0)
            die(EXIT_USAGE,
                "--sim %s has parameter nodes; cross-attention takes a "
                "similarity without them (or daam)",
                sim->name);
        gsl_matrix *c = matrix(m, 1);
        gsl_matrix_set_all(c, 1.0);
        params[0] = c;
        ao.param = params;
    }
    lse_attention *a = NULL;
    lse_error err = {0};
    const lse_status st = lse_attention_cross_new(q, k, &ao, &a, &err);
    lse_graph *g = attention_graph(st, a, &err, "cross-attention");
    char cfg[200] = "";
    if (sim->describe != NULL && config != NULL)
        sim->describe(config, cfg, sizeof cfg);
    plate("queries", "N = %zu queries", n);
    plate("keys", "M = %zu keys", m);
    snprintf(title, len,
             "Cross-attention: %zu queries, %zu keys, d = %zu, %s%s%s%s", n, m,
             d, sim->name, cfg[0] ? " (" : "", cfg, cfg[0] ? ")" : "");
    return g;
}

static lse_graph *build_cross_attention(const model_opts *o, char *title,
                                        size_t len)
{
    const lse_sim_type *sim =
        o->sim != NULL ? parse_sim(o->sim, "--sim") : lse_sim_scaled_dot;
    return build_cross(o, title, len, sim, NULL);
}

static lse_graph *build_dar_attention(const model_opts *o, char *title,
                                      size_t len)
{
    lse_dar_config cfg = *(const lse_dar_config *)lse_sim_dar->config_default;
    cfg.lambda = o->lambda;
    cfg.rho = o->rho;
    cfg.alpha = o->alpha;
    cfg.steps = (unsigned)o->steps;
    lse_graph *g = build_cross(o, title, len, lse_sim_dar, &cfg);
    char cfgs[200] = "";
    lse_sim_dar->describe(&cfg, cfgs, sizeof cfgs);
    snprintf(title, len, "DAR attention: %zu queries, %zu keys, d = %zu, %s",
             o->n, o->m, o->d, cfgs);
    return g;
}

static lse_graph *build_self_attention(const model_opts *o, char *title,
                                       size_t len)
{
    gsl_matrix *x = random_matrix(o->n, o->d, 1.0);
    gsl_matrix *wq = random_matrix(o->k, o->d, 0.5);
    gsl_matrix *wk = random_matrix(o->k, o->d, 0.5);
    lse_attention_opts ao = lse_attention_opts_default();
    ao.beta = o->beta;
    ao.mask = o->causal ? LSE_MASK_CAUSAL : 0;
    lse_attention *a = NULL;
    lse_error err = {0};
    const lse_status st = lse_attention_self_new(x, wq, wk, &ao, &a, &err);
    lse_graph *g = attention_graph(st, a, &err, "self-attention");
    plate("x", "N = %zu tokens", o->n);
    snprintf(title, len, "%s: N = %zu, d = %zu, k = %zu",
             o->causal ? "Causal self-attention" : "Self-attention", o->n, o->d,
             o->k);
    return g;
}

static lse_graph *build_slot_attention(const model_opts *o, char *title,
                                       size_t len)
{
    gsl_matrix *tok = random_matrix(o->n, o->d, 1.0);
    gsl_matrix *slots = random_matrix(o->s, o->d, 1.0);
    gsl_matrix *wk = random_matrix(o->k, o->d, 0.5);
    gsl_matrix *wq = random_matrix(o->k, o->d, 0.5);
    lse_attention *a = NULL;
    lse_error err = {0};
    const lse_status st =
        lse_attention_slot_new(tok, slots, wk, wq, NULL, &a, &err);
    lse_graph *g = attention_graph(st, a, &err, "slot-attention");
    plate("tokens", "N = %zu tokens", o->n);
    plate("slots", "S = %zu slots", o->s);
    snprintf(title, len,
             "Slot attention: %zu tokens, %zu slots, d = %zu, k = %zu", o->n,
             o->s, o->d, o->k);
    return g;
}

static size_t parse_list(const char *s, size_t *out, size_t max,
                         const char *opt)
{
    size_t n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        errno = 0;
        const unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno != 0 || v == 0 || !isdigit((unsigned char)*p) ||
            (*end != ',' && *end != '\0') || n == max)
            die(EXIT_USAGE,
                "%s '%s': expected 2 to %zu positive integers separated by "
                "commas",
                opt, s, max);
        out[n++] = (size_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (n < 2)
        die(EXIT_USAGE,
            "%s '%s': expected 2 to %zu positive integers separated by commas",
            opt, s, max);
    return n;
}

static lse_graph *build_predcoding(const model_opts *o, char *title, size_t len)
{
    size_t dims[8];
    const size_t nd = parse_list(o->dims, dims, 8, "--dims");
    const size_t L = nd - 1;
    lse_activation act[7];
    lse_activation f = LSE_ACT_IDENTITY;
    if (o->act != NULL) {
        static const char *const names[] = {"identity", "tanh", "sigmoid",
                                            "relu"};
        size_t i = 0;
        while (i < 4 && strcmp(o->act, names[i]) != 0)
            i++;
        if (i == 4)
            die(EXIT_USAGE,
                "--act '%s': expected identity, tanh, sigmoid or relu", o->act);
        f = (lse_activation)i;
    }
    size_t rows[7];
    for (size_t l = 0; l < L; l++) {
        act[l] = f;
        rows[l] = o->k;
    }
    lse_predcoding_opts po = lse_predcoding_opts_default();
    po.act = act;
    if (o->mixture) {
        po.layout = LSE_PC_MIXTURE;
        po.rows = rows;
    }
    gsl_matrix *x = random_matrix(o->n, dims[0], 1.0);
    lse_predcoding *pc = NULL;
    lse_error err = {0};
    check(lse_predcoding_new(x, L, dims + 1, &po, &pc, &err), &err,
          "predcoding");
    S.model = pc;
    S.model_free = free_predcoding;
    static const char *const hn[] = {"h1", "h2", "h3", "h4",
                                     "h5", "h6", "h7"};
    plate("x", "N = %zu samples", o->n);
    for (size_t l = 0; l < L; l++) {
        if (o->mixture)
            plate(hn[l], "K = %zu rows per layer", o->k);
        else
            plate(hn[l], "N = %zu samples", o->n);
    }
    snprintf(title, len, "Predictive coding: %zu layers, dims %s%s", L, o->dims,
             o->mixture ? ", mixture layout" : "");
    return lse_predcoding_graph(pc);
}

static lse_graph *build_slds(const model_opts *o, char *title, size_t len)
{
    if (o->T <= o->lags)
        die(EXIT_USAGE, "-T %zu: the series needs more than --lags = %zu steps",
            o->T, o->lags);
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = o->k;
    cfg.dim = o->d;
    cfg.lags = o->lags;
    cfg.markov = o->markov;
    cfg.cov = parse_cov(o->covariance);
    lse_slds *m = NULL;
    lse_error err = {0};
    check(lse_slds_new(&cfg, &m, &err), &err, "slds");
    lse_status st = LSE_OK;
    gsl_vector *b = gsl_vector_alloc(o->d);
    if (b == NULL)
        die(1, "out of memory");
    for (size_t k = 0; k < o->k && st == LSE_OK; k++) {
        gsl_vector_set_all(b, (double)k - 0.5 * (double)(o->k - 1));
        st = lse_slds_set_b(m, k, b, &err);
    }
    gsl_vector_free(b);
    gsl_matrix *x = matrix(o->T, o->d);
    if (st == LSE_OK)
        st = lse_slds_simulate(m, o->T, 1, x, NULL, &err);
    lse_graph *g = NULL;
    if (st == LSE_OK)
        st = lse_slds_graph_new(m, x, NULL, &g, &err);
    lse_slds_free(m);
    check(st, &err, "slds");
    S.owned = g;
    plate("x", "T = %zu steps", o->T);
    static const char *const per_mode[] = {"b", "logw", "A", "chol", "trans"};
    for (size_t i = 0; i < 5; i++)
        plate(per_mode[i], "K = %zu modes", o->k);
    snprintf(title, len, "%s SLDS: K = %zu modes, d = %zu, %zu lag%s, T = %zu",
             o->markov ? "Markov-switching" : "Mixture", o->k, o->d, o->lags,
             o->lags == 1 ? "" : "s", o->T);
    return g;
}

static lse_graph *build_layernorm(const model_opts *o, char *title, size_t len)
{
    gsl_matrix *x = random_matrix(o->n, o->d, 1.0);
    lse_layernorm *ln = NULL;
    lse_error err = {0};
    check(lse_layernorm_new(x, 1.0, NULL, 1e-5, &ln, &err), &err, "layernorm");
    S.model = ln;
    S.model_free = free_layernorm;
    plate("x", "B = %zu vectors", o->n);
    snprintf(title, len, "LayerNorm as an energy: B = %zu, D = %zu", o->n,
             o->d);
    return lse_layernorm_graph(ln);
}

static lse_graph *build_idwnet(const model_opts *o, char *title, size_t len)
{
    const lse_sim_type *sim =
        o->score != NULL ? parse_sim(o->score, "--score") : lse_sim_idw;
    lse_idwnet *net = NULL;
    lse_error err = {0};
    check(lse_idwnet_new(o->protos, o->d, o->classes, sim, NULL, o->n, &net,
                         &err),
          &err, "idwnet");
    S.model = net;
    S.model_free = free_idwnet;
    gsl_matrix *x = random_matrix(o->n, o->d, 1.0);
    gsl_matrix *logits = matrix(o->n, o->classes);
    if (lse_idwnet_init(net, x, 0.5, 1, &model_err) != LSE_OK ||
        lse_idwnet_forward(net, x, logits, NULL, &model_err) != LSE_OK)
        die(1, "idwnet: %s", cli_strip_function(model_err.message));
    plate("q", "N = %zu inputs", o->n);
    plate("keys", "P = %zu prototypes", o->protos);
    snprintf(title, len,
             "IDW prototype classifier: %zu prototypes, d = %zu, %zu classes, "
             "score %s",
             o->protos, o->d, o->classes, sim->name);
    return lse_idwnet_graph(net);
}

static void free_daam(void *p) { lse_daam_free(p); }

/* DAAM: a multi-head density-adaptive gate over feature vectors:
 * lse_daam_new, heads started at data rows and fitted to the density (to
 * convergence), so the picture shows heads that mean something; heads the
 * fit held at the width floor (too few rows per head) are named in the
 * title. */
static lse_graph *build_daam(const model_opts *o, char *title, size_t len)
{
    lse_daam_axis axis = LSE_DAAM_FEATURES;
    if (o->axis != NULL) {
        if (strcmp(o->axis, "features") == 0)
            axis = LSE_DAAM_FEATURES;
        else if (strcmp(o->axis, "rows") == 0)
            axis = LSE_DAAM_ROWS;
        else
            die(EXIT_USAGE, "--axis '%s': expected features or rows", o->axis);
    }
    if (o->heads > o->n)
        die(EXIT_USAGE, "--heads %zu: more heads than the %zu rows (-n)",
            o->heads, o->n);
    /* rows around H random centres, so the heads have clusters to find */
    gsl_matrix *mu = random_matrix(o->heads, o->d, 1.0);
    gsl_matrix *x = random_matrix(o->n, o->d, 0.3);
    for (size_t i = 0; i < o->n; i++)
        for (size_t j = 0; j < o->d; j++)
            *gsl_matrix_ptr(x, i, j) += gsl_matrix_get(mu, i % o->heads, j);
    lse_daam *m = NULL;
    lse_error err = {0};
    check(lse_daam_new(o->heads, o->d, axis, 1e-5, x, &m, &err), &err, "daam");
    S.model = m;
    S.model_free = free_daam;
    lse_daam_fit_report rep;
    if (lse_daam_init(m, 1, &model_err) != LSE_OK ||
        lse_daam_fit(m, 5000, 1e-9, &rep, &model_err) != LSE_OK)
        die(1, "daam: %s", cli_strip_function(model_err.message));
    char collapsed[96] = "";
    if (rep.n_collapsed > 0) /* too few rows per head: say so */
        snprintf(collapsed, sizeof collapsed,
                 "; %zu head(s) at the width floor %g", rep.n_collapsed,
                 lse_daam_min_width(m));
    plate("x", "N = %zu vectors", o->n);
    plate("delta", "H = %zu heads", o->heads);
    plate("c", "H = %zu heads", o->heads);
    snprintf(title, len,
             "DAAM: %zu heads over N = %zu vectors, d = %zu (%s%s)", o->heads,
             o->n, o->d,
             axis == LSE_DAAM_ROWS ? "statistics over rows"
                                   : "statistics over features",
             collapsed);
    return lse_daam_graph(m);
}

static void free_stattn(void *p) { lse_stattn_free(p); }

/* Spatiotemporal attention: one slot layer over T steps (inter-layer,
 * intra-layer and temporal terms), data and slots at seeded random values,
 * projections the identity plus noise. */
static lse_graph *build_stattn(const model_opts *o, char *title, size_t len)
{
    lse_stattn_config c = lse_stattn_config_default();
    c.n_layers = 2;
    c.n_slots[0] = o->n;
    c.dim[0] = c.dim[1] = o->d;
    c.n_slots[1] = o->s;
    c.T = o->T;
    c.init_sd = 0.1;
    lse_stattn *m = NULL;
    lse_error err = {0};
    check(lse_stattn_new(&c, &m, &err), &err, "stattn");
    S.model = m;
    S.model_free = free_stattn;
    gsl_matrix *x = random_matrix(o->T * o->n, o->d, 1.0);
    if (lse_stattn_set_data(m, x, &err) != LSE_OK ||
        lse_stattn_init_slots(m, 1.0, 1, &err) != LSE_OK)
        die(1, "stattn: %s", cli_strip_function(err.message));
    plate("x0", "T = %zu steps x N = %zu rows", o->T, o->n);
    plate("x1", "T = %zu steps x K = %zu slots", o->T, o->s);
    snprintf(title, len,
             "Spatiotemporal attention: N = %zu rows -> K = %zu slots, d = "
             "%zu, T = %zu steps",
             o->n, o->s, o->d, o->T);
    return lse_stattn_graph(m);
}

static void free_dma(void *p) { lse_dma_free(p); }

/* Dynamic mixture attention: a threshold-switching series (K modes, d
 * dimensions, T steps) with seeded random parameters. */
static lse_graph *build_dma(const model_opts *o, char *title, size_t len)
{
    lse_dma_config c = lse_dma_config_default();
    c.n_modes = o->k;
    c.dim = o->d;
    c.T = o->T;
    lse_dma *m = NULL;
    lse_error err = {0};
    check(lse_dma_new(&c, &m, &err), &err, "dma");
    S.model = m;
    S.model_free = free_dma;
    gsl_matrix *x = random_matrix(o->T, o->d, 1.0);
    check(lse_dma_set_series(m, x, &err), &err, "dma");
    gsl_matrix_memcpy(lse_node_value(lse_dma_node(m, LSE_DMA_M)),
                      random_matrix(o->k, o->d, 1.0));
    plate("next", "T-1 = %zu transitions", o->T - 1);
    plate("prev", "T-1 = %zu transitions", o->T - 1);
    plate("b", "K = %zu modes", o->k);
    plate("m", "K = %zu modes", o->k);
    plate("A", "K = %zu modes", o->k);
    plate("chol", "K = %zu modes", o->k);
    snprintf(title, len,
             "Dynamic mixture attention: K = %zu modes, d = %zu, T = %zu",
             o->k, o->d, o->T);
    return lse_dma_graph(m);
}

static void free_et(void *p) { lse_et_free(p); }

/* Energy Transformer block (models/etransformer.c): one 8x8 image of 2x2
 * patches (a random one, top-left block hidden), its tokens layer-normalized
 * and put into the energy graph, so the heads' and the memory's softmax are
 * those of real tokens. */
static lse_graph *build_et(const model_opts *o, char *title, size_t len)
{
    lse_et_config c = lse_et_config_default();
    c.batch = 1;
    c.dim = o->d;
    c.n_heads = o->heads;
    c.n_memories = o->m;
    lse_et *et = NULL;
    lse_error err = {0};
    check(lse_et_new(&c, &et, &err), &err, "et");
    S.model = et;
    S.model_free = free_et;
    const size_t N = lse_et_n_tokens(et);
    gsl_matrix *img = matrix(1, c.side * c.side), *hid = matrix(1, N),
               *x = matrix(N, c.dim);
    for (size_t p = 0; p < img->size2; p++)
        gsl_matrix_set(img, 0, p, gsl_rng_uniform(S.rng));
    gsl_matrix_set(hid, 0, 0, 1.0);
    double e;
    if (lse_et_embed(et, img, hid, x, &model_err) != LSE_OK ||
        lse_et_energy(et, x, &e, NULL, &model_err) != LSE_OK)
        die(1, "et: %s", cli_strip_function(model_err.message));
    plate("tokens", "N = %zu patch tokens", N);
    plate("W_Q", "H = %zu heads", c.n_heads);
    plate("memories", "M = %zu memories", c.n_memories);
    snprintf(title, len,
             "Energy Transformer block: %zu heads, %zu memories, D = %zu",
             c.n_heads, c.n_memories, c.dim);
    return lse_et_graph(et);
}

static void free_capsnet(void *p) { lse_capsnet_free(p); }

/* Capsule routing (models/capsnet.c): one example of N random child
 * capsules routed to S parents, so the routing coefficients are drawn. */
static lse_graph *build_capsnet(const model_opts *o, char *title, size_t len)
{
    lse_capsnet_opts c = lse_capsnet_opts_default();
    c.n_child = o->n;
    c.d_child = 4;
    c.n_parent = o->k;
    c.d_parent = 2;
    c.batch = 1;
    c.init_sd = 0.5;
    lse_capsnet *net = NULL;
    lse_error err = {0};
    check(lse_capsnet_new(&c, &net, &err), &err, "capsnet");
    S.model = net;
    S.model_free = free_capsnet;
    gsl_matrix *u = random_matrix(o->n, 4, 1.0);
    if (lse_capsnet_route(net, u, NULL, NULL, &model_err) != LSE_OK)
        die(1, "capsnet: %s", cli_strip_function(model_err.message));
    plate("children", "N = %zu child capsules", o->n);
    plate("parents", "S = %zu parent capsules", o->k);
    plate("W", "N S = %zu pairs", o->n * o->k);
    snprintf(title, len,
             "Capsule routing: N = %zu children (dim 4) to S = %zu parents "
             "(dim 2)",
             o->n, o->k);
    return lse_capsnet_graph(net);
}

typedef lse_graph *(*build_fn)(const model_opts *o, char *title, size_t len);

typedef struct model_def {
    const char *name;
    build_fn build;
    const char *takes;   /* the model options it accepts */
    const char *summary; /* --help: what it is */
    const char *help;    /* --help: its options and defaults */
} model_def;

static const model_def models[] = {
    {"gmm", build_gmm, "-k -d -n --covariance",
     "Gaussian mixture (LSE gaussian)",
     "-k K (3) -d D (2) -n N (272)\n--covariance full|diag|spherical|tied "
     "(full)"},
    {"hopfield", build_hopfield, "-k -d -n --beta",
     "modern Hopfield network (LSE dot + quadratic bound)",
     "-k patterns (4) -d D (16) -n states (2) --beta B (4)"},
    {"cross-attention", build_cross_attention, "-n -m -d --sim --beta",
     "cross-attention of queries to keys",
     "-n queries (4) -m keys (6) -d D (8) --beta B (1)\n"
     "--sim NAME (scaled-dot): a parameter-free similarity or daam"},
    {"self-attention", build_self_attention, "-n -d -k --causal --beta",
     "self-attention (LSE bilinear W_Q, W_K)",
     "-n N (6) -d D (8) -k K (4) --causal --beta B (1)"},
    {"slot-attention", build_slot_attention, "-n -s -d -k",
     "slot attention (LSE bilinear, slots explain tokens)",
     "-n tokens (16) -s slots (3) -d D (8) -k K (4)"},
    {"predcoding", build_predcoding, "-n -k --dims --act --mixture",
     "hierarchical predictive coding (LSE nonlinear per layer)",
     "-n N (8) --dims d0,d1,d2 (8,4,2): data and latent sizes\n"
     "--act identity|tanh|sigmoid|relu (identity)\n"
     "--mixture: -k K rows per latent layer (3) instead of N"},
    {"slds", build_slds, "-k -d -T --lags --markov --covariance",
     "switching linear dynamics (LSE lingauss)",
     "-k modes (2) -d D (1) -T steps (200) --lags L (1) --markov\n"
     "--covariance full|diag|spherical|tied (full)"},
    {"layernorm", build_layernorm, "-n -d", "LayerNorm as an energy",
     "-n B (4) -d D (8)"},
    {"idwnet", build_idwnet, "-n -d -p -c --score",
     "IDW prototype classifier (LSE over prototypes)",
     "-n batch (10) -d D (8) -p prototypes (20) -c classes (10)\n"
     "--score neg-dist|gauss-kernel|inv-dist|idw|scaled-dot (idw)"},
    {"daam", build_daam, "-n -d --heads --axis",
     "multi-head density-adaptive gate (LSE daam)",
     "-n N (40) -d D (16) --heads H (4) --axis features|rows"},
    {"dar-attention", build_dar_attention,
     "-n -m -d --beta --lambda --rho --alpha --steps",
     "cross-attention with the DAR similarity",
     "-n queries (6) -m keys (6) -d D (8) --beta B (1)\n"
     "--lambda (0.2) --rho (0.5) --alpha (8) --steps (0: static)"},
    {"stattn", build_stattn, "-n -s -d -T",
     "spatiotemporal attention (LSE project: inter-layer, intra-layer, "
     "temporal)",
     "-n data rows per step (6) -s slots (3) -d D (4) -T steps (3)"},
    {"dma", build_dma, "-k -d -T",
     "dynamic mixture attention (LSE sum: attention + lingauss)",
     "-k modes (2) -d D (1) -T steps (200)"},
    {"et", build_et, "-d -m --heads",
     "Energy Transformer block (heads + Hopfield memory)",
     "-d D (16) -m memories (6) --heads H (4)"},
    {"capsnet", build_capsnet, "-n -k",
     "capsule routing (LSE over transformed predictions)",
     "-n children (6) -k parents (3)"},
};
#define N_MODELS (sizeof models / sizeof models[0])

/* Is @p opt one of the space-separated words of def->takes? */
static int takes(const model_def *def, const char *opt)
{
    const size_t l = strlen(opt);
    for (const char *t = def->takes; (t = strstr(t, opt)) != NULL; t += l)
        if ((t == def->takes || t[-1] == ' ') && (t[l] == ' ' || t[l] == '\0'))
            return 1;
    return 0;
}

static const model_def *find_model(const char *name)
{
    for (size_t i = 0; i < N_MODELS; i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

/* Defaults differ per model (e.g. -n); 0 / NULL / NAN mean "not given". */
static void model_defaults(const char *model, model_opts *o)
{
    const struct {
        const char *model;
        size_t k, d, n;
    } def[] = {
        {"gmm", 3, 2, 272},
        {"hopfield", 4, 16, 2},
        {"cross-attention", 0, 8, 4},
        {"self-attention", 4, 8, 6},
        {"slot-attention", 4, 8, 16},
        {"predcoding", 3, 0, 8},
        {"slds", 2, 1, 0},
        {"layernorm", 0, 8, 4},
        {"idwnet", 0, 8, 10},
        {"daam", 0, 16, 40},
        {"dar-attention", 0, 8, 6},
        {"stattn", 0, 4, 6},
        {"dma", 2, 1, 0},
        {"et", 0, 16, 0},
        {"capsnet", 3, 0, 6},
    };
    for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) {
        if (strcmp(def[i].model, model) != 0)
            continue;
        if (o->k == 0)
            o->k = def[i].k;
        if (o->d == 0)
            o->d = def[i].d;
        if (o->n == 0)
            o->n = def[i].n;
    }
    if (o->m == 0)
        o->m = 6;
    if (o->s == 0)
        o->s = 3;
    if (o->T == 0 && strcmp(model, "stattn") == 0)
        o->T = 3;
    if (o->T == 0)
        o->T = 200;
    if (o->lags == 0)
        o->lags = 1;
    if (o->heads == 0)
        o->heads = 4;
    if (o->protos == 0)
        o->protos = 20;
    if (o->classes == 0)
        o->classes = 10;
    if (o->dims == NULL)
        o->dims = "8,4,2";
    if (isnan(o->beta))
        o->beta = strcmp(model, "hopfield") == 0 ? 4.0 : 1.0;
    if (isnan(o->lambda))
        o->lambda = 0.2;
    if (isnan(o->rho))
        o->rho = 0.5;
    if (isnan(o->alpha))
        o->alpha = 8.0;
}

/* ------------------------------------------------------------------ */
/* Help                                                                 */

static void help(void)
{
    printf(
        "Usage: energyviz MODEL [model options] -o OUT.{svg,png,pdf,dot} "
        "[options]\n"
        "\n"
        "Draw the factor graph of an lsegraph model with Graphviz: variables "
        "as circles\n"
        "(observed ones shaded), parameters as boxes, each energy term as a "
        "black factor\n"
        "square labelled with its similarity, plates for repeated rows.\n"
        "\n"
        "MODEL is one of\n"
        "  a built-in model name (options and defaults below),\n"
        "  a fitted model JSON written by lsefit (\"model\": \"gmm\" or "
        "\"slds\"), drawn\n"
        "    with its real dimensions; with --data FILE.csv --expand it is "
        "evaluated on\n"
        "    the data and the responsibilities are drawn,\n"
        "  a model spec: a DOT file (*.dot, *.gv) whose nodes carry rows, "
        "dim, observed\n"
        "    and whose factor nodes carry sim and its parameters "
        "(docs/energyviz.md).\n"
        "\n"
        "Built-in models:\n");
    for (size_t i = 0; i < N_MODELS; i++) {
        printf("  %-16s %s\n", models[i].name, models[i].summary);
        for (const char *l = models[i].help; *l;) {
            const char *e = strchr(l, '\n');
            const int n = e != NULL ? (int)(e - l) : (int)strlen(l);
            printf("  %-16s   %.*s\n", "", n, l);
            l += n + (e != NULL);
        }
    }
    printf(
        "\n"
        "Options:\n"
        "  -o, --output FILE   output file; the format follows its extension\n"
        "  --format FMT        svg, png, pdf or dot (overrides the extension)\n"
        "  --layout ENGINE     dot (default) or fdp (spring layout) draw "
        "plates as\n"
        "                      boxes; neato and circo draw no plates, so "
        "they are\n"
        "                      refused for a graph that has any\n"
        "  --expand            draw every row as a node; child-parent edges "
        "get width\n"
        "                      and colour from the term's softmax "
        "(attention,\n"
        "                      responsibilities)\n"
        "  --max-rows N        rows drawn per node with --expand, or matrix "
        "rows (40)\n"
        "  --matrix TERM       draw a heat map of TERM's matrix instead of "
        "the graph\n"
        "  --what WHAT         similarity, softmax (default), resonance (DAR "
        "r_ij),\n"
        "                      importance (DAAM importance factors) or "
        "transition (P of\n"
        "                      a Markov chain term)\n"
        "  --data FILE.csv     data for a fitted model JSON (columns by "
        "feature_names)\n"
        "  --title TEXT        graph title ('' for none)\n"
        "  --theme THEME       screen (default: sans-serif) or print (serif "
        "fonts,\n"
        "                      black and white, 300 dpi)\n"
        "  --dpi N             raster resolution of PNG output (96; print: "
        "300)\n"
        "  --no-legend         leave out the legend of shapes, line styles "
        "and colours\n"
        "  -h, --help          this text\n"
        "  -V, --version       version\n"
        "\n"
        "Exit status: 0 on success, 1 on errors, 2 on usage errors.\n");
}

/* ------------------------------------------------------------------ */
/* Command line                                                         */

static size_t parse_count(const char *opt, const char *v)
{
    char *end = NULL;
    errno = 0;
    const unsigned long long x =
        isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
    if (end == NULL || *end != '\0' || errno != 0 || x == 0 || x > 1000000)
        die(EXIT_USAGE, "%s '%s': expected a positive integer", opt, v);
    return (size_t)x;
}

static size_t parse_steps(const char *opt, const char *v)
{
    if (strcmp(v, "0") == 0)
        return 0;
    return parse_count(opt, v);
}

static double parse_real(const char *opt, const char *v)
{
    char *end = NULL;
    errno = 0;
    const double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !isfinite(x))
        die(EXIT_USAGE, "%s '%s': expected a finite number", opt, v);
    return x;
}

typedef enum arg_kind { ARG_FLAG, ARG_VALUE } arg_kind;

typedef struct opt_def {
    const char *name, *alias;
    arg_kind kind;
    int model_opt; /* validated against the model's list */
} opt_def;

static const opt_def opt_defs[] = {
    {"--output", "-o", ARG_VALUE, 0},   {"--format", NULL, ARG_VALUE, 0},
    {"--layout", NULL, ARG_VALUE, 0},   {"--expand", NULL, ARG_FLAG, 0},
    {"--max-rows", NULL, ARG_VALUE, 0}, {"--matrix", NULL, ARG_VALUE, 0},
    {"--what", NULL, ARG_VALUE, 0},     {"--title", NULL, ARG_VALUE, 0},
    {"--data", NULL, ARG_VALUE, 0},     {"--help", "-h", ARG_FLAG, 0},
    {"--dpi", NULL, ARG_VALUE, 0},      {"--theme", NULL, ARG_VALUE, 0},
    {"--no-legend", NULL, ARG_FLAG, 0},
    {"--version", "-V", ARG_FLAG, 0},   {"-k", NULL, ARG_VALUE, 1},
    {"-d", NULL, ARG_VALUE, 1},         {"-n", NULL, ARG_VALUE, 1},
    {"-m", NULL, ARG_VALUE, 1},         {"-s", NULL, ARG_VALUE, 1},
    {"-T", NULL, ARG_VALUE, 1},         {"-p", NULL, ARG_VALUE, 1},
    {"-c", NULL, ARG_VALUE, 1},         {"--lags", NULL, ARG_VALUE, 1},
    {"--heads", NULL, ARG_VALUE, 1},    {"--covariance", NULL, ARG_VALUE, 1},
    {"--sim", NULL, ARG_VALUE, 1},      {"--score", NULL, ARG_VALUE, 1},
    {"--dims", NULL, ARG_VALUE, 1},     {"--act", NULL, ARG_VALUE, 1},
    {"--axis", NULL, ARG_VALUE, 1},     {"--causal", NULL, ARG_FLAG, 1},
    {"--markov", NULL, ARG_FLAG, 1},    {"--mixture", NULL, ARG_FLAG, 1},
    {"--beta", NULL, ARG_VALUE, 1},     {"--lambda", NULL, ARG_VALUE, 1},
    {"--rho", NULL, ARG_VALUE, 1},      {"--alpha", NULL, ARG_VALUE, 1},
    {"--steps", NULL, ARG_VALUE, 1},
};

static void set_option(options *o, const char *name, const char *v)
{
    model_opts *m = &o->mo;
    if (strcmp(name, "--output") == 0)
        o->output = v;
    else if (strcmp(name, "--format") == 0)
        o->format = v;
    else if (strcmp(name, "--layout") == 0)
        o->layout = v;
    else if (strcmp(name, "--expand") == 0)
        o->expand = 1;
    else if (strcmp(name, "--max-rows") == 0) {
        o->max_rows = parse_count(name, v);
        o->max_rows_set = 1;
    } else if (strcmp(name, "--matrix") == 0)
        o->matrix = v;
    else if (strcmp(name, "--what") == 0)
        o->what = v;
    else if (strcmp(name, "--title") == 0)
        o->title = v;
    else if (strcmp(name, "--data") == 0)
        o->data = v;
    else if (strcmp(name, "--dpi") == 0) {
        o->dpi = parse_real(name, v);
        if (!(o->dpi >= 36 && o->dpi <= 1200))
            die(EXIT_USAGE,
                "--dpi '%s': expected 36 to 1200 (96 for a screen, 300 for "
                "print)",
                v);
    } else if (strcmp(name, "--theme") == 0) {
        if (strcmp(v, "screen") != 0 && strcmp(v, "print") != 0)
            die(EXIT_USAGE, "--theme '%s': expected screen or print", v);
        o->theme = v;
    } else if (strcmp(name, "--no-legend") == 0)
        o->no_legend = 1;
    else if (strcmp(name, "-k") == 0)
        m->k = parse_count(name, v);
    else if (strcmp(name, "-d") == 0)
        m->d = parse_count(name, v);
    else if (strcmp(name, "-n") == 0)
        m->n = parse_count(name, v);
    else if (strcmp(name, "-m") == 0)
        m->m = parse_count(name, v);
    else if (strcmp(name, "-s") == 0)
        m->s = parse_count(name, v);
    else if (strcmp(name, "-T") == 0)
        m->T = parse_count(name, v);
    else if (strcmp(name, "-p") == 0)
        m->protos = parse_count(name, v);
    else if (strcmp(name, "-c") == 0)
        m->classes = parse_count(name, v);
    else if (strcmp(name, "--lags") == 0)
        m->lags = parse_count(name, v);
    else if (strcmp(name, "--heads") == 0)
        m->heads = parse_count(name, v);
    else if (strcmp(name, "--steps") == 0)
        m->steps = parse_steps(name, v);
    else if (strcmp(name, "--covariance") == 0)
        m->covariance = v;
    else if (strcmp(name, "--sim") == 0)
        m->sim = v;
    else if (strcmp(name, "--score") == 0)
        m->score = v;
    else if (strcmp(name, "--dims") == 0)
        m->dims = v;
    else if (strcmp(name, "--act") == 0)
        m->act = v;
    else if (strcmp(name, "--axis") == 0)
        m->axis = v;
    else if (strcmp(name, "--causal") == 0)
        m->causal = 1;
    else if (strcmp(name, "--markov") == 0)
        m->markov = 1;
    else if (strcmp(name, "--mixture") == 0)
        m->mixture = 1;
    else if (strcmp(name, "--beta") == 0) {
        m->beta = parse_real(name, v);
        if (!(m->beta > 0))
            die(EXIT_USAGE, "--beta '%s': must be > 0", v);
    } else if (strcmp(name, "--lambda") == 0)
        m->lambda = parse_real(name, v);
    else if (strcmp(name, "--rho") == 0)
        m->rho = parse_real(name, v);
    else if (strcmp(name, "--alpha") == 0)
        m->alpha = parse_real(name, v);
}

static void parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->mo.beta = o->mo.lambda = o->mo.rho = o->mo.alpha = NAN;
    o->max_rows = 40;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            if (o->model != NULL)
                die(EXIT_USAGE, "unexpected argument '%s' (MODEL is '%s')", a,
                    o->model);
            o->model = a;
            continue;
        }
        char name[64];
        const char *value = NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        const size_t nlen = eq != NULL ? (size_t)(eq - a) : strlen(a);
        if (nlen >= sizeof name)
            die(EXIT_USAGE, "unknown option '%s'", a);
        memcpy(name, a, nlen);
        name[nlen] = '\0';
        const opt_def *def = NULL;
        for (size_t k = 0; k < sizeof opt_defs / sizeof opt_defs[0]; k++)
            if (strcmp(name, opt_defs[k].name) == 0 ||
                (opt_defs[k].alias != NULL &&
                 strcmp(name, opt_defs[k].alias) == 0))
                def = &opt_defs[k];
        if (def == NULL) {
            const char *longs[sizeof opt_defs / sizeof opt_defs[0]];
            size_t n = 0;
            for (size_t k = 0; k < sizeof opt_defs / sizeof opt_defs[0]; k++)
                if (strncmp(opt_defs[k].name, "--", 2) == 0)
                    longs[n++] = opt_defs[k].name + 2;
            const char *near = strncmp(name, "--", 2) == 0
                                   ? cli_suggest(name + 2, longs, n)
                                   : NULL;
            if (near != NULL)
                die(EXIT_USAGE, "unknown option '%s'; did you mean --%s?", name,
                    near);
            die(EXIT_USAGE, "unknown option '%s'", name);
        }
        if (strcmp(def->name, "--help") == 0 ||
            strcmp(def->name, "--version") == 0) {
            if (strcmp(def->name, "--help") == 0)
                help();
            else
                printf("%s\n", version);
            finish();
            /* a write error on stdout (a full disk, /dev/full) is one */
            exit(cli_close_stdout("energyviz", 0));
        }
        if (def->kind == ARG_VALUE) {
            if (eq != NULL)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                die(EXIT_USAGE, "option '%s' needs a value", name);
        } else if (eq != NULL) {
            die(EXIT_USAGE, "option '%s' takes no value", name);
        }
        if (def->model_opt && o->n_given < 64)
            snprintf(o->given[o->n_given++], sizeof o->given[0], "%s",
                     def->name);
        set_option(o, def->name, value);
    }
}

/* ------------------------------------------------------------------ */
/* Fitted models (lsefit JSON)                                          */

static const char *ext_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    return dot != NULL && (slash == NULL || dot > slash) ? dot + 1 : "";
}

static int has_ext(const char *path, const char *ext)
{
    return strcasecmp(ext_of(path), ext) == 0;
}

/* Load --data with the model's columns: by feature_names when the CSV has
 * a header, else all columns when their number is d. */
static gsl_matrix *load_data(const char *path, size_t d)
{
    lse_error err = {0};
    check(lse_table_read(path, NULL, &S.table, &err), &err, "--data");
    size_t cols[256];
    if (d > 256)
        die(1, "--data: more than 256 features");
    char **names = NULL;
    size_t n_names = 0;
    const int by_name = lse_table_has_header(S.table) &&
                        lse_json_get_strings(S.json, "feature_names", &names,
                                             &n_names, NULL) == LSE_OK &&
                        n_names == d;
    if (by_name) {
        for (size_t j = 0; j < d; j++) {
            const lse_status st =
                lse_table_find_column(S.table, names[j], &cols[j], &err);
            if (st != LSE_OK) {
                free(names);
                check(st, &err, "--data");
            }
            for (size_t i = 0; i < j; i++)
                if (strcmp(names[i], names[j]) == 0)
                    die(1, "--data: the model's feature_names name '%.60s' "
                           "twice (entries %zu and %zu): fix the model file",
                        names[j], i + 1, j + 1);
        }
    } else {
        if (lse_table_cols(S.table) != d) {
            free(names);
            die(1, "--data: %s has %zu columns, the model has %zu features",
                path, lse_table_cols(S.table), d);
        }
        for (size_t j = 0; j < d; j++)
            cols[j] = j;
    }
    free(names);
    gsl_matrix *x = NULL;
    check(lse_table_to_matrix(S.table, cols, d, LSE_MISSING_ERROR, &x, NULL,
                              &err),
          &err, "--data");
    return keep(x);
}

/* Rows of the fitted data, from loglik / loglik_per_<unit>, or 0. */
static size_t json_rows(const char *per_key)
{
    double total, per;
    if (lse_json_get_number(S.json, "loglik", &total, NULL) != LSE_OK ||
        lse_json_get_number(S.json, per_key, &per, NULL) != LSE_OK ||
        !(per != 0) || !isfinite(total / per))
        return 0;
    const double n = round(total / per);
    return n >= 1 && n <= 1e7 ? (size_t)n : 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

static lse_graph *json_gmm(const options *o, char *title, size_t len)
{
    lse_error err = {0};
    lse_gmm *m = NULL;
    check(lse_gmm_from_json(S.json, o->model, &m, NULL, &err), &err, "model");
    const size_t K = lse_gmm_k(m), d = lse_gmm_dim(m);
    const char *covname = lse_gmm_cov_name(lse_gmm_cov_type(m));
    gsl_matrix *x;
    if (o->data != NULL) {
        x = load_data(o->data, d);
    } else {
        size_t n = json_rows("loglik_per_sample");
        x = matrix(n > 0 ? n : 1, d);
    }
    lse_graph *g = NULL;
    const lse_status st = lse_gmm_graph_new(m, x, &g, &err);
    lse_gmm_free(m);
    check(st, &err, "model");
    S.owned = g;
    plate("x", "N = %zu observations", x->size1);
    plate("mu", "K = %zu components", K);
    plate("logw", "K = %zu components", K);
    plate("chol", "K = %zu components", K);
    snprintf(title, len, "Fitted GMM (%s): K = %zu, d = %zu, N = %zu, %s",
             base_name(o->model), K, d, x->size1, covname);
    return g;
}

static lse_graph *json_slds(const options *o, char *title, size_t len)
{
    lse_error err = {0};
    lse_slds *m = NULL;
    check(lse_slds_from_json(S.json, o->model, &m, NULL, &err), &err, "model");
    const size_t K = lse_slds_n_modes(m), d = lse_slds_dim(m),
                 lags = lse_slds_lags(m);
    const int markov = lse_slds_is_markov(m);
    gsl_matrix *x;
    if (o->data != NULL) {
        x = load_data(o->data, d);
    } else {
        const size_t steps = json_rows("loglik_per_step");
        x = matrix(steps > 0 ? steps + lags : lags + 1, d);
    }
    lse_graph *g = NULL;
    const lse_status st = lse_slds_graph_new(m, x, NULL, &g, &err);
    lse_slds_free(m);
    check(st, &err, "model");
    S.owned = g;
    plate("x", "T = %zu steps", x->size1);
    static const char *const per_mode[] = {"b", "logw", "A", "chol", "trans"};
    for (size_t i = 0; i < 5; i++)
        plate(per_mode[i], "K = %zu modes", K);
    snprintf(title, len,
             "Fitted %s SLDS (%s): K = %zu modes, d = %zu, %zu lag%s, T = %zu",
             markov ? "Markov-switching" : "mixture", base_name(o->model), K, d,
             lags, lags == 1 ? "" : "s", x->size1);
    return g;
}

static lse_graph *load_json(const options *o, char *title, size_t len)
{
    lse_error err = {0};
    check(lse_json_load(o->model, &S.json, &err), &err, "model");
    const char *kind = NULL;
    check(lse_json_get_string(S.json, "model", &kind, &err), &err, "model");
    if (strcmp(kind, "gmm") == 0)
        return json_gmm(o, title, len);
    if (strcmp(kind, "slds") == 0)
        return json_slds(o, title, len);
    die(1, "%s: model '%s' cannot be drawn (gmm or slds)", o->model, kind);
}

/* ------------------------------------------------------------------ */
/* Matrix views                                                         */

/* The term's child (or parent) rows as a matrix view. */
static gsl_matrix_view view_rows(lse_view v)
{
    return gsl_matrix_submatrix(lse_node_value(v.node), v.first, 0, v.count,
                                lse_node_dim(v.node));
}

/* DAR resonance r_ij (lse_dar_resonance_matrix, docs/sim-dar-daam.md
 * 1.1) of the term's children and parents. Masked pairs are -inf (drawn
 * grey). */
static gsl_matrix *resonance(lse_term *t)
{
    const lse_view cv = lse_term_child(t), pv = lse_term_parent(t);
    gsl_matrix_view C = view_rows(cv), P = view_rows(pv);
    gsl_matrix *r = matrix(cv.count, pv.count);
    lse_error err;
    if (lse_dar_resonance_matrix(lse_term_config(t), &C.matrix, &P.matrix, r,
                                 &err) != LSE_OK)
        die(1, "--what resonance: %s", err.message);
    for (size_t i = 0; i < cv.count; i++)
        for (size_t j = 0; j < pv.count; j++)
            if (!lse_term_allowed(t, i, j))
                gsl_matrix_set(r, i, j, -INFINITY);
    return r;
}

/* DAAM importance factors (the DAAM paper; docs/sim-dar-daam.md 2.3): the
 * density attention DA (lse_daam_density, with the term's softmax over
 * the heads), then IF = (DA - min DA) / (max DA - min DA) over the whole
 * map (all 1 when max = min, as lse_daam_importance; the title says so).
 * lse_daam_importance is the per-feature version: the column means of DA,
 * normalized the same way. */
static gsl_matrix *importance(lse_term *t, int *flat)
{
    const lse_view cv = lse_term_child(t), pv = lse_term_parent(t);
    gsl_matrix_view X = view_rows(cv), D = view_rows(pv);
    const gsl_matrix *c = lse_node_value(lse_term_param(t, 0));
    const size_t n = cv.count, d = X.matrix.size2;
    if (lse_term_softmax(t) == NULL)
        return NULL; /* a streaming term: the caller says so */
    gsl_matrix *da = matrix(n, d);
    lse_error err;
    if (lse_daam_density(lse_term_config(t), &X.matrix, &D.matrix, c,
                         lse_term_softmax(t), da, &err) != LSE_OK)
        die(1, "--what importance: %s", err.message);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            lo = fmin(lo, gsl_matrix_get(da, i, j));
            hi = fmax(hi, gsl_matrix_get(da, i, j));
        }
    *flat = !(hi > lo);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(da, i, j,
                           *flat ? 1.0
                                 : (gsl_matrix_get(da, i, j) - lo) / (hi - lo));
    return da;
}

#ifdef LSE_HAVE_PLOTS
/* The plate label the model gives node @p name, or NULL. */
static const char *plate_text_of(const char *name)
{
    for (size_t i = 0; i < S.n_plates; i++)
        if (strcmp(S.plates[i].node, name) == 0)
            return S.plates[i].label;
    return NULL;
}
#endif

/* The heat map of --matrix: drawn with PLplot (svg, png, pdf) when built
 * with it; otherwise, and for dot output, the DOT table it returns. */
#ifdef LSE_HAVE_PLOTS
/* --matrix with a picture format: the heat map of @p part (the first rows
 * and columns of @p M) with axes named by the model's plates. */
static void matrix_plot(lse_term *t, const options *o,
                        const gsl_matrix *part_m, const gsl_matrix *M,
                        const char *title, const char *what, const char *col,
                        const char *row_name, int flat, const char *format)
{
    const size_t rows = part_m->size1, cols = part_m->size2;
    /* a long series (many more rows than columns) runs left to right */
    const int transpose = rows > 24 && rows > 3 * cols;
    char ptitle[700], rowax[200], colax[200];
    snprintf(ptitle, sizeof ptitle, "%s%s%s of '%s'%s%s", title,
             title[0] ? "\n" : "", what, o->matrix,
             flat ? " (constant: all 1)" : "",
             rows < M->size1 || cols < M->size2 ? " (truncated)" : "");
    /* axes named by the model's plates: "K = 2 modes (parent b)" */
    const char *cn = lse_node_name(lse_term_child(t).node);
    const char *ci = plate_text_of(cn), *pi = plate_text_of(col);
    if (ci != NULL)
        snprintf(rowax, sizeof rowax, "%s (child %s)%s", ci, cn,
                 rows < M->size1 ? ", first rows" : "");
    else
        snprintf(rowax, sizeof rowax, "%s row (child)%s", cn,
                 rows < M->size1 ? ", first rows" : "");
    if (row_name != NULL)
        snprintf(rowax, sizeof rowax, "%s", row_name);
    if (strcmp(col, "features") == 0 || row_name != NULL)
        snprintf(colax, sizeof colax, "%s", col);
    else if (pi != NULL)
        snprintf(colax, sizeof colax, "%s (parent %s)", pi, col);
    else
        snprintf(colax, sizeof colax, "%s row (parent)", col);
    plot_heatmap h = {.m = part_m,
                      .title = ptitle,
                      .row_label = rowax,
                      .col_label = colax,
                      .value_label = what,
                      .transpose = transpose};
    const int print = o->theme != NULL && strcmp(o->theme, "print") == 0;
    plot_page page = {.serif = print,
                      .format = format,
                      .path = o->output,
                      .width_in = transpose ? 9 : 6.5,
                      .height_in = transpose ? 4 : 5.5,
                      .dpi = o->dpi > 0 ? o->dpi
                                        : (o->theme != NULL &&
                                                   strcmp(o->theme,
                                                          "print") == 0
                                               ? 300
                                               : 96)};
    char perr[300];
    if (plot_heatmap_draw(&h, &page, perr, sizeof perr) != 0)
        die(1, "--matrix: %s", perr);
}
#endif

static char *matrix_dot(lse_graph *g, const options *o, const char *title,
                        const char *format)
{
    lse_term *t = lse_graph_find_term(g, o->matrix);
    if (t == NULL) {
        char names[400] = "";
        for (size_t i = 0; i < lse_graph_n_terms(g); i++) {
            const size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                     lse_term_name(lse_graph_term(g, i)));
        }
        die(1, "--matrix: no term '%s' (terms: %s)", o->matrix, names);
    }
    if (lse_term_kind_of(t) != LSE_TERM_LSE)
        die(1,
            "--matrix: term '%s' is a custom term; it has no similarity "
            "matrix",
            o->matrix);
    const char *what = o->what != NULL ? o->what : "softmax";
    const char *sim = lse_term_sim(t)->name;
    const gsl_matrix *M = NULL;
    int flat = 0;
    const char *col = lse_node_name(lse_term_parent(t).node);
    const char *row_name = NULL; /* the rows' axis, when not the child's */
    if (strcmp(what, "similarity") == 0)
        M = lse_term_similarity(t);
    else if (strcmp(what, "softmax") == 0 && lse_term_softmax(t) != NULL) {
        /* masked pairs hold 0 in the softmax: draw them grey */
        gsl_matrix *A =
            matrix(lse_term_softmax(t)->size1, lse_term_softmax(t)->size2);
        gsl_matrix_memcpy(A, lse_term_softmax(t));
        for (size_t i = 0; i < A->size1; i++)
            for (size_t j = 0; j < A->size2; j++)
                if (!lse_term_allowed(t, i, j))
                    gsl_matrix_set(A, i, j, -INFINITY);
        M = A;
    } else if (strcmp(what, "softmax") == 0)
        M = NULL;
    else if (strcmp(what, "transition") == 0) {
        /* a chain term's transition matrix P(from row to column): the
         * row softmax of its (K, K) logits */
        lse_node *tr = lse_term_chain_trans(t);
        if (tr == NULL)
            die(1, "--what transition: term '%s' is not a Markov chain "
                   "(reduce=chain)", o->matrix);
        const gsl_matrix *L = lse_node_value(tr);
        gsl_matrix *P = matrix(L->size1, L->size2);
        for (size_t i = 0; i < L->size1; i++) {
            double mx = -INFINITY, sum = 0;
            for (size_t j = 0; j < L->size2; j++)
                mx = fmax(mx, gsl_matrix_get(L, i, j));
            for (size_t j = 0; j < L->size2; j++)
                sum += exp(gsl_matrix_get(L, i, j) - mx);
            for (size_t j = 0; j < L->size2; j++)
                gsl_matrix_set(P, i, j,
                               exp(gsl_matrix_get(L, i, j) - mx) / sum);
        }
        M = P;
        col = "to mode";
        row_name = "from mode";
    }
    else if (strcmp(what, "resonance") == 0) {
        if (strcmp(sim, "dar") != 0)
            die(1, "--what resonance: term '%s' uses %s, not dar", o->matrix,
                sim);
        M = resonance(t);
    } else if (strcmp(what, "importance") == 0) {
        if (strcmp(sim, "daam") != 0)
            die(1, "--what importance: term '%s' uses %s, not daam", o->matrix,
                sim);
        M = importance(t, &flat);
        col = "features";
    } else
        die(EXIT_USAGE,
            "--what '%s': expected similarity, softmax, resonance, "
            "importance or transition",
            what);
    if (M == NULL)
        die(1, "--matrix: term '%s' keeps no matrices (streaming)", o->matrix);
    const size_t rows = M->size1 < o->max_rows ? M->size1 : o->max_rows;
    const size_t cols = M->size2 < 200 ? M->size2 : 200;
    gsl_matrix_const_view part =
        gsl_matrix_const_submatrix(M, 0, 0, rows, cols);
    char head[600], rowl[200];
    char desc[256];
    lse_term_describe(t, desc, sizeof desc);
    snprintf(head, sizeof head, "%s%s%s of '%s': %s%s%s", title,
             title[0] ? "\n" : "", what, o->matrix, desc,
             flat ? " (constant: all 1)" : "",
             rows < M->size1 || cols < M->size2 ? " (truncated)" : "");
    snprintf(rowl, sizeof rowl, "%s rows 0..%zu of %zu",
             lse_node_name(lse_term_child(t).node), rows - 1, M->size1);
#ifdef LSE_HAVE_PLOTS
    if (strcmp(format, "dot") != 0) {
        matrix_plot(t, o, &part.matrix, M, title, what, col, row_name, flat,
                    format);
        return NULL;
    }
#else
    (void)format;
#endif
    char *dot = NULL;
    lse_error err = {0};
    check(lse_viz_matrix_to_dot(&part.matrix, head, rowl, col, &dot, &err),
          &err, "--matrix");
    return dot;
}

/* ------------------------------------------------------------------ */

static const char *output_format(const options *o)
{
    const char *f = o->format != NULL ? o->format : ext_of(o->output);
    if (strcasecmp(f, "gv") == 0)
        return "dot";
    static const char *const ok[] = {"svg", "png", "pdf", "dot"};
    for (size_t i = 0; i < 4; i++)
        if (strcasecmp(f, ok[i]) == 0)
            return ok[i];
    if (o->format != NULL)
        die(EXIT_USAGE, "--format '%s': expected svg, png, pdf or dot", f);
    die(EXIT_USAGE,
        "cannot tell the format of '%s' (use .svg, .png, .pdf or .dot, or "
        "--format)",
        o->output);
}

/* Before any work: the output must not be the model file or --data (it
 * would destroy them), nor read-only, a directory or in a missing
 * directory (the library's output set, docs/io.md "Outputs"). */
static void check_paths(const options *o)
{
    lse_error err = {0};
    lse_outputs *set = NULL;
    lse_status st = lse_outputs_new(&set, &err);
    if (st == LSE_OK && find_model(o->model) == NULL)
        st = lse_outputs_input(set, o->model, "the model", &err);
    if (st == LSE_OK && o->data != NULL)
        st = lse_outputs_input(set, o->data, "--data", &err);
    if (st == LSE_OK)
        st = lse_outputs_add(set, o->output, "-o", &err);
    lse_outputs_free(set);
    if (st != LSE_OK) {
        const char *msg = err.message;
        const char *colon =
            strncmp(msg, "lse_", 4) == 0 ? strstr(msg, ": ") : NULL;
        die(st == LSE_EINVAL ? EXIT_USAGE : 1, "%s",
            colon != NULL ? colon + 2 : msg);
    }
}

/* MODEL is not a built-in model: a fitted model JSON or a .dot spec
 * (unknown names get the list of built-in models). */
static lse_graph *load_model_file(options *o, char *title, size_t len)
{
    lse_graph *g = NULL;
    if (o->n_given > 0)
        die(EXIT_USAGE, "option %s is for built-in models; '%s' is not one",
            o->given[0], o->model);
    FILE *f = fopen(o->model, "rb");
    if (f == NULL) {
        if (has_ext(o->model, "json") || has_ext(o->model, "dot") ||
            has_ext(o->model, "gv"))
            die(1, "cannot open '%s': %s", o->model, strerror(errno));
        char names[300] = "";
        const char *list[N_MODELS];
        for (size_t i = 0; i < N_MODELS; i++) {
            const size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s",
                     i ? ", " : "", models[i].name);
            list[i] = models[i].name;
        }
        const char *near = cli_suggest(o->model, list, N_MODELS);
        if (near != NULL)
            die(EXIT_USAGE, "unknown model '%s'; did you mean %s? "
                            "(built-in: %s; or a fitted model .json, or "
                            "a .dot spec)",
                o->model, near, names);
        die(EXIT_USAGE,
            "unknown model '%s' (built-in: %s; or a fitted model .json, "
            "or a .dot spec)",
            o->model, names);
    }
    int c;
    while ((c = fgetc(f)) != EOF && isspace(c))
        ;
    fclose(f);
    const int json =
        has_ext(o->model, "json") ||
        (!has_ext(o->model, "dot") && !has_ext(o->model, "gv") && c == '{');
    if (json) {
        g = load_json(o, title, len);
    } else {
        if (o->data != NULL)
            die(EXIT_USAGE, "--data goes with a fitted model JSON, not a "
                            "spec");
        lse_error err = {0};
        check(lse_viz_read_spec(o->model, NULL, &S.owned, &err), &err,
              "spec");
        g = S.owned;
        snprintf(title, len, "%s", base_name(o->model));
    }
    if (o->expand && json && o->data == NULL)
        die(EXIT_USAGE, "--expand on a fitted model needs --data FILE.csv");
    return g;
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);
    if (o.model == NULL)
        die(EXIT_USAGE, "no MODEL given");
    if (o.output == NULL)
        die(EXIT_USAGE, "no output file (-o OUT.svg)");
    const char *format = output_format(&o);
    check_paths(&o);
    tool_outputs_signals();
    if (o.layout != NULL && strcmp(o.layout, "dot") != 0 &&
        strcmp(o.layout, "neato") != 0 && strcmp(o.layout, "fdp") != 0 &&
        strcmp(o.layout, "circo") != 0)
        die(EXIT_USAGE, "--layout '%s': expected dot, neato, fdp or circo",
            o.layout);
    if (o.layout != NULL && strcmp(o.layout, "dot") != 0 && o.expand)
        die(EXIT_USAGE, "--expand is laid out by dot only (rows in order, "
                        "parents above children); drop --layout %s",
            o.layout);
    if (o.layout != NULL && strcmp(o.layout, "dot") != 0 && o.matrix != NULL)
        die(EXIT_USAGE, "--matrix draws a heat map, which has no graph "
                        "layout; drop --layout %s",
            o.layout);
    if (o.what != NULL && o.matrix == NULL)
        die(EXIT_USAGE, "--what needs --matrix TERM");
    if (o.expand && o.matrix != NULL)
        die(EXIT_USAGE, "--expand and --matrix draw different pictures; "
                        "choose one");
    S.rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (S.rng == NULL)
        die(1, "out of memory");
    gsl_rng_set(S.rng, 1);

    char title[400] = "";
    lse_graph *g = NULL;
    const model_def *def = find_model(o.model);
    if (def != NULL) {
        for (size_t i = 0; i < o.n_given; i++)
            if (!takes(def, o.given[i]))
                die(EXIT_USAGE, "model %s takes no option %s (it takes %s)",
                    def->name, o.given[i], def->takes);
        if (o.data != NULL)
            die(EXIT_USAGE,
                "--data goes with a fitted model JSON, not the "
                "built-in model %s",
                def->name);
        model_defaults(def->name, &o.mo);
        g = def->build(&o.mo, title, sizeof title);
    } else {
        g = load_model_file(&o, title, sizeof title);
    }
    if (o.title != NULL)
        snprintf(title, sizeof title, "%s", o.title);

    if (o.expand || o.matrix != NULL) {
        double e;
        if (lse_graph_energy(g, &e) != LSE_OK)
            die(1, "cannot evaluate the graph: %s",
            cli_strip_function(lse_graph_errmsg(g)));
    }
    lse_error err = {0};
    if (o.matrix != NULL) {
        S.dot = matrix_dot(g, &o, title, format);
        if (S.dot != NULL)
            check(lse_viz_render_dot(S.dot, "dot", format, o.output, &err),
                  &err, "render");
    } else {
        lse_viz_opts vo = lse_viz_opts_default();
        vo.expand = o.expand;
        vo.max_rows = o.max_rows;
        vo.layout = o.layout != NULL ? o.layout : "dot";
        vo.title = title[0] ? title : NULL;
        /* the model's plates, for the nodes this graph has */
        size_t np = 0;
        for (size_t i = 0; i < S.n_plates; i++)
            if (lse_graph_find_node(g, S.plates[i].node) != NULL)
                S.plates[np++] = S.plates[i];
        vo.plates = S.plates;
        vo.n_plates = np;
        vo.legend = !o.no_legend;
        vo.theme = o.theme != NULL ? o.theme : "screen";
        vo.dpi = o.dpi;
        check(lse_viz_render(g, &vo, format, o.output, &err), &err, "render");
    }
    finish();
    return cli_close_stdout("energyviz", 0);
}
