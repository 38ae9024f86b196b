"""The chat page of `buddy serve` in a real browser: Debian's chromium, headless, driven
by Playwright, against a real `buddy serve` on 127.0.0.1 with the scripted model.

Run by scripts/browser-tests.sh (which scripts/test.sh calls). With
BUDDY_SCREENSHOTS=DIR the multi-tool and loop turns are also saved as screenshots at
desktop and phone width.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
BUDDY = Path(os.environ.get("BUDDY_BIN", ROOT / "target" / "debug" / "buddy"))
CHROMIUM = os.environ.get("BUDDY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
KEY = "sk-browser-test"
SHOTS = os.environ.get("BUDDY_SCREENSHOTS")

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

CODE_ANSWER = 'Here:\n\n```rust\nfn main() {\n    println!("hi"); // greet\n}\n```'

SCENARIOS = {
    # A tool result and an answer that try to run code.
    "hostile": {
        "name": "hostile", "prompt": "show me the page",
        "tools": [{"name": "fetch_page", "template": HOSTILE + " {url}"}],
        "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "fetch_page", "arguments": {"url": "<b>x</b>"}}]}},
            {"when": {}, "reply": {"text": "Here it is: " + HOSTILE + "\n\n[click](javascript:window.__pwned=3)\n\n**bold** and a table:\n\n| a | b |\n|---|---|\n| 1 | 2 |"}},
        ],
    },
    # A tool that takes 30 s: long enough to press Stop.
    "slow": {
        "name": "slow", "prompt": "take your time",
        "tools": [{"name": "slow_job", "template": "finished", "delay_ms": 30000}],
        "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "slow_job", "arguments": {}}]}},
            {"when": {}, "reply": {"text": "done"}},
        ],
    },
    # Three slow steps, narrated: long enough to reload or lose the connection mid-turn.
    "steps": {
        "name": "steps", "prompt": "go step by step",
        "tools": [{"name": f"step_{n}", "template": f"step {n} done", "delay_ms": 1200} for n in (1, 2, 3)],
        "expect": {"stop_reason": "completed", "model_calls": 4, "tool_calls": 3},
        "rules": [
            {"when": {"round": n}, "reply": {"text": f"Working on step {n}.", "tool_calls": [{"name": f"step_{n}", "arguments": {"n": n}}]}}
            for n in (1, 2, 3)
        ] + [{"when": {}, "reply": {"text": "All three steps are done."}}],
    },
    # An answer with a code block.
    "code": {
        "name": "code", "prompt": "show me the code",
        "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
        "rules": [{"when": {}, "reply": {"text": CODE_ANSWER}}],
    },
    # Narrates each step before its call, then answers: one answer per turn.
    "narrated": {
        "name": "narrated", "prompt": "narrate",
        "tools": [{"name": f"look_{n}", "template": f"seen {n}"} for n in (1, 2)],
        "expect": {"stop_reason": "completed", "model_calls": 3, "tool_calls": 2},
        "rules": [
            {"when": {"round": n}, "reply": {"text": f"Looking at part {n}.", "tool_calls": [{"name": f"look_{n}", "arguments": {"n": n}}]}}
            for n in (1, 2)
        ] + [{"when": {}, "reply": {"text": "Both parts look fine."}}],
    },
    # An answer with a blockquote.
    "quote": {
        "name": "quote", "prompt": "quote someone",
        "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
        "rules": [{"when": {}, "reply": {"text": "> Measure twice, cut once.\n\nSaid every carpenter."}}],
    },
    # Writes a file: waits for approval.
    "writer": {
        "name": "writer", "prompt": "write a haiku",
        "tools": [{"builtin": "write_file"}],
        "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
        "rules": [
            {"when": {"round": 1}, "reply": {"text": "Saving it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "haiku.txt", "content": "old pond"}}]}},
            {"when": {}, "reply": {"text": "Result: {last_result}"}},
        ],
    },
    # Sub-agents two deep: a lead that hands parts to readers, and a reader of its own;
    # the agents run on a model with a list price, so each shows its cost.
    "delegating": {
        "name": "delegating", "prompt": "sum up the archive",
        "tools": [{"name": "lookup", "description": "Looks a part up.",
                   "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                   "template": "entry for {q}"}],
        "agents": [
            {"name": "lead", "description": "Splits a task among readers.", "model": "gpt-4o-mini",
             "instructions": "You are the lead sub-agent.", "agents": ["reader"]},
            {"name": "reader", "description": "Reads one part.", "model": "gpt-4o-mini",
             "instructions": "You are the reader sub-agent.", "skills": ["lookup"]},
        ],
        "expect": {"stop_reason": "completed", "model_calls": 10, "tool_calls": 7},
        "rules": [
            {"when": {"system_contains": "reader sub-agent", "round": 2}, "reply": {"text": "Read {user}: {last_result}"}},
            {"when": {"system_contains": "reader sub-agent"}, "reply": {"text": "Reading {user}.", "tool_calls": [{"name": "lookup", "arguments": {"q": "{user}"}}]}},
            {"when": {"system_contains": "lead sub-agent", "round": 2}, "reply": {"text": "Lead report: {results} parts read."}},
            {"when": {"system_contains": "lead sub-agent"}, "reply": {"text": "Handing out the parts.", "tool_calls": [
                {"name": "reader", "arguments": {"task": "part one"}}, {"name": "reader", "arguments": {"task": "part two"}}]}},
            {"when": {"round": 1}, "reply": {"text": "Delegating.", "tool_calls": [
                {"name": "lead", "arguments": {"task": "the archive"}}, {"name": "reader", "arguments": {"task": "the index"}}]}},
            {"when": {}, "reply": {"text": "All done: {results} reports."}},
        ],
    },
    # Two helpers of one agent side by side, each with two slow steps: long enough to
    # reload the page while they run.
    "slow_helpers": {
        "name": "slow_helpers", "prompt": "check both parts",
        "tools": [{"name": "inspect", "description": "Inspects a part.",
                   "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                   "template": "{q} looks fine", "delay_ms": 2500}],
        "agents": [
            {"name": "helper", "description": "Checks one part.",
             "instructions": "You are the helper sub-agent.", "skills": ["inspect"]},
        ],
        "expect": {"stop_reason": "completed", "model_calls": 8, "tool_calls": 6},
        "rules": [
            {"when": {"system_contains": "helper sub-agent", "round": 3}, "reply": {"text": "Checked {user}: {last_result}"}},
            {"when": {"system_contains": "helper sub-agent"}, "reply": {"text": "Step {n} on {user}.", "tool_calls": [{"name": "inspect", "arguments": {"q": "{user} step {n}"}}]}},
            {"when": {"round": 1}, "reply": {"text": "Two helpers.", "tool_calls": [
                {"name": "helper", "arguments": {"task": "part one"}}, {"name": "helper", "arguments": {"task": "part two"}}]}},
            {"when": {}, "reply": {"text": "Both parts checked."}},
        ],
    },
}


# An MCP server (stdio) whose `signup` asks the person for a form over `input_required`
# and answers with what came back: the page shows the form, the answer reaches it.
ASKING_SERVER = r"""
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
FORM = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Your name", "minLength": 1},
    "plan": {"type": "string", "title": "Plan", "enum": ["basic", "pro"], "default": "basic"},
    "age": {"type": "integer", "title": "Age", "minimum": 18, "description": "adults only"},
    "newsletter": {"type": "boolean", "title": "Newsletter"},
    "topics": {"type": "array", "title": "Topics", "minItems": 1, "default": ["news"],
               "items": {"anyOf": [{"const": "news", "title": "News"}, {"const": "offers", "title": "Offers"},
                                   {"const": "events", "title": "Events"}]}}},
    "required": ["name", "age"]}
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "asking", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "signup", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and "inputResponses" not in params:
        send({"jsonrpc": "2.0", "id": mid, "result": {"resultType": "input_required",
              "inputRequests": {"who": {"method": "elicitation/create", "params": {
                  "mode": "form", "message": "Who signs up?", "requestedSchema": FORM}}}}})
    elif method == "tools/call":
        got = json.dumps(params["inputResponses"]["who"], sort_keys=True)
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "server got " + got}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"""

SIGNUP = {
    "name": "signup", "prompt": "sign me up",
    "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
    "rules": [
        {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "asking__signup", "arguments": {}}]}},
        {"when": {}, "reply": {"text": "Result: {last_result}"}},
    ],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    assert BUDDY.exists(), f"{BUDDY} is missing: build it with cargo build -p buddy-cli"
    work = Path(tempfile.mkdtemp(prefix="buddy-browser-"))
    scenarios = work / "scenarios"
    scenarios.mkdir()
    for name, scenario in SCENARIOS.items():
        (scenarios / f"{name}.json").write_text(json.dumps(scenario))
    sandbox = work / "sandbox"
    sandbox.mkdir()
    # One scenario has a price, so its turns show what they cost.
    (work / "buddy.toml").write_text(
        '[providers.scripted]\nkind = "scripted"\n'
        '[providers.scripted.prices]\n"scripted:chain_3_steps" = { input = 1000, output = 2000 }\n'
        '"scripted:delegating" = { input = 1000, output = 2000 }\n'
    )
    port = free_port()
    proc = subprocess.Popen(
        [str(BUDDY), "serve", "--listen", f"127.0.0.1:{port}", "--db", str(work / "buddy.db"),
         "--scenarios", str(scenarios), "--sandbox", str(sandbox), "--api-key", KEY],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1)
            break
        except OSError:
            assert proc.poll() is None, "buddy serve exited"
            assert time.time() < deadline, "buddy serve did not start"
            time.sleep(0.1)
    yield {"url": base, "sandbox": sandbox}
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    yield page
    context.close()


def open_page(page, server, key=KEY):
    page.goto(server["url"] + "/")
    expect(page.locator("#key-dialog")).to_be_visible()
    page.fill("#key-input", key)
    page.press("#key-input", "Enter")
    expect(page.locator("#model option").first).to_be_attached()


def ask(page, model, text):
    page.select_option("#model", model)
    page.fill("#message", text)
    page.press("#message", "Enter")


def turn_end(page, n=1):
    ends = page.locator(".turn-end")
    expect(ends).to_have_count(n, timeout=20000)
    return ends.nth(n - 1)


def shoot(page, name):
    if not SHOTS:
        return
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(SHOTS) / f"{name}-desktop.png"), full_page=False)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(500)  # the sidebar slides away
    page.locator("#transcript").evaluate("t => t.scrollTop = 0")
    page.screenshot(path=str(Path(SHOTS) / f"{name}-phone.png"), full_page=False)
    page.set_viewport_size({"width": 1280, "height": 800})


def test_a_multi_tool_turn_renders_its_cards_in_order_and_its_stop_reason(page, server):
    open_page(page, server)
    ask(page, "scripted:chain_3_steps", "How much was Ada's latest order?")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    expect(end.locator(".reason")).to_have_text("Answered")
    expect(end.locator(".stats")).to_contain_text("4 model calls · 3 tool calls")
    # The turn's cost at the configured price, as the server reported it.
    expect(end.locator(".stats")).to_contain_text(re.compile(r" · \$\d+\.\d{4}$"))
    names = page.locator(".card .name").all_inner_texts()
    assert names == ["find_user", "get_orders", "get_invoice"], names
    expect(page.locator(".card.done")).to_have_count(3)
    expect(page.locator(".card .status").first).to_contain_text("ms")
    expect(page.locator(".msg.assistant").last).to_contain_text("129.90")
    # The arguments are shown as formatted JSON.
    expect(page.locator(".card .args").first).to_contain_text('"email": "ada@example.com"')
    shoot(page, "multi-tool")

    # Reload: the stored conversation comes back as it was, cards included.
    page.reload()
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    assert page.locator(".card .name").all_inner_texts() == ["find_user", "get_orders", "get_invoice"]
    expect(page.locator(".msg.user")).to_have_text("How much was Ada's latest order?")
    expect(page.locator("#conversations li.current")).to_contain_text("How much was Ada")
    assert not page.errors, page.errors


def test_parallel_calls_are_compact_rows_in_call_order_that_open_to_their_details(page, server):
    open_page(page, server)
    ask(page, "scripted:parallel_3", "What's the weather in Paris, London and Tokyo?")
    turn_end(page)
    row = page.locator(".cards").first
    expect(row.locator(".card")).to_have_count(3)
    # Each row says which call it is without opening it: name, arguments in brief, status.
    briefs = row.locator(".card .brief").all_inner_texts()
    assert ["Paris" in briefs[0], "London" in briefs[1], "Tokyo" in briefs[2]] == [True, True, True], briefs
    expect(row.locator(".card .status").first).to_contain_text("done")
    expect(row.locator(".card .result").first).not_to_be_visible()
    row.locator(".card .head").first.click()
    expect(row.locator(".card .args").first).to_be_visible()
    expect(row.locator(".card .result").first).to_be_visible()
    # Opened by keyboard too.
    row.locator(".card .head").nth(1).focus()
    page.keyboard.press("Enter")
    expect(row.locator(".card .args").nth(1)).to_contain_text("London")
    expect(row.locator(".card .args").nth(1)).to_be_visible()


def test_a_loop_shows_the_guard_notices_and_still_an_answer(page, server):
    open_page(page, server)
    ask(page, "scripted:ab_cycle", "Should I take an umbrella in Paris today and tomorrow?")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "loop_detected")
    expect(end.locator(".reason")).to_contain_text("Stopped a loop")
    # No price for this model: no cost is shown (never a made-up $0).
    expect(end.locator(".stats")).not_to_contain_text("$")
    notices = page.locator(".notice")
    assert notices.count() >= 2
    expect(notices.first).to_contain_text("Calls going round in circles")
    expect(notices.first).to_contain_text("buddy gave back the earlier result")
    expect(page.locator(".msg.assistant").last).to_contain_text("umbrella")
    # Calls buddy withdrew are shown as not run, not as red errors of the tool.
    expect(page.locator(".card.skipped .status").first).to_have_text("not run")
    expect(page.locator(".card.failed")).to_have_count(0)
    shoot(page, "loop")


def hold_first_list(page):
    """Holds back the page's first request for the conversation list; the held route is
    in the returned list once the request is made (call `continue_()` to release it)."""
    held = []

    def hold(route):
        if route.request.method == "GET" and not held:
            held.append(route)
        else:
            route.continue_()

    page.route(re.compile(r".*/v1/conversations$"), hold)
    return held


def test_a_turn_sent_while_the_list_loads_is_not_drawn_again(page, server):
    # The conversation list is held back until the turn runs: when it arrives, the page
    # must not redraw the streaming turn from the store (where it has no end yet).
    held = hold_first_list(page)
    open_page(page, server)
    ask(page, "scripted:slow", "take your time")
    expect(page.locator(".card.running")).to_have_count(1)
    assert held, "the list request was held"
    held[0].continue_()
    page.wait_for_timeout(500)
    expect(page.locator(".card.running")).to_have_count(1)
    expect(page.locator(".turn-end")).to_have_count(0)
    page.click("#stop")
    expect(turn_end(page)).to_have_attribute("data-reason", "cancelled")


def test_stop_cancels_the_running_turn(page, server):
    open_page(page, server)
    ask(page, "scripted:slow", "take your time")
    expect(page.locator(".card.running")).to_have_count(1)
    expect(page.locator("#stop")).to_be_visible()
    started = time.time()
    page.click("#stop")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "cancelled")
    assert time.time() - started < 10
    expect(page.locator("#send")).to_be_visible()


def test_a_wrong_key_is_refused_and_a_right_one_works(page, server):
    page.goto(server["url"] + "/")
    page.fill("#key-input", "sk-wrong")
    page.press("#key-input", "Enter")
    expect(page.locator("#key-error")).to_contain_text("refused")
    expect(page.locator("#model option")).to_have_count(0)
    page.fill("#key-input", KEY)
    page.press("#key-input", "Enter")
    expect(page.locator("#model option").first).to_be_attached()
    # Kept for this tab only.
    assert page.evaluate("sessionStorage.getItem('buddy-api-key')") == KEY
    assert page.evaluate("localStorage.length") == 0


def test_hostile_results_and_answers_run_nothing(page, server):
    open_page(page, server)
    ask(page, "scripted:hostile", "show me the page")
    turn_end(page)
    assert page.evaluate("window.__pwned") is None
    result = page.locator(".card .result").first
    expect(result).to_contain_text("<script>window.__pwned = 1</script>")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("table td").first).to_have_text("1")
    assert answer.locator("script").count() == 0
    assert page.locator("img[onerror]").count() == 0
    for href in answer.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))"):
        assert not (href or "").startswith("javascript:"), href
    # Clicking whatever links there are still runs nothing.
    for link in answer.locator("a").all():
        link.click(modifiers=["Control"])
    assert page.evaluate("window.__pwned") is None
    page.reload()
    turn_end(page)
    assert page.evaluate("window.__pwned") is None


def test_the_page_is_served_with_a_strict_content_security_policy(server):
    with urllib.request.urlopen(server["url"] + "/") as response:
        csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp


def test_a_call_waiting_for_approval_gets_buttons(page, server):
    open_page(page, server)
    ask(page, "scripted:writer", "write a haiku")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "approval_required")
    card = page.locator(".card.waiting")
    expect(card).to_contain_text("write_file")
    expect(card.locator(".why")).to_contain_text("effectful")
    card.get_by_role("button", name="Approve").click()
    end = turn_end(page, 2)
    expect(end).to_have_attribute("data-reason", "completed")
    assert (server["sandbox"] / "haiku.txt").read_text() == "old pond"

    # Reject with a reason, after a reload: the pause is stored.
    ask(page, "scripted:writer", "write another")
    turn_end(page, 3)
    page.reload()
    card = page.locator(".card.waiting")
    expect(card).to_have_count(1)
    card.get_by_role("button", name="Reject").click()
    page.fill(".approval input", "show it here instead")
    card.get_by_role("button", name="Reject").click()
    end = turn_end(page, 4)
    expect(end).to_have_attribute("data-reason", "completed")
    expect(page.locator(".msg.assistant").last).to_contain_text("show it here instead")


def start_serve(work, args):
    """`buddy serve` on a free port in `work` with `args`; its base URL and process."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BUDDY), "serve", "--listen", f"127.0.0.1:{port}", "--db", str(work / "buddy.db"),
         "--api-key", KEY] + args,
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1)
            return base, proc
        except OSError:
            assert proc.poll() is None, "buddy serve exited"
            assert time.time() < deadline, "buddy serve did not start"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def asking_server():
    """A `buddy serve` whose model (buddy's mock server playing `signup`, an HTTP provider:
    MCP tools go to those turns) calls the tool of an MCP server that elicits."""
    work = Path(tempfile.mkdtemp(prefix="buddy-browser-asking-"))
    scenarios = work / "scenarios"
    scenarios.mkdir()
    (scenarios / "signup.json").write_text(json.dumps(SIGNUP))
    (work / "asking.py").write_text(ASKING_SERVER)
    mock_port = free_port()
    mock = subprocess.Popen(
        [str(BUDDY), "mock-server", "--listen", f"127.0.0.1:{mock_port}", "--scenarios", str(scenarios)],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    (work / "buddy.toml").write_text(
        f'[providers.mock]\nkind = "openai"\nbase_url = "http://127.0.0.1:{mock_port}/v1"\nmodel = "signup"\n'
        '[[mcp]]\nname = "asking"\ncommand = ["python3", "asking.py"]\n'
        '[approval.skills]\n"asking__signup" = "never"\n'
    )
    base, proc = start_serve(work, [])
    yield {"url": base}
    for p in (proc, mock):
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(work, ignore_errors=True)


def test_a_servers_question_is_a_form_whose_answer_reaches_the_server(page, asking_server):
    open_page(page, asking_server)
    ask(page, "signup", "sign me up")
    form = page.locator("form.elicitation")
    expect(form).to_be_visible(timeout=20000)
    expect(form).to_contain_text("asking asks: Who signs up?")
    # The fields in the order the server wrote them (not by key), defaults filled in and named.
    expect(form.locator(".field")).to_have_count(5)
    assert form.locator(".field > .label").all_inner_texts() == ["Your name *", "Plan", "Age *", "Newsletter", "Topics"]
    expect(form).to_contain_text("adults only")
    expect(form.locator('[data-name="plan"] .default')).to_have_text("default: basic")
    expect(form.locator('select[name="plan"] option:checked')).to_have_text("basic")
    expect(form.locator('[data-name="topics"] .default')).to_have_text("default: news")
    # The multi-select is a checkbox per choice, the default's ticked.
    topics = form.locator('fieldset[data-name="topics"] input[type="checkbox"]')
    expect(topics).to_have_count(3)
    assert [topics.nth(i).is_checked() for i in range(3)] == [True, False, False]
    expect(page.locator(".card.waiting")).to_contain_text("waiting for your answer")
    # Each field is checked as it is answered: a misfit is said beside it at once.
    form.locator('input[name="name"]').fill("Ada")
    form.locator('select[name="plan"]').select_option("pro")
    form.locator('input[name="age"]').fill("12")
    form.locator('input[name="age"]').press("Tab")
    age_problem = form.locator('[data-name="age"] .field-error')
    expect(age_problem).to_have_text("must be at least 18")
    form.locator('input[name="newsletter"]').check()
    # None of the topics: too few, said at once.
    form.locator('fieldset[data-name="topics"]').get_by_label("News").uncheck()
    expect(form.locator('[data-name="topics"] .field-error')).to_have_text("pick at least 1")
    form.locator('fieldset[data-name="topics"]').get_by_label("Events").check()
    expect(form.locator('[data-name="topics"] .field-error')).to_have_text("")
    # Submitted with a misfit, nothing goes; the form stays with the field marked.
    form.get_by_role("button", name="Submit").click()
    expect(form.locator(".error").last).to_contain_text("Some fields need another answer")
    expect(form).to_be_visible()
    form.locator('input[name="age"]').fill("36")
    form.get_by_role("button", name="Submit").click()
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    expect(page.locator("form.elicitation")).to_have_count(0)
    expect(page.locator(".msg.assistant").last).to_contain_text(
        'Result: server got {"action": "accept", "content": {"age": 36, "name": "Ada", "newsletter": true, "plan": "pro", "topics": ["events"]}}'
    )

    # Declined: the server hears that too.
    ask(page, "signup", "sign me up again")
    form = page.locator("form.elicitation")
    expect(form).to_be_visible(timeout=20000)
    form.get_by_role("button", name="Decline").click()
    turn_end(page, 2)
    expect(page.locator(".msg.assistant").last).to_contain_text('Result: server got {"action": "decline"}')
    assert page.errors == []


# An MCP server (stdio) whose `export` reports its progress (1 of 2, "waiting for the
# go-ahead"), waits for a file `go` in its directory, then reports 2 of 2 and answers:
# the page shows the progress on the running call's card.
PROGRESS_SERVER = r"""
import json, os, sys, time
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "slowly", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "export", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        token = params["_meta"]["progressToken"]
        def progress(n, message):
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                  "progressToken": token, "progress": n, "total": 2, "message": message}})
        progress(1, "waiting for the go-ahead")
        deadline = time.time() + 60
        while not os.path.exists("go") and time.time() < deadline:
            time.sleep(0.05)
        progress(2, "writing")
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "exported"}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"""

SLOW = {
    "name": "slow", "prompt": "export it",
    "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
    "rules": [
        {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "slowly__export", "arguments": {}}]}},
        {"when": {}, "reply": {"text": "Result: {last_result}"}},
    ],
}


