#!/usr/bin/env bash
# Build the hermes-sandbox images:
#   hermes-sandbox/python:latest  hermes-sandbox/node:latest  hermes-sandbox/bash:latest  (the languages)
#   hermes-sandbox/python-data:latest  (numpy, pandas, matplotlib, scipy, ...; ~510 MB: not by default)
#
# usage: scripts/build-images.sh [--variant languages|data|all] [--base auto|registry|offline] [--rebuild]
#
#   --variant languages  (default) the three language images
#   --variant data   only hermes-sandbox/python-data, always offline: FROM hermes-sandbox/base-data:<suite>,
#                    built here with mmdebstrap from Debian's python3-numpy, -pandas, -matplotlib, ...
#                    (a registry's python:3.12-slim lacks Debian's python3-* packages); --base applies to the language images only
#   --variant all    both
#   --base registry  FROM python:3.12-slim / node:20-slim / debian:bookworm-slim (needs a registry)
#   --base offline   FROM hermes-sandbox/base:<suite>, built here from Debian packages with
#                    mmdebstrap + docker import (needs only an apt mirror)
#   --base auto      (default) registry if those bases are already local or a pull works within
#                    ~10 s; offline otherwise. An existing offline base is preferred over a pull.
#   --rebuild        rebuild the offline bases even if they exist (and re-pull registry bases)
#
# Environment: HERMES_SUITE (default: VERSION_CODENAME of /etc/os-release),
#              HERMES_DEBIAN_MIRROR (default: mmdebstrap's, deb.debian.org + updates + security),
#              HERMES_IMAGES_HEARTBEAT_S (default 10: while a step is silent, say so this often).
# Idempotent: with the images present it only re-runs `docker build`, which hits the cache.
# Progress: every line starts with [images +<elapsed>]; a long step (mmdebstrap: minutes on a busy
# host) shows its phases as they start and, while it is silent, a line every 10 s.
set -euo pipefail

now_ms() { if [ -n "${EPOCHREALTIME:-}" ]; then local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); else echo $(($(date +%s) * 1000)); fi; }
T0=$(now_ms)
elapsed() { local d=$(($(now_ms) - T0)); printf '%d.%ds' $((d / 1000)) $(((d % 1000) / 100)); }
step() { printf '[images +%s] %s\n' "$(elapsed)" "$*"; }
die() { printf '[images +%s] ERROR: %s\n' "$(elapsed)" "$*" >&2; exit 1; }

HEARTBEAT_S="${HERMES_IMAGES_HEARTBEAT_S:-10}"
case "$HEARTBEAT_S" in '' | *[!0-9]* | 0) echo "build-images: HERMES_IMAGES_HEARTBEAT_S must be a positive number of seconds (got '$HEARTBEAT_S')" >&2; exit 2 ;; esac

# quietly LABEL LOG COMMAND...: run COMMAND (no stdin) with its output in LOG, and show that it is
# alive: each phase line it logs (mmdebstrap's "I: downloading packages with apt...", "I: extracting
# archives...", ...) as "LABEL: <phase>", and, while nothing new is said, every HEARTBEAT_S seconds
# "LABEL: still <phase> (N s in it)". Returns COMMAND's exit status.
quietly() {
  local label=$1 log=$2 pid rc seen=0 n phase="" since said
  shift 2
  "$@" </dev/null >"$log" 2>&1 &
  pid=$!
  since=$(now_ms)
  said=$since
  relay() {
    n=$(wc -l <"$log")
    [ "$n" -gt "$seen" ] || return 0
    local line
    while IFS= read -r line; do
      case "$line" in
        I:\ *)
          phase=${line#I: }
          phase=${phase%...}
          step "  $label: ${phase:0:110}"
          since=$(now_ms)
          said=$since
          ;;
      esac
    done < <(sed -n "$((seen + 1)),${n}p" "$log")
    seen=$n
  }
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    relay
    if [ $(($(now_ms) - said)) -ge $((HEARTBEAT_S * 1000)) ]; then
      step "  $label: still ${phase:-running} ($((($(now_ms) - since) / 1000)) s in it)"
      said=$(now_ms)
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  relay
  return "$rc"
}

