#define _XOPEN_SOURCE 700 /* realpath, fsync */
/* Output sets: the files one command writes, committed together or not at
 * all (docs/io.md, "Outputs").
 *
 * Every output that is a regular file is written to a temporary file
 * "TARGET.tmp.XXXXXX" beside its target and renamed over it only when
 * every output has been written; standard output and devices (/dev/null,
 * a FIFO) are kept in memory and written in place at the commit, before
 * the renames. Temporary files are recorded in a process-wide table that
 * lse_file_discard_temporaries() empties from a signal handler (the
 * library never installs one: the tools do). lse_file_write_atomic() is a
 * set of one output. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "graph-private.h"

/* ------------------------------------------------------------------ */
/* The table of pending temporary files                                */

/* Slots hold the malloc'ed names of temporary files that may exist; a
 * signal handler unlinks them (unlink is async-signal-safe, and so are
 * lock-free atomics). A name is published before its file is created and
 * withdrawn after it was renamed or removed. More than LSE_TMP_SLOTS
 * temporaries at once are written but not tracked. */
#define LSE_TMP_SLOTS 64
static _Atomic(char *) tmp_slot[LSE_TMP_SLOTS];

/* Bit 0: a discard is running; bits 1..: commits running (2 each). A
 * commit and a discard exclude each other, so a signal that arrives
 * during the renames lets them finish (all outputs or none). */
static atomic_uint tmp_state;

static int tmp_publish(char *name)
{
    for (int i = 0; i < LSE_TMP_SLOTS; i++) {
        char *expected = NULL;
        if (atomic_compare_exchange_strong(&tmp_slot[i], &expected, name))
            return i;
    }
    return -1;
}

static void tmp_withdraw(int slot, char *name)
{
    if (slot < 0)
        return;
    char *expected = name;
    atomic_compare_exchange_strong(&tmp_slot[slot], &expected, NULL);
}

static int commit_enter(void)
{
    unsigned s = atomic_load(&tmp_state);
    do {
        if (s & 1u)
            return -1; /* a discard (a signal) is under way */
    } while (!atomic_compare_exchange_weak(&tmp_state, &s, s + 2u));
    return 0;
}

static void commit_leave(void) { atomic_fetch_sub(&tmp_state, 2u); }

int lse_file_discard_temporaries(void)
{
    unsigned s = atomic_load(&tmp_state);
    do {
        if (s & 1u)
            return 1; /* another thread is discarding */
        if (s != 0)
            return 0; /* a commit is renaming: let it finish */
    } while (!atomic_compare_exchange_weak(&tmp_state, &s, 1u));
    for (int i = 0; i < LSE_TMP_SLOTS; i++) {
        char *name = atomic_exchange(&tmp_slot[i], NULL);
        if (name != NULL)
            unlink(name);
    }
    atomic_store(&tmp_state, 0u);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Paths                                                               */

static void errno_text(int e, char *buf, size_t size)
{
    if (strerror_r(e, buf, size) != 0)
        snprintf(buf, size, "error %d", e);
}

/* Canonical name of a path that may not exist yet: realpath of its
 * directory + "/" + its last component; NULL when the directory cannot be
 * resolved or out of memory. */
static char *canonical(const char *path)
{
    char *full = realpath(path, NULL);
    if (full != NULL)
        return full;
    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    char *dir = NULL;
    if (slash == NULL)
        dir = realpath(".", NULL);
    else if (slash == path)
        dir = realpath("/", NULL);
    else {
        char *d = strndup(path, (size_t)(slash - path));
        if (d == NULL)
            return NULL;
        dir = realpath(d, NULL);
        free(d);
    }
    if (dir == NULL)
        return NULL;
    const size_t n = strlen(dir) + strlen(base) + 2;
    char *out = malloc(n);
    if (out != NULL)
        snprintf(out, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
                 base);
    free(dir);
    return out;
}

/* A file written in place, never replaced: a device, FIFO or socket. */
static int is_stream(mode_t m)
{
    return S_ISCHR(m) || S_ISBLK(m) || S_ISFIFO(m) || S_ISSOCK(m);
}

int lse_path_same(const char *a, const char *b)
{
    if (a == NULL || b == NULL || strcmp(a, "-") == 0 || strcmp(b, "-") == 0)
        return 0;
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb)
        return 0;
    char *ca = canonical(a), *cb = canonical(b);
    const int same =
        ca != NULL && cb != NULL ? strcmp(ca, cb) == 0 : strcmp(a, b) == 0;
    free(ca);
    free(cb);
    return same;
}

