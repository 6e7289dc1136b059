#!/usr/bin/env bash
# test_hostile_cli.sh — the CLI's reproducers of issue 11 (hostile prompt files, flags that asked for unbounded work
# or memory): each runs the sanitizer build under `timeout 10` and /usr/bin/time, and must end within 10 s and 1 GiB
# of peak RSS with exit 0, or with exactly one line on stderr naming the file or flag and nothing on stdout.
#   2   compare with a prompt line of one lead byte and a thousand continuation bytes (was a stack overflow)
#   4c  --streaming-llm-reposition with a 16M-token window (built a 16M-slot RoPE table before the first token)
#   4d  perplexity --max-tokens 2 on a 54 MB file and on /dev/zero (read and tokenised all of it; /dev/zero forever)
#   4e  a cache larger than the machine's memory, or than --max-memory (was calloc'ed and reported as "held")
#   5   --every that scores nothing, info --cache-table failing after 15 lines, --no-echo printing U+FFFD
# Models: tests/cli/errors_mkmodel.py's tiny model and the bundled one. Uses $TINYGPT (the sanitizer build).
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
if [ ! -x "$T" ]; then
    echo "test_hostile_cli: $T is not built" >&2
    exit 1
fi

. tests/cli/lib.sh

MAX_RSS_KIB=1048576
bundled=models/tinygpt-flagship.gguf
python3 tests/cli/errors_mkmodel.py "$tmp/m" >/dev/null || { echo "test_hostile_cli: errors_mkmodel.py failed"; exit 1; }
tiny=$tmp/m/good.gguf

# bounded WANT_RC PATTERN ARGS...: tinygpt ARGS within 10 s and 1 GiB; WANT_RC 0: exit 0; otherwise exit WANT_RC
# with exactly one stderr line containing PATTERN (a fixed string) and an empty stdout.
bounded() {
    local want=$1 pattern=$2
    shift 2
    /usr/bin/time -f %M -o "$tmp/rss" timeout 10 "$T" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    local rss
    rss=$(tail -n 1 "$tmp/rss")
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad "tinygpt $* -> still running after 10 s"
    elif ! [ "$rss" -le "$MAX_RSS_KIB" ] 2>/dev/null; then
        bad "tinygpt $* -> peak RSS $rss KiB, over 1 GiB"
    elif [ "$want" -eq 0 ]; then
        [ "$rc" -eq 0 ] && ok || bad "tinygpt $* -> exit $rc: $(head -c 400 "$tmp/err")"
    elif [ "$rc" -ne "$want" ]; then
        bad "tinygpt $* -> exit $rc, want $want: $(head -c 400 "$tmp/err")"
    elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$pattern" "$tmp/err"; then
        bad "tinygpt $* -> stderr is not one line with '$pattern': $(head -c 400 "$tmp/err")"
    elif [ -s "$tmp/out" ]; then
        bad "tinygpt $* -> failed but printed on stdout: $(head -c 200 "$tmp/out")"
    else
        ok
    fi
}

# ---- 2: compare's prompt cell ---------------------------------------------------------------------------------
python3 -c 'import sys; sys.stdout.buffer.write(b"a\xc3" + b"\x80" * 1000 + b"\nok | fine\n")' >"$tmp/hostile-prompts"
for md in "" --markdown; do
    bounded 0 "" compare "$tiny" --prompts "$tmp/hostile-prompts" --tokens 2 --kv-quantize int8 --threads 1 \
        --streaming-llm-window 32 $md
    # the hostile prompt's cell: 'a', U+00C0, 38 U+FFFD and the ellipsis (40 characters + 1), valid UTF-8
    if [ "$rc" -eq 0 ]; then
        row=$(grep -a '^|\? *a' "$tmp/out" | head -n 1)
        python3 -c 'import sys; sys.exit(0 if "a\u00c0" + "\ufffd" * 38 + "\u2026" in sys.argv[1] else 1)' "$row" && ok ||
            bad "compare $md: the hostile prompt's cell is wrong: $row"
    fi
done

# ---- 4c: re-positioning with a 16M window ----------------------------------------------------------------------
# head_dim 32: a RoPE table for every slot of the window would be 16M x 32 x 4 bytes = 2 GiB; the K/V storage
# (4 GiB, within the machine's memory) is calloc'ed, so only what is written becomes resident
python3 -c 'import sys; sys.path.insert(0, "tests/cli"); import errors_mkmodel as m
open(sys.argv[1], "wb").write(m.gguf_model(dict(n_layers=1, d_model=64, n_heads=2, n_kv_heads=1, ffn=16, ctx=64)))' \
    "$tmp/hd32.gguf"
