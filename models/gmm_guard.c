/* emEM's degeneracy guard (mixfit.h: lse_gmm_min_eigenvalue,
 * lse_gmm_emem_threshold), used by emEM (mixfit.c) and split-and-merge EM
 * (gmm_smem.c); moved here from mixfit.c, on the public API. The
 * threshold's one-component fit depends on the data and some options, not
 * on K: a memo keeps its smallest eigenvalue for the next call on the same
 * data (docs/lsefit.md, "Split-and-merge EM on two threads, session 14"). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_eigen.h>

#include <lsegraph/cov.h>
#include <lsegraph/core.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>

#include "gmm_guard-private.h"

lse_status lse_gmm_min_eigenvalue(const lse_gmm *m, double *out,
                                  lse_error *err)
{
    static const char fn[] = "lse_gmm_min_eigenvalue";
    if (m == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    gsl_matrix *c = gsl_matrix_alloc(d, d);
    gsl_vector *ev = gsl_vector_alloc(d);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(d);
    lse_status st = c == NULL || ev == NULL || w == NULL
                        ? lse_error_set(err, LSE_ENOMEM, fn, "out of memory")
                        : LSE_OK;
    double lo = INFINITY;
    /* tied: one shared covariance */
    const size_t nc = lse_gmm_cov_type(m) == LSE_COV_TIED ? 1 : k;
    for (size_t i = 0; st == LSE_OK && i < nc; i++) {
        st = lse_gmm_get_covariance(m, i, c);
        if (st != LSE_OK) {
            st = lse_error_set(err, st, fn, "covariance of component %zu", i);
            break;
        }
        lse_eigen_symm(c, ev, w);
        if (gsl_vector_min(ev) < lo)
            lo = gsl_vector_min(ev);
    }
    if (st == LSE_OK)
        *out = lo;
    if (w != NULL)
        gsl_eigen_symm_free(w);
    gsl_vector_free(ev);
    gsl_matrix_free(c);
    return st;
}

/* The memo: one entry for the whole process, behind a lock (emEM, split-
 * and-merge EM and lsefit may call from any thread), the key
 * everything the one-component fit reads, and a copy of the data's bits
 * (compared, so that other data at the same address, or the same matrix
 * changed in place, is never taken for it). Data of more than
 * GUARD_MEMO_MAX values, sample weights and several processes are never
 * kept; LSE_GMM_NO_REUSE=1 keeps nothing (as for the fit cache). The entry
 * is replaced by the next data set's and lives until the process ends. */
#define GUARD_MEMO_MAX ((size_t)1 << 18)

typedef struct guard_key {
    size_t n, d;
    lse_cov_type cov;
    lse_cov_model model;
    double reg_covar, tol;
    size_t lloyd_iter;
    unsigned long seed;
    lse_gmm_missing missing;
    size_t rank, n_ranks;
} guard_key;

static struct {
    pthread_mutex_t mu;
    int has;
    guard_key key;
    double *x; /* n d values, row-major */
    size_t cap;
    double lo; /* the fit's smallest covariance eigenvalue */
    size_t hits;
} memo = {.mu = PTHREAD_MUTEX_INITIALIZER};

size_t gmm_guard_memo_hits(void)
{
    pthread_mutex_lock(&memo.mu);
    const size_t h = memo.hits;
    pthread_mutex_unlock(&memo.mu);
    return h;
}

/* 1 when the memo may serve or keep the call (m, x, o) */
static int memo_on(const lse_gmm *m, const gsl_matrix *x,
                   const lse_gmm_fit_opts *o)
{
    const char *e = getenv("LSE_GMM_NO_REUSE");
    if (e != NULL && e[0] != '\0' && !(e[0] == '0' && e[1] == '\0'))
        return 0;
    return o->sample_weight == NULL && o->reduce == NULL &&
           x->size2 == lse_gmm_dim(m) &&
           x->size1 * x->size2 <= GUARD_MEMO_MAX;
}

