#!/usr/bin/env bash
# The suite by tiers (vitest.config.ts names them): what `pnpm test` runs, and scripts/test.sh in CI.
#
#   scripts/test-tiers.sh check  type-check, API reports, import cycles, lint, formatting, the seccomp profile's derivation
#   scripts/test-tiers.sh all    every test: first the checks, the supervisor's fuzzers, the build
#                                (which is the type-check), the unit tier and the cluster's start side by side; then the
#                                journal, engine, heavy and cluster tiers (and their warm-pool variants) in one vitest run,
#                                HERMES_SANDBOX_TEST_FORKS files at once
#
# Every test runs; nothing is retried. At the end: each phase's time, the 15 slowest test files of
# the whole run, and the failures again (the part of the output CI shows). Exit 0 only if all passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The workspace's tools by path: npx under pnpm prints npm's warnings about pnpm's settings.
export PATH="$PWD/node_modules/.bin:$PATH"
mode="${1:-all}"
T0=$(date +%s)
logs="$(mktemp -d /tmp/hermes-sandbox-test-logs.XXXXXX)"
# Every temporary file and directory the run's processes make (os.tmpdir(), mktemp) goes under one
# directory of the run's own, removed with it: the test files left ~44 hermes-* directories in /tmp
# a run (~18 MiB). A short name (a unix socket's path has 108 bytes) and /tmp's mode (a rootless
# engine and a sandbox's user read what tests put under it).
run_tmp="$(mktemp -d /tmp/hst.XXXXXX)" && chmod 1777 "$run_tmp" && export TMPDIR="$run_tmp"
trap 'rm -rf "$logs" "$run_tmp"' EXIT
summary=()

# Runs "$@" with its output in $logs/$name.log and records its time and exit code. A job started with
# `job -q` prints its log only once it ends (so jobs running side by side do not interleave); others
# print as they go.
job() {
  local quiet=""
  [ "$1" = -q ] && { quiet=1; shift; }
  local name="$1"; shift
  local t0 rc
  t0=$(date +%s)
  if [ -n "$quiet" ]; then
    "$@" >"$logs/$name.log" 2>&1
    rc=$?
  else
    printf '\n==== %s: %s\n' "$name" "$*"
    "$@" 2>&1 | tee "$logs/$name.log"
    rc=${PIPESTATUS[0]}
  fi
  printf '\n==== %s (%s) exited %d after %d s\n' "$name" "$*" "$rc" "$(($(date +%s) - t0))"
  [ -n "$quiet" ] && cat "$logs/$name.log"
  printf '%s\t%d\t%d\n' "$name" "$rc" "$(($(date +%s) - t0))" >>"$logs/jobs.tsv"
  return "$rc"
}

# `check` (`check types`) type-checks the project (scripts/build.mjs: one program, as the build) and
# compares the API reports (packages/*/api.md) with the declarations it emits in memory. `all` passes
# `check no-types`: there the build is the type-check and scripts/api-report.mjs compares its dist/.
check() {
  local rc=0
  [ "${1:-types}" = types ] && { node scripts/build.mjs --no-emit --api-check || rc=1; }
  node scripts/circular.mjs || rc=1
  biome lint || rc=1
  biome format || rc=1
  tsx packages/docker/seccomp/build-profile.ts --check || rc=1
  # The programs that run inside sandboxes (scripts/codegen.ts): the modules and C headers that
  # embed them (and the supervisor's protocol.h) are current, and each passes its language's linter
  # (the JavaScript one: biome lint, above).
  # pyflakes3 is Debian's pyflakes (python3 -m pyflakes of /usr/bin/python3, not of a python3 earlier on PATH).
  tsx scripts/codegen.ts --check || rc=1
  pyflakes3 packages/core/src/tools/runtime/hermes_tools.py || rc=1
  pyflakes3 images/runner/preload.py || rc=1
  pyflakes3 images/runner/kernel.py || rc=1
  shellcheck packages/core/src/internal/session-shell.sh || rc=1
  return "$rc"
}

