#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph-private.h"

/* Custom terms: an energy and a gradient callback over views. */

static lse_status custom_eval(lse_term *t, int want_grad);

/* The custom part of a term (lse_term_free frees the rest). */
static void custom_free(lse_term *t)
{
    free(t->views);
    free(t->value_views);
    free(t->grad_views);
    free(t->values);
    free(t->grads);
}

static const lse_term_ops custom_ops = {custom_eval, custom_free, NULL};

lse_status lse_graph_add_custom(lse_graph *g, const char *name,
                                const lse_custom_type *type,
                                const void *config, const lse_view *views,
                                size_t n_view, lse_term **out)
{
    static const char fn[] = "lse_graph_add_custom";
    if (out != NULL)
        *out = NULL;
    if (g == NULL)
        return LSE_EFAULT;
    g->errmsg[0] = '\0';
    if (type == NULL || type->energy == NULL || type->grad == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn,
                              "custom type with energy and grad required");
    if (views == NULL || n_view == 0)
        return lse_graph_fail(g, LSE_EFAULT, fn, "term '%s': no views",
                              name != NULL ? name : "?");
    lse_term *t = NULL;
    lse_status st = lse_graph_add_term_slot(g, name, fn, &custom_ops, &t);
    if (st != LSE_OK)
        return st;
    t->kind = LSE_TERM_CUSTOM;
    t->custom = type;
    t->beta = 1.0;
    t->n_view = n_view;
    t->views = calloc(n_view, sizeof *t->views);
    t->value_views = calloc(n_view, sizeof *t->value_views);
    t->grad_views = calloc(n_view, sizeof *t->grad_views);
    t->values = calloc(n_view, sizeof *t->values);
    t->grads = calloc(n_view, sizeof *t->grads);
    if (t->views == NULL || t->value_views == NULL || t->grad_views == NULL ||
        t->values == NULL || t->grads == NULL) {
        st = lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_view; i++) {
        t->views[i] = views[i];
        char what[32];
        snprintf(what, sizeof what, "view %zu", i);
        st = lse_check_view(g, &t->views[i], what, fn, name);
        if (st != LSE_OK)
            goto fail;
    }
    if (type->config_size > 0 && config != NULL) {
        t->config_owned = malloc(type->config_size);
        if (t->config_owned == NULL) {
            st = lse_graph_fail(g, LSE_ENOMEM, fn, "out of memory");
            goto fail;
        }
        memcpy(t->config_owned, config, type->config_size);
        t->config = t->config_owned;
    } else {
        t->config = config;
    }
    if (type->check != NULL) {
        for (size_t i = 0; i < n_view; i++) {
            t->value_views[i] = lse_view_value(&t->views[i]);
            t->values[i] = &t->value_views[i].matrix;
        }
        char msg[512] = "";
        st = type->check(t->values, n_view, t->config, msg, sizeof msg);
        if (st != LSE_OK) {
            lse_graph_fail(g, st, fn, "term '%s': %s", name,
                           msg[0] ? msg : lse_strerror(st));
            goto fail;
        }
    }
    g->terms[g->n_terms++] = t;
    if (out != NULL)
        *out = t;
    return LSE_OK;
fail:
    lse_term_free(t);
    return st;
}

static lse_status custom_eval(lse_term *t, int want_grad)
{
    for (size_t i = 0; i < t->n_view; i++) {
        t->value_views[i] = lse_view_value(&t->views[i]);
        t->values[i] = &t->value_views[i].matrix;
        t->grads[i] = NULL;
        if (want_grad && !(t->views[i].node->flags & LSE_NODE_CLAMPED)) {
            t->grad_views[i] = lse_view_grad(&t->views[i]);
            t->grads[i] = &t->grad_views[i].matrix;
        }
    }
    double e = NAN;
    const lse_status st =
        want_grad ? t->custom->grad(t->values, t->n_view, t->config, t->grads, &e)
                  : t->custom->energy(t->values, t->n_view, t->config, &e);
    if (st != LSE_OK)
        return lse_graph_fail(t->graph, st,
                              want_grad ? "lse_graph_gradient" : "lse_graph_energy",
                              "term '%s': %s: %s", t->name, t->custom->name,
                              lse_strerror(st));
    t->energy = e;
    return LSE_OK;
}

/* Quadratic: E = scale/2 ||x - x0||^2 ----------------------------------- */

static double quad_scale(const void *config)
{
    return config != NULL ? ((const lse_quadratic_config *)config)->scale : 1.0;
}

static lse_status quad_check(const gsl_matrix *const *v, size_t n,
                             const void *config, char *msg, size_t len)
{
    if (n != 1 && n != 2) {
        snprintf(msg, len, "quadratic takes 1 or 2 views, got %zu", n);
        return LSE_EINVAL;
    }
    const double s = quad_scale(config);
    if (!isfinite(s) || s < 0.0) {
        snprintf(msg, len, "quadratic: scale = %g, must be finite and >= 0", s);
        return LSE_EDOM;
    }
    if (n == 2 && (v[1]->size2 != v[0]->size2 ||
                   (v[1]->size1 != v[0]->size1 && v[1]->size1 != 1))) {
        snprintf(msg, len, "quadratic: center is %zux%zu, x is %zux%zu",
                 v[1]->size1, v[1]->size2, v[0]->size1, v[0]->size2);
        return LSE_EDIM;
    }
    return LSE_OK;
}

