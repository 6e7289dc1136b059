/* fuzz_tokenizer_text.c — libFuzzer harness for a hostile tokenizer.json and a hostile text together: the input is
 * tokenizer.json, FUZZ_SEP, then the text to encode (any bytes). The seeds and fuzz/dict/json.dict steer it to the
 * configurations that transform text (Metaspace with multi-byte replacements and every prepend scheme, chains of
 * Replace / Prepend normalizers, ByteLevel, Split) and to added tokens that overlap each other and the text.
 * A tokenizer that loads encodes the text with and without BOS, then the text repeated (a sweep of lengths). Checked: the library's error contract (an encode
 * may fail, with one line, e.g. at the expansion ceiling); every id lies in the vocabulary; every decoded piece
 * fits the size it reports; the whole decoded text equals the pieces joined. ASan catches any buffer a
 * transformation overruns; -malloc_limit_mb=1024 and -timeout=20 catch unbounded work. */
#include "fuzz_common.h"

#include "tokenizer/tokenizer.h"

/* Decodes ids piece by piece and as a whole; the two must agree. */
static void text_check_decode(const tg_tokenizer *t, const int32_t *ids, size_t n) {
    size_t total = 0;
    int32_t prev = -1;
    char *joined = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        char small[16];
        const size_t need = tg_tokenizer_decode_piece(t, prev, ids[i], small, sizeof small);
        if (need > 0) {
            if (total + need > cap) {
                cap = (total + need) * 2 + 64;
                joined = realloc(joined, cap);
                if (!joined) fuzz_die("realloc", "decode buffer");
            }
            if (tg_tokenizer_decode_piece(t, prev, ids[i], joined + total, need) != need)
                fuzz_die("tg_tokenizer_decode_piece", "size changed between calls");
            if (need <= sizeof small && memcmp(small, joined + total, need) != 0)
                fuzz_die("tg_tokenizer_decode_piece", "bytes changed between calls");
            total += need;
        }
        /* the start of the text lasts while tokens decode to nothing (tg_tokenizer_decode's rule) */
        if (prev >= 0 || tg_tokenizer_decode_piece(t, ids[i], ids[i], NULL, 0) > 0) prev = ids[i];
    }
    char *whole = malloc(total + 1);
    if (!whole) fuzz_die("malloc", "decode buffer");
    if (tg_tokenizer_decode(t, ids, n, whole, total + 1) != total) fuzz_die("tg_tokenizer_decode", "length differs");
    if (total && memcmp(whole, joined, total) != 0) fuzz_die("tg_tokenizer_decode", "text differs from the pieces");
    free(whole);
    free(joined);
}

static void text_encode(const tg_tokenizer *t, const uint8_t *text, size_t len, bool bos) {
    int32_t *ids = NULL;
    size_t n = 0;
    tg_error err = {0};
    if (!tg_tokenizer_encode(t, (const char *)text, len, bos, &ids, &n, &err)) {
        fuzz_check_error(&err, "tg_tokenizer_encode");
        return;
    }
    const int32_t vocab = tg_tokenizer_vocab_size(t);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab) fuzz_die("tg_tokenizer_encode", "id outside the vocabulary");
    }
    if (bos && (n == 0 || ids[0] != tg_tokenizer_bos(t))) fuzz_die("tg_tokenizer_encode", "BOS missing");
    text_check_decode(t, ids, n);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    const uint8_t *part[2];
    size_t len[2];
    if (fuzz_split(data, size, part, len, 2) < 2) return 0; /* no text: the tokenizer_json harness covers that */
    fuzz_write_file(dir, "tokenizer.json", part[0], len[0]);
    fuzz_remove_file(dir, "tokenizer_config.json");
    fuzz_remove_file(dir, "generation_config.json");
    tg_error err = {0};
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    if (!t) {
        fuzz_check_error(&err, "tg_tokenizer_load_hf");
        return 0;
    }
    text_encode(t, part[1], len[1], false);
    if (tg_tokenizer_bos(t) >= 0) text_encode(t, part[1], len[1], true);
    /* Buffer-sizing bugs show at particular lengths (where a growth step lands) and libFuzzer keeps inputs short:
     * the text repeated 2..16 times (up to SWEEP_BYTES) sweeps the lengths while keeping its make-up. */
    enum { SWEEP_BYTES = 8192 };
    uint8_t *rep = len[1] ? malloc(SWEEP_BYTES) : NULL;
    for (size_t r = 2; rep && r <= 16 && r * len[1] <= SWEEP_BYTES; r++) {
        for (size_t k = 0; k < r; k++) memcpy(rep + k * len[1], part[1], len[1]);
        text_encode(t, rep, r * len[1], false);
    }
    free(rep);
    tg_tokenizer_free(t);
    return 0;
}
