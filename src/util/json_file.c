/* json_file.c — a JSON file of a model folder, read into memory and parsed with json_loadb; integer literals
 * beyond jansson's json_int_t (transformers' "no limit" 1000000000000000019884624838656) become reals first. */
#include "util/json_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/model_file.h"

/* Whether the integer literal s[0, n) ('-'? digits) lies outside [INT64_MIN, INT64_MAX], jansson's json_int_t
 * (strtoll would fail with "too big integer"). */
static bool int_literal_overflows(const char *s, size_t n) {
    const bool neg = n > 0 && s[0] == '-';
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (size_t i = neg; i < n; i++) {
        const uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (limit - d) / 10u) return true;
        v = v * 10u + d;
    }
    return false;
}

/* Walks the JSON text outside its strings and calls mark(ctx, end) at the end of every integer literal (no '.',
 * 'e' or 'E') too large for json_int_t; returns how many there are. Digits outside strings only occur in numbers
 * (true / false / null have none), so no full parse is needed; malformed text is left for jansson to report. */
static size_t find_big_ints(const char *text, size_t len, void (*mark)(void *ctx, size_t end), void *ctx) {
    size_t count = 0;
    for (size_t i = 0; i < len;) {
        const char ch = text[i];
        if (ch == '"') { /* skip the string, escapes included */
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
            i++;
            continue;
        }
        if (ch != '-' && !(ch >= '0' && ch <= '9')) {
            i++;
            continue;
        }
        const size_t start = i;
        i += ch == '-';
        while (i < len && text[i] >= '0' && text[i] <= '9') i++;
        const bool real = i < len && (text[i] == '.' || text[i] == 'e' || text[i] == 'E');
        if (!real && i - start > 18 && int_literal_overflows(text + start, i - start)) {
            count++;
            if (mark) mark(ctx, i);
        }
        while (i < len && (text[i] == '.' || text[i] == 'e' || text[i] == 'E' || text[i] == '+' || text[i] == '-' ||
                           (text[i] >= '0' && text[i] <= '9')))
            i++;
    }
    return count;
}

typedef struct {
    const char *src;
    char *dst;
    size_t copied, written; /* bytes of src copied so far / bytes written to dst */
} widen_ctx;

/* Copies src up to `end` (the end of a big integer literal) and appends ".0", making the literal a real. */
static void widen_at(void *ctx, size_t end) {
    widen_ctx *w = ctx;
    memcpy(w->dst + w->written, w->src + w->copied, end - w->copied);
    w->written += end - w->copied;
    memcpy(w->dst + w->written, ".0", 2);
    w->written += 2;
    w->copied = end;
}

json_t *tg_json_parse(const char *text, size_t len, size_t flags, json_error_t *je) {
    const size_t n_big = find_big_ints(text, len, NULL, NULL);
    if (n_big == 0) return json_loadb(text, len, flags, je);
    size_t cap = 0;
    char *copy = tg_mul_size(n_big, 2, &cap) && tg_add_size(cap, len, &cap) ? malloc(cap) : NULL;
    if (!copy) {
        memset(je, 0, sizeof *je);
        strcpy(je->text, "out of memory");
        return NULL;
    }
    widen_ctx w = {text, copy, 0, 0};
    find_big_ints(text, len, widen_at, &w);
    memcpy(copy + w.written, text + w.copied, len - w.copied);
    json_t *root = json_loadb(copy, cap, flags, je);
    free(copy);
    return root;
}

json_t *tg_json_load_path(const char *path, size_t flags, bool *missing, tg_error *err) {
    char *text;
    size_t len;
    if (!tg_file_read_all(path, TG_JSON_MAX_BYTES, &text, &len, missing, err)) return NULL;
    json_error_t je;
    json_t *root = tg_json_parse(text, len, flags, &je);
    free(text);
    if (!root) tg_fail(err, "%s: bad JSON at line %d, column %d: %s", path, je.line, je.column, je.text);
    return root;
}
