import { execFileSync } from "node:child_process"
import { readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SAVED_IMAGES_PREFIX } from "./support/docker.js"

// After the whole run no hermes-sandbox-* container may exist: fail the run if one does.
// (Individual suites assert their own cleanup; this is the last line of defence.)
export default function setup() {
  return () => {
    // The images copyImages saved for private engines (test/support/docker.ts).
    for (const f of readdirSync(tmpdir())) {
      if (f.startsWith(SAVED_IMAGES_PREFIX)) rmSync(join(tmpdir(), f), { force: true })
    }
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
