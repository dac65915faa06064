#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"

/* Inference by the gradient flow dv/dt = -dE/dv: adaptive Heun/Euler pair
 * with a PID step-size controller (docs/learning.md). */

struct lse_ode {
    lse_graph *g;
    lse_ode_opts opts;
    lse_node **sel; /* user selection, or NULL = free state nodes */
    size_t n_sel;

    int ready;
    double t, h, energy, err, grad_rms, max_increase;
    double ehist[2]; /* e_{n-1}, e_{n-2} of accepted steps */
    size_t n_accept, n_reject, n_eval;
    int last_accepted;

    /* scratch, allocated by init */
    lse_node **nodes; /* integrated nodes */
    size_t n_nodes;
    size_t n;         /* entries */
    double *y, *k1, *k2, *ynew;
};

lse_ode_opts lse_ode_opts_default(void)
{
    lse_ode_opts o;
    memset(&o, 0, sizeof o);
    o.t1 = 20.0;
    o.rtol = 1e-3;
    o.atol = 1e-3;
    o.h0 = 0.0;
    o.max_steps = 4096;
    o.pcoeff = 0.4;
    o.icoeff = 0.3;
    o.dcoeff = 0.0;
    o.safety = 0.9;
    o.factor_min = 0.2;
    o.factor_max = 10.0;
    o.h_min = 0.0;
    o.tol_grad = 0.0;
    return o;
}

static void free_scratch(lse_ode *o)
{
    free(o->nodes);
    free(o->y);
    free(o->k1);
    free(o->k2);
    free(o->ynew);
    o->nodes = NULL;
    o->y = o->k1 = o->k2 = o->ynew = NULL;
    o->n_nodes = o->n = 0;
    o->ready = 0;
}

lse_ode *lse_ode_new(lse_graph *g)
{
    lse_gsl_quiet();
    if (g == NULL)
        return NULL;
    lse_ode *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->g = g;
    o->opts = lse_ode_opts_default();
    return o;
}

void lse_ode_free(lse_ode *o)
{
    if (o == NULL)
        return;
    free_scratch(o);
    free(o->sel);
    free(o);
}

static int bad(double x) { return !isfinite(x) || x < 0.0; }

lse_status lse_ode_set_opts(lse_ode *o, const lse_ode_opts *p)
{
    static const char fn[] = "lse_ode_set_opts";
    if (o == NULL || p == NULL)
        return LSE_EFAULT;
    if (!isfinite(p->t1) || p->t1 <= 0.0)
        return lse_graph_fail(o->g, LSE_EDOM, fn, "t1 = %g, want > 0", p->t1);
    if (bad(p->rtol) || bad(p->atol) || p->rtol + p->atol <= 0.0)
        return lse_graph_fail(o->g, LSE_EDOM, fn,
                              "rtol = %g, atol = %g: want >= 0, sum > 0",
                              p->rtol, p->atol);
    if (bad(p->h0) || bad(p->h_min) || bad(p->tol_grad))
        return lse_graph_fail(o->g, LSE_EDOM, fn,
                              "h0, h_min and tol_grad must be finite, >= 0");
    if (p->max_steps == 0)
        return lse_graph_fail(o->g, LSE_EDOM, fn, "max_steps = 0");
    if (!isfinite(p->pcoeff) || !isfinite(p->icoeff) || !isfinite(p->dcoeff) ||
        p->pcoeff + p->icoeff + p->dcoeff <= 0.0)
        return lse_graph_fail(o->g, LSE_EDOM, fn,
                              "PID coefficients %g, %g, %g: want finite with a "
                              "positive sum",
                              p->pcoeff, p->icoeff, p->dcoeff);
    if (!isfinite(p->safety) || p->safety <= 0.0 || p->safety > 1.0)
        return lse_graph_fail(o->g, LSE_EDOM, fn, "safety = %g, want (0, 1]",
                              p->safety);
    if (!isfinite(p->factor_min) || !isfinite(p->factor_max) ||
        p->factor_min <= 0.0 || p->factor_min >= 1.0 || p->factor_max <= 1.0)
        return lse_graph_fail(o->g, LSE_EDOM, fn,
                              "factor_min = %g, factor_max = %g: want "
                              "0 < min < 1 < max",
                              p->factor_min, p->factor_max);
    o->opts = *p;
    o->ready = 0;
    return LSE_OK;
}

