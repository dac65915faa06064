#include <math.h>
#include <string.h>

#include "lse_check.h"

/* The maximum-expected-accuracy path (lse_chain_mea_path,
 * lse_lslds_mea_path) against a search over all K^n paths of its
 * objective sum_t w(t, k_t) over the paths of nonzero probability, with
 * ties to the path that is smallest compared from its last row
 * backwards; zero-probability moves never taken; the mixture and the
 * latent-SLDS wrapper; the errors. */

enum { N = 7, K = 3 };

static unsigned long lcg(unsigned long *s)
{
    *s = *s * 6364136223846793005UL + 1442695040888963407UL;
    return (*s >> 33) & 0x7fffffffUL;
}

/* Is row t the first of a sequence? */
static int is_start(size_t t, const size_t *starts, size_t n_starts)
{
    if (t == 0)
        return 1;
    for (size_t q = 0; q < n_starts; q++)
        if (starts[q] == t)
            return 1;
    return 0;
}

static int allowed(const size_t *path, size_t n, const gsl_vector *p0,
                   const gsl_matrix *P, const size_t *starts, size_t n_starts)
{
    for (size_t t = 0; t < n; t++)
        if (is_start(t, starts, n_starts)
                ? gsl_vector_get(p0, path[t]) <= 0.0
                : gsl_matrix_get(P, path[t - 1], path[t]) <= 0.0)
            return 0;
    return 1;
}

/* path a before path b when compared from the last row backwards */
static int rev_less(const size_t *a, const size_t *b, size_t n)
{
    for (size_t t = n; t-- > 0;)
        if (a[t] != b[t])
            return a[t] < b[t];
    return 0;
}

/* The best allowed path of all K^n by enumeration (ties: rev_less); its
 * objective, -INFINITY when no path is allowed. */
static double brute(const gsl_matrix *w, const gsl_vector *p0,
                    const gsl_matrix *P, const size_t *starts,
                    size_t n_starts, size_t *best)
{
    const size_t n = w->size1;
    size_t total = 1, cur[N];
    for (size_t i = 0; i < n; i++)
        total *= K;
    double top = -INFINITY;
    for (size_t code = 0; code < total; code++) {
        size_t c = code;
        for (size_t t = 0; t < n; t++, c /= K)
            cur[t] = c % K;
        if (!allowed(cur, n, p0, P, starts, n_starts))
            continue;
        double s = 0.0;
        for (size_t t = 0; t < n; t++)
            s += gsl_matrix_get(w, t, cur[t]);
        if (s > top || (s == top && rev_less(cur, best, n))) {
            top = s;
            memcpy(best, cur, n * sizeof *cur);
        }
    }
    return top;
}

/* A random case: marginal-like weights in [0, 1) on a grid of 1/1024
 * (quarter steps when coarse, which makes ties common), so that every sum
 * of them is exact and a tie is a tie in any order of summation; a zero
 * pattern in p0 and P. */
static void draw_case(unsigned long *seed, int coarse, gsl_matrix *w,
                      gsl_vector *p0, gsl_matrix *P)
{
    for (size_t t = 0; t < w->size1; t++)
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(w, t, k,
                           coarse ? (double)(lcg(seed) % 4) / 4.0
                                  : (double)(lcg(seed) % 1024) / 1024.0);
    for (size_t k = 0; k < K; k++)
        gsl_vector_set(p0, k, lcg(seed) % 3 == 0 ? 0.0 : 1.0);
    gsl_vector_set(p0, lcg(seed) % K, 1.0);
    for (size_t j = 0; j < K; j++) {
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(P, j, k, lcg(seed) % 3 == 0 ? 0.0 : 0.3);
        gsl_matrix_set(P, j, lcg(seed) % K, 0.5);
    }
}

