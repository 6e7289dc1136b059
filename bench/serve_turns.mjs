// serve_turns.mjs — issue 53's server measurements, through the official `openai` npm client (tests/serve's
// node_modules: `cd tests/serve && npm install` once). Not a timed test: numbers on a shared machine are noisy.
//
// 1. A chat of --turns turns (user message ~50 tokens, reply --reply tokens, greedy, ignore_eos), the whole history
//    re-sent every turn, streamed: time to first token per turn on a tinygpt server that continues parked
//    conversations (reuse) and on one started with --park-budget 0 (every prompt prefilled whole), the replies
//    checked equal (--fresh-turns 2,20,40: the no-reuse server asked at those turns only, for large models whose
//    whole-transcript prefills would take most of the run). With --llama-server BIN (a llama.cpp build, e.g. from
//    bench/build-llamacpp.sh) and --gguf, the same user turns through llama-server with cache_prompt, continuing its
//    own replies (so that each server's cache holds the tokens it generated).
// 2. --parked N: N short conversations parked (one request each), then each continued by one more message: the
//    bytes per parked conversation (/metrics) and the restore time (timings.restore_ms) p50 / p99, RAM and disk.
//
// usage: node bench/serve_turns.mjs [--tinygpt ./tinygpt] [--model models/tinygpt-flagship.gguf] [--turns 40]
//        [--reply 100] [--parked 1000] [--fresh-turns K,K,...] [--llama-server BIN --gguf MODEL.gguf]
//        [--llama-threads N] [-- server flags...]
//   e.g. node bench/serve_turns.mjs -- --kv-quantize int4 --streaming-llm-window 512
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(new URL("../tests/serve/package.json", import.meta.url));
const OpenAI = require("openai").default;

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const serverFlags = dash >= 0 ? argv.slice(dash + 1) : [];
const own = dash >= 0 ? argv.slice(0, dash) : argv;
const opt = (name, def) => {
  const i = own.indexOf(name);
  return i >= 0 ? own[i + 1] : def;
};
const tinygpt = opt("--tinygpt", "./tinygpt"), model = opt("--model", "models/tinygpt-flagship.gguf");
const turns = Number(opt("--turns", 40)), reply = Number(opt("--reply", 100)), parked = Number(opt("--parked", 0));
const llamaServer = opt("--llama-server", null), gguf = opt("--gguf", model);
const freshTurns = opt("--fresh-turns", null)?.split(",").map(Number), llamaThreads = opt("--llama-threads", null);
// --replay A-B: turns A..B are not asked but appended from a fixed transcript (the user's message and a reply of
// --reply short words), so that a long conversation's last turns can be measured when generating every reply of
// both servers would not fit the time at hand; the first turn asked after them re-reads the replayed part
const replay = opt("--replay", null)?.split("-").map(Number);
const replayed = (k) => replay && k >= replay[0] && k <= replay[1];
const fixedReply = () => Array.from({ length: reply }, (_, i) =>
  ["the", "old", "man", "went", "down", "to", "the", "sea", "and", "saw", "a", "big", "fish", "in", "his", "net"][i % 16]
).join(" ");

// Every server this script started, stopped when it exits (also on an error).
const started = [];
process.on("exit", () => started.forEach((p) => p.exitCode === null && p.kill("SIGKILL")));

// A server on a free port: resolves {base, proc} once it prints its address.
function startServer(cmd, args, addrRe) {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
    started.push(proc);
    let err = "";
    proc.stderr.on("data", (d) => {
      err += d;
      const m = err.match(addrRe);
      if (m) resolve({ base: `http://127.0.0.1:${m[1]}`, proc });
    });
    proc.on("exit", (code) => reject(new Error(`${cmd} exited ${code}: ${err.slice(-2000)}`)));
  });
}
const tgServer = (extra) =>
  startServer(tinygpt, ["serve", model, "--port", "0", "--chat-template", "chatml", "--max-prompt-tokens", "1000000",
                        "--max-tokens", String(Math.max(reply, 32)), ...serverFlags, ...extra],
              /http:\/\/127\.0\.0\.1:(\d+)/);

