/* gen_random_gguf.c — writes GGUF v3 files of random weights with the exact tensor shapes of real Llama-family
 * models, so that speed can be measured at real sizes without downloading anything (speed does not depend on the
 * weights' values). Not part of the library: a tool built by `make tools`.
 *
 *   build/release/tools/gen_random_gguf
 *       --shape tiny-256|kquant-tiny|smollm2-135m|tinyllama-1.1b|llama-3.2-1b|llama-3.1-8b
 *       --type TYPE --out FILE [--seed S] [--ctx N] [--arch ARCH] [--text-only]
 *
 * TYPE: any weight type of the table with a ggml number except F32 (f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
 * q3_k, q4_k, q5_k, q6_k, iq4_nl; any case). tiny-256 is a 2-layer, 256-wide model (rows whole K-quant blocks) for
 * tests; kquant-tiny a 1-layer one whose ffn_down rows are 64 wide (the llama.cpp K-quant fixtures).
 *
 * Weights are N(0, 0.02)-like (a sum of four uniforms, scaled), so activations stay finite through every layer;
 * norm weights are 1. Types with a reference encoder (F16, BF16, Q8_0, Q4_0) are written through it (the embedding
 * too, as llama.cpp's pure quantisation does); the GGUF block types tinygpt only reads get random codes and a
 * per-block scale (d, and dmin or m with a random sign) chosen so that the block's largest magnitude is about 0.05. The vocabulary is synthetic and self-contained: a SentencePiece-style
 * ("llama") token list with <unk>, <s>, </s>, the 256 byte tokens, the printable ASCII characters and filler words,
 * as many tokens as the shape's vocabulary, which llama.cpp and tinygpt both load.
 *
 * ARCH (default llama) lays the same shape out as another family of issue 50, with llama.cpp's architecture name,
 * metadata keys and tensors (ARCHS below): qwen2 (q/k/v biases), qwen3 (per-head q/k norms), gemma2 (post-norms,
 * soft-caps, sliding layers), gemma3 (post-norms, q/k norms, 5 sliding layers in 6), phi3 (fused qkv and gate_up),
 * smollm3 (every 4th layer without RoPE: llama.cpp's fixed step), so that `tinygpt bench` compares each family with
 * a Llama of the same shape (bench/families.sh).
 *
 * --text-only: a greedy decode of the file is words that re-tokenise to themselves, as a trained model's replies
 * mostly do (bench/serve_turns.mjs sends each reply back in the history; llama-server's chat endpoint also refuses
 * output that is no UTF-8 text): the filler words are letters, prefix-closed (token_text), and the output rows of
 * every token before them (control, byte, character) are zero, so their logit is 0 where the words' spread around it
 * and greedy never picks one.
 *
 * The file is streamed tensor by tensor (a 1.1B-parameter F16 file is 2.2 GB); the only buffers are one row. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/ggml_blocks.h"
#include "kernels/quant.h"
#include "kernels/tensor.h"
#include "kernels/types.h"
#include "util/half.h"

#define ALIGNMENT 32

/* the weights' ggml type numbers come from the weight-type table; llama.cpp's file type of each (general.file_type:
 * its "mostly TYPE" numbers, the K-quants' _M variants), 0 when unknown */
static uint32_t file_type_of(tg_dtype t) {
    switch (t) {
    case TG_DT_F16: return 1;
    case TG_DT_Q4_0: return 2;
    case TG_DT_Q4_1: return 3;
    case TG_DT_Q8_0: return 7;
    case TG_DT_Q5_0: return 8;
    case TG_DT_Q5_1: return 9;
    case TG_DT_Q2_K: return 10;
    case TG_DT_Q3_K: return 12;
    case TG_DT_Q4_K: return 15;
    case TG_DT_Q5_K: return 17;
    case TG_DT_Q6_K: return 18;
    case TG_DT_IQ4_NL: return 25;
    case TG_DT_BF16: return 32;
    default: return 0;
    }
}
/* GGUF metadata value types. */
enum { GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9 };
/* llama.cpp token types. */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_BYTE = 6 };

typedef struct {
    const char *name;
    int n_layers, d_model, n_heads, n_kv_heads, head_dim, ffn_dim, vocab;
    bool tied;
    float rope_theta, norm_eps;
    int context; /* written as llama.context_length (see --ctx) */
} shape;

