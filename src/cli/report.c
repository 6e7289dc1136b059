/* report.c — the banner and the after-run report that `tinygpt sample` prints on stderr, and the byte / count
 * formats shared with `tinygpt info`. */
#include "cli/report.h"

#include <inttypes.h>
#include <string.h>

/* The binary unit for a byte count: index into "B", "KiB", "MiB", "GiB", "TiB" and its divisor. */
static int unit_of(double bytes, double *div) {
    int u = 0;
    *div = 1.0;
    while (u < 4 && bytes >= 1024.0 * *div) {
        *div *= 1024.0;
        u++;
    }
    return u;
}

static const char *const UNITS[] = {"B", "KiB", "MiB", "GiB", "TiB"};

void tg_fmt_bytes(double bytes, int decimals, char *buf, size_t cap) {
    double div;
    int u = unit_of(bytes, &div);
    if (u == 0) snprintf(buf, cap, "%.0f B", bytes);
    else snprintf(buf, cap, "%.*f %s", decimals, bytes / div, UNITS[u]);
}

void tg_fmt_count(int64_t n, char *buf, size_t cap) {
    if (n < 1000) snprintf(buf, cap, "%" PRId64, n);
    else if (n < 1000000) snprintf(buf, cap, "%.2fK", (double)n / 1e3);
    else if (n < 1000000000) snprintf(buf, cap, "%.2fM", (double)n / 1e6);
    else snprintf(buf, cap, "%.2fB", (double)n / 1e9);
}

void tg_report_banner(FILE *f, const char *model_path, const tg_model_info *info, const tg_cache_report *r,
                      const tg_sampler_params *sp, int threads) {
    char params[32];
    tg_fmt_count(info->n_params, params, sizeof params);
    fprintf(f, "tinygpt: model %s · %s · %s params · %s · %d layers · context %d\n", model_path, info->architecture,
            params, info->weight_types, info->n_layers, info->context_length);
    fprintf(f, "tinygpt: cache %s\n", r->policy);
    char extra[160] = ""; /* the repeat penalty and min-p, only when on */
    if (sp->repeat_penalty > 0.0f && sp->repeat_penalty != 1.0f && sp->repeat_last_n > 0)
        snprintf(extra, sizeof extra, " · repeat-penalty %g over %d", (double)sp->repeat_penalty, sp->repeat_last_n);
    if (sp->min_p > 0.0f && sp->temperature > 0.0f) {
        size_t used = strlen(extra);
        snprintf(extra + used, sizeof extra - used, " · min-p %g", (double)sp->min_p);
    }
    if (sp->temperature <= 0.0f) {
        fprintf(f, "tinygpt: sampling greedy (temperature 0)%s · seed %" PRIu64 " · threads %d\n", extra, sp->seed,
                threads);
    } else {
        fprintf(f, "tinygpt: sampling temperature %g · top-k %d%s · top-p %g%s%s · seed %" PRIu64 " · threads %d\n",
                (double)sp->temperature, sp->top_k, sp->top_k == 0 ? " (off)" : "", (double)sp->top_p,
                sp->top_p >= 1.0f ? " (off)" : "", extra, sp->seed, threads);
    }
}

void tg_report_speed(FILE *f, const char *what, int64_t n_tokens, double seconds) {
    if (n_tokens > 0 && seconds > 0.0) {
        fprintf(f, "%s: %" PRId64 " tokens in %.3f s (%.1f tokens/s)\n", what, n_tokens, seconds,
                (double)n_tokens / seconds);
    } else {
        fprintf(f, "%s: %" PRId64 " tokens\n", what, n_tokens);
    }
}

void tg_report_cache(FILE *f, const tg_cache_report *r) {
    if (r->stored != r->position) {
        fprintf(f, "cache: stored %" PRId64 " of %" PRId64 " tokens (StreamingLLM cap) · %d layers, %d hold K/V\n",
                r->stored, r->position, r->n_layers, r->n_kv_layers);
    } else {
        fprintf(f, "cache: %" PRId64 " tokens · %d layers, %d hold K/V\n", r->stored, r->n_layers, r->n_kv_layers);
    }
    /* The parts in the unit of the total, so that they visibly add up. The buffers are allocated for
     * `allocated_for` tokens (all of them up front, or the chunks an unbounded cache has grown by), so the per-token
     * figure is for that many tokens too. */
    double div;
    int u = unit_of((double)r->bytes_total, &div);
    int dec = u == 0 ? 0 : 2;
    fprintf(f, "cache: %.*f %s allocated for %" PRId64, dec, (double)r->bytes_total / div, UNITS[u], r->allocated_for);
    if (r->chunk_tokens > 0) fprintf(f, " of %" PRId64, r->capacity);
    fprintf(f, " tokens = K %.*f + V %.*f", dec, (double)r->bytes_k_data / div, dec, (double)r->bytes_v_data / div);
    if (r->bytes_scales > 0) fprintf(f, " + scales %.*f", dec, (double)r->bytes_scales / div);
    if (r->bytes_residual > 0) fprintf(f, " + full-precision residual/sinks %.*f", dec, (double)r->bytes_residual / div);
    if (r->allocated_for > 0) {
        char per[32];
        tg_fmt_bytes((double)r->bytes_total / (double)r->allocated_for, 1, per, sizeof per);
        fprintf(f, " · %s/token", per);
    }
    if (r->chunk_tokens > 0 && r->allocated_for < r->capacity) /* room left to grow into */
        fprintf(f, " (grows by %" PRId64 " tokens)", r->chunk_tokens);
    if (r->bytes_if_bf16 > 0) {
        /* what caches of those precisions with the same sinks, window and context allocate */
        char bf16[32], fp32[32];
        tg_fmt_bytes((double)r->bytes_if_bf16, 2, bf16, sizeof bf16);
        tg_fmt_bytes((double)r->bytes_if_fp32, 2, fp32, sizeof fp32);
        fprintf(f, " · bf16 would be %s (%.2fx), fp32 %s", bf16, (double)r->bytes_total / (double)r->bytes_if_bf16,
                fp32);
    }
    fputc('\n', f);
    if (r->device[0]) {
        char kv[32], w[32], o[32];
        tg_fmt_bytes((double)r->device_kv_bytes, 2, kv, sizeof kv);
        tg_fmt_bytes((double)r->device_weight_bytes, 2, w, sizeof w);
        tg_fmt_bytes((double)r->device_other_bytes, 2, o, sizeof o);
        fprintf(f, "cache: on device %s: its K/V stores %s · weights %s · activations and tables %s\n", r->device,
                kv, w, o);
    }
    if (r->stored > 0 && r->bytes_in_use > 0) {
        char use[32];
        tg_fmt_bytes((double)r->bytes_in_use, 2, use, sizeof use);
        fprintf(f, "cache: in use %" PRId64 " of %" PRId64 " tokens = %s (a cache sized for the tokens held)",
                r->stored, r->capacity, use);
        fputc('\n', f);
    }
}
