#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Multi-head Density Adaptive Attention (docs/models/daam.md).
 *
 *   graph  x (N, d) clamped, delta (H, d) param, c (H, 1) param,
 *          LSE term "daam": child x, parent delta, lse_sim_daam, param c:
 *          S_ih = -sum_j y_ihj^2 / (2 c_h^2) = sum_j log g_ihj
 *   model  gates g_h, outputs X .* g_h, importance factors, and the
 *          density fit of (delta, c) on E_fit = -sum_i log sum_h
 *          exp(S_ih - d log|c_h| - d/2 log 2 pi - log H).
 */

#define LOG_2PI 1.83787706640934548356

struct lse_daam {
    lse_graph *g;
    lse_node *x, *delta, *c;
    lse_term *term;
    size_t n, d, n_head;
    lse_daam_axis axis;
    double eps;
    double min_width; /* floor on |c_h| during the fit */
    gsl_matrix *z;    /* (N, d): x - m */
    double *sd;       /* sqrt(v + eps): N (features axis) or d (rows axis) */
    gsl_matrix *gate; /* (N, d) scratch */
    gsl_matrix *acc;  /* (N, d) head-mixed gates */
    gsl_matrix *gm;   /* (N, H): G = dE_fit/dS */
    gsl_matrix *gd;   /* (H, d) fit gradient */
    gsl_matrix *gc;   /* (H, 1) fit gradient */
    gsl_matrix *d0;   /* (H, d) line-search start */
    gsl_matrix *c0;   /* (H, 1) line-search start */
    char errmsg[512];
};

static lse_status fail(lse_daam *m, lse_status st, const char *fn,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static lse_status fail(lse_daam *m, lse_status st, const char *fn,
                       const char *fmt, ...)
{
    if (m == NULL)
        return st;
    va_list ap;
    va_start(ap, fmt);
    lse_util_vfail(m->errmsg, sizeof m->errmsg, st, fn, fmt, ap);
    va_end(ap);
    return st;
}

static lse_status graph_fail(lse_daam *m, lse_status st, const char *fn)
{
    const char *msg = lse_graph_errmsg(m->g);
    return fail(m, st, fn, "%s", msg[0] != '\0' ? msg : lse_strerror(st));
}

void lse_daam_free(lse_daam *m)
{
    if (m == NULL)
        return;
    lse_graph_free(m->g);
    gsl_matrix_free(m->z);
    free(m->sd);
    gsl_matrix_free(m->gate);
    gsl_matrix_free(m->acc);
    gsl_matrix_free(m->gm);
    gsl_matrix_free(m->gd);
    gsl_matrix_free(m->gc);
    gsl_matrix_free(m->d0);
    gsl_matrix_free(m->c0);
    free(m);
}

lse_status lse_daam_new(size_t n_head, size_t dim, lse_daam_axis axis,
                        double eps, const gsl_matrix *x, lse_daam **out,
                        lse_error *err)
{
    static const char fn[] = "lse_daam_new";
    lse_gsl_quiet();
    if (out == NULL || x == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL %s", fn,
                                  out == NULL ? "out" : "data");
    *out = NULL;
    if (n_head == 0 || dim == 0)
        return lse_util_set_error(
            err, LSE_EINVAL, "%s: n_head = %zu, dim = %zu: both must be > 0",
            fn, n_head, dim);
    if (x->size2 != dim || x->size1 == 0)
        return lse_util_set_error(err, LSE_EDIM,
                                  "%s: data is %zux%zu, expected N x %zu", fn,
                                  x->size1, x->size2, dim);
    if (axis != LSE_DAAM_FEATURES && axis != LSE_DAAM_ROWS)
        return lse_util_set_error(err, LSE_EINVAL, "%s: unknown axis %d", fn,
                                  (int)axis);
    if (!(eps > 0.0) || !isfinite(eps))
        return lse_util_set_error(
            err, LSE_EDOM, "%s: eps = %g, must be finite and > 0", fn, eps);
    if (lse_util_find_nonfinite(x, NULL, NULL))
        return lse_util_set_error(err, LSE_ENONFINITE,
                                  "%s: data holds NaN or inf", fn);
    lse_daam *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    const size_t n = x->size1;
    m->n = n;
    m->d = dim;
    m->n_head = n_head;
    m->axis = axis;
    m->eps = eps;
    m->min_width = LSE_DAAM_MIN_WIDTH;
    m->g = lse_graph_new();
    m->z = gsl_matrix_alloc(n, dim);
    m->sd = malloc((n > dim ? n : dim) * sizeof *m->sd);
    m->gate = gsl_matrix_alloc(n, dim);
    m->acc = gsl_matrix_alloc(n, dim);
    m->gm = gsl_matrix_alloc(n, n_head);
    m->gd = gsl_matrix_alloc(n_head, dim);
    m->gc = gsl_matrix_alloc(n_head, 1);
    m->d0 = gsl_matrix_alloc(n_head, dim);
    m->c0 = gsl_matrix_alloc(n_head, 1);
    if (m->g == NULL || m->z == NULL || m->sd == NULL || m->gate == NULL ||
        m->acc == NULL || m->gm == NULL || m->gd == NULL || m->gc == NULL ||
        m->d0 == NULL || m->c0 == NULL) {
        lse_daam_free(m);
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    }
    lse_status st =
        lse_graph_add_node(m->g, "x", n, dim, LSE_NODE_CLAMPED, &m->x);
    if (st == LSE_OK)
        st = lse_node_set_value(m->x, x);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "delta", n_head, dim, LSE_NODE_PARAM,
                                &m->delta);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "c", n_head, 1, LSE_NODE_PARAM, &m->c);
    if (st == LSE_OK) {
        gsl_matrix_set_all(lse_node_value(m->c), 1.0);
        const lse_daam_config cfg = {.axis = axis, .eps = eps};
        lse_node *params[1] = {m->c};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(m->x);
        spec.parent = lse_view_all(m->delta);
        spec.sim = lse_sim_daam;
        spec.config = &cfg;
        spec.param = params;
        st = lse_graph_add_lse(m->g, "daam", &spec, &m->term);
    }
    if (st != LSE_OK) {
        lse_util_set_error(err, st, "%s: %s", fn, lse_graph_errmsg(m->g));
        lse_daam_free(m);
        return st;
    }
    *out = m;
    return LSE_OK;
}

