/**
 * The fake runtime's filesystem of one sandbox's writable roots (/workspace, /tmp), in memory: a
 * session's snippet files and a fake program's `writeFile` land here, and the fake supervisor
 * answers a session's file operations (RunnerProtocol `read` | `write` | `list` | `remove`) from it
 * with the frames and errno names hermes-run.c sends. Regular files and directories only (no
 * symlinks, FIFOs or permissions: the engine's tests are the proof of those).
 */
import { encodeFrame, type FileOp, KEEP_EXISTING_MODE, MAX_FRAME_PAYLOAD } from "../RunnerProtocol.js"

type Node =
  | { readonly kind: "file"; content: Uint8Array; mode: number; mtimeMs: number }
  | { readonly kind: "directory"; mode: number; mtimeMs: number }

const ROOTS = ["/workspace", "/tmp"]
const encoder = new TextEncoder()

class Refused {
  constructor(
    readonly errno: string,
    readonly message: string
  ) {}
}

export class FakeFiles {
  private readonly nodes = new Map<string, Node>()

  constructor(private readonly now: () => number) {
    for (const root of ROOTS) this.nodes.set(root, { kind: "directory", mode: 0o755, mtimeMs: now() })
  }

  /** The path's segments under its root, as the supervisor splits it; Refused when it may not be reached. */
  private split(path: string): { root: string; segments: Array<string> } {
    const root = ROOTS.find((r) => path === r || path.startsWith(`${r}/`))
    if (root === undefined)
      throw new Refused("EACCES", `${path} is outside the sandbox's writable roots (/workspace, /tmp)`)
    const segments = path
      .slice(root.length)
      .split("/")
      .filter((s) => s !== "" && s !== ".")
    if (segments.includes("..")) throw new Refused("EINVAL", "the path must not contain '..'")
    return { root, segments }
  }

  /** The directory holding the path's leaf (made with `create`), and the leaf's path; root alone: no leaf. */
  private parent(path: string, create: boolean): { dir: string; leaf: string | undefined } {
    const { root, segments } = this.split(path)
    let dir = root
    for (const segment of segments.slice(0, -1)) {
      const next = `${dir}/${segment}`
      const node = this.nodes.get(next)
      if (node === undefined && create) {
        this.nodes.set(next, { kind: "directory", mode: 0o755, mtimeMs: this.now() })
      } else if (node === undefined) {
        throw new Refused("ENOENT", `${segment}: No such file or directory`)
      } else if (node.kind !== "directory") {
        throw new Refused("ENOTDIR", `${segment} is not a directory`)
      }
      dir = next
    }
    return { dir, leaf: segments.length === 0 ? undefined : `${dir}/${segments.at(-1)}` }
  }

  /** Absolute, or relative to `cwd`; parents made. Outside the roots: not kept (the fake has no other filesystem). */
  write(path: string, content: Uint8Array, mode = 0o644, cwd = "/workspace"): void {
    const absolute = path.startsWith("/") ? path : `${cwd}/${path}`
    try {
      const { leaf } = this.parent(absolute, true)
      if (leaf === undefined || this.nodes.get(leaf)?.kind === "directory")
        throw new Refused("EISDIR", `${absolute} is a directory`)
      this.nodes.set(leaf, { kind: "file", content: Uint8Array.from(content), mode: mode & 0o777, mtimeMs: this.now() })
    } catch (e) {
      if (!(e instanceof Refused)) throw e
    }
  }

  /** `mkdir -p` (a fake program's `cd`); outside the roots: nothing. */
  mkdirs(path: string): void {
    try {
      // Every directory of `${path}/x` is made: those of `path`.
      this.parent(`${path}/x`, true)
    } catch (e) {
      if (!(e instanceof Refused)) throw e
    }
  }

  /** A regular file's content, absolute or relative to `cwd`; undefined if there is none. */
  read(path: string, cwd = "/workspace"): Uint8Array | undefined {
    const node = this.nodes.get(path.startsWith("/") ? path : `${cwd}/${path}`)
    return node?.kind === "file" ? node.content : undefined
  }

