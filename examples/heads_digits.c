/* heads_digits: masked-pixel completion and classification of the bundled
 * 8x8 digits with a learned-projection multi-head attention model
 * (docs/learning.md section 7).
 *
 * The bottom half of every query image (rows 4-7, 32 pixels) is hidden. A
 * heads term (lib/heads.c) attends from the visible top half of the query
 * (32 values) to a bank of 500 complete training images (64 values):
 *
 *   S_h(c, p) = (W_c^h top_c) . (W_p^h image_p) / sqrt(k),  h = 1..H
 *   R_c = (1/H) sum_h softmax_p(S_h(c, .)) V_p,  V_p = [bottom_p | onehot_p]
 *
 * so each query reads out a completion of its hidden half and class
 * scores. W_c, W_p are learned with Adam (lse_optim) on the squared error
 * of R against [hidden half | onehot] (lse_loss_recon) over shuffled
 * mini-batches (lse_batcher) of the other 937 training images. Test: every
 * 5th image of data/digits.csv (360). Baselines: the mean image, the
 * nearest class mean and the nearest neighbour of the top half (over all
 * 1437 training images), and the attention model before training.
 *
 * Usage: heads_digits [DIGITS.csv] [STEPS]   (default data/digits.csv, 400)
 * Exits 1 unless the trained 4-head model beats the nearest class mean's
 * accuracy by 5 points and the mean image's completion error by 20%. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <lsegraph/lsegraph.h>

#include "digits_csv.h"

#define LR 0.03

enum { NPIX = 64, HALF = 32, NCLASS = 10, NBANK = 500, BATCH = 64,
       NV = HALF + NCLASS };

typedef struct data {
    gsl_matrix *train, *test;  /* (n, 64) pixels / 16 */
    size_t *ytrain, *ytest;
} data;

typedef struct result {
    double rmse; /* of the hidden pixels, in grey levels (0..16) */
    double acc;  /* test accuracy */
} result;

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "heads_digits: %s: %s\n", what, msg);
    return 1;
}

/* a fixed pseudo-random number in [-1, 1) from an integer (splitmix64) */
static double hash11(unsigned long long i)
{
    unsigned long long z = i * 0x9e3779b97f4a7c15ULL + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}

static int load(const char *path, data *d)
{
    lse_error err;
    const char *why = NULL;
    gsl_matrix *m = digits_csv_read(path, NPIX, &err, &why);
    if (m == NULL)
        return die(path, why);
    const size_t n = m->size1, nt = (n + 4) / 5;
    d->train = gsl_matrix_alloc(n - nt, NPIX);
    d->test = gsl_matrix_alloc(nt, NPIX);
    d->ytrain = malloc((n - nt) * sizeof *d->ytrain);
    d->ytest = malloc(nt * sizeof *d->ytest);
    if (d->train == NULL || d->test == NULL || d->ytrain == NULL ||
        d->ytest == NULL) {
        gsl_matrix_free(m);
        return die(path, "out of memory");
    }
    for (size_t i = 0, a = 0, b = 0; i < n; i++) {
        const int test = i % 5 == 0;
        gsl_matrix *dst = test ? d->test : d->train;
        const size_t r = test ? b : a;
        for (size_t j = 0; j < NPIX; j++)
            gsl_matrix_set(dst, r, j, gsl_matrix_get(m, i, j) / 16.0);
        const double y = gsl_matrix_get(m, i, NPIX);
        if (!(y >= 0 && y < NCLASS) || y != floor(y)) {
            gsl_matrix_free(m);
            return die(path, "a label is not 0..9");
        }
        (test ? d->ytest : d->ytrain)[r] = (size_t)y;
        if (test)
            b++;
        else
            a++;
    }
    gsl_matrix_free(m);
    return 0;
}

/* Score predictions: completion (n, 32) in [0, 1] units, classes. */
static result score(const data *d, const gsl_matrix *bottom,
                    const size_t *pred)
{
    const size_t n = d->test->size1;
    double se = 0.0;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < HALF; j++) {
            const double e = 16.0 * (gsl_matrix_get(bottom, i, j) -
                                     gsl_matrix_get(d->test, i, HALF + j));
            se += e * e;
        }
        ok += pred[i] == d->ytest[i];
    }
    result r = {sqrt(se / (double)(n * HALF)), (double)ok / (double)n};
    return r;
}

