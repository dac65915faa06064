#ifndef LSEGRAPH_ROWS_PRIVATE_H
#define LSEGRAPH_ROWS_PRIVATE_H

#include <string.h>

#include <gsl/gsl_errno.h>
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

/* lse_copy_rows where gsl_matrix_memcpy's status is read: GSL_EBADLEN (dst
 * untouched) for another shape, nothing to copy for an empty one. */
static inline int lse_copy_rows_checked(gsl_matrix *dst, const gsl_matrix *src)
{
    if (dst->size1 != src->size1 || dst->size2 != src->size2)
        return GSL_EBADLEN;
    if (src->size1 > 0 && src->size2 > 0)
        lse_copy_rows(dst, src);
    return GSL_SUCCESS;
}

#endif
