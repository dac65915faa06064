#define _XOPEN_SOURCE 700 /* realpath */
#define _DEFAULT_SOURCE    /* madvise's MADV_HUGEPAGE (Linux) */
/* Files and CSV tables: reading whole files, atomic writes, CSV text to a
 * table of strings (lines with quotes parsed by libcsv, the others split
 * here: docs/design-notes.md), tables to matrices and matrices to
 * CSV text. The dialect and every message are described in docs/io.md. */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <csv.h>

#if defined(__SSE2__)
#include <emmintrin.h> /* part of every x86-64 */
#endif

#include "graph-private.h"
#include "numparse-private.h"
#include "size-private.h"

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

/* The text of errno value e, thread-safe (XSI strerror_r). */
static void errno_text(int e, char *buf, size_t size)
{
    if (strerror_r(e, buf, size) != 0)
        snprintf(buf, size, "error %d", e);
}

/* Ask Linux to back the 2 MB-aligned part of the large buffer [p, p + n)
 * with 2 MB pages. Where transparent huge pages are given only on request
 * ("madvise", the default of many distributions) reading a 38 MB CSV file
 * otherwise takes some 30 000 page faults for the text, the table's copy,
 * its cell offsets and the matrix: a third of the time (docs/io.md
 * "Speed"). Advice only: nothing else changes, and nothing when refused
 * or elsewhere. Buffers under 8 MB are left alone (little to gain, and a
 * 2 MB page may hold memory a small buffer never touches). */
static void advise_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (p == NULL || n < 4 * huge)
        return;
    const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    const uintptr_t b = ((uintptr_t)p + n) & ~(huge - 1);
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* Grow the array p of elements of `size` bytes so it holds `need`; returns
 * the (possibly moved) array, or NULL when out of memory (p stays valid). */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap && p != NULL)
        return p;
    size_t c = *cap > 0 ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (c > SIZE_MAX / size)
        return NULL;
    void *q = realloc(p, c * size);
    if (q == NULL)
        return NULL;
    *cap = c;
    return q;
}

/* Numbers are read and written in the C locale whatever the program set
 * with setlocale(), so "3.6" never becomes "3,6" (POSIX uselocale is
 * per-thread, unlike setlocale). */
typedef struct c_locale {
    locale_t c;   /* the "C" locale object */
    locale_t old; /* the thread's locale before */
} c_locale;

static int c_locale_enter(c_locale *s)
{
    s->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (s->c == (locale_t)0)
        return -1;
    s->old = uselocale(s->c);
    return 0;
}

static void c_locale_leave(const c_locale *s)
{
    uselocale(s->old);
    freelocale(s->c);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
}

