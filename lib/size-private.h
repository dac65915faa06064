#ifndef LSEGRAPH_SIZE_PRIVATE_H
#define LSEGRAPH_SIZE_PRIVATE_H

/* Overflow-checked size arithmetic for every product or sum of sizes that
 * feeds an allocation or a loop bound (never installed). Each returns 0 and
 * sets *out on success, 1 and sets *out = SIZE_MAX on overflow, so a caller
 * can chain them: lse_size_mul(a, b, &n) || lse_size_mul(n, c, &n). */

#include <stddef.h>
#include <stdint.h>

static inline int lse_size_mul(size_t a, size_t b, size_t *out)
{
#if defined(__GNUC__) || defined(__clang__)
    if (__builtin_mul_overflow(a, b, out)) {
        *out = SIZE_MAX;
        return 1;
    }
    return 0;
#else
    if (b != 0 && a > SIZE_MAX / b) {
        *out = SIZE_MAX;
        return 1;
    }
    *out = a * b;
    return 0;
#endif
}

static inline int lse_size_add(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b) {
        *out = SIZE_MAX;
        return 1;
    }
    *out = a + b;
    return 0;
}

/* 1 when a (rows x cols) array of elements of elem bytes cannot be
 * addressed: rows * cols * elem overflows size_t (GSL's gsl_matrix_alloc
 * and gsl_block_alloc multiply without checking). */
static inline int lse_size_array_overflows(size_t rows, size_t cols,
                                           size_t elem)
{
    size_t n;
    return lse_size_mul(rows, cols, &n) || lse_size_mul(n, elem, &n);
}

/* The same for a (rows x cols) matrix of doubles. */
static inline int lse_size_matrix_overflows(size_t rows, size_t cols)
{
    return lse_size_array_overflows(rows, cols, sizeof(double));
}

/* The matrices of an LSE term and of its similarity's workspace are
 * products of at most three extents of its shape: rows (block, n_parent;
 * n_child when S and A are kept whole) times at most two widths (the
 * largest of d_child, d_parent, d_context, plus one for augmented rows),
 * e.g. block x n_parent, n_parent x d^2 (full covariances), block x
 * n_parent x d (per-pair scratch). NULL when the largest such product of
 * doubles fits in size_t, else a description of the one that does not. */
static inline const char *lse_size_shape_overflow(size_t n_child,
                                                  size_t block,
                                                  size_t n_parent, size_t d,
                                                  int keep)
{
    const size_t rows = keep ? n_child : block;
    const size_t wide = n_parent > block ? n_parent : block;
    size_t n;
    if (lse_size_add(d, 1, &d))
        return "dimension + 1";
    if (lse_size_mul(rows, n_parent, &n) ||
        lse_size_mul(n, sizeof(double), &n))
        return keep ? "child rows x parent rows" : "block x parent rows";
    if (lse_size_mul(block, n_parent, &n) || lse_size_mul(n, d, &n) ||
        lse_size_mul(n, sizeof(double), &n))
        return "block x parent rows x dimension";
    if (lse_size_mul(wide, d, &n) || lse_size_mul(n, d, &n) ||
        lse_size_mul(n, sizeof(double), &n))
        return "rows x dimension^2";
    return NULL;
}

#endif
