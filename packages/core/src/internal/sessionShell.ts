/**
 * The shell side of a session: one fixed bash script that every session call execs.
 * The user's command reaches it as an ARGUMENT (`$1`), never spliced into a shell
 * string, and the script itself never changes.
 *
 *   bash -c SESSION_SHELL hermes-session <stateDir> <nonce> <keepNames> <mode> [args...]
 *
 * mode "eval"   : args = [command string]; run with `eval` (it IS shell: `cd`, `export`, pipes)
 *      "argv"   : args = argv; run as is
 *      "runner" : args = the runner's argv; it reads a RunnerProtocol payload from stdin and
 *                 runs the code with cwd = the session's cwd ($HERMES_WORKSPACE)
 *      "idle"   : print the seconds since the last call ended ("none" before the first); the reaper's probe
 *
 * Carried between calls, in <stateDir> (tmpfs, mode 0700, owned by the sandbox user):
 *   cwd  the working directory (NUL-terminated: paths may contain newlines)
 *   env  `export -p` of the variables the commands exported
 * Variables named in <keepNames> come from the exec's environment (session env, forwarded
 * secrets, per-call env): they always win over the saved state and are never written to it.
 *
 * After the command, the script saves the state and writes the completion marker
 * `\x1eHERMES-DONE <nonce> <exit code>\n` on stdout AND stderr (as the runner does, see
 * RunnerProtocol.CompletionScanner), so the caller knows the command is done without waiting
 * for the streams to end (a background job may hold them open). `exit N` in the command
 * still saves the state (EXIT trap). A command that `exec`s away skips both; the caller then
 * falls back to the exec's own exit.
 *
 * Calls on one state dir are serialized by `flock -o` when the image has flock (another
 * process holding the same persistent container); the lock's descriptor is not inherited by
 * the command, so a background job cannot hold it.
 */
export const SESSION_STATE_DIR = "/tmp/.hermes-session"

export type SessionShellMode = "eval" | "argv" | "runner" | "idle"

export const SESSION_SHELL = String.raw`__hs_dir=$1 __hs_nonce=$2 __hs_keep=$3 __hs_mode=$4
shift 4
IFS=$' \t\n'
if [ "$__hs_mode" = idle ]; then
  if [ -f "$__hs_dir/cwd" ]; then echo $(( $(date +%s) - $(stat -c %Y -- "$__hs_dir/cwd") )); else echo none; fi
  exit 0
fi
if [ -z "${"${"}__HS_LOCKED-}" ] && command -v flock >/dev/null 2>&1; then
  mkdir -p -m 700 -- "$__hs_dir" 2>/dev/null
  export __HS_LOCKED=1
  exec flock -o -- "$__hs_dir/lock" bash -c "$BASH_EXECUTION_STRING" hermes-session "$__hs_dir" "$__hs_nonce" "$__hs_keep" "$__hs_mode" "$@"
fi
unset __HS_LOCKED
mkdir -p -m 700 -- "$__hs_dir" 2>/dev/null
read -r -a __hs_names <<< "$__hs_keep"
declare -A __hs_saved=()
for __hs_n in "${"${"}__hs_names[@]}"; do
  if [ -n "${"${"}!__hs_n+x}" ]; then __hs_saved[$__hs_n]=${"${"}!__hs_n}; fi
done
if [ -f "$__hs_dir/env" ]; then . "$__hs_dir/env"; fi
for __hs_n in "${"${"}!__hs_saved[@]}"; do export "$__hs_n=${"${"}__hs_saved[$__hs_n]}"; done
if [ -f "$__hs_dir/cwd" ] && IFS= read -r -d '' __hs_cwd < "$__hs_dir/cwd"; then cd -- "$__hs_cwd" 2>/dev/null; fi
exec {__hs_out}>&1 {__hs_err}>&2
__hs_finish() {
  __hs_status=$?
  trap - EXIT
  set +euo pipefail
  ( for __hs_n in "${"${"}__hs_names[@]}" SHLVL PWD OLDPWD _; do unset "$__hs_n" 2>/dev/null; done; export -p ) > "$__hs_dir/env.tmp" 2>/dev/null && mv -f -- "$__hs_dir/env.tmp" "$__hs_dir/env"
  printf '%s\0' "$PWD" > "$__hs_dir/cwd.tmp" 2>/dev/null && mv -f -- "$__hs_dir/cwd.tmp" "$__hs_dir/cwd"
  printf '\036HERMES-DONE %s %d\n' "$__hs_nonce" "$__hs_status" >&"$__hs_out"
  printf '\036HERMES-DONE %s %d\n' "$__hs_nonce" "$__hs_status" >&"$__hs_err"
  exit "$__hs_status"
}
trap __hs_finish EXIT
case "$__hs_mode" in
  eval) eval "$1" ;;
  argv) "$@" ;;
  runner) HERMES_WORKSPACE=$PWD "$@" ;;
  *) echo "hermes-session: unknown mode $__hs_mode" >&2; exit 126 ;;
esac
`

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

export interface SessionInvocation {
  readonly stateDir: string
  readonly nonce: string
  /** Variables from the exec's environment that win over the saved state and are never saved. */
  readonly keep: ReadonlyArray<string>
  readonly mode: SessionShellMode
  readonly args: ReadonlyArray<string>
}

/** The argv of one session call. */
export const sessionInvocation = (i: SessionInvocation): ReadonlyArray<string> => {
  for (const name of i.keep) if (!NAME.test(name)) throw new Error(`not a variable name: ${JSON.stringify(name)}`)
  return ["bash", "-c", SESSION_SHELL, "hermes-session", i.stateDir, i.nonce, i.keep.join(" "), i.mode, ...i.args]
}

/** The inverse of sessionInvocation (the fake runtime emulates the script from it); undefined for any other argv. */
export const parseSessionInvocation = (command: ReadonlyArray<string>): SessionInvocation | undefined => {
  if (command.length < 8 || command[0] !== "bash" || command[1] !== "-c" || command[2] !== SESSION_SHELL) return undefined
  const [, , , , stateDir = "", nonce = "", keep = "", mode = "", ...args] = command
  if (mode !== "eval" && mode !== "argv" && mode !== "runner" && mode !== "idle") return undefined
  return { stateDir, nonce, keep: keep === "" ? [] : keep.split(" "), mode, args }
}
