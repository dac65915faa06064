/* Signals and the test hook around the outputs of lsefit and energyviz:
 * tool_outputs.h. The library never installs a signal handler; it keeps
 * the list of temporary files and removes them on request, async-signal-
 * safely (lse_file_discard_temporaries). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

#include "tool_outputs.h"

static volatile sig_atomic_t held; /* a signal that arrived during a commit */

static void die_of(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    raise(sig); /* blocked inside the handler: delivered when it returns */
}

static void on_signal(int sig)
{
    if (!lse_file_discard_temporaries()) { /* a commit is renaming */
        held = sig;
        return;
    }
    die_of(sig);
}

void tool_outputs_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART; /* a held signal must not fail a write */
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof sigs / sizeof sigs[0]; j++)
            sigaddset(&sa.sa_mask, sigs[j]);
        sigaction(sigs[i], &sa, NULL);
    }
}

void tool_outputs_test_hook(void)
{
    const char *v = getenv("LSEGRAPH_TEST_SIGNAL_BEFORE_COMMIT");
    if (v == NULL || v[0] == '\0')
        return;
    char *end = NULL;
    const long sig = strtol(v, &end, 10);
    if (*end == '\0' && sig > 0 && sig < 65)
        raise((int)sig);
}

void tool_outputs_after_commit(void)
{
    const int sig = held;
    if (sig != 0) {
        lse_file_discard_temporaries();
        die_of(sig);
    }
}
