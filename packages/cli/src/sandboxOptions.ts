/**
 * The executor options `run` and `mcp` share, from their command lines: the journal, the Hermes
 * agent's configuration, network, runtime, the limits policy. What the command line can get
 * wrong is a UsageError, found before the SDK loads.
 */
import type { CreateExecutorOptions, HermesConfigSource, KubernetesChoice } from "@hermes-sandbox/docker"
import { parseDuration } from "./duration.js"
import { UsageError } from "./errors.js"

export interface SandboxCommandOptions {
  readonly journal?: string | boolean
  readonly network?: boolean
  readonly runtime?: string
  readonly kubernetes?: boolean
  readonly namespace?: string
  readonly kubeContext?: string
  readonly allowDegraded?: string
  readonly imagePullPolicy?: string
  readonly limitsUnsupported?: "fail" | "warn"
  readonly config?: string
  readonly envFile?: string
  readonly hermes?: boolean
  readonly recordCode?: boolean
}

/** --config PATH / --hermes: the Hermes agent's `terminal:` configuration, as `config show` reads it. */
export const hermesSource = (options: SandboxCommandOptions): HermesConfigSource | undefined => {
  const envFile = options.envFile === undefined ? {} : { envFile: options.envFile }
  if (options.config !== undefined) return { path: options.config, ...envFile }
  if (options.hermes === true) return options.envFile === undefined ? true : envFile
  if (options.envFile !== undefined) throw new UsageError("--env-file: only with --config PATH or --hermes")
  return undefined
}

export const executorOptionsOf = (
  options: SandboxCommandOptions,
  hermes: HermesConfigSource | undefined
): CreateExecutorOptions => ({
  journal:
    options.journal === false ? "memory" : typeof options.journal === "string" ? { path: options.journal } : "default",
  ...(hermes === undefined ? {} : { hermesConfig: hermes }),
  ...(options.network === undefined ? {} : { network: options.network }),
  ...runtimeOf(options),
  ...(options.limitsUnsupported === undefined ? {} : { limitsUnsupported: options.limitsUnsupported }),
  ...(options.recordCode === true ? { recordCode: true } : {})
})

type Kubernetes = KubernetesChoice["kubernetes"]
const PULL_POLICIES = ["Never", "IfNotPresent", "Always"] as const

/** --runtime, or with --kubernetes the cluster's options (the runtime then names a RuntimeClass). */
const runtimeOf = (options: SandboxCommandOptions): Pick<CreateExecutorOptions, "runtime"> => {
  if (options.kubernetes !== true) {
    for (const [flag, given] of [
      ["--namespace", options.namespace],
      ["--kube-context", options.kubeContext],
      ["--allow-degraded", options.allowDegraded],
      ["--image-pull-policy", options.imagePullPolicy]
    ] as const)
      if (given !== undefined) throw new UsageError(`${flag}: only with --kubernetes`)
    return options.runtime === undefined ? {} : { runtime: options.runtime }
  }
  const policy = options.imagePullPolicy
  if (policy !== undefined && !(PULL_POLICIES as ReadonlyArray<string>).includes(policy))
    throw new UsageError(
      `--image-pull-policy: expected one of ${PULL_POLICIES.join(", ")}, got ${JSON.stringify(policy)}`
    )
  const allowDegraded = options.allowDegraded
    ?.split(",")
    .map((g) => g.trim())
    .filter((g) => g !== "")
  return {
    runtime: {
      kubernetes: {
        ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
        ...(options.kubeContext === undefined ? {} : { context: options.kubeContext }),
        ...(options.runtime === undefined ? {} : { runtimeClassName: options.runtime }),
        // The runtime checks the names (an unknown one is an InvalidRequest naming the known ones).
        ...(allowDegraded === undefined ? {} : { allowDegraded: allowDegraded as Kubernetes["allowDegraded"] }),
        ...(policy === undefined ? {} : { imagePullPolicy: policy as Kubernetes["imagePullPolicy"] })
      }
    }
  }
}

/** A --flag's duration (5s, 500ms, 2m) in ms, or a UsageError naming the flag. */
export const durationOption = (flag: string, given: string | undefined): number | undefined => {
  if (given === undefined) return undefined
  const ms = parseDuration(given)
  if (ms === undefined)
    throw new UsageError(`${flag}: expected a duration like 5s, 500ms or 2m, got ${JSON.stringify(given)}`)
  return ms
}

/** A --flag's number, or a UsageError naming the flag. */
export const numberOption = (flag: string, given: string | undefined, integer = false): number | undefined => {
  if (given === undefined) return undefined
  const n = Number(given)
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
    throw new UsageError(`${flag}: expected a positive ${integer ? "integer" : "number"}, got ${JSON.stringify(given)}`)
  return n
}
