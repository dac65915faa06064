#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lse_check.h"

/* lse_kmeans_* (lib/kmeans.c) and lse_comm_* (lib/comm.c). */

/* Three well separated clouds of 20 points each in 2-D, shuffled. */
static gsl_matrix *clouds(unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    gsl_matrix *x = gsl_matrix_alloc(60, 2);
    for (size_t i = 0; i < 60; i++) {
        const double cx = (double)(i % 3) * 10.0, cy = (double)(i % 3) * -4.0;
        gsl_matrix_set(x, i, 0, cx + gsl_rng_uniform(r) - 0.5);
        gsl_matrix_set(x, i, 1, cy + gsl_rng_uniform(r) - 0.5);
    }
    gsl_rng_free(r);
    return x;
}

static int is_row_of(const gsl_matrix *c, size_t j, const gsl_matrix *x)
{
    for (size_t i = 0; i < x->size1; i++)
        if (gsl_matrix_get(c, j, 0) == gsl_matrix_get(x, i, 0) &&
            gsl_matrix_get(c, j, 1) == gsl_matrix_get(x, i, 1))
            return 1;
    return 0;
}

static void seed_with(const gsl_matrix *x, const gsl_vector *w, unsigned long s,
                      unsigned flags, gsl_matrix *c)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, s);
    gsl_vector *d2 = gsl_vector_alloc(x->size1);
    lse_assert_ok(lse_kmeans_seed(x, w, r, c, d2, flags, NULL, NULL));
    /* d2 is each row's squared distance to its nearest center */
    size_t *lab = malloc(x->size1 * sizeof *lab);
    gsl_vector *near = gsl_vector_alloc(x->size1);
    lse_kmeans_nearest(x, c, lab, near, 0);
    for (size_t i = 0; i < x->size1; i++)
        ck_assert_double_eq(gsl_vector_get(d2, i), gsl_vector_get(near, i));
    free(lab);
    gsl_vector_free(near);
    gsl_vector_free(d2);
    gsl_rng_free(r);
}