function client(base) {
  return new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0, timeout: 600000 });
}

// One streamed turn: {text, ttft seconds (to the first chunk with content), usage}.
async function turn(c, messages, extra = {}) {
  const t0 = performance.now();
  const s = await c.chat.completions.create({ model, messages, max_tokens: reply, temperature: 0,
                                              ignore_eos: true, stream: true, stream_options: { include_usage: true },
                                              ...extra });
  let text = "", ttft = null, usage = null;
  for await (const ch of s) {
    const d = ch.choices[0]?.delta?.content;
    if (d && ttft === null) ttft = (performance.now() - t0) / 1e3;
    text += d ?? "";
    if (ch.usage) usage = ch.usage;
    if (ch.timings) usage = { ...usage, timings: ch.timings };
  }
  return { text, ttft, usage };
}

function userText(k) {
  return `Turn ${k}. Tell me more about the river, the old bridge, the market by the water and the people who ` +
         `came there every morning, what they sold, what they said to each other, and what changed over the years.`;
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function metrics(base) {
  const t = await (await fetch(base + "/metrics")).text();
  const get = (name) => Number((t.match(new RegExp("^tinygpt_" + name.replace(/[{}"]/g, "\\$&") + " (\\S+)$", "m")) ||
                                [0, NaN])[1]);
  return get;
}

async function conversation() {
  const reuse = await tgServer([]), fresh = await tgServer(["--park-budget", "0"]);
  let llama = null;
  if (llamaServer)
    llama = await startServer(llamaServer, ["-m", gguf, "--port", String(18000 + (process.pid % 1000)), "-c", "65536",
                                            "--chat-template", "chatml", "-np", "1",
                                            ...(llamaThreads ? ["-t", llamaThreads] : [])],
                              /listening on http:\/\/[^:]+:(\d+)/);
  const messages = [{ role: "system", content: "You are a helpful assistant." }];
  const llamaMessages = [{ role: "system", content: "You are a helpful assistant." }];
  console.log(`tinygpt serve ${serverFlags.join(" ")}: ${turns} turns, user ~50 tokens, reply ${reply} tokens, greedy`);
  console.log("turn  prompt  reused  TTFT reuse (s)  TTFT no-reuse (s)  no-reuse/reuse" +
              (llama ? "  TTFT llama-server (s)  llama/reuse  llama prompt  llama cached" : ""));
  const rows = [];
  for (let k = 1; k <= turns; k++) {
    if (replayed(k)) {
      for (const m of [messages, llamaMessages])
        m.push({ role: "user", content: userText(k) }, { role: "assistant", content: fixedReply() });
      continue;
    }
    messages.push({ role: "user", content: userText(k) });
    const a = await turn(client(reuse.base), messages);
    const b = !freshTurns || freshTurns.includes(k) ? await turn(client(fresh.base), messages) : null;
    if (b && a.text !== b.text) throw new Error(`turn ${k}: the reply with reuse differs from the fresh one`);
    // llama-server continues its own conversation: the same user turns, its own replies (its cache holds what it
    // generated, as tinygpt's does)
    llamaMessages.push({ role: "user", content: userText(k) });
    const l = llama ? await turn(client(llama.base), llamaMessages, { cache_prompt: true }) : null;
    if (l) llamaMessages.push({ role: "assistant", content: l.text });
    rows.push([k, a.ttft, b?.ttft, l?.ttft]);
    console.log(`${(replayed(k - 1) ? "r" : "") + String(k).padStart(replayed(k - 1) ? 3 : 4)}  ${String(a.usage.prompt_tokens).padStart(6)}  ` +
                `${String(a.usage.prompt_tokens_details?.cached_tokens ?? 0).padStart(6)}  ` +
                `${a.ttft.toFixed(3).padStart(14)}  ${(b ? b.ttft.toFixed(3) : "-").padStart(17)}  ` +
                `${(b ? (b.ttft / a.ttft).toFixed(1) : "-").padStart(14)}` +
                (l ? `  ${l.ttft.toFixed(3).padStart(21)}  ${(l.ttft / a.ttft).toFixed(2).padStart(11)}` +
                      `  ${String(l.usage?.prompt_tokens ?? "-").padStart(12)}` +
                      `  ${String(l.usage?.timings?.cache_n ?? l.usage?.prompt_tokens_details?.cached_tokens ?? "-").padStart(12)}`
                    : ""));
    messages.push({ role: "assistant", content: a.text });
  }
  const t2 = rows[1]?.[1], tN = rows[rows.length - 1][1];
  const fN = rows[rows.length - 1][2];
  if (t2) console.log(`reuse: TTFT turn ${turns} / turn 2 = ${(tN / t2).toFixed(2)}` +
                      (fN ? `; no-reuse / reuse at turn ${turns} = ${(fN / tN).toFixed(1)}` : ""));
  if (llama) {
    const r = rows.map((x) => x[3] / x[1]);
    console.log(`llama-server / reuse TTFT: min ${Math.min(...r).toFixed(2)} (turn ${rows[r.indexOf(Math.min(...r))][0]}), ` +
                `median ${pct(r, 50).toFixed(2)}`);
  }
  for (const s of [reuse, fresh, llama]) s?.proc.kill("SIGTERM");
}

// N conversations parked in one tier (RAM: a budget that holds them all; disk: --park-budget 1, so every one is
// written to --park-dir), then each continued: bytes per conversation and the look-up + restore time.
async function parkingTier(tier) {
  const dir = mkdtempSync(join(tmpdir(), "tg-park-"));
  const flags = tier === "RAM" ? ["--park-budget", "16G"]
                               : ["--park-budget", "1", "--park-dir", dir, "--park-disk-budget", "64G"];
  const srv = await tgServer(flags);
  const c = client(srv.base);
  const convs = [];
  for (let i = 0; i < parked; i++) {
    const messages = [{ role: "user", content: `Conversation ${i}: ${userText(i)}` }];
    const r = await c.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, ignore_eos: true });
    messages.push({ role: "assistant", content: r.choices[0].message.content });
    convs.push(messages);
  }
  const m = await metrics(srv.base);
  const key = tier === "RAM" ? "ram" : "disk";
  const n = m(`parked_conversations{tier="${key}"}`), bytes = m(`parked_bytes{tier="${key}"}`);
  const ms = [];
  let misses = 0;
  for (let i = convs.length - 1; i >= 0; i--) {
    const messages = [...convs[i], { role: "user", content: "And then?" }];
    const r = await (await c.chat.completions.create({ model, messages, max_tokens: 1, temperature: 0 })
      .asResponse()).json();
    // a miss: no parked state is a prefix (the conversation's end is not when the reply, cut by max_tokens,
    // re-tokenises to other ids than it was generated as; then the state where its prompt ended is: docs/SERVING.md)
    if (r.usage.prompt_tokens_details.cached_tokens > 0) ms.push(r.timings.restore_ms);
    else misses++;
  }
  // continued from the state where the prompt ended: the reply came back as other ids and was re-read
  const promptHits = (await metrics(srv.base))("prefix_prompt_hits_total");
  console.log(`${tier.padEnd(4)}  ${String(n).padStart(13)}  ${(bytes / n).toFixed(0).padStart(24)}  ` +
              `${pct(ms, 50).toFixed(3).padStart(16)}  ${pct(ms, 99).toFixed(3).padStart(16)}  ` +
              `${String(ms.length).padStart(9)}  ${String(promptHits).padStart(19)}  ${String(misses).padStart(6)}`);
  srv.proc.kill("SIGTERM");
  await new Promise((r) => srv.proc.on("exit", r));
  rmSync(dir, { recursive: true, force: true });
}

async function parking() {
  console.log(`${parked} parked conversations (${serverFlags.join(" ")}; each ~70 prompt + 8 generated tokens)`);
  console.log("tier  conversations  bytes per conversation  restore p50 (ms)  restore p99 (ms)  continued  " +
              "of them reply re-read  misses");
  await parkingTier("RAM");
  await parkingTier("disk");
}

if (turns > 0) await conversation();
if (parked > 0) await parking();
process.exit(0);
