/* The fused block pass of lse_sim_gaussian's diagonal quadratic path
 * (lib/sim/gauss_diag_fused.c), included three times: 8-lane AVX-512F
 * vectors, pairs of AVX2 vectors and 8 plain doubles (no include guard on
 * purpose). The includer defines
 *   V8, V8_ZERO(), V8_LOAD(p), V8_STORE(p, v), V8_BCAST(x),
 *   V8_FMA(a, b, c) (a * b + c, one rounding), V8_ADD, V8_SUB, V8_MUL,
 *   V8_DIV, V8_MAX (no NaN reaches it),
 *   V8_BAD(v)       lanes holding NaN or +INFINITY, as bits
 *   V8_NINF0(v)     v with -INFINITY lanes replaced by 0
 *   V8_POS1(v)      v with lanes <= 0 replaced by 1
 *   V8_TR8(r)       transpose of the 8 x 8 matrix in r[0..7]
 *   V8_COL(p, s)    the 8 doubles p[0], p[s], .., p[7 s]
 *   V8_TAB16(t)     fz_exp2_16[b & 15], b the bits of t as an integer
 *   V8_POW2_16(t)   2^m from the bits of t = 16 m + j + 0x1.8p52 (fz_exp)
 *   V8_UNDER0(e, x) e with the lanes where x < -708 replaced by 0
 *   V8_LOG_POS(v)   lse_log_pos of each lane (v > 0), its bits
 *   FZ_FN(name)     the copy's function name
 *   FZ_TARGET       its target attribute
 *   FZ_KB           components per pass of the scores (4, 8 or 16: what
 *                   the registers hold)
 * Every copy does the same operations lane for lane, so they give the
 * same bits; which entries share a vector only decides speed. The
 * arithmetic is that of the separate steps on a machine with AVX-512F
 * except for the exponentials: the scores of lse_gauss_qeval6_avx512,
 * the softmax order of lib/softmax.c's softmax_narrow8_body (K <= 16) or
 * row_softmax (K > 16) and the statistics of lse_gauss_qstats4_avx512
 * with its tail rows (docs/performance.md, "Fused diagonal pass (session
 * 8)"); the exponentials are fz_exp's (a table of 16 and 12 multiply-adds
 * where lse_exp_nonpos8 takes 19: "Diagonal covariances, session 10"),
 * so the pass agrees with the separate steps to rounding, not in bits. */

/* The monomials of the tile's 8 rows (row r at xs + r xst) with the rows
 * in the lanes: vt[8 p + lane] = V_p = 1, y_j, y_j^2 (nv x 8). Whole
 * blocks of 8 columns by a transpose, the other columns gathered. */
FZ_TARGET LSE_KERNEL void FZ_FN(fz_vt)(const double *xs, size_t xst,
                                      size_t d, const double *c, double *vt)
{
    V8_STORE(vt, V8_BCAST(1.0));
    size_t j0 = 0;
    for (; j0 + 8 <= d; j0 += 8) {
        V8 t[8];
        for (size_t r = 0; r < 8; r++)
            t[r] = V8_LOAD(xs + r * xst + j0);
        V8_TR8(t);
        for (size_t u = 0; u < 8; u++) {
            const V8 y = V8_SUB(t[u], V8_BCAST(c[j0 + u]));
            V8_STORE(vt + 8 * (1 + j0 + u), y);
            V8_STORE(vt + 8 * (1 + d + j0 + u), V8_MUL(y, y));
        }
    }
    for (; j0 < d; j0++) {
        const V8 y = V8_SUB(V8_COL(xs + j0, xst), V8_BCAST(c[j0]));
        V8_STORE(vt + 8 * (1 + j0), y);
        V8_STORE(vt + 8 * (1 + d + j0), V8_MUL(y, y));
    }
}

/* S = V Q of the tile's rows into sl[8 k + lane] (kp x 8): every entry
 * one chain of fused multiply-adds over p = 0 .. nv - 1 from a zero sum
 * (lse_gauss_qeval6_avx512's), KB (<= 16, divides kp) components at a
 * time. */
