import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { firstValueFrom, lastValueFrom, take, toArray } from "rxjs"
import type { EventEnvelope } from "../src/Event.js"
import { JournalError, VersionConflict } from "../src/JournalError.js"
import { openJournal, toObservable } from "../src/Rx.js"
import { range, sequences, stats, tempJournalPath } from "./helpers.js"

const until = async (check: () => Promise<boolean> | boolean, what: string) => {
  for (let i = 0; i < 5_000; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
  throw new Error(`timed out waiting for ${what}`)
}

describe("Rx", () => {
  describe("toObservable", () => {
    it("emits the stream's elements and completes", async () => {
      expect(await lastValueFrom(toObservable(Stream.range(1, 5)).pipe(toArray()))).toEqual([1, 2, 3, 4, 5])
    })

    it("delivers the typed failure itself as the error", async () => {
      const error = new JournalError({ message: "boom" })
      await expect(lastValueFrom(toObservable(Stream.fail(error)))).rejects.toBe(error)
    })

    it("interrupts the stream (running its finalizers) on unsubscribe", async () => {
      const finalized = Effect.runSync(Deferred.make<void>())
      let pulled = 0
      const stream = Stream.repeatEffect(
        Effect.sync(() => ++pulled).pipe(Effect.zipLeft(Effect.sleep("1 millis")))
      ).pipe(Stream.ensuring(Deferred.succeed(finalized, undefined)))
      const seen: Array<number> = []
      const subscription = toObservable(stream).subscribe((n) => seen.push(n))
      await until(() => seen.length >= 3, "three elements")
      subscription.unsubscribe()
      await Effect.runPromise(Deferred.await(finalized))
      const after = pulled
      await new Promise((resolve) => setTimeout(resolve, 30))
      expect(pulled).toBe(after)
      expect(seen.length).toBeLessThanOrEqual(after)
    })
  })

  for (const kind of ["memory", "sqlite"] as const) {
    describe(`openJournal (${kind})`, () => {
      const open = () =>
        openJournal(kind === "memory" ? { memory: true } : { path: tempJournalPath("rx"), pollInterval: "5 millis" })

      it("append / replay / lastSequence / streamVersion; replay completes", async () => {
        const client = await open()
        const committed = await client.append({ streamId: "a", executorId: "x", events: [stats(1), stats(2)] })
        await client.appendBatch([{ streamId: "b", executorId: "x", events: [stats(3)] }])
        expect(sequences(committed)).toEqual([1, 2])
        const replayed = await lastValueFrom(client.replay().pipe(toArray()))
        expect(sequences(replayed)).toEqual([1, 2, 3])
        expect(sequences(await lastValueFrom(client.replay({ streamId: "b" }).pipe(toArray())))).toEqual([3])
        expect(await client.lastSequence()).toBe(3)
        expect(await client.streamVersion("a")).toBe(2)
        await client.close()
      })

      it("rejects with the typed error objects", async () => {
        const client = await open()
        await client.append({ streamId: "a", executorId: "x", events: [stats(1)] })
        const conflict = await client
          .append({ streamId: "a", executorId: "x", events: [stats(2)], expectedVersion: 0 })
          .catch((e: unknown) => e)
        expect(conflict).toBeInstanceOf(VersionConflict)
        expect(conflict).toMatchObject({ expected: 0, actual: 1 })
        await client.close()
        await expect(client.lastSequence()).rejects.toThrow(/closed/)
      })

      it("live$ sees appends made after subscribing", async () => {
        const client = await open()
        await client.append({ streamId: "a", executorId: "x", events: [stats(0)] })
        const received = firstValueFrom(client.live$.pipe(take(2), toArray()))
        // The stream starts synchronously inside subscribe: the subscription is in place.
        expect((await client.stats()).liveSubscribers).toBe(1)
        await client.append({ streamId: "a", executorId: "x", events: [stats(1), stats(2)] })
        expect(sequences(await received)).toEqual([2, 3])
        await until(async () => (await client.stats()).liveSubscribers === 0, "the live subscription's release")
        await client.close()
      })

      it("follow: history then live; unsubscribe stops polling and releases the follower", async () => {
        const client = await open()
        await client.appendBatch(
          range(1, 10).map((i) => ({ streamId: `s${i % 2}`, executorId: "x", events: [stats(i)] }))
        )
        const seen: Array<EventEnvelope> = []
        const subscription = client.follow().subscribe((e) => seen.push(e))
        await client.append({ streamId: "s", executorId: "x", events: [stats(11)] })
        await until(() => seen.length === 11, "11 events")
        expect(sequences(seen)).toEqual(range(1, 11))
        expect((await client.stats()).activeFollowers).toBe(1)
        if (kind === "sqlite") {
          // While subscribed and idle, it polls for other processes' rows...
          const polls = (await client.stats()).followerPolls
          await until(async () => (await client.stats()).followerPolls > polls + 3, "idle polling")
        }
        subscription.unsubscribe()
        await until(async () => (await client.stats()).activeFollowers === 0, "the follower's release")
        // ...and after unsubscribe it never polls again.
        const stopped = await client.stats()
        await new Promise((resolve) => setTimeout(resolve, 60))
        expect(await client.stats()).toEqual(stopped)
        await client.append({ streamId: "s", executorId: "x", events: [stats(12)] })
        expect(seen).toHaveLength(11)
        await client.close()
      })

      it("close completes running observables and releases the journal", async () => {
        const path = kind === "sqlite" ? tempJournalPath("rx-close") : undefined
        const client = await (path === undefined ? open() : openJournal({ path }))
        await client.append({ streamId: "a", executorId: "x", events: [stats(1)] })
        const followed: Array<EventEnvelope> = []
        const lived: Array<EventEnvelope> = []
        const completions = [client.follow(), client.live$].map(
          (observable, i) =>
            new Promise<string>((resolve) =>
              observable.subscribe({
                next: (e) => (i === 0 ? followed : lived).push(e),
                error: () => resolve("error"),
                complete: () => resolve("complete")
              })
            )
        )
        await client.append({ streamId: "a", executorId: "x", events: [stats(2)] })
        await until(() => followed.length === 2 && lived.length === 1, "delivery")
        await client[Symbol.asyncDispose]()
        // Both complete rather than erroring or hanging.
        expect(await Promise.all(completions)).toEqual(["complete", "complete"])
        expect(sequences(followed)).toEqual([1, 2])
        expect(sequences(lived)).toEqual([2])
        if (path !== undefined) expect(fs.existsSync(`${path}-wal`)).toBe(false)
        await client.close() // idempotent
        expect(await lastValueFrom(client.replay().pipe(toArray()))).toEqual([])
      })
    })
  }

  it("openJournal rejects with JournalError when the file cannot be opened", async () => {
    // The parent "directory" is a regular file.
    const file = tempJournalPath("not-a-dir")
    fs.writeFileSync(file, "")
    const error = await openJournal({ path: `${file}/sub/journal.sqlite` }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(JournalError)
  })
})
