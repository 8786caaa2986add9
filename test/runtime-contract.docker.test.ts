import { DockerExecutor } from "@hermes-sandbox/docker"
import { runtimeContract } from "./support/runtimeContract.js"

// The same contract, on the real engine (started by .ci/run / scripts/ensure-engine.sh).
runtimeContract("docker", DockerExecutor.runtimeLayer(), {
  language: "python",
  image: "hermes-sandbox/python:latest",
  command: ["python3", "/opt/hermes/runner.py"],
  exitWith: (code, stdout, stderr) =>
    `import sys\nsys.stdout.write(${JSON.stringify(stdout)})\nsys.stderr.write(${JSON.stringify(stderr)})\nsys.exit(${code})\n`,
  hang: "import time\nwhile True: time.sleep(1)\n",
  echoStdin: "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n"
})
