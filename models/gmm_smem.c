/* Split-and-merge EM (Ueda, Nakano, Ghahramani & Hinton 2000) for lse_gmm
 * (mixfit.h: lse_gmm_smem), on its public API: the merge and split
 * criteria from the posteriors, the K-component start of a move (merge
 * i, j; split k), partial runs, the best to convergence, accepted only
 * when the log-likelihood rises and the result is not degenerate. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_eigen.h>

#include <lsegraph/cov.h>
#include <gsl/gsl_math.h>

#include <lsegraph/core.h>
#include <lsegraph/models/gmm.h>
#include <lsegraph/models/mixfit.h>

#include "mixfit-private.h"

lse_gmm_smem_opts lse_gmm_smem_opts_default(void)
{
    lse_gmm_smem_opts s;
    s.n_tries = LSE_GMM_SMEM_TRIES;
    s.partial_iter = LSE_GMM_SMEM_PARTIAL;
    s.n_keep = LSE_GMM_SMEM_KEEP;
    s.max_moves = LSE_GMM_SMEM_MOVES;
    s.min_gain = LSE_GMM_SMEM_MIN_GAIN;
    s.degenerate = LSE_GMM_EMEM_DEGENERATE;
    s.rank = LSE_GMM_SMEM_RANK_START;
    s.keep_iter = LSE_GMM_SMEM_KEEP_ITER;
    s.n_score = LSE_GMM_SMEM_SCORE;
    return s;
}

/* one move: merge i < j into slot i, split k into slots k and j */
typedef struct move {
    size_t i, j, k;
} move;

/* a candidate's fit, its log-likelihood and whether it is degenerate */
typedef struct smem_cand {
    lse_gmm *m;
    double ll;
    int deg;
    int ok;
} smem_cand;

/* one thread's work space for building (move_start) and scoring
 * (loglik_of) starts; the first error of its scores (rerank) */
typedef struct start_ws {
    gsl_matrix *a, *b; /* d x d */
    gsl_vector *w;     /* (k) */
    gsl_matrix *mu;    /* (k, d) */
    gsl_matrix *cov;   /* the native covariances */
    gsl_vector *llr;   /* (n) row log-likelihoods */
    lse_gmm *scratch;  /* a start being scored */
    size_t fail;       /* the move of the first failed score (SIZE_MAX) */
    lse_status fst;
    lse_error ferr;
} start_ws;

/* the work space of one call */
typedef struct smem_ws {
    size_t n, k, d;
    gsl_matrix *resp; /* (n, k) posteriors */
    double *buf;      /* sums: k k products, k masses, k split terms, 1 */
    double *sc;       /* the scatter sums: 1 + d + d d */
    double *jm;       /* (k, k) merge scores */
    double *js;       /* (k) split scores */
    move *mv;         /* the moves in Ueda et al.'s order */
    gsl_vector *lam;
    double *v;        /* (k, d) the split axes */
    double *lk;       /* (k) their variances */
    gsl_eigen_symmv_workspace *es;
    start_ws *th;     /* one per thread; th[0] the calling thread's */
    int n_th;
    smem_cand *c;
    size_t n_c;
} smem_ws;

static void start_ws_free(start_ws *s)
{
    gsl_matrix_free(s->a);
    gsl_matrix_free(s->b);
    gsl_vector_free(s->w);
    gsl_matrix_free(s->mu);
    gsl_matrix_free(s->cov);
    gsl_vector_free(s->llr);
    lse_gmm_free(s->scratch);
}

static void ws_free(smem_ws *w)
{
    gsl_matrix_free(w->resp);
    free(w->buf);
    free(w->sc);
    free(w->jm);
    free(w->js);
    free(w->mv);
    gsl_vector_free(w->lam);
    free(w->v);
    free(w->lk);
    if (w->es != NULL)
        gsl_eigen_symmv_free(w->es);
    for (int t = 0; w->th != NULL && t < w->n_th; t++)
        start_ws_free(&w->th[t]);
    free(w->th);
    for (size_t t = 0; w->c != NULL && t < w->n_c; t++)
        lse_gmm_free(w->c[t].m);
    free(w->c);
}

