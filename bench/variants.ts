/**
 * The six ways to run `print(1)` in a hardened single-use (or, for exec, shared)
 * Python sandbox. Each runs inside its own driver process (driver.ts), so its
 * client CPU and peak RSS are its own.
 */
import { spawn } from "node:child_process"
import type { IncomingMessage } from "node:http"
import { Writable } from "node:stream"
import type Docker from "dockerode"
import type { ImagePullPolicy, WaitStrategy } from "testcontainers"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import type { SandboxSpec } from "@hermes-sandbox/core"

// Only type imports above: each driver loads just its own variant's libraries (dynamic imports
// below), and the configuration comes ready-made from the runner, so a driver's memory is its own.

export const VariantNames = [
  "docker-run",
  "docker-run-c",
  "docker-exec",
  "dockerode",
  "testcontainers",
  "sdk-runtime",
  "sdk-cold",
  "sdk-pool"
] as const
export type VariantName = (typeof VariantNames)[number]

export const VariantLabels: Record<VariantName, string> = {
  "docker-run": "docker run --rm (CLI)",
  "docker-run-c": "docker run --rm, python3 -c (reference)",
  "docker-exec": "docker exec (1 long-lived container)",
  dockerode: "raw dockerode",
  testcontainers: "testcontainers-node",
  "sdk-runtime": "hermes-sandbox runtime port only (no executor)",
  "sdk-cold": "hermes-sandbox SDK, cold",
  "sdk-pool": "hermes-sandbox SDK, warm pool"
}

export interface Outcome {
  readonly ok: boolean
  readonly detail?: string
  /** When the result (output + exit status) was in hand, if removal then continued inline. */
  readonly resultAtMs?: number
}

export interface VariantContext {
  readonly runId: string
  readonly poolSize: number
  /** Given to the SDK executor, so the runner recognises its containers from the first event on. */
  readonly executorId: string
  readonly image: string
  readonly program: string
  /** stdout of `print(1)` run directly (python3 -c, the SDK's result). */
  readonly expectedStdout: string
  /** stdout of the runner-protocol variants: the same, then the runner's end marker. */
  readonly expectedRunnerStdout: string
  readonly runnerCommand: ReadonlyArray<string>
  /** The runner-protocol bytes for the program, base64. */
  readonly payload: string
  /** `docker run` flags of a runner sandbox (no --name), derived from the SDK's create options. */
  readonly runnerFlags: ReadonlyArray<string>
  /** The same with `python3 -c <program>` and no stdin (the reference without the runner). */
  readonly programFlags: ReadonlyArray<string>
  /** The same for the long-lived exec container (`sleep infinity`, no stdin). */
  readonly sleeperFlags: ReadonlyArray<string>
  /** The SDK's Engine API create options for a runner sandbox (no name). */
  readonly runnerCreateOptions: Docker.ContainerCreateOptions
  /** The SDK's spec of the same runner sandbox (no name), for the runtime-port variant. */
  readonly runnerSpec: SandboxSpec
  /** The same with `python3 -c <program>` and no stdin (testcontainers). */
  readonly programCreateOptions: Docker.ContainerCreateOptions
}

export interface Variant {
  /** Throws `Unavailable` when the variant cannot run here (e.g. no warm pool yet). */
  init(): Promise<Record<string, unknown>>
  /** `slot` is the worker's index (0..concurrency-1). */
  execute(slot: number): Promise<Outcome>
  /** Peak RSS (KiB) of one helper process per execution (the docker CLI), measured with /usr/bin/time. */
  probeHelperRss?(): Promise<number>
  /** Stats the parent reports (e.g. warm-pool claims); reset on read. */
  counters?(): Record<string, number>
  close(): Promise<void>
}

export class Unavailable extends Error {}

/** The last line /usr/bin/time -f %M wrote: max RSS in KiB. */
const timedRss = (stderr: string) => Number(stderr.trim().split("\n").pop())

const probe = async (run: () => Promise<{ stderr: string }>) => {
  let max = 0
  for (let i = 0; i < 3; i++) max = Math.max(max, timedRss((await run()).stderr))
  return max
}

const check = (stdout: string, exitCode: number | null, stderr: string, expected: string): Outcome =>
  exitCode === 0 && stdout === expected
    ? { ok: true }
    : {
        ok: false,
        detail: `exit ${exitCode}, stdout ${JSON.stringify(stdout.slice(0, 80))}, stderr ${JSON.stringify(stderr.slice(0, 200))}`
      }

