/*
 * `hermes-run --kernel python`: a session's Python kernel (docs/design/kernel.md; the trust model is
 * SECURITY.md, "Kernels: cells as one trust domain"). One docker exec of this mode lives as long as
 * one kernel: it reads the header once, forks the driver (kernel.py, embedded as kernel.h) and then
 * runs the cells the host sends as KERNEL_COMMANDS on stdin, until stdin ends, `restart`, or the
 * kernel's death; each way out kills the kernel's whole domain and frames 'G'.
 *
 * Why the cells are framed here and not by anything the kernel prints: the kernel, its driver and
 * every process a cell starts are one untrusted domain, and any token the driver holds a cell can
 * read. What the domain cannot forge is who owns the channel: each cell gets fresh pipes (code,
 * stdout, stderr, records) passed over the control socket (fd 3, SOCK_SEQPACKET), and this process
 * closes them at the cell's end, after the driver's "done" and a FIONREAD drain, so a writer that
 * outlives its cell writes into nothing (EPIPE). Between cells the driver's fd 1/2 are the idle
 * pipes, whose bytes come back labelled late ('L'). The driver's word decides only ok versus error;
 * the host's clock decides timeouts (`interrupt`), and an interrupt keeps the state only if "done"
 * and a fresh ping's pong both arrive within the grace, else the domain is killed.
 */
#include "hermes-run.h"
/* PYTHON_KERNEL: the driver (images/runner/kernel.py, embedded by `pnpm codegen`). */
#include "kernel.h"

enum phase { STARTING, IDLE, LOCKWAIT, RUNNING, PINGING };

/* The records pipe's parser: <kind><4-byte big-endian length><JSON>, for framing and bounds only. */
struct records {
  unsigned long long bundle, count, total; /* the `display` line's bounds */
  unsigned char head[5];
  size_t head_fill;
  char kind;
  size_t len, got;
  char *buf;                   /* the record being read (forwarded whole, so 'M' tells its exact size) */
  const char *skip;            /* why the record being read is dropped, or NULL */
  int malformed;               /* garbage seen: the rest of the cell's records are dropped, counted */
  unsigned long long garbage;
  unsigned long long forwarded, skipped, bytes;
};

static struct {
  enum phase phase;
  struct request req;
  pid_t pid;                   /* the kernel (the driver's process, leader of its process group) */
  unsigned long long start;    /* its start time: the domain is what started since */
  int reaped, status;          /* its wait status, once reaped */
  long long oom_before;        /* the memory cgroup's oom_kill count at the kernel's start, or -1 */
  int ctl, sfd;
  int idle[2];                 /* the idle pipes' read ends (the driver's stdout and stderr at idle) */
  unsigned long long idle_bytes, late_sent;
  char startup[1024];          /* what the kernel wrote before "ready" (for an 'E' if it never comes) */
  size_t startup_len;
  /* The cell, from its `cell` line to its 'Z'. */
  char id[KERNEL_CELL_ID_BYTES + 1];
  unsigned long long count;
  char *code;
  size_t code_len, code_sent;
  int module, lock_fd, told_wait, code_w, rec;
  struct relay out, err;
  struct records records;
  const char *done;            /* the driver's "done" word (ok, error), once it came */
  int interrupted;
  long long deadline;
  unsigned ping;
} k = {.ctl = -1, .sfd = -1, .idle = {-1, -1}, .lock_fd = -1, .code_w = -1, .rec = -1, .out = {.fd = -1}, .err = {.fd = -1}};

static unsigned char buf[CHUNK];

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The memory cgroup's oom_kill counter (cgroup v2, then v1), or -1 if it cannot be read here. */
static long long oom_kills(void) {
  static const char *const files[] = {"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    FILE *f = fopen(files[i], "re");
    if (f == NULL) continue;
    char line[128];
    long long n = -1;
    while (n < 0 && fgets(line, sizeof line, f) != NULL) {
      if (sscanf(line, "oom_kill %lld", &n) != 1) n = -1;
    }
    fclose(f);
    if (n >= 0) return n;
  }
  return -1;
}

