/* Attention as LSE graphs on the bundled data (docs/models/attention.md).
 *
 * 1. Cross attention as a soft nearest-neighbour classifier on the digits:
 *    keys = the first 1000 images (centred, unit norm), values = their
 *    one-hot labels, queries = the other 797 images; the prediction is the
 *    argmax of A V. Checked against textbook attention computed with loops,
 *    and run again with the IDW similarity through the same model.
 * 2. Slot attention on the iris measurements (standardised): 3 slots, EM
 *    with the seed's closed-form W_K, W_Q updates; the energy of every
 *    iteration and the collapse detector's verdict are printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

/* Error detail of the last failing model call (lse_error channel). */
static lse_error model_err;

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

#define N_DIGITS 1797
#define N_KEYS 1000
#define DIM 64

static int load_digits(gsl_matrix *x, int *label)
{
    const char *path = LSE_DATA_DIR "/digits.csv";
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "demo_attention: cannot open %s\n", path);
        return 1;
    }
    char line[4096];
    size_t n = 0;
    if (fgets(line, sizeof line, f) == NULL)
        n = N_DIGITS + 1;
    while (n < N_DIGITS && fgets(line, sizeof line, f) != NULL) {
        char *p = line, *end;
        double mean = 0.0, norm = 0.0;
        for (size_t j = 0; j < DIM; j++, p = end + 1) {
            gsl_matrix_set(x, n, j, strtod(p, &end));
            mean += gsl_matrix_get(x, n, j) / DIM;
        }
        label[n] = (int)strtol(p, NULL, 10);
        for (size_t j = 0; j < DIM; j++) {
            const double v = gsl_matrix_get(x, n, j) - mean;
            gsl_matrix_set(x, n, j, v);
            norm += v * v;
        }
        for (size_t j = 0; j < DIM; j++)
            gsl_matrix_set(x, n, j, gsl_matrix_get(x, n, j) / sqrt(norm));
        n++;
    }
    fclose(f);
    if (n != N_DIGITS) {
        fprintf(stderr, "demo_attention: %s: expected %d rows\n", path,
                N_DIGITS);
        return 1;
    }
    return 0;
}

static int load_iris(gsl_matrix *x)
{
    const char *path = LSE_DATA_DIR "/iris.csv";
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "demo_attention: cannot open %s\n", path);
        return 1;
    }
    char line[256];
    size_t n = 0;
    if (fgets(line, sizeof line, f) == NULL)
        n = 151;
    while (n < 150 && fgets(line, sizeof line, f) != NULL) {
        char *p = line, *end;
        for (size_t j = 0; j < 4; j++, p = end + 1)
            gsl_matrix_set(x, n, j, strtod(p, &end));
        n++;
    }
    fclose(f);
    if (n != 150) {
        fprintf(stderr, "demo_attention: %s: expected 150 rows\n", path);
        return 1;
    }
    for (size_t j = 0; j < 4; j++) { /* standardise each column */
        double m = 0.0, v = 0.0;
        for (size_t i = 0; i < 150; i++)
            m += gsl_matrix_get(x, i, j) / 150.0;
        for (size_t i = 0; i < 150; i++)
            v += pow(gsl_matrix_get(x, i, j) - m, 2) / 150.0;
        for (size_t i = 0; i < 150; i++)
            gsl_matrix_set(x, i, j, (gsl_matrix_get(x, i, j) - m) / sqrt(v));
    }
    return 0;
}

static double accuracy(const gsl_matrix *out, const int *label, size_t first)
{
    size_t right = 0;
    for (size_t i = 0; i < out->size1; i++) {
        size_t best = 0;
        for (size_t c = 1; c < 10; c++)
            if (gsl_matrix_get(out, i, c) > gsl_matrix_get(out, i, best))
                best = c;
        right += (int)best == label[first + i];
    }
    return (double)right / (double)out->size1;
}