static double dist_top(const gsl_matrix *a, size_t i, const gsl_matrix *b,
                       size_t j)
{
    double s = 0.0;
    for (size_t k = 0; k < HALF; k++) {
        const double e = gsl_matrix_get(a, i, k) - gsl_matrix_get(b, j, k);
        s += e * e;
    }
    return s;
}

/* Mean image, nearest class mean and nearest neighbour of the top half. */
static void baselines(const data *d, result out[3])
{
    const size_t n = d->test->size1, m = d->train->size1;
    gsl_matrix *mean = gsl_matrix_calloc(NCLASS + 1, NPIX); /* row 10: all */
    gsl_matrix *bottom = gsl_matrix_alloc(n, HALF);
    size_t count[NCLASS + 1] = {0};
    size_t *pred = calloc(n, sizeof *pred);
    if (mean == NULL || bottom == NULL || pred == NULL) {
        fprintf(stderr, "heads_digits: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < m; i++) {
        count[d->ytrain[i]]++;
        count[NCLASS]++;
        for (size_t j = 0; j < NPIX; j++) {
            const double v = gsl_matrix_get(d->train, i, j);
            *gsl_matrix_ptr(mean, d->ytrain[i], j) += v;
            *gsl_matrix_ptr(mean, NCLASS, j) += v;
        }
    }
    size_t major = 0;
    for (size_t c = 0; c <= NCLASS; c++) {
        for (size_t j = 0; j < NPIX; j++)
            *gsl_matrix_ptr(mean, c, j) /= (double)count[c];
        if (c < NCLASS && count[c] > count[major])
            major = c;
    }
    for (size_t i = 0; i < n; i++) { /* mean image, majority class */
        for (size_t j = 0; j < HALF; j++)
            gsl_matrix_set(bottom, i, j, gsl_matrix_get(mean, NCLASS, HALF + j));
        pred[i] = major;
    }
    out[0] = score(d, bottom, pred);
    for (size_t i = 0; i < n; i++) { /* nearest class mean */
        size_t best = 0;
        for (size_t c = 1; c < NCLASS; c++)
            if (dist_top(d->test, i, mean, c) < dist_top(d->test, i, mean, best))
                best = c;
        for (size_t j = 0; j < HALF; j++)
            gsl_matrix_set(bottom, i, j, gsl_matrix_get(mean, best, HALF + j));
        pred[i] = best;
    }
    out[1] = score(d, bottom, pred);
    for (size_t i = 0; i < n; i++) { /* nearest neighbour */
        size_t best = 0;
        double bd = dist_top(d->test, i, d->train, 0);
        for (size_t k = 1; k < m; k++) {
            const double dk = dist_top(d->test, i, d->train, k);
            if (dk < bd) {
                bd = dk;
                best = k;
            }
        }
        for (size_t j = 0; j < HALF; j++)
            gsl_matrix_set(bottom, i, j, gsl_matrix_get(d->train, best, HALF + j));
        pred[i] = d->ytrain[best];
    }
    out[2] = score(d, bottom, pred);
    free(pred);
    gsl_matrix_free(bottom);
    gsl_matrix_free(mean);
}

typedef struct model {
    const char *name;
    size_t H, k;
    unsigned share;
} model;

/* Build, train for @p steps Adam steps and score one attention model. */
static int run_model(const data *d, const model *md, size_t steps,
                     result *before, result *after, double *loss0,
                     double *loss1)
{
    const size_t nq = d->train->size1 - NBANK, nt = d->test->size1;
    const size_t H = md->H, k = md->k;
    const size_t hp = (md->share & LSE_HEADS_SHARE_PARENT) ? 1 : H;
    lse_graph *g = lse_graph_new();
    lse_node *batch, *test, *bank, *vals, *wc, *wp;
    lse_status st = g != NULL ? LSE_OK : LSE_ENOMEM;
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "batch", BATCH, HALF, LSE_NODE_CLAMPED, &batch);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "test", nt, HALF, LSE_NODE_CLAMPED, &test);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "bank", NBANK, NPIX, LSE_NODE_CLAMPED, &bank);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "values", NBANK, NV, LSE_NODE_CLAMPED, &vals);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "W_c", H * k, HALF, LSE_NODE_PARAM, &wc);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "W_p", hp * k, NPIX, LSE_NODE_PARAM, &wp);
    if (st != LSE_OK) {
        lse_graph_free(g);
        return die(md->name, "cannot build the graph");
    }
    /* bank: the first 500 training images; queries: the rest */
    for (size_t i = 0; i < NBANK; i++) {
        for (size_t j = 0; j < NPIX; j++)
            gsl_matrix_set(lse_node_value(bank), i, j,
                           gsl_matrix_get(d->train, i, j));
        for (size_t j = 0; j < HALF; j++)
            gsl_matrix_set(lse_node_value(vals), i, j,
                           gsl_matrix_get(d->train, i, HALF + j));
        for (size_t c = 0; c < NCLASS; c++)
            gsl_matrix_set(lse_node_value(vals), i, HALF + c,
                           d->ytrain[i] == c ? 1.0 : 0.0);
    }
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < HALF; j++)
            gsl_matrix_set(lse_node_value(test), i, j,
                           gsl_matrix_get(d->test, i, j));
    /* seeded initial projections, entries uniform in +-1/sqrt(d) */
    gsl_matrix *w[2] = {lse_node_value(wc), lse_node_value(wp)};
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < w[s]->size1; i++)
            for (size_t j = 0; j < w[s]->size2; j++)
                gsl_matrix_set(w[s], i, j,
                               hash11((s * 1000 + i) * 1000 + j) /
                                   sqrt((double)w[s]->size2));
    lse_heads_spec sp = lse_heads_spec_default();
    sp.child = lse_view_all(batch);
    sp.parent = lse_view_all(bank);
    sp.n_heads = H;
    sp.share = md->share;
    sp.base = lse_sim_scaled_dot;
    sp.w_child = wc;
    sp.w_parent = wp;
    lse_term *tr, *te;
    st = lse_graph_add_heads(g, "attend_batch", &sp, &tr);
    sp.child = lse_view_all(test);
    if (st == LSE_OK)
        st = lse_graph_add_heads(g, "attend_test", &sp, &te);
    if (st != LSE_OK) {
        const int rc = die(md->name, lse_graph_errmsg(g));
        lse_graph_free(g);
        return rc;
    }
    lse_term_set_enabled(te, 0); /* scored through lse_heads_attention */

    /* queries: the training images after the bank; targets [bottom | y] */
    gsl_matrix *qtop = gsl_matrix_alloc(nq, HALF);
    gsl_matrix *qtarget = gsl_matrix_alloc(nq, NV);
    gsl_matrix *target = gsl_matrix_alloc(BATCH, NV);
    gsl_matrix *a = gsl_matrix_alloc(nt, NBANK);
    gsl_matrix *r = gsl_matrix_alloc(nt, NV);
    size_t *pred = malloc(nt * sizeof *pred);
    lse_batcher *bt = NULL;
    lse_error err;
    lse_optim_opts oo = lse_optim_opts_default(); /* Adam */
    oo.lr = LR;
    lse_optim *opt = lse_optim_new(g, &oo);
    int rc = 0;
    if (qtop == NULL || qtarget == NULL || target == NULL || a == NULL ||
        r == NULL || pred == NULL || opt == NULL ||
        lse_batcher_new(nq, BATCH, 13, 1, &bt, &err) != LSE_OK) {
        rc = die(md->name, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nq; i++) {
        for (size_t j = 0; j < HALF; j++) {
            gsl_matrix_set(qtop, i, j, gsl_matrix_get(d->train, NBANK + i, j));
            gsl_matrix_set(qtarget, i, j,
                           gsl_matrix_get(d->train, NBANK + i, HALF + j));
        }
        for (size_t c = 0; c < NCLASS; c++)
            gsl_matrix_set(qtarget, i, HALF + c,
                           d->ytrain[NBANK + i] == c ? 1.0 : 0.0);
    }
    const lse_view values = lse_view_all(vals);
    for (size_t pass = 0; pass < 2; pass++) {
        /* score on the test images: R = (1/H) sum_h A_h V */
        gsl_matrix_set_zero(r);
        for (size_t h = 0; h < H && st == LSE_OK; h++) {
            st = lse_heads_attention(te, h, a);
            if (st == LSE_OK)
                gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0 / (double)H, a,
                               lse_node_value(vals), 1.0, r);
        }
        if (st != LSE_OK) {
            rc = die(md->name, lse_graph_errmsg(g));
            goto done;
        }
        for (size_t i = 0; i < nt; i++) {
            size_t best = 0;
            for (size_t c = 1; c < NCLASS; c++)
                if (gsl_matrix_get(r, i, HALF + c) >
                    gsl_matrix_get(r, i, HALF + best))
                    best = c;
            pred[i] = best;
        }
        gsl_matrix_view bottom = gsl_matrix_submatrix(r, 0, 0, nt, HALF);
        *(pass == 0 ? before : after) = score(d, &bottom.matrix, pred);
        if (pass == 1)
            break;
        double l = 0.0, first = 0.0, last = 0.0;
        for (size_t s = 0; s < steps && st == LSE_OK; s++) {
            lse_batcher_next(bt);
            lse_batcher_gather(bt, qtop, lse_node_value(batch));
            lse_batcher_gather(bt, qtarget, target);
            st = lse_graph_zero_grad(g);
            if (st == LSE_OK)
                st = lse_loss_recon(tr, values, target, NULL, 1.0 / BATCH, 1,
                                    &l);
            if (st == LSE_OK)
                st = lse_optim_step(opt);
            if (s < 20)
                first += l / 20.0;
            if (s + 20 >= steps)
                last += l / 20.0;
        }
        if (st != LSE_OK) {
            rc = die(md->name, lse_graph_errmsg(g));
            goto done;
        }
        *loss0 = first;
        *loss1 = last;
    }