START_TEST(test_seed_reproducible)
{
    gsl_matrix *x = clouds(1);
    for (unsigned flags = 0; flags < 2; flags++) {
        gsl_matrix *a = gsl_matrix_alloc(3, 2), *b = gsl_matrix_alloc(3, 2);
        seed_with(x, NULL, 7, flags, a);
        seed_with(x, NULL, 7, flags, b);
        ck_assert(memcmp(a->data, b->data, 6 * sizeof(double)) == 0);
        /* D^2 seeding on separated clouds: one center per cloud */
        int seen[3] = {0, 0, 0};
        for (size_t j = 0; j < 3; j++) {
            ck_assert(is_row_of(a, j, x));
            const long cl = lround(gsl_matrix_get(a, j, 0) / 10.0);
            ck_assert(cl >= 0 && cl < 3);
            seen[cl]++;
        }
        ck_assert(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
        gsl_matrix_free(a);
        gsl_matrix_free(b);
    }
    gsl_matrix_free(x);
}
END_TEST

START_TEST(test_seed_weights)
{
    gsl_matrix *x = clouds(2);
    gsl_vector *w = gsl_vector_calloc(60);
    /* only rows 4 and 9 may be drawn */
    gsl_vector_set(w, 4, 1.0);
    gsl_vector_set(w, 9, 2.0);
    gsl_matrix *c = gsl_matrix_alloc(2, 2);
    gsl_matrix_view r4 = gsl_matrix_submatrix(x, 4, 0, 1, 2);
    gsl_matrix_view r9 = gsl_matrix_submatrix(x, 9, 0, 1, 2);
    for (unsigned long s = 0; s < 20; s++) {
        seed_with(x, w, s, 0, c);
        ck_assert(is_row_of(c, 0, &r4.matrix) || is_row_of(c, 0, &r9.matrix));
        ck_assert(is_row_of(c, 1, &r4.matrix) || is_row_of(c, 1, &r9.matrix));
        ck_assert(gsl_matrix_get(c, 0, 0) != gsl_matrix_get(c, 1, 0));
    }
    /* no row with positive weight; shapes */
    gsl_vector_set_zero(w);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_vector *d2 = gsl_vector_alloc(60);
    lse_error err;
    lse_assert_status(lse_kmeans_seed(x, w, r, c, d2, 0, NULL, &err),
                      LSE_EINVAL);
    ck_assert(strstr(err.message, "lse_kmeans_seed") != NULL);
    gsl_vector *d2bad = gsl_vector_alloc(59);
    lse_assert_status(lse_kmeans_seed(x, NULL, r, c, d2bad, 0, NULL, &err),
                      LSE_EDIM);
    gsl_vector_free(d2bad);
    gsl_vector_free(d2);
    gsl_rng_free(r);
    gsl_matrix_free(c);
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

/* Lloyd one update at a time: the objective never increases; at the end
 * every center is the weighted mean of its rows and every label the
 * nearest center. */
START_TEST(test_lloyd_monotone)
{
    gsl_matrix *x = clouds(3);
    gsl_vector *w = gsl_vector_alloc(60);
    for (size_t i = 0; i < 60; i++)
        gsl_vector_set(w, i, 0.5 + (double)(i % 7) / 7.0);
    for (unsigned flags = 0; flags <= LSE_KMEANS_DIVIDE;
         flags += LSE_KMEANS_DIVIDE) {
        gsl_matrix *c = gsl_matrix_alloc(4, 2);
        for (size_t j = 0; j < 4; j++) { /* a poor start: 4 rows of cloud 0 */
            gsl_matrix_set(c, j, 0, gsl_matrix_get(x, 3 * j, 0));
            gsl_matrix_set(c, j, 1, gsl_matrix_get(x, 3 * j, 1));
        }
        size_t lab[60], it = 0;
        gsl_vector *sums = gsl_vector_alloc(4);
        lse_kmeans_nearest(x, c, lab, NULL, 0);
        const double start = lse_kmeans_objective(x, w, c, lab);
        double prev = start;
        for (size_t step = 0; step < 50; step++) {
            lse_assert_ok(lse_kmeans_lloyd(x, w, c, 1, lab, sums, &it, flags,
                                           NULL, NULL));
            ck_assert_uint_eq(it, 1);
            const double obj = lse_kmeans_objective(x, w, c, lab);
            ck_assert_msg(obj <= prev * (1 + 1e-15), "%g > %g", obj, prev);
            prev = obj;
        }
        ck_assert(prev < 0.5 * start);
        for (size_t j = 0; j < 4; j++) {
            double sw = 0, sx = 0, sy = 0;
            for (size_t i = 0; i < 60; i++)
                if (lab[i] == j) {
                    sw += gsl_vector_get(w, i);
                    sx += gsl_vector_get(w, i) * gsl_matrix_get(x, i, 0);
                    sy += gsl_vector_get(w, i) * gsl_matrix_get(x, i, 1);
                }
            if (sw > 0) {
                ck_assert_double_eq_tol(gsl_matrix_get(c, j, 0), sx / sw,
                                        1e-12);
                ck_assert_double_eq_tol(gsl_matrix_get(c, j, 1), sy / sw,
                                        1e-12);
            }
        }
        size_t lab2[60];
        lse_kmeans_nearest(x, c, lab2, NULL, 0);
        ck_assert(memcmp(lab, lab2, sizeof lab) == 0);
        /* converged: another call changes nothing */
        lse_assert_ok(
            lse_kmeans_lloyd(x, w, c, 10, lab, sums, &it, flags, NULL, NULL));
        ck_assert_uint_eq(it, 1);
        gsl_vector_free(sums);
        gsl_matrix_free(c);
    }
    gsl_vector_free(w);
    gsl_matrix_free(x);
}
END_TEST

static size_t n_calls;
static int fail_calls;
static lse_status count_hook(double *buf, size_t n, void *user)
{
    (void)buf;
    (void)n;
    (void)user;
    n_calls++;
    return fail_calls ? LSE_EIO : LSE_OK;
}

/* One process through a hook: every collective calls it once and is the
 * identity; a failure is recorded and the hook never called again. */
/* lse_kmeans_nearest (unrolled for d = 2, 3, 4) against the definition:
 * for every d and k, the first center of least lse_kmeans_dist2 (same
 * bits), that distance in d2 and the count of changed labels; rows and
 * centers as views with a row stride wider than d, and tied centers. */
START_TEST(test_nearest_every_d)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 13);
    gsl_matrix *xb = gsl_matrix_alloc(37, 9), *cb = gsl_matrix_alloc(6, 8);
    size_t lab[37], old[37];
    gsl_vector *d2 = gsl_vector_alloc(37);
    for (size_t d = 1; d <= 7; d++)
        for (size_t k = 1; k <= 6; k++) {
            for (size_t i = 0; i < xb->size1 * xb->size2; i++)
                xb->data[i] = gsl_rng_uniform(r) * 4.0 - 2.0;
            for (size_t i = 0; i < cb->size1 * cb->size2; i++)
                cb->data[i] = gsl_rng_uniform(r) * 4.0 - 2.0;
            if (k >= 3) /* centers 1 and 2 tie: the first one wins */
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(cb, 2, j, gsl_matrix_get(cb, 1, j));
            gsl_matrix_view xv = gsl_matrix_submatrix(xb, 0, 1, 37, d);
            gsl_matrix_view cv = gsl_matrix_submatrix(cb, 0, 0, k, d);
            for (size_t i = 0; i < 37; i++)
                lab[i] = old[i] = gsl_rng_uniform_int(r, k);
            const size_t changed =
                lse_kmeans_nearest(&xv.matrix, &cv.matrix, lab, d2, 1);
            size_t want_changed = 0;
            for (size_t i = 0; i < 37; i++) {
                size_t best = 0;
                double bd = lse_kmeans_dist2(&xv.matrix, i, &cv.matrix, 0);
                for (size_t c = 1; c < k; c++) {
                    const double dc =
                        lse_kmeans_dist2(&xv.matrix, i, &cv.matrix, c);
                    if (dc < bd) {
                        bd = dc;
                        best = c;
                    }
                }
                want_changed += best != old[i];
                ck_assert_uint_eq(lab[i], best);
                ck_assert(memcmp(&bd, gsl_vector_const_ptr(d2, i),
                                 sizeof bd) == 0);
                ck_assert(best != 2 || k < 3);
            }
            ck_assert_uint_eq(changed, want_changed);
            /* without counting: 0 changes reported */
            ck_assert_uint_eq(
                lse_kmeans_nearest(&xv.matrix, &cv.matrix, lab, NULL, 0), 0);
        }
    gsl_vector_free(d2);
    gsl_matrix_free(cb);
    gsl_matrix_free(xb);
    gsl_rng_free(r);
}
END_TEST