@pytest.fixture(scope="module")
def progress_server():
    """A `buddy serve` whose model (buddy's mock server playing `slow`) calls the tool of
    an MCP server that reports its progress and waits for the test's go-ahead."""
    work = Path(tempfile.mkdtemp(prefix="buddy-browser-progress-"))
    scenarios = work / "scenarios"
    scenarios.mkdir()
    (scenarios / "slow.json").write_text(json.dumps(SLOW))
    (work / "slowly.py").write_text(PROGRESS_SERVER)
    mock_port = free_port()
    mock = subprocess.Popen(
        [str(BUDDY), "mock-server", "--listen", f"127.0.0.1:{mock_port}", "--scenarios", str(scenarios)],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    (work / "buddy.toml").write_text(
        f'[providers.mock]\nkind = "openai"\nbase_url = "http://127.0.0.1:{mock_port}/v1"\nmodel = "slow"\n'
        '[[mcp]]\nname = "slowly"\ncommand = ["python3", "slowly.py"]\n'
        '[approval.skills]\n"slowly__export" = "never"\n'
    )
    base, proc = start_serve(work, [])
    yield {"url": base, "work": work}
    for p in (proc, mock):
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(work, ignore_errors=True)


def test_a_running_calls_progress_shows_on_its_card(page, progress_server):
    open_page(page, progress_server)
    ask(page, "slow", "export it")
    status = page.locator(".card.running .status")
    expect(status).to_have_text("1/2 · waiting for the go-ahead…", timeout=20000)
    (progress_server["work"] / "go").write_text("")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    expect(page.locator(".card.done .status")).to_contain_text("done")
    expect(page.locator(".msg.assistant").last).to_contain_text("Result: exported")
    assert page.errors == []


def test_conversations_can_be_renamed_and_deleted(page, server):
    open_page(page, server)
    ask(page, "scripted:offline_assistant", "What time is it?")
    turn_end(page)
    current = page.locator("#conversations li.current")
    expect(current).to_have_count(1)
    current.get_by_role("button", name="Rename").click()
    page.fill("#rename-input", "Clock check")
    page.press("#rename-input", "Enter")
    expect(page.locator("#conversations li.current .open")).to_contain_text("Clock check")
    page.on("dialog", lambda d: d.accept())
    page.locator("#conversations li.current").get_by_role("button", name="Delete").click()
    expect(page.locator("#conversations li", has_text="Clock check")).to_have_count(0)
    expect(page.locator(".empty-hint")).to_be_visible()


def test_usable_on_a_phone_and_by_keyboard(browser, server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    open_page(page, server)
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    page.click("#open-sidebar")
    expect(page.locator("#sidebar")).to_be_in_viewport()
    page.click("#close-sidebar")
    # Keyboard only: focus the message box, type, Enter.
    page.focus("#message")
    page.keyboard.type("What time is it?")
    page.keyboard.press("Enter")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
    context.close()


def luminance(css_color):
    """WCAG relative luminance of an `rgb(r, g, b)` colour."""
    channels = [int(x) / 255 for x in css_color[css_color.index("(") + 1:css_color.index(")")].split(",")[:3]]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_readable_in_light_and_dark_mode(browser, server, scheme):
    context = browser.new_context(color_scheme=scheme)
    page = context.new_page()
    open_page(page, server)
    ask(page, "scripted:ab_cycle", "Should I take an umbrella?")
    turn_end(page)
    for selector in ["body", ".msg.assistant", ".card .result", ".notice", ".turn-end .reason"]:
        node = page.locator(selector).first
        fg = luminance(node.evaluate("e => getComputedStyle(e).color"))
        bg = luminance(page.locator("body").evaluate("e => getComputedStyle(e).backgroundColor"))
        # WCAG contrast ratio of the text against the page background.
        hi, lo = max(fg, bg), min(fg, bg)
        ratio = (hi + 0.05) / (lo + 0.05)
        assert ratio >= 4.5, f"{scheme}: {selector} contrast {ratio:.1f}"
    bg = luminance(page.locator("body").evaluate("e => getComputedStyle(e).backgroundColor"))
    assert (bg < 0.2) if scheme == "dark" else (bg > 0.8)
    context.close()


def test_edit_and_resend_makes_a_version_of_the_conversation_and_keeps_the_original(page, server):
    open_page(page, server)
    ask(page, "scripted:offline_assistant", "What time is it?")
    turn_end(page)
    original = page.evaluate("location.hash")[1:]
    expect(page.locator(f"#conversations li[data-id='{original}']")).to_have_count(1)
    listed = page.locator("#conversations li").count()
    row = page.locator(".user-row").first
    row.get_by_role("button", name="Edit and resend this message").click()
    page.fill(".user-row textarea", "List the files, please")
    page.locator(".user-row").get_by_role("button", name="Send").click()
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    expect(page.locator(".msg.user")).to_have_text("List the files, please")
    fork = page.evaluate("location.hash")[1:]
    assert fork != original and fork.startswith("conv_"), (original, fork)
    # One entry in the list for both versions (the message went into the fork itself).
    expect(page.locator(f"#conversations li[data-ids~='{fork}']")).to_have_attribute("data-ids", re.compile(original))
    expect(page.locator("#conversations li")).to_have_count(listed)
    expect(page.locator("#conversations li.current")).to_contain_text("What time is it?")
    # The original is version 1 of the message, untouched.
    expect(page.locator(".versions .count")).to_have_text("2 / 2")
    page.get_by_role("button", name="Previous version").click()
    expect(page).to_have_url(re.compile(f"#{original}$"))
    expect(page.locator(".msg.user")).to_have_text("What time is it?")
    expect(page.locator(".versions .count")).to_have_text("1 / 2")
    expect(page.get_by_role("button", name="Next version")).to_be_focused()
    page.reload()
    turn_end(page)
    expect(page.locator(".versions .count")).to_have_text("1 / 2")
    assert not page.errors, page.errors


def assert_steps_drawn_once(page):
    """The `steps` turn on the page: every event drawn once, in order, and its end."""
    expect(turn_end(page)).to_have_attribute("data-reason", "completed")
    expect(page.locator(".turn-end")).to_have_count(1)
    assert page.locator(".card .name").all_text_contents() == ["step_1", "step_2", "step_3"]
    texts = [t.strip() for t in page.locator(".msg.assistant").all_text_contents()]
    assert texts == ["Working on step 1.", "Working on step 2.", "Working on step 3.", "All three steps are done."], texts
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.locator(".reconnecting")).to_have_count(0)
    expect(page.locator("#send")).to_be_visible()


def test_a_reload_mid_turn_reattaches_and_completes_with_nothing_lost_or_doubled(page, server):
    open_page(page, server)
    ask(page, "scripted:steps", "go step by step")
    expect(page.locator(".card.done")).to_have_count(1, timeout=10000)
    expect(page).to_have_url(re.compile(r"#conv_"))
    page.reload()
    # The key is kept for the tab; the turn is picked up where it is, shown running.
    expect(page.locator("#stop")).to_be_visible()
    assert_steps_drawn_once(page)
    assert page.locator("#model").input_value() == "scripted:steps"
    assert not page.errors, page.errors


def test_a_killed_connection_reattaches_from_the_last_event_it_had(page, server):
    open_page(page, server)
    asked = []
    page.on("request", lambda r: asked.append(r.headers.get("last-event-id")) if "/events" in r.url else None)

    def cut_short(route):
        # The stream breaks after the opening and two events: the page must fetch the rest.
        body = route.fetch().text()
        kept = "\n\n".join(body.split("\n\n")[:3]) + "\n\n"
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=kept)

    page.route("**/v1/chat", cut_short)
    ask(page, "scripted:steps", "go step by step")
    assert_steps_drawn_once(page)
    assert asked and asked[0] == "2", asked
    assert not page.errors, page.errors


