/**
 * The identity of the host a process runs on, as every writer of the journal and every owner
 * of a container records it (event metadata, the `owner-host` label): `HERMES_SANDBOX_HOST_ID`
 * when set, else `os.hostname()`.
 *
 * One place, so the journal's metadata and the containers' owner labels always agree. The
 * variable exists because a hostname is not a safe identity across a fleet (two machines or
 * containers can share one) and so two processes on one machine can act as two hosts (the
 * fleet tests): a process proves another is gone from its pid only when both carry the SAME
 * host id, so ids must be unique per machine (pid namespace, really) — a shared id would let a
 * pid on one machine be judged on another.
 */
import { hostname } from "node:os"

/**
 * @category constants
 */
export const HOST_ID_ENV = "HERMES_SANDBOX_HOST_ID"

/**
 * The host id an environment gives (blank counts as unset).
 *
 * @category constructors
 */
export const fromEnv = (env: Readonly<Record<string, string | undefined>> = process.env): string => {
  const given = env[HOST_ID_ENV]?.trim()
  return given === undefined || given === "" ? hostname() : given
}

/**
 * This process's host id, read once at load: a process is on one host for its whole life.
 *
 * @category constants
 */
export const current: string = fromEnv()
