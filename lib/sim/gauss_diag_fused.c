#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gauss-fused-private.h"
#include "kernels-private.h"

/* The fused block pass of the diagonal quadratic path (the contract:
 * gauss-fused-private.h; the body: gauss_diag_fused_body.h, included once
 * per copy below). lib/sim/gaussian.c hands it the blocks of an EM
 * E-step; docs/performance.md "Fused diagonal pass (session 8)". */

/* 2^(j / 16), j = 0 .. 15, rounded to nearest (fz_exp of
 * gauss_diag_fused_body.h) */
static const double fz_exp2_16[16] __attribute__((aligned(64))) = {
    0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0,
    0x1.2387a6e756238p+0, 0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0,
    0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0, 0x1.6a09e667f3bcdp+0,
    0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0,
    0x1.ea4afa2a490dap+0};

/* ------------------------------------------------------------------ */
/* The portable copy: 8 doubles, fma() for every fused multiply-add.   */

typedef struct v8p {
    double l[8];
} v8p;

#define P_LANES(expr)                                                          \
    do {                                                                       \
        for (int l_ = 0; l_ < 8; l_++)                                         \
            o_.l[l_] = (expr);                                                 \
    } while (0)

static inline v8p p_load(const double *p)
{
    v8p o_;
    P_LANES(p[l_]);
    return o_;
}
static inline void p_store(double *p, v8p v) { memcpy(p, v.l, sizeof v.l); }
static inline v8p p_bcast(double x)
{
    v8p o_;
    P_LANES(x);
    return o_;
}
static inline v8p p_fma(v8p a, v8p b, v8p c)
{
    v8p o_;
    P_LANES(fma(a.l[l_], b.l[l_], c.l[l_]));
    return o_;
}
static inline v8p p_add(v8p a, v8p b)
{
    v8p o_;
    P_LANES(a.l[l_] + b.l[l_]);
    return o_;
}
static inline v8p p_sub(v8p a, v8p b)
{
    v8p o_;
    P_LANES(a.l[l_] - b.l[l_]);
    return o_;
}
static inline v8p p_mul(v8p a, v8p b)
{
    v8p o_;
    P_LANES(a.l[l_] * b.l[l_]);
    return o_;
}
static inline v8p p_div(v8p a, v8p b)
{
    v8p o_;
    P_LANES(a.l[l_] / b.l[l_]);
    return o_;
}
static inline v8p p_max(v8p a, v8p b)
{
    v8p o_;
    P_LANES(a.l[l_] > b.l[l_] ? a.l[l_] : b.l[l_]);
    return o_;
}
static inline unsigned p_bad(v8p v)
{
    unsigned m = 0;
    for (int l = 0; l < 8; l++)
        m |= (unsigned)(isnan(v.l[l]) || v.l[l] == INFINITY) << l;
    return m;
}
static inline v8p p_ninf0(v8p v)
{
    v8p o_;
    P_LANES(v.l[l_] == -INFINITY ? 0.0 : v.l[l_]);
    return o_;
}
static inline v8p p_pos1(v8p v)
{
    v8p o_;
    P_LANES(v.l[l_] > 0.0 ? v.l[l_] : 1.0);
    return o_;
}

/* the bits of d as an integer */
static inline uint64_t p_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
static inline v8p p_tab16(v8p t)
{
    v8p o_;
    P_LANES(fz_exp2_16[p_bits(t.l[l_]) & 15]);
    return o_;
}
/* 2^m from t = 16 m + j + 0x1.8p52 (fz_exp): ((bits & ~15) << 48) is
 * m << 52 modulo 2^64 (0x1.8p52's bits vanish), plus the bias */