/* ------------------------------------------------------------------ */
/* Output sets                                                         */

typedef struct out_entry {
    char *path;   /* as given */
    char *what;   /* role in messages ("--labels", "the data"), or NULL */
    int input;    /* declared with lse_outputs_input */
    int stream;   /* stdout or a device/FIFO: written in place at commit */
    char *target; /* the file renamed over (symbolic links resolved) */
    int exists;   /* target existed when declared */
    mode_t mode;  /* its permission bits, kept by the new file */
    char *tmp;    /* temporary file written, or NULL */
    int slot;     /* its slot in tmp_slot, or -1 */
    int staged;   /* lse_outputs_write done */
    char *buf;    /* stream: the bytes */
    size_t len;
} out_entry;

struct lse_outputs {
    out_entry *e;
    size_t n, cap;
    int done; /* committed or discarded */
};

lse_status lse_outputs_new(lse_outputs **out, lse_error *err)
{
    if (out == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__, "out is NULL");
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    return LSE_OK;
}

static void entry_drop_tmp(out_entry *e)
{
    if (e->tmp == NULL)
        return;
    tmp_withdraw(e->slot, e->tmp);
    unlink(e->tmp);
    free(e->tmp);
    e->tmp = NULL;
    e->slot = -1;
}

void lse_outputs_discard(lse_outputs *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n; i++) {
        entry_drop_tmp(&o->e[i]);
        free(o->e[i].buf);
        o->e[i].buf = NULL;
        o->e[i].len = 0;
    }
    o->done = 1;
}

void lse_outputs_free(lse_outputs *o)
{
    if (o == NULL)
        return;
    lse_outputs_discard(o);
    for (size_t i = 0; i < o->n; i++) {
        free(o->e[i].path);
        free(o->e[i].what);
        free(o->e[i].target);
    }
    free(o->e);
    free(o);
}

size_t lse_outputs_pending(const lse_outputs *o)
{
    size_t n = 0;
    for (size_t i = 0; o != NULL && i < o->n; i++)
        n += o->e[i].tmp != NULL;
    return n;
}

static out_entry *push(lse_outputs *o, const char *path, const char *what,
                       int input)
{
    if (o->n == o->cap) {
        const size_t cap = o->cap ? 2 * o->cap : 8;
        if (cap > SIZE_MAX / sizeof(out_entry))
            return NULL;
        out_entry *e = realloc(o->e, cap * sizeof *e);
        if (e == NULL)
            return NULL;
        o->e = e;
        o->cap = cap;
    }
    out_entry *e = &o->e[o->n];
    memset(e, 0, sizeof *e);
    e->slot = -1;
    e->input = input;
    e->path = strdup(path);
    e->what = what != NULL ? strdup(what) : NULL;
    if (e->path == NULL || (what != NULL && e->what == NULL)) {
        free(e->path);
        free(e->what);
        return NULL;
    }
    o->n++;
    return e;
}

static void pop(lse_outputs *o)
{
    out_entry *e = &o->e[--o->n];
    free(e->path);
    free(e->what);
    free(e->target);
}

static const char *role(const out_entry *e)
{
    return e->what != NULL ? e->what : e->input ? "the input" : "the output";
}

/* Refuse when the new entry (last) names the same file as an earlier one
 * that matters: an output against every input and output, an input
 * against every output. Devices and FIFOs are exempt. */
