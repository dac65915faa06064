#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* Exact statistics (docs/core.md): lse_sim_lingauss's stats_exact against
 * stats, invariance under any split of the rows, and the EM solver's
 * exact_stats mode (lse_solver_opts.exact_stats). */

enum { P_LOGW = 0, P_A = 1, P_CHOL = 2, N_PARAM = 3 };
enum { N = 523, K = 3, D = 2, DC = 4 };

static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_DIAG,
                                    LSE_COV_SPHERICAL, LSE_COV_TIED};

typedef struct inst {
    lse_gaussian_config cfg;
    gsl_matrix *child, *context, *parent, *param[N_PARAM], *resp;
    size_t rows[N_PARAM], cols[N_PARAM];
    lse_sim_shape shape;
    void *work;
} inst;

static void inst_init(inst *in, lse_cov_type cov, unsigned long seed)
{
    memset(in, 0, sizeof *in);
    in->cfg.cov = cov;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    in->child = gsl_matrix_alloc(N, D);
    in->context = gsl_matrix_alloc(N, DC);
    in->parent = gsl_matrix_alloc(K, D);
    in->resp = gsl_matrix_alloc(N, K);
    in->param[P_A] = gsl_matrix_alloc(K, D * DC);
    const size_t cr = cov == LSE_COV_TIED ? 1 : K;
    const size_t cc = cov == LSE_COV_DIAG ? D : cov == LSE_COV_SPHERICAL ? 1
                                                                         : D * D;
    in->param[P_CHOL] = gsl_matrix_alloc(cr, cc);
    for (size_t i = 0; i < N; i++) {
        /* magnitudes over many binades: the sums round differently in
         * other orders */
        const double sc = ldexp(1.0, (int)(i % 23) - 11);
        for (size_t j = 0; j < DC; j++)
            gsl_matrix_set(in->context, i, j,
                           sc * (0.2 + gsl_ran_gaussian(rng, 1.0)));
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(in->child, i, j,
                           sc * (-0.1 + 1.2 * gsl_ran_gaussian(rng, 1.0)));
        double s = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double u = 0.05 + gsl_rng_uniform(rng);
            gsl_matrix_set(in->resp, i, k, u);
            s += u;
        }
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(in->resp, i, k, gsl_matrix_get(in->resp, i, k) / s);
    }
    for (size_t k = 0; k < K; k++) {
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(in->parent, k, j, 0.5 * gsl_ran_gaussian(rng, 1.0));
        for (size_t j = 0; j < D * DC; j++)
            gsl_matrix_set(in->param[P_A], k, j,
                           0.6 * (gsl_rng_uniform(rng) - 0.45));
    }
    gsl_matrix_set_zero(in->param[P_CHOL]);
    for (size_t k = 0; k < cr; k++)
        for (size_t j = 0; j < cc; j++)
            if (cc < D * D || j % (D + 1) == 0)
                gsl_matrix_set(in->param[P_CHOL], k, j, 0.7 + 0.1 * (double)k);
    in->rows[P_A] = K;
    in->cols[P_A] = D * DC;
    in->rows[P_CHOL] = cr;
    in->cols[P_CHOL] = cc;
    in->shape = (lse_sim_shape){.n_child = N,
                                .block = N,
                                .n_parent = K,
                                .d_child = D,
                                .d_parent = D,
                                .d_context = DC,
                                .n_param = N_PARAM,
                                .param_rows = in->rows,
                                .param_cols = in->cols};
    char msg[256] = "";
    ck_assert_msg(lse_sim_lingauss->check(&in->shape, &in->cfg, msg,
                                          sizeof msg) == LSE_OK,
                  "%s", msg);
    lse_assert_ok(lse_sim_lingauss->work_new(&in->shape, &in->cfg, &in->work));
    gsl_rng_free(rng);
}

