// The Vercel AI SDK 6 (ai 6.0.326): generateText and streamText with @ai-sdk/openai-compatible
// and @ai-sdk/openai's .chat() over the chat relay, and @ai-sdk/anthropic over the Anthropic face.
// (@ai-sdk/openai's default Responses provider is tested with the Responses face.)
import { generateText, streamText, tool, jsonSchema, stepCountIs } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { PROXY, TOOL_RESULT, run, report } from "./lib.mjs";

const providers = {
  compat: createOpenAICompatible({ name: "llmchat", baseURL: `${PROXY}/v1`, apiKey: "unused" }),
  "openai-chat": createOpenAI({ baseURL: `${PROXY}/v1`, apiKey: "unused" }).chat,
  anthropic: createAnthropic({ baseURL: `${PROXY}/v1`, apiKey: "unused" }),
};
const thinking = { anthropic: { thinking: { type: "enabled", budgetTokens: 1024 } } };
const weather = tool({
  description: "Weather for a city",
  inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
  execute: async () => TOOL_RESULT,
});

async function ask(face, model, stream, extra = {}) {
  const options = { model: providers[face](model), prompt: "weather in Oslo?", maxRetries: 0, ...extra };
  if (!stream) {
    const r = await generateText(options);
    return { text: r.text, finish: r.finishReason, reasoning: r.reasoningText ?? null, steps: r.steps };
  }
  const errors = [];
  const r = streamText({ ...options, onError: ({ error }) => errors.push(error) });
  for await (const part of r.fullStream) if (part.type === "error") errors.push(part.error);
  if (errors.length) return { finish: "error", errors: errors.map((e) => String(e?.message ?? JSON.stringify(e))) };
  return { text: await r.text, finish: await r.finishReason, reasoning: (await r.reasoningText) ?? null,
    steps: await r.steps };
}

async function roundTrip(face, stream) {
  // The SDK runs the tool itself and sends its result back: its own format end to end.
  const r = await ask(face, "tool", stream, { tools: { get_weather: weather }, stopWhen: stepCountIs(2) });
  const call = r.steps?.[0]?.toolCalls?.[0];
  return { call: call && { name: call.toolName, arguments: JSON.stringify(call.input) }, final: r.text,
    errors: r.errors };
}

const shown = async (...a) => { const { steps, ...rest } = await ask(...a); return rest; };
for (const face of Object.keys(providers)) {
  for (const stream of [false, true]) {
    const s = stream ? ".stream" : "";
    await run(`${face}.text${s}`, () => shown(face, "text", stream));
    await run(`${face}.tool${s}`, () => roundTrip(face, stream));
    await run(`${face}.reasoning${s}`, () => shown(face, "reasoning", stream,
      face === "anthropic" ? { providerOptions: thinking, maxOutputTokens: 2048 } : {}));
    await run(`${face}.length${s}`, () => shown(face, "length", stream, { maxOutputTokens: 1 }));
  }
  await run(`${face}.fail.stream`, () => shown(face, "fail", true));
  await run(`${face}.abort.stream`, async () => {
    const controller = new AbortController();
    const r = streamText({ model: providers[face]("abort"), prompt: "hi", maxRetries: 0,
      abortSignal: controller.signal, onError: () => {} });
    let pieces = 0;
    try {
      for await (const _ of r.textStream) { pieces += 1; controller.abort(); }
    } catch (e) {
      return { pieces, aborted: controller.signal.aborted, error: e?.name };
    }
    return { pieces, aborted: controller.signal.aborted, error: null };
  });
}
report();
