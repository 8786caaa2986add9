/*
 * Tool calls, and `hermes-tool`. The program calls host tools through a unix socket this process
 * listens on (HERMES_TOOLS_SOCKET; the network stays none, nothing is mounted from the host). One
 * connection per call: the caller writes "<name>\n<arguments JSON>" and shuts its write side; it
 * gets back one status byte ('0' result, '1' tool error, '2' refused) and the payload, then EOF.
 * Each call is relayed to the host as keyed frames ('t' "<id> <bytes> <name>" then exactly <bytes>
 * of arguments in 'a' frames; 'b' "<id> <argument bytes seen> <name>" for one larger than allowed;
 * 'q' "<id>" when its caller went away), so nothing the program writes can pass for a call it did
 * not make or for the end of the run; the ids are this process's, so no caller can claim another's
 * reply. The host answers on stdin: "R <id> <status> <n>\n" + n bytes. At most
 * `tool_max_in_flight` calls are taken at once: others wait in the listen backlog (connect blocks)
 * until one ends.
 */
#include "hermes-run.h"

/* The calls, TOOL_CALLS_MAX slots (struct call). The bounds are the `tools` line's (these are placeholders). */
struct call calls[TOOL_CALLS_MAX];
int tools_on = 0, tools_listen = -1, tools_busy = 0, host_in_open = 1;
size_t tool_max_in_flight = 8, tool_max_request = 1 << 20, tool_max_reply = 1 << 20;
static unsigned next_call_id = 1;
static char tools_socket[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* `entry` first in the ':'-list `name` (once: a session call's environment may carry it already). */
static void prepend_path(const char *name, const char *entry, const char *fallback) {
  const char *old = getenv(name);
  if (old == NULL || *old == 0) old = fallback;
  size_t n = strlen(entry);
  for (const char *p = old; p != NULL && *p; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL) {
    if (strncmp(p, entry, n) == 0 && (p[n] == ':' || p[n] == 0)) return;
  }
  char value[PATH_MAX * 4];
  snprintf(value, sizeof value, "%s%s%s", entry, old != NULL && *old ? ":" : "", old != NULL ? old : "");
  setenv(name, value, 1);
}

/* The channel's place and the environment that finds it, without listening yet: a kernel's driver
   is forked once (with this environment) and listened for per cell (tools_open). */
void tools_prepare(const char *code_dir) {
  int n = snprintf(tools_socket, sizeof tools_socket, "%s/tools-%d.sock", code_dir, (int)getpid());
  if (n < 0 || (size_t)n >= sizeof tools_socket) fail(PROTOCOL_ERROR, "the tool socket's path is too long");
  /* What the program's modules and `hermes-tool` need, and nothing secret: the key is not here. */
  setenv("HERMES_TOOLS_SOCKET", tools_socket, 1);
  char dir[PATH_MAX];
  prepend_path("PYTHONPATH", code_dir, NULL);
  snprintf(dir, sizeof dir, "%s/node_modules", code_dir);
  prepend_path("NODE_PATH", dir, NULL);
  /* `hermes-tool` for bash: this very binary in client mode, through a symlink in the code
     directory (tmpfs is noexec, but exec checks the mount of the file the link resolves to). */
  char self[PATH_MAX], bin[PATH_MAX], link[PATH_MAX + 16];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = 0;
    snprintf(bin, sizeof bin, "%s/bin", code_dir);
    snprintf(link, sizeof link, "%s/" TOOL_CLIENT_NAME, bin);
    if ((mkdir(bin, 0700) == 0 || errno == EEXIST) && (unlink(link) == 0 || errno == ENOENT) && symlink(self, link) == 0) {
      prepend_path("PATH", bin, "/usr/local/bin:/usr/bin:/bin");
    }
  }
}

/* Listen at the prepared path. Call ids start from 1 with each opening: a kernel opens the channel
   per cell, and the host's channel of that cell expects the supervisor's ids in order from 1. (No
   reply of an earlier cell can arrive later: the host settles a cell's calls before its result, and
   sends the next cell only after.) */
void tools_open(void) {
  next_call_id = 1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  memcpy(addr.sun_path, tools_socket, strlen(tools_socket) + 1);
  unlink(tools_socket);
  tools_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (tools_listen < 0) fail(PROTOCOL_ERROR, "the tool channel cannot start: socket: %s", strerror(errno));
  if (bind(tools_listen, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(tools_listen, 128) < 0) {
    fail(PROTOCOL_ERROR, "the tool channel cannot start: %s: %s", tools_socket, strerror(errno));
  }
}

void tools_listen_at(const char *code_dir) {
  tools_prepare(code_dir);
  tools_open();
}

void tools_close(void) {
  if (tools_listen >= 0) {
    close(tools_listen);
    tools_listen = -1;
    unlink(tools_socket);
  }
  for (int i = 0; i < TOOL_CALLS_MAX; i++) {
    if (calls[i].state == 0) continue;
    if (calls[i].fd >= 0) close(calls[i].fd);
    free(calls[i].buf);
    memset(&calls[i], 0, sizeof calls[i]);
  }
  tools_busy = 0;
}

void call_free(struct call *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof *c);
  c->fd = -1;
  tools_busy--;
}

void tools_accept(void) {
  while (tools_busy < (int)tool_max_in_flight) {
    int fd = accept4(tools_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    for (int i = 0; i < TOOL_CALLS_MAX; i++) {
      if (calls[i].state != 0) continue;
      calls[i] = (struct call){.fd = fd, .state = 1};
      tools_busy++;
      break;
    }
  }
}

/* The request is complete (or too large): hand it to the host. */
static void call_forward(struct call *c, int too_large) {
  c->id = next_call_id++;
  char *nl = memchr(c->buf, '\n', c->len);
  size_t name_len = nl != NULL ? (size_t)(nl - c->buf) : c->len;
  size_t args_at = nl != NULL ? name_len + 1 : c->len;
  size_t args_len = c->len - args_at;
  char head[64 + TOOL_NAME_SENT_MAX];
  /* A request too large: the arguments' size as counted (all of it, if no newline ended a name). */
  int n = snprintf(head, sizeof head, "%u %zu ", c->id, too_large ? c->len + c->over - (nl != NULL ? args_at : 0) : args_len);
  size_t sent_name = name_len < TOOL_NAME_SENT_MAX ? name_len : TOOL_NAME_SENT_MAX;
  memcpy(head + n, c->buf, sent_name);
  frame(too_large ? FRAME_TOOL_TOO_LARGE : FRAME_TOOL_CALL, head, (size_t)n + sent_name);
  if (!too_large) {
    for (size_t at = 0; at < args_len; at += CHUNK) frame(FRAME_TOOL_ARGUMENTS, c->buf + args_at + at, args_len - at < CHUNK ? args_len - at : CHUNK);
  }
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  c->state = 2;
}

void call_read(struct call *c) {
  for (;;) {
    if (c->len == c->cap) {
      size_t cap = c->cap == 0 ? 4096 : c->cap * 2;
      if (cap > tool_max_request + 1) cap = tool_max_request + 1;
      char *b = realloc(c->buf, cap);
      if (b == NULL) fail(PROTOCOL_ERROR, "out of memory for a tool call");
      c->buf = b;
      c->cap = cap;
    }
    /* Past the limit the bytes are read and dropped (closing with unread bytes would reset the
       connection before the caller reads its refusal), and only counted. */
    static char drop[CHUNK];
    int dropping = c->len > tool_max_request;
    ssize_t n = dropping ? read(c->fd, drop, sizeof drop) : read(c->fd, c->buf + c->len, c->cap - c->len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) call_free(c);
      return;
    }
    if (n == 0) return call_forward(c, dropping);
    if (dropping) c->over += (size_t)n;
    else c->len += (size_t)n;
  }
}

void call_write(struct call *c) {
  while (c->sent < c->len) {
    ssize_t n = write(c->fd, c->buf + c->sent, c->len - c->sent);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) call_free(c);
      return;
    }
    c->sent += (size_t)n;
  }
  call_free(c);
}

