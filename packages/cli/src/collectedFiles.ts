/**
 * `run --collect PATTERN --out DIR`: the files a run sent back, written under DIR. Their paths are
 * the sandboxed program's choice (relative to /workspace, any bytes but NUL), so each is checked
 * here before anything is written, whatever the supervisor promises:
 *
 * - the path is relative, without empty, `.` or `..` segments, and resolves inside DIR;
 * - every directory on the way is a real directory inside DIR (lstat: a symbolic link there is
 *   refused, never followed) or is created;
 * - an existing entry at the path is replaced only when it is a regular file; a symbolic link, a
 *   directory, a FIFO or a device is refused and left as it is;
 * - the bytes go to a new file created next to it (`wx` + O_NOFOLLOW: never an existing one), then
 *   renamed over the path: a hard link from the old file to one outside DIR keeps the old content.
 *
 * DIR itself is the user's choice: it may be a symbolic link (to where the user wants the files).
 * The checks guard against what is already in DIR, not against another process changing DIR
 * while the CLI writes.
 */
import { randomBytes } from "node:crypto"
import {
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync
} from "node:fs"
import { isAbsolute, join, relative, resolve } from "node:path"
import { UsageError } from "./errors.js"

/** A file as the result carries it (core's CollectedFile), only what writing needs. */
export interface FileToWrite {
  readonly path: string
  readonly mode: number
  readonly content: Uint8Array
}

export interface NotWritten {
  readonly path: string
  readonly reason: string
}

export interface WriteReport {
  /** DIR as resolved (its real path). */
  readonly dir: string
  /** Paths (relative to DIR, as collected) written. */
  readonly written: ReadonlyArray<string>
  readonly notWritten: ReadonlyArray<NotWritten>
}

const errorCode = (error: unknown) => (error as { code?: string }).code

/** --out DIR before the run: absent (created later) or a directory; anything else is a usage error. */
export const checkOutDir = (dir: string): void => {
  try {
    if (!statSync(dir).isDirectory()) throw new UsageError(`--out ${dir}: not a directory`)
  } catch (error) {
    if (error instanceof UsageError) throw error
    if (errorCode(error) !== "ENOENT") throw new UsageError(`--out ${dir}: ${(error as Error).message}`)
  }
}

/** Why `path` cannot name a file under DIR, if it cannot: the segments otherwise. */
const segmentsOf = (path: string): { readonly segments: ReadonlyArray<string> } | { readonly refused: string } => {
  if (path === "" || path.includes("\0")) return { refused: "an empty path or one with a NUL byte" }
  if (isAbsolute(path)) return { refused: "an absolute path" }
  const segments = path.split("/")
  if (segments.some((s) => s === "" || s === "." || s === ".."))
    return { refused: "a path with an empty, '.' or '..' segment" }
  return { segments }
}

/** What is at `path` without following a final symbolic link, or undefined when nothing is. */
const entryAt = (path: string) => {
  try {
    return lstatSync(path)
  } catch (error) {
    if (errorCode(error) === "ENOENT") return undefined
    throw error
  }
}

const kindOf = (s: NonNullable<ReturnType<typeof entryAt>>) =>
  s.isSymbolicLink()
    ? "a symbolic link"
    : s.isDirectory()
      ? "a directory"
      : s.isFIFO()
        ? "a FIFO"
        : s.isSocket()
          ? "a socket"
          : s.isFile()
            ? "a file"
            : "a device"

/** Writes one file under `root` (a real path), or says why it did not. */
const writeOne = (root: string, file: FileToWrite): string | undefined => {
  const checked = segmentsOf(file.path)
  if ("refused" in checked) return checked.refused
  const target = resolve(root, ...checked.segments)
  const inside = relative(root, target)
  if (inside === "" || inside.startsWith("..") || isAbsolute(inside)) return "a path outside the output directory"

  let dir = root
  for (const segment of checked.segments.slice(0, -1)) {
    dir = join(dir, segment)
    const existing = entryAt(dir)
    if (existing === undefined) {
      try {
        mkdirSync(dir)
      } catch (error) {
        if (errorCode(error) !== "EEXIST") return `cannot create ${relative(root, dir)}: ${(error as Error).message}`
      }
      // Made here, or by someone at the same time: either way it must be a directory now.
      const made = entryAt(dir)
      if (made === undefined || !made.isDirectory()) return `${relative(root, dir)} is not a directory`
    } else if (!existing.isDirectory()) {
      return `${relative(root, dir)} is ${kindOf(existing)}, not a directory: nothing is written through it`
    }
  }

  const existing = entryAt(target)
  if (existing !== undefined && !existing.isFile())
    return `${kindOf(existing)} is already there (left as it is; only a regular file is replaced)`

  // 0644, or 0755 for a file executable in the sandbox (the umask applies).
  const mode = (file.mode & 0o111) !== 0 ? 0o755 : 0o644
  const temporary = join(dir, `.hermes-sandbox-${randomBytes(8).toString("hex")}.tmp`)
  let fd: number | undefined
  try {
    fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode)
    let at = 0
    while (at < file.content.byteLength) at += writeSync(fd, file.content, at, file.content.byteLength - at)
    closeSync(fd)
    fd = undefined
    renameSync(temporary, target)
    return undefined
  } catch (error) {
    if (fd !== undefined) closeSync(fd)
    try {
      unlinkSync(temporary)
    } catch {}
    return (error as Error).message
  }
}

/** Writes every file under `dir` (created when missing); one that cannot be written is reported, the others still are. */
export const writeCollected = (dir: string, files: ReadonlyArray<FileToWrite>): WriteReport => {
  try {
    mkdirSync(dir, { recursive: true })
  } catch (error) {
    throw new UsageError(`--out ${dir}: ${(error as Error).message}`)
  }
  const root = realpathSync(dir)
  const written: Array<string> = []
  const notWritten: Array<NotWritten> = []
  for (const file of files) {
    const refused = writeOne(root, file)
    if (refused === undefined) written.push(file.path)
    else notWritten.push({ path: file.path, reason: refused })
  }
  return { dir: root, written, notWritten }
}

/** A byte count as people read it: 512 B, 5.2 KiB, 3.0 MiB. */
export const formatBytes = (n: number): string =>
  n < 1024
    ? `${n} B`
    : n < 1024 * 1024
      ? `${(n / 1024).toFixed(1)} KiB`
      : n < 1024 ** 3
        ? `${(n / 1024 ** 2).toFixed(1)} MiB`
        : `${(n / 1024 ** 3).toFixed(1)} GiB`

/** A collected path in a line of the CLI's: as it is when plain, else JSON-quoted (a newline or a space in a name stays visible). */
export const shownPath = (path: string): string => (/^[^\s\p{C}"\\]+$/u.test(path) ? path : JSON.stringify(path))

/** --collect-max-file-bytes and --collect-max-bytes: bytes, or with k, m, g (KiB, MiB, GiB). */
export const sizeOption = (flag: string, given: string | undefined): number | undefined => {
  if (given === undefined) return undefined
  const match = /^(\d+)\s*([kmg])?(i?b)?$/i.exec(given.trim())
  const n =
    match === null
      ? Number.NaN
      : Number(match[1]) * 1024 ** ({ k: 1, m: 2, g: 3 }[match[2]?.toLowerCase() as "k" | "m" | "g"] ?? 0)
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new UsageError(`${flag}: expected a size like 512k, 10m or 1048576 (bytes), got ${JSON.stringify(given)}`)
  return n
}
