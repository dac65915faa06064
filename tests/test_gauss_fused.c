#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "lse_check.h"
#include "sim/gauss-fused-private.h"
#include "softmax-private.h"

/* The fused block pass of the diagonal quadratic path
 * (lib/sim/gauss_diag_fused.c, compiled in, and lib/softmax.c for the
 * separate steps' softmax): its three copies against each other and
 * against the separate steps (scores and statistics as chains of fused
 * multiply-adds, the library's softmax) to rounding (the pass has an
 * exponential of its own, tested against libm's), and against a textbook
 * evaluation, also on data far from the origin; then through a graph: EM
 * with and without it (LSE_NO_FUSED), its copies (LSE_NO_AVX512,
 * LSE_NO_SIMD), 1, 2 and 3 threads, and a non-finite score reported as
 * before. */

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static int have_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int have_avx512(void)
{
    return have_avx2_fma() && __builtin_cpu_supports("avx512f");
}

/* A random block problem: x (b, d), the center, Q (nv, kp) as the
 * quadratic path builds it (q_0k = const, q_(1+j)k = delta i2, q_(1+d+j)k
 * = -i2 / 2) from random means, scales and log weights (some -INFINITY:
 * a component that takes no rows), row weights. */
typedef struct problem {
    size_t b, d, K, kp, nv;
    double *x, *c, *q, *w, *mu, *var, *logw;
} problem;

/* off, sc: the rows and the means moved by off and scaled by sc about it
 * (the variances by sc^2); off 1e4 with sc 1e-2 is data far from the
 * origin with a small spread */
static void problem_make_at(problem *p, size_t b, size_t d, size_t K,
                            int weights, unsigned long seed, double off,
                            double sc)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    p->b = b;
    p->d = d;
    p->K = K;
    p->kp = (K + 7) / 8 * 8;
    p->nv = 1 + 2 * d;
    p->x = malloc(b * d * sizeof(double));
    p->c = calloc(d, sizeof(double));
    p->q = calloc(p->nv * p->kp, sizeof(double));
    p->w = weights ? malloc(b * sizeof(double)) : NULL;
    p->mu = malloc(K * d * sizeof(double));
    p->var = malloc(K * d * sizeof(double));
    p->logw = malloc(K * sizeof(double));
    for (size_t i = 0; i < b * d; i++)
        p->x[i] = off + sc * (2.0 * gsl_ran_gaussian(r, 1.0) + 0.3);
    for (size_t i = 0; i < b && weights; i++)
        p->w[i] = 0.25 + gsl_rng_uniform(r);
    for (size_t k = 0; k < K; k++) {
        p->logw[k] = k % 5 == 3 ? -INFINITY : gsl_ran_gaussian(r, 0.5);
        for (size_t j = 0; j < d; j++) {
            p->mu[k * d + j] = off + sc * 1.5 * gsl_ran_gaussian(r, 1.0);
            p->var[k * d + j] = sc * sc * (0.5 + gsl_rng_uniform(r));
            p->c[j] += p->mu[k * d + j] / (double)K;
        }
    }
    for (size_t k = 0; k < K; k++) {
        double cn = p->logw[k], dpd = 0.0;
        for (size_t j = 0; j < d; j++) {
            const double i2 = 1.0 / p->var[k * d + j];
            const double del = p->mu[k * d + j] - p->c[j];
            cn -= 0.5 * log(6.283185307179586 * p->var[k * d + j]);
            dpd += del * del * i2;
            p->q[(1 + j) * p->kp + k] = del * i2;
            p->q[(1 + d + j) * p->kp + k] = -0.5 * i2;
        }
        p->q[k] = cn - 0.5 * dpd;
    }
    gsl_rng_free(r);
}

static void problem_make(problem *p, size_t b, size_t d, size_t K,
                         int weights, unsigned long seed)
{
    problem_make_at(p, b, d, K, weights, seed, 0.0, 1.0);
}

static void problem_free(problem *p)
{
    free(p->x);
    free(p->c);
    free(p->q);
    free(p->w);
    free(p->mu);
    free(p->var);
    free(p->logw);
}

/* Run copy isa on the block; acc (nv K) starts at `start` so that the
 * test sees it ADDED to. Returns the kernel's result. */
