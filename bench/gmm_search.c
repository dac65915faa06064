/* The best-known optimum of the (data, covariance, K) cells for K = 1..KMAX
 * by a very large budget (bench/gmm_starts.py best; docs/lsefit.md
 * "Starts").
 *
 *   gmm_search DATA.csv D COV KMAX STARTS SHORT KEEP [SEED]
 *
 * reads the first D columns of DATA.csv (one header row). For each K, from
 * three kinds of starts (k-means++ seeds with 10 Lloyd iterations, Lloyd
 * to convergence, random responsibilities; STARTS each) and from the K - 1
 * splits (lse_gmm_split) of the best non-degenerate fit for K - 1, short
 * runs of SHORT EM iterations; per kind, the KEEP best non-degenerate short
 * runs and the KEEP best of all are continued to convergence (relative
 * tolerance 1e-12, at most 20000 iterations), reg_covar 1e-6. Prints per K
 *
 *   K best_nondegenerate kind best_overall kind min_eig_nondegenerate
 *     min_rows_nondegenerate smem_nondegenerate
 *
 * (min_rows: the smallest sum of responsibilities of a component of the
 * best non-degenerate fit, the rows it effectively holds; smem: that fit
 * after split-and-merge EM, lse_gmm_smem with every move of every round
 * and the 8 best partial runs to convergence, the guard at DEGENERATE;
 * it can only be higher, and is not part of best_nondegenerate)
 *
 * A fit is degenerate when a covariance eigenvalue is below DEGENERATE
 * (100 reg_covar): a component collapsed onto a point or a lattice line of
 * the data, whose likelihood is the regulariser's rather than the data's
 * (Faithful's waiting times are integers, Iris is measured to 0.1 cm). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

/* a fit whose smallest covariance eigenvalue is below 100 reg_covar has a
 * component collapsed onto a point or a lattice line of the data: its
 * likelihood is the regulariser's, not the data's */
#define DEGENERATE 1e-4

static gsl_matrix *read_csv(const char *path, size_t d)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char line[4096];
    size_t n = 0, cap = 1024;
    double *v = malloc(cap * d * sizeof *v);
    if (fgets(line, sizeof line, f) == NULL) { /* header */
        fclose(f);
        free(v);
        return NULL;
    }
    while (v != NULL && fgets(line, sizeof line, f) != NULL) {
        if (n == cap) {
            cap *= 2;
            double *w = realloc(v, cap * d * sizeof *v);
            if (w == NULL)
                break;
            v = w;
        }
        char *p = line;
        for (size_t j = 0; j < d; j++) {
            v[n * d + j] = strtod(p, &p);
            if (*p == ',')
                p++;
        }
        n++;
    }
    fclose(f);
    gsl_matrix *x = v == NULL ? NULL : gsl_matrix_alloc(n, d);
    for (size_t i = 0; x != NULL && i < n; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(x, i, j, v[i * d + j]);
    free(v);
    return x;
}

/* smallest covariance eigenvalue of m (lse_gmm_min_eigenvalue, the
 * guard's measure in lsefit's default start) */
static double min_eig(const lse_gmm *m)
{
    double lo = INFINITY;
    return lse_gmm_min_eigenvalue(m, &lo, NULL) == LSE_OK ? lo : INFINITY;
}

/* the smallest sum of responsibilities of a component of m on x */
static double min_rows(const lse_gmm *m, const gsl_matrix *x)
{
    gsl_matrix *r = gsl_matrix_alloc(x->size1, lse_gmm_k(m));
    double lo = INFINITY;
    if (r != NULL && lse_gmm_predict_proba(m, x, r, NULL) == LSE_OK)
        for (size_t c = 0; c < r->size2; c++) {
            double t = 0.0;
            for (size_t i = 0; i < r->size1; i++)
                t += gsl_matrix_get(r, i, c);
            lo = fmin(lo, t);
        }
    gsl_matrix_free(r);
    return lo;
}

/* m after split-and-merge EM with every move (NAN when it fails) */
static double smem_of(const lse_gmm *m, const gsl_matrix *x)
{
    lse_gmm *c = NULL;
    lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
    lse_gmm_smem_opts s = lse_gmm_smem_opts_default();
    s.n_tries = 1000;
    s.keep_iter = 0;
    s.max_moves = 100;
    s.degenerate = DEGENERATE / o.reg_covar;
    double ll = NAN;
    if (lse_gmm_new(lse_gmm_k(m), lse_gmm_dim(m), lse_gmm_cov_type(m), &c,
                    NULL) == LSE_OK &&
        lse_gmm_copy(c, m, NULL) == LSE_OK) {
        o.init = LSE_GMM_INIT_GIVEN;
        o.tol = 1e-12;
        o.max_iter = 20000;
        if (lse_gmm_fit(c, x, &o, NULL) == LSE_OK &&
            lse_gmm_smem(c, x, &o, &s, NULL, NULL) == LSE_OK)
            ll = lse_gmm_info(c)->loglik;
    }
    lse_gmm_free(c);
    return ll;
}

