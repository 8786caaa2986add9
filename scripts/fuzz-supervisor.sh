#!/usr/bin/env bash
# libFuzzer on the supervisor's parsers (images/runner/*.c; hostile review 2, #10): the
# header the host sends on stdin, the tool requests the sandboxed program sends on its socket (and
# the host's replies), the paths of files and file operations, a kernel's commands (kernel mode's
# stdin) and the records its domain writes on a cell's records pipe. One target each, in
# images/runner/fuzz/ (fuzz_common.h says how a one-shot process is fuzzed in one process), built
# by the supervisor's build rule (images/runner/Makefile) with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (+ LeakSanitizer), each run for
# HERMES_FUZZ_SECONDS (default 20) from a COPY of its checked-in seed corpus
# (images/runner/fuzz/corpus/<target>/, written by make-seeds.py), which stays as it is.
#
# Exit 0: nothing found. Otherwise (1) a target crashed, leaked, timed out (-timeout=5) or went past
# -rss_limit_mb=1024: the reproducer is kept under images/runner/fuzz/build/artifacts/<target>/ and
# its path printed; replay it with
#   HERMES_FUZZ_DEBUG=1 images/runner/fuzz/build/<target> <reproducer>
# (2: the toolchain is missing.) Installs nothing: it needs clang 14 and libFuzzer's runtime,
#   apt-get install -y clang-14 libclang-rt-14-dev          (Debian 12 / Ubuntu 22.04)
#
#   HERMES_FUZZ_SECONDS=60 bash scripts/fuzz-supervisor.sh [target...]
#   (targets: fuzz_header fuzz_tool_request fuzz_path fuzz_kernel_commands fuzz_kernel_records; all by
#   default; one at a time, one core)
# `pnpm test` runs it (scripts/test-tiers.sh) for 10 s a target. HERMES_FUZZ_CC: another clang
# (default clang-14, else clang).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${HERMES_FUZZ_SECONDS:-20}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz-supervisor: HERMES_FUZZ_SECONDS must be a whole number of seconds, not '$seconds'" >&2
  exit 2
fi
fuzz=images/runner/fuzz
build="$fuzz/build"
if [ "$#" -gt 0 ]; then targets=("$@"); else targets=(fuzz_header fuzz_tool_request fuzz_path fuzz_kernel_commands fuzz_kernel_records); fi
for t in "${targets[@]}"; do
  if [ ! -f "$fuzz/$t.c" ] || [ ! -d "$fuzz/corpus/$t" ]; then
    echo "fuzz-supervisor: no target '$t' (expected $fuzz/$t.c and $fuzz/corpus/$t/)" >&2
    exit 2
  fi
done

# The toolchain: clang, and libFuzzer's runtime (a separate package on Debian).
cc="${HERMES_FUZZ_CC:-}"
if [ -z "$cc" ]; then
  if command -v clang-14 >/dev/null 2>&1; then cc=clang-14; elif command -v clang >/dev/null 2>&1; then cc=clang; fi
fi
install_hint="install them with:  sudo apt-get install -y clang-14 libclang-rt-14-dev"
if [ -z "$cc" ] || ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz-supervisor: clang is missing; $install_hint" >&2
  exit 2
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/hermes-fuzz.XXXXXX")"
# The targets' private roots (the files they create and remove for every input) on a tmpfs when
# there is one: on a disk, creating and removing them dominates each input's time.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then roots="$(mktemp -d /dev/shm/hermes-fuzz-roots.XXXXXX)"; else roots="$work/roots"; mkdir -p "$roots"; fi
trap 'rm -rf "$work" "$roots"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$work/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined -o "$work/probe" "$work/probe.c" >"$work/probe.log" 2>&1; then
  echo "fuzz-supervisor: $cc cannot build a libFuzzer target (libFuzzer's runtime, libclang_rt.fuzzer, is missing?):" >&2
  sed 's/^/  /' "$work/probe.log" >&2
  echo "fuzz-supervisor: $install_hint" >&2
  exit 2
fi

# Inputs up to: a header with a few blobs past the 4096-byte line limit; a path past PATH_MAX
# with its selector byte; a tool request and replies past a line's 4096 bytes.
max_len() {
  case "$1" in
    fuzz_header) echo 8192 ;;
    fuzz_path) echo 4200 ;;
    *) echo 8192 ;;
  esac
}

mkdir -p "$build"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
failed=()
summary=()
started=$SECONDS
for t in "${targets[@]}"; do
  echo "fuzz-supervisor: building $t"
  # The image's build rule with the target's file (which includes every source file: fuzz/unity.c),
  # clang and libFuzzer; its warnings and hardening flags as they are. Always rebuilt (-B): the compiler may differ.
  make -B -s --no-print-directory -C images/runner OUT="fuzz/build/$t" SRCS="fuzz/$t.c" CC="$cc" STATIC= OPT="-O1 -g" \
    SANITIZE="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  cp -R "$fuzz/corpus/$t" "$work/corpus-$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$artifacts"
  log="$build/$t.log"
  echo "fuzz-supervisor: running $t for ${seconds}s (log: $log)"
  status=0
  TMPDIR="$roots" "$build/$t" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work/corpus-$t" >"$log" 2>&1 || status=$?
  # libFuzzer's last status line ("#N DONE cov: C ft: F corp: ..."), its executions and rate.
  last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  cov="$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) .*/cov \1, ft \2/p' <<<"$last")"
  summary+=("$t: ${runs:-?} executions, ${rate:-?}/s, ${cov:-no coverage line}")
  if [ "$status" -ne 0 ]; then
    failed+=("$t")
    echo "fuzz-supervisor: $t FOUND something (exit $status); the report:" >&2
    grep -E -A 40 '^==[0-9]+==ERROR|^harness:|runtime error|^SUMMARY|ALARM|out-of-memory|deadly signal' "$log" | head -n 80 | sed 's/^/  /' >&2 || true
    for f in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log"); do
      echo "fuzz-supervisor: reproducer: $f  (replay: HERMES_FUZZ_DEBUG=1 $build/$t $f)" >&2
    done
  fi
done

echo "fuzz-supervisor: done in $((SECONDS - started))s"
for line in "${summary[@]}"; do echo "  $line"; done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz-supervisor: FAILED: ${failed[*]} (logs and reproducers under $build/)" >&2
  exit 1
fi
echo "fuzz-supervisor: nothing found"