def test_the_model_picker_keeps_the_conversations_model(page, server):
    open_page(page, server)
    ask(page, "scripted:chain_3_steps", "How much was Ada's latest order?")
    turn_end(page)
    page.select_option("#model", "scripted:offline_assistant")
    page.reload()
    expect(page.locator(".turn-end")).to_have_count(1)
    expect(page.locator("#model")).to_have_value("scripted:chain_3_steps")
    # A conversation opened from the list brings its model too.
    page.click("#new-chat")
    page.select_option("#model", "scripted:offline_assistant")
    page.locator("#conversations li .open").first.click()
    expect(page.locator("#model")).to_have_value("scripted:chain_3_steps")


def test_regenerate_makes_a_second_version_with_the_earlier_turns_complete(page, server):
    open_page(page, server)
    ask(page, "scripted:chain_3_steps", "How much was Ada's latest order?")
    turn_end(page)
    ask(page, "scripted:offline_assistant", "What time is it?")
    turn_end(page, 2)
    original = page.evaluate("location.hash")[1:]
    first_stats = page.locator(".turn-end .stats").first.inner_text()
    listed = page.locator("#conversations li").count()
    page.get_by_role("button", name="Regenerate this answer").last.click()
    expect(page).not_to_have_url(re.compile(f"#{original}$"))
    expect(turn_end(page, 2)).to_have_attribute("data-reason", "completed")
    fork = page.evaluate("location.hash")[1:]
    # The question asked again once, with its new answer; the earlier turn as it was: its
    # end line, its Regenerate button and the durations of its calls.
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator(".msg.user").last).to_have_text("What time is it?")
    expect(page.locator(".turn-end").first.locator(".stats")).to_have_text(first_stats)
    expect(page.locator(".turn-end").first.get_by_role("button", name="Regenerate this answer")).to_have_count(1)
    expect(page.locator(".card .status").first).to_have_text(re.compile(r"^done · \d+ ms$"))
    # One entry in the list; ‹ 2 / 2 › at the regenerated question only.
    expect(page.locator("#conversations li")).to_have_count(listed)
    expect(page.locator(f"#conversations li.current[data-ids~='{original}']")).to_have_count(1)
    expect(page.locator(".versions")).to_have_count(1)
    expect(page.locator(".versions + .user-row .msg.user")).to_have_text("What time is it?")
    expect(page.locator(".versions .count")).to_have_text("2 / 2")
    expect(page.get_by_role("button", name="Next version")).to_be_disabled()
    page.get_by_role("button", name="Previous version").click()
    expect(page).to_have_url(re.compile(f"#{original}$"))
    expect(page.locator(".versions .count")).to_have_text("1 / 2")
    expect(page.locator(".turn-end")).to_have_count(2)
    page.get_by_role("button", name="Next version").click()
    expect(page).to_have_url(re.compile(f"#{fork}$"))
    expect(page.locator(".versions .count")).to_have_text("2 / 2")
    assert not page.errors, page.errors


