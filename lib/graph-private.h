#ifndef LSEGRAPH_GRAPH_PRIVATE_H
#define LSEGRAPH_GRAPH_PRIVATE_H

#include <lsegraph/core.h>

/* Internal structures of the core; never installed. */

struct lse_node {
    lse_graph *graph;
    char *name;
    unsigned flags;
    gsl_matrix *value; /* (n, dim) */
    gsl_matrix *grad;  /* (n, dim) */
    int sealed;        /* lse_node_seal (lsegraph/graph.h) */
};

typedef struct lse_chain lse_chain; /* lib/chain.c */

/* What a kind of term (LSE terms: lib/term.c, custom terms: lib/custom.c)
 * gives the graph, which evaluates and frees every term through these and
 * so depends on no kind. eval: the term's energy into t->energy (want_grad:
 * also add its gradients into the node grads); free_kind: the kind's own
 * fields (lse_term_free frees the name, the config and the term);
 * restat (NULL for kinds without it): the M-step statistics of the last
 * evaluation into the term's stats sink without scoring again, for
 * lse_graph_set_reuse (an LSE term that keeps its softmax). */
typedef struct lse_term_ops {
    lse_status (*eval)(lse_term *t, int want_grad);
    void (*free_kind)(lse_term *t);
    lse_status (*restat)(lse_term *t);
} lse_term_ops;

struct lse_term {
    lse_graph *graph;
    char *name;
    lse_term_kind kind;
    const lse_term_ops *ops; /* set by lse_graph_add_term_slot */
    int enabled;
    double energy;
    const void *config; /* = config_owned, or borrowed if config_size 0 */
    void *config_owned;

    /* LSE terms */
    const lse_sim_type *sim;
    lse_view child, parent, context;
    lse_node **param;   /* sim->n_param, NULL entries for absent optionals */
    size_t *param_rows; /* shapes for lse_sim_shape */
    size_t *param_cols;
    lse_sim_shape shape;
    void *work;
    const gsl_matrix **param_values; /* n_param, rebuilt per evaluation */
    gsl_matrix **param_grads;        /* n_param scratch pointers */
    gsl_matrix_view child_mv, parent_mv, context_mv; /* whole views */
    gsl_matrix_view *param_gv;       /* n_param grad views */
    double beta;
    unsigned mask;
    gsl_matrix *user_mask;  /* (n_child, n_parent) or NULL */
    gsl_vector *row_weight; /* (n_child) or NULL */
    int keep;               /* S and A kept whole */
    size_t block;           /* child rows per kernel call */
    gsl_matrix *s;          /* (n_child or block, n_parent) */
    gsl_matrix *a;          /* softmax, same shape */
    gsl_matrix *g;          /* dE/dS block (block, n_parent) */
    gsl_vector *row_lse;    /* (n_child) */
    int has_mask;           /* any mask active */
    lse_reduce reduce;
    lse_node *chain_init, *chain_trans;
    lse_chain *chain;
    struct lse_term_par *par; /* chunks and per-thread scratch (term.c) */

    /* custom terms */
    const lse_custom_type *custom;
    lse_view *views;
    size_t n_view;
    gsl_matrix_view *value_views; /* scratch arrays of n_view */
    gsl_matrix_view *grad_views;
    const gsl_matrix **values;
    gsl_matrix **grads;
};

struct lse_graph {
    lse_node **nodes;
    size_t n_nodes, cap_nodes;
    lse_term **terms;
    size_t n_terms, cap_terms;
    size_t block_rows;
    char errmsg[1024];
    /* lse_graph_set_reuse: on; the memo (what the last successful
     * lse_graph_energy saw, memo_len doubles) is valid */
    int reuse, memo_ok;
    double *memo;
    size_t memo_len;
};

/* Record "func: message" on g and return status (one breakpoint catches
 * every failure). g may be NULL. */
lse_status lse_graph_fail(lse_graph *g, lse_status status, const char *func,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Evaluation of an LSE term (lib/term.c). want_grad: also accumulate
 * gradients into the node grads. */
lse_status lse_term_eval(lse_term *t, int want_grad);

/* Shared by every kind of term (lib/graph.c): a view checked against its
 * graph; a new term named name, registered with its kind's ops (not yet
 * added to g->terms: the kind does that once the term is complete, or
 * lse_term_free it on failure). */
lse_status lse_check_view(lse_graph *g, const lse_view *v, const char *what,
                          const char *fn, const char *term);
lse_status lse_graph_add_term_slot(lse_graph *g, const char *name,
                                   const char *fn, const lse_term_ops *ops,
                                   lse_term **out);
void lse_term_free(lse_term *t);

/* Chain reduction (lib/chain.c). */
lse_status lse_chain_new(lse_term *t, const size_t *starts, size_t n_starts,
                         lse_chain **out);
void lse_chain_free(lse_chain *c);
/* S (n, K) -> energy, A = posterior marginals (n, K); xi expected counts.
 * want_grad adds dE/dlogits into the init/trans node grads. */
lse_status lse_chain_eval(lse_term *t, int want_grad, double *energy);
const gsl_matrix *lse_chain_xi(const lse_chain *c);
const gsl_matrix *lse_chain_init_post(const lse_chain *c);

/* Matrix view of rows of a node (value or grad). */
gsl_matrix_view lse_view_value(const lse_view *v);
gsl_matrix_view lse_view_grad(const lse_view *v);

#endif /* LSEGRAPH_GRAPH_PRIVATE_H */
