#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "slds-private.h"

/* Starting parameters of an SLDS fit: one M-step from given
 * responsibilities (random, or hard labels of k-means++ on the residuals
 * of a pooled fit), over every process of the fit. */

#define INIT_FLOOR                                                             \
    1e-4               /* responsibility mass spread over all modes in the     \
                          hard-label initialization (keeps every mode's        \
                          normal equations non-singular) */
#define LLOYD_ITER 100 /* Lloyd iterations after k-means++ seeding */

/* ------------------------------------------------------------------ */
/* Initialization                                                      */

/* One closed-form M-step from given responsibilities resp (n, K) through
 * the term's M-step verb (statistics summed over the processes, exactly
 * with exact_sums: docs/mpi.md), in buffers made at the first M-step of a
 * fit; a failure is reported as "fn: what: ...". */
lse_status slds_lingauss_mstep(const lse_slds *m, sgraph *sg,
                               const gsl_matrix *resp, const lse_mstep_opts *mo,
                               par_ctx *pc, const char *what, const char *fn,
                               lse_error *err)
{
    (void)m;
    lse_error e;
    lse_status st = LSE_OK;
    if (pc->ws == NULL)
        st = lse_mstep_ws_new(sg->dyn, pc->exact ? LSE_MSTEP_EXACT : 0u,
                              &pc->ws, &e);
    if (st == LSE_OK)
        st = lse_term_mstep_ws(sg->dyn, resp, mo, NULL, &pc->dist, pc->ws, &e);
    if (st != LSE_OK) {
        const char *msg = strstr(e.message, ": ");
        return lse_error_set(err, st, fn, "%s: %s", what,
                             msg != NULL ? msg + 2 : e.message);
    }
    return LSE_OK;
}

static lse_status mstep_from_resp(const lse_slds *m, sgraph *sg,
                                  const gsl_matrix *resp,
                                  const lse_mstep_opts *mo, par_ctx *pc,
                                  const char *fn, lse_error *err)
{
    const size_t K = m->K, n = sg->lay.n_steps;
    lse_status st =
        slds_lingauss_mstep(m, sg, resp, mo, pc, "initial M-step", fn, err);
    if (st != LSE_OK || !m->markov)
        return st;
    /* p0 from the first step of each sequence, P from consecutive steps;
     * one pseudo-count per entry keeps every probability > 0. Over several
     * processes the counts are summed (the pseudo-counts once), and a first
     * step that continues the previous process's chain pairs with its
     * last step instead of counting as a start. */
    double *cnt = malloc((K + K * K) * sizeof *cnt);
    lse_xsum *xc = calloc(K + K * K, sizeof *xc); /* exact counts */
    if (cnt == NULL || xc == NULL) {
        free(cnt);
        free(xc);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t i = 0; i < K + K * K; i++)
        if (pc->dist.rank == 0)
            lse_xsum_add(&xc[i], 1.0);
    if (pc->markov) { /* the last responsibilities of every process */
        gsl_vector_const_view last = gsl_matrix_const_row(resp, n - 1);
        double *mine = pc->all + pc->dist.rank * K;
        for (size_t r = 0; r < pc->dist.n_ranks * K; r++)
            pc->all[r] = 0.0;
        for (size_t k = 0; k < K; k++)
            mine[k] = gsl_vector_get(&last.vector, k);
        st = lse_comm_sum(&pc->dist, pc->all, pc->dist.n_ranks * K, fn, err);
        if (st == LSE_OK && pc->cont)
            memcpy(pc->prev_last, pc->all + (pc->dist.rank - 1) * K,
                   K * sizeof *pc->prev_last);
    }
    for (size_t q = 0; st == LSE_OK && q < sg->lay.n_seg; q++) {
        const size_t s0 = sg->lay.starts[q], s1 = sg->lay.starts[q + 1];
        if (q == 0 && pc->cont) {
            for (size_t j = 0; j < K; j++)
                for (size_t k = 0; k < K; k++)
                    lse_xsum_add(&xc[K + j * K + k],
                                 pc->prev_last[j] *
                                     gsl_matrix_get(resp, s0, k));
        } else {
            for (size_t k = 0; k < K; k++)
                lse_xsum_add(&xc[k], gsl_matrix_get(resp, s0, k));
        }
        for (size_t i = s0 + 1; i < s1; i++)
            for (size_t j = 0; j < K; j++)
                for (size_t k = 0; k < K; k++)
                    lse_xsum_add(&xc[K + j * K + k],
                                 gsl_matrix_get(resp, i - 1, j) *
                                     gsl_matrix_get(resp, i, k));
    }
    if (st == LSE_OK)
        st = lse_comm_xsum(&pc->dist, xc, K + K * K, cnt, fn, err);
    free(xc);
    if (st != LSE_OK) {
        free(cnt);
        return st;
    }
    gsl_matrix *init = lse_node_value(sg->init),
               *trans = lse_node_value(sg->trans);
    double s = 0.0;
    for (size_t k = 0; k < K; k++)
        s += cnt[k];
    for (size_t k = 0; k < K; k++)
        gsl_matrix_set(init, 0, k, log(cnt[k] / s));
    for (size_t j = 0; j < K; j++) {
        double r = 0.0;
        for (size_t k = 0; k < K; k++)
            r += cnt[K + j * K + k];
        for (size_t k = 0; k < K; k++)
            gsl_matrix_set(trans, j, k, log(cnt[K + j * K + k] / r));
    }
    free(cnt);
    return LSE_OK;
}

