/** This package's version, as servers report it in initialize (test/mcp-protocol.test.ts checks it against package.json). */
export const VERSION = "0.1.0"
