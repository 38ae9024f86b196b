// Drives a running `buddy serve` with the official `openai` Node SDK and the Vercel AI
// SDK, in the patterns their own documentation shows. Exits non-zero on the first
// failure. Usage: node check.mjs BASE_URL API_KEY
// Run by the Rust test `the_node_clients_work_against_the_server` (see scripts/test.sh).
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, tool, stepCountIs } from "ai";
import { z } from "zod";

const [baseUrl, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0, timeout: 30_000 });
let checks = 0;
function check(condition, what) {
  if (!condition) {
    console.error(`FAILED: ${what}`);
    process.exit(1);
  }
  checks += 1;
}
const question = [{ role: "user", content: "How much was Ada's latest order?" }];
const tools = [{
  type: "function",
  function: {
    name: "lookup_customer",
    description: "Look a customer up by email.",
    parameters: { type: "object", properties: { email: { type: "string" } }, required: ["email"] },
  },
}];
const who = [{ role: "user", content: "Who is ada@example.com?" }];

// --- the openai Node SDK: Chat Completions
const reply = await client.chat.completions.create({ model: "scripted:chain_3_steps", messages: question });
check(reply.choices[0].message.content.includes("129.90"), `answer: ${reply.choices[0].message.content}`);

// The loop of OpenAI's own examples: every chunk has a choices[0].
let naive = "";
const stream = await client.chat.completions.create({ model: "scripted:chain_3_steps", messages: question, stream: true });
for await (const chunk of stream) naive += chunk.choices[0].delta.content ?? "";
check(naive.includes("129.90"), `streamed: ${naive}`);

// The streaming helper.
const runner = client.chat.completions.stream({ model: "scripted:chain_3_steps", messages: question });
const final = await runner.finalChatCompletion();
check(final.choices[0].message.content.includes("129.90"), "stream helper answer");

// A client tool: paused with tool_calls, resumed with its result.
const paused = await client.chat.completions.create({ model: "scripted:client_tool", messages: who, tools });
check(paused.choices[0].finish_reason === "tool_calls", `finish_reason ${paused.choices[0].finish_reason}`);
const call = paused.choices[0].message.tool_calls[0];
const resumed = await client.chat.completions.create({
  model: "scripted:client_tool",
  messages: [...who, paused.choices[0].message, { role: "tool", tool_call_id: call.id, content: "Ada Lovelace, customer since 2019" }],
  tools,
});
check(resumed.choices[0].message.content.includes("Ada Lovelace"), `resumed: ${resumed.choices[0].message.content}`);

// --- the openai Node SDK: Responses
const response = await client.responses.create({ model: "scripted:chain_3_steps", input: "How much was Ada's latest order?" });
check(response.output_text.includes("129.90"), `response: ${response.output_text}`);
const rstream = client.responses.stream({ model: "scripted:chain_3_steps", input: "How much was Ada's latest order?" });
const kinds = [];
for await (const event of rstream) kinds.push(event.type);
const rfinal = await rstream.finalResponse();
check(kinds[0] === "response.created" && kinds.at(-1) === "response.completed", `events ${kinds}`);
// (finalResponse() carries no output_text in this SDK, whoever the server: read the items.)
const rtext = rfinal.output
  .filter((item) => item.type === "message")
  .flatMap((item) => item.content.map((part) => part.text))
  .join("");
check(rtext.includes("129.90"), `streamed response text: ${rtext}`);
const fnTools = [{ type: "function", name: "lookup_customer", description: "Look a customer up by email.",
  parameters: { type: "object", properties: { email: { type: "string" } }, required: ["email"] }, strict: false }];
const first = await client.responses.create({ model: "scripted:client_tool", input: "Who is ada@example.com?", tools: fnTools });
const fcall = first.output.find((item) => item.type === "function_call");
check(fcall && fcall.name === "lookup_customer", `function_call: ${JSON.stringify(first.output)}`);
const second = await client.responses.create({
  model: "scripted:client_tool",
  previous_response_id: first.id,
  input: [{ type: "function_call_output", call_id: fcall.call_id, output: "Ada Lovelace, customer since 2019" }],
  tools: fnTools,
});
check(second.output_text.includes("Ada Lovelace"), `resumed response: ${second.output_text}`);

// --- the Vercel AI SDK's default provider (the Responses API) and its chat provider
const provider = createOpenAI({ baseURL: `${baseUrl}/v1`, apiKey });
for (const [label, model] of [["responses", provider("scripted:chain_3_steps")], ["chat", provider.chat("scripted:chain_3_steps")]]) {
  const { text } = await generateText({ model, prompt: "How much was Ada's latest order?", maxRetries: 0 });
  check(text.includes("129.90"), `generateText (${label}): ${text}`);
  const streamed = streamText({ model, prompt: "How much was Ada's latest order?", maxRetries: 0 });
  let out = "";
  for await (const part of streamed.textStream) out += part;
  check(out.includes("129.90"), `streamText (${label}): ${out}`);
}
const lookup = tool({
  description: "Look a customer up by email.",
  inputSchema: z.object({ email: z.string() }),
  execute: async () => "Ada Lovelace, customer since 2019",
});
for (const [label, model] of [["responses", provider("scripted:client_tool")], ["chat", provider.chat("scripted:client_tool")]]) {
  const { text } = await generateText({
    model, prompt: "Who is ada@example.com?", tools: { lookup_customer: lookup }, stopWhen: stepCountIs(4), maxRetries: 0,
  });
  check(text.includes("Ada Lovelace"), `generateText with tools (${label}): ${text}`);
  const streamed = streamText({
    model, prompt: "Who is ada@example.com?", tools: { lookup_customer: lookup }, stopWhen: stepCountIs(4), maxRetries: 0,
  });
  let out = "";
  for await (const part of streamed.textStream) out += part;
  check(out.includes("Ada Lovelace"), `streamText with tools (${label}): ${out}`);
}

console.log(`node clients: ${checks} checks passed`);