/* k-means++ seeding then Lloyd iterations on the rows of r (n, d); labels
 * (n). Over several processes r is this process's share of the steps: the
 * draws are those of the whole set (the same generator state everywhere),
 * the D^2 totals, counts, center sums and changes are summed. The first
 * center is a uniform draw, centers are sums of x_i / count, and the labels
 * are those of the centers after LLOYD_ITER - 1 updates (this model's
 * start since its first release). */
static lse_status kmeans(const gsl_matrix *r, size_t K, gsl_rng *rng,
                         size_t *labels, par_ctx *pc, const char *fn,
                         lse_error *err)
{
    gsl_matrix *c = gsl_matrix_alloc(K, r->size2);
    gsl_vector *d2 = gsl_vector_alloc(r->size1), *sums = gsl_vector_alloc(K);
    lse_status st = LSE_OK;
    if (c == NULL || d2 == NULL || sums == NULL)
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (st == LSE_OK)
        st = lse_kmeans_seed(r, NULL, rng, c, d2, LSE_KMEANS_UNIFORM_FIRST,
                             &pc->dist, err);
    if (st == LSE_OK)
        st = lse_kmeans_lloyd(r, NULL, c, LLOYD_ITER - 1, labels, sums, NULL,
                              LSE_KMEANS_DIVIDE, &pc->dist, err);
    gsl_matrix_free(c);
    gsl_vector_free(d2);
    gsl_vector_free(sums);
    return st;
}

/* Scale every column of f (n, c) to unit standard deviation over the
 * steps of every process (a constant column is left alone). */
static lse_status standardize_columns(gsl_matrix *f, par_ctx *pc,
                                      const char *fn, lse_error *err)
{
    const size_t n = f->size1, nc = f->size2;
    const double N = (double)pc->dist.n_total;
    double *buf = calloc(2 * nc, sizeof *buf); /* sums, then squares */
    if (buf == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t j = 0; j < nc; j++)
        for (size_t i = 0; i < n; i++)
            buf[j] += gsl_matrix_get(f, i, j);
    lse_status st = lse_comm_sum(&pc->dist, buf, nc, fn, err);
    for (size_t j = 0; st == LSE_OK && j < nc; j++) {
        buf[j] /= N;
        for (size_t i = 0; i < n; i++)
            buf[nc + j] += pow(gsl_matrix_get(f, i, j) - buf[j], 2);
    }
    if (st == LSE_OK)
        st = lse_comm_sum(&pc->dist, buf + nc, nc, fn, err);
    for (size_t j = 0; st == LSE_OK && j < nc; j++) {
        const double sd = sqrt(buf[nc + j] / N);
        if (!(sd > 0.0) || !isfinite(sd))
            continue;
        for (size_t i = 0; i < n; i++)
            gsl_matrix_set(f, i, j, (gsl_matrix_get(f, i, j) - buf[j]) / sd);
    }
    free(buf);
    return st;
}

/* Initial parameters in the graph's nodes by opts->init (the caller has
 * loaded the model's parameters into them: the given start). */
