/** Calls `onLine` for each line of a text stream (without its newline), and for a last unterminated line at its end. */
export const forEachLine = (stream: NodeJS.ReadableStream, onLine: (line: string) => void): void => {
  let pending = ""
  stream.setEncoding("utf8")
  stream.on("data", (chunk: string) => {
    pending += chunk
    let newline: number
    while ((newline = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, newline)
      pending = pending.slice(newline + 1)
      onLine(line)
    }
  })
  stream.on("end", () => {
    if (pending !== "") onLine(pending)
    pending = ""
  })
}