  private children(dir: string): Array<string> {
    return [...this.nodes.keys()].filter((p) => p.startsWith(`${dir}/`) && !p.slice(dir.length + 1).includes("/"))
  }

  /** The supervisor's frames answering `op` (its 'x' excluded). */
  answer(key: string, op: FileOp): Array<Uint8Array> {
    const frame = (type: string, payload: Uint8Array | string) => encodeFrame(key, type, payload)
    const withName = (words: string, name: string) => {
      const n = encoder.encode(name)
      const w = encoder.encode(`${words} `)
      const out = new Uint8Array(w.byteLength + n.byteLength)
      out.set(w)
      out.set(n, w.byteLength)
      return out
    }
    try {
      if (op.op === "read") {
        const { leaf } = this.parent(op.path, false)
        const node = leaf === undefined ? this.nodes.get(op.path) : this.nodes.get(leaf)
        if (node === undefined) throw new Refused("ENOENT", "No such file or directory")
        if (node.kind === "directory")
          throw new Refused(
            "EISDIR",
            `${leaf === undefined ? op.path : leaf.slice(leaf.lastIndexOf("/") + 1)} is a directory`
          )
        const size = node.content.byteLength
        const from = Math.min(op.offset, size)
        const slice = node.content.subarray(from, from + Math.min(size - from, op.limit))
        const frames = [
          frame("f", withName(`${node.mode.toString(8)} ${size}`, leaf!.slice(leaf!.lastIndexOf("/") + 1)))
        ]
        for (let at = 0; at < slice.byteLength; at += MAX_FRAME_PAYLOAD)
          frames.push(frame("c", slice.subarray(at, at + MAX_FRAME_PAYLOAD)))
        frames.push(frame("F", String(slice.byteLength)))
        return frames
      }
      if (op.op === "write") {
        const { leaf } = this.parent(op.path, true)
        if (leaf === undefined || this.nodes.get(leaf)?.kind === "directory")
          throw new Refused("EISDIR", `cannot write ${op.path}: Is a directory`)
        const existing = this.nodes.get(leaf)
        const keep = (op.mode & KEEP_EXISTING_MODE) !== 0 && existing?.kind === "file"
        this.nodes.set(leaf, {
          kind: "file",
          content: Uint8Array.from(op.content),
          mode: keep ? existing.mode : op.mode & 0o777,
          mtimeMs: this.now()
        })
        return [frame("k", `written ${op.content.byteLength}`)]
      }
      if (op.op === "list") {
        const { leaf } = this.parent(op.path, false)
        const dir = leaf ?? op.path
        const node = this.nodes.get(dir)
        if (node === undefined) throw new Refused("ENOENT", "No such file or directory")
        if (node.kind !== "directory")
          throw new Refused("ENOTDIR", `${dir.slice(dir.lastIndexOf("/") + 1)} is not a directory`)
        // Byte order, as the supervisor's strcmp.
        const names = this.children(dir)
          .map((p) => p.slice(dir.length + 1))
          .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
        const frames = names.map((name) => {
          const child = this.nodes.get(`${dir}/${name}`)!
          const size = child.kind === "file" ? child.content.byteLength : 4096
          return frame(
            "n",
            withName(
              `${child.kind === "file" ? "f" : "d"} ${size} ${child.mode.toString(8)} ${Math.floor(child.mtimeMs / 1000)}`,
              name
            )
          )
        })
        return [...frames, frame("k", `listed ${names.length} 0`)]
      }
      const { leaf } = this.parent(op.path, false)
      if (leaf === undefined) throw new Refused("EISDIR", `${op.path} is a directory`)
      const node = this.nodes.get(leaf)
      if (node === undefined) throw new Refused("ENOENT", "No such file or directory")
      if (node.kind === "directory" && this.children(leaf).length > 0)
        throw new Refused("ENOTEMPTY", `cannot remove ${leaf.slice(leaf.lastIndexOf("/") + 1)}: Directory not empty`)
      this.nodes.delete(leaf)
      return [frame("k", "removed")]
    } catch (e) {
      if (!(e instanceof Refused)) throw e
      return [frame("r", `${e.errno} ${e.message}`)]
    }
  }
}