/* ---- records ---------------------------------------------------------------------------------- */

static void records_skip(struct records *r, char kind, unsigned long long bytes, const char *reason) {
  char msg[64];
  int n = snprintf(msg, sizeof msg, "%c %llu %s", kind, bytes, reason);
  frame(FRAME_RECORD_SKIPPED, msg, (size_t)n);
  r->skipped++;
}

/* Bytes from the records pipe. A record is forwarded whole ('M' + 'm'), or skipped unread ('N'). */
static void records_feed(void *ctx, const unsigned char *p, size_t n) {
  struct records *r = ctx;
  while (n > 0) {
    if (r->malformed) {
      r->garbage += n;
      return;
    }
    if (r->head_fill < sizeof r->head) {
      size_t take = sizeof r->head - r->head_fill < n ? sizeof r->head - r->head_fill : n;
      memcpy(r->head + r->head_fill, p, take);
      r->head_fill += take, p += take, n -= take;
      if (r->head_fill < sizeof r->head) return;
      r->kind = (char)r->head[0];
      r->len = (size_t)r->head[1] << 24 | (size_t)r->head[2] << 16 | (size_t)r->head[3] << 8 | r->head[4];
      r->got = 0;
      if (r->kind == 0 || strchr(KERNEL_RECORD_KINDS, r->kind) == NULL) {
        /* Not a record's start: nothing after it can be framed. */
        r->malformed = 1;
        r->garbage = sizeof r->head;
        continue;
      }
      r->skip = r->len > r->bundle ? RECORD_SKIP_TOO_LARGE : r->forwarded >= r->count ? RECORD_SKIP_COUNT : r->bytes + r->len > r->total ? RECORD_SKIP_TOTAL : NULL;
      if (r->skip != NULL) records_skip(r, r->kind, r->len, r->skip);
      else if ((r->buf = malloc(r->len + 1)) == NULL) fail(PROTOCOL_ERROR, "out of memory for a record of %zu bytes", r->len);
    }
    size_t take = r->len - r->got < n ? r->len - r->got : n;
    if (r->skip == NULL) memcpy(r->buf + r->got, p, take);
    r->got += take, p += take, n -= take;
    if (r->got < r->len) return;
    if (r->skip == NULL) {
      char msg[32];
      int m = snprintf(msg, sizeof msg, "%c %zu", r->kind, r->len);
      frame(FRAME_RECORD_BEGIN, msg, (size_t)m);
      for (size_t at = 0; at < r->len; at += CHUNK) frame(FRAME_RECORD_CONTENT, r->buf + at, r->len - at < CHUNK ? r->len - at : CHUNK);
      r->forwarded++;
      r->bytes += r->len;
      free(r->buf);
      r->buf = NULL;
    }
    r->head_fill = 0;
    r->skip = NULL;
  }
}

/* The cell's end: a record cut short, or garbage, is one 'N' … malformed ("?" when no kind is known). */
static void records_end(struct records *r) {
  if (r->malformed) records_skip(r, '?', r->garbage, RECORD_SKIP_MALFORMED);
  else if (r->head_fill > 0 && r->head_fill < sizeof r->head) records_skip(r, '?', r->head_fill, RECORD_SKIP_MALFORMED);
  else if (r->head_fill == sizeof r->head && r->skip == NULL) records_skip(r, r->kind, r->got, RECORD_SKIP_MALFORMED);
  free(r->buf);
  r->buf = NULL;
}

/* ---- the domain ------------------------------------------------------------------------------- */

static void reap(int block) {
  int st;
  if (!k.reaped && k.pid > 0 && waitpid(k.pid, &st, block ? 0 : WNOHANG) == k.pid) k.reaped = 1, k.status = st;
}

/* SIGKILL the kernel's process group, then everything started since the kernel (kill_others spares
   PID 1, this process and every parent-pid-0 supervisor), until none is left. */
static void kill_domain(void) {
  if (k.pid <= 0) return;
  kill(-k.pid, SIGKILL);
  kill(k.pid, SIGKILL);
  kill_others(0, 1, k.start);
  reap(1);
}

