/* The fused block passes of the similarity types that have one
 * (sim-fused-private.h), looked up by type so that no similarity's file
 * needs to know another's. */
#include "lingauss-fused-private.h"
#include "sim-fused-private.h"

lse_sim_fused_fn lse_sim_fused_find(const lse_sim_type *type)
{
    if (type == lse_sim_gaussian)
        return lse_gaussian_fused;
    if (type == lse_sim_lingauss)
        return lse_lingauss_fused;
    return NULL;
}