/** Run the docker CLI; resolves when it exited and its output closed. `timed`: under /usr/bin/time -f %M. */
const dockerCli = (args: ReadonlyArray<string>, stdin?: Buffer, timed = false) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = timed
      ? spawn("/usr/bin/time", ["-f", "%M", "docker", ...args], { stdio: ["pipe", "pipe", "pipe"] })
      : spawn("docker", args, { stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    child.stdin.on("error", () => {})
    child.stdin.end(stdin ?? "")
  })

let counter = 0
const nextName = (ctx: VariantContext, variant: string) => `hermes-bench-${ctx.runId}-${variant}-${++counter}`

/** 1. What the Hermes agent shells out to: `docker run --rm -i` with the SDK's flags, the program on stdin (runner protocol). */
const dockerRun = (ctx: VariantContext): Variant => {
  const payload = Buffer.from(ctx.payload, "base64")
  const argsFor = (name: string) => ["run", "--rm", "--name", name, ...ctx.runnerFlags, ctx.image, ...ctx.runnerCommand]
  return {
    init: async () => ({}),
    execute: async () => {
      const r = await dockerCli(argsFor(nextName(ctx, "docker-run")), payload)
      return check(r.stdout, r.code, r.stderr, ctx.expectedRunnerStdout)
    },
    probeHelperRss: () => probe(() => dockerCli(argsFor(nextName(ctx, "docker-run")), payload, true)),
    close: async () => {}
  }
}

/** Reference: the same `docker run --rm` with `python3 -c` instead of the runner (one interpreter start instead of two). */
const dockerRunC = (ctx: VariantContext): Variant => {
  const argsFor = () => [
    "run",
    "--rm",
    "--name",
    nextName(ctx, "docker-run-c"),
    ...ctx.programFlags,
    ctx.image,
    ...(ctx.programCreateOptions.Cmd ?? [])
  ]
  return {
    init: async () => ({}),
    execute: async () => {
      const r = await dockerCli(argsFor())
      return check(r.stdout, r.code, r.stderr, ctx.expectedStdout)
    },
    probeHelperRss: () => probe(() => dockerCli(argsFor(), undefined, true)),
    close: async () => {}
  }
}

/** 2. `docker exec -i` into one long-lived container with the same flags (no isolation between calls). */
const dockerExec = (ctx: VariantContext): Variant => {
  const payload = Buffer.from(ctx.payload, "base64")
  const name = nextName(ctx, "docker-exec-shared")
  let started = false
  return {
    init: async () => {
      const r = await dockerCli([
        "run",
        "--detach",
        "--name",
        name,
        ...ctx.sleeperFlags,
        ctx.image,
        "sleep",
        "infinity"
      ])
      if (r.code !== 0) throw new Error(`could not start the long-lived container: ${r.stderr}`)
      started = true
      return { container: name }
    },
    // Each concurrent worker has its own code directory, so parallel runners never share main.py.
    execute: async (slot) => {
      const r = await dockerCli(
        ["exec", "--interactive", "--env", `HERMES_CODE_DIR=/tmp/.hermes-w${slot}`, name, ...ctx.runnerCommand],
        payload
      )
      return check(r.stdout, r.code, r.stderr, ctx.expectedRunnerStdout)
    },
    probeHelperRss: () =>
      probe(() =>
        dockerCli(
          ["exec", "--interactive", "--env", "HERMES_CODE_DIR=/tmp/.hermes-probe", name, ...ctx.runnerCommand],
          payload,
          true
        )
      ),
    close: async () => {
      if (started) await dockerCli(["rm", "--force", "--volumes", name])
    }
  }
}

