#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 60), seeded from the
# recorded provider streams and the scenario files, and prints runs and crashes per
# target. Needs a nightly toolchain and cargo-fuzz; without them it says so and exits 0.
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: skipped, no nightly toolchain (rustup toolchain install nightly --profile minimal)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: skipped, cargo-fuzz is not installed (cargo install cargo-fuzz --locked)"
  exit 0
fi
streams="$root/crates/buddy-providers/tests/fixtures/streams"
targets=(sse_streams response_bodies tool_call_assembler scenario config)
cd "$root/fuzz"
echo "== building the fuzz targets (nightly, sanitizer)"
cargo +nightly fuzz build
failed=0
summary=()
for target in "${targets[@]}"; do
  corpus="$root/fuzz/corpus/$target"
  mkdir -p "$corpus"
  case $target in
    sse_streams) seeds=("$streams") ;;
    response_bodies) seeds=("$streams") ;;
    scenario) seeds=("$root/scenarios") ;;
    *) seeds=() ;;
  esac
  log=$(mktemp)
  set +e
  cargo +nightly fuzz run "$target" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 >"$log" 2>&1
  code=$?
  set -e
  runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -n 1 | grep -o '[0-9]*' || true)
  if [ "$code" -ne 0 ]; then
    failed=$((failed + 1))
    summary+=("$target: CRASH after ${runs:-?} runs (exit $code); see fuzz/artifacts/$target")
    tail -n 30 "$log"
  else
    summary+=("$target: ${runs:-?} runs in ${secs} s, 0 crashes")
  fi
  rm -f "$log"
done
printf 'fuzz: %s\n' "${summary[@]}"
[ "$failed" -eq 0 ]
