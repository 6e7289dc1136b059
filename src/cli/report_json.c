/* report_json.c — the tool's reports as JSON objects (report_json.h). */
#include "cli/report_json.h"

#include <inttypes.h>
#include <stdlib.h>

/* A float as the shortest decimal that reads back as it (7 significant digits at most), so that 0.95f prints as
 * 0.95, not 0.949999988. */
static double short_float(float x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)x);
    for (int digits = 1; digits < 7; digits++) {
        char shorter[32];
        snprintf(shorter, sizeof shorter, "%.*g", digits, (double)x);
        if (strtof(shorter, NULL) == x) return strtod(shorter, NULL);
    }
    return strtod(buf, NULL);
}

json_t *tg_json_model_info(const tg_model_info *in) {
    return json_pack("{s:s, s:s, s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:b, s:i, s:b, "
                     "s:s, s:s}",
                     "architecture", in->architecture, "weight_types", in->weight_types, "n_params",
                     (json_int_t)in->n_params, "weight_bytes", (json_int_t)in->weight_bytes, "n_layers", in->n_layers,
                     "n_heads", in->n_heads, "n_kv_heads", in->n_kv_heads, "head_dim", in->head_dim, "d_model",
                     in->d_model, "ffn_dim", in->ffn_dim, "vocab_size", in->vocab_size, "context_length",
                     in->context_length, "sliding_window", in->sliding_window, "rope_theta",
                     short_float(in->rope_theta),
                     "norm_eps", short_float(in->norm_eps), "tied_embeddings", in->tied_embeddings, "has_weights",
                     in->has_weights, "n_kv_layers", in->n_kv_layers, "has_tokenizer", in->has_tokenizer,
                     "rope_scaling", in->rope_scaling, "absent", in->absent);
}

json_t *tg_json_sampler(const tg_sampler_params *sp) {
    /* a seed beyond JSON's usual integers (above 2^63 - 1) as its decimal string */
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, sp->seed);
    json_t *seed = sp->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)sp->seed) : json_string(digits);
    return json_pack("{s:f, s:i, s:f, s:o, s:f, s:i, s:f}", "temperature", short_float(sp->temperature), "top_k",
                     sp->top_k, "top_p", short_float(sp->top_p), "seed", seed, "repeat_penalty",
                     short_float(sp->repeat_penalty), "repeat_last_n", sp->repeat_last_n, "min_p",
                     short_float(sp->min_p));
}

json_t *tg_json_cache_report(const tg_cache_report *r) {
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                     "policy", r->policy, "position", (json_int_t)r->position, "stored", (json_int_t)r->stored,
                     "capacity", (json_int_t)r->capacity, "n_layers", r->n_layers, "n_kv_layers", r->n_kv_layers,
                     "bytes_total", (json_int_t)r->bytes_total, "bytes_k_data", (json_int_t)r->bytes_k_data,
                     "bytes_v_data", (json_int_t)r->bytes_v_data, "bytes_scales", (json_int_t)r->bytes_scales,
                     "bytes_residual", (json_int_t)r->bytes_residual, "bytes_if_bf16", (json_int_t)r->bytes_if_bf16,
                     "bytes_if_fp32", (json_int_t)r->bytes_if_fp32, "bytes_in_use", (json_int_t)r->bytes_in_use,
                     "quantized", (json_int_t)r->quantized, "sink", (json_int_t)r->sink, "window",
                     (json_int_t)r->window);
    if (o && r->device[0]) /* on a GPU: the bytes there */
        json_object_set_new(o, "device", json_pack("{s:s, s:I, s:I, s:I}", "name", r->device, "kv_bytes",
                                                   (json_int_t)r->device_kv_bytes, "weight_bytes",
                                                   (json_int_t)r->device_weight_bytes, "other_bytes",
                                                   (json_int_t)r->device_other_bytes));
    return o;
}

json_t *tg_json_speed(int64_t n_tokens, double seconds) {
    json_t *rate = n_tokens > 0 && seconds > 0.0 ? json_real((double)n_tokens / seconds) : json_null();
    return json_pack("{s:I, s:f, s:o}", "tokens", (json_int_t)n_tokens, "seconds", seconds, "tokens_per_s", rate);
}

bool tg_json_print(FILE *f, json_t *obj) {
    if (!obj) return false;
    const int rc = json_dumpf(obj, f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(obj);
    return rc == 0 && fputc('\n', f) != EOF && fflush(f) == 0;
}
