"""Drives a running `buddy serve` with the official Anthropic Python SDK (POST /v1/messages).

Usage: python anthropic_sdk_check.py BASE_URL API_KEY
Run by the Rust test `the_anthropic_python_sdk_works_against_the_server` (see
scripts/anthropic-sdk.sh, which installs the pinned SDK).
"""
import sys

import anthropic

base_url, api_key = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)
question = [{"role": "user", "content": "How much was Ada's latest order?"}]
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    checks += 1


# 1. create: buddy runs its own skills server-side and answers with the final text.
reply = client.messages.create(model="scripted:chain_3_steps", max_tokens=1024, messages=question)
check(reply.type == "message" and reply.role == "assistant", f"message: {reply}")
text = "".join(block.text for block in reply.content if block.type == "text")
check("129.90" in text, f"answer: {text!r}")
check(reply.stop_reason == "end_turn", f"stop_reason {reply.stop_reason}")
check(reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0, f"usage {reply.usage}")

# 2. The stream helper: events in Anthropic's order, the final message accumulated.
with client.messages.stream(model="scripted:chain_3_steps", max_tokens=1024, messages=question) as stream:
    kinds = [event.type for event in stream]
    final = stream.get_final_message()
check(kinds[0] == "message_start" and kinds[-1] == "message_stop", f"events {kinds[:2]}…{kinds[-2:]}")
check("content_block_delta" in kinds and "message_delta" in kinds, f"events {sorted(set(kinds))}")
streamed = "".join(block.text for block in final.content if block.type == "text")
check("129.90" in streamed, f"streamed answer: {streamed!r}")
check(final.stop_reason == "end_turn", f"streamed stop_reason {final.stop_reason}")

# 3. A tool the client declares comes back as a tool_use block; its tool_result finishes the turn.
tools = [{
    "name": "lookup_customer",
    "description": "Look a customer up by email.",
    "input_schema": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
}]
who = [{"role": "user", "content": "Who is ada@example.com?"}]
paused = client.messages.create(model="scripted:client_tool", max_tokens=1024, messages=who, tools=tools)
check(paused.stop_reason == "tool_use", f"stop_reason {paused.stop_reason}")
call = [block for block in paused.content if block.type == "tool_use"][0]
check(call.name == "lookup_customer" and call.input.get("email") == "ada@example.com", f"call {call}")
resumed = client.messages.create(
    model="scripted:client_tool",
    max_tokens=1024,
    tools=tools,
    messages=who + [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in paused.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                      "content": "Ada Lovelace, customer since 2019"}]},
    ],
)
answer = "".join(block.text for block in resumed.content if block.type == "text")
check("Ada Lovelace" in answer, f"resumed: {answer!r}")
# The same pause, streamed: the helper assembles the tool_use block from its input_json_delta.
with client.messages.stream(model="scripted:client_tool", max_tokens=1024, messages=who, tools=tools) as stream:
    final = stream.get_final_message()
streamed_call = [block for block in final.content if block.type == "tool_use"][0]
check(streamed_call.input.get("email") == "ada@example.com", f"streamed call {streamed_call}")
check(final.stop_reason == "tool_use", f"streamed stop_reason {final.stop_reason}")

# 4. count_tokens.
count = client.messages.count_tokens(model="scripted:chain_3_steps", messages=question, tools=tools)
check(count.input_tokens > 0, f"count {count}")

# 5. The model list in Anthropic's shape.
models = client.models.list()
check(any(model.id == "scripted:chain_3_steps" for model in models.data), f"models {models}")

# 6. Errors are Anthropic's error objects, which the SDK turns into typed exceptions.
try:
    client.messages.create(model="scripted:does_not_exist", max_tokens=10, messages=question)
    check(False, "an unknown model must fail")
except anthropic.BadRequestError as error:
    check("does_not_exist" in str(error), f"error text: {error}")
    check(error.body["type"] == "error", f"error body {error.body}")
try:
    anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0).messages.create(
        model="scripted:chain_3_steps", max_tokens=10, messages=question
    )
    check(False, "a wrong key must fail")
except anthropic.AuthenticationError:
    checks += 1
try:
    client.messages.create(
        model="scripted:chain_3_steps", max_tokens=10, messages=question, extra_body={"top_k": 3}
    )
    check(False, "top_k must be refused by name")
except anthropic.BadRequestError as error:
    check("top_k" in str(error), f"error text: {error}")

print(f"anthropic sdk: all checks passed ({checks})")