/* the KEEP best in decreasing order: insert a copy of m at ll */
static int insert(lse_gmm **p, double *q, size_t keep, const lse_gmm *m,
                  double ll)
{
    size_t pos = keep;
    while (pos > 0 && q[pos - 1] < ll)
        pos--;
    if (pos == keep)
        return 0;
    lse_gmm_free(p[keep - 1]);
    memmove(p + pos + 1, p + pos, (keep - pos - 1) * sizeof *p);
    memmove(q + pos + 1, q + pos, (keep - pos - 1) * sizeof *q);
    p[pos] = NULL;
    q[pos] = ll;
    return lse_gmm_new(lse_gmm_k(m), lse_gmm_dim(m), lse_gmm_cov_type(m),
                       &p[pos], NULL) != LSE_OK ||
           lse_gmm_set_weights(p[pos], lse_gmm_weights(m), NULL) ||
           lse_gmm_set_means(p[pos], lse_gmm_means(m), NULL) ||
           lse_gmm_set_covariances(p[pos], lse_gmm_covariances(m), NULL);
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: gmm_search DATA.csv D COV KMAX STARTS SHORT "
                        "KEEP [SEED]\n");
        return 2;
    }
    const size_t d = strtoul(argv[2], NULL, 10);
    const size_t kmax = strtoul(argv[4], NULL, 10);
    const size_t starts = strtoul(argv[5], NULL, 10);
    const size_t shrt = strtoul(argv[6], NULL, 10);
    const size_t keep = strtoul(argv[7], NULL, 10);
    const unsigned long seed = argc > 8 ? strtoul(argv[8], NULL, 10) : 0;
    lse_cov_type cov;
    gsl_matrix *x = read_csv(argv[1], d);
    if (x == NULL || lse_gmm_cov_parse(argv[3], &cov) != LSE_OK || keep == 0) {
        fprintf(stderr, "gmm_search: cannot read %s or covariance %s\n",
                argv[1], argv[3]);
        return 1;
    }
    static const char *names[] = {"kmeans++", "kmeans", "random", "split"};
    lse_gmm *prev = NULL; /* best non-degenerate fit of K - 1 */
    for (size_t k = 1; k <= kmax; k++) {
        lse_gmm *m = NULL, *bestnd = NULL;
        if (lse_gmm_new(k, d, cov, &m, NULL) != LSE_OK)
            return 1;
        double top[2] = {-INFINITY, -INFINITY};
        const char *topkind[2] = {"none", "none"};
        for (int kind = 0; kind < 4; kind++) {
            /* list 0: non-degenerate short runs, list 1: all */
            lse_gmm **kp = calloc(2 * keep, sizeof *kp);
            double *kl = malloc(2 * keep * sizeof *kl);
            for (size_t i = 0; i < 2 * keep; i++)
                kl[i] = -INFINITY;
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.init = kind == 2 ? LSE_GMM_INIT_RANDOM : LSE_GMM_INIT_KMEANSPP;
            o.lloyd_iter = kind == 1 ? 300 : 10;
            o.max_iter = shrt;
            const size_t runs = kind < 3 ? starts : (prev != NULL ? k - 1 : 0);
            for (size_t s = 0; s < runs; s++) {
                o.seed = seed + 1000000UL * (unsigned long)kind + s;
                if (kind == 3) {
                    o.init = LSE_GMM_INIT_GIVEN;
                    if (lse_gmm_split(prev, x, NULL, s, m, NULL) != LSE_OK)
                        continue;
                }
                if (lse_gmm_fit(m, x, &o, NULL) != LSE_OK)
                    continue;
                const double ll = lse_gmm_info(m)->loglik;
                const int deg = min_eig(m) < DEGENERATE;
                for (int l = deg ? 1 : 0; l < 2; l++)
                    if (insert(kp + l * keep, kl + l * keep, keep, m, ll))
                        return 1;
            }
            lse_gmm_fit_opts fo = lse_gmm_fit_opts_default();
            fo.init = LSE_GMM_INIT_GIVEN;
            fo.tol = 1e-12;
            fo.max_iter = 20000;
            for (size_t i = 0; i < 2 * keep; i++) {
                if (kp[i] == NULL || lse_gmm_fit(kp[i], x, &fo, NULL) != LSE_OK)
                    continue;
                const double ll = lse_gmm_info(kp[i])->loglik;
                const int deg = min_eig(kp[i]) < DEGENERATE;
                for (int l = deg ? 1 : 0; l < 2; l++)
                    if (ll > top[l]) {
                        top[l] = ll;
                        topkind[l] = names[kind];
                        if (l == 0) {
                            lse_gmm_free(bestnd);
                            bestnd = kp[i];
                            kp[i] = NULL;
                        }
                    }
            }
            for (size_t i = 0; i < 2 * keep; i++)
                lse_gmm_free(kp[i]);
            free(kp);
            free(kl);
        }
        printf("%zu %.10f %s %.10f %s %.3g %.3g %.10f\n", k, top[0],
               topkind[0], top[1], topkind[1],
               bestnd != NULL ? min_eig(bestnd) : NAN,
               bestnd != NULL ? min_rows(bestnd, x) : NAN,
               bestnd != NULL ? smem_of(bestnd, x) : NAN);
        fflush(stdout);
        lse_gmm_free(prev);
        prev = bestnd;
        lse_gmm_free(m);
    }
    lse_gmm_free(prev);
    gsl_matrix_free(x);
    return 0;
}