static char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive ASCII comparison of s[0..n) with the lowercase word. */
static int equals_word(const char *s, size_t n, const char *word)
{
    if (strlen(word) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(s[i]) != word[i])
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

lse_status lse_file_read(const char *path, char **data, size_t *len,
                         lse_error *err)
{
    if (path == NULL || data == NULL || len == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "path, data and len must not be NULL");
    *data = NULL;
    *len = 0;
    const int from_stdin = strcmp(path, "-") == 0;
    const char *shown = from_stdin ? "<stdin>" : path;
    char why[128];
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (f == NULL) {
        errno_text(errno, why, sizeof why);
        return lse_error_set(err, LSE_EIO, __func__, "cannot open '%s': %s",
                             shown, why);
    }
    lse_status status = LSE_OK;
    size_t cap = 0, n = 0;
    char *buf = NULL;
    for (;;) {
        char *bigger = grow(buf, &cap, n + 4097, 1);
        if (bigger == NULL) {
            status = lse_error_set(err, LSE_ENOMEM, __func__,
                                   "out of memory reading '%s'", shown);
            goto done;
        }
        buf = bigger;
        const size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        errno_text(errno, why, sizeof why);
        status = lse_error_set(err, LSE_EIO, __func__, "cannot read '%s': %s",
                               shown, why);
        goto done;
    }
    buf[n] = '\0';
done:
    if (!from_stdin)
        fclose(f);
    if (status != LSE_OK) {
        free(buf);
        return status;
    }
    *data = buf;
    *len = n;
    return LSE_OK;
}

/* lse_file_write_atomic() is in lib/outputs.c, with the output sets. */

/* ------------------------------------------------------------------ */
/* Tables                                                              */
/* ------------------------------------------------------------------ */

struct lse_table {
    char *name;      /* file name for messages */
    char delimiter;  /* given or detected */
    int has_header;  /* first stored row is the header */
    size_t n_cols;   /* cells per row */
    size_t n_stored; /* stored rows, header included */
    char *text;      /* every cell, NUL-terminated, back to back */
    size_t text_len; /* bytes used in text */
    size_t text_cap; /* bytes allocated */
    size_t *cell;    /* (n_stored, n_cols) offsets into text */
    size_t n_cell;   /* entries used in cell */
    size_t cell_cap; /* entries allocated */
    size_t *line;    /* (n_stored) line where each row starts */
    size_t line_cap; /* entries allocated */
    size_t *names;   /* (n_cols) offsets of the column names */
};

lse_csv_opts lse_csv_opts_default(void)
{
    const lse_csv_opts opts = {.delimiter = 0,
                               .header = -1,
                               .comment = '#',
                               .max_bytes = LSE_CSV_MAX_BYTES};
    return opts;
}

void lse_table_free(lse_table *t)
{
    if (t == NULL)
        return;
    free(t->name);
    free(t->text);
    free(t->cell);
    free(t->line);
    free(t->names);
    free(t);
}

/* Append n bytes plus a NUL to the text arena; the offset goes to *off. */
static int append_text(lse_table *t, const char *s, size_t n, size_t *off)
{
    if (n > SIZE_MAX - 1 - t->text_len)
        return -1;
    char *text = grow(t->text, &t->text_cap, t->text_len + n + 1, 1);
    if (text == NULL)
        return -1;
    t->text = text;
    if (n > 0)
        memcpy(t->text + t->text_len, s, n);
    t->text[t->text_len + n] = '\0';
    *off = t->text_len;
    t->text_len += n + 1;
    return 0;
}

/* State shared with the libcsv callbacks, which cannot fail: the first
 * failure is kept in status and later callbacks do nothing. */
typedef struct parse_state {
    lse_table *t;
    lse_error *err;
    lse_status status;
    int open;         /* inside a row (libcsv is not between rows) */
    size_t row_start; /* line where the current row started */
    size_t fields;    /* fields seen in the current row */
} parse_state;

static void on_field(void *s, size_t len, void *data)
{
    parse_state *st = data;
    lse_table *t = st->t;
    if (st->status != LSE_OK)
        return;
    st->fields++;
    /* a ragged row is reported at its end; extra cells are not stored */
    if (t->n_stored > 0 && st->fields > t->n_cols)
        return;
    size_t off = 0;
    if (t->n_cell < t->cell_cap && len < t->text_cap - t->text_len) {
        /* room for both: the common case, without the checks of grow */
        memcpy(t->text + t->text_len, s, len);
        t->text[t->text_len + len] = '\0';
        t->cell[t->n_cell++] = t->text_len;
        t->text_len += len + 1;
        return;
    }
    size_t *cell = grow(t->cell, &t->cell_cap, t->n_cell + 1, sizeof *cell);
    if (cell == NULL || append_text(t, s, len, &off) != 0) {
        if (cell != NULL)
            t->cell = cell;
        st->status = lse_error_set(st->err, LSE_ENOMEM, "lse_table_parse",
                                   "%s: out of memory", t->name);
        return;
    }
    t->cell = cell;
    t->cell[t->n_cell++] = off;
}

static void on_row(int c, void *data)
{
    (void)c;
    parse_state *st = data;
    lse_table *t = st->t;
    if (st->status != LSE_OK)
        return;
    if (t->n_stored == 0) {
        t->n_cols = st->fields;
    } else if (st->fields != t->n_cols) {
        /* R's write.table(row.names = TRUE) leaves the row names' column
         * out of the header */
        const int row_names = t->n_stored == 1 && st->fields == t->n_cols + 1;
        st->status = lse_error_set(
            st->err, LSE_EPARSE, "lse_table_parse",
            "%s:%zu: %zu field%s, expected %zu (as on line %zu)%s", t->name,
            st->row_start, st->fields, st->fields == 1 ? "" : "s", t->n_cols,
            t->line[0],
            row_names ? "; if the first column holds row names, give it a "
                        "name in the header line too"
                      : "");
        return;
    }
    size_t *line = grow(t->line, &t->line_cap, t->n_stored + 1, sizeof *line);
    if (line == NULL) {
        st->status = lse_error_set(st->err, LSE_ENOMEM, "lse_table_parse",
                                   "%s: out of memory", t->name);
        return;
    }
    t->line = line;
    t->line[t->n_stored++] = st->row_start;
    st->fields = 0;
    st->open = 0;
}

/* Just past the line break at p (LF, CRLF or CR; p == end: end). */
static const char *past_break(const char *p, const char *end)
{
    if (p < end && *p == '\r') {
        p++;
        if (p < end && *p == '\n')
            p++;
    } else if (p < end) {
        p++; /* LF */
    }
    return p;
}

/* End of the physical line starting at p: just past LF, CRLF or CR. */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *cr = memchr(p, '\r', (size_t)((nl != NULL ? nl : end) - p));
    return past_break(cr != NULL ? cr : nl != NULL ? nl : end, end);
}

/* The first byte of [p, end) equal to a, b, c or d; end when none.
 * Inline, for the short stretches of a CSV line: a call of memchr per
 * field and per line (five or six a line) cost more than the search
 * (docs/io.md "Speed"). With SSE2, 16 bytes a step while 16 are left
 * (never reading past end), then byte by byte. */
static inline const char *find_any4(const char *p, const char *end, char a,
                                    char b, char c, char d)
{
#if defined(__SSE2__)
    const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b);
    const __m128i vc = _mm_set1_epi8(c), vd = _mm_set1_epi8(d);
    for (; end - p >= 16; p += 16) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        const __m128i hit = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(x, va), _mm_cmpeq_epi8(x, vb)),
            _mm_or_si128(_mm_cmpeq_epi8(x, vc), _mm_cmpeq_epi8(x, vd)));
        const unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m != 0)
            return p + __builtin_ctz(m);
    }
#endif
    for (; p < end; p++)
        if (*p == a || *p == b || *p == c || *p == d)
            return p;
    return end;
}

/* line_end for a line without a NUL byte or a quote, the common case,
 * found with one search: the end of the line starting at p, and
 * *plain = 1; else *plain = 0 and line_end's answer. */
static const char *line_end_plain(const char *p, const char *end, int *plain)
{
    const char *x = find_any4(p, end, '\n', '\r', '\0', '"');
    if (x < end && (*x == '\0' || *x == '"')) {
        *plain = 0;
        return line_end(p, end);
    }
    *plain = 1;
    return past_break(x, end);
}

/* A line libcsv would skip between rows: spaces, tabs (unless tab is the
 * delimiter) and line breaks only. */
