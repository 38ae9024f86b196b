// buddy's chat page. It talks only to buddy's own API on this origin. Everything the
// model, a tool or a person wrote is put on the page as text (textContent), except the
// model's answer, which goes through marked (Markdown) and then DOMPurify.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_SLOT = "buddy-api-key";

const state = {
  key: sessionStorage.getItem(KEY_SLOT) || "",
  conversation: null, // id of the open conversation
  turnId: null, // the running turn, for Stop
  running: false,
  models: [],
  settings: {}, // the open conversation's system prompt and policy (or a new one's, until its first turn)
  summaries: new Map(), // id -> the list's entry (forked_from, fork_before, messages), for the versions
  detail: null, // the open conversation as last read from the server
};

// ---------- words for people ----------

const STOP_WORDS = {
  completed: "Answered",
  finish_tool: "Answered",
  client_tool_calls: "Waiting for tools your app runs",
  truncated: "Cut off: the answer reached the model's length limit",
  max_model_calls: "Stopped at the limit of model calls; buddy gave the best answer it had",
  max_tool_calls: "Stopped at the limit of tool calls; buddy gave the best answer it had",
  loop_detected: "Stopped a loop: the model kept going round in circles, so buddy asked it for its final answer",
  tools_exhausted: "The tools could not help (they kept failing or were switched off)",
  token_budget: "Stopped at the turn's token budget",
  cost_budget: "Stopped at the turn's money budget; buddy gave the best answer it had",
  deadline: "Stopped at the turn's time limit",
  cancelled: "Cancelled",
  context_overflow: "The conversation no longer fits in what the model can read at once",
  provider_error: "The model service failed",
  skill_failed: "A tool failed badly",
  invalid_request: "The request was refused",
  repetitive_output: "The model kept repeating the same text, so it was cut",
  no_answer: "The model gave no answer; buddy quotes what the tools found",
  store_error: "The conversation could not be saved",
  approval_required: "Waiting for your approval",
  provider_refused_loop: "The model service refused the loop itself; buddy asked for the answer without the repeated calls",
  interrupted: "Interrupted (the server stopped during this turn)",
};
const CLEAN = new Set(["completed", "finish_tool", "client_tool_calls", "approval_required"]);
const CAPPED = new Set(["max_model_calls", "max_tool_calls", "token_budget", "cost_budget", "deadline"]);

const GUARD_WORDS = {
  model_call_limit: "Model call limit reached",
  tool_call_limit: "Tool call limit reached",
  skill_call_limit: "A tool reached its call limit",
  circuit_breaker: "A tool kept failing",
  repetition: "The same call again",
  cycle: "Calls going round in circles",
  near_duplicate: "Nearly the same call again",
  repeated_answer: "The model repeated an earlier answer",
  withdrawn_skill_called: "A switched-off tool was called",
  substantive_answer: "The answer came with more calls",
  honor_stop: "The model said it was done",
  tools_withdrawn: "No more tools this turn",
  token_budget: "Token budget spent",
  deadline: "Time limit reached",
  context_window: "Older messages left out to fit",
  trip_budget: "Too many warnings this turn",
  repetitive_output: "The reply kept repeating itself",
  final_answer_check: "The reply held no usable answer",
  no_progress: "No progress",
  tools_ignored: "The model server may be ignoring tools",
  approval: "Needed an approval nobody could give",
  provider_loop_refusal: "The model service refused repeated calls",
  delegation: "A sub-agent bound",
};
const ACTION_WORDS = {
  returned_earlier_result: "buddy gave back the earlier result instead of running it again",
  warned: "buddy warned the model",
  refused: "buddy did not run it",
  withdrew_skill: "buddy switched that tool off for this turn",
  withdrew_all_tools: "buddy switched all tools off",
  finalize: "buddy asked the model for its final answer",
  error: "buddy ended the turn",
  accepted_answer: "buddy took the answer and skipped the calls",
  trimmed: "buddy trimmed the conversation to fit",
  cut_reply: "buddy cut the reply",
  composed_answer: "buddy wrote the answer from the tool results",
  asked_again: "buddy asked the model again for an answer",
  shed: "buddy left out what the request could do without, to fit",
  stopped_agent: "buddy stopped the sub-agent and kept its work so far",
};

function plural(n, word) {
  return `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`;
}

function statsLine(stats) {
  if (!stats) return "";
  const tokens = (stats.input_tokens || 0) + (stats.output_tokens || 0);
  const ms = stats.elapsed_ms || 0;
  const parts = [
    plural(stats.model_calls || 0, "model call"),
    plural(stats.tool_calls || 0, "tool call"),
    plural(tokens, "token"),
    duration(ms),
  ];
  // The prompt cache's share of the input: read back at about a tenth of the price.
  const read = stats.cache_read_tokens || 0;
  const written = stats.cache_write_tokens || 0;
  if (read || written) {
    const share = stats.input_tokens ? Math.round((100 * read) / stats.input_tokens) : 0;
    parts.push(`${read.toLocaleString()} cached (${share}%)${written ? `, ${written.toLocaleString()} written` : ""}`);
  }
  // Present only when the model's price is known (buddy.toml's prices or buddy's list).
  if (typeof stats.cost_usd === "number") parts.push(money(stats.cost_usd));
  return parts.join(" · ");
}

/** A sub-agent's typed outcome, when a tool result is one (else null). */
function agentOutcome(content) {
  if (!content.startsWith("{\"agent\":")) return null;
  try {
    const outcome = JSON.parse(content);
    return typeof outcome.status === "string" && typeof outcome.model_calls === "number" ? outcome : null;
  } catch {
    return null;
  }
}

/** How a sub-agent ended, in brief: `answered`, `partial`, `stalled` …, its calls and cost. */
function agentWords(outcome) {
  const parts = [outcome.status, plural(outcome.model_calls, "model call"), plural(outcome.tool_uses || 0, "tool call")];
  if (typeof outcome.cost_usd === "number") parts.push(money(outcome.cost_usd));
  return parts.join(" · ");
}

/** Milliseconds as people read them: `12 ms`, `3.4 s`. */
function duration(ms) {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Dollars as the CLI writes them: four decimals, more under a hundredth of a cent. */
function money(dollars) {
  return dollars !== 0 && dollars < 0.0001 ? `$${dollars.toFixed(7)}` : `$${dollars.toFixed(4)}`;
}

// ---------- small DOM helpers ----------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

/** Arguments in one short line (`city: Paris, days: 2`), for a tool row's summary. */
function brief(json) {
  let text;
  try {
    const value = JSON.parse(json);
    text = value && typeof value === "object" && !Array.isArray(value)
      ? Object.entries(value).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ")
      : JSON.stringify(value);
  } catch {
    text = String(json);
  }
  text = text.replace(/\s+/g, " ");
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function pretty(json) {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

/** Markdown to safe HTML: marked, then DOMPurify (no scripts, handlers or forms). */
function renderMarkdown(node, text) {
  const html = window.marked.parse(text, { gfm: true, breaks: false });
  node.innerHTML = window.DOMPurify.sanitize(html, {
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"],
    FORBID_ATTR: ["style"],
  });
  for (const a of node.querySelectorAll("a")) {
    a.setAttribute("rel", "noopener noreferrer");
    a.setAttribute("target", "_blank");
  }
  for (const pre of node.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (code) highlight(code);
    // The button's words are CSS (::before), so the answer's text stays the answer's.
    pre.before(el("button", { type: "button", class: "copy-code", "aria-label": "Copy this code", onclick: (e) => copyText(e.currentTarget, pre.textContent) }));
  }
}

/** Puts `text` on the clipboard and says so on `button` for a moment. */
async function copyText(button, text) {
  try {
    await navigator.clipboard.writeText(text);
    button.dataset.copied = "yes";
    setTimeout(() => delete button.dataset.copied, 1500);
  } catch (e) {
    showError(new Error(`could not copy (${e.message || e})`));
  }
}

/** Words of the languages people paste most, for a light highlight (not a parser). */
const KEYWORDS = new Set(("as async await break case catch class const continue def default del do elif else enum export extends false " +
  "fn for from func function go if impl import in interface let loop match mod mut new nil none null package pass pub raise return " +
  "select self static struct super switch this throw true try type use var where while with yield").split(" "));

/** Colours a code block's keywords, strings, numbers and comments. Built from text nodes
 * (never HTML), so nothing in the code can become markup. */
function highlight(code) {
  const text = code.textContent;
  if (text.length > 100000) return;
  const token = /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b\d[\d_.]*\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
  const out = document.createDocumentFragment();
  let at = 0;
  for (const m of text.matchAll(token)) {
    const kind = m[1] ? "comment" : m[2] ? "string" : m[3] ? "number" : KEYWORDS.has(m[4]) ? "keyword" : null;
    if (!kind) continue;
    if (m.index > at) out.append(text.slice(at, m.index));
    out.append(el("span", { class: `hl-${kind}`, text: m[0] }));
    at = m.index + m[0].length;
  }
  out.append(text.slice(at));
  code.replaceChildren(out);
}

function scrollDown() {
  const t = $("transcript");
  t.scrollTop = t.scrollHeight;
}

// ---------- API ----------

class AuthError extends Error {}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (state.key) headers.authorization = `Bearer ${state.key}`;
  if (options.json !== undefined) {
    headers["content-type"] = "application/json";
    options.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, { method: options.method || "GET", headers, body: options.body, signal: options.signal });
  if (response.status === 401) throw new AuthError("the API key was refused");
  return response;
}

async function apiJson(path, options) {
  const response = await api(path, options);
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

function askForKey(error) {
  const dialog = $("key-dialog");
  $("key-error").hidden = !error;
  $("key-error").textContent = error ? `${error}. Try another key.` : "";
  $("key-input").value = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        state.key = $("key-input").value.trim();
        sessionStorage.setItem(KEY_SLOT, state.key);
        $("forget-key").hidden = !state.key;
        resolve();
      },
      { once: true },
    );
    dialog.showModal();
    $("key-input").focus();
  });
}

