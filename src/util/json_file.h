/* json_file.h — a JSON file of a model folder, read through model_file.h (non-blocking, regular files only, size
 * capped) and parsed from memory, so that jansson never opens a path itself. */
#ifndef TG_UTIL_JSON_FILE_H
#define TG_UTIL_JSON_FILE_H

#include <jansson.h>
#include <stdbool.h>

#include "tinygpt.h"

/* Parses len bytes of JSON text like json_loadb, except that an integer literal outside json_int_t's range
 * (transformers writes "model_max_length": 1000000000000000019884624838656, its "no limit") is read as a real of
 * the same value instead of failing with "too big integer"; every integer in range stays an integer. Columns in
 * je after such a literal on its line are off by 2 per literal. */
json_t *tg_json_parse(const char *text, size_t len, size_t flags, json_error_t *je);

/* Parses the JSON file path with jansson flags (JSON_REJECT_DUPLICATES, JSON_ALLOW_NUL, ...). NULL with err naming
 * the path on any failure: the open errors of tg_file_open_regular ("is a directory", "not a regular file (a
 * FIFO)"), a file over TG_JSON_MAX_BYTES, integers of any size as tg_json_parse, or "bad JSON at line L, column C: <jansson's reason>". *missing (may be
 * NULL) tells that the file does not exist. The caller json_decref's the result. */
json_t *tg_json_load_path(const char *path, size_t flags, bool *missing, tg_error *err);

#endif
