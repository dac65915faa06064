#ifndef LSEGRAPH_MODELS_GMM_GUARD_PRIVATE_H
#define LSEGRAPH_MODELS_GMM_GUARD_PRIVATE_H

/*
 * The memo of lse_gmm_emem_threshold (models/gmm_guard.c), for the tests;
 * never installed.
 */

#include <stddef.h>

/* the calls of lse_gmm_emem_threshold answered from the memo (all threads,
 * since the process started) */
size_t gmm_guard_memo_hits(void);

#endif