START_TEST(test_comm_hook)
{
    lse_comm c;
    lse_error err;
    n_calls = 0;
    fail_calls = 0;
    lse_assert_ok(lse_comm_init(&c, count_hook, NULL, 0, 1, 5, "t", &err));
    ck_assert_uint_eq(n_calls, 1);
    ck_assert_uint_eq(c.n_total, 5);
    ck_assert_uint_eq(c.offset, 0);
    ck_assert(lse_comm_parallel(&c));
    double buf[2] = {1.5, -2.0}, all[2];
    lse_assert_ok(lse_comm_sum(&c, buf, 2, "t", &err));
    ck_assert(buf[0] == 1.5 && buf[1] == -2.0);
    lse_assert_ok(lse_comm_gather(&c, buf, 2, all, "t", &err));
    ck_assert(all[0] == 1.5 && all[1] == -2.0);
    lse_assert_ok(lse_comm_bcast(&c, 1, buf, 2, "t", &err));
    ck_assert(buf[0] == 1.5 && buf[1] == -2.0);
    lse_xsum xs[2];
    lse_xsum_init(&xs[0]);
    lse_xsum_init(&xs[1]);
    lse_xsum_add(&xs[0], 1e16);
    lse_xsum_add(&xs[0], 1.0);
    lse_xsum_add(&xs[0], -1e16);
    lse_xsum_add(&xs[1], 0.25);
    double out[2];
    lse_assert_ok(lse_comm_xsum(&c, xs, 2, out, "t", &err));
    ck_assert(out[0] == 1.0 && out[1] == 0.25);
    ck_assert_uint_eq(n_calls, 5);
    fail_calls = 1;
    lse_assert_status(lse_comm_sum(&c, buf, 2, "t", &err), LSE_EIO);
    ck_assert(strstr(err.message, "t: the reduction") == err.message);
    ck_assert_uint_eq(n_calls, 6);
    lse_assert_status(lse_comm_sum(&c, buf, 2, "t", &err), LSE_EIO);
    ck_assert_uint_eq(n_calls, 6);
    lse_comm_free(&c);
    lse_comm_free(NULL);
    /* arguments */
    lse_assert_status(lse_comm_init(&c, NULL, NULL, 0, 2, 5, "t", &err),
                      LSE_EINVAL);
    lse_assert_status(lse_comm_init(&c, count_hook, NULL, 2, 2, 5, "t", &err),
                      LSE_EINVAL);
    lse_assert_ok(lse_comm_init(&c, NULL, NULL, 0, 0, 5, "t", &err));
    ck_assert(!lse_comm_parallel(&c));
    ck_assert_uint_eq(c.n_total, 5);
    lse_comm_free(&c);
}
END_TEST

/* a gather scratch of n_ranks x LSE_COMM_GATHER_MAX doubles that size_t
 * cannot count: LSE_ENOMEM with a message, before the hook is called */
START_TEST(test_comm_size_overflow)
{
    lse_comm c;
    lse_error err;
    const size_t n_ranks = SIZE_MAX / 4;
    const size_t calls = n_calls;
    lse_assert_status(
        lse_comm_init(&c, count_hook, NULL, 0, n_ranks, 5, "t", &err),
        LSE_ENOMEM);
    char want[64];
    snprintf(want, sizeof want, "t: %zu processes", n_ranks);
    ck_assert_msg(strstr(err.message, want) != NULL, "%s", err.message);
    ck_assert_uint_eq(n_calls, calls);
    lse_comm_free(&c);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("kmeans");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_seed_reproducible);
    tcase_add_test(tc, test_seed_weights);
    tcase_add_test(tc, test_lloyd_monotone);
    tcase_add_test(tc, test_comm_hook);
    tcase_add_test(tc, test_nearest_every_d);
    tcase_add_test(tc, test_comm_size_overflow);
    suite_add_tcase(s, tc);
    return s;
}
