/**
 * Derives hermes-sandbox.json from upstream-default.json (Docker's default seccomp profile, see
 * README.md for the commit) deterministically, so the derivation is reviewable and repeatable.
 *
 *   npx tsx packages/docker/seccomp/build-profile.ts          # (re)write hermes-sandbox.json
 *   npx tsx packages/docker/seccomp/build-profile.ts --check  # exit 1 if it is out of date
 *
 * Steps, in order:
 *  1. archMap: drop every compat sub-architecture (x86/x32 on x86_64, arm on aarch64, ...): the
 *     sandbox runs native 64-bit interpreters; 32-bit entry points (int 0x80, socketcall) are
 *     an old filter-bypass surface. Syscalls of an unlisted arch are refused by the kernel filter.
 *  2. Drop every rule gated on `includes.caps` unless all those capabilities are grantable
 *     (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER): the sandbox runs with ALL capabilities dropped.
 *  3. In `excludes.caps`, keep only grantable capabilities (we never hold the others, so such a
 *     rule always applies); drop the key when it empties. This keeps the non-admin clone rule
 *     (CLONE_NEW* flags masked out) and makes clone3 always fail with ENOSYS (libc falls back to
 *     clone, where the flag mask can be checked).
 *  4. Remove SECCOMP_REMOVED_SYSCALLS from every allow rule; drop rules that end up empty.
 *  5. Replace socket(2)'s rule by one rule per allowed address family (arg0 == family; for a
 *     family in SECCOMP_SOCKET_PROTOCOLS one rule per allowed protocol, arg0 == family and
 *     arg2 == protocol: AF_NETLINK only with NETLINK_ROUTE), and personality(2)'s rules by
 *     PER_LINUX and the 0xffffffff query only.
 *  6. Check: the syscalls upstream allows somewhere minus those we allow anywhere must equal
 *     SECCOMP_REMOVED_SYSCALLS exactly, and SECCOMP_NEVER_ALLOWED_SYSCALLS must stay absent.
 */
import { readFileSync, writeFileSync } from "node:fs"
import {
  SECCOMP_ALLOWED_PERSONALITIES,
  SECCOMP_ALLOWED_SOCKET_FAMILIES,
  SECCOMP_GRANTABLE_CAPABILITIES,
  SECCOMP_NEVER_ALLOWED_SYSCALLS,
  SECCOMP_REMOVED_SYSCALLS,
  SECCOMP_SOCKET_PROTOCOLS
} from "../src/Seccomp.js"

interface Arg {
  index: number
  value: number
  valueTwo?: number
  op: string
}
interface Filter {
  caps?: Array<string>
  arches?: Array<string>
  minKernel?: string
}
interface Rule {
  names: Array<string>
  action: string
  errnoRet?: number
  args?: Array<Arg>
  comment?: string
  includes?: Filter
  excludes?: Filter
}
interface ArchMap {
  architecture: string
  subArchitectures: Array<string> | null
}
interface Profile {
  defaultAction: string
  defaultErrnoRet?: number
  archMap: Array<ArchMap>
  syscalls: Array<Rule>
}

const upstreamUrl = new URL("./upstream-default.json", import.meta.url)
const outputUrl = new URL("./hermes-sandbox.json", import.meta.url)

const grantable = new Set(SECCOMP_GRANTABLE_CAPABILITIES)
const removed = new Set(SECCOMP_REMOVED_SYSCALLS)
const FAMILY_NAMES: Record<number, string> = { 1: "AF_UNIX", 2: "AF_INET", 10: "AF_INET6", 16: "AF_NETLINK" }
const PROTOCOL_NAMES: Record<number, Record<number, string>> = { 16: { 0: "NETLINK_ROUTE" } }
const CLONE_NEW_MASK = 2114060288 // CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

const isEmptyFilter = (f: Filter | undefined) =>
  f === undefined || Object.values(f).every((v) => v === undefined || (Array.isArray(v) && v.length === 0))

const allowedNames = (p: Profile): Set<string> =>
  new Set(p.syscalls.filter((r) => r.action === "SCMP_ACT_ALLOW").flatMap((r) => r.names))

