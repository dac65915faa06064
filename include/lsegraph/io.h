#ifndef LSEGRAPH_IO_H
#define LSEGRAPH_IO_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

/**
 * @file io.h
 * @brief Files: CSV tables of data (lib/io.c, parsed by libcsv) and JSON
 * documents for fitted models (lib/json.c, parsed by jansson).
 *
 * The dialects, every error message and the reasons for the two libraries
 * are in docs/io.md. Reading a data set:
 * @code
 * lse_error err;
 * lse_table *t = NULL;
 * gsl_matrix *x = NULL; // (n, 2)
 * size_t cols[2];
 * lse_status st = lse_table_read("data/faithful.csv", NULL, &t, &err);
 * if (st == LSE_OK)
 *     st = lse_table_find_column(t, "eruptions", &cols[0], &err);
 * if (st == LSE_OK)
 *     st = lse_table_find_column(t, "waiting", &cols[1], &err);
 * if (st == LSE_OK)
 *     st = lse_table_to_matrix(t, cols, 2, LSE_MISSING_ERROR, &x, NULL,
 *                              &err);
 * if (st != LSE_OK)
 *     fprintf(stderr, "%s\n", err.message);
 * lse_table_free(t);
 * @endcode
 * Writing a model file:
 * @code
 * lse_json *doc = lse_json_new_object();
 * st = lse_json_set_string(doc, "model", "gmm", &err);
 * if (st == LSE_OK)
 *     st = lse_json_set_vector(doc, "weights", weights, &err);
 * if (st == LSE_OK)
 *     st = lse_json_set_matrix(doc, "means", means, &err); // (K, d)
 * if (st == LSE_OK)
 *     st = lse_json_save(doc, "model.json", &err);
 * lse_json_free(doc);
 * @endcode
 *
 * Every fallible call returns an lse_status and, when @p err is not NULL,
 * fills it with "function: file:line:column: facts". Paths equal to "-"
 * mean standard input (readers) or standard output (writers).
 */

#include <stddef.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include <lsegraph/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/** @brief Read all of @p path ("-": standard input) into memory.
 *  @param[out] data a malloc'ed buffer holding the bytes plus a trailing
 *              NUL (not counted in @p len); the caller calls free().
 *  @param[out] len  number of bytes read.
 *  @return LSE_OK; LSE_EFAULT for a NULL argument; LSE_EIO when the file
 *          cannot be opened or read (message names the file and the
 *          system error); LSE_ENOMEM. */
LSE_API lse_status lse_file_read(const char *path, char **data, size_t *len,
                                 lse_error *err);

/** @brief Write @p len bytes to @p path completely or not at all.
 *
 *  The bytes go to a new file "PATH.tmp.XXXXXX" in the same directory
 *  (created with mode 0666 minus the umask; a file that is replaced keeps
 *  its permission bits), which is flushed to disk and then renamed over
 *  @p path; on any failure the temporary file is removed and @p path is
 *  untouched. Through a symbolic link the file it points to is replaced.
 *  "-" writes to standard output, and a device or FIFO (/dev/null) is
 *  written in place (neither is atomic). A set of one output: see
 *  lse_outputs_add() for what is refused before anything is written (a
 *  read-only file, a directory, a missing directory).
 *  @return LSE_OK; LSE_EFAULT; LSE_EIO (message names the file and the
 *          system error). */
LSE_API lse_status lse_file_write_atomic(const char *path, const char *data,
                                         size_t len, lse_error *err);

/** @brief 1 when @p a and @p b name the same file, else 0: the same device
 *  and inode when both exist, the same canonical path (real directory +
 *  last component) when neither does. "-" (standard input or output) is
 *  never the same as anything, NULL neither. */
LSE_API int lse_path_same(const char *a, const char *b);

/** @brief The files one command writes, committed all together or not at
 *  all (docs/io.md, "Outputs"). Opaque.
 *
 *  Declare every input and output first (lse_outputs_input(),
 *  lse_outputs_add()), before any work: an output that is the same file as
 *  an input or as another output is refused, and so are read-only files,
 *  directories and directories that do not exist. Then
 *  lse_outputs_write() each output: a regular file goes to a temporary
 *  file "TARGET.tmp.XXXXXX" beside it at once; standard output ("-") and
 *  devices or FIFOs are kept in memory. lse_outputs_commit() writes the
 *  kept bytes in place, then renames every temporary file over its target;
 *  lse_outputs_discard() or lse_outputs_free() removes the temporaries
 *  instead. A signal handler removes the temporaries of every set with
 *  lse_file_discard_temporaries(). */
