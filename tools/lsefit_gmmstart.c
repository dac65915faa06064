/* lsefit gmm --init hcvvv|emem and --bootstrap B (lsefit_gmmstart.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsefit_gmmstart.h"

int lsefit_gmm_start_check(const char *method, int mpi, int weights,
                           int marginalize)
{
    if (method == NULL || (strcmp(method, "hcvvv") != 0 &&
                           strcmp(method, "emem+hc") != 0))
        return LSEFIT_OK;
    if (mpi)
        return lsefit_usage("gmm", "--init hcvvv / emem+hc needs every row in one "
                                   "process: not with --mpi");
    if (weights)
        return lsefit_usage("gmm", "--init hcvvv / emem+hc does not use --weights; "
                                   "use --init kmeans++ or emem");
    if (marginalize)
        return lsefit_usage("gmm", "--init hcvvv / emem+hc needs complete rows: use "
                                   "--missing drop, or --init kmeans++");
    return LSEFIT_OK;
}

/* the hcVVV partition of x into k (mclust's default start: hcVVV on the
 * SVD-transformed data, the tree computed once) into labels */
static lse_status hc_labels(lsefit_gmm_start *s, const gsl_matrix *x,
                            size_t k, size_t *labels, lse_error *err)
{
    const size_t n = x->size1;
    lse_status st = LSE_OK;
    if (s->pairs == NULL) {
        gsl_matrix *z = gsl_matrix_alloc(n, x->size2);
        double *cost = malloc((n > 1 ? n - 1 : 1) * sizeof *cost);
        s->pairs = malloc(2 * (n > 1 ? n - 1 : 1) * sizeof *s->pairs);
        if (z == NULL || cost == NULL || s->pairs == NULL)
            st = lse_error_set(err, LSE_ENOMEM, "--init", "out of memory");
        if (st == LSE_OK)
            st = lse_hc_svd(x, z, err);
        if (st == LSE_OK)
            st = lse_hc_vvv(z, s->pairs, cost, err);
        gsl_matrix_free(z);
        free(cost);
        if (st != LSE_OK) {
            free(s->pairs);
            s->pairs = NULL;
            return st;
        }
        s->n = n;
    }
    st = lse_hc_cut(n, s->pairs, k, labels);
    if (st != LSE_OK)
        st = lse_error_set(err, st, "--init", "cannot cut %zu rows into %zu "
                           "clusters", n, k);
    return st;
}

/* the clone of m into s->prev (the chain's last fit) */
static lse_status keep_prev(lsefit_gmm_start *s, const lse_gmm *m,
                            lse_error *err)
{
    lse_gmm *c = NULL;
    lse_status st = lse_gmm_new(lse_gmm_k(m), lse_gmm_dim(m),
                                lse_gmm_cov_type(m), &c, NULL);
    if (st != LSE_OK)
        return lse_error_set(err, st, "--init", "out of memory");
    st = lse_gmm_set_weights(c, lse_gmm_weights(m), err);
    if (st == LSE_OK)
        st = lse_gmm_set_means(c, lse_gmm_means(m), err);
    if (st == LSE_OK)
        st = lse_gmm_set_covariances(c, lse_gmm_covariances(m), err);
    if (st != LSE_OK) {
        lse_gmm_free(c);
        return st;
    }
    lse_gmm_free(s->prev);
    s->prev = c;
    return LSE_OK;
}

/* the chain's emEM budget for K */
static lse_gmm_emem_opts chain_budget(const lsefit_gmm_start *s, size_t k,
                                      const lse_gmm_fit_opts *o)
{
    lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k);
    if (o->n_init > 1)
        e.n_starts = o->n_init;
    if (s->smem_set)
        e.smem = s->smem;
    return e;
}

/* emEM for K = lse_gmm_k(m) with the splits of the chain's fit for K - 1
 * (computed first, by the same rule, when s->prev does not hold it) and
 * the hcVVV partition (labels, or NULL) as further starts */
