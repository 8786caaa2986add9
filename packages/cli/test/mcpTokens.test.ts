import { describe, expect, it } from "@effect/vitest"
import { tokensOf } from "../src/commands/mcp.js"

describe("--token-file: one token, or one credential per line", () => {
  const a = "a".repeat(16)
  const b = "b".repeat(20)
  it("a bare token is the credential default; NAME TOKEN lines are named credentials; blank lines and # comments are skipped", () => {
    expect(tokensOf(`${a}\n`, "f")).toEqual({ token: a, clients: {} })
    expect(tokensOf(`# shared\nci ${a}\n\nagent ${b}\n`, "f")).toEqual({ clients: { ci: a, agent: b } })
    expect(tokensOf(`${a}\nci ${b}`, "f")).toEqual({ token: a, clients: { ci: b } })
  })
  it("refuses what it cannot use, naming the file", () => {
    expect(() => tokensOf("\n# nothing\n", "--token-file t")).toThrow(/--token-file t: no token in it/)
    expect(() => tokensOf("short", "f")).toThrow(/at least 16 characters/)
    expect(() => tokensOf(`ci short`, "f")).toThrow(/the token of ci must be at least 16/)
    expect(() => tokensOf(`ci ${a}\nci ${b}`, "f")).toThrow(/ci named twice/)
    expect(() => tokensOf(`${a}\n${b}`, "f")).toThrow(/more than one bare token/)
    expect(() => tokensOf(`ci ${a} extra`, "f")).toThrow(/NAME TOKEN/)
  })
})