START_TEST(test_mea_equals_brute_force)
{
    gsl_matrix *w = gsl_matrix_alloc(N, K), *P = gsl_matrix_alloc(K, K);
    gsl_vector *p0 = gsl_vector_alloc(K);
    const size_t starts[] = {4};
    size_t path[N], best[N];
    unsigned long seed = 12345;
    int ties = 0, forbidden_argmax = 0;
    for (int rep = 0; rep < 400; rep++) {
        const int coarse = rep % 2;
        const size_t n_starts = (size_t)(rep % 4 < 2);
        draw_case(&seed, coarse, w, p0, P);
        const double top = brute(w, p0, P, starts, n_starts, best);
        if (!isfinite(top)) {
            lse_assert_status(lse_chain_mea_path(w, p0, P, starts, n_starts,
                                                 path, NULL),
                              LSE_EINVAL);
            continue;
        }
        lse_assert_ok(lse_chain_mea_path(w, p0, P, starts, n_starts, path,
                                         NULL));
        ck_assert(allowed(path, N, p0, P, starts, n_starts));
        double s = 0.0;
        for (size_t t = 0; t < N; t++) {
            s += gsl_matrix_get(w, t, path[t]);
            ck_assert_uint_eq(path[t], best[t]);
        }
        ck_assert(s == top);
        /* count the cases the test is about: tied optima, and a per-row
         * argmax that would take a forbidden move */
        size_t am[N];
        for (size_t t = 0; t < N; t++) {
            am[t] = 0;
            for (size_t k = 1; k < K; k++)
                if (gsl_matrix_get(w, t, k) > gsl_matrix_get(w, t, am[t]))
                    am[t] = k;
        }
        forbidden_argmax += !allowed(am, N, p0, P, starts, n_starts);
        size_t alt[N];
        memcpy(alt, best, sizeof alt);
        for (size_t t = 0; t < N && !ties; t++)
            for (size_t k = 0; k < K; k++) {
                alt[t] = k;
                double v = 0.0;
                for (size_t u = 0; u < N; u++)
                    v += gsl_matrix_get(w, u, alt[u]);
                if (k != best[t] && v == top &&
                    allowed(alt, N, p0, P, starts, n_starts))
                    ties = 1;
                alt[t] = best[t];
            }
    }
    ck_assert(ties);
    ck_assert_int_gt(forbidden_argmax, 10);
    gsl_matrix_free(w);
    gsl_matrix_free(P);
    gsl_vector_free(p0);
}
END_TEST

START_TEST(test_mea_forbidden_and_ties)
{
    /* left to right: 1 -> 0 is impossible; the per-row argmax (1, 0) is
     * not a path; (0, 0) and (1, 1) both expect 1 row right: the tie
     * goes to the lower state at the last row */
    gsl_matrix *w = gsl_matrix_alloc(2, 2), *P = gsl_matrix_alloc(2, 2);
    gsl_vector *p0 = gsl_vector_alloc(2);
    const double wv[] = {0.375, 0.625, 0.625, 0.375};
    const double pv[] = {0.9, 0.1, 0.0, 1.0};
    memcpy(w->data, wv, sizeof wv);
    memcpy(P->data, pv, sizeof pv);
    gsl_vector_set_all(p0, 0.5);
    size_t path[2];
    lse_assert_ok(lse_chain_mea_path(w, p0, P, NULL, 0, path, NULL));
    ck_assert_uint_eq(path[0], 0);
    ck_assert_uint_eq(path[1], 0);
    /* a slightly better second row for mode 1: (0, 1) is 0.375 + 0.375,
     * (1, 1) 0.625 + 0.4375, (0, 0) 0.375 + 0.5625 */
    gsl_matrix_set(w, 1, 0, 0.5625);
    gsl_matrix_set(w, 1, 1, 0.4375);
    lse_assert_ok(lse_chain_mea_path(w, p0, P, NULL, 0, path, NULL));
    ck_assert_uint_eq(path[0], 1);
    ck_assert_uint_eq(path[1], 1);
    /* state 1 may not start: only (0, 0) and (0, 1) remain */
    gsl_vector_set(p0, 1, 0.0);
    lse_assert_ok(lse_chain_mea_path(w, p0, P, NULL, 0, path, NULL));
    ck_assert_uint_eq(path[0], 0);
    ck_assert_uint_eq(path[1], 0);
    /* uniform marginals: every allowed path ties; the lowest is taken */
    gsl_matrix_set_all(w, 0.5);
    gsl_vector_set_all(p0, 0.5);
    lse_assert_ok(lse_chain_mea_path(w, p0, P, NULL, 0, path, NULL));
    ck_assert_uint_eq(path[0], 0);
    ck_assert_uint_eq(path[1], 0);
    gsl_matrix_free(w);
    gsl_matrix_free(P);
    gsl_vector_free(p0);
}
END_TEST

