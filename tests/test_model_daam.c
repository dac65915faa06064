#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

/* DAAM model (models/daam.c, docs/models/daam.md). */

static void fill_random(gsl_matrix *m, unsigned long seed, double mean,
                        double sd)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(r);
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            gsl_matrix_set(m, i, j, mean + gsl_ran_gaussian(r, sd));
    gsl_rng_free(r);
}

/* A module on random data with high-entropy heads: delta ~ N(0, 0.5^2),
 * c in [0.6, 1.4]. */
static lse_daam *make(lse_daam_axis axis, size_t n, size_t d, size_t H,
                      gsl_matrix **x_out)
{
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    fill_random(x, 17, 0.3, 1.2);
    for (size_t i = 0; i < n; i++)
        *gsl_matrix_ptr(x, i, 0) += 2.0; /* unequal features */
    lse_daam *m = NULL;
    lse_error err;
    lse_assert_ok(lse_daam_new(H, d, axis, 1e-3, x, &m, &err));
    fill_random(lse_node_value(lse_daam_delta(m)), 23, 0.0, 0.5);
    gsl_matrix *c = lse_node_value(lse_daam_width(m));
    for (size_t h = 0; h < H; h++)
        gsl_matrix_set(c, h, 0, 0.6 + 0.8 * (double)(h + 1) / (double)(H + 1));
    *x_out = x;
    return m;
}

/* The paper's formula, written out: mean/var over the axis, y, g. */
static double direct_gate(const gsl_matrix *x, lse_daam_axis axis, double eps,
                          const gsl_matrix *delta, const gsl_matrix *c,
                          size_t h, size_t i, size_t j)
{
    const size_t n = x->size1, d = x->size2;
    double mean = 0.0, var = 0.0;
    const size_t len = axis == LSE_DAAM_ROWS ? n : d;
    for (size_t k = 0; k < len; k++)
        mean += axis == LSE_DAAM_ROWS ? gsl_matrix_get(x, k, j)
                                      : gsl_matrix_get(x, i, k);
    mean /= (double)len;
    for (size_t k = 0; k < len; k++) {
        const double v = (axis == LSE_DAAM_ROWS ? gsl_matrix_get(x, k, j)
                                                : gsl_matrix_get(x, i, k)) -
                         mean;
        var += v * v;
    }
    var /= (double)len;
    const double y =
        (gsl_matrix_get(x, i, j) - (mean + gsl_matrix_get(delta, h, j))) /
        sqrt(var + eps);
    const double ch = gsl_matrix_get(c, h, 0);
    return exp(-y * y / (2.0 * ch * ch));
}

