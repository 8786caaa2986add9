import { describe, expect, it } from "@effect/vitest"
import { existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { IMAGE_SOURCES_URLS, imageSources } from "../src/ImageBuild.js"
import { packageRoot } from "../src/internal/packageRoot.js"
import { SECCOMP_PROFILE_URL } from "../src/Seccomp.js"
import { watchdogScript } from "../src/Watchdog.js"

describe("packageRoot", () => {
  it("is this package's directory, found by its name (the CLI's bundle inlines these modules)", () => {
    expect(JSON.parse(readFileSync(new URL("package.json", packageRoot), "utf8")).name).toBe("@hermes-sandbox/docker")
    expect(fileURLToPath(packageRoot)).toBe(fileURLToPath(new URL("../", import.meta.url)))
  })

  it("locates the files the package ships: watchdog, seccomp profile, and in a checkout the image sources", () => {
    expect(existsSync(watchdogScript)).toBe(true)
    expect(existsSync(SECCOMP_PROFILE_URL)).toBe(true)
    expect(imageSources()?.href).toBe(IMAGE_SOURCES_URLS[0]!.href)
    expect(existsSync(new URL("scripts/build-images.sh", IMAGE_SOURCES_URLS[0]!))).toBe(true)
  })
})
