// openai_client.mjs — the official `openai` npm client against `tinygpt serve` (tests/cli/test_serve.sh):
// completions and chat, whole and streamed, greedy. Usage: node openai_client.mjs BASE_URL MODEL PROMPT WANT_FILE
// where WANT_FILE holds `tinygpt sample`'s greedy continuation of PROMPT (16 tokens). Prints one line per check and
// exits non-zero when any fails.
import OpenAI from "openai";
import { readFileSync } from "node:fs";

const [baseURL, model, prompt, wantFile] = process.argv.slice(2);
const want = readFileSync(wantFile, "utf8");
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60000 });
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok  " : "FAIL"} openai ${name}${ok ? "" : ": " + detail}`);
  if (!ok) failed++;
}

const c = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
check("completions.create", c.choices[0].text === want && c.usage.completion_tokens > 0,
      JSON.stringify(c.choices[0].text) + " vs " + JSON.stringify(want));
check("completions usage", c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens,
      JSON.stringify(c.usage));

let streamed = "", chunks = 0, finish = null;
const s = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, stream: true });
for await (const ch of s) {
  chunks++;
  streamed += ch.choices[0]?.text ?? "";
  if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
}
check("completions stream", streamed === want && chunks > 2 && finish === "length",
      `${JSON.stringify(streamed)} in ${chunks} chunks, finish ${finish}`);

const messages = [{ role: "user", content: prompt }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
const reply = chat.choices[0].message.content;
check("chat.completions.create", chat.choices[0].message.role === "assistant" && typeof reply === "string" &&
      chat.object === "chat.completion", JSON.stringify(chat));

let chatStreamed = "", role = null;
const cs = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stream: true,
                                                   stream_options: { include_usage: true } });
let usage = null;
for await (const ch of cs) {
  if (ch.choices[0]?.delta?.role) role = ch.choices[0].delta.role;
  chatStreamed += ch.choices[0]?.delta?.content ?? "";
  if (ch.usage) usage = ch.usage;
}
check("chat stream", chatStreamed === reply && role === "assistant" && usage && usage.completion_tokens > 0,
      `${JSON.stringify(chatStreamed)} vs ${JSON.stringify(reply)}, role ${role}, usage ${JSON.stringify(usage)}`);

try {
  await client.completions.create({ model: "no-such-model", prompt, max_tokens: 4 });
  check("unknown model", false, "no error");
} catch (e) {
  check("unknown model", e.status === 400 && e.code === "model_not_found", `${e.status} ${e.code} ${e.message}`);
}

const models = await client.models.list();
check("models.list", models.data.length === 1 && models.data[0].id === model, JSON.stringify(models.data));
process.exit(failed ? 1 : 0);
