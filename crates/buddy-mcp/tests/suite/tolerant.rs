//! A tolerant start: a server that is not `required` and cannot start is left out (its
//! state says why), the others run, and it joins when it comes up; a required one still
//! stops the start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::Toolbox;
use buddy_mcp::{McpServerConfig, McpSource, McpToolbox, ServerState, ToolboxError};
use buddy_skills::SkillRegistry;

use super::{npm_server, time_server};

fn registry() -> buddy_mcp::RegistryFactory {
    Box::new(SkillRegistry::new)
}

fn names(toolbox: &dyn Toolbox) -> Vec<String> {
    toolbox.specs().iter().map(|s| s.name.clone()).collect()
}

fn optional(mut config: McpServerConfig) -> McpServerConfig {
    config.required = false;
    config.startup_timeout_secs = 10.0;
    config
}

#[tokio::test]
async fn servers_that_cannot_start_are_left_out_and_the_rest_run() {
    let missing = optional(McpServerConfig::stdio("ghost", &["/no/such/server"]));
    // A server that exits at once, saying why on stderr.
    let quits = optional(McpServerConfig::stdio(
        "quits",
        &["sh", "-c", "echo 'docker: not running' >&2; exit 3"],
    ));
    let time = McpServerConfig::stdio("time", &[&time_server()]);
    let sources: Vec<_> = [missing, quits, time]
        .into_iter()
        .map(McpSource::new)
        .collect();
    let toolbox = McpToolbox::start(Arc::new(SkillRegistry::new()), sources.clone(), registry())
        .await
        .unwrap();
    let tools = names(&toolbox);
    assert!(
        tools.contains(&"time__get_current_time".to_owned()),
        "{tools:?}"
    );
    assert!(
        tools.iter().all(|t| t.starts_with("time__")),
        "the broken servers offer nothing: {tools:?}"
    );
    let ServerState::Down(why) = sources[0].state() else {
        panic!("{:?}", sources[0].state())
    };
    assert!(why.contains("/no/such/server"), "{why}");
    let ServerState::Down(why) = sources[1].state() else {
        panic!("{:?}", sources[1].state())
    };
    assert!(why.contains("docker: not running"), "{why}");

    // The same broken server, required (buddy.toml's default): the start stops, naming it.
    let required = McpServerConfig::stdio("ghost", &["/no/such/server"]);
    assert!(required.required, "[[mcp]] entries are required by default");
    let err = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![
            McpSource::new(required),
            McpSource::new(McpServerConfig::stdio("time", &[&time_server()])),
        ],
        registry(),
    )
    .await
    .err()
    .expect("a required server that cannot start stops the start");
    assert!(matches!(err, ToolboxError::Server(_)), "{err}");
    assert!(err.to_string().contains("MCP server `ghost`"), "{err}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An HTTP server nobody listens for yet: buddy starts without it; the server starts
/// on that port afterwards and its tools join the table (retried with backoff).
#[tokio::test]
async fn an_unreachable_server_joins_when_it_comes_up() {
    let port = free_port();
    let web = optional(McpServerConfig::http(
        "web",
        &format!("http://127.0.0.1:{port}/mcp"),
    ));
    let source = McpSource::new(web);
    let toolbox = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![Arc::clone(&source)],
        registry(),
    )
    .await
    .unwrap();
    assert_eq!(names(&toolbox), Vec::<String>::new());
    assert!(
        matches!(source.state(), ServerState::Down(_)),
        "{:?}",
        source.state()
    );

    let _server = tokio::process::Command::new(npm_server("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let (_, now) = toolbox.refreshed().await;
        if names(now.as_ref()).contains(&"web__echo".to_owned()) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the server never joined: {:?}",
            source.state()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        matches!(source.state(), ServerState::Running { .. }),
        "{:?}",
        source.state()
    );
}