def test_search_finds_conversations_by_title_and_by_text(page, server):
    open_page(page, server)
    ask(page, "scripted:chain_3_steps", "How much was Ada's latest order?")
    turn_end(page)
    ada = page.evaluate("location.hash")[1:]
    page.click("#new-chat")
    ask(page, "scripted:offline_assistant", "What time is it?")
    turn_end(page, 1)
    clock = page.evaluate("location.hash")[1:]
    # Words only the first conversation's answer holds (not its title).
    page.fill("#search", "129.90 EUR")
    expect(page.locator(f"#conversations li[data-id='{ada}']")).to_have_count(1)
    expect(page.locator(f"#conversations li[data-id='{clock}']")).to_have_count(0)
    # Words, not a phrase: each of them, in any order.
    page.fill("#search", "latest ADA")
    expect(page.locator(f"#conversations li[data-id='{ada}']")).to_have_count(1)
    expect(page.locator(f"#conversations li[data-id='{clock}']")).to_have_count(0)
    page.fill("#search", "WHAT TIME")
    expect(page.locator("#conversations li .open").first).to_contain_text("What time is it?")
    page.fill("#search", "zebra-unicorn")
    expect(page.locator("#conversations li.none")).to_contain_text("No conversation")
    page.fill("#search", "")
    expect(page.locator("#conversations li .open").nth(1)).to_be_attached()


