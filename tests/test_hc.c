/* Ward / EII hierarchical agglomeration (lib/hc.c) against a brute-force
 * greedy merge computed from the clusters' members; mclust's hcVVV
 * (lib/hc_vvv.c) the same way and against mclust's own merges and
 * partitions on Faithful and Iris (tests/ref/hcvvv_ref.R). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>
#include <stdio.h>

#include "lse_check.h"

#define HCVVV_REF LSE_DATA_DIR "/../tests/ref/hcvvv_ref.txt"

/* Ward cost of joining clusters a and b (membership in lab) */
static double ward_cost(const gsl_matrix *x, const size_t *lab, size_t a,
                        size_t b)
{
    const size_t n = x->size1, d = x->size2;
    double ma[8] = {0}, mb[8] = {0}, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        if (lab[i] == a)
            na++;
        if (lab[i] == b)
            nb++;
        for (size_t j = 0; j < d; j++) {
            if (lab[i] == a)
                ma[j] += gsl_matrix_get(x, i, j);
            if (lab[i] == b)
                mb[j] += gsl_matrix_get(x, i, j);
        }
    }
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += pow(ma[j] / na - mb[j] / nb, 2);
    return na * nb / (na + nb) * s;
}

static double within_ss(const gsl_matrix *x, const size_t *lab, size_t k)
{
    const size_t n = x->size1, d = x->size2;
    double tot = 0.0;
    for (size_t c = 0; c < k; c++) {
        double m[8] = {0}, cnt = 0;
        for (size_t i = 0; i < n; i++)
            if (lab[i] == c) {
                cnt++;
                for (size_t j = 0; j < d; j++)
                    m[j] += gsl_matrix_get(x, i, j);
            }
        for (size_t i = 0; i < n; i++)
            if (lab[i] == c)
                for (size_t j = 0; j < d; j++)
                    tot += pow(gsl_matrix_get(x, i, j) - m[j] / cnt, 2);
    }
    return tot;
}

START_TEST(test_ward_brute_force)
{
    const size_t n = 25, d = 3;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7 + (unsigned long)_i);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, i, j,
                           gsl_ran_gaussian(rng, 1.0) + 3.0 * (double)(i % 3));
    size_t pairs[2 * 24];
    double cost[24];
    lse_error err;
    lse_assert_ok(lse_hc_ward(x, pairs, cost, &err));
    /* brute force: each merge is the cheapest pair of current clusters */
    size_t lab[25];
    for (size_t i = 0; i < n; i++)
        lab[i] = i;
    double sum = 0.0;
    for (size_t t = 0; t + 1 < n; t++) {
        double best = INFINITY;
        for (size_t a = 0; a < n; a++)
            for (size_t b = a + 1; b < n; b++) {
                int ha = 0, hb = 0;
                for (size_t i = 0; i < n; i++) {
                    ha |= lab[i] == a;
                    hb |= lab[i] == b;
                }
                if (ha && hb)
                    best = fmin(best, ward_cost(x, lab, a, b));
            }
        const size_t a = pairs[2 * t], b = pairs[2 * t + 1];
        ck_assert(a < b);
        ck_assert_double_eq_tol(cost[t], ward_cost(x, lab, a, b),
                                1e-9 * (1.0 + cost[t]));
        ck_assert_double_eq_tol(cost[t], best, 1e-9 * (1.0 + best));
        for (size_t i = 0; i < n; i++)
            if (lab[i] == b)
                lab[i] = a;
        sum += cost[t];
        /* Ward's identity: the costs so far add up to the within-cluster
         * sum of squares of the cut */
        const size_t k = n - 1 - t;
        size_t cut[25];
        lse_assert_ok(lse_hc_cut(n, pairs, k, cut));
        size_t mx = 0;
        for (size_t i = 0; i < n; i++)
            mx = cut[i] > mx ? cut[i] : mx;
        ck_assert_uint_eq(mx + 1, k);
        ck_assert_uint_eq(cut[0], 0);
        ck_assert_double_eq_tol(within_ss(x, cut, k), sum, 1e-9 * (1.0 + sum));
    }
    lse_assert_status(lse_hc_cut(n, pairs, 0, lab), LSE_EDIM);
    lse_assert_status(lse_hc_cut(n, pairs, n + 1, lab), LSE_EDIM);
    gsl_matrix_set(x, 3, 1, NAN);
    lse_assert_status(lse_hc_ward(x, pairs, cost, &err), LSE_ENONFINITE);
    lse_assert_status(lse_hc_ward(NULL, pairs, cost, &err), LSE_EFAULT);
    gsl_matrix_free(x);
    gsl_rng_free(rng);
}
END_TEST

/* n x n distances that size_t cannot count: LSE_ENOMEM with a message,
 * before any allocation or any read of x (a described, unallocated
 * matrix) */
