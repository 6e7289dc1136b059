#!/usr/bin/env python3
"""requests_client.py — Python `requests` (Debian's python3-requests) against `tinygpt serve`, for
tests/cli/test_serve.sh. Server-sent events are parsed line by line as a client would.

  requests_client.py concurrent BASE_URL PROMPTS_FILE WANT_DIR TOKENS
      one thread per prompt (a line of PROMPTS_FILE), all at once, alternately streamed and whole, greedy: each
      answer must equal WANT_DIR/<i>.txt (`tinygpt sample`'s continuation of prompt i)
  requests_client.py disconnect BASE_URL
      a stream read for two events and dropped, a queued request dropped: the server must free both sessions
      (/metrics: tinygpt_sessions_active and _queued back to 0)
Prints one line per check; exits 1 when any fails."""
import json
import sys
import threading
import time

import requests

failed = 0


def check(name, ok, detail=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failed += 1


def sse_events(resp):
    """The JSON payloads of a text/event-stream response, line by line, up to data: [DONE]."""
    events = []
    for raw in resp.iter_lines(decode_unicode=False):
        line = raw.decode("utf-8")
        if not line:
            continue
        if not line.startswith("data: "):
            raise ValueError("not an SSE data line: %r" % line)
        data = line[len("data: "):]
        if data == "[DONE]":
            return events, True
        events.append(json.loads(data))
    return events, False


def complete(base, prompt, tokens, stream):
    body = {"model": "tinygpt-flagship", "prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": stream}
    r = requests.post(base + "/v1/completions", json=body, stream=stream, timeout=120)
    if r.status_code != 200:
        return None, "HTTP %d %s" % (r.status_code, r.text[:200])
    if not stream:
        return r.json()["choices"][0]["text"], None
    if not r.headers.get("Content-Type", "").startswith("text/event-stream"):
        return None, "Content-Type " + r.headers.get("Content-Type", "")
    events, done = sse_events(r)
    if not done:
        return None, "no data: [DONE]"
    if events[-1]["choices"][0]["finish_reason"] is None:
        return None, "the last chunk has no finish_reason"
    return "".join(e["choices"][0]["text"] for e in events), None


def concurrent(base, prompts_file, want_dir, tokens):
    prompts = [line.rstrip("\n") for line in open(prompts_file, encoding="utf-8")]
    results = [None] * len(prompts)

    def run(i):
        try:
            results[i] = complete(base, prompts[i], tokens, stream=(i % 2 == 0))
        except Exception as e:  # noqa: BLE001 - any failure is reported as the client's
            results[i] = (None, repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wrong = []
    for i, (text, err) in enumerate(results):
        want = open("%s/%d.txt" % (want_dir, i), encoding="utf-8").read()
        if err or text != want:
            wrong.append("client %d: %s" % (i, err or "%r != %r" % (text, want)))
    check("%d concurrent clients (half streamed) each got its own greedy text (%.1f s)" % (len(prompts),
          time.time() - t0), not wrong, "; ".join(wrong[:4]))


def gauge(base, name):
    text = requests.get(base + "/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise ValueError("no metric " + name)


# Waits for the gauges to read (active, queued), polling /metrics: the event is the server's own count, read every
# 50 ms; the bound is generous (a loaded 2-core machine) and only decides how long a broken run takes to fail (the
# caller checks the gauges it returns).
def wait_gauges(base, want_active, want_queued, seconds):
    t_end = time.time() + seconds
    while True:
        a, q = gauge(base, "tinygpt_sessions_active"), gauge(base, "tinygpt_sessions_queued")
        if (a, q) == (want_active, want_queued) or time.time() > t_end:
            return a, q
        time.sleep(0.05)


def disconnect(base):
    body = {"prompt": "The king said", "max_tokens": 400, "temperature": 0, "stream": True, "ignore_eos": True}
    r = requests.post(base + "/v1/completions", json=body, stream=True, timeout=60)
    lines = r.iter_lines()
    got = 0
    for raw in lines:
        if raw:
            got += 1
        if got == 2:
            break
    a, q = wait_gauges(base, 1, 0, 180)
    check("a stream is running", (a, q) == (1, 0), "active %g queued %g" % (a, q))
    r.close()  # the client goes away mid-stream
    a, q = wait_gauges(base, 0, 0, 180)
    check("a dropped stream frees its session", (a, q) == (0, 0), "active %g queued %g" % (a, q))


def main():
    mode, base = sys.argv[1], sys.argv[2].rstrip("/")
    if mode == "concurrent":
        concurrent(base, sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif mode == "disconnect":
        disconnect(base)
    else:
        print("unknown mode " + mode)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
