/* lsefit --mpi: data-parallel EM over MPI (docs/mpi.md, lsefit_mpi.h).
 *
 * What runs where: every process parses the same command line, reads its
 * share of the rows (lsefit_mpi_data_load), and calls the same library fit
 * with the reduction hook lsefit_mpi_reduce; the library sums every
 * quantity that involves all rows (initialization sums, k-means++ draws,
 * E-step energy, M-step statistics, re-seeding candidates) through it, so
 * all processes hold the same parameters at every step. Process 0 writes
 * the outputs.
 *
 * Every collective of this file goes through agree(): an MPI_Allreduce of
 * a failure flag first, then the operation. A process that fails never
 * calls another collective but lsefit_mpi_end's agree(1), which meets the
 * other processes' agree(0) of their next collective: they all learn of
 * the failure there and unwind to lsefit_mpi_end, where the message of the
 * lowest failing process is broadcast and printed by everyone. */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lsefit_mpi.h"

#ifdef LSEFIT_HAVE_MPI
#include <mpi.h>
#endif

struct lsefit_mpi {
    int rank, size;
    int failed_seen; /* a collective learned that a process failed */
    int raised;      /* this process's own failure raised the flag */
    char msg[1024];  /* the first message this process failed with */
    int have_msg;
    int check; /* LSEFIT_MPI_CHECK=1: every reduction is checked to leave
                  the same bits on every process */
    int stats; /* LSEFIT_MPI_STATS=1 (or --verbose): reduction summary */
    size_t context_rows, n_total;
    lsefit_share share; /* the loaded data's view of the processes */
    char *name;       /* the data's name in messages */
    long line_offset; /* local -> file line numbers in messages */
    size_t n_reduce, n_doubles, max_doubles;
    double t_reduce;
    double t_begin, t_loaded; /* MPI_Wtime at begin, after loading */
    long fault_rank;          /* LSEFIT_MPI_FAULT=R:N: process R fails ... */
    size_t fault_call;        /* ... instead of its N-th reduction (tests) */
};

static lsefit_mpi *active_mpi;

int lsefit_mpi_rank(const lsefit_mpi *mpi) { return mpi ? mpi->rank : 0; }
int lsefit_mpi_size(const lsefit_mpi *mpi) { return mpi ? mpi->size : 1; }
int lsefit_mpi_is_root(const lsefit_mpi *mpi)
{
    return mpi == NULL || mpi->rank == 0;
}
int lsefit_mpi_active(void) { return active_mpi != NULL; }
size_t lsefit_mpi_context_rows(const lsefit_mpi *mpi)
{
    return mpi ? mpi->context_rows : 0;
}
size_t lsefit_mpi_total_rows(const lsefit_mpi *mpi)
{
    return mpi ? mpi->n_total : 0;
}

void lsefit_mpi_gmm_opts(lsefit_mpi *mpi, lse_gmm_fit_opts *o)
{
    if (mpi == NULL)
        return;
    o->reduce = lsefit_mpi_reduce;
    o->reduce_user = mpi;
    o->rank = (size_t)mpi->rank;
    o->n_ranks = (size_t)mpi->size;
}

void lsefit_mpi_slds_opts(lsefit_mpi *mpi, lse_slds_opts *o)
{
    if (mpi == NULL)
        return;
    o->reduce = lsefit_mpi_reduce;
    o->reduce_user = mpi;
    o->rank = (size_t)mpi->rank;
    o->n_ranks = (size_t)mpi->size;
    o->context_rows = mpi->context_rows;
}

#ifdef LSEFIT_HAVE_MPI

/* ------------------------------------------------------------------ */
/* Messages                                                            */

/* "NAME:LINE:..." with LINE of the local text becomes the line of the
 * whole file. */
