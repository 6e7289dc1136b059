#!/usr/bin/env python3
"""llamacpp_gap.py — at the first difference between tinygpt's greedy ids and llama-completion's (the files of one
tools/llamacpp_kquant_refs.sh run), how near a tie the two competing tokens are in both engines' logits.

    llamacpp_gap.py REFS_DIR GREEDY_LOGITS [PRESET...]

For each file and prompt whose ids differ: k = the first differing position, a = llama.cpp's token there, b =
tinygpt's. tinygpt's gap = logit_b - logit_a in tinygpt's logits there (tools/llamacpp_compare.py greedy: its
"gap"); llama.cpp's gap = logit_a - logit_b in llama.cpp's logits at the same position (the prompt and llama.cpp's
own first k ids sent to llama-server's /completion as ids, one token predicted, its top-40 log-probabilities:
log p_a - log p_b = logit_a - logit_b; n/a where that token ends inside a UTF-8 character, which the server
holds back with its probabilities). Both are >= 0; each engine prefers its own token by that much. The server
runs as llama-completion ran (f32 KV cache, no flash attention, no repacking, one thread). Prints one Markdown row
per difference and the largest of each gap. TG_LLAMACPP_DIR: the llama.cpp build (build/bin/llama-server)."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/completion" % port, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # e.g. 500 "does not match the expected Content-only format" on bad UTF-8
        return {"error": "HTTP %d: %s" % (e.code, e.read().decode(errors="replace")[:200])}


def start_server(binary, model):
    port = free_port()
    p = subprocess.Popen([binary, "-m", model, "--port", str(port), "--host", "127.0.0.1", "-t", "1", "-c", "512",
                          "-ctk", "f32", "-ctv", "f32", "-fa", "off", "--no-repack", "-np", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return p, port
        except OSError:
            pass
        if p.poll() is not None:
            sys.exit("llamacpp_gap: llama-server exited (%d) on %s" % (p.returncode, model))
        time.sleep(0.5)
    p.kill()
    sys.exit("llamacpp_gap: llama-server did not start on %s" % model)


def llama_gap(port, ids, a, b):
    res = post(port, {"prompt": ids, "n_predict": 1, "n_probs": 40, "temperature": 0, "cache_prompt": False,
                      "samplers": ["top_k"], "top_k": 1, "ignore_eos": True})
    if "error" in res:
        return "n/a (server: %s)" % res["error"][:60]
    if "completion_probabilities" not in res:  # the token ends inside a UTF-8 character: the server holds it back
        return "n/a (partial UTF-8)"
    top = res["completion_probabilities"][0]["top_logprobs"]
    lp = {t["id"]: t["logprob"] for t in top}
    if a not in lp or b not in lp:
        return "not in top 40"
    return lp[a] - lp[b]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d, greedy = sys.argv[1:3]
    only = set(sys.argv[3:])
    ref = json.load(open(os.path.join(d, "refs.json"), encoding="utf-8"))
    server = os.path.join(os.environ.get("TG_LLAMACPP_DIR", os.path.join(HERE, "..", "bench", ".peer", "llama.cpp")),
                          "build", "bin", "llama-server")
    print("| file | prompt | first difference (token) | llama.cpp's id / tinygpt's | gap in tinygpt's logits | "
          "gap in llama.cpp's logits |")
    print("|---|---:|---:|---|---:|---:|")
    worst_t = worst_l = 0.0
    for preset, f in ref["files"].items():
        if only and preset not in only:
            continue
        model = os.path.join(d, f["file"])
        rows = []
        for i, (pids, want) in enumerate(zip(f["prompt_ids"], f["greedy_ids"])):
            r = subprocess.run([sys.executable, os.path.join(HERE, "llamacpp_compare.py"), "greedy", greedy, model,
                                ",".join(map(str, pids)), ",".join(map(str, want))], capture_output=True)
            if r.returncode != 0:
                sys.exit("llamacpp_gap: %s" % r.stderr.decode().strip()[-300:])
            g = json.loads(r.stdout)
            if not g["match"]:
                rows.append((i, g, pids + want[:g["first_diff"]]))
        if not rows:
            print("| %s | all | – | – | – | – |" % preset)
            continue
        proc, port = start_server(server, model)
        try:
            for i, g, ids in rows:
                a, b = g["llamacpp_id"], g["tinygpt_id"]
                lg = llama_gap(port, ids, a, b)
                worst_t = max(worst_t, g["gap"])
                if not isinstance(lg, str):
                    worst_l = max(worst_l, lg)
                print("| %s | %d | %d | %d / %d | %.2g | %s |" % (preset, i + 1, g["first_diff"], a, b, g["gap"],
                                                                 lg if isinstance(lg, str) else "%.2g" % lg))
        finally:
            proc.terminate()
            proc.wait()
    print("\nlargest gap: %.2g in tinygpt's logits, %.2g in llama.cpp's" % (worst_t, worst_l))


if __name__ == "__main__":
    main()