/* max |graph - textbook| over the first rows, textbook with loops at
 * temperature beta: softmax(beta q.k/sqrt(d)) V. */
static double textbook_gap(const gsl_matrix *q, const gsl_matrix *k,
                           const gsl_matrix *v, const gsl_matrix *out,
                           double beta, size_t rows)
{
    double gap = 0.0, *s = malloc(k->size1 * sizeof *s);
    if (s == NULL)
        return INFINITY;
    for (size_t i = 0; i < rows; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (size_t j = 0; j < k->size1; j++) {
            double d = 0.0;
            for (size_t t = 0; t < q->size2; t++)
                d += gsl_matrix_get(q, i, t) * gsl_matrix_get(k, j, t);
            s[j] = beta * d / sqrt((double)q->size2);
            mx = fmax(mx, s[j]);
        }
        for (size_t j = 0; j < k->size1; j++) {
            s[j] = exp(s[j] - mx);
            sum += s[j];
        }
        for (size_t c = 0; c < v->size2; c++) {
            double o = 0.0;
            for (size_t j = 0; j < k->size1; j++)
                o += s[j] / sum * gsl_matrix_get(v, j, c);
            gap = fmax(gap, fabs(o - gsl_matrix_get(out, i, c)));
        }
    }
    free(s);
    return gap;
}

static int cross_demo(void)
{
    gsl_matrix *x = gsl_matrix_alloc(N_DIGITS, DIM);
    gsl_matrix *v = gsl_matrix_calloc(N_KEYS, 10);
    gsl_matrix *out = gsl_matrix_alloc(N_DIGITS - N_KEYS, 10);
    int *label = malloc(N_DIGITS * sizeof *label);
    lse_attention *a = NULL;
    int rc = 1;
    if (x == NULL || v == NULL || out == NULL || label == NULL ||
        load_digits(x, label) != 0)
        goto done;
    for (size_t j = 0; j < N_KEYS; j++)
        gsl_matrix_set(v, j, (size_t)label[j], 1.0);
    gsl_matrix_view keys = gsl_matrix_submatrix(x, 0, 0, N_KEYS, DIM);
    gsl_matrix_view queries =
        gsl_matrix_submatrix(x, N_KEYS, 0, N_DIGITS - N_KEYS, DIM);
    lse_attention_opts o = lse_attention_opts_default();
    o.beta = 200.0; /* softmax(25 cos(q, k)) */
    lse_error err;
    if (lse_attention_cross_new(&queries.matrix, &keys.matrix, &o, &a, &err) !=
        LSE_OK) {
        fprintf(stderr, "demo_attention: %s\n", err.message);
        goto done;
    }
    if (lse_attention_step(a, v, out, &model_err) != LSE_OK) {
        fprintf(stderr, "demo_attention: %s\n", model_err.message);
        goto done;
    }
    printf("cross attention, %d digit keys -> %d queries, values = one-hot "
           "labels\n",
           N_KEYS, N_DIGITS - N_KEYS);
    printf("  scaled-dot, beta %g: accuracy of argmax(A V) %.4f, max |graph - "
           "textbook| on 50 rows %.1e\n",
           o.beta, accuracy(out, label, N_KEYS),
           textbook_gap(&queries.matrix, &keys.matrix, v, out, o.beta, 50));
    lse_attention_free(a);
    a = NULL;
    const lse_dist_config idw = {.p = 2.0, .eps = 1e-3, .s = 1.0};
    o.sim = lse_sim_idw;
    o.config = &idw;
    o.beta = 10.0; /* A ~ (eps + |q - k|^2)^-10 */
    if (lse_attention_cross_new(&queries.matrix, &keys.matrix, &o, &a, &err) !=
            LSE_OK ||
        lse_attention_step(a, v, out, &model_err) != LSE_OK) {
        fprintf(stderr, "demo_attention: %s%s\n", err.message,
                model_err.message);
        goto done;
    }
    printf("  idw (p = 2), beta %g: accuracy %.4f\n", o.beta,
           accuracy(out, label, N_KEYS));
    rc = 0;
done:
    lse_attention_free(a);
    gsl_matrix_free(x);
    gsl_matrix_free(v);
    gsl_matrix_free(out);
    free(label);
    return rc;
}

