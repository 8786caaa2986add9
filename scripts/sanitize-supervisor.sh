#!/usr/bin/env bash
# The supervisor (images/runner/*.c) built with AddressSanitizer and UndefinedBehaviorSanitizer,
# and its own test suite (images/runner/hermes-run.test.ts, on the host, no engine) run against that
# build through HERMES_RUN_UNDER_TEST. Any sanitizer report goes to the supervisor's stderr, which the
# suite requires to be empty, so a report fails the test that caused it.
#
# Leak detection is off: the supervisor is a one-shot process whose few allocations (the header's
# argument table, file names) live until it exits, which LeakSanitizer reports as leaks.
#
#   pnpm test:sanitize                     the supervisor's suite on that build (hostile review 2, #10)
#   scripts/sanitize-supervisor.sh ARGS…   `vitest ARGS…` with that build instead: `pnpm test` runs the
#                                          whole unit tier so (scripts/test-tiers.sh), the supervisor's
#                                          suite included; the plain build is what every real-engine
#                                          test runs in its sandboxes
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="$(mktemp -d /tmp/hermes-run-sanitized.XXXXXX)"
trap 'rm -rf "$out"' EXIT
# The image's build rule (images/runner/Makefile) with the sanitizers: not static (ASan needs the
# dynamic loader), not stripped, -O1 -g for readable reports; its warnings and hardening flags as they are.
make -s --no-print-directory -C images/runner OUT="$out/hermes-run" STATIC= OPT="-O1 -g" \
  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export HERMES_RUN_UNDER_TEST="$out/hermes-run"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1"
if [ "$#" = 0 ]; then set -- run --project unit --isolate=false images/runner/hermes-run.test.ts; fi
# Not exec: the trap removes the build when vitest ends.
node_modules/.bin/vitest "$@"
