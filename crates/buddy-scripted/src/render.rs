//! Matching a request against the rules and rendering the chosen reply.

use buddy_core::{CompletionRequest, FinishReason, Message, ProviderError, ToolCall};
use serde_json::Value;

use crate::rules::{Condition, ReplyTemplate};
use crate::scenario::Scenario;

/// A rendered reply.
pub(crate) struct Rendered {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Option<FinishReason>,
    /// The model server refuses the request: (HTTP status, message).
    pub error: Option<(u16, String)>,
}

/// What the rules can see of a request.
struct View<'a> {
    tools: Vec<&'a str>,
    system: &'a str,
    has_user: bool,
    latest_user: &'a str,
    tool_results: usize,
    round: usize,
    last_result: Option<(&'a str, bool)>,
    /// buddy's note, when it is the request's last message.
    last_note: Option<&'a str>,
}

impl<'a> View<'a> {
    fn of(request: &CompletionRequest<'a>) -> Self {
        let messages = request.messages;
        let latest_user_at = messages.iter().rposition(Message::is_user);
        let after_user = latest_user_at.map_or(messages, |i| &messages[i + 1..]);
        View {
            tools: request
                .callable_tools()
                .iter()
                .map(|t| t.name.as_str())
                .collect(),
            system: messages
                .iter()
                .find_map(|m| match m {
                    Message::System { content } => Some(content.as_str()),
                    _ => None,
                })
                .unwrap_or(""),
            has_user: latest_user_at.is_some(),
            latest_user: latest_user_at
                .and_then(|i| messages[i].text())
                .unwrap_or(""),
            tool_results: messages
                .iter()
                .filter(|m| matches!(m, Message::Tool { .. }))
                .count(),
            round: 1 + after_user
                .iter()
                .filter(|m| matches!(m, Message::Assistant { .. }))
                .count(),
            last_result: messages.iter().rev().find_map(|m| match m {
                Message::Tool {
                    content, is_error, ..
                } => Some((content.as_str(), *is_error)),
                _ => None,
            }),
            last_note: match messages.last() {
                Some(Message::Note { content }) => Some(content.as_str()),
                Some(Message::User { content, .. }) if Message::is_note_text(content) => {
                    Some(content.as_str())
                }
                _ => None,
            },
        }
    }

    fn matches(&self, when: &Condition) -> bool {
        let check = |cond: Option<bool>, actual: bool| cond.is_none_or(|want| want == actual);
        check(when.tools_offered, !self.tools.is_empty())
            && when
                .tool_offered
                .as_deref()
                .is_none_or(|t| self.tools.contains(&t))
            && when
                .system_contains
                .as_deref()
                .is_none_or(|s| self.system.to_lowercase().contains(&s.to_lowercase()))
            && check(when.has_user_message, self.has_user)
            && when
                .user_contains
                .as_deref()
                .is_none_or(|s| self.latest_user.to_lowercase().contains(&s.to_lowercase()))
            && when.tool_results.is_none_or(|n| self.tool_results == n)
            && when.min_tool_results.is_none_or(|n| self.tool_results >= n)
            && when
                .tool_results_below
                .is_none_or(|n| self.tool_results < n)
            && when.round.is_none_or(|n| self.round == n)
            && when
                .round_mod
                .is_none_or(|[m, r]| m > 0 && self.round % m == r)
            && when
                .last_result_contains
                .as_deref()
                .is_none_or(|s| self.last_result.is_some_and(|(r, _)| r.contains(s)))
            && when
                .last_result_is_error
                .is_none_or(|want| self.last_result.is_some_and(|(_, e)| e == want))
            && when.last_note_contains.as_deref().is_none_or(|s| {
                self.last_note
                    .is_some_and(|n| n.to_lowercase().contains(&s.to_lowercase()))
            })
    }

    fn fill(&self, template: &str) -> String {
        let last = self
            .last_result
            .map_or("", |(r, _)| r.lines().next().unwrap_or(""));
        template
            .replace("{n}", &self.round.to_string())
            .replace("{results}", &self.tool_results.to_string())
            .replace("{last_result}", last)
            .replace("{user}", self.latest_user)
    }

