#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv, strdup */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>

#include "gmm_trace.h"
#include "lse_check.h"

/* The traces of lse_gmm_fit's reg_covar bound (models/gmm_trace.c): the
 * grouped substitution against the column-by-column one bit for bit and
 * against tr((L L')^-1) from GSL's Cholesky inverse; lse_gmm_traces in
 * every layout the bits of the definitions on 1, 2 and 3 threads. */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double unif(void) /* in [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A row-major lower triangular factor (d, d): positive diagonal in
 * [0.5, 2.5), off-diagonal in [-1, 1) / sqrt(d) (well conditioned, for
 * the independent check); zeros above. */
static void random_factor(size_t d, double *l)
{
    const double off = 1.0 / sqrt((double)d);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            l[i * d + j] = j < i    ? off * (2.0 * unif() - 1.0)
                           : j == i ? 0.5 + 2.0 * unif()
                                    : 0.0;
}

/* The substitution one column after the other (gmm_fit.c before the
 * grouped columns): the bits lse_gmm_frob_inv must give. */
static double frob_inv_ref(size_t d, const double *l)
{
    double y[LSE_GMM_TRACE_MAXD];
    double t = 0.0;
    for (size_t j = 0; j < d; j++) {
        for (size_t i = j; i < d; i++) {
            double s = i == j ? 1.0 : 0.0;
            for (size_t m = j; m < i; m++)
                s -= l[i * d + m] * y[m];
            y[i] = s / l[i * d + i];
            t += y[i] * y[i];
        }
    }
    return t;
}

/* tr((L L')^-1) from GSL's Cholesky inverse of Sigma = L L'. */
static double trace_sigma_inv(size_t d, const double *l)
{
    gsl_matrix *s = gsl_matrix_calloc(d, d);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
            double v = 0.0;
            for (size_t m = 0; m <= (i < j ? i : j); m++)
                v += l[i * d + m] * l[j * d + m];
            gsl_matrix_set(s, i, j, v);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(s), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(s), 0);
    double t = 0.0;
    for (size_t i = 0; i < d; i++)
        t += gsl_matrix_get(s, i, i);
    gsl_matrix_free(s);
    return t;
}

/* lse_gmm_frob_inv against the column-by-column bits (and GSL's inverse
 * to 1e-10) for dimensions around the column groups and row blocks. */
static void check_frob_bits(void)
{
    const size_t dims[] = {1,  2,  3,  4,  5,  7,  8,  9,  12,
                           15, 16, 17, 31, 64, 65, 70, 256};
    double *l = malloc(256 * 256 * sizeof *l);
    ck_assert_ptr_nonnull(l);
    for (size_t q = 0; q < sizeof dims / sizeof dims[0]; q++) {
        const size_t d = dims[q];
        for (int rep = 0; rep < 3; rep++) {
            random_factor(d, l);
            if (rep == 2) /* exact zeros below the diagonal too */
                for (size_t i = 1; i < d; i++)
                    l[i * d + (i - 1)] = 0.0;
            const double got = lse_gmm_frob_inv(d, l);
            const double want = frob_inv_ref(d, l);
            ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                          "d = %zu: %.17g, column by column %.17g", d, got,
                          want);
            if (d <= 70) {
                const double ind = trace_sigma_inv(d, l);
                ck_assert_msg(fabs(got - ind) <= 1e-10 * ind,
                              "d = %zu: %.17g, GSL %.17g", d, got, ind);
            }
        }
    }
    free(l);
}

/* The copy this CPU runs (AVX2 where it has it). */
START_TEST(test_frob_inv_bits)
{
    check_frob_bits();
}
END_TEST

