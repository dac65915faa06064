/* lse_threads_for_sum (lib/threads.c, compiled in): a sum of per-chunk
 * buffers below its floor runs on one thread even for an explicit thread
 * count and a pass threshold of 0, above it like lse_threads_for_work;
 * lse_threads_for_work uses one thread below its threshold (2^20 by
 * default, lse_set_thread_min_work) for any count (docs/performance.md,
 * "Two threads, session 11"; docs/design-notes.md, "Thread count by
 * work"). */
#include <math.h>
#include <stdlib.h>

#include "lse_check.h"
#include "threads-private.h"

static void teardown(void)
{
    lse_set_num_threads(0);
    lse_set_thread_min_work(-1.0);
}

START_TEST(test_sum_floor_explicit)
{
    lse_set_num_threads(2);
    lse_set_thread_min_work(0.0);
    /* the c/diag statistics: 16 chunks of 4128, two slices */
    ck_assert_int_eq(lse_threads_for_sum(2, 16.0 * 4128.0), 1);
    ck_assert_int_eq(lse_threads_for_sum(2, 262143.0), 1);
    ck_assert_int_eq(lse_threads_for_sum(2, NAN), 1);
    ck_assert_int_eq(lse_threads_for_sum(0, 1e9), 1);
#ifdef LSE_TEST_OPENMP
    /* at and above the floor the explicit count, at most one per slice */
    ck_assert_int_eq(lse_threads_for_sum(33, 262144.0), 2);
    ck_assert_int_eq(lse_threads_for_sum(33, 16.0 * 133152.0), 2);
    ck_assert_int_eq(lse_threads_for_sum(1, 1e9), 1);
    /* with the threshold at 0 a term pass honours it at any size */
    ck_assert_int_eq(lse_threads_for_work(2, 16.0 * 4128.0), 2);
    ck_assert_int_eq(lse_threads_for_work(2, NAN), 1);
    /* the default threshold (2^20) holds for an explicit count too */
    lse_set_thread_min_work(-1.0);
    ck_assert_int_eq(lse_threads_for_work(2, 16.0 * 4128.0), 1);
    ck_assert_int_eq(lse_threads_for_work(2, 1048575.0), 1);
    ck_assert_int_eq(lse_threads_for_work(2, 1048576.0), 2);
    ck_assert_int_eq(lse_threads_for_sum(33, 524288.0), 1);
    ck_assert(lse_get_thread_min_work() == 1048576.0);
    lse_set_thread_min_work(NAN); /* NaN: the default, too */
    ck_assert(lse_get_thread_min_work() == 1048576.0);
    ck_assert_int_eq(lse_threads_for_work(2, 1048575.0), 1);
    lse_set_thread_min_work(5e5);
    ck_assert(lse_get_thread_min_work() == 5e5);
    ck_assert_int_eq(lse_threads_for_work(2, 5e5), 2);
    ck_assert_int_eq(lse_threads_for_work(2, 4.9e5), 1);
    lse_set_thread_min_work(0.0);
    lse_set_num_threads(3);
    ck_assert_int_eq(lse_threads_for_sum(33, 1e6), 3);
#else
    ck_assert_int_eq(lse_threads_for_sum(33, 1e9), 1);
#endif
}
END_TEST

START_TEST(test_sum_default_count)
{
    lse_set_num_threads(0);
    ck_assert(lse_get_thread_min_work() == 1048576.0); /* the default */
    ck_assert_int_eq(lse_threads_for_sum(33, 1000.0), 1);
#ifdef LSE_TEST_OPENMP
    const char *env = getenv("LSE_NUM_THREADS");
    if (env == NULL || *env == '\0') {
        /* the default count also keeps lse_threads_for_work's larger
         * threshold (2^20) */
        ck_assert_int_eq(lse_threads_for_sum(33, 524288.0), 1);
        ck_assert_int_eq(lse_threads_for_sum(33, 4194304.0),
                         lse_threads_for(33));
    }
#endif
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("threads_sum");
    TCase *tc = tcase_create("floor");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_sum_floor_explicit);
    tcase_add_test(tc, test_sum_default_count);
    suite_add_tcase(s, tc);
    return s;
}
