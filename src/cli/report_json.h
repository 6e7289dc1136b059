/* report_json.h — the tool's reports as JSON objects (`sample --json`, `info --json`): the model's description, the
 * sampling settings and the cache report with the field names of tinygpt.h. */
#ifndef TG_CLI_REPORT_JSON_H
#define TG_CLI_REPORT_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "tinygpt.h"

/* Each returns a new object (NULL when memory runs out). */
json_t *tg_json_model_info(const tg_model_info *info);
json_t *tg_json_sampler(const tg_sampler_params *sp);
json_t *tg_json_cache_report(const tg_cache_report *r);
/* {"tokens": n, "seconds": s, "tokens_per_s": n / s (null when s is 0)} */
json_t *tg_json_speed(int64_t n_tokens, double seconds);

/* Writes obj as one line of JSON and a newline to f, and releases it. False when obj is NULL (memory ran out) or
 * writing fails. */
bool tg_json_print(FILE *f, json_t *obj);

#endif
