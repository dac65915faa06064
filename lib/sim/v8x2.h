/* Eight doubles as two AVX2 vectors (lanes 0-3 and 4-7), and the V8_*
 * basics a kernel body (gauss_tri_body.h, gauss_diag_fused_body.h) uses
 * on them: V8, V8_ZERO, V8_LOAD, V8_STORE, V8_BCAST, V8_FMA, V8_ADD,
 * V8_SUB, V8_MUL. Included, after <immintrin.h>, where an AVX2 copy of a
 * body is instantiated; the type is defined once, the V8_* macros at
 * each inclusion (the body or its includer undefines them). */
#ifndef LSE_SIM_V8X2_H
#define LSE_SIM_V8X2_H
typedef struct v8x2 {
    __m256d lo, hi;
} v8x2;
/* op applied to both halves */
#define V8X2_OP(op, a, b) ((v8x2){op((a).lo, (b).lo), op((a).hi, (b).hi)})
#endif

#define V8 v8x2
#define V8_ZERO() ((v8x2){_mm256_setzero_pd(), _mm256_setzero_pd()})
#define V8_LOAD(p) ((v8x2){_mm256_loadu_pd(p), _mm256_loadu_pd((p) + 4)})
#define V8_STORE(p, v)                                                         \
    (_mm256_storeu_pd((p), (v).lo), _mm256_storeu_pd((p) + 4, (v).hi))
#define V8_BCAST(x) ((v8x2){_mm256_set1_pd(x), _mm256_set1_pd(x)})
#define V8_FMA(a, b, c)                                                        \
    ((v8x2){_mm256_fmadd_pd((a).lo, (b).lo, (c).lo),                           \
            _mm256_fmadd_pd((a).hi, (b).hi, (c).hi)})
#define V8_ADD(a, b) V8X2_OP(_mm256_add_pd, a, b)
#define V8_SUB(a, b) V8X2_OP(_mm256_sub_pd, a, b)
#define V8_MUL(a, b) V8X2_OP(_mm256_mul_pd, a, b)