static void inst_free(inst *in)
{
    lse_sim_lingauss->work_free(in->work);
    gsl_matrix_free(in->child);
    gsl_matrix_free(in->context);
    gsl_matrix_free(in->parent);
    gsl_matrix_free(in->resp);
    for (size_t k = 0; k < N_PARAM; k++)
        gsl_matrix_free(in->param[k]);
}

/* args and responsibilities for rows [r0, r0 + b) */
typedef struct rows_view {
    gsl_matrix_view c, x, r;
    lse_sim_args a;
} rows_view;

static void rows_of(const inst *in, size_t r0, size_t b, rows_view *v)
{
    v->c = gsl_matrix_submatrix(in->child, r0, 0, b, D);
    v->x = gsl_matrix_submatrix(in->context, r0, 0, b, DC);
    v->r = gsl_matrix_submatrix(in->resp, r0, 0, b, K);
    v->a = (lse_sim_args){.child = &v->c.matrix,
                          .parent = in->parent,
                          .context = &v->x.matrix,
                          .child_offset = r0,
                          .param = (const gsl_matrix *const *)in->param,
                          .config = &in->cfg,
                          .work = in->work};
}

/* Exact statistics with the rows cut at random points into parts, each
 * part's accumulators filled in blocks of random size, the parts merged in
 * reverse order; rounded into out. */
static void exact_split(inst *in, gsl_rng *rng, size_t n_acc, double *out)
{
    enum { PARTS = 4 };
    lse_xsum *part = calloc(PARTS * n_acc, sizeof *part);
    ck_assert_ptr_nonnull(part);
    size_t cut[PARTS + 1] = {0, 0, 0, 0, N};
    for (size_t p = 1; p < PARTS; p++)
        cut[p] = cut[p - 1] + gsl_rng_uniform_int(rng, N - cut[p - 1] + 1);
    for (size_t p = 0; p < PARTS; p++)
        for (size_t r0 = cut[p]; r0 < cut[p + 1];) {
            size_t b = 1 + gsl_rng_uniform_int(rng, 97);
            if (b > cut[p + 1] - r0)
                b = cut[p + 1] - r0;
            rows_view v;
            rows_of(in, r0, b, &v);
            lse_assert_ok(lse_sim_lingauss->stats_exact(
                &v.a, &v.r.matrix, NULL, part + p * n_acc));
            r0 += b;
        }
    for (size_t p = PARTS - 1; p-- > 0;)
        for (size_t i = 0; i < n_acc; i++)
            lse_xsum_merge(&part[p * n_acc + i], &part[(p + 1) * n_acc + i]);
    for (size_t i = 0; i < n_acc; i++)
        out[i] = lse_xsum_round(&part[i]);
    free(part);
}

