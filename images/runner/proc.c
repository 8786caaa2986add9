/*
 * Processes: what /proc says of them, ending those a call left behind (sessions) or a timed-out
 * call's (hermes-run --kill), the session lock, and starting the program with its streams on pipes.
 */
#include "hermes-run.h"

/* Parent pid, state and start time from /proc/<pid>/stat; 0 if it cannot be read. */
int proc_stat(pid_t pid, pid_t *ppid, char *state, unsigned long long *start) {
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
 * Freezing a live kernel's domain (docs/design/kernel.md §7): a call's supervisor with `leftovers
 * kill` that finds a kernel supervisor alive SIGSTOPs the leftovers instead of killing them (they
 * are the kernel's state), kills only what started since the call began, then SIGCONTs the frozen
 * set on every way out (thaw_frozen is relay.c's exit hook then). The set is remembered by pid and
 * start time, so a recycled pid is never resumed, and kill_others spares it.
 */
#define FROZEN_MAX 4096
static struct frozen_proc {
  pid_t pid;
  unsigned long long start;
} frozen[FROZEN_MAX];
static int nfrozen = 0;

static int is_frozen(pid_t pid, unsigned long long start) {
  for (int i = 0; i < nfrozen; i++)
    if (frozen[i].pid == pid && frozen[i].start == start) return 1;
  return 0;
}

/* Argv[1] of a process, compared with `word`. */
static int argv1_is(pid_t pid, const char *word) {
  char path[64], cmd[256];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, cmd, sizeof cmd - 1);
  close(fd);
  if (n <= 0) return 0;
  cmd[n] = 0;
  size_t first = strlen(cmd);
  return (ssize_t)first + 1 < n && strcmp(cmd + first + 1, word) == 0;
}

/* A live `hermes-run --kernel` other than this process: entered from outside (parent pid 0), which
   nothing inside the sandbox can pose as. Its pid, or 0. */
pid_t kernel_supervisor(void) {
  pid_t self = getpid(), found = 0;
  DIR *d = opendir("/proc");
  if (d == NULL) return 0;
  struct dirent *e;
  while (found == 0 && (e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    pid_t pid = (pid_t)atoi(e->d_name), ppid;
    char state;
    unsigned long long start;
    if (pid <= 1 || pid == self || !proc_stat(pid, &ppid, &state, &start)) continue;
    if (ppid == 0 && state != 'Z' && state != 'X' && argv1_is(pid, MODE_KERNEL)) found = pid;
  }
  closedir(d);
  return found;
}

/* SIGSTOP every process but PID 1, this one and parent-pid-0 ones, until a pass finds none still
   running (a running process can SIGCONT another). 0 once all are stopped, 1 if some never were. */
int freeze_others(void) {
  pid_t self = getpid();
  for (int pass = 0; pass < 200; pass++) {
    int running = 0;
    DIR *d = opendir("/proc");
    if (d == NULL) return 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (!isdigit((unsigned char)e->d_name[0])) continue;
      pid_t pid = (pid_t)atoi(e->d_name), ppid;
      char state;
      unsigned long long start;
      if (pid <= 1 || pid == self || !proc_stat(pid, &ppid, &state, &start)) continue;
      if (ppid == 0 || state == 'Z' || state == 'X' || state == 'T' || state == 't') continue;
      if (kill(pid, SIGSTOP) != 0) continue;
      running = 1;
      if (!is_frozen(pid, start) && nfrozen < FROZEN_MAX) frozen[nfrozen++] = (struct frozen_proc){pid, start};
    }
    closedir(d);
    if (!running) return 0;
    usleep(1000 * (pass < 20 ? pass + 1 : 20));
  }
  return 1;
}

/* SIGCONT what freeze_others stopped (each still the same process). Safe to call twice. */
void thaw_frozen(void) {
  for (int i = 0; i < nfrozen; i++) {
    pid_t ppid;
    char state;
    unsigned long long start;
    if (proc_stat(frozen[i].pid, &ppid, &state, &start) && start == frozen[i].start) kill(frozen[i].pid, SIGCONT);
  }
  nfrozen = 0;
}

/* SIGCONT every stopped process but PID 1 and this one: of the domain (parent pid != 0), or the
   supervisors entered from outside (parent pid 0). */
static void resume_stopped(int supervisors) {
  pid_t self = getpid();
  DIR *d = opendir("/proc");
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    pid_t pid = (pid_t)atoi(e->d_name), ppid;
    char state;
    unsigned long long start;
    if (pid <= 1 || pid == self || !proc_stat(pid, &ppid, &state, &start)) continue;
    if ((ppid == 0) == supervisors && (state == 'T' || state == 't')) kill(pid, SIGCONT);
  }
  closedir(d);
}

/* SIGCONT every process but PID 1, this one and parent-pid-0 ones: the kernel's supervisor before
   each cell, in case a call's supervisor died with the domain frozen (it holds the lock then, so
   no live call has anything frozen). */
void thaw_all(void) { resume_stopped(0); }

/* SIGCONT every stopped process entered from outside (parent pid 0): a supervisor its own program
   or kernel stopped (SIGSTOP, same uid). Nothing stops a supervisor legitimately (freeze_others
   spares them), and a stopped one keeps its exec, and the session lock, forever: resumed after its
   program is killed, it finds its child gone, reports and ends. */
void resume_supervisors(void) { resume_stopped(1); }

/*
 * SIGKILL every process but PID 1, this one, `spare` and processes entered from outside the
 * sandbox (parent pid 0: other calls' supervisors, waiting for the lock), optionally only those
 * started at or after `since`; repeated until a pass finds none (a process may fork meanwhile).
 */
/* 0 once none is left; 1 if some were still there after the last pass (or /proc cannot be read). */
int kill_others(pid_t spare, int only_since, unsigned long long since) {
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
      if (is_frozen(pid, start)) continue;
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

/* The session lock's file, opened (its directory made) but not locked; fails the run if it cannot be. */
int lock_open(const char *path) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir) {
    *slash = 0;
    mkdir(dir, 0700);
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) fail(PROTOCOL_ERROR, "cannot open the session lock %s: %s", path, strerror(errno));
  return fd;
}