lse_status lse_ode_set_nodes(lse_ode *o, lse_node *const *nodes, size_t n)
{
    static const char fn[] = "lse_ode_set_nodes";
    if (o == NULL)
        return LSE_EFAULT;
    free(o->sel);
    o->sel = NULL;
    o->n_sel = 0;
    o->ready = 0;
    if (nodes == NULL || n == 0)
        return LSE_OK;
    for (size_t i = 0; i < n; i++)
        if (nodes[i] == NULL || nodes[i]->graph != o->g)
            return lse_graph_fail(o->g, LSE_EINVAL, fn,
                                  "node %zu is NULL or of another graph", i);
    if (n > SIZE_MAX / sizeof *o->sel)
        return lse_graph_fail(o->g, LSE_ENOMEM, fn, "too many nodes");
    o->sel = malloc(n * sizeof *o->sel);
    if (o->sel == NULL)
        return lse_graph_fail(o->g, LSE_ENOMEM, fn, "out of memory");
    memcpy(o->sel, nodes, n * sizeof *o->sel);
    o->n_sel = n;
    return LSE_OK;
}

static int integrated(const lse_ode *o, const lse_node *n)
{
    if (n->flags & LSE_NODE_CLAMPED)
        return 0;
    if (o->sel == NULL)
        return !(n->flags & LSE_NODE_PARAM);
    for (size_t i = 0; i < o->n_sel; i++)
        if (o->sel[i] == n)
            return 1;
    return 0;
}

/* dst = node values */
static void get_values(const lse_ode *o, double *dst)
{
    size_t k = 0;
    for (size_t i = 0; i < o->n_nodes; i++) {
        const gsl_matrix *v = o->nodes[i]->value;
        for (size_t r = 0; r < v->size1; r++) {
            memcpy(dst + k, gsl_matrix_const_ptr(v, r, 0),
                   v->size2 * sizeof *dst);
            k += v->size2;
        }
    }
}

static void put_values(lse_ode *o, const double *src)
{
    size_t k = 0;
    for (size_t i = 0; i < o->n_nodes; i++) {
        gsl_matrix *v = o->nodes[i]->value;
        for (size_t r = 0; r < v->size1; r++) {
            memcpy(gsl_matrix_ptr(v, r, 0), src + k, v->size2 * sizeof *src);
            k += v->size2;
        }
    }
}

/* Evaluate at the nodes' values: *e the energy, f = -dE/dv. *ok = 0 when
 * the energy or a value is not finite (a failed trial, not an error). */
static lse_status eval(lse_ode *o, double *e, double *f, int *ok)
{
    o->n_eval++;
    lse_status st = lse_graph_gradient(o->g, e);
    *ok = 1;
    if (st == LSE_ENONFINITE || (st == LSE_OK && !isfinite(*e))) {
        *ok = 0;
        return LSE_OK;
    }
    if (st != LSE_OK)
        return st;
    size_t k = 0;
    for (size_t i = 0; i < o->n_nodes; i++) {
        const gsl_matrix *gr = o->nodes[i]->grad;
        for (size_t r = 0; r < gr->size1; r++) {
            const double *p = gsl_matrix_const_ptr(gr, r, 0);
            for (size_t j = 0; j < gr->size2; j++) {
                f[k] = -p[j];
                if (!isfinite(f[k]))
                    *ok = 0;
                k++;
            }
        }
    }
    return LSE_OK;
}

static double rms(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return n > 0 ? sqrt(s / (double)n) : 0.0;
}

/* RMS of x / (atol + rtol |y|) */
static double scaled_rms(const lse_ode *o, const double *x, const double *y)
{
    double s = 0.0;
    for (size_t i = 0; i < o->n; i++) {
        const double q = x[i] / (o->opts.atol + o->opts.rtol * fabs(y[i]));
        s += q * q;
    }
    return o->n > 0 ? sqrt(s / (double)o->n) : 0.0;
}

/* Hairer, Norsett and Wanner, Solving ODEs I, II.4: h from the sizes of y,
 * f and a difference quotient of f; one extra evaluation (values are
 * restored). Error order k = 2. */
static lse_status initial_step(lse_ode *o)
{
    const double t1 = o->opts.t1;
    if (o->opts.h0 > 0.0) {
        o->h = fmin(o->opts.h0, t1);
        return LSE_OK;
    }
    const double d0 = scaled_rms(o, o->y, o->y);
    const double d1 = scaled_rms(o, o->k1, o->y);
    double h0 = (d0 < 1e-5 || d1 < 1e-5) ? 1e-6 : 0.01 * d0 / d1;
    h0 = fmin(h0, t1);
    for (size_t i = 0; i < o->n; i++)
        o->ynew[i] = o->y[i] + h0 * o->k1[i];
    put_values(o, o->ynew);
    double e;
    int ok;
    lse_status st = eval(o, &e, o->k2, &ok);
    put_values(o, o->y);
    if (st != LSE_OK)
        return st;
    double h1 = h0;
    if (ok) {
        for (size_t i = 0; i < o->n; i++)
            o->ynew[i] = o->k2[i] - o->k1[i];
        const double d2 = scaled_rms(o, o->ynew, o->y) / h0;
        const double dm = fmax(d1, d2);
        h1 = dm <= 1e-15 ? fmax(1e-6, 1e-3 * h0) : sqrt(0.01 / dm);
    }
    o->h = fmin(fmin(100.0 * h0, h1), t1);
    /* the node gradients are those of the trial point: re-evaluate at y so
     * that the graph reflects the current point */
    st = eval(o, &e, o->k1, &ok);
    return st;
}