FZ_TARGET LSE_KERNEL void FZ_FN(fz_scores)(const double *vt, size_t nv,
                                          const double *q, size_t kp,
                                          double *sl, const int KB)
{
    for (size_t k0 = 0; k0 < kp; k0 += (size_t)KB) {
        V8 a[16];
        /* the chain's first step, fma(V_0 = 1, q_0k, 0), is q_0k + 0 */
        for (int u = 0; u < KB; u++)
            a[u] = V8_ADD(V8_BCAST(q[k0 + (size_t)u]), V8_ZERO());
        const double *qp = q + kp + k0;
        for (size_t p = 1; p < nv; p++, qp += kp) {
            const V8 v = V8_LOAD(vt + 8 * p);
            for (int u = 0; u < KB; u++)
                a[u] = V8_FMA(v, V8_BCAST(qp[u]), a[u]);
        }
        for (int u = 0; u < KB; u++)
            V8_STORE(sl + 8 * (k0 + (size_t)u), a[u]);
    }
}

/* The lanes' maxima over the K components of sl into *mx; nonzero when a
 * score is NaN or +INFINITY (then *mx means nothing). The check is on the
 * lanes' sums: NaN or +INFINITY in a sum when a score is NaN or +INFINITY
 * (with -INFINITY too: NaN); a sum of finite scores that overflows to
 * +INFINITY also reports (the separate steps then take the block). */
FZ_TARGET LSE_KERNEL unsigned FZ_FN(fz_rowmax)(const double *sl,
                                               size_t K, V8 *mx)
{
    V8 m = V8_LOAD(sl), sum = V8_ZERO();
    for (size_t k = 0; k < K; k++) {
        const V8 s = V8_LOAD(sl + 8 * k);
        sum = V8_ADD(sum, s);
        m = V8_MAX(s, m);
    }
    *mx = m;
    return V8_BAD(sum);
}

/* exp(x) for x <= 0 or -INFINITY (never NaN), 0 where x < -708: with
 * n = round(16 x / log 2) = 16 m + j (0 <= j < 16) and r = x - n log(2) / 16
 * (|r| <= log(2) / 32, log(2) / 16 in two parts as lse_exp_nonpos),
 * exp(x) = 2^m 2^(j / 16) (1 + r + r^2 q(r)) with q the Taylor polynomial
 * of (exp(r) - 1 - r) / r^2 to degree 5 (the first term left out is below
 * 2^-59 of the sum). 2^(j / 16) is the table fz_exp2_16 (rounded to
 * nearest), 2^m comes from the bits of t. 12 multiply-adds where
 * lse_exp_nonpos8 has 19 (docs/performance.md "Diagonal covariances,
 * session 10"); within 1.5 units in the last place of exp (test
 * gauss_fused). */
FZ_TARGET LSE_KERNEL V8 FZ_FN(fz_exp)(V8 x)
{
    const V8 xc = V8_MAX(x, V8_BCAST(-708.0));
    const V8 shift = V8_BCAST(0x1.8p52);
    const V8 t = V8_FMA(xc, V8_BCAST(0x1.71547652b82fep4), shift);
    const V8 n = V8_SUB(t, shift);
    V8 r = V8_FMA(n, V8_BCAST(-6.93147180369123816490e-01 / 16.0), xc);
    r = V8_FMA(n, V8_BCAST(-1.90821492927058770002e-10 / 16.0), r);
    V8 q = V8_FMA(r, V8_BCAST(1.0 / 5040.0), V8_BCAST(1.0 / 720.0));
    q = V8_FMA(r, q, V8_BCAST(1.0 / 120.0));
    q = V8_FMA(r, q, V8_BCAST(1.0 / 24.0));
    q = V8_FMA(r, q, V8_BCAST(1.0 / 6.0));
    q = V8_FMA(r, q, V8_BCAST(0.5));
    const V8 em1 = V8_FMA(V8_MUL(r, r), q, r);
    const V8 tj = V8_TAB16(t);
    return V8_UNDER0(V8_MUL(V8_FMA(tj, em1, tj), V8_POW2_16(t)), x);
}

/* Softmax of the tile's rows (lanes) over the K <= NE components of sl
 * (NE = 8 or 16, kp), in place, times the row weights wt (8, or NULL: 1);
 * the maxima and the sums to mrow and trow. 0, or nonzero (nothing
 * meaningful written) when a score is NaN or +INFINITY. The row sum is
 * softmax_narrow8_body's: lane l of its vector sum holds e_l + e_(l+8)
 * (K > 8), then _mm512_reduce_add_pd's tree. */
