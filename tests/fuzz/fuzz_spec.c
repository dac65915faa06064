/* libFuzzer harness for the DOT model-spec reader (lib/viz/spec.c and
 * libcgraph).
 *
 * The input (up to its first NUL byte) is the DOT text given to
 * lse_viz_read_spec(). Besides crashes, leaks, undefined behaviour (the
 * sanitizers) and out-of-memory (libFuzzer's -rss_limit_mb), it traps when
 *  - the status and the graph disagree (a graph exactly on LSE_OK), or a
 *    failure leaves no "lse_viz_read_spec: " message in err;
 *  - a graph that was built cannot be evaluated without a crash: when its
 *    nodes hold at most 2^20 values in all, its energy and gradient are
 *    computed (any status is fine, a finite energy on LSE_OK).
 * replay.c runs the same entry over the corpus in ordinary builds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>
#include <lsegraph/viz.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(cond)                                                          \
    do {                                                                       \
        if (!(cond))                                                           \
            __builtin_trap();                                                  \
    } while (0)

/* Values held by the graph's nodes, saturating at SIZE_MAX. */
static size_t graph_values(const lse_graph *g)
{
    size_t total = 0;
    for (size_t i = 0; i < lse_graph_n_nodes(g); i++) {
        const lse_node *n = lse_graph_node(g, i);
        const size_t r = lse_node_rows(n), d = lse_node_dim(n);
        if (d != 0 && r > (SIZE_MAX - total) / d)
            return SIZE_MAX;
        total += r * d;
    }
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0; /* long texts add no new structure, only time */
    char *text = malloc(size + 1);
    require(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';

    lse_error err = {0};
    lse_graph *g = NULL;
    const lse_status st = lse_viz_read_spec("fuzz.dot", text, &g, &err);
    free(text);
    if (st != LSE_OK) {
        require(g == NULL && err.status == st);
        require(strncmp(err.message, "lse_viz_read_spec: ",
                        strlen("lse_viz_read_spec: ")) == 0);
        return 0;
    }
    require(g != NULL);
    if (graph_values(g) <= (1u << 20)) {
        double e = NAN;
        if (lse_graph_energy(g, &e) == LSE_OK)
            require(!isnan(e));
        (void)lse_graph_gradient(g, &e);
    }
    lse_graph_free(g);
    return 0;
}
