/* lsefit: data sets. Reads a CSV file with the library's reader
 * (lse_table_*), picks the numeric columns, the sample weights and the
 * sequence ids, applies the missing-value policy, refuses constant columns
 * and standardizes. Every message names the file, and the line and column
 * where one applies. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit_data.h"

/* Split the comma-separated list @p s of option @p opt (NULL: not named in
 * messages). */
static int split_list(const char *opt, const char *s, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t count = 1;
    for (const char *c = s; *c != '\0'; c++)
        count += (*c == ',');
    const size_t len = strlen(s) + 1;
    char **list = malloc((count + 1) * sizeof *list + len);
    if (list == NULL)
        return lsefit_fail("out of memory");
    char *copy = (char *)(list + count + 1);
    memcpy(copy, s, len);
    size_t k = 0;
    char *item = copy;
    for (;;) {
        char *comma = strchr(item, ',');
        if (comma != NULL)
            *comma = '\0';
        while (*item == ' ' || *item == '\t')
            item++;
        char *end = item + strlen(item);
        while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (*item == '\0') {
            free(list);
            return lsefit_fail("%s%s'%s': empty name in the list (give names "
                               "or 1-based column numbers separated by "
                               "commas, e.g. 1,3)",
                               opt != NULL ? opt : "",
                               opt != NULL ? " " : "", s);
        }
        list[k++] = item;
        if (comma == NULL)
            break;
        item = comma + 1;
    }
    list[k] = NULL;
    *out = list;
    *n = k;
    return LSEFIT_OK;
}

int lsefit_split_list(const char *s, char ***out, size_t *n)
{
    return split_list(NULL, s, out, n);
}

/* Column @p key of the table, for option @p opt. */
static int find_column(const lse_table *t, const char *opt, const char *key,
                       size_t *j)
{
    lse_error err;
    if (lse_table_find_column(t, key, j, &err) != LSE_OK)
        return lsefit_fail("%s: %s", opt, lsefit_strip(&err));
    return LSEFIT_OK;
}

static int contains(const size_t *list, size_t n, size_t j)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == j)
            return 1;
    return 0;
}

void lsefit_data_free(lsefit_data *data)
{
    lse_table_free(data->table);
    gsl_matrix_free(data->x);
    free(data->rows);
    free(data->cols);
    free(data->names);
    gsl_vector_free(data->weight);
    free(data->seq);
    gsl_vector_free(data->mean);
    gsl_vector_free(data->scale);
    memset(data, 0, sizeof *data);
}

/* The data columns: --columns, else the model's feature names (when the
 * file has a header), else every column not ignored and not used as
 * weights or sequence ids. */
