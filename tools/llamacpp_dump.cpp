// llamacpp_dump.cpp — llama.cpp's logits at every position of a token sequence, and every float32 intermediate
// tensor of its graph at one chosen position, to find where tinygpt's forward pass first departs from llama.cpp's
// (tools/gap_dump_compare.py). Not part of tinygpt: a C++ program built against a llama.cpp build's shared
// libraries by tools/llamacpp_dump.sh. llama.cpp runs as llama-completion runs in tools/llamacpp_kquant_refs.sh:
// f32 KV cache, no flash attention, no weight repacking, one thread; the prompt in one batch, then one token at a
// time.
//
//   llamacpp_dump MODEL IDS_FILE N_PROMPT OUT_DIR [STEP]
//
// IDS_FILE: whitespace-separated token ids, the first N_PROMPT the prompt (BOS included). OUT_DIR/logits.f32: the
// logits before each continuation token (K = 0 after the prompt, K = 1 after the first continuation id, ...),
// n_vocab floats each. With STEP (a K), OUT_DIR/STEP/NNN-NAME.f32 for every F32 node of the graph that computes
// the logits at K, in the order the graph computes them, each a header line "NAME ne0 ne1 ne2 ne3\n" then ne0*ne1*
// ne2*ne3 floats (contiguous rows of ne0).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

struct dump_state {
    bool on = false;
    int seq = 0;
    std::string dir;
};

static bool cb_eval(struct ggml_tensor *t, bool ask, void *user) {
    auto *st = static_cast<dump_state *>(user);
    if (ask) return st->on;
    if (!st->on || t->type != GGML_TYPE_F32) return true;
    const int64_t n = ggml_nelements(t);
    std::vector<float> buf(n);
    if (ggml_is_contiguous(t)) {
        ggml_backend_tensor_get(t, buf.data(), 0, n * sizeof(float));
    } else {
        std::vector<char> raw(ggml_nbytes(t));
        ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
        int64_t k = 0;
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                        buf[k++] = *reinterpret_cast<const float *>(raw.data() + i0 * t->nb[0] + i1 * t->nb[1] +
                                                                    i2 * t->nb[2] + i3 * t->nb[3]);
    }
    char path[4096];
    std::string name = t->name;
    for (auto &c : name)
        if (c == '/' || c == ' ') c = '_';
    snprintf(path, sizeof path, "%s/%03d-%s.f32", st->dir.c_str(), st->seq++, name.c_str());
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "llamacpp_dump: cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "%s %lld %lld %lld %lld\n", t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
            (long long)t->ne[3]);
    fwrite(buf.data(), sizeof(float), n, f);
    fclose(f);
    return true;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: llamacpp_dump MODEL IDS_FILE N_PROMPT OUT_DIR [STEP]\n");
        return 2;
    }
    const int n_prompt = atoi(argv[3]);
    const std::string out = argv[4];
    const int step = argc == 6 ? atoi(argv[5]) : -1;
    std::vector<llama_token> ids;
    {
        FILE *f = fopen(argv[2], "r");
        if (!f) {
            fprintf(stderr, "llamacpp_dump: cannot open %s\n", argv[2]);
            return 1;
        }
        int x;
        while (fscanf(f, "%d", &x) == 1) ids.push_back(x);
        fclose(f);
    }
    if (n_prompt < 1 || (size_t)n_prompt > ids.size()) {
        fprintf(stderr, "llamacpp_dump: N_PROMPT %d out of range\n", n_prompt);
        return 1;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    dump_state st;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.cb_eval = cb_eval;
    cp.cb_eval_user_data = &st;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE *lf = fopen((out + "/logits.f32").c_str(), "wb");
    if (!lf) {
        fprintf(stderr, "llamacpp_dump: cannot write %s/logits.f32\n", out.c_str());
        return 1;
    }
    for (int k = 0; n_prompt + k <= (int)ids.size(); k++) {
        st.on = k == step;
        if (st.on) {
            st.dir = out + "/" + std::to_string(k);
            std::string cmd = "mkdir -p '" + st.dir + "'";
            if (system(cmd.c_str()) != 0) return 1;
        }
        llama_batch b = k == 0 ? llama_batch_get_one(ids.data(), n_prompt)
                               : llama_batch_get_one(ids.data() + n_prompt + k - 1, 1);
        if (llama_decode(ctx, b)) {
            fprintf(stderr, "llamacpp_dump: decode failed at %d\n", k);
            return 1;
        }
        fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), n_vocab, lf);
    }
    fclose(lf);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
