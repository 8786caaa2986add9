/*
 * What every libFuzzer target of the supervisor shares (scripts/fuzz-supervisor.sh builds and runs
 * them through ../Makefile; hostile review 2, #10). A target #includes this file, which #includes the
 * supervisor's files themselves (unity.c, all of them as one translation unit): the static parsers
 * are called as they are, nothing of them is copied.
 *
 * hermes-run is a one-shot process: it reads one header, and a bad one ends it (fail() -> _exit).
 * A fuzzer runs millions of inputs in one process, so each input gets a "process" emulated here,
 * around the unchanged code, by function-like macros defined only while the supervisor is compiled
 * into the target:
 *
 *   _exit        longjmps back to the harness: fail(), the supervisor's only way out on bad input,
 *                ends with _exit (so does frame() when stdout is gone). No change to the supervisor:
 *                fail() still formats and sends its 'E' frame (or stderr line) as it does.
 *   header end   hermes-run.c's one change (7 lines, under #ifdef HERMES_FUZZ, defined here and
 *                never in the image's build, whose binary is byte-for-byte the same): once `run`
 *                ends the header, main() calls hermes_fuzz_header_end(), which longjmps back too.
 *                What follows starts the program and SIGKILLs processes (kill_others): never in a
 *                fuzzer. main itself is renamed hermes_run_main (libFuzzer has the process's main).
 *   "exit"       what the kernel does when that process ends: every allocation the code made is
 *                freed and every descriptor it opened is closed. The allocations go through
 *                malloc/calloc/realloc/strdup/strndup/free wrappers that keep a list (with the
 *                pointers hidden from LeakSanitizer, so a real leak is still a leak); descriptors
 *                are found in /proc/self/fd, against the ones open when the target started. A target
 *                that calls a function which runs many times in one real process (the tool
 *                channel's) checks instead that nothing is left: that would be a real leak.
 *   stdin        read(0) serves the fuzzer's bytes (at EOF: 0, as a closed pipe).
 *   stdout/err   write/writev on 1 and 2 are captured (stdout is checked to be well-formed frames).
 *   the files    the absolute paths the supervisor opens itself ("/workspace", "/tmp", its code
 *                directory, a session's lock) are resolved inside a private root under $TMPDIR,
 *                as if chrooted (openat2 RESOLVE_IN_ROOT): nothing outside it is ever created,
 *                written or removed, whatever path the fuzzer invents. The root holds a small
 *                workspace (a file, a directory, a symlink, a FIFO, and symlinks "out" leading
 *                OUTSIDE the root to a sentinel directory); after every input that changed
 *                anything, the sentinel is checked (a write, removal or chmod that followed a
 *                symlink out fails the target) and the root is rebuilt, so every input starts
 *                from the same files (reproducible).
 *   refused      kill, fork, execvp, chdir, unlink, symlink, setenv, bind abort the target if they
 *                are ever reached: none of them may run before the header's end.
 *   memory       an allocation of more than FZ_MALLOC_MAX fails (NULL), as in a container with a
 *                memory limit: a header's length is believed (the host is trusted for it), so
 *                "code 9999999999" asks for that much before reading it; the real supervisor then
 *                fails either at malloc ("out of memory") or at the end of stdin, both exit 126.
 *                (Without this, libFuzzer's -malloc_limit_mb would call that a crash.)
 *
 * Each target's global state (the supervisor's statics) is reset to its initial values
 * before each input (fz_reset_supervisor: keep it in step with the initializers there).
 *
 * HERMES_FUZZ_DEBUG=1 prints, per input, how the "process" ended, how much of stdin it read, its
 * stderr and its frames: replay a reproducer with it (images/runner/fuzz/build/<target> <file>).
 */
#ifndef HERMES_FUZZ_COMMON_H
#define HERMES_FUZZ_COMMON_H

/* The headers the supervisor includes (hermes-run.h), first and with _GNU_SOURCE (it defines it
   again, identically), so that the macros below rename only the supervisor's calls, never the
   system's declarations. */
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
/* The harness's own. */
#include <linux/openat2.h>
#include <setjmp.h>
#include <sys/syscall.h>

