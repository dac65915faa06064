/* Tests for lib/io.c: CSV tables, matrices to CSV, atomic files. */
#include <dirent.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

/* ------------------------------------------------------------------ */
/* Fixture: a fresh temporary directory per test                       */
/* ------------------------------------------------------------------ */

static char dir[64];

static void setup(void) { lse_tmpdir_make(dir, sizeof dir, "io"); }

static void teardown(void) { lse_tmpdir_remove(dir); }

static void path_of(const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
}

static void write_bytes(const char *name, const char *data, size_t len)
{
    char path[256];
    path_of(name, path, sizeof path);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Write text to DIR/in.csv and read it back as a table. */
static lse_status read_text(const char *text, const lse_csv_opts *opts,
                            lse_table **t, lse_error *err)
{
    char path[256];
    write_bytes("in.csv", text, strlen(text));
    path_of("in.csv", path, sizeof path);
    return lse_table_read(path, opts, t, err);
}

#define assert_msg_has(err, want)                                              \
    ck_assert_msg(strstr((err).message, (want)) != NULL,                       \
                  "message '%s' lacks '%s'", (err).message, (want))

/* Read text that must fail with status want and a message holding part. */
static void expect_read_error(const char *text, const lse_csv_opts *opts,
                              lse_status want, const char *part)
{
    lse_error err = {0};
    lse_table *t = (lse_table *)&err; /* must be reset to NULL */
    lse_assert_status(read_text(text, opts, &t, &err), want);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(err.status, want);
    assert_msg_has(err, part);
    assert_msg_has(err, "lse_table_parse");
}

/* ------------------------------------------------------------------ */
/* Reading tables                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_header_auto_comma)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("a,b\n1,2\n3,4.5\n", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_uint_eq(lse_table_cols(t), 2);
    ck_assert_int_eq(lse_table_has_header(t), 1);
    ck_assert_int_eq(lse_table_delimiter(t), ',');
    ck_assert_str_eq(lse_table_column_name(t, 0), "a");
    ck_assert_str_eq(lse_table_column_name(t, 1), "b");
    ck_assert_str_eq(lse_table_cell(t, 0, 0), "1");
    ck_assert_str_eq(lse_table_cell(t, 1, 1), "4.5");
    ck_assert_uint_eq(lse_table_line(t, 0), 2);
    ck_assert_uint_eq(lse_table_line(t, 1), 3);
    /* out of range */
    ck_assert_ptr_null(lse_table_cell(t, 2, 0));
    ck_assert_ptr_null(lse_table_cell(t, 0, 2));
    ck_assert_ptr_null(lse_table_column_name(t, 2));
    ck_assert_uint_eq(lse_table_line(t, 2), 0);
    ck_assert_ptr_nonnull(strstr(lse_table_name(t), "in.csv"));
    lse_table_free(t);
}
END_TEST

START_TEST(test_no_header_auto)
{
    lse_error err;
    lse_table *t = NULL;
    /* missing values and infinities do not make a header */
    lse_assert_ok(read_text("1,NA,-inf\n3,4,5\n", NULL, &t, &err));
    ck_assert_int_eq(lse_table_has_header(t), 0);
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_str_eq(lse_table_column_name(t, 0), "1");
    ck_assert_str_eq(lse_table_column_name(t, 2), "3");
    ck_assert_str_eq(lse_table_cell(t, 0, 1), "NA");
    ck_assert_uint_eq(lse_table_line(t, 0), 1);
    lse_table_free(t);
}
END_TEST

START_TEST(test_header_forced)
{
    lse_error err;
    lse_table *t = NULL;
    lse_csv_opts o = lse_csv_opts_default();
    o.header = 0; /* text in the first row, but it is data */
    lse_assert_ok(read_text("x,y\n1,2\n", &o, &t, &err));
    ck_assert_int_eq(lse_table_has_header(t), 0);
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_str_eq(lse_table_cell(t, 0, 0), "x");
    ck_assert_str_eq(lse_table_column_name(t, 1), "2");
    lse_table_free(t);

    o.header = 1; /* numbers in the first row, but they are names */
    lse_assert_ok(read_text("10,20\n1,2\n", &o, &t, &err));
    ck_assert_int_eq(lse_table_has_header(t), 1);
    ck_assert_uint_eq(lse_table_rows(t), 1);
    ck_assert_str_eq(lse_table_column_name(t, 1), "20");
    ck_assert_str_eq(lse_table_cell(t, 0, 1), "2");
    lse_table_free(t);
}
END_TEST

START_TEST(test_delimiters)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("a;b;c\n1;2;3\n", NULL, &t, &err));
    ck_assert_int_eq(lse_table_delimiter(t), ';');
    ck_assert_uint_eq(lse_table_cols(t), 3);
    ck_assert_str_eq(lse_table_cell(t, 0, 2), "3");
    lse_table_free(t);

    lse_assert_ok(read_text("a\tb\n1\t\n", NULL, &t, &err));
    ck_assert_int_eq(lse_table_delimiter(t), '\t');
    ck_assert_uint_eq(lse_table_cols(t), 2);
    ck_assert_str_eq(lse_table_cell(t, 0, 1), ""); /* tab-delimited empty */
    lse_table_free(t);

    /* the delimiter inside quotes does not count */
    lse_assert_ok(read_text("\"a;b;c\",d\n1,2\n", NULL, &t, &err));
    ck_assert_int_eq(lse_table_delimiter(t), ',');
    ck_assert_str_eq(lse_table_column_name(t, 0), "a;b;c");
    lse_table_free(t);

    /* a single column: no delimiter at all */
    lse_assert_ok(read_text("x\n1\n2\n", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_cols(t), 1);
    ck_assert_uint_eq(lse_table_rows(t), 2);
    lse_table_free(t);

    /* explicit delimiter: the commas are text */
    lse_csv_opts o = lse_csv_opts_default();
    o.delimiter = ';';
    lse_assert_ok(read_text("a,b;c\n1,5;2\n", &o, &t, &err));
    ck_assert_uint_eq(lse_table_cols(t), 2);
    ck_assert_str_eq(lse_table_cell(t, 0, 0), "1,5");
    lse_table_free(t);
}
END_TEST