START_TEST(test_forward_is_paper_formula)
{
    const lse_daam_axis axis = _i == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS;
    const size_t n = 7, d = 5, H = 3;
    gsl_matrix *x = NULL;
    lse_daam *m = make(axis, n, d, H, &x);
    const gsl_matrix *delta = lse_node_value(lse_daam_delta(m));
    const gsl_matrix *c = lse_node_value(lse_daam_width(m));
    gsl_matrix *out = gsl_matrix_alloc(n, H * d), *g = gsl_matrix_alloc(n, d);
    gsl_matrix *mixed = gsl_matrix_alloc(n, d);
    lse_assert_ok(lse_daam_forward(m, out, &model_err));
    lse_assert_ok(lse_daam_forward_mixed(m, mixed, &model_err));
    const gsl_matrix *s = lse_term_similarity(lse_daam_term(m));
    ck_assert_ptr_nonnull(s);
    for (size_t h = 0; h < H; h++) {
        lse_assert_ok(lse_daam_gate(m, h, g, &model_err));
        for (size_t i = 0; i < n; i++) {
            double logsum = 0.0;
            for (size_t j = 0; j < d; j++) {
                const double gw = direct_gate(x, axis, 1e-3, delta, c, h, i, j);
                ck_assert_double_eq_tol(gsl_matrix_get(g, i, j), gw, 1e-14);
                ck_assert_double_eq_tol(gsl_matrix_get(out, i, h * d + j),
                                        gsl_matrix_get(x, i, j) * gw, 1e-13);
                logsum += log(gw);
            }
            /* the term's score is the log of the product of the gates */
            ck_assert_double_eq_tol(gsl_matrix_get(s, i, h), logsum, 1e-11);
        }
    }
    /* mixed output: sum_h softmax_h(S_ih) x_i .* g_ih */
    for (size_t i = 0; i < n; i++) {
        double a[3], mx = -INFINITY, sum = 0.0;
        for (size_t h = 0; h < H; h++) {
            double ls = 0.0;
            for (size_t j = 0; j < d; j++)
                ls += log(direct_gate(x, axis, 1e-3, delta, c, h, i, j));
            a[h] = ls;
            mx = ls > mx ? ls : mx;
        }
        for (size_t h = 0; h < H; h++)
            sum += (a[h] = exp(a[h] - mx));
        for (size_t j = 0; j < d; j++) {
            double want = 0.0;
            for (size_t h = 0; h < H; h++)
                want += a[h] / sum * gsl_matrix_get(x, i, j) *
                        direct_gate(x, axis, 1e-3, delta, c, h, i, j);
            ck_assert_double_eq_tol(gsl_matrix_get(mixed, i, j), want, 1e-12);
        }
    }
    gsl_matrix_free(out);
    gsl_matrix_free(g);
    gsl_matrix_free(mixed);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

START_TEST(test_importance_factors)
{
    const lse_daam_axis axis = _i == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS;
    const size_t n = 9, d = 6, H = 2;
    gsl_matrix *x = NULL;
    lse_daam *m = make(axis, n, d, H, &x);
    gsl_vector *da = gsl_vector_alloc(d), *imp = gsl_vector_alloc(d);
    lse_assert_ok(lse_daam_importance(m, da, imp, &model_err));
    const gsl_matrix *a = lse_term_softmax(lse_daam_term(m));
    const gsl_matrix *delta = lse_node_value(lse_daam_delta(m));
    const gsl_matrix *c = lse_node_value(lse_daam_width(m));
    double lo = INFINITY, hi = -INFINITY;
    size_t n0 = 0, n1 = 0;
    for (size_t j = 0; j < d; j++) {
        double want = 0.0;
        for (size_t i = 0; i < n; i++)
            for (size_t h = 0; h < H; h++)
                want += gsl_matrix_get(a, i, h) *
                        direct_gate(x, axis, 1e-3, delta, c, h, i, j);
        want /= (double)n;
        ck_assert_double_eq_tol(gsl_vector_get(da, j), want, 1e-13);
        lo = want < lo ? want : lo;
        hi = want > hi ? want : hi;
        const double f = gsl_vector_get(imp, j);
        ck_assert(f >= 0.0 && f <= 1.0);
        n0 += f == 0.0;
        n1 += f == 1.0;
    }
    ck_assert_uint_ge(n0, 1);
    ck_assert_uint_ge(n1, 1);
    ck_assert_double_gt(hi, lo);
    for (size_t j = 0; j < d; j++)
        ck_assert_double_eq_tol(gsl_vector_get(imp, j),
                                (gsl_vector_get(da, j) - lo) / (hi - lo),
                                1e-12);
    ck_assert_double_eq(gsl_vector_min(imp), 0.0);
    ck_assert_double_eq(gsl_vector_max(imp), 1.0);
    /* NULL da is allowed */
    lse_assert_ok(lse_daam_importance(m, NULL, imp, &model_err));
    gsl_vector_free(da);
    gsl_vector_free(imp);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

START_TEST(test_importance_single_feature)
{
    gsl_matrix *x = gsl_matrix_alloc(4, 1);
    fill_random(x, 3, 0.0, 1.0);
    lse_daam *m = NULL;
    lse_assert_ok(lse_daam_new(2, 1, LSE_DAAM_ROWS, 1e-5, x, &m, NULL));
    gsl_vector *imp = gsl_vector_alloc(1);
    lse_assert_ok(lse_daam_importance(m, NULL, imp, &model_err));
    ck_assert_double_eq(gsl_vector_get(imp, 0), 1.0); /* all DA equal */
    gsl_vector_free(imp);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

/* Whole graph: x unclamped so the child gradient (through the mean and
 * variance over the axis) is checked too; delta and c. */
START_TEST(test_graph_gradient)
{
    const lse_daam_axis axis = _i == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS;
    gsl_matrix *x = NULL;
    lse_daam *m = make(axis, 6, 4, 3, &x);
    lse_node_set_clamped(lse_daam_data(m), 0);
    lse_node *nodes[3] = {lse_daam_data(m), lse_daam_delta(m),
                          lse_daam_width(m)};
    for (size_t k = 0; k < 3; k++) {
        lse_gradcheck res;
        lse_assert_ok(lse_graph_check_gradient(lse_daam_graph(m), nodes[k],
                                               1e-6, 1e-3, &res));
        ck_assert_msg(res.max_error < 1e-6, "axis %d %s: %g at %s (%g vs %g)",
                      _i, lse_node_name(nodes[k]), res.max_error, res.where,
                      res.analytic, res.numeric);
        ck_assert_uint_gt(res.n_checked, 0);
    }
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

/* E_fit equals the mixture NLL of the standardized rows, and its gradient
 * matches central differences. */
START_TEST(test_fit_energy_and_gradient)
{
    const lse_daam_axis axis = _i == 0 ? LSE_DAAM_FEATURES : LSE_DAAM_ROWS;
    const size_t n = 8, d = 3, H = 3;
    gsl_matrix *x = NULL;
    lse_daam *m = make(axis, n, d, H, &x);
    gsl_matrix *c = lse_node_value(lse_daam_width(m));
    gsl_matrix_set(c, 1, 0, -0.8127); /* the sign of c does not matter */
    gsl_matrix *delta = lse_node_value(lse_daam_delta(m));
    gsl_matrix *gd = gsl_matrix_alloc(H, d), *gc = gsl_matrix_alloc(H, 1);
    double e;
    lse_assert_ok(lse_daam_fit_energy(m, &e, gd, gc, &model_err));
    /* direct: -sum_i log (1/H) sum_h prod_j N(y_ihj; 0, c_h^2) */
    double want = 0.0;
    for (size_t i = 0; i < n; i++) {
        double p = 0.0;
        for (size_t h = 0; h < H; h++) {
            const double ch = fabs(gsl_matrix_get(c, h, 0));
            double dens = 1.0;
            for (size_t j = 0; j < d; j++)
                dens *= direct_gate(x, axis, 1e-3, delta, c, h, i, j) /
                        (sqrt(2.0 * 3.14159265358979323846) * ch);
            p += dens / (double)H;
        }
        want -= log(p);
    }
    ck_assert_double_eq_tol(e, want, 1e-10 * (1.0 + fabs(want)));
    const double h = 1e-6;
    for (int which = 0; which < 2; which++) {
        gsl_matrix *theta = which == 0 ? delta : c;
        const gsl_matrix *an = which == 0 ? gd : gc;
        for (size_t i = 0; i < theta->size1; i++)
            for (size_t j = 0; j < theta->size2; j++) {
                const double v = gsl_matrix_get(theta, i, j);
                double up, down;
                gsl_matrix_set(theta, i, j, v + h);
                lse_assert_ok(
                    lse_daam_fit_energy(m, &up, NULL, NULL, &model_err));
                gsl_matrix_set(theta, i, j, v - h);
                lse_assert_ok(
                    lse_daam_fit_energy(m, &down, NULL, NULL, &model_err));
                gsl_matrix_set(theta, i, j, v);
                const double num = (up - down) / (2 * h);
                const double a = gsl_matrix_get(an, i, j);
                double den = fabs(a) > fabs(num) ? fabs(a) : fabs(num);
                den = den > 1e-3 ? den : 1e-3;
                ck_assert_msg(fabs(a - num) / den < 1e-6,
                              "axis %d %s[%zu,%zu]: %.12g vs %.12g", _i,
                              which == 0 ? "delta" : "c", i, j, a, num);
            }
    }
    gsl_matrix_free(gd);
    gsl_matrix_free(gc);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

static gsl_matrix *read_iris(void)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    const size_t cols[4] = {0, 1, 2, 3};
    lse_assert_ok(lse_table_read(LSE_DATA_DIR "/iris.csv", NULL, &t, &err));
    lse_assert_ok(
        lse_table_to_matrix(t, cols, 4, LSE_MISSING_ERROR, &x, NULL, &err));
    lse_table_free(t);
    ck_assert_uint_eq(x->size1, 150);
    return x;
}

START_TEST(test_fit_lowers_energy)
{
    gsl_matrix *x = read_iris();
    lse_daam *m = NULL;
    lse_assert_ok(lse_daam_new(3, 4, LSE_DAAM_ROWS, 1e-5, x, &m, NULL));
    lse_assert_ok(lse_daam_init(m, 1, &model_err));
    /* step by step: never up */
    lse_daam_fit_report rep;
    double prev = INFINITY, first = NAN;
    for (int k = 0; k < 20; k++) {
        lse_assert_ok(lse_daam_fit(m, 1, 0.0, &rep, &model_err));
        if (k == 0)
            first = rep.energy_before;
        ck_assert_double_le(rep.energy_after, rep.energy_before);
        ck_assert_double_le(rep.energy_before, prev + 1e-9);
        prev = rep.energy_after;
    }
    lse_assert_ok(lse_daam_fit(m, 2000, 1e-9, &rep, &model_err));
    ck_assert(rep.converged);
    ck_assert_uint_eq(rep.n_collapsed, 0);
    /* measured: 808.016 -> 570.819 (docs/models/daam.md) */
    ck_assert_double_lt(rep.energy_after, first - 200.0);
    ck_assert_double_eq_tol(rep.energy_after, 570.8187, 1e-3);
    /* at the optimum the fit gradient is ~ 0 */
    gsl_matrix *gd = gsl_matrix_alloc(3, 4), *gc = gsl_matrix_alloc(3, 1);
    double e;
    lse_assert_ok(lse_daam_fit_energy(m, &e, gd, gc, &model_err));
    ck_assert_double_lt(fabs(gsl_matrix_max(gd)) + fabs(gsl_matrix_min(gd)),
                        1e-2);
    ck_assert_double_lt(fabs(gsl_matrix_max(gc)) + fabs(gsl_matrix_min(gc)),
                        1e-2);
    gsl_matrix_free(gd);
    gsl_matrix_free(gc);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

/* The case that collapsed before the width floor (energyviz's default
 * daam model): N = 8 standard normal vectors in d = 16 (mt19937, seed 1),
 * statistics over features, 4 heads started at rows (seed 1). Without the
 * floor one width fell to 7.9e-8 and the similarities to -6.4e15 while
 * E_fit kept falling. */
static lse_daam *collapsing_case(gsl_matrix **x_out)
{
    gsl_matrix *x = gsl_matrix_alloc(8, 16);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    ck_assert_ptr_nonnull(r);
    gsl_rng_set(r, 1);
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 16; j++)
            gsl_matrix_set(x, i, j, gsl_ran_gaussian(r, 1.0));
    gsl_rng_free(r);
    lse_daam *m = NULL;
    lse_assert_ok(lse_daam_new(4, 16, LSE_DAAM_FEATURES, 1e-5, x, &m, NULL));
    lse_assert_ok(lse_daam_init(m, 1, &model_err));
    *x_out = x;
    return m;
}

START_TEST(test_collapse_detected)
{
    /* _i = 0: the default floor; 1: a floor 100 times lower */
    gsl_matrix *x = NULL;
    lse_daam *m = collapsing_case(&x);
    ck_assert_double_eq(lse_daam_min_width(m), LSE_DAAM_MIN_WIDTH);
    const double floor = _i == 0 ? LSE_DAAM_MIN_WIDTH : 1e-3;
    lse_assert_ok(lse_daam_set_min_width(m, floor, &model_err));
    lse_daam_fit_report rep;
    lse_assert_ok(lse_daam_fit(m, 2000, 1e-9, &rep, &model_err));
    /* (with the low floor the narrow heads creep on for > 2000 steps) */
    ck_assert(_i == 1 || rep.converged);
    ck_assert(isfinite(rep.energy_after));
    ck_assert_double_lt(rep.energy_after, rep.energy_before);
    /* collapse reported: heads held at the floor, every width >= floor */
    ck_assert_uint_ge(rep.n_collapsed, 1);
    const gsl_matrix *c = lse_node_value(lse_daam_width(m));
    size_t at_floor = 0;
    for (size_t h = 0; h < 4; h++) {
        const double ch = fabs(gsl_matrix_get(c, h, 0));
        ck_assert_double_ge(ch, floor);
        at_floor += ch == floor;
    }
    if (_i == 0)
        ck_assert_uint_eq(at_floor, rep.n_collapsed);
    else /* not converged: a head may still be leaving the floor */
        ck_assert_uint_ge(at_floor, rep.n_collapsed);
    /* the similarities stay bounded by the floor: |S| <= sum_j y^2 / (2
     * floor^2) with |y| <= sqrt(d) + |delta|/sqrt(V) (each row has unit
     * variance over its features) */
    const gsl_matrix *s = lse_term_similarity(lse_daam_term(m));
    ck_assert(isfinite(gsl_matrix_min(s)));
    ck_assert_double_gt(gsl_matrix_min(s), -1e4 / (floor * floor));
    /* a second fit from the converged end point stays there */
    if (_i == 1) {
        gsl_matrix_free(x);
        lse_daam_free(m);
        return;
    }
    lse_daam_fit_report again;
    lse_assert_ok(lse_daam_fit(m, 2000, 1e-9, &again, &model_err));
    ck_assert_double_le(again.energy_after, rep.energy_after);
    ck_assert_double_ge(again.energy_after, rep.energy_after - 1e-6);
    ck_assert_uint_eq(again.n_collapsed, rep.n_collapsed);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

/* The gradient of E_fit at the guarded end point (some widths on the
 * floor) against central differences: the floor is a constraint of the
 * fit, E_fit and its gradient are unchanged by it. */
START_TEST(test_guarded_gradient)
{
    gsl_matrix *x = NULL;
    lse_daam *m = collapsing_case(&x);
    lse_daam_fit_report rep;
    lse_assert_ok(lse_daam_fit(m, 2000, 1e-9, &rep, &model_err));
    ck_assert_uint_ge(rep.n_collapsed, 1);
    gsl_matrix *delta = lse_node_value(lse_daam_delta(m));
    gsl_matrix *c = lse_node_value(lse_daam_width(m));
    gsl_matrix *gd = gsl_matrix_alloc(4, 16), *gc = gsl_matrix_alloc(4, 1);
    double e;
    lse_assert_ok(lse_daam_fit_energy(m, &e, gd, gc, &model_err));
    size_t pushed_down = 0;
    for (int which = 0; which < 2; which++) {
        gsl_matrix *theta = which == 0 ? delta : c;
        const gsl_matrix *an = which == 0 ? gd : gc;
        for (size_t i = 0; i < theta->size1; i++)
            for (size_t j = 0; j < theta->size2; j++) {
                const double v = gsl_matrix_get(theta, i, j);
                const double h = 1e-6 * (fabs(v) > 1.0 ? fabs(v) : 1.0);
                double up, down;
                gsl_matrix_set(theta, i, j, v + h);
                lse_assert_ok(
                    lse_daam_fit_energy(m, &up, NULL, NULL, &model_err));
                gsl_matrix_set(theta, i, j, v - h);
                lse_assert_ok(
                    lse_daam_fit_energy(m, &down, NULL, NULL, &model_err));
                gsl_matrix_set(theta, i, j, v);
                const double num = (up - down) / (2 * h);
                const double a = gsl_matrix_get(an, i, j);
                double den = fabs(a) > fabs(num) ? fabs(a) : fabs(num);
                /* E_fit ~ 1e2 has an ulp of 1.4e-14, so the central
                 * difference carries ~ 1e-8 of round-off: entries near 0
                 * are checked to 1e-7 absolute */
                den = den > 1e-1 ? den : 1e-1;
                ck_assert_msg(fabs(a - num) / den < 1e-6,
                              "%s[%zu,%zu]: %.12g vs %.12g",
                              which == 0 ? "delta" : "c", i, j, a, num);
                if (which == 1 && fabs(v) == LSE_DAAM_MIN_WIDTH &&
                    a * v > 0.0)
                    pushed_down++;
            }
    }
    /* at the floor the likelihood still wants narrower heads */
    ck_assert_uint_eq(pushed_down, rep.n_collapsed);
    gsl_matrix_free(gd);
    gsl_matrix_free(gc);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

START_TEST(test_min_width)
{
    gsl_matrix *x = read_iris();
    lse_daam *m = NULL;
    lse_assert_ok(lse_daam_new(3, 4, LSE_DAAM_ROWS, 1e-5, x, &m, NULL));
    lse_assert_ok(lse_daam_init(m, 1, &model_err));
    lse_assert_status(lse_daam_set_min_width(m, 0.0, &model_err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(model_err.message, "min_width"));
    lse_assert_status(lse_daam_set_min_width(m, -1.0, &model_err), LSE_EDOM);
    lse_assert_status(lse_daam_set_min_width(m, NAN, &model_err), LSE_EDOM);
    lse_assert_status(lse_daam_set_min_width(m, INFINITY, &model_err),
                      LSE_EDOM);
    lse_assert_status(lse_daam_set_min_width(NULL, 0.1, &model_err),
                      LSE_EFAULT);
    ck_assert(isnan(lse_daam_min_width(NULL)));
    ck_assert_double_eq(lse_daam_min_width(m), LSE_DAAM_MIN_WIDTH);
    /* a start below the floor is raised to it, the sign kept */
    gsl_matrix *c = lse_node_value(lse_daam_width(m));
    gsl_matrix_set(c, 0, 0, 0.01);
    gsl_matrix_set(c, 1, 0, -0.02);
    lse_assert_ok(lse_daam_set_min_width(m, 0.3, &model_err));
    lse_daam_fit_report rep;
    lse_assert_ok(lse_daam_fit(m, 0, 1e-9, &rep, &model_err));
    ck_assert_double_eq(gsl_matrix_get(c, 0, 0), 0.3);
    ck_assert_double_eq(gsl_matrix_get(c, 1, 0), -0.3);
    /* iris: a proper fit never touches the default floor */
    lse_assert_ok(lse_daam_set_min_width(m, LSE_DAAM_MIN_WIDTH, &model_err));
    lse_assert_ok(lse_daam_init(m, 1, &model_err));
    lse_assert_ok(lse_daam_fit(m, 2000, 1e-9, &rep, &model_err));
    ck_assert_uint_eq(rep.n_collapsed, 0);
    for (size_t h = 0; h < 3; h++)
        ck_assert_double_gt(fabs(gsl_matrix_get(c, h, 0)), 0.4);
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

START_TEST(test_init_at_rows)
{
    gsl_matrix *x = read_iris();
    lse_daam *m = NULL;
    lse_assert_ok(lse_daam_new(5, 4, LSE_DAAM_ROWS, 1e-5, x, &m, NULL));
    lse_assert_ok(lse_daam_init(m, 7, &model_err));
    const gsl_matrix *d = lse_node_value(lse_daam_delta(m));
    double mean[4] = {0};
    for (size_t i = 0; i < 150; i++)
        for (size_t j = 0; j < 4; j++)
            mean[j] += gsl_matrix_get(x, i, j) / 150.0;
    for (size_t h = 0; h < 5; h++) {
        int found = 0;
        for (size_t i = 0; i < 150 && !found; i++) {
            int same = 1;
            for (size_t j = 0; j < 4; j++)
                same =
                    same && fabs(gsl_matrix_get(d, h, j) -
                                 (gsl_matrix_get(x, i, j) - mean[j])) < 1e-12;
            found = same;
        }
        ck_assert_msg(found, "head %zu is not at a data row", h);
        ck_assert_double_eq(
            gsl_matrix_get(lse_node_value(lse_daam_width(m)), h, 0), 1.0);
    }
    gsl_matrix_free(x);
    lse_daam_free(m);
}
END_TEST

START_TEST(test_errors)
{
    gsl_matrix *x = gsl_matrix_alloc(3, 2);
    fill_random(x, 1, 0.0, 1.0);
    lse_daam *m = NULL;
    lse_error err;
    lse_assert_status(lse_daam_new(2, 2, LSE_DAAM_ROWS, 1e-5, NULL, &m, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_daam_new(2, 2, LSE_DAAM_ROWS, 1e-5, x, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_daam_new(0, 2, LSE_DAAM_ROWS, 1e-5, x, &m, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_daam_new(2, 3, LSE_DAAM_ROWS, 1e-5, x, &m, &err),
                      LSE_EDIM);
    ck_assert_ptr_nonnull(strstr(err.message, "3x2"));
    lse_assert_status(lse_daam_new(2, 2, (lse_daam_axis)5, 1e-5, x, &m, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_daam_new(2, 2, LSE_DAAM_ROWS, 0.0, x, &m, &err),
                      LSE_EDOM);
    gsl_matrix_set(x, 2, 1, INFINITY);
    lse_assert_status(lse_daam_new(2, 2, LSE_DAAM_ROWS, 1e-5, x, &m, &err),
                      LSE_ENONFINITE);
    gsl_matrix_set(x, 2, 1, 0.5);
    ck_assert_ptr_null(m);

    lse_assert_ok(lse_daam_new(4, 2, LSE_DAAM_ROWS, 1e-5, x, &m, &err));
    lse_assert_status(lse_daam_init(m, 1, &model_err),
                      LSE_EINVAL); /* 4 heads, 3 rows */
    ck_assert_ptr_nonnull(strstr(model_err.message, "4 heads"));
    gsl_matrix *g = gsl_matrix_alloc(3, 2), *bad = gsl_matrix_alloc(3, 3);
    lse_assert_status(lse_daam_gate(m, 4, g, &model_err), LSE_ERANGE);
    lse_assert_status(lse_daam_gate(m, 0, bad, &model_err), LSE_EDIM);
    lse_assert_status(lse_daam_gate(m, 0, NULL, &model_err), LSE_EFAULT);
    lse_assert_status(lse_daam_forward(m, g, &model_err), LSE_EDIM);
    lse_assert_status(lse_daam_forward_mixed(m, bad, &model_err), LSE_EDIM);
    gsl_matrix_set(lse_node_value(lse_daam_width(m)), 2, 0, 0.0);
    lse_assert_status(lse_daam_gate(m, 2, g, &model_err), LSE_EDOM);
    lse_assert_status(lse_daam_forward_mixed(m, g, &model_err), LSE_EDOM);
    ck_assert_ptr_nonnull(strstr(model_err.message, "daam"));
    gsl_matrix_set(lse_node_value(lse_daam_width(m)), 2, 0, 1.0);
    lse_assert_ok(lse_daam_gate(m, 2, g, &model_err));
    ck_assert_str_eq(lse_daam_errmsg(m), "");
    gsl_vector *v1 = gsl_vector_alloc(1), *v2 = gsl_vector_alloc(2);
    lse_assert_status(lse_daam_importance(m, NULL, v1, &model_err), LSE_EDIM);
    lse_assert_status(lse_daam_importance(m, v1, v2, &model_err), LSE_EDIM);
    lse_assert_status(lse_daam_importance(m, NULL, NULL, &model_err),
                      LSE_EFAULT);
    double e;
    lse_assert_status(lse_daam_fit_energy(m, NULL, NULL, NULL, &model_err),
                      LSE_EFAULT);
    lse_assert_status(lse_daam_fit_energy(m, &e, bad, NULL, &model_err),
                      LSE_EDIM);
    lse_assert_status(lse_daam_fit(m, 10, -1.0, NULL, &model_err), LSE_EDOM);
    lse_assert_status(lse_daam_set_data(m, bad, &model_err), LSE_EDIM);
    lse_assert_ok(lse_daam_set_data(m, x, &model_err));
    lse_assert_status(lse_daam_fit(NULL, 10, 0.0, NULL, &model_err),
                      LSE_EFAULT);
    ck_assert_uint_eq(lse_daam_n_head(m), 4);
    ck_assert_ptr_null(lse_daam_graph(NULL));
    ck_assert_str_eq(lse_daam_errmsg(NULL), "");
    gsl_vector_free(v1);
    gsl_vector_free(v2);
    gsl_matrix_free(g);
    gsl_matrix_free(bad);
    gsl_matrix_free(x);
    lse_daam_free(m);
    lse_daam_free(NULL);
}
END_TEST

/* The public error channel: a failing call fills the caller's lse_error
 * with the returned status and a message naming the function, and the
 * same call accepts a NULL lse_error. */
START_TEST(test_error_channel)
{
    double x = 0.0;
    lse_error e = {.status = LSE_OK, .message = "untouched"};
    lse_status st = lse_daam_forward(NULL, NULL, &e);
    ck_assert_int_eq(st, LSE_EFAULT);
    ck_assert_int_eq(e.status, st);
    ck_assert_ptr_nonnull(strstr(e.message, "lse_daam_forward"));
    ck_assert_int_eq(lse_daam_forward(NULL, NULL, NULL), st);
    (void)x;
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("model_daam");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_forward_is_paper_formula, 0, 2);
    tcase_add_loop_test(tc, test_importance_factors, 0, 2);
    tcase_add_test(tc, test_importance_single_feature);
    tcase_add_test(tc, test_error_channel);
    tcase_add_loop_test(tc, test_graph_gradient, 0, 2);
    tcase_add_loop_test(tc, test_fit_energy_and_gradient, 0, 2);
    tcase_add_test(tc, test_fit_lowers_energy);
    tcase_add_loop_test(tc, test_collapse_detected, 0, 2);
    tcase_add_test(tc, test_guarded_gradient);
    tcase_add_test(tc, test_min_width);
    tcase_add_test(tc, test_init_at_rows);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
