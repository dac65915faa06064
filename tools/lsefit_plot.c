/* lsefit gmm plot / lsefit slds plot: fit plots through PLplot
 * (tools/plot.h), the ones mclust users know (docs/lsefit.md, "Plots").
 *
 *   lsefit gmm plot MODEL.json DATA.csv -o FIG.svg|png|pdf
 *       --what classification (default) | uncertainty | density | bic
 *   lsefit slds plot MODEL.json SERIES.csv -o FIG.svg|png|pdf
 *
 * The model files are read here with the public API (lse_json, lse_gmm,
 * lse_slds), so the fitting commands' files stay as they are. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include <lsegraph/lsegraph.h>

#include "lsefit_data.h"
#include "lsefit_plot.h"

#define LSEPLOT_PI 3.14159265358979323846

#ifdef LSE_HAVE_PLOTS
#include <plplot.h>

#include "plot.h"

enum {
    OPT_WHAT = 3000,
    OPT_DIMS,
    OPT_DPI,
    OPT_KMAX,
    OPT_COLUMNS2,
    OPT_IGNORE2,
    OPT_THEME
};

static const struct option plot_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"what", required_argument, NULL, OPT_WHAT},
    {"dims", required_argument, NULL, OPT_DIMS},
    {"dpi", required_argument, NULL, OPT_DPI},
    {"theme", required_argument, NULL, OPT_THEME},
    {"k-max", required_argument, NULL, OPT_KMAX},
    {"columns", required_argument, NULL, OPT_COLUMNS2},
    {"ignore", required_argument, NULL, OPT_IGNORE2},
    LSEFIT_DATA_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct plot_args {
    lsefit_data_opts dopt;
    const char *output, *what, *model;
    size_t dim[2], kmax;
    double dpi;
    int print; /* --theme print */
    int dims_given;
} plot_args;

static const char *format_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot == NULL)
        return NULL;
    static const char *const ok[] = {"svg", "png", "pdf"};
    for (size_t i = 0; i < 3; i++)
        if (strcasecmp(dot + 1, ok[i]) == 0)
            return ok[i];
    return NULL;
}

static void help_plot(FILE *f, int slds)
{
    if (slds)
        fputs("Usage: lsefit slds plot MODEL.json SERIES.csv -o FIG.svg|png|pdf "
              "[options]\n\n"
              "The series (first feature) over time with the most likely mode\n"
              "path (Viterbi for --markov models, per-step argmax otherwise) as\n"
              "coloured bands, and the mode probabilities (smoothed marginals or\n"
              "responsibilities) below.\n\n",
              f);
    else
        fputs("Usage: lsefit gmm plot MODEL.json DATA.csv -o FIG.svg|png|pdf "
              "[options]\n\n"
              "Plots of a fitted mixture over two features of the data:\n"
              "  --what classification  points coloured by component, means and\n"
              "                         95% covariance ellipses (default); with\n"
              "                         more than 2 features and no --dims, a\n"
              "                         pairs plot of the first 6\n"
              "  --what uncertainty     points sized by 1 - max responsibility\n"
              "  --what density         contours of the mixture density\n"
              "  --what bic             BIC against K for each covariance model,\n"
              "                         refitted on DATA with the model's seed\n"
              "  --dims I,J             the two features (1-based; default 1,2)\n"
              "  --k-max K              largest K of --what bic (default 9)\n\n",
              f);
    fputs("Options:\n"
          "  -o, --output FIG       the figure; the extension gives the format\n"
          "  --dpi N                PNG resolution (default 96; 300 for print)\n"
          "  --theme screen|print   print: serif fonts and 300 dpi\n"
          "  --columns, --ignore    the model's columns (as lsefit gmm score)\n",
          f);
    fputs(LSEFIT_DATA_HELP, f);
    fputs("  -q, --quiet            no notes\n"
          "  -h, --help             this text\n"
          "Exit status: 0 ok, 1 bad input, 2 usage error.\n",
          f);
}

static int parse_plot(int argc, char **argv, const char *cmd, int slds,
                      plot_args *a, int *done)
{
    memset(a, 0, sizeof *a);
    a->what = "classification";
    a->dim[0] = 0;
    a->dim[1] = 1;
    a->kmax = 9;
    *done = 0;
    int c, rc = LSEFIT_OK;
    opterr = 0;
    optind = 1;
    while (rc == LSEFIT_OK &&
           (c = getopt_long(argc, argv, ":o:qh", plot_options, NULL)) != -1) {
        if (lsefit_data_option(cmd, c, optarg, &a->dopt, &rc))
            continue;
        switch (c) {
        case 'o':
            a->output = optarg;
            break;
        case OPT_WHAT:
            if (slds)
                return lsefit_usage(cmd, "unknown option '--what'");
            a->what = optarg;
            if (strcmp(optarg, "classification") != 0 &&
                strcmp(optarg, "uncertainty") != 0 &&
                strcmp(optarg, "density") != 0 && strcmp(optarg, "bic") != 0)
                return lsefit_usage(cmd,
                                    "--what '%s': expected classification, "
                                    "uncertainty, density or bic",
                                    optarg);
            break;
        case OPT_DIMS: {
            unsigned long i = 0, j = 0;
            char tail = 0;
            if (sscanf(optarg, "%lu,%lu%c", &i, &j, &tail) != 2 || i == 0 ||
                j == 0 || i == j)
                return lsefit_usage(cmd,
                                    "--dims '%s': expected two different "
                                    "1-based feature numbers, e.g. 1,2",
                                    optarg);
            a->dims_given = 1;
            a->dim[0] = i - 1;
            a->dim[1] = j - 1;
            break;
        }
        case OPT_DPI:
            rc = lsefit_opt_double(cmd, "--dpi", optarg, 0, 0, &a->dpi);
            if (rc == LSEFIT_OK && !(a->dpi >= 36 && a->dpi <= 1200))
                return lsefit_usage(cmd, "--dpi '%s': expected 36 to 1200",
                                    optarg);
            break;
        case OPT_THEME:
            if (strcmp(optarg, "screen") != 0 && strcmp(optarg, "print") != 0)
                return lsefit_usage(cmd, "--theme '%s': expected screen or print",
                                    optarg);
            a->print = strcmp(optarg, "print") == 0;
            break;
        case OPT_KMAX:
            rc = lsefit_opt_size(cmd, "--k-max", optarg, 1, &a->kmax);
            break;
        case OPT_COLUMNS2:
            a->dopt.columns = optarg;
            break;
        case OPT_IGNORE2:
            a->dopt.ignore = optarg;
            break;
        case 'q':
            lsefit_quiet = 1;
            break;
        case 'h':
            help_plot(stdout, slds);
            *done = 1;
            return LSEFIT_OK;
        default:
            rc = lsefit_opt_bad(cmd, c, argv, plot_options);
            break;
        }
    }
    if (rc != LSEFIT_OK)
        return rc;
    if (argc - optind != 2)
        return lsefit_usage(cmd, slds ? "expected MODEL.json and SERIES.csv"
                                      : "expected MODEL.json and DATA.csv");
    if (a->output == NULL)
        return lsefit_usage(cmd, "no figure file (-o FIG.svg, .png or .pdf)");
    if (format_of(a->output) == NULL)
        return lsefit_usage(cmd,
                            "cannot tell the format of '%s' (use .svg, .png "
                            "or .pdf)",
                            a->output);
    a->model = argv[optind];
    a->dopt.path = argv[optind + 1];
    return LSEFIT_OK;
}