# build_progress IMAGE: `docker build`'s output (the classic builder's) on stdin, shown as each step
# that does work (cached steps and bare ARG/FROM lines are skipped) and, while a step is silent, a
# line every HEARTBEAT_S seconds naming it (a read that times out keeps what it read so far).
build_progress() {
  local img=$1 pending="" shown="" partial="" line since
  since=$(now_ms)
  on_line() {
    case "$1" in
      Step\ *)
        case "$pending" in "" | *" : ARG "* | *" : FROM "*) ;; *) step "  ${pending:0:110}"; shown=$pending ;; esac
        pending="$1"
        since=$(now_ms)
        ;;
      *"---> Using cache"*) pending="" ;;
      *) if [ -n "$pending" ]; then step "  ${pending:0:110}"; shown=$pending; pending=""; fi ;;
    esac
  }
  while :; do
    if IFS= read -r -t "$HEARTBEAT_S" line; then
      on_line "$partial$line"
      partial=""
    elif [ $? -gt 128 ]; then
      partial+=$line
      line=${pending:-$shown}
      step "  still building $img: ${line:0:80} ($((($(now_ms) - since) / 1000)) s in it)"
    else
      [ -z "$partial$line" ] || on_line "$partial$line"
      break
    fi
  done
}

# Sourced (the tests of quietly and build_progress): the functions above only.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi

# images/ is ../images from here: at the repository root, and in an installed @hermes-sandbox/docker,
# whose assets/ hold a copy of this script and of images/ in the same layout.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BASE_MODE=auto
VARIANT=languages
REBUILD=0
usage() { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) VARIANT="${2:-}"; shift 2 || { usage >&2; exit 2; } ;;
    --variant=*) VARIANT="${1#--variant=}"; shift ;;
    --base) BASE_MODE="${2:-}"; shift 2 || { usage >&2; exit 2; } ;;
    --base=*) BASE_MODE="${1#--base=}"; shift ;;
    --rebuild) REBUILD=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-images: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$BASE_MODE" in auto|registry|offline) ;; *) echo "build-images: --base must be auto, registry or offline (got '$BASE_MODE')" >&2; exit 2 ;; esac
case "$VARIANT" in languages|data|all) ;; *) echo "build-images: --variant must be languages, data or all (got '$VARIANT')" >&2; exit 2 ;; esac
WITH_LANGS=0; WITH_DATA=0
[ "$VARIANT" = data ] || WITH_LANGS=1
[ "$VARIANT" = languages ] || WITH_DATA=1

LANGS=(python node bash)
declare -A REGISTRY_BASE=([python]="python:3.12-slim" [node]="node:20-slim" [bash]="debian:bookworm-slim")
# python3-ipython: a session's Python kernel (hermes-run --kernel python; docs/design/kernel.md §15),
# with python3-matplotlib-inline for figures as displays. In the offline base only: a registry's
# python:3.12-slim has its own Python, which Debian's package does not serve (no kernel there).
OFFLINE_PACKAGES="python3,python3-ipython,nodejs,bash,coreutils,procps,util-linux,mount,iproute2,ca-certificates,passwd"
# The data image's base: the python image's packages (no nodejs: ~120 MB more for a python image)
# and what a data analyst reaches for first. apt installs no Recommends here.
DATA_PACKAGES="python3,python3-ipython,bash,coreutils,procps,util-linux,mount,iproute2,ca-certificates,passwd,python3-numpy,python3-pandas,python3-matplotlib,python3-pil,python3-scipy,python3-openpyxl,python3-seaborn,python3-sklearn,python3-statsmodels,python3-sympy,python3-tabulate,python3-lxml"
# Debian's python3-scipy (bookworm) depends on python3-pythran, a compiler that drags in g++, boost
# and OpenBLAS headers (~500 MB); scipy's compiled modules never use it at run time. This empty
# package provides it instead (python-data/no-pythran.control).
DATA_STUB_CONTROL=images/python-data/no-pythran.control
DATA_IMAGE=hermes-sandbox/python-data:latest

