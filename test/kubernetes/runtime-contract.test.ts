import { KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { runtimeOptions } from "../support/kubernetes.js"
import { runtimeContract } from "../support/runtimeContract.js"

// The runtime's contract on the live cluster (test/runtime-contract.docker.test.ts on Docker). A
// pod's CPU is reserved on its node: at a whole CPU each this 2-core node would schedule only two of
// the three sandboxes a case holds.
runtimeContract(
  "kubernetes",
  KubernetesRuntime.layer(runtimeOptions()),
  {
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
      echoBytes: (n) => ["head", "-c", String(n)],
      hang: ["sleep", "1000"],
      printEnv: (name) => ["sh", "-c", 'printf "%s\\n" "$(printenv "$1")"', "sh", name],
      printCwd: ["pwd"]
    }
  },
  { startsOnCreate: true, nanoCpus: 0.25e9 }
)
