/* tri_eval of the AVX2 copy with native 4-lane tiles, included once by
 * lib/sim/gauss_simd.c (after <immintrin.h> and gauss_tri_body.h, under
 * LSE_HAVE_AVX2_PATH; tests/test_tri_eval_avx2.c includes it too).
 *
 * The same results, bit for bit, as gauss_tri_body.h's tri_eval, whose
 * 8-lane vectors the AVX2 copy used to emulate with pairs of 4-lane ones
 * (tiles of 6 rows x 8 columns: 2 loads and 6 broadcasts per 12
 * multiply-adds). For row y and column j, z_j is the chain acc = 0,
 * acc = fma(y_m, U(m, j), acc) for m in order, then z_j - o_j; the body
 * runs m up to min(d, 8 s + 8) for the strip s of 8 columns holding j,
 * this kernel up to min(d, 4 q + 4) for the quad q of 4 columns: the
 * terms left out have U(m, j) = 0 below the diagonal (m > j), and
 * adding the exact zero fma(y_m, 0, acc) leaves acc as it was (acc is
 * never -0: it starts at +0 and a sum that cancels is +0). The body's
 * lane l of a row's sum of squares takes fma(z, z, .) of the columns
 * 8 s + l, strips in order: here lanes 0-3 are the even quads', lanes
 * 4-7 the odd quads', in the same order, and its lane tree
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) is (t0 + t2) +
 * (t1 + t3) with t = lanes 0-3 + lanes 4-7. Quads entirely past d are
 * skipped: their z is +0 and fma(0, 0, q) = q for q >= +0.
 *
 * Tiles are 4 rows x up to 3 quads: 12 running sums, 3 loads of U and 4
 * broadcasts of y per 12 multiply-adds in 16 ymm registers. The packed
 * factor (18 KiB at d = 64) stays in L1 while a tile of rows passes all
 * its quads. */

/* Offset of strip s in a packed factor (the layout of w->utri), as in
 * gauss_tri_body.h. */
#ifndef LSE_GAUSS_TRI_PANEL
#define LSE_GAUSS_TRI_PANEL
static inline size_t tri_panel(size_t s) { return 32 * s * (s + 1); }
#endif

/* The rows m in [m0, m1) of a tile (below): the quads t0 .. NQ - 1 of
 * it. A phase per constant t0, so that the running sums stay in
 * registers (a loop over t0 left them in memory: twice the time). */
LSE_TARGET_AVX2_FMA LSE_KERNEL void te_phase(const double *y, size_t yt,
                                             const double *const *col,
                                             size_t m0, size_t m1,
                                             __m256d acc[][3], const int R,
                                             const int t0, const int NQ)
{
    for (size_t m = m0; m < m1; m++) {
        __m256d uv[3];
        for (int t = t0; t < NQ; t++)
            uv[t] = _mm256_loadu_pd(col[t] + 8 * m);
        for (int r = 0; r < R; r++) {
            const __m256d yb = _mm256_broadcast_sd(y + (size_t)r * yt + m);
            for (int t = t0; t < NQ; t++)
                acc[r][t] = _mm256_fmadd_pd(yb, uv[t], acc[r][t]);
        }
    }
}

/* Rows y_0 .. y_{R-1} (tda yt) times NQ quads of U from quad q0 (u: the
 * factor packed by strips of 8 columns, see utri), then z = acc - o and
 * qv[r][q & 1] = fma(z, z, qv[r][q & 1]) quad by quad. Quad q needs the
 * rows m < min(d, 4 q + 4) of U only: the loop over m runs in phases,
 * each dropping the quad whose rows have ended. */
