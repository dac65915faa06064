/* mclust's model names, layouts and parameter counts: covmodel.h. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include <lsegraph/core.h>

static const char *const names[] = {NULL,  "EII", "VII", "EEI", "VEI",
                                    "EVI", "VVI", "EEE", "VEE", "EVE",
                                    "VVE", "EEV", "VEV", "EVV", "VVV"};
#define N_NAMES (sizeof names / sizeof names[0])

const char *lse_cov_model_name(lse_cov_model m)
{
    return (unsigned)m < N_NAMES ? names[m] : NULL;
}

lse_status lse_cov_model_parse(const char *name, lse_cov_model *out)
{
    if (name == NULL || out == NULL)
        return LSE_EFAULT;
    static const struct {
        const char *alias;
        lse_cov_model m;
    } aliases[] = {{"full", LSE_COV_VVV},
                   {"diag", LSE_COV_VVI},
                   {"spherical", LSE_COV_VII},
                   {"tied", LSE_COV_EEE}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].m;
            return LSE_OK;
        }
    for (size_t i = 1; i < N_NAMES; i++)
        if (strcasecmp(name, names[i]) == 0) {
            *out = (lse_cov_model)i;
            return LSE_OK;
        }
    return LSE_EINVAL;
}

lse_cov_type lse_cov_model_layout(lse_cov_model m)
{
    switch (m) {
    case LSE_COV_EII:
    case LSE_COV_VII:
        return LSE_COV_SPHERICAL;
    case LSE_COV_EEI:
    case LSE_COV_VEI:
    case LSE_COV_EVI:
    case LSE_COV_VVI:
        return LSE_COV_DIAG;
    case LSE_COV_EEE:
        return LSE_COV_TIED;
    case LSE_COV_VEE:
    case LSE_COV_EVE:
    case LSE_COV_VVE:
    case LSE_COV_EEV:
    case LSE_COV_VEV:
    case LSE_COV_EVV:
    case LSE_COV_VVV:
        return LSE_COV_FULL;
    case LSE_COV_MODEL_NONE:
    default:
        return (lse_cov_type)-1;
    }
}

lse_gaussian_config lse_cov_model_config(lse_cov_model m)
{
    return (lse_gaussian_config){.cov = lse_cov_model_layout(m), .model = m};
}

size_t lse_cov_model_n_cov_params(lse_cov_model m, size_t k, size_t d)
{
    const size_t tri = d * (d + 1) / 2, rot = d * (d - 1) / 2;
    switch (m) {
    case LSE_COV_EII:
        return 1;
    case LSE_COV_VII:
        return k;
    case LSE_COV_EEI:
        return d;
    case LSE_COV_VEI:
        return k + (d - 1);
    case LSE_COV_EVI:
        return 1 + k * (d - 1);
    case LSE_COV_VVI:
        return k * d;
    case LSE_COV_EEE:
        return tri;
    case LSE_COV_VEE:
        return k + tri - 1;
    case LSE_COV_EVE:
        return 1 + k * (d - 1) + rot;
    case LSE_COV_VVE:
        return k + k * (d - 1) + rot;
    case LSE_COV_EEV:
        return 1 + (d - 1) + k * rot;
    case LSE_COV_VEV:
        return k + (d - 1) + k * rot;
    case LSE_COV_EVV:
        return 1 + k * (tri - 1);
    case LSE_COV_VVV:
        return k * tri;
    case LSE_COV_MODEL_NONE:
    default:
        return 0;
    }
}

size_t lse_cov_model_n_params(lse_cov_model m, size_t k, size_t d)
{
    if (lse_cov_model_name(m) == NULL || k == 0)
        return 0;
    return lse_cov_model_n_cov_params(m, k, d) + k * d + (k - 1);
}

double lse_cov_model_bic(lse_cov_model m, size_t k, size_t d, size_t n,
                         double loglik)
{
    return 2.0 * loglik -
           (double)lse_cov_model_n_params(m, k, d) * log((double)n);
}
