/**
 * Typed failures of the journal.
 */
import * as Schema from "effect/Schema"

/**
 * Storage failed (I/O, SQLite busy past the timeout, corrupt row, invalid event, closed
 * journal). `cause` keeps the underlying error for diagnosis.
 *
 * @category errors
 */
export class JournalError extends Schema.TaggedError<JournalError>("@hermes-sandbox/events/JournalError")(
  "JournalError",
  {
    message: Schema.String,
    cause: Schema.optional(Schema.Defect)
  }
) {}

/**
 * An append with `expectedVersion` found the stream at another version (optimistic
 * concurrency: someone else appended to the stream first). Nothing was written.
 *
 * @category errors
 */
export class VersionConflict extends Schema.TaggedError<VersionConflict>("@hermes-sandbox/events/VersionConflict")(
  "VersionConflict",
  {
    streamId: Schema.String,
    expected: Schema.Number,
    actual: Schema.Number
  }
) {
  override get message(): string {
    return `stream ${this.streamId} is at version ${this.actual}, expected ${this.expected}`
  }
}
