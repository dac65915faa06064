/* lse_chol_decomp1 and lse_tri_invert_lower (lib/linalg_small.c) against
 * GSL: the same bits wherever GSL's BLAS is OpenBLAS on a core whose
 * kernels use FMA (the functions copy that arithmetic), and everywhere the
 * defining properties: L L' = A and L L^-1 = I to rounding, the same
 * status on matrices that are not positive definite or are singular. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>

#include "lse_check.h"
#include "linalg-private.h"
#include "rows-private.h"

/* OpenBLAS's core name, when OpenBLAS is the BLAS (weak: NULL with
 * GSL's reference CBLAS) */
extern char *openblas_get_corename(void) __attribute__((weak));

static int bits_expected(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (openblas_get_corename == NULL || !__builtin_cpu_supports("fma"))
        return 0;
    static const char *fma_cores[] = {"Haswell", "Zen", "SkylakeX",
                                      "Cooperlake", "SapphireRapids"};
    const char *c = openblas_get_corename();
    for (size_t i = 0; c != NULL && i < sizeof fma_cores / sizeof *fma_cores;
         i++)
        if (strcmp(c, fma_cores[i]) == 0)
            return 1;
#endif
    return 0;
}

static uint64_t rng_state = 88172645463325252u;
static double unif(void) /* xorshift64*, (0, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((rng_state * 2685821657736338717u >> 11) + 0.5) * 0x1p-53;
}

/* A = B B' + eps I with B n x (n + extra), entries of scales spread over
 * decades (extra = 0 and eps = 0 gives matrices near singular) */
static void random_spd(gsl_matrix *a, size_t n, size_t extra)
{
    gsl_matrix *b = gsl_matrix_alloc(n, n + extra);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n + extra; j++)
            gsl_matrix_set(b, i, j,
                           (2.0 * unif() - 1.0) * exp(6.0 * (unif() - 0.5)));
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, b, b, 0.0, a);
    gsl_matrix_free(b);
}

static int same_bits(const gsl_matrix *x, const gsl_matrix *y)
{
    for (size_t i = 0; i < x->size1; i++)
        if (memcmp(gsl_matrix_const_ptr(x, i, 0), gsl_matrix_const_ptr(y, i, 0),
                   x->size2 * sizeof(double)) != 0)
            return 0;
    return 1;
}

START_TEST(test_chol_bits)
{
    const int bits = bits_expected();
    size_t n_same = 0, n_all = 0;
    for (size_t n = 1; n <= LSE_CHOL_SMALL_MAX + 2; n++)
        for (int rep = 0; rep < 4000; rep++) {
            gsl_matrix *a = gsl_matrix_alloc(n, n), *g = gsl_matrix_alloc(n, n);
            random_spd(a, n, rep % 3);
            gsl_matrix_memcpy(g, a);
            const int rg = gsl_linalg_cholesky_decomp1(g);
            gsl_matrix *orig = gsl_matrix_alloc(n, n);
            gsl_matrix_memcpy(orig, a);
            const int rl = lse_chol_decomp1(a);
            ck_assert_int_eq(rl, rg);
            if (rg == GSL_SUCCESS) {
                n_all++;
                n_same += (size_t)same_bits(a, g);
                if (bits)
                    ck_assert_msg(same_bits(a, g), "n = %zu, rep %d: bits differ",
                                  n, rep);
                /* L L' = A: the lower triangle, relative to the diagonal
                 * scales; the upper triangle keeps A */
                for (size_t i = 0; i < n; i++)
                    for (size_t j = 0; j <= i; j++) {
                        double s = 0.0;
                        for (size_t k = 0; k <= j; k++)
                            s += gsl_matrix_get(a, i, k) * gsl_matrix_get(a, j, k);
                        const double aij = gsl_matrix_get(orig, i, j);
                        const double sc = sqrt(gsl_matrix_get(orig, i, i) *
                                               gsl_matrix_get(orig, j, j));
                        ck_assert_msg(fabs(s - aij) <= 1e-12 * sc,
                                      "n = %zu: (L L')[%zu,%zu] = %g, A = %g", n,
                                      i, j, s, aij);
                        if (j < i)
                            ck_assert(gsl_matrix_get(a, j, i) == aij);
                    }
            }
            gsl_matrix_free(a);
            gsl_matrix_free(g);
            gsl_matrix_free(orig);
        }
    /* not a vacuous run: most matrices factor */
    ck_assert_uint_gt(n_all, 20000);
    if (!bits)
        fprintf(stderr, "# bits not expected here: %zu of %zu the same\n",
                n_same, n_all);
}
END_TEST

