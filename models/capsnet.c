#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Two-level capsules with energy-based routing (docs/models/capsules.md),
 * built only through the public graph API:
 *
 *   nodes  children (B N, dc) clamped; parents (B S, dp) free state;
 *          W (N S, dp dc) PARAM, row i S + j = W_ij row-major
 *   terms  route<b>  LSE, sim lse_capsnet_sim, beta (one per example b):
 *                    -sum_i (1/beta) log sum_j exp(beta (W_ij u_i) . v_j)
 *          bound     quadratic, scale 1: 1/2 ||V||^2
 *          readout   custom (off while routing): mean cross-entropy of
 *                    z_j = 1/2 ||sum_i c_ij W_ij u_i||^2, c fixed
 *
 *   dE/dv_j = v_j - sum_i c_ij W_ij u_i,  c_ij = softmax_j(beta S_ij). */

/* ------------------------------------------------------------------ */
/* The capsule similarity                                              */

static lse_status caps_check(const lse_sim_shape *sh, const void *config,
                             char *msg, size_t len)
{
    (void)config;
    if (sh->n_param != 1 || sh->param_rows[0] == 0 ||
        sh->param_rows[0] / sh->n_parent != sh->n_child ||
        sh->param_rows[0] % sh->n_parent != 0 ||
        sh->param_cols[0] / sh->d_child != sh->d_parent ||
        sh->param_cols[0] % sh->d_child != 0) {
        snprintf(msg, len,
                 "capsule: W must be (n_child n_parent, d_parent d_child) = "
                 "(%zu x %zu, %zu x %zu), got (%zu, %zu)",
                 sh->n_child, sh->n_parent, sh->d_parent, sh->d_child,
                 sh->n_param ? sh->param_rows[0] : 0,
                 sh->n_param ? sh->param_cols[0] : 0);
        return LSE_EDIM;
    }
    if (sh->d_parent > 64) {
        snprintf(msg, len, "capsule: d_parent %zu exceeds 64", sh->d_parent);
        return LSE_EDIM;
    }
    return LSE_OK;
}

static lse_status caps_work_new(const lse_sim_shape *sh, const void *config,
                                void **out)
{
    (void)sh;
    (void)config;
    *out = NULL;
    return LSE_OK;
}

static void caps_work_free(void *w) { (void)w; }

/* uhat = W_ij u (dp) */
static void predict(const gsl_matrix *W, size_t row, const double *u,
                    size_t dc, size_t dp, double *uhat)
{
    const double *w = gsl_matrix_const_ptr(W, row, 0);
    for (size_t a = 0; a < dp; a++) {
        double s = 0.0;
        for (size_t b = 0; b < dc; b++)
            s += w[a * dc + b] * u[b];
        uhat[a] = s;
    }
}

static lse_status caps_eval(const lse_sim_args *a, gsl_matrix *s)
{
    const gsl_matrix *W = a->param[0];
    const size_t S = a->parent->size1, dp = a->parent->size2;
    const size_t dc = a->child->size2;
    double uhat[64];
    if (dp > sizeof uhat / sizeof uhat[0])
        return LSE_EDIM;
    for (size_t r = 0; r < a->child->size1; r++) {
        const size_t i = a->child_offset + r;
        const double *u = gsl_matrix_const_ptr(a->child, r, 0);
        for (size_t j = 0; j < S; j++) {
            predict(W, i * S + j, u, dc, dp, uhat);
            const double *v = gsl_matrix_const_ptr(a->parent, j, 0);
            double d = 0.0;
            for (size_t k = 0; k < dp; k++)
                d += uhat[k] * v[k];
            gsl_matrix_set(s, r, j, d);
        }
    }
    return LSE_OK;
}

