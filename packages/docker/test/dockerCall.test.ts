/**
 * mapDockerError is the one place the engine's HTTP status codes and words are read: every
 * ContainerFailed it makes carries the reason callers branch on.
 */
import { describe, expect, it } from "vitest"
import { isGone, isNotRunning, mapDockerError } from "../src/internal/dockerCall.js"

const ctx = { endpoint: "unix:///var/run/docker.sock", operation: "create", containerName: "c", timeoutMs: 1_000 }
const engineError = (statusCode: number, message: string) =>
  Object.assign(new Error(message), { statusCode, json: { message } })

describe("mapDockerError", () => {
  it.each([
    [409, 'Conflict. The container name "/c" is already in use by container "abc"', "conflict"],
    [409, "Cannot kill container: c: Container abc is not running", "conflict"],
    [404, "No such container: c", "not-found"],
    [304, "container already started", "already-started"],
    [500, "storage-opt is supported only for overlay over xfs with 'pquota' mount option", "quota-unsupported"],
    [400, "--storage-opt is supported only for overlay over xfs with 'pquota' mount option", "quota-unsupported"],
    [500, "write /var/lib/docker/x: no space left on device", "engine"],
    [500, "something else went wrong", "engine"]
  ] as const)("HTTP %i %j is a ContainerFailed with reason %s", (statusCode, message, reason) => {
    const error = mapDockerError(ctx, engineError(statusCode, message))
    expect(error).toMatchObject({
      _tag: "ContainerFailed",
      operation: "create",
      containerName: "c",
      statusCode,
      reason
    })
  })

  it("a 404 for an image (with an image in the context) is ImageNotFound, not a ContainerFailed", () => {
    expect(mapDockerError({ ...ctx, image: "img" }, engineError(404, "No such image: img"))).toMatchObject({
      _tag: "ImageNotFound",
      image: "img"
    })
  })

  it("no status code and a connection error: DockerUnavailable", () => {
    expect(
      mapDockerError(ctx, Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))
    ).toMatchObject({ _tag: "DockerUnavailable" })
  })

  it("isGone and isNotRunning read the reason", () => {
    const gone = mapDockerError(ctx, engineError(404, "No such container: c"))
    const stopped = mapDockerError(ctx, engineError(409, "Container abc is not running"))
    const other = mapDockerError(ctx, engineError(500, "boom"))
    expect([isGone(gone), isGone(stopped), isGone(other)]).toEqual([true, false, false])
    expect([isNotRunning(gone), isNotRunning(stopped), isNotRunning(other)]).toEqual([true, true, false])
  })
})
