/* The Markov-switching SLDS against statsmodels' MarkovRegression on the
 * bundled GDP and DAX series (reference values: tests/ref/
 * slds_statsmodels.py, stored in tests/ref/slds_statsmodels.txt): at
 * statsmodels' maximum, the exact log-likelihood, the filtered and the
 * smoothed mode probabilities of every step and the standard errors from
 * the numerical Hessian; lsefit's own EM fit reaches the same maximum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lse_check.h"

#define REF_FILE LSE_DATA_DIR "/../tests/ref/slds_statsmodels.txt"
#define MAX_T 4096

typedef struct ref {
    char name[16], file[64], column[64];
    size_t T; /* steps */
    double p0[2], llf;
    char pname[8][32];
    double est[8], se[8];
    double filt[MAX_T][2], smooth[MAX_T][2];
} ref;

static ref R[2];

static void read_ref(void)
{
    FILE *f = fopen(REF_FILE, "r");
    ck_assert_msg(f != NULL, "cannot open %s", REF_FILE);
    char line[512];
    int s = -1;
    size_t np = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#')
            continue;
        if (strncmp(line, "set ", 4) == 0) {
            ck_assert_int_lt(++s, 2);
            np = 0;
            ck_assert_int_eq(sscanf(line, "set %15s %63s %63s %zu", R[s].name,
                                    R[s].file, R[s].column, &R[s].T),
                             4);
            ck_assert_uint_le(R[s].T, MAX_T);
        } else if (strncmp(line, "p0 ", 3) == 0) {
            ck_assert_int_eq(sscanf(line, "p0 %lf %lf", &R[s].p0[0],
                                    &R[s].p0[1]),
                             2);
        } else if (strncmp(line, "llf ", 4) == 0) {
            ck_assert_int_eq(sscanf(line, "llf %lf", &R[s].llf), 1);
        } else if (strncmp(line, "param ", 6) == 0) {
            ck_assert_uint_lt(np, 8);
            ck_assert_int_eq(sscanf(line, "param %31s %lf %lf", R[s].pname[np],
                                    &R[s].est[np], &R[s].se[np]),
                             3);
            np++;
        } else if (strncmp(line, "prob ", 5) == 0) {
            size_t t;
            double a, b, c, d;
            ck_assert_int_eq(sscanf(line, "prob %zu %lf %lf %lf %lf", &t, &a,
                                    &b, &c, &d),
                             5);
            ck_assert_uint_lt(t, R[s].T);
            R[s].filt[t][0] = a;
            R[s].filt[t][1] = b;
            R[s].smooth[t][0] = c;
            R[s].smooth[t][1] = d;
        }
    }
    fclose(f);
    ck_assert_int_eq(s, 1);
}

/* The named column of a bundled CSV (header row, comma separated). */
static gsl_matrix *read_series(const char *file, const char *column)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", LSE_DATA_DIR, file);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[1024];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    int col = -1, c = 0;
    for (char *tok = strtok(line, ",\r\n"); tok != NULL;
         tok = strtok(NULL, ",\r\n"), c++)
        if (strcmp(tok, column) == 0)
            col = c;
    ck_assert_int_ge(col, 0);
    gsl_matrix *x = gsl_matrix_alloc(MAX_T, 1);
    size_t T = 0;
    while (fgets(line, sizeof line, f) != NULL && T < MAX_T) {
        char *p = line;
        for (int k = 0; k < col; k++)
            p = strchr(p, ',') + 1;
        gsl_matrix_set(x, T++, 0, strtod(p, NULL));
    }
    fclose(f);
    gsl_matrix *y = gsl_matrix_alloc(T, 1);
    gsl_matrix_const_view v = gsl_matrix_const_submatrix(x, 0, 0, T, 1);
    gsl_matrix_memcpy(y, &v.matrix);
    gsl_matrix_free(x);
    return y;
}

/* The model at statsmodels' maximum. statsmodels 0.13's filter moves its
 * initial probabilities p0 by the transition matrix twice before the
 * first step (its predicted probabilities of step 0 are (P^T)^2 p0), so
 * lsefit's p0, the probabilities of the first step, is (P^T)^2 p0. */