report() {
  local name code secs failed
  printf '\n==== summary (whole run %d s)\n' "$(($(date +%s) - T0))"
  [ -f "$logs/jobs.tsv" ] && while IFS=$'\t' read -r name code secs; do
    printf '  %-8s %5d s  %s\n' "$name" "$secs" "$([ "$code" = 0 ] && echo passed || echo "FAILED (exit $code)")"
  done <"$logs/jobs.tsv"
  if [ -s "$logs/times.tsv" ]; then echo; tsx test/support/slowestFiles.ts "$logs/times.tsv" "$logs/cpu.tsv"; fi
  # vitest marks a failed file or test with FAIL / × (and its message with →), then prints the error,
  # the failing line (❯ file:line) and, for a property, fast-check's seed and counterexample; tsc
  # prints "error TS". CI shows only the end of the output: these are what it needs.
  failed="$(cat "$logs"/*.log 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -a -E '^ *(FAIL|×) |^ +→ |error TS[0-9]+|^ *(Test Files|Tests) .*failed|^[A-Za-z]*Error: |^Counterexample: |^\{ seed: |^Got error: |^ *❯ (test|packages|images|examples)/[^ ]+:[0-9]+' | cut -c1-600 | head -150 || true)"
  if [ -n "$failed" ]; then printf '\n==== failures (repeated from above)\n%s\n' "$failed"; fi
  # The tests of every vitest run, counted: "Tests  3 failed | 1430 passed | 2 skipped (1435)".
  cat "$logs"/*.log 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -a -E '^ +Tests +[0-9]' | awk '
    { for (i = 1; i <= NF; i++) { if ($i == "passed") p += $(i - 1); if ($i == "failed") f += $(i - 1); if ($i == "skipped") s += $(i - 1) } }
    END { printf "\ntests: %d passed, %d failed", p, f; if (s > 0) printf ", %d skipped", s; printf "\n" }'
}

case "$mode" in
  check)
    job check check
    exit $?
    ;;
  all)
    export HERMES_SANDBOX_TEST_TIMES="$logs/times.tsv" HERMES_SANDBOX_TEST_CPU="$logs/cpu.tsv"
    rc=0
    # Phase 1: nothing here needs the engine; the build is what the real-engine tiers need first.
    # The checks yield the CPU (nice 10; they have no deadline) to the build and then to the tests.
    # (The unit tier does not: its crash test's writers, starved at nice 10, ran past its timeout.)
    (renice -n 10 -p "$BASHPID" >/dev/null; job -q check check no-types) & check_pid=$!
    # libFuzzer on the supervisor's parsers, a bounded time per target, also yielding the CPU.
    (renice -n 10 -p "$BASHPID" >/dev/null; job -q fuzz env HERMES_FUZZ_SECONDS="${HERMES_FUZZ_SECONDS:-10}" bash scripts/fuzz-supervisor.sh) & fuzz_pid=$!
    # The unit tier with the supervisor built with ASan and UBSan (its host-side suite is in this tier).
    job -q unit env HERMES_SANDBOX_TEST_FORKS=2 bash scripts/sanitize-supervisor.sh run --project unit --isolate=false & unit_pid=$!
    # The cluster tier's one-node Kubernetes comes up meanwhile (~25 s, mostly waiting); its global
    # setup finds it up and uses it, and it is stopped at the end (the trap below).
    cluster_pid=""
    if ! bash scripts/kubernetes-local.sh status >/dev/null 2>&1; then
      job -q cluster env HERMES_K8S_IMAGES="hermes-sandbox/python hermes-sandbox/bash hermes-sandbox/node" bash scripts/kubernetes-local.sh up & cluster_pid=$!
      trap 'bash scripts/kubernetes-local.sh down >/dev/null 2>&1; rm -rf "$logs" "$run_tmp"' EXIT
    fi
    job -q build bash -c "$(node -p 'require("./package.json").scripts.build')" || rc=1
    # The API reports (packages/*/api.md) against the declarations just built.
    # (It fails the run but does not hold back the tiers: they need only the build.)
    if [ "$rc" = 0 ]; then job -q api node scripts/api-report.mjs --check || api_rc=1; fi
    # Phase 2: every tier that needs the engine, PostgreSQL or the cluster, together, as soon as the
    # build (and the cluster) is there.
    if [ -n "$cluster_pid" ]; then wait "$cluster_pid" || rc=1; fi
    if [ "$rc" = 0 ]; then
      # The cluster is this run's: its tier's setup stops it once the tier's files are done.
      job engine env HERMES_SANDBOX_TEST_FORKS="${HERMES_SANDBOX_TEST_FORKS:-4}" HERMES_SANDBOX_TEST_K8S_STOP="${cluster_pid:+1}" vitest run \
        --project journal --project engine --project engine-pool --project heavy --project heavy-pool \
        --project cluster --project cluster-chaos || rc=1
    fi
    wait "$check_pid" || rc=1
    wait "$fuzz_pid" || rc=1
    wait "$unit_pid" || rc=1
    [ "${api_rc:-0}" = 0 ] || rc=1
    report
    exit "$rc"
    ;;
  *)
    echo "usage: scripts/test-tiers.sh all|check" >&2
    exit 2
    ;;
esac
