import { FakeRuntime, fakeProgram } from "@hermes-sandbox/core/testing"
import { runtimeContract } from "./support/runtimeContract.js"

runtimeContract("fake", FakeRuntime.layer({ missingImages: ["hermes-sandbox/does-not-exist:0"] }), {
  language: "python",
  image: "hermes-sandbox/python:latest",
  command: ["/opt/hermes/hermes-run"],
  exitWith: (exitCode, stdout, stderr) => fakeProgram({ exitCode, stdout, stderr }),
  hang: fakeProgram({ hang: true }),
  echoStdin: fakeProgram({ echoStdin: true }),
  idleCommand: ["sleep", "infinity"],
  exec: {
    exitWith: (exitCode, stdout, stderr) => ["fake", fakeProgram({ exitCode, stdout, stderr })],
    echoStdin: ["fake", fakeProgram({ echoStdin: true })],
    hang: ["fake", fakeProgram({ hang: true })],
    printEnv: (name) => ["fake", fakeProgram({ printEnv: name })],
    printCwd: ["fake", fakeProgram({ printCwd: true })]
  }
})
