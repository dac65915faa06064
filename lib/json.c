/* JSON documents for model files: a thin typed layer over jansson, which
 * stays out of the public header. Numbers are written with 17 significant
 * digits, so every double reads back bit-exact; see docs/io.md. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graph-private.h"
#include "size-private.h"

struct lse_json {
    json_t *obj;  /* a JSON object; this handle owns one reference */
    char *file;   /* file name for messages, or NULL */
    char *prefix; /* "" at the top, "options." inside "options" */
};

/* ------------------------------------------------------------------ */
/* Handles and messages                                                */
/* ------------------------------------------------------------------ */

static char *copy_string(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

/* A handle on obj (the reference is stolen, even on failure). */
static lse_json *wrap(json_t *obj, const char *file, const char *prefix,
                      const char *key)
{
    lse_json *doc = calloc(1, sizeof *doc);
    if (doc == NULL) {
        json_decref(obj);
        return NULL;
    }
    doc->obj = obj;
    if (file != NULL)
        doc->file = copy_string(file);
    const size_t np = strlen(prefix), nk = key != NULL ? strlen(key) : 0;
    doc->prefix = malloc(np + nk + 2);
    if (obj == NULL || (file != NULL && doc->file == NULL) ||
        doc->prefix == NULL) {
        lse_json_free(doc);
        return NULL;
    }
    memcpy(doc->prefix, prefix, np);
    if (key != NULL) {
        memcpy(doc->prefix + np, key, nk);
        doc->prefix[np + nk] = '.';
        doc->prefix[np + nk + 1] = '\0';
    } else {
        doc->prefix[np] = '\0';
    }
    return doc;
}

lse_json *lse_json_new_object(void)
{
    return wrap(json_object(), NULL, "", NULL);
}

void lse_json_free(lse_json *doc)
{
    if (doc == NULL)
        return;
    json_decref(doc->obj);
    free(doc->file);
    free(doc->prefix);
    free(doc);
}

/* "func: file: key 'prefix.key' <detail>" */
static lse_status key_fail(const lse_json *doc, const char *key,
                           lse_status status, const char *func, lse_error *err,
                           const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static lse_status key_fail(const lse_json *doc, const char *key,
                           lse_status status, const char *func, lse_error *err,
                           const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return lse_error_set(err, status, func, "%s%skey '%.80s%.80s' %s",
                         doc->file != NULL ? doc->file : "",
                         doc->file != NULL ? ": " : "", doc->prefix, key,
                         detail);
}

/* 1 when s is valid UTF-8 as jansson accepts it (no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p != 0) {
        const unsigned c = *p;
        size_t n;
        unsigned long cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07u;
        } else {
            return 0;
        }
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xC0u) != 0x80u) /* also stops at the NUL */
                return 0;
            cp = (cp << 6) | (p[i] & 0x3Fu);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Reading and writing documents                                       */
/* ------------------------------------------------------------------ */

lse_status lse_json_parse(const char *text, size_t len, const char *name,
                          lse_json **out, lse_error *err)
{
    if (out == NULL || (text == NULL && len > 0))
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "out and text must not be NULL");
    *out = NULL;
    const char *shown = name != NULL ? name : "<memory>";
    json_error_t jerr;
    json_t *root = json_loadb(text != NULL ? text : "", len,
                              JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return lse_error_set(err, LSE_ENOMEM, __func__, "%s: out of memory",
                                 shown);
        return lse_error_set(err, LSE_EPARSE, __func__, "%s:%d:%d: %s", shown,
                             jerr.line, jerr.column, jerr.text);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return lse_error_set(err, LSE_EPARSE, __func__,
                             "%s: the top level must be an object {...}",
                             shown);
    }
    lse_json *doc = wrap(root, shown, "", NULL);
    if (doc == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    *out = doc;
    return LSE_OK;
}

lse_status lse_json_load(const char *path, lse_json **out, lse_error *err)
{
    if (path == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "path and out must not be NULL");
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    lse_status status = lse_file_read(path, &text, &len, err);
    if (status != LSE_OK)
        return status;
    status = lse_json_parse(
        text, len, strcmp(path, "-") == 0 ? "<stdin>" : path, out, err);
    free(text);
    return status;
}

static void indent_to(FILE *f, int indent)
{
    for (int i = 0; i < indent; i++)
        fputc(' ', f);
}

/* A scalar (or a key wrapped in a string) exactly as jansson writes it. */
static int emit_scalar(FILE *f, const json_t *v)
{
    const size_t flags = JSON_ENCODE_ANY | JSON_REAL_PRECISION(17);
    char buf[64];
    const size_t n = json_dumpb(v, buf, sizeof buf, flags);
    if (n == 0)
        return -1;
    if (n <= sizeof buf)
        return fwrite(buf, 1, n, f) == n ? 0 : -1;
    char *s = json_dumps(v, flags);
    if (s == NULL)
        return -1;
    const int rc = fputs(s, f) < 0 ? -1 : 0;
    free(s);
    return rc;
}

static int is_container(const json_t *v)
{
    return json_is_array(v) || json_is_object(v);
}

/* Pretty printer: objects one key per line; arrays of scalars on one line;
 * arrays of arrays one element per line (a matrix is one row per line). */
static int emit(FILE *f, const json_t *v, int indent)
{
    if (json_is_object(v)) {
        json_t *obj = (json_t *)v; /* jansson's iterators are not const */
        if (json_object_size(obj) == 0)
            return fputs("{}", f) < 0 ? -1 : 0;
        fputs("{\n", f);
        int first = 1;
        for (void *it = json_object_iter(obj); it != NULL;
             it = json_object_iter_next(obj, it)) {
            if (!first)
                fputs(",\n", f);
            first = 0;
            indent_to(f, indent + 2);
            json_t *key = json_stringn(json_object_iter_key(it),
                                       json_object_iter_key_len(it));
            const int rc = key != NULL ? emit_scalar(f, key) : -1;
            json_decref(key);
            if (rc != 0)
                return -1;
            fputs(": ", f);
            if (emit(f, json_object_iter_value(it), indent + 2) != 0)
                return -1;
        }
        fputc('\n', f);
        indent_to(f, indent);
        fputc('}', f);
        return 0;
    }
    if (json_is_array(v)) {
        const size_t n = json_array_size(v);
        if (n == 0)
            return fputs("[]", f) < 0 ? -1 : 0;
        int flat = 1;
        for (size_t i = 0; i < n && flat; i++)
            flat = !is_container(json_array_get(v, i));
        fputs(flat ? "[" : "[\n", f);
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                fputs(flat ? ", " : ",\n", f);
            if (!flat)
                indent_to(f, indent + 2);
            if (emit(f, json_array_get(v, i), indent + 2) != 0)
                return -1;
        }
        if (!flat) {
            fputc('\n', f);
            indent_to(f, indent);
        }
        fputc(']', f);
        return 0;
    }
    return emit_scalar(f, v);
}

lse_status lse_json_to_string(const lse_json *doc, char **text, lse_error *err)
{
    if (doc == NULL || text == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "doc and text must not be NULL");
    *text = NULL;
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (f == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    const int rc = emit(f, doc->obj, 0);
    fputc('\n', f);
    const int failed = rc != 0 || ferror(f);
    if (fclose(f) != 0 || failed) {
        free(buf);
        return lse_error_set(err, LSE_ENOMEM, __func__,
                             "out of memory writing JSON");
    }
    *text = buf;
    return LSE_OK;
}

lse_status lse_json_save(const lse_json *doc, const char *path, lse_error *err)
{
    if (doc == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "doc and path must not be NULL");
    char *text = NULL;
    lse_status status = lse_json_to_string(doc, &text, err);
    if (status == LSE_OK)
        status = lse_file_write_atomic(path, text, strlen(text), err);
    free(text);
    return status;
}

int lse_json_has(const lse_json *doc, const char *key)
{
    if (doc == NULL || key == NULL)
        return 0;
    return json_object_get(doc->obj, key) != NULL;
}

/* ------------------------------------------------------------------ */
/* Setters                                                             */
/* ------------------------------------------------------------------ */

static lse_status check_key(const lse_json *doc, const char *key,
                            const char *func, lse_error *err)
{
    if (doc == NULL || key == NULL)
        return lse_error_set(err, LSE_EFAULT, func,
                             "doc and key must not be NULL");
    if (key[0] == '\0')
        return lse_error_set(err, LSE_EINVAL, func, "empty key");
    if (!valid_utf8(key))
        return lse_error_set(err, LSE_EINVAL, func, "key is not valid UTF-8");
    return LSE_OK;
}

/* Store v (stolen; NULL means out of memory) under key. */
static lse_status put(lse_json *doc, const char *key, json_t *v,
                      const char *func, lse_error *err)
{
    if (v == NULL || json_object_set_new(doc->obj, key, v) != 0)
        return lse_error_set(err, LSE_ENOMEM, func,
                             "out of memory setting key '%.80s'", key);
    return LSE_OK;
}

/* A JSON array of the n numbers x[0], x[stride], ...; NULL when out of
 * memory. The caller has checked that they are finite. */
static json_t *number_array(const double *x, size_t n, size_t stride)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_real(x[i * stride])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

/* Rows first .. first + rows - 1 of m as [[...], ...]. */
static json_t *matrix_array(const gsl_matrix *m, size_t first, size_t rows)
{
    json_t *a = json_array();
    for (size_t i = first; a != NULL && i < first + rows; i++) {
        const gsl_vector_const_view row = gsl_matrix_const_row(m, i);
        json_t *r = number_array(row.vector.data, m->size2, row.vector.stride);
        if (json_array_append_new(a, r) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

/* LSE_OK when every entry of m is finite. */
static lse_status check_finite(const lse_json *doc, const char *key,
                               const gsl_matrix *m, const char *func,
                               lse_error *err)
{
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++)
            if (!isfinite(gsl_matrix_get(m, i, j)))
                return key_fail(doc, key, LSE_ENONFINITE, func, err,
                                "entry (%zu, %zu) is %g: JSON has no NaN "
                                "or infinity",
                                i, j, gsl_matrix_get(m, i, j));
    return LSE_OK;
}

lse_status lse_json_set_number(lse_json *doc, const char *key, double x,
                               lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (!isfinite(x))
        return key_fail(doc, key, LSE_ENONFINITE, __func__, err,
                        "cannot be %g: JSON has no NaN or infinity", x);
    return put(doc, key, json_real(x), __func__, err);
}

lse_status lse_json_set_integer(lse_json *doc, const char *key, long long x,
                                lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    return put(doc, key, json_integer((json_int_t)x), __func__, err);
}

lse_status lse_json_set_bool(lse_json *doc, const char *key, int x,
                             lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    return put(doc, key, json_boolean(x), __func__, err);
}

lse_status lse_json_set_string(lse_json *doc, const char *key, const char *s,
                               lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (s == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "string must not be NULL");
    if (!valid_utf8(s))
        return key_fail(doc, key, LSE_EINVAL, __func__, err,
                        "value is not valid UTF-8");
    return put(doc, key, json_string(s), __func__, err);
}

lse_status lse_json_set_strings(lse_json *doc, const char *key,
                                const char *const *s, size_t n, lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (s == NULL && n > 0)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "strings must not be NULL");
    for (size_t i = 0; i < n; i++) {
        if (s[i] == NULL)
            return lse_error_set(err, LSE_EFAULT, __func__,
                                 "string %zu is NULL", i);
        if (!valid_utf8(s[i]))
            return key_fail(doc, key, LSE_EINVAL, __func__, err,
                            "string %zu is not valid UTF-8", i);
    }
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_string(s[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return put(doc, key, a, __func__, err);
}

lse_status lse_json_set_vector(lse_json *doc, const char *key,
                               const gsl_vector *v, lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (v == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "vector must not be NULL");
    for (size_t i = 0; i < v->size; i++)
        if (!isfinite(gsl_vector_get(v, i)))
            return key_fail(doc, key, LSE_ENONFINITE, __func__, err,
                            "entry %zu is %g: JSON has no NaN or infinity", i,
                            gsl_vector_get(v, i));
    return put(doc, key, number_array(v->data, v->size, v->stride), __func__,
               err);
}

lse_status lse_json_set_matrix(lse_json *doc, const char *key,
                               const gsl_matrix *m, lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (m == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "matrix must not be NULL");
    status = check_finite(doc, key, m, __func__, err);
    if (status != LSE_OK)
        return status;
    return put(doc, key, matrix_array(m, 0, m->size1), __func__, err);
}

lse_status lse_json_set_matrices(lse_json *doc, const char *key,
                                 const gsl_matrix *const *ms, size_t k,
                                 lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (k == 0)
        return key_fail(doc, key, LSE_EINVAL, __func__, err,
                        "needs at least one matrix");
    if (ms == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "matrices must not be NULL");
    for (size_t i = 0; i < k; i++) {
        if (ms[i] == NULL)
            return lse_error_set(err, LSE_EFAULT, __func__,
                                 "matrix %zu is NULL", i);
        if (ms[i]->size1 != ms[0]->size1 || ms[i]->size2 != ms[0]->size2)
            return key_fail(doc, key, LSE_EDIM, __func__, err,
                            "matrix %zu is %zu x %zu, matrix 0 is %zu x %zu", i,
                            ms[i]->size1, ms[i]->size2, ms[0]->size1,
                            ms[0]->size2);
        status = check_finite(doc, key, ms[i], __func__, err);
        if (status != LSE_OK)
            return status;
    }
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < k; i++) {
        if (json_array_append_new(a, matrix_array(ms[i], 0, ms[i]->size1)) !=
            0) {
            json_decref(a);
            a = NULL;
        }
    }
    return put(doc, key, a, __func__, err);
}

lse_status lse_json_set_stack(lse_json *doc, const char *key,
                              const gsl_matrix *stacked, size_t k,
                              lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (stacked == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "matrix must not be NULL");
    if (k == 0)
        return key_fail(doc, key, LSE_EINVAL, __func__, err,
                        "needs at least one block");
    if (stacked->size1 % k != 0)
        return key_fail(doc, key, LSE_EDIM, __func__, err,
                        "%zu rows do not split into %zu blocks", stacked->size1,
                        k);
    status = check_finite(doc, key, stacked, __func__, err);
    if (status != LSE_OK)
        return status;
    const size_t r = stacked->size1 / k;
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < k; i++) {
        if (json_array_append_new(a, matrix_array(stacked, i * r, r)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return put(doc, key, a, __func__, err);
}

lse_status lse_json_set_object(lse_json *doc, const char *key,
                               const lse_json *value, lse_error *err)
{
    lse_status status = check_key(doc, key, __func__, err);
    if (status != LSE_OK)
        return status;
    if (value == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "value must not be NULL");
    return put(doc, key, json_deep_copy(value->obj), __func__, err);
}

/* ------------------------------------------------------------------ */
/* Getters                                                             */
/* ------------------------------------------------------------------ */

/* The value under key, or LSE_ENOTFOUND. */
static lse_status lookup(const lse_json *doc, const char *key, const void *out,
                         const char *func, lse_error *err, const json_t **v)
{
    if (doc == NULL || key == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, func,
                             "doc, key and out must not be NULL");
    *v = json_object_get(doc->obj, key);
    if (*v == NULL)
        return lse_error_set(err, LSE_ENOTFOUND, func,
                             "%s%sno key '%.80s%.80s'",
                             doc->file != NULL ? doc->file : "",
                             doc->file != NULL ? ": " : "", doc->prefix, key);
    return LSE_OK;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

lse_status lse_json_get_number(const lse_json *doc, const char *key,
                               double *out, lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, __func__, err, &v);
    if (status != LSE_OK)
        return status;
    if (!json_is_number(v))
        return key_fail(doc, key, LSE_EPARSE, __func__, err,
                        "must be a number, not %s", type_name(v));
    *out = json_number_value(v);
    return LSE_OK;
}

lse_status lse_json_get_integer(const lse_json *doc, const char *key,
                                long long *out, lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, __func__, err, &v);
    if (status != LSE_OK)
        return status;
    if (json_is_integer(v)) {
        *out = (long long)json_integer_value(v);
        return LSE_OK;
    }
    const double x = json_is_real(v) ? json_real_value(v) : 0.5;
    /* [-2^63, 2^63): the doubles that convert to long long exactly */
    if (x != floor(x) || x < -9223372036854775808.0 ||
        x >= 9223372036854775808.0)
        return key_fail(doc, key, LSE_EPARSE, __func__, err,
                        "must be an integer, not %s", type_name(v));
    *out = (long long)x;
    return LSE_OK;
}

lse_status lse_json_get_bool(const lse_json *doc, const char *key, int *out,
                             lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, __func__, err, &v);
    if (status != LSE_OK)
        return status;
    if (!json_is_boolean(v))
        return key_fail(doc, key, LSE_EPARSE, __func__, err,
                        "must be true or false, not %s", type_name(v));
    *out = json_is_true(v);
    return LSE_OK;
}

lse_status lse_json_get_string(const lse_json *doc, const char *key,
                               const char **out, lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, __func__, err, &v);
    if (status != LSE_OK)
        return status;
    if (!json_is_string(v))
        return key_fail(doc, key, LSE_EPARSE, __func__, err,
                        "must be a string, not %s", type_name(v));
    *out = json_string_value(v);
    return LSE_OK;
}

lse_status lse_json_get_strings(const lse_json *doc, const char *key,
                                char ***out, size_t *n, lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, __func__, err, &v);
    if (status != LSE_OK)
        return status;
    if (n == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__, "n must not be NULL");
    if (!json_is_array(v))
        return key_fail(doc, key, LSE_EPARSE, __func__, err,
                        "must be an array of strings, not %s", type_name(v));
    const size_t count = json_array_size(v);
    size_t bytes;
    if (lse_size_add(count, 1, &bytes) ||
        lse_size_mul(bytes, sizeof(char *), &bytes))
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const json_t *s = json_array_get(v, i);
        if (!json_is_string(s))
            return key_fail(doc, key, LSE_EPARSE, __func__, err,
                            "must be an array of strings: element %zu is %s", i,
                            type_name(s));
        if (lse_size_add(bytes, strlen(json_string_value(s)) + 1, &bytes))
            return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    }
    char **block = malloc(bytes);
    if (block == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    char *text = (char *)(block + count + 1);
    for (size_t i = 0; i < count; i++) {
        const char *s = json_string_value(json_array_get(v, i));
        const size_t len = strlen(s) + 1;
        memcpy(text, s, len);
        block[i] = text;
        text += len;
    }
    block[count] = NULL;
    *out = block;
    *n = count;
    return LSE_OK;
}

/* Shape of a non-empty rectangular array of numbers nested `depth` deep,
 * into shape[0..depth); 0 when v is not one. */
static int is_rectangular(const json_t *v, int depth, const size_t *shape,
                          int d)
{
    if (d == depth)
        return json_is_number(v);
    if (!json_is_array(v) || json_array_size(v) != shape[d])
        return 0;
    for (size_t i = 0; i < shape[d]; i++)
        if (!is_rectangular(json_array_get(v, i), depth, shape, d + 1))
            return 0;
    return 1;
}

static int array_shape(const json_t *v, int depth, size_t *shape)
{
    const json_t *x = v;
    for (int d = 0; d < depth; d++) {
        if (!json_is_array(x) || json_array_size(x) == 0)
            return 0;
        shape[d] = json_array_size(x);
        x = json_array_get(x, 0);
    }
    return is_rectangular(v, depth, shape, 0);
}

/* "3 x * x 2" for the expected shape (0 = any). */
static void shape_text(char *buf, size_t size, int depth, const size_t *shape)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < depth && used < size; d++) {
        const char *sep = d > 0 ? " x " : "";
        const int n =
            shape[d] > 0
                ? snprintf(buf + used, size - used, "%s%zu", sep, shape[d])
                : snprintf(buf + used, size - used, "%s*", sep);
        if (n < 0)
            return;
        used += (size_t)n;
    }
}

