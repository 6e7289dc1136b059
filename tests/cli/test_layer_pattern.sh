#!/usr/bin/env bash
# A GGUF's sliding / full layer pattern (issue 50): <arch>.attention.sliding_window_pattern as a period (llama.cpp's
# Gemma 2 / 3 reading; absent: the family's default) or as one bool per layer (as llama.cpp's converters write a
# config's layer_types for the later Gemmas). Gemma 3's file as llama.cpp's converter wrote it (no key: five sliding
# layers in six, the last of its six full) is rewritten here with the key added -- the array [true, false, true, true,
# true, true], a period of 2, an array of the wrong length -- and `tinygpt info` names the pattern, or refuses the file with one line.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
SRC=tests/data/families/gemma3-tiny/model-llamacpp-f32.gguf

# with_key OUT TYPE VALUE: SRC with one metadata pair added (TYPE: "period" = u32, "bools" = a bool array)
with_key() {
    python3 - "$SRC" "$1" "$2" "$3" <<'PY'
import struct, sys
src, out, kind, value = sys.argv[1:5]
b = open(src, "rb").read()
magic, version, n_t, n_kv = struct.unpack_from("<IIQQ", b, 0)
pos, align = 24, 32

def skip_value(t, p):
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    if t in fixed:
        return p + fixed[t]
    if t == 8:
        return p + 8 + struct.unpack_from("<Q", b, p)[0]
    et, n = struct.unpack_from("<IQ", b, p)
    p += 12
    for _ in range(n):
        p = skip_value(et, p)
    return p

for _ in range(n_kv):
    klen = struct.unpack_from("<Q", b, pos)[0]
    key = b[pos + 8:pos + 8 + klen]
    t = struct.unpack_from("<I", b, pos + 8 + klen)[0]
    end = skip_value(t, pos + 12 + klen)
    if key == b"general.alignment":
        align = struct.unpack_from("<I", b, pos + 12 + klen)[0]
    pos = end
kv_end = pos
for _ in range(n_t):
    nlen = struct.unpack_from("<Q", b, pos)[0]
    nd = struct.unpack_from("<I", b, pos + 8 + nlen)[0]
    pos += 8 + nlen + 4 + 8 * nd + 4 + 8
data_at = pos + (-pos % align)
key = b"gemma3.attention.sliding_window_pattern"
if kind == "period":
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, int(value))
else:
    bools = [v == "1" for v in value.split(",")]
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 7, len(bools)) + bytes(bools)
head = struct.pack("<IIQQ", magic, version, n_t, n_kv + 1) + b[24:kv_end] + kv + b[kv_end:pos]
head += b"\0" * (-len(head) % align)
open(out, "wb").write(head + b[data_at:])
PY
}

pattern() { "$T" info "$1" 2>&1 | sed -n 's/^layer pattern *//p'; }

p=$(pattern "$SRC")
case $p in "sliding 8 on 5 layers (the model's window); full on 1: 5"*) ok ;; *) bad "no key: $p" ;; esac
with_key "$tmp/arr.gguf" bools 1,0,1,1,1,1 && p=$(pattern "$tmp/arr.gguf")
case $p in "sliding 8 on 5 layers (the model's window); full on 1: 1"*) ok ;; *) bad "bool array 1,0,1,1,1,1: $p" ;; esac
with_key "$tmp/period.gguf" period 2 && p=$(pattern "$tmp/period.gguf")
case $p in "sliding 8 on 3 layers (the model's window); full on 3: 1, 3, 5"*) ok ;; *) bad "period 2: $p" ;; esac
with_key "$tmp/short.gguf" bools 1,0
"$T" info "$tmp/short.gguf" >"$tmp/o" 2>"$tmp/e"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q "one bool per layer (6)" "$tmp/e" && ok ||
    bad "an array of 2 for 6 layers: exit $rc, $(cat "$tmp/e")"
# the array file runs and differs from the file without the key (its full layer the last) past the window
"$T" sample "$tmp/arr.gguf" -p "Once upon a time there was a" -n 12 --temperature 0 >"$tmp/a" 2>/dev/null || bad "sample (array)"
"$T" sample "$SRC" -p "Once upon a time there was a" -n 12 --temperature 0 >"$tmp/b" 2>/dev/null || bad "sample (no key)"
cmp -s "$tmp/a" "$tmp/b" && bad "the full layer changed nothing past the window of 8" || ok
echo "layer pattern: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
