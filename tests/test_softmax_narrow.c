#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "lse_check.h"
/* the library file itself: its static vector logarithms are tested */
#include "softmax.c"

/* lib/softmax.c (private: compiled in) does blocks of narrow rows (1 to 16
 * entries) eight rows at a time across the rows with AVX-512
 * (softmax_tr8, softmax_cols8) and four at a time with AVX2 + FMA
 * (softmax_tr4), with vector logarithms (log_pos8, lse_log_pos4;
 * lib/softmax.c is included, not linked). They must
 * give the bits of the row-by-row arithmetic they replace: a reference
 * copy of it follows (ref8_*: AVX-512, ref4_*: AVX2 + FMA, each row's
 * maximum and sum reduced across its vector's lanes, scalar lse_log_pos).
 * Without the instruction sets the test checks nothing it could not. */

#if LSE_HAVE_AVX2_PATH
LSE_TARGET_AVX512
static void ref8_row(const gsl_matrix *s, gsl_matrix *a, double beta,
                     double *lse, size_t r, size_t nvec, __mmask8 tail)
{
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    const double *sr = s->data + r * s->tda;
    __m512d v[2];
    if (nvec == 2)
        v[0] = _mm512_loadu_pd(sr);
    v[nvec - 1] = _mm512_mask_loadu_pd(ninf, tail, sr + 8 * (nvec - 1));
    const __m512d mv = nvec == 2 ? _mm512_max_pd(v[1], v[0]) : v[0];
    const double mr = _mm512_reduce_max_pd(mv);
    const __m512d sh = _mm512_set1_pd(mr == -INFINITY ? 0.0 : mr);
    __m512d sum = _mm512_setzero_pd();
    for (size_t q = 0; q < nvec; q++) {
        v[q] = lse_exp_nonpos8(
            _mm512_mul_pd(_mm512_set1_pd(beta), _mm512_sub_pd(v[q], sh)));
        sum = _mm512_add_pd(sum, v[q]);
    }
    double tot = _mm512_reduce_add_pd(sum);
    tot = tot > 0.0 ? tot : 1.0;
    const __m512d inv = _mm512_set1_pd(1.0 / tot);
    double *ar = a->data + r * a->tda;
    if (nvec == 2)
        _mm512_storeu_pd(ar, _mm512_mul_pd(v[0], inv));
    _mm512_mask_storeu_pd(ar + 8 * (nvec - 1), tail,
                          _mm512_mul_pd(v[nvec - 1], inv));
    lse[r] = beta == 1.0 ? mr + lse_log_pos(tot) : mr + lse_log_pos(tot) / beta;
}

LSE_TARGET_AVX2_FMA
static void ref4_row(const gsl_matrix *s, gsl_matrix *a, double beta,
                     double *lse, size_t r, size_t nvec, const int64_t *mt)
{
    const __m256i tail = _mm256_loadu_si256((const __m256i *)mt);
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
    const double *sr = s->data + r * s->tda;
    __m256d v[4];
    for (size_t q = 0; q + 1 < nvec; q++)
        v[q] = _mm256_loadu_pd(sr + 4 * q);
    v[nvec - 1] =
        _mm256_blendv_pd(ninf, _mm256_maskload_pd(sr + 4 * (nvec - 1), tail),
                         _mm256_castsi256_pd(tail));
    __m256d mx = v[0];
    for (size_t q = 1; q < nvec; q++)
        mx = _mm256_max_pd(v[q], mx);
    mx = _mm256_max_pd(mx, _mm256_permute2f128_pd(mx, mx, 1));
    mx = _mm256_max_pd(mx, _mm256_permute_pd(mx, 5));
    const double mr = _mm256_cvtsd_f64(mx);
    const __m256d sh = _mm256_set1_pd(mr == -INFINITY ? 0.0 : mr);
    __m256d sum = _mm256_setzero_pd();
    for (size_t q = 0; q < nvec; q++) {
        v[q] = lse_exp_nonpos4(
            _mm256_mul_pd(_mm256_set1_pd(beta), _mm256_sub_pd(v[q], sh)));
        sum = _mm256_add_pd(sum, v[q]);
    }
    const __m128d s2 =
        _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1));
    double tot = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    tot = tot > 0.0 ? tot : 1.0;
    const __m256d inv = _mm256_set1_pd(1.0 / tot);
    double *ar = a->data + r * a->tda;
    for (size_t q = 0; q + 1 < nvec; q++)
        _mm256_storeu_pd(ar + 4 * q, _mm256_mul_pd(v[q], inv));
    _mm256_maskstore_pd(ar + 4 * (nvec - 1), tail,
                        _mm256_mul_pd(v[nvec - 1], inv));
    lse[r] = mr + lse_log_pos(tot) / beta;
}

