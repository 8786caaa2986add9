// PostgreSQL URLs, apart from the driver: recognising and printing them must not load it.

/** A PostgreSQL connection URL (`postgres://` or `postgresql://`, as libpq and pg accept). */
export const isPostgresUrl = (location: string): boolean => /^postgres(ql)?:\/\//i.test(location)

/**
 * The URL without what must not be printed: the password (in the authority or a `password`
 * parameter) and every other parameter but the host/port ones.
 */
export const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    const user = parsed.username === "" ? "" : `${decodeURIComponent(parsed.username)}@`
    const host = parsed.searchParams.get("host")
    const at = parsed.host === "" ? (host ?? "localhost") : parsed.host
    return `${parsed.protocol}//${user}${at}${parsed.pathname}${host !== null && parsed.host !== "" ? ` (host ${host})` : ""}`
  } catch {
    return "an unparsable PostgreSQL URL"
  }
}
