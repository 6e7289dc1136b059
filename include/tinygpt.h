/* tinygpt.h — the public API of libtinygpt.
 *
 * A C11 inference engine for Llama-family models (GGUF files and Hugging Face folders) whose KV cache is bounded in
 * length (StreamingLLM), compressed in precision (KIVI) and shared across layers (YOCO). Programs use only this header
 * (`pkg-config --cflags --libs tinygpt`); libtinygpt.so exports exactly the functions marked TG_API.
 *
 * Conventions: handles are opaque; every *_free(NULL) is a no-op; functions that can fail take a tg_error* and
 * return NULL / false / a negative value, with a one-line message (no trailing newline) in err->msg. The library
 * never prints and never exits.
 */
#ifndef TINYGPT_H
#define TINYGPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version; the shared library's SONAME is libtinygpt.so.TG_VERSION_MAJOR. */
#define TG_VERSION_MAJOR 0
#define TG_VERSION_MINOR 15
#define TG_VERSION_PATCH 0
#define TG_VERSION_STRING "0.15.0"

/* Marks the functions libtinygpt.so exports: the library is compiled with -fvisibility=hidden, so these are the only
 * symbols a program can link against (all named tg_*). */
#if defined(__GNUC__) || defined(__clang__)
#define TG_API __attribute__((visibility("default")))
#else
#define TG_API
#endif

/* TG_VERSION_STRING of the library the program runs with (which may be newer than the header it was built with). */
TG_API const char *tg_version(void);
/* The instruction set of the CPU kernels this process runs ("scalar", "avx2", "avx512"): the CPU's best, chosen at
 * run time, capped by the environment variable TG_ISA (same names). */
TG_API const char *tg_kernel_isa(void);

/* ---- errors -------------------------------------------------------------------------------------------------- */

/* What went wrong, for callers that word a failure in their own terms (the command-line tool names its flags). The
 * message always says it all in the library's terms; the code says which setting or condition it is about. */
typedef enum {
    TG_ERR_NONE = 0,
    TG_ERR_OTHER,                       /* anything below does not cover: the message names the file or problem */
    TG_ERR_CONTEXT_FULL,                /* an unbounded cache is full ("context window of N tokens is full") */
    /* tg_cache_params rejected (session, tg_cache_bytes) */
    TG_ERR_CACHE_KEY_PRECISION,         /* key_precision is no tg_kv_precision */
    TG_ERR_CACHE_VALUE_PRECISION,       /* value_precision is no tg_kv_precision */
    TG_ERR_CACHE_SINK,                  /* sink < -1 */
    TG_ERR_CACHE_WINDOW,                /* window < 0 */
    TG_ERR_CACHE_WINDOW_TOO_LARGE,      /* the window's cache would not fit in memory */
    TG_ERR_CACHE_BUDGET,                /* budget_bytes < 0 */
    TG_ERR_CACHE_BUDGET_AND_WINDOW,     /* budget_bytes and window both set */
    TG_ERR_CACHE_BUDGET_TOO_SMALL,      /* not even the sinks and a window of 1 fit; the message ends with
                                         * "even S sink tokens and a window of 1 need N bytes" */
    TG_ERR_CACHE_SINK_WITHOUT_WINDOW,   /* sink > 0 without a window or a budget */
    TG_ERR_CACHE_GROUP_SIZE,            /* group_size outside 0..TG_KV_MAX_GROUP_SIZE */
    TG_ERR_CACHE_RESIDUAL,              /* residual outside 0..TG_KV_MAX_RESIDUAL */
    TG_ERR_CACHE_RESIDUAL_PRECISION,    /* residual_precision not fp32, fp16 or bf16 */
    TG_ERR_CACHE_RESIDUAL_NOT_MULTIPLE, /* residual not a multiple of group_size */
    TG_ERR_CACHE_MEMORY,                /* the cache's bytes exceed the machine's physical memory (max_memory 0) */
    TG_ERR_CACHE_MEMORY_LIMIT,          /* the cache's bytes exceed max_memory; the message ends with
                                         * "more than the memory limit N" */
    TG_ERR_ABORTED,                     /* the session's abort callback asked to stop (tg_session_set_abort) */
    /* a snapshot refused (tg_session_restore) */
    TG_ERR_SNAPSHOT_CORRUPT,            /* not a snapshot, truncated, damaged (checksum) or inconsistent */
    TG_ERR_SNAPSHOT_VERSION,            /* a format version this library does not read */
    TG_ERR_SNAPSHOT_MODEL,              /* made with another model (its shape or fingerprint differs) */
    TG_ERR_SNAPSHOT_POLICY,             /* made under another KV cache policy or with another sampler vocabulary */
    TG_ERR_TOO_MANY_TOKENS,             /* tg_tokenize_max: the text gives more tokens than the caller's cap */
} tg_error_code;

/* One line naming the file or setting and the problem, and what it is about. */
typedef struct {
    char msg[512];
    tg_error_code code; /* TG_ERR_OTHER unless a more precise code applies */
} tg_error;

/* ---- model ----------------------------------------------------------------------------------------------------- */

typedef struct tg_model tg_model;

/* Loads a GGUF file or a Hugging Face folder (config.json + *.safetensors + tokenizer.json). Weights are mmapped
 * where the format allows. A vocab-only GGUF loads with has_weights = false: it can tokenise but not run.
 * Returns NULL and fills err on any problem (missing file, bad magic, truncated data, unsupported type...). */
TG_API tg_model *tg_model_load(const char *path, tg_error *err);
TG_API void tg_model_free(tg_model *model);

/* What a command needs of a model (tg_model_load_for). A GGUF file is always read whole (a vocab-only one loads
 * with has_weights = false); the needs differ for a Hugging Face folder. */
typedef enum {
    TG_NEED_ALL = 0,   /* config.json, the safetensors weights and tokenizer.json: what tg_model_load reads */
    TG_NEED_TOKENIZER, /* only tokenizer.json (and the optional tokenizer_config.json / generation_config.json):
                        * enough to tokenise; neither config.json nor the weights are read */
    TG_NEED_CONFIG,    /* config.json; the weights and tokenizer.json only when present (tg_model_info.absent names
                        * what is not), the weights' shapes checked but their values not scanned: enough for `info` */
} tg_model_need;

