#!/usr/bin/env bash
# Build the hermes-sandbox language images:
#   hermes-sandbox/python:latest  hermes-sandbox/node:latest  hermes-sandbox/bash:latest
#
# usage: scripts/build-images.sh [--base auto|registry|offline] [--rebuild]
#
#   --base registry  FROM python:3.12-slim / node:20-slim / debian:bookworm-slim (needs a registry)
#   --base offline   FROM hermes-sandbox/base:<suite>, built here from Debian packages with
#                    mmdebstrap + docker import (needs only an apt mirror)
#   --base auto      (default) registry if those bases are already local or a pull works within
#                    ~10 s; offline otherwise. An existing offline base is preferred over a pull.
#   --rebuild        rebuild the offline base even if it exists (and re-pull registry bases)
#
# Environment: HERMES_SUITE (default: VERSION_CODENAME of /etc/os-release),
#              HERMES_DEBIAN_MIRROR (default: mmdebstrap's, deb.debian.org + updates + security).
# Idempotent: with the images present it only re-runs `docker build`, which hits the cache.
set -euo pipefail

# images/ is ../images from here: at the repository root, and in an installed @hermes-sandbox/docker,
# whose assets/ hold a copy of this script and of images/ in the same layout.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BASE_MODE=auto
REBUILD=0
usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE_MODE="${2:-}"; shift 2 || { usage >&2; exit 2; } ;;
    --base=*) BASE_MODE="${1#--base=}"; shift ;;
    --rebuild) REBUILD=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-images: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$BASE_MODE" in auto|registry|offline) ;; *) echo "build-images: --base must be auto, registry or offline (got '$BASE_MODE')" >&2; exit 2 ;; esac

LANGS=(python node bash)
declare -A REGISTRY_BASE=([python]="python:3.12-slim" [node]="node:20-slim" [bash]="debian:bookworm-slim")
OFFLINE_PACKAGES="python3,nodejs,bash,coreutils,procps,util-linux,mount,iproute2,ca-certificates,passwd"

now_ms() { if [ -n "${EPOCHREALTIME:-}" ]; then local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); else echo $(($(date +%s) * 1000)); fi; }
T0=$(now_ms)
elapsed() { local d=$(($(now_ms) - T0)); printf '%d.%ds' $((d / 1000)) $(((d % 1000) / 100)); }
step() { printf '[images +%s] %s\n' "$(elapsed)" "$*"; }
die() { printf '[images +%s] ERROR: %s\n' "$(elapsed)" "$*" >&2; exit 1; }

export DOCKER_BUILDKIT=0 # the classic builder: works on every engine/client pairing and prints "Step n/m" lines
if ! docker info >/dev/null 2>&1; then
  die "the Docker engine does not answer; run 'bash scripts/ensure-engine.sh' first"
fi

# One build at a time on this host (CI and a developer, or two test workers).
WORKDIR="$(mktemp -d "${TMPDIR:-/var/tmp}/hermes-images.XXXXXX")"
trap 'rm -rf "$WORKDIR"' EXIT
if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/hermes-sandbox-build-images.lock"
  if ! flock -n 9; then step "another build-images.sh is running; waiting for it"; flock 9; fi
fi

SUITE="${HERMES_SUITE:-}"
if [ -z "$SUITE" ] && [ -r /etc/os-release ]; then SUITE="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"; fi
OFFLINE_BASE="hermes-sandbox/base:${SUITE:-unknown}"

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
# The offline base is current when it exists and was built from today's package list.
offline_base_current() {
  [ "$(docker image inspect --format '{{index .Config.Labels "org.hermes-sandbox.base-packages"}}' "$OFFLINE_BASE" 2>/dev/null)" = "$OFFLINE_PACKAGES" ]
}
all_registry_bases_local() { local l; for l in "${LANGS[@]}"; do image_exists "${REGISTRY_BASE[$l]}" || return 1; done; }
pull_quietly() { timeout "${2:-600}" docker pull -q "$1" >"$WORKDIR/pull.log" 2>&1; }

