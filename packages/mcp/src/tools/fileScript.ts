/**
 * read_file and write_file inside the session sandbox: one fixed bash script, run as an argv
 * call of the session (so a relative path is the terminal's current directory), the path an
 * ARGUMENT (never spliced into shell text), the content through standard input as base64.
 *
 * The path is resolved with `realpath -m` (symbolic links followed, the last component too) and
 * must land in a writable root (/workspace or /tmp, not the session shell's state). Symbolic
 * links the sandboxed code planted can only point it at the sandbox's own files: the host is
 * never touched, whatever the path says.
 *
 *   read  PATH OFFSET LIMIT MAX  ->  resolved path (base64), size, kind (text|binary), lines, then the content (base64)
 *   write PATH                   ->  resolved path (base64), size (content: base64 on stdin)
 *
 * The resolved path travels as base64 too: a file name may hold a newline (or any byte but NUL
 * and /), and the output is read line by line.
 *
 * A file with a NUL byte in its first 8 KiB is binary: OFFSET/LIMIT count bytes; otherwise they
 * count lines (1-based), as the Hermes agent's read_file does. Exit codes name the failure.
 */
export const FILE_SCRIPT = String.raw`set -u
op=$1 given=$2
r=$(realpath -m -- "$given" 2>/dev/null) || { echo "cannot resolve $given" >&2; exit 65; }
case "$r" in
  /tmp/.hermes-session|/tmp/.hermes-session/*) exit 64 ;;
  /workspace|/workspace/*|/tmp|/tmp/*) ;;
  *) exit 64 ;;
esac
if [ "$op" = read ]; then
  offset=$3 limit=$4 max=$5
  [ -e "$r" ] || exit 66
  [ -f "$r" ] || exit 67
  [ -r "$r" ] || exit 68
  size=$(stat -c %s -- "$r")
  if [ "$(head -c 8192 -- "$r" | tr -d '\000' | wc -c)" != "$(head -c 8192 -- "$r" | wc -c)" ]; then
    printf '%s\n%s\nbinary\n0\n' "$(printf '%s' "$r" | base64 -w0)" "$size"
    tail -c "+$offset" -- "$r" | head -c "$limit" | head -c "$max" | base64 -w0
  else
    lines=$(wc -l < "$r")
    if [ "$size" -gt 0 ] && [ "$(tail -c 1 -- "$r" | wc -l)" = 0 ]; then lines=$((lines + 1)); fi
    printf '%s\n%s\ntext\n%s\n' "$(printf '%s' "$r" | base64 -w0)" "$size" "$lines"
    tail -n "+$offset" -- "$r" | head -n "$limit" | head -c "$((max + 1))" | base64 -w0
  fi
  exit 0
fi
if [ "$op" = write ]; then
  [ -d "$r" ] && exit 67
  mkdir -p -- "$(dirname -- "$r")" 2>/dev/null || exit 68
  base64 -d > "$r" || exit 69
  printf '%s\n%s\n' "$(printf '%s' "$r" | base64 -w0)" "$(stat -c %s -- "$r")"
  exit 0
fi
exit 2
`

/** What each exit code of FILE_SCRIPT means. */
export const FILE_SCRIPT_EXITS = {
  64: "outside-sandbox",
  65: "failed",
  66: "not-found",
  67: "not-a-file",
  68: "permission-denied",
  69: "failed"
} as const
