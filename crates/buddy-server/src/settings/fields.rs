//! The settings table: every setting of `[server]` once, with its doc, name, default,
//! the values it accepts and its `buddy serve` flag. Adding a setting is one entry here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use buddy_core::Usd;
use buddy_engine::{ApprovalRules, PriceTable};
use buddy_telemetry::Telemetry;

use super::keys::KeyConfig;
use super::table::{
    Setting, SettingCheck, SettingError, SettingField, SettingFlag, server_settings,
};
use super::{ApiKey, SkillCalls, TrustedProxies};

/// `max_stored_bytes_per_key` unless set: 1 GiB of messages per key.
pub const DEFAULT_MAX_STORED_BYTES_PER_KEY: usize = 1 << 30;

server_settings! {
    table {
        /// Address to listen on (port 0 picks one).
        listen as "listen": String = "127.0.0.1:8080".to_owned();
            check SettingCheck::Any;
            flag SettingFlag::Value { long: "listen", value_name: "ADDR", env: None, help: "Address to listen on (default: [server] listen, else 127.0.0.1:8080; port 0 picks one)." };
        /// SQLite file of the conversation store, created on first run.
        db as "db": PathBuf = PathBuf::from("buddy.db");
            check SettingCheck::Any;
            flag SettingFlag::Value { long: "db", value_name: "FILE", env: None, help: "SQLite file of the conversation store, created on first run (default: [server] db, else ./buddy.db)." };
        /// Where conversations are kept instead of `db`: a `postgres://` URL (shared by
        /// every instance that names it) or a SQLite location.
        store as "store": Option<String> = None;
            check SettingCheck::Any;
            flag SettingFlag::Value { long: "store", value_name: "URL", env: Some("BUDDY_STORE"), help: "A postgres:// URL: keep conversations in PostgreSQL, shared with every instance given the same URL (default: [server] store; else the SQLite file)." };
        /// Environment variable with the accepted API keys, comma-separated.
        api_keys_env as "api_keys_env": String = "BUDDY_API_KEYS".to_owned();
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Named keys (`[[server.keys]]`), beside the unnamed ones of `api_keys_env`.
        keys as "keys": Vec<KeyConfig> = Vec::new();
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Largest request body, in bytes.
        max_body_bytes as "max_body_bytes": usize = 1024 * 1024;
            check SettingCheck::AtLeast(1);
            flag SettingFlag::Value { long: "max-body-bytes", value_name: "BYTES", env: None, help: "Largest request body in bytes." };
        /// Turns one key may run at once; more get 429 (0 counts as 1).
        max_concurrent_turns_per_key as "max_concurrent_turns_per_key": usize = 8;
            check SettingCheck::Any;
            flag SettingFlag::Value { long: "max-concurrent-turns", value_name: "N", env: None, help: "Turns one API key may run at once." };
        /// Model calls one key may have in flight at once in this process, over all its
        /// turns, their sub-agents, their tools' sampling and its compactions (0 counts
        /// as 1); more wait for a free slot (within their turn's deadline).
        max_model_calls_in_flight_per_key as "max_model_calls_in_flight_per_key": usize = 16;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// How long running turns may go on after a shutdown signal before they are
        /// cancelled, in seconds.
        shutdown_grace as "shutdown_grace_secs": Duration = Duration::from_secs(30);
            check SettingCheck::Any;
            flag SettingFlag::Value { long: "shutdown-grace-secs", value_name: "SECS", env: None, help: "Seconds running turns may go on after SIGTERM/Ctrl-C before they are cancelled." };
        /// Whether a request's policy may switch loop detection off (other limits may only
        /// ever be lowered by a request).
        allow_loop_detection_off as "allow_loop_detection_off": bool = false;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Whether `/v1/chat` requests may bring MCP servers of their own (HTTP only).
        allow_request_mcp as "allow_request_mcp": bool = false;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Connections held at once (0 counts as 1). A new one past it takes the place of
        /// the connection doing the least (see docs/operations/security.md); it is
        /// refused (503) only when every connection is answering a request.
        max_connections as "max_connections": usize = 1024;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Connections one client address may hold at once (0: no limit); past it the
        /// address's idlest connection without a key makes room. Behind a reverse proxy, name
        /// it in `trusted_proxies` so each client counts by its own address.
        max_connections_per_address as "max_connections_per_address": usize = 256;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Reverse proxies (addresses or CIDR blocks, such as `["10.0.0.0/8"]`) whose
        /// `Forwarded` / `X-Forwarded-For` client address counts as the client's: the last
        /// address in it that is not itself trusted. From anyone else those headers count
        /// for nothing.
        trusted_proxies as "trusted_proxies": TrustedProxies = TrustedProxies::default();
            check SettingCheck::Any;
            flag SettingFlag::Value { long: "trusted-proxies", value_name: "CIDRS", env: None, help: "Reverse proxies (comma-separated addresses or CIDR blocks) whose X-Forwarded-For / Forwarded client address counts." };
        /// Readers of running turns (`GET /v1/turns/{id}/events`, `GET
        /// /v1/responses/{id}?stream=true`) one key may hold open at once; more get 429.
        max_readers_per_key as "max_readers_per_key": usize = 32;
            check SettingCheck::AtLeast(1);
            flag SettingFlag::None;
        /// `/v1/responses` WebSocket sessions one key may hold open at once; more get 429.
        max_websockets_per_key as "max_websockets_per_key": usize = 32;
            check SettingCheck::AtLeast(1);
            flag SettingFlag::None;
        /// Seconds a `/v1/responses` WebSocket client has to take each message buddy sends
        /// (one that does not read is closed, its response cancelled).
        websocket_send_timeout as "websocket_send_secs": Duration = Duration::from_secs(30);
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Seconds a client has to send a request's headers (and to start the next request
        /// on a kept-alive connection).
        header_timeout as "header_timeout_secs": Duration = Duration::from_secs(10);
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Seconds a client has to send a request's whole body, counted from its head (not
        /// restarted by each byte).
        body_timeout as "body_timeout_secs": Duration = Duration::from_secs(30);
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Seconds a `/v1/responses` WebSocket may go without a request before it is closed
        /// (pings and pongs do not count).
        websocket_idle_timeout as "websocket_idle_secs": Duration = Duration::from_secs(300);
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// How `/v1/responses` shows buddy's own skill calls: `mcp_call` items (what OpenAI
        /// clients read) or `buddy:skill_call` extension items (a request's
        /// `buddy_skill_calls` overrides it).
        responses_skill_calls as "responses_skill_calls": SkillCalls = SkillCalls::default();
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// What each key's turns may cost per UTC day, in US dollars, for keys without a
        /// ceiling of their own (and for every caller when there are no keys); at the
        /// ceiling new turns get 429.
        max_daily_cost_usd as "max_daily_cost_usd": Option<Usd> = None;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// The same per UTC calendar month.
        max_monthly_cost_usd as "max_monthly_cost_usd": Option<Usd> = None;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Whether a client that drops a turn's stream cancels the turn (buddy's behaviour
        /// before turns ran on their own). By default the turn goes on, and the client may
        /// reattach at `GET /v1/turns/{id}/events`.
        cancel_on_disconnect as "cancel_on_disconnect": bool = false;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Whether requests that carry their whole history and name a client session
        /// (Claude Code's `x-claude-code-session-id`, codex's `session-id`) are kept as
        /// that session's conversation: shown on the chat page, replayed and judged like
        /// buddy's own. Off: they are judged and capped the same, and not stored.
        keep_client_sessions as "keep_client_sessions": bool = true;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Web origins (`https://app.example.com`) whose pages may call the API from a
        /// browser: their CORS preflights are answered and their responses readable.
        /// None by default: only the server's own chat page.
        cors_origins as "cors_origins": Vec<String> = Vec::new();
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Seconds a turn's events are kept after it ends, for clients reattaching late.
        turn_events_grace as "turn_events_grace_secs": Duration = Duration::from_secs(300);
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Bytes of events all ended turns' logs keep together for reattaching clients;
        /// past it the logs that ended first are forgotten first (their clients read the
        /// conversation instead).
        retained_events_bytes as "retained_events_bytes": usize = 256 * 1024 * 1024;
            check SettingCheck::Any;
            flag SettingFlag::None;
        /// Bytes of messages one key's conversations may hold in the store (0: no limit);
        /// past it new turns and added items get 429 `insufficient_quota`. 1 GiB unless
        /// set: thousands of long conversations, yet one key cannot fill the disk.
        max_stored_bytes_per_key as "max_stored_bytes_per_key": usize = DEFAULT_MAX_STORED_BYTES_PER_KEY;
            check SettingCheck::Any;
            flag SettingFlag::None;
    }
    elsewhere {
        /// Accepted bearer keys (from `api_keys_env`, `keys` and `--api-key`); empty means
        /// no auth (only allowed on loopback).
        api_keys: Vec<ApiKey> = Vec::new();
        /// Which calls of `/v1/chat` turns wait for approval (`[approval]`; the turn
        /// pauses; the client resumes it at `/v1/conversations/{id}/resume`).
        approval: ApprovalRules = ApprovalRules::default();
        /// The same for the OpenAI-compatible endpoints, which have no resume: usually
        /// `unattended` (a call that needs approval is refused and the model reads why).
        openai_approval: ApprovalRules = ApprovalRules::default();
        /// What the models cost (buddy.toml's `prices`, then buddy's list prices).
        prices: PriceTable = PriceTable::default();
        /// Where turns' spans go (`[telemetry]`); `None`: no tracing.
        telemetry: Option<Arc<Telemetry>> = None;
    }
}

