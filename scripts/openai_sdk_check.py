"""Drives a running `buddy serve` with the official openai Python SDK.

Usage: python openai_sdk_check.py BASE_URL API_KEY
Run by the Rust test `the_openai_python_sdk_works_against_the_server` (see scripts/test.sh).
"""
import concurrent.futures
import sys
import time

import openai

base_url, api_key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0, timeout=30)
question = [{"role": "user", "content": "How much was Ada's latest order?"}]
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    checks += 1


# 1. Non-streaming: buddy runs its skills server-side and returns the final answer.
reply = client.chat.completions.create(model="scripted:chain_3_steps", messages=question)
check(reply.object == "chat.completion", "object")
check("129.90" in reply.choices[0].message.content, f"answer: {reply.choices[0].message.content!r}")
check(reply.choices[0].finish_reason == "stop", "finish_reason")
check(reply.usage is not None and reply.usage.total_tokens > 0, "usage")

# 2. create(stream=True): chunks, then usage, then [DONE].
chunks = list(
    client.chat.completions.create(
        model="scripted:chain_3_steps", messages=question, stream=True, stream_options={"include_usage": True}
    )
)
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check("129.90" in text, f"streamed text: {text!r}")
check(all(c.object == "chat.completion.chunk" for c in chunks), "chunk objects")
check(chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0, "usage chunk")
check([c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop", "stream finish_reason")

# 2b. The loop of OpenAI's own examples, without stream_options: every chunk has a
# choices[0] (no usage chunk unless asked for).
naive = ""
for c in client.chat.completions.create(model="scripted:chain_3_steps", messages=question, stream=True):
    naive += c.choices[0].delta.content or ""
    check(c.usage is None, "no usage field unless asked for")
check("129.90" in naive, f"naive streamed text: {naive!r}")
check(all(c.usage is None for c in chunks[:-1]), "usage only on the last chunk when asked for")

# 3. The strict .stream() helper.
with client.chat.completions.stream(model="scripted:chain_3_steps", messages=question) as stream:
    events = [event.type for event in stream]
    final = stream.get_final_completion()
check("129.90" in final.choices[0].message.content, f"helper answer: {final.choices[0].message.content!r}")
check("content.done" in events, f"helper events: {sorted(set(events))}")

# 4. A tool the client declares comes back as ordinary tool_calls; the turn resumes with its result.
tools = [{
    "type": "function",
    "function": {
        "name": "lookup_customer",
        "description": "Look a customer up by email.",
        "parameters": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
    },
}]
who = [{"role": "user", "content": "Who is ada@example.com?"}]
paused = client.chat.completions.create(model="scripted:client_tool", messages=who, tools=tools)
check(paused.choices[0].finish_reason == "tool_calls", f"finish_reason {paused.choices[0].finish_reason}")
call = paused.choices[0].message.tool_calls[0]
check(call.function.name == "lookup_customer" and "ada@example.com" in call.function.arguments, f"call {call}")
resumed = client.chat.completions.create(
    model="scripted:client_tool",
    messages=who + [
        paused.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Ada Lovelace, customer since 2019"},
    ],
    tools=tools,
)
check("Ada Lovelace" in resumed.choices[0].message.content, f"resumed: {resumed.choices[0].message.content!r}")

# 5. The same through the streaming helper: tool-call pieces carry a gap-free index.
with client.chat.completions.stream(model="scripted:client_tool", messages=who, tools=tools) as stream:
    for _ in stream:
        pass
    final = stream.get_final_completion()
check(final.choices[0].finish_reason == "tool_calls", "streamed tool_calls finish")
check(final.choices[0].message.tool_calls[0].function.name == "lookup_customer", "streamed tool call")

# 5b. The Responses API: create, the stream() helper, and client function tools resumed
#     after previous_response_id (buddy's own skills show as mcp_call items).
response = client.responses.create(model="scripted:chain_3_steps", input="How much was Ada's latest order?")
check(response.status == "completed", f"response status {response.status}")
check("129.90" in response.output_text, f"response text: {response.output_text!r}")
check(any(item.type == "mcp_call" for item in response.output), "server-side calls as mcp_call items")
# Narration and the answer are separate messages, labelled by phase; joined, they keep apart.
phases = [item.phase for item in response.output if item.type == "message"]
check(phases == ["commentary"] * 3 + ["final_answer"], f"message phases {phases}")
check("the invoice.\n\nAda's latest order" in response.output_text, f"output_text: {response.output_text!r}")
check(response.usage is not None and response.usage.total_tokens > 0, "response usage")
# Stored responses: retrieve, their input items, delete.
again = client.responses.retrieve(response.id)
check(again.id == response.id and again.output_text == response.output_text, f"retrieve: {again}")
inputs = client.responses.input_items.list(response.id)
check(inputs.data[0].role == "user", f"input items: {inputs}")
deleted = client.responses.delete(response.id)
check(deleted is None or getattr(deleted, "deleted", True), f"delete: {deleted!r}")
try:
    client.responses.retrieve(response.id)
    check(False, "a deleted response must be gone")
except openai.NotFoundError:
    checks += 1
with client.responses.stream(model="scripted:chain_3_steps", input="How much was Ada's latest order?") as stream:
    kinds = [event.type for event in stream]
    streamed = stream.get_final_response()
check(kinds[0] == "response.created" and kinds[-1] == "response.completed", f"stream events {kinds[:3]}…{kinds[-2:]}")
check("response.output_text.delta" in kinds, "text deltas")
check("129.90" in streamed.output_text, f"streamed response text: {streamed.output_text!r}")
fn_tools = [{
    "type": "function",
    "name": "lookup_customer",
    "description": "Look a customer up by email.",
    "parameters": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
}]
first = client.responses.create(model="scripted:client_tool", input="Who is ada@example.com?", tools=fn_tools)
calls = [item for item in first.output if item.type == "function_call"]
check(len(calls) == 1 and calls[0].name == "lookup_customer", f"function_call items: {first.output}")
second = client.responses.create(
    model="scripted:client_tool",
    previous_response_id=first.id,
    input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "Ada Lovelace, customer since 2019"}],
    tools=fn_tools,
)
check("Ada Lovelace" in second.output_text, f"resumed response: {second.output_text!r}")
# A hosted tool buddy's model server cannot run is left out and named, never a 400 that
# stops the client (codex sends `web_search`).
raw = client.responses.with_raw_response.create(
    model="scripted:chain_3_steps", input="How much was Ada's latest order?", tools=[{"type": "web_search"}]
)
check("web_search" in raw.headers.get("buddy-warning", ""), f"warning header: {raw.headers}")
check("129.90" in raw.parse().output_text, "answered without the hosted tool")

