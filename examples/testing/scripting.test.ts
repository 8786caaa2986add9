import { expect, it } from "vitest"
import { createFakeExecutor, fakeProgram } from "@hermes-sandbox/docker/testing"

it("scripts programs by their first line, or by the request", async () => {
  await using executor = await createFakeExecutor({
    program: (request) => (request.code.startsWith("#!fake") ? undefined : { stdout: `ran ${request.language}\n` })
  })
  const scripted = await executor.executeCode({ language: "python", code: "print(6*7)" })
  expect(scripted).toMatchObject({ stdout: "ran python\n", exitCode: 0 })
  const byLine = await executor.executeCode({ language: "bash", code: fakeProgram({ stderr: "boom\n", exitCode: 1 }) })
  expect(byLine).toMatchObject({ stderr: "boom\n", exitCode: 1 })
  const hung = await executor.executeCode({ language: "python", code: fakeProgram({ hang: true }), timeoutMs: 100 })
  expect(hung).toMatchObject({ timedOut: true, exitCode: 137 })
})
