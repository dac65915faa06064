/* Triangle-aware kernels of lse_sim_gaussian's whitened full-covariance
 * path, included twice by lib/sim/gauss_simd.c: once with 8-lane vectors
 * of AVX-512F, once with pairs of AVX2 4-lane vectors (no include guard on
 * purpose). The includer defines
 *   V8, V8_ZERO(), V8_LOAD(p), V8_STORE(p, v), V8_BCAST(x), V8_FMA(a, b, c)
 *   (a * b + c, fused), V8_ADD(a, b), V8_SUB(a, b), V8_MUL(a, b)
 *   TRI_FN(name)  the copy's function name
 *   TRI_TARGET    its target attribute
 *   TRI_RE, TRI_SE  rows x strips of 8 columns of an E-step tile (TRI_SE
 *                   1 or 2)
 *   TRI_RM, TRI_SM  rows x strips of 8 columns of a scatter tile (TRI_RM
 *                   divides 8 or is a multiple of it)
 *   TRI_SW          strips side by side when forming w = rho (x - mu)
 *   TRI_OWN_STATS   (optional) the copy brings its own tri_stats
 *   TRI_OWN_EVAL    (optional) the copy brings its own tri_eval (then
 *                   TRI_RE and TRI_SE are not used)
 * Both copies compute every entry as the same chain of fused multiply-adds
 * in the same order (tiles only decide which entries share registers), so
 * they give the same bits. Padded columns are zero; a product with a zero
 * entry of a triangular factor adds an exact zero, so the copies may skip
 * different zero terms. docs/performance.md section 10. */

/* Lanes of an 8-lane sum in a fixed tree. */
TRI_TARGET LSE_KERNEL double TRI_FN(tri_hsum)(V8 v)
{
    double l[8];
    V8_STORE(l, v);
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* Offset of strip s in a packed factor (the layout of w->utri). */
#ifndef LSE_GAUSS_TRI_PANEL
#define LSE_GAUSS_TRI_PANEL
static inline size_t tri_panel(size_t s) { return 32 * s * (s + 1); }
#endif

#ifndef TRI_OWN_EVAL /* (the AVX2 copy: gauss_tri_eval_avx2.h) */
/* E-step tile: z = y U for R rows of y (tda yt) and NS strips from column
 * j0 (U upper triangular, packed by strips: strip s holds rows m <
 * min(d, 8 s + 8), 8 doubles each; only rows m < mend can be nonzero in
 * this tile), then qv[r] += (z - o)^2 lane by lane, strips in order. */
TRI_TARGET LSE_KERNEL void TRI_FN(tri_etile)(const double *y, size_t yt,
                                             size_t mend, const double *u,
                                             size_t j0, const double *o,
                                             V8 *qv, const int R, const int NS)
{
    const double *pan[TRI_SE];
    for (int t = 0; t < NS; t++)
        pan[t] = u + tri_panel(j0 / 8 + (size_t)t);
    V8 acc[TRI_RE][TRI_SE];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < NS; t++)
            acc[r][t] = V8_ZERO();
    /* rows m of U below j0 + 8: every strip; from there on (NS = 2) only
     * the second strip is nonzero (TRI_SE <= 2) */
    const size_t m1 = j0 + 8 < mend ? j0 + 8 : mend;
    for (size_t m = 0; m < m1; m++) {
        V8 uv[TRI_SE];
        for (int t = 0; t < NS; t++)
            uv[t] = V8_LOAD(pan[t] + 8 * m);
        for (int r = 0; r < R; r++) {
            const V8 yb = V8_BCAST(y[(size_t)r * yt + m]);
            for (int t = 0; t < NS; t++)
                acc[r][t] = V8_FMA(yb, uv[t], acc[r][t]);
        }
    }
    if (NS == 2)
        for (size_t m = m1; m < mend; m++) {
            const V8 uv = V8_LOAD(pan[NS - 1] + 8 * m);
            for (int r = 0; r < R; r++)
                acc[r][NS - 1] =
                    V8_FMA(V8_BCAST(y[(size_t)r * yt + m]), uv, acc[r][NS - 1]);
        }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < NS; t++) {
            const V8 z = V8_SUB(acc[r][t], V8_LOAD(o + j0 + 8 * (size_t)t));
            qv[r] = V8_FMA(z, z, qv[r]);
        }
}