static int choose_columns(const lsefit_data_opts *o, const lse_table *t,
                          const size_t *ignored, size_t n_ignored,
                          const size_t *special, size_t n_special,
                          size_t **cols, size_t *d)
{
    const size_t n_cols = lse_table_cols(t);
    size_t *c = malloc(
        (n_cols + (o->n_model_names > n_cols ? o->n_model_names : 0) + 1) *
        sizeof *c);
    if (c == NULL)
        return lsefit_fail("out of memory");
    size_t n = 0;
    int rc = LSEFIT_OK;
    if (o->columns != NULL) {
        char **list = NULL;
        size_t n_list = 0;
        rc = split_list("--columns", o->columns, &list, &n_list);
        size_t *cc = NULL;
        if (rc == LSEFIT_OK) {
            cc = realloc(c, (n_list + 1) * sizeof *c);
            if (cc == NULL)
                rc = lsefit_fail("out of memory");
            else
                c = cc;
        }
        for (size_t i = 0; rc == LSEFIT_OK && i < n_list; i++) {
            size_t j;
            rc = find_column(t, "--columns", list[i], &j);
            if (rc != LSEFIT_OK)
                break;
            if (contains(c, n, j))
                rc = lsefit_fail("--columns: column '%s' is listed twice",
                                 lse_table_column_name(t, j));
            else if (contains(ignored, n_ignored, j))
                rc = lsefit_fail("--columns: column '%s' is also in --ignore",
                                 lse_table_column_name(t, j));
            else if (contains(special, n_special, j))
                rc = lsefit_fail("--columns: column '%s' holds the weights "
                                 "or sequence ids",
                                 lse_table_column_name(t, j));
            else
                c[n++] = j;
        }
        free(list);
    } else if (o->model_names != NULL && lse_table_has_header(t)) {
        for (size_t i = 0; rc == LSEFIT_OK && i < o->n_model_names; i++) {
            size_t j;
            lse_error err;
            const lse_status st =
                lse_table_find_column(t, o->model_names[i], &j, &err);
            if (st != LSE_OK && n_cols == 1 && o->n_model_names > 1)
                rc = lsefit_fail("%s; the file was read as one column: give "
                                 "the field separator with --delimiter",
                                 lsefit_strip(&err));
            else if (st != LSE_OK)
                rc = lsefit_fail("%s; the model %s needs it (or choose "
                                 "columns with --columns)",
                                 lsefit_strip(&err), o->model_path);
            else
                c[n++] = j;
        }
    } else {
        for (size_t j = 0; j < n_cols; j++)
            if (!contains(ignored, n_ignored, j) &&
                !contains(special, n_special, j))
                c[n++] = j;
        if (n == 0)
            rc = lsefit_fail("%s: no data column left (every column is "
                             "ignored or used for weights or sequences)",
                             lse_table_name(t));
    }
    if (rc != LSEFIT_OK) {
        free(c);
        return rc;
    }
    *cols = c;
    *d = n;
    return LSEFIT_OK;
}

/* Sample weights: finite (checked by the reader) and >= 0, positive sum. */
static int check_weights(const lsefit_data *data, size_t wc)
{
    double sum = 0.0;
    for (size_t i = 0; i < data->weight->size; i++) {
        const double w = gsl_vector_get(data->weight, i);
        if (isnan(w))
            return lsefit_fail("%s:%zu:%zu: missing weight (column '%s'): a "
                               "weight cannot be marginalized",
                               lse_table_name(data->table),
                               lse_table_line(data->table, data->rows[i]),
                               wc + 1, lse_table_column_name(data->table, wc));
        if (w < 0.0)
            return lsefit_fail("%s:%zu:%zu: weight %g is negative (column "
                               "'%s')",
                               lse_table_name(data->table),
                               lse_table_line(data->table, data->rows[i]),
                               wc + 1, w,
                               lse_table_column_name(data->table, wc));
        sum += w;
    }
    if (!(sum > 0.0))
        return lsefit_fail("%s: the weights (column '%s') sum to 0",
                           lse_table_name(data->table),
                           lse_table_column_name(data->table, wc));
    return LSEFIT_OK;
}

/* A new sequence starts where the id changes, and after a dropped row. */
static int make_sequences(lsefit_data *data, size_t sc)
{
    const size_t n = data->x->size1;
    data->seq = malloc(n * sizeof *data->seq);
    if (data->seq == NULL)
        return lsefit_fail("out of memory");
    size_t id = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            const char *a = lse_table_cell(data->table, data->rows[i - 1], sc);
            const char *b = lse_table_cell(data->table, data->rows[i], sc);
            if (strcmp(a, b) != 0 || data->rows[i] != data->rows[i - 1] + 1)
                id++;
        }
        data->seq[i] = id;
    }
    return LSEFIT_OK;
}

/* ------------------------------------------------------------------ */
/* Reader options: --delimiter, --header, --max-input-size             */

/* "1000", "64K", "512M", "4G", "1T" (powers of 1024; "KiB", "MB"... and a
 * trailing "B" are accepted too). */
