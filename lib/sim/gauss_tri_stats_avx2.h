/* tri_stats of the AVX2 copy with native 4-lane tiles, included once by
 * lib/sim/gauss_simd.c (after <immintrin.h>, under LSE_HAVE_AVX2_PATH;
 * tests/test_tri_stats_avx2.c includes it too).
 *
 * The same results, bit for bit, as gauss_tri_body.h's tri_stats: w_i =
 * rho_i (x_i - mu) and s1's sums are the same operations in the same
 * order, and each entry (a, j) of s2 gets the same chain acc = 0, acc =
 * fma(w_i,a, r_i,j, acc) for i in row order, s2(a, j) += acc. What
 * differs is only where the operands live:
 *  - x (packed by lse_gauss_tri_stats) and w are quad-major (quad q:
 *    columns 4 q .. 4 q + 3 of the b rows, 4 b doubles, the panels
 *    ts_ps(b) apart), so that a tile streams contiguous memory;
 *    row-major rows of 512 bytes (d = 64) put every row of a column in
 *    the same few L1 sets. r = x - mu is formed again where it is used,
 *    as in gauss_tri_body.h (a subtraction runs beside the multiply-adds;
 *    storing r beside w, measured, was no faster).
 *  - tiles are 4 rows x up to 3 quads (12 accumulators, 3 loads and 4
 *    broadcasts per 12 fused multiply-adds in 16 ymm registers), so the
 *    triangle is cut at multiples of 4 (the 8-lane pairs cut at 8 and
 *    their 6-row tiles overlapped the diagonal).
 * A tile runs over all b rows (256 by default): chunks of 16 to 64 rows
 * with the accumulators waiting in memory between them (to keep the
 * operands in L1) were slower on Zen 3, whose prefetchers keep up with
 * the contiguous streams. The tiles go by groups of 3 quads of columns
 * (tri_stats_avx2 below). */

/* Doubles from one quad's panel to the next: 4 b and 8 more, so that
 * the panels a tile streams side by side (4 b doubles apart: a multiple
 * of 4 KiB at b = 256) do not all fall into the same L1 sets. */
static inline size_t ts_ps(size_t b) { return 4 * b + 8; }

/* Doubles of xq and of the scratch wq for b rows in dimension d (at most
 * b dp + 2 dp, dp = d rounded up to 8: lse_gauss_work's xqtri, wtri). */
static inline size_t ts_size(size_t b, size_t d)
{
    return (d + 3) / 4 * ts_ps(b);
}

/* Row i (d doubles) of a block of b rows into xq, quad-major and
 * zero-padded to whole quads. */
static inline void ts_pack_row(const double *xi, size_t i, size_t b, size_t d,
                               double *xq)
{
    for (size_t j = 0; j < (d + 3) / 4 * 4; j++)
        xq[j / 4 * ts_ps(b) + 4 * i + j % 4] = j < d ? xi[j] : 0.0;
}

/* w of NQ quads from quad q0 (xq and wq quad-major, panels ts_ps(b)
 * apart), and the sums of w over the rows (in row order) ADDED to s1:
 * the quads side by side, so that NQ chains of additions run at once. */
LSE_TARGET_AVX2_FMA LSE_KERNEL void ts_w(const double *xq, size_t b, size_t d,
                                         const double *mu, const double *rho,
                                         double *wq, double *s1, size_t q0,
                                         const int NQ)
{
    __m256d m[4], acc[4];
    for (int t = 0; t < NQ; t++) {
        m[t] = _mm256_loadu_pd(mu + 4 * (q0 + (size_t)t));
        acc[t] = _mm256_setzero_pd();
    }
    const double *xs = xq + q0 * ts_ps(b);
    double *ws = wq + q0 * ts_ps(b);
    for (size_t i = 0; i < b; i++) {
        const __m256d rb = _mm256_set1_pd(rho[i]);
        for (int t = 0; t < NQ; t++) {
            const size_t o = (size_t)t * ts_ps(b) + 4 * i;
            const __m256d wv =
                _mm256_mul_pd(rb, _mm256_sub_pd(_mm256_loadu_pd(xs + o), m[t]));
            _mm256_storeu_pd(ws + o, wv);
            acc[t] = _mm256_add_pd(acc[t], wv);
        }
    }
    double sum[4];
    for (int t = 0; t < NQ; t++) {
        const size_t j0 = 4 * (q0 + (size_t)t);
        _mm256_storeu_pd(sum, acc[t]);
        for (size_t e = 0; e < 4 && j0 + e < d; e++)
            s1[j0 + e] += sum[e];
    }
}

/* The sums l[a][4 u + e] (read only) of a tile (rows a0 + a, a < NA;
 * quads q0 + u, u < NQ) ADDED to s2 where a0 + a <= j < d. */
