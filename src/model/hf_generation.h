/* hf_generation.h — what a Hugging Face folder says about generating: the BOS id and the end-of-sequence ids of
 * config.json and generation_config.json, and generation_config.json's sampling settings. */
#ifndef TG_MODEL_HF_GENERATION_H
#define TG_MODEL_HF_GENERATION_H

#include <jansson.h>
#include <stdbool.h>

#include "model/model.h"

/* Reads config.json's (config, parsed from config_path) bos_token_id into m->config_bos and eos_token_id (an id or
 * a list) into m's end-of-sequence ids, then the optional generation_config.json of dir: its eos_token_id the same
 * way, and temperature / top_k / top_p into m->gen unless "do_sample" is false. config may be NULL (no
 * config.json read). Ids at or beyond vocab_size (when > 0) can never be produced and are left out. False with a
 * message naming the file and key for a value of the wrong type or range. */
bool tg_hf_read_generation(struct tg_model *m, const char *dir, const json_t *config, const char *config_path,
                           int vocab_size, tg_error *err);

#endif