static int parse_size(const char *s, size_t *out)
{
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    unsigned long long v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (ULLONG_MAX - 9) / 10)
            return -1;
        v = 10 * v + (unsigned long long)(*p - '0');
    }
    static const char units[] = "KMGT";
    int shift = 0;
    if (*p != '\0') {
        const char *u = strchr(units, *p >= 'a' ? *p - 'a' + 'A' : *p);
        if (u != NULL && *u != '\0') {
            shift = 10 * (int)(u - units + 1);
            p++;
            if (*p == 'i')
                p++;
        }
        if (*p == 'B' || *p == 'b')
            p++;
        if (*p != '\0')
            return -1;
    }
    if (shift > 0 && v > (ULLONG_MAX >> shift))
        return -1;
    v <<= shift;
    if (v == 0 || v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_delimiter(const char *s, char *out)
{
    static const struct {
        const char *name;
        char c;
    } names[] = {{"auto", '\0'},      {"comma", ','},      {"semicolon", ';'},
                 {"tab", '\t'},        {"\\t", '\t'},       {"space", ' '},
                 {"whitespace", ' '},  {"white", ' '},      {"pipe", '|'}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].c;
            return 0;
        }
    if (s[0] == '\0' || s[1] != '\0' || s[0] == '"' || s[0] == '#' ||
        s[0] == '\n' || s[0] == '\r')
        return -1;
    *out = s[0] == '\t' ? '\t' : s[0];
    return 0;
}

int lsefit_data_option(const char *cmd, int c, const char *arg,
                       lsefit_data_opts *o, int *rc)
{
    switch (c) {
    case LSEFIT_OPT_DELIMITER:
        *rc = parse_delimiter(arg, &o->delimiter) == 0
                  ? LSEFIT_OK
                  : lsefit_usage(cmd,
                                 "--delimiter '%s': expected one character "
                                 "(not '\"' or '#'), or comma, semicolon, "
                                 "tab, space (runs of spaces and tabs) or "
                                 "auto",
                                 arg);
        return 1;
    case LSEFIT_OPT_HEADER:
    case LSEFIT_OPT_NO_HEADER:
        o->header = c == LSEFIT_OPT_HEADER ? 1 : 2;
        *rc = LSEFIT_OK;
        return 1;
    case LSEFIT_OPT_MAX_INPUT:
        *rc = parse_size(arg, &o->max_input) == 0
                  ? LSEFIT_OK
                  : lsefit_usage(cmd,
                                 "--max-input-size '%s': expected a size in "
                                 "bytes >= 1, with an optional K, M, G or T "
                                 "suffix (e.g. 16G)",
                                 arg);
        return 1;
    default:
        return 0;
    }
}

lse_csv_opts lsefit_data_csv_opts(const lsefit_data_opts *o)
{
    lse_csv_opts c = lse_csv_opts_default();
    c.delimiter = o->delimiter;
    c.header = o->header == 1 ? 1 : o->header == 2 ? 0 : -1;
    if (o->max_input > 0)
        c.max_bytes = o->max_input;
    return c;
}

/* A size for messages: "4G" when it is a whole number of GiB, etc. */
static void format_size(size_t v, char *buf, size_t n)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, n, "%zu bytes", v);
    else
        snprintf(buf, n, "%zu%c", v, units[u]);
}

int lsefit_data_load(const lsefit_data_opts *o, lsefit_data *out)
{
    memset(out, 0, sizeof *out);
    lse_error err;
    lse_table *t = NULL;
    const lse_csv_opts copts = lsefit_data_csv_opts(o);
    if (lse_table_read(o->path, &copts, &t, &err) != LSE_OK) {
        if (err.status == LSE_ENOMEM &&
            strstr(err.message, "exceeds the limit") != NULL) {
            char limit[64], more[64];
            format_size(copts.max_bytes, limit, sizeof limit);
            format_size(copts.max_bytes <= SIZE_MAX / 4 ? 4 * copts.max_bytes
                                                        : SIZE_MAX,
                        more, sizeof more);
            return lsefit_fail("%s: the input is larger than the limit of %s "
                               "(--max-input-size): raise it, e.g. "
                               "--max-input-size %s",
                               strcmp(o->path, "-") == 0 ? "<stdin>" : o->path,
                               limit, more);
        }
        if (err.status == LSE_EPARSE &&
            strstr(err.message, "NUL byte") != NULL)
            return lsefit_fail_lib(&err, ": give a CSV text file");
        return lsefit_fail_lib(&err, NULL);
    }
    return lsefit_data_from_table(o, t, out);
}