FZ_TARGET LSE_KERNEL unsigned FZ_FN(fz_softmax)(double *sl, size_t K,
                                               const size_t NE,
                                               const double *wt, double *mrow,
                                               double *trow)
{
    V8 mx;
    const unsigned bad = FZ_FN(fz_rowmax)(sl, K, &mx);
    if (bad)
        return bad;
    /* a row of -INFINITY keeps it (exp gives 0) */
    const V8 sh = V8_NINF0(mx);
    V8 h[8];
    for (size_t l = 0; l < 8; l++) {
        const size_t k = l + 8;
        h[l] = l < K ? FZ_FN(fz_exp)(V8_SUB(V8_LOAD(sl + 8 * l), sh))
                     : V8_ZERO();
        V8_STORE(sl + 8 * l, h[l]);
        if (NE == 16 && k < K) {
            const V8 e = FZ_FN(fz_exp)(V8_SUB(V8_LOAD(sl + 8 * k), sh));
            V8_STORE(sl + 8 * k, e);
            h[l] = V8_ADD(h[l], e);
        } else if (NE == 16) {
            V8_STORE(sl + 8 * k, V8_ZERO());
        }
    }
    V8 tot = V8_ADD(V8_ADD(V8_ADD(h[0], h[4]), V8_ADD(h[2], h[6])),
                    V8_ADD(V8_ADD(h[1], h[5]), V8_ADD(h[3], h[7])));
    /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
    tot = V8_POS1(tot);
    V8_STORE(mrow, mx);
    V8_STORE(trow, tot);
    const V8 inv = V8_DIV(V8_BCAST(1.0), tot);
    /* rho = softmax times the row weight (no weights: times 1, exact) */
    if (wt != NULL) {
        const V8 wv = V8_LOAD(wt);
        for (size_t k = 0; k < NE; k++)
            V8_STORE(sl + 8 * k, V8_MUL(V8_MUL(V8_LOAD(sl + 8 * k), inv), wv));
    } else {
        for (size_t k = 0; k < NE; k++)
            V8_STORE(sl + 8 * k, V8_MUL(V8_LOAD(sl + 8 * k), inv));
    }
    return 0;
}

/* Softmax of the tile's rows (lanes) over K > 16 components (kp), in
 * row_softmax's order (lib/softmax.c, fast = 1): the sum in four partial
 * sums (entry j to sum j % 4, the last K % 4 entries to the first) added
 * as (s0 + s1) + (s2 + s3), times 1 / sum; the exponentials are fz_exp's
 * and the caller takes lse_log_pos of trow. Then times the row weights wt (or NULL). Padding columns to 0.
 * 0, or nonzero when a score is NaN or +INFINITY. */
FZ_TARGET LSE_KERNEL unsigned FZ_FN(fz_softmax_wide)(double *sl, size_t K,
                                                    size_t kp,
                                                    const double *wt,
                                                    double *mrow, double *trow)
{
    V8 mx;
    const unsigned bad = FZ_FN(fz_rowmax)(sl, K, &mx);
    if (bad)
        return bad;
    const V8 sh = V8_NINF0(mx);
    V8 s4[4] = {V8_ZERO(), V8_ZERO(), V8_ZERO(), V8_ZERO()};
    const size_t K4 = K - K % 4;
    for (size_t k = 0; k < K; k++) {
        const V8 e = FZ_FN(fz_exp)(V8_SUB(V8_LOAD(sl + 8 * k), sh));
        V8_STORE(sl + 8 * k, e);
        const size_t u = k < K4 ? k % 4 : 0;
        s4[u] = V8_ADD(s4[u], e);
    }
    /* a masked row has sum 0 and exponentials 0: 1 scales it to 0 */
    const V8 tot =
        V8_POS1(V8_ADD(V8_ADD(s4[0], s4[1]), V8_ADD(s4[2], s4[3])));
    V8_STORE(mrow, mx);
    V8_STORE(trow, tot);
    const V8 inv = V8_DIV(V8_BCAST(1.0), tot);
    const V8 wv = wt != NULL ? V8_LOAD(wt) : V8_BCAST(1.0);
    for (size_t k = 0; k < K; k++) {
        const V8 a = V8_MUL(V8_LOAD(sl + 8 * k), inv);
        V8_STORE(sl + 8 * k, wt != NULL ? V8_MUL(a, wv) : a);
    }
    for (size_t k = K; k < kp; k++)
        V8_STORE(sl + 8 * k, V8_ZERO());
    return 0;
}

