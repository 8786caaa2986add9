/*
 * The header, read from stdin byte by byte up to `run` (not one byte of the program's stdin is
 * consumed): its lines, the raw bytes that follow some of them, and what each word does, as a table
 * of handlers over protocol.h's HERMES_HEADER_WORDS (a word of the protocol without a handler here
 * does not compile). The words and their arguments: protocol.h, from RunnerProtocolTable.ts.
 */
#include "hermes-run.h"

void read_exact(void *buf, size_t len, const char *what) {
  unsigned char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(0, p + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(PROTOCOL_ERROR, "stdin ended after %zu of %zu bytes of %s", got, len, what);
    got += (size_t)n;
  }
}

/* One header line, byte by byte: not one byte of the program's stdin is consumed. */
void read_line(char *line) {
  size_t n = 0;
  for (;;) {
    char c;
    ssize_t r = read(0, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail(PROTOCOL_ERROR, "stdin ended inside the header");
    if (c == '\n') break;
    if (c == 0) fail(PROTOCOL_ERROR, "header line contains a NUL byte");
    if (n + 1 >= LINE_MAX_BYTES) fail(PROTOCOL_ERROR, "header line longer than %d bytes", LINE_MAX_BYTES);
    line[n++] = c;
  }
  line[n] = 0;
}

static size_t parse_size(const char *s, const char *what) {
  if (*s < '0' || *s > '9') fail(PROTOCOL_ERROR, "%s: not a number", what);
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != 0 || v > (unsigned long long)SIZE_MAX / 2) fail(PROTOCOL_ERROR, "%s: bad number", what);
  return (size_t)v;
}