/** 3. Hand-written dockerode: create, attach (hijacked), arm wait, start, write, wait, remove — the SDK's config. */
const rawDockerode = async (ctx: VariantContext): Promise<Variant> => {
  const { default: Dockerode } = await import("dockerode")
  const docker = new Dockerode({
    socketPath: process.env.DOCKER_HOST?.startsWith("unix://")
      ? process.env.DOCKER_HOST.slice(7)
      : "/var/run/docker.sock"
  })
  const payload = Buffer.from(ctx.payload, "base64")
  const collector = (into: Array<Buffer>) =>
    new Writable({
      write(chunk: Buffer, _e, cb) {
        into.push(chunk)
        cb()
      }
    })
  return {
    init: async () => ({}),
    execute: async () => {
      const container = await docker.createContainer({ ...ctx.runnerCreateOptions, name: nextName(ctx, "dockerode") })
      try {
        const stream = (await container.attach({
          stream: true,
          stdin: true,
          stdout: true,
          stderr: true,
          hijack: true
        })) as unknown as NodeJS.ReadWriteStream
        const out: Array<Buffer> = []
        const err: Array<Buffer> = []
        docker.modem.demuxStream(stream, collector(out), collector(err))
        const closed = new Promise<void>((resolve) => {
          stream.once("end", resolve)
          stream.once("close", resolve)
          stream.once("error", () => resolve())
        })
        // Arm the exit wait before start: the engine answers the headers once the waiter is registered.
        const waitResponse = await new Promise<IncomingMessage>((resolve, reject) =>
          docker.modem.dial(
            {
              path: `/containers/${container.id}/wait?`,
              method: "POST",
              isStream: true,
              statusCodes: { 200: true, 404: "no such container" },
              options: { condition: "next-exit" }
            },
            (e: unknown, res: unknown) => (e ? reject(e) : resolve(res as IncomingMessage))
          )
        )
        const exited = new Promise<number>((resolve, reject) => {
          const chunks: Array<Buffer> = []
          waitResponse.on("data", (c: Buffer) => chunks.push(c))
          waitResponse.on("end", () => {
            try {
              resolve((JSON.parse(Buffer.concat(chunks).toString("utf8")) as { StatusCode: number }).StatusCode)
            } catch (e) {
              reject(e)
            }
          })
          waitResponse.on("error", reject)
        })
        await container.start()
        stream.end(payload)
        const exitCode = await exited
        await closed
        const resultAtMs = performance.now()
        return {
          ...check(
            Buffer.concat(out).toString("utf8"),
            exitCode,
            Buffer.concat(err).toString("utf8"),
            ctx.expectedRunnerStdout
          ),
          resultAtMs
        }
      } finally {
        await container.remove({ force: true, v: true }).catch(() => {})
      }
    },
    close: async () => {}
  }
}

/**
 * A decomposition, not an alternative: the SDK's Docker runtime port (the layer under the executor)
 * driven directly through Effect, in the order the executor uses it — create, attach, arm the exit
 * (wait + the engine-event witness), start, write, exit, remove — with no executor, journal, output
 * capture or supervision. Its client CPU between raw dockerode's and the SDK's shows which layer
 * costs what.
 */
const sdkRuntime = async (ctx: VariantContext): Promise<Variant> => {
  const { Effect, Layer, ManagedRuntime } = await import("effect")
  const { Labels, ProcessIdentity, SandboxRuntime } = await import("@hermes-sandbox/core")
  const { Label, ProjectName } = Labels
  const { DockerEngine, DockerRuntime } = await import("@hermes-sandbox/docker")
  const runtime = ManagedRuntime.make(DockerRuntime.layer().pipe(Layer.provide(DockerEngine.layer())))
  const payload = Buffer.from(ctx.payload, "base64")
  // The project label lets the runtime's exit witness see the container's events; the owner labels
  // keep any SDK sweep from taking it for an orphan.
  const labels = {
    ...ctx.runnerSpec.labels,
    [Label.project]: ProjectName,
    [Label.ownerPid]: String(ProcessIdentity.self.pid),
    [Label.ownerHost]: ProcessIdentity.self.host,
    [Label.ownerStarted]: ProcessIdentity.self.started
  }
  const once = Effect.gen(function* () {
    const port = yield* SandboxRuntime
    const container = yield* port.create({ ...ctx.runnerSpec, name: nextName(ctx, "sdk-runtime"), labels })
    return yield* Effect.gen(function* () {
      const out: Array<Uint8Array> = []
      const err: Array<Uint8Array> = []
      const io = yield* port.attach(container, { stdout: (b) => out.push(b), stderr: (b) => err.push(b) })
      const exited = yield* port.armExit(container)
      yield* port.start(container)
      yield* io.write(payload)
      yield* io.end
      const { exitCode } = yield* exited
      yield* io.closed
      const resultAtMs = performance.now()
      return {
        ...check(
          Buffer.concat(out).toString("utf8"),
          exitCode,
          Buffer.concat(err).toString("utf8"),
          ctx.expectedRunnerStdout
        ),
        resultAtMs
      }
    }).pipe(Effect.ensuring(Effect.ignore(port.remove(container))))
  })
  return {
    init: async () => {
      await runtime.runPromise(SandboxRuntime)
      return {}
    },
    execute: () => runtime.runPromise(once),
    close: () => runtime.dispose()
  }
}

