/* generate.h — POST /v1/completions and /v1/chat/completions: the request parsed and checked against the server's
 * limits, the prompt rendered (chat) and tokenised, a job handed to the scheduler, and the answer: one JSON object,
 * or server-sent events in OpenAI's chunk format ending with "data: [DONE]". */
#ifndef TG_SERVE_GENERATE_H
#define TG_SERVE_GENERATE_H

#include "serve/http.h"

/* Answers the request body[len] on connection c (queues the response; blocks until the answer or the start of the
 * stream). MHD_NO when the connection should just be closed (the client has gone). */
enum MHD_Result tg_serve_generate(tg_server *srv, struct MHD_Connection *c, tg_serve_kind kind, const char *body,
                                  size_t len);

#endif
