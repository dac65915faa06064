/* Tests for lib/json.c: typed JSON documents for model files. */
#include <dirent.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lse_check.h"
#include "lse_tmpdir.h"

/* ------------------------------------------------------------------ */
/* Fixture: a fresh temporary directory per test                       */
/* ------------------------------------------------------------------ */

static char dir[64];

static void setup(void) { lse_tmpdir_make(dir, sizeof dir, "json"); }

static void teardown(void) { lse_tmpdir_remove(dir); }

static void path_of(const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
}

static void write_text(const char *name, const char *text)
{
    char path[256];
    path_of(name, path, sizeof path);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
}

#define assert_msg_has(err, want)                                              \
    ck_assert_msg(strstr((err).message, (want)) != NULL,                       \
                  "message '%s' lacks '%s'", (err).message, (want))

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void assert_same_matrix(const gsl_matrix *a, const gsl_matrix *b)
{
    ck_assert_uint_eq(a->size1, b->size1);
    ck_assert_uint_eq(a->size2, b->size2);
    for (size_t i = 0; i < a->size1; i++)
        for (size_t j = 0; j < a->size2; j++)
            ck_assert_msg(
                same_bits(gsl_matrix_get(a, i, j), gsl_matrix_get(b, i, j)),
                "(%zu, %zu): %.17g != %.17g", i, j, gsl_matrix_get(a, i, j),
                gsl_matrix_get(b, i, j));
}

/* Doubles that are hard to print: each must come back bit-exact. */
static const double hard[] = {0.1,     1e-300,  -2.5e17, -0.0,  4.9e-324,
                              DBL_MAX, DBL_MIN, 1.0 / 3, 2.385, -0.4127,
                              1e22,    5e-324,  0.0,     1e-7,  123456789.0};
#define N_HARD (sizeof hard / sizeof hard[0])

