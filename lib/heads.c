#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "graph-private.h"
#include "kernels-private.h"
#include "size-private.h"
#include "threads-private.h"

/* A head axis for attention-like terms (docs/learning.md section 6):
 *
 *   E = -sum_h sum_c (1/beta) log sum_p exp(beta S_h(c, p)),
 *   S_h = project(base)(c, p; W_c^h, W_p^h, theta_h).
 *
 * A custom term: views child, parent, W_c, W_p, [context], [base params].
 * Each head runs the projected similarity's own kernels (lib/sim/project.c)
 * on row blocks of the child view with views of its rows of the stacked
 * parameter nodes. Heads are the tasks of the parallel loop: each writes
 * its energy and the gradients that several heads share (child, parent,
 * context, a shared projection) into its own buffers, which are summed in
 * head order afterwards; gradients of a head's own rows of W_c, W_p and the
 * base parameters go straight to the node. Results do not depend on the
 * thread count. */

#define MAXB LSE_PROJECT_MAX_BASE_PARAM
#define NPROJ (2 + MAXB)
#define BLOCK 256

enum { V_CHILD = 0, V_PARENT = 1, V_WC = 2, V_WP = 3, V_REST = 4 };

lse_heads_spec lse_heads_spec_default(void)
{
    lse_heads_spec s;
    memset(&s, 0, sizeof s);
    s.n_heads = 1;
    s.beta = 1.0;
    return s;
}

/* ------------------------------------------------------------------ */
/* Shapes                                                              */

typedef struct heads_dims {
    size_t H, nc, np, dc, dp, dx, kc, kp, block;
    size_t nb;                  /* base->n_param */
    size_t bview[MAXB];         /* view index of base param i, or 0 */
    size_t brows[MAXB];         /* rows per head of base param i (0 absent) */
    size_t bcols[MAXB];
    size_t ctx_view;            /* 0: none */
    size_t prow[NPROJ], pcol[NPROJ]; /* one head's project shape */
    lse_sim_shape shape;
    lse_project_config pcfg;
} heads_dims;

static size_t n_views_expected(const lse_heads_config *c)
{
    size_t n = V_REST + (c->has_context ? 1 : 0);
    for (size_t i = 0; i < MAXB; i++)
        n += (c->base_present >> i) & 1u;
    return n;
}

/* The config alone: base, heads, flags, beta, parameters, view count. */
static lse_status check_config(const lse_heads_config *c, size_t n,
                               char *msg, size_t len)
{
    if (c == NULL) {
        snprintf(msg, len, "heads: a config is required");
        return LSE_EFAULT;
    }
    const lse_sim_type *b = c->base;
    if (b == NULL) {
        snprintf(msg, len, "heads: config.base (the base similarity) is "
                           "required");
        return LSE_EFAULT;
    }
    if (b == lse_sim_project || (b->flags & LSE_SIM_WHOLE_CHILDREN)) {
        snprintf(msg, len, "heads: base '%s' is not supported (%s)", b->name,
                 b == lse_sim_project ? "heads project already"
                                      : "it needs every child row at once");
        return LSE_EINVAL;
    }
    if (b->n_param > MAXB) {
        snprintf(msg, len, "heads: base '%s' has %zu parameters, at most %d "
                           "supported",
                 b->name, b->n_param, MAXB);
        return LSE_EINVAL;
    }
    if (c->n_heads < 1 || c->n_heads > LSE_HEADS_MAX) {
        snprintf(msg, len, "heads: n_heads = %zu, expected 1 .. %d",
                 c->n_heads, LSE_HEADS_MAX);
        return LSE_EINVAL;
    }
    if (c->share & ~(unsigned)(LSE_HEADS_SHARE_CHILD | LSE_HEADS_SHARE_PARENT)) {
        snprintf(msg, len, "heads: unknown share flags 0x%x", c->share);
        return LSE_EINVAL;
    }
    if (c->mask & ~(unsigned)(LSE_MASK_CAUSAL | LSE_MASK_NO_SELF)) {
        snprintf(msg, len, "heads: unknown mask flags 0x%x", c->mask);
        return LSE_EINVAL;
    }
    if (!isfinite(c->beta) || !(c->beta > 0.0)) {
        snprintf(msg, len, "heads: beta = %g, must be finite and > 0",
                 c->beta);
        return LSE_EDOM;
    }
    if (c->base_present >> b->n_param) {
        snprintf(msg, len, "heads: base parameter bits 0x%x, base '%s' has "
                           "%zu parameters",
                 c->base_present, b->name, b->n_param);
        return LSE_EDIM;
    }
    for (size_t i = 0; i < b->n_param; i++)
        if (!((c->base_present >> i) & 1u) &&
            !((b->optional_params >> i) & 1u)) {
            snprintf(msg, len, "heads: base '%s' parameter %s is required",
                     b->name, b->param_names[i]);
            return LSE_EFAULT;
        }
    if ((b->flags & LSE_SIM_NEEDS_CONTEXT) && !c->has_context) {
        snprintf(msg, len, "heads: base '%s' needs a context view", b->name);
        return LSE_EFAULT;
    }
    if (n != n_views_expected(c)) {
        snprintf(msg, len, "heads: %zu views, the config describes %zu "
                           "(child, parent, W_c, W_p%s, base parameters)",
                 n, n_views_expected(c), c->has_context ? ", context" : "");
        return LSE_EINVAL;
    }
    return LSE_OK;
}

