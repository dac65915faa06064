/* DAR: scaled dot product plus a bounded resonance prior on the cosine.
 *
 *   S(i, j) = c_i.p_j / sqrt(d) + lambda r(cos_ij)
 *   cos_ij  = c_i.p_j / (max(|c_i|, eps) max(|p_j|, eps))
 *   static:   r = gate(alpha (cos - rho))
 *   unrolled: r^(0) = 0, r^(t+1) = gate(alpha (cos + beta r^(t) - rho)),
 *             r = r^(T_u)
 *
 * Derivation, contraction constants and kink conventions:
 * docs/sim-dar-daam.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>

#include <lsegraph/core.h>
#include "sim-size-private.h"

static const lse_dar_config dar_default = {.lambda = 0.2,
                                           .alpha = 8.0,
                                           .rho = 0.5,
                                           .beta = 0.0,
                                           .steps = 0,
                                           .gate = LSE_GATE_SIGMOID,
                                           .eps = 1e-12};

typedef struct dar_work {
    size_t block, n_parent, d;
    gsl_matrix *chat;   /* (block, d): c_i / max(|c_i|, eps) */
    gsl_matrix *phat;   /* (n_parent, d): p_j / max(|p_j|, eps) */
    gsl_matrix *cosm;   /* (block, n_parent): cos, then dr/dcos */
    gsl_matrix *wm;     /* (block, n_parent): G .* lambda dr/dcos */
    gsl_matrix *tmp_c;  /* (block, d) */
    gsl_matrix *tmp_p;  /* (n_parent, d) */
    double *cn;         /* (block): max(|c_i|, eps) */
    double *pn;         /* (n_parent): max(|p_j|, eps) */
    double *uc;         /* (block): sum_j W_ij cos_ij */
    double *up;         /* (n_parent): sum_i W_ij cos_ij */
    unsigned char *cfl; /* (block): 1 when |c_i| < eps (floor branch) */
    unsigned char *pfl; /* (n_parent): 1 when |p_j| < eps */
} dar_work;

static const lse_dar_config *dar_config(const void *config)
{
    return config != NULL ? (const lse_dar_config *)config : &dar_default;
}

/* Lipschitz constant of the gate in its argument. */
static double gate_lipschitz(lse_gate gate)
{
    switch (gate) {
    case LSE_GATE_SIGMOID:
        return 0.25;
    case LSE_GATE_TANH:
        return 0.5;
    case LSE_GATE_LINEAR:
        return 1.0;
    }
    return 1.0;
}

static const char *gate_name(lse_gate gate)
{
    switch (gate) {
    case LSE_GATE_SIGMOID:
        return "sigmoid";
    case LSE_GATE_TANH:
        return "tanh";
    case LSE_GATE_LINEAR:
        return "linear";
    }
    return "?";
}

/* r = gate(x) and *deriv = gate'(x). At the kinks of the piecewise-linear
 * gate (x + 1/2 = 0 or 1) the derivative is 0. */
static double gate_eval(lse_gate gate, double x, double *deriv)
{
    switch (gate) {
    case LSE_GATE_SIGMOID: {
        double r;
        if (x >= 0.0) {
            r = 1.0 / (1.0 + exp(-x));
        } else {
            const double e = exp(x);
            r = e / (1.0 + e);
        }
        *deriv = r * (1.0 - r);
        return r;
    }
    case LSE_GATE_TANH: {
        const double t = tanh(x);
        *deriv = 0.5 * (1.0 - t * t);
        return 0.5 * (1.0 + t);
    }
    case LSE_GATE_LINEAR: {
        const double y = x + 0.5;
        if (y <= 0.0) {
            *deriv = 0.0;
            return 0.0;
        }
        if (y >= 1.0) {
            *deriv = 0.0;
            return 1.0;
        }
        *deriv = 1.0;
        return y;
    }
    }
    *deriv = 0.0;
    return 0.0;
}

/* r(cos) and dr/dcos, carried forward through the unroll:
 * q^(t+1) = gate'(a_t) alpha (1 + beta q^(t)), q^(0) = 0. */