/* 0 when @p s is valid UTF-8; else 1 with the offset of the first bad
 * byte. */
static int utf8_invalid(const char *s, size_t *at)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (p[i] != 0) {
        const unsigned char c = p[i];
        size_t len = 0;
        unsigned int cp = 0, min = 0;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 1, cp = c & 0x1Fu, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 2, cp = c & 0x0Fu, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 3, cp = c & 0x07u, min = 0x10000;
        } else {
            *at = i;
            return 1;
        }
        for (size_t k = 1; k <= len; k++) {
            if ((p[i + k] & 0xC0u) != 0x80u) {
                *at = i;
                return 1;
            }
            cp = (cp << 6) | (p[i + k] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            *at = i;
            return 1;
        }
        i += len + 1;
    }
    return 0;
}

/* The names of the data columns go into model files, which are UTF-8:
 * refuse another encoding before any work is done. */
static int check_names_utf8(const lsefit_data *data)
{
    for (size_t j = 0; j < data->d; j++) {
        size_t at = 0;
        if (utf8_invalid(data->names[j], &at))
            return lsefit_fail(
                "%s: the header name of column %zu is not valid UTF-8 (byte "
                "%zu is 0x%02X; Latin-1?): convert the file, e.g. iconv -f "
                "LATIN1 -t UTF-8 %s > utf8.csv",
                lse_table_name(data->table), data->cols[j] + 1, at + 1,
                (unsigned int)(unsigned char)data->names[j][at],
                lse_table_name(data->table));
    }
    return LSEFIT_OK;
}

int lsefit_data_from_table(const lsefit_data_opts *o, lse_table *t,
                           lsefit_data *out)
{
    memset(out, 0, sizeof *out);
    lse_error err;
    out->table = t;
    out->n_table = lse_table_rows(t);

    const size_t n_cols = lse_table_cols(t);
    size_t *ignored = malloc((n_cols + 1) * sizeof *ignored);
    size_t n_ignored = 0;
    size_t special[2];
    size_t n_special = 0;
    size_t wc = n_cols, sc = n_cols;
    size_t *all = NULL;
    gsl_matrix *m = NULL;
    int rc = ignored == NULL ? lsefit_fail("out of memory") : LSEFIT_OK;
    if (rc == LSEFIT_OK && o->ignore != NULL) {
        char **list = NULL;
        size_t n_list = 0;
        rc = split_list("--ignore", o->ignore, &list, &n_list);
        for (size_t i = 0; rc == LSEFIT_OK && i < n_list; i++) {
            size_t j;
            rc = find_column(t, "--ignore", list[i], &j);
            if (rc == LSEFIT_OK && !contains(ignored, n_ignored, j))
                ignored[n_ignored++] = j;
        }
        free(list);
    }
    if (rc == LSEFIT_OK && o->weights != NULL) {
        rc = find_column(t, "--weights", o->weights, &wc);
        if (rc == LSEFIT_OK)
            special[n_special++] = wc;
    }
    if (rc == LSEFIT_OK && o->sequence != NULL) {
        rc = find_column(t, "--sequence", o->sequence, &sc);
        if (rc == LSEFIT_OK && wc == sc)
            rc = lsefit_fail("--sequence and --weights name the same column "
                             "'%s'",
                             lse_table_column_name(t, sc));
        if (rc == LSEFIT_OK)
            special[n_special++] = sc;
    }
    if (rc == LSEFIT_OK)
        rc = choose_columns(o, t, ignored, n_ignored, special, n_special,
                            &out->cols, &out->d);
    const size_t d = out->d;
    if (rc == LSEFIT_OK) {
        /* the weights go through the same reader and missing policy */
        all = malloc((d + 1) * sizeof *all);
        out->names = malloc((d + 1) * sizeof *out->names);
        if (all == NULL || out->names == NULL)
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK) {
        memcpy(all, out->cols, d * sizeof *all);
        if (wc < n_cols)
            all[d] = wc;
        for (size_t j = 0; j < d; j++)
            out->names[j] = lse_table_column_name(t, out->cols[j]);
        rc = check_names_utf8(out);
    }
    if (rc == LSEFIT_OK) {
        const lse_status st = lse_table_to_matrix(
            t, all, d + (wc < n_cols), o->missing, &m, &out->rows, &err);
        if (st != LSE_OK) {
            const char *hint = NULL;
            if (strstr(err.message, "is not a number") != NULL &&
                n_cols == 1)
                hint = "; the file was read as one column: give the field "
                       "separator with --delimiter (e.g. --delimiter ';' or "
                       "--delimiter space)";
            else if (strstr(err.message, "is not a number") != NULL)
                hint = "; leave a non-numeric column out with --ignore NAME "
                       "or choose columns with --columns";
            else if (strstr(err.message, "no rows left") != NULL)
                rc = lsefit_fail(
                    "%s: no complete row is left after --missing drop (every "
                    "row misses a value in the %zu column%s used): leave "
                    "the emptiest columns out with --columns, or (gmm) fit "
                    "the observed values with --missing marginalize",
                    lse_table_name(t), d, d == 1 ? "" : "s");
            else if (strstr(err.message, "missing value") != NULL)
                hint = "; use --missing drop to leave such rows out";
            if (rc == LSEFIT_OK)
                rc = lsefit_fail_lib(&err, hint);
        }
    }
    if (rc == LSEFIT_OK) {
        out->x = gsl_matrix_alloc(m->size1, d);
        if (out->x == NULL)
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK) {
        gsl_matrix_const_view v =
            gsl_matrix_const_submatrix(m, 0, 0, m->size1, d);
        gsl_matrix_memcpy(out->x, &v.matrix);
        if (wc < n_cols) {
            out->weight = gsl_vector_alloc(m->size1);
            if (out->weight == NULL) {
                rc = lsefit_fail("out of memory");
            } else {
                gsl_vector_const_view w = gsl_matrix_const_column(m, d);
                gsl_vector_memcpy(out->weight, &w.vector);
                rc = check_weights(out, wc);
            }
        }
    }
    if (rc == LSEFIT_OK && sc < n_cols)
        rc = make_sequences(out, sc);
    gsl_matrix_free(m);
    free(all);
    free(ignored);
    if (rc != LSEFIT_OK)
        lsefit_data_free(out);
    return rc;
}

