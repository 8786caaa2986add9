#!/usr/bin/env bash
# The local cluster's own CPU while idle: utime+stime of its six processes (scripts/kubernetes-local.sh's
# pid files) over SECONDS (default 30), as CPU-seconds and % of one core.
#   bash bench/kubernetes-idle.sh [SECONDS]      (the cluster up, nothing running on it)
set -euo pipefail
seconds="${1:-30}"
state="${HERMES_K8S_STATE:-/tmp/hermes-k8s}"
hz="$(getconf CLK_TCK)"
snap() {
  for n in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet; do
    pid="$(cat "$state/pids/$n.pid")"
    echo "$n $(awk '{print $14 + $15}' "/proc/$pid/stat")"
  done
}
before="$(snap)"
sleep "$seconds"
after="$(snap)"
join <(echo "$before") <(echo "$after") | awk -v s="$seconds" -v hz="$hz" '
  { d = ($3 - $2) / hz; t += d; printf "%-24s %6.2f CPU-s %5.1f %%\n", $1, d, 100 * d / s }
  END { printf "total %.2f CPU-s over %d s = %.1f %% of a core\n", t, s, 100 * t / s }'