/* ------------------------------------------------------------------ */
/* Round trips                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_round_trip_every_type)
{
    lse_error err;
    lse_json *doc = lse_json_new_object();
    ck_assert_ptr_nonnull(doc);
    char key[16];
    for (size_t k = 0; k < N_HARD; k++) {
        snprintf(key, sizeof key, "x%zu", k);
        lse_assert_ok(lse_json_set_number(doc, key, hard[k], &err));
    }
    lse_assert_ok(lse_json_set_integer(doc, "imin", LLONG_MIN, &err));
    lse_assert_ok(lse_json_set_integer(doc, "imax", LLONG_MAX, &err));
    lse_assert_ok(lse_json_set_bool(doc, "yes", 7, &err));
    lse_assert_ok(lse_json_set_bool(doc, "no", 0, &err));
    const char *text =
        "\xC2\xB5 \xE2\x88\x91 \"quoted\" \\ \n\ttab \xF0\x9F\x98\x80";
    lse_assert_ok(lse_json_set_string(doc, "model", text, &err));
    const char *names[3] = {"eruptions", "", "w\xC3\xA4iting"};
    lse_assert_ok(lse_json_set_strings(doc, "names", names, 3, &err));
    lse_assert_ok(lse_json_set_strings(doc, "none", NULL, 0, &err));

    gsl_vector *v = gsl_vector_alloc(N_HARD);
    for (size_t k = 0; k < N_HARD; k++)
        gsl_vector_set(v, k, hard[k]);
    lse_assert_ok(lse_json_set_vector(doc, "weights", v, &err));
    /* a strided vector: a matrix column */
    gsl_matrix *big = gsl_matrix_alloc(5, 6);
    for (size_t k = 0; k < 30; k++)
        gsl_matrix_set(big, k / 6, k % 6, hard[k % N_HARD] + (double)k);
    const gsl_vector_view col = gsl_matrix_column(big, 4);
    lse_assert_ok(lse_json_set_vector(doc, "column", &col.vector, &err));
    /* a submatrix view: tda != size2 */
    gsl_matrix_view sub = gsl_matrix_submatrix(big, 1, 1, 3, 2);
    lse_assert_ok(lse_json_set_matrix(doc, "means", &sub.matrix, &err));
    /* K = 2 blocks of (2, 3) */
    gsl_matrix_view b0 = gsl_matrix_submatrix(big, 0, 0, 2, 3);
    gsl_matrix_view b1 = gsl_matrix_submatrix(big, 2, 3, 2, 3);
    const gsl_matrix *blocks[2] = {&b0.matrix, &b1.matrix};
    lse_assert_ok(lse_json_set_matrices(doc, "covs", blocks, 2, &err));
    gsl_matrix_view stacked = gsl_matrix_submatrix(big, 0, 0, 4, 3);
    lse_assert_ok(lse_json_set_stack(doc, "stack", &stacked.matrix, 2, &err));

    lse_json *opts = lse_json_new_object();
    lse_assert_ok(lse_json_set_integer(opts, "seed", 42, &err));
    lse_assert_ok(lse_json_set_string(opts, "covariance", "full", &err));
    lse_assert_ok(lse_json_set_object(doc, "options", opts, &err));
    lse_json_free(opts);

    char path[256];
    path_of("model.json", path, sizeof path);
    lse_assert_ok(lse_json_save(doc, path, &err));
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1);

    lse_json *back = NULL;
    lse_assert_ok(lse_json_load(path, &back, &err));
    for (size_t k = 0; k < N_HARD; k++) {
        snprintf(key, sizeof key, "x%zu", k);
        double x = NAN;
        lse_assert_ok(lse_json_get_number(back, key, &x, &err));
        ck_assert_msg(same_bits(x, hard[k]), "%s: %.17g != %.17g", key, x,
                      hard[k]);
    }
    long long i = 0;
    lse_assert_ok(lse_json_get_integer(back, "imin", &i, &err));
    ck_assert(i == LLONG_MIN);
    lse_assert_ok(lse_json_get_integer(back, "imax", &i, &err));
    ck_assert(i == LLONG_MAX);
    int flag = -1;
    lse_assert_ok(lse_json_get_bool(back, "yes", &flag, &err));
    ck_assert_int_eq(flag, 1);
    lse_assert_ok(lse_json_get_bool(back, "no", &flag, &err));
    ck_assert_int_eq(flag, 0);
    const char *s = NULL;
    lse_assert_ok(lse_json_get_string(back, "model", &s, &err));
    ck_assert_str_eq(s, text);
    char **strs = NULL;
    size_t n = 0;
    lse_assert_ok(lse_json_get_strings(back, "names", &strs, &n, &err));
    ck_assert_uint_eq(n, 3);
    for (size_t k = 0; k < 3; k++)
        ck_assert_str_eq(strs[k], names[k]);
    ck_assert_ptr_null(strs[3]);
    free(strs);
    lse_assert_ok(lse_json_get_strings(back, "none", &strs, &n, &err));
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(strs[0]);
    free(strs);

    gsl_vector *vb = NULL;
    lse_assert_ok(lse_json_get_vector(back, "weights", N_HARD, &vb, &err));
    for (size_t k = 0; k < N_HARD; k++)
        ck_assert(same_bits(gsl_vector_get(vb, k), hard[k]));
    gsl_vector_free(vb);
    lse_assert_ok(lse_json_get_vector(back, "column", 0, &vb, &err));
    ck_assert_uint_eq(vb->size, 5);
    for (size_t k = 0; k < 5; k++)
        ck_assert(
            same_bits(gsl_vector_get(vb, k), gsl_vector_get(&col.vector, k)));
    gsl_vector_free(vb);

    gsl_matrix *m = NULL;
    lse_assert_ok(lse_json_get_matrix(back, "means", 3, 2, &m, &err));
    assert_same_matrix(m, &sub.matrix);
    gsl_matrix_free(m);

    size_t k_out = 0;
    lse_assert_ok(lse_json_get_stack(back, "covs", 2, 2, 3, &m, &k_out, &err));
    ck_assert_uint_eq(k_out, 2);
    gsl_matrix_view top = gsl_matrix_submatrix(m, 0, 0, 2, 3);
    gsl_matrix_view bottom = gsl_matrix_submatrix(m, 2, 0, 2, 3);
    assert_same_matrix(&top.matrix, &b0.matrix);
    assert_same_matrix(&bottom.matrix, &b1.matrix);
    gsl_matrix_free(m);
    lse_assert_ok(lse_json_get_stack(back, "stack", 0, 0, 0, &m, NULL, &err));
    assert_same_matrix(m, &stacked.matrix);
    gsl_matrix_free(m);

    lse_json *o = NULL;
    lse_assert_ok(lse_json_get_object(back, "options", &o, &err));
    lse_assert_ok(lse_json_get_integer(o, "seed", &i, &err));
    ck_assert(i == 42);
    lse_assert_ok(lse_json_get_string(o, "covariance", &s, &err));
    ck_assert_str_eq(s, "full");
    lse_json_free(o);

    /* writing what was read gives the same text */
    char *t1 = NULL, *t2 = NULL;
    lse_assert_ok(lse_json_to_string(doc, &t1, &err));
    lse_assert_ok(lse_json_to_string(back, &t2, &err));
    ck_assert_str_eq(t1, t2);
    free(t1);
    free(t2);

    lse_json_free(back);
    lse_json_free(doc);
    gsl_vector_free(v);
    gsl_matrix_free(big);
}
END_TEST