/* Read a numeric array of the given depth whose shape matches want (0 =
 * any) into a (prod of all but the last, last) matrix, row-major. */
static lse_status get_numbers(const lse_json *doc, const char *key, int depth,
                              const size_t *want, size_t *shape,
                              gsl_matrix **out, const char *func,
                              lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, func, err, &v);
    if (status != LSE_OK)
        return status;
    *out = NULL;
    char expect[96];
    shape_text(expect, sizeof expect, depth, want);
    const char *what = depth == 1 ? "an array of" : "a";
    const char *tail = depth == 1 ? " numbers" : " array of numbers";
    if (!array_shape(v, depth, shape))
        return key_fail(doc, key, LSE_EPARSE, func, err,
                        "must be %s %s%s (%s, not empty)", what, expect, tail,
                        depth == 1 ? "no other values" : "equal-length arrays");
    for (int d = 0; d < depth; d++) {
        if (want[d] != 0 && want[d] != shape[d]) {
            char got[96];
            shape_text(got, sizeof got, depth, shape);
            return key_fail(doc, key, LSE_EPARSE, func, err,
                            "must be %s %s%s, got %s", what, expect, tail, got);
        }
    }
    size_t rows = 1;
    for (int d = 0; d + 1 < depth; d++)
        if (lse_size_mul(rows, shape[d], &rows))
            return key_fail(doc, key, LSE_ENOMEM, func, err, "is too big");
    const size_t cols = shape[depth - 1];
    if (lse_size_matrix_overflows(rows, cols))
        return key_fail(doc, key, LSE_ENOMEM, func, err,
                        "is too big: %zu x %zu doubles exceed the address "
                        "space",
                        rows, cols);
    lse_gsl_quiet();
    gsl_matrix *m = gsl_matrix_alloc(rows, cols);
    if (m == NULL)
        return lse_error_set(err, LSE_ENOMEM, func,
                             "out of memory for a %zu x %zu matrix", rows,
                             cols);
    /* walk the flattened index f = row * cols + col through the nest */
    for (size_t f = 0; f < rows * cols; f++) {
        size_t rest = f, stride = rows * cols;
        const json_t *x = v;
        for (int d = 0; d < depth; d++) {
            stride /= shape[d];
            x = json_array_get(x, rest / stride);
            rest %= stride;
        }
        gsl_matrix_set(m, f / cols, f % cols, json_number_value(x));
    }
    *out = m;
    return LSE_OK;
}

