"""Hostile connections against tinygpt serve, on raw sockets (loopback only). Every check waits on an event (the
server's answer, or its closing the connection) with a generous bound; nothing sleeps and hopes.

  hostile_client.py slowloris HOST PORT
      a request whose headers never end: the server (--request-timeout short) closes the connection, and /health is
      answered while it is held
  hostile_client.py halfclose HOST PORT
      a request sent and the client's sending half shut down (shutdown(SHUT_WR)): the answer still comes
  hostile_client.py keyfirst HOST PORT
      with --api-key: a keyless request that declares a 3 MB body and sends none gets 401 at once
  hostile_client.py framing HOST PORT
      a body whose length is told twice (two Content-Length headers; Content-Length and Transfer-Encoding) gets 400
      before its body is read, and /health on a fresh connection is answered after it
  hostile_client.py perip HOST PORT LIMIT
      LIMIT idle connections from 127.0.0.1 (--max-connections-per-ip LIMIT): one more from 127.0.0.1 is closed
      unanswered, while 127.0.0.2 is still served
  hostile_client.py bulk HOST PORT PID
      a request whose body passes 64 KiB (and is not finished): the thread that receives it (of the server PID) runs
      at a nice value 10 above the server's main thread (Linux: /proc/PID/task/*/stat), and /health is answered
      meanwhile
  hostile_client.py paced HOST PORT
      a 600 KB body of 200,000 JSON values (the cap is 100,000), sent as fast as the socket takes it: still answered
      400, and the ~300 KB past the cap were read at a bounded rate (at most 256 KiB/s with --request-timeout 300
      and the default --max-body: so the answer took at least 0.5 s; a one-sided bound that load can only widen)
Prints one line per check; exits 1 when any fails."""
import json
import os
import socket
import sys
import time

failed = 0
BOUND = 60  # seconds any one wait may take (a loaded machine); an event ends it much sooner


def check(name, ok, detail=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failed += 1


def connect(host, port, source=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(BOUND)
    if source:
        s.bind((source, 0))
    s.connect((host, port))
    return s


def read_all(s):
    """Everything until the server closes (or BOUND passes: then what came, and 'timeout')."""
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return out, "closed"
            out += b
    except socket.timeout:
        return out, "timeout"
    except ConnectionResetError:
        return out, "closed"


def health(host, port, source=None):
    s = connect(host, port, source)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    out, _ = read_all(s)
    s.close()
    return out.split(b"\r\n", 1)[0]


def slowloris(host, port):
    s = connect(host, port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # the headers never end
    status = health(host, port, "127.0.0.2")
    check("/health answered beside an unfinished request", status.startswith(b"HTTP/1.1 200"), repr(status))
    out, how = read_all(s)
    check("an unfinished request is closed by the deadline", how == "closed", how + " " + repr(out[:200]))


def halfclose(host, port):
    s = connect(host, port)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    s.shutdown(socket.SHUT_WR)
    out, how = read_all(s)
    head, _, rest = out.partition(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.1 200") and b'"choices"' in rest
    check("a half-closed client gets its answer", ok, how + " " + repr(out[:300]))


def keyfirst(host, port):
    s = connect(host, port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 3000000\r\n\r\n")  # and no body
    s.settimeout(BOUND)
    first = b""
    try:
        first = s.recv(65536)
    except socket.timeout:
        pass
    check("a keyless request is refused before its body", first.startswith(b"HTTP/1.1 401"), repr(first[:200]))


def framing(host, port):
    body = b'{"prompt": "x", "max_tokens": 1}'
    for name, extra in (("two Content-Length headers", b"Content-Length: 5\r\n"),
                        ("Content-Length and Transfer-Encoding", b"Transfer-Encoding: chunked\r\n")):
        s = connect(host, port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n" + extra + b"Connection: close\r\n\r\n" + body)
        out, how = read_all(s)
        s.close()
        head, _, rest = out.partition(b"\r\n\r\n")
        ok = head.startswith(b"HTTP/1.1 400") and b"given more than once" in rest
        check(name + ": 400 before the body", ok, how + " " + repr(out[:300]))
    status = health(host, port)
    check("/health after them", status.startswith(b"HTTP/1.1 200"), repr(status))


def perip(host, port, limit):
    held = [connect(host, port) for _ in range(limit)]
    # each held connection is in once /health from it answers (keep-alive): the server counts them all
    for s in held:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got or not got.endswith(b"}"):
            b = s.recv(4096)
            if not b:
                break
            got += b
    extra = connect(host, port)
    extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    out, how = read_all(extra)
    check("a connection over the per-address limit is closed unanswered", how == "closed" and out == b"",
          how + " " + repr(out[:200]))
    status = health(host, port, "127.0.0.2")
    check("another address is still served", status.startswith(b"HTTP/1.1 200"), repr(status))
    for s in held:
        s.close()


def nice_values(pid):
    """The nice value of each thread of process pid (field 19 of /proc/PID/task/TID/stat)."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                out.append(int(f.read().rsplit(")", 1)[1].split()[16]))
        except (OSError, IndexError, ValueError):
            pass  # the thread ended meanwhile
    return out


def bulk(host, port, pid):
    with open("/proc/%d/stat" % pid) as f:
        base = int(f.read().rsplit(")", 1)[1].split()[16])
    s = connect(host, port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000000\r\n\r\n" + b'{"prompt": "' + b"x" * 100000)  # 100 KB of 1 MB
    t_end = time.monotonic() + BOUND
    while base + 10 not in nice_values(pid) and time.monotonic() < t_end:
        time.sleep(0.01)  # polling for the event, bounded
    check("the thread receiving a large body runs 10 nicer", base + 10 in nice_values(pid),
          "nice values %r, the server's %d" % (sorted(nice_values(pid)), base))
    status = health(host, port, "127.0.0.2")
    check("/health answered beside it", status.startswith(b"HTTP/1.1 200"), repr(status))
    s.close()


def paced(host, port):
    body = b'{"prompt": "x", "max_tokens": 1, "a": [' + b"{}," * 200000 + b"{}]}"
    s = connect(host, port)
    t0 = time.monotonic()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out, how = read_all(s)
    took = time.monotonic() - t0
    check("a body past the JSON value cap is answered 400", out.startswith(b"HTTP/1.1 400") and b"JSON values" in out,
          how + " " + repr(out[:300]))
    check("the rest of a refused body is read at a bounded rate", took >= 0.5, "answered after %.3f s" % took)


def main():
    what, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if what == "slowloris":
        slowloris(host, port)
    elif what == "halfclose":
        halfclose(host, port)
    elif what == "keyfirst":
        keyfirst(host, port)
    elif what == "framing":
        framing(host, port)
    elif what == "perip":
        perip(host, port, int(sys.argv[4]))
    elif what == "bulk":
        bulk(host, port, int(sys.argv[4]))
    elif what == "paced":
        paced(host, port)
    else:
        sys.exit("unknown check " + what)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