START_TEST(test_chol_not_pd)
{
    for (size_t n = 1; n <= LSE_CHOL_SMALL_MAX + 1; n++) {
        gsl_matrix *a = gsl_matrix_alloc(n, n), *g = gsl_matrix_alloc(n, n);
        random_spd(a, n, 1);
        /* the last diagonal entry made too small: column n-1 fails */
        gsl_matrix_set(a, n - 1, n - 1, -1.0);
        gsl_matrix_memcpy(g, a);
        const int rg = gsl_linalg_cholesky_decomp1(g);
        ck_assert_int_eq(rg, GSL_EDOM);
        ck_assert_int_eq(lse_chol_decomp1(a), GSL_EDOM);
        gsl_matrix_free(a);
        gsl_matrix_free(g);
    }
}
END_TEST

START_TEST(test_tri_invert_bits)
{
    const int bits = bits_expected();
    for (size_t n = 1; n <= LSE_TRI_INV_SMALL_MAX + 2; n++)
        for (int rep = 0; rep < 600; rep++) {
            gsl_matrix *a = gsl_matrix_alloc(n, n), *g = gsl_matrix_alloc(n, n);
            random_spd(a, n, 1 + rep % 3);
            ck_assert_int_eq(gsl_linalg_cholesky_decomp1(a), GSL_SUCCESS);
            gsl_matrix *l = gsl_matrix_alloc(n, n);
            gsl_matrix_memcpy(l, a);
            gsl_matrix_memcpy(g, a);
            ck_assert_int_eq(gsl_linalg_tri_invert(CblasLower, CblasNonUnit, g),
                             GSL_SUCCESS);
            ck_assert_int_eq(lse_tri_invert_lower(a), GSL_SUCCESS);
            if (bits)
                ck_assert_msg(same_bits(a, g), "n = %zu, rep %d: bits differ", n,
                              rep);
            /* L L^-1 = I, relative to |L| |L^-1| */
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j <= i; j++) {
                    double s = 0.0, sa = 0.0;
                    for (size_t k = j; k <= i; k++) {
                        const double p =
                            gsl_matrix_get(l, i, k) * gsl_matrix_get(a, k, j);
                        s += p;
                        sa += fabs(p);
                    }
                    ck_assert_msg(fabs(s - (i == j)) <= 1e-13 * sa,
                                  "n = %zu: (L L^-1)[%zu,%zu] = %g", n, i, j, s);
                }
            gsl_matrix_free(a);
            gsl_matrix_free(g);
            gsl_matrix_free(l);
        }
}
END_TEST

START_TEST(test_tri_invert_singular)
{
    for (size_t n = 1; n <= LSE_TRI_INV_SMALL_MAX + 1; n += 3) {
        gsl_matrix *a = gsl_matrix_alloc(n, n);
        random_spd(a, n, 1);
        ck_assert_int_eq(gsl_linalg_cholesky_decomp1(a), GSL_SUCCESS);
        gsl_matrix_set(a, n / 2, n / 2, 0.0);
        gsl_matrix *g = gsl_matrix_alloc(n, n);
        gsl_matrix_memcpy(g, a);
        ck_assert_int_eq(gsl_linalg_tri_invert(CblasLower, CblasNonUnit, g),
                         GSL_ESING);
        ck_assert_int_eq(lse_tri_invert_lower(a), GSL_ESING);
        gsl_matrix_free(g);
        gsl_matrix_free(a);
    }
}
END_TEST