static inline uint64_t pow2_16_bits(uint64_t b)
{
    return ((b & ~UINT64_C(15)) << 48) + (UINT64_C(1023) << 52);
}
static inline v8p p_pow2_16(v8p t)
{
    v8p o_;
    for (int l = 0; l < 8; l++) {
        const uint64_t sb = pow2_16_bits(p_bits(t.l[l]));
        memcpy(&o_.l[l], &sb, sizeof sb);
    }
    return o_;
}
static inline v8p p_under0(v8p e, v8p x)
{
    v8p o_;
    P_LANES(x.l[l_] < -708.0 ? 0.0 : e.l[l_]);
    return o_;
}
static inline v8p p_log_pos(v8p v)
{
    v8p o_;
    P_LANES(lse_log_pos(v.l[l_]));
    return o_;
}
static inline v8p p_col(const double *p, size_t st)
{
    v8p o_;
    P_LANES(p[(size_t)l_ * st]);
    return o_;
}
static inline void p_tr8(v8p r[8])
{
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++) {
            const double t = r[i].l[j];
            r[i].l[j] = r[j].l[i];
            r[j].l[i] = t;
        }
}

/* a hint into L2 (the SIMD copies' _MM_HINT_T1) only: nothing where the
 * compiler has no prefetch builtin */
static inline void fz_prefetch(const char *p)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 2);
#else
    (void)p;
#endif
}

#define V8 v8p
#define V8_ZERO() p_bcast(0.0)
#define V8_LOAD(p) p_load(p)
#define V8_STORE(p, v) p_store((p), (v))
#define V8_BCAST(x) p_bcast(x)
#define V8_FMA(a, b, c) p_fma((a), (b), (c))
#define V8_ADD(a, b) p_add((a), (b))
#define V8_SUB(a, b) p_sub((a), (b))
#define V8_MUL(a, b) p_mul((a), (b))
#define V8_DIV(a, b) p_div((a), (b))
#define V8_MAX(a, b) p_max((a), (b))
#define V8_BAD(v) p_bad(v)
#define V8_NINF0(v) p_ninf0(v)
#define V8_POS1(v) p_pos1(v)
#define V8_TR8(r) p_tr8(r)
#define V8_COL(p, s) p_col((p), (s))
#define V8_TAB16(t) p_tab16(t)
#define V8_POW2_16(t) p_pow2_16(t)
#define V8_UNDER0(e, x) p_under0((e), (x))
#define V8_LOG_POS(v) p_log_pos(v)
#define FZ_FN(name) name##_plain
#define FZ_PREFETCH(p) fz_prefetch(p)
#define FZ_TARGET
#define FZ_KB 8
#include "gauss_diag_fused_body.h" /* #undefs its parameters */

#if LSE_HAVE_AVX2_PATH
/* ------------------------------------------------------------------ */
/* AVX-512F: one vector of 8.                                          */

/* 8 x 8 transpose in three butterfly stages (pairs of rows, of pairs,
 * of quadruples). */
LSE_TARGET_AVX512
static inline void z_tr8(__m512d r[8])
{
    const __m512i lo2 = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i hi2 = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0);
    const __m512i hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    __m512d a[8], c[8];
    for (int i = 0; i < 8; i += 2) { /* a[i]: even columns of rows i, i+1 */
        a[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) /* rows g .. g+3 */
        for (int o = 0; o < 2; o++) {
            c[g + o] = _mm512_permutex2var_pd(a[g + o], lo2, a[g + 2 + o]);
            c[g + 2 + o] = _mm512_permutex2var_pd(a[g + o], hi2, a[g + 2 + o]);
        }
    /* c[g + m]: columns m and m + 4 of rows g .. g+3 */
    for (int m = 0; m < 4; m++) {
        r[m] = _mm512_permutex2var_pd(c[m], lo4, c[4 + m]);
        r[m + 4] = _mm512_permutex2var_pd(c[m], hi4, c[4 + m]);
    }
}

LSE_TARGET_AVX512
static inline __m512d z_col(const double *p, size_t st)
{
    const long long s = (long long)st;
    return _mm512_i64gather_pd(
        _mm512_set_epi64(7 * s, 6 * s, 5 * s, 4 * s, 3 * s, 2 * s, s, 0), p, 8);
}

