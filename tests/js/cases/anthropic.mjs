// @anthropic-ai/sdk 1.16.0 on the Anthropic face (/v1/messages): create, and the stream helper.
import Anthropic from "@anthropic-ai/sdk";
import { PROXY, TOOL_RESULT, run, abortAfterFirst, report } from "./lib.mjs";

const client = new Anthropic({ baseURL: PROXY, apiKey: "unused", maxRetries: 0, timeout: 20000 });
const tools = [{ name: "get_weather", description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
const ask = [{ role: "user", content: "weather in Oslo?" }];

async function messages(model, stream, extra = {}) {
  const body = { model, max_tokens: 256, messages: ask, ...extra };
  // Non-stream: messages.create; stream: messages.stream, read event by event, then its final message.
  let message;
  if (stream) {
    const s = client.messages.stream(body);
    for await (const _ of s) { /* every event passes through the SDK's accumulator */ }
    message = await s.finalMessage();
  } else {
    message = await client.messages.create(body);
  }
  const text = message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  const reasoning = message.content.filter((b) => b.type === "thinking").map((b) => b.thinking).join("");
  const calls = message.content.filter((b) => b.type === "tool_use")
    .map((b) => ({ id: b.id, name: b.name, arguments: JSON.stringify(b.input) }));
  return { text, finish: message.stop_reason, reasoning: reasoning || null, calls, message };
}

async function tool(stream) {
  const first = await messages("tool", stream, { tools });
  const call = first.calls[0];
  const history = [...ask, { role: "assistant", content: first.message.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: TOOL_RESULT }] }];
  const second = await messages("tool", stream, { tools, messages: history });
  return { call, final: second.text };
}

for (const stream of [false, true]) {
  const s = stream ? ".stream" : "";
  // The whole message stays out of the report: only what the Python side checks goes in.
  const shown = async (...a) => { const { message, ...rest } = await messages(...a); return rest; };
  await run(`messages.text${s}`, () => shown("text", stream));
  await run(`messages.tool${s}`, () => tool(stream));
  await run(`messages.reasoning${s}`, () => shown("reasoning", stream, { thinking: { type: "enabled", budget_tokens: 128 } }));
  await run(`messages.length${s}`, () => shown("length", stream, { max_tokens: 1 }));
}
await run("messages.fail.stream", () => messages("fail", true));
await run("messages.abort.stream", () => abortAfterFirst(async function* (signal) {
  const s = await client.messages.create({ model: "abort", max_tokens: 64, messages: ask, stream: true }, { signal });
  for await (const ev of s) if (ev.type === "content_block_delta") yield ev;
}));
report();