const char *lse_daam_errmsg(const lse_daam *m)
{
    return m != NULL ? m->errmsg : "";
}

lse_graph *lse_daam_graph(const lse_daam *m) { return m ? m->g : NULL; }
lse_term *lse_daam_term(const lse_daam *m) { return m ? m->term : NULL; }
lse_node *lse_daam_data(const lse_daam *m) { return m ? m->x : NULL; }
lse_node *lse_daam_delta(const lse_daam *m) { return m ? m->delta : NULL; }
lse_node *lse_daam_width(const lse_daam *m) { return m ? m->c : NULL; }
size_t lse_daam_n_head(const lse_daam *m) { return m ? m->n_head : 0; }

static lse_status lse_daam_set_min_width_impl(lse_daam *m, double min_width)
{
    static const char fn[] = "lse_daam_set_min_width";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (!isfinite(min_width) || !(min_width > 0.0))
        return fail(m, LSE_EDOM, fn, "min_width = %g, must be finite and > 0",
                    min_width);
    m->min_width = min_width;
    return LSE_OK;
}

lse_status lse_daam_set_min_width(lse_daam *m, double min_width, lse_error *err)
{
    return lse_util_report(err, lse_daam_set_min_width_impl(m, min_width),
                           "lse_daam_set_min_width", lse_daam_errmsg(m));
}

double lse_daam_min_width(const lse_daam *m)
{
    return m != NULL ? m->min_width : NAN;
}

static lse_status lse_daam_set_data_impl(lse_daam *m, const gsl_matrix *x)
{
    if (m == NULL || x == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    const lse_status st = lse_node_set_value(m->x, x);
    if (st != LSE_OK)
        return graph_fail(m, st, "lse_daam_set_data");
    return LSE_OK;
}

lse_status lse_daam_set_data(lse_daam *m, const gsl_matrix *x, lse_error *err)
{
    return lse_util_report(err, lse_daam_set_data_impl(m, x),
                           "lse_daam_set_data", lse_daam_errmsg(m));
}

/* z = x - m and sd = sqrt(v + eps) over the configured axis. */
static void standardize(lse_daam *m)
{
    const gsl_matrix *x = lse_node_value(m->x);
    const size_t n = m->n, d = m->d;
    if (m->axis == LSE_DAAM_FEATURES) {
        for (size_t i = 0; i < n; i++) {
            double mean = 0.0, var = 0.0;
            for (size_t j = 0; j < d; j++)
                mean += gsl_matrix_get(x, i, j);
            mean /= (double)d;
            for (size_t j = 0; j < d; j++) {
                const double t = gsl_matrix_get(x, i, j) - mean;
                gsl_matrix_set(m->z, i, j, t);
                var += t * t;
            }
            m->sd[i] = sqrt(var / (double)d + m->eps);
        }
        return;
    }
    for (size_t j = 0; j < d; j++) {
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++)
            mean += gsl_matrix_get(x, i, j);
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - mean;
            gsl_matrix_set(m->z, i, j, t);
            var += t * t;
        }
        m->sd[j] = sqrt(var / (double)n + m->eps);
    }
}