/* buf[0..n) reduced over every process (nothing to do for one). */
static int share_reduce(const lsefit_data *data, double *buf, size_t n,
                        lsefit_op op)
{
    const lsefit_share *sh = data->share;
    return sh != NULL ? sh->reduce(sh->user, buf, n, op) : LSEFIT_OK;
}

/* The rows of this process (after the context rows of a share). */
static size_t share_first(const lsefit_data *data)
{
    return data->share != NULL ? data->share->first : 0;
}

static const char *share_name(const lsefit_data *data)
{
    return data->share != NULL ? data->share->name
                               : lse_table_name(data->table);
}

int lsefit_data_check_constant(const lsefit_data *data, int reg_covar_given,
                               const char *reg_example)
{
    const gsl_matrix *x = data->x;
    const size_t d = x->size2, h = share_first(data);
    /* [count (d)] summed; [min (d), -max (d)] minimized */
    double *buf = malloc(3 * d * sizeof *buf);
    if (buf == NULL)
        return lsefit_fail("out of memory");
    for (size_t j = 0; j < d; j++) {
        buf[j] = 0.0;
        buf[d + j] = INFINITY;
        buf[2 * d + j] = INFINITY;
        for (size_t i = h; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (isnan(v))
                continue;
            buf[j] += 1.0;
            buf[d + j] = fmin(buf[d + j], v);
            buf[2 * d + j] = fmin(buf[2 * d + j], -v);
        }
    }
    int rc = share_reduce(data, buf, d, LSEFIT_OP_SUM);
    if (rc == LSEFIT_OK)
        rc = share_reduce(data, buf + d, 2 * d, LSEFIT_OP_MIN);
    for (size_t j = 0; rc == LSEFIT_OK && j < d; j++) {
        if (buf[j] == 0.0)
            rc = lsefit_fail("%s: column '%s' has no observed value",
                             share_name(data), data->names[j]);
        else if (!reg_covar_given && buf[d + j] == -buf[2 * d + j])
            rc = lsefit_fail(
                "%s: column '%s' is constant (every value is %.17g): its "
                "variance is 0 and the covariance is singular; pass "
                "--reg-covar X (e.g. %s) to fit anyway, or leave the column "
                "out with --ignore",
                share_name(data), data->names[j], buf[d + j],
                reg_example != NULL ? reg_example : "1e-3");
    }
    free(buf);
    return rc;
}

