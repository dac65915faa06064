#ifndef LSEGRAPH_OPTIM_H
#define LSEGRAPH_OPTIM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <stdint.h>

#include <gsl/gsl_matrix.h>
#include <lsegraph/graph.h>
#include <lsegraph/io.h>
#include <lsegraph/ode.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file optim.h
 * @brief Parameter learning: an optimizer that moves a graph's parameter
 * nodes along their gradients (SGD with momentum, Adam, AdamW, AMSGrad;
 * global-norm clipping; constant, step or cosine learning rate), seeded
 * mini-batches, and the infer -> learn step (docs/learning.md).
 *
 * The optimizer reads the gradients the graph holds (lse_node_grad after
 * lse_graph_gradient, plus whatever a loss added, see loss.h), so any
 * graph trains without model code:
 *
 * @code
 * lse_optim_opts oo = lse_optim_opts_default();   // Adam, lr 1e-3
 * lse_optim *opt = lse_optim_new(g, &oo);          // every free PARAM node
 * lse_ode *inf = lse_ode_new(g);                   // every free state node
 * lse_batcher *b;                                  // dataset (n, d)
 * lse_batcher_new(dataset->size1, 32, 7, 1, &b, &err);   // batch 32, seed 7
 * for (size_t step = 0; step < 300; step++) {
 *     lse_batcher_next(b);
 *     lse_batcher_gather(b, dataset, lse_node_value(batch));  // clamped
 *     gsl_matrix_memcpy(lse_node_value(slots), slots0);        // re-init
 *     double e;
 *     lse_learn_step(inf, opt, &e);  // infer by ODE, then one Adam step
 * }
 * @endcode
 */

typedef enum lse_optim_rule {
    LSE_OPTIM_SGD = 0,    /**< SGD, optional (Nesterov) momentum */
    LSE_OPTIM_ADAM = 1,   /**< Adam (Kingma and Ba 2015) */
    LSE_OPTIM_ADAMW = 2,  /**< Adam with decoupled weight decay */
    LSE_OPTIM_AMSGRAD = 3 /**< Adam with the running max of v */
} lse_optim_rule;

typedef enum lse_lr_schedule {
    LSE_LR_CONSTANT = 0, /**< lr */
    LSE_LR_STEP = 1,     /**< lr gamma^floor(s / step_size) */
    LSE_LR_COSINE = 2    /**< lr_min + (lr - lr_min)(1 + cos(pi min(s, T)/T))/2 */
} lse_lr_schedule;

typedef struct lse_optim_opts {
    lse_optim_rule rule;  /**< default LSE_OPTIM_ADAM */
    double lr;            /**< > 0, default 1e-3 */
    double momentum;      /**< SGD, in [0, 1), default 0 */
    int nesterov;         /**< SGD, default 0 */
    double beta1, beta2;  /**< Adam family, in [0, 1): 0.9, 0.999 */
    double eps;           /**< Adam family, > 0: 1e-8 */
    double weight_decay;  /**< >= 0, default 0: AdamW decoupled
                             (theta *= 1 - lr wd), others L2 (g += wd theta) */
    double clip_norm;     /**< > 0: scale the gradients so that their global
                             norm over every parameter is at most clip_norm;
                             0 (default): off */
    lse_lr_schedule schedule; /**< default constant */
    size_t step_size;     /**< LSE_LR_STEP: steps per decay (>= 1) */
    double gamma;         /**< LSE_LR_STEP: factor in (0, 1] (default 0.1) */
    size_t total_steps;   /**< LSE_LR_COSINE: T >= 1 */
    double lr_min;        /**< LSE_LR_COSINE: floor >= 0 (default 0) */
} lse_optim_opts;

/** @brief The defaults listed in lse_optim_opts (step_size = total_steps
 *  = 1000). */
LSE_API lse_optim_opts lse_optim_opts_default(void);
/** @brief "sgd", "adam", "adamw", "amsgrad", or NULL. */
LSE_API const char *lse_optim_rule_name(lse_optim_rule rule);

typedef struct lse_optim lse_optim;

/** @brief An optimizer over every free (not clamped) PARAM node of @p g
 *  (borrowed; must outlive it), state zeroed, step 0. @p opts NULL: the
 *  defaults. NULL when out of memory, @p g is NULL or an option is bad
 *  (the message is on the graph). */
