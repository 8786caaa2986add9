#!/usr/bin/env bash
# A throwaway one-node Kubernetes v1.20.2 on 127.0.0.1, for the live tests of the Kubernetes runtime.
#
#   bash scripts/kubernetes-local.sh up      start it; the LAST line of stdout is the admin kubeconfig's path
#   bash scripts/kubernetes-local.sh down    stop it and remove every trace (a no-op, exit 0, when it is not up)
#   bash scripts/kubernetes-local.sh status  exit 0 and print the kubeconfig's path if it is up, exit 1 otherwise
#   bash scripts/kubernetes-local.sh kill kubelet|containerd    SIGKILL one node component (chaos tests)
#   bash scripts/kubernetes-local.sh start kubelet|containerd   start it again as `up` did, wait until it serves
#
# What runs (all as root, all bound to 127.0.0.1, everything private under $HERMES_K8S_STATE):
#   etcd (Debian's etcd-server, unpacked from its .deb so its system service is never installed),
#   kube-apiserver, kube-controller-manager, kube-scheduler and a patched kubelet (the prebuilt
#   tarball of /work/shared/k8s, built from Debian's own source package: see its README), a PRIVATE
#   containerd (own config, root, state and socket; Docker's or the system's containerd is never
#   touched), runc, and a 10-line CNI plugin that gives each pod a veth pair with BOTH ends inside
#   the pod's netns: no route out, no host-side change (a stand-in for "network none").
# Images: a pause image made here from the tarball's static bin/pause, plus the project's images
# (`docker save` from the Docker engine, when it answers) imported into the private containerd's
# k8s.io namespace; pods must use imagePullPolicy: Never (there is no registry).
# Seccomp: packages/docker/seccomp/hermes-sandbox.json is copied to <state>/seccomp/, so a pod can use
#   securityContext.seccompProfile: {type: Localhost, localhostProfile: hermes-sandbox.json}.
# RuntimeClass: a `runsc` handler (gVisor through the runc shim, --network=none) is registered when
#   /usr/bin/runsc exists; a RuntimeClass {handler: runsc} selects it.
#
# Host hygiene. The kubelet is started with the flags that keep the host untouched (no sysctl writes:
# the tarball's kubelet is patched for that; no iptables chains, no QoS cgroups, no eviction, no
# /var/lib/kubelet root). Some paths are created outside the state dir whatever the flags say: the
# 1.20 kubelet's /var/log/pods, /var/log/containers and /var/lib/kubelet/device-plugins, libcni's
# /var/lib/cni/results, and the pods' parent cgroup /k8s.io in every hierarchy. `up` records which
# of them did not exist before, and `down` removes exactly those. After `down` no process, mount,
# netns, cgroup or directory of this cluster is left. Packages that are missing are installed with
# apt-get and left installed (containerd, runc, containernetworking-plugins, openssl, curl,
# iproute2, bsdiff); etcd-server's .deb is only downloaded to apt's cache and unpacked into the state dir.
#
# Environment (all optional):
#   HERMES_K8S_STATE       state dir (default /tmp/hermes-k8s): certs, etcd data, logs, pids, roots
#   HERMES_K8S_TARBALL     node binaries (default /work/shared/k8s/kubernetes-node-v1.20.2-linux-amd64.tar.gz);
#                          checked against <tarball>.sha256; built with build-node.sh beside it if absent
#   HERMES_K8S_IMAGES      images to import from Docker (default: hermes-sandbox/python, /bash, /node; those
#                          that exist). Empty string: none.
#   HERMES_K8S_SECCOMP     seccomp profile to copy (default packages/docker/seccomp/hermes-sandbox.json)
#   HERMES_K8S_TIMEOUT     seconds each component gets to come up (default 120)
#   HERMES_K8S_ETCD_PORT (22379) HERMES_K8S_ETCD_PEER_PORT (22380) HERMES_K8S_API_PORT (16443)
#   HERMES_K8S_KUBELET_PORT (20250) HERMES_K8S_KCM_PORT (20257) HERMES_K8S_SCHEDULER_PORT (20259)
#   HERMES_K8S_KEEP_ON_FAILURE=1  leave a half-started cluster for inspection instead of tearing it down
# Timings of bring-up and tear-down go to stderr; so does every progress line.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${HERMES_K8S_STATE:-/tmp/hermes-k8s}"
TARBALL="${HERMES_K8S_TARBALL:-/work/shared/k8s/kubernetes-node-v1.20.2-linux-amd64.tar.gz}"
IMAGES="${HERMES_K8S_IMAGES-hermes-sandbox/python hermes-sandbox/bash hermes-sandbox/node}"
SECCOMP_PROFILE="${HERMES_K8S_SECCOMP:-$REPO/packages/docker/seccomp/hermes-sandbox.json}"
TIMEOUT="${HERMES_K8S_TIMEOUT:-120}"
ETCD_PORT="${HERMES_K8S_ETCD_PORT:-22379}"
ETCD_PEER_PORT="${HERMES_K8S_ETCD_PEER_PORT:-22380}"
API_PORT="${HERMES_K8S_API_PORT:-16443}"
KUBELET_PORT="${HERMES_K8S_KUBELET_PORT:-20250}"
KCM_PORT="${HERMES_K8S_KCM_PORT:-20257}"
SCHEDULER_PORT="${HERMES_K8S_SCHEDULER_PORT:-20259}"
NODE_NAME=127.0.0.1
PAUSE_IMAGE=hermes.local/pause:3.2
# Paths created outside the state dir whatever the flags say: the 1.20 kubelet's /var/log/pods,
# /var/log/containers and /var/lib/kubelet/device-plugins, and libcni's result cache /var/lib/cni
# (containerd 1.6 offers no setting for it).
HOST_PATHS="/var/log/pods /var/log/containers /var/lib/kubelet/device-plugins /var/lib/cni/results"
CNI_NETWORK=hermes-k8s-no-network