# 6. Errors are JSON error objects the SDK turns into typed exceptions.
try:
    client.chat.completions.create(model="scripted:does_not_exist", messages=question)
    check(False, "an unknown model must fail")
except openai.BadRequestError as error:
    check("does_not_exist" in str(error), f"error text: {error}")
try:
    openai.OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0).models.list()
    check(False, "a wrong key must fail")
except openai.AuthenticationError:
    checks += 1

# 7. A turn that fails is never run again by the SDK's retries (it would retry a 5xx twice):
#    buddy answers with a status that says whose fault it is and `x-should-retry: false`.
#    The Rust test then checks /metrics for exactly one such turn.
retrying = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=2, timeout=30)
try:
    retrying.chat.completions.create(model="scripted:runaway_on_limit_error", messages=question)
    check(False, "a turn that ends in an error must fail")
except openai.APIStatusError as error:
    check(error.status_code == 422, f"status {error.status_code}")
    check(error.response.headers.get("x-should-retry") == "false", "x-should-retry")
    check("max_model_calls" in str(error), f"error text: {error}")
# A malformed history (a tool result without its call) is the client's fault: 400.
try:
    retrying.chat.completions.create(
        model="scripted:chain_3_steps",
        messages=question + [{"role": "tool", "tool_call_id": "call_nowhere", "content": "orphan"}],
    )
    check(False, "an orphan tool result must fail")
except openai.BadRequestError as error:
    check("call_nowhere" in str(error), f"error text: {error}")

# Structured output: parse() sends a JSON schema (response_format / text.format), and
# reads the answer back into the class.
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int


