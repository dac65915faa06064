#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

/* The CSV reader's own splitter for lines without quotes (lib/io.c,
 * parse_plain_line) against libcsv (LSE_CSV_LIBCSV=1 sends every line to
 * libcsv): random texts from an alphabet of delimiters, spaces, tabs, line
 * ends, quotes, comment characters and number characters must give the
 * same status, message, table (cells, lines, names) and matrix. */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct result {
    lse_status st, mst;
    char msg[512], mmsg[512];
    char *dump; /* every accessor's answer, as text */
    gsl_matrix *m;
} result;

static void append(char **s, size_t *len, const char *add)
{
    const size_t n = strlen(add);
    *s = realloc(*s, *len + n + 1);
    ck_assert_ptr_nonnull(*s);
    memcpy(*s + *len, add, n + 1);
    *len += n;
}

static result run(const char *text, size_t len, const lse_csv_opts *o,
                  int libcsv)
{
    result r;
    memset(&r, 0, sizeof r);
    if (libcsv)
        setenv("LSE_CSV_LIBCSV", "1", 1);
    else
        unsetenv("LSE_CSV_LIBCSV");
    lse_table *t = NULL;
    lse_error err = {0};
    r.st = lse_table_parse(text, len, "t.csv", o, &t, &err);
    snprintf(r.msg, sizeof r.msg, "%s", err.message);
    unsetenv("LSE_CSV_LIBCSV");
    if (r.st != LSE_OK)
        return r;
    size_t n = 0;
    char line[128];
    snprintf(line, sizeof line, "%zu %zu %d %d|", lse_table_rows(t),
             lse_table_cols(t), lse_table_has_header(t),
             lse_table_delimiter(t));
    append(&r.dump, &n, line);
    for (size_t j = 0; j < lse_table_cols(t); j++) {
        append(&r.dump, &n, lse_table_column_name(t, j));
        append(&r.dump, &n, "|");
    }
    for (size_t i = 0; i < lse_table_rows(t); i++) {
        snprintf(line, sizeof line, "\n%zu:", lse_table_line(t, i));
        append(&r.dump, &n, line);
        for (size_t j = 0; j < lse_table_cols(t); j++) {
            append(&r.dump, &n, lse_table_cell(t, i, j));
            append(&r.dump, &n, "|");
        }
    }
    lse_error merr = {0};
    r.mst = lse_table_to_matrix(t, NULL, 0, LSE_MISSING_KEEP, &r.m, NULL,
                                &merr);
    snprintf(r.mmsg, sizeof r.mmsg, "%s", merr.message);
    lse_table_free(t);
    return r;
}

static int same_matrix(const gsl_matrix *a, const gsl_matrix *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (a->size1 != b->size1 || a->size2 != b->size2)
        return 0;
    for (size_t i = 0; i < a->size1; i++)
        if (memcmp(a->data + i * a->tda, b->data + i * b->tda,
                   a->size2 * sizeof(double)) != 0)
            return 0;
    return 1;
}

START_TEST(test_plain_lines_match_libcsv)
{
    static const char alphabet[] = "0123456789..--eE,,,;;\t\t  \n\n\r#aN\"";
    static const char delims[] = {0, ',', ';', '\t'};
    char text[256];
    size_t fast_ok = 0;
    for (int it = 0; it < 60000; it++) {
        const size_t len = next() % 60;
        const int numeric = (int)(next() % 3);
        for (size_t i = 0; i < len; i++) {
            /* mostly number-like text in two of three cases */
            const size_t span = numeric ? 28 : sizeof alphabet - 1;
            text[i] = alphabet[next() % span];
        }
        text[len] = '\0';
        lse_csv_opts o = lse_csv_opts_default();
        o.delimiter = delims[next() % 4];
        o.header = (int)(next() % 3) - 1;
        result a = run(text, len, &o, 0), b = run(text, len, &o, 1);
        ck_assert_msg(a.st == b.st && strcmp(a.msg, b.msg) == 0,
                      "text '%s' delim %d: fast %d '%s', libcsv %d '%s'", text,
                      o.delimiter, a.st, a.msg, b.st, b.msg);
        if (a.st == LSE_OK) {
            fast_ok++;
            ck_assert_msg(strcmp(a.dump, b.dump) == 0,
                          "text '%s': fast\n%s\nlibcsv\n%s", text, a.dump,
                          b.dump);
            ck_assert_msg(a.mst == b.mst && strcmp(a.mmsg, b.mmsg) == 0 &&
                              same_matrix(a.m, b.m),
                          "text '%s': matrices differ (%s | %s)", text, a.mmsg,
                          b.mmsg);
        }
        free(a.dump);
        free(b.dump);
        gsl_matrix_free(a.m);
        gsl_matrix_free(b.m);
    }
    ck_assert_uint_gt(fast_ok, 5000);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("csv_fast");
    TCase *tc = tcase_create("csv_fast");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_plain_lines_match_libcsv);
    suite_add_tcase(s, tc);
    return s;
}