/* tg_model_load with what `need` says; the model has has_weights = false when it was loaded without weights. */
TG_API tg_model *tg_model_load_for(const char *path, tg_model_need need, tg_error *err);

typedef struct {
    char architecture[32];   /* "llama", "mistral" */
    char weight_types[64];   /* e.g. "F16 (+F32 norms)" */
    int64_t n_params;        /* parameters in the weight tensors; a folder loaded without weights: the count the
                              * shapes of its config.json imply (0 for a vocab-only GGUF) */
    int64_t weight_bytes;    /* weight bytes one decoded token reads, as stored: every layer matrix, the norms and the
                              * output head (the embedding table is only looked up, one row) */
    int n_layers, n_heads, n_kv_heads, head_dim, d_model, ffn_dim, vocab_size;
    int context_length;      /* training context */
    int sliding_window;      /* 0 = attends to everything */
    float rope_theta, norm_eps;
    bool tied_embeddings;
    bool has_weights;        /* false for a vocab-only GGUF */
    int n_kv_layers;         /* layers that hold their own K/V (YOCO shares the rest) */
    bool has_tokenizer;      /* false for a folder loaded with TG_NEED_CONFIG that has no tokenizer.json */
    char rope_scaling[96];   /* "none", "linear (factor 4)", "llama3 (factor 32, low 1, high 4, original context
                              * 8192)", "rope_freqs.weight factors (Llama 3.1 form)" */
    char absent[320];        /* TG_NEED_CONFIG: the files the folder lacks and why they matter; "" when none */
    char layer_pattern[256]; /* the layers the model itself windows, the ones that attend to everything, layers
                              * without RoPE ("" when every layer is alike) */
    char family[256];        /* what the family adds to Llama's layer (Gemma: "embedding x sqrt(d_model), ..."); "" */
} tg_model_info;

TG_API void tg_model_get_info(const tg_model *model, tg_model_info *info);

/* ---- tokenizer ------------------------------------------------------------------------------------------------ */

/* Encodes len bytes of text (need not be valid UTF-8: invalid bytes go through byte fallback). Adds BOS first when
 * add_bos. On success *ids is malloc'ed (caller frees) and *n_ids set. */
TG_API bool tg_tokenize(const tg_model *model, const char *text, size_t len, bool add_bos, int32_t **ids,
                        size_t *n_ids, tg_error *err);
/* tg_tokenize that stops as soon as the text is known to give more than max_ids ids (BOS counted): false with
 * TG_ERR_TOO_MANY_TOKENS ("... more than max_ids tokens"). Its memory and work on a text over the cap are of the
 * order of the cap, not of the text (for a server: a 4 MB prompt of one letter is not split into 4 million
 * symbols first). */
TG_API bool tg_tokenize_max(const tg_model *model, const char *text, size_t len, bool add_bos, size_t max_ids,
                            int32_t **ids, size_t *n_ids, tg_error *err);
TG_API int32_t tg_token_bos(const tg_model *model);   /* -1 if none */
TG_API int32_t tg_token_eos(const tg_model *model);   /* -1 if none */
/* Every id that ends generation, without repeats: the tokenizer's EOS, then config.json's and
 * generation_config.json's eos_token_id (an id or a list: Llama 3.1 Instruct lists three). Returns the count; *ids
 * (when ids is not NULL) points into the model. */
TG_API size_t tg_token_eos_ids(const tg_model *model, const int32_t **ids);
TG_API bool tg_token_is_eos(const tg_model *model, int32_t id);
/* Whether the tokenizer's config says BOS is added to prompts. */
TG_API bool tg_model_adds_bos(const tg_model *model);
TG_API int32_t tg_vocab_size(const tg_model *model);

/* Streaming detokeniser: turns ids into bytes, never splitting a multi-byte UTF-8 character across calls. */
typedef struct tg_detok tg_detok;
/* NULL (err filled) when the model has no tokenizer or memory runs out. */
TG_API tg_detok *tg_detok_new(const tg_model *model, tg_error *err);
TG_API void tg_detok_free(tg_detok *d);
/* Appends the text of id; returns the bytes that are now complete (valid to print) in *out and *out_len; the pointer
 * stays valid until the next call. */
TG_API void tg_detok_push(tg_detok *d, int32_t id, const char **out, size_t *out_len);
/* Returns whatever is pending (an incomplete character at the end is emitted as U+FFFD). */
TG_API void tg_detok_flush(tg_detok *d, const char **out, size_t *out_len);
/* Pushes a prompt's ids through d without handing out their text, then drops what is still pending (an incomplete
 * UTF-8 character at the prompt's end), so that the text of the tokens pushed next starts clean (never joined to the
 * prompt's tail); d still knows the text has started (SentencePiece prefix spaces are handled as after an echo). */
TG_API void tg_detok_skip_prompt(tg_detok *d, const int32_t *ids, size_t n);

/* ---- KV cache policy -------------------------------------------------------------------------------------------- */

typedef enum {
    TG_KV_FP32 = 0,
    TG_KV_FP16,
    TG_KV_BF16,
    TG_KV_INT8,
    TG_KV_INT4,
    TG_KV_INT2,
} tg_kv_precision;

/* StreamingLLM: the RoPE positions a bounded cache scores its keys at once it has dropped tokens. */
typedef enum {
    TG_ROPE_POSITIONS_DEFAULT = 0, /* the library's choice: re-positioned (what tg_cache_default_params gives) */
    TG_ROPE_POSITIONS_REPOSITION,  /* re-positioned, asked for explicitly: every query-key distance is the distance
                                    * between their cache slots (sinks, then the window, contiguous), so the sinks
                                    * stay as close as the oldest window token however long the generation */
    TG_ROPE_POSITIONS_ORIGINAL,    /* vanilla: every key at its absolute position (the sinks drift ever further) */
} tg_rope_positions;

