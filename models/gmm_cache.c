#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#include "gmm-private.h"
#include "mixfit-private.h"

/*
 * The scratch of lse_gmm_fit (graph, solver, workspaces, starts) and the
 * graph of the queries (gmm_query), kept by the calling thread between
 * calls while a scope is open (lse_gmm_cache_begin ... _end), so that the
 * many small fits of emEM and split-and-merge EM on one data set build
 * them once: at N = 272, K = 5, d = 2 a graph's set-up cost as much as 15
 * EM iterations (docs/lsefit.md, "Per-fit set-up, session 10").
 *
 * A kept entry is taken (removed) by a call on the same K, d, covariance
 * (type and mclust model), the same way of keeping the softmax and data
 * of the same shape and bits (compared with the copy the graph holds, so
 * a matrix freed and another allocated at its address is never taken for
 * it); every other call builds its own, as without a scope. The taker
 * sets every value a fit or query reads (the same values a new build
 * would hold where they are read before written), so the results are the
 * same bits (tests/test_gmm_cache.c). Fits with sample weights, missing
 * values or several processes are never kept (the term would borrow the
 * caller's weights; the pattern graph depends on the rows' patterns).
 * One entry of each kind per thread; thread-local, no locks: each thread
 * of lse_gmm_par_run opens its own scope. Out of a scope nothing is kept.
 * A thread has two caches: the one its batches use and one for the work
 * it runs ahead in the background (lse_gmm_cache_ahead), so that switching
 * between the two, of other K, does not throw away either's entry.
 */

typedef struct cache_key {
    size_t k, d;
    lse_cov_type cov;
    lse_cov_model model;
    int keep;
} cache_key;

typedef struct gmm_cache {
    unsigned depth;   /* nested scopes */
    int has_fit;      /* fit holds an entry */
    cache_key fit_key, query_key;
    fit_work fit;
    gmm_fit_free_fn *fit_free; /* frees fit (gmm_fit.c's, given with it: the
                                  cache needs no knowledge of a fit's parts) */
    gmm_graph query; /* g == NULL: none */
} gmm_cache;

static _Thread_local gmm_cache tl_caches[2];
static _Thread_local int tl_which; /* 1: the background's */
#define tl_cache (tl_caches[tl_which])

static int no_reuse(void)
{
    /* the tests compare against fresh builds; read when a scope opens */
    const char *e = getenv("LSE_GMM_NO_REUSE");
    return e != NULL && e[0] != '\0' && !(e[0] == '0' && e[1] == '\0');
}

static _Thread_local int tl_off;
static _Thread_local size_t tl_hits; /* entries taken (the tests) */

size_t gmm_cache_hits(void) { return tl_hits; }

void lse_gmm_cache_begin(void)
{
    if (tl_cache.depth++ == 0)
        tl_off = no_reuse();
}

int lse_gmm_cache_ahead(int on)
{
    const int was = tl_which;
    tl_which = on != 0;
    return was;
}

void lse_gmm_cache_end(void)
{
    gmm_cache *c = &tl_cache;
    if (c->depth == 0 || --c->depth > 0)
        return;
    if (c->has_fit)
        c->fit_free(&c->fit);
    c->has_fit = 0;
    lse_graph_free(c->query.g);
    memset(&c->query, 0, sizeof c->query);
}

static cache_key key_of(const lse_gmm *m, int keep)
{
    return (cache_key){.k = m->k, .d = m->d, .cov = m->cov,
                       .model = m->model, .keep = keep != 0};
}

static int key_equal(const cache_key *a, const cache_key *b)
{
    return a->k == b->k && a->d == b->d && a->cov == b->cov &&
           a->model == b->model && a->keep == b->keep;
}

/* x (N, d) holds the same bits as the graph's data node */
static int same_data(const gmm_graph *gg, const gsl_matrix *x)
{
    const gsl_matrix *v = lse_node_value(gg->x);
    if (v->size1 != x->size1 || v->size2 != x->size2)
        return 0;
    const size_t row = x->size2 * sizeof *x->data;
    if (v->tda == x->tda && x->tda == x->size2)
        return memcmp(v->data, x->data, x->size1 * row) == 0;
    for (size_t i = 0; i < x->size1; i++)
        if (memcmp(v->data + i * v->tda, x->data + i * x->tda, row) != 0)
            return 0;
    return 1;
}

int gmm_cache_take_fit(const lse_gmm *m, const gsl_matrix *x, int keep,
                       fit_work *out)
{
    gmm_cache *c = &tl_cache;
    const cache_key k = key_of(m, keep);
    if (c->depth == 0 || !c->has_fit || !key_equal(&c->fit_key, &k) ||
        !same_data(&c->fit.gg, x))
        return 0;
    *out = c->fit;
    tl_hits++;
    c->has_fit = 0;
    memset(&c->fit, 0, sizeof c->fit);
    return 1;
}

void gmm_cache_put_fit(const lse_gmm *m, int keep, fit_work *fw,
                       gmm_fit_free_fn *free_fn)
{
    gmm_cache *c = &tl_cache;
    if (c->depth == 0 || tl_off || fw->miss != NULL || fw->gg.g == NULL) {
        free_fn(fw);
    } else {
        if (c->has_fit)
            c->fit_free(&c->fit);
        c->fit_free = free_fn;
        /* the hook's fit context was the caller's (on its stack) */
        lse_solver_set_mstep_hook(fw->solver, NULL, NULL);
        c->fit = *fw;
        c->fit_key = key_of(m, keep);
        c->has_fit = 1;
    }
    memset(fw, 0, sizeof *fw);
}

int gmm_cache_take_query(const lse_gmm *m, const gsl_matrix *x,
                         gmm_graph *out)
{
    gmm_cache *c = &tl_cache;
    const cache_key k = key_of(m, 1);
    if (c->depth == 0 || c->query.g == NULL ||
        !key_equal(&c->query_key, &k) || !same_data(&c->query, x))
        return 0;
    *out = c->query;
    tl_hits++;
    memset(&c->query, 0, sizeof c->query);
    return 1;
}

void gmm_graph_release(const lse_gmm *m, gmm_graph *gg)
{
    gmm_cache *c = &tl_cache;
    if (c->depth == 0 || tl_off || gg->g == NULL) {
        lse_graph_free(gg->g);
    } else {
        lse_graph_free(c->query.g);
        c->query = *gg;
        c->query_key = key_of(m, 1);
    }
    memset(gg, 0, sizeof *gg);
}