static double resonance(const lse_dar_config *cfg, double cosv, double *drdcos)
{
    double gp;
    if (cfg->steps == 0) {
        const double r =
            gate_eval(cfg->gate, cfg->alpha * (cosv - cfg->rho), &gp);
        *drdcos = gp * cfg->alpha;
        return r;
    }
    double r = 0.0, q = 0.0;
    for (unsigned t = 0; t < cfg->steps; t++) {
        const double a = cfg->alpha * (cosv + cfg->beta * r - cfg->rho);
        const double rn = gate_eval(cfg->gate, a, &gp);
        q = gp * cfg->alpha * (1.0 + cfg->beta * q);
        r = rn;
    }
    *drdcos = q;
    return r;
}

double lse_dar_resonance(const lse_dar_config *cfg, double cosv)
{
    double drdcos;
    return resonance(dar_config(cfg), cosv, &drdcos);
}

lse_status lse_dar_resonance_matrix(const lse_dar_config *cfg,
                                    const gsl_matrix *child,
                                    const gsl_matrix *parent, gsl_matrix *r,
                                    lse_error *err)
{
    static const char fn[] = "lse_dar_resonance_matrix";
    if (child == NULL || parent == NULL || r == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL matrix");
    if (child->size2 != parent->size2)
        return lse_error_set(err, LSE_EDIM, fn,
                             "children have %zu columns, parents %zu",
                             child->size2, parent->size2);
    if (r->size1 != child->size1 || r->size2 != parent->size1)
        return lse_error_set(err, LSE_EDIM, fn,
                             "r is %zux%zu, expected %zux%zu (children x "
                             "parents)",
                             r->size1, r->size2, child->size1, parent->size1);
    const lse_dar_config *c = dar_config(cfg);
    for (size_t i = 0; i < child->size1; i++) {
        gsl_vector_const_view ci = gsl_matrix_const_row(child, i);
        const double nc = fmax(gsl_blas_dnrm2(&ci.vector), c->eps);
        for (size_t j = 0; j < parent->size1; j++) {
            gsl_vector_const_view pj = gsl_matrix_const_row(parent, j);
            const double np = fmax(gsl_blas_dnrm2(&pj.vector), c->eps);
            double dot = 0.0;
            gsl_blas_ddot(&ci.vector, &pj.vector, &dot);
            gsl_matrix_set(r, i, j, lse_dar_resonance(c, dot / (nc * np)));
        }
    }
    return LSE_OK;
}

static lse_status dar_check(const lse_sim_shape *shape, const void *config,
                            char *msg, size_t msg_len)
{
    const lse_dar_config *cfg = dar_config(config);
    if (shape == NULL) {
        snprintf(msg, msg_len, "dar: NULL shape");
        return LSE_EFAULT;
    }
    if (shape->d_child != shape->d_parent) {
        snprintf(msg, msg_len, "dar: child has %zu columns, parent %zu",
                 shape->d_child, shape->d_parent);
        return LSE_EDIM;
    }
    if (shape->d_child == 0) {
        snprintf(msg, msg_len, "dar: vectors have 0 columns");
        return LSE_EDIM;
    }
    if (shape->d_context != 0) {
        snprintf(msg, msg_len, "dar: takes no context (got %zu columns)",
                 shape->d_context);
        return LSE_EDIM;
    }
    if (shape->n_param != 0) {
        snprintf(msg, msg_len, "dar: takes no parameters (got %zu)",
                 shape->n_param);
        return LSE_EINVAL;
    }
    if (cfg->gate != LSE_GATE_SIGMOID && cfg->gate != LSE_GATE_TANH &&
        cfg->gate != LSE_GATE_LINEAR) {
        snprintf(msg, msg_len, "dar: unknown gate %d", (int)cfg->gate);
        return LSE_EINVAL;
    }
    if (!isfinite(cfg->lambda) || !isfinite(cfg->alpha) ||
        !isfinite(cfg->rho) || !isfinite(cfg->beta) || !isfinite(cfg->eps)) {
        snprintf(msg, msg_len,
                 "dar: non-finite config (lambda=%g, alpha=%g, rho=%g, "
                 "beta=%g, eps=%g)",
                 cfg->lambda, cfg->alpha, cfg->rho, cfg->beta, cfg->eps);
        return LSE_EDOM;
    }
    if (!(cfg->alpha > 0.0)) {
        snprintf(msg, msg_len, "dar: alpha = %g must be > 0", cfg->alpha);
        return LSE_EDOM;
    }
    if (cfg->rho < -1.0 || cfg->rho > 1.0) {
        snprintf(msg, msg_len, "dar: rho = %g must lie in [-1, 1]", cfg->rho);
        return LSE_EDOM;
    }
    if (!(cfg->eps > 0.0)) {
        snprintf(msg, msg_len, "dar: eps = %g must be > 0", cfg->eps);
        return LSE_EDOM;
    }
    if (cfg->steps > 0) {
        const double lg = gate_lipschitz(cfg->gate);
        const double k = cfg->alpha * fabs(cfg->beta) * lg;
        if (k >= 1.0) {
            const char *form = cfg->gate == LSE_GATE_SIGMOID ? "/4"
                               : cfg->gate == LSE_GATE_TANH  ? "/2"
                                                             : "";
            snprintf(msg, msg_len,
                     "dar: alpha*|beta|%s = %g >= 1 (%s gate): unrolled "
                     "resonance is not a contraction",
                     form, k, gate_name(cfg->gate));
            return LSE_EDOM;
        }
    }
    return LSE_OK;
}

static void dar_work_free(void *work)
{
    dar_work *w = work;
    if (w == NULL)
        return;
    gsl_matrix_free(w->chat);
    gsl_matrix_free(w->phat);
    gsl_matrix_free(w->cosm);
    gsl_matrix_free(w->wm);
    gsl_matrix_free(w->tmp_c);
    gsl_matrix_free(w->tmp_p);
    free(w->cn);
    free(w->pn);
    free(w->uc);
    free(w->up);
    free(w->cfl);
    free(w->pfl);
    free(w);
}

static lse_status dar_work_new(const lse_sim_shape *shape, const void *config,
                               void **out)
{
    (void)config;
    if (shape == NULL || out == NULL)
        return LSE_EFAULT;
    *out = NULL;
    if (LSE_SIZE_PAIRS_OVERFLOW(shape->block, shape->d_child,
                                shape->n_parent, shape->d_child,
                                shape->block, shape->n_parent))
        return LSE_ENOMEM;
    dar_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return LSE_ENOMEM;
    w->block = shape->block;
    w->n_parent = shape->n_parent;
    w->d = shape->d_child;
    /* GSL refuses zero-sized matrices: allocate at least one row/column;
     * kernels return early on empty blocks. */
    const size_t b = w->block > 0 ? w->block : 1;
    const size_t n = w->n_parent > 0 ? w->n_parent : 1;
    const size_t d = w->d > 0 ? w->d : 1;
    w->chat = gsl_matrix_alloc(b, d);
    w->phat = gsl_matrix_alloc(n, d);
    w->cosm = gsl_matrix_alloc(b, n);
    w->wm = gsl_matrix_alloc(b, n);
    w->tmp_c = gsl_matrix_alloc(b, d);
    w->tmp_p = gsl_matrix_alloc(n, d);
    w->cn = malloc(b * sizeof *w->cn);
    w->pn = malloc(n * sizeof *w->pn);
    w->uc = malloc(b * sizeof *w->uc);
    w->up = malloc(n * sizeof *w->up);
    w->cfl = malloc(b * sizeof *w->cfl);
    w->pfl = malloc(n * sizeof *w->pfl);
    if (w->chat == NULL || w->phat == NULL || w->cosm == NULL ||
        w->wm == NULL || w->tmp_c == NULL || w->tmp_p == NULL ||
        w->cn == NULL || w->pn == NULL || w->uc == NULL || w->up == NULL ||
        w->cfl == NULL || w->pfl == NULL) {
        dar_work_free(w);
        return LSE_ENOMEM;
    }
    *out = w;
    return LSE_OK;
}

/* hat (rows x d) = x / max(|x_i|, eps) row by row; nrm = the floored norms,
 * fl = 1 where the floor is active. */
static lse_status normalize_rows(const gsl_matrix *x, double eps,
                                 gsl_matrix *hat, double *nrm,
                                 unsigned char *fl)
{
    for (size_t i = 0; i < x->size1; i++) {
        gsl_vector_const_view xi = gsl_matrix_const_row(x, i);
        const double norm = gsl_blas_dnrm2(&xi.vector);
        if (!isfinite(norm))
            return LSE_ENONFINITE;
        fl[i] = norm < eps;
        nrm[i] = fl[i] ? eps : norm;
        const double inv = 1.0 / nrm[i];
        for (size_t k = 0; k < x->size2; k++)
            gsl_matrix_set(hat, i, k, gsl_matrix_get(x, i, k) * inv);
    }
    return LSE_OK;
}

/* The operands match the shape the workspace was built for. */
static int dims_ok(const lse_sim_args *a, const dar_work *w, size_t b)
{
    return a->child->size2 == w->d && a->parent->size2 == w->d &&
           a->parent->size1 == w->n_parent && b <= w->block;
}

/* Views of the workspace for a block of b children (dims_ok holds);
 * fills Chat, Phat, the norms and cos = Chat Phat'. */
typedef struct dar_views {
    gsl_matrix_view chat, phat, cosm, wm, tmp_c, tmp_p;
} dar_views;

static lse_status dar_prepare_block(const lse_sim_args *a, dar_work *w,
                                    size_t b, dar_views *v)
{
    const size_t n = w->n_parent, d = w->d;
    v->chat = gsl_matrix_submatrix(w->chat, 0, 0, b, d);
    v->phat = gsl_matrix_submatrix(w->phat, 0, 0, n, d);
    v->cosm = gsl_matrix_submatrix(w->cosm, 0, 0, b, n);
    v->wm = gsl_matrix_submatrix(w->wm, 0, 0, b, n);
    v->tmp_c = gsl_matrix_submatrix(w->tmp_c, 0, 0, b, d);
    v->tmp_p = gsl_matrix_submatrix(w->tmp_p, 0, 0, n, d);
    const lse_dar_config *cfg = dar_config(a->config);
    lse_status st =
        normalize_rows(a->child, cfg->eps, &v->chat.matrix, w->cn, w->cfl);
    if (st == LSE_OK)
        st =
            normalize_rows(a->parent, cfg->eps, &v->phat.matrix, w->pn, w->pfl);
    if (st != LSE_OK)
        return st;
    /* cos = Chat Phat' */
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &v->chat.matrix,
                       &v->phat.matrix, 0.0, &v->cosm.matrix);
    return lse_status_from_gsl(rc);
}