static int is_blank_line(const char *p, size_t n, char delim)
{
    for (size_t i = 0; i < n; i++) {
        const char c = p[i];
        if (c == '\r' || c == '\n')
            continue;
        if ((c == ' ' || c == '\t') && c != delim)
            continue;
        return 0;
    }
    return 1;
}

/* Number of fields of the line [p, q) split at runs of spaces and tabs
 * outside double quotes. */
static size_t count_white_fields(const char *p, const char *q)
{
    size_t n = 0;
    int in_field = 0, quoted = 0;
    for (; p < q && *p != '\n' && *p != '\r'; p++) {
        if (*p == '"')
            quoted = !quoted;
        const int white = !quoted && (*p == ' ' || *p == '\t');
        if (!white && !in_field)
            n++;
        in_field = !white;
    }
    return n;
}

/* The delimiter among ',', ';', '\t' that occurs most often outside quotes
 * in the first line that is not blank or a comment. When that line has
 * none of them but every one of the first five such lines holds two or
 * more fields separated by spaces, ' ' (white space); else ',' (a
 * one-column file). */
static char detect_delimiter(const char *p, const char *end, char comment)
{
    static const char candidates[] = {',', ';', '\t'};
    int seen = 0, white = 1;
    while (p < end && seen < 5) {
        const char *next = line_end(p, end);
        if (is_blank_line(p, (size_t)(next - p), '\0') ||
            (comment != '\0' && *p == comment)) {
            p = next;
            continue;
        }
        if (seen == 0) {
            size_t count[3] = {0, 0, 0};
            int quoted = 0;
            for (const char *q = p; q < next; q++) {
                if (*q == '"')
                    quoted = !quoted;
                for (size_t k = 0; k < 3 && !quoted; k++)
                    if (*q == candidates[k])
                        count[k]++;
            }
            size_t best = 0;
            for (size_t k = 1; k < 3; k++)
                if (count[k] > count[best])
                    best = k;
            if (count[best] > 0)
                return candidates[best];
        }
        if (count_white_fields(p, next) < 2)
            white = 0;
        seen++;
        p = next;
    }
    return seen > 0 && white ? ' ' : ',';
}

typedef enum cell_kind {
    CELL_NUMBER,   /* a finite number */
    CELL_MISSING,  /* empty, NA, NaN */
    CELL_INFINITE, /* inf, or out of the range of double */
    CELL_TEXT      /* anything else */
} cell_kind;

/* Classify a cell; *value gets the number when there is one. Call in the
 * C locale. */
static cell_kind classify(const char *s, double *value)
{
    while (is_space(*s))
        s++;
    const char *e = s + strlen(s);
    while (e > s && is_space(e[-1]))
        e--;
    const size_t n = (size_t)(e - s);
    *value = NAN;
    if (n == 0 || equals_word(s, n, "na"))
        return CELL_MISSING;
    if (lse_parse_decimal(s, n, value)) /* strtod's value, faster */
        return CELL_NUMBER;
    char *stop = NULL;
    const double v = strtod(s, &stop);
    if (stop != e)
        return CELL_TEXT;
    if (isnan(v)) /* "nan", "-nan(0x1)": stored as the one NAN */
        return CELL_MISSING;
    *value = v;
    if (isinf(v))
        return CELL_INFINITE;
    return CELL_NUMBER; /* underflow to a subnormal or 0 is fine */
}

static const char *stored_cell(const lse_table *t, size_t row, size_t j)
{
    return t->text + t->cell[row * t->n_cols + j];
}

/* Decide whether the first stored row is a header (opts->header == -1). */
static lse_status detect_header(lse_table *t, lse_error *err)
{
    c_locale loc;
    if (c_locale_enter(&loc) != 0)
        return lse_error_set(err, LSE_ENOMEM, "lse_table_parse",
                             "out of memory (C locale)");
    t->has_header = 0;
    for (size_t j = 0; j < t->n_cols && !t->has_header; j++) {
        double v;
        t->has_header = classify(stored_cell(t, 0, j), &v) == CELL_TEXT;
    }
    c_locale_leave(&loc);
    return LSE_OK;
}

/* Column names: the header cells, or "1".."n" appended to the text. */
static lse_status make_names(lse_table *t, lse_error *err)
{
    t->names = calloc(t->n_cols, sizeof *t->names); /* checks the product */
    if (t->names == NULL)
        return lse_error_set(err, LSE_ENOMEM, "lse_table_parse",
                             "%s: out of memory", t->name);
    for (size_t j = 0; j < t->n_cols; j++) {
        if (t->has_header) {
            t->names[j] = t->cell[j];
            continue;
        }
        char num[32];
        const int n = snprintf(num, sizeof num, "%zu", j + 1);
        if (append_text(t, num, (size_t)n, &t->names[j]) != 0)
            return lse_error_set(err, LSE_ENOMEM, "lse_table_parse",
                                 "%s: out of memory", t->name);
    }
    return LSE_OK;
}

typedef struct named_column {
    const char *name;
    size_t j;
} named_column;

static int by_name(const void *a, const void *b)
{
    const named_column *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return (x->j > y->j) - (x->j < y->j);
}

