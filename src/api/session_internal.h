/* session_internal.h — internal to src/api: what tg_generate needs of the session beyond tinygpt.h. */
#ifndef TG_API_SESSION_INTERNAL_H
#define TG_API_SESSION_INTERNAL_H

#include "tinygpt.h"

/* tg_session_eval of one token into logits[vocab], without asking the abort callback (tg_generate asks it once per
 * token itself). */
bool tg_session_eval_token(tg_session *s, int32_t id, float *logits, tg_error *err);

/* The session's KV cache (snapshot.c saves and restores it). */
struct tg_kvcache *tg_session_kvcache(tg_session *s);
/* After its cache was restored: the session's history becomes ids[n] (copied) and its position n. False (nothing
 * changed) when memory runs out. */
bool tg_session_set_history(tg_session *s, const int32_t *ids, size_t n, tg_error *err);

#endif
