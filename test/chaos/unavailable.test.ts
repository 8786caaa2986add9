/**
 * An engine that is not there, or that accepts connections and never answers, is a typed
 * DockerUnavailable within seconds (the ping's 3 s deadline), never a hang; an engine that
 * answers the ping and then stops answering hits the per-call deadline. Nothing is left
 * running afterwards (no watchdog, no open connection).
 */
import { spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import net from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { createExecutor } from "@hermes-sandbox/docker"
import { cliCommand } from "../support/cli.js"
import { root, tempDir, waitFor } from "./support.js"

const failure = async (p: Promise<unknown>) => {
  const t0 = Date.now()
  try {
    await p
  } catch (error) {
    return {
      error: error as { _tag?: string; message?: string; hint?: string; endpoint?: string },
      ms: Date.now() - t0
    }
  }
  throw new Error("expected a failure")
}

/** A unix socket that accepts connections; `answer` decides what (if anything) to say to each request. */
const fakeEngine = (answer: (firstLine: string, socket: net.Socket) => void) => {
  const path = join(tempDir("engine"), "docker.sock")
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => {})
    let buffer = ""
    socket.on("data", (d) => {
      buffer += d.toString("latin1")
      // One request per connection is all dockerode sends here; answer once its headers are in.
      if (buffer.includes("\r\n\r\n")) {
        const firstLine = buffer.split("\r\n", 1)[0] ?? ""
        buffer = ""
        answer(firstLine, socket)
      }
    })
  })
  const listening = new Promise<void>((resolve) => server.listen(path, resolve))
  return { path, sockets, listening, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

const json = (socket: net.Socket, body: unknown) => {
  const text = JSON.stringify(body)
  socket.end(
    `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`
  )
}

const watchdogsFor = (socketPath: string) =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((pid) => {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8")
        return cmd.includes("watchdog.mjs") && cmd.includes(socketPath)
      } catch {
        return false
      }
    })

describe("an unreachable engine is a typed DockerUnavailable within seconds", () => {
  it("a socket path that does not exist", async () => {
    const socketPath = join(tempDir("nosock"), "docker.sock")
    const { error, ms } = await failure(createExecutor({ socketPath }))
    expect(error._tag).toBe("DockerUnavailable")
    expect(error.endpoint).toBe(`unix://${socketPath}`)
    expect(error.message).toContain(socketPath)
    expect(error.hint).toMatch(/start a Docker engine/)
    expect(ms).toBeLessThan(2_000)
    console.log(`missing socket: DockerUnavailable after ${ms} ms`)
  })

  it("a socket that accepts and never answers: the ping's 3 s deadline fires, the connection is dropped", async () => {
    const engine = fakeEngine(() => {})
    await engine.listening
    try {
      const { error, ms } = await failure(createExecutor({ socketPath: engine.path }))
      expect(error._tag).toBe("DockerUnavailable")
      expect(error.message).toMatch(/did not answer within 3000 ms/)
      expect(ms).toBeGreaterThanOrEqual(2_900)
      expect(ms).toBeLessThan(5_000)
      // The abandoned request is aborted, not left hanging on the socket.
      expect(await waitFor(() => engine.sockets.size === 0, 2_000)).toBe(true)
      expect(watchdogsFor(engine.path)).toEqual([])
      console.log(`silent socket: DockerUnavailable after ${ms} ms`)
    } finally {
      await engine.close()
    }
  })

  it("an engine that answers the ping and then stops answering: the next call's deadline fires; no watchdog is left", async () => {
    const engine = fakeEngine((line, socket) => {
      if (/ \/(v[\d.]+\/)?version/.test(line)) json(socket, { ApiVersion: "1.41", Version: "20.10.24" })
      // The watchdog's listing (its one pass after the failed start) finds nothing.
      else if (line.startsWith("GET /containers/json")) json(socket, [])
      // Everything else (info...) hangs.
    })
    await engine.listening
    try {
      const { error, ms } = await failure(createExecutor({ socketPath: engine.path, callTimeoutMs: 2_000 }))
      expect(error._tag).toBe("DockerUnavailable")
      expect(error.message).toMatch(/did not answer within 2000 ms/)
      expect(ms).toBeLessThan(5_000)
      expect(await waitFor(() => engine.sockets.size === 0, 2_000)).toBe(true)
      expect(await waitFor(() => watchdogsFor(engine.path).length === 0, 5_000)).toBe(true)
      console.log(`engine hanging after the ping: DockerUnavailable after ${ms} ms`)
    } finally {
      await engine.close()
    }
  })

  it("the CLI: exit 125 with the reason and the fix, within seconds", async () => {
    const socketPath = join(tempDir("cli-nosock"), "docker.sock")
    const t0 = Date.now()
    const [command, ...prefix] = cliCommand
    const child = spawn(command!, [...prefix, "run", "--no-journal", "-"], {
      cwd: root,
      env: { ...process.env, DOCKER_HOST: `unix://${socketPath}` }
    })
    let stderr = ""
    child.stderr.on("data", (d) => (stderr += d))
    child.stdin.end("print(1)")
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
    expect(code).toBe(125)
    expect(stderr).toContain(socketPath)
    expect(stderr).toMatch(/fix: start a Docker engine/)
    expect(Date.now() - t0).toBeLessThan(15_000)
  }, 30_000)
})
