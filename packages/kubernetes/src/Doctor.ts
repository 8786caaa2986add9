/**
 * `hermes-sandbox doctor --kubernetes`: what a cluster gives this runtime, each gap with its fix.
 * The kubeconfig and the API server; the namespace's permissions (the Role in
 * manifests/rbac.yaml, asked of the API server itself with SelfSubjectAccessReviews, so it answers
 * for whoever the kubeconfig names); and the guarantees a pod cannot give (Guarantees.ts), each
 * said allowed or refused under the options given. The CLI adds a smoke run, which is what shows
 * the images and the seccomp profile on the nodes.
 */
import * as k8s from "@kubernetes/client-node"
import { readFileSync } from "node:fs"
import type { DoctorCheck } from "@hermes-sandbox/core"
import * as Guarantees from "./Guarantees.js"
import type { KubernetesRuntimeOptions } from "./KubernetesRuntime.js"

export type Check = DoctorCheck

/** The Role a Kubernetes executor needs, as shipped (manifests/rbac.yaml). */
export const RBAC_MANIFEST = new URL("../manifests/rbac.yaml", import.meta.url)

/** Each resource and verb of the shipped Role. */
export const requiredPermissions = (): ReadonlyArray<{
  readonly resource: string
  readonly subresource?: string
  readonly verb: string
}> => {
  const objects = k8s.loadAllYaml(readFileSync(RBAC_MANIFEST, "utf8")) as Array<{
    kind?: string
    rules?: Array<{ resources?: Array<string>; verbs?: Array<string> }>
  }>
  return objects
    .filter((o) => o.kind === "Role")
    .flatMap((role) => role.rules ?? [])
    .flatMap((rule) =>
      (rule.resources ?? []).flatMap((r) => {
        const [resource = r, subresource] = r.split("/")
        return (rule.verbs ?? []).map((verb) => ({
          resource,
          ...(subresource === undefined ? {} : { subresource }),
          verb
        }))
      })
    )
}

const messageOf = (error: unknown): string => {
  const body = (error as { body?: unknown }).body
  if (typeof body === "string") {
    try {
      return (JSON.parse(body) as { message?: string }).message ?? body
    } catch {
      return body
    }
  }
  return error instanceof Error ? error.message : String(error)
}

export const checks = async (
  options: Omit<KubernetesRuntimeOptions, "namespace"> & { readonly namespace?: string | undefined }
): Promise<Array<Check>> => {
  const out: Array<Check> = []
  const kc = new k8s.KubeConfig()
  try {
    if (options.kubeconfig !== undefined) kc.loadFromFile(options.kubeconfig)
    else kc.loadFromDefault()
    if (options.context !== undefined) kc.setCurrentContext(options.context)
  } catch (error) {
    out.push({
      name: "kubeconfig",
      ok: false,
      required: true,
      detail: messageOf(error),
      fix: "name a kubeconfig whose context reaches the cluster (KUBECONFIG, --kube-context)"
    })
    return out
  }
  const cluster = kc.getCurrentCluster()
  const namespace = options.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? "default"
  out.push({
    name: "kubeconfig",
    ok: cluster !== null,
    required: true,
    detail:
      cluster === null
        ? `context ${JSON.stringify(kc.getCurrentContext())} names no cluster`
        : `context ${kc.getCurrentContext()}, server ${cluster.server}, namespace ${namespace}`
  })
  if (cluster === null) return out
  try {
    const version = await kc.makeApiClient(k8s.VersionApi).getCode()
    out.push({
      name: "api server",
      ok: true,
      required: true,
      detail: `Kubernetes ${version.gitVersion} (tested here: v1.20.2; docs/scale-out.md says what newer ones change)`
    })
  } catch (error) {
    out.push({
      name: "api server",
      ok: false,
      required: true,
      detail: `${cluster.server} does not answer: ${messageOf(error)}`,
      fix: "check the kubeconfig's server and credentials (kubectl version)"
    })
    return out
  }
  const authorization = kc.makeApiClient(k8s.AuthorizationV1Api)
  const denied: Array<string> = []
  try {
    for (const p of requiredPermissions()) {
      const review = await authorization.createSelfSubjectAccessReview({
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SelfSubjectAccessReview",
          spec: {
            resourceAttributes: {
              namespace,
              resource: p.resource,
              verb: p.verb,
              ...(p.subresource === undefined ? {} : { subresource: p.subresource })
            }
          }
        }
      })
      if (review.status?.allowed !== true)
        denied.push(`${p.verb} ${p.resource}${p.subresource === undefined ? "" : `/${p.subresource}`}`)
    }
    out.push({
      name: "permissions",
      ok: denied.length === 0,
      required: true,
      detail:
        denied.length === 0
          ? `every verb of the shipped Role in namespace ${namespace}`
          : `missing in namespace ${namespace}: ${denied.join(", ")}`,
      ...(denied.length === 0
        ? {}
        : {
            fix: `sed 's/NAMESPACE/${namespace}/' node_modules/@hermes-sandbox/kubernetes/manifests/rbac.yaml | kubectl apply -f - (and run as that ServiceAccount, or bind the Role to your user)`
          })
    })
  } catch (error) {
    out.push({
      name: "permissions",
      ok: false,
      required: true,
      detail: `asking the API server failed: ${messageOf(error)}`
    })
  }
  const allowed = new Set<string>(options.allowDegraded ?? [])
  for (const [g, what] of Object.entries(Guarantees.DEGRADED_GUARANTEES)) {
    out.push({
      name: `guarantee ${g}`,
      ok: allowed.has(g),
      required: false,
      detail: allowed.has(g)
        ? `not given by a pod, and allowed to run without: ${what}`
        : `not given by a pod, so runs that need it are refused: ${what}`,
      ...(allowed.has(g) ? {} : { fix: `accept it with --allow-degraded ${g} (runtime.kubernetes.allowDegraded)` })
    })
  }
  return out
}