/* macc (nv, kp) += V' rho over the tile's rows 0 .. nr - 1 in order
 * (rho transposed back from sl; V_p of row i at vt[8 p + i]): rows below
 * nf by fused multiply-adds, the rest by a product and a sum (the
 * block's last b % 4 rows, as the separate statistics do them). */
FZ_TARGET LSE_KERNEL void FZ_FN(fz_stats)(const double *vt, size_t nv,
                                         const double *sl, size_t kp,
                                         double *macc, size_t nf, size_t nr)
{
    for (size_t k0 = 0; k0 < kp; k0 += 8) {
        V8 rho[8];
        for (size_t u = 0; u < 8; u++)
            rho[u] = V8_LOAD(sl + 8 * (k0 + u));
        V8_TR8(rho);
        double *m = macc + k0;
        /* V_0 = 1: fma(1, rho, acc) and acc + 1 rho are both acc + rho */
        V8 a0 = V8_LOAD(m);
        for (size_t i = 0; i < nr; i++)
            a0 = V8_ADD(a0, rho[i]);
        V8_STORE(m, a0);
        m += kp;
        if (nf == 8) {
            /* four monomials at a time: four independent chains */
            size_t p = 1;
            for (; p + 4 <= nv; p += 4, m += 4 * kp) {
                V8 a[4];
                for (size_t t = 0; t < 4; t++)
                    a[t] = V8_LOAD(m + t * kp);
                for (size_t i = 0; i < 8; i++)
                    for (size_t t = 0; t < 4; t++)
                        a[t] = V8_FMA(V8_BCAST(vt[8 * (p + t) + i]), rho[i],
                                      a[t]);
                for (size_t t = 0; t < 4; t++)
                    V8_STORE(m + t * kp, a[t]);
            }
            for (; p < nv; p++, m += kp) {
                V8 acc = V8_LOAD(m);
                for (size_t i = 0; i < 8; i++)
                    acc = V8_FMA(V8_BCAST(vt[8 * p + i]), rho[i], acc);
                V8_STORE(m, acc);
            }
            continue;
        }
        for (size_t p = 1; p < nv; p++, m += kp) {
            V8 acc = V8_LOAD(m);
            for (size_t i = 0; i < nr; i++) {
                const V8 v = V8_BCAST(vt[8 * p + i]);
                acc = i < nf ? V8_FMA(v, rho[i], acc)
                             : V8_ADD(acc, V8_MUL(v, rho[i]));
            }
            V8_STORE(m, acc);
        }
    }
}

/* Rows r0 .. r1 - 1 of the d-column rows at x (tda xt) into L2. */
FZ_TARGET static inline void FZ_FN(fz_prefetch_rows)(const double *x,
                                                     size_t xt, size_t d,
                                                     size_t r0, size_t r1)
{
    for (size_t r = r0; r < r1; r++)
        for (size_t o = 0; o < d * sizeof(double); o += 64)
            FZ_PREFETCH((const char *)(x + r * xt) + o);
}

/* The whole block: 0 when done (statistics ADDED to f->acc, f->lse
 * written), 1 when a score is NaN or +INFINITY (f->acc untouched). */
