#include <stdint.h>
#include <stdlib.h>

#include <lsegraph/kmeans.h>

/* k-means++ seeding and Lloyd's iterations (include/lsegraph/kmeans.h). */

static double weight_of(const gsl_vector *w, size_t i)
{
    return w != NULL ? gsl_vector_get(w, i) : 1.0;
}

/* |x_i - c_j|^2 in the order of lse_kmeans_dist2, inlined in the loops
 * below (the exported function is called through the PLT, which cost
 * more than the arithmetic at d = 2) */
static inline double dist2(const gsl_matrix *x, size_t i, const gsl_matrix *c,
                           size_t j)
{
    const double *xi = x->data + i * x->tda;
    const double *cj = c->data + j * c->tda;
    double s = 0.0;
    for (size_t l = 0; l < x->size2; l++) {
        const double t = xi[l] - cj[l];
        s += t * t;
    }
    return s;
}

double lse_kmeans_dist2(const gsl_matrix *x, size_t i, const gsl_matrix *c,
                        size_t j)
{
    return dist2(x, i, c, j);
}

/* Row gi (global index) of the whole data set, uniform over the n_total
 * rows, sent by its owner to every process: row (d + 1) = [gi, x row]. */
static lse_status draw_uniform(const gsl_matrix *x, gsl_rng *rng,
                               lse_comm *comm, double *row, lse_error *err)
{
    static const char fn[] = "lse_kmeans_seed";
    const size_t offset = comm != NULL ? comm->offset : 0;
    const size_t total = lse_comm_parallel(comm) ? comm->n_total : x->size1;
    const size_t gi = gsl_rng_uniform_int(rng, total);
    const int owner = gi >= offset && gi < offset + x->size1;
    if (owner) {
        row[0] = (double)gi;
        for (size_t j = 0; j < x->size2; j++)
            row[1 + j] = gsl_matrix_get(x, gi - offset, j);
    }
    return lse_comm_bcast(comm, owner, row, x->size2 + 1, fn, err);
}

/* A row drawn with probability p_i / sum p over every process, p_i = w_i *
 * (use_d2 ? d2_i : 1); only rows with p_i > 0. The draw scans the per-
 * process totals in rank order, then the owner's rows, so one process gives
 * exactly the serial scan. Out: *n_pos rows with p_i > 0 (0: none, nothing
 * drawn), and row (d + 1): [global index, x row] of the drawn row on every
 * process. */
static lse_status draw(const gsl_matrix *x, const gsl_vector *w,
                       const gsl_vector *d2, int use_d2, gsl_rng *rng,
                       lse_comm *comm, size_t *n_pos, double *row,
                       lse_error *err)
{
    static const char fn[] = "lse_kmeans_seed";
    const size_t n = d2->size, d = x->size2;
    const size_t n_ranks = comm != NULL ? comm->n_ranks : 1;
    const size_t rank = comm != NULL ? comm->rank : 0;
    const size_t offset = comm != NULL ? comm->offset : 0;
    double total = 0.0, npos = 0.0, last = -1.0;
    for (size_t i = 0; i < n; i++) {
        const double p = weight_of(w, i) * (use_d2 ? gsl_vector_get(d2, i) : 1);
        if (p > 0.0) {
            total += p;
            last = (double)i;
            npos += 1.0;
        }
    }
    const double mine[3] = {total, npos, last};
    double *all = comm != NULL ? comm->tmp : (double[3]){0};
    lse_status st = lse_comm_gather(comm, mine, 3, all, fn, err);
    if (st != LSE_OK)
        return st;
    double n_all = 0.0;
    for (size_t r = 0; r < n_ranks; r++)
        n_all += all[3 * r + 1];
    *n_pos = (size_t)n_all;
    if (*n_pos == 0)
        return LSE_OK;
    double grand = 0.0;
    for (size_t r = 0; r < n_ranks; r++)
        if (all[3 * r + 1] > 0.0)
            grand += all[3 * r];
    const double u = gsl_rng_uniform(rng) * grand;
    /* the process whose running total first exceeds u (round-off: the last
     * process with a candidate) and the running total before it */
    size_t owner = n_ranks, last_rank = 0;
    double before = 0.0, cum = 0.0;
    for (size_t r = 0; r < n_ranks; r++) {
        if (!(all[3 * r + 1] > 0.0))
            continue;
        last_rank = r;
        const double next = cum + all[3 * r];
        if (owner == n_ranks && u < next) {
            owner = r;
            before = cum;
        }
        cum = next;
    }
    int round_off = 0;
    if (owner == n_ranks) {
        owner = last_rank;
        round_off = 1;
    }
    size_t pick = (size_t)all[3 * owner + 2];
    if (rank == owner && !round_off) {
        double c = before;
        for (size_t i = 0; i < n; i++) {
            const double p =
                weight_of(w, i) * (use_d2 ? gsl_vector_get(d2, i) : 1);
            if (!(p > 0.0))
                continue;
            c += p;
            if (u < c) {
                pick = i;
                break;
            }
        }
    }
    if (rank == owner) {
        row[0] = (double)(offset + pick);
        for (size_t j = 0; j < d; j++)
            row[1 + j] = gsl_matrix_get(x, pick, j);
    }
    return lse_comm_bcast(comm, rank == owner, row, d + 1, fn, err);
}

