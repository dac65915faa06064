#ifndef LSE_CHECK_H
#define LSE_CHECK_H
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

/* The suite a test file defines; lse_check_main.c runs it. */
Suite *lse_test_suite(void);

/* Fail with the lse_strerror text when expr is not LSE_OK. */
#define lse_assert_ok(expr)                                                    \
    do {                                                                       \
        const lse_status lse_assert_st_ = (expr);                              \
        ck_assert_msg(lse_assert_st_ == LSE_OK, "%s: %s (%d)", #expr,          \
                      lse_strerror(lse_assert_st_), (int)lse_assert_st_);      \
    } while (0)

/* Fail unless expr returns the status want. */
#define lse_assert_status(expr, want)                                          \
    do {                                                                       \
        const lse_status lse_assert_st_ = (expr);                              \
        ck_assert_msg(lse_assert_st_ == (want), "%s: got %s, want %s", #expr,  \
                      lse_strerror(lse_assert_st_), lse_strerror(want));       \
    } while (0)

/* 1 when a and b have the same shape and every entry the same bits */
static inline int lse_same_matrix(const gsl_matrix *a, const gsl_matrix *b)
{
    if (a->size1 != b->size1 || a->size2 != b->size2)
        return 0;
    for (size_t i = 0; i < a->size1; i++)
        if (memcmp(gsl_matrix_const_ptr(a, i, 0), gsl_matrix_const_ptr(b, i, 0),
                   a->size2 * sizeof(double)) != 0)
            return 0;
    return 1;
}

/* The first d (<= 4) columns of the CSV file dir/name as a matrix (the
 * bundled data sets' numeric columns); fails the test on a read error. */
static inline gsl_matrix *lse_check_load(const char *dir, const char *name,
                                         size_t d)
{
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    size_t cols[4] = {0, 1, 2, 3};
    lse_error err;
    char path[512];
    ck_assert_uint_le(d, 4);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    lse_assert_ok(lse_table_read(path, NULL, &t, &err));
    lse_assert_ok(lse_table_to_matrix(t, cols, d, LSE_MISSING_ERROR, &x, NULL,
                                      &err));
    lse_table_free(t);
    return x;
}

#endif