static lse_status emem_chain(lsefit_gmm_start *s, lse_gmm *m,
                             const gsl_matrix *x, const lse_gmm_fit_opts *o,
                             const size_t *labels, lse_error *err)
{
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    const int split = k >= 2 && o->reduce == NULL &&
                      lse_gmm_cov_model(m) == LSE_COV_MODEL_NONE;
    lse_gmm_emem_opts e = chain_budget(s, k, o);
    lse_gmm **given = calloc(k + 1, sizeof *given);
    size_t n_given = 0;
    lse_status st = given == NULL ? lse_error_set(err, LSE_ENOMEM, "--init",
                                                  "out of memory")
                                  : LSE_OK;
    if (st == LSE_OK && split &&
        (s->prev == NULL || lse_gmm_k(s->prev) != k - 1 ||
         lse_gmm_cov_type(s->prev) != lse_gmm_cov_type(m))) {
        lse_gmm *p = NULL;
        lse_gmm_fit_opts po = *o;
        po.progress = NULL;
        if (lse_gmm_new(k - 1, d, lse_gmm_cov_type(m), &p, NULL) != LSE_OK)
            st = lse_error_set(err, LSE_ENOMEM, "--init", "out of memory");
        if (st == LSE_OK)
            st = emem_chain(s, p, x, &po, NULL, err);
        lse_gmm_free(p);
    }
    for (size_t j = 0; st == LSE_OK && split && j < k - 1; j++) {
        st = lse_gmm_new(k, d, lse_gmm_cov_type(m), &given[n_given], NULL);
        if (st != LSE_OK) {
            st = lse_error_set(err, st, "--init", "out of memory");
            break;
        }
        n_given++;
        lse_error e2;
        if (lse_gmm_split(s->prev, x, o->sample_weight, j, given[n_given - 1],
                          &e2) != LSE_OK)
            lse_gmm_free(given[--n_given]); /* a component without rows */
    }
    if (st == LSE_OK && labels != NULL) {
        st = lse_gmm_new(k, d, lse_gmm_cov_type(m), &given[n_given], NULL);
        if (st == LSE_OK) {
            n_given++;
            st = lse_gmm_init_labels(given[n_given - 1], x, labels,
                                     o->reg_covar, err);
        } else
            st = lse_error_set(err, st, "--init", "out of memory");
    }
    if (st == LSE_OK)
        st = lse_gmm_fit_emem(m, x, o, &e, (const lse_gmm *const *)given,
                              n_given, err);
    if (st == LSE_OK && lse_gmm_cov_model(m) == LSE_COV_MODEL_NONE)
        st = keep_prev(s, m, err);
    for (size_t i = 0; i < n_given; i++)
        lse_gmm_free(given[i]);
    free(given);
    return st;
}

/* 1 when m is degenerate by emEM's guard: a covariance eigenvalue below
 * thr (lse_gmm_emem_threshold; 0: the guard is off); its smallest
 * eigenvalue into *lo */
static int degenerate(const lse_gmm *m, double thr, double *lo)
{
    *lo = INFINITY;
    return thr > 0.0 && lse_gmm_min_eigenvalue(m, lo, NULL) == LSE_OK &&
           *lo < thr;
}

/* emEM's order (the guard, then the log-likelihood): 1 when fit a ranks
 * above fit b */
static int ranks_above(const lse_gmm *a, const lse_gmm *b, double thr)
{
    double la, lb;
    const int da = degenerate(a, thr, &la), db = degenerate(b, thr, &lb);
    if (da != db)
        return db;
    return lse_gmm_info(a)->loglik > lse_gmm_info(b)->loglik;
}

/* The merges of the chain's K + 1 fit (s->next) as starts for K: every
 * pair merged (lse_gmm_merge), scored by its log-likelihood, the
 * LSEFIT_GMM_MERGES best run to convergence; m (the chain's fit of K)
 * takes a run that ranks above it in emEM's order (the degeneracy guard,
 * then the log-likelihood). docs/lsefit.md, "Starts". */
