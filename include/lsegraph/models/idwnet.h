#ifndef LSEGRAPH_MODELS_IDWNET_H
#define LSEGRAPH_MODELS_IDWNET_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/status.h>
#include <lsegraph/sim.h>
#include <lsegraph/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file idwnet.h
 * @brief One-hidden-layer attention classifier of the IDW paper (the IDW paper,
 * sections 2-3): P prototypes with keys K (P, d) and values V (P, C) (class
 * logits); for a query q, logits = softmax_j(score(q, k_j)) V. The
 * attention is an LSE term (child = a batch of queries, parent = the keys,
 * similarity = the score), so the softmax is lse_term_softmax(); keys and
 * values are parameter nodes. The cross-entropy of the logits (not an
 * energy of the graph) and its gradients are the core's
 * lse_loss_readout_xent, the steps lse_optim's (AMSGrad). Derivation:
 * docs/models/idwnet.md.
 *
 * @code
 * lse_dist_config cfg = {.p = 2, .eps = 1e-3, .s = 1};
 * lse_idwnet *net = NULL;
 * lse_error err;
 * lse_idwnet_new(20, 64, 10, lse_sim_idw, &cfg, 4, &net, &err);
 * lse_idwnet_init(net, xtrain, 0.1, 1, &err);          // paper's key init
 * lse_idwnet_train_opts o = lse_idwnet_train_opts_default();
 * lse_idwnet_train(net, xtrain, ytrain, &o, NULL, &err); // AMSGrad + cosine
 * double loss, acc;
 * lse_idwnet_evaluate(net, xtest, ytest, &loss, &acc, &err);
 * lse_idwnet_free(net);
 * @endcode
 */

typedef struct lse_idwnet lse_idwnet;

/**
 * @brief A network of @p n_proto prototypes in dimension @p dim for
 * @p n_class classes, scored by @p score (any similarity without parameter
 * nodes whose child and parent dimensions agree: lse_sim_neg_dist,
 * lse_sim_gauss_kernel, lse_sim_inv_dist, lse_sim_idw, lse_sim_scaled_dot,
 * lse_sim_dot, lse_sim_cosine, ...). Keys and values start at zero.
 *
 * Graph: node "q" (batch, dim) clamped (the queries of one batch), node
 * "keys" (n_proto, dim) parameter, LSE term "attention" (child q, parent
 * keys, beta 1), evaluated as one block.
 * @param config the score's config (e.g. lse_dist_config), copied; NULL:
 *        the type's default.
 * @param batch rows of one forward/gradient pass (the training minibatch).
 * @param[out] out the network, owned by the caller (lse_idwnet_free()).
 * @param err may be NULL.
 * @return LSE_OK; LSE_EFAULT (NULL score or out); LSE_EINVAL (a zero size,
 *  a score with parameter nodes); LSE_EDOM/LSE_EDIM (the score rejects the
 *  config or shapes; message from the graph); LSE_ENOMEM.
 */
LSE_API lse_status lse_idwnet_new(size_t n_proto, size_t dim, size_t n_class,
                                  const lse_sim_type *score, const void *config,
                                  size_t batch, lse_idwnet **out,
                                  lse_error *err);

/** @brief Free @p m; NULL is a no-op. */
LSE_API void lse_idwnet_free(lse_idwnet *m);

/** @brief "function: facts" of the last failure of a call on @p m ("" if
 *  none), valid until the next call on @p m.
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_idwnet_errmsg(const lse_idwnet *m);

/** @brief The graph (owned by @p m; replaced by lse_idwnet_add_prototype). */
LSE_API lse_graph *lse_idwnet_graph(const lse_idwnet *m);
/** @brief The attention term (borrowed; replaced like the graph). */
LSE_API lse_term *lse_idwnet_term(const lse_idwnet *m);
/** @brief Keys K (n_proto, dim): borrowed and writable. */
LSE_API gsl_matrix *lse_idwnet_keys(lse_idwnet *m);
/** @brief Values V (n_proto, n_class): borrowed and writable. */
LSE_API gsl_matrix *lse_idwnet_values(lse_idwnet *m);
LSE_API size_t lse_idwnet_n_proto(const lse_idwnet *m);
LSE_API size_t lse_idwnet_dim(const lse_idwnet *m);
LSE_API size_t lse_idwnet_n_class(const lse_idwnet *m);
LSE_API size_t lse_idwnet_batch(const lse_idwnet *m);

/**
 * @brief The paper's initialisation (appendix A.1): key k_ij ~
 * N(mean_j, (noise sd_j)^2) with the mean and (population) standard
 * deviation of column j of @p x (n, dim), values V = 0.
 * @param noise the factor on the standard deviation (paper: 0.1), >= 0.
 * @param seed seed of the GSL mt19937 generator.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_EDOM (noise < 0).
 */
LSE_API lse_status lse_idwnet_init(lse_idwnet *m, const gsl_matrix *x,
                                   double noise, unsigned long seed,
                                   lse_error *err);

/**
 * @brief Forward pass: @p logits (n, n_class) = A V with A = softmax over
 * the keys of score(x_i, k_j); @p attn (n, n_proto), if not NULL, gets A.
 * Rows go through the graph @p batch at a time.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; the graph's errors.
 */
LSE_API lse_status lse_idwnet_forward(lse_idwnet *m, const gsl_matrix *x,
                                      gsl_matrix *logits, gsl_matrix *attn,
                                      lse_error *err);

