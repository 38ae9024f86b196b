//! A stdio server's process and transport, with a tap on what it writes: rmcp 3.9
//! reads `tools/list` into types that drop a tool's `execution` (MCP 2025-11-25, its
//! `taskSupport`) and `initialize` into capabilities without `tasks`; the tap reads
//! those from the server's lines as they pass, so buddy knows which tools take only
//! task-augmented calls, and whether the server takes any, when it lists them.

use std::collections::HashMap;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

/// The longest line the tap keeps to read; a longer one passes unread.
const MAX_TAPPED_LINE: usize = 8 * 1024 * 1024;
/// How long a closed server has to exit before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// What the tap read of the server's answers on the current connection.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Declared {
    /// Each listed tool's `execution.taskSupport`, when it gave one.
    pub task_support: HashMap<String, String>,
    /// Whether its `initialize` answer declared `tasks.requests.tools.call`; `None`
    /// before that answer.
    pub tasks_for_tools: Option<bool>,
}

impl Declared {
    /// Notes what one line from the server declares.
    fn read(&mut self, line: &[u8]) {
        let wanted = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
        if !wanted(b"\"execution\"") && !wanted(b"\"protocolVersion\"") {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let Some(result) = message.get("result") else {
            return;
        };
        if result.get("protocolVersion").is_some() && result.get("capabilities").is_some() {
            let call = result.pointer("/capabilities/tasks/requests/tools/call");
            self.tasks_for_tools = Some(call.is_some_and(Value::is_object));
        }
        for tool in result
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = tool.get("name").and_then(Value::as_str);
            let support = tool
                .pointer("/execution/taskSupport")
                .and_then(Value::as_str);
            if let (Some(name), Some(support)) = (name, support) {
                self.task_support
                    .insert(name.to_owned(), support.to_owned());
            }
        }
    }
}

/// The server's stdout, its lines read by the tap as they pass to rmcp.
pub(crate) struct Tap<R> {
    inner: R,
    line: Vec<u8>,
    /// Set while the current line is too long to keep.
    skipping: bool,
    declared: Arc<Mutex<Declared>>,
}

impl<R> Tap<R> {
    fn take(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let ends = piece.last() == Some(&b'\n');
            if !self.skipping {
                if self.line.len() + piece.len() > MAX_TAPPED_LINE {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            if ends {
                if !self.skipping
                    && let Ok(mut declared) = self.declared.lock()
                {
                    declared.read(&self.line);
                }
                self.line.clear();
                self.skipping = false;
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Tap<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            this.take(&buf.filled()[before..]);
        }
        polled
    }
}

/// A started stdio server: its process and the transport over its stdin and stdout.
pub(crate) struct ChildTransport {
    child: Option<Child>,
    io: AsyncRwTransport<RoleClient, Tap<ChildStdout>, ChildStdin>,
}

/// Starts `command` (its stdio piped, killed when dropped) with a tap on its stdout
/// that notes what it declares in `declared` (cleared first).
pub(crate) fn spawn(
    mut command: tokio::process::Command,
    declared: &Arc<Mutex<Declared>>,
) -> std::io::Result<(ChildTransport, Option<ChildStderr>)> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other(
            "the server's stdio could not be taken",
        ));
    };
    let stderr = child.stderr.take();
    if let Ok(mut declared) = declared.lock() {
        *declared = Declared::default();
    }
    let tap = Tap {
        inner: stdout,
        line: Vec::new(),
        skipping: false,
        declared: Arc::clone(declared),
    };
    let io = AsyncRwTransport::new_client(tap, stdin);
    Ok((
        ChildTransport {
            child: Some(child),
            io,
        },
        stderr,
    ))
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    /// Closes its stdin (the MCP stdio shutdown), waits a moment for it to exit, then
    /// kills it.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.io.close().await?;
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_err()
        {
            child.kill().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tap_reads_task_support_and_the_tasks_capability_across_chunks() {
        let declared = Arc::new(Mutex::new(Declared::default()));
        let mut tap = Tap {
            inner: tokio::io::empty(),
            line: Vec::new(),
            skipping: false,
            declared: Arc::clone(&declared),
        };
        let hello = br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}}"#;
        let tools = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"research","execution":{"taskSupport":"required"}},{"name":"echo"}]}}"#;
        let mut bytes = Vec::new();
        for line in [&hello[..], &tools[..]] {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
        }
        for chunk in bytes.chunks(7) {
            tap.take(chunk);
        }
        let declared = declared.lock().unwrap().clone();
        assert_eq!(declared.tasks_for_tools, Some(true));
        assert_eq!(
            declared.task_support,
            HashMap::from([("research".to_owned(), "required".to_owned())])
        );
    }

    #[test]
    fn a_server_without_tasks_and_a_line_that_is_not_json_are_read_as_such() {
        let mut declared = Declared::default();
        declared.read(br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}}"#);
        declared.read(br#"not json "execution" at all"#);
        assert_eq!(declared.tasks_for_tools, Some(false));
        assert!(declared.task_support.is_empty());
    }
}
