/*
 * hermes-run: the in-container supervisor of hermes-sandbox, runner protocol version 2.
 *
 * Why a separate supervisor (and why in C): the completion report must come from a process the
 * program cannot read, write or signal. hermes-run is that process. It is not dumpable (the image
 * installs it execute-only, 0711, and it calls prctl(PR_SET_DUMPABLE, 0) first), so a program of
 * the same uid cannot open its /proc/<pid>/{mem,environ,fd}; in a one-shot sandbox it is PID 1,
 * so nothing inside can signal it; the program runs as its child with stdout and stderr on PIPES,
 * never on the container's streams, so nothing the program writes can be taken for a control
 * message. Every frame carries the per-run key, read from stdin before the program exists (never
 * in argv, the environment, a file or the program's memory: the child execs at once after fork).
 * Written in C so that supervising costs the run ~1 ms, not an interpreter's start-up.
 *
 * stdin (from the SDK): "HERMES/2\n", then header lines "<word> [numbers]\n" (each < 4096 bytes),
 * where every variable-length value follows its line as exactly that many raw bytes:
 *   key <32 hex>              framed mode: the per-run key (without it: plain mode, see below)
 *   cap <n>                   relay at most n bytes of each stream; the rest is counted, dropped
 *   lang python|javascript|bash   code mode: run the code with that interpreter
 *   code <n>                  + n bytes: the program
 *   file <pathlen> <n>        + pathlen bytes of a relative path + n bytes of content
 *   arg <n>                   + n bytes: one argv element (argv mode; sessions)
 *   lock <n>                  + n bytes: a lock file to flock before running (sessions)
 *   leftovers kill            sessions: end every process left by earlier calls, before and after
 *   run                       end of header; the rest of stdin is the program's own stdin
 *
 * stdout (framed mode): frames  <16-byte key><1-byte type><4-byte big-endian length><payload>
 *   'o' / 'e'  the program's stdout / stderr bytes (payload <= 65536)
 *   'p'        "<pid> <start>": the program's pid and start time (clock ticks since boot)
 *   'w'        "<pid> <command>": waiting for the lock, held by that process
 *   'l'        the lock is held
 *   'x'        "<exit code 0-255> <stdout bytes> <stderr bytes> <signal>": the program's process
 *              has exited (and its pipes were drained); <signal> is the first signal sent to the
 *              sandbox from outside (docker stop/kill, forwarded to the program), 0 if none;
 *              nothing follows
 *   'd'        "<o|e> <bytes written so far>": the stream passed the cap (sent when it first does,
 *              then at most every TELL_DROPPED_MS while the program goes on writing), so that a
 *              run killed before its 'x' (deadline, OOM) still reports the cut and about how much
 *   'E'        "<message>": setup failed (bad header, a file that cannot be written); exit 126
 * Plain mode (no key; sessions' code snippets, already inside a framed call): set up the files,
 * then exec the interpreter in place.
 *
 * Other invocations:
 *   hermes-run --hold                 a session sandbox's PID 1: reap orphans, exit on SIGTERM
 *   hermes-run --kill PID START MODE  end a timed-out session call: PID (if its start time is
 *                                     START), then every other process (MODE all) or every
 *                                     process started at or after START (MODE since), sparing
 *                                     PID 1 and processes entered from outside (parent pid 0)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY_BYTES 16
#define FRAME_HEAD (KEY_BYTES + 1 + 4)
#define CHUNK 65536
#define LINE_MAX_BYTES 4096
#define MAX_ARGS 4096
#define MAX_FILES 100000
#define PROTOCOL_ERROR 126
#define INTERPRETER_MISSING 127

static int framed = 0;
static unsigned char key[KEY_BYTES];

/* ---- output ------------------------------------------------------------------------------ */