bounded 0 "" sample "$tmp/hd32.gguf" --prompt "hello" --tokens 2 --temperature 0 --threads 1 \
    --streaming-llm-window 16777216 --streaming-llm-reposition

# ---- 4d: --max-tokens stops reading; text files are read up to 64 MiB -----------------------------------------
python3 -c 'import sys
line = b"the quick brown fox jumps over the lazy dog and then some more words follow here\n"
sys.stdout.buffer.write(line * (54000000 // len(line)))' >"$tmp/54mb.txt"
bounded 0 "" perplexity "$tiny" "$tmp/54mb.txt" --max-tokens 2 --quiet --threads 1
grep -q '^text .*tokens in its first 65536 bytes, 2 used)$' "$tmp/out" && ok || bad "54 MB: $(grep '^text' "$tmp/out")"
bounded 0 "" perplexity "$tiny" /dev/zero --max-tokens 2 --quiet --threads 1
bounded 1 "/dev/zero: entry 1 ('') is not a token id (a decimal integer)" perplexity "$tiny" /dev/zero --max-tokens 2 --ids --quiet
bounded 1 "/dev/zero: larger than the 64 MiB limit for a text file" perplexity "$tiny" /dev/zero --quiet --threads 1
bounded 1 "/dev/zero: larger than the 64 MiB limit for a text file" compare "$tiny" --prompts /dev/zero --tokens 1

# ---- 4e: a cache that would not fit ----------------------------------------------------------------------------
bounded 1 "but the machine has" sample "$bundled" --prompt hi --tokens 1 --streaming-llm-window 2147483647
grep -qE 'KV cache needs 24\.00 TiB but the machine has [0-9.]+ [GMT]iB of memory \(--max-memory to change the limit\)' \
    "$tmp/err" && ok || bad "4e message: $(cat "$tmp/err")"
bounded 1 "KV cache needs 6.00 MiB to hold 512 tokens, more than --max-memory 1.00 MiB" sample "$bundled" \
    --prompt hi --tokens 1 --max-memory 1M
bounded 1 "KV cache needs 5.91 MiB, more than --max-memory 1.00 MiB" sample "$bundled" --prompt hi --tokens 1 \
    --max-memory 1M --streaming-llm-window 500
bounded 1 "more than --max-memory" perplexity "$bundled" models/data/valid.txt --max-tokens 10 --max-memory 64K
bounded 1 "more than --max-memory" compare "$tiny" --prompts "$tmp/hostile-prompts" --max-memory 1K
bounded 2 "--max-memory: expected a size in bytes" sample "$bundled" --max-memory 0
bounded 0 "" sample "$bundled" --prompt hi --tokens 1 --max-memory 6M --temperature 0

# ---- 5: errors with nothing on stdout; --no-echo ----------------------------------------------------------------
bounded 1 "--every 1000000 scores nothing" perplexity "$tiny" "$tmp/54mb.txt" --max-tokens 100 --every 1000000
python3 -c 'import sys; sys.path.insert(0, "tests/cli"); import errors_mkmodel as m
hp = m.hparams(True); names = [w[0] for w in m.weights(hp, len(m.vocab_tokens()))]
open(sys.argv[1], "wb").write(m.gguf_model(hp, drop_tensors=names,
     replace_kvs={"llama.attention.head_count_kv": (m.T_U32, 3)}))' "$tmp/vocab-kv3.gguf"
bounded 1 "KV cache: 2 query heads are not a multiple of 3 kv-heads" info "$tmp/vocab-kv3.gguf" --cache-table
bounded 0 "" info "$tmp/vocab-kv3.gguf" # without the table the n/a line is enough
bounded 0 "" sample "$bundled" --prompt "$(printf 'Once upon a time \xe2\x82')" --no-echo --tokens 3 \
    --temperature 0 --threads 1
if [ "$rc" -eq 0 ]; then
    head -c 3 "$tmp/out" | od -An -tx1 | grep -q 'ef bf bd' && bad "--no-echo printed U+FFFD for the prompt's tail" || ok
fi

# a message cut at 1 KiB does not end in half a character
long=$(python3 -c 'print("x" * 977 + "\u20ac" * 20)')
bounded 2 "--tokens: expected a positive integer" sample "$tiny" --tokens "$long"
python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$tmp/err" 2>/dev/null && ok ||
    bad "a cut usage error is not valid UTF-8: $(tail -c 8 "$tmp/err" | od -An -tx1)"

echo "test_hostile_cli: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
