/**
 * OpenSSH known_hosts lookup, so an ssh:// engine's host key is checked as the ssh client the
 * docker CLI runs would check it (ssh2, which docker-modem uses, accepts any host key unless
 * told otherwise). Plain and hashed (|1|salt|hash) host fields, `[host]:port` for ports other
 * than 22, `*`/`?` patterns and `!` negations; @revoked lines deny; @cert-authority lines are
 * not supported (skipped). Keys are compared as their base64 wire blobs.
 */
import { createHmac } from "node:crypto"

/** The name known_hosts records a host under: host for port 22, [host]:port otherwise. */
export const hostPattern = (host: string, port: number): string => (port === 22 ? host : `[${host}]:${port}`)

const globToRegExp = (glob: string): RegExp =>
  new RegExp(
    `^${glob
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, ".*")
      .replace(/\?/g, ".")}$`,
    "i"
  )

const hashedMatches = (field: string, name: string): boolean => {
  const [, , salt, hash] = field.split("|")
  if (salt === undefined || hash === undefined) return false
  return createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64") === hash
}

/** Whether a known_hosts host field (comma-separated patterns, or one hashed entry) names `name`. */
const fieldMatches = (field: string, name: string): boolean => {
  if (field.startsWith("|1|")) return hashedMatches(field, name)
  let matched = false
  for (const pattern of field.split(",")) {
    if (pattern.startsWith("!")) {
      if (globToRegExp(pattern.slice(1)).test(name)) return false
    } else if (globToRegExp(pattern).test(name)) matched = true
  }
  return matched
}

export interface KnownKeys {
  /** base64 wire blobs accepted for the host. */
  readonly accepted: ReadonlyArray<string>
  /** base64 wire blobs marked @revoked for the host. */
  readonly revoked: ReadonlyArray<string>
}

/** The keys a known_hosts text lists for host:port. */
export const lookup = (text: string, host: string, port: number): KnownKeys => {
  const name = hostPattern(host, port)
  const accepted: Array<string> = []
  const revoked: Array<string> = []
  for (const raw of text.split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#")) continue
    const fields = line.split(/\s+/)
    const marker = fields[0]!.startsWith("@") ? fields.shift() : undefined
    const [hosts, , blob] = fields
    if (hosts === undefined || blob === undefined || marker === "@cert-authority") continue
    if (!fieldMatches(hosts, name)) continue
    if (marker === "@revoked") revoked.push(blob)
    else accepted.push(blob)
  }
  return { accepted, revoked }
}

/** The base64 blob of a public key given as "ssh-ed25519 AAAA... [comment]" or as the bare base64. */
export const keyBlob = (publicKey: string): string => {
  const fields = publicKey.trim().split(/\s+/)
  return (fields.length >= 2 ? fields[1] : fields[0]) ?? ""
}
