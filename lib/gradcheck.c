#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph-private.h"
#include "size-private.h"

/* Finite-difference checks of similarity kernels and of whole graphs.
 * The error of one entry is |a - n| / max(floor, |a|, |n|). */

static void update(lse_gradcheck *res, double a, double n, double floor,
                   const char *what, size_t i, size_t j)
{
    double den = fabs(a) > fabs(n) ? fabs(a) : fabs(n);
    if (den < floor)
        den = floor;
    const double err = fabs(a - n) / den;
    res->n_checked++;
    if (err > res->max_error || isnan(err)) {
        res->max_error = isnan(err) ? INFINITY : err;
        res->analytic = a;
        res->numeric = n;
        snprintf(res->where, sizeof res->where, "%s[%zu,%zu]", what, i, j);
    }
}

typedef struct sim_probe {
    const lse_sim_type *type;
    lse_sim_args args;
    gsl_matrix *s; /* (n, m) */
    const gsl_matrix *g;
} sim_probe;

static lse_status probe_energy(sim_probe *p, double *e)
{
    lse_status st = LSE_OK;
    if (p->type->prepare != NULL)
        st = p->type->prepare(&p->args);
    if (st == LSE_OK)
        st = p->type->eval(&p->args, p->s);
    if (st != LSE_OK)
        return st;
    double sum = 0.0;
    for (size_t i = 0; i < p->s->size1; i++)
        for (size_t j = 0; j < p->s->size2; j++)
            sum += gsl_matrix_get(p->g, i, j) * gsl_matrix_get(p->s, i, j);
    *e = sum;
    return LSE_OK;
}

/* Central differences over every entry of m (which the probe reads). */
static lse_status check_matrix(sim_probe *p, gsl_matrix *m,
                               const gsl_matrix *analytic, double h,
                               double floor, const char *what,
                               lse_gradcheck *res)
{
    for (size_t i = 0; i < m->size1; i++) {
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            double up, down;
            gsl_matrix_set(m, i, j, v + h);
            lse_status st = probe_energy(p, &up);
            gsl_matrix_set(m, i, j, v - h);
            if (st == LSE_OK)
                st = probe_energy(p, &down);
            gsl_matrix_set(m, i, j, v);
            if (st != LSE_OK)
                return st;
            update(res, gsl_matrix_get(analytic, i, j), (up - down) / (2 * h),
                   floor, what, i, j);
        }
    }
    return LSE_OK;
}

static gsl_matrix *dup(const gsl_matrix *m)
{
    if (m == NULL)
        return NULL;
    gsl_matrix *c = gsl_matrix_alloc(m->size1, m->size2);
    if (c != NULL)
        gsl_matrix_memcpy(c, m);
    return c;
}

static gsl_matrix *zeros_like(const gsl_matrix *m)
{
    return m == NULL ? NULL : gsl_matrix_calloc(m->size1, m->size2);
}

/* The copies, gradients and scratch of one lse_sim_check_gradient. */
typedef struct check_bufs {
    size_t *rows, *cols;   /* (np + 1) parameter shapes */
    gsl_matrix **pv, **pg; /* (np + 1) parameter copies, their gradients */
    gsl_matrix *c, *p, *x; /* copies of child, parent, context */
    gsl_matrix *gc, *gp, *gx;
    gsl_matrix *s, *g; /* S and the weights G (child x parent) */
} check_bufs;

/* LSE_OK, or LSE_ENOMEM with whatever was made in b (bufs_free frees it). */
static lse_status bufs_new(check_bufs *b, const gsl_matrix *child,
                           const gsl_matrix *parent, const gsl_matrix *context,
                           const gsl_matrix *const *param, size_t np)
{
    b->rows = calloc(np + 1, sizeof *b->rows);
    b->cols = calloc(np + 1, sizeof *b->cols);
    b->pv = calloc(np + 1, sizeof *b->pv);
    b->pg = calloc(np + 1, sizeof *b->pg);
    b->c = dup(child);
    b->p = dup(parent);
    b->x = dup(context);
    b->gc = zeros_like(child);
    b->gp = zeros_like(parent);
    b->gx = zeros_like(context);
    b->s = gsl_matrix_alloc(child->size1, parent->size1);
    b->g = gsl_matrix_alloc(child->size1, parent->size1);
    if (b->rows == NULL || b->cols == NULL || b->pv == NULL || b->pg == NULL ||
        b->c == NULL || b->p == NULL || b->gc == NULL || b->gp == NULL ||
        b->s == NULL || b->g == NULL ||
        (context != NULL && (b->x == NULL || b->gx == NULL)))
        return LSE_ENOMEM;
    for (size_t k = 0; k < np; k++) {
        const gsl_matrix *v = param != NULL ? param[k] : NULL;
        if (v == NULL)
            continue;
        b->rows[k] = v->size1;
        b->cols[k] = v->size2;
        b->pv[k] = dup(v);
        b->pg[k] = zeros_like(v);
        if (b->pv[k] == NULL || b->pg[k] == NULL)
            return LSE_ENOMEM;
    }
    /* a fixed, high-entropy weight pattern */
    for (size_t i = 0; i < b->g->size1; i++)
        for (size_t j = 0; j < b->g->size2; j++)
            gsl_matrix_set(b->g, i, j,
                           0.3 + sin(1.7 * (double)i + 2.3 * (double)j));
    return LSE_OK;
}

