#ifndef LSEGRAPH_MODELS_GMM_PRIVATE_H
#define LSEGRAPH_MODELS_GMM_PRIVATE_H

/*
 * Shared between models/gmm.c (the model, its queries and the complete-data
 * fit) and models/gmm_missing.c (the fit and the posterior with missing
 * values); never installed.
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
} fit_ctx;

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

/* models/gmm.c */
lse_status gmm_add_event(fit_ctx *c, size_t k, size_t sample);
lse_gmm_fit_info gmm_empty_info(void);
lse_status gmm_init_start(const fit_ctx *c, lse_cov_type cov,
                          const lse_gmm_fit_opts *o, init_work *iw,
                          gsl_matrix *mu, gsl_matrix *chol, gsl_matrix *logw);
int gmm_init_work_alloc(init_work *iw, size_t n, size_t k, unsigned long seed,
                        int whole);
void gmm_init_work_free(init_work *iw);
double gmm_row_weight(const fit_ctx *c, size_t i);
void gmm_weights_from_logw(const gsl_matrix *logw, gsl_vector *weights);
lse_status gmm_query(const lse_gmm *m, const gsl_matrix *x, gmm_graph *gg,
                     double *energy, const char *fn, lse_error *err);
/* models/gmm_missing.c */
lse_status gmm_fit_missing(lse_gmm *m, const gsl_matrix *x,
                           const lse_gmm_fit_opts *o, lse_error *err);

#endif /* LSEGRAPH_MODELS_GMM_PRIVATE_H */
