/* attention_meter.h — `tinygpt perplexity --attention-stats`: the attention-sink meter's totals over the sessions of
 * an evaluation, printed per layer and head, as one summary line, and as CSV (docs/kvcache.md, "The attention-sink
 * meter"). */
#ifndef TG_CLI_ATTENTION_METER_H
#define TG_CLI_ATTENTION_METER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tinygpt.h"

/* A head counts as a sink head when more than this share of its mass is on the first 4 visible tokens. */
#define TG_SINK_HEAD_SHARE 0.5

typedef struct {
    int n_layers, n_heads;
    double *share_sum;  /* [n_layers][n_heads][TG_ATTN_RANGES] */
    int64_t *queries;   /* [n_layers] */
    int64_t *skipped;   /* [n_layers] */
} tg_attention_totals;

/* Zeroed totals for a model of n_layers x n_heads; false when memory runs out. */
bool tg_attention_totals_init(tg_attention_totals *t, int n_layers, int n_heads);
void tg_attention_totals_free(tg_attention_totals *t);
/* Adds a session's meter sums (tg_session_attention_stats) to t. */
void tg_attention_totals_add(tg_attention_totals *t, const tg_attention_stats *s);
/* The summary line and one line per layer and head (mean shares) on f. */
void tg_attention_totals_print(FILE *f, const tg_attention_totals *t);
/* CSV to f: a header, then layer,head,queries,first1,first4,first16,newest16 per head; false on a write error. */
bool tg_attention_totals_csv(FILE *f, const tg_attention_totals *t);

#endif
