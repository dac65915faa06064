#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lse_check.h"

/* The graph's finiteness check of free nodes (lib/graph.c
 * matrix_nonfinite) on nodes large enough for several tasks: one thread
 * below 2^18 doubles whatever the thread count, shared among the threads
 * above (with the pass threshold of lse_set_thread_min_work at 0; by
 * default below 2^20 on one thread too); either way the first bad entry is
 * named. */

/* A graph with a clamped x (4 x cols) and a free m of rows x cols, scored
 * by a dot-product term on m's first two rows; energy with m[r][c] = v
 * (checked whether the term reads it or not). */
static lse_status energy_with(size_t rows, size_t cols, size_t r, size_t c,
                              double v, char *msg, size_t len)
{
    lse_graph *g = lse_graph_new();
    ck_assert_ptr_nonnull(g);
    lse_node *x, *m;
    lse_assert_ok(lse_graph_add_node(g, "x", 4, cols, LSE_NODE_CLAMPED, &x));
    lse_assert_ok(lse_graph_add_node(g, "m", rows, cols, 0, &m));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(x);
    spec.parent = lse_view_rows(m, 0, 2);
    spec.sim = lse_sim_dot;
    lse_assert_ok(lse_graph_add_lse(g, "t", &spec, NULL));
    double e;
    lse_assert_ok(lse_graph_energy(g, &e)); /* all zero: finite */
    gsl_matrix_set(lse_node_value(m), r, c, v);
    const lse_status st = lse_graph_energy(g, &e);
    snprintf(msg, len, "%s", lse_graph_errmsg(g));
    lse_graph_free(g);
    return st;
}

static void check_sizes(void)
{
    /* 2^17 (two tasks, one thread), 2^18 + 5 (five tasks, the threads) */
    const size_t shapes[][2] = {{2048, 64}, {4096, 64}, {262149, 1}};
    for (size_t q = 0; q < 3; q++) {
        const size_t rows = shapes[q][0], cols = shapes[q][1];
        const size_t at[][2] = {
            {0, 0}, {rows / 2, cols - 1}, {rows - 1, cols - 1}};
        for (size_t a = 0; a < 3; a++) {
            char msg[256], want[64];
            const double bad[] = {NAN, INFINITY, -INFINITY};
            lse_assert_status(energy_with(rows, cols, at[a][0], at[a][1],
                                          bad[a], msg, sizeof msg),
                              LSE_ENONFINITE);
            snprintf(want, sizeof want,
                     "node 'm' has a non-finite value at [%zu,%zu]", at[a][0],
                     at[a][1]);
            ck_assert_msg(strstr(msg, want) != NULL, "%zux%zu: '%s'", rows,
                          cols, msg);
        }
        char msg[256];
        lse_assert_ok(energy_with(rows, cols, rows - 1, cols - 1, 1e300, msg,
                                  sizeof msg));
    }
}

START_TEST(test_large_nodes)
{
    const int saved = lse_get_num_threads();
    lse_set_thread_min_work(0.0); /* 2^18 + 5 doubles: the threads too */
    for (int nt = 1; nt <= 3; nt++) {
        lse_set_num_threads(nt);
        check_sizes();
    }
    lse_set_num_threads(saved);
    lse_set_thread_min_work(-1.0);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("graph_check");
    TCase *tc = tcase_create("graph_check");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_large_nodes);
    suite_add_tcase(s, tc);
    return s;
}
