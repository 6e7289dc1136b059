/* cache_errors.c — the library's KV cache errors in the tool's terms (cache_errors.h). */
#include "cli/cache_errors.h"

#include <stdio.h>
#include <string.h>

void tg_cli_word_error(tg_error *err, const tg_cache_params *p) {
    if (!err) return;
    char m[2 * sizeof err->msg]; /* room for the library's message and the flags; cut to one tg_error below */
    const long long sink = p ? (long long)p->sink : 0, window = p ? (long long)p->window : 0;
    const long long budget = p ? (long long)p->budget_bytes : 0;
    const int group = p ? p->group_size : 0, residual = p ? p->residual : 0;
    if (err->code == TG_ERR_CONTEXT_FULL) {
        snprintf(m, sizeof m, "%s; use --streaming-llm-window (and --streaming-llm-sink) to keep generating", err->msg);
        m[sizeof err->msg - 1] = '\0';
        memcpy(err->msg, m, sizeof err->msg);
        return;
    }
    if (err->code == TG_ERR_CACHE_MEMORY) {
        snprintf(m, sizeof m, "%s (--max-memory to change the limit)", err->msg);
        m[sizeof err->msg - 1] = '\0';
        memcpy(err->msg, m, sizeof err->msg);
        return;
    }
    if (err->code == TG_ERR_CACHE_MEMORY_LIMIT) {
        const char *lim = strstr(err->msg, "the memory limit ");
        if (!lim) return;
        snprintf(m, sizeof m, "%.*s--max-memory %s", (int)(lim - err->msg), err->msg, lim + strlen("the memory limit "));
        m[sizeof err->msg - 1] = '\0';
        memcpy(err->msg, m, sizeof err->msg);
        return;
    }
    if (!p) return;
    switch (err->code) {
    case TG_ERR_CACHE_KEY_PRECISION:
        snprintf(m, sizeof m, "--kv-quantize-keys: unknown precision %d", (int)p->key_precision);
        break;
    case TG_ERR_CACHE_VALUE_PRECISION:
        snprintf(m, sizeof m, "--kv-quantize-values: unknown precision %d", (int)p->value_precision);
        break;
    case TG_ERR_CACHE_SINK: snprintf(m, sizeof m, "--streaming-llm-sink %lld: must be >= 0", sink); break;
    case TG_ERR_CACHE_WINDOW: snprintf(m, sizeof m, "--streaming-llm-window %lld: must be >= 0", window); break;
    case TG_ERR_CACHE_WINDOW_TOO_LARGE:
        snprintf(m, sizeof m, "--streaming-llm-window %lld: the cache would not fit in memory", window);
        break;
    case TG_ERR_CACHE_BUDGET: snprintf(m, sizeof m, "--kv-budget %lld: must be > 0", budget); break;
    case TG_ERR_CACHE_BUDGET_AND_WINDOW:
        snprintf(m, sizeof m, "--kv-budget and --streaming-llm-window are exclusive: the budget chooses the window");
        break;
    case TG_ERR_CACHE_BUDGET_TOO_SMALL: {
        const char *why = strstr(err->msg, "even ");
        snprintf(m, sizeof m, "--kv-budget %lld: too small; %s", budget, why ? why : err->msg);
        break;
    }
    case TG_ERR_CACHE_SINK_WITHOUT_WINDOW:
        snprintf(m, sizeof m,
                 "--streaming-llm-sink %lld needs --streaming-llm-window (or --kv-budget): without a window nothing is "
                 "evicted", sink);
        break;
    case TG_ERR_CACHE_GROUP_SIZE:
        snprintf(m, sizeof m, "--kv-group-size %d: must be in 0..%d", group, TG_KV_MAX_GROUP_SIZE);
        break;
    case TG_ERR_CACHE_RESIDUAL:
        snprintf(m, sizeof m, "--kv-residual %d: must be in 0..%d", residual, TG_KV_MAX_RESIDUAL);
        break;
    case TG_ERR_CACHE_RESIDUAL_PRECISION:
        snprintf(m, sizeof m, "--kv-residual-precision %s: must be fp32, fp16 or bf16",
                 tg_kv_precision_name(p->residual_precision));
        break;
    case TG_ERR_CACHE_RESIDUAL_NOT_MULTIPLE:
        if (group == TG_KV_GROUP_AUTO)
            snprintf(m, sizeof m, "--kv-residual %d is not a multiple of --kv-group-size %d (its default with a "
                     "residual)", residual, TG_KV_AUTO_GROUP_MAX);
        else
            snprintf(m, sizeof m, "--kv-residual %d is not a multiple of --kv-group-size %d", residual, group);
        break;
    default: return; /* not about the cache's flags */
    }
    m[sizeof err->msg - 1] = '\0';
    memcpy(err->msg, m, sizeof err->msg);
}
