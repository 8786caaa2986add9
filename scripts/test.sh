#!/usr/bin/env bash
# The test suite on a fresh machine: set up, run every test of every tier (unit, journal, engine,
# heavy, cluster, and the warm-pool variants: scripts/test-tiers.sh), then check that no
# hermes-sandbox-* container, private engine, database, sshd or cluster was left behind.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# An engine this script starts is stopped when it ends (HERMES_KEEP_ENGINE=1 keeps it for reruns);
# one that was already running is left as it was.
engine_was_up=""
docker info >/dev/null 2>&1 && engine_was_up=1
stop_engine() {
  [ -n "$engine_was_up" ] || [ "${HERMES_KEEP_ENGINE:-}" = 1 ] || [ ! -f /var/run/docker.pid ] && return 0
  local pid
  pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || { echo "stopped the engine this run started" >&2; return 0; }; sleep 0.5; done
  echo "the engine (pid $pid) did not stop within 30 s" >&2
}
trap stop_engine EXIT
# The data-science image too (test/python-data-image.e2e.test.ts); cached after the first build.
HERMES_IMAGE_VARIANT=all bash scripts/setup.sh
# Test-only tools: mkfs.xfs for the private engine on XFS (test/chaos/xfs-storage.test.ts);
# rootlesskit and newuidmap for the rootless engine (test/chaos/rootless.test.ts); PostgreSQL
# for the Postgres journal's throwaway cluster (test/postgres-global-setup.ts); sshd and openssl
# for the engine reached over ssh and TLS on loopback (test/remote); pyflakes and shellcheck for the
# lint of the programs that run inside sandboxes (scripts/test-tiers.sh, check); clang and libFuzzer's
# runtime for the supervisor's fuzzers (scripts/fuzz-supervisor.sh); chromium for the dashboard's
# browser test (test/dashboard.e2e.test.ts, driven by playwright-core: it never downloads a browser).
missing=""
command -v mkfs.xfs >/dev/null 2>&1 || missing="$missing xfsprogs"
command -v rootlesskit >/dev/null 2>&1 || missing="$missing rootlesskit"
command -v newuidmap >/dev/null 2>&1 || missing="$missing uidmap"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
[ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
command -v pyflakes3 >/dev/null 2>&1 || missing="$missing pyflakes3"
command -v shellcheck >/dev/null 2>&1 || missing="$missing shellcheck"
command -v clang-14 >/dev/null 2>&1 || missing="$missing clang-14"
[ -x /usr/bin/chromium ] || missing="$missing chromium"
# The cluster tier's one-node Kubernetes (scripts/kubernetes-local.sh, which also downloads etcd-server's
# .deb without installing it): containerd, runc and the CNI plugins, and bspatch for its binaries.
command -v containerd >/dev/null 2>&1 || missing="$missing containerd"
command -v runc >/dev/null 2>&1 || missing="$missing runc"
[ -x /usr/lib/cni/loopback ] || missing="$missing containernetworking-plugins"
command -v bspatch >/dev/null 2>&1 || missing="$missing bsdiff"
ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || missing="$missing libclang-rt-14-dev"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf '\n==== installing test-only packages:%s\n' "$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    # The packages' own services (a system sshd on port 22, a system PostgreSQL cluster) must not
    # start: the tests start their own, on loopback only. policy-rc.d 101 = "action not allowed".
    policy_rc=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy_rc=1
    fi
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >/tmp/hermes-sandbox-apt-test.log 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq $missing >/tmp/hermes-sandbox-apt-test.log 2>&1; } ||
      { [ -n "$policy_rc" ] && rm -f /usr/sbin/policy-rc.d; tail -20 /tmp/hermes-sandbox-apt-test.log >&2; exit 1; }
    [ -n "$policy_rc" ] && rm -f /usr/sbin/policy-rc.d
  else
    echo "missing test-only packages:$missing (Debian: apt-get install$missing); install them and run this again." >&2
    exit 1
  fi
fi
printf '\n==== tests (pnpm test: every tier, scripts/test-tiers.sh)\n' >&2
set +e
npx -y pnpm@10.34.0 test
rc=$?
set -e
left="$(docker ps -aq --filter name=hermes-sandbox-)"
if [ -n "$left" ]; then
  echo "hermes-sandbox-* containers left behind:" >&2
  docker ps -a --filter name=hermes-sandbox- --format '  {{.ID}}  {{.Names}}  {{.Status}}' >&2
  exit 1
fi
echo "no hermes-sandbox-* container left behind" >&2
# Nor a process a test started: a private engine (/tmp/hsd-*), a PostgreSQL cluster or an sshd.
strays="$(pgrep -af 'dockerd.*/tmp/hsd-|postgres.*/tmp/|sshd.*/tmp/|/tmp/hermes-k8s' | grep -v pgrep || true)"
if [ -n "$strays" ]; then
  printf 'processes left behind by the tests:\n%s\n' "$strays" >&2
  exit 1
fi
if bash scripts/kubernetes-local.sh status >/dev/null 2>&1 || [ -e /tmp/hermes-k8s ]; then
  echo "the cluster tier's Kubernetes (/tmp/hermes-k8s) was left behind" >&2
  exit 1
fi
echo "no private engine, database, sshd or cluster left behind" >&2
exit "$rc"