static void bufs_free(check_bufs *b, size_t np)
{
    for (size_t k = 0; b->pv != NULL && b->pg != NULL && k < np; k++) {
        gsl_matrix_free(b->pv[k]);
        gsl_matrix_free(b->pg[k]);
    }
    free(b->rows);
    free(b->cols);
    free(b->pv);
    free(b->pg);
    gsl_matrix_free(b->c);
    gsl_matrix_free(b->p);
    gsl_matrix_free(b->x);
    gsl_matrix_free(b->gc);
    gsl_matrix_free(b->gp);
    gsl_matrix_free(b->gx);
    gsl_matrix_free(b->s);
    gsl_matrix_free(b->g);
}

/* The type's check, its eval and grad at the copies, then every gradient
 * against central differences. work: the workspace made (freed by the
 * caller). */
static lse_status check_all(const lse_sim_type *type, const void *config,
                            check_bufs *b, void **work, double h, double floor,
                            lse_gradcheck *res, const char *fn, lse_error *err)
{
    const size_t np = type->n_param;
    const lse_sim_shape shape = {.n_child = b->c->size1,
                                 .block = b->c->size1,
                                 .n_parent = b->p->size1,
                                 .d_child = b->c->size2,
                                 .d_parent = b->p->size2,
                                 .d_context = b->x != NULL ? b->x->size2 : 0,
                                 .n_param = np,
                                 .param_rows = b->rows,
                                 .param_cols = b->cols};
    char msg[256] = "";
    lse_status st;
    if (type->check != NULL) {
        st = type->check(&shape, config, msg, sizeof msg);
        if (st != LSE_OK) {
            lse_error_set(err, st, fn, "%s", msg);
            return st;
        }
    }
    if (type->work_new != NULL) {
        st = type->work_new(&shape, config, work);
        if (st != LSE_OK)
            return st;
    }
    sim_probe probe = {.type = type,
                       .args = {.child = b->c,
                                .parent = b->p,
                                .context = b->x,
                                .child_offset = 0,
                                .param = (const gsl_matrix *const *)b->pv,
                                .config = config,
                                .work = *work},
                       .s = b->s,
                       .g = b->g};
    double e0;
    st = probe_energy(&probe, &e0);
    if (st != LSE_OK)
        return st;
    const lse_sim_grads out = {
        .child = b->gc, .parent = b->gp, .context = b->gx, .param = b->pg};
    st = type->grad(&probe.args, b->g, &out);
    if (st != LSE_OK)
        return st;
    st = check_matrix(&probe, b->c, b->gc, h, floor, "child", res);
    if (st == LSE_OK)
        st = check_matrix(&probe, b->p, b->gp, h, floor, "parent", res);
    if (st == LSE_OK && b->x != NULL)
        st = check_matrix(&probe, b->x, b->gx, h, floor, "context", res);
    for (size_t k = 0; st == LSE_OK && k < np; k++) {
        if (b->pv[k] == NULL)
            continue;
        char what[64];
        snprintf(what, sizeof what, "param %s",
                 type->param_names != NULL ? type->param_names[k] : "?");
        st = check_matrix(&probe, b->pv[k], b->pg[k], h, floor, what, res);
    }
    return st;
}

lse_status lse_sim_check_gradient(const lse_sim_type *type, const void *config,
                                  const gsl_matrix *child,
                                  const gsl_matrix *parent,
                                  const gsl_matrix *context,
                                  const gsl_matrix *const *param, double h,
                                  double floor, lse_gradcheck *res,
                                  lse_error *err)
{
    static const char fn[] = "lse_sim_check_gradient";
    if (type == NULL || child == NULL || parent == NULL || res == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (!(h > 0.0) || !(floor > 0.0))
        return lse_error_set(err, LSE_EDOM, fn, "h and floor must be > 0");
    lse_gsl_quiet();
    if (err != NULL) {
        err->status = LSE_OK;
        err->message[0] = '\0';
    }
    if (config == NULL)
        config = type->config_default;
    const size_t np = type->n_param;
    *res = (lse_gradcheck){0};
    size_t dmax = child->size2 > parent->size2 ? child->size2 : parent->size2;
    if (context != NULL && context->size2 > dmax)
        dmax = context->size2;
    const char *too_big = lse_size_shape_overflow(
        child->size1, child->size1, parent->size1, dmax, 1);
    if (too_big != NULL)
        return lse_error_set(err, LSE_ENOMEM, fn,
                             "%zu child x %zu parent rows, dimension %zu: %s "
                             "doubles exceed the address space",
                             child->size1, parent->size1, dmax, too_big);
    check_bufs b = {0};
    void *work = NULL;
    lse_status st = bufs_new(&b, child, parent, context, param, np);
    if (st == LSE_OK)
        st = check_all(type, config, &b, &work, h, floor, res, fn, err);
    if (st == LSE_ENOMEM)
        lse_error_set(err, st, fn, "out of memory");
    else if (st != LSE_OK && err != NULL && err->status != st)
        lse_error_set(err, st, fn, "%s kernel failed: %s", type->name,
                      lse_strerror(st));
    if (work != NULL && type->work_free != NULL)
        type->work_free(work);
    bufs_free(&b, np);
    return st;
}