def test_a_conversation_exports_as_markdown_and_json(page, server):
    open_page(page, server)
    ask(page, "scripted:chain_3_steps", "How much was Ada's latest order?")
    turn_end(page)
    with page.expect_download() as info:
        page.click("#export-md")
    markdown = Path(info.value.path()).read_text()
    assert info.value.suggested_filename.endswith(".md")
    assert "## You\n\nHow much was Ada's latest order?" in markdown
    assert "**Tool call `find_user`**" in markdown and "129.90" in markdown
    assert "Turn ended: Answered (completed)" in markdown
    with page.expect_download() as info:
        page.click("#export-json")
    exported = json.loads(Path(info.value.path()).read_text())
    assert exported["id"] == page.evaluate("location.hash")[1:]
    assert [m["role"] for m in exported["messages"]][0] == "user"
    assert exported["turns"][0]["stop_reason"] == "completed"


def test_copy_puts_an_answer_and_a_code_block_on_the_clipboard(browser, server):
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server["url"])
    page = context.new_page()
    open_page(page, server)
    ask(page, "scripted:code", "show me the code")
    turn_end(page)
    page.get_by_role("button", name="Copy this answer").click()
    expect(page.get_by_role("button", name="Copy this answer")).to_have_attribute("data-copied", "yes")
    assert page.evaluate("navigator.clipboard.readText()") == CODE_ANSWER
    page.get_by_role("button", name="Copy this code").click()
    assert page.evaluate("navigator.clipboard.readText()").strip() == 'fn main() {\n    println!("hi"); // greet\n}'
    # The code is highlighted, as text: keywords, strings and comments in spans.
    assert page.locator(".msg.assistant pre .hl-keyword").first.text_content() == "fn"
    assert page.locator(".msg.assistant pre .hl-string").first.text_content() == '"hi"'
    assert page.locator(".msg.assistant pre .hl-comment").first.text_content() == "// greet"
    context.close()


