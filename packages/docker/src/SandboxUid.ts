/**
 * Which uid a sandbox runs as. By default every sandbox is uid/gid 1001 (the seeds' user), so
 * they share what the kernel counts per uid across the host: inotify instances
 * (fs.inotify.max_user_instances), POSIX message-queue bytes (RLIMIT_MSGQUEUE), pending signals
 * (RLIMIT_SIGPENDING), RLIMIT_NPROC, and with them any host process of that uid. One sandbox
 * exhausting them made inotify_init1 and mq_open fail with EMFILE and sigqueue/timer_create with
 * EAGAIN in every other one (hostile review 1, finding 9; test/hostile/shared-kernel.test.ts).
 *
 * With `sandboxUid: "per-sandbox"` the runtime gives each sandbox a uid of its own from RANGE (gid
 * = uid; the /workspace tmpfs takes it through its uid=/gid= options), never one already held by
 * a live sandbox of the same runtime. Sandboxes of other processes are not known here: two
 * processes pick independently (at random), so with k sandboxes alive elsewhere a new one shares
 * its uid with one of them with probability about k / SIZE. The uid has no /etc/passwd entry in
 * the images (`whoami`, node's os.userInfo(), Python's pwd.getpwuid fail; HOME is set anyway).
 */

export type SandboxUidMode = "shared" | "per-sandbox"

/**
 * The reserved range: above useradd's UID_MAX (60000) and below systemd's dynamic users
 * (61184–65519) and nobody (65534), so no ordinary host account has these uids; and below 65536,
 * so that an engine with userns-remap or a rootless engine (65536 subordinate ids) can map them.
 * No host account may use them (SECURITY.md).
 */
export const RANGE = { first: 60001, last: 61183 } as const
export const SIZE = RANGE.last - RANGE.first + 1

/** Hands out distinct uids of RANGE to the live sandboxes of one runtime. */
export interface Allocator {
  /** A uid no live sandbox of this runtime holds; undefined when every uid of the range is held. */
  readonly take: () => number | undefined
  readonly release: (uid: number) => void
  readonly held: () => number
}

export const makeAllocator = (random: () => number = Math.random): Allocator => {
  const inUse = new Set<number>()
  return {
    take: () => {
      // A random start, then the next free one: processes that pick independently rarely meet.
      const start = Math.floor(random() * SIZE)
      for (let i = 0; i < SIZE; i++) {
        const uid = RANGE.first + ((start + i) % SIZE)
        if (!inUse.has(uid)) {
          inUse.add(uid)
          return uid
        }
      }
      return undefined
    },
    release: (uid) => {
      inUse.delete(uid)
    },
    held: () => inUse.size
  }
}