/* KIVI: the per-head rotation of keys and values before they are quantised (a Walsh–Hadamard transform with fixed
 * random signs per layer and kv-head, in blocks of the largest power of two dividing the head dim; the query is
 * rotated the same way and the attention output rotated back, so only the quantisation error changes). Float stores
 * are never rotated. */
typedef enum {
    TG_KV_ROTATE_DEFAULT = 0, /* the library's choice (tg_cache_default_params) */
    TG_KV_ROTATE_ON,          /* keys and values */
    TG_KV_ROTATE_OFF,
    TG_KV_ROTATE_VALUES,      /* values only (KIVI's per-channel key grids already give an outlier channel its own
                               * scale; rotating keys spreads it over every channel's grid) */
} tg_kv_rotate;

/* KIVI: how a group's or token's fp16 (scale, zero) grid is fitted. The grid spanning the slice's whole range
 * wastes steps on its rarest values at 2 bits; the clipped fit tries each end moved inwards by 0 to 3 sixteenths
 * of the range and keeps the grid whose codes reproduce the slice with the least squared error (values beyond it coded
 * at its ends; a key's error weighted up toward its channel's extremes, where attention's largest scores come from).
 * Bytes and attention are the same either way. */
typedef enum {
    TG_KV_CLIP_DEFAULT = 0, /* the library's choice, per precision: int2 keys and values; not int4, int8 */
    TG_KV_CLIP_ON,          /* every KIVI store clipped */
    TG_KV_CLIP_OFF,         /* every grid spans its slice's whole range (before issue #51's clip) */
} tg_kv_clip;

typedef struct {
    tg_kv_precision key_precision;
    tg_kv_precision value_precision;
    int64_t sink;         /* StreamingLLM: first tokens always kept; -1 (default) = 4 when bounded */
    int64_t window;       /* StreamingLLM: last tokens kept beyond the sinks; 0 = unbounded (up to the context) */
    int group_size;       /* KIVI key group along time; TG_KV_GROUP_AUTO (default) = from the cache's length L (its
                           * window, or its context when unbounded): the largest of 32 / 16 / 8 that is at most L / 8,
                           * halved (at least 8) for int2's automatic residual while 16 G > L (int2: G 32 from
                           * L = 512 on); 32 with an explicit residual;
                           * 0 = whole-history per-channel scales */
    int residual;         /* KIVI full-precision residual tokens, a multiple of the group size (of 32 with
                           * TG_KV_GROUP_AUTO); TG_KV_RESIDUAL_AUTO (default) = none for int8 / int4 (every token
                           * quantised as it arrives, the keys of the group being filled on provisional per-channel
                           * scales), one group for int2; 0 = none. KIVI's published setting: 128 with group 32 and an
                           * fp32 residual */
    tg_rope_positions rope_positions; /* StreamingLLM: re-positioned (TG_ROPE_POSITIONS_DEFAULT) or original
                                       * positions; no effect on an unbounded cache, whose keys all keep their own */
    int64_t budget_bytes; /* > 0: choose the largest window that fits (requires window == 0) */
    int64_t context;      /* > 0: capacity of an unbounded cache instead of the model's training context; the session
                           * then takes that many tokens, at RoPE positions the model was never trained on (for
                           * long-context experiments); 0 (default) = the model's context */
    bool quantize_sinks;  /* KIVI: quantise the StreamingLLM sinks like the rest (keys per channel over the sinks,
                           * values per token, once all sinks are in) instead of keeping them fp32; they keep their
                           * fp32 slots, so the bytes do not change (default false) */
    tg_kv_precision residual_precision; /* KIVI: storage of the full-precision residual ring and the sinks: fp16
                                         * (default), bf16 or fp32 (the sinks are fp32 with quantize_sinks) */
    int64_t max_memory;   /* the most bytes of K/V storage a session may allocate (the report's bytes_total),
                           * checked before anything is allocated: a bounded cache's all at once, an unbounded one's
                           * at every chunk it grows by (the session's eval or reserve then fails):
                           * > 0 = this many; 0 (default) = the machine's
                           * physical memory (sysconf _SC_PHYS_PAGES x _SC_PAGESIZE; no limit where the system does
                           * not say); < 0 = no limit. The message names the CLI's --max-memory. */
    const char *device;   /* where a session's forward pass runs: NULL or "cpu" (default), "vulkan" / "vulkan:N"
                           * (Vulkan device N: F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K weights, fp32 / fp16
                           * and KIVI caches so far; anything else is refused with a message), "auto" (Vulkan device 0
                           * when it can run the model, else the CPU). Sessions only: a batch refuses anything but the
                           * CPU. The CLI's --device. */
    tg_kv_rotate rotate;  /* KIVI stores rotated before quantisation (see tg_kv_rotate; default TG_KV_ROTATE_DEFAULT) */
    tg_kv_clip clip;      /* KIVI grids clipped by least squared error (see tg_kv_clip; default TG_KV_CLIP_DEFAULT) */
} tg_cache_params;

/* group_size: chosen from the cache's length (see group_size); the largest group it chooses. */
#define TG_KV_GROUP_AUTO (-1)
#define TG_KV_RESIDUAL_AUTO (-1)
#define TG_KV_AUTO_GROUP_MAX 32
/* The largest group_size and residual a policy may ask for. */
#define TG_KV_MAX_GROUP_SIZE 4096
#define TG_KV_MAX_RESIDUAL (1 << 20)

TG_API tg_cache_params tg_cache_default_params(void);
/* The precisions the library stores a cache at: (tg_kv_precision)0 .. tg_kv_precision_count() - 1, in the order
 * listings show them (fp32, fp16, bf16, int8, int4, int2). */
