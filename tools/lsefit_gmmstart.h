#ifndef LSEFIT_GMMSTART_H
#define LSEFIT_GMMSTART_H
/* lsefit gmm: the starts beyond lse_gmm_fit's own (--init hcvvv, emem) and
 * --bootstrap B (lsefit_gmmstart.c; docs/lsefit.md). */
#include <stdio.h>

#include "lsefit_data.h"

/* the hcVVV tree: n^2 doubles, O(n^3) time; emem+hc leaves it out above
 * LSEFIT_HC_DEFAULT_ROWS rows, --init hcvvv refuses above LSEFIT_HC_MAX_ROWS */
#define LSEFIT_HC_DEFAULT_ROWS 2000
#define LSEFIT_HC_MAX_ROWS 10000
/* emem: the best-scored merges of the K + 1 fit run to convergence for K */
#define LSEFIT_GMM_MERGES 2
/* emem, K = the range's top (no K + 1 fit in the chain): the K + 1 fit whose
 * merges are tried is emEM from the K splits of K's fit only, short runs of
 * LSEFIT_GMM_LAST_SHORT steps, the LSEFIT_GMM_LAST_KEEP best to convergence;
 * in the first round then split-and-merge EM on it, LSEFIT_GMM_LAST_SMEM
 * moves tried per round, the first LSEFIT_GMM_LAST_SCORE ranked by their
 * starts, the LSEFIT_GMM_LAST_SMEM_KEEP best partial runs continued
 * (--smem 0: none); repeated from the improved fit,
 * LSEFIT_GMM_LAST_ROUNDS rounds at most (docs/lsefit.md, "The last K,
 * session 12" and "session 14") */
#define LSEFIT_GMM_LAST_SHORT 15
#define LSEFIT_GMM_LAST_KEEP 3
#define LSEFIT_GMM_LAST_ROUNDS 3
#define LSEFIT_GMM_LAST_SMEM 35
#define LSEFIT_GMM_LAST_SCORE 120
#define LSEFIT_GMM_LAST_SMEM_KEEP 5

typedef struct lsefit_gmm_start {
    const char *method; /* "hcvvv", "emem", or anything else: lse_gmm_fit */
    size_t *pairs;      /* hcVVV tree of the data, computed once */
    size_t n;
    lse_gmm *prev;      /* emem: the last fit of the chain K = 1, 2, ...
                           whose splits start the next K */
    lse_gmm *next;      /* emem: the chain's fit for K + 1, computed ahead
                           for the merges of K and kept for the next K */
    size_t kmax;        /* emem: the largest K of the range (the merges of
                           the K + 1 fit are tried for K < kmax) */
    double guard;       /* emem: the degeneracy guard's eigenvalue threshold
                           for these data (lse_gmm_emem_threshold; 0: off) */
    size_t smem;        /* emem: split-and-merge moves tried per round
                           (lse_gmm_emem_opts.smem), when smem_set */
    int smem_set;       /* --smem given (else the library's default) */
    int ahead;          /* emem: the short runs of K = 1 .. kmax run ahead
                           (lse_gmm_emem_ahead_begin) until kmax's fit */
} lsefit_gmm_start;

/* usage check of --init hcvvv|emem against the other options */
int lsefit_gmm_start_check(const char *method, int mpi, int weights,
                           int marginalize);
/* fit m to x with the start method (opts as for lse_gmm_fit) */
lse_status lsefit_gmm_start_fit(lsefit_gmm_start *s, lse_gmm *m,
                                const gsl_matrix *x, const lse_gmm_fit_opts *o,
                                lse_error *err);
void lsefit_gmm_start_free(lsefit_gmm_start *s);

/* --bootstrap B: standard errors of m on n rows, printed to f (NULL: not)
 * and added to doc as "bootstrap" */
int lsefit_gmm_bootstrap(const lse_gmm *m, size_t n, size_t n_boot,
                         unsigned long seed, const lse_gmm_fit_opts *o,
                         lse_json *doc, FILE *f);
#endif