lse_status lse_names_find_repeat(const char *const *names, size_t n,
                                 size_t *first, size_t *second, lse_error *err)
{
    *first = 0;
    *second = SIZE_MAX;
    if (n < 2)
        return LSE_OK;
    named_column *v = malloc(n * sizeof *v); /* n <= SIZE_MAX / sizeof *v:
                                                names already fill n slots */
    if (v == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    for (size_t j = 0; j < n; j++) {
        v[j].name = names[j];
        v[j].j = j;
    }
    qsort(v, n, sizeof *v, by_name);
    for (size_t k = 1; k < n; k++) {
        if (strcmp(v[k].name, v[k - 1].name) != 0 || v[k].j >= *second)
            continue;
        /* v[k - 1] is the previous entry of this name */
        *second = v[k].j;
        *first = v[k - 1].j;
    }
    free(v);
    return LSE_OK;
}

/* A header must name every column differently: a column is found by its
 * name, and two alike would silently give the first one. Reports the
 * repeat that comes first in the file (smallest second column). */
static lse_status check_unique_names(const lse_table *t, lse_error *err)
{
    if (!t->has_header || t->n_cols < 2)
        return LSE_OK;
    const char **names = malloc(t->n_cols * sizeof *names);
    if (names == NULL)
        return lse_error_set(err, LSE_ENOMEM, "lse_table_parse",
                             "%s: out of memory", t->name);
    for (size_t j = 0; j < t->n_cols; j++)
        names[j] = t->text + t->names[j];
    size_t first = 0, second = SIZE_MAX;
    const lse_status st =
        lse_names_find_repeat(names, t->n_cols, &first, &second, err);
    free(names);
    if (st != LSE_OK || second == SIZE_MAX)
        return st;
    const char *name = t->text + t->names[first];
    if (name[0] == '\0')
        return lse_error_set(err, LSE_EPARSE, "lse_table_parse",
                             "%s:%zu: columns %zu and %zu both have an empty "
                             "name in the header: give each column its own "
                             "name",
                             t->name, t->line[0], first + 1, second + 1);
    return lse_error_set(err, LSE_EPARSE, "lse_table_parse",
                         "%s:%zu: columns %zu and %zu are both named '%.60s': "
                         "columns are found by name, so rename one of them "
                         "in the header",
                         t->name, t->line[0], first + 1, second + 1, name);
}

static lse_status check_opts(const lse_csv_opts *o, lse_error *err)
{
    const char d = o->delimiter, c = o->comment;
    if (d == '"' || d == '\r' || d == '\n')
        return lse_error_set(err, LSE_EINVAL, "lse_table_parse",
                             "delimiter must not be a quote or line break");
    if (c == '"' || c == '\r' || c == '\n' || (c != '\0' && c == d))
        return lse_error_set(err, LSE_EINVAL, "lse_table_parse",
                             "comment character must not be a quote, a "
                             "line break or the delimiter");
    if (o->header < -1 || o->header > 1)
        return lse_error_set(err, LSE_EINVAL, "lse_table_parse",
                             "header must be -1 (auto), 0 or 1, not %d",
                             o->header);
    return LSE_OK;
}

/* One physical line [p, p + n) of a white-space separated file: fields
 * are separated by runs of spaces and tabs; a field may be quoted with '"'
 * (a quote inside doubled) but then must end on the same line. *scratch
 * (capacity *cap) holds an unquoted copy of each field. */
static void parse_white_line(parse_state *st, const char *p, size_t n,
                             size_t lineno, char **scratch, size_t *cap)
{
    lse_table *t = st->t;
    const char *q = p, *e = p + n;
    while (e > q && (e[-1] == '\n' || e[-1] == '\r'))
        e--;
    char *buf = grow(*scratch, cap, (size_t)(e - q) + 1, 1);
    if (buf == NULL) {
        st->status = lse_error_set(st->err, LSE_ENOMEM, "lse_table_parse",
                                   "%s: out of memory", t->name);
        return;
    }
    *scratch = buf;
    while (q < e && st->status == LSE_OK) {
        while (q < e && (*q == ' ' || *q == '\t'))
            q++;
        if (q == e)
            break;
        size_t len = 0;
        const char *bad = NULL;
        if (*q == '"') {
            const char *open = q;
            for (q++;; q++) {
                if (q == e) {
                    st->status = lse_error_set(
                        st->err, LSE_EPARSE, "lse_table_parse",
                        "%s:%zu:%zu: unterminated quoted field (in a white "
                        "space separated file a quoted field ends on its "
                        "line)",
                        t->name, lineno, (size_t)(open - p) + 1);
                    return;
                }
                if (*q == '"' && q + 1 < e && q[1] == '"') {
                    buf[len++] = '"';
                    q++;
                } else if (*q == '"') {
                    q++;
                    break;
                } else {
                    buf[len++] = *q;
                }
            }
            if (q < e && *q != ' ' && *q != '\t')
                bad = q;
        } else {
            for (; q < e && *q != ' ' && *q != '\t' && bad == NULL; q++) {
                if (*q == '"')
                    bad = q;
                buf[len++] = *q;
            }
        }
        if (bad != NULL) {
            st->status = lse_error_set(
                st->err, LSE_EPARSE, "lse_table_parse",
                "%s:%zu:%zu: malformed quoting (a quote must open a field, "
                "close it before white space or the line end, and be doubled "
                "inside it)",
                t->name, lineno, (size_t)(bad - p) + 1);
            return;
        }
        on_field(buf, len, st);
    }
    if (st->status == LSE_OK)
        on_row(0, st);
}

/* A line that starts a row and holds no quote, split by the library:
 * exactly what libcsv makes of it (fields between delimiters, spaces and
 * tabs around a field trimmed unless the tab is the delimiter, the row
 * ends at the line end), without its per-byte state machine and copies
 * (docs/io.md "Speed"). LSE_CSV_LIBCSV=1 in the environment turns it off
 * (the tests compare both). */
static void parse_plain_line(parse_state *st, const char *p, size_t n)
{
    const char delim = st->t->delimiter;
    const char *e = p + n;
    while (e > p && (e[-1] == '\n' || e[-1] == '\r'))
        e--;
    for (;;) {
        const char *q = p;
        const char *f = find_any4(p, e, delim, delim, delim, delim);
        const char *fe = f;
        while (q < fe && (*q == ' ' || *q == '\t') && *q != delim)
            q++;
        const char *r = fe;
        while (r > q && (r[-1] == ' ' || r[-1] == '\t') && r[-1] != delim)
            r--;
        on_field((void *)q, (size_t)(r - q), st);
        if (f == e || st->status != LSE_OK)
            break;
        p = f + 1;
    }
    if (st->status == LSE_OK)
        on_row(0, st);
}

/* Feed the text to libcsv one physical line at a time, so that the line
 * number of every row and of every quoting error is known. */
static lse_status parse_rows(lse_table *t, const char *p, const char *end,
                             char comment, lse_error *err)
{
    struct csv_parser parser;
    if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
        return lse_error_set(err, LSE_EINTERNAL, "lse_table_parse",
                             "csv_init failed");
    csv_set_delim(&parser, (unsigned char)t->delimiter);
    csv_set_blk_size(&parser, 4096);
    parse_state st = {.t = t, .err = err, .status = LSE_OK};
    const int white = t->delimiter == ' ';
    char *scratch = NULL;
    size_t scratch_cap = 0;
    size_t lineno = 0;
    const char *env = getenv("LSE_CSV_LIBCSV");
    const int plain_ok = !white && (env == NULL || env[0] == '\0' ||
                                    (env[0] == '0' && env[1] == '\0'));
    while (p < end && st.status == LSE_OK) {
        int plain; /* no NUL, no quote */
        const char *next = line_end_plain(p, end, &plain);
        const size_t n = (size_t)(next - p);
        lineno++;
        const int fresh = !st.open; /* libcsv is between rows */
        if (!st.open) {
            if (is_blank_line(p, n, white ? '\0' : t->delimiter) ||
                (comment != '\0' && *p == comment)) {
                p = next;
                continue;
            }
            st.open = 1;
            st.row_start = lineno;
        }
        const char *nul = plain ? NULL : memchr(p, '\0', n);
        if (nul != NULL) {
            st.status = lse_error_set(err, LSE_EPARSE, "lse_table_parse",
                                      "%s:%zu:%zu: NUL byte in text", t->name,
                                      lineno, (size_t)(nul - p) + 1);
            break;
        }
        if (white) {
            parse_white_line(&st, p, n, lineno, &scratch, &scratch_cap);
            p = next;
            continue;
        }
        if (plain_ok && fresh && (plain || memchr(p, '"', n) == NULL)) {
            parse_plain_line(&st, p, n);
            p = next;
            continue;
        }
        const size_t used = csv_parse(&parser, p, n, on_field, on_row, &st);
        if (st.status == LSE_OK && used < n) {
            if (csv_error(&parser) == CSV_EPARSE)
                st.status = lse_error_set(
                    err, LSE_EPARSE, "lse_table_parse",
                    "%s:%zu:%zu: malformed quoting (a quote must open a "
                    "field, close it before a delimiter or line end, and be "
                    "doubled inside it)",
                    t->name, lineno, used + 1);
            else
                st.status = lse_error_set(err, LSE_ENOMEM, "lse_table_parse",
                                          "%s:%zu: %s", t->name, lineno,
                                          csv_strerror(csv_error(&parser)));
        }
        p = next;
    }
    if (st.status == LSE_OK && csv_fini(&parser, on_field, on_row, &st) != 0)
        st.status = lse_error_set(err, LSE_EPARSE, "lse_table_parse",
                                  "%s:%zu: unterminated quoted field (the "
                                  "row starting on this line never ends)",
                                  t->name, st.row_start);
    csv_free(&parser);
    free(scratch);
    return st.status;
}

lse_status lse_table_parse(const char *data, size_t len, const char *name,
                           const lse_csv_opts *opts, lse_table **out,
                           lse_error *err)
{
    if (out == NULL || (data == NULL && len > 0))
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "out and data must not be NULL");
    *out = NULL;
    const lse_csv_opts o = opts != NULL ? *opts : lse_csv_opts_default();
    lse_status status = check_opts(&o, err);
    if (status != LSE_OK)
        return status;

    lse_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    const char *shown = name != NULL ? name : "<memory>";
    t->name = malloc(strlen(shown) + 1);
    if (t->name == NULL) {
        status = lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
        goto fail;
    }
    strcpy(t->name, shown);

    const char *p = data != NULL ? data : "";
    const char *end = p + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3; /* UTF-8 byte order mark */
    t->delimiter =
        o.delimiter != '\0' ? o.delimiter : detect_delimiter(p, end, o.comment);

    if (len >= (8u << 20)) {
        /* the cells' text fits in len + 1 bytes (each cell's NUL takes
         * the place of the delimiter or line break after it, quotes and
         * trimmed spaces are dropped) unless names are appended: one
         * buffer, huge pages advised before it is written */
        char *text = grow(t->text, &t->text_cap, len + 1, 1);
        if (text != NULL)
            t->text = text;
        advise_huge(t->text, t->text_cap);
    }
    status = parse_rows(t, p, end, o.comment, err);
    if (status != LSE_OK)
        goto fail;
    if (t->n_stored == 0) {
        status = lse_error_set(err, LSE_EPARSE, __func__,
                               "%s: no data rows (the file is empty)", t->name);
        goto fail;
    }
    if (o.header == -1) {
        status = detect_header(t, err);
        if (status != LSE_OK)
            goto fail;
    } else {
        t->has_header = o.header;
    }
    if (t->n_stored <= (size_t)t->has_header) {
        status = lse_error_set(err, LSE_EPARSE, __func__,
                               "%s:%zu: no data rows (only a header)", t->name,
                               t->line[0]);
        goto fail;
    }
    status = make_names(t, err);
    if (status == LSE_OK)
        status = check_unique_names(t, err);
    if (status != LSE_OK)
        goto fail;
    *out = t;
    return LSE_OK;
fail:
    lse_table_free(t);
    return status;
}

