//! A toolbox whose tools change while a turn runs (an MCP server's list change): the
//! next model call offers the new list, and calls go to the new tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use buddy_core::{
    BoxFuture, Message, RepeatSemantics, SkillContext, StopReason, ToolCall, ToolOutcome, ToolSpec,
    Toolbox,
};
use buddy_engine::LoopPolicy;
use buddy_testkit::{RecordingProvider, ReplyProvider, TestTool, TestToolbox, reply_tokens};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{call, run_turn};

/// Offers `first` until its tool has been called, then `second`.
struct Changing {
    generation: Arc<AtomicU64>,
    first: Arc<TestToolbox>,
    second: Arc<TestToolbox>,
}

impl Toolbox for Changing {
    fn specs(&self) -> &[ToolSpec] {
        self.first.specs()
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.first.semantics(name)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.first.invoke(call, ctx)
    }
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move {
            let generation = self.generation.load(Ordering::SeqCst);
            let current: Arc<dyn Toolbox> = if generation == 0 {
                Arc::clone(&self.first) as _
            } else {
                Arc::clone(&self.second) as _
            };
            Some((generation, current))
        })
    }
}

#[tokio::test]
async fn the_next_call_offers_the_changed_tool_list() {
    let generation = Arc::new(AtomicU64::new(0));
    let bump = Arc::clone(&generation);
    let first = TestToolbox::new().with(
        "install_plugin",
        TestTool::new(move |_, _| {
            bump.fetch_add(1, Ordering::SeqCst);
            ToolOutcome::ok("installed; a new tool is available")
        }),
    );
    let second = TestToolbox::new()
        .with("install_plugin", TestTool::echo())
        .with(
            "plugin_search",
            TestTool::new(|_, _| ToolOutcome::ok("found 3 results")),
        );
    let toolbox = Changing {
        generation,
        first: Arc::new(first),
        second: Arc::new(second),
    };
    let provider = RecordingProvider::new(ReplyProvider::new(|_, i| {
        Ok(match i {
            0 => reply_tokens("", vec![call("1", "install_plugin", json!({}))]),
            1 => reply_tokens("", vec![call("2", "plugin_search", json!({"q": "x"}))]),
            _ => reply_tokens("The plugin found 3 results.", vec![]),
        })
    }));
    let requests = provider.requests();
    let (_, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    let offered: Vec<Option<Vec<String>>> = requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.tools.clone())
        .collect();
    assert_eq!(
        offered,
        vec![
            Some(vec!["install_plugin".to_owned()]),
            Some(vec![
                "install_plugin".to_owned(),
                "plugin_search".to_owned()
            ]),
            Some(vec![
                "install_plugin".to_owned(),
                "plugin_search".to_owned()
            ]),
        ]
    );
    assert!(outcome.messages.iter().any(|m| matches!(m,
        Message::Tool { tool_call_id, content, is_error: false } if tool_call_id == "2" && content == "found 3 results")));
}
