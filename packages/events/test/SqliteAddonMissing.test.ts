/**
 * A journal file without better-sqlite3's native addon (pnpm 10 does not run its build script until
 * it is approved; a Node.js upgrade leaves an addon built for the old ABI): opening fails with the
 * typed SqliteAddonMissing, whose message says how to fix it, instead of the `bindings` package's
 * "Could not locate the bindings file" list of paths. The addon loads on `new Database`, so the
 * module mock stands in for a missing or foreign .node file.
 *
 * The unit tier's files share their workers: the journal modules another file loaded are in the
 * module cache already, without the mock. So they are loaded afresh here, after resetting it; and
 * the mock is removed when this file is done, with the modules that saw it, or every later file in
 * the worker would open its journals with the throwing stand-in (a whole CI run failed so).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { afterAll, vi } from "vitest"
import { tempJournalPath } from "./helpers.js"

vi.resetModules()
afterAll(() => {
  vi.doUnmock("better-sqlite3")
  vi.resetModules()
})
const { JournalError } = await import("../src/JournalError.js")
const SqliteJournal = await import("../src/SqliteJournal.js")
const { addonFailure } = await import("../src/internal/sqliteJournal.js")

const addon = vi.hoisted(() => ({ failure: undefined as Error | undefined }))

vi.mock("better-sqlite3", () => ({
  default: class {
    constructor() {
      throw addon.failure
    }
  }
}))

// The messages better-sqlite3 gives on Node 20 (bindings 1.5; dlopen of an addon for Node 22).
const notBuilt = () =>
  new Error(
    "Could not locate the bindings file. Tried:\n → /app/node_modules/better-sqlite3/build/better_sqlite3.node\n" +
      " → /app/node_modules/better-sqlite3/build/Release/better_sqlite3.node"
  )
const incompatible = () =>
  Object.assign(
    new Error(
      "The module '/app/node_modules/better-sqlite3/build/Release/better_sqlite3.node'\nwas compiled against a different " +
        "Node.js version using\nNODE_MODULE_VERSION 127. This version of Node.js requires\nNODE_MODULE_VERSION 115."
    ),
    { code: "ERR_DLOPEN_FAILED" }
  )

const journalPath = tempJournalPath("addon")

const openWith = (failure: Error) =>
  Effect.sync(() => {
    addon.failure = failure
  }).pipe(Effect.zipRight(Effect.scoped(SqliteJournal.make({ path: journalPath }))), Effect.flip)

describe("SqliteJournal without its native addon", () => {
  it.effect("not built: SqliteAddonMissing, with the pnpm and npm fixes in its message", () =>
    Effect.gen(function* () {
      const error = yield* openWith(notBuilt())
      expect(error).toBeInstanceOf(SqliteJournal.SqliteAddonMissing)
      expect(error._tag).toBe("SqliteAddonMissing")
      const missing = error as InstanceType<typeof SqliteJournal.SqliteAddonMissing>
      expect(missing.reason).toBe("not-built")
      expect(missing.path).toBe(journalPath)
      expect(missing.message).toContain(`cannot open journal ${journalPath}: `)
      expect(missing.message).toContain("pnpm approve-builds")
      expect(missing.message).toContain("npm rebuild better-sqlite3")
      expect(missing.message).toContain("in-memory journal")
      expect(missing.message).not.toContain("Could not locate")
      expect((missing.cause as Error).message).toContain("Could not locate the bindings file")
    })
  )

  it.effect("built for another Node.js: SqliteAddonMissing (incompatible), the same fixes", () =>
    Effect.gen(function* () {
      const error = (yield* openWith(incompatible())) as InstanceType<typeof SqliteJournal.SqliteAddonMissing>
      expect(error._tag).toBe("SqliteAddonMissing")
      expect(error.reason).toBe("incompatible")
      expect(error.message).toContain("another Node.js version")
      expect(error.message).toContain("npm rebuild better-sqlite3")
    })
  )

  it.effect("any other failure to open stays a JournalError", () =>
    Effect.gen(function* () {
      const error = yield* openWith(
        Object.assign(new Error("unable to open database file"), { code: "SQLITE_CANTOPEN" })
      )
      expect(error).toBeInstanceOf(JournalError)
      expect(error.message).toBe(`cannot open journal ${journalPath}: unable to open database file`)
    })
  )

  it("addonFailure tells the two addon failures from the rest", () => {
    expect(addonFailure(notBuilt())).toBe("not-built")
    expect(addonFailure(incompatible())).toBe("incompatible")
    expect(addonFailure(new Error("SQLITE_BUSY: database is locked"))).toBeUndefined()
    // dlopen failing for another library is not better-sqlite3's addon
    expect(
      addonFailure(Object.assign(new Error("libfoo.so: cannot open shared object file"), { code: "ERR_DLOPEN_FAILED" }))
    ).toBeUndefined()
    expect(addonFailure(undefined)).toBeUndefined()
  })
})
