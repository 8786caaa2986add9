/**
 * `hermes-sandbox`: composes the packages' layers behind a command line;
 * nothing here decides how sandboxes behave.
 */
import { readFileSync } from "node:fs"
import { Command, CommanderError, Option } from "commander"
import { ExitCode } from "./exitCodes.js"
import { collect, defineRunCommand, withKubernetesOptions, withSandboxOptions } from "./runCommand.js"
import { reportFailure } from "./reportError.js"

// Each command's module is imported when the command runs: the SDK (Effect, dockerode, the SQLite
// driver) takes most of a run's startup, and --help, --version or a usage error need none of it.
const commands = {
  run: () => import("./commands/run.js"),
  image: () => import("./commands/image.js"),
  doctor: () => import("./commands/doctor.js"),
  events: () => import("./commands/events.js"),
  config: () => import("./commands/config.js"),
  session: () => import("./commands/session.js"),
  repl: () => import("./commands/repl.js"),
  mcp: () => import("./commands/mcp.js"),
  dashboard: () => import("./commands/dashboard.js"),
  daemon: () => import("./commands/daemon.js")
}

/** This package's version (package.json is one level above src/ and dist/ alike). */
const version = (): string =>
  (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version

export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  let exitCode: number = ExitCode.ok
  // Whether the running command was given --json: its failure is then also a JSON object on stdout.
  let json = false
  const program = new Command("hermes-sandbox")
    .description("Run untrusted code in single-use, hardened Docker sandboxes, and read their lifecycle journal.")
    .version(version(), "-V, --version", "print the version")
    .exitOverride()
    .showHelpAfterError()

  defineRunCommand(program).action(async (file: string | undefined, options) => {
    json = options.json === true
    exitCode = await (await commands.run()).run(file, options)
  })

  const image = program.command("image").description("sandbox images")
  image
    .command("build")
    .description(
      "build the python, node and bash sandbox images (base from a registry, or offline from Debian packages), or the data-science image"
    )
    .addOption(
      new Option(
        "--variant <variant>",
        "languages: python, node, bash; data: hermes-sandbox/python-data (numpy, pandas, matplotlib, ...; ~510 MB, always from Debian packages); all: both"
      )
        .choices(["languages", "data", "all"])
        .default("languages")
    )
    .addOption(
      new Option("--base <base>", "where the language images' base comes from")
        .choices(["auto", "registry", "offline"])
        .default("auto")
    )
    .option("--rebuild", "rebuild the base even if it exists")
    .action(async (options) => {
      exitCode = await (await commands.image()).imageBuild(options)
    })

  withKubernetesOptions(
    program
      .command("doctor")
      .description(
        "check the engine, API version, images, runtimes and hardening support; print what is missing and how to fix it (with --kubernetes: the cluster's)"
      )
      .option("--json", "machine-readable report")
      .option("--runtime <name>", "with --kubernetes: the pods' RuntimeClass"),
    "check a Kubernetes cluster instead (KUBECONFIG and its current context, as kubectl reads them)"
  ).action(async (options) => {
    json = options.json === true
    exitCode = await (await commands.doctor()).doctor(options)
  })

  const eventsCommand = program
    .command("events")
    .description("print the lifecycle journal (a readable timeline, or JSON lines)")
    .option("--journal <path>", "the journal: a SQLite file or a postgres:// URL (default: the user's state directory)")
    .option("-f, --follow", "keep printing new events as they are appended")
    .option("--execution <id>", "only this execution's events")
    .option("--from <sequence>", "start at this sequence number")
    .option("--json", "one JSON object per line")
    .action(async (options) => {
      json = options.json === true
      exitCode = await (await commands.events()).events(options)
    })
  eventsCommand
    .command("summary")
    .description("counts by outcome, duration percentiles, exit-code histogram, containers alive")
    .option("--journal <path>", "the journal: a SQLite file or a postgres:// URL (default: the user's state directory)")
    .option("--json", "print as JSON")
    .action(async (options, command: Command) => {
      const given = { ...command.parent?.opts(), ...options }
      json = given.json === true
      exitCode = await (await commands.events()).eventsSummary(given)
    })

  program
    .command("dashboard")
    .description(
      "serve a web page that follows the journal live: what runs now (executions, sessions, warm pool), recent executions with their phases and whole history, charts; loopback and a bearer token by default. Runs until a signal"
    )
    .option("--journal <path>", "the journal: a SQLite file or a postgres:// URL (default: the user's state directory)")
    .option("--host <host>", "address to listen on (default 127.0.0.1; a non-loopback one needs --allow-remote)")
    .option("--port <port>", "port (default: a free one, printed on standard error)")
    .option(
      "--token-file <path>",
      "file holding the bearer token, or one credential per line as NAME TOKEN (else one is generated and printed once, in the page's address: http://HOST:PORT/#token=TOKEN)"
    )
    .option("--allow-remote", "allow a non-loopback --host (put TLS in front of it)")
    .option(
      "--allowed-host <host:port>",
      "another Host header value to accept, e.g. a reverse proxy's (repeatable)",
      collect
    )
    .option("--allowed-origin <origin>", "another browser Origin to accept (repeatable)", collect)
    .action(async (options) => {
      exitCode = await (await commands.dashboard()).dashboard(options)
    })

  const configCommand = program.command("config").description("Hermes agent configuration (the terminal: section)")
  configCommand
    .command("show")
    .description("print the effective configuration and where each value came from")
    .option("--config <path>", "config file (default: $HERMES_CONFIG or ~/.hermes/config.yaml)")
    .option("--env-file <path>", ".env file for forwarded variables")
    .action(async (options) => {
      exitCode = await (await commands.config()).config(options)
    })

  const mcp = program
    .command("mcp")
    .description(
      "serve the MCP tools execute_code, terminal, run_python, read_file, write_file and reset_session over stdio (default) or Streamable HTTP (--http); runs until the client leaves or a signal"
    )
    .option("--http", "serve Streamable HTTP at /mcp instead of stdio (a bearer token is required)")
    .option(
      "--host <host>",
      "with --http: address to listen on (default 127.0.0.1; a non-loopback one needs --allow-remote)"
    )
    .option("--port <port>", "with --http: port (default: a free one, printed on standard error)")
    .option(
      "--token-file <path>",
      "with --http: file holding the bearer token, or one credential per line as NAME TOKEN (else $HERMES_SANDBOX_MCP_TOKEN; else one is generated and printed once on standard error)"
    )
    .option("--allow-remote", "with --http: allow a non-loopback --host (put TLS in front of it)")
    .option(
      "--allowed-host <host:port>",
      "with --http: another Host header value to accept, e.g. a reverse proxy's (repeatable)",
      collect
    )
    .option("--allowed-origin <origin>", "with --http: another browser Origin to accept (repeatable)", collect)
    .option(
      "--metrics-port <port>",
      "with --http: serve GET /metrics (Prometheus) on 127.0.0.1 at this port without a token, instead of on --port behind the token (0: a free one, printed on standard error)"
    )
    .option(
      "--dashboard",
      "with --http: also serve the dashboard (as hermes-sandbox dashboard's, of this server's journal) at /dashboard/ on the same port, behind the same token; there an execution's collected images show while the server still holds them"
    )
    .option(
      "--dashboard-client <name>",
      "with --dashboard and a --token-file of named credentials: a credential that may see the dashboard, which shows every client's executions (repeatable; required then)",
      collect
    )
    .option("--client-sessions <n>", "with --http: MCP sessions open at once per credential (token; default 8)")
    .option(
      "--http-session-idle <duration>",
      "with --http: close an MCP session after this long without a request (default 30m)"
    )
    .option(
      "--image <image>",
      "the image of every sandbox (it must have python3, node and bash; default: each language's hermes-sandbox image)"
    )
    .option("-m, --memory <size>", "memory limit of each sandbox, e.g. 256m (default 512m)")
    .option("-c, --cpus <n>", "CPUs of each sandbox (default 1)")
    .option(
      "-t, --timeout <duration>",
      "default timeout of execute_code and terminal (default 50s: inside the 60 s request timeout most clients use)"
    )
    .option("--max-timeout <duration>", "the largest timeout_s a call may ask for (default 300s)")
    .option(
      "--session-idle <duration>",
      "remove a session sandbox (terminal, read_file, write_file) after this long without a call (default 600s)"
    )
    .option("--max-sessions <n>", "session sandboxes alive at once, over all clients (default 16)")
    .option(
      "--session-pool <n>",
      "keep n session sandboxes ready, their Python kernels started, for new MCP sessions' first terminal, file or run_python call (default: none)"
    )
    .option(
      "--images <mode>",
      "what execute_code's collected images and run_python's displays become: inline (image content blocks, default: for clients that render them), link (no image block; the text names each image's resource: for clients that turn tool results into text, such as the OpenAI Agents SDK and the Vercel AI SDK), none (only described); a call may choose with its images argument"
    )
    .option("--max-concurrency <n>", "sandboxes running at once, over all clients (default: the executor's)")
    .option("--max-queue <n>", "executions waiting for a slot before execute_code is refused (default: the executor's)")
    .option(
      "--upstream-config <file>",
      "upstream MCP servers whose tools execute_code's code may call: a JSON or YAML file with mcpServers (Claude Desktop's shape) or mcp_servers (the Hermes agent's); each tool is <name>_<tool> unless the entry gives a prefix"
    )
    .option("--tool-max-calls <n>", "with --upstream-config: tool calls one execute_code run may make (default 50)")
    .option("--tool-timeout <duration>", "with --upstream-config: how long one tool call may take (default 60s)")
  withSandboxOptions(mcp).action(async (options) => {
    exitCode = await (await commands.mcp()).mcp(options)
  })

  program
    .command("repl")
    .description(
      "an interactive Python prompt (a terminal) on a session's kernel: variables and imports persist from cell to cell; Ctrl-C interrupts a cell, Ctrl-D ends the session and removes its sandbox"
    )
    .option(
      "--image <image>",
      "the sandbox image (default hermes-sandbox/python-data:latest when built, else hermes-sandbox/python:latest)"
    )
    .option("--out <dir>", "write the cells' images here as cell-<n>-<i>.png|jpg (created if missing; 1 GiB per REPL)")
    .option("-t, --timeout <duration>", "each cell's deadline, e.g. 30s, 10m (default 300s)")
    .option("-m, --memory <size>", "memory limit, e.g. 1g (default 512m)")
    .option("--runtime <name>", "OCI runtime, e.g. runsc for gVisor")
    .option(
      "--journal <path>",
      "the journal to record into: a SQLite file or a postgres:// URL (default: the user's state directory)"
    )
    .option("--no-journal", "do not persist the lifecycle events")
    .action(async (options) => {
      exitCode = await (await commands.repl()).repl(options)
    })

  const sessionCommand = program
    .command("session")
    .description("long-lived sandboxes (sessions, persistent) on the engine")
  sessionCommand
    .command("list")
    .description("list session and persistent sandboxes with their scope, status, profile and idle limit")
    .option("--json", "one JSON object per line")
    .action(async (options) => {
      json = options.json === true
      exitCode = await (await commands.session()).sessionList(options)
    })
  sessionCommand
    .command("reap")
    .description(
      "remove persistent sandboxes idle longer than their lifetime (by the journal's records; none: since created) or past their maximum lifetime"
    )
    .option("--json", "print the report as JSON")
    .option(
      "--journal <path>",
      "the journal to record into: a SQLite file or a postgres:// URL (default: the user's state directory)"
    )
    .option("--no-journal", "do not persist the lifecycle events")
    .action(async (options) => {
      json = options.json === true
      exitCode = await (await commands.session()).sessionReap(options)
    })

  const daemon = program
    .command("daemon")
    .description(
      "a local daemon holding a warm pool: `run` sends it the runs its pool fits (same options), which then skip the SDK's start and the sandbox's create and start"
    )
  /** The flags that shape the daemon's pool and executor (start passes them to serve). */
  const daemonOptions = (command: Command): Command =>
    command
      .option("--pool-size <n>", "ready sandboxes kept per language (default 2)")
      .option(
        "--language <language>",
        "a language to keep warm: python, javascript, bash (repeatable; default python)",
        collect
      )
      .option("--idle-ttl <duration>", "replace a ready sandbox unclaimed this long (default 5m)")
      .option("--image <image>", "the pool's image (each language's); served: runs that name it with --image")
      .option("-m, --memory <size>", "the pool's memory limit; served: runs given the same -m (default 512m)")
      .option("-c, --cpus <n>", "the pool's CPUs; served: runs given the same -c (default 1)")
      .option("-t, --timeout <duration>", "the pool's longest timeout; served: runs given -t up to it (default 300s)")
      .option("--network", "give the sandboxes network access (default: none); `run` must ask the same")
      .option("--no-network", "no network access")
      .option("--runtime <name>", "OCI runtime, e.g. runsc for gVisor; `run` must ask the same")
      .addOption(
        new Option(
          "--limits-unsupported <policy>",
          "on an engine that cannot apply the memory/pids/cpu limits: fail (default) or warn; `run` must ask the same"
        ).choices(["fail", "warn"])
      )
      .option(
        "--journal <path>",
        "the journal to record into: a SQLite file or a postgres:// URL (default: the user's state directory); `run` must name the same"
      )
      .option("--no-journal", "do not persist the lifecycle events (serves `run --no-journal`)")
  daemonOptions(
    daemon
      .command("start")
      .description(
        "start the daemon in the background (its log: daemon.log beside its socket); returns once it answers"
      )
  )
    .option("--json", "print its status as JSON")
    .action(async (options) => {
      json = options.json === true
      exitCode = await (await commands.daemon()).daemonStart(options, argv)
    })
  daemonOptions(daemon.command("serve", { hidden: true }).description("run the daemon in the foreground")).action(
    async (options) => {
      exitCode = await (await commands.daemon()).daemonServe(options)
    }
  )
  daemon
    .command("stop")
    .description("stop the daemon: runs still going are interrupted, the pool's sandboxes removed")
    .option("--json", "print the outcome as JSON")
    .action(async (options) => {
      json = options.json === true
      exitCode = await (await commands.daemon()).daemonStop(options)
    })
  daemon
    .command("status")
    .description(
      "whether a daemon answers, its pool (ready sandboxes), its options and the runs it served; exits 1 when none"
    )
    .option("--json", "print as JSON")
    .action(async (options) => {
      json = options.json === true
      exitCode = await (await commands.daemon()).daemonStatus(options)
    })

  try {
    await program.parseAsync([...argv])
    return exitCode
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return ExitCode.ok
      // Commander has said what was wrong on stderr; a wrapper that asked for JSON gets it as JSON too.
      if (argv.includes("--json"))
        process.stdout.write(
          `${JSON.stringify({ error: { _tag: "UsageError", code: error.code, message: error.message } })}\n`
        )
      return ExitCode.usage
    }
    return reportFailure(error, json)
  }
}
