/*
 * A session's file operations (`read`, `write`, `list`, `remove`): the supervisor does them itself,
 * under the session's lock, and no program runs; the reply, then 'x'. Frames: 'f' 'c' 'F' (a read,
 * as collect.c sends a file), 'n' an entry of a listing, 'k' done, 'r' "<ERRNO NAME> <message>"
 * failed. Absolute paths under the workspace or /tmp only, never through a symlink.
 */
#include "hermes-run.h"

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

void op_failed(int e, const char *fmt, ...) {
  char msg[1200];
  _Static_assert(sizeof msg <= MAX_CONTROL_PAYLOAD, "an 'r' frame fits a control payload");
  int w = snprintf(msg, sizeof msg, "%s ", errno_name(e));
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg + w, sizeof msg - (size_t)w, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  size_t len = (size_t)w + (size_t)n;
  if (len >= sizeof msg) len = sizeof msg - 1;
  frame(FRAME_OP_FAILED, msg, len);
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

void op_read(const char *workspace, char *path, unsigned long long offset, unsigned long long limit) {
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
void skip_stdin(size_t len) {
  static unsigned char buf[CHUNK];
  while (len > 0) {
    size_t want = len < sizeof buf ? len : sizeof buf;
    read_exact(buf, want, "the file's content");
    len -= want;
  }
}

void op_write(const char *workspace, char *path, size_t len, unsigned mode) {
  char *leaf;
  int dir = parent_of(workspace, path, 1, 0, &leaf);
  if (dir < 0) {
    skip_stdin(len);
    return;
  }
  /* KEEP (RunnerProtocol.KEEP_EXISTING_MODE): a file that exists keeps its permission bits. */
  struct stat before;
  int keep = (mode & KEEP_EXISTING_MODE) != 0 && fstatat(dir, leaf, &before, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(before.st_mode);
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
      frame(FRAME_OP_DONE, words, strlen(words));
    }
  }
  if (fd >= 0) close(fd);
  close(dir);
}

void op_list(const char *workspace, char *path) {
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
    frame_with_bytes(FRAME_LIST_ENTRY, words, names[i], strlen(names[i]));
  }
  char words[64];
  snprintf(words, sizeof words, "listed %d %d", n, more);
  frame(FRAME_OP_DONE, words, strlen(words));
  free_names(names, n);
  close(dir);
}

void op_remove(const char *workspace, char *path) {
  char *leaf;
  int dir = parent_of(workspace, path, 0, 0, &leaf);
  if (dir < 0) return;
  struct stat st;
  if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    op_failed(errno, "%s", strerror(errno));
  } else if (unlinkat(dir, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
    op_failed(errno, "cannot remove %s: %s", leaf, strerror(errno));
  } else {
    frame(FRAME_OP_DONE, "removed", 7);
  }
  close(dir);
}
