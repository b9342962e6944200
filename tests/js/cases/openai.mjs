// openai-node 6.49.0: the chat relay (/v1/chat/completions) and the Responses face (/v1/responses).
import OpenAI from "openai";
import { PROXY, TOOL_RESULT, run, abortAfterFirst, report } from "./lib.mjs";

const client = new OpenAI({ baseURL: `${PROXY}/v1`, apiKey: "unused", maxRetries: 0, timeout: 20000 });
const tools = [{
  type: "function",
  function: { name: "get_weather", description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
}];
const ask = [{ role: "user", content: "weather in Oslo?" }];

async function chat(model, stream, extra = {}) {
  const body = { model, messages: ask, stream, ...extra };
  if (!stream) {
    const r = await client.chat.completions.create(body);
    const m = r.choices[0].message;
    return { text: m.content, finish: r.choices[0].finish_reason, reasoning: m.reasoning_content ?? null,
      calls: (m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) };
  }
  let text = "", reasoning = "", finish = null;
  const calls = [];
  for await (const ch of await client.chat.completions.create(body)) {
    const choice = ch.choices[0];
    if (!choice) continue;
    text += choice.delta?.content ?? "";
    reasoning += choice.delta?.reasoning_content ?? "";
    for (const d of choice.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: "", name: "", arguments: "" };
      calls[d.index].id += d.id ?? "";
      calls[d.index].name += d.function?.name ?? "";
      calls[d.index].arguments += d.function?.arguments ?? "";
    }
    finish = choice.finish_reason ?? finish;
  }
  return { text, finish, reasoning: reasoning || null, calls };
}

async function chatTool(stream) {
  const first = await chat("tool", stream, { tools });
  const call = first.calls[0];
  const messages = [...ask,
    { role: "assistant", content: null, tool_calls: [{ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }] },
    { role: "tool", tool_call_id: call.id, content: TOOL_RESULT }];
  const second = await chat("tool", stream, { tools, messages });
  return { call, final: second.text };
}

async function responses(model, stream, extra = {}) {
  const body = { model, input: "weather in Oslo?", stream, ...extra };
  if (!stream) {
    const r = await client.responses.create(body);
    return summary(r);
  }
  let last = null, deltas = "";
  for await (const ev of await client.responses.create(body)) {
    if (ev.type === "response.output_text.delta") deltas += ev.delta;
    last = ev;
  }
  // A streamed response has no output_text: the text is what its deltas said.
  return { ...summary(last.response), text: deltas, last: last.type };
}

function summary(r) {
  const reasoning = r.output.filter((o) => o.type === "reasoning")
    .flatMap((o) => [...(o.content ?? []), ...(o.summary ?? [])]).map((p) => p.text).join("");
  const calls = r.output.filter((o) => o.type === "function_call")
    .map((o) => ({ id: o.call_id, name: o.name, arguments: o.arguments }));
  return { text: r.output_text, status: r.status, finish: r.incomplete_details?.reason ?? r.status,
    reasoning: reasoning || null, calls, error: r.error?.message ?? null };
}

async function responsesTool(stream) {
  const first = await responses("tool", stream, { tools: [{ type: "function", ...tools[0].function }], store: false });
  const call = first.calls[0];
  const input = [{ role: "user", content: "weather in Oslo?" },
    { type: "function_call", call_id: call.id, name: call.name, arguments: call.arguments },
    { type: "function_call_output", call_id: call.id, output: TOOL_RESULT }];
  const second = await responses("tool", stream, { tools: [{ type: "function", ...tools[0].function }], input, store: false });
  return { call, final: second.text };
}

for (const stream of [false, true]) {
  const s = stream ? ".stream" : "";
  await run(`chat.text${s}`, () => chat("text", stream));
  await run(`chat.tool${s}`, () => chatTool(stream));
  await run(`chat.reasoning${s}`, () => chat("reasoning", stream));
  await run(`chat.length${s}`, () => chat("length", stream, { max_tokens: 1 }));
  await run(`responses.text${s}`, () => responses("text", stream));
  await run(`responses.tool${s}`, () => responsesTool(stream));
  await run(`responses.reasoning${s}`, () => responses("reasoning", stream));
  await run(`responses.length${s}`, () => responses("length", stream, { max_output_tokens: 16 }));
}
await run("chat.fail.stream", () => chat("fail", true));
await run("responses.fail.stream", () => responses("fail", true));
await run("chat.abort.stream", () => abortAfterFirst(async function* (signal) {
  yield* await client.chat.completions.create({ model: "abort", messages: ask, stream: true }, { signal });
}));
await run("responses.abort.stream", () => abortAfterFirst(async function* (signal) {
  for await (const ev of await client.responses.create({ model: "abort", input: "hi", stream: true }, { signal })) {
    if (ev.type === "response.output_text.delta") yield ev;
  }
}));
report();
