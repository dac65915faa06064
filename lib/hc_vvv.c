/* Model-based hierarchical agglomeration for unconstrained covariances
 * (mclust's hcVVV; Fraley 1998, "Algorithms for model-based Gaussian
 * hierarchical clustering") and mclust's "SVD" data transform (hc.h).
 *
 * A cluster of l rows with scatter matrix W (sum of outer products about
 * its mean) contributes
 *   T = l log(beta (tr W + alpha) / l)                  (l <= d or l = 2)
 *   T = l log(|W / l| + beta (tr W + alpha) / l)        (otherwise)
 * with alpha = tr(W of all rows) / (n d) and beta = 1 (mclust's defaults);
 * the merge of a and b costs T(a+b) - T(a) - T(b) and the cheapest merge is
 * taken, ties going to the last pair in mclust's order (slots j ascending,
 * then i < j ascending). Slots follow mclust: the union stays in the
 * smaller slot, the last slot moves into the freed one. Costs of pairs not
 * involving the union are kept, so each merge computes O(slots) new costs
 * and scans O(slots^2) stored ones. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_eigen.h>

#include <lsegraph/cov.h>
#include <lsegraph/core.h>

#include "size-private.h"

/* relative width of a tie: a few units in the last place */
#define TIE (8 * 2.220446049250313e-16)

typedef struct clus {
    size_t count, rep; /* rows; first row (the label of the union) */
    double *mean, *w;  /* d; d x d scatter */
    double tr, term;
} clus;

/* log |W / l| by Cholesky; -INFINITY when W / l is not positive definite */
static double logdet_scaled(const double *w, size_t d, double l, double *f)
{
    for (size_t i = 0; i < d * d; i++)
        f[i] = w[i] / l;
    double s = 0.0;
    for (size_t j = 0; j < d; j++) {
        double v = f[j * d + j];
        for (size_t k = 0; k < j; k++)
            v -= f[j * d + k] * f[j * d + k];
        if (!(v > 0.0))
            return -INFINITY;
        const double ljj = sqrt(v);
        f[j * d + j] = ljj;
        s += log(ljj);
        for (size_t i = j + 1; i < d; i++) {
            double u = f[i * d + j];
            for (size_t k = 0; k < j; k++)
                u -= f[i * d + k] * f[j * d + k];
            f[i * d + j] = u / ljj;
        }
    }
    return 2.0 * s;
}

static double term_of(size_t l, size_t d, const double *w, double tr,
                      double alpha, double beta, double *f)
{
    const double rl = (double)l;
    double t;
    if (l <= d || l == 2) {
        t = log(beta * (tr + alpha) / rl);
    } else if (tr == 0.0) {
        t = log(alpha * beta / rl);
    } else {
        const double dl = logdet_scaled(w, d, rl, f);
        const double b = beta * (tr + alpha) / rl;
        if (dl == -INFINITY)
            t = log(b);
        else if (dl <= 0.0)
            t = log(exp(dl) + b);
        else
            t = log(1.0 + exp(-dl) * b) + dl;
    }
    return rl * t;
}

/* the union of a and b into u (u may not alias a or b) */
static void join(const clus *a, const clus *b, size_t d, clus *u)
{
    const double na = (double)a->count, nb = (double)b->count;
    const double nu = na + nb, c = na * nb / nu;
    u->count = a->count + b->count;
    u->rep = a->rep < b->rep ? a->rep : b->rep;
    double tr = a->tr + b->tr;
    for (size_t i = 0; i < d; i++) {
        const double di = a->mean[i] - b->mean[i];
        u->mean[i] = (na * a->mean[i] + nb * b->mean[i]) / nu;
        for (size_t j = 0; j < d; j++) {
            const double dj = a->mean[j] - b->mean[j];
            u->w[i * d + j] = a->w[i * d + j] + b->w[i * d + j] + c * di * dj;
        }
        tr += c * di * di;
    }
    u->tr = tr;
}

/* cost of merging a and b; the union's statistics into u */
static double merge_cost(const clus *a, const clus *b, size_t d, double alpha,
                         double beta, double ablog, clus *u, double *f)
{
    if (a->count == 1 && b->count == 1) {
        /* two rows: tr W = |x_a - x_b|^2 / 2, as mclust computes it */
        double tr = 0.0;
        for (size_t i = 0; i < d; i++) {
            const double v = (a->mean[i] - b->mean[i]) * 0.7071067811865476;
            tr += v * v;
        }
        join(a, b, d, u);
        u->tr = tr;
        u->term = 2.0 * log(beta * (tr + alpha) / 2.0);
        return u->term - (ablog + ablog);
    }
    join(a, b, d, u);
    u->term = term_of(u->count, d, u->w, u->tr, alpha, beta, f);
    return u->term - (a->term + b->term);
}

