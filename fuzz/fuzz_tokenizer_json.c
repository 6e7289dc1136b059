/* fuzz_tokenizer_json.c — libFuzzer harness for the tokenizer.json loader: the input is up to three parts
 * separated by FUZZ_SEP (tokenizer.json, tokenizer_config.json, generation_config.json). A tokenizer that loads
 * encodes a few fixed texts (every id must lie in the vocabulary, every decoded piece must fit its reported size). */
#include "fuzz_common.h"

#include "tokenizer/tokenizer.h"

static const char *const TOKJSON_FILES[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};

static void tokjson_exercise(const tg_tokenizer *t) {
    static const char *const texts[] = {
        "Hello world", " leading  spaces\tand\nnewlines ", "<s>special</s><|endoftext|>", "caf\xC3\xA9 \xE4\xBD\xA0",
        "\xFF\xFE broken \xC3", "1234567 3.14", "",
    };
    const int32_t vocab = tg_tokenizer_vocab_size(t);
    const int32_t bos = tg_tokenizer_bos(t), eos = tg_tokenizer_eos(t);
    if (vocab < 1 || bos < -1 || bos >= vocab || eos < -1 || eos >= vocab) fuzz_die("tokenizer", "bad special ids");
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        int32_t *ids = NULL;
        size_t n = 0;
        tg_error err = {0};
        if (!tg_tokenizer_encode(t, texts[k], strlen(texts[k]), k % 2 == 0, &ids, &n, &err)) {
            fuzz_check_error(&err, "tg_tokenizer_encode");
            continue;
        }
        int32_t prev = -1;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= vocab) fuzz_die("tg_tokenizer_encode", "id outside the vocabulary");
            char buf[8];
            size_t need = tg_tokenizer_decode_piece(t, prev, ids[i], buf, sizeof buf);
            if (need > sizeof buf) {
                char *big = malloc(need);
                if (big && tg_tokenizer_decode_piece(t, prev, ids[i], big, need) != need)
                    fuzz_die("tg_tokenizer_decode_piece", "size changed between calls");
                free(big);
            }
            prev = ids[i];
        }
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    const uint8_t *part[3];
    size_t len[3];
    size_t n = fuzz_split(data, size, part, len, 3);
    for (size_t i = 0; i < 3; i++) {
        if (i < n) fuzz_write_file(dir, TOKJSON_FILES[i], part[i], len[i]);
        else fuzz_remove_file(dir, TOKJSON_FILES[i]);
    }
    tg_error err = {0};
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    if (t) {
        tokjson_exercise(t);
        tg_tokenizer_free(t);
    } else {
        fuzz_check_error(&err, "tg_tokenizer_load_hf");
    }
    return 0;
}
