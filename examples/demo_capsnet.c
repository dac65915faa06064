/* Two-level capsules with energy-based routing on the bundled digits
 * (docs/models/capsules.md), against a nearest-prototype classifier with
 * the same number of parameters.
 *
 *   demo_capsnet [--epochs E] [--lr LR] [--seed S] [DIGITS.csv]
 *
 * Children: the 16 non-overlapping 2x2 patches of each 8x8 image (pixel
 * counts / 16), N = 16 capsules of dimension 4. Parents: one capsule of
 * dimension 4 per class. W: 16 x 10 matrices 4 x 4 = 2560 numbers. The
 * baseline keeps 4 prototypes per class (k-means++ and Lloyd on that class's
 * training images), 40 x 64 = 2560 numbers, and labels a test image by its
 * nearest prototype. Train/test split: a seeded permutation, 1200 / 597. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_permutation.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

#define N_IMG 1797
#define N_TRAIN 1200
#define DIM 64
#define N_CAPS 16
#define D_CAPS 4
#define N_CLASS 10
#define D_PARENT 4
#define PROTO_PER_CLASS 4
#define BATCH 50

static int load(const char *path, gsl_matrix *x, size_t *y)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "demo_capsnet: cannot open %s\n", path);
        return 1;
    }
    char line[4096];
    if (fgets(line, sizeof line, f) == NULL) {
        fclose(f);
        fprintf(stderr, "demo_capsnet: %s is empty\n", path);
        return 1;
    }
    size_t n = 0;
    while (n < N_IMG && fgets(line, sizeof line, f) != NULL) {
        char *p = line, *end;
        for (size_t j = 0; j < DIM; j++) {
            gsl_matrix_set(x, n, j, strtod(p, &end) / 16.0);
            if (end == p || *end != ',') {
                fclose(f);
                fprintf(stderr, "%s:%zu:%zu: expected a number and a comma\n",
                        path, n + 2, j + 1);
                return 1;
            }
            p = end + 1;
        }
        y[n] = (size_t)strtoul(p, &end, 10);
        n++;
    }
    fclose(f);
    if (n != N_IMG) {
        fprintf(stderr, "demo_capsnet: %s has %zu images, expected %d\n",
                path, n, N_IMG);
        return 1;
    }
    return 0;
}

/* image row -> 16 capsule rows of 4 (2x2 patches) */
static void to_capsules(const gsl_matrix *x, size_t row, gsl_matrix *caps,
                        size_t first)
{
    for (size_t pr = 0; pr < 4; pr++)
        for (size_t pc = 0; pc < 4; pc++)
            for (size_t k = 0; k < 4; k++) {
                const size_t r = 2 * pr + k / 2, col = 2 * pc + k % 2;
                gsl_matrix_set(caps, first + pr * 4 + pc, k,
                               gsl_matrix_get(x, row, r * 8 + col));
            }
}

static double prototype_accuracy(const gsl_matrix *x, const size_t *y,
                                 const size_t *perm, unsigned long seed)
{
    gsl_matrix *protos = gsl_matrix_alloc(N_CLASS * PROTO_PER_CLASS, DIM);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    for (size_t k = 0; k < N_CLASS; k++) {
        size_t n = 0;
        for (size_t t = 0; t < N_TRAIN; t++)
            n += y[perm[t]] == k;
        gsl_matrix *xk = gsl_matrix_alloc(n, DIM);
        size_t r = 0;
        for (size_t t = 0; t < N_TRAIN; t++)
            if (y[perm[t]] == k) {
                gsl_vector_const_view src = gsl_matrix_const_row(x, perm[t]);
                gsl_matrix_set_row(xk, r++, &src.vector);
            }
        gsl_matrix_view ck = gsl_matrix_submatrix(protos, k * PROTO_PER_CLASS,
                                                  0, PROTO_PER_CLASS, DIM);
        gsl_vector *d2 = gsl_vector_alloc(n);
        size_t *lab = malloc(n * sizeof *lab);
        gsl_vector *sums = gsl_vector_alloc(PROTO_PER_CLASS);
        lse_error err;
        if (lse_kmeans_seed(xk, NULL, rng, &ck.matrix, d2, 0, NULL, &err) !=
                LSE_OK ||
            lse_kmeans_lloyd(xk, NULL, &ck.matrix, 100, lab, sums, NULL, 0,
                             NULL, &err) != LSE_OK)
            fprintf(stderr, "demo_capsnet: k-means: %s\n", err.message);
        free(lab);
        gsl_vector_free(sums);
        gsl_vector_free(d2);
        gsl_matrix_free(xk);
    }
    size_t right = 0;
    for (size_t t = N_TRAIN; t < N_IMG; t++) {
        gsl_matrix_const_view one = gsl_matrix_const_submatrix(x, perm[t], 0,
                                                               1, DIM);
        size_t best = 0;
        double bd = 1e300;
        for (size_t p = 0; p < protos->size1; p++) {
            const double d = lse_kmeans_dist2(&one.matrix, 0, protos, p);
            if (d < bd) {
                bd = d;
                best = p;
            }
        }
        right += best / PROTO_PER_CLASS == y[perm[t]];
    }
    gsl_rng_free(rng);
    gsl_matrix_free(protos);
    return (double)right / (N_IMG - N_TRAIN);
}