static int write_all(int fd, const void *data, size_t len) {
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
static void frame(char type, const void *payload, size_t len) {
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
static void fail(int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
  if (framed) {
    frame('E', msg, (size_t)n);
  } else {
    write_all(2, "hermes-run: ", 12);
    write_all(2, msg, (size_t)n);
    write_all(2, "\n", 1);
  }
  _exit(code);
}

/* ---- reading the header ------------------------------------------------------------------ */

static void read_exact(void *buf, size_t len, const char *what) {
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
static void read_line(char *line) {
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

/* ---- files ------------------------------------------------------------------------------- */

static void copy_stdin_to(int fd, size_t len, const char *what) {
  static unsigned char buf[CHUNK];
  while (len > 0) {
    size_t want = len < sizeof buf ? len : sizeof buf;
    read_exact(buf, want, what);
    if (write_all(fd, buf, want) < 0) fail(PROTOCOL_ERROR, "cannot write %s: %s", what, strerror(errno));
    len -= want;
  }
}

/*
 * Open path (relative to dir_fd) for writing, creating parents, never following a symlink at any
 * level: each directory is lstat'ed, opened O_NOFOLLOW|O_DIRECTORY and checked to be that very
 * inode (gVisor 2022-12 follows a symlink despite O_NOFOLLOW when O_DIRECTORY is also given).
 */
static int open_in(int root_fd, const char *path, size_t path_len) {
  if (path_len == 0 || memchr(path, 0, path_len) != NULL) fail(PROTOCOL_ERROR, "file path is empty or contains a NUL byte");
  if (path[0] == '/') fail(PROTOCOL_ERROR, "file path must be relative to the workspace");
  int dir = dup(root_fd);
  if (dir < 0) fail(PROTOCOL_ERROR, "dup: %s", strerror(errno));
  char *copy = strndup(path, path_len);
  char *save = NULL;
  char *seg = strtok_r(copy, "/", &save);
  char *next;
  int fd = -1;
  if (seg == NULL) fail(PROTOCOL_ERROR, "file path names no file");
  for (; seg != NULL; seg = next) {
    next = strtok_r(NULL, "/", &save);
    if (strcmp(seg, ".") == 0) {
      if (next == NULL) fail(PROTOCOL_ERROR, "file path names no file");
      continue;
    }
    if (strcmp(seg, "..") == 0) fail(PROTOCOL_ERROR, "file path must not contain '..'");
    if (next == NULL) {
      /* O_NONBLOCK: a FIFO planted where the file goes (an earlier session call) must not block the
         setup; only a regular file is written. */
      fd = openat(dir, seg, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
      if (fd < 0) fail(PROTOCOL_ERROR, "cannot create file %s: %s", seg, strerror(errno));
      struct stat fst;
      if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) fail(PROTOCOL_ERROR, "%s exists and is not a regular file", seg);
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      break;
    }
    if (mkdirat(dir, seg, 0755) < 0 && errno != EEXIST) fail(PROTOCOL_ERROR, "cannot create directory %s: %s", seg, strerror(errno));
    struct stat st, opened;
    if (fstatat(dir, seg, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) fail(PROTOCOL_ERROR, "%s is a symlink or not a directory", seg);
    int sub = openat(dir, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 || fstat(sub, &opened) < 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
      fail(PROTOCOL_ERROR, "%s is a symlink or not a directory", seg);
    }
    close(dir);
    dir = sub;
  }
  close(dir);
  free(copy);
  return fd;
}

static void prepare_code_dir(const char *code_dir) {
  if (mkdir(code_dir, 0700) < 0 && errno != EEXIST) fail(PROTOCOL_ERROR, "cannot create %s: %s", code_dir, strerror(errno));
  struct stat st;
  if (lstat(code_dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
    fail(PROTOCOL_ERROR, "%s is not a directory owned by this user", code_dir);
  }
  chmod(code_dir, 0700);
}

/* ---- processes --------------------------------------------------------------------------- */

/* Parent pid, state and start time from /proc/<pid>/stat; 0 if it cannot be read. */
static int proc_stat(pid_t pid, pid_t *ppid, char *state, unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command may contain spaces and parentheses */
  if (p == NULL) return 0;
  int ppid_i;
  unsigned long long st;
  /* fields after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     utime stime cutime cstime priority nice num_threads itrealvalue starttime */
  if (sscanf(p + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", state, &ppid_i, &st) != 3) return 0;
  *ppid = (pid_t)ppid_i;
  *start = st;
  return 1;
}

/*
 * SIGKILL every process but PID 1, this one, `spare` and processes entered from outside the
 * sandbox (parent pid 0: other calls' supervisors, waiting for the lock), optionally only those
 * started at or after `since`; repeated until a pass finds none (a process may fork meanwhile).
 */
/* 0 once none is left; 1 if some were still there after the last pass (or /proc cannot be read). */
static int kill_others(pid_t spare, int only_since, unsigned long long since) {
  pid_t self = getpid();
  /* A killed process stays visible (not yet a zombie) until the kernel has torn it down, which takes
     longer on a loaded host: passes repeat until none is left, backing off, for about 4 s at most. */
  for (int pass = 0; pass < 200; pass++) {
    int found = 0;
    DIR *d = opendir("/proc");
    if (d == NULL) return 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (!isdigit((unsigned char)e->d_name[0])) continue;
      pid_t pid = (pid_t)atoi(e->d_name);
      if (pid <= 1 || pid == self || pid == spare) continue;
      pid_t ppid;
      char state;
      unsigned long long start;
      if (!proc_stat(pid, &ppid, &state, &start)) continue;
      if (ppid == 0 || state == 'Z' || state == 'X') continue;
      if (only_since && start < since) continue;
      if (kill(pid, SIGKILL) == 0) found = 1;
    }
    closedir(d);
    if (!found) return 0;
    usleep(1000 * (pass < 20 ? pass + 1 : 20));
  }
  return 1;
}

/* The pid holding a flock on the file with this inode, from /proc/locks; 0 if none is found. */
static pid_t lock_holder(ino_t ino) {
  FILE *f = fopen("/proc/locks", "re");
  if (f == NULL) return 0;
  char line[512];
  pid_t holder = 0;
  while (holder == 0 && fgets(line, sizeof line, f) != NULL) {
    int pid;
    unsigned maj, min;
    unsigned long long inode;
    char *at = strstr(line, "FLOCK");
    if (at == NULL || strstr(line, "->") != NULL) continue; /* "->" marks a waiter, not a holder */
    if (sscanf(at, "FLOCK %*s %*s %d %x:%x:%llu", &pid, &maj, &min, &inode) == 4 && (ino_t)inode == ino) holder = pid;
  }
  fclose(f);
  return holder;
}

static void take_lock(const char *path) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir) {
    *slash = 0;
    mkdir(dir, 0700);
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) fail(PROTOCOL_ERROR, "cannot open the session lock %s: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    struct stat st;
    pid_t holder = fstat(fd, &st) == 0 ? lock_holder(st.st_ino) : 0;
    char msg[600], cmd[400] = "";
    if (holder > 0) {
      char p[64];
      snprintf(p, sizeof p, "/proc/%d/cmdline", (int)holder);
      int c = open(p, O_RDONLY | O_CLOEXEC);
      if (c >= 0) {
        ssize_t n = read(c, cmd, sizeof cmd - 1);
        close(c);
        if (n < 0) n = 0;
        cmd[n] = 0;
        for (ssize_t i = 0; i < n; i++)
          if (cmd[i] == 0) cmd[i] = ' ';
          else if ((unsigned char)cmd[i] < 0x20) cmd[i] = '?';
      }
    }
    int n = snprintf(msg, sizeof msg, "%d %s", (int)holder, cmd);
    frame('w', msg, n < 0 ? 0 : (size_t)(n >= (int)sizeof msg ? (int)sizeof msg - 1 : n));
    while (flock(fd, LOCK_EX) < 0) {
      if (errno != EINTR) fail(PROTOCOL_ERROR, "cannot lock %s: %s", path, strerror(errno));
    }
  }
  frame('l', NULL, 0);
}

/* ---- files out: collection after a one-shot run, and a session's file operations ----------- */

/*
 * Frames (framed mode only):
 *   'f'  "<mode octal> <file size> " + path bytes: a file's content follows in 'c' frames
 *   'c'  a piece of that content (payload <= 65536)
 *   'F'  "<bytes sent>": the file is complete
 *   's'  "<reason> <size> " + path bytes: a matching entry that was not sent, and why (at most
 *        SKIPPED_MAX_FRAMES of them, SKIPPED_MAX_NAME_BYTES of paths in all)
 *   'S'  "<reason> <count>": after the walk, how many more entries were skipped for that reason
 *   'n'  "<kind f|d|l|o> <size> <mode octal> <mtime seconds> " + name: one entry of a listing
 *   'k'  "<words>": a file operation succeeded
 *   'r'  "<ERRNO NAME> <message>": a file operation failed (no program ran)
 * Paths are the bytes the filesystem holds (any byte but NUL and '/' in a name), never quoted.
 * Nothing here follows a symlink: every directory on the way is opened O_NOFOLLOW and checked to
 * be the inode lstat saw (see open_in), and a leaf symlink is reported, not read.
 */
#define MAX_PATTERNS 64
#define MAX_GLOBSTARS 4
#define COLLECT_MAX_DEPTH 32
#define COLLECT_MAX_ENTRIES 100000
#define LIST_MAX_ENTRIES 10000

struct pattern {
  char *segs[128];
  int n;
};
static struct pattern patterns[MAX_PATTERNS];
static int npatterns = 0;
static unsigned long long lim_files = 100, lim_file_bytes = 10ULL << 20, lim_total_bytes = 32ULL << 20;
static unsigned long long sent_files = 0, sent_bytes = 0, visited = 0;

static void add_pattern(char *text) {
  if (npatterns >= MAX_PATTERNS) fail(PROTOCOL_ERROR, "more than %d collect patterns", MAX_PATTERNS);
  if (text[0] == 0 || text[0] == '/') fail(PROTOCOL_ERROR, "a collect pattern must be a non-empty path relative to the workspace");
  struct pattern *p = &patterns[npatterns];
  int globstars = 0;
  char *save = NULL;
  for (char *seg = strtok_r(text, "/", &save); seg != NULL; seg = strtok_r(NULL, "/", &save)) {
    if (strcmp(seg, ".") == 0) continue;
    if (strcmp(seg, "..") == 0) fail(PROTOCOL_ERROR, "a collect pattern must not contain '..'");
    if (strcmp(seg, "**") == 0 && ++globstars > MAX_GLOBSTARS) fail(PROTOCOL_ERROR, "a collect pattern may hold at most %d '**'", MAX_GLOBSTARS);
    if (p->n >= (int)(sizeof p->segs / sizeof p->segs[0])) fail(PROTOCOL_ERROR, "a collect pattern with too many segments");
    p->segs[p->n++] = seg;
  }
  if (p->n == 0) fail(PROTOCOL_ERROR, "a collect pattern names nothing");
  npatterns++;
}

/* fnmatch per segment ('*', '?', '[...]'; a leading dot only matched by a dot); '**' is any number
   of segments that do not start with a dot. Bounded: at most MAX_GLOBSTARS '**' and depth 32. */
static int match_from(char *const *pat, int np, char *const *seg, int ns) {
  if (np == 0) return ns == 0;
  if (strcmp(pat[0], "**") == 0) {
    for (int k = 0; k <= ns; k++) {
      if (match_from(pat + 1, np - 1, seg + k, ns - k)) return 1;
      if (k < ns && seg[k][0] == '.') return 0;
    }
    return 0;
  }
  if (ns == 0 || fnmatch(pat[0], seg[0], FNM_PERIOD) != 0) return 0;
  return match_from(pat + 1, np - 1, seg + 1, ns - 1);
}

static int matches(char *const *seg, int ns) {
  for (int i = 0; i < npatterns; i++)
    if (match_from(patterns[i].segs, patterns[i].n, seg, ns)) return 1;
  return 0;
}

/* A control frame "<words> " + raw bytes (a path or a name), the bytes last so they may hold anything. */
static void frame_with_bytes(char type, const char *words, const char *bytes, size_t len) {
  static char buf[PATH_MAX + 256];
  size_t w = strlen(words);
  if (w + 1 + len > sizeof buf) len = sizeof buf - w - 1;
  memcpy(buf, words, w);
  buf[w] = ' ';
  memcpy(buf + w + 1, bytes, len);
  frame(type, buf, w + 1 + len);
}

/* The reasons an entry is skipped (the host knows the same list): past SKIPPED_MAX_FRAMES entries or
   SKIPPED_MAX_NAME_BYTES of their paths, the rest are only counted per reason, and told at the end
   of the walk in one 'S' frame per reason, so that a workspace of many unsendable entries (16,384
   symlinks with 4 KiB paths) costs the host a bounded list and a count. */
static const char *const skip_reasons[] = {"too-large", "limit", "total-limit", "symlink", "not-regular", "unreadable", "too-deep", "name-too-long", "walk-limit"};
#define SKIP_REASONS (sizeof skip_reasons / sizeof skip_reasons[0])
#define SKIPPED_MAX_FRAMES 1000
#define SKIPPED_MAX_NAME_BYTES (256 * 1024)
static unsigned long long skipped_frames = 0, skipped_name_bytes = 0, skipped_omitted[SKIP_REASONS];

static void skipped(const char *reason, unsigned long long size, const char *path, size_t len) {
  if (skipped_frames >= SKIPPED_MAX_FRAMES || skipped_name_bytes + len > SKIPPED_MAX_NAME_BYTES) {
    for (size_t i = 0; i < SKIP_REASONS; i++)
      if (strcmp(skip_reasons[i], reason) == 0) skipped_omitted[i]++;
    return;
  }
  skipped_frames++;
  skipped_name_bytes += len;
  char words[96];
  snprintf(words, sizeof words, "%s %llu", reason, size);
  frame_with_bytes('s', words, path, len);
}

/* After the walk: how many skipped entries of each reason were not listed. */
static void skipped_summary(void) {
  for (size_t i = 0; i < SKIP_REASONS; i++) {
    if (skipped_omitted[i] == 0) continue;
    char words[96];
    int n = snprintf(words, sizeof words, "%s %llu", skip_reasons[i], skipped_omitted[i]);
    frame('S', words, (size_t)n);
  }
}

/* Send an open regular file from `offset`, at most `limit` bytes: 'f', 'c'..., 'F'. */
static void send_file(int fd, const struct stat *st, const char *path, size_t len, unsigned long long offset, unsigned long long limit) {
  static unsigned char buf[CHUNK];
  char words[96];
  snprintf(words, sizeof words, "%o %llu", (unsigned)(st->st_mode & 07777), (unsigned long long)st->st_size);
  frame_with_bytes('f', words, path, len);
  unsigned long long left = limit, sent = 0;
  off_t at = (off_t)offset;
  while (left > 0) {
    ssize_t n = pread(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    frame('c', buf, (size_t)n);
    at += n;
    sent += (unsigned long long)n;
    left -= (unsigned long long)n;
  }
  snprintf(words, sizeof words, "%llu", sent);
  frame('F', words, strlen(words));
}

/* Open `name` in `dir` for reading if it is the regular file lstat saw; -1 otherwise. */
static int open_regular(int dir, const char *name, const struct stat *seen) {
  int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_dev != seen->st_dev || st.st_ino != seen->st_ino) {
    close(fd);
    return -1;
  }
  return fd;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in `dir`, sorted (the listing is then the same every time), at most `max`; NULL on error. */
static char **names_of(int dir, int *count, int max, int *more) {
  int fd = dup(dir);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (d == NULL) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  int n = 0, room = 64;
  char **names = malloc(sizeof(char *) * (size_t)room);
  struct dirent *e;
  *more = 0;
  while (names != NULL && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n >= max) {
      *more = 1;
      break;
    }
    if (n == room) {
      room *= 2;
      char **grown = realloc(names, sizeof(char *) * (size_t)room);
      if (grown == NULL) break;
      names = grown;
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (names != NULL) qsort(names, (size_t)n, sizeof(char *), by_name);
  *count = n;
  return names;
}

static void free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

/*
 * Walk the workspace below `dir` (its path `rel`, its segments `seg`), sending what matches. A
 * directory that matches a pattern brings everything below it. The walk is bounded: 32 levels,
 * 100,000 entries; past either a 's' frame says so.
 */
static void collect_in(int dir, char *rel, size_t rel_len, char **seg, int depth, int inherited) {
  int n, more;
  char **names = names_of(dir, &n, COLLECT_MAX_ENTRIES, &more);
  if (names == NULL) return;
  for (int i = 0; i < n; i++) {
    const char *name = names[i];
    size_t name_len = strlen(name);
    if (rel_len + 1 + name_len >= PATH_MAX) {
      skipped("name-too-long", 0, rel, rel_len);
      continue;
    }
    if (++visited > COLLECT_MAX_ENTRIES) {
      skipped("walk-limit", 0, rel, rel_len);
      break;
    }
    size_t len = rel_len;
    if (len > 0) rel[len++] = '/';
    memcpy(rel + len, name, name_len);
    len += name_len;
    rel[len] = 0;
    seg[depth] = (char *)name;
    int matched = inherited || matches(seg, depth + 1);
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      if (matched) skipped("unreadable", 0, rel, len);
    } else if (S_ISDIR(st.st_mode)) {
      if (depth + 1 >= COLLECT_MAX_DEPTH) {
        skipped("too-deep", 0, rel, len);
      } else {
        struct stat opened;
        int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0 && fstat(sub, &opened) == 0 && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino) {
          collect_in(sub, rel, len, seg, depth + 1, matched);
        } else if (matched) {
          skipped("unreadable", 0, rel, len);
        }
        if (sub >= 0) close(sub);
      }
    } else if (!matched) {
      /* not asked for */
    } else if (S_ISLNK(st.st_mode)) {
      skipped("symlink", (unsigned long long)st.st_size, rel, len);
    } else if (!S_ISREG(st.st_mode)) {
      skipped("not-regular", 0, rel, len);
    } else if ((unsigned long long)st.st_size > lim_file_bytes) {
      skipped("too-large", (unsigned long long)st.st_size, rel, len);
    } else if (sent_files >= lim_files) {
      skipped("limit", (unsigned long long)st.st_size, rel, len);
    } else if (sent_bytes + (unsigned long long)st.st_size + len > lim_total_bytes) {
      skipped("total-limit", (unsigned long long)st.st_size, rel, len);
    } else {
      int fd = open_regular(dir, name, &st);
      if (fd < 0) {
        skipped("unreadable", (unsigned long long)st.st_size, rel, len);
      } else {
        send_file(fd, &st, rel, len, 0, (unsigned long long)st.st_size);
        close(fd);
        sent_files++;
        sent_bytes += (unsigned long long)st.st_size + len; /* names count: the host holds them too */
      }
    }
    rel[rel_len] = 0;
  }
  if (more) skipped("walk-limit", 0, rel, rel_len);
  free_names(names, n);
}

/* After the program: nothing else may run (a leftover could swap a file mid-read), then the walk. */
static void collect(const char *workspace) {
  kill_others(0, 0, 0);
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  int root = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return;
  static char rel[PATH_MAX];
  static char *seg[COLLECT_MAX_DEPTH + 1];
  rel[0] = 0;
  collect_in(root, rel, 0, seg, 0, 0);
  close(root);
  skipped_summary();
}

/* ---- a session's file operations: no program runs; the reply, then 'x' ------------------------ */

static const char *errno_name(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ELOOP: return "ELOOP";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EEXIST: return "EEXIST";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ENOSPC: return "ENOSPC";
    case EFBIG: return "EFBIG";
    case EDQUOT: return "EDQUOT";
    case EROFS: return "EROFS";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EINVAL: return "EINVAL";
    case ENXIO: return "ENXIO";
    case EBUSY: return "EBUSY";
    default: return "EIO";
  }
}

static void op_failed(int e, const char *fmt, ...) {
  char msg[1200];
  int w = snprintf(msg, sizeof msg, "%s ", errno_name(e));
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg + w, sizeof msg - (size_t)w, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  size_t len = (size_t)w + (size_t)n;
  if (len >= sizeof msg) len = sizeof msg - 1;
  frame('r', msg, len);
}

/*
 * The directory holding `path` (absolute, under the workspace or /tmp), opened without following
 * a symlink at any level, and the leaf's name; -1 with a reply sent when the path is not allowed.
 * With `create`, missing directories are made (0755). The root itself (no leaf) is allowed only
 * when `root_ok` (a listing of "/workspace").
 */
static int parent_of(const char *workspace, char *path, int create, int root_ok, char **leaf) {
  const char *roots[2] = {workspace, "/tmp"};
  const char *root = NULL;
  for (int i = 0; i < 2; i++) {
    size_t rl = strlen(roots[i]);
    if (strncmp(path, roots[i], rl) == 0 && (path[rl] == '/' || path[rl] == 0)) {
      root = roots[i];
      break;
    }
  }
  if (path[0] != '/' || root == NULL) {
    op_failed(EACCES, "%s is outside the sandbox's writable roots (%s, /tmp)", path, workspace);
    return -1;
  }
  int dir = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    op_failed(errno, "cannot open %s: %s", root, strerror(errno));
    return -1;
  }
  char *rest = path + strlen(root);
  char *segs[PATH_MAX / 2];
  int n = 0;
  char *save = NULL;
  for (char *s = strtok_r(rest, "/", &save); s != NULL; s = strtok_r(NULL, "/", &save)) {
    if (strcmp(s, ".") == 0) continue;
    if (strcmp(s, "..") == 0) {
      close(dir);
      op_failed(EINVAL, "the path must not contain '..'");
      return -1;
    }
    segs[n++] = s;
  }
  if (n == 0) {
    if (!root_ok) {
      close(dir);
      op_failed(EISDIR, "%s is a directory", root);
      return -1;
    }
    *leaf = NULL;
    return dir;
  }
  for (int i = 0; i < n - 1; i++) {
    if (create && mkdirat(dir, segs[i], 0755) < 0 && errno != EEXIST) {
      int e = errno;
      close(dir);
      op_failed(e, "cannot create directory %s: %s", segs[i], strerror(e));
      return -1;
    }
    struct stat st, opened;
    if (fstatat(dir, segs[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
      int e = errno;
      close(dir);
      op_failed(e, "%s: %s", segs[i], strerror(e));
      return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
      close(dir);
      op_failed(S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR, "%s is %s", segs[i], S_ISLNK(st.st_mode) ? "a symlink (not followed)" : "not a directory");
      return -1;
    }
    int sub = openat(dir, segs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      int e = errno;
      close(dir);
      op_failed(e, "cannot open directory %s: %s", segs[i], strerror(e));
      return -1;
    }
    if (fstat(sub, &opened) < 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
      close(sub);
      close(dir);
      op_failed(ELOOP, "%s changed while it was opened (a symlink swapped in: not followed)", segs[i]);
      return -1;
    }
    close(dir);
    dir = sub;
  }
  *leaf = segs[n - 1];
  return dir;
}

static void op_read(const char *workspace, char *path, unsigned long long offset, unsigned long long limit) {
  char *leaf;
  int dir = parent_of(workspace, path, 0, 0, &leaf);
  if (dir < 0) return;
  struct stat st;
  if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    op_failed(errno, "%s", strerror(errno));
  } else if (S_ISLNK(st.st_mode)) {
    op_failed(ELOOP, "%s is a symlink (not followed)", leaf);
  } else if (S_ISDIR(st.st_mode)) {
    op_failed(EISDIR, "%s is a directory", leaf);
  } else if (!S_ISREG(st.st_mode)) {
    op_failed(EINVAL, "%s is not a regular file", leaf);
  } else {
    int fd = open_regular(dir, leaf, &st);
    if (fd < 0) {
      op_failed(errno == 0 ? EIO : errno, "cannot open %s", leaf);
    } else {
      unsigned long long size = (unsigned long long)st.st_size;
      unsigned long long from = offset < size ? offset : size;
      unsigned long long n = size - from < limit ? size - from : limit;
      size_t len = strlen(leaf);
      send_file(fd, &st, leaf, len, from, n);
      close(fd);
    }
  }
  close(dir);
}

/* Read and drop `len` bytes of stdin: a refused write's content, which must never be parsed as header. */
static void skip_stdin(size_t len) {
  static unsigned char buf[CHUNK];
  while (len > 0) {
    size_t want = len < sizeof buf ? len : sizeof buf;
    read_exact(buf, want, "the file's content");
    len -= want;
  }
}

static void op_write(const char *workspace, char *path, size_t len, unsigned mode) {
  char *leaf;
  int dir = parent_of(workspace, path, 1, 0, &leaf);
  if (dir < 0) {
    skip_stdin(len);
    return;
  }
  /* KEEP (RunnerProtocol.KEEP_EXISTING_MODE): a file that exists keeps its permission bits. */
  struct stat before;
  int keep = (mode & 0100000) != 0 && fstatat(dir, leaf, &before, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(before.st_mode);
  /* O_NONBLOCK: a FIFO planted where the file goes must not block; only a regular file is written. */
  int fd = openat(dir, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode & 0777);
  struct stat st;
  if (fd < 0) {
    int e = errno;
    skip_stdin(len);
    op_failed(e, "cannot write %s: %s", leaf, e == ELOOP ? "it is a symlink (not followed)" : e == ENXIO ? "it is a FIFO without a reader" : strerror(e));
  } else if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    skip_stdin(len);
    op_failed(EINVAL, "%s exists and is not a regular file", leaf);
  } else {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (!keep) fchmod(fd, mode & 0777);
    static unsigned char buf[CHUNK];
    size_t left = len;
    int e = 0;
    while (left > 0) {
      size_t want = left < sizeof buf ? left : sizeof buf;
      read_exact(buf, want, "the file's content");
      if (e == 0 && write_all(fd, buf, want) < 0) e = errno;
      left -= want;
    }
    if (e != 0) {
      op_failed(e, "cannot write %s: %s", leaf, strerror(e));
    } else {
      char words[64];
      snprintf(words, sizeof words, "written %zu", len);
      frame('k', words, strlen(words));
    }
  }
  if (fd >= 0) close(fd);
  close(dir);
}

static void op_list(const char *workspace, char *path) {
  char *leaf;
  int parent = parent_of(workspace, path, 0, 1, &leaf);
  if (parent < 0) return;
  int dir = parent;
  if (leaf != NULL) {
    struct stat st, opened;
    if (fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      op_failed(errno, "%s", strerror(errno));
      close(parent);
      return;
    }
    dir = S_ISDIR(st.st_mode) ? openat(parent, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (dir < 0 || fstat(dir, &opened) < 0 || opened.st_ino != st.st_ino || opened.st_dev != st.st_dev) {
      op_failed(S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR, "%s is %s", leaf, S_ISLNK(st.st_mode) ? "a symlink (not followed)" : "not a directory");
      if (dir >= 0) close(dir);
      close(parent);
      return;
    }
    close(parent);
  }
  int n, more;
  char **names = names_of(dir, &n, LIST_MAX_ENTRIES, &more);
  if (names == NULL) {
    op_failed(errno, "cannot list: %s", strerror(errno));
    close(dir);
    return;
  }
  for (int i = 0; i < n; i++) {
    struct stat st;
    if (fstatat(dir, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    char kind = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
    char words[128];
    snprintf(words, sizeof words, "%c %llu %o %lld", kind, (unsigned long long)st.st_size, (unsigned)(st.st_mode & 07777), (long long)st.st_mtime);
    frame_with_bytes('n', words, names[i], strlen(names[i]));
  }
  char words[64];
  snprintf(words, sizeof words, "listed %d %d", n, more);
  frame('k', words, strlen(words));
  free_names(names, n);
  close(dir);
}

static void op_remove(const char *workspace, char *path) {
  char *leaf;
  int dir = parent_of(workspace, path, 0, 0, &leaf);
  if (dir < 0) return;
  struct stat st;
  if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    op_failed(errno, "%s", strerror(errno));
  } else if (unlinkat(dir, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
    op_failed(errno, "cannot remove %s: %s", leaf, strerror(errno));
  } else {
    frame('k', "removed", 7);
  }
  close(dir);
}

/* ---- tool calls -------------------------------------------------------------------------- */

/*
 * The program calls host tools through a unix socket this process listens on (HERMES_TOOLS_SOCKET;
 * the network stays none, nothing is mounted from the host). One connection per call: the caller
 * writes "<name>\n<arguments JSON>" and shuts its write side; it gets back one status byte ('0'
 * result, '1' tool error, '2' refused) and the payload, then EOF. Each call is relayed to the host
 * as keyed frames ('t' "<id> <bytes> <name>" then exactly <bytes> of arguments in 'a' frames; 'b'
 * "<id> <argument bytes seen> <name>" for one larger than allowed; 'q' "<id>" when its caller went away),
 * so nothing the program writes can pass for a call it did not make or for the end of the run; the
 * ids are this process's, so no caller can claim another's reply. The host answers on stdin:
 * "R <id> <status> <n>\n" + n bytes. At most `tool_max_in_flight` calls are taken at once: others
 * wait in the listen backlog (connect blocks) until one ends.
 */
#define TOOL_CALLS_MAX 64
#define TOOL_NAME_SENT_MAX 256

struct call {
  int fd;          /* the caller's connection */
  int state;       /* 0 free, 1 reading the request, 2 waiting for the host, 3 writing the reply */
  unsigned id;
  char *buf;       /* the request as it arrives, then the reply */
  size_t len, cap, sent;
  size_t over;     /* bytes of a request larger than allowed, read and dropped until its EOF */
};
static struct call calls[TOOL_CALLS_MAX];
static int tools_on = 0, tools_listen = -1, tools_busy = 0, host_in_open = 1;
static size_t tool_max_in_flight = 8, tool_max_request = 1 << 20, tool_max_reply = 1 << 20;
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

static void tools_listen_at(const char *code_dir) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  int n = snprintf(tools_socket, sizeof tools_socket, "%s/tools-%d.sock", code_dir, (int)getpid());
  if (n < 0 || (size_t)n >= sizeof tools_socket) fail(PROTOCOL_ERROR, "the tool socket's path is too long");
  memcpy(addr.sun_path, tools_socket, (size_t)n + 1);
  unlink(tools_socket);
  tools_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (tools_listen < 0) fail(PROTOCOL_ERROR, "the tool channel cannot start: socket: %s", strerror(errno));
  if (bind(tools_listen, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(tools_listen, 128) < 0) {
    fail(PROTOCOL_ERROR, "the tool channel cannot start: %s: %s", tools_socket, strerror(errno));
  }
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
    snprintf(link, sizeof link, "%s/hermes-tool", bin);
    if ((mkdir(bin, 0700) == 0 || errno == EEXIST) && (unlink(link) == 0 || errno == ENOENT) && symlink(self, link) == 0) {
      prepend_path("PATH", bin, "/usr/local/bin:/usr/bin:/bin");
    }
  }
}

static void tools_close(void) {
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

static void call_free(struct call *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof *c);
  c->fd = -1;
  tools_busy--;
}

static void tools_accept(void) {
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
  frame(too_large ? 'b' : 't', head, (size_t)n + sent_name);
  if (!too_large) {
    for (size_t at = 0; at < args_len; at += CHUNK) frame('a', c->buf + args_at + at, args_len - at < CHUNK ? args_len - at : CHUNK);
  }
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  c->state = 2;
}

static void call_read(struct call *c) {
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

static void call_write(struct call *c) {
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
static void tools_reply(void) {
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
static int tool_client(int argc, char **argv) {
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

/* ---- modes ------------------------------------------------------------------------------- */

static int hold(void) {
  sigset_t set;
  sigfillset(&set);
  sigprocmask(SIG_BLOCK, &set, NULL);
  for (;;) {
    int sig = sigwaitinfo(&set, NULL);
    if (sig == SIGTERM || sig == SIGINT) return 0;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
}

static int kill_call(int argc, char **argv) {
  if (argc != 5) return 2;
  pid_t target = (pid_t)atoi(argv[2]);
  unsigned long long start = strtoull(argv[3], NULL, 10);
  int only_since = strcmp(argv[4], "since") == 0;
  pid_t ppid;
  char state;
  unsigned long long st;
  if (target > 1 && proc_stat(target, &ppid, &state, &st) && st == start) kill(target, SIGKILL);
  /* Exit 0: nothing of the call is left (the host may go on even before the engine says the call's
     exec ended); 1: something outlived every pass. */
  return kill_others(0, only_since, start);
}

struct relay {
  int fd;
  char type;
  unsigned long long total;
  /* The total the last 'd' frame told, and when (CLOCK_MONOTONIC, ms). */
  unsigned long long told;
  long long told_at;
};

/* How often at most a stream past its cap says how much was written ('d'). */
#define TELL_DROPPED_MS 200

static long long monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* n bytes the program wrote: relay what fits under the cap, count the rest, and once past the cap
   tell the host the count (at once the first time, then every TELL_DROPPED_MS at most). */
static void relay_bytes(struct relay *r, const unsigned char *buf, size_t n, size_t cap) {
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
  frame('d', msg, (size_t)len);
  r->told = r->total;
  r->told_at = now;
}

/* Read what is there and relay it. 0 on EOF. */
static int pump(struct relay *r, size_t cap, unsigned char *buf) {
  ssize_t n = read(r->fd, buf, CHUNK);
  if (n < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (n == 0) return 0;
  relay_bytes(r, buf, (size_t)n, cap);
  return 1;
}

/*
 * Fork the program with stdout and stderr on pipes and every forwarded signal blocked in this
 * process (delivered through a signalfd). With `preload`, the child also gets fd 3, a pipe on which
 * it later learns where to go ("<cwd>\0<program path>"): the interpreter starts before the request
 * arrives (warm pool), so it is forked before the key is read and never holds it.
 */
struct started {
  pid_t pid;
  int out, err, sfd, go;
};

/* SIGCHLD, and the signals an operator or the engine sends the container (docker stop, docker kill
   -s), which are forwarded to the program as docker-init would. Handling them means the program
   can send them to PID 1 too: all it gets is the same signal back, which it could send itself. */
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
static sigset_t old_mask;
static int signal_fd = -1;

static struct started start_child(char **argv, int preload, int stdin_fd) {
  int out[2], err[2], ready[2], go[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
  if (preload && pipe2(go, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
  if (signal_fd < 0) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&chld, forwarded[i]);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
    signal_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd < 0) fail(PROTOCOL_ERROR, "signalfd: %s", strerror(errno));
  }
  pid_t child = fork();
  if (child < 0) fail(PROTOCOL_ERROR, "fork: %s", strerror(errno));
  if (child == 0) {
    /* The key is in this copy of memory until execvp replaces it, a few instructions from here. */
    memset(key, 0, sizeof key);
    /* stdin first: its descriptor may be 3, which the go pipe takes next. */
    if (stdin_fd >= 0) dup2(stdin_fd, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (preload) dup2(go[0], 3);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], argv);
    int e = errno;
    char msg[256];
    int n = snprintf(msg, sizeof msg, "hermes-run: cannot run %s: %s\n", argv[0], strerror(e));
    write_all(ready[1], &e, sizeof e);
    write_all(2, msg, n < 0 ? 0 : (size_t)n);
    _exit(e == ENOENT ? INTERPRETER_MISSING : PROTOCOL_ERROR);
  }
  close(out[1]);
  close(err[1]);
  close(ready[1]);
  if (preload) close(go[0]);
  /* The exec either happened (the pipe closes: EOF) or failed (errno arrives): a missing
     interpreter is a setup failure, not the program's exit. */
  int exec_errno = 0;
  if (read(ready[0], &exec_errno, sizeof exec_errno) == (ssize_t)sizeof exec_errno) {
    fail(exec_errno == ENOENT ? INTERPRETER_MISSING : PROTOCOL_ERROR, "cannot run %s: %s", argv[0], strerror(exec_errno));
  }
  close(ready[0]);
  struct started st = {child, out[0], err[0], signal_fd, go[1]};
  return st;
}

/*
 * The preloaded Python's first steps: wait on fd 3 for "<cwd>\0<path>" (and, for a run with tools,
 * "\0NAME=value" for the channel's variables, set before the program runs), then run the program as
 * `python3 <path>` would (sys.argv, sys.path[0], a fresh __main__, tracebacks that start in the
 * program, SystemExit codes, non-daemon threads joined and atexit handlers run, streams flushed),
 * then leave with os._exit: the interpreter's module teardown, which nothing observes, is not worth
 * its ms. It imports nothing the program would not (no runpy, which brings pkgutil and typing on
 * every run; traceback only for a traceback): each import here is CPU every pooled sandbox spends.
 */
static const char PYTHON_PRELOAD[] =
  "import os, sys\n"
  "d = b''\n"
  "while True:\n"
  "    b = os.read(3, 65536)\n"
  "    if not b: break\n"
  "    d += b\n"
  "os.close(3)\n"
  "if not d: os._exit(0)\n"
  "cwd, path, *env = os.fsdecode(d).split('\\0')\n"
  "for kv in env:\n"
  "    k, _, v = kv.partition('=')\n"
  "    os.environ[k] = v\n"
  "os.chdir(cwd)\n"
  "sys.argv = [path]\n"
  "sys.path[0] = os.path.dirname(path)\n"
  "del d, b, cwd, env\n"
  "code = 0\n"
  "try:\n"
  "    with open(path, 'rb') as f: source = f.read()\n"
  "    main = type(sys)('__main__')\n"
  "    main.__dict__.update(__file__=path, __builtins__=__builtins__, __spec__=None, __loader__=None, __package__='', __cached__=None)\n"
  "    sys.modules['__main__'] = main\n"
  "    exec(compile(source, path, 'exec'), main.__dict__)\n"
  "except SystemExit as e:\n"
  "    c = e.code\n"
  "    if c is None: code = 0\n"
  "    elif isinstance(c, int): code = c & 0xFF\n"
  "    else:\n"
  "        try: sys.stderr.write(str(c) + '\\n')\n"
  "        except Exception: pass\n"
  "        code = 1\n"
  "except BaseException as e:\n"
  "    import traceback\n"
  "    tb = e.__traceback__\n"
  "    while tb is not None and tb.tb_frame.f_code.co_filename != path:\n"
  "        tb = tb.tb_next\n"
  "    try: traceback.print_exception(type(e), e, tb)\n"
  "    except Exception: pass\n"
  "    code = 130 if isinstance(e, KeyboardInterrupt) else 1\n"
  "if 'threading' in sys.modules:\n"
  "    try: sys.modules['threading']._shutdown()\n"
  "    except Exception: pass\n"
  "import atexit\n"
  "try: atexit._run_exitfuncs()\n"
  "except Exception: pass\n"
  "for s in (sys.stdout, sys.stderr):\n"
  "    try: s.flush()\n"
  "    except Exception: pass\n"
  "os._exit(code)\n";

int main(int argc, char **argv) {
  /* Before anything else: /proc/<pid>/{mem,environ,fd} of this process closed to the program. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp(argv[1], "--hold") == 0) return hold();
  if (argc >= 2 && strcmp(argv[1], "--kill") == 0) return kill_call(argc, argv);
  {
    const char *base = strrchr(argv[0], '/');
    if (strcmp(base == NULL ? argv[0] : base + 1, "hermes-tool") == 0) return tool_client(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--tool") == 0) return tool_client(argc - 1, argv + 1);
  }

  /* --preload python: start the interpreter now, before the request (a warm pool's sandbox waits
     with it ready); it runs the program only if the request is Python code. */
  const char *preload_lang = NULL, *preload_interpreter = NULL;
  struct started preloaded = {0, -1, -1, -1, -1};
  /* Its stdin is a pipe this process feeds once the request says what the program's stdin is: the
     container's stdin also carries a tool run's replies, which the program must never hold. */
  int preloaded_feed = -1;
  if (argc >= 3 && strcmp(argv[1], "--preload") == 0 && strcmp(argv[2], "python") == 0) {
    preload_lang = "python";
    preload_interpreter = "python3";
    char *boot[] = {"python3", "-c", (char *)PYTHON_PRELOAD, NULL};
    int pf[2];
    if (pipe2(pf, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
    preloaded = start_child(boot, 1, pf[0]);
    close(pf[0]);
    preloaded_feed = pf[1];
  }

  char line[LINE_MAX_BYTES];
  read_line(line);
  if (strcmp(line, "HERMES/2") != 0) fail(PROTOCOL_ERROR, "stdin does not start with 'HERMES/2' (runner protocol version 2 expected)");

  const char *workspace = getenv("HERMES_WORKSPACE");
  const char *code_dir = getenv("HERMES_CODE_DIR");
  if (workspace == NULL || *workspace == 0) workspace = "/workspace";
  if (code_dir == NULL || *code_dir == 0) code_dir = "/tmp/.hermes";
  const char *interpreter = NULL, *ext = NULL;
  char *code = NULL, *lock = NULL, *stdin_data = NULL;
  size_t code_len = 0, cap = SIZE_MAX / 2, stdin_len = 0;
  int code_fd = -1;
  int has_code = 0, kill_leftovers = 0, nargs = 0, workspace_fd = -1, nfiles = 0, op_done = 0, locked = 0;
  char **args = calloc(MAX_ARGS + 1, sizeof(char *));
  if (args == NULL) fail(PROTOCOL_ERROR, "out of memory");

  for (;;) {
    read_line(line);
    char *sp = strchr(line, ' ');
    char *rest = sp == NULL ? line + strlen(line) : sp + 1;
    if (sp != NULL) *sp = 0;
    if (strcmp(line, "run") == 0) break;
    if (strcmp(line, "key") == 0) {
      if (strlen(rest) != 2 * KEY_BYTES) fail(PROTOCOL_ERROR, "key must be %d hex digits", 2 * KEY_BYTES);
      for (int i = 0; i < KEY_BYTES; i++) {
        int hi = hexval(rest[2 * i]), lo = hexval(rest[2 * i + 1]);
        if (hi < 0 || lo < 0) fail(PROTOCOL_ERROR, "key must be lowercase hex");
        key[i] = (unsigned char)(hi << 4 | lo);
      }
      framed = 1;
      memset(rest, 0, strlen(rest)); /* the hex copy is not needed again */
    } else if (strcmp(line, "cap") == 0) {
      cap = parse_size(rest, "cap");
    } else if (strcmp(line, "lang") == 0) {
      if (strcmp(rest, "python") == 0) interpreter = "python3", ext = "main.py";
      else if (strcmp(rest, "javascript") == 0) interpreter = "node", ext = "main.js";
      else if (strcmp(rest, "bash") == 0) interpreter = "bash", ext = "main.sh";
      else fail(PROTOCOL_ERROR, "unknown language '%.64s' (expected python, javascript or bash)", rest);
    } else if (strcmp(line, "code") == 0) {
      code_len = parse_size(rest, "code");
      code = read_blob(code_len, "code");
      has_code = 1;
    } else if (strcmp(line, "file") == 0) {
      char *sp2 = strchr(rest, ' ');
      if (sp2 == NULL) fail(PROTOCOL_ERROR, "file: expected '<path length> <content length>'");
      *sp2 = 0;
      size_t path_len = parse_size(rest, "file path length"), len = parse_size(sp2 + 1, "file length");
      if (path_len > PATH_MAX) fail(PROTOCOL_ERROR, "file path longer than %d bytes", PATH_MAX);
      if (++nfiles > MAX_FILES) fail(PROTOCOL_ERROR, "more than %d files", MAX_FILES);
      char *path = read_blob(path_len, "file path");
      if (workspace_fd < 0) {
        workspace_fd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (workspace_fd < 0) fail(PROTOCOL_ERROR, "cannot open the workspace %s: %s", workspace, strerror(errno));
      }
      int fd = open_in(workspace_fd, path, path_len);
      copy_stdin_to(fd, len, "a file");
      close(fd);
      free(path);
    } else if (strcmp(line, "arg") == 0) {
      if (nargs >= MAX_ARGS) fail(PROTOCOL_ERROR, "more than %d arguments", MAX_ARGS);
      size_t len = parse_size(rest, "arg");
      args[nargs] = read_blob(len, "an argument");
      if (strlen(args[nargs]) != len) fail(PROTOCOL_ERROR, "an argument contains a NUL byte");
      nargs++;
    } else if (strcmp(line, "lock") == 0) {
      size_t len = parse_size(rest, "lock");
      if (len == 0 || len >= PATH_MAX) fail(PROTOCOL_ERROR, "lock path length");
      lock = read_blob(len, "the lock path");
    } else if (strcmp(line, "tools") == 0) {
      /* Tool calls: the program's stdin comes in the header ("stdin"), the rest of ours is replies. */
      if (!framed) fail(PROTOCOL_ERROR, "tool calls need framed mode");
      unsigned long long a, b, c;
      if (sscanf(rest, "%llu %llu %llu", &a, &b, &c) != 3 || a == 0 || a > TOOL_CALLS_MAX || b == 0 || c == 0 || b > (1ULL << 30) || c > (1ULL << 30)) {
        fail(PROTOCOL_ERROR, "tools: expected '<calls at once, 1-%d> <request bytes> <reply bytes>'", TOOL_CALLS_MAX);
      }
      tools_on = 1;
      tool_max_in_flight = (size_t)a;
      tool_max_request = (size_t)b;
      tool_max_reply = (size_t)c;
    } else if (strcmp(line, "stdin") == 0) {
      stdin_len = parse_size(rest, "stdin");
      stdin_data = read_blob(stdin_len, "the program's stdin");
    } else if (strcmp(line, "module") == 0) {
      /* A generated module (the tools' hermes_tools) under the code directory. */
      char *sp2 = strchr(rest, ' ');
      if (sp2 == NULL) fail(PROTOCOL_ERROR, "module: expected '<path length> <content length>'");
      *sp2 = 0;
      size_t path_len = parse_size(rest, "module path length"), len = parse_size(sp2 + 1, "module length");
      if (path_len > PATH_MAX) fail(PROTOCOL_ERROR, "module path longer than %d bytes", PATH_MAX);
      char *path = read_blob(path_len, "module path");
      if (code_fd < 0) {
        prepare_code_dir(code_dir);
        code_fd = open(code_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (code_fd < 0) fail(PROTOCOL_ERROR, "cannot open %s: %s", code_dir, strerror(errno));
      }
      int fd = open_in(code_fd, path, path_len);
      copy_stdin_to(fd, len, "a module");
      close(fd);
      free(path);
    } else if (strcmp(line, "leftovers") == 0) {
      kill_leftovers = strcmp(rest, "kill") == 0;
    } else if (strcmp(line, "collect") == 0) {
      size_t len = parse_size(rest, "collect");
      if (len == 0 || len >= PATH_MAX) fail(PROTOCOL_ERROR, "collect pattern length");
      char *text = read_blob(len, "a collect pattern");
      if (strlen(text) != len) fail(PROTOCOL_ERROR, "a collect pattern contains a NUL byte");
      add_pattern(text); /* keeps `text`: the segments point into it */
    } else if (strcmp(line, "limits") == 0) {
      if (sscanf(rest, "%llu %llu %llu", &lim_files, &lim_file_bytes, &lim_total_bytes) != 3) fail(PROTOCOL_ERROR, "limits: expected '<files> <bytes per file> <bytes in all>'");
    } else if (strcmp(line, "read") == 0 || strcmp(line, "write") == 0 || strcmp(line, "list") == 0 || strcmp(line, "remove") == 0) {
      /* A file operation of a session: done here, under the session's lock; no program runs. */
      if (!framed) fail(PROTOCOL_ERROR, "a file operation needs framed mode");
      if (op_done) fail(PROTOCOL_ERROR, "one file operation per call");
      unsigned long long a = 0, b = 0, path_len = 0;
      int words = sscanf(rest, "%llu %llu %llu", &path_len, &a, &b);
      int needed = strcmp(line, "read") == 0 || strcmp(line, "write") == 0 ? 3 : 1;
      if (words != needed) fail(PROTOCOL_ERROR, "%s: expected %d numbers", line, needed);
      if (path_len == 0 || path_len >= PATH_MAX) fail(PROTOCOL_ERROR, "%s: path length", line);
      char *path = read_blob((size_t)path_len, "a path");
      if (lock != NULL && !locked) {
        take_lock(lock);
        locked = 1;
      }
      if (strlen(path) != path_len) {
        if (line[0] == 'w') skip_stdin((size_t)a);
        op_failed(EINVAL, "the path contains a NUL byte");
      }
      else if (line[0] == 'r' && line[2] == 'a') op_read(workspace, path, a, b);
      else if (line[0] == 'w') op_write(workspace, path, (size_t)a, (unsigned)b);
      else if (line[0] == 'l') op_list(workspace, path);
      else op_remove(workspace, path);
      op_done = 1;
      free(path);
    } else {
      fail(PROTOCOL_ERROR, "unknown header line '%.64s'", line);
    }
  }
#ifdef HERMES_FUZZ
  /* Fuzzing only (images/runner/fuzz/, scripts/fuzz-supervisor.sh; never defined in the image's
     build): the header is parsed. What follows starts the program and signals processes, which a
     fuzzer's process must not do: the harness takes over here and ends this "process" as an exit would. */
  extern void hermes_fuzz_header_end(void);
  hermes_fuzz_header_end();
#endif
  if (workspace_fd >= 0) close(workspace_fd);
  if (code_fd >= 0) close(code_fd);
  if (op_done) {
    frame('x', "0 0 0 0", 7);
    return 0;
  }

  char main_path[PATH_MAX];
  if (has_code) {
    if (interpreter == NULL) fail(PROTOCOL_ERROR, "code without a language");
    prepare_code_dir(code_dir);
    snprintf(main_path, sizeof main_path, "%s/%s", code_dir, ext);
    int fd = open(main_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) < 0 || write_all(fd, code, code_len) < 0) fail(PROTOCOL_ERROR, "cannot write %s: %s", main_path, strerror(errno));
    close(fd);
    free(code);
    args[0] = (char *)interpreter;
    args[1] = main_path;
    args[2] = NULL;
    nargs = 2;
    if (chdir(workspace) < 0) fail(PROTOCOL_ERROR, "cannot enter the workspace %s: %s", workspace, strerror(errno));
  } else if (nargs == 0) {
    fail(PROTOCOL_ERROR, "nothing to run (no code and no arguments)");
  }
  args[nargs] = NULL;

  if (!framed) {
    /* Plain mode: become the program. */
    signal(SIGPIPE, SIG_DFL);
    execvp(args[0], args);
    fail(errno == ENOENT ? INTERPRETER_MISSING : PROTOCOL_ERROR, "cannot run %s: %s", args[0], strerror(errno));
  }

  if (lock != NULL && !locked) take_lock(lock);
  if (kill_leftovers) kill_others(0, 0, 0);

  /* With tools, the channel is up before the program exists, or the run fails here (126, 'E'):
     never a program that finds itself without the tools it was given. */
  int feed[2] = {-1, -1};
  if (tools_on) {
    prepare_code_dir(code_dir);
    tools_listen_at(code_dir);
  }

  struct started run;
  /* pumping: the program's stdin is what follows `run` on ours, relayed into its pipe (a preloaded
     interpreter without tools); with tools it is the header's `stdin`, fed from memory. */
  int pumping = 0;
  if (preloaded.pid > 0 && preload_lang != NULL && interpreter != NULL && strcmp(interpreter, preload_interpreter) == 0 && has_code) {
    /* The interpreter started before the request arrived (warm pool): tell it where to go, and
       with tools the channel's environment (it was forked before the channel existed). */
    run = preloaded;
    char go[2 * PATH_MAX + 8 * PATH_MAX];
    int n = snprintf(go, sizeof go, "%s%c%s", workspace, 0, main_path);
    static const char *const tool_env[] = {"HERMES_TOOLS_SOCKET", "PYTHONPATH", "NODE_PATH", "PATH"};
    for (size_t i = 0; tools_on && n >= 0 && i < sizeof tool_env / sizeof tool_env[0]; i++) {
      const char *v = getenv(tool_env[i]);
      if (v != NULL && (size_t)n < sizeof go) n += snprintf(go + n, sizeof go - (size_t)n, "%c%s=%s", 0, tool_env[i], v);
    }
    if (n < 0 || (size_t)n >= sizeof go || write_all(run.go, go, (size_t)n) < 0) fail(PROTOCOL_ERROR, "cannot hand the program to the interpreter");
    close(run.go);
    feed[1] = preloaded_feed;
    pumping = !tools_on;
  } else {
    if (preloaded.pid > 0) {
      /* Preloaded for another language: not this run's. */
      kill(preloaded.pid, SIGKILL);
      waitpid(preloaded.pid, NULL, 0);
      close(preloaded.out);
      close(preloaded.err);
      close(preloaded.go);
      close(preloaded_feed);
    }
    if (tools_on && pipe2(feed, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
    run = start_child(args, 0, feed[0]);
    if (feed[0] >= 0) close(feed[0]);
  }
  pid_t child = run.pid;
  size_t fed = 0, pump_len = 0, pump_off = 0;
  static unsigned char pump_buf[CHUNK];
  if (feed[1] >= 0) {
    fcntl(feed[1], F_SETFL, O_NONBLOCK);
    if (tools_on && stdin_len == 0) {
      close(feed[1]);
      feed[1] = -1;
    }
  }
  if (!tools_on && !pumping) {
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, 0); /* the program's stdin is the program's alone now */
  }

  {
    pid_t pp;
    char state;
    unsigned long long start = 0;
    proc_stat(child, &pp, &state, &start);
    char msg[64];
    int n = snprintf(msg, sizeof msg, "%d %llu", (int)child, start);
    frame('p', msg, (size_t)n);
  }

  static unsigned char buf[CHUNK];
  int sfd = run.sfd;
  struct relay streams[2] = {{run.out, 'o', 0, 0, 0}, {run.err, 'e', 0, 0, 0}};
  int open_streams = 2, status = 0, exited = 0, outside_signal = 0;
  while (!exited) {
    struct pollfd fds[5 + TOOL_CALLS_MAX];
    int nfds = 0, idx[2], host_at = -1, listen_at = -1, feed_at = -1, call_at[TOOL_CALLS_MAX];
    for (int i = 0; i < 2; i++) {
      if (streams[i].fd >= 0) {
        fds[nfds].fd = streams[i].fd;
        fds[nfds].events = POLLIN;
        idx[i] = nfds++;
      } else {
        idx[i] = -1;
      }
    }
    fds[nfds].fd = sfd;
    fds[nfds].events = POLLIN;
    int sig_at = nfds++;
    int pump_at = -1;
    if (pumping) {
      if (pump_off < pump_len) fds[feed_at = nfds++] = (struct pollfd){.fd = feed[1], .events = POLLOUT};
      else fds[pump_at = nfds++] = (struct pollfd){.fd = 0, .events = POLLIN};
    }
    if (tools_on) {
      if (host_in_open) fds[host_at = nfds++] = (struct pollfd){.fd = 0, .events = POLLIN};
      if (tools_busy < (int)tool_max_in_flight) fds[listen_at = nfds++] = (struct pollfd){.fd = tools_listen, .events = POLLIN};
      if (feed[1] >= 0) fds[feed_at = nfds++] = (struct pollfd){.fd = feed[1], .events = POLLOUT};
      for (int i = 0; i < TOOL_CALLS_MAX; i++) {
        call_at[i] = -1;
        if (calls[i].state == 0 || calls[i].fd < 0) continue;
        /* Waiting for the host: no events asked, but a hang-up (the caller went away) still shows. */
        short ev = calls[i].state == 1 ? POLLIN : calls[i].state == 3 ? POLLOUT : 0;
        fds[call_at[i] = nfds++] = (struct pollfd){.fd = calls[i].fd, .events = ev};
      }
    }
    if (poll(fds, (nfds_t)nfds, -1) < 0) {
      if (errno == EINTR) continue;
      fail(PROTOCOL_ERROR, "poll: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
      if (idx[i] >= 0 && (fds[idx[i]].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (!pump(&streams[i], cap, buf)) {
          close(streams[i].fd);
          streams[i].fd = -1;
          open_streams--;
        }
      }
    }
    if (pumping) {
      int stop = 0;
      if (pump_at >= 0 && fds[pump_at].revents) {
        ssize_t r = read(0, pump_buf, sizeof pump_buf);
        if (r > 0) pump_len = (size_t)r, pump_off = 0;
        else if (r == 0 || (errno != EINTR && errno != EAGAIN)) stop = 1; /* the program's stdin ended */
      }
      if (feed_at >= 0 && fds[feed_at].revents) {
        ssize_t w = write(feed[1], pump_buf + pump_off, pump_len - pump_off);
        if (w > 0) pump_off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR) stop = 1; /* the program closed its stdin */
      }
      if (stop) {
        close(feed[1]);
        feed[1] = -1;
        pumping = 0;
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull >= 0) dup2(devnull, 0);
      }
    }
    if (tools_on) {
      if (feed_at >= 0 && fds[feed_at].revents) {
        ssize_t w = write(feed[1], stdin_data + fed, stdin_len - fed);
        if (w > 0) fed += (size_t)w;
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || fed == stdin_len) {
          close(feed[1]); /* all of it given, or the program closed its stdin */
          feed[1] = -1;
        }
      }
      for (int i = 0; i < TOOL_CALLS_MAX; i++) {
        if (call_at[i] < 0 || fds[call_at[i]].revents == 0) continue;
        struct call *c = &calls[i];
        if (c->state == 1) call_read(c);
        else if (c->state == 3) call_write(c);
        else if (c->state == 2 && (fds[call_at[i]].revents & (POLLHUP | POLLERR))) {
          /* The caller went away while the host serves its call: tell the host (it cancels the
             handler, and sends no reply) and free the slot now; a late reply finds no call and is dropped. */
          char msg[16];
          int n = snprintf(msg, sizeof msg, "%u", c->id);
          frame('q', msg, (size_t)n);
          call_free(c);
        }
      }
      if (host_at >= 0 && (fds[host_at].revents & (POLLIN | POLLHUP | POLLERR))) tools_reply();
      if (listen_at >= 0 && (fds[listen_at].revents & POLLIN)) tools_accept();
    }
    if (fds[sig_at].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) continue;
        /* Sent from outside the sandbox's pid namespace (the engine, docker kill/stop): the sender's
           pid reads 0 here. The end that follows is then not the program's own result. */
        if (si.ssi_pid == 0 && outside_signal == 0) outside_signal = (int)si.ssi_signo;
        kill(child, (int)si.ssi_signo);
      }
      int st;
      pid_t p;
      while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == child) {
          status = st;
          exited = 1;
        }
      }
    }
  }
  /* No call is taken after the program's end: callers still waiting (a background process) get EOF. */
  if (tools_on) tools_close();
  if (feed[1] >= 0) close(feed[1]);
  /* The program's process has exited: what it (or a child) wrote before is in the pipes now. Read
     that much and no more (FIONREAD): a background process that keeps writing must not hold the
     report back for ever. Only if the count is unknown, read until the pipe is empty. */
  for (int i = 0; i < 2; i++) {
    if (streams[i].fd < 0) continue;
    int pending = -1;
    if (ioctl(streams[i].fd, FIONREAD, &pending) < 0 || pending < 0) pending = -1;
    fcntl(streams[i].fd, F_SETFL, O_NONBLOCK);
    while (pending != 0) {
      ssize_t n = read(streams[i].fd, buf, pending > 0 && pending < CHUNK ? (size_t)pending : CHUNK);
      if (n <= 0) break;
      if (pending > 0) pending = n >= pending ? 0 : pending - (int)n;
      relay_bytes(&streams[i], buf, (size_t)n, cap);
    }
  }
  (void)open_streams;
  int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  if (exit_code > 255) exit_code = 255;
  if (kill_leftovers) kill_others(0, 0, 0);
  if (npatterns > 0) collect(workspace);
  char msg[96];
  int n = snprintf(msg, sizeof msg, "%d %llu %llu %d", exit_code, streams[0].total, streams[1].total, outside_signal);
  frame('x', msg, (size_t)n);
  return exit_code;
}
