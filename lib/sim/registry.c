#include <string.h>

#include <lsegraph/core.h>

/* The built-in similarity types, by their stable names. */

static const lse_sim_type *builtin(size_t i)
{
    switch (i) {
    case 0: return lse_sim_dot;
    case 1: return lse_sim_scaled_dot;
    case 2: return lse_sim_cosine;
    case 3: return lse_sim_bilinear;
    case 4: return lse_sim_nonlinear;
    case 5: return lse_sim_gaussian;
    case 6: return lse_sim_lingauss;
    case 7: return lse_sim_dar;
    case 8: return lse_sim_neg_dist;
    case 9: return lse_sim_gauss_kernel;
    case 10: return lse_sim_inv_dist;
    case 11: return lse_sim_idw;
    case 12: return lse_sim_daam;
    case 13: return lse_sim_pairwise;
    default: return NULL;
    }
}

size_t lse_sim_count(void) { return 14; }

const lse_sim_type *lse_sim_get(size_t i) { return builtin(i); }

const lse_sim_type *lse_sim_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < lse_sim_count(); i++)
        if (strcmp(builtin(i)->name, name) == 0)
            return builtin(i);
    return NULL;
}