static lse_status dar_eval(const lse_sim_args *a, gsl_matrix *s)
{
    if (a == NULL || s == NULL || a->child == NULL || a->parent == NULL)
        return LSE_EFAULT;
    dar_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    const lse_dar_config *cfg = dar_config(a->config);
    const size_t b = a->child->size1, n = a->parent->size1;
    if (s->size1 != b || s->size2 != n)
        return LSE_EDIM;
    if (!dims_ok(a, w, b))
        return LSE_EDIM;
    if (b == 0 || n == 0)
        return LSE_OK;
    /* S = C P' / sqrt(d) */
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0 / sqrt((double)w->d),
                       a->child, a->parent, 0.0, s);
    if (rc != GSL_SUCCESS)
        return lse_status_from_gsl(rc);
    if (cfg->lambda == 0.0)
        return LSE_OK; /* A1: exactly the scaled dot product */
    dar_views v;
    const lse_status st = dar_prepare_block(a, w, b, &v);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < b; i++) {
        for (size_t j = 0; j < n; j++) {
            double q;
            const double r =
                resonance(cfg, gsl_matrix_get(&v.cosm.matrix, i, j), &q);
            *gsl_matrix_ptr(s, i, j) += cfg->lambda * r;
        }
    }
    return LSE_OK;
}