lse_status lse_ode_init(lse_ode *o)
{
    static const char fn[] = "lse_ode_init";
    if (o == NULL)
        return LSE_EFAULT;
    free_scratch(o);
    lse_graph *g = o->g;
    const size_t nn = g->n_nodes;
    o->nodes = calloc(nn + 1, sizeof *o->nodes);
    if (o->nodes == NULL)
        goto nomem;
    size_t n = 0;
    for (size_t i = 0; i < nn; i++) {
        lse_node *node = g->nodes[i];
        if (!integrated(o, node))
            continue;
        const size_t r = node->value->size1, c = node->value->size2;
        if (c != 0 && r > SIZE_MAX / c)
            goto nomem;
        if (r * c > SIZE_MAX / sizeof(double) - n)
            goto nomem;
        n += r * c;
        o->nodes[o->n_nodes++] = node;
    }
    if (n == 0)
        return lse_graph_fail(g, LSE_EINVAL, fn, "no free node to integrate");
    o->n = n;
    o->y = malloc(n * sizeof *o->y);
    o->k1 = malloc(n * sizeof *o->k1);
    o->k2 = malloc(n * sizeof *o->k2);
    o->ynew = malloc(n * sizeof *o->ynew);
    if (o->y == NULL || o->k1 == NULL || o->k2 == NULL || o->ynew == NULL)
        goto nomem;
    o->t = 0.0;
    o->n_accept = o->n_reject = o->n_eval = 0;
    o->ehist[0] = o->ehist[1] = 1.0;
    o->err = NAN;
    o->max_increase = -INFINITY;
    o->last_accepted = 0;
    get_values(o, o->y);
    int ok;
    lse_status st = eval(o, &o->energy, o->k1, &ok);
    if (st != LSE_OK)
        return st;
    if (!ok)
        return lse_graph_fail(g, LSE_ENONFINITE, fn,
                              "initial energy or gradient is not finite "
                              "(E = %g)",
                              o->energy);
    o->grad_rms = rms(o->k1, n);
    st = initial_step(o);
    if (st != LSE_OK)
        return st;
    o->ready = 1;
    return LSE_OK;
nomem:
    free_scratch(o);
    return lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
}

/* PID factor after an accepted step with scaled error e (k = 2). */
static double accept_factor(const lse_ode *o, double e)
{
    const lse_ode_opts *p = &o->opts;
    const double k = 2.0;
    const double b1 = (p->pcoeff + p->icoeff + p->dcoeff) / k;
    const double b2 = -(p->pcoeff + 2.0 * p->dcoeff) / k;
    const double b3 = p->dcoeff / k;
    if (e <= 0.0)
        return p->factor_max;
    double f = p->safety * pow(1.0 / e, b1) * pow(1.0 / o->ehist[0], b2) *
               pow(1.0 / o->ehist[1], b3);
    if (!(f >= p->factor_min)) /* also NaN */
        f = p->factor_min;
    if (f > p->factor_max)
        f = p->factor_max;
    return f;
}

