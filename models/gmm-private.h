#ifndef LSEGRAPH_MODELS_GMM_PRIVATE_H
#define LSEGRAPH_MODELS_GMM_PRIVATE_H

/*
 * Shared between models/gmm.c (the model, its graph and queries),
 * gmm_init.c (the starts), gmm_fit.c (lse_gmm_fit) and gmm_missing.c (the
 * pattern graph of data with missing values, lse_gmm_posterior); never
 * installed.
 */

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/lsegraph.h>

#include "util.h"

/* Child rows per similarity kernel call (set on every graph we build, so
 * the initial M-step can call the kernels in blocks of this size). */
#define GMM_BLOCK 256

struct lse_gmm {
    size_t k, d;
    lse_cov_type cov;
    lse_cov_model model; /* mclust model, or LSE_COV_MODEL_NONE */
    gsl_vector *weights; /* (K), sum 1 */
    gsl_matrix *means;   /* (K, d) */
    gsl_matrix *chol;    /* graph layout: (K or 1, d*d | d | 1) */
    gsl_matrix *covs;    /* native: full (K*d, d), tied (d, d), diag (K, d),
                            spherical (K, 1) */
    lse_gmm_fit_info info;
    lse_gmm_event *events;
    size_t n_events;
};

typedef struct gmm_graph {
    lse_graph *g;
    lse_node *x, *mu, *logw, *chol;
    lse_term *t;
} gmm_graph;

/* State shared by the fit loop and the M-step hook. */
typedef struct fit_ctx {
    const gsl_matrix *x; /* (N, d) training data, borrowed */
    const gsl_vector *w; /* (N) sample weights or NULL */
    lse_cov_type cov;
    size_t run, iteration;
    lse_gmm_event *events;
    size_t n_events, cap_events;
    size_t *chosen; /* (K) rows used by one re-seeding pass (missing data) */
    double *chosen_rows; /* (K, d) their values (complete data) */
    lse_comm *dist;      /* processes sharing x, or NULL */
    lse_error *err;
    int hook_failed; /* the hook wrote err */
    /* the fit's mixture term streams (keeps no softmax): the parameters of
     * the last E-step and one row's scores (1, K), to recompute a
     * re-seeding row's responsibilities (lse_term_scores) */
    gsl_matrix *e_mu, *e_logw, *e_chol, *srow;
    /* the rise check of em_step (gmm_fit.c): reg_covar, the summed sample
     * weight, the rise SQUAREM allows its next step (NaN: EM's bound), the
     * events before the last iteration, and the rises of the run */
    double reg_covar, total, allow;
    size_t ev_mark, n_rise;
    int squarem; /* accelerate (opts.accel, a model it applies to) */
    /* the term keeps its softmax (small fits, GMM_KEEP_MAX) only so that
     * lse_graph_set_reuse can skip a repeated evaluation: re-seeding still
     * recomputes a row's responsibilities as for a streaming term */
    int resp_recompute;
    /* reg_bound's tr(Sigma^-1) per factor (gmm_fit.c) for the factors of
     * its last call, old and new: each call's new factor is the next
     * call's old one, so one of the two is computed per EM step */
    gsl_matrix *tr_chol[2];
    double *tr_val[2];
    int tr_ok[2];
} fit_ctx;

/* A fit's mixture term keeps its (N, K) scores and softmax, for
 * lse_graph_set_reuse, when N K is at most this (2 x 512 KiB); above it
 * streams blocks. At 2^20 (bench set c diag, N K = 640 000) the kept
 * matrices and the memo's copy of the data made an EM iteration 20 %
 * slower and the process 20 MiB larger (bench/lse_bench, session 8). */
#define GMM_KEEP_MAX ((size_t)1 << 16)

/* Scratch of an initialization. The initial responsibilities are made a
 * block of rows at a time (init_resp_rows) when the initial M-step needs
 * them, so that a fit never holds an (N, K) matrix; only the missing-data
 * fit, whose M-step takes them whole, asks for resp. */
typedef struct init_work {
    gsl_rng *rng;
    gsl_matrix *resp; /* (N, K) initial responsibilities, or NULL */
    gsl_vector *d2;   /* (N) k-means++ distances */
    gsl_vector *sums; /* (K) Lloyd weights */
    size_t *labels;   /* (N) k-means++ / Lloyd labels */
    int random;       /* random init: rows drawn from rng in row order */
    size_t after;     /* rows of later processes whose draws are skipped */
} init_work;

