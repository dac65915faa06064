/* Data plots through PLplot (tools/plot.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <plplot.h>

#include "plot.h"

/* PLplot ends the program on a fatal error (plexit); the handler removes
 * the temporary file first, so no half-written picture is left. */
static char tmp_path[4200];
static const char *final_path;

static int on_exit_handler(PLCHAR_VECTOR msg)
{
    if (tmp_path[0] != '\0')
        unlink(tmp_path);
    fprintf(stderr, "plot: PLplot failed writing '%s': %s\n",
            final_path ? final_path : "?", msg);
    return 1;
}

void plot_viridis(double t, int rgb[3])
{
    /* viridis at nine points, interpolated linearly */
    static const int c[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
    if (!(t >= 0))
        t = 0;
    if (t > 1)
        t = 1;
    const double s = t * 8;
    const int i = s >= 8 ? 7 : (int)s;
    const double f = s - i;
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lround(c[i][k] + f * (c[i + 1][k] - c[i][k]));
}

void plot_class_colour(size_t k, int rgb[3])
{
    static const int c[8][3] = {{0, 114, 178},  {230, 159, 0},  {0, 158, 115},
                                {204, 121, 167}, {86, 180, 233}, {213, 94, 0},
                                {240, 228, 66}, {0, 0, 0}};
    for (int j = 0; j < 3; j++)
        rgb[j] = c[k % 8][j];
}

static const char *device(const char *format)
{
    if (strcmp(format, "svg") == 0)
        return "svgcairo";
    if (strcmp(format, "png") == 0)
        return "pngcairo";
    if (strcmp(format, "pdf") == 0)
        return "pdfcairo";
    return NULL;
}

int plot_begin(const plot_page *page, char *err, size_t len)
{
    const char *dev = device(page->format);
    if (dev == NULL) {
        snprintf(err, len, "unknown plot format '%s' (svg, png, pdf)",
                 page->format);
        return -1;
    }
    const int n = snprintf(tmp_path, sizeof tmp_path, "%s.XXXXXX", page->path);
    if (n < 0 || (size_t)n >= sizeof tmp_path) {
        tmp_path[0] = '\0';
        snprintf(err, len, "output path too long");
        return -1;
    }
    const int fd = mkstemp(tmp_path);
    if (fd < 0) {
        snprintf(err, len, "cannot write '%s': %s", page->path,
                 strerror(errno));
        tmp_path[0] = '\0';
        return -1;
    }
    close(fd);
    final_path = page->path;
    plsexit(on_exit_handler);
    const double dpi =
        strcmp(page->format, "png") == 0 ? (page->dpi > 0 ? page->dpi : 96) : 72;
    plsdev(dev);
    plsfnam(tmp_path);
    plspage(dpi, dpi, (PLINT)lround(page->width_in * dpi),
            (PLINT)lround(page->height_in * dpi), 0, 0);
    plscmap0n(16);
    plscol0(0, 255, 255, 255); /* background */
    plscol0(1, 0, 0, 0);       /* text, axes */
    plscol0(2, 160, 160, 160); /* masked cells */
    plscol0(3, 90, 90, 90);    /* secondary lines */
    for (int k = 0; k < 8; k++) { /* classes: 8..15 */
        int rgb[3];
        plot_class_colour((size_t)k, rgb);
        plscol0(8 + k, rgb[0], rgb[1], rgb[2]);
    }
    plinit();
    plfontld(1);
    plsfont(page->serif ? PL_FCI_SERIF : PL_FCI_SANS, -1, -1);
    plcol0(1);
    return 0;
}

int plot_end(int ok, char *err, size_t len)
{
    plend();
    if (!ok) {
        unlink(tmp_path);
        tmp_path[0] = '\0';
        return -1;
    }
    /* the usual mode of a new file, not mkstemp's 0600 */
    const mode_t um = umask(0);
    umask(um);
    chmod(tmp_path, 0666 & ~um);
    if (rename(tmp_path, final_path) != 0) {
        snprintf(err, len, "cannot write '%s': %s", final_path,
                 strerror(errno));
        unlink(tmp_path);
        tmp_path[0] = '\0';
        return -1;
    }
    tmp_path[0] = '\0';
    return 0;
}

/* The viridis colour map 1, 256 levels. */
static void viridis_map(void)
{
    PLFLT pos[9], r[9], g[9], b[9];
    for (int i = 0; i < 9; i++) {
        int rgb[3];
        pos[i] = i / 8.0;
        plot_viridis(pos[i], rgb);
        r[i] = rgb[0] / 255.0;
        g[i] = rgb[1] / 255.0;
        b[i] = rgb[2] / 255.0;
    }
    plscmap1n(256);
    plscmap1l(1, 9, pos, r, g, b, NULL);
}

/* A tick step of 1, 2 or 5 x 10^k giving at most about 10 ticks. */
static double nice_step(size_t n)
{
    if (n <= 12)
        return 1;
    const double raw = (double)n / 10.0;
    const double p = pow(10, floor(log10(raw)));
    return raw <= p ? p : (raw <= 2 * p ? 2 * p : (raw <= 5 * p ? 5 * p : 10 * p));
}

/* One title line, its characters shrunk to fit the page width. */
static void title_line(const char *text, double pos, double width_in)
{
    const double fit = width_in * 9.5; /* characters at the default size */
    const double n = (double)strlen(text);
    const double s = n > fit ? fit / n : 1.0;
    plschr(0, 0.9 * s);
    plmtex("t", pos / s, 0.5, 0.5, text); /* pos in default heights */
    plschr(0, 0.9);
}

static void row_label_fn(PLINT axis, PLFLT value, PLCHAR_NC_VECTOR label,
                         PLINT length, PLPointer data)
{
    const double top = *(const PLFLT *)data;
    snprintf(label, (size_t)length, "%.0f",
             axis == PL_Y_AXIS ? top - value : value);
}

/* The colour range of the finite cells and the number of the others. */
static size_t heatmap_range(const gsl_matrix *m, double *lo_out,
                            double *hi_out)
{
    double lo = INFINITY, hi = -INFINITY;
    size_t masked = 0;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            if (isfinite(v)) {
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            } else
                masked++;
        }
    if (!isfinite(lo)) {
        lo = 0;
        hi = 1;
    }
    if (!(hi > lo)) { /* a constant map: one colour, a readable scale */
        lo -= 0.5;
        hi += 0.5;
    }
    *lo_out = lo;
    *hi_out = hi;
    return masked;
}

