/*
 * libFuzzer target: the supervisor's header parser (main up to `run`: header.c's read_line,
 * parse_size, read_blob, hexval and its handlers of the key/cap/lang/code/file/arg/lock/tools/stdin/
 * module/leftovers/collect/limits lines, open_in for `file` and `module` paths, add_pattern for `collect`, and a
 * session's file operation (read/write/list/remove: parent_of, op_*, take_lock)).
 *
 * The input is the whole of stdin, as the host writes it ("HERMES/2\n" + header lines + blobs). See
 * fuzz_common.h for how one input is one emulated supervisor process, and what is checked after it:
 * stdout is well-formed frames, nothing outside the sandbox's roots changed.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_begin(data, size);
  char arg0[] = "hermes-run";
  char *argv[] = {arg0, NULL};
  fz_armed = 1;
  if (setjmp(fz_jmp) == 0) hermes_run_main(1, argv);
  fz_armed = 0;
  fz_end_process();
  return 0;
}
