#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Dynamic mixture attention (docs/models/dma.md), built only through the
 * public graph API:
 *
 *   nodes  next (T-1, d), prev (T-1, d) clamped; b (K, d), m (K, d),
 *          A (K, d d), chol PARAM
 *   terms  modes      LSE, sum of attention (x_t . m_k) and lingauss
 *                     (residual next - A_k prev - b_k), parents b
 *          gate-norm  custom: + sum_t log sum_k exp(x_t . m_k) */

/* ------------------------------------------------------------------ */
/* Attention of the context x_t to the mode's parent: S = x_t . m_k    */

static lse_status ca_check(const lse_sim_shape *sh, const void *cfg, char *msg,
                           size_t len)
{
    (void)cfg;
    if (sh->d_context == 0 || sh->param_rows[0] != sh->n_parent ||
        sh->param_cols[0] != sh->d_context) {
        snprintf(msg, len, "context-attention: m must be (n_parent, d_context)");
        return LSE_EDIM;
    }
    return LSE_OK;
}

static lse_status ca_work_new(const lse_sim_shape *sh, const void *cfg,
                              void **out)
{
    (void)sh;
    (void)cfg;
    *out = NULL;
    return LSE_OK;
}

static void ca_work_free(void *w) { (void)w; }

static lse_status ca_eval(const lse_sim_args *a, gsl_matrix *s)
{
    const gsl_matrix *m = a->param[0], *x = a->context;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t k = 0; k < m->size1; k++) {
            double d = 0.0;
            for (size_t j = 0; j < x->size2; j++)
                d += gsl_matrix_get(x, i, j) * gsl_matrix_get(m, k, j);
            gsl_matrix_set(s, i, k, d);
        }
    return LSE_OK;
}

static lse_status ca_grad(const lse_sim_args *a, const gsl_matrix *g,
                          const lse_sim_grads *out)
{
    const gsl_matrix *m = a->param[0], *x = a->context;
    gsl_matrix *gm = out->param != NULL ? out->param[0] : NULL;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t k = 0; k < m->size1; k++) {
            const double gik = gsl_matrix_get(g, i, k);
            for (size_t j = 0; j < x->size2; j++) {
                if (out->context != NULL)
                    *gsl_matrix_ptr(out->context, i, j) +=
                        gik * gsl_matrix_get(m, k, j);
                if (gm != NULL)
                    *gsl_matrix_ptr(gm, k, j) += gik * gsl_matrix_get(x, i, j);
            }
        }
    return LSE_OK;
}

static const char *const ca_params[] = {"m"};
static const lse_sim_type ca_type = {
    .name = "context-attention", .n_param = 1, .param_names = ca_params,
    .flags = LSE_SIM_NEEDS_CONTEXT, .check = ca_check,
    .work_new = ca_work_new, .work_free = ca_work_free, .eval = ca_eval,
    .grad = ca_grad};

const lse_sim_type *const lse_dma_attention_sim = &ca_type;

/* ------------------------------------------------------------------ */
/* Normaliser: + sum_t log sum_k exp(x_t . m_k); views x (n, d), m      */

static lse_status norm_check(const gsl_matrix *const *v, size_t n,
                             const void *cfg, char *msg, size_t len)
{
    (void)cfg;
    if (n != 2 || v[0]->size2 != v[1]->size2 ||
        v[1]->size1 > LSE_DMA_MAX_MODES) {
        snprintf(msg, len,
                 "gate normaliser: views x (n, d) and m (K, d), K <= %d",
                 LSE_DMA_MAX_MODES);
        return LSE_EDIM;
    }
    return LSE_OK;
}

static lse_status norm_eval(const gsl_matrix *const *v, gsl_matrix *const *gr,
                            double *energy)
{
    const gsl_matrix *x = v[0], *m = v[1];
    double e = 0.0, z[LSE_DMA_MAX_MODES];
    if (m->size1 > LSE_DMA_MAX_MODES)
        return LSE_EDIM;
    for (size_t i = 0; i < x->size1; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (size_t k = 0; k < m->size1; k++) {
            z[k] = 0.0;
            for (size_t j = 0; j < x->size2; j++)
                z[k] += gsl_matrix_get(x, i, j) * gsl_matrix_get(m, k, j);
            mx = fmax(mx, z[k]);
        }
        for (size_t k = 0; k < m->size1; k++)
            sum += exp(z[k] - mx);
        e += mx + log(sum);
        if (gr == NULL)
            continue;
        for (size_t k = 0; k < m->size1; k++) {
            const double p = exp(z[k] - mx) / sum;
            for (size_t j = 0; j < x->size2; j++) {
                if (gr[0] != NULL)
                    *gsl_matrix_ptr(gr[0], i, j) += p * gsl_matrix_get(m, k, j);
                if (gr[1] != NULL)
                    *gsl_matrix_ptr(gr[1], k, j) += p * gsl_matrix_get(x, i, j);
            }
        }
    }
    *energy = e;
    return LSE_OK;
}

