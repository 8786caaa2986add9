/**
 * What execute_code's `collect` brought back, as a model and its client receive it. Every file is
 * a `resource_link` to the server's copy (resources/read), listed in the result's JSON (path,
 * size, sha256, media type, uri) and named in `output` too, since some clients drop images and
 * links; PNG/JPEG/GIF/WebP files are also `image` blocks as images.ts's policy says (inline, within
 * the call's budget), else named with their resource (link) or described only (none). Skipped
 * entries are listed with their reasons: nothing is dropped silently.
 */
import type { ExecutionResult } from "@hermes-sandbox/core"
import { fileUri } from "../resources.js"
import { ImageBudget, imageFacts, type ImageLimits, type ImageMode, outcomeWords } from "./images.js"
import { type ExtraContent, quotedName } from "./results.js"
import type { ExecuteCodeResult } from "./schemas.js"

/** The raster types MCP clients show; their mime comes from the content's signature, not the name. */
const INLINE_IMAGE = /^image\/(png|jpeg|gif|webp)$/

/** Files and skipped entries named in `output` at most (the JSON lists more), each name cut to NAME_IN_OUTPUT characters. */
const NAMED_IN_OUTPUT = 20
const NAME_IN_OUTPUT = 200

/**
 * What one result lists at most, whatever limits the server was given (maxFiles reaches 100,000):
 * files (each also a resource_link) and skipped entries, in count and in bytes of their paths.
 * Past that the result says how many more there were (`files_omitted`, `skipped_files_omitted`);
 * the files are still the server's resources (resources/list).
 */
export const MAX_LISTED_FILES = 1000
export const MAX_LISTED_SKIPPED = 100
export const MAX_LISTED_PATH_BYTES = 256 * 1024

/** The head of `items` within `maxCount` entries and `maxBytes` of their paths. */
const bounded = <A>(
  items: ReadonlyArray<A>,
  maxCount: number,
  pathOf: (a: A) => string
): { readonly listed: ReadonlyArray<A>; readonly omitted: number } => {
  let bytes = 0
  let n = 0
  while (n < items.length && n < maxCount) {
    bytes += Buffer.byteLength(pathOf(items[n]!), "utf8")
    if (bytes > MAX_LISTED_PATH_BYTES) break
    n++
  }
  return { listed: items.slice(0, n), omitted: items.length - n }
}

const shownName = (path: string) => quotedName(path, NAME_IN_OUTPUT)

export interface CollectedContext {
  /** This call's image mode (its argument, else the server's), and the server's image limits. */
  readonly images: ImageMode
  readonly imageLimits: ImageLimits
  /** The server keeps the files (as resources); false when it could not. */
  readonly kept: boolean
}

export type CollectedFields = Pick<
  ExecuteCodeResult,
  "files" | "skipped_files" | "files_truncated" | "collection" | "files_omitted" | "skipped_files_omitted"
>

const listed = <A>(items: ReadonlyArray<A>, total: number, show: (a: A) => string) =>
  items.slice(0, NAMED_IN_OUTPUT).map(show).join(", ") +
  (total > NAMED_IN_OUTPUT ? `, and ${total - NAMED_IN_OUTPUT} more (see the JSON)` : "")

/** The result's fields, `output`'s notes and the content blocks of a run with `collect`; undefined without. */
export const collectedResult = (
  r: ExecutionResult,
  context: CollectedContext
):
  | {
      readonly fields: CollectedFields
      readonly notes: ReadonlyArray<string>
      readonly content: ReadonlyArray<ExtraContent>
    }
  | undefined => {
  if (r.files === undefined) return undefined
  const skippedBound = bounded(r.skippedFiles ?? [], MAX_LISTED_SKIPPED, (s) => s.path)
  const skipped = skippedBound.listed
  const skippedTotal = skipped.length + skippedBound.omitted + (r.skippedFilesOmitted ?? 0)
  const filesBound = bounded(r.files, MAX_LISTED_FILES, (f) => f.path)
  const budget = new ImageBudget(context.images, context.imageLimits)
  const files = filesBound.listed.map((f) => {
    const uri = context.kept ? fileUri(r.executionId, f.path) : undefined
    if (!INLINE_IMAGE.test(f.mime)) return { file: f, image: false, uri, words: `${f.size} bytes, ${f.mime}` }
    const facts = imageFacts(f.mime, f.content)
    const outcome = budget.admit(f.size)
    return {
      file: f,
      image: outcome.sent,
      uri,
      facts,
      words: outcomeWords(f.size, facts, outcome, context.images, uri)
    }
  })
  const content: Array<ExtraContent> = [
    ...files
      .filter((f) => f.image)
      .map(
        (f): ExtraContent => ({
          type: "image",
          data: Buffer.from(f.file.content).toString("base64"),
          mimeType: f.file.mime
        })
      ),
    ...files.flatMap(
      ({ file, uri }): Array<ExtraContent> =>
        uri === undefined
          ? []
          : [
              {
                type: "resource_link",
                uri,
                name: file.path,
                mimeType: file.mime,
                size: file.size,
                description: `Collected from /workspace/${file.path} (sha256 ${file.sha256})`
              }
            ]
    )
  ]

  const notes: Array<string> = []
  if (r.files.length > 0) {
    notes.push(
      `Collected ${r.files.length} ${r.files.length === 1 ? "file" : "files"} from /workspace: ${listed(files, r.files.length, ({ file, words }) => `${shownName(file.path)} (${words})`)}.` +
        (context.kept
          ? " Read each with resources/read at its files[].uri (sandbox://executions/{execution_id}/files/{path})."
          : " The server could not keep them (over its file store), so they cannot be read as resources.")
    )
  }
  if (skippedTotal > 0)
    notes.push(`Not collected: ${listed(skipped, skippedTotal, (s) => `${shownName(s.path)} (${s.skipped})`)}.`)
  if (r.collection !== undefined && r.collection.status !== "complete") {
    notes.push(
      `The collection was cut short (${r.collection.reason ?? "the sandbox ended"}): ${r.collection.status === "none" ? "no file came back" : "only the files above came back"}.`
    )
  } else if (r.files.length === 0 && skippedTotal === 0) {
    notes.push("collect matched no file in /workspace.")
  }

  return {
    fields: {
      files: files.map(({ file, image, uri, facts }) => ({
        path: file.path,
        size_bytes: file.size,
        sha256: file.sha256,
        mime_type: file.mime,
        ...(uri === undefined ? {} : { uri }),
        image,
        ...(facts?.width === undefined ? {} : { width: facts.width, height: facts.height })
      })),
      skipped_files: skipped.map((s) => ({ path: s.path, size_bytes: s.size, reason: s.skipped })),
      ...(filesBound.omitted > 0 ? { files_omitted: filesBound.omitted } : {}),
      ...(skippedTotal > skipped.length ? { skipped_files_omitted: skippedTotal - skipped.length } : {}),
      files_truncated: r.filesTruncated ?? false,
      collection: r.collection ?? { status: "complete" }
    },
    notes,
    content
  }
}