/** 4. testcontainers-node: a GenericContainer per execution, the same HostConfig (see notes: -c, json-file logs, exit wait). */
const testcontainers = async (ctx: VariantContext): Promise<Variant> => {
  process.env.TESTCONTAINERS_RYUK_DISABLED = "true"
  const tc = await import("testcontainers")
  type TcDockerContainer = Parameters<WaitStrategy["waitUntilReady"]>[0]
  /** Resolves when the container has exited (the engine's wait, not the 1 s inspect polling of Wait.forOneShotStartup). */
  class ExitWaitStrategy implements WaitStrategy {
    private timeoutMs = 60_000
    private set = false
    async waitUntilReady(container: TcDockerContainer): Promise<void> {
      const r = (await container.wait({ condition: "not-running" })) as { StatusCode: number }
      if (r.StatusCode !== 0) throw new Error(`program exited with ${r.StatusCode}`)
    }
    withStartupTimeout(ms: number) {
      this.timeoutMs = ms
      this.set = true
      return this
    }
    isStartupTimeoutSet() {
      return this.set
    }
    getStartupTimeout() {
      return this.timeoutMs
    }
  }
  const neverPull: ImagePullPolicy = { shouldPull: () => false }
  /** GenericContainer with every HostConfig line of the SDK's spec (testcontainers has no builder method for some). */
  class HardenedContainer extends tc.GenericContainer {
    constructor(options: Docker.ContainerCreateOptions) {
      super(ctx.image)
      const {
        HostConfig,
        name: _n,
        Image: _i,
        Cmd: _c,
        Labels: _l,
        AttachStdin: _a,
        OpenStdin: _o,
        StdinOnce: _s,
        ...rest
      } = options
      Object.assign(this.createOpts, rest)
      // testcontainers reads output through the logs API: it needs a log driver that keeps them.
      Object.assign(this.hostConfig, HostConfig, { LogConfig: { Type: "json-file", Config: {} } })
    }
  }
  const make = (name: string) =>
    new HardenedContainer(ctx.programCreateOptions)
      .withName(name)
      .withLabels(ctx.programCreateOptions.Labels ?? {})
      .withNetworkMode("none")
      .withCommand([...(ctx.programCreateOptions.Cmd ?? [])])
      .withPullPolicy(neverPull)
      .withWaitStrategy(new ExitWaitStrategy())
  return {
    init: async () => {
      const client = await tc.getContainerRuntimeClient()
      return { testcontainers: "11.14.0", runtime: client.info.containerRuntime.host }
    },
    execute: async () => {
      const started = await make(nextName(ctx, "testcontainers")).start()
      try {
        const logs = await started.logs()
        let stdout = ""
        for await (const chunk of logs) stdout += String(chunk)
        const resultAtMs = performance.now()
        return { ...check(stdout, 0, "", ctx.expectedStdout), resultAtMs }
      } finally {
        await started.stop({ remove: true, timeout: 0 })
      }
    },
    close: async () => {}
  }
}

/** 5./6. The SDK through its Promise facade. */
const sdk = async (ctx: VariantContext, pool: boolean): Promise<Variant> => {
  const { createExecutor } = await import("@hermes-sandbox/docker")
  let executor: SandboxExecutor | undefined
  let claimed = 0
  let coldCreated = 0
  return {
    init: async () => {
      // sweepOnStart off: the startup sweep could remove other engineers' orphans; it is not on the measured path.
      try {
        const base = { sweepOnStart: false, executorId: ctx.executorId }
        executor = await createExecutor(
          pool ? { ...base, warmPool: { size: ctx.poolSize, languages: ["python"] } } : base
        )
      } catch (e) {
        if (pool)
          throw new Unavailable(`createExecutor({ warmPool }) failed: ${e instanceof Error ? e.message : String(e)}`)
        throw e
      }
      executor.events$.subscribe((e) => {
        if (e.type === "ContainerClaimed") claimed++
        if (e.type === "ContainerCreated" && !(e.data as { pooled?: boolean }).pooled) coldCreated++
      })
      return { executorId: executor.executorId }
    },
    execute: async () => {
      const r = await executor!.executeCode({ language: "python", code: ctx.program })
      return check(r.stdout, r.exitCode, r.stderr, ctx.expectedStdout)
    },
    counters: () => {
      const c = { claimed, coldCreated }
      claimed = 0
      coldCreated = 0
      return c
    },
    close: async () => {
      await executor?.close()
    }
  }
}

export const makeVariant = async (name: VariantName, ctx: VariantContext): Promise<Variant> => {
  switch (name) {
    case "docker-run":
      return dockerRun(ctx)
    case "docker-run-c":
      return dockerRunC(ctx)
    case "docker-exec":
      return dockerExec(ctx)
    case "dockerode":
      return rawDockerode(ctx)
    case "testcontainers":
      return testcontainers(ctx)
    case "sdk-runtime":
      return sdkRuntime(ctx)
    case "sdk-cold":
      return sdk(ctx, false)
    case "sdk-pool":
      return sdk(ctx, true)
  }
}