/**
 * @brief Mean cross-entropy of the rows of @p x (b, dim), b <= batch, with
 * labels @p y (b entries < n_class), and its gradient:
 *   dL/dV = A' D,  D_i = (softmax(logits_i) - e_{y_i}) / b,
 *   dL/dS_ij = A_ij (g_ij - sum_k A_ik g_ik),  g = D V',
 *   dL/dK = the score's parent gradient kernel with G = dL/dS.
 * @param dkeys (n_proto, dim) or NULL; @param dvalues (n_proto, n_class) or
 *        NULL; both overwritten.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (b = 0 or > batch, shapes);
 *  LSE_EINVAL (a label >= n_class); the graph's and kernel's errors.
 */
LSE_API lse_status lse_idwnet_loss_grad(lse_idwnet *m, const gsl_matrix *x,
                                        const size_t *y, double *loss,
                                        gsl_matrix *dkeys, gsl_matrix *dvalues,
                                        lse_error *err);

/** @brief Mean cross-entropy @p loss and accuracy @p accuracy (fraction of
 *  argmax logits equal to the label; ties go to the lower class) over the
 *  rows of @p x (n, dim); either output may be NULL. */
LSE_API lse_status lse_idwnet_evaluate(lse_idwnet *m, const gsl_matrix *x,
                                       const size_t *y, double *loss,
                                       double *accuracy, lse_error *err);

/** @brief Predicted class (argmax of the logits, lowest index on ties) of
 *  every row of @p x into @p labels (n entries). */
LSE_API lse_status lse_idwnet_predict(lse_idwnet *m, const gsl_matrix *x,
                                      size_t *labels, lse_error *err);

/** @brief Per-epoch callback of lse_idwnet_train(): @p epoch counts from
 *  1, @p loss is the mean of the minibatch losses of that epoch (at the
 *  parameters each batch saw). Return non-zero to stop. */
typedef int (*lse_idwnet_epoch_fn)(const lse_idwnet *m, size_t epoch,
                                   double loss, void *user);

/** @brief Training options (AMSGrad variant of Adam with cosine annealing
 *  of the learning rate per epoch, as in the paper's appendix A.1). */
typedef struct lse_idwnet_train_opts {
    size_t epochs;      /**< default 20 */
    double lr;          /**< base learning rate > 0 (default 1e-3) */
    double beta1;       /**< in [0, 1) (default 0.9) */
    double beta2;       /**< in [0, 1) (default 0.999) */
    double adam_eps;    /**< > 0 (default 1e-8) */
    int amsgrad;        /**< 1 (default): AMSGrad's running max of v */
    int cosine;         /**< 1 (default): lr_e = lr (1 + cos(pi e / epochs)) / 2
                           for epoch e = 0 .. epochs-1; 0: constant */
    unsigned long seed; /**< shuffling of the rows each epoch (default 1) */
    lse_idwnet_epoch_fn callback; /**< NULL: none */
    void *user;                   /**< passed to callback, borrowed */
} lse_idwnet_train_opts;

/** @brief The defaults listed in lse_idwnet_train_opts. */
LSE_API lse_idwnet_train_opts lse_idwnet_train_opts_default(void);

/** @brief What lse_idwnet_train() did. */
typedef struct lse_idwnet_train_report {
    double loss_before; /**< mean cross-entropy of the training set before */
    double loss_after;  /**< and after training */
    size_t epochs;      /**< epochs run */
    size_t steps;       /**< parameter updates (minibatches) */
} lse_idwnet_train_report;

/**
 * @brief Minibatch training of keys and values on the rows of @p x (n, dim)
 * with labels @p y: each epoch shuffles the rows and takes one AMSGrad
 * step (lse_optim, learning rate of the epoch set by lse_optim_set_opts)
 * per batch of lse_idwnet_batch() rows (the last batch may be smaller), on
 * the mean cross-entropy of the batch (lse_loss_readout_xent).
 * @param opts borrowed; NULL: defaults. @param report may be NULL.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_EINVAL (bad label); LSE_EDOM
 *  (bad option); LSE_ENONFINITE (loss not finite); LSE_ENOMEM.
 */
LSE_API lse_status lse_idwnet_train(lse_idwnet *m, const gsl_matrix *x,
                                    const size_t *y,
                                    const lse_idwnet_train_opts *opts,
                                    lse_idwnet_train_report *report,
                                    lse_error *err);

/**
 * @brief Append one prototype (key @p key (dim), value @p value (n_class)),
 * rebuilding the graph with n_proto + 1 keys (previous graph, term and
 * borrowed key/value pointers become invalid). On failure the network is
 * unchanged.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE; LSE_ENOMEM.
 */
LSE_API lse_status lse_idwnet_add_prototype(lse_idwnet *m,
                                            const gsl_vector *key,
                                            const gsl_vector *value,
                                            lse_error *err);

/**
 * @brief Low-impact special case (the IDW paper section 2.2, eq. 7): make the
 * network predict class @p c at @p q by adding the prototype k' = q with
 * value eta e_c, eta as small as possible:
 *   eta = (1 + eps sum_j w_j) [ max_{k != c} sigma' V_k - sigma' V_c ]
 *         + margin (1 + eps sum_j w_j),
 *   w_j = 1 / (eps + d_j^p), d_j = ||q - k_j||,
 *   sigma'_j = w_j / (sum_l w_l + 1/eps)  (the new key at distance 0),
 * so that after insertion logit_c(q) - max_{k != c} logit_k(q) = margin
 * exactly; margin = 0 is the paper's eta (a tie). Only for the idw score.
 * If the network already predicts @p c at @p q nothing is added,
 * *inserted = 0 and *eta = 0.
 * @param q (dim); @param margin >= 0; @param eta, @param inserted may be
 *        NULL.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_EINVAL (score is not idw,
 *  c >= n_class); LSE_EDOM (margin < 0); the add_prototype errors.
 */
LSE_API lse_status lse_idwnet_special_case(lse_idwnet *m, const gsl_vector *q,
                                           size_t c, double margin, double *eta,
                                           int *inserted, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_IDWNET_H */
