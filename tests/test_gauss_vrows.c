/* The monomials V of the Gaussian's quadratic path (lib/sim/gauss_simd.c,
 * private: compiled in): the AVX2 + FMA rows (lse_gauss_v_rows_fma, with
 * its d <= 4 copies and the vectorized vech(y y') of full and tied
 * covariances for 4 < d <= 16) against the definition, bit for bit, for
 * every covariance type and d = 1 .. 20, on padded rows; nothing written
 * past a row's nv entries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>

#include "lse_check.h"
#include "kernels-private.h"
#include "sim/gauss-private.h"

static size_t n_mono(lse_cov_type cov, size_t d)
{
    if (cov == LSE_COV_DIAG)
        return 1 + 2 * d;
    if (cov == LSE_COV_SPHERICAL)
        return 2 + d;
    return 1 + d + d * (d + 1) / 2;
}

/* [1, y', (the second-order part)'] of y = x - c, as the layout of
 * gauss-private.h: diag y_j^2; spherical |y|^2 (the four-sum order of
 * lse_gauss_sq_norm); full/tied vech(y y') row by row, y_a y_b, b >= a */
static void reference(lse_cov_type cov, const double *x, const double *c,
                      size_t d, double *v)
{
    double *y = v + 1, *p = y + d;
    v[0] = 1.0;
    for (size_t j = 0; j < d; j++)
        y[j] = x[j] - c[j];
    if (cov == LSE_COV_DIAG) {
        for (size_t j = 0; j < d; j++)
            p[j] = y[j] * y[j];
    } else if (cov == LSE_COV_SPHERICAL) {
        p[0] = lse_gauss_sq_norm(y, d);
    } else {
        for (size_t a = 0; a < d; a++)
            for (size_t b = a; b < d; b++)
                *p++ = y[a] * y[b];
    }
}

START_TEST(test_v_rows_fma)
{
#if LSE_HAVE_AVX2_PATH
    if (!lse_cpu_avx2_fma()) {
        printf("# no AVX2 + FMA on this CPU: nothing to compare\n");
        return;
    }
    static const lse_cov_type covs[] = {LSE_COV_FULL, LSE_COV_TIED,
                                        LSE_COV_DIAG, LSE_COV_SPHERICAL};
    const double sentinel = 12345.678;
    for (size_t q = 0; q < 4; q++)
        for (size_t d = 1; d <= 20; d++) {
            const size_t nr = 7, xt = d + 3, nv = n_mono(covs[q], d);
            const size_t vt = nv + 5;
            double *x = malloc(nr * xt * sizeof *x), *c = malloc(d * sizeof *c);
            double *v = malloc(nr * vt * sizeof *v), *r = malloc(nv * sizeof *r);
            ck_assert(x != NULL && c != NULL && v != NULL && r != NULL);
            for (size_t i = 0; i < nr * xt; i++)
                x[i] = sin(0.37 * (double)i + (double)d) * 3.0 + 0.1;
            for (size_t j = 0; j < d; j++)
                c[j] = cos(0.11 * (double)j) / 3.0;
            for (size_t i = 0; i < nr * vt; i++)
                v[i] = sentinel;
            gsl_vector_view cv = gsl_vector_view_array(c, d);
            lse_gauss_work w;
            memset(&w, 0, sizeof w);
            w.cov = covs[q];
            w.dim = d;
            w.center = &cv.vector;
            w.avx2 = 1;
            w.fma = 1; /* the AVX2 + FMA copies (2: AVX-512) */
            lse_gauss_v_rows_fma(&w, x, xt, nr, v, vt);
            for (size_t i = 0; i < nr; i++) {
                reference(covs[q], x + i * xt, c, d, r);
                for (size_t j = 0; j < nv; j++)
                    ck_assert_msg(memcmp(&v[i * vt + j], &r[j], sizeof *r) == 0,
                                  "cov %zu d %zu row %zu entry %zu: %.17g vs "
                                  "%.17g", q, d, i, j, v[i * vt + j], r[j]);
                for (size_t j = nv; j < vt; j++)
                    ck_assert_msg(v[i * vt + j] == sentinel,
                                  "cov %zu d %zu row %zu: padding %zu written",
                                  q, d, i, j);
            }
            free(x);
            free(c);
            free(v);
            free(r);
        }
#endif
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("gauss_vrows");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_v_rows_fma);
    suite_add_tcase(s, tc);
    return s;
}
