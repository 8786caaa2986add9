/** The host id every writer records (event metadata) and every owner labels its containers with. */
import { describe, expect, it } from "@effect/vitest"
import { hostname } from "node:os"
import * as HostIdentity from "../src/HostIdentity.js"
import { metadataFor } from "../src/internal/envelope.js"

describe("HostIdentity", () => {
  it("HERMES_SANDBOX_HOST_ID when set, else the hostname (blank counts as unset)", () => {
    expect(HostIdentity.fromEnv({})).toBe(hostname())
    expect(HostIdentity.fromEnv({ HERMES_SANDBOX_HOST_ID: "  " })).toBe(hostname())
    expect(HostIdentity.fromEnv({ HERMES_SANDBOX_HOST_ID: " rack-7 " })).toBe("rack-7")
  })

  it("is what the journal's metadata records", () => {
    expect(metadataFor("writer").host).toBe(HostIdentity.current)
  })
})
