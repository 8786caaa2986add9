/**
 * Your service: evaluates an arithmetic expression in a sandbox and answers in its own terms
 * (a value, a timeout or an error), never with the sandbox's result shape. The expression goes in
 * on standard input, not into the code, so no input can change the program.
 */
import type { SandboxExecutor } from "@hermes-sandbox/docker"

export type Evaluation =
  | { readonly ok: true; readonly value: string }
  | { readonly ok: false; readonly reason: "timeout" | "error"; readonly detail: string }

const program = "import sys\nprint(eval(sys.stdin.read(), {'__builtins__': {}}))\n"

export const evaluate = async (
  executor: SandboxExecutor,
  expression: string,
  options: { readonly timeoutMs?: number; readonly signal?: AbortSignal } = {}
): Promise<Evaluation> => {
  const timeoutMs = options.timeoutMs ?? 2_000
  const result = await executor.executeCode(
    { language: "python", code: program, stdin: expression, timeoutMs },
    options.signal === undefined ? {} : { signal: options.signal }
  )
  if (result.timedOut) return { ok: false, reason: "timeout", detail: `no answer within ${timeoutMs} ms` }
  if (result.exitCode !== 0) {
    const lastLine = result.stderr.trim().split("\n").at(-1)
    return { ok: false, reason: "error", detail: lastLine || `exit code ${result.exitCode}` }
  }
  return { ok: true, value: result.stdout.trim() }
}