static int run_copy(const problem *p, int isa, double start, double *lse,
                    double *acc)
{
    const size_t n = lse_gauss_fused_scratch(p->d, p->K);
    ck_assert_uint_gt(n, 0);
    double *scratch = aligned_alloc(64, (n + 7) / 8 * 8 * sizeof(double));
    for (size_t i = 0; i < p->nv * p->K; i++)
        acc[i] = start;
    const lse_gauss_fused f = {.b = p->b, .d = p->d, .K = p->K, .kp = p->kp,
                               .x = p->x, .xt = p->d, .c = p->c, .q = p->q,
                               .w = p->w, .lse = lse, .acc = acc,
                               .scratch = scratch};
    const int rc = lse_gauss_fused_run(&f, isa);
    free(scratch);
    return rc;
}

/* The separate steps with the arithmetic of the AVX-512F kernels: S = V Q
 * by chains of fma from 0, the library's softmax, the statistics by
 * chains of fma over the rows (the last b % 4 rows by product and sum),
 * summed per block and added to acc. */
static void separate_steps(const problem *p, double start, double *lse,
                           double *acc)
{
    const size_t b = p->b, d = p->d, K = p->K, kp = p->kp, nv = p->nv;
    gsl_matrix *s = gsl_matrix_alloc(b, K), *v = gsl_matrix_alloc(b, nv);
    for (size_t i = 0; i < b; i++) {
        double *vi = gsl_matrix_ptr(v, i, 0);
        vi[0] = 1.0;
        for (size_t j = 0; j < d; j++) {
            const double y = p->x[i * d + j] - p->c[j];
            vi[1 + j] = y;
            vi[1 + d + j] = y * y;
        }
        for (size_t k = 0; k < K; k++) {
            double a = 0.0;
            for (size_t q = 0; q < nv; q++)
                a = fma(vi[q], p->q[q * kp + k], a);
            gsl_matrix_set(s, i, k, a);
        }
    }
    /* the best copy this CPU has (AVX-512 where it exists: {1, 1, 1}) */
    const lse_softmax_isa isa = lse_softmax_isa_detect();
    double *m = malloc(b * sizeof(double));
    lse_softmax_rows(s, s, 1.0, lse, m, &isa);
    const size_t b4 = b - b % 4;
    for (size_t q = 0; q < nv; q++)
        for (size_t k = 0; k < K; k++) {
            double a = 0.0;
            for (size_t i = 0; i < b; i++) {
                const double rho = gsl_matrix_get(s, i, k) *
                                   (p->w != NULL ? p->w[i] : 1.0);
                const double vq = gsl_matrix_get(v, i, q);
                a = i < b4 ? fma(vq, rho, a) : a + vq * rho;
            }
            acc[q * K + k] = start + a;
        }
    free(m);
    gsl_matrix_free(s);
    gsl_matrix_free(v);
}

/* Textbook: log N with libm, the softmax, the moments about the center. */
static void textbook(const problem *p, double *lse, double *acc)
{
    const size_t b = p->b, d = p->d, K = p->K;
    double *sc = malloc(K * sizeof(double));
    memset(acc, 0, p->nv * K * sizeof(double));
    for (size_t i = 0; i < b; i++) {
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++) {
            double v = p->logw[k];
            for (size_t j = 0; j < d; j++) {
                const double t = p->x[i * d + j] - p->mu[k * d + j];
                v -= 0.5 * (log(6.283185307179586 * p->var[k * d + j]) +
                            t * t / p->var[k * d + j]);
            }
            sc[k] = v;
            mx = v > mx ? v : mx;
        }
        double sum = 0.0;
        for (size_t k = 0; k < K; k++)
            sum += exp(sc[k] - mx);
        lse[i] = mx + log(sum);
        const double wi = p->w != NULL ? p->w[i] : 1.0;
        for (size_t k = 0; k < K; k++) {
            const double rho = exp(sc[k] - lse[i]) * wi;
            acc[k] += rho;
            for (size_t j = 0; j < d; j++) {
                const double y = p->x[i * d + j] - p->c[j];
                acc[(1 + j) * K + k] += rho * y;
                acc[(1 + d + j) * K + k] += rho * y * y;
            }
        }
    }
    free(sc);
}

static const struct {
    size_t b, d, K;
    int weights;
} shapes[] = {{8, 1, 1, 0},    {37, 3, 5, 1},   {256, 2, 8, 0},
              {61, 5, 11, 1},  {100, 16, 16, 0}, {13, 9, 13, 1},
              {4, 7, 9, 0},    {255, 8, 7, 1},  {6, 2, 16, 1},
              /* more than 16 components: row_softmax's order and log */
              {41, 5, 17, 1},  {64, 6, 24, 0},  {37, 3, 32, 1},
              {19, 9, 40, 0},  {100, 4, 33, 1}, {5, 64, 32, 0},
              {8, 2, 18, 1},   {23, 11, 25, 0}};

