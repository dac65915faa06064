#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Spatiotemporal attention (docs/models/stattn.md), built only through the
 * public graph API:
 *
 *   nodes  x0 (T K_0, D_0) clamped data; x<l> (T K_l, D_l) free states,
 *          row t K_l + k = slot k at time t; per layer l >= 1 and kind
 *          (inter, intra, temporal) two PARAM projections W_c, W_p
 *   terms  inter<l>.t<t>  LSE project(base): children x_{l-1} at t,
 *                         parents x_l at t
 *          intra<l>.t<t>  LSE project(base): x_l at t over x_l at t,
 *                         LSE_MASK_NO_SELF (k' != k)
 *          temporal<l>    LSE project(base): x_l at t >= 1 over x_l at
 *                         t' < t, a user mask keeping k' = k and
 *                         t - w <= t'
 *          bound<l>       quadratic (bound > 0) */

#define MAXL LSE_STATTN_MAX_LAYERS

struct lse_stattn {
    lse_stattn_config c;
    lse_project_config pc;  /* borrowed by every term: lives here */
    lse_graph *g;
    lse_node *x[MAXL];
    lse_node *w[3][MAXL][2];
    lse_term **inter;       /* (L-1) T, index (l-1) T + t; NULL when off */
    lse_ode *ode;
    lse_solver *gd;
    lse_optim *optim;
    lse_node *states[MAXL];
    size_t n_states;
};

lse_stattn_config lse_stattn_config_default(void)
{
    lse_stattn_config c;
    memset(&c, 0, sizeof c);
    c.beta_inter = c.beta_intra = c.beta_temporal = 1.0;
    c.window = 1;
    c.seed = 1;
    return c;
}

void lse_stattn_free(lse_stattn *m)
{
    if (m == NULL)
        return;
    lse_ode_free(m->ode);
    lse_solver_free(m->gd);
    lse_optim_free(m->optim);
    lse_graph_free(m->g);
    free(m->inter);
    free(m);
}

lse_graph *lse_stattn_graph(const lse_stattn *m)
{
    return m != NULL ? m->g : NULL;
}

lse_node *lse_stattn_layer(const lse_stattn *m, size_t l)
{
    return m != NULL && l < m->c.n_layers ? m->x[l] : NULL;
}

lse_node *lse_stattn_proj(const lse_stattn *m, lse_stattn_kind kind, size_t l,
                          int side)
{
    if (m == NULL || (unsigned)kind > LSE_STATTN_TEMPORAL || l == 0 ||
        l >= m->c.n_layers || (side != 0 && side != 1))
        return NULL;
    return m->w[kind][l][side];
}

lse_term *lse_stattn_inter_term(const lse_stattn *m, size_t l, size_t t)
{
    if (m == NULL || m->inter == NULL || l == 0 || l >= m->c.n_layers ||
        t >= m->c.T)
        return NULL;
    return m->inter[(l - 1) * m->c.T + t];
}

static int mul_ok(size_t a, size_t b) { return b == 0 || a <= SIZE_MAX / b; }

static int bad_beta(double b) { return !(b >= 0.0) || !isfinite(b); }

static lse_status check_config(const lse_stattn_config *c, lse_error *err)
{
    static const char fn[] = "lse_stattn_new";
    const size_t L = c->n_layers;
    if (L < 2 || L > MAXL)
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: n_layers %zu, expected 2 .. %d", fn, L,
                                  MAXL);
    if (c->T == 0)
        return lse_util_set_error(err, LSE_EDOM, "%s: T is 0", fn);
    if (bad_beta(c->beta_inter) || bad_beta(c->beta_intra) ||
        bad_beta(c->beta_temporal) || bad_beta(c->bound) ||
        bad_beta(c->init_sd))
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: beta_inter %g, beta_intra %g, "
                                  "beta_temporal %g, bound %g and init_sd %g "
                                  "must be finite and >= 0",
                                  fn, c->beta_inter, c->beta_intra,
                                  c->beta_temporal, c->bound, c->init_sd);
    if (c->beta_inter == 0.0 && c->beta_intra == 0.0 &&
        c->beta_temporal == 0.0)
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: every term is off (all betas 0)", fn);
    for (size_t l = 0; l < L; l++) {
        if (c->n_slots[l] == 0 || c->dim[l] == 0)
            return lse_util_set_error(err, LSE_EDOM,
                                      "%s: layer %zu has n_slots %zu, dim %zu "
                                      "(both must be >= 1)",
                                      fn, l, c->n_slots[l], c->dim[l]);
        if (!mul_ok(c->T, c->n_slots[l]) ||
            !mul_ok(c->T * c->n_slots[l], c->dim[l]) ||
            !mul_ok(c->T * c->n_slots[l], c->T * c->n_slots[l]))
            return lse_util_set_error(err, LSE_ENOMEM,
                                      "%s: layer %zu: T %zu x %zu slots "
                                      "overflows",
                                      fn, l, c->T, c->n_slots[l]);
        if (l > 0 && c->beta_intra > 0.0 && c->n_slots[l] < 2)
            return lse_util_set_error(err, LSE_EDOM,
                                      "%s: layer %zu has 1 slot; the "
                                      "intra-layer term needs 2 (or "
                                      "beta_intra 0)",
                                      fn, l);
    }
    if (c->beta_temporal > 0.0 && (c->T < 2 || c->window == 0))
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: the temporal term needs T >= 2 and "
                                  "window >= 1 (T %zu, window %zu; or "
                                  "beta_temporal 0)",
                                  fn, c->T, c->window);
    if (c->base != NULL) {
        const unsigned all = c->base->n_param >= 32
                                 ? ~0u
                                 : (1u << c->base->n_param) - 1u;
        if ((c->base->optional_params & all) != all)
            return lse_util_set_error(err, LSE_EINVAL,
                                      "%s: base '%s' has required parameters; "
                                      "use a parameter-free base (neg-dist, "
                                      "scaled-dot, cosine ...)",
                                      fn, c->base->name);
    }
    return LSE_OK;
}