static lse_status merge_improve(lsefit_gmm_start *s, lse_gmm *m,
                                const gsl_matrix *x, const lse_gmm_fit_opts *o,
                                lse_error *err)
{
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    size_t pi[LSEFIT_GMM_MERGES], pj[LSEFIT_GMM_MERGES], np = 0;
    double ps[LSEFIT_GMM_MERGES];
    /* every pair merged, scored side by side (lse_gmm_loglik_batch) */
    const size_t n_pair = k * (k + 1) / 2;
    lse_gmm **t = calloc(n_pair, sizeof *t);
    size_t *ti = malloc(n_pair * sizeof *ti), *tj = malloc(n_pair * sizeof *tj);
    double *sc = malloc(n_pair * sizeof *sc);
    size_t nt = 0;
    lse_status st = t == NULL || ti == NULL || tj == NULL || sc == NULL
                        ? lse_error_set(err, LSE_ENOMEM, "--init",
                                        "out of memory")
                        : LSE_OK;
    for (size_t i = 0; st == LSE_OK && i < k + 1; i++)
        for (size_t j = i + 1; st == LSE_OK && j < k + 1; j++) {
            st = lse_gmm_new(k, d, lse_gmm_cov_type(m), &t[nt], NULL);
            if (st != LSE_OK)
                st = lse_error_set(err, st, "--init", "out of memory");
            else if (lse_gmm_merge(s->next, i, j, t[nt], NULL) != LSE_OK)
                lse_gmm_free(t[nt]);
            else {
                ti[nt] = i;
                tj[nt++] = j;
            }
        }
    if (st == LSE_OK)
        st = lse_gmm_loglik_batch((const lse_gmm *const *)t, nt, x,
                                  o->sample_weight, sc, err);
    for (size_t q = 0; st == LSE_OK && q < nt; q++) { /* the best, in order */
        if (!isfinite(sc[q]) ||
            (np == LSEFIT_GMM_MERGES && !(sc[q] > ps[np - 1])))
            continue;
        size_t r = np < LSEFIT_GMM_MERGES ? np++ : np - 1;
        for (; r > 0 && ps[r - 1] < sc[q]; r--) { /* best first */
            ps[r] = ps[r - 1];
            pi[r] = pi[r - 1];
            pj[r] = pj[r - 1];
        }
        ps[r] = sc[q];
        pi[r] = ti[q];
        pj[r] = tj[q];
    }
    for (size_t q = 0; q < nt; q++)
        lse_gmm_free(t[q]);
    free(t);
    free(ti);
    free(tj);
    free(sc);
    lse_gmm_fit_opts fo = *o;
    fo.init = LSE_GMM_INIT_GIVEN;
    fo.n_init = 1;
    fo.progress = NULL;
    /* the merges' fits side by side (lse_gmm_fit_batch: the same bits as
     * one after another), then taken in score order */
    lse_gmm *f[LSEFIT_GMM_MERGES];
    lse_status fs[LSEFIT_GMM_MERGES];
    size_t nf = 0;
    for (size_t q = 0; st == LSE_OK && q < np; q++) {
        st = lse_gmm_new(k, d, lse_gmm_cov_type(m), &f[nf], NULL);
        if (st != LSE_OK)
            st = lse_error_set(err, st, "--init", "out of memory");
        else if (lse_gmm_merge(s->next, pi[q], pj[q], f[nf], NULL) != LSE_OK)
            lse_gmm_free(f[nf]); /* no candidate */
        else
            nf++;
    }
    if (st == LSE_OK)
        st = lse_gmm_fit_batch(f, nf, x, &fo, fs, NULL, err);
    for (size_t q = 0; st == LSE_OK && q < nf; q++)
        /* a merge that turns singular is no candidate */
        if (fs[q] == LSE_OK && ranks_above(f[q], m, s->guard))
            st = lse_gmm_copy(m, f[q], err);
    for (size_t q = 0; q < nf; q++)
        lse_gmm_free(f[q]);
    return st;
}