def test_the_theme_toggle_goes_light_dark_and_back_to_the_system_and_is_kept(browser, server):
    context = browser.new_context(color_scheme="light")
    page = context.new_page()
    open_page(page, server)
    background = lambda: luminance(page.locator("body").evaluate("e => getComputedStyle(e).backgroundColor"))
    expect(page.locator("#theme")).to_have_text("Theme: system")
    assert background() > 0.8
    page.click("#theme")
    expect(page.locator("#theme")).to_have_text("Theme: light")
    assert background() > 0.8
    page.click("#theme")
    expect(page.locator("#theme")).to_have_text("Theme: dark")
    assert background() < 0.2
    page.reload()
    expect(page.locator("#theme")).to_have_text("Theme: dark")
    assert background() < 0.2
    page.click("#theme")
    expect(page.locator("#theme")).to_have_text("Theme: system")
    assert background() > 0.8
    context.close()


def test_the_page_has_an_icon_and_a_skip_link(page, server):
    icon = urllib.request.urlopen(server["url"] + "/favicon.ico", timeout=5)
    assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
    open_page(page, server)
    # The first thing a keyboard reaches, shown when focused, and it leads to the message box.
    first = page.evaluate("document.querySelector('a, button, input, select, textarea').className")
    assert first == "skip-link"
    page.locator(".skip-link").focus()
    expect(page.locator(".skip-link")).to_be_in_viewport()
    hash = page.evaluate("location.hash")
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_be_focused()
    assert page.evaluate("location.hash") == hash


def test_the_page_leaves_focus_where_a_person_put_it_while_it_loads(page, server):
    # The list is held back; meanwhile a keyboard user reaches the skip link. When loading
    # ends, the page must not pull the focus to the message box.
    held = hold_first_list(page)
    open_page(page, server)
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the list request was held"
    page.locator(".skip-link").focus()
    held[0].continue_()
    expect(page.locator(".empty-hint")).to_be_visible()
    expect(page.locator(".skip-link")).to_be_focused()
    expect(page.locator(".skip-link")).to_be_in_viewport()


def conversation_settings(page):
    """The open conversation's settings, as the server keeps them."""
    return page.evaluate(
        """async (key) => {
            const r = await fetch(`/v1/conversations/${location.hash.slice(1)}`, {headers: {authorization: `Bearer ${key}`}});
            return (await r.json()).settings;
        }""",
        KEY,
    )


def test_conversation_settings_stay_with_the_conversation_and_limit_its_turns(page, server):
    open_page(page, server)
    # Set before the first message: they go with it and stay with the conversation.
    page.get_by_role("button", name="Conversation settings").click()
    page.fill("#settings-system", "Answer like a ship's log.")
    page.fill("#settings-max_tool_calls", "1")
    page.fill("#settings-deadline_s", "120")
    page.locator("#settings-form").get_by_role("button", name="Save").click()
    expect(page.locator("#settings-dialog")).not_to_be_visible()
    expect(page.locator("#settings")).to_have_class(re.compile(r"\bset\b"))
    ask(page, "scripted:chain_3_steps", "How much was Ada's latest order?")
    expect(turn_end(page)).to_have_attribute("data-reason", "max_tool_calls")
    expect(page.locator(".card.done")).to_have_count(1)
    assert conversation_settings(page) == {
        "system": "Answer like a ship's log.",
        "policy": {"max_tool_calls": 1, "deadline_ms": 120000},
    }
    # After a reload the dialog shows them; a limit above the server's is refused in it.
    page.reload()
    turn_end(page)
    page.get_by_role("button", name="Conversation settings (some set)").click()
    expect(page.locator("#settings-system")).to_have_value("Answer like a ship's log.")
    expect(page.locator("#settings-max_tool_calls")).to_have_value("1")
    expect(page.locator("#settings-deadline_s")).to_have_value("120")
    page.fill("#settings-max_tool_calls", "5000")
    page.locator("#settings-form").get_by_role("button", name="Save").click()
    expect(page.locator("#settings-error")).to_contain_text("max_tool_calls")
    expect(page.locator("#settings-dialog")).to_be_visible()
    # Lifted: the next turn in the same conversation runs its three steps.
    page.fill("#settings-max_tool_calls", "")
    page.locator("#settings-form").get_by_role("button", name="Save").click()
    expect(page.locator("#settings-dialog")).not_to_be_visible()
    ask(page, "scripted:chain_3_steps", "And the order before?")
    expect(turn_end(page, 2)).to_have_attribute("data-reason", "completed")
    assert conversation_settings(page) == {"system": "Answer like a ship's log.", "policy": {"deadline_ms": 120000}}
    # Regenerate: the fork keeps them. A new chat starts with none.
    page.get_by_role("button", name="Regenerate this answer").last.click()
    expect(turn_end(page, 2)).to_have_attribute("data-reason", "completed")
    assert conversation_settings(page)["system"] == "Answer like a ship's log."
    page.click("#new-chat")
    expect(page.get_by_role("button", name="Conversation settings", exact=True)).to_be_visible()
    page.get_by_role("button", name="Conversation settings", exact=True).click()
    expect(page.locator("#settings-system")).to_have_value("")
    page.click("#settings-cancel")
    assert not page.errors, page.errors