/** Runs `job`, asking for a key (again) whenever the server refuses the one we have. */
async function withKey(job) {
  for (;;) {
    try {
      return await job();
    } catch (e) {
      if (!(e instanceof AuthError)) throw e;
      await askForKey(state.key ? "The server refused this key" : "");
    }
  }
}

// ---------- conversations ----------

async function loadModels() {
  const body = await apiJson("/v1/models");
  state.models = (body.data || []).map((m) => m.id);
  const select = $("model");
  select.replaceChildren(...state.models.map((id) => el("option", { value: id, text: id })));
  const preferred = state.models.find((m) => m === "scripted:offline_assistant");
  if (preferred) select.value = preferred;
}

// ---------- MCP servers' health ----------

/** How often the MCP servers' health is read again (and on focus). */
const HEALTH_EVERY_MS = 30000;

/** Shows the MCP servers' health (`GET /v1/health`) in the header: all up, or how many
 * are down, each named with its reason (an admin key's report has them; another key
 * sees states only). Nothing when the server has no MCP servers. */
async function refreshHealth() {
  const badge = $("mcp-health");
  let report;
  try {
    report = await apiJson("/v1/health");
  } catch {
    return;
  }
  const servers = (report && report.mcp) || [];
  badge.hidden = servers.length === 0;
  const down = servers.filter((s) => s.state === "down" || s.state === "gave_up");
  badge.classList.toggle("down", down.length > 0);
  if (!down.length) {
    badge.textContent = servers.length === 1 ? "MCP server up" : `MCP: all ${servers.length} servers up`;
    badge.title = servers.map((s) => `${s.name}: ${s.state}`).join("\n");
    return;
  }
  const named = down.map((s) => (s.error ? `${s.name} (${s.error})` : `${s.name} (${s.state})`));
  badge.textContent = `MCP: ${down.length} down: ${named.join("; ")}`;
  badge.title = servers.map((s) => `${s.name}: ${s.state}${s.error ? ` (${s.error})` : ""}`).join("\n");
}

/** Reads the MCP servers' health now, every [`HEALTH_EVERY_MS`] and whenever the page
 * gets the focus back. */
let healthWatched = false;
function watchHealth() {
  if (healthWatched) return;
  healthWatched = true;
  refreshHealth();
  setInterval(refreshHealth, HEALTH_EVERY_MS);
  window.addEventListener("focus", refreshHealth);
}

/** The conversation a fork's message `i` comes from: it follows the forks back while
 * message `i` is one they copied (a fork holds its original's messages before
 * `fork_before`). */
function originOf(id, i, byId) {
  let c = byId.get(id);
  const seen = new Set();
  while (c && c.forked_from && byId.has(c.forked_from) && i < c.fork_before && !seen.has(c.id)) {
    seen.add(c.id);
    c = byId.get(c.forked_from);
  }
  return c ? c.id : id;
}

/** Conversations grouped with their forks (Regenerate, Edit), newest first: each group
 * is one conversation in versions; its first member is the one touched last. */
function families(list) {
  const byId = new Map(list.map((c) => [c.id, c]));
  const groups = new Map();
  for (const c of list) {
    const root = rootOf(c, byId);
    if (!groups.has(root)) groups.set(root, []);
    groups.get(root).push(c);
  }
  return [...groups.entries()].map(([root, members]) => ({ root: byId.get(root) || members[0], members }));
}

/** The first conversation of `c`'s forks back (the one all its versions came from). */
function rootOf(c, byId) {
  const seen = new Set();
  while (c.forked_from && byId.has(c.forked_from) && !seen.has(c.id)) {
    seen.add(c.id);
    c = byId.get(c.forked_from);
  }
  return c.id;
}

async function loadConversations() {
  const q = $("search").value.trim();
  const body = await apiJson(q ? `/v1/conversations?q=${encodeURIComponent(q)}` : "/v1/conversations");
  const data = body.data || [];
  for (const c of data) state.summaries.set(c.id, c);
  if (!q) state.summaries = new Map(data.map((c) => [c.id, c]));
  const list = $("conversations");
  list.replaceChildren();
  for (const { root, members } of families(data)) {
    // One entry per conversation, whatever its versions: it opens the version touched last.
    const latest = members[0];
    const ids = members.map((m) => m.id);
    const title = root.title || latest.title || "(untitled)";
    const open = el(
      "button",
      { class: "open", type: "button", title, onclick: () => openConversation(latest.id) },
      el("span", { text: title }),
      el("span", { class: "reason", text: latest.last_stop_reason ? STOP_WORDS[latest.last_stop_reason] || latest.last_stop_reason : "" }),
    );
    const rename = el("button", { class: "small", type: "button", "aria-label": `Rename “${title}”`, text: "✎", onclick: () => renameConversation(ids, title) });
    const remove = el("button", { class: "small", type: "button", "aria-label": `Delete “${title}”`, text: "×", onclick: () => deleteConversation(ids, title) });
    const item = el("li", { "data-id": latest.id, "data-ids": ids.join(" ") }, open, rename, remove);
    if (ids.includes(state.conversation)) item.classList.add("current");
    list.append(item);
  }
  if (q && !list.children.length) list.append(el("li", { class: "none", text: `No conversation mentions “${q}”.` }));
  if (state.detail && state.detail.id === state.conversation && !state.running) placeSwitchers(state.detail);
}

/** `‹ 2 / 3 ›` above each of the open conversation's messages where it has versions: the
 * conversations of its family that hold the same messages before it and another one
 * there (a Regenerate or an Edit made them). Each version opens the conversation touched
 * last among those that hold it. */
