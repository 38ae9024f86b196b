#!/usr/bin/env bash
# The judge on real agents' runs (BENCHMARKS.md §12): `buddy judge` over the corpus of
# public recorded runs that scripts/corpus/assemble.sh re-assembles (its data is never
# committed), under the default policy, one table per source, with the time it took.
#
# usage: scripts/bench-judge.sh [BUDDY ...] [-- JUDGE-FLAGS]
#   BUDDY        buddy binaries to compare, side by side on the same corpus
#                (default: target/release/buddy, built when missing)
#   JUDGE-FLAGS  passed to every `buddy judge` (e.g. -- --max-model-calls 40)
# Environment:
#   BUDDY_CORPUS  the corpus directory (default: target/corpus; assembled when empty,
#                 which needs the source repositories, see scripts/corpus/assemble.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${BUDDY_CORPUS:-$root/target/corpus}
binaries=()
flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; flags=("$@"); break ;;
    *) binaries+=("$1"); shift ;;
  esac
done
if [ ${#binaries[@]} -eq 0 ]; then
  [ -x "$root/target/release/buddy" ] || cargo build --locked --release -p buddy-cli
  binaries=("$root/target/release/buddy")
fi
if ! ls "$corpus"/*.jsonl >/dev/null 2>&1; then
  echo "== assembling the corpus into $corpus"
  bash "$root/scripts/corpus/assemble.sh" --out "$corpus"
fi
echo "== corpus: $(cat "$corpus"/*.jsonl | wc -l) runs in $(ls "$corpus"/*.jsonl | wc -l) sources ($corpus)"
for buddy in "${binaries[@]}"; do
  echo "== $buddy judge ($("$buddy" --version))"
  start=$(date +%s.%N)
  "$buddy" judge --summary "$corpus"/*.jsonl ${flags[@]+"${flags[@]}"} 2>/dev/null
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "wall %.1f s\n", e - s }'
done