static plot_page page_of(const plot_args *a, double w, double h)
{
    plot_page p = {.format = format_of(a->output),
                   .path = a->output,
                   .width_in = w,
                   .height_in = h,
                   .dpi = a->dpi > 0 ? a->dpi : (a->print ? 300 : 96),
                   .serif = a->print};
    return p;
}

static int plot_failed(const char *msg) { return lsefit_fail("%s", msg); }

/* ------------------------------------------------------------------ */
/* GMM                                                                  */

typedef struct gmm_model {
    lse_gmm *m;
    char **names;
    gsl_vector *mean, *scale;
    unsigned long seed;
} gmm_model;

static void gmm_model_free(gmm_model *g)
{
    lse_gmm_free(g->m);
    free(g->names);
    gsl_vector_free(g->mean);
    gsl_vector_free(g->scale);
}

static int gmm_load(const char *path, gmm_model *g)
{
    memset(g, 0, sizeof *g);
    lse_error err;
    lse_json *doc = NULL, *opt = NULL;
    if (lse_json_load(path, &doc, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    /* the library reads the model; lsefit's own keys come after */
    int rc = LSEFIT_OK;
    if (lse_gmm_from_json(doc, path, &g->m, &g->names, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_get_standardize(doc, path, lse_gmm_dim(g->m),
                                         &g->mean, &g->scale);
    if (rc == LSEFIT_OK && lse_json_has(doc, "options") &&
        lse_json_get_object(doc, "options", &opt, NULL) == LSE_OK &&
        lse_json_has(opt, "seed")) {
        double s = 0;
        if (lse_json_get_number(opt, "seed", &s, NULL) == LSE_OK && s >= 0)
            g->seed = (unsigned long)s;
    }
    lse_json_free(opt);
    lse_json_free(doc);
    if (rc != LSEFIT_OK)
        gmm_model_free(g);
    return rc;
}

/* The 2 x 2 covariance of component k over the plotted features. */
static int sub_cov(const lse_gmm *m, size_t k, const size_t dim[2], double c[4])
{
    const size_t d = lse_gmm_dim(m);
    gsl_matrix *S = gsl_matrix_alloc(d, d);
    if (S == NULL)
        return -1;
    const lse_status st = lse_gmm_get_covariance(m, k, S);
    if (st == LSE_OK) {
        c[0] = gsl_matrix_get(S, dim[0], dim[0]);
        c[1] = gsl_matrix_get(S, dim[0], dim[1]);
        c[2] = gsl_matrix_get(S, dim[1], dim[0]);
        c[3] = gsl_matrix_get(S, dim[1], dim[1]);
    }
    gsl_matrix_free(S);
    return st == LSE_OK ? 0 : -1;
}

/* The 95 % ellipse of N(mu, C) in two dimensions (chi-square 2 dof). */
static void ellipse(double mx, double my, const double c[4])
{
    const double r = sqrt(5.991464547107979);
    /* C = L L^T (Cholesky), points mu + r L (cos t, sin t) */
    const double l11 = sqrt(fmax(c[0], 0)), l21 = l11 > 0 ? c[2] / l11 : 0;
    const double l22 = sqrt(fmax(c[3] - l21 * l21, 0));
    PLFLT x[101], y[101];
    for (int i = 0; i <= 100; i++) {
        const double t = 2 * LSEPLOT_PI * i / 100.0;
        x[i] = mx + r * l11 * cos(t);
        y[i] = my + r * (l21 * cos(t) + l22 * sin(t));
    }
    plline(101, x, y);
}

/* Axis ranges of the data in the plotted features, 5 % padding. */
static void ranges(const gsl_matrix *x, const size_t dim[2], double r[4])
{
    r[0] = r[2] = INFINITY;
    r[1] = r[3] = -INFINITY;
    for (size_t i = 0; i < x->size1; i++) {
        const double a = gsl_matrix_get(x, i, dim[0]);
        const double b = gsl_matrix_get(x, i, dim[1]);
        if (isfinite(a)) {
            r[0] = fmin(r[0], a);
            r[1] = fmax(r[1], a);
        }
        if (isfinite(b)) {
            r[2] = fmin(r[2], b);
            r[3] = fmax(r[3], b);
        }
    }
    for (int k = 0; k < 4; k += 2) {
        if (!(r[k + 1] > r[k])) {
            r[k] -= 1;
            r[k + 1] += 1;
        }
        const double pad = 0.05 * (r[k + 1] - r[k]);
        r[k] -= pad;
        r[k + 1] += pad;
    }
}

static void class_legend(size_t K, const char *extra)
{
    PLINT opt[10], tcol[10], lcol[10], lsty[10], mcol[10], nsym[10];
    PLFLT lw[10], msc[10];
    const char *text[10], *sym[10];
    char names[10][32];
    const size_t n = K < 9 ? K : 9;
    for (size_t k = 0; k < n; k++) {
        snprintf(names[k], sizeof names[k], "component %zu", k + 1);
        opt[k] = PL_LEGEND_SYMBOL;
        tcol[k] = 1;
        mcol[k] = (PLINT)(8 + k % 8);
        msc[k] = 1.2;
        nsym[k] = 1;
        sym[k] = "\u25cf";
        text[k] = names[k];
        lcol[k] = 1;
        lsty[k] = 1;
        lw[k] = 1;
    }
    size_t m = n;
    if (extra != NULL) {
        opt[m] = PL_LEGEND_LINE;
        tcol[m] = 1;
        lcol[m] = 3;
        lsty[m] = 1;
        lw[m] = 1;
        mcol[m] = 1;
        msc[m] = 1;
        nsym[m] = 0;
        sym[m] = "";
        text[m] = extra;
        m++;
    }
    PLFLT lwid, lhei;
    plschr(0, 0.8);
    pllegend(&lwid, &lhei, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_RIGHT | PL_POSITION_TOP | PL_POSITION_INSIDE, 0.02,
             0.02, 0.08, 0, 1, 1, 0, 0, (PLINT)m, opt, 1.0, 1.0, 1.8, 1.0, tcol,
             text, NULL, NULL, NULL, NULL, lcol, lsty, lw, mcol, msc, nsym,
             sym);
    plschr(0, 1.0);
}

/* The one-panel frame of the two plotted dimensions over the ranges r
 * (xmin, xmax, ymin, ymax), and their axis labels into xl, yl (200 each). */
static void frame_2d(const plot_args *a, const gmm_model *g, const double r[4],
                     char *xl, char *yl)
{
    pladv(0);
    plvpor(0.11, 0.95, 0.16, 0.9);
    plwind(r[0], r[1], r[2], r[3]);
    plcol0(1);
    plbox("bcnst", 0, 0, "bcnstv", 0, 0);
    const char *unit = g->mean != NULL ? " (standardized)" : "";
    snprintf(xl, 200, "%s%s", g->names[a->dim[0]], unit);
    snprintf(yl, 200, "%s%s", g->names[a->dim[1]], unit);
}

static int gmm_scatter(const plot_args *a, const gmm_model *g,
                       const lsefit_data *data, int uncertainty)
{
    const lse_gmm *m = g->m;
    const size_t n = data->x->size1, K = lse_gmm_k(m);
    gsl_matrix *resp = gsl_matrix_alloc(n, K);
    if (resp == NULL)
        return lsefit_fail("out of memory");
    lse_error err;
    if (lse_gmm_posterior(m, data->x, LSE_GMM_MISSING_MARGINALIZE, resp, NULL,
                          &err) != LSE_OK) {
        gsl_matrix_free(resp);
        return lsefit_fail_lib(&err, NULL);
    }
    double r[4];
    ranges(data->x, a->dim, r);
    char emsg[300];
    plot_page page = page_of(a, 7, 5.5);
    if (plot_begin(&page, emsg, sizeof emsg) != 0) {
        gsl_matrix_free(resp);
        return plot_failed(emsg);
    }
    char xl[200], yl[200], title[300];
    frame_2d(a, g, r, xl, yl);
    snprintf(title, sizeof title, "%s: K = %zu, %s covariance, N = %zu",
             uncertainty ? "Classification uncertainty" : "Classification",
             K, lse_gmm_cov_name(lse_gmm_cov_type(m)), n);
    pllab(xl, yl, title);
    double umax = 0;
    for (size_t i = 0; i < n; i++) {
        gsl_vector_const_view row = gsl_matrix_const_row(resp, i);
        umax = fmax(umax, 1 - gsl_vector_max(&row.vector));
    }
    for (size_t i = 0; i < n; i++) {
        gsl_vector_const_view row = gsl_matrix_const_row(resp, i);
        const size_t k = gsl_vector_max_index(&row.vector);
        const double u = 1 - gsl_vector_get(&row.vector, k);
        PLFLT px = gsl_matrix_get(data->x, i, a->dim[0]);
        PLFLT py = gsl_matrix_get(data->x, i, a->dim[1]);
        if (!isfinite(px) || !isfinite(py))
            continue;
        plcol0((PLINT)(8 + k % 8));
        /* mclust: the more uncertain, the larger the point */
        /* plstring draws the symbol as text: its size is plschr's */
        plschr(0, uncertainty ? 0.25 + 1.75 * (umax > 0 ? u / umax : 0) : 0.7);
        plstring(1, &px, &py, "\u25cf");
    }
    plschr(0, 1.0);
    const gsl_matrix *mu = lse_gmm_means(m);
    for (size_t k = 0; k < K; k++) {
        double c[4];
        if (sub_cov(m, k, a->dim, c) != 0)
            continue;
        const double mx = gsl_matrix_get(mu, k, a->dim[0]);
        const double my = gsl_matrix_get(mu, k, a->dim[1]);
        plcol0(1);
        plwidth(1.5);
        ellipse(mx, my, c);
        PLFLT px = mx, py = my;
        plschr(0, 1.6);
        plstring(1, &px, &py, "+"); /* a cross at the mean */
        plschr(0, 1.0);
        plwidth(1.0);
    }
    if (uncertainty) {
        char note[120];
        snprintf(note, sizeof note,
                 "point size: uncertainty 1 - max p(k|x), largest %.2f", umax);
        plschr(0, 0.8);
        plmtex("b", 5.2, 0.0, 0.0, note);
        plschr(0, 1.0);
    }
    class_legend(K, "95% ellipse, + mean");
    gsl_matrix_free(resp);
    return plot_end(1, emsg, sizeof emsg) == 0 ? LSEFIT_OK : plot_failed(emsg);
}

/* Mixture density of the two plotted features (their marginal), on a grid,
 * drawn as contours with the points in grey. */
/* The pairs plot of a mixture over d > 2 features (at most 6): every pair
 * of features in its panel, points coloured by component with the 95 %
 * ellipses; the feature names on the diagonal. */
static int gmm_pairs(const plot_args *a, const gmm_model *g,
                     const lsefit_data *data)
{
    const lse_gmm *m = g->m;
    const size_t n = data->x->size1, K = lse_gmm_k(m);
    const size_t d = data->d < 6 ? data->d : 6;
    size_t *label = malloc(n * sizeof *label);
    gsl_matrix *resp = gsl_matrix_alloc(n, K);
    lse_error err;
    int rc = LSEFIT_OK;
    if (label == NULL || resp == NULL)
        rc = lsefit_fail("out of memory");
    else if (lse_gmm_posterior(m, data->x, LSE_GMM_MISSING_MARGINALIZE, resp,
                               NULL, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    for (size_t i = 0; rc == LSEFIT_OK && i < n; i++) {
        gsl_vector_const_view row = gsl_matrix_const_row(resp, i);
        label[i] = gsl_vector_max_index(&row.vector);
    }
    gsl_matrix_free(resp);
    char emsg[300];
    plot_page page = page_of(a, 8, 8);
    if (rc == LSEFIT_OK && plot_begin(&page, emsg, sizeof emsg) != 0)
        rc = plot_failed(emsg);
    if (rc != LSEFIT_OK) {
        free(label);
        return rc;
    }
    pladv(0);
    const gsl_matrix *mu = lse_gmm_means(m);
    const double cell = 0.86 / (double)d;
    for (size_t r = 0; r < d; r++)
        for (size_t c = 0; c < d; c++) {
            /* panel (r, c): feature c across, feature r up */
            const double x0 = 0.08 + cell * (double)c;
            const double y1 = 0.92 - cell * (double)r;
            plvpor(x0 + 0.005, x0 + cell - 0.005, y1 - cell + 0.005, y1 - 0.005);
            const size_t dim[2] = {c, r};
            double rg[4];
            ranges(data->x, dim, rg);
            plwind(rg[0], rg[1], rg[2], rg[3]);
            plcol0(1);
            plschr(0, 0.55);
            plbox(r == d - 1 ? "bcnst" : "bcst", 0, 0,
                  c == 0 ? "bcnstv" : "bcst", 0, 0);
            if (r == c) {
                plschr(0, 0.9);
                plptex(0.5 * (rg[0] + rg[1]), 0.5 * (rg[2] + rg[3]), 1, 0, 0.5,
                       g->names[r]);
                continue;
            }
            plschr(0, 0.45);
            for (size_t i = 0; i < n; i++) {
                PLFLT px = gsl_matrix_get(data->x, i, c);
                PLFLT py = gsl_matrix_get(data->x, i, r);
                if (!isfinite(px) || !isfinite(py))
                    continue;
                plcol0((PLINT)(8 + label[i] % 8));
                plstring(1, &px, &py, "\u25cf");
            }
            plcol0(1);
            for (size_t k = 0; k < K; k++) {
                double cv[4];
                if (sub_cov(m, k, dim, cv) == 0)
                    ellipse(gsl_matrix_get(mu, k, c), gsl_matrix_get(mu, k, r),
                            cv);
            }
        }
    plvpor(0.08, 0.94, 0.06, 0.92);
    plwind(0, 1, 0, 1);
    plcol0(1);
    plschr(0, 0.9);
    char title[300];
    snprintf(title, sizeof title,
             "Classification: K = %zu, %s covariance, N = %zu%s", K,
             lse_gmm_cov_name(lse_gmm_cov_type(m)), n,
             data->d > 6 ? " (first 6 features)" : "");
    plmtex("t", 1.2, 0.5, 0.5, title);
    /* the components' colours, in a line below */
    for (size_t k = 0; k < K && k < 8; k++) {
        char t[32];
        snprintf(t, sizeof t, "\u25cf component %zu", k + 1);
        plcol0((PLINT)(8 + k));
        plschr(0, 0.8);
        plmtex("b", 2.8, 0.02 + 0.24 * (double)k, 0.0, t);
    }
    plcol0(1);
    free(label);
    return plot_end(1, emsg, sizeof emsg) == 0 ? LSEFIT_OK : plot_failed(emsg);
}

static int gmm_density(const plot_args *a, const gmm_model *g,
                       const lsefit_data *data)
{
    const lse_gmm *m = g->m;
    const size_t K = lse_gmm_k(m), G = 120;
    double r[4];
    ranges(data->x, a->dim, r);
    PLFLT **z = NULL;
    plAlloc2dGrid(&z, (PLINT)G, (PLINT)G);
    double (*cinv)[5] = malloc(K * sizeof *cinv);
    if (z == NULL || cinv == NULL) {
        free(cinv);
        if (z != NULL)
            plFree2dGrid(z, (PLINT)G, (PLINT)G);
        return lsefit_fail("out of memory");
    }
    const gsl_matrix *mu = lse_gmm_means(m);
    const gsl_vector *w = lse_gmm_weights(m);
    for (size_t k = 0; k < K; k++) {
        double c[4] = {1, 0, 0, 1};
        sub_cov(m, k, a->dim, c);
        const double det = c[0] * c[3] - c[1] * c[2];
        cinv[k][0] = c[3] / det;
        cinv[k][1] = -c[1] / det;
        cinv[k][2] = c[0] / det;
        cinv[k][3] = det;
    }
    double zmax = 0;
    for (size_t i = 0; i < G; i++)
        for (size_t j = 0; j < G; j++) {
            const double x = r[0] + (r[1] - r[0]) * (double)i / (double)(G - 1);
            const double y = r[2] + (r[3] - r[2]) * (double)j / (double)(G - 1);
            double p = 0;
            for (size_t k = 0; k < K; k++) {
                const double dx = x - gsl_matrix_get(mu, k, a->dim[0]);
                const double dy = y - gsl_matrix_get(mu, k, a->dim[1]);
                const double q = dx * dx * cinv[k][0] +
                                 2 * dx * dy * cinv[k][1] +
                                 dy * dy * cinv[k][2];
                p += gsl_vector_get(w, k) * exp(-0.5 * q) /
                     (2 * LSEPLOT_PI * sqrt(cinv[k][3]));
            }
            z[i][j] = p;
            zmax = fmax(zmax, p);
        }
    char emsg[300];
    plot_page page = page_of(a, 7, 5.5);
    if (plot_begin(&page, emsg, sizeof emsg) != 0) {
        plFree2dGrid(z, (PLINT)G, (PLINT)G);
        free(cinv);
        return plot_failed(emsg);
    }
    char xl[200], yl[200], title[300];
    frame_2d(a, g, r, xl, yl);
    snprintf(title, sizeof title, "Mixture density: K = %zu, %s covariance", K,
             lse_gmm_cov_name(lse_gmm_cov_type(m)));
    pllab(xl, yl, title);
    plcol0(2);
    plschr(0, 0.5);
    for (size_t i = 0; i < data->x->size1; i++) {
        PLFLT px = gsl_matrix_get(data->x, i, a->dim[0]);
        PLFLT py = gsl_matrix_get(data->x, i, a->dim[1]);
        if (isfinite(px) && isfinite(py))
            plstring(1, &px, &py, "\u25cf");
    }
    plschr(0, 1.0);
    /* ten levels, geometric from 1 % of the peak (the tails show) */
    PLFLT lev[10];
    for (int l = 0; l < 10; l++)
        lev[l] = zmax * pow(10, -2.0 + 2.0 * (l + 0.5) / 10.0);
    PLcGrid cg;
    PLFLT *xg = malloc(G * sizeof *xg), *yg = malloc(G * sizeof *yg);
    if (xg != NULL && yg != NULL) {
        for (size_t i = 0; i < G; i++) {
            xg[i] = r[0] + (r[1] - r[0]) * (double)i / (double)(G - 1);
            yg[i] = r[2] + (r[3] - r[2]) * (double)i / (double)(G - 1);
        }
        cg.xg = xg;
        cg.yg = yg;
        cg.zg = NULL;
        cg.nx = (PLINT)G;
        cg.ny = (PLINT)G;
        cg.nz = 0;
        plcol0(8);
        plwidth(1.2);
        plcont((PLFLT_MATRIX)z, (PLINT)G, (PLINT)G, 1, (PLINT)G, 1, (PLINT)G,
               lev, 10, pltr1, &cg);
        plwidth(1.0);
    }
    plcol0(1);
    plschr(0, 0.8);
    plmtex("b", 5.2, 0.0, 0.0,
           "contours: 10 levels from 1% to 80% of the peak density "
           "(log-spaced)");
    plschr(0, 1.0);
    free(xg);
    free(yg);
    plFree2dGrid(z, (PLINT)G, (PLINT)G);
    free(cinv);
    return plot_end(1, emsg, sizeof emsg) == 0 ? LSEFIT_OK : plot_failed(emsg);
}

/* BIC against K for the four covariance models, refitted on the data with
 * the model's seed (lower is better, as lsefit selects). */
static int gmm_bic(const plot_args *a, const gmm_model *g,
                   const lsefit_data *data)
{
    static const lse_cov_type covs[4] = {LSE_COV_FULL, LSE_COV_DIAG,
                                         LSE_COV_SPHERICAL, LSE_COV_TIED};
    const size_t kmax = a->kmax, d = data->d;
    double *bic = malloc(4 * kmax * sizeof *bic);
    if (bic == NULL)
        return lsefit_fail("out of memory");
    double lo = INFINITY, hi = -INFINITY;
    for (size_t c = 0; c < 4; c++)
        for (size_t k = 1; k <= kmax; k++) {
            double *b = &bic[c * kmax + k - 1];
            *b = NAN;
            lse_gmm *m = NULL;
            lse_error err;
            if (lse_gmm_new(k, d, covs[c], &m, NULL) != LSE_OK)
                continue;
            lse_gmm_fit_opts o = lse_gmm_fit_opts_default();
            o.seed = g->seed;
            o.missing = LSE_GMM_MISSING_MARGINALIZE;
            o.sample_weight = data->weight;
            if (lse_gmm_fit(m, data->x, &o, &err) == LSE_OK &&
                lse_gmm_bic(m, data->x, b, &err) == LSE_OK && isfinite(*b)) {
                /* in data units, as lsefit's table */
                *b -= 2 * (double)data->x->size1 *
                      lsefit_log_jacobian(data->scale);
                lo = fmin(lo, *b);
                hi = fmax(hi, *b);
            } else
                *b = NAN;
            lse_gmm_free(m);
        }
    if (!isfinite(lo)) {
        free(bic);
        return lsefit_fail("%s: no K in 1..%zu could be fitted",
                           a->dopt.path, kmax);
    }
    char emsg[300];
    plot_page page = page_of(a, 7, 5);
    if (plot_begin(&page, emsg, sizeof emsg) != 0) {
        free(bic);
        return plot_failed(emsg);
    }
    const double pad = 0.05 * (hi - lo > 0 ? hi - lo : 1);
    pladv(0);
    plvpor(0.13, 0.95, 0.12, 0.9);
    plwind(0.5, (double)kmax + 0.5, lo - pad, hi + pad);
    plcol0(1);
    plbox("bcnst", 1, 0, "bcnstv", 0, 0);
    pllab("number of components K", "BIC (lower is better)",
          "BIC by covariance model");
    static const char *const sym[4] = {"\u25cf", "#(851)", "#(841)", "#(857)"};
    PLINT opt[4], tcol[4], lcol[4], lsty[4], mcol[4], nsym[4];
    PLFLT lw[4], msc[4];
    const char *text[4], *syms[4];
    for (size_t c = 0; c < 4; c++) {
        plcol0((PLINT)(8 + c));
        PLFLT xs[64], ys[64];
        size_t n = 0;
        for (size_t k = 1; k <= kmax && n < 64; k++) {
            const double b = bic[c * kmax + k - 1];
            if (!isfinite(b))
                continue;
            xs[n] = (double)k;
            ys[n] = b;
            n++;
        }
        plwidth(1.5);
        plline((PLINT)n, xs, ys);
        plwidth(1.0);
        plstring((PLINT)n, xs, ys, sym[c]);
        opt[c] = PL_LEGEND_LINE | PL_LEGEND_SYMBOL;
        tcol[c] = 1;
        lcol[c] = mcol[c] = (PLINT)(8 + c);
        lsty[c] = 1;
        lw[c] = 1.5;
        msc[c] = 1;
        nsym[c] = 1;
        syms[c] = sym[c];
        text[c] = lse_gmm_cov_name(covs[c]);
    }
    PLFLT lwid, lhei;
    plschr(0, 0.8);
    pllegend(&lwid, &lhei, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_RIGHT | PL_POSITION_TOP | PL_POSITION_INSIDE, 0.02,
             0.02, 0.1, 0, 1, 1, 0, 0, 4, opt, 1.0, 1.0, 1.8, 1.0, tcol, text,
             NULL, NULL, NULL, NULL, lcol, lsty, lw, mcol, msc, nsym, syms);
    plschr(0, 1.0);
    free(bic);
    return plot_end(1, emsg, sizeof emsg) == 0 ? LSEFIT_OK : plot_failed(emsg);
}

int lsefit_gmm_plot_main(int argc, char **argv)
{
    const char *cmd = "gmm plot";
    plot_args a;
    int done = 0;
    int rc = parse_plot(argc, argv, cmd, 0, &a, &done);
    if (rc != LSEFIT_OK || done)
        return rc;
    gmm_model g;
    rc = gmm_load(a.model, &g);
    if (rc != LSEFIT_OK)
        return rc;
    const size_t d = lse_gmm_dim(g.m);
    lsefit_data data = {0};
    a.dopt.model_names = (const char *const *)g.names;
    a.dopt.n_model_names = d;
    a.dopt.model_path = a.model;
    a.dopt.missing = LSE_MISSING_KEEP;
    rc = lsefit_data_load(&a.dopt, &data);
    if (rc == LSEFIT_OK && data.d != d)
        rc = lsefit_fail("%s: %zu data columns but the model %s has "
                         "n_features = %zu",
                         a.dopt.path, data.d, a.model, d);
    if (rc == LSEFIT_OK && d < 2 && strcmp(a.what, "bic") != 0)
        rc = lsefit_fail("%s: one feature; --what %s plots two (use --what "
                         "bic)",
                         a.model, a.what);
    if (rc == LSEFIT_OK && (a.dim[0] >= d || a.dim[1] >= d))
        rc = lsefit_usage(cmd, "--dims: the model has %zu features", d);
    if (rc == LSEFIT_OK && g.mean != NULL)
        rc = lsefit_data_apply_standardize(&data, g.mean, g.scale);
    if (rc == LSEFIT_OK) {
        if (strcmp(a.what, "classification") == 0 && d > 2 && !a.dims_given)
            rc = gmm_pairs(&a, &g, &data);
        else if (strcmp(a.what, "classification") == 0)
            rc = gmm_scatter(&a, &g, &data, 0);
        else if (strcmp(a.what, "uncertainty") == 0)
            rc = gmm_scatter(&a, &g, &data, 1);
        else if (strcmp(a.what, "density") == 0)
            rc = gmm_density(&a, &g, &data);
        else
            rc = gmm_bic(&a, &g, &data);
    }
    lsefit_data_free(&data);
    gmm_model_free(&g);
    return rc;
}

/* ------------------------------------------------------------------ */
/* SLDS                                                                 */

static int slds_load(const char *path, lse_slds **out, char ***names,
                     gsl_vector **mean, gsl_vector **scale)
{
    lse_error err;
    lse_json *doc = NULL;
    *out = NULL;
    *names = NULL;
    if (lse_json_load(path, &doc, &err) != LSE_OK)
        return lsefit_fail_lib(&err, NULL);
    int rc = LSEFIT_OK;
    if (lse_slds_from_json(doc, path, out, names, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK)
        rc = lsefit_json_get_standardize(doc, path, lse_slds_dim(*out), mean,
                                         scale);
    lse_json_free(doc);
    if (rc != LSEFIT_OK) {
        lse_slds_free(*out);
        *out = NULL;
        free(*names);
        *names = NULL;
    }
    return rc;
}

/* Bands of the mode path (in the mode colours, lightened) from y0 to y1
 * behind the series: one band per run of steps in the same mode. */
static void mode_bands(const size_t *rows, const size_t *path, size_t n_steps,
                       double y0, double y1)
{
    for (size_t s = 0; s < n_steps;) {
        size_t e = s;
        while (e + 1 < n_steps && path[e + 1] == path[s] &&
               rows[e + 1] == rows[e] + 1)
            e++;
        int rgb[3];
        plot_class_colour(path[s], rgb);
        /* a light tint of the mode colour */
        plscol0a(7, 255 - (255 - rgb[0]) / 3, 255 - (255 - rgb[1]) / 3,
                 255 - (255 - rgb[2]) / 3, 1.0);
        plcol0(7);
        PLFLT bx[4] = {(double)rows[s] - 0.5, (double)rows[e] + 0.5,
                       (double)rows[e] + 0.5, (double)rows[s] - 0.5};
        PLFLT by[4] = {y0, y0, y1, y1};
        plfill(4, bx, by);
        s = e + 1;
    }
}

/* The legend of the mode probabilities: one entry per mode (8 at most). */
static void mode_legend(size_t K)
{
    PLINT opt[8], tcol[8], lcol[8], lsty[8];
    PLFLT lw[8];
    const char *text[8];
    char nm[8][24];
    const size_t nk = K < 8 ? K : 8;
    for (size_t k = 0; k < nk; k++) {
        snprintf(nm[k], sizeof nm[k], "mode %zu", k + 1);
        opt[k] = PL_LEGEND_LINE;
        tcol[k] = 1;
        lcol[k] = (PLINT)(8 + k);
        lsty[k] = 1;
        lw[k] = 3;
        text[k] = nm[k];
    }
    PLFLT lwid, lhei;
    plschr(0, 0.75);
    pllegend(&lwid, &lhei, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_RIGHT | PL_POSITION_INSIDE | PL_POSITION_TOP, 0.01,
             0.03, 0.05, 0, 1, 1, 0, 1, (PLINT)nk, opt, 1.0, 1.0, 1.5,
             1.0, tcol, text, NULL, NULL, NULL, NULL, lcol, lsty, lw, NULL,
             NULL, NULL, NULL);
}

/* What the SLDS plot shows: the mode path and posteriors of the steps
 * rows[0..n_steps), and for the latent model the smoothed latent means
 * and variances (T, D; else NULL). */
typedef struct slds_view {
    size_t K, n_steps;
    int markov;
    const size_t *rows, *path;
    const gsl_matrix *post, *lat, *latvar;
} slds_view;

static int series_draw(const plot_args *a, const slds_view *sv, char **names,
                       const lsefit_data *data, const gsl_vector *mean,
                       const gsl_vector *scale);

static int slds_draw(const plot_args *a, const lse_slds *m, char **names,
                     const lsefit_data *data, const gsl_vector *mean,
                     const gsl_vector *scale)
{
    const size_t T = data->x->size1, K = lse_slds_n_modes(m);
    lse_error err;
    size_t n_steps = 0;
    size_t *rows = malloc(T * sizeof *rows), *path = malloc(T * sizeof *path);
    if (rows == NULL || path == NULL) {
        free(rows);
        free(path);
        return lsefit_fail("out of memory");
    }
    int rc = LSEFIT_OK;
    gsl_matrix *post = NULL;
    if (lse_slds_steps(m, T, data->seq, rows, &n_steps, &err) != LSE_OK)
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK && (post = gsl_matrix_alloc(n_steps, K)) == NULL)
        rc = lsefit_fail("out of memory");
    if (rc == LSEFIT_OK &&
        (lse_slds_posteriors(m, data->x, data->seq, post, &err) != LSE_OK ||
         lse_slds_viterbi(m, data->x, data->seq, path, &err) != LSE_OK))
        rc = lsefit_fail_lib(&err, NULL);
    if (rc == LSEFIT_OK) {
        const slds_view sv = {K, n_steps, lse_slds_is_markov(m), rows, path,
                              post, NULL, NULL};
        rc = series_draw(a, &sv, names, data, mean, scale);
    }
    free(rows);
    free(path);
    gsl_matrix_free(post);
    return rc;
}

/* The middle panel of the latent model: each smoothed latent mean
 * E[x_t,i] (dark lines, one line style per dimension) over its band of
 * +- 2 standard deviations (light grey), with a legend. */
static void latent_panel(const slds_view *sv, size_t T)
{
    const gsl_matrix *x = sv->lat, *v = sv->latvar;
    const size_t D = x->size2;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < D; i++) {
            const double m = gsl_matrix_get(x, t, i);
            const double s = 2.0 * sqrt(fmax(gsl_matrix_get(v, t, i), 0.0));
            lo = fmin(lo, m - s);
            hi = fmax(hi, m + s);
        }
    if (!(hi > lo)) {
        lo -= 1;
        hi += 1;
    }
    const double pad = 0.05 * (hi - lo);
    plvpor(0.09, 0.95, 0.40, 0.59);
    plwind(-0.5, (double)T - 0.5, lo - pad, hi + pad);
    PLFLT *bx = malloc(2 * T * sizeof *bx), *by = malloc(2 * T * sizeof *by);
    PLFLT *tx = malloc(T * sizeof *tx), *mx = malloc(T * sizeof *mx);
    plscol0a(6, 225, 215, 245, 1.0); /* the +- 2 sd bands: lavender */
    plscol0a(5, 60, 60, 60, 1.0);    /* the means */
    for (size_t i = 0; bx && by && tx && mx && i < D; i++) {
        for (size_t t = 0; t < T; t++) {
            const double m = gsl_matrix_get(x, t, i);
            const double s = 2.0 * sqrt(fmax(gsl_matrix_get(v, t, i), 0.0));
            bx[t] = bx[2 * T - 1 - t] = tx[t] = (double)t;
            by[t] = m - s;
            by[2 * T - 1 - t] = m + s;
            mx[t] = m;
        }
        plcol0(6);
        plfill((PLINT)(2 * T), bx, by);
    }
    for (size_t i = 0; bx && by && tx && mx && i < D; i++) {
        for (size_t t = 0; t < T; t++) {
            tx[t] = (double)t;
            mx[t] = gsl_matrix_get(x, t, i);
        }
        plcol0(5);
        pllsty((PLINT)(1 + i % 8));
        plwidth(1.3);
        plline((PLINT)T, tx, mx);
        plwidth(1.0);
        pllsty(1);
    }
    free(bx);
    free(by);
    free(tx);
    free(mx);
    plcol0(1);
    plbox("bcst", 0, 0, "bcnstv", 0, 0);
    plmtex("l", 3.5, 0.5, 0.5, "E[x] +- 2 sd");
    PLINT opt[8], tcol[8], lcol[8], lsty[8];
    PLFLT lw[8];
    const char *text[8];
    char nm[8][16];
    const size_t nd = D < 8 ? D : 8;
    for (size_t i = 0; i < nd; i++) {
        snprintf(nm[i], sizeof nm[i], "x%zu", i);
        opt[i] = PL_LEGEND_LINE;
        tcol[i] = 1;
        lcol[i] = 5;
        lsty[i] = (PLINT)(1 + i);
        lw[i] = 1.3;
        text[i] = nm[i];
    }
    PLFLT lwid, lhei;
    plschr(0, 0.75);
    pllegend(&lwid, &lhei, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_RIGHT | PL_POSITION_INSIDE | PL_POSITION_TOP, 0.01,
             0.03, 0.05, 0, 1, 1, 0, 1, (PLINT)nd, opt, 1.0, 1.0, 1.5, 1.0,
             tcol, text, NULL, NULL, NULL, NULL, lcol, lsty, lw, NULL, NULL,
             NULL, NULL);
    plschr(0, 1.0);
}

static int series_draw(const plot_args *a, const slds_view *sv, char **names,
                       const lsefit_data *data, const gsl_vector *mean,
                       const gsl_vector *scale)
{
    const size_t T = data->x->size1, K = sv->K, n_steps = sv->n_steps;
    const size_t *rows = sv->rows, *path = sv->path;
    const gsl_matrix *post = sv->post, *lat = sv->lat;
    const int latent = lat != NULL;
    /* the series in data units */
    PLFLT *t = malloc(T * sizeof *t), *y = malloc(T * sizeof *y);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; t != NULL && y != NULL && i < T; i++) {
        double v = gsl_matrix_get(data->x, i, 0);
        if (mean != NULL)
            v = gsl_vector_get(mean, 0) + gsl_vector_get(scale, 0) * v;
        t[i] = (double)i;
        y[i] = v;
        if (isfinite(v)) {
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
    }
    char emsg[300];
    plot_page page = page_of(a, 9, latent ? 7.5 : 5.5);
    if (t == NULL || y == NULL || !isfinite(lo) ||
        plot_begin(&page, emsg, sizeof emsg) != 0) {
        free(t);
        free(y);
        return t == NULL || y == NULL ? lsefit_fail("out of memory")
               : !isfinite(lo)        ? lsefit_fail("%s: no finite values",
                                                    a->dopt.path)
                                      : plot_failed(emsg);
    }
    if (!(hi > lo)) {
        lo -= 1;
        hi += 1;
    }
    const double pad = 0.05 * (hi - lo);
    pladv(0);
    /* top: the series over coloured bands of the mode path (latent
     * model: three panels, the latent states in the middle) */
    plvpor(0.09, 0.95, latent ? 0.66 : 0.42, latent ? 0.93 : 0.92);
    plwind(-0.5, (double)T - 0.5, lo - pad, hi + pad);
    mode_bands(rows, path, n_steps, lo - pad, hi + pad);
    plcol0(1);
    plline((PLINT)T, t, y);
    plbox("bcst", 0, 0, "bcnstv", 0, 0);
    char title[300];
    if (latent)
        snprintf(title, sizeof title,
                 "%s latent SLDS, K = %zu, D = %zu: %s, %s mode path",
                 sv->markov ? "Markov" : "Mixture", K, lat->size2, names[0],
                 sv->markov ? "Viterbi" : "most likely");
    else
        snprintf(title, sizeof title,
                 "%s SLDS, K = %zu modes: %s with the %s mode path",
                 sv->markov ? "Markov-switching" : "Mixture", K, names[0],
                 sv->markov ? "Viterbi" : "most likely");
    plmtex("t", 1.2, 0.5, 0.5, title);
    plmtex("l", 3.5, 0.5, 0.5, names[0]);
    if (latent)
        latent_panel(sv, T);
    /* bottom: mode probabilities */
    plvpor(0.09, 0.95, 0.1, latent ? 0.32 : 0.36);
    plwind(-0.5, (double)T - 0.5, 0, 1.02);
    PLFLT *pt = malloc(n_steps * sizeof *pt), *pp = malloc(n_steps * sizeof *pp);
    for (size_t k = 0; pt != NULL && pp != NULL && k < K; k++) {
        for (size_t s = 0; s < n_steps; s++) {
            pt[s] = (double)rows[s];
            pp[s] = gsl_matrix_get(post, s, k);
        }
        plcol0((PLINT)(8 + k % 8));
        plwidth(1.3);
        plline((PLINT)n_steps, pt, pp);
        plwidth(1.0);
    }
    free(pt);
    free(pp);
    plcol0(1);
    plbox("bcnst", 0, 0, "bcnstv", 0.5, 0);
    pllab("time step (row)", latent ? "" : "p(mode)", "");
    if (latent)
        plmtex("l", 3.5, 0.5, 0.5, "p(mode)");
    mode_legend(K);
    plschr(0, 1.0);
    free(t);
    free(y);
    return plot_end(1, emsg, sizeof emsg) == 0 ? LSEFIT_OK : plot_failed(emsg);
}

int lsefit_slds_plot_main(int argc, char **argv)
{
    const char *cmd = "slds plot";
    plot_args a;
    int done = 0;
    int rc = parse_plot(argc, argv, cmd, 1, &a, &done);
    if (rc != LSEFIT_OK || done)
        return rc;
    if (lsefit_lslds_is_latent(a.model)) { /* tools/lsefit_lslds.c */
        lsefit_lslds_view v;
        rc = lsefit_lslds_view_load(a.model, &a.dopt, &v);
        if (rc == LSEFIT_OK) {
            const size_t T = v.data.x->size1;
            size_t *rows = malloc(T * sizeof *rows);
            for (size_t t = 0; rows != NULL && t < T; t++)
                rows[t] = t;
            const slds_view sv = {v.K, T, v.markov, rows, v.path, v.w, v.x,
                                  v.v};
            rc = rows == NULL ? lsefit_fail("out of memory")
                              : series_draw(&a, &sv, v.names, &v.data, NULL,
                                            NULL);
            free(rows);
        }
        lsefit_lslds_view_free(&v);
        return rc;
    }
    lse_slds *m = NULL;
    char **names = NULL;
    gsl_vector *mean = NULL, *scale = NULL;
    rc = slds_load(a.model, &m, &names, &mean, &scale);
    lsefit_data data = {0};
    if (rc == LSEFIT_OK) {
        a.dopt.model_names = (const char *const *)names;
        a.dopt.n_model_names = lse_slds_dim(m);
        a.dopt.model_path = a.model;
        rc = lsefit_data_load(&a.dopt, &data);
    }
    if (rc == LSEFIT_OK && data.d != lse_slds_dim(m))
        rc = lsefit_fail("%s: %zu data columns but the model %s has "
                         "n_features = %zu",
                         a.dopt.path, data.d, a.model, lse_slds_dim(m));
    if (rc == LSEFIT_OK && mean != NULL)
        rc = lsefit_data_apply_standardize(&data, mean, scale);
    if (rc == LSEFIT_OK)
        rc = slds_draw(&a, m, names, &data, mean, scale);
    lsefit_data_free(&data);
    lse_slds_free(m);
    free(names);
    gsl_vector_free(mean);
    gsl_vector_free(scale);
    return rc;
}

#else /* no PLplot */

static int no_plots(const char *cmd, int argc, char **argv)
{
    lsefit_exec_full(); /* returns only when there is no lsefit-full */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("Usage: lsefit %s MODEL.json DATA.csv -o FIG\n"
                   "(this lsefit was built without PLplot: no plots)\n",
                   cmd);
            return LSEFIT_OK;
        }
    return lsefit_fail("%s: this lsefit was built without PLplot (meson "
                       "feature 'plots'; Debian: libplplot-dev "
                       "plplot-driver-cairo)",
                       cmd);
}

int lsefit_gmm_plot_main(int argc, char **argv)
{
    return no_plots("gmm plot", argc, argv);
}

int lsefit_slds_plot_main(int argc, char **argv)
{
    return no_plots("slds plot", argc, argv);
}
#endif
