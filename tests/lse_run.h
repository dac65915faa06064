#ifndef LSE_RUN_H
#define LSE_RUN_H
/* Running the lsefit the test was given ($LSEFIT) from a Check test. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* lsefit with args (shell words), stdout and stderr into the file out;
 * its exit status returned (the test fails when it did not exit) */
static inline int lse_run_lsefit(const char *args, const char *out)
{
    const char *bin = getenv("LSEFIT");
    ck_assert_msg(bin != NULL, "LSEFIT is not set");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2>&1", bin, args, out);
    const int st = system(cmd);
    ck_assert(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

#endif
