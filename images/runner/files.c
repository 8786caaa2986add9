/*
 * Files in: the request's files (`file`, under the workspace) and modules (`module`, under the code
 * directory), written from stdin without following a symlink at any level.
 */
#include "hermes-run.h"

void copy_stdin_to(int fd, size_t len, const char *what) {
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
int open_in(int root_fd, const char *path, size_t path_len) {
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

void prepare_code_dir(const char *code_dir) {
  if (mkdir(code_dir, 0700) < 0 && errno != EEXIST) fail(PROTOCOL_ERROR, "cannot create %s: %s", code_dir, strerror(errno));
  struct stat st;
  if (lstat(code_dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
    fail(PROTOCOL_ERROR, "%s is not a directory owned by this user", code_dir);
  }
  chmod(code_dir, 0700);
}