LSE_TARGET_AVX512
static inline __m512d z_tab16(__m512d t)
{
    return _mm512_permutex2var_pd(_mm512_load_pd(fz_exp2_16),
                                  _mm512_castpd_si512(t),
                                  _mm512_load_pd(fz_exp2_16 + 8));
}

LSE_TARGET_AVX512
static inline __m512d z_pow2_16(__m512d t)
{
    const __m512i b = _mm512_andnot_si512(_mm512_set1_epi64(15),
                                          _mm512_castpd_si512(t));
    return _mm512_castsi512_pd(_mm512_add_epi64(
        _mm512_slli_epi64(b, 48), _mm512_set1_epi64(INT64_C(1023) << 52)));
}

/* e with the lanes where x < -708 replaced by 0 */
LSE_TARGET_AVX512
static inline __m512d z_under0(__m512d e, __m512d x)
{
    const __mmask8 u =
        _mm512_cmp_pd_mask(x, _mm512_set1_pd(-708.0), _CMP_LT_OQ);
    return _mm512_maskz_mov_pd((__mmask8)~u, e);
}

#define V8 __m512d
#define V8_ZERO() _mm512_setzero_pd()
#define V8_LOAD(p) _mm512_loadu_pd(p)
#define V8_STORE(p, v) _mm512_storeu_pd((p), (v))
#define V8_BCAST(x) _mm512_set1_pd(x)
#define V8_FMA(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define V8_ADD(a, b) _mm512_add_pd((a), (b))
#define V8_SUB(a, b) _mm512_sub_pd((a), (b))
#define V8_MUL(a, b) _mm512_mul_pd((a), (b))
#define V8_DIV(a, b) _mm512_div_pd((a), (b))
#define V8_MAX(a, b) _mm512_max_pd((a), (b))
#define V8_BAD(v)                                                              \
    ((unsigned)(_mm512_cmp_pd_mask((v), (v), _CMP_UNORD_Q) |                   \
                _mm512_cmp_pd_mask((v), _mm512_set1_pd(INFINITY), _CMP_EQ_OQ)))
#define V8_NINF0(v)                                                            \
    _mm512_mask_mov_pd(                                                        \
        (v), _mm512_cmp_pd_mask((v), _mm512_set1_pd(-INFINITY), _CMP_EQ_OQ),   \
        _mm512_setzero_pd())
#define V8_POS1(v)                                                             \
    _mm512_mask_mov_pd(                                                        \
        _mm512_set1_pd(1.0),                                                   \
        _mm512_cmp_pd_mask((v), _mm512_setzero_pd(), _CMP_GT_OQ), (v))
#define V8_TR8(r) z_tr8(r)
#define V8_COL(p, s) z_col((p), (s))
#define V8_TAB16(t) z_tab16(t)
#define V8_POW2_16(t) z_pow2_16(t)
#define V8_UNDER0(e, x) z_under0((e), (x))
#define V8_LOG_POS(v) lse_log_pos8(v)
#define FZ_FN(name) name##_avx512
#define FZ_PREFETCH(p) _mm_prefetch((p), _MM_HINT_T1)
#define FZ_TARGET LSE_TARGET_AVX512
#define FZ_KB 16
#include "gauss_diag_fused_body.h" /* #undefs its parameters */

/* ------------------------------------------------------------------ */
/* AVX2 + FMA: 8 lanes as two vectors (lanes 0-3, 4-7).                */

#include "v8x2.h"

LSE_TARGET_AVX2_FMA
static inline unsigned y_bad(v8x2 v)
{
    const __m256d inf = _mm256_set1_pd(INFINITY);
    const __m256d lo = _mm256_or_pd(_mm256_cmp_pd(v.lo, v.lo, _CMP_UNORD_Q),
                                    _mm256_cmp_pd(v.lo, inf, _CMP_EQ_OQ));
    const __m256d hi = _mm256_or_pd(_mm256_cmp_pd(v.hi, v.hi, _CMP_UNORD_Q),
                                    _mm256_cmp_pd(v.hi, inf, _CMP_EQ_OQ));
    return (unsigned)_mm256_movemask_pd(lo) |
           (unsigned)_mm256_movemask_pd(hi) << 4;
}

