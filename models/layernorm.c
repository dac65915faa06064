#include <math.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Layer normalization as the gradient of an energy (Tschantz section 9),
 * built only through the public graph API (docs/models/layernorm.md):
 *
 *   nodes  x (B, D) free, gamma (1, 1) PARAM, delta (1, D) PARAM
 *   term   layernorm: lse_custom_layernorm,
 *          E = sum_i [D gamma sqrt(var_i + eps) + delta . x_i]
 *
 *   dE/dx_ij = gamma (x_ij - mean_i) / sqrt(var_i + eps) + delta_j */

struct lse_layernorm {
    lse_graph *g;
    lse_node *x, *gamma, *delta;
    lse_term *term;
    lse_error last;
};

static int all_finite(const gsl_matrix *m)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            if (!isfinite(gsl_matrix_get(m, i, j)))
                return 0;
    return 1;
}

lse_status lse_layernorm_new(const gsl_matrix *x, double gamma,
                             const gsl_vector *delta, double eps,
                             lse_layernorm **out, lse_error *err)
{
    static const char fn[] = "lse_layernorm_new";
    lse_gsl_quiet();
    if (out == NULL || x == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             x == NULL ? "x" : "out");
    *out = NULL;
    if (delta != NULL && delta->size != x->size2)
        return lse_error_set(err, LSE_EDIM, fn,
                             "delta has %zu entries, x has %zu columns",
                             delta->size, x->size2);
    if (!isfinite(gamma))
        return lse_error_set(err, LSE_EDOM, fn, "gamma = %g, must be finite",
                             gamma);
    if (!isfinite(eps) || !(eps > 0.0))
        return lse_error_set(err, LSE_EDOM, fn,
                             "eps = %g, must be finite and > 0", eps);
    if (!all_finite(x))
        return lse_error_set(err, LSE_ENONFINITE, fn,
                             "x holds NaN or infinity");
    for (size_t j = 0; delta != NULL && j < delta->size; j++)
        if (!isfinite(gsl_vector_get(delta, j)))
            return lse_error_set(err, LSE_ENONFINITE, fn,
                                 "delta[%zu] is not finite", j);
    lse_layernorm *ln = calloc(1, sizeof *ln);
    if (ln == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    ln->g = lse_graph_new();
    if (ln->g == NULL) {
        free(ln);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    const size_t D = x->size2;
    lse_status st = lse_graph_add_node(ln->g, "x", x->size1, D, 0, &ln->x);
    if (st == LSE_OK)
        st = lse_graph_add_node(ln->g, "gamma", 1, 1, LSE_NODE_PARAM,
                                &ln->gamma);
    if (st == LSE_OK)
        st = lse_graph_add_node(ln->g, "delta", 1, D, LSE_NODE_PARAM,
                                &ln->delta);
    if (st == LSE_OK)
        st = lse_node_set_value(ln->x, x);
    if (st == LSE_OK) {
        gsl_matrix_set(lse_node_value(ln->gamma), 0, 0, gamma);
        for (size_t j = 0; delta != NULL && j < D; j++)
            gsl_matrix_set(lse_node_value(ln->delta), 0, j,
                           gsl_vector_get(delta, j));
        const lse_layernorm_config cfg = {.eps = eps};
        const lse_view v[] = {lse_view_all(ln->x), lse_view_all(ln->gamma),
                              lse_view_all(ln->delta)};
        st = lse_graph_add_custom(ln->g, "layernorm", lse_custom_layernorm,
                                  &cfg, v, 3, &ln->term);
    }
    if (st != LSE_OK) {
        lse_error_set(err, st, fn, "%s", lse_graph_errmsg(ln->g));
        lse_layernorm_free(ln);
        return st;
    }
    *out = ln;
    return LSE_OK;
}

void lse_layernorm_free(lse_layernorm *ln)
{
    if (ln == NULL)
        return;
    lse_graph_free(ln->g);
    free(ln);
}

const char *lse_layernorm_errmsg(const lse_layernorm *ln)
{
    return ln != NULL ? ln->last.message : "";
}

lse_graph *lse_layernorm_graph(const lse_layernorm *ln)
{
    return ln != NULL ? ln->g : NULL;
}

static lse_status fail_graph(lse_layernorm *ln, lse_status st, const char *fn)
{
    const char *msg = lse_graph_errmsg(ln->g);
    return lse_error_set(&ln->last, st, fn, "%s",
                         msg[0] != '\0' ? msg : lse_strerror(st));
}

static lse_status lse_layernorm_set_input_impl(lse_layernorm *ln,
                                               const gsl_matrix *x)
{
    static const char fn[] = "lse_layernorm_set_input";
    if (ln == NULL)
        return LSE_EFAULT;
    ln->last = (lse_error){0};
    const lse_status st = lse_node_set_value(ln->x, x);
    return st == LSE_OK ? LSE_OK : fail_graph(ln, st, fn);
}

lse_status lse_layernorm_set_input(lse_layernorm *ln, const gsl_matrix *x,
                                   lse_error *err)
{
    return lse_util_report(err, lse_layernorm_set_input_impl(ln, x),
                           "lse_layernorm_set_input", lse_layernorm_errmsg(ln));
}

static lse_status lse_layernorm_energy_impl(lse_layernorm *ln, double *energy)
{
    static const char fn[] = "lse_layernorm_energy";
    if (ln == NULL)
        return LSE_EFAULT;
    ln->last = (lse_error){0};
    if (energy == NULL)
        return lse_error_set(&ln->last, LSE_EFAULT, fn, "NULL energy");
    const lse_status st = lse_graph_energy(ln->g, energy);
    return st == LSE_OK ? LSE_OK : fail_graph(ln, st, fn);
}

lse_status lse_layernorm_energy(lse_layernorm *ln, double *energy,
                                lse_error *err)
{
    return lse_util_report(err, lse_layernorm_energy_impl(ln, energy),
                           "lse_layernorm_energy", lse_layernorm_errmsg(ln));
}

static lse_status lse_layernorm_forward_impl(lse_layernorm *ln, gsl_matrix *out,
                                             double *energy)
{
    static const char fn[] = "lse_layernorm_forward";
    if (ln == NULL)
        return LSE_EFAULT;
    ln->last = (lse_error){0};
    if (out == NULL)
        return lse_error_set(&ln->last, LSE_EFAULT, fn, "NULL out");
    const gsl_matrix *x = lse_node_value(ln->x);
    if (out->size1 != x->size1 || out->size2 != x->size2)
        return lse_error_set(&ln->last, LSE_EDIM, fn,
                             "out is %zux%zu, x is %zux%zu", out->size1,
                             out->size2, x->size1, x->size2);
    double e;
    const lse_status st = lse_graph_gradient(ln->g, &e);
    if (st != LSE_OK)
        return fail_graph(ln, st, fn);
    gsl_matrix_memcpy(out, lse_node_grad(ln->x));
    if (energy != NULL)
        *energy = e;
    return LSE_OK;
}

lse_status lse_layernorm_forward(lse_layernorm *ln, gsl_matrix *out,
                                 double *energy, lse_error *err)
{
    return lse_util_report(err, lse_layernorm_forward_impl(ln, out, energy),
                           "lse_layernorm_forward", lse_layernorm_errmsg(ln));
}

lse_status lse_layernorm_apply(const gsl_matrix *x, double gamma,
                               const gsl_vector *delta, double eps,
                               gsl_matrix *out, lse_error *err)
{
    static const char fn[] = "lse_layernorm_apply";
    if (x == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             x == NULL ? "x" : "out");
    if (out->size1 != x->size1 || out->size2 != x->size2)
        return lse_error_set(err, LSE_EDIM, fn, "out is %zux%zu, x is %zux%zu",
                             out->size1, out->size2, x->size1, x->size2);
    lse_layernorm *ln = NULL;
    lse_status st = lse_layernorm_new(x, gamma, delta, eps, &ln, err);
    if (st != LSE_OK)
        return st;
    st = lse_layernorm_forward_impl(ln, out, NULL);
    if (st != LSE_OK)
        lse_error_set(err, st, fn, "%s", ln->last.message);
    lse_layernorm_free(ln);
    return st;
}
