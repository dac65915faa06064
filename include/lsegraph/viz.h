#ifndef LSEGRAPH_VIZ_H
#define LSEGRAPH_VIZ_H

/**
 * @file viz.h
 * @brief Factor-graph pictures of any lse_graph through Graphviz
 * (libcgraph + libgvc), in the separate library liblsegraph-viz so that
 * the core does not depend on Graphviz. Include after <lsegraph/lsegraph.h>
 * and link lsegraph-viz (pkg-config lsegraph-viz).
 *
 * Conventions (docs/energyviz.md): variable nodes are circles (observed,
 * i.e. clamped, ones shaded), parameter nodes are boxes, each energy term
 * is a small black factor square labelled with its kind and similarity;
 * edges run parent -> factor -> child, context edges dashed, parameter
 * edges dotted. Nodes repeated over an index sit in a plate: the caller
 * names the plates (lse_viz_opts.plates, e.g. "K = 4 patterns"); other
 * nodes with more than one row share a plate per row count labelled
 * "272 rows". A plate's label is a text node inside the plate (kind=plate)
 * beside its first node, so edges are routed around it. Every
 * element carries machine-readable attributes (kind, rows, dim, observed,
 * sim, role, ...) so the DOT output is also a model spec
 * (lse_viz_read_spec) and tests can read it back.
 */

#include <lsegraph/lsegraph.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Limits of a model spec read by lse_viz_read_spec(), which
 *  allocates every node and every term of the spec: rows x dim summed over
 *  the variables (16 Mi entries), child rows x parent rows of one LSE
 *  factor (16 Mi pairs), and those pairs times the largest dimension of
 *  the factor's variables (64 Mi), so a spec needs at most about 1 GB. */
#define LSE_VIZ_SPEC_MAX_ENTRIES ((size_t)1 << 24)
#define LSE_VIZ_SPEC_MAX_PAIRS ((size_t)1 << 24)
#define LSE_VIZ_SPEC_MAX_WORK ((size_t)1 << 26)
/** @brief Largest lse_viz_opts.max_rows of the expanded view (every drawn
 *  row is a Graphviz node, every drawn pair an edge). */
#define LSE_VIZ_MAX_EXPANDED_ROWS ((size_t)1000)

/** @brief A node's plate: nodes with the same label share one plate. */
typedef struct lse_viz_plate {
    const char *node;  /**< node name */
    const char *label; /**< plate label, e.g. "K = 4 patterns"; NULL: the
                          node sits in no plate */
} lse_viz_plate;

typedef struct lse_viz_opts {
    int expand;          /**< draw every row as a node and each child-parent
                            pair of an LSE term as an edge whose width and
                            colour follow the softmax weight */
    size_t max_rows;     /**< expanded: rows drawn per node (0 = 40; at
                            most LSE_VIZ_MAX_EXPANDED_ROWS) */
    double min_weight;   /**< expanded: lighter edges are omitted (0.01) */
    const char *layout;  /**< "dot" (default), "fdp" (both draw plates as
                            boxes; fdp writes row ranges into the factor's
                            label, not on the edge), "neato", "circo",
                            "twopi", "sfdp" (these draw no clusters, so
                            they are refused, LSE_EINVAL, for a graph with
                            plates and for the expanded view; overlap=false) */
    const char *title;   /**< graph label, or NULL */
    const lse_viz_plate *plates; /**< the model's index names (may be NULL);
                                    nodes not listed are grouped by rows */
    size_t n_plates;     /**< entries of plates */
    int legend;          /**< add a legend of the shapes and line styles
                            (factor view) or of edge colour and width
                            (expanded view): a node kind=legend */
    const char *theme;   /**< "screen" (default: sans-serif, grey fills) or
                            "print" (serif fonts, black and white, thicker
                            lines) */
    double dpi;          /**< raster resolution (0: 96, or 300 with the
                            print theme); at most 1200 */
} lse_viz_opts;

/** @brief expand 0, max_rows 40, min_weight 0.01, layout "dot", no title,
 *  no plates named, no legend, theme "screen", dpi 0. */
LSE_API lse_viz_opts lse_viz_opts_default(void);

/** @brief DOT text of @p g's factor graph, in a malloc'd string the
 *  caller frees. The graph must have been evaluated (lse_graph_energy) for
 *  the expanded view's weights.
 *  @return LSE_OK, LSE_EFAULT, LSE_EINVAL (unknown layout or theme, a
 *  plate naming no node of @p g, dpi outside [0, 1200]), LSE_EDOM
 *  (expanded, max_rows above LSE_VIZ_MAX_EXPANDED_ROWS), LSE_ENOMEM,
 *  LSE_EGSL-free: Graphviz failures are LSE_EIO with its message. */