    fn fill_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) if s == "{n}" => Value::from(self.round),
            Value::String(s) if s == "{results}" => Value::from(self.tool_results),
            Value::String(s) => Value::String(self.fill(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.fill_value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.fill_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The reply of the first matching rule, or an error naming what the request looked like.
/// `reply_number` counts this model's replies from 1; it numbers the call ids.
pub(crate) fn respond(
    scenario: &Scenario,
    request: &CompletionRequest<'_>,
    reply_number: usize,
) -> Result<Rendered, ProviderError> {
    let view = View::of(request);
    let rule = scenario.rules.iter().find(|r| view.matches(&r.when)).ok_or_else(|| ProviderError::Scripted {
        scenario: scenario.name.clone(),
        message: format!(
            "no rule matches this request ({} messages, tools offered: [{}], user message: {}, tool results: {}, \
             round: {}); add a rule with an empty `when` as the last rule",
            request.messages.len(),
            view.tools.join(", "),
            view.has_user,
            view.tool_results,
            view.round
        ),
    })?;
    Ok(render(&view, &rule.reply, reply_number))
}

fn render(view: &View<'_>, reply: &ReplyTemplate, k: usize) -> Rendered {
    let tool_calls: Vec<ToolCall> = reply
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let arguments = match &call.raw_arguments {
                Some(raw) => raw.clone(),
                None => view.fill_value(&call.arguments).to_string(),
            };
            let id = call.id.clone().unwrap_or_else(|| format!("call_{k}_{i}"));
            ToolCall::new(id, call.name.clone(), arguments)
        })
        .collect();
    let finish = match &reply.finish {
        Some(wire) => FinishReason::from_wire(wire),
        None if tool_calls.is_empty() => FinishReason::Stop,
        None => FinishReason::ToolCalls,
    };
    Rendered {
        text: reply
            .text
            .as_deref()
            .map(|t| view.fill(t))
            .unwrap_or_default(),
        tool_calls,
        finish: Some(finish),
        error: reply
            .error
            .as_ref()
            .map(|e| (e.status, view.fill(&e.message))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::{ToolCall, ToolSpec};
    use serde_json::json;

    fn scenario(rules: serde_json::Value) -> Scenario {
        let text = json!({
            "name": "t", "prompt": "p",
            "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
            "rules": rules,
        });
        Scenario::parse(&text.to_string(), "test").unwrap()
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn the_first_matching_rule_answers_with_filled_placeholders() {
        let s = scenario(json!([
            {"when": {"has_user_message": false}, "reply": {"tool_calls": [{"name": "get_rules"}]}},
            {"when": {"tool_offered": "search", "tool_results_below": 2},
             "reply": {"text": "round {n}", "tool_calls": [{"name": "search", "arguments": {"q": "x {n}", "page": "{n}"}}]}},
            {"when": {"last_result_contains": "found"}, "reply": {"text": "It says: {last_result} ({results} results, you said {user})"}},
            {"when": {}, "reply": {"text": "fallback"}}
        ]));
        let tools = [spec("search")];
        let mut history = vec![Message::user("hi")];
        let r = respond(
            &s,
            &CompletionRequest::new("m", &history).with_tools(&tools),
            1,
        )
        .unwrap();
        assert_eq!(r.text, "round 1");
        assert_eq!(
            r.tool_calls,
            vec![ToolCall::new(
                "call_1_0",
                "search",
                r#"{"page":1,"q":"x 1"}"#
            )]
        );
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));

        history.push(Message::Assistant {
            content: None,
            tool_calls: r.tool_calls.clone(),
        });
        history.push(Message::tool_result(
            "call_1_0",
            "found it\nsecond line",
            false,
        ));
        let r = respond(
            &s,
            &CompletionRequest::new("m", &history).with_tools(&tools),
            2,
        )
        .unwrap();
        assert_eq!(
            r.tool_calls[0].id, "call_2_0",
            "ids count the model's replies"
        );
        assert_eq!(r.tool_calls[0].arguments, r#"{"page":2,"q":"x 2"}"#);

        let r = respond(&s, &CompletionRequest::new("m", &history), 1).unwrap();
        assert_eq!(r.text, "It says: found it (1 results, you said hi)");
        assert_eq!(r.finish, Some(FinishReason::Stop));

        let r = respond(&s, &CompletionRequest::new("m", &[Message::system("s")]), 1).unwrap();
        assert_eq!(r.tool_calls[0].name, "get_rules");
    }

    #[test]
    fn round_resets_at_each_user_message_and_round_mod_alternates() {
        let s = scenario(json!([
            {"when": {"round_mod": [2, 1]}, "reply": {"text": "odd"}},
            {"when": {}, "reply": {"text": "even", "finish": "length", "tool_calls": [{"name": "t", "raw_arguments": "{oops"}]}}
        ]));
        let mut history = vec![Message::user("a"), Message::assistant("x")];
        let r = respond(&s, &CompletionRequest::new("m", &history), 1).unwrap();
        assert_eq!(
            (r.text.as_str(), r.finish.clone()),
            ("even", Some(FinishReason::Length))
        );
        assert_eq!(r.tool_calls[0].arguments, "{oops");
        history.push(Message::user("b"));
        assert_eq!(
            respond(&s, &CompletionRequest::new("m", &history), 2)
                .unwrap()
                .text,
            "odd"
        );
    }

    /// On the server a client may declare tools of its own (`tools` of Chat Completions
    /// or Responses); a scripted model that does not call them must still answer, not
    /// fail with "no rule matches" (a 502).
    #[test]
    fn every_builtin_scenario_answers_a_request_that_offers_a_client_tool() {
        for scenario in crate::library::builtin().unwrap() {
            let mut tools: Vec<ToolSpec> = scenario
                .tools
                .iter()
                .map(|tool| match tool {
                    crate::scenario::ScenarioTool::Builtin { builtin } => spec(builtin),
                    crate::scenario::ScenarioTool::Stub(stub) => spec(&stub.name),
                })
                .collect();
            tools.push(spec("client_lookup"));
            let history = [Message::user(scenario.prompt.as_str())];
            let request = CompletionRequest::new("m", &history).with_tools(&tools);
            if let Err(e) = respond(&scenario, &request, 1) {
                panic!("scenario `{}` with a client tool: {e}", scenario.name);
            }
        }
    }

    #[test]
    fn no_matching_rule_is_a_clear_error() {
        let s = scenario(json!([{"when": {"tools_offered": true}, "reply": {"text": "x"}}]));
        let err = respond(&s, &CompletionRequest::new("m", &[Message::user("u")]), 1)
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(
            text.contains("scripted model `t`") && text.contains("no rule matches"),
            "{text}"
        );
    }

    #[test]
    fn scenario_files_are_checked() {
        let err = Scenario::parse(r#"{"name":"x","prompt":"p","expect":{"stop_reason":"completed","model_calls":1,"tool_calls":0},"rules":[]}"#, "f.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("f.json") && err.contains("no rules"), "{err}");
        let err = Scenario::parse(r#"{"name":"x","prompt":"p","expect":{"stop_reason":"done","model_calls":1,"tool_calls":0},"rules":[]}"#, "f.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("done"), "{err}");
    }
}
