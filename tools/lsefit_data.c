/* lsefit: data sets. Reads a CSV file with the library's reader
 * (lse_table_*), picks the numeric columns, the sample weights and the
 * sequence ids, applies the missing-value policy, refuses constant columns
 * and standardizes. Every message names the file, and the line and column
 * where one applies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit.h"

int lsefit_split_list(const char *s, char ***out, size_t *n)
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
            return lsefit_fail("empty name in the list '%s'", s);
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
        rc = lsefit_split_list(o->columns, &list, &n_list);
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
            if (lse_table_find_column(t, o->model_names[i], &j, &err) != LSE_OK)
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

int lsefit_data_load(const lsefit_data_opts *o, lsefit_data *out)
{
    memset(out, 0, sizeof *out);
    lse_error err;
    lse_table *t = NULL;
    if (lse_table_read(o->path, NULL, &t, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    return lsefit_data_from_table(o, t, out);
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
        rc = lsefit_split_list(o->ignore, &list, &n_list);
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
        const lse_status st = lse_table_to_matrix(
            t, all, d + (wc < n_cols), o->missing, &m, &out->rows, &err);
        if (st != LSE_OK) {
            const char *hint = NULL;
            if (strstr(err.message, "is not a number") != NULL)
                hint = "; leave a non-numeric column out with --ignore NAME "
                       "or choose columns with --columns";
            else if (strstr(err.message, "missing value") != NULL)
                hint = "; use --missing drop to leave such rows out";
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

int lsefit_data_check_constant(const lsefit_data *data, int reg_covar_given)
{
    const gsl_matrix *x = data->x;
    for (size_t j = 0; j < x->size2; j++) {
        size_t i = 0;
        while (i < x->size1 && isnan(gsl_matrix_get(x, i, j)))
            i++;
        if (i == x->size1)
            return lsefit_fail("%s: column '%s' has no observed value",
                               lse_table_name(data->table), data->names[j]);
        if (reg_covar_given)
            continue;
        const double first = gsl_matrix_get(x, i, j);
        for (i++; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isnan(v) && v != first)
                break;
        }
        if (i == x->size1)
            return lsefit_fail(
                "%s: column '%s' is constant (every value is %.17g): its "
                "variance is 0 and the covariance is singular; pass "
                "--reg-covar X (e.g. 1e-3) to fit anyway, or leave the column "
                "out with --ignore",
                lse_table_name(data->table), data->names[j], first);
    }
    return LSEFIT_OK;
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

static int alloc_standardize(lsefit_data *data)
{
    data->mean = gsl_vector_alloc(data->d);
    data->scale = gsl_vector_alloc(data->d);
    if (data->mean == NULL || data->scale == NULL)
        return lsefit_fail("out of memory");
    return LSEFIT_OK;
}

static void apply(gsl_matrix *x, const gsl_vector *mean,
                  const gsl_vector *scale)
{
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++)
            gsl_matrix_set(x, i, j,
                           (gsl_matrix_get(x, i, j) - gsl_vector_get(mean, j)) /
                               gsl_vector_get(scale, j));
}

int lsefit_data_standardize(lsefit_data *data)
{
    const int rc = alloc_standardize(data);
    if (rc != LSEFIT_OK)
        return rc;
    const gsl_matrix *x = data->x;
    for (size_t j = 0; j < x->size2; j++) { /* over the observed values */
        double mean = 0.0, n = 0.0;
        for (size_t i = 0; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isnan(v)) {
                mean += v;
                n += 1.0;
            }
        }
        mean /= n;
        double ss = 0.0;
        for (size_t i = 0; i < x->size1; i++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isnan(v))
                ss += (v - mean) * (v - mean);
        }
        const double sd = sqrt(ss / n);
        gsl_vector_set(data->mean, j, mean);
        /* scikit-learn's StandardScaler keeps a constant column as is */
        gsl_vector_set(data->scale, j, sd > 0.0 ? sd : 1.0);
    }
    apply(data->x, data->mean, data->scale);
    return LSEFIT_OK;
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

int lsefit_json_get_names(const lse_json *doc, const char *path, size_t d,
                          char ***names)
{
    lse_error err;
    size_t n = 0;
    *names = NULL;
    if (lse_json_get_strings(doc, "feature_names", names, &n, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    if (n != d) {
        free(*names);
        *names = NULL;
        return lsefit_fail("%s: key 'feature_names' has %zu names but "
                           "n_features is %zu",
                           path, n, d);
    }
    return LSEFIT_OK;
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