LSE_API lse_status lse_viz_to_dot(lse_graph *g, const lse_viz_opts *opts,
                                  char **out, lse_error *err);

/** @brief Lay out and write @p g's factor graph to @p path in @p format
 *  ("svg", "png", "pdf" or "dot"); the file is written completely or not
 *  at all (temporary name, then rename). */
LSE_API lse_status lse_viz_render(lse_graph *g, const lse_viz_opts *opts,
                                  const char *format, const char *path,
                                  lse_error *err);

/** @brief Render DOT text with @p layout to @p path in @p format; a
 *  layout other than dot and fdp refuses DOT text with a cluster
 *  (LSE_EINVAL), since it would draw the cluster across other nodes. */
LSE_API lse_status lse_viz_render_dot(const char *dot, const char *layout,
                                      const char *format, const char *path,
                                      lse_error *err);

/** @brief A heat map of @p m (rows x cols, at most 200 x 200) as a
 *  Graphviz HTML-like table with a colour legend (min, max). Labels may be
 *  NULL. */
LSE_API lse_status lse_viz_matrix_to_dot(const gsl_matrix *m,
                                         const char *title,
                                         const char *row_label,
                                         const char *col_label, char **out,
                                         lse_error *err);

/**
 * @brief Build an lse_graph from a model spec: a DOT graph read with
 * libcgraph (the format lse_viz_to_dot writes; docs/energyviz.md has the
 * full grammar).
 *
 * Nodes without `kind=factor` are variables: `rows` and `dim` (positive
 * integers, required), `observed` (true/false: a clamped node), `kind`
 * variable (default) or param. A factor node (`kind=factor`) is an energy
 * term named after the node (or its `name` attribute):
 * - `term=lse` (the default): `sim` (a built-in name, lse_sim_find), the
 *   hyper-parameters as `config="lambda=0.2, rho=0.5"` (the similarity's
 *   describe() text) and/or one attribute per key (DAR's feedback beta is
 *   `dar_beta`, since `beta` is the term's), `beta`, `mask` (a number, or
 *   causal, no_self, causal|no_self), `reduce` (rows or chain), `enabled`;
 * - `term=custom` with `custom=quadratic|layernorm` and its config
 *   (`scale`, `eps`) the same way.
 * Edges join a variable and a factor (either direction) and carry `role`:
 * child, parent, context, param (with `slot`: one of the similarity's
 * param_names, chain_init or chain_trans) or view (custom factors, with
 * `index` 0, 1, ...); optional `first` / `count` select rows.
 *
 * Node values start deterministic and finite: zero, except Cholesky
 * parameters of gaussian/lingauss terms (identity factors) and DAAM gate
 * widths (1), so the graph can be evaluated at once.
 *
 * @param path file to read, or the name used in messages when @p text is
 *        given (NULL: "<memory>"). @param text DOT text, or NULL to read
 *        @p path. Both borrowed.
 * @param[out] out the graph, owned by the caller (lse_graph_free); NULL on
 *        failure.
 * @param err may be NULL; on failure "lse_viz_read_spec: FILE:LINE: facts"
 *        with the line of the offending node or edge statement.
 * @return LSE_OK; LSE_EFAULT (NULL @p out, or both @p path and @p text
 *  NULL); LSE_EIO (unreadable file); LSE_EPARSE (DOT syntax error, missing
 *  or malformed attribute, unknown role, kind or config key, more than one
 *  graph, an expanded or matrix picture); LSE_ENOTFOUND (unknown
 *  similarity or custom type); LSE_ENOTSUP (the pairwise similarity needs C
 *  functions); LSE_EINVAL (a factor without child or parent, duplicated
 *  role or slot, an edge that does not join a variable and a factor);
 *  LSE_ERANGE (rows outside a node); LSE_EDOM (sizes beyond
 *  LSE_VIZ_SPEC_MAX_ENTRIES, LSE_VIZ_SPEC_MAX_PAIRS or
 *  LSE_VIZ_SPEC_MAX_WORK); the status of lse_graph_add_lse /
 *  lse_graph_add_custom for what the graph refuses (LSE_EDIM with the
 *  similarity's check message for mismatched dimensions, LSE_EDOM, ...);
 *  LSE_ENOMEM.
 */
LSE_API lse_status lse_viz_read_spec(const char *path, const char *text,
                                     lse_graph **out, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_VIZ_H */
