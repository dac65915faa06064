/* IDW prototype classifier on the bundled digits (docs/models/idwnet.md),
 * the set-up of the IDW paper's Table 1 (the IDW paper, section 3.2) on the 8x8
 * digits: pixels scaled to [0, 1], the first 1300 rows train, the other
 * 497 test, 20 prototypes, keys initialised at the pixel means plus 0.1 sd
 * noise, values 0, AMSGrad with cosine annealing, batch 4, lr 1e-3 and 50
 * epochs, as in the paper's appendix A.1 (with 1300 training rows instead
 * of MNIST's 60000 an epoch has 46 times fewer steps: --lr 0.01 or more
 * epochs compensate; docs/models/idwnet.md has both tables).
 *
 * Usage: demo_idwnet [--epochs N] [--batch B] [--lr X] [--protos P]
 *                    [--score NAME] [--seed S] [--table]
 * NAME: neg-dist, gauss-kernel, inv-dist, idw, scaled-dot, or all (the
 * default). --table prints a Markdown table row per score. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

#define N_TRAIN 1300

typedef struct score_entry {
    const char *name;
    const lse_sim_type *type;
    lse_dist_config cfg;
    const char *label;
} score_entry;

static int read_digits(gsl_matrix **x, size_t **y)
{
    lse_error err;
    lse_table *t = NULL;
    gsl_matrix *all = NULL;
    if (lse_table_read(LSE_DATA_DIR "/digits.csv", NULL, &t, &err) != LSE_OK ||
        lse_table_to_matrix(t, NULL, 0, LSE_MISSING_ERROR, &all, NULL, &err) !=
            LSE_OK) {
        fprintf(stderr, "demo_idwnet: %s\n", err.message);
        lse_table_free(t);
        return 1;
    }
    lse_table_free(t);
    const size_t n = all->size1, d = all->size2 - 1; /* label last */
    *x = gsl_matrix_alloc(n, d);
    *y = malloc(n * sizeof **y);
    if (*x == NULL || *y == NULL) {
        gsl_matrix_free(all);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(*x, i, j, gsl_matrix_get(all, i, j) / 16.0);
        (*y)[i] = (size_t)gsl_matrix_get(all, i, d);
    }
    gsl_matrix_free(all);
    return 0;
}

/* mean over the rows of a of the distance to the nearest row of b */
static double mean_nearest(const gsl_matrix *a, const gsl_matrix *b)
{
    double total = 0.0;
    for (size_t i = 0; i < a->size1; i++) {
        double best = INFINITY;
        for (size_t k = 0; k < b->size1; k++) {
            double d2 = 0.0;
            for (size_t j = 0; j < a->size2; j++) {
                const double t =
                    gsl_matrix_get(a, i, j) - gsl_matrix_get(b, k, j);
                d2 += t * t;
            }
            best = d2 < best ? d2 : best;
        }
        total += sqrt(best);
    }
    return total / (double)a->size1;
}