/* The session lock when the kernel ends outside a cell, waited for at most KERNEL_GRACE_MAX_MS: a
   call may hold it (then it holds the domain frozen), or the domain itself (then waiting longer
   cannot help). 1 if it is held (or there is none). */
static int lock_bounded(void) {
  if (k.req.lock == NULL) return 1;
  k.lock_fd = lock_open(k.req.lock);
  for (long long until = now_ms() + KERNEL_GRACE_MAX_MS;; usleep(20000)) {
    if (flock(k.lock_fd, LOCK_EX | LOCK_NB) == 0) return 1;
    if (now_ms() >= until) return 0;
  }
}

/* 'G': the kernel's domain is dead (the caller killed it). Nothing follows. */
__attribute__((noreturn)) static void gone(const char *cause) {
  reap(1);
  exit_hook = NULL;
  long long oom = oom_kills();
  int st = k.status;
  int code = !k.reaped ? 255 : WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
  int sig = k.reaped && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  char msg[96];
  int n = snprintf(msg, sizeof msg, "%d %d %s %s", code, sig, k.oom_before < 0 || oom < 0 ? "?" : oom > k.oom_before ? "1" : "0", cause);
  frame(FRAME_KERNEL_GONE, msg, (size_t)n);
  _exit(0);
}

/* fail() after the kernel exists: the domain must not outlive its supervisor. After "ready", the
   host also gets 'G' … supervisor (after the 'E'). */
static void on_exit_hook(void) {
  kill_domain();
  if (k.phase != STARTING) {
    char msg[64];
    int n = snprintf(msg, sizeof msg, "255 0 ? %s", KERNEL_GONE_SUPERVISOR);
    frame(FRAME_KERNEL_GONE, msg, (size_t)n);
  }
}

