/**
 * The languages a request may name, and how each maps to an image and an
 * interpreter. Every image carries the supervisor (`/opt/hermes/hermes-run`) that
 * reads the program from standard input (see RunnerProtocol), so code never
 * touches the host filesystem and is never interpolated into a shell string.
 */
export const Languages = ["python", "javascript", "bash"] as const
export type Language = (typeof Languages)[number]

/** Accepted spellings, so agents writing "js" or "sh" are not refused for style. */
export const LanguageAliases: Record<string, Language> = {
  python: "python",
  python3: "python",
  py: "python",
  javascript: "javascript",
  js: "javascript",
  node: "javascript",
  nodejs: "javascript",
  bash: "bash",
  sh: "bash",
  shell: "bash"
}

export interface LanguageRuntime {
  readonly image: string
  /** The container's command: the runner, which then execs the interpreter on the delivered code. */
  readonly command: ReadonlyArray<string>
}

export const defaultLanguageRuntimes: Record<Language, LanguageRuntime> = {
  python: { image: "hermes-sandbox/python:latest", command: ["/opt/hermes/hermes-run"] },
  javascript: { image: "hermes-sandbox/node:latest", command: ["/opt/hermes/hermes-run"] },
  bash: { image: "hermes-sandbox/bash:latest", command: ["/opt/hermes/hermes-run"] }
}
