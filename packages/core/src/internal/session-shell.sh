# shellcheck shell=bash
# The session shell (packages/core/src/internal/sessionShell.ts says what it does): every session
# call runs `bash -c <this file> hermes-session <stateDir> <keepNames> <mode> [args...]`.
__hs_dir=$1 __hs_keep=$2 __hs_mode=$3
shift 3
IFS=$' \t\n'
if [ "$__hs_mode" = idle ]; then
  if [ -f "$__hs_dir/cwd" ]; then echo $(( $(date +%s) - $(stat -c %Y -- "$__hs_dir/cwd") )); else echo none; fi
  exit 0
fi
if [ "$__hs_mode" = signal ]; then
  # args: <signal> <pid> <start>: a background process (session/background.ts), the leader of its own
  # session (setsid), checked by its start time; every process in that session gets the signal.
  __hs_sig=$1 __hs_pid=$2 __hs_start=$3
  read -r __hs_stat < "/proc/$__hs_pid/stat" 2>/dev/null || exit 3
  read -r -a __hs_f <<< "${__hs_stat##*) }"
  [ "${__hs_f[19]}" = "$__hs_start" ] || exit 3
  for __hs_p in /proc/[0-9]*; do
    read -r __hs_stat < "$__hs_p/stat" 2>/dev/null || continue
    read -r -a __hs_f <<< "${__hs_stat##*) }"
    if [ "${__hs_f[3]}" = "$__hs_pid" ]; then kill -s "$__hs_sig" "${__hs_p#/proc/}" 2>/dev/null; fi
  done
  exit 0
fi
# The state directory's parent (/tmp) exists, so -m applies to the one directory -p creates.
# shellcheck disable=SC2174
mkdir -p -m 700 -- "$__hs_dir" 2>/dev/null
read -r -a __hs_names <<< "$__hs_keep"
declare -A __hs_saved=()
for __hs_n in "${__hs_names[@]}"; do
  if [ -n "${!__hs_n+x}" ]; then __hs_saved[$__hs_n]=${!__hs_n}; fi
done
# The state this script saved (export -p) at the end of the previous call.
# shellcheck source=/dev/null
if [ -f "$__hs_dir/env" ]; then . "$__hs_dir/env"; fi
for __hs_n in "${!__hs_saved[@]}"; do export "$__hs_n=${__hs_saved[$__hs_n]}"; done
if [ -f "$__hs_dir/cwd" ] && IFS= read -r -d '' __hs_cwd < "$__hs_dir/cwd"; then cd -- "$__hs_cwd" 2>/dev/null || true; fi
__hs_finish() {
  __hs_status=$?
  trap - EXIT
  set +euo pipefail
  ( for __hs_n in "${__hs_names[@]}" SHLVL PWD OLDPWD _ HERMES_TOOLS_SOCKET; do unset "$__hs_n" 2>/dev/null; done; export -p ) > "$__hs_dir/env.tmp" 2>/dev/null && mv -f -- "$__hs_dir/env.tmp" "$__hs_dir/env"
  printf '%s\0' "$PWD" > "$__hs_dir/cwd.tmp" 2>/dev/null && mv -f -- "$__hs_dir/cwd.tmp" "$__hs_dir/cwd"
  exit "$__hs_status"
}
if [ "$__hs_mode" = background ]; then
  # args: <cwd or empty> <command>: the session's directory and variables, never saved back.
  if [ -n "$1" ]; then cd -- "$1" || exit 1; fi
  eval "$2"
  exit
fi
trap __hs_finish EXIT
case "$__hs_mode" in
  eval) eval "$1" ;;
  argv) "$@" ;;
  runner) HERMES_WORKSPACE=$PWD "$@" ;;
  *) echo "hermes-session: unknown mode $__hs_mode" >&2; exit 126 ;;
esac