/* The project similarity's shape and config of one head. */
static void fill_shape(heads_dims *d, const lse_heads_config *c)
{
    d->block = d->nc < BLOCK ? d->nc : BLOCK;
    d->prow[0] = d->kc;
    d->pcol[0] = d->dc;
    d->prow[1] = d->kp;
    d->pcol[1] = d->dp;
    for (size_t i = 0; i < MAXB; i++) {
        d->prow[2 + i] = d->brows[i];
        d->pcol[2 + i] = d->bcols[i];
    }
    d->shape.n_child = d->nc;
    d->shape.block = d->block;
    d->shape.n_parent = d->np;
    d->shape.d_child = d->dc;
    d->shape.d_parent = d->dp;
    d->shape.d_context = d->dx;
    d->shape.n_param = NPROJ;
    d->shape.param_rows = d->prow;
    d->shape.param_cols = d->pcol;
    d->pcfg.base = c->base;
    d->pcfg.base_config = c->base_config;
}

/* Derive the shapes from the views; check what the base does not. */
static lse_status heads_dims_of(const gsl_matrix *const *v, size_t n,
                                const lse_heads_config *c, heads_dims *d,
                                char *msg, size_t len)
{
    memset(d, 0, sizeof *d);
    lse_status st = check_config(c, n, msg, len);
    if (st != LSE_OK)
        return st;
    const lse_sim_type *b = c->base;
    const size_t H = c->n_heads;
    d->H = H;
    d->nc = v[V_CHILD]->size1;
    d->dc = v[V_CHILD]->size2;
    d->np = v[V_PARENT]->size1;
    d->dp = v[V_PARENT]->size2;
    const size_t hc = (c->share & LSE_HEADS_SHARE_CHILD) ? 1 : H;
    const size_t hp = (c->share & LSE_HEADS_SHARE_PARENT) ? 1 : H;
    if (v[V_WC]->size2 != d->dc || v[V_WC]->size1 % hc != 0) {
        snprintf(msg, len, "heads: W_c is %zux%zu, expected (%s k_c) x %zu",
                 v[V_WC]->size1, v[V_WC]->size2, hc > 1 ? "H" : "1", d->dc);
        return LSE_EDIM;
    }
    if (v[V_WP]->size2 != d->dp || v[V_WP]->size1 % hp != 0) {
        snprintf(msg, len, "heads: W_p is %zux%zu, expected (%s k_p) x %zu",
                 v[V_WP]->size1, v[V_WP]->size2, hp > 1 ? "H" : "1", d->dp);
        return LSE_EDIM;
    }
    d->kc = v[V_WC]->size1 / hc;
    d->kp = v[V_WP]->size1 / hp;
    size_t next = V_REST;
    if (c->has_context) {
        d->ctx_view = next++;
        d->dx = v[d->ctx_view]->size2;
        if (v[d->ctx_view]->size1 != d->nc) {
            snprintf(msg, len, "heads: context has %zu rows, child %zu",
                     v[d->ctx_view]->size1, d->nc);
            return LSE_EDIM;
        }
    }
    d->nb = b->n_param;
    for (size_t i = 0; i < b->n_param; i++) {
        if (!((c->base_present >> i) & 1u))
            continue;
        d->bview[i] = next++;
        const gsl_matrix *m = v[d->bview[i]];
        if (m->size1 % H != 0) {
            snprintf(msg, len, "heads: base parameter %s has %zu rows, not "
                               "a multiple of H = %zu",
                     b->param_names[i], m->size1, H);
            return LSE_EDIM;
        }
        d->brows[i] = m->size1 / H;
        d->bcols[i] = m->size2;
    }
    fill_shape(d, c);
    /* sizes: H (nc np) for kept matrices, H (nc dc + np dp) buffers */
    size_t t;
    if (lse_size_mul(d->nc, d->np, &t) || lse_size_mul(t, H, &t) ||
        lse_size_mul(t, sizeof(double), &t)) {
        snprintf(msg, len, "heads: %zu heads of %zu x %zu scores exceed the "
                           "address space",
                 H, d->nc, d->np);
        return LSE_ENOMEM;
    }
    return lse_sim_project->check(&d->shape, &d->pcfg, msg, len);
}

/* ------------------------------------------------------------------ */
/* Evaluation                                                          */

enum {
    RUN_GRAD = 1u << 0, /* G = -A: energy gradients */
    RUN_KEEP = 1u << 1, /* keep S, A, lse of every head */
    RUN_BACK = 1u << 2  /* no forward: chain the given dL/dS of each head */
};

typedef struct head_out {
    double energy;
    lse_status st;
    gsl_matrix *gchild, *gparent, *gctx, *gwc, *gwp; /* private, or NULL */
} head_out;

typedef struct heads_run {
    const lse_heads_config *cfg;
    heads_dims d;
    const gsl_matrix *const *v; /* the views' values */
    gsl_matrix *const *gr;      /* the views' grads (NULL: clamped) */
    unsigned flags;
    gsl_matrix **S, **A;        /* RUN_KEEP: H matrices (nc, np) */
    gsl_vector **lse;           /* RUN_KEEP: H vectors (nc) */
    const gsl_matrix *const *G; /* RUN_BACK: H matrices (nc, np) */
    head_out *out;              /* H */
} heads_run;

static size_t wc_row(const heads_run *r, size_t h)
{
    return (r->cfg->share & LSE_HEADS_SHARE_CHILD) ? 0 : h * r->d.kc;
}

static size_t wp_row(const heads_run *r, size_t h)
{
    return (r->cfg->share & LSE_HEADS_SHARE_PARENT) ? 0 : h * r->d.kp;
}

/* Masked pairs of rows [i0, i0 + b) to -INFINITY. */
static void apply_mask(const heads_run *r, gsl_matrix *s, size_t i0)
{
    const unsigned m = r->cfg->mask;
    for (size_t i = 0; i < s->size1; i++) {
        const size_t pc = r->cfg->child_first + i0 + i;
        double *row = gsl_matrix_ptr(s, i, 0);
        for (size_t j = 0; j < s->size2; j++) {
            const size_t pp = r->cfg->parent_first + j;
            if (((m & LSE_MASK_CAUSAL) && pp > pc) ||
                ((m & LSE_MASK_NO_SELF) && pp == pc))
                row[j] = -INFINITY;
        }
    }
}

