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
 * The protocol (the header words on stdin, the frames on stdout, the other invocations, the limits
 * and which features an image's supervisor has) is one table, packages/core/src/RunnerProtocolTable.ts,
 * which the host reads and `pnpm codegen` writes out for this code as protocol.h (its comment lists
 * it all). A run: the header (header.c) up to `run`; in framed mode (a `key`) the program runs as a
 * child, its streams relayed as frames (relay.c) until it exits, then the files asked for
 * (collect.c) and the 'x' frame; a session's file operation (fileops.c) runs no program. Plain
 * mode (no key; sessions' code snippets, already inside a framed call): set up the files, then exec
 * the interpreter in place. hermes-run.h lists the files and what each holds; this one holds the
 * modes and main.
 */
#include "hermes-run.h"
/* PYTHON_PRELOAD: what `--preload python` runs (images/runner/preload.py, embedded by `pnpm codegen`). */
#include "preload.h"

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
  /* While a kernel lives, everything older than the call is its domain (frozen by the call): only
     what the call started goes. */
  int only_since = strcmp(argv[4], "since") == 0 || kernel_supervisor() != 0;
  pid_t ppid;
  char state;
  unsigned long long st;
  if (target > 1 && proc_stat(target, &ppid, &state, &st) && st == start) kill(target, SIGKILL);
  /* Exit 0: nothing of the call is left (the host may go on even before the engine says the call's
     exec ended); 1: something outlived every pass. */
  int left = kill_others(0, only_since, start);
  /* A supervisor the call (or a kernel's domain) stopped would never end its exec nor release the
     session lock: resumed now that its program is dead, it reports and exits. */
  resume_supervisors();
  return left;
}

int main(int argc, char **argv) {
  /* Before anything else: /proc/<pid>/{mem,environ,fd} of this process closed to the program. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp(argv[1], MODE_HOLD) == 0) return hold();
  if (argc >= 2 && strcmp(argv[1], MODE_KILL) == 0) return kill_call(argc, argv);
  if (argc >= 2 && strcmp(argv[1], MODE_KERNEL) == 0) return kernel_main(argc, argv);
  {
    const char *base = strrchr(argv[0], '/');
    if (strcmp(base == NULL ? argv[0] : base + 1, TOOL_CLIENT_NAME) == 0) return tool_client(argc, argv);
    if (argc >= 2 && strcmp(argv[1], MODE_TOOL) == 0) return tool_client(argc - 1, argv + 1);
  }

  /* --preload python [MODULE...]: start the interpreter now, before the request (a warm pool's
     sandbox waits with it ready), and import those modules in it (the host names them: the pool's
     preload option); it runs the program only if the request is Python code. */
  const char *preload_lang = NULL, *preload_interpreter = NULL;
  struct started preloaded = {0, -1, -1, -1, -1};
  /* Its stdin is a pipe this process feeds once the request says what the program's stdin is: the
     container's stdin also carries a tool run's replies, which the program must never hold. */
  int preloaded_feed = -1;
  if (argc >= 3 && strcmp(argv[1], MODE_PRELOAD) == 0 && strcmp(argv[2], "python") == 0) {
    preload_lang = "python";
    preload_interpreter = "python3";
    /* python3 -c PRELOAD MODULE...: the names reach preload.py as sys.argv[1:]. */
    char **boot = calloc((size_t)argc + 1, sizeof(char *));
    if (boot == NULL) fail(PROTOCOL_ERROR, "out of memory");
    boot[0] = "python3";
    boot[1] = "-c";
    boot[2] = (char *)PYTHON_PRELOAD;
    for (int i = 3; i < argc; i++) boot[i] = argv[i];
    int pf[2];
    if (pipe2(pf, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
    preloaded = start_child(boot, 1, pf[0], -1);
    close(pf[0]);
    preloaded_feed = pf[1];
  }

  char line[LINE_MAX_BYTES];
  read_line(line);
  if (strcmp(line, PROTOCOL_MAGIC) != 0) fail(PROTOCOL_ERROR, "stdin does not start with '" PROTOCOL_MAGIC "' (runner protocol version " PROTOCOL_VERSION_TEXT " expected)");

  struct request req = {.workspace = getenv("HERMES_WORKSPACE"), .code_dir = getenv("HERMES_CODE_DIR"), .cap = SIZE_MAX / 2, .code_fd = -1, .workspace_fd = -1};
  if (req.workspace == NULL || *req.workspace == 0) req.workspace = "/workspace";
  if (req.code_dir == NULL || *req.code_dir == 0) req.code_dir = "/tmp/.hermes";
  req.args = calloc(MAX_ARGS + 1, sizeof(char *));
  if (req.args == NULL) fail(PROTOCOL_ERROR, "out of memory");

  read_header(&req, line);
#ifdef HERMES_FUZZ
  /* Fuzzing only (images/runner/fuzz/, scripts/fuzz-supervisor.sh; never defined in the image's
     build): the header is parsed. What follows starts the program and signals processes, which a
     fuzzer's process must not do: the harness takes over here and ends this "process" as an exit would. */
  extern void hermes_fuzz_header_end(void);
  hermes_fuzz_header_end();
#endif
  if (req.workspace_fd >= 0) close(req.workspace_fd);
  if (req.code_fd >= 0) close(req.code_fd);
  if (req.op_done) {
    frame(FRAME_EXITED, "0 0 0 0", 7);
    return 0;
  }

  char main_path[PATH_MAX];
  if (req.has_code) {
    if (req.interpreter == NULL) fail(PROTOCOL_ERROR, "code without a language");
    prepare_code_dir(req.code_dir);
    snprintf(main_path, sizeof main_path, "%s/%s", req.code_dir, req.ext);
    int fd = open(main_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) < 0 || write_all(fd, req.code, req.code_len) < 0) fail(PROTOCOL_ERROR, "cannot write %s: %s", main_path, strerror(errno));
    close(fd);
    free(req.code);
    req.args[0] = (char *)req.interpreter;
    req.args[1] = main_path;
    req.args[2] = NULL;
    req.nargs = 2;
    if (chdir(req.workspace) < 0) fail(PROTOCOL_ERROR, "cannot enter the workspace %s: %s", req.workspace, strerror(errno));
  } else if (req.nargs == 0) {
    fail(PROTOCOL_ERROR, "nothing to run (no code and no arguments)");
  }
  req.args[req.nargs] = NULL;

  if (!framed) {
    /* Plain mode: become the program. A header `stdin` becomes its stdin through a pipe that a
       child of ours fills and closes (we are about to be the program; nobody else would feed it). */
    if (req.has_stdin) {
      int p[2];
      if (pipe(p) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
      pid_t feeder = fork();
      if (feeder < 0) fail(PROTOCOL_ERROR, "fork: %s", strerror(errno));
      if (feeder == 0) {
        close(p[0]);
        _exit(write_all(p[1], req.stdin_data, req.stdin_len) < 0 ? 1 : 0);
      }
      close(p[1]);
      if (dup2(p[0], 0) < 0) fail(PROTOCOL_ERROR, "dup2: %s", strerror(errno));
      close(p[0]);
    }
    signal(SIGPIPE, SIG_DFL);
    execvp(req.args[0], req.args);
    fail(errno == ENOENT ? INTERPRETER_MISSING : PROTOCOL_ERROR, "cannot run %s: %s", req.args[0], strerror(errno));
  }

  if (req.lock != NULL && !req.locked) take_lock(req.lock);
  /* Leftovers are killed, unless a kernel lives in this sandbox (kernel.c): then they are its
     domain, and its state. They are frozen instead (proc.c, freeze_others) for the call's life,
     what the call starts is killed after it, and the frozen resume on every way out. */
  int freezing = 0;
  unsigned long long call_start = 0;
  if (req.kill_leftovers) {
    pid_t pp;
    char state;
    if (kernel_supervisor() != 0 && proc_stat(getpid(), &pp, &state, &call_start)) {
      freezing = 1;
      exit_hook = thaw_frozen;
      freeze_others();
    } else {
      kill_others(0, 0, 0);
    }
  }

  /* With tools, the channel is up before the program exists, or the run fails here (126, 'E'):
     never a program that finds itself without the tools it was given. */
  int feed[2] = {-1, -1};
  if (tools_on) {
    prepare_code_dir(req.code_dir);
    tools_listen_at(req.code_dir);
  }

  struct started run;
  /* pumping: the program's stdin is what follows `run` on ours, relayed into its pipe (a preloaded
     interpreter without tools); with tools or a header `stdin` it is that, fed from memory. */
  int pumping = 0;
  const int from_header = tools_on || req.has_stdin;
  if (preloaded.pid > 0 && preload_lang != NULL && req.interpreter != NULL && strcmp(req.interpreter, preload_interpreter) == 0 && req.has_code) {
    /* The interpreter started before the request arrived (warm pool): tell it where to go, and
       with tools the channel's environment (it was forked before the channel existed). */
    run = preloaded;
    char go[2 * PATH_MAX + 8 * PATH_MAX];
    int n = snprintf(go, sizeof go, "%s%c%s", req.workspace, 0, main_path);
    static const char *const tool_env[] = {"HERMES_TOOLS_SOCKET", "PYTHONPATH", "NODE_PATH", "PATH"};
    for (size_t i = 0; tools_on && n >= 0 && i < sizeof tool_env / sizeof tool_env[0]; i++) {
      const char *v = getenv(tool_env[i]);
      if (v != NULL && (size_t)n < sizeof go) n += snprintf(go + n, sizeof go - (size_t)n, "%c%s=%s", 0, tool_env[i], v);
    }
    if (n < 0 || (size_t)n >= sizeof go || write_all(run.go, go, (size_t)n) < 0) fail(PROTOCOL_ERROR, "cannot hand the program to the interpreter");
    close(run.go);
    feed[1] = preloaded_feed;
    pumping = !from_header;
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
    if (from_header && pipe2(feed, O_CLOEXEC) < 0) fail(PROTOCOL_ERROR, "pipe: %s", strerror(errno));
    run = start_child(req.args, 0, feed[0], -1);
    if (feed[0] >= 0) close(feed[0]);
  }
  pid_t child = run.pid;
  size_t fed = 0, pump_len = 0, pump_off = 0;
  static unsigned char pump_buf[CHUNK];
  if (feed[1] >= 0) {
    fcntl(feed[1], F_SETFL, O_NONBLOCK);
    if (from_header && req.stdin_len == 0) {
      close(feed[1]);
      feed[1] = -1;
    }
  }
  if (!tools_on && !pumping) { /* (a header `stdin` is fed through the pipe; ours is not read again) */
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
    frame(FRAME_STARTED, msg, (size_t)n);
  }

  static unsigned char buf[CHUNK];
  int sfd = run.sfd;
  struct relay streams[2] = {{run.out, FRAME_STDOUT, 0, 0, 0}, {run.err, FRAME_STDERR, 0, 0, 0}};
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
      for (int i = 0; i < TOOL_CALLS_MAX; i++) {
        call_at[i] = -1;
        if (calls[i].state == 0 || calls[i].fd < 0) continue;
        /* Waiting for the host: no events asked, but a hang-up (the caller went away) still shows. */
        short ev = calls[i].state == 1 ? POLLIN : calls[i].state == 3 ? POLLOUT : 0;
        fds[call_at[i] = nfds++] = (struct pollfd){.fd = calls[i].fd, .events = ev};
      }
    }
    if (from_header && feed[1] >= 0) fds[feed_at = nfds++] = (struct pollfd){.fd = feed[1], .events = POLLOUT};
    if (poll(fds, (nfds_t)nfds, -1) < 0) {
      if (errno == EINTR) continue;
      fail(PROTOCOL_ERROR, "poll: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
      if (idx[i] >= 0 && (fds[idx[i]].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (!pump(&streams[i], req.cap, buf)) {
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
    if (from_header && feed_at >= 0 && fds[feed_at].revents) {
      ssize_t w = write(feed[1], req.stdin_data + fed, req.stdin_len - fed);
      if (w > 0) fed += (size_t)w;
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || fed == req.stdin_len) {
        close(feed[1]); /* all of it given, or the program closed its stdin */
        feed[1] = -1;
      }
    }
    if (tools_on) {
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
          frame(FRAME_TOOL_CALLER_GONE, msg, (size_t)n);
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
  /* The program's process has exited: what it (or a child) wrote before is in the pipes now (relay.c, drain_pending). */
  for (int i = 0; i < 2; i++) {
    struct relay_drain d = {&streams[i], req.cap};
    if (streams[i].fd >= 0) drain_pending(streams[i].fd, buf, relay_use, &d);
  }
  (void)open_streams;
  int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  if (exit_code > 255) exit_code = 255;
  if (freezing) {
    kill_others(0, 1, call_start); /* spares the frozen set */
    thaw_frozen();
    exit_hook = NULL;
  } else if (req.kill_leftovers) {
    kill_others(0, 0, 0);
  }
  if (npatterns > 0) collect(req.workspace);
  char msg[96];
  int n = snprintf(msg, sizeof msg, "%d %llu %llu %d", exit_code, streams[0].total, streams[1].total, outside_signal);
  frame(FRAME_EXITED, msg, (size_t)n);
  return exit_code;
}
