#!/usr/bin/env bash
# The installed library (issue 15): `make examples` (a prerequisite of `make test`) installs into build/stage and
# builds examples/*.c with nothing but `pkg-config --cflags --libs tinygpt` (and `--static` for the -static
# builds); here the install is checked (SONAME and its links, only tg_ symbols exported, the .pc) and every example
# runs — shared and static — with its output compared to the tool's: greedy text through a bounded int4 cache and
# through the token callback equals `tinygpt sample`'s, and the chat example's replies equal `tinygpt chat`'s.
# `make install DESTDIR=... PREFIX=...` puts the same files under DESTDIR.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
S=build/stage
E=build/examples
if [ ! -x "$E/chat" ] || [ ! -f "$S/lib/pkgconfig/tinygpt.pc" ]; then
    echo "FAIL: $E or $S missing: run make examples"
    exit 1
fi
ver=$(sed -n 's/^#define TG_VERSION_STRING "\(.*\)"/\1/p' include/tinygpt.h)

# ---- the install ------------------------------------------------------------------------------------------------
[ "$(readlink "$S/lib/libtinygpt.so")" = libtinygpt.so.0 ] && [ "$(readlink "$S/lib/libtinygpt.so.0")" = "libtinygpt.so.$ver" ] &&
    [ -f "$S/lib/libtinygpt.a" ] && [ -f "$S/include/tinygpt.h" ] && [ -x "$S/bin/tinygpt" ] && ok ||
    bad "install: the files or links are not as expected: $(ls -l "$S/lib")"
readelf -d "$S/lib/libtinygpt.so.$ver" | grep -q 'SONAME.*\[libtinygpt.so.0\]' && ok || bad "install: no SONAME libtinygpt.so.0"
nm -D --defined-only "$S/lib/libtinygpt.so.$ver" | awk '{print $3}' >"$tmp/syms"
[ -s "$tmp/syms" ] && ! grep -qv '^tg_' "$tmp/syms" && ok || bad "install: exports other than tg_*: $(grep -v '^tg_' "$tmp/syms" | head -5)"
# every TG_API function of the header is exported, and nothing else
sed -n 's/^TG_API .*\b\(tg_[a-z0-9_]*\)(.*/\1/p' include/tinygpt.h | sort >"$tmp/api"
sort "$tmp/syms" | cmp -s - "$tmp/api" && ok || bad "install: exports differ from the header's TG_API: $(sort "$tmp/syms" | diff - "$tmp/api" | head -5)"
export PKG_CONFIG_PATH="$PWD/$S/lib/pkgconfig"
[ "$(pkg-config --modversion tinygpt)" = "$ver" ] && ok || bad "pkg-config: version is not $ver"
libs=$(pkg-config --static --libs tinygpt)
for l in -ltinygpt -ljansson -lpcre2-8 -lm -pthread; do case " $libs " in *" $l "*) ;; *) libs=; esac; done
[ -n "$libs" ] && ok || bad "pkg-config --static lacks the private libs: $(pkg-config --static --libs tinygpt)"
readelf -d "$E/chat" | grep -q 'NEEDED.*libtinygpt.so.0' && ok || bad "the shared example does not need libtinygpt.so.0"
readelf -d "$E/chat-static" | grep -q 'NEEDED' && bad "the static example needs shared libraries" || ok
make -s install DESTDIR="$tmp/dest" PREFIX=/opt/tg >/dev/null 2>&1 &&
    [ -f "$tmp/dest/opt/tg/lib/libtinygpt.so.$ver" ] && grep -q '^prefix=/opt/tg$' "$tmp/dest/opt/tg/lib/pkgconfig/tinygpt.pc" && ok ||
    bad "make install DESTDIR=... PREFIX=/opt/tg did not stage /opt/tg under DESTDIR"

# ---- the examples against the tool --------------------------------------------------------------------------------
M=models/tinygpt-flagship.gguf
P="Once upon a time"
"$T" sample "$M" -p "$P" -n 120 --temperature 0 --no-echo -t 1 --kv-quantize int4 --streaming-llm-window 64 \
    >"$tmp/int4.ref" 2>/dev/null || bad "sample (int4 reference) failed"
