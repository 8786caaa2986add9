import { JSONSchema, Schema } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { McpSandbox } from "../src/McpSandbox.js"
import { connectInMemory, fakeServices } from "./support/fakeMcp.js"
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
    const sandbox = await McpSandbox.open({}, fakeServices())
    opened.push(sandbox)
    const { client, session } = await connectInMemory(sandbox, "tool-schemas-test")
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