TG_API int tg_kv_precision_count(void);
/* "fp32" ... "int2" -> precision; false for an unknown name. */
TG_API bool tg_kv_precision_parse(const char *name, tg_kv_precision *out);
/* The name of p ("unknown" for a value that is no precision). */
TG_API const char *tg_kv_precision_name(tg_kv_precision p);
/* True for the precisions KIVI quantises to integer codes (int8, int4, int2); false for float rows or no precision. */
TG_API bool tg_kv_precision_is_integer(tg_kv_precision p);
/* Bytes that a cache for this model under params would allocate to hold a history of n_tokens tokens (the same
 * accounting as tg_cache_report.bytes_total). n_tokens may exceed the model's context (used to extrapolate the cache
 * table of `tinygpt info --cache-table`); a StreamingLLM policy stops growing at its bound (sink + window, plus one
 * KIVI group), and a budget is resolved to its window first. Returns 0 and fills err when the policy is invalid for
 * the model. */
TG_API size_t tg_cache_bytes(const tg_model *model, const tg_cache_params *params, int64_t n_tokens, tg_error *err);

/* What the cache holds, for the report. All byte counts are bytes actually allocated (an unbounded cache allocates
 * in chunks as tokens arrive). */
typedef struct {
    int64_t position;          /* tokens seen so far (generation position) */
    int64_t stored;            /* tokens currently held */
    int64_t capacity;          /* most tokens it can ever hold */
    int64_t allocated_for;     /* tokens the storage allocated so far holds (== capacity unless it grows) */
    int64_t chunk_tokens;      /* an unbounded cache's growth step in tokens; 0 when allocated up front */
    int n_layers, n_kv_layers; /* layers in the model / layers that hold K/V */
    size_t bytes_total;
    size_t bytes_k_data, bytes_v_data, bytes_scales, bytes_residual; /* residual = full-precision residual + sinks */
    size_t bytes_if_bf16, bytes_if_fp32; /* what a bf16 / fp32 cache with the same sinks, window and context
                                          * allocates (the same geometry code, only the precision changed), holding
                                          * the same tokens when it grows */
    size_t bytes_in_use;       /* what a cache sized for exactly the `stored` tokens held now would allocate */
    int64_t quantized;         /* tokens held in quantised form (KIVI groups or codes; the rest are in full precision:
                                * sinks, residual), in the first layer that holds K/V */
    char policy[256];          /* one-line description of the policy, for the banner */
    int64_t sink, window;      /* the StreamingLLM policy as resolved (a budget turned into its window); 0 and 0
                                * when unbounded */
    /* a session on a GPU (device[0] != 0): the device's name and the bytes allocated there — its copy of this
     * cache (an unbounded cache's for its whole context, up front), the weights, and the rest (activations, row
     * tables, partials); all zero on the CPU */
    char device[128];
    size_t device_kv_bytes, device_weight_bytes, device_other_bytes;
} tg_cache_report;

/* ---- session: a model, a KV cache and the forward pass --------------------------------------------------------- */

typedef struct tg_session tg_session;

/* n_threads <= 0: all cores (tg_threads_all_cores). NULL with err filled (its code saying which setting) when the
 * cache policy is invalid for this model, the model has no weights, or memory runs out. */
TG_API tg_session *tg_session_new(const tg_model *model, const tg_cache_params *params, int n_threads, tg_error *err);
TG_API void tg_session_free(tg_session *s);
/* The model the session runs. */
TG_API const tg_model *tg_session_model(const tg_session *s);
/* The threads the session's team really has (>= 1; fewer than asked when the system refused some); 0 for NULL. */
TG_API int tg_session_threads(const tg_session *s);

/* Runs n tokens through the model at the current position (prompt chunks or one decoded token), appending them to
 * the cache. If logits_all is non-NULL it receives n * vocab logits (row t = the distribution after token t);
 * logits_last (non-NULL) receives the last row. Fails (false) when the context is full and no streaming policy is
 * set, or when the model produced non-finite logits. */
TG_API bool tg_session_eval(tg_session *s, const int32_t *ids, size_t n, float *logits_all, float *logits_last,
                            tg_error *err);
TG_API int64_t tg_session_position(const tg_session *s);
/* Allocates now the cache storage for the next n_tokens tokens (at most up to the context; an unbounded cache
 * otherwise grows in chunks as they arrive), checked against max_memory: false with TG_ERR_CACHE_MEMORY /
 * TG_ERR_CACHE_MEMORY_LIMIT when it would pass it. Nothing to do (true) for a bounded cache. */
TG_API bool tg_session_reserve(tg_session *s, int64_t n_tokens, tg_error *err);
/* Tokens the session can still take; INT64_MAX when a streaming policy bounds the cache. */
TG_API int64_t tg_session_remaining(const tg_session *s);
TG_API void tg_session_cache_report(const tg_session *s, tg_cache_report *r);
/* Empties the session's cache, keeping every allocation: position 0, as tg_session_new left it (the same tokens
 * then give the same logits, bit for bit). The abort callback stays. */
TG_API void tg_session_reset(tg_session *s);

/* Asked by tg_session_eval before every forward call (each prefill chunk, each decoded token) and by tg_generate
 * between tokens; returning true stops the work there: the call fails with TG_ERR_ABORTED ("aborted after K of N
 * tokens"). The tokens evaluated before it stay in the cache (tg_session_position counts them), so a caller may go
 * on, or tg_session_reset. It runs on the caller's thread; fn NULL removes it. */
typedef bool (*tg_abort_fn)(void *user);
TG_API void tg_session_set_abort(tg_session *s, tg_abort_fn fn, void *user);
/* Whether the abort callback says to stop now (false without one). */
TG_API bool tg_session_aborted(const tg_session *s);

/* The attention-sink meter (docs/kvcache.md, "The attention-sink meter"): where each head's softmax mass goes, over
 * everything the session evaluates after tg_session_meter_attention. A query's visible tokens are counted in
 * position order (the held sinks, then the held window, oldest first); the ranges are the first 1, 4 and 16 of them
 * and the newest 16 (the query's own token included). Queries that see fewer than 2 * 16 tokens are not summed
 * (their ranges overlap), only counted. */