START_TEST(test_ward_size_overflow)
{
    double one = 1.0;
    const gsl_matrix x = {.size1 = (size_t)1 << 31, .size2 = 1, .tda = 1,
                          .data = &one, .block = NULL, .owner = 0};
    size_t pairs[2];
    double cost[1];
    lse_error err;
    lse_assert_status(lse_hc_ward(&x, pairs, cost, &err), LSE_ENOMEM);
    ck_assert_msg(strstr(err.message, "lse_hc_ward") != NULL &&
                      strstr(err.message, "2147483648 rows") != NULL,
                  "%s", err.message);
}
END_TEST


/* hcVVV's criterion of one cluster, from its members (two-pass scatter,
 * determinant by cofactors, d = 2 or 3): the definition in hc.h */
static double vvv_term(const gsl_matrix *x, const size_t *lab, size_t a,
                       double alpha)
{
    const size_t n = x->size1, d = x->size2;
    double m[4] = {0}, l = 0.0;
    for (size_t i = 0; i < n; i++)
        if (lab[i] == a) {
            l++;
            for (size_t j = 0; j < d; j++)
                m[j] += gsl_matrix_get(x, i, j);
        }
    gsl_matrix *w = gsl_matrix_calloc(d, d);
    for (size_t j = 0; j < d; j++)
        m[j] /= l;
    for (size_t i = 0; i < n; i++)
        if (lab[i] == a)
            for (size_t p = 0; p < d; p++)
                for (size_t q = 0; q < d; q++)
                    *gsl_matrix_ptr(w, p, q) +=
                        (gsl_matrix_get(x, i, p) - m[p]) *
                        (gsl_matrix_get(x, i, q) - m[q]);
    double tr = 0.0;
    for (size_t p = 0; p < d; p++)
        tr += gsl_matrix_get(w, p, p);
    double t = (tr + alpha) / l;
    if (l > (double)d && l != 2.0 && tr > 0.0) {
        gsl_matrix_scale(w, 1.0 / l);
#define W(p, q) gsl_matrix_get(w, p, q)
        t += d == 2 ? W(0, 0) * W(1, 1) - W(0, 1) * W(1, 0)
                    : W(0, 0) * (W(1, 1) * W(2, 2) - W(1, 2) * W(2, 1)) -
                          W(0, 1) * (W(1, 0) * W(2, 2) - W(1, 2) * W(2, 0)) +
                          W(0, 2) * (W(1, 0) * W(2, 1) - W(1, 1) * W(2, 0));
#undef W
    }
    gsl_matrix_free(w);
    return l * log(t);
}

START_TEST(test_vvv_brute_force)
{
    const size_t n = 16, d = 2 + (size_t)_i % 2;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 11 + (unsigned long)_i);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, i, j,
                           gsl_ran_gaussian(rng, 1.0 + (double)j) +
                               4.0 * (double)(i % 2));
    /* rows 9 and 13 repeat row 4 (zero scatter, tied pairs) */
    for (size_t j = 0; j < d; j++) {
        gsl_matrix_set(x, 9, j, gsl_matrix_get(x, 4, j));
        gsl_matrix_set(x, 13, j, gsl_matrix_get(x, 4, j));
    }
    double alpha = 0.0;
    for (size_t j = 0; j < d; j++) {
        double m = 0.0;
        for (size_t i = 0; i < n; i++)
            m += gsl_matrix_get(x, i, j) / (double)n;
        for (size_t i = 0; i < n; i++)
            alpha += pow(gsl_matrix_get(x, i, j) - m, 2) / (double)(n * d);
    }
    size_t pairs[2 * 15], lab[16];
    double cost[15];
    lse_error err;
    lse_assert_ok(lse_hc_vvv(x, pairs, cost, &err));
    for (size_t i = 0; i < n; i++)
        lab[i] = i;
    for (size_t t = 0; t + 1 < n; t++) {
        const size_t a = pairs[2 * t], b = pairs[2 * t + 1];
        ck_assert(a < b);
        {
            /* the merge's cost is the criterion's change, and no pair of
             * current clusters changes it less */
            double best = INFINITY;
            for (size_t p = 0; p < n; p++)
                for (size_t q = p + 1; q < n; q++) {
                    int hp = 0, hq = 0;
                    for (size_t i = 0; i < n; i++) {
                        hp |= lab[i] == p;
                        hq |= lab[i] == q;
                    }
                    if (!hp || !hq)
                        continue;
                    size_t tmp[16];
                    for (size_t i = 0; i < n; i++)
                        tmp[i] = lab[i] == q ? p : lab[i];
                    best = fmin(best, vvv_term(x, tmp, p, alpha) -
                                          vvv_term(x, lab, p, alpha) -
                                          vvv_term(x, lab, q, alpha));
                }
            size_t tmp[16];
            for (size_t i = 0; i < n; i++)
                tmp[i] = lab[i] == b ? a : lab[i];
            const double c = vvv_term(x, tmp, a, alpha) -
                             vvv_term(x, lab, a, alpha) -
                             vvv_term(x, lab, b, alpha);
            ck_assert_double_eq_tol(cost[t], c, 1e-9 * (1.0 + fabs(c)));
            ck_assert_double_eq_tol(cost[t], best, 1e-9 * (1.0 + fabs(c)));
        }
        for (size_t i = 0; i < n; i++)
            if (lab[i] == b)
                lab[i] = a;
    }
    gsl_matrix_set(x, 3, 1, INFINITY);
    lse_assert_status(lse_hc_vvv(x, pairs, cost, &err), LSE_ENONFINITE);
    lse_assert_status(lse_hc_vvv(NULL, pairs, cost, &err), LSE_EFAULT);
    gsl_matrix_free(x);
    gsl_rng_free(rng);
}
END_TEST