LSE_TARGET_AVX2_FMA static inline void ts_put(double l[4][12],
                                             size_t d, size_t a0, size_t q0,
                                             double *s2, const int NQ,
                                             const int NA)
{
    for (int a = 0; a < NA; a++) {
        const size_t ra = a0 + (size_t)a;
        for (int u = 0; u < NQ; u++) {
            const size_t j0 = 4 * (q0 + (size_t)u);
            if (j0 + 4 <= d) { /* (j0 + 3 >= a0 + 3 >= ra) */
                /* the whole quad, or (at the diagonal) its lanes j >= ra,
                 * the others written back unchanged */
                double *o = s2 + ra * d + j0;
                const __m256d ov = _mm256_loadu_pd(o);
                const __m256d nv = _mm256_add_pd(ov, _mm256_loadu_pd(&l[a][4 * u]));
                const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0);
                const __m256i keep = _mm256_cmpgt_epi64(
                    _mm256_set1_epi64x((long long)ra - (long long)j0), lane);
                _mm256_storeu_pd(o, _mm256_blendv_pd(nv, ov,
                                                     _mm256_castsi256_pd(keep)));
                continue;
            }
            for (size_t e = 0; e < 4; e++) {
                const size_t j = j0 + e;
                if (j >= ra && j < d)
                    s2[ra * d + j] += l[a][4 * u + e];
            }
        }
    }
}

/* Tile of rows a0 .. a0 + NA - 1 (a0 a multiple of 4, NA = 4 or the rows
 * left below d) and NQ quads from q0 over the b rows: the sums ADDED to
 * s2 (d x d) where a <= j < d. The rows past d are not formed (at d = 2
 * they were half the tile's multiply-adds); each entry's chain is the
 * same. */
LSE_TARGET_AVX2_FMA LSE_KERNEL void ts_tile(const double *wq, const double *xq,
                                            const double *mu, size_t b,
                                            size_t d, size_t a0, size_t q0,
                                            double *s2, const int NQ,
                                            const int NA)
{
    for (int a = 0; a < 4 && a0 + (size_t)a < d; a++) {
        /* s2's rows of the tile on their way (1 MiB at K = 32) */
        const double *o = s2 + (a0 + (size_t)a) * d + 4 * q0;
        _mm_prefetch((const char *)o, _MM_HINT_T0);
        _mm_prefetch((const char *)(o + 4 * NQ - 1), _MM_HINT_T0);
    }
    __m256d acc[4][3];
    for (int a = 0; a < NA; a++)
        for (int u = 0; u < NQ; u++)
            acc[a][u] = _mm256_setzero_pd();
    const double *wp = wq + a0 / 4 * ts_ps(b);
    const size_t ps = ts_ps(b);
    const double *xs = xq + q0 * ps, *ms = mu + 4 * q0;
    for (size_t i = 0; i < b; i++) {
        __m256d rv[3];
        for (int u = 0; u < NQ; u++)
            rv[u] = _mm256_sub_pd(_mm256_loadu_pd(xs + (size_t)u * ps + 4 * i),
                                  _mm256_loadu_pd(ms + 4 * u));
        for (int a = 0; a < NA; a++) {
            const __m256d wb = _mm256_broadcast_sd(wp + 4 * i + a);
            for (int u = 0; u < NQ; u++)
                acc[a][u] = _mm256_fmadd_pd(wb, rv[u], acc[a][u]);
        }
    }
    /* (through l, so that acc stays in registers above) */
    double l[4][12];
    for (int a = 0; a < NA; a++)
        for (int u = 0; u < NQ; u++)
            _mm256_storeu_pd(&l[a][4 * u], acc[a][u]);
    ts_put(l, d, a0, q0, s2, NQ, NA);
}

/* The last two row quads of a group at once: rows 4 q .. 4 q + 3 over
 * quads q and q + 1, and the NB rows (1 to 4) from 4 q + 4 over quad
 * q + 1. Alone, that second tile's 4 sums (one chain each) waited on the
 * multiply-adds' latency at half their rate; together the tile has 8 +
 * NB. Each entry's chain is ts_tile's. */
