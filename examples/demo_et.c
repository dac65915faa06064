/* demo_et: masked-patch completion of the bundled 8x8 digits by an Energy
 * Transformer block (models/etransformer.c, docs/models/etransformer.md).
 *
 * Tokens are the 16 patches of 2x2 pixels. A 4x4 block of pixels (2x2
 * patches, at one of 9 patch-aligned places) is hidden; the block embeds the
 * visible patches, gives the hidden ones a learned mask token, descends its
 * energy (multi-head attention + Hopfield memory over layer-normalized
 * tokens) for T steps and decodes the hidden patches. Every parameter is
 * trained by Adam (lse_optim) on the squared error of the hidden pixels,
 * back-propagated through the unrolled descent. Test: every 5th image of
 * data/digits.csv (360). Baselines: the mean training image, and the
 * nearest training image (1437) on the visible pixels.
 *
 * Usage: demo_et [DIGITS.csv] [STEPS]   (default the bundled file, 2000)
 * Exits 1 unless the trained block beats the mean image's error and its
 * energy never rises along the descent of the test images. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lsegraph/lsegraph.h>

#include "digits_csv.h"

#ifndef LSE_DATA_DIR
#define LSE_DATA_DIR "data"
#endif

enum { NPIX = 64, SIDE = 8 };

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "demo_et: %s: %s\n", what, msg);
    return 1;
}

/* splitmix64 of an integer */
static unsigned long long mix(unsigned long long i)
{
    unsigned long long z = i * 0x9e3779b97f4a7c15ULL + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Training images and test images, pixels / 16 (every 5th row is a test). */
static int load(const char *path, gsl_matrix **train, gsl_matrix **test)
{
    lse_error err;
    const char *why = NULL;
    gsl_matrix *m = digits_csv_read(path, NPIX, &err, &why);
    if (m == NULL)
        return die(path, why);
    const size_t n = m->size1, nt = (n + 4) / 5;
    *train = gsl_matrix_alloc(n - nt, NPIX);
    *test = gsl_matrix_alloc(nt, NPIX);
    for (size_t i = 0, a = 0, b = 0; i < n; i++) {
        gsl_matrix *dst = i % 5 == 0 ? *test : *train;
        const size_t r = i % 5 == 0 ? b++ : a++;
        for (size_t j = 0; j < NPIX; j++)
            gsl_matrix_set(dst, r, j, gsl_matrix_get(m, i, j) / 16.0);
    }
    gsl_matrix_free(m);
    return 0;
}

/* The hidden 2x2 patches (of 4x4) of image key: place mix(key) mod 9. */
static void set_mask(gsl_matrix *hidden, size_t b, unsigned long long key)
{
    const size_t place = (size_t)(mix(key) % 9), r0 = place / 3,
                 c0 = place % 3;
    for (size_t t = 0; t < 16; t++) {
        const size_t r = t / 4, c = t % 4;
        gsl_matrix_set(hidden, b, t,
                       r >= r0 && r < r0 + 2 && c >= c0 && c < c0 + 2);
    }
}

static int is_hidden_pixel(const gsl_matrix *hidden, size_t b, size_t p)
{
    return gsl_matrix_get(hidden, b, (p / SIDE / 2) * 4 + (p % SIDE) / 2) != 0;
}

typedef struct eval {
    double rmse_et, rmse_mean, rmse_nn; /* grey levels (0..16) */
    double max_rise;                     /* largest E_{t+1} - E_t */
    double e0, eT;                       /* energy of the first batch */
} eval;

/* Complete every test image (batches of B, the test masks keyed by the
 * image index) and score it with the baselines. */
static lse_status evaluate(lse_et *et, const gsl_matrix *train,
                           const gsl_matrix *test, eval *ev, lse_error *err)
{
    const size_t B = lse_et_config_of(et)->batch, T = lse_et_config_of(et)->steps;
    gsl_matrix *img = gsl_matrix_alloc(B, NPIX), *hid = gsl_matrix_alloc(B, 16),
               *out = gsl_matrix_alloc(B, NPIX);
    gsl_vector *mean = gsl_vector_calloc(NPIX), *trace = gsl_vector_alloc(T + 1);
    for (size_t i = 0; i < train->size1; i++)
        for (size_t p = 0; p < NPIX; p++)
            *gsl_vector_ptr(mean, p) += gsl_matrix_get(train, i, p) / (double)train->size1;
    double se[3] = {0, 0, 0};
    size_t n = 0;
    ev->max_rise = -INFINITY;
    lse_status st = LSE_OK;
    for (size_t first = 0; first < test->size1 && st == LSE_OK; first += B) {
        for (size_t b = 0; b < B; b++) { /* the last batch wraps around */
            const size_t i = (first + b) % test->size1;
            for (size_t p = 0; p < NPIX; p++)
                gsl_matrix_set(img, b, p, gsl_matrix_get(test, i, p));
            set_mask(hid, b, 1000003ULL + i);
        }
        st = lse_et_complete(et, img, hid, out, trace, err);
        if (first == 0) {
            ev->e0 = gsl_vector_get(trace, 0);
            ev->eT = gsl_vector_get(trace, T);
        }
        for (size_t t = 0; t < T; t++)
            if (gsl_vector_get(trace, t + 1) - gsl_vector_get(trace, t) > ev->max_rise)
                ev->max_rise = gsl_vector_get(trace, t + 1) - gsl_vector_get(trace, t);
        for (size_t b = 0; b < B && first + b < test->size1; b++) {
            size_t best = 0;
            double bd = INFINITY;
            for (size_t j = 0; j < train->size1; j++) {
                double d = 0;
                for (size_t p = 0; p < NPIX && d < bd; p++)
                    if (!is_hidden_pixel(hid, b, p)) {
                        const double e = gsl_matrix_get(img, b, p) - gsl_matrix_get(train, j, p);
                        d += e * e;
                    }
                if (d < bd) {
                    bd = d;
                    best = j;
                }
            }
            for (size_t p = 0; p < NPIX; p++) {
                if (!is_hidden_pixel(hid, b, p))
                    continue;
                const double y = gsl_matrix_get(img, b, p);
                const double e[3] = {gsl_matrix_get(out, b, p) - y,
                                     gsl_vector_get(mean, p) - y,
                                     gsl_matrix_get(train, best, p) - y};
                for (int k = 0; k < 3; k++)
                    se[k] += 256.0 * e[k] * e[k];
                n++;
            }
        }
    }
    ev->rmse_et = sqrt(se[0] / (double)n);
    ev->rmse_mean = sqrt(se[1] / (double)n);
    ev->rmse_nn = sqrt(se[2] / (double)n);
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    gsl_matrix_free(out);
    gsl_vector_free(mean);
    gsl_vector_free(trace);
    return st;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : LSE_DATA_DIR "/digits.csv";
    const long steps = argc > 2 ? strtol(argv[2], NULL, 10) : 2000;
    if (steps < 1)
        return die("STEPS", "must be a positive integer");
    /* one thread: every evaluation is tiny (16 tokens per image), and the
     * library's threads cost more than they give at this size (see
     * docs/performance.md) */
    lse_set_num_threads(1);
    gsl_matrix *train = NULL, *test = NULL;
    if (load(path, &train, &test) != 0)
        return 1;
    lse_et_config cfg = lse_et_config_default();
    lse_et *et = NULL;
    lse_error err;
    if (lse_et_new(&cfg, &et, &err) != LSE_OK)
        return die("lse_et_new", err.message);
    const size_t B = cfg.batch;
    printf("digits: %zu training images, %zu test; a 4x4 block (2x2 of the 16 "
           "2x2 patches) hidden\n",
           train->size1, test->size1);
    printf("block: D = %zu, %zu heads of k = %zu, %zu memories, T = %zu steps "
           "of alpha = %g; %zu parameters\n",
           cfg.dim, cfg.n_heads, cfg.head_dim, cfg.n_memories, cfg.steps,
           cfg.alpha, lse_et_n_params(et));
    eval e0, e1;
    if (evaluate(et, train, test, &e0, &err) != LSE_OK)
        return die("evaluate", err.message);
    gsl_matrix *img = gsl_matrix_alloc(B, NPIX), *hid = gsl_matrix_alloc(B, 16);
    lse_batcher *bat = NULL;
    if (lse_batcher_new(train->size1, B, 13, 1, &bat, &err) != LSE_OK)
        return die("batcher", err.message);
    double first = 0, last = 0;
    const long win = steps < 20 ? steps : 20;
    printf("Adam lr 0.01, %ld steps of %zu images, seed 13\n", steps, B);
    for (long s = 0; s < steps; s++) {
        lse_batcher_next(bat);
        lse_batcher_gather(bat, train, img);
        for (size_t b = 0; b < B; b++)
            set_mask(hid, b, (unsigned long long)s * B + b);
        double l;
        if (lse_et_train_step(et, img, hid, &l, &err) != LSE_OK)
            return die("train", err.message);
        if (s < win)
            first += l / (double)win;
        if (s >= steps - win)
            last += l / (double)win;
    }
    if (evaluate(et, train, test, &e1, &err) != LSE_OK)
        return die("evaluate", err.message);
    printf("\n| completion of the hidden 4x4 block | RMSE (grey levels 0..16) |\n"
           "|---|---|\n");
    printf("| mean training image | %.3f |\n", e1.rmse_mean);
    printf("| nearest training image on the visible pixels (%zu) | %.3f |\n",
           train->size1, e1.rmse_nn);
    printf("| Energy Transformer block, untrained | %.3f |\n", e0.rmse_et);
    printf("| Energy Transformer block, trained | %.3f |\n\n", e1.rmse_et);
    printf("training loss (mean of the first / last %ld steps): %.4f -> %.4f\n",
           win, first, last);
    printf("energy of the first test batch (sum over its 40 images) along the "
           "descent: %.4f -> %.4f;\nlargest change over one step, all test "
           "batches: %.4g (a rise would be > 0)\n",
           e1.e0, e1.eT, e1.max_rise);
    gsl_vector *th = gsl_vector_alloc(lse_et_n_params(et));
    lse_et_params_get(et, th, NULL);
    /* gamma follows W_enc (D, P), pos (N, D) and mask (1, D) */
    printf("LayerNorm gain gamma after training: %.4f (the descent lowers E "
           "for gamma > 0)\n",
           gsl_vector_get(th, cfg.dim * 4 + 16 * cfg.dim + cfg.dim));
    gsl_vector_free(th);
    const int ok = e1.rmse_et < e1.rmse_mean && e1.max_rise <= 0.0;
    const double vs_nn = 100.0 * (1.0 - e1.rmse_et / e1.rmse_nn);
    printf("trained block: %.0f%% below the mean image's error, %.0f%% %s the "
           "nearest neighbour's; energy non-increasing: %s\n",
           100.0 * (1.0 - e1.rmse_et / e1.rmse_mean), fabs(vs_nn),
           vs_nn >= 0 ? "below" : "above", ok ? "yes" : "NO");
    gsl_matrix_free(img);
    gsl_matrix_free(hid);
    gsl_matrix_free(train);
    gsl_matrix_free(test);
    lse_batcher_free(bat);
    lse_et_free(et);
    return ok ? 0 : 1;
}
