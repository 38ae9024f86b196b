//! A server's form at the terminal (`buddy run` on a pseudo-terminal): fields in the
//! order the server wrote them, each checked as it is answered (only a misfit asked
//! again), numbered choices and a multi-select, defaults taken on Enter; and an
//! unattended run that says what it declined.

use std::path::Path;

/// A stdio MCP server whose `signup` asks for `FORM` over `input_required` (its fields
/// deliberately not in key order) and answers with what came back.
const FORM_SERVER: &str = r#"
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
FORM = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Your name", "minLength": 1},
    "plan": {"type": "string", "title": "Plan", "enum": ["basic", "pro"], "default": "basic"},
    "age": {"type": "integer", "title": "Age", "minimum": 18, "description": "adults only"},
    "newsletter": {"type": "boolean", "title": "Newsletter", "default": False},
    "topics": {"type": "array", "title": "Topics", "minItems": 1, "default": ["news"],
               "items": {"anyOf": [{"const": "news", "title": "News"},
                                   {"const": "offers", "title": "Offers"},
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
              "inputRequests": {"who": {"method": "elicitation/create", "params": {"mode": "form",
                  "message": "Who signs up?", "requestedSchema": FORM}}}}})
    elif method == "tools/call":
        got = json.dumps(params["inputResponses"]["who"], sort_keys=True)
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "got " + got}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

/// The form server and a scenario that calls it once, in `dir`.
fn form_server(dir: &Path) {
    std::fs::write(dir.join("form.py"), FORM_SERVER).unwrap();
    std::fs::write(
        dir.join("buddy.toml"),
        "[[mcp]]\nname = \"asking\"\ncommand = [\"python3\", \"form.py\"]\n",
    )
    .unwrap();
    let scenario = r#"{"name": "signup", "prompt": "sign me up", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
      "rules": [
        {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "asking__signup", "arguments": {}}]}},
        {"when": {}, "reply": {"text": "Result: {last_result}"}}]}"#;
    std::fs::write(dir.join("signup.json"), scenario).unwrap();
}

const ARGS: [&str; 5] = ["run", "--scenario", "signup.json", "--approval", "never"];

/// Where `needle` first shows in `text` (panics naming it when it does not).
fn at(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not shown: {text}"))
}

#[test]
fn the_form_is_asked_in_the_servers_order_each_field_checked_as_it_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    form_server(dir.path());
    let (code, text) = super::approvals::on_terminal(
        dir.path(),
        &[
            ("[a]nswer / [d]ecline / [c]ancel: ", "a\r"),
            ("Your name *", "\r"),
            ("This field is required; again:", "Ada\r"),
            ("Plan [1 basic / 2 pro] (Enter: basic)", "3\r"),
            ("`3` is not one of the choices (1 to 2); again:", "2\r"),
            ("Age * — adults only (integer)", "12\r"),
            ("Age: must be at least 18; again:", "36\r"),
            ("Newsletter [y/n] (Enter: n)", "\r"),
            (
                "Topics [1 News / 2 Offers / 3 Events] (any of them: numbers or names, comma-separated) (Enter: news)",
                "2, events\r",
            ),
        ],
        &ARGS,
    );
    assert_eq!(code, Some(0), "{text}");
    // In the order the server wrote, not by key (age, name, newsletter, plan, topics).
    let order = ["Your name *", "Plan [", "Age *", "Newsletter [", "Topics ["];
    let places: Vec<usize> = order.iter().map(|label| at(&text, label)).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{places:?}: {text}");
    // The age's misfit was said at once and only the age asked again: each field's
    // label shows once, and nothing was refused as a whole form.
    for label in order {
        assert_eq!(text.matches(label).count(), 1, "{label}: {text}");
    }
    assert!(!text.contains("does not fit the form"), "{text}");
    // The newsletter's default was taken on Enter; the topics picked by number and name.
    assert!(
        text.contains(
            r#"Result: got {"action": "accept", "content": {"age": 36, "name": "Ada", "newsletter": false, "plan": "pro", "topics": ["offers", "events"]}}"#
        ),
        "{text}"
    );
}

#[test]
fn enter_takes_every_default_and_a_multi_select_below_its_count_is_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    form_server(dir.path());
    let (code, text) = super::approvals::on_terminal(
        dir.path(),
        &[
            ("[a]nswer / [d]ecline / [c]ancel: ", "a\r"),
            ("Your name *", "Grace\r"),
            ("Plan [", "\r"),
            ("Age *", "40\r"),
            ("Newsletter [", "\r"),
            ("Topics [", " , \r"),
            ("Topics: must have at least 1 choices; again:", "\r"),
        ],
        &ARGS,
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(
            r#"Result: got {"action": "accept", "content": {"age": 40, "name": "Grace", "newsletter": false, "plan": "basic", "topics": ["news"]}}"#
        ),
        "{text}"
    );
}

/// Nobody at the terminal: the decline is said on stderr (what was asked, its fields in
/// order, that nobody could answer, the setting that decided) and the model is told too.
#[test]
fn an_unattended_decline_says_what_was_asked_and_which_setting_answered() {
    let dir = tempfile::tempdir().unwrap();
    form_server(dir.path());
    let out = super::buddy(dir.path()).args(ARGS).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "? MCP server `asking` asked the person \"Who signs up?\" (fields: name, plan, age, newsletter, topics), \
             but nobody was there to answer (this turn runs unattended): buddy answered `decline`, \
             as the setting `unattended_elicitation = \"decline\"` says"
        ),
        "{stderr}"
    );
    let out = super::buddy(dir.path())
        .args(ARGS)
        .args(["--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let resolved: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "elicitation_resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{stdout}");
    assert_eq!(resolved[0]["action"], "decline");
    assert!(
        resolved[0]["unattended"]
            .as_str()
            .is_some_and(|s| s.contains("unattended_elicitation")),
        "{stdout}"
    );
    // The model read it too: the recording's history holds the note after the result.
    assert!(
        stdout.contains("While call") && stdout.contains("nobody was there to answer"),
        "{stdout}"
    );
}
