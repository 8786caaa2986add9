#!/usr/bin/env bash
# The test suite on a fresh machine: set up, run every test (unit, property and
# real-engine), then check that no hermes-sandbox-* container was left behind.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
printf '\n==== seccomp profile matches its derivation\n' >&2
npx tsx packages/docker/seccomp/build-profile.ts --check
printf '\n==== tests (pnpm test)\n' >&2
set +e
npx -y pnpm@10.34.0 test
rc=$?
# The same real-engine and hostile suites again, with every executor keeping a warm pool.
printf '\n==== tests with the warm pool on (pnpm test:pool)\n' >&2
npx -y pnpm@10.34.0 test:pool
pool_rc=$?
[ "$rc" = 0 ] && rc=$pool_rc
set -e
left="$(docker ps -aq --filter name=hermes-sandbox-)"
if [ -n "$left" ]; then
  echo "hermes-sandbox-* containers left behind:" >&2
  docker ps -a --filter name=hermes-sandbox- --format '  {{.ID}}  {{.Names}}  {{.Status}}' >&2
  exit 1
fi
echo "no hermes-sandbox-* container left behind" >&2
exit "$rc"