static lse_gmm *new_like(const lse_gmm *m)
{
    lse_gmm *out = NULL;
    const lse_status st =
        lse_gmm_cov_model(m) != LSE_COV_MODEL_NONE
            ? lse_gmm_new_model(lse_gmm_k(m), lse_gmm_dim(m),
                                lse_gmm_cov_model(m), &out, NULL)
            : lse_gmm_new(lse_gmm_k(m), lse_gmm_dim(m), lse_gmm_cov_type(m),
                          &out, NULL);
    return st == LSE_OK ? out : NULL;
}

static int start_ws_alloc(start_ws *s, const lse_gmm *m, size_t n)
{
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    const gsl_matrix *c0 = lse_gmm_covariances(m);
    s->a = gsl_matrix_alloc(d, d);
    s->b = gsl_matrix_alloc(d, d);
    s->w = gsl_vector_alloc(k);
    s->mu = gsl_matrix_alloc(k, d);
    s->cov = gsl_matrix_alloc(c0->size1, c0->size2);
    s->llr = gsl_vector_alloc(n);
    s->scratch = new_like(m);
    return s->a != NULL && s->b != NULL && s->w != NULL && s->mu != NULL &&
           s->cov != NULL && s->llr != NULL && s->scratch != NULL;
}

/* w for m, n rows, n_c candidates and n_th threads */
static int ws_alloc(smem_ws *w, const lse_gmm *m, size_t n, size_t n_c,
                    int n_th)
{
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    memset(w, 0, sizeof *w);
    w->n = n;
    w->k = k;
    w->d = d;
    w->resp = gsl_matrix_alloc(n, k);
    w->buf = malloc((k * k + 2 * k + 1) * sizeof *w->buf);
    w->sc = malloc((1 + d + d * d) * sizeof *w->sc);
    w->jm = malloc(k * k * sizeof *w->jm);
    w->js = malloc(k * sizeof *w->js);
    w->mv = malloc(k * k * k * sizeof *w->mv);
    w->lam = gsl_vector_alloc(d);
    w->v = malloc(k * d * sizeof *w->v);
    w->lk = malloc(k * sizeof *w->lk);
    w->es = gsl_eigen_symmv_alloc(d);
    w->th = calloc((size_t)n_th, sizeof *w->th);
    if (w->th != NULL)
        w->n_th = n_th;
    w->c = calloc(n_c, sizeof *w->c);
    if (w->c != NULL)
        w->n_c = n_c;
    int ok = w->resp != NULL && w->buf != NULL && w->sc != NULL &&
             w->jm != NULL && w->js != NULL && w->mv != NULL &&
             w->lam != NULL && w->v != NULL && w->lk != NULL &&
             w->es != NULL && w->th != NULL && w->c != NULL;
    for (int t = 0; ok && t < n_th; t++)
        ok = start_ws_alloc(&w->th[t], m, n);
    for (size_t t = 0; ok && t < n_c; t++)
        ok = (w->c[t].m = new_like(m)) != NULL;
    return ok;
}

/* buf[0..n) summed over the processes (o->reduce), or left alone */
static lse_status reduce(const lse_gmm_fit_opts *o, double *buf, size_t n,
                         lse_error *err)
{
    if (o->reduce == NULL)
        return LSE_OK;
    const lse_status st = o->reduce(buf, n, o->reduce_user);
    return st == LSE_OK ? LSE_OK
                        : lse_error_set(err, st, "lse_gmm_smem",
                                        "the reduce hook failed");
}

