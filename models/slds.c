#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <lsegraph/lsegraph.h>

#include "util.h"

/*
 * Switching linear dynamics (Tschantz section 8) built through the public
 * graph API: one lse_sim_lingauss LSE term "dynamics" whose children are
 * the steps x_t and whose context rows are [x_{t-1}, ..., x_{t-L}]; rows
 * reduction for the mixture, chain reduction for the Markov version.
 * Derivations: docs/models/slds.md.
 */

#define BLOCK_ROWS 256 /* child rows per kernel call (and in init M-steps) */
#define INIT_FLOOR                                                             \
    1e-4               /* responsibility mass spread over all modes in the     \
                          hard-label initialization (keeps every mode's        \
                          normal equations non-singular) */
#define LLOYD_ITER 100 /* Lloyd iterations after k-means++ seeding */
#define SYM_TOL                                                                \
    1e-12 /* relative symmetry / equality tolerance of                         \
             covariance setters */

struct lse_slds {
    size_t K, d, L;
    int markov;
    lse_cov_type cov;
    gsl_matrix *logw;   /* (K, 1) mixture log-weights (logits) */
    gsl_matrix *a;      /* (K, d * d * L), row k = row-major A_k (d, dL) */
    gsl_matrix *b;      /* (K, d) offsets */
    gsl_matrix *chol;   /* (K or 1, d*d, d or 1) covariance factors */
    gsl_matrix *init;   /* (1, K) initial logits */
    gsl_matrix *trans;  /* (K, K) transition logits */
    double obs_var;     /* > 0: latent states */
    gsl_matrix *states; /* (T, d) latent states of the last fit, or NULL */
    double loglik;
    size_t n_steps, n_iter, n_increase;
    int converged;
};

/* ------------------------------------------------------------------ */
/* Errors                                                              */