/* alpha: tr of the scatter of x / sqrt(n d) (mclust's traceW), at
 * least the double epsilon */
static double trace_alpha(const gsl_matrix *x)
{
    const size_t n = x->size1, d = x->size2;
    double alpha = 0.0;
    for (size_t j = 0; j < d; j++) {
        double m = 0.0;
        for (size_t i = 0; i < n; i++)
            m += gsl_matrix_get(x, i, j);
        m /= (double)n;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - m;
            alpha += t * t;
        }
    }
    alpha /= (double)n * (double)d;
    if (!(alpha > 2.220446049250313e-16))
        alpha = 2.220446049250313e-16;
    return alpha;
}

/* The pair (bi < bj) of the first lg slots with the least cost in dm
 * (n x n); ties (within TIE of it, below mclust's own rounding of the
 * same sums) to the last pair in slot order. Returns its cost. */
static double least_pair(const double *dm, size_t n, size_t lg, size_t *bi,
                         size_t *bj)
{
    double lo = INFINITY;
    for (size_t j = 1; j < lg; j++)
        for (size_t i = 0; i < j; i++)
            lo = fmin(lo, dm[i * n + j]);
    const double lim = lo + TIE * fabs(lo);
    double bd = lo;
    *bi = 0;
    *bj = 1;
    for (size_t j = 1; j < lg; j++)
        for (size_t i = 0; i < j; i++)
            if (dm[i * n + j] <= lim) {
                bd = dm[i * n + j];
                *bi = i;
                *bj = j;
            }
    return bd;
}