#define FZ_MALLOC_MAX (64UL << 20)
#define FZ_CAPTURE_MAX (4UL << 20)

/* ---- the emulated process ------------------------------------------------------------------- */

static jmp_buf fz_jmp;
static int fz_armed = 0;
static int fz_exit_code = -1; /* the code passed to _exit; -1: none (returned, or the header's end) */

/* Declared (extern) in hermes-run.c under HERMES_FUZZ. */
void hermes_fuzz_header_end(void);
void hermes_fuzz_header_end(void) {
  if (!fz_armed) abort();
  longjmp(fz_jmp, 2);
}

__attribute__((noreturn)) static void fz_exit(int code) {
  if (!fz_armed) abort();
  fz_exit_code = code;
  longjmp(fz_jmp, 1);
}

__attribute__((noreturn)) static void fz_refused(const char *what) {
  fprintf(stderr, "\nharness: hermes-run reached %s() while fuzzed: it must not before the header's end\n", what);
  abort();
}

/* stdin: the fuzzer's bytes. */
static const uint8_t *fz_in;
static size_t fz_in_len, fz_in_at;

/* stdout and stderr as written (the first FZ_CAPTURE_MAX bytes; the total is counted). */
struct fz_capture {
  unsigned char *buf;
  size_t len, total;
};
static struct fz_capture fz_out, fz_err;

static void fz_capture_add(struct fz_capture *c, const void *p, size_t n) {
  if (c->buf == NULL) c->buf = malloc(FZ_CAPTURE_MAX);
  size_t room = FZ_CAPTURE_MAX - c->len;
  size_t take = n < room ? n : room;
  memcpy(c->buf + c->len, p, take);
  c->len += take;
  c->total += n;
}

static ssize_t fz_read(int fd, void *buf, size_t n) {
  if (fd != 0) return read(fd, buf, n);
  size_t left = fz_in_len - fz_in_at, take = n < left ? n : left;
  memcpy(buf, fz_in + fz_in_at, take);
  fz_in_at += take;
  return (ssize_t)take;
}

static ssize_t fz_write(int fd, const void *buf, size_t n) {
  if (fd != 1 && fd != 2) return write(fd, buf, n);
  fz_capture_add(fd == 1 ? &fz_out : &fz_err, buf, n);
  return (ssize_t)n;
}

static ssize_t fz_writev(int fd, const struct iovec *iov, int n) {
  if (fd != 1 && fd != 2) return writev(fd, iov, n);
  ssize_t total = 0;
  for (int i = 0; i < n; i++) {
    fz_capture_add(fd == 1 ? &fz_out : &fz_err, iov[i].iov_base, iov[i].iov_len);
    total += (ssize_t)iov[i].iov_len;
  }
  return total;
}

/* Allocations: a list of the live ones, each pointer XORed with a mask so that LeakSanitizer, which
   scans memory for pointers, does not count the list as a reference. */
#define FZ_HIDE(p) ((uintptr_t)(p) ^ (uintptr_t)0xa5a5a5a5a5a5a5a5ULL)
static uintptr_t *fz_live;
static size_t fz_nlive, fz_live_cap;

static void fz_track(void *p) {
  if (p == NULL) return;
  if (fz_nlive == fz_live_cap) {
    fz_live_cap = fz_live_cap ? fz_live_cap * 2 : 1024;
    fz_live = realloc(fz_live, fz_live_cap * sizeof *fz_live);
    if (fz_live == NULL) abort();
  }
  fz_live[fz_nlive++] = FZ_HIDE(p);
}

static void fz_untrack(void *p) {
  if (p == NULL) return;
  for (size_t i = fz_nlive; i-- > 0;) {
    if (fz_live[i] == FZ_HIDE(p)) {
      fz_live[i] = fz_live[--fz_nlive];
      return;
    }
  }
  fprintf(stderr, "\nharness: free() of a pointer hermes-run did not allocate (or freed twice)\n");
  abort();
}