/* alt in the lanes where cond is set, v elsewhere */
LSE_TARGET_AVX2_FMA
static inline __m256d y_pick(__m256d v, __m256d alt, __m256d cond)
{
    return _mm256_blendv_pd(v, alt, cond);
}

LSE_TARGET_AVX2_FMA
static inline v8x2 y_ninf0(v8x2 v)
{
    const __m256d ninf = _mm256_set1_pd(-INFINITY), z = _mm256_setzero_pd();
    return (v8x2){y_pick(v.lo, z, _mm256_cmp_pd(v.lo, ninf, _CMP_EQ_OQ)),
                 y_pick(v.hi, z, _mm256_cmp_pd(v.hi, ninf, _CMP_EQ_OQ))};
}

LSE_TARGET_AVX2_FMA
static inline v8x2 y_pos1(v8x2 v)
{
    const __m256d one = _mm256_set1_pd(1.0), z = _mm256_setzero_pd();
    return (v8x2){y_pick(one, v.lo, _mm256_cmp_pd(v.lo, z, _CMP_GT_OQ)),
                 y_pick(one, v.hi, _mm256_cmp_pd(v.hi, z, _CMP_GT_OQ))};
}

/* 4 x 4 transpose: the rows a, b, c, d to the columns o[0..3] */
LSE_TARGET_AVX2_FMA
static inline void y_tr4(__m256d a, __m256d b, __m256d c, __m256d d,
                         __m256d o[4])
{
    const __m256d t0 = _mm256_unpacklo_pd(a, b), t1 = _mm256_unpackhi_pd(a, b);
    const __m256d t2 = _mm256_unpacklo_pd(c, d), t3 = _mm256_unpackhi_pd(c, d);
    o[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    o[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    o[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    o[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/* The vector (*p0, *p1, *p2, *p3) by four scalar loads: on Zen 3 they
 * beat one gather (docs/performance.md "Session 19": the fused pass at
 * d = 2 about 7 % faster for the exponentials' table, 9 % more for the
 * columns of narrow rows). */
LSE_TARGET_AVX2_FMA
static inline __m256d y_load4(const double *p0, const double *p1,
                              const double *p2, const double *p3)
{
    const __m128d a = _mm_loadh_pd(_mm_load_sd(p0), p1);
    const __m128d c = _mm_loadh_pd(_mm_load_sd(p2), p3);
    return _mm256_insertf128_pd(_mm256_castpd128_pd256(a), c, 1);
}

LSE_TARGET_AVX2_FMA
static inline v8x2 y_col(const double *p, size_t st)
{
    return (v8x2){y_load4(p, p + st, p + 2 * st, p + 3 * st),
                  y_load4(p + 4 * st, p + 5 * st, p + 6 * st, p + 7 * st)};
}

/* fz_exp2_16[b & 15] for the bits b of each lane of t (the indices moved
 * to general registers, then y_load4) */
LSE_TARGET_AVX2_FMA
static inline __m256d y_tab16(__m256d t)
{
    const __m256i j =
        _mm256_and_si256(_mm256_castpd_si256(t), _mm256_set1_epi64x(15));
    const __m128i lo = _mm256_castsi256_si128(j);
    const __m128i hi = _mm256_extracti128_si256(j, 1);
    return y_load4(fz_exp2_16 + _mm_cvtsi128_si64(lo),
                   fz_exp2_16 + _mm_extract_epi64(lo, 1),
                   fz_exp2_16 + _mm_cvtsi128_si64(hi),
                   fz_exp2_16 + _mm_extract_epi64(hi, 1));
}

LSE_TARGET_AVX2_FMA
static inline __m256d y_pow2_16(__m256d t)
{
    const __m256i b = _mm256_andnot_si256(_mm256_set1_epi64x(15),
                                          _mm256_castpd_si256(t));
    return _mm256_castsi256_pd(
        _mm256_add_epi64(_mm256_slli_epi64(b, 48),
                         _mm256_set1_epi64x(INT64_C(1023) << 52)));
}

LSE_TARGET_AVX2_FMA
static inline __m256d y_under0(__m256d e, __m256d x)
{
    return _mm256_andnot_pd(
        _mm256_cmp_pd(x, _mm256_set1_pd(-708.0), _CMP_LT_OQ), e);
}

LSE_TARGET_AVX2_FMA
static inline void y_tr8(v8x2 r[8])
{
    __m256d q[4][4]; /* [rows 0-3 | 4-7][lo | hi] blocks, transposed */
    y_tr4(r[0].lo, r[1].lo, r[2].lo, r[3].lo, q[0]);
    y_tr4(r[4].lo, r[5].lo, r[6].lo, r[7].lo, q[1]);
    y_tr4(r[0].hi, r[1].hi, r[2].hi, r[3].hi, q[2]);
    y_tr4(r[4].hi, r[5].hi, r[6].hi, r[7].hi, q[3]);
    for (int j = 0; j < 4; j++) {
        r[j] = (v8x2){q[0][j], q[1][j]};
        r[4 + j] = (v8x2){q[2][j], q[3][j]};
    }
}

#define V8_DIV(a, b) V8X2_OP(_mm256_div_pd, a, b)
#define V8_MAX(a, b) V8X2_OP(_mm256_max_pd, a, b)
#define V8_BAD(v) y_bad(v)
#define V8_NINF0(v) y_ninf0(v)
#define V8_POS1(v) y_pos1(v)
#define V8_TR8(r) y_tr8(r)
#define V8_COL(p, s) y_col((p), (s))
#define V8_TAB16(t) ((v8x2){y_tab16((t).lo), y_tab16((t).hi)})
#define V8_POW2_16(t) ((v8x2){y_pow2_16((t).lo), y_pow2_16((t).hi)})
#define V8_UNDER0(e, x)                                                        \
    ((v8x2){y_under0((e).lo, (x).lo), y_under0((e).hi, (x).hi)})
#define V8_LOG_POS(v) ((v8x2){lse_log_pos4((v).lo), lse_log_pos4((v).hi)})
#define FZ_FN(name) name##_avx2
#define FZ_PREFETCH(p) _mm_prefetch((p), _MM_HINT_T1)
#define FZ_TARGET LSE_TARGET_AVX2_FMA
#define FZ_KB 4
#include "gauss_diag_fused_body.h"
#endif

/* ------------------------------------------------------------------ */

int lse_gauss_fused_isa(void)
{
    if (lse_cpu_avx512())
        return LSE_FUSED_AVX512;
    if (lse_cpu_avx2_fma())
        return LSE_FUSED_AVX2;
#if LSE_HAVE_AVX2_PATH
    /* fma() is one instruction only where the CPU has it */
    return __builtin_cpu_supports("fma") ? LSE_FUSED_PLAIN : -1;
#else
    return LSE_FUSED_PLAIN;
#endif
}

size_t lse_gauss_fused_scratch(size_t d, size_t K)
{
    if (K == 0 || d == 0)
        return 0;
    const size_t nv = 1 + 2 * d, kp = (K + 7) / 8 * 8;
    return 8 * nv + 8 * kp + nv * kp + 8 * d + 16;
}

int lse_gauss_fused_run(const lse_gauss_fused *f, int isa)
{
#if LSE_HAVE_AVX2_PATH
    if (isa == LSE_FUSED_AVX512)
        return fused_run_avx512(f);
    if (isa == LSE_FUSED_AVX2)
        return fused_run_avx2(f);
#else
    (void)isa;
#endif
    return fused_run_plain(f);
}

void lse_gauss_fused_exp(const double *x, double *y, size_t n, int isa)
{
#if LSE_HAVE_AVX2_PATH
    if (isa == LSE_FUSED_AVX512) {
        fused_exp_avx512(x, y, n);
        return;
    }
    if (isa == LSE_FUSED_AVX2) {
        fused_exp_avx2(x, y, n);
        return;
    }
#else
    (void)isa;
#endif
    fused_exp_plain(x, y, n);
}