START_TEST(test_line_ends)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("a,b\r\n1,2\r\n\r\n3,4\r\n", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_str_eq(lse_table_column_name(t, 1), "b");
    ck_assert_str_eq(lse_table_cell(t, 0, 1), "2");
    ck_assert_uint_eq(lse_table_line(t, 1), 4);
    lse_table_free(t);

    /* old Mac CR only, and no line end after the last row */
    lse_assert_ok(read_text("a,b\r1,2\r3,4", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_str_eq(lse_table_cell(t, 1, 1), "4");
    ck_assert_uint_eq(lse_table_line(t, 1), 3);
    lse_table_free(t);
}
END_TEST

START_TEST(test_quoted_fields)
{
    lse_error err;
    lse_table *t = NULL;
    const char *text = "name,v\n"
                       "\"x, y\",1\n"
                       "\"say \"\"hi\"\"\",2\n"
                       "\"multi\nline\",3\n"
                       "  plain  , \" kept \" \n"
                       "\"\",5\n";
    lse_assert_ok(read_text(text, NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 5);
    ck_assert_str_eq(lse_table_cell(t, 0, 0), "x, y");
    ck_assert_str_eq(lse_table_cell(t, 1, 0), "say \"hi\"");
    ck_assert_str_eq(lse_table_cell(t, 2, 0), "multi\nline");
    ck_assert_str_eq(lse_table_cell(t, 3, 0), "plain");  /* trimmed */
    ck_assert_str_eq(lse_table_cell(t, 3, 1), " kept "); /* quoted */
    ck_assert_str_eq(lse_table_cell(t, 4, 0), "");
    ck_assert_uint_eq(lse_table_line(t, 2), 4); /* where the row starts */
    ck_assert_uint_eq(lse_table_line(t, 3), 6);
    ck_assert_uint_eq(lse_table_line(t, 4), 7);
    lse_table_free(t);
}
END_TEST

START_TEST(test_comments_and_blank_lines)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("# made by hand\nA,B\n\n# more\n1,2\n   \n3,4\n",
                            NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_str_eq(lse_table_column_name(t, 0), "A");
    ck_assert_uint_eq(lse_table_line(t, 0), 5);
    ck_assert_uint_eq(lse_table_line(t, 1), 7);
    lse_table_free(t);

    /* '#' inside a quoted field spanning lines is not a comment */
    lse_assert_ok(read_text("a,b\n\"x\n# not a comment\",1\n", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 1);
    ck_assert_str_eq(lse_table_cell(t, 0, 0), "x\n# not a comment");
    lse_table_free(t);

    /* another comment character, and none */
    lse_csv_opts o = lse_csv_opts_default();
    o.comment = '%';
    lse_assert_ok(read_text("%c\n#a,b\n1,2\n", &o, &t, &err));
    ck_assert_str_eq(lse_table_column_name(t, 0), "#a");
    lse_table_free(t);
    o.comment = '\0';
    lse_assert_ok(read_text("#a,b\n1,2\n", &o, &t, &err));
    ck_assert_str_eq(lse_table_column_name(t, 0), "#a");
    ck_assert_uint_eq(lse_table_rows(t), 1);
    lse_table_free(t);
}
END_TEST

START_TEST(test_bom)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("\xEF\xBB\xBF\"eruptions\",waiting\n3.6,79\n", NULL,
                            &t, &err));
    ck_assert_str_eq(lse_table_column_name(t, 0), "eruptions");
    ck_assert_uint_eq(lse_table_line(t, 0), 2);
    lse_table_free(t);
}
END_TEST

START_TEST(test_parse_from_memory)
{
    lse_error err;
    lse_table *t = NULL;
    /* not NUL-terminated: only the first 8 bytes count */
    const char text[] = "a,b\n1,2\n3,4\n";
    lse_assert_ok(lse_table_parse(text, 8, NULL, NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 1);
    ck_assert_str_eq(lse_table_name(t), "<memory>");
    lse_table_free(t);
    lse_table_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors while reading                                                */
/* ------------------------------------------------------------------ */

START_TEST(test_missing_file)
{
    lse_error err;
    lse_table *t = NULL;
    char path[256];
    path_of("absent.csv", path, sizeof path);
    lse_assert_status(lse_table_read(path, NULL, &t, &err), LSE_EIO);
    ck_assert_ptr_null(t);
    assert_msg_has(err, "absent.csv");
    assert_msg_has(err, "No such file");
    /* a directory opens but cannot be read */
    lse_assert_status(lse_table_read(dir, NULL, &t, &err), LSE_EIO);
    assert_msg_has(err, "cannot read");
}
END_TEST

START_TEST(test_no_data_rows)
{
    expect_read_error("", NULL, LSE_EPARSE, "no data rows");
    expect_read_error("# only a comment\n\n   \n", NULL, LSE_EPARSE,
                      "no data rows");
    expect_read_error("\n# c\nx,y\n", NULL, LSE_EPARSE,
                      "in.csv:3: no data rows");
    lse_csv_opts o = lse_csv_opts_default();
    o.header = 1;
    expect_read_error("1,2\n", &o, LSE_EPARSE, "no data rows (only a header)");
}
END_TEST

START_TEST(test_ragged_rows)
{
    expect_read_error("a,b\n1,2\n\n3\n", NULL, LSE_EPARSE,
                      "in.csv:4: 1 field, expected 2");
    expect_read_error("a,b\n1,2\n3,4,5\n6,7\n", NULL, LSE_EPARSE,
                      "in.csv:3: 3 fields, expected 2 (as on line 1)");
    /* a trailing delimiter makes an extra empty field */
    expect_read_error("a,b\n1,2,\n", NULL, LSE_EPARSE,
                      "in.csv:2: 3 fields, expected 2");
    /* the last row without a line end */
    expect_read_error("a,b\n1,2\n3", NULL, LSE_EPARSE,
                      "in.csv:3: 1 field, expected 2");
}
END_TEST

START_TEST(test_malformed_quoting)
{
    /* a quote inside an unquoted field: column 4 */
    expect_read_error("a,b\n1,x\"y\n", NULL, LSE_EPARSE,
                      "in.csv:2:4: malformed quoting");
    /* text after a closing quote: column 5 */
    expect_read_error("a,b\n\"ab\"c,1\n", NULL, LSE_EPARSE,
                      "in.csv:2:5: malformed quoting");
    /* a quote that never closes */
    expect_read_error("a,b\n1,2\n\"open,1\n3,4\n", NULL, LSE_EPARSE,
                      "in.csv:3: unterminated quoted field");
}
END_TEST

START_TEST(test_nul_byte)
{
    lse_error err;
    lse_table *t = NULL;
    const char text[] = "a,b\n1,\0002\n";
    lse_assert_status(
        lse_table_parse(text, sizeof text - 1, "nul.csv", NULL, &t, &err),
        LSE_EPARSE);
    assert_msg_has(err, "nul.csv:2:3: NUL byte");
}
END_TEST

/* The same text read from a file stops at the first block holding a NUL
 * byte: /dev/zero fails at once instead of filling the memory. */
START_TEST(test_nul_byte_early)
{
    lse_error err;
    lse_table *t = NULL;
    const char text[] = "a,b\r\n1,2\n3,\0004\n";
    write_bytes("nul.csv", text, sizeof text - 1);
    char path[256];
    path_of("nul.csv", path, sizeof path);
    lse_assert_status(lse_table_read(path, NULL, &t, &err), LSE_EPARSE);
    ck_assert_ptr_null(t);
    assert_msg_has(err, "nul.csv:3:3: NUL byte in text");
    lse_assert_status(lse_table_read("/dev/zero", NULL, &t, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "/dev/zero:1:1: NUL byte in text (binary data");
}
END_TEST

/* An endless pipe (a child writing "1,2" lines until the reader closes
 * it) and a file longer than the limit stop at opts.max_bytes. */
START_TEST(test_input_limit)
{
    lse_error err;
    lse_table *t = NULL;
    lse_csv_opts o = lse_csv_opts_default();
    ck_assert_uint_eq(o.max_bytes, LSE_CSV_MAX_BYTES);
    ck_assert_uint_ge(LSE_CSV_MAX_BYTES, (size_t)1 << 31);
    const char text[] = "a,b\n1,2\n3,4\n5,6\n"; /* 16 bytes */
    write_bytes("small.csv", text, sizeof text - 1);
    char path[256];
    path_of("small.csv", path, sizeof path);
    o.max_bytes = 15;
    lse_assert_status(lse_table_read(path, &o, &t, &err), LSE_ENOMEM);
    ck_assert_ptr_null(t);
    assert_msg_has(err, "small.csv: input exceeds the limit of 15 bytes");
    o.max_bytes = 16; /* exactly at the limit */
    lse_assert_ok(lse_table_read(path, &o, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 3);
    lse_table_free(t);
    t = NULL;
    o.max_bytes = 0; /* the default */
    lse_assert_ok(lse_table_read(path, &o, &t, &err));
    lse_table_free(t);
    t = NULL;

    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* the endless writer */
        close(fd[0]);
        char block[4096];
        for (size_t i = 0; i + 4 <= sizeof block; i += 4)
            memcpy(block + i, "1,2\n", 4);
        while (write(fd[1], block, sizeof block) > 0)
            ;
        _exit(0);
    }
    close(fd[1]);
    char dev[64];
    snprintf(dev, sizeof dev, "/dev/fd/%d", fd[0]);
    o.max_bytes = (size_t)1 << 20;
    lse_assert_status(lse_table_read(dev, &o, &t, &err), LSE_ENOMEM);
    assert_msg_has(err, "input exceeds the limit of 1048576 bytes");
    close(fd[0]); /* the writer gets EPIPE or SIGPIPE and ends */
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}
END_TEST

/* A header naming two columns alike is refused: a column is found by its
 * name, and the second one would never be. */
/* The first repeat is the one whose second occurrence comes first. */
START_TEST(test_names_find_repeat)
{
    const char *const a[] = {"x", "y", "z", "y", "x"};
    size_t first = 7, second = 7;
    lse_assert_ok(lse_names_find_repeat(a, 5, &first, &second, NULL));
    ck_assert_uint_eq(first, 1);
    ck_assert_uint_eq(second, 3);
    const char *const b[] = {"b", "a", "c"};
    lse_assert_ok(lse_names_find_repeat(b, 3, &first, &second, NULL));
    ck_assert_uint_eq(second, SIZE_MAX);
    lse_assert_ok(lse_names_find_repeat(b, 1, &first, &second, NULL));
    ck_assert_uint_eq(second, SIZE_MAX);
    const char *const c[] = {"", "q", ""};
    lse_assert_ok(lse_names_find_repeat(c, 3, &first, &second, NULL));
    ck_assert_uint_eq(first, 0);
    ck_assert_uint_eq(second, 2);
}
END_TEST

START_TEST(test_duplicate_names)
{
    expect_read_error("a,b,a\n1,2,3\n", NULL, LSE_EPARSE,
                      "in.csv:1: columns 1 and 3 are both named 'a'");
    expect_read_error("# c\nx,y,y,x\n1,2,3,4\n", NULL, LSE_EPARSE,
                      "in.csv:2: columns 2 and 3 are both named 'y': "
                      "columns are found by name, so rename one");
    expect_read_error("\"\",\"\",z\n1,2,3\n", NULL, LSE_EPARSE,
                      "columns 1 and 2 both have an empty name");
    lse_csv_opts o = lse_csv_opts_default();
    o.header = 1;
    expect_read_error("1,1\n2,3\n", &o, LSE_EPARSE,
                      "columns 1 and 2 are both named '1'");
    /* as data the same row is fine */
    lse_error err;
    lse_table *t = NULL;
    o.header = 0;
    lse_assert_ok(read_text("1,1\n2,3\n", &o, &t, &err));
    ck_assert_str_eq(lse_table_column_name(t, 1), "2");
    lse_table_free(t);
    t = NULL;
    lse_assert_ok(read_text("a,A,a_\n1,2,3\n", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_cols(t), 3);
    lse_table_free(t);
}
END_TEST

/* White space separated files (R's write.table, .dat files): detected
 * when the first line has no ',', ';' or tab and the first lines all
 * split into two or more fields at spaces; or given as ' '. */
START_TEST(test_whitespace)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("# comment\n\"x\" \"y y\"\n  1.5   2\n"
                            "\n3 \t 4e2  \n",
                            NULL, &t, &err));
    ck_assert_int_eq(lse_table_delimiter(t), ' ');
    ck_assert_int_eq(lse_table_has_header(t), 1);
    ck_assert_uint_eq(lse_table_cols(t), 2);
    ck_assert_uint_eq(lse_table_rows(t), 2);
    ck_assert_str_eq(lse_table_column_name(t, 1), "y y");
    ck_assert_str_eq(lse_table_cell(t, 0, 0), "1.5");
    ck_assert_str_eq(lse_table_cell(t, 1, 1), "4e2");
    ck_assert_uint_eq(lse_table_line(t, 1), 5);
    gsl_matrix *m = NULL;
    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &m, NULL, &err));
    ck_assert_double_eq(gsl_matrix_get(m, 1, 1), 400.0);
    gsl_matrix_free(m);
    lse_table_free(t);
    t = NULL;

    /* a quoted field holds spaces and doubled quotes */
    lse_csv_opts o = lse_csv_opts_default();
    o.delimiter = ' ';
    lse_assert_ok(read_text("a \"b \"\"c\"\"\"\n1 2\n", &o, &t, &err));
    ck_assert_str_eq(lse_table_column_name(t, 1), "b \"c\"");
    lse_table_free(t);
    t = NULL;
    expect_read_error("a b\n1 2\"x\n", &o, LSE_EPARSE,
                      "in.csv:2:4: malformed quoting");
    expect_read_error("a \"b\n1 2\n", &o, LSE_EPARSE,
                      "in.csv:1:3: unterminated quoted field");
    expect_read_error("a b\n1 2 3\n", &o, LSE_EPARSE,
                      "in.csv:2: 3 fields, expected 2 (as on line 1); if the "
                      "first column holds row names, give it a name");

    /* a one-column file whose name holds a space stays one column */
    lse_assert_ok(read_text("body mass\n1.5\n2\n", NULL, &t, &err));
    ck_assert_int_eq(lse_table_delimiter(t), ',');
    ck_assert_uint_eq(lse_table_cols(t), 1);
    lse_table_free(t);
    t = NULL;
    /* a comma wins over spaces */
    lse_assert_ok(read_text("a b,c\n1,2\n", NULL, &t, &err));
    ck_assert_int_eq(lse_table_delimiter(t), ',');
    ck_assert_str_eq(lse_table_column_name(t, 0), "a b");
    lse_table_free(t);
}
END_TEST

START_TEST(test_bad_arguments)
{
    lse_error err;
    lse_table *t = NULL;
    lse_csv_opts o = lse_csv_opts_default();
    o.delimiter = '"';
    lse_assert_status(lse_table_parse("a\n", 2, NULL, &o, &t, &err),
                      LSE_EINVAL);
    o = lse_csv_opts_default();
    o.header = 2;
    lse_assert_status(lse_table_parse("a\n", 2, NULL, &o, &t, &err),
                      LSE_EINVAL);
    o = lse_csv_opts_default();
    o.delimiter = '#'; /* same as the comment character */
    lse_assert_status(lse_table_parse("a\n", 2, NULL, &o, &t, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_table_parse(NULL, 2, NULL, NULL, &t, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_table_parse("a\n", 2, NULL, NULL, NULL, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_table_read(NULL, NULL, &t, &err), LSE_EFAULT);
    /* err may be NULL */
    lse_assert_status(lse_table_parse("", 0, NULL, NULL, &t, NULL), LSE_EPARSE);
}
END_TEST

START_TEST(test_find_column)
{
    lse_error err;
    lse_table *t = NULL;
    lse_assert_ok(read_text("eruptions,waiting,2\n1,2,3\n", NULL, &t, &err));
    size_t j = 99;
    lse_assert_ok(lse_table_find_column(t, "waiting", &j, &err));
    ck_assert_uint_eq(j, 1);
    lse_assert_ok(lse_table_find_column(t, "1", &j, &err));
    ck_assert_uint_eq(j, 0);
    /* a name wins over an index */
    lse_assert_ok(lse_table_find_column(t, "2", &j, &err));
    ck_assert_uint_eq(j, 2);
    lse_assert_status(lse_table_find_column(t, "speed", &j, &err),
                      LSE_ENOTFOUND);
    assert_msg_has(err, "no column 'speed'");
    assert_msg_has(err, "eruptions, waiting, 2");
    lse_assert_status(lse_table_find_column(t, "0", &j, &err), LSE_ENOTFOUND);
    lse_assert_status(lse_table_find_column(t, "4", &j, &err), LSE_ENOTFOUND);
    lse_assert_status(lse_table_find_column(t, "1x", &j, &err), LSE_ENOTFOUND);
    lse_assert_status(lse_table_find_column(t, NULL, &j, &err), LSE_EFAULT);
    lse_table_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Tables to matrices                                                  */
/* ------------------------------------------------------------------ */

START_TEST(test_to_matrix_numbers)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    size_t *index = NULL;
    lse_assert_ok(read_text("a,b,c\n 1.5 ,\" -2e-3 \",0x1p-2\n+7,.25,1e-320\n",
                            NULL, &t, &err));
    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &m, &index, &err));
    ck_assert_uint_eq(m->size1, 2);
    ck_assert_uint_eq(m->size2, 3);
    ck_assert(gsl_matrix_get(m, 0, 0) == 1.5);
    ck_assert(gsl_matrix_get(m, 0, 1) == -2e-3);
    ck_assert(gsl_matrix_get(m, 0, 2) == 0.25);
    ck_assert(gsl_matrix_get(m, 1, 0) == 7.0);
    ck_assert(gsl_matrix_get(m, 1, 2) == 1e-320); /* subnormal is kept */
    ck_assert_uint_eq(index[0], 0);
    ck_assert_uint_eq(index[1], 1);
    gsl_matrix_free(m);
    free(index);

    /* a selection, in the caller's order */
    const size_t cols[2] = {2, 0};
    lse_assert_ok(
        lse_table_to_matrix(t, cols, 2, LSE_MISSING_ERROR, &m, NULL, &err));
    ck_assert_uint_eq(m->size2, 2);
    ck_assert(gsl_matrix_get(m, 1, 1) == 7.0);
    ck_assert(gsl_matrix_get(m, 0, 0) == 0.25);
    gsl_matrix_free(m);
    lse_table_free(t);
}
END_TEST

START_TEST(test_to_matrix_not_a_number)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    lse_assert_ok(read_text("x,y\n1,2\n# c\n3,abc\n", NULL, &t, &err));
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_DROP, &m, NULL, &err),
        LSE_EPARSE);
    ck_assert_ptr_null(m);
    assert_msg_has(err, "in.csv:4:2: 'abc' is not a number (column 'y')");
    /* the first column alone is fine */
    const size_t c0 = 0;
    lse_assert_ok(
        lse_table_to_matrix(t, &c0, 1, LSE_MISSING_ERROR, &m, NULL, &err));
    gsl_matrix_free(m);
    lse_table_free(t);
}
END_TEST

