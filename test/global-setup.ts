import { execFileSync } from "node:child_process"

// After the whole run no hermes-sandbox-* container may exist: fail the run if one does.
// (Individual suites assert their own cleanup; this is the last line of defence.)
export default function setup() {
  return () => {
    let names = ""
    try {
      names = execFileSync("docker", ["ps", "-aq", "--filter", "name=hermes-sandbox-"], { encoding: "utf8" }).trim()
    } catch {
      return // no engine: nothing could have been created
    }
    if (names !== "") {
      throw new Error(`hermes-sandbox containers left behind after the test run:\n${names}`)
    }
  }
}
