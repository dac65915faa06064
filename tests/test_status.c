#include <math.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>

#include "lse_check.h"

START_TEST(test_strerror_distinct)
{
    const lse_status all[] = {
        LSE_CONTINUE, LSE_OK,       LSE_EFAULT,   LSE_EINVAL,    LSE_EDIM,
        LSE_ERANGE,   LSE_EDOM,     LSE_ENONFINITE, LSE_ENOMEM,  LSE_ENUMERIC,
        LSE_ENOCONV,  LSE_EINCREASE, LSE_EIO,     LSE_EPARSE,    LSE_ENOTFOUND,
        LSE_EEXIST,   LSE_EGSL,     LSE_EINTERNAL, LSE_ENOTSUP};
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(lse_strerror(all[i]));
        ck_assert_str_ne(lse_strerror(all[i]), "unknown status");
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(lse_strerror(all[i]), lse_strerror(all[j]));
    }
    ck_assert_str_eq(lse_strerror((lse_status)999), "unknown status");
}
END_TEST

START_TEST(test_gsl_mapping)
{
    ck_assert_int_eq(lse_status_from_gsl(GSL_SUCCESS), LSE_OK);
    ck_assert_int_eq(lse_status_from_gsl(GSL_ENOMEM), LSE_ENOMEM);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EBADLEN), LSE_EDIM);
    ck_assert_int_eq(lse_status_from_gsl(GSL_ENOTSQR), LSE_EDIM);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EDOM), LSE_ENUMERIC);
    ck_assert_int_eq(lse_status_from_gsl(GSL_ESING), LSE_ENUMERIC);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EZERODIV), LSE_ENUMERIC);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EOVRFLW), LSE_ENUMERIC);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EINVAL), LSE_EINVAL);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EMAXITER), LSE_ENOCONV);
    ck_assert_int_eq(lse_status_from_gsl(GSL_EFAILED), LSE_EGSL);
}
END_TEST

START_TEST(test_gsl_quiet_no_abort)
{
    /* with the default handler this would abort the process */
    gsl_set_error_handler(NULL);
    lse_gsl_quiet();
    gsl_matrix *m = gsl_matrix_calloc(2, 2); /* not positive definite */
    gsl_matrix_set(m, 0, 0, -1.0);
    const int rc = gsl_linalg_cholesky_decomp1(m);
    ck_assert_int_eq(lse_status_from_gsl(rc), LSE_ENUMERIC);
    gsl_matrix_free(m);
}
END_TEST

static void keep_handler(const char *reason, const char *file, int line,
                         int gsl_errno)
{
    (void)reason;
    (void)file;
    (void)line;
    (void)gsl_errno;
}

START_TEST(test_gsl_quiet_keeps_user_handler)
{
    gsl_set_error_handler(keep_handler);
    lse_gsl_quiet();
    gsl_error_handler_t *h = gsl_set_error_handler_off();
    ck_assert(h == keep_handler);
}
END_TEST

static int n_logged;
static char last[256];
static void logger(lse_log_level level, const char *msg, void *user)
{
    (void)user;
    ck_assert_int_eq(level, LSE_LOG_WARN);
    n_logged++;
    strncpy(last, msg, sizeof last - 1);
}

START_TEST(test_log_hook)
{
    n_logged = 0;
    lse_log(LSE_LOG_WARN, "dropped %d", 1); /* no handler: discarded */
    ck_assert_int_eq(n_logged, 0);
    lse_log_fn fn = logger;
    void *user = &fn;
    lse_get_log_handler(&fn, &user);
    ck_assert(fn == NULL);
    ck_assert_ptr_null(user);
    lse_set_log_handler(logger, &n_logged);
    lse_get_log_handler(&fn, &user);
    ck_assert(fn == logger);
    ck_assert_ptr_eq(user, &n_logged);
    lse_get_log_handler(NULL, NULL); /* either output may be NULL */
    lse_log(LSE_LOG_WARN, "value %d", 42);
    ck_assert_int_eq(n_logged, 1);
    ck_assert_str_eq(last, "value 42");
    lse_set_log_handler(NULL, NULL);
    lse_log(LSE_LOG_WARN, "dropped again");
    ck_assert_int_eq(n_logged, 1);
}
END_TEST

/* Non-finite values in messages are spelled as the CSV writer spells
 * them (docs/io.md): Inf, -Inf, NaN; never printf's inf, -inf, nan, -nan.
 * Input quoted in a message and words that contain them stay as they
 * are. */
static void log_keep(lse_log_level level, const char *message, void *user)
{
    (void)level;
    snprintf(user, 256, "%s", message);
}

START_TEST(test_nonfinite_spelling)
{
    lse_error err;
    lse_error_set(&err, LSE_ENONFINITE, "f", "energy is %g, step %g (%g) [%g]",
                  -INFINITY, INFINITY, NAN, -NAN);
    ck_assert_str_eq(err.message, "f: energy is -Inf, step Inf (NaN) [NaN]");
    lse_error_set(&err, LSE_EPARSE, "f",
                  "inf.csv:3:1: '-inf' is not finite; info, x=%g, nanny, %g",
                  INFINITY, 1.5);
    ck_assert_str_eq(err.message, "f: inf.csv:3:1: '-inf' is not finite; "
                                  "info, x=Inf, nanny, 1.5");
    /* the JSON writer refuses non-finite numbers with the same words */
    lse_json *doc = lse_json_new_object();
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(lse_json_set_number(doc, "loglik", -INFINITY, &err),
                     LSE_ENONFINITE);
    ck_assert_msg(strstr(err.message, "cannot be -Inf") != NULL, "%s",
                  err.message);
    gsl_matrix *m = gsl_matrix_calloc(2, 2);
    gsl_matrix_set(m, 1, 0, INFINITY);
    ck_assert_int_eq(lse_json_set_matrix(doc, "means", m, &err),
                     LSE_ENONFINITE);
    ck_assert_msg(strstr(err.message, "entry (1, 0) is Inf:") != NULL, "%s",
                  err.message);
    gsl_matrix_free(m);
    lse_json_free(doc);
    /* the log hook too (the graph's messages: tests/test_cli.c) */
    char logged[256] = "";
    lse_set_log_handler(log_keep, logged);
    lse_log(LSE_LOG_WARN, "loglik %g", -INFINITY);
    lse_set_log_handler(NULL, NULL);
    ck_assert_str_eq(logged, "loglik -Inf");
}
END_TEST

/* The same spelling for a tool's own message, in place. */
START_TEST(test_message_spell)
{
    char msg[128];
    snprintf(msg, sizeof msg, "x=%g (%g) [%g], %g; '%s' info nanny -nan:",
             INFINITY, -INFINITY, NAN, -INFINITY, "inf");
    lse_message_spell(msg);
    ck_assert_str_eq(msg, "x=Inf (-Inf) [NaN], -Inf; 'inf' info nanny NaN:");
    lse_message_spell(NULL); /* no-op */
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("status");
    tcase_add_test(tc, test_strerror_distinct);
    tcase_add_test(tc, test_gsl_mapping);
    tcase_add_test(tc, test_gsl_quiet_no_abort);
    tcase_add_test(tc, test_gsl_quiet_keeps_user_handler);
    tcase_add_test(tc, test_log_hook);
    tcase_add_test(tc, test_nonfinite_spelling);
    tcase_add_test(tc, test_message_spell);
    suite_add_tcase(s, tc);
    return s;
}