static void *fz_malloc(size_t n) {
  if (n > FZ_MALLOC_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = malloc(n);
  fz_track(p);
  return p;
}

static void *fz_calloc(size_t n, size_t size) {
  if (size != 0 && n > FZ_MALLOC_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = calloc(n, size);
  fz_track(p);
  return p;
}

static void *fz_realloc(void *old, size_t n) {
  if (n > FZ_MALLOC_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = realloc(old, n);
  if (p != NULL) {
    fz_untrack(old);
    fz_track(p);
  }
  return p;
}

static void fz_free(void *p) {
  fz_untrack(p);
  free(p);
}

static char *fz_strdup(const char *s) {
  char *p = strdup(s);
  fz_track(p);
  return p;
}

static char *fz_strndup(const char *s, size_t n) {
  char *p = strndup(s, n);
  fz_track(p);
  return p;
}

/* The process has ended: what it held is released. */
static void fz_free_all(void) {
  for (size_t i = 0; i < fz_nlive; i++) free((void *)FZ_HIDE(fz_live[i]));
  fz_nlive = 0;
}

/* Descriptors open before any input ran (libFuzzer's, the harness's). */
static unsigned char fz_fd_baseline[4096];

/* A directory's entries with getdents64 into a buffer on the stack: no DIR (32 KiB each time). */
struct fz_dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

static int fz_scan_fds(int (*each)(int fd)) {
  int self = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (self < 0) abort();
  _Alignas(8) char buf[4096];
  int found = 0;
  long n;
  while ((n = syscall(SYS_getdents64, self, buf, sizeof buf)) > 0) {
    for (long at = 0; at < n;) {
      struct fz_dirent64 *e = (struct fz_dirent64 *)(buf + at);
      at += e->reclen;
      if (e->name[0] == '.') continue;
      int fd = atoi(e->name);
      if (fd != self) found += each(fd);
    }
  }
  close(self);
  return found;
}

static int fz_fd_note(int fd) {
  if (fd >= 0 && fd < (int)sizeof fz_fd_baseline) fz_fd_baseline[fd] = 1;
  return 0;
}

static int fz_fd_is_new(int fd) { return fd >= (int)sizeof fz_fd_baseline || !fz_fd_baseline[fd]; }

static int fz_fd_close_new(int fd) {
  if (!fz_fd_is_new(fd)) return 0;
  close(fd);
  return 1;
}

/* ---- the files: a private root ------------------------------------------------------------------ */

static char fz_base[PATH_MAX];    /* $TMPDIR/hermes-fuzz.XXXXXX: root/ and outside/ */
static char fz_rootdir[PATH_MAX]; /* what "/" is for the supervisor */
static int fz_root_fd = -1;
static int fz_dirty = 0; /* something was created, written, removed or chmod'ed */
/* The supervisor opened or made a path of its own (from the header: a session's lock) outside
   /workspace and /tmp: the host chooses where, so what appears at the root is then not checked. */
static int fz_host_path = 0;

static void fz_note_path(const char *path) {
  if (strncmp(path, "/workspace/", 11) != 0 && strncmp(path, "/tmp/", 5) != 0 && strcmp(path, "/workspace") != 0 && strcmp(path, "/tmp") != 0) fz_host_path = 1;
}
static struct stat fz_outside_st, fz_secret_st;

static int fz_open_in_root(const char *path, int flags, mode_t mode) {
  const char *rel = path;
  while (*rel == '/') rel++;
  if (*rel == 0) rel = ".";
  struct open_how how = {.flags = (uint64_t)(unsigned)flags, .mode = (flags & O_CREAT) ? mode : 0, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  return (int)syscall(SYS_openat2, fz_root_fd, rel, &how, sizeof how);
}

static int fz_open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & O_CREAT) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  if (flags & (O_CREAT | O_TRUNC | O_WRONLY | O_RDWR)) fz_dirty = 1;
  fz_note_path(path);
  return fz_open_in_root(path, flags, mode);
}

/* The directory holding `path` (in the root) and the last name; -1 if there is none to act on. */
static int fz_parent_in_root(const char *path, char *leaf) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", path);
  size_t n = strlen(copy);
  while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;
  char *slash = strrchr(copy, '/');
  const char *dir = ".";
  if (slash != NULL) {
    *slash = 0;
    dir = slash == copy ? "/" : copy;
    snprintf(leaf, NAME_MAX + 1, "%s", slash + 1);
  } else {
    snprintf(leaf, NAME_MAX + 1, "%s", copy);
  }
  if (leaf[0] == 0 || strcmp(leaf, ".") == 0 || strcmp(leaf, "..") == 0) {
    errno = EEXIST;
    return -1;
  }
  return fz_open_in_root(dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
}

static int fz_mkdir(const char *path, mode_t mode) {
  char leaf[NAME_MAX + 1];
  int dir = fz_parent_in_root(path, leaf);
  if (dir < 0) return -1;
  fz_dirty = 1;
  fz_note_path(path);
  int r = mkdirat(dir, leaf, mode);
  int e = errno;
  close(dir);
  errno = e;
  return r;
}

static int fz_lstat(const char *path, struct stat *st) {
  int fd = fz_open_in_root(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  int r = fstat(fd, st);
  close(fd);
  return r;
}

static int fz_chmod(const char *path, mode_t mode) {
  int fd = fz_open_in_root(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  fz_dirty = 1;
  int r = fchmod(fd, mode);
  close(fd);
  return r;
}

/* The calls relative to a directory the supervisor opened (all inside the root): real, noted. */
static int fz_openat(int dir, const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & O_CREAT) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  if (flags & (O_CREAT | O_TRUNC | O_WRONLY | O_RDWR)) fz_dirty = 1;
  return openat(dir, path, flags, mode);
}

static int fz_mkdirat(int dir, const char *path, mode_t mode) {
  fz_dirty = 1;
  return mkdirat(dir, path, mode);
}

static int fz_unlinkat(int dir, const char *path, int flags) {
  fz_dirty = 1;
  return unlinkat(dir, path, flags);
}

static int fz_fchmod(int fd, mode_t mode) {
  fz_dirty = 1;
  return fchmod(fd, mode);
}

static int fz_prctl(int option, ...) {
  (void)option; /* PR_SET_DUMPABLE 0: the fuzzer's process stays dumpable (cores, LeakSanitizer) */
  return 0;
}

static int fz_kill(pid_t pid, int sig) {
  (void)pid, (void)sig;
  fz_refused("kill");
}
static pid_t fz_fork(void) { fz_refused("fork"); }
static int fz_execvp(const char *file, char *const argv[]) {
  (void)file, (void)argv;
  fz_refused("execvp");
}
static int fz_chdir(const char *path) {
  (void)path;
  fz_refused("chdir");
}
static int fz_unlink(const char *path) {
  (void)path;
  fz_refused("unlink");
}
static int fz_symlink(const char *a, const char *b) {
  (void)a, (void)b;
  fz_refused("symlink");
}
static int fz_setenv(const char *a, const char *b, int c) {
  (void)a, (void)b, (void)c;
  fz_refused("setenv");
}
static int fz_bind(int fd, const struct sockaddr *a, socklen_t n) {
  (void)fd, (void)a, (void)n;
  fz_refused("bind");
}

/* ---- the supervisor, compiled in with its calls renamed ---------------------------------------- */

#define HERMES_FUZZ 1
#define main hermes_run_main
#define _exit(code) fz_exit(code)
#define read(fd, buf, n) fz_read(fd, buf, n)
#define write(fd, buf, n) fz_write(fd, buf, n)
#define writev(fd, iov, n) fz_writev(fd, iov, n)
#define malloc(n) fz_malloc(n)
#define calloc(n, size) fz_calloc(n, size)
#define realloc(p, n) fz_realloc(p, n)
#define free(p) fz_free(p)
#define strdup(s) fz_strdup(s)
#define strndup(s, n) fz_strndup(s, n)
#define open(...) fz_open(__VA_ARGS__)
#define openat(...) fz_openat(__VA_ARGS__)
#define mkdir(path, mode) fz_mkdir(path, mode)
#define mkdirat(dir, path, mode) fz_mkdirat(dir, path, mode)
#define unlinkat(dir, path, flags) fz_unlinkat(dir, path, flags)
#define lstat(path, st) fz_lstat(path, st)
#define chmod(path, mode) fz_chmod(path, mode)
#define fchmod(fd, mode) fz_fchmod(fd, mode)
#define prctl(...) fz_prctl(__VA_ARGS__)
#define kill(pid, sig) fz_kill(pid, sig)
#define fork() fz_fork()
#define execvp(file, argv) fz_execvp(file, argv)
#define chdir(path) fz_chdir(path)
#define unlink(path) fz_unlink(path)
#define symlink(a, b) fz_symlink(a, b)
#define setenv(a, b, c) fz_setenv(a, b, c)
#define bind(fd, a, n) fz_bind(fd, a, n)

#include "unity.c"

#undef main
#undef _exit
#undef read
#undef write
#undef writev
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef strdup
#undef strndup
#undef open
#undef openat
#undef mkdir
#undef mkdirat
#undef unlinkat
#undef lstat
#undef chmod
#undef fchmod
#undef prctl
#undef kill
#undef fork
#undef execvp
#undef chdir
#undef unlink
#undef symlink
#undef setenv
#undef bind

/* ---- per input ---------------------------------------------------------------------------------- */

/* The supervisor's statics, as its initializers have them (a fresh process). */
static void fz_reset_supervisor(void) {
  framed = 0;
  memset(key, 0, sizeof key);
  memset(patterns, 0, sizeof patterns);
  npatterns = 0;
  lim_files = COLLECT_DEFAULT_FILES, lim_file_bytes = COLLECT_DEFAULT_FILE_BYTES, lim_total_bytes = COLLECT_DEFAULT_TOTAL_BYTES;
  sent_files = 0, sent_bytes = 0, visited = 0;
  skipped_frames = 0, skipped_name_bytes = 0;
  memset(skipped_omitted, 0, sizeof skipped_omitted);
  memset(calls, 0, sizeof calls);
  tools_on = 0, tools_listen = -1, tools_busy = 0, host_in_open = 1;
  tool_max_in_flight = 8, tool_max_request = 1 << 20, tool_max_reply = 1 << 20;
  next_call_id = 1;
  memset(tools_socket, 0, sizeof tools_socket);
  signal_fd = -1;
  exit_hook = NULL;
  nfrozen = 0;
  memset(&k, 0, sizeof k);
  k.ctl = k.sfd = k.lock_fd = k.code_w = k.rec = k.out.fd = k.err.fd = k.idle[0] = k.idle[1] = -1;
}

/* Remove everything inside the directory `fd` (closed here), never following a symlink, with one
   descriptor at a time and no path longer than a name: a fuzzer makes trees 2,000 levels deep,
   deeper than nftw (PATH_MAX) or the descriptor limit allow. */
static void fz_empty_dir(int fd) {
  int depth = 0;
  _Alignas(8) char buf[8192];
  for (long rounds = 0; fd >= 0; rounds++) {
    if (rounds > 10000000) {
      fprintf(stderr, "\nharness: cannot empty the fuzz root %s\n", fz_base);
      abort();
    }
    lseek(fd, 0, SEEK_SET);
    int descended = 0, removed = 0;
    long n;
    while (!descended && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
      for (long at = 0; at < n;) {
        struct fz_dirent64 *e = (struct fz_dirent64 *)(buf + at);
        at += e->reclen;
        const char *name = e->name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (unlinkat(fd, name, 0) == 0 || unlinkat(fd, name, AT_REMOVEDIR) == 0) {
          removed = 1;
          continue;
        }
        int child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child < 0) continue;
        close(fd);
        fd = child;
        depth++;
        descended = 1;
        break;
      }
    }
    if (descended || removed) continue; /* again until a pass finds nothing to do */
    if (depth == 0) break;
    int parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the now empty one goes next */
    close(fd);
    fd = parent;
    depth--;
  }
  if (fd >= 0) close(fd);
}

static void fz_put(const char *rel, const char *content, mode_t mode) {
  int fd = openat(fz_root_fd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0 || write(fd, content, strlen(content)) < 0) abort();
  fchmod(fd, mode);
  close(fd);
}

/* The files every input starts from. */
static void fz_build_root(void) {
  fz_empty_dir(dup(fz_root_fd));
  if (mkdirat(fz_root_fd, "workspace", 0755) < 0 || mkdirat(fz_root_fd, "workspace/dir", 0755) < 0 ||
      mkdirat(fz_root_fd, "workspace/empty", 0755) < 0 || mkdirat(fz_root_fd, "tmp", 01777) < 0) {
    abort();
  }
  fz_put("workspace/hello.txt", "hello\n", 0644);
  fz_put("workspace/dir/nested.txt", "nested\n", 0600);
  fz_put("tmp/note.txt", "note\n", 0644);
  /* Symlinks the supervisor must never follow: "out" leads out of the root to the sentinel. */
  if (symlinkat("hello.txt", fz_root_fd, "workspace/link") < 0 || symlinkat("dir", fz_root_fd, "workspace/dirlink") < 0 ||
      symlinkat("../../outside", fz_root_fd, "workspace/out") < 0 || symlinkat("../../outside", fz_root_fd, "tmp/out") < 0 ||
      symlinkat("../../outside/secret", fz_root_fd, "workspace/secretlink") < 0 || mkfifoat(fz_root_fd, "workspace/fifo", 0644) < 0) {
    abort();
  }
  fz_dirty = 0;
}

static void fz_cleanup(void) {
  if (fz_base[0] == 0) return;
  fz_empty_dir(open(fz_base, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  rmdir(fz_base);
  fz_base[0] = 0;
}

static void fz_init(void) {
  if (fz_root_fd >= 0) return;
  signal(SIGPIPE, SIG_IGN); /* as hermes-run's main does: a closed caller is an EPIPE, not the end */
  const char *tmp = getenv("TMPDIR");
  snprintf(fz_base, sizeof fz_base, "%s/hermes-fuzz.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
  if (mkdtemp(fz_base) == NULL) {
    perror("harness: mkdtemp");
    abort();
  }
  atexit(fz_cleanup);
  char outside[PATH_MAX + 32], secret[PATH_MAX + 64];
  snprintf(fz_rootdir, sizeof fz_rootdir, "%s/root", fz_base);
  snprintf(outside, sizeof outside, "%s/outside", fz_base);
  snprintf(secret, sizeof secret, "%s/secret", outside);
  if (mkdir(fz_rootdir, 0755) < 0 || mkdir(outside, 0755) < 0) abort();
  int fd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, "secret\n", 7) != 7) abort();
  close(fd);
  if (stat(outside, &fz_outside_st) < 0 || stat(secret, &fz_secret_st) < 0) abort();
  fz_root_fd = open(fz_rootdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fz_root_fd < 0) abort();
  fz_build_root();
  /* As the images set them (the defaults): the paths the supervisor sees are the real ones. */
  setenv("HERMES_WORKSPACE", "/workspace", 1);
  setenv("HERMES_CODE_DIR", "/tmp/.hermes", 1);
  fz_scan_fds(fz_fd_note);
}

static void fz_begin(const uint8_t *in, size_t len) {
  fz_init();
  fz_reset_supervisor();
  fz_in = in, fz_in_len = len, fz_in_at = 0;
  fz_out.len = fz_out.total = 0;
  fz_err.len = fz_err.total = 0;
  fz_exit_code = -1;
  fz_host_path = 0;
}

/* The sentinel outside the root is as it was: nothing followed a symlink out. */
static void fz_check_outside(void) {
  char outside[PATH_MAX + 32], secret[PATH_MAX + 64];
  snprintf(outside, sizeof outside, "%s/outside", fz_base);
  snprintf(secret, sizeof secret, "%s/secret", outside);
  struct stat o, s;
  if (stat(outside, &o) < 0 || stat(secret, &s) < 0 || o.st_mtim.tv_sec != fz_outside_st.st_mtim.tv_sec ||
      o.st_mtim.tv_nsec != fz_outside_st.st_mtim.tv_nsec || o.st_nlink != fz_outside_st.st_nlink || s.st_size != fz_secret_st.st_size ||
      s.st_mode != fz_secret_st.st_mode || s.st_mtim.tv_sec != fz_secret_st.st_mtim.tv_sec || s.st_mtim.tv_nsec != fz_secret_st.st_mtim.tv_nsec ||
      s.st_ctim.tv_sec != fz_secret_st.st_ctim.tv_sec || s.st_ctim.tv_nsec != fz_secret_st.st_ctim.tv_nsec) {
    fprintf(stderr, "\nharness: a file operation changed %s, OUTSIDE the sandbox's roots (a symlink was followed)\n", outside);
    abort();
  }
  /* Nothing new at the root's top either (a '..' that got through would put it there). */
  if (fz_host_path) return;
  DIR *d = opendir(fz_rootdir);
  if (d == NULL) abort();
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *n = e->d_name;
    if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, "workspace") && strcmp(n, "tmp")) {
      fprintf(stderr, "\nharness: '/%s' was created at the root, outside the sandbox's roots\n", n);
      abort();
    }
  }
  closedir(d);
}

