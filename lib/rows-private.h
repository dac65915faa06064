#ifndef LSEGRAPH_ROWS_PRIVATE_H
#define LSEGRAPH_ROWS_PRIVATE_H

#include <string.h>

#include <gsl/gsl_matrix.h>

/* dst = src, of the same shape (the caller checks): whole rows by memcpy.
 * gsl_matrix_memcpy copies a row at a time through BLAS dcopy, a library
 * call per row: most of the cost of copying a small fit's parameters. */
static inline void lse_copy_rows(gsl_matrix *dst, const gsl_matrix *src)
{
    const size_t row = src->size2 * sizeof *src->data;
    if (dst->tda == src->size2 && src->tda == src->size2) {
        memcpy(dst->data, src->data, src->size1 * row);
        return;
    }
    for (size_t i = 0; i < src->size1; i++)
        memcpy(dst->data + i * dst->tda, src->data + i * src->tda, row);
}

#endif