START_TEST(test_mea_is_argmax_when_all_moves_allowed)
{
    enum { T = 200, KK = 4 };
    gsl_matrix *w = gsl_matrix_alloc(T, KK), *P = gsl_matrix_alloc(KK, KK);
    gsl_vector *p0 = gsl_vector_alloc(KK);
    unsigned long seed = 7;
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < KK; k++)
            gsl_matrix_set(w, t, k, (double)(lcg(&seed) % 1000) / 999.0);
    gsl_matrix_set_all(P, 1e-12);
    for (size_t k = 0; k < KK; k++)
        gsl_matrix_set(P, k, k, 1.0 - 3e-12);
    gsl_vector_set_all(p0, 0.25);
    const size_t starts[] = {50, 120};
    size_t path[T];
    lse_assert_ok(lse_chain_mea_path(w, p0, P, starts, 2, path, NULL));
    for (size_t t = 0; t < T; t++) {
        size_t am = 0;
        for (size_t k = 1; k < KK; k++)
            if (gsl_matrix_get(w, t, k) > gsl_matrix_get(w, t, am))
                am = k;
        ck_assert_uint_eq(path[t], am);
    }
    gsl_matrix_free(w);
    gsl_matrix_free(P);
    gsl_vector_free(p0);
}
END_TEST

START_TEST(test_lslds_mea_path)
{
    enum { T = 6 };
    lse_lslds_params *p = NULL;
    lse_lslds_post *q = NULL;
    lse_assert_ok(lse_lslds_params_new(2, 1, 1, 1, &p, NULL));
    lse_assert_ok(lse_lslds_post_new(T, 2, 1, &q, NULL));
    size_t path[T];
    lse_assert_status(lse_lslds_mea_path(p, NULL, q, path, NULL), LSE_EINVAL);
    /* per-row argmax 0 1 0 | 1 0 1 with sequences of rows 0-2 and 3-5 */
    const double w1[T] = {0.25, 0.75, 0.375, 0.625, 0.5, 0.875};
    for (size_t t = 0; t < T; t++) {
        gsl_matrix_set(q->w, t, 1, w1[t]);
        gsl_matrix_set(q->w, t, 0, 1.0 - w1[t]);
    }
    q->have_z = 1;
    const size_t seq[T] = {4, 4, 4, 9, 9, 9};
    /* 0 -> 1 impossible. First sequence: (0, 0, 0) and (1, 1, 0) both
     * expect 1.625 rows right, (1, 1, 1) 1.375, (1, 0, 0) 1.125: the tie
     * goes to the lower state at row 1. Second: (1, 1, 1) 2.0, the
     * argmax (1, 0, 1) is not a path */
    gsl_matrix_set(p->trans, 0, 0, 1.0);
    gsl_matrix_set(p->trans, 0, 1, 0.0);
    gsl_matrix_set(p->trans, 1, 0, 0.5);
    gsl_matrix_set(p->trans, 1, 1, 0.5);
    lse_assert_ok(lse_lslds_mea_path(p, seq, q, path, NULL));
    const size_t want[T] = {0, 0, 0, 1, 1, 1};
    for (size_t t = 0; t < T; t++)
        ck_assert_uint_eq(path[t], want[t]);
    /* one sequence: row 3 continues from row 2 */
    gsl_matrix *P = gsl_matrix_alloc(2, 2);
    size_t path2[T];
    gsl_matrix_memcpy(P, p->trans);
    lse_assert_ok(lse_chain_mea_path(q->w, p->init, P, NULL, 0, path2, NULL));
    lse_assert_ok(lse_lslds_mea_path(p, NULL, q, path, NULL));
    for (size_t t = 0; t < T; t++)
        ck_assert_uint_eq(path[t], path2[t]);
    /* a mixture: the per-row argmax among modes of nonzero weight */
    p->markov = 0;
    lse_assert_ok(lse_lslds_mea_path(p, seq, q, path, NULL));
    for (size_t t = 0; t < T; t++)
        ck_assert_uint_eq(path[t], w1[t] > 0.5 ? 1u : 0u);
    gsl_vector_set(p->init, 0, 0.0);
    gsl_vector_set(p->init, 1, 1.0);
    lse_assert_ok(lse_lslds_mea_path(p, seq, q, path, NULL));
    for (size_t t = 0; t < T; t++)
        ck_assert_uint_eq(path[t], 1);
    gsl_vector_set(p->init, 1, 0.0);
    lse_assert_status(lse_lslds_mea_path(p, seq, q, path, NULL), LSE_EINVAL);
    lse_assert_status(lse_lslds_mea_path(NULL, seq, q, path, NULL),
                      LSE_EFAULT);
    gsl_matrix_free(P);
    lse_lslds_post_free(q);
    lse_lslds_params_free(p);
}
END_TEST