/* ---- a cell --------------------------------------------------------------------------------- */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* The lock is held: resume anything a call left frozen, frame 'C', hand the cell over. */
static void cell_begin(void) {
  thaw_all();
  char msg[KERNEL_CELL_ID_BYTES + 32];
  int n = snprintf(msg, sizeof msg, "%s %llu", k.id, k.idle_bytes);
  frame(FRAME_CELL_STARTED, msg, (size_t)n);
  k.idle_bytes = 0;
  int code[2], out[2], err[2], rec[2];
  if (pipe2(code, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(rec, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
  char text[64];
  int len = snprintf(text, sizeof text, "cell %llu %d", k.count, k.module);
  int fds[4] = {code[0], out[1], err[1], rec[1]};
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } u;
  struct iovec iov = {text, (size_t)len};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  /* If the kernel closed its control socket, the cell never runs: the host's deadline ends it. */
  (void)sendmsg(k.ctl, &mh, MSG_NOSIGNAL);
  for (int i = 0; i < 4; i++) close(fds[i]);
  k.code_w = code[1];
  fcntl(k.code_w, F_SETFL, O_NONBLOCK);
  if (k.code_len == 0) close_fd(&k.code_w);
  k.out = (struct relay){out[0], FRAME_STDOUT, 0, 0, 0};
  k.err = (struct relay){err[0], FRAME_STDERR, 0, 0, 0};
  k.rec = rec[0];
  k.records = (struct records){.bundle = k.req.display_bundle, .count = k.req.display_count, .total = k.req.display_total};
  k.done = NULL;
  k.interrupted = 0;
  if (tools_on) tools_open();
  k.phase = RUNNING;
}

/* The cell's end ('Z'): what is in its pipes now is its last output; then they are closed, so a
   writer that outlives the cell writes into nothing. `status`: ok, error, or none (killed). */
static void cell_end(const char *status) {
  struct relay_drain d_out = {&k.out, k.req.cap}, d_err = {&k.err, k.req.cap};
  if (k.out.fd >= 0) drain_pending(k.out.fd, buf, relay_use, &d_out);
  if (k.err.fd >= 0) drain_pending(k.err.fd, buf, relay_use, &d_err);
  if (k.rec >= 0) drain_pending(k.rec, buf, records_feed, &k.records);
  records_end(&k.records);
  close_fd(&k.out.fd);
  close_fd(&k.err.fd);
  close_fd(&k.rec);
  close_fd(&k.code_w);
  free(k.code);
  k.code = NULL;
  if (tools_on) {
    /* Calls the host still serves: their callers are gone with the channel ('q'). */
    for (int i = 0; i < TOOL_CALLS_MAX; i++) {
      if (calls[i].state != 2) continue;
      char msg[16];
      int n = snprintf(msg, sizeof msg, "%u", calls[i].id);
      frame(FRAME_TOOL_CALLER_GONE, msg, (size_t)n);
    }
    tools_close();
    tools_on = 0;
  }
  char msg[KERNEL_CELL_ID_BYTES + 128];
  int n = snprintf(msg, sizeof msg, "%s %s %llu %llu %llu %llu", k.id, status, k.out.total, k.err.total, k.records.forwarded, k.records.skipped);
  frame(FRAME_CELL_ENDED, msg, (size_t)n);
  close_fd(&k.lock_fd); /* the lock released */
  k.late_sent = 0;
  k.phase = IDLE;
}

/* Kill the domain and end: the cell (if one was handed over) with 'Z' none, then 'G'. */
__attribute__((noreturn)) static void end_kernel(const char *cause) {
  if (k.phase == IDLE || k.phase == STARTING) {
    /* Outside a cell a call may run (the kernel can die at any time, the OOM killer's pick while a
       call runs): first the kernel's group, never a call's; the rest of the domain only under the
       lock, since "started since the kernel" includes a running call's processes. Without it, what
       escaped the group is left to the next call's leftovers kill, as leftovers are. */
    if (k.pid > 0) kill(-k.pid, SIGKILL), kill(k.pid, SIGKILL);
    if (!lock_bounded()) gone(cause);
  }
  kill_domain();
  if (k.phase == RUNNING || k.phase == PINGING) cell_end("none");
  gone(cause);
}

static void try_lock(void) {
  if (k.req.lock == NULL) return cell_begin();
  if (k.lock_fd < 0) k.lock_fd = lock_open(k.req.lock);
  if (flock(k.lock_fd, LOCK_EX | LOCK_NB) == 0) {
    frame(FRAME_LOCKED, NULL, 0);
    return cell_begin();
  }
  if (!k.told_wait) lock_tell_wait(k.lock_fd);
  k.told_wait = 1;
}

/* ---- stdin: the host's commands ---------------------------------------------------------------- */

/* One line; 0 at stdin's end before any byte of it. */
static int command_line(char *line) {
  size_t n = 0;
  for (;;) {
    char c;
    ssize_t r = read(0, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (n == 0) return 0;
      fail(PROTOCOL_ERROR, "stdin ended inside a command");
    }
    if (c == '\n') break;
    if (c == 0) fail(PROTOCOL_ERROR, "a command contains a NUL byte");
    if (n + 1 >= LINE_MAX_BYTES) fail(PROTOCOL_ERROR, "a command longer than %d bytes", LINE_MAX_BYTES);
    line[n++] = c;
  }
  line[n] = 0;
  return 1;
}

static int valid_id(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > KERNEL_CELL_ID_BYTES) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)id[i]) && id[i] != '_' && id[i] != '-') return 0;
  return 1;
}