static void rewrite_line(const lsefit_mpi *c, const char *in, char *out,
                         size_t len)
{
    const size_t nl = c->name != NULL ? strlen(c->name) : 0;
    if (c->line_offset != 0 && nl > 0 && strncmp(in, c->name, nl) == 0 &&
        in[nl] == ':' && in[nl + 1] >= '0' && in[nl + 1] <= '9') {
        char *end = NULL;
        const long line = strtol(in + nl + 1, &end, 10);
        if (end != NULL && *end == ':') {
            snprintf(out, len, "%s:%ld%s", c->name, line + c->line_offset, end);
            return;
        }
    }
    snprintf(out, len, "%s", in);
}

static void capture(const char *message)
{
    lsefit_mpi *c = active_mpi;
    if (c == NULL) { /* not reached: the hook is set with the context */
        fprintf(stderr, "lsefit: %s\n", message);
        return;
    }
    if (c->have_msg)
        return;
    rewrite_line(c, message, c->msg, sizeof c->msg);
    c->have_msg = 1;
}

/* ------------------------------------------------------------------ */
/* Collectives                                                         */

/* The failure flag: 1 when any process failed (this one if failed). Once
 * known, no process communicates again before lsefit_mpi_end. */
static int agree(lsefit_mpi *c, int failed)
{
    if (c->failed_seen)
        return 1;
    int in = failed != 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (out) {
        c->failed_seen = 1;
        c->raised = in;
    }
    return out;
}

/* MPI counts are int: large buffers go in pieces. */
#define CHUNK ((size_t)1 << 28)

static void allreduce_raw(void *buf, size_t n, MPI_Datatype type, size_t size,
                          MPI_Op op)
{
    char *p = buf;
    for (size_t i = 0; i < n; i += CHUNK) {
        const size_t m = n - i < CHUNK ? n - i : CHUNK;
        MPI_Allreduce(MPI_IN_PLACE, p + i * size, (int)m, type, op,
                      MPI_COMM_WORLD);
    }
}

/* buf (n doubles) reduced with op over every process, after the flag. */
static int coll_doubles(lsefit_mpi *c, double *buf, size_t n, MPI_Op op)
{
    if (agree(c, 0))
        return LSEFIT_FAIL;
    allreduce_raw(buf, n, MPI_DOUBLE, sizeof *buf, op);
    return LSEFIT_OK;
}

/* all (size * bytes) = every process's @p mine (bytes), after the flag. */
static int coll_gather(lsefit_mpi *c, const void *mine, void *all, size_t bytes)
{
    if (agree(c, 0))
        return LSEFIT_FAIL;
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                  MPI_COMM_WORLD);
    return LSEFIT_OK;
}

