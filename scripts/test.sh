#!/usr/bin/env bash
# The whole test suite. Prepares a Python virtualenv with the official openai SDK (the
# OpenAI-compatibility conformance test drives buddy's server with it), then runs every
# Rust test. Extra arguments go to `cargo test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/sdk-venv"
if ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
  echo "== preparing $venv (openai==3.51.0 from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'openai==3.51.0'
fi
export BUDDY_OPENAI_PYTHON="$venv/bin/python"
cd "$root"
cargo test --workspace --locked "$@"
