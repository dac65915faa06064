/* Data plots of the tools (energyviz heat maps, lsefit fit plots) through
 * PLplot's C API and its cairo driver: svg, png and pdf files written
 * completely or not at all. Private to tools/; built when meson's `plots`
 * feature finds PLplot (LSE_HAVE_PLOTS). Graph pictures stay with
 * Graphviz (lib/viz). */
#ifndef LSE_TOOLS_PLOT_H
#define LSE_TOOLS_PLOT_H

#include <stddef.h>

#include <gsl/gsl_matrix.h>

/* The output: format "svg", "png" or "pdf"; the page in inches; dpi for
 * png (0: 96); serif fonts (the print theme) instead of sans-serif. */
typedef struct plot_page {
    const char *format, *path;
    double width_in, height_in, dpi;
    int serif;
} plot_page;

/* A heat map of @p m: one raster cell per entry, coloured by viridis from
 * the smallest to the largest finite value, with a colour bar, axes
 * (row and column indices) and a title. Entries that are not finite
 * (masked pairs) are grey, and the picture says "grey: masked" only when
 * there are such cells. @p transpose draws rows along the x axis (a long
 * series: time runs left to right). Labels may be NULL. */
typedef struct plot_heatmap {
    const gsl_matrix *m;
    const char *title, *row_label, *col_label, *value_label;
    int transpose;
} plot_heatmap;

/* 0 on success; -1 with a one-line reason in @p err. */
int plot_heatmap_draw(const plot_heatmap *h, const plot_page *page, char *err,
                      size_t len);

/* The Viridis colour at t in [0, 1], as 0..255 components. */
void plot_viridis(double t, int rgb[3]);

/* A categorical colour (Okabe-Ito, colour-blind safe) for class k. */
void plot_class_colour(size_t k, int rgb[3]);

/* Begin a page: the device, the file (a temporary name beside @p path),
 * white background, black text. plot_end() closes PLplot and renames the
 * file into place (or removes it when @p ok is 0). Both return 0 or -1
 * with a reason in err. */
int plot_begin(const plot_page *page, char *err, size_t len);
int plot_end(int ok, char *err, size_t len);

#endif
