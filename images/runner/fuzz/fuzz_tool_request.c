/*
 * libFuzzer target: the tool channel, whose requests come from the sandboxed program: call_read
 * (a request read from the caller's socket as it arrives, cut at the `tools` line's request limit)
 * and call_forward (decoded into "<name>\n<arguments>" and relayed as 't'/'b' + 'a' frames); then
 * the host's side: tools_reply ("R <id> <status> <n>\n" + n bytes on stdin) and call_write (the
 * reply to the caller), call_free, tools_close. These run for every call of a run, in one process:
 * here nothing may be left once a call is done (an allocation or a descriptor is a real leak).
 *
 * Input: <cfg byte> <request length: 2 bytes, little-endian> <request> <the host's stdin: replies>
 *   cfg & 7          the request limit: 1, 2, 16, 100, 256, 4096, 65536, 1 MiB
 *   (cfg >> 3) & 3   the reply limit: 1, 10, 1000, 1 MiB
 *   (cfg >> 5) & 3   how the caller writes: 1 byte, 7 bytes, 4096 bytes at a time (in 64 pieces at
 *                    most), or all at once; the supervisor reads what arrived after each
 *   cfg & 0x80       the request is repeated to 70,000 bytes or more (several 'a' frames)
 * The length's top bit (0x80 of its second byte) set: the caller closes its end before the reply
 * (writing the reply then meets EPIPE), and the length is the other 15 bits.
 * Checked: the frames say exactly what the caller sent (name, size, arguments), the caller gets
 * exactly the status and payload of the host's reply for its call, and nothing is left after.
 */
#include "fuzz_common.h"

#define FZ_BIG 70000

__attribute__((noreturn)) static void fz_die(const char *what) {
  fprintf(stderr, "\nharness: %s\n", what);
  abort();
}