def test_an_approved_call_is_one_card_that_runs_and_ends(page, server):
    open_page(page, server)
    ask(page, "scripted:writer", "write a haiku")
    expect(turn_end(page)).to_have_attribute("data-reason", "approval_required")
    card = page.locator(".card", has_text="write_file")
    expect(card).to_have_count(1)
    card.get_by_role("button", name="Approve").click()
    expect(turn_end(page, 2)).to_have_attribute("data-reason", "completed")
    # The call is shown once, no longer waiting, with its outcome.
    expect(card).to_have_count(1)
    expect(page.locator(".card.waiting")).to_have_count(0)
    expect(card.locator(".status")).to_have_text(re.compile(r"^done"))
    expect(page.get_by_text("waiting for your approval")).to_have_count(0)
    page.reload()
    expect(page.locator(".turn-end")).to_have_count(2)
    expect(card).to_have_count(1)
    expect(card.locator(".status")).to_have_text(re.compile(r"^done"))
    assert not page.errors, page.errors


def test_one_copy_button_per_answer_not_per_narration_line(browser, server):
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server["url"])
    page = context.new_page()
    open_page(page, server)
    ask(page, "scripted:narrated", "narrate")
    turn_end(page)
    ask(page, "scripted:narrated", "narrate again")
    turn_end(page, 2)

    def one_per_answer():
        expect(page.locator(".msg.assistant")).to_have_count(6)
        copies = page.get_by_role("button", name="Copy this answer")
        expect(copies).to_have_count(2)
        # Each beside its turn's answer, the text the turn ended with.
        for n in range(2):
            expect(copies.nth(n).locator("xpath=..").locator(".msg.assistant")).to_have_text("Both parts look fine.")

    one_per_answer()
    page.get_by_role("button", name="Copy this answer").first.click()
    assert page.evaluate("navigator.clipboard.readText()") == "Both parts look fine."
    page.reload()
    turn_end(page, 2)
    one_per_answer()
    context.close()


def test_the_running_icon_is_drawn_without_an_emoji_font(page, server):
    open_page(page, server)
    ask(page, "scripted:slow", "take your time")
    status = page.locator(".card.running .status")
    expect(status).to_have_count(1)
    icon = status.evaluate(
        """e => { const s = getComputedStyle(e, '::before');
                  return {content: s.content, width: parseFloat(s.width), border: parseFloat(s.borderTopWidth), animation: s.animationName}; }"""
    )
    # No character (an emoji font may lack it): a ring drawn by CSS, turning.
    assert icon["content"] in ('""', "none", "normal") or not re.search(r"[^\x00-\x7f]", icon["content"]), icon
    assert icon["content"].strip('"') == "", icon
    assert icon["width"] > 0 and icon["border"] > 0 and icon["animation"] != "none", icon
    page.click("#stop")
    expect(turn_end(page)).to_have_attribute("data-reason", "cancelled")


def step_seconds(page):
    """Each card's duration, in seconds, as its status shows it."""
    statuses = page.locator(".card .status").all_inner_texts()
    seconds = []
    for status in statuses:
        found = re.search(r"· ([\d.]+) (ms|s)$", status)
        assert found, statuses
        seconds.append(float(found[1]) / (1000 if found[2] == "ms" else 1))
    return seconds


def test_steps_show_their_true_durations_after_a_reload_mid_turn_and_once_stored(page, server):
    open_page(page, server)
    ask(page, "scripted:steps", "go step by step")
    expect(page.locator(".card.done")).to_have_count(1, timeout=10000)
    page.wait_for_timeout(400)
    # Reloaded while step 2 runs: it is timed from when it started, not from the reload.
    page.reload()
    assert_steps_drawn_once(page)
    seconds = step_seconds(page)
    assert len(seconds) == 3 and all(s >= 1.2 for s in seconds), seconds
    # Stored: each step's duration from the store's times (a call alone in its round).
    page.reload()
    turn_end(page)
    stored = step_seconds(page)
    assert len(stored) == 3 and all(1.2 <= s < 5 for s in stored), stored
    assert not page.errors, page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_blockquotes_are_set_apart_and_readable(browser, server, scheme):
    context = browser.new_context(color_scheme=scheme)
    page = context.new_page()
    open_page(page, server)
    ask(page, "scripted:quote", "quote someone")
    turn_end(page)
    quote = page.locator(".msg.assistant blockquote")
    expect(quote).to_have_text(re.compile("Measure twice"))
    style = quote.evaluate(
        """e => { const s = getComputedStyle(e);
                  return {border: parseFloat(s.borderLeftWidth), style: s.borderLeftStyle, color: s.color,
                          background: s.backgroundColor, margin: parseFloat(s.marginLeft), padding: parseFloat(s.paddingLeft)}; }"""
    )
    assert style["border"] >= 3 and style["style"] == "solid", style
    assert style["margin"] < 20 and style["padding"] > 0, style
    fg, bg = luminance(style["color"]), luminance(style["background"])
    hi, lo = max(fg, bg), min(fg, bg)
    assert (hi + 0.05) / (lo + 0.05) >= 4.5, (scheme, style)
    context.close()