static lse_status fail(lse_error *err, lse_status st, const char *fn,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static lse_status fail(lse_error *err, lse_status st, const char *fn,
                       const char *fmt, ...)
{
    if (err == NULL)
        return st;
    err->status = st;
    const int n = snprintf(err->message, sizeof err->message, "%s: ", fn);
    if (n >= 0 && (size_t)n < sizeof err->message) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message + n, sizeof err->message - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return st;
}

static void clear_err(lse_error *err)
{
    if (err != NULL) {
        err->status = LSE_OK;
        err->message[0] = '\0';
    }
}

static lse_status graph_fail(lse_error *err, lse_status st, const char *fn,
                             const lse_graph *g)
{
    return fail(err, st, fn, "%s",
                g != NULL && lse_graph_errmsg(g)[0] != '\0'
                    ? lse_graph_errmsg(g)
                    : lse_strerror(st));
}

/* ------------------------------------------------------------------ */
/* Model object                                                        */

static size_t chol_cols(lse_cov_type cov, size_t d)
{
    switch (cov) {
    case LSE_COV_FULL:
    case LSE_COV_TIED:
        return d * d;
    case LSE_COV_DIAG:
        return d;
    case LSE_COV_SPHERICAL:
        return 1;
    }
    return 0;
}

static size_t chol_rows(lse_cov_type cov, size_t K)
{
    return cov == LSE_COV_TIED ? 1 : K;
}

lse_slds_config lse_slds_config_default(void)
{
    lse_slds_config c = {
        .n_modes = 2, .dim = 1, .lags = 1, .markov = 0, .cov = LSE_COV_FULL};
    return c;
}

void lse_slds_free(lse_slds *m)
{
    if (m == NULL)
        return;
    gsl_matrix_free(m->logw);
    gsl_matrix_free(m->a);
    gsl_matrix_free(m->b);
    gsl_matrix_free(m->chol);
    gsl_matrix_free(m->init);
    gsl_matrix_free(m->trans);
    gsl_matrix_free(m->states);
    free(m);
}

static void set_identity_chol(lse_slds *m)
{
    gsl_matrix_set_zero(m->chol);
    for (size_t r = 0; r < m->chol->size1; r++) {
        if (m->cov == LSE_COV_FULL || m->cov == LSE_COV_TIED)
            for (size_t i = 0; i < m->d; i++)
                gsl_matrix_set(m->chol, r, i * m->d + i, 1.0);
        else
            for (size_t i = 0; i < m->chol->size2; i++)
                gsl_matrix_set(m->chol, r, i, 1.0);
    }
}

/* Allocation only (no validation) with the default parameter values. */
static lse_slds *model_alloc(size_t K, size_t d, size_t L, int markov,
                             lse_cov_type cov)
{
    lse_slds *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->K = K;
    m->d = d;
    m->L = L;
    m->markov = markov != 0;
    m->cov = cov;
    m->logw = gsl_matrix_calloc(K, 1);
    m->a = gsl_matrix_calloc(K, d * d * L);
    m->b = gsl_matrix_calloc(K, d);
    m->chol = gsl_matrix_calloc(chol_rows(cov, K), chol_cols(cov, d));
    m->init = gsl_matrix_calloc(1, K);
    m->trans = gsl_matrix_calloc(K, K);
    if (m->logw == NULL || m->a == NULL || m->b == NULL || m->chol == NULL ||
        m->init == NULL || m->trans == NULL) {
        lse_slds_free(m);
        return NULL;
    }
    set_identity_chol(m);
    m->loglik = NAN;
    return m;
}

lse_status lse_slds_new(const lse_slds_config *cfg, lse_slds **out,
                        lse_error *err)
{
    static const char fn[] = "lse_slds_new";
    lse_gsl_quiet();
    clear_err(err);
    if (out == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL output pointer");
    *out = NULL;
    if (cfg == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL config");
    if (cfg->n_modes < 1)
        return fail(err, LSE_EINVAL, fn, "K = %zu modes, need K >= 1",
                    cfg->n_modes);
    if (cfg->dim < 1)
        return fail(err, LSE_EINVAL, fn, "dimension d = 0");
    if (cfg->lags < 1)
        return fail(err, LSE_EINVAL, fn, "lags L = 0, need L >= 1");
    if (chol_cols(cfg->cov, cfg->dim) == 0)
        return fail(err, LSE_EINVAL, fn, "unknown covariance type %d",
                    (int)cfg->cov);
    lse_slds *m =
        model_alloc(cfg->n_modes, cfg->dim, cfg->lags, cfg->markov, cfg->cov);
    if (m == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    *out = m;
    return LSE_OK;
}

size_t lse_slds_n_modes(const lse_slds *m) { return m ? m->K : 0; }
size_t lse_slds_dim(const lse_slds *m) { return m ? m->d : 0; }
size_t lse_slds_lags(const lse_slds *m) { return m ? m->L : 0; }
int lse_slds_is_markov(const lse_slds *m) { return m ? m->markov : 0; }
lse_cov_type lse_slds_cov_type(const lse_slds *m)
{
    return m ? m->cov : LSE_COV_FULL;
}

/* Copy every parameter of src into dst (same configuration). */
static void copy_params(lse_slds *dst, const lse_slds *src)
{
    gsl_matrix_memcpy(dst->logw, src->logw);
    gsl_matrix_memcpy(dst->a, src->a);
    gsl_matrix_memcpy(dst->b, src->b);
    gsl_matrix_memcpy(dst->chol, src->chol);
    gsl_matrix_memcpy(dst->init, src->init);
    gsl_matrix_memcpy(dst->trans, src->trans);
}

/* ------------------------------------------------------------------ */
/* Parameters                                                          */

/* Normalized log-probabilities of a row of logits. */
static void log_normalize(const double *logit, size_t n, size_t stride,
                          double *out, size_t out_stride)
{
    const double z = lse_logsumexp(logit, n, stride, 1.0);
    for (size_t i = 0; i < n; i++)
        out[i * out_stride] = logit[i * stride] - z;
}

/* Probabilities p (n, stride) -> logits log(p / sum p). */
static lse_status probs_to_logits(const double *p, size_t n, size_t stride,
                                  double *out, const char *fn, const char *what,
                                  lse_error *err)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = p[i * stride];
        if (!isfinite(v))
            return fail(err, LSE_ENONFINITE, fn, "%s[%zu] = %g", what, i, v);
        if (!(v > 0.0))
            return fail(err, LSE_EDOM, fn, "%s[%zu] = %g, must be > 0", what, i,
                        v);
        sum += v;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = log(p[i * stride] / sum);
    return LSE_OK;
}

lse_status lse_slds_get_weights(const lse_slds *m, gsl_vector *w)
{
    if (m == NULL || w == NULL)
        return LSE_EFAULT;
    if (m->markov)
        return LSE_ENOTSUP;
    if (w->size != m->K)
        return LSE_EDIM;
    const double z = lse_logsumexp(gsl_matrix_const_ptr(m->logw, 0, 0), m->K,
                                   m->logw->tda, 1.0);
    for (size_t k = 0; k < m->K; k++)
        gsl_vector_set(w, k, exp(gsl_matrix_get(m->logw, k, 0) - z));
    return LSE_OK;
}

lse_status lse_slds_set_weights(lse_slds *m, const gsl_vector *w,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_set_weights";
    clear_err(err);
    if (m == NULL || w == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (m->markov)
        return fail(err, LSE_ENOTSUP, fn,
                    "a Markov model has no mixture weights (set the initial "
                    "and transition probabilities)");
    if (w->size != m->K)
        return fail(err, LSE_EDIM, fn, "%zu weights for K = %zu modes", w->size,
                    m->K);
    double *out = malloc(m->K * sizeof *out);
    if (out == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    const lse_status st =
        probs_to_logits(w->data, m->K, w->stride, out, fn, "w", err);
    if (st == LSE_OK)
        for (size_t k = 0; k < m->K; k++)
            gsl_matrix_set(m->logw, k, 0, out[k]);
    free(out);
    return st;
}

static lse_status check_finite_matrix(const gsl_matrix *x, const char *fn,
                                      const char *what, lse_error *err)
{
    for (size_t i = 0; i < x->size1; i++)
        for (size_t j = 0; j < x->size2; j++) {
            const double v = gsl_matrix_get(x, i, j);
            if (!isfinite(v))
                return fail(err, LSE_ENONFINITE, fn, "%s[%zu,%zu] = %g", what,
                            i, j, v);
        }
    return LSE_OK;
}

lse_status lse_slds_get_a(const lse_slds *m, size_t k, gsl_matrix *a)
{
    if (m == NULL || a == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    const size_t dc = m->d * m->L;
    if (a->size1 != m->d || a->size2 != dc)
        return LSE_EDIM;
    const gsl_matrix_const_view ak =
        gsl_matrix_const_view_array(gsl_matrix_const_ptr(m->a, k, 0), m->d, dc);
    gsl_matrix_memcpy(a, &ak.matrix);
    return LSE_OK;
}

lse_status lse_slds_set_a(lse_slds *m, size_t k, const gsl_matrix *a,
                          lse_error *err)
{
    static const char fn[] = "lse_slds_set_a";
    clear_err(err);
    if (m == NULL || a == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return fail(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    const size_t dc = m->d * m->L;
    if (a->size1 != m->d || a->size2 != dc)
        return fail(err, LSE_EDIM, fn,
                    "A is %zux%zu, expected d x dL = %zux%zu", a->size1,
                    a->size2, m->d, dc);
    const lse_status st = check_finite_matrix(a, fn, "A", err);
    if (st != LSE_OK)
        return st;
    gsl_matrix_view ak =
        gsl_matrix_view_array(gsl_matrix_ptr(m->a, k, 0), m->d, dc);
    gsl_matrix_memcpy(&ak.matrix, a);
    return LSE_OK;
}

lse_status lse_slds_get_b(const lse_slds *m, size_t k, gsl_vector *b)
{
    if (m == NULL || b == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    if (b->size != m->d)
        return LSE_EDIM;
    for (size_t j = 0; j < m->d; j++)
        gsl_vector_set(b, j, gsl_matrix_get(m->b, k, j));
    return LSE_OK;
}

lse_status lse_slds_set_b(lse_slds *m, size_t k, const gsl_vector *b,
                          lse_error *err)
{
    static const char fn[] = "lse_slds_set_b";
    clear_err(err);
    if (m == NULL || b == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return fail(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    if (b->size != m->d)
        return fail(err, LSE_EDIM, fn, "b has %zu entries, d = %zu", b->size,
                    m->d);
    for (size_t j = 0; j < m->d; j++)
        if (!isfinite(gsl_vector_get(b, j)))
            return fail(err, LSE_ENONFINITE, fn, "b[%zu] = %g", j,
                        gsl_vector_get(b, j));
    for (size_t j = 0; j < m->d; j++)
        gsl_matrix_set(m->b, k, j, gsl_vector_get(b, j));
    return LSE_OK;
}

/* Lower factor L_k (d, d) of mode k from the chol parameter. */
static void mode_factor(const lse_slds *m, size_t k, gsl_matrix *l)
{
    const size_t d = m->d;
    const size_t r = m->cov == LSE_COV_TIED ? 0 : k;
    gsl_matrix_set_zero(l);
    for (size_t i = 0; i < d; i++) {
        switch (m->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED:
            for (size_t j = 0; j <= i; j++)
                gsl_matrix_set(l, i, j, gsl_matrix_get(m->chol, r, i * d + j));
            break;
        case LSE_COV_DIAG:
            gsl_matrix_set(l, i, i, gsl_matrix_get(m->chol, r, i));
            break;
        case LSE_COV_SPHERICAL:
            gsl_matrix_set(l, i, i, gsl_matrix_get(m->chol, r, 0));
            break;
        }
    }
}

lse_status lse_slds_get_cov(const lse_slds *m, size_t k, gsl_matrix *cov)
{
    if (m == NULL || cov == NULL)
        return LSE_EFAULT;
    if (k >= m->K)
        return LSE_ERANGE;
    if (cov->size1 != m->d || cov->size2 != m->d)
        return LSE_EDIM;
    const size_t d = m->d;
    const size_t r = m->cov == LSE_COV_TIED ? 0 : k;
    /* Sigma = L L' on the lower triangle of the factor */
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            switch (m->cov) {
            case LSE_COV_FULL:
            case LSE_COV_TIED:
                for (size_t q = 0; q <= j; q++)
                    s += gsl_matrix_get(m->chol, r, i * d + q) *
                         gsl_matrix_get(m->chol, r, j * d + q);
                break;
            case LSE_COV_DIAG:
                if (i == j)
                    s = gsl_matrix_get(m->chol, r, i) *
                        gsl_matrix_get(m->chol, r, i);
                break;
            case LSE_COV_SPHERICAL:
                if (i == j)
                    s = gsl_matrix_get(m->chol, r, 0) *
                        gsl_matrix_get(m->chol, r, 0);
                break;
            }
            gsl_matrix_set(cov, i, j, s);
            gsl_matrix_set(cov, j, i, s);
        }
    return LSE_OK;
}

static int close_rel(double a, double b)
{
    const double scale = fmax(1.0, fmax(fabs(a), fabs(b)));
    return fabs(a - b) <= SYM_TOL * scale;
}

lse_status lse_slds_set_cov(lse_slds *m, size_t k, const gsl_matrix *cov,
                            lse_error *err)
{
    static const char fn[] = "lse_slds_set_cov";
    clear_err(err);
    if (m == NULL || cov == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (k >= m->K)
        return fail(err, LSE_ERANGE, fn, "mode %zu, K = %zu", k, m->K);
    const size_t d = m->d;
    if (cov->size1 != d || cov->size2 != d)
        return fail(err, LSE_EDIM, fn,
                    "covariance is %zux%zu, expected %zux%zu", cov->size1,
                    cov->size2, d, d);
    lse_status st = check_finite_matrix(cov, fn, "Sigma", err);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++) {
            const double u = gsl_matrix_get(cov, i, j),
                         v = gsl_matrix_get(cov, j, i);
            if (!close_rel(u, v))
                return fail(err, LSE_EINVAL, fn,
                            "Sigma is not symmetric: [%zu,%zu] = %g, [%zu,%zu] "
                            "= %g",
                            i, j, u, j, i, v);
            if ((m->cov == LSE_COV_DIAG || m->cov == LSE_COV_SPHERICAL) &&
                u != 0.0)
                return fail(err, LSE_EINVAL, fn,
                            "%s covariance: off-diagonal entry [%zu,%zu] = %g "
                            "must be 0",
                            m->cov == LSE_COV_DIAG ? "diag" : "spherical", i, j,
                            u);
        }
    if (m->cov == LSE_COV_SPHERICAL)
        for (size_t i = 1; i < d; i++)
            if (!close_rel(gsl_matrix_get(cov, i, i),
                           gsl_matrix_get(cov, 0, 0)))
                return fail(err, LSE_EINVAL, fn,
                            "spherical covariance: diagonal entries differ "
                            "(%g and %g)",
                            gsl_matrix_get(cov, 0, 0),
                            gsl_matrix_get(cov, i, i));
    gsl_matrix *l = gsl_matrix_alloc(d, d);
    if (l == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    gsl_matrix_memcpy(l, cov);
    const int rc = gsl_linalg_cholesky_decomp1(l);
    if (rc != GSL_SUCCESS) {
        gsl_matrix_free(l);
        return fail(err,
                    rc == GSL_EDOM ? LSE_ENUMERIC : lse_status_from_gsl(rc), fn,
                    "Sigma is not positive definite (%s)", gsl_strerror(rc));
    }
    const size_t r = m->cov == LSE_COV_TIED ? 0 : k;
    for (size_t i = 0; i < d; i++) {
        switch (m->cov) {
        case LSE_COV_FULL:
        case LSE_COV_TIED:
            for (size_t j = 0; j < d; j++)
                gsl_matrix_set(m->chol, r, i * d + j,
                               j <= i ? gsl_matrix_get(l, i, j) : 0.0);
            break;
        case LSE_COV_DIAG:
            gsl_matrix_set(m->chol, r, i, gsl_matrix_get(l, i, i));
            break;
        case LSE_COV_SPHERICAL:
            if (i == 0)
                gsl_matrix_set(m->chol, r, 0, gsl_matrix_get(l, 0, 0));
            break;
        }
    }
    gsl_matrix_free(l);
    return LSE_OK;
}

lse_status lse_slds_get_transition(const lse_slds *m, gsl_matrix *p)
{
    if (m == NULL || p == NULL)
        return LSE_EFAULT;
    if (!m->markov)
        return LSE_ENOTSUP;
    if (p->size1 != m->K || p->size2 != m->K)
        return LSE_EDIM;
    for (size_t j = 0; j < m->K; j++) {
        log_normalize(gsl_matrix_const_ptr(m->trans, j, 0), m->K, 1,
                      gsl_matrix_ptr(p, j, 0), 1);
        for (size_t k = 0; k < m->K; k++)
            gsl_matrix_set(p, j, k, exp(gsl_matrix_get(p, j, k)));
    }
    return LSE_OK;
}

lse_status lse_slds_set_transition(lse_slds *m, const gsl_matrix *p,
                                   lse_error *err)
{
    static const char fn[] = "lse_slds_set_transition";
    clear_err(err);
    if (m == NULL || p == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (!m->markov)
        return fail(err, LSE_ENOTSUP, fn, "a mixture has no transition matrix");
    if (p->size1 != m->K || p->size2 != m->K)
        return fail(err, LSE_EDIM, fn, "P is %zux%zu, expected %zux%zu",
                    p->size1, p->size2, m->K, m->K);
    gsl_matrix *out = gsl_matrix_alloc(m->K, m->K);
    if (out == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    lse_status st = LSE_OK;
    for (size_t j = 0; j < m->K && st == LSE_OK; j++)
        st = probs_to_logits(gsl_matrix_const_ptr(p, j, 0), m->K, 1,
                             gsl_matrix_ptr(out, j, 0), fn, "P row", err);
    if (st == LSE_OK)
        gsl_matrix_memcpy(m->trans, out);
    gsl_matrix_free(out);
    return st;
}

lse_status lse_slds_get_initial(const lse_slds *m, gsl_vector *p0)
{
    if (m == NULL || p0 == NULL)
        return LSE_EFAULT;
    if (!m->markov)
        return LSE_ENOTSUP;
    if (p0->size != m->K)
        return LSE_EDIM;
    const double z =
        lse_logsumexp(gsl_matrix_const_ptr(m->init, 0, 0), m->K, 1, 1.0);
    for (size_t k = 0; k < m->K; k++)
        gsl_vector_set(p0, k, exp(gsl_matrix_get(m->init, 0, k) - z));
    return LSE_OK;
}

lse_status lse_slds_set_initial(lse_slds *m, const gsl_vector *p0,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_set_initial";
    clear_err(err);
    if (m == NULL || p0 == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (!m->markov)
        return fail(err, LSE_ENOTSUP, fn,
                    "a mixture has no initial probabilities (set the weights)");
    if (p0->size != m->K)
        return fail(err, LSE_EDIM, fn, "%zu probabilities for K = %zu modes",
                    p0->size, m->K);
    double *out = malloc(m->K * sizeof *out);
    if (out == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    const lse_status st =
        probs_to_logits(p0->data, m->K, p0->stride, out, fn, "p0", err);
    if (st == LSE_OK)
        for (size_t k = 0; k < m->K; k++)
            gsl_matrix_set(m->init, 0, k, out[k]);
    free(out);
    return st;
}

lse_status lse_slds_set_latent(lse_slds *m, double obs_var, lse_error *err)
{
    static const char fn[] = "lse_slds_set_latent";
    clear_err(err);
    if (m == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL model");
    if (!isfinite(obs_var) || obs_var < 0.0)
        return fail(err, LSE_EDOM, fn,
                    "observation variance %g, must be finite and >= 0 (0 "
                    "turns the latent states off)",
                    obs_var);
    m->obs_var = obs_var;
    return LSE_OK;
}

double lse_slds_obs_var(const lse_slds *m) { return m ? m->obs_var : 0.0; }
const gsl_matrix *lse_slds_states(const lse_slds *m)
{
    return m ? m->states : NULL;
}

/* ------------------------------------------------------------------ */
/* Layout of the steps                                                 */

typedef struct layout {
    size_t T;
    size_t n_raw;   /* sequences in the input */
    size_t n_seg;   /* sequences with at least one step */
    size_t *seg0;   /* (n_seg) first X row of each such sequence */
    size_t *seg1;   /* (n_seg) one past its last row */
    size_t *starts; /* (n_seg + 1) first step of each; starts[n_seg] = n */
    size_t n_steps;
    int views; /* 1: children and context are views of one node */
} layout;

static void layout_free(layout *lay)
{
    free(lay->seg0);
    free(lay->seg1);
    free(lay->starts);
    memset(lay, 0, sizeof *lay);
}

static lse_status layout_make(const lse_slds *m, size_t T, const size_t *seq,
                              layout *lay, const char *fn, lse_error *err)
{
    memset(lay, 0, sizeof *lay);
    lay->T = T;
    if (T == 0)
        return fail(err, LSE_EINVAL, fn, "empty series (T = 0)");
    lay->seg0 = malloc(T * sizeof *lay->seg0);
    lay->seg1 = malloc(T * sizeof *lay->seg1);
    lay->starts = malloc((T + 1) * sizeof *lay->starts);
    if (lay->seg0 == NULL || lay->seg1 == NULL || lay->starts == NULL) {
        layout_free(lay);
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    size_t s0 = 0;
    for (size_t t = 1; t <= T; t++) {
        if (t < T && (seq == NULL || seq[t] == seq[t - 1]))
            continue;
        lay->n_raw++;
        if (t - s0 > m->L) {
            lay->seg0[lay->n_seg] = s0;
            lay->seg1[lay->n_seg] = t;
            lay->starts[lay->n_seg] = lay->n_steps;
            lay->n_seg++;
            lay->n_steps += t - s0 - m->L;
        }
        s0 = t;
    }
    lay->starts[lay->n_seg] = lay->n_steps;
    if (lay->n_steps == 0) {
        layout_free(lay);
        return fail(err, LSE_EINVAL, fn,
                    "no step: every sequence has T <= L = %zu rows (T = %zu)",
                    m->L, T);
    }
    lay->views = m->L == 1 && lay->n_raw == 1;
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* The graph                                                           */

typedef struct sgraph {
    lse_graph *g;
    lse_node *x, *y, *z, *b, *logw, *a, *chol, *init, *trans;
    lse_term *dyn, *obs;
    layout lay;
    int latent;
} sgraph;

static void sgraph_free(sgraph *sg)
{
    lse_graph_free(sg->g);
    layout_free(&sg->lay);
    memset(sg, 0, sizeof *sg);
}

static lse_status check_series(const lse_slds *m, const gsl_matrix *x,
                               const char *fn, lse_error *err)
{
    if (x == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL series");
    if (x->size2 != m->d)
        return fail(err, LSE_EDIM, fn,
                    "series has %zu columns, the model d = %zu", x->size2,
                    m->d);
    return check_finite_matrix(x, fn, "x", err);
}

/* Copy the model's parameters into the graph's parameter nodes. */
static lse_status load_params(const lse_slds *m, sgraph *sg, const char *fn,
                              lse_error *err)
{
    lse_status st = lse_node_set_value(sg->b, m->b);
    if (st == LSE_OK)
        st = lse_node_set_value(sg->a, m->a);
    if (st == LSE_OK)
        st = lse_node_set_value(sg->chol, m->chol);
    if (st == LSE_OK && sg->logw != NULL)
        st = lse_node_set_value(sg->logw, m->logw);
    if (st == LSE_OK && sg->init != NULL)
        st = lse_node_set_value(sg->init, m->init);
    if (st == LSE_OK && sg->trans != NULL)
        st = lse_node_set_value(sg->trans, m->trans);
    if (st != LSE_OK)
        return graph_fail(err, st, fn, sg->g);
    return LSE_OK;
}

/* Copy the graph's parameter nodes into the model. */
static void store_params(lse_slds *m, sgraph *sg)
{
    gsl_matrix_memcpy(m->b, lse_node_value(sg->b));
    gsl_matrix_memcpy(m->a, lse_node_value(sg->a));
    gsl_matrix_memcpy(m->chol, lse_node_value(sg->chol));
    if (sg->logw != NULL)
        gsl_matrix_memcpy(m->logw, lse_node_value(sg->logw));
    if (sg->init != NULL)
        gsl_matrix_memcpy(m->init, lse_node_value(sg->init));
    if (sg->trans != NULL)
        gsl_matrix_memcpy(m->trans, lse_node_value(sg->trans));
}

static lse_status add_node(sgraph *sg, const char *name, size_t rows,
                           size_t dim, unsigned flags, lse_node **out,
                           const char *fn, lse_error *err)
{
    const lse_status st =
        lse_graph_add_node(sg->g, name, rows, dim, flags, out);
    if (st != LSE_OK)
        return graph_fail(err, st, fn, sg->g);
    return LSE_OK;
}

/* Build the graph of model m on series x (checked by the caller). With
 * emission = 1 a Markov model gets a rows term without weights, whose
 * similarity is the emission log-likelihood of every step and mode (the
 * chain then runs on the whole series, see par_ctx); "init" and "trans"
 * are still there, holding the chain's parameters. */
static lse_status build_graph(const lse_slds *m, const gsl_matrix *x,
                              const size_t *seq, int latent, int emission,
                              sgraph *sg, const char *fn, lse_error *err)
{
    memset(sg, 0, sizeof *sg);
    lse_status st = layout_make(m, x->size1, seq, &sg->lay, fn, err);
    if (st != LSE_OK)
        return st;
    layout *lay = &sg->lay;
    const size_t K = m->K, d = m->d, L = m->L, T = x->size1, n = lay->n_steps;
    if (latent && !lay->views) {
        layout_free(lay);
        return fail(err, LSE_ENOTSUP, fn,
                    "latent states need one sequence and L = 1 (got %zu "
                    "sequences, L = %zu)",
                    lay->n_raw, L);
    }
    sg->latent = latent;
    sg->g = lse_graph_new();
    if (sg->g == NULL) {
        layout_free(lay);
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    lse_graph_set_block_rows(sg->g, BLOCK_ROWS);
    lse_view child, context;
    if (lay->views) {
        st = add_node(sg, "x", T, d, latent ? 0u : LSE_NODE_CLAMPED, &sg->x, fn,
                      err);
        if (st == LSE_OK)
            gsl_matrix_memcpy(lse_node_value(sg->x), x);
        if (st == LSE_OK && latent) {
            st = add_node(sg, "y", T, d, LSE_NODE_CLAMPED, &sg->y, fn, err);
            if (st == LSE_OK)
                gsl_matrix_memcpy(lse_node_value(sg->y), x);
        }
        child = lse_view_rows(sg->x, 1, T - 1);
        context = lse_view_rows(sg->x, 0, T - 1);
    } else {
        st = add_node(sg, "x", n, d, LSE_NODE_CLAMPED, &sg->x, fn, err);
        if (st == LSE_OK)
            st = add_node(sg, "z", n, d * L, LSE_NODE_CLAMPED, &sg->z, fn, err);
        if (st == LSE_OK) {
            gsl_matrix *xv = lse_node_value(sg->x), *zv = lse_node_value(sg->z);
            size_t i = 0;
            for (size_t q = 0; q < lay->n_seg; q++)
                for (size_t t = lay->seg0[q] + L; t < lay->seg1[q]; t++, i++)
                    for (size_t j = 0; j < d; j++) {
                        gsl_matrix_set(xv, i, j, gsl_matrix_get(x, t, j));
                        for (size_t l = 1; l <= L; l++)
                            gsl_matrix_set(zv, i, (l - 1) * d + j,
                                           gsl_matrix_get(x, t - l, j));
                    }
        }
        child = lse_view_all(sg->x);
        context = lse_view_all(sg->z);
    }
    if (st == LSE_OK)
        st = add_node(sg, "b", K, d, LSE_NODE_PARAM, &sg->b, fn, err);
    if (st == LSE_OK && !m->markov)
        st = add_node(sg, "logw", K, 1, LSE_NODE_PARAM, &sg->logw, fn, err);
    if (st == LSE_OK)
        st = add_node(sg, "A", K, d * d * L, LSE_NODE_PARAM, &sg->a, fn, err);
    if (st == LSE_OK)
        st = add_node(sg, "chol", m->chol->size1, m->chol->size2,
                      LSE_NODE_PARAM, &sg->chol, fn, err);
    if (st == LSE_OK && m->markov)
        st = add_node(sg, "init", 1, K, LSE_NODE_PARAM, &sg->init, fn, err);
    if (st == LSE_OK && m->markov)
        st = add_node(sg, "trans", K, K, LSE_NODE_PARAM, &sg->trans, fn, err);
    if (st == LSE_OK)
        st = load_params(m, sg, fn, err);
    if (st == LSE_OK) {
        const lse_gaussian_config gcfg = {.cov = m->cov};
        lse_node *params[3] = {sg->logw, sg->a, sg->chol};
        lse_term_spec spec = lse_term_spec_default();
        spec.child = child;
        spec.parent = lse_view_all(sg->b);
        spec.context = context;
        spec.sim = lse_sim_lingauss;
        spec.config = &gcfg;
        spec.param = params;
        if (m->markov && !emission) {
            spec.reduce = LSE_REDUCE_CHAIN;
            spec.chain_init = sg->init;
            spec.chain_trans = sg->trans;
            spec.chain_starts = lay->starts;
            spec.n_chain_starts = lay->n_seg;
        }
        st = lse_graph_add_lse(sg->g, "dynamics", &spec, &sg->dyn);
        if (st != LSE_OK)
            st = graph_fail(err, st, fn, sg->g);
    }
    if (st == LSE_OK && latent) {
        const lse_quadratic_config qcfg = {.scale = 1.0 / m->obs_var};
        const lse_view views[2] = {lse_view_all(sg->x), lse_view_all(sg->y)};
        st = lse_graph_add_custom(sg->g, "observation", lse_custom_quadratic,
                                  &qcfg, views, 2, &sg->obs);
        if (st != LSE_OK)
            st = graph_fail(err, st, fn, sg->g);
    }
    if (st != LSE_OK)
        sgraph_free(sg);
    return st;
}

/* Evaluate the energy (fresh similarity and softmax); fails with the
 * graph's message. */
static lse_status graph_energy(sgraph *sg, double *e, const char *fn,
                               lse_error *err)
{
    const lse_status st = lse_graph_energy(sg->g, e);
    if (st != LSE_OK)
        return graph_fail(err, st, fn, sg->g);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Several processes (docs/mpi.md)                                     */

/*
 * The processes sharing a fit. Each owns a contiguous block of the series
 * (after its context rows) and so a contiguous range of the steps; dist
 * counts steps. For a Markov model the chain runs on the whole series:
 * the emission log-likelihoods of every process's steps are summed into
 * the node "s" (N, K) of a chain graph that every process holds (a dot
 * similarity against the identity "eye" gives S = s exactly), and every
 * process runs the same forward-backward pass and chain M-step on it
 * (csolver); the posteriors of its own steps give its lingauss
 * statistics. With one process (reduce NULL) dist is the identity and
 * markov = 0: the plain graph with its chain term is used.
 */
typedef struct par_ctx {
    lse_util_dist dist;
    int markov; /* Markov model over several processes */
    int exact;  /* lse_slds_opts.exact_sums */
    int cont;   /* this process's first step continues the chain of the
                   previous process's last step */
    double *prev_last; /* (K) responsibilities of that last step */
    double *all;       /* (n_ranks * K) gather scratch */
    lse_graph *cg;     /* the chain graph (markov) */
    lse_node *cs, *ceye, *cinit, *ctrans;
    lse_term *ct;
    lse_solver *csolver;
    size_t *starts; /* global chain starts (markov) */
    size_t n_starts;
} par_ctx;

static void par_free(par_ctx *pc)
{
    lse_solver_free(pc->csolver);
    lse_graph_free(pc->cg);
    free(pc->prev_last);
    free(pc->all);
    free(pc->starts);
    lse_util_dist_free(&pc->dist);
    memset(pc, 0, sizeof *pc);
}

/* ------------------------------------------------------------------ */
/* Initialization                                                      */

/* One closed-form M-step from given responsibilities resp (n, K): the
 * lingauss statistics and solve through the similarity's vtable, then (for
 * a Markov model) initial and transition probabilities from the
 * responsibilities of consecutive steps. */
static lse_status lingauss_mstep(const lse_slds *m, sgraph *sg,
                                 const gsl_matrix *resp,
                                 const lse_mstep_opts *mo, par_ctx *pc,
                                 const char *what, const char *fn,
                                 lse_error *err)
{
    const lse_sim_type *sim = lse_term_sim(sg->dyn);
    const size_t K = m->K, n = sg->lay.n_steps;
    const size_t prow[3] = {sg->logw ? K : 0, K, m->chol->size1};
    const size_t pcol[3] = {sg->logw ? 1 : 0, m->a->size2, m->chol->size2};
    const lse_gaussian_config gcfg = {.cov = m->cov};
    const lse_sim_shape shape = {.n_child = n,
                                 .block = n < BLOCK_ROWS ? n : BLOCK_ROWS,
                                 .n_parent = K,
                                 .d_child = m->d,
                                 .d_parent = m->d,
                                 .d_context = m->d * m->L,
                                 .n_param = 3,
                                 .param_rows = prow,
                                 .param_cols = pcol};
    lse_sim_args args;
    lse_status st = lse_term_sim_args(sg->dyn, &args);
    if (st != LSE_OK)
        return fail(err, st, fn, "similarity arguments: %s", lse_strerror(st));
    /* with exact_sums, exact accumulators (docs/mpi.md): the sums, hence
     * the fit, are the same bits for any split into processes and for the
     * solver's chunks (lse_solver_opts.exact_stats) */
    const size_t n_acc = sim->stats_size(&shape, &gcfg);
    double *acc = calloc(n_acc, sizeof *acc);
    lse_xsum *xacc = pc->exact ? calloc(n_acc, sizeof *xacc) : NULL;
    if (acc == NULL || (pc->exact && xacc == NULL)) {
        free(acc);
        free(xacc);
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    const gsl_matrix *child = args.child, *ctx = args.context;
    for (size_t i0 = 0; i0 < n && st == LSE_OK; i0 += BLOCK_ROWS) {
        const size_t bsz = n - i0 < BLOCK_ROWS ? n - i0 : BLOCK_ROWS;
        gsl_matrix_const_view cv =
            gsl_matrix_const_submatrix(child, i0, 0, bsz, child->size2);
        gsl_matrix_const_view xv =
            gsl_matrix_const_submatrix(ctx, i0, 0, bsz, ctx->size2);
        gsl_matrix_const_view rv =
            gsl_matrix_const_submatrix(resp, i0, 0, bsz, K);
        lse_sim_args ba = args;
        ba.child = &cv.matrix;
        ba.context = &xv.matrix;
        ba.child_offset = i0;
        st = pc->exact ? sim->stats_exact(&ba, &rv.matrix, NULL, xacc)
                       : sim->stats(&ba, &rv.matrix, NULL, acc);
        if (st != LSE_OK)
            st = fail(err, st, fn, "lingauss statistics: %s", lse_strerror(st));
    }
    if (st == LSE_OK)
        st = pc->exact ? lse_util_xsum(&pc->dist, xacc, n_acc, acc, fn, err)
                       : lse_util_sum(&pc->dist, acc, n_acc, fn, err);
    free(xacc);
    if (st == LSE_OK) {
        gsl_matrix *out[3] = {sg->logw ? lse_node_value(sg->logw) : NULL,
                              lse_node_value(sg->a), lse_node_value(sg->chol)};
        char msg[512] = "";
        lse_mstep_report rep = {0};
        st = sim->solve(&args, acc, lse_node_value(sg->b), out, mo, &rep, msg,
                        sizeof msg);
        if (st != LSE_OK)
            st = fail(err, st, fn, "%s: %s", what,
                      msg[0] ? msg : lse_strerror(st));
    }
    free(acc);
    return st;
}

static lse_status mstep_from_resp(const lse_slds *m, sgraph *sg,
                                  const gsl_matrix *resp,
                                  const lse_mstep_opts *mo, par_ctx *pc,
                                  const char *fn, lse_error *err)
{
    const size_t K = m->K, n = sg->lay.n_steps;
    lse_status st =
        lingauss_mstep(m, sg, resp, mo, pc, "initial M-step", fn, err);
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
        return fail(err, LSE_ENOMEM, fn, "out of memory");
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
        st = lse_util_sum(&pc->dist, pc->all, pc->dist.n_ranks * K, fn, err);
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
        st = lse_util_xsum(&pc->dist, xc, K + K * K, cnt, fn, err);
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

static double sqdist(const double *a, const double *b, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return s;
}

/* Row gi (global step index) of r, drawn uniformly or by D^2, sent by
 * its owner to every process: out (d). */
static lse_status send_row(const gsl_matrix *r, size_t gi, par_ctx *pc,
                           double *out, const char *fn, lse_error *err)
{
    const lse_util_dist *dd = &pc->dist;
    const int owner = gi >= dd->offset && gi < dd->offset + dd->n_local;
    if (owner)
        for (size_t j = 0; j < r->size2; j++)
            out[j] = gsl_matrix_get(r, gi - dd->offset, j);
    return lse_util_bcast(&pc->dist, owner, out, r->size2, fn, err);
}

/* k-means++ seeding then Lloyd iterations on the rows of r (n, d); labels
 * (n). Over several processes r is this process's share of the steps: the
 * draws are those of the whole set (the same generator state everywhere),
 * the D^2 totals, counts, center sums and changes are summed. */
static lse_status kmeans(const gsl_matrix *r, size_t K, gsl_rng *rng,
                         size_t *labels, par_ctx *pc, const char *fn,
                         lse_error *err)
{
    const size_t n = r->size1, d = r->size2;
    const size_t N = pc->dist.n_total, P = pc->dist.n_ranks;
    const size_t rank = pc->dist.rank;
    gsl_matrix *c = gsl_matrix_alloc(K, d);
    double *dist = malloc(n * sizeof *dist);
    double *cnt = malloc(K * sizeof *cnt);
    double *acc = malloc(K * d * sizeof *acc);
    double *row = malloc(d * sizeof *row);
    double *tot = malloc(P * sizeof *tot);
    lse_status st = LSE_OK;
    if (c == NULL || dist == NULL || cnt == NULL || acc == NULL ||
        row == NULL || tot == NULL) {
        st = fail(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    /* seeding: first center uniform, then proportional to D^2 */
    st = send_row(r, gsl_rng_uniform_int(rng, N), pc, row, fn, err);
    for (size_t k = 0; st == LSE_OK && k < K; k++) {
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(c, k, j, row[j]);
        double total = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double dk = sqdist(gsl_matrix_const_ptr(r, i, 0),
                                     gsl_matrix_const_ptr(c, k, 0), d);
            dist[i] = (k == 0 || dk < dist[i]) ? dk : dist[i];
            total += dist[i];
        }
        if (k + 1 == K)
            break;
        st = lse_util_gather(&pc->dist, &total, 1, tot, fn, err);
        if (st != LSE_OK)
            break;
        total = 0.0;
        for (size_t q = 0; q < P; q++)
            total += tot[q];
        if (!(total > 0.0)) {
            st = send_row(r, gsl_rng_uniform_int(rng, N), pc, row, fn, err);
            continue;
        }
        const double u = gsl_rng_uniform(rng) * total;
        /* the process where the running sum first exceeds u, else the last
         * step of all */
        size_t owner = P;
        double before = 0.0, cum = 0.0;
        for (size_t q = 0; q < P && owner == P; q++) {
            if (cum + tot[q] > u) {
                owner = q;
                before = cum;
            }
            cum += tot[q];
        }
        if (owner == P) { /* round-off: the last step of all */
            st = send_row(r, N - 1, pc, row, fn, err);
            continue;
        }
        if (owner == rank) {
            double a = before;
            size_t pick = n - 1;
            for (size_t i = 0; i < n; i++) {
                a += dist[i];
                if (a > u) {
                    pick = i;
                    break;
                }
            }
            for (size_t j = 0; j < d; j++)
                row[j] = gsl_matrix_get(r, pick, j);
        }
        st = lse_util_bcast(&pc->dist, owner == rank, row, d, fn, err);
    }
    /* Lloyd */
    for (size_t i = 0; i < n; i++)
        labels[i] = K;
    for (size_t it = 0; st == LSE_OK && it < LLOYD_ITER; it++) {
        double changed = 0.0;
        for (size_t i = 0; i < n; i++) {
            size_t best = 0;
            double bd = INFINITY;
            for (size_t k = 0; k < K; k++) {
                const double dk = sqdist(gsl_matrix_const_ptr(r, i, 0),
                                         gsl_matrix_const_ptr(c, k, 0), d);
                if (dk < bd) {
                    bd = dk;
                    best = k;
                }
            }
            if (labels[i] != best) {
                labels[i] = best;
                changed = 1.0;
            }
        }
        st = lse_util_sum(&pc->dist, &changed, 1, fn, err);
        if (st != LSE_OK || !(changed > 0.0))
            break;
        for (size_t k = 0; k < K; k++)
            cnt[k] = 0.0;
        for (size_t i = 0; i < n; i++)
            cnt[labels[i]] += 1.0;
        st = lse_util_sum(&pc->dist, cnt, K, fn, err);
        if (st != LSE_OK)
            break;
        /* new means; an empty cluster keeps its center */
        for (size_t q = 0; q < K * d; q++)
            acc[q] = 0.0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                acc[labels[i] * d + j] +=
                    gsl_matrix_get(r, i, j) / cnt[labels[i]];
        st = lse_util_sum(&pc->dist, acc, K * d, fn, err);
        for (size_t k = 0; st == LSE_OK && k < K; k++)
            if (cnt[k] > 0.0)
                for (size_t j = 0; j < d; j++)
                    gsl_matrix_set(c, k, j, acc[k * d + j]);
    }
done:
    gsl_matrix_free(c);
    free(dist);
    free(cnt);
    free(acc);
    free(row);
    free(tot);
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
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    for (size_t j = 0; j < nc; j++)
        for (size_t i = 0; i < n; i++)
            buf[j] += gsl_matrix_get(f, i, j);
    lse_status st = lse_util_sum(&pc->dist, buf, nc, fn, err);
    for (size_t j = 0; st == LSE_OK && j < nc; j++) {
        buf[j] /= N;
        for (size_t i = 0; i < n; i++)
            buf[nc + j] += pow(gsl_matrix_get(f, i, j) - buf[j], 2);
    }
    if (st == LSE_OK)
        st = lse_util_sum(&pc->dist, buf + nc, nc, fn, err);
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

/* Initial parameters in the graph's nodes by opts->init. */
static lse_status initialize(const lse_slds *m, sgraph *sg,
                             const lse_slds_opts *o, const lse_mstep_opts *mo,
                             gsl_rng *rng, par_ctx *pc, const char *fn,
                             lse_error *err)
{
    lse_status st = load_params(m, sg, fn, err);
    if (st != LSE_OK || o->init == LSE_SLDS_INIT_GIVEN)
        return st;
    const size_t n = sg->lay.n_steps, K = m->K, d = m->d;
    gsl_matrix *resp = gsl_matrix_alloc(n, K);
    if (resp == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
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
            st = fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    if (st == LSE_OK) {
        lse_sim_args args;
        st = lse_term_sim_args(sg->dyn, &args);
        if (st != LSE_OK)
            st =
                fail(err, st, fn, "similarity arguments: %s", lse_strerror(st));
        if (st == LSE_OK) {
            const gsl_matrix *av = lse_node_value(sg->a);
            const gsl_matrix_const_view a0 = gsl_matrix_const_view_array(
                gsl_matrix_const_ptr(av, 0, 0), d, d * m->L);
            gsl_matrix_view res = gsl_matrix_submatrix(r, 0, 0, n, d);
            gsl_matrix_view pos = gsl_matrix_submatrix(r, 0, d, n, d);
            int rc = gsl_matrix_memcpy(&res.matrix, args.child);
            if (rc == GSL_SUCCESS)
                rc = gsl_matrix_memcpy(&pos.matrix, args.child);
            if (rc == GSL_SUCCESS)
                rc = gsl_blas_dgemm(CblasNoTrans, CblasTrans, -1.0,
                                    args.context, &a0.matrix, 1.0, &res.matrix);
            if (rc != GSL_SUCCESS)
                st = fail(err, lse_status_from_gsl(rc), fn, "residuals: %s",
                          gsl_strerror(rc));
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

/* ------------------------------------------------------------------ */
/* Fitting                                                             */

lse_slds_opts lse_slds_opts_default(void)
{
    lse_slds_opts o = {.init = LSE_SLDS_INIT_KMEANSPP,
                       .n_init = 1,
                       .max_iter = 500,
                       .tol = 1e-6,
                       .reg_covar = 1e-6,
                       .seed = 0,
                       .estep_steps = 5,
                       .progress = NULL,
                       .user = NULL,
                       .reduce = NULL,
                       .reduce_user = NULL,
                       .rank = 0,
                       .n_ranks = 1,
                       .context_rows = 0,
                       .exact_sums = 0};
    return o;
}

typedef struct progress_ctx {
    const lse_slds_opts *o;
    size_t run;
} progress_ctx;

static int on_iter(const lse_solver *s, void *user)
{
    const progress_ctx *c = user;
    return c->o->progress(c->run, lse_solver_n_iter(s), -lse_solver_energy(s),
                          -lse_solver_delta(s), c->o->user);
}

/* The processes of a fit (dist over the steps); for a Markov model over
 * several processes also the chain graph on the whole series (par_ctx). */
static lse_status par_init(par_ctx *pc, const lse_slds *m,
                           const lse_slds_opts *o, const sgraph *sg,
                           const char *fn, lse_error *err)
{
    memset(pc, 0, sizeof *pc);
    pc->exact = o->exact_sums != 0;
    const layout *lay = &sg->lay;
    const size_t K = m->K;
    lse_status st = lse_util_dist_init(&pc->dist, o->reduce, o->reduce_user,
                                       o->rank, o->n_ranks, lay->n_steps, fn,
                                       err);
    if (st != LSE_OK || !lse_util_dist_parallel(&pc->dist) || !m->markov)
        return st;
    pc->markov = 1;
    const size_t P = pc->dist.n_ranks, N = pc->dist.n_total;
    pc->prev_last = calloc(K, sizeof *pc->prev_last);
    pc->all = calloc(P * K, sizeof *pc->all);
    double *ind = calloc(N, sizeof *ind);
    if (pc->prev_last == NULL || pc->all == NULL || ind == NULL) {
        free(ind);
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    /* the first step continues the previous process's chain when it is
     * the first row of this block (its L predecessors are the context
     * rows) and the previous block ends with a step */
    const double mine[2] = {
        o->context_rows > 0 && lay->seg0[0] + m->L == o->context_rows,
        lay->seg1[lay->n_seg - 1] == lay->T};
    st = lse_util_gather(&pc->dist, mine, 2, pc->dist.tmp, fn, err);
    if (st == LSE_OK)
        pc->cont = pc->dist.rank > 0 && mine[0] != 0.0 &&
                   pc->dist.tmp[2 * (pc->dist.rank - 1) + 1] != 0.0;
    /* the chain starts of the whole series */
    for (size_t q = 0; st == LSE_OK && q < lay->n_seg; q++)
        if (q > 0 || !pc->cont)
            ind[pc->dist.offset + lay->starts[q]] = 1.0;
    if (st == LSE_OK)
        st = lse_util_sum(&pc->dist, ind, N, fn, err);
    if (st == LSE_OK) {
        pc->starts = malloc(N * sizeof *pc->starts);
        if (pc->starts == NULL)
            st = fail(err, LSE_ENOMEM, fn, "out of memory");
        for (size_t i = 1; st == LSE_OK && i < N; i++)
            if (ind[i] != 0.0)
                pc->starts[pc->n_starts++] = i;
    }
    free(ind);
    if (st != LSE_OK)
        return st;
    /* the chain graph: S = s eye' = s exactly */
    pc->cg = lse_graph_new();
    if (pc->cg == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    lse_graph_set_block_rows(pc->cg, BLOCK_ROWS);
    st = lse_graph_add_node(pc->cg, "s", N, K, LSE_NODE_CLAMPED, &pc->cs);
    if (st == LSE_OK)
        st = lse_graph_add_node(pc->cg, "eye", K, K, LSE_NODE_CLAMPED,
                                &pc->ceye);
    if (st == LSE_OK)
        st = lse_graph_add_node(pc->cg, "init", 1, K, LSE_NODE_PARAM,
                                &pc->cinit);
    if (st == LSE_OK)
        st = lse_graph_add_node(pc->cg, "trans", K, K, LSE_NODE_PARAM,
                                &pc->ctrans);
    if (st == LSE_OK) {
        gsl_matrix_set_identity(lse_node_value(pc->ceye));
        lse_term_spec spec = lse_term_spec_default();
        spec.child = lse_view_all(pc->cs);
        spec.parent = lse_view_all(pc->ceye);
        spec.sim = lse_sim_dot;
        spec.reduce = LSE_REDUCE_CHAIN;
        spec.chain_init = pc->cinit;
        spec.chain_trans = pc->ctrans;
        spec.chain_starts = pc->starts;
        spec.n_chain_starts = pc->n_starts;
        st = lse_graph_add_lse(pc->cg, "chain", &spec, &pc->ct);
    }
    if (st != LSE_OK)
        return graph_fail(err, st, fn, pc->cg);
    if (lse_node_value(pc->cs)->tda != K)
        return fail(err, LSE_EINTERNAL, fn, "chain node is not contiguous");
    pc->csolver = lse_solver_new(pc->cg, lse_solver_em);
    if (pc->csolver == NULL)
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    return LSE_OK;
}

/* Markov over several processes: the emission log-likelihoods of this
 * process's steps at the current parameters (its graph's similarity),
 * summed with the others' into the chain node "s" (N, K). */
static lse_status emissions(par_ctx *pc, sgraph *sg, const char *fn,
                            lse_error *err)
{
    double e;
    lse_status st = graph_energy(sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *S = lse_term_similarity(sg->dyn);
    if (S == NULL)
        return fail(err, LSE_EINTERNAL, fn, "no emission matrix");
    gsl_matrix *all = lse_node_value(pc->cs);
    gsl_matrix_set_zero(all);
    gsl_matrix_view own =
        gsl_matrix_submatrix(all, pc->dist.offset, 0, S->size1, S->size2);
    gsl_matrix_memcpy(&own.matrix, S);
    return lse_util_sum(&pc->dist, all->data, all->size1 * all->size2, fn,
                        err);
}

/* EM for a Markov model over several processes: every iteration the
 * emissions are gathered, the chain solver runs the E-step (forward-
 * backward on the whole series) and the chain M-step, and the posteriors
 * of this process's steps give the lingauss M-step (statistics summed). */
static lse_status run_markov_par(par_ctx *pc, sgraph *sg, const lse_slds *m,
                                 const lse_slds_opts *o,
                                 const lse_solver_opts *so, size_t run,
                                 lse_solver_result *res, const char *fn,
                                 lse_error *err)
{
    lse_solver *cs = pc->csolver;
    memset(res, 0, sizeof *res);
    res->reason = LSE_STOP_MAX_ITER;
    lse_status st = lse_solver_set_opts(cs, so);
    if (st != LSE_OK)
        return graph_fail(err, st, fn, pc->cg);
    gsl_matrix_memcpy(lse_node_value(pc->cinit), lse_node_value(sg->init));
    gsl_matrix_memcpy(lse_node_value(pc->ctrans), lse_node_value(sg->trans));
    st = emissions(pc, sg, fn, err);
    if (st == LSE_OK && (st = lse_solver_init(cs)) != LSE_OK)
        st = graph_fail(err, st, fn, pc->cg);
    for (size_t it = 0; st == LSE_OK && it < o->max_iter; it++) {
        if (it > 0)
            st = emissions(pc, sg, fn, err);
        if (st == LSE_OK && (st = lse_solver_iterate(cs)) != LSE_OK)
            st = graph_fail(err, st, fn, pc->cg);
        if (st != LSE_OK)
            break;
        const gsl_matrix *post = lse_term_softmax(pc->ct);
        gsl_matrix_const_view own = gsl_matrix_const_submatrix(
            post, pc->dist.offset, 0, sg->lay.n_steps, m->K);
        st = lingauss_mstep(m, sg, &own.matrix, &so->mstep, pc, "M-step", fn,
                            err);
        if (st != LSE_OK)
            break;
        if (o->progress != NULL &&
            o->progress(run, lse_solver_n_iter(cs), -lse_solver_energy(cs),
                        -lse_solver_delta(cs), o->user)) {
            res->reason = LSE_STOP_CALLBACK;
            break;
        }
        if (lse_solver_test(cs) == LSE_OK) {
            res->converged = 1;
            res->reason = LSE_STOP_ENERGY;
            break;
        }
    }
    if (st == LSE_OK)
        st = emissions(pc, sg, fn, err);
    if (st == LSE_OK && (st = lse_solver_finish(cs)) != LSE_OK)
        st = graph_fail(err, st, fn, pc->cg);
    gsl_matrix_memcpy(lse_node_value(sg->init), lse_node_value(pc->cinit));
    gsl_matrix_memcpy(lse_node_value(sg->trans), lse_node_value(pc->ctrans));
    res->status = st;
    res->n_iter = lse_solver_n_iter(cs);
    res->energy = lse_solver_energy(cs);
    if (st != LSE_OK)
        res->reason = LSE_STOP_ERROR;
    return st;
}

lse_status lse_slds_fit(lse_slds *m, const gsl_matrix *x, const size_t *seq,
                        const lse_slds_opts *opts, lse_error *err)
{
    static const char fn[] = "lse_slds_fit";
    lse_gsl_quiet();
    clear_err(err);
    if (m == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL model");
    const lse_slds_opts o = opts != NULL ? *opts : lse_slds_opts_default();
    if (o.init != LSE_SLDS_INIT_KMEANSPP && o.init != LSE_SLDS_INIT_RANDOM &&
        o.init != LSE_SLDS_INIT_GIVEN)
        return fail(err, LSE_EINVAL, fn, "unknown init %d", (int)o.init);
    if (o.n_init < 1)
        return fail(err, LSE_EINVAL, fn, "n_init = 0, need >= 1");
    if (!(o.tol >= 0.0) || !isfinite(o.tol))
        return fail(err, LSE_EINVAL, fn, "tol = %g, need finite >= 0", o.tol);
    if (!(o.reg_covar >= 0.0) || !isfinite(o.reg_covar))
        return fail(err, LSE_EINVAL, fn, "reg_covar = %g, need finite >= 0",
                    o.reg_covar);
    const int par = o.reduce != NULL;
    if (o.context_rows > 0 && (!par || o.rank == 0 || o.context_rows > m->L))
        return fail(err, LSE_EINVAL, fn,
                    "context_rows = %zu needs a reduction hook, rank > 0 and "
                    "at most L = %zu",
                    o.context_rows, m->L);
    if (par && m->obs_var > 0.0)
        return fail(err, LSE_ENOTSUP, fn,
                    "latent states are not supported with several processes");
    lse_status st = check_series(m, x, fn, err);
    if (st != LSE_OK)
        return st;
    if (par && o.context_rows >= x->size1)
        return fail(err, LSE_EINVAL, fn,
                    "process %zu: its block has no row after the %zu context "
                    "rows",
                    o.rank, o.context_rows);
    sgraph sg;
    st = build_graph(m, x, seq, m->obs_var > 0.0, par && m->markov, &sg, fn,
                     err);
    if (st != LSE_OK) {
        if (par && st == LSE_EINVAL)
            fail(err, st, fn,
                 "process %zu has no step in its block of %zu rows (use fewer "
                 "processes)",
                 o.rank, x->size1 - o.context_rows);
        return st;
    }
    par_ctx pc;
    st = par_init(&pc, m, &o, &sg, fn, err);
    if (st != LSE_OK) {
        par_free(&pc);
        sgraph_free(&sg);
        return st;
    }
    const size_t n = pc.dist.n_total;
    if (n < m->K && o.init != LSE_SLDS_INIT_GIVEN) {
        par_free(&pc);
        sgraph_free(&sg);
        return fail(err, LSE_EINVAL, fn, "%zu steps for K = %zu modes", n,
                    m->K);
    }
    lse_slds *best = model_alloc(m->K, m->d, m->L, m->markov, m->cov);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    lse_solver *s = lse_solver_new(sg.g, lse_solver_em);
    gsl_matrix *best_states =
        sg.latent ? gsl_matrix_alloc(x->size1, x->size2) : NULL;
    if (best == NULL || rng == NULL || s == NULL ||
        (sg.latent && best_states == NULL)) {
        st = fail(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    gsl_rng_set(rng, o.seed);
    lse_solver_opts so = lse_solver_opts_default();
    so.tol_energy = o.tol * (double)n;
    so.estep_steps = o.estep_steps;
    so.mstep.reg_covar = o.reg_covar;
    /* exact_sums: every statistics pass sums exactly, like lingauss_mstep
     * over several processes (bit-identical fits for any number of
     * processes and threads; docs/mpi.md) */
    so.exact_stats = o.exact_sums != 0;
    st = lse_solver_set_opts(s, &so);
    if (st != LSE_OK) {
        st = graph_fail(err, st, fn, sg.g);
        goto done;
    }
    if (par)
        lse_solver_set_reduce(s, lse_util_dist_reduce, &pc.dist);
    const size_t runs = o.init == LSE_SLDS_INIT_GIVEN ? 1 : o.n_init;
    double best_obj = -INFINITY;
    int have = 0;
    lse_status last = LSE_OK;
    lse_error last_err;
    clear_err(&last_err);
    for (size_t run = 0; run < runs; run++) {
        if (sg.latent) /* every run starts from the observations */
            gsl_matrix_memcpy(lse_node_value(sg.x), x);
        lse_status rs =
            initialize(m, &sg, &o, &so.mstep, rng, &pc, fn, &last_err);
        /* latent states: the noise covariances stay at their initial
         * values (jointly with the states their MAP is degenerate: a
         * noiseless state path and Sigma -> 0 send the energy to -inf) */
        if (sg.latent)
            lse_node_set_clamped(sg.chol, 1);
        lse_solver_result res = {0};
        double obj = NAN;
        if (rs == LSE_OK && pc.markov) {
            rs = run_markov_par(&pc, &sg, m, &o, &so, run, &res, fn,
                                &last_err);
            obj = -res.energy;
        } else if (rs == LSE_OK) {
            progress_ctx ctx = {.o = &o, .run = run};
            rs = lse_solver_run(s, o.max_iter, o.progress ? on_iter : NULL,
                                &ctx, &res);
            if (rs != LSE_OK)
                rs = graph_fail(&last_err, rs, fn, sg.g);
            obj = -lse_solver_energy(s);
        }
        if (rs == LSE_ENOMEM || pc.dist.failed) {
            st = fail(err, rs, fn, "%s", last_err.message);
            goto done;
        }
        if (rs != LSE_OK) {
            last = rs;
            continue;
        }
        if (!have || obj > best_obj) {
            have = 1;
            best_obj = obj;
            store_params(best, &sg);
            /* the term's own energy excludes the observation term of
             * latent states; over several processes the summed energy */
            best->loglik = par || (o.exact_sums && !sg.latent)
                               ? obj /* exact: summed exactly */
                               : -lse_term_energy(sg.dyn);
            best->n_iter = res.n_iter;
            best->converged = res.converged;
            best->n_increase =
                lse_solver_n_increase(pc.markov ? pc.csolver : s);
            if (sg.latent)
                gsl_matrix_memcpy(best_states, lse_node_value(sg.x));
        }
    }
    if (!have) {
        st = fail(err, last, fn, "every initialization failed; last: %s",
                  last_err.message);
        goto done;
    }
    copy_params(m, best);
    m->loglik = best->loglik;
    m->n_iter = best->n_iter;
    m->converged = best->converged;
    m->n_increase = best->n_increase;
    m->n_steps = n;
    gsl_matrix_free(m->states);
    m->states = best_states;
    best_states = NULL;
    st = LSE_OK;
done:
    gsl_matrix_free(best_states);
    lse_solver_free(s);
    gsl_rng_free(rng);
    lse_slds_free(best);
    par_free(&pc);
    sgraph_free(&sg);
    return st;
}

lse_status lse_slds_steps(const lse_slds *m, size_t T, const size_t *seq,
                          size_t *rows, size_t *n_steps, lse_error *err)
{
    static const char fn[] = "lse_slds_steps";
    clear_err(err);
    if (m == NULL || n_steps == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    layout lay;
    const lse_status st = layout_make(m, T, seq, &lay, fn, err);
    if (st != LSE_OK)
        return st;
    *n_steps = lay.n_steps;
    if (rows != NULL) {
        size_t i = 0;
        for (size_t q = 0; q < lay.n_seg; q++)
            for (size_t t = lay.seg0[q] + m->L; t < lay.seg1[q]; t++)
                rows[i++] = t;
    }
    layout_free(&lay);
    return LSE_OK;
}

/* Build the observed-series graph and evaluate it. */
static lse_status eval_graph(const lse_slds *m, const gsl_matrix *x,
                             const size_t *seq, sgraph *sg, double *e,
                             const char *fn, lse_error *err)
{
    if (m == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL model");
    lse_status st = check_series(m, x, fn, err);
    if (st == LSE_OK)
        st = build_graph(m, x, seq, 0, 0, sg, fn, err);
    if (st != LSE_OK)
        return st;
    st = graph_energy(sg, e, fn, err);
    if (st != LSE_OK)
        sgraph_free(sg);
    return st;
}

lse_status lse_slds_score(const lse_slds *m, const gsl_matrix *x,
                          const size_t *seq, double *loglik, lse_error *err)
{
    static const char fn[] = "lse_slds_score";
    lse_gsl_quiet();
    clear_err(err);
    if (loglik == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    const lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    *loglik = -e;
    sgraph_free(&sg);
    return LSE_OK;
}

lse_status lse_slds_posteriors(const lse_slds *m, const gsl_matrix *x,
                               const size_t *seq, gsl_matrix *post,
                               lse_error *err)
{
    static const char fn[] = "lse_slds_posteriors";
    lse_gsl_quiet();
    clear_err(err);
    if (post == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    const lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *a = lse_term_softmax(sg.dyn);
    lse_status out = LSE_OK;
    if (post->size1 != a->size1 || post->size2 != a->size2)
        out = fail(err, LSE_EDIM, fn,
                   "posteriors are %zux%zu, expected "
                   "n_steps x K = %zux%zu",
                   post->size1, post->size2, a->size1, a->size2);
    else
        gsl_matrix_memcpy(post, a);
    sgraph_free(&sg);
    return out;
}

lse_status lse_slds_most_likely(const lse_slds *m, const gsl_matrix *x,
                                const size_t *seq, size_t *modes,
                                lse_error *err)
{
    static const char fn[] = "lse_slds_most_likely";
    lse_gsl_quiet();
    clear_err(err);
    if (modes == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    const lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *a = lse_term_softmax(sg.dyn);
    for (size_t i = 0; i < a->size1; i++) {
        const gsl_vector_const_view row = gsl_matrix_const_row(a, i);
        modes[i] = gsl_vector_max_index(&row.vector);
    }
    sgraph_free(&sg);
    return LSE_OK;
}

lse_status lse_slds_viterbi(const lse_slds *m, const gsl_matrix *x,
                            const size_t *seq, size_t *path, lse_error *err)
{
    static const char fn[] = "lse_slds_viterbi";
    lse_gsl_quiet();
    clear_err(err);
    if (path == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL output");
    sgraph sg;
    double e;
    lse_status st = eval_graph(m, x, seq, &sg, &e, fn, err);
    if (st != LSE_OK)
        return st;
    const gsl_matrix *S = lse_term_similarity(sg.dyn); /* (n, K) */
    const size_t n = S->size1, K = m->K;
    if (!m->markov) { /* independent modes: argmax of the similarity */
        for (size_t i = 0; i < n; i++) {
            const gsl_vector_const_view row = gsl_matrix_const_row(S, i);
            path[i] = gsl_vector_max_index(&row.vector);
        }
        sgraph_free(&sg);
        return LSE_OK;
    }
    double *delta = malloc(n * K * sizeof *delta);
    size_t *psi = malloc(n * K * sizeof *psi);
    double *logp0 = malloc(K * sizeof *logp0);
    double *logT = malloc(K * K * sizeof *logT);
    if (delta == NULL || psi == NULL || logp0 == NULL || logT == NULL) {
        st = fail(err, LSE_ENOMEM, fn, "out of memory");
        goto done;
    }
    log_normalize(gsl_matrix_const_ptr(m->init, 0, 0), K, 1, logp0, 1);
    for (size_t j = 0; j < K; j++)
        log_normalize(gsl_matrix_const_ptr(m->trans, j, 0), K, 1, logT + j * K,
                      1);
    for (size_t q = 0; q < sg.lay.n_seg; q++) {
        const size_t s0 = sg.lay.starts[q], s1 = sg.lay.starts[q + 1];
        for (size_t k = 0; k < K; k++)
            delta[s0 * K + k] = logp0[k] + gsl_matrix_get(S, s0, k);
        for (size_t i = s0 + 1; i < s1; i++)
            for (size_t k = 0; k < K; k++) {
                size_t arg = 0;
                double best = -INFINITY;
                for (size_t j = 0; j < K; j++) {
                    const double v = delta[(i - 1) * K + j] + logT[j * K + k];
                    if (v > best) {
                        best = v;
                        arg = j;
                    }
                }
                delta[i * K + k] = best + gsl_matrix_get(S, i, k);
                psi[i * K + k] = arg;
            }
        size_t k = 0;
        for (size_t j = 1; j < K; j++)
            if (delta[(s1 - 1) * K + j] > delta[(s1 - 1) * K + k])
                k = j;
        path[s1 - 1] = k;
        for (size_t i = s1 - 1; i > s0; i--)
            path[i - 1] = psi[i * K + path[i]];
    }
done:
    free(delta);
    free(psi);
    free(logp0);
    free(logT);
    sgraph_free(&sg);
    return st;
}

/* ------------------------------------------------------------------ */
/* Simulation                                                          */

static size_t draw(gsl_rng *rng, const double *logit, size_t K)
{
    const double z = lse_logsumexp(logit, K, 1, 1.0);
    const double u = gsl_rng_uniform(rng);
    double acc = 0.0;
    for (size_t k = 0; k < K; k++) {
        acc += exp(logit[k] - z);
        if (u < acc)
            return k;
    }
    return K - 1;
}

lse_status lse_slds_simulate(const lse_slds *m, size_t T, unsigned long seed,
                             gsl_matrix *x, size_t *modes, lse_error *err)
{
    static const char fn[] = "lse_slds_simulate";
    lse_gsl_quiet();
    clear_err(err);
    if (m == NULL || x == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL argument");
    if (T == 0)
        return fail(err, LSE_EINVAL, fn, "T = 0");
    if (x->size1 != T || x->size2 != m->d)
        return fail(err, LSE_EDIM, fn, "output is %zux%zu, expected %zux%zu",
                    x->size1, x->size2, T, m->d);
    const size_t K = m->K, d = m->d, L = m->L;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_matrix *fac = gsl_matrix_alloc(K * d, d);
    gsl_vector *z = gsl_vector_alloc(d);
    double *wlogit = malloc(K * sizeof *wlogit);
    if (rng == NULL || fac == NULL || z == NULL || wlogit == NULL) {
        gsl_rng_free(rng);
        gsl_matrix_free(fac);
        gsl_vector_free(z);
        free(wlogit);
        return fail(err, LSE_ENOMEM, fn, "out of memory");
    }
    gsl_rng_set(rng, seed);
    for (size_t k = 0; k < K; k++) {
        gsl_matrix_view lk = gsl_matrix_submatrix(fac, k * d, 0, d, d);
        mode_factor(m, k, &lk.matrix);
        wlogit[k] = m->markov ? 0.0 : gsl_matrix_get(m->logw, k, 0);
    }
    size_t prev = 0;
    for (size_t t = 0; t < T; t++) {
        size_t k;
        if (!m->markov)
            k = draw(rng, wlogit, K);
        else if (t == 0)
            k = draw(rng, gsl_matrix_const_ptr(m->init, 0, 0), K);
        else
            k = draw(rng, gsl_matrix_const_ptr(m->trans, prev, 0), K);
        prev = k;
        if (modes != NULL)
            modes[t] = k;
        /* noise L_k z */
        for (size_t j = 0; j < d; j++)
            gsl_vector_set(z, j, gsl_ran_gaussian(rng, 1.0));
        const gsl_matrix_const_view lk =
            gsl_matrix_const_submatrix(fac, k * d, 0, d, d);
        gsl_blas_dtrmv(CblasLower, CblasNoTrans, CblasNonUnit, &lk.matrix, z);
        const double *ak = gsl_matrix_const_ptr(m->a, k, 0);
        for (size_t i = 0; i < d; i++) {
            double v = gsl_matrix_get(m->b, k, i) + gsl_vector_get(z, i);
            for (size_t l = 1; l <= L && l <= t; l++)
                for (size_t j = 0; j < d; j++)
                    v += ak[i * d * L + (l - 1) * d + j] *
                         gsl_matrix_get(x, t - l, j);
            gsl_matrix_set(x, t, i, v);
        }
    }
    gsl_rng_free(rng);
    gsl_matrix_free(fac);
    gsl_vector_free(z);
    free(wlogit);
    return LSE_OK;
}

/* ------------------------------------------------------------------ */
/* Results                                                             */

double lse_slds_loglik(const lse_slds *m) { return m ? m->loglik : NAN; }
double lse_slds_loglik_per_step(const lse_slds *m)
{
    return m && m->n_steps > 0 ? m->loglik / (double)m->n_steps : NAN;
}
size_t lse_slds_n_fit_steps(const lse_slds *m) { return m ? m->n_steps : 0; }
size_t lse_slds_n_iter(const lse_slds *m) { return m ? m->n_iter : 0; }
int lse_slds_converged(const lse_slds *m) { return m ? m->converged : 0; }
size_t lse_slds_n_increase(const lse_slds *m) { return m ? m->n_increase : 0; }

size_t lse_slds_n_params(const lse_slds *m)
{
    if (m == NULL)
        return 0;
    const size_t K = m->K, d = m->d;
    size_t p = K * d * d * m->L + K * d;
    switch (m->cov) {
    case LSE_COV_FULL:
        p += K * d * (d + 1) / 2;
        break;
    case LSE_COV_DIAG:
        p += K * d;
        break;
    case LSE_COV_SPHERICAL:
        p += K;
        break;
    case LSE_COV_TIED:
        p += d * (d + 1) / 2;
        break;
    }
    p += m->markov ? (K - 1) + K * (K - 1) : K - 1;
    return p;
}

double lse_slds_bic(const lse_slds *m)
{
    if (m == NULL || m->n_steps == 0)
        return NAN;
    return -2.0 * m->loglik +
           (double)lse_slds_n_params(m) * log((double)m->n_steps);
}

double lse_slds_aic(const lse_slds *m)
{
    if (m == NULL || m->n_steps == 0)
        return NAN;
    return -2.0 * m->loglik + 2.0 * (double)lse_slds_n_params(m);
}

lse_status lse_slds_graph_new(const lse_slds *m, const gsl_matrix *x,
                              const size_t *seq, lse_graph **g, lse_error *err)
{
    static const char fn[] = "lse_slds_graph_new";
    lse_gsl_quiet();
    clear_err(err);
    if (g == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL output");
    *g = NULL;
    if (m == NULL)
        return fail(err, LSE_EFAULT, fn, "NULL model");
    lse_status st = check_series(m, x, fn, err);
    if (st != LSE_OK)
        return st;
    sgraph sg;
    st = build_graph(m, x, seq, m->obs_var > 0.0, 0, &sg, fn, err);
    if (st != LSE_OK)
        return st;
    *g = sg.g;
    sg.g = NULL;
    sgraph_free(&sg);
    return LSE_OK;
}
