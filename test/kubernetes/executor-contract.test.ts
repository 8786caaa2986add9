import { Layer } from "effect"
import { MemoryJournal } from "@hermes-sandbox/events"
import { KubernetesExecutor, KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { liveTime } from "../support/contractTime.js"
import { executorContract, type Program, pythonToolCalls } from "../support/executorContract.js"
import { runtimeOptions } from "../support/kubernetes.js"

/** The program in Python, its steps in the order of `Program` (as test/executor-contract.docker.test.ts). */
const python = (p: Program): string => {
  const s = JSON.stringify
  const lines = ["import sys, time"]
  if (p.stdout) lines.push(`sys.stdout.write(${s(p.stdout)})`)
  if (p.echoStdin) lines.push("sys.stdout.flush()", "sys.stdout.buffer.write(sys.stdin.buffer.read())")
  if (p.printFile) lines.push(`sys.stdout.write(open(${s(p.printFile)}).read())`)
  if (p.stdoutBytes) {
    lines.push(
      `for _ in range(${Math.floor(p.stdoutBytes / 65536)}): sys.stdout.write('x' * 65536)`,
      `sys.stdout.write('x' * ${p.stdoutBytes % 65536})`
    )
  }
  lines.push(...pythonToolCalls(p))
  if (p.stderr) lines.push(`sys.stderr.write(${s(p.stderr)})`)
  lines.push("sys.stdout.flush()", "sys.stderr.flush()")
  if (p.oom) lines.push("a = []", "while True:", "    a.append(bytearray(10**7))")
  if (p.hang) lines.push("while True:", "    time.sleep(1)")
  if (p.spin) lines.push("while True:", "    pass")
  if (p.sleepMs) lines.push(`time.sleep(${p.sleepMs / 1000})`)
  lines.push(`sys.exit(${p.exitCode ?? 0})`)
  return lines.join("\n") + "\n"
}

// The executor's contract on the live cluster, with and without a warm pool. A pod's CPU limit is
// also its request, which the scheduler reserves on the node: at a CPU each, this 2-core node would
// schedule two sandboxes at once, and the contract runs up to four (a warm pool's included).
for (const warmPool of [false, true]) {
  executorContract(warmPool ? "kubernetes, warm pool of 1" : "kubernetes", {
    base: Layer.merge(KubernetesRuntime.layer(runtimeOptions()), MemoryJournal.layer()),
    executor: (options) =>
      KubernetesExecutor.layer({
        cpus: 0.25,
        ...(warmPool && options.warmPool === undefined ? { ...options, warmPool: { size: 1 } } : options),
        kubernetes: runtimeOptions()
      }),
    language: "python",
    program: python,
    time: liveTime,
    warmPool
  })
}
