/** The MCP layer's own failures (the SDK's are re-used as they are: InvalidRequest, ContainerFailed, ...). */
import { Schema } from "effect"

/** Arguments that do not match the tool's schema, each issue with its field. */
export class InvalidArguments extends Schema.TaggedError<InvalidArguments>()("InvalidArguments", {
  tool: Schema.String,
  issues: Schema.Array(Schema.Struct({ field: Schema.String, message: Schema.String })),
  message: Schema.String
}) {}

/** Every session sandbox this server (or this HTTP client) may hold is live. */
export class SessionLimitReached extends Schema.TaggedError<SessionLimitReached>()("SessionLimitReached", {
  limit: Schema.Number,
  scope: Schema.Literal("server", "client"),
  message: Schema.String
}) {}

/** A read_file or write_file that cannot be done, and why. */
export class FileOperationFailed extends Schema.TaggedError<FileOperationFailed>()("FileOperationFailed", {
  path: Schema.String,
  reason: Schema.Literal("outside-sandbox", "not-found", "not-a-file", "permission-denied", "too-large", "failed"),
  message: Schema.String
}) {}

/** The MCP session is over (closed, expired, the server stopping): nothing more runs in it. */
export class McpSessionClosed extends Schema.TaggedError<McpSessionClosed>()("McpSessionClosed", {
  message: Schema.String
}) {}

/** An upstream configuration (`--upstream-config FILE`, or McpSandbox.open's `upstream`) that cannot be used, and where. */
export class UpstreamConfigError extends Schema.TaggedError<UpstreamConfigError>()("UpstreamConfigError", {
  /** The file, when it came from one. */
  path: Schema.optional(Schema.String),
  /** The server entry at fault, when one is. */
  server: Schema.optional(Schema.String),
  message: Schema.String
}) {}