/* The criteria at m's parameters: w->jm (merge: the correlation of the
 * posterior columns), w->js (split: the local KL divergence) and *ll, the
 * log-likelihood. With f_kn = w_n r_nk / R_k and log N_k(x_n) = log r_nk +
 * ll_n - log pi_k, J_split(k) = sum_n f_kn (log f_kn - log N_k(x_n)) =
 * sum_n f_kn (log w_n - ll_n) - log R_k + log pi_k. */
static lse_status scores(const lse_gmm *m, const gsl_matrix *x,
                         const lse_gmm_fit_opts *o, smem_ws *w, double *ll,
                         lse_error *err)
{
    const size_t n = w->n, k = w->k;
    gsl_vector *llr = w->th[0].llr;
    lse_status st = lse_gmm_posterior(m, x, o->missing, w->resp, llr, err);
    if (st != LSE_OK)
        return st;
    double *g = w->buf, *r = g + k * k, *b = r + k, *tot = b + k;
    memset(w->buf, 0, (k * k + 2 * k + 1) * sizeof *w->buf);
    for (size_t i = 0; i < n; i++) {
        const double wi =
            o->sample_weight != NULL ? gsl_vector_get(o->sample_weight, i)
                                     : 1.0;
        const double li = gsl_vector_get(llr, i);
        const double *p = gsl_matrix_const_ptr(w->resp, i, 0);
        if (!(wi > 0.0))
            continue;
        *tot += wi * li;
        for (size_t a = 0; a < k; a++) {
            r[a] += wi * p[a];
            b[a] += wi * p[a] * (log(wi) - li);
            for (size_t c = a; c < k; c++)
                g[a * k + c] += wi * p[a] * p[c];
        }
    }
    st = reduce(o, w->buf, k * k + 2 * k + 1, err);
    if (st != LSE_OK)
        return st;
    const gsl_vector *pi = lse_gmm_weights(m);
    for (size_t a = 0; a < k; a++) {
        for (size_t c = a + 1; c < k; c++) {
            const double den = sqrt(g[a * k + a] * g[c * k + c]);
            w->jm[a * k + c] = den > 0.0 ? g[a * k + c] / den : 0.0;
        }
        w->js[a] = r[a] > 0.0 ? b[a] / r[a] - log(r[a]) +
                                    log(gsl_vector_get(pi, a))
                              : -INFINITY;
    }
    *ll = *tot;
    return LSE_OK;
}

/* the moves in Ueda et al.'s order into w->mv: merge pairs by decreasing
 * J_merge, for each the splits k != i, j by decreasing J_split; returns
 * their number (K (K - 1) (K - 2) / 2) */
static size_t rank_moves(smem_ws *w)
{
    const size_t k = w->k;
    size_t np = 0, nm = 0;
    move *pairs = w->mv; /* the pairs first, at the end of w->mv */
    const size_t off = k * k * k - k * (k - 1) / 2;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i + 1; j < k; j++)
            pairs[off + np++] = (move){i, j, 0};
    /* insertion sorts: K is small */
    for (size_t a = 1; a < np; a++) {
        const move t = pairs[off + a];
        size_t b = a;
        while (b > 0 && w->jm[pairs[off + b - 1].i * k + pairs[off + b - 1].j] <
                            w->jm[t.i * k + t.j]) {
            pairs[off + b] = pairs[off + b - 1];
            b--;
        }
        pairs[off + b] = t;
    }
    size_t *ks = malloc(k * sizeof *ks);
    if (ks == NULL)
        return 0;
    for (size_t a = 0; a < k; a++) {
        size_t b = a;
        while (b > 0 && w->js[ks[b - 1]] < w->js[a]) {
            ks[b] = ks[b - 1];
            b--;
        }
        ks[b] = a;
    }
    for (size_t p = 0; p < np; p++) {
        const move pr = pairs[off + p];
        for (size_t a = 0; a < k; a++)
            if (ks[a] != pr.i && ks[a] != pr.j)
                w->mv[nm++] = (move){pr.i, pr.j, ks[a]};
    }
    free(ks);
    return nm;
}