/* The plain copy (LSE_NO_SIMD, the library's switch): the same bits. */
START_TEST(test_frob_inv_bits_plain)
{
    const char *saved = getenv("LSE_NO_SIMD");
    char *copy = saved != NULL ? strdup(saved) : NULL;
    ck_assert_int_eq(setenv("LSE_NO_SIMD", "1", 1), 0);
    check_frob_bits();
    if (copy != NULL) {
        setenv("LSE_NO_SIMD", copy, 1);
        free(copy);
    } else {
        unsetenv("LSE_NO_SIMD");
    }
}
END_TEST

/* Diagonal and spherical layouts: the closed forms. */
START_TEST(test_traces_diag)
{
    gsl_matrix *o = gsl_matrix_alloc(3, 4);
    for (size_t k = 0; k < 3; k++)
        for (size_t j = 0; j < 4; j++)
            gsl_matrix_set(o, k, j, 0.5 + (double)(k + j));
    double tr[3];
    lse_gmm_traces(LSE_COV_DIAG, 4, o, tr);
    for (size_t k = 0; k < 3; k++) {
        double want = 0.0;
        for (size_t j = 0; j < 4; j++)
            want += 1.0 / pow(gsl_matrix_get(o, k, j), 2);
        ck_assert_double_eq_tol(tr[k], want, 1e-12);
    }
    gsl_matrix_view os = gsl_matrix_submatrix(o, 0, 0, 3, 1);
    lse_gmm_traces(LSE_COV_SPHERICAL, 4, &os.matrix, tr);
    for (size_t k = 0; k < 3; k++)
        ck_assert_double_eq_tol(tr[k], 4.0 / pow(gsl_matrix_get(o, k, 0), 2),
                                1e-12);
    gsl_matrix_free(o);
}
END_TEST

/* Every layout, d = 1 .. 5 and 96 (full factors large enough for threads:
 * d^3 K above 2^24): each trace the bits of its definition (full/tied
 * lse_gmm_frob_inv, diag the sum of 1 / l_j^2 in order, spherical d /
 * l^2), for 1, 2 and 3 threads. reg_bound (models/gmm_fit.c) subtracts
 * two such traces, kept from one EM step to the next. */
START_TEST(test_traces_threads)
{
    static const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_TIED,
                                         LSE_COV_DIAG, LSE_COV_SPHERICAL};
    const int saved = lse_get_num_threads();
    for (int c = 0; c < 4; c++)
        for (size_t d = 1; d <= 96; d = d < 5 ? d + 1 : 96) {
            const int full = c < 2;
            const size_t K = full && d == 96 ? 20 : 7;
            const size_t cols = full ? d * d : c == 2 ? d : 1;
            gsl_matrix *o = gsl_matrix_alloc(K, cols);
            double want[20], tr[20];
            for (size_t k = 0; k < K; k++) {
                double *row = gsl_matrix_ptr(o, k, 0);
                if (full) {
                    random_factor(d, row);
                    want[k] = lse_gmm_frob_inv(d, row);
                } else {
                    for (size_t j = 0; j < cols; j++)
                        row[j] = 0.1 + 3.0 * unif();
                    double t = 0.0;
                    for (size_t j = 0; j < cols; j++)
                        t += 1.0 / (row[j] * row[j]);
                    want[k] = c == 3 ? (double)d / (row[0] * row[0]) : t;
                }
            }
            for (int nt = 1; nt <= 3; nt++) {
                lse_set_num_threads(nt);
                memset(tr, 0, sizeof tr);
                lse_gmm_traces(covs[c], d, o, tr);
                ck_assert_msg(memcmp(tr, want, K * sizeof *tr) == 0,
                              "cov %d, d = %zu, %d threads: not the bits", c,
                              d, nt);
            }
            gsl_matrix_free(o);
            if (d == 96)
                break;
        }
    lse_set_num_threads(saved);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gmm_trace");
    TCase *tc = tcase_create("gmm_trace");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_frob_inv_bits);
    tcase_add_test(tc, test_frob_inv_bits_plain);
    tcase_add_test(tc, test_traces_diag);
    tcase_add_test(tc, test_traces_threads);
    suite_add_tcase(s, tc);
    return s;
}