/* Grey under the masked cells. */
static void heatmap_masked(const plot_heatmap *h, size_t ny)
{
    const gsl_matrix *m = h->m;
    plcol0(2);
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++) {
            if (isfinite(gsl_matrix_get(m, i, j)))
                continue;
            const double x = (double)(h->transpose ? i : j);
            const double y = (double)(h->transpose ? j : ny - 1 - i);
            PLFLT px[4] = {x - 0.5, x + 0.5, x + 0.5, x - 0.5};
            PLFLT py[4] = {y - 0.5, y - 0.5, y + 0.5, y + 0.5};
            plfill(4, px, py);
        }
}

/* Small maps: the value in each cell, white on the dark half of the
 * scale. */
static void heatmap_values(const plot_heatmap *h, size_t nx, size_t ny,
                           double lo, double hi)
{
    const gsl_matrix *m = h->m;
    if (nx * ny > 144)
        return;
    /* the value in each cell, white on the dark half of the scale, only
     * when "0.00" fits the cell (40 x 2 cells are too narrow: the numbers
     * would run into each other) */
    PLFLT sx0, sx1, sy0, sy1, def_ht, ht;
    plschr(0, nx * ny <= 36 ? 0.9 : 0.65);
    plgspa(&sx0, &sx1, &sy0, &sy1); /* the page in mm */
    plgchr(&def_ht, &ht);           /* character height in mm */
    const double cell_w = (sx1 - sx0) * 0.70 / (double)nx,
                 cell_h = (sy1 - sy0) * 0.73 / (double)ny;
    if (!(4 * 0.75 * ht < 0.9 * cell_w && 1.4 * ht < cell_h))
        return;
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            if (!isfinite(v))
                continue;
            char txt[32];
            snprintf(txt, sizeof txt, "%.2f", v);
            plcol0((v - lo) / (hi - lo) < 0.6 ? 0 : 1);
            plptex((double)(h->transpose ? i : j),
                   (double)(h->transpose ? j : ny - 1 - i) - 0.1, 1, 0, 0.5,
                   txt);
        }
}

/* Axes, labels and the title (up to two lines: "\n" breaks it). */
static void heatmap_axes(const plot_heatmap *h, const plot_page *page,
                         size_t nx, size_t ny)
{
    plcol0(1);
    plschr(0, 0.9);
    /* integer ticks: at most about 12 labels per axis */
    const double xt = nice_step(nx), yt = nice_step(ny);
    /* matrix rows count down the y axis (row 0 on top) */
    PLFLT top = (double)ny - 1;
    plslabelfunc(h->transpose ? NULL : row_label_fn, &top);
    plbox("bcnt", xt, 0, h->transpose ? "bcntv" : "bcntvo", yt, 0);
    plslabelfunc(NULL, NULL);
    const char *xl = h->transpose ? h->row_label : h->col_label;
    const char *yl = h->transpose ? h->col_label : h->row_label;
    pllab(xl ? xl : "", yl ? yl : "", "");
    if (h->title != NULL) {
        char t[512];
        snprintf(t, sizeof t, "%s", h->title);
        char *nl = strchr(t, '\n');
        if (nl != NULL) {
            *nl = '\0';
            title_line(t, 2.6, page->width_in);
            title_line(nl + 1, 1.2, page->width_in);
        } else
            title_line(t, 1.5, page->width_in);
    }
}

