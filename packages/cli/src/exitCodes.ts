/** Exit codes, chosen to match `timeout(1)` and `docker run` so scripts can tell outcomes apart. */
export const ExitCode = {
  ok: 0,
  /** Nothing matched: no journal at the path, no execution with that id (like grep's 1). */
  notFound: 1,
  /** Bad command line or invalid request. */
  usage: 2,
  /** The program ran past its timeout (like `timeout`). */
  timedOut: 124,
  /** The sandbox itself failed: engine unavailable, image missing, container refused (like `docker run`). */
  sandboxFailed: 125,
  /** `run`'s standard output was closed by its reader (`| head`): the run was stopped (128 + SIGPIPE's 13). */
  brokenPipe: 141,
  /** Interrupted by SIGINT (128 + 2). */
  sigint: 130,
  /** Terminated by SIGTERM (128 + 15). */
  sigterm: 143
} as const