int lsefit_data_check_rows(const lsefit_data *data, size_t n_needed, size_t k,
                           const char *what)
{
    if (n_needed >= k)
        return LSEFIT_OK;
    const int modes = strcmp(what, "modes") == 0;
    return lsefit_fail("%s: %zu usable %s but K = %zu %s: need at least one "
                       "%s per %s",
                       lse_table_name(data->table), n_needed,
                       modes ? "steps" : "rows", k, what,
                       modes ? "step" : "row", modes ? "mode" : "component");
}

/* Largest |value| of column j over the observed values, and its row. */
static double column_max_abs(const gsl_matrix *x, size_t j, size_t *at)
{
    double m = 0.0;
    *at = 0;
    for (size_t i = 0; i < x->size1; i++) {
        const double v = fabs(gsl_matrix_get(x, i, j));
        if (v > m) { /* NaN compares false */
            m = v;
            *at = i;
        }
    }
    return m;
}

int lsefit_data_check_scale(const lsefit_data *data, size_t total_rows,
                            int can_standardize)
{
    const char *way = can_standardize ? "pass --standardize, or " : "";
    const gsl_matrix *x = data->x;
    const double n = (double)total_rows, d = (double)x->size2;
    /* a covariance and k-means++ sum up to n * d squares of differences
     * of two values, each at most (2 max|x|)^2; 16 more for the products
     * of lagged values (SLDS) and for safety */
    const double limit = sqrt(DBL_MAX / (64.0 * n * d));
    for (size_t j = 0; j < x->size2; j++) {
        size_t at = 0;
        const double m = column_max_abs(x, j, &at);
        if (m > limit)
            return lsefit_fail(
                "%s:%zu:%zu: value %.6g (column '%s') is too large for a "
                "covariance: squares of values above %.3g overflow when "
                "summed over %zu rows; %sdivide the column by 1e%d",
                lse_table_name(data->table),
                lse_table_line(data->table, data->rows[at]),
                data->cols[j] + 1, gsl_matrix_get(x, at, j), data->names[j],
                limit, total_rows, way, (int)floor(log10(m)));
        if (m > 0.0 && m < sqrt(DBL_MIN))
            lsefit_note("warning: %s: column '%s' has no value larger than "
                        "%.3g in magnitude: its squares underflow, so the "
                        "components cannot be told apart (they come out "
                        "alike); %srescale the column",
                        lse_table_name(data->table), data->names[j], m, way);
    }
    return LSEFIT_OK;
}

static int alloc_standardize(lsefit_data *data)
{
    data->mean = gsl_vector_alloc(data->d);
    data->scale = gsl_vector_alloc(data->d);
    if (data->mean == NULL || data->scale == NULL)
        return lsefit_fail("out of memory");
    return LSEFIT_OK;
}

/* (x - mean) / scale; near the overflow threshold x - mean can be
 * infinite while the result is not: then x / scale - mean / scale. */
static void apply(gsl_matrix *x, const gsl_vector *mean,
                  const gsl_vector *scale)
{
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++) {
            const double v = gsl_matrix_get(x, i, j);
            const double mu = gsl_vector_get(mean, j);
            const double s = gsl_vector_get(scale, j);
            const double diff = v - mu;
            gsl_matrix_set(x, i, j,
                           isinf(diff) ? v / s - mu / s : diff / s);
        }
}