static lse_status check_clash(const lse_outputs *o, const char *func,
                              lse_error *err)
{
    const out_entry *n = &o->e[o->n - 1];
    if (n->stream)
        return LSE_OK;
    for (size_t i = 0; i + 1 < o->n; i++) {
        const out_entry *e = &o->e[i];
        if (e->stream || (e->input && n->input))
            continue;
        if (!lse_path_same(e->path, n->path))
            continue;
        const out_entry *out = n->input ? e : n, *other = n->input ? n : e;
        if (other->input)
            return lse_error_set(
                err, LSE_EINVAL, func,
                "%s '%s' is the same file as %s '%s': writing it would "
                "destroy an input; choose another output file",
                role(out), out->path, role(other), other->path);
        return lse_error_set(err, LSE_EINVAL, func,
                             "%s '%s' is the same file as %s '%s': each "
                             "output needs its own file; choose another name",
                             role(n), n->path, role(e), e->path);
    }
    return LSE_OK;
}

lse_status lse_outputs_input(lse_outputs *o, const char *path, const char *what,
                             lse_error *err)
{
    if (o == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "o and path must not be NULL");
    if (strcmp(path, "-") == 0)
        return LSE_OK;
    out_entry *e = push(o, path, what, 1);
    if (e == NULL)
        return lse_error_set(err, LSE_ENOMEM, __func__, "out of memory");
    struct stat sb;
    e->stream = stat(path, &sb) == 0 && is_stream(sb.st_mode);
    const lse_status st = check_clash(o, __func__, err);
    if (st != LSE_OK)
        pop(o);
    return st;
}

/* Fill e (an output) from the file system: what it is, where the bytes
 * go, the mode to keep; refuse a directory and a read-only file. */
static lse_status examine(out_entry *e, const char *func, lse_error *err)
{
    char why[128];
    const char *path = e->path;
    if (strcmp(path, "-") == 0) {
        e->stream = 1;
        return LSE_OK;
    }
    if (path[0] == '\0')
        return lse_error_set(err, LSE_EIO, func,
                             "cannot write %s: the file name is empty",
                             role(e));
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (is_stream(sb.st_mode)) {
            e->stream = 1;
            return LSE_OK;
        }
        if (S_ISDIR(sb.st_mode))
            return lse_error_set(err, LSE_EIO, func,
                                 "cannot write %s '%s': it is a directory; "
                                 "give a file name",
                                 role(e), path);
        /* read-only: no write bit (also for root, whom access() lets
         * through), or access() says no */
        if ((sb.st_mode & 0222) == 0 ||
            (access(path, W_OK) != 0 && (errno == EACCES || errno == EROFS)))
            return lse_error_set(
                err, LSE_EIO, func,
                "cannot write %s '%s': the file is read-only and is not "
                "replaced; make it writable (chmod u+w '%s') or choose "
                "another file",
                role(e), path, path);
        e->exists = 1;
        e->mode = sb.st_mode & 07777;
        /* through a symbolic link the file it points to is replaced */
        e->target = realpath(path, NULL);
        if (e->target == NULL)
            e->target = strdup(path);
        if (e->target == NULL)
            return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
        return LSE_OK;
    }
    if (errno != ENOENT) {
        errno_text(errno, why, sizeof why);
        return lse_error_set(err, LSE_EIO, func, "cannot write '%s': %s", path,
                             why);
    }
    e->target = strdup(path);
    if (e->target == NULL)
        return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
    return LSE_OK;
}

/* The directory of e->target must exist and be writable: the temporary
 * file is created there and renamed. */