typedef struct lse_outputs lse_outputs;

/** @brief A new empty set, owned by the caller (lse_outputs_free()).
 *  @return LSE_OK; LSE_EFAULT; LSE_ENOMEM. */
LSE_API lse_status lse_outputs_new(lse_outputs **out, lse_error *err);

/** @brief Declare the input file @p path ("-" is ignored), called
 *  @p what in messages (e.g. "the data"; NULL: "the input").
 *  @return LSE_OK; LSE_EFAULT; LSE_ENOMEM; LSE_EINVAL when it is the same
 *          file (lse_path_same()) as a declared output: "OUT 'x.csv' is
 *          the same file as the data 'x.csv': writing it would destroy an
 *          input; choose another output file". Devices and FIFOs are
 *          exempt. */
LSE_API lse_status lse_outputs_input(lse_outputs *o, const char *path,
                                     const char *what, lse_error *err);

/** @brief Declare the output @p path ("-": standard output), called
 *  @p what in messages (e.g. "--labels"; NULL: "the output").
 *  @return LSE_OK; LSE_EFAULT; LSE_ENOMEM; LSE_EINVAL when it is the same
 *          file as a declared input or output (devices, FIFOs and "-" are
 *          exempt); LSE_EIO "cannot write --labels 'x.csv': the file is
 *          read-only and is not replaced; make it writable (chmod u+w
 *          'x.csv') or choose another file" (no write permission bit, or
 *          no permission), for a directory, and "cannot write 'd/x.csv':
 *          No such file or directory (directory 'd')" when the directory
 *          is missing or not writable; LSE_EINVAL after a commit. */
LSE_API lse_status lse_outputs_add(lse_outputs *o, const char *path,
                                   const char *what, lse_error *err);

/** @brief Write the whole contents of the output @p path: a declared
 *  output not yet written with that exact name, else a new declaration
 *  (as lse_outputs_add()). A regular file goes to its temporary file now
 *  (flushed to disk; a replaced file's permission bits are kept), "-" and
 *  devices are copied into memory.
 *  @return LSE_OK; LSE_EFAULT; LSE_EIO (the temporary file is removed);
 *          LSE_ENOMEM; the errors of lse_outputs_add(). */
LSE_API lse_status lse_outputs_write(lse_outputs *o, const char *path,
                                     const char *data, size_t len,
                                     lse_error *err);

/** @brief Number of temporary files of @p o that exist now (written, not
 *  yet renamed or removed). */
LSE_API size_t lse_outputs_pending(const lse_outputs *o);

/** @brief Commit: write the bytes kept for standard output (then flush
 *  it) and for devices, in the order written; only when all of that
 *  succeeded rename every temporary file over its target. On failure every
 *  temporary file not yet renamed is removed. A signal handler's
 *  lse_file_discard_temporaries() waits for the renames of a commit that
 *  has begun (it returns 0), so a commit is never cut in half by a signal.
 *  Outputs declared but never written are left alone. The set cannot be
 *  used again.
 *  @return LSE_OK; LSE_EFAULT; LSE_EIO naming the file (the renames are
 *          the last step: a rename that the system refuses there leaves
 *          the outputs renamed before it replaced); LSE_EINVAL when
 *          already committed or discarded. */
LSE_API lse_status lse_outputs_commit(lse_outputs *o, lse_error *err);

/** @brief Remove every temporary file of @p o and forget the kept bytes;
 *  nothing is replaced. NULL is a no-op. */
LSE_API void lse_outputs_discard(lse_outputs *o);

/** @brief lse_outputs_discard(), then free @p o. NULL is a no-op. */
LSE_API void lse_outputs_free(lse_outputs *o);

/** @brief Remove every temporary file that lse_file_write_atomic() and
 *  the output sets of this process have created and not yet renamed.
 *
 *  Async-signal-safe (only unlink() and lock-free atomics): meant for a
 *  program's SIGINT/SIGTERM handler before it dies (the library installs
 *  no handler). Up to 64 temporary files at a time are tracked.
 *  @return 1 when done; 0 when a commit is renaming at this moment and
 *          nothing was removed: the handler should let it finish (record
 *          the signal, return, and act on it after the commit). */
LSE_API int lse_file_discard_temporaries(void);

