#!/usr/bin/env bash
# Installs the MCP servers buddy-mcp's tests run against, pinned: mcp-server-time from
# PyPI into target/mcp-venv, and the npm reference servers (everything, filesystem,
# memory) into clients/mcp/node_modules from its package-lock.json. Prints the
# variables the tests read.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/mcp-venv"
if [ ! -x "$venv/bin/mcp-server-time" ]; then
  echo "== preparing $venv (mcp-server-time==2026.10.19 from PyPI)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'mcp-server-time==2026.10.19' >&2
fi
if [ ! -x "$root/clients/mcp/node_modules/.bin/mcp-server-everything" ]; then
  echo "== installing the npm MCP servers (npm ci in clients/mcp)" >&2
  (cd "$root/clients/mcp" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "export BUDDY_MCP_TIME=$venv/bin/mcp-server-time BUDDY_MCP_NODE_MODULES=$root/clients/mcp/node_modules"
