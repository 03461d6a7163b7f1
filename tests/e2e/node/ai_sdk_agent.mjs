// An agent built on the Vercel AI SDK (npm `ai`), run once against the proxy: prints one JSON line
// {ok, text, error, seconds} and exits. argv: provider (openai | openai-chat | google | anthropic),
// mode (generate | stream), base URL of the proxy. The key is fake; nothing leaves loopback.
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createAnthropic } from "@ai-sdk/anthropic";

const [provider, mode, base] = process.argv.slice(2);
const apiKey = "sk-runguard-e2e-fake";
const models = {
  openai: () => createOpenAI({ baseURL: `${base}/v1`, apiKey })("gpt-4o-mini"),
  "openai-chat": () => createOpenAI({ baseURL: `${base}/v1`, apiKey }).chat("gpt-4o-mini"),
  google: () => createGoogleGenerativeAI({ baseURL: `${base}/v1beta`, apiKey })("gemini-2.5-flash"),
  anthropic: () => createAnthropic({ baseURL: `${base}/v1`, apiKey })("claude-sonnet-4-5"),
};
const search = tool({
  description: "Search the web",
  inputSchema: jsonSchema({ type: "object", properties: { query: { type: "string" } }, required: ["query"] }),
  execute: async ({ query }) => `results for ${query}`,
});
const request = {
  model: models[provider](),
  prompt: "Find the cheapest flight from Lisbon to Berlin in May.",
  tools: { search },
  stopWhen: stepCountIs(20),
};
const began = Date.now();
const seconds = () => (Date.now() - began) / 1000;
// A streamed run's error comes as an `error` part of the stream, handed to `onError` (what an app prints);
// `result.text` then rejects with NoOutputGeneratedError, which says nothing of it.
let failure;
try {
  let text;
  if (mode === "stream") {
    const result = streamText({ ...request, onError: ({ error }) => { failure = error; } });
    text = await result.text;
  } else {
    text = (await generateText(request)).text;
  }
  if (failure) throw failure;
  console.log(JSON.stringify({ ok: true, text, error: null, seconds: seconds() }));
} catch (error) {
  const shown = failure ?? error;
  console.log(JSON.stringify({ ok: false, text: null, error: `${shown?.name}: ${shown?.message}`, seconds: seconds() }));
}
