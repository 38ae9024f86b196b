#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# clients/mcp-conformance/package-lock.json with the Node 22 it needs: the suite uses
# fs.globSync, which Node 20 lacks) run against buddy as a client: for each scenario
# the suite starts a scenario server on localhost and runs
# `buddy mcp conformance-client URL`, then judges what it saw on the wire.
# It runs exactly the client scenarios each revision requires (`--requirements`, frozen
# at the revision's release, at its own wire): 2026-07-28 (stateless, server/discover)
# and 2025-11-25 (the initialize handshake buddy falls back to).
# Scenarios buddy does not support are listed per revision, each with the reason, in
# clients/mcp-conformance/not-yet.yaml: the run fails when a scenario outside it fails,
# or when one in it passes (so the list is kept true). Loopback only; bounded in time
# (each scenario 30 s, each revision's run 5 minutes).
# Prints one line per scenario and `mcp conformance: …` per revision.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suite="$root/clients/mcp-conformance"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -x "$suite/node_modules/.bin/conformance" ] || [ ! -x "$suite/node_modules/.bin/node" ]; then
  echo "== installing the MCP conformance suite and Node 22 (npm ci in clients/mcp-conformance)"
  (cd "$suite" && npm ci --no-audit --no-fund --loglevel=error)
fi
cargo build --locked -q -p buddy-cli
buddy="$root/target/debug/buddy"
version=$(cd "$suite" && node -p 'require("./package.json").dependencies["@modelcontextprotocol/conformance"]')

failed=0
for revision in 2026-07-28 2025-11-25; do
  echo "== MCP conformance suite ($version) against buddy as a client, revision $revision"
  set +e
  (cd "$work" && PATH="$suite/node_modules/.bin:$PATH" timeout 300 \
    conformance client --requirements "$revision" --command "$buddy mcp conformance-client" \
    --timeout 30000 -o "$work/$revision") >"$work/$revision.log" 2>&1
  status=$?
  set -e
  if [ "$status" = 124 ]; then
    tail -50 "$work/$revision.log" >&2
    echo "mcp conformance: the $revision run did not end within 5 minutes" >&2
    failed=1
    continue
  fi
  # Each scenario's outcome from its checks.json: passed when no check failed.
  python3 - "$work/$revision" "$suite" "$revision" "$work/$revision.log" <<'PY' || failed=1
import json, os, re, sys
results, suite, revision, log = sys.argv[1:5]
# not-yet.yaml: a `REVISION:` line, then `- scenario  # why` lines.
not_yet, section = {}, None
for line in open(os.path.join(suite, "not-yet.yaml")):
    header = re.match(r"^(\S+):\s*$", line)
    if header:
        section = header.group(1)
        continue
    m = re.match(r"\s*-\s*([^\s#]+)\s*(?:#\s*(.*))?$", line)
    if m and section == revision:
        not_yet[m.group(1)] = m.group(2) or ""
# The scenarios the revision scores: the `client:` list of its requirement set.
scored, in_client = set(), False
requirements = os.path.join(suite, "node_modules/@modelcontextprotocol/conformance/requirements", revision + ".yaml")
for line in open(requirements):
    if re.match(r"^\S", line):
        in_client = line.startswith("client:")
        continue
    m = re.match(r"\s+-\s+([^\s#]+)\s*$", line)
    if in_client and m:
        scored.add(m.group(1))
outcomes = {}
for directory, _, files in os.walk(results):
    if "checks.json" not in files:
        continue
    checks = json.load(open(os.path.join(directory, "checks.json")))
    # The directory is `<scenario>-<timestamp>` (auth/… ones one level down); the
    # checks don't name their scenario.
    name = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", os.path.relpath(directory, results))
    outcomes[name] = [c["id"] for c in checks if c.get("status") == "FAILURE"]
passed = 0
problems = []
for scenario in sorted(scored) + sorted(k for k in outcomes if k not in scored):
    failures = outcomes.get(scenario)
    ok = failures == []
    if scenario in not_yet:
        mark = "PASSES NOW" if ok else "not yet"
        if ok:
            problems.append(f"{scenario} passes now: take it off clients/mcp-conformance/not-yet.yaml ({revision})")
    else:
        mark = "ok" if ok else ("NOT RUN" if failures is None else "FAILED")
        if not ok:
            problems.append(f"{scenario}: " + (", ".join(failures) if failures else "no result"))
    passed += ok and scenario in scored
    print(f"  {mark:10} {scenario}{'' if scenario in scored else '  (not scored)'}")
missing = sum(1 for s in scored if s in not_yet)
print(f"mcp conformance: {passed} of the {len(scored)} client scenarios revision {revision} scores pass; "
      f"{missing} are not supported yet (clients/mcp-conformance/not-yet.yaml says why)")
for p in problems:
    print("  -", p)
if problems:
    print(open(log).read()[-4000:], file=sys.stderr)
sys.exit(1 if problems else 0)
PY
done
exit "$failed"