static guard_key key_of(const lse_gmm *m, const gsl_matrix *x,
                        const lse_gmm_fit_opts *o)
{
    guard_key k;
    memset(&k, 0, sizeof k); /* the padding too: the keys are memcmp'd */
    k.n = x->size1;
    k.d = x->size2;
    k.cov = lse_gmm_cov_type(m);
    k.model = lse_gmm_cov_model(m);
    k.reg_covar = o->reg_covar;
    k.tol = o->tol;
    k.lloyd_iter = o->lloyd_iter;
    k.seed = o->seed;
    k.missing = o->missing;
    k.rank = o->rank;
    k.n_ranks = o->n_ranks;
    return k;
}

/* the memo's entry matches (k, x): memo.mu held */
static int memo_match(const guard_key *k, const gsl_matrix *x)
{
    if (!memo.has || memcmp(&memo.key, k, sizeof *k) != 0)
        return 0;
    const size_t row = x->size2 * sizeof *x->data;
    for (size_t i = 0; i < x->size1; i++)
        if (memcmp(memo.x + i * x->size2, x->data + i * x->tda, row) != 0)
            return 0;
    return 1;
}

/* the memo's smallest eigenvalue for (m, x, o) into *lo: 1, else 0 */
static int memo_get(const lse_gmm *m, const gsl_matrix *x,
                    const lse_gmm_fit_opts *o, double *lo)
{
    const guard_key k = key_of(m, x, o);
    pthread_mutex_lock(&memo.mu);
    const int hit = memo_match(&k, x);
    if (hit) {
        *lo = memo.lo;
        memo.hits++;
    }
    pthread_mutex_unlock(&memo.mu);
    return hit;
}

/* keep lo for (m, x, o), replacing the entry (none without memory) */
static void memo_put(const lse_gmm *m, const gsl_matrix *x,
                     const lse_gmm_fit_opts *o, double lo)
{
    const guard_key k = key_of(m, x, o);
    const size_t nv = x->size1 * x->size2;
    pthread_mutex_lock(&memo.mu);
    memo.has = 0;
    if (nv > memo.cap) {
        double *p = realloc(memo.x, (nv > 0 ? nv : 1) * sizeof *p);
        if (p != NULL) {
            memo.x = p;
            memo.cap = nv;
        }
    }
    if (nv <= memo.cap && memo.x != NULL) {
        for (size_t i = 0; i < x->size1; i++)
            memcpy(memo.x + i * x->size2, x->data + i * x->tda,
                   x->size2 * sizeof *x->data);
        memo.key = k;
        memo.lo = lo;
        memo.has = 1;
    }
    pthread_mutex_unlock(&memo.mu);
}

lse_status lse_gmm_emem_threshold(const lse_gmm *m, const gsl_matrix *x,
                                  const lse_gmm_fit_opts *o, double factor,
                                  double *thr, lse_error *err)
{
    static const char fn[] = "lse_gmm_emem_threshold";
    if (m == NULL || x == NULL || o == NULL || thr == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    *thr = 0.0;
    if (!(factor > 0.0) || !(o->reg_covar > 0.0))
        return LSE_OK;
    const int use_memo = memo_on(m, x, o);
    double lo = 0.0;
    if (use_memo && memo_get(m, x, o, &lo)) {
        if (lo >= factor * o->reg_covar)
            *thr = factor * o->reg_covar;
        return LSE_OK;
    }
    /* the data's own spread: the one-component fit of m's covariance
     * structure (one M-step from all rows; under o->mpi the whole data's) */
    lse_gmm *one = NULL;
    lse_status st =
        lse_gmm_cov_model(m) != LSE_COV_MODEL_NONE
            ? lse_gmm_new_model(1, lse_gmm_dim(m), lse_gmm_cov_model(m), &one,
                                err)
            : lse_gmm_new(1, lse_gmm_dim(m), lse_gmm_cov_type(m), &one, err);
    lse_gmm_fit_opts g = *o;
    g.init = LSE_GMM_INIT_KMEANSPP;
    g.n_init = 1;
    g.max_iter = 1;
    g.accel = LSE_GMM_ACCEL_NONE;
    g.progress = NULL;
    if (st == LSE_OK)
        st = lse_gmm_fit(one, x, &g, err);
    if (st == LSE_OK)
        st = lse_gmm_min_eigenvalue(one, &lo, err);
    lse_gmm_free(one);
    if (st == LSE_OK && use_memo)
        memo_put(m, x, o, lo);
    if (st == LSE_OK && lo >= factor * o->reg_covar)
        *thr = factor * o->reg_covar;
    return st;
}