impl ServerSettings {
    /// What each key's turns may cost, for keys without a ceiling of their own.
    pub fn key_spend(&self) -> super::SpendCeiling {
        super::SpendCeiling {
            daily: self.max_daily_cost_usd,
            monthly: self.max_monthly_cost_usd,
        }
    }

    /// The settings as the server runs them: a cap of 0 counts as 1.
    pub(crate) fn normalized(mut self) -> Self {
        self.max_connections = self.max_connections.max(1);
        self.max_concurrent_turns_per_key = self.max_concurrent_turns_per_key.max(1);
        self.max_model_calls_in_flight_per_key = self.max_model_calls_in_flight_per_key.max(1);
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::*;
    use crate::settings::SettingFlag;

    #[test]
    fn server_is_read_by_its_table_names_with_seconds_as_durations() {
        let read: ServerSettings = serde_json::from_value(json!({
            "listen": "0.0.0.0:9000",
            "header_timeout_secs": 2.5,
            "max_daily_cost_usd": 1.25,
            "responses_skill_calls": "buddy:skill_call",
            "keys": [{"name": "ci", "key_sha256": "ab"}],
        }))
        .unwrap();
        assert_eq!(read.listen, "0.0.0.0:9000");
        assert_eq!(read.header_timeout, Duration::from_millis(2500));
        assert_eq!(read.key_spend().daily, Usd::from_dollars(1.25));
        assert_eq!(read.responses_skill_calls, SkillCalls::Extension);
        assert_eq!(read.keys.len(), 1);
        // What is not named keeps its default.
        assert_eq!(read.body_timeout, Duration::from_secs(30));
        assert_eq!(read.max_body_bytes, 1024 * 1024);
        let proxies: ServerSettings =
            serde_json::from_value(json!({"trusted_proxies": ["10.0.0.0/8", "::1"]})).unwrap();
        assert!(proxies.trusted_proxies.trusts("10.2.3.4".parse().unwrap()));
        let bad = serde_json::from_value::<ServerSettings>(json!({"trusted_proxies": ["lb"]}));
        assert!(bad.unwrap_err().to_string().contains("not an IP address"));
        let unknown = serde_json::from_value::<ServerSettings>(json!({"header_timeout": 2}));
        assert!(unknown.unwrap_err().to_string().contains("header_timeout"));
        let negative = serde_json::from_value::<ServerSettings>(json!({"body_timeout_secs": -1}));
        assert!(
            negative
                .unwrap_err()
                .to_string()
                .contains("number of seconds")
        );
    }

    #[test]
    fn a_flag_sets_its_setting_checked_and_a_wrong_one_is_named() {
        let mut settings = ServerSettings::default();
        settings.set("shutdown_grace_secs", "0.5").unwrap();
        assert_eq!(settings.shutdown_grace, Duration::from_millis(500));
        settings.set("store", "postgres://db/buddy").unwrap();
        assert_eq!(settings.store.as_deref(), Some("postgres://db/buddy"));
        let zero = settings.set("max_body_bytes", "0").unwrap_err();
        assert_eq!(zero.name, "max_body_bytes");
        assert!(zero.to_string().contains("at least 1"), "{zero}");
        let words = settings
            .set("max_concurrent_turns_per_key", "many")
            .unwrap_err();
        assert!(words.to_string().contains("whole number"), "{words}");
        assert!(settings.set("no_such_setting", "1").is_err());
    }

    #[test]
    fn every_setting_has_one_name_one_flag_and_a_doc() {
        let names: HashSet<&str> = SERVER_FIELDS.iter().map(|f| f.name).collect();
        assert_eq!(names.len(), SERVER_FIELDS.len());
        let mut longs = HashSet::new();
        for field in SERVER_FIELDS {
            assert!(!field.summary().is_empty(), "{} has no doc", field.name);
            if let SettingFlag::Value { long, .. } = field.flag {
                assert!(longs.insert(long), "--{long} twice");
            }
        }
        assert!(longs.contains("max-concurrent-turns") && longs.contains("store"));
    }

    #[test]
    fn a_cap_of_zero_runs_as_one() {
        let settings = ServerSettings {
            max_connections: 0,
            max_concurrent_turns_per_key: 0,
            ..ServerSettings::default()
        }
        .normalized();
        assert_eq!(settings.max_connections, 1);
        assert_eq!(settings.max_concurrent_turns_per_key, 1);
    }
}