/* the principal axis (into row c of w->v) and its variance (w->lk[c]) of
 * component c's responsibility-weighted scatter of the complete rows;
 * component c's covariance when it holds no complete row */
static lse_status split_axis(const lse_gmm *m, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o, smem_ws *w, size_t c,
                             lse_error *err)
{
    const size_t n = w->n, d = w->d;
    gsl_matrix *sa = w->th[0].a, *sb = w->th[0].b;
    double *s = w->sc, *sx = s + 1, *sxx = sx + d;
    memset(s, 0, (1 + d + d * d) * sizeof *s);
    for (size_t i = 0; i < n; i++) {
        const double *xi = gsl_matrix_const_ptr(x, i, 0);
        int miss = 0;
        for (size_t a = 0; a < d; a++)
            miss = miss || isnan(xi[a]);
        const double r =
            gsl_matrix_get(w->resp, i, c) *
            (o->sample_weight != NULL ? gsl_vector_get(o->sample_weight, i)
                                      : 1.0);
        if (miss || !(r > 0.0))
            continue;
        s[0] += r;
        for (size_t a = 0; a < d; a++) {
            sx[a] += r * xi[a];
            for (size_t b = 0; b < d; b++)
                sxx[a * d + b] += r * xi[a] * xi[b];
        }
    }
    lse_status st = reduce(o, s, 1 + d + d * d, err);
    if (st != LSE_OK)
        return st;
    if (s[0] > 0.0) {
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++)
                gsl_matrix_set(sa, a, b,
                               sxx[a * d + b] / s[0] -
                                   sx[a] * sx[b] / (s[0] * s[0]));
    } else if ((st = lse_gmm_get_covariance(m, c, sa)) != LSE_OK)
        return lse_error_set(err, st, "lse_gmm_smem",
                             "covariance of component %zu", c);
    lse_eigen_symmv(sa, w->lam, sb, w->es);
    gsl_eigen_symmv_sort(w->lam, sb, GSL_EIGEN_SORT_VAL_DESC);
    w->lk[c] = fmax(gsl_vector_get(w->lam, 0), 0.0);
    for (size_t a = 0; a < d; a++)
        w->v[c * d + a] = gsl_matrix_get(sb, a, 0);
    return LSE_OK;
}

/* block c of the native covariances cov (rows rows, the layout t) from the
 * full d x d matrix s */
static void set_block(gsl_matrix *cov, lse_cov_type t, size_t c,
                      const gsl_matrix *s)
{
    const size_t d = s->size1;
    double tr = 0.0;
    for (size_t a = 0; a < d; a++)
        tr += gsl_matrix_get(s, a, a);
    if (t == LSE_COV_FULL) {
        gsl_matrix_view blk = gsl_matrix_submatrix(cov, c * d, 0, d, d);
        gsl_matrix_memcpy(&blk.matrix, s);
    } else if (t == LSE_COV_DIAG) {
        for (size_t a = 0; a < d; a++)
            gsl_matrix_set(cov, c, a, gsl_matrix_get(s, a, a));
    } else if (t == LSE_COV_SPHERICAL) {
        gsl_matrix_set(cov, c, 0, tr / (double)d);
    } /* tied: the shared covariance stays */
}

/* The start of move mv into dst from m: i and j moment-matched into slot
 * i, k cut across its axis (row k of w->v, variance w->lk[k]) into slots k
 * and j, both with k's covariance; the work space sw (one thread's), w
 * only read. */