/* ------------------------------------------------------------------ */
/* CSV tables                                                          */
/* ------------------------------------------------------------------ */

/** @brief A table of string cells read from CSV text, opaque. Every row
 *  has the same number of cells and remembers the line it started on. */
typedef struct lse_table lse_table;

/** @brief How to read CSV text; get the defaults from
 *  lse_csv_opts_default() and change what you need. */
typedef struct lse_csv_opts {
    /** Field delimiter; 0 (default) detects ',', ';', '\\t' or white
     *  space from the first lines that are neither blank nor a comment.
     *  ' ' means white space: runs of spaces and tabs separate the fields
     *  and are ignored at the start and end of a line (R's write.table,
     *  most .dat files). Must not be '"', CR, LF or the comment
     *  character. */
    char delimiter;
    /** 1: the first row holds the column names; 0: it is data; -1
     *  (default): it is a header when one of its cells is not a number
     *  and not a missing value (empty, NA, NaN). */
    int header;
    /** Lines whose first byte is this character are skipped (default
     *  '#'); 0 turns comments off. Only recognised between rows, never
     *  inside a quoted field. */
    char comment;
    /** lse_table_read() refuses an input longer than this many bytes
     *  (LSE_ENOMEM "...: input exceeds the limit of N bytes"), so that an
     *  endless stream cannot take all memory; 0 (default) means
     *  LSE_CSV_MAX_BYTES, SIZE_MAX means no limit. */
    size_t max_bytes;
} lse_csv_opts;

/** @brief The default input limit of lse_table_read(): 4 GiB. */
#define LSE_CSV_MAX_BYTES ((size_t)1 << (sizeof(size_t) > 4 ? 32 : 31))

/** @brief The default options: auto-detected delimiter and header, '#'
 *  comments, the LSE_CSV_MAX_BYTES input limit. */
LSE_API lse_csv_opts lse_csv_opts_default(void);

/** @brief Read the CSV file @p path ("-": standard input) into a table.
 *
 *  Same as lse_file_read() followed by lse_table_parse() with the file
 *  name as @p name, except that reading stops early: at the first NUL byte
 *  (binary data, LSE_EPARSE "name:line:col: NUL byte in text ..."), and
 *  past opts->max_bytes (LSE_ENOMEM "name: input exceeds the limit of N
 *  bytes ..."), so /dev/zero or an endless pipe fail at once.
 *  @param opts borrowed; NULL means lse_csv_opts_default().
 *  @param[out] out the table, owned by the caller (lse_table_free()); set
 *              to NULL on failure.
 *  @return LSE_OK; LSE_EIO (missing or unreadable file); LSE_ENOMEM (over
 *          the limit); the errors of lse_table_parse(). */
LSE_API lse_status lse_table_read(const char *path, const lse_csv_opts *opts,
                                  lse_table **out, lse_error *err);

/** @brief Parse @p len bytes of CSV text into a table.
 *
 *  Rows end with LF, CRLF or CR; fields may be quoted with '"' (a quote
 *  inside is doubled) and then hold delimiters and line breaks; spaces
 *  and tabs around unquoted fields are trimmed; blank lines, comment lines
 *  and a leading UTF-8 byte order mark are skipped.
 *  @param data borrowed, need not be NUL-terminated.
 *  @param name the file name used in messages (borrowed, copied); NULL
 *              gives "<memory>".
 *  @param opts borrowed; NULL means lse_csv_opts_default().
 *  @param[out] out the table, owned by the caller; NULL on failure.
 *  @return LSE_OK;
 *   LSE_EFAULT (NULL @p out, or NULL @p data with @p len > 0);
 *   LSE_EINVAL (bad option);
 *   LSE_EPARSE with "name:line:col:" for malformed quoting, a NUL byte or
 *   an unterminated quoted field, "name:line: 3 fields, expected 2" for a
 *   ragged row, "name: no data rows" for an empty file or a header alone,
 *   "name:line: columns 1 and 3 are both named 'a' ..." for a header that
 *   names two columns alike (lse_table_find_column() would be ambiguous);
 *   LSE_ENOMEM. */
LSE_API lse_status lse_table_parse(const char *data, size_t len,
                                   const char *name, const lse_csv_opts *opts,
                                   lse_table **out, lse_error *err);

/** @brief Free @p t; NULL is a no-op. */
LSE_API void lse_table_free(lse_table *t);