function placeSwitchers(detail) {
  for (const old of document.querySelectorAll("#transcript .versions")) old.remove();
  const byId = state.summaries;
  const me = detail.id;
  if (!byId.has(me)) return;
  const family = [...byId.values()].filter((c) => rootOf(c, byId) === rootOf(byId.get(me), byId));
  if (family.length < 2) return;
  const rows = [...document.querySelectorAll("#transcript .user-row")];
  const users = (detail.messages || []).map((m, i) => (m.role === "user" ? i : -1)).filter((i) => i >= 0);
  users.forEach((k, n) => {
    const row = rows[n];
    if (!row || row.dataset.text !== detail.messages[k].content) return;
    const before = k === 0 ? null : originOf(me, k - 1, byId);
    const versions = new Map(); // origin of message k -> the version touched last that holds it
    for (const c of family) {
      if (c.messages <= k || (before !== null && originOf(c.id, k - 1, byId) !== before)) continue;
      const origin = originOf(c.id, k, byId);
      const seen = versions.get(origin);
      if (!seen || c.updated_at_ms > seen.updated_at_ms) versions.set(origin, c);
    }
    if (versions.size < 2) return;
    const order = [...versions.keys()].sort((a, b) => (byId.get(a).created_at_ms - byId.get(b).created_at_ms) || (a < b ? -1 : 1));
    const at = order.indexOf(originOf(me, k, byId));
    // The focus stays on the switcher, now of the version shown.
    const go = (to) => (e) => {
      if (state.running) return;
      const label = e.currentTarget.getAttribute("aria-label");
      openConversation(versions.get(order[to]).id)
        .then(() => {
          const buttons = [...document.querySelectorAll(`#transcript .versions[data-index="${k}"] button`)];
          (buttons.find((b) => b.getAttribute("aria-label") === label && !b.disabled) || buttons.find((b) => !b.disabled))?.focus();
        })
        .catch(showError);
    };
    const prev = el("button", { type: "button", class: "small", text: "‹", "aria-label": "Previous version", onclick: go(at - 1) });
    const next = el("button", { type: "button", class: "small", text: "›", "aria-label": "Next version", onclick: go(at + 1) });
    prev.disabled = at <= 0;
    next.disabled = at >= order.length - 1;
    row.before(el("div", { class: "versions", role: "group", "data-index": String(k), "aria-label": "Versions of this message" }, prev, el("span", { class: "count", text: `${at + 1} / ${order.length}` }), next));
  });
}

// ---------- export ----------

/** A conversation as Markdown: who said what, each tool call with its result, and how
 * each turn ended. */
function toMarkdown(detail) {
  const lines = [`# ${detail.title || detail.id}`, ""];
  const fence = (text) => "~~~~\n" + text.replace(/~~~~/g, "~ ~ ~ ~") + "\n~~~~";
  const names = new Map();
  const turnOf = detail.message_turns || [];
  const ended = new Map((detail.turns || []).map((t) => [t.id, t]));
  (detail.messages || []).forEach((m, i) => {
    if (m.role === "user") lines.push("## You", "", m.content, "");
    else if (m.role === "assistant") {
      if (m.content) lines.push("## buddy", "", m.content, "");
      for (const c of m.tool_calls || []) {
        names.set(c.id, c.name);
        lines.push(`**Tool call \`${c.name}\`**`, "", fence(pretty(c.arguments)), "");
      }
    } else if (m.role === "tool") lines.push(`**Result of \`${names.get(m.tool_call_id) || "tool"}\`${m.is_error ? " (error)" : ""}**`, "", fence(m.content), "");
    else if (m.role === "note") lines.push(`> buddy told the model: ${m.content}`, "");
    const next = turnOf[i + 1];
    const turn = ended.get(turnOf[i]);
    if (turn && next !== turnOf[i] && turn.stop_reason) lines.push(`*Turn ended: ${STOP_WORDS[turn.stop_reason] || turn.stop_reason} (${turn.stop_reason})${turn.stats ? ` · ${statsLine(turn.stats)}` : ""}*`, "");
  });
  return lines.join("\n");
}

/** Downloads the open conversation as Markdown or as buddy's JSON. */
async function exportConversation(format) {
  if (!state.conversation) return;
  const detail = await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(state.conversation)}`));
  const [body, type, ext] = format === "json"
    ? [JSON.stringify(detail, null, 2), "application/json", "json"]
    : [toMarkdown(detail), "text/markdown", "md"];
  const name = (detail.title || detail.id).replace(/[^\w.-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 60) || detail.id;
  const link = el("a", { href: URL.createObjectURL(new Blob([body], { type })), download: `${name}.${ext}` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

// ---------- theme ----------

const THEME_SLOT = "buddy-theme";
const THEMES = ["system", "light", "dark"];

/** Light, dark, or as the system says; kept in this browser. */
function applyTheme(theme) {
  if (theme === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  $("theme").textContent = `Theme: ${theme}`;
  $("theme").setAttribute("aria-label", `Theme: ${theme} (change)`);
}

/** Renames a conversation: each of its versions (`ids`), so every one bears the name. */
function renameConversation(ids, current) {
  const dialog = $("rename-dialog");
  $("rename-input").value = current;
  dialog.returnValue = "";
  dialog.addEventListener(
    "close",
    async () => {
      if (dialog.returnValue === "cancel") return;
      const title = $("rename-input").value.trim();
      if (!title) return;
      for (const id of ids) await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(id)}`, { method: "PATCH", json: { title } }));
      await loadConversations();
    },
    { once: true },
  );
  dialog.showModal();
  $("rename-input").select();
}

/** Deletes a conversation with all its versions (`ids`). */
async function deleteConversation(ids, title) {
  const others = ids.length > 1 ? ` and its ${plural(ids.length - 1, "other version")}` : "";
  if (!window.confirm(`Delete “${title}”${others}? This cannot be undone.`)) return;
  for (const id of ids) {
    await withKey(async () => {
      const response = await api(`/v1/conversations/${encodeURIComponent(id)}`, { method: "DELETE" });
      if (!response.ok && response.status !== 404) {
        const body = await response.json().catch(() => null);
        throw new Error(body && body.error ? body.error.message : `HTTP ${response.status}`);
      }
    }).catch(showError);
  }
  if (ids.includes(state.conversation)) newConversation();
  await loadConversations();
}

// ---------- conversation settings ----------

/** The limits the settings dialog edits: the policy field and its input (seconds shown
 * for milliseconds kept). */
const LIMITS = [
  { field: "max_model_calls", input: "settings-max_model_calls" },
  { field: "max_tool_calls", input: "settings-max_tool_calls" },
  { field: "max_turn_tokens", input: "settings-max_turn_tokens" },
  { field: "max_turn_cost_usd", input: "settings-max_turn_cost_usd" },
  { field: "deadline_ms", input: "settings-deadline_s", scale: 1000 },
];

function hasSettings(settings) {
  return Boolean(settings.system) || Object.keys(settings.policy || {}).length > 0;
}

/** Makes `settings` the open conversation's, and says on the button whether any are set. */
function useSettings(settings) {
  state.settings = settings || {};
  const set = hasSettings(state.settings);
  $("settings").classList.toggle("set", set);
  $("settings").setAttribute("aria-label", set ? "Conversation settings (some set)" : "Conversation settings");
}

function openSettings() {
  const policy = state.settings.policy || {};
  $("settings-system").value = state.settings.system || "";
  for (const limit of LIMITS) {
    const value = policy[limit.field];
    $(limit.input).value = typeof value === "number" ? String(value / (limit.scale || 1)) : "";
  }
  $("settings-error").hidden = true;
  $("settings-dialog").showModal();
  $("settings-system").focus();
}

/** What the dialog holds; policy fields it does not show (set through the API) are kept. */
function settingsFromDialog() {
  const policy = { ...(state.settings.policy || {}) };
  for (const limit of LIMITS) {
    const text = $(limit.input).value.trim();
    if (text === "") delete policy[limit.field];
    else policy[limit.field] = limit.scale ? Math.round(Number(text) * limit.scale) : Number(text);
  }
  const settings = {};
  const system = $("settings-system").value.trim();
  if (system) settings.system = system;
  if (Object.keys(policy).length) settings.policy = policy;
  return settings;
}

/** Saves the dialog's settings with the open conversation (a new one takes them with its
 * first message); the server's refusal shows in the dialog, which stays open. */