# Everything lives under $STATE; these are the fixed sub-paths.
PKI="$STATE/pki"
BIN="$STATE/bin"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
KUBECONFIG_ADMIN="$STATE/admin.kubeconfig"
CTRD_SOCK="$STATE/containerd/containerd.sock"
UP_MARKER="$STATE/up"
HOST_PATHS_FILE="$STATE/host-paths-created"
CGROUPS_FILE="$STATE/cgroups-created"

log() { printf '[k8s] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

case "$STATE" in
  /*) ;;
  *) die "HERMES_K8S_STATE must be an absolute path (got '$STATE')" ;;
esac
# `down` does rm -rf on it: refuse anything that could be a system directory.
case "$STATE" in / | /tmp | /run | /var | /var/* | /usr* | /etc* | /home | /root) die "refusing HERMES_K8S_STATE=$STATE" ;; esac

# ---------------------------------------------------------------------------------------------
# Processes. Each component runs in its own session (setsid: no signal from our terminal reaches it)
# with its pid in $PIDS/<name>.pid. A pid is only ever signalled after checking that its command
# line mentions $STATE, so a recycled pid is never hit.

ours() { # PID: is it alive and one of ours?
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$STATE"
}

start_proc() { # NAME COMMAND...
  local name="$1"; shift
  setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name.pid"
}

alive() { # NAME
  local pid
  pid="$(cat "$PIDS/$1.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && ours "$pid"
}

stop_pid() { # PID GRACE_SECONDS: TERM, wait, then KILL
  local pid="$1" grace="$2" i
  ours "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < grace * 10; i++)); do
    ours "$pid" || return 0
    sleep 0.1
  done
  log "pid $pid did not stop on TERM within ${grace}s: KILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do ours "$pid" || return 0; sleep 0.1; done
}

stop_proc() { # NAME GRACE_SECONDS
  local pid
  pid="$(cat "$PIDS/$1.pid" 2>/dev/null)" || return 0
  [ -n "$pid" ] && stop_pid "$pid" "$2"
  rm -f "$PIDS/$1.pid"
}

fail_component() { # NAME WHY
  log "ERROR: $1 $2"
  # A Go component's last lines are often a goroutine dump: show its fatal/error lines first.
  if grep -qE '^(F[0-9]{4}|Error:|panic:|fatal error:)|level=(fatal|error)' "$LOGS/$1.log" 2>/dev/null; then
    log "its fatal/error lines:"
    grep -E '^(F[0-9]{4}|E[0-9]{4}|Error:|panic:|fatal error:)|level=(fatal|error)' "$LOGS/$1.log" | tail -n 10 >&2
  fi
  log "last lines of $LOGS/$1.log:"
  tail -n 25 "$LOGS/$1.log" >&2 2>/dev/null || true
  # The state dir goes away with the teardown: keep the logs where they can be read.
  rm -rf "$STATE.failed-logs" && cp -r "$LOGS" "$STATE.failed-logs" 2>/dev/null &&
    log "all logs of this attempt kept in $STATE.failed-logs"
  exit 1
}

wait_for() { # NAME WHAT COMMAND...: poll COMMAND every 0.25 s until it succeeds, a component dies or TIMEOUT
  local name="$1" what="$2" t0 i f
  shift 2
  t0="$(now)"
  for ((i = 0; i < TIMEOUT * 4; i++)); do
    if "$@" >/dev/null 2>&1; then log "$what ($(since "$t0") s)"; return 0; fi
    # Any component that died (not only NAME) is the cause to report.
    for f in "$PIDS"/*.pid; do
      [ -e "$f" ] || continue
      f="$(basename "$f" .pid)"
      alive "$f" || fail_component "$f" "exited (while waiting for: $what)"
    done
    sleep 0.25
  done
  fail_component "$name" "did not come up within ${TIMEOUT}s (waiting for: $what)"
}

api() { # PATH: GET from the apiserver as admin
  curl -sS --fail --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$API_PORT$1"
}

# ---------------------------------------------------------------------------------------------
# Prerequisites.

ensure_packages() {
  local missing=""
  command -v containerd >/dev/null 2>&1 && command -v containerd-shim-runc-v2 >/dev/null 2>&1 &&
    command -v ctr >/dev/null 2>&1 || missing="$missing containerd"
  command -v runc >/dev/null 2>&1 || missing="$missing runc"
  [ -x /usr/lib/cni/loopback ] || missing="$missing containernetworking-plugins"
  command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
  command -v curl >/dev/null 2>&1 || missing="$missing curl"
  command -v jq >/dev/null 2>&1 || missing="$missing jq"
  command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
  command -v nsenter >/dev/null 2>&1 || missing="$missing util-linux"
  command -v bspatch >/dev/null 2>&1 || missing="$missing bsdiff"
  # etcd-server is only downloaded (to apt's own cache), never installed: installing it would
  # enable a system etcd service on port 2379. Its binary is unpacked into the state dir.
  local need_etcd=""
  command -v etcd >/dev/null 2>&1 || ls /var/cache/apt/archives/etcd-server_*.deb >/dev/null 2>&1 || need_etcd=1
  [ -n "$missing$need_etcd" ] || return 0
  { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; } ||
    die "missing:$missing${need_etcd:+ etcd-server}; install them (Debian: apt-get install$missing${need_etcd:+ etcd-server}) and run this again"
  export DEBIAN_FRONTEND=noninteractive
  if [ -n "$missing" ]; then
    log "installing$missing with apt-get"
    # containerd's package ships a system service: it must not start (we run a private instance).
    # policy-rc.d 101 = "action not allowed", as scripts/test.sh does for sshd and PostgreSQL.
    local policy_rc=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy_rc=1
    fi
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >/tmp/hermes-k8s-apt.log 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq $missing >/tmp/hermes-k8s-apt.log 2>&1; } ||
      { [ -n "$policy_rc" ] && rm -f /usr/sbin/policy-rc.d; tail -20 /tmp/hermes-k8s-apt.log >&2; exit 1; }
    [ -n "$policy_rc" ] && rm -f /usr/sbin/policy-rc.d
  fi
  if [ -n "$need_etcd" ]; then
    log "downloading etcd-server's .deb (unpacked, not installed)"
    apt-get install -y -qq --download-only etcd-server >/tmp/hermes-k8s-apt.log 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq --download-only etcd-server >/tmp/hermes-k8s-apt.log 2>&1; } ||
      { tail -20 /tmp/hermes-k8s-apt.log >&2; exit 1; }
  fi
}

ensure_tarball() {
  if [ ! -f "$TARBALL" ]; then
    local builder out
    builder="$(dirname "$TARBALL")/build-node.sh"
    [ -f "$builder" ] || builder=/work/shared/k8s/build-node.sh
    out="$(dirname "$TARBALL")"
    [ "$(basename "$TARBALL")" = kubernetes-node-v1.20.2-linux-amd64.tar.gz ] ||
      die "$TARBALL does not exist, and build-node.sh only writes kubernetes-node-v1.20.2-linux-amd64.tar.gz"
    [ -f "$builder" ] || die "$TARBALL does not exist and no build-node.sh was found to build it"
    log "the node binaries ($TARBALL) are missing: building them from Debian's kubernetes source package"
    log "with $builder --out $out (about 17 min cold on 2 cores, 2-3 min with a warm Go cache)…"
    mkdir -p "$out"
    bash "$builder" --out "$out" --jobs 2 >&2 || die "build-node.sh failed (see its output above)"
  fi
  [ -f "$TARBALL.sha256" ] || die "$TARBALL.sha256 is missing: cannot check the tarball"
  local want got
  want="$(awk '{ print $1; exit }' "$TARBALL.sha256")"
  got="$(sha256sum "$TARBALL" | awk '{ print $1 }')"
  [ "$want" = "$got" ] || die "sha256 mismatch for $TARBALL: $got, expected $want (from $TARBALL.sha256)"
  # The first shared build vendored reflect2 1.0.1, which corrupts memory when built with Go >= 1.18:
  # its kube-apiserver dies ("fatal error: fault ... aeshashbody") within seconds of serving JSON
  # (modern-go/reflect2#26). The fixed build (build-node.sh with scripts/kubernetes/build-node-reflect2.patch:
  # reflect2 1.0.2 from bookworm, ~17 min cold) is byte-for-byte reproducible, so instead of rebuilding,
  # `up` turns this tarball's four Go binaries into the fixed ones with bsdiff deltas (2.9 MB, in
  # scripts/kubernetes/reflect2-fix/), checked against the fixed build's sha256 sums.
  FIX_REFLECT2=""
  if [ "$got" = b1bb41f79035e6b9387dd6afa13d33e61c48bf1ef79f7787d7921066d0c8fca9 ]; then
    log "this tarball's Go binaries vendor reflect2 1.0.1 (kube-apiserver crashes on JSON): patching them to"
    log "the reflect2 1.0.2 build with scripts/kubernetes/reflect2-fix/ (sha256-checked)"
    FIX_REFLECT2=1
  fi
}

# The four Go binaries of the broken first build, made into the fixed build's (see ensure_tarball).
fix_reflect2() {
  local fix="$REPO/scripts/kubernetes/reflect2-fix" b
  (cd "$BIN" && sha256sum --quiet -c "$fix/FROM.SHA256SUMS") >&2 || die "the unpacked binaries are not the ones the deltas start from"
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    bspatch "$BIN/$b" "$BIN/$b.fixed" "$fix/$b.bsdiff" || die "bspatch $b failed"
    mv "$BIN/$b.fixed" "$BIN/$b"
    chmod 755 "$BIN/$b"
  done
  (cd "$BIN" && sha256sum --quiet -c "$fix/SHA256SUMS") >&2 || die "the patched binaries are not the fixed build's (sha256)"
}

check_ports() {
  local p
  for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$KUBELET_PORT" "$KCM_PORT" "$SCHEDULER_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      die "port 127.0.0.1:$p is in use (set HERMES_K8S_*_PORT: see the header of this script)"
    fi
  done
}

# ---------------------------------------------------------------------------------------------
# Certificates (openssl, ECDSA P-256: fast to make). One CA signs everything; valid 30 days.

cert() { # NAME SUBJECT EXT_KEY_USAGE [SUBJECT_ALT_NAMES]
  local name="$1" subj="$2" eku="$3" san="${4:-}"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -z "$san" ] || echo "subjectAltName=$san"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=hermes-k8s-ca" -days 30 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$PKI/ca.crt" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=hermes-admin" clientAuth
  # The apiserver's client identity towards the kubelet (logs, attach, exec).
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  # The Node authorizer and NodeRestriction recognise a kubelet by exactly this identity.
  cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
  cert kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:127.0.0.1"
  cert controller-manager "/CN=system:kube-controller-manager" clientAuth
  cert scheduler "/CN=system:kube-scheduler" clientAuth
  # Service-account token signing key (the controller-manager signs, the apiserver verifies).
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
}

kubeconfig() { # FILE CERT_NAME
  local b64="base64 -w0"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hermes-local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$PKI/$2.crt")
    client-key-data: $($b64 <"$PKI/$2.key")
contexts:
- name: hermes-local
  context:
    cluster: hermes-local
    user: $2
current-context: hermes-local
EOF
  chmod 600 "$1"
}

# ---------------------------------------------------------------------------------------------
# containerd, CNI and images.

write_containerd_config() {
  local c="$STATE/containerd"
  mkdir -p "$c/root" "$c/state" "$c/opt" "$c/runc" "$STATE/cni/bin" "$STATE/cni/net.d"
  # The CNI plugin: CNI 0.4.0, veth pair with both ends in the pod netns (containerd 1.6 insists on
  # an eth0 with an IP; a loopback-only conflist fails the sandbox, and `dummy` links do not exist
  # in this kernel). The netns is deleted with the pod, so DEL has nothing to undo.
  cat >"$STATE/cni/bin/hermes-netns-veth" <<'EOF'
#!/bin/sh
# CNI 0.4.0 plugin: eth0 + peer, both inside the pod netns; 10.255.255.2/32; no host-side change.
cat >/dev/null
case "$CNI_COMMAND" in
ADD)
  nsenter --net="$CNI_NETNS" ip link del "$CNI_IFNAME" 2>/dev/null
  nsenter --net="$CNI_NETNS" ip link add "$CNI_IFNAME" type veth peer name hermes-peer >&2 || exit 1
  nsenter --net="$CNI_NETNS" ip addr add 10.255.255.2/32 dev "$CNI_IFNAME" >&2 || exit 1
  nsenter --net="$CNI_NETNS" ip link set hermes-peer up >&2 && nsenter --net="$CNI_NETNS" ip link set "$CNI_IFNAME" up >&2 || exit 1
  printf '{"cniVersion":"0.4.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"version":"4","address":"10.255.255.2/32","interface":0}],"dns":{}}\n' "$CNI_IFNAME" "$CNI_NETNS" ;;
DEL | CHECK) ;;
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
*) echo '{"cniVersion":"0.4.0","code":4,"msg":"unknown CNI_COMMAND"}'; exit 1 ;;
esac
EOF
  chmod 755 "$STATE/cni/bin/hermes-netns-veth"
  # containerd's CRI always adds a loopback network through the `loopback` plugin of its bin_dir.
  ln -sf /usr/lib/cni/loopback "$STATE/cni/bin/loopback"
  echo '{"cniVersion":"0.4.0","name":"'"$CNI_NETWORK"'","plugins":[{"type":"hermes-netns-veth"}]}' \
    >"$STATE/cni/net.d/10-hermes.conflist"

  local runsc_handler=""
  if [ -x /usr/bin/runsc ]; then
    # Debian's runsc has no containerd-shim-runsc-v1: run it through the runc shim, as Docker does.
    # EXPERIMENTAL, NOT WORKING YET: with this shim a pod's container starts inside the pause
    # container's gVisor sandbox and its exit is never reported (the pod stays Running; checked
    # 2026-12-05). Needs containerd-shim-runsc-v1, which Debian bookworm does not ship.
    # --network=none is required on these hosts (see notes/machine-and-pitfalls.md).
    printf '#!/bin/sh\nexec /usr/bin/runsc --network=none "$@"\n' >"$BIN/runsc-network-none"
    chmod 755 "$BIN/runsc-network-none"
    runsc_handler="
    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runsc]
      runtime_type = \"io.containerd.runc.v2\"
      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runsc.options]
        BinaryName = \"$BIN/runsc-network-none\"
        Root = \"$c/runsc\""
  fi
  cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
oom_score = 0
# Snapshotters we do not use. (The v1 linux runtime cannot be disabled: the tasks service needs it.)
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$c/containerd.ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.runtime.v1.linux"]
    # default /run/containerd/runc (unused: CRI runs the v2 shim, but keep it ours)
    runtime_root = "$c/runc-v1"
  [plugins."io.containerd.internal.v1.opt"]
    # default /opt/containerd
    path = "$c/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    # This environment lacks CAP_SYS_RESOURCE: without it runc fails writing oom_score_adj.
    restrict_oom_score_adj = true
    # The streaming server (attach/exec/port-forward) on loopback, on a random port.
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    # Pod netns bind mounts under our state dir instead of /var/run/netns.
    netns_mounts_under_state_dir = true
    enable_selinux = false
    disable_apparmor = true
    max_container_log_line_size = 16384
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          # default /run/containerd/runc
          Root = "$c/runc"
          SystemdCgroup = false$runsc_handler
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$STATE/cni/bin"
      conf_dir = "$STATE/cni/net.d"
      max_conf_num = 1
EOF
}

# A docker-archive image holding only the tarball's static /pause, made without Docker.
make_pause_image() {
  local d="$STATE/images/pause" diff cfg
  mkdir -p "$d/rootfs"
  cp "$BIN/pause" "$d/rootfs/pause"
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$d/rootfs" -cf "$d/layer.tar" pause
  diff="$(sha256sum "$d/layer.tar" | awk '{ print $1 }')"
  mkdir -p "$d/archive/$diff"
  mv "$d/layer.tar" "$d/archive/$diff/layer.tar"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$diff" >"$d/config.json"
  cfg="$(sha256sum "$d/config.json" | awk '{ print $1 }')"
  mv "$d/config.json" "$d/archive/$cfg.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$PAUSE_IMAGE" "$diff" \
    >"$d/archive/manifest.json"
  tar -C "$d/archive" -cf "$d/pause.tar" .
}

import_images() {
  local t0 present=() img
  t0="$(now)"
  make_pause_image
  ctr -a "$CTRD_SOCK" -n k8s.io images import "$STATE/images/pause/pause.tar" >>"$LOGS/images.log" 2>&1 ||
    { tail -n 20 "$LOGS/images.log" >&2; die "importing the pause image failed"; }
  rm -rf "$STATE/images"
  if [ -n "$IMAGES" ]; then
    if docker info >/dev/null 2>&1; then
      for img in $IMAGES; do
        if docker image inspect "$img" >/dev/null 2>&1; then present+=("$img"); else log "image $img is not on the Docker engine: skipped"; fi
      done
    else
      log "WARNING: the Docker engine does not answer: only the pause image is imported (run scripts/ensure-engine.sh and scripts/build-images.sh for the project's images)"
    fi
  fi
  if [ "${#present[@]}" -gt 0 ]; then
    # One `docker save` for all: their shared base layers are streamed once.
    if ! docker save "${present[@]}" | ctr -a "$CTRD_SOCK" -n k8s.io images import - >>"$LOGS/images.log" 2>&1; then
      tail -n 20 "$LOGS/images.log" >&2
      die "importing ${present[*]} into the private containerd failed"
    fi
  fi
  log "images imported: $PAUSE_IMAGE${present[*]:+ ${present[*]}} ($(since "$t0") s)"
}

# ---------------------------------------------------------------------------------------------
# up

is_up() {
  [ -f "$UP_MARKER" ] || return 1
  local n
  for n in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet; do alive "$n" || return 1; done
  [ "$(api /readyz 2>/dev/null)" = ok ]
}

node_ready() { # [SINCE epoch s] Ready=True (reported since SINCE) and no not-ready/unreachable taint left (the controller-manager clears it)
  # jq, not node: wait_for polls this 4 times a second while a restarted kubelet reports in (the
  # chaos tests restart it), and a node start cost ~0.1 s of CPU each time (34 CPU-s of a run).
  api "/api/v1/nodes/$NODE_NAME" | jq -e --argjson since "${1:-0}" '
    ([.status.conditions[]? | select(.type == "Ready" and .status == "True"
        and (.lastHeartbeatTime | fromdateiso8601) >= $since)] | length > 0)
    and ([.spec.taints[]? | select(.key | test("not-ready|unreachable"))] | length == 0)'
}

on_up_exit() {
  local rc=$?
  [ "$rc" != 0 ] || return 0
  if [ "${HERMES_K8S_KEEP_ON_FAILURE:-}" = 1 ]; then
    log "left as it is for inspection: $STATE (bash $0 down removes it)"
  else
    log "bring-up failed: tearing down"
    do_down || true
  fi
  exit "$rc"
}

# The node's two components, as `up` starts them and as `start` starts one again after a fault.
start_containerd() {
  start_proc containerd containerd --config "$STATE/containerd/config.toml"
  wait_for containerd "containerd answers on $CTRD_SOCK" ctr -a "$CTRD_SOCK" version
}

# Idle, the node cost 11 % of a core, much of it the kubelet's container stats (cAdvisor's
# housekeeping, every 10 s by default), which nothing here uses (no eviction, no metrics): once a
# minute (bench/kubernetes-idle.sh, BENCHMARKS.md). Not the node status' frequency: a kubelet
# that starts reports NotReady first, and its next report, Ready, comes that much later.
start_kubelet() {
  start_proc kubelet "$BIN/kubelet" \
    --kubeconfig="$STATE/kubelet.kubeconfig" --hostname-override="$NODE_NAME" \
    --container-runtime=remote --container-runtime-endpoint="unix://$CTRD_SOCK" --containerd="$CTRD_SOCK" \
    --runtime-request-timeout=2m \
    --root-dir="$STATE/kubelet" --cert-dir="$PKI/kubelet-generated" \
    --seccomp-profile-root="$STATE/seccomp" --volume-plugin-dir="$STATE/kubelet-volume-plugins" \
    --address=127.0.0.1 --port="$KUBELET_PORT" --read-only-port=0 --healthz-port=0 \
    --tls-cert-file="$PKI/kubelet-serving.crt" --tls-private-key-file="$PKI/kubelet-serving.key" \
    --client-ca-file="$PKI/ca.crt" --anonymous-auth=false --authorization-mode=Webhook \
    --cgroups-per-qos=false --enforce-node-allocatable= --make-iptables-util-chains=false \
    --fail-swap-on=false --eviction-hard= --oom-score-adj=0 \
    --image-gc-high-threshold=100 --image-gc-low-threshold=99 \
    --cluster-domain=cluster.local --pod-infra-container-image="$PAUSE_IMAGE" \
    --feature-gates=SizeMemoryBackedVolumes=true --housekeeping-interval=60s
}

do_up() {
  if is_up; then
    log "already up (state: $STATE)"
    echo "$KUBECONFIG_ADMIN"
    return 0
  fi
  if [ -e "$STATE" ]; then
    log "found a stale or half-started cluster in $STATE: tearing it down first"
    do_down
  fi
  [ "$(id -u)" = 0 ] || die "must run as root (the kubelet and containerd manage mounts, namespaces and cgroups)"
  local t0
  t0="$(now)"
  ensure_packages
  ensure_tarball
  check_ports
  command -v node >/dev/null 2>&1 || die "node is needed (to read the apiserver's JSON)"
  [ -f "$SECCOMP_PROFILE" ] || die "seccomp profile $SECCOMP_PROFILE not found (HERMES_K8S_SECCOMP)"

  # From here on a failure tears down what was started (unless HERMES_K8S_KEEP_ON_FAILURE=1).
  trap on_up_exit EXIT
  mkdir -p "$STATE"
  chmod 700 "$STATE"
  mkdir -p "$BIN" "$LOGS" "$PIDS" "$STATE/seccomp" "$STATE/etcd" "$STATE/kubelet" \
    "$STATE/kubelet-volume-plugins" "$STATE/kcm-flexvolume"

  log "unpacking the node binaries and etcd"
  tar xzf "$TARBALL" -C "$STATE" bin/kube-apiserver bin/kube-controller-manager bin/kube-scheduler bin/kubelet bin/pause
  [ -z "$FIX_REFLECT2" ] || fix_reflect2
  if command -v etcd >/dev/null 2>&1; then
    ln -s "$(command -v etcd)" "$BIN/etcd"
  else
    local deb
    deb="$(find /var/cache/apt/archives -maxdepth 1 -name 'etcd-server_*.deb' | sort | tail -n1)"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$BIN" --strip-components=3 ./usr/bin/etcd
  fi
  cp "$SECCOMP_PROFILE" "$STATE/seccomp/"
  make_pki
  kubeconfig "$KUBECONFIG_ADMIN" admin
  kubeconfig "$STATE/kubelet.kubeconfig" kubelet-client
  kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
  kubeconfig "$STATE/scheduler.kubeconfig" scheduler

  start_proc etcd "$BIN/etcd" --name hermes --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "hermes=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new
  wait_for etcd "etcd answers on 127.0.0.1:$ETCD_PORT" \
    sh -c "curl -sf --max-time 2 http://127.0.0.1:$ETCD_PORT/health | grep -q '\"health\":\"true\"'"

  start_proc kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" --insecure-port=0 \
    --cert-dir="$PKI/apiserver-generated" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --anonymous-auth=false \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=Hostname \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=false --profiling=false \
    --endpoint-reconciler-type=none
  wait_for kube-apiserver "kube-apiserver ready on 127.0.0.1:$API_PORT" sh -c "[ \"\$(curl -sS --max-time 2 --cacert '$PKI/ca.crt' --cert '$PKI/admin.crt' --key '$PKI/admin.key' https://127.0.0.1:$API_PORT/readyz)\" = ok ]"

  start_proc kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --port=0 --leader-elect=false \
    --cert-dir="$PKI/controller-manager-generated" \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --use-service-account-credentials=true --flex-volume-plugin-dir="$STATE/kcm-flexvolume" --profiling=false
  start_proc kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$STATE/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --port=0 --leader-elect=false \
    --cert-dir="$PKI/scheduler-generated" --profiling=false

  write_containerd_config
  start_containerd

  # Record which of those host paths are ours to remove at `down`: for each, the topmost missing
  # ancestor (e.g. /var/lib/kubelet when it did not exist).
  : >"$HOST_PATHS_FILE"
  local p top
  for p in $HOST_PATHS; do
    top=""
    while [ ! -e "$p" ]; do top="$p"; p="$(dirname "$p")"; done
    [ -z "$top" ] || grep -qxF "$top" "$HOST_PATHS_FILE" || echo "$top" >>"$HOST_PATHS_FILE"
  done

  : >"$CGROUPS_FILE"
  for p in $(findmnt -rn -t cgroup,cgroup2 -o TARGET); do
    [ -e "$p/k8s.io" ] || echo "$p/k8s.io" >>"$CGROUPS_FILE"
  done

  start_kubelet

  import_images

  wait_for kube-controller-manager "kube-controller-manager healthy" \
    sh -c "[ \"\$(curl -sSk --max-time 2 https://127.0.0.1:$KCM_PORT/healthz)\" = ok ]"
  wait_for kube-scheduler "kube-scheduler healthy" \
    sh -c "[ \"\$(curl -sSk --max-time 2 https://127.0.0.1:$SCHEDULER_PORT/healthz)\" = ok ]"
  wait_for kubelet "node $NODE_NAME Ready and untainted" node_ready
  wait_for kube-controller-manager "ServiceAccount default/default exists" api /api/v1/namespaces/default/serviceaccounts/default

  trap - EXIT
  touch "$UP_MARKER"
  rm -rf "$STATE.failed-logs"
  log "up in $(since "$t0") s; kubeconfig: $KUBECONFIG_ADMIN"
  echo "$KUBECONFIG_ADMIN"
}

# ---------------------------------------------------------------------------------------------
# down

# Processes whose command line names our containerd socket: the shims (they outlive containerd).
our_shims() {
  local d pid cmd
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    cmd="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" || continue
    case "$cmd" in containerd-shim* | */containerd-shim*) ;; *) continue ;; esac
    case "$cmd" in *" -address $CTRD_SOCK "* | *" -address $CTRD_SOCK") echo "$pid" ;; esac
  done
  return 0
}

