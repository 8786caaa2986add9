/**
 * What a model reads about each tool's arguments and result: every tool that `tools/list` gives,
 * through the MCP SDK's own Client (over its in-memory transport, on the fake runtime), carries no
 * `title` keyword anywhere in its input or output schema. Effect's JSONSchema.make writes each
 * refinement's name there (`"title": "positive"` on timeout_s, `"nonNegative"`, `"int"`), which a
 * model takes for the field's title; the server gives no titles of its own, so any title is one of
 * those. A property NAMED `title` is a field, not a title, and stays.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { JSONSchema, Layer, Schema } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Executor, Session } from "@hermes-sandbox/core"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import { McpSandbox } from "../src/McpSandbox.js"
import { createServer } from "../src/server.js"
import { jsonSchemaOf } from "../src/tools/schemas.js"

/** Where a JSON Schema has a `title` keyword, as `$.path = value` (property and definition NAMES are not keywords). */
const titles = (schema: unknown, at = "$"): Array<string> => {
  if (Array.isArray(schema)) return schema.flatMap((s, i) => titles(s, `${at}[${i}]`))
  if (typeof schema !== "object" || schema === null) return []
  const found: Array<string> = []
  for (const [key, value] of Object.entries(schema)) {
    if (key === "title") found.push(`${at}.title = ${JSON.stringify(value)}`)
    else if (key === "const" || key === "enum" || key === "default" || key === "examples") continue
    else if (["properties", "patternProperties", "$defs", "definitions"].includes(key) && typeof value === "object")
      for (const [name, sub] of Object.entries(value as object)) found.push(...titles(sub, `${at}.${key}.${name}`))
    else found.push(...titles(value, `${at}.${key}`))
  }
  return found
}

const opened: Array<McpSandbox> = []
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()))
})

describe("the tools' JSON Schemas, as a client lists them", () => {
  it("no tool's input or output schema has a title: no refinement name reaches the model", async () => {
    const sandbox = await McpSandbox.open(
      {},
      Layer.mergeAll(Executor.layer(), Session.layer({ sweepOnStart: false })).pipe(
        Layer.provideMerge(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()))
      )
    )
    opened.push(sandbox)
    const session = sandbox.openSession({ id: crypto.randomUUID(), transport: "stdio" })
    const server = createServer(session)
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    await server.connect(serverSide)
    const client = new Client({ name: "tool-schemas-test", version: "1" })
    await client.connect(clientSide)
    try {
      const { tools } = await client.listTools()
      expect(tools.map((t) => t.name)).toContain("execute_code")
      expect(tools.map((t) => t.name)).toContain("terminal")
      const found = tools.flatMap((t) => [
        ...titles(t.inputSchema, `${t.name}.inputSchema`),
        ...titles(t.outputSchema, `${t.name}.outputSchema`)
      ])
      expect(found).toEqual([])
      // The fields whose refinements carried one still say what they allow.
      for (const name of ["execute_code", "terminal"]) {
        const timeout = (
          tools.find((t) => t.name === name)!.inputSchema.properties as Record<string, Record<string, unknown>>
        )["timeout_s"]
        expect(timeout).toMatchObject({ type: "number", exclusiveMinimum: 0 })
        expect(timeout?.["description"]).toEqual(expect.any(String))
      }
    } finally {
      await client.close()
      await session.close("test done")
    }
  })

  it("jsonSchemaOf drops the title keyword only: a field named title, and data, stay", () => {
    const schema = jsonSchemaOf(
      Schema.Struct({
        title: Schema.String.pipe(Schema.minLength(1)),
        count: Schema.Number.pipe(Schema.int(), Schema.positive()),
        kind: Schema.Literal("title")
      })
    )
    expect(titles(schema)).toEqual([])
    expect(schema).toMatchObject({
      type: "object",
      required: ["title", "count", "kind"],
      properties: {
        title: { type: "string", minLength: 1 },
        count: { type: "integer", exclusiveMinimum: 0 },
        kind: { enum: ["title"] }
      }
    })
    // What Effect itself writes, and jsonSchemaOf removes: the refinement's name as the title.
    expect(JSON.stringify(JSONSchema.make(Schema.Number.pipe(Schema.positive())))).toContain('"title":"positive"')
  })
})