#define TG_ATTN_RANGES 4 /* first 1, first 4, first 16, newest 16 */
typedef struct {
    int n_layers, n_heads;
    const double *share_sum; /* [n_layers][n_heads][TG_ATTN_RANGES]: each range's share of the mass, summed over
                              * the summed queries */
    const int64_t *queries;  /* [n_layers] queries summed */
    const int64_t *skipped;  /* [n_layers] queries not summed (fewer than 32 visible tokens) */
} tg_attention_stats;
/* Turns the meter on (its buffers are allocated here, once; evaluation stays allocation-free). It costs one branch
 * per attention piece while off. False (err filled) when memory runs out. */
TG_API bool tg_session_meter_attention(tg_session *s, tg_error *err);
/* The meter's sums so far (pointers into the session, valid until its next eval or free); false when it is off. */
TG_API bool tg_session_attention_stats(const tg_session *s, tg_attention_stats *out);

/* ---- batches: many sequences advanced together (a server's sessions) ------------------------------------------
 * A tg_sequence is a KV cache and a position, without a forward pass of its own; a tg_batch is one forward pass (its
 * scratch and thread team) that runs the tokens of several sequences in one pass: every weight matrix is read once
 * for all of them (matrix x several vectors), attention is per sequence over its own cache. A sequence's logits are
 * bit-for-bit what a tg_session with the same cache policy computes for the same tokens, whatever else is in the
 * batch and however its tokens are split into calls. */

typedef struct tg_sequence tg_sequence;
typedef struct tg_batch tg_batch;

/* The bytes of K/V storage (the report's bytes_total) a sequence under params allocates, known without allocating:
 * for a bounded policy its bound, for an unbounded one its context (params->context, 0 = the model's). 0 and err
 * filled when the policy is invalid for the model. */
TG_API size_t tg_sequence_bytes(const tg_model *model, const tg_cache_params *params, tg_error *err);
/* Allocates the sequence's cache (tg_sequence_bytes of it) once. NULL with err filled when the policy is invalid or
 * memory runs out. */
TG_API tg_sequence *tg_sequence_new(const tg_model *model, const tg_cache_params *params, tg_error *err);
TG_API void tg_sequence_free(tg_sequence *q);
TG_API int64_t tg_sequence_position(const tg_sequence *q);
/* Tokens the sequence can still take; INT64_MAX when a streaming policy bounds its cache. */
TG_API int64_t tg_sequence_remaining(const tg_sequence *q);
/* The most tokens one call may give the sequence (1 where a shared layer evicts, else TG_BATCH_PREFILL_MAX). */
TG_API int tg_sequence_max_chunk(const tg_sequence *q);
TG_API void tg_sequence_cache_report(const tg_sequence *q, tg_cache_report *r);

/* Tokens per sequence and call that prefill is split into at most (the session's prompt chunk). */
#define TG_BATCH_PREFILL_MAX 64

/* A forward pass for up to max_rows tokens per call (over all sequences), with attention work space for sequences
 * whose caches hold at most as many tokens as one under `widest` (the server's cache policy); n_threads <= 0: all
 * cores. NULL with err filled when the model has no weights, max_rows < 1 or the policy is invalid. */
TG_API tg_batch *tg_batch_new(const tg_model *model, const tg_cache_params *widest, int max_rows, int n_threads,
                              tg_error *err);
TG_API void tg_batch_free(tg_batch *b);
TG_API int tg_batch_threads(const tg_batch *b);
TG_API int tg_batch_max_rows(const tg_batch *b);
/* Whether the batch can run q (its cache needs no more attention work space than the batch has; on a device, its
 * cache policy is the batch's: the device keeps each sequence's cache in that policy's layout). */
TG_API bool tg_batch_fits(const tg_batch *b, const tg_sequence *q);
/* q runs in b no more (call it before tg_sequence_free): what b holds for q (a device's copy of its cache) serves
 * other sequences. Without it the copy is reused once b runs out of room for copies. */
TG_API void tg_batch_release(tg_batch *b, const tg_sequence *q);
/* Whether b runs on a device other than the CPU (device named in tg_batch_new's params: "vulkan", "auto"...). */
TG_API bool tg_batch_on_device(const tg_batch *b);

/* One sequence's share of a call: n tokens ids[n] appended at its position; logits (non-NULL) receives the
 * distribution after the last of them [vocab]. finite (out) is false when those logits are not all finite. */
typedef struct {
    tg_sequence *seq;
    const int32_t *ids;
    int n;
    float *logits;
    bool finite;
} tg_batch_item;

/* Runs the items in one pass and advances each sequence by its n. False with err filled, nothing run, when the rows
 * exceed tg_batch_max_rows, an item is empty, exceeds its sequence's max chunk or remaining room, names a sequence
 * twice or one the batch does not fit, or an id is outside the vocabulary. */
TG_API bool tg_batch_eval(tg_batch *b, tg_batch_item *items, int n_items, tg_error *err);

/* ---- sampler ---------------------------------------------------------------------------------------------------- */

typedef struct {
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = off */
    float top_p;       /* 1 = off */
    uint64_t seed;
    float repeat_penalty; /* llama.cpp's: the logit of each id among the last repeat_last_n tokens is divided by it
                           * when positive, multiplied when negative (once per id); 0 or 1 = off */
    int repeat_last_n;    /* how many of the latest tokens (tg_sampler_accept) the penalty looks at; 0 = off */
    float min_p;          /* keep ids whose probability is at least min_p times the top one's (on the logits
                           * before temperature, as llama.cpp); 0 = off */
} tg_sampler_params;

/* The largest repeat_last_n a sampler accepts. */
#define TG_SAMPLER_MAX_LAST_N (1 << 20)

typedef struct tg_sampler tg_sampler;
/* temperature 0.8, top-k 40, top-p 0.95, seed 0, repeat penalty 1 (off) over the last 64 tokens, min-p 0 (off). */
TG_API tg_sampler_params tg_sampler_default_params(void);
/* Allocates every buffer once (sampling never allocates). The PRNG is seeded from p->seed: the same seed gives the
 * same sequence of draws. NULL (err filled, naming the parameter) when vocab_size <= 0, temperature is negative or
 * not finite, top_k < 0, top_p is outside [0, 1], repeat_penalty is negative or not finite, repeat_last_n is outside
 * 0..TG_SAMPLER_MAX_LAST_N, min_p is outside [0, 1], or memory runs out. */