"$T" sample "$M" -p "$P" -n 40 --temperature 0 --no-echo -t 1 >"$tmp/plain.ref" 2>/dev/null || bad "sample failed"
[ -s "$tmp/int4.ref" ] && [ -s "$tmp/plain.ref" ] && ok || bad "empty references"
for kind in "" -static; do
    "$E/generate_int4$kind" "$M" "$P" 120 >"$tmp/int4.out" 2>"$tmp/int4.err" &&
        cmp -s "$tmp/int4.out" "$tmp/int4.ref" && ok ||
        bad "generate_int4$kind: $(tail -1 "$tmp/int4.err") / differs from sample: $(head -c 200 "$tmp/int4.out")"
    grep -q 'int4.*window 64' "$tmp/int4.err" && ok || bad "generate_int4$kind: no int4 window report"
    "$E/stream_callback$kind" "$M" "$P" 40 >"$tmp/cb.out" 2>"$tmp/cb.err" && cmp -s "$tmp/cb.out" "$tmp/plain.ref" && ok ||
        bad "stream_callback$kind: $(tail -1 "$tmp/cb.err") / differs from sample: $(head -c 200 "$tmp/cb.out")"
    grep -q 'aborted after 5 generated tokens' "$tmp/cb.err" && ok || bad "stream_callback$kind: no abort"
done
C=tests/data/fixtures/smollm2
printf 'Hello there!\nWhat is the capital of France?\nThank you.\n' >"$tmp/turns"
"$T" chat "$C" --chat-template chatml --temperature 0 --tokens 12 --threads 1 --system "You are terse." \
    <"$tmp/turns" >"$tmp/chat.ref" 2>/dev/null || bad "tinygpt chat failed"
for kind in "" -static; do
    "$E/chat$kind" "$C" chatml 12 "You are terse." <"$tmp/turns" >"$tmp/chat.out" 2>"$tmp/chat.err" &&
        [ "$(grep -c . "$tmp/chat.out")" -eq 3 ] && cmp -s "$tmp/chat.out" "$tmp/chat.ref" && ok ||
        bad "chat$kind: $(tail -1 "$tmp/chat.err") / differs from tinygpt chat: $(head -c 300 "$tmp/chat.out")"
done
# stop strings through the library's generation step: the replies cut where tinygpt chat --stop cuts them (one stop
# string a token of its own, one spanning tokens), and replies of 40 tokens
"$T" chat "$C" --chat-template chatml --temperature 0 --tokens 40 --threads 1 --system "You are terse." \
    --stop "sure" --stop "e modern" <"$tmp/turns" >"$tmp/stop.ref" 2>"$tmp/stop.err" || bad "tinygpt chat --stop failed"
[ "$(grep -c 'stopped: stop string' "$tmp/stop.err")" -ge 2 ] && ok ||
    bad "chat --stop: fewer than two replies cut at a stop string: $(grep turn "$tmp/stop.err")"
"$E/chat" "$C" chatml 40 "You are terse." "sure" "e modern" <"$tmp/turns" >"$tmp/stop.out" 2>"$tmp/stop.e" &&
    cmp -s "$tmp/stop.out" "$tmp/stop.ref" && ok ||
    bad "chat with stop strings: $(tail -1 "$tmp/stop.e") / differs from tinygpt chat --stop: $(head -c 300 "$tmp/stop.out")"
"$T" chat "$C" --chat-template chatml --temperature 0 --tokens 40 --threads 1 --system "You are terse." \
    <"$tmp/turns" >"$tmp/long.ref" 2>/dev/null || bad "tinygpt chat (40 tokens) failed"
"$E/chat" "$C" chatml 40 "You are terse." <"$tmp/turns" >"$tmp/long.out" 2>"$tmp/long.e" &&
    cmp -s "$tmp/long.out" "$tmp/long.ref" && ok || bad "chat (40 tokens): differs from tinygpt chat: $(head -c 300 "$tmp/long.out")"
"$E/chat" "$C" no-such 12 </dev/null 2>"$tmp/e" && bad "chat: an unknown template was accepted" ||
    { grep -q "no built-in chat template 'no-such'" "$tmp/e" && ok || bad "chat: unknown template: $(cat "$tmp/e")"; }

echo "test_examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
