/* fuzz_hf.c — libFuzzer harness for the Hugging Face folder reader: config.json, the safetensors reader and the
 * model loader. The input is up to four parts separated by FUZZ_SEP: config.json, model.safetensors,
 * tokenizer.json, model.safetensors.index.json (a part that is absent leaves its file out of the folder; an index
 * names shards, so the safetensors part is also written as model-00001-of-00001.safetensors). Every tensor of the
 * safetensors file is viewed; a folder that loads is tokenised and run for a few tokens under a bounded cache, and
 * loaded again as `info` (TG_NEED_CONFIG) and `tokenize` (TG_NEED_TOKENIZER) load it. */
#include "fuzz_common.h"

#include "format/safetensors.h"

static const char *const HF_FILES[] = {"config.json", "model.safetensors", "tokenizer.json",
                                    "model.safetensors.index.json"};

static void hf_walk(const tg_safetensors *st) {
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < tg_safetensors_count(st); i++) {
        const tg_st_tensor *t = tg_safetensors_at(st, i);
        if (t->nbytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        if (tg_safetensors_find(st, t->name) == NULL) fuzz_die("tg_safetensors_find", t->name);
        tg_tensor view;
        tg_error err = {0};
        if (tg_safetensors_view(st, t->name, -1, -1, &view, &err)) {
            size_t row = tg_row_bytes(view.type, view.cols);
            if (row && view.rows > 0) sink += ((const uint8_t *)view.data)[row * (size_t)view.rows - 1];
        } else {
            fuzz_check_error(&err, "tg_safetensors_view");
        }
    }
    (void)sink;
}

static void hf_exercise(tg_model *m) {
    tg_model_info info;
    tg_model_get_info(m, &info);
    tg_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    static const char text[] = "The quick brown fox \xE2\x96\x81 \xC3";
    if (!tg_tokenize(m, text, sizeof text - 1, tg_model_adds_bos(m), &ids, &n, &err)) {
        fuzz_check_error(&err, "tg_tokenize");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tg_vocab_size(m)) fuzz_die("tg_tokenize", "id outside the vocabulary");
    if (info.has_weights && n > 0) {
        tg_cache_params p = tg_cache_default_params();
        p.window = 4;
        p.sink = 1;
        p.value_precision = TG_KV_INT2;
        p.group_size = 2;
        p.residual = 2;
        tg_session *s = tg_session_new(m, &p, 1, &err);
        if (s) {
            float *logits = malloc((size_t)tg_vocab_size(m) * sizeof *logits);
            size_t k = n < 3 ? n : 3;
            if (logits && !tg_session_eval(s, ids, k, NULL, logits, &err)) fuzz_check_error(&err, "tg_session_eval");
            free(logits);
            tg_session_free(s);
        } else {
            fuzz_check_error(&err, "tg_session_new");
        }
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    const uint8_t *part[4];
    size_t len[4];
    size_t n = fuzz_split(data, size, part, len, 4);
    for (size_t i = 0; i < 4; i++) {
        if (i < n) fuzz_write_file(dir, HF_FILES[i], part[i], len[i]);
        else fuzz_remove_file(dir, HF_FILES[i]);
    }
    if (n > 3) fuzz_write_file(dir, "model-00001-of-00001.safetensors", part[1], len[1]);
    else fuzz_remove_file(dir, "model-00001-of-00001.safetensors");

    tg_error err = {0};
    if (n > 1) {
        char path[512];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        tg_safetensors *st = tg_safetensors_open_file(path, &err);
        if (st) {
            hf_walk(st);
            tg_safetensors_close(st);
        } else {
            fuzz_check_error(&err, "tg_safetensors_open_file");
        }
    }

    memset(&err, 0, sizeof err);
    tg_model *m = tg_model_load(dir, &err);
    if (m) {
        hf_exercise(m);
        tg_model_free(m);
    } else {
        fuzz_check_error(&err, "tg_model_load");
    }
    /* what `info` and `tokenize` read: config.json and whatever else is there / the tokenizer files alone */
    static const tg_model_need needs[] = {TG_NEED_CONFIG, TG_NEED_TOKENIZER};
    for (size_t i = 0; i < 2; i++) {
        memset(&err, 0, sizeof err);
        m = tg_model_load_for(dir, needs[i], &err);
        if (m) {
            tg_model_info info;
            tg_model_get_info(m, &info);
            const int32_t *eos = NULL;
            const size_t n_eos = tg_token_eos_ids(m, &eos);
            for (size_t k = 0; k < n_eos; k++)
                if (eos[k] < 0) fuzz_die("tg_token_eos_ids", "a negative id");
            if (info.has_tokenizer) hf_exercise(m);
            tg_model_free(m);
        } else {
            fuzz_check_error(&err, "tg_model_load_for");
        }
    }
    return 0;
}