/* q[r] = |y_r U - o|^2 for R rows (every strip of the d columns). */
TRI_TARGET LSE_KERNEL void TRI_FN(tri_erows)(const double *y, size_t yt,
                                             size_t d, size_t dp,
                                             const double *u, const double *o,
                                             double *q, const int R)
{
    V8 qv[TRI_RE];
    for (int r = 0; r < R; r++)
        qv[r] = V8_ZERO();
    const size_t nst = dp / 8;
    size_t s = 0;
    for (; s + TRI_SE <= nst; s += TRI_SE) {
        const size_t j0 = 8 * s, end = j0 + 8 * TRI_SE;
        TRI_FN(tri_etile)(y, yt, end < d ? end : d, u, j0, o, qv, R, TRI_SE);
    }
    for (; s < nst; s++) { /* a last single strip (TRI_SE > 1) */
        const size_t j0 = 8 * s, end = j0 + 8;
        TRI_FN(tri_etile)(y, yt, end < d ? end : d, u, j0, o, qv, R, 1);
    }
    for (int r = 0; r < R; r++)
        q[r] = TRI_FN(tri_hsum)(qv[r]);
}

/* S(i, k) = cn_k - 1/2 |y_i U_k - o_k|^2 for the b rows of y (b x d, tda
 * yt) and every component: u the factors L_k^-T packed by strips (us
 * doubles each), o (K dp) the offsets zero-padded. Components outermost, so that
 * a factor stays in cache while the block's rows pass. */
TRI_TARGET static void TRI_FN(tri_eval)(const double *y, size_t yt, size_t b,
                                        size_t d, size_t dp, size_t K,
                                        const double *u, size_t us,
                                        const double *o,
                                        const double *cn, size_t cs,
                                        double *s, size_t st)
{
    for (size_t k = 0; k < K; k++) {
        const double *uk = u + k * us, *ok = o + k * dp;
        const double ck = cn[k * cs];
        double q[TRI_RE];
        if (b < TRI_RE) {
            for (size_t i = 0; i < b; i++) {
                TRI_FN(tri_erows)(y + i * yt, yt, d, dp, uk, ok, q, 1);
                s[i * st + k] = ck - 0.5 * q[0];
            }
            continue;
        }
        for (size_t i = 0; i < b; i += TRI_RE) {
            /* the last tile overlaps the previous one rather than run
             * short: its rows are recomputed identically */
            const size_t i0 = i + TRI_RE <= b ? i : b - TRI_RE;
            TRI_FN(tri_erows)(y + i0 * yt, yt, d, dp, uk, ok, q, TRI_RE);
            for (int r = 0; r < TRI_RE; r++)
                s[(i0 + (size_t)r) * st + k] = ck - 0.5 * q[r];
        }
    }
}

#endif

#ifndef TRI_OWN_STATS /* (the AVX2 copy: gauss_tri_stats_avx2.h) */
/* Scatter tile: sum_i w_i,a r_i,j for the rows a in [a0, a0 + TRI_RM) and
 * NS strips from strip s0, over the b rows of w (b x dp) and of r = x - mu
 * (x: b x dp), ADDED to s2 (d x d) where a <= j < d (the upper triangle).
 * w is readable TRI_RM doubles past its last row. */
TRI_TARGET LSE_KERNEL void TRI_FN(tri_mtile)(const double *x, const double *mu,
                                             const double *w, size_t dp,
                                             size_t b, size_t d, size_t a0,
                                             size_t s0, double *s2,
                                             const int NS)
{
    V8 acc[TRI_RM][TRI_SM];
    for (int a = 0; a < TRI_RM; a++)
        for (int t = 0; t < NS; t++)
            acc[a][t] = V8_ZERO();
    for (size_t i = 0; i < b; i++) {
        const double *xi = x + i * dp + 8 * s0, *wi = w + i * dp + a0;
        V8 rv[TRI_SM];
        for (int t = 0; t < NS; t++)
            rv[t] = V8_SUB(V8_LOAD(xi + 8 * (size_t)t),
                           V8_LOAD(mu + 8 * (s0 + (size_t)t)));
        for (int a = 0; a < TRI_RM; a++) {
            const V8 wb = V8_BCAST(wi[a]);
            for (int t = 0; t < NS; t++)
                acc[a][t] = V8_FMA(wb, rv[t], acc[a][t]);
        }
    }
    for (int a = 0; a < TRI_RM && a0 + (size_t)a < d; a++) {
        const size_t ra = a0 + (size_t)a;
        for (int t = 0; t < NS; t++) {
            const size_t j0 = 8 * (s0 + (size_t)t);
            if (j0 >= ra && j0 + 8 <= d) { /* the whole strip */
                double *o = s2 + ra * d + j0;
                V8_STORE(o, V8_ADD(V8_LOAD(o), acc[a][t]));
                continue;
            }
            double l[8];
            V8_STORE(l, acc[a][t]);
            for (size_t e = 0; e < 8; e++) {
                const size_t j = j0 + e;
                if (j >= ra && j < d)
                    s2[ra * d + j] += l[e];
            }
        }
    }
}

