#ifndef LSEGRAPH_STATUS_H
#define LSEGRAPH_STATUS_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stddef.h>

#if defined(LSE_BUILDING)
#define LSE_API __attribute__((visibility("default")))
#else
#define LSE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Status of a fallible call: 0 is success, > 0 an error,
 *  LSE_CONTINUE (< 0) "not converged yet" (like GSL_CONTINUE). */
typedef enum lse_status {
    LSE_CONTINUE = -1,  /**< iteration has not converged yet */
    LSE_OK = 0,         /**< success */
    LSE_EFAULT = 1,     /**< a required pointer was NULL */
    LSE_EINVAL = 2,     /**< invalid argument (bad name, flag, option) */
    LSE_EDIM = 3,       /**< mismatched dimensions */
    LSE_ERANGE = 4,     /**< a view or index lies outside its node */
    LSE_EDOM = 5,       /**< value outside its domain (beta <= 0, ...) */
    LSE_ENONFINITE = 6, /**< NaN or infinity in an input or result */
    LSE_ENOMEM = 7,     /**< out of memory */
    LSE_ENUMERIC = 8,   /**< numerical failure (singular, not SPD) */
    LSE_ENOCONV = 9,    /**< iteration limit reached without convergence */
    LSE_EINCREASE = 10, /**< energy increased where it must not */
    LSE_EIO = 11,       /**< cannot read or write a file */
    LSE_EPARSE = 12,    /**< malformed input text (CSV, JSON, spec) */
    LSE_ENOTFOUND = 13, /**< no such node, term, column or similarity */
    LSE_EEXIST = 14,    /**< name already in use */
    LSE_EGSL = 15,      /**< other GSL error */
    LSE_EINTERNAL = 16, /**< broken invariant: a bug in lsegraph */
    LSE_ENOTSUP = 17    /**< operation not provided by this object */
} lse_status;

/** @brief Static English text for @p status; never NULL. */
LSE_API const char *lse_strerror(lse_status status);

/** @brief Map a GSL error code to an lse_status (GSL_SUCCESS -> LSE_OK). */
LSE_API lse_status lse_status_from_gsl(int gsl_errno);

/** @brief Turn off GSL's abort-on-error handler unless the program set its
 *  own handler. Every lsegraph constructor calls it; idempotent. */
LSE_API void lse_gsl_quiet(void);

/** @brief Error detail for calls that have no graph to keep it on. */
typedef struct lse_error {
    lse_status status; /**< the status returned by the failing call */
    char message[512]; /**< "function: facts", NUL-terminated */
} lse_error;

/** @brief Fill @p err (may be NULL) with @p status and "func: message";
 *  returns @p status, so a failing call can `return lse_error_set(...)`. */
LSE_API lse_status lse_error_set(lse_error *err, lse_status status,
                                 const char *func, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** @brief Spell the non-finite numbers of a message (in place) as the
 *  library's messages and the CSV writer do (docs/io.md): the words inf,
 *  -inf, nan and -nan that printf wrote become Inf, -Inf and NaN. Only a
 *  whole word is rewritten: after a space or one of "=([," and before the
 *  end, a space or one of ",;:)]", so quoted input ('inf') and words that
 *  contain them (info) stay. For tools that print their own messages;
 *  NULL is a no-op. */
LSE_API void lse_message_spell(char *msg);

/** @brief Log levels for the logging hook. */
typedef enum lse_log_level {
    LSE_LOG_DEBUG = 0,
    LSE_LOG_INFO = 1,
    LSE_LOG_WARN = 2
} lse_log_level;

/** @brief A logging hook: the only way the library ever emits text. */
typedef void (*lse_log_fn)(lse_log_level level, const char *message,
                           void *user);

/** @brief Install @p fn (NULL: discard everything, the default) as the
 *  process-wide log handler; @p user is passed back, borrowed. */
LSE_API void lse_set_log_handler(lse_log_fn fn, void *user);

/** @brief The installed log handler and its user pointer (either output
 *  may be NULL), e.g. to restore it after installing another for a
 *  while. */
LSE_API void lse_get_log_handler(lse_log_fn *fn, void **user);

/** @brief Emit a printf-style message through the log handler. */
LSE_API void lse_log(lse_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * @brief Threads of the batched kernels (OpenMP over blocks of child rows,
 * lib/threads.c). @p n >= 1 sets the count for the whole process; n <= 0
 * restores the default: the environment variable LSE_NUM_THREADS if it
 * holds a positive integer, else OpenMP's default (omp_get_max_threads).
 * The count is a maximum: a term whose pass is small (rows x columns x
 * (1 + d)^2 below 2^20, see lse_set_thread_min_work) runs on one thread
 * whatever the count, since a second thread costs more than it saves there.
 * Every BLAS call of the library and its models runs with OpenBLAS
 * single-threaded (lse_blas_serial_enter): the library switches OpenBLAS to
 * one thread around its passes and back, so results never depend on
 * OPENBLAS_NUM_THREADS, and OpenBLAS's own threads are not woken to spin
 * beside the library's. BLAS calls of the caller's own keep OpenBLAS's
 * setting, which this call does not change.
 * Results are bit-identical for every thread count: the rows are split into
 * a number of chunks that depends only on the shapes, and per-chunk
 * gradients and statistics are summed in chunk order (docs/performance.md).
 * Not thread-safe: call it before using the library from several threads.
 * Without OpenMP the library always runs on one thread.
 */
LSE_API void lse_set_num_threads(int n);

/**
 * @brief Set the work below which a pass runs on one thread (lib/threads.c).
 * A term's pass with rows x columns x (1 + d)^2 below @p work (default
 * 2^20, about the flops of such a pass) uses one thread whatever
 * lse_set_num_threads or LSE_NUM_THREADS chose; at or above it the pass
 * uses the thread count. @p work = 0 makes every pass use the count (tests
 * that check the threaded code on small data do so); a negative value or
 * NaN restores the default. The results do not depend on it: they are the
 * same bits on any number of threads. Not thread-safe, like
 * lse_set_num_threads.
 */
LSE_API void lse_set_thread_min_work(double work);

/** @brief The work below which a pass runs on one thread
 *  (lse_set_thread_min_work; 2^20 unless it was changed). */
LSE_API double lse_get_thread_min_work(void);

/**
 * @brief Hold OpenBLAS single-threaded until the matching
 * lse_blas_serial_leave; returns the value to pass to it. Pairs nest and
 * may run in concurrent threads: OpenBLAS is serial from the first enter to
 * the last leave, then gets back the thread count it had. For model code
 * that calls BLAS or GSL's linear algebra itself (a simulation loop, say):
 * OpenBLAS threads some level-2 routines (dtrmv, dsymv, dsyr2) at every
 * size, so unheld their rounding would follow OPENBLAS_NUM_THREADS. Without
 * OpenBLAS both calls do nothing.
 */
LSE_API int lse_blas_serial_enter(void);

/** @brief End a hold of lse_blas_serial_enter (pass its return value). */
LSE_API void lse_blas_serial_leave(int held);

/** @brief The thread count the kernels use now (>= 1; 1 where no new
 *  OpenMP region could be active, e.g. inside an active one: the library
 *  starts no nested teams). */
LSE_API int lse_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_STATUS_H */
