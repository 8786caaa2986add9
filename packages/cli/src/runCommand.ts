/**
 * The `run` command's definition (its arguments and options, and the executor options `run` and
 * `mcp` share), apart from main.ts so the daemon's client (daemon/client.ts) parses a command line
 * exactly as the CLI does without loading the rest of it.
 */
import { type Command, Option } from "commander"

export const collect = (value: string, previous: ReadonlyArray<string> = []): ReadonlyArray<string> => [
  ...previous,
  value
]

/** The executor options `run` and `mcp` share (sandboxOptions.ts reads them). */
/** --kubernetes (described by `what`) and the cluster's flags that go with it (sandboxOptions.ts reads them). */
export const withKubernetesOptions = (command: Command, what: string): Command =>
  command
    .option("--kubernetes", what)
    .option(
      "--namespace <namespace>",
      "with --kubernetes: the sandboxes' namespace (default: the context's, else default)"
    )
    .option("--kube-context <name>", "with --kubernetes: a context of the kubeconfig other than its current one")
    .option(
      "--allow-degraded <guarantees>",
      "with --kubernetes: the guarantees a pod cannot give to run without, comma-separated (pids-limit,ulimits,tmpfs-options,masked-paths,network-none,logging-off); a run needing one not named fails, naming it"
    )
    .option("--image-pull-policy <policy>", "with --kubernetes: Never, IfNotPresent (default) or Always")

export const withSandboxOptions = (command: Command): Command =>
  withKubernetesOptions(
    command
      .option("--network", "give the sandboxes network access (default: none)")
      .option("--no-network", "no network access, even if the Hermes configuration enables it")
      .option("--runtime <name>", "OCI runtime, e.g. runsc for gVisor (with --kubernetes: the pods' RuntimeClass)"),
    "run the sandboxes as Pods on a Kubernetes cluster: KUBECONFIG and its current context, as kubectl reads them (needs @hermes-sandbox/kubernetes installed; docs/kubernetes.md)"
  )
    .addOption(
      new Option(
        "--limits-unsupported <policy>",
        "on an engine that cannot apply the memory/pids/cpu limits: fail (default) or warn and run without them"
      ).choices(["fail", "warn"])
    )
    .option(
      "--config <path>",
      "apply this Hermes agent config file's terminal: section (image, limits, network, env, ...); options given here win"
    )
    .option(
      "--hermes",
      "apply the Hermes agent configuration at its default place ($HERMES_CONFIG, $HERMES_HOME/config.yaml or ~/.hermes/config.yaml)"
    )
    .option("--env-file <path>", "with --config/--hermes: .env file for the forwarded variables")
    .option(
      "--journal <path>",
      "the journal to record into: a SQLite file or a postgres:// URL (default: the user's state directory)"
    )
    .option("--no-journal", "do not persist the lifecycle events")
    .option(
      "--record-code",
      "an audit trail: record each program's code (its first 64 KiB) and the head of its output (16 KiB of each stream) in the journal; they may hold secrets (docs/observability.md)"
    )

/** `program run ...`, its options; the action is the caller's. */
export const defineRunCommand = (program: Command): Command => {
  const run = program
    .command("run")
    .description(
      "run a program (FILE, -e CODE, or '-' / piped standard input) in a fresh sandbox; exits with its exit code, 124 on timeout, 125 when the sandbox failed, 2 on a usage error"
    )
    .argument("[file]", "program file (relative to the current directory), or - for standard input")
    .option("-e, --eval <code>", "the program's code, inline")
    .option(
      "-l, --language <language>",
      "python, javascript or bash (default: from the file extension, else its #! line; python for standard input and -e)"
    )
    .option("-t, --timeout <duration>", "e.g. 5s, 500ms, 2m (default 300s)")
    .option("-m, --memory <size>", "memory limit, e.g. 256m (default 512m)")
    .option("-c, --cpus <n>", "CPUs (default 1)")
    .option("--env <NAME=VALUE>", "environment variable for the program (repeatable)", collect)
    .option(
      "--file <path=localpath>",
      "copy a local file to path inside /workspace before the program starts (repeatable)",
      collect
    )
    .option("--image <image>", "the sandbox image (default: the language's hermes-sandbox image)")
    .option("--stdin <file>", "file fed to the program's standard input")
    .option(
      "--collect <pattern>",
      "after the program ends, bring back the files matching this glob relative to /workspace, e.g. '*.png' or 'out/**' (repeatable; needs --out or --json)",
      collect
    )
    .option(
      "--out <dir>",
      "with --collect: write the files here (created if missing; subdirectories as collected; a regular file already there is replaced, anything else refused)"
    )
    .option("--collect-max-files <n>", "with --collect: files brought back at most (default 100)")
    .option("--collect-max-file-bytes <size>", "with --collect: bytes per file at most, e.g. 512k, 10m (default 10m)")
    .option("--collect-max-bytes <size>", "with --collect: bytes of all files at most (default 32m)")
    .option(
      "--json",
      'print the result as one JSON line instead of streaming the output; a failure as {"error": {"_tag": ...}}'
    )
    .option("--json-content", "with --json and --collect: each file's content too, base64, as 'content'")
    .option("--events", "print the lifecycle events to standard error as they happen")
    .option(
      "--upstream-config <file>",
      "upstream MCP servers whose tools the program may call (from hermes_tools import <name>_<tool>): the file `mcp --upstream-config` takes; closed when the run ends"
    )
    .option("--tool-max-calls <n>", "with --upstream-config: tool calls the program may make (default 50)")
    .option("--tool-timeout <duration>", "with --upstream-config: how long one tool call may take (default 60s)")
    .option(
      "--no-daemon",
      "run here even when a hermes-sandbox daemon answers (by default a run the daemon's warm pool fits goes to it)"
    )
  return withSandboxOptions(run)
}