static int print_iteration(const lse_solver *s, void *user)
{
    const lse_slot_report *r = lse_attention_slot_report(user);
    printf("  iteration %2zu  energy %12.4f  ||W_K|| ||W_Q|| %9.4f  "
           "(x %.3f)\n",
           lse_solver_n_iter(s), lse_solver_energy(s), r->norm, r->last_ratio);
    return 0;
}

static void print_log(lse_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == LSE_LOG_WARN)
        printf("  warning: %s\n", msg);
}

static int slot_demo(void)
{
    gsl_matrix *x = gsl_matrix_alloc(150, 4), *mu = gsl_matrix_alloc(3, 2);
    gsl_matrix *wk = gsl_matrix_calloc(2, 4), *wq = gsl_matrix_alloc(2, 2);
    lse_attention *a = NULL;
    int rc = 1;
    if (x == NULL || mu == NULL || wk == NULL || wq == NULL ||
        load_iris(x) != 0)
        goto done;
    /* The M-step inverts P = sum A mu mu' (d_s x d_s), so the S = 3 slots
     * must span their space: d_s = 2. W_K starts as the projection on the
     * petal measurements (columns 2, 3), W_Q = I, and the slots at the
     * petal measurements of rows 0, 50, 100 (one flower of each species). */
    gsl_matrix_set(wk, 0, 2, 1.0);
    gsl_matrix_set(wk, 1, 3, 1.0);
    gsl_matrix_set_identity(wq);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            gsl_matrix_set(mu, i, j, gsl_matrix_get(x, 50 * i, 2 + j));
    lse_attention_opts o = lse_attention_opts_default();
    o.bound = 50.0; /* ~ tokens per slot: slots stay at the data's scale */
    lse_error err;
    if (lse_attention_slot_new(x, mu, wk, wq, &o, &a, &err) != LSE_OK) {
        fprintf(stderr, "demo_attention: %s\n", err.message);
        goto done;
    }
    printf("slot attention on iris (150 tokens in 4-d, 3 slots in 2-d, "
           "lambda %g)\n",
           lse_attention_bound(a));
    lse_slot_fit_opts f = lse_slot_fit_opts_default();
    f.max_iter = 30;
    f.estep_steps = 2;
    f.cb = print_iteration;
    f.user = a;
    lse_slot_report rep;
    lse_set_log_handler(print_log, NULL);
    const lse_status st = lse_attention_slot_fit(a, &f, &rep, &model_err);
    lse_set_log_handler(NULL, NULL);
    printf("  status: %s%s%s\n", lse_strerror(st), st != LSE_OK ? ": " : "",
           st != LSE_OK ? model_err.message : "");
    printf("  %zu iterations, energy rose in %zu of them; %zu M-steps shrank "
           "W by more than half; collapsed: %s",
           rep.n_iter, rep.n_increase, rep.n_shrink,
           rep.collapsed ? "yes" : "no");
    if (rep.collapsed)
        printf(" (at M-step %zu)", rep.collapse_mstep);
    printf("; ||W_K|| ||W_Q||: %.4f -> %.4f (largest one-step factor %.3f)\n",
           rep.norm_initial, rep.norm, rep.max_ratio);
    rc = 0;
done:
    lse_attention_free(a);
    gsl_matrix_free(x);
    gsl_matrix_free(mu);
    gsl_matrix_free(wk);
    gsl_matrix_free(wq);
    return rc;
}

int main(void)
{
    if (cross_demo() != 0)
        return 1;
    return slot_demo();
}