START_TEST(test_lingauss_exact_stats)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 3);
    for (size_t c = 0; c < 4; c++) {
        inst in;
        inst_init(&in, covs[c], 10 + c);
        lse_assert_ok(lse_sim_lingauss->prepare(&(lse_sim_args){
            .child = in.child,
            .parent = in.parent,
            .context = in.context,
            .param = (const gsl_matrix *const *)in.param,
            .config = &in.cfg,
            .work = in.work}));
        const size_t n_acc = lse_sim_lingauss->stats_size(&in.shape, &in.cfg);
        double *plain = calloc(n_acc, sizeof *plain);
        double *ex1 = calloc(n_acc, sizeof *ex1);
        double *ex2 = calloc(n_acc, sizeof *ex2);
        ck_assert(plain && ex1 && ex2);
        rows_view v;
        rows_of(&in, 0, N, &v);
        lse_assert_ok(lse_sim_lingauss->stats(&v.a, &v.r.matrix, NULL, plain));
        exact_split(&in, rng, n_acc, ex1);
        for (int rep = 0; rep < 5; rep++) {
            exact_split(&in, rng, n_acc, ex2);
            ck_assert_msg(memcmp(ex1, ex2, n_acc * sizeof *ex1) == 0,
                          "cov %zu: exact statistics depend on the split", c);
        }
        /* the same sums as stats, up to its rounding; entries that
         * stats_exact leaves empty are the mirrored ones (0) */
        size_t n_empty = 0;
        for (size_t i = 0; i < n_acc; i++) {
            if (ex1[i] == 0.0 && plain[i] != 0.0) {
                n_empty++;
                continue;
            }
            ck_assert_msg(fabs(ex1[i] - plain[i]) <=
                              1e-12 * fmax(1.0, fabs(plain[i])),
                          "cov %zu statistic %zu: %.17g vs %.17g", c, i,
                          ex1[i], plain[i]);
        }
        /* full: Sxx (m = 5) 10 and Srr 1 mirrored entries per mode */
        if (covs[c] == LSE_COV_FULL)
            ck_assert_uint_eq(n_empty, K * (10 + 1));
        /* solve reads only the triangles stats_exact fills */
        gsl_matrix *p1 = gsl_matrix_alloc(K, D), *p2 = gsl_matrix_alloc(K, D);
        gsl_matrix *a1 = gsl_matrix_alloc(K, D * DC), *a2 = gsl_matrix_alloc(K, D * DC);
        gsl_matrix *c1 = gsl_matrix_alloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix *c2 = gsl_matrix_alloc(in.param[P_CHOL]->size1, in.param[P_CHOL]->size2);
        gsl_matrix *o1[3] = {NULL, a1, c1}, *o2[3] = {NULL, a2, c2};
        lse_mstep_opts mo = lse_mstep_opts_default();
        lse_mstep_report rep = {0};
        char msg[256] = "";
        rows_of(&in, 0, N, &v);
        ck_assert_msg(lse_sim_lingauss->solve(&v.a, plain, p1, o1, &mo, &rep,
                                              msg, sizeof msg) == LSE_OK,
                      "%s", msg);
        lse_assert_ok(lse_sim_lingauss->prepare(&v.a));
        ck_assert_msg(lse_sim_lingauss->solve(&v.a, ex1, p2, o2, &mo, &rep,
                                              msg, sizeof msg) == LSE_OK,
                      "%s", msg);
        /* a missing mirror would change them at O(1) */
        for (size_t i = 0; i < K * D; i++)
            ck_assert_double_eq_tol(p1->data[i], p2->data[i],
                                    1e-6 * fmax(1.0, fabs(p1->data[i])));
        for (size_t i = 0; i < K * D * DC; i++)
            ck_assert_double_eq_tol(a1->data[i], a2->data[i],
                                    1e-6 * fmax(1.0, fabs(a1->data[i])));
        for (size_t i = 0; i < c1->size1 * c1->size2; i++)
            ck_assert_double_eq_tol(c1->data[i], c2->data[i],
                                    1e-6 * fmax(1.0, fabs(c1->data[i])));
        gsl_matrix_free(p1);
        gsl_matrix_free(p2);
        gsl_matrix_free(a1);
        gsl_matrix_free(a2);
        gsl_matrix_free(c1);
        gsl_matrix_free(c2);
        free(plain);
        free(ex1);
        free(ex2);
        inst_free(&in);
    }
    gsl_rng_free(rng);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The EM solver with exact_stats on a Markov SLDS graph (a chain term
 * whose similarity is lingauss) */

