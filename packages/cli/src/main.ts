/**
 * `hermes-sandbox`: composes the packages' layers behind a command line;
 * nothing here decides how sandboxes behave.
 */
import { Command, CommanderError, Option } from "commander"
import { config } from "./commands/config.js"
import { doctor } from "./commands/doctor.js"
import { events, eventsSummary } from "./commands/events.js"
import { imageBuild } from "./commands/image.js"
import { run, UsageError } from "./commands/run.js"
import { sessionList, sessionReap } from "./commands/session.js"
import { ExitCode } from "./exitCodes.js"
import { writeCliLine } from "./terminal.js"

const describeError = (error: unknown): { code: number; message: string } => {
  const e = error as { _tag?: string; message?: string; hint?: string; buildCommand?: string }
  if (error instanceof UsageError) return { code: ExitCode.usage, message: error.message }
  switch (e?._tag) {
    case "InvalidRequest":
    case "HermesConfigError":
      return { code: ExitCode.usage, message: e.message ?? String(error) }
    case "DockerUnavailable":
      return { code: ExitCode.sandboxFailed, message: `${e.message}\n  fix: ${e.hint}` }
    case "ImageNotFound":
      return { code: ExitCode.sandboxFailed, message: `${e.message}\n  fix: ${e.buildCommand}` }
    default:
      return { code: ExitCode.sandboxFailed, message: e?.message ?? String(error) }
  }
}

export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  let exitCode: number = ExitCode.ok
  const program = new Command("hermes-sandbox")
    .description("Run untrusted code in single-use, hardened Docker sandboxes, and read their lifecycle journal.")
    .exitOverride()
    .showHelpAfterError()

  program
    .command("run")
    .description("run a program (FILE, or '-' / piped standard input) in a fresh sandbox; exits with its exit code, 124 on timeout, 125 when the sandbox failed")
    .argument("[file]", "program file, or - for standard input")
    .option("-l, --language <language>", "python, javascript or bash (default: from the file extension, else python)")
    .option("-t, --timeout <duration>", "e.g. 5s, 500ms, 2m (default 300s)")
    .option("-m, --memory <size>", "memory limit, e.g. 256m (default 512m)")
    .option("-c, --cpus <n>", "CPUs (default 1)")
    .option("--stdin <file>", "file fed to the program's standard input")
    .option("--runtime <name>", "OCI runtime, e.g. runsc for gVisor")
    .addOption(
      new Option("--limits-unsupported <policy>", "on an engine that cannot apply the memory/pids/cpu limits: fail (default) or warn and run without them")
        .choices(["fail", "warn"])
    )
    .option("--json", "print the result as one JSON line instead of streaming the output")
    .option("--events", "print the lifecycle events to standard error as they happen")
    .option("--journal <path>", "SQLite journal to record into (default: the user's state directory)")
    .option("--no-journal", "do not persist the lifecycle events")
    .action(async (file: string | undefined, options) => {
      exitCode = await run(file, options)
    })

  const image = program.command("image").description("sandbox images")
  image
    .command("build")
    .description("build the python, node and bash sandbox images (base from a registry, or offline from Debian packages)")
    .addOption(new Option("--base <base>", "where the base image comes from").choices(["auto", "registry", "offline"]).default("auto"))
    .option("--rebuild", "rebuild the base even if it exists")
    .action(async (options) => {
      exitCode = await imageBuild(options)
    })

  program
    .command("doctor")
    .description("check the engine, API version, images, runtimes and hardening support; print what is missing and how to fix it")
    .option("--json", "machine-readable report")
    .action(async (options) => {
      exitCode = await doctor(options)
    })

  const eventsCommand = program
    .command("events")
    .description("print the lifecycle journal (a readable timeline, or JSON lines)")
    .option("--journal <path>", "SQLite journal (default: the user's state directory)")
    .option("-f, --follow", "keep printing new events as they are appended")
    .option("--execution <id>", "only this execution's events")
    .option("--from <sequence>", "start at this sequence number")
    .option("--json", "one JSON object per line")
    .action(async (options) => {
      exitCode = await events(options)
    })
  eventsCommand
    .command("summary")
    .description("counts by outcome, duration percentiles, exit-code histogram, containers alive")
    .option("--journal <path>", "SQLite journal (default: the user's state directory)")
    .option("--json", "print as JSON")
    .action(async (options, command: Command) => {
      exitCode = await eventsSummary({ ...command.parent?.opts(), ...options })
    })

  const configCommand = program.command("config").description("Hermes agent configuration (the terminal: section)")
  configCommand
    .command("show")
    .description("print the effective configuration and where each value came from")
    .option("--config <path>", "config file (default: $HERMES_CONFIG or ~/.hermes/config.yaml)")
    .option("--env-file <path>", ".env file for forwarded variables")
    .action(async (options) => {
      exitCode = await config(options)
    })

  const sessionCommand = program.command("session").description("long-lived sandboxes (sessions, persistent) on the engine")
  sessionCommand
    .command("list")
    .description("list session and persistent sandboxes with their scope, status, profile and idle limit")
    .option("--json", "one JSON object per line")
    .action(async (options) => {
      exitCode = await sessionList(options)
    })
  sessionCommand
    .command("reap")
    .description("remove persistent sandboxes idle longer than their lifetime (by the journal's records; none: since created) or past their maximum lifetime")
    .option("--json", "print the report as JSON")
    .option("--journal <path>", "SQLite journal to record into (default: the user's state directory)")
    .option("--no-journal", "do not persist the lifecycle events")
    .action(async (options) => {
      exitCode = await sessionReap(options)
    })

  try {
    await program.parseAsync([...argv])
    return exitCode
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage
    }
    const { code, message } = describeError(error)
    writeCliLine(message)
    return code
  }
}
