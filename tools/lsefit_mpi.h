/* lsefit --mpi: data-parallel fitting over MPI (docs/mpi.md). Private to
 * tools/lsefit*.c, like lsefit_common.h.
 *
 * Every process reads only its share of the rows (a byte range of the CSV
 * file split at line starts, or one file per process with --shards), the
 * library sums the E-step energy and M-step statistics through the
 * reduction hook lsefit_mpi_reduce (MPI_Allreduce), and process 0 alone
 * writes the model, the summary and the progress.
 *
 * Failure protocol: every collective first agrees on a failure flag
 * (MPI_Allreduce of an int with MPI_MAX); a process that fails skips to
 * lsefit_mpi_end, whose flag meets the others in their next collective, so
 * no process ever waits in a collective another one will not reach. Once
 * the failure is agreed, the message of the lowest failing process is
 * broadcast and printed by every process, and every process exits with
 * that process's status. Messages of lsefit_fail are captured in the
 * meantime (lsefit_fail_hook).
 *
 * Built without MPI (meson -Dmpi=disabled, or MPI not found) every
 * function still exists: lsefit_mpi_begin fails with a clear message. */
#ifndef LSEFIT_MPI_H
#define LSEFIT_MPI_H

#include "lsefit_data.h"

typedef struct lsefit_mpi lsefit_mpi;

/** MPI_Init, this process's rank and the number of processes; captures
 *  lsefit_fail messages; silences progress and notes on ranks > 0.
 *  @return LSEFIT_OK, or LSEFIT_FAIL (built without MPI, MPI_Init failed)
 *  after a message, with *out NULL. */
int lsefit_mpi_begin(lsefit_mpi **out);

/** Agree on the outcome: @p rc is this process's status. When any process
 *  failed, every process prints the message of the lowest failing one
 *  ("lsefit: process R of P: ...") and the returned status is that
 *  process's. Then MPI_Finalize and free. NULL: returns @p rc. */
int lsefit_mpi_end(lsefit_mpi *mpi, int rc);

/** Rank of this process (0 for NULL). */
int lsefit_mpi_rank(const lsefit_mpi *mpi);
/** Number of processes (1 for NULL). */
int lsefit_mpi_size(const lsefit_mpi *mpi);
/** 1 on the process that writes outputs: rank 0, or NULL (no MPI). */
int lsefit_mpi_is_root(const lsefit_mpi *mpi);
/** 1 while an MPI run is active in this process. */
int lsefit_mpi_active(void);

/** Read this process's share of the data described by @p o into @p out:
 *  with @p shards NULL the rows of o->path whose line starts in this
 *  process's byte range (every process reads the header line; messages
 *  give lines of the whole file); else the file number rank of the sorted
 *  expansion of the glob pattern @p shards, which must match one file per
 *  process. For a series (@p lags > 0) the last @p lags rows before the
 *  share are prepended as context rows (lsefit_mpi_context_rows), with
 *  sequence ids that continue across the boundary. Every process must get
 *  at least one row and the same columns. The data's share (out->share)
 *  makes lsefit_data_check_constant and lsefit_data_standardize work on
 *  every process's rows. */
int lsefit_mpi_data_load(lsefit_mpi *mpi, const lsefit_data_opts *o,
                         const char *shards, size_t lags, lsefit_data *out);
/** Leading rows of the loaded data that belong to earlier processes. */
size_t lsefit_mpi_context_rows(const lsefit_mpi *mpi);
/** Rows of the whole data set (without context rows), after loading. */
size_t lsefit_mpi_total_rows(const lsefit_mpi *mpi);

/** *v = its sum over the processes (a collective; LSEFIT_FAIL when a
 *  process failed). */
int lsefit_mpi_sum_size(lsefit_mpi *mpi, size_t *v);

/** The reduction hook of the library (lse_reduce_fn): buf[0..n) becomes
 *  its sum over the processes; user is the lsefit_mpi. LSE_EIO when a
 *  process failed (the fit then ends on every process). */
lse_status lsefit_mpi_reduce(double *buf, size_t n, void *user);

/** Point the fit options at this process: reduce, rank, n_ranks (and
 *  context_rows for SLDS). */
void lsefit_mpi_gmm_opts(lsefit_mpi *mpi, lse_gmm_fit_opts *o);
void lsefit_mpi_slds_opts(lsefit_mpi *mpi, lse_slds_opts *o);

#endif /* LSEFIT_MPI_H */