static lse_status move_start(const lse_gmm *m, move mv, const smem_ws *w,
                             start_ws *sw, lse_gmm *dst, lse_error *err)
{
    const size_t d = w->d;
    const lse_cov_type t = lse_gmm_cov_type(m);
    const gsl_vector *w0 = lse_gmm_weights(m);
    const double wi = gsl_vector_get(w0, mv.i), wj = gsl_vector_get(w0, mv.j);
    const double wk = gsl_vector_get(w0, mv.k), step = sqrt(w->lk[mv.k] * 2.0 / M_PI);
    const double *v = w->v + mv.k * d;
    gsl_vector_memcpy(sw->w, w0);
    gsl_matrix_memcpy(sw->mu, lse_gmm_means(m));
    gsl_matrix_memcpy(sw->cov, lse_gmm_covariances(m));
    /* merged: mean and covariance of the two-component mixture */
    gsl_matrix_set_zero(sw->a);
    for (size_t a = 0; a < d; a++)
        gsl_matrix_set(sw->mu, mv.i, a,
                       (wi * gsl_matrix_get(lse_gmm_means(m), mv.i, a) +
                        wj * gsl_matrix_get(lse_gmm_means(m), mv.j, a)) /
                           (wi + wj));
    const size_t both[2] = {mv.i, mv.j};
    for (int h = 0; h < 2; h++) {
        lse_status st = lse_gmm_get_covariance(m, both[h], sw->b);
        if (st != LSE_OK)
            return lse_error_set(err, st, "lse_gmm_smem",
                                 "covariance of component %zu", both[h]);
        const double f = (h == 0 ? wi : wj) / (wi + wj);
        for (size_t a = 0; a < d; a++)
            for (size_t b = 0; b < d; b++)
                *gsl_matrix_ptr(sw->a, a, b) +=
                    f * (gsl_matrix_get(sw->b, a, b) +
                         (gsl_matrix_get(lse_gmm_means(m), both[h], a) -
                          gsl_matrix_get(sw->mu, mv.i, a)) *
                             (gsl_matrix_get(lse_gmm_means(m), both[h], b) -
                              gsl_matrix_get(sw->mu, mv.i, b)));
    }
    gsl_vector_set(sw->w, mv.i, wi + wj);
    set_block(sw->cov, t, mv.i, sw->a);
    /* split: slot j takes the second half of k */
    lse_status st = lse_gmm_get_covariance(m, mv.k, sw->a);
    if (st != LSE_OK)
        return lse_error_set(err, st, "lse_gmm_smem",
                             "covariance of component %zu", mv.k);
    set_block(sw->cov, t, mv.j, sw->a);
    gsl_vector_set(sw->w, mv.k, wk / 2.0);
    gsl_vector_set(sw->w, mv.j, wk / 2.0);
    for (size_t a = 0; a < d; a++) {
        const double mk = gsl_matrix_get(lse_gmm_means(m), mv.k, a);
        gsl_matrix_set(sw->mu, mv.k, a, mk + step * v[a]);
        gsl_matrix_set(sw->mu, mv.j, a, mk - step * v[a]);
    }
    st = lse_gmm_set_weights(dst, sw->w, err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(dst, sw->mu, err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(dst, sw->cov, err);
    return st;
}

/* the log-likelihood of m's parameters on x into *ll (summed over the
 * processes; llr (n) the rows') */
static lse_status loglik_of(const lse_gmm *m, const gsl_matrix *x,
                            const lse_gmm_fit_opts *o, gsl_vector *llr,
                            double *ll, lse_error *err)
{
    lse_status st = lse_gmm_posterior(m, x, o->missing, NULL, llr, err);
    if (st != LSE_OK)
        return st;
    double t = 0.0;
    for (size_t i = 0; i < llr->size; i++)
        t += (o->sample_weight != NULL ? gsl_vector_get(o->sample_weight, i)
                                       : 1.0) *
             gsl_vector_get(llr, i);
    st = reduce(o, &t, 1, err);
    *ll = t;
    return st;
}

/* descending start log-likelihood, then Ueda et al.'s order */
static int msc_cmp(const void *p, const void *q)
{
    const double *a = p, *b = q;
    if (a[0] != b[0])
        return a[0] > b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* the starts' scores side by side (lse_gmm_par_run): task t builds move
 * t's start and its log-likelihood (key[2 t]; its own sum, in the row
 * order) on its thread's work space, which records the thread's first
 * failure (its tasks come in increasing t); on one thread (always under
 * o->reduce) the tasks after a failure do nothing, as a loop that stops */
typedef struct rank_job {
    const lse_gmm *m;
    const gsl_matrix *x;
    const lse_gmm_fit_opts *o;
    smem_ws *w;
    double *key;
    int serial, stop;
} rank_job;

static void rank_task(void *ctx, size_t t, int tid)
{
    rank_job *j = ctx;
    start_ws *sw = &j->w->th[tid];
    lse_error e2;
    j->key[2 * t] = -INFINITY;
    j->key[2 * t + 1] = (double)t;
    if (j->stop)
        return;
    if (move_start(j->m, j->w->mv[t], j->w, sw, sw->scratch, &e2) == LSE_OK) {
        const lse_status st = loglik_of(sw->scratch, j->x, j->o, sw->llr,
                                        &j->key[2 * t], &e2);
        if (st != LSE_OK && sw->fail == SIZE_MAX) {
            sw->fail = t;
            sw->fst = st;
            sw->ferr = e2;
            if (j->serial) /* one thread: no other reads it meanwhile */
                j->stop = 1;
        }
    }
    if (isnan(j->key[2 * t]))
        j->key[2 * t] = -INFINITY;
}

/* the keys of the first nm moves (rank_job) on up to w->n_th threads; the
 * first failure's status (and its error into err) */
static lse_status score_moves(const lse_gmm *m, const gsl_matrix *x,
                              const lse_gmm_fit_opts *o, smem_ws *w,
                              size_t nm, double *key, lse_error *err)
{
    int nt = lse_gmm_par_threads(m, o, nm);
    if (nt > w->n_th)
        nt = w->n_th;
    rank_job j = {.m = m, .x = x, .o = o, .w = w, .key = key,
                  .serial = nt < 2, .stop = 0};
    for (int t = 0; t < w->n_th; t++)
        w->th[t].fail = SIZE_MAX;
    lse_gmm_par_run(rank_task, &j, nm, nt, o);
    const start_ws *first = NULL;
    for (int t = 0; t < nt; t++)
        if (w->th[t].fail != SIZE_MAX &&
            (first == NULL || w->th[t].fail < first->fail))
            first = &w->th[t];
    if (first == NULL)
        return LSE_OK;
    if (err != NULL)
        *err = first->ferr;
    return first->fst;
}

/* The split axes of every component; with LSE_GMM_SMEM_RANK_START the
 * first s->n_score of the nm moves (all with n_score 0) re-ranked by the
 * log-likelihood of their starts (a start that is not a valid mixture
 * last), ahead of the rest in Ueda et al.'s order. */
static lse_status rerank(const lse_gmm *m, const gsl_matrix *x,
                         const lse_gmm_fit_opts *o, const lse_gmm_smem_opts *s,
                         smem_ws *w, size_t nm, lse_error *err)
{
    lse_status st = LSE_OK;
    for (size_t c = 0; st == LSE_OK && c < w->k; c++)
        st = split_axis(m, x, o, w, c, err);
    if (st != LSE_OK || s->rank != LSE_GMM_SMEM_RANK_START)
        return st;
    if (s->n_score > 0 && s->n_score < nm)
        nm = s->n_score;
    double *key = malloc(2 * nm * sizeof *key);
    move *mv = malloc(nm * sizeof *mv);
    if (key == NULL || mv == NULL)
        st = lse_error_set(err, LSE_ENOMEM, "lse_gmm_smem", "out of memory");
    if (st == LSE_OK)
        st = score_moves(m, x, o, w, nm, key, err);
    if (st == LSE_OK) {
        qsort(key, nm, 2 * sizeof *key, msc_cmp);
        for (size_t t = 0; t < nm; t++)
            mv[t] = w->mv[(size_t)key[2 * t + 1]];
        memcpy(w->mv, mv, nm * sizeof *mv);
    }
    free(key);
    free(mv);
    return st;
}

/* 1 when the guard (threshold thr > 0) calls m degenerate */
static int degenerate(const lse_gmm *m, double thr)
{
    double lo;
    if (!(thr > 0.0) || lse_gmm_min_eigenvalue(m, &lo, NULL) != LSE_OK)
        return 0;
    return lo < thr;
}

/* the candidates' order: fitted first, then non-degenerate, then by
 * decreasing log-likelihood */
static int cand_cmp(const void *p, const void *q)
{
    const smem_cand *a = p, *b = q;
    if (a->ok != b->ok)
        return b->ok - a->ok;
    if (a->deg != b->deg)
        return a->deg - b->deg;
    return a->ll > b->ll ? -1 : a->ll < b->ll ? 1 : 0;
}

/* the candidates' fits side by side (lse_gmm_par_run): each task fits
 * c[t].m from its start and writes only c[t]; with m0, it first builds
 * that start, move w->mv[t] from m0 (on its thread's work space) */
typedef struct fit_job {
    smem_cand *c;
    const gsl_matrix *x;
    const lse_gmm_fit_opts *fo;
    double thr;
    const lse_gmm *m0;
    smem_ws *w;
} fit_job;

static void fit_task(void *ctx, size_t t, int tid)
{
    const fit_job *j = ctx;
    smem_cand *c = &j->c[t];
    lse_error e2;
    /* a start that is not a valid mixture is no candidate */
    if (j->m0 != NULL)
        c->ok = move_start(j->m0, j->w->mv[t], j->w, &j->w->th[tid], c->m,
                           &e2) == LSE_OK;
    if (!c->ok)
        return;
    /* a fit that fails (a singular covariance) is no candidate */
    if (lse_gmm_fit(c->m, j->x, j->fo, &e2) != LSE_OK) {
        c->ok = 0;
        return;
    }
    c->ll = lse_gmm_info(c->m)->loglik;
    c->deg = degenerate(c->m, j->thr);
}

/* the fits of w->c[0..n) (build: from the starts of the first n moves,
 * built by the tasks) */
static void fit_all(const lse_gmm *m, const gsl_matrix *x,
                    const lse_gmm_fit_opts *fo, double thr, smem_ws *w,
                    size_t n, int build)
{
    fit_job j = {.c = w->c, .x = x, .fo = fo, .thr = thr,
                 .m0 = build ? m : NULL, .w = w};
    int nt = lse_gmm_par_threads(m, fo, n);
    if (nt > w->n_th)
        nt = w->n_th;
    lse_gmm_par_run(fit_task, &j, n, nt, fo);
}

/* continue w->c[0..n) (those fitted: they come first) by fo->max_iter EM
 * iterations, then sort them */
static void cont(const lse_gmm *m, const gsl_matrix *x,
                 const lse_gmm_fit_opts *fo, double thr, smem_ws *w, size_t n)
{
    size_t n_ok = 0;
    while (n_ok < n && w->c[n_ok].ok)
        n_ok++;
    fit_all(m, x, fo, thr, w, n_ok, 0);
    qsort(w->c, n, sizeof *w->c, cand_cmp);
}

/* One round from m: the first s->n_tries of the nm ranked moves, a partial
 * run each, the s->n_keep best continued to convergence; *best gets the
 * index of the best non-degenerate result (w->n_c when there is none). The
 * starts are built and fitted side by side. */
static void try_moves(const lse_gmm *m, const gsl_matrix *x,
                      const lse_gmm_fit_opts *o, const lse_gmm_smem_opts *s,
                      double thr, smem_ws *w, size_t nm, size_t *best)
{
    lse_gmm_fit_opts fo = *o;
    fo.init = LSE_GMM_INIT_GIVEN;
    fo.n_init = 1;
    fo.progress = NULL;
    fo.max_iter = s->partial_iter;
    const size_t nt = nm < w->n_c ? nm : w->n_c;
    *best = w->n_c;
    fit_all(m, x, &fo, thr, w, nt, 1);
    qsort(w->c, nt, sizeof *w->c, cand_cmp);
    /* the n_keep best by keep_iter more (0: to convergence), the best of
     * them to convergence */
    const size_t nk = nt < s->n_keep ? nt : s->n_keep;
    fo.max_iter = s->keep_iter > 0 ? s->keep_iter : o->max_iter;
    cont(m, x, &fo, thr, w, nk);
    fo.max_iter = o->max_iter;
    if (s->keep_iter > 0)
        cont(m, x, &fo, thr, w, nk > 0 ? 1 : 0);
    if (nk > 0 && w->c[0].ok && !w->c[0].deg)
        *best = 0;
}

static lse_status smem_check(const lse_gmm *m, const gsl_matrix *x,
                             const lse_gmm_fit_opts *o,
                             const lse_gmm_smem_opts *s, lse_error *err)
{
    static const char fn[] = "lse_gmm_smem";
    if (m == NULL || x == NULL || o == NULL || s == NULL)
        return lse_error_set(err, LSE_EFAULT, fn, "NULL argument");
    if (s->n_tries == 0 || s->partial_iter == 0 || s->n_keep == 0)
        return lse_error_set(err, LSE_EINVAL, fn,
                             "n_tries, partial_iter and n_keep must be at "
                             "least 1 (max_moves 0 turns the moves off)");
    if (!(s->min_gain >= 0.0) || !isfinite(s->min_gain) ||
        !(s->degenerate >= 0.0) || !isfinite(s->degenerate))
        return lse_error_set(err, LSE_EDOM, fn,
                             "min_gain (%g) and degenerate (%g) must be "
                             "finite and >= 0", s->min_gain, s->degenerate);
    if (x->size2 != lse_gmm_dim(m) || x->size1 == 0)
        return lse_error_set(err, LSE_EDIM, fn,
                             "the data are %zu x %zu, the model d = %zu",
                             x->size1, x->size2, lse_gmm_dim(m));
    return LSE_OK;
}

lse_status lse_gmm_smem(lse_gmm *m, const gsl_matrix *x,
                        const lse_gmm_fit_opts *o, const lse_gmm_smem_opts *s,
                        size_t *n_moves, lse_error *err)
{
    static const char fn[] = "lse_gmm_smem";
    lse_status st = smem_check(m, x, o, s, err);
    if (st != LSE_OK)
        return st;
    if (n_moves != NULL)
        *n_moves = 0;
    if (lse_gmm_k(m) < 3 || s->max_moves == 0)
        return LSE_OK;
    double thr = 0.0;
    st = lse_gmm_emem_threshold(m, x, o, s->degenerate, &thr, err);
    if (st != LSE_OK)
        return st;
    smem_ws w;
    if (!ws_alloc(&w, m, x->size1, s->n_tries,
                  lse_gmm_par_threads(m, o, (size_t)-1))) {
        ws_free(&w);
        return lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t mv = 0; mv < s->max_moves; mv++) {
        double ll;
        size_t best;
        st = scores(m, x, o, &w, &ll, err);
        const size_t nm = st == LSE_OK ? rank_moves(&w) : 0;
        if (st == LSE_OK && nm == 0)
            st = lse_error_set(err, LSE_ENOMEM, fn, "out of memory");
        if (st == LSE_OK)
            st = rerank(m, x, o, s, &w, nm, err);
        best = w.n_c;
        if (st == LSE_OK)
            try_moves(m, x, o, s, thr, &w, nm, &best);
        if (st != LSE_OK || best == w.n_c ||
            !(w.c[best].ll > ll + s->min_gain * fabs(ll)))
            break;
        st = lse_gmm_copy(m, w.c[best].m, err);
        if (st != LSE_OK)
            break;
        if (n_moves != NULL)
            (*n_moves)++;
    }
    ws_free(&w);
    return st;
}
