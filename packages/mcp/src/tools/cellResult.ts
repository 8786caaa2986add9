/**
 * A cell's result (session.runCell, docs/design/kernel.md §12) as run_python returns it to a model.
 * Everything in a CellResult but the status, the counts and `stateLost` is the cell's own output,
 * untrusted and already bounded by the host (CellCapture); this adds the bounds of a model's result
 * (SECURITY.md, Kernels, the bounds table, row "MCP run_python"):
 *
 * - stdout and stderr as execute_code's (results.ts boundStreams: 50,000 and 10,000 bytes);
 * - the `text/plain` of the last expression's value and of the displays: TEXT_BUDGET bytes in all,
 *   the value first (each piece head and tail), what does not fit left out and said so;
 * - the traceback: TRACEBACK_BYTES, head and tail; the exception's value VALUE_BYTES;
 * - PNG and JPEG displays, only when the decoded bytes start with the type's signature
 *   (Artifacts.mimeOf), as images.ts's policy says: image content within the call's budget
 *   (inline), or named by their resource (link: kept by the server, `keepImages`), or described
 *   only (none); HTML, SVG, Markdown and JSON are never sent (they are named in `mime_types` only);
 * - at most MAX_LISTED_OUTPUTS displays described, MAX_LISTED_TYPES MIME types each, names cut to
 *   MAX_TYPE_NAME characters;
 * - late output (printed between cells) within stderr's cap.
 */
import { Artifacts, type CellOutput, type CellResult } from "@hermes-sandbox/core"
import {
  ImageBudget,
  type ImageFacts,
  imageFacts,
  type ImageLimits,
  type ImageMode,
  type ImageOutcome,
  outcomeWords
} from "./images.js"
import { boundStreams, type ExtraContent, headTail, outputOf, type ResultCaps, withNewline } from "./results.js"
import type { CellOutputInfo, RunPythonResult } from "./schemas.js"

/** Bytes of `text/plain` (the last expression's and the displays') a result carries in all. */
export const TEXT_BUDGET = 20_000
/** Bytes of a traceback a result carries (head and tail). */
export const TRACEBACK_BYTES = 20_000
/** Bytes of an exception's value a result carries (head and tail). */
export const VALUE_BYTES = 2_000
/** Displays described in a result at most (the rest counted in displays_omitted). */
export const MAX_LISTED_OUTPUTS = 100
/** MIME types named per output at most, and characters of each name. */
export const MAX_LISTED_TYPES = 16
export const MAX_TYPE_NAME = 100
/** A piece of text/plain is left out rather than cut below this many bytes. */
const MIN_PIECE = 64

/** The images sent as image content, in the order a bundle is looked at. */
const IMAGE_TYPES = ["image/png", "image/jpeg"] as const

export interface CellContext {
  readonly caps: ResultCaps
  /** This call's image mode (its argument, else the server's), and the server's image limits. */
  readonly images: ImageMode
  readonly imageLimits: ImageLimits
  /**
   * Keep the cell's images that were not sent inline, as resources: their URI by name, or
   * undefined when the server could not keep them. Not called in mode none.
   */
  readonly keepImages: (cellId: string, images: ReadonlyArray<UnsentImage>) => ((name: string) => string) | undefined
  /** The deadline the cell had, and the largest one the caller may ask for, for the timeout's words. */
  readonly timeoutS: number
  readonly maxTimeoutS: number
  /** The kernel was restarted first, on request (reset). */
  readonly reset: boolean
  /**
   * The earlier cells ran in a session sandbox that is gone (idle expiry): the words of the result's
   * stateLost (which says the loss itself, as the journal does) name that cause.
   */
  readonly sandboxReplaced: boolean
  /** The server's idle limit of a session sandbox, for the words of a replaced one. */
  readonly sessionIdleS: number
}

const bytesOf = (bundle: CellOutput["data"]): number =>
  Object.values(bundle).reduce((n, v) => n + Buffer.byteLength(v, "utf8"), 0)

const typeNames = (bundle: CellOutput["data"]): ReadonlyArray<string> =>
  Object.keys(bundle)
    .slice(0, MAX_LISTED_TYPES)
    .map((t) => (t.length > MAX_TYPE_NAME ? `${t.slice(0, MAX_TYPE_NAME)}…` : t))