def test_sub_agents_are_collapsible_blocks_nested_in_their_callers_turn(page, server):
    open_page(page, server)
    ask(page, "scripted:delegating", "Sum up the archive.")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    # The turn's figures cover the whole tree, and its cost is known.
    expect(end.locator(".stats")).to_contain_text("10 model calls · 7 tool calls")
    expect(end.locator(".stats")).to_contain_text("$")
    # The top level's own calls are its cards; its answer is its own text.
    top_calls = page.locator("#transcript > .cards .card .name").all_inner_texts()
    assert top_calls == ["lead", "reader"], top_calls
    expect(page.locator("#transcript > .answer-row .msg.assistant").last).to_have_text("All done: 2 reports.")
    # One block per sub-agent started by the top level, closed, each with its stop reason,
    # calls and cost.
    blocks = page.locator("#transcript > details.agent")
    expect(blocks).to_have_count(2)
    lead = page.locator('#transcript > details.agent[data-agent="lead"]')
    expect(lead.locator("> .head .path")).to_have_text("lead")
    expect(lead.locator("> .head .task")).to_have_text("the archive")
    expect(lead).to_have_attribute("data-reason", "completed")
    expect(lead.locator("> .head > .status")).to_have_text("Answered")
    # The lead's figures count its readers' too: 2 + 2 × 2 model calls, 2 + 2 tool calls.
    expect(lead.locator("> .head .agent-stats")).to_contain_text("6 model calls · 4 tool calls")
    expect(lead.locator("> .head .agent-stats")).to_contain_text("$")
    expect(lead.locator("> .agent-body")).not_to_be_visible()
    # Opened: its own calls, and the readers it started, nested one level deeper.
    lead.locator("> .head").click()
    own = lead.locator("> .agent-body > .cards .card .name").all_inner_texts()
    assert own == ["reader", "reader"], own
    nested = lead.locator("> .agent-body > details.agent")
    expect(nested).to_have_count(2)
    expect(nested.first.locator("> .head .path")).to_have_text("lead › reader")
    expect(nested.first.locator("> .head .agent-stats")).to_contain_text("2 model calls · 1 tool call")
    nested.first.locator("> .head").click()
    expect(nested.first.locator(".card .name")).to_have_text("lookup")
    expect(nested.first.locator(".msg.assistant").last).to_contain_text("Read part one: entry for part one")
    # The reader the top level started directly is a block of its own, not nested.
    reader = page.locator('#transcript > details.agent[data-agent="reader"]')
    expect(reader.locator("> .head .path")).to_have_text("reader")
    expect(reader.locator("> .head .agent-stats")).to_contain_text("2 model calls · 1 tool call")
    # No child's text or call leaked into the top level's own rows.
    assert "Reading" not in " ".join(page.locator("#transcript > .answer-row").all_inner_texts())
    assert "lookup" not in top_calls
    # The calls that started them say how each ended, with its calls and cost.
    lead_call = page.locator("#transcript > .cards .card").first
    expect(lead_call.locator(".status")).to_contain_text("answered · 6 model calls · 4 tool calls · $")
    shoot(page, "sub-agents")
    # Reloaded, the stored calls still say so, and the blocks are drawn again from the
    # turn's events (the conversation keeps the calls' outcomes, not the agents' steps):
    # each after the row of its call, nested as before, with its figures.
    page.reload()
    turn_end(page)
    expect(page.locator("#transcript > .cards .card").first.locator(".status")).to_contain_text("answered · 6 model calls")
    expect(blocks).to_have_count(2)
    lead = page.locator('#transcript > details.agent[data-agent="lead"]')
    expect(lead).to_have_attribute("data-reason", "completed")
    expect(lead.locator("> .head .task")).to_have_text("the archive")
    expect(lead.locator("> .head .agent-stats")).to_contain_text("6 model calls · 4 tool calls")
    expect(lead.locator("> .agent-body > details.agent")).to_have_count(2)
    assert page.locator("#transcript > details.agent").evaluate_all(
        "bs => bs.map(b => b.previousElementSibling.matches('.cards, details.agent'))"
    ) == [True, True]
    expect(page.locator("#transcript > .answer-row .msg.assistant").last).to_have_text("All done: 2 reports.")
    assert not page.errors, page.errors


def helper_blocks_are_whole(page):
    """The two helpers' blocks of `slow_helpers`, each once, ended, with its task and its
    own three steps, not the other's."""
    blocks = page.locator("#transcript > details.agent")
    expect(blocks).to_have_count(2, timeout=20000)
    for n, part in enumerate(["part one", "part two"]):
        block = blocks.nth(n)
        expect(block).to_have_attribute("data-reason", "completed", timeout=20000)
        expect(block.locator("> .head .task")).to_have_text(part)
        expect(block.locator("> .head .agent-stats")).to_contain_text("3 model calls · 2 tool calls")
        expect(block.locator(".card")).to_have_count(2)
        args = block.locator(".card .args").all_text_contents()
        assert all(part in a for a in args), args


def test_sub_agent_blocks_are_drawn_again_after_a_reload_mid_turn_and_after_the_end(page, server):
    open_page(page, server)
    ask(page, "scripted:slow_helpers", "Check both parts.")
    # Reloaded while both helpers run: the page reattaches and draws their blocks again.
    expect(page.locator("#transcript > details.agent")).to_have_count(2, timeout=20000)
    page.reload()
    # Still running: the page reattached, and the blocks are there again before the end.
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator("#transcript > details.agent")).to_have_count(2)
    expect(page.locator("#transcript > details.agent.running")).not_to_have_count(0)
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    helper_blocks_are_whole(page)
    # Reloaded after the end: drawn from the store and the turn's kept events.
    page.reload()
    turn_end(page)
    helper_blocks_are_whole(page)
    expect(page.locator("#transcript > .answer-row .msg.assistant").last).to_have_text("Both parts checked.")
    assert not page.errors, page.errors


def test_the_built_in_research_tree_shows_each_researcher_complete(page, server):
    open_page(page, server)
    ask(page, "scripted:subagents_research", "Compare the three archives.")
    end = turn_end(page)
    expect(end).to_have_attribute("data-reason", "completed")
    expect(end.locator(".stats")).to_contain_text("26 model calls · 24 tool calls")
    blocks = page.locator("#transcript > details.agent")
    expect(blocks).to_have_count(3)
    for n, archive in enumerate("ABC"):
        block = blocks.nth(n)
        expect(block).to_have_attribute("data-reason", "completed")
        expect(block.locator("> .head .task")).to_have_text(f"archive {archive}")
        expect(block.locator("> .head .agent-stats")).to_contain_text("8 model calls · 7 tool calls")
        expect(block.locator(".card")).to_have_count(7)
    expect(page.locator("#transcript > .answer-row .msg.assistant").last).to_contain_text("Comparison of the 3 reports")
    assert not page.errors, page.errors


def test_a_page_on_a_listed_origin_calls_the_api_and_another_origins_page_cannot(browser):
    """`[server] cors_origins`: a page served from another origin (another port) calls the
    API with its key from Chromium; the same page reached by an unlisted origin's name is
    refused by the browser (no CORS answer)."""
    import http.server
    import threading

    work = Path(tempfile.mkdtemp(prefix="buddy-cors-"))
    site = work / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>another app</title>")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(site), **k)
    pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    page_port = pages.server_address[1]
    listed = f"http://127.0.0.1:{page_port}"
    (work / "buddy.toml").write_text(f'[server]\ncors_origins = ["{listed}"]\n')
    port = free_port()
    proc = subprocess.Popen(
        [str(BUDDY), "serve", "--listen", f"127.0.0.1:{port}", "--db", str(work / "buddy.db"),
         "--api-key", KEY],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    api = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(api + "/healthz", timeout=1)
                break
            except OSError:
                assert proc.poll() is None, "buddy serve exited"
                assert time.time() < deadline, "buddy serve did not start"
                time.sleep(0.1)
        call = """async ([api, key]) => {
            try {
                const r = await fetch(api + "/v1/chat/completions", {method: "POST",
                    headers: {"authorization": "Bearer " + key, "content-type": "application/json"},
                    body: JSON.stringify({model: "scripted:plain_chat",
                                          messages: [{role: "user", content: "hi"}]})});
                return {status: r.status, stop: r.headers.get("buddy-stop-reason"),
                        text: (await r.json()).choices[0].message.content};
            } catch (e) { return {error: String(e)}; }
        }"""
        context = browser.new_context()
        page = context.new_page()
        page.goto(listed + "/index.html")
        got = page.evaluate(call, [api, KEY])
        assert got.get("status") == 200, got
        assert got["text"], got
        # The same page by another name is another origin, and not listed.
        page.goto(f"http://localhost:{page_port}/index.html")
        refused = page.evaluate(call, [api, KEY])
        assert "error" in refused and "Failed to fetch" in refused["error"], refused
        context.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        pages.shutdown()
        shutil.rmtree(work, ignore_errors=True)
