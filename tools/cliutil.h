/* Helpers shared by the command-line tools lsefit and energyviz (not
 * installed, not part of the library): "did you mean" suggestions, the
 * final check of standard output, and library messages without the
 * library's function names. */
#ifndef CLIUTIL_H
#define CLIUTIL_H

#include <stddef.h>

/** The edit distance of @p a and @p b: insertions, deletions,
 *  substitutions and transpositions of neighbours each cost 1 (optimal
 *  string alignment); '-' and '_' count as the same character, so
 *  "n_init" is at distance 0 from "n-init". */
size_t cli_edit_distance(const char *a, const char *b);

/** The candidate nearest to @p word if it is near enough to be a typo or
 *  another tool's spelling (distance at most 1 for words of up to 3
 *  characters, 2 up to 6, else 3), else NULL. Ties go to the first. */
const char *cli_suggest(const char *word, const char *const *candidates,
                        size_t n);

/** Flush and close standard output; on a write error (a full disk, a
 *  closed pipe, /dev/full) print "PROG: cannot write to standard output:
 *  REASON" on stderr and return 1, else 0. Call once, at the end of
 *  main(), on every path that may have written to stdout; @p quiet_error
 *  skips the message (an error was already reported). */
int cli_close_stdout(const char *prog, int quiet_error);

/** @p msg without its leading "lse_function: " prefixes: the user sees
 *  what went wrong, not where in the library. */
const char *cli_strip_function(const char *msg);

/** Make a message (one line, in place) fit for the user: every
 *  "lse_function: " inside it goes (the library nests its messages), and
 *  non-finite numbers that printf spelled inf, -inf, nan or -nan read Inf,
 *  -Inf and NaN, as in the CSV files (docs/io.md) and the library's own
 *  messages; quoted input ('inf') stays as typed. */
void cli_clean_message(char *msg);

#endif /* CLIUTIL_H */