START_TEST(test_pretty_text)
{
    lse_error err;
    lse_json *doc = lse_json_new_object();
    gsl_matrix *m = gsl_matrix_alloc(2, 2);
    gsl_vector *w = gsl_vector_alloc(2);
    gsl_matrix_set(m, 0, 0, 1.0);
    gsl_matrix_set(m, 0, 1, 2.0);
    gsl_matrix_set(m, 1, 0, -3.5);
    gsl_matrix_set(m, 1, 1, 0.25);
    gsl_vector_set_all(w, 0.5);
    lse_json *empty = lse_json_new_object();
    lse_assert_ok(lse_json_set_string(doc, "model", "gmm", &err));
    lse_assert_ok(lse_json_set_integer(doc, "k", 2, &err));
    lse_assert_ok(lse_json_set_vector(doc, "weights", w, &err));
    lse_assert_ok(lse_json_set_matrix(doc, "means", m, &err));
    lse_assert_ok(lse_json_set_number(doc, "loglik", 3.0, &err));
    lse_assert_ok(lse_json_set_object(doc, "options", empty, &err));
    lse_assert_ok(lse_json_set_strings(doc, "labels", NULL, 0, &err));
    /* replacing a key keeps its place */
    lse_assert_ok(lse_json_set_integer(doc, "k", 3, &err));
    char *text = NULL;
    lse_assert_ok(lse_json_to_string(doc, &text, &err));
    ck_assert_str_eq(text, "{\n"
                           "  \"model\": \"gmm\",\n"
                           "  \"k\": 3,\n"
                           "  \"weights\": [0.5, 0.5],\n"
                           "  \"means\": [\n"
                           "    [1.0, 2.0],\n"
                           "    [-3.5, 0.25]\n"
                           "  ],\n"
                           "  \"loglik\": 3.0,\n"
                           "  \"options\": {},\n"
                           "  \"labels\": []\n"
                           "}\n");
    free(text);
    ck_assert_int_eq(lse_json_has(doc, "means"), 1);
    ck_assert_int_eq(lse_json_has(doc, "covs"), 0);
    ck_assert_int_eq(lse_json_has(NULL, "covs"), 0);
    lse_json_free(empty);
    lse_json_free(doc);
    lse_json_free(NULL);
    gsl_matrix_free(m);
    gsl_vector_free(w);
}
END_TEST

