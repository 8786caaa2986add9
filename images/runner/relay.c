/*
 * Output: the frames on the supervisor's stdout (the container's, or a session exec's), each
 * carrying the run's key; fail(), the one way out of a setup that cannot go on; and the relay of the
 * program's stdout and stderr under the cap. The frame types are protocol.h's.
 */
#include "hermes-run.h"

int framed = 0;
unsigned char key[KEY_BYTES];
void (*exit_hook)(void) = NULL;

/* What must happen on every way out (resume a frozen domain, kill a kernel's): once. */
static void run_exit_hook(void) {
  void (*hook)(void) = exit_hook;
  exit_hook = NULL;
  if (hook != NULL) hook();
}

int write_all(int fd, const void *data, size_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One frame on the container's stdout; the host is gone if this fails, so the run ends. */
void frame(char type, const void *payload, size_t len) {
  unsigned char head[FRAME_HEAD];
  memcpy(head, key, KEY_BYTES);
  head[KEY_BYTES] = (unsigned char)type;
  head[KEY_BYTES + 1] = (unsigned char)(len >> 24);
  head[KEY_BYTES + 2] = (unsigned char)(len >> 16);
  head[KEY_BYTES + 3] = (unsigned char)(len >> 8);
  head[KEY_BYTES + 4] = (unsigned char)len;
  /* One writev for head and payload: half the syscalls (and pipe wake-ups) of two writes. */
  struct iovec iov[2] = {{head, FRAME_HEAD}, {(void *)payload, len}};
  int n_iov = len > 0 ? 2 : 1;
  struct iovec *at = iov;
  while (n_iov > 0) {
    ssize_t n = writev(1, at, n_iov);
    if (n < 0) {
      if (errno == EINTR) continue;
      run_exit_hook();
      _exit(PROTOCOL_ERROR);
    }
    while (n_iov > 0 && (size_t)n >= at->iov_len) {
      n -= (ssize_t)at->iov_len;
      at++;
      n_iov--;
    }
    if (n_iov > 0) {
      at->iov_base = (char *)at->iov_base + n;
      at->iov_len -= (size_t)n;
    }
  }
}

/* Setup failed: say why (a frame when framed, else one "hermes-run: " line on stderr) and exit. */
void fail(int code, const char *fmt, ...) {
  char msg[1024];
  _Static_assert(sizeof msg <= MAX_CONTROL_PAYLOAD, "an 'E' frame fits a control payload");
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
  if (framed) {
    frame(FRAME_SETUP_FAILED, msg, (size_t)n);
  } else {
    write_all(2, "hermes-run: ", 12);
    write_all(2, msg, (size_t)n);
    write_all(2, "\n", 1);
  }
  run_exit_hook();
  _exit(code);
}

/* A control frame "<words> " + raw bytes (a path or a name), the bytes last so they may hold anything. */
void frame_with_bytes(char type, const char *words, const char *bytes, size_t len) {
  static char buf[PATH_MAX + 256];
  _Static_assert(sizeof buf <= MAX_CONTROL_PAYLOAD, "a path and its words fit a control payload");
  size_t w = strlen(words);
  if (w + 1 + len > sizeof buf) len = sizeof buf - w - 1;
  memcpy(buf, words, w);
  buf[w] = ' ';
  memcpy(buf + w + 1, bytes, len);
  frame(type, buf, w + 1 + len);
}

static long long monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* n bytes the program wrote: relay what fits under the cap, count the rest, and once past the cap
   tell the host the count (at once the first time, then every TELL_DROPPED_MS at most). */
void relay_bytes(struct relay *r, const unsigned char *buf, size_t n, size_t cap) {
  unsigned long long before = r->total;
  r->total += (unsigned long long)n;
  if (before < cap) {
    unsigned long long room = cap - before;
    frame(r->type, buf, n < room ? n : (size_t)room);
  }
  if (r->total <= cap) return;
  long long now = monotonic_ms();
  if (r->told != 0 && now - r->told_at < TELL_DROPPED_MS) return;
  char msg[48];
  int len = snprintf(msg, sizeof msg, "%c %llu", r->type, r->total);
  frame(FRAME_DROPPED, msg, (size_t)len);
  r->told = r->total;
  r->told_at = now;
}

/* Read what is there and relay it. 0 on EOF. */
int pump(struct relay *r, size_t cap, unsigned char *buf) {
  ssize_t n = read(r->fd, buf, CHUNK);
  if (n < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (n == 0) return 0;
  relay_bytes(r, buf, (size_t)n, cap);
  return 1;
}

/* At an end (a run's program exited, a cell's kernel said done): read what is in the pipe at this
   moment and no more (FIONREAD), handing it to `use`: a background process that keeps writing must
   not hold the report back for ever. Only if the count is unknown, read until the pipe is empty. */
void drain_pending(int fd, unsigned char *buf, void (*use)(void *ctx, const unsigned char *p, size_t n), void *ctx) {
  int pending = -1;
  if (ioctl(fd, FIONREAD, &pending) < 0 || pending < 0) pending = -1;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  while (pending != 0) {
    ssize_t n = read(fd, buf, pending > 0 && pending < CHUNK ? (size_t)pending : CHUNK);
    if (n <= 0) break;
    if (pending > 0) pending = n >= pending ? 0 : pending - (int)n;
    use(ctx, buf, (size_t)n);
  }
}

/* drain_pending's `use` for a relayed stream: ctx is a struct relay_drain. */
void relay_use(void *ctx, const unsigned char *p, size_t n) {
  struct relay_drain *d = ctx;
  relay_bytes(d->r, p, n, d->cap);
}