static lse_status caps_grad(const lse_sim_args *a, const gsl_matrix *g,
                            const lse_sim_grads *out)
{
    const gsl_matrix *W = a->param[0];
    const size_t S = a->parent->size1, dp = a->parent->size2;
    const size_t dc = a->child->size2;
    gsl_matrix *gW = out->param != NULL ? out->param[0] : NULL;
    double uhat[64];
    if (dp > sizeof uhat / sizeof uhat[0])
        return LSE_EDIM;
    for (size_t r = 0; r < a->child->size1; r++) {
        const size_t i = a->child_offset + r;
        const double *u = gsl_matrix_const_ptr(a->child, r, 0);
        for (size_t j = 0; j < S; j++) {
            const double gij = gsl_matrix_get(g, r, j);
            if (gij == 0.0)
                continue;
            const double *v = gsl_matrix_const_ptr(a->parent, j, 0);
            const double *w = gsl_matrix_const_ptr(W, i * S + j, 0);
            if (out->parent != NULL) {
                predict(W, i * S + j, u, dc, dp, uhat);
                double *gp = gsl_matrix_ptr(out->parent, j, 0);
                for (size_t k = 0; k < dp; k++)
                    gp[k] += gij * uhat[k];
            }
            if (out->child != NULL) {
                double *gc = gsl_matrix_ptr(out->child, r, 0);
                for (size_t k = 0; k < dp; k++)
                    for (size_t b = 0; b < dc; b++)
                        gc[b] += gij * w[k * dc + b] * v[k];
            }
            if (gW != NULL) {
                double *gw = gsl_matrix_ptr(gW, i * S + j, 0);
                for (size_t k = 0; k < dp; k++)
                    for (size_t b = 0; b < dc; b++)
                        gw[k * dc + b] += gij * v[k] * u[b];
            }
        }
    }
    return LSE_OK;
}

static const char *const caps_param_names[] = {"W"};

static const lse_sim_type caps_type = {
    .name = "capsule",
    .n_param = 1,
    .param_names = caps_param_names,
    .optional_params = 0,
    .config_size = 0,
    .config_default = NULL,
    .flags = 0,
    .check = caps_check,
    .work_new = caps_work_new,
    .work_free = caps_work_free,
    .prepare = NULL,
    .eval = caps_eval,
    .grad = caps_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = NULL,
    .stats_exact = NULL,
};

const lse_sim_type *const lse_capsnet_sim = &caps_type;

/* ------------------------------------------------------------------ */
/* The readout: cross-entropy with the routing coefficients fixed      */

typedef struct readout_cfg {
    size_t N, S, dc, dp, B;
    const gsl_matrix *coup; /* (B N, S) routing coefficients */
    const size_t *labels;   /* B, SIZE_MAX: no label */
    double *v;              /* (S, dp) scratch */
    double *p;              /* S scratch */
} readout_cfg;

static lse_status readout_check(const gsl_matrix *const *value, size_t n_view,
                                const void *config, char *msg, size_t len)
{
    const readout_cfg *c = config;
    if (n_view != 2 || value[0]->size1 != c->N * c->S ||
        value[0]->size2 != c->dp * c->dc || value[1]->size1 != c->B * c->N ||
        value[1]->size2 != c->dc) {
        snprintf(msg, len, "capsule readout: views must be W and children");
        return LSE_EDIM;
    }
    return LSE_OK;
}