static const shape SHAPES[] = {
    {"tiny-256", 2, 256, 4, 2, 64, 512, 512, true, 10000.0f, 1e-5f, 512},
    /* tests/data/kquant-llamacpp: one layer, every row whole 256-blocks except ffn_down's (64 wide: llama-quantize's
     * fallback types), small enough that one file per llama-quantize preset is committed; untied, so that greedy
     * decoding does not just repeat the last token */
    {"kquant-tiny", 1, 256, 4, 1, 64, 64, 360, false, 10000.0f, 1e-5f, 128},
    {"smollm2-135m", 30, 576, 9, 3, 64, 1536, 49152, true, 100000.0f, 1e-5f, 8192},
    {"tinyllama-1.1b", 22, 2048, 32, 4, 64, 5632, 32000, false, 10000.0f, 1e-5f, 8192},
    /* Llama-3.2-1B's tensor shapes and context (no RoPE scaling written: speed and memory do not depend on it) */
    {"llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, true, 500000.0f, 1e-5f, 131072},
    /* Llama-3.1-8B's tensor shapes and context (the GPU issue's large file; made where it is used: 4.3 GiB as Q4_0) */
    {"llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, false, 500000.0f, 1e-5f, 131072},
};

/* The families' layouts in llama.cpp's GGUF names (src/model/arch.c reads the same). */
typedef struct {
    const char *name;
    bool qkv_bias, qk_norm, post_norms, fused;
    int sliding_window;                 /* > 0: Gemma's sliding layers (the pattern: the architecture's default) */
    float attn_softcap, final_softcap;  /* Gemma 2 */
} arch_layout;

static const arch_layout ARCHS[] = {
    {"llama", false, false, false, false, 0, 0.0f, 0.0f},
    {"qwen2", true, false, false, false, 0, 0.0f, 0.0f},
    {"qwen3", false, true, false, false, 0, 0.0f, 0.0f},
    {"gemma2", false, false, true, false, 4096, 50.0f, 30.0f},
    {"gemma3", false, true, true, false, 1024, 0.0f, 0.0f},
    {"phi3", false, false, false, true, 0, 0.0f, 0.0f},
    {"smollm3", false, false, false, false, 0, 0.0f, 0.0f},
};

/* ---- random numbers ---------------------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Approximately N(0, std^2): the sum of four uniforms on (-1, 1) has variance 4/3. One 64-bit draw gives the four
 * 16-bit uniforms. */
static float rng_normal(uint64_t *s, float std) {
    uint64_t r = rng_next(s);
    float sum = 0.0f;
    for (int i = 0; i < 4; i++, r >>= 16) sum += (float)(r & 0xffff) * (2.0f / 65536.0f) - 1.0f;
    return sum * std * 0.8660254f; /* sqrt(3/4) */
}

/* ---- a streaming GGUF writer ------------------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    const char *path;
    bool ok;
    int err_no;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->ok && n && fwrite(p, 1, n, w->f) != n) {
        w->ok = false;
        w->err_no = errno;
    }
}
static void put_u32(writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}
static void put_u64(writer *w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}
static void put_f32(writer *w, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(w, u);
}
static void put_str(writer *w, const char *s) {
    put_u64(w, strlen(s));
    put(w, s, strlen(s));
}
static void put_zeros(writer *w, size_t n) {
    static const uint8_t z[ALIGNMENT];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        put(w, z, k);
        n -= k;
    }
}

static void kv_u32(writer *w, const char *key, uint32_t v) {
    put_str(w, key);
    put_u32(w, GV_U32);
    put_u32(w, v);
}
static void kv_f32(writer *w, const char *key, float v) {
    put_str(w, key);
    put_u32(w, GV_F32);
    put_f32(w, v);
}
static void kv_bool(writer *w, const char *key, bool v) {
    put_str(w, key);
    put_u32(w, GV_BOOL);
    uint8_t b = v ? 1 : 0;
    put(w, &b, 1);
}
static void kv_str(writer *w, const char *key, const char *v) {
    put_str(w, key);
    put_u32(w, GV_STRING);
    put_str(w, v);
}
static void kv_array_header(writer *w, const char *key, uint32_t elem_type, uint64_t count) {
    put_str(w, key);
    put_u32(w, GV_ARRAY);
    put_u32(w, elem_type);
    put_u64(w, count);
}

/* ---- the vocabulary ------------------------------------------------------------------------------------------ */

/* The first token of the filler words: after <unk>, <s>, </s>, the 256 byte tokens and the printable ASCII ones. */
#define FIRST_WORD (3 + 256 + 95)

/* The w-th string over a-z in order of length, then alphabetically ("a" .. "z", "aa" .. "zz", "aaa", ...) into buf:
 * every prefix of each comes before it, so the set of the first N is closed under prefixes. */
static void letters(int w, char *buf, size_t cap) {
    int len = 1;
    long long span = 26;
    while (w >= span) {
        w -= (int)span;
        span *= 26;
        len++;
    }
    if ((size_t)len >= cap) len = (int)cap - 1;
    buf[len] = '\0';
    for (int k = len - 1; k >= 0; k--, w /= 26) buf[k] = (char)('a' + w % 26);
}

/* Text of token i of the synthetic SentencePiece vocabulary into buf; its type in *type. words (--text-only): the
 * filler words are SentencePiece's space and letters, prefix-closed, so that the tokenizer (merging a word's pieces
 * by score) writes every word back as its own token and a reply of words re-tokenises to the ids generated; else
 * they are "w" and the token's number, which only a model's output reaches. */
static void token_text(int i, char *buf, size_t cap, int *type, bool words) {
    if (i == 0) {
        snprintf(buf, cap, "<unk>");
        *type = TOK_UNKNOWN;
    } else if (i == 1 || i == 2) {
        snprintf(buf, cap, i == 1 ? "<s>" : "</s>");
        *type = TOK_CONTROL;
    } else if (i < 3 + 256) {
        snprintf(buf, cap, "<0x%02X>", i - 3);
        *type = TOK_BYTE;
    } else if (i < FIRST_WORD) {
        int ch = 32 + (i - 3 - 256);
        if (ch == ' ') snprintf(buf, cap, "\xe2\x96\x81"); /* U+2581, SentencePiece's space */
        else snprintf(buf, cap, "%c", ch);
        *type = TOK_NORMAL;
    } else if (words) {
        char w[16];
        letters(i - FIRST_WORD, w, sizeof w);
        snprintf(buf, cap, "\xe2\x96\x81%s", w);
        *type = TOK_NORMAL;
    } else {
        snprintf(buf, cap, "\xe2\x96\x81w%d", i);
        *type = TOK_NORMAL;
    }
}

static const int N_VOCAB_KV = 9;

static void write_vocab(writer *w, int vocab, bool words) {
    char buf[32];
    int type;
    kv_str(w, "tokenizer.ggml.model", "llama");
    kv_str(w, "tokenizer.ggml.pre", "default");
    kv_array_header(w, "tokenizer.ggml.tokens", GV_STRING, (uint64_t)vocab);
    for (int i = 0; i < vocab; i++) {
        token_text(i, buf, sizeof buf, &type, words);
        put_str(w, buf);
    }
    kv_array_header(w, "tokenizer.ggml.scores", GV_F32, (uint64_t)vocab);
    for (int i = 0; i < vocab; i++) put_f32(w, i < 3 + 256 ? 0.0f : -(float)i);
    kv_array_header(w, "tokenizer.ggml.token_type", GV_I32, (uint64_t)vocab);
    for (int i = 0; i < vocab; i++) {
        token_text(i, buf, sizeof buf, &type, words);
        put_u32(w, (uint32_t)type);
    }
    kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    kv_bool(w, "tokenizer.ggml.add_bos_token", true);
}

/* ---- tensors ------------------------------------------------------------------------------------------------- */

typedef struct {
    char name[64];
    int64_t rows, cols; /* ne1, ne0 */
    bool norm;          /* 1-D F32 norm weight (all ones) */
    tg_dtype type;
    size_t nbytes;
    uint64_t offset;
} tensor;

static size_t align_up(size_t x) { return (x + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT; }

static void add_tensor(tensor *t, size_t *n, const char *name, int64_t rows, int64_t cols, bool norm,
                       tg_dtype wtype) {
    tensor *x = &t[(*n)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->rows = rows;
    x->cols = cols;
    x->norm = norm;
    x->type = norm || rows == 1 ? TG_DT_F32 : wtype; /* norms and biases: one F32 row, as llama.cpp keeps them */
    x->nbytes = tg_row_bytes(x->type, cols) * (size_t)rows;
}

/* One row of random blocks of a type without an encoder into out: random codes, then the scale fields set so that
 * the largest magnitude of each block is about 0.05 (the decoders are linear in the scale fields). */
static void random_blocks(const tg_weight_type *wt, tg_dtype type, int64_t cols, uint64_t *rng, uint8_t *out) {
    int at[2];
    tg_ggml_scale_fields(type, at);
    float vals[TG_QK_K];
    for (int64_t b = 0; b < cols / wt->block_elems; b++) {
        uint8_t *blk = out + (size_t)b * wt->block_bytes;
        for (size_t k = 0; k < wt->block_bytes; k++) blk[k] = (uint8_t)rng_next(rng);
        const uint16_t one = tg_f32_to_f16(1.0f);
        for (int f = 0; f < 2 && at[f] >= 0; f++) memcpy(blk + at[f], &one, 2);
        wt->decode_row(blk, vals, wt->block_elems);
        float amax = 0.0f;
        for (int64_t j = 0; j < wt->block_elems; j++) amax = fabsf(vals[j]) > amax ? fabsf(vals[j]) : amax;
        const float s = amax > 0.0f ? 0.05f / amax : 0.0f;
        for (int f = 0; f < 2 && at[f] >= 0; f++) {
            const uint16_t h = tg_f32_to_f16(f == 1 && (rng_next(rng) & 1) ? -s : s);
            memcpy(blk + at[f], &h, 2);
        }
    }
}

/* Streams one tensor's data: rows of random values converted to its type; rows [zero_from, zero_to) all zero. */
static void write_tensor_data(writer *w, const tensor *t, uint64_t *rng, float *row, uint8_t *out, int64_t zero_from,
                              int64_t zero_to) {
    const tg_weight_type *wt = tg_weight_type_of(t->type);
    const size_t rb = tg_row_bytes(t->type, t->cols);
    for (int64_t r = 0; r < t->rows && w->ok; r++) {
        if (r >= zero_from && r < zero_to) {
            memset(out, 0, rb);
        } else if (wt->encode_row) {
            for (int64_t j = 0; j < t->cols; j++) row[j] = t->norm ? 1.0f : rng_normal(rng, 0.02f); /* (biases too) */
            wt->encode_row(row, out, t->cols);
        } else random_blocks(wt, t->type, t->cols, rng, out);
        put(w, out, rb);
    }
}

static int usage(void) {
    fputs("usage: gen_random_gguf --shape tiny-256|kquant-tiny|smollm2-135m|tinyllama-1.1b|llama-3.2-1b|llama-3.1-8b "
          "--type f16|q8_0|q4_k|... --out FILE [--seed S] [--ctx N] "
          "[--arch llama|qwen2|qwen3|gemma2|gemma3|phi3|smollm3] [--text-only]\n",
          stderr);
    return 2;
}

int main(int argc, char **argv) {
    const char *shape_name = NULL, *type_name = NULL, *out_path = NULL, *arch_name = "llama";
    uint64_t seed = 1;
    long ctx = 0;
    bool text_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--text-only") == 0) {
            text_only = true;
            continue;
        }
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        char *end = NULL;
        if (strcmp(a, "--shape") == 0) shape_name = v;
        else if (strcmp(a, "--type") == 0) type_name = v;
        else if (strcmp(a, "--out") == 0) out_path = v;
        else if (strcmp(a, "--arch") == 0) arch_name = v;
        else if (strcmp(a, "--seed") == 0) {
            seed = strtoull(v, &end, 10);
            if (!end || *end) return usage();
        } else if (strcmp(a, "--ctx") == 0) {
            ctx = strtol(v, &end, 10);
            if (!end || *end || ctx < 1 || ctx > (1L << 24)) return usage();
        } else return usage();
    }
    if (!shape_name || !type_name || !out_path) return usage();
    const shape *sh = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (strcmp(SHAPES[i].name, shape_name) == 0) sh = &SHAPES[i];
    if (!sh) {
        fprintf(stderr, "gen_random_gguf: unknown shape '%s'\n", shape_name);
        return usage();
    }
    const arch_layout *ar = NULL;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (strcmp(ARCHS[i].name, arch_name) == 0) ar = &ARCHS[i];
    if (!ar) {
        fprintf(stderr, "gen_random_gguf: unknown architecture '%s'\n", arch_name);
        return usage();
    }
    tg_dtype wtype = TG_DT_COUNT;
    for (int t = 0; t < TG_DT_COUNT; t++)
        if (t != TG_DT_F32 && tg_weight_type_of((tg_dtype)t)->ggml_type >= 0 &&
            strcasecmp(tg_weight_type_of((tg_dtype)t)->name, type_name) == 0)
            wtype = (tg_dtype)t;
    const uint32_t ftype = file_type_of(wtype);
    int scale_at[2];
    if (wtype == TG_DT_COUNT || (!tg_weight_type_of(wtype)->encode_row && !tg_ggml_scale_fields(wtype, scale_at))) {
        fprintf(stderr, "gen_random_gguf: unknown type '%s'\n", type_name);
        return usage();
    }
    const int context = ctx > 0 ? (int)ctx : sh->context;

    /* tensor list in llama.cpp's order */
    const size_t max_tensors = 3 + 16 * (size_t)sh->n_layers;
    tensor *ts = calloc(max_tensors, sizeof *ts);
    if (!ts) return 1;
    size_t nt = 0;
    const int64_t d = sh->d_model, qd = (int64_t)sh->n_heads * sh->head_dim, kvd = (int64_t)sh->n_kv_heads * sh->head_dim;
    add_tensor(ts, &nt, "token_embd.weight", sh->vocab, d, false, wtype);
    add_tensor(ts, &nt, "output_norm.weight", 1, d, true, wtype);
    if (!sh->tied) add_tensor(ts, &nt, "output.weight", sh->vocab, d, false, wtype);
    for (int l = 0; l < sh->n_layers; l++) {
        char name[64];
#define T(suffix, rows, cols, norm)                                                                                 \
    do {                                                                                                           \
        snprintf(name, sizeof name, "blk.%d." suffix, l);                                                          \
        add_tensor(ts, &nt, name, rows, cols, norm, wtype);                                                        \
    } while (0)
        T("attn_norm.weight", 1, d, true);
        if (ar->fused) {
            T("attn_qkv.weight", qd + 2 * kvd, d, false);
        } else {
            T("attn_q.weight", qd, d, false);
            T("attn_k.weight", kvd, d, false);
            T("attn_v.weight", kvd, d, false);
        }
        if (ar->qkv_bias) {
            T("attn_q.bias", 1, qd, false);
            T("attn_k.bias", 1, kvd, false);
            T("attn_v.bias", 1, kvd, false);
        }
        if (ar->qk_norm) {
            T("attn_q_norm.weight", 1, sh->head_dim, true);
            T("attn_k_norm.weight", 1, sh->head_dim, true);
        }
        T("attn_output.weight", d, qd, false);
        if (ar->post_norms) T("post_attention_norm.weight", 1, d, true);
        T("ffn_norm.weight", 1, d, true);
        if (ar->fused) {
            T("ffn_up.weight", 2 * (int64_t)sh->ffn_dim, d, false);
        } else {
            T("ffn_gate.weight", sh->ffn_dim, d, false);
            T("ffn_up.weight", sh->ffn_dim, d, false);
        }
        T("ffn_down.weight", d, sh->ffn_dim, false);
        if (ar->post_norms) T("post_ffw_norm.weight", 1, d, true);
#undef T
    }
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        ts[i].offset = off;
        off += align_up(ts[i].nbytes);
    }

    writer w = {.f = fopen(out_path, "wb"), .path = out_path, .ok = true};
    if (!w.f) {
        fprintf(stderr, "gen_random_gguf: cannot create %s: %s\n", out_path, strerror(errno));
        free(ts);
        return 1;
    }
    static char iobuf[1 << 20];
    setvbuf(w.f, iobuf, _IOFBF, sizeof iobuf);

    /* header: the metadata is counted first */
    const int n_arch_kv = 2 + (ar->sliding_window > 0) + (ar->attn_softcap > 0) + (ar->final_softcap > 0);
    const int n_kv = 14 + n_arch_kv + N_VOCAB_KV + 1;
    put(&w, "GGUF", 4);
    put_u32(&w, 3);
    put_u64(&w, nt);
    put_u64(&w, (uint64_t)n_kv);
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, ar->name), key)
    kv_str(&w, "general.architecture", ar->name);
    kv_str(&w, "general.name", sh->name);
    kv_u32(&w, "general.alignment", ALIGNMENT);
    kv_u32(&w, "general.file_type", ftype);
    kv_u32(&w, KEY("block_count"), (uint32_t)sh->n_layers);
    kv_u32(&w, KEY("context_length"), (uint32_t)context);
    kv_u32(&w, KEY("embedding_length"), (uint32_t)sh->d_model);
    kv_u32(&w, KEY("feed_forward_length"), (uint32_t)sh->ffn_dim);
    kv_u32(&w, KEY("attention.head_count"), (uint32_t)sh->n_heads);
    kv_u32(&w, KEY("attention.head_count_kv"), (uint32_t)sh->n_kv_heads);
    kv_f32(&w, KEY("attention.layer_norm_rms_epsilon"), sh->norm_eps);
    kv_u32(&w, KEY("rope.dimension_count"), (uint32_t)sh->head_dim);
    kv_f32(&w, KEY("rope.freq_base"), sh->rope_theta);
    kv_u32(&w, KEY("vocab_size"), (uint32_t)sh->vocab);
    kv_u32(&w, KEY("attention.key_length"), (uint32_t)sh->head_dim);
    kv_u32(&w, KEY("attention.value_length"), (uint32_t)sh->head_dim);
    if (ar->sliding_window > 0) kv_u32(&w, KEY("attention.sliding_window"), (uint32_t)ar->sliding_window);
    if (ar->attn_softcap > 0) kv_f32(&w, KEY("attn_logit_softcapping"), ar->attn_softcap);
    if (ar->final_softcap > 0) kv_f32(&w, KEY("final_logit_softcapping"), ar->final_softcap);