int main(int argc, char **argv)
{
    size_t epochs = 50, batch = 4, protos = 20;
    double lr = 1e-3;
    unsigned long seed = 1;
    const char *which = "all";
    int table = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--table") == 0) {
            table = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "demo_idwnet: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--epochs") == 0)
            epochs = strtoul(v, NULL, 10);
        else if (strcmp(a, "--batch") == 0)
            batch = strtoul(v, NULL, 10);
        else if (strcmp(a, "--protos") == 0)
            protos = strtoul(v, NULL, 10);
        else if (strcmp(a, "--lr") == 0)
            lr = strtod(v, NULL);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoul(v, NULL, 10);
        else if (strcmp(a, "--score") == 0)
            which = v;
        else {
            fprintf(stderr, "demo_idwnet: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    const score_entry scores[] = {
        {"neg-dist", lse_sim_neg_dist, {2, 1e-3, 1}, "Neg Dist Softmax (p=2)"},
        {"gauss-kernel",
         lse_sim_gauss_kernel,
         {2, 1e-3, 1},
         "Gaussian Dist Softmax (s=1)"},
        {"inv-dist",
         lse_sim_inv_dist,
         {2, 1e-3, 1},
         "Inv Dist Softmax (p=2, eps=1e-3)"},
        {"idw", lse_sim_idw, {2, 1e-3, 1}, "IDW (p=2, eps=1e-3)"},
        {"scaled-dot", lse_sim_scaled_dot, {2, 1e-3, 1}, "Scaled Dot Softmax"},
    };
    const size_t n_scores = sizeof scores / sizeof scores[0];
    int known = strcmp(which, "all") == 0;
    for (size_t s = 0; s < n_scores; s++)
        known = known || strcmp(which, scores[s].name) == 0;
    if (!known || batch == 0 || protos == 0 || !(lr > 0.0)) {
        fprintf(stderr, "demo_idwnet: unknown score '%s' or bad option\n",
                which);
        return 2;
    }
    gsl_matrix *x = NULL;
    size_t *y = NULL;
    if (read_digits(&x, &y) != 0)
        return 1;
    const size_t n = x->size1, d = x->size2;
    gsl_matrix_view xtr = gsl_matrix_submatrix(x, 0, 0, N_TRAIN, d);
    gsl_matrix_view xte = gsl_matrix_submatrix(x, N_TRAIN, 0, n - N_TRAIN, d);
    const double ref = mean_nearest(&xte.matrix, &xtr.matrix);
    if (table) {
        printf("| score | train loss before -> after | train acc | test acc "
               "| key to nearest training image |\n");
        printf("|---|---|---|---|---|\n");
    } else {
        printf("digits: %zu train, %zu test, %zu prototypes, %zu epochs, "
               "batch %zu, lr %g (AMSGrad, cosine)\n",
               (size_t)N_TRAIN, n - N_TRAIN, protos, epochs, batch, lr);
    }
    int rc = 0;
    const clock_t t_all = clock();
    for (size_t s = 0; s < n_scores; s++) {
        if (strcmp(which, "all") != 0 && strcmp(which, scores[s].name) != 0)
            continue;
        const clock_t t0 = clock();
        lse_idwnet *net = NULL;
        lse_error err;
        if (lse_idwnet_new(protos, d, 10, scores[s].type, &scores[s].cfg, batch,
                           &net, &err) != LSE_OK) {
            fprintf(stderr, "demo_idwnet: %s\n", err.message);
            rc = 1;
            break;
        }
        lse_idwnet_train_opts o = lse_idwnet_train_opts_default();
        o.epochs = epochs;
        o.lr = lr;
        o.seed = seed;
        lse_idwnet_train_report rep;
        double acc_tr = 0, acc_te = 0;
        lse_status st =
            lse_idwnet_init(net, &xtr.matrix, 0.1, seed, &model_err);
        if (st == LSE_OK)
            st = lse_idwnet_train(net, &xtr.matrix, y, &o, &rep, &model_err);
        if (st == LSE_OK)
            st = lse_idwnet_evaluate(net, &xtr.matrix, y, NULL, &acc_tr,
                                     &model_err);
        if (st == LSE_OK)
            st = lse_idwnet_evaluate(net, &xte.matrix, y + N_TRAIN, NULL,
                                     &acc_te, &model_err);
        if (st != LSE_OK) {
            fprintf(stderr, "demo_idwnet: %s\n", model_err.message);
            lse_idwnet_free(net);
            rc = 1;
            break;
        }
        const double near = mean_nearest(lse_idwnet_keys(net), &xtr.matrix);
        if (table)
            printf("| %s | %.4f -> %.4f | %.1f%% | %.1f%% | %.2f |\n",
                   scores[s].label, rep.loss_before, rep.loss_after,
                   100 * acc_tr, 100 * acc_te, near);
        else
            printf("%-13s loss %.4f -> %.4f  train %.1f%%  test %.1f%%  "
                   "key-image %.2f  (%.1f s)\n",
                   scores[s].name, rep.loss_before, rep.loss_after,
                   100 * acc_tr, 100 * acc_te, near,
                   (double)(clock() - t0) / CLOCKS_PER_SEC);
        lse_idwnet_free(net);
    }
    if (!table && rc == 0)
        printf("total %.1f s; a test image lies %.2f from its nearest "
               "training image\n",
               (double)(clock() - t_all) / CLOCKS_PER_SEC, ref);
    else if (rc == 0)
        printf("\n(a test image lies %.2f from its nearest training image)\n",
               ref);
    gsl_matrix_free(x);
    free(y);
    return rc;
}
