/* A fresh temporary directory per test, for the tests that write files
 * (test_io.c, test_json.c, test_lsefit.c). Header-only: static inline
 * functions, so a test includes what it uses and nothing is unused. */
#ifndef LSE_TMPDIR_H
#define LSE_TMPDIR_H

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Remove path and, for a directory, everything below it. */
static inline void lse_tmpdir_remove(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d != NULL) {
        const struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[1024];
            const int n = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            if (n > 0 && (size_t)n < sizeof sub)
                lse_tmpdir_remove(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

/* Create /tmp/lse_test_<tag>_XXXXXX into dir (size >= 64). */
static inline void lse_tmpdir_make(char *dir, size_t size, const char *tag)
{
    ck_assert_int_gt(snprintf(dir, size, "/tmp/lse_test_%s_XXXXXX", tag), 0);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Number of entries in dir. */
static inline size_t lse_tmpdir_count(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

#endif /* LSE_TMPDIR_H */