/* Component k's statistics of a block: with r_i = x_i - mu_k and
 * w_i = rho_i r_i (xp (b x dp) the rows zero-padded, mu dp, rho the b
 * weights), ADD sum_i w_i to s1 (d) and the upper triangle of
 * sum_i w_i r_i' to s2 (d x d). w is (b x dp) scratch with TRI_RM
 * doubles more. */
/* w_i = rho_i (x_i - mu) on NS strips from strip s0 of the b rows, and
 * their sums over the rows (in row order, one chain per strip) ADDED to
 * s1: the NS strips side by side, so that NS chains of additions run at
 * once (one strip after the other, the chain's latency bounded the loop,
 * whose store and addition had 7 % of tri_stats' samples at d = 64). The
 * same operations in the same order per strip: the same bits. */
TRI_TARGET LSE_KERNEL void TRI_FN(tri_wstrips)(const double *xp, size_t b,
                                               size_t d, size_t dp,
                                               const double *mu,
                                               const double *rho, double *w,
                                               double *s1, size_t s0,
                                               const int NS)
{
    V8 m[TRI_SW], acc[TRI_SW];
    for (int t = 0; t < NS; t++) {
        m[t] = V8_LOAD(mu + 8 * (s0 + (size_t)t));
        acc[t] = V8_ZERO();
    }
    for (size_t i = 0; i < b; i++) {
        const V8 rb = V8_BCAST(rho[i]);
        const double *xi = xp + i * dp + 8 * s0;
        double *wo = w + i * dp + 8 * s0;
        for (int t = 0; t < NS; t++) {
            const V8 wi = V8_MUL(rb, V8_SUB(V8_LOAD(xi + 8 * t), m[t]));
            V8_STORE(wo + 8 * t, wi);
            acc[t] = V8_ADD(acc[t], wi);
        }
    }
    double sum[8];
    for (int t = 0; t < NS; t++) {
        const size_t j0 = 8 * (s0 + (size_t)t);
        V8_STORE(sum, acc[t]);
        for (size_t e = 0; e < 8 && j0 + e < d; e++)
            s1[j0 + e] += sum[e];
    }
}

TRI_TARGET static void TRI_FN(tri_stats)(const double *xp, size_t b, size_t d,
                                         size_t dp, const double *mu,
                                         const double *rho, double *w,
                                         double *s1, double *s2)
{
    const size_t nst = dp / 8;
    size_t sw = 0;
    for (; sw + TRI_SW <= nst; sw += TRI_SW)
        TRI_FN(tri_wstrips)(xp, b, d, dp, mu, rho, w, s1, sw, TRI_SW);
    for (; sw < nst; sw++)
        TRI_FN(tri_wstrips)(xp, b, d, dp, mu, rho, w, s1, sw, 1);
    for (size_t a0 = 0; a0 < d; a0 += TRI_RM) {
        size_t s = a0 / 8;
        for (; s + TRI_SM <= nst; s += TRI_SM)
            TRI_FN(tri_mtile)(xp, mu, w, dp, b, d, a0, s, s2, TRI_SM);
        if (TRI_SM > 2 && s + 2 <= nst) {
            TRI_FN(tri_mtile)(xp, mu, w, dp, b, d, a0, s, s2, 2);
            s += 2;
        }
        for (; s < nst; s++)
            TRI_FN(tri_mtile)(xp, mu, w, dp, b, d, a0, s, s2, 1);
    }
}
#endif