async function saveSettings() {
  const settings = settingsFromDialog();
  try {
    if (state.conversation) {
      const id = state.conversation;
      const body = await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(id)}`, { method: "PATCH", json: { settings } }));
      useSettings(body.settings);
    } else {
      useSettings(settings);
    }
    $("settings-dialog").close();
  } catch (e) {
    $("settings-error").textContent = e.message || String(e);
    $("settings-error").hidden = false;
  }
}

function emptyHint() {
  return el("p", { class: "empty-hint", text: "Ask something. Every step of the turn shows here: the answer as it streams, each tool call with its result, what buddy's guards did, and why the turn ended." });
}

/** Starts an empty conversation; `focus: false` leaves the focus where a person put it. */
function newConversation({ focus = true } = {}) {
  state.conversation = null;
  state.detail = null;
  useSettings({});
  history.replaceState(null, "", location.pathname);
  $("transcript").replaceChildren(emptyHint());
  closeSidebar();
  loadConversations().catch(showError);
  if (focus) $("message").focus();
}

async function openConversation(id) {
  const detail = await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(id)}`));
  state.conversation = id;
  useSettings(detail.settings);
  // The picker shows the model the conversation runs on, so the next message keeps it.
  const turns = detail.turns || [];
  const model = turns.length ? turns[turns.length - 1].model : null;
  if (model && state.models.includes(model)) $("model").value = model;
  history.replaceState(null, "", `#${id}`);
  renderStored(detail);
  closeSidebar();
  await loadConversations();
}

/** Draws a stored conversation: messages by turn, tool cards with their results, and
 * how each turn ended. Messages a fork copied keep their turn's grouping even where the
 * turn's own record stayed with the original. */
function renderStored(detail) {
  const transcript = $("transcript");
  transcript.replaceChildren();
  state.detail = detail;
  const messages = detail.messages || [];
  const turnOf = detail.message_turns || [];
  const times = detail.message_times_ms || [];
  const turns = detail.turns || [];
  const byId = new Map(turns.map((t) => [t.id, t]));
  const last = turns[turns.length - 1];
  // A turn still running is drawn from its events (reattached below), not its stored rounds.
  const running = last && !last.finished_at_ms && !last.stop_reason ? last : null;
  const shown = new Set();
  const finish = (view, turn) => {
    if (!turn) return;
    shown.add(turn.id);
    view.end(turn.stop_reason || "interrupted", turn.stats, turn.error, turn.started_at_ms);
    if (turn !== last && turn.stop_reason === "approval_required") view.decided();
    if (turn === last && turn.stop_reason === "approval_required") view.offerApproval(detail);
    if (turn === last && CAPPED.has(turn.stop_reason)) view.offerContinue();
  };
  let view = null;
  let current;
  // Finished turns whose calls started sub-agents: their blocks are drawn again from the
  // turn's events (the conversation stores the calls' outcomes, not the agents' steps).
  const withAgents = new Map();
  messages.forEach((message, i) => {
    if (!view || turnOf[i] !== current) {
      if (view) finish(view, byId.get(current));
      // A turn resumed after an approval answers the calls of the one before, on their cards.
      view = new TurnView(transcript, view);
      current = turnOf[i];
    }
    if (message.role === "tool" && turnOf[i] && typeof message.content === "string" && agentOutcome(message.content)) withAgents.set(turnOf[i], view);
    if (running && current === running.id && message.role !== "user") {
      // Drawn from its events; what is stored says when its calls started and ended.
      view.known(message, times[i]);
      return;
    }
    view.stored(message, times[i]);
  });
  if (view && !(running && current === running.id)) finish(view, byId.get(current));
  // Turns that stored no message at all still say how they ended.
  if (running) shown.add(running.id);
  for (const turn of turns) if (!shown.has(turn.id)) finish(new TurnView(transcript, view), turn);
  // An empty conversation (a fork before its first message) stays the open one.
  if (!messages.length && !turns.length) transcript.append(emptyHint());
  scrollDown();
  for (const [turnId, turnView] of withAgents) {
    if (turnView && !(running && turnId === running.id)) rebuildAgents(turnView, turnId).catch(() => {});
  }
  if (running && !state.running) {
    const live = view && current === running.id ? view : new TurnView(transcript, view);
    attachRunning(live, running.id);
  }
}

/** Draws again the sub-agent blocks of finished turn `turnId` (drawn as `view` from the
 * store) from the events the server kept of it: each block after the row of the call
 * that started it, in call order. */
async function rebuildAgents(view, turnId) {
  const response = await api(`/v1/turns/${encodeURIComponent(turnId)}/events`);
  if (!response.ok) return;
  view.rebuilding = true;
  await readEvents(response, (name, data) => {
    if (name === "agent" && view.parent.isConnected) view.agentEvent(data.path, data.event);
  });
}

/** Edit and resend: a new conversation holding the history before the `n`-th user
 * message of the open one (the original stays as it was), then `text` sent in it. */
async function editAndResend(n, text) {
  if (state.running || !state.conversation) return;
  const id = state.conversation;
  const detail = await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(id)}`));
  const users = (detail.messages || []).map((m, i) => (m.role === "user" ? i : -1)).filter((i) => i >= 0);
  if (n >= users.length) throw new Error("that message is not stored yet; try again when the turn has ended");
  const fork = await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(id)}/fork`, { method: "POST", json: { before: users[n] } }));
  state.conversation = fork.id;
  history.replaceState(null, "", `#${fork.id}`);
  const copy = await withKey(() => apiJson(`/v1/conversations/${encodeURIComponent(fork.id)}`));
  useSettings(copy.settings);
  renderStored(copy);
  await send(text);
}

// ---------- one turn on the page ----------

/** Which user message of the transcript `row` is (0 for the first): the one a fork starts before. */
function userIndex(row) {
  return [...document.querySelectorAll("#transcript .user-row")].indexOf(row);
}

class TurnView {
  /** `previous`: the turn drawn before, whose calls still waiting for an approval this
   * turn may run (their cards are then this turn's, not drawn twice). */
  constructor(parent, previous = null) {
    this.parent = parent;
    this.previous = previous;
    this.startedAt = Date.now();
    this.answer = null; // the assistant block text is streaming into (its Markdown in .markdown)
    this.copy = null; // the turn's one Copy button, beside its latest text (its answer)
    this.cards = new Map(); // call id -> { node, started (ms since the epoch), answered }
    this.cardRow = null;
    // From the store: when each call's message and each result were stored (ms since the
    // epoch), and how many calls the call's round had (their results are stored together).
    this.calledAt = new Map();
    this.endedAt = new Map();
    this.roundSize = new Map();
  }

  /** The card of call `id`: this turn's, or a waiting one of the turn before. */
  card(id) {
    let card = this.cards.get(id);
    if (!card && this.previous) {
      const waiting = this.previous.cards.get(id);
      if (waiting && !waiting.answered) {
        this.cards.set(id, waiting);
        card = waiting;
      }
    }
    return card;
  }

  user(text) {
    const row = el("div", { class: "user-row" });
    const bubble = el("div", { class: "msg user", text });
    const edit = el("button", {
      type: "button",
      class: "edit",
      text: "Edit",
      "aria-label": "Edit and resend this message",
      onclick: () => {
        if (state.running) return;
        const n = userIndex(row);
        const area = el("textarea", { rows: "3", "aria-label": "Your message, edited" });
        area.value = text;
        const resend = el("button", {
          type: "button",
          class: "primary",
          text: "Send",
          onclick: () => {
            const edited = area.value.trim();
            if (edited) editAndResend(n, edited).catch(showError);
          },
        });
        const cancel = el("button", { type: "button", text: "Cancel", onclick: () => row.replaceChildren(bubble, edit) });
        row.replaceChildren(el("div", { class: "editing" }, area, el("div", { class: "actions" }, cancel, resend)));
        area.focus();
      },
    });
    row.dataset.text = text;
    row.append(bubble, edit);
    this.parent.append(row);
    this.answer = null;
    this.userRow = row;
    this.userText = text;
  }