done:
    lse_batcher_free(bt);
    lse_optim_free(opt);
    free(pred);
    gsl_matrix_free(r);
    gsl_matrix_free(a);
    gsl_matrix_free(target);
    gsl_matrix_free(qtarget);
    gsl_matrix_free(qtop);
    lse_graph_free(g);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "data/digits.csv";
    size_t steps = 400;
    if (argc > 2) {
        char *end;
        const unsigned long v = strtoul(argv[2], &end, 10);
        if (*end != '\0' || v < 20 || v > 100000)
            return die("STEPS", "expected a whole number in 20..100000");
        steps = v;
    }
    data d = {0};
    if (load(path, &d) != 0)
        return 1;
    result base[3];
    baselines(&d, base);
    printf("digits: %zu training images (bank %d, queries %zu), %zu test; "
           "bottom half hidden\n",
           d.train->size1, NBANK, d.train->size1 - NBANK, d.test->size1);
    printf("Adam lr %g, %zu steps of %d queries, seed 13\n\n", LR, steps, BATCH);
    printf("| model | hidden-pixel RMSE (grey levels) | test accuracy |\n");
    printf("|---|---|---|\n");
    static const char *const bname[3] = {
        "mean image, majority class", "nearest class mean (top half)",
        "nearest neighbour (top half, 1437 images)"};
    for (int i = 0; i < 3; i++)
        printf("| %s | %.3f | %.1f%% |\n", bname[i], base[i].rmse,
               100.0 * base[i].acc);
    static const model models[] = {
        {"1 head, k = 32", 1, 32, 0},
        {"4 heads, k = 8", 4, 8, 0},
        {"4 heads, k = 8, shared keys", 4, 8, LSE_HEADS_SHARE_PARENT},
    };
    result four = {0, 0};
    double losses[3][2];
    for (size_t m = 0; m < 3; m++) {
        result before, after;
        if (run_model(&d, &models[m], steps, &before, &after, &losses[m][0],
                      &losses[m][1]) != 0)
            return 1;
        if (m == 1) {
            four = after;
            printf("| attention, %s, untrained | %.3f | %.1f%% |\n",
                   models[m].name, before.rmse, 100.0 * before.acc);
        }
        printf("| attention, %s, trained | %.3f | %.1f%% |\n", models[m].name,
               after.rmse, 100.0 * after.acc);
    }
    printf("\ntraining loss (mean of the first / last 20 steps):");
    for (size_t m = 0; m < 3; m++)
        printf(" %.4f -> %.4f%s", losses[m][0], losses[m][1], m < 2 ? "," : "\n");
    const int ok = four.acc >= base[1].acc + 0.05 &&
                   four.rmse <= 0.8 * base[0].rmse;
    printf("4 heads beat the nearest class mean by %.1f points, the mean "
           "image's error by %.0f%%: %s\n",
           100.0 * (four.acc - base[1].acc),
           100.0 * (1.0 - four.rmse / base[0].rmse), ok ? "yes" : "NO");
    gsl_matrix_free(d.train);
    gsl_matrix_free(d.test);
    free(d.ytrain);
    free(d.ytest);
    return ok ? 0 : 1;
}