/* stdout is a sequence of whole frames: <16-byte key><type><4-byte length><payload>. */
static void fz_check_frames(void) {
  if (fz_out.total > fz_out.len) return; /* more than was kept: not checked */
  size_t at = 0;
  while (at < fz_out.len) {
    if (fz_out.len - at < FRAME_HEAD) {
      fprintf(stderr, "\nharness: stdout ends inside a frame's head\n");
      abort();
    }
    const unsigned char *h = fz_out.buf + at;
    char type = (char)h[KEY_BYTES];
    size_t len = (size_t)h[KEY_BYTES + 1] << 24 | (size_t)h[KEY_BYTES + 2] << 16 | (size_t)h[KEY_BYTES + 3] << 8 | h[KEY_BYTES + 4];
    size_t max = type == 'c' || type == 'a' || type == 'm' ? CHUNK : type == 'E' ? 1023 : type == 'r' ? 1199 : PATH_MAX + 256 + 64;
    if (strchr("EkrfcFnwlsStbaqMmNZG", type) == NULL || type == 0 || len > max || fz_out.len - at - FRAME_HEAD < len) {
      fprintf(stderr, "\nharness: a malformed frame on stdout (type 0x%02x, length %zu)\n", (unsigned char)type, len);
      abort();
    }
    at += FRAME_HEAD + len;
  }
}

