#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

/* Energy Transformer block (Hoover et al. 2023), built only through the
 * public API (docs/models/etransformer.md):
 *
 *   x_i (raw tokens) -> g = LayerNorm(x) (lse_layernorm: dL/dx of the
 *   Lagrangian L = sum_i [D gamma sd_i + delta . x_i])
 *   E(g) = heads term "attend<b>" per image (dot over W_Q^h g, W_K^h g,
 *          beta 1/sqrt(k), no self pair) + LSE term "memory" (dot, g vs xi)
 *   x_{t+1} = x_t - alpha dE/dg(g_t),   t = 0 .. T-1
 *   y_i = W_dec g_T,i + b_dec  (hidden patches)
 *
 * Learning: the loss of the hidden pixels is back-propagated through the
 * unrolled steps (the adjoint a_t = a_{t+1} - alpha J_t H a_{t+1}); the
 * products H a of the energy's Hessian come from central differences of
 * the graph's exact gradients (the library has no second derivatives).
 * The gradient reaches lse_optim through a parameter graph whose one
 * custom term "loss" carries it. */

enum { P_ENC, P_POS, P_MASK, P_GAMMA, P_DELTA, P_WQ, P_WK, P_MEM, P_DEC,
       P_BDEC, NPAR };
static const char *const par_name[NPAR] = {"W_enc", "pos", "mask", "gamma",
                                           "delta", "W_Q", "W_K", "memories",
                                           "W_dec", "b_dec"};

struct lse_et {
    lse_et_config c;
    size_t ns, N, P, D, HK, R; /* patches per side, tokens, pixels, dim,
                                  H k, rows B N */
    lse_graph *g;              /* energy graph */
    lse_node *tok, *wq, *wk, *mem;
    lse_graph *pg;             /* parameter graph for the optimizer */
    lse_node *par[NPAR];
    gsl_matrix *lgrad[NPAR];   /* the loss gradient the "loss" term adds */
    double lval;
    lse_optim *opt;
    lse_layernorm *ln;
    gsl_matrix **x, **gt;      /* T + 1 raw and normalized token sets */
    gsl_matrix *u, *a, *w, *gp, *tmp; /* (R, D) scratch */
    gsl_matrix *tp[3];         /* parameter gradients at g + eps a */
    size_t nparam;
};

/* ------------------------------------------------------------------ */
/* The "loss" term of the parameter graph: energy = the last loss,
 * gradient = its back-propagated gradient (one view per parameter). */

static lse_status loss_check(const gsl_matrix *const *v, size_t n,
                             const void *cfg, char *msg, size_t len)
{
    (void)v;
    if (n != NPAR || cfg == NULL) {
        snprintf(msg, len, "the loss term takes the %d parameter nodes",
                 NPAR);
        return LSE_EINVAL;
    }
    return LSE_OK;
}

static lse_status loss_energy(const gsl_matrix *const *v, size_t n,
                              const void *cfg, double *e)
{
    (void)v;
    (void)n;
    *e = ((const lse_et *)cfg)->lval;
    return LSE_OK;
}

static lse_status loss_grad(const gsl_matrix *const *v, size_t n,
                            const void *cfg, gsl_matrix *const *grad,
                            double *e)
{
    const lse_et *et = cfg;
    (void)v;
    for (size_t i = 0; i < n; i++)
        if (grad[i] != NULL)
            gsl_matrix_add(grad[i], et->lgrad[i]);
    *e = et->lval;
    return LSE_OK;
}

static const lse_custom_type loss_type = {"et-loss", 0, loss_check,
                                          loss_energy, loss_grad, NULL};

/* ------------------------------------------------------------------ */

lse_et_config lse_et_config_default(void)
{
    return (lse_et_config){.side = 8, .patch = 2, .dim = 32, .n_heads = 4,
                           .head_dim = 8, .n_memories = 32, .beta_mem = 1.0,
                           .batch = 40, .steps = 3, .alpha = 0.2,
                           .eps = 1e-5, .seed = 1};
}

static int mul_ok(size_t a, size_t b, size_t *r)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *r = a * b;
    return 1;
}

static int pos_finite(double v) { return isfinite(v) && v > 0.0; }

