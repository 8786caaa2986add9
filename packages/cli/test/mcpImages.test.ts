import { describe, expect, it } from "@effect/vitest"
import { imageModeOf } from "../src/commands/mcp.js"

describe("--images: inline, link or none", () => {
  it("each mode as given; anything else is a usage error naming the three", () => {
    expect(imageModeOf(undefined)).toBeUndefined()
    for (const mode of ["inline", "link", "none"]) expect(imageModeOf(mode)).toBe(mode)
    for (const bad of ["Link", "base64", "", "toString", "__proto__"])
      expect(() => imageModeOf(bad)).toThrow(/--images: one of inline, link, none, got/)
  })
})
