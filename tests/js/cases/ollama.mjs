// ollama-js 0.6.4 on the Ollama face: /api/chat and /api/generate.
import { Ollama } from "ollama";
import { PROXY, TOOL_RESULT, run, report } from "./lib.mjs";

const client = new Ollama({ host: PROXY });
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const ask = [{ role: "user", content: "weather in Oslo?" }];


async function chat(model, stream, extra = {}) {
  const answer = await client.chat({ model, messages: ask, stream, ...extra });
  const parts = stream ? [] : [answer];
  if (stream) for await (const part of answer) parts.push(part);
  const last = parts[parts.length - 1];
  const calls = parts.flatMap((p) => p.message.tool_calls ?? [])
    .map((c) => ({ name: c.function.name, arguments: JSON.stringify(c.function.arguments) }));
  return { text: parts.map((p) => p.message.content).join(""), finish: last.done_reason,
    reasoning: parts.map((p) => p.message.thinking ?? "").join("") || null, calls,
    message: { role: "assistant", content: "", tool_calls: parts.flatMap((p) => p.message.tool_calls ?? []) } };
}

async function generate(model, stream, extra = {}) {
  const answer = await client.generate({ model, prompt: "weather in Oslo?", stream, ...extra });
  const parts = stream ? [] : [answer];
  if (stream) for await (const part of answer) parts.push(part);
  return { text: parts.map((p) => p.response).join(""), finish: parts[parts.length - 1].done_reason,
    reasoning: parts.map((p) => p.thinking ?? "").join("") || null };
}

async function tool(stream) {
  const first = await chat("tool", stream, { tools });
  const messages = [...ask, first.message, { role: "tool", content: TOOL_RESULT, tool_name: "get_weather" }];
  const second = await chat("tool", stream, { tools, messages });
  return { call: first.calls[0], final: second.text };
}

const shown = (f) => async (...a) => { const { message, ...rest } = await f(...a); return rest; };
for (const stream of [false, true]) {
  const s = stream ? ".stream" : "";
  await run(`chat.text${s}`, () => shown(chat)("text", stream));
  await run(`chat.tool${s}`, () => tool(stream));
  await run(`chat.reasoning${s}`, () => shown(chat)("reasoning", stream, { think: true }));
  await run(`chat.length${s}`, () => shown(chat)("length", stream, { options: { num_predict: 1 } }));
  await run(`generate.text${s}`, () => generate("text", stream));
  await run(`generate.reasoning${s}`, () => generate("reasoning", stream, { think: true }));
  await run(`generate.length${s}`, () => generate("length", stream, { options: { num_predict: 1 } }));
}
await run("chat.fail.stream", () => shown(chat)("fail", true));
await run("generate.fail.stream", () => generate("fail", true));
// ollama-js aborts a stream with its iterator's abort() (an AbortController inside).
async function abort(call) {
  const stream = await call();
  let pieces = 0;
  try {
    for await (const _ of stream) { pieces += 1; stream.abort(); }
  } catch (e) {
    return { pieces, aborted: true, error: e?.name };
  }
  return { pieces, aborted: false, error: null };
}
await run("chat.abort.stream", () => abort(() => client.chat({ model: "abort", messages: ask, stream: true })));
await run("generate.abort.stream", () => abort(() => client.generate({ model: "abort", prompt: "hi", stream: true })));
report();