LSE_API lse_optim *lse_optim_new(lse_graph *g, const lse_optim_opts *opts);
LSE_API void lse_optim_free(lse_optim *o);
/** @brief Options (copied); the state is kept. @return LSE_OK, LSE_EFAULT,
 *  LSE_EDOM. */
LSE_API lse_status lse_optim_set_opts(lse_optim *o, const lse_optim_opts *opts);
/** @brief Optimize @p nodes (copied; NULL/0: every free PARAM node) and
 *  reset the state. @return LSE_OK, LSE_EFAULT, LSE_EINVAL (a node of
 *  another graph or listed twice), LSE_ENOMEM. */
LSE_API lse_status lse_optim_set_nodes(lse_optim *o, lse_node *const *nodes,
                                       size_t n);
/** @brief Zero the moments and the step count. */
LSE_API void lse_optim_reset(lse_optim *o);
/** @brief One update of every optimized node from its current gradient
 *  (lse_node_grad). Nodes that are clamped at the time are skipped.
 *  Allocation-free. @return LSE_OK, LSE_EFAULT, LSE_ENONFINITE (a
 *  non-finite gradient; nothing is updated), or the reduction hook's
 *  error. */
LSE_API lse_status lse_optim_step(lse_optim *o);
/** @brief Add the current gradient of every optimized entry (as
 *  lse_optim_step reads it) into an exact accumulator (lse_xsum; the first
 *  call allocates them). The next lse_optim_step then uses the accumulated
 *  sums instead of the node gradients, rounded once: the same bits for any
 *  order or split of the accumulated parts (micro-batches of one process,
 *  or, through the reduction hook, the processes' shares of a mini-batch),
 *  and empties the accumulators. With a hook, that step passes the
 *  exports (LSE_XSUM_EXPORT doubles per entry, integers: summed exactly by
 *  MPI_SUM in any order) to it instead of the gradients. Clamped nodes add
 *  nothing. Pending sums are not part of the saved state
 *  (lse_optim_state_get); lse_optim_reset and lse_optim_set_nodes drop
 *  them. @return LSE_OK, LSE_EFAULT, LSE_ENOMEM. */
LSE_API lse_status lse_optim_accumulate(lse_optim *o);
/** @brief Gradients accumulated since the last step (0: the next step
 *  reads the node gradients). */
LSE_API size_t lse_optim_n_accumulated(const lse_optim *o);
/** @brief Data parallelism: before each step, replace the gradient of
 *  every optimized entry (one flat buffer of lse_optim_state_size - 1) / 3
 *  doubles, in node order) by its sum over all processes, each of which
 *  evaluated the gradient on its share of the rows (MPI_Allreduce with
 *  MPI_SUM; the same hook type as lse_solver_set_reduce). Every process
 *  then applies the same update. After lse_optim_accumulate the hook sums
 *  the exact accumulators instead (n LSE_XSUM_EXPORT doubles), so the
 *  update is bit-identical for any number of processes. NULL (default):
 *  one process. */
LSE_API void lse_optim_set_reduce(lse_optim *o, lse_reduce_fn fn, void *user);
/** @brief Steps taken. */
LSE_API size_t lse_optim_n_step(const lse_optim *o);
/** @brief The learning rate the next step uses (schedule applied). */
LSE_API double lse_optim_lr(const lse_optim *o);
/** @brief Global gradient norm seen by the last step, before clipping. */
LSE_API double lse_optim_grad_norm(const lse_optim *o);
LSE_API size_t lse_optim_n_nodes(const lse_optim *o);
LSE_API lse_node *lse_optim_node(const lse_optim *o, size_t i);

/** @brief Doubles of the state buffer: 1 + 3 (number of optimized
 *  entries): [step, first moments (SGD: momentum buffer), second moments,
 *  running max of the second moments], each in node order, row-major. */
LSE_API size_t lse_optim_state_size(const lse_optim *o);
/** @brief Copy the state into @p buf (@p n = lse_optim_state_size). */
LSE_API lse_status lse_optim_state_get(const lse_optim *o, double *buf,
                                       size_t n);