static char *read_blob(size_t len, const char *what) {
  char *buf = malloc(len + 1);
  if (buf == NULL) fail(PROTOCOL_ERROR, "out of memory reading %s (%zu bytes)", what, len);
  read_exact(buf, len, what);
  buf[len] = 0;
  return buf;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* ---- the words ------------------------------------------------------------------------------ */

static void header_key(struct request *r, char *line, char *rest) {
  (void)r, (void)line;
  if (strlen(rest) != 2 * KEY_BYTES) fail(PROTOCOL_ERROR, "key must be %d hex digits", 2 * KEY_BYTES);
  for (int i = 0; i < KEY_BYTES; i++) {
    int hi = hexval(rest[2 * i]), lo = hexval(rest[2 * i + 1]);
    if (hi < 0 || lo < 0) fail(PROTOCOL_ERROR, "key must be lowercase hex");
    key[i] = (unsigned char)(hi << 4 | lo);
  }
  framed = 1;
  memset(rest, 0, strlen(rest)); /* the hex copy is not needed again */
}

static void header_cap(struct request *r, char *line, char *rest) {
  (void)line;
  r->cap = parse_size(rest, "cap");
}

static void header_lang(struct request *r, char *line, char *rest) {
  (void)line;
  if (strcmp(rest, "python") == 0) r->interpreter = "python3", r->ext = "main.py";
  else if (strcmp(rest, "javascript") == 0) r->interpreter = "node", r->ext = "main.js";
  else if (strcmp(rest, "bash") == 0) r->interpreter = "bash", r->ext = "main.sh";
  else fail(PROTOCOL_ERROR, "unknown language '%.64s' (expected python, javascript or bash)", rest);
}

static void header_code(struct request *r, char *line, char *rest) {
  (void)line;
  r->code_len = parse_size(rest, "code");
  r->code = read_blob(r->code_len, "code");
  r->has_code = 1;
}

static void header_file(struct request *r, char *line, char *rest) {
  (void)line;
  char *sp2 = strchr(rest, ' ');
  if (sp2 == NULL) fail(PROTOCOL_ERROR, "file: expected '<path length> <content length>'");
  *sp2 = 0;
  size_t path_len = parse_size(rest, "file path length"), len = parse_size(sp2 + 1, "file length");
  if (path_len > PATH_MAX) fail(PROTOCOL_ERROR, "file path longer than %d bytes", PATH_MAX);
  if (++r->nfiles > MAX_FILES) fail(PROTOCOL_ERROR, "more than %d files", MAX_FILES);
  char *path = read_blob(path_len, "file path");
  if (r->workspace_fd < 0) {
    r->workspace_fd = open(r->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->workspace_fd < 0) fail(PROTOCOL_ERROR, "cannot open the workspace %s: %s", r->workspace, strerror(errno));
  }
  int fd = open_in(r->workspace_fd, path, path_len);
  copy_stdin_to(fd, len, "a file");
  close(fd);
  free(path);
}

static void header_arg(struct request *r, char *line, char *rest) {
  (void)line;
  if (r->nargs >= MAX_ARGS) fail(PROTOCOL_ERROR, "more than %d arguments", MAX_ARGS);
  size_t len = parse_size(rest, "arg");
  r->args[r->nargs] = read_blob(len, "an argument");
  if (strlen(r->args[r->nargs]) != len) fail(PROTOCOL_ERROR, "an argument contains a NUL byte");
  r->nargs++;
}

static void header_lock(struct request *r, char *line, char *rest) {
  (void)line;
  size_t len = parse_size(rest, "lock");
  if (len == 0 || len >= PATH_MAX) fail(PROTOCOL_ERROR, "lock path length");
  r->lock = read_blob(len, "the lock path");
}

static void header_leftovers(struct request *r, char *line, char *rest) {
  (void)line;
  r->kill_leftovers = strcmp(rest, "kill") == 0;
}

static void header_collect(struct request *r, char *line, char *rest) {
  (void)r, (void)line;
  size_t len = parse_size(rest, "collect");
  if (len == 0 || len >= PATH_MAX) fail(PROTOCOL_ERROR, "collect pattern length");
  char *text = read_blob(len, "a collect pattern");
  if (strlen(text) != len) fail(PROTOCOL_ERROR, "a collect pattern contains a NUL byte");
  add_pattern(text); /* keeps `text`: the segments point into it */
}

static void header_limits(struct request *r, char *line, char *rest) {
  (void)r, (void)line;
  if (sscanf(rest, "%llu %llu %llu", &lim_files, &lim_file_bytes, &lim_total_bytes) != 3) fail(PROTOCOL_ERROR, "limits: expected '<files> <bytes per file> <bytes in all>'");
}

/* A file operation of a session (read, write, list, remove): done here, under the session's lock; no program runs. */
static void file_operation(struct request *r, char *line, char *rest) {
  if (!framed) fail(PROTOCOL_ERROR, "a file operation needs framed mode");
  if (r->op_done) fail(PROTOCOL_ERROR, "one file operation per call");
  unsigned long long a = 0, b = 0, path_len = 0;
  int words = sscanf(rest, "%llu %llu %llu", &path_len, &a, &b);
  int needed = strcmp(line, WORD_READ) == 0 || strcmp(line, WORD_WRITE) == 0 ? 3 : 1;
  if (words != needed) fail(PROTOCOL_ERROR, "%s: expected %d numbers", line, needed);
  if (path_len == 0 || path_len >= PATH_MAX) fail(PROTOCOL_ERROR, "%s: path length", line);
  char *path = read_blob((size_t)path_len, "a path");
  if (r->lock != NULL && !r->locked) {
    take_lock(r->lock);
    r->locked = 1;
  }
  if (strlen(path) != path_len) {
    if (line[0] == 'w') skip_stdin((size_t)a);
    op_failed(EINVAL, "the path contains a NUL byte");
  }
  else if (line[0] == 'r' && line[2] == 'a') op_read(r->workspace, path, a, b);
  else if (line[0] == 'w') op_write(r->workspace, path, (size_t)a, (unsigned)b);
  else if (line[0] == 'l') op_list(r->workspace, path);
  else op_remove(r->workspace, path);
  r->op_done = 1;
  free(path);
}

static void header_read(struct request *r, char *line, char *rest) { file_operation(r, line, rest); }
static void header_write(struct request *r, char *line, char *rest) { file_operation(r, line, rest); }
static void header_list(struct request *r, char *line, char *rest) { file_operation(r, line, rest); }
static void header_remove(struct request *r, char *line, char *rest) { file_operation(r, line, rest); }

/* Tool calls: the program's stdin comes in the header ("stdin"), the rest of ours is replies. Without
   tools, "stdin" (feature `stdin`) serves a runtime whose stdin cannot end (Kubernetes' attach has
   no half-close): the program's stdin is fed from memory and ends, and ours is never read again. */
static void header_tools(struct request *r, char *line, char *rest) {
  (void)r, (void)line;
  if (!framed) fail(PROTOCOL_ERROR, "tool calls need framed mode");
  unsigned long long a, b, c;
  if (sscanf(rest, "%llu %llu %llu", &a, &b, &c) != 3 || a == 0 || a > TOOL_CALLS_MAX || b == 0 || c == 0 || b > TOOL_BYTES_MAX || c > TOOL_BYTES_MAX) {
    fail(PROTOCOL_ERROR, "tools: expected '<calls at once, 1-%d> <request bytes> <reply bytes>'", TOOL_CALLS_MAX);
  }
  tools_on = 1;
  tool_max_in_flight = (size_t)a;
  tool_max_request = (size_t)b;
  tool_max_reply = (size_t)c;
}

static void header_stdin(struct request *r, char *line, char *rest) {
  (void)line;
  r->has_stdin = 1;
  r->stdin_len = parse_size(rest, "stdin");
  r->stdin_data = read_blob(r->stdin_len, "the program's stdin");
}

/* A generated module (the tools' hermes_tools) under the code directory. */
static void header_module(struct request *r, char *line, char *rest) {
  (void)line;
  char *sp2 = strchr(rest, ' ');
  if (sp2 == NULL) fail(PROTOCOL_ERROR, "module: expected '<path length> <content length>'");
  *sp2 = 0;
  size_t path_len = parse_size(rest, "module path length"), len = parse_size(sp2 + 1, "module length");
  if (path_len > PATH_MAX) fail(PROTOCOL_ERROR, "module path longer than %d bytes", PATH_MAX);
  char *path = read_blob(path_len, "module path");
  if (r->code_fd < 0) {
    prepare_code_dir(r->code_dir);
    r->code_fd = open(r->code_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r->code_fd < 0) fail(PROTOCOL_ERROR, "cannot open %s: %s", r->code_dir, strerror(errno));
  }
  int fd = open_in(r->code_fd, path, path_len);
  copy_stdin_to(fd, len, "a module");
  close(fd);
  free(path);
}

/* Kernel mode only: a cell's record bounds, the interrupt's grace, the modules imported at start. */
static void kernel_only(struct request *r, const char *word) {
  if (!r->kernel) fail(PROTOCOL_ERROR, "'%s' is a word of " MODE_KERNEL " only", word);
}

static void header_display(struct request *r, char *line, char *rest) {
  kernel_only(r, line);
  unsigned long long a, b, c;
  char extra;
  if (sscanf(rest, "%llu %llu %llu%c", &a, &b, &c, &extra) != 3 || a == 0 || b == 0 || c == 0 || a > KERNEL_RECORD_BYTES_MAX || b > KERNEL_RECORD_BYTES_MAX || c > KERNEL_RECORD_BYTES_MAX) {
    fail(PROTOCOL_ERROR, "display: expected '<bundle bytes> <count> <total bytes>', each 1-%d", KERNEL_RECORD_BYTES_MAX);
  }
  r->display_bundle = a, r->display_count = b, r->display_total = c;
}

static void header_grace(struct request *r, char *line, char *rest) {
  kernel_only(r, line);
  size_t ms = parse_size(rest, "grace");
  if (ms == 0 || ms > KERNEL_GRACE_MAX_MS) fail(PROTOCOL_ERROR, "grace: 1-%d ms", KERNEL_GRACE_MAX_MS);
  r->grace_ms = ms;
}

/* Space-separated dotted names ([A-Za-z0-9_.]): they reach the driver as its arguments, never as code. */
static void header_preload(struct request *r, char *line, char *rest) {
  kernel_only(r, line);
  size_t len = parse_size(rest, "preload");
  if (len > KERNEL_PRELOAD_BYTES) fail(PROTOCOL_ERROR, "preload: at most %d bytes", KERNEL_PRELOAD_BYTES);
  char *names = read_blob(len, "the preload names");
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)names[i];
    if (!(isalnum(c) || c == '_' || c == '.' || c == ' ')) fail(PROTOCOL_ERROR, "preload: a name holds a byte other than [A-Za-z0-9_.]");
  }
  free(r->preload);
  r->preload = names;
}

/* Every word of the protocol but `run`, with its handler: `line` is the word, `rest` what follows it. */
static const struct {
  const char *word;
  void (*handle)(struct request *r, char *line, char *rest);
} header_words[] = {
#define HEADER_WORD(name, text) {text, header_##name},
  HERMES_HEADER_WORDS(HEADER_WORD)
#undef HEADER_WORD
};

int header_line(struct request *r, char *line) {
  char *sp = strchr(line, ' ');
  char *rest = sp == NULL ? line + strlen(line) : sp + 1;
  if (sp != NULL) *sp = 0;
  if (strcmp(line, WORD_RUN) == 0) return 0;
  size_t i = 0;
  while (i < sizeof header_words / sizeof header_words[0] && strcmp(line, header_words[i].word) != 0) i++;
  if (i == sizeof header_words / sizeof header_words[0]) fail(PROTOCOL_ERROR, "unknown header line '%.64s'", line);
  header_words[i].handle(r, line, rest);
  return 1;
}

void read_header(struct request *r, char *line) {
  do read_line(line);
  while (header_line(r, line));
}