static lse_status quad_eval(const gsl_matrix *const *v, size_t n,
                            const void *config, gsl_matrix *const *grad,
                            double *energy)
{
    const double s = quad_scale(config);
    const gsl_matrix *x = v[0], *c = n == 2 ? v[1] : NULL;
    double e = 0.0;
    for (size_t i = 0; i < x->size1; i++) {
        const size_t ci = c != NULL && c->size1 > 1 ? i : 0;
        for (size_t j = 0; j < x->size2; j++) {
            const double r =
                gsl_matrix_get(x, i, j) - (c ? gsl_matrix_get(c, ci, j) : 0.0);
            e += r * r;
            if (grad == NULL)
                continue;
            if (grad[0] != NULL)
                *gsl_matrix_ptr(grad[0], i, j) += s * r;
            if (c != NULL && grad[1] != NULL)
                *gsl_matrix_ptr(grad[1], ci, j) -= s * r;
        }
    }
    *energy = 0.5 * s * e;
    return LSE_OK;
}

static lse_status quad_energy(const gsl_matrix *const *v, size_t n,
                              const void *config, double *energy)
{
    return quad_eval(v, n, config, NULL, energy);
}

static int quad_describe(const void *config, char *buf, size_t len)
{
    return snprintf(buf, len, "scale=%g", quad_scale(config));
}

static const lse_custom_type quadratic_type = {
    .name = "quadratic",
    .config_size = sizeof(lse_quadratic_config),
    .check = quad_check,
    .energy = quad_energy,
    .grad = quad_eval,
    .describe = quad_describe};
const lse_custom_type *const lse_custom_quadratic = &quadratic_type;

/* LayerNorm energy ------------------------------------------------------
 * E = sum_i [D gamma sqrt(var_i + eps) + delta . x_i] with a scalar gamma;
 * dE/dx_ij = gamma (x_ij - mean_i) / sqrt(var_i + eps) + delta_j, the
 * LayerNorm output (docs/models.md: why gamma must be a scalar).
 * dE/dgamma = sum_i D sqrt(var_i + eps), dE/ddelta_j = sum_i x_ij. */

static double ln_eps(const void *config)
{
    return config != NULL ? ((const lse_layernorm_config *)config)->eps : 1e-5;
}

static lse_status ln_check(const gsl_matrix *const *v, size_t n,
                           const void *config, char *msg, size_t len)
{
    if (n != 3) {
        snprintf(msg, len, "layernorm takes 3 views (x, gamma, delta), got %zu",
                 n);
        return LSE_EINVAL;
    }
    const double eps = ln_eps(config);
    if (!isfinite(eps) || !(eps > 0.0)) {
        snprintf(msg, len, "layernorm: eps = %g, must be > 0", eps);
        return LSE_EDOM;
    }
    if (v[1]->size1 != 1 || v[1]->size2 != 1) {
        snprintf(msg, len, "layernorm: gamma is %zux%zu, expected 1x1 (a "
                 "per-dimension gain has no exact energy)",
                 v[1]->size1, v[1]->size2);
        return LSE_EDIM;
    }
    if (v[2]->size1 != 1 || v[2]->size2 != v[0]->size2) {
        snprintf(msg, len, "layernorm: delta is %zux%zu, expected 1x%zu",
                 v[2]->size1, v[2]->size2, v[0]->size2);
        return LSE_EDIM;
    }
    return LSE_OK;
}

static lse_status ln_eval(const gsl_matrix *const *v, size_t n,
                          const void *config, gsl_matrix *const *grad,
                          double *energy)
{
    (void)n;
    const gsl_matrix *x = v[0];
    const double gamma = gsl_matrix_get(v[1], 0, 0), eps = ln_eps(config);
    const size_t D = x->size2;
    double e = 0.0;
    for (size_t i = 0; i < x->size1; i++) {
        double mean = 0.0;
        for (size_t j = 0; j < D; j++)
            mean += gsl_matrix_get(x, i, j);
        mean /= (double)D;
        double var = 0.0, dx = 0.0;
        for (size_t j = 0; j < D; j++) {
            const double r = gsl_matrix_get(x, i, j) - mean;
            var += r * r;
            dx += gsl_matrix_get(v[2], 0, j) * gsl_matrix_get(x, i, j);
        }
        var /= (double)D;
        const double sd = sqrt(var + eps);
        e += (double)D * gamma * sd + dx;
        if (grad == NULL)
            continue;
        for (size_t j = 0; j < D; j++) {
            const double xij = gsl_matrix_get(x, i, j);
            if (grad[0] != NULL)
                *gsl_matrix_ptr(grad[0], i, j) +=
                    gamma * (xij - mean) / sd + gsl_matrix_get(v[2], 0, j);
            if (grad[2] != NULL)
                *gsl_matrix_ptr(grad[2], 0, j) += xij;
        }
        if (grad[1] != NULL)
            *gsl_matrix_ptr(grad[1], 0, 0) += (double)D * sd;
    }
    *energy = e;
    return LSE_OK;
}

static lse_status ln_energy(const gsl_matrix *const *v, size_t n,
                            const void *config, double *energy)
{
    return ln_eval(v, n, config, NULL, energy);
}

static int ln_describe(const void *config, char *buf, size_t len)
{
    return snprintf(buf, len, "eps=%g", ln_eps(config));
}

static const lse_custom_type layernorm_type = {
    .name = "layernorm",
    .config_size = sizeof(lse_layernorm_config),
    .check = ln_check,
    .energy = ln_energy,
    .grad = ln_eval,
    .describe = ln_describe};
const lse_custom_type *const lse_custom_layernorm = &layernorm_type;
