use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::*;

/// Answers every call with the tool's name and a tag, so a test sees who ran it.
struct Echo(&'static str);

impl ToolRunner for Echo {
    fn invoke<'a>(&'a self, call: &'a ToolCall, _ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        let text = format!("{} ran {}", self.0, call.name);
        Box::pin(async move { ToolOutcome::ok(text) })
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        _ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        let text = format!("{} resumed {} on {}", self.0, call.name, task.task_id);
        Some(Box::pin(async move { ToolOutcome::ok(text) }))
    }
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object"}),
    }
}

fn entry(name: &str, kind: ToolKind, by: &'static str) -> ToolEntry {
    ToolEntry::run_by(
        spec(name),
        RepeatSemantics::Observed,
        kind,
        Arc::new(Echo(by)),
    )
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: format!("call_{name}"),
        name: name.to_owned(),
        arguments: "{}".into(),
    }
}

fn names(toolbox: &dyn Toolbox) -> Vec<String> {
    toolbox.specs().iter().map(|s| s.name.clone()).collect()
}

/// An MCP-like source: its list is replaced by `set`, which bumps the generation.
#[derive(Default)]
struct Changing {
    generation: AtomicU64,
    entries: Mutex<Vec<ToolEntry>>,
}

impl Changing {
    fn set(&self, entries: Vec<ToolEntry>) {
        if let Ok(mut now) = self.entries.lock() {
            *now = entries;
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl LiveTools for Changing {
    fn current(&self) -> BoxFuture<'_, (u64, Arc<[ToolEntry]>)> {
        let entries: Arc<[ToolEntry]> = match self.entries.lock() {
            Ok(now) => now.iter().cloned().collect(),
            Err(_) => Arc::from(Vec::new()),
        };
        let generation = self.generation.load(Ordering::SeqCst);
        Box::pin(async move { (generation, entries) })
    }
}

#[tokio::test]
async fn sources_are_offered_in_order_and_each_call_reaches_its_runner() {
    let table = ToolTable::builder()
        .entries([entry("read", ToolKind::Skill, "registry")])
        .entries([entry("search", ToolKind::Mcp, "mcp")])
        .client_tools([spec("shell")])
        .build()
        .await
        .unwrap();
    assert_eq!(names(&table), ["read", "search", "shell"]);
    let ran = table.invoke(&call("search"), SkillContext::default()).await;
    assert_eq!(ran, ToolOutcome::ok("mcp ran search"));
    assert!(table.is_external("shell"));
    assert!(!table.is_external("read"));
    assert_eq!(table.semantics("shell"), Some(RepeatSemantics::Effectful));
    let client = table.invoke(&call("shell"), SkillContext::default()).await;
    assert!(
        client.is_error && client.content.contains("client"),
        "{client:?}"
    );
    // A fixed table never changes: the engine is told so.
    assert!(table.latest().await.is_none());
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_naming_the_tools_on_offer() {
    let table = ToolTable::builder()
        .entries([entry("read", ToolKind::Skill, "r")])
        .entries([entry("helper", ToolKind::Agent, "a").hidden()])
        .build()
        .await
        .unwrap();
    let outcome = table.invoke(&call("raed"), SkillContext::default()).await;
    assert_eq!(
        outcome,
        ToolOutcome::error(
            "unknown tool `raed`. Available tools: read. Call one of these by its exact name."
        )
    );
    // A hidden entry is not offered but still answers, typed by its runner.
    assert_eq!(names(&table), ["read"]);
    assert!(table.is_agent("helper"));
    let hidden = table.invoke(&call("helper"), SkillContext::default()).await;
    assert_eq!(hidden, ToolOutcome::ok("a ran helper"));
}

#[tokio::test]
async fn a_name_given_twice_is_refused_with_the_later_kind() {
    let clash = ToolTable::builder()
        .entries([entry("read", ToolKind::Skill, "r")])
        .client_tools([spec("read")])
        .build()
        .await
        .unwrap_err();
    assert_eq!(
        clash,
        DuplicateTool {
            name: "read".into(),
            kind: ToolKind::Client
        }
    );
}

#[tokio::test]
async fn a_table_over_a_table_takes_its_entries_as_they_are() {
    let base = ToolTable::builder()
        .entries([entry("read", ToolKind::Skill, "r")])
        .entries([entry("writer", ToolKind::Agent, "a")])
        .entries([entry("secret", ToolKind::Agent, "a").hidden()])
        .build()
        .await
        .unwrap();
    let base: Arc<dyn Toolbox> = Arc::new(base);
    let skills_only = ToolTable::builder()
        .toolbox_keeping(Arc::clone(&base), Keep::NotAgents)
        .build()
        .await
        .unwrap();
    assert_eq!(names(&skills_only), ["read"]);
    assert!(skills_only.entry("secret").is_none());
    let named = ToolTable::builder()
        .toolbox_keeping(base, Keep::Named(Arc::new(|n: &str| n != "read")))
        .build_now()
        .unwrap();
    assert_eq!(names(&named), ["writer"]);
    assert!(named.entry("secret").is_some_and(|e| !e.offered));
}

#[tokio::test]
async fn resume_goes_to_the_entrys_runner_and_a_client_tool_cannot() {
    let table = ToolTable::builder()
        .entries([entry("research", ToolKind::Mcp, "mcp")])
        .client_tools([spec("shell")])
        .build()
        .await
        .unwrap();
    let task = RecordedTask {
        server: "s".into(),
        task_id: "t1".into(),
    };
    let research = call("research");
    let resumed = table.resume(&research, &task, SkillContext::default());
    assert_eq!(
        resumed.unwrap().await,
        ToolOutcome::ok("mcp resumed research on t1")
    );
    assert!(
        table
            .resume(&call("shell"), &task, SkillContext::default())
            .is_none()
    );
}

/// `latest()` takes a new snapshot for every kind of source: a live source's list
/// change reaches a table built over it with client tools beside it (what a Chat
/// Completions turn with client tools and an MCP server sees).
#[tokio::test]
async fn latest_follows_a_live_source_under_client_tools() {
    let mcp = Arc::new(Changing::default());
    mcp.set(vec![entry("search", ToolKind::Mcp, "v1")]);
    let server = ToolTable::builder()
        .entries([entry("read", ToolKind::Skill, "r")])
        .live(Arc::clone(&mcp) as Arc<dyn LiveTools>)
        .build()
        .await
        .unwrap();
    let turn = ToolTable::builder()
        .toolbox(Arc::new(server))
        .client_tools([spec("shell")])
        .build_now()
        .unwrap();
    assert_eq!(names(&turn), ["read", "search", "shell"]);
    let (first, same) = turn.latest().await.unwrap();
    assert_eq!(names(&*same), ["read", "search", "shell"]);

    mcp.set(vec![
        entry("search", ToolKind::Mcp, "v2"),
        entry("fetch", ToolKind::Mcp, "v2"),
    ]);
    let (second, now) = turn.latest().await.unwrap();
    assert!(second > first, "the generation moves: {first} -> {second}");
    assert_eq!(names(&*now), ["read", "search", "fetch", "shell"]);
    assert!(now.is_external("shell"));
    let ran = now.invoke(&call("fetch"), SkillContext::default()).await;
    assert_eq!(ran, ToolOutcome::ok("v2 ran fetch"));
    // Asked again without a change: the same generation.
    let (third, _) = now.latest().await.unwrap();
    assert_eq!(third, second);
}

#[tokio::test]
async fn a_change_that_names_a_tool_twice_keeps_the_earlier_list() {
    let mcp = Arc::new(Changing::default());
    mcp.set(vec![entry("search", ToolKind::Mcp, "v1")]);
    let table = ToolTable::builder()
        .live(Arc::clone(&mcp) as Arc<dyn LiveTools>)
        .client_tools([spec("shell")])
        .build()
        .await
        .unwrap();
    mcp.set(vec![entry("shell", ToolKind::Mcp, "v2")]);
    let (_, now) = table.latest().await.unwrap();
    assert_eq!(names(&*now), ["search", "shell"]);
    assert!(now.is_external("shell"));
}

/// Any toolbox can be a source: its tools keep their kind (agent, client) and its calls
/// go through it.
#[tokio::test]
async fn a_plain_toolbox_is_a_source_with_its_kinds() {
    struct Plain(Vec<ToolSpec>);
    impl Toolbox for Plain {
        fn specs(&self) -> &[ToolSpec] {
            &self.0
        }
        fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
            self.0
                .iter()
                .any(|s| s.name == name)
                .then_some(RepeatSemantics::Pure)
        }
        fn invoke<'a>(&'a self, call: &'a ToolCall, _: SkillContext) -> BoxFuture<'a, ToolOutcome> {
            let text = format!("plain ran {}", call.name);
            Box::pin(async move { ToolOutcome::ok(text) })
        }
        fn is_agent(&self, name: &str) -> bool {
            name == "helper"
        }
        fn is_external(&self, name: &str) -> bool {
            name == "shell"
        }
    }
    let plain = Plain(vec![spec("read"), spec("helper"), spec("shell")]);
    let table = ToolTable::builder()
        .toolbox(Arc::new(plain))
        .build()
        .await
        .unwrap();
    let kinds: Vec<(ToolKind, RepeatSemantics)> = table
        .entries()
        .iter()
        .map(|e| (e.kind, e.semantics))
        .collect();
    assert_eq!(
        kinds,
        [
            (ToolKind::Skill, RepeatSemantics::Pure),
            (ToolKind::Agent, RepeatSemantics::Pure),
            (ToolKind::Client, RepeatSemantics::Pure),
        ]
    );
    let ran = table.invoke(&call("helper"), SkillContext::default()).await;
    assert_eq!(ran, ToolOutcome::ok("plain ran helper"));
}

/// A table built without waiting leaves a live source's entries for the first look, even
/// when that source never changed (its generation is still 0).
#[tokio::test]
async fn a_table_built_now_takes_its_live_entries_at_the_first_look() {
    let mcp = Arc::new(Changing::default());
    if let Ok(mut now) = mcp.entries.lock() {
        *now = vec![entry("search", ToolKind::Mcp, "v0")];
    }
    let table = ToolTable::builder()
        .entries([entry("read", ToolKind::Skill, "r")])
        .live(Arc::clone(&mcp) as Arc<dyn LiveTools>)
        .build_now()
        .unwrap();
    assert_eq!(names(&table), ["read"]);
    let (generation, now) = table.latest().await.unwrap();
    assert_eq!(generation, 0);
    assert_eq!(names(&*now), ["read", "search"]);
}
