import { DockerExecutor } from "@hermes-sandbox/docker"
import { runtimeContract } from "./support/runtimeContract.js"

// The same contract, on the real engine (started by .ci/run / scripts/ensure-engine.sh).
runtimeContract("docker", DockerExecutor.runtimeLayer(), {
  language: "python",
  image: "hermes-sandbox/python:latest",
  command: ["/opt/hermes/hermes-run"],
  exitWith: (code, stdout, stderr) =>
    `import sys\nsys.stdout.write(${JSON.stringify(stdout)})\nsys.stderr.write(${JSON.stringify(stderr)})\nsys.exit(${code})\n`,
  hang: "import time\nwhile True: time.sleep(1)\n",
  echoStdin: "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n",
  idleCommand: ["sleep", "infinity"],
  exec: {
    exitWith: (code, stdout, stderr) => [
      "sh",
      "-c",
      'printf %s "$1"; printf %s "$2" >&2; exit "$3"',
      "sh",
      stdout,
      stderr,
      String(code)
    ],
    echoStdin: ["cat"],
    hang: ["sleep", "1000"],
    printEnv: (name) => ["sh", "-c", 'printf "%s\\n" "$(printenv "$1")"', "sh", name],
    printCwd: ["pwd"]
  }
})
