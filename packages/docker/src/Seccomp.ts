/**
 * The hermes-sandbox seccomp profile (packages/docker/seccomp/hermes-sandbox.json), applied by
 * default. It is derived from Docker's upstream default profile by
 * packages/docker/seccomp/build-profile.ts, which imports the policy constants below; see
 * packages/docker/seccomp/README.md for what is removed and why.
 *
 * Docker's API takes the profile as JSON text: `HostConfig.SecurityOpt: ["seccomp=<json text>"]`.
 */
import { readFileSync } from "node:fs"
import { packageRoot } from "./internal/packageRoot.js"

/**
 * System calls that Docker's upstream default profile allows (unconditionally, per kernel version,
 * or once a capability is granted) and that the hermes profile never allows. Sorted. The profile
 * derivation fails if this list and the derived profile disagree. (clone3 always fails with
 * ENOSYS, so libc falls back to clone(2), whose flags the profile can inspect.) Linux AIO (io_setup
 * and the rest) is removed because its contexts are a host-wide table (fs.aio-max-nr, 65536): one
 * sandbox could take them all and make every io_setup on the host fail with EAGAIN; python, node
 * and bash never use it (glibc's POSIX aio_* uses threads).
 */
export const SECCOMP_REMOVED_SYSCALLS: ReadonlyArray<string> = [
  "acct",
  "adjtimex",
  "bpf",
  "chroot",
  "clock_adjtime",
  "clock_adjtime64",
  "clock_settime",
  "clock_settime64",
  "clone3",
  "delete_module",
  "fanotify_init",
  "finit_module",
  "fsconfig",
  "fsmount",
  "fsopen",
  "fspick",
  "get_mempolicy",
  "init_module",
  "io_cancel",
  "io_destroy",
  "io_getevents",
  "io_pgetevents",
  "io_pgetevents_time64",
  "io_setup",
  "io_submit",
  "io_uring_enter",
  "io_uring_register",
  "io_uring_setup",
  "ioperm",
  "iopl",
  "kcmp",
  "lookup_dcookie",
  "mbind",
  "mount",
  "mount_setattr",
  "move_mount",
  "name_to_handle_at",
  "open_by_handle_at",
  "open_tree",
  "perf_event_open",
  "pidfd_getfd",
  "process_madvise",
  "process_vm_readv",
  "process_vm_writev",
  "ptrace",
  "quotactl",
  "quotactl_fd",
  "reboot",
  "set_mempolicy",
  "set_mempolicy_home_node",
  "setdomainname",
  "sethostname",
  "setns",
  "settimeofday",
  "socketcall",
  "stime",
  "syslog",
  "umount",
  "umount2",
  "unshare",
  "vhangup"
]

/**
 * Dangerous system calls upstream never allowed either; listed so the derivation can assert that
 * the hermes profile does not allow them by accident.
 */
export const SECCOMP_NEVER_ALLOWED_SYSCALLS: ReadonlyArray<string> = [
  "add_key",
  "kexec_file_load",
  "kexec_load",
  "keyctl",
  "pivot_root",
  "request_key",
  "swapoff",
  "swapon",
  "userfaultfd"
]

/** socket(2) is allowed only for these address families: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK. */
export const SECCOMP_ALLOWED_SOCKET_FAMILIES: ReadonlyArray<number> = [1, 2, 10, 16]

/**
 * Families whose socket(2) is further limited to these protocols (argument 2): AF_NETLINK (16)
 * only with NETLINK_ROUTE (0), which getifaddrs, if_nameindex, getaddrinfo(AI_ADDRCONFIG), node's
 * os.networkInterfaces() and iproute2 use. Every other netlink protocol fails with EPERM:
 * NETLINK_KOBJECT_UEVENT delivered the host's uevents to a sandbox (a network namespace owned by the
 * initial user namespace gets them), and sock_diag, audit, netfilter, xfrm, connector and generic
 * netlink are kernel surface no sandboxed program needs.
 */
export const SECCOMP_SOCKET_PROTOCOLS: Readonly<Record<number, ReadonlyArray<number>>> = { 16: [0] }

/** personality(2) is allowed only for PER_LINUX (0) and the 0xffffffff query. */
export const SECCOMP_ALLOWED_PERSONALITIES: ReadonlyArray<number> = [0, 4294967295]

/** Capabilities a sandbox may be given back (everything else stays dropped). */
export const SECCOMP_GRANTABLE_CAPABILITIES: ReadonlyArray<string> = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"]

export const SECCOMP_PROFILE_URL = new URL("seccomp/hermes-sandbox.json", packageRoot)

let cached: string | undefined

/** The hermes seccomp profile as minified JSON text (read once), ready for `seccomp=<text>`. */
export const loadSeccompProfile = (): string => {
  if (cached === undefined) {
    cached = JSON.stringify(JSON.parse(readFileSync(SECCOMP_PROFILE_URL, "utf8")))
  }
  return cached
}
