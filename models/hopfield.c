#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/* Modern Hopfield network (Ramsauer et al. 2020; Tschantz section 4),
 * built only through the public graph API (docs/models/hopfield.md):
 *
 *   nodes  memories M (K, d)  PARAM | CLAMPED, parents
 *          state    Xi (n, d) free state, children
 *   terms  attract  LSE, sim = dot, beta:
 *                   E_a = -sum_i (1/beta) log sum_mu exp(beta xi_i . m_mu)
 *          bound    quadratic, scale 1: E_b = 1/2 ||Xi||_F^2
 *
 *   dE/dxi_i = xi_i - sum_mu A_i,mu m_mu,  A = softmax(beta Xi M')
 *
 * CCCP: the concave part E_a is linearised, the convex part minimised:
 * Xi <- A M, which is exactly a gradient step of size 1. */

struct lse_hopfield {
    gsl_matrix *patterns; /* (K, d) */
    double beta;
    lse_graph *g;
    lse_node *mem;   /* (K, d) */
    lse_node *state; /* (n, d) */
    lse_term *attract, *bound;
    size_t n_state;
    double tol_energy, tol_grad;
    lse_iter_fn cb;
    void *cb_user;
    lse_error last;
};

static const char *const node_memories = "memories";
static const char *const node_state = "state";

static lse_status fail_graph(lse_hopfield *h, lse_status st, const char *fn)
{
    const char *msg = h->g != NULL ? lse_graph_errmsg(h->g) : "";
    return lse_error_set(&h->last, st, fn, "%s",
                         msg[0] != '\0' ? msg : lse_strerror(st));
}

static int all_finite(const gsl_matrix *m)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            if (!isfinite(gsl_matrix_get(m, i, j)))
                return 0;
    return 1;
}

/* Build the graph with n state rows; the old graph is replaced only on
 * success. */
static lse_status build(lse_hopfield *h, size_t n, const char *fn)
{
    lse_graph *g = lse_graph_new();
    if (g == NULL)
        return lse_error_set(&h->last, LSE_ENOMEM, fn, "out of memory");
    const size_t K = h->patterns->size1, d = h->patterns->size2;
    lse_node *mem = NULL, *state = NULL;
    lse_term *attract = NULL, *bound = NULL;
    lse_status st = lse_graph_add_node(g, node_memories, K, d,
                                       LSE_NODE_PARAM | LSE_NODE_CLAMPED, &mem);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, node_state, n, d, 0, &state);
    if (st == LSE_OK)
        st = lse_node_set_value(mem, h->patterns);
    if (st == LSE_OK) {
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(state);
        spec.parent = lse_view_all(mem);
        spec.sim = lse_sim_dot;
        spec.beta = h->beta;
        st = lse_graph_add_lse(g, "attract", &spec, &attract);
    }
    if (st == LSE_OK) {
        const lse_quadratic_config q = {.scale = 1.0};
        const lse_view v = lse_view_all(state);
        st = lse_graph_add_custom(g, "bound", lse_custom_quadratic, &q, &v, 1,
                                  &bound);
    }
    if (st != LSE_OK) {
        lse_error_set(&h->last, st, fn, "building the graph: %s",
                      lse_graph_errmsg(g));
        lse_graph_free(g);
        return st;
    }
    lse_graph_free(h->g);
    h->g = g;
    h->mem = mem;
    h->state = state;
    h->attract = attract;
    h->bound = bound;
    h->n_state = n;
    return LSE_OK;
}