static lse_graph *slds_graph(gsl_matrix **x_out)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.n_modes = 2;
    cfg.dim = 2;
    cfg.lags = 1;
    cfg.markov = 1;
    lse_error err;
    lse_slds *m = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    const size_t T = 700;
    gsl_matrix *x = gsl_matrix_alloc(T, 2);
    for (size_t t = 0; t < T; t++) {
        const double mode = (t / 40) % 2 ? 1.5 : -1.0;
        gsl_matrix_set(x, t, 0, mode + 0.4 * sin(1.3 * (double)t));
        gsl_matrix_set(x, t, 1, -mode + 0.3 * cos(0.7 * (double)t + 0.2));
    }
    gsl_matrix *b = gsl_matrix_alloc(1, 2);
    gsl_vector_view bv = gsl_matrix_row(b, 0);
    gsl_vector_set(&bv.vector, 0, -0.9);
    gsl_vector_set(&bv.vector, 1, 1.1);
    lse_assert_ok(lse_slds_set_b(m, 0, &bv.vector, &err));
    gsl_vector_set(&bv.vector, 0, 1.4);
    gsl_vector_set(&bv.vector, 1, -1.3);
    lse_assert_ok(lse_slds_set_b(m, 1, &bv.vector, &err));
    gsl_matrix_free(b);
    lse_graph *g = NULL;
    lse_assert_ok(lse_slds_graph_new(m, x, NULL, &g, &err));
    lse_slds_free(m);
    *x_out = x;
    return g;
}

static lse_status identity(double *buf, size_t n, void *user)
{
    (void)buf;
    (void)n;
    (*(size_t *)user)++;
    return LSE_OK;
}

static lse_status halve_one(double *buf, size_t n, void *user)
{
    (void)user;
    if (n > 1) /* not the energy alone (init, finish) */
        buf[1] += 0.5; /* digit 0 of the first statistic: not an integer */
    return LSE_OK;
}

static void run_em(lse_graph *g, int exact, lse_reduce_fn fn, void *user,
                   lse_status want)
{
    lse_solver *s = lse_solver_new(g, lse_solver_em);
    lse_solver_opts o = lse_solver_opts_default();
    o.exact_stats = exact;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    if (fn != NULL)
        lse_solver_set_reduce(s, fn, user);
    lse_solver_result r;
    lse_assert_status(lse_solver_run(s, 30, NULL, NULL, &r), want);
    lse_solver_free(s);
}

START_TEST(test_solver_exact_stats)
{
    gsl_matrix *x[4];
    lse_graph *g0 = slds_graph(&x[0]), *g1 = slds_graph(&x[1]);
    lse_graph *g2 = slds_graph(&x[2]), *g3 = slds_graph(&x[3]);
    run_em(g0, 0, NULL, NULL, LSE_OK);
    run_em(g1, 1, NULL, NULL, LSE_OK);
    size_t calls = 0;
    run_em(g2, 1, identity, &calls, LSE_OK);
    ck_assert_uint_gt(calls, 1);
    static const char *const names[] = {"A", "b", "chol", "trans", "init"};
    for (size_t i = 0; i < 5; i++) {
        const gsl_matrix *v0 = lse_node_value(lse_graph_find_node(g0, names[i]));
        const gsl_matrix *v1 = lse_node_value(lse_graph_find_node(g1, names[i]));
        const gsl_matrix *v2 = lse_node_value(lse_graph_find_node(g2, names[i]));
        /* exact and rounded sums: the same fit to rounding */
        for (size_t j = 0; j < v0->size1 * v0->size2; j++)
            ck_assert_double_eq_tol(v0->data[j], v1->data[j], 1e-8);
        /* exported through a reduction hook: the same bits */
        ck_assert(gsl_matrix_equal(v1, v2));
    }
    /* a hook that does not sum the exports */
    run_em(g3, 1, halve_one, NULL, LSE_EDOM);
    ck_assert_ptr_nonnull(
        strstr(lse_graph_errmsg(g3), "exported exact accumulators"));
    lse_graph_free(g0);
    lse_graph_free(g1);
    lse_graph_free(g2);
    lse_graph_free(g3);
    for (size_t i = 0; i < 4; i++)
        gsl_matrix_free(x[i]);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("solver_exact");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_lingauss_exact_stats);
    tcase_add_test(tc, test_solver_exact_stats);
    suite_add_tcase(s, tc);
    return s;
}