TG_API tg_sampler *tg_sampler_new(const tg_sampler_params *p, int32_t vocab_size, tg_error *err);
TG_API void tg_sampler_free(tg_sampler *s);
/* The sampling settings a model's files recommend: a Hugging Face folder's generation_config.json temperature,
 * top_k and top_p (not when it says "do_sample": false: transformers then decodes greedily and ignores them).
 * Each has_* tells whether the file sets it; source names the file. */
typedef struct {
    bool has_temperature, has_top_k, has_top_p;
    float temperature;
    int top_k;
    float top_p;
    char source[32];
} tg_generation_defaults;
TG_API void tg_model_generation_defaults(const tg_model *model, tg_generation_defaults *out);

/* Picks a token from logits[vocab_size] (the logits are not modified) and remembers it for the repeat penalty (as
 * tg_sampler_accept). First the repeat penalty; then at temperature 0 the argmax, ties to the lowest id. Otherwise
 * ids below min-p are dropped, softmax(logits / T) cut to the top_k highest, then to the smallest set whose
 * probability reaches top_p (at least one id), and drawn. NaN and -inf logits are never picked; if any logit / T is
 * +inf the draw is uniform over those. Returns -1 when no logit is pickable (all NaN or -inf). */
TG_API int32_t tg_sampler_sample(tg_sampler *s, const float *logits);
/* Remembers id (a prompt token) for the repeat penalty; ids outside the vocabulary are ignored. */
TG_API void tg_sampler_accept(tg_sampler *s, int32_t id);
/* Back to the state tg_sampler_new left: the PRNG re-seeded from the parameters' seed, the repeat penalty's history
 * emptied (with tg_session_reset, a run then repeats exactly, sampled or greedy). */
TG_API void tg_sampler_reset(tg_sampler *s);

/* ---- snapshots: a session saved and restored (docs/snapshot-format.md) ----------------------------------------
 * A snapshot holds the session's KV cache in its stored precision (every buffer as allocated: quantised groups and
 * their scales, the residual ring, the sinks, the counters of held and evicted tokens), its position and every token
 * it evaluated, optionally a sampler's state and the logits after the last token; a versioned header, a fingerprint
 * of the model and the resolved cache policy, and a CRC-32 of everything. Restored into a session of the same model
 * and policy, the next logits equal the original's bit for bit. */

/* The tokens the session evaluated since it was made, reset or restored, in order (*n = its position; n may be
 * NULL); valid until the next eval, reset, restore or free. NULL when there are none. */
TG_API const int32_t *tg_session_tokens(const tg_session *s, size_t *n);
/* What travels with a session in its snapshot besides the cache and the tokens (each part optional): a sampler's
 * state (its PRNG and the repeat penalty's history), the logits after the last token (so that a restored session
 * samples without evaluating anything), and an application's own bytes (e.g. `tinygpt chat` keeps its conversation
 * there), stored and checksummed but not interpreted. */
typedef struct {
    const tg_sampler *sampler; /* NULL: none saved */
    const float *logits;       /* [vocab]; NULL: none saved */
    const void *app;           /* app_len bytes; NULL: none saved */
    size_t app_len;
} tg_snapshot_extras;

/* Saves s (and *extras when not NULL) into *buf (malloc'ed, caller frees) of *len bytes. False with err filled when
 * memory runs out. */
TG_API bool tg_session_save(const tg_session *s, const tg_snapshot_extras *extras, void **buf, size_t *len,
                            tg_error *err);

/* Where tg_session_restore puts what travelled with the session (each pointer may be NULL: that part is skipped). */
typedef struct {
    tg_sampler *sampler; /* receives the saved sampler state when there is one (keeps its own otherwise) */
    float *logits;       /* room for vocab floats: receives the saved logits when there are some */
    bool has_logits;     /* out: whether it did */
    bool want_app;       /* in: *app receives a malloc'ed copy of the application's bytes (caller frees; NULL and
                          * app_len 0 when there are none) */
    void *app;
    size_t app_len;
} tg_snapshot_restore;

/* Restores buf[len] (from tg_session_save) into s, a session of the same model and cache policy: s then holds what
 * the saved session held (position, tokens, cache); *out (may be NULL) receives what travelled with it. Refusals,
 * with err's code: a buffer that is no snapshot, is cut short, fails its checksum or is inconsistent
 * (TG_ERR_SNAPSHOT_CORRUPT), another format version (TG_ERR_SNAPSHOT_VERSION), another model
 * (TG_ERR_SNAPSHOT_MODEL), another cache policy or a sampler of another vocabulary (TG_ERR_SNAPSHOT_POLICY): s and
 * the sampler are then unchanged. A cache state that passes these checks but cannot be restored (max_memory, out of
 * memory) leaves s empty (position 0). Never reads outside buf[len]. */
TG_API bool tg_session_restore(tg_session *s, const void *buf, size_t len, tg_snapshot_restore *out, tg_error *err);
/* tg_session_save into the file at path, atomically (tg_snapshot_write_file). */
TG_API bool tg_session_save_file(const tg_session *s, const tg_snapshot_extras *extras, const char *path,
                                 tg_error *err);
/* Writes buf[len] to the file at path atomically: to a temporary file beside it, flushed to disk (fsync), renamed
 * over path (and the directory flushed), so that a crash leaves either the old file or the new one, never half of
 * one. False with err naming path when it cannot be written (the temporary file is then removed). */
TG_API bool tg_snapshot_write_file(const char *path, const void *buf, size_t len, tg_error *err);
/* tg_session_restore of the file at path (err names it; a missing file: TG_ERR_OTHER with the system's words). */
TG_API bool tg_session_restore_file(tg_session *s, const char *path, tg_snapshot_restore *out, tg_error *err);
/* A sequence (a batch's session) saved like a session: the sequence does not keep its tokens, so the caller gives
 * them, ids[n] with n its position. The snapshot is the one tg_session_save writes: either restores into the other. */
TG_API bool tg_sequence_save(const tg_sequence *q, const int32_t *ids, size_t n, const tg_snapshot_extras *extras,
                             void **buf, size_t *len, tg_error *err);
