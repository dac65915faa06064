/* Data-parallel learning under MPI (docs/learning.md, "Scale-out"):
 *   mpirun -n P test_mpi_learn
 * An IDW prototype classifier on the bundled digits (keys and class values
 * learned through lse_loss_readout_xent and AMSGrad, lse_optim): every
 * process draws the same seeded mini-batches of 48 rows and evaluates the
 * gradient on its share of each batch (rows [48 r / P, 48 (r + 1) / P)),
 * and lse_optim_step sums the shares through the reduction hook
 * (MPI_Allreduce, MPI_SUM). After 40 steps:
 *   1. plain sums: the parameters equal those of one process doing the
 *      whole batch (computed on every process) to 1e-12;
 *   2. exact sums (lse_optim_accumulate row by row, the hook summing the
 *      exact accumulators): the parameters are bit-identical to one process
 *      accumulating every row, for any P;
 *   3. every process ends with the same bits (checked through the hook).
 * Prints TAP on rank 0; the exit status is 0 only when all pass. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

enum { BATCH = 48, N_PROTO = 12, N_CLASS = 10, DIM = 64, STEPS = 40 };

static lse_status allreduce(double *buf, size_t n, void *user)
{
    (void)user;
    if (n > (size_t)INT32_MAX)
        return LSE_EINVAL;
    return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM,
                         MPI_COMM_WORLD) == MPI_SUCCESS
               ? LSE_OK
               : LSE_EIO;
}

typedef struct net {
    lse_graph *g;
    lse_node *q, *keys, *values;
    lse_term *t;
    lse_optim *opt;
} net;

static void net_free(net *m)
{
    lse_optim_free(m->opt);
    lse_graph_free(m->g);
}

/* a classifier over `rows` query rows, keys and values from init */
static int net_new(net *m, size_t rows, const gsl_matrix *keys0)
{
    memset(m, 0, sizeof *m);
    m->g = lse_graph_new();
    if (m->g == NULL)
        return 0;
    lse_dist_config cfg = {.p = 2.0, .eps = 1e-3};
    lse_term_spec spec = lse_term_spec_default();
    if (lse_graph_add_node(m->g, "q", rows, DIM, LSE_NODE_CLAMPED, &m->q) !=
            LSE_OK ||
        lse_graph_add_node(m->g, "keys", N_PROTO, DIM, LSE_NODE_PARAM,
                           &m->keys) != LSE_OK ||
        lse_graph_add_node(m->g, "values", N_PROTO, N_CLASS, LSE_NODE_PARAM,
                           &m->values) != LSE_OK)
        return 0;
    gsl_matrix_memcpy(lse_node_value(m->keys), keys0);
    spec.child = lse_view_all(m->q);
    spec.parent = lse_view_all(m->keys);
    spec.sim = lse_sim_idw;
    spec.config = &cfg;
    if (lse_graph_add_lse(m->g, "attention", &spec, &m->t) != LSE_OK)
        return 0;
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = LSE_OPTIM_AMSGRAD;
    oo.lr = 0.03;
    oo.clip_norm = 5.0; /* the norm of the summed gradient */
    m->opt = lse_optim_new(m->g, &oo);
    return m->opt != NULL;
}

/* gradient of (1/BATCH) sum of the cross-entropy over rows [lo, hi) of the
 * batch; with exact, row by row into the optimizer's exact accumulators */
static lse_status share_grad(net *m, const gsl_matrix *xb, const size_t *yb,
                             size_t lo, size_t hi, int exact)
{
    const size_t rows = lse_node_value(m->q)->size1;
    size_t lab[BATCH];
    lse_status st = LSE_OK;
    for (size_t r0 = lo; st == LSE_OK && r0 < hi; r0 += rows) {
        gsl_matrix_const_view xv = gsl_matrix_const_submatrix(xb, r0, 0, rows, DIM);
        st = lse_node_set_value(m->q, &xv.matrix);
        for (size_t i = 0; i < rows; i++)
            lab[i] = yb[r0 + i];
        if (st == LSE_OK)
            st = lse_graph_zero_grad(m->g);
        if (st == LSE_OK)
            st = lse_loss_readout_xent(m->t, lse_view_all(m->values), lab, NULL,
                                       1.0 / BATCH, 1, NULL, NULL);
        if (st == LSE_OK && exact)
            st = lse_optim_accumulate(m->opt);
    }
    return st;
}