  text(delta) {
    if (!this.answer) {
      const answer = el("div", { class: "msg assistant" });
      answer.markdown = "";
      // One Copy per turn, beside its latest text: narration before calls is no answer.
      this.copy?.remove();
      const copy = el("button", { type: "button", class: "copy-answer", "aria-label": "Copy this answer", onclick: (e) => copyText(e.currentTarget, answer.markdown) });
      this.copy = copy;
      this.parent.append(el("div", { class: "answer-row" }, answer, copy));
      this.answer = answer;
      this.cardRow = null;
    }
    const node = this.answer;
    node.markdown += delta;
    if (!node.renderScheduled) {
      node.renderScheduled = true;
      requestAnimationFrame(() => {
        node.renderScheduled = false;
        renderMarkdown(node, node.markdown);
        scrollDown();
      });
    }
  }

  /** A row of tool cards: parallel calls side by side, in call order. */
  row() {
    if (!this.cardRow) {
      this.cardRow = el("div", { class: "cards" });
      this.parent.append(this.cardRow);
    }
    return this.cardRow;
  }

  callStart(id, name, args) {
    this.answer = null;
    let card = this.card(id);
    if (!card) {
      // A compact row: name, a short summary of the arguments, status and duration;
      // it opens to show the arguments and the result.
      const node = el("details", { class: "card running", "aria-label": `Tool call ${name}` });
      card = { node };
      this.cards.set(id, card);
      this.row().append(node);
    }
    // When the call began: as stored (a turn drawn again after a reload), else now.
    card.started = this.calledAt.get(id) ?? Date.now();
    card.args = args;
    card.node.className = "card running";
    card.node.replaceChildren(
      el("summary", { class: "head" }, el("span", { class: "name", text: name }), el("span", { class: "brief", text: brief(args) }), el("span", { class: "status", text: "running…" })),
      el("div", { class: "label", text: "arguments" }),
      el("pre", { class: "args", text: pretty(args) }),
    );
  }

  callResult(id, name, content, isError, live = true) {
    let card = this.card(id);
    if (!card) {
      this.callStart(id, name, "{}");
      card = this.cards.get(id);
    }
    card.answered = true;
    const node = card.node;
    // A call buddy did not run (withdrawn, refused, rejected) or did not finish (the turn
    // was cancelled) is no failure of the tool: it is shown apart from real errors.
    const skipped = isError && /^not (run|finished):/.test(content);
    // A sub-agent's call says how the agent ended (answered, partial, stalled, …).
    const agent = agentOutcome(content);
    const outcome = skipped ? (content.startsWith("not finished") ? "not finished" : "not run") : agent ? agentWords(agent) : isError ? "error" : "done";
    node.className = `card ${skipped ? "skipped" : isError ? "failed" : "done"}${agent ? " agent-call" : ""}`;
    // How long it ran: from its start to its result, as seen live or as stored. A stored
    // result of a round of several calls was stored with the round's last: at most that.
    const stored = this.endedAt.get(id);
    const end = stored ?? (live ? Date.now() : null);
    const timed = !skipped && end !== null && (live || this.calledAt.has(id));
    const ms = timed ? Math.max(0, Math.round(end - card.started)) : null;
    const bound = stored !== undefined && (this.roundSize.get(id) || 1) > 1 ? "≤ " : "";
    const status = node.querySelector(".status");
    status.textContent = ms !== null ? `${outcome} · ${bound}${duration(ms)}` : outcome;
    node.querySelector(".approval")?.remove();
    node.append(el("div", { class: "label", text: skipped ? "why" : isError ? "error" : `result (${plural(content.length, "character")})` }));
    node.append(el("pre", { class: "result", text: content }));
  }

  /** A running call's progress (tool_progress): its card's status says how far it is. */
  callProgress(data) {
    const card = this.card(data.id);
    if (!card || card.answered) return;
    const parts = [];
    if (data.status) parts.push(`task ${data.status.replace(/_/g, " ")}`);
    if (data.progress !== undefined) parts.push(data.total !== undefined ? `${data.progress}/${data.total}` : `${data.progress}`);
    if (data.message) parts.push(data.message);
    const status = card.node.querySelector(".status");
    if (status && parts.length) status.textContent = `${parts.join(" · ")}…`;
  }

  notice(guard, action, skill, detail) {
    this.answer = null;
    this.cardRow = null;
    const what = GUARD_WORDS[guard] || guard;
    const did = ACTION_WORDS[action] || action;
    this.parent.append(
      el(
        "div",
        { class: "notice", role: "note" },
        el("span", { class: "what", text: `${what}${skill ? ` (${skill})` : ""}: ` }),
        el("span", { text: `${did}.` }),
        el("span", { class: "detail", text: detail }),
      ),
    );
  }

  note(content) {
    this.answer = null;
    this.cardRow = null;
    this.parent.append(el("div", { class: "notice", role: "note" }, el("span", { class: "what", text: "buddy told the model: " }), el("span", { class: "detail", text: content })));
  }

  /** What the store says of a message of this turn that is drawn from its events: when
   * its calls started or their results came. */
  known(message, at) {
    if (typeof at !== "number") return;
    if (message.role === "assistant") {
      const calls = message.tool_calls || [];
      for (const call of calls) {
        this.calledAt.set(call.id, at);
        this.roundSize.set(call.id, calls.length);
      }
    } else if (message.role === "tool") this.endedAt.set(message.tool_call_id, at);
  }

  /** Draws a stored message; `at` is when it was stored. */
  stored(message, at) {
    switch (message.role) {
      case "user":
        this.user(message.content);
        break;
      case "assistant":
        if (message.content) {
          this.text(message.content);
          renderMarkdown(this.answer, this.answer.markdown);
        }
        this.known(message, at);
        for (const call of message.tool_calls || []) this.callStart(call.id, call.name, call.arguments);
        for (const call of message.tool_calls || []) {
          const card = this.cards.get(call.id);
          card.node.className = "card";
          card.node.querySelector(".status").textContent = "not run";
        }
        break;
      case "tool": {
        this.known(message, at);
        const card = this.card(message.tool_call_id);
        this.callResult(message.tool_call_id, card ? card.node.querySelector(".name").textContent : "tool", message.content, !!message.is_error, false);
        break;
      }
      case "note":
        this.note(message.content);
        break;
      default:
        break;
    }
  }

  /** Says the stream broke and buddy is reattaching (the turn runs on meanwhile). */
  reconnecting(on) {
    if (on && !this.lost) {
      this.lost = el("div", { class: "notice reconnecting", role: "status", text: "Connection lost; the turn runs on. Reconnecting…" });
      this.parent.append(this.lost);
      scrollDown();
    } else if (!on && this.lost) {
      this.lost.remove();
      this.lost = null;
    }
  }