/* One row: a = exp(beta (s - max)) / sum, the row's (1/beta) log sum exp;
 * -INFINITY and a zero row when every entry is -INFINITY. The exponentials
 * (lse_exp_nonpos, branch-free) are one loop that vectorizes, the sum
 * another in index order. */
LSE_KERNEL double softmax_row(const double *s, double *a, size_t n,
                              double beta)
{
    double m = -INFINITY;
    for (size_t j = 0; j < n; j++)
        m = s[j] > m ? s[j] : m;
    if (m == -INFINITY) {
        for (size_t j = 0; j < n; j++)
            a[j] = 0.0;
        return -INFINITY;
    }
    for (size_t j = 0; j < n; j++)
        a[j] = lse_exp_nonpos(beta * (s[j] - m));
    double z = 0.0;
    for (size_t j = 0; j < n; j++)
        z += a[j];
    const double inv = 1.0 / z;
    for (size_t j = 0; j < n; j++)
        a[j] *= inv;
    return m + log(z) / beta;
}

static void softmax_rows_plain(const gsl_matrix *s, gsl_matrix *a,
                               double beta, double *lse)
{
    for (size_t i = 0; i < s->size1; i++)
        lse[i] = softmax_row(gsl_matrix_const_ptr(s, i, 0),
                             gsl_matrix_ptr(a, i, 0), s->size2, beta);
}

#if LSE_HAVE_AVX2_PATH
/* softmax_row with AVX2 and FMA: four lanes of maxima, exponentials
 * (lse_exp_nonpos4) and partial sums, the same tail as softmax_row. */
LSE_TARGET_AVX2_FMA
static double softmax_row_fma(const double *s, double *a, size_t n,
                              double beta)
{
    size_t j = 0;
    __m256d m4 = _mm256_set1_pd(-INFINITY);
    for (; j + 4 <= n; j += 4)
        m4 = _mm256_max_pd(m4, _mm256_loadu_pd(s + j));
    double mm[4];
    _mm256_storeu_pd(mm, m4);
    double m = mm[0];
    for (int q = 1; q < 4; q++)
        m = mm[q] > m ? mm[q] : m;
    for (; j < n; j++)
        m = s[j] > m ? s[j] : m;
    if (m == -INFINITY) {
        for (size_t q = 0; q < n; q++)
            a[q] = 0.0;
        return -INFINITY;
    }
    const __m256d mv = _mm256_set1_pd(m), bv = _mm256_set1_pd(beta);
    __m256d z4 = _mm256_setzero_pd();
    for (j = 0; j + 4 <= n; j += 4) {
        const __m256d x =
            _mm256_mul_pd(bv, _mm256_sub_pd(_mm256_loadu_pd(s + j), mv));
        const __m256d e = lse_exp_nonpos4(x);
        _mm256_storeu_pd(a + j, e);
        z4 = _mm256_add_pd(z4, e);
    }
    double zz[4];
    _mm256_storeu_pd(zz, z4);
    double z = (zz[0] + zz[1]) + (zz[2] + zz[3]);
    for (; j < n; j++) {
        a[j] = lse_exp_nonpos(beta * (s[j] - m));
        z += a[j];
    }
    const double inv = 1.0 / z;
    const __m256d iv = _mm256_set1_pd(inv);
    for (j = 0; j + 4 <= n; j += 4)
        _mm256_storeu_pd(a + j, _mm256_mul_pd(_mm256_loadu_pd(a + j), iv));
    for (; j < n; j++)
        a[j] *= inv;
    return m + log(z) / beta;
}

LSE_TARGET_AVX2_FMA
static void softmax_rows_fma(const gsl_matrix *s, gsl_matrix *a, double beta,
                             double *lse)
{
    for (size_t i = 0; i < s->size1; i++)
        lse[i] = softmax_row_fma(gsl_matrix_const_ptr(s, i, 0),
                                 gsl_matrix_ptr(a, i, 0), s->size2, beta);
}
#endif

/* A = softmax(beta S) by rows, lse[i] = (1/beta) log sum exp(beta S_i.);
 * -INFINITY and zero rows when a row is fully masked. LSE_ENONFINITE for a
 * NaN or +inf score. */
static lse_status softmax_block(const gsl_matrix *s, gsl_matrix *a,
                                double beta, double *lse)
{
    for (size_t i = 0; i < s->size1; i++) {
        const double *si = gsl_matrix_const_ptr(s, i, 0);
        int bad = 0;
        for (size_t j = 0; j < s->size2; j++)
            bad |= isnan(si[j]) || si[j] == INFINITY;
        if (bad)
            return LSE_ENONFINITE;
    }
#if LSE_HAVE_AVX2_PATH
    if (lse_cpu_avx2_fma()) {
        softmax_rows_fma(s, a, beta, lse);
        return LSE_OK;
    }
#endif
    softmax_rows_plain(s, a, beta, lse);
    return LSE_OK;
}

static gsl_matrix *zeroed(gsl_matrix **m, size_t rows, size_t cols)
{
    if (*m == NULL)
        *m = gsl_matrix_calloc(rows, cols);
    else
        gsl_matrix_set_zero(*m);
    return *m;
}

/* Head h's parameters: views of its rows of W_c, W_p and the base's. */
static void head_params(const heads_run *r, size_t h, gsl_matrix pv[NPROJ],
                        const gsl_matrix *param[NPROJ])
{
    const heads_dims *d = &r->d;
    pv[0] = gsl_matrix_const_submatrix(r->v[V_WC], wc_row(r, h), 0, d->kc,
                                       d->dc).matrix;
    pv[1] = gsl_matrix_const_submatrix(r->v[V_WP], wp_row(r, h), 0, d->kp,
                                       d->dp).matrix;
    param[0] = &pv[0];
    param[1] = &pv[1];
    for (size_t i = 0; i < d->nb; i++) {
        if (d->bview[i] == 0)
            continue;
        pv[2 + i] = gsl_matrix_const_submatrix(r->v[d->bview[i]],
                                               h * d->brows[i], 0,
                                               d->brows[i], d->bcols[i])
                        .matrix;
        param[2 + i] = &pv[2 + i];
    }
}

