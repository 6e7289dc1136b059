#!/usr/bin/env bash
# examples/replicas/run.sh [MODEL [SERVE FLAGS...]] — three `tinygpt serve` replicas on loopback behind HAProxy
# (examples/replicas/haproxy.cfg), which checks every replica's GET /health and sends each request to the replica
# with the fewest open requests. Clients talk to http://127.0.0.1:$TG_LB_PORT/v1/... as to one server.
#
#   examples/replicas/run.sh models/tinygpt-flagship.gguf --kv-budget 64M --kv-quantize int4 --streaming-llm-window 256
#
# SERVE FLAGS go to every replica (each has its own --kv-budget: the memory of a replica is its model + its budget).
# Ctrl-C or SIGTERM: every replica gets SIGTERM and drains (its /health answers 503, so HAProxy takes it out of the
# pool; running answers get --grace seconds), then HAProxy stops; the exit status is 0 when every replica exited 0.
# A replica that dies is taken out of the pool by the health check; this script does not restart it (that is the job
# of systemd or Kubernetes: docs/SERVING.md, "Replicas").
#
# Environment:
#   TINYGPT            the binary (default: ./tinygpt of this checkout, else tinygpt on PATH)
#   HAPROXY            the HAProxy binary (default: haproxy on PATH, else /usr/sbin/haproxy)
#   TG_LB_PORT         the balancer's port on 127.0.0.1 (default 8080)
#   TG_REPLICA_PORTS   three ports for the replicas (default "0 0 0": any free ones, read from their first line)
#   TG_CHECK_INTER     HAProxy's health-check interval (default 1s)
#   TG_LB_DIR          where the logs, pids and ports go (default: a new folder under /tmp, printed)
#                      rN.log rN.pid rN.port rN.exit (replica N), haproxy.log, haproxy.sock, ready (the URL)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:-$root/models/tinygpt-flagship.gguf}
[ $# -gt 0 ] && shift
if [ -z "${TINYGPT:-}" ]; then
    if [ -x "$root/tinygpt" ]; then TINYGPT=$root/tinygpt; else TINYGPT=$(command -v tinygpt || true); fi
fi
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
lb_port=${TG_LB_PORT:-8080}
read -r -a ports <<<"${TG_REPLICA_PORTS:-0 0 0}"
dir=${TG_LB_DIR:-$(mktemp -d /tmp/tinygpt-replicas.XXXXXX)}
die() {
    echo "run.sh: $*" >&2
    exit 1
}
[ -x "$TINYGPT" ] || die "no tinygpt binary (make tinygpt, or set TINYGPT)"
[ -x "$HAPROXY" ] || die "no HAProxy at $HAPROXY (apt-get install haproxy, or set HAPROXY)"
[ -f "$model" ] || die "$model: no such model file"
[ "${#ports[@]}" -eq 3 ] || die "TG_REPLICA_PORTS must name three ports"
command -v curl >/dev/null || die "curl is not installed"
mkdir -p "$dir" || die "cannot make $dir"
rm -f "$dir"/r?.exit "$dir"/r?.port "$dir"/r?.pid "$dir/ready"

pids=()
# stop_all [STATUS]: SIGTERM to every replica still running, wait for each (its own --grace bounds that), then
# HAProxy; exits STATUS (default 0), or 1 when a replica did not exit 0
stop_all() {
    trap '' INT TERM
    local i st=${1:-0}
    for i in 1 2 3; do
        [ -f "$dir/r$i.pid" ] && [ ! -f "$dir/r$i.exit" ] && kill -TERM "$(cat "$dir/r$i.pid")" 2>/dev/null
    done
    for i in "${!pids[@]}"; do wait "${pids[$i]}" 2>/dev/null; done
    for i in 1 2 3; do
        if [ "$(cat "$dir/r$i.exit" 2>/dev/null)" != 0 ]; then
            echo "run.sh: replica $i exited with status $(cat "$dir/r$i.exit" 2>/dev/null) (log: $dir/r$i.log)" >&2
            st=1
        fi
    done
    if [ -n "${lb_pid:-}" ] && kill -0 "$lb_pid" 2>/dev/null; then
        kill -USR1 "$lb_pid" 2>/dev/null # soft stop: the open connections end first
        for _ in $(seq 50); do kill -0 "$lb_pid" 2>/dev/null || break; sleep 0.1; done
        kill -TERM "$lb_pid" 2>/dev/null
        wait "$lb_pid" 2>/dev/null
    fi
    echo "run.sh: stopped (logs in $dir)" >&2
    exit "$st"
}
trap stop_all INT TERM

for i in 1 2 3; do
    (
        trap '' INT # the replica drains on SIGTERM from stop_all, not on the terminal's Ctrl-C
        "$TINYGPT" serve "$model" --host 127.0.0.1 --port "${ports[$((i - 1))]}" "$@" 2>"$dir/r$i.log" &
        echo $! >"$dir/r$i.pid"
        wait $!
        echo $? >"$dir/r$i.exit"
    ) &
    pids+=($!)
done
for i in 1 2 3; do
    port=
    for _ in $(seq 1200); do # a minute at most: a big model takes a while to load
        port=$(grep -o 'on http://127.0.0.1:[0-9]*' "$dir/r$i.log" 2>/dev/null | sed 's/.*://')
        [ -n "$port" ] || [ -f "$dir/r$i.exit" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "run.sh: replica $i did not start: $(tail -3 "$dir/r$i.log")" >&2; stop_all 1; }
    echo "$port" >"$dir/r$i.port"
    export "TG_REPLICA$i=127.0.0.1:$port"
done
export TG_LB_BIND=127.0.0.1:$lb_port TG_LB_DIR=$dir
"$HAPROXY" -db -f "$here/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
lb_pid=$!
echo "$lb_pid" >"$dir/haproxy.pid"
url=http://127.0.0.1:$lb_port
for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ] && break
    kill -0 "$lb_pid" 2>/dev/null || break
    sleep 0.05
done
if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" != 200 ]; then
    echo "run.sh: HAProxy did not come up on $url: $(tail -3 "$dir/haproxy.log")" >&2
    stop_all 1
fi
echo "$url" >"$dir/ready"
echo "run.sh: $url -> replicas on ports $(cat "$dir"/r?.port | tr '\n' ' ')(logs in $dir)" >&2
# until SIGTERM/SIGINT (stop_all runs at once: `wait` returns on a trapped signal), HAProxy ends, or every replica has
# (a signal sent to the whole process group drains them without this script seeing it when it was started with
# SIGINT ignored, e.g. in the background)
while kill -0 "$lb_pid" 2>/dev/null; do
    if [ -f "$dir/r1.exit" ] && [ -f "$dir/r2.exit" ] && [ -f "$dir/r3.exit" ]; then
        echo "run.sh: every replica has exited" >&2
        stop_all
    fi
    sleep 0.5 &
    wait $!
done
echo "run.sh: HAProxy exited: $(tail -3 "$dir/haproxy.log")" >&2
stop_all 1
