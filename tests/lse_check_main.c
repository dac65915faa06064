#include <stdlib.h>

#include "lse_check.h"

int main(void)
{
    SRunner *runner = srunner_create(lse_test_suite());
    srunner_set_tap(runner, "-");
    srunner_run_all(runner, CK_SILENT);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
