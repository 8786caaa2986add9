/**
 * Whether a listening address is loopback-only. Its own module, free of the SDK, so the CLI
 * refuses a non-loopback --host as a usage error before it loads the SDK or reaches the engine.
 */
const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|localhost)$/i

export const isLoopback = (host: string) => LOOPBACK.test(host.replace(/^\[|\]$/g, ""))
