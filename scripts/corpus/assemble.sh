#!/usr/bin/env bash
# Re-assembles the corpus of public recorded agent runs that `buddy judge` is measured on
# (BENCHMARKS.md, "The judge on real agents' runs"). Every source is a public GitHub
# repository pinned to a commit in sources.tsv; its converter (a Python script beside
# this one) reads the runs out of the repository's git objects at that commit and writes
# one conversation per line in OpenAI Chat Completions form:
#   {"id": "...", "source": "...", "success": true|false|null, "messages": [...], "tools": [...]}
# Nothing of the data is committed to buddy.
#
# usage: scripts/corpus/assemble.sh [--repos DIR] [--out DIR] [NAME ...]
#   --repos DIR  where the repositories are: DIR/OWNER+NAME or DIR/OWNER/NAME (a clone or a
#                bare git directory); a missing one is cloned there (--bare, needs GitHub).
#                Default: target/corpus-repos.
#   --out DIR    where NAME.jsonl go (default: target/corpus).
#   NAME ...     only these sources.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
repos="$root/target/corpus-repos"
out="$root/target/corpus"
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --repos) repos=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) only+=("$1"); shift ;;
  esac
done
mkdir -p "$repos" "$out"

# The git directory of OWNER/NAME under $repos, cloned when missing.
git_dir_of() {
  local repo=$1 owner=${1%%/*} name=${1##*/} d
  for d in "$repos/$owner+$name" "$repos/$owner/$name" "$repos/$owner+$name".git; do
    if [ -d "$d" ]; then
      # A mirror may keep its git directory one level down.
      if git --git-dir="$d" rev-parse --git-dir >/dev/null 2>&1; then echo "$d"; return; fi
      if [ -d "$d/.git" ]; then echo "$d/.git"; return; fi
      local sub; sub=$(find "$d" -maxdepth 2 -name HEAD -printf '%h\n' 2>/dev/null | head -1)
      if [ -n "$sub" ]; then echo "$sub"; return; fi
    fi
  done
  echo "== cloning https://github.com/$repo into $repos/$owner+$name" >&2
  git clone --quiet --bare "https://github.com/$repo" "$repos/$owner+$name" >&2
  echo "$repos/$owner+$name"
}

total=0
while IFS=$'\t' read -r name repo commit converter what; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  gd=$(git_dir_of "$repo")
  if ! git --git-dir="$gd" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "assemble: $repo has no commit $commit in $gd; fetch it (git --git-dir=$gd fetch origin $commit)" >&2
    exit 1
  fi
  PYTHONDONTWRITEBYTECODE=1 python3 "$here/$converter" --git-dir "$gd" --commit "$commit" --source "$name" --out "$out/$name.jsonl"
  n=$(wc -l < "$out/$name.jsonl")
  total=$((total + n))
  printf '%-28s %6d runs  %s@%s\n' "$name" "$n" "$repo" "${commit:0:12}"
done < "$here/sources.tsv"
echo "corpus: $total runs in $out"