/* the K splits of m (lse_gmm_split; a component without rows gives none)
 * into given[], their number into *n */
static lse_status kmax_splits(const lse_gmm *m, const gsl_matrix *x,
                              const gsl_vector *w, lse_gmm **given, size_t *n,
                              lse_error *err)
{
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    *n = 0;
    for (size_t j = 0; j < k; j++) {
        if (lse_gmm_new(k + 1, d, lse_gmm_cov_type(m), &given[*n], NULL) !=
            LSE_OK)
            return lse_error_set(err, LSE_ENOMEM, "--init", "out of memory");
        lse_error e2;
        if (lse_gmm_split(m, x, w, j, given[*n], &e2) == LSE_OK)
            (*n)++;
        else
            lse_gmm_free(given[*n]);
    }
    return LSE_OK;
}

/* split-and-merge EM (lse_gmm_smem, emEM's guard) on kmax_step's K + 1
 * fit s->next: LSEFIT_GMM_LAST_SMEM moves tried per round, the first
 * LSEFIT_GMM_LAST_SCORE of them ranked by the log-likelihood of their
 * starts, the LSEFIT_GMM_LAST_SMEM_KEEP best partial runs continued;
 * --smem 0 turns it off with emEM's. Its partial runs go side by side on
 * the threads. docs/lsefit.md, "The last K, session 14". */
static lse_status kmax_smem(const lsefit_gmm_start *s, const gsl_matrix *x,
                            const lse_gmm_fit_opts *po, lse_error *err)
{
    if (s->smem_set && s->smem == 0)
        return LSE_OK;
    lse_gmm_smem_opts so = lse_gmm_smem_opts_default();
    so.n_tries = LSEFIT_GMM_LAST_SMEM;
    so.n_score = LSEFIT_GMM_LAST_SCORE;
    so.n_keep = LSEFIT_GMM_LAST_SMEM_KEEP;
    return lse_gmm_smem(s->next, x, po, &so, NULL, err);
}

/* One round of kmax_improve: the K + 1 fit is emEM started only from the
 * K splits of m (LSEFIT_GMM_LAST_SHORT EM steps each, the
 * LSEFIT_GMM_LAST_KEEP best to convergence, no split-and-merge EM inside
 * emEM), then, when smem, split-and-merge EM on it (kmax_smem); its
 * merges merge_improve tries for K */
static lse_status kmax_step(lsefit_gmm_start *s, lse_gmm *m,
                            const gsl_matrix *x, const lse_gmm_fit_opts *o,
                            int smem, lse_error *err)
{
    const size_t k = lse_gmm_k(m);
    lse_gmm **given = calloc(k, sizeof *given);
    size_t n_given = 0;
    lse_status st = given == NULL ? lse_error_set(err, LSE_ENOMEM, "--init",
                                                  "out of memory")
                                  : kmax_splits(m, x, o->sample_weight,
                                                given, &n_given, err);
    lse_gmm_emem_opts e = lse_gmm_emem_opts_default(k + 1);
    e.n_starts = 0;
    e.n_random = 0;
    e.short_iter = LSEFIT_GMM_LAST_SHORT;
    e.n_keep = LSEFIT_GMM_LAST_KEEP;
    e.smem = 0;
    lse_gmm_fit_opts po = *o;
    po.progress = NULL;
    if (st == LSE_OK && n_given > 0) {
        st = lse_gmm_new(k + 1, lse_gmm_dim(m), lse_gmm_cov_type(m), &s->next,
                         NULL);
        if (st != LSE_OK)
            st = lse_error_set(err, st, "--init", "out of memory");
        else
            st = lse_gmm_fit_emem(s->next, x, &po, &e,
                                  (const lse_gmm *const *)given, n_given, err);
        if (st == LSE_OK && smem)
            st = kmax_smem(s, x, &po, err);
        if (st == LSE_OK)
            st = merge_improve(s, m, x, o, err);
        lse_gmm_free(s->next);
        s->next = NULL;
    }
    for (size_t i = 0; i < n_given; i++)
        lse_gmm_free(given[i]);
    free(given);
    return st;
}