lse_status lse_json_get_vector(const lse_json *doc, const char *key, size_t n,
                               gsl_vector **out, lse_error *err)
{
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__, "out must not be NULL");
    *out = NULL;
    size_t shape[1];
    gsl_matrix *m = NULL;
    const size_t want[1] = {n};
    lse_status status =
        get_numbers(doc, key, 1, want, shape, &m, __func__, err);
    if (status != LSE_OK)
        return status;
    gsl_vector *v = gsl_vector_alloc(shape[0]);
    if (v == NULL) {
        gsl_matrix_free(m);
        return lse_error_set(err, LSE_ENOMEM, __func__,
                             "out of memory for a vector of %zu", shape[0]);
    }
    const gsl_vector_const_view row = gsl_matrix_const_row(m, 0);
    gsl_vector_memcpy(v, &row.vector);
    gsl_matrix_free(m);
    *out = v;
    return LSE_OK;
}

lse_status lse_json_get_matrix(const lse_json *doc, const char *key,
                               size_t rows, size_t cols, gsl_matrix **out,
                               lse_error *err)
{
    size_t shape[2];
    const size_t want[2] = {rows, cols};
    return get_numbers(doc, key, 2, want, shape, out, __func__, err);
}

lse_status lse_json_get_stack(const lse_json *doc, const char *key, size_t k,
                              size_t rows, size_t cols, gsl_matrix **out,
                              size_t *k_out, lse_error *err)
{
    size_t shape[3];
    const size_t want[3] = {k, rows, cols};
    lse_status status =
        get_numbers(doc, key, 3, want, shape, out, __func__, err);
    if (status == LSE_OK && k_out != NULL)
        *k_out = shape[0];
    return status;
}

lse_status lse_json_get_object(const lse_json *doc, const char *key,
                               lse_json **out, lse_error *err)
{
    const json_t *v = NULL;
    lse_status status = lookup(doc, key, out, __func__, err, &v);
    if (status != LSE_OK)
        return status;
    *out = NULL;
    if (!json_is_object(v))
        return key_fail(doc, key, LSE_EPARSE, __func__, err,
                        "must be an object, not %s", type_name(v));
    lse_json *copy = wrap(json_deep_copy(v), doc->file, doc->prefix, key);
    if (copy == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    *out = copy;
    return LSE_OK;
}