/* The copies bit for bit; the separate steps (their exponentials are
 * lse_exp_nonpos8's, the pass's fz_exp's) and the textbook to rounding;
 * each shape also far from the origin with a small spread. */
START_TEST(test_copies_and_separate_steps)
{
    const int isas[3] = {LSE_FUSED_PLAIN, LSE_FUSED_AVX2, LSE_FUSED_AVX512};
    const int have[3] = {1, have_avx2_fma(), have_avx512()};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    for (size_t c = 0; c < 2 * ns; c++) {
        problem p;
        const size_t sh = c % ns;
        problem_make_at(&p, shapes[sh].b, shapes[sh].d, shapes[sh].K,
                        shapes[sh].weights, 100 + c, c < ns ? 0.0 : 1e4,
                        c < ns ? 1.0 : 1e-2);
        const size_t na = p.nv * p.K;
        double *lse0 = malloc(p.b * sizeof(double)), *acc0 = malloc(na * 8);
        double *lse1 = malloc(p.b * sizeof(double)), *acc1 = malloc(na * 8);
        ck_assert_int_eq(run_copy(&p, LSE_FUSED_PLAIN, 0.5, lse0, acc0), 0);
        for (int i = 1; i < 3; i++) {
            if (!have[i])
                continue;
            ck_assert_int_eq(run_copy(&p, isas[i], 0.5, lse1, acc1), 0);
            for (size_t r = 0; r < p.b; r++)
                ck_assert_msg(same_bits(lse0[r], lse1[r]),
                              "shape %zu copy %d lse[%zu]", c, i, r);
            for (size_t a = 0; a < na; a++)
                ck_assert_msg(same_bits(acc0[a], acc1[a]),
                              "shape %zu copy %d acc[%zu]", c, i, a);
        }
        separate_steps(&p, 0.5, lse1, acc1);
        for (size_t r = 0; r < p.b; r++)
            ck_assert_msg(fabs(lse0[r] - lse1[r]) <=
                              1e-14 * (1.0 + fabs(lse1[r])),
                          "shape %zu separate lse[%zu]", c, r);
        for (size_t a = 0; a < na; a++)
            ck_assert_msg(fabs(acc0[a] - acc1[a]) <=
                              1e-13 * (1.0 + fabs(acc1[a])),
                          "shape %zu separate acc[%zu]", c, a);
        textbook(&p, lse1, acc1);
        for (size_t r = 0; r < p.b; r++)
            ck_assert_msg(fabs(lse0[r] - lse1[r]) <=
                              1e-12 * (1.0 + fabs(lse1[r])),
                          "shape %zu textbook lse[%zu]", c, r);
        for (size_t a = 0; a < na; a++)
            ck_assert_msg(fabs(acc0[a] - 0.5 - acc1[a]) <=
                              1e-11 * (1.0 + fabs(acc1[a])),
                          "shape %zu textbook acc[%zu]", c, a);
        free(lse0);
        free(acc0);
        free(lse1);
        free(acc1);
        problem_free(&p);
    }
}
END_TEST

/* fz_exp against libm's exp (within 1.5 units in the last place; 0 below
 * -708, exp(0) = 1), the three copies bit for bit. */