/* Head h's gradient outputs: private zeroed matrices for the views (and
 * shared projections), views of its rows of the projections' gradients.
 * LSE_ENOMEM when a private matrix cannot be had. */
static lse_status head_grads(heads_run *r, size_t h, gsl_matrix_view gv[NPROJ],
                             gsl_matrix *gparam[NPROJ])
{
    const heads_dims *d = &r->d;
    const lse_heads_config *c = r->cfg;
    head_out *o = &r->out[h];
    if (r->gr[V_CHILD] != NULL)
        zeroed(&o->gchild, d->nc, d->dc);
    if (r->gr[V_PARENT] != NULL)
        zeroed(&o->gparent, d->np, d->dp);
    if (d->ctx_view != 0 && r->gr[d->ctx_view] != NULL)
        zeroed(&o->gctx, d->nc, d->dx);
    if (r->gr[V_WC] != NULL) {
        if (c->share & LSE_HEADS_SHARE_CHILD) {
            gparam[0] = zeroed(&o->gwc, d->kc, d->dc);
        } else {
            gv[0] = gsl_matrix_submatrix(r->gr[V_WC], wc_row(r, h), 0,
                                         d->kc, d->dc);
            gparam[0] = &gv[0].matrix;
        }
    }
    if (r->gr[V_WP] != NULL) {
        if (c->share & LSE_HEADS_SHARE_PARENT) {
            gparam[1] = zeroed(&o->gwp, d->kp, d->dp);
        } else {
            gv[1] = gsl_matrix_submatrix(r->gr[V_WP], wp_row(r, h), 0,
                                         d->kp, d->dp);
            gparam[1] = &gv[1].matrix;
        }
    }
    for (size_t i = 0; i < d->nb; i++) {
        if (d->bview[i] == 0 || r->gr[d->bview[i]] == NULL)
            continue;
        gv[2 + i] = gsl_matrix_submatrix(r->gr[d->bview[i]],
                                         h * d->brows[i], 0, d->brows[i],
                                         d->bcols[i]);
        gparam[2 + i] = &gv[2 + i].matrix;
    }
    if ((o->gchild == NULL && r->gr[V_CHILD] != NULL) ||
        (o->gparent == NULL && r->gr[V_PARENT] != NULL) ||
        (d->ctx_view != 0 && r->gr[d->ctx_view] != NULL &&
         o->gctx == NULL) ||
        (r->gr[V_WC] != NULL && gparam[0] == NULL) ||
        (r->gr[V_WP] != NULL && gparam[1] == NULL))
        return LSE_ENOMEM;
    return LSE_OK;
}

/* One head over every block of child rows. */
static lse_status run_head(heads_run *r, size_t h)
{
    const heads_dims *d = &r->d;
    const lse_heads_config *c = r->cfg;
    head_out *o = &r->out[h];
    const int want_grad = (r->flags & (RUN_GRAD | RUN_BACK)) != 0;
    const int fwd = !(r->flags & RUN_BACK);
    o->energy = 0.0;
    /* this head's parameters: views of its rows */
    gsl_matrix pv[NPROJ]; /* copies of const views' matrix headers */
    const gsl_matrix *param[NPROJ] = {NULL};
    gsl_matrix_view gv[NPROJ];
    gsl_matrix *gparam[NPROJ] = {NULL};
    head_params(r, h, pv, param);
    if (want_grad && head_grads(r, h, gv, gparam) != LSE_OK)
        return LSE_ENOMEM;
    void *work = NULL;
    lse_status st = lse_sim_project->work_new(&d->shape, &d->pcfg, &work);
    if (st != LSE_OK)
        return st;
    gsl_matrix *sbuf = NULL, *abuf = NULL;
    double *lbuf = NULL;
    if (fwd && !(r->flags & RUN_KEEP)) {
        sbuf = gsl_matrix_alloc(d->block, d->np);
        abuf = gsl_matrix_alloc(d->block, d->np);
        lbuf = malloc(d->block * sizeof *lbuf);
        if (sbuf == NULL || abuf == NULL || lbuf == NULL) {
            st = LSE_ENOMEM;
            goto done;
        }
    }
    lse_sim_args a;
    memset(&a, 0, sizeof a);
    a.child = r->v[V_CHILD];
    a.parent = r->v[V_PARENT];
    a.context = d->ctx_view != 0 ? r->v[d->ctx_view] : NULL;
    a.child_offset = 0;
    a.param = param;
    a.config = &d->pcfg;
    a.work = work;
    st = lse_sim_project->prepare(&a);
    for (size_t i0 = 0; st == LSE_OK && i0 < d->nc; i0 += d->block) {
        const size_t b = d->nc - i0 < d->block ? d->nc - i0 : d->block;
        gsl_matrix_const_view cv =
            gsl_matrix_const_submatrix(r->v[V_CHILD], i0, 0, b, d->dc);
        gsl_matrix xv;
        a.child = &cv.matrix;
        if (d->ctx_view != 0) {
            xv = gsl_matrix_const_submatrix(r->v[d->ctx_view], i0, 0, b,
                                            d->dx).matrix;
            a.context = &xv;
        }
        a.child_offset = i0;
        gsl_matrix_view sv, av;
        double *lse = NULL;
        if (fwd) {
            if (r->flags & RUN_KEEP) {
                sv = gsl_matrix_submatrix(r->S[h], i0, 0, b, d->np);
                av = gsl_matrix_submatrix(r->A[h], i0, 0, b, d->np);
                lse = gsl_vector_ptr(r->lse[h], i0);
            } else {
                sv = gsl_matrix_submatrix(sbuf, 0, 0, b, d->np);
                av = gsl_matrix_submatrix(abuf, 0, 0, b, d->np);
                lse = lbuf;
            }
            st = lse_sim_project->eval(&a, &sv.matrix);
            if (st != LSE_OK)
                break;
            if (c->mask != 0)
                apply_mask(r, &sv.matrix, i0);
            st = softmax_block(&sv.matrix, &av.matrix, c->beta, lse);
            if (st != LSE_OK)
                break;
            for (size_t i = 0; i < b; i++)
                if (lse[i] != -INFINITY)
                    o->energy -= lse[i];
        }
        if (!want_grad)
            continue;
        gsl_matrix gb;
        const gsl_matrix *g;
        if (r->flags & RUN_BACK) {
            gb = gsl_matrix_const_submatrix(r->G[h], i0, 0, b, d->np).matrix;
            g = &gb;
        } else {
            /* G = dE/dS = -A, in place */
            gsl_matrix_scale(&av.matrix, -1.0);
            g = &av.matrix;
        }
        lse_sim_grads out;
        gsl_matrix_view cg, xg;
        out.child = NULL;
        out.context = NULL;
        out.parent = o->gparent;
        if (o->gchild != NULL) {
            cg = gsl_matrix_submatrix(o->gchild, i0, 0, b, d->dc);
            out.child = &cg.matrix;
        }
        if (o->gctx != NULL) {
            xg = gsl_matrix_submatrix(o->gctx, i0, 0, b, d->dx);
            out.context = &xg.matrix;
        }
        out.param = gparam;
        st = lse_sim_project->grad(&a, g, &out);
        if (st == LSE_OK && (r->flags & RUN_KEEP) && !(r->flags & RUN_BACK))
            gsl_matrix_scale(&av.matrix, -1.0); /* keep A, not -A */
    }
done:
    lse_sim_project->work_free(work);
    gsl_matrix_free(sbuf);
    gsl_matrix_free(abuf);
    free(lbuf);
    return st;
}