export DOCKER_BUILDKIT=0 # the classic builder: works on every engine/client pairing and prints "Step n/m" lines
if ! docker info >/dev/null 2>&1; then
  die "the Docker engine does not answer: start one ('sudo systemctl start docker'; in a checkout of the repository on Debian, as root: 'bash scripts/ensure-engine.sh')"
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
DATA_BASE="hermes-sandbox/base-data:${SUITE:-unknown}"
OLD_IDS=() # our own images this run superseded, removed at the end if nothing tags them any more

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
# An offline base is current when it exists and was built from today's package list (its key).
base_current() {
  [ "$(docker image inspect --format '{{index .Config.Labels "org.hermes-sandbox.base-packages"}}' "$1" 2>/dev/null)" = "$2" ]
}
all_registry_bases_local() { local l; for l in "${LANGS[@]}"; do image_exists "${REGISTRY_BASE[$l]}" || return 1; done; }
pull_quietly() { quietly "docker pull $1" "$WORKDIR/pull.log" timeout "${2:-600}" docker pull -q "$1"; }

# ensure_offline_base IMAGE PACKAGES KEY [mmdebstrap option...]: a Debian rootfs built with
# mmdebstrap (an apt mirror, no registry) and `docker import`ed as IMAGE, unless it is current.
ensure_offline_base() {
  local image=$1 packages=$2 key=$3
  shift 3
  if [ "$REBUILD" = 0 ] && base_current "$image" "$key"; then
    step "offline base $image exists (use --rebuild to rebuild it)"
    return
  fi
  [ -n "$SUITE" ] || die "cannot tell the Debian suite (no VERSION_CODENAME in /etc/os-release); set HERMES_SUITE=bookworm (or similar)"
  if [ "$REBUILD" = 0 ] && image_exists "$image"; then step "offline base $image predates the current package list; rebuilding it"; fi
  local old
  old=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is missing: 'apt-get install mmdebstrap' (Debian)"
  local mirrors=() hooks=()
  [ -n "${HERMES_DEBIAN_MIRROR:-}" ] && mirrors=("$HERMES_DEBIAN_MIRROR")
  # merged /usr the debootstrap way (installs usr-is-merged); otherwise apt satisfies
  # init-system-helpers with the usrmerge package, which drags in perl (~50 MB).
  [ -d /usr/share/mmdebstrap/hooks/maybe-merged-usr ] && hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/maybe-merged-usr)
  local log="$WORKDIR/mmdebstrap-${image//[\/:]/-}.log" rootfs="$WORKDIR/rootfs.tar"
  step "building offline base $image: mmdebstrap --variant=apt $SUITE (+ $packages); log: $log"
  step "  (minutes: about 1.5 on an idle host, 9 on a busy 2-core one; its phases and a line every ${HEARTBEAT_S} s follow)"
  if ! quietly mmdebstrap "$log" mmdebstrap --variant=apt --include="$packages" "$@" ${hooks[@]+"${hooks[@]}"} \
      --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      "$SUITE" "$rootfs" ${mirrors[@]+"${mirrors[@]}"}; then
    tail -30 "$log" >&2
    die "mmdebstrap failed (is a Debian apt mirror reachable? set HERMES_DEBIAN_MIRROR to use another one)"
  fi
  step "mmdebstrap done: rootfs $(du -h "$rootfs" | cut -f1); docker import"
  quietly "docker import" "$WORKDIR/import.log" docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["bash"]' \
    --change "LABEL org.hermes-sandbox.base-suite=$SUITE org.hermes-sandbox.base-packages=$key" \
    --message "hermes-sandbox offline base: mmdebstrap --variant=apt $SUITE" \
    "$rootfs" "$image" || { tail -20 "$WORKDIR/import.log" >&2; die "docker import of $image failed"; }
  rm -f "$rootfs"
  step "imported $image"
  if [ -n "$old" ]; then OLD_IDS+=("$old"); fi
}

# ---- the language images' base -----------------------------------------------------------
if [ "$WITH_LANGS" = 1 ]; then
  if [ "$BASE_MODE" = auto ]; then
    if all_registry_bases_local; then
      BASE_MODE=registry; step "base: registry images are present locally"
    elif [ "$REBUILD" = 0 ] && [ -n "$SUITE" ] && base_current "$OFFLINE_BASE" "$OFFLINE_PACKAGES"; then
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
    ensure_offline_base "$OFFLINE_BASE" "$OFFLINE_PACKAGES" "$OFFLINE_PACKAGES"
    BASE_DESC="offline ($OFFLINE_BASE)"
  fi
