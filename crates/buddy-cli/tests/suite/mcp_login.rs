//! `buddy mcp login` / `logout` end to end: a loopback authorization server and MCP
//! server in one (Python, stdlib only), `$BROWSER` a script that fetches the page and
//! follows its redirect to buddy's callback, the token kept under `mcp_tokens`.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Authorization server + legacy MCP server: `/mcp` wants a token it issued.
const GUARDED: &str = r#"
import json, secrets
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlparse, parse_qs, urlencode
state = {"codes": set(), "tokens": set(), "authorizations": 0}
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def base(self): return "http://127.0.0.1:%d" % self.server.server_port
    def send(self, code, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in headers: self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        url, base = urlparse(self.path), self.base()
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            return self.send(200, {"resource": base + "/mcp", "authorization_servers": [base]})
        if url.path == "/.well-known/oauth-authorization-server":
            return self.send(200, {"issuer": base, "authorization_endpoint": base + "/authorize",
                "token_endpoint": base + "/token", "registration_endpoint": base + "/register",
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"]})
        if url.path == "/authorize":
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            code = secrets.token_hex(8)
            state["codes"].add(code)
            state["authorizations"] += 1
            back = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query["state"]})
            return self.send(302, None, [("location", back)])
        if url.path == "/count":
            return self.send(200, {"authorizations": state["authorizations"]})
        self.send(405)
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        url, base = urlparse(self.path), self.base()
        if url.path == "/register":
            return self.send(201, {"client_id": "cli-test", "redirect_uris": json.loads(body)["redirect_uris"]})
        if url.path == "/token":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            if form.get("code") not in state["codes"]:
                return self.send(400, {"error": "invalid_grant"})
            state["codes"].discard(form["code"])
            token = secrets.token_hex(8)
            state["tokens"].add(token)
            return self.send(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})
        if url.path != "/mcp":
            return self.send(404)
        auth = self.headers.get("authorization", "")
        if auth[len("Bearer "):] not in state["tokens"]:
            challenge = 'Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"' % base
            return self.send(401, {"error": "unauthorized"}, [("www-authenticate", challenge)])
        message = json.loads(body)
        mid, method = message.get("id"), message.get("method")
        if mid is None:
            return self.send(202)
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "guarded", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
        else:
            return self.send(200, {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
        self.send(200, {"jsonrpc": "2.0", "id": mid, "result": result})
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"#;

/// `$BROWSER`: approves by fetching the page (urllib follows the redirect back).
const BROWSER: &str = "#!/usr/bin/env python3\nimport sys, urllib.request\nurllib.request.urlopen(sys.argv[1], timeout=10).read()\n";

fn buddy(dir: &Path, args: &[&str], browser: Option<&Path>) -> Output {
    let mut command = super::buddy(dir);
    command
        .args(args)
        .stdin(Stdio::null())
        .env_remove("BROWSER");
    if let Some(browser) = browser {
        command.env("BROWSER", browser);
    }
    command.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn login_keeps_a_token_every_later_run_uses_and_logout_forgets_it() {
    let dir = tempfile::tempdir().unwrap();
    let guarded = super::PythonServer::start(dir.path(), "guarded.py", GUARDED);
    let browser = dir.path().join("open.py");
    std::fs::write(&browser, BROWSER).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "mcp_tokens = \"tokens\"\n[[mcp]]\nname = \"guarded\"\nurl = \"http://127.0.0.1:{}/mcp\"\n",
            guarded.port
        ),
    )
    .unwrap();
    let kept = dir.path().join("tokens/guarded.json");

    // Nobody at the terminal and no token: the server is not available, and says why.
    let out = buddy(dir.path(), &["mcp", "list"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("run `buddy mcp login guarded` at a terminal once"),
        "{}",
        text(&out)
    );

    let out = buddy(dir.path(), &["mcp", "login", "guarded"], Some(&browser));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("Open this address in a browser"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("kept in tokens/guarded.json"),
        "{}",
        text(&out)
    );
    assert!(
        !text(&out).contains("ERROR"),
        "no log noise: {}",
        text(&out)
    );
    assert!(kept.exists());

    // Later runs, unattended, use the kept token: no second authorization.
    let out = buddy(dir.path(), &["mcp", "list"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("guarded__whoami"), "{}", text(&out));
    let count = Command::new("python3")
        .args(["-c", &format!("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{}/count').read().decode())", guarded.port)])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&count.stdout).trim(),
        r#"{"authorizations": 1}"#
    );

    let out = buddy(dir.path(), &["mcp", "logout", "guarded"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!kept.exists());
    let out = buddy(dir.path(), &["mcp", "list"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

#[test]
fn login_refuses_a_stdio_server_and_an_unknown_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[[mcp]]\nname = \"local\"\ncommand = [\"python3\", \"-c\", \"pass\"]\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "login", "local"], None);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out).contains("only HTTP servers ask for OAuth authorization"),
        "{}",
        text(&out)
    );
    let out = buddy(dir.path(), &["mcp", "login", "nope"], None);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out).contains("no [[mcp]] server `nope`"),
        "{}",
        text(&out)
    );
}
