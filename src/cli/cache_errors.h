/* cache_errors.h — the library's KV cache errors in the tool's terms: the flags that set what went wrong. */
#ifndef TG_CLI_CACHE_ERRORS_H
#define TG_CLI_CACHE_ERRORS_H

#include "tinygpt.h"

/* Rewrites err->msg to name the flags when err->code is about the cache policy (p: the policy the flags gave; NULL
 * leaves such messages as they are) or a full context; any other error is left alone. */
void tg_cli_word_error(tg_error *err, const tg_cache_params *p);

#endif