/* Read what the caller has been sent, into got (up to cap). */
static void fz_drain(int fd, unsigned char *got, size_t *got_len, size_t cap) {
  unsigned char tmp[4096];
  for (;;) {
    ssize_t n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n <= 0) return;
    size_t take = (size_t)n < cap - *got_len ? (size_t)n : cap - *got_len;
    memcpy(got + *got_len, tmp, take);
    *got_len += take;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  static const size_t req_limits[] = {1, 2, 16, 100, 256, 4096, 65536, 1 << 20};
  static const size_t reply_limits[] = {1, 10, 1000, 1 << 20};
  static const size_t chunks[] = {1, 7, 4096, SIZE_MAX};
  unsigned cfg = data[0];
  size_t want = (size_t)data[1] | (size_t)(data[2] & 0x7f) << 8;
  int close_early = (data[2] & 0x80) != 0;
  size_t avail = size - 3;
  size_t given = want < avail ? want : avail;
  /* The request the caller writes. */
  static unsigned char req[FZ_BIG + 0x8000];
  size_t req_len = given;
  memcpy(req, data + 3, given);
  if ((cfg & 0x80) && given > 0) {
    while (req_len < FZ_BIG) {
      memcpy(req + req_len, data + 3, given);
      req_len += given;
    }
  }
  fz_begin(data + 3 + given, size - 3 - given);
  /* As after a header with a key and "tools 1 <request limit> <reply limit>". */
  framed = 1;
  memcpy(key, "0123456789abcdef", KEY_BYTES);
  tools_on = 1;
  tool_max_in_flight = 1;
  tool_max_request = req_limits[cfg & 7];
  tool_max_reply = reply_limits[(cfg >> 3) & 3];
  /* In 64 pieces at most: byte by byte for a short request, not 70,000 sends for a long one. */
  size_t chunk = chunks[(cfg >> 5) & 3];
  if (chunk < req_len / 64) chunk = req_len / 64;

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) fz_die("socketpair");
  /* As tools_accept leaves a call: its connection non-blocking, reading the request. */
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  struct call *c = &calls[0];
  *c = (struct call){.fd = sv[0], .state = 1};
  tools_busy = 1;

  static unsigned char got[(1 << 20) + 16];
  size_t got_len = 0;
  int caller_open = 1;
  fz_armed = 1;
  if (setjmp(fz_jmp) == 0) {
    /* The caller writes its request piece by piece; the supervisor reads what has arrived each time. */
    size_t at = 0;
    while (at < req_len) {
      size_t n = req_len - at < chunk ? req_len - at : chunk;
      ssize_t w = send(sv[1], req + at, n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) at += (size_t)w;
      if (c->state == 1) call_read(c);
      else if (w <= 0) break; /* the supervisor gave up on the call: nobody reads */
    }
    shutdown(sv[1], SHUT_WR);
    if (c->state == 1) call_read(c);
    if (c->state != 2) fz_die("a complete request was not handed to the host");

    /* What the host was told: 't' (or 'b' past the limit) "<id> <bytes> <name>", then 'a' frames. */
    size_t fat = 0, flen;
    char type;
    const unsigned char *p = fz_next_frame(&fat, &type, &flen);
    int too_large = req_len > tool_max_request;
    if (p == NULL || type != (too_large ? 'b' : 't')) fz_die("no 't' or 'b' frame for the call");
    char head[64 + TOOL_NAME_SENT_MAX + 1];
    memcpy(head, p, flen);
    head[flen] = 0;
    /* "<id> <bytes> " then the name's bytes as they are (they may start with a space, hold a NUL). */
    char *end1, *end2 = NULL;
    unsigned long id = strtoul(head, &end1, 10);
    unsigned long long bytes = *end1 == ' ' ? strtoull(end1 + 1, &end2, 10) : 0;
    if (*end1 != ' ' || end2 == end1 + 1 || *end2 != ' ' || id != 1) fz_die("a malformed 't'/'b' frame");
    int name_at = (int)(end2 + 1 - head);
    /* The name: what precedes the first newline of what was kept (the limit + 1 bytes), at most 256 bytes. */
    size_t kept = too_large ? tool_max_request + 1 : req_len;
    const unsigned char *nl = memchr(req, '\n', kept);
    size_t name_len = nl != NULL ? (size_t)(nl - req) : kept;
    size_t sent_name = name_len < TOOL_NAME_SENT_MAX ? name_len : TOOL_NAME_SENT_MAX;
    size_t args_at = nl != NULL ? name_len + 1 : kept;
    unsigned long long expect = too_large ? (unsigned long long)(req_len - (nl != NULL ? args_at : 0)) : (unsigned long long)(req_len - args_at);
    if (flen - (size_t)name_at != sent_name || memcmp(p + name_at, req, sent_name) != 0) fz_die("the 't'/'b' frame's name is not the request's");
    if (bytes != expect) fz_die("the 't'/'b' frame's size is not the request's");
    size_t args_seen = 0;
    while ((p = fz_next_frame(&fat, &type, &flen)) != NULL) {
      if (type != 'a' || too_large) fz_die("an unexpected frame after 't'/'b'");
      if (args_seen + flen > req_len - args_at || memcmp(p, req + args_at + args_seen, flen) != 0) fz_die("the 'a' frames are not the request's arguments");
      args_seen += flen;
    }
    if (!too_large && args_seen != req_len - args_at) fz_die("the 'a' frames do not carry all the arguments");

    if (close_early) {
      close(sv[1]);
      caller_open = 0;
    }
    /* The host's replies, as the run's loop takes them, until its stdin ends. */
    while (host_in_open) {
      tools_reply();
      while (c->state == 3) {
        if (caller_open) fz_drain(sv[1], got, &got_len, sizeof got);
        call_write(c);
      }
    }
    if (caller_open) fz_drain(sv[1], got, &got_len, sizeof got);
  }
  fz_armed = 0;
  int exited = fz_exit_code >= 0;
  if (!exited && caller_open) {
    /* The caller got the reply to its call (id 1): the first such in the host's stdin. */
    const char *s = (const char *)fz_in;
    size_t left = fz_in_len;
    int found = 0;
    while (left > 0 && !found) {
      const char *e = memchr(s, '\n', left);
      if (e == NULL) break;
      char line[LINE_MAX_BYTES];
      size_t ll = (size_t)(e - s);
      if (ll >= sizeof line) break;
      memcpy(line, s, ll);
      line[ll] = 0;
      unsigned rid;
      char status;
      unsigned long long n;
      if (sscanf(line, "R %u %c %llu", &rid, &status, &n) != 3 || n > left - ll - 1) break;
      if (rid == 1) {
        found = 1;
        if (got_len != n + 1 || (unsigned char)got[0] != (unsigned char)status || memcmp(got + 1, e + 1, n) != 0) fz_die("the caller's reply is not the host's");
      }
      s = e + 1 + n;
      left -= ll + 1 + n;
    }
    if (!found && got_len > 0) fz_die("the caller got a reply the host did not send for it");
  }
  if (caller_open) close(sv[1]);
  if (!exited) {
    /* The run's end (tools_close) must find the call gone: replied to, or still waiting. */
    if (c->state != 0 && c->state != 2) fz_die("a call neither done nor waiting for the host");
    tools_close();
    if (fz_nlive != 0) fz_die("memory of a call is left after the call (a leak: calls are many in one run)");
    if (fz_scan_fds(fz_fd_is_new) != 0) fz_die("a descriptor of a call is left open (a leak: calls are many in one run)");
  } else {
    tools_close();
  }
  fz_end_process();
  return 0;
}