lse_status lse_hc_vvv(const gsl_matrix *x, size_t *pairs, double *cost,
                      lse_error *err)
{
    static const char fn[] = "lse_hc_vvv";
    if (x == NULL || pairs == NULL || cost == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t n = x->size1, d = x->size2;
    if (n == 0 || d == 0)
        return lse_error_set(err, LSE_EDIM, fn, "no rows or no columns");
    size_t dd, per;
    if (n >= SIZE_MAX - 2 || lse_size_matrix_overflows(n, n) ||
        lse_size_mul(d, d, &dd) || lse_size_add(dd, d, &per) ||
        lse_size_matrix_overflows(n + 2, per))
        return lse_error_set(err, LSE_ENOMEM, fn,
                             "%zu rows of %zu columns: the pair costs or "
                             "the scatter matrices exceed the address space",
                             n, d);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu column %zu is not finite", i, j);
    /* slots: one per row (as mclust's hc(), whose default partition
     * 1:n keeps identical rows apart), plus two scratch clusters */
    clus *s = calloc(n + 2, sizeof *s);
    double *mem = malloc((n + 2) * (d + d * d) * sizeof *mem);
    double *f = malloc(d * d * sizeof *f);
    double *dm = malloc(n * n * sizeof *dm);
    if (s == NULL || mem == NULL || f == NULL || dm == NULL) {
        free(s);
        free(mem);
        free(f);
        free(dm);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t i = 0; i < n + 2; i++) {
        s[i].mean = mem + i * (d + d * d);
        s[i].w = s[i].mean + d;
    }
    const double alpha = trace_alpha(x);
    const double beta = 1.0, ablog = log(beta * alpha);
    const size_t l = n;
    size_t t = 0;
    for (size_t i = 0; i < n; i++) {
        s[i].count = 1;
        s[i].rep = i;
        for (size_t j = 0; j < d; j++)
            s[i].mean[j] = gsl_matrix_get(x, i, j);
        memset(s[i].w, 0, d * d * sizeof(double));
        s[i].tr = 0.0;
        s[i].term = ablog;
    }
    clus *u = &s[n], *best = &s[n + 1];
    for (size_t j = 1; j < l; j++)
        for (size_t i = 0; i < j; i++)
            dm[i * n + j] = dm[j * n + i] =
                merge_cost(&s[i], &s[j], d, alpha, beta, ablog, u, f);
    for (size_t lg = l; lg > 1; lg--) {
        size_t bi, bj; /* the least cost, ties to the last pair */
        const double bd = least_pair(dm, n, lg, &bi, &bj);
        (void)merge_cost(&s[bi], &s[bj], d, alpha, beta, ablog, best, f);
        const size_t ra = s[bi].rep, rb = s[bj].rep;
        pairs[2 * t] = ra < rb ? ra : rb;
        pairs[2 * t + 1] = ra < rb ? rb : ra;
        cost[t] = bd;
        t++;
        /* the union into slot bi, the last slot into bj */
        s[bi].count = best->count;
        s[bi].rep = best->rep;
        s[bi].tr = best->tr;
        s[bi].term = best->term;
        memcpy(s[bi].mean, best->mean, (d + d * d) * sizeof(double));
        const size_t last = lg - 1;
        if (bj != last) {
            s[bj].count = s[last].count;
            s[bj].rep = s[last].rep;
            s[bj].tr = s[last].tr;
            s[bj].term = s[last].term;
            memcpy(s[bj].mean, s[last].mean, (d + d * d) * sizeof(double));
            for (size_t c = 0; c < last; c++)
                if (c != bj)
                    dm[bj * n + c] = dm[c * n + bj] = dm[last * n + c];
        }
        for (size_t c = 0; c < last; c++)
            if (c != bi)
                dm[bi * n + c] = dm[c * n + bi] = merge_cost(
                    &s[bi], &s[c], d, alpha, beta, ablog, u, f);
    }
    free(s);
    free(mem);
    free(f);
    free(dm);
    return LSE_OK;
}

lse_status lse_hc_svd(const gsl_matrix *x, gsl_matrix *z, lse_error *err)
{
    static const char fn[] = "lse_hc_svd";
    if (x == NULL || z == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t n = x->size1, d = x->size2;
    if (n < 2 || d == 0 || z->size1 != n || z->size2 != d)
        return lse_error_set(err, LSE_EDIM, fn,
                             "x is %zu x %zu and z %zu x %zu: need equal "
                             "shapes and at least 2 rows",
                             n, d, z->size1, z->size2);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu column %zu is not finite", i, j);
    gsl_matrix *c = gsl_matrix_calloc(d, d), *v = gsl_matrix_alloc(d, d);
    gsl_vector *ev = gsl_vector_alloc(d), *row = gsl_vector_alloc(d);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(d);
    lse_status st = LSE_OK;
    if (c == NULL || v == NULL || ev == NULL || row == NULL || ws == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    /* standardize (sd with n - 1, as R's scale) into z */
    for (size_t j = 0; j < d; j++) {
        double m = 0.0, ss = 0.0;
        for (size_t i = 0; i < n; i++)
            m += gsl_matrix_get(x, i, j);
        m /= (double)n;
        for (size_t i = 0; i < n; i++) {
            const double t = gsl_matrix_get(x, i, j) - m;
            ss += t * t;
        }
        const double sd = sqrt(ss / (double)(n - 1));
        if (!(sd > 0.0)) {
            st = lse_error_set(err, LSE_EDOM, fn,
                               "column %zu is constant", j);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            gsl_matrix_set(z, i, j, (gsl_matrix_get(x, i, j) - m) / sd);
    }
    /* Z^T Z = V S^2 V^T: the right singular vectors and values */
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b <= a; b++)
                *gsl_matrix_ptr(c, a, b) +=
                    gsl_matrix_get(z, i, a) * gsl_matrix_get(z, i, b);
    for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < a; b++)
            gsl_matrix_set(c, b, a, gsl_matrix_get(c, a, b));
    if (lse_eigen_symmv(c, ev, v, ws) != GSL_SUCCESS) {
        st = lse_error_set(err, LSE_ENUMERIC, fn, "eigensolver failed");
        goto out;
    }
    gsl_eigen_symmv_sort(ev, v, GSL_EIGEN_SORT_VAL_DESC);
    const double top = gsl_vector_get(ev, 0);
    for (size_t k = 0; k < d; k++) {
        const double e = gsl_vector_get(ev, k);
        if (!(e > 1e-12 * top)) {
            st = lse_error_set(err, LSE_EDOM, fn,
                               "the columns are collinear (singular value "
                               "%zu of %zu is 0)",
                               k + 1, d);
            goto out;
        }
        /* column k of V divided by sqrt(s_k) = e^(1/4) */
        const double sc = 1.0 / sqrt(sqrt(e));
        for (size_t a = 0; a < d; a++)
            *gsl_matrix_ptr(v, a, k) *= sc;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < d; k++) {
            double t = 0.0;
            for (size_t a = 0; a < d; a++)
                t += gsl_matrix_get(z, i, a) * gsl_matrix_get(v, a, k);
            gsl_vector_set(row, k, t);
        }
        for (size_t k = 0; k < d; k++)
            gsl_matrix_set(z, i, k, gsl_vector_get(row, k));
    }
out:
    gsl_matrix_free(c);
    gsl_matrix_free(v);
    gsl_vector_free(ev);
    gsl_vector_free(row);
    if (ws != NULL)
        gsl_eigen_symmv_free(ws);
    return st;
}