static lse_status norm_energy(const gsl_matrix *const *v, size_t n,
                              const void *cfg, double *energy)
{
    (void)n;
    (void)cfg;
    return norm_eval(v, NULL, energy);
}

static lse_status norm_grad(const gsl_matrix *const *v, size_t n,
                            const void *cfg, gsl_matrix *const *gr,
                            double *energy)
{
    (void)n;
    (void)cfg;
    return norm_eval(v, gr, energy);
}

static const lse_custom_type norm_type = {
    .name = "gate-normaliser", .config_size = 0, .check = norm_check,
    .energy = norm_energy, .grad = norm_grad};

const lse_custom_type *const lse_dma_gate_norm = &norm_type;

/* ------------------------------------------------------------------ */
/* The model                                                           */

struct lse_dma {
    lse_dma_config c;
    lse_gaussian_config gcfg; /* borrowed by the sum config: lives here */
    lse_graph *g;
    lse_node *next, *prev, *p[4];
    lse_term *modes;
    lse_solver *solver;
};

lse_dma_config lse_dma_config_default(void)
{
    lse_dma_config c;
    memset(&c, 0, sizeof c);
    c.cov = LSE_COV_SPHERICAL;
    return c;
}

void lse_dma_free(lse_dma *m)
{
    if (m == NULL)
        return;
    lse_solver_free(m->solver);
    lse_graph_free(m->g);
    free(m);
}

lse_graph *lse_dma_graph(const lse_dma *m) { return m != NULL ? m->g : NULL; }

lse_node *lse_dma_node(const lse_dma *m, lse_dma_param which)
{
    return m != NULL && (unsigned)which <= LSE_DMA_CHOL ? m->p[which] : NULL;
}

lse_term *lse_dma_modes(const lse_dma *m)
{
    return m != NULL ? m->modes : NULL;
}

static lse_status graph_fail(lse_dma *m, lse_status st, lse_error *err,
                             const char *fn)
{
    return lse_util_set_error(err, st, "%s: %s", fn, lse_graph_errmsg(m->g));
}

static lse_status check_config(const lse_dma_config *c, lse_error *err)
{
    static const char fn[] = "lse_dma_new";
    if (c->n_modes == 0 || c->n_modes > LSE_DMA_MAX_MODES)
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: n_modes %zu, expected 1 .. %d", fn,
                                  c->n_modes, LSE_DMA_MAX_MODES);
    if (c->dim == 0 || c->T < 2)
        return lse_util_set_error(err, LSE_EDOM,
                                  "%s: dim %zu and T %zu: need d >= 1 and "
                                  "T >= 2",
                                  fn, c->dim, c->T);
    if (c->cov != LSE_COV_FULL && c->cov != LSE_COV_DIAG &&
        c->cov != LSE_COV_SPHERICAL)
        return lse_util_set_error(err, LSE_EINVAL,
                                  "%s: cov %d: expected full, diag or "
                                  "spherical (one noise covariance per mode)",
                                  fn, (int)c->cov);
    if (c->dim > SIZE_MAX / c->dim || c->T > SIZE_MAX / c->dim)
        return lse_util_set_error(err, LSE_ENOMEM,
                                  "%s: dim %zu x T %zu overflows", fn, c->dim,
                                  c->T);
    return LSE_OK;
}

static lse_status build(lse_dma *m)
{
    const size_t K = m->c.n_modes, d = m->c.dim, n = m->c.T - 1;
    lse_status st = lse_graph_add_node(m->g, "next", n, d, LSE_NODE_CLAMPED,
                                       &m->next);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "prev", n, d, LSE_NODE_CLAMPED, &m->prev);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "b", K, d, LSE_NODE_PARAM, &m->p[0]);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "m", K, d, LSE_NODE_PARAM, &m->p[1]);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "A", K, d * d, LSE_NODE_PARAM, &m->p[2]);
    if (st == LSE_OK)
        st = lse_graph_add_node(m->g, "chol", lse_cov_chol_rows(m->c.cov, K),
                                lse_cov_chol_cols(m->c.cov, d), LSE_NODE_PARAM,
                                &m->p[3]);
    if (st != LSE_OK)
        return st;
    lse_cov_chol_scaled_identity(m->c.cov, d, 1.0, lse_node_value(m->p[3]));
    m->gcfg.cov = m->c.cov;
    m->gcfg.model = LSE_COV_MODEL_NONE;
    lse_sum_config sc;
    memset(&sc, 0, sizeof sc);
    sc.n = 2;
    sc.type[0] = &ca_type;
    sc.type[1] = lse_sim_lingauss;
    sc.config[1] = &m->gcfg;
    sc.weight[0] = sc.weight[1] = 1.0;
    /* alpha; m; logw, A, chol; the rest of the sum's slots absent */
    lse_node *params[1 + LSE_SUM_MAX_PARAM] = {NULL, m->p[1], NULL, m->p[2],
                                               m->p[3]};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(m->next);
    spec.parent = lse_view_all(m->p[0]);
    spec.context = lse_view_all(m->prev);
    spec.sim = lse_sim_sum;
    spec.config = &sc;
    spec.param = params;
    st = lse_graph_add_lse(m->g, "modes", &spec, &m->modes);
    lse_view nv[2] = {lse_view_all(m->prev), lse_view_all(m->p[1])};
    if (st == LSE_OK)
        st = lse_graph_add_custom(m->g, "gate-norm", &norm_type, NULL, nv, 2,
                                  NULL);
    if (st != LSE_OK)
        return st;
    m->solver = lse_solver_new(m->g, lse_solver_gd);
    if (m->solver == NULL)
        return LSE_ENOMEM;
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = 1e-10;
    return lse_solver_set_opts(m->solver, &so);
}