static lse_slds *at_reference(const ref *r)
{
    lse_slds_config cfg = lse_slds_config_default();
    cfg.markov = 1;
    lse_slds *m = NULL;
    lse_error err;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    gsl_matrix *P = gsl_matrix_alloc(2, 2), *A = gsl_matrix_alloc(1, 1),
               *C = gsl_matrix_alloc(1, 1);
    gsl_vector *b = gsl_vector_alloc(1), *p0 = gsl_vector_alloc(2);
    for (size_t i = 0; i < 2; i++) { /* est: p[0->0], p[1->0] */
        gsl_matrix_set(P, i, 0, r->est[i]);
        gsl_matrix_set(P, i, 1, 1 - r->est[i]);
    }
    lse_assert_ok(lse_slds_set_transition(m, P, &err));
    double q[2] = {0, 0}; /* P^T p0 */
    for (size_t k = 0; k < 2; k++)
        q[k] = r->p0[0] * gsl_matrix_get(P, 0, k) +
               r->p0[1] * gsl_matrix_get(P, 1, k);
    for (size_t k = 0; k < 2; k++) {
        gsl_vector_set(b, 0, r->est[2 + k]);
        lse_assert_ok(lse_slds_set_b(m, k, b, &err));
        gsl_matrix_set(A, 0, 0, r->est[4 + k]);
        lse_assert_ok(lse_slds_set_a(m, k, A, &err));
        gsl_matrix_set(C, 0, 0, r->est[6 + k]);
        lse_assert_ok(lse_slds_set_cov(m, k, C, &err));
        gsl_vector_set(p0, k,
                       q[0] * gsl_matrix_get(P, 0, k) +
                           q[1] * gsl_matrix_get(P, 1, k));
    }
    lse_assert_ok(lse_slds_set_initial(m, p0, &err));
    gsl_matrix_free(P);
    gsl_matrix_free(A);
    gsl_matrix_free(C);
    gsl_vector_free(b);
    gsl_vector_free(p0);
    return m;
}

/* Log-likelihood, filtered and smoothed probabilities equal statsmodels'
 * at its maximum; the filtered probability of a sequence's last step is
 * its smoothed one. */
START_TEST(test_probabilities)
{
    read_ref();
    const ref *r = &R[_i];
    gsl_matrix *x = read_series(r->file, r->column);
    ck_assert_uint_eq(x->size1, r->T + 1);
    lse_slds *m = at_reference(r);
    lse_error err;
    double ll;
    lse_assert_ok(lse_slds_score(m, x, NULL, &ll, &err));
    ck_assert_msg(fabs(ll - r->llf) <= 1e-9 * fabs(r->llf),
                  "%s: loglik %.12g, statsmodels %.12g", r->name, ll, r->llf);
    gsl_matrix *f = gsl_matrix_alloc(r->T, 2), *s = gsl_matrix_alloc(r->T, 2);
    lse_assert_ok(lse_slds_filtered(m, x, NULL, f, &err));
    lse_assert_ok(lse_slds_posteriors(m, x, NULL, s, &err));
    double df = 0, ds = 0;
    for (size_t t = 0; t < r->T; t++)
        for (size_t k = 0; k < 2; k++) {
            df = fmax(df, fabs(gsl_matrix_get(f, t, k) - r->filt[t][k]));
            ds = fmax(ds, fabs(gsl_matrix_get(s, t, k) - r->smooth[t][k]));
        }
    ck_assert_msg(df < 1e-9 && ds < 1e-9,
                  "%s: filtered off by %g, smoothed by %g", r->name, df, ds);
    /* filtering is not smoothing, except at the last step */
    double gap = 0;
    for (size_t t = 0; t < r->T; t++)
        gap = fmax(gap, fabs(gsl_matrix_get(f, t, 0) - gsl_matrix_get(s, t, 0)));
    ck_assert_double_gt(gap, 0.1);
    ck_assert_double_eq_tol(gsl_matrix_get(f, r->T - 1, 0),
                            gsl_matrix_get(s, r->T - 1, 0), 1e-12);
    /* wrong shape */
    gsl_matrix *bad = gsl_matrix_alloc(r->T - 1, 2);
    lse_assert_status(lse_slds_filtered(m, x, NULL, bad, &err), LSE_EDIM);
    gsl_matrix_free(bad);
    gsl_matrix_free(f);
    gsl_matrix_free(s);
    gsl_matrix_free(x);
    lse_slds_free(m);
}
END_TEST

/* Standard errors from the numerical Hessian equal statsmodels' (its
 * complex-step Hessian, ours central differences; p0 held fixed, while
 * statsmodels moves the first step's P^T p0 with P: 2 % apart at most). */