/* The largest |value| (top) and the number (cnt) of the observed values
 * of each column of this process's rows. */
static void column_tops(const gsl_matrix *x, size_t h, double *top,
                        double *cnt)
{
    for (size_t j = 0; j < x->size2; j++) {
        top[j] = 0.0;
        cnt[j] = 0.0;
        for (size_t i = h; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (fabs(v) > top[j]) /* NaN compares false */
                top[j] = fabs(v);
            cnt[j] += !isnan(v);
        }
    }
}

/* Mean and population standard deviation of the observed values of every
 * column (of every process's rows). The plain sums are kept where they
 * cannot overflow or underflow (so results stay bit for bit what they
 * were); otherwise the values are first divided by the largest |value|.
 * buf: 4 d doubles. */
static int column_moments(const lsefit_data *data, double *buf)
{
    const gsl_matrix *x = data->x;
    const size_t d = x->size2, h = share_first(data);
    double *top = buf, *sum = buf + d, *cnt = buf + 2 * d, *sq = buf + 3 * d;
    column_tops(x, h, top, cnt);
    int rc = share_reduce(data, top, d, LSEFIT_OP_MAX);
    for (size_t j = 0; rc == LSEFIT_OK && j < d; j++) {
        /* under --mpi there is no missing value: every row counts */
        const double n = data->share != NULL
                             ? (double)data->share->total_rows
                             : cnt[j];
        const double m = top[j];
        const int plain =
            m == 0.0 || (m >= 1e-150 && m <= 0.5 * sqrt(DBL_MAX / (4.0 * n)));
        top[j] = plain ? 1.0 : m; /* the divisor */
        sum[j] = 0.0;
        cnt[j] = 0.0;
        for (size_t i = h; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isnan(v)) {
                sum[j] += plain ? v : v / top[j];
                cnt[j] += 1.0;
            }
        }
    }
    if (rc == LSEFIT_OK)
        rc = share_reduce(data, sum, 2 * d, LSEFIT_OP_SUM);
    for (size_t j = 0; rc == LSEFIT_OK && j < d; j++) {
        const double s = top[j], m = sum[j] / cnt[j];
        sq[j] = 0.0;
        for (size_t i = h; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isnan(v)) {
                const double z = s == 1.0 ? v : v / s;
                sq[j] += (z - m) * (z - m);
            }
        }
    }
    if (rc == LSEFIT_OK)
        rc = share_reduce(data, sq, d, LSEFIT_OP_SUM);
    return rc;
}

int lsefit_data_standardize(lsefit_data *data)
{
    const size_t d = data->x->size2;
    double *buf = malloc(4 * d * sizeof *buf);
    int rc = buf == NULL ? lsefit_fail("out of memory") : LSEFIT_OK;
    if (rc == LSEFIT_OK)
        rc = column_moments(data, buf);
    if (rc == LSEFIT_OK)
        rc = alloc_standardize(data);
    for (size_t j = 0; rc == LSEFIT_OK && j < d; j++) {
        const double s = buf[j], m = buf[d + j] / buf[2 * d + j];
        gsl_vector_set(data->mean, j, s * m);
        /* scikit-learn's StandardScaler keeps a constant column as is */
        const double sd = s * sqrt(buf[3 * d + j] / buf[2 * d + j]);
        gsl_vector_set(data->scale, j, sd > 0.0 ? sd : 1.0);
    }
    if (rc == LSEFIT_OK)
        apply(data->x, data->mean, data->scale);
    free(buf);
    return rc;
}

int lsefit_data_apply_standardize(lsefit_data *data, const gsl_vector *mean,
                                  const gsl_vector *scale)
{
    const int rc = alloc_standardize(data);
    if (rc != LSEFIT_OK)
        return rc;
    gsl_vector_memcpy(data->mean, mean);
    gsl_vector_memcpy(data->scale, scale);
    apply(data->x, data->mean, data->scale);
    return LSEFIT_OK;
}

double lsefit_log_jacobian(const gsl_vector *scale)
{
    double s = 0.0;
    for (size_t j = 0; scale != NULL && j < scale->size; j++)
        s += log(gsl_vector_get(scale, j));
    return s;
}

