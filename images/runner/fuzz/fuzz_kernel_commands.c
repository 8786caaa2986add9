/*
 * libFuzzer target: what kernel mode reads on stdin from the host: its header (read_header with the
 * kernel's words: display, grace, preload, lock, cap) and then its commands (kernel.c's command:
 * `cell <id> <count>` with the cell's own lines code/tools/module up to `run`, `interrupt <id>`,
 * `restart`, `R` tool replies) until stdin ends.
 *
 * Input: the whole of stdin from "HERMES/2\n" on. No kernel is forked (k.pid stays 0, so the
 * domain's kill is a no-op): a parsed cell is checked and dropped, as if it ran and ended. Each
 * input ends as the supervisor would: an 'E' and exit 126, or 'G' at stdin's end (or `restart`, or
 * an interrupt of a cell waiting for the lock), with well-formed frames (fuzz_common.h).
 */
#include "fuzz_common.h"

static void fz_kernel(void) {
  char line[LINE_MAX_BYTES];
  read_line(line);
  if (strcmp(line, PROTOCOL_MAGIC) != 0) fail(PROTOCOL_ERROR, "no magic");
  struct request *r = &k.req;
  kernel_request(r);
  read_header(r, line);
  if (r->display_bundle == 0 || r->display_bundle > KERNEL_RECORD_BYTES_MAX || r->grace_ms == 0 || r->grace_ms > KERNEL_GRACE_MAX_MS) abort();
  /* As kernel_main does next: only framed mode goes on. */
  if (!framed) fail(PROTOCOL_ERROR, "needs framed mode");
  k.phase = IDLE;
  for (;;) {
    command();
    if (k.phase == LOCKWAIT) {
      if (k.code_len > 0 && k.code == NULL) abort();
      if (!valid_id(k.id)) abort();
      fz_free(k.code); /* the supervisor's allocator (the harness's own free is the real one) */
      k.code = NULL;
      tools_on = 0;
      k.phase = IDLE;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_begin(data, size);
  fz_armed = 1;
  if (setjmp(fz_jmp) == 0) fz_kernel();
  fz_armed = 0;
  fz_end_process();
  return 0;
}
