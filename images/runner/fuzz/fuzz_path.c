/*
 * libFuzzer target: the supervisor's path checks, with the fuzzer's bytes as the path and the rest
 * of the header fixed (a structure-aware view of fuzz_header: every mutation lands in the path).
 *
 * The first byte picks what the path is for, the rest is the path (any bytes, NULs included):
 *   0 read, 1 write, 2 list, 3 remove   a session's file operation: the header's NUL check, then parent_of
 *                                       (absolute, under /workspace or /tmp, no '..', no symlink
 *                                       followed) and op_read / op_write / op_list / op_remove
 *   4 file, 5 module                    a file the header carries: open_in (relative, no '..',
 *                                       created without following a symlink)
 *   6 collect                           "<pattern>\0<a/relative/path>": add_pattern on the pattern
 *                                       (the header's NUL check first), then matches() / match_from against
 *                                       the path's names (as collect_in has them: at most 32)
 * The bits above pick offsets, modes and limits. Besides the sanitizers and fuzz_common.h's checks
 * (nothing outside the roots changed, well-formed frames), what the checks promise is asserted: an
 * operation that succeeded was given a path with no '..' name, and under a root.
 */
#include "fuzz_common.h"

static const char FZ_KEY[] = "00112233445566778899aabbccddeeff";

/* The '/'-separated names of p[0..n) (NULs are bytes like others here). */
static int fz_has_dotdot(const char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && p[j] != '/') j++;
    if (j - i == 2 && p[i] == '.' && p[i + 1] == '.') return 1;
    i = j + 1;
  }
  return 0;
}

static int fz_under(const char *p, size_t n, const char *root) {
  size_t rl = strlen(root);
  return n >= rl && memcmp(p, root, rl) == 0 && (n == rl || p[rl] == '/');
}

static void fz_violation(const char *what, const char *p, size_t n) {
  fprintf(stderr, "\nharness: %s succeeded for the path '", what);
  fwrite(p, 1, n, stderr);
  fprintf(stderr, "' (%zu bytes)\n", n);
  abort();
}

static void fz_run_header(const uint8_t *in, size_t len) {
  fz_begin(in, len);
  char arg0[] = "hermes-run";
  char *argv[] = {arg0, NULL};
  fz_armed = 1;
  if (setjmp(fz_jmp) == 0) hermes_run_main(1, argv);
  fz_armed = 0;
}

static void fz_collect(const char *data, size_t size) {
  const char *zero = memchr(data, 0, size);
  size_t plen = zero != NULL ? (size_t)(zero - data) : size;
  const char *path = zero != NULL ? zero + 1 : "";
  size_t path_len = zero != NULL ? size - plen - 1 : 0;
  fz_begin(NULL, 0);
  fz_armed = 1;
  if (setjmp(fz_jmp) == 0) {
    /* The header's `collect` line: a length 1..PATH_MAX-1 of bytes without a NUL (the NUL ends it here). */
    if (plen > 0 && plen < PATH_MAX) {
      char *text = fz_malloc(plen + 1);
      memcpy(text, data, plen);
      text[plen] = 0;
      add_pattern(text);
      /* A walked entry's names: non-empty, no '/', no NUL; at most COLLECT_MAX_DEPTH of them. */
      char names[PATH_MAX + 1];
      size_t n = path_len < PATH_MAX ? path_len : PATH_MAX;
      memcpy(names, path, n);
      names[n] = 0;
      char *seg[COLLECT_MAX_DEPTH + 1], *save = NULL;
      int ns = 0;
      for (char *s = strtok_r(names, "/", &save); s != NULL && ns < COLLECT_MAX_DEPTH; s = strtok_r(NULL, "/", &save)) seg[ns++] = s;
      (void)matches(seg, ns);
    }
  }
  fz_armed = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned pick = data[0];
  const char *path = (const char *)data + 1;
  size_t path_len = size - 1;
  unsigned what = (pick & 7) % 7;
  if (what == 6) {
    fz_collect(path, path_len);
    fz_end_process();
    return 0;
  }
  /* The header the host would send, with this path. */
  static char head[512];
  static const char *const modes[] = {"420", "384", "0", "511", "32768", "33188"}; /* 0644 0600 0 0777 KEEP KEEP|0644 */
  static const char *const offsets[] = {"0", "3", "6", "18446744073709551615"};
  static const char *const limits[] = {"100", "0", "1", "18446744073709551615"};
  int n = 0;
  switch (what) {
    case 0: n = snprintf(head, sizeof head, "HERMES/2\nkey %s\nread %zu %s %s\n", FZ_KEY, path_len, offsets[(pick >> 3) & 3], limits[(pick >> 5) & 3]); break;
    case 1: n = snprintf(head, sizeof head, "HERMES/2\nkey %s\nwrite %zu 5 %s\n", FZ_KEY, path_len, modes[(pick >> 3) % 6]); break;
    case 2: n = snprintf(head, sizeof head, "HERMES/2\nkey %s\nlist %zu\n", FZ_KEY, path_len); break;
    case 3: n = snprintf(head, sizeof head, "HERMES/2\nkey %s\nremove %zu\n", FZ_KEY, path_len); break;
    case 4: n = snprintf(head, sizeof head, "HERMES/2\nkey %s\nfile %zu 5\n", FZ_KEY, path_len); break;
    case 5: n = snprintf(head, sizeof head, "HERMES/2\nkey %s\ntools 1 10 10\nmodule %zu 5\n", FZ_KEY, path_len); break;
  }
  const char *content = what == 1 || what >= 4 ? "hello" : "";
  size_t clen = strlen(content);
  uint8_t *in = malloc((size_t)n + path_len + clen + 4);
  memcpy(in, head, (size_t)n);
  memcpy(in + n, path, path_len);
  memcpy(in + n + path_len, content, clen);
  memcpy(in + n + path_len + clen, "run\n", 4);
  fz_run_header(in, (size_t)n + path_len + clen + 4);

  /* What the supervisor answered: the first frame ('k', 'f' or 'n' for a success; 'r' or 'E' not). */
  size_t at = 0, len;
  char type = 0;
  const unsigned char *p = fz_next_frame(&at, &type, &len);
  int ok = what <= 3 ? p != NULL && (type == 'k' || type == 'f' || type == 'n') : fz_exit_code == -1;
  if (ok) {
    if (memchr(path, 0, path_len) != NULL) fz_violation("a path with a NUL byte", path, path_len);
    if (fz_has_dotdot(path, path_len)) fz_violation("a path with '..'", path, path_len);
    if (what <= 3 && !fz_under(path, path_len, "/workspace") && !fz_under(path, path_len, "/tmp")) fz_violation("a path outside /workspace and /tmp", path, path_len);
    if (what >= 4 && (path_len == 0 || path[0] == '/')) fz_violation("an empty or absolute file path", path, path_len);
  }
  free(in);
  fz_end_process();
  return 0;
}