START_TEST(test_to_matrix_missing)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    size_t *index = NULL;
    lse_assert_ok(read_text("a,b\n1,\n3,4\nNA,5\nnan,6\n7, n/a\n8,NaN\n", NULL,
                            &t, &err));
    /* "n/a" is text, not a missing value */
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_KEEP, &m, NULL, &err),
        LSE_EPARSE);
    assert_msg_has(err, ":6:2: 'n/a' is not a number");
    lse_table_free(t);

    lse_assert_ok(
        read_text("a,b\n1,\n3,4\nNA,5\nnan,6\n8,NaN\n", NULL, &t, &err));
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &m, &index, &err),
        LSE_EPARSE);
    assert_msg_has(err, "in.csv:2:2: missing value (column 'b')");
    ck_assert_ptr_null(m);
    ck_assert_ptr_null(index);

    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_DROP, &m, &index, &err));
    ck_assert_uint_eq(m->size1, 1);
    ck_assert(gsl_matrix_get(m, 0, 0) == 3.0);
    ck_assert(gsl_matrix_get(m, 0, 1) == 4.0);
    ck_assert_uint_eq(index[0], 1);
    gsl_matrix_free(m);
    free(index);

    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_KEEP, &m, &index, &err));
    ck_assert_uint_eq(m->size1, 5);
    ck_assert(isnan(gsl_matrix_get(m, 0, 1)));
    ck_assert(isnan(gsl_matrix_get(m, 2, 0)));
    ck_assert(isnan(gsl_matrix_get(m, 3, 0)));
    ck_assert(isnan(gsl_matrix_get(m, 4, 1)));
    ck_assert(gsl_matrix_get(m, 4, 0) == 8.0);
    ck_assert(gsl_matrix_get(m, 1, 1) == 4.0);
    ck_assert_uint_eq(index[4], 4);
    gsl_matrix_free(m);
    free(index);

    /* dropping only on the selected columns */
    const size_t c0 = 0;
    lse_assert_ok(
        lse_table_to_matrix(t, &c0, 1, LSE_MISSING_DROP, &m, NULL, &err));
    ck_assert_uint_eq(m->size1, 3);
    gsl_matrix_free(m);
    lse_table_free(t);

    /* every row dropped */
    lse_assert_ok(read_text("a,b\n1,NA\n,2\n", NULL, &t, &err));
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_DROP, &m, NULL, &err),
        LSE_EPARSE);
    assert_msg_has(err, "no rows left");
    lse_table_free(t);
}
END_TEST

