#include <math.h>

#include "graph-private.h"

static double max_strided(const double *x, size_t n, size_t stride)
{
    double m = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i * stride];
        if (v > m || isnan(v))
            m = v;
        if (isnan(m))
            return m;
    }
    return m;
}

double lse_logsumexp(const double *x, size_t n, size_t stride, double beta)
{
    const double m = max_strided(x, n, stride); /* -INFINITY when n == 0 */
    if (!isfinite(m))                           /* log 0, or +inf/NaN */
        return m;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += exp(beta * (x[i * stride] - m));
    return m + log(sum) / beta;
}

lse_status lse_softmax(const double *x, size_t n, size_t stride, double beta,
                       double *p, double *lse)
{
    if (n > 0 && (x == NULL || p == NULL))
        return LSE_EFAULT;
    if (!(beta > 0.0) || !isfinite(beta))
        return LSE_EDOM;
    const double m = max_strided(x, n, stride);
    if (isnan(m) || m == INFINITY)
        return LSE_ENONFINITE;
    if (m == -INFINITY) { /* empty or fully masked: contributes nothing */
        for (size_t i = 0; i < n; i++)
            p[i * stride] = 0.0;
        if (lse != NULL)
            *lse = -INFINITY;
        return LSE_OK;
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = exp(beta * (x[i * stride] - m));
        p[i * stride] = e;
        sum += e;
    }
    const double inv = 1.0 / sum;
    for (size_t i = 0; i < n; i++)
        p[i * stride] *= inv;
    if (lse != NULL)
        *lse = m + log(sum) / beta;
    return LSE_OK;
}