/* `cell <id> <count>`, then its own header lines (code, tools, module) up to `run`. */
static void command_cell(char *line, char *args) {
  if (k.phase != IDLE) fail(PROTOCOL_ERROR, "a cell while another one runs");
  char *sp = strchr(args, ' ');
  if (sp == NULL) fail(PROTOCOL_ERROR, "cell: expected '<cell id> <execution count>'");
  *sp = 0;
  char *end;
  errno = 0;
  unsigned long long count = strtoull(sp + 1, &end, 10);
  if (!valid_id(args) || !isdigit((unsigned char)sp[1]) || *end != 0 || errno != 0) fail(PROTOCOL_ERROR, "cell: expected '<cell id [A-Za-z0-9_-]{1,%d}> <execution count>'", KERNEL_CELL_ID_BYTES);
  snprintf(k.id, sizeof k.id, "%s", args);
  k.count = count;
  struct request cell = {.workspace = k.req.workspace, .code_dir = k.req.code_dir, .code_fd = -1, .workspace_fd = -1, .kernel = 1};
  tools_on = 0;
  for (;;) {
    read_line(line);
    size_t w = strcspn(line, " ");
    if (!((w == 4 && strncmp(line, WORD_CODE, 4) == 0) || (w == 5 && strncmp(line, WORD_TOOLS, 5) == 0) || (w == 6 && strncmp(line, WORD_MODULE, 6) == 0) || strcmp(line, WORD_RUN) == 0)) {
      fail(PROTOCOL_ERROR, "a cell takes code, tools, module and run, not '%.64s'", line);
    }
    if (strncmp(line, WORD_MODULE, 6) == 0) k.module = 1;
    if (!header_line(&cell, line)) break;
  }
  if (cell.code_fd >= 0) close(cell.code_fd);
  if (!cell.has_code) fail(PROTOCOL_ERROR, "a cell without code");
  k.code = cell.code, k.code_len = cell.code_len, k.code_sent = 0;
  k.told_wait = 0;
  k.phase = LOCKWAIT; /* the loop takes the lock next (try_lock), and retries while it is held */
}

static void command(void) {
  char line[LINE_MAX_BYTES];
  if (!command_line(line)) end_kernel(KERNEL_GONE_REQUESTED);
  char *sp = strchr(line, ' ');
  char *args = sp == NULL ? line + strlen(line) : sp + 1;
  if (sp != NULL) *sp = 0;
  if (strcmp(line, KERNEL_COMMAND_CELL) == 0) {
    k.module = 0;
    command_cell(line, args);
  } else if (strcmp(line, KERNEL_COMMAND_INTERRUPT) == 0) {
    if (strcmp(args, k.id) != 0) return; /* a cell that is not running (it ended meanwhile) */
    if (k.phase == LOCKWAIT) {
      /* The lock never came: whoever holds it, only the domain can (the host sends one thing at a
         time). Killing the domain frees it; the cell never started, so no 'C' and no 'Z'. */
      kill_domain();
      gone(KERNEL_GONE_INTERRUPT_TIMEOUT);
    }
    if (k.phase != RUNNING || k.interrupted) return;
    k.interrupted = 1;
    k.deadline = now_ms() + (long long)k.req.grace_ms;
    kill(-k.pid, SIGINT);
  } else if (strcmp(line, KERNEL_COMMAND_RESTART) == 0 && *args == 0) {
    end_kernel(KERNEL_GONE_REQUESTED);
  } else if (strcmp(line, KERNEL_COMMAND_R) == 0 && sp != NULL) {
    *sp = ' ';
    tools_reply_line(line);
  } else {
    fail(PROTOCOL_ERROR, "unknown kernel command '%.64s'", line);
  }
}

/* ---- the kernel's own channels ------------------------------------------------------------------ */