/* One reply from the host ("R <id> <status> <n>\n" + n bytes); blocking: the host writes each whole. */
void tools_reply(void) {
  char line[LINE_MAX_BYTES];
  size_t n = 0;
  for (;;) {
    char ch;
    ssize_t r = read(0, &ch, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (n == 0) {
        host_in_open = 0; /* the host closed our stdin: the run is ending */
        return;
      }
      fail(PROTOCOL_ERROR, "stdin ended inside a tool reply");
    }
    if (ch == '\n') break;
    if (n + 1 >= sizeof line) fail(PROTOCOL_ERROR, "a tool reply line longer than %d bytes", LINE_MAX_BYTES);
    line[n++] = ch;
  }
  line[n] = 0;
  tools_reply_line(line);
}

/* A reply's line ("R <id> <status> <n>"), read; its n bytes follow on stdin. */
void tools_reply_line(const char *line) {
  unsigned id;
  char status;
  unsigned long long len;
  if (sscanf(line, "R %u %c %llu", &id, &status, &len) != 3 || (status != '0' && status != '1' && status != '2') || len > tool_max_reply) {
    fail(PROTOCOL_ERROR, "a malformed tool reply '%.64s'", line);
  }
  struct call *c = NULL;
  for (int i = 0; i < TOOL_CALLS_MAX; i++) {
    if (calls[i].state == 2 && calls[i].id == id) c = &calls[i];
  }
  char *buf = malloc((size_t)len + 1);
  if (buf == NULL) fail(PROTOCOL_ERROR, "out of memory for a tool reply");
  buf[0] = status;
  read_exact(buf + 1, (size_t)len, "a tool reply");
  if (c == NULL) { /* not a call in flight: its caller went away ('q') */
    free(buf);
    return;
  }
  c->buf = buf;
  c->len = (size_t)len + 1;
  c->sent = 0;
  c->state = 3;
  call_write(c);
}