/* tg_session_restore for a sequence (same refusals; a failure past the checks leaves q at position 0); *ids (may be
 * NULL) receives a malloc'ed copy of the tokens it holds, *n their count. */
TG_API bool tg_sequence_restore(tg_sequence *q, const void *buf, size_t len, tg_snapshot_restore *out, int32_t **ids,
                                size_t *n, tg_error *err);
/* The tokens a snapshot holds (header and checksum checked; the model is not): *ids malloc'ed (caller frees), *n
 * their count. False with err (TG_ERR_SNAPSHOT_*) as tg_session_restore refuses the buffer. */
TG_API bool tg_snapshot_tokens(const void *buf, size_t len, int32_t **ids, size_t *n, tg_error *err);

/* ---- the generation step: logits in, a token and its text out ---------------------------------------------------
 * One step of every generation loop (tg_generate, `tinygpt sample` / `chat` / `compare`, the server): sample a
 * token, end at an end-of-turn id, turn the token into text (never splitting a UTF-8 character), hold back text
 * that might be the start of a stop string until it is decided, end at a stop string, at max_tokens and when the
 * abort callback says so. The caller evaluates the tokens (a tg_session or a tg_batch) and prints the text.
 *
 * Which tokens the caller evaluates (one rule for every caller): a token handed out while the generation goes on
 * (TG_GEN_GOING) is evaluated before the next step. A token that completes a stop string (TG_GEN_STOP_STRING) is
 * never evaluated: its text is cut at the stop string, and the cache is not to hold text the output does not. An
 * end-of-turn id (TG_GEN_END) is not handed out and not evaluated. A token that ends the run by max_tokens or the
 * abort callback (TG_GEN_MAX_TOKENS, TG_GEN_ABORTED) is whole text: a caller that goes on from the session later
 * (`tinygpt chat`, tg_generate after max_tokens) evaluates it, one that discards the session need not. */

typedef struct tg_generator tg_generator;

typedef struct {
    int64_t max_tokens;         /* the most tokens handed out per generation; 0 = no limit */
    const char *const *stops;   /* stop strings (copied; empty ones are ignored): the text ends before the first one
                                 * that appears, and no byte of it is handed out */
    size_t n_stops;
    const int32_t *end_ids;     /* ids that end a generation besides the model's EOS ids (tg_token_is_eos), e.g. a
                                 * chat template's end-of-turn markers (tg_chat_end_ids); copied */
    size_t n_end_ids;
    bool ignore_eos;            /* neither EOS nor end_ids end a generation: they are handed out like any token */
    tg_abort_fn abort;          /* asked after each token is handed out, unless that token ended the run anyway;
                                 * true ends it with TG_GEN_ABORTED; NULL = never (tg_generate asks the session's
                                 * callback itself, after on_token) */
    void *abort_user;
} tg_generator_params;

/* No limit, no stop strings, no extra end ids, EOS ends, no abort callback. */
TG_API tg_generator_params tg_generator_default_params(void);

/* A generator for model drawing from sampler (not owned: it must outlive the generator, and the caller frees it).
 * Copies what p points to. NULL with err filled when the model has no tokenizer, a count is negative, or memory runs
 * out. */
TG_API tg_generator *tg_generator_new(const tg_model *model, tg_sampler *sampler, const tg_generator_params *p,
                                      tg_error *err);
TG_API void tg_generator_free(tg_generator *g);

/* Begins a generation after the prompt ids[n] (which the caller evaluates): the sampler remembers them for the
 * repeat penalty, the count of handed-out tokens and the stop strings start again. With echo the prompt's text is
 * handed out in *text / *len (valid until the next call; both may be NULL when not echoing) and the generated text
 * continues it; without, the prompt is skipped (tg_detok_skip_prompt). A generator may run many generations (the
 * turns of a conversation). False with err filled when memory runs out. */
TG_API bool tg_generator_start(tg_generator *g, const int32_t *ids, size_t n, bool echo, const char **text,
                               size_t *len, tg_error *err);

/* Why a generation ended, as a step reports it. */
typedef enum {
    TG_GEN_GOING = 0,   /* it goes on: evaluate the token, then step again */
    TG_GEN_END,         /* an EOS id or an end id was sampled (not handed out: id -1) */
    TG_GEN_STOP_STRING, /* the text reached a stop string (the text before it handed out) */
    TG_GEN_MAX_TOKENS,  /* the token is the max_tokens-th */
    TG_GEN_ABORTED,     /* the abort callback said to stop after this token */
} tg_gen_stop;

/* What one step hands out. */
typedef struct {
    int32_t id;       /* the sampled token, or -1 when none was handed out (TG_GEN_END) */
    const char *text; /* the text now safe to show (len may be 0: held back, or an incomplete character); valid
                       * until the next call on the generator */
    size_t len;
    tg_gen_stop stop;
} tg_gen_token;

/* Samples from logits[vocab] (the distribution after the last evaluated token) and fills *out. After a step that
 * ended the generation (stop != TG_GEN_GOING) a further step does nothing but say so again (id -1, len 0). False
 * with err filled when no logit is pickable ("the model produced no finite logits") or memory runs out. */
TG_API bool tg_generator_step(tg_generator *g, const float *logits, tg_gen_token *out, tg_error *err);

/* Ends the generation: out->text / out->len get the text still pending (an incomplete UTF-8 character, as U+FFFD)
 * and the text held back for the stop strings (valid until the next call); out->id is -1. out->stop is
 * TG_GEN_STOP_STRING when that text reached a stop string (it is then cut before it) or a step already reported one
 * (len 0), else what the last step reported (TG_GEN_GOING when the caller ended the run for a reason of its own, e.g.
 * a full context). False with err filled when memory runs out. */
TG_API bool tg_generator_finish(tg_generator *g, tg_gen_token *out, tg_error *err);

/* Tokens handed out since tg_generator_start. */
TG_API int64_t tg_generator_count(const tg_generator *g);

/* ---- generation: prompt in, tokens out through a callback ------------------------------------------------------ */

