import { Layer } from "effect"
import { DockerExecutor } from "@hermes-sandbox/docker"
import { MemoryJournal } from "@hermes-sandbox/events"
import { liveTime } from "./support/contractTime.js"
import type { Program } from "./support/executorContract.js"
import { executorContract, pythonToolCalls } from "./support/executorContract.js"
import { poolOn, warmPoolSize } from "./support/executor.js"

/** The program in Python, its steps in the order of `Program`. */
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

// The same contract on the real engine (started by .ci/run / scripts/ensure-engine.sh); with
// HERMES_SANDBOX_TEST_WARM_POOL=N (the engine-pool project) every executor keeps a warm pool of N.
executorContract(poolOn ? `docker, warm pool of ${warmPoolSize}` : "docker", {
  base: Layer.merge(DockerExecutor.runtimeLayer(), MemoryJournal.layer()),
  executor: (options) =>
    DockerExecutor.layer(
      poolOn && options.warmPool === undefined ? { ...options, warmPool: { size: warmPoolSize } } : options
    ),
  language: "python",
  program: python,
  time: liveTime,
  warmPool: poolOn
})
