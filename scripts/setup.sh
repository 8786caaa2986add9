#!/usr/bin/env bash
# Everything the SDK needs on this machine, idempotent and with progress:
# a Docker engine (installed and started on Debian as root), the workspace's
# dependencies, and the sandbox images. Elsewhere it says what is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
T0=$(date +%s)
step() { printf '\n==== [+%ds] %s\n' "$(($(date +%s) - T0))" "$*" >&2; }

if ! command -v node >/dev/null 2>&1; then
  echo "Node.js 20+ is needed: install it (Debian: apt-get install nodejs npm) and run this again." >&2
  exit 1
fi

step "engine (scripts/ensure-engine.sh)"
bash scripts/ensure-engine.sh

step "dependencies (pnpm install)"
if [ -f pnpm-lock.yaml ]; then
  npx -y pnpm@10.34.0 install --frozen-lockfile --reporter=append-only
else
  npx -y pnpm@10.34.0 install --reporter=append-only
fi

# HERMES_IMAGE_VARIANT: languages (default: python, node, bash), data (hermes-sandbox/python-data,
# ~510 MB) or all; scripts/test.sh asks for all, since the suite runs the data image too.
variant="${HERMES_IMAGE_VARIANT:-languages}"
step "sandbox images (scripts/build-images.sh --variant $variant)"
bash scripts/build-images.sh --variant "$variant"
step "ready"