/* Receives each generated token: its id and the text that is complete after it (a UTF-8 character is never split
 * across calls, so len may be 0); the pointer is valid during the call only. At the end, text still pending (an
 * incomplete character, as U+FFFD) comes with id -1. Returning false stops the generation after this token. */
typedef bool (*tg_token_fn)(int32_t id, const char *text, size_t len, void *user);

/* `tinygpt sample`'s loop on the generation step (a tg_generator with max_tokens, no stop strings, no end ids beyond
 * EOS): evaluates prompt[n_prompt] (n_prompt >= 1; the sampler remembers it for the repeat penalty), then samples up
 * to max_tokens tokens, hands each to on_token (may be NULL) and evaluates it, the last one too, so that the session
 * then holds the prompt and the generated text and a next call goes on from there. Stops before an end-of-sequence
 * id (tg_token_is_eos: neither handed out nor evaluated), when on_token returns false, and when an unbounded cache is
 * full (its last token handed out, not evaluated). The session's abort callback is asked after each token is handed
 * to on_token, before it is evaluated.
 * With a greedy sampler the text is that of `tinygpt sample --temperature 0 --no-echo`. Returns the number of tokens
 * handed out, or -1 with err filled: the prompt does not fit the context (TG_ERR_CONTEXT_FULL), TG_ERR_ABORTED, no
 * finite logits, out of memory. */
TG_API int64_t tg_generate(tg_session *s, tg_sampler *sampler, const int32_t *prompt, size_t n_prompt,
                           int64_t max_tokens, tg_token_fn on_token, void *user, tg_error *err);

/* ---- chat templates ------------------------------------------------------------------------------------------ */

/* One message of a conversation, as in OpenAI's format: role "system", "user" or "assistant"; content UTF-8. */
typedef struct {
    const char *role;
    const char *content;
} tg_chat_message;

typedef struct tg_chat tg_chat;

/* The chat template of the model at model_path (a .gguf: tokenizer.chat_template; a Hugging Face folder:
 * chat_template.jinja, else tokenizer_config.json's chat_template; only those files are read, never the weights),
 * or, when builtin is not NULL, the built-in template of that name (tg_chat_builtin_names). NULL with err when the
 * model carries no template, the name is unknown, or the template does not compile (the Jinja2 subset of
 * docs/chat_templates.md). */
TG_API tg_chat *tg_chat_open(const char *model_path, const char *builtin, tg_error *err);
TG_API void tg_chat_free(tg_chat *c);
/* The names of the built-in templates, comma-separated ("chatml, llama2, ..."). */
TG_API const char *tg_chat_builtin_names(void);
/* messages[n] rendered as transformers' apply_chat_template(messages, add_generation_prompt=...) renders them:
 * malloc'ed, NUL-terminated text (caller frees), its length in *len (len may be NULL). NULL with err when the
 * template raises an error, a message is not valid UTF-8, or a bound of the renderer is exceeded. */
TG_API char *tg_chat_render(const tg_chat *c, const tg_chat_message *messages, size_t n, bool add_generation_prompt,
                            size_t *len, tg_error *err);
/* tg_tokenize of text rendered by c, with BOS added where the model adds it and the text does not already start with
 * the template's BOS string (as `tinygpt chat` does). */
TG_API bool tg_chat_tokenize(const tg_chat *c, const tg_model *model, const char *text, size_t len, int32_t **ids,
                             size_t *n_ids, tg_error *err);
/* The ids that end a reply in this template's conversations, at most max of them into ids[] (`tinygpt chat`'s): the
 * tokenizer's EOS, then every common end-of-turn marker that the template mentions and the tokenizer encodes as one
 * token (<|im_end|> of ChatML, <|eot_id|> of Llama 3, <|end|>, <end_of_turn>, <|endoftext|>). Every
 * tg_token_is_eos id ends a reply too (tg_generator checks them itself): pass these as its end_ids. Returns the
 * count; c NULL gives EOS alone. */
TG_API size_t tg_chat_end_ids(const tg_chat *c, const tg_model *model, int32_t *ids, size_t max);

/* ---- the machine -------------------------------------------------------------------------------------------- */

/* What "all cores" means wherever a thread count of 0 is accepted: the CPUs this process may run on (its affinity
 * mask, as `taskset` or a container sets it), else the online CPUs; at least 1. */
TG_API int tg_threads_all_cores(void);
/* A read-bandwidth probe: a buffer of `mib` MiB (far larger than the last-level cache, filled once) and a team of
 * n_threads (<= 0: all cores) of the kind that runs the forward pass. A pass reads the whole buffer once in each of
 * TG_BANDWIDTH_PATTERNS patterns — sequentially, and as several software-prefetched streams per thread — and stores
 * each read's seconds. NULL when mib <= 0 or memory runs out. */
typedef struct tg_bandwidth_probe tg_bandwidth_probe;
enum { TG_BANDWIDTH_PATTERNS = 3 };
TG_API tg_bandwidth_probe *tg_bandwidth_probe_new(int64_t mib, int n_threads);
/* The bytes one pattern of a pass reads (the buffer's size); 0 for NULL. */
TG_API int64_t tg_bandwidth_probe_bytes(const tg_bandwidth_probe *p);
TG_API void tg_bandwidth_probe_pass(tg_bandwidth_probe *p, double seconds[TG_BANDWIDTH_PATTERNS]);
TG_API void tg_bandwidth_probe_free(tg_bandwidth_probe *p);
/* The read bandwidth in bytes per second that `passes` passes of `bytes` each show: the best pattern's bytes over
 * its summed seconds (a mean rate, not the fastest single read); 0 when no pattern has time. */
TG_API double tg_bandwidth_rate(int64_t bytes, int64_t passes, const double seconds[TG_BANDWIDTH_PATTERNS]);
/* tg_bandwidth_rate of three passes of a fresh probe (then freed); 0 when mib <= 0 or memory runs out. */
TG_API double tg_measure_read_bandwidth(int64_t mib, int n_threads);

#ifdef __cplusplus
}
#endif
#endif
