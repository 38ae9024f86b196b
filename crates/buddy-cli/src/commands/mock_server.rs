//! `buddy mock-server`: the scripted scenarios served as an OpenAI-compatible model.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use buddy_scripted::library;
use buddy_scripted::mock_server::MockServer;
use clap::Args;

/// `buddy mock-server`.
#[derive(Args, Debug)]
pub struct MockServerArgs {
    /// Address to listen on (port 0 picks one; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    listen: String,
    /// Directory of scenarios to serve (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Append every request, one JSON object per line, to this file.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Wait this long before answering each request (simulates model latency).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    latency_ms: u64,
}

/// Runs the mock server until Ctrl-C.
pub async fn mock_server(args: MockServerArgs) -> anyhow::Result<u8> {
    let scenarios = library::load(args.scenarios.as_deref())?.0;
    let log: Option<Box<dyn std::io::Write + Send>> = match &args.log {
        Some(path) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log {}", path.display()))?,
        )),
        None => None,
    };
    let count = scenarios.len();
    let server = MockServer::new(scenarios, Duration::from_millis(args.latency_ms), log);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    eprintln!(
        "buddy mock-server on http://{}/v1 ({count} scenarios)",
        listener.local_addr()?
    );
    server
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(0)
}