static lse_status check_config(const lse_et_config *c, const char *fn,
                               lse_error *err)
{
    if (c->side == 0 || c->patch == 0 || c->dim == 0 || c->n_heads == 0 ||
        c->head_dim == 0 || c->n_memories == 0 || c->batch == 0 ||
        c->steps == 0)
        return lse_error_set(err, LSE_EDOM, fn,
                             "side %zu, patch %zu, dim %zu, heads %zu, "
                             "head_dim %zu, memories %zu, batch %zu, steps "
                             "%zu: each must be at least 1",
                             c->side, c->patch, c->dim, c->n_heads,
                             c->head_dim, c->n_memories, c->batch, c->steps);
    if (c->side % c->patch != 0 || c->side == c->patch)
        return lse_error_set(err, LSE_EDOM, fn,
                             "patch %zu must divide side %zu into at least "
                             "two patches",
                             c->patch, c->side);
    if (c->dim < 2)
        return lse_error_set(err, LSE_EDOM, fn,
                             "dim %zu: LayerNorm needs at least 2", c->dim);
    if (c->n_heads > LSE_HEADS_MAX)
        return lse_error_set(err, LSE_EDOM, fn, "%zu heads, at most %d",
                             c->n_heads, LSE_HEADS_MAX);
    if (!pos_finite(c->beta_mem) || !pos_finite(c->alpha) ||
        !pos_finite(c->eps))
        return lse_error_set(err, LSE_EDOM, fn,
                             "beta_mem %g, alpha %g, eps %g: each must be "
                             "finite and > 0",
                             c->beta_mem, c->alpha, c->eps);
    size_t r, s;
    if (!mul_ok(c->side, c->side, &s) || !mul_ok(c->n_heads, c->head_dim, &r) ||
        !mul_ok(r, c->dim, &r) || !mul_ok(s, c->batch, &r) ||
        !mul_ok(r, c->dim, &r) || !mul_ok(r, c->steps + 1, &r) ||
        !mul_ok(c->n_memories, c->dim, &r))
        return lse_error_set(err, LSE_ERANGE, fn,
                             "the sizes overflow a size_t");
    return LSE_OK;
}

void lse_et_free(lse_et *et)
{
    if (et == NULL)
        return;
    lse_optim_free(et->opt);
    lse_graph_free(et->g);
    lse_graph_free(et->pg);
    lse_layernorm_free(et->ln);
    for (size_t i = 0; i < NPAR; i++)
        gsl_matrix_free(et->lgrad[i]);
    for (size_t t = 0; et->x != NULL && t <= et->c.steps; t++) {
        gsl_matrix_free(et->x[t]);
        gsl_matrix_free(et->gt[t]);
    }
    free(et->x);
    free(et->gt);
    gsl_matrix *s[] = {et->u, et->a, et->w, et->gp, et->tmp,
                       et->tp[0], et->tp[1], et->tp[2]};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        gsl_matrix_free(s[i]);
    free(et);
}

static void fill_normal(gsl_matrix *m, gsl_rng *r, double sd)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, gsl_ran_gaussian(r, sd));
}

/* The parameter graph, its loss term and the initial values. */
static lse_status build_params(lse_et *et, const char *fn, lse_error *err)
{
    const size_t D = et->D, P = et->P;
    const size_t shape[NPAR][2] = {
        {D, P}, {et->N, D}, {1, D}, {1, 1}, {1, D}, {et->HK, D},
        {et->HK, D}, {et->c.n_memories, D}, {P, D}, {1, P}};
    lse_status st = (et->pg = lse_graph_new()) != NULL ? LSE_OK : LSE_ENOMEM;
    lse_view v[NPAR];
    for (size_t i = 0; i < NPAR && st == LSE_OK; i++) {
        st = lse_graph_add_node(et->pg, par_name[i], shape[i][0], shape[i][1],
                                LSE_NODE_PARAM, &et->par[i]);
        if (st == LSE_OK && (et->lgrad[i] = gsl_matrix_calloc(
                                 shape[i][0], shape[i][1])) == NULL)
            st = LSE_ENOMEM;
        if (st == LSE_OK) {
            v[i] = lse_view_all(et->par[i]);
            et->nparam += shape[i][0] * shape[i][1];
        }
    }
    if (st == LSE_OK)
        st = lse_graph_add_custom(et->pg, "loss", &loss_type, et, v, NPAR,
                                  NULL);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "parameter graph: %s",
                             et->pg != NULL ? lse_graph_errmsg(et->pg)
                                            : "out of memory");
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    gsl_rng_set(r, (unsigned long)et->c.seed);
    fill_normal(lse_node_value(et->par[P_ENC]), r, 1.0 / sqrt((double)P));
    fill_normal(lse_node_value(et->par[P_POS]), r, 1.0);
    gsl_matrix_set_all(lse_node_value(et->par[P_GAMMA]), 1.0);
    fill_normal(lse_node_value(et->par[P_WQ]), r, 1.0 / sqrt((double)D));
    fill_normal(lse_node_value(et->par[P_WK]), r, 1.0 / sqrt((double)D));
    fill_normal(lse_node_value(et->par[P_MEM]), r, 1.0 / sqrt((double)D));
    fill_normal(lse_node_value(et->par[P_DEC]), r, 0.1 / sqrt((double)D));
    gsl_matrix_set_all(lse_node_value(et->par[P_BDEC]), 0.3);
    gsl_rng_free(r);
    return LSE_OK;
}