START_TEST(test_mea_errors)
{
    gsl_matrix *w = gsl_matrix_alloc(4, 2), *P = gsl_matrix_alloc(2, 2);
    gsl_matrix *P3 = gsl_matrix_alloc(3, 3);
    gsl_vector *p0 = gsl_vector_alloc(2);
    size_t path[4];
    gsl_matrix_set_all(w, 0.5);
    gsl_matrix_set_all(P, 0.5);
    gsl_vector_set_all(p0, 0.5);
    lse_error err;
    lse_assert_status(lse_chain_mea_path(NULL, p0, P, NULL, 0, path, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_chain_mea_path(w, p0, P, NULL, 0, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_chain_mea_path(w, p0, P3, NULL, 0, path, &err),
                      LSE_EDIM);
    const size_t bad[] = {3, 2};
    lse_assert_status(lse_chain_mea_path(w, p0, P, bad, 2, path, &err),
                      LSE_ERANGE);
    gsl_matrix_set(w, 2, 1, NAN);
    lse_assert_status(lse_chain_mea_path(w, p0, P, NULL, 0, path, &err),
                      LSE_EINVAL);
    gsl_matrix_set(w, 2, 1, 0.5);
    gsl_matrix_set(P, 0, 1, -0.1);
    lse_assert_status(lse_chain_mea_path(w, p0, P, NULL, 0, path, &err),
                      LSE_EINVAL);
    /* no path: only state 0 may start, and it leads nowhere */
    gsl_matrix_set_all(P, 0.0);
    gsl_matrix_set(P, 1, 1, 1.0);
    gsl_vector_set(p0, 1, 0.0);
    lse_assert_status(lse_chain_mea_path(w, p0, P, NULL, 0, path, &err),
                      LSE_EINVAL);
    ck_assert(strstr(err.message, "no path") != NULL);
    gsl_vector_set_all(p0, 0.0);
    gsl_matrix_set_all(P, 0.5);
    lse_assert_status(lse_chain_mea_path(w, p0, P, NULL, 0, path, &err),
                      LSE_EINVAL);
    gsl_matrix_free(w);
    gsl_matrix_free(P);
    gsl_matrix_free(P3);
    gsl_vector_free(p0);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("mea_path");
    TCase *tc = tcase_create("mea_path");
    tcase_add_test(tc, test_mea_equals_brute_force);
    tcase_add_test(tc, test_mea_forbidden_and_ties);
    tcase_add_test(tc, test_mea_is_argmax_when_all_moves_allowed);
    tcase_add_test(tc, test_lslds_mea_path);
    tcase_add_test(tc, test_mea_errors);
    suite_add_tcase(s, tc);
    return s;
}
