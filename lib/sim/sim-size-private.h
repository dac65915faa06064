#ifndef LSEGRAPH_SIM_SIZE_PRIVATE_H
#define LSEGRAPH_SIM_SIZE_PRIVATE_H

/* Workspace constructors of the built-in similarities can be called
 * directly with any lse_sim_shape (never installed). gsl_matrix_alloc does
 * not check rows * cols * sizeof(double), so each constructor passes the
 * (rows, cols) pairs it is about to allocate here first and returns
 * LSE_ENOMEM when one of them cannot be addressed. */

#include "size-private.h"

/* 1 when one of the n (rows, cols) pairs in rc (2 n entries) is a matrix
 * of doubles larger than size_t can count. */
static inline int lse_size_matrices_overflow(const size_t *rc, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lse_size_matrix_overflows(rc[2 * i], rc[2 * i + 1]))
            return 1;
    return 0;
}

#define LSE_SIZE_PAIRS_OVERFLOW(...)                                          \
    lse_size_matrices_overflow((const size_t[]){__VA_ARGS__},                \
                               sizeof((const size_t[]){__VA_ARGS__}) /       \
                                   (2 * sizeof(size_t)))

#endif
