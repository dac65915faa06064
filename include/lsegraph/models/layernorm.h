#ifndef LSEGRAPH_MODELS_LAYERNORM_H
#define LSEGRAPH_MODELS_LAYERNORM_H
#if !defined(LSEGRAPH_INSIDE) && !defined(LSE_BUILDING)
#error "Include <lsegraph/lsegraph.h>, not this header."
#endif

#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>
#include <lsegraph/status.h>
#include <lsegraph/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file layernorm.h
 * @brief Layer normalization as the gradient of an energy
 * (models/layernorm.c; Tschantz section 9).
 *
 * The graph: a free node "x" (B, D) of inputs, PARAM nodes "gamma" (1, 1)
 * and "delta" (1, D), and one custom term "layernorm"
 * (lse_custom_layernorm) with
 *
 *     E = sum_i [ D gamma sqrt(var_i + eps) + delta . x_i ],
 *     var_i = (1/D) sum_j (x_ij - mean_i)^2,
 *
 * whose gradient is LayerNorm with a scalar gain:
 *
 *     dE/dx_ij = gamma (x_ij - mean_i) / sqrt(var_i + eps) + delta_j.
 *
 * A per-dimension gain gamma_j has no such energy: the Jacobian of
 * x -> gamma_j (x_j - mean)/sd is not symmetric unless all gamma_j are equal
 * (docs/models/layernorm.md).
 *
 * @code
 * gsl_matrix *y = gsl_matrix_alloc(x->size1, x->size2);
 * lse_error err;
 * if (lse_layernorm_apply(x, 1.0, delta, 1e-5, y, &err) != LSE_OK)
 *     fprintf(stderr, "%s\n", err.message);
 * @endcode
 */

/** @brief A LayerNorm energy graph. Opaque. */
typedef struct lse_layernorm lse_layernorm;

/**
 * @brief Build the graph for inputs @p x (B, D), scalar gain @p gamma,
 * bias @p delta (D) (NULL: zero) and variance floor @p eps.
 * @param x, delta borrowed, copied. @param[out] out owned by the caller
 * (lse_layernorm_free()); NULL on failure. @param err may be NULL.
 * @return LSE_OK; LSE_EFAULT (NULL x or out); LSE_EDIM (delta not of
 *  length D); LSE_EDOM (eps not finite and > 0, gamma not finite);
 *  LSE_ENONFINITE (NaN/inf in x or delta); LSE_ENOMEM.
 */
LSE_API lse_status lse_layernorm_new(const gsl_matrix *x, double gamma,
                                     const gsl_vector *delta, double eps,
                                     lse_layernorm **out, lse_error *err);

/** @brief Free @p ln and its graph; NULL is a no-op. */
LSE_API void lse_layernorm_free(lse_layernorm *ln);

/** @brief "function: facts" of the last failure on @p ln ("" if none).
 *  @deprecated Alias of the message of the last failing call; read the
 *  lse_error *err of that call instead. */
LSE_API const char *lse_layernorm_errmsg(const lse_layernorm *ln);

/** @brief The graph (nodes "x", "gamma", "delta"; term "layernorm"),
 *  owned by @p ln (borrowed). */
LSE_API lse_graph *lse_layernorm_graph(const lse_layernorm *ln);

/** @brief Replace the inputs by @p x (B, D), copied.
 *  @return LSE_OK; LSE_EFAULT; LSE_EDIM; LSE_ENONFINITE. */
LSE_API lse_status lse_layernorm_set_input(lse_layernorm *ln,
                                           const gsl_matrix *x, lse_error *err);

/** @brief Energy E at the current values. @return LSE_OK; LSE_EFAULT; the
 *  graph's errors. */
LSE_API lse_status lse_layernorm_energy(lse_layernorm *ln, double *energy,
                                        lse_error *err);

/**
 * @brief LayerNorm of the current inputs computed as dE/dx: evaluates the
 * graph's gradient and copies the "x" gradient to @p out (B, D).
 * @param energy may be NULL; receives E.
 * @return LSE_OK; LSE_EFAULT; LSE_EDIM (out not (B, D)); the graph's
 *  errors.
 */
LSE_API lse_status lse_layernorm_forward(lse_layernorm *ln, gsl_matrix *out,
                                         double *energy, lse_error *err);

/**
 * @brief One-shot LayerNorm: out = gamma (x - mean)/sqrt(var + eps) + delta
 * row by row, computed as the gradient of the graph's energy (builds and
 * frees a graph). @p out (B, D) may be @p x.
 * @return as lse_layernorm_new(), plus LSE_EDIM for @p out.
 */
LSE_API lse_status lse_layernorm_apply(const gsl_matrix *x, double gamma,
                                       const gsl_vector *delta, double eps,
                                       gsl_matrix *out, lse_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LSEGRAPH_MODELS_LAYERNORM_H */