/* The reference softmax of a block: avx512 selects ref8_row. */
static void ref_rows(const gsl_matrix *s, gsl_matrix *a, double beta,
                     double *lse, int avx512)
{
    const size_t n = s->size2;
    if (avx512) {
        const size_t nvec = (n + 7) / 8, rem = n - (nvec - 1) * 8;
        const __mmask8 tail = (__mmask8)((1u << rem) - 1u);
        for (size_t r = 0; r < s->size1; r++)
            ref8_row(s, a, beta, lse, r, nvec, tail);
    } else {
        const size_t nvec = (n + 3) / 4, rem = n - (nvec - 1) * 4;
        int64_t mt[4];
        for (size_t j = 0; j < 4; j++)
            mt[j] = j < rem ? -1 : 0;
        for (size_t r = 0; r < s->size1; r++)
            ref4_row(s, a, beta, lse, r, nvec, mt);
    }
}
#endif

/* Scores with a wide range (the order of a sum changes its rounding),
 * ties, +0 and -0, masked entries and fully masked rows. */
static void fill(gsl_matrix *s, gsl_rng *rng)
{
    for (size_t i = 0; i < s->size1; i++)
        for (size_t j = 0; j < s->size2; j++) {
            double v =
                4.0 * gsl_ran_gaussian(rng, 1.0) - 30.0 * (double)(i % 3);
            if ((i * 7 + j * 3) % 11 == 5)
                v = -INFINITY; /* a masked pair */
            if (i % 17 == 9)
                v = -INFINITY; /* a fully masked row */
            if (i % 13 == 4 && j % 2 == 0)
                v = j % 4 == 0 ? 0.0 : -0.0;
            if (i % 19 == 3 && j > 0)
                v = gsl_matrix_get(s, i, 0); /* ties */
            gsl_matrix_set(s, i, j, v);
        }
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Softmax of s by lse_softmax_rows with isa, out of place into a matrix
 * with row stride n + pad, and in place on a copy with that stride; both
 * against the reference. Returns the number of mismatching doubles. */
static size_t compare(const gsl_matrix *s, double beta, size_t pad,
                      const lse_softmax_isa *isa)
{
    const size_t b = s->size1, n = s->size2;
    gsl_matrix *wa = gsl_matrix_alloc(b, n + pad),
               *wi = gsl_matrix_alloc(b, n + pad);
    gsl_matrix *ref = gsl_matrix_alloc(b, n);
    double *l1 = malloc(b * sizeof *l1), *l2 = malloc(b * sizeof *l2);
    double *l0 = malloc(b * sizeof *l0), *m = malloc(b * sizeof *m);
    ck_assert(wa && wi && ref && l0 && l1 && l2 && m);
    gsl_matrix_view av = gsl_matrix_submatrix(wa, 0, 0, b, n);
    gsl_matrix_view iv = gsl_matrix_submatrix(wi, 0, 0, b, n);
    gsl_matrix_memcpy(&iv.matrix, s);
    lse_softmax_rows(s, &av.matrix, beta, l1, m, isa);
    lse_softmax_rows(&iv.matrix, &iv.matrix, beta, l2, m, isa);
    size_t bad = 0;
#if LSE_HAVE_AVX2_PATH
    ref_rows(s, ref, beta, l0, isa->avx512);
    for (size_t i = 0; i < b; i++) {
        bad += !same_bits(l0[i], l1[i]) + !same_bits(l0[i], l2[i]);
        for (size_t j = 0; j < n; j++) {
            const double r = gsl_matrix_get(ref, i, j);
            bad += !same_bits(r, gsl_matrix_get(&av.matrix, i, j)) +
                   !same_bits(r, gsl_matrix_get(&iv.matrix, i, j));
        }
    }
#endif
    /* the definition, on any CPU */
    for (size_t i = 0; i < b; i++) {
        double mx = -INFINITY, sum = 0.0, asum = 0.0;
        for (size_t j = 0; j < n; j++)
            mx = fmax(mx, gsl_matrix_get(s, i, j));
        for (size_t j = 0; j < n; j++) {
            if (mx > -INFINITY)
                sum += exp(beta * (gsl_matrix_get(s, i, j) - mx));
            asum += gsl_matrix_get(&av.matrix, i, j);
        }
        if (mx == -INFINITY)
            bad += !(l1[i] == -INFINITY && asum == 0.0);
        else
            bad += !(fabs(l1[i] - (mx + log(sum) / beta)) <=
                         1e-13 * (1.0 + fabs(mx)) &&
                     fabs(asum - 1.0) <= 1e-14);
    }
    gsl_matrix_free(wa);
    gsl_matrix_free(wi);
    gsl_matrix_free(ref);
    free(l0);
    free(l1);
    free(l2);
    free(m);
    return bad;
}

/* Every width 1..16, row counts around multiples of 4 and 8, beta = 1 and
 * not, contiguous and padded rows, for the AVX-512 copy and the AVX2 +
 * FMA copy (each only where the CPU has it). */
START_TEST(test_narrow_equal_reference)
{
    const lse_softmax_isa host = lse_softmax_isa_detect();
    lse_softmax_isa isas[2] = {host, host};
    isas[1].avx512 = 0;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 11u);
    const size_t bs[] = {1, 3, 4, 7, 8, 9, 12, 13, 37, 150, 272};
    const double betas[] = {1.0, 0.37, 2.5};
    for (size_t k = 0; k < 2; k++) {
        if (!isas[k].fma)
            continue;
        for (size_t n = 1; n <= 16; n++)
            for (size_t q = 0; q < sizeof bs / sizeof bs[0]; q++) {
                gsl_matrix *s = gsl_matrix_alloc(bs[q], n);
                ck_assert(s);
                fill(s, rng);
                for (size_t t = 0; t < 3; t++)
                    for (size_t pad = 0; pad <= 3; pad += 3)
                        ck_assert_msg(compare(s, betas[t], pad, &isas[k]) == 0,
                                      "avx512 %d n %zu b %zu beta %g pad %zu",
                                      isas[k].avx512, n, bs[q], betas[t], pad);
                gsl_matrix_free(s);
            }
    }
    gsl_rng_free(rng);
}
END_TEST