#undef KEY
    write_vocab(&w, sh->vocab, text_only);
    kv_str(&w, "general.source", "tinygpt tools/gen_random_gguf: random weights, real shapes");

    for (size_t i = 0; i < nt; i++) {
        put_str(&w, ts[i].name);
        bool one_d = ts[i].norm;
        put_u32(&w, one_d ? 1 : 2);
        put_u64(&w, (uint64_t)ts[i].cols);
        if (!one_d) put_u64(&w, (uint64_t)ts[i].rows);
        put_u32(&w, (uint32_t)tg_weight_type_of(ts[i].type)->ggml_type);
        put_u64(&w, ts[i].offset);
    }
    long here = ftell(w.f);
    if (here < 0) w.ok = false;
    else put_zeros(&w, align_up((size_t)here) - (size_t)here);

    float *row = malloc((size_t)sh->ffn_dim * 4 > (size_t)d * 4 ? (size_t)sh->ffn_dim * 4 : (size_t)d * 4);
    uint8_t *out = malloc((size_t)(sh->ffn_dim > d ? sh->ffn_dim : d) * 4);
    uint64_t rng = seed;
    int64_t n_params = 0;
    if (!row || !out) w.ok = false;
    for (size_t i = 0; i < nt && w.ok; i++) {
        /* --text-only: the logits' rows of every token before the words (control, byte and character tokens) */
        const bool logits = strcmp(ts[i].name, sh->tied ? "token_embd.weight" : "output.weight") == 0;
        const int64_t zero_from = 0, zero_to = text_only && logits ? FIRST_WORD : 0;
        write_tensor_data(&w, &ts[i], &rng, row, out, zero_from, zero_to);
        put_zeros(&w, align_up(ts[i].nbytes) - ts[i].nbytes);
        n_params += ts[i].rows * ts[i].cols;
    }
    free(row);
    free(out);
    free(ts);
    if (fclose(w.f) != 0 && w.ok) {
        w.ok = false;
        w.err_no = errno;
    }
    if (!w.ok) {
        fprintf(stderr, "gen_random_gguf: writing %s failed: %s\n", out_path, strerror(w.err_no));
        remove(out_path);
        return 1;
    }
    printf("%s: %s as %s, %s, %" PRId64 " parameters, context %d\n", out_path, sh->name, ar->name, type_name, n_params,
           context);
    return 0;
}