lse_status lsefit_mpi_reduce(double *buf, size_t n, void *user)
{
    lsefit_mpi *c = user;
    if (c->fault_call > 0 && c->fault_rank == c->rank &&
        c->n_reduce + 1 == c->fault_call) {
        /* a local failure: this process stops taking part */
        lsefit_fail("fault injected at reduction %zu (LSEFIT_MPI_FAULT)",
                    c->fault_call);
        return LSE_EIO;
    }
    double *chk = NULL;
    if (c->check && n > 0)
        chk = malloc(2 * n * sizeof *chk);
    const double t0 = MPI_Wtime();
    if (agree(c, c->check && n > 0 && chk == NULL)) {
        free(chk);
        return LSE_EIO;
    }
    allreduce_raw(buf, n, MPI_DOUBLE, sizeof *buf, MPI_SUM);
    c->t_reduce += MPI_Wtime() - t0;
    c->n_reduce++;
    c->n_doubles += n;
    if (n > c->max_doubles)
        c->max_doubles = n;
    if (chk == NULL)
        return LSE_OK;
    /* every process must hold the same bits: max and min agree */
    memcpy(chk, buf, n * sizeof *chk);
    memcpy(chk + n, buf, n * sizeof *chk);
    allreduce_raw(chk, n, MPI_DOUBLE, sizeof *chk, MPI_MAX);
    allreduce_raw(chk + n, n, MPI_DOUBLE, sizeof *chk, MPI_MIN);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (!isnan(buf[i]) && (chk[i] != buf[i] || chk[n + i] != buf[i]))
            bad = i;
    free(chk);
    if (bad < n) {
        lsefit_fail("LSEFIT_MPI_CHECK: reduction %zu left different values "
                    "on the processes (entry %zu of %zu)",
                    c->n_reduce, bad, n);
        return LSE_EINTERNAL;
    }
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Start and end                                                       */

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

int lsefit_mpi_begin(lsefit_mpi **out)
{
    *out = NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return lsefit_fail("--mpi: MPI_Init failed");
    lsefit_mpi *c = calloc(1, sizeof *c);
    if (c == NULL) {
        /* every process fails alike here or the run cannot continue */
        MPI_Abort(MPI_COMM_WORLD, LSEFIT_FAIL);
        return lsefit_fail("out of memory");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->t_begin = MPI_Wtime();
    c->check = env_flag("LSEFIT_MPI_CHECK");
    const char *fault = getenv("LSEFIT_MPI_FAULT");
    if (fault != NULL) {
        long r = -1;
        unsigned long call = 0;
        if (sscanf(fault, "%ld:%lu", &r, &call) == 2 && r >= 0) {
            c->fault_rank = r;
            c->fault_call = call;
        }
    }
    c->stats = env_flag("LSEFIT_MPI_STATS") || lsefit_verbose;
    if (c->rank > 0) /* one process speaks */
        lsefit_quiet = 1;
    active_mpi = c;
    lsefit_fail_hook = capture;
    *out = c;
    return LSEFIT_OK;
}

int lsefit_mpi_end(lsefit_mpi *c, int rc)
{
    if (c == NULL)
        return rc;
    int status = rc;
    if (agree(c, rc != LSEFIT_OK)) {
        /* the lowest process whose own failure raised the flag speaks */
        int cand = c->raised ? c->rank : c->size, win = 0;
        MPI_Allreduce(&cand, &win, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        struct {
            int rc;
            char msg[sizeof c->msg];
        } m;
        memset(&m, 0, sizeof m);
        if (win >= c->size) /* cannot happen: someone raised the flag */
            win = 0;
        if (c->rank == win) {
            m.rc = rc != LSEFIT_OK ? rc : LSEFIT_FAIL;
            if (c->have_msg)
                snprintf(m.msg, sizeof m.msg, "%s", c->msg);
            else
                snprintf(m.msg, sizeof m.msg, "failed (exit status %d)", rc);
        }
        MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, win, MPI_COMM_WORLD);
        lsefit_fail_hook = NULL;
        if (c->size > 1)
            fprintf(stderr, "lsefit: process %d of %d: %s\n", win, c->size,
                    m.msg);
        else
            fprintf(stderr, "lsefit: %s\n", m.msg);
        status = m.rc;
    } else if (c->stats && c->rank == 0) {
        const double now = MPI_Wtime();
        fprintf(stderr,
                "lsefit: mpi: %d process%s, %zu reductions, %zu doubles "
                "(%zu bytes) summed per process, largest %zu doubles (%zu "
                "bytes), %.3f s in reductions; process 0: %.3f s reading, "
                "%.3f s after\n",
                c->size, c->size == 1 ? "" : "es", c->n_reduce, c->n_doubles,
                c->n_doubles * sizeof(double), c->max_doubles,
                c->max_doubles * sizeof(double), c->t_reduce,
                c->t_loaded - c->t_begin, now - c->t_loaded);
    }
    lsefit_fail_hook = NULL;
    active_mpi = NULL;
    free(c->name);
    free(c);
    fflush(stdout);
    fflush(stderr);
    MPI_Finalize();
    return status;
}

/* ------------------------------------------------------------------ */
/* Reading a share of one file                                         */

/* Bytes [a, b) of f into a new NUL-terminated buffer. */
static int read_bytes(FILE *f, const char *path, off_t a, off_t b, char **out)
{
    *out = NULL;
    const size_t n = (size_t)(b - a);
    char *buf = malloc(n + 1);
    if (buf == NULL)
        return lsefit_fail("out of memory");
    if (fseeko(f, a, SEEK_SET) != 0 || fread(buf, 1, n, f) != n) {
        free(buf);
        return lsefit_fail("cannot read '%s': %s", path,
                           ferror(f) ? strerror(errno) : "file changed");
    }
    buf[n] = '\0';
    *out = buf;
    return LSEFIT_OK;
}

/* The first line start at or after byte a (size: none). */
static int line_start(FILE *f, const char *path, off_t size, off_t a,
                      off_t *start)
{
    if (a <= 0) {
        *start = 0;
        return LSEFIT_OK;
    }
    char buf[65536];
    off_t p = a - 1;
    if (fseeko(f, p, SEEK_SET) != 0)
        return lsefit_fail("cannot read '%s': %s", path, strerror(errno));
    while (p < size) {
        const size_t got = fread(buf, 1, sizeof buf, f);
        if (got == 0)
            break;
        const char *nl = memchr(buf, '\n', got);
        if (nl != NULL) {
            *start = p + (off_t)(nl - buf) + 1;
            return LSEFIT_OK;
        }
        p += (off_t)got;
    }
    if (ferror(f))
        return lsefit_fail("cannot read '%s': %s", path, strerror(errno));
    *start = size;
    return LSEFIT_OK;
}

/* The head of the file as the library's CSV reader sees it (lib/io.c,
 * the reader of one process): heads of growing length, cut at a line end,
 * are parsed until one holds a data row. *opts gets the header choice and
 * the delimiter the reader detected; *head (NUL-terminated) the bytes
 * before the line of the first data row (header, comments, blank lines),
 * *head_lines their lines. */
static int read_head(FILE *f, const char *path, off_t size, lse_csv_opts *opts,
                     char **head, long *head_lines)
{
    *head = NULL;
    lse_table *t = NULL;
    lse_error err;
    int rc = LSEFIT_OK;
    size_t len = 0;
    for (off_t want = 65536; rc == LSEFIT_OK && t == NULL; want *= 2) {
        const off_t n = want < size ? want : size;
        free(*head);
        rc = read_bytes(f, path, 0, n, head);
        len = (size_t)n;
        while (rc == LSEFIT_OK && n < size && len > 0 && (*head)[len - 1] != '\n')
            len--; /* a whole last line */
        if (rc != LSEFIT_OK || (n < size && len == 0))
            continue;
        if (lse_table_parse(*head, len, path, opts, &t, &err) != LSE_OK &&
            n == size) /* the whole file: its error is the reader's */
            rc = lsefit_fail_lib(&err, NULL);
    }
    if (rc != LSEFIT_OK) {
        free(*head);
        *head = NULL;
        return rc;
    }
    opts->header = lse_table_has_header(t);
    opts->delimiter = lse_table_delimiter(t);
    *head_lines = (long)lse_table_line(t, 0) - 1;
    lse_table_free(t);
    size_t end = 0; /* the start of the line of the first data row */
    for (long l = 0; l < *head_lines && end < len; end++)
        l += (*head)[end] == '\n';
    (*head)[end] = '\0';
    return LSEFIT_OK;
}

/* Byte r * size / P, without overflow. */
static off_t nominal(off_t size, int r, int P)
{
    const off_t q = size / P, m = size % P;
    return q * r + (m * r) / P;
}

static int load_range(lsefit_mpi *c, const lsefit_data_opts *o,
                      lsefit_data *out)
{
    const char *path = o->path;
    if (strcmp(path, "-") == 0)
        return lsefit_fail("--mpi reads its share of the data by byte "
                           "ranges: standard input cannot be split (use a "
                           "file or --shards)");
    FILE *f = fopen(path, "rb");
    if (f == NULL) /* every process fails: the first one speaks */
        return lsefit_fail("cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    char *head = NULL, *own = NULL, *text = NULL;
    lse_table *t = NULL;
    int rc = LSEFIT_OK;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        rc = lsefit_fail("--mpi needs a regular file to split, not '%s' (use "
                         "--shards)",
                         path);
    const off_t size = sb.st_size;
    off_t a = 0, b = 0;
    if (rc == LSEFIT_OK)
        rc = line_start(f, path, size, nominal(size, c->rank, c->size), &a);
    b = size;
    if (rc == LSEFIT_OK && c->rank + 1 < c->size)
        rc = line_start(f, path, size, nominal(size, c->rank + 1, c->size), &b);
    /* the header and the delimiter as the reader of one process sees them */
    lse_csv_opts copts = lsefit_data_csv_opts(o);
    long head_lines = 0;
    if (rc == LSEFIT_OK)
        rc = read_head(f, path, size, &copts, &head, &head_lines);
    if (rc == LSEFIT_OK)
        rc = read_bytes(f, path, a, b, &own);
    fclose(f);
    /* the line where this share starts: newlines of the shares before */
    double lines = 0.0;
    for (off_t i = 0; rc == LSEFIT_OK && i < b - a; i++)
        lines += own[i] == '\n';
    double *all = NULL;
    if (rc == LSEFIT_OK) {
        all = malloc((size_t)c->size * sizeof *all);
        if (all == NULL)
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK)
        rc = coll_gather(c, &lines, all, sizeof lines);
    long first_line = 1;
    for (int q = 0; rc == LSEFIT_OK && q < c->rank; q++)
        first_line += (long)all[q];
    free(all);
    lse_error err;
    /* this share's text: the head of the file (the header line), then
     * its own lines; messages get the lines of the whole file */
    size_t len = (size_t)(b - a);
    if (rc == LSEFIT_OK) {
        if (c->rank > 0 && copts.header == 1) {
            const size_t hl = strlen(head);
            text = malloc(hl + len + 1);
            if (text == NULL) {
                rc = lsefit_fail("out of memory");
            } else {
                memcpy(text, head, hl);
                memcpy(text + hl, own, len + 1);
                len += hl;
                c->line_offset = first_line - 1 - head_lines;
            }
        } else {
            text = own;
            own = NULL;
            c->line_offset = first_line - 1;
        }
    }
    if (rc == LSEFIT_OK) {
        c->name = strdup(path);
        if (c->name == NULL)
            rc = lsefit_fail("out of memory");
    }
    if (rc == LSEFIT_OK &&
        lse_table_parse(text, len, path, &copts, &t, &err) != LSE_OK) {
        if (err.status == LSE_EPARSE && strstr(err.message, "no data rows"))
            rc =
                lsefit_fail("%s: no data row in the share of process %d of "
                            "%d (bytes %lld to %lld): use fewer processes",
                            path, c->rank, c->size, (long long)a, (long long)b);
        else
            rc = lsefit_fail_lib(&err, NULL);
    }
    free(head);
    free(own);
    free(text);
    if (rc != LSEFIT_OK)
        return rc;
    return lsefit_data_from_table(o, t, out);
}

/* ------------------------------------------------------------------ */
/* One file per process                                                */

static int load_shard(lsefit_mpi *c, const lsefit_data_opts *o,
                      const char *pattern, lsefit_data *out)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    const int gr = glob(pattern, 0, NULL, &g);
    int rc = LSEFIT_OK;
    if (gr == GLOB_NOMATCH)
        rc = lsefit_fail("--shards '%s': no file matches", pattern);
    else if (gr != 0)
        rc = lsefit_fail("--shards '%s': cannot list the files", pattern);
    else if (g.gl_pathc != (size_t)c->size)
        rc = lsefit_fail("--shards '%s' matches %zu file%s but there %s %d "
                         "process%s (one file per process)",
                         pattern, g.gl_pathc, g.gl_pathc == 1 ? "" : "s",
                         c->size == 1 ? "is" : "are", c->size,
                         c->size == 1 ? "" : "es");
    if (rc == LSEFIT_OK) {
        lsefit_data_opts so = *o;
        so.path = g.gl_pathv[c->rank];
        rc = lsefit_data_load(&so, out);
    }
    globfree(&g);
    if (rc == LSEFIT_OK) {
        c->name = strdup(pattern);
        if (c->name == NULL)
            rc = lsefit_fail("out of memory");
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/* Context rows of a series                                            */

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

/* What a process tells the others about the end of its share: its rows,
 * the global table row, sequence key and values of its last L rows. */
typedef struct tail_head {
    uint64_t n_rows;  /* kept rows */
    uint64_t n_table; /* table data rows (kept or dropped) */
    uint64_t n_tail;  /* min(L, n_rows) */
} tail_head;

static size_t tail_bytes(size_t lags, size_t d)
{
    return sizeof(tail_head) + lags * (2 * sizeof(uint64_t)) +
           lags * d * sizeof(double);
}

/* The sequence key of data row i (0 without --sequence). */
static uint64_t row_key(const lsefit_data *data, size_t i, int use_seq,
                        size_t sc)
{
    return use_seq ? fnv1a(lse_table_cell(data->table, data->rows[i], sc),
                           14695981039346656037ULL)
                   : 0;
}

/* This process's record (tail_bytes): its counts and its last rows. */
static void pack_tail(const lsefit_data *data, size_t lags, int use_seq,
                      size_t sc, unsigned char *mine)
{
    const size_t n = data->x->size1, d = data->d;
    tail_head h = {n, data->n_table, n < lags ? n : lags};
    memcpy(mine, &h, sizeof h);
    uint64_t *rows = (uint64_t *)(void *)(mine + sizeof h);
    uint64_t *keys = rows + lags;
    double *vals = (double *)(void *)(keys + lags);
    for (size_t q = 0; q < h.n_tail; q++) {
        const size_t i = n - h.n_tail + q;
        rows[q] = data->rows[i];
        keys[q] = row_key(data, i, use_seq, sc);
        for (size_t j = 0; j < d; j++)
            vals[q * d + j] = gsl_matrix_get(data->x, i, j);
    }
}

/* The m context rows of every process's records (all), nearest first in
 * src_q/src_i, then this process's rows. */
typedef struct context_src {
    const unsigned char *all;
    size_t rec, lags;
    const uint64_t *t0; /* global table row of each process's first row */
    const size_t *src_q, *src_i;
    size_t m, me;
} context_src;

/* x, trow and (with --sequence) seq of the m + n rows: the context rows
 * oldest first, then this process's rows; sequence ids break where the
 * key changes or a row was dropped, as the serial reader's do
 * (lsefit_data.c make_sequences). */
static int join_context(const context_src *cs, const lsefit_data *data,
                        int use_seq, size_t sc, gsl_matrix **x_out,
                        size_t **trow_out, size_t **seq_out)
{
    const size_t m = cs->m, n = data->x->size1, d = data->d, lags = cs->lags;
    gsl_matrix *x = gsl_matrix_alloc(m + n, d);
    size_t *trow = malloc((m + n) * sizeof *trow);
    uint64_t *gkey = malloc((m + n) * sizeof *gkey);
    uint64_t *grow = malloc((m + n) * sizeof *grow);
    size_t *seq = use_seq ? malloc((m + n) * sizeof *seq) : NULL;
    *x_out = x;
    *trow_out = trow;
    *seq_out = seq;
    const int rc = (x == NULL || trow == NULL || gkey == NULL ||
                    grow == NULL || (use_seq && seq == NULL))
                       ? lsefit_fail("out of memory")
                       : LSEFIT_OK;
    for (size_t k = 0; rc == LSEFIT_OK && k < m; k++) { /* oldest first */
        const size_t q = cs->src_q[m - 1 - k], i = cs->src_i[m - 1 - k];
        const unsigned char *r = cs->all + q * cs->rec;
        const uint64_t *rr =
            (const uint64_t *)(const void *)(r + sizeof(tail_head));
        const uint64_t *rk = rr + lags;
        const double *rv = (const double *)(const void *)(rk + lags);
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, k, j, rv[i * d + j]);
        grow[k] = cs->t0[q] + rr[i];
        gkey[k] = rk[i];
        trow[k] = SIZE_MAX; /* not a row of this process's table */
    }
    if (rc == LSEFIT_OK) {
        gsl_matrix_view own = gsl_matrix_submatrix(x, m, 0, n, d);
        gsl_matrix_memcpy(&own.matrix, data->x);
    }
    for (size_t i = 0; rc == LSEFIT_OK && i < n; i++) {
        trow[m + i] = data->rows[i];
        grow[m + i] = cs->t0[cs->me] + data->rows[i];
        gkey[m + i] = row_key(data, i, use_seq, sc);
    }
    for (size_t i = 0, id = 0; rc == LSEFIT_OK && use_seq && i < m + n; i++) {
        if (i > 0 && (gkey[i] != gkey[i - 1] || grow[i] != grow[i - 1] + 1))
            id++;
        seq[i] = id;
    }
    free(gkey);
    free(grow);
    return rc;
}

/* Prepend the last L rows before this share (from the processes before,
 * nearest first) to x and, with --sequence, give them sequence ids that
 * break where the key changes or a row was dropped (join_context). */
static int add_context(lsefit_mpi *c, const lsefit_data_opts *o, size_t lags,
                       lsefit_data *data)
{
    const size_t d = data->d, P = (size_t)c->size;
    const size_t rec = tail_bytes(lags, d);
    size_t sc = 0;
    const int use_seq = o->sequence != NULL;
    lse_error err;
    if (use_seq &&
        lse_table_find_column(data->table, o->sequence, &sc, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    unsigned char *mine = calloc(1, rec), *all = malloc(P * rec);
    if (mine == NULL || all == NULL) {
        free(mine);
        free(all);
        return lsefit_fail("out of memory");
    }
    pack_tail(data, lags, use_seq, sc, mine);
    int rc = coll_gather(c, mine, all, rec);
    free(mine);
    /* the global table row of each process's first table row */
    uint64_t *t0 = calloc(P + 1, sizeof *t0);
    if (rc == LSEFIT_OK && t0 == NULL)
        rc = lsefit_fail("out of memory");
    for (size_t q = 0; rc == LSEFIT_OK && q < P; q++) {
        tail_head hq;
        memcpy(&hq, all + q * rec, sizeof hq);
        t0[q + 1] = t0[q] + hq.n_table;
    }
    /* collect up to L rows walking back over the processes */
    size_t m = 0;
    const size_t me = (size_t)c->rank;
    size_t *src_q = malloc((lags + 1) * sizeof *src_q);
    size_t *src_i = malloc((lags + 1) * sizeof *src_i);
    if (rc == LSEFIT_OK && (src_q == NULL || src_i == NULL))
        rc = lsefit_fail("out of memory");
    for (size_t q = me; rc == LSEFIT_OK && q-- > 0 && m < lags;) {
        tail_head hq;
        memcpy(&hq, all + q * rec, sizeof hq);
        for (size_t i = hq.n_tail; i-- > 0 && m < lags;) {
            src_q[m] = q;
            src_i[m] = i;
            m++;
        }
    }
    gsl_matrix *x = NULL;
    size_t *seq = NULL, *trow = NULL;
    const context_src cs = {all, rec, lags, t0, src_q, src_i, m, me};
    if (rc == LSEFIT_OK && m > 0)
        rc = join_context(&cs, data, use_seq, sc, &x, &trow, &seq);
    free(src_q);
    free(src_i);
    free(t0);
    free(all);
    if (rc != LSEFIT_OK || m == 0) {
        gsl_matrix_free(x);
        free(seq);
        free(trow);
        return rc;
    }
    gsl_matrix_free(data->x);
    data->x = x;
    free(data->rows);
    data->rows = trow;
    if (use_seq) {
        free(data->seq);
        data->seq = seq;
    }
    c->context_rows = m;
    return LSEFIT_OK;
}

/* Every process has the columns of process 0. */
static int check_columns(lsefit_mpi *c, const lsefit_data *data)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t j = 0; j < data->d; j++)
        h = fnv1a(",", fnv1a(data->names[j], h));
    const uint64_t mine[2] = {data->d, h};
    uint64_t *all = malloc((size_t)c->size * sizeof mine);
    if (all == NULL)
        return lsefit_fail("out of memory");
    int rc = coll_gather(c, mine, all, sizeof mine);
    if (rc == LSEFIT_OK && (all[0] != mine[0] || all[1] != mine[1]))
        rc = lsefit_fail("%s: the columns differ from those of process 0 "
                         "(%zu column%s here, first '%s')",
                         lse_table_name(data->table), data->d,
                         data->d == 1 ? "" : "s", data->names[0]);
    free(all);
    return rc;
}

/* The data's reduction (lsefit_share): the checks and the
 * standardization of lsefit_data.c over every process. */
static int share_reduce(void *user, double *buf, size_t n, lsefit_op op)
{
    return coll_doubles(user, buf, n,
                        op == LSEFIT_OP_SUM   ? MPI_SUM
                        : op == LSEFIT_OP_MIN ? MPI_MIN
                                              : MPI_MAX);
}

int lsefit_mpi_data_load(lsefit_mpi *c, const lsefit_data_opts *o,
                         const char *shards, size_t lags, lsefit_data *out)
{
    memset(out, 0, sizeof *out);
    c->context_rows = 0;
    int rc =
        shards != NULL ? load_shard(c, o, shards, out) : load_range(c, o, out);
    if (rc == LSEFIT_OK)
        rc = check_columns(c, out);
    double n = out->x != NULL ? (double)out->x->size1 : 0.0;
    if (rc == LSEFIT_OK)
        rc = coll_doubles(c, &n, 1, MPI_SUM);
    if (rc == LSEFIT_OK)
        c->n_total = (size_t)n;
    if (rc == LSEFIT_OK && lags > 0)
        rc = add_context(c, o, lags, out);
    c->share = (lsefit_share){c->context_rows, c->n_total, c->name,
                              share_reduce, c};
    out->share = &c->share;
    if (rc != LSEFIT_OK)
        lsefit_data_free(out);
    c->t_loaded = MPI_Wtime();
    return rc;
}

/* ------------------------------------------------------------------ */
/* Sums over every process                                             */

int lsefit_mpi_sum_size(lsefit_mpi *c, size_t *v)
{
    double x = (double)*v;
    const int rc = coll_doubles(c, &x, 1, MPI_SUM);
    if (rc == LSEFIT_OK)
        *v = (size_t)x;
    return rc;
}

#else /* built without MPI */

int lsefit_mpi_begin(lsefit_mpi **out)
{
    *out = NULL;
    lsefit_exec_full(); /* returns only when there is no lsefit-full */
    return lsefit_fail("--mpi: this lsefit was built without MPI (install "
                       "libopenmpi-dev and configure with meson setup "
                       "-Dmpi=enabled)");
}

int lsefit_mpi_end(lsefit_mpi *mpi, int rc)
{
    (void)mpi;
    return rc;
}

lse_status lsefit_mpi_reduce(double *buf, size_t n, void *user)
{
    (void)buf;
    (void)n;
    (void)user;
    return LSE_ENOTSUP;
}

int lsefit_mpi_data_load(lsefit_mpi *mpi, const lsefit_data_opts *o,
                         const char *shards, size_t lags, lsefit_data *out)
{
    (void)mpi;
    (void)shards;
    (void)lags;
    return lsefit_data_load(o, out);
}

int lsefit_mpi_sum_size(lsefit_mpi *mpi, size_t *v)
{
    (void)mpi;
    (void)v;
    return LSEFIT_OK;
}

#endif /* LSEFIT_HAVE_MPI */