/* K = s->kmax has no K + 1 fit of the chain to merge from: the merges of a
 * cheap one instead (kmax_step; split-and-merge EM on it in the first
 * round only), repeated from the improved fit while it improves by more
 * than 1e-6 relative, LSEFIT_GMM_LAST_ROUNDS rounds at most; a round that
 * gains less (the same optimum found again) is undone, so m and its fit
 * info change only where a better optimum was found. docs/lsefit.md,
 * "The last K, session 12" and "session 14". */
static lse_status kmax_improve(lsefit_gmm_start *s, lse_gmm *m,
                               const gsl_matrix *x, const lse_gmm_fit_opts *o,
                               lse_error *err)
{
    const size_t k = lse_gmm_k(m);
    if (k < 2 || x->size1 <= k) /* one component: a unique optimum */
        return LSE_OK;
    lse_gmm *keep = NULL;
    lse_status st = lse_gmm_new(k, lse_gmm_dim(m), lse_gmm_cov_type(m), &keep,
                                NULL);
    if (st != LSE_OK)
        return lse_error_set(err, st, "--init", "out of memory");
    for (size_t r = 0; st == LSE_OK && r < LSEFIT_GMM_LAST_ROUNDS; r++) {
        const double l0 = lse_gmm_info(m)->loglik;
        st = lse_gmm_copy(keep, m, err);
        if (st == LSE_OK)
            st = kmax_step(s, m, x, o, r == 0, err);
        if (st == LSE_OK && !(lse_gmm_info(m)->loglik > l0 + 1e-6 * fabs(l0))) {
            st = lse_gmm_copy(m, keep, err);
            break;
        }
    }
    lse_gmm_free(keep);
    return st;
}

/* emEM for K = lse_gmm_k(m) by the chain (emem_chain), taken from s->next
 * when it was computed ahead; then, for K < s->kmax, the chain's K + 1
 * computed ahead and its merges tried for K; for K = s->kmax, the merges
 * of a cheap K + 1 fit (kmax_improve) */
static lse_status emem_merge(lsefit_gmm_start *s, lse_gmm *m,
                             const gsl_matrix *x, const lse_gmm_fit_opts *o,
                             const size_t *labels, lse_error *err)
{
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    const int merge = k < s->kmax && o->reduce == NULL &&
                      lse_gmm_cov_model(m) == LSE_COV_MODEL_NONE;
    lse_status st;
    if (s->next != NULL && lse_gmm_k(s->next) == k &&
        lse_gmm_cov_type(s->next) == lse_gmm_cov_type(m) &&
        s->prev != NULL && lse_gmm_k(s->prev) == k)
        st = lse_gmm_copy(m, s->next, err);
    else
        st = emem_chain(s, m, x, o, labels, err);
    lse_gmm_free(s->next);
    s->next = NULL;
    if (st == LSE_OK && k == s->kmax && o->reduce == NULL &&
        lse_gmm_cov_model(m) == LSE_COV_MODEL_NONE)
        return kmax_improve(s, m, x, o, err);
    if (st != LSE_OK || !merge)
        return st;
    size_t *lab = NULL;
    lse_gmm_fit_opts po = *o;
    po.progress = NULL;
    st = lse_gmm_new(k + 1, d, lse_gmm_cov_type(m), &s->next, NULL);
    if (st != LSE_OK)
        return lse_error_set(err, st, "--init", "out of memory");
    if (labels != NULL) { /* emem+hc: the hcVVV cut into K + 1 */
        lab = malloc(x->size1 * sizeof *lab);
        st = lab == NULL ? lse_error_set(err, LSE_ENOMEM, "--init",
                                         "out of memory")
                         : hc_labels(s, x, k + 1, lab, err);
    }
    if (st == LSE_OK)
        st = emem_chain(s, s->next, x, &po, lab, err);
    free(lab);
    if (st == LSE_OK)
        st = merge_improve(s, m, x, o, err);
    if (st != LSE_OK) {
        lse_gmm_free(s->next);
        s->next = NULL;
    }
    return st;
}