export const deriveProfile = (upstream: Profile): Profile => {
  const familyName = (family: number) => `${family}${FAMILY_NAMES[family] ? ` (${FAMILY_NAMES[family]})` : ""}`
  const socketRules: Array<Rule> = SECCOMP_ALLOWED_SOCKET_FAMILIES.flatMap((family): Array<Rule> => {
    const protocols = SECCOMP_SOCKET_PROTOCOLS[family]
    if (protocols === undefined) {
      return [
        {
          names: ["socket"],
          action: "SCMP_ACT_ALLOW",
          args: [{ index: 0, value: family, op: "SCMP_CMP_EQ" }],
          comment: `hermes: socket(2) for address family ${familyName(family)}; other families fail with EPERM`
        }
      ]
    }
    // Both conditions in one rule: libseccomp ANDs the comparisons of a rule.
    return protocols.map((protocol) => ({
      names: ["socket"],
      action: "SCMP_ACT_ALLOW",
      args: [
        { index: 0, value: family, op: "SCMP_CMP_EQ" },
        { index: 2, value: protocol, op: "SCMP_CMP_EQ" }
      ],
      comment: `hermes: socket(2) for address family ${familyName(family)} with protocol ${protocol}${PROTOCOL_NAMES[family]?.[protocol] ? ` (${PROTOCOL_NAMES[family]![protocol]})` : ""} only; other protocols and families fail with EPERM`
    }))
  })
  const personalityRules: Array<Rule> = SECCOMP_ALLOWED_PERSONALITIES.map((value) => ({
    names: ["personality"],
    action: "SCMP_ACT_ALLOW",
    args: [{ index: 0, value, op: "SCMP_CMP_EQ" }]
  }))

  const syscalls: Array<Rule> = []
  let socketPlaced = false
  let personalityPlaced = false
  for (const original of upstream.syscalls) {
    const rule: Rule = structuredClone(original)
    // 2. capability-gated rules
    const caps = rule.includes?.caps ?? []
    if (caps.length > 0 && !caps.every((c) => grantable.has(c))) continue
    // 3. excludes.caps
    if (rule.excludes?.caps !== undefined) {
      const kept = rule.excludes.caps.filter((c) => grantable.has(c))
      if (kept.length > 0) rule.excludes.caps = kept
      else delete rule.excludes.caps
      if (isEmptyFilter(rule.excludes)) delete rule.excludes
    }
    // 5. socket / personality are replaced where upstream first lists them
    if (rule.names.includes("socket") || rule.names.includes("personality")) {
      if (rule.names.some((n) => n !== "socket" && n !== "personality")) {
        throw new Error(`upstream rule mixes socket/personality with other syscalls: ${JSON.stringify(original)}`)
      }
      if (rule.names.includes("socket") && !socketPlaced) {
        syscalls.push(...socketRules)
        socketPlaced = true
      }
      if (rule.names.includes("personality") && !personalityPlaced) {
        syscalls.push(...personalityRules)
        personalityPlaced = true
      }
      continue
    }
    // 4. removed syscalls (from allow rules only: clone3's ENOSYS rule must stay)
    if (rule.action === "SCMP_ACT_ALLOW") rule.names = rule.names.filter((n) => !removed.has(n))
    if (rule.names.length === 0) continue
    syscalls.push(rule)
  }
  if (!socketPlaced) syscalls.push(...socketRules)
  if (!personalityPlaced) syscalls.push(...personalityRules)

  const profile: Profile = {
    defaultAction: "SCMP_ACT_ERRNO",
    defaultErrnoRet: 1,
    // 1. native architectures only
    archMap: upstream.archMap.map((a) => ({ architecture: a.architecture, subArchitectures: null })),
    syscalls
  }
  check(upstream, profile)
  return profile
}