static lse_status check_dir(const out_entry *e, const char *func,
                            lse_error *err)
{
    char why[128];
    const char *path = e->target;
    const char *slash = strrchr(path, '/');
    char *dir = slash == NULL   ? strdup(".")
                : slash == path ? strdup("/")
                                : strndup(path, (size_t)(slash - path));
    if (dir == NULL)
        return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
    struct stat sb;
    int bad = 0;
    if (stat(dir, &sb) != 0)
        bad = errno;
    else if (!S_ISDIR(sb.st_mode))
        bad = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0)
        bad = errno;
    lse_status st = LSE_OK;
    if (bad != 0) {
        errno_text(bad, why, sizeof why);
        st = lse_error_set(err, LSE_EIO, func,
                           "cannot write '%s': %s (directory '%s'); give "
                           "%s a path whose directory exists and is writable",
                           e->path, why, dir,
                           e->what != NULL ? e->what : "the output");
    }
    free(dir);
    return st;
}

static lse_status add_output(lse_outputs *o, const char *path, const char *what,
                             const char *func, lse_error *err)
{
    out_entry *e = push(o, path, what, 0);
    if (e == NULL)
        return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
    lse_status st = examine(e, func, err);
    if (st == LSE_OK && !e->stream)
        st = check_dir(e, func, err);
    if (st == LSE_OK)
        st = check_clash(o, func, err);
    if (st != LSE_OK)
        pop(o);
    return st;
}

lse_status lse_outputs_add(lse_outputs *o, const char *path, const char *what,
                           lse_error *err)
{
    if (o == NULL || path == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "o and path must not be NULL");
    if (o->done)
        return lse_error_set(err, LSE_EINVAL, __func__,
                             "the set was already committed or discarded");
    return add_output(o, path, what, __func__, err);
}

/* Six letters for a temporary name; O_EXCL makes collisions harmless. */
static void random_suffix(char *out)
{
    static atomic_ulong counter;
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                 ((uint64_t)getpid() << 16) ^
                 (uint64_t)atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15u;
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int i = 0; i < 6; i++) {
        x ^= x >> 31; /* splitmix64 finaliser, one round per letter */
        x *= 0xbf58476d1ce4e5b9u;
        x ^= x >> 27;
        out[i] = alphabet[x % (sizeof alphabet - 1)];
    }
    out[6] = '\0';
}

/* Write data to a new temporary file beside e->target. */
static lse_status write_tmp(out_entry *e, const char *data, size_t len,
                            const char *func, lse_error *err)
{
    static const char tag[] = ".tmp.";
    const size_t plen = strlen(e->target);
    char why[128];
    e->tmp = malloc(plen + sizeof tag + 6);
    if (e->tmp == NULL)
        return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
    memcpy(e->tmp, e->target, plen);
    memcpy(e->tmp + plen, tag, sizeof tag - 1);
    char *suffix = e->tmp + plen + sizeof tag - 1;
    int fd = -1;
    random_suffix(suffix);
    /* published before it exists, so that no signal can leave it behind */
    e->slot = tmp_publish(e->tmp);
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        if (attempt > 0) { /* never let a handler unlink another's file */
            tmp_withdraw(e->slot, e->tmp);
            random_suffix(suffix);
            e->slot = tmp_publish(e->tmp);
        }
        fd = open(e->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        errno_text(errno, why, sizeof why);
        tmp_withdraw(e->slot, e->tmp);
        free(e->tmp);
        e->tmp = NULL;
        e->slot = -1;
        return lse_error_set(err, LSE_EIO, func, "cannot write '%s': %s",
                             e->path, why);
    }
    lse_status status = LSE_OK;
    /* a replaced file keeps its permission bits */
    if (e->exists && fchmod(fd, e->mode) != 0) {
        errno_text(errno, why, sizeof why);
        status = lse_error_set(err, LSE_EIO, func,
                               "cannot set the mode of '%s': %s", e->tmp, why);
    }
    size_t done = 0;
    while (status == LSE_OK && done < len) {
        const ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            errno_text(w < 0 ? errno : EIO, why, sizeof why);
            status = lse_error_set(err, LSE_EIO, func, "cannot write '%s': %s",
                                   e->tmp, why);
            break;
        }
        done += (size_t)w;
    }
    if (status == LSE_OK && fsync(fd) != 0 && errno != EINVAL) {
        errno_text(errno, why, sizeof why);
        status = lse_error_set(err, LSE_EIO, func, "cannot flush '%s': %s",
                               e->tmp, why);
    }
    if (close(fd) != 0 && status == LSE_OK) {
        errno_text(errno, why, sizeof why);
        status = lse_error_set(err, LSE_EIO, func, "cannot close '%s': %s",
                               e->tmp, why);
    }
    if (status != LSE_OK)
        entry_drop_tmp(e);
    return status;
}