int main(int argc, char **argv)
{
    size_t epochs = 15;
    double lr = 0.03;
    unsigned long seed = 7;
    const char *path = LSE_DATA_DIR "/digits.csv";
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--epochs") == 0 && a + 1 < argc)
            epochs = strtoul(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "--lr") == 0 && a + 1 < argc)
            lr = strtod(argv[++a], NULL);
        else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc)
            seed = strtoul(argv[++a], NULL, 10);
        else if (argv[a][0] != '-')
            path = argv[a];
        else {
            fprintf(stderr, "demo_capsnet: unknown option '%s'; usage: "
                            "demo_capsnet [--epochs E] [--lr LR] [--seed S] [CSV]\n",
                    argv[a]);
            return 2;
        }
    }
    gsl_matrix *x = gsl_matrix_alloc(N_IMG, DIM);
    size_t *y = malloc(N_IMG * sizeof *y);
    if (load(path, x, y) != 0)
        return 1;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    size_t *perm = malloc(N_IMG * sizeof *perm);
    for (size_t i = 0; i < N_IMG; i++)
        perm[i] = i;
    gsl_ran_shuffle(rng, perm, N_IMG, sizeof *perm);

    lse_capsnet_opts o = lse_capsnet_opts_default();
    o.n_child = N_CAPS;
    o.d_child = D_CAPS;
    o.n_parent = N_CLASS;
    o.d_parent = D_PARENT;
    o.batch = BATCH;
    o.seed = seed;
    lse_capsnet *net = NULL;
    lse_error err;
    if (lse_capsnet_new(&o, &net, &err) != LSE_OK) {
        fprintf(stderr, "demo_capsnet: %s\n", err.message);
        return 1;
    }
    lse_optim_opts oo = lse_optim_opts_default();
    oo.lr = lr;
    if (lse_capsnet_set_optim(net, &oo, &model_err) != LSE_OK) {
        fprintf(stderr, "demo_capsnet: --lr %g: %s\n", lr, model_err.message);
        return 2;
    }
    printf("capsules: %d children of %d -> %d parents of %d, %zu parameters\n",
           N_CAPS, D_CAPS, N_CLASS, D_PARENT, lse_capsnet_n_params(net));

    gsl_matrix *batch = gsl_matrix_alloc(BATCH * N_CAPS, D_CAPS);
    size_t lab[BATCH];
    size_t *order = malloc(N_TRAIN * sizeof *order);
    for (size_t t = 0; t < N_TRAIN; t++)
        order[t] = perm[t];
    size_t rises = 0, steps = 0;
    for (size_t e = 0; e < epochs; e++) {
        gsl_ran_shuffle(rng, order, N_TRAIN, sizeof *order);
        double loss_sum = 0.0;
        size_t nb = 0;
        for (size_t first = 0; first + BATCH <= N_TRAIN; first += BATCH) {
            for (size_t b = 0; b < BATCH; b++) {
                to_capsules(x, order[first + b], batch, b * N_CAPS);
                lab[b] = y[order[first + b]];
            }
            double loss;
            if (lse_capsnet_train_step(net, batch, lab, &loss, &model_err) !=
                LSE_OK) {
                fprintf(stderr, "demo_capsnet: %s\n", model_err.message);
                return 1;
            }
            loss_sum += loss;
            nb++;
        }
        if (e == 0 || (e + 1) % 5 == 0 || e + 1 == epochs)
            printf("epoch %2zu  readout loss %.4f\n", e + 1, loss_sum / nb);
    }
    /* routing on the test set: energy non-increasing? */
    const size_t n_test = N_IMG - N_TRAIN;
    gsl_matrix *test = gsl_matrix_alloc(n_test * N_CAPS, D_CAPS);
    for (size_t t = 0; t < n_test; t++)
        to_capsules(x, perm[N_TRAIN + t], test, t * N_CAPS);
    for (size_t first = 0; first + BATCH <= n_test; first += BATCH) {
        gsl_matrix_const_view v = gsl_matrix_const_submatrix(
            test, first * N_CAPS, 0, BATCH * N_CAPS, D_CAPS);
        lse_capsnet_route_info info;
        gsl_matrix_memcpy(batch, &v.matrix);
        if (lse_capsnet_route(net, batch, NULL, &info, &model_err) != LSE_OK) {
            fprintf(stderr, "demo_capsnet: %s\n", model_err.message);
            return 1;
        }
        rises += info.n_increase;
        steps += info.n_iter;
    }
    size_t *pred = malloc(n_test * sizeof *pred);
    if (lse_capsnet_predict(net, test, n_test, pred, &model_err) != LSE_OK) {
        fprintf(stderr, "demo_capsnet: %s\n", model_err.message);
        return 1;
    }
    size_t right = 0;
    for (size_t t = 0; t < n_test; t++)
        right += pred[t] == y[perm[N_TRAIN + t]];
    printf("routing on the test set: %zu gradient steps, energy rises %zu\n",
           steps, rises);
    printf("test accuracy (%zu images): capsules %.3f\n", n_test,
           (double)right / n_test);
    printf("nearest prototype, %d prototypes x %d = %d parameters: %.3f\n",
           N_CLASS * PROTO_PER_CLASS, DIM, N_CLASS * PROTO_PER_CLASS * DIM,
           prototype_accuracy(x, y, perm, seed));
    free(pred);
    free(order);
    free(perm);
    free(y);
    gsl_matrix_free(test);
    gsl_matrix_free(batch);
    gsl_matrix_free(x);
    gsl_rng_free(rng);
    lse_capsnet_free(net);
    return 0;
}
