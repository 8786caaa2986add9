#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run a few snippets in sandboxes and print what happened.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec npx tsx examples/quickstart.ts