START_TEST(test_to_matrix_infinite)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    lse_assert_ok(read_text("a,b\n1,2\n-Inf,3\n", NULL, &t, &err));
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_KEEP, &m, NULL, &err),
        LSE_ENONFINITE);
    assert_msg_has(err, "in.csv:3:1: '-Inf' is not finite");
    lse_table_free(t);
    lse_assert_ok(read_text("a\n1e999\n", NULL, &t, &err));
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_KEEP, &m, NULL, &err),
        LSE_ENONFINITE);
    assert_msg_has(err, "in.csv:2:1: '1e999'");
    lse_table_free(t);
}
END_TEST

START_TEST(test_to_matrix_bad_arguments)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *m = NULL;
    lse_assert_ok(read_text("a,b\n1,2\n", NULL, &t, &err));
    const size_t bad[1] = {2};
    lse_assert_status(
        lse_table_to_matrix(t, bad, 1, LSE_MISSING_ERROR, &m, NULL, &err),
        LSE_ERANGE);
    lse_assert_status(
        lse_table_to_matrix(t, bad, 0, LSE_MISSING_ERROR, &m, NULL, &err),
        LSE_EINVAL);
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, (lse_missing)7, &m, NULL, &err),
        LSE_EINVAL);
    lse_assert_status(
        lse_table_to_matrix(NULL, NULL, 0, LSE_MISSING_ERROR, &m, NULL, &err),
        LSE_EFAULT);
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, NULL, NULL, &err),
        LSE_EFAULT);
    lse_table_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