START_TEST(test_stderr)
{
    read_ref();
    const ref *r = &R[_i];
    gsl_matrix *x = read_series(r->file, r->column);
    lse_slds *m = at_reference(r);
    lse_error err;
    ck_assert_uint_eq(lse_slds_n_stderr(m), 8);
    gsl_vector *est = gsl_vector_alloc(8), *se = gsl_vector_alloc(8);
    char names[8][32];
    lse_assert_ok(lse_slds_stderr(m, x, NULL, est, se, names, &err));
    for (size_t i = 0; i < 8; i++) {
        ck_assert_double_eq_tol(gsl_vector_get(est, i), r->est[i],
                                1e-12 * fmax(1, fabs(r->est[i])));
        const double rel = fabs(gsl_vector_get(se, i) - r->se[i]) / r->se[i];
        ck_assert_msg(rel < 0.02, "%s %s: se %.6g, statsmodels %.6g (%.2g)",
                      r->name, names[i], gsl_vector_get(se, i), r->se[i],
                      rel);
        /* the names are statsmodels' but for the lag: x1 = ar.L1 */
        if (strncmp(r->pname[i], "x1", 2) == 0)
            ck_assert_msg(strncmp(names[i], "ar.L1", 5) == 0 &&
                              strcmp(names[i] + 5, r->pname[i] + 2) == 0,
                          "%s vs %s", names[i], r->pname[i]);
        else
            ck_assert_str_eq(names[i], r->pname[i]);
    }
    /* at a point that is no maximum the Hessian says so: a slope far off */
    gsl_matrix *A = gsl_matrix_alloc(1, 1);
    gsl_matrix_set(A, 0, 0, 3.0);
    lse_assert_ok(lse_slds_set_a(m, 0, A, &err));
    const lse_status st = lse_slds_stderr(m, x, NULL, est, se, NULL, &err);
    ck_assert_msg(st == LSE_ENUMERIC || st == LSE_EDOM, "%s", err.message);
    /* sizes and dimensions */
    gsl_vector *short_v = gsl_vector_alloc(7);
    lse_assert_status(lse_slds_stderr(m, x, NULL, short_v, se, NULL, &err),
                      LSE_EDIM);
    gsl_vector_free(short_v);
    lse_slds_config cfg = lse_slds_config_default();
    cfg.dim = 2;
    lse_slds *m2 = NULL;
    lse_assert_ok(lse_slds_new(&cfg, &m2, &err));
    ck_assert_uint_eq(lse_slds_n_stderr(m2), 0);
    lse_assert_status(lse_slds_stderr(m2, x, NULL, est, se, NULL, &err),
                      LSE_ENOTSUP);
    lse_slds_free(m2);
    gsl_matrix_free(A);
    gsl_vector_free(est);
    gsl_vector_free(se);
    gsl_matrix_free(x);
    lse_slds_free(m);
}
END_TEST

/* lsefit's EM reaches statsmodels' maximum: its model family holds
 * statsmodels' (any p0 rather than P^T p0), so its log-likelihood is at
 * least statsmodels', and the parameters agree to 0.01. */
START_TEST(test_fit_reaches_maximum)
{
    read_ref();
    const ref *r = &R[_i];
    gsl_matrix *x = read_series(r->file, r->column);
    lse_slds_config cfg = lse_slds_config_default();
    cfg.markov = 1;
    lse_slds *m = NULL;
    lse_error err;
    lse_assert_ok(lse_slds_new(&cfg, &m, &err));
    lse_slds_opts o = lse_slds_opts_default();
    o.seed = 1;
    o.n_init = 3;
    lse_assert_ok(lse_slds_fit(m, x, NULL, &o, &err));
    const double ll = lse_slds_loglik(m);
    ck_assert_msg(ll >= r->llf - 1e-6 && ll <= r->llf + 0.2,
                  "%s: loglik %.10g, statsmodels %.10g", r->name, ll, r->llf);
    gsl_vector *est = gsl_vector_alloc(8), *se = gsl_vector_alloc(8);
    lse_assert_ok(lse_slds_stderr(m, x, NULL, est, se, NULL, &err));
    /* modes numbered alike: statsmodels' mode 0 has the larger variance */
    const int swap = gsl_vector_get(est, 6) < gsl_vector_get(est, 7);
    for (size_t i = 0; i < 8; i++) {
        double e = gsl_vector_get(est, i);
        if (swap) {
            if (i < 2) /* p[i->0] of swapped modes: 1 - p[(1-i)->0] */
                e = 1 - gsl_vector_get(est, 1 - i);
            else
                e = gsl_vector_get(est, i ^ 1);
        }
        ck_assert_msg(fabs(e - r->est[i]) < 0.01, "%s %s: %.6g vs %.6g",
                      r->name, r->pname[i], e, r->est[i]);
    }
    gsl_vector_free(est);
    gsl_vector_free(se);
    gsl_matrix_free(x);
    lse_slds_free(m);
}
END_TEST

Suite *lse_test_suite(void);
Suite *lse_test_suite(void)
{
    Suite *s = suite_create("statsmodels");
    TCase *tc = tcase_create("statsmodels");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_probabilities, 0, 2);
    tcase_add_loop_test(tc, test_stderr, 0, 2);
    tcase_add_loop_test(tc, test_fit_reaches_maximum, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