  end(reason, stats, message, startedAtMs = null) {
    this.reconnecting(false);
    this.answer = null;
    this.cardRow = null;
    const words = STOP_WORDS[reason] || reason;
    const at = new Date(startedAtMs || this.startedAt);
    const context = this.context && this.context.window ? `context ${Math.round((100 * this.context.used) / this.context.window)}% (${plural(this.context.used, "token")} of ${this.context.window.toLocaleString()})` : "";
    const footer = el(
      "div",
      { class: `turn-end ${CLEAN.has(reason) ? "clean" : "bad"}`, "data-reason": reason },
      el("span", { class: "reason", text: words }),
      el("span", { class: "code", text: `(${reason})` }),
      el("span", { class: "stats", text: statsLine(stats) }),
      context ? el("span", { class: "context", title: "How full the model's context window was at the turn's last call", text: context }) : null,
      el("time", { datetime: at.toISOString(), text: at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" }) }),
    );
    if (message) footer.append(el("span", { class: "error", text: message }));
    if (this.userRow) {
      const row = this.userRow;
      const text = this.userText;
      footer.append(
        el("button", {
          type: "button",
          class: "small regenerate",
          text: "Regenerate",
          "aria-label": "Regenerate this answer",
          onclick: () => {
            if (state.running) return;
            editAndResend(userIndex(row), text).catch(showError);
          },
        }),
      );
    }
    this.parent.append(footer);
    this.footer = footer;
    scrollDown();
  }

  /** Approve / Reject / Edit on each waiting call; the decisions go back together. */
  offerApproval(detailOrCalls) {
    const calls = Array.isArray(detailOrCalls) ? detailOrCalls : pendingCalls(detailOrCalls);
    const decisions = new Map();
    const maybeSend = () => {
      if (decisions.size !== calls.length) return;
      this.decided();
      resumeTurn({ decisions: calls.map((c) => decisions.get(c.id)) }, this);
    };
    for (const call of calls) {
      let card = this.card(call.id);
      if (!card) {
        this.callStart(call.id, call.name, call.arguments);
        card = this.cards.get(call.id);
      }
      card.node.className = "card waiting";
      card.node.open = true;
      card.node.querySelector(".status").textContent = "waiting for your approval";
      const box = el("div", { class: "approval" });
      if (call.why) box.append(el("span", { class: "why", text: call.why }));
      const decide = (decision) => {
        decisions.set(call.id, { call_id: call.id, ...decision });
        box.remove();
        // Decided: no longer waiting. The resumed turn runs it (or not) on this card.
        const said = { approve: "approved", reject: "rejected", edit: "approved with new arguments" }[decision.decision] || decision.decision;
        card.node.className = "card decided";
        card.node.querySelector(".status").textContent = decisions.size === calls.length ? said : `${said} · waiting for your other decisions`;
        maybeSend();
      };
      const approve = el("button", { type: "button", class: "primary", text: "Approve", onclick: () => decide({ decision: "approve" }) });
      const reject = el("button", {
        type: "button",
        text: "Reject",
        onclick: () => {
          const reason = el("input", { type: "text", placeholder: "Why not? (the model reads this)", "aria-label": "Reason for rejecting" });
          const send = el("button", { type: "button", text: "Reject", onclick: () => decide({ decision: "reject", reason: reason.value.trim() || null }) });
          box.replaceChildren(reason, send);
          reason.focus();
        },
      });
      const edit = el("button", {
        type: "button",
        text: "Edit",
        onclick: () => {
          const area = el("textarea", { rows: "5", "aria-label": "New arguments (JSON)" });
          area.value = pretty(call.arguments);
          const problem = el("span", { class: "error" });
          const send = el("button", {
            type: "button",
            text: "Run with these arguments",
            onclick: () => {
              try {
                const args = JSON.parse(area.value);
                if (typeof args !== "object" || args === null || Array.isArray(args)) throw new Error("not an object");
                decide({ decision: "edit", arguments: args });
              } catch (e) {
                problem.textContent = `Not a JSON object (${e.message}).`;
              }
            },
          });
          box.replaceChildren(area, send, problem);
          area.focus();
        },
      });
      box.append(approve, reject, edit);
      card.node.append(box);
    }
  }

  /** An event of the sub-agent at the end of `path`, drawn in its block (made when its
   * first event comes, nested in the block of the agent that started it). */
  agentEvent(path, event) {
    let view = this;
    for (let depth = 0; depth < path.length; depth++) {
      const hop = path[depth];
      view.agents ??= new Map();
      let child = view.agents.get(hop.call_id);
      if (!child) {
        view.answer = null;
        view.cardRow = null;
        const card = view.cards.get(hop.call_id);
        child = new AgentView(view.parent, path.slice(0, depth + 1), taskOf(card));
        child.rebuilding = view.rebuilding;
        // In call order, whichever agent spoke first: before the block of a later call.
        const order = [...view.cards.keys()];
        const at = order.indexOf(hop.call_id);
        const later = [...view.agents].find(([id]) => order.indexOf(id) > at);
        if (at >= 0 && later) later[1].node.before(child.node);
        else if (view.rebuilding && card) {
          // Drawn again after the turn: after its call's row and the blocks of earlier calls.
          let anchor = card.node.closest(".cards");
          while (anchor && anchor.nextElementSibling && anchor.nextElementSibling.matches("details.agent")) anchor = anchor.nextElementSibling;
          if (anchor && anchor.parentElement === view.parent) anchor.after(child.node);
        }
        view.agents.set(hop.call_id, child);
      }
      view = child;
    }
    drawEvent(view, event.type, event);
  }

  /** A tool's question for the person (an MCP server's elicitation), as a form on its
   * call's card: one field per property of `schema`, in the server's order (`order`; the
   * schema's own map comes sorted), as text, number, checkbox, choice or, for a
   * multi-select, checkboxes; `*` on required ones, defaults filled in and named. Each
   * field is checked as it is answered (its problem shown beside it); Submit (accept),
   * Decline or Cancel answer it. The server checks the content again: a misfit is shown
   * and the form stays. */
  askElicitation(data) {
    let card = this.card(data.call_id);
    if (!card) {
      this.callStart(data.call_id, data.server, "{}");
      card = this.cards.get(data.call_id);
    }
    if (!card || card.node.querySelector(`.elicitation[data-id="${CSS.escape(data.id)}"]`)) return;
    const turnId = state.turnId;
    card.node.className = "card waiting";
    card.node.open = true;
    card.node.querySelector(".status").textContent = "waiting for your answer";
    const box = el("form", { class: "elicitation approval", "data-id": data.id, novalidate: "" });
    box.append(el("span", { class: "question", text: `${data.server} asks: ${data.message}` }));
    const schema = data.schema || {};
    const properties = schema.properties || {};
    const required = new Set(schema.required || []);
    const names = [...new Set([...(data.order || []), ...Object.keys(properties)])].filter((n) => Object.hasOwn(properties, n));
    const inputs = [];
    for (const name of names) {
      const field = properties[name];
      const { node, value } = formField(name, field, required.has(name));
      const why = node.querySelector(".field-error");
      const check = () => {
        const problem = fieldProblem(field, value(), required.has(name));
        why.textContent = problem;
        node.classList.toggle("invalid", !!problem);
        return !problem;
      };
      // Checked once answered (changed, or left after typing); a field only passed
      // through is not (leaving the focused first field for Decline says nothing). A
      // misfit being mended is checked as it is typed: its problem goes at once, and the
      // form does not move under the pointer on the way to Submit.
      let touched = false;
      node.addEventListener("change", () => {
        touched = true;
        check();
      });
      node.addEventListener("focusout", () => touched && check());
      node.addEventListener("input", () => {
        touched = true;
        if (node.classList.contains("invalid")) check();
      });
      box.append(node);
      inputs.push({ name, value, check });
    }
    const problem = el("span", { class: "error" });
    const answer = async (body) => {
      problem.textContent = "";
      try {
        await withKey(() => apiJson(`/v1/turns/${encodeURIComponent(turnId)}/elicitations/${encodeURIComponent(data.id)}`, { method: "POST", json: body }));
        box.remove();
        card.node.className = "card";
        card.node.querySelector(".status").textContent = `answered: ${body.action}`;
      } catch (e) {
        problem.textContent = e.message;
      }
    };
    const content = () => {
      const out = {};
      for (const { name, value } of inputs) {
        const v = value();
        if (v !== undefined) out[name] = v;
      }
      return out;
    };
    box.addEventListener("submit", (e) => {
      e.preventDefault();
      // Every field checked before it goes: a misfit stays here, beside its field.
      const fits = inputs.map(({ check }) => check()).every(Boolean);
      if (!fits) {
        problem.textContent = "Some fields need another answer.";
        return;
      }
      answer({ action: "accept", content: content() });
    });
    box.append(
      el("button", { type: "submit", class: "primary", text: "Submit" }),
      el("button", { type: "button", text: "Decline", onclick: () => answer({ action: "decline" }) }),
      el("button", { type: "button", text: "Cancel", onclick: () => answer({ action: "cancel" }) }),
      problem,
    );
    card.node.append(box);
    const first = box.querySelector("input, select");
    if (first) first.focus();
  }

  /** A question answered (here, in another tab, or by its timeout): its form goes. */
  elicitationResolved(id, action) {
    for (const box of document.querySelectorAll(`.elicitation[data-id="${CSS.escape(id)}"]`)) {
      const card = box.closest(".card");
      box.remove();
      if (card) {
        card.className = "card";
        const status = card.querySelector(".status");
        if (status) status.textContent = `answered: ${action}`;
      }
    }
  }

  /** A pause for approval that was answered: its end line says it no longer waits. */
  decided() {
    const reason = this.footer && this.footer.querySelector(".reason");
    if (reason) reason.textContent = "Paused for your approval";
  }

  offerContinue() {
    if (!this.footer) return;
    this.footer.append(el("button", { type: "button", text: "Continue with a fresh budget", onclick: (e) => { e.target.remove(); resumeTurn({ continue: true }); } }));
  }
}

/** The choices of an elicitation field and the words shown for each: `enum` (with
 * `enumNames`) or `oneOf` / `anyOf` entries' `const` (with their `title`). */
function fieldChoices(field) {
  if (!field) return [];
  if (Array.isArray(field.enum)) return field.enum.map((c, i) => ({ value: c, title: String((field.enumNames || [])[i] ?? c) }));
  const options = field.oneOf || field.anyOf || [];
  return options.filter((o) => o && o.const !== undefined).map((o) => ({ value: o.const, title: String(o.title ?? o.const) }));
}

/** One field of an elicitation form: its node (label, input, default, description, a
 * place for its problem) and how to read its value (`undefined`: left empty). */
function formField(name, field, required) {
  const kind = field.type || "string";
  const title = `${field.title || name}${required ? " *" : ""}`;
  const why = el("span", { class: "field-error", role: "status" });
  const shownDefault = (d) => (Array.isArray(d) ? d.join(", ") : d === true ? "yes" : d === false ? "no" : String(d));
  const extra = [
    field.default !== undefined ? el("span", { class: "default", text: `default: ${shownDefault(field.default)}` }) : null,
    field.description ? el("span", { class: "why", text: field.description }) : null,
    why,
  ];
  const multi = kind === "array" ? fieldChoices(field.items) : [];
  if (kind === "array" && multi.length) {
    // A multi-select: a checkbox per choice, the default's choices ticked.
    const picked = new Set(Array.isArray(field.default) ? field.default.map(String) : []);
    const boxes = multi.map((c) => {
      const input = el("input", { type: "checkbox", value: String(c.value) });
      input.name = name;
      input.checked = picked.has(String(c.value));
      return { input, c, node: el("label", { class: "choice" }, input, el("span", { text: c.title })) };
    });
    const node = el("fieldset", { class: "field multi", "data-name": name }, el("legend", { class: "label", text: title }), ...boxes.map((b) => b.node), ...extra);
    return { node, value: () => boxes.filter((b) => b.input.checked).map((b) => b.c.value) };
  }
  const choices = fieldChoices(field);
  let input;
  let value;
  if (kind === "boolean") {
    input = el("input", { type: "checkbox" });
    input.checked = field.default === true;
    value = () => input.checked;
  } else if (choices.length) {
    input = el("select", {});
    if (!required || field.default === undefined) input.append(el("option", { value: "", text: "—" }));
    choices.forEach((c, i) => input.append(el("option", { value: String(i), text: c.title })));
    if (field.default !== undefined) {
      const at = choices.findIndex((c) => c.value === field.default);
      if (at >= 0) input.value = String(at);
    }
    value = () => (input.value === "" ? undefined : choices[Number(input.value)].value);
  } else {
    const numeric = kind === "number" || kind === "integer";
    const type = numeric ? "number" : { email: "email", uri: "url", date: "date" }[field.format] || "text";
    input = el("input", { type });
    if (kind === "integer") input.step = "1";
    if (kind === "number") input.step = "any";
    if (field.default !== undefined) input.value = String(field.default);
    value = () => (input.value === "" ? undefined : numeric ? Number(input.value) : input.value);
  }
  input.name = name;
  const node = el("label", { class: "field", "data-name": name }, el("span", { class: "label", text: title }), input, ...extra);
  return { node, value };
}

/** What is wrong with `value` as an answer to `field` (the checks the server makes),
 * in words; "" when it fits. */
function fieldProblem(field, value, required) {
  const kind = field.type || "string";
  if (value === undefined) return required ? "is required" : "";
  if (kind === "number" || kind === "integer") {
    if (!Number.isFinite(value)) return `must be a${kind === "integer" ? "n" : ""} ${kind}`;
    if (kind === "integer" && !Number.isInteger(value)) return "must be a whole number";
    if (typeof field.minimum === "number" && value < field.minimum) return `must be at least ${field.minimum}`;
    if (typeof field.maximum === "number" && value > field.maximum) return `must be at most ${field.maximum}`;
  } else if (kind === "array") {
    if (typeof field.minItems === "number" && value.length < field.minItems) return `pick at least ${field.minItems}`;
    if (typeof field.maxItems === "number" && value.length > field.maxItems) return `pick at most ${field.maxItems}`;
  } else if (kind === "string") {
    const n = [...value].length;
    if (typeof field.minLength === "number" && n < field.minLength) return `must be at least ${field.minLength} characters`;
    if (typeof field.maxLength === "number" && n > field.maxLength) return `must be at most ${field.maxLength} characters`;
    if (field.format === "email" && !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value)) return "must be a valid email";
  }
  return "";
}

/** The task a sub-agent's call handed it (from the call's arguments), if there is one. */
function taskOf(card) {
  try {
    const task = card && JSON.parse(card.args).task;
    return typeof task === "string" ? task : "";
  } catch {
    return "";
  }
}

/** A sub-agent's turn inside its caller's: a collapsible block (the agents from the top
 * down, what it is doing, and at its end its stop reason, calls and cost) holding its own
 * text, tool calls, notices and, nested, its own sub-agents. */
class AgentView extends TurnView {
  /** `task`: what its caller asked of it, as the call's arguments say. */
  constructor(parent, path, task) {
    const body = el("div", { class: "agent-body" });
    super(body);
    const names = path.map((hop) => hop.agent);
    this.status = el("span", { class: "status", text: "running…" });
    this.summary = el("span", { class: "agent-stats" });
    this.node = el(
      "details",
      { class: "agent running", "data-agent": names[names.length - 1], "data-call": path[path.length - 1].call_id, "aria-label": `Sub-agent ${names.join(" › ")}` },
      el("summary", { class: "head" }, el("span", { class: "path", text: names.join(" › ") }), task ? el("span", { class: "task", text: task }) : null, this.summary, this.status),
      body,
    );
    parent.append(this.node);
  }