/* energy, and (grad non-NULL) the gradient on W */
static lse_status readout_eval(const gsl_matrix *const *value,
                               const readout_cfg *c, gsl_matrix *gW,
                               double *energy)
{
    const gsl_matrix *W = value[0], *U = value[1];
    const size_t N = c->N, S = c->S, dc = c->dc, dp = c->dp;
    size_t n_lab = 0;
    for (size_t b = 0; b < c->B; b++)
        n_lab += c->labels[b] != SIZE_MAX;
    double total = 0.0;
    double uhat[64];
    if (dp > sizeof uhat / sizeof uhat[0])
        return LSE_EDIM;
    for (size_t b = 0; b < c->B; b++) {
        const size_t y = c->labels[b];
        if (y == SIZE_MAX)
            continue;
        memset(c->v, 0, S * dp * sizeof(double));
        for (size_t i = 0; i < N; i++) {
            const double *u = gsl_matrix_const_ptr(U, b * N + i, 0);
            for (size_t j = 0; j < S; j++) {
                const double cij = gsl_matrix_get(c->coup, b * N + i, j);
                predict(W, i * S + j, u, dc, dp, uhat);
                for (size_t k = 0; k < dp; k++)
                    c->v[j * dp + k] += cij * uhat[k];
            }
        }
        double zmax = -INFINITY;
        for (size_t j = 0; j < S; j++) {
            double z = 0.0;
            for (size_t k = 0; k < dp; k++)
                z += 0.5 * c->v[j * dp + k] * c->v[j * dp + k];
            c->p[j] = z;
            zmax = fmax(zmax, z);
        }
        const double zy = c->p[y];
        double sum = 0.0;
        for (size_t j = 0; j < S; j++) {
            c->p[j] = exp(c->p[j] - zmax);
            sum += c->p[j];
        }
        total += (zmax + log(sum) - zy) / (double)n_lab;
        if (gW == NULL)
            continue;
        for (size_t j = 0; j < S; j++) {
            /* dL/dz_j = (p_j - [j = y]) / n_lab; dz_j/dW_ij = c_ij v_j u_i' */
            const double dz = (c->p[j] / sum - (j == y)) / (double)n_lab;
            for (size_t i = 0; i < N; i++) {
                const double f = dz * gsl_matrix_get(c->coup, b * N + i, j);
                const double *u = gsl_matrix_const_ptr(U, b * N + i, 0);
                double *gw = gsl_matrix_ptr(gW, i * S + j, 0);
                for (size_t k = 0; k < dp; k++)
                    for (size_t q = 0; q < dc; q++)
                        gw[k * dc + q] += f * c->v[j * dp + k] * u[q];
            }
        }
    }
    *energy = total;
    return isfinite(total) ? LSE_OK : LSE_ENONFINITE;
}

static lse_status readout_energy(const gsl_matrix *const *value, size_t n_view,
                                 const void *config, double *energy)
{
    (void)n_view;
    return readout_eval(value, config, NULL, energy);
}

static lse_status readout_grad(const gsl_matrix *const *value, size_t n_view,
                               const void *config, gsl_matrix *const *grad,
                               double *energy)
{
    (void)n_view;
    return readout_eval(value, config, grad[0], energy);
}

static const lse_custom_type readout_type = {
    .name = "capsule-readout",
    .config_size = 0,
    .check = readout_check,
    .energy = readout_energy,
    .grad = readout_grad,
    .describe = NULL,
};

/* ------------------------------------------------------------------ */
/* The network                                                         */

struct lse_capsnet {
    lse_capsnet_opts o;
    lse_graph *g;
    lse_node *children, *parents, *W;
    lse_term **route; /* B */
    lse_term *bound, *readout;
    lse_solver *solver;
    lse_optim *optim;
    gsl_matrix *coup;  /* (B N, S) */
    size_t *labels;    /* B */
    readout_cfg cfg;
    lse_error last;
};

lse_capsnet_opts lse_capsnet_opts_default(void)
{
    lse_capsnet_opts o;
    memset(&o, 0, sizeof o);
    o.batch = 50;
    o.beta = 1.0;
    o.init_sd = 0.1;
    o.seed = 1;
    o.route_iter = 50;
    o.route_tol = 1e-8;
    return o;
}

void lse_capsnet_free(lse_capsnet *c)
{
    if (c == NULL)
        return;
    lse_solver_free(c->solver);
    lse_optim_free(c->optim);
    lse_graph_free(c->g);
    gsl_matrix_free(c->coup);
    free(c->route);
    free(c->labels);
    free(c->cfg.v);
    free(c->cfg.p);
    free(c);
}

const char *lse_capsnet_errmsg(const lse_capsnet *c)
{
    return c != NULL ? c->last.message : "";
}

lse_graph *lse_capsnet_graph(const lse_capsnet *c)
{
    return c != NULL ? c->g : NULL;
}

gsl_matrix *lse_capsnet_weights(const lse_capsnet *c)
{
    return c != NULL ? lse_node_value(c->W) : NULL;
}

size_t lse_capsnet_n_params(const lse_capsnet *c)
{
    return c != NULL ? c->o.n_child * c->o.n_parent * c->o.d_parent *
                           c->o.d_child
                     : 0;
}