/* out (rows x d) += diag(1/nrm) (T - diag(u) hat), where u_i = rowsum of
 * (W .* cos) for the rows in the normal branch; floor rows get T / eps. */
static void add_cos_grad(gsl_matrix *out, const gsl_matrix *t,
                         const gsl_matrix *hat, const double *u,
                         const double *nrm, const unsigned char *fl)
{
    for (size_t i = 0; i < out->size1; i++) {
        const double inv = 1.0 / nrm[i];
        const double ui = fl[i] ? 0.0 : u[i];
        for (size_t k = 0; k < out->size2; k++)
            *gsl_matrix_ptr(out, i, k) +=
                inv *
                (gsl_matrix_get(t, i, k) - ui * gsl_matrix_get(hat, i, k));
    }
}

static lse_status dar_grad(const lse_sim_args *a, const gsl_matrix *g,
                           const lse_sim_grads *out)
{
    if (a == NULL || g == NULL || out == NULL || a->child == NULL ||
        a->parent == NULL)
        return LSE_EFAULT;
    dar_work *w = a->work;
    if (w == NULL)
        return LSE_EFAULT;
    const lse_dar_config *cfg = dar_config(a->config);
    const size_t b = a->child->size1, n = a->parent->size1;
    if (g->size1 != b || g->size2 != n)
        return LSE_EDIM;
    if (out->child != NULL &&
        (out->child->size1 != b || out->child->size2 != w->d))
        return LSE_EDIM;
    if (out->parent != NULL &&
        (out->parent->size1 != n || out->parent->size2 != w->d))
        return LSE_EDIM;
    if (!dims_ok(a, w, b))
        return LSE_EDIM;
    if (b == 0 || n == 0 || (out->child == NULL && out->parent == NULL))
        return LSE_OK;
    const double scale = 1.0 / sqrt((double)w->d);
    int rc;
    dar_views v;
    if (cfg->lambda != 0.0) {
        /* first, so that a failure leaves out untouched */
        const lse_status st = dar_prepare_block(a, w, b, &v);
        if (st != LSE_OK)
            return st;
    }
    /* dot part: dE/dC += G P / sqrt(d), dE/dP += G' C / sqrt(d) */
    if (out->child != NULL) {
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, scale, g, a->parent,
                            1.0, out->child);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    if (out->parent != NULL) {
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, scale, g, a->child, 1.0,
                            out->parent);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
    }
    if (cfg->lambda == 0.0)
        return LSE_OK;

    /* W = G .* lambda dr/dcos, with the row sums u_i = sum_j W_ij cos_ij
     * and the column sums u_j = sum_i W_ij cos_ij in the same pass. */
    gsl_matrix *wm = &v.wm.matrix;
    const gsl_matrix *cosm = &v.cosm.matrix;
    for (size_t j = 0; j < n; j++)
        w->up[j] = 0.0;
    for (size_t i = 0; i < b; i++) {
        double ui = 0.0;
        for (size_t j = 0; j < n; j++) {
            double q;
            const double c = gsl_matrix_get(cosm, i, j);
            (void)resonance(cfg, c, &q);
            const double wij = gsl_matrix_get(g, i, j) * cfg->lambda * q;
            gsl_matrix_set(wm, i, j, wij);
            ui += wij * c;
            w->up[j] += wij * c;
        }
        w->uc[i] = ui;
    }
    if (out->child != NULL) {
        /* dE/dC += diag(1/|c|) (W Phat - diag(u) Chat) */
        rc = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, wm, &v.phat.matrix,
                            0.0, &v.tmp_c.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        add_cos_grad(out->child, &v.tmp_c.matrix, &v.chat.matrix, w->uc, w->cn,
                     w->cfl);
    }
    if (out->parent != NULL) {
        /* dE/dP += diag(1/|p|) (W' Chat - diag(u) Phat) */
        rc = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, wm, &v.chat.matrix,
                            0.0, &v.tmp_p.matrix);
        if (rc != GSL_SUCCESS)
            return lse_status_from_gsl(rc);
        add_cos_grad(out->parent, &v.tmp_p.matrix, &v.phat.matrix, w->up, w->pn,
                     w->pfl);
    }
    return LSE_OK;
}

static int dar_describe(const void *config, char *buf, size_t len)
{
    const lse_dar_config *cfg = dar_config(config);
    if (cfg->steps == 0)
        return snprintf(buf, len, "lambda=%g, alpha=%g, rho=%g, gate=%s",
                        cfg->lambda, cfg->alpha, cfg->rho,
                        gate_name(cfg->gate));
    return snprintf(buf, len,
                    "lambda=%g, alpha=%g, rho=%g, beta=%g, steps=%u, gate=%s",
                    cfg->lambda, cfg->alpha, cfg->rho, cfg->beta, cfg->steps,
                    gate_name(cfg->gate));
}

static const lse_sim_type dar_type = {
    .name = "dar",
    .n_param = 0,
    .param_names = NULL,
    .optional_params = 0,
    .config_size = sizeof(lse_dar_config),
    .config_default = &dar_default,
    .flags = 0,
    .check = dar_check,
    .work_new = dar_work_new,
    .work_free = dar_work_free,
    .prepare = NULL,
    .eval = dar_eval,
    .grad = dar_grad,
    .stats_size = NULL,
    .stats = NULL,
    .solve = NULL,
    .describe = dar_describe,
};

const lse_sim_type *const lse_sim_dar = &dar_type;
