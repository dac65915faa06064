#ifndef LSE_CHECK_H
#define LSE_CHECK_H
#include <check.h>
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

#endif
