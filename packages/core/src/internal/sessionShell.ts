/**
 * The shell side of a session: one fixed bash script (internal/session-shell.sh) that every
 * session call runs, as the child of the call's supervisor (images/runner/hermes-run.c, framed
 * argv mode). The user's command reaches it as an ARGUMENT (`$1`), never spliced into a shell
 * string, and the script itself never changes.
 *
 *   bash -c SESSION_SHELL hermes-session <stateDir> <keepNames> <mode> [args...]
 *
 * mode "eval"   : args = [command string]; run with `eval` (it IS shell: `cd`, `export`, pipes)
 *      "argv"   : args = argv; run as is
 *      "runner" : args = the supervisor's argv; it reads a plain RunnerProtocol payload from stdin
 *                 and execs the code with cwd = the session's cwd ($HERMES_WORKSPACE)
 *      "idle"   : print the seconds since the last call ended ("none" before the first)
 *      "background" : args = [cwd or "", command string]: a background process (session/background.ts),
 *                 run with `eval` in the session's directory and variables, saving nothing back;
 *                 started under `setsid -w` (backgroundInvocation), so it leads its own session
 *      "signal" : args = [signal, pid, start]: send the signal to every process in the session led by
 *                 that background process (checked by its start time; exit 3 if it is gone)
 *
 * Carried between calls, in <stateDir> (tmpfs, mode 0700, owned by the sandbox user):
 *   cwd  the working directory (NUL-terminated: paths may contain newlines)
 *   env  `export -p` of the variables the commands exported
 * Variables named in <keepNames> come from the exec's environment (session env, forwarded
 * secrets, per-call env): they always win over the saved state and are never written to it.
 * HERMES_TOOLS_SOCKET (a runCode call's tool channel, set by its supervisor) is never carried:
 * the next call has the tools it is given, or none.
 *
 * The script reports nothing itself: the supervisor that runs it holds the session's lock (so
 * calls from two processes on one persistent sandbox are serialized), relays its output in
 * frames and reports its exit once it has exited, none of which a process in the sandbox can
 * forge (see RunnerProtocol). `exit N` in the command still saves the state (EXIT trap); a
 * command that `exec`s away skips that.
 */
import { SESSION_SHELL } from "./session-shell.sh.generated.js"

export const SESSION_STATE_DIR = "/tmp/.hermes-session"

export type SessionShellMode = "eval" | "argv" | "runner" | "idle" | "background" | "signal"

/** The script, kept in internal/session-shell.sh (linted by shellcheck) and embedded by `pnpm codegen`. */
export { SESSION_SHELL }

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

export interface SessionInvocation {
  readonly stateDir: string
  /** Variables from the exec's environment that win over the saved state and are never saved. */
  readonly keep: ReadonlyArray<string>
  readonly mode: SessionShellMode
  readonly args: ReadonlyArray<string>
}

/** The argv of one session call. */
export const sessionInvocation = (i: SessionInvocation): ReadonlyArray<string> => {
  for (const name of i.keep) if (!NAME.test(name)) throw new Error(`not a variable name: ${JSON.stringify(name)}`)
  return ["bash", "-c", SESSION_SHELL, "hermes-session", i.stateDir, i.keep.join(" "), i.mode, ...i.args]
}

/** A background process's argv: the session shell in "background" mode as the leader of its own session. */
export const backgroundInvocation = (i: Omit<SessionInvocation, "mode">): ReadonlyArray<string> => [
  "setsid",
  "-w",
  ...sessionInvocation({ ...i, mode: "background" })
]

/** The inverse of sessionInvocation (the fake runtime emulates the script from it); undefined for any other argv. */
export const parseSessionInvocation = (command: ReadonlyArray<string>): SessionInvocation | undefined => {
  if (command[0] === "setsid" && command[1] === "-w") command = command.slice(2)
  if (command.length < 7 || command[0] !== "bash" || command[1] !== "-c" || command[2] !== SESSION_SHELL)
    return undefined
  const [, , , , stateDir = "", keep = "", mode = "", ...args] = command
  if (!["eval", "argv", "runner", "idle", "background", "signal"].includes(mode)) return undefined
  return { stateDir, keep: keep === "" ? [] : keep.split(" "), mode: mode as SessionShellMode, args }
}

/** The session's lock file, held by each call's supervisor while the call runs. */
export const SESSION_LOCK = `${SESSION_STATE_DIR}/lock`