static int n_test = 0, n_fail = 0;

static void ok(int rank, int pass, const char *what)
{
    n_test++;
    if (!pass)
        n_fail++;
    if (rank == 0)
        printf("%s %d - %s\n", pass ? "ok" : "not ok", n_test, what);
}

/* max |a - b| / max(1, |b|) over keys and values */
static double rel_diff(const net *a, const net *b)
{
    double d = 0.0;
    lse_node *na[2] = {a->keys, a->values}, *nb[2] = {b->keys, b->values};
    for (int k = 0; k < 2; k++) {
        const gsl_matrix *x = lse_node_value(na[k]), *y = lse_node_value(nb[k]);
        for (size_t i = 0; i < x->size1 * x->size2; i++)
            d = fmax(d, fabs(x->data[i] - y->data[i]) / fmax(1.0, fabs(y->data[i])));
    }
    return d;
}

static int same_bits(const net *a, const net *b)
{
    const gsl_matrix *ka = lse_node_value(a->keys), *kb = lse_node_value(b->keys);
    const gsl_matrix *va = lse_node_value(a->values), *vb = lse_node_value(b->values);
    return memcmp(ka->data, kb->data, N_PROTO * DIM * sizeof(double)) == 0 &&
           memcmp(va->data, vb->data, N_PROTO * N_CLASS * sizeof(double)) == 0;
}

/* every process holds the same bits: the min and max over processes of
 * each entry agree */
