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