/* The colour bar from lo to hi, right of the map. */
static void heatmap_colorbar(const plot_heatmap *h, double lo, double hi)
{
    PLFLT cw, ch;
    const PLINT label_opts[1] = {PL_COLORBAR_LABEL_RIGHT};
    const char *labels[1] = {h->value_label ? h->value_label : "value"};
    const char *axis_opts[1] = {"bcvtm"};
    const PLFLT ticks[1] = {0};
    const PLINT sub[1] = {0};
    const PLINT n_values[1] = {2};
    const PLFLT vals[2] = {lo, hi};
    const PLFLT *values[1] = {vals};
    plcolorbar(&cw, &ch, PL_COLORBAR_IMAGE,
               PL_POSITION_RIGHT | PL_POSITION_OUTSIDE | PL_POSITION_VIEWPORT,
               0.03, 0, 0.035, 0.9, 0, 1, 1, 0, 0, 0, 0, 1, label_opts,
               labels, 1, axis_opts, ticks, sub, n_values,
               (PLFLT_MATRIX)values);
}

int plot_heatmap_draw(const plot_heatmap *h, const plot_page *page, char *err,
                      size_t len)
{
    const gsl_matrix *m = h->m;
    if (m == NULL || m->size1 == 0 || m->size2 == 0) {
        snprintf(err, len, "empty matrix");
        return -1;
    }
    const size_t nx = h->transpose ? m->size1 : m->size2;
    const size_t ny = h->transpose ? m->size2 : m->size1;
    double lo, hi;
    const size_t masked = heatmap_range(m, &lo, &hi);
    PLFLT **z = NULL;
    plAlloc2dGrid(&z, (PLINT)nx, (PLINT)ny);
    PLFLT *xg = malloc((nx + 1) * sizeof *xg), *yg = malloc((ny + 1) * sizeof *yg);
    if (z == NULL || xg == NULL || yg == NULL) {
        if (z != NULL)
            plFree2dGrid(z, (PLINT)nx, (PLINT)ny);
        free(xg);
        free(yg);
        snprintf(err, len, "out of memory");
        return -1;
    }
    /* matrix row i is drawn top to bottom (y = ny - 1 - i) unless
     * transposed, where rows run left to right and columns bottom up */
    for (size_t i = 0; i < m->size1; i++)
        for (size_t j = 0; j < m->size2; j++) {
            const double v = gsl_matrix_get(m, i, j);
            const size_t x = h->transpose ? i : j;
            const size_t y = h->transpose ? j : ny - 1 - i;
            z[x][y] = isfinite(v) ? v : lo - (hi - lo); /* not drawn */
        }
    for (size_t x = 0; x <= nx; x++)
        xg[x] = (double)x - 0.5;
    for (size_t y = 0; y <= ny; y++)
        yg[y] = (double)y - 0.5;
    if (plot_begin(page, err, len) != 0) {
        plFree2dGrid(z, (PLINT)nx, (PLINT)ny);
        free(xg);
        free(yg);
        return -1;
    }
    viridis_map();
    pladv(0);
    plvpor(0.10, 0.80, masked ? 0.17 : 0.13, 0.86);
    plwind(-0.5, (double)nx - 0.5, -0.5, (double)ny - 0.5);
    if (masked > 0)
        heatmap_masked(h, ny);
    PLcGrid cg = {xg, yg, NULL, (PLINT)nx + 1, (PLINT)ny + 1, 0};
    plimagefr((PLFLT_MATRIX)z, (PLINT)nx, (PLINT)ny, -0.5, (double)nx - 0.5,
              -0.5, (double)ny - 0.5, lo, hi, lo, hi, pltr1, &cg);
    heatmap_values(h, nx, ny, lo, hi);
    heatmap_axes(h, page, nx, ny);
    if (masked > 0)
        plmtex("b", 4.6, 0.0, 0.0, "grey: masked pairs");
    heatmap_colorbar(h, lo, hi);
    plFree2dGrid(z, (PLINT)nx, (PLINT)ny);
    free(xg);
    free(yg);
    return plot_end(1, err, len);
}
