/**
 * Where the Promise facades' diagnostics (e.g. a limit or quota the engine cannot apply, with
 * "warn") go: standard error, never standard output, which belongs to the caller (an agent
 * speaking a protocol over stdio, the CLI printing a program's output).
 */
import { Layer, Logger } from "effect"

const toStderr = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

/** `layer`, built and then run with the stderr logger. */
export const withFacadeLogger = <A, E>(layer: Layer.Layer<A, E>): Layer.Layer<A, E> =>
  Layer.merge(layer.pipe(Layer.provide(toStderr)), toStderr)