/* The missing-data parts of a fit (models/gmm_missing.c). */
typedef struct miss_work {
    lse_gauss_missing *gm;  /* the pattern terms in the fit's graph */
    const gsl_matrix *x;    /* (N, d) data with NaN, borrowed */
    gsl_matrix *imputed;    /* (N, d) mean-imputed, for the starts */
    gsl_vector *w_eff;      /* (N) weights, 0 on rows with nothing observed */
    double *acc;            /* expected statistics */
    unsigned char *empty;   /* (K) */
    double *rrow;           /* (K) a row's responsibilities */
    lse_mstep_opts mo;
    fit_ctx *c;
    double total;           /* sum of w_eff */
    size_t n_missing;       /* missing entries */
} miss_work;

/* Scratch of one fit. */
typedef struct fit_work {
    gmm_graph gg;
    lse_solver *solver;
    init_work iw;
    unsigned char *empty; /* (K) */
    gsl_matrix *best_mu, *best_logw, *best_chol;
    miss_work *miss; /* data with missing values, or NULL */
} fit_work;

/* models/gmm.c */
lse_gmm_fit_info gmm_empty_info(void);
void gmm_weights_from_logw(const gsl_matrix *logw, gsl_vector *weights);
void gmm_params_to_graph(const gsl_vector *weights, const gsl_matrix *means,
                         const gsl_matrix *chol, gmm_graph *gg);
lse_status gmm_graph_build(const lse_gmm *m, const gsl_matrix *x,
                           const gsl_vector *w, int keep, gmm_graph *gg,
                           const char *fn, lse_error *err);
lse_status gmm_query(const lse_gmm *m, const gsl_matrix *x, gmm_graph *gg,
                     double *energy, const char *fn, lse_error *err);
lse_status gmm_add_event(fit_ctx *c, size_t k, size_t sample);
/* The weight of row i of the fit's data (1 without weights). */
static inline double gmm_row_weight(const fit_ctx *c, size_t i)
{
    return c->w != NULL ? gsl_vector_get(c->w, i) : 1.0;
}
/* models/gmm_init.c */
lse_status gmm_init_start(const fit_ctx *c, lse_cov_type cov,
                          const lse_gmm_fit_opts *o, init_work *iw,
                          gsl_matrix *mu, gsl_matrix *chol, gsl_matrix *logw);
int gmm_init_work_alloc(init_work *iw, size_t n, size_t k, unsigned long seed,
                        int whole);
void gmm_init_work_free(init_work *iw);
void gmm_init_resp_rows(init_work *iw, size_t i0, gsl_matrix *out);
void gmm_init_resp_done(init_work *iw, size_t K);
/* models/gmm_missing.c */
lse_status gmm_miss_work_new(const lse_gmm *m, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o, fit_ctx *c,
                             fit_work *fw, lse_error *err);
void gmm_miss_work_free(miss_work *mw);
lse_status gmm_miss_initial_mstep(fit_work *fw, const init_work *iw);
lse_status gmm_miss_sync(fit_work *fw);
/* models/gmm_cache.c: the calling thread's kept scratch while a scope is
 * open (lse_gmm_cache_begin, mixfit-private.h). take: 1 and *out when an
 * entry for m's K, d and covariance, keep and x's bits is kept (it is no
 * longer); else 0. put / release: keep it (replacing the kept one) inside
 * a scope, else free it; *fw / *gg zeroed. */
int gmm_cache_take_fit(const lse_gmm *m, const gsl_matrix *x, int keep,
                       fit_work *out);
/* frees a fit's scratch (gmm_fit.c's fit_work_free) */
typedef void gmm_fit_free_fn(fit_work *fw);
void gmm_cache_put_fit(const lse_gmm *m, int keep, fit_work *fw,
                       gmm_fit_free_fn *free_fn);
int gmm_cache_take_query(const lse_gmm *m, const gsl_matrix *x,
                         gmm_graph *out);
void gmm_graph_release(const lse_gmm *m, gmm_graph *gg);
/* entries taken by this thread so far (tests/test_gmm_cache.c) */
size_t gmm_cache_hits(void);

#endif /* LSEGRAPH_MODELS_GMM_PRIVATE_H */