static lse_status fail_graph(lse_capsnet *c, lse_status st, const char *fn)
{
    const char *msg = lse_graph_errmsg(c->g);
    return lse_error_set(&c->last, st, fn, "%s",
                         msg[0] != '\0' ? msg : lse_strerror(st));
}

static int mul_ok(size_t a, size_t b) { return b == 0 || a <= SIZE_MAX / b; }

static lse_status build(lse_capsnet *c)
{
    const lse_capsnet_opts *o = &c->o;
    const size_t N = o->n_child, S = o->n_parent, B = o->batch;
    c->g = lse_graph_new();
    c->route = calloc(B, sizeof *c->route);
    c->labels = calloc(B, sizeof *c->labels);
    c->cfg.v = calloc(S * o->d_parent, sizeof(double));
    c->cfg.p = calloc(S, sizeof(double));
    if (c->g == NULL || c->route == NULL || c->labels == NULL ||
        c->cfg.v == NULL || c->cfg.p == NULL)
        return LSE_ENOMEM;
    c->coup = gsl_matrix_calloc(B * N, S);
    if (c->coup == NULL)
        return LSE_ENOMEM;
    lse_status st = lse_graph_add_node(c->g, "children", B * N, o->d_child,
                                       LSE_NODE_CLAMPED, &c->children);
    if (st == LSE_OK)
        st = lse_graph_add_node(c->g, "parents", B * S, o->d_parent, 0,
                                &c->parents);
    if (st == LSE_OK)
        st = lse_graph_add_node(c->g, "W", N * S, o->d_parent * o->d_child,
                                LSE_NODE_PARAM, &c->W);
    for (size_t b = 0; st == LSE_OK && b < B; b++) {
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_rows(c->children, b * N, N);
        spec.parent = lse_view_rows(c->parents, b * S, S);
        spec.sim = lse_capsnet_sim;
        lse_node *params[1] = {c->W};
        spec.param = params;
        spec.beta = o->beta;
        char name[32];
        snprintf(name, sizeof name, "route%zu", b);
        st = lse_graph_add_lse(c->g, name, &spec, &c->route[b]);
    }
    if (st == LSE_OK) {
        lse_view v = lse_view_all(c->parents);
        st = lse_graph_add_custom(c->g, "bound", lse_custom_quadratic, NULL,
                                  &v, 1, &c->bound);
    }
    if (st == LSE_OK) {
        c->cfg = (readout_cfg){N, S, o->d_child, o->d_parent, B, c->coup,
                               c->labels, c->cfg.v, c->cfg.p};
        lse_view views[2] = {lse_view_all(c->W), lse_view_all(c->children)};
        st = lse_graph_add_custom(c->g, "readout", &readout_type, &c->cfg,
                                  views, 2, &c->readout);
    }
    if (st != LSE_OK)
        return st;
    lse_term_set_enabled(c->readout, 0);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (rng == NULL)
        return LSE_ENOMEM;
    gsl_rng_set(rng, (unsigned long)o->seed);
    gsl_matrix *W = lse_node_value(c->W);
    for (size_t i = 0; i < W->size1; i++)
        for (size_t j = 0; j < W->size2; j++)
            gsl_matrix_set(W, i, j, o->init_sd * gsl_ran_gaussian(rng, 1.0));
    gsl_rng_free(rng);
    c->solver = lse_solver_new(c->g, lse_solver_gd);
    if (c->solver == NULL)
        return LSE_ENOMEM;
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = o->route_tol;
    st = lse_solver_set_opts(c->solver, &so);
    lse_node *nodes[1] = {c->parents};
    if (st == LSE_OK)
        st = lse_solver_set_nodes(c->solver, nodes, 1);
    if (st != LSE_OK)
        return st;
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = 0.01;
    c->optim = lse_optim_new(c->g, &oo);
    if (c->optim == NULL)
        return LSE_ENOMEM;
    nodes[0] = c->W;
    return lse_optim_set_nodes(c->optim, nodes, 1);
}

