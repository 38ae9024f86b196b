//! A stdio server's stderr: passed to buddy's log a bounded line at a time, its last
//! lines kept to explain why the server failed.

use std::sync::{Arc, Mutex};

/// Longest line of a server's stderr passed to the log.
const STDERR_LINE_BYTES: usize = 4096;

/// The last lines a stdio server wrote to stderr, kept to explain why it failed.
pub(super) type StderrTail = Arc<Mutex<std::collections::VecDeque<String>>>;

/// Lines of a server's stderr kept for its errors.
const STDERR_TAIL_LINES: usize = 8;

fn keep_line(tail: &StderrTail, line: &[u8]) {
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    if text.is_empty() {
        return;
    }
    if let Ok(mut tail) = tail.lock() {
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    }
}

/// Passes a stdio server's stderr to buddy's log, a line at a time and bounded, so a
/// server that writes without end neither fills memory nor blocks on a full pipe; the
/// last lines are kept in `tail`.
pub(super) async fn log_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: StderrTail,
) {
    use tokio::io::AsyncReadExt;
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut chunk = vec![0u8; STDERR_LINE_BYTES];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' || line.len() >= STDERR_LINE_BYTES {
                tracing::debug!(server = %server, "MCP server stderr: {}", String::from_utf8_lossy(&line));
                keep_line(&tail, &line);
                line.clear();
            }
            if byte != b'\n' {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        tracing::debug!(server = %server, "MCP server stderr: {}", String::from_utf8_lossy(&line));
        keep_line(&tail, &line);
    }
}