START_TEST(test_exp)
{
    const int isas[3] = {LSE_FUSED_PLAIN, LSE_FUSED_AVX2, LSE_FUSED_AVX512};
    const int have[3] = {1, have_avx2_fma(), have_avx512()};
    const size_t n = 200003;
    double *x = malloc(n * sizeof(double)), *y0 = malloc(n * sizeof(double));
    double *y1 = malloc(n * sizeof(double));
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    const double fixed[] = {0.0, -0.0, -1e-300, -1e-17, -708.0,
                            -707.9999, -708.0001, -745.2, -1e300,
                            -INFINITY, -0.693147180559945309 / 32.0,
                            -0.693147180559945309 / 16.0,
                            -0.693147180559945309 * 100.0};
    const size_t nf = sizeof fixed / sizeof fixed[0];
    for (size_t i = 0; i < n; i++)
        x[i] = i < nf          ? fixed[i]
               : i % 3 == 0    ? -708.0 * gsl_rng_uniform(r)
               : i % 3 == 1    ? -gsl_rng_uniform(r)
                               : -40.0 * gsl_rng_uniform(r);
    lse_gauss_fused_exp(x, y0, n, LSE_FUSED_PLAIN);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] < -708.0) {
            ck_assert_msg(same_bits(y0[i], 0.0), "exp(%a) = %a", x[i], y0[i]);
            continue;
        }
        const long double e = expl((long double)x[i]);
        /* ulp of the double nearest e (normal results only) */
        const double ulp = nextafter((double)e, INFINITY) - (double)e;
        const double u = (double)(fabsl((long double)y0[i] - e) / ulp);
        worst = u > worst ? u : worst;
    }
    ck_assert_msg(worst <= 1.5, "worst %g ulp", worst);
    ck_assert(same_bits(y0[0], 1.0) && same_bits(y0[1], 1.0));
    for (int i = 1; i < 3; i++) {
        if (!have[i])
            continue;
        lse_gauss_fused_exp(x, y1, n, isas[i]);
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(same_bits(y0[j], y1[j]), "copy %d exp(%a)", i, x[j]);
    }
    gsl_rng_free(r);
    free(x);
    free(y0);
    free(y1);
}
END_TEST

/* A NaN score (+inf + -inf in the chain) and a +INFINITY one: every copy
 * says so and leaves acc alone. */
START_TEST(test_nonfinite_score)
{
    const int isas[3] = {LSE_FUSED_PLAIN, LSE_FUSED_AVX2, LSE_FUSED_AVX512};
    const int have[3] = {1, have_avx2_fma(), have_avx512()};
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < 3; i++) {
            if (!have[i])
                continue;
            problem p;
            problem_make(&p, 29, 3, 6, 1, 7);
            if (kind == 0) { /* y q: +inf, then y^2 q: -inf */
                p.x[17 * 3 + 1] = 1e308;
                for (size_t k = 0; k < p.K; k++)
                    p.q[2 * p.kp + k] = 10.0;
            }
            else
                p.q[2] = INFINITY; /* a constant of +INFINITY */
            double lse[29], acc[7 * 6];
            ck_assert_int_eq(run_copy(&p, isas[i], 0.25, lse, acc), 1);
            for (size_t a = 0; a < 7 * 6; a++)
                ck_assert(same_bits(acc[a], 0.25));
            problem_free(&p);
        }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Through a graph: EM on a diagonal mixture (streaming term).         */

typedef struct em_out {
    gsl_matrix *mu, *logw, *chol;
    double energy;
    lse_status st;
    char msg[512];
} em_out;

static void em_out_free(em_out *o)
{
    gsl_matrix_free(o->mu);
    gsl_matrix_free(o->logw);
    gsl_matrix_free(o->chol);
}

/* l1: the start's scale of column 1 (the others 1.1 + 0.05 j) */
static void em(const gsl_matrix *x, const gsl_vector *w, size_t k,
               size_t block, int threads, double l1, em_out *out)
{
    const size_t n = x->size1, d = x->size2;
    lse_set_thread_min_work(0.0); /* the count on small data too */
    lse_set_num_threads(threads);
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_graph_set_block_rows(g, block);
    lse_node *xn, *mu, *logw, *chol;
    lse_assert_ok(lse_graph_add_node(g, "x", n, d, LSE_NODE_CLAMPED, &xn));
    lse_assert_ok(lse_graph_add_node(g, "mu", k, d, LSE_NODE_PARAM, &mu));
    lse_assert_ok(lse_graph_add_node(g, "logw", k, 1, LSE_NODE_PARAM, &logw));
    lse_assert_ok(lse_graph_add_node(g, "chol", k, d, LSE_NODE_PARAM, &chol));
    lse_assert_ok(lse_node_set_value(xn, x));
    for (size_t c = 0; c < k; c++) {
        for (size_t j = 0; j < d; j++) {
            gsl_matrix_set(lse_node_value(mu), c, j,
                           gsl_matrix_get(x, (29 * c + 3) % n, j) + 0.1);
            gsl_matrix_set(lse_node_value(chol), c, j,
                           j == 1 ? l1 : 1.1 + 0.05 * (double)j);
        }
        gsl_matrix_set(lse_node_value(logw), c, 0, -0.05 * (double)c);
    }
    const lse_gaussian_config cfg = {.cov = LSE_COV_DIAG};
    lse_node *params[2] = {logw, chol};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(xn);
    spec.parent = lse_view_all(mu);
    spec.sim = lse_sim_gaussian;
    spec.config = &cfg;
    spec.param = params;
    spec.keep_matrices = 0;
    spec.row_weight = w;
    lse_assert_ok(lse_graph_add_lse(g, "mixture", &spec, NULL));
    lse_solver *s = lse_solver_new(g, lse_solver_em);
    ck_assert_ptr_nonnull(s);
    lse_solver_opts o = lse_solver_opts_default();
    o.tol_energy = 0.0;
    lse_assert_ok(lse_solver_set_opts(s, &o));
    lse_solver_result res;
    out->st = lse_solver_run(s, 10, NULL, NULL, &res);
    snprintf(out->msg, sizeof out->msg, "%s", lse_graph_errmsg(g));
    out->energy = lse_solver_energy(s);
    out->mu = gsl_matrix_alloc(k, d);
    out->logw = gsl_matrix_alloc(k, 1);
    out->chol = gsl_matrix_alloc(k, d);
    gsl_matrix_memcpy(out->mu, lse_node_value(mu));
    gsl_matrix_memcpy(out->logw, lse_node_value(logw));
    gsl_matrix_memcpy(out->chol, lse_node_value(chol));
    lse_solver_free(s);
    lse_graph_free(g);
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
}