static int agree(const net *m)
{
    int same = 1;
    lse_node *n2[2] = {m->keys, m->values};
    for (int k = 0; k < 2; k++) {
        const gsl_matrix *x = lse_node_value(n2[k]);
        const int len = (int)(x->size1 * x->size2);
        double *lo = malloc(2 * (size_t)len * sizeof *lo);
        if (lo == NULL)
            return 0;
        double *hi = lo + len;
        memcpy(lo, x->data, (size_t)len * sizeof *lo);
        memcpy(hi, x->data, (size_t)len * sizeof *hi);
        MPI_Allreduce(MPI_IN_PLACE, lo, len, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, hi, len, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (memcmp(lo, hi, (size_t)len * sizeof *lo) != 0)
            same = 0;
        free(lo);
    }
    return same;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank_i, size_i;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_i);
    MPI_Comm_size(MPI_COMM_WORLD, &size_i);
    const size_t rank = (size_t)rank_i, n_ranks = (size_t)size_i;
    const char *path = argc > 1 ? argv[1] : LSE_DATA_DIR "/digits.csv";
    lse_error err;
    lse_table *tab = NULL;
    gsl_matrix *data = NULL;
    if (lse_table_read(path, NULL, &tab, &err) != LSE_OK ||
        lse_table_to_matrix(tab, NULL, 0, LSE_MISSING_ERROR, &data, NULL,
                            &err) != LSE_OK) {
        fprintf(stderr, "test_mpi_learn: %s\n", err.message);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    lse_table_free(tab);
    const size_t n = 480; /* the first 480 digits: 10 batches */
    gsl_matrix *x = gsl_matrix_alloc(n, DIM);
    size_t *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < DIM; j++)
            gsl_matrix_set(x, i, j, gsl_matrix_get(data, i, j) / 16.0);
        y[i] = (size_t)gsl_matrix_get(data, i, DIM);
    }
    gsl_matrix *keys0 = gsl_matrix_alloc(N_PROTO, DIM);
    for (size_t k = 0; k < N_PROTO; k++) /* keys at training rows */
        for (size_t j = 0; j < DIM; j++)
            gsl_matrix_set(keys0, k, j, gsl_matrix_get(x, 37 * k + 5, j));
    const size_t lo = BATCH * rank / n_ranks, hi = BATCH * (rank + 1) / n_ranks;
    /* one process: the whole batch at once (plain) and row by row (exact);
     * P processes: the share at once (plain) and row by row (exact) */
    net one, one_x, par, par_x;
    if (!net_new(&one, BATCH, keys0) || !net_new(&one_x, 1, keys0) ||
        !net_new(&par, hi > lo ? hi - lo : 1, keys0) ||
        !net_new(&par_x, 1, keys0)) {
        fprintf(stderr, "test_mpi_learn: setup failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    lse_optim_set_reduce(par.opt, allreduce, NULL);
    lse_optim_set_reduce(par_x.opt, allreduce, NULL);
    lse_batcher *b = NULL;
    if (lse_batcher_new(n, BATCH, 11, 1, &b, &err) != LSE_OK) {
        fprintf(stderr, "test_mpi_learn: %s\n", err.message);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    gsl_matrix *xb = gsl_matrix_alloc(BATCH, DIM);
    size_t yb[BATCH];
    lse_status st = LSE_OK;
    for (int s = 0; st == LSE_OK && s < STEPS; s++) {
        st = lse_batcher_next(b);
        if (st == LSE_OK)
            st = lse_batcher_gather(b, x, xb);
        const size_t *rows = lse_batcher_rows(b);
        for (size_t i = 0; i < BATCH; i++)
            yb[i] = y[rows[i]];
        if (st == LSE_OK)
            st = share_grad(&one, xb, yb, 0, BATCH, 0);
        if (st == LSE_OK)
            st = lse_optim_step(one.opt);
        if (st == LSE_OK)
            st = share_grad(&one_x, xb, yb, 0, BATCH, 1);
        if (st == LSE_OK)
            st = lse_optim_step(one_x.opt);
        /* a process without rows contributes zero gradients */
        if (st == LSE_OK && hi > lo)
            st = share_grad(&par, xb, yb, lo, hi, 0);
        else if (st == LSE_OK)
            st = lse_graph_zero_grad(par.g);
        if (st == LSE_OK)
            st = lse_optim_step(par.opt);
        if (st == LSE_OK)
            st = share_grad(&par_x, xb, yb, lo, hi, 1);
        if (st == LSE_OK && lse_optim_n_accumulated(par_x.opt) == 0)
            st = lse_optim_accumulate(par_x.opt); /* zero: no rows here */
        if (st == LSE_OK)
            st = lse_optim_step(par_x.opt);
    }
    if (rank == 0)
        printf("1..5\n");
    ok(rank, st == LSE_OK, "40 steps on every process");
    const double d_plain = rel_diff(&par, &one);
    char what[200];
    snprintf(what, sizeof what,
             "plain sums over %zu processes = one process to 1e-12 (rel %.2e)",
             n_ranks, d_plain);
    ok(rank, d_plain <= 1e-12, what);
    snprintf(what, sizeof what,
             "exact sums over %zu processes: bit-identical to one process",
             n_ranks);
    ok(rank, same_bits(&par_x, &one_x), what);
    ok(rank, agree(&par) && agree(&par_x), "every process holds the same bits");
    /* the parameters moved: training happened */
    ok(rank, rel_diff(&one, &par_x) < 1e-10 && lse_optim_n_step(par.opt) == STEPS &&
                 fabs(gsl_matrix_get(lse_node_value(one.values), 0, y[5]) -
                      0.0) > 1e-3,
       "the parameters moved and the exact run agrees with the plain one");
    if (st != LSE_OK && rank == 0)
        printf("# %s\n", lse_graph_errmsg(par.g));
    int fails = n_fail;
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    gsl_matrix_free(xb);
    lse_batcher_free(b);
    net_free(&one);
    net_free(&one_x);
    net_free(&par);
    net_free(&par_x);
    gsl_matrix_free(keys0);
    gsl_matrix_free(x);
    gsl_matrix_free(data);
    free(y);
    MPI_Finalize();
    return fails == 0 ? 0 : 1;
}