LSE_TARGET_AVX2_FMA LSE_KERNEL void ts_tile_diag(const double *wq,
                                                 const double *xq,
                                                 const double *mu, size_t b,
                                                 size_t d, size_t q,
                                                 double *s2, const int NB)
{
    const size_t ps = ts_ps(b), a0 = 4 * q;
    for (size_t a = a0; a < a0 + 8 && a < d; a++) {
        const double *o = s2 + a * d + a0; /* as ts_tile's */
        _mm_prefetch((const char *)o, _MM_HINT_T0);
        _mm_prefetch((const char *)(o + 7), _MM_HINT_T0);
    }
    __m256d acc[4][2], bcc[4];
    for (int a = 0; a < 4; a++) {
        acc[a][0] = acc[a][1] = _mm256_setzero_pd();
        bcc[a] = _mm256_setzero_pd();
    }
    const double *wa = wq + q * ps, *wb = wa + ps;
    const double *x0 = xq + q * ps, *x1 = x0 + ps;
    const __m256d m0 = _mm256_loadu_pd(mu + a0);
    const __m256d m1 = _mm256_loadu_pd(mu + a0 + 4);
    for (size_t i = 0; i < b; i++) {
        const __m256d r0 = _mm256_sub_pd(_mm256_loadu_pd(x0 + 4 * i), m0);
        const __m256d r1 = _mm256_sub_pd(_mm256_loadu_pd(x1 + 4 * i), m1);
        for (int a = 0; a < 4; a++) {
            const __m256d w = _mm256_broadcast_sd(wa + 4 * i + a);
            acc[a][0] = _mm256_fmadd_pd(w, r0, acc[a][0]);
            acc[a][1] = _mm256_fmadd_pd(w, r1, acc[a][1]);
        }
        for (int a = 0; a < NB; a++)
            bcc[a] = _mm256_fmadd_pd(_mm256_broadcast_sd(wb + 4 * i + a), r1,
                                     bcc[a]);
    }
    double l[4][12], lb[4][12];
    for (int a = 0; a < 4; a++) {
        _mm256_storeu_pd(&l[a][0], acc[a][0]);
        _mm256_storeu_pd(&l[a][4], acc[a][1]);
    }
    for (int a = 0; a < NB; a++)
        _mm256_storeu_pd(&lb[a][0], bcc[a]);
    ts_put(l, d, a0, q, s2, 2, 4);
    ts_put(lb, d, a0 + 4, q + 1, s2, 1, NB);
}

/* The tiles of the group of GN quads from g0 (GN = 1 to 3): every row
 * quad above the group whole, then the group's own row quads, each from
 * its diagonal quad on (the last of them maybe short of 4 rows; with GN
 * >= 2 the last two in one tile, ts_tile_diag). */
LSE_TARGET_AVX2_FMA LSE_KERNEL void ts_group(const double *wq,
                                             const double *xq,
                                             const double *mu, size_t b,
                                             size_t d, size_t g0, double *s2,
                                             const int GN)
{
    for (size_t a0 = 0; a0 < 4 * g0; a0 += 4)
        ts_tile(wq, xq, mu, b, d, a0, g0, s2, GN, 4);
    /* (NQ, NA and NB constant in each call, so that the sums stay in
     * registers) */
    if (GN == 3)
        ts_tile(wq, xq, mu, b, d, 4 * g0, g0, s2, 3, 4);
    const size_t ql = g0 + (size_t)GN - 1, nl = d - 4 * ql < 4 ? d - 4 * ql : 4;
    if (GN >= 2) {
        switch (nl) {
        case 1:
            ts_tile_diag(wq, xq, mu, b, d, ql - 1, s2, 1);
            break;
        case 2:
            ts_tile_diag(wq, xq, mu, b, d, ql - 1, s2, 2);
            break;
        case 3:
            ts_tile_diag(wq, xq, mu, b, d, ql - 1, s2, 3);
            break;
        default:
            ts_tile_diag(wq, xq, mu, b, d, ql - 1, s2, 4);
            break;
        }
        return;
    }
    switch (nl) {
    case 1:
        ts_tile(wq, xq, mu, b, d, 4 * ql, ql, s2, 1, 1);
        break;
    case 2:
        ts_tile(wq, xq, mu, b, d, 4 * ql, ql, s2, 1, 2);
        break;
    case 3:
        ts_tile(wq, xq, mu, b, d, 4 * ql, ql, s2, 1, 3);
        break;
    default:
        ts_tile(wq, xq, mu, b, d, 4 * ql, ql, s2, 1, 4);
        break;
    }
}

/* Component k's statistics of a block, as gauss_tri_body.h's tri_stats
 * (same bits; xq the b rows quad-major, zero-padded); wq is scratch of
 * ts_size(b, d) doubles. The quads of columns in fixed groups of 3 (the
 * odd one or two first, where the triangle has the fewest rows), so that
 * a group's 3 panels of x (24 KiB at b = 256) can stay in L1 while the
 * panels of w (8 KiB per row quad) pass: a tile then streams 32 bytes of
 * w per row instead of 96 of x. (On Zen 3 this order measured the same
 * as row quads outermost, within the noise; the padding of ts_ps gained
 * about 4 % of the kernel.) */
LSE_TARGET_AVX2_FMA static void tri_stats_avx2(const double *xq, size_t b,
                                               size_t d, const double *mu,
                                               const double *rho, double *wq,
                                               double *s1, double *s2)
{
    const size_t nq = (d + 3) / 4; /* quads with a column below d */
    size_t q = 0;
    for (; q + 4 <= nq; q += 4)
        ts_w(xq, b, d, mu, rho, wq, s1, q, 4);
    for (; q < nq; q++)
        ts_w(xq, b, d, mu, rho, wq, s1, q, 1);
    q = nq % 3;
    if (q == 1)
        ts_group(wq, xq, mu, b, d, 0, s2, 1);
    else if (q == 2)
        ts_group(wq, xq, mu, b, d, 0, s2, 2);
    for (; q < nq; q += 3)
        ts_group(wq, xq, mu, b, d, q, s2, 3);
}