LSE_TARGET_AVX2_FMA LSE_KERNEL void te_tile(const double *y, size_t yt,
                                            size_t d, const double *u,
                                            const double *o, size_t q0,
                                            __m256d qv[][2], const int R,
                                            const int NQ)
{
    const double *col[3];
    size_t mend[3];
    for (int t = 0; t < NQ; t++) {
        const size_t q = q0 + (size_t)t;
        col[t] = u + tri_panel(q / 2) + 4 * (q % 2);
        mend[t] = 4 * q + 4 < d ? 4 * q + 4 : d;
    }
    __m256d acc[4][3];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < NQ; t++)
            acc[r][t] = _mm256_setzero_pd();
    te_phase(y, yt, col, 0, mend[0], acc, R, 0, NQ);
    if (NQ > 1)
        te_phase(y, yt, col, mend[0], mend[1], acc, R, 1, NQ);
    if (NQ > 2)
        te_phase(y, yt, col, mend[1], mend[2], acc, R, 2, NQ);
    for (int t = 0; t < NQ; t++) {
        const size_t q = q0 + (size_t)t;
        const __m256d ov = _mm256_loadu_pd(o + 4 * q);
        for (int r = 0; r < R; r++) {
            const __m256d z = _mm256_sub_pd(acc[r][t], ov);
            qv[r][q % 2] = _mm256_fmadd_pd(z, z, qv[r][q % 2]);
        }
    }
}

/* q[r] = |y_r U - o|^2 for R rows: the quads with a column below d, the
 * odd one or two first (the cheap end of the triangle, where a narrow
 * tile costs least), then by 3. */
LSE_TARGET_AVX2_FMA LSE_KERNEL void te_rows(const double *y, size_t yt,
                                            size_t d, const double *u,
                                            const double *o, double *q,
                                            const int R)
{
    __m256d qv[4][2];
    for (int r = 0; r < R; r++)
        qv[r][0] = qv[r][1] = _mm256_setzero_pd();
    const size_t nq = (d + 3) / 4;
    size_t q0 = nq % 3;
    if (q0 == 1)
        te_tile(y, yt, d, u, o, 0, qv, R, 1);
    else if (q0 == 2)
        te_tile(y, yt, d, u, o, 0, qv, R, 2);
    for (; q0 < nq; q0 += 3)
        te_tile(y, yt, d, u, o, q0, qv, R, 3);
    for (int r = 0; r < R; r++) {
        const __m256d t = _mm256_add_pd(qv[r][0], qv[r][1]);
        const __m128d lo = _mm256_castpd256_pd128(t);
        const __m128d hi = _mm256_extractf128_pd(t, 1);
        const __m128d h = _mm_add_pd(lo, hi); /* (t0 + t2, t1 + t3) */
        q[r] = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    }
}

/* S(i, k) = cn_k - 1/2 |y_i U_k - o_k|^2, as gauss_tri_body.h's tri_eval
 * (same arguments, same bits). Components outermost, so that a factor
 * stays in L1 while the block's rows pass. */
LSE_TARGET_AVX2_FMA static void tri_eval_avx2(const double *y, size_t yt,
                                              size_t b, size_t d, size_t dp,
                                              size_t K, const double *u,
                                              size_t us, const double *o,
                                              const double *cn, size_t cs,
                                              double *s, size_t st)
{
    for (size_t k = 0; k < K; k++) {
        const double *uk = u + k * us, *ok = o + k * dp;
        const double ck = cn[k * cs];
        double q[4];
        if (b < 4) {
            for (size_t i = 0; i < b; i++) {
                te_rows(y + i * yt, yt, d, uk, ok, q, 1);
                s[i * st + k] = ck - 0.5 * q[0];
            }
            continue;
        }
        for (size_t i = 0; i < b; i += 4) {
            /* the last tile overlaps the previous one rather than run
             * short: its rows are recomputed identically */
            const size_t i0 = i + 4 <= b ? i : b - 4;
            te_rows(y + i0 * yt, yt, d, uk, ok, q, 4);
            for (int r = 0; r < 4; r++)
                s[(i0 + (size_t)r) * st + k] = ck - 0.5 * q[r];
        }
    }
}