fi

# ---- the data image's base: always offline (Debian's python3-* packages) -------------------
if [ "$WITH_DATA" = 1 ]; then
  command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb is missing (the data image is built from Debian packages, on a Debian host)"
  # What the data base is built from: its package list and the stand-in's control file.
  DATA_BASE_KEY="$DATA_PACKAGES;no-pythran:$(sha256sum "$DATA_STUB_CONTROL" | cut -c1-12)"
  mkdir -p "$WORKDIR/no-pythran/DEBIAN"
  cp "$DATA_STUB_CONTROL" "$WORKDIR/no-pythran/DEBIAN/control"
  dpkg-deb --root-owner-group --build "$WORKDIR/no-pythran" "$WORKDIR/no-pythran.deb" >/dev/null || die "dpkg-deb could not build the python3-pythran stand-in"
  # apt hands dpkg (inside the chroot) the .deb's path as given, so the stand-in is copied to the same
  # path inside, and removed again (a copy, not the file-mirror-automount hook's bind mount, which a
  # failed run leaves mounted).
  export HERMES_STUB_DIR="$WORKDIR"
  # After installing: the libraries' own test suites (pandas/tests, scipy/*/tests, ... ~180 MB with
  # their byte code) are never imported by a program; a dpkg path-exclude cannot drop them, since the
  # packages' postinst byte-compiles every .py they list. /usr/share/unicode (~37 MB) is there only
  # for python3-fonttools' dependency on unicode-data; nothing in the image reads it.
  ensure_offline_base "$DATA_BASE" "$DATA_PACKAGES" "$DATA_BASE_KEY" \
    --include="$WORKDIR/no-pythran.deb" \
    --setup-hook='mkdir -p "$1$HERMES_STUB_DIR" && cp "$HERMES_STUB_DIR/no-pythran.deb" "$1$HERMES_STUB_DIR/"' \
    --customize-hook='rm -rf "$1$HERMES_STUB_DIR"' \
    --customize-hook='find "$1/usr/lib/python3/dist-packages" -depth -type d -name tests -exec rm -rf {} +' \
    --dpkgopt='path-exclude=/usr/share/unicode/*'
  DATA_DESC="offline ($DATA_BASE)"
  if [ "$WITH_LANGS" = 1 ]; then BASE_DESC="$BASE_DESC; python-data: $DATA_DESC"; else BASE_DESC="$DATA_DESC"; fi
fi

# ---- the supervisor (images/runner/*.c), one static binary for every image -------------------
# Static, so it runs in any image whatever its libc; compiled here because the offline base has no
# compiler. Built by its one build rule, images/runner/Makefile (make rebuilds it when a source is
# newer). gcc, the static C library and make come from Debian (gcc, libc6-dev, make) when missing.
RUNNER=images/runner
SUPERVISOR=build/hermes-run
# The build context. Run from an installed @hermes-sandbox/docker (its assets/ hold this script
# and images/) the package may be read-only: then the supervisor is compiled into a copy of images/.
CONTEXT=images
if ! { mkdir -p "$RUNNER/build" 2>/dev/null && [ -w "$RUNNER/build" ]; }; then
  CONTEXT="$WORKDIR/context"
  mkdir -p "$CONTEXT"
  cp -R images/. "$CONTEXT/"
  RUNNER="$CONTEXT/runner"
  step "images/ is read-only here; building from a copy in $CONTEXT"
fi
if ! command -v gcc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1 || [ ! -e /usr/lib/x86_64-linux-gnu/libc.a ] && [ ! -e /usr/lib/aarch64-linux-gnu/libc.a ] && [ ! -e /usr/lib/libc.a ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing gcc, libc6-dev and make from Debian (to compile the supervisor)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev make >"$WORKDIR/apt.log" 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev make >"$WORKDIR/apt.log" 2>&1; } ||
      { tail -20 "$WORKDIR/apt.log" >&2; die "could not install gcc, libc6-dev and make"; }
  else
    die "compiling the supervisor needs gcc, a static C library and make (Debian: apt-get install gcc libc6-dev make)"
  fi
