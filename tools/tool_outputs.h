/* Signals and the test hook around the outputs of lsefit and energyviz
 * (tools/tool_outputs.c; docs/io.md, "Outputs"). Private to tools/. */
#ifndef TOOL_OUTPUTS_H
#define TOOL_OUTPUTS_H

/** Install the handler for SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGXFSZ
 *  (a signal that was ignored when the program started stays ignored): it
 *  removes every pending temporary output file
 *  (lse_file_discard_temporaries) and then dies of the signal with its
 *  default action. A signal that arrives while a commit renames is held
 *  until tool_outputs_after_commit(). */
void tool_outputs_signals(void);

/** Before a commit: when the environment variable
 *  LSEGRAPH_TEST_SIGNAL_BEFORE_COMMIT holds a signal number (for the tests
 *  only), raise that signal, as if the user had pressed Ctrl-C after every
 *  output was written to its temporary file. */
void tool_outputs_test_hook(void);

/** After a commit: die of a signal held during it, if any. */
void tool_outputs_after_commit(void);

#endif /* TOOL_OUTPUTS_H */