static lse_status stage(lse_outputs *o, const char *path, const char *data,
                        size_t len, const char *func, lse_error *err)
{
    if (o->done)
        return lse_error_set(err, LSE_EINVAL, func,
                             "the set was already committed or discarded");
    out_entry *e = NULL;
    for (size_t i = 0; i < o->n && e == NULL; i++)
        if (!o->e[i].input && !o->e[i].staged &&
            strcmp(o->e[i].path, path) == 0)
            e = &o->e[i];
    if (e == NULL) {
        const lse_status st = add_output(o, path, NULL, func, err);
        if (st != LSE_OK)
            return st;
        e = &o->e[o->n - 1];
    }
    if (e->stream) {
        e->buf = malloc(len > 0 ? len : 1);
        if (e->buf == NULL)
            return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
        if (len > 0)
            memcpy(e->buf, data, len);
        e->len = len;
    } else {
        const lse_status st = write_tmp(e, data, len, func, err);
        if (st != LSE_OK)
            return st;
    }
    e->staged = 1;
    return LSE_OK;
}

lse_status lse_outputs_write(lse_outputs *o, const char *path, const char *data,
                             size_t len, lse_error *err)
{
    if (o == NULL || path == NULL || (data == NULL && len > 0))
        return lse_error_set(err, LSE_EFAULT, __func__,
                             "o, path and data must not be NULL");
    return stage(o, path, data, len, __func__, err);
}

/* Write a stream entry in place: stdout, or a device / FIFO. */
static lse_status write_stream(const out_entry *e, const char *func,
                               lse_error *err)
{
    char why[128];
    if (strcmp(e->path, "-") == 0) {
        if ((e->len > 0 && fwrite(e->buf, 1, e->len, stdout) != e->len) ||
            fflush(stdout) != 0) {
            errno_text(errno, why, sizeof why);
            return lse_error_set(err, LSE_EIO, func,
                                 "cannot write to standard output: %s", why);
        }
        return LSE_OK;
    }
    FILE *f = fopen(e->path, "w");
    if (f == NULL) {
        errno_text(errno, why, sizeof why);
        return lse_error_set(err, LSE_EIO, func, "cannot open '%s': %s",
                             e->path, why);
    }
    const int bad = e->len > 0 && fwrite(e->buf, 1, e->len, f) != e->len;
    const int ferr = errno;
    if (fclose(f) != 0 || bad) {
        errno_text(bad ? ferr : errno, why, sizeof why);
        return lse_error_set(err, LSE_EIO, func, "cannot write '%s': %s",
                             e->path, why);
    }
    return LSE_OK;
}

/* A hard link "TARGET.tmp.XXXXXX" to the file about to be replaced, so
 * that a failed rename can put it back; NULL when the file system has no
 * hard links (then that file cannot be restored). */
static char *backup_of(const char *target)
{
    static const char tag[] = ".tmp.";
    const size_t plen = strlen(target);
    char *b = malloc(plen + sizeof tag + 6);
    if (b == NULL)
        return NULL;
    memcpy(b, target, plen);
    memcpy(b + plen, tag, sizeof tag - 1);
    for (int attempt = 0; attempt < 100; attempt++) {
        random_suffix(b + plen + sizeof tag - 1);
        if (link(target, b) == 0)
            return b;
        if (errno != EEXIST)
            break;
    }
    free(b);
    return NULL;
}