static lse_status graph_fail(lse_stattn *m, lse_status st, lse_error *err,
                             const char *fn)
{
    return lse_util_set_error(err, st, "%s: %s", fn,
                              m->g != NULL ? lse_graph_errmsg(m->g)
                                           : "out of memory");
}

/* W (k, d): the rectangular identity plus N(0, sd^2) */
static void init_proj(gsl_matrix *w, double sd, gsl_rng *r)
{
    for (size_t i = 0; i < w->size1; i++)
        for (size_t j = 0; j < w->size2; j++)
            gsl_matrix_set(w, i, j,
                           (i == j ? 1.0 : 0.0) +
                               (sd > 0.0 ? sd * gsl_ran_gaussian(r, 1.0) : 0.0));
}

static lse_status add_nodes(lse_stattn *m, gsl_rng *r)
{
    static const char *const kind[3] = {"inter", "intra", "temporal"};
    const lse_stattn_config *c = &m->c;
    char name[64];
    lse_status st = LSE_OK;
    for (size_t l = 0; l < c->n_layers && st == LSE_OK; l++) {
        snprintf(name, sizeof name, "x%zu", l);
        st = lse_graph_add_node(m->g, name, c->T * c->n_slots[l], c->dim[l],
                                l == 0 ? LSE_NODE_CLAMPED : 0, &m->x[l]);
        if (l == 0 || st != LSE_OK)
            continue;
        m->states[m->n_states++] = m->x[l];
        const double beta[3] = {c->beta_inter, c->beta_intra,
                                c->beta_temporal};
        const size_t k = c->proj_dim[l] ? c->proj_dim[l] : c->dim[l];
        for (int q = 0; q < 3 && st == LSE_OK; q++) {
            if (beta[q] == 0.0)
                continue;
            for (int side = 0; side < 2 && st == LSE_OK; side++) {
                const size_t d =
                    q == 0 && side == 0 ? c->dim[l - 1] : c->dim[l];
                snprintf(name, sizeof name, "%s%zu.%s", kind[q], l,
                         side ? "Wp" : "Wc");
                st = lse_graph_add_node(m->g, name, k, d, LSE_NODE_PARAM,
                                        &m->w[q][l][side]);
                if (st == LSE_OK)
                    init_proj(lse_node_value(m->w[q][l][side]), c->init_sd, r);
            }
        }
    }
    return st;
}