/** @brief Restore a state from lse_optim_state_get: the continued iterates
 *  are bit-identical. @return LSE_OK, LSE_EFAULT, LSE_EDIM (wrong size),
 *  LSE_EDOM (a step count that is not a non-negative integer, a negative
 *  second moment, a non-finite entry). */
LSE_API lse_status lse_optim_state_set(lse_optim *o, const double *buf,
                                       size_t n);
/** @brief Write the options' rule, the node names, the state and the
 *  optimized nodes' values into @p doc: keys "optimizer", "nodes", "state"
 *  and "param.<node name>" (17 significant digits: exact round trip). */
LSE_API lse_status lse_optim_save_json(const lse_optim *o, lse_json *doc,
                                       lse_error *err);
/** @brief Restore what lse_optim_save_json wrote: the node values and the
 *  state. The optimized nodes must have the saved names and shapes, and
 *  the rule must match. Nothing changes on failure. */
LSE_API lse_status lse_optim_load_json(lse_optim *o, const lse_json *doc,
                                       lse_error *err);

/* ------------------------------------------------------------------ */
/* Mini-batches                                                        */

/** @brief Batches of row indices over n rows: each epoch is a permutation
 *  (seeded; or the identity without shuffling) cut into floor(n / batch)
 *  batches of exactly @p batch rows (the last n mod batch rows of an epoch
 *  are dropped, so a batch fills a node of fixed shape). The permutation of
 *  epoch e depends only on (seed, e), so lse_batcher_seek resumes a run. */
typedef struct lse_batcher lse_batcher;

/** @return LSE_OK; LSE_EFAULT; LSE_EDOM (batch 0 or > n_rows); LSE_ENOMEM. */
LSE_API lse_status lse_batcher_new(size_t n_rows, size_t batch, uint64_t seed,
                                   int shuffle, lse_batcher **out,
                                   lse_error *err);
LSE_API void lse_batcher_free(lse_batcher *b);
/** @brief Advance to the next batch (the first call gives batch 0 of epoch
 *  0; past the last batch of an epoch, batch 0 of the next). */
LSE_API lse_status lse_batcher_next(lse_batcher *b);
/** @brief Position so that the next lse_batcher_next gives batch @p index
 *  of epoch @p epoch. @return LSE_OK, LSE_EFAULT, LSE_ERANGE. */
LSE_API lse_status lse_batcher_seek(lse_batcher *b, size_t epoch, size_t index);
/** @brief The @p batch row indices of the current batch (borrowed), or NULL
 *  before the first lse_batcher_next. */
LSE_API const size_t *lse_batcher_rows(const lse_batcher *b);
LSE_API size_t lse_batcher_size(const lse_batcher *b);
LSE_API size_t lse_batcher_n_batches(const lse_batcher *b);
/** @brief Epoch and batch index of the current batch. */
LSE_API size_t lse_batcher_epoch(const lse_batcher *b);
LSE_API size_t lse_batcher_index(const lse_batcher *b);
/** @brief dst row i = src row rows[i] (dst: batch rows, src's columns; src
 *  has n_rows rows). Gather labels with the same call on a one-column
 *  matrix. @return LSE_OK, LSE_EFAULT, LSE_EDIM, LSE_EINVAL (no batch
 *  yet). */
LSE_API lse_status lse_batcher_gather(const lse_batcher *b,
                                      const gsl_matrix *src, gsl_matrix *dst);

/* ------------------------------------------------------------------ */
/* infer -> learn                                                      */

/**
 * @brief One step of the reference's training loop: infer the free state
 * nodes by integrating the gradient flow from their current values
 * (lse_ode_run on @p infer; NULL: no inference), evaluate the energy and
 * every gradient at the inferred point (lse_graph_gradient), then take one
 * optimizer step on the parameters. @p energy (may be NULL) receives the
 * energy at the inferred nodes before the parameter update. @p infer and
 * @p opt must be on the same graph.
 * @return LSE_OK, LSE_EFAULT, LSE_EINVAL (different graphs), or the error
 * of the integration, the evaluation or the step.
 */
LSE_API lse_status lse_learn_step(lse_ode *infer, lse_optim *opt,
                                  double *energy);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_OPTIM_H */