/** @brief Find the first repeated name among @p names (n of them, borrowed):
 *  on return *second is the smallest index j whose name equals an earlier
 *  one, and *first that earlier index; *second = SIZE_MAX when every name
 *  is different. Columns and features are found by name, so callers refuse
 *  a repeat (CSV headers, model files' feature_names).
 *  @return LSE_OK, or LSE_ENOMEM (message in @p err, may be NULL). */
LSE_API lse_status lse_names_find_repeat(const char *const *names, size_t n,
                                         size_t *first, size_t *second,
                                         lse_error *err);


/** @brief Number of data rows (the header is not counted); 0 for NULL. */
LSE_API size_t lse_table_rows(const lse_table *t);

/** @brief Number of columns; 0 for NULL. */
LSE_API size_t lse_table_cols(const lse_table *t);

/** @brief 1 when the first row was read as column names, else 0. */
LSE_API int lse_table_has_header(const lse_table *t);

/** @brief The delimiter used (given or detected); 0 for NULL. */
LSE_API char lse_table_delimiter(const lse_table *t);

/** @brief The file name used in messages (borrowed from @p t). */
LSE_API const char *lse_table_name(const lse_table *t);

/** @brief Name of column @p j (0-based): the header cell, or "1".."n"
 *  without a header. Borrowed from @p t; NULL when @p j is out of range. */
LSE_API const char *lse_table_column_name(const lse_table *t, size_t j);

/** @brief Text of data row @p i, column @p j (both 0-based), without
 *  quotes. Borrowed from @p t; NULL when out of range. */
LSE_API const char *lse_table_cell(const lse_table *t, size_t i, size_t j);

/** @brief 1-based line of the source where data row @p i starts; 0 when
 *  out of range. */
LSE_API size_t lse_table_line(const lse_table *t, size_t i);

/** @brief Find a column by name, or else by 1-based index ("2").
 *  @param[out] j the 0-based column index.
 *  @return LSE_OK; LSE_EFAULT; LSE_ENOTFOUND with the list of column names
 *          in the message. An exact name match wins over an index. */
LSE_API lse_status lse_table_find_column(const lse_table *t, const char *key,
                                         size_t *j, lse_error *err);

/** @brief What lse_table_to_matrix() does with a missing value: an empty
 *  cell, "NA" or "NaN" (any case). */
typedef enum lse_missing {
    LSE_MISSING_ERROR = 0, /**< fail with LSE_EPARSE */
    LSE_MISSING_DROP = 1,  /**< leave out rows that have one */
    LSE_MISSING_KEEP = 2   /**< store NAN (for marginalising models) */
} lse_missing;

/** @brief Convert columns of @p t to numbers.
 *
 *  Each cell, trimmed of white space, must be a whole strtod() number in
 *  the C locale ("3.6", "-2.5e17", "0x1p-3"), whatever the program's
 *  locale.
 *  @param cols 0-based column indices, borrowed; NULL selects every column
 *              in order (and @p n_cols is ignored).
 *  @param[out] out (kept rows, n_cols) matrix, owned by the caller
 *              (gsl_matrix_free()).
 *  @param[out] row_index may be NULL; else a malloc'ed array of the data
 *              row (0-based) each output row came from, freed with free().
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (no columns, unknown policy);
 *   LSE_ERANGE (a column index out of range);
 *   LSE_EPARSE "name:line:col: 'abc' is not a number (column 'x')",
 *   "name:line:col: missing value (column 'x')" under LSE_MISSING_ERROR,
 *   or "no rows left" when every row was dropped;
 *   LSE_ENONFINITE "name:line:col: 'inf' is not finite" (also overflow);
 *   LSE_ENOMEM. Columns are counted from 1 in messages. */
LSE_API lse_status lse_table_to_matrix(const lse_table *t, const size_t *cols,
                                       size_t n_cols, lse_missing missing,
                                       gsl_matrix **out, size_t **row_index,
                                       lse_error *err);

/** @brief Format @p m as CSV text: one line per row, ',' between values,
 *  LF line ends, C locale whatever the program's locale.
 *  @param names NULL (no header) or m->size2 column names, borrowed;
 *         quoted when needed.
 *  @param precision significant digits, 1..17; 0 means 17, which reads
 *         back bit-exact. NaN is written "NaN", infinities "Inf"/"-Inf".
 *  @param[out] text malloc'ed, NUL-terminated, freed with free().
 *  @param[out] len may be NULL; the length of @p text.
 *  @return LSE_OK; LSE_EFAULT; LSE_EINVAL (precision); LSE_ENOMEM. */
