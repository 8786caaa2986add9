/** The REPL's continuation rule (replInput.ts): what Python's own prompt would answer with `... `. */
import { describe, expect, it } from "@effect/vitest"
import { needsMore } from "../src/replInput.js"

const typed = (text: string) => text.split("\n")

describe("needsMore", () => {
  it("a complete statement runs at once; an empty line is nothing to wait for", () => {
    for (const text of ["x = 1", "print('a:')", "d = {'a': 1}", "a[1:]", "lambda x: x", "", "# a comment", "s = 'a#b'"])
      expect(needsMore(typed(text)), text).toBe(false)
  })
  it("a block waits for an empty line, even with its body on the same line", () => {
    for (const text of ["if x:", "for i in range(3):", "def f():", "class A: pass", "if x: print(1)", "@dec", "try:"])
      expect(needsMore(typed(text)), text).toBe(true)
    expect(needsMore(["for i in range(3):", "    print(i)"])).toBe(true)
    expect(needsMore(["for i in range(3):", "    print(i)", ""])).toBe(false)
    expect(needsMore(["def f():", "    return 1", "", ""])).toBe(false)
    expect(needsMore(["@dec", "def f(): pass", ""])).toBe(false)
  })
  it("open brackets, triple quotes and a trailing backslash continue until they close", () => {
    expect(needsMore(["x = (1,"])).toBe(true)
    expect(needsMore(["x = (1,", "2)"])).toBe(false)
    expect(needsMore(["d = {", "  'a':", "  1,", "}"])).toBe(false)
    expect(needsMore(['s = """one'])).toBe(true)
    expect(needsMore(['s = """one', "", "if x:"])).toBe(true)
    expect(needsMore(['s = """one', 'two"""'])).toBe(false)
    expect(needsMore(["s = '''a", "b'''"])).toBe(false)
    expect(needsMore(["x = 1 + \\"])).toBe(true)
    expect(needsMore(["x = 1 + \\", "2"])).toBe(false)
    // Brackets inside strings and comments do not count.
    expect(needsMore(["x = '(' # ["])).toBe(false)
    expect(needsMore(['x = "\\"("'])).toBe(false)
  })
  it("what is not Python is sent as it is (the kernel reports the SyntaxError)", () => {
    expect(needsMore(["x = 'unterminated"])).toBe(false)
    expect(needsMore(["x = )"])).toBe(false)
  })
})
