// openai_park.mjs — a conversation through the official `openai` npm client, re-sending the whole history each turn
// (tests/cli/test_park.sh). Usage: node openai_park.mjs REUSE_BASE_URL FRESH_BASE_URL MODEL TURNS
// REUSE is a server that parks conversations, FRESH one started with --park-budget 0 (every prompt read whole).
// Each turn goes to both: the replies must be equal (greedy), and from the second turn on REUSE must report that it
// reused the previous turn's tokens (usage.prompt_tokens_details.cached_tokens: the previous prompt and reply, less
// the reply's last token, which was sampled but never fed) while FRESH reused none. The last turn is streamed with
// include_usage. Prints one line per check, exits non-zero when any fails.
import OpenAI from "openai";

const [reuseURL, freshURL, model, turnsArg] = process.argv.slice(2);
const turns = Number(turnsArg);
const opts = { apiKey: "test-key", maxRetries: 0, timeout: 120000 };
const reuse = new OpenAI({ baseURL: reuseURL, ...opts });
const fresh = new OpenAI({ baseURL: freshURL, ...opts });
let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok  " : "FAIL"} openai ${name}${ok ? "" : ": " + detail}`);
  if (!ok) failed++;
}

async function ask(client, messages, stream) {
  const req = { model, messages, max_tokens: 24, temperature: 0 };
  if (!stream) {
    const r = await client.chat.completions.create(req);
    return { text: r.choices[0].message.content, usage: r.usage };
  }
  const s = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null;
  for await (const ch of s) {
    text += ch.choices[0]?.delta?.content ?? "";
    if (ch.usage) usage = ch.usage;
  }
  return { text, usage };
}

const users = ["Tell me about the sea.", "And what lives in it?", "Which of them is the largest?",
               "Say it once more, briefly.", "Thank you."];
const messages = [{ role: "system", content: "You are a helpful assistant." }];
let prev = null;
for (let t = 0; t < turns; t++) {
  messages.push({ role: "user", content: users[t % users.length] });
  const stream = t === turns - 1;
  const a = await ask(reuse, messages, stream), b = await ask(fresh, messages, stream);
  check(`turn ${t + 1}${stream ? " (streamed)" : ""}: same reply as a fresh server`, a.text === b.text,
        `${JSON.stringify(a.text)} vs ${JSON.stringify(b.text)}`);
  const cached = a.usage?.prompt_tokens_details?.cached_tokens;
  const want = prev ? prev.prompt_tokens + prev.completion_tokens - 1 : 0;
  check(`turn ${t + 1}: cached_tokens ${cached}, want ${want}`, cached === want &&
        b.usage?.prompt_tokens_details?.cached_tokens === 0 && a.usage.prompt_tokens === b.usage.prompt_tokens,
        `reuse ${JSON.stringify(a.usage)}, fresh ${JSON.stringify(b.usage)}`);
  prev = a.usage;
  messages.push({ role: "assistant", content: a.text });
}
process.exit(failed ? 1 : 0);