static int same_matrix(const gsl_matrix *a, const gsl_matrix *b)
{
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            if (!same_bits(gsl_matrix_get(a, i, j), gsl_matrix_get(b, i, j)))
                return 0;
    return 1;
}

static int same_params(const em_out *a, const em_out *b)
{
    return same_matrix(a->mu, b->mu) && same_matrix(a->logw, b->logw) &&
           same_matrix(a->chol, b->chol);
}

static int same_run(const em_out *a, const em_out *b)
{
    return same_bits(a->energy, b->energy) && same_params(a, b);
}

static double max_rel(const gsl_matrix *a, const gsl_matrix *b)
{
    double m = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            const double u = gsl_matrix_get(a, i, j);
            const double v = gsl_matrix_get(b, i, j);
            const double r = fabs(u - v) / (1.0 + fabs(v));
            m = r > m ? r : m;
        }
    return m;
}

static gsl_matrix *data(size_t n, size_t d, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, i, j,
                           1.2 * cos(1.3 * (double)(i % 5) + (double)j) +
                               gsl_ran_gaussian(r, 0.7));
    gsl_rng_free(r);
    return x;
}

static void set_env(const char *name, int on)
{
    if (on)
        ck_assert_int_eq(setenv(name, "1", 1), 0);
    else
        ck_assert_int_eq(unsetenv(name), 0);
}

/* EM with the fused pass against the separate steps (1e-12: their
 * exponentials differ), its copies against each other (the parameters bit
 * for bit), 1, 2 and 3 threads (bits); odd block sizes, K and d off the lane
 * width, K of at most and more than 16 (the two softmaxes), row weights. */
START_TEST(test_em_fused)
{
    const size_t n = 1003, d = 3, ks[3] = {11, 19, 32};
    gsl_matrix *x = data(n, d, 5);
    gsl_vector *w = gsl_vector_alloc(n);
    for (size_t i = 0; i < n; i++)
        gsl_vector_set(w, i, 0.5 + (double)(i % 7) / 7.0);
    const size_t blocks[2] = {37, 256};
    for (int run = 0; run < 12; run++) {
        const int bi = run / 2 % 2, weighted = run % 2;
        const size_t k = ks[run / 4];
        const gsl_vector *wv = weighted ? w : NULL;
        em_out fused, sep, copy, two;
        em(x, wv, k, blocks[bi], 1, 1.15, &fused);
        set_env("LSE_NO_FUSED", 1);
        em(x, wv, k, blocks[bi], 1, 1.15, &sep);
        set_env("LSE_NO_FUSED", 0);
        lse_assert_ok(fused.st);
        lse_assert_ok(sep.st);
        ck_assert_double_eq_tol(fused.energy, sep.energy,
                                1e-12 * fabs(sep.energy));
        ck_assert_double_le(max_rel(fused.mu, sep.mu), 1e-12);
        ck_assert_double_le(max_rel(fused.chol, sep.chol), 1e-12);
        for (int c = 0; c < 2; c++) { /* the AVX2 and plain copies */
            const char *var = c == 0 ? "LSE_NO_AVX512" : "LSE_NO_SIMD";
            set_env(var, 1);
            em(x, wv, k, blocks[bi], 1, 1.15, &copy);
            set_env(var, 0);
            /* the parameters come from the fused statistics; the
             * energy of the solver's last evaluation without them
             * from the separate steps of that copy */
            ck_assert_msg(same_params(&fused, &copy), "%s", var);
            ck_assert_double_eq_tol(fused.energy, copy.energy,
                                    1e-12 * fabs(copy.energy));
            em_out_free(&copy);
        }
        for (int th = 2; th <= 3; th++) {
            em(x, wv, k, blocks[bi], th, 1.15, &two);
            ck_assert_msg(same_run(&fused, &two), "%d threads", th);
            em_out_free(&two);
        }
        em_out_free(&fused);
        em_out_free(&sep);
    }
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

/* the largest |a - b| / |b| */
static double max_rel_pure(const gsl_matrix *a, const gsl_matrix *b)
{
    double m = 0.0;
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++) {
            const double v = gsl_matrix_get(b, i, j);
            const double r = fabs(gsl_matrix_get(a, i, j) - v) / fabs(v);
            m = r > m ? r : m;
        }
    return m;
}