/* The short runs of the chain's K = 1 .. kmax (emem_chain's budgets) run
 * ahead on threads the chain leaves idle, from m's fit (the range's first)
 * until kmax's: the same bits (lse_gmm_emem_ahead_begin) */
static lse_status ahead_begin(lsefit_gmm_start *s, const lse_gmm *m,
                              const gsl_matrix *x, const lse_gmm_fit_opts *o,
                              lse_error *err)
{
    if (s->ahead || s->kmax < lse_gmm_k(m))
        return LSE_OK;
    lse_gmm_emem_opts *e = calloc(s->kmax, sizeof *e);
    if (e == NULL)
        return lse_error_set(err, LSE_ENOMEM, "--init", "out of memory");
    for (size_t k = 1; k <= s->kmax; k++)
        e[k - 1] = chain_budget(s, k, o);
    const lse_status st =
        lse_gmm_emem_ahead_begin(m, x, o, e, 1, s->kmax, err);
    free(e);
    s->ahead = st == LSE_OK;
    return st;
}

static void ahead_end(lsefit_gmm_start *s)
{
    if (s->ahead)
        lse_gmm_emem_ahead_end();
    s->ahead = 0;
}

lse_status lsefit_gmm_start_fit(lsefit_gmm_start *s, lse_gmm *m,
                                const gsl_matrix *x, const lse_gmm_fit_opts *o,
                                lse_error *err)
{
    const int hc = s->method != NULL && strcmp(s->method, "hcvvv") == 0;
    const int emem = s->method != NULL && (strcmp(s->method, "emem") == 0 ||
                                           strcmp(s->method, "emem+hc") == 0);
    if ((!hc && !emem) || o->init == LSE_GMM_INIT_GIVEN)
        return lse_gmm_fit(m, x, o, err);
    const size_t n = x->size1, k = lse_gmm_k(m);
    size_t *labels = NULL;
    lse_status st = LSE_OK;
    if (hc && n > LSEFIT_HC_MAX_ROWS)
        return lse_error_set(err, LSE_EINVAL, "--init hcvvv",
                             "%zu rows: the hcVVV tree needs n^2 doubles and "
                             "n^3 time, refused above %d rows; use --init "
                             "emem",
                             n, LSEFIT_HC_MAX_ROWS);
    if (hc || (strcmp(s->method, "emem+hc") == 0 &&
               n <= LSEFIT_HC_DEFAULT_ROWS)) {
        labels = malloc(n * sizeof *labels);
        if (labels == NULL)
            return lse_error_set(err, LSE_ENOMEM, "--init", "out of memory");
        st = hc_labels(s, x, k, labels, err);
    }
    if (st == LSE_OK && emem)
        st = lse_gmm_emem_threshold(m, x, o, LSE_GMM_EMEM_DEGENERATE,
                                    &s->guard, err);
    if (st == LSE_OK && emem)
        st = ahead_begin(s, m, x, o, err);
    if (st == LSE_OK && emem) {
        st = emem_merge(s, m, x, o, labels, err);
        if (k >= s->kmax)
            ahead_end(s);
        double lo;
        if (st == LSE_OK && degenerate(m, s->guard, &lo))
            lse_log(LSE_LOG_WARN,
                    "K = %zu: every start ended degenerate (smallest "
                    "covariance eigenvalue %.3g, below %g x --reg-covar); "
                    "kept the highest, log-likelihood %.10g",
                    k, lo, LSE_GMM_EMEM_DEGENERATE,
                    lse_gmm_info(m)->loglik);
    } else if (st == LSE_OK) {
        st = lse_gmm_init_labels(m, x, labels, o->reg_covar, err);
        lse_gmm_fit_opts g = *o;
        g.init = LSE_GMM_INIT_GIVEN;
        g.n_init = 1;
        if (st == LSE_OK)
            st = lse_gmm_fit(m, x, &g, err);
    }
    free(labels);
    return st;
}

