/* The light lsefit hands the commands that need MPI or PLplot to
 * lsefit-full (docs/design-notes.md "lsefit and lsefit-full").
 *
 * lsefit is linked without libmpi and libplplot (and the ~25 libraries
 * they pull in), which saves ~2.5 ms of dynamic loading per process; the
 * few commands that need them (--mpi, --shards, gmm|slds plot) reach
 * lsefit_exec_full before they write anything, and it replaces the
 * process by lsefit-full with the same command line. Built with
 * LSEFIT_FULL_PATH only when meson builds lsefit-full; otherwise (and in
 * lsefit-full itself) it returns at once and the caller prints its "built
 * without" message. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lsefit_common.h"

static char **saved_argv; /* main's argv before getopt_long permutes it */

void lsefit_save_argv(int argc, char **argv)
{
    saved_argv = malloc(((size_t)argc + 1) * sizeof *saved_argv);
    if (saved_argv == NULL)
        return; /* then lsefit_exec_full returns and the message follows */
    memcpy(saved_argv, argv, (size_t)argc * sizeof *argv);
    saved_argv[argc] = NULL;
}

#ifdef LSEFIT_FULL_PATH
/* lsefit-full in the directory of the running executable (the build tree,
 * or a relocated install); *path is empty when that is unknown. */
static void next_to_self(char *path, size_t size)
{
    static const char name[] = "lsefit-full";
    path[0] = '\0';
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL || (size_t)(slash - self) + sizeof name + 1 > size)
        return;
    slash[1] = '\0';
    strcpy(path, self);
    strcat(path, name);
}
#endif

void lsefit_exec_full(void)
{
#ifdef LSEFIT_FULL_PATH
    if (saved_argv == NULL)
        return;
    char here[PATH_MAX];
    next_to_self(here, sizeof here);
    if (here[0] != '\0' && access(here, X_OK) == 0)
        execv(here, saved_argv);
    if (access(LSEFIT_FULL_PATH, X_OK) == 0)
        execv(LSEFIT_FULL_PATH, saved_argv);
    /* neither exists or runs: the caller says what is missing */
#endif
}
