#!/usr/bin/env bash
# The web page's browser tests (tests/browser/): Playwright from PyPI (pinned) driving
# Debian's chromium, headless, against a real `buddy serve` on 127.0.0.1 with the
# scripted model. Installs what it needs. BUDDY_SCREENSHOTS=docs/screenshots also
# writes the book's screenshots (docs/guide/chat-page.md). Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v chromium >/dev/null; then
  echo "== installing chromium (Debian package) for the browser tests"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
venv="$root/target/browser-venv"
if ! "$venv/bin/python" -c "import playwright, pytest" 2>/dev/null; then
  echo "== preparing $venv (playwright==1.65.2, pytest==9.2.0 from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'playwright==1.65.2' 'pytest==9.2.0'
fi
cd "$root"
cargo build -p buddy-cli --locked --quiet
echo "== browser tests (chromium $(chromium --version 2>/dev/null | awk '{print $2}'), playwright 1.65.2)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/browser "$@"