/* Data far from the origin with a small spread (1e4 + 1e-2 z): EM with the
 * fused pass against the separate steps to 1e-12 relative (energy, means,
 * scales), and bit for bit on 1, 2 and 3 threads; K of at most and more
 * than 16. */
START_TEST(test_em_far)
{
    const size_t n = 1500, d = 5, ks[2] = {7, 19};
    gsl_matrix *x = data(n, d, 11);
    gsl_matrix_scale(x, 1e-2);
    gsl_matrix_add_constant(x, 1e4);
    for (int i = 0; i < 2; i++) {
        em_out fused, sep, th;
        em(x, NULL, ks[i], 256, 1, 1.15, &fused);
        set_env("LSE_NO_FUSED", 1);
        em(x, NULL, ks[i], 256, 1, 1.15, &sep);
        set_env("LSE_NO_FUSED", 0);
        lse_assert_ok(fused.st);
        lse_assert_ok(sep.st);
        ck_assert_double_eq_tol(fused.energy, sep.energy,
                                1e-12 * fabs(sep.energy));
        ck_assert_double_le(max_rel_pure(fused.mu, sep.mu), 1e-12);
        ck_assert_double_le(max_rel_pure(fused.chol, sep.chol), 1e-12);
        /* the fit moved: scales near the data's spread, not the start's */
        ck_assert_double_lt(gsl_matrix_max(fused.chol), 0.1);
        for (int t = 2; t <= 3; t++) {
            em(x, NULL, ks[i], 256, t, 1.15, &th);
            ck_assert_msg(same_run(&fused, &th), "K %zu, %d threads", ks[i],
                          t);
            em_out_free(&th);
        }
        em_out_free(&fused);
        em_out_free(&sep);
    }
    gsl_matrix_free(x);
}
END_TEST

/* A non-finite score stops EM with the message of the separate steps
 * (row and column), fused or not: a huge finite entry times a large
 * positive linear coefficient (a narrow start in column 1) overflows to
 * +INFINITY, its square to -INFINITY, and the score is NaN. */
START_TEST(test_em_nonfinite_message)
{
    gsl_matrix *x = data(300, 2, 9);
    gsl_matrix_set(x, 211, 1, 1e308);
    em_out a, b;
    em(x, NULL, 5, 64, 1, 0.05, &a);
    set_env("LSE_NO_FUSED", 1);
    em(x, NULL, 5, 64, 1, 0.05, &b);
    set_env("LSE_NO_FUSED", 0);
    ck_assert_int_eq(a.st, LSE_ENONFINITE);
    ck_assert_int_eq(b.st, LSE_ENONFINITE);
    ck_assert_str_eq(a.msg, b.msg);
    ck_assert_ptr_nonnull(strstr(a.msg, "similarity[211,"));
    em_out_free(&a);
    em_out_free(&b);
    gsl_matrix_free(x);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gauss_fused");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_copies_and_separate_steps);
    tcase_add_test(tc, test_exp);
    tcase_add_test(tc, test_nonfinite_score);
    tcase_add_test(tc, test_em_fused);
    tcase_add_test(tc, test_em_far);
    tcase_add_test(tc, test_em_nonfinite_message);
    suite_add_tcase(s, tc);
    return s;
}