# ---- choose the base ---------------------------------------------------------------------
if [ "$BASE_MODE" = auto ]; then
  if all_registry_bases_local; then
    BASE_MODE=registry; step "base: registry images are present locally"
  elif [ "$REBUILD" = 0 ] && [ -n "$SUITE" ] && offline_base_current; then
    BASE_MODE=offline; step "base: offline base $OFFLINE_BASE is present locally"
  elif pull_quietly "${REGISTRY_BASE[python]}" 10; then
    BASE_MODE=registry; step "base: registry reachable (pulled ${REGISTRY_BASE[python]})"
  else
    BASE_MODE=offline; step "base: no registry reachable ($(head -c 160 "$WORKDIR/pull.log" | tr '\n' ' ')); building offline"
  fi
fi

if [ "$BASE_MODE" = registry ]; then
  for l in "${LANGS[@]}"; do
    b="${REGISTRY_BASE[$l]}"
    if [ "$REBUILD" = 1 ] || ! image_exists "$b"; then
      step "pulling $b"
      pull_quietly "$b" || { cat "$WORKDIR/pull.log" >&2; die "docker pull $b failed (no registry? try --base offline)"; }
    fi
  done
  BASE_DESC="registry (${REGISTRY_BASE[python]}, ${REGISTRY_BASE[node]}, ${REGISTRY_BASE[bash]})"
else
  [ -n "$SUITE" ] || die "cannot tell the Debian suite (no VERSION_CODENAME in /etc/os-release); set HERMES_SUITE=bookworm (or similar)"
  if [ "$REBUILD" = 1 ] || ! offline_base_current; then
    if [ "$REBUILD" = 0 ] && image_exists "$OFFLINE_BASE"; then step "offline base $OFFLINE_BASE predates the current package list; rebuilding it"; fi
    OLD_BASE_ID=$(docker image inspect --format '{{.Id}}' "$OFFLINE_BASE" 2>/dev/null || true)
    command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is missing: 'apt-get install mmdebstrap' (scripts/ensure-engine.sh installs it on Debian)"
    mirrors=()
    [ -n "${HERMES_DEBIAN_MIRROR:-}" ] && mirrors=("$HERMES_DEBIAN_MIRROR")
    # merged /usr the debootstrap way (installs usr-is-merged); otherwise apt satisfies
    # init-system-helpers with the usrmerge package, which drags in perl (~50 MB).
    hooks=()
    [ -d /usr/share/mmdebstrap/hooks/maybe-merged-usr ] && hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/maybe-merged-usr)
    step "building offline base $OFFLINE_BASE: mmdebstrap --variant=apt $SUITE (+ $OFFLINE_PACKAGES); log: $WORKDIR/mmdebstrap.log"
    if ! mmdebstrap --variant=apt --include="$OFFLINE_PACKAGES" ${hooks[@]+"${hooks[@]}"} \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        "$SUITE" "$WORKDIR/rootfs.tar" ${mirrors[@]+"${mirrors[@]}"} </dev/null >"$WORKDIR/mmdebstrap.log" 2>&1; then
      tail -30 "$WORKDIR/mmdebstrap.log" >&2
      die "mmdebstrap failed (is a Debian apt mirror reachable? set HERMES_DEBIAN_MIRROR to use another one)"
    fi
    step "mmdebstrap done: rootfs $(du -h "$WORKDIR/rootfs.tar" | cut -f1); docker import"
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["bash"]' \
      --change "LABEL org.hermes-sandbox.base-suite=$SUITE org.hermes-sandbox.base-packages=$OFFLINE_PACKAGES" \
      --message "hermes-sandbox offline base: mmdebstrap --variant=apt $SUITE" \
      "$WORKDIR/rootfs.tar" "$OFFLINE_BASE" >/dev/null
    rm -f "$WORKDIR/rootfs.tar"
    step "imported $OFFLINE_BASE"
  else
    step "offline base $OFFLINE_BASE exists (use --rebuild to rebuild it)"
  fi
  BASE_DESC="offline ($OFFLINE_BASE)"
fi

# ---- the supervisor (images/runner/hermes-run.c), one static binary for every image ----------
# Static, so it runs in any image whatever its libc; compiled here because the offline base has no
# compiler. gcc and the static C library come from Debian (gcc, libc6-dev) when missing.
SUPERVISOR_SRC=images/runner/hermes-run.c
SUPERVISOR=images/runner/build/hermes-run
# The build context. Run from an installed @hermes-sandbox/docker (its assets/ hold this script
# and images/) the package may be read-only: then the supervisor is compiled into a copy of images/.
CONTEXT=images
if ! { mkdir -p "$(dirname "$SUPERVISOR")" 2>/dev/null && [ -w "$(dirname "$SUPERVISOR")" ]; }; then
  CONTEXT="$WORKDIR/context"
  mkdir -p "$CONTEXT"
  cp -R images/. "$CONTEXT/"
  SUPERVISOR="$CONTEXT/runner/build/hermes-run"
  step "images/ is read-only here; building from a copy in $CONTEXT"
