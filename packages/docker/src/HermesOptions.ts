/**
 * From a Hermes agent's `terminal:` configuration (HermesConfig) to this SDK's options:
 *
 *   const hermes = fromHermesConfig()          // ~/.hermes/config.yaml + TERMINAL_* (+ overrides)
 *   hermes.scope                               // "oneShot" | "session" | "persistent" (container_persistent)
 *   createExecutor(hermes.executor)            // one-shot executions
 *   createSession(hermes.session)              // container_persistent: false
 *   openPersistent(hermes.session)             // container_persistent: true
 *
 * or simply `openHermesSandbox()` (createSession.ts), which picks by scope. The facades also
 * take `hermesConfig: true | { path, ... }` and apply it under their explicit options.
 *
 * Mapping: docker_image -> image; container_cpu/cpu_quota -> cpus; container_memory/
 * memory_limit -> memory; container_disk -> diskSize; timeout -> timeoutMs; network ->
 * network; cwd -> workingDir (sessions); lifetime_seconds -> lifetimeSeconds (sessions);
 * docker_volumes -> mounts (sessions; read-only unless :rw; the Docker socket and / were
 * already refused by the loader unless allowDangerousMounts); docker_env -> env;
 * docker_forward_env -> secretEnv (values read by NAME from the environment or ~/.hermes/.env,
 * kept Redacted).
 *
 * Where the values go: sessions pass env and forwarded values in each call's exec environment
 * only (never in the container's configuration). One-shot executions have no exec: there the
 * values are in the container's environment at create — absent from `docker inspect`'s
 * Cmd/Args, present in its Config.Env, which is where Docker keeps a container's environment.
 * One-shot executions take no mounts: a config with docker_volumes is refused for them (an
 * agent silently losing its mounts is Hermes pitfall #1); use a session.
 */
import { Redacted } from "effect"
import type { ExecutorOptions, SessionOptions } from "@hermes-sandbox/core"
import {
  HermesConfigError,
  type HermesScope,
  loadHermesConfigSync,
  type LoadedHermesConfig,
  type LoadHermesConfigOptions,
  toExecutorOptions
} from "./HermesConfig.js"

export interface HermesSandboxOptions {
  readonly scope: HermesScope
  readonly loaded: LoadedHermesConfig
  /** For createExecutor (one-shot), the forwarded variables in its env. */
  readonly executor: ExecutorOptions
  /** For createSession / openPersistent. */
  readonly session: SessionOptions
}

/** `true` = the default path (HERMES_CONFIG, HERMES_HOME, ~/.hermes/config.yaml) and process.env. */
export type HermesConfigSource = true | LoadHermesConfigOptions

/** Loads and maps the Hermes terminal configuration. Throws HermesConfigError. */
export const fromHermesConfig = (source: HermesConfigSource = true): HermesSandboxOptions => {
  const loaded = loadHermesConfigSync(source === true ? {} : source)
  const { scope, executor, session } = toExecutorOptions(loaded.values)
  const forwarded = session.secretEnv ?? {}
  return {
    scope,
    loaded,
    // One-shot executions have no exec to pass variables to: the forwarded values go into the
    // container's environment at create, so here is where they are unwrapped.
    executor: {
      ...executor,
      env: {
        ...executor.env,
        ...Object.fromEntries(Object.entries(forwarded).map(([name, value]) => [name, Redacted.value(value)]))
      }
    },
    // The loader already refused dangerous mounts unless its allowDangerousMounts was set.
    session:
      source !== true && source.allowDangerousMounts === true ? { ...session, allowDangerousMounts: true } : session
  }
}

/** Executor options with the Hermes configuration under the explicit ones; refuses mounts (see above). */
export const executorOptionsFromHermes = (source: HermesConfigSource): ExecutorOptions => {
  const hermes = fromHermesConfig(source)
  if (hermes.loaded.values.volumes.length > 0) {
    throw new HermesConfigError({
      key: "docker_volumes",
      source: "config",
      message:
        `terminal.docker_volumes has ${hermes.loaded.values.volumes.length} mount(s), but one-shot executions take no mounts; ` +
        "use createSession / openPersistent (or openHermesSandbox), or remove docker_volumes"
    })
  }
  return hermes.executor
}
