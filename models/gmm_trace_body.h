/* The body of lse_gmm_frob_inv (models/gmm_trace.c), included once per
 * copy with TRACE_VT (a GCC/clang vector of TRACE_W doubles), TRACE_W,
 * TRACE_NAME(f) (the copy's name of f) and TRACE_ATTR (its target
 * attribute, or nothing) defined; TRACE_COLS, TRACE_ROWS, trace_cursor
 * and LSE_GMM_TRACE_MAXD from the includer. Every copy gives the same
 * bits. Not a header of its own. */

#define TRACE_NV (TRACE_COLS / TRACE_W)

/* The squared Frobenius norm of L^-1 (L lower triangular, row-major, d
 * <= LSE_GMM_TRACE_MAXD): its columns y_j (L y_j = e_j) by forward
 * substitution, TRACE_COLS columns at a time (vectors of TRACE_W). One row
 * alone is a chain of dependent subtractions per column (s -= l_im y_m)
 * that waits for each one: TRACE_ROWS rows side by side (their sums over
 * the rows m above the block first, then the block's own triangle in
 * order) keep the multiplier and the adder busy (the row-by-row code took
 * 0.41 ms per c/full iteration on each of 2 threads, in a parallel region
 * of its own). Every entry gets the operations of the column-by-column
 * substitution in the same order: s starts at e_i and subtracts l_im y_m
 * for m = j0, j0 + 1, ..., i - 1 in turn, then y_i = s / l_ii; a column's
 * rows above its diagonal hold zeros, and s - l * 0 = s exactly (s is 0
 * or 1 there, l finite), so the extra terms of the later columns of a
 * group change nothing. -ffp-contract=off: no fused multiply-add. */
TRACE_ATTR static void TRACE_NAME(frob_rows)(size_t d, const double *l,
                                             size_t j0, size_t i0,
                                             TRACE_VT (*y)[TRACE_NV])
{
    const size_t nr = d - i0 < TRACE_ROWS ? d - i0 : TRACE_ROWS;
    const double *li[TRACE_ROWS];
    TRACE_VT s[TRACE_ROWS][TRACE_NV];
    for (size_t r = 0; r < TRACE_ROWS; r++) {
        li[r] = l + (i0 + (r < nr ? r : 0)) * d; /* past d: a copy, unused */
        for (size_t h = 0; h < TRACE_NV; h++)
            for (size_t c = 0; c < TRACE_W; c++)
                s[r][h][c] = i0 + r == j0 + TRACE_W * h + c ? 1.0 : 0.0;
    }
    for (size_t m = j0; m < i0; m++)
        for (size_t r = 0; r < TRACE_ROWS; r++) {
            const double lm = li[r][m];
            for (size_t h = 0; h < TRACE_NV; h++)
                s[r][h] -= lm * y[m][h];
        }
    for (size_t r = 0; r < nr; r++) {
        const size_t i = i0 + r;
        for (size_t m = i0; m < i; m++) {
            const double lm = li[r][m];
            for (size_t h = 0; h < TRACE_NV; h++)
                s[r][h] -= lm * y[m][h];
        }
        const double lii = li[r][i];
        for (size_t h = 0; h < TRACE_NV; h++) {
            /* one vector division; 0 in the columns starting below row i */
            const TRACE_VT q = s[r][h] / lii;
            for (size_t c = 0; c < TRACE_W; c++)
                y[i][h][c] = j0 + TRACE_W * h + c <= i ? q[c] : 0.0;
        }
    }
}

/* Up to quota more squares of group j0's columns (nj of them) into *t, in
 * the column-by-column order from *cur on. */
TRACE_ATTR static void
TRACE_NAME(frob_sum_some)(size_t d, TRACE_VT (*y)[TRACE_NV], size_t j0,
                          size_t nj, trace_cursor *cur, size_t quota, double *t)
{
    double acc = *t;
    while (quota > 0 && cur->c < nj) {
        const size_t c = cur->c;
        const size_t end = quota < d - cur->i ? cur->i + quota : d;
        for (size_t i = cur->i; i < end; i++) {
            const double v = y[i][c / TRACE_W][c % TRACE_W];
            acc += v * v;
        }
        quota -= end - cur->i;
        cur->i = end;
        if (end == d) {
            cur->c++;
            cur->i = j0 + cur->c;
        }
    }
    *t = acc;
}

/* The squares, summed column by column, are one chain of additions
 * (d (d + 1) / 2 of them, a few cycles each): each group's is spread over
 * the blocks of the next group's substitution, whose work does not wait
 * for it. */
TRACE_ATTR static double TRACE_NAME(frob_inv)(size_t d, const double *l)
{
    TRACE_VT y[2][LSE_GMM_TRACE_MAXD][TRACE_NV];
    double t = 0.0;
    size_t jp = 0, np = 0; /* the previous group and its column count */
    trace_cursor cur = {0, 0};
    size_t g = 0; /* y[g]: this group's columns */
    for (size_t j0 = 0; j0 < d; j0 += TRACE_COLS, g ^= 1) {
        const size_t nj = d - j0 < TRACE_COLS ? d - j0 : TRACE_COLS;
        const size_t nb = (d - j0 + TRACE_ROWS - 1) / TRACE_ROWS;
        const size_t left = np * (d - jp); /* at most: a quota, not a count */
        const size_t quota = (left + nb - 1) / nb;
        for (size_t i0 = j0; i0 < d; i0 += TRACE_ROWS) {
            TRACE_NAME(frob_rows)(d, l, j0, i0, y[g]);
            TRACE_NAME(frob_sum_some)(d, y[g ^ 1], jp, np, &cur, quota, &t);
        }
        TRACE_NAME(frob_sum_some)(d, y[g ^ 1], jp, np, &cur, (size_t)-1, &t);
        jp = j0;
        np = nj;
        cur.c = 0;
        cur.i = j0;
    }
    TRACE_NAME(frob_sum_some)(d, y[g ^ 1], jp, np, &cur, (size_t)-1, &t);
    return t;
}

#undef TRACE_NV
