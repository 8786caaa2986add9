/*
 * libFuzzer target: kernel.c's parser of a cell's records pipe (records_feed, records_end), the
 * bytes the kernel's domain writes: <kind R|D|X><4-byte big-endian length><JSON>, each forwarded
 * whole ('M' "<kind> <bytes>" + exactly that many bytes of 'm') or skipped unread ('N' "<kind>
 * <bytes> <reason>"), and garbage ending the cell's records ('N' "? <bytes> malformed").
 *
 * Input: <bundle byte> <count byte> <total byte> <chunk byte> <the pipe's bytes>
 *   bundle, total   the `display` line's bounds: 1 + byte * 3 bytes
 *   count           records per cell: 1 + byte % 16
 *   chunk           how the bytes arrive: pieces of 1 + byte bytes (as the pipe's reads cut them)
 * Checked against a reference model that parses the whole input at once: the same frames, in order,
 * whatever the chunking; every 'M' carries exactly the record's bytes; the bounds hold; nothing is
 * left allocated.
 */
#include "fuzz_common.h"

static char fz_expect[1 << 20];
static size_t fz_expect_len;

static void fz_expect_frame(char type, const void *p, size_t n) {
  if (fz_expect_len + FRAME_HEAD + n > sizeof fz_expect) return;
  unsigned char *h = (unsigned char *)fz_expect + fz_expect_len;
  memcpy(h, key, KEY_BYTES);
  h[KEY_BYTES] = (unsigned char)type;
  h[KEY_BYTES + 1] = (unsigned char)(n >> 24), h[KEY_BYTES + 2] = (unsigned char)(n >> 16), h[KEY_BYTES + 3] = (unsigned char)(n >> 8), h[KEY_BYTES + 4] = (unsigned char)n;
  memcpy(h + FRAME_HEAD, p, n);
  fz_expect_len += FRAME_HEAD + n;
}

static void fz_expect_text(char type, const char *fmt, ...) {
  char text[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  fz_expect_frame(type, text, (size_t)n);
}

/* The model: the whole input parsed at once. */
static void fz_model(const uint8_t *d, size_t n, unsigned long long bundle, unsigned long long count, unsigned long long total) {
  size_t at = 0;
  unsigned long long fwd = 0, bytes = 0;
  while (at < n) {
    if (n - at < 5) return fz_expect_text('N', "? %zu malformed", n - at);
    char kind = (char)d[at];
    size_t len = (size_t)d[at + 1] << 24 | (size_t)d[at + 2] << 16 | (size_t)d[at + 3] << 8 | d[at + 4];
    if (kind == 0 || strchr("RDX", kind) == NULL) return fz_expect_text('N', "? %zu malformed", n - at);
    const char *skip = len > bundle ? "too-large" : fwd >= count ? "count" : bytes + len > total ? "total" : NULL;
    if (skip != NULL) fz_expect_text('N', "%c %zu %s", kind, len, skip);
    if (n - at - 5 < len) {
      if (skip == NULL) fz_expect_text('N', "%c %zu malformed", kind, n - at - 5);
      return;
    }
    if (skip == NULL) {
      fz_expect_text('M', "%c %zu", kind, len);
      for (size_t o = 0; o < len; o += CHUNK) fz_expect_frame('m', d + at + 5 + o, len - o < CHUNK ? len - o : CHUNK);
      fwd++, bytes += len;
    }
    at += 5 + len;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  fz_begin(data, 0);
  framed = 1;
  memset(key, 0x5a, sizeof key);
  unsigned long long bundle = 1 + data[0] * 3ULL, count = 1 + data[1] % 16, total = 1 + data[2] * 3ULL;
  size_t chunk = 1 + data[3];
  const uint8_t *d = data + 4;
  size_t n = size - 4;
  struct records r = {.bundle = bundle, .count = count, .total = total};
  fz_armed = 1;
  if (setjmp(fz_jmp) == 0) {
    for (size_t at = 0; at < n; at += chunk) records_feed(&r, d + at, n - at < chunk ? n - at : chunk);
    records_end(&r);
  } else {
    fprintf(stderr, "\nharness: the records parser exited (%d)\n", fz_exit_code);
    abort();
  }
  fz_armed = 0;
  fz_expect_len = 0;
  fz_model(d, n, bundle, count, total);
  if (fz_out.total != fz_out.len || fz_out.len != fz_expect_len || memcmp(fz_out.buf, fz_expect, fz_expect_len) != 0) {
    fprintf(stderr, "\nharness: the frames differ from the model's (%zu bytes against %zu)\n", fz_out.len, fz_expect_len);
    abort();
  }
  if (r.forwarded > count || r.bytes > total) abort();
  fz_end_process();
  return 0;
}
