/**
 * The host's half of a session's file operation (RunnerProtocol `read` | `write` | `list` |
 * `remove`): the supervisor does the operation itself, no program runs, and it answers in keyed
 * frames before its 'x':
 *
 *   read    'f' "<mode> <size> " + name, 'c' pieces, 'F' "<bytes sent>"   (Artifacts.FileReceiver, with a range)
 *   write   'k' "written <n>"
 *   list    'n' "<kind f|d|l|o> <size> <mode> <mtime s> " + name per entry, then 'k' "listed <count> <0|1>"
 *   remove  'k' "removed"
 *   any     'r' "<ERRNO NAME> <message>" instead
 *
 * Nothing is taken on trust: a frame the operation does not answer with, out of order, or not
 * shaped as the supervisor writes it is a violation (the reason), and the run's report is refused.
 */
import { FileReceiver } from "../Artifacts.js"
import type { FileOp } from "../RunnerProtocol.js"
import { FRAME, LIMIT } from "../RunnerProtocolTable.js"

/** One entry of a listing, as the supervisor sent it (the name's bytes are the filesystem's). */
export interface ListedEntry {
  readonly name: Buffer
  readonly kind: "file" | "directory" | "symlink" | "other"
  readonly size: number
  readonly mode: number
  readonly mtimeSeconds: number
}

export type FileOpOutcome =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Listed"; readonly count: number; readonly more: boolean }
  | { readonly _tag: "Failed"; readonly code: string; readonly message: string }

/** The supervisor's listing bound (RunnerProtocolTable LIMITS.listEntries). */
export const LIST_MAX_ENTRIES = LIMIT.listEntries

const KINDS = { f: "file", d: "directory", l: "symlink", o: "other" } as const
const ENTRY = /^([fdlo]) (0|[1-9][0-9]{0,19}) ([0-7]{1,6}) (-?(?:0|[1-9][0-9]{0,18})) /
const FAILED = /^(E[A-Z0-9]{1,15}) /
const LISTED = /^listed (0|[1-9][0-9]{0,5}) ([01])$/

export class FileOpReply {
  /** The listing's entries so far (list). */
  readonly entries: Array<ListedEntry> = []
  /** The read's receiver: 'f'/'c'/'F' go there (read only). */
  readonly file: FileReceiver | undefined
  private ended: FileOpOutcome | undefined

  constructor(private readonly op: FileOp) {
    this.file =
      op.op === "read"
        ? new FileReceiver({ maxFiles: 1, maxFileBytes: op.limit, maxTotalBytes: op.limit }, [], { offset: op.offset })
        : undefined
  }

  /** How the operation ended ('k', 'r', or a read's file complete); undefined while it has not. */
  get outcome(): FileOpOutcome | undefined {
    if (this.ended !== undefined) return this.ended
    return this.file !== undefined && this.file.files.length + this.file.skipped.length === 1
      ? { _tag: "Done" }
      : undefined
  }

  /** 'n', 'k' or 'r'; a reason when the supervisor did not write it. */
  readonly frame = (type: string, bytes: Buffer): string | undefined => {
    if (this.outcome !== undefined) return `a frame '${type}' after the file operation's reply`
    if (type === FRAME.opFailed) {
      if (this.file?.began === true) return "a failure reply after the file began"
      const text = bytes.toString("utf8")
      const m = FAILED.exec(text)
      if (m === null) return "a failure reply that is not the supervisor's"
      this.ended = { _tag: "Failed", code: m[1]!, message: text.slice(m[0].length) }
      return undefined
    }
    if (type === FRAME.listEntry) {
      if (this.op.op !== "list") return `a listing's entry in a ${this.op.op}`
      if (this.entries.length >= LIST_MAX_ENTRIES) return `more than ${LIST_MAX_ENTRIES} entries in a listing`
      const m = ENTRY.exec(bytes.subarray(0, 64).toString("latin1"))
      const name = m === null ? undefined : bytes.subarray(m[0].length)
      if (m === null || name === undefined || name.length === 0 || name.includes(0x2f))
        return "a listing's entry that is not the supervisor's"
      this.entries.push({
        name: Buffer.from(name),
        kind: KINDS[m[1] as keyof typeof KINDS],
        size: Number(m[2]),
        mode: Number.parseInt(m[3]!, 8),
        mtimeSeconds: Number(m[4])
      })
      return undefined
    }
    if (type === FRAME.opDone) {
      const text = bytes.toString("latin1")
      if (this.op.op === "write") {
        if (text !== `written ${this.op.content.byteLength}`) return "a write's reply that does not count its bytes"
        this.ended = { _tag: "Done" }
      } else if (this.op.op === "remove") {
        if (text !== "removed") return "a remove's reply that is not the supervisor's"
        this.ended = { _tag: "Done" }
      } else if (this.op.op === "list") {
        const m = LISTED.exec(text)
        // Entries whose stat failed (removed meanwhile) are counted but not sent: never more sent than counted.
        if (m === null || Number(m[1]) < this.entries.length) return "a listing's end that does not count its entries"
        this.ended = { _tag: "Listed", count: Number(m[1]), more: m[2] === "1" }
      } else {
        return "a done reply to a read (a read ends with its file)"
      }
      return undefined
    }
    return `a frame '${type}' where a file operation's reply was expected`
  }

  /** 'f'/'F'/'s'/'S': only a read sends a file, and only before any other reply. */
  readonly fileFrame = (type: string): string | undefined => {
    if (this.file === undefined) return `a file frame '${type}' in a ${this.op.op}`
    if (type === FRAME.skipped || type === FRAME.skippedCount) return "a skipped entry in a read"
    if (this.ended !== undefined) return "a file after the file operation's reply"
    return undefined
  }
}