LSE_API lse_status lse_matrix_format_csv(const gsl_matrix *m,
                                         const char *const *names,
                                         int precision, char **text,
                                         size_t *len, lse_error *err);

/** @brief lse_matrix_format_csv() then lse_file_write_atomic(): @p path
 *  ("-": standard output) gets the whole table or is left untouched.
 *  @return as those two functions. */
LSE_API lse_status lse_matrix_write_csv(const char *path, const gsl_matrix *m,
                                        const char *const *names, int precision,
                                        lse_error *err);

/* ------------------------------------------------------------------ */
/* JSON documents                                                      */
/* ------------------------------------------------------------------ */

/** @brief A JSON object with flat keys, opaque (jansson stays out of this
 *  header). Keys keep their insertion order; setting an existing key
 *  replaces its value in place. Numbers are written with 17 significant
 *  digits, so every double reads back bit-exact. JSON has no NaN or
 *  infinity: setters refuse them. */
typedef struct lse_json lse_json;

/** @brief A new empty object, owned by the caller (lse_json_free());
 *  NULL only when out of memory. */
LSE_API lse_json *lse_json_new_object(void);

/** @brief Free @p doc; NULL is a no-op. */
LSE_API void lse_json_free(lse_json *doc);

/** @brief Read the JSON file @p path ("-": standard input); its top level
 *  must be an object, and a key may appear only once.
 *  @param[out] out owned by the caller; NULL on failure. Messages from the
 *              getters on it name @p path.
 *  @return LSE_OK; LSE_EFAULT; LSE_EIO; LSE_EPARSE
 *          "path:line:col: <jansson's text>"; LSE_ENOMEM. */
LSE_API lse_status lse_json_load(const char *path, lse_json **out,
                                 lse_error *err);

/** @brief Parse @p len bytes of JSON text; @p name (NULL: "<memory>") is
 *  used in messages. Otherwise as lse_json_load(). */
LSE_API lse_status lse_json_parse(const char *text, size_t len,
                                  const char *name, lse_json **out,
                                  lse_error *err);

/** @brief The document as pretty JSON text: two-space indent, keys in
 *  insertion order, arrays of numbers on one line, a matrix one row per
 *  line, a trailing newline. Deterministic.
 *  @param[out] text malloc'ed, NUL-terminated, freed with free().
 *  @return LSE_OK; LSE_EFAULT; LSE_ENOMEM. */
LSE_API lse_status lse_json_to_string(const lse_json *doc, char **text,
                                      lse_error *err);

/** @brief lse_json_to_string() then lse_file_write_atomic(). */
LSE_API lse_status lse_json_save(const lse_json *doc, const char *path,
                                 lse_error *err);

/** @brief 1 when @p doc has @p key, else 0 (also for NULL arguments). */
LSE_API int lse_json_has(const lse_json *doc, const char *key);

/* Setters: @p key and every pointer are borrowed and the values copied.
 * Each returns LSE_OK; LSE_EFAULT for a NULL argument; LSE_EINVAL for an
 * empty key, or a key or string that is not UTF-8; LSE_ENONFINITE for NaN
 * or infinity; LSE_ENOMEM. */

/** @brief Set @p key to the number @p x (written as a real: 3 -> 3.0). */
LSE_API lse_status lse_json_set_number(lse_json *doc, const char *key, double x,
                                       lse_error *err);

/** @brief Set @p key to the integer @p x. */
LSE_API lse_status lse_json_set_integer(lse_json *doc, const char *key,
                                        long long x, lse_error *err);

/** @brief Set @p key to true (@p x != 0) or false. */
LSE_API lse_status lse_json_set_bool(lse_json *doc, const char *key, int x,
                                     lse_error *err);

/** @brief Set @p key to the UTF-8 string @p s. */
LSE_API lse_status lse_json_set_string(lse_json *doc, const char *key,
                                       const char *s, lse_error *err);

/** @brief Set @p key to an array of the @p n strings @p s (n may be 0). */
LSE_API lse_status lse_json_set_strings(lse_json *doc, const char *key,
                                        const char *const *s, size_t n,
                                        lse_error *err);

/** @brief Set @p key to [v0, v1, ...], shape (n). */
LSE_API lse_status lse_json_set_vector(lse_json *doc, const char *key,
                                       const gsl_vector *v, lse_error *err);

