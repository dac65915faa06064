/* daam_digits: DAAM trained on a task (docs/models/daam.md, "Trained on a
 * task"). The bundled 8 x 8 digits (pixels / 16; the first 1300 rows
 * train, the other 497 test) classified by softmax regression over
 * DAAM-gated pixels, trained with Adam (lr 0.01, batches of 32, 30 epochs)
 * through lse_loss_xent and lse_optim; then the importance factors of the
 * trained gates as an 8 x 8 map.
 *
 * Usage: daam_digits [epochs]   (default 30) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

enum { N_TRAIN = 1300, DIM = 64, N_CLASS = 10 };

static int read_digits(gsl_matrix **x, size_t **y, size_t *n)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *all = NULL;
    if (lse_table_read(LSE_DATA_DIR "/digits.csv", NULL, &t, &err) != LSE_OK ||
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &all, NULL, &err) !=
            LSE_OK) {
        fprintf(stderr, "daam_digits: %s\n", err.message);
        lse_table_free(t);
        return 1;
    }
    lse_table_free(t);
    *n = all->size1;
    *x = gsl_matrix_alloc(*n, DIM);
    *y = malloc(*n * sizeof **y);
    if (*x == NULL || *y == NULL)
        return 1;
    for (size_t i = 0; i < *n; i++) {
        for (size_t j = 0; j < DIM; j++)
            gsl_matrix_set(*x, i, j, gsl_matrix_get(all, i, j) / 16.0);
        (*y)[i] = (size_t)gsl_matrix_get(all, i, DIM);
    }
    gsl_matrix_free(all);
    return 0;
}

typedef struct variant {
    size_t h, k;
    int train_gates;
    const char *what;
} variant;

int main(int argc, char **argv)
{
    size_t epochs = 30;
    if (argc > 1) {
        char *end;
        errno = 0;
        const long e = strtol(argv[1], &end, 10);
        if (errno != 0 || *end != '\0' || e < 1 || e > 10000) {
            fprintf(stderr, "daam_digits: option 'epochs': want an integer in "
                            "1..10000; usage: daam_digits [epochs]\n");
            return 1;
        }
        epochs = (size_t)e;
    }
    gsl_matrix *x;
    size_t *y, n;
    if (read_digits(&x, &y, &n))
        return 1;
    gsl_matrix_view xtr = gsl_matrix_submatrix(x, 0, 0, N_TRAIN, DIM);
    gsl_matrix_view xte = gsl_matrix_submatrix(x, N_TRAIN, 0, n - N_TRAIN, DIM);
    const variant vs[] = {
        {1, 1, 0, "gates fixed open (width 1e3): softmax regression"},
        {1, 1, 1, "DAAM H = 1, K = 1"},
        {2, 1, 1, "DAAM H = 2, K = 1"},
        {2, 3, 1, "DAAM H = 2, K = 3"},
    };
    const size_t nv = sizeof vs / sizeof vs[0];
    printf("| model | parameters (gates + weights) | train loss before -> after | "
           "train acc | test acc |\n|---|---|---|---|---|\n");
    lse_daam_net *keep = NULL;
    for (size_t v = 0; v < nv; v++) {
        lse_daam_net *net;
        lse_error err;
        if (lse_daam_net_new(vs[v].h, vs[v].k, N_CLASS, 32, &xtr.matrix, &net,
                             &err) != LSE_OK) {
            fprintf(stderr, "daam_digits: %s\n", err.message);
            return 1;
        }
        lse_daam_net_init(net, 1, &model_err);
        if (!vs[v].train_gates)
            gsl_matrix_set_all(lse_node_value(lse_daam_net_width(net)), 1e3);
        lse_daam_net_train_opts o = lse_daam_net_train_opts_default();
        o.epochs = epochs;
        o.train_gates = vs[v].train_gates;
        lse_daam_net_train_report rep;
        double acc_tr, acc_te;
        if (lse_daam_net_train(net, &xtr.matrix, y, &o, &rep, &model_err) !=
                LSE_OK ||
            lse_daam_net_evaluate(net, &xtr.matrix, y, NULL, &acc_tr,
                                  &model_err) != LSE_OK ||
            lse_daam_net_evaluate(net, &xte.matrix, y + N_TRAIN, NULL, &acc_te,
                                  &model_err) != LSE_OK) {
            fprintf(stderr, "daam_digits: %s\n", model_err.message);
            return 1;
        }
        const size_t gates = 2 * vs[v].h * vs[v].k * DIM;
        printf("| %s | %zu + %zu | %.4f -> %.4f | %.1f%% | %.1f%% |\n", vs[v].what,
               vs[v].train_gates ? gates : (size_t)0, N_CLASS * vs[v].h * DIM,
               rep.loss_before, rep.loss_after, 100 * acc_tr, 100 * acc_te);
        if (v == 2)
            keep = net;
        else
            lse_daam_net_free(net);
    }
    /* importance factors of the H = 2, K = 1 model's trained gates */
    gsl_vector *imp = gsl_vector_alloc(DIM), *da = gsl_vector_alloc(DIM);
    if (lse_daam_net_importance(keep, &xtr.matrix, da, imp, &model_err) !=
        LSE_OK) {
        fprintf(stderr, "daam_digits: %s\n", model_err.message);
        return 1;
    }
    /* a pixel that is 0 in every training image has no gradient (Phi =
     * x g = 0): its gate keeps its initial value; shown as '.' */
    const lse_gate_config *gc = lse_daam_net_gate(keep);
    size_t n_const = 0;
    printf("\nimportance factors (H = 2, K = 1), pixel rows of the 8 x 8 image, "
           "IF x 9 rounded ('.': constant pixel):\n");
    for (size_t r = 0; r < 8; r++) {
        for (size_t c = 0; c < 8; c++) {
            const double sc = gc->scale[r * 8 + c];
            if (sc * sc <= 1.0001 * LSE_DAAM_NET_EPS) {
                printf(" .");
                n_const++;
            } else {
                printf(" %d", (int)(9.0 * gsl_vector_get(imp, r * 8 + c) + 0.5));
            }
        }
        printf("\n");
    }
    printf("%zu constant pixels\n", n_const);
    double lo = 1.0, hi = 0.0;
    for (size_t j = 0; j < DIM; j++) {
        lo = gsl_vector_get(da, j) < lo ? gsl_vector_get(da, j) : lo;
        hi = gsl_vector_get(da, j) > hi ? gsl_vector_get(da, j) : hi;
    }
    printf("density attention DA from %.3f to %.3f\n", lo, hi);
    gsl_vector_free(imp);
    gsl_vector_free(da);
    lse_daam_net_free(keep);
    gsl_matrix_free(x);
    free(y);
    return 0;
}