lse_status lse_ode_iterate(lse_ode *o)
{
    static const char fn[] = "lse_ode_iterate";
    if (o == NULL)
        return LSE_EFAULT;
    if (!o->ready)
        return lse_graph_fail(o->g, LSE_EINVAL, fn,
                              "call lse_ode_init first (after set_opts or "
                              "set_nodes)");
    const lse_ode_opts *p = &o->opts;
    const double rest = p->t1 - o->t;
    if (rest <= 0.0)
        return LSE_OK; /* t1 reached: nothing to do */
    const int last = o->h >= rest;
    const double h = last ? rest : o->h;
    const size_t n = o->n;
    /* stage 2 at the Euler point */
    for (size_t i = 0; i < n; i++)
        o->ynew[i] = o->y[i] + h * o->k1[i];
    put_values(o, o->ynew);
    double e2;
    int ok;
    lse_status st = eval(o, &e2, o->k2, &ok);
    if (st != LSE_OK) {
        put_values(o, o->y);
        return st;
    }
    double err = INFINITY;
    if (ok) {
        /* Heun y + h/2 (k1 + k2); error Heun - Euler = h/2 (k2 - k1) */
        double s = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double yn = o->y[i] + 0.5 * h * (o->k1[i] + o->k2[i]);
            const double d = 0.5 * h * (o->k2[i] - o->k1[i]);
            const double sc =
                p->atol + p->rtol * fmax(fabs(o->y[i]), fabs(yn));
            s += (d / sc) * (d / sc);
            o->ynew[i] = yn;
        }
        err = sqrt(s / (double)n);
    }
    o->err = err;
    if (err <= 1.0) {
        /* accept: evaluate at the new point (the next step's stage 1) */
        put_values(o, o->ynew);
        double e;
        st = eval(o, &e, o->k2, &ok);
        if (st != LSE_OK) {
            put_values(o, o->y);
            return st;
        }
        if (ok) {
            const double f = accept_factor(o, err);
            o->ehist[1] = o->ehist[0];
            o->ehist[0] = err > 0.0 ? err : DBL_MIN;
            if (e - o->energy > o->max_increase)
                o->max_increase = e - o->energy;
            o->energy = e;
            o->t = last ? p->t1 : o->t + h;
            double *tmp = o->y;
            o->y = o->ynew;
            o->ynew = tmp;
            tmp = o->k1;
            o->k1 = o->k2;
            o->k2 = tmp;
            o->grad_rms = rms(o->k1, n);
            o->h = f * h;
            o->n_accept++;
            o->last_accepted = 1;
            return LSE_OK;
        }
        err = INFINITY; /* the new point is not finite: reject */
    }
    put_values(o, o->y);
    double f = isfinite(err) ? p->safety * pow(1.0 / err, 0.5) : p->factor_min;
    if (f < p->factor_min)
        f = p->factor_min;
    if (f > 1.0)
        f = 1.0;
    o->h = f * h;
    o->n_reject++;
    o->last_accepted = 0;
    if (o->h < p->h_min)
        return lse_graph_fail(o->g, LSE_ENUMERIC, fn,
                              "step %g below h_min = %g at t = %g (error %g)",
                              o->h, p->h_min, o->t, err);
    return LSE_OK;
}

lse_status lse_ode_test(const lse_ode *o)
{
    if (o == NULL)
        return LSE_EFAULT;
    if (o->ready && (o->t >= o->opts.t1 ||
                     (o->opts.tol_grad > 0.0 && o->grad_rms <= o->opts.tol_grad)))
        return LSE_OK;
    return LSE_CONTINUE;
}

lse_status lse_ode_run(lse_ode *o, lse_solver_result *res)
{
    if (o == NULL)
        return LSE_EFAULT;
    lse_solver_result r;
    memset(&r, 0, sizeof r);
    lse_status st = lse_ode_init(o);
    size_t it = 0;
    lse_status t = LSE_CONTINUE;
    while (st == LSE_OK && (t = lse_ode_test(o)) == LSE_CONTINUE &&
           it < o->opts.max_steps) {
        st = lse_ode_iterate(o);
        it++;
    }
    if (st == LSE_OK && !o->last_accepted && it > 0) {
        /* the graph holds the rejected trial point: evaluate at the result */
        double e;
        st = lse_graph_gradient(o->g, &e);
    }
    r.status = st;
    r.n_iter = it;
    r.energy = o->energy;
    r.grad_norm = o->grad_rms;
    if (st != LSE_OK) {
        r.reason = LSE_STOP_ERROR;
    } else if (t == LSE_OK) {
        r.converged = 1;
        r.reason = o->t >= o->opts.t1 ? LSE_STOP_NONE : LSE_STOP_GRAD;
    } else {
        r.reason = LSE_STOP_MAX_ITER;
    }
    if (res != NULL)
        *res = r;
    return st;
}

double lse_ode_t(const lse_ode *o) { return o ? o->t : NAN; }
double lse_ode_h(const lse_ode *o) { return o ? o->h : NAN; }
double lse_ode_energy(const lse_ode *o) { return o ? o->energy : NAN; }
double lse_ode_grad_rms(const lse_ode *o) { return o ? o->grad_rms : NAN; }
double lse_ode_error(const lse_ode *o) { return o ? o->err : NAN; }
size_t lse_ode_n_accepted(const lse_ode *o) { return o ? o->n_accept : 0; }
size_t lse_ode_n_rejected(const lse_ode *o) { return o ? o->n_reject : 0; }
size_t lse_ode_n_eval(const lse_ode *o) { return o ? o->n_eval : 0; }
int lse_ode_last_accepted(const lse_ode *o) { return o ? o->last_accepted : 0; }
double lse_ode_max_increase(const lse_ode *o)
{
    return o ? o->max_increase : NAN;
}
size_t lse_ode_size(const lse_ode *o) { return o ? o->n : 0; }
lse_graph *lse_ode_graph(const lse_ode *o) { return o ? o->g : NULL; }
