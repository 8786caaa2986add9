/*
 * Files out after a one-shot run (`collect`, `limits`): the workspace's files that match the
 * patterns, within the limits, as frames (framed mode only; protocol.h lists them): 'f' a file
 * begins, 'c' its content, 'F' it ended; 's' an entry not sent and why (at most SKIPPED_MAX_FRAMES
 * of them, SKIPPED_MAX_NAME_BYTES of paths in all), 'S' after the walk how many more were skipped
 * for a reason. A session's `read` sends its file the same way (fileops.c).
 * Paths are the bytes the filesystem holds (any byte but NUL and '/' in a name), never quoted.
 * Nothing here follows a symlink: every directory on the way is opened O_NOFOLLOW and checked to
 * be the inode lstat saw (see open_in), and a leaf symlink is reported, not read.
 */
#include "hermes-run.h"

struct pattern {
  char *segs[128];
  int n;
};
static struct pattern patterns[MAX_PATTERNS];
int npatterns = 0;
unsigned long long lim_files = COLLECT_DEFAULT_FILES, lim_file_bytes = COLLECT_DEFAULT_FILE_BYTES, lim_total_bytes = COLLECT_DEFAULT_TOTAL_BYTES;
static unsigned long long sent_files = 0, sent_bytes = 0, visited = 0;

void add_pattern(char *text) {
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



/* The reasons an entry is skipped (the host knows the same list): past SKIPPED_MAX_FRAMES entries or
   SKIPPED_MAX_NAME_BYTES of their paths, the rest are only counted per reason, and told at the end
   of the walk in one 'S' frame per reason, so that a workspace of many unsendable entries (16,384
   symlinks with 4 KiB paths) costs the host a bounded list and a count. */
static const char *const skip_reasons[] = {HERMES_SKIP_REASONS};
#define SKIP_REASONS (sizeof skip_reasons / sizeof skip_reasons[0])
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
  frame_with_bytes(FRAME_SKIPPED, words, path, len);
}

/* After the walk: how many skipped entries of each reason were not listed. */
static void skipped_summary(void) {
  for (size_t i = 0; i < SKIP_REASONS; i++) {
    if (skipped_omitted[i] == 0) continue;
    char words[96];
    int n = snprintf(words, sizeof words, "%s %llu", skip_reasons[i], skipped_omitted[i]);
    frame(FRAME_SKIPPED_COUNT, words, (size_t)n);
  }
}

/* Send an open regular file from `offset`, at most `limit` bytes: 'f', 'c'..., 'F'. */
void send_file(int fd, const struct stat *st, const char *path, size_t len, unsigned long long offset, unsigned long long limit) {
  static unsigned char buf[CHUNK];
  char words[96];
  snprintf(words, sizeof words, "%o %llu", (unsigned)(st->st_mode & 07777), (unsigned long long)st->st_size);
  frame_with_bytes(FRAME_FILE_BEGIN, words, path, len);
  unsigned long long left = limit, sent = 0;
  off_t at = (off_t)offset;
  while (left > 0) {
    ssize_t n = pread(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    frame(FRAME_FILE_CONTENT, buf, (size_t)n);
    at += n;
    sent += (unsigned long long)n;
    left -= (unsigned long long)n;
  }
  snprintf(words, sizeof words, "%llu", sent);
  frame(FRAME_FILE_END, words, strlen(words));
}

/* Open `name` in `dir` for reading if it is the regular file lstat saw; -1 otherwise. */
int open_regular(int dir, const char *name, const struct stat *seen) {
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
char **names_of(int dir, int *count, int max, int *more) {
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

void free_names(char **names, int n) {
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
      skipped(SKIP_NAME_TOO_LONG, 0, rel, rel_len);
      continue;
    }
    if (++visited > COLLECT_MAX_ENTRIES) {
      skipped(SKIP_WALK_LIMIT, 0, rel, rel_len);
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
      if (matched) skipped(SKIP_UNREADABLE, 0, rel, len);
    } else if (S_ISDIR(st.st_mode)) {
      if (depth + 1 >= COLLECT_MAX_DEPTH) {
        skipped(SKIP_TOO_DEEP, 0, rel, len);
      } else {
        struct stat opened;
        int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0 && fstat(sub, &opened) == 0 && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino) {
          collect_in(sub, rel, len, seg, depth + 1, matched);
        } else if (matched) {
          skipped(SKIP_UNREADABLE, 0, rel, len);
        }
        if (sub >= 0) close(sub);
      }
    } else if (!matched) {
      /* not asked for */
    } else if (S_ISLNK(st.st_mode)) {
      skipped(SKIP_SYMLINK, (unsigned long long)st.st_size, rel, len);
    } else if (!S_ISREG(st.st_mode)) {
      skipped(SKIP_NOT_REGULAR, 0, rel, len);
    } else if ((unsigned long long)st.st_size > lim_file_bytes) {
      skipped(SKIP_TOO_LARGE, (unsigned long long)st.st_size, rel, len);
    } else if (sent_files >= lim_files) {
      skipped(SKIP_LIMIT, (unsigned long long)st.st_size, rel, len);
    } else if (sent_bytes + (unsigned long long)st.st_size + len > lim_total_bytes) {
      skipped(SKIP_TOTAL_LIMIT, (unsigned long long)st.st_size, rel, len);
    } else {
      int fd = open_regular(dir, name, &st);
      if (fd < 0) {
        skipped(SKIP_UNREADABLE, (unsigned long long)st.st_size, rel, len);
      } else {
        send_file(fd, &st, rel, len, 0, (unsigned long long)st.st_size);
        close(fd);
        sent_files++;
        sent_bytes += (unsigned long long)st.st_size + len; /* names count: the host holds them too */
      }
    }
    rel[rel_len] = 0;
  }
  if (more) skipped(SKIP_WALK_LIMIT, 0, rel, rel_len);
  free_names(names, n);
}

/* After the program: nothing else may run (a leftover could swap a file mid-read), then the walk. */
void collect(const char *workspace) {
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