START_TEST(test_object_is_copied)
{
    lse_error err;
    lse_json *doc = lse_json_new_object();
    lse_json *opts = lse_json_new_object();
    lse_assert_ok(lse_json_set_integer(opts, "seed", 1, &err));
    lse_assert_ok(lse_json_set_object(doc, "options", opts, &err));
    /* later changes to opts do not reach doc */
    lse_assert_ok(lse_json_set_integer(opts, "seed", 2, &err));
    lse_json *got = NULL;
    lse_assert_ok(lse_json_get_object(doc, "options", &got, &err));
    long long seed = 0;
    lse_assert_ok(lse_json_get_integer(got, "seed", &seed, &err));
    ck_assert(seed == 1);
    /* nor do changes to the copy we got */
    lse_assert_ok(lse_json_set_integer(got, "seed", 3, &err));
    lse_json_free(got);
    lse_assert_ok(lse_json_get_object(doc, "options", &got, &err));
    lse_assert_ok(lse_json_get_integer(got, "seed", &seed, &err));
    ck_assert(seed == 1);
    /* an object can be stored inside itself (as a copy) */
    lse_assert_ok(lse_json_set_object(doc, "again", doc, &err));
    ck_assert_int_eq(lse_json_has(doc, "again"), 1);
    lse_json_free(got);
    lse_json_free(opts);
    lse_json_free(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Reading errors                                                      */
/* ------------------------------------------------------------------ */

static void expect_load_error(const char *text, lse_status want,
                              const char *part)
{
    char path[256];
    write_text("bad.json", text);
    path_of("bad.json", path, sizeof path);
    lse_error err = {0};
    lse_json *doc = lse_json_new_object(); /* must be reset to NULL */
    lse_json *keep = doc;
    lse_assert_status(lse_json_load(path, &doc, &err), want);
    ck_assert_ptr_null(doc);
    assert_msg_has(err, part);
    lse_json_free(keep);
}

START_TEST(test_malformed)
{
    expect_load_error("{\n  \"a\": 1,\n  \"b\": ]\n}\n", LSE_EPARSE,
                      "bad.json:3:");
    expect_load_error("{\"a\": 1} x", LSE_EPARSE, "bad.json:1:");
    expect_load_error("{\"a\": 1, \"a\": 2}", LSE_EPARSE, "duplicate");
    expect_load_error("[1, 2]", LSE_EPARSE, "top level must be an object");
    expect_load_error("", LSE_EPARSE, "bad.json:");
    expect_load_error("{\"a\": NaN}", LSE_EPARSE, "bad.json:1:");
    expect_load_error("{\"a\": 1e999}", LSE_EPARSE, "bad.json:1:");
    expect_load_error("{\"a\": \"\xFF\"}", LSE_EPARSE, "bad.json:1:7:");
    expect_load_error("{\"a\": \"x\\u0000y\"}", LSE_EPARSE, "bad.json:1:");

    lse_error err;
    lse_json *doc = NULL;
    char path[256];
    path_of("absent.json", path, sizeof path);
    lse_assert_status(lse_json_load(path, &doc, &err), LSE_EIO);
    assert_msg_has(err, "absent.json");
    lse_assert_status(lse_json_load(NULL, &doc, &err), LSE_EFAULT);
    lse_assert_status(lse_json_parse(NULL, 3, NULL, &doc, &err), LSE_EFAULT);
    /* parse from memory, not NUL-terminated */
    const char text[] = "{\"k\": 2}garbage";
    lse_assert_ok(lse_json_parse(text, 8, NULL, &doc, &err));
    long long k = 0;
    lse_assert_ok(lse_json_get_integer(doc, "k", &k, &err));
    ck_assert(k == 2);
    lse_json_free(doc);
    lse_assert_status(lse_json_parse(text, sizeof text - 1, NULL, &doc, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "<memory>:1:");
}
END_TEST

START_TEST(test_wrong_types)
{
    const char *text = "{\n"
                       "  \"model\": \"gmm\",\n"
                       "  \"k\": 2.5,\n"
                       "  \"n\": 3.0,\n"
                       "  \"big\": 1e300,\n"
                       "  \"flag\": 1,\n"
                       "  \"ragged\": [[1, 2], [3]],\n"
                       "  \"means\": [[1, 2], [3, 4]],\n"
                       "  \"empty\": [],\n"
                       "  \"mixed\": [1, \"x\"],\n"
                       "  \"labels\": [\"a\", 2],\n"
                       "  \"options\": {\"seed\": \"abc\"}\n"
                       "}\n";
    char path[256];
    write_text("model.json", text);
    path_of("model.json", path, sizeof path);
    lse_error err;
    lse_json *doc = NULL;
    lse_assert_ok(lse_json_load(path, &doc, &err));

    double x;
    long long i;
    int b;
    char **strs = NULL;
    size_t n;
    gsl_vector *v = NULL;
    gsl_matrix *m = NULL;
    lse_json *o = NULL;
    lse_assert_status(lse_json_get_number(doc, "model", &x, &err), LSE_EPARSE);
    assert_msg_has(err, "model.json: key 'model' must be a number, not a "
                        "string");
    lse_assert_status(lse_json_get_integer(doc, "k", &i, &err), LSE_EPARSE);
    assert_msg_has(err, "key 'k' must be an integer");
    lse_assert_ok(lse_json_get_integer(doc, "n", &i, &err)); /* 3.0 is 3 */
    ck_assert(i == 3);
    lse_assert_status(lse_json_get_integer(doc, "big", &i, &err), LSE_EPARSE);
    lse_assert_status(lse_json_get_bool(doc, "flag", &b, &err), LSE_EPARSE);
    assert_msg_has(err, "must be true or false, not an integer");
    lse_assert_status(lse_json_get_string(doc, "k", &(const char *){0}, &err),
                      LSE_EPARSE);
    lse_assert_status(lse_json_get_matrix(doc, "ragged", 0, 0, &m, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "key 'ragged' must be a * x * array of numbers");
    ck_assert_ptr_null(m);
    lse_assert_status(lse_json_get_matrix(doc, "means", 3, 0, &m, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "key 'means' must be a 3 x * array of numbers, got "
                        "2 x 2");
    lse_assert_status(lse_json_get_matrix(doc, "means", 2, 3, &m, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "must be a 2 x 3 array of numbers, got 2 x 2");
    lse_assert_status(lse_json_get_vector(doc, "means", 0, &v, &err),
                      LSE_EPARSE);
    lse_assert_status(lse_json_get_vector(doc, "empty", 0, &v, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "not empty");
    lse_assert_status(lse_json_get_vector(doc, "mixed", 0, &v, &err),
                      LSE_EPARSE);
    lse_assert_status(lse_json_get_vector(doc, "means", 0, &v, &err),
                      LSE_EPARSE);
    lse_assert_status(lse_json_get_stack(doc, "means", 0, 0, 0, &m, NULL, &err),
                      LSE_EPARSE);
    lse_assert_status(lse_json_get_strings(doc, "labels", &strs, &n, &err),
                      LSE_EPARSE);
    assert_msg_has(err, "element 1 is an integer");
    lse_assert_status(lse_json_get_object(doc, "means", &o, &err), LSE_EPARSE);
    assert_msg_has(err, "must be an object, not an array");

    /* missing keys, at the top and nested */
    lse_assert_status(lse_json_get_matrix(doc, "covs", 0, 0, &m, &err),
                      LSE_ENOTFOUND);
    assert_msg_has(err, "model.json: no key 'covs'");
    lse_assert_ok(lse_json_get_object(doc, "options", &o, &err));
    lse_assert_status(lse_json_get_integer(o, "seed", &i, &err), LSE_EPARSE);
    assert_msg_has(err, "model.json: key 'options.seed' must be an integer");
    lse_assert_status(lse_json_get_integer(o, "iters", &i, &err),
                      LSE_ENOTFOUND);
    assert_msg_has(err, "no key 'options.iters'");
    lse_json_free(o);

    /* NULL arguments */
    lse_assert_status(lse_json_get_number(doc, "k", NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_json_get_number(NULL, "k", &x, &err), LSE_EFAULT);
    lse_assert_status(lse_json_get_vector(doc, "k", 0, NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_json_get_strings(doc, "labels", &strs, NULL, &err),
                      LSE_EFAULT);
    lse_json_free(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Setter errors and saving                                            */
/* ------------------------------------------------------------------ */

START_TEST(test_setter_errors)
{
    lse_error err;
    lse_json *doc = lse_json_new_object();
    lse_assert_status(lse_json_set_number(doc, "x", NAN, &err), LSE_ENONFINITE);
    assert_msg_has(err, "key 'x'");
    lse_assert_status(lse_json_set_number(doc, "x", -INFINITY, &err),
                      LSE_ENONFINITE);
    gsl_matrix *m = gsl_matrix_calloc(2, 2);
    gsl_matrix_set(m, 1, 0, INFINITY);
    lse_assert_status(lse_json_set_matrix(doc, "m", m, &err), LSE_ENONFINITE);
    assert_msg_has(err, "entry (1, 0)");
    lse_assert_status(lse_json_set_stack(doc, "m", m, 1, &err), LSE_ENONFINITE);
    gsl_vector *v = gsl_vector_calloc(3);
    gsl_vector_set(v, 2, NAN);
    lse_assert_status(lse_json_set_vector(doc, "v", v, &err), LSE_ENONFINITE);
    assert_msg_has(err, "entry 2");
    ck_assert_int_eq(lse_json_has(doc, "x"), 0); /* nothing was stored */
    ck_assert_int_eq(lse_json_has(doc, "m"), 0);

    lse_assert_status(lse_json_set_string(doc, "s", "bad \xC0\xAF", &err),
                      LSE_EINVAL);
    assert_msg_has(err, "UTF-8");
    lse_assert_status(lse_json_set_string(doc, "s", "\xED\xA0\x80", &err),
                      LSE_EINVAL); /* a surrogate */
    lse_assert_status(lse_json_set_integer(doc, "\xFF", 1, &err), LSE_EINVAL);
    lse_assert_status(lse_json_set_integer(doc, "", 1, &err), LSE_EINVAL);
    const char *bad[2] = {"ok", "\xF5\x80\x80\x80"};
    lse_assert_status(lse_json_set_strings(doc, "s", bad, 2, &err), LSE_EINVAL);
    const char *null_in[2] = {"ok", NULL};
    lse_assert_status(lse_json_set_strings(doc, "s", null_in, 2, &err),
                      LSE_EFAULT);

    gsl_matrix *a = gsl_matrix_calloc(2, 2), *b = gsl_matrix_calloc(2, 3);
    const gsl_matrix *two[2] = {a, b};
    lse_assert_status(lse_json_set_matrices(doc, "c", two, 2, &err), LSE_EDIM);
    assert_msg_has(err, "matrix 1 is 2 x 3, matrix 0 is 2 x 2");
    lse_assert_status(lse_json_set_matrices(doc, "c", two, 0, &err),
                      LSE_EINVAL);
    gsl_matrix *three = gsl_matrix_calloc(3, 2);
    lse_assert_status(lse_json_set_stack(doc, "c", three, 2, &err), LSE_EDIM);
    lse_assert_status(lse_json_set_stack(doc, "c", three, 0, &err), LSE_EINVAL);

    lse_assert_status(lse_json_set_number(NULL, "x", 1.0, &err), LSE_EFAULT);
    lse_assert_status(lse_json_set_number(doc, NULL, 1.0, &err), LSE_EFAULT);
    lse_assert_status(lse_json_set_string(doc, "s", NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_json_set_matrix(doc, "m", NULL, &err), LSE_EFAULT);
    lse_assert_status(lse_json_set_object(doc, "o", NULL, &err), LSE_EFAULT);
    ck_assert_int_eq(lse_json_has(doc, "c"), 0);

    gsl_matrix_free(a);
    gsl_matrix_free(b);
    gsl_matrix_free(three);
    gsl_matrix_free(m);
    gsl_vector_free(v);
    lse_json_free(doc);
}
END_TEST

START_TEST(test_atomic_save)
{
    lse_error err;
    lse_json *doc = lse_json_new_object();
    lse_assert_ok(lse_json_set_integer(doc, "version", 1, &err));
    char path[256];
    path_of("model.json", path, sizeof path);
    lse_assert_ok(lse_json_save(doc, path, &err));
    lse_assert_ok(lse_json_set_integer(doc, "version", 2, &err));
    lse_assert_ok(lse_json_save(doc, path, &err)); /* replaces it */
    ck_assert_uint_eq(lse_tmpdir_count(dir), 1);
    lse_json *back = NULL;
    lse_assert_ok(lse_json_load(path, &back, &err));
    long long version = 0;
    lse_assert_ok(lse_json_get_integer(back, "version", &version, &err));
    ck_assert(version == 2);
    lse_json_free(back);

    /* a directory that does not exist: nothing is created */
    path_of("missing/model.json", path, sizeof path);
    lse_assert_status(lse_json_save(doc, path, &err), LSE_EIO);
    assert_msg_has(err, "cannot write");
    /* a directory in the way: the temporary file is removed */
    path_of("in_the_way", path, sizeof path);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    lse_assert_status(lse_json_save(doc, path, &err), LSE_EIO);
    ck_assert_uint_eq(lse_tmpdir_count(dir), 2);
    lse_assert_status(lse_json_save(NULL, path, &err), LSE_EFAULT);
    lse_json_free(doc);
}
END_TEST

/* jansson writes and reads numbers with '.' whatever the locale. */
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
    lse_error err;
    lse_json *doc = lse_json_new_object(), *back = NULL;
    char *text = NULL;
    double x = 0.0;
    lse_status st = lse_json_set_number(doc, "x", 2.385, &err);
    if (st == LSE_OK)
        st = lse_json_to_string(doc, &text, &err);
    if (st == LSE_OK)
        st = lse_json_parse(text, strlen(text), NULL, &back, &err);
    if (st == LSE_OK)
        st = lse_json_get_number(back, "x", &x, &err);
    setlocale(LC_NUMERIC, "C");
    unsetenv("LOCPATH");
    lse_assert_ok(st);
    ck_assert_str_eq(text, "{\n  \"x\": 2.3849999999999998\n}\n");
    ck_assert(x == 2.385);
    free(text);
    lse_json_free(doc);
    lse_json_free(back);
}
END_TEST

Suite *lse_test_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip_every_type);
    tcase_add_test(tc, test_pretty_text);
    tcase_add_test(tc, test_object_is_copied);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_wrong_types);
    tcase_add_test(tc, test_setter_errors);
    tcase_add_test(tc, test_atomic_save);
    tcase_add_test(tc, test_numbers_ignore_locale);
    tcase_set_timeout(tc, 60); /* localedef may take a few seconds */
    suite_add_tcase(s, tc);
    return s;
}