/* lse_copy_rows_checked (rows-private.h) against gsl_matrix_memcpy: whole
 * matrices and views of every shape up to 6 x 6 inside a wider block, the
 * same bits; other sizes GSL_EBADLEN with the destination untouched */
START_TEST(test_matrix_copy)
{
    gsl_matrix *big = gsl_matrix_alloc(9, 11), *a = gsl_matrix_alloc(9, 11);
    gsl_matrix *b = gsl_matrix_alloc(9, 11);
    for (size_t i = 0; i < 9; i++)
        for (size_t j = 0; j < 11; j++)
            gsl_matrix_set(big, i, j, sin((double)(i * 11 + j)) * 1e3);
    for (size_t n1 = 0; n1 <= 6; n1++)
        for (size_t n2 = 0; n2 <= 6; n2++)
            for (int whole = 0; whole < 2; whole++) {
                gsl_matrix_set_all(a, -1.0);
                gsl_matrix_set_all(b, -1.0);
                gsl_matrix_view src = gsl_matrix_submatrix(big, 1, 2, n1, n2);
                gsl_matrix *ca = n1 && n2 && whole ? gsl_matrix_alloc(n1, n2) : NULL;
                gsl_matrix *cb = ca ? gsl_matrix_alloc(n1, n2) : NULL;
                gsl_matrix_view va = gsl_matrix_submatrix(a, 2, 1, n1, n2);
                gsl_matrix_view vb = gsl_matrix_submatrix(b, 2, 1, n1, n2);
                gsl_matrix *da = ca ? ca : &va.matrix, *db = cb ? cb : &vb.matrix;
                gsl_matrix_const_view cs = gsl_matrix_const_submatrix(big, 0, 0, n1, n2);
                const gsl_matrix *s0 = whole && n1 && n2 ? &cs.matrix : &src.matrix;
                gsl_matrix *sc = NULL;
                if (whole && n1 && n2) { /* a contiguous source too */
                    sc = gsl_matrix_alloc(n1, n2);
                    gsl_matrix_memcpy(sc, s0);
                    s0 = sc;
                }
                ck_assert_int_eq(lse_copy_rows_checked(da, s0), GSL_SUCCESS);
                ck_assert_int_eq(gsl_matrix_memcpy(db, s0), GSL_SUCCESS);
                for (size_t i = 0; i < n1; i++)
                    for (size_t j = 0; j < n2; j++)
                        ck_assert(gsl_matrix_get(da, i, j) == gsl_matrix_get(db, i, j));
                /* nothing outside the view written */
                ck_assert_mem_eq(a->data, b->data, 9 * 11 * sizeof(double));
                gsl_matrix_free(ca);
                gsl_matrix_free(cb);
                gsl_matrix_free(sc);
            }
    gsl_matrix_set_all(a, 7.0);
    gsl_matrix_view v = gsl_matrix_submatrix(big, 0, 0, 9, 10);
    ck_assert_int_eq(lse_copy_rows_checked(a, &v.matrix), GSL_EBADLEN);
    for (size_t i = 0; i < 9 * 11; i++)
        ck_assert(a->data[i] == 7.0);
    gsl_matrix_free(big);
    gsl_matrix_free(a);
    gsl_matrix_free(b);
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    gsl_set_error_handler_off();
    Suite *s = suite_create("linalg_small");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_chol_bits);
    tcase_add_test(tc, test_chol_not_pd);
    tcase_add_test(tc, test_tri_invert_bits);
    tcase_add_test(tc, test_tri_invert_singular);
    tcase_add_test(tc, test_matrix_copy);
    suite_add_tcase(s, tc);
    return s;
}