START_TEST(test_write_read_round_trip)
{
    const double values[] = {0.1,     1e-300,  -2.5e17,  -0.0,
                             1.0 / 3, DBL_MAX, -DBL_MIN, 4.9e-324,
                             2.385,   -0.4127, 1e22,     123456789.123456789};
    const size_t n = sizeof values / sizeof values[0];
    gsl_matrix *m = gsl_matrix_alloc(n / 3, 3);
    for (size_t k = 0; k < n; k++)
        gsl_matrix_set(m, k / 3, k % 3, values[k]);
    const char *names[3] = {"x y", "a,\"b\"", "#c"};
    char path[256];
    path_of("out.csv", path, sizeof path);
    lse_error err;
    lse_assert_ok(lse_matrix_write_csv(path, m, names, 0, &err));
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1); /* no temporary file left */

    lse_table *t = NULL;
    gsl_matrix *back = NULL;
    lse_assert_ok(lse_table_read(path, NULL, &t, &err));
    ck_assert_int_eq(lse_table_has_header(t), 1);
    for (size_t j = 0; j < 3; j++)
        ck_assert_str_eq(lse_table_column_name(t, j), names[j]);
    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &back, NULL, &err));
    ck_assert_uint_eq(back->size1, m->size1);
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(same_bits(gsl_matrix_get(back, k / 3, k % 3), values[k]),
                      "value %zu: wrote %.17g, read %.17g", k, values[k],
                      gsl_matrix_get(back, k / 3, k % 3));
    gsl_matrix_free(back);
    lse_table_free(t);

    /* overwrite the same file without a header: still atomic */
    lse_assert_ok(lse_matrix_write_csv(path, m, NULL, 0, &err));
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1);
    lse_assert_ok(lse_table_read(path, NULL, &t, &err));
    ck_assert_int_eq(lse_table_has_header(t), 0);
    ck_assert_uint_eq(lse_table_rows(t), m->size1);
    lse_table_free(t);
    gsl_matrix_free(m);
}
END_TEST

START_TEST(test_format_csv)
{
    gsl_matrix *m = gsl_matrix_alloc(2, 2);
    gsl_matrix_set(m, 0, 0, 1.0 / 3);
    gsl_matrix_set(m, 0, 1, NAN);
    gsl_matrix_set(m, 1, 0, INFINITY);
    gsl_matrix_set(m, 1, 1, -INFINITY);
    const char *names[2] = {"p", ""};
    char *text = NULL;
    size_t len = 0;
    lse_error err;
    lse_assert_ok(lse_matrix_format_csv(m, names, 3, &text, &len, &err));
    ck_assert_str_eq(text, "p,\"\"\n0.333,NaN\nInf,-Inf\n");
    ck_assert_uint_eq(len, strlen(text));
    free(text);
    lse_assert_status(lse_matrix_format_csv(m, names, 18, &text, &len, &err),
                      LSE_EINVAL);
    lse_assert_status(lse_matrix_format_csv(m, names, -1, &text, &len, &err),
                      LSE_EINVAL);
    const char *bad[2] = {"p", NULL};
    lse_assert_status(lse_matrix_format_csv(m, bad, 0, &text, &len, &err),
                      LSE_EFAULT);
    lse_assert_status(lse_matrix_format_csv(NULL, names, 0, &text, &len, &err),
                      LSE_EFAULT);
    gsl_matrix_free(m);
}
END_TEST

START_TEST(test_write_errors)
{
    gsl_matrix *m = gsl_matrix_alloc(1, 1);
    gsl_matrix_set(m, 0, 0, 2.0);
    char path[256];
    path_of("no/such/dir/out.csv", path, sizeof path);
    lse_error err;
    lse_assert_status(lse_matrix_write_csv(path, m, NULL, 0, &err), LSE_EIO);
    assert_msg_has(err, "cannot write");
    assert_msg_has(err, "No such file");
    lse_assert_status(lse_matrix_write_csv(NULL, m, NULL, 0, &err), LSE_EFAULT);

    /* a directory is refused before anything is written: no temporary
     * file, the directory is untouched */
    path_of("target", path, sizeof path);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    lse_assert_status(lse_file_write_atomic(path, "x", 1, &err), LSE_EIO);
    assert_msg_has(err, "is a directory");
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1);
    gsl_matrix_free(m);
}
END_TEST