our_mounts() { # deepest first
  findmnt -rn -o TARGET | awk -v s="$STATE/" 'index($0, s) == 1' | sort -r
}

# Processes that name $STATE and are one of the binaries we run (not, say, a user's `tail -f` of a
# log in $STATE): TERM, then KILL.
kill_strays() {
  local d pid cmd
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    cmd="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" || continue
    case "$cmd" in *"$STATE/"*) ;; *) continue ;; esac
    case "${cmd%% *}" in "$STATE/bin/"* | containerd* | */containerd* | runc | */runc | runsc* | */runsc*) ;; *) continue ;; esac
    log "stray process $pid: $(printf '%s' "$cmd" | cut -c1-120)"
    stop_pid "$pid" 5
  done
}

do_down() {
  if [ ! -e "$STATE" ]; then
    log "not up (no $STATE): nothing to do"
    return 0
  fi
  local t0 pid m p
  t0="$(now)"
  rm -f "$UP_MARKER"
  # The kubelet first, so it restarts nothing; then every container and pod sandbox through
  # containerd, so runc removes their cgroups and the shims exit and unmount the rootfs.
  stop_proc kubelet 10
  if alive containerd; then
    local ids id i
    ids="$(ctr -a "$CTRD_SOCK" -n k8s.io tasks ls -q 2>/dev/null || true)"
    for id in $ids; do ctr -a "$CTRD_SOCK" -n k8s.io tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    # containerd's CRI deletes an exited task itself; delete what it has not within 5 s.
    for ((i = 0; i < 50; i++)); do
      [ -n "$(ctr -a "$CTRD_SOCK" -n k8s.io tasks ls -q 2>/dev/null)" ] || break
      sleep 0.1
    done
    for id in $(ctr -a "$CTRD_SOCK" -n k8s.io tasks ls -q 2>/dev/null || true); do
      timeout 20 ctr -a "$CTRD_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || log "could not delete task $id"
    done
  fi
  stop_proc kube-scheduler 10
  stop_proc kube-controller-manager 10
  stop_proc kube-apiserver 15
  stop_proc etcd 10
  stop_proc containerd 15
  # Shims left (containerd killed hard, or a task that would not delete): TERM, then KILL.
  for pid in $(our_shims); do stop_pid "$pid" 5; done
  # Anything else of ours still running (a runsc sandbox and its children, a runc or CNI child):
  # twice, as a killed runsc sandbox's children take a moment to go.
  kill_strays
  sleep 0.5
  kill_strays
  # Mounts under the state dir: pods' emptyDir tmpfs, containerd's netns bind mounts, any rootfs.
  for m in $(our_mounts); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"; done
  m="$(our_mounts)"
  [ -z "$m" ] || log "WARNING: mounts left under $STATE: $m"
  # Without QoS cgroups the pods' cgroups are /k8s.io/<id> (containerd's CRI namespace) in every
  # hierarchy; runc removed each container's own. Remove the /k8s.io that `up` recorded as new
  # (rmdir: only if empty, so another containerd's pods are never touched).
  if [ -f "$CGROUPS_FILE" ]; then
    # Deepest first: a container whose task could not be deleted (e.g. a runsc sandbox) leaves its
    # own cgroup, empty once its processes are gone.
    while read -r p; do
      [ -d "$p" ] || continue
      find "$p" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ ! -d "$p" ] || log "WARNING: could not remove cgroup $p"
    done <"$CGROUPS_FILE"
  fi
  # The host paths that `up` recorded as created by this cluster; and, where /var/lib/cni was
  # there before, libcni's cached results of our network (pods killed without a CNI DEL).
  rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null || true
  if [ -f "$HOST_PATHS_FILE" ]; then
    while read -r p; do
      case "$p" in
        /var/log/pods | /var/log/containers | /var/lib/kubelet | /var/lib/kubelet/device-plugins | /var/lib/cni | /var/lib/cni/results) rm -rf "$p" ;;
      esac
    done <"$HOST_PATHS_FILE"
  fi
  rm -rf "$STATE"
  log "down in $(since "$t0") s"
}

