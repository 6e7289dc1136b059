/* session_internal.h — internal to src/api: what tg_generate needs of the session beyond tinygpt.h. */
#ifndef TG_API_SESSION_INTERNAL_H
#define TG_API_SESSION_INTERNAL_H

#include "tinygpt.h"

/* tg_session_eval of one token into logits[vocab], without asking the abort callback (tg_generate asks it once per
 * token itself). */
bool tg_session_eval_token(tg_session *s, int32_t id, float *logits, tg_error *err);

#endif
