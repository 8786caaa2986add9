/*
 * hermes-run, the in-container supervisor of hermes-sandbox: what its files share. Each .c file is
 * one concern (hermes-run.c says why the supervisor exists and how it runs a request):
 *
 *   relay.c     output: the keyed frames on stdout, fail(), the relay of the program's streams
 *   header.c    reading the header, and what each header word does (a table of handlers)
 *   files.c     files in: the request's files and the code directory
 *   proc.c      processes: /proc, ending leftovers, the session lock, starting the program
 *   collect.c   files out after a one-shot run (collect)
 *   fileops.c   a session's file operations (read, write, list, remove)
 *   tools.c     tool calls from the program, and the `hermes-tool` client
 *   kernel.c    `--kernel python`: a session's long-lived Python kernel, its cells as frames
 *   hermes-run.c  the modes and main: the run from the header's end to the 'x' frame
 *
 * The protocol itself (words, frame types, limits, features) is generated: protocol.h, written by
 * `pnpm codegen` from packages/core/src/RunnerProtocolTable.ts, the table the host reads too.
 * The build: images/runner/Makefile (the image's build, the host-side tests, the sanitizer and the
 * fuzzers all go through it).
 */
#ifndef HERMES_RUN_H
#define HERMES_RUN_H

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

#include "protocol.h"

#define FRAME_HEAD (KEY_BYTES + 1 + 4)

/* ---- relay.c: output ----------------------------------------------------------------------- */

/* Framed mode (a `key` line): everything goes out as frames carrying the key. */
extern int framed;
extern unsigned char key[KEY_BYTES];
/* Run once on every way out that fail() or a failed frame takes (NULL: nothing to do). */
extern void (*exit_hook)(void);

int write_all(int fd, const void *data, size_t len);
void frame(char type, const void *payload, size_t len);
void frame_with_bytes(char type, const char *words, const char *bytes, size_t len);
__attribute__((noreturn, format(printf, 2, 3))) void fail(int code, const char *fmt, ...);

/* One of the program's output streams, relayed under the cap. */
struct relay {
  int fd;
  char type;
  unsigned long long total;
  /* The total the last 'd' frame told, and when (CLOCK_MONOTONIC, ms). */
  unsigned long long told;
  long long told_at;
};

void relay_bytes(struct relay *r, const unsigned char *buf, size_t n, size_t cap);
int pump(struct relay *r, size_t cap, unsigned char *buf);
void drain_pending(int fd, unsigned char *buf, void (*use)(void *ctx, const unsigned char *p, size_t n), void *ctx);
struct relay_drain {
  struct relay *r;
  size_t cap;
};
void relay_use(void *ctx, const unsigned char *p, size_t n);

/* ---- header.c: the header ------------------------------------------------------------------ */

/* What the header asked for: header.c fills it in, hermes-run.c runs it. */
struct request {
  const char *workspace, *code_dir;
  /* Code mode: the interpreter and the program's file name in the code directory. */
  const char *interpreter, *ext;
  char *code, *lock, *stdin_data;
  size_t code_len, cap, stdin_len;
  /* Opened once the first file (workspace) or module (code directory) arrives. */
  int code_fd, workspace_fd;
  int has_code, has_stdin, kill_leftovers, nargs, nfiles, op_done, locked;
  char **args;
  /* Kernel mode (kernel.c): the words only it takes (display, grace, preload), and its cells'. */
  int kernel;
  unsigned long long display_bundle, display_count, display_total, grace_ms;
  char *preload;
};

void read_exact(void *buf, size_t len, const char *what);
void read_line(char *line);
/* The header's lines after the version line, up to `run`, each handled as its word says. */
void read_header(struct request *r, char *line);
/* One header line read into `line`: handled as its word says; 0 if it was `run`. */
int header_line(struct request *r, char *line);

/* ---- files.c: files in --------------------------------------------------------------------- */

void copy_stdin_to(int fd, size_t len, const char *what);
int open_in(int root_fd, const char *path, size_t path_len);
void prepare_code_dir(const char *code_dir);

/* ---- proc.c: processes --------------------------------------------------------------------- */

int proc_stat(pid_t pid, pid_t *ppid, char *state, unsigned long long *start);
int kill_others(pid_t spare, int only_since, unsigned long long since);
pid_t kernel_supervisor(void);
int freeze_others(void);
void thaw_frozen(void);
void thaw_all(void);
void resume_supervisors(void);
int lock_open(const char *path);
void lock_tell_wait(int fd);
void take_lock(const char *path);

struct started {
  pid_t pid;
  int out, err, sfd, go;
};
struct started start_child(char **argv, int preload, int stdin_fd, int control_fd);

/* ---- collect.c: files out ------------------------------------------------------------------ */

extern int npatterns;
extern unsigned long long lim_files, lim_file_bytes, lim_total_bytes;

void add_pattern(char *text);
void collect(const char *workspace);
void send_file(int fd, const struct stat *st, const char *path, size_t len, unsigned long long offset, unsigned long long limit);
int open_regular(int dir, const char *name, const struct stat *seen);
char **names_of(int dir, int *count, int max, int *more);
void free_names(char **names, int n);

/* ---- fileops.c: a session's file operations ------------------------------------------------ */

__attribute__((format(printf, 2, 3))) void op_failed(int e, const char *fmt, ...);
void skip_stdin(size_t len);
void op_read(const char *workspace, char *path, unsigned long long offset, unsigned long long limit);
void op_write(const char *workspace, char *path, size_t len, unsigned mode);
void op_list(const char *workspace, char *path);
void op_remove(const char *workspace, char *path);

/* ---- tools.c: tool calls ------------------------------------------------------------------- */

struct call {
  int fd;          /* the caller's connection */
  int state;       /* 0 free, 1 reading the request, 2 waiting for the host, 3 writing the reply */
  unsigned id;
  char *buf;       /* the request as it arrives, then the reply */
  size_t len, cap, sent;
  size_t over;     /* bytes of a request larger than allowed, read and dropped until its EOF */
};
extern struct call calls[TOOL_CALLS_MAX];
extern int tools_on, tools_listen, tools_busy, host_in_open;
extern size_t tool_max_in_flight, tool_max_request, tool_max_reply;

void tools_prepare(const char *code_dir);
void tools_open(void);
void tools_listen_at(const char *code_dir);
void tools_close(void);
void call_free(struct call *c);
void tools_accept(void);
void call_read(struct call *c);
void call_write(struct call *c);
void tools_reply(void);
void tools_reply_line(const char *line);
int tool_client(int argc, char **argv);

/* ---- kernel.c: a session's kernel ------------------------------------------------------------ */

int kernel_main(int argc, char **argv);

#endif