/* A message on the control socket. Nothing in it is trusted: it can end only its own cell. */
static void control(void) {
  char msg[KERNEL_PRELOAD_BYTES + 64];
  ssize_t n = recv(k.ctl, msg, sizeof msg - 1, MSG_DONTWAIT);
  if (n < 0) return;
  if (n == 0) {
    close_fd(&k.ctl); /* the kernel closed it: no cell can end but by the host's deadline now */
    return;
  }
  msg[n] = 0;
  if (k.phase == STARTING && strncmp(msg, "ready", 5) == 0 && (msg[5] == 0 || msg[5] == ' ')) {
    /* 'g': the kernel's identity, and the preload names it could not import (only name bytes kept). */
    char out[KERNEL_PRELOAD_BYTES + 64];
    int len = snprintf(out, sizeof out, "%d %llu", (int)k.pid, k.start);
    for (char *p = msg + 5; *p && (size_t)len + 1 < sizeof out; p++)
      if (isalnum((unsigned char)*p) || *p == '_' || *p == '.' || *p == ' ') out[len++] = *p;
    frame(FRAME_KERNEL_READY, out, (size_t)len);
    k.phase = IDLE;
    size_t late = k.startup_len < KERNEL_LATE_BYTES ? k.startup_len : KERNEL_LATE_BYTES;
    if (late > 0) frame(FRAME_LATE_OUTPUT, k.startup, late);
    k.late_sent = late;
  } else if (k.phase == STARTING && strncmp(msg, "error ", 6) == 0) {
    for (char *p = msg; *p; p++)
      if ((unsigned char)*p < 0x20) *p = ' ';
    fail(PROTOCOL_ERROR, "the kernel cannot start: %.900s", msg + 6);
  } else if ((k.phase == RUNNING || k.phase == PINGING) && k.done == NULL && (strcmp(msg, "done ok") == 0 || strcmp(msg, "done error") == 0)) {
    k.done = msg[5] == 'o' ? "ok" : "error";
    if (!k.interrupted) return cell_end(k.done);
    /* After an interrupt, "done" alone proves nothing (a cell can say it and go on): a fresh ping
       must be answered by the driver's loop within what remains of the grace. */
    char ping[32];
    int m = snprintf(ping, sizeof ping, "ping %u", ++k.ping);
    send(k.ctl, ping, (size_t)m, MSG_NOSIGNAL | MSG_DONTWAIT);
    k.phase = PINGING;
  } else if (k.phase == PINGING && strncmp(msg, "pong ", 5) == 0 && strtoul(msg + 5, NULL, 10) == k.ping) {
    cell_end(k.done);
  }
}

/* Bytes on the idle pipes (outside a cell): 'L' up to KERNEL_LATE_BYTES per idle time, all counted. */
static void idle_read(int i) {
  ssize_t n = read(k.idle[i], buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_fd(&k.idle[i]);
    return;
  }
  k.idle_bytes += (unsigned long long)n;
  if (k.phase == STARTING) {
    size_t room = sizeof k.startup - k.startup_len, take = (size_t)n < room ? (size_t)n : room;
    memcpy(k.startup + k.startup_len, buf, take);
    k.startup_len += take;
    return;
  }
  if (k.late_sent >= KERNEL_LATE_BYTES) return;
  size_t send_n = (unsigned long long)n < KERNEL_LATE_BYTES - k.late_sent ? (size_t)n : (size_t)(KERNEL_LATE_BYTES - k.late_sent);
  frame(FRAME_LATE_OUTPUT, buf, send_n);
  k.late_sent += send_n;
}

/* The kernel died (SIGCHLD) on its own. */
static void died(void) {
  if (k.phase == STARTING) {
    kill_domain();
    /* Its last words first: a driver that said why it cannot start ("error …") and exited can be
       reaped before that message is read (control() then fails with it). */
    if (k.ctl >= 0) control();
    for (size_t i = 0; i < k.startup_len; i++)
      if ((unsigned char)k.startup[i] < 0x20 || (unsigned char)k.startup[i] > 0x7e) k.startup[i] = ' ';
    int st = k.status;
    fail(PROTOCOL_ERROR, "the kernel ended before it was ready (%s %d): %.*s", WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), (int)(k.startup_len < 800 ? k.startup_len : 800), k.startup);
  }
  if (k.phase == LOCKWAIT) {
    kill_domain();
    gone(KERNEL_GONE_CRASHED);
  }
  end_kernel(KERNEL_GONE_CRASHED);
}

/* ---- main ---------------------------------------------------------------------------------------- */

/* The kernel's request before its header: the defaults of the words it takes. */
static void kernel_request(struct request *r) {
  *r = (struct request){.workspace = getenv("HERMES_WORKSPACE"), .code_dir = getenv("HERMES_CODE_DIR"), .cap = SIZE_MAX / 2, .code_fd = -1, .workspace_fd = -1, .kernel = 1,
                        .display_bundle = KERNEL_BUNDLE_BYTES, .display_count = KERNEL_RECORDS, .display_total = KERNEL_RECORD_BYTES, .grace_ms = KERNEL_GRACE_MS};
  if (r->workspace == NULL || *r->workspace == 0) r->workspace = "/workspace";
  if (r->code_dir == NULL || *r->code_dir == 0) r->code_dir = "/tmp/.hermes";
  r->args = calloc(MAX_ARGS + 1, sizeof(char *));
  if (r->args == NULL) fail(PROTOCOL_ERROR, "out of memory");
}

