/**
 * The CLI's own failures (the SDK's are its typed errors). Plain classes with a `_tag` like the
 * SDK's errors rather than Schema.TaggedError: they must be reported without loading Effect, so
 * `--help`, `--version` and a mistyped option stay fast.
 */

/** A bad command line (exit 2). */
export class UsageError extends Error {
  readonly _tag = "UsageError"
}

/** What was asked to be read does not exist: the journal, an execution (exit 1). */
export class NotFound extends Error {
  readonly _tag = "NotFound"
}