/* g_h into out (N, d); standardize() must have run. */
static lse_status gate_into(lse_daam *m, size_t h, gsl_matrix *out)
{
    const gsl_matrix *delta = lse_node_value(m->delta);
    const double ch = gsl_matrix_get(lse_node_value(m->c), h, 0);
    if (ch == 0.0 || !isfinite(ch))
        return LSE_EDOM;
    const double k = 1.0 / (2.0 * ch * ch);
    const int rows = m->axis == LSE_DAAM_ROWS;
    for (size_t i = 0; i < m->n; i++)
        for (size_t j = 0; j < m->d; j++) {
            const double y =
                (gsl_matrix_get(m->z, i, j) - gsl_matrix_get(delta, h, j)) /
                m->sd[rows ? j : i];
            gsl_matrix_set(out, i, j, exp(-k * y * y));
        }
    return LSE_OK;
}

static lse_status lse_daam_init_impl(lse_daam *m, unsigned long seed)
{
    static const char fn[] = "lse_daam_init";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (m->n_head > m->n)
        return fail(m, LSE_EINVAL, fn, "%zu heads but only %zu rows", m->n_head,
                    m->n);
    size_t *all = malloc(m->n * sizeof *all);
    size_t *pick = malloc(m->n_head * sizeof *pick);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (all == NULL || pick == NULL || r == NULL) {
        free(all);
        free(pick);
        gsl_rng_free(r);
        return fail(m, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < m->n; i++)
        all[i] = i;
    gsl_ran_choose(r, pick, m->n_head, all, m->n, sizeof *all);
    gsl_ran_shuffle(r, pick, m->n_head, sizeof *pick);
    standardize(m);
    gsl_matrix *delta = lse_node_value(m->delta);
    for (size_t h = 0; h < m->n_head; h++) {
        gsl_vector_const_view zr = gsl_matrix_const_row(m->z, pick[h]);
        gsl_matrix_set_row(delta, h, &zr.vector);
    }
    gsl_matrix_set_all(lse_node_value(m->c), 1.0);
    free(all);
    free(pick);
    gsl_rng_free(r);
    return LSE_OK;
}

lse_status lse_daam_init(lse_daam *m, unsigned long seed, lse_error *err)
{
    return lse_util_report(err, lse_daam_init_impl(m, seed), "lse_daam_init",
                           lse_daam_errmsg(m));
}

static lse_status lse_daam_gate_impl(lse_daam *m, size_t h, gsl_matrix *out)
{
    static const char fn[] = "lse_daam_gate";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (out == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL out");
    if (h >= m->n_head)
        return fail(m, LSE_ERANGE, fn, "head %zu of %zu", h, m->n_head);
    if (out->size1 != m->n || out->size2 != m->d)
        return fail(m, LSE_EDIM, fn, "out is %zux%zu, expected %zux%zu",
                    out->size1, out->size2, m->n, m->d);
    standardize(m);
    const lse_status st = gate_into(m, h, out);
    if (st != LSE_OK)
        return fail(m, st, fn, "c[%zu] is 0 or not finite", h);
    return LSE_OK;
}

lse_status lse_daam_gate(lse_daam *m, size_t h, gsl_matrix *out, lse_error *err)
{
    return lse_util_report(err, lse_daam_gate_impl(m, h, out), "lse_daam_gate",
                           lse_daam_errmsg(m));
}

static lse_status lse_daam_forward_impl(lse_daam *m, gsl_matrix *out)
{
    static const char fn[] = "lse_daam_forward";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (out == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL out");
    if (out->size1 != m->n || out->size2 != m->n_head * m->d)
        return fail(m, LSE_EDIM, fn, "out is %zux%zu, expected %zux%zu",
                    out->size1, out->size2, m->n, m->n_head * m->d);
    standardize(m);
    const gsl_matrix *x = lse_node_value(m->x);
    for (size_t h = 0; h < m->n_head; h++) {
        const lse_status st = gate_into(m, h, m->gate);
        if (st != LSE_OK)
            return fail(m, st, fn, "c[%zu] is 0 or not finite", h);
        for (size_t i = 0; i < m->n; i++)
            for (size_t j = 0; j < m->d; j++)
                gsl_matrix_set(out, i, h * m->d + j,
                               gsl_matrix_get(x, i, j) *
                                   gsl_matrix_get(m->gate, i, j));
    }
    return LSE_OK;
}

lse_status lse_daam_forward(lse_daam *m, gsl_matrix *out, lse_error *err)
{
    return lse_util_report(err, lse_daam_forward_impl(m, out),
                           "lse_daam_forward", lse_daam_errmsg(m));
}

/* Sweep the heads: acc (N, d) += A_ih g_ihj (times x_ij when with_x). */
static lse_status mixed_gates(lse_daam *m, gsl_matrix *acc, int with_x,
                              const char *fn)
{
    double e;
    lse_status st = lse_graph_energy(m->g, &e);
    if (st != LSE_OK)
        return graph_fail(m, st, fn);
    const gsl_matrix *a = lse_term_softmax(m->term);
    if (a == NULL)
        return fail(m, LSE_EINTERNAL, fn, "term has no softmax");
    standardize(m);
    const gsl_matrix *x = lse_node_value(m->x);
    gsl_matrix_set_zero(acc);
    for (size_t h = 0; h < m->n_head; h++) {
        st = gate_into(m, h, m->gate);
        if (st != LSE_OK)
            return fail(m, st, fn, "c[%zu] is 0 or not finite", h);
        for (size_t i = 0; i < m->n; i++) {
            const double aih = gsl_matrix_get(a, i, h);
            for (size_t j = 0; j < m->d; j++)
                *gsl_matrix_ptr(acc, i, j) +=
                    aih * gsl_matrix_get(m->gate, i, j) *
                    (with_x ? gsl_matrix_get(x, i, j) : 1.0);
        }
    }
    return LSE_OK;
}

static lse_status lse_daam_forward_mixed_impl(lse_daam *m, gsl_matrix *out)
{
    static const char fn[] = "lse_daam_forward_mixed";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (out == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL out");
    if (out->size1 != m->n || out->size2 != m->d)
        return fail(m, LSE_EDIM, fn, "out is %zux%zu, expected %zux%zu",
                    out->size1, out->size2, m->n, m->d);
    return mixed_gates(m, out, 1, fn);
}

lse_status lse_daam_forward_mixed(lse_daam *m, gsl_matrix *out, lse_error *err)
{
    return lse_util_report(err, lse_daam_forward_mixed_impl(m, out),
                           "lse_daam_forward_mixed", lse_daam_errmsg(m));
}

static lse_status lse_daam_importance_impl(lse_daam *m, gsl_vector *da,
                                           gsl_vector *imp)
{
    static const char fn[] = "lse_daam_importance";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (imp == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL importance vector");
    if (imp->size != m->d || (da != NULL && da->size != m->d))
        return fail(m, LSE_EDIM, fn, "vectors must have %zu entries", m->d);
    gsl_matrix *acc = m->acc;
    const lse_status st = mixed_gates(m, acc, 0, fn);
    if (st == LSE_OK) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t j = 0; j < m->d; j++) {
            double s = 0.0;
            for (size_t i = 0; i < m->n; i++)
                s += gsl_matrix_get(acc, i, j);
            s /= (double)m->n;
            gsl_vector_set(imp, j, s);
            lo = s < lo ? s : lo;
            hi = s > hi ? s : hi;
        }
        if (da != NULL)
            gsl_vector_memcpy(da, imp);
        for (size_t j = 0; j < m->d; j++)
            gsl_vector_set(imp, j,
                           hi > lo ? (gsl_vector_get(imp, j) - lo) / (hi - lo)
                                   : 1.0);
    }
    return st;
}

lse_status lse_daam_importance(lse_daam *m, gsl_vector *da, gsl_vector *imp,
                               lse_error *err)
{
    return lse_util_report(err, lse_daam_importance_impl(m, da, imp),
                           "lse_daam_importance", lse_daam_errmsg(m));
}

/* E_fit and, when want_grad, its gradient into m->gd, m->gc. */
static lse_status fit_eval(lse_daam *m, int want_grad, double *energy,
                           const char *fn)
{
    double e;
    lse_status st = lse_graph_energy(m->g, &e);
    if (st != LSE_OK)
        return graph_fail(m, st, fn);
    const gsl_matrix *s = lse_term_similarity(m->term);
    const gsl_matrix *c = lse_node_value(m->c);
    if (s == NULL)
        return fail(m, LSE_EINTERNAL, fn, "term has no similarity matrix");
    const size_t n = m->n, H = m->n_head;
    const double d = (double)m->d;
    const double cst = 0.5 * d * LOG_2PI + log((double)H);
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double *t = gsl_matrix_ptr(m->gm, i, 0); /* T_i, then R_i */
        for (size_t h = 0; h < H; h++)
            t[h] = gsl_matrix_get(s, i, h) -
                   d * log(fabs(gsl_matrix_get(c, h, 0))) - cst;
        double lse;
        st = lse_softmax(t, H, 1, 1.0, t, &lse);
        if (st != LSE_OK || !isfinite(lse))
            return fail(m, st != LSE_OK ? st : LSE_ENONFINITE, fn,
                        "row %zu: log-likelihood %g", i, lse);
        total -= lse;
    }
    *energy = total;
    if (!want_grad)
        return LSE_OK;
    /* dE/dc_h from the normalizer: d sum_i R_ih / c_h; G = -R */
    for (size_t h = 0; h < H; h++) {
        double rs = 0.0;
        for (size_t i = 0; i < n; i++)
            rs += gsl_matrix_get(m->gm, i, h);
        gsl_matrix_set(m->gc, h, 0, d * rs / gsl_matrix_get(c, h, 0));
    }
    gsl_matrix_scale(m->gm, -1.0);
    gsl_matrix_set_zero(m->gd);
    lse_sim_args args;
    st = lse_term_sim_args(m->term, &args);
    if (st != LSE_OK)
        return fail(m, st, fn, "lse_term_sim_args: %s", lse_strerror(st));
    gsl_matrix *pg[1] = {m->gc};
    const lse_sim_grads out = {
        .child = NULL, .parent = m->gd, .context = NULL, .param = pg};
    st = lse_sim_daam->grad(&args, m->gm, &out);
    if (st != LSE_OK)
        return fail(m, st, fn, "daam gradient kernel: %s", lse_strerror(st));
    return LSE_OK;
}

static lse_status lse_daam_fit_energy_impl(lse_daam *m, double *energy,
                                           gsl_matrix *gdelta, gsl_matrix *gc)
{
    static const char fn[] = "lse_daam_fit_energy";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (energy == NULL)
        return fail(m, LSE_EFAULT, fn, "NULL energy");
    if ((gdelta != NULL &&
         (gdelta->size1 != m->n_head || gdelta->size2 != m->d)) ||
        (gc != NULL && (gc->size1 != m->n_head || gc->size2 != 1)))
        return fail(m, LSE_EDIM, fn, "gradients must be %zux%zu and %zux1",
                    m->n_head, m->d, m->n_head);
    const lse_status st = fit_eval(m, gdelta != NULL || gc != NULL, energy, fn);
    if (st != LSE_OK)
        return st;
    if (gdelta != NULL)
        gsl_matrix_memcpy(gdelta, m->gd);
    if (gc != NULL)
        gsl_matrix_memcpy(gc, m->gc);
    return LSE_OK;
}

lse_status lse_daam_fit_energy(lse_daam *m, double *energy, gsl_matrix *gdelta,
                               gsl_matrix *gc, lse_error *err)
{
    return lse_util_report(err, lse_daam_fit_energy_impl(m, energy, gdelta, gc),
                           "lse_daam_fit_energy", lse_daam_errmsg(m));
}

static double sq_norm(const gsl_matrix *a)
{
    double s = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            s += gsl_matrix_get(a, i, j) * gsl_matrix_get(a, i, j);
    return s;
}

/* Width c0 moved by -t g and kept at |c| >= floor (sign kept). */
static double project_width(double c0, double t, double g, double floor)
{
    const double c1 = c0 - t * g;
    if (c0 > 0.0)
        return c1 > floor ? c1 : floor;
    return c1 < -floor ? c1 : -floor;
}

/* 1 when width c with gradient g sits on the floor and the gradient pushes
 * it further down (the projected gradient is 0 there). */
static int blocked(double c, double g, double floor)
{
    return fabs(c) <= floor && (c > 0.0 ? g > 0.0 : g < 0.0);
}

static lse_status lse_daam_fit_impl(lse_daam *m, size_t max_iter, double tol,
                                    lse_daam_fit_report *report)
{
    static const char fn[] = "lse_daam_fit";
    if (m == NULL)
        return LSE_EFAULT;
    m->errmsg[0] = '\0';
    if (!(tol >= 0.0))
        return fail(m, LSE_EDOM, fn, "tol = %g, must be >= 0", tol);
    lse_daam_fit_report rep = {.energy_before = NAN, .energy_after = NAN};
    gsl_matrix *delta = lse_node_value(m->delta), *c = lse_node_value(m->c);
    const double floor = m->min_width;
    /* start inside the feasible set (a zero width stays an error) */
    for (size_t h = 0; h < m->n_head; h++) {
        const double ch = gsl_matrix_get(c, h, 0);
        if (ch != 0.0 && fabs(ch) < floor)
            gsl_matrix_set(c, h, 0, ch > 0.0 ? floor : -floor);
    }
    double e;
    lse_status st = fit_eval(m, 1, &e, fn);
    if (st != LSE_OK)
        return st;
    rep.energy_before = e;
    double step = 1.0;
    for (size_t it = 0; it < max_iter; it++) {
        /* projected gradient: a width on the floor pushed down is fixed */
        double gn2 = sq_norm(m->gd);
        for (size_t h = 0; h < m->n_head; h++) {
            const double g = gsl_matrix_get(m->gc, h, 0);
            if (!blocked(gsl_matrix_get(c, h, 0), g, floor))
                gn2 += g * g;
        }
        if (gn2 == 0.0) {
            rep.converged = 1;
            break;
        }
        gsl_matrix_memcpy(m->d0, delta);
        gsl_matrix_memcpy(m->c0, c);
        int accepted = 0;
        double e1 = e, t = step;
        for (size_t bt = 0; bt <= 60 && !accepted; bt++, t *= 0.5) {
            /* Armijo on the projected path: the decrease expected from
             * the step actually taken, g . (theta0 - theta1) */
            double expect = 0.0;
            for (size_t h = 0; h < m->n_head; h++) {
                const double c0 = gsl_matrix_get(m->c0, h, 0);
                const double g = gsl_matrix_get(m->gc, h, 0);
                const double c1 =
                    blocked(c0, g, floor) ? c0 : project_width(c0, t, g, floor);
                gsl_matrix_set(c, h, 0, c1);
                expect += g * (c0 - c1);
            }
            for (size_t h = 0; h < m->n_head; h++)
                for (size_t j = 0; j < m->d; j++) {
                    const double g = gsl_matrix_get(m->gd, h, j);
                    gsl_matrix_set(delta, h, j,
                                   gsl_matrix_get(m->d0, h, j) - t * g);
                    expect += t * g * g;
                }
            st = fit_eval(m, 0, &e1, fn);
            if (st == LSE_ENONFINITE) {
                st = LSE_OK; /* overshoot: shorten */
                continue;
            }
            if (st != LSE_OK)
                break;
            accepted = e1 <= e - 1e-4 * expect;
        }
        if (st != LSE_OK)
            break;
        if (!accepted) { /* no decrease at any step: restore, stop */
            gsl_matrix_memcpy(delta, m->d0);
            gsl_matrix_memcpy(c, m->c0);
            rep.converged = 1;
            st = fit_eval(m, 1, &e, fn);
            break;
        }
        step = 4.0 * t; /* t was halved once past the accepted step */
        const double de = e - e1;
        rep.n_iter++;
        st = fit_eval(m, 1, &e, fn);
        if (st != LSE_OK)
            break;
        if (de <= tol) {
            rep.converged = 1;
            break;
        }
    }
    rep.energy_after = e;
    /* a collapse: a width on the floor whose gradient still pushes it
     * down, i.e. the likelihood would shrink it further */
    if (st == LSE_OK)
        for (size_t h = 0; h < m->n_head; h++)
            if (blocked(gsl_matrix_get(c, h, 0), gsl_matrix_get(m->gc, h, 0),
                        floor))
                rep.n_collapsed++;
    if (report != NULL)
        *report = rep;
    return st;
}

lse_status lse_daam_fit(lse_daam *m, size_t max_iter, double tol,
                        lse_daam_fit_report *report, lse_error *err)
{
    return lse_util_report(err, lse_daam_fit_impl(m, max_iter, tol, report),
                           "lse_daam_fit", lse_daam_errmsg(m));
}