  /** Its end: the stop reason in its head, and its calls and cost (its own sub-agents' included). */
  end(reason, stats, message) {
    this.answer = null;
    this.cardRow = null;
    this.node.className = `agent ${CLEAN.has(reason) ? "clean" : "bad"}`;
    this.node.dataset.reason = reason;
    this.status.textContent = STOP_WORDS[reason] || reason;
    this.summary.textContent = statsLine(stats);
    if (message) this.parent.append(el("div", { class: "notice", role: "note" }, el("span", { class: "detail", text: message })));
  }

  offerApproval() {}

  offerContinue() {}
}

/** The calls of a stored conversation that wait for approval: those of its last
 * message, when that message only asks for calls. */
function pendingCalls(detail) {
  const last = (detail.messages || [])[detail.messages.length - 1];
  if (!last || last.role !== "assistant") return [];
  return (last.tool_calls || []).map((c) => ({ id: c.id, name: c.name, arguments: c.arguments, why: "" }));
}

// ---------- streaming a turn ----------

function setRunning(running) {
  state.running = running;
  $("send").hidden = running;
  $("stop").hidden = !running;
  $("message").disabled = running;
  if (!running) $("message").focus();
}

/** Reads an SSE response, calling `onEvent(name, data, id)` for each event. */
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      let parsed;
      try {
        parsed = JSON.parse(data.join("\n"));
      } catch {
        continue;
      }
      onEvent(name, parsed, id);
    }
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One event of a turn, drawn into `view`. */
function drawEvent(view, name, data) {
  switch (name) {
    case "conversation":
      state.turnId = data.turn_id;
      if (data.conversation_id && data.conversation_id !== state.conversation) {
        state.conversation = data.conversation_id;
        history.replaceState(null, "", `#${data.conversation_id}`);
      }
      break;
    case "text_delta":
      view.text(data.text);
      break;
    case "tool_call_start":
      view.callStart(data.id, data.name, data.arguments);
      break;
    case "tool_call_result":
      view.callResult(data.id, data.name, data.content, data.is_error);
      break;
    case "tool_progress":
      view.callProgress(data);
      break;
    case "guard_tripped":
      view.notice(data.guard, data.action, data.skill, data.detail);
      break;
    case "iteration_stats":
      view.context = { used: data.context_tokens, window: data.context_window };
      break;
    case "approval_required":
      view.pending = data.calls;
      break;
    case "elicitation_required":
      view.askElicitation(data);
      break;
    case "elicitation_resolved":
      view.elicitationResolved(data.id, data.action);
      break;
    case "agent":
      view.agentEvent(data.path, data.event);
      break;
    case "done":
    case "error":
      view.end(data.reason, data.stats, name === "error" ? data.message : null);
      if (data.reason === "approval_required" && view.pending) view.offerApproval(view.pending);
      if (CAPPED.has(data.reason)) view.offerContinue();
      break;
    default:
      break;
  }
  scrollDown();
}

