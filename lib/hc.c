/* Model-based hierarchical agglomeration, EII / Ward (hc.h). Greedy
 * merging with the Lance-Williams update of Ward's cost,
 *   d(a+b, c) = ((n_a + n_c) d(a,c) + (n_b + n_c) d(b,c) - n_c d(a,b))
 *               / (n_a + n_b + n_c),
 * starting from d(i, j) = |x_i - x_j|^2 / 2, and a cached nearest neighbour
 * per cluster so that a merge costs O(n) on average. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/core.h>

#include "size-private.h"

lse_status lse_hc_ward(const gsl_matrix *x, size_t *pairs, double *cost,
                       lse_error *err)
{
    static const char fn[] = "lse_hc_ward";
    if (x == NULL || pairs == NULL || cost == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t n = x->size1, d = x->size2;
    if (n == 0)
        return lse_error_set(err, LSE_EDIM, fn, "no rows");
    if (lse_size_matrix_overflows(n, n))
        return lse_error_set(err, LSE_ENOMEM, fn,
                             "%zu rows: the %zu x %zu distance matrix "
                             "exceeds the address space",
                             n, n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu column %zu is not finite", i, j);
    double *dm = malloc(n * n * sizeof *dm);
    double *cnt = malloc(n * sizeof *cnt), *nnd = malloc(n * sizeof *nnd);
    size_t *nn = malloc(n * sizeof *nn);
    unsigned char *act = malloc(n);
    if (dm == NULL || cnt == NULL || nnd == NULL || nn == NULL ||
        act == NULL) {
        free(dm);
        free(cnt);
        free(nnd);
        free(nn);
        free(act);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        cnt[i] = 1.0;
        act[i] = 1;
        dm[i * n + i] = 0.0;
        for (size_t j = 0; j < i; j++) {
            double s = 0.0;
            for (size_t c = 0; c < d; c++) {
                const double t = gsl_matrix_get(x, i, c) -
                                 gsl_matrix_get(x, j, c);
                s += t * t;
            }
            dm[i * n + j] = dm[j * n + i] = 0.5 * s;
        }
    }
#define NEAREST(i)                                                             \
    do {                                                                       \
        nnd[i] = INFINITY;                                                     \
        nn[i] = i;                                                             \
        for (size_t j_ = 0; j_ < n; j_++)                                      \
            if (act[j_] && j_ != (i) && dm[(i) * n + j_] < nnd[i]) {           \
                nnd[i] = dm[(i) * n + j_];                                     \
                nn[i] = j_;                                                    \
            }                                                                  \
    } while (0)
    for (size_t i = 0; i < n; i++)
        NEAREST(i);
    for (size_t t = 0; t + 1 < n; t++) {
        /* the closest pair: lowest cost, then lowest indices */
        size_t a = n;
        for (size_t i = 0; i < n; i++)
            if (act[i] && (a == n || nnd[i] < nnd[a]))
                a = i;
        size_t b = nn[a];
        if (b < a) {
            const size_t s = a;
            a = b;
            b = s;
        }
        pairs[2 * t] = a;
        pairs[2 * t + 1] = b;
        const double dab = dm[a * n + b];
        cost[t] = dab;
        act[b] = 0;
        for (size_t c = 0; c < n; c++) {
            if (!act[c] || c == a)
                continue;
            const double v = ((cnt[a] + cnt[c]) * dm[a * n + c] +
                              (cnt[b] + cnt[c]) * dm[b * n + c] - cnt[c] * dab) /
                             (cnt[a] + cnt[b] + cnt[c]);
            dm[a * n + c] = dm[c * n + a] = v;
        }
        cnt[a] += cnt[b];
        NEAREST(a);
        for (size_t c = 0; c < n; c++) {
            if (!act[c] || c == a)
                continue;
            if (nn[c] == a || nn[c] == b)
                NEAREST(c);
            else if (dm[c * n + a] < nnd[c]) {
                nnd[c] = dm[c * n + a];
                nn[c] = a;
            }
        }
    }
#undef NEAREST
    free(dm);
    free(cnt);
    free(nnd);
    free(nn);
    free(act);
    return LSE_OK;
}

lse_status lse_hc_cut(size_t n, const size_t *pairs, size_t k, size_t *labels)
{
    if ((pairs == NULL && n > 1) || labels == NULL)
        return LSE_EFAULT;
    if (k == 0 || k > n)
        return LSE_EDIM;
    size_t *root = malloc(n * sizeof *root);
    if (root == NULL)
        return LSE_ENOMEM;
    for (size_t i = 0; i < n; i++)
        root[i] = i;
    for (size_t t = 0; t < n - k; t++) {
        const size_t a = pairs[2 * t], b = pairs[2 * t + 1];
        for (size_t i = 0; i < n; i++)
            if (root[i] == b)
                root[i] = a;
    }
    size_t next = 0;
    for (size_t i = 0; i < n; i++)
        labels[i] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (labels[root[i]] == SIZE_MAX)
            labels[root[i]] = next++;
    }
    /* labels[] was indexed by roots; map rows through them */
    for (size_t i = 0; i < n; i++)
        root[i] = labels[root[i]];
    memcpy(labels, root, n * sizeof *labels);
    free(root);
    return LSE_OK;
}