static void run_free(heads_run *r)
{
    for (size_t h = 0; r->out != NULL && h < r->d.H; h++) {
        head_out *o = &r->out[h];
        gsl_matrix_free(o->gchild);
        gsl_matrix_free(o->gparent);
        gsl_matrix_free(o->gctx);
        gsl_matrix_free(o->gwc);
        gsl_matrix_free(o->gwp);
    }
    free(r->out);
    r->out = NULL;
}

/* Every head (in parallel), then the sums in head order. */
static lse_status run_heads(heads_run *r, double *energy)
{
    const size_t H = r->d.H;
    r->out = calloc(H, sizeof *r->out);
    if (r->out == NULL)
        return LSE_ENOMEM;
    int nt = lse_threads_for(H);
    const int saved = lse_blas_serial_begin(nt);
    const long nh = (long)H;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
#endif
    for (long h = 0; h < nh; h++)
        r->out[h].st = run_head(r, (size_t)h);
    lse_blas_serial_end(saved);
    lse_status st = LSE_OK;
    double e = 0.0;
    for (size_t h = 0; h < H && st == LSE_OK; h++) {
        const head_out *o = &r->out[h];
        st = o->st;
        e += o->energy;
    }
    if (st == LSE_OK && (r->flags & (RUN_GRAD | RUN_BACK))) {
        const size_t cv = r->d.ctx_view;
        for (size_t h = 0; h < H; h++) {
            const head_out *o = &r->out[h];
            if (o->gchild != NULL)
                gsl_matrix_add(r->gr[V_CHILD], o->gchild);
            if (o->gparent != NULL)
                gsl_matrix_add(r->gr[V_PARENT], o->gparent);
            if (o->gctx != NULL)
                gsl_matrix_add(r->gr[cv], o->gctx);
            if (o->gwc != NULL)
                gsl_matrix_add(r->gr[V_WC], o->gwc);
            if (o->gwp != NULL)
                gsl_matrix_add(r->gr[V_WP], o->gwp);
        }
    }
    if (energy != NULL)
        *energy = st == LSE_OK ? e : NAN;
    run_free(r);
    return st;
}

/* ------------------------------------------------------------------ */
/* The custom type                                                     */

static lse_status heads_check(const gsl_matrix *const *v, size_t n,
                              const void *config, char *msg, size_t len)
{
    heads_dims d;
    return heads_dims_of(v, n, config, &d, msg, len);
}

static lse_status heads_eval(const gsl_matrix *const *v, size_t n,
                             const void *config, gsl_matrix *const *grad,
                             double *energy, unsigned flags)
{
    heads_run r;
    memset(&r, 0, sizeof r);
    r.cfg = config;
    char msg[256];
    lse_status st = heads_dims_of(v, n, config, &r.d, msg, sizeof msg);
    if (st != LSE_OK)
        return st;
    gsl_matrix *none[V_REST + 1 + MAXB];
    for (size_t i = 0; i < n; i++)
        none[i] = NULL;
    r.v = v;
    r.gr = grad != NULL ? grad : none;
    r.flags = flags;
    return run_heads(&r, energy);
}

static lse_status heads_energy(const gsl_matrix *const *v, size_t n,
                               const void *config, double *energy)
{
    return heads_eval(v, n, config, NULL, energy, 0);
}

static lse_status heads_grad(const gsl_matrix *const *v, size_t n,
                             const void *config, gsl_matrix *const *grad,
                             double *energy)
{
    return heads_eval(v, n, config, grad, energy, RUN_GRAD);
}

static int heads_describe(const void *config, char *buf, size_t len)
{
    const lse_heads_config *c = config;
    if (c == NULL || c->base == NULL)
        return snprintf(buf, len, "base=?");
    const char *sh = (c->share & LSE_HEADS_SHARE_PARENT)
                         ? ((c->share & LSE_HEADS_SHARE_CHILD) ? ", shared"
                                                               : ", shared keys")
                         : ((c->share & LSE_HEADS_SHARE_CHILD) ? ", shared queries"
                                                               : "");
    return snprintf(buf, len, "H=%zu, base=%s%s", c->n_heads, c->base->name,
                    sh);
}