/* Where the NUL byte at buf[at] is: 1-based line (LF, CRLF or CR end a
 * line, as in parse_rows) and column. */
static void nul_position(const char *buf, size_t at, size_t *line,
                         size_t *col)
{
    size_t l = 1, start = 0;
    for (size_t i = 0; i < at; i++) {
        if (buf[i] == '\n' || (buf[i] == '\r' && buf[i + 1] != '\n')) {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = at - start + 1;
}

/* lse_file_read for text: stops at the first block that holds a NUL byte
 * (binary data such as /dev/zero) and past max bytes (an endless pipe),
 * before the memory runs out. */
static lse_status read_text(const char *path, size_t max, char **data,
                            size_t *len, lse_error *err)
{
    *data = NULL;
    *len = 0;
    const int from_stdin = strcmp(path, "-") == 0;
    const char *shown = from_stdin ? "<stdin>" : path;
    char why[128];
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (f == NULL) {
        errno_text(errno, why, sizeof why);
        return lse_error_set(err, LSE_EIO, "lse_table_read",
                             "cannot open '%s': %s", shown, why);
    }
    lse_status status = LSE_OK;
    size_t cap = 0, n = 0;
    char *buf = NULL;
    /* the buffer never needs more than the limit, one byte that tells it
     * was passed, and the NUL */
    const size_t most = max < SIZE_MAX - 2 ? max + 2 : SIZE_MAX;
    struct stat sb;
    const int regular = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
    if (regular && (uintmax_t)sb.st_size > (uintmax_t)max) {
        status = lse_error_set(err, LSE_ENOMEM, "lse_table_read",
                               "%s: input exceeds the limit of %zu bytes (it "
                               "has %jd)",
                               shown, max, (intmax_t)sb.st_size);
        goto done;
    }
    if (regular && (uintmax_t)sb.st_size >= (8u << 20)) {
        /* a large file's buffer at its size at once, with huge pages
         * advised before the read touches it (advice after a realloc
         * comes too late, and splits the mapping so the next realloc
         * copies) */
        cap = (size_t)sb.st_size + 2;
        buf = malloc(cap);
        if (buf == NULL)
            cap = 0;
        advise_huge(buf, cap);
    }
    for (;;) {
        if (cap - n < 2) {
            size_t c = cap == 0 ? 65536 : cap > SIZE_MAX / 2 ? SIZE_MAX
                                                             : 2 * cap;
            if (c > most)
                c = most;
            char *bigger = c > cap ? realloc(buf, c) : NULL;
            if (bigger == NULL) {
                status = lse_error_set(err, LSE_ENOMEM, "lse_table_read",
                                       "out of memory reading '%s' (%zu "
                                       "bytes read)",
                                       shown, n);
                goto done;
            }
            buf = bigger;
            cap = c;
        }
        size_t room = cap - n - 1;
        if (max < SIZE_MAX && room > max + 1 - n)
            room = max + 1 - n; /* one byte past the limit tells */
        const size_t got = fread(buf + n, 1, room, f);
        const char *nul = memchr(buf + n, '\0', got);
        n += got;
        if (nul != NULL) {
            size_t line, col;
            nul_position(buf, (size_t)(nul - buf), &line, &col);
            status = lse_error_set(err, LSE_EPARSE, "lse_table_read",
                                   "%s:%zu:%zu: NUL byte in text (binary data, "
                                   "not a CSV file)",
                                   shown, line, col);
            goto done;
        }
        if (n > max) {
            status = lse_error_set(err, LSE_ENOMEM, "lse_table_read",
                                   "%s: input exceeds the limit of %zu bytes",
                                   shown, max);
            goto done;
        }
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        errno_text(errno, why, sizeof why);
        status = lse_error_set(err, LSE_EIO, "lse_table_read",
                               "cannot read '%s': %s", shown, why);
        goto done;
    }
    buf[n] = '\0';
done:
    if (!from_stdin)
        fclose(f);
    if (status != LSE_OK) {
        free(buf);
        return status;
    }
    *data = buf;
    *len = n;
    return LSE_OK;
}

lse_status lse_table_read(const char *path, const lse_csv_opts *opts,
                          lse_table **out, lse_error *err)
{
    if (path == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "path and out must not be NULL");
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    const size_t max = opts == NULL || opts->max_bytes == 0 ? LSE_CSV_MAX_BYTES
                                                           : opts->max_bytes;
    lse_status status = read_text(path, max, &data, &len, err);
    if (status != LSE_OK)
        return status;
    const char *shown = strcmp(path, "-") == 0 ? "<stdin>" : path;
    status = lse_table_parse(data, len, shown, opts, out, err);
    free(data);
    return status;
}

size_t lse_table_rows(const lse_table *t)
{
    return t != NULL ? t->n_stored - (size_t)t->has_header : 0;
}

size_t lse_table_cols(const lse_table *t) { return t != NULL ? t->n_cols : 0; }

int lse_table_has_header(const lse_table *t)
{
    return t != NULL ? t->has_header : 0;
}

char lse_table_delimiter(const lse_table *t)
{
    return t != NULL ? t->delimiter : '\0';
}

const char *lse_table_name(const lse_table *t)
{
    return t != NULL ? t->name : NULL;
}

const char *lse_table_column_name(const lse_table *t, size_t j)
{
    if (t == NULL || j >= t->n_cols)
        return NULL;
    return t->text + t->names[j];
}

const char *lse_table_cell(const lse_table *t, size_t i, size_t j)
{
    if (t == NULL || i >= lse_table_rows(t) || j >= t->n_cols)
        return NULL;
    return stored_cell(t, i + (size_t)t->has_header, j);
}

size_t lse_table_line(const lse_table *t, size_t i)
{
    if (t == NULL || i >= lse_table_rows(t))
        return 0;
    return t->line[i + (size_t)t->has_header];
}

lse_status lse_table_find_column(const lse_table *t, const char *key, size_t *j,
                                 lse_error *err)
{
    if (t == NULL || key == NULL || j == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "t, key and j must not be NULL");
    for (size_t k = 0; k < t->n_cols; k++) {
        if (strcmp(lse_table_column_name(t, k), key) == 0) {
            *j = k;
            return LSE_OK;
        }
    }
    size_t digits = 0;
    while (key[digits] >= '0' && key[digits] <= '9')
        digits++;
    if (digits > 0 && digits < 19 && key[digits] == '\0') {
        const unsigned long long index = strtoull(key, NULL, 10);
        if (index >= 1 && index <= t->n_cols) {
            *j = (size_t)(index - 1);
            return LSE_OK;
        }
    }
    char list[360];
    size_t used = 0;
    list[0] = '\0';
    for (size_t k = 0; k < t->n_cols; k++) {
        const int n = snprintf(list + used, sizeof list - used, "%s%s",
                               k > 0 ? ", " : "", lse_table_column_name(t, k));
        if (n < 0 || (size_t)n >= sizeof list - used) {
            strcpy(list + sizeof list - 5, "...");
            break;
        }
        used += (size_t)n;
    }
    return lse_error_set(err, LSE_ENOTFOUND, __func__,
                         "%s has no column '%.60s' (columns, or 1..%zu: %s)",
                         t->name, key, t->n_cols, list);
}

/* Check data row i, selected columns, and convert it into vals (n_cols
 * doubles, NAN for a missing value); *keep is 0 when a missing value drops
 * the row. */
static lse_status check_row(const lse_table *t, size_t i, const size_t *cols,
                            size_t n_cols, lse_missing missing, int *keep,
                            double *vals, lse_error *err)
{
    *keep = 1;
    for (size_t k = 0; k < n_cols; k++) {
        const size_t j = cols != NULL ? cols[k] : k;
        /* i and j checked by the caller: not lse_table_cell, an exported
         * function called through the PLT for every cell */
        const char *s = stored_cell(t, i + (size_t)t->has_header, j);
        double v;
        const cell_kind kind = classify(s, &v);
        vals[k] = v; /* NAN when missing */
        if (kind == CELL_NUMBER)
            continue;
        if (kind == CELL_TEXT)
            return lse_error_set(
                err, LSE_EPARSE, "lse_table_to_matrix",
                "%s:%zu:%zu: '%.40s' is not a number (column '%.60s')", t->name,
                lse_table_line(t, i), j + 1, s, lse_table_column_name(t, j));
        if (kind == CELL_INFINITE)
            return lse_error_set(
                err, LSE_ENONFINITE, "lse_table_to_matrix",
                "%s:%zu:%zu: '%.40s' is not finite (column '%.60s')", t->name,
                lse_table_line(t, i), j + 1, s, lse_table_column_name(t, j));
        if (kind == CELL_MISSING) {
            if (missing == LSE_MISSING_ERROR)
                return lse_error_set(
                    err, LSE_EPARSE, "lse_table_to_matrix",
                    "%s:%zu:%zu: missing value (column '%.60s')", t->name,
                    lse_table_line(t, i), j + 1, lse_table_column_name(t, j));
            if (missing == LSE_MISSING_DROP)
                *keep = 0;
        }
    }
    return LSE_OK;
}

/* The kept rows of all (rows x n_cols, every row converted) into m. */
static void keep_rows(const gsl_matrix *all, const unsigned char *keep,
                      gsl_matrix *m, size_t *row_index)
{
    size_t r = 0;
    for (size_t i = 0; i < all->size1; i++) {
        if (!keep[i])
            continue;
        if (row_index != NULL)
            row_index[r] = i;
        memcpy(m->data + r * m->tda, all->data + i * all->tda,
               all->size2 * sizeof(double));
        r++;
    }
}

lse_status lse_table_to_matrix(const lse_table *t, const size_t *cols,
                               size_t n_cols, lse_missing missing,
                               gsl_matrix **out, size_t **row_index,
                               lse_error *err)
{
    if (t == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "t and out must not be NULL");
    *out = NULL;
    if (row_index != NULL)
        *row_index = NULL;
    if (cols == NULL)
        n_cols = t->n_cols;
    if (n_cols == 0)
        return lse_error_set(err, LSE_EINVAL, __func__, "no columns selected");
    if (missing != LSE_MISSING_ERROR && missing != LSE_MISSING_DROP &&
        missing != LSE_MISSING_KEEP)
        return lse_error_set(err, LSE_EINVAL, __func__,
                             "unknown missing-value policy %d", (int)missing);
    for (size_t k = 0; cols != NULL && k < n_cols; k++)
        if (cols[k] >= t->n_cols)
            return lse_error_set(err, LSE_ERANGE, __func__,
                                 "%s: column index %zu out of range (%zu "
                                 "columns)",
                                 t->name, cols[k], t->n_cols);
    lse_gsl_quiet();

    const size_t rows = lse_table_rows(t);
    if (lse_size_matrix_overflows(rows, n_cols))
        return lse_error_set(err, LSE_ENOMEM, __func__,
                             "%s: a %zu x %zu matrix exceeds the address "
                             "space",
                             t->name, rows, n_cols);
    /* every row converted once into all; the kept ones are then copied
     * (or all is the result when every row is kept) */
    unsigned char *keep = malloc(rows);
    gsl_matrix *all = gsl_matrix_alloc(rows, n_cols);
    if (all != NULL)
        advise_huge(all->data, rows * n_cols * sizeof(double));
    gsl_matrix *m = NULL;
    size_t *index = NULL;
    c_locale loc;
    if (keep == NULL || all == NULL || c_locale_enter(&loc) != 0) {
        free(keep);
        gsl_matrix_free(all);
        return lse_error_set(err, LSE_ENOMEM, __func__,
                             "out of memory for a %zu x %zu matrix", rows,
                             n_cols);
    }
    lse_status status = LSE_OK;
    size_t kept = 0;
    for (size_t i = 0; i < rows && status == LSE_OK; i++) {
        int k = 0;
        status = check_row(t, i, cols, n_cols, missing, &k,
                           all->data + i * all->tda, err);
        keep[i] = (unsigned char)k;
        kept += (size_t)k;
    }
    c_locale_leave(&loc);
    if (status == LSE_OK && kept == 0)
        status = lse_error_set(err, LSE_EPARSE, __func__,
                               "%s: no rows left: every row has a missing "
                               "value",
                               t->name);
    if (status == LSE_OK) {
        m = kept == rows ? all : gsl_matrix_alloc(kept, n_cols);
        index = row_index != NULL ? calloc(kept, sizeof *index) : NULL;
        if (m == NULL || (row_index != NULL && index == NULL))
            status = lse_error_set(err, LSE_ENOMEM, __func__,
                                   "out of memory for a %zu x %zu matrix", kept,
                                   n_cols);
    }
    if (status == LSE_OK && m != all)
        keep_rows(all, keep, m, index);
    else if (status == LSE_OK)
        for (size_t i = 0; index != NULL && i < rows; i++)
            index[i] = i;
    free(keep);
    if (m != all)
        gsl_matrix_free(all);
    if (status != LSE_OK) {
        if (m != all)
            gsl_matrix_free(m);
        free(index);
        return status;
    }
    *out = m;
    if (row_index != NULL)
        *row_index = index;
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Writing CSV                                                         */
/* ------------------------------------------------------------------ */

/* A name is written bare only when it is made of these characters and
 * does not start with the default comment character. */
static int needs_quotes(const char *s)
{
    static const char safe[] = "_-.+/:()[]";
    if (*s == '\0' || *s == '#')
        return 1;
    for (; *s != '\0'; s++) {
        const char c = *s;
        const int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9');
        if (!alnum && strchr(safe, c) == NULL)
            return 1;
    }
    return 0;
}

static void write_name(FILE *f, const char *s)
{
    if (!needs_quotes(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void write_value(FILE *f, double v, int precision)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "Inf" : "-Inf", f);
    else
        fprintf(f, "%.*g", precision, v);
}

lse_status lse_matrix_format_csv(const gsl_matrix *m, const char *const *names,
                                 int precision, char **text, size_t *len,
                                 lse_error *err)
{
    if (m == NULL || text == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "m and text must not be NULL");
    *text = NULL;
    if (len != NULL)
        *len = 0;
    if (precision < 0 || precision > 17)
        return lse_error_set(err, LSE_EINVAL, __func__,
                             "precision must be 0..17, not %d", precision);
    for (size_t j = 0; names != NULL && j < m->size2; j++)
        if (names[j] == NULL)
            return lse_error_set(err, LSE_EFAULT, __func__,
                                 "names[%zu] is NULL", j);
    const int digits = precision == 0 ? 17 : precision;
    c_locale loc;
    if (c_locale_enter(&loc) != 0)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (f == NULL) {
        c_locale_leave(&loc);
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    }
    for (size_t j = 0; names != NULL && j < m->size2; j++) {
        if (j > 0)
            fputc(',', f);
        write_name(f, names[j]);
    }
    if (names != NULL)
        fputc('\n', f);
    for (size_t i = 0; i < m->size1; i++) {
        for (size_t j = 0; j < m->size2; j++) {
            if (j > 0)
                fputc(',', f);
            write_value(f, gsl_matrix_get(m, i, j), digits);
        }
        fputc('\n', f);
    }
    const int failed = ferror(f);
    const int closed = fclose(f);
    c_locale_leave(&loc);
    if (failed || closed != 0) {
        free(buf);
        return lse_error_set(err, LSE_ENOMEM, __func__,
                             "out of memory formatting a %zu x %zu matrix",
                             m->size1, m->size2);
    }
    *text = buf;
    if (len != NULL)
        *len = size;
    return LSE_OK;
}

lse_status lse_matrix_write_csv(const char *path, const gsl_matrix *m,
                                const char *const *names, int precision,
                                lse_error *err)
{
    if (path == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "path must not be NULL");
    char *text = NULL;
    size_t len = 0;
    lse_status status =
        lse_matrix_format_csv(m, names, precision, &text, &len, err);
    if (status == LSE_OK)
        status = lse_file_write_atomic(path, text, len, err);
    free(text);
    return status;
}
