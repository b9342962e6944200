// What every client's case list shares: run each case, keep its outcome, print one JSON line.
//
// A case returns what the client showed (text, tool call, reasoning, stop reason);
// a throw is kept as {error: {name, message}}, so the Python side asserts that a
// failure raised and a success did not. An uncaught exception or an unhandled
// rejection anywhere is reported too: it would crash a real app's Node process.

export const PROXY = process.env.PROXY_URL;
export const TOOL_RESULT = "rain in Oslo";
export const results = {};
const crashes = [];
process.on("uncaughtException", (e) => crashes.push(`uncaught ${e?.name}: ${e?.message}`));
process.on("unhandledRejection", (e) => crashes.push(`unhandled ${e?.name}: ${e?.message}`));

export async function run(name, fn) {
  try {
    results[name] = { value: await fn() };
  } catch (e) {
    results[name] = { error: { name: e?.constructor?.name ?? String(e), message: String(e?.message ?? e) } };
  }
}

// Abort after the first piece arrives: `iterate(signal)` yields the client's pieces.
export async function abortAfterFirst(iterate) {
  const controller = new AbortController();
  let pieces = 0;
  try {
    for await (const _ of iterate(controller.signal)) {
      pieces += 1;
      controller.abort();
    }
  } catch (e) {
    return { pieces, aborted: controller.signal.aborted, error: e?.constructor?.name };
  }
  return { pieces, aborted: controller.signal.aborted, error: null };
}

export function report() {
  // Give a late rejection a turn of the event loop to show itself.
  setTimeout(() => console.log(JSON.stringify({ ...results, crashes })), 50);
}
