/* The bundled digits (data/digits.csv: 64 pixel columns and a label) as one
 * matrix, for the examples that read them. Header-only: each example is a
 * single file and this is their one shared piece. */
#ifndef LSEGRAPH_EXAMPLES_DIGITS_CSV_H
#define LSEGRAPH_EXAMPLES_DIGITS_CSV_H

#include <lsegraph/lsegraph.h>

/* The rows of PATH, or NULL with *why set (the reader's message or a wrong
 * column count); the caller frees the matrix. */
static inline gsl_matrix *digits_csv_read(const char *path, size_t npix,
                                          lse_error *err, const char **why)
{
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    lse_status st = lse_table_read(path, NULL, &t, err);
    if (st == LSE_OK)
        st = lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &m, NULL, err);
    lse_table_free(t);
    if (st != LSE_OK) {
        *why = err->message;
        return NULL;
    }
    if (m->size2 != npix + 1) {
        gsl_matrix_free(m);
        *why = "expected 64 pixel columns and a label";
        return NULL;
    }
    return m;
}

#endif
