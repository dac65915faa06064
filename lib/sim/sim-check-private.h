#ifndef LSEGRAPH_SIM_CHECK_PRIVATE_H
#define LSEGRAPH_SIM_CHECK_PRIVATE_H

/* Shape checks shared by the built-in similarities (never installed). */

#include <stdio.h>

#include <lsegraph/core.h>

/* Children and parents are vectors of one dimension d > 0, no context (dot,
 * scaled-dot and the distance family): LSE_OK, or LSE_EDIM with the message
 * "name: ..." in msg. */
static inline lse_status lse_sim_check_vectors(const char *name,
                                               const lse_sim_shape *shape,
                                               char *msg, size_t msg_len)
{
    if (shape->d_child != shape->d_parent) {
        snprintf(msg, msg_len,
                 "%s: d_child = %zu, d_parent = %zu: must be equal", name,
                 shape->d_child, shape->d_parent);
        return LSE_EDIM;
    }
    if (shape->d_child == 0) {
        snprintf(msg, msg_len, "%s: vectors have dimension 0", name);
        return LSE_EDIM;
    }
    if (shape->d_context != 0) {
        snprintf(msg, msg_len, "%s: takes no context (d_context = %zu)", name,
                 shape->d_context);
        return LSE_EDIM;
    }
    return LSE_OK;
}

#endif /* LSEGRAPH_SIM_CHECK_PRIVATE_H */
