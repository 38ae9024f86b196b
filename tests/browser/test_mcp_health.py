"""The chat page shows its MCP servers' health (`GET /v1/health`): a `buddy serve` with one
MCP server that cannot start (`required = false`: the rest runs) shows it down, named
with its reason to an admin key and with its state only to another key.

Run by scripts/browser-tests.sh with the page's other browser tests.
"""
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from test_page import KEY, browser, open_page, page, start_serve  # noqa: F401 (fixtures)

ADMIN = "sk-browser-admin"
GHOST = "buddy-no-such-command-58e"


@pytest.fixture(scope="module")
def ghost_server():
    """A `buddy serve` (scripted model) whose one MCP server is a command that does not
    exist, not required; an admin key beside the test's own."""
    work = Path(tempfile.mkdtemp(prefix="buddy-browser-health-"))
    (work / "buddy.toml").write_text(
        '[providers.scripted]\nkind = "scripted"\n'
        f'[[mcp]]\nname = "ghost"\ncommand = ["{GHOST}"]\nrequired = false\n'
        '[[server.keys]]\nname = "ops"\nkey_env = "BUDDY_TEST_ADMIN_KEY"\nadmin = true\n'
    )
    os.environ["BUDDY_TEST_ADMIN_KEY"] = ADMIN
    try:
        base, proc = start_serve(work, [])
    finally:
        del os.environ["BUDDY_TEST_ADMIN_KEY"]
    yield {"url": base}
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except Exception:  # noqa: BLE001 - a server that will not stop is killed
        proc.kill()
    shutil.rmtree(work, ignore_errors=True)


def test_an_mcp_server_that_cannot_start_shows_down_with_its_reason_to_an_admin(page, ghost_server):
    open_page(page, ghost_server, key=ADMIN)
    badge = page.locator("#mcp-health")
    expect(badge).to_be_visible(timeout=10000)
    expect(badge).to_contain_text("1 down")
    expect(badge).to_contain_text("ghost")
    # The reason names the command that could not be started.
    expect(badge).to_contain_text(GHOST)
    expect(badge).to_have_class("down")
    assert page.errors == []


def test_another_key_sees_the_server_down_without_its_reason(page, ghost_server):
    open_page(page, ghost_server)
    badge = page.locator("#mcp-health")
    expect(badge).to_contain_text("1 down", timeout=10000)
    expect(badge).to_contain_text("ghost")
    expect(badge).not_to_contain_text(GHOST)
    assert page.errors == []
