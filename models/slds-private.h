#ifndef LSEGRAPH_MODELS_SLDS_PRIVATE_H
#define LSEGRAPH_MODELS_SLDS_PRIVATE_H

/*
 * Private to the SLDS model (models/slds*.c; never installed): the model
 * object, the layout of the steps, the model's graph and the processes of
 * a fit. slds.c builds the graph and fits, slds_init.c makes the starting
 * parameters, slds_params.c holds the object, its parameters, simulation
 * and results, slds_file.c its model files (public API only).
 */

#include <lsegraph/lsegraph.h>

struct lse_slds {
    size_t K, d, L;
    size_t p;        /* exogenous regressors: series have d + p columns */
    unsigned shared; /* LSE_SLDS_SHARE_* */
    int markov;
    lse_cov_type cov;
    gsl_matrix *logw;   /* (K, 1) mixture log-weights (logits) */
    gsl_matrix *a; /* (K, d * (dL + p)), row k = row-major [A_k B_k] */
    gsl_matrix *b;      /* (K, d) offsets */
    gsl_matrix *chol;   /* (K or 1, d*d, d or 1) covariance factors */
    gsl_matrix *init;   /* (1, K) initial logits */
    gsl_matrix *trans;  /* (K, K) transition logits */
    double obs_var;     /* > 0: latent states */
    gsl_matrix *states; /* (T, d) latent states of the last fit, or NULL */
    double loglik;
    size_t n_steps, n_iter, n_increase;
    int converged;
};

typedef struct layout {
    size_t T;
    size_t n_raw;   /* sequences in the input */
    size_t n_seg;   /* sequences with at least one step */
    size_t *seg0;   /* (n_seg) first X row of each such sequence */
    size_t *seg1;   /* (n_seg) one past its last row */
    size_t *starts; /* (n_seg + 1) first step of each; starts[n_seg] = n */
    size_t n_steps;
    int views; /* 1: children and context are views of one node */
} layout;

typedef struct sgraph {
    lse_graph *g;
    lse_node *x, *y, *z, *b, *logw, *a, *chol, *init, *trans;
    lse_term *dyn, *obs;
    layout lay;
    int latent;
} sgraph;

/*
 * The processes sharing a fit. Each owns a contiguous block of the series
 * (after its context rows) and so a contiguous range of the steps; dist
 * counts steps. For a Markov model the chain runs on the whole series:
 * the emission log-likelihoods of every process's steps are summed into
 * the node "s" (N, K) of a chain graph that every process holds (a dot
 * similarity against the identity "eye" gives S = s exactly), and every
 * process runs the same forward-backward pass and chain M-step on it
 * (csolver); the posteriors of its own steps give its lingauss
 * statistics. With one process (reduce NULL) dist is the identity and
 * markov = 0: the plain graph with its chain term is used.
 */
typedef struct par_ctx {
    lse_comm dist;
    int markov;        /* Markov model over several processes */
    int exact;         /* lse_slds_opts.exact_sums */
    int cont;          /* this process's first step continues the chain of the
                          previous process's last step */
    double *prev_last; /* (K) responsibilities of that last step */
    double *all;       /* (n_ranks * K) gather scratch */
    lse_graph *cg;     /* the chain graph (markov) */
    lse_node *cs, *ceye, *cinit, *ctrans;
    lse_term *ct;
    lse_solver *csolver;
    size_t *starts; /* global chain starts (markov) */
    size_t n_starts;
    lse_mstep_ws *ws; /* buffers of the lingauss M-step, made once */
} par_ctx;

/* slds_params.c */
/* Allocation only (no validation) with the default parameter values. */
lse_slds *slds_model_alloc(size_t K, size_t d, size_t L, size_t p,
                           int markov, lse_cov_type cov);
/* Copy every parameter of src into dst (same configuration). */
void slds_copy_params(lse_slds *dst, const lse_slds *src);
/* Normalized log-probabilities of a row of logits. */
void slds_log_normalize(const double *logit, size_t n, size_t stride,
                        double *out, size_t out_stride);
/* LSE_ENONFINITE naming what[i,j] at the first NaN or infinity. */
lse_status slds_check_finite(const gsl_matrix *x, const char *fn,
                             const char *what, lse_error *err);
void slds_clear_err(lse_error *err);

/* slds.c */
/* st with the graph's message (or lse_strerror) in err, naming fn. */
lse_status slds_graph_fail(lse_error *err, lse_status st, const char *fn,
                           const lse_graph *g);
/* Copy the model's parameters into the graph's parameter nodes. */
lse_status slds_load_params(const lse_slds *m, sgraph *sg, const char *fn,
                            lse_error *err);

/* slds_init.c */
/* One closed-form M-step of the lingauss term from responsibilities resp
 * (this process's steps, K); statistics summed over the processes. */
lse_status slds_lingauss_mstep(const lse_slds *m, sgraph *sg,
                               const gsl_matrix *resp, const lse_mstep_opts *mo,
                               par_ctx *pc, const char *what, const char *fn,
                               lse_error *err);
/* Initial parameters in the graph's nodes by o->init, from the model's
 * parameters already loaded there (slds_load_params). */
lse_status slds_initialize(const lse_slds *m, sgraph *sg,
                           const lse_slds_opts *o, const lse_mstep_opts *mo,
                           gsl_rng *rng, par_ctx *pc, const char *fn,
                           lse_error *err);

/* slds_shared.c */
/* The M-step of the dynamics when some parts are shared by the modes
 * (m->shared != 0), from responsibilities resp (n, K) and the
 * covariances in prev (the chol layout: the current iterate's noise):
 * generalized least squares of every coefficient given prev, then each
 * covariance given the coefficients; writes the graph's b, A and chol
 * nodes, and prev <- the new chol. */
lse_status slds_shared_mstep(const lse_slds *m, sgraph *sg,
                             const gsl_matrix *resp, gsl_matrix *prev,
                             double reg_covar, const char *fn, lse_error *err);

#endif /* LSEGRAPH_MODELS_SLDS_PRIVATE_H */