void lsefit_gmm_start_free(lsefit_gmm_start *s)
{
    ahead_end(s);
    free(s->pairs);
    s->pairs = NULL;
    lse_gmm_free(s->prev);
    s->prev = NULL;
    lse_gmm_free(s->next);
    s->next = NULL;
}

static void print_se(FILE *f, const char *what, const gsl_matrix *v)
{
    fprintf(f, "  %s\n", what);
    for (size_t i = 0; i < v->size1; i++) {
        fputs("   ", f);
        for (size_t j = 0; j < v->size2; j++)
            fprintf(f, " %12.5g", gsl_matrix_get(v, i, j));
        fputc('\n', f);
    }
}

int lsefit_gmm_bootstrap(const lse_gmm *m, size_t n, size_t n_boot,
                         unsigned long seed, const lse_gmm_fit_opts *o,
                         lse_json *doc, FILE *f)
{
    lse_gmm_boot b;
    lse_error err;
    if (lse_gmm_bootstrap(m, n, n_boot, seed, o, &b, &err) != LSE_OK)
        return lsefit_fail("--bootstrap %zu: %s", n_boot, lsefit_strip(&err));
    const size_t k = lse_gmm_k(m), d = lse_gmm_dim(m);
    const lse_cov_type t = lse_gmm_cov_type(m);
    lse_json *o2 = lse_json_new_object();
    lse_status st = o2 == NULL ? LSE_ENOMEM : LSE_OK;
    if (st == LSE_OK)
        st = lse_json_set_string(o2, "type", "parametric", &err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o2, "n_boot", (long long)b.n_boot, &err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o2, "n_failed", (long long)b.n_failed, &err);
    if (st == LSE_OK)
        st = lse_json_set_integer(o2, "seed", (long long)seed, &err);
    if (st == LSE_OK)
        st = lse_json_set_vector(o2, "weights_se", b.weights, &err);
    if (st == LSE_OK)
        st = lse_json_set_matrix(o2, "means_se", b.means, &err);
    if (st == LSE_OK) {
        if (t == LSE_COV_FULL)
            st = lse_json_set_stack(o2, "covariances_se", b.covariances, k,
                                    &err);
        else if (t == LSE_COV_SPHERICAL) {
            gsl_vector_view c = gsl_matrix_column(b.covariances, 0);
            st = lse_json_set_vector(o2, "covariances_se", &c.vector, &err);
        } else
            st = lse_json_set_matrix(o2, "covariances_se", b.covariances,
                                     &err);
    }
    if (st == LSE_OK)
        st = lse_json_set_object(doc, "bootstrap", o2, &err);
    lse_json_free(o2);
    if (st == LSE_OK && f != NULL) {
        fprintf(f, "Bootstrap standard errors (parametric, %zu replicates, "
                   "%zu redrawn; seed %lu; in the model's units):\n",
                b.n_boot, b.n_failed, seed);
        gsl_matrix_const_view w =
            gsl_matrix_const_view_vector(b.weights, 1, k);
        print_se(f, "weights", &w.matrix);
        print_se(f, "means (K x d)", b.means);
        print_se(f, t == LSE_COV_FULL ? "covariances (K blocks of d x d)"
                                      : "covariances (native shape)",
                 b.covariances);
        (void)d;
    }
    lse_gmm_boot_free(&b);
    if (st != LSE_OK)
        return lsefit_fail("--bootstrap: out of memory");
    return LSEFIT_OK;
}