START_TEST(test_file_read_write)
{
    char path[256];
    path_of("blob.bin", path, sizeof path);
    const char data[] = "abc\0def";
    lse_error err;
    const mode_t old = umask(022);
    lse_assert_ok(lse_file_write_atomic(path, data, sizeof data - 1, &err));
    umask(old);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq((int)(sb.st_mode & 0777), 0644); /* umask respected */
    char *back = NULL;
    size_t len = 0;
    lse_assert_ok(lse_file_read(path, &back, &len, &err));
    ck_assert_uint_eq(len, sizeof data - 1);
    ck_assert_int_eq(memcmp(back, data, len), 0);
    ck_assert_int_eq(back[len], '\0');
    free(back);
    /* empty file */
    lse_assert_ok(lse_file_write_atomic(path, NULL, 0, &err));
    lse_assert_ok(lse_file_read(path, &back, &len, &err));
    ck_assert_uint_eq(len, 0);
    free(back);
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1);
    lse_assert_status(lse_file_read(path, NULL, &len, &err), LSE_EFAULT);
    lse_assert_status(lse_file_write_atomic(path, NULL, 3, &err), LSE_EFAULT);
}
END_TEST

/* A locale whose decimal separator is a comma, built with localedef when
 * the system has none; 0 when that is impossible here. */
static int comma_locale(void)
{
    if (setlocale(LC_NUMERIC, "de_DE.UTF-8") != NULL)
        return 1;
    char locdir[256], cmd[700];
    snprintf(locdir, sizeof locdir, "%s/locales", dir);
    if (mkdir(locdir, 0755) != 0)
        return 0;
    snprintf(cmd, sizeof cmd,
             "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1",
             locdir);
    if (system(cmd) != 0)
        return 0;
    setenv("LOCPATH", locdir, 1);
    return setlocale(LC_NUMERIC, "de_DE.UTF-8") != NULL;
}

START_TEST(test_numbers_ignore_locale)
{
    if (!comma_locale()) {
        fprintf(stderr, "# test_numbers_ignore_locale: no de_DE locale, "
                        "skipped\n");
        return;
    }
    char probe[16];
    snprintf(probe, sizeof probe, "%.1f", 1.5);
    const int is_comma = strcmp(probe, "1,5") == 0;
    gsl_matrix *m = gsl_matrix_alloc(1, 2);
    gsl_matrix_set(m, 0, 0, 1.5);
    gsl_matrix_set(m, 0, 1, -0.25);
    char *text = NULL;
    lse_error err;
    const lse_status st = lse_matrix_format_csv(m, NULL, 0, &text, NULL, &err);
    lse_table *t = NULL;
    gsl_matrix *back = NULL;
    lse_status st2 = LSE_EINTERNAL;
    if (st == LSE_OK)
        st2 = lse_table_parse(text, strlen(text), NULL, NULL, &t, &err);
    if (st2 == LSE_OK)
        st2 = lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &back, NULL,
                                  &err);
    setlocale(LC_NUMERIC, "C");
    unsetenv("LOCPATH");
    ck_assert_msg(is_comma, "the de_DE locale does not use a comma");
    lse_assert_ok(st);
    lse_assert_ok(st2);
    ck_assert_str_eq(text, "1.5,-0.25\n");
    ck_assert(gsl_matrix_get(back, 0, 0) == 1.5);
    ck_assert(gsl_matrix_get(back, 0, 1) == -0.25);
    free(text);
    gsl_matrix_free(back);
    gsl_matrix_free(m);
    lse_table_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bundled data                                                        */
/* ------------------------------------------------------------------ */

START_TEST(test_faithful)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    lse_assert_ok(lse_table_read(LSE_DATA_DIR "/faithful.csv", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 272);
    ck_assert_uint_eq(lse_table_cols(t), 2);
    ck_assert_str_eq(lse_table_column_name(t, 0), "eruptions");
    ck_assert_str_eq(lse_table_column_name(t, 1), "waiting");
    lse_assert_ok(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &x, NULL, &err));
    ck_assert_uint_eq(x->size1, 272);
    ck_assert(gsl_matrix_get(x, 0, 0) == 3.6);
    ck_assert(gsl_matrix_get(x, 0, 1) == 79.0);
    ck_assert(gsl_matrix_get(x, 271, 0) == 4.467);
    ck_assert(gsl_matrix_get(x, 271, 1) == 74.0);
    ck_assert_uint_eq(lse_table_line(t, 271), 273);
    gsl_matrix_free(x);
    lse_table_free(t);
}
END_TEST

START_TEST(test_iris)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *x = NULL;
    lse_assert_ok(lse_table_read(LSE_DATA_DIR "/iris.csv", NULL, &t, &err));
    ck_assert_uint_eq(lse_table_rows(t), 150);
    ck_assert_uint_eq(lse_table_cols(t), 5);
    size_t species = 0;
    lse_assert_ok(lse_table_find_column(t, "species", &species, &err));
    ck_assert_uint_eq(species, 4);
    ck_assert_str_eq(lse_table_cell(t, 149, species), "virginica");
    lse_assert_status(
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &x, NULL, &err),
        LSE_EPARSE);
    assert_msg_has(err, "iris.csv:2:5: 'setosa' is not a number");
    const size_t cols[4] = {0, 1, 2, 3};
    lse_assert_ok(
        lse_table_to_matrix(t, cols, 4, LSE_MISSING_ERROR, &x, NULL, &err));
    ck_assert_uint_eq(x->size1, 150);
    ck_assert_uint_eq(x->size2, 4);
    ck_assert(gsl_matrix_get(x, 0, 0) == 5.1);
    ck_assert(gsl_matrix_get(x, 149, 3) == 1.8);
    gsl_matrix_free(x);
    lse_table_free(t);
}
END_TEST