/* Rename every temporary file over its target. When one rename fails the
 * ones before it are undone (the old files come back from their hard-link
 * backups, new files are removed), so that no output or all are replaced. */
static lse_status rename_all(lse_outputs *o, const char *func, lse_error *err)
{
    char **backup = calloc(o->n > 0 ? o->n : 1, sizeof *backup);
    if (backup == NULL)
        return lse_error_set(err, LSE_ENOMEM, func, "out of memory");
    for (size_t i = 0; i < o->n; i++)
        if (o->e[i].tmp != NULL && o->e[i].exists)
            backup[i] = backup_of(o->e[i].target);
    lse_status status = LSE_OK;
    size_t failed = o->n;
    char why[128];
    for (size_t i = 0; i < o->n; i++) {
        out_entry *e = &o->e[i];
        if (e->tmp == NULL)
            continue;
        if (rename(e->tmp, e->target) != 0) {
            errno_text(errno, why, sizeof why);
            failed = i;
            break;
        }
    }
    int restored = 1;
    for (size_t j = 0; j < failed && failed < o->n; j++) {
        const out_entry *e = &o->e[j];
        if (e->tmp == NULL)
            continue;
        if (backup[j] != NULL) {
            if (rename(backup[j], e->target) == 0) {
                free(backup[j]);
                backup[j] = NULL;
            } else
                restored = 0;
        } else if (!e->exists) {
            if (unlink(e->target) != 0)
                restored = 0;
        } else
            restored = 0;
    }
    if (failed < o->n) {
        const out_entry *e = &o->e[failed];
        status = lse_error_set(
            err, LSE_EIO, func, "cannot rename '%s' to '%s': %s; %s", e->tmp,
            e->target, why,
            restored ? "no output was replaced"
                     : "outputs before it could not all be restored");
    }
    for (size_t i = 0; i < o->n; i++) {
        if (backup[i] != NULL)
            unlink(backup[i]);
        free(backup[i]);
        out_entry *e = &o->e[i];
        if (e->tmp != NULL && i < failed) { /* renamed: nothing to remove */
            tmp_withdraw(e->slot, e->tmp);
            free(e->tmp);
            e->tmp = NULL;
            e->slot = -1;
        }
    }
    free(backup);
    return status;
}

static lse_status commit(lse_outputs *o, const char *func, lse_error *err)
{
    if (o->done)
        return lse_error_set(err, LSE_EINVAL, func,
                             "the set was already committed or discarded");
    lse_status status = LSE_OK;
    if (commit_enter() != 0) {
        lse_outputs_discard(o);
        return lse_error_set(err, LSE_EIO, func,
                             "interrupted: nothing was written");
    }
    /* streams first: when standard output fails no file is replaced */
    for (size_t i = 0; i < o->n && status == LSE_OK; i++)
        if (o->e[i].stream && o->e[i].staged)
            status = write_stream(&o->e[i], func, err);
    if (status == LSE_OK)
        status = rename_all(o, func, err);
    lse_outputs_discard(o); /* temporaries left after a failure */
    commit_leave();
    return status;
}

lse_status lse_outputs_commit(lse_outputs *o, lse_error *err)
{
    if (o == NULL)
        return lse_error_set(err, LSE_EFAULT, __func__, "o is NULL");
    return commit(o, __func__, err);
}

lse_status lse_file_write_atomic(const char *path, const char *data, size_t len,
                                 lse_error *err)
{
    static const char *const func = "lse_file_write_atomic";
    if (path == NULL || (data == NULL && len > 0))
        return lse_error_set(err, LSE_EFAULT, func,
                             "path and data must not be NULL");
    lse_outputs o = {0};
    lse_status st = stage(&o, path, data, len, func, err);
    if (st == LSE_OK)
        st = commit(&o, func, err);
    lse_outputs_discard(&o);
    for (size_t i = 0; i < o.n; i++) {
        free(o.e[i].path);
        free(o.e[i].what);
        free(o.e[i].target);
    }
    free(o.e);
    return st;
}
