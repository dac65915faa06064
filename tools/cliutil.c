/* Helpers shared by lsefit and energyviz (cliutil.h). */
#include "cliutil.h"

#include <lsegraph/lsegraph.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_char(char a, char b)
{
    if (a == '_')
        a = '-';
    if (b == '_')
        b = '-';
    return a == b;
}

static size_t min3(size_t a, size_t b, size_t c)
{
    const size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t cli_edit_distance(const char *a, const char *b)
{
    const size_t n = strlen(a), m = strlen(b);
    if (n > 256 || m > 256) /* not a typo of an option name */
        return (size_t)-1;
    /* three rows of the dynamic programme: i-2, i-1, i */
    size_t rows[3][257];
    for (size_t j = 0; j <= m; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *cur = rows[i % 3];
        const size_t *prev = rows[(i - 1) % 3], *prev2 = rows[(i - 2) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            const size_t cost = same_char(a[i - 1], b[j - 1]) ? 0 : 1;
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && same_char(a[i - 1], b[j - 2]) &&
                same_char(a[i - 2], b[j - 1]) && prev2[j - 2] + 1 < cur[j])
                cur[j] = prev2[j - 2] + 1;
        }
    }
    return rows[n % 3][m];
}

const char *cli_suggest(const char *word, const char *const *candidates,
                        size_t n)
{
    const size_t len = strlen(word);
    const size_t allowed = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    const char *best = NULL;
    size_t best_d = allowed + 1;
    for (size_t i = 0; i < n; i++) {
        const size_t d = cli_edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}

int cli_close_stdout(const char *prog, int quiet_error)
{
    int bad = ferror(stdout) != 0;
    int err = 0;
    errno = 0;
    if (fflush(stdout) != 0) {
        bad = 1;
        err = errno;
    }
    errno = 0;
    /* a closed stdout (>&-) with nothing to write is not an error */
    if (fclose(stdout) != 0 && (bad || errno != EBADF)) {
        if (!bad)
            err = errno;
        bad = 1;
    }
    if (!bad)
        return 0;
    if (!quiet_error)
        fprintf(stderr,
                "%s: cannot write to standard output: %s (check the disk, "
                "file or pipe that standard output goes to)\n",
                prog, err != 0 ? strerror(err) : "write error");
    return 1;
}

const char *cli_strip_function(const char *msg)
{
    for (;;) {
        if (strncmp(msg, "lse_", 4) != 0)
            return msg;
        const char *q = msg;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        if (q[0] != ':' || q[1] != ' ')
            return msg;
        msg = q + 2;
    }
}

void cli_clean_message(char *msg)
{
    for (char *c = strstr(msg, "lse_"); c != NULL; c = strstr(c, "lse_")) {
        const char *rest = cli_strip_function(c);
        if (rest == c || (c != msg && (isalnum((unsigned char)c[-1]) ||
                                       c[-1] == '_'))) {
            c += 4;
            continue;
        }
        memmove(c, rest, strlen(rest) + 1);
    }
    /* the spelling of the library's own messages */
    lse_message_spell(msg);
}
