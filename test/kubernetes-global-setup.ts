import { execFileSync, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { onClusterTierDone } from "./support/clusterTierDone.js"

// Loaded by Node, not by vite: vitest's loader of global setup files does not resolve this package
// (test files do). Its `main` is an ES module.
const k8s: typeof import("@kubernetes/client-node") = await import(
  pathToFileURL(createRequire(import.meta.url).resolve("@kubernetes/client-node")).href
)

/**
 * The cluster tier's cluster: the one-node Kubernetes of scripts/kubernetes-local.sh (started here
 * unless it is already up, and then stopped again), a namespace of this run's own, and the
 * ServiceAccount of packages/kubernetes/manifests/rbac.yaml with exactly that Role: the tests run
 * as it (HERMES_SANDBOX_TEST_KUBECONFIG), not as the cluster's admin. At the end the run fails if a
 * pod is left in the namespace; then the namespace goes, and the cluster if this started it.
 */
export const KUBECONFIG_ENV = "HERMES_SANDBOX_TEST_KUBECONFIG"
export const NAMESPACE_ENV = "HERMES_SANDBOX_TEST_K8S_NAMESPACE"
export const ADMIN_KUBECONFIG_ENV = "HERMES_SANDBOX_TEST_K8S_ADMIN"
/** "1": the cluster is this run's to stop once the tier is done, though it was up before. */
export const STOP_ENV = "HERMES_SANDBOX_TEST_K8S_STOP"

const root = new URL("..", import.meta.url).pathname
const script = join(root, "scripts/kubernetes-local.sh")
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export default async function setup() {
  // Both cluster projects (cluster, cluster-chaos) name this file: one cluster and one namespace
  // for the run, set up by the first, whose teardown is the run's.
  if (process.env[NAMESPACE_ENV] !== undefined) return () => {}
  const status = spawnSync("bash", [script, "status"], { encoding: "utf8" })
  const startedHere = status.status !== 0
  let adminPath = status.stdout.trim().split("\n").pop() ?? ""
  if (startedHere) {
    const t0 = Date.now()
    const up = spawnSync("bash", [script, "up"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      // The images the tier runs; the others would only cost import time.
      env: {
        ...process.env,
        HERMES_K8S_IMAGES:
          process.env["HERMES_K8S_IMAGES"] ?? "hermes-sandbox/python hermes-sandbox/bash hermes-sandbox/node"
      }
    })
    if (up.status !== 0) throw new Error(`scripts/kubernetes-local.sh up failed (exit ${up.status})`)
    adminPath = up.stdout.trim().split("\n").pop() ?? ""
    process.stderr.write(`[cluster tier] cluster up in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`)
  }
  // The cluster is stopped at the end if this started it, or if the run says it is the run's
  // (scripts/test-tiers.sh starts it beside the build).
  const stopCluster = () => {
    if (startedHere || process.env[STOP_ENV] === "1")
      execFileSync("bash", [script, "down"], { stdio: ["ignore", "ignore", "inherit"] })
  }
  process.once("exit", stopCluster)
  try {
    const admin = new k8s.KubeConfig()
    admin.loadFromFile(adminPath)
    const core = admin.makeApiClient(k8s.CoreV1Api)
    const objects = k8s.KubernetesObjectApi.makeApiClient(admin)
    const namespace = `hermes-sandbox-test-${randomBytes(4).toString("hex")}`
    await core.createNamespace({ body: { metadata: { name: namespace } } })
    const manifest = readFileSync(join(root, "packages/kubernetes/manifests/rbac.yaml"), "utf8").replaceAll(
      "NAMESPACE",
      namespace
    )
    for (const object of k8s.loadAllYaml(manifest)) await objects.create(object)
    // 1.20's token controller writes the ServiceAccount's token Secret.
    let token = ""
    for (let i = 0; i < 200 && token === ""; i++) {
      const secrets = await core.listNamespacedSecret({ namespace })
      const secret = secrets.items.find(
        (s) =>
          s.type === "kubernetes.io/service-account-token" &&
          s.metadata?.annotations?.["kubernetes.io/service-account.name"] === "hermes-sandbox"
      )
      token = secret?.data?.["token"] === undefined ? "" : Buffer.from(secret.data["token"], "base64").toString("utf8")
      if (token === "") await sleep(100)
    }
    if (token === "") throw new Error("the ServiceAccount hermes-sandbox got no token")
    const cluster = admin.getCurrentCluster()!
    const runner = new k8s.KubeConfig()
    runner.loadFromOptions({
      clusters: [
        { name: "local", server: cluster.server, caData: cluster.caData, caFile: cluster.caFile, skipTLSVerify: false }
      ],
      users: [{ name: "hermes-sandbox", token }],
      contexts: [{ name: "hermes-sandbox", cluster: "local", user: "hermes-sandbox", namespace }],
      currentContext: "hermes-sandbox"
    })
    const runnerPath = join(adminPath, "..", `runner-${namespace}.kubeconfig`)
    writeFileSync(runnerPath, runner.exportConfig(), { mode: 0o600 })
    process.env[KUBECONFIG_ENV] = runnerPath
    process.env[NAMESPACE_ENV] = namespace
    process.env[ADMIN_KUBECONFIG_ENV] = adminPath
    let finished: Promise<void> | undefined
    const finish = () =>
      (finished ??= (async () => {
        process.off("exit", stopCluster)
        try {
          const left = (await core.listNamespacedPod({ namespace })).items.map((p) => p.metadata?.name)
          await core.deleteNamespace({ name: namespace, gracePeriodSeconds: 0 })
          for (let i = 0; i < 300; i++) {
            try {
              await core.readNamespace({ name: namespace })
            } catch {
              break
            }
            await sleep(100)
          }
          rmSync(runnerPath, { force: true })
          if (left.length > 0)
            throw new Error(`pods left behind in ${namespace} after the cluster tier:\n${left.join("\n")}`)
        } finally {
          stopCluster()
        }
      })())
    // Once the tier's last file ended (test/support/clusterTierDone.ts), not at the end of the whole
    // run: the idle cluster costs ~6 % of a core while the other tiers go on. A failure found here
    // fails the run at its end, in the teardown.
    onClusterTierDone(() => void finish().catch(() => {}))
    return finish
  } catch (error) {
    process.off("exit", stopCluster)
    stopCluster()
    throw error
  }
}
