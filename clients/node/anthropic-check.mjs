// Drives a running `buddy serve` with the official Anthropic TypeScript SDK
// (`@anthropic-ai/sdk`) through POST /v1/messages: create, stream, a client tool's round
// trip, count_tokens, models and errors. Exits non-zero on the first failure.
// Usage: node anthropic-check.mjs BASE_URL API_KEY
// Run by the Rust test `the_anthropic_typescript_sdk_works_against_the_server`.
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
let checks = 0;
function check(condition, what) {
  if (!condition) {
    console.error(`FAILED: ${what}`);
    process.exit(1);
  }
  checks += 1;
}
const textOf = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
const question = [{ role: "user", content: "How much was Ada's latest order?" }];

// 1. create.
const reply = await client.messages.create({ model: "scripted:chain_3_steps", max_tokens: 1024, messages: question });
check(reply.type === "message" && reply.role === "assistant", `message: ${JSON.stringify(reply)}`);
check(textOf(reply).includes("129.90"), `answer: ${textOf(reply)}`);
check(reply.stop_reason === "end_turn", `stop_reason ${reply.stop_reason}`);

// 2. The stream helper.
const stream = client.messages.stream({ model: "scripted:chain_3_steps", max_tokens: 1024, messages: question });
const kinds = [];
stream.on("streamEvent", (event) => kinds.push(event.type));
const final = await stream.finalMessage();
check(kinds[0] === "message_start" && kinds.at(-1) === "message_stop", `events ${kinds}`);
check(textOf(final).includes("129.90"), `streamed answer: ${textOf(final)}`);

// 3. A client tool: tool_use, then its tool_result finishes the turn (whole and streamed).
const tools = [{
  name: "lookup_customer",
  description: "Look a customer up by email.",
  input_schema: { type: "object", properties: { email: { type: "string" } }, required: ["email"] },
}];
const who = [{ role: "user", content: "Who is ada@example.com?" }];
const paused = await client.messages.create({ model: "scripted:client_tool", max_tokens: 1024, messages: who, tools });
check(paused.stop_reason === "tool_use", `stop_reason ${paused.stop_reason}`);
const call = paused.content.find((b) => b.type === "tool_use");
check(call.name === "lookup_customer" && call.input.email === "ada@example.com", `call ${JSON.stringify(call)}`);
const resumed = await client.messages.create({
  model: "scripted:client_tool",
  max_tokens: 1024,
  tools,
  messages: [
    ...who,
    { role: "assistant", content: paused.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "Ada Lovelace, customer since 2019" }] },
  ],
});
check(textOf(resumed).includes("Ada Lovelace"), `resumed: ${textOf(resumed)}`);
const streamedPause = await client.messages
  .stream({ model: "scripted:client_tool", max_tokens: 1024, messages: who, tools })
  .finalMessage();
const streamedCall = streamedPause.content.find((b) => b.type === "tool_use");
check(streamedCall?.input?.email === "ada@example.com", `streamed call ${JSON.stringify(streamedPause.content)}`);

// 4. count_tokens and the model list.
const count = await client.messages.countTokens({ model: "scripted:chain_3_steps", messages: question, tools });
check(count.input_tokens > 0, `count ${JSON.stringify(count)}`);
const models = await client.models.list();
check(models.data.some((m) => m.id === "scripted:chain_3_steps"), `models ${JSON.stringify(models.data.slice(0, 2))}`);

// 5. Errors as typed exceptions.
try {
  await client.messages.create({ model: "scripted:does_not_exist", max_tokens: 10, messages: question });
  check(false, "an unknown model must fail");
} catch (error) {
  check(error instanceof Anthropic.BadRequestError, `error class ${error?.constructor?.name}`);
  check(String(error.message).includes("does_not_exist"), `error text ${error.message}`);
}
try {
  await new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 }).messages.create({
    model: "scripted:chain_3_steps", max_tokens: 10, messages: question,
  });
  check(false, "a wrong key must fail");
} catch (error) {
  check(error instanceof Anthropic.AuthenticationError, `error class ${error?.constructor?.name}`);
}

console.log(`anthropic ts sdk: all checks passed (${checks})`);