fi
if ! command -v gcc >/dev/null 2>&1 || [ ! -e /usr/lib/x86_64-linux-gnu/libc.a ] && [ ! -e /usr/lib/aarch64-linux-gnu/libc.a ] && [ ! -e /usr/lib/libc.a ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing gcc and libc6-dev from Debian (to compile the supervisor)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >"$WORKDIR/apt.log" 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >"$WORKDIR/apt.log" 2>&1; } ||
      { tail -20 "$WORKDIR/apt.log" >&2; die "could not install gcc and libc6-dev"; }
  else
    die "compiling the supervisor needs gcc and a static C library (Debian: apt-get install gcc libc6-dev)"
  fi
fi
if [ ! -x "$SUPERVISOR" ] || [ "$SUPERVISOR_SRC" -nt "$SUPERVISOR" ]; then
  mkdir -p "$(dirname "$SUPERVISOR")"
  gcc -static -O2 -s -Wall -Wextra -Werror -o "$SUPERVISOR.tmp" "$SUPERVISOR_SRC" || die "compiling $SUPERVISOR_SRC failed"
  mv -f "$SUPERVISOR.tmp" "$SUPERVISOR"
  step "compiled the supervisor $SUPERVISOR ($(wc -c < "$SUPERVISOR") bytes)"
fi

# ---- build the language images -----------------------------------------------------------
OLD_IDS=()
for l in "${LANGS[@]}"; do
  if [ "$BASE_MODE" = registry ]; then base="${REGISTRY_BASE[$l]}"; else base="$OFFLINE_BASE"; fi
  img="hermes-sandbox/$l:latest"
  step "building $img FROM $base"
  log="$WORKDIR/build-$l.log"
  before=$(docker image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)
  set +e
  docker build --network none --build-arg "BASE=$base" -t "$img" -f "$CONTEXT/$l/Dockerfile" "$CONTEXT" 2>&1 | tee "$log" | {
    # Show each step that does work (cached steps and bare ARG lines are skipped).
    pending=""
    while IFS= read -r line; do
      case "$line" in
        Step\ *)
          case "$pending" in "" | *" : ARG "* | *" : FROM "*) ;; *) printf '[images +%s]   %s\n' "$(elapsed)" "${pending:0:110}" ;; esac
          pending="$line" ;;
        *"---> Using cache"*) pending="" ;;
        *) if [ -n "$pending" ]; then printf '[images +%s]   %s\n' "$(elapsed)" "${pending:0:110}"; pending=""; fi ;;
      esac
    done
  }
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" != 0 ]; then tail -40 "$log" >&2; die "docker build of $img failed (exit $rc)"; fi
  after=$(docker image inspect --format '{{.Id}}' "$img")
  if [ "$before" = "$after" ]; then
    step "$img unchanged (every step from the build cache)"
  else
    step "$img built ($(grep -c 'Using cache' "$log" || true) steps from cache)"
    [ -n "$before" ] && OLD_IDS+=("$before")
  fi
done

# Drop what this script superseded (our own previous images, now untagged); never prune others'.
if [ -n "${OLD_BASE_ID:-}" ]; then OLD_IDS+=("$OLD_BASE_ID"); fi
for id in ${OLD_IDS[@]+"${OLD_IDS[@]}"}; do
  if [ -z "$(docker image inspect --format '{{join .RepoTags ","}}' "$id" 2>/dev/null)" ]; then
    docker image rm "$id" >/dev/null 2>&1 && step "removed superseded image ${id:7:12}" || true
  fi
done

step "done. base: $BASE_DESC"
echo "[images] base: $BASE_DESC"
for l in "${LANGS[@]}"; do
  img="hermes-sandbox/$l:latest"
  size=$(docker image inspect --format '{{.Size}}' "$img")
  printf '[images] image %s (%s MB, %s)\n' "$img" "$((size / 1000000))" "$(docker image inspect --format '{{.Id}}' "$img" | cut -c1-19)"
done