/** Tries to reattach to the running turn this long before saying the stream is lost. */
const REATTACH_TRIES = 40;

/** Follows a turn to its end: the events of `response` (none: reattach at once), then,
 * whenever the stream breaks before the turn's last event (a dropped connection, a
 * proxy timeout), the events it missed from /v1/turns/{id}/events, numbered so that
 * none is drawn twice. The turn runs on the server meanwhile. */
async function followTurn(view, response) {
  const streamed = response !== null;
  let last = 0;
  let ended = false;
  const onEvent = (name, data, id) => {
    if (id !== null) {
      const n = Number(id);
      if (n <= last) return;
      last = n;
    }
    if (name === "done" || name === "error") ended = true;
    if (name === "interrupted") {
      ended = true;
      view.end("interrupted", null, data.message);
      return;
    }
    view.reconnecting(false);
    drawEvent(view, name, data);
  };
  for (let tries = 0; ; tries++) {
    if (response) {
      try {
        await readEvents(response, onEvent);
      } catch {
        // The connection broke mid-stream: reattach below.
      }
    }
    if (ended) return;
    if (!state.turnId || tries >= REATTACH_TRIES) break;
    if (streamed || tries > 0) view.reconnecting(true);
    if (tries > 0) await sleep(Math.min(250 * tries, 3000));
    response = null;
    try {
      const r = await api(`/v1/turns/${encodeURIComponent(state.turnId)}/events`, { headers: { "last-event-id": String(last) } });
      if (r.status === 404) break;
      if (r.ok) response = r;
    } catch (e) {
      if (e instanceof AuthError) throw e;
    }
  }
  view.reconnecting(false);
  view.end("interrupted", null, "the connection to the turn was lost; open the conversation again to see what it stored");
}

/** After a turn: the list again, and the open conversation's versions (a Regenerate or an
 * Edit made one), read from what the server stored. */
async function refreshOpen() {
  const id = state.conversation;
  if (id) {
    const detail = await apiJson(`/v1/conversations/${encodeURIComponent(id)}`);
    if (state.conversation === id && !state.running) state.detail = detail;
  }
  await loadConversations();
}

/** Runs `job` (which follows one turn) with the page in its running state. */
async function whileRunning(job) {
  setRunning(true);
  try {
    await job();
  } catch (e) {
    showError(e);
  } finally {
    state.turnId = null;
    setRunning(false);
    refreshOpen().catch(() => {});
  }
}

async function streamTurn(path, body, view) {
  await whileRunning(async () => {
    const response = await withKey(async () => {
      const r = await api(path, { method: "POST", json: body });
      if (!r.ok) {
        const err = await r.json().catch(() => null);
        throw new Error(err && err.error ? err.error.message : `HTTP ${r.status}`);
      }
      return r;
    });
    await followTurn(view, response);
  });
}

/** Picks up a turn that was running when the page (re)loaded: its events from the first. */
async function attachRunning(view, turnId) {
  state.turnId = turnId;
  await whileRunning(() => followTurn(view, null));
}

async function send(text) {
  const transcript = $("transcript");
  transcript.querySelector(".empty-hint")?.remove();
  const view = new TurnView(transcript);
  view.user(text);
  scrollDown();
  const body = { message: text, model: $("model").value || undefined };
  if (state.conversation) body.conversation_id = state.conversation;
  else if (hasSettings(state.settings)) body.settings = state.settings;
  await streamTurn("/v1/chat", body, view);
}

/** Resumes the open conversation's paused turn; `from`, the view of the turn that paused,
 * whose waiting cards the resumed turn goes on drawing. */
async function resumeTurn(body, from = null) {
  if (!state.conversation) return;
  const view = new TurnView($("transcript"), from);
  await streamTurn(`/v1/conversations/${encodeURIComponent(state.conversation)}/resume`, body, view);
}

async function stop() {
  if (!state.turnId) return;
  $("stop").disabled = true;
  try {
    await withKey(() => apiJson(`/v1/turns/${encodeURIComponent(state.turnId)}/cancel`, { method: "POST" }));
  } catch (e) {
    showError(e);
  } finally {
    $("stop").disabled = false;
  }
}

function showError(e) {
  $("transcript").append(el("div", { class: "notice error", role: "alert", text: `Error: ${e.message || e}` }));
  scrollDown();
}

// ---------- wiring ----------

function closeSidebar() {
  $("sidebar").classList.remove("open");
}

function start() {
  $("forget-key").hidden = !state.key;
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message").value.trim();
    if (!text || state.running) return;
    $("message").value = "";
    send(text);
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  // The address names the open conversation: the skip link moves focus, not the address.
  document.querySelector(".skip-link").addEventListener("click", (e) => {
    e.preventDefault();
    $("message").focus();
  });
  $("export-md").addEventListener("click", () => exportConversation("md").catch(showError));
  $("export-json").addEventListener("click", () => exportConversation("json").catch(showError));
  let searching = null;
  $("search").addEventListener("input", () => {
    clearTimeout(searching);
    searching = setTimeout(() => loadConversations().catch(showError), 200);
  });
  let theme = localStorage.getItem(THEME_SLOT);
  if (!THEMES.includes(theme)) theme = "system";
  applyTheme(theme);
  $("theme").addEventListener("click", () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    localStorage.setItem(THEME_SLOT, theme);
    applyTheme(theme);
  });
  $("new-chat").addEventListener("click", newConversation);
  $("open-sidebar").addEventListener("click", () => $("sidebar").classList.add("open"));
  $("close-sidebar").addEventListener("click", closeSidebar);
  $("settings").addEventListener("click", openSettings);
  $("settings-cancel").addEventListener("click", () => $("settings-dialog").close());
  $("settings-form").addEventListener("submit", (e) => {
    e.preventDefault();
    saveSettings();
  });
  $("rename-cancel").addEventListener("click", () => $("rename-dialog").close("cancel"));
  $("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_SLOT);
    state.key = "";
    location.reload();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && state.running) stop();
  });
  // The conversation the address named when the page loaded: once a turn starts, the
  // address names that turn's conversation, which must not be drawn again from the
  // store while it streams.
  const wanted = location.hash.slice(1);
  withKey(async () => {
    await loadModels();
    watchHealth();
    await loadConversations();
  })
    .then(() => {
      // A person who sent a message while the list loaded has already begun.
      if (state.running || state.conversation) return null;
      // Loading ends after the page is usable: focus a person moved meanwhile (Tab to the
      // skip link, a click on the list) stays where they put it.
      const untouched = !document.activeElement || document.activeElement === document.body;
      if (wanted) return openConversation(wanted).catch((e) => { showError(e); newConversation({ focus: untouched }); });
      newConversation({ focus: untouched });
      return null;
    })
    .catch(showError);
}

document.addEventListener("DOMContentLoaded", start);