/* the SVD transform's defining properties: z^T z = S (the singular values
 * of the standardized data, on the diagonal), so z S^(-1/2)... has
 * orthonormal columns, and z z^T = X_std X_std^T scaled per direction:
 * checked as z^T z diagonal and z = X_std V S^(-1/2) reproducing X_std's
 * Gram matrix X_std X_std^T = z S z^T. */
START_TEST(test_svd_transform)
{
    const size_t n = 30, d = 3;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 5);
    gsl_matrix *x = gsl_matrix_alloc(n, d), *z = gsl_matrix_alloc(n, d);
    for (size_t i = 0; i < n; i++) {
        const double u = gsl_ran_gaussian(rng, 1.0);
        gsl_matrix_set(x, i, 0, 10.0 + 3.0 * u);
        gsl_matrix_set(x, i, 1, u + gsl_ran_gaussian(rng, 0.5));
        gsl_matrix_set(x, i, 2, -2.0 * gsl_ran_gaussian(rng, 1.0));
    }
    lse_error err;
    lse_assert_ok(lse_hc_svd(x, z, &err));
    gsl_matrix *xs = gsl_matrix_alloc(n, d);
    for (size_t j = 0; j < d; j++) {
        double m = 0.0, ss = 0.0;
        for (size_t i = 0; i < n; i++)
            m += gsl_matrix_get(x, i, j) / (double)n;
        for (size_t i = 0; i < n; i++)
            ss += pow(gsl_matrix_get(x, i, j) - m, 2);
        for (size_t i = 0; i < n; i++)
            gsl_matrix_set(xs, i, j,
                           (gsl_matrix_get(x, i, j) - m) /
                               sqrt(ss / (double)(n - 1)));
    }
    /* z^T z = diag(s_k) */
    double s[3];
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++) {
            double t = 0.0;
            for (size_t i = 0; i < n; i++)
                t += gsl_matrix_get(z, i, a) * gsl_matrix_get(z, i, b);
            if (a == b)
                s[a] = t;
            else
                ck_assert_double_eq_tol(t, 0.0, 1e-10);
        }
    ck_assert(s[0] >= s[1] && s[1] >= s[2] && s[2] > 0.0);
    /* X_std X_std^T = z diag(s) z^T */
    for (size_t i = 0; i < n; i += 3)
        for (size_t k = 0; k < n; k += 4) {
            double g = 0.0, h = 0.0;
            for (size_t a = 0; a < d; a++) {
                g += gsl_matrix_get(xs, i, a) * gsl_matrix_get(xs, k, a);
                h += gsl_matrix_get(z, i, a) * s[a] * gsl_matrix_get(z, k, a);
            }
            ck_assert_double_eq_tol(g, h, 1e-10 * (1.0 + fabs(g)));
        }
    for (size_t i = 0; i < n; i++)
        gsl_matrix_set(x, i, 2, 5.0);
    lse_assert_status(lse_hc_svd(x, z, &err), LSE_EDOM);
    gsl_matrix_free(x);
    gsl_matrix_free(z);
    gsl_matrix_free(xs);
    gsl_rng_free(rng);
}
END_TEST

static gsl_matrix *load_csv(const char *path, size_t d)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    char line[512];
    gsl_matrix *x = gsl_matrix_alloc(300, d);
    size_t n = 0;
    ck_assert(fgets(line, sizeof line, f) != NULL); /* header */
    while (fgets(line, sizeof line, f) != NULL && n < 300) {
        char *p = line;
        for (size_t j = 0; j < d; j++) {
            gsl_matrix_set(x, n, j, strtod(p, &p));
            p++; /* the comma */
        }
        n++;
    }
    fclose(f);
    gsl_matrix *out = gsl_matrix_alloc(n, d);
    gsl_matrix_const_view v = gsl_matrix_const_submatrix(x, 0, 0, n, d);
    gsl_matrix_memcpy(out, &v.matrix);
    gsl_matrix_free(x);
    return out;
}