static const lse_custom_type heads_type = {
    .name = "heads",
    .config_size = sizeof(lse_heads_config),
    .check = heads_check,
    .energy = heads_energy,
    .grad = heads_grad,
    .describe = heads_describe};
const lse_custom_type *const lse_custom_heads = &heads_type;

int lse_term_is_heads(const lse_term *t)
{
    return t != NULL && lse_term_custom(t) == lse_custom_heads;
}

/* ------------------------------------------------------------------ */
/* Building                                                            */

lse_status lse_graph_add_heads(lse_graph *g, const char *name,
                               const lse_heads_spec *spec, lse_term **out)
{
    static const char fn[] = "lse_graph_add_heads";
    if (out != NULL)
        *out = NULL;
    if (g == NULL)
        return LSE_EFAULT;
    if (spec == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn, "NULL spec");
    const char *nm = name != NULL ? name : "?";
    if (spec->base == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn,
                              "term '%s': spec.base (the base similarity) is "
                              "required",
                              nm);
    if (spec->child.node == NULL || spec->parent.node == NULL ||
        spec->w_child == NULL || spec->w_parent == NULL)
        return lse_graph_fail(g, LSE_EFAULT, fn,
                              "term '%s': child, parent, w_child and w_parent "
                              "are required",
                              nm);
    if (spec->base->n_param > MAXB)
        return lse_graph_fail(g, LSE_EINVAL, fn,
                              "term '%s': base '%s' has %zu parameters, at "
                              "most %d supported",
                              nm, spec->base->name, spec->base->n_param, MAXB);
    lse_heads_config c;
    memset(&c, 0, sizeof c);
    c.n_heads = spec->n_heads;
    c.share = spec->share;
    c.base = spec->base;
    c.base_config = spec->base_config;
    c.beta = spec->beta;
    c.mask = spec->mask;
    c.child_first = spec->child.first;
    c.parent_first = spec->parent.first;
    c.has_context = spec->context.node != NULL;
    lse_view views[V_REST + 1 + MAXB];
    size_t n = 0;
    views[n++] = spec->child;
    views[n++] = spec->parent;
    views[n++] = lse_view_all(spec->w_child);
    views[n++] = lse_view_all(spec->w_parent);
    if (c.has_context)
        views[n++] = spec->context;
    for (size_t i = 0; i < spec->base->n_param; i++) {
        lse_node *p = spec->base_param != NULL ? spec->base_param[i] : NULL;
        if (p == NULL)
            continue;
        c.base_present |= 1u << i;
        views[n++] = lse_view_all(p);
    }
    return lse_graph_add_custom(g, name, lse_custom_heads, &c, views, n, out);
}

/* ------------------------------------------------------------------ */
/* Attention and losses                                                */

/* The values and gradient views of a heads term at the current node
 * values. */
typedef struct heads_term_args {
    size_t n;
    gsl_matrix_view val[V_REST + 1 + MAXB], grd[V_REST + 1 + MAXB];
    const gsl_matrix *v[V_REST + 1 + MAXB];
    gsl_matrix *gr[V_REST + 1 + MAXB];
} heads_term_args;

static lse_status term_args(lse_term *t, const char *fn, heads_term_args *ta)
{
    if (t == NULL)
        return LSE_EFAULT;
    if (!lse_term_is_heads(t))
        return lse_graph_fail(t->graph, LSE_EINVAL, fn,
                              "term '%s' is not a heads term", t->name);
    ta->n = lse_term_n_views(t);
    if (ta->n > V_REST + 1 + MAXB)
        return lse_graph_fail(t->graph, LSE_EINVAL, fn,
                              "term '%s': %zu views", t->name, ta->n);
    for (size_t i = 0; i < ta->n; i++) {
        const lse_view vw = lse_term_view(t, i);
        ta->val[i] = lse_view_value(&vw);
        ta->v[i] = &ta->val[i].matrix;
        ta->gr[i] = NULL;
        if (!lse_node_is_clamped(vw.node)) {
            ta->grd[i] = lse_view_grad(&vw);
            ta->gr[i] = &ta->grd[i].matrix;
        }
    }
    return LSE_OK;
}

static lse_status fail_eval(lse_term *t, lse_status st, const char *fn)
{
    return lse_graph_fail(t->graph, st, fn, "term '%s': heads: %s", t->name,
                          lse_strerror(st));
}

/* Evaluate every head keeping S, A and lse (r->S etc. allocated here). */
static void kept_free(heads_run *r)
{
    for (size_t h = 0; h < r->d.H; h++) {
        if (r->S != NULL && (r->A == NULL || r->S[h] != r->A[h]))
            gsl_matrix_free(r->S[h]);
        if (r->A != NULL)
            gsl_matrix_free(r->A[h]);
        if (r->lse != NULL)
            gsl_vector_free(r->lse[h]);
    }
    free(r->S);
    free(r->A);
    free(r->lse);
    r->S = r->A = NULL;
    r->lse = NULL;
}