/* The 'w' frame: the lock is held by another, named by its pid and command line. */
void lock_tell_wait(int fd) {
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
  frame(FRAME_LOCK_WAIT, msg, n < 0 ? 0 : (size_t)(n >= (int)sizeof msg ? (int)sizeof msg - 1 : n));
}

void take_lock(const char *path) {
  int fd = lock_open(path);
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    lock_tell_wait(fd);
    while (flock(fd, LOCK_EX) < 0) {
      if (errno != EINTR) fail(PROTOCOL_ERROR, "cannot lock %s: %s", path, strerror(errno));
    }
  }
  frame(FRAME_LOCKED, NULL, 0);
}

/* SIGCHLD, and the signals an operator or the engine sends the container (docker stop, docker kill
   -s), which are forwarded to the program as docker-init would. Handling them means the program
   can send them to PID 1 too: all it gets is the same signal back, which it could send itself. */
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
static sigset_t old_mask;
static int signal_fd = -1;

/*
 * Fork the program with stdout and stderr on pipes and every forwarded signal blocked in this
 * process (delivered through a signalfd). With `preload`, the child also gets fd 3, a pipe on which
 * it later learns where to go ("<cwd>\0<program path>"): the interpreter starts before the request
 * arrives (warm pool), so it is forked before the key is read and never holds it (struct started).
 * With `control_fd` (>= 0), the child is a kernel's driver: see the comment in the child.
 */
struct started start_child(char **argv, int preload, int stdin_fd, int control_fd) {
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
    if (control_fd >= 0) {
      /* A kernel (kernel.c): fd 3 its control socket (dup2 onto itself would keep close-on-exec),
         its own session and process group (the interrupt's SIGINT and the kill go to the group),
         and first in line for the OOM killer, before any supervisor. */
      if (control_fd == 3) fcntl(3, F_SETFD, 0);
      else dup2(control_fd, 3);
      /* Nothing but fds 0-3 reaches a long-lived kernel, whatever the exec inherited. */
      for (int fd = 4; fd < 4096; fd++) fcntl(fd, F_SETFD, FD_CLOEXEC);
      setsid();
      /* While non-dumpable (inherited from the supervisor), /proc/self is root's and the write fails
         for the sandbox's uid. Dumpable now costs nothing: the key is wiped above, and the exec a few
         calls from here makes the process dumpable anyway (python3 is readable). */
      prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
      if (adj >= 0) {
        write_all(adj, "1000", 4);
        close(adj);
      }
    }
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