who = [{"role": "user", "content": "Who wrote the first program?"}]
parsed = client.chat.completions.parse(model="scripted:structured", messages=who, response_format=Person)
check(parsed.choices[0].message.parsed == Person(name="Ada Lovelace", age=36), f"parse: {parsed}")
parsed = client.responses.parse(model="scripted:structured", input="Who wrote the first program?", text_format=Person)
check(parsed.output_parsed == Person(name="Ada Lovelace", age=36), f"responses.parse: {parsed}")
check(parsed.text.format.type == "json_schema", f"the response says its format: {parsed.text}")
check(parsed.temperature == 1.0, "default temperature echoed")

# The Conversations API: a conversation with items, a response in it, its items, delete.
conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": "I am Ada."}])
check(conversation.object == "conversation", f"conversation: {conversation}")
in_it = client.responses.create(
    model="scripted:chain_3_steps", conversation=conversation.id, input="How much was Ada's latest order?"
)
check("129.90" in in_it.output_text, f"response in a conversation: {in_it.output_text!r}")
listed = client.conversations.items.list(conversation.id, order="asc")
check(listed.data[0].content[0].text == "I am Ada." and len(listed.data) > 3, f"items: {listed}")
check(client.conversations.retrieve(conversation.id).id == conversation.id, "retrieve a conversation")
check(client.conversations.delete(conversation.id).deleted, "delete a conversation")

# Responses form a tree: continuing one response twice, and three times at once, makes
# branches (no 409); deleting one response keeps the one it continues.
root = client.responses.create(model="scripted:chain_3_steps", input="How much was Ada's latest order?")
child = client.responses.create(model="scripted:chain_3_steps", previous_response_id=root.id, input="And before?")
sibling = client.responses.create(model="scripted:chain_3_steps", previous_response_id=root.id, input="And after?")
check(sibling.previous_response_id == root.id and sibling.id != child.id, f"a branch from root: {sibling.id}")
with concurrent.futures.ThreadPoolExecutor(3) as pool:
    branches = list(pool.map(
        lambda word: client.responses.create(
            model="scripted:chain_3_steps", previous_response_id=root.id, input=word
        ),
        ["one", "two", "three"],
    ))
check(len({b.id for b in branches}) == 3 and all(b.status == "completed" for b in branches), "three branches at once")
client.responses.delete(child.id)
check(client.responses.retrieve(root.id).id == root.id, "deleting a child keeps its parent")
check(client.responses.retrieve(sibling.id).id == sibling.id, "and its sibling")

# Conversation items: the SDK's own pagination ends, items are read and popped one by one.
paged = client.conversations.create(
    items=[{"type": "message", "role": "user", "content": f"note {i}"} for i in range(5)]
)
seen = []
for item in client.conversations.items.list(paged.id, limit=2, order="asc"):
    seen.append(item.content[0].text)
    if len(seen) > 50:
        break
check(seen == [f"note {i}" for i in range(5)], f"paged items: {seen}")
newest = client.conversations.items.list(paged.id, limit=1).data[0]
check(client.conversations.items.retrieve(newest.id, conversation_id=paged.id).id == newest.id, "retrieve an item")
after_pop = client.conversations.items.delete(newest.id, conversation_id=paged.id)
check(after_pop.id == paged.id, f"delete an item answers the conversation: {after_pop}")
left = [item.content[0].text for item in client.conversations.items.list(paged.id, order="asc")]
check(left == [f"note {i}" for i in range(4)], f"items after the pop: {left}")

# A background response cancelled while it runs reads back cancelled.
background = client.responses.create(model="scripted:slow_tool", input="wait for it", background=True)
check(background.status in ("queued", "in_progress"), f"background: {background.status}")
cancelled = client.responses.cancel(background.id)
check(cancelled.status == "cancelled", f"cancel: {cancelled.status}")
for _ in range(200):
    polled = client.responses.retrieve(background.id)
    if polled.status != "in_progress":
        break
    time.sleep(0.05)
check(polled.status == "cancelled", f"a cancelled response reads back {polled.status}")

# retrieve(stream=True) of a response that was never streamed.
whole = client.responses.create(model="scripted:chain_3_steps", input="How much was Ada's latest order?")
replay = [event.type for event in client.responses.retrieve(whole.id, stream=True)]
check(replay[0] == "response.created" and replay[-1] == "response.completed", f"retrieve stream: {replay[:2]}…{replay[-1:]}")

models = [m.id for m in client.models.list()]
check("scripted:chain_3_steps" in models, "models list")
print(f"openai sdk: all checks passed ({checks})")