/* keep_s 0: the softmax overwrites the scores (S[h] == A[h]). */
static lse_status forward_kept(lse_term *t, heads_term_args *ta, heads_run *r,
                               int keep_s, const char *fn)
{
    memset(r, 0, sizeof *r);
    lse_status st = term_args(t, fn, ta);
    if (st != LSE_OK)
        return st;
    r->cfg = lse_term_config(t);
    char msg[256];
    st = heads_dims_of(ta->v, ta->n, r->cfg, &r->d, msg, sizeof msg);
    if (st != LSE_OK)
        return lse_graph_fail(t->graph, st, fn, "term '%s': %s", t->name, msg);
    const size_t H = r->d.H;
    r->S = calloc(H, sizeof *r->S);
    r->A = calloc(H, sizeof *r->A);
    r->lse = calloc(H, sizeof *r->lse);
    if (r->S == NULL || r->A == NULL || r->lse == NULL) {
        kept_free(r);
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    }
    for (size_t h = 0; h < H; h++) {
        r->A[h] = gsl_matrix_alloc(r->d.nc, r->d.np);
        r->S[h] = keep_s ? gsl_matrix_alloc(r->d.nc, r->d.np) : r->A[h];
        r->lse[h] = gsl_vector_alloc(r->d.nc);
        if (r->S[h] == NULL || r->A[h] == NULL || r->lse[h] == NULL) {
            kept_free(r);
            return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
        }
    }
    r->v = ta->v;
    r->gr = ta->gr;
    r->flags = RUN_KEEP;
    double e;
    st = run_heads(r, &e);
    if (st != LSE_OK) {
        kept_free(r);
        return fail_eval(t, st, fn);
    }
    t->energy = e;
    return LSE_OK;
}

/* Chain G[h] = dL/dS_h into the free nodes' gradients. */
static lse_status backward(lse_term *t, heads_run *r, gsl_matrix **G,
                           const char *fn)
{
    r->G = (const gsl_matrix *const *)G;
    r->flags = RUN_BACK;
    const lse_status st = run_heads(r, NULL);
    return st != LSE_OK ? fail_eval(t, st, fn) : LSE_OK;
}

lse_status lse_heads_attention(lse_term *t, size_t head, gsl_matrix *a)
{
    static const char fn[] = "lse_heads_attention";
    if (t == NULL)
        return LSE_EFAULT;
    if (a == NULL)
        return lse_graph_fail(t->graph, LSE_EFAULT, fn, "NULL output");
    heads_term_args ta;
    heads_run r;
    lse_status st = forward_kept(t, &ta, &r, 0, fn);
    if (st != LSE_OK)
        return st;
    if (head >= r.d.H)
        st = lse_graph_fail(t->graph, LSE_ERANGE, fn,
                            "term '%s': head %zu of %zu", t->name, head,
                            r.d.H);
    else if (a->size1 != r.d.nc || a->size2 != r.d.np)
        st = lse_graph_fail(t->graph, LSE_EDIM, fn,
                            "term '%s': output %zux%zu, expected %zux%zu",
                            t->name, a->size1, a->size2, r.d.nc, r.d.np);
    else
        gsl_matrix_memcpy(a, r.A[head]);
    kept_free(&r);
    return st;
}

static lse_status check_weight(lse_term *t, const gsl_vector *w, size_t nc,
                               const char *fn)
{
    if (w == NULL)
        return LSE_OK;
    if (w->size != nc)
        return lse_graph_fail(t->graph, LSE_EDIM, fn,
                              "term '%s': %zu weights for %zu child rows",
                              t->name, w->size, nc);
    for (size_t c = 0; c < nc; c++) {
        const double x = gsl_vector_get(w, c);
        if (!isfinite(x) || x < 0.0)
            return lse_graph_fail(t->graph, LSE_EDOM, fn,
                                  "term '%s': weight %zu is %g", t->name, c,
                                  x);
    }
    return LSE_OK;
}

/* The checks both losses start with: @p what (labels, target) given, a
 * finite scale, a heads term. */
static lse_status loss_args_ok(lse_term *t, const void *what,
                               const char *what_name, double scale,
                               const char *fn)
{
    if (t == NULL)
        return LSE_EFAULT;
    if (what == NULL)
        return lse_graph_fail(t->graph, LSE_EFAULT, fn, "NULL %s", what_name);
    if (!isfinite(scale))
        return lse_graph_fail(t->graph, LSE_EDOM, fn, "scale = %g", scale);
    if (!lse_term_is_heads(t))
        return lse_graph_fail(t->graph, LSE_EINVAL, fn,
                              "term '%s' is not a heads term", t->name);
    return LSE_OK;
}

lse_status lse_heads_loss_xent(lse_term *t, const size_t *labels,
                               const gsl_vector *weight, double scale,
                               int want_grad, double *loss)
{
    static const char fn[] = "lse_loss_xent";
    if (loss != NULL)
        *loss = NAN;
    lse_status st = loss_args_ok(t, labels, "labels", scale, fn);
    if (st != LSE_OK)
        return st;
    const lse_view cv = lse_term_view(t, V_CHILD), pv = lse_term_view(t, V_PARENT);
    st = check_weight(t, weight, cv.count, fn);
    if (st != LSE_OK)
        return st;
    for (size_t c = 0; c < cv.count; c++)
        if (labels[c] != LSE_LOSS_IGNORE && labels[c] >= pv.count)
            return lse_graph_fail(t->graph, LSE_ERANGE, fn,
                                  "term '%s': label %zu of row %zu, %zu parents",
                                  t->name, labels[c], c, pv.count);
    heads_term_args ta;
    heads_run r;
    st = forward_kept(t, &ta, &r, 1, fn);
    if (st != LSE_OK)
        return st;
    const size_t H = r.d.H, nc = r.d.nc, np = r.d.np;
    const double beta = r.cfg->beta;
    for (size_t h = 0; h < H; h++)
        for (size_t c = 0; c < nc; c++)
            if (labels[c] != LSE_LOSS_IGNORE &&
                gsl_matrix_get(r.S[h], c, labels[c]) == -INFINITY) {
                kept_free(&r);
                return lse_graph_fail(t->graph, LSE_EDOM, fn,
                                      "term '%s': row %zu's label %zu is masked",
                                      t->name, c, labels[c]);
            }
    /* G_h = dL/dS_h overwrites S_h row by row, after its use */
    gsl_matrix **G = r.S;
    double l = 0.0;
    for (size_t h = 0; h < H; h++)
        for (size_t c = 0; c < nc; c++) {
            const size_t y = labels[c];
            const double w = weight != NULL ? gsl_vector_get(weight, c) : 1.0;
            double *gr = gsl_matrix_ptr(G[h], c, 0);
            if (y != LSE_LOSS_IGNORE)
                l += w * beta * (gsl_vector_get(r.lse[h], c) - gr[y]);
            if (y == LSE_LOSS_IGNORE || w == 0.0) {
                for (size_t p = 0; p < np; p++)
                    gr[p] = 0.0;
                continue;
            }
            const double f = scale * w * beta;
            const double *ar = gsl_matrix_const_ptr(r.A[h], c, 0);
            for (size_t p = 0; p < np; p++)
                gr[p] = f * (ar[p] - (p == y ? 1.0 : 0.0));
        }
    if (want_grad)
        st = backward(t, &r, G, fn);
    kept_free(&r);
    if (st == LSE_OK && loss != NULL)
        *loss = scale * l;
    return st;
}

