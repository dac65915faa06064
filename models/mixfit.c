/* Starts, emEM and the parametric bootstrap for lse_gmm (mixfit.h), on
 * its public API only. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_eigen.h>

#include <lsegraph/cov.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>

#include <lsegraph/core.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>

#include "mixfit-private.h"

/* copy the parameters of src into dst (same K, d, type) */
static lse_status copy_params(lse_gmm *dst, const lse_gmm *src, lse_error *err)
{
    lse_status st = lse_gmm_set_weights(dst, lse_gmm_weights(src), err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(dst, lse_gmm_means(src), err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(dst, lse_gmm_covariances(src), err);
    return st;
}

static lse_status clone(const lse_gmm *src, lse_gmm **out, lse_error *err)
{
    lse_status st =
        lse_gmm_cov_model(src) != LSE_COV_MODEL_NONE
            ? lse_gmm_new_model(lse_gmm_k(src), lse_gmm_dim(src),
                                lse_gmm_cov_model(src), out, NULL)
            : lse_gmm_new(lse_gmm_k(src), lse_gmm_dim(src),
                          lse_gmm_cov_type(src), out, NULL);
    if (st != LSE_OK)
        return lse_error_set(err, st, "lse_gmm", "out of memory");
    st = copy_params(*out, src, err);
    if (st != LSE_OK) {
        lse_gmm_free(*out);
        *out = NULL;
    }
    return st;
}

/* 1 when the symmetric d x d matrix a is positive definite */
static int is_pd(const gsl_matrix *a, gsl_matrix *tmp)
{
    gsl_matrix_memcpy(tmp, a);
    gsl_error_handler_t *h = gsl_set_error_handler_off();
    const int rc = gsl_linalg_cholesky_decomp1(tmp);
    gsl_set_error_handler(h);
    return rc == GSL_SUCCESS;
}

/* The scatter matrices W_k about the means mu (block k of w) and the
 * data's covariance about mall (into all), both zeroed before. */
static void scatter(const gsl_matrix *x, const size_t *labels,
                    const gsl_matrix *mu, const gsl_vector *mall,
                    gsl_matrix *w, gsl_matrix *all)
{
    const size_t n = x->size1, d = x->size2;
    for (size_t i = 0; i < n; i++) {
        const size_t c = labels[i];
        for (size_t a = 0; a < d; a++) {
            const double ea = gsl_matrix_get(x, i, a) - gsl_matrix_get(mu, c, a);
            const double fa = gsl_matrix_get(x, i, a) - gsl_vector_get(mall, a);
            for (size_t b = 0; b < d; b++) {
                *gsl_matrix_ptr(w, c * d + a, b) +=
                    ea * (gsl_matrix_get(x, i, b) - gsl_matrix_get(mu, c, b));
                *gsl_matrix_ptr(all, a, b) +=
                    fa * (gsl_matrix_get(x, i, b) - gsl_vector_get(mall, b)) /
                    (double)n;
            }
        }
    }
}

/* The covariances of the given type from the full ones in w (k d x d),
 * the tied one falling back to the data's covariance all; *out is NULL
 * when out of memory. -1 for an unknown type. */
static int cov_of_type(lse_cov_type type, const gsl_matrix *w,
                       const gsl_matrix *all, gsl_matrix *tmp, size_t n,
                       double reg_covar, gsl_matrix **out)
{
    const size_t d = w->size2, k = w->size1 / d;
    gsl_matrix *cov = NULL;
    switch (type) {
    case LSE_COV_FULL:
        cov = gsl_matrix_alloc(k * d, d);
        if (cov != NULL)
            gsl_matrix_memcpy(cov, w);
        break;
    case LSE_COV_DIAG:
        cov = gsl_matrix_alloc(k, d);
        for (size_t c = 0; cov != NULL && c < k; c++)
            for (size_t a = 0; a < d; a++)
                gsl_matrix_set(cov, c, a, gsl_matrix_get(w, c * d + a, a));
        break;
    case LSE_COV_SPHERICAL:
        cov = gsl_matrix_alloc(k, 1);
        for (size_t c = 0; cov != NULL && c < k; c++) {
            double t = 0.0;
            for (size_t a = 0; a < d; a++)
                t += gsl_matrix_get(w, c * d + a, a);
            gsl_matrix_set(cov, c, 0, t / (double)d);
        }
        break;
    case LSE_COV_TIED:
        cov = gsl_matrix_calloc(d, d);
        for (size_t c = 0; cov != NULL && c < k; c++)
            for (size_t a = 0; a < d; a++)
                for (size_t b = 0; b < d; b++)
                    *gsl_matrix_ptr(cov, a, b) +=
                        gsl_matrix_get(w, c * d + a, b) / (double)n;
        for (size_t a = 0; cov != NULL && a < d; a++)
            *gsl_matrix_ptr(cov, a, a) += reg_covar;
        if (cov != NULL && !is_pd(cov, tmp))
            gsl_matrix_memcpy(cov, all);
        break;
    default:
        return -1;
    }
    *out = cov;
    return 0;
}

lse_status lse_gmm_init_labels(lse_gmm *m, const gsl_matrix *x,
                               const size_t *labels, double reg_covar,
                               lse_error *err)
{
    static const char fn[] = "lse_gmm_init_labels";
    if (m == NULL || x == NULL || labels == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m), n = x->size1;
    if (x->size2 != d || n == 0)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data are %zu x %zu, the model d = %zu", n,
                             x->size2, d);
    if (!(reg_covar >= 0.0) || !isfinite(reg_covar))
        return lse_error_set(err, LSE_EDOM, fn, "reg_covar must be >= 0");
    for (size_t i = 0; i < n; i++) {
        if (labels[i] >= k)
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "row %zu: label %zu >= K = %zu", i,
                                 labels[i], k);
        for (size_t j = 0; j < d; j++)
            if (!isfinite(gsl_matrix_get(x, i, j)))
                return lse_error_set(err, LSE_ENONFINITE, fn,
                                     "row %zu column %zu is not finite", i, j);
    }
    const lse_cov_type type = lse_gmm_cov_type(m);
    gsl_vector *cnt = gsl_vector_calloc(k);
    gsl_matrix *mu = gsl_matrix_calloc(k, d), *all = gsl_matrix_calloc(d, d);
    gsl_matrix *w = gsl_matrix_calloc(k * d, d), *tmp = gsl_matrix_alloc(d, d);
    gsl_vector *mall = gsl_vector_calloc(d);
    gsl_matrix *cov = NULL;
    lse_status st = LSE_OK;
    if (cnt == NULL || mu == NULL || all == NULL || w == NULL ||
        tmp == NULL || mall == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t c = labels[i];
        *gsl_vector_ptr(cnt, c) += 1.0;
        for (size_t j = 0; j < d; j++) {
            *gsl_matrix_ptr(mu, c, j) += gsl_matrix_get(x, i, j);
            *gsl_vector_ptr(mall, j) += gsl_matrix_get(x, i, j) / (double)n;
        }
    }
    for (size_t c = 0; c < k; c++) {
        if (gsl_vector_get(cnt, c) == 0.0) {
            st = lse_error_set(err, LSE_EINVAL, fn,
                               "component %zu has no rows", c);
            goto out;
        }
        for (size_t j = 0; j < d; j++)
            *gsl_matrix_ptr(mu, c, j) /= gsl_vector_get(cnt, c);
    }
    scatter(x, labels, mu, mall, w, all);
    /* full per-component covariances, with the fallback, in w */
    for (size_t c = 0; c < k; c++) {
        gsl_matrix_view blk = gsl_matrix_submatrix(w, c * d, 0, d, d);
        const double nk = gsl_vector_get(cnt, c);
        gsl_matrix_memcpy(tmp, &blk.matrix);
        gsl_matrix_scale(tmp, 1.0 / nk);
        for (size_t a = 0; a < d; a++)
            *gsl_matrix_ptr(tmp, a, a) += reg_covar;
        gsl_matrix *chk = gsl_matrix_alloc(d, d);
        if (chk == NULL) {
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
            goto out;
        }
        const int pd = is_pd(tmp, chk);
        gsl_matrix_free(chk);
        if (type != LSE_COV_TIED && !pd) {
            gsl_matrix_add(&blk.matrix, all);
            gsl_matrix_scale(&blk.matrix, 1.0 / (nk + 1.0));
        } else if (type != LSE_COV_TIED) {
            gsl_matrix_scale(&blk.matrix, 1.0 / nk);
        }
        if (type != LSE_COV_TIED)
            for (size_t a = 0; a < d; a++)
                *gsl_matrix_ptr(&blk.matrix, a, a) += reg_covar;
    }
    if (cov_of_type(type, w, all, tmp, n, reg_covar, &cov) != 0) {
        st = lse_error_set(err, LSE_EINVAL, fn, "unknown covariance type");
        goto out;
    }
    if (cov == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    gsl_vector_scale(cnt, 1.0 / (double)n);
    st = lse_gmm_set_weights(m, cnt, err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(m, mu, err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(m, cov, err);
out:
    gsl_vector_free(cnt);
    gsl_vector_free(mall);
    gsl_matrix_free(mu);
    gsl_matrix_free(all);
    gsl_matrix_free(w);
    gsl_matrix_free(tmp);
    gsl_matrix_free(cov);
    return st;
}

lse_gmm_emem_opts lse_gmm_emem_opts_default(size_t k)
{
    lse_gmm_emem_opts e;
    e.n_starts = LSE_GMM_EMEM_STARTS + LSE_GMM_EMEM_STARTS_PER_K * k;
    e.n_random = LSE_GMM_EMEM_RANDOM + LSE_GMM_EMEM_RANDOM_PER_K * k;
    e.short_iter = LSE_GMM_EMEM_SHORT;
    e.n_keep = LSE_GMM_EMEM_KEEP;
    e.n_rounds = LSE_GMM_EMEM_ROUNDS;
    e.short_tol = LSE_GMM_EMEM_SHORT_TOL;
    e.degenerate = LSE_GMM_EMEM_DEGENERATE;
    e.smem = LSE_GMM_SMEM_TRIES;
    return e;
}

/* emEM's degeneracy guard: 1 when m's smallest covariance eigenvalue is
 * below e->degenerate x o->reg_covar (0 when the guard is off) */
static int degenerate(const lse_gmm *m, const lse_gmm_fit_opts *o,
                      const lse_gmm_emem_opts *e)
{
    double lo;
    if (!(e->degenerate > 0.0) || lse_gmm_min_eigenvalue(m, &lo, NULL) != LSE_OK)
        return 0;
    return lo < e->degenerate * o->reg_covar;
}

/* one candidate of emEM: a short run's fit, its log-likelihood, kind of
 * start (0: o->init, 1: random, 2: given) and whether it is degenerate
 * (the guard, lse_gmm_emem_opts.degenerate) */
typedef struct cand {
    lse_gmm *m;
    double ll;
    int kind;
    int deg;
} cand;

/* emEM's order: non-degenerate first, then by decreasing log-likelihood */
static int cand_cmp(const void *a, const void *b)
{
    const cand *p = a, *q = b;
    if (p->deg != q->deg)
        return p->deg - q->deg;
    return p->ll > q->ll ? -1 : p->ll < q->ll ? 1 : 0;
}

/* Sort c[0..*n) in emEM's order (cand_cmp), drop the runs that reached
 * the point of a better one (log-likelihoods within 1e-10 relative) and
 * keep the n_keep best (kinds: and the best of each kind); the others are
 * freed. */
static void cand_prune(cand *c, size_t *n, size_t n_keep, int kinds)
{
    qsort(c, *n, sizeof *c, cand_cmp);
    int seen[3] = {0, 0, 0};
    size_t out = 0;
    for (size_t i = 0; i < *n; i++) {
        const int dup = out > 0 && c[out - 1].deg == c[i].deg &&
                        fabs(c[out - 1].ll - c[i].ll) <= 1e-10 * fabs(c[i].ll);
        if (!dup && (out < n_keep || (kinds && !seen[c[i].kind]))) {
            seen[c[i].kind] = 1;
            c[out++] = c[i];
        } else {
            lse_gmm_free(c[i].m);
        }
    }
    *n = out;
}

/* the short run s from its start (o->init's draw, random, given[s - ...])
 * into m */
static lse_status short_run(lse_gmm *m, const gsl_matrix *x,
                            const lse_gmm_fit_opts *o,
                            const lse_gmm_emem_opts *e,
                            const lse_gmm *const *given, size_t s, int *kind,
                            lse_error *err)
{
    lse_gmm_fit_opts so = *o;
    so.n_init = 1;
    so.max_iter = e->short_iter;
    so.tol = e->short_tol > o->tol ? e->short_tol : o->tol;
    so.seed = o->seed + s;
    so.progress = NULL;
    *kind = 0;
    if (s >= e->n_starts && s < e->n_starts + e->n_random) {
        so.init = LSE_GMM_INIT_RANDOM;
        *kind = 1;
    } else if (s >= e->n_starts + e->n_random) {
        so.init = LSE_GMM_INIT_GIVEN;
        *kind = 2;
        const lse_status st =
            copy_params(m, given[s - e->n_starts - e->n_random], err);
        if (st != LSE_OK)
            return st;
    }
    return lse_gmm_fit(m, x, &so, err);
}

/*
 * emEM's runs side by side. The short runs, and the continued runs, are
 * independent fits (their own seed, start and options): they run on up to
 * lse_get_num_threads() threads (one process only: under o->reduce every
 * process must make the same calls in the same order), each thread fitting
 * on its own working mixture, and their outcomes are collected in run
 * order, so the result is the same for every thread count. Inside, the
 * fits run on one thread (no nested teams, lse_get_num_threads). Run 0
 * reports live; the log messages and progress calls of the other runs are
 * recorded and replayed in run order after the loop, so a log handler or
 * progress callback sees the sequence of one thread and is never called
 * from two threads at once.
 */

/* the outcome of one run: the fit's status and error, a failure that ends
 * emEM (hard: out of memory), and the fit */
typedef struct run_out {
    lse_status st, hard;
    lse_error e, he;
    double ll;
    int kind, deg;
    lse_gmm *m; /* a short run's fit (a new mixture) */
} run_out;

/* what the runs share */
typedef struct run_ctx {
    const gsl_matrix *x;
    const lse_gmm_fit_opts *o;
    const lse_gmm_emem_opts *e;
    const lse_gmm *const *given; /* short runs */
    size_t s0;                   /* short runs: task i is run s0 + i */
    cand *c;                     /* continued runs */
    size_t max_iter;             /* continued runs */
} run_ctx;

/* short run s on wm into r */
static void task_short(const run_ctx *p, size_t s, lse_gmm *wm, run_out *r)
{
    r->st = short_run(wm, p->x, p->o, p->e, p->given, p->s0 + s, &r->kind,
                      &r->e);
    if (r->st != LSE_OK)
        return;
    r->ll = lse_gmm_info(wm)->loglik;
    r->deg = degenerate(wm, p->o, p->e);
    r->hard = clone(wm, &r->m, &r->he);
    if (r->hard == LSE_OK)
        r->hard = lse_gmm_copy(r->m, wm, &r->he);
    if (r->hard != LSE_OK) {
        lse_gmm_free(r->m);
        r->m = NULL;
    }
}

/* candidate i continued by p->max_iter iterations on wm (into p->c[i].m) */
static void task_cont(const run_ctx *p, size_t i, lse_gmm *wm, run_out *r)
{
    lse_gmm_fit_opts fo = *p->o;
    fo.init = LSE_GMM_INIT_GIVEN;
    fo.n_init = 1;
    fo.max_iter = p->max_iter;
    fo.progress = p->max_iter == p->o->max_iter ? p->o->progress : NULL;
    lse_gmm_par_progress(&fo); /* recorded, unless this run is live */
    r->hard = copy_params(wm, p->c[i].m, &r->he);
    if (r->hard != LSE_OK)
        return;
    r->st = lse_gmm_fit(wm, p->x, &fo, &r->e);
    if (r->st != LSE_OK)
        return;
    r->hard = lse_gmm_copy(p->c[i].m, wm, &r->he);
    r->ll = lse_gmm_info(wm)->loglik;
    r->deg = degenerate(wm, p->o, p->e);
}

/* emEM's runs of a kind (short: task_short, else task_cont) as tasks of
 * lse_gmm_par_run; thread t fits on wm[t] */
typedef struct run_job {
    const run_ctx *p;
    int shorts;
    lse_gmm *const *wm;
    run_out *r;
} run_job;

static void run_job_task(void *ctx, size_t i, int tid)
{
    const run_job *j = ctx;
    if (j->shorts)
        task_short(j->p, i, j->wm[tid], &j->r[i]);
    else
        task_cont(j->p, i, j->wm[tid], &j->r[i]);
}

/* runs 0..n_task of a kind on nt threads; r[0..n_task) zeroed before */
static void run_all(const run_ctx *p, int shorts, size_t n_task, int nt,
                    lse_gmm *const *wm, run_out *r)
{
    run_job j = {.p = p, .shorts = shorts, .wm = wm, .r = r};
    lse_gmm_par_run(run_job_task, &j, n_task, nt, p->o);
}

/*
 * Short runs ahead (lse_gmm_emem_ahead_begin): the runs from the starts
 * emEM draws (o->init's and the random ones) for every K of a range are
 * tasks of a crew's work ahead (lse_gmm_bg_begin): its helpers run them
 * whenever they have no batch, and lse_gmm_fit_emem of the same thread
 * takes them (ahead_take) when its call matches. A short run depends only
 * on its start (seed o->seed + s, K, the data and options), not on the
 * thread, the working mixture or the runs before it, so the results are
 * the same bits as the run in lse_gmm_fit_emem would give.
 */
typedef struct ahead {
    const gsl_matrix *x;
    lse_gmm_fit_opts o;
    size_t d, k_lo, k_hi, n;
    lse_cov_type cov;
    lse_gmm_emem_opts *e; /* per K, the guard as lse_gmm_fit_emem sets it */
    size_t *first;        /* per K and one more: K's first task */
    int *taken;           /* per K: collected */
    run_out *r;           /* per task */
    lse_gmm_bg *bg;       /* NULL: nothing runs ahead */
} ahead;

static _Thread_local ahead *tl_ahead;
static _Thread_local size_t tl_ahead_taken; /* short runs taken (tests) */

size_t gmm_ahead_taken(void) { return tl_ahead_taken; }

/* task i: short run s of K into a->r[i], on a mixture of its own */
static void ahead_task(void *ctx, size_t i, int tid)
{
    const ahead *a = ctx;
    size_t j = 0;
    (void)tid;
    while (a->first[j + 1] <= i)
        j++;
    run_out *r = &a->r[i];
    lse_gmm *wm = NULL;
    if (lse_gmm_new(a->k_lo + j, a->d, a->cov, &wm, NULL) != LSE_OK) {
        r->hard = lse_error_set(&r->he, LSE_ENOMEM, "lse_gmm_fit_emem",
                                "out of memory");
        return;
    }
    const run_ctx p = {.x = a->x, .o = &a->o, .e = &a->e[j]};
    task_short(&p, i - a->first[j], wm, r);
    lse_gmm_free(wm);
}

/* 1 when a short run under options p equals one under q */
static int same_short_opts(const lse_gmm_fit_opts *p,
                           const lse_gmm_fit_opts *q)
{
    return p->init == q->init && p->tol == q->tol &&
           p->reg_covar == q->reg_covar && p->lloyd_iter == q->lloyd_iter &&
           p->seed == q->seed && p->sample_weight == q->sample_weight &&
           p->missing == q->missing && p->reduce == NULL &&
           q->reduce == NULL && p->accel == q->accel;
}

/* The drawn starts' short runs of emEM for K on x, o and budget e (the
 * guard set), from the thread's work ahead into r[0 ..) when it holds
 * them (each once): their number (e->n_starts + e->n_random), else 0 */
static size_t ahead_take(size_t k, const gsl_matrix *x,
                         const lse_gmm_fit_opts *o, const lse_gmm_emem_opts *e,
                         int nt, run_out *r)
{
    ahead *a = tl_ahead;
    if (a == NULL || a->bg == NULL || k < a->k_lo || k > a->k_hi ||
        a->taken[k - a->k_lo] || x != a->x || !same_short_opts(o, &a->o))
        return 0;
    const size_t j = k - a->k_lo, n = e->n_starts + e->n_random;
    const lse_gmm_emem_opts *f = &a->e[j];
    if (f->n_starts != e->n_starts || f->n_random != e->n_random ||
        f->short_iter != e->short_iter || f->short_tol != e->short_tol ||
        f->degenerate != e->degenerate ||
        !lse_gmm_bg_collect(a->bg, a->first[j], n, nt, o))
        return 0;
    a->taken[j] = 1;
    tl_ahead_taken += n;
    memcpy(r, &a->r[a->first[j]], n * sizeof *r);
    memset(&a->r[a->first[j]], 0, n * sizeof *r); /* the fits are r's now */
    return n;
}

static void ahead_free(ahead *a)
{
    if (a == NULL)
        return;
    lse_gmm_bg_end(a->bg);
    for (size_t i = 0; a->r != NULL && i < a->n; i++)
        lse_gmm_free(a->r[i].m);
    free(a->r);
    free(a->e);
    free(a->first);
    free(a->taken);
    free(a);
}

/* the drawn starts' runs of every K: a->first and a->n (overflow
 * checked); 0 on overflow */
static int ahead_count(ahead *a, const lse_gmm_emem_opts *e)
{
    a->n = 0;
    for (size_t k = a->k_lo; k <= a->k_hi; k++) {
        const size_t j = k - a->k_lo, m = e[j].n_starts + e[j].n_random;
        if (m < e[j].n_starts || a->n + m < a->n)
            return 0;
        a->first[j] = a->n;
        a->n += m;
    }
    a->first[a->k_hi - a->k_lo + 1] = a->n;
    return 1;
}

/* 1 when nothing should run ahead: one thread, several processes, an
 * mclust model, given starts, or passes that use several threads */
static int ahead_off(const lse_gmm *like, const gsl_matrix *x,
                     const lse_gmm_fit_opts *o, size_t k_hi)
{
    const double d1 = 1.0 + (double)lse_gmm_dim(like);
    return o->reduce != NULL || o->init == LSE_GMM_INIT_GIVEN ||
           lse_gmm_cov_model(like) != LSE_COV_MODEL_NONE ||
           lse_gmm_par_threads(like, o, (size_t)-1) < 2 ||
           !((double)x->size1 * (double)k_hi * d1 * d1 <
             lse_get_thread_min_work());
}

/* a's budgets: e with the guard that lse_gmm_fit_emem applies (off where
 * the data are as thin as a collapse; the threshold once per factor) */
static lse_status ahead_budgets(ahead *a, const lse_gmm *like,
                                const lse_gmm_emem_opts *e, lse_error *err)
{
    double factor = NAN, thr = 0.0;
    for (size_t j = 0; j <= a->k_hi - a->k_lo; j++) {
        a->e[j] = e[j];
        if (!(e[j].degenerate == factor)) {
            factor = e[j].degenerate;
            const lse_status st =
                lse_gmm_emem_threshold(like, a->x, &a->o, factor, &thr, err);
            if (st != LSE_OK)
                return st;
        }
        if (!(thr > 0.0))
            a->e[j].degenerate = 0.0;
    }
    return LSE_OK;
}

lse_status lse_gmm_emem_ahead_begin(const lse_gmm *like, const gsl_matrix *x,
                                    const lse_gmm_fit_opts *o,
                                    const lse_gmm_emem_opts *e, size_t k_lo,
                                    size_t k_hi, lse_error *err)
{
    static const char fn[] = "lse_gmm_emem_ahead_begin";
    if (like == NULL || x == NULL || o == NULL || e == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (k_lo == 0 || k_lo > k_hi || k_hi - k_lo >= (size_t)-2)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "K range %zu .. %zu: need 1 <= k_lo <= k_hi", k_lo,
                             k_hi);
    if (tl_ahead != NULL)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "a scope is open already on this thread");
    const size_t nk = k_hi - k_lo + 1;
    ahead *a = calloc(1, sizeof *a);
    if (a == NULL)
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    *a = (ahead){.x = x, .o = *o, .d = lse_gmm_dim(like), .k_lo = k_lo,
                 .k_hi = k_hi, .cov = lse_gmm_cov_type(like)};
    a->o.progress = NULL;
    a->o.progress_user = NULL;
    tl_ahead = a; /* open, also when nothing runs ahead */
    if (ahead_off(like, x, o, k_hi))
        return LSE_OK;
    a->e = calloc(nk, sizeof *a->e);
    a->first = calloc(nk + 1, sizeof *a->first);
    a->taken = calloc(nk, sizeof *a->taken);
    lse_status st = a->e == NULL || a->first == NULL || a->taken == NULL
                        ? lse_error_set(err, LSE_ENOMEM, fn, "out of memory")
                        : LSE_OK;
    if (st == LSE_OK && !ahead_count(a, e))
        st = lse_error_set(err, LSE_EINVAL, fn, "too many short runs");
    if (st == LSE_OK)
        st = ahead_budgets(a, like, e, err);
    if (st == LSE_OK && a->n > 0) {
        a->r = calloc(a->n, sizeof *a->r);
        if (a->r == NULL)
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    if (st == LSE_OK && a->n > 0) /* no crew: nothing runs ahead */
        a->bg = lse_gmm_bg_begin(lse_gmm_par_threads(like, o, (size_t)-1),
                                 ahead_task, a, a->n);
    if (st != LSE_OK) {
        tl_ahead = NULL;
        ahead_free(a);
    }
    return st;
}

void lse_gmm_emem_ahead_end(void)
{
    ahead *a = tl_ahead;
    tl_ahead = NULL;
    ahead_free(a);
}

/* the first hard failure of r (in run order) into *hard and err */
static void first_hard(const run_out *r, lse_status *hard, lse_error *err)
{
    if (*hard == LSE_OK && r->hard != LSE_OK) {
        *hard = r->hard;
        if (err != NULL)
            *err = r->he;
    }
}

/* Continue each candidate by max_iter EM iterations (o->tol: a converged
 * run stops early) on up to nt threads (working mixtures wm); the ones
 * that fail are dropped, in order. *last and *e2: the status of the last
 * run and the error of the last that failed. */
static lse_status cand_continue(cand *c, size_t *n, lse_gmm *const *wm,
                                int nt, const gsl_matrix *x,
                                const lse_gmm_fit_opts *o,
                                const lse_gmm_emem_opts *e, size_t max_iter,
                                lse_status *last, lse_error *e2,
                                lse_error *err)
{
    if (*n == 0)
        return LSE_OK;
    run_out *r = calloc(*n, sizeof *r);
    if (r == NULL)
        return lse_error_set(err, LSE_ENOMEM, "lse_gmm_fit_emem",
                             "out of memory");
    const run_ctx p = {.x = x, .o = o, .e = e, .c = c, .max_iter = max_iter};
    run_all(&p, 0, *n, (size_t)nt < *n ? nt : (int)*n, wm, r);
    lse_status hard = LSE_OK;
    size_t out = 0;
    for (size_t i = 0; i < *n; i++) {
        first_hard(&r[i], &hard, err);
        if (r[i].hard == LSE_OK && r[i].st != LSE_OK) {
            *last = r[i].st;
            *e2 = r[i].e;
            lse_gmm_free(c[i].m);
            continue;
        }
        if (r[i].hard == LSE_OK) {
            *last = LSE_OK;
            c[i].ll = r[i].ll;
            c[i].deg = r[i].deg;
        }
        c[out++] = c[i]; /* kept (also after a hard failure, to be freed) */
    }
    *n = out;
    free(r);
    return hard;
}

/* emEM's short runs (o->init's draws, random responsibilities, the given
 * starts) on up to nt threads into c[0..*n), in run order */
static lse_status short_runs(cand *c, size_t *n, size_t n_runs,
                             lse_gmm *const *wm, int nt, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o,
                             const lse_gmm_emem_opts *e,
                             const lse_gmm *const *given, lse_status *last,
                             lse_error *e2, lse_error *err)
{
    run_out *r = calloc(n_runs, sizeof *r);
    if (r == NULL)
        return lse_error_set(err, LSE_ENOMEM, "lse_gmm_fit_emem",
                             "out of memory");
    /* the drawn starts' runs from the work ahead, when it holds them */
    const size_t s0 = ahead_take(lse_gmm_k(wm[0]), x, o, e, nt, r);
    const run_ctx p = {.x = x, .o = o, .e = e, .given = given, .s0 = s0};
    if (s0 < n_runs)
        run_all(&p, 1, n_runs - s0, nt, wm, r + s0);
    lse_status hard = LSE_OK;
    for (size_t s = 0; s < n_runs; s++) {
        first_hard(&r[s], &hard, err);
        if (r[s].hard == LSE_OK) {
            *last = r[s].st;
            if (r[s].st != LSE_OK)
                *e2 = r[s].e;
        }
        if (r[s].m == NULL)
            continue;
        c[*n].m = r[s].m;
        c[*n].ll = r[s].ll;
        c[*n].kind = r[s].kind;
        c[*n].deg = r[s].deg;
        (*n)++;
    }
    free(r);
    return hard;
}

/* emEM's final runs: c[0..*n) pruned to the n_keep best in emEM's order
 * (with the guard on, n_keep more kept in reserve), the n_keep best
 * continued to convergence (side by side, on up to nt threads); while
 * every continued run is degenerate, the next in reserve is continued too
 * (one at a time); the reserve left is freed. On return c[0..*n) are the
 * continued runs that succeeded. */
static lse_status cand_final(cand *c, size_t *n, lse_gmm *const *wm, int nt,
                             const gsl_matrix *x, const lse_gmm_fit_opts *o,
                             const lse_gmm_emem_opts *e, lse_status *last,
                             lse_error *e2, lse_error *err)
{
    const int guard = e->degenerate > 0.0;
    cand_prune(c, n, e->n_keep * (guard ? 2 : 1), 0);
    size_t h = *n < e->n_keep ? *n : e->n_keep;
    const size_t rest = *n - h;
    lse_status st = cand_continue(c, &h, wm, nt, x, o, e, o->max_iter, last,
                                  e2, err);
    memmove(c + h, c + (*n - rest), rest * sizeof *c);
    *n = h + rest;
    if (st != LSE_OK)
        return st;
    size_t done = h;
    int all_deg = 1;
    for (size_t i = 0; i < done; i++)
        all_deg = all_deg && c[i].deg;
    while (guard && all_deg && done < *n) {
        size_t one = 1;
        st = cand_continue(c + done, &one, wm, 1, x, o, e, o->max_iter, last,
                           e2, err);
        if (st != LSE_OK)
            return st;
        if (one == 0) { /* failed and freed */
            memmove(c + done, c + done + 1, (*n - done - 1) * sizeof *c);
            (*n)--;
            continue;
        }
        all_deg = c[done++].deg;
    }
    for (size_t i = done; i < *n; i++)
        lse_gmm_free(c[i].m);
    *n = done;
    return LSE_OK;
}

/* lse_gmm_fit_emem's arguments */
static lse_status emem_check(const lse_gmm *m, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o,
                             const lse_gmm_emem_opts *e,
                             const lse_gmm *const *given, size_t n_given,
                             lse_error *err)
{
    static const char fn[] = "lse_gmm_fit_emem";
    if (m == NULL || x == NULL || o == NULL || e == NULL ||
        (given == NULL && n_given > 0))
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (e->n_starts + e->n_random + n_given == 0 || e->short_iter == 0 ||
        e->n_keep == 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "no start, or short_iter or n_keep 0");
    if (o->init == LSE_GMM_INIT_GIVEN && e->n_starts > 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "emEM draws its starts: init must not be "
                             "LSE_GMM_INIT_GIVEN");
    for (size_t g = 0; g < n_given; g++)
        if (given[g] == NULL || lse_gmm_k(given[g]) != lse_gmm_k(m) ||
            lse_gmm_dim(given[g]) != lse_gmm_dim(m) ||
            lse_gmm_cov_type(given[g]) != lse_gmm_cov_type(m) ||
            lse_gmm_cov_model(given[g]) != lse_gmm_cov_model(m))
            return lse_error_set(err, LSE_EINVAL, fn,
                                 "given start %zu is not a mixture of m's "
                                 "K, d and covariance type", g);
    return LSE_OK;
}

/* the working mixtures of nt threads: wm[0] = m, the others new ones of
 * m's shape (NULL when out of memory) */
static lse_gmm **work_mixtures(lse_gmm *m, int nt)
{
    lse_gmm **wm = calloc((size_t)nt, sizeof *wm);
    if (wm == NULL)
        return NULL;
    wm[0] = m;
    for (int t = 1; t < nt; t++)
        if (clone(m, &wm[t], NULL) != LSE_OK) {
            for (int u = 1; u < t; u++)
                lse_gmm_free(wm[u]);
            free(wm);
            return NULL;
        }
    return wm;
}

static void work_mixtures_free(lse_gmm **wm, int nt)
{
    for (int t = 1; wm != NULL && t < nt; t++)
        lse_gmm_free(wm[t]);
    free(wm);
}

lse_status lse_gmm_fit_emem(lse_gmm *m, const gsl_matrix *x,
                            const lse_gmm_fit_opts *o,
                            const lse_gmm_emem_opts *e,
                            const lse_gmm *const *given, size_t n_given,
                            lse_error *err)
{
    static const char fn[] = "lse_gmm_fit_emem";
    lse_status st = emem_check(m, x, o, e, given, n_given, err);
    double thr = 0.0;
    if (st == LSE_OK)
        st = lse_gmm_emem_threshold(m, x, o, e->degenerate, &thr, err);
    if (st != LSE_OK)
        return st;
    /* the guard is off when the data itself is as thin as a collapse */
    lse_gmm_emem_opts eg = *e;
    if (!(thr > 0.0))
        eg.degenerate = 0.0;
    e = &eg;
    lse_gmm_cache_begin(); /* the fits and queries share their scratch */
    /* one crew for every batch below, split-and-merge EM's included */
    lse_gmm_par_begin(lse_gmm_par_threads(m, o, (size_t)-1));
    const size_t n_runs = e->n_starts + e->n_random + n_given;
    const int nt = lse_gmm_par_threads(m, o, n_runs);
    cand *c = calloc(n_runs, sizeof *c);
    lse_gmm **wm = work_mixtures(m, nt);
    size_t n = 0;
    lse_status last = LSE_OK;
    lse_error e2;
    if (c == NULL || wm == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    /* short runs: o->init's draws, random responsibilities, the given
     * starts */
    st = short_runs(c, &n, n_runs, wm, nt, x, o, e, given, &last, &e2, err);
    if (st != LSE_OK)
        goto out;
    /* further rounds of short_iter for the best third (at least n_keep,
     * and the best of each kind) */
    for (size_t r = 1; r < e->n_rounds && n > 0; r++) {
        cand_prune(c, &n, e->n_keep > (n + 2) / 3 ? e->n_keep : (n + 2) / 3,
                   1);
        st = cand_continue(c, &n, wm, nt, x, o, e, e->short_iter, &last, &e2,
                           err);
        if (st != LSE_OK)
            goto out;
    }
    /* the n_keep best to convergence (and, under the guard, up to n_keep
     * more in reserve when those all end degenerate) */
    st = cand_final(c, &n, wm, nt, x, o, e, &last, &e2, err);
    if (st != LSE_OK)
        goto out;
    if (n == 0) {
        if (err != NULL)
            *err = e2;
        st = last;
        goto out;
    }
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (cand_cmp(&c[i], &c[best]) < 0)
            best = i;
    if (c[best].deg)
        lse_log(LSE_LOG_INFO,
                "emEM, K = %zu: all %zu final runs are degenerate (a "
                "covariance eigenvalue below %g x reg_covar); kept the "
                "highest, log-likelihood %.10g",
                lse_gmm_k(m), n, e->degenerate, c[best].ll);
    st = lse_gmm_copy(m, c[best].m, err);
    if (st == LSE_OK && e->smem > 0) { /* split-and-merge moves (gmm_smem.c) */
        lse_gmm_smem_opts so = lse_gmm_smem_opts_default();
        so.n_tries = e->smem;
        so.degenerate = e->degenerate;
        st = lse_gmm_smem(m, x, o, &so, NULL, err);
    }
out:
    for (size_t i = 0; i < n; i++)
        lse_gmm_free(c[i].m);
    free(c);
    work_mixtures_free(wm, nt);
    lse_gmm_par_end();
    lse_gmm_cache_end();
    return st;
}

/* the responsibility-weighted mean and covariance of component j over the
 * complete rows of x (sample weights w or NULL) into mu (d) and cv (d, d);
 * 0 when the component has no mass */
static int comp_scatter(const lse_gmm *src, const gsl_matrix *x,
                        const gsl_vector *w, const gsl_matrix *resp,
                        size_t j, gsl_vector *mu, gsl_matrix *cv)
{
    const size_t n = x->size1, d = x->size2;
    double tot = 0.0;
    gsl_vector_set_zero(mu);
    gsl_matrix_set_zero(cv);
    for (size_t i = 0; i < n; i++) {
        const double r = gsl_matrix_get(resp, i, j) *
                         (w != NULL ? gsl_vector_get(w, i) : 1.0);
        if (!(r > 0.0))
            continue;
        tot += r;
        for (size_t a = 0; a < d; a++)
            *gsl_vector_ptr(mu, a) += r * gsl_matrix_get(x, i, a);
    }
    if (!(tot > 0.0))
        return 0;
    gsl_vector_scale(mu, 1.0 / tot);
    for (size_t i = 0; i < n; i++) {
        const double r = gsl_matrix_get(resp, i, j) *
                         (w != NULL ? gsl_vector_get(w, i) : 1.0);
        if (!(r > 0.0))
            continue;
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++)
                *gsl_matrix_ptr(cv, a, b) +=
                    r * (gsl_matrix_get(x, i, a) - gsl_vector_get(mu, a)) *
                    (gsl_matrix_get(x, i, b) - gsl_vector_get(mu, b)) / tot;
    }
    (void)src;
    return 1;
}

lse_status lse_gmm_split(const lse_gmm *src, const gsl_matrix *x,
                         const gsl_vector *sample_weight, size_t j,
                         lse_gmm *dst, lse_error *err)
{
    static const char fn[] = "lse_gmm_split";
    if (src == NULL || x == NULL || dst == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_gmm_k(src), d = lse_gmm_dim(src), n = x->size1;
    const lse_cov_type t = lse_gmm_cov_type(src);
    if (lse_gmm_k(dst) != k + 1 || lse_gmm_dim(dst) != d ||
        lse_gmm_cov_type(dst) != t ||
        lse_gmm_cov_model(src) != LSE_COV_MODEL_NONE ||
        lse_gmm_cov_model(dst) != LSE_COV_MODEL_NONE)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "dst must have K + 1 = %zu components, d = %zu "
                             "and src's covariance type (full, diag, "
                             "spherical or tied)", k + 1, d);
    if (j >= k)
        return lse_error_set(err, LSE_ERANGE, fn,
                             "component %zu of K = %zu", j, k);
    if (x->size2 != d || n == 0)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data are %zu x %zu, the model d = %zu", n,
                             x->size2, d);
    if (sample_weight != NULL && sample_weight->size != n)
        return lse_error_set(err, LSE_EDIM, fn,
                             "%zu sample weights for %zu rows",
                             sample_weight->size, n);
    gsl_matrix *resp = gsl_matrix_alloc(n, k), *cv = gsl_matrix_alloc(d, d);
    gsl_matrix *ev = gsl_matrix_alloc(d, d);
    gsl_vector *mu = gsl_vector_alloc(d), *lam = gsl_vector_alloc(d);
    gsl_vector *w = gsl_vector_alloc(k + 1);
    gsl_matrix *means = gsl_matrix_alloc(k + 1, d), *cov = NULL;
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(d);
    const gsl_matrix *c0 = lse_gmm_covariances(src);
    const size_t cr = c0->size1, rows = t == LSE_COV_FULL ? d : 1;
    lse_status st = LSE_OK;
    if (t != LSE_COV_TIED)
        cov = gsl_matrix_alloc(cr + rows, c0->size2);
    if (resp == NULL || cv == NULL || ev == NULL || mu == NULL ||
        lam == NULL || w == NULL || means == NULL || ws == NULL ||
        (t != LSE_COV_TIED && cov == NULL)) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    st = lse_gmm_posterior(src, x, LSE_GMM_MISSING_MARGINALIZE, resp, NULL,
                           err);
    if (st != LSE_OK)
        goto out;
    /* rows with a missing value leave the scatter */
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < d; a++)
            if (isnan(gsl_matrix_get(x, i, a)))
                for (size_t c = 0; c < k; c++)
                    gsl_matrix_set(resp, i, c, 0.0);
    if (!comp_scatter(src, x, sample_weight, resp, j, mu, cv)) {
        st = lse_error_set(err, LSE_EINVAL, fn,
                           "component %zu has no complete row", j);
        goto out;
    }
    lse_eigen_symmv(cv, lam, ev, ws);
    gsl_eigen_symmv_sort(lam, ev, GSL_EIGEN_SORT_VAL_DESC);
    /* the two halves of a Gaussian cut through its mean across the
     * principal axis have means mu +- sqrt(2 / pi) sd along it */
    const double step = sqrt(fmax(gsl_vector_get(lam, 0), 0.0) * 2.0 / M_PI);
    const gsl_vector *w0 = lse_gmm_weights(src);
    const gsl_matrix *m0 = lse_gmm_means(src);
    for (size_t c = 0; c < k; c++) {
        gsl_vector_set(w, c, gsl_vector_get(w0, c));
        for (size_t a = 0; a < d; a++)
            gsl_matrix_set(means, c, a, gsl_matrix_get(m0, c, a));
    }
    gsl_vector_set(w, j, gsl_vector_get(w0, j) / 2.0);
    gsl_vector_set(w, k, gsl_vector_get(w0, j) / 2.0);
    for (size_t a = 0; a < d; a++) {
        const double va = step * gsl_matrix_get(ev, a, 0);
        gsl_matrix_set(means, j, a, gsl_matrix_get(m0, j, a) + va);
        gsl_matrix_set(means, k, a, gsl_matrix_get(m0, j, a) - va);
    }
    st = lse_gmm_set_weights(dst, w, err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(dst, means, err);
    if (st == LSE_OK && t != LSE_COV_TIED) {
        /* both halves keep component j's covariance */
        gsl_matrix_const_view top = gsl_matrix_const_submatrix(c0, 0, 0, cr,
                                                               c0->size2);
        gsl_matrix_view dtop = gsl_matrix_submatrix(cov, 0, 0, cr, c0->size2);
        gsl_matrix_memcpy(&dtop.matrix, &top.matrix);
        gsl_matrix_const_view bj =
            gsl_matrix_const_submatrix(c0, j * rows, 0, rows, c0->size2);
        gsl_matrix_view bk = gsl_matrix_submatrix(cov, cr, 0, rows, c0->size2);
        gsl_matrix_memcpy(&bk.matrix, &bj.matrix);
        st = lse_gmm_set_covariances(dst, cov, err);
    } else if (st == LSE_OK)
        st = lse_gmm_set_covariances(dst, c0, err);
out:
    gsl_matrix_free(resp);
    gsl_matrix_free(cv);
    gsl_matrix_free(ev);
    gsl_vector_free(mu);
    gsl_vector_free(lam);
    gsl_vector_free(w);
    gsl_matrix_free(means);
    gsl_matrix_free(cov);
    if (ws != NULL)
        gsl_eigen_symmv_free(ws);
    return st;
}

void lse_gmm_boot_free(lse_gmm_boot *b)
{
    if (b == NULL)
        return;
    gsl_vector_free(b->weights);
    gsl_matrix_free(b->means);
    gsl_matrix_free(b->covariances);
    memset(b, 0, sizeof *b);
}

lse_status lse_gmm_bootstrap(const lse_gmm *m, size_t n, size_t n_boot,
                             unsigned long seed, const lse_gmm_fit_opts *o,
                             lse_gmm_boot *out, lse_error *err)
{
    static const char fn[] = "lse_gmm_bootstrap";
    if (m == NULL || o == NULL || out == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    memset(out, 0, sizeof *out);
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    if (n_boot < 2)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%zu replicates: need at least 2", n_boot);
    if (n < k || n < 2)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "%zu rows for K = %zu components", n, k);
    const gsl_matrix *c0 = lse_gmm_covariances(m);
    const size_t cr = c0->size1, cc = c0->size2;
    /* running sums (Welford) of the parameters as one vector */
    const size_t np = k + k * d + cr * cc;
    double *mean = calloc(np, sizeof *mean), *m2 = calloc(np, sizeof *m2);
    double *v = malloc(np * sizeof *v);
    gsl_matrix *x = gsl_matrix_alloc(n, d);
    lse_gmm *r = NULL;
    lse_status st = LSE_OK;
    if (mean == NULL || m2 == NULL || v == NULL || x == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    st = clone(m, &r, err);
    if (st != LSE_OK)
        goto out;
    lse_gmm_fit_opts fo = *o;
    fo.init = LSE_GMM_INIT_GIVEN;
    fo.n_init = 1;
    fo.sample_weight = NULL;
    fo.missing = LSE_GMM_MISSING_ERROR;
    fo.progress = NULL;
    size_t done = 0, draw = 0, failed = 0;
    lse_error e2;
    while (done < n_boot) {
        if (failed > 10 * n_boot) {
            st = lse_error_set(err, LSE_ENUMERIC, fn,
                               "%zu of %zu refits failed; the last: %s",
                               failed, failed + done, e2.message);
            goto out;
        }
        draw++;
        st = lse_gmm_sample(m, seed + draw, x, NULL, err);
        if (st == LSE_OK)
            st = copy_params(r, m, err);
        if (st != LSE_OK)
            goto out;
        if (lse_gmm_fit(r, x, &fo, &e2) != LSE_OK) {
            failed++;
            continue;
        }
        const gsl_vector *w = lse_gmm_weights(r);
        const gsl_matrix *mu = lse_gmm_means(r), *cv = lse_gmm_covariances(r);
        for (size_t i = 0; i < k; i++)
            v[i] = gsl_vector_get(w, i);
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < d; j++)
                v[k + i * d + j] = gsl_matrix_get(mu, i, j);
        for (size_t i = 0; i < cr; i++)
            for (size_t j = 0; j < cc; j++)
                v[k + k * d + i * cc + j] = gsl_matrix_get(cv, i, j);
        done++;
        for (size_t i = 0; i < np; i++) {
            const double delta = v[i] - mean[i];
            mean[i] += delta / (double)done;
            m2[i] += delta * (v[i] - mean[i]);
        }
    }
    out->weights = gsl_vector_alloc(k);
    out->means = gsl_matrix_alloc(k, d);
    out->covariances = gsl_matrix_alloc(cr, cc);
    if (out->weights == NULL || out->means == NULL ||
        out->covariances == NULL) {
        lse_gmm_boot_free(out);
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < np; i++)
        v[i] = sqrt(m2[i] / (double)(n_boot - 1));
    for (size_t i = 0; i < k; i++)
        gsl_vector_set(out->weights, i, v[i]);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(out->means, i, j, v[k + i * d + j]);
    for (size_t i = 0; i < cr; i++)
        for (size_t j = 0; j < cc; j++)
            gsl_matrix_set(out->covariances, i, j, v[k + k * d + i * cc + j]);
    out->n_boot = n_boot;
    out->n_failed = failed;
out:
    free(mean);
    free(m2);
    free(v);
    gsl_matrix_free(x);
    lse_gmm_free(r);
    return st;
}

/* the moment-matched covariance of components i and j of src (weights
 * wi, wj, means mi, mj, merged mean mu) into out (d x d) */
static lse_status merged_cov(const lse_gmm *src, size_t i, size_t j,
                             const gsl_vector *mu, gsl_matrix *out,
                             gsl_matrix *tmp, lse_error *err)
{
    const size_t d = lse_gmm_dim(src);
    const size_t c[2] = {i, j};
    const double w[2] = {gsl_vector_get(lse_gmm_weights(src), i),
                         gsl_vector_get(lse_gmm_weights(src), j)};
    gsl_matrix_set_zero(out);
    for (int h = 0; h < 2; h++) {
        lse_status st = lse_gmm_get_covariance(src, c[h], tmp);
        if (st != LSE_OK)
            return lse_error_set(err, st, "lse_gmm_merge",
                                 "covariance of component %zu", c[h]);
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++) {
                const double ea = gsl_matrix_get(lse_gmm_means(src), c[h], a) -
                                  gsl_vector_get(mu, a);
                const double eb = gsl_matrix_get(lse_gmm_means(src), c[h], b) -
                                  gsl_vector_get(mu, b);
                *gsl_matrix_ptr(out, a, b) +=
                    w[h] / (w[0] + w[1]) * (gsl_matrix_get(tmp, a, b) + ea * eb);
            }
    }
    return LSE_OK;
}

/* dst's covariances: src's without component j, component i (< j) the
 * merged one (mc, d x d) in the type's native shape */
static void merged_cov_set(const lse_gmm *src, size_t i, size_t j,
                           const gsl_matrix *mc, gsl_matrix *cov)
{
    const lse_cov_type t = lse_gmm_cov_type(src);
    const gsl_matrix *c0 = lse_gmm_covariances(src);
    const size_t k = lse_gmm_k(src), d = lse_gmm_dim(src);
    const size_t rows = t == LSE_COV_FULL ? d : 1;
    double trace = 0.0;
    for (size_t e = 0; e < d; e++)
        trace += gsl_matrix_get(mc, e, e);
    if (t == LSE_COV_TIED) {
        gsl_matrix_memcpy(cov, c0); /* the shared covariance stays */
        return;
    }
    for (size_t c = 0, r = 0; c < k; c++) {
        if (c == j)
            continue;
        for (size_t a = 0; a < rows; a++)
            for (size_t b = 0; b < c0->size2; b++) {
                double v = gsl_matrix_get(c0, c * rows + a, b);
                if (c == i && t == LSE_COV_FULL)
                    v = gsl_matrix_get(mc, a, b);
                else if (c == i && t == LSE_COV_DIAG)
                    v = gsl_matrix_get(mc, b, b);
                else if (c == i) /* spherical: the mean variance */
                    v = trace / (double)d;
                gsl_matrix_set(cov, r * rows + a, b, v);
            }
        r++;
    }
}

lse_status lse_gmm_merge(const lse_gmm *src, size_t i, size_t j, lse_gmm *dst,
                         lse_error *err)
{
    static const char fn[] = "lse_gmm_merge";
    if (src == NULL || dst == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    const size_t k = lse_gmm_k(src), d = lse_gmm_dim(src);
    const lse_cov_type t = lse_gmm_cov_type(src);
    if (k < 2 || lse_gmm_k(dst) != k - 1 || lse_gmm_dim(dst) != d ||
        lse_gmm_cov_type(dst) != t ||
        lse_gmm_cov_model(src) != LSE_COV_MODEL_NONE ||
        lse_gmm_cov_model(dst) != LSE_COV_MODEL_NONE)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "src needs K >= 2 and dst K - 1 components, the "
                             "same d and covariance type (full, diag, "
                             "spherical or tied)");
    if (i >= j || j >= k)
        return lse_error_set(err, LSE_ERANGE, fn,
                             "components %zu and %zu of K = %zu (i < j < K)",
                             i, j, k);
    const gsl_matrix *c0 = lse_gmm_covariances(src);
    const size_t rows = t == LSE_COV_FULL ? d : 1;
    gsl_vector *w = gsl_vector_alloc(k - 1), *mu = gsl_vector_alloc(d);
    gsl_matrix *means = gsl_matrix_alloc(k - 1, d);
    gsl_matrix *mc = gsl_matrix_alloc(d, d), *tmp = gsl_matrix_alloc(d, d);
    gsl_matrix *cov = gsl_matrix_alloc(
        t == LSE_COV_TIED ? c0->size1 : (k - 1) * rows, c0->size2);
    lse_status st = LSE_OK;
    if (w == NULL || mu == NULL || means == NULL || mc == NULL ||
        tmp == NULL || cov == NULL) {
        st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        goto out;
    }
    const gsl_vector *w0 = lse_gmm_weights(src);
    const gsl_matrix *m0 = lse_gmm_means(src);
    const double wi = gsl_vector_get(w0, i), wj = gsl_vector_get(w0, j);
    for (size_t a = 0; a < d; a++)
        gsl_vector_set(mu, a, wi + wj > 0.0
                                  ? (wi * gsl_matrix_get(m0, i, a) +
                                     wj * gsl_matrix_get(m0, j, a)) /
                                        (wi + wj)
                                  : gsl_matrix_get(m0, i, a));
    for (size_t c = 0, r = 0; c < k; c++) {
        if (c == j)
            continue;
        gsl_vector_set(w, r, c == i ? wi + wj : gsl_vector_get(w0, c));
        for (size_t a = 0; a < d; a++)
            gsl_matrix_set(means, r, a,
                           c == i ? gsl_vector_get(mu, a)
                                  : gsl_matrix_get(m0, c, a));
        r++;
    }
    if (t != LSE_COV_TIED)
        st = wi + wj > 0.0 ? merged_cov(src, i, j, mu, mc, tmp, err)
                           : (lse_gmm_get_covariance(src, i, mc) == LSE_OK
                              ? LSE_OK
                              : lse_error_set(err, LSE_EINVAL, fn,
                                              "covariance of component %zu",
                                              i));
    if (st == LSE_OK) {
        merged_cov_set(src, i, j, mc, cov);
        st = lse_gmm_set_weights(dst, w, err);
    }
    if (st == LSE_OK)
        st = lse_gmm_set_means(dst, means, err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(dst, cov, err);
out:
    gsl_vector_free(w);
    gsl_vector_free(mu);
    gsl_matrix_free(means);
    gsl_matrix_free(mc);
    gsl_matrix_free(tmp);
    gsl_matrix_free(cov);
    return st;
}
