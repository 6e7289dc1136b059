# lib.sh — sourced by the CLI test scripts (from the repository root): a scratch folder $tmp removed on exit (also
# when a test left it unreadable), and the counters with ok / bad (which prints the failure).
tmp=$(mktemp -d)
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*"
}
# wait_for_event SECONDS CMD...: waits for an event (a file written, a port in a log, a status, a process gone) by
# running CMD every 20 ms until it succeeds; false when SECONDS pass first. This is how a shell script waits on
# another process; the bound is generous (a loaded 2-core machine) and only decides how long a broken run takes to
# fail: callers check the event itself afterwards, so the bound never decides the verdict of a run that works.
wait_for_event() {
    local n=$(($1 * 50))
    shift
    for _ in $(seq "$n"); do "$@" && return 0; sleep 0.02; done
    return 1
}