/** @brief Set @p key to [[row 0], [row 1], ...], shape (rows, cols). */
LSE_API lse_status lse_json_set_matrix(lse_json *doc, const char *key,
                                       const gsl_matrix *m, lse_error *err);

/** @brief Set @p key to the 3-D array [K][r][c] of the @p k matrices
 *  @p ms, all of shape (r, c); LSE_EDIM if the shapes differ, LSE_EINVAL
 *  if @p k is 0. */
LSE_API lse_status lse_json_set_matrices(lse_json *doc, const char *key,
                                         const gsl_matrix *const *ms, size_t k,
                                         lse_error *err);

/** @brief Set @p key to the 3-D array [K][r][c] whose block k is rows
 *  k*r .. k*r + r - 1 of @p stacked, shape (K*r, c); LSE_EDIM unless
 *  @p k divides the row count, LSE_EINVAL if @p k is 0. */
LSE_API lse_status lse_json_set_stack(lse_json *doc, const char *key,
                                      const gsl_matrix *stacked, size_t k,
                                      lse_error *err);

/** @brief Set @p key to a deep copy of the object @p value (nested
 *  objects such as "options"). */
LSE_API lse_status lse_json_set_object(lse_json *doc, const char *key,
                                       const lse_json *value, lse_error *err);

/* Getters: each returns LSE_OK; LSE_EFAULT for a NULL argument;
 * LSE_ENOTFOUND "file: no key 'means'" when the key is absent;
 * LSE_EPARSE "file: key 'means' must be a 3 x 2 array of numbers, got
 * 2 x 2" for a wrong type or shape; LSE_ENOMEM. Shape arguments equal to 0
 * accept any size; arrays must not be empty. Nested keys are named
 * "options.seed" in messages. */

/** @brief Get a number (JSON integer or real). */
LSE_API lse_status lse_json_get_number(const lse_json *doc, const char *key,
                                       double *out, lse_error *err);

/** @brief Get an integer (a JSON integer, or a real with an integral value
 *  in range). */
LSE_API lse_status lse_json_get_integer(const lse_json *doc, const char *key,
                                        long long *out, lse_error *err);

/** @brief Get a boolean as 1 or 0. */
LSE_API lse_status lse_json_get_bool(const lse_json *doc, const char *key,
                                     int *out, lse_error *err);

/** @brief Get a string, borrowed from @p doc: valid until @p doc is freed
 *  or @p key is set again. */
LSE_API lse_status lse_json_get_string(const lse_json *doc, const char *key,
                                       const char **out, lse_error *err);

/** @brief Get an array of strings (possibly empty).
 *  @param[out] out a NULL-terminated array of @p n strings in ONE malloc'ed
 *              block: a single free(*out) releases everything.
 *  @param[out] n   number of strings. */
LSE_API lse_status lse_json_get_strings(const lse_json *doc, const char *key,
                                        char ***out, size_t *n, lse_error *err);

/** @brief Get a vector of @p n numbers (0: any length).
 *  @param[out] out owned by the caller (gsl_vector_free()). */
LSE_API lse_status lse_json_get_vector(const lse_json *doc, const char *key,
                                       size_t n, gsl_vector **out,
                                       lse_error *err);

/** @brief Get a (rows, cols) matrix stored as an array of equal-length
 *  rows (0: any size).
 *  @param[out] out owned by the caller (gsl_matrix_free()). */
LSE_API lse_status lse_json_get_matrix(const lse_json *doc, const char *key,
                                       size_t rows, size_t cols,
                                       gsl_matrix **out, lse_error *err);

/** @brief Get a [K][r][c] array as one stacked (K*r, c) matrix: block k is
 *  gsl_matrix_submatrix(out, k * r, 0, r, c). Shape arguments 0: any.
 *  @param[out] out owned by the caller (gsl_matrix_free()).
 *  @param[out] k_out may be NULL; else the number K of blocks. */
LSE_API lse_status lse_json_get_stack(const lse_json *doc, const char *key,
                                      size_t k, size_t rows, size_t cols,
                                      gsl_matrix **out, size_t *k_out,
                                      lse_error *err);

/** @brief Get a deep copy of a nested object.
 *  @param[out] out owned by the caller (lse_json_free()). */
LSE_API lse_status lse_json_get_object(const lse_json *doc, const char *key,
                                       lse_json **out, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_IO_H */
