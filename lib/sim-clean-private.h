#ifndef LSEGRAPH_SIM_CLEAN_PRIVATE_H
#define LSEGRAPH_SIM_CLEAN_PRIVATE_H

#include <lsegraph/sim.h>

/* Optional, never installed: did the last eval with this workspace check
 * its own scores? 1 when every score it wrote is neither NaN nor
 * +INFINITY, so that an LSE term (lib/term.c run_chunk) need not scan S
 * again; 0 when it does not know (the term scans S, as without this). */
typedef int (*lse_sim_clean_fn)(const lse_sim_args *a);

/* The clean query of type, or NULL (lib/sim/gaussian.c). */
lse_sim_clean_fn lse_sim_clean_find(const lse_sim_type *type);

#endif /* LSEGRAPH_SIM_CLEAN_PRIVATE_H */