# A fault for the chaos tests: SIGKILL one node component (its pods' containers live on in their
# shims), then start it again with the flags `up` gave it.
do_fault() { # kill|start COMPONENT
  local what="$1" name="${2:-}"
  case "$name" in kubelet | containerd) ;; *) die "$what: a component is kubelet or containerd, not '$name'" ;; esac
  [ -f "$UP_MARKER" ] || die "the cluster is not up"
  case "$what" in
    kill)
      local pid
      pid="$(cat "$PIDS/$name.pid" 2>/dev/null)" || die "$name has no pid file"
      ours "$pid" || die "$name (pid $pid) is not running"
      kill -KILL "$pid"
      while ours "$pid"; do sleep 0.05; done
      log "$name (pid $pid) killed" ;;
    start)
      alive "$name" && die "$name is running"
      local t0; t0="$(now)"
      "start_$name"
      # Ready as the restarted kubelet reports it, not as the node object still said before.
      [ "$name" = kubelet ] && wait_for kubelet "node $NODE_NAME Ready (reported again) and untainted" node_ready "${t0%.*}"
      log "$name started again in $(since "$t0") s" ;;
  esac
}

case "${1:-}" in
  up) do_up ;;
  down) do_down ;;
  kill | start) do_fault "$1" "${2:-}" ;;
  status)
    if is_up; then echo "$KUBECONFIG_ADMIN"; else log "not up"; exit 1; fi ;;
  *)
    echo "usage: bash $0 up|down|status|kill COMPONENT|start COMPONENT   (see the header of this script)" >&2
    exit 2 ;;
esac