lse_status lse_capsnet_new(const lse_capsnet_opts *opts, lse_capsnet **out,
                           lse_error *err)
{
    static const char fn[] = "lse_capsnet_new";
    if (out != NULL)
        *out = NULL;
    if (opts == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const lse_capsnet_opts *o = opts;
    if (o->n_child == 0 || o->d_child == 0 || o->d_parent == 0 ||
        o->n_parent < 2 || o->batch == 0)
        return lse_error_set(err, LSE_EDOM, fn,
                             "need n_child, d_child, d_parent, batch >= 1 and "
                             "n_parent >= 2 (got %zu, %zu, %zu, %zu, %zu)",
                             o->n_child, o->d_child, o->d_parent, o->batch,
                             o->n_parent);
    if (o->d_parent > 64)
        return lse_error_set(err, LSE_EDOM, fn,
                             "d_parent %zu exceeds 64", o->d_parent);
    if (!(isfinite(o->beta) && o->beta > 0.0) ||
        !(isfinite(o->init_sd) && o->init_sd >= 0.0) ||
        !(isfinite(o->route_tol) && o->route_tol >= 0.0) ||
        o->route_iter == 0)
        return lse_error_set(err, LSE_EDOM, fn,
                             "beta must be finite and > 0, init_sd and "
                             "route_tol finite and >= 0, route_iter >= 1");
    if (!mul_ok(o->n_child, o->n_parent) ||
        !mul_ok(o->n_child * o->n_parent, o->d_parent * o->d_child) ||
        !mul_ok(o->d_parent, o->d_child) || !mul_ok(o->batch, o->n_child) ||
        !mul_ok(o->batch, o->n_parent) ||
        !mul_ok(o->batch * o->n_child, o->n_parent))
        return lse_error_set(err, LSE_ENOMEM, fn, "sizes overflow");
    lse_capsnet *c = calloc(1, sizeof *c);
    if (c == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    c->o = *o;
    lse_status st = build(c);
    if (st != LSE_OK) {
        if (c->g != NULL && lse_graph_errmsg(c->g)[0] != '\0')
            lse_error_set(err, st, fn, "%s", lse_graph_errmsg(c->g));
        else
            lse_error_set(err, st, fn, "%s", lse_strerror(st));
        lse_capsnet_free(c);
        return st;
    }
    *out = c;
    return LSE_OK;
}

static lse_status lse_capsnet_set_optim_impl(lse_capsnet *c,
                                             const lse_optim_opts *opts)
{
    if (c == NULL || opts == NULL)
        return LSE_EFAULT;
    lse_status st = lse_optim_set_opts(c->optim, opts);
    if (st != LSE_OK)
        return fail_graph(c, st, "lse_capsnet_set_optim");
    lse_optim_reset(c->optim);
    return LSE_OK;
}

lse_status lse_capsnet_set_optim(lse_capsnet *c, const lse_optim_opts *opts,
                                 lse_error *err)
{
    return lse_util_report(err, lse_capsnet_set_optim_impl(c, opts),
                           "lse_capsnet_set_optim", lse_capsnet_errmsg(c));
}

static lse_status check_shape(lse_capsnet *c, const gsl_matrix *m,
                              size_t rows, size_t cols, const char *what,
                              const char *fn)
{
    if (m == NULL)
        return lse_error_set(&c->last, LSE_EFAULT, fn, "%s is NULL", what);
    if (m->size1 != rows || m->size2 != cols)
        return lse_error_set(&c->last, LSE_EDIM, fn,
                             "%s is (%zu, %zu), expected (%zu, %zu)", what,
                             m->size1, m->size2, rows, cols);
    return LSE_OK;
}

/* E-terms on, readout off (or the reverse) */
static void routing_mode(lse_capsnet *c, int on)
{
    for (size_t b = 0; b < c->o.batch; b++)
        lse_term_set_enabled(c->route[b], on);
    lse_term_set_enabled(c->bound, on);
    lse_term_set_enabled(c->readout, !on);
}

typedef struct monitor {
    double prev;
    size_t n_increase;
    double max_increase;
} monitor;

static int watch(const lse_solver *s, void *user)
{
    monitor *m = user;
    const double e = lse_solver_energy(s);
    const double rise = e - m->prev;
    if (rise > m->max_increase)
        m->max_increase = rise;
    if (rise > 1e-12 * fmax(1.0, fabs(e)))
        m->n_increase++;
    m->prev = e;
    return 0;
}

static lse_status lse_capsnet_route_impl(lse_capsnet *c,
                                         const gsl_matrix *children,
                                         gsl_matrix *parents,
                                         lse_capsnet_route_info *info)
{
    static const char fn[] = "lse_capsnet_route";
    if (c == NULL)
        return LSE_EFAULT;
    const size_t B = c->o.batch;
    lse_status st = check_shape(c, children, B * c->o.n_child, c->o.d_child,
                                "children", fn);
    if (st == LSE_OK && parents != NULL)
        st = check_shape(c, parents, B * c->o.n_parent, c->o.d_parent,
                         "parents", fn);
    if (st != LSE_OK)
        return st;
    st = lse_node_set_value(c->children, children);
    if (st != LSE_OK)
        return fail_graph(c, st, fn);
    gsl_matrix_set_zero(lse_node_value(c->parents));
    routing_mode(c, 1);
    monitor m = {0.0, 0, -INFINITY};
    double e0;
    st = lse_graph_energy(c->g, &e0);
    if (st != LSE_OK)
        return fail_graph(c, st, fn);
    m.prev = e0;
    lse_solver_result res;
    st = lse_solver_run(c->solver, c->o.route_iter, watch, &m, &res);
    if (st != LSE_OK)
        return fail_graph(c, st, fn);
    if (parents != NULL)
        gsl_matrix_memcpy(parents, lse_node_value(c->parents));
    for (size_t b = 0; b < B; b++) {
        gsl_matrix_view dst = gsl_matrix_submatrix(c->coup, b * c->o.n_child,
                                                   0, c->o.n_child,
                                                   c->o.n_parent);
        gsl_matrix_memcpy(&dst.matrix, lse_term_softmax(c->route[b]));
    }
    if (info != NULL) {
        info->n_iter = res.n_iter;
        info->energy_initial = e0;
        info->energy = res.energy;
        info->n_increase = m.n_increase;
        info->max_increase = m.max_increase;
    }
    return LSE_OK;
}

lse_status lse_capsnet_route(lse_capsnet *c, const gsl_matrix *children,
                             gsl_matrix *parents, lse_capsnet_route_info *info,
                             lse_error *err)
{
    return lse_util_report(err,
                           lse_capsnet_route_impl(c, children, parents, info),
                           "lse_capsnet_route", lse_capsnet_errmsg(c));
}

const gsl_matrix *lse_capsnet_coupling(const lse_capsnet *c, size_t b)
{
    if (c == NULL || b >= c->o.batch)
        return NULL;
    return lse_term_softmax(c->route[b]);
}

static lse_status lse_capsnet_energy_impl(lse_capsnet *c,
                                          const gsl_matrix *children,
                                          const gsl_matrix *parents,
                                          double *energy)
{
    static const char fn[] = "lse_capsnet_energy";
    if (c == NULL || energy == NULL)
        return LSE_EFAULT;
    const size_t B = c->o.batch;
    lse_status st = check_shape(c, children, B * c->o.n_child, c->o.d_child,
                                "children", fn);
    if (st == LSE_OK)
        st = check_shape(c, parents, B * c->o.n_parent, c->o.d_parent,
                         "parents", fn);
    if (st != LSE_OK)
        return st;
    st = lse_node_set_value(c->children, children);
    if (st == LSE_OK)
        st = lse_node_set_value(c->parents, parents);
    routing_mode(c, 1);
    if (st == LSE_OK)
        st = lse_graph_energy(c->g, energy);
    return st == LSE_OK ? LSE_OK : fail_graph(c, st, fn);
}

lse_status lse_capsnet_energy(lse_capsnet *c, const gsl_matrix *children,
                              const gsl_matrix *parents, double *energy,
                              lse_error *err)
{
    return lse_util_report(
        err, lse_capsnet_energy_impl(c, children, parents, energy),
        "lse_capsnet_energy", lse_capsnet_errmsg(c));
}

static lse_status lse_capsnet_train_step_impl(lse_capsnet *c,
                                              const gsl_matrix *children,
                                              const size_t *labels,
                                              double *loss)
{
    static const char fn[] = "lse_capsnet_train_step";
    if (c == NULL)
        return LSE_EFAULT;
    if (labels == NULL)
        return lse_error_set(&c->last, LSE_EFAULT, fn, "labels is NULL");
    for (size_t b = 0; b < c->o.batch; b++)
        if (labels[b] >= c->o.n_parent)
            return lse_error_set(&c->last, LSE_ERANGE, fn,
                                 "label %zu of example %zu is not below %zu",
                                 labels[b], b, c->o.n_parent);
    lse_status st = lse_capsnet_route_impl(c, children, NULL, NULL);
    if (st != LSE_OK)
        return st;
    memcpy(c->labels, labels, c->o.batch * sizeof *labels);
    routing_mode(c, 0);
    double l;
    st = lse_graph_gradient(c->g, &l);
    if (st == LSE_OK)
        st = lse_optim_step(c->optim);
    routing_mode(c, 1);
    if (st != LSE_OK)
        return fail_graph(c, st, fn);
    if (loss != NULL)
        *loss = l;
    return LSE_OK;
}

lse_status lse_capsnet_train_step(lse_capsnet *c, const gsl_matrix *children,
                                  const size_t *labels, double *loss,
                                  lse_error *err)
{
    return lse_util_report(
        err, lse_capsnet_train_step_impl(c, children, labels, loss),
        "lse_capsnet_train_step", lse_capsnet_errmsg(c));
}

static lse_status lse_capsnet_predict_impl(lse_capsnet *c,
                                           const gsl_matrix *children, size_t n,
                                           size_t *labels)
{
    static const char fn[] = "lse_capsnet_predict";
    if (c == NULL)
        return LSE_EFAULT;
    const size_t N = c->o.n_child, S = c->o.n_parent, B = c->o.batch;
    if (labels == NULL)
        return lse_error_set(&c->last, LSE_EFAULT, fn, "labels is NULL");
    if (!mul_ok(n, N))
        return lse_error_set(&c->last, LSE_EDIM, fn, "n too large");
    lse_status st = check_shape(c, children, n * N, c->o.d_child, "children",
                                fn);
    if (st != LSE_OK)
        return st;
    gsl_matrix *batch = gsl_matrix_calloc(B * N, c->o.d_child);
    gsl_matrix *par = gsl_matrix_alloc(B * S, c->o.d_parent);
    if (batch == NULL || par == NULL) {
        gsl_matrix_free(batch);
        gsl_matrix_free(par);
        return lse_error_set(&c->last, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t first = 0; st == LSE_OK && first < n; first += B) {
        const size_t m = n - first < B ? n - first : B;
        gsl_matrix_set_zero(batch);
        gsl_matrix_const_view src = gsl_matrix_const_submatrix(
            children, first * N, 0, m * N, c->o.d_child);
        gsl_matrix_view dst = gsl_matrix_submatrix(batch, 0, 0, m * N,
                                                   c->o.d_child);
        gsl_matrix_memcpy(&dst.matrix, &src.matrix);
        st = lse_capsnet_route_impl(c, batch, par, NULL);
        for (size_t b = 0; st == LSE_OK && b < m; b++) {
            size_t best = 0;
            double best_norm = -1.0;
            for (size_t j = 0; j < S; j++) {
                gsl_vector_const_view v = gsl_matrix_const_row(par, b * S + j);
                double s = 0.0;
                for (size_t k = 0; k < c->o.d_parent; k++)
                    s += gsl_vector_get(&v.vector, k) *
                         gsl_vector_get(&v.vector, k);
                if (s > best_norm) {
                    best_norm = s;
                    best = j;
                }
            }
            labels[first + b] = best;
        }
    }
    gsl_matrix_free(batch);
    gsl_matrix_free(par);
    return st;
}

lse_status lse_capsnet_predict(lse_capsnet *c, const gsl_matrix *children,
                               size_t n, size_t *labels, lse_error *err)
{
    return lse_util_report(err,
                           lse_capsnet_predict_impl(c, children, n, labels),
                           "lse_capsnet_predict", lse_capsnet_errmsg(c));
}