const check = (upstream: Profile, profile: Profile) => {
  const problems: Array<string> = []
  if (upstream.defaultAction !== "SCMP_ACT_ERRNO") problems.push(`upstream defaultAction is ${upstream.defaultAction}`)
  const before = new Set(upstream.syscalls.flatMap((r) => r.names))
  const after = allowedNames(profile)
  const computed = [...before].filter((n) => !after.has(n)).sort()
  const declared = [...SECCOMP_REMOVED_SYSCALLS].sort()
  const missing = computed.filter((n) => !removed.has(n))
  const stale = declared.filter((n) => !computed.includes(n))
  if (missing.length > 0)
    problems.push(`removed by the derivation but not in SECCOMP_REMOVED_SYSCALLS: ${missing.join(", ")}`)
  if (stale.length > 0) problems.push(`in SECCOMP_REMOVED_SYSCALLS but not allowed upstream: ${stale.join(", ")}`)
  if (JSON.stringify(declared) !== JSON.stringify(SECCOMP_REMOVED_SYSCALLS))
    problems.push("SECCOMP_REMOVED_SYSCALLS is not sorted")
  for (const n of SECCOMP_NEVER_ALLOWED_SYSCALLS) if (after.has(n)) problems.push(`${n} is allowed`)
  for (const r of profile.syscalls) {
    if ((r.includes?.caps ?? []).some((c) => !grantable.has(c)))
      problems.push(`rule needs a non-grantable capability: ${JSON.stringify(r)}`)
    if (r.includes?.minKernel !== undefined) problems.push(`kernel-gated rule left: ${JSON.stringify(r)}`)
    if (r.names.includes("socket")) {
      const family = r.args?.find((a) => a.index === 0 && a.op === "SCMP_CMP_EQ")
      const protocols = family === undefined ? undefined : SECCOMP_SOCKET_PROTOCOLS[family.value]
      const protocol = r.args?.find((a) => a.index === 2 && a.op === "SCMP_CMP_EQ")
      const expectedArgs = protocols === undefined ? 1 : 2
      if (
        family === undefined ||
        r.args?.length !== expectedArgs ||
        (protocols !== undefined && (protocol === undefined || !protocols.includes(protocol.value)))
      ) {
        problems.push(
          `socket rule without its address-family (and, where limited, protocol) filter: ${JSON.stringify(r)}`
        )
      }
    }
  }
  const cloneRules = profile.syscalls.filter((r) => r.names.includes("clone") && r.action === "SCMP_ACT_ALLOW")
  if (cloneRules.length === 0) problems.push("no clone rule left: threads and fork would fail")
  for (const r of cloneRules) {
    if (
      r.args?.length !== 1 ||
      r.args[0]!.value !== CLONE_NEW_MASK ||
      r.args[0]!.op !== "SCMP_CMP_MASKED_EQ" ||
      r.excludes?.caps !== undefined
    ) {
      problems.push(`clone rule does not mask out CLONE_NEW* unconditionally: ${JSON.stringify(r)}`)
    }
  }
  const clone3 = profile.syscalls.find((r) => r.names.includes("clone3"))
  if (clone3 === undefined || clone3.action !== "SCMP_ACT_ERRNO" || clone3.excludes !== undefined)
    problems.push("clone3 must always fail (ENOSYS)")
  if (problems.length > 0) throw new Error(`seccomp derivation check failed:\n  - ${problems.join("\n  - ")}`)
}

export const renderProfile = (profile: Profile): string => `${JSON.stringify(profile, null, "\t")}\n`

const main = () => {
  const upstream = JSON.parse(readFileSync(upstreamUrl, "utf8")) as Profile
  const text = renderProfile(deriveProfile(upstream))
  if (process.argv.includes("--check")) {
    let current = ""
    try {
      current = readFileSync(outputUrl, "utf8")
    } catch {
      // missing counts as out of date
    }
    if (current !== text) {
      console.error("hermes-sandbox.json is out of date: run npx tsx packages/docker/seccomp/build-profile.ts")
      process.exit(1)
    }
    console.log(`hermes-sandbox.json is up to date (${SECCOMP_REMOVED_SYSCALLS.length} syscalls removed from upstream)`)
    return
  }
  writeFileSync(outputUrl, text)
  console.log(`wrote ${outputUrl.pathname} (${SECCOMP_REMOVED_SYSCALLS.length} syscalls removed from upstream)`)
}

if (process.argv[1] !== undefined && /build-profile\.[cm]?[jt]s$/.test(process.argv[1])) main()