/** A bundle's image as bytes, if it has one whose decoded bytes carry the type's signature. */
const imageOf = (bundle: CellOutput["data"]): { readonly mime: string; readonly bytes: Buffer } | undefined => {
  for (const mime of IMAGE_TYPES) {
    const value = Object.hasOwn(bundle, mime) ? bundle[mime] : undefined
    if (value === undefined) continue
    const bytes = Buffer.from(value, "base64")
    if (Artifacts.mimeOf("", bytes) === mime) return { mime, bytes }
  }
  return undefined
}

/** An image of the cell that was not sent inline, for the server to keep as a resource: `name` as cellImageUri takes it. */
export interface UnsentImage {
  readonly name: string
  readonly mime: string
  readonly bytes: Buffer
}

/** The run_python result of a cell, and its image content blocks. */
export const cellResult = (
  r: CellResult,
  context: CellContext
): { readonly value: RunPythonResult; readonly content: ReadonlyArray<ExtraContent> } => {
  const streams = boundStreams(r, context.caps)
  const content: Array<ExtraContent> = []
  const notes: Array<string> = []
  const budget = new ImageBudget(context.images, context.imageLimits)
  const unsent: Array<UnsentImage> = []
  let textBudget = TEXT_BUDGET
  let textLeftOut = 0

  /** The output's description, its text/plain within what is left of the budget, what became of its image. */
  const describe = (o: CellOutput, name: string) => {
    const plain = Object.hasOwn(o.data, "text/plain") ? o.data["text/plain"] : undefined
    let text: string | undefined
    let cut = false
    if (plain !== undefined) {
      if (textBudget >= MIN_PIECE || Buffer.byteLength(plain, "utf8") <= textBudget) {
        const bounded = headTail(plain, textBudget)
        text = bounded.text
        cut = bounded.captured < Buffer.byteLength(plain, "utf8")
        textBudget -= bounded.captured
      } else {
        cut = true
        textLeftOut++
      }
    }
    const found = imageOf(o.data)
    let image: { facts: ImageFacts; size: number; outcome: ImageOutcome; name: string } | undefined
    if (found !== undefined) {
      const outcome = budget.admit(found.bytes.length)
      const file = `${name}.${found.mime === "image/png" ? "png" : "jpg"}`
      if (outcome.sent) content.push({ type: "image", data: found.bytes.toString("base64"), mimeType: found.mime })
      else if (context.images !== "none") unsent.push({ name: file, mime: found.mime, bytes: found.bytes })
      image = { facts: imageFacts(found.mime, found.bytes), size: found.bytes.length, outcome, name: file }
    }
    return { data: o.data, plain, text, cut, image }
  }

  // The value first: of everything a cell returns, it is what was asked for.
  const described = r.result === undefined ? undefined : describe(r.result, "out")
  const listed = r.displays.slice(0, MAX_LISTED_OUTPUTS)
  const describedDisplays = listed.map((d, i) => describe(d, `display-${i + 1}`))
  const unlisted = r.displays.slice(MAX_LISTED_OUTPUTS)
  // The images not sent are kept for their resources (images: inline past the budget, or link).
  const uriOf = unsent.length === 0 ? undefined : context.keepImages(r.cellId, unsent)

  /** Its entry in the result, and the words of its image for `output`. */
  const finish = (
    d: ReturnType<typeof describe>
  ): { info: CellOutputInfo; text: string | undefined; image: string | undefined } => {
    const uri = d.image === undefined || d.image.outcome.sent ? undefined : uriOf?.(d.image.name)
    const info: CellOutputInfo = {
      mime_types: typeNames(d.data),
      bytes: bytesOf(d.data),
      ...(d.text === undefined ? {} : { text: d.text }),
      ...(d.plain === undefined ? {} : { text_truncated: d.cut }),
      image: d.image?.outcome.sent === true,
      ...(d.image?.facts.width === undefined ? {} : { width: d.image.facts.width, height: d.image.facts.height }),
      ...(uri === undefined ? {} : { uri })
    }
    const image =
      d.image === undefined
        ? undefined
        : outcomeWords(d.image.size, d.image.facts, d.image.outcome, context.images, uri)
    return { info, text: d.text, image }
  }
  const result = described === undefined ? undefined : finish(described)
  const displays = describedDisplays.map(finish)

  let printed = streams.printed
  displays.forEach((d, i) => {
    const types = d.info.mime_types.join(", ")
    printed += `[display ${i + 1}: ${types}${d.image === undefined ? "" : `; ${d.image}`}]\n`
    if (d.text !== undefined) printed += withNewline(d.text)
  })
  if (result !== undefined) {
    printed += `Out[${r.executionCount}]: ${result.text === undefined ? `(${result.info.mime_types.join(", ")})` : withNewline(result.text)}`
    printed = withNewline(printed)
    if (result.image !== undefined) printed += `[Out[${r.executionCount}]: ${result.image}]\n`
  }
  let error: RunPythonResult["error"]
  if (r.error !== undefined) {
    const joined = r.error.traceback.join("\n")
    const traceback = headTail(joined, TRACEBACK_BYTES)
    const value = headTail(r.error.value, VALUE_BYTES)
    const cut =
      r.error.truncated ||
      traceback.captured < Buffer.byteLength(joined, "utf8") ||
      value.captured < Buffer.byteLength(r.error.value, "utf8")
    error = { name: r.error.name, value: value.text, traceback: traceback.text, truncated: cut }
    printed += `--- error ---\n${withNewline(traceback.text === "" ? `${r.error.name}: ${value.text}` : traceback.text)}`
  }

  const late = r.lateOutput === undefined ? undefined : headTail(r.lateOutput.text, context.caps.stderrBytes)
  if (late !== undefined && r.lateOutput !== undefined) {
    notes.push(
      `Printed between cells by a thread or process an earlier cell left running (${r.lateOutput.bytes} bytes; not this cell's output): ${late.text}`
    )
  }
  if (r.status === "timeout") {
    notes.push(
      `⏰ Timed out after ${context.timeoutS} s: the cell was interrupted (KeyboardInterrupt)${r.stateLost ? " and, since the kernel did not stop in time, killed" : "; the kernel stopped and keeps its state"}. What it printed until then is above. Make the cell faster, or pass a larger timeout_s (at most ${context.maxTimeoutS}).`
    )
  }
  if (r.status === "interrupted") notes.push("The cell was interrupted: the call was cancelled.")
  if (r.status === "crashed")
    notes.push(
      r.oomKilled
        ? "The Python kernel ran out of memory and was killed (OOM); a new one starts with the next call."
        : "The Python kernel died under the cell; a new one starts with the next call."
    )
  if (r.stateLost) {
    notes.push(
      context.sandboxReplaced
        ? `state_lost: the session sandbox was removed after ${context.sessionIdleS} s without a call and this is a new one; variables and imports from earlier cells are gone, and so are its files.`
        : "state_lost: the Python kernel was restarted; variables and imports from earlier cells are gone."
    )
  }
  if (context.reset) notes.push("The kernel was restarted first (reset): this cell ran on a fresh one.")
  if (streams.note !== undefined) notes.push(streams.note)
  if (textLeftOut > 0 || displays.some((d) => d.info.text_truncated === true) || result?.info.text_truncated === true)
    notes.push(`Text output was cut: the values' and displays' text/plain is kept to ${TEXT_BUDGET} bytes in all.`)
  const omitted = r.displaysOmitted
  const unlistedBytes = unlisted.reduce((n, d) => n + bytesOf(d.data), 0)
  const omittedCount = omitted.count + unlisted.length
  const reasons = [
    ...Object.entries(omitted.reasons).map(([reason, n]) => `${reason}: ${n}`),
    ...(unlisted.length > 0 ? [`past the ${MAX_LISTED_OUTPUTS} described: ${unlisted.length}`] : [])
  ].join(", ")
  if (omittedCount > 0)
    notes.push(`${omittedCount} ${omittedCount === 1 ? "output was" : "outputs were"} not returned (${reasons}).`)
  else if (reasons !== "") notes.push(`Parts of outputs were dropped (${reasons}).`)

  const value: RunPythonResult = {
    status: r.status,
    output: outputOf(printed, notes),
    execution_count: r.executionCount,
    ...streams.fields,
    ...(result === undefined ? {} : { result: result.info }),
    displays: displays.map((d) => d.info),
    ...(omittedCount > 0 || Object.keys(omitted.reasons).length > 0
      ? {
          displays_omitted: {
            count: omittedCount,
            bytes: omitted.bytes + unlistedBytes,
            reasons: {
              ...omitted.reasons,
              ...(unlisted.length > 0 ? { unlisted: unlisted.length } : {})
            }
          }
        }
      : {}),
    ...(error === undefined ? {} : { error }),
    state_lost: r.stateLost,
    oom_killed: r.oomKilled,
    ...(late === undefined ? {} : { late_output: late.text }),
    duration_seconds: r.durationMs / 1000,
    session_id: r.sessionId
  }
  return { value, content }
}
