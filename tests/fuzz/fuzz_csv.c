/* libFuzzer harness for the CSV reader (lib/io.c and libcsv).
 *
 * The first input byte picks the options, the rest is the file, written to
 * a memfd and read back through lse_table_read(). Besides crashes, leaks
 * and undefined behaviour (the sanitizers), it checks two properties and
 * traps when one fails:
 *  - every accessor agrees with the table's shape;
 *  - a table that converts to numbers survives lse_matrix_format_csv() and
 *    lse_table_parse() bit-exact, names included. */
#define _GNU_SOURCE /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <lsegraph/lsegraph.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(cond)                                                          \
    do {                                                                       \
        if (!(cond))                                                           \
            __builtin_trap();                                                  \
    } while (0)

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static lse_csv_opts options_from(uint8_t b)
{
    static const char delims[4] = {0, ',', ';', '\t'};
    static const char comments[4] = {'#', 0, '%', '#'};
    lse_csv_opts o = lse_csv_opts_default();
    o.delimiter = delims[b & 3];
    if ((b & 3) == 3 && (b & 0x40)) /* white space instead of tab */
        o.delimiter = ' ';
    o.header = (int)((b >> 2) % 3) - 1;
    o.comment = comments[(b >> 4) & 3];
    return o;
}

static void check_shape(const lse_table *t)
{
    const size_t rows = lse_table_rows(t), cols = lse_table_cols(t);
    require(rows > 0 && cols > 0);
    size_t last = 0;
    for (size_t i = 0; i < rows; i++) {
        const size_t line = lse_table_line(t, i);
        require(line > last);
        last = line;
        for (size_t j = 0; j < cols; j++)
            require(lse_table_cell(t, i, j) != NULL);
    }
    require(lse_table_cell(t, rows, 0) == NULL);
    require(lse_table_line(t, rows) == 0);
    for (size_t j = 0; j < cols; j++)
        require(lse_table_column_name(t, j) != NULL);
    size_t j = cols;
    lse_error err;
    require(lse_table_find_column(t, lse_table_column_name(t, 0), &j, &err) ==
            LSE_OK);
    require(j == 0);
}

/* format -> parse -> to_matrix gives back m and the names bit-exact. */
static void check_round_trip(const lse_table *t, const gsl_matrix *m)
{
    const size_t cols = lse_table_cols(t);
    const char **names = malloc(cols * sizeof *names);
    require(names != NULL);
    for (size_t j = 0; j < cols; j++)
        names[j] = lse_table_column_name(t, j);
    char *text = NULL;
    size_t len = 0;
    lse_error err;
    require(lse_matrix_format_csv(m, names, 0, &text, &len, &err) == LSE_OK);
    lse_csv_opts o = lse_csv_opts_default();
    o.delimiter = ',';
    o.header = 1;
    lse_table *back = NULL;
    gsl_matrix *mb = NULL;
    require(lse_table_parse(text, len, "round-trip", &o, &back, &err) ==
            LSE_OK);
    require(lse_table_cols(back) == cols);
    for (size_t j = 0; j < cols; j++)
        require(strcmp(lse_table_column_name(back, j), names[j]) == 0);
    require(lse_table_to_matrix(back, NULL, 0, LSE_MISSING_KEEP, &mb, NULL,
                                &err) == LSE_OK);
    require(mb->size1 == m->size1 && mb->size2 == m->size2);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            require(
                same_bits(gsl_matrix_get(mb, i, j), gsl_matrix_get(m, i, j)));
    gsl_matrix_free(mb);
    lse_table_free(back);
    free(text);
    free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_csv", 0);
        require(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (size == 0)
        return 0;
    const lse_csv_opts o = options_from(data[0]);
    require(ftruncate(fd, 0) == 0);
    require(pwrite(fd, data + 1, size - 1, 0) == (ssize_t)(size - 1));

    lse_error err = {0};
    lse_table *t = NULL;
    const lse_status st = lse_table_read(path, &o, &t, &err);
    if (st != LSE_OK) {
        require(t == NULL && err.status == st && err.message[0] != '\0');
        return 0;
    }
    check_shape(t);
    for (int policy = 0; policy < 3; policy++) {
        gsl_matrix *m = NULL;
        size_t *index = NULL;
        const lse_status sm = lse_table_to_matrix(
            t, NULL, 0, (lse_missing)policy, &m, &index, &err);
        if (sm != LSE_OK) {
            require(m == NULL && index == NULL);
            continue;
        }
        for (size_t r = 1; r < m->size1; r++)
            require(index[r] > index[r - 1]);
        if (policy == LSE_MISSING_KEEP)
            check_round_trip(t, m);
        gsl_matrix_free(m);
        free(index);
    }
    lse_table_free(t);
    return 0;
}