static lse_term_spec proj_spec(lse_stattn *m, int q, size_t l, double beta,
                               lse_node **params)
{
    lse_term_spec s = lse_term_spec_default();
    s.sim = lse_sim_project;
    s.config = &m->pc;
    params[0] = m->w[q][l][0];
    params[1] = m->w[q][l][1];
    for (size_t i = 2; i < 2 + LSE_PROJECT_MAX_BASE_PARAM; i++)
        params[i] = NULL;
    s.param = params;
    s.beta = beta;
    return s;
}

/* the temporal mask: child (t, k), t >= 1, sees parent (t', k), t - w <= t' < t */
static lse_status add_temporal(lse_stattn *m, size_t l)
{
    const lse_stattn_config *c = &m->c;
    const size_t K = c->n_slots[l], n = (c->T - 1) * K;
    gsl_matrix *mask = gsl_matrix_calloc(n, n);
    if (mask == NULL)
        return LSE_ENOMEM;
    for (size_t t = 1; t < c->T; t++)
        for (size_t tp = t > c->window ? t - c->window : 0; tp < t; tp++)
            for (size_t k = 0; k < K; k++)
                gsl_matrix_set(mask, (t - 1) * K + k, tp * K + k, 1.0);
    lse_node *params[2 + LSE_PROJECT_MAX_BASE_PARAM];
    lse_term_spec s = proj_spec(m, 2, l, c->beta_temporal, params);
    s.child = lse_view_rows(m->x[l], K, n);
    s.parent = lse_view_rows(m->x[l], 0, n);
    s.user_mask = mask;
    char name[48];
    snprintf(name, sizeof name, "temporal%zu", l);
    const lse_status st = lse_graph_add_lse(m->g, name, &s, NULL);
    gsl_matrix_free(mask);
    return st;
}

static lse_status add_terms(lse_stattn *m)
{
    const lse_stattn_config *c = &m->c;
    lse_node *params[2 + LSE_PROJECT_MAX_BASE_PARAM];
    char name[64];
    lse_status st = LSE_OK;
    for (size_t l = 1; l < c->n_layers && st == LSE_OK; l++) {
        const size_t Kc = c->n_slots[l - 1], K = c->n_slots[l];
        for (size_t t = 0; t < c->T && st == LSE_OK; t++) {
            if (c->beta_inter > 0.0) {
                lse_term_spec s = proj_spec(m, 0, l, c->beta_inter, params);
                s.child = lse_view_rows(m->x[l - 1], t * Kc, Kc);
                s.parent = lse_view_rows(m->x[l], t * K, K);
                snprintf(name, sizeof name, "inter%zu.t%zu", l, t);
                st = lse_graph_add_lse(m->g, name, &s,
                                       &m->inter[(l - 1) * c->T + t]);
            }
            if (c->beta_intra > 0.0 && st == LSE_OK) {
                lse_term_spec s = proj_spec(m, 1, l, c->beta_intra, params);
                s.child = s.parent = lse_view_rows(m->x[l], t * K, K);
                s.mask = LSE_MASK_NO_SELF;
                snprintf(name, sizeof name, "intra%zu.t%zu", l, t);
                st = lse_graph_add_lse(m->g, name, &s, NULL);
            }
        }
        if (c->beta_temporal > 0.0 && st == LSE_OK)
            st = add_temporal(m, l);
        if (c->bound > 0.0 && st == LSE_OK) {
            const lse_quadratic_config qc = {.scale = c->bound};
            lse_view v = lse_view_all(m->x[l]);
            snprintf(name, sizeof name, "bound%zu", l);
            st = lse_graph_add_custom(m->g, name, lse_custom_quadratic, &qc,
                                      &v, 1, NULL);
        }
    }
    return st;
}