START_TEST(test_other_data_sets)
{
    static const struct {
        const char *file;
        size_t rows, cols;
    } sets[] = {{"digits.csv", 1797, 65},
                {"gdp_growth.csv", 202, 4},
                {"dax_returns.csv", 1859, 4}};
    for (size_t k = 0; k < 3; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", LSE_DATA_DIR, sets[k].file);
        lse_error err;
        lse_table *t = NULL;
        lse_assert_ok(lse_table_read(path, NULL, &t, &err));
        ck_assert_uint_eq(lse_table_rows(t), sets[k].rows);
        ck_assert_uint_eq(lse_table_cols(t), sets[k].cols);
        ck_assert_int_eq(lse_table_has_header(t), 1);
        lse_table_free(t);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Output sets (lib/outputs.c)                                         */

static void put(const char *name, const char *text)
{
    write_bytes(name, text, strlen(text));
}

static void assert_file(const char *name, const char *want)
{
    char path[256];
    path_of(name, path, sizeof path);
    char *text = NULL;
    size_t len = 0;
    lse_error err;
    lse_assert_ok(lse_file_read(path, &text, &len, &err));
    ck_assert_str_eq(text, want);
    free(text);
}

/* Entries of dir whose name holds ".tmp." */
static size_t count_tmp(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

START_TEST(test_path_same)
{
    char a[256], b[256], l[256], h[256], sub[256], p[300], q[300];
    path_of("a.csv", a, sizeof a);
    path_of("b.csv", b, sizeof b);
    path_of("link.csv", l, sizeof l);
    path_of("hard.csv", h, sizeof h);
    path_of("sub", sub, sizeof sub);
    put("a.csv", "1\n");
    put("b.csv", "1\n"); /* same bytes, another file */
    ck_assert_int_eq(symlink("a.csv", l), 0);
    ck_assert_int_eq(link(a, h), 0);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    ck_assert_int_eq(lse_path_same(a, a), 1);
    ck_assert_int_eq(lse_path_same(a, b), 0);
    ck_assert_int_eq(lse_path_same(a, l), 1); /* through the link */
    ck_assert_int_eq(lse_path_same(h, a), 1); /* same inode */
    snprintf(p, sizeof p, "%s/sub/../a.csv", dir);
    ck_assert_int_eq(lse_path_same(p, a), 1);
    /* files not yet made: the same canonical path */
    snprintf(p, sizeof p, "%s/new.csv", dir);
    snprintf(q, sizeof q, "%s/./sub/../new.csv", dir);
    ck_assert_int_eq(lse_path_same(p, q), 1);
    snprintf(q, sizeof q, "%s/sub/new.csv", dir);
    ck_assert_int_eq(lse_path_same(p, q), 0);
    ck_assert_int_eq(lse_path_same(p, a), 0); /* one exists, one not */
    ck_assert_int_eq(lse_path_same("-", "-"), 0);
    ck_assert_int_eq(lse_path_same(a, NULL), 0);
}
END_TEST

/* An output that is an input, or another output, is refused when it is
 * declared; devices and "-" are exempt. */
START_TEST(test_outputs_clash)
{
    char a[256], b[256], l[256];
    path_of("a.csv", a, sizeof a);
    path_of("b.json", b, sizeof b);
    path_of("link.csv", l, sizeof l);
    put("a.csv", "data\n");
    ck_assert_int_eq(symlink("a.csv", l), 0);
    lse_error err;
    lse_outputs *o = NULL;
    lse_assert_ok(lse_outputs_new(&o, &err));
    lse_assert_ok(lse_outputs_input(o, a, "the data", &err));
    lse_assert_ok(lse_outputs_input(o, "-", "the data", &err));
    lse_assert_status(lse_outputs_add(o, l, "--labels", &err), LSE_EINVAL);
    assert_msg_has(err, "--labels '");
    assert_msg_has(err, "is the same file as the data '");
    assert_msg_has(err, "choose another output file");
    lse_assert_ok(lse_outputs_add(o, b, "-o", &err));
    lse_assert_status(lse_outputs_add(o, b, "--proba", &err), LSE_EINVAL);
    assert_msg_has(err, "--proba '");
    assert_msg_has(err, "is the same file as -o '");
    /* an input declared after the output clashes as well */
    lse_assert_status(lse_outputs_input(o, b, "--init", &err), LSE_EINVAL);
    assert_msg_has(err, "-o '");
    lse_assert_ok(lse_outputs_add(o, "/dev/null", "--labels", &err));
    lse_assert_ok(lse_outputs_add(o, "/dev/null", "--proba", &err));
    lse_assert_ok(lse_outputs_add(o, "-", "-o", &err));
    lse_assert_ok(lse_outputs_add(o, "-", "--proba", &err));
    /* refused declarations left nothing behind: -o and /dev/null commit */
    lse_assert_ok(lse_outputs_write(o, b, "{}\n", 3, &err));
    lse_assert_ok(lse_outputs_write(o, "/dev/null", "x", 1, &err));
    lse_assert_ok(lse_outputs_commit(o, &err));
    lse_outputs_free(o);
    assert_file("a.csv", "data\n");
    assert_file("b.json", "{}\n");
    lse_assert_status(lse_outputs_new(NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_outputs_add(NULL, a, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_outputs_input(NULL, a, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_outputs_write(NULL, a, "", 0, &err), LSE_EFAULT);
    lse_assert_status(lse_outputs_commit(NULL, &err), LSE_EFAULT);
    lse_outputs_free(NULL);
    lse_outputs_discard(NULL);
}
END_TEST

/* Nothing is replaced before the commit; a discard leaves every old file;
 * a commit replaces them all; a failed rename undoes the ones before. */
START_TEST(test_outputs_all_or_none)
{
    char a[256], b[256], c[256];
    path_of("a.txt", a, sizeof a);
    path_of("b.txt", b, sizeof b);
    path_of("c.txt", c, sizeof c);
    put("a.txt", "old a");
    put("b.txt", "old b");
    lse_error err;
    lse_outputs *o = NULL;
    lse_assert_ok(lse_outputs_new(&o, &err));
    lse_assert_ok(lse_outputs_add(o, a, "-o", &err));
    lse_assert_ok(lse_outputs_write(o, a, "new a", 5, &err));
    lse_assert_ok(lse_outputs_write(o, b, "new b", 5, &err));
    lse_assert_ok(lse_outputs_write(o, c, "new c", 5, &err));
    ck_assert_uint_eq(lse_outputs_pending(o), 3);
    ck_assert_uint_eq(count_tmp(), 3);
    assert_file("a.txt", "old a");
    assert_file("b.txt", "old b");
    lse_outputs_discard(o);
    ck_assert_uint_eq(lse_outputs_pending(o), 0);
    ck_assert_uint_eq(count_tmp(), 0);
    lse_assert_status(lse_outputs_commit(o, &err), LSE_EINVAL);
    lse_outputs_free(o);
    assert_file("a.txt", "old a");
    assert_file("b.txt", "old b");
    struct stat sb;
    ck_assert_int_ne(stat(c, &sb), 0);

    lse_assert_ok(lse_outputs_new(&o, &err));
    lse_assert_ok(lse_outputs_write(o, a, "new a", 5, &err));
    lse_assert_ok(lse_outputs_write(o, b, "new b", 5, &err));
    lse_assert_ok(lse_outputs_commit(o, &err));
    lse_assert_status(lse_outputs_write(o, c, "x", 1, &err), LSE_EINVAL);
    lse_outputs_free(o);
    assert_file("a.txt", "new a");
    assert_file("b.txt", "new b");

    /* the third rename fails (a directory appeared where c.txt goes): the
     * first two are undone: a.txt is the old file again, the new d.txt is
     * removed */
    char d[256];
    path_of("d.txt", d, sizeof d);
    lse_assert_ok(lse_outputs_new(&o, &err));
    lse_assert_ok(lse_outputs_write(o, a, "newer a", 7, &err));
    lse_assert_ok(lse_outputs_write(o, d, "new d", 5, &err));
    lse_assert_ok(lse_outputs_write(o, c, "new c", 5, &err));
    ck_assert_int_eq(mkdir(c, 0755), 0);
    lse_assert_status(lse_outputs_commit(o, &err), LSE_EIO);
    assert_msg_has(err, "cannot rename");
    assert_msg_has(err, "no output was replaced");
    lse_outputs_free(o);
    assert_file("a.txt", "new a");
    ck_assert_int_ne(stat(d, &sb), 0);
    ck_assert_uint_eq(count_tmp(), 0);
}
END_TEST

/* What a signal handler calls: every pending temporary file goes, the
 * targets stay, and a later commit of that set fails without harm. */
START_TEST(test_discard_temporaries)
{
    char a[256], b[256];
    path_of("a.txt", a, sizeof a);
    path_of("b.txt", b, sizeof b);
    put("a.txt", "old a");
    lse_error err;
    lse_outputs *o = NULL, *o2 = NULL;
    lse_assert_ok(lse_outputs_new(&o, &err));
    lse_assert_ok(lse_outputs_new(&o2, &err));
    lse_assert_ok(lse_outputs_write(o, a, "new a", 5, &err));
    lse_assert_ok(lse_outputs_write(o2, b, "new b", 5, &err));
    ck_assert_uint_eq(count_tmp(), 2);
    ck_assert_int_eq(lse_file_discard_temporaries(), 1);
    ck_assert_uint_eq(count_tmp(), 0);
    lse_assert_status(lse_outputs_commit(o, &err), LSE_EIO);
    lse_outputs_free(o);
    lse_outputs_free(o2);
    assert_file("a.txt", "old a");
    struct stat sb;
    ck_assert_int_ne(stat(b, &sb), 0);
    /* the table is usable again */
    lse_assert_ok(lse_file_write_atomic(b, "b", 1, &err));
    assert_file("b.txt", "b");
    ck_assert_int_eq(lse_file_discard_temporaries(), 1);
    assert_file("b.txt", "b");
}
END_TEST

/* A read-only file is not replaced; a replaced file keeps its mode. */
START_TEST(test_outputs_modes)
{
    char a[256];
    path_of("a.txt", a, sizeof a);
    put("a.txt", "old");
    ck_assert_int_eq(chmod(a, 0444), 0);
    lse_error err;
    lse_assert_status(lse_file_write_atomic(a, "new", 3, &err), LSE_EIO);
    assert_msg_has(err, "is read-only");
    assert_msg_has(err, "chmod u+w");
    assert_file("a.txt", "old");
    lse_outputs *o = NULL;
    lse_assert_ok(lse_outputs_new(&o, &err));
    lse_assert_status(lse_outputs_add(o, a, "-o", &err), LSE_EIO);
    assert_msg_has(err, "-o '");
    lse_outputs_free(o);
    const mode_t modes[3] = {0600, 0640, 0755};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(chmod(a, modes[i]), 0);
        lse_assert_ok(lse_file_write_atomic(a, "new", 3, &err));
        struct stat sb;
        ck_assert_int_eq(stat(a, &sb), 0);
        ck_assert_int_eq((int)(sb.st_mode & 07777), (int)modes[i]);
    }
    assert_file("a.txt", "new");
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("io");
    TCase *read = tcase_create("read");
    tcase_add_checked_fixture(read, setup, teardown);
    tcase_add_test(read, test_header_auto_comma);
    tcase_add_test(read, test_no_header_auto);
    tcase_add_test(read, test_header_forced);
    tcase_add_test(read, test_delimiters);
    tcase_add_test(read, test_line_ends);
    tcase_add_test(read, test_quoted_fields);
    tcase_add_test(read, test_comments_and_blank_lines);
    tcase_add_test(read, test_bom);
    tcase_add_test(read, test_parse_from_memory);
    suite_add_tcase(s, read);

    TCase *errors = tcase_create("errors");
    tcase_add_checked_fixture(errors, setup, teardown);
    tcase_add_test(errors, test_missing_file);
    tcase_add_test(errors, test_no_data_rows);
    tcase_add_test(errors, test_ragged_rows);
    tcase_add_test(errors, test_malformed_quoting);
    tcase_add_test(errors, test_nul_byte);
    tcase_add_test(errors, test_nul_byte_early);
    tcase_add_test(errors, test_input_limit);
    tcase_add_test(errors, test_duplicate_names);
    tcase_add_test(read, test_whitespace);
    tcase_add_test(errors, test_bad_arguments);
    tcase_add_test(errors, test_find_column);
    suite_add_tcase(s, errors);

    TCase *matrix = tcase_create("to_matrix");
    tcase_add_checked_fixture(matrix, setup, teardown);
    tcase_add_test(matrix, test_to_matrix_numbers);
    tcase_add_test(matrix, test_to_matrix_not_a_number);
    tcase_add_test(matrix, test_to_matrix_missing);
    tcase_add_test(matrix, test_to_matrix_infinite);
    tcase_add_test(matrix, test_to_matrix_bad_arguments);
    suite_add_tcase(s, matrix);

    TCase *write = tcase_create("write");
    tcase_add_checked_fixture(write, setup, teardown);
    tcase_add_test(write, test_write_read_round_trip);
    tcase_add_test(write, test_format_csv);
    tcase_add_test(write, test_write_errors);
    tcase_add_test(write, test_file_read_write);
    tcase_add_test(write, test_numbers_ignore_locale);
    tcase_set_timeout(write, 60); /* localedef may take a few seconds */
    suite_add_tcase(s, write);

    TCase *data = tcase_create("data");
    tcase_add_test(data, test_faithful);
    tcase_add_test(data, test_iris);
    tcase_add_test(data, test_other_data_sets);
    suite_add_tcase(s, data);

    TCase *outputs = tcase_create("outputs");
    tcase_add_checked_fixture(outputs, setup, teardown);
    tcase_add_test(outputs, test_path_same);
    tcase_add_test(outputs, test_outputs_clash);
    tcase_add_test(outputs, test_outputs_all_or_none);
    tcase_add_test(outputs, test_discard_temporaries);
    tcase_add_test(outputs, test_outputs_modes);
    tcase_add_test(outputs, test_names_find_repeat);
    suite_add_tcase(s, outputs);
    return s;
}