/* mclust's merges from mclust's transformed data, and mclust's partitions
 * (hclass, G = 1..9) from the raw data through lse_hc_svd */
START_TEST(test_vvv_mclust)
{
    FILE *f = fopen(HCVVV_REF, "r");
    ck_assert_msg(f != NULL, "%s", HCVVV_REF);
    static char line[16384];
    for (int set = 0; set < 2; set++) {
        char name[32];
        size_t n = 0, d = 0;
        while (fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "data %31s %zu %zu", name, &n, &d) == 3)
                break;
        ck_assert(n > 0 && d > 0);
        gsl_matrix *zr = gsl_matrix_alloc(n, d), *z = gsl_matrix_alloc(n, d);
        size_t *pairs = malloc(2 * n * sizeof *pairs), *lab = malloc(n * sizeof *lab);
        size_t *ref = malloc(2 * n * sizeof *ref);
        double *cost = malloc(n * sizeof *cost);
        size_t n_merge = 0, n_class = 0;
        for (size_t i = 0; i < n; i++) {
            ck_assert(fgets(line, sizeof line, f) != NULL);
            char *p = line + 1;
            ck_assert_uint_eq(strtoul(p, &p, 10), i);
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(zr, i, j, strtod(p, &p));
        }
        lse_error err;
        lse_assert_ok(lse_hc_vvv(zr, pairs, cost, &err));
        gsl_matrix *x = load_csv(strcmp(name, "faithful") == 0
                                     ? LSE_DATA_DIR "/faithful.csv"
                                     : LSE_DATA_DIR "/iris.csv",
                                 d);
        ck_assert_uint_eq(x->size1, n);
        lse_assert_ok(lse_hc_svd(x, z, &err));
        /* the transform equals mclust's up to the columns' signs */
        for (size_t j = 0; j < d; j++) {
            const double sg = gsl_matrix_get(z, 0, j) *
                                          gsl_matrix_get(zr, 0, j) <
                                      0.0
                                  ? -1.0
                                  : 1.0;
            for (size_t i = 0; i < n; i++)
                ck_assert_double_eq_tol(sg * gsl_matrix_get(z, i, j),
                                        gsl_matrix_get(zr, i, j), 1e-12);
        }
        size_t *p2 = malloc(2 * n * sizeof *p2);
        lse_assert_ok(lse_hc_vvv(z, p2, cost, &err));
        long pos = ftell(f);
        while (fgets(line, sizeof line, f) != NULL) {
            size_t t, a, b, g;
            if (sscanf(line, "merge %zu %zu %zu", &t, &a, &b) == 3) {
                ref[2 * n_merge] = a;
                ref[2 * n_merge + 1] = b;
                n_merge++;
            } else if (sscanf(line, "class %zu", &g) == 1) {
                /* from the raw data: mclust's partition */
                lse_assert_ok(lse_hc_cut(n, p2, g, lab));
                char *p = strchr(line + 6, ' ');
                for (size_t i = 0; i < n; i++) {
                    const unsigned long v = strtoul(p, &p, 10);
                    ck_assert_msg(lab[i] == v, "%s G = %zu row %zu: %zu, "
                                  "mclust %lu", name, g, i, lab[i], v);
                }
                n_class++;
            } else {
                fseek(f, pos, SEEK_SET);
                break;
            }
            pos = ftell(f);
        }
        ck_assert_uint_eq(n_class, 9);
        /* every merge of mclust's tree */
        const size_t dup = 0;
        ck_assert_uint_eq(n_merge, n - 1);
        for (size_t t = 0; t < n_merge; t++)
            ck_assert_msg(pairs[2 * (dup + t)] == ref[2 * t] &&
                              pairs[2 * (dup + t) + 1] == ref[2 * t + 1],
                          "%s merge %zu: (%zu, %zu), mclust (%zu, %zu)", name,
                          t + 1, pairs[2 * (dup + t)],
                          pairs[2 * (dup + t) + 1], ref[2 * t],
                          ref[2 * t + 1]);
        gsl_matrix_free(zr);
        gsl_matrix_free(z);
        gsl_matrix_free(x);
        free(pairs);
        free(p2);
        free(lab);
        free(ref);
        free(cost);
    }
    fclose(f);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("hc");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_ward_brute_force, 0, 4);
    tcase_add_test(tc, test_ward_size_overflow);
    tcase_add_loop_test(tc, test_vvv_brute_force, 0, 4);
    tcase_add_test(tc, test_svd_transform);
    tcase_add_test(tc, test_vvv_mclust);
    suite_add_tcase(s, tc);
    return s;
}
