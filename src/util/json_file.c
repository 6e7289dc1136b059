/* json_file.c — a JSON file of a model folder, read into memory and parsed with json_loadb. */
#include "util/json_file.h"

#include <stdlib.h>

#include "util/error.h"
#include "util/model_file.h"

json_t *tg_json_load_path(const char *path, size_t flags, bool *missing, tg_error *err) {
    char *text;
    size_t len;
    if (!tg_file_read_all(path, TG_JSON_MAX_BYTES, &text, &len, missing, err)) return NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, flags, &je);
    free(text);
    if (!root) tg_fail(err, "%s: bad JSON at line %d, column %d: %s", path, je.line, je.column, je.text);
    return root;
}
