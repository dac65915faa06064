#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "graph-private.h"

const char *lse_strerror(lse_status status)
{
    switch (status) {
    case LSE_CONTINUE:
        return "not converged yet";
    case LSE_OK:
        return "success";
    case LSE_EFAULT:
        return "required pointer is NULL";
    case LSE_EINVAL:
        return "invalid argument";
    case LSE_EDIM:
        return "mismatched dimensions";
    case LSE_ERANGE:
        return "index or view out of range";
    case LSE_EDOM:
        return "value outside its domain";
    case LSE_ENONFINITE:
        return "non-finite value";
    case LSE_ENOMEM:
        return "out of memory";
    case LSE_ENUMERIC:
        return "numerical failure";
    case LSE_ENOCONV:
        return "did not converge";
    case LSE_EINCREASE:
        return "energy increased";
    case LSE_EIO:
        return "input/output error";
    case LSE_EPARSE:
        return "malformed input";
    case LSE_ENOTFOUND:
        return "not found";
    case LSE_EEXIST:
        return "already exists";
    case LSE_EGSL:
        return "GSL error";
    case LSE_EINTERNAL:
        return "internal error (a bug in lsegraph)";
    case LSE_ENOTSUP:
        return "operation not supported";
    }
    return "unknown status";
}

lse_status lse_status_from_gsl(int gsl_errno)
{
    switch (gsl_errno) {
    case GSL_SUCCESS:
        return LSE_OK;
    case GSL_ENOMEM:
        return LSE_ENOMEM;
    case GSL_EBADLEN:
    case GSL_ENOTSQR:
        return LSE_EDIM;
    case GSL_EDOM:
    case GSL_ESING:
    case GSL_EZERODIV:
    case GSL_EOVRFLW:
        return LSE_ENUMERIC;
    case GSL_EINVAL:
        return LSE_EINVAL;
    case GSL_EMAXITER:
        return LSE_ENOCONV;
    default:
        return LSE_EGSL;
    }
}

/* GSL's current handler (err/error.c; exported by libgsl though no header
 * declares it), weak: NULL where it is not exported. Reading it first
 * leaves the common case (quiet already, or the program's own handler)
 * without a store: lse_gsl_quiet runs in every EM step on every thread,
 * and the two stores of the exchange below made the variable's cache
 * line move between the cores (0.5 % of a two-thread fit's samples). */
extern gsl_error_handler_t *gsl_error_handler __attribute__((weak));

void lse_gsl_quiet(void)
{
    if (&gsl_error_handler != NULL &&
        __atomic_load_n(&gsl_error_handler, __ATOMIC_RELAXED) != NULL)
        return; /* off, or the program's own handler: keep it */
    gsl_error_handler_t *previous = gsl_set_error_handler_off();
    if (previous != NULL) /* the program chose its own handler: keep it */
        gsl_set_error_handler(previous);
}

static lse_log_fn log_fn;
static void *log_user;

/* printf's %g spells non-finite values inf, -inf, nan and -nan; every
 * message of the library spells them as its CSV files do (docs/io.md):
 * Inf, -Inf and NaN. Only a whole word that a number format made is
 * rewritten: after a space or one of "=([,", and before
 * the end, a space or one of ",;:)]". An input cell quoted in a message
 * ('inf') stays as the user typed it. */
static void spell_nonfinite(char *msg)
{
    static const char *const from[] = {"-nan", "-inf", "nan", "inf"};
    static const char *const to[] = {"NaN", "-Inf", "NaN", "Inf"};
    for (char *p = msg; *p != '\0'; p++) {
        if (p == msg || strchr(" =([,", p[-1]) == NULL)
            continue;
        for (size_t w = 0; w < sizeof from / sizeof from[0]; w++) {
            const size_t n = strlen(from[w]), m = strlen(to[w]);
            if (strncmp(p, from[w], n) != 0 ||
                (p[n] != '\0' && strchr(" ,;:)]", p[n]) == NULL))
                continue;
            memcpy(p, to[w], m); /* m <= n */
            memmove(p + m, p + n, strlen(p + n) + 1);
            break;
        }
    }
}

void lse_message_spell(char *msg)
{
    if (msg != NULL)
        spell_nonfinite(msg);
}

void lse_set_log_handler(lse_log_fn fn, void *user)
{
    log_fn = fn;
    log_user = user;
}

void lse_get_log_handler(lse_log_fn *fn, void **user)
{
    if (fn != NULL)
        *fn = log_fn;
    if (user != NULL)
        *user = log_user;
}

void lse_log(lse_log_level level, const char *fmt, ...)
{
    if (log_fn == NULL)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    spell_nonfinite(buf);
    log_fn(level, buf, log_user);
}

lse_status lse_graph_fail(lse_graph *g, lse_status status, const char *func,
                          const char *fmt, ...)
{
    if (g == NULL)
        return status;
    const int n = snprintf(g->errmsg, sizeof g->errmsg, "%s: ", func);
    if (n > 0 && (size_t)n < sizeof g->errmsg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->errmsg + n, sizeof g->errmsg - (size_t)n, fmt, ap);
        va_end(ap);
        spell_nonfinite(g->errmsg + n);
    }
    return status;
}

lse_status lse_error_set(lse_error *err, lse_status status, const char *func,
                         const char *fmt, ...)
{
    if (err == NULL)
        return status;
    err->status = status;
    const int n = snprintf(err->message, sizeof err->message, "%s: ", func);
    if (n > 0 && (size_t)n < sizeof err->message) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message + n, sizeof err->message - (size_t)n, fmt, ap);
        va_end(ap);
        spell_nonfinite(err->message + n);
    }
    return status;
}
