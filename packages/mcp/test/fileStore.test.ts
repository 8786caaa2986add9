/** The server's store of collected files: bounded in bytes (oldest evicted first) and in time, with each execution's owner. */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import type { CollectedFile } from "@hermes-sandbox/core/Artifacts"
import { FileStore } from "../src/fileStore.js"
import { fileOfUri, fileUri } from "../src/resources.js"

const file = (path: string, size: number): CollectedFile => ({
  path,
  size,
  sha256: "x",
  mime: "application/octet-stream",
  mode: 0o644,
  content: new Uint8Array(size)
})

const clock = () => {
  let now = 1_000_000
  return { now: () => now, advance: (ms: number) => void (now += ms) }
}

describe("FileStore", () => {
  it("keeps executions until their bytes pass maxBytes, then evicts the oldest first", () => {
    const t = clock()
    const store = new FileStore({ maxBytes: 100, retentionMs: 60_000 }, t.now)
    expect(store.put("a", "s1", [file("x", 40)])).toBe(true)
    t.advance(1)
    expect(store.put("b", "s1", [file("y", 30), file("z", 10)])).toBe(true)
    t.advance(1)
    expect(store.bytes).toBe(80)
    expect(store.put("c", "s2", [file("w", 50)])).toBe(true)
    expect(store.get("a")).toBeUndefined()
    expect(store.get("b")?.files.get("z")?.size).toBe(10)
    expect(store.get("c")?.owner).toBe("s2")
    expect(store.bytes).toBe(90)
    expect(store.list().map((e) => e.executionId)).toEqual(["b", "c"])
    // One that cannot fit even alone is not kept, and evicts nothing.
    expect(store.put("d", "s1", [file("big", 101)])).toBe(false)
    expect(store.list().map((e) => e.executionId)).toEqual(["b", "c"])
    expect(store.put("e", "s1", [])).toBe(false)
    store.forget("s1")
    expect(store.list().map((e) => e.executionId)).toEqual(["c"])
    expect(store.bytes).toBe(50)
    store.clear()
    expect(store.bytes).toBe(0)
  })

  it("expires executions older than retentionMs", () => {
    const t = clock()
    const store = new FileStore({ maxBytes: 1000, retentionMs: 10_000 }, t.now)
    store.put("a", "s", [file("x", 1)])
    t.advance(6_000)
    store.put("b", "s", [file("y", 2)])
    t.advance(4_000)
    expect(store.get("a")).toBeUndefined()
    expect(store.get("b")).toBeDefined()
    expect(store.bytes).toBe(2)
    t.advance(6_000)
    expect(store.list()).toEqual([])
    store.clear()
  })

  it("held bytes never pass maxBytes, whatever is put (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 4 }), { maxLength: 30 }), (calls) => {
        const store = new FileStore({ maxBytes: 100, retentionMs: 60_000 })
        calls.forEach((sizes, i) => {
          const kept = store.put(
            `e${i}`,
            "s",
            sizes.map((n, j) => file(`f${j}`, n))
          )
          expect(kept).toBe(sizes.length > 0 && sizes.reduce((a, b) => a + b, 0) <= 100)
          expect(store.bytes).toBeLessThanOrEqual(100)
          expect(store.bytes).toBe(store.list().reduce((sum, e) => sum + e.bytes, 0))
        })
        store.clear()
      })
    )
  })
})

describe("file resource URIs", () => {
  it("any path round-trips through its URI, each segment percent-encoded", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ unit: "binary", minLength: 1, maxLength: 12 }).filter((s) => !s.includes("/")),
          { minLength: 1, maxLength: 4 }
        ),
        (segments) => {
          const path = segments.join("/")
          const uri = fileUri("01a2-x", path)
          expect(uri).not.toMatch(/[\s?#]/)
          expect(fileOfUri(uri)).toEqual({ executionId: "01a2-x", path })
        }
      )
    )
    expect(fileUri("e", "out/a b#?.png")).toBe("sandbox://executions/e/files/out/a%20b%23%3F.png")
    expect(fileOfUri("sandbox://executions/e/events")).toBeUndefined()
    expect(fileOfUri("sandbox://executions/e/files/%E0%A4%A")).toBeUndefined()
  })
})
