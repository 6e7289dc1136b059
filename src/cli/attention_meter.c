/* attention_meter.c — the attention-sink meter's totals and their reports (attention_meter.h). */
#include "cli/attention_meter.h"

#include <inttypes.h>
#include <stdlib.h>

bool tg_attention_totals_init(tg_attention_totals *t, int n_layers, int n_heads) {
    *t = (tg_attention_totals){.n_layers = n_layers, .n_heads = n_heads};
    const size_t L = n_layers > 0 ? (size_t)n_layers : 0, H = n_heads > 0 ? (size_t)n_heads : 0;
    t->share_sum = calloc(L * H * TG_ATTN_RANGES + 1, sizeof *t->share_sum);
    t->queries = calloc(L + 1, sizeof *t->queries);
    t->skipped = calloc(L + 1, sizeof *t->skipped);
    if (t->share_sum && t->queries && t->skipped) return true;
    tg_attention_totals_free(t);
    return false;
}

void tg_attention_totals_free(tg_attention_totals *t) {
    free(t->share_sum);
    free(t->queries);
    free(t->skipped);
    *t = (tg_attention_totals){0};
}

void tg_attention_totals_add(tg_attention_totals *t, const tg_attention_stats *s) {
    if (s->n_layers != t->n_layers || s->n_heads != t->n_heads) return;
    const size_t n = (size_t)t->n_layers * (size_t)t->n_heads * TG_ATTN_RANGES;
    for (size_t i = 0; i < n; i++) t->share_sum[i] += s->share_sum[i];
    for (int l = 0; l < t->n_layers; l++) {
        t->queries[l] += s->queries[l];
        t->skipped[l] += s->skipped[l];
    }
}

/* Mean share of range r for head h of layer l (0 when no query was summed). */
static double mean_share(const tg_attention_totals *t, int l, int h, int r) {
    const int64_t q = t->queries[l];
    return q > 0 ? t->share_sum[((size_t)l * (size_t)t->n_heads + (size_t)h) * TG_ATTN_RANGES + (size_t)r] / (double)q
                 : 0.0;
}

void tg_attention_totals_print(FILE *f, const tg_attention_totals *t) {
    double mean[TG_ATTN_RANGES] = {0};
    int heads = 0, sink_heads = 0;
    int64_t queries = 0, skipped = 0;
    for (int l = 0; l < t->n_layers; l++) {
        queries += t->queries[l];
        skipped += t->skipped[l];
        if (t->queries[l] == 0) continue;
        for (int h = 0; h < t->n_heads; h++) {
            for (int r = 0; r < TG_ATTN_RANGES; r++) mean[r] += mean_share(t, l, h, r);
            sink_heads += mean_share(t, l, h, 1) > TG_SINK_HEAD_SHARE;
            heads++;
        }
    }
    for (int r = 0; r < TG_ATTN_RANGES && heads > 0; r++) mean[r] /= heads;
    fprintf(f,
            "attn_summary    mean over %d heads: first1 %.3f first4 %.3f first16 %.3f newest16 %.3f; sink heads "
            "(> %.0f %% on the first 4): %d of %d\n",
            heads, mean[0], mean[1], mean[2], mean[3], 100.0 * TG_SINK_HEAD_SHARE, sink_heads, heads);
    fprintf(f,
            "attn_queries    %" PRId64 " summed over %d layers (queries seeing >= 32 tokens), %" PRId64
            " not summed\n",
            queries, t->n_layers, skipped);
    fprintf(f, "attn_head       layer head first1 first4 first16 newest16\n");
    for (int l = 0; l < t->n_layers; l++)
        for (int h = 0; h < t->n_heads; h++)
            fprintf(f, "attn_head       %d %d %.4f %.4f %.4f %.4f\n", l, h, mean_share(t, l, h, 0),
                    mean_share(t, l, h, 1), mean_share(t, l, h, 2), mean_share(t, l, h, 3));
}

bool tg_attention_totals_csv(FILE *f, const tg_attention_totals *t) {
    if (fputs("layer,head,queries,first1,first4,first16,newest16\n", f) < 0) return false;
    for (int l = 0; l < t->n_layers; l++)
        for (int h = 0; h < t->n_heads; h++)
            if (fprintf(f, "%d,%d,%" PRId64 ",%.6f,%.6f,%.6f,%.6f\n", l, h, t->queries[l], mean_share(t, l, h, 0),
                        mean_share(t, l, h, 1), mean_share(t, l, h, 2), mean_share(t, l, h, 3)) < 0)
                return false;
    return true;
}
