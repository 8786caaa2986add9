#!/usr/bin/env bash
# Make sure a Docker engine answers, installing and starting one when we may.
# Idempotent: an engine that already answers is used as it is. On Debian as root
# it installs docker.io (+ mmdebstrap, runsc), registers gVisor and starts dockerd;
# elsewhere it says exactly what is missing and how to get it.
set -euo pipefail
log() { printf '[engine] %s\n' "$*" >&2; }

if docker info >/dev/null 2>&1; then log "engine answers: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null)"; exit 0; fi

is_debian_root() { [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null; }

# docker-compose only validates examples/docker-compose.sandbox.yml in the tests; the SDK does not need it.
if ! command -v dockerd >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1 || ! command -v runsc >/dev/null 2>&1 || ! command -v docker-compose >/dev/null 2>&1; then
  if is_debian_root; then
    log "installing docker.io, mmdebstrap, runsc and docker-compose from Debian (about a minute)…"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io mmdebstrap runsc docker-compose >/tmp/hermes-sandbox-apt.log 2>&1 || { tail -20 /tmp/hermes-sandbox-apt.log >&2; exit 1; }
  elif ! command -v dockerd >/dev/null 2>&1; then
    log "no Docker engine found. Install one (Debian/Ubuntu: 'sudo apt-get install docker.io'; elsewhere: https://docs.docker.com/engine/install/), start it, and run this again."
    exit 1
  fi
fi

# Register gVisor (optional runtime) before the engine starts; --network=none is required on these hosts.
if command -v runsc >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  mkdir -p /etc/docker
  if [ ! -s /etc/docker/daemon.json ] || ! grep -q runsc /etc/docker/daemon.json; then
    log "registering gVisor runtime 'runsc' in /etc/docker/daemon.json"
    echo '{"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}}' > /etc/docker/daemon.json
  fi
fi

if [ "$(id -u)" != 0 ]; then
  log "the engine does not answer and starting dockerd needs root: run 'sudo dockerd &' (or 'sudo systemctl start docker') and try again."
  exit 1
fi

# A dockerd killed with SIGKILL leaves its pidfile (and containerd's) behind; that blocks the next start.
for pidfile in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
  if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null; then
    log "removing stale $pidfile"; rm -f "$pidfile"
  fi
done

if ! pgrep -x dockerd >/dev/null; then
  log "starting dockerd (log: /var/log/hermes-sandbox-dockerd.log)"
  nohup dockerd >/var/log/hermes-sandbox-dockerd.log 2>&1 &
fi
for i in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then log "engine up after ${i}x0.5s: $(docker version --format '{{.Server.Version}}')"; exit 0; fi
  sleep 0.5
done
log "dockerd did not answer within 30 s; last log lines:"; tail -20 /var/log/hermes-sandbox-dockerd.log >&2 || true
exit 1