static lse_status make_solvers(lse_stattn *m)
{
    m->ode = lse_ode_new(m->g);
    m->gd = lse_solver_new(m->g, lse_solver_gd);
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.01;
    m->optim = lse_optim_new(m->g, &oo);
    if (m->ode == NULL || m->gd == NULL || m->optim == NULL)
        return LSE_ENOMEM;
    lse_status st = lse_ode_set_nodes(m->ode, m->states, m->n_states);
    if (st == LSE_OK)
        st = lse_solver_set_nodes(m->gd, m->states, m->n_states);
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 1e-10;
    if (st == LSE_OK)
        st = lse_solver_set_opts(m->gd, &so);
    return st;
}

lse_status lse_stattn_new(const lse_stattn_config *config, lse_stattn **out,
                          lse_error *err)
{
    static const char fn[] = "lse_stattn_new";
    if (config == NULL || out == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    *out = NULL;
    lse_status st = check_config(config, err);
    if (st != LSE_OK)
        return st;
    lse_stattn *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    m->c = *config;
    m->pc.base = config->base != NULL ? config->base : lse_sim_neg_dist;
    m->pc.base_config = NULL;
    m->g = lse_graph_new();
    m->inter = calloc((config->n_layers - 1) * config->T, sizeof *m->inter);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (m->g == NULL || m->inter == NULL || r == NULL) {
        gsl_rng_free(r);
        lse_stattn_free(m);
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    }
    gsl_rng_set(r, (unsigned long)config->seed);
    st = add_nodes(m, r);
    gsl_rng_free(r);
    if (st == LSE_OK)
        st = add_terms(m);
    if (st == LSE_OK)
        st = make_solvers(m);
    if (st != LSE_OK) {
        graph_fail(m, st, err, fn);
        lse_stattn_free(m);
        return st;
    }
    *out = m;
    return LSE_OK;
}

lse_status lse_stattn_set_data(lse_stattn *m, const gsl_matrix *x,
                               lse_error *err)
{
    static const char fn[] = "lse_stattn_set_data";
    if (m == NULL || x == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    const size_t n = m->c.T * m->c.n_slots[0], d = m->c.dim[0];
    if (x->size1 != n || x->size2 != d)
        return lse_util_set_error(err, LSE_EDIM,
                                  "%s: data is (%zu, %zu), expected (T K_0, "
                                  "D_0) = (%zu, %zu)",
                                  fn, x->size1, x->size2, n, d);
    const lse_status st = lse_node_set_value(m->x[0], x);
    return st == LSE_OK ? st : graph_fail(m, st, err, fn);
}

lse_status lse_stattn_init_slots(lse_stattn *m, double sd, uint64_t seed,
                                 lse_error *err)
{
    static const char fn[] = "lse_stattn_init_slots";
    if (m == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    if (bad_beta(sd))
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: sd %g must be finite and >= 0", fn, sd);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL)
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    gsl_rng_set(r, (unsigned long)seed);
    for (size_t l = 1; l < m->c.n_layers; l++) {
        gsl_matrix *x = lse_node_value(m->x[l]);
        const size_t K = m->c.n_slots[l];
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < x->size2; j++) {
                const double v = sd * gsl_ran_gaussian(r, 1.0);
                for (size_t t = 0; t < m->c.T; t++)
                    gsl_matrix_set(x, t * K + k, j, v);
            }
    }
    gsl_rng_free(r);
    return LSE_OK;
}

lse_status lse_stattn_set_ode_opts(lse_stattn *m, const lse_ode_opts *opts,
                                   lse_error *err)
{
    static const char fn[] = "lse_stattn_set_ode_opts";
    if (m == NULL || opts == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    const lse_status st = lse_ode_set_opts(m->ode, opts);
    return st == LSE_OK ? st : graph_fail(m, st, err, fn);
}

lse_status lse_stattn_set_optim(lse_stattn *m, const lse_optim_opts *opts,
                                lse_error *err)
{
    static const char fn[] = "lse_stattn_set_optim";
    if (m == NULL || opts == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    const lse_status st = lse_optim_set_opts(m->optim, opts);
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    lse_optim_reset(m->optim);
    return LSE_OK;
}

lse_status lse_stattn_energy(lse_stattn *m, double *energy, lse_error *err)
{
    static const char fn[] = "lse_stattn_energy";
    if (m == NULL || energy == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    const lse_status st = lse_graph_energy(m->g, energy);
    return st == LSE_OK ? st : graph_fail(m, st, err, fn);
}

typedef struct monitor {
    double prev, max_increase;
} monitor;

static int watch(const lse_solver *s, void *user)
{
    monitor *w = user;
    const double e = lse_solver_energy(s);
    if (e - w->prev > w->max_increase)
        w->max_increase = e - w->prev;
    w->prev = e;
    return 0;
}

lse_status lse_stattn_infer(lse_stattn *m, lse_stattn_solver solver,
                            size_t max_iter, lse_stattn_info *info,
                            lse_error *err)
{
    static const char fn[] = "lse_stattn_infer";
    if (m == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    if (solver != LSE_STATTN_ODE && solver != LSE_STATTN_GD)
        return lse_util_set_error(err, LSE_EINVAL, "%s: unknown solver %d", fn,
                                  (int)solver);
    double e0;
    lse_status st = lse_graph_energy(m->g, &e0);
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    lse_solver_result res;
    lse_stattn_info in = {0, e0, e0, -INFINITY};
    if (solver == LSE_STATTN_ODE) {
        st = lse_ode_run(m->ode, &res);
        in.n_steps = lse_ode_n_accepted(m->ode);
        in.max_increase = lse_ode_max_increase(m->ode);
    } else {
        monitor w = {e0, -INFINITY};
        st = lse_solver_run(m->gd, max_iter, watch, &w, &res);
        in.n_steps = res.n_iter;
        in.max_increase = w.max_increase;
    }
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    st = lse_graph_energy(m->g, &in.energy); /* softmaxes at the result */
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    if (info != NULL)
        *info = in;
    return LSE_OK;
}

lse_status lse_stattn_learn_step(lse_stattn *m, double *energy,
                                 lse_stattn_info *info, lse_error *err)
{
    static const char fn[] = "lse_stattn_learn_step";
    if (m == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    lse_status st = lse_stattn_infer(m, LSE_STATTN_ODE, 0, info, err);
    if (st != LSE_OK)
        return st;
    double e;
    st = lse_graph_gradient(m->g, &e);
    if (st == LSE_OK)
        st = lse_optim_step(m->optim);
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    if (energy != NULL)
        *energy = e;
    return LSE_OK;
}

lse_status lse_stattn_assign(lse_stattn *m, size_t l, size_t t,
                             size_t *labels, lse_error *err)
{
    static const char fn[] = "lse_stattn_assign";
    if (m == NULL || labels == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    if (l == 0 || l >= m->c.n_layers || t >= m->c.T)
        return lse_util_set_error(err, LSE_ERANGE,
                                  "%s: layer %zu, time %zu outside 1 .. %zu, "
                                  "0 .. %zu",
                                  fn, l, t, m->c.n_layers - 1, m->c.T - 1);
    if (m->c.beta_inter == 0.0)
        return lse_util_set_error(err, LSE_EINVAL,
                                  "%s: the inter-layer term is off", fn);
    double e;
    const lse_status st = lse_graph_energy(m->g, &e);
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    const gsl_matrix *a = lse_term_softmax(m->inter[(l - 1) * m->c.T + t]);
    for (size_t i = 0; i < a->size1; i++) {
        size_t best = 0;
        for (size_t k = 1; k < a->size2; k++)
            if (gsl_matrix_get(a, i, k) > gsl_matrix_get(a, i, best))
                best = k;
        labels[i] = best;
    }
    return LSE_OK;
}
