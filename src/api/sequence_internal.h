/* sequence_internal.h — internal to src/api: what the snapshot code needs of a tg_sequence beyond tinygpt.h. */
#ifndef TG_API_SEQUENCE_INTERNAL_H
#define TG_API_SEQUENCE_INTERNAL_H

#include "tinygpt.h"

/* The model the sequence was made for. */
const tg_model *tg_sequence_model(const tg_sequence *q);
/* The sequence's KV cache (snapshot.c saves and restores it). */
struct tg_kvcache *tg_sequence_kvcache(tg_sequence *q);
/* After its cache was restored: the sequence's position becomes pos. */
void tg_sequence_set_position(tg_sequence *q, int64_t pos);
/* Empties the cache and puts the position back to 0 (after a failed restore). */
void tg_sequence_empty(tg_sequence *q);

#endif