/* Iterate over the frames captured: returns the next one of `type` from *at, or NULL. */
static const unsigned char *fz_next_frame(size_t *at, char *type, size_t *len) {
  if (*at + FRAME_HEAD > fz_out.len) return NULL;
  const unsigned char *h = fz_out.buf + *at;
  *type = (char)h[KEY_BYTES];
  *len = (size_t)h[KEY_BYTES + 1] << 24 | (size_t)h[KEY_BYTES + 2] << 16 | (size_t)h[KEY_BYTES + 3] << 8 | h[KEY_BYTES + 4];
  *at += FRAME_HEAD + *len;
  return h + FRAME_HEAD;
}

/* HERMES_FUZZ_DEBUG=1 (running a target on one file, say): what the supervisor said, per input. */
static void fz_debug(void) {
  static int on = -1;
  if (on < 0) on = getenv("HERMES_FUZZ_DEBUG") != NULL;
  if (!on) return;
  fprintf(stderr, "harness: exit %d, stdin %zu/%zu bytes read, stderr '%.*s'\n", fz_exit_code, fz_in_at, fz_in_len, (int)fz_err.len, (const char *)fz_err.buf);
  size_t at = 0, len;
  char type;
  const unsigned char *p;
  while ((p = fz_next_frame(&at, &type, &len)) != NULL && at <= fz_out.len) {
    fprintf(stderr, "harness:   frame '%c' %zu: '", type, len);
    for (size_t i = 0; i < len && i < 200; i++) fputc(p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '.', stderr);
    fprintf(stderr, "'\n");
  }
}

/* The process ended (an exit, the header's end, or main returned): release what it held, check. */
static void fz_end_process(void) {
  fz_debug();
  fz_free_all();
  fz_scan_fds(fz_fd_close_new);
  fz_check_frames();
  if (fz_dirty) {
    fz_check_outside();
    fz_build_root();
  }
}

#endif