/* `hermes-tool NAME [JSON|-]`: one call from a shell (the modules speak the same protocol). */
int tool_client(int argc, char **argv) {
  if (argc < 2 || argc > 3 || argv[1][0] == 0) {
    write_all(2, "usage: hermes-tool NAME [ARGUMENTS-JSON | -]\n", 45);
    return 3;
  }
  const char *path = getenv("HERMES_TOOLS_SOCKET");
  if (path == NULL || *path == 0) {
    const char msg[] = "hermes-tool: this run has no tool channel (no tools were given to it)\n";
    write_all(2, msg, sizeof msg - 1);
    return 3;
  }
  char *args = NULL;
  size_t args_len = 0;
  if (argc == 3 && strcmp(argv[2], "-") == 0) {
    size_t cap = 0;
    for (;;) {
      if (args_len == cap) {
        cap = cap ? cap * 2 : 65536;
        args = realloc(args, cap);
        if (args == NULL) return 3;
      }
      ssize_t n = read(0, args + args_len, cap - args_len);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      args_len += (size_t)n;
    }
  } else {
    args = argc == 3 ? argv[2] : "{}";
    args_len = strlen(args);
  }
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    dprintf(2, "hermes-tool: cannot reach the tool channel: %s\n", strerror(errno));
    return 3;
  }
  if (write_all(fd, argv[1], strlen(argv[1])) < 0 || write_all(fd, "\n", 1) < 0 || write_all(fd, args, args_len) < 0) {
    dprintf(2, "hermes-tool: the tool channel closed: %s\n", strerror(errno));
    return 3;
  }
  shutdown(fd, SHUT_WR);
  static unsigned char buf[CHUNK];
  int status = -1;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    unsigned char *p = buf;
    if (status < 0) {
      status = p[0];
      p++;
      n--;
    }
    write_all(status == '0' ? 1 : 2, p, (size_t)n);
  }
  if (status < 0) {
    const char msg[] = "hermes-tool: the tool channel closed before the call was answered (the run is ending)\n";
    write_all(2, msg, sizeof msg - 1);
    return 3;
  }
  write_all(status == '0' ? 1 : 2, "\n", 1);
  return status == '0' ? 0 : status == '1' ? 1 : 2;
}
