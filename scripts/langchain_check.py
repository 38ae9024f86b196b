"""Drives a running `buddy serve` with LangChain's ChatOpenAI, in both of its modes
(Chat Completions, and the Responses API with use_responses_api=True): invoke, stream,
a tool bound with bind_tools, run by the client and sent back, and
with_structured_output.

Usage: python langchain_check.py BASE_URL API_KEY
Run by the Rust test `the_node_and_langchain_clients_work_against_the_server`.
"""
import sys

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

base_url, api_key = sys.argv[1] + "/v1", sys.argv[2]
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    checks += 1


def text(message):
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


class Person(BaseModel):
    name: str
    age: int


@tool
def lookup_customer(email: str) -> str:
    """Look a customer up by email."""
    return "Ada Lovelace, customer since 2019"


for responses in (False, True):
    mode = "responses" if responses else "chat completions"

    def model(name):
        return ChatOpenAI(model=name, base_url=base_url, api_key=api_key, max_retries=0,
                          timeout=30, use_responses_api=responses)

    answer = model("scripted:chain_3_steps").invoke("How much was Ada's latest order?")
    check("129.90" in text(answer), f"{mode} invoke: {text(answer)!r}")
    streamed = "".join(text(chunk) for chunk in model("scripted:chain_3_steps").stream("How much was Ada's latest order?"))
    check("129.90" in streamed, f"{mode} stream: {streamed!r}")

    with_tools = model("scripted:client_tool").bind_tools([lookup_customer])
    question = HumanMessage("Who is ada@example.com?")
    asked = with_tools.invoke([question])
    check(asked.tool_calls and asked.tool_calls[0]["name"] == "lookup_customer", f"{mode} tool call: {asked}")
    result = lookup_customer.invoke(asked.tool_calls[0])
    final = with_tools.invoke([question, asked, result])
    check("Ada Lovelace" in text(final), f"{mode} after the tool: {text(final)!r}")

    # Structured output: a JSON schema goes to the model, the answer comes back parsed.
    person = model("scripted:structured").with_structured_output(Person).invoke("Who wrote the first program?")
    check(person == Person(name="Ada Lovelace", age=36), f"{mode} with_structured_output: {person!r}")

print(f"langchain: {checks} checks passed")