int kernel_main(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[2], "python") != 0) fail(PROTOCOL_ERROR, MODE_KERNEL ": expected 'python'");
  char line[LINE_MAX_BYTES];
  read_line(line);
  if (strcmp(line, PROTOCOL_MAGIC) != 0) fail(PROTOCOL_ERROR, "stdin does not start with '" PROTOCOL_MAGIC "' (runner protocol version " PROTOCOL_VERSION_TEXT " expected)");
  struct request *r = &k.req;
  kernel_request(r);
  read_header(r, line);
  if (!framed) fail(PROTOCOL_ERROR, MODE_KERNEL " needs framed mode (a key)");
  if (r->has_code || r->nargs || r->nfiles || r->op_done || npatterns || tools_on || r->stdin_data || r->code_fd >= 0 || r->workspace_fd >= 0) {
    fail(PROTOCOL_ERROR, MODE_KERNEL ": the header takes key, cap, lock, leftovers, display, grace and preload; a cell brings its code and tools");
  }
  /* One kernel per sandbox: a second would share the domain, and freezing by calls (proc.c) with it. */
  pid_t other = kernel_supervisor();
  if (other != 0) fail(PROTOCOL_ERROR, "kernel-held: the kernel of supervisor %d is alive", (int)other);

  prepare_code_dir(r->code_dir);
  /* Forked once: the tool channel's environment (HERMES_TOOLS_SOCKET, PYTHONPATH) must be there
     from the start; the socket itself listens only while a cell with tools is open. */
  tools_prepare(r->code_dir);
  setenv("PYTHONUNBUFFERED", "1", 1);
  char *names[KERNEL_PRELOAD_BYTES / 2 + 6] = {"python3", "-u", "-c", (char *)PYTHON_KERNEL};
  int nn = 4;
  for (char *save = NULL, *t = r->preload == NULL ? NULL : strtok_r(r->preload, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) names[nn++] = t;
  names[nn] = NULL;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) fail(PROTOCOL_ERROR, "socketpair: %s", strerror(errno));
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  k.oom_before = oom_kills();
  exit_hook = on_exit_hook;
  struct started st = start_child(names, 0, devnull, sv[1]);
  close(sv[1]);
  if (devnull >= 0) close(devnull);
  k.pid = st.pid;
  pid_t pp;
  char state;
  if (!proc_stat(k.pid, &pp, &state, &k.start)) fail(PROTOCOL_ERROR, "the kernel is gone at once");
  k.ctl = sv[0];
  k.sfd = st.sfd;
  k.idle[0] = st.out, k.idle[1] = st.err;
  fcntl(k.idle[0], F_SETFL, O_NONBLOCK);
  fcntl(k.idle[1], F_SETFL, O_NONBLOCK);
  k.phase = STARTING;

  for (;;) {
    struct pollfd fds[8 + TOOL_CALLS_MAX];
    int nfds = 0, at_stdin = -1, at_sig, at_ctl = -1, at_idle[2] = {-1, -1}, at_out = -1, at_err = -1, at_rec = -1, at_code = -1, at_listen = -1, at_call[TOOL_CALLS_MAX];
    int in_cell = k.phase == RUNNING || k.phase == PINGING;
    /* Not before "ready": a host may send its first cell at once, and it waits in the pipe. */
    if (k.phase != STARTING) fds[at_stdin = nfds++] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[at_sig = nfds++] = (struct pollfd){.fd = k.sfd, .events = POLLIN};
    if (k.ctl >= 0) fds[at_ctl = nfds++] = (struct pollfd){.fd = k.ctl, .events = POLLIN};
    /* In a cell the idle pipes wait: what a leftover writes there meanwhile is late all the same. */
    for (int i = 0; i < 2 && !in_cell; i++)
      if (k.idle[i] >= 0) fds[at_idle[i] = nfds++] = (struct pollfd){.fd = k.idle[i], .events = POLLIN};
    if (in_cell) {
      if (k.out.fd >= 0) fds[at_out = nfds++] = (struct pollfd){.fd = k.out.fd, .events = POLLIN};
      if (k.err.fd >= 0) fds[at_err = nfds++] = (struct pollfd){.fd = k.err.fd, .events = POLLIN};
      if (k.rec >= 0) fds[at_rec = nfds++] = (struct pollfd){.fd = k.rec, .events = POLLIN};
      if (k.code_w >= 0) fds[at_code = nfds++] = (struct pollfd){.fd = k.code_w, .events = POLLOUT};
      if (tools_on && tools_busy < (int)tool_max_in_flight) fds[at_listen = nfds++] = (struct pollfd){.fd = tools_listen, .events = POLLIN};
    }
    for (int i = 0; i < TOOL_CALLS_MAX; i++) {
      at_call[i] = -1;
      if (!in_cell || !tools_on || calls[i].state == 0 || calls[i].fd < 0) continue;
      short ev = calls[i].state == 1 ? POLLIN : calls[i].state == 3 ? POLLOUT : 0;
      fds[at_call[i] = nfds++] = (struct pollfd){.fd = calls[i].fd, .events = ev};
    }
    int timeout = -1;
    if (k.phase == LOCKWAIT) timeout = 20;
    if (in_cell && k.interrupted) {
      long long left = k.deadline - now_ms();
      timeout = left < 0 ? 0 : (int)left;
    }
    int ready = poll(fds, (nfds_t)nfds, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail(PROTOCOL_ERROR, "poll: %s", strerror(errno));
    }
    if (fds[at_sig].revents & POLLIN) {
      /* Signals are not forwarded: the domain (same uid) can send this process any it likes. */
      struct signalfd_siginfo si;
      while (read(k.sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      }
      reap(0);
      if (k.reaped) died();
    }
    if (at_out >= 0 && (fds[at_out].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(&k.out, k.req.cap, buf)) close_fd(&k.out.fd);
    if (at_err >= 0 && (fds[at_err].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(&k.err, k.req.cap, buf)) close_fd(&k.err.fd);
    if (at_rec >= 0 && (fds[at_rec].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(k.rec, buf, sizeof buf);
      if (n > 0) records_feed(&k.records, buf, (size_t)n);
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) close_fd(&k.rec);
    }
    if (at_code >= 0 && fds[at_code].revents) {
      ssize_t w = write(k.code_w, k.code + k.code_sent, k.code_len - k.code_sent);
      if (w > 0) k.code_sent += (size_t)w;
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || k.code_sent == k.code_len) close_fd(&k.code_w);
    }
    for (int i = 0; i < TOOL_CALLS_MAX; i++) {
      if (at_call[i] < 0 || fds[at_call[i]].revents == 0) continue;
      struct call *c = &calls[i];
      if (c->state == 1) call_read(c);
      else if (c->state == 3) call_write(c);
      else if (c->state == 2 && (fds[at_call[i]].revents & (POLLHUP | POLLERR))) {
        char msg[16];
        int n = snprintf(msg, sizeof msg, "%u", c->id);
        frame(FRAME_TOOL_CALLER_GONE, msg, (size_t)n);
        call_free(c);
      }
    }
    if (at_listen >= 0 && (fds[at_listen].revents & POLLIN)) tools_accept();
    for (int i = 0; i < 2; i++)
      if (at_idle[i] >= 0 && fds[at_idle[i]].revents) idle_read(i);
    /* The control socket after the cell's pipes: what came before "done" is relayed first. */
    if (at_ctl >= 0 && fds[at_ctl].revents) control();
    if (at_stdin >= 0 && fds[at_stdin].revents) command();
    if (k.phase == LOCKWAIT) try_lock();
    if ((k.phase == RUNNING || k.phase == PINGING) && k.interrupted && now_ms() >= k.deadline) {
      /* No "done", or no pong, within the grace: the state is not kept. */
      kill_domain();
      cell_end("none");
      gone(KERNEL_GONE_INTERRUPT_TIMEOUT);
    }
  }
}