fi
if ! make -q -C "$RUNNER" >/dev/null 2>&1; then
  make -s --no-print-directory -C "$RUNNER" || die "compiling the supervisor ($RUNNER/Makefile) failed"
  step "compiled the supervisor $RUNNER/$SUPERVISOR ($(wc -c < "$RUNNER/$SUPERVISOR") bytes)"
fi
# What the supervisor can do beyond runner protocol 2's base, from the same table as its code
# (protocol.h, generated from packages/core/src/RunnerProtocolTable.ts): each image says it in a
# label, and the SDK refuses a request that needs a feature its image lacks before creating anything.
FEATURES="$(sed -n 's/^#define HERMES_RUNNER_FEATURES "\([a-z,]*\)"$/\1/p' "$RUNNER/protocol.h")"
[ -n "$FEATURES" ] || die "$RUNNER/protocol.h names no HERMES_RUNNER_FEATURES (run 'pnpm codegen')"
FEATURES_LABEL="org.hermes-sandbox.runner-features=$FEATURES"

# ---- build the images ----------------------------------------------------------------------
# build_image IMAGE DOCKERFILE-DIR BASE: `docker build` (no network: everything is in the base).
build_image() {
  local img=$1 dir=$2 base=$3
  # Built on one of our offline bases, the image has Debian's IPython: it can run a session's kernel
  # (the SDK refuses runCell early on an image without this label).
  local kernel_label=()
  if [ "$base" = "$OFFLINE_BASE" ] || [ "$base" = "${DATA_BASE:-}" ]; then kernel_label=(--label org.hermes-sandbox.kernel=python); fi
  step "building $img FROM $base"
  local log="$WORKDIR/build-$dir.log" before after rc
  before=$(docker image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)
  set +e
  docker build --network none --build-arg "BASE=$base" --label "$FEATURES_LABEL" ${kernel_label[@]+"${kernel_label[@]}"} -t "$img" -f "$CONTEXT/$dir/Dockerfile" "$CONTEXT" 2>&1 | tee "$log" | build_progress "$img"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" != 0 ]; then tail -40 "$log" >&2; die "docker build of $img failed (exit $rc)"; fi
  after=$(docker image inspect --format '{{.Id}}' "$img")
  if [ "$before" = "$after" ]; then
    step "$img unchanged (every step from the build cache)"
  else
    step "$img built ($(grep -c 'Using cache' "$log" || true) steps from cache)"
    if [ -n "$before" ]; then OLD_IDS+=("$before"); fi
  fi
  BUILT+=("$img")
}

BUILT=()
if [ "$WITH_LANGS" = 1 ]; then
  for l in "${LANGS[@]}"; do
    if [ "$BASE_MODE" = registry ]; then base="${REGISTRY_BASE[$l]}"; else base="$OFFLINE_BASE"; fi
    build_image "hermes-sandbox/$l:latest" "$l" "$base"
  done
fi
if [ "$WITH_DATA" = 1 ]; then build_image "$DATA_IMAGE" python-data "$DATA_BASE"; fi

# Drop what this script superseded (our own previous images, now untagged); never prune others'.
# Newest first: an old base goes once the old images built FROM it are gone.
for ((i = ${#OLD_IDS[@]} - 1; i >= 0; i--)); do
  id=${OLD_IDS[i]}
  if [ -z "$(docker image inspect --format '{{join .RepoTags ","}}' "$id" 2>/dev/null)" ]; then
    docker image rm "$id" >/dev/null 2>&1 && step "removed superseded image ${id:7:12}" || true
  fi
done

step "done. base: $BASE_DESC"
echo "[images] base: $BASE_DESC"
for img in "${BUILT[@]}"; do
  size=$(docker image inspect --format '{{.Size}}' "$img")
  printf '[images] image %s (%s MB, %s)\n' "$img" "$((size / 1000000))" "$(docker image inspect --format '{{.Id}}' "$img" | cut -c1-19)"
done