lse_status slds_initialize(const lse_slds *m, sgraph *sg,
                           const lse_slds_opts *o, const lse_mstep_opts *mo,
                           gsl_rng *rng, par_ctx *pc, const char *fn,
                           lse_error *err)
{
    if (o->init == LSE_SLDS_INIT_GIVEN)
        return LSE_OK;
    lse_status st = LSE_OK;
    const size_t n = sg->lay.n_steps, K = m->K, d = m->d;
    gsl_matrix *resp = gsl_matrix_alloc(n, K);
    if (resp == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    if (o->init == LSE_SLDS_INIT_RANDOM) {
        /* the draws of the steps before this share, its own, the rest:
         * the generator ends in the same state on every process */
        const size_t before = pc->dist.offset,
                     after = pc->dist.n_total - pc->dist.offset - n;
        for (size_t i = 0; i < before * K; i++)
            (void)gsl_rng_uniform_pos(rng);
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) {
                const double u = gsl_rng_uniform_pos(rng);
                gsl_matrix_set(resp, i, k, u);
                s += u;
            }
            for (size_t k = 0; k < K; k++)
                gsl_matrix_set(resp, i, k, gsl_matrix_get(resp, i, k) / s);
        }
        for (size_t i = 0; i < after * K; i++)
            (void)gsl_rng_uniform_pos(rng);
        st = mstep_from_resp(m, sg, resp, mo, pc, fn, err);
        gsl_matrix_free(resp);
        return st;
    }
    /* k-means++ on the one-step residuals of the pooled least-squares fit
     * (every mode gets the pooled fit when every responsibility is 1),
     * joined with the steps x_t themselves; each column standardized.
     * Residuals alone separate modes that switch often (their fixed points
     * are not visited); for sticky modes an affine pooled fit can map every
     * visited fixed point onto itself, and the positions separate them. */
    gsl_matrix_set_all(resp, 1.0);
    st = mstep_from_resp(m, sg, resp, mo, pc, fn, err);
    gsl_matrix *r = NULL;
    size_t *labels = NULL;
    if (st == LSE_OK) {
        r = gsl_matrix_alloc(n, 2 * d);
        labels = malloc(n * sizeof *labels);
        if (r == NULL || labels == NULL)
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    if (st == LSE_OK) {
        lse_sim_args args;
        st = lse_term_sim_args(sg->dyn, &args);
        if (st != LSE_OK)
            st = lse_error_set(err, st, fn, "similarity arguments: %s",
                               lse_strerror(st));
        if (st == LSE_OK) {
            const gsl_matrix *av = lse_node_value(sg->a);
            const gsl_matrix_const_view a0 = gsl_matrix_const_view_array(
                gsl_matrix_const_ptr(av, 0, 0), d, args.context->size2);
            gsl_matrix_view res = gsl_matrix_submatrix(r, 0, 0, n, d);
            gsl_matrix_view pos = gsl_matrix_submatrix(r, 0, d, n, d);
            int rc = gsl_matrix_memcpy(&res.matrix, args.child);
            if (rc == GSL_SUCCESS)
                rc = gsl_matrix_memcpy(&pos.matrix, args.child);
            if (rc == GSL_SUCCESS)
                rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0,
                                    args.context, &a0.matrix, 1.0, &res.matrix);
            if (rc != GSL_SUCCESS)
                st = lse_error_set(err, lse_status_from_gsl(rc), fn,
                                   "residuals: %s", gsl_strerror(rc));
            for (size_t i = 0; st == LSE_OK && i < n; i++)
                for (size_t j = 0; j < d; j++)
                    *gsl_matrix_ptr(r, i, j) -=
                        gsl_matrix_get(lse_node_value(sg->b), 0, j);
            if (st == LSE_OK)
                st = standardize_columns(r, pc, fn, err);
        }
    }
    if (st == LSE_OK)
        st = kmeans(r, K, rng, labels, pc, fn, err);
    if (st == LSE_OK) {
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < K; k++)
                gsl_matrix_set(resp, i, k,
                               (labels[i] == k ? 1.0 - INIT_FLOOR : 0.0) +
                                   INIT_FLOOR / (double)K);
        st = mstep_from_resp(m, sg, resp, mo, pc, fn, err);
    }
    gsl_matrix_free(r);
    free(labels);
    gsl_matrix_free(resp);
    return st;
}