lse_status lse_heads_loss_recon(lse_term *t, lse_view values,
                                const gsl_matrix *target,
                                const gsl_vector *weight, double scale,
                                int want_grad, double *loss)
{
    static const char fn[] = "lse_loss_recon";
    if (loss != NULL)
        *loss = NAN;
    lse_status st = loss_args_ok(t, target, "target", scale, fn);
    if (st != LSE_OK)
        return st;
    const lse_view cv = lse_term_view(t, V_CHILD), pv = lse_term_view(t, V_PARENT);
    if (values.node == NULL)
        values = pv;
    st = lse_check_view(t->graph, &values, "values", fn, t->name);
    if (st != LSE_OK)
        return st;
    const lse_heads_config *cfg = lse_term_config(t);
    const size_t H = cfg->n_heads, nc = cv.count, np = pv.count;
    const size_t dv = lse_node_dim(values.node), dt = target->size2;
    const int shared = dv == dt;
    if (values.count != np || target->size1 != nc ||
        (dv != dt && dv != H * dt))
        return lse_graph_fail(t->graph, LSE_EDIM, fn,
                              "term '%s': values (%zu, %zu) for %zu parents "
                              "and %zu heads, target (%zu, %zu) for %zu "
                              "children (values need dim T or H dim T columns)",
                              t->name, values.count, dv, np, H, target->size1,
                              dt, nc);
    st = check_weight(t, weight, nc, fn);
    if (st != LSE_OK)
        return st;
    heads_term_args ta;
    heads_run r;
    st = forward_kept(t, &ta, &r, 0, fn);
    if (st != LSE_OK)
        return st;
    gsl_matrix_view vv = lse_view_value(&values);
    const gsl_matrix *v = &vv.matrix;
    gsl_matrix *R = gsl_matrix_calloc(nc, dt);
    /* dL/dA_h in one scratch, then dL/dS_h in place of A_h */
    gsl_matrix *da = want_grad ? gsl_matrix_alloc(nc, np) : NULL;
    gsl_matrix **G = r.A;
    if (R == NULL || (want_grad && da == NULL)) {
        gsl_matrix_free(R);
        gsl_matrix_free(da);
        kept_free(&r);
        return lse_graph_fail(t->graph, LSE_ENOMEM, fn, "out of memory");
    }
    const double hs = shared ? 1.0 / (double)H : 1.0;
    for (size_t h = 0; h < H; h++) { /* R = sum_h hs A_h V_h */
        gsl_matrix_const_view vh =
            gsl_matrix_const_submatrix(v, 0, shared ? 0 : h * dt, np, dt);
        gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, hs, r.A[h], &vh.matrix, 1.0,
                       R);
    }
    double l = 0.0; /* R <- D = scale w (R - T), 0 where T is NaN */
    for (size_t c = 0; c < nc; c++) {
        const double w = weight != NULL ? gsl_vector_get(weight, c) : 1.0;
        for (size_t j = 0; j < dt; j++) {
            const double tv = gsl_matrix_get(target, c, j);
            double dd = 0.0;
            if (!isnan(tv)) {
                const double e = gsl_matrix_get(R, c, j) - tv;
                l += 0.5 * w * e * e;
                dd = scale * w * e;
            }
            gsl_matrix_set(R, c, j, dd);
        }
    }
    if (want_grad) {
        const lse_node *vn = values.node;
        gsl_matrix_view gv;
        if (!lse_node_is_clamped(vn))
            gv = lse_view_grad(&values);
        for (size_t h = 0; h < H; h++) {
            gsl_matrix_const_view vh =
                gsl_matrix_const_submatrix(v, 0, shared ? 0 : h * dt, np, dt);
            if (!lse_node_is_clamped(vn)) { /* dL/dV_h += hs A_h' D */
                gsl_matrix_view gh = gsl_matrix_submatrix(
                    &gv.matrix, 0, shared ? 0 : h * dt, np, dt);
                gsl_blas_dgemm(CblasTrans, CblasNoTrans, hs, r.A[h], R, 1.0,
                               &gh.matrix);
            }
            /* dL/dA_h = hs D V_h', then the softmax Jacobian into A_h */
            gsl_blas_dgemm(CblasNoTrans, CblasTrans, hs, R, &vh.matrix, 0.0,
                           da);
            for (size_t c = 0; c < nc; c++) {
                double *ar = gsl_matrix_ptr(G[h], c, 0);
                const double *dr = gsl_matrix_const_ptr(da, c, 0);
                double s = 0.0;
                for (size_t p = 0; p < np; p++)
                    s += ar[p] * dr[p];
                for (size_t p = 0; p < np; p++)
                    ar[p] = ar[p] == 0.0 ? 0.0 : cfg->beta * ar[p] * (dr[p] - s);
            }
        }
        st = backward(t, &r, G, fn);
    }
    gsl_matrix_free(da);
    gsl_matrix_free(R);
    kept_free(&r);
    if (st == LSE_OK && loss != NULL)
        *loss = scale * l;
    return st;
}
