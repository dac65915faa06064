/* Replays fuzzer inputs without libFuzzer, so that the ordinary test suite
 * (any compiler) runs every harness over its corpus:
 *   replay_NAME FILE_OR_DIR...
 * Each file is read whole and passed to LLVMFuzzerTestOneInput(); a
 * directory stands for its regular files, in name order. A harness traps on
 * a broken property, so a non-zero exit or a signal is a failure. Prints one
 * TAP line per input. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n_run;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        printf("not ok %d - %s: cannot open\n", ++n_run, path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *more = realloc(buf, cap * 2);
            if (more == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    const int bad = ferror(f) || buf == NULL;
    fclose(f);
    if (bad) {
        free(buf);
        printf("not ok %d - %s: cannot read\n", ++n_run, path);
        return 1;
    }
    fflush(stdout); /* the TAP lines so far survive a crash */
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    printf("ok %d - %s\n", ++n_run, path);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return replay_file(path);
    DIR *d = opendir(path);
    if (d == NULL) {
        printf("not ok %d - %s: cannot open the directory\n", ++n_run, path);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    int fails = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        const size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *full = malloc(len);
        if (more == NULL || full == NULL) {
            free(more != NULL ? more : names);
            free(full);
            closedir(d);
            printf("not ok %d - %s: out of memory\n", ++n_run, path);
            return 1;
        }
        names = more;
        snprintf(full, len, "%s/%s", path, e->d_name);
        names[n++] = full;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        fails += replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return fails;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    int fails = 0;
    for (int i = 1; i < argc; i++)
        fails += replay(argv[i]);
    printf("1..%d\n", n_run);
    return fails == 0 ? 0 : 1;
}