lse_status lse_hopfield_new(const gsl_matrix *patterns, double beta,
                            lse_hopfield **out, lse_error *err)
{
    static const char fn[] = "lse_hopfield_new";
    lse_gsl_quiet();
    if (out != NULL)
        *out = NULL;
    if (patterns == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL %s",
                             patterns == NULL ? "patterns" : "out");
    if (patterns->size1 == 0 || patterns->size2 == 0)
        return lse_error_set(err, LSE_EDIM, fn, "patterns are %zux%zu",
                             patterns->size1, patterns->size2);
    if (!isfinite(beta) || !(beta > 0.0))
        return lse_error_set(err, LSE_EDOM, fn,
                             "beta = %g, must be finite and > 0", beta);
    if (!all_finite(patterns))
        return lse_error_set(err, LSE_ENONFINITE, fn,
                             "patterns hold NaN or infinity");
    lse_hopfield *h = calloc(1, sizeof *h);
    if (h == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    h->beta = beta;
    h->tol_energy = 1e-12;
    h->tol_grad = 1e-10;
    h->patterns = gsl_matrix_alloc(patterns->size1, patterns->size2);
    if (h->patterns == NULL) {
        lse_hopfield_free(h);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_matrix_memcpy(h->patterns, patterns);
    const lse_status st = build(h, 1, fn);
    if (st != LSE_OK) {
        if (err != NULL)
            *err = h->last;
        lse_hopfield_free(h);
        return st;
    }
    *out = h;
    return LSE_OK;
}

void lse_hopfield_free(lse_hopfield *h)
{
    if (h == NULL)
        return;
    lse_graph_free(h->g);
    gsl_matrix_free(h->patterns);
    free(h);
}

const char *lse_hopfield_errmsg(const lse_hopfield *h)
{
    return h != NULL ? h->last.message : "";
}

size_t lse_hopfield_n_patterns(const lse_hopfield *h)
{
    return h != NULL ? h->patterns->size1 : 0;
}

size_t lse_hopfield_dim(const lse_hopfield *h)
{
    return h != NULL ? h->patterns->size2 : 0;
}

double lse_hopfield_beta(const lse_hopfield *h)
{
    return h != NULL ? h->beta : NAN;
}

lse_graph *lse_hopfield_graph(const lse_hopfield *h)
{
    return h != NULL ? h->g : NULL;
}

const gsl_matrix *lse_hopfield_softmax(const lse_hopfield *h)
{
    return h != NULL ? lse_term_softmax(h->attract) : NULL;
}

static lse_status lse_hopfield_set_tol_impl(lse_hopfield *h, double tol_energy,
                                            double tol_grad)
{
    if (h == NULL)
        return LSE_EFAULT;
    if (!isfinite(tol_energy) || !(tol_energy >= 0.0) || !isfinite(tol_grad) ||
        !(tol_grad >= 0.0))
        return lse_error_set(&h->last, LSE_EDOM, "lse_hopfield_set_tol",
                             "tol_energy = %g, tol_grad = %g: must be finite "
                             "and >= 0",
                             tol_energy, tol_grad);
    h->tol_energy = tol_energy;
    h->tol_grad = tol_grad;
    return LSE_OK;
}

lse_status lse_hopfield_set_tol(lse_hopfield *h, double tol_energy,
                                double tol_grad, lse_error *err)
{
    return lse_util_report(err,
                           lse_hopfield_set_tol_impl(h, tol_energy, tol_grad),
                           "lse_hopfield_set_tol", lse_hopfield_errmsg(h));
}

void lse_hopfield_set_callback(lse_hopfield *h, lse_iter_fn cb, void *user)
{
    if (h != NULL) {
        h->cb = cb;
        h->cb_user = user;
    }
}

/* Put @p x (n, d) into the state node, rebuilding for a new n. */
static lse_status load_state(lse_hopfield *h, const gsl_matrix *x,
                             const char *fn)
{
    if (x->size1 == 0 || x->size2 != h->patterns->size2)
        return lse_error_set(&h->last, LSE_EDIM, fn,
                             "states are %zux%zu, expected n x %zu (n >= 1)",
                             x->size1, x->size2, h->patterns->size2);
    if (x->size1 != h->n_state) {
        const lse_status st = build(h, x->size1, fn);
        if (st != LSE_OK)
            return st;
    }
    const lse_status st = lse_node_set_value(h->state, x);
    return st == LSE_OK ? LSE_OK : fail_graph(h, st, fn);
}

static lse_status lse_hopfield_energy_impl(lse_hopfield *h,
                                           const gsl_matrix *states,
                                           double *energy)
{
    static const char fn[] = "lse_hopfield_energy";
    if (h == NULL)
        return LSE_EFAULT;
    h->last = (lse_error){0};
    if (states == NULL || energy == NULL)
        return lse_error_set(&h->last, LSE_EFAULT, fn, "NULL argument");
    lse_status st = load_state(h, states, fn);
    if (st != LSE_OK)
        return st;
    st = lse_graph_energy(h->g, energy);
    return st == LSE_OK ? LSE_OK : fail_graph(h, st, fn);
}

lse_status lse_hopfield_energy(lse_hopfield *h, const gsl_matrix *states,
                               double *energy, lse_error *err)
{
    return lse_util_report(err, lse_hopfield_energy_impl(h, states, energy),
                           "lse_hopfield_energy", lse_hopfield_errmsg(h));
}

/* CCCP state update, the E-step hook: Xi <- A M with A the "attract"
 * softmax that the solver has just refreshed at the current Xi. A, M and
 * Xi are three different matrices, so the product needs no scratch. */
static lse_status cccp_estep(lse_graph *g, void *user)
{
    lse_hopfield *h = user;
    (void)g;
    const gsl_matrix *a = lse_term_softmax(h->attract); /* (n, K) */
    if (a == NULL)
        return lse_error_set(&h->last, LSE_EINTERNAL, "lse_hopfield_retrieve",
                             "the attract term keeps no softmax");
    const int rc =
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, a,
                       lse_node_value(h->mem), 0.0, lse_node_value(h->state));
    if (rc != 0)
        return lse_error_set(&h->last, lse_status_from_gsl(rc),
                             "lse_hopfield_retrieve", "CCCP product failed");
    return LSE_OK;
}

static lse_status
lse_hopfield_retrieve_impl(lse_hopfield *h, const gsl_matrix *queries,
                           lse_hopfield_method method, size_t max_iter,
                           gsl_matrix *states, lse_hopfield_info *info)
{
    static const char fn[] = "lse_hopfield_retrieve";
    if (h == NULL)
        return LSE_EFAULT;
    h->last = (lse_error){0};
    if (queries == NULL || states == NULL)
        return lse_error_set(&h->last, LSE_EFAULT, fn, "NULL %s",
                             queries == NULL ? "queries" : "states");
    if (method != LSE_HOPFIELD_CCCP && method != LSE_HOPFIELD_GD)
        return lse_error_set(&h->last, LSE_EINVAL, fn, "unknown method %d",
                             (int)method);
    if (states->size1 != queries->size1 || states->size2 != queries->size2)
        return lse_error_set(
            &h->last, LSE_EDIM, fn, "states are %zux%zu, queries %zux%zu",
            states->size1, states->size2, queries->size1, queries->size2);
    lse_status st = load_state(h, queries, fn);
    if (st != LSE_OK)
        return st;

    lse_solver *s = lse_solver_new(
        h->g, method == LSE_HOPFIELD_CCCP ? lse_solver_em : lse_solver_gd);
    if (s == NULL)
        return lse_error_set(&h->last, LSE_ENOMEM, fn, "out of memory");
    lse_solver_opts o = lse_solver_opts_default();
    o.tol_energy = h->tol_energy;
    o.tol_grad = method == LSE_HOPFIELD_GD ? h->tol_grad : 0.0;
    o.line_search = 1;
    o.step = 1.0;
    st = lse_solver_set_opts(s, &o);
    if (st == LSE_OK)
        st = lse_solver_set_nodes(s, &h->state, 1);
    if (st != LSE_OK) {
        lse_solver_free(s);
        return fail_graph(h, st, fn);
    }
    if (method == LSE_HOPFIELD_CCCP)
        lse_solver_set_estep(s, cccp_estep, h);

    lse_hopfield_info r = {.reason = LSE_STOP_MAX_ITER};
    st = lse_solver_init(s);
    r.energy_initial = lse_solver_energy(s);
    r.max_increase = -INFINITY;
    double prev = r.energy_initial;
    for (size_t it = 0; st == LSE_OK && it < max_iter; it++) {
        st = lse_solver_iterate(s);
        if (st != LSE_OK)
            break;
        const double e = lse_solver_energy(s);
        const double rise = e - prev;
        if (rise > r.max_increase)
            r.max_increase = rise;
        if (rise > 1e-12 * (fabs(e) > 1.0 ? fabs(e) : 1.0))
            r.n_increase++;
        prev = e;
        if (h->cb != NULL && h->cb(s, h->cb_user)) {
            r.reason = LSE_STOP_CALLBACK;
            break;
        }
        const lse_status t = lse_solver_test(s);
        if (t == LSE_OK) {
            r.converged = 1;
            r.reason = method == LSE_HOPFIELD_GD && h->tol_grad > 0.0 &&
                               lse_solver_grad_norm(s) <= h->tol_grad
                           ? LSE_STOP_GRAD
                           : LSE_STOP_ENERGY;
            break;
        }
    }
    r.n_iter = lse_solver_n_iter(s);
    lse_solver_free(s);
    if (st != LSE_OK) {
        if (h->last.message[0] == '\0')
            fail_graph(h, st, fn);
        return st;
    }
    /* final energy, softmax and gradient at the returned states */
    st = lse_graph_gradient(h->g, &r.energy);
    if (st != LSE_OK)
        return fail_graph(h, st, fn);
    const gsl_matrix *gr = lse_node_grad(h->state);
    double g2 = 0.0;
    for (size_t i = 0; i < gr->size1; i++)
        for (size_t j = 0; j < gr->size2; j++)
            g2 += gsl_matrix_get(gr, i, j) * gsl_matrix_get(gr, i, j);
    r.grad_norm = sqrt(g2);
    gsl_matrix_memcpy(states, lse_node_value(h->state));
    if (info != NULL)
        *info = r;
    return LSE_OK;
}

lse_status lse_hopfield_retrieve(lse_hopfield *h, const gsl_matrix *queries,
                                 lse_hopfield_method method, size_t max_iter,
                                 gsl_matrix *states, lse_hopfield_info *info,
                                 lse_error *err)
{
    return lse_util_report(
        err,
        lse_hopfield_retrieve_impl(h, queries, method, max_iter, states, info),
        "lse_hopfield_retrieve", lse_hopfield_errmsg(h));
}