/* The energy graph: tokens, projections, memories, B heads terms and the
 * memory term. */
static lse_status build_energy(lse_et *et, const char *fn, lse_error *err)
{
    lse_graph *g = et->g = lse_graph_new();
    if (g == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    lse_status st = lse_graph_add_node(g, "tokens", et->R, et->D, 0, &et->tok);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "W_Q", et->HK, et->D, LSE_NODE_PARAM,
                                &et->wq);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "W_K", et->HK, et->D, LSE_NODE_PARAM,
                                &et->wk);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "memories", et->c.n_memories, et->D,
                                LSE_NODE_PARAM, &et->mem);
    for (size_t b = 0; b < et->c.batch && st == LSE_OK; b++) {
        lse_heads_spec hs = lse_heads_spec_default();
        hs.child = lse_view_rows(et->tok, b * et->N, et->N);
        hs.parent = hs.child;
        hs.n_heads = et->c.n_heads;
        hs.base = lse_sim_dot;
        hs.w_child = et->wq;
        hs.w_parent = et->wk;
        hs.beta = 1.0 / sqrt((double)et->c.head_dim);
        hs.mask = LSE_MASK_NO_SELF;
        char name[40];
        snprintf(name, sizeof name, "attend%zu", b);
        st = lse_graph_add_heads(g, name, &hs, NULL);
    }
    if (st == LSE_OK) {
        lse_term_spec ts = lse_term_spec_default();
        ts.child = lse_view_all(et->tok);
        ts.parent = lse_view_all(et->mem);
        ts.sim = lse_sim_dot;
        ts.beta = et->c.beta_mem;
        st = lse_graph_add_lse(g, "memory", &ts, NULL);
    }
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "energy graph: %s",
                             lse_graph_errmsg(g));
    return LSE_OK;
}

/* Copy the attention and memory parameters into the energy graph. */
static void sync(lse_et *et)
{
    gsl_matrix_memcpy(lse_node_value(et->wq), lse_node_value(et->par[P_WQ]));
    gsl_matrix_memcpy(lse_node_value(et->wk), lse_node_value(et->par[P_WK]));
    gsl_matrix_memcpy(lse_node_value(et->mem),
                      lse_node_value(et->par[P_MEM]));
}

static gsl_matrix *rd(const lse_et *et)
{
    return gsl_matrix_calloc(et->R, et->D);
}

