/* libFuzzer harness for the JSON reader (lib/json.c and jansson).
 *
 * The input is written to a memfd and loaded with lse_json_load(). Every
 * getter is tried on the keys a model file uses, and writing the document,
 * parsing that text and writing it again must give the same text (traps
 * otherwise). */
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

static const char *const keys[] = {"model", "k",       "weights", "means",
                                   "covs",  "options", "names",   "converged",
                                   "seed",  "a"};

/* Every getter on key: each either succeeds or fails cleanly. */
static void try_getters(const lse_json *doc, const char *key, int depth)
{
    lse_error err;
    double x;
    long long i;
    int b;
    const char *s;
    char **strs = NULL;
    size_t n, k;
    gsl_vector *v = NULL;
    gsl_matrix *m = NULL;
    lse_json *o = NULL;
    const int has = lse_json_has(doc, key);
    const lse_status st = lse_json_get_number(doc, key, &x, &err);
    require(has || st == LSE_ENOTFOUND);
    (void)lse_json_get_integer(doc, key, &i, &err);
    (void)lse_json_get_bool(doc, key, &b, &err);
    if (lse_json_get_string(doc, key, &s, &err) == LSE_OK)
        require(s != NULL);
    if (lse_json_get_strings(doc, key, &strs, &n, &err) == LSE_OK) {
        require(strs[n] == NULL);
        free(strs);
    }
    if (lse_json_get_vector(doc, key, 0, &v, &err) == LSE_OK)
        gsl_vector_free(v);
    if (lse_json_get_matrix(doc, key, 0, 0, &m, &err) == LSE_OK)
        gsl_matrix_free(m);
    if (lse_json_get_stack(doc, key, 0, 0, 0, &m, &k, &err) == LSE_OK) {
        require(k > 0 && m->size1 % k == 0);
        gsl_matrix_free(m);
    }
    if (lse_json_get_object(doc, key, &o, &err) == LSE_OK) {
        for (size_t j = 0; depth < 2 && j < sizeof keys / sizeof *keys; j++)
            try_getters(o, keys[j], depth + 1);
        lse_json_free(o);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_json", 0);
        require(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    require(ftruncate(fd, 0) == 0);
    require(pwrite(fd, data, size, 0) == (ssize_t)size);

    lse_error err = {0};
    lse_json *doc = NULL;
    const lse_status st = lse_json_load(path, &doc, &err);
    if (st != LSE_OK) {
        require(doc == NULL && err.status == st && err.message[0] != '\0');
        return 0;
    }
    for (size_t j = 0; j < sizeof keys / sizeof *keys; j++)
        try_getters(doc, keys[j], 0);

    char *text = NULL, *again = NULL;
    lse_json *back = NULL;
    require(lse_json_to_string(doc, &text, &err) == LSE_OK);
    require(lse_json_parse(text, strlen(text), "again", &back, &err) == LSE_OK);
    require(lse_json_to_string(back, &again, &err) == LSE_OK);
    require(strcmp(text, again) == 0);
    free(text);
    free(again);
    lse_json_free(back);
    lse_json_free(doc);
    return 0;
}