FZ_TARGET static int FZ_FN(fused_run)(const lse_gauss_fused *f)
{
    const size_t b = f->b, d = f->d, K = f->K, kp = f->kp, nv = 1 + 2 * d;
    double *vt = f->scratch, *sl = vt + 8 * nv, *macc = sl + 8 * kp;
    double *xbuf = macc + nv * kp, *mrow = xbuf + 8 * d, *trow = mrow + 8;
    memset(macc, 0, nv * kp * sizeof *macc);
    const size_t b4 = b - b % 4;
    for (size_t i0 = 0; i0 < b; i0 += 8) {
        const size_t nr = b - i0 < 8 ? b - i0 : 8;
        const double *xs = f->x + i0 * f->xt;
        size_t xst = f->xt;
        double wt[8] = {0.0};
        if (f->w != NULL)
            for (size_t r = 0; r < nr; r++)
                wt[r] = f->w[i0 + r];
        if (nr < 8) { /* the last rows, padded with copies of the first */
            for (size_t r = 0; r < 8; r++)
                memcpy(xbuf + r * d, xs + (r < nr ? r : 0) * f->xt,
                       d * sizeof *xbuf);
            xs = xbuf;
            xst = d;
        }
        FZ_FN(fz_vt)(xs, xst, d, f->c, vt);
        /* the rows of the tile about 4 KB of data ahead (64 / d tiles,
         * at least the next) into L2 while this one computes, so that
         * the memory's latency is covered when a tile is short work;
         * rows of a cache line or more half before the scores, half
         * before the statistics (a prefetch never faults and changes no
         * result; docs/performance.md "Diagonal covariances, session 9",
         * "session 10" and "Session 13") */
        const size_t ahead = i0 + 8 * (d >= 64 ? 1 : 64 / d);
        const size_t nn = ahead < b ? (b - ahead < 8 ? b - ahead : 8) : 0;
        const size_t nh = d >= 8 && nn > 4 ? 4 : nn;
        const double *nx = f->x + ahead * f->xt;
        FZ_FN(fz_prefetch_rows)(nx, f->xt, d, 0, nh);
        if (FZ_KB >= 16 && kp % 16 == 0)
            FZ_FN(fz_scores)(vt, nv, f->q, kp, sl, 16);
        else
            FZ_FN(fz_scores)(vt, nv, f->q, kp, sl, FZ_KB < 8 ? FZ_KB : 8);
        const double *wp = f->w != NULL ? wt : NULL;
        const unsigned bad =
            K > 16  ? FZ_FN(fz_softmax_wide)(sl, K, kp, wp, mrow, trow)
            : kp == 8 ? FZ_FN(fz_softmax)(sl, K, 8, wp, mrow, trow)
                      : FZ_FN(fz_softmax)(sl, K, 16, wp, mrow, trow);
        if (bad)
            return 1;
        /* mrow + lse_log_pos(trow) lane for lane, the logarithms 8 at a
         * time (same bits); a masked row has m = -INFINITY and sum 1:
         * -INFINITY + 0 */
        const V8 lse8 = V8_ADD(V8_LOAD(mrow), V8_LOG_POS(V8_LOAD(trow)));
        if (nr == 8) {
            V8_STORE(f->lse + i0, lse8);
        } else {
            V8_STORE(trow, lse8);
            memcpy(f->lse + i0, trow, nr * sizeof *trow);
        }
        const size_t nf = b4 > i0 ? (b4 - i0 < nr ? b4 - i0 : nr) : 0;
        FZ_FN(fz_prefetch_rows)(nx, f->xt, d, nh, nn);
        FZ_FN(fz_stats)(vt, nv, sl, kp, macc, nf, nr);
    }
    for (size_t p = 0; p < nv; p++)
        for (size_t k = 0; k < K; k++)
            f->acc[p * K + k] += macc[p * kp + k];
    return 0;
}

/* y = fz_exp(x) entry by entry (n any; lse_gauss_fused_exp) */
FZ_TARGET static void FZ_FN(fused_exp)(const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        const size_t m = n - i < 8 ? n - i : 8;
        double b[8] = {0.0};
        memcpy(b, x + i, m * sizeof *b);
        V8_STORE(b, FZ_FN(fz_exp)(V8_LOAD(b)));
        memcpy(y + i, b, m * sizeof *b);
    }
}

/* this body's parameters, undefined for the next copy */
#undef FZ_FN
#undef FZ_PREFETCH
#undef FZ_KB
#undef FZ_TARGET
#undef V8
#undef V8_ADD
#undef V8_BAD
#undef V8_BCAST
#undef V8_COL
#undef V8_DIV
#undef V8_FMA
#undef V8_LOAD
#undef V8_LOG_POS
#undef V8_MAX
#undef V8_MUL
#undef V8_NINF0
#undef V8_POS1
#undef V8_POW2_16
#undef V8_TAB16
#undef V8_STORE
#undef V8_SUB
#undef V8_TR8
#undef V8_UNDER0
#undef V8_ZERO
