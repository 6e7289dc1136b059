/* fuzz_gguf.c — libFuzzer harness for the GGUF reader and the GGUF model loader: the input is a GGUF file. Every
 * metadata value and tensor view is read back; a file that loads as a model is tokenised and, when it has weights,
 * run for two tokens under a bounded (StreamingLLM) cache so that hostile hyper-parameters cannot ask for a huge
 * allocation. Failures must come with a one-line message. */
#include "fuzz_common.h"

#include "format/gguf.h"

/* Reads every metadata value and every tensor through the public accessors. */
static void gguf_walk(const tg_gguf *g) {
    volatile uint64_t sink = tg_gguf_version(g) + tg_gguf_alignment(g) + tg_gguf_data_offset(g);
    for (uint64_t i = 0; i < tg_gguf_n_kv(g); i++) {
        tg_gguf_str key = tg_gguf_kv_key(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(key.len < 255 ? key.len : 255), key.ptr);
        int64_t iv;
        float fv;
        bool bv;
        tg_gguf_str sv;
        tg_gguf_array a;
        sink += tg_gguf_has(g, name) + tg_gguf_get_i64(g, name, &iv) + tg_gguf_get_f32(g, name, &fv) +
                tg_gguf_get_bool(g, name, &bv) + tg_gguf_get_str(g, name, &sv);
        sink += tg_gguf_value_type_name(tg_gguf_kv_type(g, i))[0];
        if (tg_gguf_get_array(g, name, &a)) {
            uint64_t n = a.count < 64 ? a.count : 64;
            for (uint64_t k = 0; k <= n; k++) { /* k == n probes one past the end when count is small */
                tg_gguf_str s = tg_gguf_array_str(&a, k);
                if (s.len) sink += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
                float f = tg_gguf_array_f32(&a, k);
                uint32_t bits;
                memcpy(&bits, &f, sizeof bits);
                sink += (uint64_t)tg_gguf_array_i64(&a, k) + bits;
            }
            if (a.count > 0) {
                tg_gguf_str last = tg_gguf_array_str(&a, a.count - 1);
                if (last.len) sink += (uint8_t)last.ptr[last.len - 1];
            }
        }
    }
    for (uint64_t i = 0; i < tg_gguf_n_tensors(g); i++) {
        const tg_gguf_tensor *t = tg_gguf_tensor_at(g, i);
        if (t->nbytes) sink += t->data[0] + t->data[t->nbytes - 1];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 255 ? t->name.len : 255), t->name.ptr);
        if (tg_gguf_find_tensor(g, name) == NULL && !memchr(t->name.ptr, '\0', t->name.len) && t->name.len < 255)
            fuzz_die("tg_gguf_find_tensor", name);
        tg_tensor view;
        tg_error err = {0};
        if (tg_gguf_tensor_view(g, name, -1, -1, &view, &err)) {
            size_t row = tg_row_bytes(view.type, view.cols);
            if (row && view.rows > 0) sink += ((const uint8_t *)view.data)[row * (size_t)view.rows - 1];
        } else {
            fuzz_check_error(&err, "tg_gguf_tensor_view");
        }
        sink += tg_gguf_type_name(t->ggml_type)[0];
    }
    (void)sink;
}

/* A loaded model: tokenise, and run two tokens under a small bounded cache. */
static void gguf_exercise(tg_model *m) {
    tg_model_info info;
    tg_model_get_info(m, &info);
    tg_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    static const char text[] = "Hello world \xF0\x9F\x98\x80 \xFF tinygpt";
    if (tg_tokenize(m, text, sizeof text - 1, true, &ids, &n, &err)) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= tg_vocab_size(m)) fuzz_die("tg_tokenize", "id outside the vocabulary");
    } else {
        fuzz_check_error(&err, "tg_tokenize");
    }
    if (info.has_weights && n > 0) {
        tg_cache_params p = tg_cache_default_params();
        p.window = 4;
        p.sink = 1;
        p.key_precision = TG_KV_INT4;
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
    fuzz_write_file(dir, "model.gguf", data, size);
    char path[512];
    snprintf(path, sizeof path, "%s/model.gguf", dir);

    tg_error err = {0};
    tg_gguf *g = tg_gguf_open(path, &err);
    if (g) {
        gguf_walk(g);
        tg_gguf_close(g);
    } else {
        fuzz_check_error(&err, "tg_gguf_open");
    }

    memset(&err, 0, sizeof err);
    tg_model *m = tg_model_load(path, &err);
    if (m) {
        gguf_exercise(m);
        tg_model_free(m);
    } else {
        fuzz_check_error(&err, "tg_model_load");
    }
    return 0;
}