double lsefit_row_log_jacobian(const gsl_matrix *x, size_t i,
                               const gsl_vector *scale)
{
    double s = 0.0;
    for (size_t j = 0; scale != NULL && j < scale->size; j++)
        if (!isnan(gsl_matrix_get(x, i, j)))
            s += log(gsl_vector_get(scale, j));
    return s;
}

void lsefit_unstandardize(gsl_matrix *x, const gsl_vector *mean,
                          const gsl_vector *scale)
{
    if (mean == NULL)
        return;
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++)
            gsl_matrix_set(x, i, j,
                           gsl_vector_get(mean, j) +
                               gsl_vector_get(scale, j) *
                                   gsl_matrix_get(x, i, j));
}

/* ------------------------------------------------------------------ */
/* Model-file pieces shared by both models                             */

int lsefit_json_set_standardize(lse_json *doc, const gsl_vector *mean,
                                const gsl_vector *scale)
{
    if (mean == NULL)
        return LSEFIT_OK;
    lse_error err;
    lse_json *s = lse_json_new_object();
    if (s == NULL)
        return lsefit_fail("out of memory");
    lse_status st = lse_json_set_vector(s, "mean", mean, &err);
    if (st == LSE_OK)
        st = lse_json_set_vector(s, "scale", scale, &err);
    if (st == LSE_OK)
        st = lse_json_set_object(doc, "standardize", s, &err);
    lse_json_free(s);
    return st == LSE_OK ? LSEFIT_OK : lsefit_fail_lib(&err, NULL);
}

int lsefit_json_get_standardize(const lse_json *doc, const char *path, size_t d,
                                gsl_vector **mean, gsl_vector **scale)
{
    *mean = NULL;
    *scale = NULL;
    if (!lse_json_has(doc, "standardize"))
        return LSEFIT_OK;
    lse_error err;
    lse_json *s = NULL;
    lse_status st = lse_json_get_object(doc, "standardize", &s, &err);
    if (st == LSE_OK)
        st = lse_json_get_vector(s, "mean", d, mean, &err);
    if (st == LSE_OK)
        st = lse_json_get_vector(s, "scale", d, scale, &err);
    lse_json_free(s);
    int rc = st == LSE_OK ? LSEFIT_OK : lsefit_fail_lib(&err, NULL);
    for (size_t j = 0; rc == LSEFIT_OK && j < d; j++)
        if (!(gsl_vector_get(*scale, j) > 0.0))
            rc = lsefit_fail("%s: standardize.scale[%zu] is %g: it must be "
                             "> 0",
                             path, j, gsl_vector_get(*scale, j));
    if (rc != LSEFIT_OK) {
        gsl_vector_free(*mean);
        gsl_vector_free(*scale);
        *mean = NULL;
        *scale = NULL;
    }
    return rc;
}

int lsefit_json_check_model(const lse_json *doc, const char *path,
                            const char *model)
{
    lse_error err;
    const char *got = NULL;
    if (lse_json_get_string(doc, "model", &got, &err) != LSE_OK)
        return lsefit_fail_lib(&err, " (not an lsefit model file?)");
    if (strcmp(got, model) != 0 &&
        (strcmp(got, "gmm") == 0 || strcmp(got, "slds") == 0))
        return lsefit_fail("%s: model is '%s', expected '%s' (use 'lsefit %s "
                           "...' for this file)",
                           path, got, model, got);
    if (strcmp(got, model) != 0)
        return lsefit_fail("%s: model is '%s', expected '%s'", path, got,
                           model);
    return LSEFIT_OK;
}

int lsefit_json_get_count(const lse_json *doc, const char *path,
                          const char *key, size_t *out)
{
    lse_error err;
    long long v = 0;
    if (lse_json_get_integer(doc, key, &v, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    if (v < 1 || v > 1000000)
        return lsefit_fail("%s: key '%s' is %lld: expected an integer in "
                           "1..1000000",
                           path, key, v);
    *out = (size_t)v;
    return LSEFIT_OK;
}