lse_status lse_et_new(const lse_et_config *cfg, lse_et **out, lse_error *err)
{
    static const char fn[] = "lse_et_new";
    if (out != NULL)
        *out = NULL;
    if (cfg == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             cfg == NULL ? "config" : "out");
    lse_status st = check_config(cfg, fn, err);
    if (st != LSE_OK)
        return st;
    lse_et *et = calloc(1, sizeof *et);
    if (et == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    et->c = *cfg;
    et->ns = cfg->side / cfg->patch;
    et->N = et->ns * et->ns;
    et->P = cfg->patch * cfg->patch;
    et->D = cfg->dim;
    et->HK = cfg->n_heads * cfg->head_dim;
    et->R = cfg->batch * et->N;
    st = build_params(et, fn, err);
    if (st == LSE_OK)
        st = build_energy(et, fn, err);
    if (st == LSE_OK) {
        gsl_matrix *x0 = rd(et);
        st = x0 != NULL ? lse_layernorm_new(x0, 1.0, NULL, cfg->eps, &et->ln,
                                            err)
                        : LSE_ENOMEM;
        gsl_matrix_free(x0);
        et->x = calloc(cfg->steps + 1, sizeof *et->x);
        et->gt = calloc(cfg->steps + 1, sizeof *et->gt);
        if (st == LSE_OK && (et->x == NULL || et->gt == NULL))
            st = LSE_ENOMEM;
        for (size_t t = 0; t <= cfg->steps && st == LSE_OK; t++)
            if ((et->x[t] = rd(et)) == NULL || (et->gt[t] = rd(et)) == NULL)
                st = LSE_ENOMEM;
        gsl_matrix **s[] = {&et->u, &et->a, &et->w, &et->gp, &et->tmp};
        for (size_t i = 0; i < 5 && st == LSE_OK; i++)
            if ((*s[i] = rd(et)) == NULL)
                st = LSE_ENOMEM;
        for (size_t i = 0; i < 3 && st == LSE_OK; i++)
            if ((et->tp[i] = gsl_matrix_alloc(
                     i < 2 ? et->HK : cfg->n_memories, et->D)) == NULL)
                st = LSE_ENOMEM;
        if (st == LSE_ENOMEM)
            lse_error_set(err, st, fn, "out of memory");
    }
    if (st == LSE_OK) {
        lse_optim_opts oo = lse_optim_opts_default();
        oo.lr = 0.01;
        if ((et->opt = lse_optim_new(et->pg, &oo)) == NULL)
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    if (st != LSE_OK) {
        lse_et_free(et);
        return st;
    }
    sync(et);
    *out = et;
    return LSE_OK;
}

lse_graph *lse_et_graph(const lse_et *et) { return et != NULL ? et->g : NULL; }
const lse_et_config *lse_et_config_of(const lse_et *et)
{
    return et != NULL ? &et->c : NULL;
}
size_t lse_et_n_tokens(const lse_et *et) { return et != NULL ? et->N : 0; }
size_t lse_et_token_pixels(const lse_et *et) { return et != NULL ? et->P : 0; }
size_t lse_et_n_params(const lse_et *et) { return et != NULL ? et->nparam : 0; }

lse_status lse_et_params_get(const lse_et *et, gsl_vector *theta,
                             lse_error *err)
{
    static const char fn[] = "lse_et_params_get";
    if (et == NULL || theta == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (theta->size != et->nparam)
        return lse_error_set(err, LSE_EDIM, fn, "theta has %zu entries, not %zu",
                             theta->size, et->nparam);
    size_t k = 0;
    for (size_t p = 0; p < NPAR; p++) {
        const gsl_matrix *m = lse_node_value(et->par[p]);
        for (size_t i = 0; i < m->size1; i++)
            for (size_t j = 0; j < m->size2; j++)
                gsl_vector_set(theta, k++, gsl_matrix_get(m, i, j));
    }
    return LSE_OK;
}

lse_status lse_et_params_set(lse_et *et, const gsl_vector *theta,
                             lse_error *err)
{
    static const char fn[] = "lse_et_params_set";
    if (et == NULL || theta == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (theta->size != et->nparam)
        return lse_error_set(err, LSE_EDIM, fn, "theta has %zu entries, not %zu",
                             theta->size, et->nparam);
    for (size_t k = 0; k < theta->size; k++)
        if (!isfinite(gsl_vector_get(theta, k)))
            return lse_error_set(err, LSE_ENONFINITE, fn,
                                 "theta entry %zu is not finite", k + 1);
    size_t k = 0;
    for (size_t p = 0; p < NPAR; p++) {
        gsl_matrix *m = lse_node_value(et->par[p]);
        for (size_t i = 0; i < m->size1; i++)
            for (size_t j = 0; j < m->size2; j++)
                gsl_matrix_set(m, i, j, gsl_vector_get(theta, k++));
    }
    sync(et);
    return LSE_OK;
}

lse_status lse_et_set_optim(lse_et *et, const lse_optim_opts *opts,
                            lse_error *err)
{
    static const char fn[] = "lse_et_set_optim";
    if (et == NULL || opts == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_status st = lse_optim_set_opts(et->opt, opts);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "%s", lse_graph_errmsg(et->pg));
    lse_optim_reset(et->opt);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Embedding, LayerNorm and its Jacobian                               */

/* column of pixel q of token t */
static size_t pixel(const lse_et *et, size_t t, size_t q)
{
    const size_t pa = et->c.patch;
    return ((t / et->ns) * pa + q / pa) * et->c.side + (t % et->ns) * pa +
           q % pa;
}

static lse_status check_images(const lse_et *et, const gsl_matrix *images,
                               const gsl_matrix *hidden, const char *fn,
                               lse_error *err)
{
    if (images == NULL || hidden == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             images == NULL ? "images" : "hidden");
    if (images->size1 != et->c.batch ||
        images->size2 != et->c.side * et->c.side ||
        hidden->size1 != et->c.batch || hidden->size2 != et->N)
        return lse_error_set(err, LSE_EDIM, fn,
                             "images %zux%zu and hidden %zux%zu, need "
                             "%zux%zu and %zux%zu",
                             images->size1, images->size2, hidden->size1,
                             hidden->size2, et->c.batch,
                             et->c.side * et->c.side, et->c.batch, et->N);
    for (size_t b = 0; b < et->c.batch; b++)
        for (size_t t = 0; t < et->N; t++) {
            const double h = gsl_matrix_get(hidden, b, t);
            if (h != 0.0 && h != 1.0)
                return lse_error_set(err, LSE_EDOM, fn,
                                     "hidden (%zu, %zu) = %g, must be 0 or 1",
                                     b + 1, t + 1, h);
            for (size_t q = 0; h == 0.0 && q < et->P; q++)
                if (!isfinite(gsl_matrix_get(images, b, pixel(et, t, q))))
                    return lse_error_set(err, LSE_ENONFINITE, fn,
                                         "image %zu pixel %zu is visible and "
                                         "not finite",
                                         b + 1, pixel(et, t, q) + 1);
        }
    return LSE_OK;
}

static void embed(const lse_et *et, const gsl_matrix *images,
                  const gsl_matrix *hidden, gsl_matrix *x)
{
    const gsl_matrix *enc = lse_node_value(et->par[P_ENC]),
                     *pos = lse_node_value(et->par[P_POS]),
                     *mask = lse_node_value(et->par[P_MASK]);
    for (size_t b = 0; b < et->c.batch; b++)
        for (size_t t = 0; t < et->N; t++) {
            const int hid = gsl_matrix_get(hidden, b, t) != 0.0;
            for (size_t j = 0; j < et->D; j++) {
                double v = gsl_matrix_get(pos, t, j);
                if (hid)
                    v += gsl_matrix_get(mask, 0, j);
                else
                    for (size_t q = 0; q < et->P; q++)
                        v += gsl_matrix_get(enc, j, q) *
                             gsl_matrix_get(images, b, pixel(et, t, q));
                gsl_matrix_set(x, b * et->N + t, j, v);
            }
        }
}

lse_status lse_et_embed(lse_et *et, const gsl_matrix *images,
                        const gsl_matrix *hidden, gsl_matrix *x,
                        lse_error *err)
{
    static const char fn[] = "lse_et_embed";
    if (et == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_status st = check_images(et, images, hidden, fn, err);
    if (st != LSE_OK)
        return st;
    if (x->size1 != et->R || x->size2 != et->D)
        return lse_error_set(err, LSE_EDIM, fn, "x is %zux%zu, need %zux%zu",
                             x->size1, x->size2, et->R, et->D);
    embed(et, images, hidden, x);
    return LSE_OK;
}

/* g = LayerNorm(x) by the library's Lagrangian (lse_layernorm: g = dL/dx),
 * with the current gamma and delta. */
static lse_status layernorm(lse_et *et, const gsl_matrix *x, gsl_matrix *g,
                            lse_error *err)
{
    lse_graph *lg = lse_layernorm_graph(et->ln);
    gsl_matrix_memcpy(lse_node_value(lse_graph_find_node(lg, "gamma")),
                      lse_node_value(et->par[P_GAMMA]));
    gsl_matrix_memcpy(lse_node_value(lse_graph_find_node(lg, "delta")),
                      lse_node_value(et->par[P_DELTA]));
    lse_status st = lse_layernorm_set_input(et->ln, x, err);
    if (st == LSE_OK)
        st = lse_layernorm_forward(et->ln, g, NULL, err);
    return st;
}

/* out = J v for the LayerNorm Jacobian at x, J = (gamma/sd)(I - 11'/D -
 * z z'/D) per row (symmetric), and when zdot is not NULL, zdot += sum
 * z . v (dg/dgamma = z). In place (out = v) is fine. */
static void ln_jvp(const lse_et *et, const gsl_matrix *x, const gsl_matrix *v,
                   gsl_matrix *out, double *zdot)
{
    const double gamma = gsl_matrix_get(lse_node_value(et->par[P_GAMMA]), 0, 0);
    const size_t D = et->D;
    for (size_t i = 0; i < x->size1; i++) {
        double m = 0, var = 0, mv = 0, zv = 0;
        for (size_t j = 0; j < D; j++)
            m += gsl_matrix_get(x, i, j);
        m /= (double)D;
        for (size_t j = 0; j < D; j++) {
            const double d = gsl_matrix_get(x, i, j) - m;
            var += d * d;
            mv += gsl_matrix_get(v, i, j);
        }
        const double sd = sqrt(var / (double)D + et->c.eps);
        mv /= (double)D;
        for (size_t j = 0; j < D; j++)
            zv += (gsl_matrix_get(x, i, j) - m) / sd * gsl_matrix_get(v, i, j);
        if (zdot != NULL)
            *zdot += zv;
        for (size_t j = 0; j < D; j++) {
            const double z = (gsl_matrix_get(x, i, j) - m) / sd;
            gsl_matrix_set(out, i, j,
                           gamma / sd *
                               (gsl_matrix_get(v, i, j) - mv - z * zv / (double)D));
        }
    }
}

/* E and dE/dg at g (copied into the token node). */
static lse_status energy_at(lse_et *et, const gsl_matrix *g, double *e,
                            const char *fn, lse_error *err)
{
    gsl_matrix_memcpy(lse_node_value(et->tok), g);
    lse_status st = lse_graph_gradient(et->g, e);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "%s", lse_graph_errmsg(et->g));
    return LSE_OK;
}

lse_status lse_et_energy(lse_et *et, const gsl_matrix *x, double *energy,
                         gsl_matrix *grad_x, lse_error *err)
{
    static const char fn[] = "lse_et_energy";
    if (et == NULL || x == NULL || energy == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (x->size1 != et->R || x->size2 != et->D ||
        (grad_x != NULL && (grad_x->size1 != et->R || grad_x->size2 != et->D)))
        return lse_error_set(err, LSE_EDIM, fn,
                             "x (and grad_x) must be %zux%zu", et->R, et->D);
    lse_status st = layernorm(et, x, et->gp, err);
    if (st == LSE_OK)
        st = energy_at(et, et->gp, energy, fn, err);
    if (st == LSE_OK && grad_x != NULL)
        ln_jvp(et, x, lse_node_grad(et->tok), grad_x, NULL);
    return st;
}

/* ------------------------------------------------------------------ */
/* Inference and learning                                              */

/* x_0 = embed, g_t = LN(x_t), x_{t+1} = x_t - alpha dE/dg(g_t); energies
 * into trace (T + 1) when not NULL. */
static lse_status forward(lse_et *et, const gsl_matrix *images,
                          const gsl_matrix *hidden, gsl_vector *trace,
                          const char *fn, lse_error *err)
{
    embed(et, images, hidden, et->x[0]);
    lse_status st = LSE_OK;
    for (size_t t = 0; t <= et->c.steps && st == LSE_OK; t++) {
        st = layernorm(et, et->x[t], et->gt[t], err);
        if (st != LSE_OK || (t == et->c.steps && trace == NULL))
            break;
        double e;
        st = energy_at(et, et->gt[t], &e, fn, err);
        if (st == LSE_OK && trace != NULL)
            gsl_vector_set(trace, t, e);
        if (st == LSE_OK && t < et->c.steps) {
            gsl_matrix_memcpy(et->x[t + 1], et->x[t]);
            gsl_matrix_memcpy(et->u, lse_node_grad(et->tok));
            gsl_matrix_scale(et->u, -et->c.alpha);
            gsl_matrix_add(et->x[t + 1], et->u);
        }
    }
    return st;
}

/* decoded pixel q of row r of g */
static double decode(const lse_et *et, const gsl_matrix *g, size_t r, size_t q)
{
    const gsl_matrix *dec = lse_node_value(et->par[P_DEC]);
    double y = gsl_matrix_get(lse_node_value(et->par[P_BDEC]), 0, q);
    for (size_t j = 0; j < et->D; j++)
        y += gsl_matrix_get(dec, q, j) * gsl_matrix_get(g, r, j);
    return y;
}

lse_status lse_et_complete(lse_et *et, const gsl_matrix *images,
                           const gsl_matrix *hidden, gsl_matrix *out,
                           gsl_vector *trace, lse_error *err)
{
    static const char fn[] = "lse_et_complete";
    if (et == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_status st = check_images(et, images, hidden, fn, err);
    if (st != LSE_OK)
        return st;
    if (out->size1 != images->size1 || out->size2 != images->size2 ||
        (trace != NULL && trace->size != et->c.steps + 1))
        return lse_error_set(err, LSE_EDIM, fn,
                             "out must be %zux%zu and trace %zu long",
                             images->size1, images->size2, et->c.steps + 1);
    st = forward(et, images, hidden, trace, fn, err);
    if (st != LSE_OK)
        return st;
    gsl_matrix_memcpy(out, images);
    for (size_t b = 0; b < et->c.batch; b++)
        for (size_t t = 0; t < et->N; t++)
            for (size_t q = 0; gsl_matrix_get(hidden, b, t) != 0.0 && q < et->P;
                 q++)
                gsl_matrix_set(out, b, pixel(et, t, q),
                               decode(et, et->gt[et->c.steps], b * et->N + t, q));
    return LSE_OK;
}

/* RMS of a matrix */
static double rms(const gsl_matrix *m)
{
    double s = 0;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            s += gsl_matrix_get(m, i, j) * gsl_matrix_get(m, i, j);
    return sqrt(s / (double)(m->size1 * m->size2));
}

/* The energy's Hessian along a at g_t by central differences of the exact
 * gradients: w = H_gg a, and lgrad[W_Q, W_K, memories] -= alpha H_theta,g a. */
static lse_status hvp(lse_et *et, size_t t, const char *fn, lse_error *err)
{
    const double ra = rms(et->a);
    gsl_matrix_set_zero(et->w);
    if (!(ra > 0.0))
        return LSE_OK;
    const double h = 1e-5 / ra;
    lse_node *th[3] = {et->wq, et->wk, et->mem};
    for (int s = 1; s >= -1; s -= 2) {
        gsl_matrix_memcpy(et->tmp, et->a);
        gsl_matrix_scale(et->tmp, s * h);
        gsl_matrix_add(et->tmp, et->gt[t]);
        double e;
        lse_status st = energy_at(et, et->tmp, &e, fn, err);
        if (st != LSE_OK)
            return st;
        gsl_matrix_memcpy(et->tmp, lse_node_grad(et->tok));
        gsl_matrix_scale(et->tmp, s / (2 * h));
        gsl_matrix_add(et->w, et->tmp);
        for (size_t k = 0; k < 3; k++) {
            gsl_matrix_memcpy(et->tp[k], lse_node_grad(th[k]));
            gsl_matrix_scale(et->tp[k], -et->c.alpha * s / (2 * h));
            gsl_matrix_add(et->lgrad[P_WQ + k], et->tp[k]);
        }
    }
    return LSE_OK;
}

/* dL/dg_T from the decoder: fills a with it (then J_T a), and the decoder,
 * gamma and delta gradients. */
static double backward_decoder(lse_et *et, const gsl_matrix *images,
                               const gsl_matrix *hidden, double scale)
{
    const gsl_matrix *gT = et->gt[et->c.steps],
                     *dec = lse_node_value(et->par[P_DEC]);
    double loss = 0;
    gsl_matrix_set_zero(et->a);
    for (size_t b = 0; b < et->c.batch; b++)
        for (size_t t = 0; t < et->N; t++) {
            if (gsl_matrix_get(hidden, b, t) == 0.0)
                continue;
            const size_t r = b * et->N + t;
            for (size_t q = 0; q < et->P; q++) {
                const double d = decode(et, gT, r, q) -
                                 gsl_matrix_get(images, b, pixel(et, t, q));
                loss += 0.5 * scale * d * d;
                const double dy = scale * d;
                *gsl_matrix_ptr(et->lgrad[P_BDEC], 0, q) += dy;
                for (size_t j = 0; j < et->D; j++) {
                    *gsl_matrix_ptr(et->lgrad[P_DEC], q, j) +=
                        dy * gsl_matrix_get(gT, r, j);
                    *gsl_matrix_ptr(et->a, r, j) +=
                        dy * gsl_matrix_get(dec, q, j);
                }
            }
        }
    return loss;
}

/* the adjoint b of some g_t: gamma, delta gradients, then a = J b (in
 * place when b == a) */
static void through_ln(lse_et *et, size_t t, const gsl_matrix *b,
                       gsl_matrix *out)
{
    for (size_t i = 0; i < et->R; i++)
        for (size_t j = 0; j < et->D; j++)
            *gsl_matrix_ptr(et->lgrad[P_DELTA], 0, j) += gsl_matrix_get(b, i, j);
    double zdot = 0;
    ln_jvp(et, et->x[t], b, out, &zdot);
    *gsl_matrix_ptr(et->lgrad[P_GAMMA], 0, 0) += zdot;
}

static void backward_embed(lse_et *et, const gsl_matrix *images,
                           const gsl_matrix *hidden)
{
    for (size_t b = 0; b < et->c.batch; b++)
        for (size_t t = 0; t < et->N; t++) {
            const int hid = gsl_matrix_get(hidden, b, t) != 0.0;
            for (size_t j = 0; j < et->D; j++) {
                const double a = gsl_matrix_get(et->a, b * et->N + t, j);
                *gsl_matrix_ptr(et->lgrad[P_POS], t, j) += a;
                if (hid)
                    *gsl_matrix_ptr(et->lgrad[P_MASK], 0, j) += a;
                else
                    for (size_t q = 0; q < et->P; q++)
                        *gsl_matrix_ptr(et->lgrad[P_ENC], j, q) +=
                            a * gsl_matrix_get(images, b, pixel(et, t, q));
            }
        }
}

/* loss and its gradient into lgrad (want_grad) */
static lse_status loss_eval(lse_et *et, const gsl_matrix *images,
                            const gsl_matrix *hidden, int want_grad,
                            double *loss, const char *fn, lse_error *err)
{
    size_t nh = 0;
    for (size_t b = 0; b < et->c.batch; b++)
        for (size_t t = 0; t < et->N; t++) {
            if (gsl_matrix_get(hidden, b, t) == 0.0)
                continue;
            nh++;
            for (size_t q = 0; q < et->P; q++)
                if (!isfinite(gsl_matrix_get(images, b, pixel(et, t, q))))
                    return lse_error_set(err, LSE_ENONFINITE, fn,
                                         "image %zu pixel %zu is hidden and "
                                         "not finite (the loss's target)",
                                         b + 1, pixel(et, t, q) + 1);
        }
    if (nh == 0)
        return lse_error_set(err, LSE_EDOM, fn, "no patch is hidden");
    lse_status st = forward(et, images, hidden, NULL, fn, err);
    if (st != LSE_OK)
        return st;
    for (size_t p = 0; p < NPAR; p++)
        gsl_matrix_set_zero(et->lgrad[p]);
    *loss = backward_decoder(et, images, hidden, 1.0 / (double)(nh * et->P));
    if (!want_grad)
        return LSE_OK;
    const size_t T = et->c.steps;
    through_ln(et, T, et->a, et->a); /* a = dL/dx_T */
    for (size_t t = T; t-- > 0;) {
        st = hvp(et, t, fn, err); /* w = H a_{t+1} at g_t */
        if (st != LSE_OK)
            return st;
        gsl_matrix_scale(et->w, -et->c.alpha); /* adjoint of g_t */
        through_ln(et, t, et->w, et->w);
        gsl_matrix_add(et->a, et->w); /* a_t = a_{t+1} - alpha J H a */
    }
    backward_embed(et, images, hidden);
    return LSE_OK;
}

lse_status lse_et_loss(lse_et *et, const gsl_matrix *images,
                       const gsl_matrix *hidden, double *loss,
                       gsl_vector *grad, lse_error *err)
{
    static const char fn[] = "lse_et_loss";
    if (et == NULL || loss == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_status st = check_images(et, images, hidden, fn, err);
    if (st != LSE_OK)
        return st;
    if (grad != NULL && grad->size != et->nparam)
        return lse_error_set(err, LSE_EDIM, fn, "grad has %zu entries, not %zu",
                             grad->size, et->nparam);
    st = loss_eval(et, images, hidden, grad != NULL, loss, fn, err);
    if (st != LSE_OK || grad == NULL)
        return st;
    size_t k = 0;
    for (size_t p = 0; p < NPAR; p++)
        for (size_t i = 0; i < et->lgrad[p]->size1; i++)
            for (size_t j = 0; j < et->lgrad[p]->size2; j++)
                gsl_vector_set(grad, k++, gsl_matrix_get(et->lgrad[p], i, j));
    return LSE_OK;
}

lse_status lse_et_train_step(lse_et *et, const gsl_matrix *images,
                             const gsl_matrix *hidden, double *loss,
                             lse_error *err)
{
    static const char fn[] = "lse_et_train_step";
    if (et == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    lse_status st = check_images(et, images, hidden, fn, err);
    double l = 0;
    if (st == LSE_OK)
        st = loss_eval(et, images, hidden, 1, &l, fn, err);
    if (st != LSE_OK)
        return st;
    et->lval = l;
    double e;
    st = lse_graph_gradient(et->pg, &e); /* the loss term: grads = lgrad */
    if (st == LSE_OK)
        st = lse_optim_step(et->opt);
    if (st != LSE_OK)
        return lse_error_set(err, st, fn, "%s", lse_graph_errmsg(et->pg));
    sync(et);
    if (loss != NULL)
        *loss = l;
    return LSE_OK;
}