lse_status lse_dma_new(const lse_dma_config *config, lse_dma **out,
                       lse_error *err)
{
    static const char fn[] = "lse_dma_new";
    if (config == NULL || out == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    *out = NULL;
    lse_status st = check_config(config, err);
    if (st != LSE_OK)
        return st;
    lse_dma *m = calloc(1, sizeof *m);
    if (m == NULL || (m->g = lse_graph_new()) == NULL) {
        free(m);
        return lse_util_set_error(err, LSE_ENOMEM, "%s: out of memory", fn);
    }
    m->c = *config;
    st = build(m);
    if (st != LSE_OK) {
        graph_fail(m, st, err, fn);
        lse_dma_free(m);
        return st;
    }
    *out = m;
    return LSE_OK;
}

lse_status lse_dma_set_series(lse_dma *m, const gsl_matrix *x, lse_error *err)
{
    static const char fn[] = "lse_dma_set_series";
    if (m == NULL || x == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    if (x->size1 != m->c.T || x->size2 != m->c.dim)
        return lse_util_set_error(err, LSE_EDIM,
                                  "%s: series is (%zu, %zu), expected (T, d) "
                                  "= (%zu, %zu)",
                                  fn, x->size1, x->size2, m->c.T, m->c.dim);
    size_t r, c;
    if (lse_util_find_nonfinite(x, &r, &c))
        return lse_util_set_error(err, LSE_ENONFINITE,
                                  "%s: series[%zu, %zu] is not finite", fn, r,
                                  c);
    gsl_matrix_const_view p = gsl_matrix_const_submatrix(x, 0, 0, m->c.T - 1,
                                                         m->c.dim);
    gsl_matrix_const_view n = gsl_matrix_const_submatrix(x, 1, 0, m->c.T - 1,
                                                         m->c.dim);
    gsl_matrix_memcpy(lse_node_value(m->prev), &p.matrix);
    gsl_matrix_memcpy(lse_node_value(m->next), &n.matrix);
    return LSE_OK;
}

lse_status lse_dma_energy(lse_dma *m, double *energy, lse_error *err)
{
    static const char fn[] = "lse_dma_energy";
    if (m == NULL || energy == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    const lse_status st = lse_graph_energy(m->g, energy);
    return st == LSE_OK ? st : graph_fail(m, st, err, fn);
}

typedef struct monitor {
    double prev;
    size_t n_increase;
} monitor;

static int count_rises(const lse_solver *s, void *user)
{
    monitor *w = user;
    const double e = lse_solver_energy(s);
    if (e > w->prev + 1e-12 * fmax(1.0, fabs(e)))
        w->n_increase++;
    w->prev = e;
    return 0;
}

lse_status lse_dma_fit(lse_dma *m, size_t max_iter, lse_dma_fit_info *info,
                       lse_error *err)
{
    static const char fn[] = "lse_dma_fit";
    if (m == NULL)
        return lse_util_set_error(err, LSE_EFAULT, "%s: NULL argument", fn);
    double e0;
    lse_status st = lse_graph_energy(m->g, &e0);
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    monitor w = {e0, 0};
    lse_solver_result res;
    st = lse_solver_run(m->solver, max_iter, count_rises, &w, &res);
    if (st != LSE_OK)
        return graph_fail(m, st, err, fn);
    if (info != NULL) {
        info->n_iter = res.n_iter;
        info->converged = res.converged;
        info->energy_initial = e0;
        info->energy = res.energy;
        info->n_increase = w.n_increase;
    }
    return LSE_OK;
}
