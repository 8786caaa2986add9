/**
 * mapDockerError is the one place the engine's HTTP status codes and words are read: every
 * ContainerFailed it makes carries the reason callers branch on. And the hints it (and the engine's
 * other errors) give work for a user who installed the packages: commands they have, the image
 * they asked for.
 */
import { describe, expect, it } from "vitest"
import type { ImageNotFound } from "@hermes-sandbox/core"
import * as DiskQuota from "../src/DiskQuota.js"
import { startEngineHint, unreachableHint } from "../src/DockerEngine.js"
import type { EngineDescription } from "../src/EngineEndpoint.js"
import { DATA_IMAGE, imageNotFound, isOwnImage } from "../src/ImageBuild.js"
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

  it("a missing image of the project's own names `hermes-sandbox image build` (--variant data for the data image)", () => {
    for (const image of ["hermes-sandbox/python:latest", "hermes-sandbox/node", "hermes-sandbox/bash:latest"]) {
      const e = mapDockerError({ ...ctx, image }, engineError(404, `No such image: ${image}`))
      expect(e).toMatchObject({ _tag: "ImageNotFound", image })
      expect((e as ImageNotFound).buildCommand).toMatch(/^(pnpm|npx) hermes-sandbox image build$/)
      expect(e.message).toContain((e as ImageNotFound).buildCommand)
    }
    const data = mapDockerError({ ...ctx, image: DATA_IMAGE }, engineError(404, `No such image: ${DATA_IMAGE}`))
    expect((data as ImageNotFound).buildCommand).toMatch(/hermes-sandbox image build --variant data$/)
  })

  it.each([
    "python:3.12-slim",
    "my/python:1",
    "registry.example:5000/team/img@sha256:" + "a".repeat(64),
    "hermes-sandbox/python:1.2"
  ])(
    "a missing image that the image build does not make (%s) says how to get THAT image: pull it or build it",
    (image) => {
      const e = mapDockerError({ ...ctx, image }, engineError(404, `No such image: ${image}`)) as ImageNotFound
      expect(e).toMatchObject({ _tag: "ImageNotFound", image, buildCommand: `docker pull ${image}` })
      expect(e.message).toContain(`docker pull ${image}`)
      expect(e.message).toContain(`docker build -t ${image}`)
      expect(e.message).not.toMatch(/hermes-sandbox image build(?! does not)/)
      expect(isOwnImage(image)).toBe(false)
    }
  )

  it("no status code and a connection error: DockerUnavailable, whose hint names commands an installed user has", () => {
    const e = mapDockerError(ctx, Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))
    expect(e).toMatchObject({ _tag: "DockerUnavailable", hint: startEngineHint })
    expect(startEngineHint).toMatch(/systemctl start docker/)
  })

  it("no hint or message names a repository script: no package ships scripts/", () => {
    const words = [
      startEngineHint,
      unreachableHint({ kind: "unix", endpoint: "unix:///var/run/docker.sock" } as EngineDescription),
      mapDockerError(ctx, Object.assign(new Error("connect ENOENT"), { code: "ENOENT" })).message,
      (mapDockerError(ctx, Object.assign(new Error("connect ENOENT"), { code: "ENOENT" })) as { hint: string }).hint,
      imageNotFound("hermes-sandbox/python:latest").message,
      imageNotFound("python:3.12-slim").message,
      DiskQuota.quotaFix("/srv/docker"),
      DiskQuota.unsupportedMessage("overlay2 on extfs")
    ]
    for (const w of words) expect(w).not.toMatch(/scripts\//)
  })

  it("the disk-quota fix names the engine's data root as it reports it", () => {
    expect(DiskQuota.quotaFix("/srv/docker-data")).toContain("data root (/srv/docker-data)")
    expect(DiskQuota.quotaFix(undefined)).toContain("DockerRootDir in 'docker info'")
    expect(DiskQuota.quotaFix("/srv/docker-data")).not.toContain("/var/lib/docker")
  })

  it("isGone and isNotRunning read the reason", () => {
    const gone = mapDockerError(ctx, engineError(404, "No such container: c"))
    const stopped = mapDockerError(ctx, engineError(409, "Container abc is not running"))
    const other = mapDockerError(ctx, engineError(500, "boom"))
    expect([isGone(gone), isGone(stopped), isGone(other)]).toEqual([true, false, false])
    expect([isNotRunning(gone), isNotRunning(stopped), isNotRunning(other)]).toEqual([true, true, false])
  })
})