#if LSE_HAVE_AVX2_PATH
/* log_pos8 and lse_log_pos4 (lib/softmax.c, included above) of x[0..8). */
LSE_TARGET_AVX512
static void logs8(const double *x, double *y)
{
    _mm512_storeu_pd(y, lse_log_pos8(_mm512_loadu_pd(x)));
}

LSE_TARGET_AVX2_FMA
static void logs4(const double *x, double *y)
{
    _mm256_storeu_pd(y, lse_log_pos4(_mm256_loadu_pd(x)));
    _mm256_storeu_pd(y + 4, lse_log_pos4(_mm256_loadu_pd(x + 4)));
}
#endif

/* The vector logarithms against lse_log_pos over the positive doubles:
 * random bit patterns (subnormals to the largest finite), powers of two
 * and their neighbours, and both sides of the mantissa's halving point.
 * The softmax only takes logs of sums in [1, 16], but the claim is every
 * positive input. */
START_TEST(test_log_pos_bits)
{
#if LSE_HAVE_AVX2_PATH
    const lse_softmax_isa isa = lse_softmax_isa_detect();
    if (!isa.fma)
        return;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 5u);
    size_t bad = 0, checked = 0;
    for (size_t it = 0; it < 200000; it++) {
        double x[8], y4[8], y8[8];
        for (size_t l = 0; l < 8; l++) {
            uint64_t u;
            switch ((it + l) % 4) {
            case 0: /* any positive finite pattern */
                u = ((uint64_t)gsl_rng_get(rng) << 32 | gsl_rng_get(rng)) %
                    UINT64_C(0x7FF0000000000000);
                u = u ? u : 1;
                break;
            case 1: /* 2^e and its neighbours */
                u = ((uint64_t)(1 + gsl_rng_uniform_int(rng, 2046)) << 52) +
                    gsl_rng_uniform_int(rng, 3) - 1;
                break;
            case 2: /* around the halving point 0x3FF6A09E667F3BCD */
                u = ((uint64_t)(1 + gsl_rng_uniform_int(rng, 2046)) << 52) +
                    UINT64_C(0x6A09E667F3BCD) + gsl_rng_uniform_int(rng, 5) - 2;
                break;
            default: /* sums of a softmax: [1, 16] */
            {
                const double v = 1.0 + 15.0 * gsl_rng_uniform(rng);
                memcpy(&u, &v, sizeof u);
            }
            }
            memcpy(&x[l], &u, sizeof u);
        }
        logs4(x, y4);
        if (isa.avx512)
            logs8(x, y8);
        for (size_t l = 0; l < 8; l++) {
            const double r = lse_log_pos(x[l]);
            bad += !same_bits(r, y4[l]) + (isa.avx512 && !same_bits(r, y8[l]));
            checked++;
        }
    }
    ck_assert_msg(bad == 0, "%zu of %zu logs differ", bad, checked);
    /* and lse_log_pos is the logarithm */
    ck_assert_double_eq_tol(lse_log_pos(10.0), log(10.0), 1e-15);
    gsl_rng_free(rng);
#endif
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("softmax_narrow");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_narrow_equal_reference);
    tcase_add_test(tc, test_log_pos_bits);
    suite_add_tcase(s, tc);
    return s;
}