/* The first center (or one drawn when every row sits on a center). */
static lse_status draw_plain(const gsl_matrix *x, const gsl_vector *w,
                             const gsl_vector *d2, gsl_rng *rng, unsigned flags,
                             lse_comm *comm, size_t *n_pos, double *row,
                             lse_error *err)
{
    if (flags & LSE_KMEANS_UNIFORM_FIRST) {
        *n_pos = 1;
        return draw_uniform(x, rng, comm, row, err);
    }
    return draw(x, w, d2, 0, rng, comm, n_pos, row, err);
}

lse_status lse_kmeans_seed(const gsl_matrix *x, const gsl_vector *w,
                           gsl_rng *rng, gsl_matrix *centers, gsl_vector *d2,
                           unsigned flags, lse_comm *comm, lse_error *err)
{
    static const char fn[] = "lse_kmeans_seed";
    const size_t n = x->size1, k = centers->size1, d = x->size2;
    if (n == 0 || d2->size != n || centers->size2 != d ||
        (w != NULL && w->size != n))
        return lse_error_set(err, LSE_EDIM, fn,
                             "x (%zu, %zu), centers (%zu, %zu), d2 %zu, "
                             "weights %zu",
                             n, d, k, centers->size2, d2->size,
                             w != NULL ? w->size : n);
    double *row = malloc((d + 1) * sizeof *row);
    if (row == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    size_t n_pos;
    lse_status st = draw_plain(x, w, d2, rng, flags, comm, &n_pos, row, err);
    if (st == LSE_OK && n_pos == 0)
        st = lse_error_set(err, LSE_EINVAL, fn, "no row has a positive weight");
    for (size_t c = 0; st == LSE_OK && c < k; c++) {
        if (c > 0) {
            st = draw(x, w, d2, 1, rng, comm, &n_pos, row, err);
            if (st == LSE_OK && n_pos == 0) /* every row sits on a center */
                st = draw_plain(x, w, d2, rng, flags, comm, &n_pos, row, err);
            if (st != LSE_OK)
                break;
        }
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(centers, c, j, row[1 + j]);
        for (size_t i = 0; i < n; i++) {
            const double dd = dist2(x, i, centers, c);
            if (c == 0 || dd < gsl_vector_get(d2, i))
                gsl_vector_set(d2, i, dd);
        }
    }
    free(row);
    return st;
}

/* lse_kmeans_nearest's loop for d = x->size2 (a constant where inlined
 * with one, so that dist2's loop unrolls: the same operations in the same
 * order, fewer instructions at the small d of lsefit's default fits) */
static inline __attribute__((always_inline)) size_t
nearest_d(const gsl_matrix *x, const gsl_matrix *centers, size_t *labels,
          gsl_vector *d2, int changed_from, size_t d)
{
    size_t changed = 0;
    const size_t k = centers->size1, ct = centers->tda;
    for (size_t i = 0; i < x->size1; i++) {
        const double *xi = x->data + i * x->tda;
        size_t best = 0;
        double best_d = 0.0; /* set at c = 0 */
        for (size_t c = 0; c < k; c++) {
            const double *cj = centers->data + c * ct;
            double s = 0.0;
            for (size_t l = 0; l < d; l++) {
                const double t = xi[l] - cj[l];
                s += t * t;
            }
            if (c == 0 || s < best_d) {
                best_d = s;
                best = c;
            }
        }
        if (changed_from && labels[i] != best)
            changed++;
        labels[i] = best;
        if (d2 != NULL)
            gsl_vector_set(d2, i, best_d);
    }
    return changed;
}

size_t lse_kmeans_nearest(const gsl_matrix *x, const gsl_matrix *centers,
                          size_t *labels, gsl_vector *d2, int changed_from)
{
    switch (x->size2) {
    case 2:
        return nearest_d(x, centers, labels, d2, changed_from, 2);
    case 3:
        return nearest_d(x, centers, labels, d2, changed_from, 3);
    case 4:
        return nearest_d(x, centers, labels, d2, changed_from, 4);
    default:
        return nearest_d(x, centers, labels, d2, changed_from, x->size2);
    }
}

lse_status lse_kmeans_lloyd(const gsl_matrix *x, const gsl_vector *w,
                            gsl_matrix *centers, size_t max_iter,
                            size_t *labels, gsl_vector *sums, size_t *n_iter,
                            unsigned flags, lse_comm *comm, lse_error *err)
{
    static const char fn[] = "lse_kmeans_lloyd";
    const size_t n = x->size1, d = x->size2, k = centers->size1;
    if (n_iter != NULL)
        *n_iter = 0;
    if (k == 0 || centers->size2 != d || sums->size != k ||
        (w != NULL && w->size != n))
        return lse_error_set(err, LSE_EDIM, fn,
                             "x (%zu, %zu), centers (%zu, %zu), sums %zu, "
                             "weights %zu",
                             n, d, k, centers->size2, sums->size,
                             w != NULL ? w->size : n);
    if (d > 0 && k > (SIZE_MAX - 1) / d / sizeof(double))
        return lse_error_set(err, LSE_ENOMEM, fn, "%zu x %zu overflows", k, d);
    /* acc: (k * d) center sums, then the count of changed labels */
    double *acc = malloc((k * d + 1) * sizeof *acc);
    if (acc == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    const int divide = (flags & LSE_KMEANS_DIVIDE) != 0;
    lse_kmeans_nearest(x, centers, labels, NULL, 0);
    lse_status st = LSE_OK;
    size_t it = 0;
    for (; it < max_iter; it++) {
        gsl_vector_set_zero(sums);
        for (size_t i = 0; i < n; i++)
            *gsl_vector_ptr(sums, labels[i]) += weight_of(w, i);
        st = lse_comm_sum(comm, sums->data, k, fn, err);
        if (st != LSE_OK)
            break;
        /* new centers: weighted means (a center without weight stays) */
        for (size_t i = 0; i < k * d; i++)
            acc[i] = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double s = gsl_vector_get(sums, labels[i]);
            if (!(s > 0.0))
                continue;
            const double wi = weight_of(w, i), f = wi / s;
            const double *xi = gsl_matrix_const_ptr(x, i, 0);
            double *ci = acc + labels[i] * d;
            for (size_t j = 0; j < d; j++)
                ci[j] += divide ? wi * xi[j] / s : f * xi[j];
        }
        st = lse_comm_sum(comm, acc, k * d, fn, err);
        if (st != LSE_OK)
            break;
        for (size_t c = 0; c < k; c++)
            if (gsl_vector_get(sums, c) > 0.0)
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(centers, c, j, acc[c * d + j]);
        acc[0] = (double)lse_kmeans_nearest(x, centers, labels, NULL, 1);
        st = lse_comm_sum(comm, acc, 1, fn, err);
        if (st != LSE_OK)
            break;
        if (acc[0] == 0.0) {
            it++;
            break;
        }
    }
    free(acc);
    if (n_iter != NULL)
        *n_iter = it;
    return st;
}

double lse_kmeans_objective(const gsl_matrix *x, const gsl_vector *w,
                            const gsl_matrix *centers, const size_t *labels)
{
    double s = 0.0;
    for (size_t i = 0; i < x->size1; i++)
        s += weight_of(w, i) * dist2(x, i, centers, labels[i]);
    return s;
}
